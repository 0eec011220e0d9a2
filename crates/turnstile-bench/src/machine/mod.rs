//! `turnstile calibrate`: measures, on the machine it runs on, the parameters of the
//! simulator's machine model (`turnstile_sim::machine::MachineConfig`). This module only
//! measures and returns the raw figures ([`Calibration`]); the CLI turns them into a
//! `MachineConfig` and writes the TOML file the simulator loads.
//!
//! Every measurement is repeated ([`CalibrateConfig::reps`]) and reported as a median with its
//! runs, or, for latencies, as the median of many samples with its 10th and 90th percentiles.
//!
//! * context switch: two threads pinned to one CPU hand a token back and forth through two
//!   futex words; each hand-off is a real switch, so cost = elapsed / (2 × round trips).
//! * cache refill: the same ping-pong, each thread touching its own buffer of the per-core
//!   share of the last-level cache on every turn; minus the small-set switch and the time a
//!   thread takes to touch its buffer when it is warm.
//! * wake-up latency: a waker stamps the time and `FUTEX_WAKE`s a blocked waiter, which
//!   stamps the time it runs. The base: idle, waker and waiter pinned to different CPUs (a
//!   wake-up onto an idle core; unpinned, the scheduler often runs the waiter on the waker's
//!   CPU instead, and the idle median flips between runs). The slope: unpinned, at idle and
//!   with k CPU-burning threads per core.
//! * timer slack: overshoot of `std::thread::sleep` (nanosleep) of 1 ms and 10 ms.
//! * yield: `sched_yield` alone on a CPU, and with one busy thread pinned beside it.
//! * mutex hand-off: one default `pthread_mutex_t` hammered by one thread per CPU.
//!
//! Linux only (futexes, `sched_setaffinity`, sysfs cache topology).
//!
//! One module per family of measurements: [`switch`] (context switch, cache refill),
//! [`wake`] (wake-up latency, the waker's cost), [`preempt`] (wake-up preemption, a sleeper
//! behind busy threads), [`sched`] (timer slack, yield), [`handoff`] (mutex hand-off); below
//! them [`futex`] (futexes and pinning), [`fit`] (the arithmetic over samples) and [`host`]
//! (what the machine is). This module holds the configuration, the result types and [`run`].

use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::median;

mod fit;
mod futex;
mod handoff;
mod host;
mod preempt;
mod sched;
mod switch;
mod wake;

pub use fit::{busy_wake_line, least_squares, refill_from_pairs};
pub(crate) use futex::{allowed_cpus, give, pin_to, take};
pub use host::utc_date;
pub use preempt::{PreemptPoint, SleeperPoint, WakePreempt, PREEMPT_AT_ONCE_NS};
pub use switch::llc_share;
pub use wake::WakeCall;

use handoff::{mutex_contended_ns, mutex_uncontended_ns};
use host::{host_info, CpuTimes};
use preempt::{sleeper_point, wake_preempt};
use sched::{sleep_overshoots, yield_alone_ns, yield_beside_busy_ns};
use switch::{ping_pong, ring_switch_ns, warm_touch_ns, CACHE_LINE};
use wake::{wake_call, wake_sweep};

/// Time given to freshly spawned spinner threads to be running before sampling starts: thread
/// creation and the first schedule take well under a millisecond; 20 ms leaves a wide margin.
const SPINNER_WARMUP: Duration = Duration::from_millis(20);

