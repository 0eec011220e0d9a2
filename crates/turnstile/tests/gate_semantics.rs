//! Each policy's semantics, driven through the real gate with real threads. Where a test needs
//! another thread to reach a state, it polls the gate's snapshot until it does (with a generous
//! watchdog); no test asserts on a timing.
#![cfg(not(loom))]

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use turnstile::{ConfigError, Gate, GateConfig, GateError, Policy, SessionState, StepOutReason};

#[path = "common/wait_for.rs"]
mod wait_for;
use wait_for::wait_for;

/// The policies that count row tickets (`auto` grants a time quantum instead: its own tests
/// are in tests/auto.rs).
fn ticket_policies() -> impl Iterator<Item = Policy> {
    Policy::ALL.into_iter().filter(|p| *p != Policy::Auto)
}

fn gate(policy: Policy, limit: u32, tickets: u32, sleep: Duration) -> Gate {
    Gate::new(GateConfig::new(policy).innodb_settings(limit, tickets, sleep)).unwrap()
}

#[test]
fn each_enter_with_tickets_costs_one_ticket_and_the_slot_is_kept_between_calls() {
    for policy in ticket_policies() {
        let g = gate(policy, 1, 3, Duration::from_millis(1));
        let mut s = g.session();
        let mut stmt = s.begin();
        let call = stmt.enter().unwrap();
        assert!(call.admitted(), "{policy}: the first enter is an admission");
        assert_eq!(call.tickets(), 3);
        drop(call);
        for left in [2, 1, 0] {
            assert!(stmt.is_inside(), "{policy}: slot kept while tickets remain");
            let call = stmt.enter().unwrap();
            assert!(!call.admitted(), "{policy}: a ticket re-entry");
            assert_eq!(call.tickets(), left);
        }
        // The call that spent the last ticket has exited: the session really left.
        assert!(!stmt.is_inside(), "{policy}: leaves when tickets run out");
        let call = stmt.enter().unwrap();
        assert!(
            call.admitted(),
            "{policy}: tickets exhausted means a new admission"
        );
        drop(call);
        drop(stmt);
        let snap = g.snapshot();
        assert_eq!(snap.counters.admissions, 2, "{policy}");
        assert_eq!(snap.counters.ticket_reentries, 3, "{policy}");
        assert_eq!(snap.inside, 0, "{policy}");
    }
}

#[test]
fn statement_end_force_exits_and_resets_tickets() {
    for policy in ticket_policies() {
        let g = gate(policy, 1, 500, Duration::from_millis(1));
        let mut s = g.session();
        {
            let mut stmt = s.begin();
            drop(stmt.enter().unwrap());
            assert_eq!(stmt.tickets(), 500);
            let snap = g.snapshot();
            assert_eq!(snap.sessions[0].state, SessionState::DeclaredInside);
            if policy != Policy::Unlimited {
                assert_eq!(snap.inside, 1, "{policy}");
            }
        }
        assert_eq!(s.tickets(), 0);
        assert!(!s.is_inside());
        assert_eq!(g.snapshot().inside, 0, "{policy}");
        // Another session gets the slot at once, without waiting.
        let mut t = g.session();
        assert!(t.begin().enter().unwrap().admitted());
        assert_eq!(g.snapshot().counters.sleeps, 0, "{policy}");
    }
}

/// Holds one slot in a background thread until told to let go.
struct Holder {
    release: mpsc::Sender<()>,
    done: thread::JoinHandle<()>,
}

fn hold_slot(g: &Gate) -> Holder {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let g2 = g.clone();
    let done = thread::spawn(move || {
        let mut s = g2.named_session("holder");
        let mut stmt = s.begin();
        let _call = stmt.enter().unwrap();
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
    });
    entered_rx.recv().unwrap();
    Holder { release, done }
}

impl Holder {
    fn leave(self) {
        self.release.send(()).unwrap();
        self.done.join().unwrap();
    }
}

