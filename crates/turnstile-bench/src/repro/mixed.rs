//! Mixed load, the reason seed 000's concurrency tickets exist: long scans and short queries
//! share one gate. Per setting, a lone full scan (`SELECT COUNT(*)` through the gate) gives
//! the baseline; then two full scans start together beside sessions of point selects
//! (`SELECT c FROM sbtest1 WHERE id=?`) that loop until both scans have ended. The report
//! says what the short queries paid (their latency quantiles) and what the scans paid (the
//! slower scan over the lone one) under each policy and ticket setting.
//!
//! The scans read seed 000's table ([`tickets::TABLE`], at [`TicketsConfig`]'s sizes) and the
//! point selects seed 001's ([`oltp::TABLE`], at [`OltpConfig`]'s sizes), so `repro all`
//! builds no table of its own for this experiment.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::{Connection, Engine};

use super::oltp::{self, OltpConfig, Rng};
use super::tickets::{self, TicketsConfig};
use super::{join_all, stopped, Common, Progress, ReproError};
use crate::rusage::ThreadTimes;
use crate::stats::median;

/// Point-select sessions beside the two scans: the brief's 16, eight times the two scans,
/// enough that short queries are most of the sessions, as in the workload tickets were made
/// for ("fast queries … even if there are several long running queries", seed 000).
pub const POINT_SESSIONS: usize = 16;

/// Concurrent full scans: seed 000's two.
pub const SCANS: usize = 2;

/// One gate setting of the experiment.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MixedSetting {
    /// The label in the report (`classic-500`, `flifo`, …).
    pub name: &'static str,
    /// Policy.
    #[serde(serialize_with = "ser_policy")]
    pub policy: Policy,
    /// Concurrency tickets.
    pub tickets: u32,
}