/// Sizes and repetitions of one calibration.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrateConfig {
    /// Ring sizes for the switch cost against the number of threads.
    pub ring_threads: Vec<usize>,
    /// Hand-offs per ring measurement.
    pub ring_switches: u64,
    /// Repetitions of each repeated measurement (the median is reported).
    pub reps: usize,
    /// Round trips (two switches each) per context-switch run.
    pub switch_round_trips: u64,
    /// Round trips per cache-refill run (each turn touches the whole working set).
    pub cache_round_trips: u64,
    /// Working set per thread for the cache refill, bytes; `None` = the per-core share of
    /// the last-level cache (capped at 8 MiB).
    pub cache_bytes: Option<usize>,
    /// Touches of the warm working set per warm-touch run.
    pub warm_touches: u64,
    /// Wake-up samples with nothing else running, for each idle setting (waker and waiter
    /// on different CPUs; unpinned).
    pub wake_idle_samples: usize,
    /// Wake-up samples at each loaded point.
    pub wake_loaded_samples: usize,
    /// Busy-spinning threads per core at each loaded point.
    pub wake_spinners_per_core: Vec<usize>,
    /// Sleep of the waker between wake-up samples, µs, so the waiter is surely blocked and the
    /// samples do not batch.
    pub wake_gap_us: u64,
    /// Sleeps of each length (1 ms, 10 ms) for the timer slack.
    pub sleep_samples: usize,
    /// `sched_yield` calls per run with the CPU to itself.
    pub yield_calls: u64,
    /// Length of a run of `sched_yield` beside a busy thread, ms (each call then lasts a
    /// whole turn of the busy thread, so the run is bounded by time).
    pub yield_busy_ms: u64,
    /// Length of a contended-mutex run, ms.
    pub mutex_ms: u64,
    /// Lock+unlock pairs per uncontended-mutex run.
    pub mutex_uncontended_pairs: u64,
    /// Runs (µs since it woke) of the running thread at which the preemption sweep wakes the
    /// other, ascending.
    pub preempt_runs_us: Vec<u64>,
    /// Wake-ups at each point of the preemption sweep.
    pub preempt_samples: usize,
    /// Busy threads pinned beside the sleeper at each point of the sleeper sweep.
    pub sleeper_busy: Vec<usize>,
    /// 10 ms sleeps of the sleeper at each point.
    pub sleeper_samples: usize,
    /// Timed wake-up calls at each setting of the wake-call measurement.
    pub wake_call_samples: usize,
}

impl CalibrateConfig {
    /// Every measurement at full size (well under a minute).
    pub fn full() -> Self {
        CalibrateConfig {
            // 9 runs: the median of 9 ignores up to 4 runs hit by a neighbour's burst.
            reps: 9,
            // 2 threads is the plain ping-pong; 1024 is the seeds' highest thread count.
            ring_threads: vec![2, 16, 128, 1024],
            ring_switches: 200_000,
            // ~80 ms per run at 2 µs per switch: many timer ticks and interrupts averaged.
            switch_round_trips: 20_000,
            // 400 touches of up to 8 MiB: ~50 ms per run at ~120 µs per turn.
            cache_round_trips: 200,
            cache_bytes: None,
            // ~10 ms per run: the warm figure is steady (no switching to perturb it).
            warm_touches: 100,
            // ~0.3 s per idle setting at ~150 µs per sample; the median of 2000 is stable.
            wake_idle_samples: 2_000,
            // 200 per loaded point keeps each point short (the spinners load the machine).
            wake_loaded_samples: 200,
            // Doubling up to 32 per core: well past any database's useful concurrency.
            wake_spinners_per_core: vec![1, 2, 4, 8, 16, 32],
            // 100 µs: far longer than a waiter needs to block again, short enough that the
            // 2000 idle samples take well under a second.
            wake_gap_us: 100,
            // 40 sleeps of 1 and 10 ms: under half a second.
            sleep_samples: 40,
            // 1M calls at ~0.4 µs: ~0.4 s per run.
            yield_calls: 1_000_000,
            // ~140 calls at ~1.4 ms each (one turn of the busy thread).
            yield_busy_ms: 200,
            // 300 ms: millions of acquisitions, dozens of scheduler ticks.
            mutex_ms: 300,
            // 2M pairs at ~12 ns: ~25 ms per run.
            mutex_uncontended_pairs: 2_000_000,
            // From well inside to well past EEVDF's slice protection (`sysctl_sched_base_slice`
            // 0.75 ms × (1 + log2 CPUs), at most 3 ms) and past the 4 ms HZ=250 tick, finer
            // where the threshold falls on small machines.
            preempt_runs_us: vec![250, 500, 750, 1000, 1250, 1500, 2000, 3000, 4000, 6000],
            // 30 wake-ups per point: a sample that waits for the tick lasts ~4 ms, so the sweep
            // stays near a second.
            preempt_samples: 30,
            // One busy thread to 64: past the 32 per core of the wake-up sweep.
            sleeper_busy: vec![1, 4, 16, 64],
            // 40 sleeps of ~10 ms: under half a second a point.
            sleeper_samples: 40,
            // 2000 calls, one every 200 µs: 0.4 s per setting; the median of 2000 is stable.
            wake_call_samples: 2_000,
        }
    }

