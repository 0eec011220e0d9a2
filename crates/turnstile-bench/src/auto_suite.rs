//! `turnstile bench auto`: does `auto`, untuned, hold on workloads nobody tuned it for?
//!
//! Each point of a grid of workloads (statement length, the share of a slot's time spent in
//! waits nobody declared, declared waits, thread count, a competing CPU-bound process, a step
//! in the thread count) is run three ways:
//! 1. a sweep of the fixed limits a DBA could set (`classic` and `polling` at 1, 2, 4, …
//!    256, up to the first limit at or above the thread count), one run each, to find the
//!    best: the highest throughput among the settings that starve no client (a limit that
//!    starves clients is not one an operator could deploy, and `auto` is held to starving
//!    nobody); the highest of all is reported beside it;
//! 2. then `auto` and that best setting, alternated `reps` times, so that a slow spell of
//!    the shared machine hits both.
//!
//! Reported per point: `auto`'s throughput ÷ the best's (median of the alternated pairs), the
//! mean statement latency of each, the p99 against the fair share, starved clients, and the
//! limit `auto` settled on. The fair share of a closed loop is `threads ÷ throughput`: the
//! latency every client would see if all were served alike (Little's law).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use turnstile::{Gate, GateConfig, Histogram, Policy, StepOutReason};

use crate::competing::Competing;
use crate::start::StartLine;
use crate::stats::median;
use crate::work;

/// Calls into the engine per statement: a statement's work and waits are split evenly
/// among them, so a ticket policy re-enters between them as it would between rows.
const CALLS: u32 = 4;

/// The fixed limits swept: powers of two, as `innodb_thread_concurrency` is usually tried.
const FIXED_LIMITS: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// Tickets of the fixed-limit runs: InnoDB's default (500), more than a statement's calls,
/// so a statement is admitted once.
const TICKETS: u32 = 500;

/// One workload of the grid.
#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    /// A short name for tables and charts.
    pub name: String,
    /// CPU work per statement, µs.
    pub cpu_us: f64,
    /// Share of a statement's time spent blocked inside its slot, declared to nobody (a page
    /// read or a lock the gate does not know), 0 ≤ x < 1.
    pub undeclared: f64,
    /// Share of a statement's time spent blocked in declared waits (stepped out for disk
    /// I/O), 0 ≤ x < 1; `undeclared + declared` < 1.
    pub declared: f64,
    /// Client threads (at the end of the run, for a step).
    pub threads: usize,
    /// CPU-bound processes competing for the CPUs.
    pub competing: u32,
    /// Start with this many clients; the others join halfway through the measured window.
    pub step_from: Option<usize>,
}

impl Workload {
    fn new(name: &str, cpu_us: f64, undeclared: f64, declared: f64, threads: usize) -> Self {
        Workload {
            name: name.to_string(),
            cpu_us,
            undeclared,
            declared,
            threads,
            competing: 0,
            step_from: None,
        }
    }

    fn competing(mut self, n: u32) -> Self {
        self.competing = n;
        self
    }

    fn step_from(mut self, n: usize) -> Self {
        self.step_from = Some(n);
        self
    }

    /// Blocked time per call, undeclared and declared, µs: the shares are of the whole
    /// statement, so `wait = cpu × share ÷ (1 − shares)`.
    fn waits_per_call_us(&self) -> (f64, f64) {
        let busy = 1.0 - self.undeclared - self.declared;
        let per = self.cpu_us / busy / f64::from(CALLS);
        (per * self.undeclared, per * self.declared)
    }

