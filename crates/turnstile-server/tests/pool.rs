//! What `pool-of-threads` promises beyond answering as a thread per connection does (the
//! server and wire tests run in both modes): idle connections hold no thread, the gate's limit
//! bounds the workers, and a silent connection is closed after `wait_timeout`.

mod raw_client;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::Conn;
use raw_client::{closed, finish, opts, raw_client, server_with, wait_for};
use turnstile::{GateConfig, Policy};

/// The thread handling every server of these tests runs (`raw_client::server_with`).
const THREAD_HANDLING: turnstile_server::ThreadHandling =
    turnstile_server::ThreadHandling::PoolOfThreads;

/// Threads of this process now (the server runs in it).
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("a Threads: line")
}

#[test]
fn a_thousand_idle_connections_hold_fewer_than_a_hundred_threads_and_each_still_answers() {
    let (s, dir) = server_with("pool-idle", raw_client::ROWS, |_| {});
    let before = threads();
    let mut conns: Vec<Conn> = (0..1000)
        .map(|_| Conn::new(opts(&s, "root", None)).unwrap())
        .collect();
    let during = threads();
    assert!(
        during < before + 100,
        "1000 idle connections took {} threads",
        during - before
    );
    assert_eq!(s.stats().connected.load(Ordering::SeqCst), 1000);
    for (i, c) in conns.iter_mut().enumerate().step_by(37) {
        let id = i as u32 % raw_client::ROWS + 1;
        let got: Option<String> = c
            .query_first(format!("SELECT c FROM sbtest1 WHERE id={id}"))
            .unwrap();
        assert!(got.is_some(), "row {id} answered");
    }
    drop(conns);
    wait_for("every connection to end", || {
        s.stats().connected.load(Ordering::SeqCst) == 0
    });
    finish(s, dir);
}

#[test]
fn with_a_fixed_limit_the_workers_stay_near_the_limit_not_the_connections() {
    let limit = 2;
    let (s, dir) = server_with("pool-limit", raw_client::ROWS, |c| {
        c.gate = GateConfig::new(Policy::Classic).limit(limit);
    });
    let clients = 64;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Logged in one at a time: a worker waiting for a client's login reply waits on the
    // client, and the pool may start another meanwhile (a burst of logins takes more).
    let conns: Vec<Conn> = (0..clients)
        .map(|_| Conn::new(opts(&s, "root", None)).unwrap())
        .collect();
    let hs: Vec<_> = conns
        .into_iter()
        .zip(0u32..)
        .map(|(mut c, i)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let id = (i + n as u32) % raw_client::ROWS + 1;
                    let got: Option<String> = c
                        .query_first(format!("SELECT c FROM sbtest1 WHERE id={id}"))
                        .unwrap();
                    assert!(got.is_some(), "row {id} answered");
                    n += 1;
                }
                n
            })
        })
        .collect();
    // Sample the pool while every client hammers it.
    let mut most = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        let text = s.prometheus();
        let workers: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("turnstile_server_pool_threads "))
            .and_then(|v| v.parse().ok())
            .expect("the pool's gauge");
        most = most.max(workers);
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, Ordering::Relaxed);
    let done: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(done > 0, "the clients were served");
    // As many active as the limit plus a spare waiting at the gate; a worker that went idle
    // is reused before another starts. Twice that leaves room for the moment a worker is
    // between two connections.
    let bound = 2 * (limit as u64 + 1);
    assert!(
        most <= bound,
        "{most} workers for {clients} clients under limit {limit}"
    );
    finish(s, dir);
}

#[test]
fn a_silent_connection_is_closed_after_wait_timeout_and_a_busy_one_is_not() {
    let (s, dir) = server_with("pool-wait-timeout", raw_client::ROWS, |c| {
        c.wait_timeout = Duration::from_secs(1);
    });
    let mut silent = raw_client(&s, "root", "");
    let mut busy = Conn::new(opts(&s, "root", None)).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        busy.query_drop("SELECT 1").unwrap();
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(closed(&mut silent), "the silent connection was closed");
    busy.query_drop("SELECT 1").unwrap();
    drop(busy);
    wait_for("every connection to end", || {
        s.stats().connected.load(Ordering::SeqCst) == 0
    });
    finish(s, dir);
}

#[test]
fn clients_that_stop_in_a_login_or_halfway_through_a_packet_do_not_hold_every_worker() {
    // Limit 1: the gate's room is one active worker and a spare. Silent clients park workers
    // in reads for `connect_timeout` (a login) or `net_read_timeout` (a packet's rest); those
    // workers wait on a client, not on the engine, so they must not stop a worker from
    // starting for a client that talks.
    let (s, dir) = server_with("pool-silent-clients", raw_client::ROWS, |c| {
        c.gate = GateConfig::new(Policy::Classic).limit(1);
        c.connect_timeout = Duration::from_secs(30);
        c.net_read_timeout = Duration::from_secs(30);
    });
    let mut silent: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(s.tcp_addr()).unwrap())
        .collect();
    for _ in 0..4 {
        // A COM_QUERY header that promises 100 bytes, then 5 of them.
        let mut t = raw_client(&s, "root", "");
        std::io::Write::write_all(&mut t, &[100, 0, 0, 0, 3, b'S', b'E', b'L', b'E']).unwrap();
        silent.push(t);
    }
    wait_for("the silent clients to be accepted", || {
        s.stats().connected.load(Ordering::SeqCst) == silent.len()
    });
    let mut c = Conn::new(opts(&s, "root", None)).unwrap();
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=3").unwrap();
    assert!(got.is_some());
    // Answered while every silent client still holds its connection (their timeouts have
    // not passed): the answer did not wait for a worker they held.
    assert_eq!(
        s.stats().connected.load(Ordering::SeqCst),
        silent.len() + 1,
        "the silent clients were still connected when the talking client was answered"
    );
    drop(c);
    drop(silent);
    wait_for("every connection to end", || {
        s.stats().connected.load(Ordering::SeqCst) == 0
    });
    finish(s, dir);
}
