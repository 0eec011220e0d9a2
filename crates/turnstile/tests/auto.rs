//! `auto` through the real gate with real threads: the quantum, the step-out rule, the stall
//! detector, overload protection. The core's decisions (hot first, the age cap, lock holders
//! first, the controller) are tested with synthetic time in `policy/auto.rs`; its loom models
//! are in tests/loom.rs. No test asserts a timing: waits for another thread poll the gate's
//! snapshot under a watchdog.
#![cfg(not(loom))]

use std::thread;
use std::time::{Duration, Instant};

use turnstile::{Gate, GateConfig, GateError, OverloadReason, Policy, SessionState, StepOutReason};

#[path = "common/wait_for.rs"]
mod wait_for;
use wait_for::wait_for;

fn auto(limit: u32) -> GateConfig {
    GateConfig::new(Policy::Auto)
        .limit(limit)
        .adaptive_limit(false)
}

#[test]
fn the_default_gate_is_auto_starting_at_the_cpus_the_process_may_use() {
    let c = GateConfig::default();
    assert_eq!(c.policy, Policy::Auto);
    assert_eq!(c.limit, turnstile::available_cpus());
    assert!(c.adaptive_limit && c.max_waiting == 0 && c.queue_timeout.is_none());
    let g = Gate::new(c).unwrap();
    assert!(g.stats().auto.is_some());
    assert!(
        g.snapshot().to_string().contains("auto:"),
        "{}",
        g.snapshot()
    );
}

#[test]
fn the_slot_is_kept_between_calls_while_the_quantum_lasts_whatever_the_row_count() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let mut s = g.session();
    let mut stmt = s.begin();
    assert!(stmt.enter().unwrap().admitted());
    // Far more calls than any ticket allowance: one admission.
    for _ in 0..10_000 {
        assert!(!stmt.enter().unwrap().admitted());
    }
    assert!(stmt.is_inside());
    drop(stmt);
    assert_eq!(g.stats().counters.admissions, 1);
    assert_eq!(g.stats().inside, 0, "statement end frees the slot");
}

#[test]
fn a_spent_quantum_is_renewed_if_nobody_waits_and_given_up_at_a_later_exit_if_someone_does() {
    let g = Gate::new(auto(1).quantum(Duration::from_millis(1))).unwrap();
    let mut a = g.named_session("a");
    let mut stmt = a.begin();
    drop(stmt.enter().unwrap());
    // Calls 2 ms apart, nobody waiting: the quantum runs out again and again and is renewed.
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(2));
        drop(stmt.enter().unwrap());
        assert!(stmt.is_inside(), "renewed: nobody waits");
    }
    let g2 = g.clone();
    let waiter = thread::spawn(move || {
        let mut b = g2.named_session("b");
        let mut st = b.begin();
        let call = st.enter().unwrap();
        assert!(call.admitted());
    });
    wait_for(&g, "b queued", |s| s.queued == 1);
    // The clock is read every few calls (a chunk sized to the calls' pace, here one or two
    // calls): the slot is given up at the first check past the quantum.
    let mut calls = 0;
    while stmt.is_inside() {
        assert!(
            calls < 64,
            "kept the slot for {calls} slow calls with a waiter queued"
        );
        thread::sleep(Duration::from_millis(2));
        let call = stmt.enter().unwrap();
        assert!(!call.admitted(), "a re-entry, inside the quantum or not");
        drop(call);
        calls += 1;
    }
    waiter.join().unwrap();
    assert_eq!(g.stats().counters.handoffs, 1);
}

