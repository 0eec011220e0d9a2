//! Open-time recovery of the binlog and the tables. The binlog is cut back to its last whole
//! record (and refused, left as it is, if valid records follow the damage: those are committed
//! transactions, not a torn tail); then, in one durable redb transaction, every prepared
//! transaction whose XID is in the binlog is applied and every other one is deleted. Applying is
//! idempotent, so a crash during recovery is recovered by the next open. Afterwards the tables
//! and the binlog agree, every acknowledged commit is in both, and new XIDs start above every
//! XID seen.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::path::Path;

use redb::{Database, Durability, ReadableTable};

use crate::binlog;
use crate::commit::{apply_in, Binlog, Pending};
use crate::error::{io_err, EngineError, Result};
use crate::{BINLOG_FILE, PREPARED, TABLES};

/// What [`Engine::open`](crate::Engine::open)'s crash recovery did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Prepared transactions found in the binlog, and so committed.
    pub committed: u64,
    /// Prepared transactions not in the binlog, and so rolled back.
    pub rolled_back: u64,
    /// Bytes of a torn binlog tail cut off.
    pub truncated_bytes: u64,
}

/// The binlog as recovery left it, open for appending at its end, and what recovery did.
pub(crate) struct Recovered {
    pub(crate) binlog: Binlog,
    /// The highest XID in the binlog or among the prepared transactions (0 if none).
    pub(crate) max_xid: u64,
    pub(crate) recovery: Recovery,
}