    fn validate(&self) -> Result<(), String> {
        let ok = |x: f64| (0.0..1.0).contains(&x);
        if !ok(self.undeclared) || !ok(self.declared) || self.undeclared + self.declared >= 1.0 {
            return Err(format!(
                "{}: wait shares must be in 0..1 and sum to under 1",
                self.name
            ));
        }
        if !(self.cpu_us > 0.0 && self.cpu_us <= 1e6) {
            return Err(format!(
                "{}: CPU per statement must be in (0, 1 s]",
                self.name
            ));
        }
        if self.threads == 0 || self.threads > 4096 {
            return Err(format!("{}: threads must be in 1..=4096", self.name));
        }
        if self.step_from.is_some_and(|s| s == 0 || s >= self.threads) {
            return Err(format!(
                "{}: a step starts with 1..threads clients",
                self.name
            ));
        }
        Ok(())
    }
}

/// The suite's settings.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteConfig {
    /// The workloads.
    pub points: Vec<Workload>,
    /// Measured time of a sweep run (longer for long statements: [`SuiteConfig::window_for`]).
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "sweep_ms")]
    pub sweep: Duration,
    /// Measured time of an alternated run (after a warm-up of a quarter of it; longer for long
    /// statements).
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "window_ms")]
    pub window: Duration,
    /// Alternated pairs of `auto` and the best fixed limit.
    pub reps: usize,
}

impl SuiteConfig {
    /// The whole grid (docs/AUTO.md gives its running time).
    pub fn full() -> Self {
        let w = Workload::new;
        SuiteConfig {
            points: vec![
                w("1us/64t", 1.0, 0.0, 0.0, 64),
                w("1us/1024t", 1.0, 0.0, 0.0, 1024),
                w("100us/2t", 100.0, 0.0, 0.0, 2),
                w("100us/16t", 100.0, 0.0, 0.0, 16),
                w("100us/1024t", 100.0, 0.0, 0.0, 1024),
                w("100us undecl50%/256t", 100.0, 0.5, 0.0, 256),
                w("100us undecl95%/256t", 100.0, 0.95, 0.0, 256),
                w("1ms decl80%/256t", 1000.0, 0.0, 0.8, 256),
                w("5ms undecl50%/64t", 5000.0, 0.5, 0.0, 64),
                w("20ms/32t", 20_000.0, 0.0, 0.0, 32),
                w("50ms/8t", 50_000.0, 0.0, 0.0, 8),
                w("100us/256t +1 proc", 100.0, 0.0, 0.0, 256).competing(1),
                w("100us undecl50%/256t +1 proc", 100.0, 0.5, 0.0, 256).competing(1),
                w("100us 8→1024t", 100.0, 0.0, 0.0, 1024).step_from(8),
            ],
            sweep: Duration::from_millis(500),
            window: Duration::from_millis(1000),
            reps: 3,
        }
    }

    /// Seven points with shorter runs, about a fifth of the whole grid's time.
    pub fn quick() -> Self {
        let keep = [
            "1us/64t",
            "100us/1024t",
            "100us undecl95%/256t",
            "1ms decl80%/256t",
            "20ms/32t",
            "100us/256t +1 proc",
            "100us 8→1024t",
        ];
        let full = SuiteConfig::full();
        SuiteConfig {
            points: full
                .points
                .into_iter()
                .filter(|p| keep.contains(&p.name.as_str()))
                .collect(),
            sweep: Duration::from_millis(250),
            window: Duration::from_millis(500),
            reps: 3,
        }
    }

    /// How long a run of `w` is measured: `base`, or four rounds of the clients' statements if
    /// longer (a round is `threads × CPU per statement ÷ CPUs`, the shortest a fair share can
    /// be), so every client completes several statements and a mean latency is not just the
    /// first few to finish.
    pub fn window_for(w: &Workload, base: Duration) -> Duration {
        let cpus = thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let round = Duration::from_secs_f64(w.threads as f64 * w.cpu_us / 1e6 / cpus);
        base.max(round * 4).min(crate::gate_config::MAX_DURATION)
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        if self.points.is_empty() {
            return Err("no workloads to run".into());
        }
        if self.reps == 0 || self.reps > 100 {
            return Err("repetitions must be in 1..=100".into());
        }
        if self.sweep.is_zero() || self.window.is_zero() {
            return Err("run durations must be positive".into());
        }
        if self.sweep > crate::gate_config::MAX_DURATION
            || self.window > crate::gate_config::MAX_DURATION
        {
            return Err("run durations must be at most an hour".into());
        }
        self.points.iter().try_for_each(Workload::validate)
    }

