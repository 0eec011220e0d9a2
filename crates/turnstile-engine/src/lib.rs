//! A small embedded storage engine behind the turnstile gate, shaped like the interface between
//! MySQL's server layer and InnoDB, so the seed experiments can be reproduced on real data.
//!
//! * Storage: [redb](https://docs.rs/redb) — B-trees with MVCC read transactions and fsync'd
//!   commits. Tables have the sysbench schema ([`schema`]) and a secondary index on `k`.
//! * Handler API ([`Connection`]): every row fetched by a cursor is one enter/exit of the gate,
//!   so tickets are spent per row as in InnoDB; each statement ends with a force-exit.
//! * Binlog ([`Engine::commit`]): every autocommit insert appends to a log file and fsyncs it
//!   while holding one global commit mutex (MySQL with the binlog on and no group commit).
//!   [`CommitMode::HoldSlot`] keeps the gate slot while waiting for that mutex (the bug behind
//!   seed 004); [`CommitMode::ReleaseSlot`] steps out of the gate first (the fix).
//! * Rows sent to the client ([`RowSend`], per connection): MySQL 5.0/5.1's server layer
//!   force-exits the gate before it sends each row (`select_send::send_data` →
//!   `ha_release_temporary_latches` → `srv_conc_force_exit_innodb`), so every row sent costs the
//!   next fetch a fresh admission ([`RowSend::ForceExit`]); 5.5 and later send the row keeping
//!   the slot and the tickets ([`RowSend::Keep`], the default). Which rows are sent is part of
//!   the API: [`Connection::scan_sent`] and [`Connection::point_select`] send their rows;
//!   [`Connection::scan`] hands rows to the server (an aggregate, a sort buffer), which sends
//!   its result after the statement ended.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, Durability, ReadableTableMetadata, TableDefinition};
use turnstile::mutex::Instrumented;
use turnstile::{Gate, GateError, Session, StepOutReason};

pub mod schema;

use schema::{index_key, Row};

const META: TableDefinition<&str, u64> = TableDefinition::new("turnstile_meta");

fn rows_table(name: &str) -> TableDefinition<'_, u32, &'static [u8]> {
    TableDefinition::new(name)
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
    /// A caller error: a missing table, a bad size.
    BadInput(String),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Storage(m) => write!(f, "storage error: {m}"),
            EngineError::Io { what, err } => write!(f, "{what}: {err}"),
            EngineError::Gate(e) => write!(f, "gate: {e}"),
            EngineError::BadInput(m) => f.write_str(m),
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

/// Result of engine calls.
pub type Result<T> = std::result::Result<T, EngineError>;

/// What an inserting session does with its gate slot while it waits for the commit mutex.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CommitMode {
    /// Keep the slot (MySQL before the fix for bug 46459: seed 004's pileup).
    HoldSlot,
    /// Step out of the gate before waiting for the commit mutex (the fix).
    ReleaseSlot,
}

