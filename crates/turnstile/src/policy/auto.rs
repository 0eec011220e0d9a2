//! `auto`: the gate to deploy. No limit or tickets to tune, and none of the seeds' failures.
//!
//! The decisions, each from the field's best answer to one seed failure:
//!
//! * **A time quantum, not row tickets** (seed 000). An admission grants a quantum of time
//!   ([`DEFAULT_QUANTUM`]); the session keeps its slot between calls until the quantum is
//!   spent, then gives it up at its next exit if a waiter has waited since before the quantum
//!   began, and otherwise renews it ([`AutoCore::yields_quantum`]): a long statement gives
//!   way to waiters it locks out, not to those the other slots serve. A cheap row and an
//!   expensive one cost what they cost. The rule lives in [`super::Tickets`], which both
//!   drivers use.
//! * **Free the slot for waits, not for work** (seeds 001 and 004). A step-out for a wait (row
//!   lock, disk I/O, the commit) frees the slot; a step-out for work outside the engine
//!   (sending a row, a file sort) keeps it while the quantum lasts ([`keeps_slot_across`]), so
//!   MySQL 5.0's forced exit before every row sent costs nothing. After a wait, the session
//!   comes back ahead of the queue: into a free slot, or as one of the *extra* admissions,
//!   which never outnumber the limit (so at most `2 × limit` run: [`AutoCore::enter_after_wait`]).
//! * **Hot first, never starved.** Admission is one atomic increment while nobody is queued
//!   (as `polling`). Once threads queue, every freed slot is handed directly to a waiter (as
//!   `classic`): the most recently queued one (hot cache; a lock holder first) while every
//!   waiter is younger than the age cap ([`DEFAULT_AGE_CAP`]); once one is older, the oldest,
//!   until none is (Go's mutex starvation mode, CoDel's switch from LIFO). While a handed-off
//!   waiter has not yet begun to run, a newcomer may run in its place (FLIFO's rule, seed
//!   001), but never while a waiter is past the age cap.
//! * **A limit that finds itself** ([`LimitController`]): starts at the CPUs the process may
//!   use and rests at two slots per CPU ([`SLOTS_PER_CPU`]) once threads queue; each window
//!   it grows while threads queue yet the CPUs are not all busy, decays towards that
//!   floor while they are all busy, and is cut by a quarter when grantees
//!   run late while the CPUs are busy (a run of idle raises that did not raise the CPU use
//!   is undone: the idle CPUs were another process's share); beside long statements
//!   (holders that spend whole quanta while others queue) it keeps a lane: a slot for each
//!   and the CPUs they leave, at least one, for the statements that turn over. The
//!   same rule, run by the one waiter that keeps the
//!   stall watch when it finds no slot released for a stall period, is the stall detector:
//!   slots held by threads that block where nobody declared a wait (seed 004's naive commit)
//!   leave the CPUs idle, so the limit grows past them.
//! * **Lock waits step out by themselves** (`gate_hook`): a holder that parks, inside a call,
//!   on a turnstile lock or condition variable lends its slot ([`AutoCore::lend`]) and takes
//!   it back after ([`AutoCore::reclaim`]).
//! * **Overload protection**, off by default: a cap on queued waiters; past it an enter is
//!   refused at once with a typed reason ([`Step::Reject`]) instead of queueing.
//!
//! # Invariants
//! * Counted inside (`AtomicSlots::inside`) ≤ limit, except transiently inside `try_take`,
//!   and for slots lent during a lock wait and taken back (`reclaim`), which may bring it to
//!   2 × limit; *extra* admissions ≤ limit (checked under the queue lock). So running ≤
//!   2 × limit for threads that do not block on turnstile locks, ≤ 3 × limit with them.
//! * A waiter is released only by a hand-off that counted it inside (or as extra) first, so a
//!   newcomer never takes a handed-off slot.
//! * **No lost wake-up.** A thread queues by incrementing `queued` and then tries for a slot
//!   once more; an exit gives its slot back and then reads `queued`. All four are `SeqCst`,
//!   so either the queuer's retry sees the freed slot or the exit sees the queuer and hands
//!   it a slot under the queue lock (`loom` checks this: `tests/loom.rs`).
//! * Every queued waiter not cancelled is released by some exit, limit change or stall tick.
//! * While thread waiters queue, one of them keeps the stall watch, or has been chosen for it
//!   and is being woken to take it ([`AutoCore::take_nudge`]): a keeper that leaves the queue
//!   passes it on under the queue lock.

use std::collections::VecDeque;
use std::time::Duration;

use super::queue::Release;
use super::slots::AtomicSlots;
use super::{dec, Admission, AdmittedBy, Attempt, Hold, HoldKind, Step, WaitId};
use crate::monitor::StepOutReason;
use crate::sync::{lock, AtomicBool, AtomicU32, AtomicU64, Mutex, Ordering};

/// How long an admission keeps its slot between calls: 10 ms, timed with a precise monotonic
/// clock. At its end the holder gives the slot up only to a waiter that queued before the
/// quantum began ([`AutoCore::yields_quantum`], since 2026-11-26; before, to any waiter), so
/// the quantum is also the longest a locked-out waiter waits for the next holder to look.
/// What set 10 ms is the way back: a statement that gives up its slot at the quantum's
/// end queues behind the waiters already there, and newer waiters are served before it until
/// the oldest passes the age cap ([`DEFAULT_AGE_CAP`], 1 ms), so a long statement loses at
/// least an age cap each quantum. Ten age caps keep that loss near a tenth. With 2 ms (half of
/// each quantum lost) `repro mixed`'s scans ran 3.8–4.7 × a lone scan; with 10 ms 2.2–2.9 ×
/// (5 alternated pairs on the development VM, 2026-11-25; point p99 1.02–1.03 ms against
/// 0.07–1.02 ms, max 12–23 ms against 11–77 ms). The cost is the worst wait of a short
/// statement when every slot is held by a long one: a quantum. No other measured load lost:
/// `bench gate --block-us 200` `auto` ÷ polling 0.945–0.987 against 0.940–0.980 (4 pairs),
/// `repro oltp` at 256 and 1024 threads within the noise (3 pairs), and the simulator's
/// `auto` at 8/16/32 cores 0.960–0.968 of the best peak against 0.954–0.961 (a 2.5 ms range
/// statement no longer spans quanta). Of the order of SQL Server's scheduler quantum (4 ms)
/// and CFS's scheduling period (6 ms × (1 + log2 CPUs), 24 ms from 8 CPUs); each quantum
/// that ends with a waiter costs one hand-off (a wake-up, ~5–50 µs measured by `turnstile
/// calibrate`), under 1 %. Until 2026-11-25 it was 2 ms (and before that a "1 ms" timed with
/// the coarse clock, which moves once per 4 ms tick here, so 0–4 ms).
pub const DEFAULT_QUANTUM: Duration = Duration::from_millis(10);

/// A waiter older than this is served oldest-first by direct hand-off, and no newcomer runs
/// ahead of it. 1 ms: Go's mutex starvation threshold (it was also the quantum's nominal
/// length until the quantum became 2 ms, see [`DEFAULT_QUANTUM`]). Measured against CoDel's 5 ms target (folly's
/// default) on the 2-core VM: `repro mixed` scans 3.51 → 2.75 × a lone scan (point p99
/// 0.03 → 1.8 ms, under the 2 ms asked for), `repro oltp` fairness at 256/1024 threads
/// unchanged (p99 1.1–1.2 × fair share, no starved client).
pub const DEFAULT_AGE_CAP: Duration = Duration::from_millis(1);

/// The queued waiter that keeps the stall watch ([`AutoCore::is_stall_watch`]), having seen
/// no slot released for this long, runs the limit controller itself (the stall detector).
/// MariaDB's thread pool checks for stalls every 500 ms (`thread_pool_stall_limit`); 200 ms
/// recovers within a few of seed 004's 60 ms fsyncs, and one watch waking every 200 ms costs
/// 5 wake-ups a second (every waiter waking cost ~5,000 a second with a thousand queued).
pub const STALL_PERIOD: Duration = Duration::from_millis(200);

/// The controller's window: one decision per window at most. CockroachDB moves its slot count
/// by one every 1 ms; 20 ms is long enough to hold several hand-offs at a few hundred
/// admissions a second, so one late wake-up (this VM's idle-vCPU wake-up spikes to ms) is
/// not a trend.
pub const CONTROL_WINDOW: Duration = Duration::from_millis(20);

/// The controller's window lasts at least this many times what its last CPU reading cost (in
/// the reading thread's CPU time), so that the reading takes at most 1 % of one CPU. The process's CPU clock is a sum over all
/// its threads that the kernel makes on every reading (`thread_group_cputime`): measured at
/// ~180 µs with 1024 threads on the 2-core VM (`perf record` of `repro oltp --threads
/// 1024`), under the 20 ms window's 200 µs; with several thousand threads it would pass it,
/// and the window grows instead of the controller's cost, up to [`MAX_READING`] (a reading
/// slowed by a preemption, several ms, must not blind the controller for a second).
pub const WINDOWS_PER_READING_COST: u64 = 100;

/// How far the process's CPU clock may lag behind, per CPU other than the reader's: one
/// scheduler tick. `CLOCK_PROCESS_CPUTIME_ID` adds a thread's running time when it is switched
/// out or at its CPU's tick, so a thread running on another CPU is counted up to a tick late
/// (4 ms at the 250 Hz of Debian's and the development VM's kernels, 1 ms at 1000 Hz, 10 ms at
/// 100 Hz). Measured on the development VM: 20 ms windows on 2 CPUs read CPU use from 0.79 to
/// 1.04 at a steady load (±10 % = one 4 ms tick over 40 ms of CPU time), wider than the
/// controller's 3-point dead band. A gate reads the tick from the kernel when it is built
/// (the coarse clock's resolution, `clock::scheduler_tick`); this is the fallback where it
/// cannot. (A CPU in `nohz_full` mode may skip ticks while it runs one thread; there the lag
/// can be longer than a tick, and the controller trusts its readings too early.)
pub const CPU_CLOCK_LAG: Duration = Duration::from_millis(4);

/// The longest reading the controller waits for when a shorter one cannot tell which side of
/// its dead band the CPU use is on. 200 ms (ten windows): with [`CPU_CLOCK_LAG`] on 2 CPUs the
/// error is then ±1 %, inside the 3-point band; the decision is made on the reading as it
/// stands.
pub const MAX_READING: Duration = Duration::from_millis(200);

/// The longest queue the drain rule admits, in limits: a queue up to twice the limit. With
/// only the queue no longer than the limit admitted, `bench gate --block-us 200 --threads
/// 512` on 16 CPUs (2026-11-27, `docs/results/device/2026-11-27/`) stopped at 252–253 slots
/// with ~260 threads waiting, the CPUs 93–95 % busy with one hand-off per statement, in two
/// runs of five at 0.75–0.77 of the throughput at a limit of 512; the idle rule's raise there
/// is 1–2 % of the limit a reading. A queue many times the limit (OLTP's and `repro mixed`'s
/// clients: 1024 beside 32, 16 beside 4) stays the CPUs' own.
pub const DRAIN_QUEUE_LIMITS: u32 = 2;

/// A cut made with nobody queued ([`LimitController::decide_unqueued`]) that the hand-off or
/// drain rule raises back within this long was undone: the slots were needed after all
/// (statements shorter than a wake-up, or holders that wait, whose hand-offs those rules pay
/// back). Cuts with
/// nobody queued then wait, as idle raises do after fruitless ones ([`FRUITLESS_BACKOFF`],
/// doubling up to [`FRUITLESS_BACKOFF_MAX`]). The longest reading (200 ms): a raise later
/// than that answers a new load, not the cut.
pub const UNQUEUED_UNDONE_WITHIN: Duration = MAX_READING;

/// The fewest CPUs the controller reads its CPU use against when others take nearly all of
/// them ([`LimitController::set_cpus_available`]): a twentieth of a CPU, so that a reading
/// is never divided by nothing (the process then reads busy, which it is, on what it gets).
pub const MIN_CPUS_AVAILABLE: f64 = 0.05;

/// A grantee that starts running more than this after its hand-off was late: its CPU was busy.
/// CockroachDB's elastic admission targets a p99 scheduler latency of 1 ms.
pub const LATE_GRANT: Duration = Duration::from_millis(1);

/// The settings of an `auto` core (see [`crate::GateConfig`] for the public knobs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoParams {
    /// The starting limit (the CPUs the process may use, unless configured).
    pub start_limit: u32,
    /// The CPUs the process may use: the controller's reference.
    pub cpus: u32,
    /// Smallest and largest limit the controller may set.
    pub min_limit: u32,
    /// See `min_limit`.
    pub max_limit: u32,
    /// The time quantum an admission grants.
    pub quantum: Duration,
    /// The age past which waiters are served oldest first.
    pub age_cap: Duration,
    /// Refuse to queue more than this many waiters (0: no cap).
    pub max_waiting: u32,
    /// Let the controller move the limit (`false`: the limit stays where it is set).
    pub adaptive: bool,
    /// How far the CPU reading the controller is given may lag, per CPU other than the
    /// reader's (for the process CPU clock, one scheduler tick as the kernel reports it, else
    /// [`CPU_CLOCK_LAG`]; zero for an exact reading, as the simulator's).
    pub cpu_clock_lag: Duration,
}

/// Why an enter was refused ([`Step::Reject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectReason {
    /// The queue already holds the configured maximum of waiters.
    QueueFull {
        /// The cap.
        max_waiting: u32,
    },
}

/// Whether `auto` keeps a session's slot across a step-out for `reason`: yes for work outside
/// the engine (sending results, a file sort), which needs a CPU as much as a row fetch does;
/// no for a wait, which would hold a slot while using no CPU (seed 004's pileup).
pub fn keeps_slot_across(reason: StepOutReason) -> bool {
    matches!(
        reason,
        StepOutReason::SendingResults | StepOutReason::FileSort
    )
}

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

