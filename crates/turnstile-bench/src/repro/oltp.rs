//! Seed 001: sysbench's classic read-only transaction against client threads, for the seed's
//! FIFO (`classic`: MySQL 5.0.84's defaults, limit 32, 500 tickets, 10 ms sleep) and FLIFO
//! (limit 16, tickets 500, sleep delay 0) configurations, `polling`, `timer` and `unlimited`.
//!
//! One transaction: 10 point selects `SELECT c FROM sbtest WHERE id=?`, one simple range
//! `… WHERE id BETWEEN ? AND ?`, one `SUM(k)` over a range, one range `ORDER BY c`, and one
//! `DISTINCT c` range `ORDER BY c`; ranges of `range` rows starting uniformly in
//! [1, rows − range + 1]. Sorting happens after the cursor's statement, outside the gate.
//!
//! The server layer is part of the setting ([`RowSend`]): the seed ran 5.0.84, whose server
//! force-exits the gate before each row sent to the client, so the simple range's `range` rows
//! are `range` + 1 admissions ([`RowSend::ForceExit`], the default here for every setting, so
//! that the policies are compared on one server); [`RowSend::Keep`] is 5.5 and later.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy};
pub use turnstile_engine::RowSend;
use turnstile_engine::{Connection, Engine};

use super::{join_all, stopped, Common, Progress, ReproError};
use crate::rusage::Usage;
use crate::start::StartLine;
use crate::stats::{jain, median, quantile_sorted, starved};

/// The table.
pub const TABLE: &str = "sbtest1";

/// Statements per transaction: 10 point selects and 4 ranges.
pub const STATEMENTS_PER_TXN: u32 = 14;
/// Point selects per transaction.
pub const POINT_SELECTS: u32 = 10;

/// One gate configuration of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct GateSetting {
    /// A label for the report: the setting's name (`auto@L` for `auto` with a fixed limit).
    pub name: String,
    /// Policy.
    #[serde(serialize_with = "ser_policy")]
    pub policy: Policy,
    /// Limit.
    pub limit: u32,
    /// Tickets.
    pub tickets: u32,
    /// Sleep delay, µs.
    pub sleep_delay_us: u64,
    /// What the server layer does with the slot for each row sent to the client.
    #[serde(serialize_with = "ser_row_send")]
    pub row_send: RowSend,
    /// `auto` with its limit held at `limit` instead of adapting (`auto@L`): a point of the
    /// fixed-limit sweep that `auto`'s own limit is judged against.
    pub fixed_limit: bool,
}

fn ser_row_send<S: serde::Serializer>(r: &RowSend, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.name())
}

pub(crate) fn ser_policy<S: serde::Serializer>(p: &Policy, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

impl GateSetting {
    /// The seed's two configurations as the seed ran them, and the other policies on the same
    /// server. `classic`: "FIFO: limit 32, default tickets" on MySQL 5.0.84, whose default
    /// `innodb_concurrency_tickets` is 500 (5.5 raised it to 5000) and whose
    /// `innodb_thread_sleep_delay` is 10 ms; `flifo`: limit 16, tickets 500, sleep delay 0;
    /// `polling` and `timer` run the classic setting, `unlimited` its tickets. All send rows
    /// with [`RowSend::ForceExit`], as 5.0 does.
    pub fn seed_settings() -> Vec<GateSetting> {
        let classic = GateSetting {
            name: "classic".into(),
            policy: Policy::Classic,
            limit: 32,
            tickets: 500,
            sleep_delay_us: 10_000,
            row_send: RowSend::ForceExit,
            fixed_limit: false,
        };
        vec![
            classic.clone(),
            GateSetting {
                name: "flifo".into(),
                policy: Policy::Flifo,
                limit: 16,
                tickets: 500,
                sleep_delay_us: 0,
                row_send: RowSend::ForceExit,
                fixed_limit: false,
            },
            GateSetting {
                name: "polling".into(),
                policy: Policy::Polling,
                ..classic.clone()
            },
            GateSetting {
                name: "timer".into(),
                policy: Policy::Timer,
                ..classic.clone()
            },
            GateSetting {
                name: "unlimited".into(),
                policy: Policy::Unlimited,
                limit: 0,
                ..classic.clone()
            },
            // Untuned, on the same server: its limit starts at the CPUs the process may use
            // and adapts; it grants a time quantum, so the tickets shown are unused.
            GateSetting {
                name: "auto".into(),
                policy: Policy::Auto,
                limit: GateConfig::new(Policy::Auto).limit,
                ..classic
            },
        ]
    }

    /// `auto` with its limit fixed at `limit` (named `auto@L`): everything else as `auto`'s.
    pub fn auto_fixed(limit: u32) -> GateSetting {
        GateSetting {
            name: format!("auto@{limit}"),
            limit,
            fixed_limit: true,
            ..GateSetting::seed_settings()
                .pop()
                .expect("the seed settings end with auto")
        }
    }

    /// The setting names [`GateSetting::select`] knows, comma-separated (for errors).
    pub fn names() -> String {
        let mut v: Vec<String> = GateSetting::seed_settings()
            .into_iter()
            .map(|s| s.name)
            .collect();
        v.push(format!(
            "auto@L (auto with its limit fixed at L, 1–{})",
            turnstile::MAX_LIMIT
        ));
        v.join(", ")
    }

    /// The settings named in `names`, in the order given, each sending rows by `row_send`:
    /// the seed settings by name, and `auto@L` for `auto` with its limit fixed at L. An
    /// unknown or repeated name is an error that lists the known ones.
    pub fn select(names: &[String], row_send: RowSend) -> Result<Vec<GateSetting>, String> {
        let all = GateSetting::seed_settings();
        let mut out: Vec<GateSetting> = Vec::new();
        for n in names {
            let n = n.trim();
            let s = match n.strip_prefix("auto@") {
                Some(l) => match l.parse::<u32>() {
                    Ok(l) if (1..=turnstile::MAX_LIMIT).contains(&l) => GateSetting::auto_fixed(l),
                    _ => {
                        return Err(format!(
                            "oltp setting '{n}': the fixed limit after 'auto@' must be a whole \
                             number from 1 to {}",
                            turnstile::MAX_LIMIT
                        ))
                    }
                },
                None => match all.iter().find(|s| s.name == n) {
                    Some(s) => s.clone(),
                    None => {
                        return Err(format!(
                            "unknown oltp setting '{n}': expected one of {}",
                            GateSetting::names()
                        ))
                    }
                },
            };
            if out.iter().any(|o| o.name == s.name) {
                return Err(format!("oltp setting '{n}' is named twice"));
            }
            out.push(GateSetting { row_send, ..s });
        }
        if out.is_empty() {
            return Err(format!(
                "no oltp setting named: expected some of {}",
                GateSetting::names()
            ));
        }
        Ok(out)
    }

    fn gate(&self) -> Result<Gate, ReproError> {
        Ok(Gate::new(self.config())?)
    }

    /// The gate configuration of this setting.
    pub fn config(&self) -> GateConfig {
        let c = GateConfig::new(self.policy).innodb_settings(
            self.limit,
            self.tickets,
            Duration::from_micros(self.sleep_delay_us),
        );
        if self.fixed_limit {
            c.adaptive_limit(false)
        } else {
            c
        }
    }
}

/// Settings.
#[derive(Debug, Clone, Serialize)]
pub struct OltpConfig {
    /// Rows in the table.
    pub rows: u32,
    /// Rows per range.
    pub range: u32,
    /// Client thread counts.
    pub threads: Vec<usize>,
    /// Gate settings.
    pub settings: Vec<GateSetting>,
    /// Measured time per point, after an unmeasured warm-up of a quarter of it
    /// ([`crate::gate::WARMUP_DIVISOR`]).
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Repetitions of the whole sweep (at least 1). Each point reports the repetition with the
    /// median TPS, and every repetition's TPS in [`OltpRun::tps_reps`]. The sweeps run one after
    /// the other, so a drift of the machine during the run spreads over every point alike; within
    /// a sweep, every setting runs at one thread count before any runs at the next.
    pub reps: usize,
    /// After the sweep, pairs of points run back to back for each [`VersusBest`] peak (0: none).
    pub versus_best: usize,
    /// CPU-bound processes, each in a session of its own, running beside the whole run
    /// ([`crate::competing`]): another service's share of the CPUs. 0: none.
    pub competing_processes: u32,
    /// Extra CPU per row fetched, inside the engine's call, in ns
    /// ([`turnstile_engine::EngineConfig::row_work`]): rows as costly as seed 001's (~2500 ns)
    /// instead of this engine's ~150. 0: none.
    pub row_work_ns: u64,
}

impl OltpConfig {
    /// Defaults: 100,000 rows, range 1000, threads 1…1024, 2 s per point (a little over two
    /// minutes of load on two cores, plus a one-time load of the table).
    pub fn full() -> Self {
        OltpConfig {
            rows: 100_000,
            range: 1000,
            threads: crate::gate::DEFAULT_THREADS.to_vec(),
            settings: GateSetting::seed_settings(),
            duration: Duration::from_secs(2),
            reps: 1,
            versus_best: 0,
            competing_processes: 0,
            row_work_ns: 0,
        }
    }

    /// Under a minute: 20,000 rows, threads 1, 4, 16, 64, 256, 0.5 s per point.
    pub fn quick() -> Self {
        OltpConfig {
            rows: 20_000,
            threads: vec![1, 4, 16, 64, 256],
            duration: Duration::from_millis(500),
            ..OltpConfig::full()
        }
    }
}

/// One point.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OltpRun {
    /// Gate setting label ([`GateSetting::name`]).
    pub policy: String,
    /// Client threads.
    pub threads: usize,
    /// Transactions per second. With [`OltpConfig::reps`] > 1, the median repetition's, and
    /// every other figure of this point is that repetition's too.
    pub tps: f64,
    /// Each repetition's TPS, in the order they ran (one entry without `--reps`).
    pub tps_reps: Vec<f64>,
    /// Median transaction response time, ms: over every transaction completed in the measured
    /// window, all clients together (exact, nearest rank; 0 if none completed). Transactions
    /// still running at the window's end are not counted, so where clients starve the
    /// quantiles miss their waits and can fall below `fair_share_ms` (see `window_s`).
    pub p50_ms: f64,
    /// 99th percentile transaction response time, ms (as `p50_ms`).
    pub p99_ms: f64,
    /// 99.9th percentile transaction response time, ms (as `p50_ms`; equal to `max_ms` below
    /// 1000 transactions in the window).
    pub p999_ms: f64,
    /// Longest transaction completed in the window, ms.
    pub max_ms: f64,
    /// The response time a perfectly fair server would give every client at this throughput:
    /// threads ÷ TPS, ms (Little's law for a closed loop with no think time); 0 if nothing
    /// completed. `p99_ms` ÷ `fair_share_ms` is how much worse than fair the tail is.
    pub fair_share_ms: f64,
    /// Clients that completed no transaction in the window. See `window_s`.
    pub starved_clients: usize,
    /// Jain's fairness index over per-client completions in the window: (Σx)² ÷ (n · Σx²), 1 =
    /// perfectly even, 1/n = one client did everything, 0 = nobody completed anything.
    /// See `window_s`.
    pub jain: f64,
    /// The measured window's length, s (the configured duration, plus the time the measuring
    /// thread took to get the CPU back). TPS, the quantiles, `starved_clients` and `jain` all
    /// count the transactions completed between the window's two readings.
    ///
    /// The window is not stretched to suit the thread count: `starved_clients` and `jain` are
    /// only about the gate when the window holds several fair shares (a client of a perfectly
    /// fair server completes `window_s` ÷ `fair_share_ms` transactions in it; at 1024 threads on
    /// two cores that is one every ~0.3–0.7 s, so a 2 s window is a few). The report flags every
    /// point whose window holds fewer than [`MIN_FAIR_SHARES`]; `--seconds` lengthens them.
    pub window_s: f64,
    /// Context switches per second (whole process).
    pub cs_per_s: f64,
    /// Of those, involuntary ones (a thread preempted, `ru_nivcsw`) per second.
    pub preempted_per_s: f64,
    /// User CPU, % of the machine.
    pub cpu_user: f64,
    /// System CPU, % of the machine.
    pub cpu_sys: f64,
    /// The CPU this process left unused, % of the machine: 100 − `cpu_user` − `cpu_sys`
    /// (floored at 0). Not the machine's idle time: another process's use counts here.
    pub cpu_idle: f64,
    /// The setting's row send ([`RowSend::name`]).
    pub row_send: &'static str,
    /// Process context switches in the window ÷ transactions completed in it.
    pub cs_per_txn: f64,
    /// Gate admissions in the window ÷ transactions (ticket re-entries are not admissions).
    pub admissions_per_txn: f64,
    /// Sleeps taken (before queueing, between polls, timer sleeps) ÷ transactions.
    pub sleeps_per_txn: f64,
    /// Waits in the FIFO queue ÷ transactions.
    pub queue_waits_per_txn: f64,
    /// Most sessions declared inside at the end of the interval.
    pub inside_at_end: u32,
    /// Sessions waiting at the end of the interval.
    pub waiting_at_end: usize,
    /// Median hand-off wake-up latency, µs (queue policies): from the hand-off's signal to
    /// the woken thread running.
    pub wake_p50_us: f64,
    /// 99th percentile of the same, µs.
    pub wake_p99_us: f64,
    /// Mean of the same, µs (a heavy tail shows as a mean far above the median).
    pub wake_mean_us: f64,
    /// Where the threads were, on average over the window (sampled every
    /// [`CENSUS_EVERY`]): the simulator's `at_end` census, measured.
    pub census: Census,
    /// The limit in force at the window's end (`auto` moves it).
    pub limit_end: u32,
    /// `auto`: the largest limit its controller set during the point, its warm-up included
    /// (`None` for the other policies).
    pub limit_max: Option<u32>,
    /// `auto`: why its controller moved the limit during the window, window by window
    /// (`None` for the other policies).
    pub limit_reasons: Option<turnstile::LimitReasons>,
}

