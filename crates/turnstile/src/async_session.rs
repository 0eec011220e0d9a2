//! Async sessions (feature `async`): the gate for tasks on any async runtime.
//!
//! An [`AsyncSession`] is the [`crate::Session`] of a task: the same tickets, the same policy
//! cores through the same driver, the same monitoring record. Only the waiting differs:
//!
//! * **Queue policies** (`classic`, `flifo`): a queued enter registers its task's [`Waker`] in
//!   the session's wake record; the exit that hands it a slot marks it released under that
//!   record's lock and wakes the waker after dropping it (`Driver::deliver`), exactly where a
//!   thread session's condition variable is notified. The pending future re-registers its
//!   waker on every poll (kept when it [`Waker::will_wake`] the same task).
//! * **Sleeps** (`polling`, `timer`, and the one sleep before queueing of `classic`/`flifo`
//!   with a non-zero sleep delay) need a timer, which the runtime owns: the caller supplies a
//!   [`Sleeper`]. Without one, such a gate refuses to make the session
//!   ([`GateError::NeedsTimer`]). A raise of the limit wakes a sleeping enter early, as it
//!   does a sleeping thread. A yield (`timer`'s, or a zero-length sleep) wakes its own task
//!   and returns `Pending` once.
//!
//! **Cancellation** is dropping the [`Enter`] future. A pending enter is in exactly one of
//! three places: a yield, a sleep (the core counts it a sleeper), or the queue under a
//! [`WaitId`]. Its drop takes it out of that place: a sleeper is abandoned (the core's count
//! goes down), a queued wait is cancelled under the queue lock. The queue lock orders the
//! cancel against every hand-off: either the cancel comes first, and the waiter leaves the
//! queue uncounted (no later exit can choose it), or a hand-off came first and already counted
//! the slot inside on the waiter's behalf, and then `cancel_wait` returns that admission and
//! the drop gives the slot straight back through `Driver::exit`, which hands it to the next
//! waiter. Either way the slot is neither leaked nor counted twice: the hold a hand-off made
//! is consumed exactly once, by the future that finishes the wait or by the drop. (As with
//! any future, `mem::forget` of a pending enter skips its drop and keeps its place for good.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::config::Policy;
use crate::error::GateError;
use crate::gate::Gate;
use crate::inner::GateInner;
use crate::monitor::{Counter, SessionState};
use crate::policy::{Admission, Attempt, Hold, Step, Tickets, WaitId};
use crate::registry::SessionShared;
use crate::session::{give_back, keeps_slot_after_call, record_admission, Retire};
use crate::sync::{lock, Arc};
use std::sync::atomic::Ordering;

/// The future a [`Sleeper`] returns: completes when the duration has passed.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A timer supplied by the caller, for the policies that sleep between checks: called with a
/// duration, it returns a future that completes after it (on tokio,
/// `Sleeper::new(|d| Box::pin(tokio::time::sleep(d)))`). Cheap to clone.
#[derive(Clone)]
pub struct Sleeper(Arc<dyn Fn(Duration) -> SleepFuture + Send + Sync>);

impl Sleeper {
    /// A sleeper from a function returning a sleep future.
    pub fn new(f: impl Fn(Duration) -> SleepFuture + Send + Sync + 'static) -> Sleeper {
        Sleeper(Arc::new(f))
    }

    fn sleep(&self, d: Duration) -> SleepFuture {
        (self.0)(d)
    }
}

impl std::fmt::Debug for Sleeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sleeper")
    }
}

/// Whether a gate with this configuration can ask an admission to sleep.
fn needs_timer(gate: &GateInner) -> bool {
    let c = &gate.config;
    match c.policy {
        Policy::Polling | Policy::Timer => true,
        Policy::Classic | Policy::Flifo => !c.sleep_delay.is_zero(),
        // `auto` never sleeps: it admits, queues or refuses.
        Policy::Unlimited | Policy::Auto => false,
    }
}

impl Gate {
    /// A new async session with a label shown in status output, for a gate that never asks
    /// an admission to sleep: `auto`, `classic` or `flifo` with a zero sleep delay, or
    /// `unlimited`.
    /// Any other gate refuses with [`GateError::NeedsTimer`]: use
    /// [`Gate::async_session_with_sleeper`].
    pub fn async_session(&self, label: impl Into<String>) -> Result<AsyncSession, GateError> {
        if needs_timer(&self.inner) {
            return Err(GateError::NeedsTimer {
                policy: self.inner.config.policy,
            });
        }
        Ok(self.new_async_session(label.into(), None))
    }

