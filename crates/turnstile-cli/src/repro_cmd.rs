//! `turnstile repro …`: the seed experiments on the embedded engine, and the report folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;
use turnstile::Policy;
use turnstile_bench::chart::{BarChart, BarPanel, LineChart, Series};
use turnstile_bench::repro::server::{
    self as server_bench, Program, ServerBenchConfig, ServerKind,
};
use turnstile_bench::repro::{self, mixed, oltp, pileup, tickets, Common, Progress, ReproError};
use turnstile_bench::stats::each_once;

use crate::emit;
use crate::Progress as Bar;

#[derive(Subcommand)]
pub enum Repro {
    /// Seed 000: full scans through a gate of limit 1 with 500 and 10,000,000 tickets.
    Tickets(TicketsArgs),
    /// Seed 001: sysbench OLTP read-only, TPS against client threads.
    Oltp(OltpArgs),
    /// Seed 004: insert + query sessions per table, the slot held or released across the
    /// commit-mutex wait.
    Pileup(PileupArgs),
    /// Seed 000 extended: two full scans beside 16 point-select sessions through one gate,
    /// the scans' slowdown and the point selects' latency per policy and tickets.
    Mixed(MixedArgs),
    /// The real sysbench 1.0 client against `turnstile serve` and, when installed, a MariaDB
    /// server this command starts, each in both thread handlings (one-thread-per-connection,
    /// pool-of-threads): TPS, latency, CPU and threads against client connections.
    Server(ServerArgs),
    /// All four with defaults that finish within 10 minutes on two cores, writing a report
    /// folder (report.md, SVG charts, results.json).
    All(AllArgs),
}

#[derive(Args, Clone)]
pub struct CommonArgs {
    /// Where the engine keeps its tables (built once, reused while they match).
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
    /// Extra delay in ms inside every binlog fsync, emulating a slow disk. Default: 60 for the
    /// pileup (the seed's SATA disk, ~16 commits/s), 0 elsewhere.
    #[arg(long)]
    fsync_ms: Option<u64>,
    /// A short run (under a minute each) for CI and trying things out.
    #[arg(long)]
    quick: bool,
    /// Print results as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
    /// Every second, write the Prometheus text of the gate(s) running now to this file, each
    /// labelled `gate="<run>/<policy>/<setting>"` (written to PATH.tmp, then renamed, so a reader
    /// never sees half a file); between runs and at the end it holds the last gate's final
    /// figures. Example: `watch cat PATH`.
    #[arg(long, value_name = "PATH")]
    metrics_file: Option<PathBuf>,
}

impl CommonArgs {
    fn common(&self) -> Result<Common, String> {
        if let Some(ms) = self.fsync_ms.filter(|&ms| ms > 10_000) {
            return Err(format!("--fsync-ms {ms} is out of range: 0..=10000"));
        }
        check_writable("data directory", &self.data_dir)?;
        Ok(Common {
            data_dir: self.data_dir.clone(),
            fsync_delay: self.fsync_ms.map(Duration::from_millis),
        })
    }
}