    /// The runs a point takes (for progress).
    pub fn runs(&self, w: &Workload) -> usize {
        2 * fixed_limits(w.threads).len() + 2 * self.reps
    }
}

/// The fixed limits worth trying for `threads` clients: up to the first at or above them
/// (a higher limit admits the same clients).
fn fixed_limits(threads: usize) -> Vec<u32> {
    let mut v = Vec::new();
    for l in FIXED_LIMITS {
        v.push(l);
        if l as usize >= threads {
            break;
        }
    }
    v
}

/// A gate setting the suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The policy.
    pub policy: &'static str,
    /// The fixed limit (`auto`: 0, it finds its own).
    pub limit: u32,
}

impl Setting {
    const AUTO: Setting = Setting {
        policy: "auto",
        limit: 0,
    };

    fn gate(self) -> Gate {
        let cfg = match self.policy {
            "auto" => GateConfig::new(Policy::Auto),
            p => GateConfig::new(p.parse().expect("a policy name")).innodb_settings(
                self.limit,
                TICKETS,
                Duration::ZERO,
            ),
        };
        Gate::new(cfg).expect("valid settings")
    }

    /// `auto`, or `policy@limit`.
    pub fn label(self) -> String {
        if self.limit == 0 {
            self.policy.to_string()
        } else {
            format!("{}@{}", self.policy, self.limit)
        }
    }
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// What ran.
    pub setting: Setting,
    /// Statements completed per second.
    pub throughput: f64,
    /// Mean statement latency, ms.
    pub mean_ms: f64,
    /// 99th percentile statement latency, ms.
    pub p99_ms: f64,
    /// The fair share, `threads ÷ throughput`, ms.
    pub fair_ms: f64,
    /// Clients that completed nothing though their fair share was at least three
    /// statements in the window.
    pub starved: usize,
    /// The gate's limit at the end.
    pub limit_at_end: u32,
    /// `auto`: its controller's moves by rule over the measured window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_reasons: Option<turnstile::LimitReasons>,
}

/// One point's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct PointResult {
    /// The workload.
    pub workload: Workload,
    /// The sweep, one run per fixed setting.
    pub sweep: Vec<Run>,
    /// The best fixed setting of the sweep that starved no client (the best of all where
    /// every setting starved some).
    pub best: Setting,
    /// The sweep's highest throughput whatever it starved, where that is not `best`: the
    /// setting, its sweep throughput ÷ `best`'s, and the clients it starved.
    pub best_any: Option<(Setting, f64, usize)>,
    /// The alternated runs: `auto`, best, `auto`, best, …
    pub runs: Vec<Run>,
    /// Median of `auto ÷ best` throughput over the pairs.
    pub ratio: f64,
    /// Median of `auto`'s mean latency ÷ the best's. Of completed statements only, so a
    /// setting that starves some clients shows the others' shorter latencies.
    pub mean_ratio: f64,
    /// Median of `auto`'s mean latency ÷ its fair share.
    pub mean_over_fair: f64,
    /// Median of `auto`'s p99 ÷ its fair share.
    pub p99_over_fair: f64,
    /// Most clients `auto` starved in a run.
    pub starved: usize,
    /// Median of the limit `auto` ended at.
    pub auto_limit: f64,
}

/// The suite's report.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteReport {
    /// The machine.
    pub machine: crate::gate::Machine,
    /// The settings.
    pub config: SuiteConfig,
    /// One result per workload.
    pub points: Vec<PointResult>,
}

/// Runs the suite; `progress` is told of each run before it starts.
///
/// # Errors
/// When the OS refuses a thread or a competing process.
pub fn run(cfg: &SuiteConfig, progress: &mut dyn FnMut(&str)) -> Result<SuiteReport, String> {
    cfg.validate()?;
    let mut points = Vec::with_capacity(cfg.points.len());
    for w in &cfg.points {
        points.push(run_point(cfg, w, progress)?);
    }
    Ok(SuiteReport {
        machine: crate::gate::Machine::here(),
        config: cfg.clone(),
        points,
    })
}

