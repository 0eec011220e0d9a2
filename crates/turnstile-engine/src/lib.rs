//! A small embedded storage engine behind the turnstile gate, shaped like the interface between
//! MySQL's server layer and InnoDB, so the seed experiments can be reproduced on real data.
//!
//! * Storage: [redb](https://docs.rs/redb) — B-trees with MVCC read transactions and fsync'd
//!   commits. Tables have the sysbench schema ([`schema`]) and a secondary index on `k`;
//!   [`Engine::create_table`] / [`Engine::drop_table`] are the DDL.
//! * Handler API ([`Connection`]): every row fetched by a cursor and every row written is one
//!   enter/exit of the gate, so tickets are spent per row as in InnoDB; each statement ends
//!   with a force-exit.
//! * Transactions ([`Connection::begin_transaction`], [`Connection::commit`],
//!   [`Connection::rollback`]; without `begin`, every write is its own autocommit
//!   transaction): writes are buffered in a per-connection write set (redb has one writer, so
//!   no redb transaction is ever held across client round trips), each row written is locked
//!   exclusively until commit or rollback (a lock wait steps out of the gate for
//!   [`StepOutReason::RowLockWait`]; a wait that would close a cycle is refused at once with
//!   [`EngineError::Deadlock`]; [`Engine::set_lock_wait_timeout`], 50 s by default, as
//!   `innodb_lock_wait_timeout`), and reads see the last committed data plus the connection's
//!   own writes (READ COMMITTED with read-your-writes).
//! * Commit: two-phase, with the binlog as the coordinator, as MySQL with InnoDB and
//!   `sync_binlog=1`: (1) *prepare*: one durable redb transaction stores the write set under
//!   its XID in `turnstile_prepared`; (2) the binlog record ([`binlog`]: XID, the changes, a
//!   length and a CRC) is appended and fsync'd (plus the emulated `fsync_delay`); (3) *commit*:
//!   the write set is applied to the tables and the prepared record deleted, in a redb
//!   transaction that need not be durable. [`Engine::open`] recovers: it truncates a torn
//!   binlog tail, then commits every prepared transaction whose XID is in the binlog and rolls
//!   back the others ([`Engine::recovery`]). After any crash the tables and the binlog agree,
//!   and every commit that returned `Ok` is there.
//! * Commit modes ([`CommitMode`], per connection): [`CommitMode::HoldSlot`] and
//!   [`CommitMode::ReleaseSlot`] run the three steps under one global commit mutex, held across
//!   the fsync (MySQL 5.0/5.1 with the binlog on, no group commit); `HoldSlot` waits for it
//!   while counted inside the gate (the bug behind seed 004), `ReleaseSlot` steps out first
//!   (the fix). [`CommitMode::GroupCommit`] (the default) steps out and joins a group commit
//!   queue (MySQL 5.6 / MariaDB binlog group commit): the first waiting session leads, takes
//!   every session queued, and does one prepare, one binlog append and **one fsync** for the
//!   group, then applies it and wakes the others with their results; no mutex is held across
//!   the fsync, so sessions arriving meanwhile form the next group.
//! * Rows sent to the client ([`RowSend`], per connection): MySQL 5.0/5.1's server layer
//!   force-exits the gate before it sends each row (`select_send::send_data` →
//!   `ha_release_temporary_latches` → `srv_conc_force_exit_innodb`), so every row sent costs the
//!   next fetch a fresh admission ([`RowSend::ForceExit`]); 5.5 and later send the row keeping
//!   the slot and the tickets ([`RowSend::Keep`], the default). Which rows are sent is part of
//!   the API: [`Connection::scan_sent`] and [`Connection::point_select`] send their rows;
//!   [`Connection::scan`] hands rows to the server (an aggregate, a sort buffer), which sends
//!   its result after the statement ended.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use redb::{
    Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle,
    WriteTransaction,
};
use turnstile::mutex::Instrumented;
use turnstile::{Call, Gate, GateError, Session, Statement, StepOutReason};

pub mod binlog;
mod locks;
pub mod schema;

pub use binlog::{BinlogChange, BinlogRecord, Op};
use locks::{Key, LockManager, Refused};
use schema::{index_key, Row};

const META: TableDefinition<&str, u64> = TableDefinition::new("turnstile_meta");
/// User tables (made by [`Engine::create_table`] or [`Engine::ensure_table`]).
const TABLES: TableDefinition<&str, ()> = TableDefinition::new("turnstile_tables");
/// Prepared transactions: XID → encoded write set (two-phase commit, step 1).
const PREPARED: TableDefinition<u64, &[u8]> = TableDefinition::new("turnstile_prepared");

/// The binlog's file name in the data directory (MySQL numbers its binlog files from
/// `.000001`; this engine has one).
pub const BINLOG_FILE: &str = "binlog.000001";

/// `innodb_lock_wait_timeout`'s default: 50 s (MySQL 5.0–8.0 reference manual).
pub const DEFAULT_LOCK_WAIT_TIMEOUT: Duration = Duration::from_secs(50);

fn rows_table(name: &str) -> TableDefinition<'_, u32, &'static [u8]> {
    TableDefinition::new(name)
}

fn index_table(index: &str) -> TableDefinition<'_, u64, ()> {
    TableDefinition::new(index)
}

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
    /// A table load was asked to stop before it finished ([`Engine::ensure_table_until`]):
    /// the table is left marked as not loaded, so the next load builds it again.
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

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EngineError {
    let what = what.into();
    move |err| EngineError::Io { what, err }
}

/// Opens a table of rows for reading: a missing table (or an internal one of another shape)
/// is [`EngineError::NoSuchTable`].
fn open_rows(
    r: &redb::ReadTransaction,
    name: &str,
) -> Result<redb::ReadOnlyTable<u32, &'static [u8]>> {
    match r.open_table(rows_table(name)) {
        Ok(t) => Ok(t),
        Err(redb::TableError::TableDoesNotExist(_))
        | Err(redb::TableError::TableTypeMismatch { .. }) => {
            Err(EngineError::NoSuchTable(name.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Result of engine calls.
pub type Result<T> = std::result::Result<T, EngineError>;

/// How a connection commits: the gate slot while waiting for the commit, and whether commits
/// share fsyncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CommitMode {
    /// One global commit mutex held across the fsync, waited for while keeping the gate slot
    /// (MySQL before the fix for bug 46459: seed 004's pileup).
    HoldSlot,
    /// The same mutex, but the session steps out of the gate before waiting for it (the fix).
    ReleaseSlot,
    /// Binlog group commit (MySQL 5.6, MariaDB 5.3): step out of the gate, queue, and let one
    /// leader commit the whole queue with one fsync.
    #[default]
    GroupCommit,
}

impl CommitMode {
    /// Every mode, in report order.
    pub const ALL: [CommitMode; 3] = [
        CommitMode::HoldSlot,
        CommitMode::ReleaseSlot,
        CommitMode::GroupCommit,
    ];

    /// The name used in reports: `hold-slot` / `release-slot` / `group-commit`.
    pub fn name(self) -> &'static str {
        match self {
            CommitMode::HoldSlot => "hold-slot",
            CommitMode::ReleaseSlot => "release-slot",
            CommitMode::GroupCommit => "group-commit",
        }
    }
}

impl std::fmt::Display for CommitMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CommitMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        CommitMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown commit mode '{s}': expected hold-slot, release-slot or group-commit"
                )
            })
    }
}

/// What the server layer does with the session's gate slot when it sends a row to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RowSend {
    /// MySQL 5.0/5.1: force-exit before each row sent (`select_send::send_data` calls
    /// `ha_release_temporary_latches`, which ends in `srv_conc_force_exit_innodb`): the slot is
    /// freed and the tickets are thrown away, so the next row fetched needs a new admission.
    /// Seed 001's FIFO ran 5.0.84.
    ForceExit,
    /// MySQL 5.5 and later: the row is sent while the session keeps its slot and tickets.
    #[default]
    Keep,
}

impl RowSend {
    /// Both settings, in report order.
    pub const ALL: [RowSend; 2] = [RowSend::ForceExit, RowSend::Keep];

    /// The name used in reports: `force-exit` / `keep`.
    pub fn name(self) -> &'static str {
        match self {
            RowSend::ForceExit => "force-exit",
            RowSend::Keep => "keep",
        }
    }
}

impl std::fmt::Display for RowSend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RowSend {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "force-exit" => Ok(RowSend::ForceExit),
            "keep" => Ok(RowSend::Keep),
            _ => Err(format!(
                "unknown row-send setting '{s}': expected force-exit (MySQL 5.0/5.1) or keep (5.5+)"
            )),
        }
    }
}

/// The binary log: appended under the commit mutex.
pub struct Binlog {
    file: File,
    path: PathBuf,
    /// Bytes of whole records in the file.
    len: u64,
    /// Records written since the engine was opened.
    pub records: u64,
}

/// Engine-wide counters (read by monitors and the reproductions).
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Transactions committed (with at least one change).
    pub commits: AtomicU64,
    /// Sessions waiting for (or holding) the commit mutex right now while counted inside the
    /// gate — seed 004's "31 threads waiting on the commit mutex".
    pub commit_waiting_inside: AtomicU32,
    /// Sessions waiting for their commit right now (commit mutex or group), inside the gate
    /// or not.
    pub commit_waiting: AtomicU32,
    /// Binlog fsyncs.
    pub fsyncs: AtomicU64,
    /// Total time spent in binlog fsyncs (with the emulated delay), ns.
    pub fsync_ns: AtomicU64,
    /// Groups committed by [`CommitMode::GroupCommit`] leaders.
    pub group_commits: AtomicU64,
    /// Transactions committed in those groups.
    pub group_committed: AtomicU64,
    /// Row lock waits (a lock held by another transaction).
    pub lock_waits: AtomicU64,
    /// Deadlocks detected.
    pub deadlocks: AtomicU64,
    /// Lock wait timeouts.
    pub lock_wait_timeouts: AtomicU64,
    /// Transactions rolled back with changes (explicitly, on error, or by a dropped connection).
    pub rollbacks: AtomicU64,
    /// Rows fetched by cursors.
    pub rows_read: AtomicU64,
    /// CPU burned as emulated row cost ([`EngineConfig::row_work`] for every row fetched), ns.
    pub row_work_ns: AtomicU64,
}

impl EngineStats {
    /// Mean transactions per group commit (0 before the first group).
    pub fn mean_group_size(&self) -> f64 {
        let g = self.group_commits.load(Ordering::Relaxed);
        if g == 0 {
            0.0
        } else {
            self.group_committed.load(Ordering::Relaxed) as f64 / g as f64
        }
    }
}

/// What [`Engine::open`]'s crash recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Prepared transactions found in the binlog, and so committed.
    pub committed: u64,
    /// Prepared transactions not in the binlog, and so rolled back.
    pub rolled_back: u64,
    /// Bytes of a torn binlog tail cut off.
    pub truncated_bytes: u64,
}

/// A test hook that stops a commit between two of its steps.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Failpoint {
    /// Nothing.
    #[default]
    Off,
    /// After the prepare, before the binlog write: the commit fails and the engine stops
    /// committing, as if it crashed there (reopen to recover).
    CrashAfterPrepare,
    /// After the binlog fsync, before the apply: likewise.
    CrashAfterBinlog,
    /// Sleep this long between the binlog fsync and the apply, so that a kill lands there.
    PauseAfterBinlog(Duration),
    /// Wait between the binlog fsync and the apply until the failpoint is set to something
    /// else, so that a test can queue committers behind a group deterministically.
    HoldAfterBinlog,
    /// The binlog append writes half of its records, then fails as a full disk would.
    TornAppend,
    /// Panic between the binlog fsync and the apply (a bug in the commit path).
    PanicAfterBinlog,
}

/// A transaction's write set at one point ([`Connection::savepoint`]).
#[derive(Debug, Clone)]
pub struct Savepoint(HashMap<String, BTreeMap<u32, Change>>);

/// One change in a write set.
#[derive(Debug, Clone)]
enum Change {
    /// The row after the change; `op` is [`Op::Insert`] when no committed row had its key.
    Put { row: Row, op: Op },
    /// The committed row is deleted.
    Delete,
}

/// A transaction on its way to commit: its XID and changes (table, primary key, change).
struct Pending {
    xid: u64,
    /// The connection committing it.
    conn: u64,
    changes: Vec<(String, u32, Change)>,
}

