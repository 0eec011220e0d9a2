//! The async session's future logic, driven by hand with a counting waker (no runtime): the
//! ticket fast path, the hand-off to a waker, cancellation in every waiting place, the sleeper
//! and the refusal without one.

use std::task::Poll;
use std::time::Duration;

use turnstile::{
    AsyncSession, Gate, GateConfig, GateError, Policy, SessionState, SleepFuture, Sleeper,
};

#[path = "common/manual_waker.rs"]
mod manual_waker;
use manual_waker::Task;

fn queue_gate(policy: Policy, limit: u32, tickets: u32) -> Gate {
    Gate::new(GateConfig::new(policy).innodb_settings(limit, tickets, Duration::ZERO)).unwrap()
}

/// A timer that never fires: only a raise of the limit or a drop ends its sleep.
fn never_sleeper() -> Sleeper {
    Sleeper::new(|_| Box::pin(std::future::pending()) as SleepFuture)
}

/// A timer that fires at once (its sleep is over at the first poll).
fn instant_sleeper() -> Sleeper {
    Sleeper::new(|_| Box::pin(std::future::ready(())) as SleepFuture)
}

/// Admits `s` at its first poll (the gate has room) and keeps it inside.
fn admit_now(s: &mut AsyncSession) {
    let t = Task::new();
    let mut f = s.enter();
    match t.poll(&mut f) {
        Poll::Ready(Ok(call)) => assert!(call.admitted()),
        other => panic!("expected an admission at once, got {other:?}"),
    }
}

#[test]
fn a_re_entry_with_tickets_is_ready_at_first_poll_and_keeps_the_slot() {
    let gate = queue_gate(Policy::Classic, 1, 3);
    let mut s = gate.async_session("a").unwrap();
    let t = Task::new();
    let calls: Vec<bool> = (0..4)
        .map(|_| match t.poll(&mut s.enter()) {
            Poll::Ready(Ok(call)) => call.admitted(),
            other => panic!("never waits with room or tickets: {other:?}"),
        })
        .collect();
    // Admission (3 tickets), then three re-entries; the last spends the last ticket and its
    // drop leaves the gate.
    assert_eq!(calls, [true, false, false, false]);
    assert_eq!(gate.stats().inside, 0);
    let c = gate.stats().counters;
    assert_eq!((c.admissions, c.ticket_reentries), (1, 3));
    assert_eq!(t.wakes(), 0);
}

#[test]
fn end_statement_frees_a_slot_kept_by_tickets() {
    let gate = queue_gate(Policy::Classic, 1, 10);
    let mut s = gate.async_session("a").unwrap();
    admit_now(&mut s);
    assert!(s.is_inside());
    assert_eq!(s.tickets(), 10);
    assert_eq!(
        gate.snapshot().sessions[0].state,
        SessionState::DeclaredInside
    );
    s.end_statement();
    assert!(!s.is_inside());
    assert_eq!(gate.stats().inside, 0);
}

#[test]
fn dropping_the_session_leaves_the_gate_and_hands_the_slot_on() {
    let gate = queue_gate(Policy::Classic, 1, 10);
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    drop(a);
    assert_eq!(t.wakes(), 1);
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
    drop(f);
    assert_eq!(gate.stats().sessions, 1);
}

#[test]
fn a_queued_enter_is_woken_by_the_hand_off_and_admitted() {
    let gate = queue_gate(Policy::Classic, 1, 1);
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    admit_now(&mut a);

    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    // Re-polled before the hand-off: still pending, no wake lost or invented.
    assert!(t.poll(&mut f).is_pending());
    let st = gate.stats();
    assert_eq!((st.queued, st.waiting), (1, 1));
    assert_eq!(
        gate.snapshot()
            .sessions
            .iter()
            .find(|x| x.id == b_id(&gate, "b"))
            .unwrap()
            .state,
        SessionState::Queued
    );
    assert_eq!(t.wakes(), 0);

    a.end_statement(); // the slot is handed to b's waker
    assert_eq!(t.wakes(), 1);
    match t.poll(&mut f) {
        Poll::Ready(Ok(call)) => assert!(call.admitted()),
        other => panic!("the hand-off admits it: {other:?}"),
    }
    drop(f);
    assert_eq!(
        gate.stats().inside,
        1,
        "b keeps the slot while it has a ticket"
    );
    b.end_statement();
    let st = gate.stats();
    assert_eq!((st.inside, st.queued, st.waiting), (0, 0, 0));
    assert_eq!(st.counters.admissions, 2);
    assert_eq!(st.counters.handoffs, 1);
    assert_eq!(st.counters.queue_waits, 1);
    assert_eq!(st.wake_latency.count(), 1);
}

