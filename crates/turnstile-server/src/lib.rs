//! `turnstile serve`: the embedded engine ([`turnstile_engine`]) behind a MySQL wire-protocol
//! server, so that real clients — the `mysql` client, sysbench — drive the gate.
//!
//! * **Threads**: one OS thread per connection, as MySQL's default
//!   `thread_handling=one-thread-per-connection`. An accept loop (one thread for TCP, one for
//!   the Unix socket) spawns a `std::thread` per connection, which runs the protocol
//!   (`opensrv-mysql`) with blocking I/O on that thread ([`wire`]) to the connection's end, so
//!   the gate sees the connection's own thread making every handler call.
//! * **Statements** ([`sql`]): parsed with `sqlparser` (MySQL dialect) into a plan: the
//!   sysbench statements, transactions, DDL for sysbench's prepare/cleanup, the mysql client's
//!   chatter, administration. Anything else answers MySQL error 1235 and the connection stays
//!   usable.
//! * **Administration**: `SET GLOBAL turnstile_policy|turnstile_concurrency|turnstile_tickets|
//!   turnstile_row_send|turnstile_commit_mode`, `SHOW ENGINE TURNSTILE STATUS`, `SHOW GLOBAL
//!   STATUS LIKE 'turnstile%'`, `SHOW VARIABLES LIKE 'turnstile%'` ([`admin`]).
//! * **Authentication** ([`auth`]): with a password set ([`ServerConfig::password`]), only
//!   [`ServerConfig::user`] with that password logs in (`mysql_native_password`, a fresh random
//!   scramble per connection); anything else is refused with error 1045, connection closed.
//!   Without one, any user and password log in, and the server listens on a loopback address
//!   only: [`Server::start`] refuses any other.
//!
//! ```no_run
//! use turnstile_server::{Server, ServerConfig};
//! let server = Server::start(ServerConfig::new("/tmp/turnstile-data"))?;
//! println!("listening on {}", server.tcp_addr());
//! server.shutdown();
//! # Ok::<(), String>(())
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use turnstile::GateConfig;
use turnstile_engine::{CommitMode, Engine, EngineConfig, RowSend};

pub mod admin;
pub mod auth;
mod binary_params;
mod column_values;
mod conn;
mod indexes;
mod metrics_http;
mod mysql_error;
mod outcome;
mod plan_cache;
mod plan_error;
mod pool;
mod precheck;
mod shim;
pub mod sql;
pub mod value;
pub mod wire;

pub use admin::GateCell;
pub use auth::Password;

/// MySQL's default `max_allowed_packet` since 8.0.3: 64 MiB.
pub const DEFAULT_MAX_PACKET: usize = 64 * 1024 * 1024;

/// A connection thread's stack. MySQL 8's default `thread_stack` is 1 MiB; the parser guards
/// its recursion by growing the stack on demand (`sqlparser`'s `recursive-protection`).
const THREAD_STACK: usize = 1024 * 1024;

