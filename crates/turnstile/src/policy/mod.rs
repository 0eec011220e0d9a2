//! The decisions of each admission policy, written once.
//!
//! A *decision core* holds a policy's shared state and answers one question for a thread that
//! wants in: what must it do next? The answer is a [`Step`]. The core never sleeps, blocks,
//! reads a clock or signals a thread: it says *sleep this long*, *yield*, *wait in the queue*,
//! or *you are in*, and, on exit, *wake this waiter*. Whoever drives it performs the step:
//! [`crate::Gate`] with real threads, the simulator with events in virtual time. That is how
//! both run the same policy code.
//!
//! A thread's progress through one admission lives in an [`Attempt`], which the driver keeps
//! and passes back on every call (InnoDB keeps the same facts in local variables of
//! `srv_conc_enter_innodb`: `has_slept`, `n_sleeps`, `notified_mysql`, `has_yielded`).
//!
//! | core | policy | shared state | driver provides |
//! |---|---|---|---|
//! | [`queue::QueueCore`] | `classic`, `flifo` | plain struct (`&mut self`) | the mutex around it, a way to wake a waiter |
//! | [`polling::PollingCore`] | `polling` | atomics (`&self`) | sleeping |
//! | [`timer::TimerCore`] | `timer` | atomics (`&self`) | yielding, sleeping |
//! | [`UnlimitedCore`] | `unlimited` | none | nothing |
//! | [`auto::AutoCore`] | `auto` | atomics + a queue under its own lock (`&self`) | a clock reading on slow paths, a way to wake a waiter, a CPU-time sample |
//!
//! Around the cores sit two rules every driver shares: [`Tickets`] (a thread with tickets
//! re-enters without asking the core and keeps its slot between calls) and [`Hold`] (what an
//! admission took, a token the core issues once and takes back once, so a slot can never be
//! given back twice).
//!
//! This module is the simulator's entry to the policy code. It is public for that crate and
//! is **not** covered by semantic versioning: use [`crate::Gate`].

use std::time::Duration;

use crate::config::{GateConfig, Policy};

pub mod auto;
pub mod polling;
pub mod queue;
mod slots;
pub mod step_out;
pub mod timer;

/// The decision core a configuration calls for, built in one place for every driver (the real
/// gate wraps the queue core in its mutex; the simulator owns it outright).
// One per simulated run (the real gate has its own `Cores`): the largest variant's size
// costs a run a few hundred bytes, and boxing `Auto` would add a pointer chase to every
// admission the simulator decides.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Core<W> {
    /// `classic` or `flifo`.
    Queue(queue::QueueCore<W>),
    /// `polling`.
    Polling(polling::PollingCore),
    /// `timer`.
    Timer(timer::TimerCore),
    /// `unlimited`: every enter is admitted uncounted.
    Unlimited(UnlimitedCore),
    /// `auto`.
    Auto(auto::AutoCore<W>),
}

impl<W: Clone> Core<W> {
    /// The core for `c` (which the caller has validated).
    pub fn new(c: &GateConfig) -> Core<W> {
        match c.policy {
            Policy::Classic | Policy::Flifo => Core::Queue(queue::QueueCore::new(
                c.limit,
                c.tickets,
                c.sleep_delay,
                c.policy == Policy::Flifo,
            )),
            Policy::Polling => Core::Polling(polling::PollingCore::new(
                c.limit,
                c.tickets,
                c.sleep_delay,
                c.adaptive_max_sleep_delay,
            )),
            Policy::Timer => Core::Timer(timer::TimerCore::new(c.limit, c.tickets)),
            Policy::Unlimited => Core::Unlimited(UnlimitedCore { tickets: c.tickets }),
            Policy::Auto => Core::Auto(auto::AutoCore::new(auto::AutoParams::from_config(c))),
        }
    }

    /// The limit the core enforces now (`auto`'s where its controller left it; 0 for
    /// `unlimited`).
    pub fn limit(&self) -> u32 {
        match self {
            Core::Queue(c) => c.limit(),
            Core::Polling(c) => c.limit(),
            Core::Timer(c) => c.limit(),
            Core::Unlimited(_) => 0,
            Core::Auto(c) => c.limit(),
        }
    }
}

