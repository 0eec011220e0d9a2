//! The bulk paths (`ensure_table`, `truncate_above`) against row locks, DDL and other tables,
//! and the row locks under deadlocks and timeouts: nothing destroyed that is not the table's
//! own, no index entry without its row, nothing left held.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::schema::Row;
use turnstile_engine::{Connection, Engine, EngineConfig, EngineError};

fn temp_engine(tag: &str) -> (Arc<Engine>, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "turnstile-engine-bulk-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let e = Engine::open(&EngineConfig {
        data_dir: dir.clone(),
        fsync_delay: Duration::ZERO,
        row_work: Duration::ZERO,
    })
    .unwrap();
    (e, dir)
}

fn gate() -> Gate {
    Gate::new(GateConfig::new(Policy::Classic).limit(2).tickets(500)).unwrap()
}

fn row(id: u32, k: u32) -> Row {
    let mut r = Row::generate(id, 1000);
    r.k = k;
    r
}

#[test]
fn ensure_table_refuses_rather_than_destroy_a_user_table_named_like_its_index() {
    // redb deletes a table by its name alone: `ensure_table("t")` deleted the user table
    // `t_k` to make `t`'s index.
    let (e, dir) = temp_engine("index-name");
    e.create_table("t_k").unwrap();
    let g = gate();
    let mut c = Connection::new(e.clone(), &g, "c");
    c.insert_row("t_k", &row(1, 1)).unwrap();
    c.insert_row("t_k", &row(2, 2)).unwrap();
    let r = e.ensure_table("t", 10, &mut |_, _| {});
    assert!(
        matches!(&r, Err(EngineError::TableExists(n)) if n == "t_k"),
        "{r:?}"
    );
    assert_eq!(e.count_direct("t_k").unwrap(), 2);
    drop(c);
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ensure_table_refuses_rather_than_replace_another_tables_index() {
    let (e, dir) = temp_engine("over-index");
    e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
    let r = e.ensure_table("t_k", 5, &mut |_, _| {});
    assert!(
        matches!(&r, Err(EngineError::TableExists(n)) if n == "t_k"),
        "{r:?}"
    );
    assert_eq!(
        e.index_ids_direct("t").unwrap(),
        (1..=10).collect::<Vec<u32>>()
    );
    let g = gate();
    let mut c = Connection::new(e.clone(), &g, "c");
    c.update_row("t", 3, |r| r.k += 1)
        .expect("t is still writable");
    // A table loaded again under its own name is rebuilt as before.
    assert!(e.ensure_table("t", 12, &mut |_, _| {}).unwrap());
    drop(c);
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_load_asked_to_stop_ends_between_batches_and_the_next_load_builds_the_table_whole() {
    let (e, dir) = temp_engine("stopped-load");
    let rows = 120_000u32; // three batches of 50,000
    let stop = AtomicBool::new(false);
    let mut seen = Vec::new();
    let r = e.ensure_table_until(
        "t",
        rows,
        &mut |done, _| {
            seen.push(done);
            // Asked to stop once the first batch is in.
            stop.store(true, Ordering::SeqCst);
        },
        &|| stop.load(Ordering::SeqCst),
    );
    assert!(matches!(r, Err(EngineError::Stopped)), "{r:?}");
    assert_eq!(seen, [50_000], "no batch after the stop");
    // Not marked loaded: the next load builds it again, whole, and a later one reuses it.
    assert!(
        e.ensure_table("t", rows, &mut |_, _| {}).unwrap(),
        "rebuilt"
    );
    assert_eq!(e.count_direct("t").unwrap(), rows as u64);
    assert_eq!(e.index_ids_direct("t").unwrap().len(), rows as usize);
    assert!(
        !e.ensure_table("t", rows, &mut |_, _| {}).unwrap(),
        "reused"
    );
    // A stop asked for during the last batch changes nothing: the load is whole.
    let (e2, dir2) = temp_engine("stopped-last");
    assert!(e2
        .ensure_table_until("t", 10, &mut |_, _| {}, &|| true)
        .unwrap());
    assert_eq!(e2.count_direct("t").unwrap(), 10);
    drop((e, e2));
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(dir2);
}

#[test]
fn writes_and_drops_are_refused_while_a_table_is_loaded_and_the_load_is_whole() {
    // Between two of the load's batches a commit left an index entry for a row the load
    // then overwrote, and a drop left a table marked loaded but short.
    let (e, dir) = temp_engine("during-load");
    let g = gate();
    let mut c = Connection::new(e.clone(), &g, "c");
    e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
    let rows = 60_000u32; // two batches of 50,000
    let e2 = e.clone();
    let mut tried = false;
    e.ensure_table("t", rows, &mut |done, _| {
        if done < rows as u64 && !std::mem::replace(&mut tried, true) {
            let k = Row::generate(50_001, rows).k.wrapping_add(1);
            let w = c.insert_row("t", &row(50_001, k));
            assert!(
                matches!(&w, Err(EngineError::BadInput(m)) if m.contains("being loaded")),
                "{w:?}"
            );
            assert!(e2.drop_table("t").is_err(), "a drop during the load");
            assert!(
                e2.truncate_above("t", 10).is_err(),
                "a truncation during it"
            );
        }
    })
    .unwrap();
    assert!(tried);
    assert_eq!(e.count_direct("t").unwrap(), rows as u64);
    assert_eq!(e.index_ids_direct("t").unwrap().len(), rows as usize);
    assert!(
        !e.ensure_table("t", rows, &mut |_, _| {}).unwrap(),
        "reused"
    );
    // Open to writes again.
    c.update_row("t", 7, |r| r.k += 1).unwrap();
    drop(c);
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_table_with_uncommitted_changes_is_neither_rebuilt_nor_truncated_under_them() {
    let (e, dir) = temp_engine("open-txn");
    e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
    let g = gate();
    let mut c = Connection::new(e.clone(), &g, "c");
    c.begin_transaction().unwrap();
    c.insert_row("t", &row(11, 5)).unwrap();
    assert!(e.ensure_table("t", 20, &mut |_, _| {}).is_err());
    assert!(e.truncate_above("t", 10).is_err());
    c.commit().unwrap();
    assert_eq!(e.truncate_above("t", 10).unwrap(), 1);
    assert_eq!(e.ids_direct("t").unwrap(), (1..=10).collect::<Vec<u32>>());
    assert_eq!(e.index_ids_direct("t").unwrap().len(), 10);
    drop(c);
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn truncations_racing_updates_leave_no_index_entry_without_its_row() {
    // The rows to delete were read in one transaction and deleted in another, with the `k`
    // read first: an update committed in between left its new index entry behind.
    let (e, dir) = temp_engine("truncate-race");
    e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
    let g = gate();
    let stop = Arc::new(AtomicBool::new(false));
    let (e2, g2, stop2) = (e.clone(), g.clone(), stop.clone());
    let writer = std::thread::spawn(move || {
        let mut c = Connection::new(e2, &g2, "w");
        let mut k = 0u32;
        while !stop2.load(Ordering::Relaxed) {
            k = k.wrapping_add(1);
            let _ = c.insert_row("t", &row(11, k));
            for _ in 0..3 {
                k = k.wrapping_add(1);
                let _ = c.update_row("t", 11, |r| r.k = k);
            }
        }
    });
    // A count, not a time: the race needs many tries, not a duration.
    let (mut done, mut refused) = (0u64, 0u64);
    for _ in 0..20_000 {
        match e.truncate_above("t", 10) {
            Ok(_) => done += 1,
            // The writer held the row's lock: refused, not raced.
            Err(EngineError::BadInput(_)) => refused += 1,
            Err(x) => panic!("{x}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    e.truncate_above("t", 10).unwrap();
    let ids = e.ids_direct("t").unwrap();
    assert_eq!(ids, (1..=10).collect::<Vec<u32>>());
    assert_eq!(
        e.index_ids_direct("t").unwrap(),
        ids,
        "index entries left for deleted rows after {done} truncations ({refused} refused)"
    );
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn transfers_under_deadlocks_and_timeouts_conserve_the_sum_and_leave_nothing_held() {
    let (e, dir) = temp_engine("transfers");
    e.ensure_table("t", 8, &mut |_, _| {}).unwrap();
    e.set_lock_wait_timeout(Duration::from_millis(30));
    let sum = |e: &Engine| -> u32 {
        (1..=8).fold(0u32, |s, id| {
            s.wrapping_add(e.get_direct("t", id).unwrap().unwrap().k)
        })
    };
    let before = sum(&e);
    let g = Gate::new(GateConfig::new(Policy::Classic).limit(2).tickets(5)).unwrap();
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (e, g) = (e.clone(), g.clone());
            std::thread::spawn(move || {
                let mut c = Connection::new(e, &g, format!("c{t}"));
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                for _ in 0..300 {
                    let a = (next() % 8) as u32 + 1;
                    let b = (next() % 8) as u32 + 1;
                    c.begin_transaction().unwrap();
                    let r = c
                        .update_row("t", a, |r| r.k = r.k.wrapping_sub(1))
                        .and_then(|_| c.update_row("t", b, |r| r.k = r.k.wrapping_add(1)))
                        .and_then(|_| c.commit());
                    match r {
                        Ok(()) | Err(EngineError::Deadlock) => {}
                        // A timeout undoes only the statement; the client ends the rest.
                        Err(EngineError::LockWaitTimeout) => c.rollback(),
                        Err(e) => panic!("{e}"),
                    }
                    assert!(!c.in_transaction(), "a refusal ends the transaction");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(sum(&e), before, "the sum of k is conserved");
    assert_eq!(e.row_locks_held(), 0);
    let s = g.stats();
    assert_eq!((s.inside, s.stepped_out), (0, 0));
    drop(e);
    let _ = std::fs::remove_dir_all(dir);
}
