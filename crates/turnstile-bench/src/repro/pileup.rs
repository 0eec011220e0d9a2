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

/// The binlog fsync time the pileup emulates unless `--fsync-ms` says otherwise: 60 ms, the
/// seed's disk (one 7200 RPM SATA disk with write barriers: "~16 inserts/second" through one
/// commit mutex is ~60 ms per commit). This machine's own fsync is 100× faster, which would
/// hide the pileup behind short commit waits.
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
    if cfg.tables.is_empty() || cfg.tables.contains(&0) || cfg.rows == 0 {
        return Err(ReproError::BadInput(
            "pileup: table counts and rows must be positive".into(),
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
    for &n in &cfg.tables {
        for (policy, mode) in SETTINGS {
            if stopped() {
                return Err(ReproError::Interrupted);
            }
            let engine = common.open_with(SEED_DISK_FSYNC)?;
            for i in 0..n {
                progress.step(&format!("pileup: table {} of {n}", i + 1));
                engine.ensure_table(&table(i), cfg.rows, &mut |d, t| progress.load(d, t))?;
                // Drop the previous run's inserts.
                engine.truncate_above(&table(i), cfg.rows)?;
            }
            progress.step(&format!("pileup: {n} tables, {}", mode_name(policy, mode)));
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
            runs.push(r);
        }
    }
    Ok(PileupReport {
        config: cfg.clone(),
        runs,
    })
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
    let _ = writeln!(
        s,
        "| tables | mode | inserts/s | queries/s | q/s ÷ q/s at {} tables | seed q/s | fsync ms | fsyncs/s | commits/fsync | CPU % | acknowledged | found |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        r.config.tables.first().copied().unwrap_or(0)
    );
    for x in &r.runs {
        let base = r
            .runs
            .iter()
            .find(|b| b.mode == x.mode && Some(b.tables) == r.config.tables.first().copied())
            .map_or(f64::NAN, |b| x.queries_per_s / b.queries_per_s.max(1e-9));
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
            "| {} | {} | {:.1} | {:.0} | {:.3} | {} | {:.2} | {:.1} | {:.2} | {:.0} | {} | {} |",
            x.tables,
            x.mode,
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
    s.push_str(&per_table_count(r, "Inserts/s", |x| x.inserts_per_s, 1));
    s.push_str(&per_table_count(r, "Queries/s", |x| x.queries_per_s, 0));
    for x in &r.runs {
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

/// A table of `what` per table count (rows) and mode (columns), with each mode's value at the
/// largest table count ÷ its value at the smallest.
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
    let get = |n: usize, m: &str| {
        r.runs
            .iter()
            .find(|x| x.tables == n && x.mode == m)
            .map(&value)
    };
    let mut s = format!("\n{what} per table count and mode:\n\n| tables |");
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
                match (get(hi, m), get(lo, m)) {
                    (Some(h), Some(l)) if l > 0.0 => {
                        let _ = write!(s, " {:.2}× |", h / l);
                    }
                    _ => s.push_str(" |"),
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
        };
        let r = run(&common, &cfg, &mut super::super::Quiet).unwrap();
        assert_eq!(r.runs.len(), 2 * SETTINGS.len());
        for x in &r.runs {
            assert!(x.acknowledged > 0, "{x:?}");
            assert_eq!(x.found, x.acknowledged);
            assert!(!x.series.is_empty());
        }
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
}
