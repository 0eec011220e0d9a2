//! Simulated sessions: the same statements the real reproductions run, as [`Op`] streams.

use crate::engine::{Op, Program};
use crate::rng::Rng;

/// A statement that fetches `rows` rows, one gate call per row, `row_ns` of CPU each, then ends.
/// Rows covered by tickets run as one CPU burst ([`Op::Spend`]): exact, since a ticket
/// re-entry touches nothing shared.
#[derive(Debug, Clone)]
struct RowStatement {
    left: u64,
    row_ns: u64,
    phase: u8,
    pending_spend: u32,
}

impl RowStatement {
    fn new(rows: u64, row_ns: u64) -> Self {
        RowStatement {
            left: rows,
            row_ns,
            phase: 0,
            pending_spend: 0,
        }
    }

    /// The next op, or `None` when the statement has ended.
    fn next(&mut self, tickets: u32) -> Option<Op> {
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
                    // Inside with `tickets` left: this call's row plus up to `tickets` more.
                    let extra = (tickets as u64).min(self.left - 1);
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
                    self.phase = 0;
                    return Some(Op::Exit);
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
    fn next(&mut self, _now: u64, tickets: u32, _rng: &mut Rng) -> Op {
        if !self.begun {
            self.begun = true;
            return Op::Begin;
        }
        if let Some(op) = self.stmt.next(tickets) {
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

/// sysbench's read-only transaction in a closed loop: 10 point selects, a simple range, a
/// SUM range, an ORDER BY range and a DISTINCT range (the last two sort outside the gate).
pub struct Oltp {
    c: OltpCosts,
    step: u32,
    stmt: Option<RowStatement>,
}

impl Oltp {
    /// A client.
    pub fn new(c: OltpCosts) -> Oltp {
        Oltp {
            c,
            step: 0,
            stmt: None,
        }
    }
}

impl Program for Oltp {
    fn next(&mut self, _now: u64, tickets: u32, _rng: &mut Rng) -> Op {
        loop {
            if let Some(s) = &mut self.stmt {
                if let Some(op) = s.next(tickets) {
                    return op;
                }
                self.stmt = None;
            }
            let step = self.step;
            self.step = (self.step + 1) % 18;
            match step {
                0 => return Op::Begin,
                1..=10 => self.stmt = Some(RowStatement::new(1, self.c.point_ns)),
                11 | 12 => self.stmt = Some(RowStatement::new(self.c.range, self.c.row_ns)),
                13 => self.stmt = Some(RowStatement::new(self.c.range, self.c.row_ns)),
                14 => return Op::Cpu(self.c.sort_ns),
                15 => self.stmt = Some(RowStatement::new(self.c.range, self.c.row_ns)),
                16 => return Op::Cpu(self.c.sort_ns),
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
    fn next(&mut self, _now: u64, _tickets: u32, _rng: &mut Rng) -> Op {
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
    fn next(&mut self, _now: u64, _tickets: u32, rng: &mut Rng) -> Op {
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