impl Pending {
    /// The prepared record: per change `table len (u16 LE) ‖ table ‖ id (u32 LE) ‖ op (u8:
    /// 0 insert, 1 update, 2 delete) ‖ row (ROW_LEN bytes, not for a delete)`.
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.changes.len() * (schema::ROW_LEN + 16));
        for (t, id, c) in &self.changes {
            v.extend_from_slice(&(t.len() as u16).to_le_bytes());
            v.extend_from_slice(t.as_bytes());
            v.extend_from_slice(&id.to_le_bytes());
            match c {
                Change::Put { row, op } => {
                    v.push(if *op == Op::Insert { 0 } else { 1 });
                    v.extend_from_slice(&row.encode());
                }
                Change::Delete => v.push(2),
            }
        }
        v
    }

    fn decode(xid: u64, mut v: &[u8]) -> Result<Pending> {
        let bad = || EngineError::Storage(format!("prepared record of xid {xid} is corrupt"));
        let mut changes = Vec::new();
        while !v.is_empty() {
            let tl = v.get(..2).ok_or_else(bad)?;
            let tl = u16::from_le_bytes([tl[0], tl[1]]) as usize;
            let t = std::str::from_utf8(v.get(2..2 + tl).ok_or_else(bad)?)
                .map_err(|_| bad())?
                .to_string();
            v = &v[2 + tl..];
            let idb = v.get(..5).ok_or_else(bad)?;
            let id = u32::from_le_bytes([idb[0], idb[1], idb[2], idb[3]]);
            let op = idb[4];
            v = &v[5..];
            let c = match op {
                0 | 1 => {
                    let row = Row::decode(id, v.get(..schema::ROW_LEN).ok_or_else(bad)?);
                    v = &v[schema::ROW_LEN..];
                    let op = if op == 0 { Op::Insert } else { Op::Update };
                    Change::Put { row, op }
                }
                2 => Change::Delete,
                _ => return Err(bad()),
            };
            changes.push((t, id, c));
        }
        Ok(Pending {
            xid,
            conn: 0,
            changes,
        })
    }

    fn binlog_changes(&self) -> Vec<BinlogChange> {
        self.changes
            .iter()
            .map(|(t, id, c)| match c {
                Change::Put { row, op } => BinlogChange {
                    op: *op,
                    table: t.clone(),
                    id: *id,
                    k: row.k,
                },
                Change::Delete => BinlogChange {
                    op: Op::Delete,
                    table: t.clone(),
                    id: *id,
                    k: 0,
                },
            })
            .collect()
    }
}

/// The group commit queue.
#[derive(Default)]
struct GroupState {
    /// Transactions waiting for a leader, with their tickets.
    queue: Vec<(u64, Pending)>,
    /// A leader is committing a group.
    leading: bool,
    next_ticket: u64,
    /// Outcomes for the followers, by ticket (an error as its message).
    done: HashMap<u64, std::result::Result<(), String>>,
    /// The connections committed by the last two groups.
    recent: [Vec<u64>; 2],
}

impl GroupState {
    /// Connections that committed in either of the last two groups: how many a leader may
    /// expect to queue again.
    fn expected(&self) -> usize {
        let mut v: Vec<u64> = self.recent.concat();
        v.sort_unstable();
        v.dedup();
        v.len()
    }
}

/// The engine: one redb database file and one binlog in a data directory.
pub struct Engine {
    db: Database,
    dir: PathBuf,
    commit: Instrumented<Binlog>,
    /// A second handle on the binlog file, for the group leader's fsync outside the mutex.
    sync_file: File,
    fsync_delay: Duration,
    /// [`EngineConfig::row_work`].
    row_work: Duration,
    locks: LockManager,
    lock_wait_timeout_ns: AtomicU64,
    next_xid: AtomicU64,
    next_txn: AtomicU64,
    autoinc: Mutex<HashMap<String, u32>>,
    group: Mutex<GroupState>,
    group_done: Condvar,
    /// A transaction joined the group commit queue (a waiting leader counts them).
    group_arrived: Condvar,
    /// The last binlog fsync's duration (with the emulated delay), ns.
    last_fsync_ns: AtomicU64,
    next_conn: AtomicU64,
    /// Set after a failure (or failpoint) past the prepare: the commit's outcome is decided by
    /// recovery, so nothing more is committed until the engine is reopened.
    stopped: AtomicBool,
    failpoint: Mutex<Failpoint>,
    /// Held across each binlog fsync and, if it fails, the stop: an fsync error is reported
    /// once per open file (and `sync_file` shares the commit path's), so an fsync that ran
    /// beside a failing one could return success over the lost pages before the failure
    /// stopped the engine. Serialised, the later one finds the engine stopped. (Only mixed
    /// commit modes ever overlap two fsyncs: serial commits hold the commit mutex, and group
    /// commit has one leader at a time.)
    sync_lock: Mutex<()>,
    recovery: Recovery,
    /// Counters.
    pub stats: EngineStats,
}

/// Settings for [`Engine::open`].
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Where the database and binlog live (created if missing).
    pub data_dir: PathBuf,
    /// Extra delay inside every binlog fsync, emulating a slow disk (`--fsync-ms`).
    pub fsync_delay: Duration,
    /// Extra CPU spent inside the engine for every row a cursor or point select fetches, in
    /// the caller's call (a busy loop), emulating costlier rows: seed 001's 2009 Xeon spent
    /// ~2.5 µs a row (its peak TPS over its rows) where this engine spends ~0.15 µs
    /// (`turnstile calibrate --oltp`). `repro oltp --row-work-ns`. Zero: none.
    pub row_work: Duration,
}

/// Table names: what MySQL allows unquoted, and no internal name (the binlog is text with
/// space-separated fields, and `turnstile_*` are the engine's own tables).
fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
        && !name.starts_with("turnstile_");
    if ok {
        Ok(())
    } else {
        Err(EngineError::BadInput(format!(
            "bad table name '{name}': 1 to 64 of [A-Za-z0-9_$], not starting with turnstile_"
        )))
    }
}

/// Applies the write sets of `batch` to the tables (row and index) and deletes their prepared
/// records, inside `w`. Idempotent: each change is applied to whatever the row is now.
fn apply_in(w: &WriteTransaction, batch: &[Pending]) -> Result<()> {
    for p in batch {
        let mut i = 0;
        while i < p.changes.len() {
            let name = p.changes[i].0.as_str();
            let mut t = w.open_table(rows_table(name))?;
            let mut ix = w.open_table(index_table(&format!("{name}_k")))?;
            while i < p.changes.len() && p.changes[i].0 == name {
                let (_, id, c) = &p.changes[i];
                let old = t.get(*id)?.map(|v| Row::decode(*id, v.value()));
                if let Some(old) = old {
                    ix.remove(index_key(old.k, *id))?;
                }
                match c {
                    Change::Put { row, .. } => {
                        t.insert(*id, row.encode().as_slice())?;
                        ix.insert(index_key(row.k, *id), ())?;
                    }
                    Change::Delete => {
                        t.remove(*id)?;
                    }
                }
                i += 1;
            }
        }
        w.open_table(PREPARED)?.remove(p.xid)?;
    }
    Ok(())
}

impl Engine {
    /// Opens (or creates) the engine in `config.data_dir`, recovering from a crash: a torn
    /// binlog tail is cut off, prepared transactions in the binlog are committed and the
    /// others rolled back ([`Engine::recovery`] says what was done).
    pub fn open(config: &EngineConfig) -> Result<Arc<Engine>> {
        let dir = config.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(io_err(format!(
            "cannot create data directory {}",
            dir.display()
        )))?;
        let db = Database::create(dir.join("turnstile.redb"))?;
        let path = dir.join(BINLOG_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io_err(format!("cannot open binlog {}", path.display())))?;
        // The binlog's (and the store's) directory entries made durable: a file created just
        // now and fsynced later could otherwise vanish with its directory entry on a power
        // loss, fsynced commits and all (POSIX asks for the directory's own fsync).
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(format!(
                "cannot sync data directory {}",
                dir.display()
            )))?;
        let data = std::fs::read(&path)
            .map_err(io_err(format!("cannot read binlog {}", path.display())))?;
        let (records, valid) = binlog::parse(&data);
        let mut recovery = Recovery {
            truncated_bytes: (data.len() - valid) as u64,
            ..Recovery::default()
        };
        if let Some(at) = binlog::valid_record_after(&data, valid) {
            // Not a torn tail: cutting there would drop committed, fsynced records after it.
            return Err(EngineError::Io {
                what: format!(
                    "binlog {} is corrupt at byte {valid} with valid records after it (at byte {at}); not truncating",
                    path.display()
                ),
                err: std::io::Error::from(std::io::ErrorKind::InvalidData),
            });
        }
        if valid < data.len() {
            file.set_len(valid as u64)
                .and_then(|_| file.sync_all())
                .map_err(io_err(format!(
                    "cannot truncate the torn tail of {}",
                    path.display()
                )))?;
        }
        let in_binlog: HashSet<u64> = records.iter().map(|r| r.xid).collect();
        let mut max_xid = records.iter().map(|r| r.xid).max().unwrap_or(0);
        {
            let mut w = db.begin_write()?;
            w.set_durability(Durability::Immediate);
            w.open_table(TABLES)?;
            let prepared: Vec<(u64, Vec<u8>)> = {
                let t = w.open_table(PREPARED)?;
                let mut v = Vec::new();
                for item in t.iter()? {
                    let (k, val) = item?;
                    v.push((k.value(), val.value().to_vec()));
                }
                v
            };
            for (xid, bytes) in prepared {
                max_xid = max_xid.max(xid);
                if in_binlog.contains(&xid) {
                    apply_in(&w, &[Pending::decode(xid, &bytes)?])?;
                    recovery.committed += 1;
                } else {
                    w.open_table(PREPARED)?.remove(xid)?;
                    recovery.rolled_back += 1;
                }
            }
            w.commit()?;
        }
        // Appends go to the end whatever the cursor; keep it there for clarity.
        use std::io::Seek;
        file.seek(std::io::SeekFrom::End(0))
            .map_err(io_err(format!("cannot seek {}", path.display())))?;
        let sync_file = file
            .try_clone()
            .map_err(io_err(format!("cannot reopen {}", path.display())))?;
        Ok(Arc::new(Engine {
            db,
            dir,
            commit: Instrumented::new(
                "commit mutex",
                Binlog {
                    file,
                    path,
                    len: valid as u64,
                    records: 0,
                },
            ),
            sync_file,
            fsync_delay: config.fsync_delay,
            row_work: config.row_work,
            locks: LockManager::default(),
            lock_wait_timeout_ns: AtomicU64::new(DEFAULT_LOCK_WAIT_TIMEOUT.as_nanos() as u64),
            next_xid: AtomicU64::new(max_xid + 1),
            next_txn: AtomicU64::new(1),
            autoinc: Mutex::new(HashMap::new()),
            group: Mutex::new(GroupState::default()),
            group_done: Condvar::new(),
            group_arrived: Condvar::new(),
            last_fsync_ns: AtomicU64::new(0),
            next_conn: AtomicU64::new(1),
            stopped: AtomicBool::new(false),
            failpoint: Mutex::new(Failpoint::Off),
            sync_lock: Mutex::new(()),
            recovery,
            stats: EngineStats::default(),
        }))
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The commit mutex (its report lists waiters and wait times).
    pub fn commit_mutex(&self) -> &Instrumented<Binlog> {
        &self.commit
    }

