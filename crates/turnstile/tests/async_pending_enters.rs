//! The async gate's pending enters: every way out of a pending enter leaves the core's counts
//! and the gate's gauges exact; a raise made at the worst moments still wakes a sleeper; a
//! hand-off wakes the waker of the latest poll. Manual wakers, no runtime, no timing.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use turnstile::{AsyncSession, Gate, GateConfig, Policy, SessionState, SleepFuture, Sleeper};

#[path = "common/manual_waker.rs"]
mod manual_waker;
use manual_waker::Task;

fn never_sleeper() -> Sleeper {
    Sleeper::new(|_| Box::pin(std::future::pending()) as SleepFuture)
}

fn admit_now(s: &mut AsyncSession) {
    let t = Task::new();
    let mut f = s.enter();
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
}

/// inside, queued, sleeping, waiting, fifo_pending, lifo_running.
fn gauges(gate: &Gate) -> (u32, u32, u32, u32, u32, u32) {
    let st = gate.stats();
    (
        st.inside,
        st.queued,
        st.sleeping,
        st.waiting,
        st.fifo_pending,
        st.lifo_running,
    )
}

fn state(gate: &Gate, label: &str) -> SessionState {
    gate.snapshot()
        .sessions
        .into_iter()
        .find(|s| s.label == label)
        .unwrap()
        .state
}

#[test]
fn a_hand_off_wakes_the_waker_of_the_latest_poll() {
    let gate = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(1)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    admit_now(&mut a);
    let (t1, t2) = (Task::new(), Task::new());
    let mut f = b.enter();
    assert!(t1.poll(&mut f).is_pending());
    // The enter moves to another task (will_wake is false): the new waker replaces the old.
    assert!(t2.poll(&mut f).is_pending());
    a.end_statement();
    assert_eq!((t1.wakes(), t2.wakes()), (0, 1));
    assert!(matches!(t2.poll(&mut f), Poll::Ready(Ok(_))));
}

/// Every policy that sleeps or yields, dropped at every pending poll of its enter: nothing
/// counted is left behind, and the session is shown outside.
#[test]
fn dropping_a_pending_enter_at_any_poll_leaves_every_gauge_exact() {
    let configs = [
        GateConfig::new(Policy::Classic).limit(1).tickets(1),
        GateConfig::new(Policy::Flifo).limit(1).tickets(1),
        GateConfig::new(Policy::Polling).limit(1).tickets(1),
        GateConfig::new(Policy::Polling)
            .limit(1)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
        GateConfig::new(Policy::Timer).limit(1).tickets(1),
    ];
    let instant = Sleeper::new(|_| Box::pin(std::future::ready(())) as SleepFuture);
    for config in configs {
        for sleeper in [never_sleeper(), instant.clone()] {
            for polls in 1..6 {
                let gate = Gate::new(config).unwrap();
                let mut a = gate.async_session_with_sleeper("a", sleeper.clone());
                let mut b = gate.async_session_with_sleeper("b", sleeper.clone());
                admit_now(&mut a);
                let t = Task::new();
                let mut f = b.enter();
                let mut ready = false;
                for _ in 0..polls {
                    if t.poll(&mut f).is_ready() {
                        ready = true;
                        break;
                    }
                }
                drop(f);
                if !ready {
                    assert_eq!(
                        gauges(&gate),
                        (1, 0, 0, 0, 0, 0),
                        "{:?} after {polls} polls",
                        config.policy
                    );
                    assert_eq!(state(&gate, "b"), SessionState::Outside);
                    assert_eq!(gate.stats().counters.cancellations, 1);
                }
                b.end_statement();
                a.end_statement();
                assert_eq!(gauges(&gate), (0, 0, 0, 0, 0, 0), "{:?}", config.policy);
            }
        }
    }
}

/// A sleep future that panics (and a sleeper that panics making one): the enter is dropped
/// while unwinding, and the sleep it was counted in is abandoned.
#[test]
fn a_panicking_sleeper_leaves_nothing_counted() {
    for in_closure in [false, true] {
        let gate = Gate::new(GateConfig::new(Policy::Polling).limit(1).tickets(1)).unwrap();
        let sleeper = if in_closure {
            Sleeper::new(|_| panic!("no timer"))
        } else {
            Sleeper::new(|_| {
                Box::pin(std::future::poll_fn(|_| -> Poll<()> {
                    panic!("timer broke")
                })) as SleepFuture
            })
        };
        let mut a = gate.async_session_with_sleeper("a", sleeper.clone());
        let mut b = gate.async_session_with_sleeper("b", sleeper);
        admit_now(&mut a);
        let t = Task::new();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut f = b.enter();
            let _ = t.poll(&mut f);
        }));
        assert!(r.is_err());
        assert_eq!(gauges(&gate), (1, 0, 0, 0, 0, 0), "closure {in_closure}");
        assert_eq!(state(&gate, "b"), SessionState::Outside);
    }
}

