//! Sessions: one per connection, holding its tickets and its slot, and the guards through which
//! it enters and leaves the gate.
//!
//! The shape follows the call pattern between MySQL's server layer and InnoDB: a *statement*
//! makes many *calls* into the engine (one per row fetched, for a scan); each call is an enter
//! and an exit. A thread with tickets re-enters without asking anyone and keeps its slot
//! between calls; statement end force-exits.
//!
//! ```text
//!  Session ──begin()──▶ Statement ──enter()──▶ Call ──drop──▶ (exit: keep slot while tickets)
//!                          │                    └─step_out(reason, f)──▶ leave, f(), re-enter
//!                          └─drop──▶ force exit (tickets → 0, slot freed, waiter handed it)
//! ```

use std::time::{Duration, Instant};

use crate::error::GateError;
use crate::gate::{deliver, mark_woken, Engine, GateInner, SessionShared};
use crate::monitor::{Counter, SessionState, StepOutReason};
use crate::policy::queue::QueueCore;
use crate::policy::{Admission, AdmittedBy, Attempt, Hold, Step, WaitId};
use crate::sync::{lock, yield_now, Arc};
use std::sync::atomic::Ordering;

/// One connection's handle on a [`crate::Gate`]: its tickets, its slot, its settings.
///
/// A `Session` is `Send` (it may move between threads with its connection) but is used by one
/// thread at a time. Dropping it leaves the gate if it is still inside.
pub struct Session {
    gate: Arc<GateInner>,
    sh: Arc<SessionShared>,
    tickets: u32,
    hold: Option<Hold>,
    holds_locks: bool,
    wait_timeout: Option<Duration>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.sh.id)
            .field("tickets", &self.tickets)
            .field("inside", &self.hold.is_some())
            .finish_non_exhaustive()
    }
}

/// Cancels a session's wait from another thread (like `KILL QUERY`).
///
/// A cancel ends the session's current wait to enter, or its next one within the current
/// statement, with [`GateError::Cancelled`]. If the session is not waiting, the cancel is
/// consumed at its statement end. Cheap to clone.
#[derive(Clone)]
pub struct Canceler {
    sh: Arc<SessionShared>,
}

impl std::fmt::Debug for Canceler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canceler")
            .field("session", &self.sh.id)
            .finish()
    }
}

impl Canceler {
    /// Cancels the session's current (or next) wait to enter.
    pub fn cancel(&self) {
        self.sh.cancel.store(true, Ordering::Release);
        // Taking the lock orders this notify after the waiter's check-then-wait.
        drop(lock(&self.sh.wake));
        self.sh.cv.notify_one();
    }
}

/// Why a wait ended without a slot.
#[derive(Clone, Copy)]
enum Abort {
    Cancelled,
    TimedOut,
}

impl Abort {
    fn error(self, waited: Duration) -> GateError {
        match self {
            Abort::Cancelled => GateError::Cancelled { waited },
            Abort::TimedOut => GateError::TimedOut { waited },
        }
    }
}

impl Session {
    pub(crate) fn new(gate: Arc<GateInner>, sh: Arc<SessionShared>) -> Session {
        Session {
            gate,
            sh,
            tickets: 0,
            hold: None,
            holds_locks: false,
            wait_timeout: None,
        }
    }

    /// The session's id (as shown in status output).
    pub fn id(&self) -> u64 {
        self.sh.id
    }