/// Settings for [`Server::start`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on for TCP (`--bind`, `--port`); port 0 picks a free one.
    pub tcp: SocketAddr,
    /// Unix socket path (`--socket`); a stale file there is removed. `None`: no socket.
    pub socket: Option<PathBuf>,
    /// The user who may log in when a password is set (`--user`).
    pub user: String,
    /// The user's password (`--password`); `None` (or empty): any user logs in with any
    /// password, and `tcp` must be a loopback address. An empty password is checked as MySQL
    /// checks a user without one (the client must send none).
    pub password: Option<Password>,
    /// The engine's data directory and emulated fsync delay.
    pub engine: EngineConfig,
    /// The gate's initial configuration.
    pub gate: GateConfig,
    /// The server layer's handling of rows sent to the client.
    pub row_send: RowSend,
    /// The engine's commit mode for every connection.
    pub commit_mode: CommitMode,
    /// Connections served at once; one more is answered error 1040 (`max_connections`).
    pub max_connections: usize,
    /// The largest packet accepted from a client (`max_allowed_packet`).
    pub max_packet: usize,
    /// How long a new connection may take to log in (`connect_timeout`): a client silent for
    /// longer before its login is over is disconnected.
    pub connect_timeout: Duration,
    /// How long a logged-in connection may stay silent between commands before it is closed
    /// (`wait_timeout`): a client gone without a word (a half-open TCP connection) frees its
    /// thread, its connection slot and its row locks.
    pub wait_timeout: Duration,
    /// How long a write to a client may block (`net_write_timeout`): a client that stops
    /// reading a result is disconnected, and its statement leaves the gate.
    pub net_write_timeout: Duration,
    /// With a thread pool, how long a read within a command may block its worker
    /// (`net_read_timeout`): a client that stops halfway through a packet is disconnected.
    /// (With a thread per connection, the thread is the connection's anyway, and
    /// `wait_timeout` bounds every read.)
    pub net_read_timeout: Duration,
    /// Log connection errors and refused statements on stderr.
    pub log: bool,
    /// Where to answer Prometheus scrapes (`GET /metrics`, `--metrics-addr`); `None`: nowhere.
    pub metrics: Option<SocketAddr>,
    /// A thread per connection, or connections multiplexed over a pool the gate governs
    /// (`--thread-handling`, MySQL's `thread_handling`).
    pub thread_handling: ThreadHandling,
    /// The most worker threads a pool runs (`thread_pool_max_threads`); ignored with a thread
    /// per connection, where `max_connections` bounds the threads.
    pub pool_max_threads: usize,
}

/// How connections get threads (MySQL's and MariaDB's `thread_handling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ThreadHandling {
    /// One OS thread per connection, from login to close (MySQL's default).
    #[default]
    OneThreadPerConnection,
    /// Connections wait for their next command in epoll, without a thread; worker threads
    /// run one command at a time for whichever connection has one, and how many run at once
    /// is what the gate admits ([`pool`]).
    PoolOfThreads,
}

impl ThreadHandling {
    /// Both, in report order.
    pub const ALL: [ThreadHandling; 2] = [
        ThreadHandling::OneThreadPerConnection,
        ThreadHandling::PoolOfThreads,
    ];

    /// MySQL's name: `one-thread-per-connection` / `pool-of-threads`.
    pub fn name(self) -> &'static str {
        match self {
            ThreadHandling::OneThreadPerConnection => "one-thread-per-connection",
            ThreadHandling::PoolOfThreads => "pool-of-threads",
        }
    }
}

impl std::fmt::Display for ThreadHandling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ThreadHandling {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        ThreadHandling::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown thread handling '{s}': expected one-thread-per-connection or pool-of-threads"
                )
            })
    }
}

impl ServerConfig {
    /// Defaults: 127.0.0.1:3307, no socket, user root without a password (any user logs in),
    /// data in `data_dir` with no emulated fsync delay, the library's default gate, rows sent
    /// keeping the slot, group commit, 4096 connections, 64 MiB packets, logging on.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            tcp: SocketAddr::from(([127, 0, 0, 1], 3307)),
            socket: None,
            user: "root".into(),
            password: None,
            engine: EngineConfig {
                data_dir: data_dir.into(),
                fsync_delay: Duration::ZERO,
                row_work: Duration::ZERO,
            },
            gate: GateConfig::default(),
            row_send: RowSend::Keep,
            commit_mode: CommitMode::GroupCommit,
            // MySQL's max_connections defaults to 151; sysbench runs up to 1024 threads and
            // a pool serves thousands of idle connections, so the server takes 4096 (fds:
            // 2 per connection: all of them need `ulimit -n` above 8192).
            max_connections: 4096,
            max_packet: DEFAULT_MAX_PACKET,
            // MySQL's connect_timeout default: 10 s.
            connect_timeout: Duration::from_secs(10),
            // MySQL's wait_timeout default: 28,800 s (8 hours).
            wait_timeout: Duration::from_secs(28_800),
            // MySQL's net_write_timeout default: 60 s.
            net_write_timeout: Duration::from_secs(60),
            // MySQL's net_read_timeout default: 30 s.
            net_read_timeout: Duration::from_secs(30),
            log: true,
            metrics: None,
            thread_handling: ThreadHandling::OneThreadPerConnection,
            // MariaDB's `thread_pool_max_threads` is 65,536; a pool here needs a worker only
            // per statement running or in a wait at once, and 1,024 keeps a runaway (every
            // worker stuck in an undeclared wait) at a bounded number of stacks.
            pool_max_threads: 1024,
        }
    }
}