/// What a thread asking to enter must do next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The thread is inside now.
    Admitted(Admission),
    /// Sleep for this long, then ask again. A zero duration means "retry at once" (yield).
    Sleep(Duration),
    /// Yield the processor once, then ask again.
    Yield,
    /// The thread is queued under this id: block until a [`queue::Release`] with the same id
    /// is delivered, then call `QueueCore::finish_wait`.
    Wait(WaitId),
    /// Refused at once (`auto`'s optional overload protection): nothing is counted.
    Reject(auto::RejectReason),
}

/// Identifies one queued wait. Ids are never reused by a core, so a late or duplicated
/// release signal can always be told apart from the one a waiter expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitId(pub u64);

/// How a thread got in and what it must give back when it really leaves.
#[derive(Debug, PartialEq, Eq)]
pub struct Admission {
    /// The rule that admitted it.
    pub by: AdmittedBy,
    /// What the thread holds until its exit.
    pub hold: Hold,
    /// Tickets granted: later enters spend them without asking the core.
    pub tickets: u32,
    /// `auto`: the slot is kept between calls for this long after the admission (and renewed
    /// while nobody waits); zero for the ticket policies.
    pub quantum: Duration,
}

impl Admission {
    pub(crate) fn new(by: AdmittedBy, hold: HoldKind, tickets: u32) -> Self {
        Admission {
            by,
            hold: Hold {
                kind: hold,
                long: false,
            },
            tickets,
            quantum: Duration::ZERO,
        }
    }

    /// An `auto` admission: unlimited calls, bounded by the time quantum.
    pub(crate) fn with_quantum(by: AdmittedBy, hold: HoldKind, quantum: Duration) -> Self {
        Admission {
            quantum,
            ..Admission::new(by, hold, u32::MAX)
        }
    }

    /// Re-entry after a row-lock wait without checking the limit, with one ticket: InnoDB's
    /// `srv_conc_force_enter_innodb` (5.0–8.0) and MySQL 5.4's timer gate, for every counted
    /// policy. The thread is counted (`inside` + 1) by the caller.
    pub(crate) fn unchecked() -> Self {
        Admission::new(AdmittedBy::Unchecked, HoldKind::Slot, 1)
    }
}

/// The rule under which a thread was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmittedBy {
    /// It found a free slot (possibly after sleeping or yielding).
    Free,
    /// A leaving thread handed it its slot (FIFO queue).
    HandOff,
    /// FLIFO's LIFO rule: `lifo_running < fifo_pending`.
    Lifo,
    /// `timer` gave up checking after a yield and two sleeps, or the thread held locks.
    Forced,
    /// Re-entry after a row-lock wait without checking the limit (InnoDB 5.6
    /// `srv_conc_force_enter_innodb`).
    Unchecked,
    /// The limit is 0 (the thread is counted, so that a limit set later sees it) or the policy
    /// is `unlimited` (nothing is counted).
    Unlimited,
}

/// What an admitted thread holds until it really leaves: a token issued by the core with each
/// admission and consumed by its exit. It is neither `Copy` nor `Clone` and only the policy
/// code can make one, so a slot cannot be given back twice, nor one that was never taken.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a hold must be given back through the core's exit"]
pub struct Hold {
    kind: HoldKind,
    /// `auto`: the holder kept its slot past a quantum beside waiters, and is counted among
    /// the core's long holders until this hold is given back
    /// ([`auto::AutoCore::yields_quantum`]).
    long: bool,
}

/// The kinds of [`Hold`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldKind {
    /// One counted slot of the limit (or, while the limit is 0, one counted thread).
    Slot,
    /// A place among FLIFO's lifo-running threads, or `auto`'s extra admissions (not one of
    /// the limit's slots).
    Lifo,
    /// Nothing: admitted by the `unlimited` policy.
    Uncounted,
}

impl Hold {
    /// A hold of `kind`, as a core's admission would issue it (tests of the cores only).
    #[cfg(test)]
    pub(crate) fn of(kind: HoldKind) -> Hold {
        Hold { kind, long: false }
    }

    /// What it holds.
    pub fn kind(&self) -> HoldKind {
        self.kind
    }

    /// It is counted in the core's `inside` (a slot).
    pub fn is_counted(&self) -> bool {
        self.kind == HoldKind::Slot
    }

    /// `auto`: its holder is counted as a long statement (it kept its slot past a quantum
    /// beside waiters) until the hold is given back.
    pub fn is_long(&self) -> bool {
        self.long
    }
}

