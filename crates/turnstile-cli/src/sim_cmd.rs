//! `turnstile sim …`: the discrete-event simulator's scenarios.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::de::DeserializeOwned;
use turnstile_bench::chart::{LineChart, Series};

use crate::emit;
use turnstile_sim::machine::MachineConfig;
use turnstile_sim::scenarios::{
    self, MvaParams, OltpParams, OltpSetting, PileupParams, TicketsParams, TimerParams,
};

#[derive(Clone, Copy, ValueEnum)]
pub enum Scenario {
    /// Seed 000 at its scale: two full scans, limit 1, tickets 500 and 10M, wake-up sweep.
    Tickets,
    /// Seed 001 at its scale: 8 cores, FIFO vs FLIFO, 1…1024 threads, a forced exit per row
    /// sent (MySQL 5.0's server layer).
    Oltp,
    /// Seed 003: MySQL 5.4's timer gate against the 5.0 gate and its mutex, 32/64/128 threads.
    Timer,
    /// Seed 004 at its scale: 4 cores, limit 8, 4/8/16 tables, slot held or released.
    Pileup,
    /// Zero overheads against exact Mean Value Analysis and Little's law, N = 1…256.
    MvaCheck,
}

#[derive(Args)]
pub struct SimArgs {
    /// The scenario.
    #[arg(value_enum)]
    scenario: Scenario,
    /// A TOML file overriding any of the scenario's parameters (see docs/SIMULATOR.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
    /// Smaller runs (seconds instead of minutes of simulated time).
    #[arg(long)]
    quick: bool,
    /// Run this many seeds (the config's `seed`, 1 by default, then the next ones) and report
    /// the mean and a 95 % confidence interval of the headline figure; with `--json`, an
    /// array of one report per seed.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// A calibration (`turnstile calibrate --out FILE`): its `[machine]` table replaces the
    /// scenario's machine, except the core count, which stays the scenario's unless `--cores`.
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// Cores of the simulated machine (overrides the scenario's and the calibration's).
    #[arg(long)]
    cores: Option<u32>,
    /// `oltp`: the gate settings to run (comma-separated): classic (seed 001's FIFO), flifo,
    /// polling, timer, unlimited, auto, and auto@L for `auto` with its limit fixed at L (the
    /// sweep `auto`'s own limit is judged against). Default: classic,flifo (or the --config
    /// file's).
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// `oltp`: thread counts (comma-separated). Default: the seed's 1…1024.
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// `oltp`: the server layer's row-send setting for every setting: force-exit or keep.
    #[arg(long)]
    row_send: Option<String>,
    /// `oltp`: a `turnstile repro oltp --json` report to put beside the simulation (table of
    /// ratios and one chart with both curves).
    #[arg(long, value_name = "FILE")]
    compare: Option<PathBuf>,
    /// Folder for the charts.
    #[arg(long, default_value = "reports/sim")]
    out: PathBuf,
}

fn load<T: DeserializeOwned + Default>(path: &Option<PathBuf>) -> Result<T, String> {
    match path {
        None => Ok(T::default()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
        }
    }
}

/// Mean and 95 % confidence half-width (normal approximation) of `xs`.
fn ci(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, 1.96 * (var / n).sqrt())
}

fn speed_line(s: &scenarios::Speed) -> String {
    format!(
        "\n{} events in {:.2} s of wall time: {:.1} million events/s\n",
        s.events,
        s.wall_s,
        s.events_per_s / 1e6
    )
}

/// A calibration file: its `[machine]` table (other tables, the raw measurements, ignored).
#[derive(serde::Deserialize)]
struct Calibration {
    machine: MachineConfig,
}

impl SimArgs {
    /// Applies `--machine` and `--cores` to a scenario's machine.
    fn machine(&self, m: &mut MachineConfig) -> Result<(), String> {
        if let Some(path) = &self.machine {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let c: Calibration = toml::from_str(&text).map_err(|e| {
                format!(
                    "{}: not a calibration (a [machine] table as `turnstile calibrate` writes): {e}",
                    path.display()
                )
            })?;
            let cores = m.cores;
            *m = c.machine;
            m.cores = cores;
        }
        if let Some(c) = self.cores {
            m.cores = c;
        }
        m.validate()
    }