    /// Starts a statement. Dropping the returned guard ends it and force-exits the gate.
    pub fn begin(&mut self) -> Statement<'_> {
        if self.sh.cancel.load(Ordering::Relaxed) {
            // A cancel aimed at an earlier statement that no wait consumed ends here.
            self.sh.cancel.store(false, Ordering::Relaxed);
        }
        Statement { session: self }
    }

    /// Tickets left.
    pub fn tickets(&self) -> u32 {
        self.tickets
    }

    /// The session holds a slot (or is admitted while unlimited).
    pub fn is_inside(&self) -> bool {
        self.hold.is_some()
    }

    /// Declares whether the session holds row locks or latches. InnoDB lets such a thread skip
    /// the sleep before queueing (`classic`, `flifo`) and enter right after its yield (`timer`)
    /// so that others are not left waiting on its locks.
    pub fn set_holds_locks(&mut self, holds: bool) {
        self.holds_locks = holds;
    }

    /// Caps how long one admission may wait; `None` (the default) waits as long as it takes.
    /// An expired wait returns [`GateError::TimedOut`] and leaves nothing counted.
    pub fn set_wait_timeout(&mut self, timeout: Option<Duration>) {
        self.wait_timeout = timeout;
    }

    /// A handle that cancels this session's waits from another thread.
    pub fn canceler(&self) -> Canceler {
        Canceler {
            sh: self.sh.clone(),
        }
    }

    /// Enter for one call. Returns whether it was an admission (`true`) or a ticket re-entry.
    #[inline]
    fn enter_call(&mut self) -> Result<bool, GateError> {
        if self.tickets > 0 {
            // The re-entry fast path: this session's own fields only, no lock, no shared RMW.
            self.tickets -= 1;
            self.sh.tickets.store(self.tickets, Ordering::Relaxed);
            self.sh.bump(Counter::TicketReentries);
            self.sh.set_state(SessionState::InCall);
            return Ok(false);
        }
        self.admit(None)?;
        Ok(true)
    }

    /// Exit after one call: keep the slot while tickets remain, otherwise leave.
    #[inline]
    fn exit_call(&mut self) {
        if self.tickets > 0 {
            self.sh.set_state(SessionState::DeclaredInside);
        } else {
            self.leave();
        }
    }

    /// Leaves for real: tickets to 0, the slot (if any) given back or handed to a waiter.
    fn leave(&mut self) {
        self.tickets = 0;
        let Some(hold) = self.hold.take() else {
            return;
        };
        self.sh.tickets.store(0, Ordering::Relaxed);
        self.sh.set_state(SessionState::Outside);
        match &self.gate.engine {
            Engine::Queue(m) => {
                let released = {
                    let mut core = lock(m);
                    let r = core.exit(hold);
                    if let Some(r) = &r {
                        mark_woken(std::slice::from_ref(r));
                    }
                    r
                };
                if let Some(r) = released {
                    self.sh.bump(Counter::HandOffs);
                    deliver(&self.gate, r);
                }
            }
            Engine::Polling(c) => c.exit(hold),
            Engine::Timer(c) => c.exit(hold),
            Engine::Unlimited => {}
        }
    }

    /// Leaves around blocking work and records why.
    fn step_out(&mut self, reason: StepOutReason) {
        self.leave();
        self.sh.bump(Counter::StepOuts);
        self.sh.set_state_now(SessionState::SteppedOut(reason));
    }

    /// Admission for a session without tickets; `after` is set when re-entering after a
    /// step-out (polling re-enters unchecked after a row-lock wait).
    fn admit(&mut self, after: Option<StepOutReason>) -> Result<(), GateError> {
        let mut at = Attempt::new(self.holds_locks);
        // After a row-lock wait, a thread that was inside re-enters without checking the limit,
        // with one ticket (InnoDB `srv_conc_force_enter_innodb`, every counted policy).
        let unchecked = after == Some(StepOutReason::RowLockWait);
        let first = match &self.gate.engine {
            Engine::Unlimited => Step::Admitted(Admission {
                by: AdmittedBy::Unlimited,
                hold: Hold::Uncounted,
                tickets: self.gate.config.tickets,
            }),
            Engine::Polling(c) if unchecked => Step::Admitted(c.enter_unchecked()),
            Engine::Polling(c) => c.enter(&mut at),
            Engine::Timer(c) if unchecked => Step::Admitted(c.enter_unchecked()),
            Engine::Timer(c) => c.enter(&mut at),
            Engine::Queue(m) if unchecked => Step::Admitted(lock(m).enter_unchecked()),
            Engine::Queue(m) => self.queue_step(m, &mut at),
        };
        match first {
            Step::Admitted(a) => {
                self.admitted(a, 0);
                Ok(())
            }
            step => {
                let gate = self.gate.clone();
                self.admit_slow(&gate, at, step)
            }
        }
    }

    /// One decision of the queue core. A `Wait` is published as `Queued` while the core's lock
    /// is held, so a hand-off's `Woken` mark (also made under that lock) always comes after it.
    fn queue_step(
        &self,
        m: &crate::sync::Mutex<QueueCore<Arc<SessionShared>>>,
        at: &mut Attempt,
    ) -> Step {
        let mut core = lock(m);
        let step = core.enter(at, &self.sh);
        if let Step::Wait(_) = step {
            self.sh.set_state(SessionState::Queued);
        }
        step
    }

    #[cold]
    fn admit_slow(
        &mut self,
        gate: &GateInner,
        mut at: Attempt,
        mut step: Step,
    ) -> Result<(), GateError> {
        let start = Instant::now();
        // A timeout too large to add to a clock reading means no deadline.
        let deadline = self.wait_timeout.and_then(|t| start.checked_add(t));
        // The waiting states share one timestamp: when this admission began to wait.
        let mut first = true;
        let mut waiting = |sh: &SessionShared, state: Option<SessionState>| {
            let first = std::mem::take(&mut first);
            match state {
                Some(state) if first => sh.set_state_now(state),
                Some(state) => sh.set_state(state),
                // Already published (under the queue lock): only the timestamp is ours to set.
                None if first => sh.mark_since_now(),
                None => {}
            }
        };
        loop {
            match step {
                Step::Admitted(a) => {
                    self.admitted(a, start.elapsed().as_nanos() as u64);
                    return Ok(());
                }
                Step::Yield => {
                    self.sh.bump(Counter::Yields);
                    waiting(&self.sh, Some(SessionState::Yielding));
                    yield_now();
                }
                Step::Sleep(d) => {
                    self.sh.bump(Counter::Sleeps);
                    waiting(&self.sh, Some(SessionState::Sleeping));
                    if let Err(abort) = self.sleep(d, deadline) {
                        match &gate.engine {
                            Engine::Queue(m) => lock(m).abandon(&mut at),
                            Engine::Polling(c) => c.abandon(&mut at),
                            Engine::Timer(c) => c.abandon(&mut at),
                            Engine::Unlimited => {}
                        }
                        return Err(self.aborted(abort, start));
                    }
                }
                Step::Wait(id) => {
                    self.sh.bump(Counter::QueueWaits);
                    waiting(&self.sh, None);
                    let a = self
                        .wait_handoff(gate, id, deadline)
                        .map_err(|abort| self.aborted(abort, start))?;
                    self.admitted(a, start.elapsed().as_nanos() as u64);
                    return Ok(());
                }
            }
            step = match &gate.engine {
                Engine::Polling(c) => c.enter(&mut at),
                Engine::Timer(c) => c.enter(&mut at),
                Engine::Queue(m) => self.queue_step(m, &mut at),
                Engine::Unlimited => unreachable!("unlimited never waits"),
            };
        }
    }

    fn aborted(&self, abort: Abort, start: Instant) -> GateError {
        self.sh.bump(match abort {
            Abort::Cancelled => Counter::Cancellations,
            Abort::TimedOut => Counter::Timeouts,
        });
        self.sh.set_state(SessionState::Outside);
        abort.error(start.elapsed())
    }

    /// Records an admission and takes what it grants.
    #[inline]
    fn admitted(&mut self, a: Admission, waited_ns: u64) {
        self.tickets = a.tickets;
        self.hold = Some(a.hold);
        self.sh.tickets.store(a.tickets, Ordering::Relaxed);
        self.sh.set_state_now(SessionState::InCall);
        self.sh.bump(Counter::Admissions);
        match a.by {
            AdmittedBy::Lifo => self.sh.bump(Counter::LifoAdmissions),
            AdmittedBy::Forced => self.sh.bump(Counter::ForcedEntries),
            AdmittedBy::Unchecked => self.sh.bump(Counter::UncheckedReentries),
            AdmittedBy::Free | AdmittedBy::HandOff | AdmittedBy::Unlimited => {}
        }
        if waited_ns != 0 {
            // Admissions without a wait are counted as zeros from the admission counter.
            self.sh.wait_hist.record(waited_ns);
        }
    }

    /// Takes a pending cancel, if any.
    fn take_cancel(&self) -> bool {
        self.sh.cancel.load(Ordering::Relaxed) && self.sh.cancel.swap(false, Ordering::Acquire)
    }

    /// Sleeps `d` (or until the deadline), interruptibly: a cancel ends it with an error, a
    /// raised limit ends it early so the session re-checks.
    fn sleep(&self, d: Duration, deadline: Option<Instant>) -> Result<(), Abort> {
        let generation = self.gate.raise_generation.load(Ordering::Acquire);
        if self.take_cancel() {
            return Err(Abort::Cancelled);
        }
        let now = Instant::now();
        if deadline.is_some_and(|dl| now >= dl) {
            return Err(Abort::TimedOut);
        }
        if d.is_zero() || cfg!(loom) {
            // InnoDB's os_thread_sleep(0) gives up the CPU and returns; loom has no clock, so
            // under the model checker every sleep is a yield.
            yield_now();
            return Ok(());
        }
        let until = deadline.map_or(now + d, |dl| dl.min(now + d));
        let mut w = lock(&self.sh.wake);
        loop {
            if self.take_cancel() {
                return Err(Abort::Cancelled);
            }
            if self.gate.raise_generation.load(Ordering::Acquire) != generation {
                return Ok(());
            }
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            w = self
                .sh
                .cv
                .wait_timeout(w, until - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Blocks until wait `id` is released by a hand-off, or the wait is cancelled / times out.
    fn wait_handoff(
        &self,
        gate: &GateInner,
        id: WaitId,
        deadline: Option<Instant>,
    ) -> Result<Admission, Abort> {
        let Engine::Queue(m) = &gate.engine else {
            unreachable!("only the queue policies queue");
        };
        let mut w = lock(&self.sh.wake);
        let outcome = loop {
            if w.released == Some(id) {
                break Ok(w.handoff_ns);
            }
            if self.take_cancel() {
                break Err(Abort::Cancelled);
            }
            w = match deadline {
                None => self.sh.cv.wait(w).unwrap_or_else(|e| e.into_inner()),
                Some(dl) => {
                    let now = Instant::now();
                    if now >= dl {
                        break Err(Abort::TimedOut);
                    }
                    self.sh
                        .cv
                        .wait_timeout(w, dl - now)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0)
                }
            };
        };
        drop(w);
        match outcome {
            Ok(handoff_ns) => {
                self.sh
                    .wake_hist
                    .record(gate.precise_ns().saturating_sub(handoff_ns));
                Ok(lock(m).finish_wait(id))
            }
            // A hand-off may have chosen this wait in the same instant: then it is inside.
            Err(abort) => lock(m).cancel_wait(id).ok_or(abort),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.leave();
        self.gate.retire(&self.sh);
    }
}

/// One statement of a session. Every [`Statement::enter`] is one call into the engine; dropping
/// the statement force-exits (tickets to 0, slot freed), also during a panic.
#[must_use = "dropping the statement ends it at once"]
pub struct Statement<'s> {
    session: &'s mut Session,
}

impl std::fmt::Debug for Statement<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Statement")
            .field("session", &self.session)
            .finish()
    }
}

