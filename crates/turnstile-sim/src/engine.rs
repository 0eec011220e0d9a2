//! The discrete-event core: cores with a run queue and time slices, a disk with a FIFO queue,
//! FIFO mutexes, sleeps, and the gate — driven through the library's own policy cores
//! (`turnstile::policy`), so the simulator runs the same decisions as the real gate.
//!
//! Threads run *programs* ([`Program`]) that yield one [`Op`] at a time. Operations that
//! cannot block (a ticket re-entry, an uncontended admission, an exit, an unlock) are applied
//! inline; CPU work, sleeps, queue waits, disk I/O and mutex waits become events in virtual
//! time. Every processed event is folded into a trace hash, so a seed fixes the run bit for
//! bit.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use turnstile::policy::{
    Admission, AdmittedBy, Attempt, Core, Hold, HoldKind, Step, Tickets, WaitId,
};
use turnstile::GateConfig;

use crate::machine::{Distribution, MachineConfig};
use crate::rng::Rng;

/// A thread's index.
pub type Tid = u32;

/// What a program asks for next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// CPU work, ns.
    Cpu(u64),
    /// Enter the gate for one call (spends a ticket or asks the policy).
    Enter,
    /// Exit after a call (keeps the slot while tickets remain).
    Exit,
    /// Statement end: force exit.
    EndStatement,
    /// A disk request of this service time, ns (FIFO queue, one request at a time).
    Disk(u64),
    /// Lock mutex `n` (FIFO hand-off).
    Lock(usize),
    /// Unlock mutex `n`.
    Unlock(usize),
    /// Sleep (think) for this long, ns, off the CPU.
    Think(u64),
    /// Think for this long, then arrive: `Begin` is marked the moment the thought ends, so time
    /// spent queueing for a core counts as response time, not think time.
    Arrive(u64),
    /// Spend this many tickets at once: that many re-entries, each of which touches nothing
    /// shared (lets a program run a chunk of rows as one CPU burst, exactly).
    Spend(u32),
    /// A unit of work of kind `k` completed (counted; response time measured from the
    /// previous `Begin` of this thread).
    Done(u8),
    /// Marks the start of a unit of work (for response times and Little's law).
    Begin,
    /// The thread is finished.
    Halt,
}

/// A thread's behaviour.
pub trait Program {
    /// The next operation. `now` is virtual time in ns; `tickets` the thread's tickets left.
    fn next(&mut self, now: u64, tickets: u32, rng: &mut Rng) -> Op;
}

/// Per-kind completion statistics.
#[derive(Debug, Clone, Default)]
pub struct KindStats {
    /// Completions.
    pub count: u64,
    /// Sum of response times, ns.
    pub response_sum: f64,
}

/// Gate counters over a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct GateCounts {
    /// Admissions (not ticket re-entries).
    pub admissions: u64,
    /// Ticket re-entries.
    pub reentries: u64,
    /// Sleeps.
    pub sleeps: u64,
    /// Queue waits.
    pub queue_waits: u64,
    /// Hand-offs.
    pub handoffs: u64,
    /// LIFO admissions.
    pub lifo: u64,
    /// Forced entries.
    pub forced: u64,
    /// Sum of hand-off latencies (signal to running), ns.
    pub handoff_latency_sum: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resume {
    /// Ask the program for the next op.
    Advance,
    /// Ask the gate again (after a sleep or yield).
    RetryEnter,
    /// Woken by a hand-off: take the slot now that it runs.
    FinishWait(WaitId),
    /// Continue CPU work already started.
    Cpu,
}

struct Thread {
    program: Box<dyn Program>,
    /// The library's ticket rule (the same code the real gate runs).
    tickets: Tickets,
    hold: Option<Hold>,
    attempt: Attempt,
    resume: Resume,
    cpu_left: u64,
    begun_at: u64,
    signalled_at: u64,
    halted: bool,
    /// Counted in "in system" for Little's law (between Begin and Done).
    in_system: bool,
    /// Mark `Begin` when the current sleep ends.
    begin_on_ready: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    /// A core finished a CPU slice for `tid`.
    SliceDone { core: u32, tid: Tid, ran: u64 },
    /// `tid` becomes runnable (wake-up latency or sleep done).
    Ready { tid: Tid },
    /// The core finished switching to `tid`.
    Switched { core: u32, tid: Tid },
    /// The disk finished the request at the head of its queue.
    DiskDone,
}

#[derive(PartialEq, Eq)]
struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl Ord for Entry {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        o.at.cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}