/// Fails early, before anything is run, if `dir` (`what`: a data directory, a report
/// folder) cannot be created or written: a report folder found unwritable after a sweep of
/// many minutes would lose its results.
pub(crate) fn check_writable(what: &str, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create {what} {}: {e}", dir.display()))?;
    let probe = dir.join(".turnstile-write-test");
    std::fs::write(&probe, b"ok")
        .map_err(|e| format!("{what} {} is not writable: {e}", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Checks that the file `path` can be written, before a long run that ends by writing it:
/// its folder is created, it is not a folder, and it opens for writing (an existing file is
/// left as it is; one created by the check is removed).
pub(crate) fn check_file_writable(what: &str, path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create folder {} for {what}: {e}", dir.display()))?;
    }
    if path.is_dir() {
        return Err(format!(
            "{what} {} is a folder: give a file name",
            path.display()
        ));
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| format!("{what} {} is not writable: {e}", path.display()))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// The most rows a `--rows` may ask for: ten times seed 000's table (9 M rows), a few GB.
/// More would load for hours (`--rows 4000000000` wrote 840 MB in 6 s and was still at
/// the start).
const MAX_ROWS: u32 = 100_000_000;

/// `--rows`: positive and at most [`MAX_ROWS`].
fn rows(v: u32) -> Result<u32, String> {
    let v = positive("--rows", v)?;
    if v > MAX_ROWS {
        return Err(format!("--rows {v} is more than {MAX_ROWS}"));
    }
    Ok(v)
}

#[derive(Args)]
pub struct TicketsArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Rows in the scanned table (default 2,000,000; quick 200,000).
    #[arg(long)]
    rows: Option<u32>,
    /// Policies (comma-separated). Default: all.
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
}

#[derive(Args)]
pub struct OltpArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Rows in the table (default 100,000; quick 20,000).
    #[arg(long)]
    rows: Option<u32>,
    /// Rows per range (default 1000).
    #[arg(long)]
    range: Option<u32>,
    /// Client thread counts (comma-separated). Default 1,2,4,…,1024 (quick: 1,4,16,64,256).
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Seconds per point (default 2; quick 0.5), measured after an unmeasured warm-up of a quarter of it.
    #[arg(long)]
    seconds: Option<f64>,
    /// Gate settings to run (comma-separated): classic, flifo, polling, timer, unlimited, auto,
    /// and auto@L for `auto` with its limit fixed at L (the sweep `auto`'s own limit is judged
    /// against: `--policies auto,auto@1,auto@2,auto@4,…,auto@64`). Default: all but auto@L.
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// What the server layer does with the slot for each row sent to the client, for every
    /// setting: force-exit (MySQL 5.0/5.1, as the seed ran: every row of the simple range is
    /// a new admission) or keep (5.5+).
    #[arg(long, default_value = "force-exit")]
    row_send: String,
    /// After the sweep, run each adaptive `auto` point at 256 threads and more beside every
    /// setting's peak (its highest median TPS in the sweep) in this many pairs, the two points
    /// back to back, which one first alternating, and report each pair's ratio, their median,
    /// and the lowest median (against the strongest peak): a comparison a shared machine's
    /// slow spells (tens of seconds, longer than a pair, shorter than a sweep) cannot tilt.
    /// Default 0: none.
    #[arg(long, default_value_t = 0)]
    versus_best: usize,
    /// Folder for the TPS chart.
    #[arg(long, default_value = "reports/repro-oltp")]
    out: PathBuf,
    /// The client: `builtin` (the in-process generator) or `sysbench`, which runs the built-in
    /// sweep and then the same settings and thread counts with Debian's sysbench 1.0 binary
    /// (`oltp_read_only`) against `turnstile serve` started in this process, and puts both
    /// curves in the report (sysbench runs whole seconds: `--seconds` is rounded, at least 1).
    #[arg(long, default_value = "builtin", value_parser = ["builtin", "sysbench"])]
    client: String,
    /// Repeat the whole sweep this many times (1–100): each point reports the repetition with
    /// the median TPS (with an even count, the lower of the two middle ones), the table shows the lowest and highest beside it, and the JSON every
    /// repetition's TPS (`tps_reps`). One 2 s point moves by several per cent on a shared machine. Every
    /// sweep runs all settings at one thread count before the next, so the settings compared at
    /// a thread count ran seconds apart.
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Run this many CPU-bound processes beside the whole run (0–64), each in a session of its
    /// own: another service's share of the CPUs, which does not shrink however many threads
    /// the run has (the kernel's autogroup, or a service manager's cgroups). Built-in client
    /// only. Default 0: none.
    #[arg(long, default_value_t = 0)]
    competing_processes: u32,
    /// Extra CPU in ns spent inside the engine for every row fetched (0–1,000,000), emulating
    /// costlier rows: seed 001's cost ~2500 ns, this engine's ~150, so with
    /// `--row-work-ns 2350` the gate sees the seed's ratio of rows to admissions. Built-in
    /// client only. Default 0: none.
    #[arg(long, default_value_t = 0)]
    row_work_ns: u64,
}

#[derive(Args)]
pub struct PileupArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Table counts (comma-separated). Default 1,4,8,16.
    #[arg(long, value_delimiter = ',')]
    tables: Option<Vec<usize>>,
    /// Seconds per run (default 5; quick 1.5).
    #[arg(long)]
    seconds: Option<f64>,
    /// Repeat the whole sweep this many times (1–100) and add the medians: each ratio to the
    /// first table count is taken within its repetition. On a shared machine one run's ratio
    /// can move widely between runs.
    #[arg(long, default_value_t = 1)]
    reps: usize,
    /// Folder for the charts.
    #[arg(long, default_value = "reports/repro-pileup")]
    out: PathBuf,
}