#[test]
fn queued_threads_are_admitted_in_fifo_order() {
    for policy in [Policy::Classic, Policy::Flifo] {
        let g = gate(policy, 1, 500, Duration::ZERO);
        let holder = hold_slot(&g);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for i in 0..5usize {
            let (g2, order2) = (g.clone(), order.clone());
            threads.push(thread::spawn(move || {
                let mut s = g2.named_session(format!("w{i}"));
                let mut stmt = s.begin();
                let _call = stmt.enter().unwrap();
                order2.lock().unwrap().push(i);
            }));
            // Wait until this waiter is queued before starting the next one.
            wait_for(&g, "the waiter queued", |s| s.queued as usize == i + 1);
        }
        let snap = g.snapshot();
        assert!(snap.to_string().contains("waiting in queue"), "{snap}");
        holder.leave();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4], "{policy}");
        let c = g.snapshot().counters;
        assert_eq!((c.queue_waits, c.handoffs), (5, 5), "{policy}");
        assert_eq!(g.snapshot().wake_latency.count(), 5);
    }
}

#[test]
fn a_handed_off_slot_cannot_be_stolen_by_a_newcomer() {
    let g = gate(Policy::Classic, 1, 500, Duration::ZERO);
    let mut owner = g.named_session("owner");
    let mut stmt = owner.begin();
    let call = stmt.enter().unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let g2 = g.clone();
    let waiter = thread::spawn(move || {
        let mut s = g2.named_session("waiter");
        let mut stmt = s.begin();
        let _call = stmt.enter().unwrap();
        rx.recv().unwrap(); // hold the slot until the test is done
    });
    wait_for(&g, "the waiter queued", |s| s.queued == 1);
    drop(call);
    drop(stmt); // hands the slot to the waiter, whether or not it has started running
    let mut newcomer = g.named_session("newcomer");
    newcomer.set_wait_timeout(Some(Duration::ZERO));
    let err = newcomer.begin().enter().unwrap_err();
    assert!(matches!(err, GateError::TimedOut { .. }), "{err:?}");
    let snap = g.snapshot();
    assert_eq!(snap.inside, 1, "{snap}");
    assert_eq!(snap.queued, 0, "the timed-out newcomer left no slot behind");
    tx.send(()).unwrap();
    waiter.join().unwrap();
}

#[test]
fn classic_sleeps_once_before_queueing_and_shows_it_in_the_status() {
    let g = gate(Policy::Classic, 1, 500, Duration::from_millis(300));
    let holder = hold_slot(&g);
    let g2 = g.clone();
    let t = thread::spawn(move || {
        let mut s = g2.named_session("late");
        drop(s.begin().enter().unwrap());
    });
    let snap = wait_for(&g, "a sleeper", |s| s.sleeping == 1);
    assert!(
        snap.to_string().contains("sleeping before joining queue"),
        "{snap}"
    );
    wait_for(&g, "the sleeper queued", |s| s.queued == 1);
    holder.leave();
    t.join().unwrap();
    let c = g.snapshot().counters;
    assert_eq!((c.sleeps, c.queue_waits, c.handoffs), (1, 1, 1));
    let w = g.stats().wait;
    assert_eq!(w.count(), 2);
    assert_eq!(w.quantile(0.5), 0, "the holder's admission did not wait");
    assert!(w.max() > 0);
}

#[test]
fn timer_enters_regardless_after_a_yield_and_two_sleeps() {
    let g = gate(Policy::Timer, 1, 500, Duration::from_millis(10));
    let holder = hold_slot(&g);
    let mut s = g.session();
    let mut stmt = s.begin();
    let call = stmt.enter().unwrap();
    assert!(call.admitted());
    let snap = g.snapshot();
    assert_eq!(snap.inside, 2, "the forced entry overshoots the limit");
    let c = snap.counters;
    assert_eq!((c.yields, c.sleeps, c.forced_entries), (1, 2, 1));
    drop(call);
    drop(stmt);
    holder.leave();
}