/// A raise made inside the sleeper (after the policy decided to sleep, before the enter
/// registered its waker) is seen by the enter's own check.
#[test]
fn a_raise_between_the_decision_and_the_registration_is_seen() {
    let gate = Gate::new(GateConfig::new(Policy::Polling).limit(1).tickets(1)).unwrap();
    let g = Mutex::new(Some(gate.clone()));
    let sleeper = Sleeper::new(move |_| {
        if let Some(g) = g.lock().unwrap().take() {
            g.set_limit(2).unwrap();
        }
        Box::pin(std::future::pending()) as SleepFuture
    });
    let mut a = gate.async_session_with_sleeper("a", never_sleeper());
    let mut b = gate.async_session_with_sleeper("b", sleeper);
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    assert!(t.wakes() >= 1, "the task is told to poll again");
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
}

/// A raise made while the sleep future is polled (after the registration and the check)
/// wakes the registered waker.
#[test]
fn a_raise_after_the_check_wakes_the_registered_waker() {
    let gate = Gate::new(GateConfig::new(Policy::Polling).limit(1).tickets(1)).unwrap();
    let g = gate.clone();
    let sleeper = Sleeper::new(move |_| {
        let g = Mutex::new(Some(g.clone()));
        Box::pin(std::future::poll_fn(move |_| {
            if let Some(g) = g.lock().unwrap().take() {
                g.set_limit(2).unwrap();
            }
            Poll::Pending
        })) as SleepFuture
    });
    let mut a = gate.async_session_with_sleeper("a", never_sleeper());
    let mut b = gate.async_session_with_sleeper("b", sleeper);
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    assert_eq!(t.wakes(), 1, "the raise woke the sleeper");
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
}