    /// Fewer repetitions, samples and round trips than [`Self::full`].
    pub fn quick() -> Self {
        CalibrateConfig {
            reps: 5,
            ring_threads: vec![2, 128, 1024],
            ring_switches: 50_000,
            switch_round_trips: 5_000,
            cache_round_trips: 40,
            warm_touches: 40,
            wake_idle_samples: 500,
            wake_loaded_samples: 100,
            sleep_samples: 20,
            yield_calls: 200_000,
            yield_busy_ms: 60,
            mutex_ms: 100,
            mutex_uncontended_pairs: 500_000,
            preempt_samples: 12,
            sleeper_samples: 15,
            wake_call_samples: 500,
            ..Self::full()
        }
    }

    /// Well under a second, for tests: every code path, tiny sizes.
    pub fn tiny() -> Self {
        CalibrateConfig {
            reps: 3,
            ring_threads: vec![2, 4],
            ring_switches: 2_000,
            switch_round_trips: 100,
            cache_round_trips: 5,
            cache_bytes: Some(64 << 10),
            warm_touches: 5,
            wake_idle_samples: 20,
            wake_loaded_samples: 10,
            wake_spinners_per_core: vec![1, 2],
            wake_gap_us: 100,
            sleep_samples: 3,
            yield_calls: 1_000,
            yield_busy_ms: 10,
            mutex_ms: 10,
            mutex_uncontended_pairs: 1_000,
            preempt_runs_us: vec![100, 5000],
            preempt_samples: 2,
            sleeper_busy: vec![2],
            sleeper_samples: 2,
            wake_call_samples: 10,
        }
    }

    /// Rejects sizes that would measure nothing.
    pub fn validate(&self) -> Result<(), String> {
        let counts = [
            ("reps", self.reps as u64),
            ("switch_round_trips", self.switch_round_trips),
            ("cache_round_trips", self.cache_round_trips),
            ("warm_touches", self.warm_touches),
            ("wake_idle_samples", self.wake_idle_samples as u64),
            ("wake_loaded_samples", self.wake_loaded_samples as u64),
            ("sleep_samples", self.sleep_samples as u64),
            ("yield_calls", self.yield_calls),
            ("yield_busy_ms", self.yield_busy_ms),
            ("mutex_ms", self.mutex_ms),
            ("mutex_uncontended_pairs", self.mutex_uncontended_pairs),
            ("preempt_samples", self.preempt_samples as u64),
            ("preempt_runs_us", self.preempt_runs_us.len() as u64),
            ("sleeper_samples", self.sleeper_samples as u64),
            ("wake_call_samples", self.wake_call_samples as u64),
        ];
        for (name, v) in counts {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if !self.preempt_runs_us.windows(2).all(|w| w[0] < w[1]) {
            return Err("preempt_runs_us must be strictly ascending".into());
        }
        if self.cache_bytes.is_some_and(|b| b < CACHE_LINE) {
            return Err(format!("cache_bytes must be at least {CACHE_LINE}"));
        }
        Ok(())
    }
}

/// A repeated measurement: its median and its runs, ns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Repeated {
    pub median_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
    pub runs_ns: Vec<f64>,
}