#[test]
fn polling_sleeps_and_polls_until_a_slot_frees() {
    let g = gate(Policy::Polling, 1, 500, Duration::from_millis(1));
    let holder = hold_slot(&g);
    let g2 = g.clone();
    let t = thread::spawn(move || {
        let mut s = g2.session();
        drop(s.begin().enter().unwrap());
    });
    let snap = wait_for(&g, "a few polls", |s| s.counters.sleeps >= 3);
    assert!(
        snap.to_string().contains("sleeping before entering"),
        "{snap}"
    );
    assert_eq!(snap.inside, 1);
    holder.leave();
    t.join().unwrap();
    assert_eq!(g.snapshot().inside, 0);
}

#[test]
fn cancelling_a_waiter_returns_an_error_and_leaves_nothing_counted() {
    for policy in [
        Policy::Classic,
        Policy::Flifo,
        Policy::Polling,
        Policy::Timer,
    ] {
        let g = gate(policy, 1, 500, Duration::from_millis(50));
        let holder = hold_slot(&g);
        let (tx, rx) = mpsc::channel();
        let g2 = g.clone();
        let t = thread::spawn(move || {
            let mut s = g2.session();
            tx.send(s.canceler()).unwrap();
            let r = s.begin().enter().map(|_| ());
            r
        });
        let canceler = rx.recv().unwrap();
        wait_for(&g, "the session waiting", |s| {
            s.count_in(SessionState::is_waiting) == 1
        });
        canceler.cancel();
        let r = t.join().unwrap();
        if policy == Policy::Timer {
            // timer may already have forced its way in after its two sleeps.
            if r.is_ok() {
                holder.leave();
                continue;
            }
        }
        assert!(
            matches!(r, Err(GateError::Cancelled { .. })),
            "{policy}: {r:?}"
        );
        let snap = g.snapshot();
        assert_eq!(
            (snap.inside, snap.queued, snap.sleeping),
            (1, 0, 0),
            "{policy}\n{snap}"
        );
        assert_eq!(snap.counters.cancellations, 1, "{policy}");
        holder.leave();
        assert_eq!(g.snapshot().inside, 0, "{policy}");
    }
}

#[test]
fn a_wait_timeout_ends_the_wait_with_an_error() {
    for policy in [Policy::Classic, Policy::Polling] {
        let g = gate(policy, 1, 500, Duration::from_millis(5));
        let holder = hold_slot(&g);
        let mut s = g.session();
        s.set_wait_timeout(Some(Duration::from_millis(30)));
        let err = s.begin().enter().unwrap_err();
        let GateError::TimedOut { waited } = err else {
            panic!("{policy}: {err:?}")
        };
        assert!(
            waited >= Duration::from_millis(30),
            "{policy}: waited {waited:?}"
        );
        let snap = g.snapshot();
        assert_eq!(
            (snap.inside, snap.queued, snap.sleeping),
            (1, 0, 0),
            "{policy}"
        );
        assert_eq!(snap.counters.timeouts, 1);
        holder.leave();
    }
}

#[test]
fn stepping_out_frees_the_slot_for_another_thread() {
    for policy in [
        Policy::Classic,
        Policy::Flifo,
        Policy::Polling,
        Policy::Timer,
    ] {
        let g = gate(policy, 1, 500, Duration::from_millis(1));
        let mut s = g.session();
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        let other_got_in = call.step_out(StepOutReason::CommitWait, || {
            let snap = g.snapshot();
            assert_eq!(
                snap.sessions[0].state,
                SessionState::SteppedOut(StepOutReason::CommitWait)
            );
            assert!(snap.to_string().contains("stepped out: commit wait"));
            let g2 = g.clone();
            thread::spawn(move || {
                let mut t = g2.session();
                let mut stmt = t.begin();
                let call = stmt.enter().unwrap();
                call.admitted() && g2.snapshot().counters.sleeps == 0
            })
            .join()
            .unwrap()
        });
        assert!(other_got_in, "{policy}: the freed slot was taken at once");
        assert!(!call.is_inside(), "{policy}: outside until resumed");
        call.resume().unwrap();
        assert!(
            call.tickets() == 500 && g.snapshot().inside == 1,
            "{policy}"
        );
        drop(call);
        drop(stmt);
        assert_eq!(g.snapshot().counters.step_outs, 1);
    }
}