    /// What crash recovery did when this engine was opened.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Sets the row lock wait timeout (`innodb_lock_wait_timeout`; default
    /// [`DEFAULT_LOCK_WAIT_TIMEOUT`]).
    pub fn set_lock_wait_timeout(&self, timeout: Duration) {
        self.lock_wait_timeout_ns.store(
            timeout.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// The row lock wait timeout.
    pub fn lock_wait_timeout(&self) -> Duration {
        Duration::from_nanos(self.lock_wait_timeout_ns.load(Ordering::Relaxed))
    }

    /// Row locks held right now, by every transaction.
    pub fn row_locks_held(&self) -> usize {
        self.locks.held()
    }

    /// Sets a test failpoint in the commit path.
    #[doc(hidden)]
    pub fn set_failpoint(&self, fp: Failpoint) {
        *self.failpoint.lock().unwrap_or_else(|p| p.into_inner()) = fp;
    }

    /// Transactions queued for group commit, waiting for a leader (for tests).
    #[doc(hidden)]
    pub fn group_queued(&self) -> usize {
        self.group
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queue
            .len()
    }

    /// Every record of the binlog, in commit order.
    pub fn binlog_records(&self) -> Result<Vec<BinlogRecord>> {
        let b = self.commit.lock();
        let data = std::fs::read(&b.path)
            .map_err(io_err(format!("cannot read binlog {}", b.path.display())))?;
        Ok(binlog::parse(&data[..(b.len as usize).min(data.len())]).0)
    }

    /// Rows the table `name` was loaded with by [`Engine::ensure_table`], if it was.
    pub fn loaded_rows(&self, name: &str) -> Result<Option<u64>> {
        let r = self.db.begin_read()?;
        let meta = match r.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(meta.get(name)?.map(|v| v.value()))
    }

    /// `CREATE TABLE name` with the sysbench schema (`id` primary key, `k` indexed, `c`,
    /// `pad`), empty. [`EngineError::TableExists`] if it (or its index's name) is taken.
    pub fn create_table(&self, name: &str) -> Result<()> {
        check_name(name)?;
        self.check_running()?;
        if self.locks.is_fenced(name) {
            // Being loaded: its tables may be gone for a moment.
            return Err(EngineError::TableExists(name.to_string()));
        }
        let index = format!("{name}_k");
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        let taken = w
            .list_tables()?
            .any(|t| t.name() == name || t.name() == index);
        if taken || w.open_table(TABLES)?.get(name)?.is_some() {
            return Err(EngineError::TableExists(name.to_string()));
        }
        w.open_table(rows_table(name))?;
        w.open_table(index_table(&index))?;
        w.open_table(TABLES)?.insert(name, ())?;
        w.commit()?;
        self.autoinc_lock().remove(name);
        Ok(())
    }

    /// `DROP TABLE name`: its rows and index; `false` if it did not exist. Not transactional
    /// (as in MySQL, DDL is not part of a transaction; the server commits before it).
    ///
    /// A table on which an open transaction holds row locks (uncommitted changes) is not
    /// dropped: [`EngineError::BadInput`] saying so (MySQL's `DROP` waits for the metadata lock
    /// instead). Once a row is locked, its table stays until the lock is released, so a commit
    /// never writes into a dropped table.
    pub fn drop_table(&self, name: &str) -> Result<bool> {
        // After a failed commit its transaction is in doubt until reopening decides it, and
        // its row locks are gone: dropping a table it wrote would let recovery write into a
        // table nobody lists.
        self.check_running()?;
        if !self.table_exists(name)? {
            return Ok(false);
        }
        self.locks
            .while_table_unlocked(name, || -> Result<()> {
                let mut w = self.db.begin_write()?;
                w.set_durability(Durability::Immediate);
                w.delete_table(rows_table(name))?;
                w.delete_table(index_table(&format!("{name}_k")))?;
                w.open_table(TABLES)?.remove(name)?;
                w.open_table(META)?.remove(name)?;
                w.commit()?;
                Ok(())
            })
            .ok_or_else(|| {
                EngineError::BadInput(format!(
                    "Table '{name}' has uncommitted changes in an open transaction; commit or roll it back before dropping the table"
                ))
            })??;
        self.autoinc_lock().remove(name);
        Ok(true)
    }

    /// The user tables, sorted (no internal table, no index).
    pub fn tables(&self) -> Result<Vec<String>> {
        let r = self.db.begin_read()?;
        let mut v = Vec::new();
        match r.open_table(TABLES) {
            Ok(t) => {
                for item in t.iter()? {
                    v.push(item?.0.value().to_string());
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(e) => return Err(e.into()),
        }
        v.sort();
        Ok(v)
    }

    /// Whether the user table `name` exists.
    pub fn table_exists(&self, name: &str) -> Result<bool> {
        Ok(self.tables()?.binary_search(&name.to_string()).is_ok())
    }

    fn autoinc_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.autoinc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The AUTO_INCREMENT counter of `table`, read from the committed data the first time.
    fn with_autoinc<R>(&self, table: &str, f: impl FnOnce(&mut u32) -> R) -> Result<R> {
        let mut m = self.autoinc_lock();
        if !m.contains_key(table) {
            let r = self.db.begin_read()?;
            let t = open_rows(&r, table)?;
            let max = t.last()?.map_or(0, |(k, _)| k.value());
            m.insert(table.to_string(), max);
        }
        Ok(f(m.get_mut(table).expect("just inserted")))
    }

    /// Makes sure table `name` holds exactly rows 1..=`rows` of the sysbench generator,
    /// building it if it is missing or of another size. `progress(done, total)` is called as
    /// rows are written. Returns whether it (re)built the table. A bulk load outside
    /// transactions and the binlog (as `LOAD DATA` with the binlog off).
    pub fn ensure_table(
        &self,
        name: &str,
        rows: u32,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<bool> {
        self.ensure_table_until(name, rows, progress, &|| false)
    }

    /// [`Engine::ensure_table`], asking `stop` between batches of rows (50,000, a fraction of
    /// a second each): once it says yes, the load ends with [`EngineError::Stopped`], the table
    /// left marked as not loaded (what was written of it is replaced by the next load). A
    /// command's Ctrl-C need not wait for a load of millions of rows.
    pub fn ensure_table_until(
        &self,
        name: &str,
        rows: u32,
        progress: &mut dyn FnMut(u64, u64),
        stop: &dyn Fn() -> bool,
    ) -> Result<bool> {
        check_name(name)?;
        if rows == 0 {
            return Err(EngineError::BadInput(
                "a table needs at least one row".into(),
            ));
        }
        self.check_running()?;
        if self.loaded_rows(name)? == Some(rows as u64) {
            if !self.table_exists(name)? {
                // Loaded before tables were registered.
                let w = self.db.begin_write()?;
                w.open_table(TABLES)?.insert(name, ())?;
                w.commit()?;
            }
            return Ok(false);
        }
        let index = format!("{name}_k");
        // No row lock is granted on the table while it is rebuilt, and none may be held when
        // it starts: a commit between two batches left index entries for rows the load then
        // overwrote, and a drop between them left a table marked loaded but short.
        let _fence = self.locks.fence(name).ok_or_else(|| {
            EngineError::BadInput(format!(
                "Table '{name}' has uncommitted changes in an open transaction, or is being loaded; it cannot be rebuilt now"
            ))
        })?;
        {
            let mut w = self.db.begin_write()?;
            w.set_durability(Durability::None);
            // Only this table's own storage is replaced: redb deletes a table by its name
            // alone, so a user table named `<name>_k`, or `<name>` being another table's
            // index, would have been destroyed.
            let registered =
                |w: &redb::WriteTransaction, t: &str| -> Result<bool> {
                    Ok(w.open_table(TABLES)?.get(t)?.is_some()
                        || w.open_table(META)?.get(t)?.is_some())
                };
            let exists = |w: &redb::WriteTransaction, t: &str| -> Result<bool> {
                Ok(w.list_tables()?.any(|x| x.name() == t))
            };
            // Storage under this name that no table owns is another table's index
            // (`<table>_k`), or what a load that was stopped (or a process killed during one)
            // left of this table: that is replaced, or the table could never be loaded again.
            let an_index = match name.strip_suffix("_k") {
                Some(base) => registered(&w, base)?,
                None => false,
            };
            if exists(&w, name)? && !registered(&w, name)? && an_index {
                return Err(EngineError::TableExists(name.to_string()));
            }
            if w.open_table(TABLES)?.get(index.as_str())?.is_some() {
                // A user table with the name this table's index needs.
                return Err(EngineError::TableExists(index));
            }
            w.delete_table(rows_table(name))?;
            w.delete_table(index_table(&index))?;
            w.open_table(META)?.remove(name)?;
            w.commit()?;
        }
        self.autoinc_lock().remove(name);
        const BATCH: u32 = 50_000;
        let mut id = 1u32;
        while id <= rows {
            let end = id.saturating_add(BATCH - 1).min(rows);
            let mut w = self.db.begin_write()?;
            w.set_durability(Durability::None);
            {
                let mut t = w.open_table(rows_table(name))?;
                let mut ix = w.open_table(index_table(&index))?;
                for i in id..=end {
                    let row = Row::generate(i, rows);
                    t.insert(i, row.encode().as_slice())?;
                    ix.insert(index_key(row.k, i), ())?;
                }
            }
            w.commit()?;
            progress(end as u64, rows as u64);
            if end == rows {
                break;
            }
            if stop() {
                return Err(EngineError::Stopped);
            }
            id = end + 1;
        }
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        w.open_table(META)?.insert(name, rows as u64)?;
        w.open_table(TABLES)?.insert(name, ())?;
        w.commit()?;
        Ok(true)
    }

    /// Scans every row of `name` exactly as [`Connection::count`] does, but without the gate:
    /// the baseline that measures what the gate adds to a scan.
    pub fn scan_direct(&self, name: &str) -> Result<u64> {
        let r = self.db.begin_read()?;
        let t = open_rows(&r, name)?;
        let mut n = 0u64;
        for item in t.range(0..=u32::MAX)? {
            let (k, v) = item?;
            std::hint::black_box(Row::decode(k.value(), v.value()));
            n += 1;
        }
        Ok(n)
    }

    /// Deletes every row of `name` with an id above `rows` (and its index entry): puts a table
    /// back to its loaded size after a run that inserted into it. Outside transactions and the
    /// binlog (a benchmark's reset, not a statement).
    pub fn truncate_above(&self, name: &str, rows: u32) -> Result<u64> {
        // Rewriting a table under an in-doubt transaction would leave recovery to apply it
        // over other rows.
        self.check_running()?;
        // No row lock held or granted meanwhile: an update committed between reading the
        // rows and deleting them left an index entry for its new `k`, and an uncommitted one
        // would put a deleted row back when it commits.
        let _fence = self.locks.fence(name).ok_or_else(|| {
            EngineError::BadInput(format!(
                "Table '{name}' has uncommitted changes in an open transaction, or is being loaded; it cannot be truncated now"
            ))
        })?;
        self.autoinc_lock().remove(name);
        if rows == u32::MAX {
            return Ok(0);
        }
        // The table exists (a write transaction would create it), and stays: a drop is
        // refused while it is fenced.
        open_rows(&self.db.begin_read()?, name)?;
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        let removed = {
            let index = format!("{name}_k");
            let mut t = w.open_table(rows_table(name))?;
            let mut ids = Vec::new();
            for item in t.range(rows + 1..=u32::MAX)? {
                ids.push(item?.0.value());
            }
            let mut ix = w.open_table(index_table(&index))?;
            for &id in &ids {
                // The index entry of the row as it is in this same transaction.
                if let Some(v) = t.remove(id)? {
                    let k = Row::decode(id, v.value()).k;
                    ix.remove(index_key(k, id))?;
                }
            }
            ids.len() as u64
        };
        if removed == 0 {
            return Ok(0);
        }
        w.commit()?;
        Ok(removed)
    }

    /// Counts the committed rows of `name` directly, without the gate (for checks).
    pub fn count_direct(&self, name: &str) -> Result<u64> {
        let r = self.db.begin_read()?;
        Ok(open_rows(&r, name)?.len()?)
    }

    /// Whether committed row `id` exists in `name` (for checks).
    pub fn contains(&self, name: &str, id: u32) -> Result<bool> {
        let r = self.db.begin_read()?;
        Ok(open_rows(&r, name)?.get(id)?.is_some())
    }

    /// The committed primary keys of `name`, in order, without the gate (for checks).
    pub fn ids_direct(&self, name: &str) -> Result<Vec<u32>> {
        let r = self.db.begin_read()?;
        let t = open_rows(&r, name)?;
        let mut v = Vec::new();
        for item in t.iter()? {
            v.push(item?.0.value());
        }
        Ok(v)
    }

    /// The committed row `id` of `name`, without the gate (for checks).
    pub fn get_direct(&self, name: &str, id: u32) -> Result<Option<Row>> {
        let r = self.db.begin_read()?;
        let t = open_rows(&r, name)?;
        let row = t.get(id)?.map(|v| Row::decode(id, v.value()));
        Ok(row)
    }

    /// The committed ids of `name` found through its `k` index (for checks: the index agrees
    /// with the rows).
    pub fn index_ids_direct(&self, name: &str) -> Result<Vec<u32>> {
        let r = self.db.begin_read()?;
        let ix = match r.open_table(index_table(&format!("{name}_k"))) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => {
                return Err(EngineError::NoSuchTable(name.to_string()))
            }
            Err(e) => return Err(e.into()),
        };
        let mut v = Vec::new();
        for item in ix.iter()? {
            v.push(item?.0.value() as u32);
        }
        v.sort_unstable();
        Ok(v)
    }

    fn check_running(&self) -> Result<()> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(EngineError::Storage(
                "the engine stopped committing after a failure past a prepare; reopen it to recover"
                    .into(),
            ));
        }
        Ok(())
    }

    /// A failure after the prepare: what happened to the commit is decided by recovery (the
    /// binlog record may or may not be durable), so stop committing and say so.
    fn stop(&self, what: &str, e: impl std::fmt::Display) -> EngineError {
        self.stopped.store(true, Ordering::Release);
        EngineError::Storage(format!(
            "{what}: {e}; the transaction is prepared and the engine stopped committing: \
             reopening it commits the transaction if its binlog record is durable and rolls it back otherwise"
        ))
    }

    fn failpoint(&self) -> Failpoint {
        *self.failpoint.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Step 1: one durable redb transaction records every write set of `batch`.
    fn prepare(&self, batch: &[Pending]) -> Result<()> {
        self.check_running()?;
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        {
            let mut t = w.open_table(PREPARED)?;
            for p in batch {
                t.insert(p.xid, p.encode().as_slice())?;
            }
        }
        w.commit()?;
        if self.failpoint() == Failpoint::CrashAfterPrepare {
            return Err(self.stop("failpoint", "crashed after the prepare"));
        }
        Ok(())
    }

    /// Step 2a: appends `batch`'s records to the binlog (under the commit mutex).
    ///
    /// Refused once the engine stopped: a group prepared before another commit failed must
    /// not append after that commit's partial record, nor be acknowledged. A failed append is
    /// cut back to the last whole record before the engine stops, so that the file ends at a
    /// record boundary whatever happened to the append.
    fn binlog_write(&self, b: &mut Binlog, batch: &[Pending]) -> Result<()> {
        self.check_running()?;
        let mut buf = Vec::new();
        for p in batch {
            binlog::encode(&mut buf, p.xid, &p.binlog_changes());
        }
        let written = if self.failpoint() == Failpoint::TornAppend {
            b.file
                .write_all(&buf[..buf.len() / 2])
                .and_then(|()| Err(std::io::Error::other("failpoint: a torn append")))
        } else {
            b.file.write_all(&buf)
        };
        if let Err(e) = written {
            let cut = match b.file.set_len(b.len).and_then(|()| b.file.sync_data()) {
                Ok(()) => "the partial record was cut off".to_string(),
                Err(c) => format!(
                    "cutting the partial record off failed too ({c}); reopening truncates it"
                ),
            };
            return Err(self.stop(&format!("cannot append to {} ({cut})", b.path.display()), e));
        }
        b.len += buf.len() as u64;
        b.records += batch.len() as u64;
        Ok(())
    }

    /// Step 2b: fsyncs the binlog (plus the emulated delay).
    fn binlog_sync(&self, file: &File, path: &Path) -> Result<()> {
        let start = Instant::now();
        {
            let _one_at_a_time = self.sync_lock.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = file.sync_data() {
                return Err(self.stop(&format!("cannot fsync {}", path.display()), e));
            }
            self.check_synced()?;
        }
        if !self.fsync_delay.is_zero() {
            std::thread::sleep(self.fsync_delay);
        }
        let ns = start.elapsed().as_nanos() as u64;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.stats.fsync_ns.fetch_add(ns, Ordering::Relaxed);
        self.last_fsync_ns.store(ns, Ordering::Relaxed);
        match self.failpoint() {
            Failpoint::CrashAfterBinlog => {
                Err(self.stop("failpoint", "crashed after the binlog fsync"))
            }
            Failpoint::PauseAfterBinlog(d) => {
                std::thread::sleep(d);
                Ok(())
            }
            Failpoint::HoldAfterBinlog => {
                while self.failpoint() == Failpoint::HoldAfterBinlog {
                    std::thread::sleep(Duration::from_millis(1));
                }
                self.check_synced()
            }
            Failpoint::PanicAfterBinlog => panic!("failpoint: a panic after the binlog fsync"),
            _ => self.check_synced(),
        }
    }

    /// After an fsync: if another commit failed meanwhile (a failed fsync's error is reported
    /// once per file, to whichever fsync comes first, and the pages it lost are clean again),
    /// this fsync proves nothing: the commit is in doubt, and recovery decides it.
    fn check_synced(&self) -> Result<()> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(EngineError::Storage(
                "another commit failed while this one's binlog fsync ran, so the fsync proves \
                 nothing; the engine stopped committing: reopening it commits the transaction \
                 if its binlog record is durable and rolls it back otherwise"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Runs a step of the commit path that may fail after a prepare; a panic in it (a bug)
    /// stops the engine and becomes an error, like any failure there: unwinding would leave
    /// a prepared transaction whose row locks go with the connection (a later commit to its
    /// rows would then be overwritten when recovery commits it), and a group leader's
    /// followers waiting for a result that never comes.
    fn no_unwind<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                Err(self.stop(what, format!("panicked: {msg}")))
            }
        }
    }

    /// Step 3: applies `batch` and deletes its prepared records, not durably (recovery redoes
    /// it from the prepared records, which stay until a later durable commit carries this one).
    fn apply(&self, batch: &[Pending]) -> Result<()> {
        let r = (|| -> Result<()> {
            let mut w = self.db.begin_write()?;
            w.set_durability(Durability::None);
            apply_in(&w, batch)?;
            w.commit()?;
            Ok(())
        })();
        r.map_err(|e| self.stop("cannot apply a committed transaction", e))?;
        self.stats
            .commits
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// [`CommitMode::HoldSlot`] / [`CommitMode::ReleaseSlot`]: the three steps under the commit
    /// mutex, fsync included (MySQL 5.0/5.1).
    fn commit_serial(&self, p: Pending) -> Result<()> {
        let batch = [p];
        let mut b = self.commit.lock();
        self.no_unwind("the commit", || {
            self.prepare(&batch)?;
            self.binlog_write(&mut b, &batch)?;
            self.binlog_sync(&b.file, &b.path)?;
            self.apply(&batch)
        })
    }

    /// [`CommitMode::GroupCommit`]: queue `p`; the first session finding no leader at work
    /// leads, committing everything queued with one prepare, one binlog append and one fsync.
    ///
    /// Before its fsync, the leader waits for the connections of the last two groups to queue
    /// again, for at most one last fsync's time, preparing each arrival as it comes. Without
    /// that wait, groups alternate: the members of one group get their result just as the next
    /// group is taken, so each group holds only the sessions that queued during the previous
    /// one (half of the committers: 8 per fsync with 16 inserting sessions, measured with
    /// `repro pileup`). The bound: N committers in one group commit N per fsync plus wait,
    /// two alternating groups N per two fsyncs, so waiting pays while it is shorter than one
    /// fsync. Measured on the 2-core machine with 16 inserting sessions under the classic
    /// gate (`repro pileup --tables 1,16 --seconds 10`, three runs each): a quarter fsync gave
    /// groups of 8.3-11.4, half 13.0-14.7 (6.2-8.1 × the 1-table rate, median 6.8), a whole
    /// fsync 15.4-15.8 (6.9-8.6 ×, median 8.1). With a fast disk the wait is a fraction of a
    /// millisecond. (MariaDB's
    /// `binlog_commit_wait_count` / `binlog_commit_wait_usec` and MySQL 5.7's
    /// `binlog_group_commit_sync_delay` are the same wait as settings; here it sets itself.)
    fn commit_group(&self, p: Pending) -> Result<()> {
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        let ticket = g.next_ticket;
        g.next_ticket += 1;
        g.queue.push((ticket, p));
        self.group_arrived.notify_one();
        loop {
            if let Some(r) = g.done.remove(&ticket) {
                return r.map_err(EngineError::Storage);
            }
            if !g.leading {
                g.leading = true;
                g = self.lead_group(g);
                continue;
            }
            g = self.group_done.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The leader's work: prepare what is queued at once, then whatever queues while the
    /// connections expected are not all in and the wait is not over (each arrival's prepare
    /// overlaps the others' way back), then one binlog append under the commit mutex, one
    /// fsync outside it, one apply; then the results are handed out.
    fn lead_group<'g>(
        &'g self,
        mut g: std::sync::MutexGuard<'g, GroupState>,
    ) -> std::sync::MutexGuard<'g, GroupState> {
        let expected = g.expected();
        let wait = Duration::from_nanos(self.last_fsync_ns.load(Ordering::Relaxed));
        let deadline = Instant::now() + wait;
        let mut prepared: Vec<(u64, Pending)> = Vec::new();
        let mut failed: Vec<(u64, String)> = Vec::new();
        loop {
            let batch = std::mem::take(&mut g.queue);
            if !batch.is_empty() {
                drop(g);
                let (tickets, pendings): (Vec<u64>, Vec<Pending>) = batch.into_iter().unzip();
                match self.no_unwind("the group's prepare", || self.prepare(&pendings)) {
                    Ok(()) => prepared.extend(tickets.into_iter().zip(pendings)),
                    Err(e) => failed.extend(tickets.into_iter().map(|t| (t, e.to_string()))),
                }
                g = self.group.lock().unwrap_or_else(|p| p.into_inner());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if prepared.len() + failed.len() >= expected || left.is_zero() {
                // Later arrivals wait for the next leader.
                break;
            }
            if !g.queue.is_empty() {
                continue;
            }
            g = self
                .group_arrived
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        let conns: Vec<u64> = prepared.iter().map(|(_, p)| p.conn).collect();
        g.recent.swap(0, 1);
        g.recent[1] = conns;
        drop(g);
        let (tickets, pendings): (Vec<u64>, Vec<Pending>) = prepared.into_iter().unzip();
        let r = if pendings.is_empty() {
            Ok(())
        } else {
            self.no_unwind("the group commit", || self.commit_prepared(&pendings))
        };
        if r.is_ok() && !pendings.is_empty() {
            self.stats.group_commits.fetch_add(1, Ordering::Relaxed);
            self.stats
                .group_committed
                .fetch_add(pendings.len() as u64, Ordering::Relaxed);
        }
        let r = r.map_err(|e| e.to_string());
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        g.leading = false;
        for t in tickets {
            g.done.insert(t, r.clone());
        }
        for (t, e) in failed {
            g.done.insert(t, Err(e));
        }
        self.group_done.notify_all();
        g
    }

    /// A prepared group: append under the commit mutex, fsync outside it, apply.
    fn commit_prepared(&self, batch: &[Pending]) -> Result<()> {
        {
            let mut b = self.commit.lock();
            self.binlog_write(&mut b, batch)?;
        }
        let path = self.dir.join(BINLOG_FILE);
        self.binlog_sync(&self.sync_file, &path)?;
        self.apply(batch)
    }
}

// A server moves each connection to its client's thread and shares the engine between them.
const _: () = {
    const fn send<T: Send>() {}
    const fn shared<T: Send + Sync>() {}
    send::<Connection>();
    shared::<Engine>();
};

/// A connection's open transaction: its write set and row locks.
#[derive(Default)]
struct Txn {
    /// `BEGIN` was called (otherwise each write is its own autocommit transaction).
    explicit: bool,
    /// The lock owner id (0 until the first write).
    id: u64,
    /// Changes by table, by primary key.
    writes: HashMap<String, BTreeMap<u32, Change>>,
    /// Row locks held.
    locks: HashSet<Key>,
}

impl Txn {
    fn has_changes(&self) -> bool {
        self.writes.values().any(|w| !w.is_empty())
    }

    /// Releases the locks and forgets the transaction.
    fn finish(&mut self, engine: &Engine) {
        if !self.locks.is_empty() {
            let keys: Vec<Key> = self.locks.drain().collect();
            engine.locks.release(self.id, &keys);
        }
        self.writes.clear();
        self.explicit = false;
        self.id = 0;
    }
}

/// Reads merged with a write set: committed rows by key, with the write set's rows put over
/// them and its deletes taken out.
struct Merged<'w, I: Iterator<Item = Result<Row>>> {
    base: std::iter::Peekable<I>,
    over: std::iter::Peekable<std::collections::btree_map::Range<'w, u32, Change>>,
}

impl<I: Iterator<Item = Result<Row>>> Iterator for Merged<'_, I> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        loop {
            let b = match self.base.peek() {
                Some(Ok(r)) => Some(r.id),
                Some(Err(_)) => return self.base.next(),
                None => None,
            };
            let o = self.over.peek().map(|(id, _)| **id);
            match (b, o) {
                (None, None) => return None,
                (Some(_), None) => return self.base.next(),
                (Some(bi), Some(oi)) if bi < oi => return self.base.next(),
                (bi, Some(oi)) => {
                    if bi == Some(oi) {
                        self.base.next();
                    }
                    if let Some((_, Change::Put { row, .. })) = self.over.next() {
                        return Some(Ok(row.clone()));
                    }
                }
            }
        }
    }
}

/// A cursor's statement: one gate enter per fetch (`next` runs inside the call; the last
/// finds the end), `to_row` outside it, each row handed to `f` — with [`RowSend::ForceExit`]
/// (`force_exit`) after a step-out for [`StepOutReason::SendingResults`] while inside.
fn drive<T>(
    stmt: &mut Statement<'_>,
    mut next: impl FnMut() -> Option<Result<T>>,
    to_row: impl Fn(T) -> Row,
    force_exit: bool,
    engine: &Engine,
    f: &mut impl FnMut(&Row) -> ControlFlow<()>,
) -> Result<u64> {
    let mut n = 0u64;
    loop {
        let call = stmt.enter()?;
        let item = next();
        if item.is_some() {
            engine.work_row();
        }
        drop(call);
        match item {
            None => return Ok(n),
            Some(item) => {
                let row = to_row(item?);
                let go = if force_exit && stmt.is_inside() {
                    // `srv_conc_force_exit_innodb` does nothing for a thread not inside (its
                    // last ticket already took it out).
                    stmt.step_out(StepOutReason::SendingResults, || {
                        f(std::hint::black_box(&row))
                    })
                } else {
                    f(std::hint::black_box(&row))
                };
                n += 1;
                if go.is_break() {
                    return Ok(n);
                }
            }
        }
    }
}

impl Engine {
    /// Spends [`EngineConfig::row_work`] of CPU on the calling thread (a busy loop on the
    /// monotonic clock), the emulated cost of one row fetched, and counts it in
    /// [`EngineStats::row_work_ns`]. Returns at once when no row work is set.
    #[inline]
    fn work_row(&self) {
        let d = self.row_work;
        if d.is_zero() {
            return;
        }
        let t = std::time::Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
        self.stats
            .row_work_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// One client connection: a gate session plus the handler calls, the server layer's
/// [`RowSend`] setting for the rows it sends to the client, its [`CommitMode`], and its open
/// transaction (dropping the connection rolls it back, as a client disconnect does).
///
/// Which statements send per row (sysbench's read-only transaction):
///
/// | statement | handler call | rows sent per row fetched? |
/// |---|---|---|
/// | `SELECT c … WHERE id=?` | [`Connection::point_select`] | its row, after the statement ended |
/// | `SELECT c … BETWEEN ? AND ?` | [`Connection::scan_sent`] | yes: one send per row, inside the statement |
/// | `SELECT SUM(k) … BETWEEN` | [`Connection::scan`] | no: one aggregate row after the statement |
/// | `… ORDER BY c`, `DISTINCT c … ORDER BY c` | [`Connection::range_sorted_by_c`] | no: rows go to the sort, sent after the statement |
///
/// So [`RowSend::ForceExit`] adds admissions only to the simple range (one per row sent).
pub struct Connection {
    engine: Arc<Engine>,
    /// Unique per engine (the group commit queue tells its sessions apart by it).
    id: u64,
    session: Session,
    label: String,
    row_send: RowSend,
    commit_mode: CommitMode,
    txn: Txn,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.rollback();
    }
}

fn refused(engine: &Engine, r: Refused, table: &str) -> EngineError {
    match r {
        Refused::Fenced => EngineError::BadInput(format!(
            "Table '{table}' is being loaded or truncated; try again when that is over"
        )),
        Refused::Deadlock => {
            engine.stats.deadlocks.fetch_add(1, Ordering::Relaxed);
            EngineError::Deadlock
        }
        Refused::Timeout | Refused::Busy => {
            engine
                .stats
                .lock_wait_timeouts
                .fetch_add(1, Ordering::Relaxed);
            EngineError::LockWaitTimeout
        }
    }
}

/// One row write inside `call`: lock the row (stepping out of the gate to wait), read what
/// the transaction sees of it, and let `f` decide the change and the rows affected.
fn write_in_call(
    engine: &Engine,
    txn: &mut Txn,
    call: &mut Call<'_>,
    table: &str,
    id: u32,
    f: impl FnOnce(Option<&Row>) -> Result<(Option<Change>, u64)>,
) -> Result<u64> {
    if txn.id == 0 {
        txn.id = engine.next_txn.fetch_add(1, Ordering::Relaxed);
    }
    let key: Key = (table.to_string(), id);
    if !txn.locks.contains(&key) {
        // The table must exist before a lock is taken on one of its rows (and once the lock is
        // held it cannot be dropped: the read below finds it if it was not dropped meanwhile).
        let r = engine.db.begin_read()?;
        open_rows(&r, table)?;
        drop(r);
        match engine.locks.try_lock(txn.id, &key) {
            Ok(()) => {}
            Err(Refused::Busy) => {
                engine.stats.lock_waits.fetch_add(1, Ordering::Relaxed);
                let timeout = engine.lock_wait_timeout();
                call.step_out(StepOutReason::RowLockWait, || {
                    engine.locks.lock(txn.id, &key, timeout)
                })
                .map_err(|r| refused(engine, r, table))?;
                txn.locks.insert(key.clone());
                call.resume()?;
            }
            Err(r) => return Err(refused(engine, r, table)),
        }
        txn.locks.insert(key);
    }
    let own = txn.writes.get(table).and_then(|w| w.get(&id));
    let current: Option<Row> = match own {
        Some(Change::Put { row, .. }) => Some(row.clone()),
        Some(Change::Delete) => None,
        None => {
            let r = engine.db.begin_read()?;
            let t = open_rows(&r, table)?;
            let row = t.get(id)?.map(|v| Row::decode(id, v.value()));
            row
        }
    };
    // Whether a committed row has this key (an insert over it is an update, a delete of a row
    // inserted here is nothing).
    let committed = match own {
        Some(Change::Put { op, .. }) => *op != Op::Insert,
        Some(Change::Delete) => true,
        None => current.is_some(),
    };
    let (change, affected) = f(current.as_ref())?;
    if let Some(change) = change {
        let w = txn.writes.entry(table.to_string()).or_default();
        match change {
            Change::Put { row, .. } => {
                let op = if committed { Op::Update } else { Op::Insert };
                w.insert(id, Change::Put { row, op });
            }
            Change::Delete if committed => {
                w.insert(id, Change::Delete);
            }
            Change::Delete => {
                w.remove(&id);
            }
        }
    }
    Ok(affected)
}

/// Commits `txn` inside `call` by `mode`, then releases its locks; `Ok` means durable.
fn commit_in_call(
    engine: &Engine,
    conn: u64,
    txn: &mut Txn,
    call: &mut Call<'_>,
    mode: CommitMode,
) -> Result<()> {
    if !txn.has_changes() {
        txn.finish(engine);
        return Ok(());
    }
    let mut changes = Vec::new();
    let mut tables: Vec<_> = txn.writes.drain().collect();
    tables.sort_by(|a, b| a.0.cmp(&b.0));
    for (t, w) in tables {
        for (id, c) in w {
            changes.push((t.clone(), id, c));
        }
    }
    let p = Pending {
        xid: engine.next_xid.fetch_add(1, Ordering::Relaxed),
        conn,
        changes,
    };
    let stats = &engine.stats;
    let r = match mode {
        CommitMode::HoldSlot => {
            stats.commit_waiting_inside.fetch_add(1, Ordering::Relaxed);
            stats.commit_waiting.fetch_add(1, Ordering::Relaxed);
            let r = engine.commit_serial(p);
            stats.commit_waiting.fetch_sub(1, Ordering::Relaxed);
            stats.commit_waiting_inside.fetch_sub(1, Ordering::Relaxed);
            r
        }
        CommitMode::ReleaseSlot | CommitMode::GroupCommit => {
            call.step_out(StepOutReason::CommitWait, || {
                stats.commit_waiting.fetch_add(1, Ordering::Relaxed);
                let r = if mode == CommitMode::GroupCommit {
                    engine.commit_group(p)
                } else {
                    engine.commit_serial(p)
                };
                stats.commit_waiting.fetch_sub(1, Ordering::Relaxed);
                r
            })
        }
    };
    if r.is_err() {
        stats.rollbacks.fetch_add(1, Ordering::Relaxed);
    }
    txn.finish(engine);
    r
}

impl Connection {
    /// A connection to `engine` through `gate` (one session of it), sending rows with
    /// [`RowSend::Keep`] (see [`Connection::set_row_send`]) and committing with
    /// [`CommitMode::GroupCommit`].
    pub fn new(engine: Arc<Engine>, gate: &Gate, label: impl Into<String>) -> Connection {
        let label = label.into();
        Connection {
            id: engine.next_conn.fetch_add(1, Ordering::Relaxed),
            engine,
            session: gate.named_session(label.clone()),
            label,
            row_send: RowSend::default(),
            commit_mode: CommitMode::default(),
            txn: Txn::default(),
        }
    }