/// A waker that runs a closure when woken (once).
struct OnWake(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Wake for OnWake {
    fn wake(self: Arc<Self>) {
        if let Some(f) = self.0.lock().unwrap().take() {
            f();
        }
    }
}

/// A hand-off whose delivery is still in flight when its enter is dropped (a raise releases
/// x and y; y is cancelled from x's waker, before y's delivery, and enters again): the slot
/// y was handed passes on once (to w), y's next enter queues, the late delivery only wakes it
/// spuriously, and its own hand-off admits it.
#[test]
fn a_late_delivery_to_a_cancelled_enter_neither_loses_nor_doubles_a_slot() {
    let gate = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(1)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let mut a = gate.async_session("a").unwrap();
    let mut x = gate.async_session("x").unwrap();
    let mut w = gate.async_session("w").unwrap();
    // y is reached from x's waker: leaked, and addressed by a plain number (test only).
    let y_addr = Box::into_raw(Box::new(gate.async_session("y").unwrap())) as usize;
    // SAFETY: y lives for the rest of the process; each borrow below ends before the next.
    let y = || unsafe { &mut *(y_addr as *mut AsyncSession) };
    admit_now(&mut a);
    let (ty, tw) = (Task::new(), Task::new());
    let ty2 = Arc::new(Task::new());
    let fy_slot = Arc::new(Mutex::new(None));
    let fy2_slot = Arc::new(Mutex::new(None));
    let xw: Waker = {
        let (fy_slot, fy2_slot, ty2, gate) =
            (fy_slot.clone(), fy2_slot.clone(), ty2.clone(), gate.clone());
        Arc::new(OnWake(Mutex::new(Some(Box::new(move || {
            // y's release is made (under the queue lock) but not yet delivered.
            drop(fy_slot.lock().unwrap().take()); // cancel: y passes its slot to w
            assert_eq!(gate.stats().queued, 0);
            // SAFETY: y was leaked above, so the pointer stays valid; the only other borrow of
            // it, y's first enter future, was dropped on the line before, so this is the one
            // live reference to y while `f2` exists.
            let mut f2 = unsafe { &mut *(y_addr as *mut AsyncSession) }.enter();
            assert!(
                ty2.poll(&mut f2).is_pending(),
                "the gate is full: y queues again"
            );
            *fy2_slot.lock().unwrap() = Some(f2);
        })
            as Box<dyn FnOnce() + Send>))))
        .into()
    };
    let mut fx = x.enter();
    assert!(Pin::new(&mut fx)
        .poll(&mut Context::from_waker(&xw))
        .is_pending());
    let mut fy = y().enter();
    assert!(ty.poll(&mut fy).is_pending());
    *fy_slot.lock().unwrap() = Some(fy);
    let mut fw = w.enter();
    assert!(tw.poll(&mut fw).is_pending());
    assert_eq!(gate.stats().queued, 3);

    gate.set_limit(3).unwrap(); // releases x and y; x's waker runs before y's delivery
    assert_eq!(tw.wakes(), 1, "y's slot went to w");
    assert_eq!(ty.wakes(), 0, "y's first waker was dropped with its enter");
    assert_eq!(
        ty2.wakes(),
        1,
        "the late delivery woke y's new enter (spuriously)"
    );
    let mut fy2 = fy2_slot.lock().unwrap().take().unwrap();
    assert!(
        ty2.poll(&mut fy2).is_pending(),
        "the late delivery is not y's new wait's"
    );
    // a, x, w inside (x and w released, not yet polled); y queued; x, w, y waiting.
    assert_eq!(gauges(&gate), (3, 1, 0, 3, 0, 0));
    assert!(matches!(
        Pin::new(&mut fx).poll(&mut Context::from_waker(&xw)),
        Poll::Ready(Ok(_))
    ));
    drop(fx);
    assert!(matches!(tw.poll(&mut fw), Poll::Ready(Ok(_))));
    drop(fw);
    x.end_statement();
    assert_eq!(ty2.wakes(), 2, "x's exit hands its slot to y's new wait");
    assert!(matches!(ty2.poll(&mut fy2), Poll::Ready(Ok(_))));
    drop(fy2);
    for s in [&mut a, &mut w, y()] {
        s.end_statement();
    }
    assert_eq!(gauges(&gate), (0, 0, 0, 0, 0, 0));
    let c = gate.stats().counters;
    assert_eq!((c.admissions, c.cancellations), (4, 1));
}

#[test]
fn an_enter_polled_after_completion_panics_and_a_completed_one_drops_cleanly() {
    let gate = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(1)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let mut a = gate.async_session("a").unwrap();
    let t = Task::new();
    let mut f = a.enter();
    let call = match t.poll(&mut f) {
        Poll::Ready(Ok(c)) => c,
        other => panic!("{other:?}"),
    };
    drop(call);
    let again = catch_unwind(AssertUnwindSafe(|| t.poll(&mut f).is_ready()));
    assert!(
        again.is_err(),
        "polled after completion: a panic, not a second admission"
    );
    drop(f);
    assert_eq!(gauges(&gate), (1, 0, 0, 0, 0, 0));
    assert_eq!(gate.stats().counters.admissions, 1);
    a.end_statement();
    assert_eq!(gauges(&gate), (0, 0, 0, 0, 0, 0));
}

/// A waker that panics when woken: foreign code the gate must survive.
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a foreign waker panics");
    }
}

#[test]
fn a_session_whose_exit_meets_a_panicking_waker_is_still_retired_and_its_slot_handed_on() {
    // The thread session's drop gives its slot to the queued async session, whose waker
    // panics; the panic goes on out of the drop, but the session must leave the registry
    // (it stayed listed, and counted in `sessions`, for ever) and the slot must have moved.
    let gate = Gate::new(GateConfig::new(Policy::Auto).limit(1).adaptive_limit(false)).unwrap();
    let mut holder = gate.session();
    holder.enter().unwrap();
    let mut waiter = gate.async_session("waiter").unwrap();
    let waker = Waker::from(Arc::new(PanickingWaker));
    let mut enter = Box::pin(waiter.enter());
    assert!(enter
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(gate.stats().sessions, 2);
    let r = catch_unwind(AssertUnwindSafe(|| drop(holder)));
    assert!(r.is_err(), "the waker's panic reached the dropping thread");
    let s = gate.stats();
    assert_eq!(s.sessions, 1, "the dropped session is no longer listed");
    assert_eq!(s.inside, 1, "the slot went to the waiter");
    // The waiter was released before its waker panicked: polled again, it is admitted.
    assert!(matches!(Task::new().poll(&mut enter), Poll::Ready(Ok(_))));
    drop(enter);
    drop(waiter);
    let s = gate.stats();
    assert_eq!((s.sessions, s.inside, s.waiting), (0, 0, 0));
}
