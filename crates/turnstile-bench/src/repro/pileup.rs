//! Seed 004: the query pileup. N tables, each with one autocommit insert session and one query
//! session, through a `classic` gate of limit 8, with the binlog's commit mutex. With
//! [`CommitMode::HoldSlot`] inserters wait for the commit mutex while counted inside; once they
//! hold every slot, queries cannot get in. With [`CommitMode::ReleaseSlot`] they step out first.
//! With [`CommitMode::GroupCommit`] they step out and share fsyncs (binlog group commit, MySQL
//! 5.6 / MariaDB 5.3): one fsync commits every insert queued, so inserts/s grow with the number
//! of inserting sessions instead of staying at one commit per fsync.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy, SessionState};
use turnstile_engine::schema::Row;
use turnstile_engine::{CommitMode, Connection, Engine};

use super::{join_all, stopped, Common, Progress, ReproError};
use crate::stats::median;

/// The binlog fsync time the pileup emulates unless `--fsync-ms` says otherwise: 60 ms, the
/// seed's disk (one 7200 RPM SATA disk with write barriers: "~16 inserts/second" through one
/// commit mutex is ~60 ms per commit). A modern disk's fsync is far faster, which would hide
/// the pileup behind short commit waits.
pub const SEED_DISK_FSYNC: Duration = Duration::from_millis(60);

/// Settings.
#[derive(Debug, Clone, Serialize)]
pub struct PileupConfig {
    /// Table counts to run (one insert and one query session per table).
    pub tables: Vec<usize>,
    /// Rows loaded in each table before the run.
    pub rows: u32,
    /// The gate's limit (the seed: 8).
    pub limit: u32,
    /// Measured time per run.
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Sampling interval of the time series.
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "sample_ms")]
    pub sample: Duration,
    /// Repetitions of the whole sweep (each ratio is taken within its repetition; the report
    /// adds medians). On a shared machine one run's ratio can move widely between runs.
    pub reps: usize,
}

impl PileupConfig {
    /// Defaults: 1, 4, 8 and 16 tables of 10,000 rows, limit 8, 5 s per run, 100 ms samples
    /// (1 table is the baseline that group commit's inserts/s are compared with).
    pub fn full() -> Self {
        PileupConfig {
            tables: vec![1, 4, 8, 16],
            rows: 10_000,
            limit: 8,
            duration: Duration::from_secs(5),
            sample: Duration::from_millis(100),
            reps: 1,
        }
    }

    /// Under a minute: 1.5 s per run.
    pub fn quick() -> Self {
        PileupConfig {
            rows: 2_000,
            duration: Duration::from_millis(1500),
            ..PileupConfig::full()
        }
    }
}

