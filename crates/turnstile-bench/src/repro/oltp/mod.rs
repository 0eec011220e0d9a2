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

//!
//! * [`costs`] — the engine's own costs, measured for the simulator's OLTP workload.
//! * [`report`] — the markdown report and its summaries.
//!
//! The settings, the configuration and the result row live in [`super::sweep`], shared with
//! [`super::sysbench`], and the thread census in [`super::census`]; they are re-exported here.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use turnstile::Policy;
pub use turnstile_engine::RowSend;
use turnstile_engine::{Connection, Engine};

use super::census::census;
use super::{join_all, stopped, Common, Progress, ReproError};
use crate::rusage::Usage;
use crate::start::StartLine;
use crate::stats::{jain, median, quantile_sorted, starved};

mod costs;
mod report;

pub use super::census::{Census, CENSUS_EVERY};
pub(crate) use super::sweep::ser_policy;
pub use super::sweep::{GateSetting, OltpConfig, OltpRun, TABLE};
pub use costs::{measure_costs, EngineCosts};
pub use report::{
    best_summary, census_table, collapse_summary, markdown, per_client_table, versus_summary,
    MANY_CLIENTS, SEED_CS_PER_TXN, SEED_TPS,
};

/// Statements per transaction: 10 point selects and 4 ranges.
pub const STATEMENTS_PER_TXN: u32 = 14;
/// Point selects per transaction.
pub const POINT_SELECTS: u32 = 10;

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
/// can last tens of seconds, longer than a pair (two points, ~5 s) and shorter than a sweep,
/// so a sweep's medians can put one point in a fast spell and another in a slow one, and which
/// point is the best of a sweep is then partly chance; a pair's two points share their spell,
/// and the median of the pairs' ratios is a comparison drift cannot tilt. Against every
/// setting's peak, so that the strongest one side by side is found whichever won the sweep.
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
    // on disk (with the file out of the page cache, the first point ran at a small fraction
    // of the rest). The transactions read only this table's rows, by id.
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
    // shared machine's slow spells can last tens of seconds; run setting by setting, one
    // spell could sink every point of one setting's repetition.
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
    // reasons): a point that began at the start line reads low.
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

#[cfg(test)]
mod tests {
    use turnstile::{Gate, GateConfig};

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
        // How many transactions land in a 50 ms window depends on the machine's load: the
        // figures below hold whether a window caught some or none.
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
        // range alone is 101 admissions (one per row sent, and the fetch that finds the end),
        // also with costlier rows (their work is inside the engine's call). Counted on one
        // transaction, not read from a timed window: the count does not depend on the load.
        for rs in RowSend::ALL {
            let cfg = OltpConfig {
                threads: vec![1],
                settings: GateSetting::select(&["classic".into()], rs).unwrap(),
                duration: Duration::from_millis(50),
                ..cfg.clone()
            };
            assert_eq!(cfg.settings[0].tickets, 500, "MySQL 5.0's default");
            let r = run(&common, &cfg, &mut super::super::Quiet).unwrap();
            let x = &r.runs[0];
            assert_eq!(x.row_send, rs.name());
            assert!(markdown(&r).contains(&format!("Row send: **{}**", rs.name())));
            for row_work_ns in [0, 2_000] {
                let engine = common
                    .open_engine(Duration::ZERO, Duration::from_nanos(row_work_ns))
                    .unwrap();
                let gate = cfg.settings[0].gate().unwrap();
                let mut c = Connection::new(engine, &gate, "t");
                c.set_row_send(rs);
                let mut rng = 7;
                transaction(&mut c, 3000, 100, &mut rng).unwrap();
                drop(c);
                let n = gate.stats().counters.admissions;
                match rs {
                    RowSend::ForceExit => assert!(
                        n >= 101,
                        "force-exit, row work {row_work_ns} ns: {n} admissions"
                    ),
                    RowSend::Keep => assert!(
                        (10..30).contains(&n),
                        "keep, row work {row_work_ns} ns: {n} admissions"
                    ),
                }
            }
        }
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
}