/// Server-wide counters, shown by `SHOW GLOBAL STATUS`.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections open now.
    pub connected: AtomicUsize,
    /// Connections accepted (served) since start.
    pub connections: AtomicU64,
    /// Connections refused with error 1040.
    pub refused_connections: AtomicU64,
    /// Connections that ended in a protocol error (malformed or oversized packet, I/O error).
    pub aborted_connections: AtomicU64,
    /// Connection threads that panicked (caught; the connection was closed).
    pub panics: AtomicU64,
    /// Statements run.
    pub statements: AtomicU64,
    /// Statements answered error 1235 (not supported).
    pub not_supported: AtomicU64,
    /// Statements answered another error.
    pub errors: AtomicU64,
}

/// What every connection shares.
pub(crate) struct Shared {
    pub(crate) config: ServerConfig,
    pub(crate) engine: Arc<Engine>,
    pub(crate) gate: GateCell,
    pub(crate) stats: ServerStats,
    pub(crate) row_send: AtomicU32,
    pub(crate) commit_mode: AtomicU32,
    pub(crate) started: Instant,
    /// Who may log in.
    credentials: Arc<auth::Credentials>,
    /// The names of the tables' indexes.
    pub(crate) indexes: indexes::IndexNames,
    next_conn: AtomicU32,
    stopping: AtomicBool,
    /// A second handle on each open connection's socket, to close it at shutdown.
    open: Mutex<HashMap<u32, Handle>>,
    /// The thread pool, with `pool-of-threads`.
    pool: Option<Arc<pool::Pool>>,
}

impl Shared {
    pub(crate) fn row_send(&self) -> RowSend {
        RowSend::ALL[self.row_send.load(Ordering::Relaxed) as usize]
    }

    pub(crate) fn commit_mode(&self) -> CommitMode {
        CommitMode::ALL[self.commit_mode.load(Ordering::Relaxed) as usize]
    }

    /// How long a read may block once the client logged in: the whole idle wait with a thread
    /// per connection, a read within a command with a pool (which waits for commands in
    /// epoll, bounded by `wait_timeout` there).
    fn read_timeout_after_login(&self) -> Duration {
        match self.pool {
            Some(_) => self.config.net_read_timeout,
            None => self.config.wait_timeout,
        }
    }

    /// Pool worker threads now and how many are idle (0, 0 with a thread per connection).
    pub(crate) fn pool_workers(&self) -> (usize, usize) {
        self.pool.as_ref().map_or((0, 0), |p| p.workers())
    }
}

enum Handle {
    Tcp(Arc<TcpStream>),
    Unix(Arc<UnixStream>),
}

