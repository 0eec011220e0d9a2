//! Wake-up latency and the waker's cost: a waker stamps the time and wakes a blocked waiter,
//! which stamps the time it runs — onto an idle core, and unpinned with busy threads per core —
//! and the time the waking call itself takes on the waker's side.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::fit::{busy_wake_line, latencies};
use super::futex::{futex_wait, futex_wake, pin_to, StopOnDrop};
use super::{
    ns_per, repeat, round1, CalibrateConfig, Latencies, Repeated, WakeLatency, WakePoint,
    SPINNER_WARMUP,
};

pub(super) fn wake_sweep(
    cfg: &CalibrateConfig,
    cores: usize,
    allowed: &[usize],
) -> Result<WakeLatency, String> {
    let gap = Duration::from_micros(cfg.wake_gap_us);
    // Two different CPUs we may use (the last two: CPU 0 takes most device interrupts).
    let cpus = match allowed {
        [.., a, b] => (*a, *b),
        [a] => (*a, *a),
        [] => return Err("this process may run on no CPU".into()),
    };
    let idle_core = latencies(wake_samples(cfg.wake_idle_samples, gap, Some(cpus))?);
    let mut points = Vec::with_capacity(1 + cfg.wake_spinners_per_core.len());
    points.push(wake_point(0, cores, cfg.wake_idle_samples, gap)?);
    for &k in &cfg.wake_spinners_per_core {
        points.push(wake_point(k, cores, cfg.wake_loaded_samples, gap)?);
    }
    // The loaded points only: the idle one is a wake-up onto an idle core (`base_ns`), which
    // `wake_busy_ns` (the intercept) is not.
    let xs: Vec<f64> = points[1..].iter().map(|p| p.runnable_per_core).collect();
    let ys: Vec<f64> = points[1..].iter().map(|p| p.latency.median_ns).collect();
    let (slope, intercept) = busy_wake_line(&xs, &ys);
    Ok(WakeLatency {
        gap_us: cfg.wake_gap_us,
        idle_core_cpus: cpus,
        base_ns: idle_core.median_ns,
        idle_core,
        points,
        slope_ns_per_runnable: round1(slope),
        intercept_ns: round1(intercept),
    })
}

/// Wake-up latency with `per_core` × `cores` busy-spinning threads; all unpinned.
pub(super) fn wake_point(
    per_core: usize,
    cores: usize,
    samples: usize,
    gap: Duration,
) -> Result<WakePoint, String> {
    let stop = AtomicBool::new(false);
    let spinners = per_core * cores;
    let measured = thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for _ in 0..spinners {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        if spinners > 0 {
            thread::sleep(SPINNER_WARMUP);
        }
        wake_samples(samples, gap, None)
    })?;
    Ok(WakePoint {
        spinners_per_core: per_core,
        spinners,
        runnable_per_core: (spinners + 1) as f64 / cores as f64,
        latency: latencies(measured),
    })
}

/// `samples` futex wake-ups of a blocked waiter, each after the waker slept `gap`: the
/// latencies (ns) of those that found the waiter asleep, and how many did not. `pins` =
/// (waker's CPU, waiter's CPU), or both unpinned.
///
/// After each wake the waker sleeps on a futex until the waiter has recorded, so a woken
/// waiter that the scheduler put on the waker's CPU runs as soon as the waker blocks: with
/// busy threads everywhere, the latency is then the scheduler's work, not a wait for a time
/// slice to end (the run queue's share, which the simulator models itself).
pub(super) fn wake_samples(
    samples: usize,
    gap: Duration,
    pins: Option<(usize, usize)>,
) -> Result<(Vec<f64>, usize), String> {
    let n = u32::try_from(samples).map_err(|_| "too many wake-up samples")?;
    let go = AtomicU32::new(0); // sample number released so far
    let ack = AtomicU32::new(0); // sample number the waiter has recorded
    let stamp = AtomicU64::new(0); // waker's clock at the wake, ns since `base`
    let base = Instant::now();
    let since = |b: Instant| b.elapsed().as_nanos() as u64;
    let ready = Barrier::new(2);
    let failed = AtomicBool::new(false);
    let (lat, asleep) = thread::scope(|s| {
        let waiter = s.spawn(|| {
            let pinned = pins.map_or(Ok(()), |(_, c)| pin_to(c));
            failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
            ready.wait();
            pinned?;
            if failed.load(Ordering::Relaxed) {
                return Err("could not pin the waker".to_string());
            }
            let mut lat = Vec::with_capacity(samples);
            for i in 0..n {
                while go.load(Ordering::Acquire) == i {
                    futex_wait(&go, i);
                }
                let now = since(base);
                lat.push(now.saturating_sub(stamp.load(Ordering::Acquire)) as f64);
                ack.store(i + 1, Ordering::Release);
                futex_wake(&ack);
            }
            Ok(lat)
        });
        let waker = s.spawn(|| {
            let pinned = pins.map_or(Ok(()), |(c, _)| pin_to(c));
            failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
            ready.wait();
            pinned?;
            if failed.load(Ordering::Relaxed) {
                return Err("could not pin the waiter".to_string());
            }
            let mut asleep = Vec::with_capacity(samples);
            for i in 0..n {
                thread::sleep(gap);
                stamp.store(since(base), Ordering::Release);
                go.store(i + 1, Ordering::Release);
                asleep.push(futex_wake(&go) == 1);
                loop {
                    let a = ack.load(Ordering::Acquire);
                    if a == i + 1 {
                        break;
                    }
                    futex_wait(&ack, a);
                }
            }
            Ok(asleep)
        });
        let panicked = |_| "a wake-up thread panicked".to_string();
        (
            waiter.join().map_err(panicked),
            waker.join().map_err(panicked),
        )
    });
    let (lat, asleep) = (lat??, asleep??);
    let kept: Vec<f64> = lat
        .iter()
        .zip(&asleep)
        .filter(|(_, a)| **a)
        .map(|(&l, _)| l)
        .collect();
    let discarded = samples - kept.len();
    if kept.is_empty() {
        return Err("no wake-up sample found the waiter asleep".into());
    }
    Ok((kept, discarded))
}

