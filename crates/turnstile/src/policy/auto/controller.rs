//! The adaptive limit: the model of docs/AUTO.md in three rules (floor, fill, busy).
//!
//! While threads queue every slot is held, and `N` slots keep `N × b` CPUs busy, where `b` is
//! the share of a holder's time spent running. The CPUs are kept busy, and no more, at
//! `N* = C ÷ b`; the gate reads `b` from the slots it has (`b = useful CPU ÷ N`), so
//! `N* = N × target ÷ useful`, where *useful* is the process's CPU use over the CPUs it may
//! use, less what its hand-offs cost. The controller is time-free: the driver feeds it what
//! it observes and, at each window's end, the time and the process's CPU time.

use std::time::Duration;

use crate::auto_stats::LimitReasons;

/// The controller's window: one decision per window at most. CockroachDB's slot adjuster
/// decides every 1 ms; a window must also hold several hand-offs at a few hundred admissions
/// a second, so that one late wake-up is not a trend.
pub const CONTROL_WINDOW: Duration = Duration::from_millis(20);

/// The window lasts at least this many times what its last CPU reading cost, so that reading
/// the process's CPU clock (a sum the kernel makes over every thread) takes at most 1 % of a
/// CPU.
pub const WINDOWS_PER_READING_COST: u64 = 100;

/// How far the process CPU clock may lag per CPU other than the reader's where the kernel's
/// tick cannot be read: one tick at 250 Hz, the most common `CONFIG_HZ`.
pub const CPU_CLOCK_LAG: Duration = Duration::from_millis(4);

/// The longest reading: one too unclear to decide reads on up to this (ten windows, where the
/// clock's lag on two CPUs is ±1 %, inside the 3-point dead band), then decides as it stands.
pub const MAX_READING: Duration = Duration::from_millis(200);

/// The fewest CPUs the use is read against when other processes take nearly all: a reading
/// is never divided by nothing.
pub const MIN_CPUS_AVAILABLE: f64 = 0.05;

/// A grantee that starts more than this after its hand-off waited for a CPU: CockroachDB's
/// target for scheduler latency, a service objective rather than a fitted value.
pub const LATE_GRANT: Duration = Duration::from_millis(1);

/// After a fill that did not raise the CPU use was undone, fill waits this long, then twice
/// as long after each such probe, up to [`FILL_BACKOFF_MAX`]; a reading with the CPUs busy
/// starts over. TCP's initial retransmission timeout and its doubling (RFC 6298): a probe
/// costs the CPUs' owner a few more runnable threads for one reading.
pub const FILL_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait between fill probes: a gate whose CPUs are freed again notices within
/// seconds.
pub const FILL_BACKOFF_MAX: Duration = Duration::from_secs(8);

/// Slots per CPU while threads queue and no rule asks for more: one holder running and one
/// ready to take the CPU at once when it hands its slot over, so no hand-off leaves a CPU
/// idle for a wake-up.
pub const SLOTS_PER_CPU: u32 = 2;

/// Below this CPU use (with threads queued) a CPU is idle more than the 5 % the readings'
/// noise and the hand-offs' gaps leave: slots are held by threads that are not running.
const U_LOW: f64 = 0.95;
/// Above this every CPU is taken to be busy: slots past the floor only add preemption.
const U_HIGH: f64 = 0.98;
/// What a raise aims for, between the two.
const U_TARGET: f64 = 0.97;

/// What the controller decided in one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No change.
    Hold,
    /// Raised to this limit.
    Raise(u32),
    /// Lowered to this limit.
    Cut(u32),
}

/// The adaptive limit (see the module documentation and docs/AUTO.md).
#[derive(Debug, Clone)]
pub struct LimitController {
    cpus: u32,
    min: u32,
    max: u32,
    window_start_ns: u64,
    /// Boxed: every policy's core is an enum variant, and this one should not size them all.
    r: Box<Reading>,
}