/// Decrements a count the caller knows to be positive; a driver that gives back more than it
/// took would otherwise wrap it to ~4·10⁹ and close the gate for good. With [`Hold`] tokens
/// this cannot happen through the crate's API; if it ever does, it is a bug to report, not to
/// run on with.
#[inline]
pub(crate) fn dec(count: &mut u32, what: &str) {
    match count.checked_sub(1) {
        Some(n) => *count = n,
        None => panic!("turnstile: {what} would go below zero (a slot given back twice)"),
    }
}

/// A session's concurrency tickets (`innodb_concurrency_tickets`), and `auto`'s time quantum:
/// the rule by which a thread that holds a slot re-enters without asking the core and keeps
/// its slot between calls. The real gate and the simulator both go through it.
///
/// With a quantum (an `auto` admission), the slot is kept between calls until the quantum is
/// spent; then, at the next check, it is given up if anyone waits and renewed if nobody does.
/// The clock is read at a check, not at every call: the calls between two checks are a
/// *chunk*, counted down like tickets (so a re-entry costs what a ticket re-entry costs),
/// and each check resizes the chunk so that about `CHECKS_PER_QUANTUM` checks fall in a
/// quantum, whatever a call costs. The quantum starts at the first check, after
/// `FIRST_CHUNK` calls: a statement of fewer calls (a point select) never reads the clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tickets {
    left: u32,
    quantum_ns: u64,
    /// When the quantum ends (0: not started yet).
    until_ns: u64,
    chunk: u32,
    chunk_start_ns: u64,
}

/// Calls before the first quantum check: a short statement (1–4 calls: a point select, a
/// primary-key update) never reads the clock; a long one starts its quantum at most this many
/// calls late.
pub const FIRST_CHUNK: u32 = 4;
/// Checks aimed for per quantum: the quantum is overrun by at most about a quarter.
pub const CHECKS_PER_QUANTUM: u64 = 4;
/// The largest chunk: about 4 µs of re-entries between checks at ~4 ns each even when calls
/// cost nothing, so a change of pace is noticed within a quantum.
const MAX_CHUNK: u32 = 1024;

impl Tickets {
    /// Takes the tickets (and quantum) an admission grants. Reads no clock.
    #[inline]
    pub fn grant(&mut self, a: &Admission) {
        self.quantum_ns = a.quantum.as_nanos() as u64;
        self.until_ns = 0;
        self.chunk_start_ns = 0;
        if self.quantum_ns == 0 {
            self.left = a.tickets;
        } else {
            self.chunk = FIRST_CHUNK;
            self.left = FIRST_CHUNK;
        }
    }

    /// An enter: spends one ticket and returns true if any was left (a re-entry that asks
    /// nobody); false means the thread must be admitted by the core.
    #[inline]
    pub fn try_reenter(&mut self) -> bool {
        if self.left > 0 {
            self.left -= 1;
            true
        } else {
            false
        }
    }

    /// Spends up to `n` tickets at once (`n` re-entries); returns how many were spent.
    pub fn spend(&mut self, n: u32) -> u32 {
        let k = n.min(self.left);
        self.left -= k;
        k
    }

    /// After a call's exit: whether the thread keeps its slot. Without a quantum, while
    /// tickets remain. With one, while its chunk lasts; at the chunk's end the clock is read
    /// (`now`): within the quantum the slot is kept; past it, not if `yields(start)` (given
    /// the quantum's start) says to give way (`auto`: a waiter has waited since before the
    /// quantum began, [`auto::AutoCore::yields_quantum`]), and otherwise the quantum starts
    /// again.
    #[inline]
    pub fn keeps_slot(
        &mut self,
        now: impl FnOnce() -> u64,
        yields: impl FnOnce(u64) -> bool,
    ) -> bool {
        if self.left > 0 {
            return true;
        }
        if self.quantum_ns == 0 {
            return false;
        }
        self.check(now(), yields)
    }

    #[cold]
    fn check(&mut self, now: u64, yields: impl FnOnce(u64) -> bool) -> bool {
        if self.until_ns == 0 {
            self.until_ns = now.saturating_add(self.quantum_ns);
        } else if now >= self.until_ns {
            if yields(self.until_ns.saturating_sub(self.quantum_ns)) {
                return false;
            }
            self.until_ns = now.saturating_add(self.quantum_ns);
        }
        if self.chunk_start_ns != 0 {
            // Resize the chunk: `chunk` calls took `spent`; aim for a quarter quantum.
            let spent = now.saturating_sub(self.chunk_start_ns).max(1);
            let target = self.quantum_ns / CHECKS_PER_QUANTUM;
            // At most doubling per check, so a burst of cheap calls does not buy a long chunk
            // that a slow call afterwards would overrun.
            let next = (self.chunk as u64).saturating_mul(target) / spent;
            self.chunk = next.clamp(1, (2 * self.chunk).min(MAX_CHUNK) as u64) as u32;
        }
        self.chunk_start_ns = now;
        self.left = self.chunk;
        true
    }

