//! The holes the library review found (issue 11), each as the behaviour that closes it.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use turnstile::{Gate, GateConfig, GateError, Policy, SessionState, StepOutReason};

fn gate(policy: Policy, limit: u32) -> Gate {
    Gate::new(
        GateConfig::new(policy)
            .limit(limit)
            .tickets(500)
            .sleep_delay(Duration::from_millis(1)),
    )
    .unwrap()
}

#[test]
fn sessions_admitted_while_unlimited_count_against_a_limit_set_later() {
    for policy in [Policy::Classic, Policy::Polling, Policy::Flifo] {
        let g = gate(policy, 0);
        let (mut a, mut b) = (g.session(), g.session());
        let mut sa = a.begin();
        let mut sb = b.begin();
        drop(sa.enter().unwrap());
        drop(sb.enter().unwrap());
        g.set_limit(1).unwrap();
        assert_eq!(
            g.snapshot().inside,
            2,
            "{policy}: the snapshot tells the truth"
        );
        let mut c = g.session();
        c.set_wait_timeout(Some(Duration::from_millis(30)));
        let mut sc = c.begin();
        assert!(
            matches!(sc.enter(), Err(GateError::TimedOut { .. })),
            "{policy}: a newcomer must not be admitted beside two sessions under limit 1"
        );
        drop(sc);
        drop(sa);
        drop(sb);
        assert_eq!(g.snapshot().inside, 0, "{policy}");
        let mut sc = c.begin();
        assert!(sc.enter().is_ok(), "{policy}: admitted once they left");
        drop(sc);
        assert_eq!(g.snapshot().inside, 0, "{policy}");
    }
}

#[test]
fn lifetime_counters_never_go_backwards_while_sessions_come_and_go() {
    let g = gate(Policy::Polling, 4);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (g, stop) = (g.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut s = g.session();
                    let mut stmt = s.begin();
                    drop(stmt.enter().unwrap());
                }
            })
        })
        .collect();
    let mut last = 0;
    for i in 0..200_000 {
        let now = g.snapshot().counters.admissions;
        assert!(
            now >= last,
            "snapshot {i}: admissions went from {last} to {now}"
        );
        last = now;
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(last > 0);
}

#[test]
fn a_panic_inside_a_step_out_leaves_the_session_outside_not_stepped_out() {
    let g = gate(Policy::Classic, 1);
    let mut s = g.session();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        let _ = call.step_out(StepOutReason::DiskIo, || panic!("io error"));
    }));
    assert!(r.is_err());
    let snap = g.snapshot();
    assert_eq!(snap.sessions[0].state, SessionState::Outside);
    assert_eq!(snap.inside, 0);
}
