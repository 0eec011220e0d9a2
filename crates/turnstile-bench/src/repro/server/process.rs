//! The servers' processes: finding MariaDB, each server's arguments and settings, starting
//! one in a temporary folder as a child of its own, and reading its CPU and threads from
//! `/proc`.

use super::*;

/// The programs MariaDB needs: the server, its data-directory initialiser and its client.
#[derive(Debug, Clone)]
pub struct MariadbTools {
    /// `mariadbd`.
    pub mariadbd: PathBuf,
    /// `mariadb-install-db` (or the older `mysql_install_db`).
    pub install_db: PathBuf,
    /// `mariadb` (or `mysql`).
    pub client: PathBuf,
    /// `mariadbd --version`.
    pub version: String,
}

/// The first of `names` found in `$PATH` or in `extra` folders.
pub(super) fn which(names: &[&str], extra: &[PathBuf]) -> Option<PathBuf> {
    let path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    names.iter().find_map(|n| {
        path.iter()
            .chain(extra)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// MariaDB's programs: `mariadbd` from `$TURNSTILE_MARIADBD`, `PATH` or `/usr/sbin`, its
/// helpers beside it or on `PATH`. The error is one line saying what is missing and how to
/// install it.
pub fn find_mariadb() -> Result<MariadbTools, String> {
    const HINT: &str = "`sudo apt-get install mariadb-server` (Debian/Ubuntu), or set \
                        TURNSTILE_MARIADBD to mariadbd's path";
    let mariadbd = std::env::var_os("TURNSTILE_MARIADBD")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| which(&["mariadbd"], &[PathBuf::from("/usr/sbin")]))
        .ok_or_else(|| format!("MariaDB is not installed (no mariadbd): {HINT}"))?;
    // The helpers live in ../bin beside ../sbin/mariadbd, or in the same folder.
    let mut near: Vec<PathBuf> = Vec::new();
    if let Some(dir) = mariadbd.parent() {
        near.push(dir.to_path_buf());
        if let Some(up) = dir.parent() {
            near.push(up.join("bin"));
        }
    }
    near.push(PathBuf::from("/usr/bin"));
    let install_db =
        which(&["mariadb-install-db", "mysql_install_db"], &near).ok_or_else(|| {
            format!(
                "{} has no mariadb-install-db beside it: {HINT}",
                mariadbd.display()
            )
        })?;
    let client = which(&["mariadb", "mysql"], &near).ok_or_else(|| {
        format!(
            "{} has no client (mariadb) beside it: {HINT}",
            mariadbd.display()
        )
    })?;
    let out = Command::new(&mariadbd)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", mariadbd.display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(MariadbTools {
        mariadbd,
        install_db,
        client,
        version,
    })
}

/// What the sweep needs from the machine.
#[derive(Debug, Clone)]
pub struct ServerEnv {
    /// The `turnstile` binary (its `serve` subcommand).
    pub turnstile: PathBuf,
    /// The folder that holds the temporary server folders.
    pub data_dir: PathBuf,
    /// sysbench's binary and version, from [`sysbench::find`].
    pub sysbench: (PathBuf, String),
    /// MariaDB's programs, when the sweep runs a MariaDB server.
    pub mariadb: Option<MariadbTools>,
}

/// `turnstile serve`'s arguments.
pub fn turnstile_args(dir: &Path, socket: &Path, port: u16, handling: Handling) -> Vec<String> {
    vec![
        "serve".into(),
        format!("--port={port}"),
        "--bind=127.0.0.1".into(),
        format!("--socket={}", socket.display()),
        format!("--data-dir={}", dir.display()),
        "--policy=auto".into(),
        "--tables=1".into(),
        format!("--table-size={TABLE_SIZE}"),
        format!("--max-connections={MAX_CONNECTIONS}"),
        format!("--thread-handling={}", handling.name()),
    ]
}

