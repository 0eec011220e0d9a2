//! `turnstile repro server`: the real sysbench 1.0 client against several MySQL-protocol
//! servers, side by side.
//!
//! The servers are `turnstile serve` (this binary) in both thread handlings and, where it is
//! installed, MariaDB's `mariadbd` in both of its own. Each runs as a child process for the
//! whole sweep, on a free loopback port, with its data in a temporary folder. Every point
//! (workload × clients) runs the servers back to back, the order reversed on odd repetitions,
//! so a slow spell of a shared machine falls on all of them; each run records sysbench's
//! figures ([`super::sysbench::run`]), the server's CPU from `/proc/PID/stat`, and its thread
//! count, which shows what a pool of threads saves.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

use super::sysbench::{self, Invocation};
use super::{stopped, Progress, ReproError};
use crate::stats::median;

mod process;
mod report;

pub use process::*;
pub use report::*;

/// The sysbench tests the command knows; both read the one table `sbtest1`.
pub const WORKLOADS: [&str; 2] = ["oltp_read_only", "oltp_point_select"];
/// Rows in `sbtest1` on every server.
pub const TABLE_SIZE: u32 = 100_000;
/// Rows per range query of `oltp_read_only`: sysbench's own default.
pub const RANGE_SIZE: u32 = 100;
/// Every server's connection limit: 1024 clients and the command's own connections fit.
pub const MAX_CONNECTIONS: usize = 2000;
/// MariaDB's buffer pool: the 100,000-row table (~25 MB) and its index fit many times over,
/// so neither server reads the disk during a run.
pub const MARIADB_BUFFER_POOL: &str = "256M";
/// How long a server has to stop after its signal before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long a server has to accept connections after its start (turnstile builds its table
/// first).
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// Which server program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `turnstile serve`.
    Turnstile,
    /// MariaDB's `mariadbd`.
    Mariadb,
}

/// How a server gives connections threads (both servers spell it the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// A thread per connection for its whole life.
    OneThreadPerConnection,
    /// Connections wait without a thread; a pool runs their statements.
    PoolOfThreads,
}

impl Handling {
    /// The value of `--thread-handling`.
    pub fn name(self) -> &'static str {
        match self {
            Handling::OneThreadPerConnection => "one-thread-per-connection",
            Handling::PoolOfThreads => "pool-of-threads",
        }
    }
}

/// One of the servers compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerKind {
    /// The program.
    pub program: Program,
    /// Its thread handling.
    pub handling: Handling,
}

impl ServerKind {
    /// Every server, in the default order: turnstile's two, then MariaDB's.
    pub const ALL: [ServerKind; 4] = [
        ServerKind::new(Program::Turnstile, Handling::OneThreadPerConnection),
        ServerKind::new(Program::Turnstile, Handling::PoolOfThreads),
        ServerKind::new(Program::Mariadb, Handling::OneThreadPerConnection),
        ServerKind::new(Program::Mariadb, Handling::PoolOfThreads),
    ];

    /// A server.
    pub const fn new(program: Program, handling: Handling) -> ServerKind {
        ServerKind { program, handling }
    }

    /// `turnstile/one-thread-per-connection`, `mariadb/pool-of-threads`, …
    pub fn name(self) -> String {
        let p = match self.program {
            Program::Turnstile => "turnstile",
            Program::Mariadb => "mariadb",
        };
        format!("{p}/{}", self.handling.name())
    }

    /// The server `name` spells; an error listing the valid names otherwise.
    pub fn parse(name: &str) -> Result<ServerKind, String> {
        ServerKind::ALL
            .into_iter()
            .find(|k| k.name() == name.trim())
            .ok_or_else(|| {
                let all: Vec<String> = ServerKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown server '{name}': one of {}", all.join(", "))
            })
    }
}

impl Serialize for ServerKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct ServerBenchConfig {
    /// sysbench threads (= connections) per point.
    pub clients: Vec<usize>,
    /// sysbench tests, from [`WORKLOADS`].
    pub workloads: Vec<String>,
    /// Seconds per run (sysbench's `--time`).
    pub seconds: u64,
    /// Repetitions of the whole sweep.
    pub reps: usize,
    /// The servers, in the order even repetitions run them.
    pub servers: Vec<ServerKind>,
}

