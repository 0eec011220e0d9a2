//! Benchmarks for turnstile, as a library so the `turnstile` CLI (and tests, at tiny sizes) can
//! run them. Benchmarks measure; they never assert a timing.
//!
//! * [`auto_suite`] — `turnstile bench auto`: `auto` against the best fixed limit over a grid
//!   of workloads nobody tuned it for.
//! * [`gate`] — `turnstile bench gate`: fast-path costs and a synthetic closed-loop load for
//!   every gate policy and the [`baseline::MutexCondvarSemaphore`] baseline.
//! * [`gate_config`] — `bench gate`'s settings, shared by [`gate`] and [`async_gate`].
//! * [`async_gate`] — the async line of `bench gate`: the async session beside
//!   `tokio::sync::Semaphore`.
//! * [`live`] — the gates running now, for exporting metrics during long runs.
//! * [`competing`] — CPU-bound processes in sessions of their own, competing with a run for
//!   the CPUs (`repro oltp --competing-processes`).
//! * `machine` (Linux) — `turnstile calibrate`: the host's parameters for the simulator.

pub mod async_gate;
pub mod auto_suite;
pub mod baseline;
pub mod chart;
pub mod competing;
pub mod gate;
pub mod gate_config;
pub mod live;
#[cfg(target_os = "linux")]
pub mod machine;
pub mod mutex;
pub mod repro;
pub mod rusage;
pub(crate) mod start;
pub mod stats;
pub mod work;