    /// Rejects flags the scenario does not use, instead of ignoring them.
    fn check_flags(&self) -> Result<(), String> {
        let oltp_only = [
            ("--policies", self.policies.is_some()),
            ("--threads", self.threads.is_some()),
            ("--row-send", self.row_send.is_some()),
            ("--compare", self.compare.is_some()),
        ];
        let is_oltp = matches!(self.scenario, Scenario::Oltp);
        let is_timer = matches!(self.scenario, Scenario::Timer);
        for (flag, given) in oltp_only {
            let allowed = is_oltp || (is_timer && matches!(flag, "--threads" | "--row-send"));
            if given && !allowed {
                return Err(format!("{flag} applies to `sim oltp` only"));
            }
        }
        if matches!(self.scenario, Scenario::MvaCheck)
            && (self.machine.is_some() || self.cores.is_some())
        {
            return Err(
                "mva-check runs an ideal one-core machine (every overhead zero): --machine and --cores do not apply"
                    .into(),
            );
        }
        Ok(())
    }
}

fn row_send(name: &str) -> Result<turnstile_sim::workload::RowSend, String> {
    use turnstile_sim::workload::RowSend;
    match name {
        "force-exit" => Ok(RowSend::ForceExit),
        "keep" => Ok(RowSend::Keep),
        _ => Err(format!("--row-send {name}: force-exit or keep")),
    }
}

/// Runs `f` for seeds `base`, `base` + 1, … (k of them; `base` is the scenario's own seed,
/// 1 unless its config says otherwise), in order.
fn per_seed<P: Clone, R>(
    p: &P,
    base: u64,
    k: u64,
    set_seed: impl Fn(&mut P, u64),
    f: impl Fn(&P) -> Result<R, String>,
) -> Result<Vec<R>, String> {
    (0..k)
        .map(|i| {
            let seed = base.wrapping_add(i);
            let mut q = p.clone();
            set_seed(&mut q, seed);
            f(&q)
        })
        .collect()
}

/// Emits one report, or with `--json` and several seeds, all of them.
fn emit_seeds<T: serde::Serialize>(
    json: bool,
    reports: &[T],
    mut text: String,
    first_seed: u64,
) -> Result<(), String> {
    if reports.len() == 1 {
        emit(json, &reports[0], text)
    } else {
        // Only the columns given as mean ± 95 % CI are taken across the seeds.
        text.push_str(&format!(
            "\nOver {} seeds: figures shown as mean ± 95 % CI are across them; every other figure above is the first seed's (seed {first_seed}). `--json` gives each seed's report.\n",
            reports.len()
        ));
        emit(json, &reports, text)
    }
}

/// A column's mean and 95 % interval across seeds, formatted.
fn across<T>(reports: &[T], f: impl Fn(&T) -> f64) -> String {
    let (m, h) = ci(&reports.iter().map(f).collect::<Vec<_>>());
    if reports.len() > 1 {
        format!("{m:.2} ± {h:.2}")
    } else {
        format!("{m:.2}")
    }
}