fn run_point(
    cfg: &SuiteConfig,
    w: &Workload,
    progress: &mut dyn FnMut(&str),
) -> Result<PointResult, String> {
    // Started once per point: its processes compete with every run of the point alike.
    let _competing = Competing::start(w.competing)
        .map_err(|e| format!("cannot start a competing process: {e}"))?;
    let mut sweep = Vec::new();
    for policy in ["polling", "classic"] {
        for limit in fixed_limits(w.threads) {
            let s = Setting { policy, limit };
            progress(&format!("{}: sweep {}", w.name, s.label()));
            sweep.push(measure(w, s, SuiteConfig::window_for(w, cfg.sweep))?);
        }
    }
    let (best_run, best_any) = best_of(&sweep);
    let best = best_run.setting;
    let best_any = best_any.map(|r| (r.setting, r.throughput / best_run.throughput, r.starved));
    let mut runs = Vec::with_capacity(2 * cfg.reps);
    for i in 0..cfg.reps {
        for s in [Setting::AUTO, best] {
            progress(&format!("{}: {} (pair {})", w.name, s.label(), i + 1));
            runs.push(measure(w, s, SuiteConfig::window_for(w, cfg.window))?);
        }
    }
    let pairs: Vec<(&Run, &Run)> = runs.chunks(2).map(|p| (&p[0], &p[1])).collect();
    let of = |f: &dyn Fn(&Run, &Run) -> f64| {
        median(&pairs.iter().map(|(a, b)| f(a, b)).collect::<Vec<_>>())
    };
    Ok(PointResult {
        workload: w.clone(),
        best,
        best_any,
        ratio: of(&|a, b| a.throughput / b.throughput),
        mean_ratio: of(&|a, b| a.mean_ms / b.mean_ms),
        mean_over_fair: of(&|a, _| a.mean_ms / a.fair_ms),
        p99_over_fair: of(&|a, _| a.p99_ms / a.fair_ms),
        starved: pairs.iter().map(|(a, _)| a.starved).max().unwrap_or(0),
        auto_limit: of(&|a, _| f64::from(a.limit_at_end)),
        sweep,
        runs,
    })
}

/// The sweep's best run among those that starved nobody (of all, where each starved some),
/// and the highest of all where that is another run.
fn best_of(sweep: &[Run]) -> (&Run, Option<&Run>) {
    fn top<'a>(it: impl Iterator<Item = &'a Run>) -> Option<&'a Run> {
        it.max_by(|a, b| a.throughput.total_cmp(&b.throughput))
    }
    let any = top(sweep.iter()).expect("at least one fixed limit");
    let fair = top(sweep.iter().filter(|r| r.starved == 0)).unwrap_or(any);
    (fair, (!std::ptr::eq(fair, any)).then_some(any))
}

struct Shared {
    stop: AtomicBool,
    /// The late clients of a step may start; they wait on `step_cv`, asleep (an idle
    /// connection uses no CPU, and a client polling for its start would be read by `auto`
    /// as load).
    stepped: Mutex<bool>,
    step_cv: Condvar,
    start: StartLine,
    /// Statements completed, per client.
    done: Vec<AtomicU64>,
    /// Statement latency, ns (all clients).
    latency: Histogram,
}

impl Shared {
    fn step(&self) {
        *self.stepped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.step_cv.notify_all();
    }
}

