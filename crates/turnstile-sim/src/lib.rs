//! A deterministic discrete-event simulator of an N-core machine that runs turnstile's gate
//! policies — the same decision cores (`turnstile::sim`) as the real gate — so that 8 to 128
//! cores and 1024 threads can be reasoned about on a small machine.
//!
//! * [`machine`]: cores, time slice, context-switch cost, wake-up latency (a base plus a part
//!   that grows with runnable threads per core), timer slack; every default with its reason.
//! * [`engine`]: the event loop: run queue, CPU slices, disk FIFO, mutexes, the gate.
//! * [`workload`]: the sessions of the real reproductions (scan, OLTP read-only transaction,
//!   inserter and querier) and the central-server model for the MVA check.
//! * [`scenarios`]: `tickets`, `oltp`, `pileup` at the seeds' scale, and `mva_check`.

pub mod engine;
pub mod machine;
pub mod rng;
pub mod scenarios;
pub mod workload;