/// How often [`Census`] samples during a window: 50 samples a second keep the sampler's own
/// cost (one `/proc/stat` read and one gate snapshot, ~0.1 ms with 1024 sessions) under 1 %
/// of a core.
pub const CENSUS_EVERY: Duration = Duration::from_millis(20);

/// Time-mean counts of where the threads were during a window.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Census {
    /// Samples taken.
    pub samples: u32,
    /// Threads runnable or running, machine-wide (`/proc/stat`'s `procs_running`, less the
    /// sampler itself); `None` where `/proc/stat` cannot be read.
    pub runnable: Option<f64>,
    /// Sessions counted inside the gate (the gate's count, granted waiters included).
    pub inside: f64,
    /// Sessions sleeping before joining the queue, or between polls.
    pub sleeping: f64,
    /// Sessions waiting in the queue, not yet granted.
    pub queued: f64,
    /// Sessions granted a slot by a hand-off and not yet running.
    pub woken: f64,
    /// Threads waiting for the gate's own lock (`classic`/`flifo`: InnoDB 5.0's
    /// `srv_conc_mutex`; 0 for the policies without one): the simulator's "on gate mutex".
    pub on_gate_lock: f64,
}

/// `/proc/stat`'s `procs_running`: threads runnable machine-wide now.
fn procs_running() -> Option<u32> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("procs_running "))
        .and_then(|v| v.trim().parse().ok())
}

/// Samples `gate` (and the machine's run queue) every [`CENSUS_EVERY`] until `stop`.
fn census(gate: &turnstile::Gate, stop: &AtomicBool) -> Census {
    use turnstile::SessionState as S;
    let mut c = Census::default();
    let (mut run, mut run_n) = (0.0, 0u32);
    // At least one sample, even when this thread first runs after the window has ended (a
    // loaded machine: on the 2-core VM beside two busy loops, a 50 ms point's sampler got
    // no CPU for the whole 116 ms the window lasted); the clients run until it returns.
    loop {
        thread::sleep(CENSUS_EVERY);
        if let Some(r) = procs_running() {
            // Less this sampler, which is running while it reads.
            run += r.saturating_sub(1) as f64;
            run_n += 1;
        }
        let snap = gate.snapshot();
        c.inside += (snap.inside + snap.lifo_running) as f64;
        c.sleeping += snap.count_in(|s| matches!(s, S::Sleeping | S::Yielding)) as f64;
        c.queued += snap.count_in(|s| s == S::Queued) as f64;
        c.woken += snap.count_in(|s| s == S::Woken) as f64;
        c.on_gate_lock += snap.lock_waiting as f64;
        c.samples += 1;
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let n = c.samples.max(1) as f64;
    c.inside /= n;
    c.sleeping /= n;
    c.queued /= n;
    c.woken /= n;
    c.on_gate_lock /= n;
    c.runnable = (run_n > 0).then(|| run / run_n as f64);
    c
}

/// Fair shares (`fair_share_ms`) a point's window should hold for its `starved_clients` and
/// `jain` to be about the gate rather than the window: a window of one fair share leaves
/// clients at zero even on a perfectly fair server (the ones whose transaction straddles an
/// edge), and with three the expected count per client is 3, so a zero is an outlier rather
/// than the window's phase. Points below it are flagged in the report.
pub const MIN_FAIR_SHARES: f64 = 3.0;

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct OltpReport {
    /// Settings.
    pub config: OltpConfig,
    /// Points.
    pub runs: Vec<OltpRun>,
    /// The same sweep driven by sysbench through `turnstile serve` (`--client sysbench`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sysbench: Option<super::sysbench::SysbenchSweep>,
    /// Adaptive `auto` at [`MANY_CLIENTS`] threads and more against every setting's peak,
    /// side by side ([`OltpConfig::versus_best`] pairs; empty without them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub versus_best: Vec<VersusBest>,
}

/// One adaptive `auto` point at many clients against every setting's peak (each setting's
/// highest median TPS in the sweep, at whatever thread count), measured in pairs run back to
/// back, which of the two first alternating from pair to pair. A shared machine's slow spells
/// last tens of seconds (on the 2-core VM whole 25 s stretches ran ~15 % slow), longer than a
/// pair (two points, ~5 s) and shorter than a sweep, so a sweep's medians can put one point in
/// a fast spell and another in a slow one, and which point is the best of a sweep is then
/// partly chance; a pair's two points share their spell, and the median of the pairs' ratios
/// is a comparison drift cannot tilt. Against every setting's peak, so that the strongest one
/// side by side is found whichever won the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct VersusBest {
    /// The `auto` setting measured.
    pub policy: String,
    /// Its client threads.
    pub threads: usize,
    /// Against each setting's peak, in the sweep's setting order.
    pub against: Vec<Versus>,
    /// The lowest of the `against` medians: this point's TPS over the strongest peak's, side
    /// by side.
    pub ratio: f64,
}

