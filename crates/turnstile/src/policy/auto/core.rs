//! The slots and the queue of `auto`: one atomic increment admits while nobody queues; then each
//! freed slot goes straight to a waiter: newest first, oldest first once one passes the age cap.

use std::collections::VecDeque;

use super::controller::{Decision, LimitController, CONTROL_WINDOW};
use super::{AutoParams, RejectReason, STALL_PERIOD};
use crate::auto_stats::AutoStats;
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
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests;
