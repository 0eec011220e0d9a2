//! Seed 001's own client: Debian's `sysbench` 1.0 binary, driven against `turnstile serve`.
//!
//! The built-in generator ([`super::oltp`]) runs sysbench's read-only transaction in-process:
//! no protocol, no client CPU. This module runs the real `sysbench oltp_read_only` over the
//! MySQL protocol instead, parses what it prints, and measures the CPU the client itself
//! used (`getrusage(RUSAGE_CHILDREN)` around each run), so the two curves can be put side by
//! side and the client's share of the machine is on the record.
//!
//! sysbench is optional: [`find`] says how to install it when it is missing, and nothing in
//! the default test run needs it.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ReproError;

/// Where Debian's package puts the binary; `$TURNSTILE_SYSBENCH` or `PATH` may name another.
const DEFAULT_PATH: &str = "/usr/bin/sysbench";

/// The sysbench binary to run: `$TURNSTILE_SYSBENCH`, else `sysbench` on `PATH`, else
/// `/usr/bin/sysbench`; an error that says how to install it when none is there, and one that
/// names the version when it is not 1.0.x (the only output format [`parse`] knows).
pub fn find() -> Result<(PathBuf, String), ReproError> {
    let candidates: Vec<PathBuf> = std::env::var_os("TURNSTILE_SYSBENCH")
        .map(PathBuf::from)
        .into_iter()
        .chain(std::env::var_os("PATH").into_iter().flat_map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("sysbench"))
                .collect::<Vec<_>>()
        }))
        .chain(std::iter::once(PathBuf::from(DEFAULT_PATH)))
        .collect();
    let Some(bin) = candidates.into_iter().find(|p| p.is_file()) else {
        return Err(ReproError::BadInput(
            "--client sysbench needs the sysbench 1.0 binary, which is not installed: \
             `sudo apt-get install sysbench` (Debian/Ubuntu), or set TURNSTILE_SYSBENCH to its path"
                .into(),
        ));
    };
    let out = Command::new(&bin)
        .arg("--version")
        .output()
        .map_err(|e| ReproError::BadInput(format!("cannot run {}: {e}", bin.display())))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !version.starts_with("sysbench 1.0") {
        return Err(ReproError::BadInput(format!(
            "{} says '{version}': --client sysbench reads the output of sysbench 1.0.x",
            bin.display()
        )));
    }
    Ok((bin, version))
}

/// One `sysbench … run`, as [`run`] starts it.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The sysbench test (`oltp_read_only`, `oltp_point_select`, …).
    pub test: String,
    /// Server address.
    pub host: String,
    /// Server port.
    pub port: u16,
    /// The table's rows (`--table-size`; the table `sbtest1` must exist with that many).
    pub table_size: u32,
    /// Rows per range (`--range-size`).
    pub range_size: u32,
    /// Client threads = connections.
    pub threads: usize,
    /// Measured time (`--time`, whole seconds, at least 1).
    pub time: Duration,
}

impl Invocation {
    /// The arguments after the binary.
    pub fn args(&self) -> Vec<String> {
        vec![
            self.test.clone(),
            "--db-driver=mysql".into(),
            format!("--mysql-host={}", self.host),
            format!("--mysql-port={}", self.port),
            "--mysql-user=root".into(),
            "--mysql-db=sbtest".into(),
            "--tables=1".into(),
            format!("--table-size={}", self.table_size),
            format!("--range-size={}", self.range_size),
            format!("--threads={}", self.threads),
            format!("--time={}", self.time.as_secs().max(1)),
            // sysbench stops at --time; --events=0 lifts its default cap of events.
            "--events=0".into(),
            "--report-interval=0".into(),
            "run".into(),
        ]
    }
}

/// What one sysbench run printed, and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SysbenchResult {
    /// Transactions completed.
    pub transactions: u64,
    /// Transactions per second as sysbench computed it.
    pub tps: f64,
    /// Queries per second.
    pub qps: f64,
    /// Errors sysbench ignored (deadlocks, lock wait timeouts: it retries the transaction).
    pub ignored_errors: u64,
    /// Reconnects.
    pub reconnects: u64,
    /// Total time sysbench reports, seconds.
    pub total_time_s: f64,
    /// Latency of a transaction, ms: average.
    pub avg_ms: f64,
    /// … its 95th percentile (sysbench's default percentile).
    pub p95_ms: f64,
    /// … its maximum.
    pub max_ms: f64,
    /// CPU seconds the sysbench process used (user + system), from `getrusage`.
    pub client_cpu_s: f64,
    /// Wall-clock seconds the process ran, start to exit (connections and warm-up included).
    pub wall_s: f64,
}