impl CommitMode {
    /// The name used in reports: `hold-slot` / `release-slot`.
    pub fn name(self) -> &'static str {
        match self {
            CommitMode::HoldSlot => "hold-slot",
            CommitMode::ReleaseSlot => "release-slot",
        }
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

/// The binary log: appended and fsync'd under the commit mutex.
pub struct Binlog {
    file: File,
    path: PathBuf,
    fsync_delay: Duration,
    /// Records written.
    pub records: u64,
}

/// Engine-wide counters (read by monitors and the reproductions).
#[derive(Debug, Default)]
pub struct EngineStats {
    /// Commits completed.
    pub commits: AtomicU64,
    /// Sessions waiting for (or holding) the commit mutex right now while counted inside the
    /// gate — seed 004's "31 threads waiting on the commit mutex".
    pub commit_waiting_inside: AtomicU32,
    /// Sessions waiting for (or holding) the commit mutex right now, inside the gate or not.
    pub commit_waiting: AtomicU32,
    /// Total time spent in binlog fsyncs, ns.
    pub fsync_ns: AtomicU64,
    /// Rows fetched by cursors.
    pub rows_read: AtomicU64,
}

/// The engine: one redb database file and one binlog in a data directory.
pub struct Engine {
    db: Database,
    dir: PathBuf,
    commit: Instrumented<Binlog>,
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
}

impl Engine {
    /// Opens (or creates) the engine in `config.data_dir`.
    pub fn open(config: &EngineConfig) -> Result<Arc<Engine>> {
        let dir = config.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|err| EngineError::Io {
            what: format!("cannot create data directory {}", dir.display()),
            err,
        })?;
        let db = Database::create(dir.join("turnstile.redb"))?;
        let path = dir.join("binlog.log");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|err| EngineError::Io {
                what: format!("cannot open binlog {}", path.display()),
                err,
            })?;
        Ok(Arc::new(Engine {
            db,
            dir,
            commit: Instrumented::new(
                "commit mutex",
                Binlog {
                    file,
                    path,
                    fsync_delay: config.fsync_delay,
                    records: 0,
                },
            ),
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

    /// Rows the table `name` was loaded with, if it exists.
    pub fn loaded_rows(&self, name: &str) -> Result<Option<u64>> {
        let r = self.db.begin_read()?;
        let meta = match r.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(meta.get(name)?.map(|v| v.value()))
    }

    /// Makes sure table `name` holds exactly rows 1..=`rows` of the sysbench generator,
    /// building it if it is missing or of another size. `progress(done, total)` is called as
    /// rows are written. Returns whether it (re)built the table.
    pub fn ensure_table(
        &self,
        name: &str,
        rows: u32,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<bool> {
        if rows == 0 {
            return Err(EngineError::BadInput(
                "a table needs at least one row".into(),
            ));
        }
        if self.loaded_rows(name)? == Some(rows as u64) {
            return Ok(false);
        }
        let index = format!("{name}_k");
        {
            let mut w = self.db.begin_write()?;
            w.set_durability(Durability::None);
            w.delete_table(rows_table(name))?;
            w.delete_table(TableDefinition::<u64, ()>::new(&index))?;
            w.open_table(META)?.remove(name)?;
            w.commit()?;
        }
        const BATCH: u32 = 50_000;
        let mut id = 1u32;
        while id <= rows {
            let end = (id + BATCH - 1).min(rows);
            let mut w = self.db.begin_write()?;
            w.set_durability(Durability::None);
            {
                let mut t = w.open_table(rows_table(name))?;
                let mut ix = w.open_table(TableDefinition::<u64, ()>::new(&index))?;
                for i in id..=end {
                    let row = Row::generate(i, rows);
                    t.insert(i, row.encode().as_slice())?;
                    ix.insert(index_key(row.k, i), ())?;
                }
            }
            w.commit()?;
            progress(end as u64, rows as u64);
            id = end + 1;
        }
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        w.open_table(META)?.insert(name, rows as u64)?;
        w.commit()?;
        Ok(true)
    }

    /// Scans every row of `name` exactly as [`Connection::count`] does, but without the gate:
    /// the baseline that measures what the gate adds to a scan.
    pub fn scan_direct(&self, name: &str) -> Result<u64> {
        let r = self.db.begin_read()?;
        let t = r.open_table(rows_table(name))?;
        let mut n = 0u64;
        for item in t.range(0..=u32::MAX)? {
            let (k, v) = item?;
            std::hint::black_box(Row::decode(k.value(), v.value()));
            n += 1;
        }
        Ok(n)
    }

    /// Deletes every row of `name` with an id above `rows` (and its index entry): puts a table
    /// back to its loaded size after a run that inserted into it.
    pub fn truncate_above(&self, name: &str, rows: u32) -> Result<u64> {
        let extra: Vec<(u32, u32)> = {
            let r = self.db.begin_read()?;
            let t = r.open_table(rows_table(name))?;
            let mut v = Vec::new();
            for item in t.range(rows + 1..=u32::MAX)? {
                let (k, val) = item?;
                v.push((k.value(), Row::decode(k.value(), val.value()).k));
            }
            v
        };
        if extra.is_empty() {
            return Ok(0);
        }
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        {
            let index = format!("{name}_k");
            let mut t = w.open_table(rows_table(name))?;
            let mut ix = w.open_table(TableDefinition::<u64, ()>::new(&index))?;
            for &(id, k) in &extra {
                t.remove(id)?;
                ix.remove(index_key(k, id))?;
            }
        }
        w.commit()?;
        Ok(extra.len() as u64)
    }

    /// Counts the rows of `name` directly, without the gate (for checks).
    pub fn count_direct(&self, name: &str) -> Result<u64> {
        let r = self.db.begin_read()?;
        Ok(r.open_table(rows_table(name))?.len()?)
    }

    /// Whether row `id` exists in `name` (for checks).
    pub fn contains(&self, name: &str, id: u32) -> Result<bool> {
        let r = self.db.begin_read()?;
        Ok(r.open_table(rows_table(name))?.get(id)?.is_some())
    }

    /// Commits one autocommit insert: under the commit mutex, writes the row and its index
    /// entry in a durable redb transaction, then appends to the binlog and fsyncs it.
    pub fn commit(&self, name: &str, row: &Row) -> Result<()> {
        let mut binlog = self.commit.lock();
        let mut w = self.db.begin_write()?;
        w.set_durability(Durability::Immediate);
        {
            let index = format!("{name}_k");
            w.open_table(rows_table(name))?
                .insert(row.id, row.encode().as_slice())?;
            w.open_table(TableDefinition::<u64, ()>::new(&index))?
                .insert(index_key(row.k, row.id), ())?;
        }
        w.commit()?;
        let start = Instant::now();
        let b = &mut *binlog;
        writeln!(b.file, "insert {name} {} {}", row.id, row.k).map_err(|err| EngineError::Io {
            what: format!("cannot append to {}", b.path.display()),
            err,
        })?;
        b.file.sync_data().map_err(|err| EngineError::Io {
            what: format!("cannot fsync {}", b.path.display()),
            err,
        })?;
        if !b.fsync_delay.is_zero() {
            std::thread::sleep(b.fsync_delay);
        }
        b.records += 1;
        self.stats
            .fsync_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// One client connection: a gate session plus the handler calls, and the server layer's
/// [`RowSend`] setting for the rows it sends to the client.
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
    session: Session,
    row_send: RowSend,
}

impl Connection {
    /// A connection to `engine` through `gate` (one session of it), sending rows with
    /// [`RowSend::Keep`] (see [`Connection::set_row_send`]).
    pub fn new(engine: Arc<Engine>, gate: &Gate, label: impl Into<String>) -> Connection {
        Connection {
            engine,
            session: gate.named_session(label),
            row_send: RowSend::default(),
        }
    }

    /// The gate session (settings, canceler).
    pub fn session(&mut self) -> &mut Session {
        &mut self.session
    }

    /// Sets what the server layer does with the slot when it sends a row to the client.
    pub fn set_row_send(&mut self, row_send: RowSend) {
        self.row_send = row_send;
    }

    /// The row-send setting.
    pub fn row_send(&self) -> RowSend {
        self.row_send
    }

    /// Scans primary keys `lo..=hi` of `table` in one statement, one gate enter/exit per row
    /// fetched (the cursor's `next` runs inside the call), handing each row to `f` in the
    /// server layer — an aggregate or a sort buffer, **not** a send to the client: the slot and
    /// tickets are kept whatever the [`RowSend`] setting. Returns the rows fetched. A scan of
    /// n rows makes n + 1 enters (the last finds the end).
    pub fn scan(&mut self, table: &str, lo: u32, hi: u32, f: impl FnMut(&Row)) -> Result<u64> {
        self.scan_inner(table, lo, hi, false, f)
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
        send: impl FnMut(&Row),
    ) -> Result<u64> {
        self.scan_inner(table, lo, hi, true, send)
    }

    fn scan_inner(
        &mut self,
        table: &str,
        lo: u32,
        hi: u32,
        sent: bool,
        mut f: impl FnMut(&Row),
    ) -> Result<u64> {
        let engine = self.engine.clone();
        let force_exit = sent && self.row_send == RowSend::ForceExit;
        let r = engine.db.begin_read()?;
        let t = r.open_table(rows_table(table))?;
        let mut it = t.range(lo..=hi)?;
        let mut stmt = self.session.begin();
        let mut n = 0u64;
        loop {
            let call = stmt.enter()?;
            let next = it.next();
            drop(call);
            match next {
                None => break,
                Some(item) => {
                    let (k, v) = item?;
                    let row = Row::decode(k.value(), v.value());
                    if force_exit && stmt.is_inside() {
                        // `srv_conc_force_exit_innodb` does nothing for a thread not inside
                        // (its last ticket already took it out).
                        stmt.step_out(StepOutReason::SendingResults, || {
                            f(std::hint::black_box(&row))
                        });
                    } else {
                        f(std::hint::black_box(&row));
                    }
                    n += 1;
                }
            }
        }
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
    pub fn point_select(&mut self, table: &str, id: u32) -> Result<Option<Row>> {
        let engine = self.engine.clone();
        let r = engine.db.begin_read()?;
        let t = r.open_table(rows_table(table))?;
        let mut stmt = self.session.begin();
        let call = stmt.enter()?;
        let row = t.get(id)?.map(|v| Row::decode(id, v.value()));
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

    /// An autocommit `INSERT`: one call into the engine, then the commit through the binlog's
    /// commit mutex, holding or releasing the gate slot while waiting for it. An error means
    /// the row was not committed: with the slot released, the commit's outcome is returned as
    /// it is, and the statement ends without asking the gate for its slot back.
    pub fn insert(&mut self, table: &str, row: &Row, mode: CommitMode) -> Result<()> {
        let engine = self.engine.clone();
        let stats = &engine.stats;
        let mut stmt = self.session.begin();
        let mut call = stmt.enter()?;
        match mode {
            CommitMode::HoldSlot => {
                stats.commit_waiting_inside.fetch_add(1, Ordering::Relaxed);
                stats.commit_waiting.fetch_add(1, Ordering::Relaxed);
                let r = engine.commit(table, row);
                stats.commit_waiting.fetch_sub(1, Ordering::Relaxed);
                stats.commit_waiting_inside.fetch_sub(1, Ordering::Relaxed);
                r?;
            }
            CommitMode::ReleaseSlot => {
                call.step_out(StepOutReason::CommitWait, || {
                    stats.commit_waiting.fetch_add(1, Ordering::Relaxed);
                    let r = engine.commit(table, row);
                    stats.commit_waiting.fetch_sub(1, Ordering::Relaxed);
                    r
                })?;
            }
        }
        drop(call);
        drop(stmt);
        Ok(())
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
        })
        .unwrap();
        assert!(e.contains("t", 11).unwrap() && e.contains("t", 12).unwrap());
        assert_eq!(e.count_direct("t").unwrap(), 12);
        let log = std::fs::read_to_string(dir.join("binlog.log")).unwrap();
        assert_eq!(log.lines().count(), 2);
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
}
