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
//!                          │                    ├─step_out(reason, f)──▶ leave, f() → its value
//!                          │                    └─resume()──▶ re-enter by the reason's rule
//!                          └─drop──▶ force exit (tickets → 0, slot freed, waiter handed it)
//! ```
//!
//! **The step-out contract** (one, for [`Statement::step_out`] and [`Call::step_out`]): leave
//! the gate (tickets to 0, the slot freed or handed on), run `f`, return its value — always,
//! whatever happens to the re-entry. The session is then outside. The next admission —
//! [`Call::resume`] to continue the same call inside the engine, or the statement's next
//! [`Statement::enter`] — re-enters by the policy's rule for that reason: after a
//! [`StepOutReason::RowLockWait`] that began inside, without checking the limit and with one
//! ticket (InnoDB's `srv_conc_force_enter_innodb`); otherwise a normal admission, which may
//! wait and fail. A call dropped after its step-out is not re-admitted at all.

use std::time::{Duration, Instant};

use crate::error::{GateError, Misuse, OverloadReason};
use crate::inner::GateInner;
use crate::monitor::{Counter, SessionState, StepOutReason};
use crate::policy::auto::{RejectReason, STALL_PERIOD};
use crate::policy::{Admission, AdmittedBy, Attempt, Hold, Step, Tickets, WaitId};
use crate::registry::SessionShared;
use crate::sync::{lock, yield_now, Arc};
use std::sync::atomic::Ordering;

/// One connection's handle on a [`crate::Gate`]: its tickets, its slot, its settings.
///
/// A `Session` is `Send` (it may move between threads with its connection) but is used by one
/// thread at a time. Dropping it leaves the gate if it is still inside.
///
/// ```
/// use std::time::Duration;
/// use turnstile::{Gate, GateConfig, GateError, Policy};
///
/// let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1).tickets(2))?;
/// let mut a = gate.named_session("conn-1");
/// let mut b = gate.named_session("conn-2");
/// b.set_wait_timeout(Some(Duration::from_millis(5)));
///
/// let mut stmt = a.begin();
/// drop(stmt.enter()?); // admitted: 2 tickets, the slot is kept between calls
/// assert_eq!(stmt.tickets(), 2);
/// // The only slot is taken: b waits (a 10 ms sleep, then the queue) and gives up.
/// assert!(matches!(b.begin().enter(), Err(GateError::TimedOut { .. })));
/// drop(stmt); // statement end frees the slot
/// assert!(b.begin().enter().is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Session {
    gate: Arc<GateInner>,
    sh: Arc<SessionShared>,
    tickets: Tickets,
    hold: Option<Hold>,
    wait_timeout: Option<Duration>,
    /// The current statement declared that it holds row locks or latches.
    holds_locks: bool,
    /// `auto`: the current statement spent a whole quantum with threads queued (a long
    /// statement); its holds are marked as such, also after it gave way and came back.
    long_stmt: bool,
    /// A step-out that began inside left this reason: the next admission of the statement
    /// re-enters by its rule.
    resume: Option<StepOutReason>,
    /// Explicit-call API: a call is in progress (between `enter` and `exit`).
    in_call: bool,
    /// Explicit-call API: a declared wait is in progress (between `wait_begin` and `wait_end`).
    in_wait: bool,
    /// A step-out in progress kept the slot (`auto`'s rule for work outside the engine): when
    /// the session's inside state began, restored when the step-out ends (0: none kept).
    kept_since: u64,
    /// Inside a multi-statement transaction ([`Session::set_in_transaction`]).
    in_txn: bool,
    /// The open transaction was admitted once: its later admissions come back by `auto`'s
    /// rule after a wait.
    txn_admitted: bool,
    /// `auto`: the session holds a counted slot, which the thread running its call may lend
    /// (`gate_hook`): each call marks it that thread's, and its exit unmarks it.
    lendable: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.sh.id)
            .field("tickets", &self.tickets.reported())
            .field("inside", &self.hold.is_some())
            .finish_non_exhaustive()
    }
}

/// Cancels a session's wait from another thread (like `KILL QUERY`).
///
/// A cancel ends the session's current wait to enter, or its next one within the current
/// statement, with [`GateError::Cancelled`]. If the session is not waiting, the cancel is
/// consumed at its statement end. Cheap to clone.
///
/// ```
/// use turnstile::{Gate, GateConfig, GateError, Policy};
///
/// let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1))?;
/// let mut holder = gate.session();
/// let mut held = holder.begin();
/// let _call = held.enter()?;
///
/// let mut waiter = gate.session();
/// let kill = waiter.canceler();
/// let t = std::thread::spawn(move || matches!(waiter.begin().enter(), Err(GateError::Cancelled { .. })));
/// while gate.stats().waiting == 0 {
///     std::thread::yield_now();
/// }
/// kill.cancel(); // KILL QUERY
/// assert!(t.join().unwrap());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    /// The gate's queue timeout (`auto`'s overload protection) expired first.
    QueueTimeout(Duration),
}