    /// A new async session that sleeps, when its policy says so, on the caller's timer.
    pub fn async_session_with_sleeper(
        &self,
        label: impl Into<String>,
        sleeper: Sleeper,
    ) -> AsyncSession {
        self.new_async_session(label.into(), Some(sleeper))
    }

    fn new_async_session(&self, label: String, sleeper: Option<Sleeper>) -> AsyncSession {
        let sh = self.new_shared(label);
        sh.is_async.store(true, Ordering::Relaxed);
        AsyncSession {
            gate: self.inner.clone(),
            sh,
            tickets: Tickets::default(),
            hold: None,
            holds_locks: false,
            long_stmt: false,
            sleeper,
            in_txn: false,
            txn_admitted: false,
        }
    }
}

/// One task's handle on a [`Gate`]: its tickets and its slot, as a [`crate::Session`] is a
/// thread's. Made by [`Gate::async_session`] or [`Gate::async_session_with_sleeper`].
///
/// [`AsyncSession::enter`] is one call into the engine; the returned [`AsyncCall`]'s drop
/// exits, keeping the slot while tickets remain. [`AsyncSession::end_statement`] is the
/// statement end (the force exit); so is dropping the session. An enter with tickets left is
/// ready at its first poll without touching anything shared; without tickets it is an
/// admission by the gate's policy, which may queue (woken by the hand-off) or sleep (on the
/// [`Sleeper`]). Dropping a pending enter cancels it safely — to bound a wait, race it
/// against your runtime's timer (`tokio::time::timeout`).
///
/// `Send`; used by one task at a time (its methods take `&mut self`).
///
/// ```
/// use std::future::Future;
/// use std::pin::pin;
/// use std::sync::Arc;
/// use std::task::{Context, Poll, Wake};
/// use turnstile::{Gate, GateConfig, Policy};
///
/// // Any executor will do; this one blocks the calling thread.
/// fn block_on<F: Future>(f: F) -> F::Output {
///     struct Unpark(std::thread::Thread);
///     impl Wake for Unpark {
///         fn wake(self: Arc<Self>) {
///             self.0.unpark();
///         }
///     }
///     let waker = Arc::new(Unpark(std::thread::current())).into();
///     let mut cx = Context::from_waker(&waker);
///     let mut f = pin!(f);
///     loop {
///         match f.as_mut().poll(&mut cx) {
///             Poll::Ready(v) => return v,
///             Poll::Pending => std::thread::park(),
///         }
///     }
/// }
///
/// // A queue policy without the sleep before queueing needs no timer.
/// let gate = Gate::new(
///     GateConfig::new(Policy::Classic)
///         .limit(4)
///         .tickets(100)
///         .sleep_delay(std::time::Duration::ZERO),
/// )?;
/// let mut session = gate.async_session("task-1")?;
/// block_on(async {
///     for _row in 0..10 {
///         let call = session.enter().await?; // the first is an admission, then tickets
///         // ... one call into the engine ...
///         drop(call); // exit: the slot is kept while tickets remain
///     }
///     assert_eq!(session.tickets(), 91); // 1 admission granting 100, then 9 re-entries
///     session.end_statement(); // force exit: the slot is freed
///     Ok::<(), turnstile::GateError>(())
/// })?;
/// assert_eq!(gate.stats().inside, 0);
/// assert_eq!(gate.stats().counters.admissions, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AsyncSession {
    gate: Arc<GateInner>,
    sh: Arc<SessionShared>,
    tickets: Tickets,
    hold: Option<Hold>,
    holds_locks: bool,
    /// `auto`: the current statement spent a whole quantum with threads queued (a long
    /// statement); its holds are marked as such, also after it gave way and came back.
    long_stmt: bool,
    sleeper: Option<Sleeper>,
    /// Declared by [`AsyncSession::set_in_transaction`].
    in_txn: bool,
    /// The open transaction has been admitted once (see [`crate::Session::set_in_transaction`]).
    txn_admitted: bool,
}