impl Handle {
    fn shutdown(&self) {
        let _ = match self {
            Handle::Tcp(s) => s.shutdown(Shutdown::Both),
            Handle::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }
}

/// A running server.
pub struct Server {
    shared: Arc<Shared>,
    tcp_addr: SocketAddr,
    socket: Option<PathBuf>,
    metrics_addr: Option<SocketAddr>,
    accept_threads: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the engine, builds the gate and starts listening (TCP, and the Unix socket if
    /// configured); connections are served from now on. Without a password (none, or empty)
    /// the TCP address must be a loopback one (127.0.0.0/8, ::1): anyone who can reach another
    /// could log in.
    pub fn start(config: ServerConfig) -> Result<Server, String> {
        let has_password = config
            .password
            .as_ref()
            .is_some_and(|p| !p.expose().is_empty());
        if !has_password && !config.tcp.ip().to_canonical().is_loopback() {
            return Err(format!(
                "refusing to listen on {} without a password: set --password or bind 127.0.0.1",
                config.tcp.ip()
            ));
        }
        let credentials = Arc::new(auth::Credentials::new(
            &config.user,
            config.password.as_ref(),
        ));
        let engine =
            Engine::open(&config.engine).map_err(|e| format!("cannot open the engine: {e}"))?;
        let gate =
            GateCell::new(config.gate).map_err(|e| format!("bad gate configuration: {e}"))?;
        let listener = TcpListener::bind(config.tcp)
            .map_err(|e| format!("cannot listen on {}: {e}", config.tcp))?;
        let tcp_addr = listener.local_addr().map_err(|e| e.to_string())?;
        let metrics = match config.metrics {
            None => None,
            Some(addr) => {
                let l = TcpListener::bind(addr)
                    .map_err(|e| format!("cannot listen for metrics on {addr}: {e}"))?;
                let bound = l.local_addr().map_err(|e| e.to_string())?;
                Some((l, bound))
            }
        };
        let metrics_addr = metrics.as_ref().map(|m| m.1);
        let unix =
            match &config.socket {
                None => None,
                Some(path) => {
                    if path.exists() {
                        // A socket file left by a server that is gone: connecting fails.
                        if UnixStream::connect(path).is_ok() {
                            return Err(format!(
                                "another server is listening on the socket {}",
                                path.display()
                            ));
                        }
                        std::fs::remove_file(path).map_err(|e| {
                            format!("cannot remove the stale socket {}: {e}", path.display())
                        })?;
                    }
                    Some(UnixListener::bind(path).map_err(|e| {
                        format!("cannot listen on the socket {}: {e}", path.display())
                    })?)
                }
            };
        let row_send = RowSend::ALL
            .iter()
            .position(|r| *r == config.row_send)
            .expect("a RowSend") as u32;
        let commit_mode = CommitMode::ALL
            .iter()
            .position(|m| *m == config.commit_mode)
            .expect("a CommitMode") as u32;
        let indexes = indexes::IndexNames::open(&config.engine.data_dir)
            .map_err(|e| format!("cannot read the index names: {e}"))?;
        let mut pool_error = None;
        let shared = Arc::new_cyclic(|weak: &std::sync::Weak<Shared>| {
            let pool = match config.thread_handling {
                ThreadHandling::OneThreadPerConnection => None,
                ThreadHandling::PoolOfThreads => {
                    let weak = weak.clone();
                    let room = Box::new(move |active| {
                        weak.upgrade().is_none_or(|s| {
                            pool::gate_has_room(s.gate.current().0.occupancy(), active)
                        })
                    });
                    pool::Pool::start(config.pool_max_threads, THREAD_STACK, room)
                        .map_err(|e| pool_error = Some(e))
                        .ok()
                }
            };
            Shared {
                engine,
                gate,
                stats: ServerStats::default(),
                row_send: AtomicU32::new(row_send),
                commit_mode: AtomicU32::new(commit_mode),
                started: Instant::now(),
                credentials,
                indexes,
                next_conn: AtomicU32::new(1),
                stopping: AtomicBool::new(false),
                open: Mutex::new(HashMap::new()),
                pool,
                config,
            }
        });
        if let Some(e) = pool_error {
            return Err(format!("cannot start the thread pool: {e}"));
        }
        let mut accept_threads = Vec::new();
        {
            let shared = shared.clone();
            accept_threads.push(
                std::thread::Builder::new()
                    .name("accept-tcp".into())
                    .spawn(move || accept_tcp(shared, listener))
                    .map_err(|e| format!("cannot start the accept thread: {e}"))?,
            );
        }
        if let Some(listener) = unix {
            let shared = shared.clone();
            accept_threads.push(
                std::thread::Builder::new()
                    .name("accept-unix".into())
                    .spawn(move || accept_unix(shared, listener))
                    .map_err(|e| format!("cannot start the accept thread: {e}"))?,
            );
        }
        if let Some((listener, _)) = metrics {
            let shared = shared.clone();
            accept_threads.push(
                std::thread::Builder::new()
                    .name("accept-metrics".into())
                    .spawn(move || metrics_http::serve(shared, listener))
                    .map_err(|e| format!("cannot start the metrics thread: {e}"))?,
            );
        }
        let socket = shared.config.socket.clone();
        Ok(Server {
            shared,
            tcp_addr,
            socket,
            metrics_addr,
            accept_threads,
        })
    }

    /// The bound TCP address (the real port when configured with port 0).
    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp_addr
    }

