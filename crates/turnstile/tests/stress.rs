//! Invariants under load: many threads, random statement lengths, step-outs, cancellations,
//! timeouts and limit changes. Each run is bounded in time and guarded by a watchdog, so a lost
//! wake-up fails the test instead of hanging it. Longer runs: `TURNSTILE_STRESS_SECS=30 cargo
//! test --release -p turnstile --test stress -- --nocapture`.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use turnstile::{Gate, GateConfig, GateError, Policy, StepOutReason};

/// Threads currently holding a slot, as the workload itself counts them (independent of the
/// gate's own counters), and the most ever seen.
#[derive(Default)]
struct Occupancy {
    now: AtomicU32,
    max: AtomicU32,
}

impl Occupancy {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A tiny deterministic PRNG (xorshift) so each thread's workload is reproducible.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

struct Run {
    policy: Policy,
    limit: u32,
    threads: usize,
    tickets: u32,
    cancel_and_timeouts: bool,
    change_limits: Option<(u32, u32)>,
}

struct Outcome {
    /// `auto`: the largest limit in force during the run.
    limit_max: u32,
    max_inside: u32,
    statements: u64,
    errors: u64,
}

fn stress_secs() -> f64 {
    std::env::var("TURNSTILE_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.4)
}

fn run(r: Run) -> Outcome {
    run_with(r, |c| c)
}

/// `auto` under stress. Its quantum is set to a second, longer than a run, so that its
/// sessions leave only at statement end and around waits, where the workload can count them
/// exactly (a quantum's end is decided inside the exit); the quantum itself is tested in
/// tests/auto.rs.
fn run_auto(r: Run, adaptive: bool) -> Outcome {
    run_with(r, |c| {
        c.quantum(Duration::from_secs(1)).adaptive_limit(adaptive)
    })
}

fn run_with(r: Run, tune: impl FnOnce(GateConfig) -> GateConfig) -> Outcome {
    let gate = Gate::new(tune(GateConfig::new(r.policy).innodb_settings(
        r.limit,
        r.tickets,
        Duration::from_micros(200),
    )))
    .unwrap();
    let occ = Arc::new(Occupancy::default());
    let stop = Arc::new(AtomicBool::new(false));
    let statements = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let admissions_seen = Arc::new(AtomicU64::new(0));
    let mut cancelers = Vec::new();
    let mut handles = Vec::new();
    for t in 0..r.threads {
        let mut session = gate.named_session(format!("t{t}"));
        cancelers.push(session.canceler());
        let (occ, stop, statements, errors, admissions_seen) = (
            occ.clone(),
            stop.clone(),
            statements.clone(),
            errors.clone(),
            admissions_seen.clone(),
        );
        let cancel_and_timeouts = r.cancel_and_timeouts;
        handles.push(thread::spawn(move || {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) * 0x1000_0001));
            if cancel_and_timeouts && t % 3 == 0 {
                session.set_wait_timeout(Some(Duration::from_micros(300)));
            }
            while !stop.load(Ordering::Relaxed) {
                let mut stmt = session.begin();
                let calls = 1 + rng.below(12);
                'calls: for _ in 0..calls {
                    let mut call = match stmt.enter() {
                        Ok(c) => c,
                        Err(GateError::Cancelled { .. } | GateError::TimedOut { .. }) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            break 'calls;
                        }
                        Err(e) => panic!("unexpected gate error {e}"),
                    };
                    if call.admitted() {
                        occ.enter();
                        admissions_seen.fetch_add(1, Ordering::Relaxed);
                    }
                    // Hold the slot while not running now and then (a page read, a preemption),
                    // so that more threads want in than there are cores and the waiting paths run.
                    match rng.below(32) {
                        0 => thread::sleep(Duration::from_micros(100)),
                        1..=8 => thread::yield_now(),
                        _ => {
                            for _ in 0..rng.below(200) {
                                std::hint::spin_loop();
                            }
                        }
                    }
                    if rng.below(16) == 0 {
                        occ.leave();
                        call.step_out(StepOutReason::DiskIo, thread::yield_now);
                        match call.resume() {
                            Ok(()) => {
                                occ.enter();
                                admissions_seen.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(_) => {
                                errors.fetch_add(1, Ordering::Relaxed);
                                break 'calls;
                            }
                        }
                    }
                    if call.tickets() == 0 {
                        occ.leave(); // this exit really leaves
                    }
                    drop(call);
                }
                if stmt.is_inside() {
                    occ.leave();
                }
                drop(stmt);
                statements.fetch_add(1, Ordering::Relaxed);
                if rng.below(8) == 0 {
                    thread::yield_now();
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs_f64(stress_secs());
    let mut rng = Rng(42);
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(2));
        if r.cancel_and_timeouts {
            cancelers[rng.below(cancelers.len() as u64) as usize].cancel();
        }
        if let Some((lo, hi)) = r.change_limits {
            let l = lo + rng.below((hi - lo + 1) as u64) as u32;
            gate.set_limit(l).unwrap();
        }
    }
    if let Some((_, hi)) = r.change_limits {
        gate.set_limit(hi).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    // Watchdog: every thread must finish; a lost wake-up would leave one blocked forever.
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for h in handles {
            h.join().expect("worker panicked");
        }
        tx.send(()).unwrap();
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        panic!(
            "watchdog: workers did not finish (lost wake-up?)\n{}",
            gate.snapshot()
        );
    }
    let snap = gate.snapshot();
    assert_eq!(snap.inside, 0, "{:?}: a slot leaked\n{snap}", r.policy);
    assert_eq!((snap.queued, snap.sleeping), (0, 0), "{snap}");
    assert_eq!(occ.now.load(Ordering::SeqCst), 0);
    assert_eq!(
        snap.counters.admissions,
        admissions_seen.load(Ordering::Relaxed),
        "every admission the gate counted was seen by the workload"
    );
    let errors = errors.load(Ordering::Relaxed);
    assert_eq!(
        snap.counters.cancellations + snap.counters.timeouts,
        errors,
        "every failed wait is counted once"
    );
    Outcome {
        limit_max: snap.auto.map_or(0, |a| a.limit_max),
        max_inside: occ.max.load(Ordering::SeqCst),
        statements: statements.load(Ordering::Relaxed),
        errors,
    }
}

fn base(policy: Policy) -> Run {
    Run {
        policy,
        limit: 3,
        threads: 24,
        tickets: 5,
        cancel_and_timeouts: false,
        change_limits: None,
    }
}

#[test]
fn classic_never_has_more_threads_inside_than_the_limit() {
    let o = run(base(Policy::Classic));
    assert!(o.max_inside <= 3, "max inside {}", o.max_inside);
    assert!(o.statements > 0);
}

#[test]
fn polling_never_has_more_threads_inside_than_the_limit() {
    let o = run(base(Policy::Polling));
    assert!(o.max_inside <= 3, "max inside {}", o.max_inside);
    assert!(o.statements > 0);
}

#[test]
fn flifo_never_runs_more_than_twice_the_limit() {
    let o = run(base(Policy::Flifo));
    assert!(o.max_inside <= 6, "max inside {}", o.max_inside);
    assert!(o.statements > 0);
}

#[test]
fn timer_overshoot_is_bounded_by_the_thread_count_and_reported() {
    let o = run(base(Policy::Timer));
    // No policy bound: forced entries after 20 ms can put anyone in. Report what we saw.
    eprintln!("timer: limit 3, 24 threads: max inside {}", o.max_inside);
    assert!(o.max_inside <= 24);
    assert!(o.statements > 0);
}

#[test]
fn unlimited_admits_everyone_without_waiting() {
    let o = run(base(Policy::Unlimited));
    assert!(o.max_inside >= 1 && o.statements > 0);
}

#[test]
fn cancellations_and_timeouts_under_load_leave_no_slot_behind() {
    for policy in [
        Policy::Classic,
        Policy::Flifo,
        Policy::Polling,
        Policy::Timer,
    ] {
        let mut r = base(policy);
        r.cancel_and_timeouts = true;
        r.limit = 2;
        let o = run(r);
        if let Some(bound) = policy.max_running(2) {
            assert!(
                o.max_inside <= bound,
                "{policy}: max inside {}",
                o.max_inside
            );
        }
        eprintln!(
            "{policy}: {} statements, {} failed waits",
            o.statements, o.errors
        );
    }
}

#[test]
fn limit_changes_under_load_never_exceed_the_largest_limit_set() {
    for policy in [Policy::Classic, Policy::Flifo, Policy::Polling] {
        let mut r = base(policy);
        r.change_limits = Some((1, 5));
        let o = run(r);
        let bound = policy.max_running(5).unwrap();
        assert!(
            o.max_inside <= bound,
            "{policy}: max inside {}",
            o.max_inside
        );
        assert!(o.statements > 0);
    }
}

#[test]
fn auto_never_runs_more_than_twice_the_limit_with_waits_cancels_and_timeouts() {
    let mut r = base(Policy::Auto);
    r.cancel_and_timeouts = true;
    let o = run_auto(r, false);
    let bound = Policy::Auto.max_running(3).unwrap();
    assert!(o.max_inside <= bound, "max inside {}", o.max_inside);
    assert!(o.statements > 0);
}

#[test]
fn auto_with_limit_changes_never_exceeds_twice_the_largest_limit_set() {
    let mut r = base(Policy::Auto);
    r.change_limits = Some((1, 5));
    let o = run_auto(r, false);
    assert!(o.max_inside <= 10, "max inside {}", o.max_inside);
    assert!(o.statements > 0);
}

#[test]
fn auto_with_its_adaptive_limit_stays_within_twice_the_largest_limit_it_set() {
    let o = run_auto(base(Policy::Auto), true);
    let bound = Policy::Auto.max_running(o.limit_max).unwrap();
    eprintln!(
        "auto adaptive: limit reached {}, max inside {}",
        o.limit_max, o.max_inside
    );
    assert!(
        o.max_inside <= bound,
        "max inside {} > {bound}",
        o.max_inside
    );
    assert!(o.statements > 0);
}
