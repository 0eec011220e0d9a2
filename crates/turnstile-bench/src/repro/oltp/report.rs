//! The sweep's markdown report: the TPS table beside the seed's figures, the census and
//! per-client tables, and the one-paragraph summaries (best point, versus-best pairs, collapse).

use super::{OltpReport, OltpRun, CENSUS_EVERY, MIN_FAIR_SHARES};
use crate::repro::sysbench;

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
        s.push_str(&sysbench::markdown(sb));
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
    use super::super::{GateSetting, OltpConfig, RowSend};
    use super::*;

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
}