    /// The gate session (settings, canceler).
    pub fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    /// Replaces the session with one of `gate` (a live policy change). Called between
    /// statements (it takes `&mut self`); the open transaction, if any, is kept.
    pub fn rebind(&mut self, gate: &Gate) {
        self.session = gate.named_session(self.label.clone());
    }

    /// Sets what the server layer does with the slot when it sends a row to the client.
    pub fn set_row_send(&mut self, row_send: RowSend) {
        self.row_send = row_send;
    }

    /// The row-send setting.
    pub fn row_send(&self) -> RowSend {
        self.row_send
    }

    /// Sets how this connection's commits wait (default [`CommitMode::GroupCommit`]).
    pub fn set_commit_mode(&mut self, mode: CommitMode) {
        self.commit_mode = mode;
    }

    /// The commit mode.
    pub fn commit_mode(&self) -> CommitMode {
        self.commit_mode
    }

    /// `BEGIN` / `START TRANSACTION`: later writes are buffered until [`Connection::commit`]
    /// or [`Connection::rollback`]. As in MySQL, an open transaction is committed first (its
    /// error, if any, is returned and no new transaction begins).
    pub fn begin_transaction(&mut self) -> Result<()> {
        if self.txn.explicit {
            self.commit()?;
        }
        self.txn.explicit = true;
        // Under `auto` the transaction's later statements come back ahead of the queue.
        self.session.set_in_transaction(true);
        Ok(())
    }