impl<'s> Statement<'s> {
    /// Enters the engine for one call: a ticket re-entry (no lock, no shared write) if tickets
    /// remain, otherwise an admission by the gate's policy, which may sleep or queue. Dropping
    /// the returned [`Call`] exits.
    #[inline]
    pub fn enter(&mut self) -> Result<Call<'_>, GateError> {
        let admitted = self.session.enter_call()?;
        Ok(Call {
            session: &mut *self.session,
            admitted,
        })
    }

    /// Leaves the gate for work outside the engine (sending results, a file sort) and runs
    /// `f`; the next [`Statement::enter`] is an admission.
    pub fn step_out<R>(&mut self, reason: StepOutReason, f: impl FnOnce() -> R) -> R {
        self.session.step_out(reason);
        let r = f();
        self.session.sh.set_state(SessionState::Outside);
        r
    }

    /// Tickets left.
    pub fn tickets(&self) -> u32 {
        self.session.tickets
    }

    /// The statement's session holds a slot.
    pub fn is_inside(&self) -> bool {
        self.session.is_inside()
    }
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        self.session.leave();
    }
}

/// One call inside the engine. Dropping it exits: the session keeps its slot while it has
/// tickets, and leaves otherwise.
#[must_use = "dropping the call exits the gate at once"]
pub struct Call<'c> {
    session: &'c mut Session,
    admitted: bool,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("admitted", &self.admitted)
            .field("session", &self.session)
            .finish()
    }
}