impl Abort {
    fn error(self, waited: Duration) -> GateError {
        match self {
            Abort::Cancelled => GateError::Cancelled { waited },
            Abort::TimedOut => GateError::TimedOut { waited },
            Abort::QueueTimeout(timeout) => GateError::Overloaded {
                reason: OverloadReason::QueueTimeout { timeout },
                waited,
            },
        }
    }
}

/// The error for an enter the policy refused at once.
pub(crate) fn rejected(r: RejectReason) -> GateError {
    match r {
        RejectReason::QueueFull { max_waiting } => GateError::Overloaded {
            reason: OverloadReason::QueueFull { max_waiting },
            waited: Duration::ZERO,
        },
    }
}

/// A wait's deadline: the session's own timeout or the gate's queue timeout, whichever comes
/// first, and which one it is.
#[derive(Clone, Copy)]
struct Deadline {
    at: Option<Instant>,
    /// The gate's queue timeout is the one that ends the wait.
    queue: Option<Duration>,
}

impl Deadline {
    fn new(start: Instant, own: Option<Duration>, queue: Option<Duration>) -> Deadline {
        // A timeout too large to add to a clock reading means no deadline.
        let own_at = own.and_then(|t| start.checked_add(t));
        let queue_at = queue.and_then(|t| start.checked_add(t));
        match (own_at, queue_at) {
            (Some(o), Some(q)) if o <= q => Deadline {
                at: Some(o),
                queue: None,
            },
            (_, Some(q)) => Deadline { at: Some(q), queue },
            (o, None) => Deadline { at: o, queue: None },
        }
    }

    fn expired(self) -> Abort {
        match self.queue {
            Some(t) => Abort::QueueTimeout(t),
            None => Abort::TimedOut,
        }
    }
}