impl SysbenchResult {
    /// The client's CPU use as a share of the machine over its run: CPU seconds ÷ (wall
    /// seconds × cores).
    pub fn client_cpu_share(&self, cores: usize) -> f64 {
        if self.wall_s <= 0.0 || cores == 0 {
            return 0.0;
        }
        self.client_cpu_s / (self.wall_s * cores as f64)
    }
}

/// The value after `label` on the first line that starts (after spaces) with it: the first
/// number on the rest of the line, with a trailing `s` (seconds) allowed.
fn field(out: &str, label: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(label)?;
        let tok = rest.split_whitespace().next()?;
        tok.trim_end_matches('s').parse().ok()
    })
}

/// The per-second rate in `NNN  (RATE per sec.)`.
fn rate(out: &str, label: &str) -> Option<f64> {
    out.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(label)?;
        let open = rest.find('(')?;
        rest[open + 1..].split_whitespace().next()?.parse().ok()
    })
}

/// Parses the report sysbench 1.0 prints at the end of `run`. Every field it needs must be
/// there: a missing one is an error that quotes the output, never a zero.
pub fn parse(out: &str) -> Result<SysbenchResult, String> {
    let need = |v: Option<f64>, what: &str| {
        v.ok_or_else(|| {
            let tail: Vec<&str> = out.lines().rev().take(12).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            format!(
                "sysbench output has no '{what}' line; its last lines:\n{}",
                tail.join("\n")
            )
        })
    };
    Ok(SysbenchResult {
        transactions: need(field(out, "transactions:"), "transactions:")? as u64,
        tps: need(rate(out, "transactions:"), "transactions: (per sec.)")?,
        qps: need(rate(out, "queries:"), "queries: (per sec.)")?,
        ignored_errors: need(field(out, "ignored errors:"), "ignored errors:")? as u64,
        reconnects: need(field(out, "reconnects:"), "reconnects:")? as u64,
        total_time_s: need(field(out, "total time:"), "total time:")?,
        avg_ms: need(field(out, "avg:"), "avg:")?,
        p95_ms: need(field(out, "95th percentile:"), "95th percentile:")?,
        max_ms: need(field(out, "max:"), "max:")?,
        client_cpu_s: 0.0,
        wall_s: 0.0,
    })
}

/// CPU seconds (user + system) of the waited-for children of this process so far.
fn children_cpu_s() -> f64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed value it is given; RUSAGE_CHILDREN
    // is a valid `who`; the value is read only after the call returned 0.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: see above; `&mut ru` is a valid, exclusive pointer for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `bin` with `inv`, waits for it (killing it past `inv.time` + `grace`), and parses its
/// report. Its CPU is the growth of this process's children's CPU across the run, so runs
/// must not overlap.
pub fn run(bin: &Path, inv: &Invocation, grace: Duration) -> Result<SysbenchResult, ReproError> {
    let cpu0 = children_cpu_s();
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args(inv.args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ReproError::BadInput(format!("cannot start {}: {e}", bin.display())))?;
    // Read both pipes on threads so a full pipe cannot stall the child.
    let mut so = child.stdout.take().expect("stdout is piped");
    let mut se = child.stderr.take().expect("stderr is piped");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let deadline = start + inv.time + grace;
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| ReproError::BadInput(format!("waiting for sysbench: {e}")))?
        {
            break st;
        }
        if Instant::now() > deadline || super::stopped() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(if super::stopped() {
                ReproError::Interrupted
            } else {
                ReproError::BadInput(format!(
                    "sysbench ({} threads) did not finish within {:?} of its {:?}: killed",
                    inv.threads, grace, inv.time
                ))
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall_s = start.elapsed().as_secs_f64();
    let cpu = children_cpu_s() - cpu0;
    let out = out_t.join().unwrap_or_default();
    let err = err_t.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = out.lines().chain(err.lines()).rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(ReproError::BadInput(format!(
            "sysbench {} ({} threads) failed ({status}):\n{}",
            inv.test,
            inv.threads,
            tail.join("\n")
        )));
    }
    let mut r = parse(&out).map_err(ReproError::BadInput)?;
    r.client_cpu_s = cpu;
    r.wall_s = wall_s;
    Ok(r)
}