/// One point measured against one peak, in pairs ([`VersusBest`]).
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    /// The peak's setting.
    pub policy: String,
    /// The peak's client threads.
    pub threads: usize,
    /// Each pair's TPS, `[the peak, the point measured]`, pairs in run order.
    pub pairs: Vec<[f64; 2]>,
    /// Each pair's ratio, the point's TPS ÷ the peak's.
    pub ratios: Vec<f64>,
    /// The median of `ratios` (the mean of the middle two for an even count).
    pub ratio_median: f64,
}

/// A small per-thread PRNG (xorshift64*).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32 % n.max(1)
    }
}

/// What one transaction did (for tests of the mix).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TxnShape {
    /// Statements run.
    pub statements: u32,
    /// Rows returned by point selects.
    pub point_rows: u32,
    /// Rows fetched by each of the four ranges.
    pub range_rows: [u32; 4],
}

/// Runs one sysbench read-only transaction: `BEGIN`, the statements, `COMMIT`, as
/// `oltp_read_only` sends them.
pub fn transaction(
    c: &mut Connection,
    rows: u32,
    range: u32,
    rng_state: &mut u64,
) -> Result<TxnShape, ReproError> {
    let mut rng = Rng(*rng_state);
    let mut shape = TxnShape::default();
    c.begin_transaction()?;
    for _ in 0..POINT_SELECTS {
        let id = 1 + rng.below(rows);
        shape.point_rows += c.point_select(TABLE, id)?.is_some() as u32;
        shape.statements += 1;
    }
    let span = rows.saturating_sub(range) + 1;
    let mut start = || {
        let lo = 1 + rng.below(span);
        (lo, lo + range - 1)
    };
    let (lo, hi) = start();
    // The only statement that sends a row to the client per row fetched.
    shape.range_rows[0] = c.scan_sent(TABLE, lo, hi, |r| {
        std::hint::black_box(r.c);
    })? as u32;
    let (lo, hi) = start();
    let mut sum = 0u64;
    shape.range_rows[1] = c.scan(TABLE, lo, hi, |r| sum += r.k as u64)? as u32;
    std::hint::black_box(sum);
    let (lo, hi) = start();
    shape.range_rows[2] = c.range_sorted_by_c(TABLE, lo, hi, false)?.len() as u32;
    let (lo, hi) = start();
    let mut fetched = 0u32;
    {
        let mut cs = Vec::new();
        fetched += c.scan(TABLE, lo, hi, |r| cs.push(r.c))? as u32;
        cs.sort_unstable();
        cs.dedup();
        std::hint::black_box(cs);
    }
    shape.range_rows[3] = fetched;
    shape.statements += 4;
    c.commit()?;
    *rng_state = rng.0;
    Ok(shape)
}

/// Runs the sweep.
pub fn run(
    common: &Common,
    cfg: &OltpConfig,
    progress: &mut dyn Progress,
) -> Result<OltpReport, ReproError> {
    if cfg.rows < cfg.range || cfg.range == 0 {
        return Err(ReproError::BadInput(format!(
            "oltp: the table ({} rows) must hold at least one range ({} rows), and ranges must be non-empty",
            cfg.rows, cfg.range
        )));
    }
    if cfg.threads.is_empty() || cfg.threads.contains(&0) || cfg.duration.is_zero() {
        return Err(ReproError::BadInput(
            "oltp: thread counts and duration must be positive".into(),
        ));
    }
    let engine = common.open_engine(Duration::ZERO, Duration::from_nanos(cfg.row_work_ns))?;
    progress.step(&format!("oltp: table of {} rows", cfg.rows));
    engine.ensure_table_until(TABLE, cfg.rows, &mut |d, t| progress.load(d, t), &stopped)?;
    // Every row read once, unmeasured, so that the first point does not pay for pages still
    // on disk. Measured on the 2-core VM right after a build had pushed the database file out
    // of the page cache: `auto` × 4 threads, the first point of the run, made 8 TPS over its
    // 0.5 s with the CPUs 95 % idle and 110 context switches a transaction (polling beside
    // it: 1,220 TPS, 44 % idle), and 1,957–2,316 TPS in each of the four runs after it. The
    // transactions read only this table's rows, by id.
    engine.scan_direct(TABLE)?;
    if cfg.reps == 0 {
        return Err(ReproError::BadInput(
            "oltp: repetitions must be at least 1".into(),
        ));
    }
    // Started after the table is loaded, stopped (killed) when the run returns.
    let _competing = if cfg.competing_processes > 0 {
        let c = crate::competing::Competing::start(cfg.competing_processes)
            .map_err(|e| ReproError::BadInput(format!("oltp: competing processes: {e}")))?;
        progress.step(&format!(
            "oltp: {} competing CPU-bound process(es) running, each in its own session (pids {:?})",
            cfg.competing_processes,
            c.pids()
        ));
        Some(c)
    } else {
        None
    };
    // reps[i] holds point i's repetitions, points in setting-major order (the report's order).
    // They run in another: thread count by thread count, every setting one after the other at
    // each, so the settings compared at a thread count ran within seconds of each other. A
    // shared machine's slow spells last tens of seconds (2-core VM: a whole 25 s sweep of one
    // setting ran ~15 % below the next one's, docs/results/auto/oltp-2core-reps3-onclock-2.json);
    // run setting by setting, one spell could sink every point of one setting's repetition.
    let n = cfg.threads.len();
    let mut reps: Vec<Vec<OltpRun>> = (0..cfg.settings.len() * n).map(|_| Vec::new()).collect();
    for rep in 0..cfg.reps {
        let of = if cfg.reps > 1 {
            format!(" (repetition {} of {})", rep + 1, cfg.reps)
        } else {
            String::new()
        };
        for (ti, &t) in cfg.threads.iter().enumerate() {
            for (si, s) in cfg.settings.iter().enumerate() {
                if stopped() {
                    return Err(ReproError::Interrupted);
                }
                progress.step(&format!("oltp: {} × {t} threads{of}", s.name));
                reps[si * n + ti].push(point(&engine, cfg, s, t)?);
            }
        }
    }
    let runs: Vec<OltpRun> = reps.into_iter().map(median_run).collect();
    let versus_best = versus_best(&engine, cfg, &runs, progress)?;
    Ok(OltpReport {
        config: cfg.clone(),
        runs,
        sysbench: None,
        versus_best,
    })
}

/// The points the `--versus-best` pairs ([`OltpConfig::versus_best`]) measure against every
/// setting's peak: every adaptive `auto` setting at each thread count from [`MANY_CLIENTS`],
/// in the sweep's order.
pub fn versus_best_points(cfg: &OltpConfig) -> Vec<(&GateSetting, usize)> {
    cfg.settings
        .iter()
        .filter(|s| s.policy == Policy::Auto && !s.fixed_limit)
        .flat_map(|s| {
            cfg.threads
                .iter()
                .filter(|&&t| t >= MANY_CLIENTS)
                .map(move |&t| (s, t))
        })
        .collect()
}

/// Each setting's peak point of the sweep (its highest median TPS), in setting order.
pub fn peaks(r: &[OltpRun], settings: &[GateSetting]) -> Vec<(String, usize)> {
    settings
        .iter()
        .filter_map(|s| {
            r.iter()
                .filter(|x| x.policy == s.name)
                .max_by(|a, b| a.tps.total_cmp(&b.tps))
                .map(|x| (x.policy.clone(), x.threads))
        })
        .collect()
}

