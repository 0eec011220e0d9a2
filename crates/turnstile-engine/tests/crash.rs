//! The crash test: a child process commits inserts and acknowledges each committed one on its
//! stdout (a pipe to the parent); the parent `SIGKILL`s it at a random moment, reopens the data
//! (crash recovery), and checks that the table and the binlog agree and hold every
//! acknowledged insert. Half of the rounds make the child pause between the binlog fsync and
//! the apply, so that kills land there too. Most of the child's committers use group commit,
//! so that kills also land while a group is prepared and appended behind another's fsync.
//!
//! Rounds: `TURNSTILE_CRASH_ROUNDS` (default 5; `TURNSTILE_CRASH_ROUNDS=50` for the soak).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::schema::Row;
use turnstile_engine::{CommitMode, Connection, Engine, EngineConfig, EngineError, Failpoint, Op};

const CHILD: &str = "child_commits_and_acknowledges_inserts_until_killed";
const DIR_VAR: &str = "TURNSTILE_CRASH_DIR";
const PAUSE_VAR: &str = "TURNSTILE_CRASH_PAUSE_MS";
const TABLE: &str = "crash";

fn open(dir: &Path) -> Arc<Engine> {
    Engine::open(&EngineConfig {
        data_dir: dir.to_path_buf(),
        // A short emulated fsync, so that commits queue into groups.
        fsync_delay: Duration::from_millis(2),
        row_work: Duration::ZERO,
    })
    .unwrap()
}

