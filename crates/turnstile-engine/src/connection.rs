//! Connections: one gate session each, and the handler calls (statements) that run through it.
//! Every row a cursor fetches and every row written is one enter/exit of the gate, and each
//! statement ends with a force-exit, so tickets are spent per row as in InnoDB. A row lock wait
//! and a commit wait step out of the gate (a commit in [`CommitMode::HoldSlot`] keeps its slot);
//! [`RowSend`] decides whether sending a row to the client keeps the slot. A failed statement
//! undoes only itself, except a deadlock, which rolls back the whole transaction; dropping a
//! connection rolls its open transaction back.

use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use turnstile::{Call, Gate, Session, Statement, StepOutReason};

use crate::binlog::Op;
use crate::commit::{commit_in_call, CommitMode};
use crate::error::{EngineError, Result};
use crate::locks::{Key, Refused};
use crate::schema::{self, Row};
use crate::txn::{Change, Merged, Savepoint, Txn};
use crate::{open_rows, Engine};

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

/// One client connection: a gate session plus the handler calls, the server layer's
/// [`RowSend`] setting for the rows it sends to the client, its [`CommitMode`], and its open
/// transaction (dropping the connection rolls it back, as a client disconnect does).
///
/// Which statements send per row (sysbench's read-only transaction):
///
/// | statement | handler call | rows sent per row fetched? |
/// |---|---|---|
/// | `SELECT c … WHERE id=?` | [`Connection::point_select`] | its row, after the statement ended |
/// | `SELECT c … BETWEEN ? AND ?` | [`Connection::scan_sent`] | yes: one send per row, inside the
/// statement | | `SELECT SUM(k) … BETWEEN` | [`Connection::scan`] | no: one aggregate row after the
/// statement | | `… ORDER BY c`, `DISTINCT c … ORDER BY c` | [`Connection::range_sorted_by_c`] |
/// no: rows go to the sort, sent after the statement |
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
    /// Spends [`EngineConfig::row_work`](crate::EngineConfig::row_work) of CPU on the calling
    /// thread (a busy loop on the monotonic clock), the emulated cost of one row fetched, and
    /// counts it in [`EngineStats::row_work_ns`](crate::EngineStats::row_work_ns). Returns at once
    /// when no row work is set.
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
    use crate::tests::{gate, open_at, row, temp_engine, wait_until};
    use crate::EngineConfig;
    use std::time::Duration;
    use turnstile::{GateConfig, Policy};

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
}
