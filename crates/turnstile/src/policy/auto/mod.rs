//! `auto`: the gate to deploy, with no limit or tickets to tune. The model is docs/AUTO.md;
//! this module is its code, in three parts:
//!
//! * this file: the parameters, and the two rules that decide who holds a slot whatever the
//!   limit — a time quantum instead of row tickets, and waits free the slot while work keeps
//!   it ([`keeps_slot_across`]);
//! * [`core`]: the slots and the queue — the one-RMW fast path, hot-first hand-off with an
//!   age cap, open transactions and sessions back from a wait first, the stall watch, loans
//!   during lock waits, overload refusal;
//! * [`controller`]: the limit, from the CPU use the slots produce (the fill, busy and floor
//!   rules).
//!
//! # Invariants
//! * Counted inside (`AtomicSlots::inside`) ≤ limit, except transiently inside `try_take`,
//!   and for slots lent during a lock wait and taken back (`reclaim`), which may bring it to
//!   2 × limit; *extra* admissions ≤ limit (checked under the queue lock). So running ≤
//!   2 × limit for threads that do not block on turnstile locks, ≤ 3 × limit with them.
//! * A waiter is released only by a hand-off that counted it inside (or as extra) first, so a
//!   newcomer never takes a handed-off slot.
//! * **No lost wake-up.** A thread queues by incrementing `queued` and then tries for a slot
//!   once more; an exit gives its slot back and then reads `queued`. All four are `SeqCst`,
//!   so either the queuer's retry sees the freed slot or the exit sees the queuer and hands
//!   it a slot under the queue lock (`loom` checks this: `tests/loom.rs`).
//! * Every queued waiter not cancelled is released by some exit, limit change or stall tick.
//! * While thread waiters queue, one of them keeps the stall watch, or has been chosen for it
//!   and is being woken to take it ([`AutoCore::take_nudge`]): a keeper that leaves the queue
//!   passes it on under the queue lock.

use std::time::Duration;

use crate::config::{available_cpus, GateConfig, MAX_LIMIT};
use crate::policy::step_out::StepOutReason;

pub mod controller;
pub mod core;

pub use self::controller::{CONTROL_WINDOW, CPU_CLOCK_LAG};
pub use self::core::{AutoCore, Releases};
pub use crate::auto_stats::{AutoStats, LimitReasons};
use crate::handoff_cost::handoff_cpu;

/// The queued waiter that keeps the stall watch, having seen no slot released for this long,
/// runs the controller itself. MariaDB's thread pool checks every 500 ms
/// (`thread_pool_stall_limit`); 200 ms is a few slow fsyncs, and one watch waking this often
/// costs 5 wake-ups a second whatever the queue's length.
pub const STALL_PERIOD: Duration = Duration::from_millis(200);

/// The settings of an `auto` core (see [`crate::GateConfig`] for the public knobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoParams {
    /// The starting limit (the CPUs the process may use, unless configured).
    pub start_limit: u32,
    /// The CPUs the process may use: the controller's reference.
    pub cpus: u32,
    /// Smallest and largest limit the controller may set.
    pub min_limit: u32,
    /// See `min_limit`.
    pub max_limit: u32,
    /// The time quantum an admission grants.
    pub quantum: Duration,
    /// The age past which waiters are served oldest first.
    pub age_cap: Duration,
    /// Refuse to queue more than this many waiters (0: no cap).
    pub max_waiting: u32,
    /// Let the controller move the limit (`false`: the limit stays where it is set).
    pub adaptive: bool,
    /// How far the CPU reading may lag per CPU other than the reader's: one scheduler tick
    /// as the kernel reports it, else `CPU_CLOCK_LAG`; zero for an exact reading (the
    /// simulator's).
    pub cpu_clock_lag: Duration,
    /// The CPU one hand-off costs (a wake-up and a switch), measured once per process
    /// (`handoff_cost.rs`); the simulator gives its machine's context switch.
    pub handoff_cpu: Duration,
}

impl AutoParams {
    /// `c`'s settings for a machine whose process may use `cpus` CPUs (the simulator's
    /// cores; the real gate's [`AutoParams::from_config`]).
    pub fn for_config(c: &GateConfig, cpus: u32) -> AutoParams {
        AutoParams {
            start_limit: c.limit,
            cpus,
            // Never below the CPUs unless the limit was set lower: fewer slots than CPUs
            // leave a core idle whenever every thread is queued.
            min_limit: cpus.min(c.limit.max(1)),
            max_limit: MAX_LIMIT,
            quantum: c.quantum,
            age_cap: c.age_cap,
            max_waiting: c.max_waiting,
            adaptive: c.adaptive_limit,
            cpu_clock_lag: crate::clock::scheduler_tick().unwrap_or(CPU_CLOCK_LAG),
            handoff_cpu: if c.adaptive_limit {
                handoff_cpu()
            } else {
                Duration::ZERO
            },
        }
    }

    /// `c`'s settings where it runs: the CPUs the process may use now.
    pub(crate) fn from_config(c: &GateConfig) -> AutoParams {
        AutoParams::for_config(c, available_cpus())
    }
}

/// Why an enter was refused ([`super::Step::Reject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// The queue already holds the configured maximum of waiters.
    QueueFull {
        /// The cap.
        max_waiting: u32,
    },
}

/// Whether `auto` keeps a session's slot across a step-out for `reason`: yes for work outside
/// the engine (sending results, a file sort), which needs a CPU as much as a row fetch does;
/// no for a wait, which would hold a slot while using no CPU (seed 004's pileup).
pub fn keeps_slot_across(reason: StepOutReason) -> bool {
    matches!(
        reason,
        StepOutReason::SendingResults | StepOutReason::FileSort
    )
}

/// A fixed-limit core's parameters for `limit` CPUs and slots, with exact CPU readings (the
/// core's tests and its loom models).
#[cfg(test)]
fn test_params(limit: u32, age_cap: Duration) -> AutoParams {
    AutoParams {
        start_limit: limit,
        cpus: limit,
        min_limit: 1,
        max_limit: 1000,
        quantum: crate::config::DEFAULT_QUANTUM,
        age_cap,
        max_waiting: 0,
        adaptive: false,
        cpu_clock_lag: Duration::ZERO,
        handoff_cpu: Duration::ZERO,
    }
}