/// Runs `w` under `s` for a warm-up of a quarter of `window`, then `window` measured.
fn measure(w: &Workload, s: Setting, window: Duration) -> Result<Run, String> {
    let gate = s.gate();
    let _watched = crate::live::watch(format!("bench-auto/{}/{}", w.name, s.label()), &gate);
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        stepped: Mutex::new(w.step_from.is_none()),
        step_cv: Condvar::new(),
        start: StartLine::new(w.threads),
        done: (0..w.threads).map(|_| AtomicU64::new(0)).collect(),
        latency: Histogram::new(),
    });
    let iters = work::iterations_for(w.cpu_us / f64::from(CALLS));
    let (undeclared_us, declared_us) = w.waits_per_call_us();
    let waits = (
        Duration::from_secs_f64(undeclared_us / 1e6),
        Duration::from_secs_f64(declared_us / 1e6),
    );
    let early = w.step_from.unwrap_or(w.threads);
    let mut handles = Vec::with_capacity(w.threads);
    for t in 0..w.threads {
        let sh = shared.clone();
        let mut session = gate.session();
        let spawned = thread::Builder::new()
            .name(format!("client-{t}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                if !sh.start.ready() {
                    return;
                }
                if t >= early {
                    let mut go = sh.stepped.lock().unwrap_or_else(|p| p.into_inner());
                    while !*go {
                        go = sh.step_cv.wait(go).unwrap_or_else(|p| p.into_inner());
                    }
                }
                client(&sh, t, &mut session, iters, waits);
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.start.call_off();
                for h in handles {
                    let _ = h.join();
                }
                return Err(crate::start::refused(w.threads, &e));
            }
        }
    }
    shared.start.start();
    thread::sleep(window / 4);
    let before: Vec<u64> = shared
        .done
        .iter()
        .map(|d| d.load(Ordering::Relaxed))
        .collect();
    let lat0 = shared.latency.snapshot();
    let reasons0 = gate.stats().auto.map(|a| a.limit_reasons);
    let t0 = Instant::now();
    if w.step_from.is_some() {
        thread::sleep(window / 2);
        shared.step();
        thread::sleep(window - window / 2);
    } else {
        thread::sleep(window);
    }
    let secs = t0.elapsed().as_secs_f64();
    let per_client: Vec<u64> = shared
        .done
        .iter()
        .zip(&before)
        .map(|(d, b)| d.load(Ordering::Relaxed) - b)
        .collect();
    let lat = shared.latency.snapshot().since(&lat0);
    let limit_at_end = gate.limit();
    let limit_reasons = gate
        .stats()
        .auto
        .zip(reasons0)
        .map(|(a, b)| a.limit_reasons.since(&b));
    shared.stop.store(true, Ordering::Relaxed);
    // Late clients not yet started (a run called off early) start and see the stop.
    shared.step();
    for h in handles {
        h.join()
            .map_err(|_| "a client thread panicked".to_string())?;
    }
    let total: u64 = per_client.iter().sum();
    let throughput = total as f64 / secs;
    let fair_s = w.threads as f64 / throughput.max(f64::MIN_POSITIVE);
    // A client that should have completed at least three statements and completed none.
    let expected = secs / fair_s;
    let starved = if expected >= 3.0 {
        crate::stats::starved(&per_client[..early.min(per_client.len())])
    } else {
        0
    };
    Ok(Run {
        setting: s,
        throughput,
        mean_ms: lat.mean() / 1e6,
        p99_ms: lat.quantile(0.99) as f64 / 1e6,
        fair_ms: fair_s * 1e3,
        starved,
        limit_at_end,
        limit_reasons,
    })
}