/// Runs [`OltpConfig::versus_best`] pairs for each of [`versus_best_points`] against each
/// setting's peak.
fn versus_best(
    engine: &Arc<Engine>,
    cfg: &OltpConfig,
    runs: &[OltpRun],
    progress: &mut dyn Progress,
) -> Result<Vec<VersusBest>, ReproError> {
    let points = versus_best_points(cfg);
    if cfg.versus_best == 0 || points.is_empty() {
        return Ok(Vec::new());
    }
    let peaks = peaks(runs, &cfg.settings);
    let n = cfg.versus_best;
    let mut out = Vec::new();
    for (s, t) in points {
        let mut against = Vec::new();
        for (peak, peak_threads) in &peaks {
            let peak_setting = cfg
                .settings
                .iter()
                .find(|x| &x.name == peak)
                .expect("a peak's setting is one of the run's");
            let mut pairs = Vec::with_capacity(n);
            for pair in 0..n {
                let mut tps = [0.0; 2];
                // Even pairs run the peak first, odd pairs the point measured.
                for k in [pair % 2, 1 - pair % 2] {
                    if stopped() {
                        return Err(ReproError::Interrupted);
                    }
                    let (set, threads) = if k == 0 {
                        (peak_setting, *peak_threads)
                    } else {
                        (s, t)
                    };
                    progress.step(&format!(
                        "oltp: {} × {t} threads beside {peak} × {peak_threads}, pair {} of {n}: {} × {threads} threads",
                        s.name,
                        pair + 1,
                        set.name
                    ));
                    tps[k] = point(engine, cfg, set, threads)?.tps;
                }
                pairs.push(tps);
            }
            let ratios: Vec<f64> = pairs
                .iter()
                .map(|[b, x]| if *b > 0.0 { x / b } else { 0.0 })
                .collect();
            against.push(Versus {
                policy: peak.clone(),
                threads: *peak_threads,
                ratio_median: median(&ratios),
                pairs,
                ratios,
            });
        }
        out.push(VersusBest {
            policy: s.name.clone(),
            threads: t,
            ratio: against
                .iter()
                .map(|v| v.ratio_median)
                .reduce(f64::min)
                .unwrap_or(0.0),
            against,
        });
    }
    Ok(out)
}

/// The repetition with the median TPS (the lower of the two middle ones for an even count),
/// carrying every repetition's TPS in run order.
fn median_run(mut reps: Vec<OltpRun>) -> OltpRun {
    let tps: Vec<f64> = reps.iter().map(|r| r.tps).collect();
    reps.sort_by(|a, b| a.tps.total_cmp(&b.tps));
    let mut mid = reps.swap_remove((reps.len() - 1) / 2);
    mid.tps_reps = tps;
    mid
}

#[repr(align(128))]
#[derive(Default)]
struct Count(AtomicU64);

fn point(
    engine: &Arc<Engine>,
    cfg: &OltpConfig,
    s: &GateSetting,
    threads: usize,
) -> Result<OltpRun, ReproError> {
    let gate = s.gate()?;
    let _watched = crate::live::watch(format!("oltp/{}/{threads} threads", s.name), &gate);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(StartLine::new(threads));
    let done: Arc<Vec<Count>> = Arc::new((0..threads).map(|_| Count::default()).collect());
    let (rows, range, row_send) = (cfg.rows, cfg.range, s.row_send);
    // Each client keeps the response time of its k-th transaction at index k − 1 of its own
    // vector (no sharing while it runs) and publishes k in `done[i]` after pushing it, so the
    // window's transactions of client i are its entries n0[i]..n1[i] (8 bytes a transaction).
    let hs: Result<Vec<_>, std::io::Error> = (0..threads)
        .map(|i| {
            let (engine, gate, stop, start, done) = (
                engine.clone(),
                gate.clone(),
                stop.clone(),
                start.clone(),
                done.clone(),
            );
            thread::Builder::new().stack_size(512 * 1024).spawn(
                move || -> Result<Vec<u64>, ReproError> {
                    let mut c = Connection::new(engine, &gate, format!("client-{i}"));
                    c.set_row_send(row_send);
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
                    let mut lat = Vec::new();
                    if !start.ready() {
                        return Ok(lat);
                    }
                    while !stop.load(Ordering::Relaxed) && !stopped() {
                        let t = Instant::now();
                        transaction(&mut c, rows, range, &mut rng)?;
                        lat.push(t.elapsed().as_nanos() as u64);
                        done[i].0.store(lat.len() as u64, Ordering::Release);
                    }
                    Ok(lat)
                },
            )
        })
        .collect();
    let hs = match hs {
        Ok(hs) => hs,
        Err(e) => {
            // The clients started so far see the call-off and end.
            start.call_off();
            return Err(ReproError::BadInput(crate::start::refused(threads, &e)));
        }
    };
    start.start();
    // Not measured: the start line releases every client at once, and `auto`'s limit starts
    // at the CPUs and settles over its first windows (`bench gate`'s warm-up, for the same
    // reasons). Measured on the 2-core VM at 1024 threads (`--quick`, points that began at
    // the start line): `auto` 2247 and 3047 TPS in 0.3 s windows against 3110 and 3114 in
    // 2 s ones; classic 408 and 933 against 2180 and 1140.
    thread::sleep(cfg.duration / crate::gate::WARMUP_DIVISOR);
    let read = || -> Vec<u64> { done.iter().map(|d| d.0.load(Ordering::Acquire)).collect() };
    let (t0, u0) = (Instant::now(), Usage::now());
    let n0 = read();
    let snap0 = gate.snapshot();
    let sampling = AtomicBool::new(false);
    let census = thread::scope(|sc| {
        let h = sc.spawn(|| census(&gate, &sampling));
        thread::sleep(cfg.duration);
        sampling.store(true, Ordering::Relaxed);
        h.join().expect("the census sampler does not panic")
    });
    let n1 = read();
    let (elapsed, usage) = (t0.elapsed(), Usage::now().since(&u0));
    let snap = gate.snapshot();
    stop.store(true, Ordering::Relaxed);
    let results = join_all(hs)?;
    if stopped() {
        // Ctrl-C during the window: the clients quit early, so the window's figures would
        // be wrong.
        return Err(ReproError::Interrupted);
    }
    let mut lat = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        lat.extend_from_slice(&r?[n0[i] as usize..n1[i] as usize]);
    }
    lat.sort_unstable();
    let per_client: Vec<u64> = n0.iter().zip(&n1).map(|(a, b)| b - a).collect();
    let secs = elapsed.as_secs_f64();
    let cpus = thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let user = 100.0 * usage.user.as_secs_f64() / secs / cpus;
    let sys = 100.0 * usage.sys.as_secs_f64() / secs / cpus;
    let completed = lat.len() as u64;
    let tps = completed as f64 / secs;
    let ms = |q: f64| quantile_sorted(&lat, q) as f64 / 1e6;
    // Per transaction completed in the window (÷ 1 if none completed).
    let txns = completed.max(1) as f64;
    let (c0, c1) = (&snap0.counters, &snap.counters);
    let wake = snap.wake_latency.since(&snap0.wake_latency);
    Ok(OltpRun {
        policy: s.name.clone(),
        threads,
        tps,
        tps_reps: vec![tps],
        row_send: s.row_send.name(),
        cs_per_txn: usage.context_switches() as f64 / txns,
        admissions_per_txn: c1.admissions.saturating_sub(c0.admissions) as f64 / txns,
        sleeps_per_txn: c1.sleeps.saturating_sub(c0.sleeps) as f64 / txns,
        queue_waits_per_txn: c1.queue_waits.saturating_sub(c0.queue_waits) as f64 / txns,
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        max_ms: ms(1.0),
        fair_share_ms: if tps > 0.0 {
            threads as f64 / tps * 1e3
        } else {
            0.0
        },
        starved_clients: starved(&per_client),
        jain: jain(&per_client),
        window_s: secs,
        cs_per_s: usage.context_switches() as f64 / secs,
        preempted_per_s: usage.involuntary_cs as f64 / secs,
        cpu_user: user,
        cpu_sys: sys,
        cpu_idle: (100.0 - user - sys).max(0.0),
        inside_at_end: snap.inside + snap.lifo_running,
        waiting_at_end: snap.count_in(turnstile::SessionState::is_waiting),
        wake_p50_us: wake.quantile(0.5) as f64 / 1e3,
        wake_p99_us: wake.quantile(0.99) as f64 / 1e3,
        wake_mean_us: wake.mean() / 1e3,
        census,
        limit_end: snap.limit,
        limit_max: snap.auto.map(|a| a.limit_max),
        limit_reasons: match (snap.auto, snap0.auto) {
            (Some(a), Some(b)) => Some(a.limit_reasons.since(&b.limit_reasons)),
            _ => None,
        },
    })
}