#[derive(Args)]
pub struct MixedArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Rows in the scanned table (default 2,000,000; quick 200,000: seed 000's table, shared
    /// with `repro tickets`).
    #[arg(long)]
    rows: Option<u32>,
    /// Gate settings to run (comma-separated): classic-500, classic-10M, flifo, polling, auto.
    /// Default: all.
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// The gate limit. Default: the host's cores.
    #[arg(long)]
    limit: Option<u32>,
    /// Folder for the report (mixed.md) and the chart (mixed.svg).
    #[arg(long, default_value = "reports/repro")]
    out: PathBuf,
}

#[derive(Args)]
pub struct ServerArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// sysbench threads = connections (comma-separated), each below 2000 (the servers'
    /// connection limit). Default 1,4,16,64,256,1024 (quick: 4,64,1024).
    #[arg(long, value_delimiter = ',')]
    clients: Option<Vec<usize>>,
    /// sysbench tests (comma-separated): oltp_read_only, oltp_point_select. Default: both.
    #[arg(long, value_delimiter = ',')]
    workloads: Option<Vec<String>>,
    /// Seconds per sysbench run, whole, 1..=3600 (default 10; quick 3).
    #[arg(long)]
    seconds: Option<u64>,
    /// Repetitions of the whole sweep, 1..=100 (default 3; quick 1): the tables show medians,
    /// the ratios the median of each repetition's ratio.
    #[arg(long)]
    reps: Option<usize>,
    /// Servers (comma-separated): turnstile/one-thread-per-connection,
    /// turnstile/pool-of-threads, mariadb/one-thread-per-connection, mariadb/pool-of-threads.
    /// Default: all four (MariaDB's two are skipped, with a note, where mariadbd is not found).
    #[arg(long, value_delimiter = ',')]
    servers: Option<Vec<String>>,
    /// Folder for the report (server.md), one TPS chart per workload and results.json.
    #[arg(long, default_value = "reports/repro-server")]
    out: PathBuf,
}

#[derive(Args)]
pub struct AllArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The report folder.
    #[arg(long, default_value = "reports/repro")]
    out: PathBuf,
}

impl Progress for Bar {
    fn step(&mut self, what: &str) {
        Bar::step(self, what);
    }
    fn load(&mut self, done: u64, total: u64) {
        self.load(done, total);
    }
}