impl Session {
    pub(crate) fn new(gate: Arc<GateInner>, sh: Arc<SessionShared>) -> Session {
        Session {
            gate,
            sh,
            tickets: Tickets::default(),
            hold: None,
            wait_timeout: None,
            holds_locks: false,
            long_stmt: false,
            resume: None,
            in_call: false,
            in_wait: false,
            kept_since: 0,
            in_txn: false,
            txn_admitted: false,
            lendable: false,
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
        self.tickets.reported()
    }

    /// The session holds a slot (or is admitted while unlimited).
    pub fn is_inside(&self) -> bool {
        self.hold.is_some()
    }

    /// Declares whether the session is inside a multi-statement transaction (an engine calls
    /// it at `BEGIN`, and at `COMMIT`/`ROLLBACK` with `false`). Under `auto`, once the
    /// transaction has been admitted, each later admission it needs (its next statement, or
    /// a call after its quantum ran out) comes back by the rule after a wait: into a free
    /// slot, else as an extra admission (never more extras than the limit), else at the head
    /// of the queue. So a transaction waits its turn once, not once per statement, and the
    /// row locks it holds are released sooner: a thread pool's high-priority queue for open
    /// transactions (MySQL's `thread_pool_high_priority_mode = transactions`, MariaDB's
    /// `thread_pool_priority = auto`). Outside a transaction (autocommit) every statement
    /// waits its turn. Other policies ignore it.
    pub fn set_in_transaction(&mut self, in_txn: bool) {
        self.in_txn = in_txn;
        // A new transaction (or none) waits its turn.
        self.txn_admitted = false;
    }

    /// Whether [`Session::set_in_transaction`] declared a transaction open.
    pub fn in_transaction(&self) -> bool {
        self.in_txn
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
        // Tickets are granted only with a hold and cleared with it, so tickets left means inside.
        if self.tickets.try_reenter() {
            // The re-entry fast path: this session's own record only, no lock, no shared RMW.
            if self.lendable {
                // `auto`: the slot is lent by this thread while the call runs (the session
                // may have moved here since its last call).
                crate::gate_hook::reentered(&self.gate, &self.sh);
            }
            self.sh
                .tickets
                .store(self.tickets.reported(), Ordering::Relaxed);
            self.sh.bump(Counter::TicketReentries);
            self.sh.set_state(SessionState::InCall);
            return Ok(false);
        }
        if self.hold.is_some() {
            // Still holding a slot with no tickets left: a call that never exited (a `Call`
            // forgotten with `mem::forget`). Leave first, or the new admission's hold would
            // replace this one and its slot would stay counted for ever.
            self.leave();
        }
        self.admit()?;
        Ok(true)
    }

    /// Exit after one call: keep the slot while tickets remain (`auto`: while the quantum
    /// lasts, or past it if nobody waits), otherwise leave.
    #[inline]
    fn exit_call(&mut self) {
        // `auto`: between calls nobody lends the slot (the session may move to another
        // thread); a slot still lent (a loan never taken back) is not kept but left.
        if keeps_slot_after_call(
            &self.gate,
            &mut self.tickets,
            &mut self.hold,
            &mut self.long_stmt,
        ) && (!self.lendable || crate::gate_hook::call_ends(&self.sh))
        {
            self.sh.set_state(SessionState::DeclaredInside);
        } else {
            self.leave();
        }
    }

    /// Leaves for real: tickets to 0, the slot (if any) given back or handed to a waiter.
    fn leave(&mut self) {
        self.tickets.clear();
        self.lendable = false;
        if let Some(hold) = self.hold.take() {
            if self.gate.driver.is_auto() && crate::gate_hook::leave(&self.sh) {
                // Lent (by the thread that entered a call that moved here mid-call, or a loan
                // whose reclaim never ran): the loan gave it back, and it ends here (the
                // lender's reclaim will find nothing to take back, so it will not uncount the
                // step-out the loan counted).
                self.gate
                    .registry
                    .stepped_out
                    .fetch_sub(1, Ordering::Relaxed);
                self.gate.driver.forget_lent(hold);
                self.sh.tickets.store(0, Ordering::Relaxed);
                self.sh.set_state(SessionState::Outside);
                return;
            }
            give_back(&self.gate, &self.sh, hold);
        }
    }

    /// Statement end: leave, and forget what the statement declared.
    fn end_statement_inner(&mut self) {
        if std::mem::take(&mut self.in_wait) {
            finish_step_out(&self.gate, &self.sh, SessionState::Outside, 0);
        }
        self.in_call = false;
        self.leave();
        self.holds_locks = false;
        self.long_stmt = false;
        self.resume = None;
    }

    /// Leaves around blocking work and records why; [`finish_step_out`] ends it. Under
    /// `auto`, a step-out for work outside the engine keeps the slot (see `policy::auto`).
    fn begin_step_out(&mut self, reason: StepOutReason) {
        let was_inside = self.is_inside();
        let keeps = was_inside && self.gate.driver.keeps_slot_across(reason);
        self.kept_since = if keeps { self.sh.since_ns() } else { 0 };
        if !keeps {
            self.leave();
            if was_inside {
                // A step-out begun outside (a second one in the same call) keeps the rule
                // the first left pending (after a row-lock wait: the unchecked re-entry).
                self.resume = Some(reason);
            }
        }
        // A read-modify-write: a thread lending this session's slot counts its step-outs too.
        self.sh.bump_shared(Counter::StepOuts);
        self.sh.set_state_now(SessionState::SteppedOut(reason));
        self.gate
            .registry
            .stepped_out
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The step-out contract (see the module documentation): leave, run `f`, return its value.
    /// `in_call`: it began inside a call (a [`Call`]'s), not between calls.
    fn step_out<R>(&mut self, reason: StepOutReason, in_call: bool, f: impl FnOnce() -> R) -> R {
        self.begin_step_out(reason);
        // Ends the step-out when `f` returns or unwinds, so a panic inside `f` does not leave
        // the session shown as stepped out forever.
        struct Back<'a>(&'a GateInner, &'a SessionShared, SessionState, u64);
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                finish_step_out(self.0, self.1, self.2, self.3);
            }
        }
        let after = inside_state(self.hold.is_some(), in_call);
        let _back = Back(&self.gate, &self.sh, after, self.kept_since);
        f()
    }