/// The engine's own costs for the simulator's OLTP workload, measured on one connection with
/// nothing else running (`turnstile calibrate --oltp FILE`): what `sim oltp` needs to stand
/// for `repro oltp` on the same machine. Field names are `sim oltp --config` keys.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EngineCosts {
    /// Rows per range.
    pub range: u64,
    /// One point select, µs (statement, call, row decode).
    pub point_us: f64,
    /// One row of a range fetched on tickets, µs.
    pub row_us: f64,
    /// The sort (ORDER BY c) of one range's rows after its statement, µs.
    pub sort_us: f64,
    /// One gate call that reaches the policy (an admission or an exit that leaves), µs: half
    /// the extra cost per row of a sent range under `force-exit` over `keep`, on an
    /// uncontended `polling` gate.
    pub gate_call_us: f64,
    /// What a switch between two clients costs this workload, µs: two connections pinned to
    /// one CPU hand the CPU to each other after every row they fetch (each its own range, as
    /// OLTP clients do), against one connection fetching the same rows alone; the difference
    /// per switch (the direct cost, the futex calls, and the refill of what the other client
    /// evicted). `None` off Linux.
    pub switch_us: Option<f64>,
}

/// Measures [`EngineCosts`] on `cfg.rows` rows: `reps` repetitions of each figure, keeping the
/// fastest (the least disturbed by the rest of a shared machine: a cost is a floor, and noise
/// only adds to it), on an uncontended gate of the `polling` setting (limit 32, tickets 500).
pub fn measure_costs(
    common: &Common,
    cfg: &OltpConfig,
    reps: usize,
    progress: &mut dyn Progress,
) -> Result<EngineCosts, ReproError> {
    if cfg.rows < cfg.range || cfg.range == 0 || reps == 0 {
        return Err(ReproError::BadInput(
            "costs: the table must hold a range, and repetitions must be positive".into(),
        ));
    }
    let engine = common.open_engine(Duration::ZERO, Duration::from_nanos(cfg.row_work_ns))?;
    progress.step(&format!("engine costs: table of {} rows", cfg.rows));
    engine.ensure_table(TABLE, cfg.rows, &mut |d, t| progress.load(d, t))?;
    let gate = GateSetting {
        name: "polling".into(),
        policy: Policy::Polling,
        limit: 32,
        tickets: 500,
        sleep_delay_us: 10_000,
        row_send: RowSend::Keep,
        fixed_limit: false,
    }
    .gate()?;
    let mut c = Connection::new(engine.clone(), &gate, "costs");
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let range = cfg.range;
    let span = cfg.rows - range + 1;
    // Enough work per repetition for a stable median on a noisy machine: ~20k rows.
    let ranges = (20_000 / range as usize).max(5);
    let fastest = |v: Vec<f64>| v.into_iter().fold(f64::INFINITY, f64::min);
    let mut timed = |c: &mut Connection,
                     f: &mut dyn FnMut(&mut Connection, &mut Rng) -> Result<(), ReproError>|
     -> Result<f64, ReproError> {
        let mut v = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            f(c, &mut rng)?;
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(fastest(v))
    };
    progress.step("engine costs: point selects, ranges, sorts, forced exits");
    let points = 5_000;
    let point_us = timed(&mut c, &mut |c, rng| {
        for _ in 0..points {
            std::hint::black_box(c.point_select(TABLE, 1 + rng.below(cfg.rows))?);
        }
        Ok(())
    })? / points as f64;
    let scan = |c: &mut Connection, rng: &mut Rng, sent: bool| -> Result<(), ReproError> {
        for _ in 0..ranges {
            let lo = 1 + rng.below(span);
            if sent {
                c.scan_sent(TABLE, lo, lo + range - 1, |r| {
                    std::hint::black_box(r.c);
                })?;
            } else {
                c.scan(TABLE, lo, lo + range - 1, |r| {
                    std::hint::black_box(r.c);
                })?;
            }
        }
        Ok(())
    };
    let scan_us = timed(&mut c, &mut |c, rng| scan(c, rng, false))? / ranges as f64;
    let sorted_us = timed(&mut c, &mut |c, rng| {
        for _ in 0..ranges {
            let lo = 1 + rng.below(span);
            std::hint::black_box(c.range_sorted_by_c(TABLE, lo, lo + range - 1, false)?);
        }
        Ok(())
    })? / ranges as f64;
    c.set_row_send(RowSend::Keep);
    let keep_us = timed(&mut c, &mut |c, rng| scan(c, rng, true))? / ranges as f64;
    c.set_row_send(RowSend::ForceExit);
    let force_us = timed(&mut c, &mut |c, rng| scan(c, rng, true))? / ranges as f64;
    #[cfg(target_os = "linux")]
    let switch_us = {
        progress.step("engine costs: a switch between two clients after every row");
        let v = (0..reps)
            .map(|i| switch_cost_us(&engine, cfg, i as u32))
            .collect::<Result<Vec<_>, _>>()?;
        Some(fastest(v))
    };
    #[cfg(not(target_os = "linux"))]
    let switch_us = None;
    Ok(EngineCosts {
        range: range as u64,
        point_us,
        row_us: scan_us / range as f64,
        sort_us: (sorted_us - scan_us).max(0.0),
        gate_call_us: ((force_us - keep_us) / range as f64 / 2.0).max(0.0),
        switch_us,
    })
}

/// One measurement of [`EngineCosts::switch_us`]: rows per client per run.
#[cfg(target_os = "linux")]
fn switch_cost_us(engine: &Arc<Engine>, cfg: &OltpConfig, rep: u32) -> Result<f64, ReproError> {
    use std::sync::atomic::AtomicU32;

    use crate::machine::{allowed_cpus, give, pin_to, take};

    const ROWS: u32 = 20_000;
    let cpu = *allowed_cpus()
        .map_err(ReproError::BadInput)?
        .last()
        .ok_or_else(|| ReproError::BadInput("no CPU allowed".into()))?;
    let span = cfg.rows - cfg.range + 1;
    let gate = Gate::new(GateConfig::new(Policy::Unlimited))?;
    // Each client scans ROWS rows in ranges of `range` from its own random starts.
    let client = |seed: u64, each: &mut dyn FnMut()| -> Result<(), ReproError> {
        let mut c = Connection::new(engine.clone(), &gate, "switch");
        let mut rng = Rng(seed);
        let mut left = ROWS;
        while left > 0 {
            let lo = 1 + rng.below(span);
            let n = cfg.range.min(left);
            c.scan(TABLE, lo, lo + n - 1, |r| {
                std::hint::black_box(r.c);
                each();
            })?;
            left -= n;
        }
        Ok(())
    };
    let seed = |k: u64| 0x9E37_79B9_7F4A_7C15 ^ (k + 2 * rep as u64 + 1);
    // Alone: one thread pinned to the CPU fetches both clients' rows.
    let alone = thread::scope(|s| {
        s.spawn(|| -> Result<Duration, ReproError> {
            pin_to(cpu).map_err(ReproError::BadInput)?;
            let t = Instant::now();
            client(seed(0), &mut || {})?;
            client(seed(1), &mut || {})?;
            Ok(t.elapsed())
        })
        .join()
        .map_err(|_| ReproError::Panicked("switch-cost thread".into()))?
    })?;
    // Ping-pong: two threads pinned to the CPU hand it over after every row.
    let (to_a, to_b) = (AtomicU32::new(0), AtomicU32::new(0));
    let (done_a, done_b) = (AtomicBool::new(false), AtomicBool::new(false));
    let both = thread::scope(|s| {
        let b = s.spawn(|| -> Result<(), ReproError> {
            pin_to(cpu).map_err(ReproError::BadInput)?;
            take(&to_b);
            client(seed(1), &mut || {
                if !done_a.load(Ordering::Acquire) {
                    give(&to_a);
                    take(&to_b);
                }
            })?;
            done_b.store(true, Ordering::Release);
            give(&to_a);
            Ok(())
        });
        let a = s.spawn(|| -> Result<Duration, ReproError> {
            pin_to(cpu).map_err(ReproError::BadInput)?;
            let t = Instant::now();
            client(seed(0), &mut || {
                if !done_b.load(Ordering::Acquire) {
                    give(&to_b);
                    take(&to_a);
                }
            })?;
            done_a.store(true, Ordering::Release);
            give(&to_b);
            // Wait for B to finish its rows (it runs alone from here).
            while !done_b.load(Ordering::Acquire) {
                take(&to_a);
            }
            Ok(t.elapsed())
        });
        let ra = a
            .join()
            .map_err(|_| ReproError::Panicked("switch-cost thread".into()))?;
        b.join()
            .map_err(|_| ReproError::Panicked("switch-cost thread".into()))??;
        ra
    })?;
    let switches = 2.0 * ROWS as f64;
    Ok(((both.as_secs_f64() - alone.as_secs_f64()) * 1e6 / switches).max(0.0))
}