/// One point of the sysbench sweep: sysbench's figures, what the server process spent, and
/// the gate's counters per transaction.
#[derive(Debug, Clone, Serialize)]
pub struct SysbenchRun {
    /// Gate setting label (as in the built-in sweep).
    pub policy: String,
    /// sysbench threads = connections = server threads.
    pub threads: usize,
    /// Transactions per second (sysbench's own figure).
    pub tps: f64,
    /// Queries per second.
    pub qps: f64,
    /// Transaction latency as sysbench measures it, ms: the average.
    pub avg_ms: f64,
    /// The 95th percentile (sysbench's default percentile).
    pub p95_ms: f64,
    /// The maximum.
    pub max_ms: f64,
    /// Errors sysbench ignored and retried (deadlock, lock wait timeout).
    pub ignored_errors: u64,
    /// sysbench's CPU ÷ (its wall time × cores): the client's share of the machine.
    pub client_cpu_share: f64,
    /// This process's (the server's) CPU ÷ (the run's wall time × cores).
    pub server_cpu_share: f64,
    /// Context switches of the server process per transaction.
    pub cs_per_txn: f64,
    /// Gate admissions per transaction.
    pub admissions_per_txn: f64,
    /// TPS ÷ this setting's highest sysbench TPS.
    pub of_peak: f64,
    /// TPS ÷ peak of the built-in client at the same setting and threads, if it ran there.
    pub builtin_of_peak: Option<f64>,
    /// `|of_peak − builtin_of_peak|` in points (100 × the difference).
    pub shape_diff_points: Option<f64>,
}

/// The sysbench sweep: every setting × thread count of the built-in sweep, through the server.
#[derive(Debug, Clone, Serialize)]
pub struct SysbenchSweep {
    /// `sysbench --version`.
    pub version: String,
    /// The sysbench test run.
    pub test: String,
    /// Seconds per point (sysbench's `--time`: whole seconds).
    pub seconds: u64,
    /// The points.
    pub runs: Vec<SysbenchRun>,
    /// The largest shape difference over every point, in points.
    pub max_shape_diff_points: f64,
}

/// Runs `sysbench oltp_read_only` against the server on 127.0.0.1:`port` for every setting
/// and thread count of `cfg`, comparing each curve's shape (TPS ÷ its own peak) with the
/// built-in client's `builtin` runs at the same points. The server serves the table
/// [`super::sweep::TABLE`] with `cfg.rows` rows; `reconfigure` puts a setting in force on it
/// before its points run and returns the gate it now uses (whose counters give admissions per
/// transaction).
pub fn sweep(
    cfg: &super::sweep::OltpConfig,
    builtin: &[super::sweep::OltpRun],
    port: u16,
    reconfigure: &mut dyn FnMut(&super::sweep::GateSetting) -> Result<turnstile::Gate, ReproError>,
    progress: &mut dyn super::Progress,
) -> Result<SysbenchSweep, ReproError> {
    let (bin, version) = find()?;
    let secs = cfg.duration.as_secs_f64().round().max(1.0) as u64;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut runs = Vec::new();
    for s in &cfg.settings {
        let gate = reconfigure(s)?;
        for &threads in &cfg.threads {
            if super::stopped() {
                return Err(ReproError::Interrupted);
            }
            progress.step(&format!("oltp (sysbench): {} × {threads} threads", s.name));
            let inv = Invocation {
                test: "oltp_read_only".into(),
                host: "127.0.0.1".into(),
                port,
                table_size: cfg.rows,
                range_size: cfg.range,
                threads,
                time: Duration::from_secs(secs),
            };
            let c0 = gate.stats().counters;
            let (u0, t0) = (crate::rusage::Usage::now(), Instant::now());
            // Connecting 1024 clients and their teardown take seconds on two cores.
            let r = run(&bin, &inv, Duration::from_secs(60 + threads as u64 / 8))?;
            let (usage, wall) = (crate::rusage::Usage::now().since(&u0), t0.elapsed());
            let c1 = gate.stats().counters;
            let txns = r.transactions.max(1) as f64;
            runs.push(SysbenchRun {
                policy: s.name.clone(),
                threads,
                tps: r.tps,
                qps: r.qps,
                avg_ms: r.avg_ms,
                p95_ms: r.p95_ms,
                max_ms: r.max_ms,
                ignored_errors: r.ignored_errors,
                client_cpu_share: r.client_cpu_share(cores),
                server_cpu_share: (usage.user + usage.sys).as_secs_f64()
                    / (wall.as_secs_f64() * cores as f64),
                // Connections, warm-up and teardown are in the process's counts too; sysbench
                // counts only the timed transactions: an upper bound per transaction.
                cs_per_txn: usage.context_switches() as f64 / txns,
                admissions_per_txn: c1.admissions.saturating_sub(c0.admissions) as f64 / txns,
                of_peak: 0.0,
                builtin_of_peak: None,
                shape_diff_points: None,
            });
        }
    }
    let max_shape_diff_points = compare_shapes(&mut runs, builtin);
    Ok(SysbenchSweep {
        version,
        test: "oltp_read_only".into(),
        seconds: secs,
        runs,
        max_shape_diff_points,
    })
}