/// `wake_call_ns` and `wake_call_idle_ns`: the duration of the `futex_wake` call itself, to
/// its caller.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WakeCall {
    /// With nobody waiting (the system call alone), per call.
    pub nobody_waiting: Repeated,
    /// Waking a waiter pinned to the caller's own CPU: the busy machine's case (no idle CPU
    /// to send it to).
    pub same_cpu: Latencies,
    /// Waking a waiter pinned to another CPU, idle: the call also wakes that CPU. `None`
    /// where the process may use one CPU.
    pub other_idle_cpu: Option<Latencies>,
}

/// Calls per run of the nobody-waiting measurement: ~50 ms at ~0.25 µs a call.
pub(super) const WAKE_CALLS_ALONE: u64 = 200_000;

pub(super) fn wake_call(
    cpu: usize,
    other: usize,
    reps: usize,
    samples: usize,
) -> Result<WakeCall, String> {
    let alone = repeat(reps, || {
        let w = AtomicU32::new(0);
        let t = Instant::now();
        for _ in 0..WAKE_CALLS_ALONE {
            futex_wake(&w);
        }
        Ok(ns_per(t.elapsed(), WAKE_CALLS_ALONE))
    })?;
    let same_cpu = latencies(timed_wakes(cpu, cpu, samples)?);
    let other_idle_cpu = if other != cpu {
        Some(latencies(timed_wakes(cpu, other, samples)?))
    } else {
        None
    };
    Ok(WakeCall {
        nobody_waiting: Repeated::of(&alone),
        same_cpu,
        other_idle_cpu,
    })
}

/// A waker pinned to `waker_cpu` wakes a waiter pinned to `waiter_cpu` `samples` times, 200 µs
/// apart (so the waiter is asleep), timing each `futex_wake` call: the durations of those
/// that woke it, ns, and how many found it not yet asleep.
pub(super) fn timed_wakes(
    waker_cpu: usize,
    waiter_cpu: usize,
    samples: usize,
) -> Result<(Vec<f64>, usize), String> {
    let n = u32::try_from(samples).map_err(|_| "too many wake-call samples")?;
    let word = AtomicU32::new(0);
    let ack = AtomicU32::new(0);
    let failed = AtomicBool::new(false);
    let ready = Barrier::new(2);
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let pinned = pin_to(waiter_cpu);
            failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
            ready.wait();
            if failed.load(Ordering::Relaxed) {
                return;
            }
            for i in 0..n {
                while word.load(Ordering::Acquire) == i {
                    futex_wait(&word, i);
                }
                ack.store(i + 1, Ordering::Release);
            }
        });
        // The waker runs on a thread of its own too: pinning the caller would leave it (and
        // everything `calibrate` measures after this) on one CPU.
        let waker = s.spawn(|| waker_side(waker_cpu, n, samples, &word, &ack, &failed, &ready));
        let r = waker
            .join()
            .map_err(|_| "the wake-call waker panicked".to_string())?;
        if r.is_err() {
            // Release the waiter so the scope can end.
            word.store(u32::MAX, Ordering::Release);
            futex_wake(&word);
        }
        waiter.join().map_err(|_| "the wake-call waiter panicked")?;
        r
    })
}

/// `timed_wakes`' waker: pinned to `waker_cpu`, it wakes the waiter `n` times and times each
/// wake call.
pub(super) fn waker_side(
    waker_cpu: usize,
    n: u32,
    samples: usize,
    word: &AtomicU32,
    ack: &AtomicU32,
    failed: &AtomicBool,
    ready: &Barrier,
) -> Result<(Vec<f64>, usize), String> {
    let pinned = pin_to(waker_cpu);
    failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
    ready.wait();
    if failed.load(Ordering::Relaxed) {
        return Err("could not pin the wake-call threads".to_string());
    }
    let mut costs = Vec::with_capacity(samples);
    let mut missed = 0;
    for i in 0..n {
        thread::sleep(Duration::from_micros(200));
        word.store(i + 1, Ordering::Release);
        let t = Instant::now();
        let woke = futex_wake(word) == 1;
        let ns = t.elapsed().as_nanos() as f64;
        if woke {
            costs.push(ns);
        } else {
            missed += 1;
        }
        while ack.load(Ordering::Acquire) != i + 1 {
            thread::yield_now();
        }
    }
    if costs.is_empty() {
        return Err("no wake call found the waiter asleep".into());
    }
    Ok((costs, missed))
}

#[cfg(test)]
mod tests {
    use super::super::futex::allowed_cpus;
    use super::*;

    #[test]
    fn timing_wake_calls_leaves_the_calling_thread_on_every_cpu_it_had() {
        let before = allowed_cpus().unwrap();
        let cpu = before[0];
        let other = *before.last().unwrap();
        timed_wakes(cpu, other, 3).unwrap();
        assert_eq!(allowed_cpus().unwrap(), before);
    }
}
