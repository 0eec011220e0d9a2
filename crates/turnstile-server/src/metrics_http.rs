//! `--metrics-addr`: the server's figures as Prometheus text over HTTP, for an operator's
//! scraper. `GET /metrics` answers the gate in force (`turnstile::metrics`, labelled
//! `gate="server"`), the commit mutex (`lock="commit mutex"`), and the engine's and server's
//! counters and gauges; any other path answers 404. One short-lived thread per scrape keeps
//! a slow scraper from holding the accept loop; a request must arrive within
//! [`REQUEST_TIMEOUT`] and fit in [`MAX_REQUEST`].

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::Shared;

/// How long a scraper may take to send its request: Prometheus sends it at once; a client
/// that does not is not a scraper.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest request read: a GET with the headers Prometheus sends is a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;

/// Scrapes answered at once: a Prometheus server or two, and their retries. A connection past
/// this is closed unanswered (the scraper retries at its next interval), so clients that
/// connect and never finish cannot take a thread each.
const MAX_SCRAPES: usize = 16;

/// Serves scrapes on `listener` until the server stops.
pub(crate) fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The port in the name (15 bytes at most, the kernel's limit): a thread list tells one
    // server's scrapes from another's.
    let name = format!("scrape:{}", listener.local_addr().map_or(0, |a| a.port()));
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else {
            // Out of file descriptors (EMFILE) fails again at once: do not spin a CPU on it,
            // as the connection listener does not (`accept_error`).
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        };
        if busy.fetch_add(1, Ordering::AcqRel) >= MAX_SCRAPES {
            busy.fetch_sub(1, Ordering::AcqRel);
            continue; // dropped: closed unanswered
        }
        let (shared, done) = (shared.clone(), busy.clone());
        // A failed spawn drops the connection: the scraper retries at its next interval.
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                answer(&shared, stream);
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Reads one request and answers it; any I/O error just ends the connection. The whole
/// request must arrive within [`REQUEST_TIMEOUT`] (a client trickling a byte at a time does
/// not get a new timeout per read), and the answer must be taken within it too.
fn answer(shared: &Shared, mut stream: TcpStream) {
    let deadline = std::time::Instant::now() + REQUEST_TIMEOUT;
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < MAX_REQUEST {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&req);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let (status, ctype, body) = match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            prometheus(shared),
        ),
        ("GET", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "turnstile serve: the metrics are at /metrics\n".to_string(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "turnstile serve: only GET /metrics\n".to_string(),
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|_| stream.write_all(body.as_bytes()));
}

/// The scrape's text (Prometheus text format 0.0.4).
pub(crate) fn prometheus(shared: &Shared) -> String {
    let gate = shared.gate.current().0;
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = turnstile::metrics::write_prometheus(&mut out, &[("server", &gate.stats())]);
    let _ = turnstile::metrics::write_lock_prometheus(
        &mut out,
        &[&shared.engine.commit_mutex().report()],
    );
    let e = &shared.engine.stats;
    let s = &shared.stats;
    let r = Ordering::Relaxed;
    // Values as f64: Prometheus's own number type (exact for counts below 2^53).
    let n = |v: u64| v as f64;
    let counters: [(&str, &str, f64); 17] = [
        (
            "turnstile_engine_commits_total",
            "Transactions committed.",
            n(e.commits.load(r)),
        ),
        (
            "turnstile_engine_rollbacks_total",
            "Transactions rolled back.",
            n(e.rollbacks.load(r)),
        ),
        (
            "turnstile_engine_fsyncs_total",
            "Binlog fsyncs.",
            n(e.fsyncs.load(r)),
        ),
        (
            "turnstile_engine_fsync_seconds_total",
            "Time spent in binlog fsyncs (the emulated delay included).",
            e.fsync_ns.load(r) as f64 / 1e9,
        ),
        (
            "turnstile_engine_group_commits_total",
            "Commit groups written with one fsync.",
            n(e.group_commits.load(r)),
        ),
        (
            "turnstile_engine_group_committed_total",
            "Transactions committed in groups.",
            n(e.group_committed.load(r)),
        ),
        (
            "turnstile_engine_lock_waits_total",
            "Row lock waits.",
            n(e.lock_waits.load(r)),
        ),
        (
            "turnstile_engine_deadlocks_total",
            "Deadlocks detected (the requester rolled back).",
            n(e.deadlocks.load(r)),
        ),
        (
            "turnstile_engine_lock_wait_timeouts_total",
            "Row lock waits that timed out.",
            n(e.lock_wait_timeouts.load(r)),
        ),
        (
            "turnstile_engine_rows_read_total",
            "Rows fetched by cursors.",
            n(e.rows_read.load(r)),
        ),
        (
            "turnstile_server_connections_total",
            "Connections served.",
            n(s.connections.load(r)),
        ),
        (
            "turnstile_server_refused_connections_total",
            "Connections refused with error 1040.",
            n(s.refused_connections.load(r)),
        ),
        (
            "turnstile_server_aborted_connections_total",
            "Connections ended by a protocol or I/O error.",
            n(s.aborted_connections.load(r)),
        ),
        (
            "turnstile_server_panics_total",
            "Connection threads that panicked (caught).",
            n(s.panics.load(r)),
        ),
        (
            "turnstile_server_statements_total",
            "Statements run.",
            n(s.statements.load(r)),
        ),
        (
            "turnstile_server_not_supported_total",
            "Statements answered error 1235.",
            n(s.not_supported.load(r)),
        ),
        (
            "turnstile_server_errors_total",
            "Statements answered another error.",
            n(s.errors.load(r)),
        ),
    ];
    for (name, help, v) in counters {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
        );
    }
    let (workers, idle) = shared.pool_workers();
    let gauges: [(&str, &str, u64); 7] = [
        (
            "turnstile_engine_commit_waiting",
            "Sessions waiting for or holding the commit mutex.",
            e.commit_waiting.load(r) as u64,
        ),
        (
            "turnstile_engine_commit_waiting_inside",
            "Of those, sessions counted inside the gate (seed 004's pileup).",
            e.commit_waiting_inside.load(r) as u64,
        ),
        (
            "turnstile_engine_row_locks_held",
            "Row locks held now.",
            shared.engine.row_locks_held() as u64,
        ),
        (
            "turnstile_server_connected",
            "Connections open now.",
            s.connected.load(Ordering::SeqCst) as u64,
        ),
        (
            "turnstile_server_pool_threads",
            "Thread pool workers now (0 with a thread per connection).",
            workers as u64,
        ),
        (
            "turnstile_server_pool_idle_threads",
            "Of those, workers waiting for a connection with a command.",
            idle as u64,
        ),
        (
            "turnstile_server_gate_generation",
            "Gates built since start (a policy or tickets change builds one).",
            shared.gate.generation(),
        ),
    ];
    for (name, help, v) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    }
    let _ = writeln!(
        out,
        "# HELP turnstile_server_uptime_seconds Seconds since the server started.\n\
         # TYPE turnstile_server_uptime_seconds gauge\n\
         turnstile_server_uptime_seconds {:.3}",
        shared.started.elapsed().as_secs_f64()
    );
    out
}
