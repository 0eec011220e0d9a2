//! Model checks of the gate's real code with loom: every interleaving of its locks, atomics and
//! condition variables, for small thread counts. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --test loom`
//! (`.ci/run` does; `LOOM_MAX_PREEMPTIONS` bounds the search, 3 by default there).
//!
//! Loom has no clock: a sleep of zero is a yield, and a timed wait never times out, so a
//! nonzero sleep lasts until a limit raise or a cancel notifies it (which is what makes a
//! missed raise a deadlock loom reports). Models where waiters must get in by others leaving
//! use zero sleep delays (and no adaptive delay), so `classic`'s sleep before queueing and
//! `polling`'s sleep-and-poll become yield-and-retry: the decisions are unchanged. A wait
//! timeout of zero is deterministic (expired at the first check) and exercises the timeout
//! paths.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

use turnstile::{Gate, GateConfig, GateError, Policy};

/// `policy` with `limit`, one ticket and sleep delay `sleep` where it has them, no adaptive
/// sleep delay, and a fixed limit: each set only where the policy reads it (a setting it does
/// not read is refused).
fn config(policy: Policy, limit: u32, sleep: Duration) -> GateConfig {
    let mut c = GateConfig::new(policy).innodb_settings(limit, 1, sleep);
    if policy.uses("adaptive_max_sleep_delay") {
        c = c.adaptive_max_sleep_delay(Duration::ZERO);
    }
    if policy.uses("adaptive_limit") {
        // `auto`: the controller reads no clock under loom; keep the limit fixed.
        c = c.adaptive_limit(false);
    }
    c
}

fn gate(policy: Policy, limit: u32) -> Gate {
    Gate::new(config(policy, limit, Duration::ZERO)).unwrap()
}

