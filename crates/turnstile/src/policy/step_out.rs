//! Why a session steps out of the gate: an input of every policy's decisions (`auto` keeps
//! the slot for work and frees it for waits), and of the status the monitor shows.

/// Why a session stepped out of the gate while keeping its statement open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum StepOutReason {
    /// Waiting for a row lock (InnoDB force-exits before `lock_wait_suspend_thread`).
    RowLockWait,
    /// Blocking disk I/O (InnoDB does *not* leave for this; seed 001 asks why not).
    DiskIo,
    /// Waiting for the commit (binlog) mutex and its fsync (the seed 004 fix).
    CommitWait,
    /// Sending results to the client.
    SendingResults,
    /// A file sort or other long work outside the engine.
    FileSort,
    /// Blocked on a turnstile lock or condition variable: `auto` steps out by itself.
    LockWait,
}

impl StepOutReason {
    /// Every reason, in code order.
    pub const ALL: [StepOutReason; 6] = [
        StepOutReason::RowLockWait,
        StepOutReason::DiskIo,
        StepOutReason::CommitWait,
        StepOutReason::SendingResults,
        StepOutReason::FileSort,
        StepOutReason::LockWait,
    ];

    /// A short human name.
    pub fn describe(self) -> &'static str {
        match self {
            StepOutReason::RowLockWait => "row lock wait",
            StepOutReason::DiskIo => "disk io",
            StepOutReason::CommitWait => "commit wait",
            StepOutReason::SendingResults => "sending results",
            StepOutReason::FileSort => "file sort",
            StepOutReason::LockWait => "lock wait",
        }
    }
}