fn b_id(gate: &Gate, label: &str) -> u64 {
    gate.snapshot()
        .sessions
        .iter()
        .find(|s| s.label == label)
        .unwrap()
        .id
}

#[test]
fn dropping_a_queued_enter_removes_its_waiter_and_counts_a_cancellation() {
    let gate = queue_gate(Policy::Classic, 1, 1);
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    drop(f);
    let st = gate.stats();
    assert_eq!((st.inside, st.queued, st.waiting), (1, 0, 0));
    assert_eq!(st.counters.cancellations, 1);
    // The exit finds nobody to hand the slot to.
    a.end_statement();
    let st = gate.stats();
    assert_eq!(st.inside, 0);
    assert_eq!(st.counters.handoffs, 0);
    assert_eq!(t.wakes(), 0);
}

#[test]
fn a_slot_handed_to_an_enter_dropped_in_the_same_instant_passes_to_the_next_waiter() {
    let gate = queue_gate(Policy::Classic, 1, 1);
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    let mut c = gate.async_session("c").unwrap();
    admit_now(&mut a);
    let (tb, tc) = (Task::new(), Task::new());
    let mut fb = b.enter();
    let mut fc = c.enter();
    assert!(tb.poll(&mut fb).is_pending());
    assert!(tc.poll(&mut fc).is_pending());

    a.end_statement(); // hands the slot to b, which is never polled again
    assert_eq!((tb.wakes(), tc.wakes()), (1, 0));
    assert_eq!(gate.stats().inside, 1, "counted inside on b's behalf");
    drop(fb); // cancel_wait finds the slot released: b gives it straight to c
    assert_eq!(tc.wakes(), 1);
    let st = gate.stats();
    assert_eq!((st.inside, st.queued, st.waiting), (1, 0, 1));
    match tc.poll(&mut fc) {
        Poll::Ready(Ok(call)) => assert!(call.admitted()),
        other => panic!("c gets the slot b passed on: {other:?}"),
    }
    drop(fc);
    c.end_statement();
    let st = gate.stats();
    assert_eq!((st.inside, st.queued, st.waiting), (0, 0, 0));
    let k = st.counters;
    assert_eq!((k.admissions, k.cancellations, k.handoffs), (2, 1, 2));
}

#[test]
fn a_cancelled_hand_off_with_nobody_waiting_frees_the_slot() {
    let gate = queue_gate(Policy::Flifo, 1, 1);
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    a.end_statement();
    assert_eq!(gate.stats().fifo_pending, 1);
    drop(f);
    let st = gate.stats();
    assert_eq!((st.inside, st.fifo_pending, st.queued), (0, 0, 0));
    // The slot is free again: a newcomer is admitted at once.
    admit_now(&mut a);
}

#[test]
fn flifo_admits_by_the_lifo_rule_while_a_hand_off_is_pending() {
    let gate = queue_gate(Policy::Flifo, 1, 1);
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    let mut c = gate.async_session("c").unwrap();
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    a.end_statement(); // b released, not yet running: fifo_pending 1
    admit_now(&mut c); // LIFO: lifo_running 0 < fifo_pending 1
    assert_eq!(gate.stats().counters.lifo_admissions, 1);
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
    drop(f);
    b.end_statement();
    c.end_statement();
    let st = gate.stats();
    assert_eq!((st.inside, st.lifo_running, st.fifo_pending), (0, 0, 0));
}