/// One sample of the time series.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Milliseconds since the start.
    pub t_ms: u64,
    /// Threads counted inside the gate.
    pub inside: u32,
    /// Threads queued or sleeping before the gate.
    pub queued: u32,
    /// Sessions waiting for (or holding) the commit mutex while counted inside.
    pub commit_wait_inside: u32,
    /// Queries completed in this interval.
    pub queries: u64,
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct PileupRun {
    /// Tables (= insert sessions = query sessions).
    pub tables: usize,
    /// `hold-slot`, `release-slot` or `group-commit` (classic, limit as configured), or
    /// `auto-hold-slot`: the naive hold-slot commit under an untuned `auto` gate, whose lock
    /// waits step out by themselves.
    pub mode: &'static str,
    /// The gate's policy.
    #[serde(serialize_with = "crate::repro::oltp::ser_policy")]
    pub policy: Policy,
    /// The repetition this run belongs to (0-based; see [`PileupConfig::reps`]).
    pub rep: usize,
    /// Inserts per second.
    pub inserts_per_s: f64,
    /// Queries per second.
    pub queries_per_s: f64,
    /// Inserts acknowledged to the client.
    pub acknowledged: u64,
    /// Acknowledged inserts found after reopening the data.
    pub found: u64,
    /// Mean binlog fsync (plus delay) time, ms.
    pub fsync_ms: f64,
    /// Binlog fsyncs per second.
    pub fsyncs_per_s: f64,
    /// Commits per fsync (1 without group commit).
    pub commits_per_fsync: f64,
    /// User + system CPU, % of the machine.
    pub cpu: f64,
    /// The time series.
    pub series: Vec<Sample>,
    /// Where sessions were, summed over every sample (seed 004's stack-trace tally).
    pub profile: Vec<(String, u64)>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct PileupReport {
    /// Settings.
    pub config: PileupConfig,
    /// Runs.
    pub runs: Vec<PileupRun>,
}

fn table(i: usize) -> String {
    format!("pileup_{i}")
}

/// Runs every table count in each of [`SETTINGS`].
pub fn run(
    common: &Common,
    cfg: &PileupConfig,
    progress: &mut dyn Progress,
) -> Result<PileupReport, ReproError> {
    if cfg.tables.is_empty() || cfg.tables.contains(&0) || cfg.rows == 0 || cfg.reps == 0 {
        return Err(ReproError::BadInput(
            "pileup: table counts, rows and repetitions must be positive".into(),
        ));
    }
    if cfg.duration.is_zero() || cfg.sample.is_zero() {
        return Err(ReproError::BadInput(
            "pileup: duration and sample must be positive".into(),
        ));
    }
    turnstile::GateConfig::new(Policy::Classic)
        .limit(cfg.limit)
        .validate()?;
    let mut runs = Vec::new();
    for rep in 0..cfg.reps {
        sweep(common, cfg, rep, progress, &mut runs)?;
    }
    // Report in the reading order (repetition, table count, setting), whatever order ran.
    let pos = |r: &PileupRun| {
        let t = cfg.tables.iter().position(|&n| n == r.tables);
        let s = SETTINGS
            .iter()
            .position(|&(p, m)| p == r.policy && mode_name(p, m) == r.mode);
        (r.rep, t, s)
    };
    runs.sort_by_key(pos);
    Ok(PileupReport {
        config: cfg.clone(),
        runs,
    })
}

/// One repetition: every table count in each of [`SETTINGS`], in [`run_order`].
fn sweep(
    common: &Common,
    cfg: &PileupConfig,
    rep: usize,
    progress: &mut dyn Progress,
    runs: &mut Vec<PileupRun>,
) -> Result<(), ReproError> {
    for (policy, mode, n) in run_order(&cfg.tables, rep) {
        if stopped() {
            return Err(ReproError::Interrupted);
        }
        let engine = common.open_with(SEED_DISK_FSYNC)?;
        for i in 0..n {
            progress.step(&format!("pileup: table {} of {n}", i + 1));
            engine.ensure_table_until(
                &table(i),
                cfg.rows,
                &mut |d, t| progress.load(d, t),
                &stopped,
            )?;
            // Drop the previous run's inserts.
            engine.truncate_above(&table(i), cfg.rows)?;
        }
        let of = if cfg.reps > 1 {
            format!(" (repetition {} of {})", rep + 1, cfg.reps)
        } else {
            String::new()
        };
        progress.step(&format!(
            "pileup: {n} tables, {}{of}",
            mode_name(policy, mode)
        ));
        let (mut r, acked) = one_run(engine, cfg, n, policy, mode)?;
        // Reopen the data and look for every acknowledged insert.
        let engine = common.open_with(SEED_DISK_FSYNC)?;
        let mut found = 0;
        for (i, &a) in acked.iter().enumerate() {
            for id in cfg.rows + 1..=cfg.rows + a as u32 {
                found += engine.contains(&table(i), id)? as u64;
            }
        }
        drop(engine);
        r.found = found;
        r.rep = rep;
        runs.push(r);
    }
    Ok(())
}

/// The order of one repetition's runs: each setting's table counts back to back, so that the
/// ratio the report takes (a setting's queries/s at N tables ÷ at the first count) compares
/// runs seconds apart rather than a whole sweep apart, and reversed on odd repetitions
/// (A B, B A), so that a machine drifting faster or slower through a sweep (a shared machine
/// can drift within a minute) biases the medians neither way.
fn run_order(tables: &[usize], rep: usize) -> Vec<(Policy, CommitMode, usize)> {
    let mut order = Vec::with_capacity(SETTINGS.len() * tables.len());
    for (policy, mode) in SETTINGS {
        for &n in tables {
            order.push((policy, mode, n));
        }
    }
    if rep % 2 == 1 {
        order.reverse();
    }
    order
}

/// The runs per table count: the seed's gate in both modes, group commit, and `auto` with the
/// naive code.
pub const SETTINGS: [(Policy, CommitMode); 4] = [
    (Policy::Classic, CommitMode::HoldSlot),
    (Policy::Classic, CommitMode::ReleaseSlot),
    (Policy::Classic, CommitMode::GroupCommit),
    (Policy::Auto, CommitMode::HoldSlot),
];

fn mode_name(policy: Policy, mode: CommitMode) -> &'static str {
    match (policy, mode) {
        (Policy::Auto, _) => "auto-hold-slot",
        (_, m) => m.name(),
    }
}

