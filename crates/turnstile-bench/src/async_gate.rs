//! The async line of `turnstile bench gate`: the async session (feature `async`) beside
//! `tokio::sync::Semaphore`, with the same limit and the same work per admission.
//!
//! 1. **Uncontended admission**: ns per admission + release on a current-thread runtime, one
//!    task, nothing else running (median of repetitions): the gate's `enter().await`, the
//!    call's drop and `end_statement()` (the force exit), against `acquire().await` and the
//!    permit's drop.
//! 2. **Load**: N tasks over a multi-thread runtime (one worker per CPU), limit L, each in a
//!    closed loop of statements of C calls of W µs of CPU work, each call followed by a yield
//!    to the runtime (an async engine awaits between calls, so slots are held across
//!    scheduling points): one admission per statement (the gate's tickets cover the
//!    statement's calls; the semaphore's permit is held for it). Throughput in statements
//!    per second, and the most tasks seen inside.
//!
//! The gate is `classic` with a zero sleep delay: it queues at once, as the semaphore does,
//! and hands a freed slot to the first waiter's waker.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::Semaphore;
use turnstile::{Gate, GateConfig, Policy};

use crate::gate_config::GateBenchConfig;
use crate::stats::median;
use crate::work;

/// Uncontended admission + release, gate and semaphore, measured in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct AsyncFastPath {
    /// Median ns per async gate admission + release.
    pub gate_admission_ns: f64,
    /// Median ns per `Semaphore::acquire` + permit drop.
    pub semaphore_admission_ns: f64,
    /// `gate_admission_ns / semaphore_admission_ns`.
    pub gate_vs_semaphore: f64,
    /// Every repetition of the gate's measurement, ns.
    pub gate_samples_ns: Vec<f64>,
    /// Every repetition of the semaphore's measurement, ns.
    pub semaphore_samples_ns: Vec<f64>,
}

/// One loaded run.
#[derive(Debug, Clone, Serialize)]
pub struct AsyncLoad {
    /// `turnstile-async` or `tokio-semaphore`.
    pub variant: &'static str,
    /// Tasks.
    pub tasks: usize,
    /// Runtime worker threads.
    pub workers: usize,
    /// The limit.
    pub limit: u32,
    /// Statements completed per second.
    pub throughput_per_s: f64,
    /// Most tasks seen holding a slot at once (counted by the workload).
    pub max_inside: u32,
}

/// The async line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct AsyncReport {
    /// Uncontended costs.
    pub fast_path: AsyncFastPath,
    /// Loaded runs: the gate, then the semaphore.
    pub load: Vec<AsyncLoad>,
    /// Gate load throughput over the semaphore's.
    pub load_gate_vs_semaphore: f64,
}

fn gate(limit: u32, tickets: u32) -> Gate {
    Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(limit)
            .tickets(tickets)
            .sleep_delay(Duration::ZERO),
    )
    .expect("validated by the caller")
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Uncontended admission + release of the async gate and of the semaphore. The two are
/// measured in alternating repetitions so that a noisy neighbour hits both alike.
pub fn measure_fast_path(cfg: &GateBenchConfig) -> AsyncFastPath {
    let rt = current_thread();
    let g = gate(8, cfg.tickets);
    let mut session = g.async_session("bench").expect("no sleep delay");
    let sem = Semaphore::new(8);
    // ns per admission + release over `n` of them, each run to completion on `rt`.
    let mut gate_ns = |n: u64| {
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..n {
                let call = session.enter().await.expect("uncontended");
                drop(std::hint::black_box(call));
                session.end_statement();
            }
        });
        t.elapsed().as_nanos() as f64 / n as f64
    };
    let sem_ns = |n: u64| {
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..n {
                let permit = sem.acquire().await.expect("never closed");
                drop(std::hint::black_box(permit));
            }
        });
        t.elapsed().as_nanos() as f64 / n as f64
    };
    // Warm caches and branch predictors.
    gate_ns(cfg.iters / 10 + 1);
    sem_ns(cfg.iters / 10 + 1);
    let (mut gs, mut ss) = (Vec::new(), Vec::new());
    for _ in 0..cfg.reps {
        gs.push(gate_ns(cfg.iters));
        ss.push(sem_ns(cfg.iters));
    }
    let (g_ns, s_ns) = (median(&gs), median(&ss));
    AsyncFastPath {
        gate_admission_ns: g_ns,
        semaphore_admission_ns: s_ns,
        gate_vs_semaphore: g_ns / s_ns,
        gate_samples_ns: gs,
        semaphore_samples_ns: ss,
    }
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    done: AtomicU64,
    now: AtomicU32,
    max: AtomicU32,
}

