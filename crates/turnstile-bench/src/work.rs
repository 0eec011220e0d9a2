//! A fixed amount of CPU work, calibrated once, standing in for the engine's work per call.
//! It is a count of loop iterations, not a wall-clock wait, so a preempted thread takes longer,
//! as real work would.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Calibrated iterations of [`spin`] per microsecond on the machine it runs on.
pub fn iterations_per_us() -> f64 {
    static CAL: OnceLock<f64> = OnceLock::new();
    *CAL.get_or_init(|| {
        // 20 ms of spinning first: a CPU coming out of idle runs at a lower clock for a
        // while, and the reading is kept for the whole process (a cold reading would make a
        // "1 us" hold mean different work from run to run).
        let warm_up = Duration::from_millis(20);
        let (t, mut n) = (Instant::now(), 0u64);
        while t.elapsed() < warm_up {
            spin(100_000);
            n += 100_000;
        }
        // Then the best of five 5 ms runs, sized from the warm-up's rate: the fastest is
        // the least disturbed by other load.
        let per_us = n as f64 / (t.elapsed().as_nanos().max(1) as f64 / 1000.0);
        let iters = ((per_us * 5_000.0) as u64).max(100_000);
        let mut best = Duration::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            spin(iters);
            best = best.min(t.elapsed());
        }
        iters as f64 / (best.as_nanos().max(1) as f64 / 1000.0)
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