/// `mariadbd`'s arguments: no option files, no binary log or performance schema (turnstile
/// has neither), the same connection limit as turnstile.
pub fn mariadbd_args(datadir: &Path, socket: &Path, port: u16, handling: Handling) -> Vec<String> {
    vec![
        "--no-defaults".into(),
        format!("--datadir={}", datadir.display()),
        format!("--socket={}", socket.display()),
        format!("--port={port}"),
        "--bind-address=127.0.0.1".into(),
        "--user=root".into(),
        "--skip-log-bin".into(),
        "--performance-schema=OFF".into(),
        format!("--max-connections={MAX_CONNECTIONS}"),
        format!("--innodb-buffer-pool-size={MARIADB_BUFFER_POOL}"),
        format!("--thread-handling={}", handling.name()),
        "--skip-name-resolve".into(),
    ]
}

/// MariaDB's variables recorded in the report, as the running server reports them.
pub(super) const MARIADB_VARIABLES: [&str; 10] = [
    "version",
    "thread_handling",
    "thread_pool_size",
    "thread_pool_max_threads",
    "thread_cache_size",
    "max_connections",
    "innodb_buffer_pool_size",
    "log_bin",
    "performance_schema",
    "query_cache_type",
];

/// A setting a server ran with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
}

pub(super) fn setting(name: &str, value: impl Into<String>) -> Setting {
    Setting {
        name: name.into(),
        value: value.into(),
    }
}

/// How a server was started, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct ServerSetup {
    /// The server.
    pub server: ServerKind,
    /// Its program and arguments.
    pub command: String,
    /// Its settings as it reported them (MariaDB: its variables; turnstile: its start line).
    pub settings: Vec<Setting>,
    /// Seconds from start to the table being ready for sysbench.
    pub start_s: f64,
}

/// A folder removed, with everything in it, when dropped.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new(path: PathBuf) -> Result<TempDir, ReproError> {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .map_err(|e| ReproError::BadInput(format!("cannot create {}: {e}", path.display())))?;
        // Absolute: mariadbd resolves a relative data directory against its own base folder.
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The last `n` lines of the file at `path` (a server's log), for an error message.
pub(super) fn tail(path: &Path, n: usize) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A port on 127.0.0.1 nobody listened on a moment ago.
pub(super) fn free_port() -> Result<u16, ReproError> {
    let l = TcpListener::bind(("127.0.0.1", 0))
        .map_err(|e| ReproError::BadInput(format!("no free loopback port: {e}")))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| ReproError::BadInput(e.to_string()))
}

/// Makes `cmd`'s process a session of its own and asks the kernel to send it SIGTERM when
/// the spawning thread ends. A session is a process group too, so the terminal's Ctrl-C
/// reaches this process only, which stops the servers in order, and a server outlives nothing
/// that kills this process. A session is also its own scheduler autogroup: sysbench and the
/// server then share the CPUs as two programs, not by how many threads each runs, so a server
/// with few threads (a pool) is not starved by the client, nor one with a thread per
/// connection favoured.
pub(super) fn server_process(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec; it calls only setsid and
    // prctl, which are async-signal-safe, allocates nothing and touches no state shared with
    // the parent. setsid cannot fail here: a child just forked leads no process group.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
            Ok(())
        })
    }
}

/// A server child process, stopped (and killed if it will not stop) when dropped.
pub(super) struct ServerProc {
    pub(super) kind: ServerKind,
    pub(super) child: Child,
    pub(super) port: u16,
    pub(super) log: PathBuf,
    pub(super) stopped: bool,
}

impl ServerProc {
    /// A server just spawned, not yet stopped.
    fn new(kind: ServerKind, child: Child, port: u16, log: &Path) -> Self {
        ServerProc {
            kind,
            child,
            port,
            log: log.to_path_buf(),
            stopped: false,
        }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `None` while it runs; what it exited with, and its log's end, once it has exited.
    pub(super) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(st)) => Some(format!(
                "{} exited ({st}); its log ends:\n{}",
                self.kind.name(),
                tail(&self.log, 15)
            )),
            Err(e) => Some(format!("{}: {e}", self.kind.name())),
        }
    }

    /// Stops the server: SIGINT for turnstile (its Ctrl-C), SIGTERM for MariaDB (its
    /// shutdown), then waits up to [`STOP_GRACE`] and kills it past that.
    pub(super) fn stop(&mut self) -> Result<(), String> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        if !matches!(self.child.try_wait(), Ok(None)) {
            return Ok(());
        }
        let sig = match self.kind.program {
            Program::Turnstile => libc::SIGINT,
            Program::Mariadb => libc::SIGTERM,
        };
        // SAFETY: `kill` only sends a signal. The pid is this process's child and has not
        // been waited for (try_wait just said it runs), so it cannot name another process.
        unsafe {
            libc::kill(self.pid() as libc::pid_t, sig);
        }
        let deadline = Instant::now() + STOP_GRACE;
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) => return Ok(()),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "{} did not stop within {} s of its signal: killed",
                        self.kind.name(),
                        STOP_GRACE.as_secs()
                    ));
                }
            }
        }
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("warning: {e}");
        }
    }
}