impl Repeated {
    fn of(runs: &[f64]) -> Repeated {
        Repeated {
            median_ns: round1(median(runs)),
            min_ns: round1(runs.iter().copied().fold(f64::INFINITY, f64::min)),
            max_ns: round1(runs.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
            runs_ns: runs.iter().map(|&v| round1(v)).collect(),
        }
    }
}

/// Where the figures were taken.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Host {
    /// CPUs this process may use (`available_parallelism`): the measurements' per-core counts.
    pub cpus_available: usize,
    /// CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`).
    pub cpus_online: usize,
    /// `/proc/cpuinfo`'s first "model name", or "" where it has none.
    pub cpu_model: String,
    /// `uname`: system name and release, e.g. "Linux 6.8.0".
    pub kernel: String,
    /// `uname`: the kernel's version string (build number and date).
    pub kernel_version: String,
    /// `uname`: the machine architecture.
    pub arch: String,
    /// When the calibration started, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub date: String,
    /// The CPU the single-CPU measurements were pinned to.
    pub pinned_cpu: usize,
    /// Share of all CPUs' time during the calibration that other processes used (busy time
    /// in `/proc/stat` minus this process's own): above a few percent, the figures were
    /// disturbed by a neighbour and the calibration should be run again on a quiet machine.
    pub others_cpu_share: f64,
    /// Share of all CPUs' time stolen by the hypervisor for other guests (`/proc/stat`'s
    /// steal column) during the calibration.
    pub steal_share: f64,
}

/// `switch_by_threads`: one ring size.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RingPoint {
    /// Threads in the ring.
    pub threads: usize,
    /// ns per switch.
    pub per_switch: Repeated,
}

/// `context_switch_ns`: the futex ping-pong between two threads pinned to one CPU.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ContextSwitch {
    /// Round trips per run.
    pub round_trips: u64,
    /// Per switch: elapsed / (2 × round trips).
    pub per_switch: Repeated,
}

/// `cache_refill_ns`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CacheRefill {
    /// Working set per thread, bytes.
    pub working_set_bytes: usize,
    /// How the working set was chosen.
    pub working_set_source: String,
    pub round_trips: u64,
    /// Per switch, each thread touching its working set on every turn.
    pub per_switch_with_working_set: Repeated,
    /// One touch of the working set while it is warm (no switching).
    pub warm_touch: Repeated,
    /// The small-set per-switch median subtracted (the context-switch measurement's).
    pub small_set_per_switch_ns: f64,
    /// The median over the repetitions of (with working set − small set − warm touch), each
    /// repetition's two runs paired (they run back to back).
    pub refill_raw_ns: f64,
    /// `refill_raw_ns` if more than half the pairs are positive, else 0: a refill that does
    /// not show above the runs' own noise is not charged on every switch.
    pub refill_ns: f64,
}

/// Wake-up latencies of one setting, ns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latencies {
    /// Samples kept.
    pub samples: usize,
    /// Samples dropped because the waiter was not yet asleep when woken (the wake found
    /// nobody to wake).
    pub discarded: usize,
    pub median_ns: f64,
    pub p10_ns: f64,
    pub p90_ns: f64,
}

/// One point of the wake-up sweep (waker and waiter unpinned).
#[derive(Debug, Clone, Default, Serialize)]
pub struct WakePoint {
    /// Busy-spinning threads per core (0 = idle).
    pub spinners_per_core: usize,
    /// Busy-spinning threads in all.
    pub spinners: usize,
    /// Runnable threads per core when the waiter is woken: spinners per core + the waiter's
    /// share (1 / cores). The slope does not depend on this offset.
    pub runnable_per_core: f64,
    pub latency: Latencies,
}