    /// Time left in the quantum at `now` (`None`: the admission has no quantum; the whole
    /// quantum if it has not started).
    #[inline]
    pub fn time_left(self, now: u64) -> Option<u64> {
        (self.quantum_ns != 0).then(|| {
            if self.until_ns == 0 {
                self.quantum_ns
            } else {
                self.until_ns.saturating_sub(now)
            }
        })
    }

    /// Tickets as the API and monitoring show them: for a quantum admission `u32::MAX` (the
    /// calls are unlimited; a chunk's count is an internal detail, and its end does not mean
    /// the slot is given up).
    #[inline]
    pub fn reported(self) -> u32 {
        if self.quantum_ns != 0 {
            u32::MAX
        } else {
            self.left
        }
    }

    /// The admission carried a time quantum (`auto`).
    #[inline]
    pub fn has_quantum(self) -> bool {
        self.quantum_ns != 0
    }

    /// Statement end or a step-out: tickets to 0 (InnoDB's force exit).
    #[inline]
    pub fn clear(&mut self) {
        self.left = 0;
        self.quantum_ns = 0;
        self.until_ns = 0;
    }

    /// Tickets left.
    #[inline]
    pub fn left(self) -> u32 {
        self.left
    }
}

/// `unlimited` (`innodb_thread_concurrency = 0` as a policy): every enter is admitted, nothing
/// is counted, and the admission grants the configured tickets like every other policy.
#[derive(Debug, Clone, Copy)]
pub struct UnlimitedCore {
    tickets: u32,
}

impl UnlimitedCore {
    /// An admission: always granted at once.
    pub fn enter(&self) -> Admission {
        Admission::new(AdmittedBy::Unlimited, HoldKind::Uncounted, self.tickets)
    }

    /// Re-entry after a row-lock wait: one ticket, as for the counted policies.
    pub fn enter_unchecked(&self) -> Admission {
        Admission::new(AdmittedBy::Unlimited, HoldKind::Uncounted, 1)
    }

    /// A thread leaves: nothing to give back.
    pub fn exit(&self, hold: Hold) {
        debug_assert_eq!(hold.kind(), HoldKind::Uncounted);
    }
}

/// One thread's progress through one admission. Create a fresh one per admission.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// The thread holds row locks or latches: InnoDB never makes such a thread sleep before
    /// queueing (`classic`) and lets it in at once after its yield (`timer`).
    pub holds_locks: bool,
    /// `classic`/`flifo`: the one sleep before queueing has been taken (InnoDB `has_slept`).
    pub(crate) slept: bool,
    /// Sleeps completed (`polling`'s `n_sleeps`, `timer`'s `has_slept`).
    pub(crate) sleeps: u32,
    /// `timer`: the one yield has been taken.
    pub(crate) yielded: bool,
    /// A `Sleep` step is outstanding and counted in the core's sleeper count.
    pub(crate) sleeping: bool,
    /// `polling`: counted in the core's waiter count (InnoDB `notified_mysql`).
    pub(crate) notified: bool,
    /// The outstanding sleep ended early: the limit was raised ([`Attempt::sleep_cut_short`]).
    pub(crate) cut_short: bool,
}

impl Attempt {
    /// A fresh attempt for a thread that does (`true`) or does not hold locks.
    pub fn new(holds_locks: bool) -> Self {
        Attempt {
            holds_locks,
            ..Attempt::default()
        }
    }

    /// Sleeps completed so far in this attempt.
    pub fn sleeps(&self) -> u32 {
        self.sleeps
    }

    /// The driver ended the outstanding sleep early because the limit was raised: the next
    /// try re-checks without counting it as a completed sleep (`timer` forces its entry after
    /// two whole sleeps, `polling` lengthens its shared delay per extra sleep; a raise that
    /// woke a sleeper which then lost the new slot to another thread must count for neither).
    pub fn sleep_cut_short(&mut self) {
        self.cut_short = self.sleeping;
    }