/// Fills each run's share of its setting's peak, the built-in client's share at the same
/// point, and their difference; returns the largest difference (0 when nothing compares).
fn compare_shapes(runs: &mut [SysbenchRun], builtin: &[super::sweep::OltpRun]) -> f64 {
    let mut worst = 0.0f64;
    let policies: Vec<String> = {
        let mut v: Vec<String> = runs.iter().map(|r| r.policy.clone()).collect();
        v.dedup();
        v
    };
    for p in policies {
        let sb_peak = runs
            .iter()
            .filter(|r| r.policy == p)
            .map(|r| r.tps)
            .fold(0.0, f64::max);
        let bi_peak = builtin
            .iter()
            .filter(|r| r.policy == p)
            .map(|r| r.tps)
            .fold(0.0, f64::max);
        for r in runs.iter_mut().filter(|r| r.policy == p) {
            r.of_peak = if sb_peak > 0.0 { r.tps / sb_peak } else { 0.0 };
            let bi = builtin
                .iter()
                .find(|b| b.policy == p && b.threads == r.threads)
                .filter(|_| bi_peak > 0.0)
                .map(|b| b.tps / bi_peak);
            r.builtin_of_peak = bi;
            r.shape_diff_points = bi.map(|b| 100.0 * (r.of_peak - b).abs());
            if let Some(d) = r.shape_diff_points {
                worst = worst.max(d);
            }
        }
    }
    worst
}

/// The sweep as a Markdown section: both clients' shapes per point, and what sysbench cost.
pub fn markdown(s: &SysbenchSweep) -> String {
    let mut md = format!(
        "\n### The same sweep driven by sysbench over the MySQL protocol\n\n`{}` `{}` against \
         `turnstile serve` in this process, {} s per point. *Of peak* is TPS ÷ the setting's \
         own highest TPS for each client; the shape target is a difference within 10 points. \
         Client CPU is sysbench's share of the machine; on two cores it competes with the \
         server, which the built-in client does not.\n\n\
         | setting | threads | sysbench TPS | of peak | built-in of peak | diff (points) | p95 ms | client CPU % | server CPU % | admissions/txn | ignored errors |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        s.version, s.test, s.seconds
    );
    for r in &s.runs {
        let opt = |v: Option<f64>, scale: f64| {
            v.map_or("–".to_string(), |v| format!("{:.0}", v * scale))
        };
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} % | {} % | {} | {:.1} | {:.0} | {:.0} | {:.1} | {} |\n",
            r.policy,
            r.threads,
            r.tps,
            100.0 * r.of_peak,
            opt(r.builtin_of_peak, 100.0),
            opt(r.shape_diff_points, 1.0),
            r.p95_ms,
            100.0 * r.client_cpu_share,
            100.0 * r.server_cpu_share,
            r.admissions_per_txn,
            r.ignored_errors
        ));
    }
    md.push_str(&format!(
        "\nLargest shape difference: **{:.0} points** (target ≤ 10).\n",
        s.max_shape_diff_points
    ));
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sysbench 1.0.20's report, as it prints it after `oltp_read_only … run`.
    const REPORT: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Running the test with following options:
Number of threads: 8
Initializing random number generator from current time


Initializing worker threads...

Threads started!

