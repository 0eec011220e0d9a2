//! The slots and the queue of `auto`: one atomic increment admits while nobody queues; then each
//! freed slot goes straight to a waiter: newest first, oldest first once one passes the age cap.

use std::collections::VecDeque;

use super::controller::{Decision, LimitController, LimitReasons, CONTROL_WINDOW};
use super::{AutoParams, RejectReason, STALL_PERIOD};
use crate::policy::queue::Release;
use crate::policy::slots::AtomicSlots;
use crate::policy::{dec, Admission, AdmittedBy, Attempt, Hold, HoldKind, Step, WaitId};
use crate::sync::{lock, AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering};

#[derive(Debug)]
struct Waiter<W> {
    id: WaitId,
    waiter: W,
    since_ns: u64,
    priority: bool,   // first within the age cap (lock holders, back from a wait)
    head: bool,       // queued at the head (reclaims, re-entries)
    released_ns: u64, // when a hand-off released it (0: still waiting)
    may_watch: bool,  // may keep the stall watch (wakes on a timer)
}

/// What the queue lock guards.
#[derive(Debug)]
struct Queue<W> {
    waiters: VecDeque<Waiter<W>>, // arrival order: the front is the oldest
    next_id: u64,
    pending: u32,          // released, not yet running (FLIFO's fifo-pending)
    extra: u32,            // admissions beyond the limit (`AutoStats::extra`); at most the limit
    prio: u32,             // unreleased waiters with `priority`
    starving: bool,        // serving a waiter past the age cap: oldest first, no newcomer ahead
    last_progress_ns: u64, // last release or hand-off while threads queued (stall detection)
    controller: LimitController,
    stall_ticks: u64,
    rejections: u64,
    age_handoffs: u64,
    limit_max: u32,
    reclaims_over: u64,
    watch: Option<WaitId>, // the wait that keeps the stall watch
    nudge: Option<W>,      // the waiter the watch passed to, not yet told (`take_nudge`)
}

/// The core's counts and decisions ([`crate::GateStats::auto`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct AutoStats {
    /// The limit now.
    pub limit: u32,
    /// Counted inside.
    pub inside: u32,
    /// Extra admissions running: newcomers in a pending waiter's place, sessions back from a wait.
    pub extra: u32,
    /// Released waiters not yet running.
    pub pending: u32,
    /// Queued, not yet released.
    pub queued: u32,
    /// Waiters past the age cap are being served oldest first.
    pub starving: bool,
    /// The largest limit in force so far.
    pub limit_max: u32,
    /// Times the controller raised the limit.
    pub limit_raises: u64,
    /// Times it lowered the limit.
    pub limit_cuts: u64,
    /// Why it raised and lowered it, window by window.
    pub limit_reasons: LimitReasons,
    /// Controller runs by a waiter that saw no slot released for a stall period.
    pub stall_ticks: u64,
    /// Enters refused by the queue cap.
    pub rejections: u64,
    /// Hand-offs to a waiter past the age cap.
    pub age_handoffs: u64,
    /// Lent slots taken back above the limit (allowed up to twice the limit).
    pub reclaims_over: u64,
    /// Slots held now by long statements ([`AutoCore::yields_quantum`]).
    pub long_holders: u32,
    /// The controller's window now, ns: [`CONTROL_WINDOW`], longer where CPU readings are costly.
    pub control_window_ns: u64,
    /// The CPUs other processes leave this one, in thousandths (`None`: unknown, as off Linux).
    pub cpus_available_milli: Option<u32>,
}

/// The shared state of `auto`. See the module documentation.
#[derive(Debug)]
pub struct AutoCore<W> {
    slots: AtomicSlots,
    queued: AtomicU32, // unreleased waiters; read by every exit
    q: Mutex<Queue<W>>,
    p: AutoParams,
    on_release: Option<fn(&W)>,        // see `with_release_hook`
    may_watch: Option<fn(&W) -> bool>, // which waiters may keep the stall watch (`None`: all)
    watch_id: AtomicU64,               // `watch`'s id + 1 (0: nobody), for a lock-free check
    nudge_pending: AtomicBool,         // `nudge` holds a waiter to tell
    oldest_ns: AtomicU64,              // queue time of the oldest unreleased waiter (MAX: none)
    long_peak: AtomicU32,              // peak long holds at a quantum end with threads queued
    long_kept: AtomicBool,             // at one such end the holder kept its slot
    long_holders: AtomicU32,           // holds marked long now, until given back
    window_end_ns: AtomicU64,          // window end: set under the queue lock, read as a hint
    reading_cost_ns: AtomicU64,        // what the driver's last CPU reading cost
    cpus_available: AtomicU64,         // CPUs others leave us (f64 bits; `NO_ESTIMATE`: unknown)
    unqueued_floor: u32,               // controller's rest: at or below it, no unqueued cut
}

const NO_ESTIMATE: u64 = u64::MAX; // `AutoCore::cpus_available` holds no estimate

/// Releases to deliver once the core's lock is dropped.
pub type Releases<W> = Vec<Release<W>>;

impl<W: Clone> AutoCore<W> {
    /// A core with these parameters.
    pub fn new(p: AutoParams) -> Self {
        let controller = LimitController::new(p.cpus, p.min_limit, p.max_limit)
            .with_cpu_lag(p.cpu_clock_lag)
            .with_handoff_cpu(p.handoff_cpu);
        AutoCore {
            unqueued_floor: controller.rest(),
            slots: AtomicSlots::new(p.start_limit),
            queued: AtomicU32::new(0),
            q: Mutex::new(Queue {
                waiters: VecDeque::new(),
                next_id: 0,
                pending: 0,
                extra: 0,
                prio: 0,
                starving: false,
                last_progress_ns: 0,
                controller,
                stall_ticks: 0,
                rejections: 0,
                age_handoffs: 0,
                limit_max: p.start_limit,
                reclaims_over: 0,
                watch: None,
                nudge: None,
            }),
            p,
            on_release: None,
            may_watch: None,
            watch_id: AtomicU64::new(0),
            nudge_pending: AtomicBool::new(false),
            oldest_ns: AtomicU64::new(u64::MAX),
            long_peak: AtomicU32::new(0),
            long_kept: AtomicBool::new(false),
            long_holders: AtomicU32::new(0),
            window_end_ns: AtomicU64::new(CONTROL_WINDOW.as_nanos() as u64),
            reading_cost_ns: AtomicU64::new(0),
            cpus_available: AtomicU64::new(NO_ESTIMATE),
        }
    }

    /// Notes the CPUs other processes leave this one (`None`: unknown), for the controller.
    pub fn note_cpus_available(&self, cpus: Option<f64>) {
        // Relaxed: a measurement handed over; the controller takes it under the queue lock.
        self.cpus_available
            .store(cpus.map_or(NO_ESTIMATE, f64::to_bits), Ordering::Relaxed);
    }