/// The seed's TPS at its eleven thread counts (1…1024): (FLIFO, FIFO).
pub const SEED_TPS: [(f64, f64); 11] = [
    (186.22, 180.95),
    (342.65, 335.37),
    (570.79, 516.97),
    (707.82, 645.86),
    (718.84, 625.14),
    (665.60, 648.88),
    (574.96, 658.71),
    (590.33, 579.59),
    (611.15, 515.26),
    (612.69, 431.97),
    (637.37, 255.04),
];

/// The seed's context switches per transaction at its highest thread count (vmstat cs/s ÷
/// TPS): (FLIFO 66,694 / 637, FIFO 238,890 / 255).
pub const SEED_CS_PER_TXN: (f64, f64) = (66_694.0 / 637.37, 238_890.0 / 255.04);

/// How the report's settings send rows: "force-exit", or each setting's when they differ.
fn row_send_summary(r: &OltpReport) -> String {
    let mut names: Vec<&str> = r
        .config
        .settings
        .iter()
        .map(|s| s.row_send.name())
        .collect();
    names.dedup();
    if names.len() == 1 {
        return names[0].to_string();
    }
    r.config
        .settings
        .iter()
        .map(|s| format!("{} {}", s.name, s.row_send.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Markdown section.
pub fn markdown(r: &OltpReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Seed 001 — OLTP read-only, TPS against client threads\n\n{} rows, range {}, {} ms per point. \
         Row send: **{}** (force-exit: MySQL 5.0/5.1 leave the gate before every row sent to the client, \
         so each row of the simple range is an admission; keep: 5.5+). Settings: {}. \
         Seed (8 cores, 2M rows, MySQL 5.0.84): FLIFO holds 590–720 TPS past its peak; FIFO falls from 659 to 255 at the highest thread count; \
         ~67k context switches/s (FLIFO) vs ~239k/s (FIFO).\n",
        r.config.rows,
        r.config.range,
        r.config.duration.as_millis(),
        row_send_summary(r),
        r.config
            .settings
            .iter()
            .map(|g| format!(
                "{} (limit {}, {} tickets, sleep {} ms)",
                g.name,
                g.limit,
                g.tickets,
                g.sleep_delay_us as f64 / 1000.0
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "Seed context switches per transaction at 1024 threads (vmstat cs/s ÷ TPS): FIFO {:.0}, FLIFO {:.0}.\n",
        SEED_CS_PER_TXN.1, SEED_CS_PER_TXN.0
    );
    if r.config.competing_processes > 0 {
        let _ = writeln!(
            s,
            "**Shared machine:** {} CPU-bound process(es) ran beside the whole run, each in a session \
             of its own (the kernel gives each session its own share of the CPUs, as a service \
             manager gives each service one).\n",
            r.config.competing_processes
        );
    }
    if r.config.row_work_ns > 0 {
        let _ = writeln!(
            s,
            "**Row work:** {} ns of CPU added inside the engine for every row fetched (seed 001's \
             rows cost ~2500 ns, this engine's ~150).\n",
            r.config.row_work_ns
        );
    }
    if r.config.reps > 1 {
        let _ = writeln!(
            s,
            "Every point is the repetition with the median TPS of {} sweeps run one after the \
             other, each running every setting at a thread count before the next thread count \
             (TPS column: median, then the lowest and highest repetition); its other figures \
             are that repetition's.\n",
            r.config.reps
        );
    }
    let _ = writeln!(
        s,
        "| setting | row send | threads | TPS | p50 ms | p99 ms | cs/s | cs/txn | admissions/txn | sleeps/txn | queue waits/txn | usr % | sys % | idle % | wake p50 / p99 / mean µs | seed TPS (FLIFO / FIFO) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for x in &r.runs {
        let seed = crate::gate::DEFAULT_THREADS
            .iter()
            .position(|&t| t == x.threads)
            .map_or("".to_string(), |i| {
                format!("{:.0} / {:.0}", SEED_TPS[i].0, SEED_TPS[i].1)
            });
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.0} | {:.2} | {:.1} | {:.2} | {:.2} | {:.0} | {:.0} | {:.0} | {:.1} / {:.0} / {:.0} | {} |",
            x.policy,
            x.row_send,
            x.threads,
            tps_cell(x),
            x.p50_ms,
            x.p99_ms,
            x.cs_per_s,
            x.cs_per_txn,
            x.admissions_per_txn,
            x.sleeps_per_txn,
            x.queue_waits_per_txn,
            x.cpu_user,
            x.cpu_sys,
            x.cpu_idle,
            x.wake_p50_us,
            x.wake_p99_us,
            x.wake_mean_us,
            seed
        );
    }
    s.push_str(&per_client_table(r));
    s.push_str(&census_table(r));
    s.push_str(&collapse_summary(r));
    s.push_str(&best_summary(r));
    s.push_str(&versus_summary(r));
    if let Some(sb) = &r.sysbench {
        s.push_str(&super::sysbench::markdown(sb));
    }
    s
}

/// Where the threads were at each point (the census's means), and how often the process was
/// preempted: what `sim oltp --compare` sets beside the simulator's.
pub fn census_table(r: &OltpReport) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "\nWhere the threads were, on average over each window (sampled every {} ms): runnable = \
         running or waiting for a core, machine-wide (`/proc/stat`); inside = the gate's count, \
         woken included; woken = granted a slot, not yet running; on gate lock = waiting for the \
         gate's own lock (classic and flifo: InnoDB 5.0's `srv_conc_mutex`); preempted/s = \
         involuntary context switches (`ru_nivcsw`); limit = the limit at the window's end (for \
         `auto`, the highest it reached in brackets).\n\n\
         | setting | threads | samples | runnable | inside | woken | queued | sleeping | on gate lock | preempted/s | limit |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        CENSUS_EVERY.as_millis()
    );
    for x in &r.runs {
        let c = &x.census;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} | {} |",
            x.policy,
            x.threads,
            c.samples,
            c.runnable.map_or("–".to_string(), |v| format!("{v:.1}")),
            c.inside,
            c.woken,
            c.queued,
            c.sleeping,
            c.on_gate_lock,
            x.preempted_per_s,
            match x.limit_max {
                Some(m) => format!("{} ({m})", x.limit_end),
                None => x.limit_end.to_string(),
            }
        );
    }
    s
}

/// Per-client figures of every point: the response-time tail against the fair share, starved
/// clients and Jain's index, and a warning for each point whose window holds fewer than
/// [`MIN_FAIR_SHARES`] fair shares.
pub fn per_client_table(r: &OltpReport) -> String {
    use std::fmt::Write;
    let mut s = String::from(
        "\nPer client, over each point's measured window: fair share = threads ÷ TPS (the response \
         time of a perfectly fair server); starved = clients that completed no transaction in the \
         window; Jain = (Σx)² ÷ (n·Σx²) over per-client completions (1 = even, 1/n = one client did \
         everything). Quantiles count the transactions completed in the window, so a starved client's \
         wait is missing from them (p99 can fall below the fair share). Starved, Jain and the tail say \
         something about the gate only when the window holds several fair shares (`--seconds`).\n\n\
         | setting | threads | window s | fair share ms | window ÷ fair share | p99 ms | p99.9 ms | max ms | p99 ÷ fair share | starved | Jain |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut short = Vec::new();
    for x in &r.runs {
        let (shares, tail) = if x.fair_share_ms > 0.0 {
            let shares = x.window_s * 1e3 / x.fair_share_ms;
            if shares < MIN_FAIR_SHARES {
                short.push((x, shares));
            }
            (
                format!("{shares:.1}"),
                format!("{:.1}", x.p99_ms / x.fair_share_ms),
            )
        } else {
            short.push((x, 0.0));
            ("–".to_string(), "–".to_string())
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {:.1} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {:.3} |",
            x.policy,
            x.threads,
            x.window_s,
            x.fair_share_ms,
            shares,
            x.p99_ms,
            x.p999_ms,
            x.max_ms,
            tail,
            x.starved_clients,
            x.jain
        );
    }
    if !short.is_empty() {
        s.push('\n');
    }
    for (x, shares) in short {
        let _ = writeln!(
            s,
            "Warning: {} × {} threads: the {:.2} s window holds {:.1} fair shares (< {}); its \
             starved ({}), Jain ({:.3}) and tail reflect the short window as much as the gate.",
            x.policy, x.threads, x.window_s, shares, MIN_FAIR_SHARES, x.starved_clients, x.jain
        );
    }
    s
}

/// A point's TPS, and with repetitions the lowest and highest of them: `2524 (2401–2610)`.
fn tps_cell(x: &OltpRun) -> String {
    if x.tps_reps.len() < 2 {
        return format!("{:.0}", x.tps);
    }
    let lo = x.tps_reps.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = x.tps_reps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.0} ({lo:.0}–{hi:.0})", x.tps)
}

/// The thread count from which [`best_summary`] lists every setting's share of the run's best:
/// the many-client points `auto`'s throughput target is about (256, 512 and 1024 threads).
pub const MANY_CLIENTS: usize = 256;