fn seconds(s: Option<f64>, default: Duration) -> Result<Duration, String> {
    match s {
        None => Ok(default),
        Some(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(Duration::from_secs_f64(v)),
        Some(v) => Err(format!(
            "--seconds {v} is out of range: more than 0, at most 3600"
        )),
    }
}

fn positive<T: PartialOrd + Default + std::fmt::Display + Copy>(
    what: &str,
    v: T,
) -> Result<T, String> {
    if v > T::default() {
        Ok(v)
    } else {
        Err(format!("{what} must be positive, got {v}"))
    }
}

fn tickets_config(a: &TicketsArgs) -> Result<tickets::TicketsConfig, String> {
    let mut c = if a.common.quick {
        tickets::TicketsConfig::quick()
    } else {
        tickets::TicketsConfig::full()
    };
    if let Some(r) = a.rows {
        c.rows = rows(r)?;
    }
    if let Some(p) = &a.policies {
        c.policies = p
            .iter()
            .map(|s| s.parse::<Policy>().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        each_once("--policies", &c.policies, |p| p.to_string())?;
    }
    Ok(c)
}

fn oltp_config(a: &OltpArgs) -> Result<oltp::OltpConfig, String> {
    let mut c = if a.common.quick {
        oltp::OltpConfig::quick()
    } else {
        oltp::OltpConfig::full()
    };
    if let Some(r) = a.rows {
        c.rows = rows(r)?;
    }
    if let Some(r) = a.range {
        c.range = positive("--range", r)?;
    }
    if c.range > c.rows {
        return Err(format!(
            "--range {} is larger than the table ({} rows)",
            c.range, c.rows
        ));
    }
    if let Some(t) = &a.threads {
        if t.is_empty() || t.contains(&0) || t.iter().any(|&x| x > 16_384) {
            return Err("--threads must be between 1 and 16384".into());
        }
        each_once("--threads", t, |n| n.to_string())?;
        c.threads = t.clone();
    }
    c.duration = seconds(a.seconds, c.duration)?;
    let row_send = a.row_send.parse::<oltp::RowSend>()?;
    let names = match &a.policies {
        Some(p) => p.clone(),
        None => c.settings.iter().map(|s| s.name.to_string()).collect(),
    };
    c.settings = oltp::GateSetting::select(&names, row_send)?;
    if !(1..=100).contains(&a.reps) {
        return Err(format!("--reps {} is out of range: 1..=100", a.reps));
    }
    c.reps = a.reps;
    if a.versus_best > 100 {
        return Err(format!(
            "--versus-best {} is out of range: 0..=100",
            a.versus_best
        ));
    }
    c.versus_best = a.versus_best;
    if a.competing_processes > 64 {
        return Err(format!(
            "--competing-processes {} is out of range: 0..=64",
            a.competing_processes
        ));
    }
    if a.competing_processes > 0 && a.client != "builtin" {
        return Err(
            "--competing-processes runs beside the built-in client only: drop --client sysbench"
                .into(),
        );
    }
    c.competing_processes = a.competing_processes;
    if a.row_work_ns > 1_000_000 {
        return Err(format!(
            "--row-work-ns {} is out of range: 0..=1000000",
            a.row_work_ns
        ));
    }
    if a.row_work_ns > 0 && a.client != "builtin" {
        return Err(
            "--row-work-ns applies to the built-in client's engine only: drop --client sysbench"
                .into(),
        );
    }
    c.row_work_ns = a.row_work_ns;
    if c.versus_best > 0 && oltp::versus_best_points(&c).is_empty() {
        return Err(format!(
            "--versus-best measures the adaptive auto setting at {} threads or more: add auto \
             to --policies and such a count to --threads",
            oltp::MANY_CLIENTS
        ));
    }
    Ok(c)
}

fn mixed_config(a: &MixedArgs) -> Result<mixed::MixedConfig, String> {
    let mut c = if a.common.quick {
        mixed::MixedConfig::quick()
    } else {
        mixed::MixedConfig::full()
    };
    if let Some(r) = a.rows {
        c.rows = rows(r)?;
    }
    if let Some(l) = a.limit {
        // The library accepts 0 (unlimited) to 1000; a gate that limits nothing has no queue.
        if !(1..=1000).contains(&l) {
            return Err(format!("--limit {l} is out of range: 1..=1000"));
        }
        c.limit = l;
    }
    if let Some(p) = &a.policies {
        c.settings = mixed::MixedSetting::select(p)?;
    }
    Ok(c)
}

fn server_config(a: &ServerArgs) -> Result<ServerBenchConfig, String> {
    let mut c = if a.common.quick {
        ServerBenchConfig::quick()
    } else {
        ServerBenchConfig::full()
    };
    if let Some(v) = &a.clients {
        c.clients = v.clone();
    }
    if let Some(v) = &a.workloads {
        c.workloads = v.iter().map(|w| w.trim().to_string()).collect();
    }
    if let Some(v) = a.seconds {
        c.seconds = v;
    }
    if let Some(v) = a.reps {
        c.reps = v;
    }
    if let Some(v) = &a.servers {
        c.servers = v
            .iter()
            .map(|s| ServerKind::parse(s))
            .collect::<Result<_, _>>()?;
    }
    c.validate()?;
    Ok(c)
}

/// This program, for `turnstile serve`. A rebuild replaces the file under a running binary;
/// `/proc/self/exe` still names the one running.
fn turnstile_exe() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    if exe.is_file() {
        return Ok(exe);
    }
    let own = PathBuf::from("/proc/self/exe");
    if own.exists() {
        Ok(own)
    } else {
        Err(format!("this program's file {} is gone", exe.display()))
    }
}

/// `repro server`: finds sysbench (required) and MariaDB (optional), runs the sweep, writes
/// the report, the charts and results.json.
fn server(a: &ServerArgs) -> Result<(), String> {
    if a.common.fsync_ms.is_some() || a.common.metrics_file.is_some() {
        return Err(
            "--fsync-ms and --metrics-file do not apply to repro server: its servers \
                    run as processes of their own"
                .into(),
        );
    }
    let mut cfg = server_config(a)?;
    let c = a.common.common()?;
    check_writable("report folder", &a.out)?;
    let sysbench = repro::sysbench::find().map_err(|e| {
        e.to_string()
            .replacen("--client sysbench", "repro server", 1)
    })?;
    let mut skipped = Vec::new();
    let mut mariadb = None;
    if cfg.servers.iter().any(|s| s.program == Program::Mariadb) {
        match server_bench::find_mariadb() {
            Ok(m) => mariadb = Some(m),
            Err(e) => {
                let line = format!("{e}. The MariaDB servers are skipped.");
                eprintln!("{line}");
                cfg.servers.retain(|s| s.program != Program::Mariadb);
                skipped.push(line);
            }
        }
    }
    if cfg.servers.is_empty() {
        return Err("no server left to run".into());
    }
    let env = server_bench::ServerEnv {
        turnstile: turnstile_exe()?,
        data_dir: c.data_dir,
        sysbench,
        mariadb,
    };
    let mut bar = Bar::new(cfg.steps());
    let r = server_bench::run(&cfg, &env, skipped, &mut bar).map_err(err);
    bar.finish();
    let r = r?;
    let charts = server_charts(&r, &a.out)?;
    if !charts.is_empty() {
        eprintln!("charts: {}", charts.join(", "));
    }
    let md = server_bench::markdown(&r);
    let path = a.out.join("server.md");
    std::fs::write(&path, &md).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())? + "\n";
    let saved = a.out.join("results.json");
    std::fs::write(&saved, json).map_err(|e| format!("cannot write {}: {e}", saved.display()))?;
    eprintln!("report: {}, {}", path.display(), saved.display());
    emit(a.common.json, &r, md)
}