#[test]
fn a_sleeping_gate_refuses_an_async_session_without_a_timer() {
    for (config, refused) in [
        (GateConfig::new(Policy::Polling), true),
        (GateConfig::new(Policy::Timer), true),
        (GateConfig::new(Policy::Classic), true), // 10 ms sleep before queueing
        (GateConfig::new(Policy::Flifo), true),
        (
            GateConfig::new(Policy::Classic).sleep_delay(Duration::ZERO),
            false,
        ),
        (GateConfig::new(Policy::Unlimited), false),
    ] {
        let gate = Gate::new(config).unwrap();
        let r = gate.async_session("x");
        if refused {
            let e = r.unwrap_err();
            assert_eq!(
                e,
                GateError::NeedsTimer {
                    policy: config.policy
                }
            );
            assert!(e.to_string().contains("async_session_with_sleeper"), "{e}");
        } else {
            assert!(r.is_ok(), "{:?}", config.policy);
        }
    }
}

#[test]
fn the_sleep_before_queueing_runs_on_the_sleeper_and_a_dropped_sleep_is_abandoned() {
    let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1).tickets(1)).unwrap();
    let mut a = gate.async_session_with_sleeper("a", never_sleeper());
    let mut b = gate.async_session_with_sleeper("b", never_sleeper());
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    let st = gate.stats();
    assert_eq!((st.sleeping, st.waiting), (1, 1));
    assert_eq!(st.counters.sleeps, 1);
    drop(f);
    let st = gate.stats();
    assert_eq!((st.sleeping, st.waiting, st.queued), (0, 0, 0));
    assert_eq!(st.counters.cancellations, 1);
}

#[test]
fn after_its_one_sleep_a_classic_enter_queues_and_is_handed_the_slot() {
    let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1).tickets(1)).unwrap();
    let mut a = gate.async_session_with_sleeper("a", instant_sleeper());
    let mut b = gate.async_session_with_sleeper("b", instant_sleeper());
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending()); // the sleep, over at once: back to the executor
    assert_eq!(t.wakes(), 1);
    assert!(t.poll(&mut f).is_pending()); // queued
    let st = gate.stats();
    assert_eq!((st.sleeping, st.queued), (0, 1));
    assert_eq!((st.counters.sleeps, st.counters.queue_waits), (1, 1));
    a.end_statement();
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
}

#[test]
fn a_raise_of_the_limit_wakes_an_async_sleeper_to_re_check() {
    let gate = Gate::new(GateConfig::new(Policy::Polling).limit(1).tickets(1)).unwrap();
    let mut a = gate.async_session_with_sleeper("a", never_sleeper());
    let mut b = gate.async_session_with_sleeper("b", never_sleeper());
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending());
    assert_eq!(gate.stats().sleeping, 1);
    gate.set_limit(2).unwrap();
    assert!(t.wakes() >= 1);
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
    drop(f);
    a.end_statement();
    b.end_statement();
    let st = gate.stats();
    assert_eq!((st.inside, st.sleeping, st.waiting), (0, 0, 0));
}

#[test]
fn a_timer_yield_wakes_its_own_task_and_a_dropped_timer_sleep_is_abandoned() {
    let gate = Gate::new(GateConfig::new(Policy::Timer).limit(1).tickets(1)).unwrap();
    let mut a = gate.async_session_with_sleeper("a", never_sleeper());
    let mut b = gate.async_session_with_sleeper("b", never_sleeper());
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    assert!(t.poll(&mut f).is_pending()); // the yield
    assert_eq!(t.wakes(), 1, "a yield wakes its own task");
    assert_eq!(gate.stats().counters.yields, 1);
    assert!(t.poll(&mut f).is_pending()); // then the first sleep
    assert_eq!(gate.stats().sleeping, 1);
    drop(f);
    let st = gate.stats();
    assert_eq!((st.sleeping, st.waiting), (0, 0));
    assert_eq!(st.counters.cancellations, 1);
}

#[test]
fn timer_enters_regardless_after_its_yield_and_two_sleeps() {
    let gate = Gate::new(GateConfig::new(Policy::Timer).limit(1).tickets(1)).unwrap();
    let mut a = gate.async_session_with_sleeper("a", instant_sleeper());
    let mut b = gate.async_session_with_sleeper("b", instant_sleeper());
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    let mut polls = 0;
    let call = loop {
        polls += 1;
        assert!(polls < 10, "the timer policy forces entry");
        if let Poll::Ready(r) = t.poll(&mut f) {
            break r.unwrap();
        }
    };
    assert!(call.admitted());
    drop(call);
    drop(f);
    let c = gate.stats().counters;
    assert_eq!((c.forced_entries, c.sleeps, c.yields), (1, 2, 1));
}

