//! The real-thread driver of the policy cores: one narrow interface over every policy family,
//! so that sessions speak only the [`Step`] vocabulary. It owns the core (the queue core inside
//! its mutex), publishes what must be published under that mutex (a queued waiter's state, a
//! hand-off's `Woken` mark), and delivers hand-offs to the waiters they release.
//!
//! Invariant: every [`Hold`] an admission returned is given back exactly once, through
//! [`Driver::exit`] (the token is not `Clone`); every queued wait ends in exactly one of
//! [`Driver::finish_wait`] (its release was delivered) or [`Driver::cancel_wait`].

use std::time::{Duration, Instant};

use crate::config::GateConfig;
use crate::cpu_share::CpuShare;
use crate::monitor::{SessionState, StepOutReason};
use crate::policy::auto::{AutoCore, AutoStats, Releases};
use crate::policy::polling::PollingCore;
use crate::policy::queue::{QueueCore, Release};
use crate::policy::timer::{TimerCore, TIMER_SLEEP};
use crate::policy::{Admission, Attempt, Core, Hold, Step, UnlimitedCore, WaitId};
use crate::registry::SessionShared;
use crate::sync::{lock, Arc, Mutex, MutexGuard};
// `std`'s atomics even under loom: the unlimited policy's reported limit and the lock-wait
// counts are statistics that order nothing, and loom need not explore their interleavings.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::TryLockError;

/// The configured policy's decision core, driven with threads.
pub(crate) struct Driver {
    core: Cores,
    epoch: Instant,
    /// `classic`/`flifo`: threads waiting for the core's lock now (InnoDB 5.0's
    /// `srv_conc_mutex`), and the waits for it so far. Counted only when a first try fails, so
    /// an uncontended lock costs nothing more.
    lock_waiting: AtomicU32,
    lock_waits: AtomicU64,
    /// Slots handed to queued waiters, on every path that hands one (an exit, a limit
    /// change, `auto`'s raises, stall checks and loans): one per release delivered.
    handoffs: AtomicU64,
    /// `auto` with an adaptive limit: the CPUs other processes leave this one, estimated
    /// for its controller (`None`: not `auto`, or the counts cannot be read).
    share: Option<CpuShare>,
}

// A gate holds exactly one `Cores`, so the largest variant's size costs one gate a few
// hundred bytes; boxing `Auto` (the default policy) would add a pointer chase to every
// admission's fast path, which reads its slots inline.
#[allow(clippy::large_enum_variant)]
enum Cores {
    Queue(Mutex<QueueCore<Arc<SessionShared>>>),
    Polling(PollingCore),
    Timer(TimerCore),
    /// The limit is kept only to report what was set.
    Unlimited(UnlimitedCore, AtomicU32),
    Auto(AutoCore<Arc<SessionShared>>),
}

/// The core's own counts, for stats and snapshots.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CoreGauges {
    pub(crate) limit: u32,
    pub(crate) inside: u32,
    pub(crate) lifo_running: u32,
    pub(crate) fifo_pending: u32,
    pub(crate) queued: u32,
    pub(crate) sleeping: u32,
    pub(crate) sleep_delay: Duration,
    /// `auto`'s own counts and decisions.
    pub(crate) auto: Option<AutoStats>,
}

impl Driver {
    /// The driver for a validated configuration.
    pub(crate) fn new(c: &GateConfig) -> Driver {
        let core = match Core::new(c) {
            Core::Queue(q) => Cores::Queue(Mutex::new(q)),
            Core::Polling(p) => Cores::Polling(p),
            Core::Timer(t) => Cores::Timer(t),
            Core::Unlimited(u) => Cores::Unlimited(u, AtomicU32::new(c.limit)),
            // The `Woken` mark is made under the core's lock, as for the queue policies.
            Core::Auto(a) => Cores::Auto(
                a.with_release_hook(mark_woken_shared)
                    .with_watch_hook(may_keep_stall_watch),
            ),
        };
        let epoch = Instant::now();
        let share = match &core {
            Cores::Auto(a) if a.params().adaptive => CpuShare::new(1, a.params().cpus),
            _ => None,
        };
        Driver {
            core,
            epoch,
            share,
            lock_waiting: AtomicU32::new(0),
            lock_waits: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
        }
    }