/// Median TPS against clients (log x), one line per server, a chart per workload; a workload
/// where no run gave figures gets none.
pub fn server_charts(r: &server_bench::ServerReport, dir: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for w in &r.config.workloads {
        let series: Vec<Series> = r
            .config
            .servers
            .iter()
            .map(|s| Series {
                name: s.name(),
                points: r
                    .points
                    .iter()
                    .filter(|p| &p.workload == w && p.server == s.name() && p.tps.is_finite())
                    .map(|p| (p.clients as f64, p.tps))
                    .collect(),
            })
            .collect();
        if series.iter().all(|s| s.points.is_empty()) {
            continue;
        }
        let path = dir.join(format!("server-{w}-tps.svg"));
        LineChart {
            title: format!("sysbench {w}: transactions per second against client connections"),
            x_label: "client connections (sysbench threads)".into(),
            y_label: "TPS".into(),
            log_y: false,
            linear_x: false,
            series,
        }
        .write_svg(&path)?;
        out.push(path.display().to_string());
    }
    Ok(out)
}

fn pileup_config(a: &PileupArgs) -> Result<pileup::PileupConfig, String> {
    let mut c = if a.common.quick {
        pileup::PileupConfig::quick()
    } else {
        pileup::PileupConfig::full()
    };
    if let Some(t) = &a.tables {
        if t.is_empty() || t.contains(&0) || t.iter().any(|&x| x > 1000) {
            return Err("--tables must be between 1 and 1000".into());
        }
        each_once("--tables", t, |n| n.to_string())?;
        c.tables = t.clone();
    }
    if !(1..=100).contains(&a.reps) {
        return Err(format!("--reps {} is out of range: 1..=100", a.reps));
    }
    c.reps = a.reps;
    c.duration = seconds(a.seconds, c.duration)?;
    Ok(c)
}

/// The sysbench half of `repro oltp --client sysbench`: `turnstile serve` in this process on
/// the same data directory (the built-in sweep has closed its engine), on a free loopback port,
/// each setting put in force before its points.
fn sysbench_sweep(
    c: &Common,
    cfg: &oltp::OltpConfig,
    builtin: &[oltp::OltpRun],
    bar: &mut Bar,
) -> Result<repro::sysbench::SysbenchSweep, String> {
    let first = cfg.settings.first().ok_or("no gate setting to run")?;
    let mut sc = turnstile_server::ServerConfig::new(&c.data_dir);
    sc.tcp = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    sc.log = false;
    sc.gate = first.config();
    sc.row_send = first.row_send;
    let server = turnstile_server::Server::start(sc)?;
    server
        .engine()
        .ensure_table_until(
            oltp::TABLE,
            cfg.rows,
            &mut |d, t| bar.load(d, t),
            &repro::stopped,
        )
        .map_err(|e| match e {
            turnstile_engine::EngineError::Stopped => repro::ReproError::Interrupted.to_string(),
            e => e.to_string(),
        })?;
    let port = server.tcp_addr().port();
    let r = repro::sysbench::sweep(
        cfg,
        builtin,
        port,
        &mut |s| {
            let gate = server
                .set_gate_config(s.config())
                .map_err(ReproError::BadInput)?;
            server.set_row_send(s.row_send);
            Ok(gate)
        },
        bar,
    )
    .map_err(err);
    server.shutdown();
    r
}