impl std::fmt::Debug for AsyncSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSession")
            .field("id", &self.sh.id)
            .field("tickets", &self.tickets.reported())
            .field("inside", &self.hold.is_some())
            .field("sleeper", &self.sleeper.is_some())
            .finish_non_exhaustive()
    }
}

impl AsyncSession {
    /// The session's id (as shown in status output).
    pub fn id(&self) -> u64 {
        self.sh.id
    }

    /// Tickets left.
    pub fn tickets(&self) -> u32 {
        self.tickets.reported()
    }

    /// The session holds a slot (or is admitted while unlimited).
    pub fn is_inside(&self) -> bool {
        self.hold.is_some()
    }

    /// Declares that the current statement holds row locks or latches, until
    /// [`AsyncSession::end_statement`] (see [`crate::Statement::set_holds_locks`]).
    pub fn set_holds_locks(&mut self, holds: bool) {
        self.holds_locks = holds;
    }

    /// Declares whether the task is inside a multi-statement transaction (at `BEGIN`, and
    /// with `false` at `COMMIT`/`ROLLBACK`): under `auto`, once the transaction has been
    /// admitted, its later admissions come back ahead of the queue, bounded as for a thread's
    /// session ([`crate::Session::set_in_transaction`] says how). Other policies ignore it.
    pub fn set_in_transaction(&mut self, in_txn: bool) {
        self.in_txn = in_txn;
        // A new transaction (or none) waits its turn.
        self.txn_admitted = false;
    }

    /// Whether [`AsyncSession::set_in_transaction`] declared a transaction open.
    pub fn in_transaction(&self) -> bool {
        self.in_txn
    }

