//! Model checks of the gate's real code with loom: every interleaving of its locks, atomics and
//! condition variables, for small thread counts. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --test loom`
//! (`.ci/run` does; `LOOM_MAX_PREEMPTIONS` bounds the search, 3 by default there).
//!
//! Under loom every sleep is a yield (loom has no clock), so `classic`'s sleep before queueing
//! and `polling`'s sleep-and-poll become yield-and-retry: the decisions are unchanged.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

use turnstile::{Gate, GateConfig, GateError, Policy};

fn gate(policy: Policy, limit: u32) -> Gate {
    Gate::new(
        GateConfig::new(policy)
            .limit(limit)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap()
}

/// `threads` threads each make one admission through a gate of limit 1. Checks: never two
/// inside, no lost wake-up (loom reports a deadlock if a waiter is never signalled), nothing
/// left counted.
fn one_slot(policy: Policy, threads: usize) {
    loom::model(move || {
        let g = gate(policy, 1);
        let inside = Arc::new(AtomicU32::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let mut s = g.session();
                let inside = inside.clone();
                thread::spawn(move || {
                    let mut stmt = s.begin();
                    let call = stmt.enter().unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two threads inside"
                    );
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(call);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let snap = g.snapshot();
        assert_eq!((snap.inside, snap.queued, snap.sleeping), (0, 0, 0));
    });
}

#[test]
fn classic_queue_hand_off_keeps_the_limit_and_loses_no_wake_up() {
    one_slot(Policy::Classic, 2);
}

#[test]
fn classic_queue_with_three_threads_keeps_fifo_hand_offs_sound() {
    one_slot(Policy::Classic, 3);
}

#[test]
fn flifo_hand_off_loses_no_wake_up() {
    loom::model(|| {
        let g = gate(Policy::Flifo, 1);
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let mut s = g.session();
                thread::spawn(move || {
                    let mut stmt = s.begin();
                    drop(stmt.enter().unwrap());
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let snap = g.snapshot();
        assert_eq!(
            (snap.inside, snap.lifo_running, snap.fifo_pending),
            (0, 0, 0)
        );
    });
}

#[test]
fn polling_atomic_admission_keeps_the_limit() {
    one_slot(Policy::Polling, 2);
}

#[test]
fn a_cancel_racing_a_hand_off_leaves_nothing_counted() {
    loom::model(|| {
        let g = gate(Policy::Classic, 1);
        let mut holder = g.session();
        let mut waiter = g.session();
        let canceler = waiter.canceler();
        let mut stmt = holder.begin();
        let call = stmt.enter().unwrap();
        let w = thread::spawn(move || {
            let mut stmt = waiter.begin();
            let r = stmt.enter().map(drop);
            match r {
                Ok(()) | Err(GateError::Cancelled { .. }) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        });
        let c = thread::spawn(move || canceler.cancel());
        drop(call);
        drop(stmt);
        c.join().unwrap();
        w.join().unwrap();
        let snap = g.snapshot();
        assert_eq!((snap.inside, snap.queued), (0, 0));
    });
}