fn err(e: ReproError) -> String {
    match e {
        ReproError::Interrupted => "interrupted (Ctrl-C): the data directory is consistent".into(),
        e => e.to_string(),
    }
}

/// TPS against threads, one line per gate setting, and the seed's two lines.
pub fn oltp_chart(r: &oltp::OltpReport, dir: &Path) -> Result<String, String> {
    let mut series: Vec<Series> = r
        .config
        .settings
        .iter()
        .map(|s| Series {
            name: s.name.to_string(),
            points: r
                .runs
                .iter()
                .filter(|x| x.policy == s.name)
                .map(|x| (x.threads as f64, x.tps))
                .collect(),
        })
        .collect();
    if let Some(sb) = &r.sysbench {
        for s in &r.config.settings {
            series.push(Series {
                name: format!("{} (sysbench)", s.name),
                points: sb
                    .runs
                    .iter()
                    .filter(|x| x.policy == s.name)
                    .map(|x| (x.threads as f64, x.tps))
                    .collect(),
            });
        }
    }
    let threads = turnstile_bench::gate::DEFAULT_THREADS;
    series.push(Series {
        name: "seed 001 FLIFO (8 cores)".into(),
        points: threads
            .iter()
            .zip(oltp::SEED_TPS)
            .map(|(&t, s)| (t as f64, s.0))
            .collect(),
    });
    series.push(Series {
        name: "seed 001 FIFO (8 cores)".into(),
        points: threads
            .iter()
            .zip(oltp::SEED_TPS)
            .map(|(&t, s)| (t as f64, s.1))
            .collect(),
    });
    let path = dir.join("oltp-tps.svg");
    LineChart {
        title: "OLTP read-only: transactions per second against client threads".into(),
        x_label: "client threads".into(),
        y_label: "TPS".into(),
        log_y: false,
        linear_x: false,
        series,
    }
    .write_svg(&path)?;
    Ok(path.display().to_string())
}

/// Queries per second against tables for each mode, and each run's time series.
pub fn pileup_charts(r: &pileup::PileupReport, dir: &Path) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    // With repetitions, the median per table count.
    let by_mode = [
        "hold-slot",
        "release-slot",
        "group-commit",
        "auto-hold-slot",
    ]
    .map(|m| {
        let mut counts: Vec<usize> = r.runs.iter().map(|x| x.tables).collect();
        counts.sort_unstable();
        counts.dedup();
        Series {
            name: m.to_string(),
            points: counts
                .into_iter()
                .filter_map(|n| {
                    let q: Vec<f64> = r
                        .runs
                        .iter()
                        .filter(|x| x.mode == m && x.tables == n)
                        .map(|x| x.queries_per_s)
                        .collect();
                    (!q.is_empty()).then(|| (n as f64, turnstile_bench::stats::median(&q).max(0.1)))
                })
                .collect(),
        }
    });
    let path = dir.join("pileup-queries.svg");
    LineChart {
        title: "Pileup: queries per second against tables (insert+query session per table)".into(),
        x_label: "tables".into(),
        y_label: "queries/s (log)".into(),
        log_y: true,
        linear_x: false,
        series: by_mode.to_vec(),
    }
    .write_svg(&path)?;
    out.push(path.display().to_string());
    // The first repetition's time series.
    let series = r
        .runs
        .iter()
        .filter(|x| x.rep == 0)
        .map(|x| Series {
            name: format!("{} tables, {}", x.tables, x.mode),
            points: x
                .series
                .iter()
                .map(|s| (s.t_ms as f64 / 1000.0, s.queries as f64))
                .collect(),
        })
        .collect();
    let path = dir.join("pileup-timeline.svg");
    LineChart {
        title: "Pileup: queries per sample interval over time".into(),
        x_label: "seconds".into(),
        y_label: "queries per interval".into(),
        log_y: false,
        linear_x: true,
        series,
    }
    .write_svg(&path)?;
    out.push(path.display().to_string());
    Ok(out)
}

