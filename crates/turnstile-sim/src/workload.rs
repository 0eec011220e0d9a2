//! Simulated sessions: the same statements the real reproductions run, as [`Op`] streams.

use serde::{Deserialize, Serialize};

use crate::engine::{Budget, Op, Program};
use crate::rng::Rng;

/// What the server layer does with the gate when it sends a row to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RowSend {
    /// MySQL 5.0/5.1: `select_send::send_data` → `ha_release_temporary_latches` →
    /// `srv_conc_force_exit_innodb`: every row sent force-exits the gate, so the next row
    /// fetched needs a fresh admission.
    #[default]
    ForceExit,
    /// Later versions: the row is sent while the session keeps its slot and tickets.
    Keep,
}

impl RowSend {
    /// `force-exit` or `keep`.
    pub fn name(self) -> &'static str {
        match self {
            RowSend::ForceExit => "force-exit",
            RowSend::Keep => "keep",
        }
    }
}

/// A statement that fetches `rows` rows, one gate call per row, `row_ns` of CPU each, then ends.
/// Rows covered by tickets run as one CPU burst ([`Op::Spend`]): exact, since a ticket
/// re-entry touches nothing shared. A statement that *sends* each row under
/// [`RowSend::ForceExit`] force-exits after every row.
#[derive(Debug, Clone)]
struct RowStatement {
    left: u64,
    row_ns: u64,
    phase: u8,
    pending_spend: u32,
    exit_per_row: bool,
}

impl RowStatement {
    fn new(rows: u64, row_ns: u64) -> Self {
        RowStatement {
            left: rows,
            row_ns,
            phase: 0,
            pending_spend: 0,
            exit_per_row: false,
        }
    }

    /// A statement whose rows are sent to the client one by one, under `send`.
    fn sending(rows: u64, row_ns: u64, send: RowSend) -> Self {
        RowStatement {
            exit_per_row: send == RowSend::ForceExit,
            ..RowStatement::new(rows, row_ns)
        }
    }

    /// The next op, or `None` when the statement has ended.
    fn next(&mut self, budget: Budget) -> Option<Op> {
        loop {
            match self.phase {
                0 if self.left == 0 => {
                    self.phase = 4;
                    return Some(Op::EndStatement);
                }
                0 => {
                    self.phase = 1;
                    return Some(Op::Enter);
                }
                1 => {
                    // Inside with `tickets` left: this call's row plus up to `tickets` more
                    // (none when each row is sent and force-exits).
                    let extra = if self.exit_per_row {
                        0
                    } else {
                        (budget.further_calls(self.row_ns) as u64).min(self.left - 1)
                    };
                    self.left -= 1 + extra;
                    self.phase = 2;
                    self.pending_spend = extra as u32;
                    return Some(Op::Cpu((1 + extra) * self.row_ns));
                }
                2 => {
                    self.phase = 3;
                    if self.pending_spend > 0 {
                        return Some(Op::Spend(self.pending_spend));
                    }
                }
                3 => {
                    self.phase = if self.exit_per_row && self.left > 0 {
                        5
                    } else {
                        0
                    };
                    return Some(Op::Exit);
                }
                5 => {
                    // The row is sent: a force exit before the next fetch (5.0's server).
                    self.phase = 0;
                    return Some(Op::SendRow);
                }
                _ => return None,
            }
        }
    }
}

/// A full scan (`SELECT COUNT(*)`), once.
pub struct Scan {
    stmt: RowStatement,
    begun: bool,
    done: bool,
}

impl Scan {
    /// A scan of `rows` rows at `row_ns` each.
    pub fn new(rows: u64, row_ns: u64) -> Scan {
        Scan {
            stmt: RowStatement::new(rows, row_ns),
            begun: false,
            done: false,
        }
    }
}

impl Program for Scan {
    fn next(&mut self, _now: u64, budget: Budget, _rng: &mut Rng) -> Op {
        if !self.begun {
            self.begun = true;
            return Op::Begin;
        }
        if let Some(op) = self.stmt.next(budget) {
            return op;
        }
        if !self.done {
            self.done = true;
            return Op::Done(0);
        }
        Op::Halt
    }
}

/// Costs of the OLTP read-only transaction's parts.
#[derive(Debug, Clone, Copy)]
pub struct OltpCosts {
    /// CPU per point select, ns.
    pub point_ns: u64,
    /// CPU per range row, ns.
    pub row_ns: u64,
    /// Rows per range.
    pub range: u64,
    /// CPU of the sort after an ORDER BY / DISTINCT range, ns (outside the gate).
    pub sort_ns: u64,
}