#[test]
fn a_statement_that_keeps_its_slot_past_its_quantum_beside_a_newer_waiter_counts_as_long_until_it_gives_way(
) {
    // A gate made after another has run: its quanta and its waiters' queueing times are read
    // on its own clock (a clock shared by the process once made such a gate see every waiter
    // as queued before any quantum began, so every holder gave way).
    let earlier = Gate::new(auto(1)).unwrap();
    drop(earlier.session().begin().enter().unwrap());
    thread::sleep(Duration::from_millis(30));
    let g = Gate::new(auto(1).quantum(Duration::from_millis(20))).unwrap();
    let long = |g: &Gate| g.stats().auto.unwrap().long_holders;
    let mut a = g.named_session("a");
    let mut stmt = a.begin();
    // Enough calls that the quantum has begun (it starts at the first clock check).
    for _ in 0..16 {
        drop(stmt.enter().unwrap());
    }
    let g2 = g.clone();
    let waiter = thread::spawn(move || {
        let mut b = g2.named_session("b");
        let mut st = b.begin();
        assert!(st.enter().unwrap().admitted());
    });
    wait_for(&g, "b queued", |s| s.queued == 1);
    // Past the quantum, the one waiter queued after it began: the holder keeps its slot and
    // is counted as a long statement (at the first clock check, within a chunk of calls).
    thread::sleep(Duration::from_millis(25));
    let mut calls = 0;
    while long(&g) == 0 {
        assert!(calls < 4096, "no check past the quantum in {calls} calls");
        drop(stmt.enter().unwrap());
        calls += 1;
    }
    assert_eq!(long(&g), 1);
    assert!(stmt.is_inside());
    assert_eq!(g.stats().queued, 1, "b still waits: {}", g.snapshot());
    assert!(
        g.snapshot()
            .to_string()
            .contains("1 long statements inside"),
        "{}",
        g.snapshot()
    );
    // The renewed quantum began after b queued: at its end the holder gives way, and is no
    // longer counted.
    thread::sleep(Duration::from_millis(25));
    calls = 0;
    while stmt.is_inside() {
        assert!(
            calls < 4096,
            "kept the slot for {calls} calls past its quantum"
        );
        drop(stmt.enter().unwrap());
        calls += 1;
    }
    waiter.join().unwrap();
    assert_eq!(long(&g), 0);
    drop(stmt);
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn max_waiting_is_refused_for_the_policies_that_have_no_queue_cap() {
    for &p in Policy::ALL.iter().filter(|&&p| p != Policy::Auto) {
        let e = GateConfig::new(p).max_waiting(1).validate().unwrap_err();
        assert!(
            matches!(
                e,
                turnstile::ConfigError::NotForPolicy {
                    field: "max_waiting",
                    ..
                }
            ),
            "{p:?}: {e:?}"
        );
        assert!(e.to_string().contains("does not apply"), "{e}");
        assert!(Gate::new(GateConfig::new(p).max_waiting(1)).is_err());
        assert!(GateConfig::new(p).validate().is_ok());
    }
    assert!(GateConfig::new(Policy::Auto)
        .max_waiting(1)
        .validate()
        .is_ok());
}

#[test]
fn a_step_out_that_keeps_the_slot_shows_the_session_in_its_call_or_between_calls_afterwards() {
    // (That the time shown is still the admission's is the unit test
    // `session::tests::a_step_out_or_a_loan_that_keeps_the_slot_restores_the_admissions_timestamp`.)
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let mut s = g.session();
    let state = |g: &Gate| g.snapshot().sessions[0].state;
    {
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        call.step_out(StepOutReason::SendingResults, || {});
        assert_eq!(state(&g), SessionState::InCall);
        drop(call);
        // Between calls (the slot kept for the quantum), a step-out comes back to that state.
        stmt.step_out(StepOutReason::FileSort, || {});
        assert_eq!(state(&g), SessionState::DeclaredInside);
    }
    // The explicit-call API: a declared wait that keeps the slot, inside a call.
    s.enter().unwrap();
    s.wait_begin(StepOutReason::FileSort).unwrap();
    s.wait_end().unwrap();
    assert_eq!(state(&g), SessionState::InCall);
    s.exit().unwrap();
    s.end_statement();
    assert_eq!(g.snapshot().sessions[0].state, SessionState::Outside);
}

#[test]
fn a_step_out_for_work_keeps_the_slot_and_one_for_a_wait_frees_it() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let mut s = g.session();
    let mut stmt = s.begin();
    let mut call = stmt.enter().unwrap();
    for reason in [StepOutReason::SendingResults, StepOutReason::FileSort] {
        let v = call.step_out(reason, || {
            let snap = g.snapshot();
            assert_eq!(snap.sessions[0].state, SessionState::SteppedOut(reason));
            assert_eq!(snap.inside, 1, "{reason:?}: the slot is kept for work");
            7
        });
        assert_eq!(v, 7);
        assert!(call.is_inside());
        assert_eq!(
            g.snapshot().sessions[0].state,
            SessionState::InCall,
            "{reason:?}: back in its call, not between calls"
        );
    }
    for reason in [
        StepOutReason::RowLockWait,
        StepOutReason::DiskIo,
        StepOutReason::CommitWait,
    ] {
        call.step_out(reason, || {
            assert_eq!(g.stats().inside, 0, "{reason:?}: a wait frees the slot");
        });
        assert!(!call.is_inside());
        call.resume().unwrap();
        assert!(call.is_inside());
    }
    drop(call);
    drop(stmt);
    let st = g.stats();
    assert_eq!((st.inside, st.stepped_out), (0, 0));
    assert_eq!(st.counters.step_outs, 5);
}