    /// Where Prometheus scrapes are answered (`GET /metrics`), if configured (the real port
    /// when configured with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The scrape's text: what `GET /metrics` answers now.
    pub fn prometheus(&self) -> String {
        metrics_http::prometheus(&self.shared)
    }

    /// The Unix socket path, if any.
    pub fn socket_path(&self) -> Option<&std::path::Path> {
        self.socket.as_deref()
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.shared.engine
    }

    /// The gate in force now (it changes with `SET GLOBAL turnstile_policy/tickets`).
    pub fn gate(&self) -> turnstile::Gate {
        self.shared.gate.current().0
    }

    /// Puts a gate built from `config` in force, as `SET GLOBAL turnstile_policy` does (each
    /// connection moves to it at its next statement start); returns it. For tools that drive
    /// the server in-process (`repro oltp --client sysbench`).
    pub fn set_gate_config(&self, config: GateConfig) -> Result<turnstile::Gate, String> {
        self.shared
            .gate
            .rebuild(|_, _| config)
            .map_err(|e| format!("bad gate configuration: {e}"))
    }

    /// Sets the server layer's handling of rows sent to the client, as `SET GLOBAL
    /// turnstile_row_send` does.
    pub fn set_row_send(&self, row_send: RowSend) {
        let i = RowSend::ALL
            .iter()
            .position(|r| *r == row_send)
            .expect("a RowSend") as u32;
        self.shared.row_send.store(i, Ordering::Relaxed);
    }

    /// Server-wide counters.
    pub fn stats(&self) -> &ServerStats {
        &self.shared.stats
    }

    /// Stops accepting, closes every open connection's socket (each connection's thread then
    /// ends: its statement's slot is freed and its open transaction rolled back) and removes
    /// the Unix socket file. Connection threads finish on their own.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loops (they check `stopping` after each accept).
        let _ = TcpStream::connect(self.tcp_addr);
        if let Some(a) = self.metrics_addr {
            let _ = TcpStream::connect(a);
        }
        if let Some(p) = &self.socket {
            let _ = UnixStream::connect(p);
        }
        for t in self.accept_threads.drain(..) {
            let _ = t.join();
        }
        for h in self.shared.open.lock().expect("open connections").values() {
            h.shutdown();
        }
        if let Some(p) = &self.shared.pool {
            p.stop();
        }
        if let Some(p) = &self.socket {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_tcp(shared: Arc<Shared>, listener: TcpListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_read_timeout(Some(shared.config.connect_timeout));
                let _ = s.set_write_timeout(Some(shared.config.net_write_timeout));
                // As MySQL with `skip_name_resolve`, the client's host is its address.
                let host = s.peer_addr().map_or_else(
                    |_| "unknown".to_string(),
                    |a| a.ip().to_canonical().to_string(),
                );
                let s = Arc::new(s);
                let t = s.clone();
                let idle = shared.read_timeout_after_login();
                let logged_in = Box::new(move || {
                    let _ = t.set_read_timeout(Some(idle));
                });
                admit(&shared, s.clone(), Handle::Tcp(s), &host, logged_in);
            }
            Err(e) => accept_error(&shared, e),
        }
    }
}

fn accept_unix(shared: Arc<Shared>, listener: UnixListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(s) => {
                let _ = s.set_read_timeout(Some(shared.config.connect_timeout));
                let _ = s.set_write_timeout(Some(shared.config.net_write_timeout));
                let s = Arc::new(s);
                let t = s.clone();
                let idle = shared.read_timeout_after_login();
                let logged_in = Box::new(move || {
                    let _ = t.set_read_timeout(Some(idle));
                });
                // MySQL names a client on the Unix socket 'localhost'.
                admit(&shared, s.clone(), Handle::Unix(s), "localhost", logged_in);
            }
            Err(e) => accept_error(&shared, e),
        }
    }
}