#[test]
fn polling_without_room_sleeps_on_the_sleeper_until_a_slot_frees() {
    let gate = Gate::new(GateConfig::new(Policy::Polling).limit(1).tickets(1)).unwrap();
    let mut a = gate.async_session_with_sleeper("a", instant_sleeper());
    let mut b = gate.async_session_with_sleeper("b", instant_sleeper());
    admit_now(&mut a);
    let t = Task::new();
    let mut f = b.enter();
    // An instant timer: every poll sleeps once more and asks again (it never spins inside
    // one poll, since each sleep future is polled and returns to the loop only when ready).
    for _ in 0..3 {
        if t.poll(&mut f).is_ready() {
            panic!("no room while a is inside");
        }
    }
    a.end_statement();
    assert!(matches!(t.poll(&mut f), Poll::Ready(Ok(_))));
}

#[test]
fn unlimited_admits_every_enter_at_once() {
    let gate = Gate::new(GateConfig::new(Policy::Unlimited).tickets(1)).unwrap();
    let mut sessions: Vec<_> = (0..20)
        .map(|i| gate.async_session(format!("s{i}")).unwrap())
        .collect();
    for s in &mut sessions {
        admit_now(s);
    }
    assert_eq!(gate.stats().counters.admissions, 20);
}

#[test]
fn the_enter_future_and_the_session_are_send() {
    fn send<T: Send>(_: &T) {}
    let gate = queue_gate(Policy::Classic, 1, 1);
    let mut s = gate.async_session("a").unwrap();
    send(&s);
    let f = s.enter();
    send(&f);
}

/// An untuned-looking `auto` gate with one slot and a quantum long enough that no slot is
/// given up between calls during a test.
fn auto_gate_of_one() -> Gate {
    Gate::new(
        GateConfig::new(Policy::Auto)
            .limit(1)
            .adaptive_limit(false)
            .quantum(Duration::from_secs(1)),
    )
    .unwrap()
}

/// Polls a fresh enter of `s` once and expects it to queue.
fn expect_queued(s: &mut AsyncSession, t: &Task) {
    assert!(
        t.poll(&mut s.enter()).is_pending(),
        "expected a queued enter"
    );
}

#[test]
fn an_open_transactions_next_statement_is_admitted_at_once_while_a_newcomer_stays_queued() {
    let gate = auto_gate_of_one();
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    let mut c = gate.async_session("c").unwrap();
    a.set_in_transaction(true);
    assert!(a.in_transaction());
    admit_now(&mut a);
    // `b` (autocommit) queues and gets the slot at the end of `a`'s first statement.
    let tb = Task::new();
    let mut fb = b.enter();
    assert!(tb.poll(&mut fb).is_pending());
    a.end_statement();
    match tb.poll(&mut fb) {
        Poll::Ready(Ok(call)) => assert!(call.admitted()),
        other => panic!("the hand-off admits b: {other:?}"),
    }
    drop(fb);
    // `c` (autocommit) queues behind `b`.
    let tc = Task::new();
    let mut fc = c.enter();
    assert!(tc.poll(&mut fc).is_pending());
    // `a`'s next statement: its transaction was admitted, so it runs at once as an extra.
    admit_now(&mut a);
    let st = gate.stats();
    assert_eq!((st.inside, st.queued), (1, 1), "{st:?}");
    assert_eq!(st.counters.unchecked_reentries, 1, "{st:?}");
    a.end_statement();
    // A new transaction waits its turn again: `a` queues behind `c`.
    a.set_in_transaction(false);
    a.set_in_transaction(true);
    let ta = Task::new();
    let mut fa = a.enter();
    assert!(ta.poll(&mut fa).is_pending());
    assert_eq!(gate.stats().queued, 2);
    // `b` leaves: one of the two is handed the slot; when it leaves, the other.
    b.end_statement();
    let (first_a, first_c) = (ta.wakes(), tc.wakes());
    assert_eq!(first_a + first_c, 1, "one hand-off, one wake");
    if first_c == 1 {
        assert!(matches!(tc.poll(&mut fc), Poll::Ready(Ok(_))));
        drop(fc);
        c.end_statement();
        assert!(matches!(ta.poll(&mut fa), Poll::Ready(Ok(_))));
        drop(fa);
        a.end_statement();
    } else {
        assert!(matches!(ta.poll(&mut fa), Poll::Ready(Ok(_))));
        drop(fa);
        a.end_statement();
        assert!(matches!(tc.poll(&mut fc), Poll::Ready(Ok(_))));
        drop(fc);
        c.end_statement();
    }
    let st = gate.stats();
    assert_eq!((st.inside, st.queued, st.waiting), (0, 0, 0), "{st:?}");
    assert_eq!(st.counters.unchecked_reentries, 1, "{st:?}");
}