/// What the controller learns over a reading, and its counts.
#[derive(Debug, Clone, Default)]
struct Reading {
    /// CPU one hand-off costs, ns ([`super::AutoParams::handoff_cpu`]).
    handoff_cpu_ns: u64,
    /// How far the CPU clock may lag per CPU other than the reader's (0: exact).
    cpu_lag_ns: u64,
    /// What the last CPU reading cost (0: not measured).
    reading_cost_ns: u64,
    /// The CPUs other processes leave this one (`None`: unknown, read against all).
    cpus_available: Option<f64>,
    start_ns: u64,
    cpu_start_ns: Option<u64>,
    grants: u32,
    late: u32,
    /// Threads queued in this window.
    queued: bool,
    /// A waiter saw no slot move for a stall period: decide now.
    stalled: bool,
    /// The most long statements seen holding slots at once, this reading and the one before.
    long: u32,
    long_before: u32,
    /// A long statement kept its slot beside waiters the other slots served.
    long_kept: bool,
    /// The last fill: from which limit, to which, and the useful CPU use it began at.
    fill: Option<(u32, u32, f64)>,
    /// Fill waits until then after one was undone (0: not waiting), and for how long next.
    fill_resume_ns: u64,
    backoff_ns: u64,
    raises: u64,
    cuts: u64,
    reasons: LimitReasons,
}

/// A rule's verdict: the new limit and the counter its move lands in, or read on.
enum Verdict {
    Set(u32, fn(&mut LimitReasons) -> &mut u64),
    ReadOn,
}

/// One reading's figures, each a share of the CPUs it is read against.
#[derive(Debug, Clone, Copy)]
struct Use {
    /// CPU use.
    u: f64,
    /// CPU use less what the hand-offs cost.
    useful: f64,
    /// The error of both from the CPU clock's lag.
    e: f64,
}

impl LimitController {
    /// A controller for `cpus` CPUs, bounded to `min..=max`, given exact CPU readings and
    /// hand-offs that cost nothing until told otherwise.
    pub fn new(cpus: u32, min: u32, max: u32) -> Self {
        let min = min.max(1);
        LimitController {
            cpus: cpus.max(1),
            min,
            max: max.max(min),
            window_start_ns: 0,
            r: Box::default(),
        }
    }

    /// Its CPU readings may lag by up to `lag` per CPU other than the reader's.
    pub fn with_cpu_lag(mut self, lag: Duration) -> Self {
        self.r.cpu_lag_ns = lag.as_nanos().min(u128::from(u64::MAX)) as u64;
        self
    }

    /// One hand-off costs `cpu` of CPU time.
    pub fn with_handoff_cpu(mut self, cpu: Duration) -> Self {
        self.r.handoff_cpu_ns = cpu.as_nanos().min(u128::from(u64::MAX)) as u64;
        self
    }

    /// The floor while threads queue without long statements: [`SLOTS_PER_CPU`] per CPU
    /// within the bounds, or `min` where the bounds were set below the CPUs.
    pub(crate) fn rest(&self) -> u32 {
        if self.min < self.cpus {
            self.min
        } else {
            self.cpus
                .saturating_mul(SLOTS_PER_CPU)
                .clamp(self.min, self.max)
        }
    }

    /// Beside `L` long statements, a slot for each (up to the CPUs: more only time-share
    /// them) and the CPUs they leave, at least one slot: `max(C, min(L, C) + 1)`. The long
    /// statements are always runnable, so they fill the gaps of the others' hand-offs, and
    /// a slot past this adds a runnable thread whose share of the CPUs the kernel takes
    /// from them. Without long statements, [`LimitController::rest`].
    fn floor(&self) -> u32 {
        match self.r.long.max(self.r.long_before) {
            0 => self.rest(),
            long => self
                .cpus
                .max(long.min(self.cpus) + 1)
                .clamp(self.min, self.max),
        }
    }

    /// Times it raised the limit.
    pub fn raises(&self) -> u64 {
        self.r.raises
    }

    /// Times it lowered the limit.
    pub fn cuts(&self) -> u64 {
        self.r.cuts
    }

    /// Why it moved the limit.
    pub fn reasons(&self) -> LimitReasons {
        self.r.reasons
    }

    /// A hand-off's grantee began to run `delay_ns` after it was chosen.
    pub fn observe_grant(&mut self, delay_ns: u64) {
        self.r.grants += 1;
        if delay_ns > LATE_GRANT.as_nanos() as u64 {
            self.r.late += 1;
        }
    }