    /// Enters the engine for one call. The future resolves to an [`AsyncCall`] whose drop
    /// exits; dropping the future before it resolves cancels the wait (counted as a
    /// cancellation), passing on a slot handed to it in the same instant.
    pub fn enter(&mut self) -> Enter<'_> {
        Enter {
            session: Some(self),
            slow: None,
        }
    }

    /// Statement end: force exit (tickets to 0, the slot freed or handed to a waiter), and
    /// forgets what the statement declared.
    pub fn end_statement(&mut self) {
        self.leave();
        self.holds_locks = false;
        self.long_stmt = false;
    }

    /// Leaves for real: tickets to 0, the slot (if any) given back or handed on.
    fn leave(&mut self) {
        self.tickets.clear();
        if let Some(hold) = self.hold.take() {
            give_back(&self.gate, &self.sh, hold);
        }
    }

    /// Exit after one call: keep the slot while tickets remain, otherwise leave.
    fn exit_call(&mut self) {
        if keeps_slot_after_call(
            &self.gate,
            &mut self.tickets,
            &mut self.hold,
            &mut self.long_stmt,
        ) {
            self.sh.set_state(SessionState::DeclaredInside);
        } else {
            self.leave();
        }
    }

    fn admitted(&mut self, a: Admission, waited_ns: u64) {
        self.txn_admitted |= self.in_txn;
        self.tickets.grant(&a);
        let mut hold = record_admission(&self.gate, &self.sh, a, waited_ns);
        if self.long_stmt {
            self.gate.driver.mark_long(&mut hold);
        }
        self.hold = Some(hold);
    }

    /// The first poll of an enter: a ticket re-entry, an admission at once, or the start of
    /// a wait (`slow` is set while it lasts).
    fn poll_start(
        &mut self,
        slow: &mut Option<Slow>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<bool, GateError>> {
        // Tickets are granted only with a hold and cleared with it: tickets left means inside.
        if self.tickets.try_reenter() {
            self.sh
                .tickets
                .store(self.tickets.reported(), Ordering::Relaxed);
            self.sh.bump(Counter::TicketReentries);
            self.sh.set_state(SessionState::InCall);
            return Poll::Ready(Ok(false));
        }
        if self.hold.is_some() {
            // Still holding a slot with no tickets left: an `AsyncCall` forgotten with
            // `mem::forget`. Leave first, or the new admission's hold would replace this one
            // and its slot would stay counted for ever.
            self.leave();
        }
        let mut at = Attempt::new(self.holds_locks);
        // Read before the policy decides, so that a raise made after the decision is seen.
        let generation = self.gate.raise_generation.load(Ordering::Acquire);
        // `auto`: an open transaction admitted before comes back by the rule after a wait.
        let back = (self.in_txn && self.txn_admitted)
            .then(|| self.gate.driver.enter_after_wait(&self.sh, true))
            .flatten();
        let step = match back {
            Some(step) => step,
            None => self.gate.driver.enter(&mut at, &self.sh, true),
        };
        match step {
            Step::Admitted(a) => {
                self.admitted(a, 0);
                Poll::Ready(Ok(true))
            }
            Step::Reject(r) => {
                self.sh.set_state(SessionState::Outside);
                Poll::Ready(Err(crate::session::rejected(r)))
            }
            step => {
                self.gate.registry.waiting.fetch_add(1, Ordering::Relaxed);
                let s = slow.insert(Slow {
                    at,
                    start: Instant::now(),
                    generation,
                    first: true,
                    registered: false,
                    yielded: false,
                    pending: Pending::Yield,
                });
                let r = self.drive(s, Some(step), cx);
                if r.is_ready() {
                    self.end_slow(slow.take().expect("set above"));
                }
                r
            }
        }
    }

    /// A later poll of a pending enter.
    fn poll_slow(
        &mut self,
        slow: &mut Option<Slow>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<bool, GateError>> {
        let s = slow.as_mut().expect("poll_slow without a wait");
        let r = self.drive(s, None, cx);
        if r.is_ready() {
            self.end_slow(slow.take().expect("checked above"));
        }
        r
    }

    /// Performs one step: `step` is a fresh decision; `None` first resumes the pending one
    /// and, if it is over, asks the policy for the next. A step that must wait leaves the
    /// future `Pending`; one already over when first polled (a timer that fires at once, a
    /// raise) goes back to the executor once before the policy is asked again, so that a
    /// policy that keeps saying "sleep" never spins inside one poll.
    fn drive(
        &mut self,
        s: &mut Slow,
        step: Option<Step>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<bool, GateError>> {
        let step = match step {
            Some(step) => step,
            None => match self.poll_pending(s, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(a)) => return Poll::Ready(Ok(self.admitted_after_wait(s, a))),
                Poll::Ready(None) => self.next_step(s),
            },
        };
        let first = std::mem::replace(&mut s.first, false);
        let publish = |state| {
            if first {
                self.sh.set_state_now(state)
            } else {
                self.sh.set_state(state)
            }
        };
        match step {
            Step::Admitted(a) => return Poll::Ready(Ok(self.admitted_after_wait(s, a))),
            Step::Reject(r) => {
                self.sh.set_state(SessionState::Outside);
                return Poll::Ready(Err(crate::session::rejected(r)));
            }
            Step::Yield => {
                self.sh.bump(Counter::Yields);
                publish(SessionState::Yielding);
                s.pending = Pending::Yield;
            }
            Step::Sleep(d) => {
                self.sh.bump(Counter::Sleeps);
                publish(SessionState::Sleeping);
                if d.is_zero() {
                    // InnoDB's os_thread_sleep(0): give up the CPU and retry.
                    s.pending = Pending::Yield;
                } else if let Some(sleeper) = &self.sleeper {
                    s.pending = Pending::Sleep(sleeper.sleep(d));
                } else {
                    // Refused at session creation; kept as a clear error, not a hang.
                    self.gate.driver.abandon(&mut s.at);
                    self.sh.set_state(SessionState::Outside);
                    return Poll::Ready(Err(GateError::NeedsTimer {
                        policy: self.gate.config.policy,
                    }));
                }
            }
            Step::Wait(id) => {
                // The driver published `Queued` under the queue lock.
                self.sh.bump(Counter::QueueWaits);
                s.pending = Pending::Queue(id);
            }
        }
        match self.poll_pending(s, cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(a)) => Poll::Ready(Ok(self.admitted_after_wait(s, a))),
            Poll::Ready(None) => {
                s.pending = Pending::Yield;
                s.yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    /// Asks the policy again after a yield or a sleep.
    fn next_step(&self, s: &mut Slow) -> Step {
        s.generation = self.gate.raise_generation.load(Ordering::Acquire);
        self.gate.driver.enter(&mut s.at, &self.sh, false)
    }

    /// Polls what the enter waits for: `Ready(Some)` a hand-off's admission, `Ready(None)`
    /// time to ask the policy again.
    fn poll_pending(&self, s: &mut Slow, cx: &mut Context<'_>) -> Poll<Option<Admission>> {
        match &mut s.pending {
            Pending::Yield if !s.yielded => {
                s.yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Pending::Yield => {
                s.yielded = false;
                Poll::Ready(None)
            }
            Pending::Sleep(sleep) => {
                // Registered before the generation is read, under the lock a raise takes to
                // wake sleepers: a raise either is seen here or wakes this task.
                register(&mut lock(&self.sh.wake).waker, cx.waker());
                s.registered = true;
                if self.gate.raise_generation.load(Ordering::Acquire) != s.generation {
                    s.at.sleep_cut_short();
                    return Poll::Ready(None);
                }
                sleep.as_mut().poll(cx).map(|()| None)
            }
            Pending::Queue(id) => {
                let id = *id;
                let mut w = lock(&self.sh.wake);
                if w.released != Some(id) {
                    register(&mut w.waker, cx.waker());
                    s.registered = true;
                    return Poll::Pending;
                }
                let handoff_ns = w.handoff_ns;
                w.waker = None;
                drop(w);
                s.registered = false;
                let latency = self.gate.driver.precise_ns().saturating_sub(handoff_ns);
                self.gate.registry.wake.record(latency);
                Poll::Ready(Some(self.gate.driver.finish_wait(id)))
            }
        }
    }

    fn admitted_after_wait(&mut self, s: &Slow, a: Admission) -> bool {
        // At least 1 ns: this admission waited.
        let waited = (s.start.elapsed().as_nanos() as u64).max(1);
        self.admitted(a, waited);
        true
    }

    /// The wait is over (admitted or refused): it no longer counts as waiting.
    fn end_slow(&self, s: Slow) {
        if s.registered {
            lock(&self.sh.wake).waker = None;
        }
        self.gate.registry.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// A pending enter is dropped: take it out of wherever it waits. See the module
    /// documentation for why a slot handed to it in the same instant is passed on exactly
    /// once.
    fn cancel(&mut self, mut s: Slow) {
        match std::mem::replace(&mut s.pending, Pending::Yield) {
            Pending::Queue(id) => {
                if let Some(a) = self.gate.driver.cancel_wait(id) {
                    // A hand-off chose this wait before the cancel: it holds a slot no caller
                    // will use. Give it straight back; the exit hands it to the next waiter.
                    self.gate.driver.exit(a.hold);
                }
            }
            Pending::Yield | Pending::Sleep(_) => self.gate.driver.abandon(&mut s.at),
        }
        self.sh.bump(Counter::Cancellations);
        self.sh.set_state(SessionState::Outside);
        self.end_slow(s);
    }
}

impl Drop for AsyncSession {
    fn drop(&mut self) {
        let _retire = Retire {
            gate: self.gate.clone(),
            sh: self.sh.clone(),
            current: false,
        };
        self.leave();
    }
}

/// Keeps `slot` holding a waker for `new`'s task.
fn register(slot: &mut Option<Waker>, new: &Waker) {
    match slot {
        Some(w) if w.will_wake(new) => {}
        _ => *slot = Some(new.clone()),
    }
}

/// A pending enter's progress through its admission.
struct Slow {
    at: Attempt,
    start: Instant,
    /// The raise generation read before the policy's last decision.
    generation: u64,
    /// No state has been published for this wait yet (its first one carries the time).
    first: bool,
    /// A waker may be registered in the session's wake record.
    registered: bool,
    /// A `Yield` has woken its task and returned `Pending` once.
    yielded: bool,
    pending: Pending,
}

enum Pending {
    /// Retry at the next poll (after waking itself once).
    Yield,
    /// Sleeping on the caller's timer (counted a sleeper by the core).
    Sleep(SleepFuture),
    /// Queued under this id until a hand-off releases it.
    Queue(WaitId),
}

/// The future of [`AsyncSession::enter`]. Dropping it while pending cancels the wait: see the
/// module documentation of the cancellation invariant.
#[must_use = "futures do nothing unless polled"]
pub struct Enter<'s> {
    /// `None` once resolved.
    session: Option<&'s mut AsyncSession>,
    slow: Option<Slow>,
}

impl std::fmt::Debug for Enter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enter")
            .field("resolved", &self.session.is_none())
            .field("waiting", &self.slow.is_some())
            .finish_non_exhaustive()
    }
}

impl<'s> Future for Enter<'s> {
    type Output = Result<AsyncCall<'s>, GateError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every field is Unpin (the sleep future is boxed), so the future is too.
        let this = self.get_mut();
        let session = this
            .session
            .as_deref_mut()
            .expect("Enter polled after it resolved");
        let r = if this.slow.is_none() {
            session.poll_start(&mut this.slow, cx)
        } else {
            session.poll_slow(&mut this.slow, cx)
        };
        match r {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                let session = this.session.take().expect("checked above");
                Poll::Ready(r.map(|admitted| AsyncCall { session, admitted }))
            }
        }
    }
}