/// Scan slowdown and point-select p99 per setting, side by side.
pub fn mixed_chart(r: &mixed::MixedReport, dir: &Path) -> Result<String, String> {
    let path = dir.join("mixed.svg");
    BarChart {
        title: format!(
            "Mixed: two full scans + {} point-select sessions, gate limit {}",
            r.config.point_sessions, r.config.limit
        ),
        categories: r.runs.iter().map(|x| x.setting.to_string()).collect(),
        panels: vec![
            BarPanel {
                title: "scan slowdown (slower scan ÷ alone)".into(),
                y_label: "×".into(),
                values: r.runs.iter().map(|x| x.scan_slowdown).collect(),
            },
            BarPanel {
                title: "point select p99".into(),
                y_label: "ms".into(),
                values: r.runs.iter().map(|x| x.point_p99_ms).collect(),
            },
        ],
    }
    .write_svg(&path)?;
    Ok(path.display().to_string())
}

#[derive(Serialize)]
struct AllResults {
    tickets: tickets::TicketsReport,
    oltp: oltp::OltpReport,
    pileup: pileup::PileupReport,
    mixed: mixed::MixedReport,
}

/// Runs a repro command.
pub fn run(cmd: &Repro) -> Result<(), String> {
    if let Repro::Server(a) = cmd {
        return server(a);
    }
    let common = match cmd {
        Repro::Tickets(a) => &a.common,
        Repro::Oltp(a) => &a.common,
        Repro::Pileup(a) => &a.common,
        Repro::Mixed(a) => &a.common,
        Repro::All(a) => &a.common,
        Repro::Server(_) => unreachable!("run above"),
    };
    let _metrics = crate::metrics_file::start(common.metrics_file.as_deref())?;
    match cmd {
        Repro::Tickets(a) => {
            let cfg = tickets_config(a)?;
            let c = a.common.common()?;
            let mut bar = Bar::new(2 + tickets::runs(&cfg));
            let r = tickets::run(&c, &cfg, &mut bar).map_err(err);
            bar.finish();
            let r = r?;
            emit(a.common.json, &r, tickets::markdown(&r))
        }
        Repro::Oltp(a) => {
            let cfg = oltp_config(a)?;
            let c = a.common.common()?;
            check_writable("report folder", &a.out)?;
            let sysbench = a.client == "sysbench";
            if sysbench {
                // Before the built-in sweep: a missing binary should not cost its minutes.
                repro::sysbench::find().map_err(err)?;
            }
            let points = cfg.settings.len() * cfg.threads.len();
            let pairs =
                2 * cfg.versus_best * oltp::versus_best_points(&cfg).len() * cfg.settings.len();
            // The table, the competing processes' start (a step of its own), each point.
            let competing = usize::from(cfg.competing_processes > 0);
            let mut bar =
                Bar::new(1 + competing + points * (cfg.reps + usize::from(sysbench)) + pairs);
            let r = oltp::run(&c, &cfg, &mut bar).map_err(err);
            let r = match r {
                Ok(mut r) if sysbench => sysbench_sweep(&c, &cfg, &r.runs, &mut bar).map(|sb| {
                    r.sysbench = Some(sb);
                    r
                }),
                r => r,
            };
            bar.finish();
            let r = r?;
            eprintln!("chart: {}", oltp_chart(&r, &a.out)?);
            emit(a.common.json, &r, oltp::markdown(&r))
        }
        Repro::Pileup(a) => {
            let cfg = pileup_config(a)?;
            let c = a.common.common()?;
            check_writable("report folder", &a.out)?;
            // Per table count and setting: one step per table prepared, one for the run.
            let steps: usize = cfg.reps
                * cfg
                    .tables
                    .iter()
                    .map(|n| pileup::SETTINGS.len() * (n + 1))
                    .sum::<usize>();
            let mut bar = Bar::new(steps);
            let r = pileup::run(&c, &cfg, &mut bar).map_err(err);
            bar.finish();
            let r = r?;
            eprintln!("charts: {}", pileup_charts(&r, &a.out)?.join(", "));
            emit(a.common.json, &r, pileup::markdown(&r))
        }
        Repro::Mixed(a) => {
            let cfg = mixed_config(a)?;
            let c = a.common.common()?;
            check_writable("report folder", &a.out)?;
            let mut bar = Bar::new(1 + cfg.settings.len());
            let r = mixed::run(&c, &cfg, &mut bar).map_err(err);
            bar.finish();
            let r = r?;
            let md = mixed::markdown(&r);
            eprintln!("chart: {}", mixed_chart(&r, &a.out)?);
            let path = a.out.join("mixed.md");
            std::fs::write(&path, &md)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            eprintln!("report: {}", path.display());
            emit(a.common.json, &r, md)
        }
        Repro::All(a) => all(a),
        Repro::Server(a) => server(a),
    }
}

