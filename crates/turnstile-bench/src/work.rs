//! A fixed amount of CPU work, calibrated once, standing in for the engine's work per call.
//! It is a count of loop iterations, not a wall-clock wait, so a preempted thread takes longer,
//! as real work would.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Calibrated iterations of [`spin`] per microsecond on this machine.
pub fn iterations_per_us() -> f64 {
    static CAL: OnceLock<f64> = OnceLock::new();
    *CAL.get_or_init(|| {
        // Best of five 5 ms runs: the fastest is the least disturbed by other load.
        let n = 200_000u64;
        let mut best = Duration::MAX;
        spin(n);
        for _ in 0..5 {
            let t = Instant::now();
            spin(n);
            best = best.min(t.elapsed());
        }
        n as f64 / (best.as_nanos().max(1) as f64 / 1000.0)
    })
}

/// Runs `iters` iterations of a dependent arithmetic chain the compiler cannot remove.
#[inline(never)]
pub fn spin(iters: u64) -> u64 {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in 0..iters {
        x = std::hint::black_box(x ^ (x << 7) ^ i);
    }
    x
}

/// Iterations for `us` microseconds of work.
pub fn iterations_for(us: f64) -> u64 {
    (us * iterations_per_us()).round() as u64
}
