//! Clocks. State timestamps ("in this state for 2.1 s") are taken on fast paths, so they use
//! the kernel's coarse monotonic clock: a vDSO read of the last tick, a few ns instead of a
//! precise `Instant::now()` plus subtraction (`bench gate` measures the difference on an
//! uncontended admission; docs/BENCHMARKS.md has it).
//! Its resolution is one scheduler tick (1–4 ms), ample for monitoring; InnoDB itself reports
//! transaction age in whole seconds. Waits and wake-up latencies use `Instant` (slow paths).

/// Coarse monotonic nanoseconds (never 0).
#[cfg(all(target_os = "linux", not(loom)))]
#[inline]
pub(crate) fn coarse_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call, and
    // CLOCK_MONOTONIC_COARSE exists on every Linux since 2.6.32; the call only writes `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    debug_assert_eq!(rc, 0);
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
        .max(1)
}

/// Under loom: a constant. `auto` decides on clock readings (its quantum, its age cap), and a
/// model must explore the same decisions on every run; time never passes in a model.
#[cfg(loom)]
#[inline]
pub(crate) fn coarse_ns() -> u64 {
    1
}

/// Where no coarse clock is available: a precise monotonic one, in nanoseconds since first
/// use (never 0).
#[cfg(all(not(target_os = "linux"), not(loom)))]
#[inline]
pub(crate) fn coarse_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
        + 1
}

/// CPU time this process has used (user + system, all threads), for `auto`'s limit
/// controller: read once per control window, on a slow path. `None` where it cannot be read
/// (off Linux, and under loom, whose models must not depend on a real clock).
pub(crate) fn process_cpu_ns() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(loom)))]
    return cpu_clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
    #[cfg(not(all(target_os = "linux", not(loom))))]
    None
}

/// CPU time the calling thread has used: what `auto`'s driver times its process CPU reading
/// with, so that a reading preempted half-way (several ms on a busy machine) is not taken for
/// a costly one. `None` where it cannot be read (as [`process_cpu_ns`]).
pub(crate) fn thread_cpu_ns() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(loom)))]
    return cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    #[cfg(not(all(target_os = "linux", not(loom))))]
    None
}

/// A CPU-time clock's reading in ns.
#[cfg(all(target_os = "linux", not(loom)))]
fn cpu_clock_ns(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call, and the two
    // clocks passed here (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID) exist on every
    // Linux since 2.6.12; the call only writes `ts`.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    (rc == 0).then(|| (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64)
}

/// One scheduler tick (1 / the kernel's `CONFIG_HZ`), as the kernel reports it: the
/// resolution of the coarse monotonic clock, which moves once a tick (`clock_getres`; 4 ms at
/// 250 Hz, 1 ms at 1000 Hz, 10 ms at 100 Hz). `auto`'s controller takes it as the process CPU
/// clock's lag per CPU ([`crate::policy::auto::CPU_CLOCK_LAG`] is the fallback). `None`
/// where it cannot be read or is not a tick the kernel offers (100–1000 Hz, read generously
/// as 0.5–20 ms).
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) fn scheduler_tick() -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call, and
    // CLOCK_MONOTONIC_COARSE exists on every Linux since 2.6.32; the call only writes `ts`.
    let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    let ns = (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64);
    (rc == 0 && (500_000..=20_000_000).contains(&ns)).then(|| std::time::Duration::from_nanos(ns))
}

/// See the Linux version: unknown here (and under loom, whose models read no real clock).
#[cfg(not(all(target_os = "linux", not(loom))))]
pub(crate) fn scheduler_tick() -> Option<std::time::Duration> {
    None
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn the_scheduler_tick_is_read_from_the_kernel_as_one_of_the_rates_it_offers() {
        // A kernel fact, not a timing: CONFIG_HZ is 100, 250, 300 or 1000 on every kernel
        // Linux builds, so the coarse clock's resolution is 10, 4, 3.33 or 1 ms.
        let tick = super::scheduler_tick().expect("the coarse clock's resolution");
        let hz = 1e9 / tick.as_nanos() as f64;
        assert!(
            [100.0, 250.0, 300.0, 1000.0]
                .iter()
                .any(|&k| (hz - k).abs() < 1.0),
            "{tick:?} is {hz} Hz"
        );
        // And `auto`'s controller takes it as the CPU clock's lag, not the fallback constant.
        let p = crate::policy::auto::AutoParams::for_config(&crate::GateConfig::default(), 2);
        assert_eq!(p.cpu_clock_lag, tick);
    }

    #[test]
    fn a_threads_cpu_clock_counts_its_own_work_and_not_another_threads() {
        // Whose work each clock counts, not how fast anything runs. Another thread works
        // until its own clock has counted 20 ms: the process's clock counts that work, this
        // thread's clock (which only spawned and joined it) does not.
        let me0 = super::thread_cpu_ns().expect("the thread's CPU clock");
        let worker = std::thread::spawn(|| {
            let t0 = super::thread_cpu_ns().unwrap();
            let mut x = 0u64;
            while super::thread_cpu_ns().unwrap() - t0 < 20_000_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            super::thread_cpu_ns().unwrap() - t0
        });
        let worked = worker.join().unwrap();
        let mine = super::thread_cpu_ns().unwrap() - me0;
        assert!(
            mine < worked,
            "this thread's clock counted the other's work: {mine} ns of its {worked} ns"
        );
    }

    #[test]
    fn the_coarse_clock_moves_forward() {
        let a = super::coarse_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = super::coarse_ns();
        assert!(a > 0 && b > a);
    }
}