    /// Threads were queued during this window.
    pub fn observe_queue(&mut self) {
        self.r.queued = true;
    }

    /// Holders spent whole quanta with threads queued: `n` long statements at once. If
    /// `kept`, one kept its slot (the waiters were served by other slots).
    pub fn observe_long_holders(&mut self, n: u32, kept: bool) {
        self.r.long = self.r.long.max(n);
        self.r.long_kept |= kept;
    }

    /// A waiter saw no slot move for a stall period: the next decision is made on the
    /// reading as it stands.
    pub fn observe_stall(&mut self) {
        self.r.queued = true;
        self.r.stalled = true;
    }

    /// Whether the window that began at the last decision is over at `now_ns`.
    pub fn window_over(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.window_start_ns) >= self.window_ns()
    }

    /// The window: [`WINDOWS_PER_READING_COST`] times the last reading's cost, within
    /// [`CONTROL_WINDOW`] and [`MAX_READING`].
    pub fn window_ns(&self) -> u64 {
        self.r
            .reading_cost_ns
            .saturating_mul(WINDOWS_PER_READING_COST)
            .clamp(
                CONTROL_WINDOW.as_nanos() as u64,
                MAX_READING.as_nanos() as u64,
            )
    }

    /// The last CPU reading took `cost_ns` to make.
    pub fn set_reading_cost(&mut self, cost_ns: u64) {
        self.r.reading_cost_ns = cost_ns;
    }

    /// Other processes left this one `cpus` CPUs: the use is read against those from the
    /// next decision, so CPUs others keep busy are not taken for idle ones.
    pub fn set_cpus_available(&mut self, cpus: Option<f64>) {
        self.r.cpus_available = cpus.filter(|c| c.is_finite());
    }

    /// The CPUs the use is read against, in thousandths, where an estimate is known.
    pub fn cpus_available_milli(&self) -> Option<u32> {
        self.r
            .cpus_available
            .map(|_| (self.cpus_read() * 1000.0).round() as u32)
    }

    fn cpus_read(&self) -> f64 {
        let cpus = f64::from(self.cpus);
        self.r
            .cpus_available
            .map_or(cpus, |a| a.clamp(MIN_CPUS_AVAILABLE, cpus))
    }

    /// The reading from its start to `now_ns`, `None` where the CPU time is unknown. Exact
    /// (`e` = 0) once as long as the longest reading, or when `exact`.
    fn reading(&self, now_ns: u64, cpu_ns: Option<u64>, exact: bool) -> Option<Use> {
        let span_ns = now_ns.saturating_sub(self.r.start_ns);
        let used = cpu_ns?.saturating_sub(self.r.cpu_start_ns?);
        if span_ns == 0 {
            return None;
        }
        let capacity = span_ns as f64 * self.cpus_read();
        let u = used as f64 / capacity;
        let handoffs = f64::from(self.r.grants) * self.r.handoff_cpu_ns as f64 / capacity;
        let e = if exact || span_ns >= MAX_READING.as_nanos() as u64 {
            0.0
        } else {
            self.r.cpu_lag_ns as f64 * f64::from(self.cpus - 1) / capacity
        };
        Some(Use {
            u,
            useful: u - handoffs,
            e,
        })
    }

    /// Starts a new reading at `now_ns`.
    fn restart(&mut self, now_ns: u64, cpu_ns: Option<u64>) {
        let r = &mut *self.r;
        r.grants = 0;
        r.late = 0;
        r.long_before = std::mem::take(&mut r.long);
        r.long_kept = false;
        r.start_ns = now_ns;
        r.cpu_start_ns = cpu_ns;
    }

    /// The share of the CPUs that may stay idle with threads queued before the fill rule
    /// raises: 5 %, or beside long statements that keep their slots a CPU's worth (less is
    /// the gaps of the lane's hand-offs; a CPU's worth is a holder that does not run).
    fn slack(&self) -> f64 {
        if self.r.long_kept {
            (1.0 / self.cpus_read()).clamp(1.0 - U_LOW, 1.0)
        } else {
            1.0 - U_LOW
        }
    }

    /// Ends the window at `now_ns`, with the process's CPU time so far `cpu_ns` (`None`: not
    /// measurable), and decides the limit that follows `limit`.
    pub fn decide(&mut self, limit: u32, now_ns: u64, cpu_ns: Option<u64>) -> Decision {
        let queued = std::mem::take(&mut self.r.queued);
        let stalled = std::mem::take(&mut self.r.stalled);
        self.window_start_ns = now_ns;
        if !queued || limit == 0 {
            self.restart(now_ns, cpu_ns);
            return Decision::Hold;
        }
        self.r.reasons.windows += 1;
        let verdict = match self.reading(now_ns, cpu_ns, stalled) {
            _ if limit < self.floor() => Verdict::Set(self.floor(), |r| &mut r.floor),
            Some(x) => self.rules(limit, x, now_ns),
            None => self.blind(limit, stalled),
        };
        self.settle(limit, verdict, now_ns, cpu_ns)
    }

    /// The fill and busy rules on a CPU reading, first match wins.
    fn rules(&mut self, limit: u32, x: Use, now_ns: u64) -> Verdict {
        let floor = self.floor();
        let busy_mark = 1.0 - self.slack();
        let late = self.r.grants > 0 && self.r.late * 8 > self.r.grants;
        let last_fill = self.r.fill.take();
        if x.useful + x.e < busy_mark {
            return self.fill(limit, x, now_ns, last_fill);
        }
        if x.u - x.e >= busy_mark {
            // The CPUs are in use: fill may probe at once again.
            self.r.fill_resume_ns = 0;
            self.r.backoff_ns = 0;
        }
        if x.u - x.e < busy_mark {
            // Which side of the mark is not yet clear.
            return Verdict::ReadOn;
        }
        if limit <= floor {
            return Verdict::Set(limit, |r| &mut r.busy);
        }
        let quarter = limit - (limit / 4).max(1);
        if late {
            // Runnable holders waited for a CPU: more slots than CPUs can serve.
            Verdict::Set(quarter.max(floor), |r| &mut r.late)
        } else if self.r.long_kept && self.r.long_before > 0 {
            // Beside long statements seen on two readings (the first may not see them all),
            // each slot past the lane takes CPU from them.
            Verdict::Set(quarter.max(floor), |r| &mut r.busy)
        } else if x.u - x.e >= U_HIGH {
            Verdict::Set(limit - 1, |r| &mut r.busy)
        } else if x.u + x.e < U_HIGH {
            // The dead band: hold.
            Verdict::Set(limit, |r| &mut r.busy)
        } else {
            Verdict::ReadOn
        }
    }

    /// Fill: `N* = N × target ÷ useful`, at most doubling (a reading may straddle a change of
    /// load), at least one more. The estimate assumes the CPU use grows with the slots; if
    /// the last fill (still in force) left the useful CPU use no higher, the idle CPUs were
    /// not the process's to fill: back to where it began, and fill waits.
    fn fill(&mut self, limit: u32, x: Use, now_ns: u64, last: Option<(u32, u32, f64)>) -> Verdict {
        let r = &mut *self.r;
        if let Some((from, _, useful)) = last.filter(|&(from, to, _)| to == limit && from < to) {
            if x.useful <= useful {
                let backoff = match r.backoff_ns {
                    0 => FILL_BACKOFF.as_nanos() as u64,
                    b => b,
                };
                r.fill_resume_ns = now_ns.saturating_add(backoff);
                r.backoff_ns = (backoff * 2).min(FILL_BACKOFF_MAX.as_nanos() as u64);
                return Verdict::Set(from, |r| &mut r.undone);
            }
        }
        if now_ns < r.fill_resume_ns {
            return Verdict::Set(limit, |r| &mut r.fill);
        }
        let aim = f64::from(limit) * U_TARGET / x.useful.max(0.01);
        let raised = (aim as u32).clamp(limit + 1, limit.saturating_mul(2));
        r.fill = Some((limit, raised.min(self.max), x.useful));
        Verdict::Set(raised, |r| &mut r.fill)
    }

    /// Without a CPU reading (off Linux, the first window): one more slot after prompt
    /// grants or a stall, a quarter fewer after late ones.
    fn blind(&self, limit: u32, stalled: bool) -> Verdict {
        let late = self.r.grants > 0 && self.r.late * 8 > self.r.grants;
        if late {
            Verdict::Set(limit - limit / 4, |r| &mut r.late)
        } else if self.r.grants > 0 || stalled {
            Verdict::Set(limit + 1, |r| &mut r.fill)
        } else {
            Verdict::Set(limit, |r| &mut r.fill)
        }
    }

    /// Applies a verdict: counts it, clamps it to the bounds, starts the next reading.
    fn settle(&mut self, limit: u32, v: Verdict, now_ns: u64, cpu_ns: Option<u64>) -> Decision {
        let (new, reason) = match v {
            Verdict::ReadOn => {
                self.r.reasons.deferred += 1;
                return Decision::Hold;
            }
            Verdict::Set(new, reason) => (new, reason),
        };
        self.restart(now_ns, cpu_ns);
        let clamped = new.clamp(self.min, self.max);
        // A limit an operator set outside the bounds is brought back whatever the rule said.
        let reason: fn(&mut LimitReasons) -> &mut u64 =
            if clamped != new && clamped.cmp(&limit) != new.cmp(&limit) {
                |r| &mut r.bounds
            } else {
                reason
            };
        let r = &mut *self.r;
        match clamped.cmp(&limit) {
            std::cmp::Ordering::Greater => {
                *reason(&mut r.reasons) += 1;
                r.raises += 1;
                Decision::Raise(clamped)
            }
            std::cmp::Ordering::Less => {
                *reason(&mut r.reasons) += 1;
                r.cuts += 1;
                Decision::Cut(clamped)
            }
            std::cmp::Ordering::Equal => Decision::Hold,
        }
    }

    /// Ends a window in which nobody queued, at a quantum's end (a holder kept its slot a
    /// whole quantum). A limit above the sessions binds nobody, and with no queue the other
    /// rules learn nothing; where the CPUs are busy it is halved towards the floor (halving
    /// loses nothing until it falls below the sessions running, which then queue and the
    /// fill rule raises it back if it cut too far). A reading begun long ago (before nobody
    /// queued) only starts a new one. If threads queued in the window after all, the
    /// ordinary decision is made.
    pub fn decide_unqueued(&mut self, limit: u32, now_ns: u64, cpu_ns: Option<u64>) -> Decision {
        if self.r.queued || limit == 0 {
            return self.decide(limit, now_ns, cpu_ns);
        }
        self.window_start_ns = now_ns;
        let span_ns = now_ns.saturating_sub(self.r.start_ns);
        let stale = span_ns > MAX_READING.as_nanos().max(2 * u128::from(self.window_ns())) as u64;
        let floor = self.floor();
        let verdict = match self.reading(now_ns, cpu_ns, false) {
            Some(x) if !stale && limit > floor => {
                if x.u - x.e >= U_LOW {
                    Verdict::Set((limit / 2).max(floor), |r| &mut r.busy)
                } else if x.u + x.e >= U_LOW {
                    Verdict::ReadOn
                } else {
                    Verdict::Set(limit, |r| &mut r.busy)
                }
            }
            _ => Verdict::Set(limit, |r| &mut r.busy),
        };
        self.settle(limit, verdict, now_ns, cpu_ns)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A controller on 2 CPUs, bounds 2..=1000, whose reading began at (0 ns, 0 ns of CPU).
    fn two_cpus() -> (LimitController, (u64, u64)) {
        started(LimitController::new(2, 2, 1000))
    }

    /// `c` with a first reading begun at (0, 0): before any, it has no CPU time to compare.
    fn started(mut c: LimitController) -> (LimitController, (u64, u64)) {
        assert_eq!(c.decide(4, 0, Some(0)), Decision::Hold);
        (c, (0, 0))
    }

    /// One 20 ms window with threads queued, the CPUs `busy` (a share of both) and `grants`
    /// grants of which `late` were late.
    fn window(
        c: &mut LimitController,
        t: &mut (u64, u64),
        limit: u32,
        busy: f64,
        grants: u32,
        late: u32,
    ) -> Decision {
        for i in 0..grants {
            c.observe_grant(if i < late { 5 * MS } else { 0 });
        }
        c.observe_queue();
        t.0 += 20 * MS;
        t.1 += (40.0 * busy * MS as f64) as u64;
        c.decide(limit, t.0, Some(t.1))
    }

    #[test]
    fn below_the_floor_the_limit_goes_to_two_slots_per_cpu_or_to_bounds_set_below_the_cpus() {
        let (mut c, mut t) = two_cpus();
        assert_eq!(window(&mut c, &mut t, 2, 1.0, 10, 10), Decision::Raise(4));
        assert_eq!(c.reasons().floor, 1);
        let (mut low, mut t) = started(LimitController::new(4, 1, 64));
        assert_eq!(low.rest(), 1, "bounds set below the CPUs are the floor");
        assert_eq!(window(&mut low, &mut t, 1, 2.0, 10, 0), Decision::Hold);
    }

    #[test]
    fn idle_cpus_with_threads_queued_raise_towards_the_limit_that_fills_them_at_most_doubling() {
        let (mut c, mut t) = two_cpus();
        // Half busy at 8 slots: 8 × 0.97 ÷ 0.5 = 15.
        assert_eq!(window(&mut c, &mut t, 8, 0.5, 10, 0), Decision::Raise(15));
        // A tenth busy: ten times as many slots, but at most twice.
        assert_eq!(window(&mut c, &mut t, 8, 0.1, 10, 0), Decision::Raise(16));
        // 94 %: at least one more.
        assert_eq!(window(&mut c, &mut t, 8, 0.94, 10, 0), Decision::Raise(9));
        assert_eq!(c.reasons().fill, 3);
        assert_eq!(c.reasons().moves(), c.raises() + c.cuts());
    }

    #[test]
    fn cpu_spent_on_hand_offs_is_not_useful_and_raises_the_limit_though_the_cpus_are_busy() {
        let (mut c, mut t) =
            started(LimitController::new(2, 2, 1000).with_handoff_cpu(Duration::from_micros(5)));
        // 4,000 hand-offs of 5 µs in 20 ms on 2 CPUs: half the CPU time.
        assert_eq!(window(&mut c, &mut t, 8, 1.0, 4000, 0), Decision::Raise(15));
        // A few hand-offs cost nothing to speak of: busy, above the floor, cut by one.
        assert_eq!(window(&mut c, &mut t, 8, 1.0, 10, 0), Decision::Cut(7));
    }

    #[test]
    fn busy_cpus_decay_the_limit_by_one_late_grants_cut_a_quarter_and_the_dead_band_holds() {
        let (mut c, mut t) = two_cpus();
        assert_eq!(window(&mut c, &mut t, 10, 0.99, 10, 0), Decision::Cut(9));
        assert_eq!(window(&mut c, &mut t, 12, 0.97, 10, 5), Decision::Cut(9));
        assert_eq!(window(&mut c, &mut t, 9, 0.97, 10, 1), Decision::Hold);
        // Never below the floor.
        assert_eq!(window(&mut c, &mut t, 5, 0.99, 10, 10), Decision::Cut(4));
        assert_eq!(window(&mut c, &mut t, 4, 0.99, 10, 10), Decision::Hold);
        let r = c.reasons();
        assert_eq!((r.busy, r.late, r.windows), (1, 2, 5));
    }

    #[test]
    fn a_window_without_waiters_decides_nothing_and_a_limit_set_outside_the_bounds_comes_back() {
        let mut c = LimitController::new(2, 2, 8);
        assert_eq!(c.decide(4, 20 * MS, Some(0)), Decision::Hold);
        assert_eq!(c.reasons().windows, 0);
        let mut t = (20 * MS, 0);
        assert_eq!(window(&mut c, &mut t, 50, 0.5, 10, 0), Decision::Cut(8));
        assert_eq!(c.reasons().bounds, 1);
    }

    #[test]
    fn a_reading_within_the_clocks_lag_of_a_mark_reads_on_until_it_can_tell() {
        let (mut c, mut t) =
            started(LimitController::new(2, 2, 1000).with_cpu_lag(Duration::from_millis(4)));
        // 93 % on 20 ms is ±10 %: which side of 95 % is unclear.
        assert_eq!(window(&mut c, &mut t, 8, 0.93, 10, 0), Decision::Hold);
        assert_eq!(c.reasons().deferred, 1);
        // As the reading grows its error shrinks, and the fill rule decides within the
        // longest reading (ten windows).
        let mut windows = 1;
        let d = loop {
            windows += 1;
            match window(&mut c, &mut t, 8, 0.93, 10, 0) {
                Decision::Hold => assert!(windows < 10, "still reading on"),
                d => break d,
            }
        };
        assert_eq!(d, Decision::Raise(9));
        // A stall decides at once on the reading as it stands (the CPU use rose a little
        // with the last fill, so it goes on).
        c.observe_stall();
        t.0 += 20 * MS;
        t.1 += 37_500_000;
        assert!(matches!(c.decide(9, t.0, Some(t.1)), Decision::Raise(_)));
    }

    #[test]
    fn beside_long_statements_the_floor_is_a_slot_each_and_the_cpus_they_leave() {
        let (mut c, mut t) = two_cpus();
        // Two long statements on 2 CPUs: a lane of 3, kept while they keep their slots.
        c.observe_long_holders(2, true);
        assert_eq!(window(&mut c, &mut t, 2, 1.0, 0, 0), Decision::Raise(3));
        c.observe_long_holders(2, true);
        assert_eq!(window(&mut c, &mut t, 3, 1.0, 0, 0), Decision::Hold);
        // Above it with the CPUs busy: a quarter towards it.
        c.observe_long_holders(2, true);
        assert_eq!(window(&mut c, &mut t, 8, 0.9, 0, 0), Decision::Cut(6));
        // Under a CPU's worth idle is the lane's gaps, not a holder that does not run...
        c.observe_long_holders(2, true);
        assert_eq!(window(&mut c, &mut t, 3, 0.6, 0, 0), Decision::Hold);
        // ...a CPU's worth is.
        c.observe_long_holders(2, true);
        assert!(matches!(
            window(&mut c, &mut t, 3, 0.4, 0, 0),
            Decision::Raise(_)
        ));
        // More long statements than CPUs only time-share them: still one slot past the CPUs.
        c.observe_long_holders(9, false);
        assert_eq!(window(&mut c, &mut t, 3, 1.0, 0, 0), Decision::Hold);
        window(&mut c, &mut t, 3, 1.0, 0, 0);
        // Once no long statement is seen for two readings, the floor is two per CPU again.
        window(&mut c, &mut t, 3, 1.0, 0, 0);
        assert_eq!(window(&mut c, &mut t, 3, 1.0, 0, 0), Decision::Raise(4));
    }

    #[test]
    fn cpus_other_processes_keep_busy_are_not_idle_and_those_they_leave_are() {
        let (mut c, mut t) = two_cpus();
        // Half of 2 CPUs used, with one CPU left by others: busy, nothing to fill.
        c.set_cpus_available(Some(1.0));
        assert_eq!(c.cpus_available_milli(), Some(1000));
        assert_eq!(window(&mut c, &mut t, 4, 0.5, 10, 0), Decision::Hold);
        // A quarter used of the one left: idle, raise.
        assert!(matches!(
            window(&mut c, &mut t, 4, 0.25, 10, 0),
            Decision::Raise(_)
        ));
    }

    #[test]
    fn without_a_cpu_reading_prompt_grants_add_a_slot_and_late_ones_cut_a_quarter() {
        let mut c = LimitController::new(2, 2, 64);
        c.observe_queue();
        c.observe_grant(0);
        assert_eq!(c.decide(4, 20 * MS, None), Decision::Raise(5));
        c.observe_queue();
        c.observe_grant(5 * MS);
        assert_eq!(c.decide(8, 40 * MS, None), Decision::Cut(6));
    }

    #[test]
    fn with_nobody_queued_busy_cpus_halve_the_limit_towards_the_floor_and_idle_ones_keep_it() {
        let (mut c, _) = two_cpus();
        c.decide(32, 0, Some(0));
        assert_eq!(
            c.decide_unqueued(32, 20 * MS, Some(40 * MS)),
            Decision::Cut(16)
        );
        assert_eq!(
            c.decide_unqueued(16, 40 * MS, Some(60 * MS)),
            Decision::Hold
        );
        assert_eq!(
            c.decide_unqueued(5, 60 * MS, Some(100 * MS)),
            Decision::Cut(4)
        );
        // A reading begun long ago only starts over.
        assert_eq!(
            c.decide_unqueued(32, 2000 * MS, Some(4000 * MS)),
            Decision::Hold
        );
        assert_eq!(c.reasons().busy, 2);
        // Threads queued in the window after all: the ordinary rules.
        c.observe_queue();
        assert!(matches!(
            c.decide_unqueued(8, 2020 * MS, Some(4002 * MS)),
            Decision::Raise(_)
        ));
    }

    #[test]
    fn a_costly_cpu_reading_stretches_the_window_up_to_the_longest_reading() {
        let mut c = LimitController::new(2, 2, 64);
        assert_eq!(c.window_ns(), CONTROL_WINDOW.as_nanos() as u64);
        c.set_reading_cost(500_000);
        assert_eq!(c.window_ns(), 50 * MS);
        c.set_reading_cost(10 * MS);
        assert_eq!(c.window_ns(), MAX_READING.as_nanos() as u64);
        assert!(!c.window_over(199 * MS) && c.window_over(200 * MS));
    }

    /// Windows of a load whose CPU use is `u_at(limit)` (a share of the CPUs, at most all),
    /// from a limit of 4 on 2 CPUs; the limit after `n` of them.
    fn ramp(u_at: impl Fn(u32) -> f64, n: usize) -> u32 {
        let (mut c, mut t) = two_cpus();
        let mut limit = 4;
        for _ in 0..n {
            match window(&mut c, &mut t, limit, u_at(limit).min(1.0), 10, 0) {
                Decision::Raise(l) | Decision::Cut(l) => limit = l,
                Decision::Hold => {}
            }
        }
        limit
    }

    #[test]
    fn slots_that_wait_where_nobody_declared_it_are_added_until_the_cpus_are_full() {
        // Each slot keeps 2 % of the CPUs busy: 4 → 8 → 16 → 32 → 48, where 0.96 is in the
        // dead band.
        assert_eq!(ramp(|l| 0.02 * f64::from(l), 30), 48);
        // A part that does not grow with the slots: 0.08 + 0.025 per slot holds at 35.
        assert_eq!(ramp(|l| 0.08 + 0.025 * f64::from(l), 30), 35);
        // Where no integer limit lands in the dead band (15 % a slot: 6 is 0.90, 7 would be
        // 1.05), the limit stays within one of the CPUs' fill.
        let l = ramp(|l| 0.15 * f64::from(l), 30);
        assert!((6..=7).contains(&l), "{l}");
    }

    #[test]
    fn a_fill_that_does_not_raise_the_cpu_use_is_undone_and_fill_waits_until_the_cpus_are_busy() {
        let (mut c, mut t) = two_cpus();
        // Another process holds half the CPUs unseen: the process reads 50 % whatever its
        // limit. The first fill is taken on trust...
        assert_eq!(window(&mut c, &mut t, 8, 0.5, 10, 0), Decision::Raise(15));
        // ...and undone when the CPU use did not rise with it.
        assert_eq!(window(&mut c, &mut t, 15, 0.5, 10, 0), Decision::Cut(8));
        assert_eq!(c.reasons().undone, 1);
        // Fill waits a second (fifty 20 ms windows), then probes again.
        for _ in 0..49 {
            assert_eq!(window(&mut c, &mut t, 8, 0.5, 10, 0), Decision::Hold);
        }
        assert_eq!(window(&mut c, &mut t, 8, 0.5, 10, 0), Decision::Raise(15));
        // A fill that pays off goes on.
        assert_eq!(window(&mut c, &mut t, 15, 0.8, 10, 0), Decision::Raise(18));
        // The next undone one waits twice as long; a reading with the CPUs busy ends the wait.
        assert_eq!(window(&mut c, &mut t, 18, 0.8, 10, 0), Decision::Cut(15));
        assert_eq!(window(&mut c, &mut t, 15, 0.99, 10, 0), Decision::Cut(14));
        assert_eq!(window(&mut c, &mut t, 14, 0.5, 10, 0), Decision::Raise(27));
    }
}