/// sysbench's read-only transaction in a closed loop: `BEGIN`, 10 point selects, a simple
/// range, a SUM range, an ORDER BY range and a DISTINCT range (the last two sort outside the
/// gate), `COMMIT`. Rows sent to the client one by one: the simple range's (the point
/// selects' single rows are sent as their statements end). The SUM sends one row after its
/// cursor ends; ORDER BY and DISTINCT read every row into the sort first and send after the
/// statement.
pub struct Oltp {
    c: OltpCosts,
    send: RowSend,
    step: u32,
    stmt: Option<RowStatement>,
}

impl Oltp {
    /// A client whose server layer treats rows sent as `send` says.
    pub fn new(c: OltpCosts, send: RowSend) -> Oltp {
        Oltp {
            c,
            send,
            step: 0,
            stmt: None,
        }
    }
}

impl Program for Oltp {
    fn next(&mut self, _now: u64, budget: Budget, _rng: &mut Rng) -> Op {
        loop {
            if let Some(s) = &mut self.stmt {
                if let Some(op) = s.next(budget) {
                    return op;
                }
                self.stmt = None;
            }
            let step = self.step;
            self.step = (self.step + 1) % 20;
            match step {
                0 => return Op::Begin,
                // sysbench wraps the statements in BEGIN ... COMMIT.
                1 => return Op::Txn(true),
                2..=11 => self.stmt = Some(RowStatement::new(1, self.c.point_ns)),
                12 => {
                    self.stmt = Some(RowStatement::sending(
                        self.c.range,
                        self.c.row_ns,
                        self.send,
                    ))
                }
                13 | 14 => self.stmt = Some(RowStatement::new(self.c.range, self.c.row_ns)),
                15 => return Op::Cpu(self.c.sort_ns),
                16 => self.stmt = Some(RowStatement::new(self.c.range, self.c.row_ns)),
                17 => return Op::Cpu(self.c.sort_ns),
                18 => return Op::Txn(false),
                _ => return Op::Done(0),
            }
        }
    }
}

/// A fixed cycle of operations, repeated forever.
pub struct Cycle {
    ops: Vec<Op>,
    i: usize,
}

impl Program for Cycle {
    fn next(&mut self, _now: u64, _budget: Budget, _rng: &mut Rng) -> Op {
        let op = self.ops[self.i];
        self.i = (self.i + 1) % self.ops.len();
        op
    }
}

/// The pileup's autocommit inserter: one call, then the commit through mutex 0 and an fsync
/// on the disk, keeping the gate slot across the commit-mutex wait (`hold_slot`, the seed-004
/// bug) or ending the statement first (the fix).
pub fn inserter(insert_ns: u64, fsync_ns: u64, hold_slot: bool) -> Cycle {
    let commit = [Op::Lock(0), Op::Disk(fsync_ns), Op::Unlock(0)];
    let mut ops = vec![Op::Begin, Op::Enter, Op::Cpu(insert_ns)];
    if hold_slot {
        ops.extend(commit);
        ops.push(Op::EndStatement);
    } else {
        ops.push(Op::EndStatement);
        ops.extend(commit);
    }
    ops.push(Op::Done(0));
    Cycle { ops, i: 0 }
}

/// The pileup's query session: point selects in a loop.
pub fn querier(query_ns: u64) -> Cycle {
    Cycle {
        ops: vec![
            Op::Begin,
            Op::Enter,
            Op::Cpu(query_ns),
            Op::EndStatement,
            Op::Done(1),
        ],
        i: 0,
    }
}

/// The closed queueing network of the MVA check: think (delay), then CPU, then disk, each
/// exponential, with no gate.
pub struct CentralServer {
    /// Mean think time, ns.
    pub think_ns: f64,
    /// Mean CPU demand, ns.
    pub cpu_ns: f64,
    /// Mean disk demand, ns.
    pub disk_ns: f64,
    step: u32,
}

impl CentralServer {
    /// A customer.
    pub fn new(think_ns: f64, cpu_ns: f64, disk_ns: f64) -> CentralServer {
        CentralServer {
            think_ns,
            cpu_ns,
            disk_ns,
            step: 0,
        }
    }
}

impl Program for CentralServer {
    fn next(&mut self, _now: u64, _budget: Budget, rng: &mut Rng) -> Op {
        let s = self.step;
        self.step = (self.step + 1) % 4;
        match s {
            0 => Op::Arrive(rng.exp(self.think_ns).max(1.0) as u64),
            1 => Op::Cpu(rng.exp(self.cpu_ns).max(1.0) as u64),
            2 => Op::Disk(rng.exp(self.disk_ns).max(1.0) as u64),
            _ => Op::Done(0),
        }
    }
}