/// The adaptive limit. Time-free: the driver feeds it grant delays and, at each decision, the
/// time and the CPU time the process has used so far (if it can measure it); it answers with
/// a decision.
///
/// It decides at the end of a window (only windows in which threads queued: with nobody
/// waiting the limit binds nobody and nothing is learnt), on a **reading** that began at its
/// last decision and may span several windows. `u` is the process's CPU use over the reading
/// (the busy fraction of the CPUs it may use) and `±e` its error: the CPU clock may lag by up
/// to [`CPU_CLOCK_LAG`] for each CPU but the reader's, at either end, so a 20 ms reading on 2
/// CPUs is good to ±10 %, a 200 ms one to ±1 %. A rule fires only when the whole interval
/// `u ± e` is on its side of a threshold; when none can, the reading goes on into the next
/// window (counted as *deferred*), up to [`MAX_READING`], where `u` decides as it stands.
/// With an exact reading (`e` = 0, the simulator's) every window decides. Without this, the
/// tick's noise alone moved the limit: `repro mixed` saw it random-walk between 4 and 13.
/// The rules, first match wins:
/// * **rest**: without long statements, a limit below the resting floor (two slots per
///   CPU, [`SLOTS_PER_CPU`]) is raised to it, late grants or not, unless the CPUs are
///   surely idle (`u + e` < 0.95: the idle rule below decides, so that a run of idle raises
///   that does not pay off comes back to where it began). The limit starts at the CPUs
///   and comes here at the first window with threads queued; after long statements it
///   comes back from their lane.
/// * **hand-off bound**: unless the CPUs are surely idle (`u + e` < 0.95) and the idle rule
///   may probe, a reading whose CPU time per hand-off is under 2 × [`HANDOFF_CPU`] spent at
///   least half its CPU handing slots over (statements shorter than a wake-up: `repro
///   pileup`'s 1 µs queries made 200,000 hand-offs a second at a limit of 5–9). More slots
///   mean fewer hand-offs, and the CPUs stay busy either way: raise by a quarter (at least
///   1). The CPU reading cannot tell hand-off overhead from work, so without this rule the
///   decay below held such a limit down. With the CPUs surely idle the idle rule raises
///   faster, but while it waits after fruitless raises (the idle CPUs are another
///   process's) this rule still applies, what the process does get going to hand-offs, up
///   to [`FRUITLESS_AFTER`] × the limit the fruitless run began at (as far as an idle probe
///   goes before it is judged; nothing else bounds a raise while the CPUs read idle).
/// * **late** (more than an eighth of the grants started over [`LATE_GRANT`] after their
///   hand-off) while the CPUs are surely busy (`u − e` ≥ 0.95, or not measured): the CPUs
///   are oversubscribed; cut by a quarter.
/// * **lane**: long statements hold slots (holders that spent a whole quantum while threads
///   queued, whether they kept their slots or gave way, [`AutoCore::yields_quantum`]; `L` of
///   them at once, the larger count of this reading and the one before, so one that gave
///   way a moment ago still counts). The lane is a slot for each of them plus the CPUs they
///   leave, at least one: `max(CPUs, L + 1)`. Unless the CPUs are surely idle by a CPU's
///   worth (`u − e` ≥ `1 − 1/CPUs`, of the CPUs the use is read against: those other
///   processes leave, where known), a limit below the lane is raised to it. The late cut
///   stops at the lane. If a long statement kept its slot (the short ones are served by the
///   other slots), a limit above the lane is also cut by a quarter towards it (not on the
///   first reading to see long statements, which may not yet see them all), and the
///   hand-off rule is off (the busy CPUs are the long statements'). Less than a CPU's worth idle beside
///   them is the gaps of the lane's hand-offs, and a slot past the lane adds a runnable
///   thread, whose fair share the kernel takes from the long statements as much as from the
///   idle; a CPU's worth idle is a slot holder that does not run (a long statement in a wait
///   nobody declared), and the idle rule below raises as before. Measured on `repro mixed`
///   (two full scans beside 16 point-select sessions, 2 CPUs), in three steps alternated
///   with the binary before each:
///   - a floor of CPUs + 1 with the holder's rule (2026-11-26, 14 pairs): scans median
///     2.52 → 2.14 × a lone scan (with the limit pinned at 3 they ran ~1.8 ×, at 4
///     2.2–2.7 ×, at 2 the points' p99 was 3–4 ms);
///   - no idle raise past it for less than a CPU's worth (28 pairs): 1.97 → 1.75 ×, worst
///     3.41 → 2.22 × (once the faster scan ended, the CPUs read 90 % busy and the idle rule
///     had raised to 6–7);
///   - the lane sized by the long statements (24 pairs): 2.07 → 1.75 ×, worst 3.00 → 2.19 ×,
///     23 of 24 runs with scans ≤ 2.1 × and point p99 ≤ 2 ms against 12 of 24 (once one
///     scan ended, the limit of 3 let two point sessions and their extras share the CPUs
///     with the other scan; now 2).
/// * **idle** (`u + e` < 0.95): slots are held by threads not using a CPU (undeclared
///   waits, wake-ups); raise, by up to half the gap `limit × (0.97 / u − 1)` (at least 1, at
///   most doubling). Unless the raises do not pay off (**fruitless**): once a run of idle
///   raises has at least doubled the limit ([`FRUITLESS_AFTER`]), the CPU use should have
///   grown with the slots (by `u0 × (limit / L0 − 1)` from where the run began, or to the
///   target); if it grew by less than a quarter of that on two readings in a row (the
///   first holds the limit), the idle CPUs are another process's or cgroup's share, not
///   slots waiting to be filled: back to `L0`, and no idle raise for [`FRUITLESS_BACKOFF`]
///   (doubling after each fruitless probe, up to [`FRUITLESS_BACKOFF_MAX`]). A stall still
///   raises. See `LimitController::idle_rule`.
/// * **drain**: the CPUs not surely idle, no more than an eighth of the grants late, at most
///   [`DRAIN_QUEUE_LIMITS`] × `limit` threads waiting at once in the window, and the
///   reading's hand-offs (at [`HANDOFF_CPU`] each) over 5 % of its CPU time (the share the
///   95 % mark already counts as waste): holders and waiters together are at most three
///   limits, and the queue only costs hand-offs. Raise by the number waiting, at most
///   doubling (a queue longer than the limit is admitted over two windows: the first leaves
///   fewer waiting than the new limit). This is the load whose slot holders
///   block in waits nobody declared: `bench gate --block-us 200`'s 64 threads, each sleeping
///   200 µs ten times inside its slot, kept the CPUs 97–99 % busy at a limit of 32–35 with
///   11,000 hand-offs a second, 86–89 % of an ungated run's throughput. A queue longer than
///   twice the limit (OLTP's hundreds of clients, `repro mixed`'s 16 sessions beside its 4
///   slots on 2 CPUs) is the CPUs' queue and stays; late grants say the CPUs are oversubscribed.
/// * **busy** (`u − e` ≥ 0.98) with the limit above the floor (the resting floor, or the
///   lane beside long statements): every CPU is busy and more slots only add preemption;
///   lower by 1.
/// * surely inside the dead band 0.95–0.98 (or surely not idle at the floor), without
///   late grants: hold (the dead band is the hysteresis). Anything else: read on.
/// * Without a CPU measurement (off Linux, or the first window), prompt grants or a stall in
///   a window raise by 1 and late grants cut.
///
/// A stall (a waiter saw no slot move for [`STALL_PERIOD`]) decides at once on the reading
/// as it stands.
#[derive(Debug, Clone)]
pub struct LimitController {
    cpus: u32,
    min: u32,
    max: u32,
    /// Grants and late grants over the reading.
    grants: u32,
    late: u32,
    /// Threads queued during this window.
    queued_seen: bool,
    /// The most threads waiting at once (not yet handed a slot) in this window, if known.
    waiting: Option<u32>,
    /// A stall check ran in this window.
    stalled: bool,
    /// The most long statements (holders that kept their slots past a quantum beside
    /// waiters) seen holding slots at once since the reading began; 0: none.
    long: u32,
    /// `long` of the reading before: the lane is sized by the larger of the two, so a long
    /// statement that gave up its slot for a moment (and is not yet counted again) does
    /// not take the lane below it.
    long_before: u32,
    /// A long statement kept its slot beside waiters since the reading began.
    long_kept: bool,
    window_start_ns: u64,
    /// What is touched once a window. Boxed: it should not make every policy's core (an
    /// enum sized by its largest variant) larger.
    tally: Box<Tally>,
}

/// The controller's reading and its decisions, counted for monitoring.
#[derive(Debug, Clone, Default)]
struct Tally {
    /// Where the reading began (the last decision that was not deferred).
    reading_start_ns: u64,
    /// The CPU reading at the reading's start.
    cpu_start_ns: Option<u64>,
    /// [`CPU_CLOCK_LAG`], or zero for an exact reading.
    cpu_lag_ns: u64,
    /// What the last CPU reading cost, as the driver measured it (0: not measured).
    reading_cost_ns: u64,
    /// The CPUs other processes leave this one, as the driver last estimated them over half
    /// a second or more (`None`: not known; the CPU use is then read against all of them).
    cpus_available: Option<f64>,
    /// When the last cut made with nobody queued was (0: none being watched): a raise by
    /// the ordinary rules within [`UNQUEUED_UNDONE_WITHIN`] undoes it.
    unqueued_cut_ns: u64,
    /// Cuts with nobody queued wait until then after one was undone (0: not waiting).
    unqueued_resume_ns: u64,
    /// How long the next such wait lasts (0: [`FRUITLESS_BACKOFF`]).
    unqueued_backoff_ns: u64,
    raises: u64,
    cuts: u64,
    reasons: LimitReasons,
    /// The run of idle raises under way, judged by [`LimitController::idle_rule`].
    probe: Option<Probe>,
    /// Idle raises wait until then after fruitless ones were undone (0: not waiting).
    idle_resume_ns: u64,
    /// How long the next wait after fruitless raises lasts (0: [`FRUITLESS_BACKOFF`]).
    backoff_ns: u64,
    /// Where the first fruitless run since the CPUs were last in use began (`L0`; 0: none):
    /// the hand-off rule's cap while idle raises wait is [`FRUITLESS_AFTER`] × it.
    wait_from: u32,
}

/// A run of idle raises: the limit and the CPU use where it began, and where it has taken the
/// limit so far.
#[derive(Debug, Clone, Copy)]
struct Probe {
    from: u32,
    u0: f64,
    to: u32,
    /// The last reading found the run fruitless: one more such reading undoes it.
    suspect: bool,
}

/// A run of idle raises is judged once it has multiplied the limit by this much (one
/// doubling), and from then on at each idle decision while it goes on. Judged later (after
/// two doublings, against an eighth of the expected gain), `repro oltp --competing-processes
/// 2` at 256 and 1024 threads still let the limit run to 140 and 344 in one run of two: the
/// first reading of a run, taken while the clients start, can read low, and a gain measured
/// from it looked like progress. A quarter of the expected gain, capped at the way to the
/// target, catches that. The price is a thin margin where part of the CPU use does not grow
/// with the slots: `bench gate --block-us 200` read 0.13 and 0.18 at fixed limits of 2 and
/// 4, a gain of 0.05 against the 0.0325 asked for (no false verdict in its runs, see
/// docs/results/auto); a false verdict costs a back-off at the lower limit.
pub const FRUITLESS_AFTER: u32 = 2;

/// After idle raises that did not pay off were undone, the idle rule waits this long before
/// it raises again (a probe), then twice as long after each probe that again did not pay off,
/// up to [`FRUITLESS_BACKOFF_MAX`]; a reading with the CPUs in use starts over at this. 1 s is
/// RFC 6298's initial retransmission timeout, and the back-off doubles like TCP's. A probe
/// holds a raised limit for two or three windows (40–60 ms), so a fixed CPU share costs the
/// other process at most ~6 % of its time with a few more runnable threads beside it.
pub const FRUITLESS_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait between probes after fruitless raises (see [`FRUITLESS_BACKOFF`]): 8 s,
/// so a gate whose CPUs are freed again notices within seconds even if nobody ends a wait.
pub const FRUITLESS_BACKOFF_MAX: Duration = Duration::from_secs(8);

/// Why the controller moved the limit, window by window: each raise and cut is counted once,
/// under the rule that made it (their sum is `raises + cuts`), and `windows` counts every
/// window in which threads queued, including those that left the limit where it was
/// (inside the dead band, at a bound, or `deferred` for a longer reading).
/// An operator who sees the limit climb reads here which signal drove it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LimitReasons {
    /// Windows with threads queued (a decision was made, whatever it was).
    pub windows: u64,
    /// Raised: the CPUs were not all busy while threads queued (CPU use under 95 %).
    pub idle_cpu: u64,
    /// Raised: the CPUs were busy handing slots over (under 2 × [`HANDOFF_CPU`] of CPU per
    /// hand-off).
    pub handoff: u64,
    /// Raised without a CPU reading (off Linux, the first window): after prompt grants or a
    /// stall.
    pub blind: u64,
    /// Raised to admit every waiter: the CPUs were not idle, grantees ran promptly, the
    /// queue was no longer than twice the limit ([`DRAIN_QUEUE_LIMITS`]), and its hand-offs
    /// took over 5 % of the CPU.
    pub drain: u64,
    /// Cut by a quarter: grantees started late while the CPUs were busy.
    pub late: u64,
    /// Lowered by one: every CPU busy with the limit above the resting floor; or halved
    /// towards it where nobody queued, a holder kept its slot a whole quantum and the CPUs
    /// were over 95 % busy ([`LimitController::decide_unqueued`]).
    pub busy: u64,
    /// Raised to the resting floor ([`SLOTS_PER_CPU`] slots per CPU) without long
    /// statements and with the CPUs not surely idle: from where the limit starts (the
    /// CPUs), or after long statements held it at their lane.
    pub rest: u64,
    /// Raised to the lane: holders spent whole quanta while threads queued (long
    /// statements, whether they kept their slots or gave way), with less than a CPU's worth
    /// idle, and the limit below a slot for each long statement plus the CPUs they leave (at
    /// least one). The long statements may fill the CPUs; the slots past them keep the
    /// short ones turning over (the late cut stops there too, and while a long statement
    /// keeps its slot the idle raise waits for a CPU's worth idle).
    pub lane: u64,
    /// Cut by a quarter towards the lane: a long statement kept its slot beside waiters,
    /// less than a CPU's worth was idle, the limit was above the lane, and the reading
    /// before also saw long statements (the first may not yet see them all). Each slot past
    /// the lane adds a runnable thread whose share of the CPUs the kernel takes from the
    /// long statements. Also where nobody queued and the CPUs were over 95 % busy: halved
    /// towards the lane of long statements seen before ([`LimitController::decide_unqueued`]).
    pub lane_cut: u64,
    /// Cut back where a run of idle raises began: the raises at least doubled the limit from
    /// `L0`, yet on two readings in a row the CPU use had risen by less than a quarter of
    /// what growing with the slots would have given (`u0 × (limit / L0 − 1)`, at most the
    /// way to the target). The CPUs the process
    /// did not use were not its to take (another process's or cgroup's share, a CPU quota),
    /// so more slots only queued more threads on them. Idle raises then wait (see
    /// [`FRUITLESS_BACKOFF`]) before the next probe.
    pub fruitless: u64,
    /// Brought back within the controller's bounds (the CPUs … the maximum) after an
    /// operator set a limit outside them, where no rule moved it there itself (a limit
    /// below the CPUs is mostly raised to the resting floor, counted under `rest`).
    pub bounds: u64,
    /// Windows whose CPU reading could not yet tell which side of a threshold the CPU use
    /// was on (its error, from [`CPU_CLOCK_LAG`], straddled it): the reading went on into the
    /// next window (also in the checks made without a queue, which `windows` does not
    /// count). Not a move.
    pub deferred: u64,
}

impl LimitReasons {
    /// The moves counted, raises and cuts (`windows` and `deferred` are not moves): equal
    /// to the controller's raises plus cuts.
    pub fn moves(&self) -> u64 {
        self.idle_cpu
            + self.handoff
            + self.blind
            + self.drain
            + self.lane
            + self.lane_cut
            + self.late
            + self.busy
            + self.rest
            + self.fruitless
            + self.bounds
    }

    /// The counts since `earlier` (a reading of the same gate taken before).
    pub fn since(&self, earlier: &LimitReasons) -> LimitReasons {
        LimitReasons {
            windows: self.windows.saturating_sub(earlier.windows),
            idle_cpu: self.idle_cpu.saturating_sub(earlier.idle_cpu),
            handoff: self.handoff.saturating_sub(earlier.handoff),
            blind: self.blind.saturating_sub(earlier.blind),
            drain: self.drain.saturating_sub(earlier.drain),
            late: self.late.saturating_sub(earlier.late),
            busy: self.busy.saturating_sub(earlier.busy),
            rest: self.rest.saturating_sub(earlier.rest),
            fruitless: self.fruitless.saturating_sub(earlier.fruitless),
            lane: self.lane.saturating_sub(earlier.lane),
            lane_cut: self.lane_cut.saturating_sub(earlier.lane_cut),
            bounds: self.bounds.saturating_sub(earlier.bounds),
            deferred: self.deferred.saturating_sub(earlier.deferred),
        }
    }
}

/// What one hand-off costs in CPU: the grantee's switch in (2.0–7.6 µs on the development VM,
/// `turnstile calibrate`'s ring at 2–1024 threads) and the cache it refills after it (22 µs,
/// calibrate's `cache_refill_ns`), rounded to 25 µs.
pub const HANDOFF_CPU: Duration = Duration::from_micros(25);