/// Runs a sim command.
pub fn run(a: &SimArgs) -> Result<(), String> {
    if a.seeds == 0 || a.seeds > 1000 {
        return Err("--seeds must be between 1 and 1000".into());
    }
    a.check_flags()?;
    match a.scenario {
        Scenario::MvaCheck => {
            let mut p: MvaParams = load(&a.config)?;
            if a.quick {
                p.completions = p.completions.min(20_000);
            }
            let reps = per_seed(&p, p.seed, a.seeds, |p, s| p.seed = s, scenarios::mva_check)?;
            let r = &reps[0];
            let mut s = String::from(
                "MVA check: one core, CPU and disk FCFS with exponential demands, exponential think time, every overhead at zero.\n\n\
                 | N | sim X/s | MVA X/s | err | sim R ms | MVA R ms | err | Little |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            );
            for x in &r.points {
                let _ = writeln!(
                    s,
                    "| {} | {:.2} | {:.2} | {:+.2} % | {:.3} | {:.3} | {:+.2} % | {:+.4} % |",
                    x.n,
                    x.sim_throughput,
                    x.mva_throughput,
                    100.0 * x.rel_err,
                    x.sim_response_ms,
                    x.mva_response_ms,
                    100.0 * x.response_rel_err,
                    100.0 * x.little_err
                );
            }
            if reps.len() > 1 {
                let _ = writeln!(
                    s,
                    "\nThroughput error across {} seeds (mean ± 95 % CI, %):\n",
                    reps.len()
                );
                for (i, x) in r.points.iter().enumerate() {
                    let _ = writeln!(
                        s,
                        "- N = {}: {}",
                        x.n,
                        across(&reps, |q| 100.0 * q.points[i].rel_err)
                    );
                }
            }
            s.push_str(&speed_line(&r.speed));
            emit_seeds(a.json, &reps, s, p.seed)
        }
        Scenario::Tickets => {
            let mut p: TicketsParams = load(&a.config)?;
            a.machine(&mut p.machine)?;
            if a.quick {
                p.rows = p.rows.min(1_000_000);
            }
            let reps = per_seed(&p, p.seed, a.seeds, |p, s| p.seed = s, scenarios::tickets)?;
            let r = &reps[0];
            let mut s = format!(
                "Seed 000 simulated: {} rows at {} ns each, {} cores, {} gate, limit 1, sleep {} µs. Seed: alone 16.2 s; 500 tickets 95.5 / 92.9 s; 10,000,000 tickets 16.1 / 30.6 s.\n\n\
                 | wake base µs | tickets | alone s | concurrent s | ÷ alone | admissions/scan | sleeps | queue waits | hand-off latency µs |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|\n",
                p.rows, p.row_ns, p.machine.cores, p.policy, p.sleep_delay_us
            );
            for x in &r.runs {
                let slow = x.concurrent_s.iter().copied().fold(0.0, f64::max);
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.2} | {} | {:.2} | {:.0} | {} | {} | {:.0} |",
                    x.wake_base_us,
                    x.tickets
                        .map_or_else(|| "– (quantum)".to_string(), |t| t.to_string()),
                    x.alone_s,
                    x.concurrent_s
                        .iter()
                        .map(|v| format!("{v:.2}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    slow / x.alone_s,
                    x.handoffs,
                    x.sleeps,
                    x.queue_waits,
                    x.wake_latency_us
                );
            }
            if reps.len() > 1 {
                let _ = writeln!(
                    s,
                    "\nSlowest concurrent scan ÷ alone across {} seeds (mean ± 95 % CI):\n",
                    reps.len()
                );
                for (i, x) in r.runs.iter().enumerate() {
                    let _ = writeln!(
                        s,
                        "- wake {} µs, {}: {}",
                        x.wake_base_us,
                        x.tickets
                            .map_or_else(|| "its quantum".to_string(), |t| format!("{t} tickets")),
                        across(&reps, |q| {
                            let y = &q.runs[i];
                            y.concurrent_s.iter().copied().fold(0.0, f64::max) / y.alone_s
                        })
                    );
                }
            }
            s.push_str(&speed_line(&r.speed));
            emit_seeds(a.json, &reps, s, p.seed)
        }
        Scenario::Timer => {
            let mut p: TimerParams = load(&a.config)?;
            a.machine(&mut p.oltp.machine)?;
            if let Some(t) = &a.threads {
                p.threads = t.clone();
            }
            if let Some(rs) = &a.row_send {
                p.row_send = row_send(rs)?;
            }
            if a.quick {
                p.oltp.seconds = p.oltp.seconds.min(5.0);
            }
            let reps = per_seed(
                &p,
                p.oltp.seed,
                a.seeds,
                |p, s| p.oltp.seed = s,
                scenarios::timer,
            )?;
            let r = &reps[0];
            let mut s = format!(
                "Seed 003 simulated: MySQL 5.4's timer gate against the 5.0 gate and its srv_conc_mutex, {} cores, limit {}, sysbench read-only (seed 001's transaction, assumed), rows sent: {}, {} s per point. Seed: +5 / +10 / +15 % at 32 / 64 / 128 threads.\n\n\
                 | threads | mutex gate TPS | timer gate TPS | gain (seeds: mean ± CI) | seed | without the mutex | mutex waits/txn | cs/txn mutex gate | cs/txn timer |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                p.oltp.machine.cores, p.limit, p.row_send.name(), p.oltp.seconds
            );
            for (i, x) in r.points.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "| {} | {:.0} | {:.0} | {} % | {} | {:+.1} % | {:.1} | {:.0} | {:.0} |",
                    x.threads,
                    x.mutex_gate.w.tps,
                    x.timer_gate.w.tps,
                    across(&reps, |q| q.points[i].gain_pct),
                    x.seed_gain_pct.map_or("".into(), |g| format!("+{g:.0} %")),
                    x.mutex_share_pct,
                    x.mutex_gate.w.mutex_waits_per_txn,
                    x.mutex_gate.w.cs_per_txn,
                    x.timer_gate.w.cs_per_txn,
                );
            }
            s.push_str(&speed_line(&r.speed));
            emit_seeds(a.json, &reps, s, p.oltp.seed)
        }
        Scenario::Oltp => {
            crate::repro_cmd::check_writable("chart folder", &a.out)?;
            let mut p: OltpParams = load(&a.config)?;
            a.machine(&mut p.machine)?;
            if let Some(names) = &a.policies {
                p.settings = names
                    .iter()
                    .map(|n| OltpSetting::by_name(n))
                    .collect::<Result<_, _>>()?;
            }
            if let Some(t) = &a.threads {
                p.threads = t.clone();
            }
            if let Some(rs) = &a.row_send {
                let rs = row_send(rs)?;
                p.settings.iter_mut().for_each(|x| x.row_send = rs);
            }
            if a.quick {
                p.seconds = p.seconds.min(5.0);
            }
            let real = a.compare.as_deref().map(read_repro).transpose()?;
            let reps = per_seed(&p, p.seed, a.seeds, |p, s| p.seed = s, scenarios::oltp)?;
            let r = &reps[0];
            let mut s = format!(
                "Seed 001 simulated: {} cores, {} s per point, {} seed(s). Seed TPS at 1…1024 threads, FLIFO: 186 343 571 708 719 666 575 590 611 613 637; FIFO: 181 335 517 646 625 649 659 580 515 432 255. Seed cs/txn at 1024 threads: FIFO ≈ 937, FLIFO ≈ 105.\n\n\
                 | setting | rows sent | threads | TPS (95 % CI) | cs/txn | adm/txn | mutex waits/txn | idle % | switch % | mean inside | hand-off µs | starved | Jain | Little |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                p.machine.cores, p.seconds, a.seeds
            );
            for (i, x) in r.runs.iter().enumerate() {
                let w = &x.w;
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.0} | {} | {:.3} | {:+.2} % |",
                    x.policy,
                    x.row_send,
                    x.threads,
                    across(&reps, |q| q.runs[i].w.tps),
                    w.cs_per_txn,
                    w.admissions_per_txn,
                    w.mutex_waits_per_txn,
                    w.idle_pct,
                    w.switch_pct,
                    w.mean_inside,
                    w.wake_latency_us,
                    w.starved_clients,
                    w.jain,
                    100.0 * w.little_err
                );
            }
            for set in &p.settings {
                let pts: Vec<_> = r.runs.iter().filter(|x| x.policy == set.name).collect();
                if let (Some(peak), Some(last)) = (
                    pts.iter()
                        .map(|x| x.w.tps)
                        .reduce(f64::max)
                        .filter(|&p| p > 0.0),
                    pts.iter().max_by_key(|x| x.threads),
                ) {
                    let _ = writeln!(
                        s,
                        "\n{}: {:.0} % of its peak at {} threads ({:.0} cs/txn)",
                        set.name,
                        100.0 * last.w.tps / peak,
                        last.threads,
                        last.w.cs_per_txn
                    );
                }
            }
            s.push_str(&versus_fixed(r));
            s.push_str(&census_table(r, real.as_deref()));
            if let Some(real) = &real {
                s.push_str(&compare_table(r, real));
            }
            s.push_str(&speed_line(&r.speed));
            eprintln!("chart: {}", oltp_chart(r, real.as_deref(), &a.out)?);
            emit_seeds(a.json, &reps, s, p.seed)
        }
        Scenario::Pileup => {
            let mut p: PileupParams = load(&a.config)?;
            a.machine(&mut p.machine)?;
            if a.quick {
                p.seconds = p.seconds.min(5.0);
            }
            let reps = per_seed(&p, p.seed, a.seeds, |p, s| p.seed = s, scenarios::pileup)?;
            let r = &reps[0];
            let base = |mode: &str| {
                r.runs
                    .iter()
                    .find(|x| x.mode == mode && Some(x.tables) == p.tables.first().copied())
                    .map_or(f64::NAN, |x| x.queries_per_s)
            };
            let mut s = format!(
                "Seed 004 simulated: {} cores, limit {}, fsync {} ms, {} s per run. Seed: 4 tables 10,000 q/s; 8: 2,400; 16: 8 (fixed: 10,000 at every N); ~16 inserts/s.\n\n\
                 | tables | mode | inserts/s | queries/s | ÷ first | mean inside |\n|---:|---|---:|---:|---:|---:|\n",
                p.machine.cores, p.limit, p.fsync_ms, p.seconds
            );
            for x in &r.runs {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.1} | {:.1} | {:.5} | {:.2} |",
                    x.tables,
                    x.mode,
                    x.inserts_per_s,
                    x.queries_per_s,
                    x.queries_per_s / base(x.mode),
                    x.mean_inside
                );
            }
            if reps.len() > 1 {
                let _ = writeln!(
                    s,
                    "\nQueries/s across {} seeds (mean ± 95 % CI):\n",
                    reps.len()
                );
                for (i, x) in r.runs.iter().enumerate() {
                    let _ = writeln!(
                        s,
                        "- {} tables, {}: {}",
                        x.tables,
                        x.mode,
                        across(&reps, |q| q.runs[i].queries_per_s)
                    );
                }
            }
            s.push_str(&speed_line(&r.speed));
            emit_seeds(a.json, &reps, s, p.seed)
        }
    }
}