/// Each setting's TPS at [`MANY_CLIENTS`] threads and more over the highest TPS any setting
/// reached at any thread count in the run (with repetitions, the highest median).
pub fn best_summary(r: &OltpReport) -> String {
    use std::fmt::Write;
    let Some(best) = r.runs.iter().max_by(|a, b| a.tps.total_cmp(&b.tps)) else {
        return String::new();
    };
    if !r.runs.iter().any(|x| x.threads >= MANY_CLIENTS) || best.tps <= 0.0 {
        return String::new();
    }
    let mut s = format!(
        "\nTPS at {MANY_CLIENTS} threads and more over the run's best ({} at {} threads, {:.0} TPS):\n\n",
        best.policy, best.threads, best.tps
    );
    for set in &r.config.settings {
        let pts: Vec<String> = r
            .runs
            .iter()
            .filter(|x| x.policy == set.name && x.threads >= MANY_CLIENTS)
            .map(|x| format!("{} threads {:.0} %", x.threads, 100.0 * x.tps / best.tps))
            .collect();
        if !pts.is_empty() {
            let _ = writeln!(s, "- {}: {}", set.name, pts.join(", "));
        }
    }
    s
}

/// [`OltpReport::versus_best`] for people: each point's ratio to the strongest peak, and its
/// median and pairs against every peak.
pub fn versus_summary(r: &OltpReport) -> String {
    use std::fmt::Write;
    let Some(first) = r.versus_best.first() else {
        return String::new();
    };
    let mut s = format!(
        "\nSide by side with every setting's peak, {} pairs of points run back to back, which \
         one first alternating (TPS ÷ the peak's in the same pair: the lowest median over the \
         peaks; then each peak's median and pairs):\n\n",
        first.against.first().map_or(0, |v| v.pairs.len())
    );
    for v in &r.versus_best {
        let _ = writeln!(
            s,
            "- {} at {} threads: **{:.0} %**",
            v.policy,
            v.threads,
            100.0 * v.ratio
        );
        for a in &v.against {
            let each: Vec<String> = a
                .pairs
                .iter()
                .zip(&a.ratios)
                .map(|([b, x], q)| format!("{:.0} % ({x:.0} ÷ {b:.0})", 100.0 * q))
                .collect();
            let _ = writeln!(
                s,
                "  - beside {} at {} threads: {:.0} %; {}",
                a.policy,
                a.threads,
                100.0 * a.ratio_median,
                each.join(", ")
            );
        }
    }
    s
}