impl Shared {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::Relaxed) + 1;
        self.max.fetch_max(n, Ordering::Relaxed);
    }
}

/// One loaded run of the gate (`use_gate`) or the semaphore.
pub fn measure_load(cfg: &GateBenchConfig, use_gate: bool) -> AsyncLoad {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let iters = work::iterations_for(cfg.work_us);
    let (calls, tasks, limit) = (cfg.calls, cfg.async_tasks, cfg.limit.max(1));
    let shared = Arc::new(Shared::default());
    // The statement's calls all run on one admission: tickets ≥ calls.
    let g = gate(limit, cfg.tickets.max(calls));
    let sem = Arc::new(Semaphore::new(limit as usize));
    let mut handles = Vec::with_capacity(tasks);
    for i in 0..tasks {
        let (shared, sem) = (shared.clone(), sem.clone());
        let mut session = use_gate.then(|| g.async_session(format!("t{i}")).expect("no sleep"));
        handles.push(rt.spawn(async move {
            while !shared.stop.load(Ordering::Relaxed) {
                // Each call's work is followed by a yield inside the admission (an async
                // engine awaits between calls), so slots are held across scheduling points
                // and the limit binds.
                match &mut session {
                    Some(s) => {
                        for c in 0..calls {
                            let call = s.enter().await.expect("no cancel");
                            if c == 0 {
                                shared.enter();
                            }
                            work::spin(iters);
                            drop(call);
                            tokio::task::yield_now().await;
                        }
                        shared.now.fetch_sub(1, Ordering::Relaxed);
                        s.end_statement();
                    }
                    None => {
                        let permit = sem.acquire().await.expect("never closed");
                        shared.enter();
                        for _ in 0..calls {
                            work::spin(iters);
                            tokio::task::yield_now().await;
                        }
                        shared.now.fetch_sub(1, Ordering::Relaxed);
                        drop(permit);
                    }
                }
                shared.done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Timed on this thread, not on the runtime's timer: the interval never depends on a
    // worker getting round to the timer.
    std::thread::sleep(Duration::from_millis(20)); // every task reaches the gate
    let (t0, d0) = (Instant::now(), shared.done.load(Ordering::Relaxed));
    std::thread::sleep(cfg.duration);
    let d1 = shared.done.load(Ordering::Relaxed);
    let elapsed = t0.elapsed();
    shared.stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for h in handles {
            h.await.expect("a load task panicked");
        }
    });
    let done = d1 - d0;
    AsyncLoad {
        variant: if use_gate {
            "turnstile-async"
        } else {
            "tokio-semaphore"
        },
        tasks,
        workers,
        limit,
        throughput_per_s: done as f64 / elapsed.as_secs_f64(),
        max_inside: shared.max.load(Ordering::Relaxed),
    }
}

/// The whole async line.
pub fn run(cfg: &GateBenchConfig, progress: &mut dyn FnMut(&str)) -> AsyncReport {
    progress("async: uncontended admission");
    let fast_path = measure_fast_path(cfg);
    progress(&format!("async: load × {} tasks", cfg.async_tasks));
    let load = vec![measure_load(cfg, true), measure_load(cfg, false)];
    AsyncReport {
        fast_path,
        load_gate_vs_semaphore: load[0].throughput_per_s / load[1].throughput_per_s,
        load,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tiny_async_run_measures_both_and_keeps_the_limit() {
        let cfg = GateBenchConfig {
            limit: 2,
            calls: 3,
            work_us: 1.0,
            duration: Duration::from_millis(30),
            reps: 2,
            iters: 2_000,
            async_tasks: 8,
            ..GateBenchConfig::full()
        };
        let r = run(&cfg, &mut |_| {});
        assert!(r.fast_path.gate_admission_ns > 0.0);
        assert!(r.fast_path.semaphore_admission_ns > 0.0);
        assert_eq!(r.fast_path.gate_samples_ns.len(), 2);
        assert_eq!(r.load.len(), 2);
        assert_eq!(r.load[0].variant, "turnstile-async");
        assert_eq!(r.load[1].variant, "tokio-semaphore");
        for l in &r.load {
            assert_eq!((l.tasks, l.limit), (8, 2), "{l:?}");
            assert!(l.max_inside <= 2, "{l:?}");
            // How many statements land in a 30 ms window depends on the machine's load (a
            // busy machine may run none there): the figure is checked for form, not size.
            assert!(
                l.throughput_per_s.is_finite() && l.throughput_per_s >= 0.0,
                "{l:?}"
            );
        }
    }
}