    /// Enters the engine for one call, without a guard: for callers that cannot hold one (the
    /// C API, an engine whose enter and exit are separate functions). The same rules as
    /// [`Statement::enter`]: a ticket re-entry if tickets remain, otherwise an admission.
    /// Returns whether it was an admission. Pair it with [`Session::exit`]; end the statement
    /// with [`Session::end_statement`]. Do not mix these calls with the guards on one session.
    ///
    /// Until `end_statement`, every call is part of one statement: tickets (or `auto`'s quantum)
    /// carry over from call to call, and under `auto` a statement that once spent a whole
    /// quantum while others queued stays a long statement until it ends: whenever it holds a
    /// slot, that slot counts in the lane the controller keeps for long statements. A session that never calls `end_statement`
    /// is one statement for its whole life.
    ///
    /// ```
    /// use turnstile::{Gate, GateConfig, GateError, Misuse, Policy, StepOutReason};
    ///
    /// let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1).tickets(10))?;
    /// let mut s = gate.session();
    /// assert!(s.enter()?); // an admission
    /// s.wait_begin(StepOutReason::RowLockWait)?; // slot freed around the lock wait
    /// s.wait_end()?; // back in the call: one ticket, limit not checked
    /// s.exit()?;
    /// assert_eq!(s.exit(), Err(GateError::Misuse(Misuse::ExitWithoutEnter)));
    /// s.end_statement(); // force exit
    /// assert_eq!(gate.stats().inside, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enter(&mut self) -> Result<bool, GateError> {
        if self.in_wait {
            return Err(GateError::Misuse(Misuse::CallDuringWait));
        }
        if self.in_call {
            return Err(GateError::Misuse(Misuse::NestedEnter));
        }
        let admitted = self.enter_call()?;
        self.in_call = true;
        Ok(admitted)
    }

    /// Exits after a call begun with [`Session::enter`]: keeps the slot while tickets remain.
    pub fn exit(&mut self) -> Result<(), GateError> {
        if self.in_wait {
            return Err(GateError::Misuse(Misuse::CallDuringWait));
        }
        if !self.in_call {
            return Err(GateError::Misuse(Misuse::ExitWithoutEnter));
        }
        self.in_call = false;
        self.exit_call();
        Ok(())
    }

    /// Ends the statement: force exit (tickets to 0, the slot freed or handed on), and ends
    /// any call or declared wait still open, and drops a cancel no wait consumed (as the next
    /// [`Session::begin`] does for the guard API: the explicit calls have no `begin`, so this is
    /// their statement boundary). Always succeeds.
    pub fn end_statement(&mut self) {
        self.end_statement_inner();
        if self.sh.cancel.load(Ordering::Relaxed) {
            self.sh.cancel.store(false, Ordering::Relaxed);
        }
    }

    /// Declares a blocking wait (a row lock, disk I/O, the commit mutex): leaves the gate for
    /// its length, as [`Call::step_out`] does around a closure.
    pub fn wait_begin(&mut self, reason: StepOutReason) -> Result<(), GateError> {
        if self.in_wait {
            return Err(GateError::Misuse(Misuse::NestedWait));
        }
        self.begin_step_out(reason);
        self.in_wait = true;
        Ok(())
    }

    /// Ends a declared wait. Within a call (between [`Session::enter`] and
    /// [`Session::exit`]) the session re-enters at once, by the wait reason's rule (after a
    /// row-lock wait that began inside: without checking the limit, one ticket); the error is
    /// that admission's, and the wait is over either way. Outside a call the next `enter`
    /// re-enters by that rule.
    pub fn wait_end(&mut self) -> Result<(), GateError> {
        if !std::mem::take(&mut self.in_wait) {
            return Err(GateError::Misuse(Misuse::WaitEndWithoutBegin));
        }
        finish_step_out(
            &self.gate,
            &self.sh,
            inside_state(self.is_inside(), self.in_call),
            self.kept_since,
        );
        if self.in_call && !self.is_inside() {
            // On an error the call goes on outside the gate; its exit gives nothing back.
            self.admit()?;
        }
        Ok(())
    }

    /// Admission for a session without tickets, by the rule a pending step-out left (the
    /// unchecked re-entry after a row-lock wait) or the policy's.
    fn admit(&mut self) -> Result<(), GateError> {
        let resume = self.resume.take();
        // `auto` has its own rule for a session back from any wait (bounded), and an open
        // transaction admitted before comes back by it (see `set_in_transaction`).
        let back = resume.is_some() || (self.in_txn && self.txn_admitted);
        let after_wait = back
            .then(|| self.gate.driver.enter_after_wait(&self.sh, true))
            .flatten();
        if after_wait.is_none() && resume == Some(StepOutReason::RowLockWait) {
            let a = self.gate.driver.enter_unchecked();
            self.admitted(a, 0);
            return Ok(());
        }
        let mut at = Attempt::new(self.holds_locks);
        // Read before the policy decides, so that a raise made after the decision is seen.
        let generation = self.gate.raise_generation.load(Ordering::Acquire);
        let step = match after_wait {
            Some(step) => step,
            None => self.gate.driver.enter(&mut at, &self.sh, true),
        };
        match step {
            Step::Admitted(a) => {
                self.admitted(a, 0);
                Ok(())
            }
            Step::Reject(r) => {
                self.sh.set_state(SessionState::Outside);
                Err(rejected(r))
            }
            step => {
                let gate = self.gate.clone();
                self.admit_slow(&gate, at, step, generation)
            }
        }
    }

    #[cold]
    fn admit_slow(
        &mut self,
        gate: &GateInner,
        mut at: Attempt,
        mut step: Step,
        mut generation: u64,
    ) -> Result<(), GateError> {
        // Counted waiting until this returns, or unwinds (a guard: kept off the fast path).
        let _waiting = gate.registry.count_waiting();
        let start = Instant::now();
        let deadline = Deadline::new(start, self.wait_timeout, gate.config.queue_timeout);
        // The waiting states share one timestamp: when this admission began to wait. A queue
        // wait publishes its own state (under the queue lock).
        let mut waited = false;
        loop {
            let first_wait = !std::mem::replace(&mut waited, true);
            let publish = |state| {
                if first_wait {
                    self.sh.set_state_now(state)
                } else {
                    self.sh.set_state(state)
                }
            };
            match step {
                Step::Admitted(a) => {
                    self.admitted(a, start.elapsed().as_nanos() as u64);
                    return Ok(());
                }
                Step::Reject(r) => {
                    self.sh.set_state(SessionState::Outside);
                    return Err(rejected(r));
                }
                Step::Yield => {
                    self.sh.bump(Counter::Yields);
                    publish(SessionState::Yielding);
                    yield_now();
                }
                Step::Sleep(d) => {
                    self.sh.bump(Counter::Sleeps);
                    publish(SessionState::Sleeping);
                    match self.sleep(d, deadline, generation) {
                        Ok(true) => at.sleep_cut_short(),
                        Ok(false) => {}
                        Err(abort) => {
                            gate.driver.abandon(&mut at);
                            return Err(self.aborted(abort, start));
                        }
                    }
                }
                Step::Wait(id) => {
                    self.sh.bump(Counter::QueueWaits);
                    let a = self
                        .wait_handoff(gate, id, deadline)
                        .map_err(|abort| self.aborted(abort, start))?;
                    self.admitted(a, start.elapsed().as_nanos() as u64);
                    return Ok(());
                }
            }
            generation = gate.raise_generation.load(Ordering::Acquire);
            step = gate.driver.enter(&mut at, &self.sh, false);
        }
    }

    fn aborted(&self, abort: Abort, start: Instant) -> GateError {
        self.sh.bump(match abort {
            Abort::Cancelled => Counter::Cancellations,
            Abort::TimedOut | Abort::QueueTimeout(_) => Counter::Timeouts,
        });
        self.sh.set_state(SessionState::Outside);
        abort.error(start.elapsed())
    }

    /// Records an admission and takes what it grants.
    #[inline]
    fn admitted(&mut self, a: Admission, waited_ns: u64) {
        self.txn_admitted |= self.in_txn;
        self.tickets.grant(&a);
        let lendable = a.hold.is_counted() && self.gate.driver.is_auto();
        let mut hold = record_admission(&self.gate, &self.sh, a, waited_ns);
        if self.long_stmt {
            self.gate.driver.mark_long(&mut hold);
        }
        self.hold = Some(hold);
        self.lendable = lendable;
        if lendable {
            crate::gate_hook::admitted(&self.gate, &self.sh);
        }
    }

    /// Takes a pending cancel, if any.
    fn take_cancel(&self) -> bool {
        self.sh.cancel.load(Ordering::Relaxed) && self.sh.cancel.swap(false, Ordering::Acquire)
    }

    /// Sleeps `d` (or until the deadline), interruptibly: a cancel ends it with an error, a
    /// raise of the limit since `generation` (read before the policy chose to sleep) ends it
    /// early so the session re-checks (`Ok(true)`: cut short).
    fn sleep(&self, d: Duration, deadline: Deadline, generation: u64) -> Result<bool, Abort> {
        if self.take_cancel() {
            return Err(Abort::Cancelled);
        }
        let now = Instant::now();
        if deadline.at.is_some_and(|dl| now >= dl) {
            return Err(deadline.expired());
        }
        if d.is_zero() {
            // InnoDB's os_thread_sleep(0) gives up the CPU and returns.
            yield_now();
            return Ok(false);
        }
        // Under loom (no clock: a timed wait never times out) the sleep lasts until a raise or
        // a cancel notifies it, which makes a missed raise a deadlock the model reports.
        let until = deadline.at.map_or(now + d, |dl| dl.min(now + d));
        let mut w = lock(&self.sh.wake);
        loop {
            if self.take_cancel() {
                return Err(Abort::Cancelled);
            }
            if self.gate.raise_generation.load(Ordering::Acquire) != generation {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= until && !cfg!(loom) {
                return Ok(false);
            }
            w = self
                .sh
                .cv
                .wait_timeout(w, until.saturating_duration_since(now))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Blocks until wait `id` is released by a hand-off, or the wait is cancelled / times out
    /// ([`wait_handoff`]).
    fn wait_handoff(
        &self,
        gate: &GateInner,
        id: WaitId,
        deadline: Deadline,
    ) -> Result<Admission, Abort> {
        wait_handoff(gate, &self.sh, id, deadline, || self.take_cancel())
    }
}

/// A lent slot's reclaim queued as wait `id` (`gate_hook`): blocks until its hand-off, with
/// no deadline and no cancel (the lock is held and the call goes on), keeping the stall
/// watch like any queued wait, and returns the admission.
pub(crate) fn wait_reclaim(gate: &GateInner, sh: &SessionShared, id: WaitId) -> Admission {
    let no_deadline = Deadline {
        at: None,
        queue: None,
    };
    match wait_handoff(gate, sh, id, no_deadline, || false) {
        Ok(a) => a,
        Err(_) => unreachable!("a wait with no deadline and no cancel ends only by its hand-off"),
    }
}

/// Blocks until `sh`'s wait `id` is released by a hand-off, or the wait is cancelled
/// (`take_cancel`) / times out. Under `auto`, the waiter that keeps the stall watch wakes
/// every [`STALL_PERIOD`] to run the stall check; the watch passes to another waiter (woken
/// to take it) when its keeper leaves the queue.
fn wait_handoff(
    gate: &GateInner,
    sh: &SessionShared,
    id: WaitId,
    deadline: Deadline,
    mut take_cancel: impl FnMut() -> bool,
) -> Result<Admission, Abort> {
    // Under loom a timed wait never times out: the model checks hand-offs, not the clock.
    let checks_stalls = gate.driver.checks_stalls() && !cfg!(loom);
    let mut next_check: Option<Instant> = None;
    let mut w = lock(&sh.wake);
    let outcome = loop {
        if w.released == Some(id) {
            break Ok(w.handoff_ns);
        }
        if take_cancel() {
            break Err(Abort::Cancelled);
        }
        let now = Instant::now();
        if deadline.at.is_some_and(|dl| now >= dl) {
            break Err(deadline.expired());
        }
        // Read under the wake lock: a nudge that passes the watch here takes that lock
        // before it notifies, so it is either seen now or wakes this wait.
        if !(checks_stalls && gate.driver.is_stall_watch(id)) {
            next_check = None;
        } else if next_check.is_none() {
            next_check = Some(now + STALL_PERIOD);
        }
        if let Some(check) = next_check {
            if now >= check {
                drop(w);
                gate.driver.stall_check(sh, id);
                next_check = Some(now + STALL_PERIOD);
                w = lock(&sh.wake);
                continue;
            }
        }
        let until = match (deadline.at, next_check) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        w = match until {
            None => sh.cv.wait(w).unwrap_or_else(|e| e.into_inner()),
            Some(until) => sh
                .cv
                .wait_timeout(w, until.saturating_duration_since(now))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0),
        };
    };
    drop(w);
    match outcome {
        Ok(handoff_ns) => {
            let latency = gate.driver.precise_ns().saturating_sub(handoff_ns);
            gate.registry.wake.record(latency);
            Ok(gate.driver.finish_wait(id))
        }
        // A hand-off may have chosen this wait in the same instant: then it is inside.
        Err(abort) => gate.driver.cancel_wait(id).ok_or(abort),
    }
}

/// After a call's exit, for either kind of session: whether it keeps its slot
/// ([`Tickets::keeps_slot`]). At a chunk's end past the quantum `auto` decides
/// ([`crate::policy::auto::AutoCore::yields_quantum`]), which may mark `hold` long; the
/// session then remembers that its statement is long (`long_stmt`). The gate's own clock:
/// a quantum's start is compared with the times the gate's waiters queued at. Both closures
/// run only at a chunk's end, never on a ticket re-entry.
#[inline]
pub(crate) fn keeps_slot_after_call(
    gate: &GateInner,
    tickets: &mut Tickets,
    hold: &mut Option<Hold>,
    long_stmt: &mut bool,
) -> bool {
    let driver = &gate.driver;
    tickets.keeps_slot(
        || driver.precise_ns(),
        |start| {
            let yields = driver.yields_quantum(start, hold.as_mut());
            *long_stmt |= hold.as_ref().is_some_and(Hold::is_long);
            yields
        },
    )
}

/// Publishes an admission (state, tickets, counters, the wait histogram) for a thread or an
/// async session, and returns what it holds. `waited_ns == 0`: it did not wait.
#[inline]
pub(crate) fn record_admission(
    gate: &GateInner,
    sh: &SessionShared,
    a: Admission,
    waited_ns: u64,
) -> Hold {
    sh.tickets.store(a.tickets, Ordering::Relaxed);
    sh.set_state_now(SessionState::InCall);
    match a.by {
        AdmittedBy::Lifo => sh.bump(Counter::LifoAdmissions),
        AdmittedBy::Forced => sh.bump(Counter::ForcedEntries),
        AdmittedBy::Unchecked => sh.bump(Counter::UncheckedReentries),
        AdmittedBy::Free | AdmittedBy::HandOff | AdmittedBy::Unlimited => {}
    }
    if waited_ns == 0 {
        // The fast path: a count of its own, so the histogram's zeros never go backwards.
        sh.bump(Counter::AdmissionsWithoutWait);
    } else {
        gate.registry.wait.record(waited_ns);
    }
    sh.bump(Counter::Admissions);
    a.hold
}

/// Gives back a session's hold for real (tickets already cleared by the caller): the session
/// is shown outside.
pub(crate) fn give_back(gate: &GateInner, sh: &SessionShared, hold: Hold) {
    sh.tickets.store(0, Ordering::Relaxed);
    sh.set_state(SessionState::Outside);
    gate.driver.exit(hold);
}

/// Ends a step-out's bookkeeping: the session is shown as `after` (outside, or, if `auto` kept
/// its slot across the step-out, in its call or declared inside since `kept_since`).
fn finish_step_out(gate: &GateInner, sh: &SessionShared, after: SessionState, kept_since: u64) {
    if after != SessionState::Outside && kept_since != 0 {
        // The slot was kept: the inside state goes on from the admission.
        sh.set_state_since(after, kept_since);
    } else {
        sh.set_state(after);
    }
    gate.registry.stepped_out.fetch_sub(1, Ordering::Relaxed);
}

/// A session's state once a step-out ends: in its call, holding its slot between calls, or
/// outside.
fn inside_state(inside: bool, in_call: bool) -> SessionState {
    match (inside, in_call) {
        (true, true) => SessionState::InCall,
        (true, false) => SessionState::DeclaredInside,
        (false, _) => SessionState::Outside,
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _retire = Retire {
            gate: self.gate.clone(),
            sh: self.sh.clone(),
            current: true,
        };
        self.end_statement_inner();
    }
}

/// Takes a dropped session out of its gate's registry (and, for a thread session, out of
/// `gate_hook`'s current session) when it goes out of scope: also when giving back the
/// session's slot panics (a foreign waker's panic, which the hand-off's delivery passes on),
/// or the gate would list a dead session for ever.
pub(crate) struct Retire {
    pub(crate) gate: Arc<GateInner>,
    pub(crate) sh: Arc<SessionShared>,
    pub(crate) current: bool,
}

impl Drop for Retire {
    fn drop(&mut self) {
        if self.current {
            crate::gate_hook::forget(&self.sh);
        }
        self.gate.registry.retire(&self.sh);
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
    /// remain, otherwise an admission by the gate's policy, which may sleep or queue (or, after
    /// a row-lock wait that began inside, the unchecked re-entry). Dropping the returned
    /// [`Call`] exits.
    #[inline]
    pub fn enter(&mut self) -> Result<Call<'_>, GateError> {
        // Mixed with the explicit calls: the same refusals as `Session::enter`.
        if self.session.in_wait {
            return Err(GateError::Misuse(Misuse::CallDuringWait));
        }
        if self.session.in_call {
            return Err(GateError::Misuse(Misuse::NestedEnter));
        }
        let admitted = self.session.enter_call()?;
        Ok(Call {
            session: &mut *self.session,
            admitted,
        })
    }

    /// Leaves the gate for work outside the engine (sending results, a file sort), runs `f`
    /// and returns its value; the next [`Statement::enter`] is an admission. The same contract
    /// as [`Call::step_out`]: after a [`StepOutReason::RowLockWait`] that began inside, that
    /// admission re-enters without checking the limit, with one ticket.
    pub fn step_out<R>(&mut self, reason: StepOutReason, f: impl FnOnce() -> R) -> R {
        self.session.step_out(reason, false, f)
    }

    /// Declares that this statement holds row locks or latches (until it ends). InnoDB lets
    /// such a thread skip the sleep before queueing (`classic`, `flifo`) and enter right after
    /// its yield (`timer`), so that others are not left waiting on its locks.
    pub fn set_holds_locks(&mut self, holds: bool) {
        self.session.holds_locks = holds;
    }

    /// Tickets left.
    pub fn tickets(&self) -> u32 {
        self.session.tickets.reported()
    }

    /// The statement's session holds a slot.
    pub fn is_inside(&self) -> bool {
        self.session.is_inside()
    }
}

impl Drop for Statement<'_> {
    fn drop(&mut self) {
        self.session.end_statement_inner();
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
        self.session.tickets.reported()
    }

    /// The call holds its slot (false after a step-out until [`Call::resume`]).
    pub fn is_inside(&self) -> bool {
        self.session.is_inside()
    }

    /// Frees the slot around blocking work `f` (a row-lock wait, disk I/O, the commit mutex),
    /// runs it and returns its value — always: a durable commit done in `f` is never reported
    /// as a gate error. The call is then outside the gate; [`Call::resume`] re-enters to go on
    /// inside the engine, by the policy's rule for `reason` (after a
    /// [`StepOutReason::RowLockWait`] every counted policy re-enters without checking the
    /// limit, with one ticket: InnoDB's `srv_conc_force_enter_innodb`, 5.0–8.0, and MySQL
    /// 5.4's timer gate). A call dropped without resuming is not re-admitted.
    ///
    /// ```
    /// use turnstile::{Gate, GateConfig, Policy, StepOutReason};
    ///
    /// let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1))?;
    /// let mut session = gate.session();
    /// let mut stmt = session.begin();
    /// let mut call = stmt.enter()?;
    /// let granted = call.step_out(StepOutReason::RowLockWait, || true /* wait for the lock */);
    /// assert!(granted && !call.is_inside());
    /// call.resume()?; // back inside, with one ticket, without checking the limit
    /// assert!(call.is_inside());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn step_out<R>(&mut self, reason: StepOutReason, f: impl FnOnce() -> R) -> R {
        self.session.step_out(reason, true, f)
    }

    /// Re-enters after a [`Call::step_out`] (nothing to do if the call is inside), by the
    /// step-out reason's rule. A wait here may be cancelled or time out; the call then stays
    /// outside and its drop exits nothing.
    pub fn resume(&mut self) -> Result<(), GateError> {
        if self.session.is_inside() {
            return Ok(());
        }
        self.session.admit()
    }
}

