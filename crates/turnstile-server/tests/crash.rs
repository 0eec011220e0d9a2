//! The server's crash test: a child process runs `turnstile serve`'s server (group commit, a
//! thread per connection or the pool by round); clients here insert rows over the protocol,
//! each in its own autocommit statement, and count a row as acknowledged once its OK arrives.
//! The parent `SIGKILL`s the child at a random moment, reopens the data (crash recovery) and
//! checks that every acknowledged row is there.
//!
//! Rounds: `TURNSTILE_SERVER_CRASH_ROUNDS` (default 4, both handlings twice).

mod raw_client;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};
use turnstile_engine::{Engine, EngineConfig};
use turnstile_server::{Server, ServerConfig, ThreadHandling};

/// `raw_client::server_with`'s default handling; this file's servers choose their own.
const THREAD_HANDLING: ThreadHandling = ThreadHandling::OneThreadPerConnection;

const CHILD: &str = "child_serves_until_killed";
const DIR_VAR: &str = "TURNSTILE_SERVER_CRASH_DIR";
const POOL_VAR: &str = "TURNSTILE_SERVER_CRASH_POOL";
/// Inserting clients per round: several, so that commits queue into groups behind each other's
/// fsync and kills land inside a group.
const CLIENTS: u32 = 8;

#[test]
#[ignore = "the server crash test's child process; run by the parent"]
fn child_serves_until_killed() {
    let dir = PathBuf::from(std::env::var(DIR_VAR).expect("run by the crash test's parent"));
    let mut c = ServerConfig::new(&dir);
    c.tcp = "127.0.0.1:0".parse().unwrap();
    c.socket = None;
    c.log = false;
    if std::env::var(POOL_VAR).is_ok() {
        c.thread_handling = ThreadHandling::PoolOfThreads;
    }
    let s = Server::start(c).unwrap();
    // Built once (one row: id 1), then reopened as the crash left it.
    if !s.engine().table_exists("sbtest1").unwrap() {
        s.engine()
            .ensure_table("sbtest1", 1, &mut |_, _| {})
            .unwrap();
    }
    println!("port {}", s.tcp_addr().port());
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// One client: inserts rows `first`, `first + 1`, … until the server goes away, recording
/// each whose OK arrived.
fn insert_until_gone(port: u16, first: u32, acked: Arc<Mutex<Vec<u32>>>, stop: Arc<AtomicBool>) {
    let opts = OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(port)
        .user(Some("root"))
        .db_name(Some("sbtest"))
        .prefer_socket(false);
    let Ok(mut c) = Conn::new(opts) else { return };
    for id in first.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let sql = format!("INSERT INTO sbtest1 (id, k, c, pad) VALUES ({id}, 1, 'crash', 'p')");
        if c.query_drop(sql).is_err() {
            return;
        }
        acked.lock().unwrap().push(id);
    }
}

#[test]
fn after_a_sigkill_of_the_server_every_acknowledged_insert_is_there_in_both_handlings() {
    let rounds: u32 = std::env::var("TURNSTILE_SERVER_CRASH_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("TURNSTILE_SERVER_CRASH_ROUNDS: a number"))
        .unwrap_or(4);
    let dir = raw_client::data_dir("server-crash");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    eprintln!("server crash test: {rounds} rounds, seed {seed}");
    let mut acked_total = BTreeSet::new();
    for round in 0..rounds {
        let pool = round % 2 == 1;
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([CHILD, "--exact", "--ignored", "--nocapture"])
            .env(DIR_VAR, &dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if pool {
            cmd.env(POOL_VAR, "1");
        }
        let mut child = cmd.spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let port: u16 = loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap() == 0 {
                panic!("round {round}: the child server ended before it listened");
            }
            if let Some(p) = line.trim().strip_prefix("port ") {
                break p.parse().unwrap();
            }
        };
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|t| {
                // Ids of their own per round and client, never reused.
                let first = 2 + round * 10_000_000 + t * 1_000_000;
                let (acked, stop) = (acked.clone(), stop.clone());
                std::thread::spawn(move || insert_until_gone(port, first, acked, stop))
            })
            .collect();
        // A hang guard, not a measurement: a server that exits or serves nothing fails the
        // round instead of blocking the suite.
        let hang = Instant::now() + Duration::from_secs(60);
        while acked.lock().unwrap().len() < CLIENTS as usize {
            if child.try_wait().unwrap().is_some() {
                panic!("round {round}: the server exited under its clients");
            }
            if Instant::now() > hang {
                let _ = child.kill();
                panic!("round {round}: the server acknowledged nothing (stuck)");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // A random moment within the next 100 ms, from the seed and the round.
        let delay = (seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(round as u64)
            >> 33)
            % 100;
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.join().unwrap();
        }
        let acked: Vec<u32> = std::mem::take(&mut *acked.lock().unwrap());
        acked_total.extend(acked.iter().copied());

        let e = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: Duration::ZERO,
        })
        .unwrap();
        let table: BTreeSet<u32> = e.ids_direct("sbtest1").unwrap().into_iter().collect();
        let lost: Vec<_> = acked_total.difference(&table).take(5).collect();
        assert!(
            lost.is_empty(),
            "round {round} ({}): {} acknowledged inserts lost, e.g. {lost:?}",
            if pool {
                "pool"
            } else {
                "thread per connection"
            },
            acked_total.difference(&table).count()
        );
        eprintln!(
            "round {round} ({}): {} acknowledged, {} rows after recovery",
            if pool {
                "pool-of-threads"
            } else {
                "one-thread-per-connection"
            },
            acked.len(),
            table.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