fn client(
    sh: &Shared,
    t: usize,
    s: &mut turnstile::Session,
    iters: u64,
    (undeclared, declared): (Duration, Duration),
) {
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        let mut stmt = s.begin();
        for _ in 0..CALLS {
            let mut call = stmt.enter().expect("no timeout or cancel is set");
            work::spin(iters);
            if !undeclared.is_zero() {
                thread::sleep(undeclared); // the slot stays held
            }
            if !declared.is_zero() {
                call.step_out(StepOutReason::DiskIo, || thread::sleep(declared));
                call.resume().expect("no timeout or cancel is set");
            }
        }
        drop(stmt);
        sh.latency.record(began.elapsed().as_nanos() as u64);
        n += 1;
        sh.done[t].store(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_stops_at_the_first_limit_at_or_above_the_clients() {
        assert_eq!(fixed_limits(1), vec![1]);
        assert_eq!(fixed_limits(3), vec![1, 2, 4]);
        assert_eq!(fixed_limits(1024), FIXED_LIMITS.to_vec());
    }

    #[test]
    fn wait_shares_are_of_the_whole_statement() {
        let w = Workload::new("x", 100.0, 0.5, 0.25, 4);
        let (u, d) = w.waits_per_call_us();
        // 100 µs of CPU is a quarter of the statement: 400 µs in all, 200 undeclared and
        // 100 declared, over four calls.
        assert!(
            (u - 50.0).abs() < 1e-9 && (d - 25.0).abs() < 1e-9,
            "{u} {d}"
        );
    }

    #[test]
    fn bad_workloads_are_refused_with_their_name() {
        let mut c = SuiteConfig::quick();
        c.points[0].undeclared = 0.7;
        c.points[0].declared = 0.3;
        assert!(c.validate().unwrap_err().contains(&c.points[0].name));
        let mut c = SuiteConfig::quick();
        c.points[0].step_from = Some(c.points[0].threads);
        assert!(c.validate().unwrap_err().contains("step"));
        let mut c = SuiteConfig::quick();
        c.reps = 0;
        assert!(c.validate().is_err());
    }

    fn swept(policy: &'static str, limit: u32, throughput: f64, starved: usize) -> Run {
        Run {
            setting: Setting { policy, limit },
            throughput,
            mean_ms: 1.0,
            p99_ms: 1.0,
            fair_ms: 1.0,
            starved,
            limit_at_end: limit,
            limit_reasons: None,
        }
    }

    #[test]
    fn the_best_fixed_limit_is_the_fastest_that_starves_nobody() {
        let sweep = [
            swept("polling", 8, 300.0, 20),
            swept("polling", 32, 200.0, 0),
            swept("classic", 8, 150.0, 0),
        ];
        let (best, any) = best_of(&sweep);
        assert_eq!(best.setting, sweep[1].setting);
        assert_eq!(any.map(|r| r.setting), Some(sweep[0].setting));
        // Where the fastest starves nobody, it is the only best.
        let (best, any) = best_of(&sweep[1..]);
        assert_eq!((best.setting, any.is_none()), (sweep[1].setting, true));
        // Where every setting starves some, the fastest of all.
        let (best, any) = best_of(&sweep[..1]);
        assert_eq!((best.setting, any.is_none()), (sweep[0].setting, true));
    }

    #[test]
    fn a_tiny_suite_reports_every_run_and_pairs_auto_with_the_best_fixed_limit() {
        let cfg = SuiteConfig {
            points: vec![
                Workload::new("tiny", 20.0, 0.3, 0.2, 3),
                Workload::new("step", 20.0, 0.0, 0.0, 3).step_from(1),
            ],
            sweep: Duration::from_millis(20),
            window: Duration::from_millis(40),
            reps: 2,
        };
        let mut steps = 0;
        let r = run(&cfg, &mut |_| steps += 1).expect("a few threads start");
        assert_eq!(steps, cfg.points.iter().map(|p| cfg.runs(p)).sum::<usize>());
        for p in &r.points {
            assert_eq!(p.sweep.len(), 6, "polling and classic at 1, 2, 4");
            assert_eq!(p.runs.len(), 4);
            assert_eq!(p.best, best_of(&p.sweep).0.setting);
            for (i, run) in p.runs.iter().enumerate() {
                let want = if i % 2 == 0 { Setting::AUTO } else { p.best };
                assert_eq!(run.setting, want, "alternated");
            }
            for run in p.sweep.iter().chain(&p.runs) {
                if run.setting.limit > 0 {
                    assert_eq!(run.limit_at_end, run.setting.limit, "a fixed limit stays");
                }
            }
        }
    }
}
