//! What a `bench gate` run is asked to do: the variants (gate policies and the baseline), the
//! thread counts and the per-statement work, with their defaults and validation. Both the
//! threaded benchmark ([`crate::gate`]) and its async line ([`crate::async_gate`]) read these
//! settings, so they sit below both.

use std::time::Duration;

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy};

/// What a benchmark point runs: a gate policy or the baseline semaphore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The turnstile gate under this policy.
    Gate(Policy),
    /// [`MutexCondvarSemaphore`](crate::baseline::MutexCondvarSemaphore), reported as
    /// `mutex-condvar`.
    MutexCondvar,
}

impl Variant {
    /// Every gate policy, then the baseline.
    pub fn all() -> Vec<Variant> {
        Policy::ALL
            .into_iter()
            .map(Variant::Gate)
            .chain([Variant::MutexCondvar])
            .collect()
    }

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Gate(p) => p.name(),
            Variant::MutexCondvar => "mutex-condvar",
        }
    }

    /// Parses a policy name or `mutex-condvar`.
    pub fn parse(s: &str) -> Result<Variant, String> {
        if s.eq_ignore_ascii_case("mutex-condvar") {
            return Ok(Variant::MutexCondvar);
        }
        s.parse::<Policy>()
            .map(Variant::Gate)
            .map_err(|e| format!("{e}, or mutex-condvar"))
    }
}

/// Settings of one `bench gate` run.
#[derive(Debug, Clone, Serialize)]
pub struct GateBenchConfig {
    /// Variants to run (names).
    #[serde(serialize_with = "ser_variants")]
    pub variants: Vec<Variant>,
    /// Thread counts for the load.
    pub threads: Vec<usize>,
    /// The gate's limit for the load.
    pub limit: u32,
    /// Tickets per admission for the load.
    pub tickets: u32,
    /// Calls per statement.
    pub calls: u32,
    /// CPU work per call, µs.
    pub work_us: f64,
    /// A blocking sleep per call, µs, inside the slot and declared to nobody (a page read,
    /// an fsync, a lock the gate does not know): the load for which the best fixed limit is
    /// far above the CPU count. 0: none.
    #[serde(default)]
    pub block_us: u64,
    /// Sleep delay of the gate, µs.
    pub sleep_delay_us: u64,
    /// Measured time per load point, after a warm-up of a quarter of it
    /// ([`crate::gate::WARMUP_DIVISOR`]).
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Repetitions of each fast-path measurement (the median is reported).
    pub reps: usize,
    /// Iterations per fast-path repetition.
    pub iters: u64,
    /// Tasks in the async line's load (0 = no async line).
    pub async_tasks: usize,
}

fn ser_variants<S: serde::Serializer>(v: &[Variant], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|v| v.name()))
}

/// Default thread counts: 1 to 1024 in powers of two, as seeds 001 and 002 swept.
pub const DEFAULT_THREADS: [usize; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

impl GateBenchConfig {
    /// The full run: every variant, 1…1024 threads, 0.5 s per point, 11 repetitions.
    /// Limit 8 (InnoDB 5.0/5.1's default and seed 004's setting); tickets 500 (the seeds');
    /// statements of 10 calls of 10 µs, so a statement is 100 µs of CPU: small enough that the
    /// gate's own cost and its wake-ups matter, as in seed 001's read-only load.
    pub fn full() -> Self {
        GateBenchConfig {
            variants: Variant::all(),
            threads: DEFAULT_THREADS.to_vec(),
            limit: 8,
            tickets: 500,
            calls: 10,
            work_us: 10.0,
            block_us: 0,
            sleep_delay_us: 10_000,
            duration: Duration::from_millis(500),
            reps: 11,
            iters: 1_000_000,
            async_tasks: 64,
        }
    }

    /// A run under 30 s on two cores: four thread counts, short points, fewer repetitions.
    pub fn quick() -> Self {
        GateBenchConfig {
            threads: vec![1, 4, 16, 64],
            duration: Duration::from_millis(200),
            reps: 5,
            iters: 300_000,
            ..GateBenchConfig::full()
        }
    }

    pub(crate) fn gate(&self, policy: Policy, limit: u32, tickets: u32) -> Gate {
        if policy == Policy::Auto {
            // Untuned: its own starting limit (the CPUs) and a quantum instead of tickets.
            return Gate::new(GateConfig::new(Policy::Auto)).expect("the defaults are valid");
        }
        Gate::new(GateConfig::new(policy).innodb_settings(
            limit,
            tickets,
            Duration::from_micros(self.sleep_delay_us),
        ))
        .expect("validated by the caller")
    }

    /// Checks the settings a user can get wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.variants.is_empty() {
            return Err("no variants to run".into());
        }
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err("thread counts must be at least 1".into());
        }
        if let Some(&t) = self.threads.iter().find(|&&t| t > 16_384) {
            return Err(format!(
                "{t} threads is more than this benchmark supports (16384)"
            ));
        }
        if self.async_tasks > 16_384 {
            return Err(format!(
                "{} async tasks is more than this benchmark supports (16384)",
                self.async_tasks
            ));
        }
        if self.calls == 0 {
            return Err("calls per statement must be at least 1".into());
        }
        if self.block_us > 1_000_000 {
            return Err(format!(
                "block_us = {} is out of range: accepted values are 0..=1000000",
                self.block_us
            ));
        }
        if !(self.work_us >= 0.0 && self.work_us <= 1_000_000.0) {
            return Err(format!(
                "work per call {} µs must be in 0..=1000000",
                self.work_us
            ));
        }
        if self.reps == 0 || self.iters == 0 || self.duration.is_zero() {
            return Err("repetitions, iterations and duration must be positive".into());
        }
        // A run without end otherwise (a duration of u64::MAX ms was accepted).
        if self.reps > 1000 || self.iters > 10_000_000_000 || self.duration > MAX_DURATION {
            return Err(format!(
                "repetitions at most 1000, iterations at most 10^10, duration at most {} s",
                MAX_DURATION.as_secs()
            ));
        }
        crate::stats::each_once("the policies", &self.variants, |v| v.name().into())?;
        crate::stats::each_once("the thread counts", &self.threads, |t| t.to_string())?;
        GateConfig::new(Policy::Classic)
            .limit(self.limit)
            .tickets(self.tickets)
            .sleep_delay(Duration::from_micros(self.sleep_delay_us))
            .validate()
            .map_err(|e| e.to_string())
    }
}

/// The longest load point a benchmark runs: an hour (`repro`'s `--seconds` bound).
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