fn one_run(
    engine: Arc<Engine>,
    cfg: &PileupConfig,
    n: usize,
    policy: Policy,
    mode: CommitMode,
) -> Result<(PileupRun, Vec<u64>), ReproError> {
    // `auto` runs untuned: no limit given.
    let config = if policy == Policy::Auto {
        GateConfig::new(Policy::Auto)
    } else {
        GateConfig::new(policy).limit(cfg.limit)
    };
    let gate = Gate::new(config)?;
    let _watched = crate::live::watch(
        format!("pileup/{n} tables/{}", mode_name(policy, mode)),
        &gate,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(2 * n + 1));
    let queries = Arc::new(AtomicU64::new(0));
    let rows = cfg.rows;
    let mut hs = Vec::new();
    for i in 0..n {
        let (e, g, st, sb) = (engine.clone(), gate.clone(), stop.clone(), start.clone());
        hs.push(thread::spawn(move || -> Result<u64, ReproError> {
            let mut c = Connection::new(e, &g, format!("insert-{i}"));
            let t = table(i);
            sb.wait();
            let mut acked = 0u64;
            while !st.load(Ordering::Relaxed) && !stopped() {
                let id = rows + 1 + acked as u32;
                c.insert(&t, &Row::generate(id, rows), mode)?;
                acked += 1;
            }
            Ok(acked)
        }));
        let (e, g, st, sb, q) = (
            engine.clone(),
            gate.clone(),
            stop.clone(),
            start.clone(),
            queries.clone(),
        );
        hs.push(thread::spawn(move || -> Result<u64, ReproError> {
            let mut c = Connection::new(e, &g, format!("query-{i}"));
            let t = table(i);
            let mut x = 0x2545_F491_4F6C_DD1Du64 ^ i as u64;
            sb.wait();
            while !st.load(Ordering::Relaxed) && !stopped() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.point_select(&t, 1 + (x % rows as u64) as u32)?;
                q.fetch_add(1, Ordering::Relaxed);
            }
            Ok(0)
        }));
    }
    start.wait();
    let t0 = Instant::now();
    let u0 = crate::rusage::Usage::now();
    let commits0 = engine.stats.commits.load(Ordering::Relaxed);
    let fsync0 = engine.stats.fsync_ns.load(Ordering::Relaxed);
    let fsyncs0 = engine.stats.fsyncs.load(Ordering::Relaxed);
    let mut series = Vec::new();
    let mut profile: std::collections::BTreeMap<String, u64> = Default::default();
    let mut last_q = queries.load(Ordering::Relaxed);
    let q_start = last_q;
    while t0.elapsed() < cfg.duration && !stopped() {
        thread::sleep(cfg.sample);
        let snap = gate.snapshot();
        let q = queries.load(Ordering::Relaxed);
        let cwi = engine.stats.commit_waiting_inside.load(Ordering::Relaxed);
        let cw = engine.stats.commit_waiting.load(Ordering::Relaxed);
        series.push(Sample {
            t_ms: t0.elapsed().as_millis() as u64,
            inside: snap.inside,
            queued: snap.queued + snap.sleeping,
            commit_wait_inside: cwi,
            queries: q - last_q,
        });
        last_q = q;
        let mut tally = |k: &str, v: u64| *profile.entry(k.to_string()).or_default() += v;
        tally(
            "inside: waiting for the commit mutex (or in its fsync)",
            cwi as u64,
        );
        tally(
            "outside: stepped out, waiting for the commit (mutex or group) or in its fsync",
            (cw - cwi.min(cw)) as u64,
        );
        for s in &snap.sessions {
            let insert = s.label.starts_with("insert");
            let k = match s.state {
                SessionState::InCall | SessionState::DeclaredInside if insert => continue,
                SessionState::SteppedOut(_) => continue,
                SessionState::InCall | SessionState::DeclaredInside => "inside: query working",
                SessionState::Queued => "waiting in queue",
                SessionState::Sleeping => "sleeping before joining queue",
                SessionState::Woken => "handed a slot, not yet running",
                SessionState::Yielding => "yielding",
                SessionState::Outside => "outside the engine",
                _ => "other",
            };
            tally(k, 1);
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let usage = crate::rusage::Usage::now().since(&u0);
    let commits = engine.stats.commits.load(Ordering::Relaxed) - commits0;
    let fsync = engine.stats.fsync_ns.load(Ordering::Relaxed) - fsync0;
    let fsyncs = engine.stats.fsyncs.load(Ordering::Relaxed) - fsyncs0;
    let q_total = queries.load(Ordering::Relaxed) - q_start;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Vec::new();
    for (i, r) in join_all(hs)?.into_iter().enumerate() {
        let a = r?;
        if i % 2 == 0 {
            acked.push(a);
        }
    }
    drop(gate);
    drop(engine);
    if stopped() {
        return Err(ReproError::Interrupted);
    }
    let cpus = thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let run = PileupRun {
        tables: n,
        mode: mode_name(policy, mode),
        policy,
        rep: 0,
        inserts_per_s: commits as f64 / elapsed,
        queries_per_s: q_total as f64 / elapsed,
        acknowledged: acked.iter().sum(),
        found: 0,
        fsync_ms: if fsyncs == 0 {
            0.0
        } else {
            fsync as f64 / fsyncs as f64 / 1e6
        },
        fsyncs_per_s: fsyncs as f64 / elapsed,
        commits_per_fsync: if fsyncs == 0 {
            0.0
        } else {
            commits as f64 / fsyncs as f64
        },
        cpu: 100.0 * (usage.user + usage.sys).as_secs_f64() / elapsed / cpus,
        series,
        profile: profile.into_iter().filter(|(_, v)| *v > 0).collect(),
    };
    Ok((run, acked))
}

/// The seed's figures: (tables, original q/s, fixed q/s); inserts ≈ 16/s throughout.
pub const SEED: [(usize, f64, f64); 3] = [
    (4, 10_000.0, 10_000.0),
    (8, 2_400.0, 10_000.0),
    (16, 8.0, 10_000.0),
];

/// Markdown section.
pub fn markdown(r: &PileupReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Seed 004 — insert + query pileup\n\nLimit {}, {} ms per run, tables of {} rows; one autocommit insert session and one point-query session per table; hold-slot and release-slot: binlog fsync under one commit mutex; group-commit: one fsync per group of queued commits. \
         Binlog fsync: this machine's, plus the emulated delay reported as `fsync ms` (default 60 ms, the seed's disk). \
         Seed (4 cores, 1 SATA disk, limit 8): 4 tables 10,000 q/s; 8: 2,400 q/s; 16: **8 q/s** with ~1% CPU; 10,000 q/s at every N with the fix; ~16 inserts/s throughout.\n",
        r.config.limit,
        r.config.duration.as_millis(),
        r.config.rows
    );
    let reps = r.config.reps > 1;
    let _ = writeln!(
        s,
        "| tables | mode |{} inserts/s | queries/s | q/s ÷ q/s at {} tables | seed q/s | fsync ms | fsyncs/s | commits/fsync | CPU % | acknowledged | found |\n|---:|---|{}---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        if reps { " rep |" } else { "" },
        r.config.tables.first().copied().unwrap_or(0),
        if reps { "---:|" } else { "" },
    );
    for x in &r.runs {
        let base = ratio_to_first(r, x);
        let seed =
            SEED.iter()
                .find(|(t, _, _)| *t == x.tables)
                .map_or(String::new(), |(_, o, f)| {
                    match x.mode {
                        "release-slot" => format!("{f:.0}"),
                        // The seed had no group commit.
                        "group-commit" => String::new(),
                        _ => format!("{o:.0}"),
                    }
                });
        let _ = writeln!(
            s,
            "| {} | {} |{} {:.1} | {:.0} | {:.3} | {} | {:.2} | {:.1} | {:.2} | {:.0} | {} | {} |",
            x.tables,
            x.mode,
            if reps {
                format!(" {} |", x.rep + 1)
            } else {
                String::new()
            },
            x.inserts_per_s,
            x.queries_per_s,
            base,
            seed,
            x.fsync_ms,
            x.fsyncs_per_s,
            x.commits_per_fsync,
            x.cpu,
            x.acknowledged,
            x.found
        );
    }
    if reps {
        s.push_str(&medians(r));
    }
    s.push_str(&per_table_count(r, "Inserts/s", |x| x.inserts_per_s, 1));
    s.push_str(&per_table_count(r, "Queries/s", |x| x.queries_per_s, 0));
    // Where sessions were: the first repetition's runs.
    for x in r.runs.iter().filter(|x| x.rep == 0) {
        let total: u64 = x.profile.iter().map(|(_, v)| v).sum();
        let _ = writeln!(
            s,
            "\nWhere sessions were ({} tables, {}; session-samples over {} samples):\n",
            x.tables,
            x.mode,
            x.series.len()
        );
        let mut p = x.profile.clone();
        p.sort_by_key(|b| std::cmp::Reverse(b.1));
        for (k, v) in p {
            let _ = writeln!(
                s,
                "- {v:>6} ({:>4.1} %) {k}",
                100.0 * v as f64 / total.max(1) as f64
            );
        }
    }
    s
}

