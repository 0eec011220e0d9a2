//! Edges of the gate's bookkeeping: step-outs that panic, time out or are dropped, counters
//! and gauges while sessions come and go, limits changed under running threads, and calls
//! forgotten or nested.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use turnstile::{Gate, GateConfig, GateError, Policy, SessionState, StepOutReason};

/// Holds one slot from another thread until the returned sender is dropped.
fn hold_slot_elsewhere(g: &Gate) -> (std::sync::mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let g = g.clone();
    let t = thread::spawn(move || {
        let mut s = g.session();
        let mut stmt = s.begin();
        let _call = stmt.enter().unwrap();
        entered_tx.send(()).unwrap();
        let _ = release_rx.recv();
    });
    entered_rx.recv().unwrap();
    (release_tx, t)
}

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
        let () = call.step_out(StepOutReason::DiskIo, || panic!("io error"));
    }));
    assert!(r.is_err());
    let snap = g.snapshot();
    assert_eq!(snap.sessions[0].state, SessionState::Outside);
    assert_eq!(snap.inside, 0);
}

#[test]
fn a_step_out_returns_the_works_value_even_when_the_re_entry_times_out() {
    for policy in [Policy::Classic, Policy::Polling, Policy::Flifo] {
        let g = gate(policy, 1);
        let mut s = g.session();
        s.set_wait_timeout(Some(Duration::from_millis(20)));
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        let mut holder = None;
        // The work commits durably; meanwhile another thread takes the freed slot.
        let committed: Result<u32, String> = call.step_out(StepOutReason::CommitWait, || {
            holder = Some(hold_slot_elsewhere(&g));
            Ok(42)
        });
        assert_eq!(
            committed,
            Ok(42),
            "{policy}: the commit's outcome reaches the caller"
        );
        assert!(
            matches!(call.resume(), Err(GateError::TimedOut { .. })),
            "{policy}: the re-entry's outcome is reported separately"
        );
        assert!(!call.is_inside());
        drop(call);
        drop(stmt);
        let (release, t) = holder.unwrap();
        drop(release);
        t.join().unwrap();
        assert_eq!(g.stats().inside, 0, "{policy}");
    }
}

#[test]
fn a_call_dropped_right_after_its_step_out_is_not_readmitted() {
    let g = gate(Policy::Classic, 1);
    let mut s = g.session();
    let mut stmt = s.begin();
    let mut call = stmt.enter().unwrap();
    let (release, t) = call.step_out(StepOutReason::CommitWait, || hold_slot_elsewhere(&g));
    let before = g.stats().counters;
    drop(call);
    drop(stmt);
    let after = g.stats().counters;
    assert_eq!(
        (after.admissions, after.sleeps, after.queue_waits),
        (before.admissions, before.sleeps, before.queue_waits),
        "no sleep, no queue, no admission for a call that is over"
    );
    drop(release);
    t.join().unwrap();
}

#[test]
fn an_unchecked_re_entry_is_kept_for_the_statements_next_enter_and_dropped_at_its_end() {
    let g = gate(Policy::Classic, 1);
    let mut s = g.session();
    let (release, t);
    {
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        (release, t) = call.step_out(StepOutReason::RowLockWait, || hold_slot_elsewhere(&g));
        drop(call);
        // The statement goes on after its lock wait: in again without checking the limit.
        let call = stmt.enter().unwrap();
        assert_eq!(call.tickets(), 1);
        assert_eq!(g.stats().inside, 2);
        assert_eq!(g.stats().counters.unchecked_reentries, 1);
    }
    // A new statement has no lock wait behind it: a normal admission, which must wait.
    s.set_wait_timeout(Some(Duration::from_millis(10)));
    let mut stmt = s.begin();
    assert!(matches!(stmt.enter(), Err(GateError::TimedOut { .. })));
    drop(stmt);
    drop(release);
    t.join().unwrap();
}

#[test]
fn stats_gauges_count_waiting_and_stepped_out_sessions() {
    let g = gate(Policy::Classic, 1);
    let (release, t) = hold_slot_elsewhere(&g);
    let g2 = g.clone();
    let waiter = thread::spawn(move || {
        let mut s = g2.session();
        let mut stmt = s.begin();
        drop(stmt.enter().unwrap());
    });
    let start = std::time::Instant::now();
    while g.stats().waiting != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never saw the waiter"
        );
        thread::sleep(Duration::from_millis(1));
    }
    let mut s = g.session();
    let mut stmt = s.begin();
    let seen = stmt.step_out(StepOutReason::FileSort, || g.stats());
    assert_eq!((seen.stepped_out, seen.waiting, seen.sessions), (1, 1, 3));
    assert_eq!(g.stats().stepped_out, 0);
    drop(stmt);
    drop(release);
    t.join().unwrap();
    waiter.join().unwrap();
    let end = g.stats();
    assert_eq!((end.waiting, end.inside, end.sessions), (0, 0, 1));
    assert_eq!(end.counters.admissions, 2);
    assert_eq!(end.wait.count(), 2, "one zero and one real wait");
}