SQL statistics:
    queries performed:
        read:                            140014
        write:                           0
        other:                           20002
        total:                           160016
    transactions:                        10001  (999.85 per sec.)
    queries:                             160016 (15997.65 per sec.)
    ignored errors:                      3      (0.30 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          10.0021s
    total number of events:              10001

Latency (ms):
         min:                                    0.51
         avg:                                    7.99
         max:                                  105.27
         95th percentile:                       12.08
         sum:                                79917.53

Threads fairness:
    events (avg/stddev):           1250.1250/20.53
    execution time (avg/stddev):   9.9897/0.00
";

    #[test]
    fn the_sysbench_1_0_report_parses_into_every_field() {
        let r = parse(REPORT).unwrap();
        assert_eq!(r.transactions, 10001);
        assert_eq!(r.tps, 999.85);
        assert_eq!(r.qps, 15997.65);
        assert_eq!(r.ignored_errors, 3);
        assert_eq!(r.reconnects, 0);
        assert_eq!(r.total_time_s, 10.0021);
        assert_eq!((r.avg_ms, r.p95_ms, r.max_ms), (7.99, 12.08, 105.27));
    }

    #[test]
    fn a_report_missing_a_line_is_an_error_that_quotes_the_output_not_a_zero() {
        let cut = REPORT.replace("    transactions:", "    txns:");
        let e = parse(&cut).unwrap_err();
        assert!(
            e.contains("transactions:") && e.contains("execution time"),
            "{e}"
        );
        let e = parse("FATAL: unable to connect to MySQL server on host '127.0.0.1'").unwrap_err();
        assert!(e.contains("unable to connect"), "{e}");
    }

    #[test]
    fn the_invocation_names_the_server_the_table_and_the_load() {
        let inv = Invocation {
            test: "oltp_read_only".into(),
            host: "127.0.0.1".into(),
            port: 40001,
            table_size: 20_000,
            range_size: 1000,
            threads: 64,
            time: Duration::from_millis(500),
        };
        let a = inv.args();
        assert_eq!(a.first().map(String::as_str), Some("oltp_read_only"));
        assert_eq!(a.last().map(String::as_str), Some("run"));
        for want in [
            "--mysql-port=40001",
            "--table-size=20000",
            "--range-size=1000",
            "--threads=64",
            "--time=1",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
    }

    fn sb(policy: &str, threads: usize, tps: f64) -> SysbenchRun {
        SysbenchRun {
            policy: policy.into(),
            threads,
            tps,
            qps: 0.0,
            avg_ms: 0.0,
            p95_ms: 0.0,
            max_ms: 0.0,
            ignored_errors: 0,
            client_cpu_share: 0.0,
            server_cpu_share: 0.0,
            cs_per_txn: 0.0,
            admissions_per_txn: 0.0,
            of_peak: 0.0,
            builtin_of_peak: None,
            shape_diff_points: None,
        }
    }

    #[test]
    fn shapes_compare_each_client_against_its_own_peak_per_setting() {
        let mut runs = vec![
            sb("classic", 1, 500.0),
            sb("classic", 4, 1000.0),
            sb("flifo", 1, 300.0),
            sb("flifo", 4, 600.0),
            sb("flifo", 16, 900.0),
        ];
        let mut builtin = Vec::new();
        for (p, t, tps) in [
            ("classic", 1, 1800.0),
            ("classic", 4, 2000.0),
            ("flifo", 4, 1000.0),
        ] {
            builtin.push(crate::repro::sweep::OltpRun {
                policy: p.into(),
                threads: t,
                tps,
                ..Default::default()
            });
        }
        let worst = compare_shapes(&mut runs, &builtin);
        // classic: sysbench 50 % and 100 % of its peak, built-in 90 % and 100 %.
        assert_eq!(runs[0].of_peak, 0.5);
        assert_eq!(runs[0].builtin_of_peak, Some(0.9));
        assert!((runs[0].shape_diff_points.unwrap() - 40.0).abs() < 1e-9);
        assert_eq!(runs[1].shape_diff_points, Some(0.0));
        // flifo: the built-in ran only 4 threads (its peak); 16 threads has no partner.
        assert!((runs[3].of_peak - 600.0 / 900.0).abs() < 1e-12);
        assert_eq!(runs[3].builtin_of_peak, Some(1.0));
        assert_eq!(runs[2].builtin_of_peak, None);
        assert_eq!(runs[4].shape_diff_points, None);
        assert!((worst - 40.0).abs() < 1e-9, "{worst}");
        let md = markdown(&SysbenchSweep {
            version: "sysbench 1.0.20".into(),
            test: "oltp_read_only".into(),
            seconds: 2,
            runs,
            max_shape_diff_points: worst,
        });
        assert!(
            md.contains("| classic | 1 | 500 | 50 % | 90 % | 40 |"),
            "{md}"
        );
        assert!(md.contains("**40 points**"), "{md}");
    }

    #[test]
    fn the_client_cpu_share_divides_by_wall_time_and_cores() {
        let r = SysbenchResult {
            client_cpu_s: 3.0,
            wall_s: 2.0,
            ..Default::default()
        };
        assert_eq!(r.client_cpu_share(2), 0.75);
        assert_eq!(r.client_cpu_share(0), 0.0);
    }

    #[test]
    fn a_missing_binary_says_how_to_install_it() {
        // Only meaningful where sysbench is absent; where it is present, its version is 1.0.
        match find() {
            Ok((_, v)) => assert!(v.starts_with("sysbench 1.0"), "{v}"),
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("apt-get install sysbench"), "{e}");
            }
        }
    }
}