/// `x`'s queries/s ÷ those of the run at the first table count with the same mode, in the same
/// repetition (NaN if there is none, or if that run answered no query).
fn ratio_to_first(r: &PileupReport, x: &PileupRun) -> f64 {
    r.runs
        .iter()
        .find(|b| {
            b.mode == x.mode && b.rep == x.rep && Some(b.tables) == r.config.tables.first().copied()
        })
        .filter(|b| b.queries_per_s > 0.0)
        .map_or(f64::NAN, |b| x.queries_per_s / b.queries_per_s)
}

/// With repetitions: per table count and mode, the median and range of queries/s and of the
/// ratio to the first table count (each ratio within its repetition).
fn medians(r: &PileupReport) -> String {
    use std::fmt::Write;
    let first = r.config.tables.first().copied().unwrap_or(0);
    let mut s = format!(
        "\nOver {} repetitions (each ratio within its repetition):\n\n| tables | mode | q/s median | q/s min–max | q/s ÷ q/s at {first} tables, median | min–max |\n|---:|---|---:|---|---:|---|\n",
        r.config.reps
    );
    let mut keys: Vec<(usize, &str)> = Vec::new();
    for x in &r.runs {
        if !keys.contains(&(x.tables, x.mode)) {
            keys.push((x.tables, x.mode));
        }
    }
    for (n, m) in keys {
        let runs: Vec<&PileupRun> = r
            .runs
            .iter()
            .filter(|x| x.tables == n && x.mode == m)
            .collect();
        let q: Vec<f64> = runs.iter().map(|x| x.queries_per_s).collect();
        let ratio: Vec<f64> = runs
            .iter()
            .map(|x| ratio_to_first(r, x))
            .filter(|v| v.is_finite())
            .collect();
        let range = |v: &[f64], d: usize| {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{lo:.d$}–{hi:.d$}")
        };
        let _ = writeln!(
            s,
            "| {n} | {m} | {:.0} | {} | {:.3} | {} |",
            median(&q),
            range(&q, 0),
            if ratio.is_empty() {
                f64::NAN
            } else {
                median(&ratio)
            },
            if ratio.is_empty() {
                String::new()
            } else {
                range(&ratio, 3)
            },
        );
    }
    s
}