/// One point of a `repro oltp --json` report.
#[derive(Debug, Clone, serde::Deserialize)]
struct RealPoint {
    policy: String,
    threads: usize,
    tps: f64,
    #[serde(default)]
    cs_per_txn: Option<f64>,
    /// The sampled census (reports from before it existed have none).
    #[serde(default)]
    census: Option<RealCensus>,
}

/// `repro oltp`'s census of one point (time means).
#[derive(Debug, Clone, Copy, serde::Deserialize)]
struct RealCensus {
    runnable: Option<f64>,
    inside: f64,
    woken: f64,
    queued: f64,
    sleeping: f64,
    /// Waiting for the gate's own lock (reports from before it was counted have none).
    #[serde(default)]
    on_gate_lock: Option<f64>,
}

#[derive(serde::Deserialize)]
struct RealReport {
    runs: Vec<RealPoint>,
}

fn read_repro(path: &Path) -> Result<Vec<RealPoint>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let r: RealReport = serde_json::from_str(&text).map_err(|e| {
        format!(
            "{}: not a `turnstile repro oltp --json` report: {e}",
            path.display()
        )
    })?;
    Ok(r.runs)
}

/// `auto` against the best of the fixed limits run beside it (`auto@L`), at each thread
/// count both ran: the target "≥ 95 % of the best fixed limit" in the model. Empty unless
/// the report has `auto` and at least one `auto@L`.
fn versus_fixed(r: &scenarios::OltpReport) -> String {
    let mut s = String::new();
    for a in r.runs.iter().filter(|x| x.policy == "auto") {
        let best = r
            .runs
            .iter()
            .filter(|x| x.threads == a.threads && x.policy.starts_with("auto@"))
            .max_by(|x, y| x.w.tps.total_cmp(&y.w.tps));
        if let Some(b) = best {
            if s.is_empty() {
                s.push('\n');
            }
            let _ = writeln!(
                s,
                "auto at {} threads: {:.1} % of the best fixed limit ({}, {:.0} TPS); its limit ended at {}",
                a.threads,
                100.0 * a.w.tps / b.w.tps,
                b.policy,
                b.w.tps,
                a.w.limit_end
            );
        }
    }
    s
}

