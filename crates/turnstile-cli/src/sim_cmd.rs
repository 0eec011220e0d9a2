//! `turnstile sim …`: the discrete-event simulator's scenarios.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::de::DeserializeOwned;
use turnstile_bench::chart::{LineChart, Series};

use crate::emit;
use turnstile_sim::scenarios::{self, MvaParams, OltpParams, PileupParams, TicketsParams};

#[derive(Clone, Copy, ValueEnum)]
pub enum Scenario {
    /// Seed 000 at its scale: two full scans, limit 1, tickets 500 and 10M, wake-up sweep.
    Tickets,
    /// Seed 001 at its scale: 8 cores, FIFO vs FLIFO, 1…1024 threads, 180 s each.
    Oltp,
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
    /// Run this many seeds (1, 2, …) and report the mean and a 95 % confidence interval.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
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

/// Runs a sim command.
pub fn run(a: &SimArgs) -> Result<(), String> {
    if a.seeds == 0 || a.seeds > 1000 {
        return Err("--seeds must be between 1 and 1000".into());
    }
    match a.scenario {
        Scenario::MvaCheck => {
            let mut p: MvaParams = load(&a.config)?;
            if a.quick {
                p.completions = p.completions.min(20_000);
            }
            let r = scenarios::mva_check(&p)?;
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
            s.push_str(&speed_line(&r.speed));
            emit(a.json, &r, s)
        }
        Scenario::Tickets => {
            let mut p: TicketsParams = load(&a.config)?;
            if a.quick {
                p.rows = p.rows.min(1_000_000);
            }
            let r = scenarios::tickets(&p)?;
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
                    x.tickets,
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
            s.push_str(&speed_line(&r.speed));
            emit(a.json, &r, s)
        }
        Scenario::Oltp => {
            let mut p: OltpParams = load(&a.config)?;
            if a.quick {
                p.seconds = p.seconds.min(10.0);
            }
            let mut reports = Vec::new();
            for i in 0..a.seeds {
                p.seed = 1 + i;
                reports.push(scenarios::oltp(&p)?);
            }
            let r = &reports[0];
            let mut s = format!(
                "Seed 001 simulated: {} cores, {} s per point, {} seed(s). Seed TPS at 1…1024 threads, FLIFO: 186 343 571 708 719 666 575 590 611 613 637; FIFO: 181 335 517 646 625 649 659 580 515 432 255.\n\n\
                 | setting | threads | TPS (95 % CI) | mean ms | mean inside | hand-off latency µs | LIFO/s | Little |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
                p.machine.cores, p.seconds, a.seeds
            );
            for (i, x) in r.runs.iter().enumerate() {
                let (m, h) = ci(&reports
                    .iter()
                    .map(|rep| rep.runs[i].tps)
                    .collect::<Vec<_>>());
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.1} ± {:.1} | {:.1} | {:.1} | {:.0} | {:.0} | {:+.3} % |",
                    x.policy,
                    x.threads,
                    m,
                    h,
                    x.mean_ms,
                    x.mean_inside,
                    x.wake_latency_us,
                    x.lifo_per_s,
                    100.0 * x.little_err
                );
            }
            for set in &p.settings {
                let pts: Vec<_> = r.runs.iter().filter(|x| x.policy == set.name).collect();
                if let (Some(peak), Some(last)) = (
                    pts.iter().map(|x| x.tps).reduce(f64::max),
                    pts.iter().max_by_key(|x| x.threads),
                ) {
                    let _ = writeln!(
                        s,
                        "\n{}: {:.0} % of its peak at {} threads",
                        set.name,
                        100.0 * last.tps / peak,
                        last.threads
                    );
                }
            }
            s.push_str(&speed_line(&r.speed));
            eprintln!("chart: {}", oltp_chart(r, &a.out)?);
            emit(a.json, r, s)
        }
        Scenario::Pileup => {
            let mut p: PileupParams = load(&a.config)?;
            if a.quick {
                p.seconds = p.seconds.min(5.0);
            }
            let r = scenarios::pileup(&p)?;
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
            s.push_str(&speed_line(&r.speed));
            emit(a.json, &r, s)
        }
    }
}

fn oltp_chart(r: &scenarios::OltpReport, dir: &Path) -> Result<String, String> {
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
                .map(|x| (x.threads as f64, x.tps))
                .collect(),
        })
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