impl ServerBenchConfig {
    /// Clients 1…1024 in steps of four, both workloads, 10 s per run, 3 repetitions, all
    /// four servers.
    pub fn full() -> ServerBenchConfig {
        ServerBenchConfig {
            clients: vec![1, 4, 16, 64, 256, 1024],
            workloads: WORKLOADS.iter().map(|w| w.to_string()).collect(),
            seconds: 10,
            reps: 3,
            servers: ServerKind::ALL.to_vec(),
        }
    }

    /// A couple of minutes: clients 4, 64, 1024; 3 s per run; one repetition.
    pub fn quick() -> ServerBenchConfig {
        ServerBenchConfig {
            clients: vec![4, 64, 1024],
            seconds: 3,
            reps: 1,
            ..ServerBenchConfig::full()
        }
    }

    /// Checks the settings a person can give.
    pub fn validate(&self) -> Result<(), String> {
        if self.clients.is_empty() || self.clients.contains(&0) {
            return Err("--clients must be at least 1 each".into());
        }
        if let Some(&c) = self.clients.iter().find(|&&c| c >= MAX_CONNECTIONS) {
            return Err(format!(
                "--clients {c} is too many: the servers accept {MAX_CONNECTIONS} connections; \
                 give fewer"
            ));
        }
        crate::stats::each_once("--clients", &self.clients, |c| c.to_string())?;
        if self.workloads.is_empty() {
            return Err("--workloads names none".into());
        }
        if let Some(w) = self
            .workloads
            .iter()
            .find(|w| !WORKLOADS.contains(&w.as_str()))
        {
            return Err(format!(
                "unknown workload '{w}': one of {}",
                WORKLOADS.join(", ")
            ));
        }
        crate::stats::each_once("--workloads", &self.workloads, |w| w.clone())?;
        if !(1..=3600).contains(&self.seconds) {
            return Err(format!(
                "--seconds {} is out of range: 1..=3600",
                self.seconds
            ));
        }
        if !(1..=100).contains(&self.reps) {
            return Err(format!("--reps {} is out of range: 1..=100", self.reps));
        }
        if self.servers.is_empty() {
            return Err("no server to run".into());
        }
        crate::stats::each_once("--servers", &self.servers, |s| s.name())?;
        Ok(())
    }

    /// sysbench runs in the sweep.
    pub fn runs(&self) -> usize {
        self.reps * self.workloads.len() * self.clients.len() * self.servers.len()
    }

    /// Progress steps: a start per server, then every run.
    pub fn steps(&self) -> usize {
        self.servers.len() + self.runs()
    }
}

/// One sysbench run in the sweep's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Repetition, from 0.
    pub rep: usize,
    /// Index into [`ServerBenchConfig::workloads`].
    pub workload: usize,
    /// sysbench threads.
    pub clients: usize,
    /// The server.
    pub server: ServerKind,
}

/// Every run in order: each repetition is a whole sweep; within a point the servers run back
/// to back, in the given order on even repetitions and reversed on odd ones, so a drift in
/// the machine's speed favours none of them.
pub fn schedule(cfg: &ServerBenchConfig) -> Vec<Slot> {
    let mut out = Vec::with_capacity(cfg.runs());
    for rep in 0..cfg.reps {
        for workload in 0..cfg.workloads.len() {
            for &clients in &cfg.clients {
                let mut order = cfg.servers.clone();
                if rep % 2 == 1 {
                    order.reverse();
                }
                out.extend(order.into_iter().map(|server| Slot {
                    rep,
                    workload,
                    clients,
                    server,
                }));
            }
        }
    }
    out
}

/// One sysbench run against one server.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerRun {
    /// The sysbench test.
    pub workload: String,
    /// sysbench threads = connections.
    pub clients: usize,
    /// The server's name.
    pub server: String,
    /// Repetition, from 0.
    pub rep: usize,
    /// Transactions per second.
    pub tps: f64,
    /// Queries per second.
    pub qps: f64,
    /// Transaction latency, 95th percentile, ms.
    pub p95_ms: f64,
    /// Transaction latency, maximum, ms.
    pub max_ms: f64,
    /// Errors sysbench ignored and retried, plus reconnects.
    pub errors: u64,
    /// The server's CPU ÷ (the run's wall time × cores), in per cent.
    pub server_cpu_pct: f64,
    /// sysbench's CPU ÷ (its wall time × cores), in per cent.
    pub sysbench_cpu_pct: f64,
    /// The server's most threads, sampled every 200 ms during the run.
    pub threads_peak: u64,
    /// The server's threads after sysbench exited.
    pub threads_after: u64,
    /// Seconds from sysbench's start to its exit.
    pub wall_s: f64,
    /// Why the run gave no figures, when it did not.
    pub error: Option<String>,
}