/// Opens (or creates) the binlog in `dir` and recovers `db` and the binlog from a crash.
pub(crate) fn recover(db: &Database, dir: &Path) -> Result<Recovered> {
    let path = dir.join(BINLOG_FILE);
    let mut file = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(&path)
        .map_err(io_err(format!("cannot open binlog {}", path.display())))?;
    // The binlog's (and the store's) directory entries made durable: a file created just
    // now and fsynced later could otherwise vanish with its directory entry on a power
    // loss, fsynced commits and all (POSIX asks for the directory's own fsync).
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(format!(
            "cannot sync data directory {}",
            dir.display()
        )))?;
    let data =
        std::fs::read(&path).map_err(io_err(format!("cannot read binlog {}", path.display())))?;
    let (records, valid) = binlog::parse(&data);
    let mut recovery = Recovery {
        truncated_bytes: (data.len() - valid) as u64,
        ..Recovery::default()
    };
    if let Some(at) = binlog::valid_record_after(&data, valid) {
        // Not a torn tail: cutting there would drop committed, fsynced records after it.
        return Err(EngineError::Io {
            what: format!(
                "binlog {} is corrupt at byte {valid} with valid records after it (at byte {at}); not truncating",
                path.display()
            ),
            err: std::io::Error::from(std::io::ErrorKind::InvalidData),
        });
    }
    if valid < data.len() {
        file.set_len(valid as u64)
            .and_then(|_| file.sync_all())
            .map_err(io_err(format!(
                "cannot truncate the torn tail of {}",
                path.display()
            )))?;
    }
    let in_binlog: HashSet<u64> = records.iter().map(|r| r.xid).collect();
    let mut max_xid = records.iter().map(|r| r.xid).max().unwrap_or(0);
    {
        let mut w = db.begin_write()?;
        w.set_durability(Durability::Immediate);
        w.open_table(TABLES)?;
        let prepared: Vec<(u64, Vec<u8>)> = {
            let t = w.open_table(PREPARED)?;
            let mut v = Vec::new();
            for item in t.iter()? {
                let (k, val) = item?;
                v.push((k.value(), val.value().to_vec()));
            }
            v
        };
        for (xid, bytes) in prepared {
            max_xid = max_xid.max(xid);
            if in_binlog.contains(&xid) {
                apply_in(&w, &[Pending::decode(xid, &bytes)?])?;
                recovery.committed += 1;
            } else {
                w.open_table(PREPARED)?.remove(xid)?;
                recovery.rolled_back += 1;
            }
        }
        w.commit()?;
    }
    // Appends go to the end whatever the cursor; keep it there for clarity.
    use std::io::Seek;
    file.seek(std::io::SeekFrom::End(0))
        .map_err(io_err(format!("cannot seek {}", path.display())))?;
    Ok(Recovered {
        binlog: Binlog {
            file,
            path,
            len: valid as u64,
            records: 0,
        },
        max_xid,
        recovery,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{crash_at, gate, open_at, recovered, row, temp_engine};
    use crate::{CommitMode, Connection, Engine, EngineConfig, Failpoint};
    use std::time::Duration;

    #[test]
    fn a_prepared_transaction_without_a_binlog_entry_is_rolled_back_on_open() {
        for mode in CommitMode::ALL {
            let dir = std::env::temp_dir().join(format!(
                "turnstile-engine-rec-rb-{mode}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            open_at(&dir, 0)
                .ensure_table("t", 10, &mut |_, _| {})
                .unwrap();
            let k1 = open_at(&dir, 0).get_direct("t", 1).unwrap().unwrap().k;
            assert!(crash_at(&dir, Failpoint::CrashAfterPrepare, 11, mode).is_err());
            let e = open_at(&dir, 0);
            assert_eq!(e.recovery(), &recovered(0, 1, 0), "{mode}");
            assert!(!e.contains("t", 11).unwrap());
            assert_eq!(e.get_direct("t", 1).unwrap().unwrap().k, k1);
            assert!(e.binlog_records().unwrap().is_empty());
            drop(e);
            assert_eq!(
                open_at(&dir, 0).recovery(),
                &Recovery::default(),
                "nothing left"
            );
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_prepared_transaction_with_a_durable_binlog_entry_is_committed_on_open() {
        for mode in CommitMode::ALL {
            let dir = std::env::temp_dir().join(format!(
                "turnstile-engine-rec-c-{mode}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            open_at(&dir, 0)
                .ensure_table("t", 10, &mut |_, _| {})
                .unwrap();
            assert!(crash_at(&dir, Failpoint::CrashAfterBinlog, 11, mode).is_err());
            let e = open_at(&dir, 0);
            assert_eq!(e.recovery(), &recovered(1, 0, 0), "{mode}");
            assert!(e.contains("t", 11).unwrap());
            assert_eq!(e.get_direct("t", 1).unwrap().unwrap().k, 11);
            assert_eq!(e.index_ids_direct("t").unwrap(), e.ids_direct("t").unwrap());
            let recs = e.binlog_records().unwrap();
            assert_eq!(recs.len(), 1);
            assert_eq!(recs[0].changes.len(), 2);
            // XIDs stay unique across the restart.
            let g = gate(500);
            let mut c = Connection::new(e.clone(), &g, "after");
            c.insert_row("t", &row(20, 1)).unwrap();
            let recs = e.binlog_records().unwrap();
            assert!(recs[1].xid > recs[0].xid);
            drop(c);
            drop(e);
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn a_binlog_corrupt_before_valid_records_is_refused_on_open_and_left_as_it_was() {
        let (e, dir) = temp_engine("corrupt-middle");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "corrupt");
        c.insert_row("t", &row(11, 1)).unwrap();
        c.insert_row("t", &row(12, 1)).unwrap();
        drop(c);
        drop(e);
        let path = dir.join(BINLOG_FILE);
        let mut data = std::fs::read(&path).unwrap();
        // A byte of the first record's body (its header is the first line).
        let body = data.iter().position(|&b| b == b'\n').unwrap() + 2;
        data[body] ^= 1;
        std::fs::write(&path, &data).unwrap();
        let err = Engine::open(&EngineConfig {
            data_dir: dir.clone(),
            fsync_delay: Duration::ZERO,
            row_work: Duration::ZERO,
        })
        .err()
        .expect("refused");
        assert!(err.to_string().contains("corrupt"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), data, "nothing truncated");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_torn_binlog_tail_is_truncated_on_open_and_its_transaction_rolled_back() {
        let (e, dir) = temp_engine("torn");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "torn");
        c.insert_row("t", &row(11, 1)).unwrap();
        drop(c);
        drop(e);
        let good = std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len();
        // A crash after the prepare, with half of the binlog record written.
        assert!(crash_at(&dir, Failpoint::CrashAfterBinlog, 12, CommitMode::HoldSlot).is_err());
        let full = std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len();
        let f = OpenOptions::new()
            .write(true)
            .open(dir.join(BINLOG_FILE))
            .unwrap();
        f.set_len(good + (full - good) / 2).unwrap();
        drop(f);
        let e = open_at(&dir, 0);
        assert_eq!(e.recovery(), &recovered(0, 1, (full - good) / 2));
        assert_eq!(
            std::fs::metadata(dir.join(BINLOG_FILE)).unwrap().len(),
            good
        );
        assert!(e.contains("t", 11).unwrap() && !e.contains("t", 12).unwrap());
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "after");
        c.insert_row("t", &row(13, 1)).unwrap();
        let ids: Vec<u32> = e
            .binlog_records()
            .unwrap()
            .iter()
            .map(|r| r.changes[0].id)
            .collect();
        assert_eq!(ids, [11, 13], "appends follow the cut");
        drop(c);
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