#[test]
fn an_autocommit_task_waits_its_turn_for_every_statement() {
    let gate = auto_gate_of_one();
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    admit_now(&mut a);
    let tb = Task::new();
    let mut fb = b.enter();
    assert!(tb.poll(&mut fb).is_pending());
    a.end_statement();
    assert!(matches!(tb.poll(&mut fb), Poll::Ready(Ok(_))));
    drop(fb);
    // No transaction declared: `a`'s next statement queues behind `b`'s slot.
    expect_queued(&mut a, &Task::new());
    let st = gate.stats();
    assert_eq!(st.counters.unchecked_reentries, 0, "{st:?}");
    // The dropped enter was cancelled and left nothing queued.
    assert_eq!((st.inside, st.queued, st.waiting), (1, 0, 0), "{st:?}");
    b.end_statement();
    assert_eq!(gate.stats().inside, 0);
}

#[test]
fn an_open_transaction_that_finds_the_extras_taken_waits_at_the_head_and_goes_first() {
    let gate = auto_gate_of_one();
    let mut a = gate.async_session("a").unwrap();
    let mut b = gate.async_session("b").unwrap();
    let mut c = gate.async_session("c").unwrap();
    let mut d = gate.async_session("d").unwrap();
    a.set_in_transaction(true);
    d.set_in_transaction(true);
    admit_now(&mut a);
    // `d`'s transaction is admitted by the hand-off at the end of `a`'s statement.
    let td = Task::new();
    let mut fd = d.enter();
    assert!(td.poll(&mut fd).is_pending());
    a.end_statement();
    assert!(matches!(td.poll(&mut fd), Poll::Ready(Ok(_))));
    drop(fd);
    // `a`'s second statement takes the one extra place (the limit is 1) and stays inside.
    admit_now(&mut a);
    // `d`'s statement ends; `b` (autocommit) takes the free slot.
    d.end_statement();
    admit_now(&mut b);
    // `d`'s next statement: no free slot, no extra left: it waits at the head of the queue.
    let mut fd = d.enter();
    assert!(td.poll(&mut fd).is_pending());
    // `c` (autocommit) queues after it: the newest waiter, whom hot-first would pick.
    let tc = Task::new();
    let mut fc = c.enter();
    assert!(tc.poll(&mut fc).is_pending());
    assert_eq!(gate.stats().queued, 2);
    // `b` leaves: the slot goes to `d`, the head, not to the newer `c`.
    b.end_statement();
    assert!(matches!(td.poll(&mut fd), Poll::Ready(Ok(_))));
    assert!(tc.poll(&mut fc).is_pending());
    drop(fd);
    d.end_statement();
    assert!(matches!(tc.poll(&mut fc), Poll::Ready(Ok(_))));
    drop(fc);
    c.end_statement();
    a.end_statement();
    let st = gate.stats();
    assert_eq!((st.inside, st.queued, st.waiting), (0, 0, 0), "{st:?}");
}

#[test]
fn an_enter_after_a_forgotten_async_call_gives_its_slot_back_before_it_is_admitted_again() {
    let gate = queue_gate(Policy::Classic, 4, 1);
    {
        let mut s = gate.async_session("t").unwrap();
        let t = Task::new();
        for _ in 0..3 {
            match t.poll(&mut s.enter()) {
                Poll::Ready(Ok(call)) => std::mem::forget(call),
                other => panic!("room for it: {other:?}"),
            }
            assert_eq!(gate.stats().inside, 1, "one slot at a time");
        }
    }
    assert_eq!(gate.stats().inside, 0, "nothing left counted");
}
