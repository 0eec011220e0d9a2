//! `turnstile bench auto`: the generalization suite (see `turnstile_bench::auto_suite`), with
//! its table, chart and JSON.

use std::fmt::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use turnstile_bench::auto_suite::{self, SuiteConfig, SuiteReport};
use turnstile_bench::chart::CellGrid;

/// What the suite asks of `auto` at every point: this share of the best fixed limit's
/// throughput, and a p99 within this many fair shares.
const TARGET_RATIO: f64 = 0.95;
const TARGET_P99_FAIR: f64 = 2.0;

#[derive(Args)]
pub struct AutoArgs {
    /// Seven points, shorter runs: about a fifth of the full grid's time.
    #[arg(long)]
    quick: bool,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Only the points whose name contains one of these (comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Option<Vec<String>>,
    /// Alternated pairs of `auto` and the best fixed limit per point (the median is
    /// reported).
    #[arg(long)]
    reps: Option<usize>,
    /// Measured time of each alternated run, milliseconds (a sweep run is half of it).
    #[arg(long)]
    window_ms: Option<u64>,
    /// Folder for the chart (`auto-suite.svg`) and `results.json`.
    #[arg(long, default_value = "reports/bench-auto")]
    out: PathBuf,
}

impl AutoArgs {
    fn config(&self) -> Result<SuiteConfig, String> {
        let mut c = if self.quick {
            SuiteConfig::quick()
        } else {
            SuiteConfig::full()
        };
        if let Some(only) = &self.only {
            c.points
                .retain(|p| only.iter().any(|o| p.name.contains(o.as_str())));
            if c.points.is_empty() {
                return Err(format!("no point's name contains any of {only:?}"));
            }
        }
        c.reps = self.reps.unwrap_or(c.reps);
        if let Some(ms) = self.window_ms {
            c.window = Duration::from_millis(ms);
            c.sweep = c.window / 2;
        }
        c.validate()?;
        Ok(c)
    }
}

pub fn run(args: &AutoArgs) -> Result<(), String> {
    let cfg = args.config()?;
    let mut progress = crate::Progress::new(cfg.points.iter().map(|p| cfg.runs(p)).sum());
    let report = auto_suite::run(&cfg, &mut |s| progress.step(s));
    progress.finish();
    let report = report?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let chart = args.out.join("auto-suite.svg");
    grid(&report).write_svg(&chart)?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n";
    let saved = args.out.join("results.json");
    std::fs::write(&saved, &json).map_err(|e| format!("cannot write {}: {e}", saved.display()))?;
    eprintln!("wrote {} and {}", saved.display(), chart.display());
    crate::emit(args.json, &report, table(&report))
}

fn grid(r: &SuiteReport) -> CellGrid {
    CellGrid {
        title: format!(
            "auto ÷ the best fixed limit ({} CPUs; green ≥ {TARGET_RATIO})",
            r.machine.cpus
        ),
        columns: 4,
        target: TARGET_RATIO,
        floor: 0.7,
        cells: r
            .points
            .iter()
            .map(|p| {
                (
                    vec![
                        p.workload.name.clone(),
                        format!("{:.2} of {}", p.ratio, p.best.label()),
                        format!(
                            "limit {:.0}, p99 {:.1} × fair",
                            p.auto_limit, p.p99_over_fair
                        ),
                        format!(
                            "mean {:.2} × the best's, {:.2} × fair",
                            p.mean_ratio, p.mean_over_fair
                        ),
                    ],
                    p.ratio,
                )
            })
            .collect(),
    }
}

fn table(r: &SuiteReport) -> String {
    let mut s = String::new();
    let c = &r.config;
    let _ = writeln!(
        s,
        "turnstile bench auto — {} CPUs, {}; sweep {} ms per fixed limit, then {} alternated pairs of {} ms",
        r.machine.cpus,
        r.machine.os,
        c.sweep.as_millis(),
        c.reps,
        c.window.as_millis()
    );
    let _ = writeln!(
        s,
        "{:<30} {:>12} {:>11} {:>7} {:>10} {:>10} {:>10} {:>8} {:>5}",
        "workload",
        "best fixed",
        "auto÷best",
        "limit",
        "mean/best",
        "mean/fair",
        "p99/fair",
        "starved",
        "met"
    );
    let mut missed = 0;
    for p in &r.points {
        let met = p.ratio >= TARGET_RATIO && p.p99_over_fair <= TARGET_P99_FAIR && p.starved == 0;
        missed += usize::from(!met);
        let _ = writeln!(
            s,
            "{:<30} {:>12} {:>11.3} {:>7.0} {:>10.2} {:>10.2} {:>10.2} {:>8} {:>5}",
            p.workload.name,
            p.best.label(),
            p.ratio,
            p.auto_limit,
            p.mean_ratio,
            p.mean_over_fair,
            p.p99_over_fair,
            p.starved,
            if met { "yes" } else { "no" }
        );
    }
    let _ = writeln!(s, "\nauto's limit moves in each of its runs, by rule:");
    for p in &r.points {
        let runs: Vec<String> = p
            .runs
            .iter()
            .filter_map(|run| run.limit_reasons.as_ref())
            .map(turnstile_bench::gate::limit_reasons_text)
            .collect();
        let _ = writeln!(s, "  {}: {}", p.workload.name, runs.join(" | "));
    }
    for p in &r.points {
        if let Some((any, over, starved)) = p.best_any {
            let _ = writeln!(
                s,
                "  {}: {} made {over:.2} × {}'s throughput in the sweep but starved {starved} clients, so it is not the best",
                p.workload.name,
                any.label(),
                p.best.label()
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{} of {} points meet auto ≥ {TARGET_RATIO} × the best fixed limit that starves nobody, p99 ≤ {TARGET_P99_FAIR} × the fair share (threads ÷ throughput), nobody starved.",
        r.points.len() - missed,
        r.points.len()
    );
    s
}