/// Slots per CPU the limit rests at when no rule asks for more (the `rest` floor): a slot
/// holder is not always on a CPU (a hand-off's grantee waking, a holder preempted or
/// between two rows), and a second slot per CPU keeps a runnable holder ready for it.
/// Percona's rule of thumb for `innodb_thread_concurrency` ("InnoDB thread concurrency",
/// 2006: up to two active threads per CPU). Measured (`repro oltp --policies
/// auto,auto@2,auto@4 --threads 2,256,1024 --reps 3 --versus-best 3`, 2 CPUs, three runs
/// each, alternated), at 1024 threads: resting at the CPU count left 2.2–2.8 % of the CPUs
/// idle with 1.54–1.69 context switches a transaction; two per CPU, 1.0–1.4 % and
/// 1.13–1.32, and `auto` ÷ its own peak 0.90–0.94 (median 0.93) against 0.89–0.93 (0.90). On the lent
/// 16-CPU Xeon the best fixed limit at 1024 threads was 2 × the CPUs (32; `auto` at 16–21
/// reached 0.946 of it), on 8 CPUs 1.5 × (12; 2 × gave 0.95 of it).
pub const SLOTS_PER_CPU: u32 = 2;

/// CPU use below which slots are taken to be held by threads that are not running: with
/// threads queued, a CPU idle more than 5 % of a window is waste. 5 % is also where
/// `turnstile calibrate` starts warning that other processes take the machine.
const U_LOW: f64 = 0.95;
/// CPU use above which every CPU is taken to be busy.
const U_HIGH: f64 = 0.98;
/// The target the raise aims for, between the two.
const U_TARGET: f64 = 0.97;

/// What a rule makes of a reading: move (or hold) and start a new reading, or read on.
enum Rule {
    /// The new limit, and the counter its move lands in.
    Set(u32, fn(&mut LimitReasons) -> &mut u64),
    Defer,
}

impl LimitController {
    /// A controller for `cpus` CPUs, bounded to `min..=max`, given exact CPU readings (see
    /// [`LimitController::with_cpu_lag`]).
    pub fn new(cpus: u32, min: u32, max: u32) -> Self {
        LimitController {
            cpus: cpus.max(1),
            min: min.max(1),
            max: max.max(min.max(1)),
            grants: 0,
            late: 0,
            queued_seen: false,
            waiting: None,
            stalled: false,
            long: 0,
            long_before: 0,
            long_kept: false,
            window_start_ns: 0,
            tally: Box::default(),
        }
    }

    /// The resting floor: [`SLOTS_PER_CPU`] slots per CPU within the bounds, or `min` where
    /// the bounds were set below the CPUs.
    pub(crate) fn rest(&self) -> u32 {
        if self.min < self.cpus {
            self.min
        } else {
            self.cpus
                .saturating_mul(SLOTS_PER_CPU)
                .clamp(self.min, self.max)
        }
    }

    /// The CPU readings it is given may lag by up to `lag` per CPU other than the reader's
    /// ([`CPU_CLOCK_LAG`] for the process CPU clock).
    pub fn with_cpu_lag(mut self, lag: Duration) -> Self {
        self.tally.cpu_lag_ns = lag.as_nanos().min(u128::from(u64::MAX)) as u64;
        self
    }

    /// Times it raised the limit.
    pub fn raises(&self) -> u64 {
        self.tally.raises
    }

    /// Times it lowered the limit.
    pub fn cuts(&self) -> u64 {
        self.tally.cuts
    }

    /// Why it moved the limit, window by window.
    pub fn reasons(&self) -> LimitReasons {
        self.tally.reasons
    }

    /// A hand-off's grantee began to run `delay_ns` after it was chosen.
    pub fn observe_grant(&mut self, delay_ns: u64) {
        self.grants += 1;
        if delay_ns > LATE_GRANT.as_nanos() as u64 {
            self.late += 1;
        }
    }

    /// Threads were queued during this window.
    pub fn observe_queue(&mut self) {
        self.queued_seen = true;
    }

    /// `n` threads wait for a slot (not yet handed one) now. The drain rule admits the
    /// most that waited at once in a window; unknown unless observed.
    pub fn observe_waiting(&mut self, n: u32) {
        self.waiting = Some(self.waiting.map_or(n, |w| w.max(n)));
    }

    /// Holders spent whole quanta with threads queued: long statements, `n` of them holding
    /// slots at once ([`AutoCore::yields_quantum`]). The limit is raised to the lane (see
    /// `LimitReasons::lane`) if it is below it. If `kept`, a holder kept its slot, since
    /// none of the waiters had waited that whole quantum: the long statements run beside
    /// short ones that the other slots serve, and until the reading ends the limit is kept
    /// at the lane and the hand-off rule is off. (A holder that gave way instead locked a
    /// waiter out: where the long statements hold every slot, they take turns with the
    /// short ones a quantum at a time until the lane's raise.)
    pub fn observe_long_holders(&mut self, n: u32, kept: bool) {
        self.long = self.long.max(n);
        self.long_kept |= kept;
    }

    /// A waiter saw no slot move for a stall period.
    pub fn observe_stall(&mut self) {
        self.queued_seen = true;
        self.stalled = true;
    }

    /// Whether the window that began at the last decision is over at `now_ns`.
    pub fn window_over(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.window_start_ns) >= self.window_ns()
    }

    /// The window's length: [`WINDOWS_PER_READING_COST`] times what the last CPU reading
    /// cost, within [`CONTROL_WINDOW`] and [`MAX_READING`].
    pub fn window_ns(&self) -> u64 {
        self.tally
            .reading_cost_ns
            .saturating_mul(WINDOWS_PER_READING_COST)
            .clamp(
                CONTROL_WINDOW.as_nanos() as u64,
                MAX_READING.as_nanos() as u64,
            )
    }

    /// The last CPU reading took `cost_ns` to make (the driver times it; the simulator's
    /// readings cost nothing and never call this).
    pub fn set_reading_cost(&mut self, cost_ns: u64) {
        self.tally.reading_cost_ns = cost_ns;
    }

    /// Other processes left this one `cpus` CPUs (at most the controller's own count is
    /// used): its CPU use is read against those from the next decision, so that CPUs that
    /// others keep busy are not taken for idle ones. `None`: unknown (the simulator's
    /// machine runs nothing else), read against all of them.
    pub fn set_cpus_available(&mut self, cpus: Option<f64>) {
        self.tally.cpus_available = cpus.filter(|c| c.is_finite());
    }

    /// [`LimitController::cpus_read`] in thousandths of a CPU, where an estimate is known.
    pub fn cpus_available_milli(&self) -> Option<u32> {
        self.tally
            .cpus_available
            .map(|_| (self.cpus_read() * 1000.0).round() as u32)
    }

    /// The CPUs the CPU use is read against: the controller's, or fewer where others took
    /// some ([`LimitController::set_cpus_available`]), never under [`MIN_CPUS_AVAILABLE`].
    fn cpus_read(&self) -> f64 {
        let cpus = f64::from(self.cpus);
        self.tally
            .cpus_available
            .map_or(cpus, |a| a.clamp(MIN_CPUS_AVAILABLE, cpus))
    }

    /// The idle rule (`u + e` < [`U_LOW`] while threads queue): raise by up to half the gap
    /// to [`U_TARGET`], `limit × (U_TARGET / u − 1) / 2` (at least 1, at most doubling),
    /// unless the run of raises so far did not pay off. If the slots were what held the CPU
    /// use down (threads in waits nobody declared), it grows with them: a run of idle raises
    /// from `L0` to `L` (at least [`FRUITLESS_AFTER`] × `L0`) should take it from `u0` up by
    /// `u0 × (L / L0 − 1)`, or to the target if that is nearer. If it rose by less than a
    /// quarter of that on two readings in a row (the first only holds the limit: near the
    /// target the quarter is within one 20 ms reading's noise), the idle CPUs are not the
    /// process's (another process's or cgroup's share of them): the limit goes back where
    /// the run began (`fruitless`) and
    /// idle raises wait [`FRUITLESS_BACKOFF`], doubling up to [`FRUITLESS_BACKOFF_MAX`],
    /// before the next probe. Measured on the 2-core VM with two CPU-bound processes in
    /// another session (their own scheduling group, so half the CPUs whatever the thread
    /// count): `repro oltp` at 1024 threads without this saw 50 % CPU use, raised the limit
    /// from 2 to 761 within a second and starved 254 clients (Jain 0.39). A stall (no slot
    /// moved for a stall period) is not judged: it raises as before.
    fn idle_rule(&mut self, limit: u32, u: f64, now_ns: u64, stalled: bool) -> Rule {
        let gap = limit as f64 * (U_TARGET / u.max(0.01) - 1.0) / 2.0;
        let raised = (limit + (gap as u32).clamp(1, limit)).clamp(self.min, self.max);
        let t = &mut *self.tally;
        if stalled {
            t.probe = None;
            return Rule::Set(raised, |r| &mut r.idle_cpu);
        }
        if now_ns < t.idle_resume_ns {
            // Fruitless raises were undone: hold until the back-off ends.
            return Rule::Set(limit, |r| &mut r.idle_cpu);
        }
        match &mut t.probe {
            Some(p) if p.to == limit => {
                // If the slots held the CPU use down, it grows with them, up to the target.
                let expected =
                    (p.u0 * (f64::from(limit) / f64::from(p.from) - 1.0)).min(U_TARGET - p.u0);
                let fruitless =
                    limit >= p.from.saturating_mul(FRUITLESS_AFTER) && u - p.u0 < expected / 4.0;
                if fruitless && !std::mem::replace(&mut p.suspect, true) {
                    // One reading can be noise (a 20 ms reading on 2 CPUs is good to ±10 %):
                    // hold, and judge again on the next.
                    return Rule::Set(limit, |r| &mut r.idle_cpu);
                }
                if fruitless {
                    let from = p.from;
                    t.probe = None;
                    let backoff = if t.backoff_ns == 0 {
                        FRUITLESS_BACKOFF.as_nanos() as u64
                    } else {
                        t.backoff_ns
                    };
                    t.idle_resume_ns = now_ns.saturating_add(backoff);
                    // The first fruitless run's start, until the CPUs are in use again: a
                    // later run begins where the hand-off raises left the limit, and taking
                    // its start would let the cap double with every probe.
                    t.wait_from = match t.wait_from {
                        0 => from,
                        w => w.min(from),
                    };
                    t.backoff_ns = (backoff * 2).min(FRUITLESS_BACKOFF_MAX.as_nanos() as u64);
                    return Rule::Set(from, |r| &mut r.fruitless);
                }
                p.suspect = false;
                p.to = raised;
            }
            // A new run (or the limit was moved since: an operator, another rule).
            _ => {
                t.probe = Some(Probe {
                    from: limit,
                    u0: u,
                    to: raised,
                    suspect: false,
                })
            }
        }
        Rule::Set(raised, |r| &mut r.idle_cpu)
    }

    /// Starts a new reading at `now_ns`.
    fn restart(&mut self, now_ns: u64, cpu_ns: Option<u64>) {
        self.grants = 0;
        self.late = 0;
        self.long_before = std::mem::take(&mut self.long);
        self.long_kept = false;
        self.tally.reading_start_ns = now_ns;
        self.tally.cpu_start_ns = cpu_ns;
    }

    /// Ends a window in which nobody is queued now, at a quantum's end: a holder kept its
    /// slot a whole quantum ([`AutoCore::yields_quantum`]). The other rules need a queue;
    /// without one the controller would decide nothing, and a limit above the sessions (set
    /// so by an operator, or raised there while the CPUs read idle) would stay while every
    /// session runs at once, the CPUs' time shared among all of them by the kernel. With no
    /// rule able to ask for more, the limit is halved towards where it rests while the CPUs
    /// are busy (CPU use over [`U_LOW`]): towards the resting floor (`busy`), or the lane
    /// beside long statements seen in earlier readings where that is above it (`lane_cut`). Once the limit is
    /// below the sessions, they queue and the ordinary rules take over, and raise it again
    /// where the slots were needed (holders that wait: the drain rule gives a queue no longer
    /// than twice the limit its slots back within two windows). Halved, not cut to the floor at once:
    /// `bench gate --block-us 200` at 64 threads lost half its throughput that way, each
    /// cut undone by idle raises over several windows.
    /// A reading begun too long ago (the last decision, before nobody queued) only starts a
    /// new one. A cut the ordinary rules raise back within [`UNQUEUED_UNDONE_WITHIN`] makes
    /// the next ones wait 1 s, doubling up to 8 s. Measured: `repro mixed --policies auto --limit 32` (started above its 18
    /// sessions) decided nothing, and its scans took 6.2–7.3 × a lone scan. If threads queued
    /// in the window after all, the ordinary decision is made.
    pub fn decide_unqueued(&mut self, limit: u32, now_ns: u64, cpu_ns: Option<u64>) -> Decision {
        if self.queued_seen || limit == 0 {
            return self.decide(limit, now_ns, cpu_ns);
        }
        self.window_start_ns = now_ns;
        let span_ns = now_ns.saturating_sub(self.tally.reading_start_ns);
        let used = match (cpu_ns, self.tally.cpu_start_ns) {
            (Some(now), Some(start)) if span_ns > 0 => Some(now.saturating_sub(start)),
            _ => None,
        };
        // Begun before nobody queued (or long ago): a reading of its own is needed. Not
        // stale within two windows, which are as long as the longest reading where the CPU
        // reading is costly.
        let stale = span_ns > MAX_READING.as_nanos().max(2 * u128::from(self.window_ns())) as u64;
        let waiting = now_ns < self.tally.unqueued_resume_ns;
        let (Some(used), false, false) = (used, stale, waiting) else {
            self.restart(now_ns, cpu_ns);
            return Decision::Hold;
        };
        let capacity_ns = span_ns as f64 * self.cpus_read();
        let u = used as f64 / capacity_ns;
        let e = if span_ns >= MAX_READING.as_nanos() as u64 {
            0.0
        } else {
            self.tally.cpu_lag_ns as f64 * f64::from(self.cpus - 1) / capacity_ns
        };
        // Never below the resting floor: under it the ordinary rules, with the queue the
        // cut brings, take the limit to a lane (they wait for a second reading to see every
        // long statement). Cut to a lane from here, a lane counted while one of two scans
        // was not yet marked long left 2 slots to both, and `repro mixed`'s point selects
        // waited out the scans' quanta (one run of nine: 10,308 selects, p99 6.4 ms).
        let long = self.long.max(self.long_before);
        let lane = if long > 0 {
            self.cpus.max(long + 1).clamp(self.min, self.max)
        } else {
            0
        };
        let floor = lane.max(self.rest());
        // The idle rule's mark, so that the two never pull against each other. Not the lane
        // rule's (a CPU's worth idle): long statements that wait (`bench gate --block-us
        // 200`, 64 threads, the CPUs half busy) were cut to their lane and throughput halved.
        let busy_from = U_LOW;
        if limit > floor && u - e < busy_from && u + e >= busy_from {
            // Which side of the mark is not yet clear: read on.
            self.tally.reasons.deferred += 1;
            return Decision::Hold;
        }
        let cut = limit > floor && u - e >= busy_from;
        self.restart(now_ns, cpu_ns);
        if !cut {
            return Decision::Hold;
        }
        let t = &mut *self.tally;
        // As in `decide`: another rule decided (no run of idle raises goes on), with the
        // CPUs in use (idle raises may probe at once).
        t.probe = None;
        t.idle_resume_ns = 0;
        t.backoff_ns = 0;
        t.wait_from = 0;
        t.unqueued_cut_ns = now_ns;
        if lane == floor {
            t.reasons.lane_cut += 1;
        } else {
            t.reasons.busy += 1;
        }
        t.cuts += 1;
        Decision::Cut((limit / 2).max(floor).min(self.max))
    }

    /// Ends the window at `now_ns`, with the process's CPU time so far `cpu_ns` (`None`: not
    /// measurable), and decides the limit that follows `limit`.
    pub fn decide(&mut self, limit: u32, now_ns: u64, cpu_ns: Option<u64>) -> Decision {
        let queued = std::mem::take(&mut self.queued_seen);
        let stalled = std::mem::take(&mut self.stalled);
        let waiting = self.waiting.take();
        self.window_start_ns = now_ns;
        if !queued || limit == 0 {
            self.restart(now_ns, cpu_ns);
            return Decision::Hold;
        }
        let (grants, late) = (self.grants, self.late);
        let span_ns = now_ns.saturating_sub(self.tally.reading_start_ns);
        let used = match (cpu_ns, self.tally.cpu_start_ns) {
            (Some(now), Some(start)) if span_ns > 0 => Some(now.saturating_sub(start)),
            _ => None,
        };
        // Against the CPUs other processes left it: a CPU another process keeps busy is not
        // an idle one that more slots could use.
        let capacity_ns = span_ns as f64 * self.cpus_read();
        let u = used.map(|cpu| cpu as f64 / capacity_ns);
        // The reading's error; none once it is as long as the controller waits, or when a
        // stall asks for a decision now.
        let e = if stalled || span_ns >= MAX_READING.as_nanos() as u64 {
            0.0
        } else {
            self.tally.cpu_lag_ns as f64 * f64::from(self.cpus - 1) / capacity_ns
        };
        let late_signal = grants > 0 && late * 8 > grants;
        // Beside long statements, the lane (see `LimitReasons::lane`): a slot for each long
        // statement and, for the statements that turn over, the CPUs the long ones leave,
        // but never less than one slot.
        let long = self.long > 0;
        let floor = if long {
            self.cpus.max(self.long.max(self.long_before) + 1)
        } else {
            self.rest()
        };
        // Idle by at least a CPU's worth: a slot holder that does not run. A CPU's worth of
        // the CPUs the use is read against (`u` is a share of those): with one of 4 CPUs
        // left to the process, a CPU idle is all of it, not a quarter.
        // Under one CPU left, none (a CPU's worth idle would be more than there is).
        let cpu_idle = (1.0 - 1.0 / self.cpus_read()).max(0.0);
        // The idle rule decided (its run of raises goes on).
        let mut idle_branch = false;
        // The CPUs surely idle: the idle rule decides.
        let surely_idle = u.is_some_and(|u| u + e < U_LOW);
        let rule = match (used, u) {
            // Below the resting floor without long statements (it started at the CPUs, or
            // long statements held it at their lane and are gone): back to it, late grants
            // or not (at 2 CPUs a grantee waits ~0.75 ms for a core at any limit, so they
            // would hold it at the CPUs), unless the CPUs are surely idle: then the idle
            // rule probes from here, and a run of raises that does not pay off (another
            // process's share of the CPUs) comes back here. Measured beside two CPU-bound
            // processes (`repro oltp --competing-processes 2`, 1024 threads): raised to
            // the floor regardless, the probe began at 4, ran to 49 and starved 87 clients
            // (Jain 0.83); from 2 it reached 10 and starved none.
            _ if !long && limit < floor && !surely_idle => Rule::Set(floor, |r| &mut r.rest),
            (Some(cpu), Some(u)) => {
                let (lo, hi) = (u - e, u + e);
                // With the CPUs surely idle the idle rule raises faster, unless it is
                // waiting after fruitless raises: the CPUs it could not fill are another
                // process's, but what the process does get still goes to hand-offs, and
                // more slots still mean fewer of them. Measured on `repro pileup` beside
                // one CPU-bound process in another session (the process read ~50 % of the
                // 2 CPUs whatever its limit): the fruitless undo held the limit at 4-5
                // with 12 of the 16 query sessions queued, 0.35-0.5 × the queries/s at
                // 4 tables, where the seed's fix (limit 8, slot released) kept 0.9-1.0 ×.
                // While it waits, no further than an idle probe goes before it is judged
                // (`FRUITLESS_AFTER` × where the fruitless run began): nothing else would
                // bound it while the CPUs read idle, and with a thousand clients of short
                // statements it would otherwise raise until nobody queued (measured in the
                // model: from 2 to the maximum, 1000, in 45 windows).
                let handoff_cap = if hi >= U_LOW {
                    u32::MAX
                } else if now_ns < self.tally.idle_resume_ns {
                    self.tally.wait_from.saturating_mul(FRUITLESS_AFTER)
                } else {
                    0
                };
                let handoff_bound = grants > 0
                    && !self.long_kept
                    && limit < handoff_cap
                    && cpu / u64::from(grants) < 2 * HANDOFF_CPU.as_nanos() as u64;
                if handoff_bound {
                    Rule::Set((limit + (limit / 4).max(1)).min(handoff_cap), |r| {
                        &mut r.handoff
                    })
                } else if late_signal && lo >= U_LOW {
                    // Late grants mean oversubscribed CPUs only while the CPUs are busy: with
                    // idle CPUs in the reading they were bursts (measured: cutting on them
                    // anyway held the limit at 35-40 on `bench gate --block-us 200` with 64
                    // threads, 81-86 % of the best fixed limit's throughput, with the CPUs
                    // 93 % busy).
                    Rule::Set(
                        (limit - limit / 4)
                            .min(limit.saturating_sub(1))
                            .max(floor.min(limit)),
                        |r| &mut r.late,
                    )
                } else if long && lo >= cpu_idle && (limit < floor || self.long_kept) {
                    // Beside long statements, less than a CPU's worth idle is the gaps of the
                    // lane's hand-offs. A slot past the lane adds a runnable thread, whose
                    // fair share the kernel takes from the long statements as much as from
                    // the idle: the limit goes to the lane (raised to it, or cut by a
                    // quarter towards it). Below the lane it is raised whether the long
                    // statements kept their slots or gave way: where they hold every slot,
                    // the short ones get in only when a quantum ends.
                    if limit > floor && self.long_before == 0 {
                        // The first reading to see long statements may not yet see them all
                        // (each is seen at its own quantum's end): hold.
                        Rule::Set(limit, |r| &mut r.lane_cut)
                    } else if limit > floor {
                        Rule::Set((limit - (limit / 4).max(1)).max(floor), |r| &mut r.lane_cut)
                    } else {
                        Rule::Set(floor, |r| &mut r.lane)
                    }
                } else if self.long_kept && hi >= cpu_idle {
                    // A CPU's worth idle or not: read on.
                    Rule::Defer
                } else if hi < U_LOW {
                    idle_branch = true;
                    self.idle_rule(limit, u, now_ns, stalled)
                } else if let Some(n) = waiting.filter(|&n| {
                    n > 0
                        && n <= limit.saturating_mul(DRAIN_QUEUE_LIMITS)
                        && !late_signal
                        && u64::from(grants) * HANDOFF_CPU.as_nanos() as u64
                            >= ((1.0 - U_LOW) * cpu as f64) as u64
                }) {
                    Rule::Set(limit + n.min(limit), |r| &mut r.drain)
                } else if late_signal {
                    // Late grants, and the CPUs perhaps idle: read on.
                    Rule::Defer
                } else if lo >= U_HIGH && limit > floor {
                    Rule::Set(limit - 1, |r| &mut r.busy)
                } else if lo >= U_LOW && (hi < U_HIGH || limit <= floor) {
                    Rule::Set(limit, |r| &mut r.busy)
                } else {
                    Rule::Defer
                }
            }
            // Without a CPU reading: one more slot after prompt grants, or after a stall
            // (MariaDB's thread pool adds a worker per stall); a cut after late grants.
            _ if late_signal => Rule::Set((limit - limit / 4).min(limit.saturating_sub(1)), |r| {
                &mut r.late
            }),
            _ if grants > 0 || stalled => Rule::Set(limit + 1, |r| &mut r.blind),
            _ => Rule::Set(limit, |r| &mut r.blind),
        };
        let tally = &mut *self.tally;
        tally.reasons.windows += 1;
        let (new, reason) = match rule {
            Rule::Defer => {
                tally.reasons.deferred += 1;
                return Decision::Hold;
            }
            Rule::Set(new, reason) => (new, reason),
        };
        if !idle_branch {
            // The run of idle raises is over (another rule decided).
            tally.probe = None;
            if u.is_some_and(|u| u + e >= U_LOW) {
                // The CPUs are in use again (the other process's share may be gone): idle
                // raises may probe at once, and the next fruitless ones wait the shortest time.
                tally.idle_resume_ns = 0;
                tally.backoff_ns = 0;
                tally.wait_from = 0;
            }
        }
        self.restart(now_ns, cpu_ns);
        let clamped = new.clamp(self.min, self.max);
        // A limit an operator set outside the bounds is brought back whatever the rule said.
        let reason: fn(&mut LimitReasons) -> &mut u64 =
            if clamped != new && clamped.cmp(&limit) != new.cmp(&limit) {
                |r| &mut r.bounds
            } else {
                reason
            };
        let tally = &mut *self.tally;
        if tally.unqueued_cut_ns != 0 {
            let within = now_ns.saturating_sub(tally.unqueued_cut_ns)
                <= UNQUEUED_UNDONE_WITHIN.as_nanos() as u64;
            // Raised back by the rules that pay for hand-offs (drain, hand-off): the queue
            // the cut made cost more than the slots. An idle raise is not counted: its runs
            // are judged by the fruitless rule, and waiting after one left `repro mixed
            // --limit 32` with every session inside for a second (scans 4.2 and 4.6 × a lone
            // scan in two runs of eight).
            let mut moved = LimitReasons::default();
            *reason(&mut moved) += 1;
            let paid_back = moved.drain + moved.handoff > 0;
            if clamped > limit && within && paid_back {
                // The cut with nobody queued was undone: such cuts wait.
                let backoff = match tally.unqueued_backoff_ns {
                    0 => FRUITLESS_BACKOFF.as_nanos() as u64,
                    b => b,
                };
                tally.unqueued_resume_ns = now_ns.saturating_add(backoff);
                tally.unqueued_backoff_ns =
                    (backoff * 2).min(FRUITLESS_BACKOFF_MAX.as_nanos() as u64);
                tally.unqueued_cut_ns = 0;
            } else if !within {
                // It held: the next one undone waits the shortest time.
                tally.unqueued_backoff_ns = 0;
                tally.unqueued_cut_ns = 0;
            }
        }
        match clamped.cmp(&limit) {
            std::cmp::Ordering::Greater => {
                *reason(&mut tally.reasons) += 1;
                tally.raises += 1;
                Decision::Raise(clamped)
            }
            std::cmp::Ordering::Less => {
                *reason(&mut tally.reasons) += 1;
                tally.cuts += 1;
                Decision::Cut(clamped)
            }
            std::cmp::Ordering::Equal => Decision::Hold,
        }
    }
}