/// Starts `turnstile serve` in `dir` and waits for its `listening on` line (it builds its
/// table first). A port taken in between is retried on another.
pub(super) fn start_turnstile(
    env: &ServerEnv,
    kind: ServerKind,
    dir: &Path,
    socket: &Path,
) -> Result<(ServerProc, ServerSetup), ReproError> {
    let t0 = Instant::now();
    let log = dir.join("serve.log");
    let mut last = String::new();
    for _attempt in 0..3 {
        last.clear();
        let port = free_port()?;
        let args = turnstile_args(&dir.join("data"), socket, port, kind.handling);
        let err_log = File::create(&log)
            .map_err(|e| ReproError::BadInput(format!("cannot create {}: {e}", log.display())))?;
        let mut child = server_process(
            Command::new(&env.turnstile)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(err_log),
        )
        .spawn()
        .map_err(|e| {
            ReproError::BadInput(format!("cannot start {}: {e}", env.turnstile.display()))
        })?;
        // A thread reads stdout to its end, so the pipe never fills; the first lines come here.
        let out = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut p = ServerProc::new(kind, child, port, &log);
        let deadline = Instant::now() + START_TIMEOUT;
        let ready = loop {
            if stopped() {
                return Err(ReproError::Interrupted);
            }
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.starts_with("turnstile serve: listening on") => break Some(line),
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
            }
            if let Some(e) = p.exited() {
                last = e;
                break None;
            }
            if Instant::now() > deadline {
                return Err(ReproError::BadInput(format!(
                    "{} did not listen within {} s; its log ends:\n{}",
                    kind.name(),
                    START_TIMEOUT.as_secs(),
                    tail(&log, 15)
                )));
            }
        };
        let Some(line) = ready else {
            // Its output closed: it is exiting; wait a moment for its status.
            let wait = Instant::now() + Duration::from_secs(5);
            while last.is_empty() && Instant::now() < wait {
                match p.exited() {
                    Some(e) => last = e,
                    None => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            if last.is_empty() {
                last = format!("{} closed its output", kind.name());
            }
            if last.contains("in use") {
                continue;
            }
            return Err(ReproError::BadInput(last));
        };
        let setup = ServerSetup {
            server: kind,
            command: format!("{} {}", env.turnstile.display(), args.join(" ")),
            settings: vec![
                setting("thread_handling", kind.handling.name()),
                setting("max_connections", MAX_CONNECTIONS.to_string()),
                setting("policy", "auto"),
                setting("started", line),
            ],
            start_s: t0.elapsed().as_secs_f64(),
        };
        return Ok((p, setup));
    }
    Err(ReproError::BadInput(last))
}

/// Runs `cmd` to its end; an error quoting its output when it fails.
pub(super) fn run_quiet(cmd: &mut Command, what: &str) -> Result<String, ReproError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ReproError::BadInput(format!("cannot run {what}: {e}")))?;
    if !out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = text.lines().collect();
        return Err(ReproError::BadInput(format!(
            "{what} failed ({}):\n{}",
            out.status,
            lines[lines.len().saturating_sub(15)..].join("\n")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// The MariaDB client on 127.0.0.1:`port` as root, batch mode without headers, running `sql`.
pub(super) fn mariadb_sql(m: &MariadbTools, port: u16, sql: &str) -> Result<String, ReproError> {
    run_quiet(
        Command::new(&m.client).args([
            "--no-defaults",
            "-h127.0.0.1",
            &format!("-P{port}"),
            "-uroot",
            "--connect-timeout=5",
            "-N",
            "-B",
            "-e",
            sql,
        ]),
        "the mariadb client",
    )
}

/// Initialises a data directory in `dir`, starts `mariadbd` on it, waits until it answers,
/// creates the database and has sysbench build the table.
pub(super) fn start_mariadb(
    env: &ServerEnv,
    kind: ServerKind,
    dir: &Path,
    socket: &Path,
) -> Result<(ServerProc, ServerSetup), ReproError> {
    let m = env.mariadb.as_ref().ok_or_else(|| {
        ReproError::BadInput(format!(
            "{} needs MariaDB, which was not found",
            kind.name()
        ))
    })?;
    let t0 = Instant::now();
    let datadir = dir.join("data");
    let log = dir.join("mariadbd.log");
    run_quiet(
        Command::new(&m.install_db).args([
            "--no-defaults".to_string(),
            format!("--datadir={}", datadir.display()),
            "--user=root".into(),
            "--auth-root-authentication-method=normal".into(),
        ]),
        "mariadb-install-db",
    )?;
    let mut last = String::new();
    for _attempt in 0..3 {
        last.clear();
        let port = free_port()?;
        let args = mariadbd_args(&datadir, socket, port, kind.handling);
        let file = |log: &Path| {
            File::options()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| ReproError::BadInput(format!("cannot open {}: {e}", log.display())))
        };
        let child = server_process(
            Command::new(&m.mariadbd)
                .args(&args)
                .stdin(Stdio::null())
                .stdout(file(&log)?)
                .stderr(file(&log)?),
        )
        .spawn()
        .map_err(|e| ReproError::BadInput(format!("cannot start {}: {e}", m.mariadbd.display())))?;
        let mut p = ServerProc::new(kind, child, port, &log);
        let deadline = Instant::now() + START_TIMEOUT;
        let answered = loop {
            if stopped() {
                return Err(ReproError::Interrupted);
            }
            if let Some(e) = p.exited() {
                last = e;
                break false;
            }
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
                && mariadb_sql(m, port, "SELECT 1").is_ok()
            {
                break true;
            }
            if Instant::now() > deadline {
                return Err(ReproError::BadInput(format!(
                    "{} did not answer within {} s; its log ends:\n{}",
                    kind.name(),
                    START_TIMEOUT.as_secs(),
                    tail(&log, 15)
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if !answered {
            if last.contains("in use") {
                continue;
            }
            return Err(ReproError::BadInput(last));
        }
        mariadb_sql(m, port, "CREATE DATABASE IF NOT EXISTS sbtest")?;
        run_quiet(
            Command::new(&env.sysbench.0).args([
                "oltp_read_only".to_string(),
                "--db-driver=mysql".into(),
                "--mysql-host=127.0.0.1".into(),
                format!("--mysql-port={port}"),
                "--mysql-user=root".into(),
                "--mysql-db=sbtest".into(),
                "--tables=1".into(),
                format!("--table-size={TABLE_SIZE}"),
                "prepare".into(),
            ]),
            "sysbench prepare",
        )?;
        let select: Vec<String> = MARIADB_VARIABLES.iter().map(|v| format!("@@{v}")).collect();
        let row = mariadb_sql(m, port, &format!("SELECT {}", select.join(", ")))?;
        let settings = MARIADB_VARIABLES
            .iter()
            .zip(row.trim_end().split('\t'))
            .map(|(n, v)| setting(n, v))
            .collect();
        let setup = ServerSetup {
            server: kind,
            command: format!("{} {}", m.mariadbd.display(), args.join(" ")),
            settings,
            start_s: t0.elapsed().as_secs_f64(),
        };
        return Ok((p, setup));
    }
    Err(ReproError::BadInput(last))
}

/// utime + stime, in clock ticks, from a `/proc/PID/stat` line. The process name (field 2)
/// may hold spaces and parentheses, so the fields are counted after its last `)`.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, utime field 14 and stime field 15.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds process `pid` has used.
pub(super) fn proc_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // SAFETY: sysconf reads a constant of the system and has no memory effects.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(stat_cpu_ticks(&stat)? as f64 / if tck > 0 { tck as f64 } else { 100.0 })
}

/// Threads of process `pid` (`Threads:` in `/proc/PID/status`).
pub(super) fn proc_threads(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Threads:")?.trim().parse().ok())
}