#[test]
fn after_a_row_lock_wait_counted_policies_reenter_without_checking_the_limit() {
    for policy in [
        Policy::Classic,
        Policy::Flifo,
        Policy::Polling,
        Policy::Timer,
    ] {
        let g = gate(policy, 1, 500, Duration::from_millis(1));
        let mut s = g.session();
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        let mut other = None;
        call.step_out(StepOutReason::RowLockWait, || {
            // Another thread takes the freed slot and keeps it.
            other = Some(hold_slot(&g));
        });
        call.resume().unwrap();
        assert_eq!(call.tickets(), 1, "{policy}: one ticket after a lock wait");
        let snap = g.snapshot();
        assert_eq!(snap.inside, 2, "{policy}: re-entered over the limit");
        assert_eq!(snap.counters.unchecked_reentries, 1, "{policy}");
        assert_eq!(
            snap.counters.sleeps + snap.counters.queue_waits,
            0,
            "{policy}"
        );
        drop(call);
        drop(stmt);
        other.unwrap().leave();
        assert_eq!(g.snapshot().inside, 0, "{policy}");
    }
}

#[test]
fn a_huge_wait_timeout_means_no_deadline_and_leaks_nothing() {
    for policy in [Policy::Classic, Policy::Polling] {
        let g = gate(policy, 1, 500, Duration::from_millis(1));
        let holder = hold_slot(&g);
        let g2 = g.clone();
        let t = thread::spawn(move || {
            let mut s = g2.session();
            s.set_wait_timeout(Some(Duration::MAX));
            let mut stmt = s.begin();
            stmt.enter().map(drop)
        });
        wait_for(&g, "the session waiting", |s| {
            s.count_in(SessionState::is_waiting) == 1
        });
        holder.leave();
        assert!(t.join().unwrap().is_ok(), "{policy}");
        let snap = g.snapshot();
        assert_eq!(
            (snap.inside, snap.queued, snap.sleeping),
            (0, 0, 0),
            "{policy}"
        );
    }
}

#[test]
fn a_cancel_between_statements_does_not_cancel_the_next_one() {
    let g = gate(Policy::Classic, 1, 500, Duration::ZERO);
    let s = g.session();
    s.canceler().cancel();
    let holder = hold_slot(&g);
    let g2 = g.clone();
    let (tx, rx) = mpsc::channel();
    let t = thread::spawn(move || {
        let mut s = s;
        let mut stmt = s.begin();
        tx.send(()).unwrap();
        stmt.enter().map(drop)
    });
    rx.recv().unwrap();
    wait_for(&g2, "the session queued", |s| s.queued == 1);
    holder.leave();
    assert!(t.join().unwrap().is_ok());
}

#[test]
fn a_panic_inside_a_call_frees_the_slot() {
    for policy in Policy::ALL {
        let g = gate(policy, 1, 500, Duration::from_millis(1));
        let g2 = g.clone();
        let r = thread::spawn(move || {
            let mut s = g2.session();
            let mut stmt = s.begin();
            let _call = stmt.enter().unwrap();
            panic!("boom inside the engine");
        })
        .join();
        assert!(r.is_err());
        let snap = g.snapshot();
        assert_eq!(snap.inside, 0, "{policy}");
        let mut s = g.session();
        assert!(s.begin().enter().unwrap().admitted());
        assert_eq!(
            g.snapshot().counters.sleeps,
            0,
            "{policy}: no wait after the panic"
        );
    }
}