#[test]
fn a_session_back_from_a_row_lock_wait_runs_at_once_as_an_extra_when_its_slot_was_handed_on() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let mut w = g.named_session("lock-waiter");
    let mut stmt = w.begin();
    let mut call = stmt.enter().unwrap();
    let g2 = g.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let queued = thread::spawn(move || {
        let mut q = g2.named_session("queued");
        let mut st = q.begin();
        let _c = st.enter().unwrap();
        rx.recv().unwrap(); // holds the slot it was handed
    });
    wait_for(&g, "one queued", |s| s.queued == 1);
    call.step_out(StepOutReason::RowLockWait, || {
        wait_for(&g, "the freed slot handed on", |s| {
            s.inside == 1 && s.queued == 0
        });
    });
    call.resume().unwrap(); // does not wait: an extra place (1 extra ≤ limit 1)
    let snap = g.snapshot();
    let a = snap.auto.unwrap();
    assert_eq!((snap.inside, a.extra), (1, 1), "{snap}");
    assert!(snap.inside + a.extra <= 2, "never past twice the limit");
    drop(call);
    drop(stmt);
    assert_eq!(g.stats().auto.unwrap().extra, 0);
    tx.send(()).unwrap();
    queued.join().unwrap();
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn a_stall_where_every_holder_blocks_undeclared_is_broken_by_the_stall_check_and_counted() {
    // The holder sleeps inside its slot without declaring the wait (seed 004's naive
    // commit); the waiter's stall check raises the limit after a stall period.
    let g = Gate::new(GateConfig::new(Policy::Auto).limit(1)).unwrap();
    let mut h = g.named_session("blocked-holder");
    let g2 = g.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        let mut st = h.begin();
        let _c = st.enter().unwrap();
        rx.recv().unwrap(); // blocked, slot held, until the test lets go
    });
    wait_for(&g2, "the holder inside", |s| s.inside == 1);
    let mut w = g.named_session("waiter");
    let mut st = w.begin();
    let call = st.enter().unwrap();
    assert!(call.admitted());
    let a = g.stats().auto.unwrap();
    assert!(a.stall_ticks >= 1, "{a:?}");
    assert!(a.limit_raises >= 1 && g.limit() >= 2, "{a:?}");
    // The stall's raise is counted under a rule (idle CPUs, or no CPU reading yet), and the
    // reasons account for every move.
    let r = a.limit_reasons;
    assert!(r.windows >= 1 && r.fill >= 1, "{a:?}");
    assert_eq!(r.moves(), a.limit_raises + a.limit_cuts, "{a:?}");
    drop(call);
    drop(st);
    tx.send(()).unwrap();
    holder.join().unwrap();
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn a_stall_is_still_broken_after_the_waiter_keeping_the_stall_watch_gave_up() {
    // Only one waiter wakes on the stall period's timer (the first to queue); the others
    // sleep until their hand-off. When the keeper leaves the queue the watch passes on, and
    // the waiter it passes to is woken to take it: without that, this stall would last as
    // long as the holder blocks.
    let g = Gate::new(GateConfig::new(Policy::Auto).limit(1)).unwrap();
    let mut h = g.named_session("blocked-holder");
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let holder = thread::spawn(move || {
        let mut st = h.begin();
        let _c = st.enter().unwrap();
        rx.recv().unwrap(); // blocked, slot held, until the test lets go
    });
    wait_for(&g, "the holder inside", |s| s.inside == 1);
    let mut first = g.named_session("first");
    let cancel_first = first.canceler();
    let first = thread::spawn(move || {
        let mut st = first.begin();
        let admitted = st.enter().map(|c| c.admitted());
        admitted
    });
    wait_for(&g, "first queued", |s| s.queued == 1);
    let g2 = g.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<bool>();
    let second = thread::spawn(move || {
        let mut s = g2.named_session("second");
        let mut st = s.begin();
        let admitted = st.enter().unwrap().admitted();
        done_tx.send(admitted).unwrap();
    });
    wait_for(&g, "second queued", |s| s.queued == 2);
    cancel_first.cancel();
    // Cancelled, unless its own stall check (after a stall period) admitted it first.
    match first.join().unwrap() {
        Err(GateError::Cancelled { .. }) | Ok(true) => {}
        other => panic!("first: {other:?}"),
    }
    // A lost pass-on would leave `second` asleep until the holder lets go, which it does
    // only after this: fail (after a generous watchdog, not a timing) instead of hanging.
    let admitted = done_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("watchdog: the stall watch was lost, second never admitted");
    assert!(admitted, "second admitted while the holder still blocks");
    second.join().unwrap();
    let a = g.stats().auto.unwrap();
    assert!(a.stall_ticks >= 1 && g.limit() >= 2, "{a:?}");
    tx.send(()).unwrap();
    holder.join().unwrap();
    let s = g.stats();
    assert_eq!((s.inside, s.queued, s.waiting), (0, 0, 0), "{s:?}");
}

#[test]
fn a_full_queue_refuses_with_a_typed_reason_and_leaves_no_stale_state() {
    let g = Gate::new(auto(1).max_waiting(1)).unwrap();
    let mut h = g.session();
    let mut hs = h.begin();
    let hc = hs.enter().unwrap();
    let g2 = g.clone();
    let queued = thread::spawn(move || {
        let mut q = g2.session();
        drop(q.begin().enter().unwrap());
    });
    wait_for(&g, "one queued", |s| s.queued == 1);
    let mut r = g.named_session("refused");
    let err = r.begin().enter().unwrap_err();
    assert_eq!(
        err,
        GateError::Overloaded {
            reason: OverloadReason::QueueFull { max_waiting: 1 },
            waited: Duration::ZERO
        }
    );
    assert!(err.to_string().contains("max_waiting"), "{err}");
    let snap = g.snapshot();
    assert_eq!(
        (snap.inside, snap.queued, snap.waiting),
        (1, 1, 1),
        "{snap}"
    );
    assert_eq!(snap.auto.unwrap().rejections, 1);
    drop(hc);
    drop(hs);
    queued.join().unwrap();
    // The refused session works once there is room.
    assert!(r.begin().enter().unwrap().admitted());
}

#[test]
fn a_queue_timeout_refuses_as_overloaded_and_leaves_nothing_counted() {
    let timeout = Duration::from_millis(30);
    let g = Gate::new(auto(1).queue_timeout(Some(timeout))).unwrap();
    let mut h = g.session();
    let mut hs = h.begin();
    let _hc = hs.enter().unwrap();
    let mut w = g.session();
    match w.begin().enter() {
        Err(GateError::Overloaded {
            reason: OverloadReason::QueueTimeout { timeout: t },
            ..
        }) => assert_eq!(t, timeout, "the error names the configured deadline"),
        other => panic!("expected a queue timeout, got {other:?}"),
    }
    let snap = g.snapshot();
    assert_eq!(
        (snap.inside, snap.queued, snap.waiting),
        (1, 0, 0),
        "{snap}"
    );
    // A session's own shorter timeout is its own error.
    w.set_wait_timeout(Some(Duration::from_millis(1)));
    assert!(matches!(w.begin().enter(), Err(GateError::TimedOut { .. })));
}

