//! Transactions: a connection's open transaction ([`Txn`]) buffers its writes in a write set, by
//! table and primary key, and holds the lock of every row it wrote until it ends. No redb
//! transaction is held across client round trips (redb has one writer), so the transaction's
//! reads merge the committed rows with its write set ([`Merged`]) to see its own writes. Each
//! change records whether a committed row had its key, so that commit logs an insert or an
//! update, and a delete of a row inserted by the same transaction leaves nothing. A
//! [`Savepoint`] is a copy of the write set; row locks are not part of it.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::binlog::Op;
use crate::error::Result;
use crate::locks::Key;
use crate::schema::Row;
use crate::Engine;

/// A transaction's write set at one point
/// ([`Connection::savepoint`](crate::Connection::savepoint)).
#[derive(Debug, Clone)]
pub struct Savepoint(pub(crate) HashMap<String, BTreeMap<u32, Change>>);

/// One change in a write set.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// The row after the change; `op` is [`Op::Insert`] when no committed row had its key.
    Put { row: Row, op: Op },
    /// The committed row is deleted.
    Delete,
}

/// A connection's open transaction: its write set and row locks.
#[derive(Default)]
pub(crate) struct Txn {
    /// `BEGIN` was called (otherwise each write is its own autocommit transaction).
    pub(crate) explicit: bool,
    /// The lock owner id (0 until the first write).
    pub(crate) id: u64,
    /// Changes by table, by primary key.
    pub(crate) writes: HashMap<String, BTreeMap<u32, Change>>,
    /// Row locks held.
    pub(crate) locks: HashSet<Key>,
}

impl Txn {
    pub(crate) fn has_changes(&self) -> bool {
        self.writes.values().any(|w| !w.is_empty())
    }

    /// Releases the locks and forgets the transaction.
    pub(crate) fn finish(&mut self, engine: &Engine) {
        if !self.locks.is_empty() {
            let keys: Vec<Key> = self.locks.drain().collect();
            engine.locks.release(self.id, &keys);
        }
        self.writes.clear();
        self.explicit = false;
        self.id = 0;
    }
}

/// Reads merged with a write set: committed rows by key, with the write set's rows put over
/// them and its deletes taken out.
pub(crate) struct Merged<'w, I: Iterator<Item = Result<Row>>> {
    pub(crate) base: std::iter::Peekable<I>,
    pub(crate) over: std::iter::Peekable<std::collections::btree_map::Range<'w, u32, Change>>,
}

impl<I: Iterator<Item = Result<Row>>> Iterator for Merged<'_, I> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Result<Row>> {
        loop {
            let b = match self.base.peek() {
                Some(Ok(r)) => Some(r.id),
                Some(Err(_)) => return self.base.next(),
                None => None,
            };
            let o = self.over.peek().map(|(id, _)| **id);
            match (b, o) {
                (None, None) => return None,
                (Some(_), None) => return self.base.next(),
                (Some(bi), Some(oi)) if bi < oi => return self.base.next(),
                (bi, Some(oi)) => {
                    if bi == Some(oi) {
                        self.base.next();
                    }
                    if let Some((_, Change::Put { row, .. })) = self.over.next() {
                        return Some(Ok(row.clone()));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tests::{gate, row, temp_engine};
    use crate::Connection;

    #[test]
    fn a_transaction_reads_its_own_writes_in_point_and_range_reads_and_others_do_not() {
        let (e, dir) = temp_engine("own");
        e.ensure_table("t", 10, &mut |_, _| {}).unwrap();
        let g = gate(500);
        let mut c = Connection::new(e.clone(), &g, "writer");
        let mut other = Connection::new(e.clone(), &g, "reader");
        c.begin_transaction().unwrap();
        c.insert_row("t", &row(11, 7)).unwrap();
        c.insert_row("t", &row(0, 7)).unwrap();
        assert_eq!(c.update_row("t", 3, |r| r.k = 999).unwrap(), 1);
        assert_eq!(c.update_row("t", 3, |r| r.k = 999).unwrap(), 0, "unchanged");
        assert_eq!(c.update_row("t", 42, |r| r.k = 1).unwrap(), 0, "missing");
        assert_eq!(c.delete_row("t", 5).unwrap(), 1);
        assert_eq!(c.delete_row("t", 5).unwrap(), 0);
        assert_eq!(c.point_select("t", 3).unwrap().unwrap().k, 999);
        assert!(c.point_select("t", 5).unwrap().is_none());
        assert_eq!(c.point_select("t", 11).unwrap().unwrap().k, 7);
        let mut ids = Vec::new();
        c.scan("t", 0, 100, |r| ids.push(r.id)).unwrap();
        assert_eq!(ids, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]);
        let mut ks = Vec::new();
        c.scan_sent("t", 2, 4, |r| ks.push(r.k)).unwrap();
        assert_eq!(ks[1], 999);
        assert_eq!(c.count("t").unwrap(), 11);
        assert_eq!(c.range_sorted_by_c("t", 4, 6, false).unwrap().len(), 2);
        // Another connection sees only committed data.
        assert_eq!(other.count("t").unwrap(), 10);
        assert_ne!(other.point_select("t", 3).unwrap().unwrap().k, 999);
        c.commit().unwrap();
        assert_eq!(other.count("t").unwrap(), 11);
        assert_eq!(other.point_select("t", 3).unwrap().unwrap().k, 999);
        assert_eq!(e.index_ids_direct("t").unwrap(), e.ids_direct("t").unwrap());
        drop((c, other));
        drop(e);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