    fn cpus_noted(&self) -> Option<f64> {
        match self.cpus_available.load(Ordering::Relaxed) {
            NO_ESTIMATE => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// Notes what a CPU reading cost the driver; a costly one lengthens the controller's window.
    pub fn note_reading_cost(&self, cost_ns: u64) {
        // Relaxed: a measurement handed over; the controller takes it under the queue lock.
        self.reading_cost_ns.store(cost_ns, Ordering::Relaxed);
    }

    /// Whether a [`AutoCore::finish_wait`] at `now_ns` may read the CPU clock (which walks every
    /// thread): a hint, so the driver can read it before taking the queue lock.
    pub fn cpu_reading_due(&self, now_ns: u64) -> bool {
        // Relaxed: a hint; the decision itself is made under the queue lock.
        self.p.adaptive && now_ns >= self.window_end_ns.load(Ordering::Relaxed)
    }

    /// [`AutoCore::cpu_reading_due`], claimed: the window moves on so no other holder reads too.
    fn claim_reading(&self, now_ns: u64) -> bool {
        // Relaxed: a hint, as `cpu_reading_due`; the CAS only keeps two claimants apart.
        let end = self.window_end_ns.load(Ordering::Relaxed);
        self.p.adaptive
            && now_ns >= end
            && self
                .window_end_ns
                .compare_exchange(
                    end,
                    now_ns.saturating_add(CONTROL_WINDOW.as_nanos() as u64),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    fn window_restarted(&self, q: &Queue<W>, now_ns: u64) {
        self.window_end_ns.store(
            now_ns.saturating_add(q.controller.window_ns()),
            Ordering::Relaxed,
        );
    }

    /// Only waiters for which `f` is true (those that wake on a timer) may keep the stall watch.
    pub fn with_watch_hook(mut self, f: fn(&W) -> bool) -> Self {
        self.may_watch = Some(f);
        self
    }

    fn may_watch(&self, w: &W) -> bool {
        self.may_watch.is_none_or(|f| f(w))
    }

    /// Whether wait `id` keeps the stall watch ([`AutoCore::stall_check`]). Lock-free.
    #[inline]
    pub fn is_stall_watch(&self, id: WaitId) -> bool {
        self.watch_id.load(Ordering::Acquire) == id.0 + 1
    }

    /// The waiter the stall watch passed to, not yet told: the driver wakes it to start its timer.
    #[inline]
    pub fn take_nudge(&self) -> Option<W> {
        if !self.nudge_pending.load(Ordering::Acquire) {
            return None;
        }
        let mut q = lock(&self.q);
        self.nudge_pending.store(false, Ordering::Relaxed);
        q.nudge.take()
    }

    fn appoint_watch(&self, q: &mut Queue<W>, id: WaitId, may_watch: bool) {
        if may_watch && q.watch.is_none() {
            q.watch = Some(id);
            self.watch_id.store(id.0 + 1, Ordering::Release);
        }
    }

    /// A watch `id` kept passes to the waiter the selection rule reaches last, so it seldom moves.
    fn watch_left(&self, q: &mut Queue<W>, id: WaitId) {
        if q.watch != Some(id) {
            return;
        }
        let ok = |w: &Waiter<W>| w.may_watch && w.released_ns == 0;
        let last = |w: &Waiter<W>| ok(w) && !w.priority;
        let next = if q.starving {
            let r = q.waiters.iter().rev();
            r.clone()
                .find(|w| last(w))
                .or_else(|| r.clone().find(|w| ok(w)))
        } else {
            let f = q.waiters.iter();
            f.clone()
                .find(|w| last(w))
                .or_else(|| f.clone().find(|w| ok(w)))
        };
        match next {
            Some(w) => {
                q.watch = Some(w.id);
                self.watch_id.store(w.id.0 + 1, Ordering::Release);
                q.nudge = Some(w.waiter.clone());
                self.nudge_pending.store(true, Ordering::Release);
            }
            None => {
                q.watch = None;
                self.watch_id.store(0, Ordering::Release);
            }
        }
    }

    /// Calls `f` under the queue lock for each waiter a hand-off releases, before it can run.
    pub fn with_release_hook(mut self, f: fn(&W)) -> Self {
        self.on_release = Some(f);
        self
    }

    /// The parameters.
    pub fn params(&self) -> &AutoParams {
        &self.p
    }

    fn admission(&self, by: AdmittedBy, hold: HoldKind) -> Admission {
        Admission::with_quantum(by, hold, self.p.quantum)
    }

    /// One decision for a thread that wants in; the fast path is one atomic increment. `on_queue`
    /// runs under the queue lock if it queues; waiters released meanwhile go to `out`.
    #[inline]
    pub fn enter(
        &self,
        at: &mut Attempt,
        waiter: &W,
        now_ns: impl FnOnce() -> u64,
        on_queue: impl FnOnce(),
        out: &mut Releases<W>,
    ) -> Step {
        match self.try_admit() {
            Some(a) => Step::Admitted(a),
            None => self.enter_contended(at, waiter, now_ns(), on_queue, out),
        }
    }

    /// The fast path of [`AutoCore::enter`] alone; `None` means "call `enter`".
    #[inline]
    pub fn try_admit(&self) -> Option<Admission> {
        if self.queued.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let by = self.slots.try_take()?;
        Some(self.admission(by, HoldKind::Slot))
    }

    /// The slow path of [`AutoCore::enter`], after [`AutoCore::try_admit`].
    #[cold]
    pub fn enter_contended(
        &self,
        at: &Attempt,
        waiter: &W,
        now: u64,
        on_queue: impl FnOnce(),
        out: &mut Releases<W>,
    ) -> Step {
        let mut q = lock(&self.q);
        // Under the lock, `queued` counts exactly the unreleased waiters in the list.
        if self.queued.load(Ordering::SeqCst) == 0 {
            // Registered before the retry: see "No lost wake-up" in the module documentation.
            self.queued.fetch_add(1, Ordering::SeqCst);
            if let Some(by) = self.slots.try_take_checked() {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                return Step::Admitted(self.admission(by, HoldKind::Slot));
            }
        } else {
            // Others are owed any free slot first (an exit on its way here, a fast-path overshoot).
            self.hand_off(&mut q, now, out);
            self.queued.fetch_add(1, Ordering::SeqCst);
        }
        self.refresh_starving(&mut q, now);
        // FLIFO: run in a pending waiter's place, but not while the oldest are served.
        if !q.starving && q.extra < q.pending && q.extra < self.slots.limit() {
            q.extra += 1;
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Step::Admitted(self.admission(AdmittedBy::Lifo, HoldKind::Lifo));
        }
        if self.p.max_waiting != 0 && self.queued.load(Ordering::SeqCst) > self.p.max_waiting {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            q.rejections += 1;
            return Step::Reject(RejectReason::QueueFull {
                max_waiting: self.p.max_waiting,
            });
        }
        let id = WaitId(q.next_id);
        q.next_id += 1;
        if q.waiters.is_empty() {
            q.last_progress_ns = now;
        }
        let may_watch = self.may_watch(waiter);
        q.waiters.push_back(Waiter {
            id,
            waiter: waiter.clone(),
            since_ns: now,
            priority: at.holds_locks,
            head: false,
            released_ns: 0,
            may_watch,
        });
        self.appoint_watch(&mut q, id, may_watch);
        self.publish_oldest(&q);
        q.prio += at.holds_locks as u32;
        q.controller.observe_queue();
        on_queue();
        Step::Wait(id)
    }

    /// Re-entry after a wait the session stepped out for: a free slot, an extra place, or the head.
    pub fn enter_after_wait(&self, waiter: &W, on_queue: impl FnOnce()) -> Step {
        let mut q = lock(&self.q);
        self.queued.fetch_add(1, Ordering::SeqCst);
        if let Some(by) = self.slots.try_take_checked() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            let by = if by == AdmittedBy::Free {
                AdmittedBy::Unchecked
            } else {
                by
            };
            return Step::Admitted(self.admission(by, HoldKind::Slot));
        }
        if q.extra < self.slots.limit() {
            q.extra += 1;
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Step::Admitted(self.admission(AdmittedBy::Unchecked, HoldKind::Lifo));
        }
        let id = self.queue_at_head(&mut q, waiter);
        q.controller.observe_queue();
        on_queue();
        Step::Wait(id)
    }

    /// Queues `waiter` at the head, behind earlier head waiters; the caller counted it in `queued`.
    fn queue_at_head(&self, q: &mut Queue<W>, waiter: &W) -> WaitId {
        let may_watch = self.may_watch(waiter);
        let id = WaitId(q.next_id);
        q.next_id += 1;
        let at = q
            .waiters
            .iter()
            .position(|x| !x.head)
            .unwrap_or(q.waiters.len());
        q.waiters.insert(
            at,
            Waiter {
                id,
                waiter: waiter.clone(),
                since_ns: 0,
                priority: true,
                head: true,
                released_ns: 0,
                may_watch,
            },
        );
        q.prio += 1;
        self.appoint_watch(q, id, may_watch);
        self.publish_oldest(q);
        id
    }

    fn refresh_starving(&self, q: &mut Queue<W>, now: u64) {
        let cap = self.p.age_cap.as_nanos() as u64;
        let oldest = self.publish_oldest(q);
        q.starving = oldest.is_some_and(|s| now.saturating_sub(s) > cap);
    }

    fn pass_long_holder(&self, q: &mut Queue<W>) {
        let n = self.long_peak.swap(0, Ordering::Relaxed);
        let kept = self.long_kept.swap(false, Ordering::Relaxed);
        if n > 0 {
            q.controller.observe_long_holders(n, kept);
        }
    }

    /// Publishes the oldest unreleased waiter's queue time (the queue lock held) and returns it.
    fn publish_oldest(&self, q: &Queue<W>) -> Option<u64> {
        let oldest = q
            .waiters
            .iter()
            .find(|w| w.released_ns == 0)
            .map(|w| w.since_ns);
        self.oldest_ns
            .store(oldest.unwrap_or(u64::MAX), Ordering::Relaxed);
        oldest
    }

    /// A thread leaves, giving back `hold`; returns the waiters to signal. Fast path: one RMW.
    #[inline]
    pub fn exit(&self, hold: Hold, now_ns: impl FnOnce() -> u64) -> Releases<W> {
        if self.release(hold) {
            self.hand_off_slow(now_ns())
        } else {
            Vec::new()
        }
    }

    /// Gives back `hold` (half of [`AutoCore::exit`]); `true`: [`AutoCore::hand_off_slow`] next.
    #[inline]
    pub fn release(&self, hold: Hold) -> bool {
        if hold.long {
            self.long_holders.fetch_sub(1, Ordering::Relaxed);
        }
        match hold.kind() {
            HoldKind::Uncounted => return false,
            HoldKind::Lifo => {
                let mut q = lock(&self.q);
                dec(&mut q.extra, "auto: extra admissions");
                return false;
            }
            HoldKind::Slot => self.slots.give_back(),
        }
        self.queued.load(Ordering::SeqCst) != 0
    }

    /// The second half of an exit that found threads queued: hands free slots to them.
    #[cold]
    pub fn hand_off_slow(&self, now: u64) -> Releases<W> {
        let mut q = lock(&self.q);
        q.last_progress_ns = now;
        let mut out = Vec::new();
        self.hand_off(&mut q, now, &mut out);
        out
    }

    /// Hands free slots to waiters, by the selection rule, while both remain.
    fn hand_off(&self, q: &mut Queue<W>, now: u64, out: &mut Releases<W>) {
        self.hand_off_inner(q, now, out);
        self.publish_oldest(q);
    }

    fn hand_off_inner(&self, q: &mut Queue<W>, now: u64, out: &mut Releases<W>) {
        loop {
            if self.queued.load(Ordering::SeqCst) == 0 {
                return;
            }
            if self.slots.try_take_checked().is_none() {
                return;
            }
            self.refresh_starving(q, now);
            let pick = if q.starving {
                q.age_handoffs += 1;
                q.waiters.iter().position(|w| w.released_ns == 0)
            } else {
                let newest = |prio: bool| {
                    q.waiters
                        .iter()
                        .rposition(|w| w.released_ns == 0 && (w.priority || !prio))
                };
                (if q.prio > 0 { newest(true) } else { None }).or_else(|| newest(false))
            };
            let Some(i) = pick else {
                // Counted waiters but none in the list: cannot happen; give the slot back.
                self.slots.give_back();
                return;
            };
            let w = &mut q.waiters[i];
            w.released_ns = now.max(1);
            let prio = w.priority;
            if let Some(f) = self.on_release {
                f(&w.waiter);
            }
            out.push(Release {
                waiter: w.waiter.clone(),
                id: w.id,
            });
            q.prio -= prio as u32;
            self.queued.fetch_sub(1, Ordering::SeqCst);
            q.pending += 1;
        }
    }

    /// The released wait `id` begins to run at `now_ns`; the controller may move the limit (reading
    /// `cpu_ns`), and waiters a raise releases are returned. Panics if `id` was not released.
    pub fn finish_wait(
        &self,
        id: WaitId,
        now_ns: u64,
        cpu_ns: impl FnOnce() -> Option<u64>,
    ) -> (Admission, Releases<W>) {
        let mut q = lock(&self.q);
        let pos = q
            .waiters
            .iter()
            .position(|w| w.id == id)
            .expect("auto finish_wait: no such queued wait");
        let w = q.waiters.remove(pos).expect("position is in range");
        assert!(
            w.released_ns != 0,
            "finish_wait before the wait was released"
        );
        self.watch_left(&mut q, id);
        dec(&mut q.pending, "auto: pending");
        q.controller
            .observe_grant(now_ns.saturating_sub(w.released_ns));
        let mut out = Vec::new();
        self.control(&mut q, now_ns, cpu_ns, &mut out);
        (self.admission(AdmittedBy::HandOff, HoldKind::Slot), out)
    }

    fn control(
        &self,
        q: &mut Queue<W>,
        now: u64,
        cpu_ns: impl FnOnce() -> Option<u64>,
        out: &mut Releases<W>,
    ) {
        if !self.p.adaptive || !self.window_due(q, now) {
            return;
        }
        let limit = self.slots.limit();
        self.pass_long_holder(q);
        let decision = q.controller.decide(limit, now, cpu_ns());
        if self.apply(q, decision, now) {
            self.hand_off(q, now, out);
        }
    }

    /// Hands the driver's latest readings to the controller; whether its window is over at `now`.
    fn window_due(&self, q: &mut Queue<W>, now: u64) -> bool {
        q.controller
            .set_reading_cost(self.reading_cost_ns.load(Ordering::Relaxed));
        q.controller.set_cpus_available(self.cpus_noted());
        q.controller.window_over(now)
    }

    /// Applies a decision made at `now` and restarts the window; whether it raised the limit.
    fn apply(&self, q: &mut Queue<W>, decision: Decision, now: u64) -> bool {
        self.window_restarted(q, now);
        match decision {
            Decision::Hold => false,
            Decision::Cut(n) => {
                self.slots.set_limit(n);
                false
            }
            Decision::Raise(n) => {
                self.slots.set_limit(n);
                q.limit_max = q.limit_max.max(n);
                true
            }
        }
    }

    /// [`LimitController::decide_unqueued`], if nobody queued meanwhile and the window is over.
    fn control_unqueued(&self, now: u64, cpu_ns: Option<u64>) {
        let mut q = lock(&self.q);
        if !q.waiters.is_empty() {
            return;
        }
        if !self.window_due(&mut q, now) {
            return;
        }
        self.pass_long_holder(&mut q);
        // Long statements still holding slots, so the lane is remembered without a queue.
        let long = self.long_holders();
        if long > 0 {
            q.controller.observe_long_holders(long, false);
        }
        let decision = q
            .controller
            .decide_unqueued(self.slots.limit(), now, cpu_ns);
        self.apply(&mut q, decision, now);
    }

    /// A waiter's [`STALL_PERIOD`] check: runs the controller if no slot moved for a stall period.
    pub fn stall_check(&self, now_ns: u64, cpu_ns: impl FnOnce() -> Option<u64>) -> Releases<W> {
        let mut q = lock(&self.q);
        let mut out = Vec::new();
        if q.waiters.is_empty()
            || now_ns.saturating_sub(q.last_progress_ns) < STALL_PERIOD.as_nanos() as u64
        {
            return out;
        }
        q.stall_ticks += 1;
        q.last_progress_ns = now_ns;
        q.controller.observe_stall();
        self.pass_long_holder(&mut q);
        if self.p.adaptive {
            // Force a decision now, whatever the window.
            q.controller.set_cpus_available(self.cpus_noted());
            let limit = self.slots.limit();
            let decision = q.controller.decide(limit, now_ns, cpu_ns());
            self.apply(&mut q, decision, now_ns);
        }
        self.hand_off(&mut q, now_ns, &mut out);
        out
    }

    /// A holder blocks on a lock: its slot is handed on until [`AutoCore::reclaim`].
    pub fn lend(&self, now_ns: u64) -> Releases<W> {
        self.slots.give_back();
        if self.queued.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.hand_off_slow(now_ns)
    }

    /// A holder whose slot was lent has its lock and is counted again: in a free slot, else above
    /// the limit while fewer than twice it are inside, else queued at the head (`Err`). Counted in
    /// `queued` before it looks, so an exit freeing a slot after that sees it ("No lost wake-up").
    pub fn reclaim(&self, waiter: &W, on_queue: impl FnOnce()) -> Result<Hold, WaitId> {
        let mut q = lock(&self.q);
        self.queued.fetch_add(1, Ordering::SeqCst);
        let counted = if self.slots.try_take_checked().is_some() {
            true
        } else {
            let limit = self.slots.limit();
            let over = limit == 0 || self.slots.inside() < 2 * limit;
            if over {
                self.slots.force_take();
                q.reclaims_over += 1;
            }
            over
        };
        if counted {
            self.queued.fetch_sub(1, Ordering::SeqCst);
            return Ok(self.admission(AdmittedBy::Unchecked, HoldKind::Slot).hold);
        }
        let id = self.queue_at_head(&mut q, waiter);
        on_queue();
        Err(id)
    }

    /// Wait `id` gives up: `None` if it left uncounted, `Some` if already released (exit normally).
    pub fn cancel_wait(&self, id: WaitId) -> Option<Admission> {
        let mut q = lock(&self.q);
        let pos = q.waiters.iter().position(|w| w.id == id)?;
        if q.waiters[pos].released_ns != 0 {
            q.waiters.remove(pos);
            self.watch_left(&mut q, id);
            dec(&mut q.pending, "auto: pending");
            return Some(self.admission(AdmittedBy::HandOff, HoldKind::Slot));
        }
        let w = q.waiters.remove(pos).expect("position is in range");
        self.watch_left(&mut q, id);
        self.publish_oldest(&q);
        q.prio -= w.priority as u32;
        self.queued.fetch_sub(1, Ordering::SeqCst);
        None
    }

    /// Sets the limit; returns the limit replaced and the waiters a raise released.
    pub fn set_limit(&self, limit: u32, now_ns: u64) -> (u32, Releases<W>) {
        let mut q = lock(&self.q);
        let old = self.slots.set_limit(limit);
        q.limit_max = q.limit_max.max(limit);
        let mut out = Vec::new();
        self.hand_off(&mut q, now_ns, &mut out);
        (old, out)
    }

    /// Whether anyone is queued.
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.queued.load(Ordering::Relaxed) != 0
    }

    /// A holder whose quantum began at `quantum_start_ns` has spent it: whether it yields its slot.
    /// With threads queued `hold` is marked long, and it yields if a waiter queued before the
    /// quantum began (the other slots did not serve it); lock-free, a stale read costs one quantum.
    /// Otherwise the controller may decide without a queue ([`LimitController::decide_unqueued`]).
    pub fn yields_quantum(
        &self,
        quantum_start_ns: u64,
        hold: &mut Hold,
        now_ns: u64,
        cpu_ns: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if !self.has_waiters() {
            // Nothing to cut at the floor. Not marked long: a preempted short one looks alike.
            if self.p.adaptive
                && self.slots.limit() > self.unqueued_floor
                && self.claim_reading(now_ns)
            {
                // Read before the queue lock (see `cpu_reading_due`).
                self.control_unqueued(now_ns, cpu_ns());
            }
            return false;
        }
        let n = self.mark_long(hold);
        self.long_peak.fetch_max(n, Ordering::Relaxed);
        if self.oldest_ns.load(Ordering::Relaxed) <= quantum_start_ns {
            return true;
        }
        self.long_kept.store(true, Ordering::Relaxed);
        false
    }

    /// Marks `hold` as a long statement's (counted until given back); returns how many are marked.
    pub fn mark_long(&self, hold: &mut Hold) -> u32 {
        if hold.long {
            self.long_holders.load(Ordering::Relaxed)
        } else {
            hold.long = true;
            self.long_holders.fetch_add(1, Ordering::Relaxed) + 1
        }
    }

    /// A hold whose slot [`AutoCore::lend`] gave back, consumed without a release: no longer long.
    pub fn forget_lent(&self, hold: Hold) {
        if hold.long {
            self.long_holders.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Holders counted as long statements now ([`AutoCore::yields_quantum`]).
    pub fn long_holders(&self) -> u32 {
        self.long_holders.load(Ordering::Relaxed)
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.slots.limit()
    }

    /// Counted inside now.
    pub fn inside(&self) -> u32 {
        self.slots.inside()
    }

    /// Counts and decisions.
    pub fn gauges(&self) -> AutoStats {
        let q = lock(&self.q);
        AutoStats {
            // `inside` first (fields evaluate in order): no raise between the loads overstates it.
            inside: self.slots.inside(),
            limit: self.slots.limit(),
            extra: q.extra,
            pending: q.pending,
            queued: self.queued.load(Ordering::SeqCst),
            starving: q.starving,
            limit_max: q.limit_max,
            limit_raises: q.controller.raises(),
            limit_cuts: q.controller.cuts(),
            limit_reasons: q.controller.reasons(),
            stall_ticks: q.stall_ticks,
            rejections: q.rejections,
            age_handoffs: q.age_handoffs,
            reclaims_over: q.reclaims_over,
            long_holders: self.long_holders(),
            control_window_ns: q.controller.window_ns(),
            cpus_available_milli: q.controller.cpus_available_milli(),
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the core's own races that the gate-level models (tests/loom.rs) cannot
    //! reach: `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --lib auto`.
    use super::super::{test_params, DEFAULT_AGE_CAP};
    use super::*;
    use loom::sync::Arc;

    fn params(limit: u32) -> AutoParams {
        test_params(limit, DEFAULT_AGE_CAP)
    }

    fn admitted(step: Step) -> Hold {
        match step {
            Step::Admitted(a) => a.hold,
            other => panic!("expected an admission, got {other:?}"),
        }
    }

    fn enter(core: &AutoCore<u32>, who: u32) -> Step {
        let mut out = Vec::new();
        core.enter(&mut Attempt::new(false), &who, || 0, || {}, &mut out)
    }

    #[test]
    fn a_reclaim_that_queues_while_the_holders_leave_is_handed_a_slot() {
        // Limit 1, and 2 inside (one above the limit by an earlier reclaim): the reclaim of a
        // third lent slot must queue, while both holders exit on another thread. Whatever
        // the interleaving, it ends counted: its slot taken at once, or handed to it by an
        // exit (a reclaim counted in `queued` only after it looked for a slot was missed by
        // both exits, and nobody was left to hand it one).
        loom::model(|| {
            let core: Arc<AutoCore<u32>> = Arc::new(AutoCore::new(params(1)));
            let r = admitted(enter(&core, 0));
            assert!(core.lend(0).is_empty());
            let z = admitted(enter(&core, 1));
            assert!(core.lend(0).is_empty());
            let x = admitted(enter(&core, 2));
            let z_back = core.reclaim(&1, || {}).expect("above the limit: 2 inside");
            drop(z_back); // z's own hold stands for it
            let exits = {
                let core = core.clone();
                loom::thread::spawn(move || {
                    let mut out = core.exit(x, || 0);
                    out.extend(core.exit(z, || 0));
                    out
                })
            };
            let reclaimed = core.reclaim(&0, || {});
            let handed = exits.join().unwrap();
            match reclaimed {
                Ok(hold) => {
                    assert!(handed.is_empty(), "nobody else queued");
                    drop(hold);
                }
                Err(id) => {
                    let got: Vec<_> = handed.iter().map(|h| (h.waiter, h.id)).collect();
                    assert_eq!(got, [(0, id)], "the queued reclaim was handed a slot");
                    let (a, _) = core.finish_wait(id, 0, || None);
                    drop(a.hold);
                }
            }
            assert_eq!(core.gauges().inside, 1, "the reclaimer alone");
            let out = core.exit(r, || 0);
            assert!(out.is_empty());
            assert_eq!(core.gauges().inside, 0);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{test_params, DEFAULT_QUANTUM};
    use super::*;
    use std::time::Duration;

    const MS: u64 = 1_000_000;

    fn params(limit: u32) -> AutoParams {
        // The tests' times are written for a 5 ms cap.
        test_params(limit, Duration::from_millis(5))
    }

    fn admitted(step: Step) -> Admission {
        match step {
            Step::Admitted(a) => a,
            other => panic!("expected an admission, got {other:?}"),
        }
    }

    fn wait_id(step: Step) -> WaitId {
        match step {
            Step::Wait(id) => id,
            other => panic!("expected a queue wait, got {other:?}"),
        }
    }

    fn enter(core: &AutoCore<u32>, who: u32, now: u64) -> Step {
        let mut out = Vec::new();
        let step = core.enter(&mut Attempt::new(false), &who, || now, || {}, &mut out);
        assert!(out.is_empty(), "no slot was free to hand off");
        step
    }

    /// An adaptive core with a limit of 1: thread 0 holds the slot and thread 1 queues, at 0.
    fn adaptive_one_held_one_queued() -> (AutoCore<u32>, Admission, WaitId) {
        let core: AutoCore<u32> = AutoCore::new(AutoParams {
            adaptive: true,
            ..params(1)
        });
        let held = admitted(enter(&core, 0, 0));
        let id = wait_id(enter(&core, 1, 0));
        (core, held, id)
    }

    /// Exits one slot at `now`; returns who was handed it, and lets them run at `now`.
    fn exit_to(core: &AutoCore<u32>, hold: Hold, now: u64) -> Option<(u32, Admission)> {
        let out = core.exit(hold, || now);
        assert!(out.len() <= 1);
        let r = out.into_iter().next()?;
        let (a, more) = core.finish_wait(r.id, now, || None);
        assert!(more.is_empty());
        Some((r.waiter, a))
    }

    #[test]
    fn admits_at_once_with_a_quantum_and_no_ticket_count_while_slots_are_free() {
        let core: AutoCore<u32> = AutoCore::new(params(2));
        for who in 0..2 {
            let a = admitted(enter(&core, who, 0));
            assert_eq!((a.by, a.hold.kind()), (AdmittedBy::Free, HoldKind::Slot));
            assert_eq!((a.tickets, a.quantum), (u32::MAX, DEFAULT_QUANTUM));
        }
        wait_id(enter(&core, 9, 0));
        assert_eq!(core.gauges().queued, 1);
    }

    #[test]
    fn a_freed_slot_goes_to_the_newest_waiter_while_all_are_younger_than_the_age_cap() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let held = admitted(enter(&core, 0, 0));
        for who in 1..=3 {
            wait_id(enter(&core, who, who as u64 * MS / 10));
        }
        let (who, a) = exit_to(&core, held.hold, MS).expect("a waiter is handed the slot");
        assert_eq!(who, 3, "hot first: the most recently queued");
        assert_eq!(a.by, AdmittedBy::HandOff);
        assert!(!core.gauges().starving);
    }

    #[test]
    fn once_a_waiter_is_past_the_age_cap_the_oldest_are_served_first_until_none_is() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let mut held = admitted(enter(&core, 0, 0)).hold;
        wait_id(enter(&core, 1, 0));
        wait_id(enter(&core, 2, MS));
        wait_id(enter(&core, 3, 7 * MS));
        // At 6.5 ms waiters 1 and 2 (queued at 0 and 1 ms) are past the 5 ms cap: oldest
        // first, though 3 is the newest.
        let now = 6 * MS + MS / 2;
        let (who, a) = exit_to(&core, held, now).unwrap();
        assert_eq!(who, 1);
        assert!(core.gauges().starving);
        held = a.hold;
        let (who, a) = exit_to(&core, held, now).unwrap();
        assert_eq!(who, 2, "still past the cap: still oldest first");
        held = a.hold;
        // Now the only waiter is 3, queued at 7 ms: young again, hot first.
        let (who, _) = exit_to(&core, held, 8 * MS).unwrap();
        assert_eq!(who, 3);
        assert!(!core.gauges().starving);
        assert_eq!(core.gauges().age_handoffs, 2);
    }

    #[test]
    fn lock_holders_are_chosen_first_within_the_age_cap() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let held = admitted(enter(&core, 0, 0));
        let mut out = Vec::new();
        wait_id(core.enter(&mut Attempt::new(true), &1, || 0, || {}, &mut out));
        wait_id(enter(&core, 2, MS / 10));
        let (who, _) = exit_to(&core, held.hold, MS / 5).unwrap();
        assert_eq!(who, 1, "the lock holder, though not the newest");
    }

    #[test]
    fn a_newcomer_runs_in_a_waking_waiters_place_once_per_pending_grantee() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let held = admitted(enter(&core, 0, 0));
        wait_id(enter(&core, 1, 0));
        wait_id(enter(&core, 2, 0));
        // Hand off at 1 ms without letting the grantee run yet.
        let out = core.exit(held.hold, || MS);
        assert_eq!(out.len(), 1);
        let a = admitted(enter(&core, 3, MS));
        assert_eq!((a.by, a.hold.kind()), (AdmittedBy::Lifo, HoldKind::Lifo));
        assert_eq!(core.gauges().extra, 1);
        // One pending grantee, one extra: the next newcomer queues.
        wait_id(enter(&core, 4, MS));
        let _ = core.exit(a.hold, || MS);
        assert_eq!(core.gauges().extra, 0);
        // The grantee runs: no place to fill any more, the next newcomer queues.
        let (_, more) = core.finish_wait(out[0].id, MS, || None);
        assert!(more.is_empty());
        wait_id(enter(&core, 5, MS));
    }

    #[test]
    fn a_session_back_from_a_wait_takes_a_free_slot_or_an_extra_place_never_more_than_the_limit() {
        let core: AutoCore<u32> = AutoCore::new(params(2));
        let _a = admitted(enter(&core, 0, 0));
        let _b = admitted(enter(&core, 1, 0));
        let e1 = admitted(core.enter_after_wait(&2, || {}));
        let e2 = admitted(core.enter_after_wait(&3, || {}));
        assert_eq!(e1.hold.kind(), HoldKind::Lifo);
        assert_eq!(e2.by, AdmittedBy::Unchecked);
        // Two counted, two extra: 2 × limit. The next one back from a wait queues (first).
        wait_id(core.enter_after_wait(&4, || {}));
        wait_id(enter(&core, 5, 0));
        let _ = core.exit(e1.hold, || 0);
        let (who, _) = exit_to(&core, _a.hold, 0).unwrap();
        assert_eq!(who, 4, "priority over the newer plain waiter");
        let _ = core.exit(e2.hold, || 0);
    }

    #[test]
    fn sessions_back_from_a_wait_are_served_first_in_turn_even_while_the_oldest_are_served() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let a = admitted(enter(&core, 0, 0));
        let e = admitted(core.enter_after_wait(&1, || {}));
        wait_id(enter(&core, 2, 0));
        wait_id(core.enter_after_wait(&3, || {}));
        wait_id(core.enter_after_wait(&4, || {}));
        // 20 ms on, waiter 2 is past the age cap; those back from a wait still go first, in
        // the order they came back.
        assert!(core.exit(e.hold, || 20 * MS).is_empty());
        let mut hold = a.hold;
        for expected in [3, 4, 2] {
            let (who, next) = exit_to(&core, hold, 20 * MS).unwrap();
            assert_eq!(who, expected);
            hold = next.hold;
        }
        assert!(core.exit(hold, || 20 * MS).is_empty());
        assert_eq!(core.gauges().inside, 0);
    }

    #[test]
    fn the_cpu_reading_is_due_when_a_window_may_end_and_not_again_until_the_next_window_ends() {
        // Times are synthetic inputs; no clock is read.
        let fixed: AutoCore<u32> = AutoCore::new(params(1));
        assert!(
            !fixed.cpu_reading_due(0),
            "a fixed limit never reads the CPUs"
        );
        let (core, held, _) = adaptive_one_held_one_queued();
        let window = CONTROL_WINDOW.as_nanos() as u64;
        // The first window runs from the core's making, at 0.
        assert!(!core.cpu_reading_due(window - 1));
        assert!(core.cpu_reading_due(window));
        // The hand-off's grantee runs at 25 ms, past the window: the controller reads there.
        let t = 25 * MS;
        let mut reads = 0;
        let out = core.exit(held.hold, || t);
        let (a, _) = core.finish_wait(out[0].id, t, || {
            reads += 1;
            Some(0)
        });
        assert_eq!(reads, 1);
        assert!(!core.cpu_reading_due(t + window - 1));
        assert!(core.cpu_reading_due(t + window));
        let _ = core.exit(a.hold, || t + window);
    }

    #[test]
    fn a_noted_reading_cost_sets_when_the_next_reading_is_due_and_shows_in_the_gauges() {
        // Times and costs are synthetic inputs; no clock is read.
        let (core, held, _) = adaptive_one_held_one_queued();
        // The stretch applies to the window under way too: this one ends at 100 ms.
        let t = 150 * MS;
        core.note_reading_cost(MS);
        let out = core.exit(held.hold, || t);
        let (a, _) = core.finish_wait(out[0].id, t, || Some(0));
        assert_eq!(core.gauges().control_window_ns, 100 * MS);
        assert!(!core.cpu_reading_due(t + 100 * MS - 1));
        assert!(core.cpu_reading_due(t + 100 * MS));
        let _ = core.exit(a.hold, || t + 100 * MS);
    }

    #[test]
    fn the_queue_cap_refuses_at_once_and_leaves_nothing_counted() {
        let core: AutoCore<u32> = AutoCore::new(AutoParams {
            max_waiting: 1,
            ..params(1)
        });
        let held = admitted(enter(&core, 0, 0));
        wait_id(enter(&core, 1, 0));
        match enter(&core, 2, 0) {
            Step::Reject(RejectReason::QueueFull { max_waiting: 1 }) => {}
            other => panic!("expected a refusal, got {other:?}"),
        }
        let g = core.gauges();
        assert_eq!((g.queued, g.inside, g.rejections), (1, 1, 1));
        let (who, a) = exit_to(&core, held.hold, 0).unwrap();
        assert_eq!(who, 1);
        let _ = core.exit(a.hold, || 0);
        assert_eq!(core.gauges().inside, 0);
    }

    #[test]
    fn a_cancel_after_a_hand_off_returns_the_admission_and_before_it_forgets_the_waiter() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let held = admitted(enter(&core, 0, 0));
        let a = wait_id(enter(&core, 1, 0));
        let b = wait_id(enter(&core, 2, 0));
        assert_eq!(core.cancel_wait(b), None);
        let out = core.exit(held.hold, || 0);
        assert_eq!(out[0].id, a);
        let adm = core.cancel_wait(a).expect("already handed the slot");
        assert_eq!(core.gauges().pending, 0);
        let _ = core.exit(adm.hold, || 0);
        let g = core.gauges();
        assert_eq!((g.inside, g.queued), (0, 0));
    }

    #[test]
    fn a_holder_past_its_quantum_gives_way_only_to_a_waiter_queued_before_its_quantum_began() {
        let core: AutoCore<u32> = AutoCore::new(params(2));
        let mut a = admitted(enter(&core, 0, 0));
        let mut b = admitted(enter(&core, 1, 0));
        // Nobody waits: keep, and nothing to tell the controller.
        assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
        assert_eq!(core.long_peak.load(Ordering::Relaxed), 0);
        assert!(!a.hold.is_long());
        wait_id(enter(&core, 2, 3 * MS));
        wait_id(enter(&core, 3, 4 * MS));
        // Both waiters queued after a quantum that began at 0: the holder keeps its slot,
        // and the controller learns that a long statement runs beside waiters.
        assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
        assert_eq!(core.long_peak.swap(0, Ordering::Relaxed), 1);
        // The hold is marked and counted once, however many quanta it keeps.
        assert!(a.hold.is_long());
        assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
        assert_eq!(core.long_holders(), 1);
        assert_eq!(core.long_peak.swap(0, Ordering::Relaxed), 1);
        assert!(core.long_kept.swap(false, Ordering::Relaxed));
        // One of them queued before a quantum that began at 3.5 ms: give way. The whole
        // quantum spent with threads queued marks the hold all the same (a long statement
        // that locked a waiter out), but no keep is reported.
        assert!(core.yields_quantum(7 * MS / 2, &mut b.hold, 0, || None));
        assert!(b.hold.is_long());
        assert_eq!(core.long_holders(), 2);
        assert_eq!(core.long_peak.swap(0, Ordering::Relaxed), 2);
        assert!(!core.long_kept.load(Ordering::Relaxed));
        // A hold marked again (a long statement admitted again after it gave way) is counted
        // once.
        assert_eq!(core.mark_long(&mut b.hold), 2);
        // A hand-off serves the newest (3, under the age cap); the oldest not yet served is
        // still 2, queued at 3 ms.
        let (who, mut d) = exit_to(&core, b.hold, 5 * MS).expect("handed off");
        assert_eq!(who, 3);
        assert!(!core.yields_quantum(2 * MS, &mut d.hold, 0, || None));
        assert!(core.yields_quantum(3 * MS, &mut d.hold, 0, || None));
        assert_eq!(core.long_holders(), 2);
        assert_eq!(core.long_peak.load(Ordering::Relaxed), 2);
        // Once 2 is served too, nobody waits: keep. The long statement that left is no
        // longer counted.
        let (who, mut c) = exit_to(&core, d.hold, 6 * MS).expect("handed off");
        assert_eq!(who, 2);
        assert_eq!(core.long_holders(), 1);
        assert!(!core.yields_quantum(u64::MAX, &mut c.hold, 0, || None));
        // A waiter that cancels is forgotten as the oldest.
        let e = wait_id(enter(&core, 4, 7 * MS));
        assert!(core.yields_quantum(8 * MS, &mut c.hold, 0, || None));
        assert!(core.cancel_wait(e).is_none());
        assert!(!core.yields_quantum(8 * MS, &mut c.hold, 0, || None));
        for hold in [a.hold, c.hold] {
            assert!(exit_to(&core, hold, 9 * MS).is_none());
        }
        assert_eq!(core.inside(), 0);
        assert_eq!(core.long_holders(), 0);
    }

    #[test]
    fn a_lent_long_holders_hold_forgotten_after_its_loan_is_no_longer_counted() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let mut a = admitted(enter(&core, 0, 0));
        wait_id(enter(&core, 1, 3 * MS));
        assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
        assert_eq!(core.long_holders(), 1);
        // The holder parks on a lock: its slot is lent to the waiter, and the session drops
        // its hold once the loan gave the slot back.
        assert_eq!(core.lend(4 * MS).len(), 1);
        core.forget_lent(a.hold);
        assert_eq!(core.long_holders(), 0);
    }

    #[test]
    fn a_holder_past_its_quantum_with_nobody_queued_runs_the_controller_once_a_window_and_it_cuts_to_the_resting_floor(
    ) {
        // An adaptive core on 2 CPUs started at 32; two holders past their quanta, nobody
        // queued. Each quantum end keeps its slot; once per window the controller decides on
        // the CPU reading it is handed (both CPUs busy) and cuts towards the resting floor.
        // Neither holder is counted long: with every session inside, a preempted short
        // statement would look the same.
        let core: AutoCore<u32> = AutoCore::new(AutoParams {
            start_limit: 32,
            cpus: 2,
            min_limit: 2,
            adaptive: true,
            ..params(32)
        });
        let mut a = admitted(enter(&core, 0, 0));
        let mut b = admitted(enter(&core, 1, 0));
        let mut reads: u64 = 0;
        let mut t = 0;
        while core.limit() > 4 && t < 2_000 * MS {
            t += 5 * MS;
            for h in [&mut a.hold, &mut b.hold] {
                assert!(!core.yields_quantum(0, h, t, || {
                    reads += 1;
                    Some(2 * t)
                }));
            }
        }
        assert_eq!(core.limit(), 4, "two slots per CPU");
        let g = core.gauges();
        assert_eq!((g.long_holders, g.limit_reasons.busy), (0, 3));
        // At most one reading per controller window, not one per quantum end (two holders'
        // quanta end in each step): a count of calls against a count of windows of the
        // synthetic clock the test feeds in, no clock is read.
        let windows = t / CONTROL_WINDOW.as_nanos() as u64;
        let quantum_ends = 2 * t / (5 * MS);
        assert!(
            reads <= windows + 1 && reads < quantum_ends,
            "{reads} readings for {windows} windows and {quantum_ends} quantum ends"
        );
        // At the floor nothing more is read or cut.
        let before = reads;
        for _ in 0..10 {
            t += 20 * MS;
            assert!(!core.yields_quantum(0, &mut a.hold, t, || {
                reads += 1;
                Some(2 * t)
            }));
        }
        assert_eq!((core.limit(), reads), (4, before));
        let _ = core.exit(a.hold, || t);
        let _ = core.exit(b.hold, || t);
    }

    #[test]
    fn with_nobody_queued_busy_cpus_halve_the_limit_to_the_resting_floor_beside_long_statements_too(
    ) {
        // 9 holders on 2 CPUs at a limit of 32, 8 of them long statements (marked while
        // threads queued, earlier): with nobody queued now the limit is halved down to the
        // resting floor of 4 (their lane, one past the CPUs, is below it) and read no more.
        let core: AutoCore<u32> = AutoCore::new(AutoParams {
            start_limit: 32,
            cpus: 2,
            min_limit: 2,
            adaptive: true,
            ..params(32)
        });
        let mut holds: Vec<Admission> = (0..9).map(|i| admitted(enter(&core, i, 0))).collect();
        for a in &mut holds[..8] {
            core.mark_long(&mut a.hold);
        }
        let mut t = 0;
        for _ in 0..100 {
            t += 10 * MS;
            assert!(!core.yields_quantum(0, &mut holds[8].hold, t, || Some(2 * t)));
        }
        assert_eq!(core.limit(), 4);
        let r = core.gauges().limit_reasons;
        assert_eq!(r.busy, 3, "32 -> 16 -> 8 -> 4");
        for a in holds {
            let _ = core.exit(a.hold, || t);
        }
    }

    #[test]
    fn a_stall_check_raises_the_limit_and_hands_off_when_no_slot_moved_for_a_stall_period() {
        let (core, _held, id) = adaptive_one_held_one_queued();
        let period = STALL_PERIOD.as_nanos() as u64;
        assert!(
            core.stall_check(period / 2, || Some(0)).is_empty(),
            "too early"
        );
        // The CPU reading: nothing used (the holder is blocked).
        let out = core.stall_check(period, || Some(0));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].id, id);
        let g = core.gauges();
        assert_eq!((g.stall_ticks, g.limit), (1, 2));
    }