/// Where the threads were (census means), per setting and thread count; with a real report
/// that has a census, each cell is `sim / real`.
fn census_table(r: &scenarios::OltpReport, real: Option<&[RealPoint]>) -> String {
    let mut s = String::from(
        "\nWhere the threads were (means over the window: runnable = running or waiting for a core; inside = the gate's count, woken included; woken = granted a slot, not yet running; on gate mutex = asleep on the gate's own mutex in the model, waiting for it (spinning or asleep) in the real engine)",
    );
    s.push_str(
        if real.is_some_and(|r| r.iter().any(|y| y.census.is_some())) {
            "; sim / real:\n\n"
        } else {
            ":\n\n"
        },
    );
    s.push_str("| setting | threads | runnable | inside | woken | queued | sleeping | on gate mutex |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for x in &r.runs {
        let c = &x.w.census;
        let y = real
            .and_then(|rs| {
                rs.iter()
                    .find(|y| y.policy == x.policy && y.threads == x.threads)
            })
            .and_then(|y| y.census);
        let cell = |sim: f64, real: Option<f64>| match (y.is_some(), real) {
            (true, Some(v)) => format!("{sim:.1} / {v:.1}"),
            (true, None) => format!("{sim:.1} / —"),
            (false, _) => format!("{sim:.1}"),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            x.policy,
            x.threads,
            cell(c.runnable, y.and_then(|y| y.runnable)),
            cell(c.inside, y.map(|y| y.inside)),
            cell(c.woken, y.map(|y| y.woken)),
            cell(c.queued, y.map(|y| y.queued)),
            cell(c.sleeping, y.map(|y| y.sleeping)),
            cell(c.mutex_sleepers, y.and_then(|y| y.on_gate_lock)),
        );
    }
    s
}

