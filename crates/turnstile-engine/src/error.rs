//! Errors: what every engine call can return ([`EngineError`], [`Result`]). Storage and file
//! failures carry the underlying message; the SQL-level errors are MySQL's of the same meaning,
//! and each variant says what it leaves behind (whether an explicit transaction stays open), since
//! callers decide from that whether to retry the statement or the transaction.

use turnstile::GateError;

/// What can go wrong in the engine.
#[derive(Debug)]
pub enum EngineError {
    /// The storage engine failed (redb's message).
    Storage(String),
    /// A file operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        err: std::io::Error,
    },
    /// The gate refused entry (cancelled or timed out).
    Gate(GateError),
    /// A caller error: a bad name, a bad size.
    BadInput(String),
    /// The table does not exist (MySQL error 1146).
    NoSuchTable(String),
    /// The table already exists (MySQL error 1050).
    TableExists(String),
    /// A row with this primary key exists, committed or written by this transaction (MySQL
    /// error 1062). The statement did nothing; an explicit transaction stays open.
    DuplicateKey {
        /// The table.
        table: String,
        /// The primary key.
        id: u32,
    },
    /// Waiting for a row lock would have closed a cycle (MySQL error 1213): the transaction
    /// was rolled back.
    Deadlock,
    /// A row lock was not granted within the lock wait timeout (MySQL error 1205): as in MySQL
    /// (`innodb_rollback_on_timeout=OFF`), only the statement is undone and the transaction
    /// stays open.
    LockWaitTimeout,
    /// A table load was asked to stop before it finished
    /// ([`Engine::ensure_table_until`](crate::Engine::ensure_table_until)): the table is left
    /// marked as not loaded, so the next load builds it again.
    Stopped,
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Storage(m) => write!(f, "storage error: {m}"),
            EngineError::Io { what, err } => write!(f, "{what}: {err}"),
            EngineError::Gate(e) => write!(f, "gate: {e}"),
            EngineError::BadInput(m) => f.write_str(m),
            EngineError::NoSuchTable(t) => write!(f, "Table '{t}' doesn't exist"),
            EngineError::TableExists(t) => write!(f, "Table '{t}' already exists"),
            EngineError::DuplicateKey { table, id } => {
                write!(f, "Duplicate entry '{id}' for key '{table}.PRIMARY'")
            }
            EngineError::Deadlock => {
                f.write_str("Deadlock found when trying to get lock; try restarting transaction")
            }
            EngineError::LockWaitTimeout => f.write_str(
                "Lock wait timeout exceeded; the transaction was rolled back (try restarting it)",
            ),
            EngineError::Stopped => {
                f.write_str("the table load was stopped; the table will be built again")
            }
        }
    }
}

impl std::error::Error for EngineError {}

impl From<GateError> for EngineError {
    fn from(e: GateError) -> Self {
        EngineError::Gate(e)
    }
}

macro_rules! storage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for EngineError {
            fn from(e: $t) -> Self {
                EngineError::Storage(e.to_string())
            }
        }
    )*};
}
storage_from!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EngineError {
    let what = what.into();
    move |err| EngineError::Io { what, err }
}

/// Result of engine calls.
pub type Result<T> = std::result::Result<T, EngineError>;
