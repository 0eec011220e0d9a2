//! `turnstile serve`: the engine behind a MySQL wire-protocol server (crate
//! `turnstile-server`), until Ctrl-C.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use turnstile::{GateConfig, Policy};
use turnstile_bench::repro;
use turnstile_engine::{CommitMode, RowSend};
use turnstile_server::{Server, ServerConfig, ThreadHandling};

#[derive(Args)]
pub struct ServeArgs {
    /// TCP port (MySQL's is 3306; 3307 leaves it free).
    #[arg(long, default_value_t = 3307)]
    port: u16,
    /// Address to listen on. Without a password only a loopback address (127.0.0.0/8, ::1)
    /// is accepted.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// The user who may log in when a password is set.
    #[arg(long, default_value = "root")]
    user: String,
    /// The user's password (mysql_native_password). Prefer the environment variable
    /// TURNSTILE_PASSWORD, which stays off the process list; this flag wins over it. Without
    /// one (or with an empty one) any user logs in with any password, on loopback only.
    #[arg(long)]
    password: Option<String>,
    /// Unix socket path (a stale file there is removed on start).
    #[arg(long, default_value = "/tmp/turnstile.sock")]
    socket: PathBuf,
    /// Where the engine keeps its tables and binlog.
    #[arg(long, default_value = "data/serve")]
    data_dir: PathBuf,
    /// Gate policy: classic, polling, timer, flifo, unlimited, auto (default: the library's
    /// default, auto). Live: SET GLOBAL turnstile_policy = 'flifo'.
    #[arg(long)]
    policy: Option<Policy>,
    /// Threads allowed inside at once (innodb_thread_concurrency), 0..=1000 (default: the
    /// policy's). Live: SET GLOBAL turnstile_concurrency = 16.
    #[arg(long)]
    concurrency: Option<u32>,
    /// Tickets per admission (innodb_concurrency_tickets), ≥ 1 (default 500). Live: SET
    /// GLOBAL turnstile_tickets = 500.
    #[arg(long)]
    tickets: Option<u32>,
    /// Rows sent to the client: force-exit (MySQL 5.0/5.1) or keep (5.5+).
    #[arg(long, default_value = "keep")]
    row_send: RowSend,
    /// Commit mode: hold-slot, release-slot or group-commit.
    #[arg(long, default_value = "group-commit")]
    commit_mode: CommitMode,
    /// Extra delay in ms inside every binlog fsync, emulating a slow disk, 0..=10000.
    #[arg(long, default_value_t = 0)]
    fsync_ms: u64,
    /// Connections served at once; one more is answered error 1040 (Too many connections).
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// one-thread-per-connection, or pool-of-threads: connections wait for commands in
    /// epoll without a thread, and the gate decides how many worker threads run statements.
    #[arg(long, default_value = "one-thread-per-connection")]
    thread_handling: ThreadHandling,
    /// The most worker threads the pool runs (thread_pool_max_threads), 1..=65536.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    thread_pool_max_threads: u32,
    /// Pre-create N sysbench tables sbtest1..sbtestN (with --table-size rows each).
    #[arg(long, default_value_t = 0)]
    tables: u32,
    /// Rows per pre-created table.
    #[arg(long, default_value_t = 10_000)]
    table_size: u32,
    /// Answer Prometheus scrapes at http://ADDR/metrics (e.g. 127.0.0.1:9104): the gate's
    /// counters, gauges and histograms, the commit mutex, and the engine's and server's
    /// counters. Off by default.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<SocketAddr>,
}

/// The environment variable that gives the password when `--password` does not.
const PASSWORD_ENV: &str = "TURNSTILE_PASSWORD";