/// `threads` threads each make one admission through a gate of limit 1. Checks: never more
/// inside than the policy's bound (1; `auto`'s is 2 × limit: an extra may run in a waking
/// grantee's place), no lost wake-up (loom reports a deadlock if a waiter is never
/// signalled), nothing left counted.
fn one_slot(policy: Policy, threads: usize) {
    let bound = policy.max_running(1).expect("a counted policy");
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
                    let before = inside.fetch_add(1, Ordering::SeqCst);
                    assert!(before < bound, "{} threads inside", before + 1);
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

/// `auto`'s atomic admission and its queue: an exit that gives its slot back and then reads
/// the queued count, against a thread that registers in that count and then retries the slot
/// (all `SeqCst`): either the retry sees the slot or the exit sees the waiter. A lost
/// wake-up is a deadlock loom reports; two inside fails the assertion.
#[test]
fn auto_atomic_admission_and_hand_off_lose_no_wake_up() {
    one_slot(Policy::Auto, 2);
}

#[test]
fn auto_with_three_threads_keeps_the_limit_and_hands_off_soundly() {
    one_slot(Policy::Auto, 3);
}

/// An open transaction's second statement comes back by `auto`'s rule after a wait (a free
/// slot, an extra place, or the head of the queue) while another thread arrives: never more
/// than the bound (2 × limit) inside, no lost wake-up (loom reports a deadlock), nothing left
/// counted or queued.
#[test]
fn auto_an_open_transactions_statements_come_back_ahead_and_lose_no_wake_up() {
    loom::model(|| {
        let g = gate(Policy::Auto, 1);
        let inside = Arc::new(AtomicU32::new(0));
        let (g2, in2) = (g.clone(), inside.clone());
        let other = thread::spawn(move || {
            let mut s = g2.session();
            let mut st = s.begin();
            let _call = st.enter().unwrap();
            assert!(in2.fetch_add(1, Ordering::SeqCst) < 2);
            in2.fetch_sub(1, Ordering::SeqCst);
        });
        let mut a = g.session();
        a.set_in_transaction(true);
        for _ in 0..2 {
            let mut st = a.begin();
            let _call = st.enter().unwrap();
            assert!(inside.fetch_add(1, Ordering::SeqCst) < 2);
            inside.fetch_sub(1, Ordering::SeqCst);
        }
        a.set_in_transaction(false);
        other.join().unwrap();
        let st = g.stats();
        assert_eq!((st.inside, st.queued), (0, 0), "{st:?}");
    });
}

#[test]
fn auto_cancel_racing_a_hand_off_leaves_nothing_counted() {
    cancel_racing_a_hand_off(Policy::Auto);
}

/// A cancel racing the hand-off of the slot it waits for: whichever comes first, nothing is
/// left counted or queued.
fn cancel_racing_a_hand_off(policy: Policy) {
    loom::model(move || {
        let g = gate(policy, 1);
        let mut holder = g.session();
        let mut waiter = g.session();
        let canceler = waiter.canceler();
        let mut stmt = holder.begin();
        let call = stmt.enter().unwrap();
        let w = thread::spawn(move || {
            let mut stmt = waiter.begin();
            match stmt.enter().map(drop) {
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
        if let Some(a) = snap.auto {
            assert_eq!(a.pending, 0);
        }
    });
}

#[test]
fn a_cancel_racing_a_hand_off_leaves_nothing_counted() {
    cancel_racing_a_hand_off(Policy::Classic);
}

/// A raise of the limit is never missed by a thread the policy told to sleep. Under loom a
/// timed sleep never times out, so a sleeper that misses the raise's notify sleeps forever and
/// loom reports the deadlock. (The generation must be read before the policy decides: read
/// after, a raise between the decision and the read was lost.)
fn raise_wakes_a_sleeper(policy: Policy) {
    loom::model(move || {
        let g = Gate::new(config(policy, 1, Duration::from_millis(10))).unwrap();
        let mut holder = g.session();
        let mut stmt = holder.begin();
        let call = stmt.enter().unwrap();
        let mut waiter = g.session();
        let w = thread::spawn(move || {
            let mut stmt = waiter.begin();
            drop(stmt.enter().unwrap());
        });
        g.set_limit(2).unwrap();
        w.join().unwrap();
        drop(call);
        drop(stmt);
        assert_eq!(g.snapshot().inside, 0);
    });
}

#[test]
fn polling_sleeper_never_misses_a_limit_raise() {
    raise_wakes_a_sleeper(Policy::Polling);
}

#[test]
fn classic_sleeper_never_misses_a_limit_raise() {
    raise_wakes_a_sleeper(Policy::Classic);
}

/// Sessions admitted while the limit is 0 are counted: once `set_limit(1)` has returned, a
/// thread that starts to enter afterwards is never inside beside another.
fn limit_from_zero_is_not_overshot(policy: Policy) {
    loom::model(move || {
        let g = gate(policy, 0);
        let limited = Arc::new(AtomicU32::new(0));
        let inside = Arc::new(AtomicU32::new(0));
        let early = {
            let mut s = g.session();
            let inside = inside.clone();
            thread::spawn(move || {
                let mut stmt = s.begin();
                let call = stmt.enter().unwrap();
                inside.fetch_add(1, Ordering::SeqCst);
                inside.fetch_sub(1, Ordering::SeqCst);
                drop(call);
            })
        };
        let late = {
            let mut s = g.session();
            let (inside, limited) = (inside.clone(), limited.clone());
            thread::spawn(move || {
                let after_set = limited.load(Ordering::SeqCst) == 1;
                let mut stmt = s.begin();
                let call = stmt.enter().unwrap();
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(
                    !after_set || n == 1,
                    "admitted beside another under limit 1"
                );
                inside.fetch_sub(1, Ordering::SeqCst);
                drop(call);
            })
        };
        g.set_limit(1).unwrap();
        limited.store(1, Ordering::SeqCst);
        early.join().unwrap();
        late.join().unwrap();
        assert_eq!(g.snapshot().inside, 0);
    });
}

#[test]
fn classic_limit_set_after_unlimited_counts_those_inside() {
    limit_from_zero_is_not_overshot(Policy::Classic);
}

#[test]
fn polling_limit_set_after_unlimited_counts_those_inside() {
    limit_from_zero_is_not_overshot(Policy::Polling);
}

/// A wait that times out (a zero timeout: deterministic without a clock) in the same instant a
/// hand-off releases it ends either inside or uncounted, never both and never neither.
#[test]
fn a_timeout_racing_a_hand_off_leaves_nothing_counted() {
    loom::model(|| {
        let g = gate(Policy::Classic, 1);
        let mut holder = g.session();
        let mut waiter = g.session();
        waiter.set_wait_timeout(Some(Duration::ZERO));
        let mut stmt = holder.begin();
        let call = stmt.enter().unwrap();
        let w = thread::spawn(move || {
            let mut stmt = waiter.begin();
            match stmt.enter().map(drop) {
                Ok(()) | Err(GateError::TimedOut { .. }) => {}
                Err(e) => panic!("unexpected {e:?}"),
            }
        });
        drop(call);
        drop(stmt);
        w.join().unwrap();
        let snap = g.snapshot();
        assert_eq!((snap.inside, snap.queued), (0, 0));
    });
}