#[test]
fn a_panic_inside_an_auto_call_frees_the_slot_for_the_next_session() {
    let g = Gate::new(auto(1)).unwrap();
    let g2 = g.clone();
    let r = thread::spawn(move || {
        let mut s = g2.session();
        let mut st = s.begin();
        let _c = st.enter().unwrap();
        panic!("inside the engine");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(g.stats().inside, 0);
    let mut t = g.session();
    assert!(t.begin().enter().unwrap().admitted());
}

#[test]
fn overload_errors_are_refused_by_config_validation_when_out_of_range() {
    for q in [Duration::ZERO, Duration::from_nanos(500)] {
        let e = GateConfig::new(Policy::Auto)
            .quantum(q)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("quantum"), "{q:?}: {e}");
    }
    assert!(GateConfig::new(Policy::Auto)
        .quantum(Duration::from_micros(1))
        .validate()
        .is_ok());
    let e = GateConfig::new(Policy::Auto)
        .quantum(Duration::from_secs(5))
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("quantum"), "{e}");
}

#[test]
fn a_thread_blocked_on_a_turnstile_mutex_lends_its_slot_and_takes_it_back_after() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let m = std::sync::Arc::new(turnstile::Mutex::new(0u32));
    // Another thread holds the mutex (outside the gate).
    let guard_holder = hold_mutex(&m);
    // The only slot's holder blocks on the mutex, without declaring anything.
    let (g2, m2) = (g.clone(), m.clone());
    let blocked = thread::spawn(move || {
        let mut s = g2.named_session("blocked-on-mutex");
        let mut st = s.begin();
        let call = st.enter().unwrap();
        *m2.lock() += 1; // parks: the slot is lent
        assert!(call.is_inside(), "back inside after the lock");
        drop(call);
    });
    let snap = wait_for(&g, "the holder stepped out for the lock wait", |s| {
        s.sessions
            .iter()
            .any(|x| x.state == SessionState::SteppedOut(StepOutReason::LockWait))
    });
    assert_eq!(snap.inside, 0, "{snap}");
    // The lent slot admits another session at once.
    let mut other = g.named_session("other");
    let mut st = other.begin();
    assert!(st.enter().unwrap().admitted());
    assert_eq!(g.stats().inside, 1);
    // Release the mutex while `other` still holds the slot: the blocked thread takes its
    // slot back above the limit (allowance: twice the limit).
    guard_holder.1.send(()).unwrap();
    guard_holder.0.join().unwrap();
    blocked.join().unwrap();
    let st_ = g.stats();
    assert!(st_.auto.unwrap().reclaims_over >= 1, "{st_:?}");
    assert!(st_.counters.step_outs >= 1);
    drop(st);
    assert_eq!(g.stats().inside, 0);
    assert_eq!(g.stats().stepped_out, 0);
    assert_eq!(*m.lock(), 2);
}

#[test]
fn a_condvar_wait_inside_an_auto_gate_frees_the_slot_for_its_length() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let pair = std::sync::Arc::new((turnstile::Mutex::new(false), turnstile::Condvar::new()));
    let (g2, p2) = (g.clone(), pair.clone());
    let waiter = thread::spawn(move || {
        let mut s = g2.named_session("condvar-waiter");
        let mut st = s.begin();
        let call = st.enter().unwrap();
        let (m, cv) = &*p2;
        let mut ready = m.lock();
        cv.wait_while(&mut ready, |r| !*r);
        drop(ready);
        assert!(call.is_inside());
    });
    wait_for(&g, "the waiter stepped out", |s| {
        s.inside == 0 && s.stepped_out == 1
    });
    let mut other = g.session();
    assert!(
        other.begin().enter().unwrap().admitted(),
        "the lent slot is free"
    );
    let (m, cv) = &*pair;
    *m.lock() = true;
    cv.notify_all();
    waiter.join().unwrap();
    let s = g.stats();
    assert_eq!((s.inside, s.stepped_out), (0, 0));
}

#[test]
fn only_an_auto_session_lends_its_slot_when_it_parks_on_a_lock() {
    use turnstile::mutex::Instrumented;
    for (policy, lends) in [(Policy::Classic, false), (Policy::Auto, true)] {
        let mut config = GateConfig::new(policy).limit(1);
        if policy.uses("adaptive_limit") {
            config = config.adaptive_limit(false);
        }
        let g = Gate::new(config).unwrap();
        let m = std::sync::Arc::new(Instrumented::new("lends-test", ()));
        let guard = m.lock();
        let (g2, m2) = (g.clone(), m.clone());
        let (stat_tx, stat_rx) = std::sync::mpsc::channel();
        let t = thread::spawn(move || {
            stat_tx.send(this_thread_stat()).unwrap();
            let mut s = g2.session();
            let mut st = s.begin();
            let _c = st.enter().unwrap();
            drop(m2.lock());
        });
        wait_parked(&stat_rx.recv().unwrap(), "lends-test");
        if lends {
            wait_for(&g, "auto lends the slot while parked", |s| s.inside == 0);
        } else {
            // Parked: had it lent, it would have by now (the auto arm shows the same wait
            // does lend).
            assert_eq!(g.stats().inside, 1, "{policy}: keeps its slot");
            assert_eq!(g.stats().counters.step_outs, 0, "{policy}");
        }
        drop(guard);
        t.join().unwrap();
        assert_eq!(g.stats().inside, 0, "{policy}");
    }
}