impl Drop for Enter<'_> {
    fn drop(&mut self) {
        if let (Some(session), Some(slow)) = (self.session.as_deref_mut(), self.slow.take()) {
            session.cancel(slow);
        }
    }
}

/// One call inside the engine, from [`AsyncSession::enter`]. Dropping it exits: the session
/// keeps its slot while it has tickets, and leaves otherwise.
#[must_use = "dropping the call exits the gate at once"]
pub struct AsyncCall<'s> {
    session: &'s mut AsyncSession,
    admitted: bool,
}

impl std::fmt::Debug for AsyncCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncCall")
            .field("admitted", &self.admitted)
            .field("session", &self.session)
            .finish()
    }
}

impl AsyncCall<'_> {
    /// This enter was an admission (not a ticket re-entry).
    pub fn admitted(&self) -> bool {
        self.admitted
    }

    /// Tickets left; when 0, dropping this call leaves the gate.
    pub fn tickets(&self) -> u32 {
        self.session.tickets.reported()
    }
}

impl Drop for AsyncCall<'_> {
    fn drop(&mut self) {
        self.session.exit_call();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GateConfig, Policy};
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::task::Wake;

    /// A waker that records whether the gate's live-session lock was held when it was woken
    /// (the test is single-threaded, so a held lock is held by the waking call itself).
    struct Probe {
        gate: Arc<GateInner>,
        wakes: AtomicUsize,
        under_registry_lock: AtomicBool,
    }

    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }

        fn wake_by_ref(self: &Arc<Self>) {
            if self.gate.registry.live_is_locked() {
                self.under_registry_lock.store(true, Ordering::SeqCst);
            }
            self.wakes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A raise wakes an async sleeper, whose waker is foreign code (an inline executor may
    /// poll the task right there, and the task may drop its session or make a new one, both
    /// of which take the registry lock): it must not run under the registry lock, or that
    /// task deadlocks the raising thread. `Driver::deliver` already wakes outside every lock.
    #[test]
    fn a_raise_wakes_async_sleepers_outside_the_registry_lock() {
        let gate = Gate::new(GateConfig::new(Policy::Polling).limit(1).tickets(1)).unwrap();
        let never = Sleeper::new(|_| Box::pin(std::future::pending()) as SleepFuture);
        let mut a = gate.async_session_with_sleeper("a", never.clone());
        let mut b = gate.async_session_with_sleeper("b", never);
        let probe = Arc::new(Probe {
            gate: gate.inner.clone(),
            wakes: AtomicUsize::new(0),
            under_registry_lock: AtomicBool::new(false),
        });
        let waker = Waker::from(probe.clone());
        let mut cx = Context::from_waker(&waker);
        {
            let mut fa = a.enter();
            assert!(Pin::new(&mut fa).poll(&mut cx).is_ready(), "room for a");
        }
        let mut fb = b.enter();
        assert!(Pin::new(&mut fb).poll(&mut cx).is_pending(), "b sleeps");
        assert_eq!(gate.stats().sleeping, 1);
        gate.set_limit(2).unwrap();
        assert_eq!(probe.wakes.load(Ordering::SeqCst), 1, "the raise wakes b");
        assert!(
            !probe.under_registry_lock.load(Ordering::SeqCst),
            "the sleeper's waker ran under the registry lock"
        );
        assert!(
            Pin::new(&mut fb).poll(&mut cx).is_ready(),
            "b re-checks and enters"
        );
    }
}