    #[test]
    fn a_lent_slot_comes_back_free_then_above_the_limit_up_to_twice_it_then_first_in_line() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let a = admitted(enter(&core, 0, 0));
        assert!(core.lend(0).is_empty());
        let b = admitted(enter(&core, 1, 0));
        assert!(core.lend(0).is_empty());
        let c = admitted(enter(&core, 2, 0));
        wait_id(enter(&core, 3, 0));
        let over = core.reclaim(&0, || {}).expect("above the limit: 2 inside");
        assert_eq!(over.kind(), HoldKind::Slot);
        drop(over); // the session's own hold stands for it
        assert_eq!(core.gauges().inside, 2);
        let id = core
            .reclaim(&1, || {})
            .expect_err("twice the limit: queued");
        assert_eq!(core.gauges().reclaims_over, 1);
        // c leaves: 1 inside (a), limit 1: nobody is handed a slot yet.
        assert!(core.exit(c.hold, || 0).is_empty());
        // a leaves: the reclaimer is first in line, ahead of the newer plain waiter.
        let out = core.exit(a.hold, || 0);
        assert_eq!((out[0].waiter, out[0].id), (1, id));
        let (adm, _) = core.finish_wait(id, 0, || None);
        drop(adm.hold); // the session's own hold stands for it
        let out = core.exit(b.hold, || 0);
        assert_eq!(out[0].waiter, 3);
    }

    #[test]
    fn one_waiter_keeps_the_stall_watch_and_it_passes_to_the_oldest_while_the_newest_are_served() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let a = admitted(enter(&core, 0, 0));
        let b = wait_id(enter(&core, 1, 0));
        let c = wait_id(enter(&core, 2, MS / 10));
        let d = wait_id(enter(&core, 3, MS / 5));
        // The first to queue keeps the watch; the others sleep without a timer.
        assert!(core.is_stall_watch(b));
        assert!(!core.is_stall_watch(c) && !core.is_stall_watch(d));
        assert_eq!(core.take_nudge(), None);
        // The queue is young: the newest (`d`) is served; the watch stays where it is.
        let (who, _) = exit_to(&core, a.hold, MS / 2).unwrap();
        assert_eq!(who, 3);
        assert!(core.is_stall_watch(b));
        assert_eq!(core.take_nudge(), None);
        // `b` gives up: the watch passes to the waiter hot-first reaches last, the oldest
        // left (`c`), who is woken to take it, once.
        assert_eq!(core.cancel_wait(b), None);
        assert!(core.is_stall_watch(c));
        assert_eq!(core.take_nudge(), Some(2));
        assert_eq!(core.take_nudge(), None);
        // The last waiter leaves: nobody keeps the watch.
        assert_eq!(core.cancel_wait(c), None);
        assert!(!core.is_stall_watch(c));
        assert_eq!(core.take_nudge(), None);
    }

    #[test]
    fn while_the_oldest_are_served_the_watch_passes_to_the_newest() {
        let core: AutoCore<u32> = AutoCore::new(params(1));
        let a = admitted(enter(&core, 0, 0));
        let b = wait_id(enter(&core, 1, 0));
        wait_id(enter(&core, 2, 0));
        let d = wait_id(enter(&core, 3, 0));
        assert!(core.is_stall_watch(b));
        // Past the age cap the oldest (`b`, the keeper) is served; when it runs, the watch
        // passes to the newest, whom oldest-first reaches last.
        let (who, _) = exit_to(&core, a.hold, 10 * MS).unwrap();
        assert_eq!(who, 1);
        assert!(core.is_stall_watch(d));
        assert_eq!(core.take_nudge(), Some(3));
    }

    #[test]
    fn a_waiter_the_hook_refuses_never_keeps_the_watch() {
        // The real gate's hook refuses async sessions (their waits have no timer).
        let core: AutoCore<u32> = AutoCore::new(params(1)).with_watch_hook(|w| *w < 100);
        admitted(enter(&core, 0, 0));
        let x = wait_id(enter(&core, 100, 0));
        let b = wait_id(enter(&core, 1, 0));
        assert!(!core.is_stall_watch(x));
        assert!(core.is_stall_watch(b));
        // `b` leaves; the only other waiter may not watch: nobody keeps it, nobody is woken.
        assert_eq!(core.cancel_wait(b), None);
        assert!(!core.is_stall_watch(x));
        assert_eq!(core.take_nudge(), None);
        // The next thread to queue takes it.
        let c = wait_id(enter(&core, 2, 0));
        assert!(core.is_stall_watch(c));
    }
}