/// Queues a session `b` behind the statement `st`, which holds a one-slot gate, ends `st` so
/// that `b` gets the slot, and returns `b`'s thread, which holds it until told.
fn hand_over_to_a_holder(
    g: &Gate,
    st: turnstile::Statement<'_>,
) -> (thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let g2 = g.clone();
    let b = thread::spawn(move || {
        let mut s = g2.named_session("b");
        let mut st = s.begin();
        let _call = st.enter().unwrap();
        go_rx.recv().unwrap();
    });
    wait_for(g, "b queued", |s| s.queued == 1);
    drop(st);
    // Running, not only handed the slot: while a hand-off is pending, a newcomer may run in
    // its place (FLIFO's rule), and the caller's next waiter must queue.
    wait_for(g, "b inside and running", |s| {
        s.inside == 1 && s.queued == 0 && s.auto.is_some_and(|a| a.pending == 0)
    });
    (b, go_tx)
}

#[test]
fn an_open_transaction_comes_back_ahead_of_transactions_not_yet_begun() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let mut a = g.named_session("a");
    a.set_in_transaction(true);
    let mut st = a.begin();
    assert!(st.enter().unwrap().admitted());
    // `b` (no transaction) gets the slot at the end of `a`'s statement.
    let (b, go_tx) = hand_over_to_a_holder(&g, st);
    // `c` (no transaction) queues behind `b`.
    let g3 = g.clone();
    let c = thread::spawn(move || {
        let mut s = g3.named_session("c");
        assert!(s.begin().enter().unwrap().admitted());
    });
    wait_for(&g, "c queued", |s| s.queued == 1);
    // `a`'s next statement: its transaction was admitted already, so it runs at once as an
    // extra admission while `c` stays queued.
    let mut st = a.begin();
    assert!(st.enter().unwrap().admitted());
    let s = g.stats();
    assert_eq!(s.queued, 1, "c still queued: {s:?}");
    assert_eq!(s.counters.unchecked_reentries, 1, "{s:?}");
    drop(st);
    // A new transaction waits its turn again: `a` queues behind `c`.
    a.set_in_transaction(false);
    a.set_in_transaction(true);
    let a_thread = thread::spawn(move || {
        assert!(a.begin().enter().unwrap().admitted());
    });
    wait_for(&g, "a and c queued", |s| s.queued == 2);
    go_tx.send(()).unwrap();
    b.join().unwrap();
    c.join().unwrap();
    a_thread.join().unwrap();
    let s = g.stats();
    assert_eq!(
        (s.inside, s.queued, s.counters.unchecked_reentries),
        (0, 0, 1),
        "{s:?}"
    );
}

