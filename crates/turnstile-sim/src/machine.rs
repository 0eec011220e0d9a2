//! The simulated machine's parameters, each with its default and the source of that default.
//!
//! The defaults are a calibration recorded in `docs/results/calibration/` (`turnstile
//! calibrate`) for everything a machine measures, and cited values for the scheduler's
//! settings. `turnstile calibrate --out FILE` writes a `[machine]` table of exactly
//! these fields for the machine it runs on; `turnstile sim … --machine FILE` loads it.

use serde::{Deserialize, Serialize};

/// How a wake-up latency is drawn around its mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    /// Always the mean.
    Fixed,
    /// Exponential with that mean (memoryless scheduling noise).
    Exponential,
}

/// An N-core machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineConfig {
    /// Cores.
    pub cores: u32,
    /// Time slice, ns: a thread with CPU work left is preempted after this long if another is
    /// runnable. Default 4 ms: not measured — Linux CFS's minimum granularity scaled for a
    /// small machine (`sched_min_granularity_ns` 0.75 ms × (1 + log2 cores), and `HZ=250`'s
    /// 4 ms tick, which is when a CPU-bound thread is actually preempted). `0` = run to
    /// completion (FCFS).
    pub time_slice_ns: u64,
    /// CPU time a core loses at each switch to another thread, with a small working set, ns:
    /// `turnstile calibrate`'s ping-pong of two threads pinned to one CPU through futexes,
    /// per switch.
    pub context_switch_ns: u64,
    /// CPU time a core loses at a switch against the number of threads alive, as
    /// `[threads, ns]` pairs with threads ascending: `turnstile calibrate`'s token passed
    /// around a ring of that many threads pinned to one CPU. With many threads each switch
    /// goes to a thread whose stack and kernel state have gone cold. The simulator
    /// interpolates in log(threads), clamps at the ends, and uses `context_switch_ns` when
    /// this is empty.
    pub switch_by_threads: Vec<[u64; 2]>,
    /// Extra CPU time a thread loses after a switch when its working set was evicted by the
    /// thread that ran in between, ns: `turnstile calibrate`'s ping-pong again, each thread
    /// touching a working set the size of the per-core cache share between switches, minus
    /// the small-set figure and the touching itself. Charged when a core switches to a
    /// thread other than the one it ran last.
    pub cache_refill_ns: u64,
    /// Latency from a thread being signalled (futex wake) to it running on an idle core, ns:
    /// `turnstile calibrate`'s futex wake-up latency with no other runnable thread.
    pub wake_base_ns: u64,
    /// Extra wake-up latency per runnable thread per core, ns: the slope of
    /// `turnstile calibrate`'s futex wake-up latency against busy threads per core. It stands
    /// for the scheduler's own work (enqueue, wake-up preemption checks); the time a woken
    /// thread waits for a core behind others is the run queue's, not this.
    pub wake_per_runnable_ns: u64,
    /// Distribution of the wake-up latency around its mean.
    pub wake_distribution: Distribution,
    /// Overshoot of a timed sleep beyond its asked length, on an idle machine, ns:
    /// `turnstile calibrate`'s `nanosleep` of 1 ms and 10 ms. It includes the wake-up of the
    /// sleeper, so a timed wake-up pays this instead of `wake_base_ns`; both pay the
    /// per-runnable part.
    pub timer_slack_ns: u64,
    /// CPU cost of a `sched_yield` that finds nobody else to run, ns: `turnstile calibrate`.
    pub yield_ns: u64,
    /// Serial time per acquisition of a contended pthread mutex with a tiny critical section,
    /// ns: `turnstile calibrate`'s threads (one per core) hammering one `pthread_mutex_t`.
    /// The simulator charges it, holding the gate's own mutex, for every decision of a gate
    /// that has one (InnoDB 5.0–5.5's `srv_conc_mutex`: `classic` and `flifo`) when the
    /// mutex was last held by another thread (its cache line must move).
    pub mutex_handoff_ns: u64,
    /// CPU of an uncontended lock and unlock of a pthread mutex whose line is already local,
    /// ns: `turnstile calibrate`'s one thread locking and unlocking in a loop. Charged instead
    /// of `mutex_handoff_ns` when the same thread held the gate's mutex last.
    pub mutex_uncontended_ns: u64,
    /// Wake-up preemption: a woken thread takes the core of a thread that has run at least
    /// this long in its current slice, ns; until then the running thread is protected and the
    /// woken one waits for a core to free (its block, or its slice's end). `turnstile
    /// calibrate`'s preemption sweep: two threads pinned to one CPU, one woken while the other
    /// has run a set time (under EEVDF, the base slice 0.75 ms × (1 + log2 CPUs) that
    /// `RUN_TO_PARITY` protects). `None`: never.
    pub wake_preempt_ns: Option<u64>,
    /// Latency from a thread being signalled to it being runnable when no core is idle, ns:
    /// the intercept of `turnstile calibrate`'s wake-up sweep (its woken thread runs on the
    /// waker's CPU once the waker blocks; the slope, `wake_per_runnable_ns`, adds the
    /// scheduler's work per runnable thread). `wake_base_ns` is the wake-up onto an idle core,
    /// which on a VM must wake a halted vCPU. `None`: `wake_base_ns` always (calibrations
    /// written before this field).
    pub wake_busy_ns: Option<u64>,
    /// CPU the waking thread spends in the call that wakes another (`futex_wake` finding a
    /// waiter) when every core is busy, ns: `turnstile calibrate` wakes a waiter pinned to the
    /// waker's own CPU. Charged to the waker: a mutex unlock with sleepers, a gate hand-off.
    /// 0 = not modelled.
    pub wake_call_ns: u64,
    /// The same call when a core is idle to take the woken thread, ns: it must also wake that
    /// CPU (an inter-processor interrupt; on a VM, a halted vCPU). `turnstile calibrate` wakes
    /// a waiter pinned to another, idle CPU.
    pub wake_call_idle_ns: u64,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            cores: 8,
            time_slice_ns: 4_000_000,
            context_switch_ns: 3_000,
            switch_by_threads: Vec::new(),
            cache_refill_ns: 0,
            wake_base_ns: 20_000,
            wake_per_runnable_ns: 1_500,
            wake_distribution: Distribution::Exponential,
            timer_slack_ns: 60_000,
            yield_ns: 500,
            mutex_handoff_ns: 0,
            mutex_uncontended_ns: 0,
            wake_preempt_ns: None,
            wake_call_ns: 0,
            wake_call_idle_ns: 0,
            wake_busy_ns: None,
        }
    }
}

