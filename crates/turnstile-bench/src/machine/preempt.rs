//! Wake-up preemption and a sleeper behind busy threads: whether a woken thread takes the CPU
//! at once from one that has run for a while, and how late a sleeper runs when its CPU is busy.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::fit::latencies;
use super::futex::{futex_wait, futex_wake, pin_to, StopOnDrop};
use super::{round1, Latencies, SPINNER_WARMUP};

/// One point of the wake-up preemption sweep: a thread woken onto a CPU where another thread
/// has been running for `ran_us`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PreemptPoint {
    /// How long the running thread had run, since it woke, when the other was woken, µs.
    pub ran_us: u64,
    /// The woken thread's latency (wake to running), ns.
    pub latency: Latencies,
    /// Share of samples in which the woken thread ran within [`PREEMPT_AT_ONCE_NS`]: it took
    /// the CPU from the running thread rather than waiting for its slice to end.
    pub at_once_share: f64,
}

/// `wake_preempt_ns`: whether, and after how long, a woken thread takes the CPU from a thread
/// that is running.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WakePreempt {
    /// The CPU both threads were pinned to; the waker ran on another.
    pub cpu: usize,
    /// The waker's CPU.
    pub waker_cpu: usize,
    /// The sweep, in increasing `ran_us`.
    pub points: Vec<PreemptPoint>,
    /// The shortest run at which at least half the wake-ups took the CPU at once (and at the
    /// next point of the sweep too), ns: the
    /// running thread's protection at the start of its slice (EEVDF's `RUN_TO_PARITY`: a
    /// slice of `sysctl_sched_base_slice`). `None` if no point did (a woken thread waits for
    /// the running one's slice to end). Longer runs of the sweep can fall inside a *renewed*
    /// slice (one that began at a tick with nobody else runnable) and wait again.
    pub min_run_ns: Option<f64>,
}

/// A woken thread "took the CPU at once" if it ran within this of its wake-up: 100 µs is
/// several times an idle wake-up, even one that must wake a halted vCPU (tens of µs), and 40×
/// shorter than the `HZ=250` tick at which a thread that is not preempted on wake-up gets its
/// turn.
pub const PREEMPT_AT_ONCE_NS: f64 = 100_000.0;

/// Longest a running thread spins in one sample, waiting to be preempted: twice the 4 ms
/// `HZ=250` tick, so a wake-up that waits for the slice to end still completes the sample.
pub(super) const PREEMPT_SPIN_CAP: Duration = Duration::from_millis(20);

/// The sweep: two threads pinned to `cpu` take turns (so that both have run about equally,
/// as the symmetric threads of a database do); in each sample one is woken and spins until
/// the other has run (or [`PREEMPT_SPIN_CAP`]), and the other is woken from a waker on
/// `waker_cpu` once the first has run `ran` — and records how long it took to run.
pub(super) fn wake_preempt(
    cpu: usize,
    waker_cpu: usize,
    runs_us: &[u64],
    samples: usize,
) -> Result<WakePreempt, String> {
    let mut points = Vec::with_capacity(runs_us.len());
    if cpu == waker_cpu {
        // One CPU: the waker could not run beside the spinning thread; nothing to measure.
        return Ok(WakePreempt {
            cpu,
            waker_cpu,
            points,
            min_run_ns: None,
        });
    }
    for &ran_us in runs_us {
        let (lat, discarded) =
            preempt_samples(cpu, waker_cpu, Duration::from_micros(ran_us), samples)?;
        let at_once = lat.iter().filter(|&&l| l < PREEMPT_AT_ONCE_NS).count() as f64
            / lat.len().max(1) as f64;
        let mut latency = latencies((lat, 0));
        latency.discarded = discarded;
        points.push(PreemptPoint {
            ran_us,
            latency,
            at_once_share: (at_once * 1000.0).round() / 1000.0,
        });
    }
    let min_run_ns = protection_ns(&points);
    Ok(WakePreempt {
        cpu,
        waker_cpu,
        points,
        min_run_ns,
    })
}

