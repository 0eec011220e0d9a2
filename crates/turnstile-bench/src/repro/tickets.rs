//! Seed 000: `SELECT COUNT(*)` alone, then two at once, through a gate of limit 1, with 500 and
//! 10,000,000 tickets, for every policy. Each row fetched is one enter/exit, so with 500
//! tickets a scan gives up its slot every 501 rows.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::Connection;

use super::{join_all, stopped, Common, Progress, ReproError};
use crate::stats::median;

/// The table the scans read.
pub const TABLE: &str = "sbtest_scan";

/// Settings.
#[derive(Debug, Clone, Serialize)]
pub struct TicketsConfig {
    /// Rows in the scanned table.
    pub rows: u32,
    /// Policies to run.
    #[serde(serialize_with = "crate::repro::tickets::ser_policies")]
    pub policies: Vec<Policy>,
    /// Ticket settings to run (the seed's 500 and 10,000,000).
    pub tickets: Vec<u32>,
    /// Repetitions of the lone scan (the median is reported).
    pub alone_reps: usize,
}

pub(crate) fn ser_policies<S: serde::Serializer>(p: &[Policy], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(p.iter().map(|p| p.name()))
}

impl TicketsConfig {
    /// Defaults: 2,000,000 rows (about two minutes in all on two cores, after a one-time load).
    pub fn full() -> Self {
        TicketsConfig {
            rows: 2_000_000,
            policies: Policy::ALL.to_vec(),
            tickets: vec![500, 10_000_000],
            alone_reps: 3,
        }
    }

    /// Under a minute: 200,000 rows, one lone scan each.
    pub fn quick() -> Self {
        TicketsConfig {
            rows: 200_000,
            alone_reps: 1,
            ..TicketsConfig::full()
        }
    }
}

