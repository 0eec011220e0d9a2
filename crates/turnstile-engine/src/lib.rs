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
//!   [`StepOutReason::RowLockWait`](turnstile::StepOutReason::RowLockWait); a wait that would
//!   close a cycle is refused at once with [`EngineError::Deadlock`];
//!   [`Engine::set_lock_wait_timeout`], 50 s by default, as
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
//!   queue (MySQL 5.6 / MariaDB binlog group commit): a queued session leads, gathers every
//!   session queued, and does one prepare, one binlog append and **one fsync** for the group,
//!   then applies it and wakes the others with their results. The next group gathers and
//!   prepares while this one's fsync runs, and fsyncs as soon as it ends; no mutex is held
//!   across the fsync.
//! * Rows sent to the client ([`RowSend`], per connection): MySQL 5.0/5.1's server layer
//!   force-exits the gate before it sends each row (`select_send::send_data` →
//!   `ha_release_temporary_latches` → `srv_conc_force_exit_innodb`), so every row sent costs the
//!   next fetch a fresh admission ([`RowSend::ForceExit`]); 5.5 and later send the row keeping
//!   the slot and the tickets ([`RowSend::Keep`], the default). Which rows are sent is part of
//!   the API: [`Connection::scan_sent`] and [`Connection::point_select`] send their rows;
//!   [`Connection::scan`] hands rows to the server (an aggregate, a sort buffer), which sends
//!   its result after the statement ended.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use redb::{
    Database, Durability, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle,
};
use turnstile::mutex::Instrumented;

pub mod binlog;
mod commit;
mod connection;
mod error;
mod locks;
mod recovery;
pub mod schema;
mod txn;

pub use binlog::{BinlogChange, BinlogRecord, Op};
pub use commit::{Binlog, CommitMode, Failpoint};
pub use connection::{Connection, RowSend};
pub use error::{EngineError, Result};
pub use recovery::Recovery;
pub use txn::Savepoint;

use commit::GroupState;
use error::io_err;
use locks::LockManager;
use recovery::Recovered;
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
    /// the caller's call (a busy loop), emulating costlier rows: seed 001's server spent over
    /// ten times this engine's CPU a row (its peak TPS over its rows, against `turnstile
    /// calibrate --oltp`; docs/SIMULATOR.md). `repro oltp --row-work-ns`. Zero: none.
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
        let Recovered {
            binlog,
            max_xid,
            recovery,
        } = recovery::recover(&db, &dir)?;
        let sync_file = binlog
            .file
            .try_clone()
            .map_err(io_err(format!("cannot reopen {}", binlog.path.display())))?;
        Ok(Arc::new(Engine {
            db,
            dir,
            commit: Instrumented::new("commit mutex", binlog),
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
}

// A server moves each connection to its client's thread and shares the engine between them.
const _: () = {
    const fn send<T: Send>() {}
    const fn shared<T: Send + Sync>() {}
    send::<Connection>();
    shared::<Engine>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use turnstile::{Gate, GateConfig, Policy};

    pub(crate) fn temp_engine(tag: &str) -> (Arc<Engine>, PathBuf) {
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

    pub(crate) fn gate(tickets: u32) -> Gate {
        Gate::new(GateConfig::new(Policy::Classic).limit(2).tickets(tickets)).unwrap()
    }

    pub(crate) fn open_at(dir: &Path, fsync_ms: u64) -> Arc<Engine> {
        Engine::open(&EngineConfig {
            data_dir: dir.to_path_buf(),
            fsync_delay: Duration::from_millis(fsync_ms),
            row_work: Duration::ZERO,
        })
        .unwrap()
    }

    /// Polls `cond` every millisecond for up to 10 s (a bound, not a timing).
    pub(crate) fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// What `Engine::recovery` reports after an open.
    pub(crate) fn recovered(committed: u64, rolled_back: u64, truncated_bytes: u64) -> Recovery {
        Recovery {
            committed,
            rolled_back,
            truncated_bytes,
        }
    }

    pub(crate) fn row(id: u32, k: u32) -> Row {
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

    /// Commits one transaction that inserts `id` with `fp` set, then drops the engine as a
    /// crash would leave it.
    pub(crate) fn crash_at(dir: &Path, fp: Failpoint, id: u32, mode: CommitMode) -> Result<()> {
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
}
