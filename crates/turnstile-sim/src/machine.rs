//! The simulated machine's parameters, each with its default and the reason for it.

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
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineConfig {
    /// Cores.
    pub cores: u32,
    /// Time slice, ns: a thread with CPU work left is preempted after this long if another is
    /// runnable. Default 4 ms: CFS's `sched_latency` (24 ms) split among a handful of runnable
    /// threads, and a common `HZ=250` tick. `0` = run to completion (FCFS).
    pub time_slice_ns: u64,
    /// CPU time a core loses switching threads, ns. Default 3 µs: a Linux context switch on
    /// the seeds' era of hardware (direct cost 1–2 µs plus cache refill).
    pub context_switch_ns: u64,
    /// Base latency from a thread being signalled to it being runnable, ns. Default 20 µs:
    /// futex wake to running on an idle core, as measured by `turnstile bench gate`'s hand-off
    /// wake-up latency at low thread counts (4–6 µs) plus IPI and idle-exit costs on servers.
    pub wake_base_ns: u64,
    /// Extra wake-up latency per runnable thread per core, ns. Default 50 µs: the scheduler
    /// must run the others' slices first; seed 001 saw "threads took too long to begin
    /// running" with 1000+ threads, and `bench gate` measured 5 µs → 380 µs between 16 and
    /// 1024 threads on 2 cores.
    pub wake_per_runnable_ns: u64,
    /// Distribution of the wake-up latency around its mean.
    pub wake_distribution: Distribution,
    /// Slack added to every timed sleep, ns. Default 60 µs: Linux's default `timer_slack_ns`
    /// (50 µs) plus timer interrupt latency.
    pub timer_slack_ns: u64,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            cores: 8,
            time_slice_ns: 4_000_000,
            context_switch_ns: 3_000,
            wake_base_ns: 20_000,
            wake_per_runnable_ns: 50_000,
            wake_distribution: Distribution::Exponential,
            timer_slack_ns: 60_000,
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
            wake_base_ns: 0,
            wake_per_runnable_ns: 0,
            wake_distribution: Distribution::Fixed,
            timer_slack_ns: 0,
        }
    }

    /// Rejects impossible settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.cores == 0 || self.cores > 4096 {
            return Err(format!("cores = {} is out of range: 1..=4096", self.cores));
        }
        Ok(())
    }
}