impl MachineConfig {
    /// A machine with every overhead at zero (for checks against queueing theory).
    pub fn ideal(cores: u32) -> Self {
        MachineConfig {
            cores,
            time_slice_ns: 0,
            context_switch_ns: 0,
            switch_by_threads: Vec::new(),
            cache_refill_ns: 0,
            wake_base_ns: 0,
            wake_per_runnable_ns: 0,
            wake_distribution: Distribution::Fixed,
            timer_slack_ns: 0,
            yield_ns: 0,
            mutex_handoff_ns: 0,
            mutex_uncontended_ns: 0,
            wake_preempt_ns: None,
            wake_call_ns: 0,
            wake_call_idle_ns: 0,
            wake_busy_ns: None,
        }
    }

    /// CPU a core loses switching to another thread with `threads` alive (see
    /// `switch_by_threads`).
    pub fn switch_ns(&self, threads: usize) -> u64 {
        let t = &self.switch_by_threads;
        let (Some(first), Some(last)) = (t.first(), t.last()) else {
            return self.context_switch_ns;
        };
        let n = threads.max(1) as u64;
        if n <= first[0] {
            return first[1];
        }
        if n >= last[0] {
            return last[1];
        }
        let i = t.iter().position(|p| p[0] >= n).expect("inside the range");
        let (a, b) = (t[i - 1], t[i]);
        let f = ((n as f64).ln() - (a[0] as f64).ln()) / ((b[0] as f64).ln() - (a[0] as f64).ln());
        (a[1] as f64 + f * (b[1] as f64 - a[1] as f64)).round() as u64
    }

    /// Rejects impossible settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.cores == 0 || self.cores > 4096 {
            return Err(format!("cores = {} is out of range: 1..=4096", self.cores));
        }
        const MAX: u64 = 10_000_000_000;
        // A slice shorter than 10 µs is no scheduler's (Linux's shortest granularity is
        // 0.75 ms), and costs an event per slice per busy core: `4`, meant as ms, would make
        // a default point take hours.
        if self.time_slice_ns != 0 && self.time_slice_ns < 10_000 {
            return Err(format!(
                "time_slice_ns = {} must be 0 (run to completion) or at least 10,000 ns",
                self.time_slice_ns
            ));
        }
        if self
            .switch_by_threads
            .windows(2)
            .any(|w| w[0][0] >= w[1][0])
            || self
                .switch_by_threads
                .iter()
                .any(|p| p[0] == 0 || p[1] > MAX)
        {
            return Err(
                "switch_by_threads must be [threads, ns] pairs, threads ascending and positive"
                    .into(),
            );
        }
        for (name, v) in [
            ("time_slice_ns", self.time_slice_ns),
            ("context_switch_ns", self.context_switch_ns),
            ("cache_refill_ns", self.cache_refill_ns),
            ("wake_base_ns", self.wake_base_ns),
            ("wake_per_runnable_ns", self.wake_per_runnable_ns),
            ("timer_slack_ns", self.timer_slack_ns),
            ("yield_ns", self.yield_ns),
            ("mutex_handoff_ns", self.mutex_handoff_ns),
            ("mutex_uncontended_ns", self.mutex_uncontended_ns),
            ("wake_preempt_ns", self.wake_preempt_ns.unwrap_or(0)),
            ("wake_busy_ns", self.wake_busy_ns.unwrap_or(0)),
            ("wake_call_ns", self.wake_call_ns),
            ("wake_call_idle_ns", self.wake_call_idle_ns),
        ] {
            if v > MAX {
                return Err(format!("{name} = {v} ns is over 10 s: not a machine"));
            }
        }
        Ok(())
    }
}