/// `wake_base_ns` and `wake_per_runnable_ns`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WakeLatency {
    /// Sleep of the waker between samples, µs.
    pub gap_us: u64,
    /// The waker's and the waiter's CPUs for the idle-core wake-up (the same CPU only when
    /// the process may use just one).
    pub idle_core_cpus: (usize, usize),
    /// Idle machine, waker and waiter pinned to different CPUs: a wake-up onto an idle core.
    pub idle_core: Latencies,
    /// The sweep: idle first, then each loaded point; waker and waiter unpinned.
    pub points: Vec<WakePoint>,
    /// `idle_core`'s median.
    pub base_ns: f64,
    /// The slope of the loaded points' medians against runnable threads per core (Theil-Sen:
    /// the median of the pairwise slopes, so one jumped point does not set it), at least 0.
    pub slope_ns_per_runnable: f64,
    /// That line's intercept (at 0 runnable threads per core); with the slope at 0, the
    /// loaded points' median.
    pub intercept_ns: f64,
}

/// `timer_slack_ns`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SleepOvershoot {
    /// Sleeps of each length.
    pub samples: usize,
    /// Overshoot of `sleep(1 ms)`: each sample is a run.
    pub sleep_1ms: Repeated,
    /// Overshoot of `sleep(10 ms)`.
    pub sleep_10ms: Repeated,
}

/// `yield_ns`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct YieldCost {
    /// Calls per run with the CPU to itself.
    pub calls: u64,
    /// Per call, nothing else runnable on the pinned CPU.
    pub alone: Repeated,
    /// Per call with one busy thread pinned to the same CPU: each call then includes the
    /// busy thread's turn.
    pub with_busy_thread: Repeated,
    /// Calls made in each run beside the busy thread (bounded by `yield_busy_ms`).
    pub with_busy_thread_calls: Vec<u64>,
}

/// `mutex_handoff_ns`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MutexHandoff {
    /// Threads hammering the mutex (one per CPU, at least 2).
    pub threads: usize,
    /// Length of each contended run, ms.
    pub run_ms: u64,
    /// Serial time per acquisition: elapsed / acquisitions by all threads.
    pub contended_per_acquisition: Repeated,
    /// Acquisitions in each contended run.
    pub contended_acquisitions: Vec<u64>,
    /// Share of each contended run's acquisitions made by its busiest thread (1 / threads
    /// for a fair lock; near 1 when one thread keeps re-taking it).
    pub busiest_thread_share: Vec<f64>,
    /// One thread alone: per lock+unlock pair.
    pub uncontended_pair: Repeated,
    pub uncontended_pairs: u64,
}

/// Everything one calibration measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Calibration {
    /// Switch cost against the number of threads taking turns on one CPU.
    pub ring: Vec<RingPoint>,
    pub host: Host,
    pub reps: usize,
    /// Seconds the whole calibration took.
    pub wall_s: f64,
    pub context_switch: ContextSwitch,
    pub cache_refill: CacheRefill,
    pub wake: WakeLatency,
    pub timer_slack: SleepOvershoot,
    #[serde(rename = "yield")]
    pub yield_cost: YieldCost,
    pub mutex: MutexHandoff,
    /// Whether a woken thread takes the CPU from a running one, and after how long.
    pub wake_preempt: WakePreempt,
    /// How long a thread back from a sleep waits for a CPU that busy threads share.
    pub sleeper: Vec<SleeperPoint>,
    /// What the call that wakes another thread costs its caller.
    pub wake_call: WakeCall,
}

/// Steps [`run`] reports to its progress callback.
pub const STEPS: usize = 10;