/// A table of `what` per table count (rows) and mode (columns), with each mode's value at the
/// largest table count ÷ its value at the smallest: taken within each repetition, then the
/// median (as the repetitions table does), never a median ÷ a median from other
/// repetitions.
fn per_table_count(
    r: &PileupReport,
    what: &str,
    value: impl Fn(&PileupRun) -> f64,
    decimals: usize,
) -> String {
    use std::fmt::Write;
    let mut modes: Vec<&str> = Vec::new();
    for x in &r.runs {
        if !modes.contains(&x.mode) {
            modes.push(x.mode);
        }
    }
    let mut counts: Vec<usize> = r.runs.iter().map(|x| x.tables).collect();
    counts.sort_unstable();
    counts.dedup();
    // The median over the repetitions (the one run's value when there is one).
    let get = |n: usize, m: &str| {
        let v: Vec<f64> = r
            .runs
            .iter()
            .filter(|x| x.tables == n && x.mode == m)
            .map(&value)
            .collect();
        (!v.is_empty()).then(|| median(&v))
    };
    let of = if r.config.reps > 1 {
        format!(" (medians of {} repetitions)", r.config.reps)
    } else {
        String::new()
    };
    let mut s = format!("\n{what} per table count and mode{of}:\n\n| tables |");
    for m in &modes {
        let _ = write!(s, " {m} |");
    }
    s.push_str("\n|---:|");
    s.push_str(&"---:|".repeat(modes.len()));
    s.push('\n');
    for &n in &counts {
        let _ = write!(s, "| {n} |");
        for m in &modes {
            match get(n, m) {
                Some(v) => {
                    let _ = write!(s, " {v:.decimals$} |");
                }
                None => s.push_str(" |"),
            }
        }
        s.push('\n');
    }
    if let (Some(&lo), Some(&hi)) = (counts.first(), counts.last()) {
        if lo != hi {
            let _ = write!(s, "| {hi} ÷ {lo} |");
            for m in &modes {
                let at = |n: usize, rep: usize| {
                    r.runs
                        .iter()
                        .find(|x| x.tables == n && x.mode == *m && x.rep == rep)
                        .map(&value)
                };
                let ratios: Vec<f64> = (0..r.config.reps.max(1))
                    .filter_map(|rep| match (at(hi, rep), at(lo, rep)) {
                        (Some(h), Some(l)) if l > 0.0 => Some(h / l),
                        _ => None,
                    })
                    .collect();
                if ratios.is_empty() {
                    s.push_str(" |");
                } else {
                    let _ = write!(s, " {:.2}× |", median(&ratios));
                }
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_per_table_count_ratio_is_the_median_of_each_repetitions_own_ratio() {
        // Five repetitions' q/s at 4 and 16 tables: within-repetition ratios 1.20, 1.08,
        // 0.95, 0.79, 0.63 (median 0.953), where the median at 16 tables ÷ the median at 4,
        // taken from different repetitions, would be 0.82.
        let q = [
            (703_312.8, 844_801.8),
            (1_295_769.4, 1_400_432.1),
            (1_176_974.9, 1_121_076.6),
            (1_295_374.4, 1_022_978.5),
            (1_249_860.8, 784_647.2),
        ];
        let run = |tables, rep, queries_per_s| PileupRun {
            tables,
            mode: "auto-hold-slot",
            policy: Policy::Auto,
            rep,
            inserts_per_s: 15.0,
            queries_per_s,
            acknowledged: 1,
            found: 1,
            fsync_ms: 60.0,
            fsyncs_per_s: 15.0,
            commits_per_fsync: 1.0,
            cpu: 90.0,
            series: Vec::new(),
            profile: Vec::new(),
        };
        let mut runs = Vec::new();
        for (rep, (at4, at16)) in q.into_iter().enumerate() {
            runs.push(run(4, rep, at4));
            runs.push(run(16, rep, at16));
        }
        let config = PileupConfig {
            tables: vec![4, 16],
            reps: 5,
            ..PileupConfig::quick()
        };
        let md = markdown(&PileupReport { config, runs });
        assert!(md.contains("| 16 ÷ 4 | 0.95× |"), "{md}");
        assert!(!md.contains("0.82×"), "{md}");
    }

    #[test]
    fn a_tiny_pileup_runs_every_setting_and_finds_every_acknowledged_insert() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-pileup-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let cfg = PileupConfig {
            tables: vec![1, 2],
            rows: 200,
            limit: 1,
            duration: Duration::from_millis(200),
            sample: Duration::from_millis(50),
            reps: 1,
        };
        let r = run(&common, &cfg, &mut super::super::Quiet).unwrap();
        assert_eq!(r.runs.len(), 2 * SETTINGS.len());
        for x in &r.runs {
            assert!(x.acknowledged > 0, "{x:?}");
            assert_eq!(x.found, x.acknowledged);
            assert!(!x.series.is_empty());
        }
        // Reported by table count, then setting, whatever order they ran in.
        let order: Vec<(usize, &str)> = r.runs.iter().map(|x| (x.tables, x.mode)).collect();
        let mut want = Vec::new();
        for n in [1, 2] {
            for (p, m) in SETTINGS {
                want.push((n, mode_name(p, m)));
            }
        }
        assert_eq!(order, want);
        let md = markdown(&r);
        assert!(md.contains("| 2 | hold-slot |"));
        assert!(md.contains("| 2 | auto-hold-slot |"), "{md}");
        assert!(md.contains("| 2 | group-commit |"), "{md}");
        assert!(md.contains("| 2 ÷ 1 |"), "{md}");
        assert!(
            md.contains("Inserts/s per table count and mode:\n\n| tables | hold-slot | release-slot | group-commit | auto-hold-slot |"),
            "{md}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_settings_table_counts_run_back_to_back_and_odd_repetitions_run_backwards() {
        let even = run_order(&[4, 16], 0);
        assert_eq!(even.len(), 2 * SETTINGS.len());
        for (i, (p, m)) in SETTINGS.iter().enumerate() {
            assert_eq!(even[2 * i], (*p, *m, 4));
            assert_eq!(even[2 * i + 1], (*p, *m, 16));
        }
        let mut odd = run_order(&[4, 16], 1);
        odd.reverse();
        assert_eq!(odd, even);
        assert_eq!(run_order(&[4, 16], 2), even);
    }

    fn synthetic(tables: usize, rep: usize, qps: f64) -> PileupRun {
        PileupRun {
            tables,
            mode: "auto-hold-slot",
            policy: Policy::Auto,
            rep,
            inserts_per_s: 15.0,
            queries_per_s: qps,
            acknowledged: 10,
            found: 10,
            fsync_ms: 60.0,
            fsyncs_per_s: 15.0,
            commits_per_fsync: 1.0,
            cpu: 90.0,
            series: Vec::new(),
            profile: vec![(format!("rep {rep}"), 1)],
        }
    }

    #[test]
    fn repetitions_take_each_ratio_within_its_repetition_and_report_the_medians() {
        let cfg = PileupConfig {
            tables: vec![4, 16],
            reps: 3,
            ..PileupConfig::quick()
        };
        // Ratios 16 ÷ 4 within each repetition: 0.5, 1.0 and 2.0 (median 1.0, range
        // 0.5–2.0), while the 4-table q/s spread from 500 to 2000.
        let runs = vec![
            synthetic(4, 0, 2000.0),
            synthetic(16, 0, 1000.0),
            synthetic(4, 1, 1000.0),
            synthetic(16, 1, 1000.0),
            synthetic(4, 2, 500.0),
            synthetic(16, 2, 1000.0),
        ];
        let md = markdown(&PileupReport { config: cfg, runs });
        assert!(md.contains("| tables | mode | rep | inserts/s |"), "{md}");
        assert!(
            md.contains("| 16 | auto-hold-slot | 3 | 15.0 | 1000 | 2.000 |"),
            "{md}"
        );
        assert!(md.contains("Over 3 repetitions"), "{md}");
        assert!(
            md.contains("| 16 | auto-hold-slot | 1000 | 1000–1000 | 1.000 | 0.500–2.000 |"),
            "{md}"
        );
        assert!(
            md.contains("| 4 | auto-hold-slot | 1000 | 500–2000 | 1.000 | 1.000–1.000 |"),
            "{md}"
        );
        assert!(
            md.contains("Queries/s per table count and mode (medians of 3 repetitions)"),
            "{md}"
        );
        // Where sessions were: the first repetition only.
        assert!(
            md.contains("rep 0") && !md.contains("rep 1") && !md.contains("rep 2"),
            "{md}"
        );
    }
}