    /// Ends the outstanding sleep at the next try: whether it counts as completed.
    pub(crate) fn end_sleep(&mut self) -> bool {
        self.sleeping = false;
        let whole = !std::mem::take(&mut self.cut_short);
        if whole {
            self.sleeps += 1;
        }
        whole
    }
}

#[cfg(all(test, not(loom)))]
mod tickets_tests {
    use super::*;

    fn quantum_admission(ms: u64) -> Admission {
        Admission::with_quantum(AdmittedBy::Free, HoldKind::Slot, Duration::from_millis(ms))
    }

    /// Runs calls of `call_ns` each from `now`, with `waiters` as given, until the slot is
    /// given up or `max` calls; returns (calls made, clock reads, time).
    fn run(t: &mut Tickets, now: &mut u64, call_ns: u64, waiters: bool, max: u32) -> (u32, u32) {
        let mut reads = 0;
        for n in 1..=max {
            *now += call_ns;
            let keep = t.keeps_slot(
                || {
                    reads += 1;
                    *now
                },
                |_| waiters,
            );
            if !keep {
                return (n, reads);
            }
            assert!(t.try_reenter(), "a kept slot re-enters on a ticket");
        }
        (max, reads)
    }

    #[test]
    fn a_quantum_is_checked_about_four_times_whatever_a_call_costs_and_given_up_only_to_waiters() {
        for call_ns in [100, 10_000, 300_000] {
            let mut t = Tickets::default();
            t.grant(&quantum_admission(1));
            assert_eq!(t.reported(), u32::MAX);
            let mut now = 1_000_000_000;
            // 20 quanta with nobody waiting: kept, and the clock read a few times a quantum.
            let calls = (20_000_000 / call_ns) as u32;
            let (made, reads) = run(&mut t, &mut now, call_ns, false, calls);
            assert_eq!(made, calls, "{call_ns} ns calls: kept while nobody waits");
            // About four a quantum; more only where the chunk's cap binds (one read per
            // `MAX_CHUNK` calls: under 1 % of a re-entry's cost).
            let per_quantum = reads as f64 / 20.0;
            let capped = 1_000_000.0 / call_ns as f64 / MAX_CHUNK as f64;
            assert!(
                per_quantum <= (2.0 * CHECKS_PER_QUANTUM as f64).max(capped + 1.0) + 1.0,
                "{call_ns} ns calls: {per_quantum} clock reads per quantum"
            );
            // Someone waits: given up within the quantum plus about a quarter of it (plus
            // one call).
            let start = now;
            let (_, _) = run(&mut t, &mut now, call_ns, true, u32::MAX);
            let held = now - start;
            assert!(
                held <= 1_000_000 + 1_000_000 / 2 + call_ns,
                "{call_ns} ns calls: slot held {held} ns after a waiter came"
            );
        }
    }

    #[test]
    fn past_the_quantum_the_holder_is_asked_with_the_quantum_start_and_keeps_a_new_one_if_told() {
        // The clock is the test's own counter, advanced 100 µs a call: no time is measured.
        let mut t = Tickets::default();
        t.grant(&quantum_admission(1));
        let mut now = 1_000_000_000;
        let mut asked = Vec::new();
        // Calls of 100 µs until the slot is given up; the first two ends are kept.
        let mut kept = 0;
        loop {
            now += 100_000;
            let keep = t.keeps_slot(
                || now,
                |start| {
                    asked.push((start, now));
                    asked.len() > 2
                },
            );
            if !keep {
                break;
            }
            kept += 1;
            assert!(t.try_reenter());
        }
        assert_eq!(asked.len(), 3, "{asked:?}");
        // Each question comes at or past a quantum's end, about a quantum after the start
        // it is given, and a kept slot's next quantum starts where the question was asked.
        for (i, &(start, at)) in asked.iter().enumerate() {
            assert!(
                at >= start + 1_000_000 && at <= start + 1_500_000,
                "{asked:?}"
            );
            if i > 0 {
                assert_eq!(start, asked[i - 1].1, "{asked:?}");
            }
        }
        assert!(kept >= 25, "{kept} calls kept over three quanta");
    }

    #[test]
    fn a_short_statement_never_reads_the_clock() {
        let mut t = Tickets::default();
        t.grant(&quantum_admission(1));
        for _ in 0..FIRST_CHUNK - 1 {
            assert!(t.try_reenter());
            assert!(t.keeps_slot(|| panic!("no clock read"), |_| true));
        }
    }
}