/// Each setting's TPS at the highest thread count over its own peak.
pub fn collapse_summary(r: &OltpReport) -> String {
    use std::fmt::Write;
    let mut s = String::from("\nTPS at the highest thread count over the setting's own peak:\n\n");
    for set in &r.config.settings {
        let pts: Vec<&OltpRun> = r.runs.iter().filter(|x| x.policy == set.name).collect();
        let (Some(peak), Some(last)) = (
            pts.iter().map(|x| x.tps).reduce(f64::max),
            pts.iter().max_by_key(|x| x.threads),
        ) else {
            continue;
        };
        let _ = writeln!(
            s,
            "- {}: {:.0} of a {:.0} peak at {} threads = {:.0} %",
            set.name,
            last.tps,
            peak,
            last.threads,
            100.0 * last.tps / peak.max(1e-9)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_runs_the_sysbench_mix() {
        let dir = std::env::temp_dir().join(format!("turnstile-repro-oltp-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let engine = common.open().unwrap();
        engine.ensure_table(TABLE, 3000, &mut |_, _| {}).unwrap();
        let gate = Gate::new(GateConfig::new(Policy::Classic).limit(4)).unwrap();
        let mut c = Connection::new(engine.clone(), &gate, "t");
        let mut rng = 7;
        let shape = transaction(&mut c, 3000, 1000, &mut rng).unwrap();
        assert_eq!(shape.statements, STATEMENTS_PER_TXN);
        assert_eq!(shape.point_rows, POINT_SELECTS);
        assert_eq!(shape.range_rows, [1000; 4]);
        drop(c);
        let cfg = OltpConfig {
            rows: 3000,
            range: 100,
            threads: vec![1, 3],
            settings: GateSetting::seed_settings(),
            duration: Duration::from_millis(50),
            reps: 1,
            versus_best: 0,
            competing_processes: 0,
            row_work_ns: 0,
        };
        drop(engine);
        let mut steps = Steps::default();
        let r = run(&common, &cfg, &mut steps).unwrap();
        assert_eq!(r.runs.len(), GateSetting::seed_settings().len() * 2);
        // Every setting at one thread count before the next; the report setting by setting.
        let order: Vec<String> = [1, 3]
            .iter()
            .flat_map(|t| {
                cfg.settings
                    .iter()
                    .map(move |s| format!("oltp: {} × {t} threads", s.name))
            })
            .collect();
        assert_eq!(steps.0[1..], order[..], "the run order");
        assert_eq!(
            r.runs
                .iter()
                .map(|x| (x.policy.as_str(), x.threads))
                .collect::<Vec<_>>()[..4],
            [("classic", 1), ("classic", 3), ("flifo", 1), ("flifo", 3)],
            "the report's order"
        );
        assert!(r.versus_best.is_empty(), "no pairs asked for");
        assert!(r.runs.iter().any(|x| x.tps > 0.0));
        assert!(r.runs.iter().all(|x| x.row_send == "force-exit"));
        for x in &r.runs {
            assert!(
                x.p50_ms <= x.p99_ms && x.p99_ms <= x.p999_ms && x.p999_ms <= x.max_ms,
                "{x:?}"
            );
            assert!(x.starved_clients <= x.threads, "{x:?}");
            assert!((0.0..=1.0 + 1e-9).contains(&x.jain), "{x:?}");
            // A 50 ms window holds at least one 20 ms census sample; every count is of these
            // clients (the gate's inside count is bounded by them, not by the limit: FLIFO's
            // LIFO admissions go past it).
            let c = &x.census;
            assert!(c.samples >= 1, "{x:?}");
            let n = x.threads as f64;
            for v in [c.inside, c.sleeping, c.queued, c.woken] {
                assert!((0.0..=n).contains(&v), "{x:?}");
            }
            assert!(c.sleeping + c.queued + c.woken <= n, "{x:?}");
            assert!(x.preempted_per_s <= x.cs_per_s, "{x:?}");
            assert!(x.window_s >= cfg.duration.as_secs_f64(), "{x:?}");
            if x.tps > 0.0 {
                assert!(x.fair_share_ms > 0.0 && x.max_ms > 0.0, "{x:?}");
                // Someone completed something: the index is at least 1/n.
                assert!(x.jain >= 1.0 / x.threads as f64 - 1e-9, "{x:?}");
                assert!(x.starved_clients < x.threads, "{x:?}");
            } else {
                assert_eq!((x.fair_share_ms, x.jain), (0.0, 0.0), "{x:?}");
                assert_eq!(x.starved_clients, x.threads, "{x:?}");
            }
        }
        let md = markdown(&r);
        assert!(
            md.contains("| setting | threads | window s | fair share ms |"),
            "{md}"
        );
        assert!(md.contains("| flifo | force-exit | 3 |"), "{md}");
        assert!(md.contains("FIFO 937, FLIFO 105"), "{md}");
        assert!(
            md.contains("| setting | threads | samples | runnable | inside | woken |"),
            "{md}"
        );

        // Classic at one thread, 500 tickets: with keep a transaction is ~10 point-select
        // admissions + one per range (101 enters < 500 tickets); with force-exit the simple
        // range alone is 101 admissions (one per row sent, and the fetch that finds the end).
        let mut per_txn = Vec::new();
        for rs in RowSend::ALL {
            let cfg = OltpConfig {
                threads: vec![1],
                settings: GateSetting::select(&["classic".into()], rs).unwrap(),
                duration: Duration::from_millis(200),
                ..cfg.clone()
            };
            assert_eq!(cfg.settings[0].tickets, 500, "MySQL 5.0's default");
            let r = run(&common, &cfg, &mut super::super::Quiet).unwrap();
            let x = &r.runs[0];
            assert_eq!(x.row_send, rs.name());
            assert!(x.tps > 0.0, "{x:?}");
            assert!(markdown(&r).contains(&format!("Row send: **{}**", rs.name())));
            per_txn.push(x.admissions_per_txn);
        }
        let (force, keep) = (per_txn[0], per_txn[1]);
        assert!(
            force >= 100.0,
            "force-exit: {force} admissions per transaction"
        );
        assert!(
            (10.0..30.0).contains(&keep),
            "keep: {keep} admissions per transaction"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Progress that keeps every step's text.
    #[derive(Default)]
    struct Steps(Vec<String>);

    impl Progress for Steps {
        fn step(&mut self, what: &str) {
            self.0.push(what.to_string());
        }
        fn load(&mut self, _: u64, _: u64) {}
    }

    #[test]
    fn versus_best_runs_adaptive_auto_at_many_clients_beside_every_settings_peak_in_alternating_pairs(
    ) {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-versus-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let names = ["polling", "auto", "auto@2"].map(String::from);
        let cfg = OltpConfig {
            rows: 2000,
            range: 100,
            threads: vec![2, MANY_CLIENTS],
            settings: GateSetting::select(&names, RowSend::Keep).unwrap(),
            duration: Duration::from_millis(40),
            reps: 1,
            versus_best: 2,
            competing_processes: 0,
            row_work_ns: 0,
        };
        let points = versus_best_points(&cfg);
        assert_eq!(
            points
                .iter()
                .map(|(s, t)| (s.name.as_str(), *t))
                .collect::<Vec<_>>(),
            [("auto", MANY_CLIENTS)],
            "adaptive auto only (not auto@2), at many clients only"
        );
        let mut steps = Steps::default();
        let r = run(&common, &cfg, &mut steps).unwrap();
        let peaks = peaks(&r.runs, &cfg.settings);
        assert_eq!(
            peaks.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["polling", "auto", "auto@2"],
            "one peak per setting, in setting order"
        );
        for (p, t) in &peaks {
            let best = r.runs.iter().filter(|x| &x.policy == p).map(|x| x.tps);
            let at = r
                .runs
                .iter()
                .find(|x| &x.policy == p && x.threads == *t)
                .unwrap();
            assert_eq!(
                at.tps,
                best.reduce(f64::max).unwrap(),
                "{p}'s highest point"
            );
        }
        assert_eq!(r.versus_best.len(), 1);
        let v = &r.versus_best[0];
        assert_eq!((v.policy.as_str(), v.threads), ("auto", MANY_CLIENTS));
        assert_eq!(v.against.len(), 3);
        for (a, (p, t)) in v.against.iter().zip(&peaks) {
            assert_eq!((&a.policy, a.threads), (p, *t));
            assert_eq!(a.pairs.len(), 2);
            for ([b, x], q) in a.pairs.iter().zip(&a.ratios) {
                // Each ratio is its own pair's (0 if the peak's point completed nothing).
                assert_eq!(*q, if *b > 0.0 { x / b } else { 0.0 }, "{a:?}");
            }
            assert_eq!(a.ratio_median, median(&a.ratios), "{a:?}");
        }
        let lowest = v.against.iter().map(|a| a.ratio_median).reduce(f64::min);
        assert_eq!(Some(v.ratio), lowest, "against the strongest peak");
        // 3 peaks × 2 pairs × 2 points after the sweep; pair 1 runs the peak first, pair 2
        // the point measured first.
        assert_eq!(steps.0.len(), 1 + 3 * 2 + 3 * 2 * 2);
        let (p, t) = &peaks[0];
        let head = format!("oltp: auto × {MANY_CLIENTS} threads beside {p} × {t}");
        assert_eq!(
            steps.0[7..11],
            [
                format!("{head}, pair 1 of 2: {p} × {t} threads"),
                format!("{head}, pair 1 of 2: auto × {MANY_CLIENTS} threads"),
                format!("{head}, pair 2 of 2: auto × {MANY_CLIENTS} threads"),
                format!("{head}, pair 2 of 2: {p} × {t} threads"),
            ]
        );
        let md = markdown(&r);
        assert!(
            md.contains("Side by side with every setting's peak, 2 pairs"),
            "{md}"
        );
        assert!(
            md.contains(&format!(
                "- auto at {MANY_CLIENTS} threads: **{:.0} %**",
                100.0 * v.ratio
            )),
            "{md}"
        );
        assert!(
            md.contains(&format!("  - beside {p} at {t} threads: ")),
            "{md}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_point_with_repetitions_is_its_median_repetition_and_keeps_every_tps() {
        let run = |tps: f64, p99_ms: f64| OltpRun {
            tps,
            p99_ms,
            tps_reps: vec![tps],
            ..Default::default()
        };
        let m = median_run(vec![run(300.0, 3.0), run(100.0, 1.0), run(200.0, 2.0)]);
        assert_eq!(m.tps, 200.0);
        assert_eq!(
            m.p99_ms, 2.0,
            "the other figures are the median repetition's"
        );
        assert_eq!(m.tps_reps, vec![300.0, 100.0, 200.0], "in run order");
        // An even count takes the lower middle one: a reported point is always one that ran.
        let m = median_run(vec![
            run(4.0, 0.0),
            run(1.0, 0.0),
            run(3.0, 0.0),
            run(2.0, 0.0),
        ]);
        assert_eq!(m.tps, 2.0);
        assert_eq!(median_run(vec![run(7.0, 0.0)]).tps_reps, vec![7.0]);
    }

    #[test]
    fn the_best_summary_compares_many_client_points_with_the_best_of_the_run() {
        let mut cfg = OltpConfig::quick();
        cfg.settings =
            GateSetting::select(&["classic".into(), "auto".into()], RowSend::ForceExit).unwrap();
        let run = |policy: &str, threads: usize, tps: f64| OltpRun {
            policy: policy.into(),
            threads,
            tps,
            tps_reps: vec![tps],
            ..Default::default()
        };
        let r = OltpReport {
            config: cfg,
            runs: vec![
                run("classic", 32, 2000.0),
                run("classic", 256, 1000.0),
                run("auto", 32, 1900.0),
                run("auto", 256, 1900.0),
                run("auto", 1024, 1500.0),
            ],
            sysbench: None,
            versus_best: Vec::new(),
        };
        let s = best_summary(&r);
        assert!(s.contains("(classic at 32 threads, 2000 TPS)"), "{s}");
        assert!(s.contains("- classic: 256 threads 50 %"), "{s}");
        assert!(
            s.contains("- auto: 256 threads 95 %, 1024 threads 75 %"),
            "{s}"
        );
        assert!(
            !s.contains("32 threads 9"),
            "points under 256 threads are not listed: {s}"
        );
    }

    #[test]
    fn settings_are_picked_by_name_with_clear_errors() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let s = GateSetting::select(&names(&["flifo", "classic"]), RowSend::Keep).unwrap();
        assert_eq!(
            s.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["flifo", "classic"]
        );
        assert!(s
            .iter()
            .all(|s| !s.fixed_limit && s.config().adaptive_limit));
        // auto@L: auto with its limit fixed at L; the rest is auto's.
        let f = GateSetting::select(&names(&["auto", "auto@8"]), RowSend::Keep).unwrap();
        assert_eq!(f[1].name, "auto@8");
        assert_eq!(
            (f[1].policy, f[1].limit, f[1].fixed_limit),
            (Policy::Auto, 8, true)
        );
        assert!(f[0].config().adaptive_limit && !f[1].config().adaptive_limit);
        assert_eq!(f[1].row_send, RowSend::Keep);
        for bad in ["auto@0", "auto@x", "auto@", "auto@1001", "auto@-1"] {
            let e = GateSetting::select(&names(&[bad]), RowSend::Keep).unwrap_err();
            assert!(e.contains(bad) && e.contains("from 1 to 1000"), "{e}");
        }
        assert!(
            GateSetting::select(&names(&["auto@4", "auto@4"]), RowSend::Keep)
                .unwrap_err()
                .contains("twice")
        );
        assert!(s.iter().all(|s| s.row_send == RowSend::Keep));
        assert_eq!(
            (s[1].limit, s[1].tickets, s[1].sleep_delay_us),
            (32, 500, 10_000)
        );
        let e = GateSetting::select(&names(&["classic", "fifo"]), RowSend::Keep).unwrap_err();
        assert!(
            e.contains("'fifo'")
                && e.contains("classic, flifo, polling, timer, unlimited, auto, auto@L"),
            "{e}"
        );
        assert!(
            GateSetting::select(&names(&["timer", "timer"]), RowSend::Keep)
                .unwrap_err()
                .contains("twice")
        );
        assert!(GateSetting::select(&[], RowSend::Keep).is_err());
        assert!(GateSetting::seed_settings()
            .iter()
            .all(|s| s.row_send == RowSend::ForceExit));
    }

    #[test]
    fn engine_costs_are_positive_and_a_forced_exit_costs_no_less_than_keeping_the_slot() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-costs-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let cfg = OltpConfig {
            rows: 3000,
            range: 100,
            ..OltpConfig::quick()
        };
        let c = measure_costs(&common, &cfg, 1, &mut super::super::Quiet).unwrap();
        assert_eq!(c.range, 100);
        for (name, v) in [("point", c.point_us), ("row", c.row_us)] {
            assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        }
        for (name, v) in [("sort", c.sort_us), ("gate call", c.gate_call_us)] {
            assert!(v.is_finite() && v >= 0.0, "{name} = {v}");
        }
        #[cfg(target_os = "linux")]
        assert!(
            c.switch_us.is_some_and(|v| v.is_finite() && v >= 0.0),
            "{c:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