#[test]
fn a_limit_lowered_while_polling_threads_run_is_never_exceeded_by_newcomers() {
    // Threads churn through a polling gate while the limit drops from 8 to 1; once the drop
    // has returned, an occupancy count of threads admitted afterwards never exceeds 1 beyond
    // those already inside.
    use std::sync::atomic::AtomicU32;
    let g = gate(Policy::Polling, 8);
    let lowered = Arc::new(AtomicBool::new(false));
    let late_inside = Arc::new(AtomicU32::new(0));
    let late_max = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (g, lowered, late_inside, late_max, stop) = (
                g.clone(),
                lowered.clone(),
                late_inside.clone(),
                late_max.clone(),
                stop.clone(),
            );
            thread::spawn(move || {
                let mut s = g.session();
                while !stop.load(Ordering::Relaxed) {
                    let late = lowered.load(Ordering::SeqCst);
                    let mut stmt = s.begin();
                    let call = stmt.enter().unwrap();
                    if late {
                        let n = late_inside.fetch_add(1, Ordering::SeqCst) + 1;
                        late_max.fetch_max(n, Ordering::SeqCst);
                        thread::yield_now();
                        late_inside.fetch_sub(1, Ordering::SeqCst);
                    }
                    drop(call);
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    g.set_limit(1).unwrap();
    lowered.store(true, Ordering::SeqCst);
    thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(late_max.load(Ordering::SeqCst) <= 1);
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn a_guard_enter_inside_an_explicit_call_is_refused_and_no_slot_is_counted_twice() {
    let g = gate(Policy::Classic, 4);
    {
        let mut s = g.session();
        assert!(s.enter().unwrap(), "an admission, inside a call");
        let mut st = s.begin();
        assert!(matches!(
            st.enter(),
            Err(GateError::Misuse(turnstile::Misuse::NestedEnter))
        ));
        drop(st); // the statement's end: the explicit call ends with it
        assert_eq!(g.stats().inside, 0);
        s.wait_begin(StepOutReason::DiskIo).unwrap();
        assert!(matches!(
            s.begin().enter(),
            Err(GateError::Misuse(turnstile::Misuse::CallDuringWait))
        ));
        // That statement's end ended the declared wait too.
        assert_eq!(g.stats().stepped_out, 0);
    }
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn an_enter_after_a_forgotten_call_gives_its_slot_back_before_it_is_admitted_again() {
    // One ticket per admission: the forgotten call spent the last, so the next enter is an
    // admission while the session still holds a slot.
    let g = Gate::new(GateConfig::new(Policy::Classic).limit(4).tickets(1)).unwrap();
    {
        let mut s = g.session();
        let mut st = s.begin();
        drop(st.enter().unwrap()); // admitted, one ticket kept
        std::mem::forget(st.enter().unwrap()); // the last ticket; never exited
        assert_eq!(g.stats().inside, 1);
        let c = st.enter().unwrap();
        assert!(c.admitted());
        assert_eq!(g.stats().inside, 1, "the old slot went back first");
    }
    assert_eq!(g.stats().inside, 0, "nothing left counted");
}

#[test]
fn a_second_step_out_in_a_call_keeps_the_row_lock_waits_unchecked_re_entry() {
    let g = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let mut a = g.session();
    a.set_wait_timeout(Some(Duration::from_millis(20)));
    let mut st = a.begin();
    let mut call = st.enter().unwrap();
    call.step_out(StepOutReason::RowLockWait, || ());
    call.step_out(StepOutReason::DiskIo, || ());
    let mut b = g.session();
    assert!(b.enter().unwrap(), "b takes the only slot");
    // After a row-lock wait that began inside, the re-entry is unchecked: no wait.
    call.resume().unwrap();
    assert_eq!(g.stats().counters.unchecked_reentries, 1);
    drop(call);
    drop(st);
    b.exit().unwrap();
    b.end_statement();
    assert_eq!(g.stats().inside, 0);
}