/// The shortest run of the sweep at which at least half the wake-ups took the CPU at once and
/// did so at the next longer run too, ns (see [`WakePreempt::min_run_ns`]). The confirmation
/// keeps a point near the boundary from deciding alone: such a point can read either way from
/// one calibration to the next (the end of the protection is noticed only at the scheduler's
/// next accounting, a tick or a wake-up).
pub(super) fn protection_ns(points: &[PreemptPoint]) -> Option<f64> {
    let most = |p: &PreemptPoint| p.at_once_share >= 0.5;
    (0..points.len())
        .find(|&i| most(&points[i]) && points.get(i + 1).is_none_or(most))
        .map(|i| points[i].ran_us as f64 * 1e3)
}

/// `samples` rounds of the preemption measurement at one `ran`: the woken thread's latencies
/// (ns) in rounds where it was asleep when woken, and how many rounds were dropped.
pub(super) fn preempt_samples(
    cpu: usize,
    waker_cpu: usize,
    ran: Duration,
    samples: usize,
) -> Result<(Vec<f64>, usize), String> {
    const IDLE: u32 = 0;
    const RUN: u32 = 1;
    const WOKEN: u32 = 2;
    const STOP: u32 = 3;
    let n = u32::try_from(samples).map_err(|_| "too many preemption samples")?;
    let base = Instant::now();
    let since = |b: Instant| b.elapsed().as_nanos() as u64;
    // Each pinned thread's command word: what to do when it wakes.
    let cmd = [AtomicU32::new(IDLE), AtomicU32::new(IDLE)];
    let started = AtomicU32::new(0); // round whose runner has started (round + 1)
    let run_start = AtomicU64::new(0);
    let stamp = AtomicU64::new(0); // the waker's clock at the wake of the woken thread
    let woken_ran = AtomicU32::new(0); // round whose woken thread has run (round + 1)
    let done = AtomicU32::new(0); // threads finished with the round
    let cur = AtomicU32::new(0); // the round under way (round + 1)
    let latency = AtomicU64::new(0);
    let ready = Barrier::new(3);
    let failed = AtomicBool::new(false);
    let worker = |k: usize| {
        let pinned = pin_to(cpu);
        failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
        ready.wait();
        pinned?;
        loop {
            let c = loop {
                let c = cmd[k].swap(IDLE, Ordering::AcqRel);
                if c != IDLE {
                    break c;
                }
                futex_wait(&cmd[k], IDLE);
            };
            match c {
                RUN => {
                    let t = since(base);
                    let round = cur.load(Ordering::Acquire);
                    run_start.store(t, Ordering::Release);
                    started.store(round, Ordering::Release);
                    let cap = PREEMPT_SPIN_CAP.as_nanos() as u64;
                    while woken_ran.load(Ordering::Acquire) != round && since(base) - t < cap {
                        std::hint::spin_loop();
                    }
                }
                WOKEN => {
                    let now = since(base);
                    let round = cur.load(Ordering::Acquire);
                    latency.store(
                        now.saturating_sub(stamp.load(Ordering::Acquire)),
                        Ordering::Release,
                    );
                    woken_ran.store(round, Ordering::Release);
                }
                _ => return Ok::<(), String>(()),
            }
            done.fetch_add(1, Ordering::AcqRel);
            futex_wake(&done);
        }
    };
    thread::scope(|s| {
        let a = s.spawn(|| worker(0));
        let b = s.spawn(|| worker(1));
        let waker = s.spawn(|| {
            let pinned = pin_to(waker_cpu);
            failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
            ready.wait();
            let stop = |cmd: &[AtomicU32; 2]| {
                for w in cmd {
                    w.store(STOP, Ordering::Release);
                    futex_wake(w);
                }
            };
            if pinned.is_err() || failed.load(Ordering::Relaxed) {
                stop(&cmd);
                return Err("could not pin the preemption threads".to_string());
            }
            let mut lat = Vec::with_capacity(samples);
            let mut dropped = 0;
            for i in 0..n {
                let (r, w) = ((i % 2) as usize, ((i + 1) % 2) as usize);
                done.store(0, Ordering::Release);
                cur.store(i + 1, Ordering::Release);
                // Both threads asleep (the round before ended with both done, and a short
                // sleep lets them block), then the runner starts.
                thread::sleep(Duration::from_micros(200));
                cmd[r].store(RUN, Ordering::Release);
                futex_wake(&cmd[r]);
                while started.load(Ordering::Acquire) != i + 1 {
                    std::hint::spin_loop();
                }
                let t0 = run_start.load(Ordering::Acquire);
                while since(base) < t0 + ran.as_nanos() as u64 {
                    std::hint::spin_loop();
                }
                stamp.store(since(base), Ordering::Release);
                cmd[w].store(WOKEN, Ordering::Release);
                let asleep = futex_wake(&cmd[w]) == 1;
                loop {
                    let d = done.load(Ordering::Acquire);
                    if d == 2 {
                        break;
                    }
                    futex_wait(&done, d);
                }
                if asleep {
                    lat.push(latency.load(Ordering::Acquire) as f64);
                } else {
                    dropped += 1;
                }
            }
            stop(&cmd);
            Ok((lat, dropped))
        });
        let panicked = |_| "a preemption thread panicked".to_string();
        let r = waker.join().map_err(panicked)?;
        a.join().map_err(panicked)??;
        b.join().map_err(panicked)??;
        r
    })
}