#[test]
fn a_panic_during_a_step_out_leaves_nothing_counted() {
    let g = gate(Policy::Classic, 1, 500, Duration::from_millis(1));
    let g2 = g.clone();
    let r = thread::spawn(move || {
        let mut s = g2.session();
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        let () = call.step_out(StepOutReason::DiskIo, || panic!("io error"));
    })
    .join();
    assert!(r.is_err());
    assert_eq!(g.snapshot().inside, 0);
}

#[test]
fn raising_the_limit_admits_waiters_at_once_and_lowering_evicts_no_one() {
    for policy in [Policy::Classic, Policy::Flifo, Policy::Polling] {
        // A long sleep delay: only the limit change can let the waiters in quickly.
        let g = gate(policy, 1, 500, Duration::from_secs(1));
        let holder = hold_slot(&g);
        let (tx, rx) = mpsc::channel::<()>();
        let rx = Arc::new(Mutex::new(rx));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (g2, rx2) = (g.clone(), rx.clone());
                thread::spawn(move || {
                    let mut s = g2.session();
                    let mut stmt = s.begin();
                    stmt.set_holds_locks(true); // skip classic's sleep: queue at once
                    let _c = stmt.enter().unwrap();
                    let _ = rx2.lock().unwrap().recv();
                })
            })
            .collect();
        wait_for(&g, "three waiting", |s| {
            s.count_in(SessionState::is_waiting) == 3
        });
        g.set_limit(4).unwrap();
        let snap = wait_for(&g, "all four inside", |s| {
            s.count_in(SessionState::is_inside) == 4
        });
        assert_eq!(snap.inside, 4, "{policy}");
        g.set_limit(1).unwrap();
        assert_eq!(g.snapshot().inside, 4, "{policy}: lowering evicts no one");
        assert_eq!(g.limit(), 1);
        drop(tx);
        for t in threads {
            t.join().unwrap();
        }
        holder.leave();
        assert_eq!(g.snapshot().inside, 0);
    }
}

#[test]
fn status_text_reads_like_innodbs() {
    let g = gate(Policy::Classic, 2, 500, Duration::ZERO);
    let mut s = g.named_session("scan-1");
    let mut stmt = s.begin();
    for _ in 0..118 {
        drop(stmt.enter().unwrap());
    }
    let text = g.snapshot().to_string();
    assert!(
        text.contains("1 queries inside, 0 queries in queue"),
        "{text}"
    );
    assert!(text.contains("'scan-1'"), "{text}");
    assert!(
        text.contains("declared inside, 383 tickets (between calls)"),
        "{text}"
    );
    let call = stmt.enter().unwrap();
    assert!(g
        .snapshot()
        .to_string()
        .contains("declared inside, 382 tickets (in a call)"));
    drop(call);
}

#[test]
fn bad_configuration_is_a_typed_error() {
    let err = Gate::new(GateConfig::new(Policy::Classic).limit(1001)).unwrap_err();
    assert!(matches!(
        err,
        ConfigError::OutOfRange {
            field: "limit",
            max: 1000,
            ..
        }
    ));
    let g = gate(Policy::Classic, 1, 500, Duration::ZERO);
    assert!(g.set_limit(5000).is_err());
    assert_eq!(g.limit(), 1);
}

#[test]
fn dropped_sessions_keep_their_counts_in_the_totals() {
    let g = gate(Policy::Polling, 4, 2, Duration::ZERO);
    for _ in 0..3 {
        let mut s = g.session();
        let mut stmt = s.begin();
        for _ in 0..3 {
            drop(stmt.enter().unwrap());
        }
    }
    let snap = g.snapshot();
    assert!(snap.sessions.is_empty());
    assert_eq!(snap.counters.admissions, 3);
    assert_eq!(snap.counters.ticket_reentries, 6);
    assert_eq!(snap.wait.count(), 3);
}