/// The child: eight threads commit transactions of two inserts and an update of their own
/// earlier row (six in group commit, so that groups form behind each other's fsyncs, one in
/// each serial mode) and print `ack <id>` for each insert once its commit returned `Ok`, until
/// killed.
#[test]
#[ignore = "the crash test's child process; run by the parent"]
fn child_commits_and_acknowledges_inserts_until_killed() {
    let dir = PathBuf::from(std::env::var(DIR_VAR).expect("run by the crash test's parent"));
    let e = open(&dir);
    if !e.table_exists(TABLE).unwrap() {
        e.create_table(TABLE).unwrap();
    }
    if let Some(ms) = std::env::var(PAUSE_VAR).ok().and_then(|v| v.parse().ok()) {
        e.set_failpoint(Failpoint::PauseAfterBinlog(Duration::from_millis(ms)));
    }
    let gate = Gate::new(GateConfig::new(Policy::Classic).limit(2)).unwrap();
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let modes = [
        CommitMode::GroupCommit,
        CommitMode::GroupCommit,
        CommitMode::GroupCommit,
        CommitMode::GroupCommit,
        CommitMode::GroupCommit,
        CommitMode::GroupCommit,
        CommitMode::HoldSlot,
        CommitMode::ReleaseSlot,
    ];
    let hs: Vec<_> = modes
        .into_iter()
        .enumerate()
        .map(|(i, mode)| {
            let (e, g, out) = (e.clone(), gate.clone(), out.clone());
            std::thread::spawn(move || {
                let mut c = Connection::new(e, &g, format!("child-{i}"));
                c.set_commit_mode(mode);
                let mut last = None;
                loop {
                    c.begin_transaction().unwrap();
                    let a = c.next_id(TABLE).unwrap();
                    let b = c.next_id(TABLE).unwrap();
                    c.insert_row(TABLE, &Row::generate(a, 1000)).unwrap();
                    c.insert_row(TABLE, &Row::generate(b, 1000)).unwrap();
                    if let Some(l) = last {
                        assert_eq!(c.update_row(TABLE, l, |r| r.k += 1).unwrap(), 1);
                    }
                    c.commit().unwrap();
                    last = Some(b);
                    let mut o = out.lock().unwrap();
                    writeln!(o, "ack {a}\nack {b}").unwrap();
                    o.flush().unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        // The threads run until the parent kills the process.
        h.join().unwrap();
    }
}

/// A small xorshift generator seeded from the clock: the kill moments need not repeat.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The ids the binlog leaves in the table: inserts add, deletes remove.
fn binlog_ids(e: &Engine) -> BTreeSet<u32> {
    let mut ids = BTreeSet::new();
    for r in e.binlog_records().unwrap() {
        for c in r.changes.iter().filter(|c| c.table == TABLE) {
            match c.op {
                Op::Insert => assert!(ids.insert(c.id), "id {} inserted twice", c.id),
                Op::Update => assert!(ids.contains(&c.id), "update of missing {}", c.id),
                Op::Delete => assert!(ids.remove(&c.id)),
            }
        }
    }
    ids
}

#[test]
fn after_a_sigkill_at_any_moment_the_table_equals_the_binlog_and_holds_every_acknowledged_insert() {
    let rounds: u32 = std::env::var("TURNSTILE_CRASH_ROUNDS")
        .ok()
        .map(|v| {
            v.parse()
                .expect("TURNSTILE_CRASH_ROUNDS: a number of rounds")
        })
        .unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("turnstile-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut rng = Rng(seed | 1);
    eprintln!("crash test: {rounds} rounds, seed {seed}");
    let mut acked_total = BTreeSet::new();
    let mut redone = 0;
    for round in 0..rounds {
        let pause = round % 2 == 1;
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            CHILD,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(DIR_VAR, &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
        if pause {
            // Long next to the 2 ms fsync: most of a commit's time is spent between the
            // binlog fsync and the apply, so the kill most likely lands there.
            cmd.env(PAUSE_VAR, "20");
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let acked = Arc::new(Mutex::new(Vec::<u32>::new()));
        let reader = {
            let acked = acked.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(id) = line.strip_prefix("ack ") {
                        acked.lock().unwrap().push(id.parse().unwrap());
                    }
                }
            })
        };
        // Wait (bounded) for the first acknowledgement, then kill after a random delay.
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked.lock().unwrap().is_empty() {
            if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
                let _ = child.kill();
                panic!("round {round}: the child acknowledged nothing (exited or stuck)");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(rng.below(100)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let acked: Vec<u32> = std::mem::take(&mut *acked.lock().unwrap());

        let e = open(&dir);
        let rec = e.recovery().clone();
        redone += rec.committed;
        let table: BTreeSet<u32> = e.ids_direct(TABLE).unwrap().into_iter().collect();
        let binlog = binlog_ids(&e);
        assert_eq!(table, binlog, "round {round}: table = binlog");
        let index: BTreeSet<u32> = e.index_ids_direct(TABLE).unwrap().into_iter().collect();
        assert_eq!(
            index, table,
            "round {round}: the k index agrees with the rows"
        );
        acked_total.extend(acked.iter().copied());
        let lost: Vec<_> = acked_total.difference(&table).collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged but lost: {lost:?}"
        );
        eprintln!(
            "round {round}: pause {pause}, {} acknowledged, {} rows, recovery {rec:?}",
            acked.len(),
            table.len()
        );
        // The reopened engine commits again (XIDs stay unique after recovery).
        let g = Gate::new(GateConfig::new(Policy::Classic).limit(2)).unwrap();
        let mut c = Connection::new(e.clone(), &g, "parent");
        let id = c.next_id(TABLE).unwrap();
        c.insert_row(TABLE, &Row::generate(id, 1000)).unwrap();
        assert!(matches!(
            c.insert_row(TABLE, &Row::generate(id, 1000)),
            Err(EngineError::DuplicateKey { .. })
        ));
        acked_total.insert(id);
        let xids: Vec<u64> = e.binlog_records().unwrap().iter().map(|r| r.xid).collect();
        let unique: BTreeSet<u64> = xids.iter().copied().collect();
        assert_eq!(unique.len(), xids.len(), "round {round}: XIDs unique");
        drop(c);
        drop(e);
    }
    eprintln!(
        "crash test: {rounds} rounds, {} acknowledged inserts all found, {redone} prepared transactions redone by recovery",
        acked_total.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
