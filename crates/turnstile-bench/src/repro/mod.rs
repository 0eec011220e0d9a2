//! The seed experiments reproduced on the embedded engine (`turnstile repro …`).
//!
//! * [`tickets`] — seed 000: two full scans through a gate of limit 1, tickets 500 and 10M.
//! * [`oltp`] — seed 001: sysbench's read-only transaction, TPS against client threads.
//! * [`sysbench`] — seed 001 driven by real sysbench through the server.
//! * [`sweep`] — the read-only sweep's settings, configuration and result row, shared by
//!   [`oltp`] and [`sysbench`].
//! * [`census`] — where the threads are during a window, sampled beside the clients.
//! * [`pileup`] — seed 004: insert+query sessions per table, slot held or released across the
//!   commit-mutex wait.
//! * [`mixed`] — seed 000 extended: two full scans beside point-select sessions through one
//!   gate, the scans' slowdown against the point selects' latency, per policy and tickets.
//!
//! Every long loop checks [`stopped`], which the CLI sets on Ctrl-C: workers finish the
//! statement they are in, the engine is dropped cleanly, and the run returns
//! [`ReproError::Interrupted`].

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub mod census;
pub mod mixed;
pub mod oltp;
pub mod pileup;
pub mod server;
pub mod sweep;
pub mod sysbench;
pub mod tickets;

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every running reproduction to stop (the CLI's Ctrl-C handler calls this).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}

/// Whether a stop was requested.
pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Why a reproduction did not complete.
#[derive(Debug)]
pub enum ReproError {
    /// The engine failed.
    Engine(turnstile_engine::EngineError),
    /// A setting was invalid.
    BadInput(String),
    /// Ctrl-C.
    Interrupted,
    /// A worker thread panicked.
    Panicked(String),
}

impl std::fmt::Display for ReproError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReproError::Engine(e) => write!(f, "{e}"),
            ReproError::BadInput(m) => f.write_str(m),
            ReproError::Interrupted => f.write_str("interrupted"),
            ReproError::Panicked(m) => write!(f, "a worker panicked: {m}"),
        }
    }
}

impl std::error::Error for ReproError {}

impl From<turnstile_engine::EngineError> for ReproError {
    fn from(e: turnstile_engine::EngineError) -> Self {
        match e {
            // A load stopped by `stopped()` (Ctrl-C).
            turnstile_engine::EngineError::Stopped => ReproError::Interrupted,
            e => ReproError::Engine(e),
        }
    }
}

impl From<turnstile::ConfigError> for ReproError {
    fn from(e: turnstile::ConfigError) -> Self {
        ReproError::BadInput(e.to_string())
    }
}

/// Settings shared by the reproductions.
#[derive(Debug, Clone)]
pub struct Common {
    /// The engine's data directory (tables are built once and reused).
    pub data_dir: PathBuf,
    /// Extra delay inside every binlog fsync; `None` lets each reproduction choose (the
    /// pileup emulates the seed's disk, the others add nothing).
    pub fsync_delay: Option<Duration>,
}

impl Common {
    pub(crate) fn open(&self) -> Result<std::sync::Arc<turnstile_engine::Engine>, ReproError> {
        self.open_with(Duration::ZERO)
    }

    pub(crate) fn open_with(
        &self,
        default_fsync_delay: Duration,
    ) -> Result<std::sync::Arc<turnstile_engine::Engine>, ReproError> {
        self.open_engine(default_fsync_delay, Duration::ZERO)
    }

    /// Opens the engine with `row_work` of emulated CPU per row fetched
    /// ([`turnstile_engine::EngineConfig::row_work`]).
    pub(crate) fn open_engine(
        &self,
        default_fsync_delay: Duration,
        row_work: Duration,
    ) -> Result<std::sync::Arc<turnstile_engine::Engine>, ReproError> {
        Ok(turnstile_engine::Engine::open(
            &turnstile_engine::EngineConfig {
                data_dir: self.data_dir.clone(),
                fsync_delay: self.fsync_delay.unwrap_or(default_fsync_delay),
                row_work,
            },
        )?)
    }
}

/// What a reproduction reports while it runs: a step, and table-load progress.
pub trait Progress {
    /// A new step begins.
    fn step(&mut self, what: &str);
    /// Rows loaded so far of a table being built.
    fn load(&mut self, done: u64, total: u64);
}

/// Progress that goes nowhere (tests).
pub struct Quiet;

impl Progress for Quiet {
    fn step(&mut self, _: &str) {}
    fn load(&mut self, _: u64, _: u64) {}
}

/// Joins worker threads, turning a panic into an error.
pub(crate) fn join_all<T>(hs: Vec<std::thread::JoinHandle<T>>) -> Result<Vec<T>, ReproError> {
    hs.into_iter()
        .map(|h| {
            h.join().map_err(|p| {
                ReproError::Panicked(
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                )
            })
        })
        .collect()
}