impl Drop for Call<'_> {
    #[inline]
    fn drop(&mut self) {
        self.session.exit_call();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::{Gate, GateConfig, Policy, SessionState, StepOutReason};

    /// A timestamp the coarse clock never reads: whoever restores the admission's time puts
    /// back exactly this.
    const MARK: u64 = 1;

    #[test]
    fn a_step_out_or_a_loan_that_keeps_the_slot_restores_the_admissions_timestamp() {
        let g = Gate::new(
            GateConfig::new(Policy::Auto)
                .limit(1)
                .quantum(std::time::Duration::from_secs(1)),
        )
        .unwrap();
        let mut s = g.session();
        let mut stmt = s.begin();
        let mut call = stmt.enter().unwrap();
        let seen = |call: &super::Call<'_>| {
            (
                call.session.sh.state(),
                call.session.sh.since_ns(),
                call.session
                    .sh
                    .lent_since
                    .load(std::sync::atomic::Ordering::Relaxed),
            )
        };
        call.session.sh.set_state_since(SessionState::InCall, MARK);
        // Work outside the engine keeps the slot: back in its call, since its admission.
        call.step_out(StepOutReason::SendingResults, || {});
        assert_eq!(seen(&call).0, SessionState::InCall);
        assert_eq!(seen(&call).1, MARK);
        // A lock wait lends the slot (its own state and time), the reclaim restores both.
        crate::gate_hook::lend();
        let (state, since, lent) = seen(&call);
        assert_eq!(state, SessionState::SteppedOut(StepOutReason::LockWait));
        assert_ne!(since, MARK);
        assert_eq!(lent, MARK);
        crate::gate_hook::reclaim();
        assert_eq!((seen(&call).0, seen(&call).1), (SessionState::InCall, MARK));
        drop(call);
        // Between calls (the slot kept for the quantum), a step-out comes back to that state,
        // its time the admission's too.
        stmt.step_out(StepOutReason::FileSort, || {});
        assert_eq!(s_state(&stmt), (SessionState::DeclaredInside, MARK));
    }

    fn s_state(stmt: &super::Statement<'_>) -> (SessionState, u64) {
        (stmt.session.sh.state(), stmt.session.sh.since_ns())
    }
}