#[derive(Debug)]
struct Waiter<W> {
    id: WaitId,
    waiter: W,
    since_ns: u64,
    /// Lock holders (and sessions back from a wait) are chosen first within the age cap.
    priority: bool,
    /// Queued at the head ([`AutoCore::enter_after_wait`], [`AutoCore::reclaim`]).
    head: bool,
    /// A hand-off chose it at this time (0: still waiting).
    released_ns: u64,
    /// It may keep the stall watch (a thread that can wake on a timer).
    may_watch: bool,
}

/// What the queue lock guards.
#[derive(Debug)]
struct Queue<W> {
    /// In arrival order: the front is the oldest.
    waiters: VecDeque<Waiter<W>>,
    next_id: u64,
    /// Released waiters that have not begun to run (FLIFO's fifo-pending).
    pending: u32,
    /// Admissions beyond the limit: newcomers run in a pending waiter's place, and sessions
    /// back from a wait. Never more than the limit.
    extra: u32,
    /// Unreleased waiters with `priority`.
    prio: u32,
    /// A waiter past the age cap is being served: oldest first, no newcomer ahead of it.
    starving: bool,
    /// When a slot was last released or handed off while threads queued (stall detection).
    last_progress_ns: u64,
    controller: LimitController,
    stall_ticks: u64,
    rejections: u64,
    age_handoffs: u64,
    limit_max: u32,
    reclaims_over: u64,
    /// The wait that keeps the stall watch ([`AutoCore::is_stall_watch`]).
    watch: Option<WaitId>,
    /// The waiter the watch passed to, not yet told ([`AutoCore::take_nudge`]).
    nudge: Option<W>,
}

/// The core's counts and decisions, for stats and snapshots ([`crate::GateStats::auto`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct AutoStats {
    /// The limit now.
    pub limit: u32,
    /// Counted inside.
    pub inside: u32,
    /// Extra admissions running (newcomers in a pending waiter's place, sessions back from a
    /// wait).
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
    /// Lent slots taken back above the limit (within the allowance of twice the limit).
    pub reclaims_over: u64,
    /// Slots held now by long statements: holders that kept their slots past a quantum
    /// beside waiters the other slots served ([`AutoCore::yields_quantum`]).
    pub long_holders: u32,
    /// The controller's window now, ns: [`CONTROL_WINDOW`], longer (up to [`MAX_READING`])
    /// where its CPU reading is costly ([`WINDOWS_PER_READING_COST`]).
    pub control_window_ns: u64,
    /// The CPUs other processes left this one over the last half second or more, in
    /// thousandths of a CPU, as the controller reads its CPU use against them (at most its
    /// own CPU count); `None` where unknown (off Linux, before the first half second, in the
    /// simulator). Below the CPU count: others kept the rest busy.
    pub cpus_available_milli: Option<u32>,
}

/// The shared state of `auto`. See the module documentation.
#[derive(Debug)]
pub struct AutoCore<W> {
    slots: AtomicSlots,
    /// Waiters queued and not yet released; read by every exit.
    queued: AtomicU32,
    q: Mutex<Queue<W>>,
    p: AutoParams,
    /// Called under the queue lock for each waiter a hand-off releases (the real gate marks
    /// it `Woken` there, so the mark is ordered before anything the waiter does next).
    on_release: Option<fn(&W)>,
    /// Whether a waiter may keep the stall watch (`None`: every waiter may).
    may_watch: Option<fn(&W) -> bool>,
    /// `watch`'s id + 1 (0: nobody keeps it), for a lock-free check by the waiters.
    watch_id: AtomicU64,
    /// `nudge` holds a waiter to tell.
    nudge_pending: AtomicBool,
    /// When the oldest waiter not yet handed a slot queued (`u64::MAX`: none; 0 for a
    /// waiter queued at the head). Written under the queue lock whenever the queue changes,
    /// read without it by holders whose quantum is over ([`AutoCore::yields_quantum`]).
    oldest_ns: AtomicU64,
    /// The most holds marked as long statements' at any quantum's end with threads queued
    /// since the controller last ran (0: none); taken by the controller.
    long_peak: AtomicU32,
    /// At one of those quantum ends the holder kept its slot (the waiters were served by
    /// other slots); taken by the controller.
    long_kept: AtomicBool,
    /// Holders counted as long statements now: marked on their hold when they first keep
    /// their slot past a quantum beside waiters, uncounted when the hold is given back.
    long_holders: AtomicU32,
    /// When the controller's window ends: written under the
    /// queue lock after each decision, read without it by [`AutoCore::cpu_reading_due`].
    window_end_ns: AtomicU64,
    /// What the last CPU reading taken before the queue lock cost (0: none measured yet),
    /// handed to the controller when it next runs ([`AutoCore::note_reading_cost`]).
    reading_cost_ns: AtomicU64,
    /// The CPUs other processes leave this one (f64 bits; [`NO_ESTIMATE`]: unknown), handed
    /// to the controller when it next runs ([`AutoCore::note_cpus_available`]).
    cpus_available: AtomicU64,
    /// The controller's resting floor (fixed by the bounds), below which a decision without
    /// a queue never cuts: at or under it a quantum's end reads no CPU clock.
    unqueued_floor: u32,
}

/// `AutoCore::cpus_available` holds no estimate.
const NO_ESTIMATE: u64 = u64::MAX;

/// Releases to deliver once the core's lock is dropped.
pub type Releases<W> = Vec<Release<W>>;