fn all(a: &AllArgs) -> Result<(), String> {
    let c = a.common.common()?;
    let quick = a.common.quick;
    // mixed's tables are tickets' and oltp's at the same sizes: nothing more to build.
    let (t, o, p, m) = if quick {
        (
            tickets::TicketsConfig::quick(),
            oltp::OltpConfig::quick(),
            pileup::PileupConfig::quick(),
            mixed::MixedConfig::quick(),
        )
    } else {
        (
            tickets::TicketsConfig::full(),
            oltp::OltpConfig::full(),
            pileup::PileupConfig::full(),
            mixed::MixedConfig::full(),
        )
    };
    check_writable("report folder", &a.out)?;
    let steps = 2
        + tickets::runs(&t)
        + 1
        + o.settings.len() * o.threads.len()
        + p.tables
            .iter()
            .map(|n| pileup::SETTINGS.len() * (n + 1))
            .sum::<usize>()
        + 1
        + m.settings.len();
    let mut bar = Bar::new(steps);
    let started = std::time::Instant::now();
    let result = (|| -> Result<AllResults, ReproError> {
        Ok(AllResults {
            tickets: tickets::run(&c, &t, &mut bar)?,
            oltp: oltp::run(&c, &o, &mut bar)?,
            pileup: pileup::run(&c, &p, &mut bar)?,
            mixed: mixed::run(&c, &m, &mut bar)?,
        })
    })();
    bar.finish();
    let r = result.map_err(err)?;
    let mut charts = vec![oltp_chart(&r.oltp, &a.out)?];
    charts.extend(pileup_charts(&r.pileup, &a.out)?);
    charts.push(mixed_chart(&r.mixed, &a.out)?);
    let json = serde_json::to_string_pretty(&r).map_err(|e| e.to_string())? + "\n";
    std::fs::write(a.out.join("results.json"), &json)
        .map_err(|e| format!("cannot write results.json: {e}"))?;
    let machine = turnstile_bench::gate::Machine::here();
    let mut md = format!(
        "# turnstile: the seed experiments on the embedded engine\n\n\
         Machine: {} cpus, {}. Run took {:.0} s{}. Every figure below was measured in this run; the seed's published \
         figures are beside ours for shape, not for equality (other hardware, other engine).\n\n\
         Charts: {}\n\n",
        machine.cpus,
        machine.os,
        started.elapsed().as_secs_f64(),
        if quick { " (--quick sizes)" } else { "" },
        charts
            .iter()
            .map(|p| format!(
                "[{}]({})",
                Path::new(p).file_name().unwrap().to_string_lossy(),
                Path::new(p).file_name().unwrap().to_string_lossy()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    md.push_str(&tickets::markdown(&r.tickets));
    md.push('\n');
    md.push_str(&oltp::markdown(&r.oltp));
    md.push('\n');
    md.push_str(&pileup::markdown(&r.pileup));
    md.push('\n');
    md.push_str(&mixed::markdown(&r.mixed));
    std::fs::write(a.out.join("report.md"), &md)
        .map_err(|e| format!("cannot write report.md: {e}"))?;
    eprintln!("report: {}", a.out.join("report.md").display());
    emit(a.common.json, &r, md)
}

/// Installs the Ctrl-C handler: ask the reproductions to stop.
pub fn install_ctrlc(graceful: bool) {
    let _ = ctrlc::set_handler(move || {
        if !graceful {
            // Only `repro` and `serve` stop at a statement's end: elsewhere the promise
            // would be empty (the run went on until a second Ctrl-C).
            eprintln!("\ninterrupted");
            std::process::exit(130);
        }
        eprintln!("\nstopping at the end of the current statements (Ctrl-C again to abort)…");
        if repro::stopped() {
            std::process::exit(130);
        }
        repro::request_stop();
    });
}
