//! The mutex family: the turnstile lock and, with the `historical` feature, InnoDB 5.6's mutex
//! reproduced and innotsim's spin-limited variants (the benchmark's rivals, not locks to
//! deploy), all as `lock_api::RawMutex` implementations so that one benchmark drives them alike (the rivals — `std`, `parking_lot`, pthread — are wrapped in the bench
//! crate, which depends on them; this crate does not).
//!
//! | type | what |
//! |---|---|
//! | [`Mutex`] / [`RawTurnstileMutex`] | ours: 4 bytes, waiters parked off the lock word, wake one, the woken one claims the next release, bounded spin, starvation hand-off, timed lock |
//! | [`Condvar`] | a condition variable for [`Mutex`]: one word, waiters parked in the lock's table, no lost notify |
//! | [`Instrumented`] | the same lock with counters, wait histogram, holder, waiter registry, watchdog |
//! | `InnodbMutex` (`historical`) | InnoDB 5.6: test-and-set, random-delay spin, sync array, broadcast on unlock |
//! | `SpinGlobalMutex`, `SpinPerMutex` (`historical`) | busy-wait then block, with a global / per-mutex cap on spinners |
//!
//! ```
//! use std::time::Duration;
//! use turnstile::mutex::{current_waiters, Instrumented};
//!
//! // The plain lock: 4 bytes, the usual guard API, and a timed lock.
//! let m = turnstile::Mutex::new(0u64);
//! *m.lock() += 1;
//! assert_eq!(*m.try_lock_for(Duration::from_millis(1)).unwrap(), 1);
//!
//! // The same lock, instrumented: who holds it, where, and how long others waited.
//! let commit = Instrumented::new("commit mutex", Vec::<u32>::new());
//! commit.lock().push(7);
//! let report = commit.report();
//! assert_eq!((report.acquisitions, report.waited), (1, 0));
//! assert!(current_waiters().iter().all(|w| w.lock != "commit mutex"));
//! ```

// Under `--cfg loom` the locks' slow paths are driven only by the model tests (`loom_tests` in
// raw.rs and condvar.rs, with a table of their own); the library build that the gate's loom
// tests link does not reach them, so their code is dead there and not worth a warning each.
#![cfg_attr(loom, allow(dead_code, unused_variables, unused_imports))]

mod condvar;
mod futex;
#[cfg(feature = "historical")]
pub mod innodb;
mod instrument;
mod park;
mod raw;
#[cfg(feature = "historical")]
pub mod spin;

pub use condvar::{Condvar, WaitTimeoutResult};
#[cfg(feature = "historical")]
pub use innodb::InnodbMutex;
pub use instrument::{
    current_waiters, thread_number, Instrumented, InstrumentedGuard, LockCounters,
    LockCountersSnapshot, LockReport, WaiterInfo, Watchdog, WatchdogConfig,
};
// The lock's tuning constants (spin limits, starvation threshold) stay crate-private: they
// are measurements, not promises (docs/BENCHMARKS.md, "The turnstile lock: design history").
pub use raw::{LockStats, NoStats, RawTurnstileMutex};
#[cfg(feature = "historical")]
pub use spin::{SpinGlobalMutex, SpinPerMutex};

/// A mutex on the turnstile lock: `turnstile::Mutex::new(value).lock()`.
pub type Mutex<T> = lock_api::Mutex<RawTurnstileMutex, T>;
/// The guard of [`Mutex`].
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawTurnstileMutex, T>;