impl<W: Clone> AutoCore<W> {
    /// A core with these parameters.
    pub fn new(p: AutoParams) -> Self {
        let controller =
            LimitController::new(p.cpus, p.min_limit, p.max_limit).with_cpu_lag(p.cpu_clock_lag);
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
            // The controller's first window starts at 0, when it is made.
            window_end_ns: AtomicU64::new(CONTROL_WINDOW.as_nanos() as u64),
            reading_cost_ns: AtomicU64::new(0),
            cpus_available: AtomicU64::new(NO_ESTIMATE),
        }
    }

    /// The driver's estimate of the CPUs other processes leave this one (`None`: unknown):
    /// the controller reads its CPU use against them from its next run
    /// ([`LimitController::set_cpus_available`]).
    pub fn note_cpus_available(&self, cpus: Option<f64>) {
        // Relaxed: a measurement handed over; the controller takes it under the queue lock.
        self.cpus_available
            .store(cpus.map_or(NO_ESTIMATE, f64::to_bits), Ordering::Relaxed);
    }

    /// The estimate last noted.
    fn cpus_noted(&self) -> Option<f64> {
        match self.cpus_available.load(Ordering::Relaxed) {
            NO_ESTIMATE => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// The driver's CPU reading before the queue lock took `cost_ns`: the controller's
    /// window becomes at least [`WINDOWS_PER_READING_COST`] times that from its next run.
    pub fn note_reading_cost(&self, cost_ns: u64) {
        // Relaxed: a measurement handed over; the controller takes it under the queue lock.
        self.reading_cost_ns.store(cost_ns, Ordering::Relaxed);
    }

    /// Whether a [`AutoCore::finish_wait`] at `now_ns` may end the controller's window and so
    /// read the process's CPU time: a hint without the queue lock, so that a driver can take
    /// the reading before it locks and hand it in. The kernel sums that clock over every
    /// thread of the process (`thread_group_cputime`), cold in cache once a window: measured
    /// at 0.46 % of all CPU samples with 1024 threads on the 2-core VM (`perf record`, `repro
    /// oltp --threads 1024`), ~180 µs a reading, which the queue lock was held across. A
    /// stale `false` costs only that the reading is then taken under the lock, as before.
    pub fn cpu_reading_due(&self, now_ns: u64) -> bool {
        // Relaxed: a hint; the decision itself is made under the queue lock.
        self.p.adaptive && now_ns >= self.window_end_ns.load(Ordering::Relaxed)
    }

    /// [`AutoCore::cpu_reading_due`], claimed by one thread: the hint moves a window on, so
    /// the holders whose quanta end while this one reads (a reading walks every thread of
    /// the process) do not read too. The decision then sets the window's real end. A
    /// `finish_wait` that finds the hint moved reads under the queue lock, as with any stale
    /// hint.
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

    /// After a decision at `now_ns` (the queue lock held): the next window's end, for
    /// [`AutoCore::cpu_reading_due`].
    fn window_restarted(&self, q: &Queue<W>, now_ns: u64) {
        self.window_end_ns.store(
            now_ns.saturating_add(q.controller.window_ns()),
            Ordering::Relaxed,
        );
    }

    /// Only waiters for which `f` is true may keep the stall watch (the real gate: thread
    /// sessions, which wake on a timer; async sessions do not).
    pub fn with_watch_hook(mut self, f: fn(&W) -> bool) -> Self {
        self.may_watch = Some(f);
        self
    }

    fn may_watch(&self, w: &W) -> bool {
        self.may_watch.is_none_or(|f| f(w))
    }

    /// Whether wait `id` keeps the stall watch: the one waiter that wakes every
    /// [`STALL_PERIOD`] to run [`AutoCore::stall_check`]. The others sleep until their
    /// hand-off (a thousand waiters each waking every period cost ~5,000 context switches a
    /// second: measured on `repro oltp` at 1024 threads, 7,837 against 3,252 at 256).
    /// Lock-free.
    #[inline]
    pub fn is_stall_watch(&self, id: WaitId) -> bool {
        self.watch_id.load(Ordering::Acquire) == id.0 + 1
    }

    /// The waiter the stall watch passed to when its keeper left the queue, if it has not
    /// been told yet: the driver wakes it (without a slot) so that it starts its timer.
    /// One atomic load unless there is one.
    #[inline]
    pub fn take_nudge(&self) -> Option<W> {
        if !self.nudge_pending.load(Ordering::Acquire) {
            return None;
        }
        let mut q = lock(&self.q);
        self.nudge_pending.store(false, Ordering::Relaxed);
        q.nudge.take()
    }

    /// A waiter just queued as `id`: it keeps the watch if nobody does.
    fn appoint_watch(&self, q: &mut Queue<W>, id: WaitId, may_watch: bool) {
        if may_watch && q.watch.is_none() {
            q.watch = Some(id);
            self.watch_id.store(id.0 + 1, Ordering::Release);
        }
    }

    /// Wait `id` left the queue: if it kept the watch, the watch passes to the waiter the
    /// selection rule will reach last (the newest while the oldest are served, the oldest
    /// while the newest are; lock holders and head waiters go first, so only if no other
    /// may watch), and that waiter is to be told. So the watch moves about once per switch
    /// of the rule, not once per hand-off.
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

    /// Calls `f` under the queue lock for each waiter a hand-off releases.
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

    /// One decision for a thread that wants in. The fast path (nobody queued, a slot free) is
    /// one atomic increment. `now_ns` is read only on the slow path; `on_queue` runs under
    /// the queue lock when the thread is queued (the driver publishes the waiter's state
    /// there, so a hand-off's mark always comes after it). Waiters the slow path released
    /// are pushed to `out`, for the driver to signal.
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

    /// The fast path of [`AutoCore::enter`] alone: one atomic increment while nobody is
    /// queued and a slot is free; `None` means "call `enter`".
    #[inline]
    pub fn try_admit(&self) -> Option<Admission> {
        if self.queued.load(Ordering::Relaxed) != 0 {
            return None;
        }
        let by = self.slots.try_take()?;
        Some(self.admission(by, HoldKind::Slot))
    }

    /// The slow path of [`AutoCore::enter`], for a driver that tried
    /// [`AutoCore::try_admit`] first.
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
            // Others are owed any free slot first. One may be free: an exit on its way to
            // this lock to hand it off, or a fast-path admission that overshot and gave it
            // back. Handing it off here settles both.
            self.hand_off(&mut q, now, out);
            self.queued.fetch_add(1, Ordering::SeqCst);
        }
        self.refresh_starving(&mut q, now);
        // FLIFO's rule: run in the place of a released waiter that is not yet running, but
        // not while the oldest are served (measured on `repro oltp`: allowed then, the
        // extras delay the grantees, whose late starts cut the limit, and p99 doubles).
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
        let waiting = (q.waiters.len() as u32).saturating_sub(q.pending);
        q.controller.observe_waiting(waiting);
        on_queue();
        Step::Wait(id)
    }

    /// Re-entry after a wait the session stepped out for: into a free slot, else as an extra
    /// admission while extras are fewer than the limit, else to the head of the queue (as a
    /// priority waiter). InnoDB lets such a thread in regardless of the limit
    /// (`srv_conc_force_enter_innodb`); `auto` bounds it.
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
        // It waited its turn before the wait it comes back from.
        let id = self.queue_at_head(&mut q, waiter);
        q.controller.observe_queue();
        let waiting = (q.waiters.len() as u32).saturating_sub(q.pending);
        q.controller.observe_waiting(waiting);
        on_queue();
        Step::Wait(id)
    }

    /// Queues `waiter` (a priority waiter) at the head, as the oldest of all: served first
    /// whatever the mode, behind the waiters already put there (first come, first served
    /// among them), ahead of every waiter that queued by arrival. The caller has counted it
    /// in `queued`.
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

    /// Passes a long holder seen since the controller last ran on to it (before it decides).
    fn pass_long_holder(&self, q: &mut Queue<W>) {
        let n = self.long_peak.swap(0, Ordering::Relaxed);
        let kept = self.long_kept.swap(false, Ordering::Relaxed);
        if n > 0 {
            q.controller.observe_long_holders(n, kept);
        }
    }

    /// Publishes when the oldest waiter not yet handed a slot queued (after a change to the
    /// queue; the queue lock is held), and returns it.
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

    /// A thread leaves, giving back `hold`. Returns the waiters to signal (at most one, unless
    /// the controller raised the limit at the same time). The fast path (nobody queued) is
    /// one atomic decrement and one load.
    #[inline]
    pub fn exit(&self, hold: Hold, now_ns: impl FnOnce() -> u64) -> Releases<W> {
        if self.release(hold) {
            self.hand_off_slow(now_ns())
        } else {
            Vec::new()
        }
    }

    /// The first half of [`AutoCore::exit`]: gives back `hold`; `true` means threads are
    /// queued, and [`AutoCore::hand_off_slow`] must follow (with the time).
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

    /// [`AutoCore::hand_off`] but for publishing the oldest waiter.
    fn hand_off_inner(&self, q: &mut Queue<W>, now: u64, out: &mut Releases<W>) {
        loop {
            // Under the lock, `queued` counts exactly the unreleased waiters in the list.
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

    /// The queued wait `id`, released, begins to run at `now_ns`: it takes its slot. The
    /// grant's delay feeds the controller; a window that ends here may move the limit (with
    /// `cpu_ns`, the process's CPU time so far), and a raise hands slots to more waiters
    /// (returned, to signal).
    ///
    /// # Panics
    /// If `id` is not a released wait of this core: a driver bug.
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

    /// Runs the controller if its window is over (the queue lock is held).
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
        // Waiters not yet handed a slot (the released ones are no longer counted).
        let waiting = (q.waiters.len() as u32).saturating_sub(q.pending);
        q.controller.observe_waiting(waiting);
        self.pass_long_holder(q);
        let decision = q.controller.decide(limit, now, cpu_ns());
        if self.apply(q, decision, now) {
            self.hand_off(q, now, out);
        }
    }

    /// Hands the driver's latest measurements (the reading's cost, the CPUs others leave)
    /// to the controller, and says whether its window is over at `now`.
    fn window_due(&self, q: &mut Queue<W>, now: u64) -> bool {
        q.controller
            .set_reading_cost(self.reading_cost_ns.load(Ordering::Relaxed));
        q.controller.set_cpus_available(self.cpus_noted());
        q.controller.window_over(now)
    }

    /// Applies a decision made at `now` (the queue lock held): the limit, and when the next
    /// window ends. Whether it raised (slots to hand to waiters).
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

    /// [`LimitController::decide_unqueued`] under the queue lock, if nobody queued meanwhile
    /// and the window is over.
    fn control_unqueued(&self, now: u64, cpu_ns: Option<u64>) {
        let mut q = lock(&self.q);
        if !q.waiters.is_empty() {
            // The ordinary decision is made when one of them is granted.
            return;
        }
        if !self.window_due(&mut q, now) {
            return;
        }
        self.pass_long_holder(&mut q);
        // The long statements still holding slots (exact: counted until their holds are
        // given back), so that the lane is not forgotten while no quantum ends beside waiters.
        let long = self.long_holders();
        if long > 0 {
            q.controller.observe_long_holders(long, false);
        }
        let decision = q
            .controller
            .decide_unqueued(self.slots.limit(), now, cpu_ns);
        // A raise (threads queued in the window after all: the ordinary rules) has nobody
        // queued now to hand its slots to.
        self.apply(&mut q, decision, now);
    }

    /// A queued waiter's periodic check (every [`STALL_PERIOD`] of its wait). If no slot was
    /// released or handed off for a stall period while threads queued, the controller runs
    /// now (it raises the limit when the CPUs are idle). Returns the waiters to signal.
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
            // Handed off below, raised or not.
            self.apply(&mut q, decision, now_ns);
        }
        self.hand_off(&mut q, now_ns, &mut out);
        out
    }

    /// A holder blocks on a lock (`gate_hook`): its slot is given back for the wait (and
    /// handed to a waiter), while the session keeps its [`Hold`], which the matching
    /// [`AutoCore::reclaim`] makes good again. Returns the waiters to signal.
    pub fn lend(&self, now_ns: u64) -> Releases<W> {
        self.slots.give_back();
        if self.queued.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.hand_off_slow(now_ns)
    }

    /// A holder whose slot was lent has its lock: it is counted again. Into a free slot;
    /// else above the limit while those inside are fewer than twice the limit (the
    /// allowance: lent slots come back at once, as InnoDB's force-enter after a lock wait,
    /// but bounded); else it queues first in line as a priority waiter and the caller blocks
    /// on the returned wait (its hand-off counts the slot). `Ok`: the slot counted now.
    ///
    /// Counted in `queued` before it looks for a slot, as every waiter is (see "No lost
    /// wake-up" in the module documentation): an exit that gives its slot back after that
    /// look reads `queued` after its give-back, so it sees this thread and hands it the slot.
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

    /// The queued wait `id` gives up. `None`: it left uncounted; `Some(admission)`: a
    /// hand-off had already released it, so it is inside and must exit normally.
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

    /// Sets the limit (an operator's choice; the controller goes on from it when adaptive).
    /// Returns the limit replaced and the waiters a raise released.
    pub fn set_limit(&self, limit: u32, now_ns: u64) -> (u32, Releases<W>) {
        let mut q = lock(&self.q);
        let old = self.slots.set_limit(limit);
        q.limit_max = q.limit_max.max(limit);
        let mut out = Vec::new();
        self.hand_off(&mut q, now_ns, &mut out);
        (old, out)
    }

    /// Whether anyone is queued (read by a session whose quantum is over).
    #[inline]
    pub fn has_waiters(&self) -> bool {
        self.queued.load(Ordering::Relaxed) != 0
    }

    /// A holder whose quantum began at `quantum_start_ns` has spent it: whether it gives its
    /// slot up now. Yes if a waiter not yet handed a slot queued before the quantum began:
    /// the other slots' turnover has not served it within a whole quantum, so the holders
    /// lock it out. Otherwise the holder keeps its slot for another quantum (it will be
    /// asked again), marks `hold` as a long statement's (counted in
    /// [`AutoCore::long_holders`] until the hold is given back), and tells the controller
    /// that long statements keep their slots beside waiters that other slots serve
    /// ([`LimitController::observe_long_holders`]). Lock-free with threads queued: two loads
    /// (and one increment the first time a hold is marked). A stale reading is harmless: a waiter served a moment ago makes the holder
    /// give way once more than needed, and one queued a moment ago is seen at the next
    /// quantum's end.
    ///
    /// With nobody queued it keeps its slot, and where the limit is above the resting floor
    /// (an adaptive core), at most once per controller window (claimed lock-free first), the
    /// controller decides without a queue ([`LimitController::decide_unqueued`]), at `now_ns`
    /// with the CPU reading `cpu_ns` (taken only then, before the queue lock): the limit may
    /// be cut; raised only where threads queued in the window after all (the ordinary rules).
    pub fn yields_quantum(
        &self,
        quantum_start_ns: u64,
        hold: &mut Hold,
        now_ns: u64,
        cpu_ns: impl FnOnce() -> Option<u64>,
    ) -> bool {
        if !self.has_waiters() {
            // At or below the resting floor there is nothing this decision would cut.
            // Not counted as a long statement: with every session inside, a short one the
            // kernel preempted for a quantum looks the same.
            if self.p.adaptive
                && self.slots.limit() > self.unqueued_floor
                && self.claim_reading(now_ns)
            {
                // Read before the queue lock (see `cpu_reading_due`).
                self.control_unqueued(now_ns, cpu_ns());
            }
            return false;
        }
        // A whole quantum spent with threads queued: a long statement's, whether it keeps its
        // slot or gives way.
        let n = self.mark_long(hold);
        self.long_peak.fetch_max(n, Ordering::Relaxed);
        if self.oldest_ns.load(Ordering::Relaxed) <= quantum_start_ns {
            return true;
        }
        self.long_kept.store(true, Ordering::Relaxed);
        false
    }

    /// Marks `hold` as a long statement's (if it is not already) and returns how many holds
    /// are so marked now. The driver calls it itself for a statement that was long before
    /// it gave way and is admitted again: it is still long. Counted until the hold is given
    /// back (`release`), so the count is exact: a hold is consumed exactly once.
    pub fn mark_long(&self, hold: &mut Hold) -> u32 {
        if hold.long {
            self.long_holders.load(Ordering::Relaxed)
        } else {
            hold.long = true;
            self.long_holders.fetch_add(1, Ordering::Relaxed) + 1
        }
    }

    /// A hold whose slot a loan ([`AutoCore::lend`]) already gave back, consumed without a
    /// release: it stops counting as a long statement's.
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
            // `inside` first (a struct literal evaluates in the order written): a limit raised
            // between the two loads cannot show more inside than the limit ever allowed.
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