impl Call<'_> {
    /// This enter was an admission (not a ticket re-entry).
    pub fn admitted(&self) -> bool {
        self.admitted
    }

    /// Tickets left; when 0, dropping this call leaves the gate.
    pub fn tickets(&self) -> u32 {
        self.session.tickets
    }

    /// Frees the slot around blocking work `f` (a row-lock wait, disk I/O, the commit mutex)
    /// and re-enters afterwards by the policy's rule: after a [`StepOutReason::RowLockWait`]
    /// every counted policy re-enters without checking the limit, with one ticket (InnoDB's
    /// `srv_conc_force_enter_innodb`, 5.0–8.0, and MySQL 5.4's timer gate); every other case
    /// is a normal admission, which may wait. If that wait is cancelled or times out, the error is returned
    /// (and `f`'s result dropped) and the call continues outside the gate.
    pub fn step_out<R>(
        &mut self,
        reason: StepOutReason,
        f: impl FnOnce() -> R,
    ) -> Result<R, GateError> {
        let was_inside = self.session.is_inside();
        self.session.step_out(reason);
        let r = f();
        // InnoDB force-enters only a thread that was declared inside before the wait.
        self.session.admit(was_inside.then_some(reason))?;
        Ok(r)
    }
}

impl Drop for Call<'_> {
    #[inline]
    fn drop(&mut self) {
        self.session.exit_call();
    }
}