/// One policy × tickets run (`auto`: one run, its time quantum in place of tickets).
#[derive(Debug, Clone, Serialize)]
pub struct TicketsRun {
    /// Policy.
    pub policy: &'static str,
    /// Tickets; `null` for `auto`, whose slot is held for a time quantum instead.
    pub tickets: Option<u32>,
    /// Rows per scan.
    pub rows: u64,
    /// The scan alone, seconds (median).
    pub alone_s: f64,
    /// The two concurrent scans, seconds each.
    pub concurrent_s: Vec<f64>,
    /// Slowest concurrent scan over the scan alone.
    pub ratio: f64,
    /// The scan alone through the gate over the same scan without the gate.
    pub gate_overhead: f64,
    /// Admissions per concurrent scan (each is a hand-back of the slot: ≈ rows / (tickets+1)).
    pub admissions_per_query: f64,
    /// Direct hand-offs to a queued waiter during the concurrent run.
    pub handoffs: u64,
    /// Sleeps during the concurrent run (before queueing, polls, timer sleeps).
    pub sleeps: u64,
    /// Forced entries (`timer`) during the concurrent run.
    pub forced_entries: u64,
    /// Median signal-to-running latency of hand-offs, µs (queue policies; 0 otherwise).
    pub wake_latency_us: f64,
    /// Mean admission wait of the concurrent scans, µs (what each hand-back of the slot cost).
    pub mean_wait_us: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct TicketsReport {
    /// Settings.
    pub config: TicketsConfig,
    /// The scan without any gate, seconds (median).
    pub direct_s: f64,
    /// Runs.
    pub runs: Vec<TicketsRun>,
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

/// Runs the reproduction.
pub fn run(
    common: &Common,
    cfg: &TicketsConfig,
    progress: &mut dyn Progress,
) -> Result<TicketsReport, ReproError> {
    if cfg.rows == 0 || cfg.alone_reps == 0 || cfg.tickets.is_empty() || cfg.policies.is_empty() {
        return Err(ReproError::BadInput(
            "tickets: rows, repetitions, tickets and policies must be non-empty and positive"
                .into(),
        ));
    }
    let engine = common.open()?;
    progress.step(&format!("tickets: table of {} rows", cfg.rows));
    engine.ensure_table_until(TABLE, cfg.rows, &mut |d, t| progress.load(d, t), &stopped)?;
    progress.step("tickets: scan without the gate");
    // One untimed pass first, so no measurement pays for faulting the file into memory.
    engine.scan_direct(TABLE)?;
    let mut direct = Vec::new();
    for _ in 0..cfg.alone_reps {
        let (n, s) = timed(|| engine.scan_direct(TABLE));
        n?;
        direct.push(s);
    }
    let direct_s = median(&direct);
    let mut runs = Vec::new();
    for (policy, tickets) in settings(cfg) {
        if stopped() {
            return Err(ReproError::Interrupted);
        }
        let what = match tickets {
            Some(t) => format!("{policy}, {t} tickets"),
            None => format!("{policy}, its quantum"),
        };
        progress.step(&format!("tickets: {what}"));
        // Every policy at the seed's limit of 1, so that the two scans take turns:
        // `auto` with its time quantum in place of tickets (untuned, its limit would let
        // both scans in at once on two CPUs, and nothing would be compared).
        let config = match tickets {
            Some(t) => GateConfig::new(policy).limit(1).tickets(t),
            None => GateConfig::new(policy).limit(1).adaptive_limit(false),
        };
        let gate = Gate::new(config)?;
        let label = match tickets {
            Some(t) => format!("tickets/{policy}/{t} tickets"),
            None => format!("tickets/{policy}/quantum"),
        };
        let _watched = crate::live::watch(label, &gate);
        let mut alone = Vec::new();
        let mut rows = 0;
        for _ in 0..cfg.alone_reps {
            let mut c = Connection::new(engine.clone(), &gate, "alone");
            let (n, s) = timed(|| c.count(TABLE));
            rows = n?;
            alone.push(s);
        }
        let alone_s = median(&alone);
        let before = gate.snapshot();
        let start = Arc::new(Barrier::new(2));
        let hs: Vec<_> = (0..2)
            .map(|i| {
                let (engine, gate, start) = (engine.clone(), gate.clone(), start.clone());
                thread::spawn(move || {
                    let mut c = Connection::new(engine, &gate, format!("scan-{i}"));
                    start.wait();
                    timed(|| c.count(TABLE))
                })
            })
            .collect();
        let mut concurrent_s = Vec::new();
        for (n, s) in join_all(hs)? {
            n?;
            concurrent_s.push(s);
        }
        let after = gate.snapshot();
        let d = |f: fn(&turnstile::Counters) -> u64| f(&after.counters) - f(&before.counters);
        let waits = after.wait.since(&before.wait);
        let wake = after.wake_latency.since(&before.wake_latency);
        let slowest = concurrent_s.iter().copied().fold(0.0, f64::max);
        runs.push(TicketsRun {
            policy: policy.name(),
            tickets,
            rows,
            alone_s,
            concurrent_s,
            ratio: slowest / alone_s,
            gate_overhead: alone_s / direct_s,
            admissions_per_query: d(|c| c.admissions) as f64 / 2.0,
            handoffs: d(|c| c.handoffs),
            sleeps: d(|c| c.sleeps),
            forced_entries: d(|c| c.forced_entries),
            wake_latency_us: wake.quantile(0.5) as f64 / 1e3,
            mean_wait_us: waits.mean() / 1e3,
        });
    }
    Ok(TicketsReport {
        config: cfg.clone(),
        direct_s,
        runs,
    })
}

/// The runs, in order: each policy at each ticket count, `auto` once (`None`: its quantum).
fn settings(cfg: &TicketsConfig) -> Vec<(Policy, Option<u32>)> {
    cfg.policies
        .iter()
        .flat_map(|&p| match p {
            Policy::Auto => vec![(p, None)],
            _ => cfg.tickets.iter().map(|&t| (p, Some(t))).collect(),
        })
        .collect()
}

/// How many runs [`run`] makes (one progress step each, after its two first steps).
pub fn runs(cfg: &TicketsConfig) -> usize {
    settings(cfg).len()
}

/// The seed's figures, for the report: (tickets, alone s, concurrent s).
pub const SEED: [(u32, f64, [f64; 2]); 2] = [
    (500, 16.23, [95.50, 92.86]),
    (10_000_000, 16.14, [16.14, 30.57]),
];

/// Markdown section.
pub fn markdown(r: &TicketsReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Seed 000 — full-scan tickets test\n\n{} rows, limit 1 for every policy (`auto` too, its limit fixed), sleep delay 10 ms. The same scan without the gate: {:.3} s. \
         Seed (MySQL 5.5, 9,028,285 rows, classic): alone 16.2 s; two at once with 500 tickets 95.5 s and 92.9 s (5.9×); \
         with 10,000,000 tickets 16.1 s and 30.6 s.\n",
        r.config.rows, r.direct_s
    );
    let _ = writeln!(
        s,
        "| policy | tickets | alone s | gate/no gate | concurrent s | slowest ÷ alone | admissions per scan | hand-offs | sleeps | forced | wake p50 µs | mean wait µs |\n|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for x in &r.runs {
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} | {:.3} | {} | {:.2} | {:.0} | {} | {} | {} | {:.1} | {:.1} |",
            x.policy,
            x.tickets.map_or_else(
                || format!(
                    "– ({} ms quantum)",
                    GateConfig::new(Policy::Auto).quantum.as_secs_f64() * 1e3
                ),
                |t| t.to_string()
            ),
            x.alone_s,
            x.gate_overhead,
            x.concurrent_s
                .iter()
                .map(|v| format!("{v:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            x.ratio,
            x.admissions_per_query,
            x.handoffs,
            x.sleeps,
            x.forced_entries,
            x.wake_latency_us,
            x.mean_wait_us
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_tiny_run_measures_every_policy_and_counts_hand_backs() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-tickets-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let cfg = TicketsConfig {
            rows: 5_000,
            policies: vec![Policy::Classic, Policy::Unlimited, Policy::Auto],
            tickets: vec![500, 10_000_000],
            alone_reps: 1,
        };
        let r = run(&common, &cfg, &mut super::super::Quiet).unwrap();
        // `auto` runs once, with its quantum in place of tickets.
        assert_eq!(runs(&cfg), 5);
        assert_eq!(
            r.runs
                .iter()
                .map(|x| (x.policy, x.tickets))
                .collect::<Vec<_>>(),
            [
                ("classic", Some(500)),
                ("classic", Some(10_000_000)),
                ("unlimited", Some(500)),
                ("unlimited", Some(10_000_000)),
                ("auto", None),
            ]
        );
        assert!(markdown(&r).contains("| auto | – (10 ms quantum) |"));
        for x in &r.runs {
            assert_eq!(x.rows, 5_000);
            assert_eq!(x.concurrent_s.len(), 2);
        }
        let classic500 = &r.runs[0];
        // 5001 enters per scan, 501 per admission: 10 admissions each.
        assert_eq!(classic500.admissions_per_query, 10.0);
        let classic_many = &r.runs[1];
        assert_eq!(classic_many.admissions_per_query, 1.0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