/// One point of the sleeper sweep.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SleeperPoint {
    /// Busy threads pinned to the sleeper's CPU.
    pub busy: usize,
    /// Overshoot of each 10 ms sleep (the wait for the CPU included), ns.
    pub overshoot: Latencies,
    /// The longest overshoot, ns.
    pub max_ns: f64,
}

/// How long each sleep of the sleeper sweep lasts: the classic gate's 10 ms sleep before
/// queueing (InnoDB's `innodb_thread_sleep_delay` default), the sleep whose waking threads
/// the simulator must place among busy ones.
pub(super) const SLEEPER_SLEEP: Duration = Duration::from_millis(10);

/// A thread pinned to `cpu` sleeps [`SLEEPER_SLEEP`] `samples` times, doing a few µs of work
/// after each (a retry of the gate), beside `busy` spinning threads pinned to the same CPU:
/// the overshoots say whether a woken thread waits for the busy threads' turns (an overshoot
/// growing with `busy`) or only for the one running (bounded by a time slice).
pub(super) fn sleeper_point(
    cpu: usize,
    busy: usize,
    samples: usize,
) -> Result<SleeperPoint, String> {
    let stop = AtomicBool::new(false);
    let over = thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for _ in 0..busy {
            s.spawn(|| {
                if pin_to(cpu).is_ok() {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                }
            });
        }
        let h = s.spawn(|| -> Result<Vec<f64>, String> {
            pin_to(cpu)?;
            // The busy threads pin themselves and start spinning meanwhile.
            thread::sleep(SPINNER_WARMUP);
            let mut over = Vec::with_capacity(samples);
            for _ in 0..samples {
                let t = Instant::now();
                thread::sleep(SLEEPER_SLEEP);
                over.push(t.elapsed().saturating_sub(SLEEPER_SLEEP).as_nanos() as f64);
                // A few µs of work, as a gate retry is, before sleeping again.
                let w = Instant::now();
                while w.elapsed() < Duration::from_micros(5) {
                    std::hint::spin_loop();
                }
            }
            Ok(over)
        });
        h.join().map_err(|_| "the sleeper panicked".to_string())
    })??;
    let max_ns = round1(over.iter().copied().fold(0.0, f64::max));
    Ok(SleeperPoint {
        busy,
        overshoot: latencies((over, 0)),
        max_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(ran_us: u64, at_once_share: f64) -> PreemptPoint {
        PreemptPoint {
            ran_us,
            at_once_share,
            ..PreemptPoint::default()
        }
    }

    #[test]
    fn the_protection_is_the_first_run_at_which_most_wake_ups_take_the_cpu() {
        // A stray early success (under half) and a renewed slice later (0 at 4 ms) do not move
        // it: the first point with at least half, confirmed by the next, is the protection's
        // end.
        let sweep = [
            point(500, 0.0),
            point(1000, 0.07),
            point(1500, 1.0),
            point(2000, 0.97),
            point(4000, 0.0),
        ];
        assert_eq!(protection_ns(&sweep), Some(1_500_000.0));
        // A point near the boundary that the next one does not confirm is passed over.
        let noisy = [
            point(1000, 0.53),
            point(1250, 0.0),
            point(1500, 1.0),
            point(2000, 0.97),
        ];
        assert_eq!(protection_ns(&noisy), Some(1_500_000.0));
        assert_eq!(protection_ns(&[point(250, 0.5)]), Some(250_000.0));
        assert_eq!(protection_ns(&[point(250, 0.0), point(6000, 0.2)]), None);
        assert_eq!(protection_ns(&[]), None);
    }
}