/// The simulation beside the real engine: TPS and cs/txn ratios per setting and thread count.
fn compare_table(r: &scenarios::OltpReport, real: &[RealPoint]) -> String {
    let mut s = String::from(
        "\nSimulated against the real engine (`--compare`): sim ÷ real.\n\n\
         | setting | threads | sim TPS | real TPS | TPS ratio | sim cs/txn | real cs/txn | cs ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let (mut worst_tps, mut worst_cs) = (0.0f64, 1.0f64);
    let mut compared = 0;
    for x in &r.runs {
        let Some(y) = real
            .iter()
            .find(|y| y.policy == x.policy && y.threads == x.threads)
        else {
            continue;
        };
        let tr = x.w.tps / y.tps.max(1e-9);
        compared += 1;
        worst_tps = worst_tps.max((tr - 1.0).abs());
        // Below one switch per transaction on either side there is nothing to compare.
        let (real_cs, cr) = match y.cs_per_txn {
            Some(c) if c >= 1.0 && x.w.cs_per_txn >= 1.0 => {
                let cr = x.w.cs_per_txn / c;
                worst_cs = worst_cs.max(cr.max(1.0 / cr.max(1e-9)));
                (format!("{c:.0}"), format!("{cr:.2}"))
            }
            Some(c) => (format!("{c:.1}"), "—".into()),
            None => ("".into(), "".into()),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {:.2} | {:.0} | {} | {} |",
            x.policy, x.threads, x.w.tps, y.tps, tr, x.w.cs_per_txn, real_cs, cr
        );
    }
    if compared == 0 {
        let _ = writeln!(
            s,
            "\nNo point compared: the real report has none of these settings at these thread counts."
        );
        return s;
    }
    let _ = writeln!(
        s,
        "\nLargest TPS error {:.0} % over {compared} points; largest cs/txn factor {:.2}× (where both make at least one switch per transaction).",
        100.0 * worst_tps,
        worst_cs
    );
    s
}

fn oltp_chart(
    r: &scenarios::OltpReport,
    real: Option<&[RealPoint]>,
    dir: &Path,
) -> Result<String, String> {
    let mut names: Vec<&str> = Vec::new();
    for x in &r.runs {
        if !names.contains(&x.policy.as_str()) {
            names.push(&x.policy);
        }
    }
    let series = names
        .iter()
        .map(|n| Series {
            name: format!("sim {n}"),
            points: r
                .runs
                .iter()
                .filter(|x| x.policy == *n)
                .map(|x| (x.threads as f64, x.w.tps))
                .collect(),
        })
        .chain(names.iter().filter_map(|n| {
            let pts: Vec<(f64, f64)> = real?
                .iter()
                .filter(|y| y.policy == *n)
                .map(|y| (y.threads as f64, y.tps))
                .collect();
            (!pts.is_empty()).then(|| Series {
                name: format!("real {n}"),
                points: pts,
            })
        }))
        .collect();
    let path = dir.join("sim-oltp-tps.svg");
    LineChart {
        title: format!(
            "Simulated OLTP read-only, {} cores: TPS against threads",
            r.params.machine.cores
        ),
        x_label: "client threads".into(),
        y_label: "TPS".into(),
        log_y: false,
        linear_x: false,
        series,
    }
    .write_svg(&path)?;
    Ok(path.display().to_string())
}