/// A simulation.
pub struct Sim {
    now: u64,
    seq: u64,
    queue: BinaryHeap<Entry>,
    rng: Rng,
    m: MachineConfig,
    gate: Core<Tid>,
    threads: Vec<Thread>,
    cores: Vec<Option<Tid>>,
    /// Time left in the running thread's slice, per core (reset at each dispatch).
    slice_left: Vec<u64>,
    runq: VecDeque<Tid>,
    disk: VecDeque<(Tid, u64)>,
    mutexes: Vec<(Option<Tid>, VecDeque<Tid>)>,
    /// Events processed.
    pub events: u64,
    /// FNV-1a over every processed event.
    pub trace_hash: u64,
    /// Completions per kind.
    pub kinds: Vec<KindStats>,
    /// Virtual time of each thread's last `Done`, ns.
    pub done_at: Vec<u64>,
    /// Gate counters.
    pub gate_counts: GateCounts,
    /// Time-integral of threads in system (between Begin and Done), ns·threads.
    in_system_area: f64,
    in_system: u64,
    last_change: u64,
    measure_from: u64,
    /// Most threads counted inside the gate at once.
    pub max_inside: u32,
    inside_now: u32,
    /// Sum over time of inside count (for the mean), ns·threads.
    inside_area: f64,
    inside_last: u64,
}

impl Sim {
    /// A simulation of `machine` with a gate configured by `gate`, seeded by `seed`.
    pub fn new(machine: MachineConfig, gate: GateConfig, seed: u64) -> Result<Sim, String> {
        machine.validate()?;
        gate.validate().map_err(|e| e.to_string())?;
        let g = Core::new(&gate);
        Ok(Sim {
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            rng: Rng::new(seed),
            cores: vec![None; machine.cores as usize],
            slice_left: vec![0; machine.cores as usize],
            m: machine,
            gate: g,
            threads: Vec::new(),
            runq: VecDeque::new(),
            disk: VecDeque::new(),
            mutexes: Vec::new(),
            events: 0,
            trace_hash: 0xcbf2_9ce4_8422_2325,
            kinds: Vec::new(),
            done_at: Vec::new(),
            gate_counts: GateCounts::default(),
            in_system_area: 0.0,
            in_system: 0,
            last_change: 0,
            measure_from: 0,
            max_inside: 0,
            inside_now: 0,
            inside_area: 0.0,
            inside_last: 0,
        })
    }

    /// Adds a thread running `program`; it starts runnable at time 0.
    pub fn spawn(&mut self, program: Box<dyn Program>) -> Tid {
        let tid = self.threads.len() as Tid;
        self.threads.push(Thread {
            program,
            tickets: Tickets::default(),
            hold: None,
            attempt: Attempt::new(false),
            resume: Resume::Advance,
            cpu_left: 0,
            begun_at: 0,
            signalled_at: 0,
            halted: false,
            in_system: false,
            begin_on_ready: false,
        });
        self.done_at.push(0);
        self.make_runnable(tid);
        tid
    }

    /// Makes sure mutex `n` exists.
    fn mutex(&mut self, n: usize) -> &mut (Option<Tid>, VecDeque<Tid>) {
        while self.mutexes.len() <= n {
            self.mutexes.push((None, VecDeque::new()));
        }
        &mut self.mutexes[n]
    }

    /// Virtual time now, ns.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Clears completion statistics and restarts the time integrals (end of warm-up).
    pub fn reset_stats(&mut self) {
        self.kinds.clear();
        self.gate_counts = GateCounts::default();
        self.in_system_area = 0.0;
        self.last_change = self.now;
        self.measure_from = self.now;
        self.inside_area = 0.0;
        self.inside_last = self.now;
        self.max_inside = self.inside_now;
    }

    /// Mean number of threads between `Begin` and `Done` since the last reset.
    pub fn mean_in_system(&mut self) -> f64 {
        self.account_in_system();
        let span = (self.now - self.measure_from).max(1) as f64;
        self.in_system_area / span
    }

    /// Mean number of threads holding a gate slot since the last reset.
    pub fn mean_inside(&mut self) -> f64 {
        self.account_inside();
        self.inside_area / (self.now - self.measure_from).max(1) as f64
    }

    /// Seconds of virtual time since the last reset.
    pub fn measured_secs(&self) -> f64 {
        (self.now - self.measure_from) as f64 / 1e9
    }

    fn account_in_system(&mut self) {
        self.in_system_area += self.in_system as f64 * (self.now - self.last_change) as f64;
        self.last_change = self.now;
    }

    fn account_inside(&mut self) {
        self.inside_area += self.inside_now as f64 * (self.now - self.inside_last) as f64;
        self.inside_last = self.now;
    }

