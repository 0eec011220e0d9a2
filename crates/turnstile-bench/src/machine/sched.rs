//! Timer slack and yield: how far a short sleep overshoots, and what `sched_yield` costs alone on
//! a CPU and beside a busy thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::futex::{pin_to, pinned_pair, StopOnDrop};
use super::ns_per;

/// Overshoots (ns) of `samples` sleeps of `len`.
pub(super) fn sleep_overshoots(len: Duration, samples: usize) -> Vec<f64> {
    (0..samples)
        .map(|_| {
            let t = Instant::now();
            thread::sleep(len);
            t.elapsed().saturating_sub(len).as_nanos() as f64
        })
        .collect()
}

pub(super) fn sched_yield() {
    // SAFETY: sched_yield takes no arguments and touches no memory of ours.
    unsafe {
        libc::sched_yield();
    }
}

/// ns per `sched_yield` of a thread pinned to `cpu`, `calls` times.
pub(super) fn yield_alone_ns(cpu: usize, calls: u64) -> Result<f64, String> {
    thread::scope(|s| {
        s.spawn(|| {
            pin_to(cpu)?;
            let t = Instant::now();
            for _ in 0..calls {
                sched_yield();
            }
            Ok(ns_per(t.elapsed(), calls))
        })
        .join()
        .map_err(|_| "the yield thread panicked".to_string())?
    })
}

/// ns per `sched_yield` of a thread pinned to `cpu` beside a busy thread pinned there too,
/// for about `run`; with the number of calls.
pub(super) fn yield_beside_busy_ns(cpu: usize, run: Duration) -> Result<(f64, u64), String> {
    let stop = AtomicBool::new(false);
    pinned_pair(
        cpu,
        Vec::new,
        Vec::new,
        |_| {
            let _stop = StopOnDrop(&stop);
            let t = Instant::now();
            let mut calls = 0u64;
            while t.elapsed() < run {
                sched_yield();
                calls += 1;
            }
            (ns_per(t.elapsed(), calls), calls)
        },
        |_| {
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        },
    )
}
