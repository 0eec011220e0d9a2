//! # turnstile
//!
//! Admission control for database engines: a gate that limits how many threads run inside an
//! engine at once, with InnoDB's concurrency tickets, under each of InnoDB's historical
//! policies, and a live picture of who is inside, who waits, and why.
//!
//! * [`Gate`] — the gate; built from a validated [`GateConfig`] naming a [`Policy`].
//! * [`Session`] — one per connection: its tickets and its slot. [`Session::begin`] starts a
//!   [`Statement`]; each [`Statement::enter`] is one call into the engine (one row fetched) and
//!   returns a [`Call`] guard whose drop exits. With tickets left, an enter costs one ticket
//!   and touches nothing shared, and the session keeps its slot between calls; the statement's
//!   end force-exits. [`Call::step_out`] frees the slot around blocking work and always returns
//!   the work's value; [`Call::resume`] re-enters.
//! * `AsyncSession` (feature `async`) — the session of a task on any async runtime:
//!   `enter().await` with the same tickets and policies, woken by the queue's hand-off, and
//!   cancelled safely by dropping the future.
//! * [`Gate::stats`] — cheap totals and gauges for monitoring (counters never decrease);
//!   [`Gate::snapshot`] adds every session, printable as InnoDB-style text.
//! * [`metrics`] — the stats as Prometheus text ([`GateStats::to_prometheus`]), and with the
//!   `metrics` feature through the `metrics` facade (`Gate::publish_metrics`).
//! * `policy` (hidden, not semver) — each policy's decisions, written once and shared with
//!   the simulator.
//!
//! ## Cargo features
//!
//! None is on by default; without them the crate depends on nothing for monitoring.
//!
//! * `serde` — `serde::Serialize` for [`GateStats`], [`Counters`], [`GateSnapshot`],
//!   [`SessionSnapshot`], [`SessionState`], [`StepOutReason`], [`Policy`] and
//!   [`HistogramSnapshot`]. Durations are whole nanoseconds in fields named `…_ns`
//!   (`sleep_delay_ns`, `taken_at_ns`, `in_state_ns`); a policy is its name (`"classic"`);
//!   states and reasons are snake_case names (`"in_call"`, `{"stepped_out": "row_lock_wait"}`);
//!   a histogram is a summary — `{"count", "sum_ns", "max_ns", "p50_ns", "p90_ns", "p99_ns",
//!   "p999_ns", "buckets": [[low_ns, high_ns, count], …]}`, listing only non-empty buckets.
//! * `metrics` — `metrics::publish` and `Gate::publish_metrics` through the
//!   `metrics` facade crate (0.24), under the Prometheus text's names.
//! * `async` — `AsyncSession` (`Gate::async_session`): the gate for tasks on any async
//!   runtime, with `std` futures and wakers only (no runtime dependency). Queued enters are
//!   woken by the hand-off; sleeping policies use a timer the caller supplies (`Sleeper`);
//!   dropping a pending enter cancels it and passes on a slot handed to it.
//!
//! ## Example: a scan, and a row-lock wait
//!
//! ```
//! use std::time::Duration;
//! use turnstile::{Gate, GateConfig, Policy, StepOutReason};
//!
//! let gate = Gate::new(GateConfig::new(Policy::Classic).limit(4).tickets(500))?;
//! let mut session = gate.named_session("scan");
//!
//! // A full scan: one enter/exit per row. The first enter is an admission granting 500
//! // tickets; the next 500 enters spend one each and keep the slot between rows.
//! let mut stmt = session.begin();
//! let mut rows = 0;
//! for _row in 0..1_000 {
//!     let call = stmt.enter()?;
//!     rows += 1; // ... read the row ...
//!     drop(call); // exit: the slot is kept while tickets remain
//! }
//! assert!(stmt.is_inside());
//! drop(stmt); // statement end: force exit, tickets to 0, slot freed
//! assert_eq!(gate.snapshot().inside, 0);
//!
//! // An update that must wait for a row lock steps out of the gate for the wait, so its slot
//! // is not wasted while it blocks, and re-enters by the policy's rule afterwards.
//! let mut stmt = session.begin();
//! let mut call = stmt.enter()?;
//! let granted = call.step_out(StepOutReason::RowLockWait, || {
//!     std::thread::sleep(Duration::from_millis(1)); // ... wait for the lock ...
//!     true
//! });
//! assert!(granted);
//! call.resume()?; // back inside to update the row: one ticket, without checking the limit
//! drop(call);
//! drop(stmt);
//!
//! println!("{}", gate.snapshot()); // "0 queries inside, 0 queries in queue, ..."
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

#[cfg(all(feature = "async", not(loom)))]
mod async_session;
mod auto_stats;
mod clock;
mod config;
mod cpu_share;
mod driver;
mod error;
mod gate;
mod gate_hook;
mod handoff_cost;
pub mod histogram;
mod inner;
pub mod metrics;
mod monitor;
pub mod mutex;
mod policy;
mod registry;
#[cfg(feature = "serde")]
mod serde_impl;
mod session;
mod sync;

#[cfg(all(feature = "async", not(loom)))]
pub use async_session::{AsyncCall, AsyncSession, Enter, SleepFuture, Sleeper};
pub use config::{
    available_cpus, GateConfig, Policy, MAX_ADAPTIVE_SLEEP_DELAY, MAX_LIMIT, MAX_QUANTUM,
    MAX_SLEEP_DELAY,
};
pub use error::{ConfigError, GateError, Misuse, OverloadReason, Unit};
pub use gate::Gate;
pub use histogram::{Histogram, HistogramSnapshot};
pub use monitor::{
    Counters, GateSnapshot, GateStats, Occupancy, SessionSnapshot, SessionState, StepOutReason,
};
pub use mutex::{Condvar, Mutex, MutexGuard, WaitTimeoutResult};
pub use policy::auto::AutoStats;
pub use policy::auto::LimitReasons;
pub use session::{Call, Canceler, Session, Statement};

/// The policies' decision cores, for the simulator (`turnstile-sim`), which runs the same
/// decisions as the gate. Not part of the library's API: no semver promise.
#[doc(hidden)]
pub mod sim {
    pub use crate::policy::queue::Release;
    pub use crate::policy::{
        Admission, AdmittedBy, Attempt, Core, Hold, HoldKind, Step, Tickets, WaitId,
    };

    /// `auto`'s core, its parameters and its control window.
    pub mod auto {
        pub use crate::policy::auto::{keeps_slot_across, AutoCore, AutoParams, CONTROL_WINDOW};
    }
}