    fn set_inside(&mut self, delta: i32) {
        self.account_inside();
        self.inside_now = (self.inside_now as i32 + delta) as u32;
        self.max_inside = self.max_inside.max(self.inside_now);
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Runs until virtual time `until` (ns) or until no event is left.
    pub fn run_until(&mut self, until: u64) {
        while let Some(top) = self.queue.peek() {
            if top.at > until {
                break;
            }
            let e = self.queue.pop().expect("peeked");
            self.now = e.at;
            self.events += 1;
            self.hash(&e);
            match e.ev {
                Ev::SliceDone { core, tid, ran } => self.slice_done(core, tid, ran),
                Ev::Ready { tid } => {
                    if std::mem::take(&mut self.threads[tid as usize].begin_on_ready) {
                        self.begin(tid);
                    }
                    self.make_runnable(tid)
                }
                Ev::Switched { core, tid } => self.resume(core, tid),
                Ev::DiskDone => self.disk_done(),
            }
        }
        self.now = self
            .now
            .max(until.min(self.queue.peek().map_or(until, |e| e.at)));
    }

    fn hash(&mut self, e: &Entry) {
        let (k, a, b) = match e.ev {
            Ev::SliceDone { core, tid, ran } => (1u64, tid as u64 ^ (core as u64) << 32, ran),
            Ev::Ready { tid } => (2, tid as u64, 0),
            Ev::Switched { core, tid } => (3, tid as u64 ^ (core as u64) << 32, 0),
            Ev::DiskDone => (4, 0, 0),
        };
        for v in [e.at, k, a, b] {
            self.trace_hash = (self.trace_hash ^ v).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn runnable_per_core(&self) -> f64 {
        let running = self.cores.iter().filter(|c| c.is_some()).count();
        (running + self.runq.len()) as f64 / self.m.cores as f64
    }

    /// Latency from a signal to the thread being runnable.
    fn wake_latency(&mut self) -> u64 {
        let mean = self.m.wake_base_ns as f64
            + self.m.wake_per_runnable_ns as f64 * self.runnable_per_core();
        if mean <= 0.0 {
            return 0;
        }
        match self.m.wake_distribution {
            Distribution::Fixed => mean as u64,
            Distribution::Exponential => self.rng.exp(mean) as u64,
        }
    }

    /// Signals `tid`: runnable after a wake-up latency.
    fn signal(&mut self, tid: Tid) {
        self.threads[tid as usize].signalled_at = self.now;
        let l = self.wake_latency();
        if l == 0 {
            self.make_runnable(tid);
        } else {
            self.push(self.now + l, Ev::Ready { tid });
        }
    }

    /// A thread woken from a block: its operations that need no CPU (recording a completion,
    /// thinking, queueing for the disk or a mutex, a ticket re-entry, an exit) happen at once;
    /// it queues for a core only when it needs CPU or a gate decision. (Queueing theory's
    /// customers leave a device for the next one directly; without this, an instantaneous
    /// `Done` after a disk read would wait for a busy core and inflate response times.)
    fn make_runnable(&mut self, tid: Tid) {
        if self.threads[tid as usize].resume == Resume::Advance {
            self.advance(None, tid);
        } else {
            self.enqueue_for_core(tid);
        }
    }

    fn enqueue_for_core(&mut self, tid: Tid) {
        if let Some(core) = self.cores.iter().position(|c| c.is_none()) {
            self.dispatch(core as u32, tid);
        } else {
            self.runq.push_back(tid);
        }
    }

    fn dispatch(&mut self, core: u32, tid: Tid) {
        self.cores[core as usize] = Some(tid);
        self.slice_left[core as usize] = self.m.time_slice_ns;
        if self.m.context_switch_ns > 0 {
            self.push(
                self.now + self.m.context_switch_ns,
                Ev::Switched { core, tid },
            );
        } else {
            self.resume(core, tid);
        }
    }

    /// The core (if the thread had one) gives up its thread and takes the next runnable one.
    fn release(&mut self, core: Option<u32>) {
        if let Some(c) = core {
            self.release_core(c);
        }
    }

    /// The core gives up `tid` (blocked or preempted) and takes the next runnable thread.
    fn release_core(&mut self, core: u32) {
        self.cores[core as usize] = None;
        if let Some(next) = self.runq.pop_front() {
            self.dispatch(core, next);
        }
    }

    /// Runs `tid`'s CPU work on `core` for the rest of its slice (the slice counts from the
    /// dispatch, across bursts); a thread whose slice is used up yields the core if anyone
    /// waits for it.
    fn start_cpu(&mut self, core: u32, tid: Tid) {
        let left = self.threads[tid as usize].cpu_left;
        let run = if self.m.time_slice_ns == 0 {
            left
        } else {
            let c = core as usize;
            if self.slice_left[c] == 0 {
                if !self.runq.is_empty() {
                    self.threads[tid as usize].resume = Resume::Cpu;
                    self.runq.push_back(tid);
                    self.release_core(core);
                    return;
                }
                self.slice_left[c] = self.m.time_slice_ns;
            }
            left.min(self.slice_left[c])
        };
        self.push(
            self.now + run,
            Ev::SliceDone {
                core,
                tid,
                ran: run,
            },
        );
    }

    fn slice_done(&mut self, core: u32, tid: Tid, ran: u64) {
        if self.m.time_slice_ns > 0 {
            self.slice_left[core as usize] -= ran;
        }
        self.threads[tid as usize].cpu_left -= ran;
        if self.threads[tid as usize].cpu_left > 0 {
            self.start_cpu(core, tid);
            return;
        }
        self.advance(Some(core), tid);
    }

    fn resume(&mut self, core: u32, tid: Tid) {
        let r = self.threads[tid as usize].resume;
        self.threads[tid as usize].resume = Resume::Advance;
        match r {
            Resume::Cpu => self.start_cpu(core, tid),
            Resume::Advance => self.advance(Some(core), tid),
            Resume::RetryEnter => {
                if self.gate_step(core, tid) {
                    self.advance(Some(core), tid);
                }
            }
            Resume::FinishWait(id) => {
                let latency = self.now - self.threads[tid as usize].signalled_at;
                self.gate_counts.handoff_latency_sum += latency as f64;
                let Core::Queue(q) = &mut self.gate else {
                    unreachable!("only queue policies wait")
                };
                let a = q.finish_wait(id);
                self.admitted(tid, a);
                self.advance(Some(core), tid);
            }
        }
    }

    fn admitted(&mut self, tid: Tid, a: Admission) {
        let counted = a.hold.kind() != HoldKind::Uncounted;
        let t = &mut self.threads[tid as usize];
        t.tickets.grant(&a);
        t.hold = Some(a.hold);
        t.attempt = Attempt::new(false);
        let c = &mut self.gate_counts;
        c.admissions += 1;
        match a.by {
            AdmittedBy::Lifo => c.lifo += 1,
            AdmittedBy::Forced => c.forced += 1,
            _ => {}
        }
        if counted {
            self.set_inside(1);
        }
    }

    /// One gate decision for `tid` on `core`; returns true if admitted (continue running).
    fn gate_step(&mut self, core: u32, tid: Tid) -> bool {
        let mut at = std::mem::take(&mut self.threads[tid as usize].attempt);
        let step = match &mut self.gate {
            Core::Queue(q) => q.enter(&mut at, &tid),
            Core::Polling(p) => p.enter(&mut at),
            Core::Timer(t) => t.enter(&mut at),
            Core::Unlimited(u) => Step::Admitted(u.enter()),
        };
        self.threads[tid as usize].attempt = at;
        match step {
            Step::Admitted(a) => {
                self.admitted(tid, a);
                true
            }
            Step::Sleep(d) => {
                self.gate_counts.sleeps += 1;
                self.threads[tid as usize].resume = Resume::RetryEnter;
                let d = d.as_nanos() as u64
                    + if d > Duration::ZERO {
                        self.m.timer_slack_ns
                    } else {
                        0
                    };
                self.push(self.now + d, Ev::Ready { tid });
                self.release_core(core);
                false
            }
            Step::Yield => {
                self.threads[tid as usize].resume = Resume::RetryEnter;
                self.runq.push_back(tid);
                self.release_core(core);
                false
            }
            Step::Wait(id) => {
                self.gate_counts.queue_waits += 1;
                self.threads[tid as usize].resume = Resume::FinishWait(id);
                self.release_core(core);
                false
            }
        }
    }

    fn leave_gate(&mut self, tid: Tid) {
        let t = &mut self.threads[tid as usize];
        t.tickets.clear();
        let Some(hold) = t.hold.take() else {
            return;
        };
        if hold.kind() != HoldKind::Uncounted {
            self.set_inside(-1);
        }
        let release = match &mut self.gate {
            Core::Queue(q) => q.exit(hold),
            Core::Polling(p) => {
                p.exit(hold);
                None
            }
            Core::Timer(t) => {
                t.exit(hold);
                None
            }
            Core::Unlimited(u) => {
                u.exit(hold);
                None
            }
        };
        if let Some(r) = release {
            // The core counts the released waiter inside already; this simulation counts it
            // (in `inside_now`) once it runs and takes the slot.
            self.gate_counts.handoffs += 1;
            self.signal(r.waiter);
        }
    }

    /// Runs `tid`'s program until it blocks, needs CPU, or halts; `core` is the core it runs
    /// on, or `None` right after a wake-up (see [`Sim::make_runnable`]).
    fn advance(&mut self, core: Option<u32>, tid: Tid) {
        loop {
            let now = self.now;
            let op = {
                let t = &mut self.threads[tid as usize];
                let tickets = t.tickets.left();
                t.program.next(now, tickets, &mut self.rng)
            };
            match op {
                Op::Cpu(ns) => {
                    if ns == 0 {
                        continue;
                    }
                    self.threads[tid as usize].cpu_left = ns;
                    match core {
                        Some(c) => self.start_cpu(c, tid),
                        None => {
                            self.threads[tid as usize].resume = Resume::Cpu;
                            self.enqueue_for_core(tid);
                        }
                    }
                    return;
                }
                Op::Enter => {
                    let t = &mut self.threads[tid as usize];
                    if t.tickets.try_reenter() {
                        self.gate_counts.reentries += 1;
                        continue;
                    }
                    // Asking the gate takes CPU: the thread must be running.
                    let Some(c) = core else {
                        t.resume = Resume::RetryEnter;
                        self.enqueue_for_core(tid);
                        return;
                    };
                    if !self.gate_step(c, tid) {
                        return;
                    }
                }
                Op::Spend(k) => {
                    let k = self.threads[tid as usize].tickets.spend(k);
                    self.gate_counts.reentries += k as u64;
                }
                Op::Exit => {
                    if !self.threads[tid as usize].tickets.keeps_slot() {
                        self.leave_gate(tid);
                    }
                }
                Op::EndStatement => self.leave_gate(tid),
                Op::Disk(ns) => {
                    self.disk.push_back((tid, ns));
                    if self.disk.len() == 1 {
                        self.push(self.now + ns, Ev::DiskDone);
                    }
                    self.release(core);
                    return;
                }
                Op::Lock(n) => {
                    let m = self.mutex(n);
                    if m.0.is_none() {
                        m.0 = Some(tid);
                    } else {
                        m.1.push_back(tid);
                        self.release(core);
                        return;
                    }
                }
                Op::Unlock(n) => {
                    let m = self.mutex(n);
                    m.0 = m.1.pop_front();
                    if let Some(next) = m.0 {
                        self.signal(next);
                    }
                }
                Op::Think(ns) => {
                    self.push(self.now + ns, Ev::Ready { tid });
                    self.release(core);
                    return;
                }
                Op::Begin => self.begin(tid),
                Op::Arrive(ns) => {
                    self.threads[tid as usize].begin_on_ready = true;
                    self.push(self.now + ns, Ev::Ready { tid });
                    self.release(core);
                    return;
                }
                Op::Done(k) => {
                    self.account_in_system();
                    let t = &mut self.threads[tid as usize];
                    let resp = now.saturating_sub(t.begun_at.max(self.measure_from));
                    if t.in_system {
                        t.in_system = false;
                        self.in_system -= 1;
                    }
                    let k = k as usize;
                    if self.kinds.len() <= k {
                        self.kinds.resize(k + 1, KindStats::default());
                    }
                    self.kinds[k].count += 1;
                    self.kinds[k].response_sum += resp as f64;
                    self.done_at[tid as usize] = now;
                }
                Op::Halt => {
                    self.leave_gate(tid);
                    self.threads[tid as usize].halted = true;
                    self.release(core);
                    return;
                }
            }
        }
    }

    fn begin(&mut self, tid: Tid) {
        self.account_in_system();
        let now = self.now;
        let t = &mut self.threads[tid as usize];
        t.begun_at = now;
        if !t.in_system {
            t.in_system = true;
            self.in_system += 1;
        }
    }

    fn disk_done(&mut self) {
        let (tid, _) = self.disk.pop_front().expect("a request in service");
        if let Some(&(_, ns)) = self.disk.front() {
            self.push(self.now + ns, Ev::DiskDone);
        }
        self.signal(tid);
    }

    /// Whether every thread has halted.
    pub fn all_halted(&self) -> bool {
        self.threads.iter().all(|t| t.halted)
    }

    /// Runs until every thread halts (or `limit` ns of virtual time pass).
    pub fn run_to_completion(&mut self, limit: u64) {
        while !self.all_halted() && self.now < limit && !self.queue.is_empty() {
            let next = self.queue.peek().map_or(limit, |e| e.at);
            self.run_until(next);
        }
    }
}