/// Runs every measurement, telling `progress` what starts (one call per measurement).
pub fn run(cfg: &CalibrateConfig, progress: &mut dyn FnMut(&str)) -> Result<Calibration, String> {
    cfg.validate()?;
    let started = Instant::now();
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let allowed = allowed_cpus()?;
    if allowed.len() < 2 {
        // On one CPU the wake-up "onto an idle core" is waker and waiter sharing that CPU,
        // and a lock "hand-off" is two threads taking turns on it: values written under
        // multi-core meanings would be one CPU's (several times below a real idle-core
        // wake-up).
        return Err(format!(
            "calibrate needs at least 2 CPUs (it measures wake-ups onto another, idle CPU and lock hand-offs between CPUs); this process may use {} (taskset, cgroup cpuset)",
            allowed.len()
        ));
    }
    // The last CPU we may use: CPU 0 is where device interrupts usually land.
    let cpu = *allowed.last().ok_or("this process may run on no CPU")?;
    let mut host = host_info(cpus, cpu);
    let cpu_before = CpuTimes::now();
    let reps = cfg.reps;

    progress(&format!(
        "context switch: futex ping-pong of two threads pinned to CPU {cpu}, {} round trips × {reps}",
        cfg.switch_round_trips
    ));
    let switch_runs = repeat(reps, || {
        ping_pong(cpu, cfg.switch_round_trips, 0).map(|(ns, _)| ns)
    })?;
    let context_switch = ContextSwitch {
        round_trips: cfg.switch_round_trips,
        per_switch: Repeated::of(&switch_runs),
    };

    progress(&format!(
        "switch with many threads: a token around a ring of {:?} threads pinned to CPU {cpu}",
        cfg.ring_threads
    ));
    let mut ring = Vec::with_capacity(cfg.ring_threads.len());
    for &n in &cfg.ring_threads {
        let runs = repeat(reps.min(5), || ring_switch_ns(cpu, n, cfg.ring_switches))?;
        ring.push(RingPoint {
            threads: n,
            per_switch: Repeated::of(&runs),
        });
    }

    let (ws, ws_source) = match cfg.cache_bytes {
        Some(b) => (b, format!("set to {b} bytes")),
        None => llc_share(),
    };
    progress(&format!(
        "cache refill: the ping-pong touching {} KiB per thread per turn, {} round trips × {reps}; warm touch × {reps}",
        ws >> 10,
        cfg.cache_round_trips
    ));
    let mut with_ws = Vec::with_capacity(reps);
    let mut warm = Vec::with_capacity(reps);
    for _ in 0..reps {
        with_ws.push(ping_pong(cpu, cfg.cache_round_trips, ws)?.0);
        warm.push(warm_touch_ns(cpu, ws, cfg.warm_touches)?);
    }
    let small = context_switch.per_switch.median_ns;
    let (refill_raw, refill_ns) = refill_from_pairs(&with_ws, &warm, small);
    let cache_refill = CacheRefill {
        working_set_bytes: ws,
        working_set_source: ws_source,
        round_trips: cfg.cache_round_trips,
        per_switch_with_working_set: Repeated::of(&with_ws),
        warm_touch: Repeated::of(&warm),
        small_set_per_switch_ns: small,
        refill_raw_ns: round1(refill_raw),
        refill_ns: round1(refill_ns),
    };

    progress(&format!(
        "wake-up latency: {} samples idle onto another CPU, {} idle unpinned, {} at each of {:?} spinning threads per core ({cpus} cores)",
        cfg.wake_idle_samples, cfg.wake_idle_samples, cfg.wake_loaded_samples, cfg.wake_spinners_per_core
    ));
    let wake = wake_sweep(cfg, cpus, &allowed)?;

    progress(&format!(
        "timer slack: sleep(1 ms) and sleep(10 ms), {} each",
        cfg.sleep_samples
    ));
    let timer_slack = SleepOvershoot {
        samples: cfg.sleep_samples,
        sleep_1ms: Repeated::of(&sleep_overshoots(
            Duration::from_millis(1),
            cfg.sleep_samples,
        )),
        sleep_10ms: Repeated::of(&sleep_overshoots(
            Duration::from_millis(10),
            cfg.sleep_samples,
        )),
    };

    progress(&format!(
        "yield: {} sched_yield calls pinned to CPU {cpu} × {reps}; beside a busy thread for {} ms × {reps}",
        cfg.yield_calls, cfg.yield_busy_ms
    ));
    let mut alone = Vec::with_capacity(reps);
    let mut busy = Vec::with_capacity(reps);
    let mut busy_calls = Vec::with_capacity(reps);
    for _ in 0..reps {
        alone.push(yield_alone_ns(cpu, cfg.yield_calls)?);
        let (ns, calls) = yield_beside_busy_ns(cpu, Duration::from_millis(cfg.yield_busy_ms))?;
        busy.push(ns);
        busy_calls.push(calls);
    }
    let yield_cost = YieldCost {
        calls: cfg.yield_calls,
        alone: Repeated::of(&alone),
        with_busy_thread: Repeated::of(&busy),
        with_busy_thread_calls: busy_calls,
    };

    let threads = cpus.max(2);
    progress(&format!(
        "mutex hand-off: {threads} threads on one pthread mutex for {} ms × {reps}; one thread × {reps}",
        cfg.mutex_ms
    ));
    let mut contended = Vec::with_capacity(reps);
    let mut acquisitions = Vec::with_capacity(reps);
    let mut busiest = Vec::with_capacity(reps);
    let mut uncontended = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (ns, n, share) = mutex_contended_ns(threads, Duration::from_millis(cfg.mutex_ms))?;
        contended.push(ns);
        acquisitions.push(n);
        busiest.push((share * 1000.0).round() / 1000.0);
        uncontended.push(mutex_uncontended_ns(cfg.mutex_uncontended_pairs));
    }
    let mutex = MutexHandoff {
        threads,
        run_ms: cfg.mutex_ms,
        contended_per_acquisition: Repeated::of(&contended),
        contended_acquisitions: acquisitions,
        busiest_thread_share: busiest,
        uncontended_pair: Repeated::of(&uncontended),
        uncontended_pairs: cfg.mutex_uncontended_pairs,
    };

    // Both pinned threads on the last CPU; the waker on another (the first) where there is one.
    let waker_cpu = *allowed.iter().find(|&&c| c != cpu).unwrap_or(&cpu);
    progress(&format!(
        "wake-up preemption: two threads pinned to CPU {cpu}, one woken while the other has run {:?} µs, {} each",
        cfg.preempt_runs_us, cfg.preempt_samples
    ));
    let wake_preempt = wake_preempt(cpu, waker_cpu, &cfg.preempt_runs_us, cfg.preempt_samples)?;

    progress(&format!(
        "sleeper behind busy threads: a thread sleeping 10 ms at a time on CPU {cpu} beside {:?} busy threads pinned there, {} sleeps each",
        cfg.sleeper_busy, cfg.sleeper_samples
    ));
    let sleeper = cfg
        .sleeper_busy
        .iter()
        .map(|&k| sleeper_point(cpu, k, cfg.sleeper_samples))
        .collect::<Result<Vec<_>, _>>()?;

    progress(&format!(
        "wake call: futex_wake with nobody waiting × {reps}, and waking a waiter on the waker's CPU {cpu} and on CPU {waker_cpu}, {} each",
        cfg.wake_call_samples
    ));
    let wake_call = wake_call(cpu, waker_cpu, reps, cfg.wake_call_samples)?;

    if let (Some(a), Some(b)) = (cpu_before, CpuTimes::now()) {
        let total = b.total.saturating_sub(a.total).max(1) as f64;
        let ours = b.ours.saturating_sub(a.ours);
        let others = b.busy.saturating_sub(a.busy).saturating_sub(ours);
        host.others_cpu_share = (others as f64 / total * 1000.0).round() / 1000.0;
        host.steal_share =
            (b.steal.saturating_sub(a.steal) as f64 / total * 1000.0).round() / 1000.0;
    }
    Ok(Calibration {
        host,
        reps,
        wall_s: (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
        context_switch,
        ring,
        cache_refill,
        wake,
        timer_slack,
        yield_cost,
        mutex,
        wake_preempt,
        sleeper,
        wake_call,
    })
}