pub fn run(a: &ServeArgs) -> Result<(), String> {
    let password = match &a.password {
        Some(p) => Some(p.clone()),
        None => match std::env::var(PASSWORD_ENV) {
            Ok(p) => Some(p),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{PASSWORD_ENV} is not valid UTF-8"))
            }
        },
    }
    .filter(|p| !p.is_empty());
    if a.fsync_ms > 10_000 {
        return Err(format!(
            "--fsync-ms {} is out of range: 0..=10000",
            a.fsync_ms
        ));
    }
    if a.max_connections == 0 {
        return Err("--max-connections must be at least 1".into());
    }
    if a.tables > 0 && a.table_size == 0 {
        return Err("--table-size must be at least 1 with --tables".into());
    }
    // As `repro pileup --tables` and `repro --rows` are bounded: more would load for hours.
    if a.tables > 1000 || a.table_size > 100_000_000 {
        return Err(format!(
            "--tables {} / --table-size {} out of range: at most 1000 tables of 100,000,000 rows",
            a.tables, a.table_size
        ));
    }
    let mut gate = match a.policy {
        Some(p) => GateConfig::new(p),
        None => GateConfig::default(),
    };
    if let Some(c) = a.concurrency {
        gate = gate.limit(c);
    }
    if let Some(t) = a.tickets {
        gate = gate.tickets(t);
    }
    gate.validate()
        .map_err(|e| format!("bad gate setting: {e}"))?;
    let mut config = ServerConfig::new(&a.data_dir);
    config.tcp = SocketAddr::new(a.bind, a.port);
    config.socket = Some(a.socket.clone());
    config.user = a.user.clone();
    config.password = password.clone().map(Into::into);
    config.engine.fsync_delay = Duration::from_millis(a.fsync_ms);
    config.gate = gate;
    config.row_send = a.row_send;
    config.commit_mode = a.commit_mode;
    config.max_connections = a.max_connections;
    config.thread_handling = a.thread_handling;
    config.pool_max_threads = a.thread_pool_max_threads as usize;
    config.metrics = a.metrics_addr;
    let server = Server::start(config)?;
    for i in 1..=a.tables {
        let name = format!("sbtest{i}");
        // A load of millions of rows takes minutes: say how far it is, every tenth, and stop
        // between two batches on Ctrl-C (the table is then built again next time).
        let mut shown = 0;
        let built = match server.engine().ensure_table_until(
            &name,
            a.table_size,
            &mut |done, total| {
                let pct = 100 * done / total.max(1);
                if done < total && pct >= shown + 10 {
                    eprintln!("{name}: loading rows: {done}/{total} ({pct}%)");
                    shown = pct;
                }
            },
            &repro::stopped,
        ) {
            Ok(built) => built,
            Err(turnstile_engine::EngineError::Stopped) => {
                server.shutdown();
                return Err(repro::ReproError::Interrupted.to_string());
            }
            Err(e) => return Err(format!("cannot build {name}: {e}")),
        };
        eprintln!(
            "{name}: {} rows ({})",
            a.table_size,
            if built { "built" } else { "reused" }
        );
    }
    let g = server.gate();
    let (access, login) = match &password {
        Some(_) => (
            format!("user {} with a password", a.user),
            format!("-u{} -p", a.user),
        ),
        None => (
            "no password: any user logs in".to_string(),
            "-uroot".to_string(),
        ),
    };
    println!(
        "turnstile serve: listening on {} and {} ({}, policy {}, concurrency {}, tickets {}, row-send {}, commit {}; {access})",
        server.tcp_addr(),
        a.socket.display(),
        a.thread_handling,
        g.policy(),
        g.limit(),
        g.config().tickets,
        a.row_send,
        a.commit_mode.name(),
    );
    println!(
        "connect: mysql -h{} -P{} {login}   or   mysql -S {} {login}   (Ctrl-C stops)",
        server.tcp_addr().ip(),
        server.tcp_addr().port(),
        a.socket.display()
    );
    if let Some(m) = server.metrics_addr() {
        println!("metrics: http://{m}/metrics (Prometheus text)");
    }
    while !repro::stopped() {
        std::thread::sleep(Duration::from_millis(100));
    }
    server.shutdown();
    eprintln!("turnstile serve: stopped");
    Ok(())
}
