//! Commit: two-phase, with the binlog as the coordinator. A transaction is (1) prepared in one
//! durable redb transaction, (2) appended to the binlog and fsync'd, (3) applied to the tables,
//! not durably (recovery redoes it from the prepared record). [`CommitMode`] picks the serial
//! path (all three steps under the commit mutex) or group commit (one leader prepares, appends
//! and fsyncs for every session queued). A commit is acknowledged only once its binlog record
//! is durable. Any failure or panic past a prepare stops the engine from committing, because
//! only recovery can tell whether that transaction committed; while stopped, nothing is
//! appended or acknowledged and DDL is refused, so the binlog stays recoverable.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use redb::{Durability, ReadableTable, WriteTransaction};
use turnstile::{Call, StepOutReason};

use crate::binlog::{self, BinlogChange, Op};
use crate::error::{EngineError, Result};
use crate::schema::{self, index_key, Row};
use crate::txn::{Change, Txn};
use crate::{index_table, rows_table, Engine, BINLOG_FILE, PREPARED};

/// How a connection commits: the gate slot while waiting for the commit, and whether commits
/// share fsyncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CommitMode {
    /// One global commit mutex held across the fsync, waited for while keeping the gate slot
    /// (MySQL before 5.6's binlog group commit: seed 004's pileup).
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

/// The binary log: appended under the commit mutex.
pub struct Binlog {
    pub(crate) file: File,
    pub(crate) path: PathBuf,
    /// Bytes of whole records in the file.
    pub(crate) len: u64,
    /// Records written since the engine was opened.
    pub records: u64,
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

/// A transaction on its way to commit: its XID and changes (table, primary key, change).
pub(crate) struct Pending {
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