/// Runs sysbench against server `p` with the server's CPU and threads measured around it.
fn measure(
    env: &ServerEnv,
    p: &mut ServerProc,
    slot: &Slot,
    workload: &str,
    seconds: u64,
    cores: usize,
) -> Result<ServerRun, ReproError> {
    let mut run = ServerRun {
        workload: workload.into(),
        clients: slot.clients,
        server: slot.server.name(),
        rep: slot.rep,
        ..Default::default()
    };
    if let Some(e) = p.exited() {
        run.error = Some(e);
        return Ok(run);
    }
    let inv = Invocation {
        test: workload.into(),
        host: "127.0.0.1".into(),
        port: p.port,
        table_size: TABLE_SIZE,
        range_size: RANGE_SIZE,
        threads: slot.clients,
        time: Duration::from_secs(seconds),
    };
    let pid = p.pid();
    let peak = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let cpu0 = proc_cpu_s(pid).unwrap_or(0.0);
    let t0 = Instant::now();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Some(n) = proc_threads(pid) {
                    peak.fetch_max(n, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        // Connecting 1024 clients and their teardown take seconds on two cores.
        let r = sysbench::run(
            &env.sysbench.0,
            &inv,
            Duration::from_secs(60 + slot.clients as u64 / 8),
        );
        done.store(true, Ordering::Relaxed);
        r
    });
    let wall = t0.elapsed().as_secs_f64();
    let cpu = proc_cpu_s(pid).unwrap_or(cpu0) - cpu0;
    run.threads_after = proc_threads(pid).unwrap_or(0);
    run.threads_peak = peak.load(Ordering::Relaxed).max(run.threads_after);
    run.wall_s = wall;
    match r {
        Ok(r) => {
            run.tps = r.tps;
            run.qps = r.qps;
            run.p95_ms = r.p95_ms;
            run.max_ms = r.max_ms;
            run.errors = r.ignored_errors + r.reconnects;
            run.sysbench_cpu_pct = 100.0 * r.client_cpu_share(cores);
            run.server_cpu_pct = 100.0 * cpu / (wall * cores as f64).max(1e-9);
        }
        // sysbench dies of the terminal's Ctrl-C too; that is the user's stop, not a failure.
        Err(_) if stopped() => return Err(ReproError::Interrupted),
        Err(ReproError::Interrupted) => return Err(ReproError::Interrupted),
        Err(e) => {
            run.error = Some(match p.exited() {
                Some(gone) => format!("{e}\n{gone}"),
                None => e.to_string(),
            })
        }
    }
    Ok(run)
}

/// Clients and seconds of the unmeasured run of each workload after a server's start.
const WARM_UP: (usize, u64) = (4, 1);

/// Runs each workload briefly and unmeasured against a server just started, so the first
/// measured run does not pay for a cold server (caches, first plans). A failure is a warning:
/// the measured runs then record what goes wrong.
fn warm_up(env: &ServerEnv, p: &ServerProc, cfg: &ServerBenchConfig) {
    for w in &cfg.workloads {
        let inv = Invocation {
            test: w.clone(),
            host: "127.0.0.1".into(),
            port: p.port,
            table_size: TABLE_SIZE,
            range_size: RANGE_SIZE,
            threads: WARM_UP.0,
            time: Duration::from_secs(WARM_UP.1),
        };
        if let Err(e) = sysbench::run(&env.sysbench.0, &inv, Duration::from_secs(60)) {
            if !stopped() {
                eprintln!("warning: warming up {} with {w} failed: {e}", p.kind.name());
            }
        }
    }
}