#[test]
fn autocommit_statements_each_wait_their_turn() {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let mut a = g.named_session("a");
    let mut st = a.begin();
    drop(st.enter().unwrap());
    let (b, go_tx) = hand_over_to_a_holder(&g, st);
    // No transaction declared: `a`'s next statement queues behind `b`.
    let a_thread = thread::spawn(move || {
        assert!(a.begin().enter().unwrap().admitted());
    });
    wait_for(&g, "a queued", |s| s.queued == 1);
    assert_eq!(g.stats().counters.unchecked_reentries, 0);
    go_tx.send(()).unwrap();
    b.join().unwrap();
    a_thread.join().unwrap();
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn a_session_moved_mid_call_while_its_old_thread_parks_gives_its_slot_back_once() {
    // The raw enter/exit API lets a session move to another thread inside a call. The thread
    // that admitted it still has it registered, so when that thread parks on a turnstile lock
    // it lends the moved session's slot; the session then leaves on its new thread while the
    // slot is lent (the step-out word's slow path), and the old thread's reclaim afterwards
    // finds nothing to take back. The slot is given back once, and every gauge returns to 0.
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let m = std::sync::Arc::new(turnstile::Mutex::new(0u32));
    let (locked_tx, locked_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let m_holder = m.clone();
    let holder = thread::spawn(move || {
        let mut v = m_holder.lock();
        locked_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        *v += 1;
    });
    locked_rx.recv().unwrap();
    let (moved_tx, moved_rx) = std::sync::mpsc::channel::<turnstile::Session>();
    let (g1, m1) = (g.clone(), m.clone());
    let old = thread::spawn(move || {
        let mut s = g1.named_session("moved");
        assert!(s.enter().unwrap(), "admitted on this thread");
        moved_tx.send(s).unwrap();
        *m1.lock() += 1; // parks: lends the slot it registered
    });
    let mut s = moved_rx.recv().unwrap();
    let snap = wait_for(&g, "the old thread lent the moved session's slot", |st| {
        st.inside == 0 && st.stepped_out == 1
    });
    assert_eq!(snap.counters.step_outs, 1, "{snap}");
    // Leaves on this thread while lent: nothing is given back a second time.
    s.exit().unwrap();
    s.end_statement();
    assert_eq!(g.stats().inside, 0);
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    old.join().unwrap();
    let st = g.stats();
    assert_eq!(st.inside, 0, "{st:?}");
    assert_eq!(st.stepped_out, 0, "the loan ended with the leave: {st:?}");
    assert_eq!(*m.lock(), 2);
    // The gate still admits exactly its limit.
    let mut a = g.session();
    assert!(a.enter().unwrap());
    assert_eq!(g.stats().inside, 1);
    a.exit().unwrap();
    a.end_statement();
    drop(s);
    assert_eq!(g.stats().inside, 0);
}

/// This thread's `/proc` stat file (its scheduler state follows the name in parentheses).
fn this_thread_stat() -> std::path::PathBuf {
    let rel = std::fs::read_link("/proc/thread-self").expect("Linux /proc");
    std::path::Path::new("/proc").join(rel).join("stat")
}

/// Waits until the thread whose stat file is `stat` is registered as waiting for the
/// instrumented lock `lock` and then asleep: parked (a turnstile lock lends the slot before
/// it parks, so whatever it lends is lent by then). Registration is read first, so the sleep
/// seen is one after it.
fn wait_parked(stat: &std::path::Path, lock: &str) {
    use turnstile::mutex::current_waiters;
    let start = Instant::now();
    loop {
        let registered = current_waiters().iter().any(|w| w.lock == lock);
        let asleep = || {
            std::fs::read_to_string(stat)
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()
                        .map(|r| r.trim_start().starts_with('S'))
                })
                .unwrap_or(false)
        };
        if registered && asleep() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "watchdog: never parked on {lock}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Another thread holds `m` until the returned sender is used (or dropped).
fn hold_mutex(
    m: &std::sync::Arc<turnstile::Mutex<u32>>,
) -> (thread::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let m = m.clone();
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let h = thread::spawn(move || {
        let mut v = m.lock();
        locked_tx.send(()).unwrap();
        let _ = go_rx.recv();
        *v += 1;
    });
    locked_rx.recv().unwrap();
    (h, go_tx)
}

/// On a thread that has served `before` (each admitted and done with, in turn), session `a`
/// is admitted and parks on a mutex another thread holds: its slot must be lent.
fn lends_after(before: impl FnOnce(&Gate) -> turnstile::Session + Send + 'static) {
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let m = std::sync::Arc::new(turnstile::Mutex::new(0u32));
    let (holder, go) = hold_mutex(&m);
    let (g2, m2) = (g.clone(), m.clone());
    let t = thread::spawn(move || {
        let mut a = before(&g2);
        let mut st = a.begin();
        let call = st.enter().unwrap();
        *m2.lock() += 1; // parks: lends a's slot
        assert!(call.is_inside());
    });
    let snap = wait_for(&g, "a's slot lent while its thread parks", |s| {
        s.inside == 0 && s.stepped_out == 1
    });
    assert_eq!(snap.counters.step_outs, 1, "{snap}");
    go.send(()).unwrap();
    holder.join().unwrap();
    t.join().unwrap();
    assert_eq!(g.stats().inside, 0);
    assert_eq!(g.stats().stepped_out, 0);
}

#[test]
fn a_thread_serving_two_sessions_in_turn_lends_the_slot_of_the_one_inside() {
    // A connection pool's thread: a, then b, then a again, which then parks.
    lends_after(|g| {
        let mut a = g.named_session("a");
        let mut b = g.named_session("b");
        drop(a.begin().enter().unwrap());
        drop(b.begin().enter().unwrap());
        a
    });
}

#[test]
fn a_session_dropped_on_the_thread_leaves_the_threads_other_session_lending() {
    lends_after(|g| {
        let mut a = g.named_session("a");
        drop(a.begin().enter().unwrap());
        let mut b = g.named_session("b");
        drop(b.begin().enter().unwrap());
        drop(b);
        a
    });
}

#[test]
fn a_reclaim_queued_behind_undeclared_waits_runs_the_stall_check_and_is_admitted() {
    // Adaptive, limit 1. `r` lends its slot while it waits for a mutex; meanwhile two
    // sessions take the slots and block in waits nobody declared (a std channel). When `r`
    // has its lock, 2 are inside, twice the limit: its reclaim queues first in line, alone,
    // while the lock is held. Its wait must keep the stall watch and run the stall check,
    // which raises the limit and hands it a slot; a wait without the check would sit there
    // until the undeclared waits ended.
    let g = Gate::new(
        GateConfig::new(Policy::Auto)
            .limit(1)
            .quantum(Duration::from_secs(1)),
    )
    .unwrap();
    let m = std::sync::Arc::new(turnstile::Mutex::new(0u32));
    let (holder, go) = hold_mutex(&m);
    let (g2, m2) = (g.clone(), m.clone());
    let r = thread::spawn(move || {
        let mut s = g2.named_session("r");
        let mut st = s.begin();
        let call = st.enter().unwrap();
        *m2.lock() += 1; // lends, then reclaims
        assert!(call.is_inside());
    });
    wait_for(&g, "r lent its slot", |s| {
        s.inside == 0 && s.stepped_out == 1
    });
    g.set_limit(2).unwrap();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let stop_rx = std::sync::Arc::new(std::sync::Mutex::new(stop_rx));
    let blocked: Vec<_> = ["x", "y"]
        .into_iter()
        .map(|name| {
            let (g3, rx) = (g.clone(), stop_rx.clone());
            thread::spawn(move || {
                let mut s = g3.named_session(name);
                let mut st = s.begin();
                let _call = st.enter().unwrap();
                let _ = rx.lock().unwrap().recv(); // undeclared: holds the slot
            })
        })
        .collect();
    wait_for(&g, "x and y inside", |s| s.inside == 2);
    g.set_limit(1).unwrap();
    go.send(()).unwrap();
    holder.join().unwrap();
    let snap = wait_for(&g, "r's reclaim admitted by the stall check", |s| {
        r.is_finished() && s.auto.as_ref().is_some_and(|a| a.stall_ticks >= 1) && s.queued == 0
    });
    assert!(snap.limit >= 2, "the stall check raised the limit: {snap}");
    drop(stop_tx);
    for t in blocked {
        t.join().unwrap();
    }
    r.join().unwrap();
    let st = g.stats();
    assert_eq!((st.inside, st.queued, st.stepped_out), (0, 0, 0), "{st:?}");
}

#[test]
fn a_session_moved_to_another_thread_between_calls_lends_from_there_and_not_from_the_old_one() {
    // The session keeps its slot between calls (1 s quantum), moves to this thread and calls
    // again here (a re-entry, no admission): from then on this thread's parks lend its slot,
    // and the old thread's lend nothing of it (a C engine's worker pool hands sessions
    // around).
    use turnstile::mutex::Instrumented;
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let m = std::sync::Arc::new(Instrumented::new("moved-test", ()));
    let (to_here, from_old) = std::sync::mpsc::channel::<turnstile::Session>();
    let (old_go_tx, old_go_rx) = std::sync::mpsc::channel::<()>();
    let (g1, m1) = (g.clone(), m.clone());
    let (stat_tx, stat_rx) = std::sync::mpsc::channel();
    let old = thread::spawn(move || {
        stat_tx.send(this_thread_stat()).unwrap();
        let mut s = g1.named_session("moved");
        assert!(s.enter().unwrap(), "admitted on the old thread");
        s.exit().unwrap();
        to_here.send(s).unwrap();
        old_go_rx.recv().unwrap();
        drop(m1.lock()); // parks: must lend nothing of the moved session's slot
    });
    let mut s = from_old.recv().unwrap();
    assert!(
        !s.enter().unwrap(),
        "a re-entry on this thread: the slot was kept"
    );
    let guard = m.lock();
    old_go_tx.send(()).unwrap();
    // Parked: had it lent, it would have by now (the second half shows the same wait does
    // lend on the right thread).
    wait_parked(&stat_rx.recv().unwrap(), "moved-test");
    let st = g.stats();
    assert_eq!((st.inside, st.stepped_out), (1, 0), "{st:?}");
    assert_eq!(st.counters.step_outs, 0, "{st:?}");
    drop(guard);
    old.join().unwrap();
    s.exit().unwrap();
    // The next thread, inside a call, parks on the lock another thread holds: it lends.
    let guard = m.lock();
    let g2 = g.clone();
    let (m2, parked) = (
        m.clone(),
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    let p2 = parked.clone();
    let here = thread::spawn(move || {
        let mut s = s;
        // It moves once more, to this thread: the re-entry takes the slot over.
        assert!(!s.enter().unwrap());
        p2.store(true, std::sync::atomic::Ordering::Relaxed);
        drop(m2.lock());
        assert_eq!(g2.stats().stepped_out, 0, "taken back after the lock");
        s.exit().unwrap();
        s.end_statement();
    });
    wait_for(
        &g,
        "the moved session lent its slot while its new thread parks",
        |st| {
            parked.load(std::sync::atomic::Ordering::Relaxed)
                && st.inside == 0
                && st.stepped_out == 1
        },
    );
    drop(guard);
    here.join().unwrap();
    let st = g.stats();
    assert_eq!((st.inside, st.stepped_out), (0, 0), "{st:?}");
    assert_eq!(st.counters.step_outs, 1, "{st:?}");
}

#[test]
fn a_queued_reclaim_and_the_moved_sessions_own_wait_are_both_handed_their_slots() {
    // A session admitted on thread A moves to this thread mid-call (nothing marks that move)
    // while A, parked on a mutex, lent its slot. With the gate at twice its limit, A's
    // reclaim queues; the session, which left meanwhile, queues again from another thread.
    // One raise releases both: each wait must see its own release (the reclaim waits on its
    // thread's record, not the session's).
    let g = Gate::new(auto(2).quantum(Duration::from_secs(1))).unwrap();
    let m = std::sync::Arc::new(turnstile::Mutex::new(()));
    let held = m.lock();
    let (tx, rx) = std::sync::mpsc::channel();
    let a = {
        let (g, m) = (g.clone(), m.clone());
        thread::spawn(move || {
            let mut s = g.named_session("moved");
            assert!(s.enter().unwrap());
            tx.send(s).unwrap(); // mid-call: this thread still runs the call it entered
            let _g = m.lock(); // parks: lends; then reclaims through the queue
        })
    };
    let mut s = rx.recv().unwrap();
    wait_for(&g, "A lent the session's slot", |st| {
        st.stepped_out == 1 && st.inside == 0
    });
    let (mut d1, mut d2) = (g.session(), g.session());
    assert!(d1.enter().unwrap() && d2.enter().unwrap());
    g.set_limit(1).unwrap(); // 2 inside: twice the limit, so a reclaim queues
    drop(held);
    wait_for(&g, "A's reclaim queued", |st| st.queued == 1);
    s.end_statement(); // leaves while lent: gives nothing back
    let b = thread::spawn(move || {
        assert!(s.enter().unwrap());
        s.exit().unwrap();
        s.end_statement();
    });
    wait_for(&g, "the session queued too", |st| st.queued == 2);
    g.set_limit(10).unwrap();
    wait_for(&g, "both waits handed their slots", |_| {
        a.is_finished() && b.is_finished()
    });
    a.join().unwrap();
    b.join().unwrap();
    d1.exit().unwrap();
    d2.exit().unwrap();
    drop((d1, d2));
    let st = g.stats();
    assert_eq!((st.inside, st.queued, st.stepped_out), (0, 0, 0), "{st:?}");
}

/// One round of a queued reclaim: `worker` (its own thread) is admitted on `g`, parks on `m`
/// (lending its slot), and when `m` is released its reclaim must queue (two other sessions
/// fill the gate and the limit is lowered to 1); they leave and hand the slot to it.
/// `while_queued` runs while the reclaim waits in the queue.
fn queued_reclaim_round(
    g: &Gate,
    m: &std::sync::Arc<turnstile::mutex::Instrumented<()>>,
    to_worker: &std::sync::mpsc::Sender<(Gate, std::sync::Arc<std::sync::atomic::AtomicBool>)>,
    round: usize,
    while_queued: impl Fn(),
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let held = m.lock();
    let got = Arc::new(AtomicBool::new(false));
    to_worker.send((g.clone(), got.clone())).unwrap();
    wait_for(g, "the worker lent its slot", |s| {
        s.inside == 0 && s.stepped_out == 1
    });
    let (mut d1, mut d2) = (g.session(), g.session());
    assert!(d1.enter().unwrap() && d2.enter().unwrap());
    g.set_limit(1).unwrap(); // twice the limit inside: the reclaim queues
    drop(held);
    wait_for(g, "the worker's reclaim queued", |s| s.queued == 1);
    while_queued();
    d1.exit().unwrap();
    d1.end_statement();
    d2.exit().unwrap();
    d2.end_statement(); // hands the slot to the reclaim
    wait_for(
        g,
        &format!("round {round}: the reclaim was handed its slot"),
        |_| got.load(Ordering::SeqCst),
    );
    wait_for(g, "everyone out", |s| {
        s.inside == 0 && s.queued == 0 && s.stepped_out == 0
    });
    g.set_limit(2).unwrap();
}

#[test]
fn a_reclaim_queued_on_a_second_gate_is_woken_whatever_the_first_gates_wait_ids_were() {
    // One thread's queued reclaims wait on one wake record, and wait ids are per gate: a
    // release left from gate 1 (id 1) was taken as stale against gate 2's wait (id 0), and
    // the thread slept for ever holding the lock it had just taken (the server's commit
    // mutex, after `SET GLOBAL` rebuilt the gate).
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    let m = Arc::new(turnstile::mutex::Instrumented::new("commit", ()));
    let (tx, rx) = mpsc::channel::<(Gate, Arc<AtomicBool>)>();
    let m_w = m.clone();
    let worker = thread::spawn(move || {
        for (g, got) in rx {
            let mut s = g.named_session("worker");
            assert!(s.enter().unwrap());
            let guard = m_w.lock(); // parks: lends; reclaims through the queue
            got.store(true, Ordering::SeqCst);
            drop(guard);
            s.exit().unwrap();
            s.end_statement();
        }
    });
    let cfg = || auto(2).quantum(Duration::from_secs(1));
    let (g1, g2) = (Gate::new(cfg()).unwrap(), Gate::new(cfg()).unwrap());
    for (round, g) in [&g1, &g1, &g2, &g2].into_iter().enumerate() {
        queued_reclaim_round(g, &m, &tx, round, || {
            if round == 0 {
                // The reclaim's queue wait is the gate's, not the lock's: the lock shows
                // held, and the thread is not listed waiting for it.
                assert!(
                    turnstile::mutex::current_waiters()
                        .iter()
                        .all(|w| w.lock != "commit"),
                    "listed waiting for the lock it holds"
                );
                assert!(m.report().holder.is_some(), "the lock shows a holder");
            }
        });
    }
    drop(tx);
    worker.join().unwrap();
}

#[test]
fn a_thread_parking_between_calls_of_its_session_lends_nothing() {
    // Between calls no thread runs the session's call, so none lends the slot it keeps (the
    // session may be handed to another thread): the park leaves it counted, shown between
    // calls.
    use turnstile::mutex::Instrumented;
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let m = std::sync::Arc::new(Instrumented::new("between-calls", ()));
    let held = m.lock();
    let (g2, m2) = (g.clone(), m.clone());
    let (stat_tx, stat_rx) = std::sync::mpsc::channel();
    let t = thread::spawn(move || {
        stat_tx.send(this_thread_stat()).unwrap();
        let mut s = g2.session();
        assert!(s.enter().unwrap());
        s.exit().unwrap(); // keeps its slot between calls
        drop(m2.lock()); // parks between calls
        let state = g2.snapshot().sessions[0].state;
        s.end_statement();
        state
    });
    wait_parked(&stat_rx.recv().unwrap(), "between-calls");
    let snap = g.snapshot();
    assert_eq!((snap.inside, snap.stepped_out), (1, 0), "{snap}");
    assert_eq!(snap.sessions[0].state, SessionState::DeclaredInside);
    drop(held);
    assert_eq!(t.join().unwrap(), SessionState::DeclaredInside);
    assert_eq!(g.stats().counters.step_outs, 0);
}

#[test]
fn a_new_thread_on_a_dead_threads_stack_lends_for_a_session_it_admits() {
    // The token is a thread-local's address: a thread given a dead thread's stack has its
    // token, and took a session the dead thread had recorded for its own without recording
    // it (its lock waits lent nothing), until a record's drop at thread exit reset the
    // session's owner.
    let g = Gate::new(auto(1).quantum(Duration::from_secs(1))).unwrap();
    let s = g.session();
    let s = thread::spawn(move || {
        let mut s = s;
        assert!(s.enter().unwrap());
        s.exit().unwrap();
        s.end_statement();
        s
    })
    .join()
    .unwrap();
    let m = std::sync::Arc::new(turnstile::Mutex::new(()));
    let held = m.lock();
    let m2 = m.clone();
    let t = thread::spawn(move || {
        let mut s = s;
        assert!(s.enter().unwrap());
        drop(m2.lock()); // must lend
        s.exit().unwrap();
        s.end_statement();
    });
    wait_for(&g, "the session on the new thread lent its slot", |s| {
        s.inside == 0 && s.stepped_out == 1
    });
    drop(held);
    t.join().unwrap();
}