    /// Whether a transaction begun by [`Connection::begin_transaction`] is open.
    pub fn in_transaction(&self) -> bool {
        self.txn.explicit
    }

    /// `COMMIT`: two-phase commit through the binlog by the connection's [`CommitMode`], then
    /// the row locks are released; nothing to do without writes. `Ok` means durable (it
    /// survives any crash); an error means the transaction was rolled back — except an error
    /// saying the engine stopped committing, after which reopening decides (see
    /// [`Engine::open`]). A gate error (cancelled before the commit began) leaves the
    /// transaction open.
    pub fn commit(&mut self) -> Result<()> {
        let r = self.commit_inner();
        if !self.txn.explicit {
            self.session.set_in_transaction(false);
        }
        r
    }

    fn commit_inner(&mut self) -> Result<()> {
        if !self.txn.has_changes() {
            self.txn.finish(&self.engine);
            return Ok(());
        }
        let engine = self.engine.clone();
        let mut stmt = self.session.begin();
        let mut call = stmt.enter()?;
        let r = commit_in_call(&engine, self.id, &mut self.txn, &mut call, self.commit_mode);
        drop(call);
        drop(stmt);
        r
    }

    /// `ROLLBACK`: drops the write set and releases the row locks.
    pub fn rollback(&mut self) {
        if self.txn.has_changes() {
            self.engine.stats.rollbacks.fetch_add(1, Ordering::Relaxed);
        }
        self.txn.finish(&self.engine);
        self.session.set_in_transaction(false);
    }

    /// AUTO_INCREMENT: a fresh id for `table`, above every id committed or handed out (and
    /// every id inserted explicitly) since the engine opened. Ids handed out are not reused,
    /// even if never inserted (InnoDB's behaviour).
    pub fn next_id(&mut self, table: &str) -> Result<u32> {
        self.engine.with_autoinc(table, |n| {
            *n = n.checked_add(1).ok_or_else(|| {
                EngineError::BadInput(format!("table '{table}': AUTO_INCREMENT exhausted"))
            })?;
            Ok(*n)
        })?
    }

    /// One write statement (or, in autocommit, a statement and its commit).
    fn write(
        &mut self,
        table: &str,
        id: u32,
        f: impl FnOnce(Option<&Row>) -> Result<(Option<Change>, u64)>,
    ) -> Result<u64> {
        let engine = self.engine.clone();
        let mut stmt = self.session.begin();
        let r = match stmt.enter() {
            Err(e) => Err(e.into()),
            Ok(mut call) => {
                let r = write_in_call(&engine, &mut self.txn, &mut call, table, id, f);
                match r {
                    Ok(n) if !self.txn.explicit => {
                        commit_in_call(&engine, self.id, &mut self.txn, &mut call, self.commit_mode)
                            .map(|_| n)
                    }
                    r => r,
                }
            }
        };
        drop(stmt);
        if let Err(e) = &r {
            // InnoDB rolls back the whole transaction on a deadlock only; any other failure
            // (a lock wait timeout included, `innodb_rollback_on_timeout=OFF`) undoes just the
            // statement, and a failed single-row write changed nothing.
            if matches!(e, EngineError::Deadlock) || !self.txn.explicit {
                self.rollback();
            }
        }
        r
    }

    /// The open transaction's write set now, for [`Connection::rollback_to`]: a statement
    /// that writes several rows takes one first, so that its failure undoes only itself.
    /// Row locks are not part of it: InnoDB keeps a rolled-back statement's locks until the
    /// transaction ends.
    pub fn savepoint(&self) -> Savepoint {
        Savepoint(self.txn.writes.clone())
    }

    /// Undoes every write made since `sp` was taken; the transaction stays open. A savepoint
    /// taken in another transaction (one since committed or rolled back) restores nothing.
    pub fn rollback_to(&mut self, sp: Savepoint) {
        if self.txn.explicit {
            self.txn.writes = sp.0;
        }
    }

    /// `INSERT` of `row`: [`EngineError::DuplicateKey`] if a row with its id exists
    /// (committed, or written by this transaction). One handler call; in autocommit, the
    /// commit follows in the same statement.
    pub fn insert_row(&mut self, table: &str, row: &Row) -> Result<()> {
        let engine = self.engine.clone();
        engine.with_autoinc(table, |n| *n = (*n).max(row.id))?;
        self.write(table, row.id, |cur| match cur {
            Some(_) => Err(EngineError::DuplicateKey {
                table: table.to_string(),
                id: row.id,
            }),
            None => Ok((
                Some(Change::Put {
                    row: row.clone(),
                    op: Op::Insert,
                }),
                1,
            )),
        })
        .map(|_| ())
    }

    /// `UPDATE … WHERE id = ?`: `f` changes the row's `k`, `c` and `pad` (a changed `id` is
    /// put back). Rows affected as MySQL counts them by default: 1 if the row exists and `f`
    /// changed it, 0 otherwise (a missing row, or the same values).
    pub fn update_row(&mut self, table: &str, id: u32, f: impl FnOnce(&mut Row)) -> Result<u64> {
        self.write(table, id, |cur| match cur {
            None => Ok((None, 0)),
            Some(old) => {
                let mut row = old.clone();
                f(&mut row);
                row.id = id;
                if row == *old {
                    Ok((None, 0))
                } else {
                    Ok((
                        Some(Change::Put {
                            row,
                            op: Op::Update,
                        }),
                        1,
                    ))
                }
            }
        })
    }

    /// `DELETE … WHERE id = ?`: rows affected, 0 or 1.
    pub fn delete_row(&mut self, table: &str, id: u32) -> Result<u64> {
        self.write(table, id, |cur| match cur {
            None => Ok((None, 0)),
            Some(_) => Ok((Some(Change::Delete), 1)),
        })
    }

    /// Scans primary keys `lo..=hi` of `table` in one statement, one gate enter/exit per row
    /// fetched (the cursor's `next` runs inside the call), handing each row to `f` in the
    /// server layer — an aggregate or a sort buffer, **not** a send to the client: the slot and
    /// tickets are kept whatever the [`RowSend`] setting. Returns the rows fetched. A scan of
    /// n rows makes n + 1 enters (the last finds the end). Sees this connection's own writes.
    pub fn scan(&mut self, table: &str, lo: u32, hi: u32, mut f: impl FnMut(&Row)) -> Result<u64> {
        self.scan_inner(table, lo, hi, false, |row| {
            f(row);
            ControlFlow::Continue(())
        })
    }

    /// Like [`Connection::scan`], but each row fetched is sent to the client by `send`, as
    /// `SELECT … WHERE id BETWEEN ? AND ?` does: with [`RowSend::ForceExit`] the statement
    /// force-exits before each send (a step-out for [`StepOutReason::SendingResults`] while it
    /// is inside: slot freed, tickets to 0), so every row fetched after the first is a new
    /// admission — n + 1 admissions for n rows; with [`RowSend::Keep`] `send` runs keeping the
    /// slot and tickets.
    pub fn scan_sent(
        &mut self,
        table: &str,
        lo: u32,
        hi: u32,
        mut send: impl FnMut(&Row),
    ) -> Result<u64> {
        self.scan_inner(table, lo, hi, true, |row| {
            send(row);
            ControlFlow::Continue(())
        })
    }

    /// [`Connection::scan_sent`] that `send` may stop (`ControlFlow::Break`: the client is
    /// gone, say): the scan ends there, the statement leaves the gate, and the rows sent so
    /// far are returned.
    pub fn scan_sent_until(
        &mut self,
        table: &str,
        lo: u32,
        hi: u32,
        send: impl FnMut(&Row) -> ControlFlow<()>,
    ) -> Result<u64> {
        self.scan_inner(table, lo, hi, true, send)
    }