    /// Locks the queue policies' core, counting the wait if the lock is taken.
    fn lock_core<'a>(
        &self,
        m: &'a Mutex<QueueCore<Arc<SessionShared>>>,
    ) -> MutexGuard<'a, QueueCore<Arc<SessionShared>>> {
        match m.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.lock_waiting.fetch_add(1, Ordering::Relaxed);
                self.lock_waits.fetch_add(1, Ordering::Relaxed);
                let g = lock(m);
                self.lock_waiting.fetch_sub(1, Ordering::Relaxed);
                g
            }
        }
    }

    /// Threads waiting for the core's lock now, and waits for it so far (0 for the policies
    /// without one).
    pub(crate) fn lock_contention(&self) -> (u32, u64) {
        (
            self.lock_waiting.load(Ordering::Relaxed),
            self.lock_waits.load(Ordering::Relaxed),
        )
    }

    /// Precise nanoseconds since the gate was created (never 0): the one clock of `auto`'s
    /// decisions, its waiters' queueing times and its holders' quanta alike, so they compare
    /// (quanta timed from another origin, such as the process's first reading, would make a
    /// gate created later see every waiter as queued before any quantum began). Read on slow
    /// paths and once per chunk of calls, never on a ticket re-entry. Not the coarse clock:
    /// it moves once per scheduler tick, every 4 ms on a 250 Hz kernel, too coarse to time a
    /// quantum. Under loom a constant, as `clock::coarse_ns`: `auto` decides on it, and a
    /// model must be deterministic.
    pub(crate) fn precise_ns(&self) -> u64 {
        if cfg!(loom) {
            return 1;
        }
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    /// One decision for a thread without tickets. A queue `Wait` is published as `Queued`
    /// while the queue lock is held, with its start time if this admission had not waited yet
    /// (`first_wait`): a hand-off's `Woken` mark, made under the same lock, always comes after
    /// both, so neither the state nor its timestamp can overwrite it.
    pub(crate) fn enter(
        &self,
        at: &mut Attempt,
        sh: &Arc<SessionShared>,
        first_wait: bool,
    ) -> Step {
        match &self.core {
            Cores::Queue(m) => {
                let mut core = self.lock_core(m);
                let step = core.enter(at, sh);
                if let Step::Wait(_) = step {
                    publish_queued(sh, first_wait);
                }
                step
            }
            Cores::Polling(c) => c.enter(at),
            Cores::Timer(c) => c.enter(at),
            Cores::Unlimited(u, _) => Step::Admitted(u.enter()),
            Cores::Auto(c) => {
                if let Some(a) = c.try_admit() {
                    return Step::Admitted(a);
                }
                let mut out = Releases::new();
                let step = c.enter_contended(
                    at,
                    sh,
                    self.precise_ns(),
                    || publish_queued(sh, first_wait),
                    &mut out,
                );
                // If a delivery panics, this thread unwinds without its admission or its
                // queued wait: undo them, or the slot would stay counted for nobody.
                deliver_then(
                    out,
                    |r| self.deliver(r),
                    step,
                    |step| {
                        sh.set_state(SessionState::Outside);
                        match step {
                            Step::Admitted(a) => self.exit(a.hold),
                            Step::Wait(id) => self.withdraw(id),
                            _ => {}
                        }
                    },
                )
            }
        }
    }

    /// `auto`: the admission of a session back from a wait it stepped out for (`None` for the
    /// other policies, whose rule is [`Driver::enter_unchecked`] after a row-lock wait).
    pub(crate) fn enter_after_wait(
        &self,
        sh: &Arc<SessionShared>,
        first_wait: bool,
    ) -> Option<Step> {
        match &self.core {
            Cores::Auto(c) => Some(c.enter_after_wait(sh, || publish_queued(sh, first_wait))),
            _ => None,
        }
    }

    /// Whether a step-out for `reason` keeps the slot (`auto`, for work outside the engine).
    #[inline]
    pub(crate) fn keeps_slot_across(&self, reason: StepOutReason) -> bool {
        matches!(self.core, Cores::Auto(_)) && crate::policy::auto::keeps_slot_across(reason)
    }

    /// Whether a queued wait should wake every stall period to run the stall check (`auto`).
    pub(crate) fn checks_stalls(&self) -> bool {
        matches!(self.core, Cores::Auto(_))
    }

    /// Whether queued wait `id` keeps `auto`'s stall watch (wakes every stall period).
    #[inline]
    pub(crate) fn is_stall_watch(&self, id: WaitId) -> bool {
        match &self.core {
            Cores::Auto(c) => c.is_stall_watch(id),
            _ => false,
        }
    }

    /// `auto`'s stall check, run by the waiter that keeps the stall watch (`sh`, queued as
    /// `keeper`) when it woke after a stall period. If a delivery panics (a foreign waker),
    /// the panic unwinds out of the keeper's wait: that wait is withdrawn first, as every
    /// path that delivers for a thread still queued or admitted undoes (`deliver_then`), or
    /// it would stay queued (keeping the watch) or be released and counted for nobody.
    pub(crate) fn stall_check(&self, sh: &SessionShared, keeper: WaitId) {
        if let Cores::Auto(c) = &self.core {
            let now = self.precise_ns();
            // One reading, before the queue lock, for both the estimate and the decision
            // (taken only where it may be needed: an adaptive limit).
            let cpu = c
                .params()
                .adaptive
                .then(crate::clock::process_cpu_ns)
                .flatten();
            if let (Some(sh), Some(cpu)) = (&self.share, cpu) {
                c.note_cpus_available(sh.sample(now, cpu));
            }
            let out = c.stall_check(now, || cpu);
            deliver_then(
                out,
                |r| self.deliver(r),
                keeper,
                |id| {
                    sh.set_state(SessionState::Outside);
                    self.withdraw(id);
                },
            );
        }
    }

    /// Withdraws queued wait `id` for a thread that will not finish it (a delivery's panic
    /// unwinds through it): cancelled, or, if a hand-off released it meanwhile, its slot
    /// given back (and handed on).
    fn withdraw(&self, id: WaitId) {
        if let Some(a) = self.cancel_wait(id) {
            self.exit(a.hold);
        }
    }

    /// `auto`: a holder lends its slot while it blocks on a lock (`gate_hook`).
    pub(crate) fn lend(&self) {
        if let Cores::Auto(c) = &self.core {
            let out = c.lend(self.precise_ns());
            self.deliver_all(out);
        }
    }

    /// `auto`: the lent slot comes back: `Ok`, counted now; `Err(id)`, queued, wait for
    /// that hand-off. `None` for the other policies (they lend nothing).
    pub(crate) fn reclaim(&self, sh: &Arc<SessionShared>) -> Option<Result<Hold, WaitId>> {
        match &self.core {
            Cores::Auto(c) => Some(c.reclaim(sh, || publish_queued(sh, true))),
            _ => None,
        }
    }

    /// Whether this is an `auto` gate.
    #[inline]
    pub(crate) fn is_auto(&self) -> bool {
        matches!(self.core, Cores::Auto(_))
    }

    /// A holder's quantum (begun at `quantum_start_ns`) is over: whether it gives up its slot
    /// (`auto`'s rule, [`crate::policy::auto::AutoCore::yields_quantum`], which may mark
    /// `hold` as a long statement's; the other policies grant no quantum). Without a hold
    /// (none is kept without one) it gives way.
    /// With nobody queued, `auto`'s controller may decide here (at most once a window),
    /// on a CPU reading taken only then.
    pub(crate) fn yields_quantum(&self, quantum_start_ns: u64, hold: Option<&mut Hold>) -> bool {
        match (&self.core, hold) {
            (Cores::Auto(c), Some(hold)) => {
                let now = self.precise_ns();
                c.yields_quantum(quantum_start_ns, hold, now, || {
                    self.controller_reading(c, now)
                })
            }
            _ => true,
        }
    }

    /// The process's CPU time for `auto`'s controller, read outside the queue lock: its cost
    /// in this thread's CPU time is noted (a preemption mid-read is no cost), and at most
    /// once per half second the CPUs other processes leave are estimated beside it (not
    /// timed as the reading's cost, which sizes the window).
    fn controller_reading(&self, c: &AutoCore<Arc<SessionShared>>, now: u64) -> Option<u64> {
        let t0 = crate::clock::thread_cpu_ns();
        let cpu = crate::clock::process_cpu_ns();
        if let (Some(t0), Some(t1)) = (t0, crate::clock::thread_cpu_ns()) {
            c.note_reading_cost(t1.saturating_sub(t0));
        }
        if let (Some(sh), Some(cpu)) = (&self.share, cpu) {
            c.note_cpus_available(sh.sample(now, cpu));
        }
        cpu
    }

    /// `auto`: `hold` belongs to a statement that was long before it gave its slot up at a
    /// quantum's end: it is counted as a long statement's again
    /// ([`crate::policy::auto::AutoCore::mark_long`]).
    pub(crate) fn mark_long(&self, hold: &mut Hold) {
        if let Cores::Auto(c) = &self.core {
            c.mark_long(hold);
        }
    }

    /// `hold`'s slot was lent and the loan gave it back: nothing to give back, but `auto`
    /// stops counting it as a long statement's.
    pub(crate) fn forget_lent(&self, hold: Hold) {
        if let Cores::Auto(c) = &self.core {
            c.forget_lent(hold);
        }
    }

    /// Re-entry after a row-lock wait, without checking the limit, with one ticket.
    pub(crate) fn enter_unchecked(&self) -> Admission {
        match &self.core {
            Cores::Queue(m) => self.lock_core(m).enter_unchecked(),
            Cores::Polling(c) => c.enter_unchecked(),
            Cores::Timer(c) => c.enter_unchecked(),
            Cores::Unlimited(u, _) => u.enter_unchecked(),
            Cores::Auto(_) => unreachable!("auto re-enters through enter_after_wait"),
        }
    }

    /// A thread told to sleep gives up before asking again.
    pub(crate) fn abandon(&self, at: &mut Attempt) {
        match &self.core {
            Cores::Queue(m) => self.lock_core(m).abandon(at),
            Cores::Polling(c) => c.abandon(at),
            Cores::Timer(c) => c.abandon(at),
            Cores::Unlimited(..) | Cores::Auto(_) => {}
        }
    }

    /// Gives back `hold`. If the freed slot goes to a queued waiter, marks it `Woken` and
    /// signals it (counted in [`Driver::handoffs`]).
    pub(crate) fn exit(&self, hold: Hold) {
        match &self.core {
            Cores::Queue(m) => {
                let released = {
                    let mut core = self.lock_core(m);
                    let r = core.exit(hold);
                    if let Some(r) = &r {
                        mark_woken(r);
                    }
                    r
                };
                if let Some(r) = released {
                    self.deliver(r);
                }
            }
            Cores::Polling(c) => c.exit(hold),
            Cores::Timer(c) => c.exit(hold),
            Cores::Unlimited(u, _) => u.exit(hold),
            Cores::Auto(c) => {
                if c.release(hold) {
                    let out = c.hand_off_slow(self.precise_ns());
                    self.deliver_all(out);
                }
            }
        }
    }

    /// Slots handed to queued waiters so far, by every path (see the field).
    pub(crate) fn handoffs(&self) -> u64 {
        self.handoffs.load(Ordering::Relaxed)
    }

    /// The queued wait `id`, released and signalled, takes its slot.
    pub(crate) fn finish_wait(&self, id: WaitId) -> Admission {
        match &self.core {
            Cores::Auto(c) => {
                let now = self.precise_ns();
                // The process's CPU clock walks every thread in the kernel: read it before
                // the queue lock when the window may end here (see `cpu_reading_due`), and
                // under it only where that hint was stale.
                let early = c
                    .cpu_reading_due(now)
                    .then(|| self.controller_reading(c, now));
                let (a, out) = c.finish_wait(id, now, || {
                    early.unwrap_or_else(crate::clock::process_cpu_ns)
                });
                nudge(c.take_nudge());
                // If a delivery panics, this thread unwinds without taking its admission:
                // give the slot back first, or it would stay counted for nobody.
                deliver_then(out, |r| self.deliver(r), a, |a| self.exit(a.hold))
            }
            _ => self.lock_core(self.queue()).finish_wait(id),
        }
    }

    /// The queued wait `id` gives up: `None` if it left uncounted, or the admission a hand-off
    /// made in the same instant (then it is inside and must exit normally).
    pub(crate) fn cancel_wait(&self, id: WaitId) -> Option<Admission> {
        match &self.core {
            Cores::Auto(c) => {
                let a = c.cancel_wait(id);
                nudge(c.take_nudge());
                a
            }
            _ => self.lock_core(self.queue()).cancel_wait(id),
        }
    }

    fn queue(&self) -> &Mutex<QueueCore<Arc<SessionShared>>> {
        match &self.core {
            Cores::Queue(m) => m,
            _ => unreachable!("only the queue policies queue"),
        }
    }

    /// Changes the limit; returns the limit it replaced (read in the same step, so concurrent
    /// changes each see the transition they made). The queued waiters a raise hands slots to
    /// are counted in [`Driver::handoffs`].
    pub(crate) fn set_limit(&self, limit: u32) -> u32 {
        match &self.core {
            Cores::Queue(m) => {
                let (old, released) = {
                    let mut core = self.lock_core(m);
                    let old = core.limit();
                    let released = core.set_limit(limit);
                    for r in &released {
                        mark_woken(r);
                    }
                    (old, released)
                };
                deliver_each(released, |r| self.deliver(r));
                old
            }
            Cores::Polling(c) => c.set_limit(limit),
            Cores::Timer(c) => c.set_limit(limit),
            Cores::Unlimited(_, l) => l.swap(limit, Ordering::Relaxed),
            Cores::Auto(c) => {
                let (old, out) = c.set_limit(limit, self.precise_ns());
                self.deliver_all(out);
                old
            }
        }
    }

    /// The limit now (0 = unlimited).
    pub(crate) fn limit(&self) -> u32 {
        match &self.core {
            Cores::Queue(m) => lock(m).limit(),
            Cores::Polling(c) => c.limit(),
            Cores::Timer(c) => c.limit(),
            Cores::Unlimited(_, l) => l.load(Ordering::Relaxed),
            Cores::Auto(c) => c.limit(),
        }
    }

    /// The core's counts now. `sleep_delay` is the configured one for the queue policies.
    pub(crate) fn gauges(&self, configured_sleep: Duration) -> CoreGauges {
        match &self.core {
            Cores::Queue(m) => {
                let q = lock(m);
                CoreGauges {
                    limit: q.limit(),
                    inside: q.inside(),
                    lifo_running: q.lifo_running(),
                    fifo_pending: q.fifo_pending(),
                    queued: q.queued(),
                    sleeping: q.sleeping(),
                    sleep_delay: configured_sleep,
                    auto: None,
                }
            }
            Cores::Polling(p) => CoreGauges {
                // `inside` read first, as `AutoCore::gauges` does.
                inside: p.inside(),
                limit: p.limit(),
                sleeping: p.waiting(),
                sleep_delay: p.sleep_delay(),
                ..CoreGauges::default()
            },
            Cores::Timer(t) => CoreGauges {
                // `inside` read first, as `AutoCore::gauges` does.
                inside: t.inside(),
                limit: t.limit(),
                sleeping: t.sleeping(),
                sleep_delay: TIMER_SLEEP,
                ..CoreGauges::default()
            },
            Cores::Unlimited(_, l) => CoreGauges {
                limit: l.load(Ordering::Relaxed),
                ..CoreGauges::default()
            },
            Cores::Auto(c) => {
                let g = c.gauges();
                CoreGauges {
                    limit: g.limit,
                    inside: g.inside,
                    lifo_running: g.extra,
                    fifo_pending: g.pending,
                    queued: g.queued,
                    auto: Some(g),
                    ..CoreGauges::default()
                }
            }
        }
    }

    fn deliver_all(&self, out: Releases<Arc<SessionShared>>) {
        deliver_each(out, |r| self.deliver(r));
    }

    /// Signals a released waiter (called without the queue lock held): notifies its condvar
    /// (a thread session) and wakes its registered waker (an async session).
    pub(crate) fn deliver(&self, r: Release<Arc<SessionShared>>) {
        // A slot was handed over (even if this delivery turns out stale below: the waiter's
        // cancel then found the slot already released to it and kept it).
        self.handoffs.fetch_add(1, Ordering::Relaxed);
        let mut w = lock(&r.waiter.wake);
        // Wait ids only grow. A delivery delayed past a later wait of the same session (its
        // first wait ended by a cancel that found the slot already released) must not
        // overwrite the newer release, or that waiter would sleep forever holding a slot.
        if w.released.is_some_and(|newer| newer > r.id) {
            return;
        }
        w.released = Some(r.id);
        w.handoff_ns = self.precise_ns();
        // An async waiter's waker, woken after the lock is dropped (the woken task takes the
        // same lock to see `released`). A thread waiter has none and waits on the condvar.
        let waker = w.waker.take();
        drop(w);
        r.waiter.cv.notify_one();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Delivers every release, even if one delivery panics (an async runtime's waker is foreign
/// code): a release left undelivered would leave its waiter asleep with a slot counted for it.
/// The first panic goes on once all are delivered, unless this thread is already unwinding
/// (an exit made by a guard's drop during a panic): a second panic there would abort the
/// process.
fn deliver_each<R>(out: impl IntoIterator<Item = R>, deliver: impl FnMut(R)) {
    deliver_then(out, deliver, (), |()| {});
}

/// [`deliver_each`] for a thread that has just been admitted or queued (`keep`, returned):
/// if a delivery panics, `undo` gets `keep` (after every delivery) before the panic goes on,
/// to give back what the unwinding thread would otherwise leave counted for nobody.
fn deliver_then<R, T>(
    out: impl IntoIterator<Item = R>,
    mut deliver: impl FnMut(R),
    keep: T,
    undo: impl FnOnce(T),
) -> T {
    let mut panic = None;
    for r in out {
        if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| deliver(r))) {
            panic.get_or_insert(p);
        }
    }
    match panic {
        Some(p) if !std::thread::panicking() => {
            undo(keep);
            std::panic::resume_unwind(p)
        }
        _ => keep,
    }
}

/// `auto`: only thread sessions keep the stall watch (their waits wake on a timer).
fn may_keep_stall_watch(sh: &Arc<SessionShared>) -> bool {
    !sh.is_async.load(Ordering::Relaxed)
}

/// Tells a waiter that the stall watch passed to it: wakes it without a slot, so that it
/// sees it keeps the watch and sleeps on the stall period's timer. Its wake lock is taken
/// (and dropped) first: a waiter reads the watch and goes to sleep under that lock, so either
/// it read the watch after the pass (made before this call) or it is asleep by the notify.
fn nudge(w: Option<Arc<SessionShared>>) {
    if let Some(w) = w {
        drop(lock(&w.wake));
        w.cv.notify_one();
    }
}

/// Marks a released waiter `Woken`, with the hand-off's time, while the queue lock is still
/// held, so the mark is ordered after the waiter's `Queued` and before anything the waiter
/// publishes once it runs.
fn mark_woken(r: &Release<Arc<SessionShared>>) {
    mark_woken_shared(&r.waiter);
}

fn mark_woken_shared(sh: &Arc<SessionShared>) {
    sh.set_state_now(SessionState::Woken);
}

/// Publishes a queued waiter (under the core's lock), with its start time on its first wait.
fn publish_queued(sh: &SessionShared, first_wait: bool) {
    if first_wait {
        sh.set_state_now(SessionState::Queued);
    } else {
        sh.set_state(SessionState::Queued);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{GateConfig, Policy};
    use std::time::Duration;

    #[test]
    fn every_release_is_delivered_even_if_one_delivery_panics_and_the_panic_goes_on() {
        let mut delivered = Vec::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            deliver_each([1, 2, 3], |r| {
                delivered.push(r);
                assert_ne!(r, 2, "a foreign waker panics");
            })
        }));
        assert!(r.is_err(), "the panic reached the caller");
        assert_eq!(
            delivered,
            [1, 2, 3],
            "the releases after it were delivered too"
        );
    }

    #[test]
    fn a_panicking_delivery_undoes_the_callers_admission_before_the_panic_goes_on() {
        let (mut delivered, mut undone) = (Vec::new(), None);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            deliver_then(
                [1, 2],
                |r| {
                    delivered.push(r);
                    assert_ne!(r, 1, "a foreign waker panics");
                },
                "the admission",
                |a| undone = Some(a),
            )
        }));
        assert!(r.is_err(), "the panic reached the caller");
        assert_eq!(undone, Some("the admission"));
        assert_eq!(delivered, [1, 2]);
        // Without a panic nothing is undone, and the caller keeps what it got.
        let mut undone = None;
        let kept = deliver_then([1, 2], |_| {}, "the admission", |a| undone = Some(a));
        assert_eq!((kept, undone), ("the admission", None));
    }

    #[test]
    fn a_delivery_panic_during_unwinding_does_not_panic_again() {
        // An exit made by a guard's drop while the thread unwinds: a second panic would abort
        // the process. The deliveries still all happen.
        struct ExitOnDrop<'a>(&'a std::cell::RefCell<Vec<i32>>);
        impl Drop for ExitOnDrop<'_> {
            fn drop(&mut self) {
                deliver_each([1, 2], |r| {
                    self.0.borrow_mut().push(r);
                    assert_ne!(r, 1, "a foreign waker panics");
                });
            }
        }
        let delivered = std::cell::RefCell::new(Vec::new());
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = ExitOnDrop(&delivered);
            panic!("the first panic");
        }));
        let msg = r.expect_err("the first panic goes on");
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"the first panic"));
        assert_eq!(*delivered.borrow(), [1, 2]);
    }

    #[test]
    fn a_wait_for_the_queue_lock_is_counted_while_it_lasts_and_after() {
        let d = Arc::new(Driver::new(&GateConfig::new(Policy::Classic).limit(4)));
        let Cores::Queue(m) = &d.core else {
            panic!("classic has a queue lock")
        };
        let held = lock(m);
        let other = {
            let d = d.clone();
            std::thread::spawn(move || d.enter_unchecked())
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while d.lock_contention().0 == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the blocked thread was never counted"
            );
            std::thread::yield_now();
        }
        assert_eq!(d.lock_contention(), (1, 1));
        drop(held);
        other.join().unwrap();
        assert_eq!(
            d.lock_contention(),
            (0, 1),
            "the waiter left; its wait stays counted"
        );
        // An uncontended acquisition is not a wait.
        d.enter_unchecked();
        assert_eq!(d.lock_contention(), (0, 1));
    }

    #[test]
    fn the_gates_precise_clock_starts_with_the_gate_and_moves_within_a_sub_millisecond_sleep() {
        // A quantum needs a clock that moves between two of its checks (the coarse one may
        // not move for 4 ms), and one that its waiters' queueing times are read on too: each
        // gate's own. Only the order of the readings is checked, never a duration (the sleeps
        // only make each later reading strictly larger).
        let first = Driver::new(&GateConfig::new(Policy::Auto));
        std::thread::sleep(Duration::from_millis(20));
        let later = Driver::new(&GateConfig::new(Policy::Auto));
        // The later gate is read first, so the first gate's reading is larger whatever the
        // scheduler does between the two reads.
        let b = later.precise_ns();
        let a = first.precise_ns();
        assert!(b > 0 && b < a, "a gate made later reads {b}, the first {a}");
        std::thread::sleep(Duration::from_micros(200));
        let c = later.precise_ns();
        assert!(c > b, "{b} then {c}");
    }

    #[test]
    fn a_late_delivery_never_overwrites_a_newer_release() {
        let d = Driver::new(&GateConfig::new(Policy::Classic));
        let sh = Arc::new(SessionShared::new(1, String::new()));
        for id in [5, 3] {
            d.deliver(Release {
                waiter: sh.clone(),
                id: WaitId(id),
            });
        }
        assert_eq!(lock(&sh.wake).released, Some(WaitId(5)));
    }

    #[test]
    fn a_queued_waiter_is_published_with_its_start_and_a_hand_off_stamps_woken_after_it() {
        let d = Driver::new(
            &GateConfig::new(Policy::Classic)
                .limit(1)
                .sleep_delay(Duration::ZERO),
        );
        let holder = Arc::new(SessionShared::new(1, String::new()));
        let waiter = Arc::new(SessionShared::new(2, String::new()));
        let Step::Admitted(held) = d.enter(&mut Attempt::new(false), &holder, true) else {
            panic!("the gate is empty")
        };
        let Step::Wait(id) = d.enter(&mut Attempt::new(false), &waiter, true) else {
            panic!("the gate is full")
        };
        // Published under the queue lock, start time included: nothing the waiter does after
        // the lock is released writes the timestamp again.
        assert_eq!(waiter.state(), SessionState::Queued);
        let queued_at = waiter.since_ns();
        assert_ne!(queued_at, 0);
        std::thread::sleep(Duration::from_millis(30)); // a few ticks of the coarse clock
        d.exit(held.hold);
        assert_eq!(d.handoffs(), 1, "the slot is handed to the waiter");
        assert_eq!(waiter.state(), SessionState::Woken);
        assert!(
            waiter.since_ns() > queued_at,
            "Woken carries the hand-off's time, not the queueing's"
        );
        let a = d.finish_wait(id);
        d.exit(a.hold);
        assert_eq!(d.handoffs(), 1, "nobody waits for the last exit's slot");
    }
}