/// Runs the sweep: starts every server, runs [`schedule`], stops the servers, removes their
/// folders. `skipped` (servers left out before) goes into the report as given.
pub fn run(
    cfg: &ServerBenchConfig,
    env: &ServerEnv,
    skipped: Vec<String>,
    progress: &mut dyn Progress,
) -> Result<ServerReport, ReproError> {
    cfg.validate().map_err(ReproError::BadInput)?;
    let started = Instant::now();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Declared before the servers, so dropped after them: a server stops before its folder goes.
    let root = TempDir::new(
        env.data_dir
            .join(format!("repro-server-{}", std::process::id())),
    )?;
    // Sockets get a short folder of their own: a socket path is limited to 107 bytes.
    let sockets = TempDir::new(
        std::env::temp_dir().join(format!("turnstile-repro-server-{}", std::process::id())),
    )?;
    let mut procs: Vec<ServerProc> = Vec::new();
    let mut setups = Vec::new();
    for (i, &kind) in cfg.servers.iter().enumerate() {
        progress.step(&format!(
            "starting {} (and building its {TABLE_SIZE}-row table)",
            kind.name()
        ));
        let dir = root
            .0
            .join(format!("{i}-{}", kind.name().replace('/', "-")));
        std::fs::create_dir_all(&dir)
            .map_err(|e| ReproError::BadInput(format!("cannot create {}: {e}", dir.display())))?;
        let socket = sockets.0.join(format!("{i}.sock"));
        let (p, setup) = match kind.program {
            Program::Turnstile => start_turnstile(env, kind, &dir, &socket)?,
            Program::Mariadb => start_mariadb(env, kind, &dir, &socket)?,
        };
        warm_up(env, &p, cfg);
        procs.push(p);
        setups.push(setup);
    }
    let plan = schedule(cfg);
    let mut runs = Vec::with_capacity(plan.len());
    let sweep_start = Instant::now();
    for (i, slot) in plan.iter().enumerate() {
        if stopped() {
            return Err(ReproError::Interrupted);
        }
        let eta = if i == 0 {
            // Before any run: the runs' own time and a few seconds each to connect and end.
            human((plan.len() as u64 * (cfg.seconds + 3)) as f64)
        } else {
            human(sweep_start.elapsed().as_secs_f64() / i as f64 * (plan.len() - i) as f64)
        };
        let workload = &cfg.workloads[slot.workload];
        progress.step(&format!(
            "{workload} × {} clients on {} (rep {}/{}, ETA {eta})",
            slot.clients,
            slot.server.name(),
            slot.rep + 1,
            cfg.reps
        ));
        let p = procs
            .iter_mut()
            .find(|p| p.kind == slot.server)
            .expect("every scheduled server was started");
        let r = measure(env, p, slot, workload, cfg.seconds, cores)?;
        if let Some(e) = &r.error {
            eprintln!(
                "warning: {workload} × {} clients on {} gave no figures: {e}",
                slot.clients,
                slot.server.name()
            );
        }
        runs.push(r);
    }
    for p in &mut procs {
        if let Err(e) = p.stop() {
            eprintln!("warning: {e}");
        }
    }
    drop(procs);
    drop(sockets);
    drop(root);
    let points = summarize(cfg, &runs);
    let ratios = ratios(cfg, &runs);
    Ok(ServerReport {
        sysbench: env.sysbench.1.clone(),
        cpus: cores,
        config: cfg.clone(),
        table_size: TABLE_SIZE,
        range_size: RANGE_SIZE,
        servers: setups,
        skipped,
        runs,
        points,
        ratios,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TURNSTILE_ONE: ServerKind =
        ServerKind::new(Program::Turnstile, Handling::OneThreadPerConnection);
    const TURNSTILE_POOL: ServerKind = ServerKind::new(Program::Turnstile, Handling::PoolOfThreads);
    const MARIADB_ONE: ServerKind =
        ServerKind::new(Program::Mariadb, Handling::OneThreadPerConnection);
    const MARIADB_POOL: ServerKind = ServerKind::new(Program::Mariadb, Handling::PoolOfThreads);

    #[test]
    fn runs_alternate_servers_within_a_point_and_reverse_the_order_on_odd_repetitions() {
        let cfg = ServerBenchConfig {
            clients: vec![4, 64],
            workloads: vec!["oltp_read_only".into(), "oltp_point_select".into()],
            seconds: 1,
            reps: 3,
            servers: vec![TURNSTILE_ONE, TURNSTILE_POOL, MARIADB_POOL],
        };
        let plan = schedule(&cfg);
        assert_eq!(plan.len(), cfg.runs());
        assert_eq!(plan.len(), 3 * 2 * 2 * 3);
        // Every point's servers run back to back, in order on even repetitions…
        let first: Vec<ServerKind> = plan[..3].iter().map(|s| s.server).collect();
        assert_eq!(first, vec![TURNSTILE_ONE, TURNSTILE_POOL, MARIADB_POOL]);
        assert!(plan[..3]
            .iter()
            .all(|s| s.rep == 0 && s.workload == 0 && s.clients == 4));
        assert!(plan[3..6].iter().all(|s| s.clients == 64));
        // …and reversed on odd ones.
        for chunk in plan.chunks(3) {
            let order: Vec<ServerKind> = chunk.iter().map(|s| s.server).collect();
            let want = if chunk[0].rep % 2 == 1 {
                vec![MARIADB_POOL, TURNSTILE_POOL, TURNSTILE_ONE]
            } else {
                vec![TURNSTILE_ONE, TURNSTILE_POOL, MARIADB_POOL]
            };
            assert_eq!(order, want, "{chunk:?}");
            assert!(chunk
                .iter()
                .all(|s| s.rep == chunk[0].rep && s.clients == chunk[0].clients));
        }
        // Each repetition is a whole sweep of workloads × clients.
        let rep1: Vec<&Slot> = plan.iter().filter(|s| s.rep == 1).collect();
        assert_eq!(rep1.len(), 12);
        assert_eq!(rep1[0].server, MARIADB_POOL);
        assert_eq!(plan[12].rep, 1);
    }

    #[test]
    fn the_mariadb_command_line_carries_the_thread_handling_and_the_connection_limit() {
        let a = mariadbd_args(
            Path::new("/t/data"),
            Path::new("/t/sock"),
            40123,
            Handling::PoolOfThreads,
        );
        assert_eq!(
            a[0], "--no-defaults",
            "option files must not change the setup"
        );
        for want in [
            "--thread-handling=pool-of-threads",
            "--max-connections=2000",
            "--port=40123",
            "--bind-address=127.0.0.1",
            "--datadir=/t/data",
            "--socket=/t/sock",
            "--user=root",
            "--skip-log-bin",
            "--performance-schema=OFF",
            "--innodb-buffer-pool-size=256M",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
        let a = mariadbd_args(
            Path::new("/t/data"),
            Path::new("/t/sock"),
            1,
            Handling::OneThreadPerConnection,
        );
        assert!(a.contains(&"--thread-handling=one-thread-per-connection".to_string()));
    }

    #[test]
    fn turnstile_serve_gets_the_same_connection_limit_and_its_thread_handling() {
        let a = turnstile_args(
            Path::new("/t/data"),
            Path::new("/t/sock"),
            40124,
            Handling::PoolOfThreads,
        );
        assert_eq!(a[0], "serve");
        for want in [
            "--thread-handling=pool-of-threads",
            "--max-connections=2000",
            "--port=40124",
            "--tables=1",
            "--table-size=100000",
            "--socket=/t/sock",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
    }

    #[test]
    fn server_names_parse_and_an_unknown_one_lists_the_valid_names() {
        for k in ServerKind::ALL {
            assert_eq!(ServerKind::parse(&k.name()), Ok(k));
        }
        assert_eq!(
            (MARIADB_POOL.name(), MARIADB_ONE.name()),
            (
                "mariadb/pool-of-threads".to_string(),
                "mariadb/one-thread-per-connection".to_string()
            ),
            "the names the command line and the report use"
        );
        let e = ServerKind::parse("mysql/pool").unwrap_err();
        assert!(e.contains("turnstile/one-thread-per-connection"), "{e}");
    }

    fn run(server: ServerKind, clients: usize, rep: usize, tps: f64) -> ServerRun {
        ServerRun {
            workload: "oltp_point_select".into(),
            clients,
            server: server.name(),
            rep,
            tps,
            qps: tps,
            p95_ms: tps / 1000.0,
            max_ms: tps / 100.0,
            errors: 1,
            server_cpu_pct: 50.0 + 2.0 * rep as f64,
            sysbench_cpu_pct: 40.0,
            threads_peak: 10 + 2 * rep as u64,
            threads_after: 5,
            wall_s: 3.0,
            error: None,
        }
    }

    #[test]
    fn the_tables_show_medians_over_repetitions_and_paired_tps_ratios() {
        let cfg = ServerBenchConfig {
            clients: vec![64],
            workloads: vec!["oltp_point_select".into()],
            seconds: 3,
            reps: 3,
            servers: vec![TURNSTILE_ONE, TURNSTILE_POOL, MARIADB_POOL],
        };
        let mut runs = vec![
            // turnstile pool: 3000, 2000, 4000 → median 3000.
            run(TURNSTILE_POOL, 64, 0, 3000.0),
            run(TURNSTILE_POOL, 64, 1, 2000.0),
            run(TURNSTILE_POOL, 64, 2, 4000.0),
            // turnstile one-thread: 1500, 2000, 1000 → ratios 2, 1, 4 → median 2.
            run(TURNSTILE_ONE, 64, 0, 1500.0),
            run(TURNSTILE_ONE, 64, 1, 2000.0),
            run(TURNSTILE_ONE, 64, 2, 1000.0),
            // MariaDB pool: 6000, 1000, failed → ratios 0.5, 2 → median 1.25.
            run(MARIADB_POOL, 64, 0, 6000.0),
            run(MARIADB_POOL, 64, 1, 1000.0),
            run(MARIADB_POOL, 64, 2, 0.0),
        ];
        runs[8].error = Some("sysbench failed".into());
        let report = ServerReport {
            sysbench: "sysbench 1.0.20".into(),
            cpus: 2,
            points: summarize(&cfg, &runs),
            ratios: ratios(&cfg, &runs),
            config: cfg,
            table_size: TABLE_SIZE,
            range_size: RANGE_SIZE,
            servers: vec![ServerSetup {
                server: MARIADB_POOL,
                command: "mariadbd".into(),
                settings: vec![setting("thread_handling", "pool-of-threads")],
                start_s: 4.0,
            }],
            skipped: vec![],
            runs,
            elapsed_s: 75.0,
        };
        let p = &report.points;
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].server, "turnstile/pool-of-threads");
        assert_eq!((p[1].tps, p[1].p95_ms, p[1].max_ms), (3000.0, 3.0, 30.0));
        assert_eq!((p[1].server_cpu_pct, p[1].threads_peak), (52.0, 12.0));
        assert_eq!((p[1].errors, p[1].runs_ok, p[1].runs), (3, 3, 3));
        // The failed run counts its errors but not its zero figures.
        assert_eq!((p[2].tps, p[2].runs_ok), (3500.0, 2));
        let x = &report.ratios[0];
        assert_eq!(x.pool_vs_one_thread, Some(2.0));
        assert_eq!(x.pool_vs_mariadb_pool, Some(1.25));
        assert_eq!(x.one_thread_vs_mariadb_one_thread, None);

        let md = markdown(&report);
        assert!(md.contains("### oltp_point_select"), "{md}");
        assert!(
            md.contains("| 64 | turnstile/pool-of-threads | 3000 | 3.00 | 30.0 | 52 | 40 | 12 | 5 | 3 | 3/3 |"),
            "{md}"
        );
        assert!(
            md.contains("| 64 | turnstile/one-thread-per-connection | 1500 | 1.50 | 15.0 | 52 | 40 | 12 | 5 | 3 | 3/3 |"),
            "{md}"
        );
        assert!(
            md.contains("| 64 | mariadb/pool-of-threads | 3500 | 3.50 | 35.0 | 51 | 40 | 11 | 5 | 3 | 2/3 |"),
            "{md}"
        );
        assert!(md.contains("| 64 | 1.25 | 2.00 | – |"), "{md}");
        assert!(
            md.contains("| mariadb/pool-of-threads | thread_handling=pool-of-threads | 4.0 s |"),
            "{md}"
        );
        assert!(md.contains("The run took 1m15s."), "{md}");
    }

    #[test]
    fn cpu_ticks_are_read_after_the_last_parenthesis_of_a_name_with_spaces_and_parentheses() {
        // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime …
        let line = "4242 (my (odd) serve r) S 1 4242 4242 0 -1 4194560 1200 0 3 0 \
                    1234 567 0 0 20 0 9 0 5000 100000000 2000 18446744073709551615";
        assert_eq!(stat_cpu_ticks(line), Some(1234 + 567));
        assert_eq!(stat_cpu_ticks("4242 (cut) S 1 2"), None);
        assert_eq!(stat_cpu_ticks("no name here"), None);
    }

    #[test]
    fn this_process_reports_its_cpu_and_threads_from_proc() {
        let pid = std::process::id();
        assert!(proc_cpu_s(pid).is_some_and(|s| s >= 0.0));
        assert!(proc_threads(pid).is_some_and(|n| n >= 1));
    }

    #[test]
    fn the_quick_sweep_is_three_client_counts_of_three_seconds_once() {
        let q = ServerBenchConfig::quick();
        assert_eq!(q.clients, vec![4, 64, 1024]);
        assert_eq!((q.seconds, q.reps, q.workloads.len()), (3, 1, 2));
        assert!(q.validate().is_ok());
        let mut bad = q.clone();
        bad.clients = vec![MAX_CONNECTIONS];
        assert!(bad.validate().unwrap_err().contains("too many"));
        let mut bad = q;
        bad.workloads = vec!["oltp_write_only".into()];
        assert!(bad.validate().unwrap_err().contains("oltp_point_select"));
    }
}