    fn scan_inner(
        &mut self,
        table: &str,
        lo: u32,
        hi: u32,
        sent: bool,
        mut f: impl FnMut(&Row) -> ControlFlow<()>,
    ) -> Result<u64> {
        let engine = self.engine.clone();
        let force_exit = sent && self.row_send == RowSend::ForceExit;
        let r = engine.db.begin_read()?;
        let t = open_rows(&r, table)?;
        let mut stmt = self.session.begin();
        let n = match self
            .txn
            .writes
            .get(table)
            .filter(|w| !w.is_empty() && lo <= hi)
        {
            // The common case (no write set): the cursor as it always was, decoding outside
            // the call.
            None => {
                let mut it = t.range(lo..=hi)?;
                drive(
                    &mut stmt,
                    || it.next().map(|item| item.map_err(EngineError::from)),
                    |(k, v)| Row::decode(k.value(), v.value()),
                    force_exit,
                    &engine,
                    &mut f,
                )?
            }
            Some(w) => {
                let base = t.range(lo..=hi)?.map(|item| {
                    item.map(|(k, v)| Row::decode(k.value(), v.value()))
                        .map_err(EngineError::from)
                });
                let mut it = Merged {
                    base: base.peekable(),
                    over: w.range(lo..=hi).peekable(),
                };
                drive(
                    &mut stmt,
                    || it.next(),
                    |row| row,
                    force_exit,
                    &engine,
                    &mut f,
                )?
            }
        };
        drop(stmt);
        engine.stats.rows_read.fetch_add(n, Ordering::Relaxed);
        Ok(n)
    }

    /// `SELECT COUNT(*) FROM table`: a full scan, one enter/exit per row.
    pub fn count(&mut self, table: &str) -> Result<u64> {
        self.scan(table, 0, u32::MAX, |_| {})
    }

    /// `SELECT c FROM table WHERE id = ?`: one statement of one call. The row returned is the
    /// row the server sends to the client; the statement has ended (force-exited) before it is
    /// returned, in both [`RowSend`] settings: 5.0's force-exit before the send and the
    /// statement's own end are one exit here, counted once, and the send costs no admission.
    /// Sees this connection's own writes.
    pub fn point_select(&mut self, table: &str, id: u32) -> Result<Option<Row>> {
        let engine = self.engine.clone();
        let r = engine.db.begin_read()?;
        let t = open_rows(&r, table)?;
        let own = if self.txn.writes.is_empty() {
            None
        } else {
            self.txn.writes.get(table).and_then(|w| w.get(&id))
        };
        let mut stmt = self.session.begin();
        let call = stmt.enter()?;
        let row = match own {
            Some(Change::Put { row, .. }) => Some(row.clone()),
            Some(Change::Delete) => None,
            None => t.get(id)?.map(|v| Row::decode(id, v.value())),
        };
        if row.is_some() {
            engine.work_row();
        }
        drop(call);
        drop(stmt);
        engine.stats.rows_read.fetch_add(1, Ordering::Relaxed);
        Ok(row)
    }

    /// Rows fetched in `lo..=hi` collected ([`Connection::scan`]: into the sort, not sent),
    /// then sorted by `c` after the cursor's statement ended, outside the gate. `distinct`
    /// drops duplicate `c`. The sorted rows are sent after the statement, so [`RowSend`] adds
    /// no admission here.
    pub fn range_sorted_by_c(
        &mut self,
        table: &str,
        lo: u32,
        hi: u32,
        distinct: bool,
    ) -> Result<Vec<[u8; schema::C_LEN]>> {
        let mut cs = Vec::new();
        self.scan(table, lo, hi, |r| cs.push(r.c))?;
        // The file sort happens after the cursor's statement ended, outside the gate.
        cs.sort_unstable();
        if distinct {
            cs.dedup();
        }
        Ok(cs)
    }

    /// An autocommit `INSERT` committed by `mode` (this call's only; the connection's own
    /// mode is unchanged): [`Connection::insert_row`] outside a transaction. An error means
    /// the row was not committed: with the slot released, the commit's outcome is returned as
    /// it is, and the statement ends without asking the gate for its slot back.
    pub fn insert(&mut self, table: &str, row: &Row, mode: CommitMode) -> Result<()> {
        let own = std::mem::replace(&mut self.commit_mode, mode);
        let was = std::mem::take(&mut self.txn.explicit);
        // Refused inside an open transaction: its commit would release every row lock of the
        // transaction (a write that changed nothing still locked its row), and its failure
        // would roll the transaction back behind the caller's back.
        let r = if was {
            Err(EngineError::BadInput(
                "Connection::insert is an autocommit insert: commit or roll back the open transaction first".into(),
            ))
        } else {
            self.insert_row(table, row)
        };
        self.txn.explicit = was;
        self.commit_mode = own;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile::{GateConfig, Policy};

    fn temp_engine(tag: &str) -> (Arc<Engine>, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("turnstile-engine-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: Duration::ZERO,
        })
        .unwrap();
        (e, dir)
    }

    fn gate(tickets: u32) -> Gate {
        Gate::new(GateConfig::new(Policy::Classic).limit(2).tickets(tickets)).unwrap()
    }