/// Rounds to 0.1 (ns): finer digits are noise and clutter the TOML.
fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn repeat(reps: usize, mut f: impl FnMut() -> Result<f64, String>) -> Result<Vec<f64>, String> {
    (0..reps).map(|_| f()).collect()
}

fn ns_per(elapsed: Duration, n: u64) -> f64 {
    elapsed.as_nanos() as f64 / n.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positive(name: &str, v: f64) {
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
    }

    fn non_negative(name: &str, v: f64) {
        assert!(v.is_finite() && v >= 0.0, "{name} = {v}");
    }

    #[test]
    fn a_tiny_calibration_gives_positive_finite_figures() {
        let mut steps = 0;
        let c = run(&CalibrateConfig::tiny(), &mut |_| steps += 1).unwrap();
        assert_eq!(steps, STEPS);
        positive("context switch", c.context_switch.per_switch.median_ns);
        assert_eq!(c.ring.len(), 2);
        for p in &c.ring {
            positive("ring switch", p.per_switch.median_ns);
        }
        positive(
            "switch with working set",
            c.cache_refill.per_switch_with_working_set.median_ns,
        );
        positive("warm touch", c.cache_refill.warm_touch.median_ns);
        non_negative("cache refill", c.cache_refill.refill_ns);
        assert!(c.cache_refill.refill_raw_ns.is_finite());
        assert_eq!(c.wake.points.len(), 3);
        positive("idle-core wake-up", c.wake.idle_core.median_ns);
        assert!(c.wake.idle_core.samples > 0);
        for p in &c.wake.points {
            positive("wake-up median", p.latency.median_ns);
            assert!(p.latency.samples > 0);
        }
        assert!(c.wake.slope_ns_per_runnable.is_finite());
        positive("sleep 1 ms overshoot", c.timer_slack.sleep_1ms.median_ns);
        positive("sleep 10 ms overshoot", c.timer_slack.sleep_10ms.median_ns);
        positive("yield alone", c.yield_cost.alone.median_ns);
        positive("yield beside busy", c.yield_cost.with_busy_thread.median_ns);
        positive(
            "mutex contended",
            c.mutex.contended_per_acquisition.median_ns,
        );
        positive("mutex uncontended", c.mutex.uncontended_pair.median_ns);
        if allowed_cpus().unwrap().len() >= 2 {
            assert_eq!(c.wake_preempt.points.len(), 2);
            for p in &c.wake_preempt.points {
                positive("woken thread's latency", p.latency.median_ns);
                assert!((0.0..=1.0).contains(&p.at_once_share), "{p:?}");
            }
        }
        positive(
            "wake call, nobody waiting",
            c.wake_call.nobody_waiting.median_ns,
        );
        positive("wake call, same CPU", c.wake_call.same_cpu.median_ns);
        if allowed_cpus().unwrap().len() >= 2 {
            positive(
                "wake call, other CPU",
                c.wake_call.other_idle_cpu.as_ref().unwrap().median_ns,
            );
        }
        assert_eq!(c.sleeper.len(), 1);
        assert_eq!(c.sleeper[0].busy, 2);
        // Every sleep was kept (nothing is discarded in this sweep).
        assert_eq!(c.sleeper[0].overshoot.samples, 2);
        positive("sleeper's overshoot", c.sleeper[0].overshoot.median_ns);
        assert_eq!(c.context_switch.per_switch.runs_ns.len(), 3);
        non_negative("others' CPU share", c.host.others_cpu_share);
        assert!(c.host.others_cpu_share <= 1.0);
    }

    #[test]
    fn configs_with_a_zero_count_are_rejected() {
        assert!(CalibrateConfig::full().validate().is_ok());
        assert!(CalibrateConfig::quick().validate().is_ok());
        let c = CalibrateConfig {
            reps: 0,
            ..CalibrateConfig::tiny()
        };
        assert!(c.validate().unwrap_err().contains("reps"));
    }
}