    pub(crate) fn decode(xid: u64, mut v: &[u8]) -> Result<Pending> {
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

/// The group commit queue and its two stages: one leader gathers and prepares the next group
/// while at most one group appends, fsyncs and applies.
#[derive(Default)]
pub(crate) struct GroupState {
    /// Transactions waiting for a leader, with their tickets.
    queue: Vec<(u64, Pending)>,
    /// Tickets below this were taken by a leader; a session leads only while its own
    /// transaction is still queued, so a member of a group never leads a group it is not in.
    taken_below: u64,
    /// A leader is gathering and preparing a group.
    leading: bool,
    /// Transactions the gathering leader took and has not handed to the sync stage yet.
    gathered: usize,
    /// A group is appending, fsyncing and applying; the next one waits, so groups reach the
    /// binlog, its fsync and the tables in the order they formed.
    syncing: bool,
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

/// How long a leader holding `n` transactions waits for one more that is still expected, from
/// the last arrival, which came `waited` after the sync stage was free: a group of `n` synced
/// then commits at `n ÷ (fsync + waited)`, and one more arriving `d` later raises that rate
/// only while `d < (fsync + waited) ÷ n`. The wait shrinks as the group grows; with a fast
/// disk it is a few microseconds.
fn patience(fsync: Duration, waited: Duration, n: usize) -> Duration {
    (fsync + waited) / n.max(1) as u32
}

/// Applies the write sets of `batch` to the tables (row and index) and deletes their prepared
/// records, inside `w`. Idempotent: each change is applied to whatever the row is now.
pub(crate) fn apply_in(w: &WriteTransaction, batch: &[Pending]) -> Result<()> {
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

/// Commits `txn` inside `call` by `mode`, then releases its locks; `Ok` means durable.
pub(crate) fn commit_in_call(
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

impl Engine {
    /// Sets a test failpoint in the commit path.
    #[doc(hidden)]
    pub fn set_failpoint(&self, fp: Failpoint) {
        *self.failpoint.lock().unwrap_or_else(|p| p.into_inner()) = fp;
    }

    /// Transactions queued for group commit or gathered by the next group's leader, waiting
    /// for their fsync to start (for tests).
    #[doc(hidden)]
    pub fn group_queued(&self) -> usize {
        let g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        g.queue.len() + g.gathered
    }

    pub(crate) fn check_running(&self) -> Result<()> {
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
    pub(crate) fn stop(&self, what: &str, e: impl std::fmt::Display) -> EngineError {
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

    /// [`CommitMode::GroupCommit`]: queue `p`; a session finding no leader at work while its
    /// transaction is still queued leads the next group (MySQL 5.6's flush and sync stages,
    /// MariaDB's binlog group commit).
    ///
    /// The leader prepares what is queued, and each arrival as it comes, while the previous
    /// group's fsync runs; as soon as that fsync and apply end, it appends, hands the
    /// leadership on, and fsyncs its group, so the group after forms during this fsync. Once
    /// the sync stage is free, it waits for the connections of the last two groups only while
    /// each next one arrives soon enough to raise commits per second ([`patience`]). Without
    /// that wait the groups alternate: with clients that commit again as soon as they are
    /// answered, each fsync covers those answered by the fsync before the previous one, about
    /// half of them. (MariaDB's `binlog_commit_wait_count`/`binlog_commit_wait_usec` and MySQL
    /// 5.7's `binlog_group_commit_sync_delay` set that wait by hand; here it follows the fsync
    /// time measured and the arrivals seen.)
    fn commit_group(&self, p: Pending) -> Result<()> {
        let mut g = self.group.lock().unwrap_or_else(|p| p.into_inner());
        let ticket = g.next_ticket;
        g.next_ticket += 1;
        g.queue.push((ticket, p));
        self.group_arrived.notify_all();
        loop {
            if let Some(r) = g.done.remove(&ticket) {
                return r.map_err(EngineError::Storage);
            }
            if !g.leading && ticket >= g.taken_below {
                g.leading = true;
                g = self.lead_group(g);
                continue;
            }
            g = self.group_done.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The leader's work: gather and prepare a group (its own transaction first), take the
    /// sync stage when it is free and the wait is over, hand the leadership on, then append
    /// under the commit mutex, fsync outside it and apply; then hand out the results.
    fn lead_group<'g>(
        &'g self,
        mut g: std::sync::MutexGuard<'g, GroupState>,
    ) -> std::sync::MutexGuard<'g, GroupState> {
        let expected = g.expected();
        let fsync = Duration::from_nanos(self.last_fsync_ns.load(Ordering::Relaxed));
        let mut prepared: Vec<(u64, Pending)> = Vec::new();
        let mut failed: Vec<(u64, String)> = Vec::new();
        let mut free_since: Option<Instant> = None;
        let mut last_arrival = Instant::now();
        loop {
            let batch = std::mem::take(&mut g.queue);
            g.taken_below = g.next_ticket;
            if !batch.is_empty() {
                g.gathered += batch.len();
                drop(g);
                let (tickets, pendings): (Vec<u64>, Vec<Pending>) = batch.into_iter().unzip();
                match self.no_unwind("the group's prepare", || self.prepare(&pendings)) {
                    Ok(()) => prepared.extend(tickets.into_iter().zip(pendings)),
                    Err(e) => failed.extend(tickets.into_iter().map(|t| (t, e.to_string()))),
                }
                last_arrival = Instant::now();
                g = self.group.lock().unwrap_or_else(|p| p.into_inner());
                continue;
            }
            if g.syncing {
                // Gathering while the previous group's fsync runs costs nothing.
                g = self
                    .group_arrived
                    .wait(g)
                    .unwrap_or_else(|p| p.into_inner());
                continue;
            }
            let now = Instant::now();
            let free = *free_since.get_or_insert(now);
            let n = prepared.len() + failed.len();
            if n >= expected {
                break;
            }
            let since = last_arrival.max(free);
            let deadline = since + patience(fsync, since - free, n);
            if now >= deadline {
                break;
            }
            g = self
                .group_arrived
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        g.syncing = true;
        g.leading = false;
        g.gathered = 0;
        let conns: Vec<u64> = prepared.iter().map(|(_, p)| p.conn).collect();
        g.recent.swap(0, 1);
        g.recent[1] = conns;
        // A session still queued may start gathering the next group now.
        self.group_done.notify_all();
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
        g.syncing = false;
        for t in tickets {
            g.done.insert(t, r.clone());
        }
        for (t, e) in failed {
            g.done.insert(t, Err(e));
        }
        self.group_done.notify_all();
        // The next group's leader waits for the sync stage.
        self.group_arrived.notify_all();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{crash_at, gate, open_at, recovered, row, temp_engine, wait_until};
    use crate::{Connection, EngineConfig};
    use turnstile::{Gate, GateConfig, Policy};

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
    fn a_leader_waits_for_one_more_commit_only_while_it_would_raise_commits_per_second() {
        let ms = Duration::from_millis;
        // n commits after waiting w: n / (fsync + w); one more within (fsync + w) / n does better.
        assert_eq!(patience(ms(60), ms(0), 1), ms(60));
        assert_eq!(patience(ms(60), ms(0), 15), ms(4));
        assert_eq!(patience(ms(60), ms(30), 15), ms(6));
        for n in 1..32u32 {
            let p = patience(ms(60), ms(10), n as usize);
            let now = n as f64 / 70.0;
            let one_more_just_in_time = (n + 1) as f64 / (70.0 + p.as_secs_f64() * 1e3);
            assert!((one_more_just_in_time - now).abs() < 1e-6, "n = {n}");
        }
        // Without a measured fsync the leader does not wait.
        assert_eq!(patience(Duration::ZERO, Duration::ZERO, 3), Duration::ZERO);
    }

    #[test]
    fn a_leader_expecting_a_connection_that_never_commits_again_still_commits() {
        let (e, dir) = temp_engine("group-missing");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        // Eight connections commit together, so the next leader expects eight ...
        let g = gate(500);
        let all: Vec<_> = (0..8u32)
            .map(|i| {
                let (e, g) = (e.clone(), g.clone());
                std::thread::spawn(move || {
                    let mut c = Connection::new(e, &g, format!("c{i}"));
                    c.insert_row("t", &row(100 + i, i)).unwrap();
                })
            })
            .collect();
        for h in all {
            h.join().unwrap();
        }
        // ... and only one comes back, twice: each of its commits ends.
        let one = {
            let e = e.clone();
            std::thread::spawn(move || {
                let mut c = Connection::new(e, &g, "alone");
                c.insert_row("t", &row(200, 1)).unwrap();
                c.insert_row("t", &row(201, 1)).unwrap();
            })
        };
        wait_until("the lone commits", || one.is_finished());
        one.join().unwrap();
        assert_eq!(e.count_direct("t").unwrap(), 20);
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