    #[test]
    fn a_full_scan_counts_every_row_and_spends_a_ticket_per_row() {
        let (e, dir) = temp_engine("scan");
        assert!(e.ensure_table("t", 1234, &mut |_, _| {}).unwrap());
        assert!(
            !e.ensure_table("t", 1234, &mut |_, _| {}).unwrap(),
            "reused"
        );
        let g = gate(100);
        let mut c = Connection::new(e.clone(), &g, "scan");
        assert_eq!(c.count("t").unwrap(), 1234);
        let snap = g.snapshot();
        // 1235 enters (the last finds the end); each admission covers 1 + 100 enters.
        assert_eq!(snap.counters.admissions, 1235u64.div_ceil(101));
        assert_eq!(
            snap.counters.admissions + snap.counters.ticket_reentries,
            1235
        );
        assert_eq!(snap.inside, 0, "statement end force-exits");
        drop(c);
        drop(g);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn ranges_return_exactly_the_rows_asked_for() {
        let (e, dir) = temp_engine("range");
        e.ensure_table("t", 5000, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "r");
        let mut ids = Vec::new();
        assert_eq!(c.scan("t", 1001, 2000, |r| ids.push(r.id)).unwrap(), 1000);
        assert_eq!(ids, (1001..=2000).collect::<Vec<_>>());
        assert_eq!(
            c.point_select("t", 77).unwrap().unwrap(),
            Row::generate(77, 5000)
        );
        assert!(c.point_select("t", 5001).unwrap().is_none());
        let sorted = c.range_sorted_by_c("t", 1, 100, true).unwrap();
        assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Admissions a statement made: the gate's counter before and after it.
    fn admissions(g: &Gate, f: impl FnOnce()) -> u64 {
        let before = g.snapshot().counters.admissions;
        f();
        g.snapshot().counters.admissions - before
    }

    #[test]
    fn force_exit_makes_every_row_sent_an_admission_and_keep_spends_tickets() {
        let (e, dir) = temp_engine("rowsend");
        e.ensure_table("t", 3000, &mut |_, _| {}).unwrap();
        let g = gate(100);
        let mut c = Connection::new(e.clone(), &g, "send");
        assert_eq!(
            c.row_send(),
            RowSend::Keep,
            "the default keeps today's behaviour"
        );
        // Keep: 1001 enters (the last finds the end), each admission covers 1 + 100 of them.
        let mut sent = 0;
        let n = admissions(&g, || {
            assert_eq!(c.scan_sent("t", 1001, 2000, |_| sent += 1).unwrap(), 1000);
        });
        assert_eq!((n, sent), (1001u64.div_ceil(101), 1000));
        // Force-exit: every row sent throws the tickets away, so each of the 1000 fetches and
        // the one that finds the end is an admission of its own.
        c.set_row_send(RowSend::ForceExit);
        let steps_before = g.snapshot().counters.step_outs;
        let n = admissions(&g, || {
            assert_eq!(c.scan_sent("t", 1001, 2000, |_| {}).unwrap(), 1000);
        });
        assert_eq!(n, 1001);
        assert_eq!(g.snapshot().counters.step_outs - steps_before, 1000);
        assert_eq!(g.stats().inside, 0);
        drop(c);
        drop(g);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rows_not_sent_per_row_cost_the_same_admissions_in_both_settings() {
        let (e, dir) = temp_engine("rowsend-agg");
        e.ensure_table("t", 3000, &mut |_, _| {}).unwrap();
        let mut counts = Vec::new();
        for rs in RowSend::ALL {
            let g = gate(100);
            let mut c = Connection::new(e.clone(), &g, rs.name());
            c.set_row_send(rs);
            let mut sum = 0u64;
            let sum_range = admissions(&g, || {
                c.scan("t", 1, 1000, |r| sum += r.k as u64).unwrap();
            });
            let sorted = admissions(&g, || {
                assert_eq!(c.range_sorted_by_c("t", 1, 1000, true).unwrap().len(), 1000);
            });
            let point = admissions(&g, || {
                assert!(c.point_select("t", 5).unwrap().is_some());
            });
            assert_eq!(
                g.snapshot().counters.step_outs,
                0,
                "{rs}: nothing sent per row"
            );
            counts.push((sum_range, sorted, point));
        }
        assert_eq!(counts[0], counts[1], "force-exit vs keep");
        assert_eq!(counts[0], (1001u64.div_ceil(101), 1001u64.div_ceil(101), 1));
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn force_exit_frees_the_slot_while_a_row_is_sent() {
        let (e, dir) = temp_engine("rowsend-slot");
        e.ensure_table("t", 100, &mut |_, _| {}).unwrap();
        for rs in RowSend::ALL {
            let g = Gate::new(GateConfig::new(Policy::Classic).limit(1).tickets(500)).unwrap();
            let mut c = Connection::new(e.clone(), &g, "sender");
            c.set_row_send(rs);
            let mut other = g.named_session("other");
            other.set_wait_timeout(Some(Duration::from_millis(5)));
            let mut seen = Vec::new();
            c.scan_sent("t", 1, 3, |_| {
                // A second session asks for the only slot while the row is being sent.
                let got_in = other.begin().enter().is_ok();
                seen.push((g.stats().inside, got_in));
            })
            .unwrap();
            match rs {
                RowSend::ForceExit => assert_eq!(seen, [(0, true); 3], "slot free between rows"),
                RowSend::Keep => assert_eq!(seen, [(1, false); 3], "slot kept while sending"),
            }
            assert_eq!(c.row_send(), rs);
        }
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn row_send_names_round_trip() {
        for rs in RowSend::ALL {
            assert_eq!(rs.name().parse::<RowSend>(), Ok(rs));
            assert_eq!(rs.to_string(), rs.name());
        }
        let e = "5.0".parse::<RowSend>().unwrap_err();
        assert!(
            e.contains("'5.0'") && e.contains("force-exit") && e.contains("keep"),
            "{e}"
        );
    }

    #[test]
    fn acknowledged_inserts_survive_a_reopen_in_both_commit_modes() {
        let (e, dir) = temp_engine("insert");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "ins");
        c.insert("t", &Row::generate(11, 10), CommitMode::HoldSlot)
            .unwrap();
        c.insert("t", &Row::generate(12, 10), CommitMode::ReleaseSlot)
            .unwrap();
        assert_eq!(e.stats.commits.load(Ordering::Relaxed), 2);
        assert_eq!(g.snapshot().counters.step_outs, 1);
        drop(c);
        drop(e);
        let e = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: Duration::ZERO,
        })
        .unwrap();
        assert!(e.contains("t", 11).unwrap() && e.contains("t", 12).unwrap());
        assert_eq!(e.count_direct("t").unwrap(), 12);
        assert_eq!(e.binlog_records().unwrap().len(), 2);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_committed_insert_is_never_reported_failed_when_its_slot_is_taken_during_the_commit() {
        let dir = std::env::temp_dir().join(format!("turnstile-engine-ack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // A slow fsync, so that another session takes the freed slot while the commit runs.
        let e = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::from_millis(100),
            row_work: Duration::ZERO,
        })
        .unwrap();
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = Gate::new(GateConfig::new(Policy::Classic).limit(1)).unwrap();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let g2 = g.clone();
        let other = std::thread::spawn(move || {
            while g2.stats().stepped_out == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut s = g2.session();
            let mut stmt = s.begin();
            let _call = stmt.enter().unwrap(); // the slot the insert freed, kept
            let _ = release_rx.recv();
        });
        let mut c = Connection::new(e.clone(), &g, "ins");
        c.session()
            .set_wait_timeout(Some(Duration::from_millis(10)));
        let r = c.insert("t", &Row::generate(11, 10), CommitMode::ReleaseSlot);
        drop(release_tx);
        other.join().unwrap();
        assert!(r.is_ok(), "the row was committed: {r:?}");
        assert!(e.contains("t", 11).unwrap());
        assert_eq!(
            g.stats().counters.timeouts,
            0,
            "the insert asked nothing after its commit"
        );
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn row_work_is_spent_once_for_every_row_a_cursor_or_point_select_fetches() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-engine-work-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let work = Duration::from_micros(50);
        let e = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: work,
        })
        .unwrap();
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = Gate::new(GateConfig::new(Policy::Classic).limit(1)).unwrap();
        let mut c = Connection::new(e.clone(), &g, "w");
        let spent = || e.stats.row_work_ns.load(Ordering::Relaxed);
        assert_eq!(c.scan("t", 1, 5, |_| {}).unwrap(), 5);
        assert_eq!(
            spent(),
            5 * 50_000,
            "one unit per row, none for the cursor's end"
        );
        assert!(c.point_select("t", 3).unwrap().is_some());
        assert_eq!(spent(), 6 * 50_000);
        assert!(c.point_select("t", 99).unwrap().is_none());
        assert_eq!(spent(), 6 * 50_000, "no row fetched, no work");
        drop(c);
        drop(e);
        // Without row work nothing is spent.
        let e = open_at(&dir, 0);
        let mut c = Connection::new(e.clone(), &g, "none");
        assert_eq!(c.scan("t", 1, 10, |_| {}).unwrap(), 10);
        assert_eq!(e.stats.row_work_ns.load(Ordering::Relaxed), 0);
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn open_at(dir: &Path, fsync_ms: u64) -> Arc<Engine> {
        Engine::open(&EngineConfig {
            data_dir: dir.to_path_buf(),
            fsync_delay: Duration::from_millis(fsync_ms),
            row_work: Duration::ZERO,
        })
        .unwrap()
    }

    /// Polls `cond` every millisecond for up to 10 s (a bound, not a timing).
    fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// What `Engine::recovery` reports after an open.
    fn recovered(committed: u64, rolled_back: u64, truncated_bytes: u64) -> Recovery {
        Recovery {
            committed,
            rolled_back,
            truncated_bytes,
        }
    }

    fn row(id: u32, k: u32) -> Row {
        let mut r = Row::generate(id, 1000);
        r.k = k;
        r
    }

    #[test]
    fn ddl_creates_lists_and_drops_tables_and_reports_missing_and_existing_ones() {
        let (e, dir) = temp_engine("ddl");
        assert_eq!(e.tables().unwrap(), Vec::<String>::new());
        e.create_table("sbtest2").unwrap();
        e.create_table("sbtest1").unwrap();
        assert_eq!(e.tables().unwrap(), ["sbtest1", "sbtest2"]);
        assert!(e.table_exists("sbtest1").unwrap());
        assert!(
            matches!(e.create_table("sbtest1"), Err(EngineError::TableExists(t)) if t == "sbtest1")
        );
        assert!(matches!(
            e.create_table("bad name"),
            Err(EngineError::BadInput(_))
        ));
        assert!(matches!(
            e.create_table("turnstile_meta"),
            Err(EngineError::BadInput(_))
        ));
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "ddl");
        assert_eq!(c.count("sbtest1").unwrap(), 0);
        c.insert_row("sbtest1", &row(1, 5)).unwrap();
        assert!(e.drop_table("sbtest1").unwrap());
        assert!(!e.drop_table("sbtest1").unwrap());
        assert_eq!(e.tables().unwrap(), ["sbtest2"]);
        assert!(matches!(c.count("sbtest1"), Err(EngineError::NoSuchTable(t)) if t == "sbtest1"));
        assert!(matches!(
            c.point_select("nope", 1),
            Err(EngineError::NoSuchTable(_))
        ));
        assert!(matches!(
            c.insert_row("nope", &row(1, 1)),
            Err(EngineError::NoSuchTable(_))
        ));
        assert!(
            matches!(c.count("sbtest2_k"), Err(EngineError::NoSuchTable(_))),
            "an index is no table"
        );
        e.ensure_table("loaded", 10, &mut |_, _| {}).unwrap();
        assert_eq!(e.tables().unwrap(), ["loaded", "sbtest2"]);
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_table_with_uncommitted_changes_is_not_dropped_until_they_end() {
        let (e, dir) = temp_engine("ddl-inuse");
        e.create_table("t").unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "writer");
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(1, 1)).unwrap();
        let err = e.drop_table("t").unwrap_err();
        assert!(err.to_string().contains("uncommitted changes"), "{err}");
        c.commit().unwrap();
        assert!(e.drop_table("t").unwrap());
        assert!(!e.table_exists("t").unwrap());
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_insert_of_an_existing_id_is_a_duplicate_key_and_the_transaction_stays_open() {
        let (e, dir) = temp_engine("dup");
        e.create_table("t").unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "dup");
        c.insert_row("t", &row(1, 1)).unwrap();
        assert!(matches!(
            c.insert_row("t", &row(1, 2)),
            Err(EngineError::DuplicateKey { id: 1, .. })
        ));
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(2, 2)).unwrap();
        assert!(
            matches!(
                c.insert_row("t", &row(2, 3)),
                Err(EngineError::DuplicateKey { id: 2, .. })
            ),
            "own write"
        );
        assert!(c.in_transaction());
        c.commit().unwrap();
        assert_eq!(e.ids_direct("t").unwrap(), [1, 2]);
        assert_eq!(e.get_direct("t", 2).unwrap().unwrap().k, 2);
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_transaction_reads_its_own_writes_in_point_and_range_reads_and_others_do_not() {
        let (e, dir) = temp_engine("own");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "writer");
        let mut other = Connection::new(e.clone(), &g, "reader");
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(11, 7)).unwrap();
        c.insert_row("t", &row(0, 7)).unwrap();
        assert_eq!(c.update_row("t", 3, |r| r.k = 999).unwrap(), 1);
        assert_eq!(c.update_row("t", 3, |r| r.k = 999).unwrap(), 0, "unchanged");
        assert_eq!(c.update_row("t", 42, |r| r.k = 1).unwrap(), 0, "missing");
        assert_eq!(c.delete_row("t", 5).unwrap(), 1);
        assert_eq!(c.delete_row("t", 5).unwrap(), 0);
        assert_eq!(c.point_select("t", 3).unwrap().unwrap().k, 999);
        assert!(c.point_select("t", 5).unwrap().is_none());
        assert_eq!(c.point_select("t", 11).unwrap().unwrap().k, 7);
        let mut ids = Vec::new();
        c.scan("t", 0, 100, |r| ids.push(r.id)).unwrap();
        assert_eq!(ids, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]);
        let mut ks = Vec::new();
        c.scan_sent("t", 2, 4, |r| ks.push(r.k)).unwrap();
        assert_eq!(ks[1], 999);
        assert_eq!(c.count("t").unwrap(), 11);
        assert_eq!(c.range_sorted_by_c("t", 4, 6, false).unwrap().len(), 2);
        // Another connection sees only committed data.
        assert_eq!(other.count("t").unwrap(), 10);
        assert_ne!(other.point_select("t", 3).unwrap().unwrap().k, 999);
        c.commit().unwrap();
        assert_eq!(other.count("t").unwrap(), 11);
        assert_eq!(other.point_select("t", 3).unwrap().unwrap().k, 999);
        assert_eq!(e.index_ids_direct("t").unwrap(), e.ids_direct("t").unwrap());
        drop((c, other));
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rollback_discards_the_write_set_and_releases_the_locks() {
        let (e, dir) = temp_engine("rollback");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "rb");
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(11, 1)).unwrap();
        c.delete_row("t", 1).unwrap();
        assert_eq!(e.row_locks_held(), 2);
        c.rollback();
        assert!(!c.in_transaction());
        assert_eq!(e.row_locks_held(), 0);
        assert_eq!(c.count("t").unwrap(), 10);
        assert!(c.point_select("t", 1).unwrap().is_some());
        assert!(e.binlog_records().unwrap().is_empty());
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_dropped_connection_rolls_back_its_open_transaction() {
        let (e, dir) = temp_engine("dropconn");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "gone");
        c.begin_transaction().unwrap();
        c.update_row("t", 2, |r| r.k = 12345).unwrap();
        drop(c);
        assert_eq!(e.row_locks_held(), 0);
        let mut c2 = Connection::new(e.clone(), &g, "next");
        assert_eq!(
            c2.update_row("t", 2, |r| r.k = 7).unwrap(),
            1,
            "not blocked"
        );
        assert_eq!(e.get_direct("t", 2).unwrap().unwrap().k, 7);
        drop(c2);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_row_lock_blocks_a_second_writer_outside_the_gate_until_the_first_commits() {
        let (e, dir) = temp_engine("rowlock");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut a = Connection::new(e.clone(), &g, "a");
        a.begin_transaction().unwrap();
        a.update_row("t", 4, |r| r.k = 100).unwrap();
        let (e2, g2) = (e.clone(), g.clone());
        let b = std::thread::spawn(move || {
            let mut b = Connection::new(e2, &g2, "b");
            b.update_row("t", 4, |r| r.k += 1).unwrap()
        });
        wait_until("b to wait for the row lock", || {
            e.stats.lock_waits.load(Ordering::Relaxed) == 1
        });
        wait_until("b to step out", || g.stats().stepped_out == 1);
        assert_eq!(g.stats().inside, 0, "the waiter holds no slot");
        assert!(!b.is_finished());
        a.commit().unwrap();
        assert_eq!(b.join().unwrap(), 1);
        assert_eq!(
            e.get_direct("t", 4).unwrap().unwrap().k,
            101,
            "b saw a's commit"
        );
        drop(a);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_deadlock_between_two_connections_is_detected_and_the_waiter_rolled_back() {
        let (e, dir) = temp_engine("deadlock");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut a = Connection::new(e.clone(), &g, "a");
        a.begin_transaction().unwrap();
        a.update_row("t", 1, |r| r.k = 1001).unwrap();
        let (e2, g2) = (e.clone(), g.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        let b = std::thread::spawn(move || {
            let mut b = Connection::new(e2, &g2, "b");
            b.begin_transaction().unwrap();
            b.update_row("t", 2, |r| r.k = 2002).unwrap();
            tx.send(()).unwrap();
            let r = b.update_row("t", 1, |r| r.k = 2001); // waits for a
            let r2 = r.and_then(|_| b.commit());
            r2.map(|_| ())
        });
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        wait_until("b to wait for a", || {
            e.stats.lock_waits.load(Ordering::Relaxed) == 1
        });
        // a asks for b's row: a cycle, refused at once; a is rolled back, b goes on.
        assert!(matches!(
            a.update_row("t", 2, |r| r.k = 1002),
            Err(EngineError::Deadlock)
        ));
        assert!(!a.in_transaction());
        b.join().unwrap().unwrap();
        assert_eq!(e.stats.deadlocks.load(Ordering::Relaxed), 1);
        assert_eq!(e.get_direct("t", 1).unwrap().unwrap().k, 2001);
        assert_eq!(e.get_direct("t", 2).unwrap().unwrap().k, 2002);
        assert_eq!(e.row_locks_held(), 0);
        drop(a);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_lock_wait_timeout_rolls_back_only_the_statement() {
        let (e, dir) = temp_engine("lwt");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        e.set_lock_wait_timeout(Duration::from_millis(20));
        let g = gate(500);
        let mut a = Connection::new(e.clone(), &g, "a");
        let mut b = Connection::new(e.clone(), &g, "b");
        a.begin_transaction().unwrap();
        a.update_row("t", 1, |r| r.k = 1).unwrap();
        b.begin_transaction().unwrap();
        b.update_row("t", 2, |r| r.k = 2).unwrap();
        assert!(matches!(
            b.update_row("t", 1, |r| r.k = 3),
            Err(EngineError::LockWaitTimeout)
        ));
        assert!(
            b.in_transaction(),
            "the transaction stays open, as InnoDB's"
        );
        assert_eq!(e.row_locks_held(), 2, "b still holds row 2");
        b.commit().unwrap();
        assert_eq!(
            e.get_direct("t", 2).unwrap().unwrap().k,
            2,
            "b's first write kept"
        );
        a.commit().unwrap();
        drop((a, b));
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn next_id_is_above_every_committed_and_handed_out_id() {
        let (e, dir) = temp_engine("autoinc");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "ai");
        assert_eq!(c.next_id("t").unwrap(), 11);
        assert_eq!(c.next_id("t").unwrap(), 12);
        c.insert_row("t", &row(50, 1)).unwrap();
        assert_eq!(c.next_id("t").unwrap(), 51);
        drop(c);
        drop(e);
        let e = open_at(&dir, 0);
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "ai");
        assert_eq!(
            c.next_id("t").unwrap(),
            51,
            "recomputed from the committed rows"
        );
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rebinding_to_another_gate_keeps_the_open_transaction() {
        let (e, dir) = temp_engine("rebind");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let (g1, g2) = (gate(500), gate(100));
        let mut c = Connection::new(e.clone(), &g1, "rebind");
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(11, 1)).unwrap();
        c.rebind(&g2);
        assert!(c.in_transaction());
        assert!(
            c.point_select("t", 11).unwrap().is_some(),
            "own write still seen"
        );
        let before = g2.snapshot().counters.admissions;
        c.commit().unwrap();
        assert!(
            g2.snapshot().counters.admissions > before,
            "the commit went through g2"
        );
        assert!(e.contains("t", 11).unwrap());
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn without_group_commit_every_commit_pays_its_own_fsync() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-engine-serial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = open_at(&dir, 5);
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = Gate::new(GateConfig::new(Policy::Classic).limit(2)).unwrap();
        let hs: Vec<_> = (0..4u32)
            .map(|i| {
                let (e, g) = (e.clone(), g.clone());
                std::thread::spawn(move || {
                    let mut c = Connection::new(e, &g, format!("ins-{i}"));
                    let mode = [CommitMode::HoldSlot, CommitMode::ReleaseSlot][i as usize % 2];
                    for j in 0..3 {
                        c.insert("t", &row(100 + i * 10 + j, j), mode).unwrap();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(e.stats.commits.load(Ordering::Relaxed), 12);
        assert_eq!(e.stats.fsyncs.load(Ordering::Relaxed), 12);
        assert_eq!(e.stats.group_commits.load(Ordering::Relaxed), 0);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn commit_mode_names_round_trip() {
        for m in CommitMode::ALL {
            assert_eq!(m.name().parse::<CommitMode>(), Ok(m));
        }
        assert_eq!(CommitMode::default(), CommitMode::GroupCommit);
        assert!("group"
            .parse::<CommitMode>()
            .unwrap_err()
            .contains("group-commit"));
    }

    /// Commits one transaction that inserts `id` with `fp` set, then drops the engine as a
    /// crash would leave it.
    fn crash_at(dir: &Path, fp: Failpoint, id: u32, mode: CommitMode) -> Result<()> {
        let e = open_at(dir, 0);
        e.set_failpoint(fp);
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "crash");
        c.set_commit_mode(mode);
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(id, 3)).unwrap();
        c.update_row("t", 1, |r| r.k = id).unwrap();
        let r = c.commit();
        assert!(
            matches!(
                c.insert_row("t", &row(id + 1, 1)),
                Err(EngineError::Storage(m)) if m.contains("reopen")
            ),
            "a stopped engine commits nothing more"
        );
        r
    }

    #[test]
    fn a_prepared_transaction_without_a_binlog_entry_is_rolled_back_on_open() {
        for mode in CommitMode::ALL {
            let dir = std::env::temp_dir().join(format!(
                "turnstile-engine-rec-rb-{mode}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            open_at(&dir, 0)
                .ensure_table("t", 10, &mut |_, _| {})
                .unwrap();
            let k1 = open_at(&dir, 0).get_direct("t", 1).unwrap().unwrap().k;
            assert!(crash_at(&dir, Failpoint::CrashAfterPrepare, 11, mode).is_err());
            let e = open_at(&dir, 0);
            assert_eq!(e.recovery(), &recovered(0, 1, 0), "{mode}");
            assert!(!e.contains("t", 11).unwrap());
            assert_eq!(e.get_direct("t", 1).unwrap().unwrap().k, k1);
            assert!(e.binlog_records().unwrap().is_empty());
            drop(e);
            assert_eq!(
                open_at(&dir, 0).recovery(),
                &Recovery::default(),
                "nothing left"
            );
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_prepared_transaction_with_a_durable_binlog_entry_is_committed_on_open() {
        for mode in CommitMode::ALL {
            let dir = std::env::temp_dir().join(format!(
                "turnstile-engine-rec-c-{mode}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            open_at(&dir, 0)
                .ensure_table("t", 10, &mut |_, _| {})
                .unwrap();
            assert!(crash_at(&dir, Failpoint::CrashAfterBinlog, 11, mode).is_err());
            let e = open_at(&dir, 0);
            assert_eq!(e.recovery(), &recovered(1, 0, 0), "{mode}");
            assert!(e.contains("t", 11).unwrap());
            assert_eq!(e.get_direct("t", 1).unwrap().unwrap().k, 11);
            assert_eq!(e.index_ids_direct("t").unwrap(), e.ids_direct("t").unwrap());
            let recs = e.binlog_records().unwrap();
            assert_eq!(recs.len(), 1);
            assert_eq!(recs[0].changes.len(), 2);
            // XIDs stay unique across the restart.
            let g = gate(500);
            let mut c = Connection::new(e.clone(), &g, "after");
            c.insert_row("t", &row(20, 1)).unwrap();
            let recs = e.binlog_records().unwrap();
            assert!(recs[1].xid > recs[0].xid);
            drop(c);
            drop(e);
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_binlog_corrupt_before_valid_records_is_refused_on_open_and_left_as_it_was() {
        let (e, dir) = temp_engine("corrupt-middle");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "corrupt");
        c.insert_row("t", &row(11, 1)).unwrap();
        c.insert_row("t", &row(12, 1)).unwrap();
        drop(c);
        drop(e);
        let path = dir.join(BINLOG_FILE);
        let mut data = std::fs::read(&path).unwrap();
        // A byte of the first record's body (its header is the first line).
        let body = data.iter().position(|&b| b == b'\n').unwrap() + 2;
        data[body] ^= 1;
        std::fs::write(&path, &data).unwrap();
        let err = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: Duration::ZERO,
        })
        .err()
        .expect("refused");
        assert!(err.to_string().contains("corrupt"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), data, "nothing truncated");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_torn_binlog_tail_is_truncated_on_open_and_its_transaction_rolled_back() {
        let (e, dir) = temp_engine("torn");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "torn");
        c.insert_row("t", &row(11, 1)).unwrap();
        drop(c);
        drop(e);
        let good = std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len();
        // A crash after the prepare, with half of the binlog record written.
        assert!(crash_at(&dir, Failpoint::CrashAfterBinlog, 12, CommitMode::HoldSlot).is_err());
        let full = std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len();
        let f = OpenOptions::new()
            .write(true)
            .open(dir.join(BINLOG_FILE))
            .unwrap();
        f.set_len(good + (full - good) / 2).unwrap();
        drop(f);
        let e = open_at(&dir, 0);
        assert_eq!(e.recovery(), &recovered(0, 1, (full - good) / 2));
        assert_eq!(
            std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len(),
            good
        );
        assert!(e.contains("t", 11).unwrap() && !e.contains("t", 12).unwrap());
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "after");
        c.insert_row("t", &row(13, 1)).unwrap();
        let ids: Vec<u32> = e
            .binlog_records()
            .unwrap()
            .iter()
            .map(|r| r.changes[0].id)
            .collect();
        assert_eq!(ids, [11, 13], "appends follow the cut");
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_failed_binlog_append_is_cut_back_and_reopening_finds_no_torn_record() {
        for mode in CommitMode::ALL {
            let (e, dir) = temp_engine(&format!("torn-append-{mode}"));
            e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
            drop(e);
            let good = std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len();
            let err = crash_at(&dir, Failpoint::TornAppend, 11, mode).unwrap_err();
            assert!(err.to_string().contains("cut off"), "{mode}: {err}");
            assert_eq!(
                std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len(),
                good,
                "{mode}: the partial record is gone"
            );
            let e = open_at(&dir, 0);
            assert_eq!(e.recovery(), &recovered(0, 1, 0), "{mode}");
            assert!(!e.contains("t", 11).unwrap());
            drop(e);
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_prepared_group_is_not_appended_once_the_engine_stopped() {
        let (e, dir) = temp_engine("stopped-group");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let before = std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len();
        let p = Pending {
            xid: e.next_xid.fetch_add(1, Ordering::Relaxed),
            conn: 1,
            changes: vec![(
                "t".into(),
                11,
                Change::Put {
                    row: row(11, 1),
                    op: Op::Insert,
                },
            )],
        };
        // A group leader prepared before another commit failed ...
        e.prepare(std::slice::from_ref(&p)).unwrap();
        let _ = e.stop("another commit", "a failed append");
        // ... appends nothing, and its commit is not acknowledged.
        assert!(e.commit_prepared(&[p]).is_err());
        assert_eq!(
            std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len(),
            before
        );
        assert!(!e.contains("t", 11).unwrap());
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_commit_whose_fsync_ran_while_another_commit_failed_is_not_acknowledged() {
        for mode in CommitMode::ALL {
            let (e, dir) = temp_engine(&format!("fsync-doubt-{mode}"));
            e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
            e.set_failpoint(Failpoint::HoldAfterBinlog);
            let ins = {
                let e = e.clone();
                std::thread::spawn(move || {
                    let g = gate(500);
                    let mut c = Connection::new(e, &g, "doubt");
                    c.set_commit_mode(mode);
                    c.insert_row("t", &row(11, 1))
                })
            };
            wait_until("the fsync", || e.stats.fsyncs.load(Ordering::Relaxed) == 1);
            // Another commit fails while this one's fsync is done but not yet checked.
            let _ = e.stop("another commit", "a failed fsync");
            e.set_failpoint(Failpoint::Off);
            let err = ins.join().unwrap().unwrap_err();
            assert!(err.to_string().contains("proves nothing"), "{mode}: {err}");
            assert!(!e.contains("t", 11).unwrap(), "{mode}: not applied");
            drop(e);
            // In doubt: its binlog record is durable, so reopening commits it.
            assert_eq!(open_at(&dir, 0).recovery().committed, 1, "{mode}");
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_panic_in_the_commit_path_stops_the_engine_and_fails_the_commit_instead_of_hanging_the_next(
    ) {
        for mode in CommitMode::ALL {
            let (e, dir) = temp_engine(&format!("panic-commit-{mode}"));
            e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
            e.set_failpoint(Failpoint::PanicAfterBinlog);
            let g = gate(500);
            let mut c = Connection::new(e.clone(), &g, "panic");
            c.set_commit_mode(mode);
            let err = c.insert_row("t", &row(11, 1)).unwrap_err();
            assert!(err.to_string().contains("panicked"), "{mode}: {err}");
            e.set_failpoint(Failpoint::Off);
            // The next commit (a group's next leader) is refused at once, not left waiting.
            let next = std::thread::spawn({
                let e = e.clone();
                move || {
                    let g = gate(500);
                    let mut c = Connection::new(e, &g, "next");
                    c.set_commit_mode(mode);
                    c.insert_row("t", &row(12, 1))
                }
            });
            wait_until("the next commit's answer", || next.is_finished());
            let err = next.join().unwrap().unwrap_err();
            assert!(err.to_string().contains("reopen"), "{mode}: {err}");
            drop(c);
            drop(e);
            let e = open_at(&dir, 0);
            assert_eq!(
                e.recovery().committed,
                1,
                "{mode}: its binlog record was durable"
            );
            drop(e);
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn ddl_is_refused_once_the_engine_stopped_so_recovery_never_writes_into_a_dropped_table() {
        let (e, dir) = temp_engine("ddl-stopped");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        drop(e);
        assert!(crash_at(&dir, Failpoint::CrashAfterBinlog, 11, CommitMode::HoldSlot).is_err());
        let e = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: Duration::ZERO,
        })
        .unwrap();
        // Reopened: recovered, DDL works again; stopping it again refuses DDL.
        assert_eq!(e.recovery().committed, 1);
        let _ = e.stop("a commit", "failed");
        for r in [
            e.drop_table("t").map(|_| ()),
            e.create_table("u"),
            e.ensure_table("t", 20, &mut |_, _| {}).map(|_| ()),
            e.truncate_above("t", 5).map(|_| ()),
        ] {
            assert!(
                matches!(&r, Err(EngineError::Storage(m)) if m.contains("reopen")),
                "{r:?}"
            );
        }
        assert_eq!(e.tables().unwrap(), ["t"]);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_autocommit_insert_is_refused_inside_an_open_transaction() {
        let (e, dir) = temp_engine("insert-locks");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "locks");
        c.begin_transaction().unwrap();
        // A write that changed nothing still locked its row.
        assert_eq!(c.update_row("t", 1, |_| {}).unwrap(), 0);
        assert!(matches!(
            c.insert("t", &row(11, 1), CommitMode::HoldSlot),
            Err(EngineError::BadInput(_))
        ));
        // The lock is still the transaction's: another connection cannot take it.
        let mut other = Connection::new(e.clone(), &g, "other");
        e.set_lock_wait_timeout(Duration::from_millis(1));
        assert!(matches!(
            other.update_row("t", 1, |r| r.k = 99),
            Err(EngineError::LockWaitTimeout)
        ));
        drop(other);
        c.rollback();
        // An open transaction with nothing locked yet: refused too (a failing insert would
        // roll it back behind the caller's back).
        c.begin_transaction().unwrap();
        assert!(matches!(
            c.insert("t", &row(11, 1), CommitMode::HoldSlot),
            Err(EngineError::BadInput(_))
        ));
        c.rollback();
        // Outside a transaction it is an autocommit insert.
        c.insert("t", &row(11, 1), CommitMode::HoldSlot).unwrap();
        assert!(e.contains("t", 11).unwrap());
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn group_commit_covers_the_sessions_queued_during_a_fsync_with_one_fsync() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-engine-group-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = open_at(&dir, 0);
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = Gate::new(GateConfig::new(Policy::Classic).limit(2)).unwrap();
        let insert = |i: u32| {
            let (e, g) = (e.clone(), g.clone());
            std::thread::spawn(move || {
                let mut c = Connection::new(e, &g, format!("ins-{i}"));
                c.insert_row("t", &row(100 + i, i)).unwrap();
            })
        };
        // The first commit is held between its fsync and its apply ...
        e.set_failpoint(Failpoint::HoldAfterBinlog);
        let first = insert(0);
        wait_until("the first fsync", || {
            e.stats.fsyncs.load(Ordering::Relaxed) == 1
        });
        // ... while seven more sessions commit: they queue behind it.
        let rest: Vec<_> = (1..8).map(insert).collect();
        wait_until("seven queued commits", || e.group_queued() == 7);
        e.set_failpoint(Failpoint::Off);
        first.join().unwrap();
        for h in rest {
            h.join().unwrap();
        }
        let stats = &e.stats;
        assert_eq!(stats.commits.load(Ordering::Relaxed), 8);
        assert_eq!(
            stats.fsyncs.load(Ordering::Relaxed),
            2,
            "one fsync for the seven"
        );
        assert_eq!(stats.group_commits.load(Ordering::Relaxed), 2);
        assert_eq!(stats.group_committed.load(Ordering::Relaxed), 8);
        assert_eq!(e.binlog_records().unwrap().len(), 8);
        assert_eq!(e.count_direct("t").unwrap(), 18);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