/// A fixed-limit core's parameters for `limit` CPUs and slots, with exact CPU readings (the
/// core's tests and its loom models).
#[cfg(test)]
fn test_params(limit: u32, age_cap: Duration) -> AutoParams {
    AutoParams {
        start_limit: limit,
        cpus: limit,
        min_limit: 1,
        max_limit: 1000,
        quantum: DEFAULT_QUANTUM,
        age_cap,
        max_waiting: 0,
        adaptive: false,
        cpu_clock_lag: Duration::ZERO,
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the core's own races that the gate-level models (tests/loom.rs) cannot
    //! reach: `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --lib auto`.
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
    use super::*;

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
    fn a_costly_cpu_reading_stretches_the_window_to_a_hundred_times_its_cost_up_to_the_longest_reading(
    ) {
        // Times and costs are synthetic inputs; no clock is read.
        let mut c = LimitController::new(2, 2, 64);
        let window = CONTROL_WINDOW.as_nanos() as u64;
        assert_eq!(c.window_ns(), window, "unmeasured: the plain window");
        c.set_reading_cost(150_000); // 150 µs × 100 = 15 ms: under the plain window
        assert_eq!(c.window_ns(), window);
        c.set_reading_cost(MS); // 1 ms × 100 = 100 ms
        assert_eq!(c.window_ns(), 100 * MS);
        assert!(!c.window_over(100 * MS - 1));
        assert!(c.window_over(100 * MS));
        c.set_reading_cost(10 * MS); // a preempted reading: no longer than the longest reading
        assert_eq!(c.window_ns(), MAX_READING.as_nanos() as u64);
        c.set_reading_cost(0);
        assert_eq!(
            c.window_ns(),
            window,
            "a cheap reading brings the plain window back"
        );
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
    fn the_controller_raises_when_threads_queue_and_the_cpus_are_idle() {
        let mut c = LimitController::new(4, 2, 64);
        c.decide(4, 0, Some(0)); // the first window only takes the CPU reading
        c.observe_queue();
        c.observe_grant(50_000);
        // 20 ms on 4 CPUs with 8 ms of CPU used: u = 0.1 → raise by up to doubling.
        assert_eq!(c.decide(4, 20 * MS, Some(8 * MS)), Decision::Raise(8));
        assert_eq!(c.raises(), 1);
        assert_eq!(
            c.reasons(),
            LimitReasons {
                windows: 1,
                idle_cpu: 1,
                ..LimitReasons::default()
            }
        );
    }

    #[test]
    fn the_limit_rests_at_two_slots_per_cpu_within_its_bounds_or_at_bounds_set_below_the_cpus() {
        // The controller is time-free: no clock is read. The times and CPU readings below
        // are synthetic inputs it is given (20 ms windows on 4 CPUs); the test asserts its
        // decisions, never a duration.
        let mut c = LimitController::new(4, 4, 64);
        c.decide(4, 0, Some(0));
        // The first window with threads queued, every CPU busy and the grants late: raised
        // from the CPUs to the resting floor all the same.
        c.observe_queue();
        for _ in 0..4 {
            c.observe_grant(5 * MS);
        }
        assert_eq!(c.decide(4, 20 * MS, Some(80 * MS)), Decision::Raise(8));
        assert_eq!(c.reasons().rest, 1);
        // Busy CPUs decay it to there and no further.
        c.observe_queue();
        assert_eq!(c.decide(9, 40 * MS, Some(160 * MS)), Decision::Cut(8));
        c.observe_queue();
        assert_eq!(c.decide(8, 60 * MS, Some(240 * MS)), Decision::Hold);
        // A maximum under two per CPU bounds the floor.
        let mut c = LimitController::new(4, 4, 6);
        c.decide(4, 0, Some(0));
        c.observe_queue();
        assert_eq!(c.decide(4, 20 * MS, Some(80 * MS)), Decision::Raise(6));
        // Surely idle CPUs (half of them): the idle rule decides from where the limit is,
        // so that a run of raises that does not pay off comes back there.
        let mut c = LimitController::new(4, 4, 64);
        c.decide(4, 0, Some(0));
        c.observe_queue();
        assert_eq!(c.decide(4, 20 * MS, Some(40 * MS)), Decision::Raise(5));
        assert_eq!((c.reasons().rest, c.reasons().idle_cpu), (0, 1));
        // Bounds set below the CPUs (an operator's limit of 2 on 4 CPUs): the floor is
        // theirs, and busy CPUs hold the limit there.
        let mut c = LimitController::new(4, 2, 64);
        c.decide(2, 0, Some(0));
        c.observe_queue();
        assert_eq!(c.decide(2, 20 * MS, Some(79 * MS)), Decision::Hold);
        assert_eq!(c.reasons().rest, 0);
    }

    #[test]
    fn each_move_of_the_limit_is_counted_under_the_rule_that_made_it() {
        // The controller is time-free: the times and CPU readings are inputs it is given, not
        // measured. Inputs as in the tests above; here the counts of why are asserted.
        let mut c = LimitController::new(2, 2, 64);
        c.decide(4, 0, Some(0));
        // One 20 ms window with threads queued: `cpu_ms` of CPU used on the 2 CPUs (40 = all
        // busy), `grants` hand-offs, every other one starting `late_ms` late.
        let (mut t, mut used) = (0, 0);
        let mut next = |c: &mut LimitController, limit, cpu_ms: u64, grants, late_ms: u64| {
            used += cpu_ms * MS;
            t += 20 * MS;
            c.observe_queue();
            for i in 0..grants {
                c.observe_grant(if i % 2 == 0 { late_ms * MS } else { 0 });
            }
            c.decide(limit, t, Some(used))
        };
        assert!(matches!(next(&mut c, 4, 20, 10, 0), Decision::Raise(_))); // idle CPUs
        assert_eq!(next(&mut c, 8, 40, 4000, 0), Decision::Raise(10)); // hand-off bound
        assert_eq!(next(&mut c, 10, 40, 10, 5), Decision::Cut(8)); // late while busy
        assert_eq!(next(&mut c, 8, 40, 10, 0), Decision::Cut(7)); // busy: decay by one
        assert_eq!(next(&mut c, 7, 39, 10, 0), Decision::Hold); // dead band
        let r = c.reasons();
        assert_eq!(
            r,
            LimitReasons {
                windows: 5,
                idle_cpu: 1,
                handoff: 1,
                blind: 0,
                drain: 0,
                late: 1,
                busy: 1,
                rest: 0,
                lane: 0,
                lane_cut: 0,
                fruitless: 0,
                bounds: 0,
                deferred: 0,
            }
        );
        assert_eq!(r.moves(), c.raises() + c.cuts());
        // Below the resting floor (two slots per CPU: 4), late grants and all: back to it.
        assert_eq!(next(&mut c, 3, 40, 10, 5), Decision::Raise(4));
        // An operator's limit below the bounds (2 CPUs) comes back up to it too.
        assert_eq!(next(&mut c, 1, 40, 10, 0), Decision::Raise(4));
        // One above them comes back down, counted as such, even in a window whose rule
        // would hold it (the dead band).
        assert_eq!(next(&mut c, 100, 39, 10, 0), Decision::Cut(64));
        assert_eq!(
            c.reasons().since(&r),
            LimitReasons {
                windows: 3,
                rest: 2,
                bounds: 1,
                ..LimitReasons::default()
            }
        );
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
    fn beside_long_statements_the_limit_keeps_a_slot_each_and_the_cpus_they_leave() {
        // 2 CPUs, exact readings (the times and CPU readings are synthetic inputs).
        let mut c = LimitController::new(2, 2, 64);
        c.decide(2, 0, Some(0));
        let mut t = (0, 0);
        let mut window = |c: &mut LimitController, limit, long, busy: f64, grants: &[u64]| {
            t.0 += 20 * MS;
            t.1 += (40.0 * busy) as u64 * MS / 100;
            c.observe_queue();
            if long > 0 {
                c.observe_long_holders(long, true);
            }
            for &g in grants {
                c.observe_grant(g);
            }
            c.decide(limit, t.0, Some(t.1))
        };
        // Two long statements fill the CPUs (99 % busy at 2): one slot more, the lane for
        // the statements that turn over.
        assert_eq!(window(&mut c, 2, 2, 99.0, &[]), Decision::Raise(3));
        // Busy CPUs do not take it back while they run; nor do late grants.
        assert_eq!(window(&mut c, 3, 2, 99.0, &[]), Decision::Hold);
        let late = [2 * MS, 0, 2 * MS, 0, 2 * MS, 0, 2 * MS, 0];
        assert_eq!(window(&mut c, 3, 2, 99.0, &late), Decision::Hold);
        // The busy CPUs are the long statements', not hand-offs': 1000 grants at 40 µs of
        // CPU each raise nothing.
        assert_eq!(window(&mut c, 3, 2, 99.0, &[0; 1000]), Decision::Hold);
        // Three long statements on 2 CPUs: a slot each, and the lane.
        assert_eq!(window(&mut c, 3, 3, 99.0, &[]), Decision::Raise(4));
        // One left: it keeps a CPU, the others get the other one. Not on the first reading
        // that sees one (a long statement that gave its slot up for a moment is back by
        // the next), then cut to the CPUs, busy or not quite (90 %: the gaps of the lane's
        // hand-offs).
        assert_eq!(window(&mut c, 4, 1, 99.0, &[]), Decision::Hold);
        assert_eq!(window(&mut c, 4, 1, 99.0, &[]), Decision::Cut(3));
        assert_eq!(window(&mut c, 3, 1, 90.0, &[]), Decision::Cut(2));
        assert_eq!(window(&mut c, 2, 1, 90.0, &[]), Decision::Hold);
        // Once no statement keeps its slot past its quantum, the limit goes back to its
        // resting floor (two slots per CPU), busy CPUs decay it to there, and a 90 % reading
        // raises past it (idle CPUs).
        assert_eq!(window(&mut c, 2, 0, 99.0, &[]), Decision::Raise(4));
        assert_eq!(window(&mut c, 5, 0, 99.0, &[]), Decision::Cut(4));
        assert_eq!(window(&mut c, 4, 0, 99.0, &[]), Decision::Hold);
        assert!(matches!(window(&mut c, 4, 0, 90.0, &[]), Decision::Raise(n) if n > 4));
        let r = c.reasons();
        assert_eq!(
            (r.lane, r.lane_cut, r.rest, r.busy, r.idle_cpu, r.handoff, r.late),
            (2, 2, 1, 1, 1, 0, 0),
            "{r:?}"
        );
        assert_eq!(c.raises() + c.cuts(), 7);
    }

    #[test]
    fn the_first_reading_to_see_long_statements_does_not_cut_towards_the_lane_and_the_next_does() {
        // 2 CPUs, exact readings (synthetic inputs). Each long statement is seen at its own
        // quantum's end, so the first reading may see one of two: it holds.
        let mut c = LimitController::new(2, 2, 64);
        c.decide(4, 0, Some(0));
        c.observe_queue();
        c.observe_long_holders(1, true);
        assert_eq!(c.decide(4, 20 * MS, Some(396 * MS / 10)), Decision::Hold);
        c.observe_queue();
        c.observe_long_holders(1, true);
        assert_eq!(c.decide(4, 40 * MS, Some(792 * MS / 10)), Decision::Cut(3));
        assert_eq!(c.reasons().lane_cut, 1);
    }

    #[test]
    fn long_statements_that_only_give_way_raise_the_limit_to_the_lane_and_cut_nothing() {
        // Two long statements hold both slots of 2 CPUs and give way at each quantum's end
        // (every waiter locked out): the lane is raised all the same. One that gives way
        // beside a limit above the lane (a long transaction among short ones) moves nothing:
        // the usual rules decide.
        let mut c = LimitController::new(2, 2, 64);
        c.decide(2, 0, Some(0));
        c.observe_queue();
        c.observe_long_holders(2, false);
        assert_eq!(
            c.decide(2, 20 * MS, Some(396 * MS / 10)),
            Decision::Raise(3)
        );
        c.observe_queue();
        c.observe_long_holders(1, false);
        c.observe_long_holders(1, false);
        // 97 % busy at 4 (the dead band): hold, as without a long statement.
        assert_eq!(c.decide(4, 40 * MS, Some(776 * MS / 10)), Decision::Hold);
        let r = c.reasons();
        assert_eq!((r.lane, r.lane_cut), (1, 0), "{r:?}");
    }

    /// A reading in which threads queued and two long statements kept their slots: `cpu_ms`
    /// of process CPU time by `now_ms` (synthetic inputs to the time-free controller).
    fn long_kept_window(c: &mut LimitController, limit: u32, now_ms: u64, cpu_ms: u64) -> Decision {
        c.observe_queue();
        c.observe_long_holders(2, true);
        c.decide(limit, now_ms * MS, Some(cpu_ms * MS))
    }

    #[test]
    fn beside_long_statements_idle_under_a_cpus_worth_holds_the_lane_and_a_cpus_worth_raises() {
        // 2 CPUs, exact readings (the times and CPU readings are synthetic inputs).
        let mut c = LimitController::new(2, 1, 64);
        c.decide(3, 0, Some(0));
        // 90 % busy over 20 ms (36 ms of CPU) with a long statement keeping its slot: the
        // idle is the lane's gaps, under one CPU's worth. Hold at the lane, no idle raise.
        assert_eq!(long_kept_window(&mut c, 3, 20, 36), Decision::Hold);
        // The same reading below the lane raises to it, and counts it there.
        assert_eq!(long_kept_window(&mut c, 2, 40, 72), Decision::Raise(3));
        // 45 % busy (18 ms of CPU): a CPU's worth idle, a slot holder that does not run
        // (a long statement in a wait nobody declared): the idle rule raises.
        assert!(matches!(
            long_kept_window(&mut c, 3, 60, 90),
            Decision::Raise(n) if n > 3
        ));
        // Without a long statement, the 90 % reading raises as before.
        c.observe_queue();
        assert!(matches!(
            c.decide(3, 80 * MS, Some(126 * MS)),
            Decision::Raise(n) if n > 3
        ));
        let r = c.reasons();
        assert_eq!((r.lane, r.idle_cpu, r.windows), (1, 2, 4), "{r:?}");
    }

    #[test]
    fn beside_long_statements_a_cpus_worth_idle_is_counted_in_the_cpus_other_processes_leave() {
        // 4 CPUs, 2 of them left by other processes; exact readings (synthetic inputs). Two
        // long statements keep their slots at the lane (4: the CPUs).
        let mut c = LimitController::new(4, 4, 64);
        c.set_cpus_available(Some(2.0));
        c.decide(4, 0, Some(0));
        // 24 ms of CPU in 20 ms: 60 % of the 2 CPUs left, 0.8 of a CPU idle, under a CPU's
        // worth: the lane's gaps. Hold (read against all 4 CPUs, 1.6 idle of 4 would have
        // looked like a CPU's worth, and the idle rule would have raised).
        assert_eq!(long_kept_window(&mut c, 4, 20, 24), Decision::Hold);
        // 12 ms: 1.4 of the 2 CPUs idle, a slot holder that does not run: the idle rule.
        assert!(matches!(
            long_kept_window(&mut c, 4, 40, 36),
            Decision::Raise(n) if n > 4
        ));
        let r = c.reasons();
        assert_eq!((r.idle_cpu, r.windows), (1, 2), "{r:?}");
    }

    #[test]
    fn the_controller_decays_towards_the_cpus_when_every_cpu_is_busy_and_cuts_on_late_grants() {
        let mut c = LimitController::new(4, 2, 64);
        c.decide(10, 0, Some(0));
        c.observe_queue();
        assert_eq!(c.decide(10, 20 * MS, Some(80 * MS)), Decision::Cut(9));
        c.observe_queue();
        for _ in 0..4 {
            c.observe_grant(5 * MS);
        }
        assert_eq!(c.decide(9, 40 * MS, Some(160 * MS)), Decision::Cut(7));
        // In the dead band (u = 0.96), at the CPU count: hold.
        c.observe_queue();
        assert_eq!(c.decide(4, 60 * MS, Some(237 * MS)), Decision::Hold);
    }

    #[test]
    fn busy_cpus_spent_on_hand_offs_raise_the_limit_and_costly_work_per_hand_off_does_not() {
        // The controller is time-free: the times and CPU readings below are inputs it is
        // given, not measured; the test asserts its decisions.
        let mut c = LimitController::new(2, 1, 64);
        c.decide(8, 0, Some(0));
        // 20 ms on 2 CPUs, all busy (40 ms of CPU), 4,000 hand-offs: 10 µs of CPU each,
        // under twice a hand-off's cost, even with some late: raise by a quarter.
        c.observe_queue();
        for i in 0..4000 {
            c.observe_grant(if i % 4 == 0 { 2 * MS } else { 50_000 });
        }
        assert_eq!(c.decide(8, 20 * MS, Some(40 * MS)), Decision::Raise(10));
        // The same busy CPUs with 200 hand-offs (200 µs each, OLTP's): the decay towards the
        // CPUs, as before.
        c.observe_queue();
        for _ in 0..200 {
            c.observe_grant(50_000);
        }
        assert_eq!(c.decide(10, 40 * MS, Some(80 * MS)), Decision::Cut(9));
        // Idle CPUs with cheap hand-offs: the idle rule (raise towards the target) decides.
        c.observe_queue();
        for _ in 0..100 {
            c.observe_grant(50_000);
        }
        assert!(matches!(
            c.decide(9, 60 * MS, Some(81 * MS)),
            Decision::Raise(_)
        ));
    }

    #[test]
    fn the_controller_learns_nothing_from_a_window_without_waiters_and_keeps_its_bounds() {
        let mut c = LimitController::new(2, 1, 3);
        c.decide(2, 0, Some(0));
        assert_eq!(
            c.decide(2, 20 * MS, Some(0)),
            Decision::Hold,
            "nobody queued"
        );
        c.observe_queue();
        assert_eq!(
            c.decide(2, 40 * MS, Some(0)),
            Decision::Raise(3),
            "clamped to max"
        );
        c.observe_queue();
        assert_eq!(c.decide(3, 60 * MS, Some(0)), Decision::Hold);
    }

    /// Feeds `c` one 20 ms window with threads queued, `cpu_us` of CPU used in it on its
    /// CPUs and `grants` hand-offs of which every other starts `late_ms` late. No clock is
    /// read: the times and CPU readings are synthetic inputs to the time-free controller, and
    /// the tests that use this assert its decisions, never a duration.
    fn window(
        c: &mut LimitController,
        clock: &mut (u64, u64),
        limit: u32,
        cpu_us: u64,
        grants: u32,
        late_ms: u64,
    ) -> Decision {
        clock.0 += 20 * MS;
        clock.1 += cpu_us * 1_000;
        c.observe_queue();
        for i in 0..grants {
            c.observe_grant(if i % 2 == 0 { late_ms * MS } else { 0 });
        }
        c.decide(limit, clock.0, Some(clock.1))
    }

    #[test]
    fn a_cpu_reading_within_the_clock_lag_of_a_threshold_reads_on_until_it_can_tell() {
        // 2 CPUs at 91 % (36.4 ms of CPU per 20 ms window), below the 95 % mark. With a 4 ms
        // lag, one window reads 0.91 ± 0.10 and two 0.91 ± 0.05: either might be busy CPUs
        // read low, so the controller reads on; three read 0.91 ± 0.033, surely idle: raise.
        let mut c = LimitController::new(2, 2, 64).with_cpu_lag(CPU_CLOCK_LAG);
        c.decide(8, 0, Some(0));
        let mut clock = (0, 0);
        assert_eq!(window(&mut c, &mut clock, 8, 36_400, 10, 0), Decision::Hold);
        assert_eq!(window(&mut c, &mut clock, 8, 36_400, 10, 0), Decision::Hold);
        assert_eq!(
            window(&mut c, &mut clock, 8, 36_400, 10, 0),
            Decision::Raise(9)
        );
        assert_eq!(
            c.reasons(),
            LimitReasons {
                windows: 3,
                idle_cpu: 1,
                deferred: 2,
                ..LimitReasons::default()
            }
        );
        // A new reading began at the raise: the next window is short again.
        assert_eq!(window(&mut c, &mut clock, 9, 36_400, 10, 0), Decision::Hold);
        assert_eq!(c.reasons().deferred, 3);
        // The same load read exactly (the simulator's reading) decides in its first window.
        let mut exact = LimitController::new(2, 2, 64);
        exact.decide(8, 0, Some(0));
        let mut clock = (0, 0);
        assert_eq!(
            window(&mut exact, &mut clock, 8, 36_400, 10, 0),
            Decision::Raise(9)
        );
    }

    #[test]
    fn a_reading_that_stays_unclear_decides_on_its_value_at_the_longest_reading() {
        // 96 % busy with late grants: 0.96 is over the 95 % mark, but not by more than the
        // error until the reading spans 200 ms; there the late grants cut by a quarter.
        let mut c = LimitController::new(2, 2, 64).with_cpu_lag(CPU_CLOCK_LAG);
        c.decide(8, 0, Some(0));
        let mut clock = (0, 0);
        let windows = (MAX_READING.as_nanos() / CONTROL_WINDOW.as_nanos()) as u64;
        for _ in 1..windows {
            assert_eq!(window(&mut c, &mut clock, 8, 38_400, 10, 5), Decision::Hold);
        }
        assert_eq!(
            window(&mut c, &mut clock, 8, 38_400, 10, 5),
            Decision::Cut(6)
        );
        let r = c.reasons();
        assert_eq!((r.windows, r.deferred, r.late), (windows, windows - 1, 1));
    }

    #[test]
    fn a_stall_or_a_window_without_waiters_ends_the_reading() {
        // Synthetic times and CPU readings (no clock is read); the decisions are asserted.
        let mut c = LimitController::new(2, 2, 64).with_cpu_lag(CPU_CLOCK_LAG);
        c.decide(8, 0, Some(0));
        let mut clock = (0, 0);
        assert_eq!(window(&mut c, &mut clock, 8, 36_000, 10, 0), Decision::Hold);
        // Nobody queued in the next window: nothing learnt, and a new reading begins.
        clock.0 += 20 * MS;
        clock.1 += 40 * MS;
        assert_eq!(c.decide(8, clock.0, Some(clock.1)), Decision::Hold);
        assert_eq!(window(&mut c, &mut clock, 8, 36_000, 10, 0), Decision::Hold);
        assert_eq!(c.reasons().deferred, 2, "the reading restarted");
        // A stall decides on the reading as it stands: 0.90 over 40 ms, idle.
        c.observe_stall();
        clock.0 += 20 * MS;
        clock.1 += 36 * MS;
        assert_eq!(c.decide(8, clock.0, Some(clock.1)), Decision::Raise(9));
    }

    #[test]
    fn busy_cpus_with_prompt_grants_and_a_queue_up_to_twice_the_limit_admit_the_queue() {
        // 2 CPUs all busy (40 ms of CPU in a 20 ms window), limit 32, 200 hand-offs (5 ms of
        // hand-off CPU at 25 µs each: 12.5 % of the CPU), read exactly. Inputs, not
        // measurements: the time-free controller is given them.
        let run = |waiting: Option<u32>, grants: u32, late_ms: u64| {
            let mut c = LimitController::new(2, 2, 64);
            c.decide(32, 0, Some(0));
            c.observe_queue();
            for i in 0..grants {
                c.observe_grant(if i % 2 == 0 { late_ms * MS } else { 0 });
            }
            if let Some(n) = waiting {
                c.observe_waiting(n);
            }
            (c.decide(32, 20 * MS, Some(40 * MS)), c.reasons())
        };
        // 20 waiting, all prompt: admit them all.
        let (d, r) = run(Some(20), 200, 0);
        assert_eq!(d, Decision::Raise(52));
        assert_eq!((r.drain, r.busy), (1, 0));
        // At most doubling: a queue up to twice the limit is admitted over two windows.
        assert_eq!(run(Some(32), 200, 0).0, Decision::Raise(64));
        assert_eq!(run(Some(40), 200, 0).0, Decision::Raise(64));
        assert_eq!(run(Some(64), 200, 0).0, Decision::Raise(64));
        // A queue longer than twice the limit: the CPUs are the bottleneck, decay as before.
        assert_eq!(run(Some(65), 200, 0).0, Decision::Cut(31));
        // Late grants: the CPUs are oversubscribed, cut.
        assert_eq!(run(Some(20), 200, 5).0, Decision::Cut(24));
        // Hand-offs too few to matter (10: 0.6 % of the CPU).
        assert_eq!(run(Some(20), 10, 0).0, Decision::Cut(31));
        // Nobody waiting, or not known: nothing to admit.
        assert_eq!(run(Some(0), 200, 0).0, Decision::Cut(31));
        assert_eq!(run(None, 200, 0).0, Decision::Cut(31));
        // The most that waited at once in the window counts, not the last count.
        let mut c = LimitController::new(2, 2, 64);
        c.decide(32, 0, Some(0));
        c.observe_queue();
        for _ in 0..200 {
            c.observe_grant(0);
        }
        c.observe_waiting(70);
        c.observe_waiting(10);
        assert_eq!(c.decide(32, 20 * MS, Some(40 * MS)), Decision::Cut(31));
    }

    /// One 20 ms window with threads queued on a 2-CPU controller, whose CPU use over the
    /// window is `u` (exact readings); returns the decision.
    fn window_at(c: &mut LimitController, t: &mut (u64, u64), limit: u32, u: f64) -> Decision {
        t.0 += 20 * MS;
        t.1 += (40.0 * u * MS as f64) as u64;
        c.observe_queue();
        c.decide(limit, t.0, Some(t.1))
    }

    /// From a limit of 2, windows at a CPU use of 0.5 whatever the limit (a fixed share)
    /// until the run of idle raises is undone; asserts it was counted as fruitless and
    /// returns the limit it went back to.
    fn undo_a_fixed_share_run(c: &mut LimitController, t: &mut (u64, u64)) -> u32 {
        c.decide(2, 0, Some(0));
        let mut limit = 2;
        let back = loop {
            match window_at(c, t, limit, 0.5) {
                Decision::Raise(n) => limit = n,
                Decision::Hold => {}
                Decision::Cut(n) => break n,
            }
        };
        assert_eq!(c.reasons().fruitless, 1);
        back
    }

    /// From a limit of 2 on 2 CPUs, windows whose CPU use is `u_at(limit)` until the
    /// controller holds (at most 50); no window may cut. Returns the limit it holds, having
    /// asserted that no raise was judged fruitless.
    fn ramp(u_at: impl Fn(u32) -> f64) -> u32 {
        let mut c = LimitController::new(2, 2, 1000);
        let mut t = (0, 0);
        c.decide(2, 0, Some(0));
        let mut limit = 2;
        for _ in 0..50 {
            match window_at(&mut c, &mut t, limit, u_at(limit).min(0.965)) {
                Decision::Raise(n) => limit = n,
                Decision::Hold => break,
                Decision::Cut(n) => panic!("cut to {n} at a limit of {limit}"),
            }
        }
        assert_eq!(c.reasons().fruitless, 0);
        limit
    }

    #[test]
    fn idle_raises_that_leave_the_cpu_use_where_it_was_are_undone_and_probed_again_later() {
        // The process gets half the CPUs however many threads it runs (another process's
        // share): the CPU use stays at 0.5 whatever the limit. The controller is time-free:
        // its clock is the windows it is fed (`window_at`, 20 ms each), so its moves are
        // listed by window number, not measured.
        let mut c = LimitController::new(2, 2, 1000);
        let mut t = (0, 0);
        c.decide(2, 0, Some(0));
        let mut limit = 2;
        let mut moves = Vec::new();
        for window in 1..=250 {
            match window_at(&mut c, &mut t, limit, 0.5) {
                Decision::Hold => {}
                Decision::Raise(n) | Decision::Cut(n) => {
                    moves.push((window, n));
                    limit = n;
                }
            }
        }
        // A run of raises to at least twice the limit, found fruitless on two readings in a
        // row (window 3 holds) and undone in window 4; the next run 50 windows later (the
        // 1 s back-off), the one after that 100 windows later (the back-off doubles).
        assert_eq!(
            moves,
            [
                (1, 3),
                (2, 4),
                (4, 2),
                (54, 3),
                (55, 4),
                (57, 2),
                (157, 3),
                (158, 4),
                (160, 2),
            ]
        );
        let r = c.reasons();
        assert_eq!((r.idle_cpu, r.fruitless), (6, 3));
        assert_eq!(r.moves(), c.raises() + c.cuts());
        assert!(limit <= 4, "the limit never ran away: {limit}");
    }

    /// Feeds `c` windows of 20 ms in which nobody queued and two long statements held slots,
    /// with the CPUs `u` busy, from a limit of `limit`, each ended by `decide_unqueued`; returns
    /// the limits it cut to. Synthetic times and readings, no clock.
    fn unqueued_windows(c: &mut LimitController, limit: u32, u: f64, n: usize) -> Vec<u32> {
        let mut t = (0, 0);
        c.decide(limit, 0, Some(0));
        let mut limit = limit;
        let mut cuts = Vec::new();
        for _ in 0..n {
            c.observe_long_holders(2, true);
            t.0 += 20 * MS;
            t.1 += (40.0 * u * MS as f64) as u64;
            match c.decide_unqueued(limit, t.0, Some(t.1)) {
                Decision::Cut(n) => {
                    cuts.push(n);
                    limit = n;
                }
                Decision::Hold => {}
                Decision::Raise(n) => panic!("raised to {n} with nobody queued"),
            }
        }
        cuts
    }

    #[test]
    fn with_nobody_queued_busy_cpus_halve_the_limit_to_the_resting_floor_not_to_a_lane_below_it() {
        // 2 CPUs, two long statements (the lane: 3 slots), a limit of 32 that nobody queues
        // at: halved window by window down to the resting floor (4), not the lane: below it
        // the ordinary rules take over, with the queue the cut brings.
        let mut c = LimitController::new(2, 2, 1000);
        let cuts = unqueued_windows(&mut c, 32, 1.0, 20);
        assert_eq!(cuts, [16, 8, 4]);
        let r = c.reasons();
        assert_eq!(
            (r.busy, r.lane_cut, r.windows),
            (3, 0, 0),
            "no window with a queue"
        );
        assert_eq!(r.moves(), c.raises() + c.cuts());
        // Three quarters busy (less than a CPU's worth idle, but not every CPU): nothing.
        // Long statements that wait need their slots to keep the CPUs that busy.
        let mut c = LimitController::new(2, 2, 1000);
        assert_eq!(unqueued_windows(&mut c, 8, 0.75, 20), []);
    }

    #[test]
    fn with_nobody_queued_and_no_long_statement_known_busy_cpus_cut_towards_the_resting_floor() {
        // Every session inside, the CPUs busy, nothing known of long statements: no rule can
        // ask for more than the resting floor (4 on 2 CPUs).
        let mut c = LimitController::new(2, 2, 1000);
        c.decide(32, 0, Some(0));
        let mut limit = 32;
        let mut cuts = Vec::new();
        for w in 1..=20 {
            match c.decide_unqueued(limit, w * 20 * MS, Some(w * 40 * MS)) {
                Decision::Cut(n) => {
                    cuts.push(n);
                    limit = n;
                }
                Decision::Hold => {}
                Decision::Raise(n) => panic!("raised to {n} with nobody queued"),
            }
        }
        assert_eq!(cuts, [16, 8, 4]);
        assert_eq!(c.reasons().busy, 3);
        // With the CPU clock's lag (4 ms per other CPU) one 20 ms window cannot tell 1.0
        // from under 0.95: the reading goes on, and the second window decides.
        let mut c = LimitController::new(2, 2, 1000).with_cpu_lag(Duration::from_millis(4));
        c.decide(32, 0, Some(0));
        assert_eq!(
            c.decide_unqueued(32, 20 * MS, Some(40 * MS)),
            Decision::Hold
        );
        assert_eq!(c.reasons().deferred, 1);
        assert_eq!(
            c.decide_unqueued(32, 40 * MS, Some(80 * MS)),
            Decision::Cut(16)
        );
        // Under 95 % busy (holders that wait): nothing.
        let mut c = LimitController::new(2, 2, 1000);
        c.decide(32, 0, Some(0));
        for w in 1..=20 {
            let cpu = w * 20 * MS * 2 * 9 / 10;
            assert_eq!(
                c.decide_unqueued(32, w * 20 * MS, Some(cpu)),
                Decision::Hold
            );
        }
    }

    #[test]
    fn with_nobody_queued_a_cpus_worth_idle_leaves_the_limit_and_a_stale_reading_starts_over() {
        // Long statements that wait (a CPU's worth idle): their slots are not what the CPUs
        // are short of.
        let mut c = LimitController::new(2, 2, 1000);
        assert_eq!(unqueued_windows(&mut c, 32, 0.25, 20), []);
        assert_eq!(c.reasons().moves(), 0);
        // A reading begun long ago (the last decision, before nobody queued) only starts a
        // new one, whatever it read.
        let mut c = LimitController::new(2, 2, 1000);
        c.decide(32, 0, Some(0));
        c.observe_long_holders(2, true);
        c.decide_unqueued(32, 20 * MS, Some(40 * MS));
        c.observe_long_holders(2, true);
        let late = 20 * MS + MAX_READING.as_nanos() as u64 + 1;
        assert_eq!(c.decide_unqueued(32, late, Some(late * 2)), Decision::Hold);
        c.observe_long_holders(2, true);
        assert_eq!(
            c.decide_unqueued(32, late + 20 * MS, Some(late * 2 + 40 * MS)),
            Decision::Cut(16)
        );
    }

    #[test]
    fn a_cut_with_nobody_queued_that_hand_offs_raise_back_makes_the_next_ones_wait() {
        // Busy CPUs spent on hand-offs (1,000 grants in a 20 ms window, 40 µs of CPU each):
        // the hand-off rule raises. `t` is (time, CPU time), synthetic.
        fn handoff_raise(c: &mut LimitController, t: &mut (u64, u64), limit: u32) -> u32 {
            t.0 += 20 * MS;
            t.1 += 40 * MS;
            c.observe_queue();
            for _ in 0..1000 {
                c.observe_grant(0);
            }
            match c.decide(limit, t.0, Some(t.1)) {
                Decision::Raise(n) => n,
                other => panic!("the hand-off rule raises: {other:?}"),
            }
        }
        fn unqueued_busy(c: &mut LimitController, t: &mut (u64, u64), limit: u32) -> Decision {
            t.0 += 20 * MS;
            t.1 += 40 * MS;
            c.decide_unqueued(limit, t.0, Some(t.1))
        }
        let mut c = LimitController::new(2, 2, 1000);
        let mut t = (0, 0);
        c.decide(16, 0, Some(0));
        assert_eq!(unqueued_busy(&mut c, &mut t, 16), Decision::Cut(8));
        let limit = handoff_raise(&mut c, &mut t, 8);
        let raised_at = t.0;
        // Cuts with nobody queued now wait a second from the raise, however busy the CPUs.
        while t.0 + 20 * MS < raised_at + FRUITLESS_BACKOFF.as_nanos() as u64 {
            assert_eq!(unqueued_busy(&mut c, &mut t, limit), Decision::Hold);
        }
        // Each check during the wait began a reading: the first after it decides.
        let Decision::Cut(n) = unqueued_busy(&mut c, &mut t, limit) else {
            panic!("cut again after the wait");
        };
        // Paid back again at once: the wait doubles.
        let limit = handoff_raise(&mut c, &mut t, n);
        let raised_at = t.0;
        while t.0 + 20 * MS < raised_at + 2 * FRUITLESS_BACKOFF.as_nanos() as u64 {
            assert_eq!(unqueued_busy(&mut c, &mut t, limit), Decision::Hold);
        }
        assert!(matches!(
            unqueued_busy(&mut c, &mut t, limit),
            Decision::Cut(_)
        ));
        assert_eq!(c.reasons().busy, 3);

        // An idle raise after such a cut is not a pay-back (the fruitless rule judges idle
        // raises): the next cut does not wait.
        let mut c = LimitController::new(2, 2, 1000);
        let mut t = (0, 0);
        c.decide(16, 0, Some(0));
        assert_eq!(unqueued_busy(&mut c, &mut t, 16), Decision::Cut(8));
        t = (t.0 + 20 * MS, t.1 + 20 * MS);
        c.observe_queue();
        let Decision::Raise(limit) = c.decide(8, t.0, Some(t.1)) else {
            panic!("the idle rule raises");
        };
        assert_eq!(
            unqueued_busy(&mut c, &mut t, limit),
            Decision::Cut((limit / 2).max(4))
        );
    }

    #[test]
    fn a_window_stretched_by_a_costly_reading_is_decided_without_a_queue_too() {
        // A reading that costs 3 ms stretches the window to the longest reading (200 ms):
        // a reading one window long is not stale.
        let mut c = LimitController::new(2, 2, 1000);
        c.set_reading_cost(3 * MS);
        assert_eq!(c.window_ns(), MAX_READING.as_nanos() as u64);
        c.decide(32, 0, Some(0));
        let t = MAX_READING.as_nanos() as u64 + 10 * MS;
        assert_eq!(c.decide_unqueued(32, t, Some(2 * t)), Decision::Cut(16));
    }

    #[test]
    fn a_window_in_which_threads_queued_is_decided_by_the_ordinary_rules_even_if_none_is_now() {
        // CPUs idle with threads queued earlier in the window: the idle rule raises, as a
        // grant at the window's end would have had it.
        let mut c = LimitController::new(2, 2, 1000);
        c.decide(4, 0, Some(0));
        c.observe_queue();
        assert!(matches!(
            c.decide_unqueued(4, 20 * MS, Some(10 * MS)),
            Decision::Raise(_)
        ));
        assert_eq!(c.reasons().idle_cpu, 1);
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
    fn with_nobody_queued_the_long_statements_still_holding_slots_keep_their_lane() {
        // 9 holders on 2 CPUs at a limit of 32, 8 of them long statements (marked while
        // threads queued, earlier): with nobody queued now the limit is halved down to their
        // lane, 9, not to the resting floor of 4.
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
        assert_eq!(core.limit(), 9);
        let r = core.gauges().limit_reasons;
        assert_eq!((r.lane_cut, r.busy), (2, 0), "32 -> 16 -> 9");
        for a in holds {
            let _ = core.exit(a.hold, || t);
        }
    }

    #[test]
    fn cpus_that_other_processes_keep_busy_are_not_read_as_idle_and_no_idle_raise_follows() {
        // Two CPU-bound processes in sessions of their own take two thirds of the 2 CPUs:
        // the process uses 0.33 of them whatever its limit. Without an estimate of what the
        // others take, that reads as idle CPUs and the limit is raised at once.
        let mut blind = LimitController::new(2, 2, 1000);
        let mut t = (0, 0);
        blind.decide(4, 0, Some(0));
        assert!(matches!(
            window_at(&mut blind, &mut t, 4, 0.33),
            Decision::Raise(_)
        ));
        assert_eq!(blind.reasons().idle_cpu, 1);
        assert_eq!(blind.cpus_available_milli(), None);
        // Told that the others left it 0.67 CPUs, the same use is every CPU it could have:
        // no idle raise, window after window; the limit stays where the other rules put it.
        let mut told = LimitController::new(2, 2, 1000);
        told.set_cpus_available(Some(0.67));
        assert_eq!(told.cpus_available_milli(), Some(670));
        let mut t = (0, 0);
        told.decide(4, 0, Some(0));
        for _ in 0..100 {
            assert!(!matches!(
                window_at(&mut told, &mut t, 4, 0.33),
                Decision::Raise(_)
            ));
        }
        let r = told.reasons();
        assert_eq!((r.idle_cpu, r.fruitless), (0, 0));
        // The CPUs it is told of are read within its own count and never as none at all.
        told.set_cpus_available(Some(16.0));
        assert_eq!(told.cpus_available_milli(), Some(2000));
        told.set_cpus_available(Some(0.0));
        assert_eq!(
            told.cpus_available_milli(),
            Some((MIN_CPUS_AVAILABLE * 1000.0) as u32)
        );
        told.set_cpus_available(Some(f64::NAN));
        assert_eq!(told.cpus_available_milli(), None);
    }

    #[test]
    fn idle_cpus_that_other_processes_leave_still_raise_the_limit() {
        // Others take one of the 2 CPUs; the process uses a quarter of the other (its slot
        // holders wait where nobody declared it): the CPUs it could use are idle, and the
        // idle rule raises as it would on a machine of its own.
        let mut c = LimitController::new(2, 2, 1000);
        c.set_cpus_available(Some(1.0));
        let mut t = (0, 0);
        c.decide(4, 0, Some(0));
        assert!(matches!(
            window_at(&mut c, &mut t, 4, 0.125),
            Decision::Raise(_)
        ));
        assert_eq!(c.reasons().idle_cpu, 1);
    }

    #[test]
    fn idle_raises_that_raise_the_cpu_use_go_on_to_the_target() {
        // Slot holders wait where nobody declared it: each slot keeps 15 % of the 2 CPUs
        // busy, so more slots are more CPU use, up to every CPU. Held once the CPU use
        // reached the dead band (0.15 × 7 = 1.05, read as 0.965).
        assert_eq!(ramp(|l| 0.15 * l as f64), 7);
    }

    #[test]
    fn idle_raises_for_waits_that_use_little_cpu_go_on_while_the_cpu_use_grows_with_them() {
        // Slot holders sleep most of their time (I/O nobody declared): each slot keeps 2 %
        // of the CPUs busy. The CPU use stays far from the target but doubles with the
        // slots, so the raises go on, until the dead band (0.02 × 48 = 0.96).
        assert_eq!(ramp(|l| 0.02 * l as f64), 48);
    }

    #[test]
    fn idle_raises_go_on_where_a_fixed_part_of_the_cpu_use_does_not_grow_with_the_slots() {
        // `bench gate --block-us 200`'s CPU use at fixed limits on the 2-core VM: 0.13, 0.18,
        // 0.28, 0.48 and 0.89 at 2, 4, 8, 16 and 32 (docs/results/auto), about 0.08 + 0.025
        // per slot: a part that does not grow with the slots. Held in the dead band:
        // 0.08 + 0.025 × 35 = 0.955.
        assert_eq!(ramp(|l| 0.08 + 0.025 * l as f64), 35);
    }

    #[test]
    fn one_reading_that_looks_fruitless_only_holds_and_the_next_decides() {
        let mut c = LimitController::new(2, 2, 1000);
        let mut t = (0, 0);
        c.decide(2, 0, Some(0));
        // 0.3 at a limit of 2: raised to 4 (doubling).
        assert_eq!(window_at(&mut c, &mut t, 2, 0.3), Decision::Raise(4));
        // A noisy 0.3 at 4: the run looks fruitless; hold and read again.
        assert_eq!(window_at(&mut c, &mut t, 4, 0.3), Decision::Hold);
        // 0.6: the slots paid off after all; the raises go on.
        assert!(matches!(
            window_at(&mut c, &mut t, 4, 0.6),
            Decision::Raise(n) if n > 4
        ));
        assert_eq!(c.reasons().fruitless, 0);
    }

    #[test]
    fn a_stall_raises_even_while_idle_raises_wait_after_fruitless_ones() {
        let (mut c, mut t) = (LimitController::new(2, 2, 1000), (0, 0));
        assert_eq!(undo_a_fixed_share_run(&mut c, &mut t), 2);
        // Waiting: the idle rule holds ...
        assert_eq!(window_at(&mut c, &mut t, 2, 0.5), Decision::Hold);
        // ... but a waiter that saw no slot move for a stall period gets a raise.
        c.observe_stall();
        t.0 += 20 * MS;
        t.1 += 20 * MS;
        assert_eq!(c.decide(2, t.0, Some(t.1)), Decision::Raise(3));
    }

    #[test]
    fn a_reading_spent_on_hand_offs_raises_even_while_idle_raises_wait_after_fruitless_ones() {
        // 2,000 hand-offs in a 20 ms window at half of 2 CPUs: 10 µs of CPU each.
        let handoffs = |c: &mut LimitController| {
            for _ in 0..2000 {
                c.observe_grant(0);
            }
        };
        // Not waiting: the CPUs surely idle, the idle rule decides (and may double).
        let (mut c, mut t) = (LimitController::new(2, 2, 1000), (0, 0));
        c.decide(2, 0, Some(0));
        handoffs(&mut c);
        assert_eq!(window_at(&mut c, &mut t, 2, 0.5), Decision::Raise(3));
        assert_eq!((c.reasons().idle_cpu, c.reasons().handoff), (1, 0));
        // Waiting after a fruitless run: a reading without hand-offs holds ...
        let (mut c, mut t) = (LimitController::new(2, 2, 1000), (0, 0));
        let limit = undo_a_fixed_share_run(&mut c, &mut t);
        assert_eq!(window_at(&mut c, &mut t, limit, 0.5), Decision::Hold);
        // ... and one whose CPU went to hand-offs raises by a quarter (at least 1), the
        // wait going on for the idle rule.
        handoffs(&mut c);
        assert_eq!(window_at(&mut c, &mut t, limit, 0.5), Decision::Raise(3));
        assert_eq!(c.reasons().handoff, 1);
        assert_eq!(window_at(&mut c, &mut t, 3, 0.5), Decision::Hold);
        // However long it goes on, no further than FRUITLESS_AFTER × where the fruitless run
        // began (2): a thousand clients' hand-offs would otherwise raise it to the maximum.
        let mut limit = 3;
        for _ in 0..40 {
            handoffs(&mut c);
            if let Decision::Raise(n) = window_at(&mut c, &mut t, limit, 0.5) {
                limit = n;
            }
        }
        assert_eq!(limit, 2 * FRUITLESS_AFTER);
        // The wait ends and the idle rule probes again from there, in vain: back to 4, and
        // the cap stays where the first fruitless run put it (it does not double per probe).
        let mut undone_to = Vec::new();
        for _ in 0..400 {
            handoffs(&mut c);
            match window_at(&mut c, &mut t, limit, 0.5) {
                Decision::Raise(n) => limit = n,
                Decision::Cut(n) => {
                    limit = n;
                    undone_to.push(n);
                }
                Decision::Hold => {}
            }
        }
        // Each later probe (idle raises past the cap, judged) went back to at most the cap,
        // and the hand-off raises in its wait did not pass it.
        assert!(!undone_to.is_empty(), "{:?}", c.reasons());
        assert!(
            undone_to.iter().all(|&n| n <= 2 * FRUITLESS_AFTER),
            "{undone_to:?}"
        );
        assert!(c.reasons().fruitless >= 2, "{:?}", c.reasons());
    }

    #[test]
    fn a_reading_with_the_cpus_in_use_ends_the_wait_after_fruitless_raises() {
        let (mut c, mut t) = (LimitController::new(2, 2, 1000), (0, 0));
        let limit = undo_a_fixed_share_run(&mut c, &mut t);
        assert_eq!(window_at(&mut c, &mut t, limit, 0.5), Decision::Hold);
        // The CPUs busy (the other process stopped): back to the resting floor ...
        assert_eq!(window_at(&mut c, &mut t, limit, 0.96), Decision::Raise(4));
        // ... and idle CPUs afterwards are the process's own to fill: raised at once.
        assert_eq!(window_at(&mut c, &mut t, 4, 0.5), Decision::Raise(5));
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