fn accept_error(shared: &Shared, e: std::io::Error) {
    if shared.config.log {
        eprintln!("turnstile serve: accept failed: {e}");
    }
    // Out of file descriptors (EMFILE) repeats at once: do not spin on it.
    std::thread::sleep(Duration::from_millis(10));
}

/// Answers error 1040 before the handshake, as MySQL does when `max_connections` is reached.
fn refuse(shared: &Shared, mut s: impl Write, why: &str) {
    shared
        .stats
        .refused_connections
        .fetch_add(1, Ordering::Relaxed);
    let _ = s.write_all(&wire::err_packet(
        0,
        wire::ER_CON_COUNT_ERROR,
        b"08004",
        &format!("Too many connections ({why})"),
    ));
}

/// Starts a connection's thread for a client from `host`, or refuses it. `logged_in` lifts the
/// connect timeout.
fn admit<S>(
    shared: &Arc<Shared>,
    stream: Arc<S>,
    handle: Handle,
    host: &str,
    logged_in: Box<dyn FnOnce() + Send>,
) where
    S: Send + Sync + AsRawFd + 'static,
    for<'a> &'a S: std::io::Read + Write,
{
    let max = shared.config.max_connections;
    if shared.stats.connected.fetch_add(1, Ordering::SeqCst) >= max {
        shared.stats.connected.fetch_sub(1, Ordering::SeqCst);
        refuse(shared, &*stream, &format!("max_connections = {max}"));
        return;
    }
    let login = match auth::Login::new(shared.credentials.clone(), host, logged_in) {
        Ok(l) => l,
        Err(e) => {
            // No scramble, no login: closed before the greeting.
            shared.stats.connected.fetch_sub(1, Ordering::SeqCst);
            if shared.config.log {
                eprintln!("turnstile serve: cannot draw a scramble for a connection: {e}");
            }
            return;
        }
    };
    let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    shared
        .open
        .lock()
        .expect("open connections")
        .insert(id, handle);
    if let Some(pool) = &shared.pool {
        let fd = stream.as_raw_fd();
        let idle = pool.idle_waiter(id, fd, shared.config.wait_timeout);
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let future = shim::connection(shared, id, stream, login, Some(idle));
        let shared = shared.clone();
        pool.spawn(
            Box::pin(future),
            Box::new(move |panicked| connection_ended(&shared, id, panicked)),
        );
        return;
    }
    let thread_shared = shared.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("conn-{id}"))
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let shared = thread_shared;
            shared.stats.connections.fetch_add(1, Ordering::Relaxed);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                shim::run(&shared, id, stream, login)
            }));
            connection_ended(&shared, id, r.is_err());
        });
    if let Err(e) = spawned {
        shared.stats.connected.fetch_sub(1, Ordering::SeqCst);
        if let Some(h) = shared.open.lock().expect("open connections").remove(&id) {
            h.shutdown();
        }
        if shared.config.log {
            eprintln!("turnstile serve: cannot start a connection thread: {e}");
        }
    }
}

/// A connection's end, on whichever thread ran it: its socket closed, its place freed.
fn connection_ended(shared: &Shared, id: u32, panicked: bool) {
    if panicked {
        // The panic message was printed by the panic hook; the connection's guards and its
        // engine connection were dropped while unwinding (slot freed, transaction rolled
        // back).
        shared.stats.panics.fetch_add(1, Ordering::Relaxed);
        shared
            .stats
            .aborted_connections
            .fetch_add(1, Ordering::Relaxed);
        if shared.config.log {
            eprintln!("turnstile serve: connection {id}: thread panicked; closed");
        }
    }
    if let Some(h) = shared.open.lock().expect("open connections").remove(&id) {
        h.shutdown();
    }
    shared.stats.connected.fetch_sub(1, Ordering::SeqCst);
}