fn ser_policy<S: serde::Serializer>(p: &Policy, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

impl MixedSetting {
    /// `policy` with InnoDB's default tickets (500, `GateConfig::new`'s).
    fn innodb(name: &'static str, policy: Policy) -> MixedSetting {
        MixedSetting {
            name,
            policy,
            tickets: GateConfig::new(policy).tickets,
        }
    }

    /// Every setting, in report order: the one table to extend (a new policy is one line).
    /// `classic` with seed 000's two ticket settings (500, InnoDB's default, and 10,000,000,
    /// "enough to finish without going back to the queue"), then `flifo` and `polling` with
    /// InnoDB's defaults. The gate limit is [`MixedConfig::limit`] for all.
    pub fn all() -> Vec<MixedSetting> {
        vec![
            MixedSetting {
                name: "classic-500",
                policy: Policy::Classic,
                tickets: 500,
            },
            MixedSetting {
                name: "classic-10M",
                policy: Policy::Classic,
                tickets: 10_000_000,
            },
            MixedSetting::innodb("flifo", Policy::Flifo),
            MixedSetting::innodb("polling", Policy::Polling),
            // Untuned: its quantum stands for tickets, and its limit starts at the CPUs.
            MixedSetting::innodb("auto", Policy::Auto),
        ]
    }

    /// The setting names [`MixedSetting::all`] knows, comma-separated (for errors).
    pub fn names() -> String {
        MixedSetting::all()
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The settings named in `names`, in the order given. An unknown or repeated name is an
    /// error that lists the known ones.
    pub fn select(names: &[String]) -> Result<Vec<MixedSetting>, String> {
        let all = MixedSetting::all();
        let mut out: Vec<MixedSetting> = Vec::new();
        for n in names {
            let n = n.trim();
            let Some(s) = all.iter().find(|s| s.name == n) else {
                return Err(format!(
                    "unknown mixed setting '{n}': expected one of {}",
                    MixedSetting::names()
                ));
            };
            if out.iter().any(|o| o.name == s.name) {
                return Err(format!("mixed setting '{n}' is named twice"));
            }
            out.push(*s);
        }
        if out.is_empty() {
            return Err(format!(
                "no mixed setting named: expected some of {}",
                MixedSetting::names()
            ));
        }
        Ok(out)
    }

    fn gate(&self, limit: u32) -> Result<Gate, ReproError> {
        Ok(Gate::new(GateConfig::new(self.policy).innodb_settings(
            limit,
            self.tickets,
            GateConfig::new(self.policy).sleep_delay,
        ))?)
    }
}

/// The gate limit when none is given: the host's cores (`available_parallelism`), so the
/// limit, not the CPU, decides who runs. 2 if the count is unknown (the two scans can then fill
/// the gate), at most the library's 1000.
pub fn default_limit() -> u32 {
    thread::available_parallelism().map_or(2, |n| n.get().min(1000) as u32)
}

/// Settings.
#[derive(Debug, Clone, Serialize)]
pub struct MixedConfig {
    /// Rows in the scanned table (seed 000's table).
    pub rows: u32,
    /// Rows in the point-select table (seed 001's table).
    pub point_rows: u32,
    /// Point-select sessions beside the scans.
    pub point_sessions: usize,
    /// The gate limit (`innodb_thread_concurrency`): by default the host's core count
    /// ([`default_limit`]).
    pub limit: u32,
    /// Gate settings, in report order.
    pub settings: Vec<MixedSetting>,
    /// Repetitions of the lone scan (the median is the baseline).
    pub alone_reps: usize,
}

impl MixedConfig {
    /// Defaults: seed 000's and seed 001's full tables (2,000,000 and 100,000 rows, shared
    /// with `repro tickets` and `repro oltp`), three lone scans per setting (the median is the
    /// baseline).
    pub fn full() -> Self {
        MixedConfig {
            rows: TicketsConfig::full().rows,
            point_rows: OltpConfig::full().rows,
            point_sessions: POINT_SESSIONS,
            limit: default_limit(),
            settings: MixedSetting::all(),
            alone_reps: 3,
        }
    }

    /// Under a minute with the table loads: their `--quick` tables (200,000 and 20,000 rows).
    pub fn quick() -> Self {
        MixedConfig {
            rows: TicketsConfig::quick().rows,
            point_rows: OltpConfig::quick().rows,
            ..MixedConfig::full()
        }
    }
}

/// One setting's run.
#[derive(Debug, Clone, Serialize)]
pub struct MixedRun {
    /// The setting's label (`classic-500`, …).
    pub setting: &'static str,
    /// The policy's name (`classic`, `flifo`, …).
    pub policy: &'static str,
    /// Configured tickets.
    pub tickets: u32,
    /// Gate limit.
    pub limit: u32,
    /// Rows per scan.
    pub rows: u64,
    /// The scan alone through this gate, seconds (median).
    pub alone_s: f64,
    /// Each concurrent scan, seconds.
    pub scan_s: Vec<f64>,
    /// Each scan's own CPU time, s (its thread's CPU clock; 0 where the platform has none).
    pub scan_cpu_s: Vec<f64>,
    /// Each scan's time runnable but waiting for a CPU, s (Linux's schedstat; `null`
    /// elsewhere). With `scan_cpu_s` it splits a scan's time three ways: its work, the
    /// CPU the kernel gave others while it could run, and the rest (`scan_s` minus both),
    /// its waits for the gate.
    pub scan_runqueue_s: Vec<Option<f64>>,
    /// The slowest concurrent scan over the scan alone.
    pub scan_slowdown: f64,
    /// Point selects completed while the scans ran (each session runs at least one).
    pub point_selects: u64,
    /// Point selects per second over the concurrent phase (barrier to the last select).
    pub point_per_s: f64,
    /// Median point-select latency, ms.
    pub point_p50_ms: f64,
    /// 99th percentile point-select latency, ms.
    pub point_p99_ms: f64,
    /// Slowest point select, ms.
    pub point_max_ms: f64,
    /// Gate admissions during the concurrent phase (scans and point selects).
    pub admissions: u64,
    /// Sleeps during the concurrent phase (before queueing, polls).
    pub sleeps: u64,
    /// Waits in the FIFO queue during the concurrent phase.
    pub queue_waits: u64,
    /// The limit in force when the concurrent phase ended (`auto` moves it).
    pub limit_end: u32,
    /// `auto`: the largest limit its controller set during the run (`None` for the other
    /// policies).
    pub limit_max: Option<u32>,
    /// `auto`: why its controller moved the limit during the concurrent phase, window by
    /// window (`None` for the other policies).
    pub limit_reasons: Option<turnstile::LimitReasons>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct MixedReport {
    /// Settings.
    pub config: MixedConfig,
    /// One run per setting, in the configured order.
    pub runs: Vec<MixedRun>,
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed().as_secs_f64())
}

/// The value at quantile `q` of ascending `sorted` (nearest rank); 0 if empty.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Counts a scan as ended when dropped, so point sessions stop even if a scan fails or panics.
struct ScanEnded(Arc<AtomicUsize>);

impl Drop for ScanEnded {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// Runs the experiment.
pub fn run(
    common: &Common,
    cfg: &MixedConfig,
    progress: &mut dyn Progress,
) -> Result<MixedReport, ReproError> {
    if cfg.rows == 0 || cfg.point_rows == 0 || cfg.point_sessions == 0 || cfg.alone_reps == 0 {
        return Err(ReproError::BadInput(
            "mixed: rows, point rows, point sessions and repetitions must be positive".into(),
        ));
    }
    if cfg.settings.is_empty() {
        return Err(ReproError::BadInput("mixed: no setting to run".into()));
    }
    let engine = common.open()?;
    progress.step(&format!(
        "mixed: tables of {} rows (scans) and {} rows (point selects)",
        cfg.rows, cfg.point_rows
    ));
    let total = cfg.rows as u64 + cfg.point_rows as u64;
    engine.ensure_table_until(
        tickets::TABLE,
        cfg.rows,
        &mut |d, _| progress.load(d, total),
        &stopped,
    )?;
    engine.ensure_table_until(
        oltp::TABLE,
        cfg.point_rows,
        &mut |d, _| progress.load(cfg.rows as u64 + d, total),
        &stopped,
    )?;
    // One untimed pass first, so no measurement pays for faulting the file into memory.
    engine.scan_direct(tickets::TABLE)?;
    let mut runs = Vec::new();
    for s in &cfg.settings {
        if stopped() {
            return Err(ReproError::Interrupted);
        }
        progress.step(&format!(
            "mixed: {} (limit {}, {} tickets)",
            s.name, cfg.limit, s.tickets
        ));
        runs.push(one(&engine, cfg, s)?);
    }
    if stopped() {
        return Err(ReproError::Interrupted);
    }
    Ok(MixedReport {
        config: cfg.clone(),
        runs,
    })
}

fn one(engine: &Arc<Engine>, cfg: &MixedConfig, s: &MixedSetting) -> Result<MixedRun, ReproError> {
    let gate = s.gate(cfg.limit)?;
    let _watched = crate::live::watch(format!("mixed/{}", s.name), &gate);
    let mut alone = Vec::new();
    let mut rows = 0;
    for _ in 0..cfg.alone_reps {
        let mut c = Connection::new(engine.clone(), &gate, "alone");
        let (n, secs) = timed(|| c.count(tickets::TABLE));
        rows = n?;
        alone.push(secs);
    }
    let alone_s = median(&alone);

    let before = gate.snapshot();
    // The scans, the point sessions and this thread start together.
    let start = Arc::new(Barrier::new(SCANS + cfg.point_sessions + 1));
    let scans_running = Arc::new(AtomicUsize::new(SCANS));
    let scans: Vec<_> = (0..SCANS)
        .map(|i| {
            let (engine, gate, start) = (engine.clone(), gate.clone(), start.clone());
            let ended = ScanEnded(scans_running.clone());
            thread::spawn(move || {
                let _ended = ended;
                let mut c = Connection::new(engine, &gate, format!("scan-{i}"));
                start.wait();
                // The thread's times are read inside the timed interval, so they never
                // count a preemption the wall time does not.
                let ((n, times), secs) = timed(|| {
                    let t0 = ThreadTimes::now();
                    let n = c.count(tickets::TABLE);
                    (n, ThreadTimes::now().since(&t0))
                });
                (n, secs, times)
            })
        })
        .collect();
    let point_rows = cfg.point_rows;
    let points: Vec<_> = (0..cfg.point_sessions)
        .map(|i| {
            let (engine, gate, start, running) = (
                engine.clone(),
                gate.clone(),
                start.clone(),
                scans_running.clone(),
            );
            thread::Builder::new()
                // Point selects need little stack; 16 default 2 MiB stacks are waste.
                .stack_size(512 * 1024)
                .spawn(move || -> Result<Vec<u64>, ReproError> {
                    let mut c = Connection::new(engine, &gate, format!("point-{i}"));
                    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
                    let mut lat = Vec::new();
                    start.wait();
                    // At least one select each, so a scan that ends before a session's first
                    // statement still leaves a latency from every session.
                    loop {
                        let id = 1 + rng.below(point_rows);
                        let t = Instant::now();
                        std::hint::black_box(c.point_select(oltp::TABLE, id)?);
                        lat.push(t.elapsed().as_nanos() as u64);
                        if running.load(Ordering::Acquire) == 0 || stopped() {
                            return Ok(lat);
                        }
                    }
                })
                .expect("spawn a point-select thread")
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let mut scan_s = Vec::new();
    let mut scan_cpu_s = Vec::new();
    let mut scan_runqueue_s = Vec::new();
    for (n, secs, times) in join_all(scans)? {
        n?;
        scan_s.push(secs);
        scan_cpu_s.push(times.cpu_s);
        scan_runqueue_s.push(times.runqueue_s);
    }
    let mut lat = Vec::new();
    for l in join_all(points)? {
        lat.extend(l?);
    }
    let window = t0.elapsed().as_secs_f64();
    let after = gate.snapshot();
    let d =
        |f: fn(&turnstile::Counters) -> u64| f(&after.counters).saturating_sub(f(&before.counters));
    lat.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    let slowest = scan_s.iter().copied().fold(0.0, f64::max);
    Ok(MixedRun {
        setting: s.name,
        policy: s.policy.name(),
        tickets: s.tickets,
        limit: cfg.limit,
        rows,
        alone_s,
        scan_slowdown: slowest / alone_s,
        scan_s,
        scan_cpu_s,
        scan_runqueue_s,
        point_selects: lat.len() as u64,
        point_per_s: lat.len() as f64 / window,
        point_p50_ms: ms(quantile(&lat, 0.5)),
        point_p99_ms: ms(quantile(&lat, 0.99)),
        point_max_ms: ms(lat.last().copied().unwrap_or(0)),
        admissions: d(|c| c.admissions),
        sleeps: d(|c| c.sleeps),
        queue_waits: d(|c| c.queue_waits),
        limit_end: after.limit,
        limit_max: after.auto.map(|a| a.limit_max),
        limit_reasons: match (after.auto, before.auto) {
            (Some(a), Some(b)) => Some(a.limit_reasons.since(&b.limit_reasons)),
            _ => None,
        },
    })
}

/// Markdown section.
pub fn markdown(r: &MixedReport) -> String {
    use std::fmt::Write;
    let c = &r.config;
    let seed = |i: usize| {
        let (t, alone, both) = tickets::SEED[i];
        format!(
            "with {t} tickets {:.1} s and {:.1} s ({:.1}×)",
            both[0],
            both[1],
            both[0].max(both[1]) / alone
        )
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Mixed — two full scans beside {} point-select sessions, one gate\n\n\
         Gate limit {}, sleep delay 10 ms (InnoDB's). Scans: `SELECT COUNT(*)` over {} rows, one gate call per row; \
         point selects: `SELECT c … WHERE id=?` on random ids of {} rows, one statement and one call each, \
         every session looping until both scans have ended. \
         *alone s*: the scan with nothing else running (median of {}); *scans s*: the two concurrent scans; \
         *scans' CPU / run queue s*: each scan's own CPU time and its time runnable but waiting for a CPU (Linux's schedstat); \
         the rest of its time it waited for the gate; \
         *slowdown*: the slower of them ÷ alone; *p50/p99/max ms*: latency of one point select while the scans ran; \
         *selects/s*: point selects completed ÷ the concurrent phase; \
         *limit moves* (`auto`, docs/AUTO.md): its controller's 20 ms windows with threads queued, and how many raised the limit \
         to fill CPUs not busy with statements (fill) or to its floor, beside the scans a slot each plus the CPUs they leave (floor), \
         cut it for busy CPUs (busy) or late grants (late), or undid a fill that did not raise the CPU use (undone); \
         the windows read on are those whose CPU reading could not yet decide. \
         Seed 000 ran the scans only (MySQL 5.5, 9M rows, limit 1, classic): alone {:.1} s; two at once {}; {}. \
         Few tickets let short queries in between a scan's rows at the scans' cost; many keep the slot to the scan's end.\n",
        c.point_sessions,
        c.limit,
        c.rows,
        c.point_rows,
        c.alone_reps,
        tickets::SEED[0].1,
        seed(0),
        seed(1),
    );
    let _ = writeln!(
        s,
        "| setting | policy | tickets | alone s | scans s | scans' CPU / run queue s | slowdown | point selects | selects/s | p50 ms | p99 ms | max ms | admissions | sleeps | queue waits | limit at end (max) | limit moves |\n|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for x in &r.runs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} | {} | {} | {:.2} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {} | {} |",
            x.setting,
            x.policy,
            x.tickets,
            x.alone_s,
            x.scan_s
                .iter()
                .map(|v| format!("{v:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
            x.scan_cpu_s
                .iter()
                .zip(&x.scan_runqueue_s)
                .map(|(c, q)| match q {
                    Some(q) => format!("{c:.3} / {q:.3}"),
                    None => format!("{c:.3} / –"),
                })
                .collect::<Vec<_>>()
                .join(", "),
            x.scan_slowdown,
            x.point_selects,
            x.point_per_s,
            x.point_p50_ms,
            x.point_p99_ms,
            x.point_max_ms,
            x.admissions,
            x.sleeps,
            x.queue_waits,
            match x.limit_max {
                Some(m) => format!("{} ({m})", x.limit_end),
                None => x.limit_end.to_string(),
            },
            match &x.limit_reasons {
                Some(r) => crate::gate::limit_reasons_text(r),
                None => "–".into(),
            }
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_tiny_run_reports_every_setting_with_ordered_latencies() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-mixed-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let cfg = MixedConfig {
            rows: 20_000,
            point_rows: 2_000,
            point_sessions: 4,
            limit: 2,
            settings: MixedSetting::select(&["classic-500".into(), "polling".into()]).unwrap(),
            alone_reps: 1,
        };
        let r = run(&common, &cfg, &mut super::super::Quiet).unwrap();
        assert_eq!(
            r.runs.iter().map(|x| x.setting).collect::<Vec<_>>(),
            ["classic-500", "polling"]
        );
        for x in &r.runs {
            assert_eq!(x.rows, 20_000);
            assert_eq!(x.scan_s.len(), SCANS);
            // Each scan reports its own CPU time (it did work) and, on Linux, its run-queue
            // time; their sizes are measurements, not asserted.
            assert_eq!(x.scan_cpu_s.len(), SCANS);
            assert_eq!(x.scan_runqueue_s.len(), SCANS);
            assert!(x.scan_cpu_s.iter().all(|&c| c > 0.0), "{x:?}");
            if cfg!(target_os = "linux") {
                assert!(x.scan_runqueue_s.iter().all(Option::is_some), "{x:?}");
            }
            assert_eq!(x.limit, 2);
            assert!(
                x.scan_slowdown > 0.0 && x.scan_slowdown.is_finite(),
                "{x:?}"
            );
            assert!(x.point_selects >= cfg.point_sessions as u64, "{x:?}");
            assert!(x.point_per_s > 0.0, "{x:?}");
            assert!(
                0.0 < x.point_p50_ms
                    && x.point_p50_ms <= x.point_p99_ms
                    && x.point_p99_ms <= x.point_max_ms,
                "{x:?}"
            );
            // Every point select is one statement of one call: at most one admission each,
            // and each scan at least one.
            assert!(x.admissions >= SCANS as u64, "{x:?}");
            // A fixed limit stays where it was set; only `auto` reports a largest limit.
            assert_eq!((x.limit_end, x.limit_max), (2, None), "{x:?}");
            assert!(x.limit_reasons.is_none(), "{x:?}");
        }
        assert_eq!((r.runs[0].policy, r.runs[0].tickets), ("classic", 500));
        assert_eq!(r.runs[1].policy, "polling");
        let md = markdown(&r);
        assert!(md.contains("| classic-500 | classic | 500 |"), "{md}");
        assert!(md.contains("| polling | polling |"), "{md}");
        assert!(md.contains("95.5 s and 92.9 s"), "{md}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn settings_are_picked_by_name_with_clear_errors() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            MixedSetting::all()
                .iter()
                .map(|s| (s.name, s.policy.name(), s.tickets))
                .collect::<Vec<_>>(),
            [
                ("classic-500", "classic", 500),
                ("classic-10M", "classic", 10_000_000),
                ("flifo", "flifo", 500),
                ("polling", "polling", 500),
                ("auto", "auto", 500),
            ]
        );
        let s = MixedSetting::select(&names(&["polling", "classic-10M"])).unwrap();
        assert_eq!(
            s.iter().map(|s| s.name).collect::<Vec<_>>(),
            ["polling", "classic-10M"]
        );
        let e = MixedSetting::select(&names(&["flifo", "classic"])).unwrap_err();
        assert!(
            e.contains("'classic'") && e.contains("classic-500, classic-10M, flifo, polling, auto"),
            "{e}"
        );
        assert!(MixedSetting::select(&names(&["flifo", " flifo"]))
            .unwrap_err()
            .contains("twice"));
        assert!(MixedSetting::select(&[]).is_err());
        assert_eq!(
            quantile(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.5),
            5,
            "nearest rank"
        );
        assert_eq!(quantile(&[1, 2, 3], 0.99), 3);
        assert_eq!(quantile(&[], 0.5), 0);
        assert!(default_limit() >= 1);
    }

    #[test]
    fn empty_settings_are_refused_before_any_table_is_built() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-mixed-bad-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let cfg = MixedConfig {
            settings: Vec::new(),
            ..MixedConfig::quick()
        };
        assert!(matches!(
            run(&common, &cfg, &mut super::super::Quiet),
            Err(ReproError::BadInput(_))
        ));
        assert!(!dir.exists());
    }
}
