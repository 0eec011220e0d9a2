//! Row locks: exclusive locks on `(table, id)`, owned by a transaction until it commits or
//! rolls back, with InnoDB's immediate deadlock detection and lock wait timeout.
//!
//! A transaction waits for at most one lock at a time, so the wait-for graph is a set of
//! chains: following "the lock I wait for → its owner → the lock that owner waits for → …" from
//! the owner of the lock wanted either ends (no deadlock) or comes back to the requester (a
//! cycle). The requester that would close a cycle is the victim (InnoDB picks the lighter
//! transaction; ours is the one that asked last, which is also what a two-session test sees).

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A lock's key: table and primary key.
pub(crate) type Key = (String, u32);

/// Why a lock was not granted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Waiting would close a cycle in the wait-for graph.
    Deadlock,
    /// Held by another transaction (only from [`LockManager::try_lock`]).
    Busy,
    /// Not granted within the lock wait timeout.
    Timeout,
    /// The table is being rewritten by a bulk operation ([`LockManager::fence`]).
    Fenced,
}

#[derive(Default)]
struct Table {
    owners: HashMap<Key, u64>,
    waits: HashMap<u64, Key>,
    /// Tables a bulk operation is rewriting: no row lock is granted on them meanwhile.
    fenced: HashSet<String>,
}

impl Table {
    /// Whether `txn` waiting for `key` would close a cycle.
    fn closes_cycle(&self, txn: u64, key: &Key) -> bool {
        let mut owner = self.owners.get(key).copied();
        // Each step visits a distinct waiting transaction unless a cycle not through `txn`
        // exists, which cannot (whoever closed it would have been refused); the bound is a
        // guard, not a case.
        for _ in 0..=self.waits.len() {
            match owner {
                None => return false,
                Some(o) if o == txn => return true,
                Some(o) => owner = self.waits.get(&o).and_then(|k| self.owners.get(k).copied()),
            }
        }
        false
    }
}

/// The lock table.
#[derive(Default)]
pub(crate) struct LockManager {
    table: Mutex<Table>,
    released: Condvar,
}

impl LockManager {
    /// Takes `key` for `txn` if it is free or already `txn`'s; `Busy` or `Deadlock` otherwise
    /// (`Deadlock` without waiting when waiting would close a cycle).
    pub(crate) fn try_lock(&self, txn: u64, key: &Key) -> Result<(), Refused> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if t.fenced.contains(&key.0) {
            return Err(Refused::Fenced);
        }
        match t.owners.get(key) {
            None => {
                t.owners.insert(key.clone(), txn);
                Ok(())
            }
            Some(&o) if o == txn => Ok(()),
            Some(_) if t.closes_cycle(txn, key) => Err(Refused::Deadlock),
            Some(_) => Err(Refused::Busy),
        }
    }

    /// Waits until `key` is granted to `txn`, the wait would deadlock, or `timeout` passes.
    pub(crate) fn lock(&self, txn: u64, key: &Key, timeout: Duration) -> Result<(), Refused> {
        let deadline = Instant::now().checked_add(timeout);
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if t.fenced.contains(&key.0) {
                t.waits.remove(&txn);
                return Err(Refused::Fenced);
            }
            match t.owners.get(key) {
                None => {
                    t.waits.remove(&txn);
                    t.owners.insert(key.clone(), txn);
                    return Ok(());
                }
                Some(&o) if o == txn => {
                    t.waits.remove(&txn);
                    return Ok(());
                }
                Some(_) => {}
            }
            if t.closes_cycle(txn, key) {
                t.waits.remove(&txn);
                return Err(Refused::Deadlock);
            }
            t.waits.insert(txn, key.clone());
            let left = match deadline {
                // A timeout too long for `Instant` never expires: wake hourly to look again.
                None => Duration::from_secs(3600),
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => {
                        t.waits.remove(&txn);
                        return Err(Refused::Timeout);
                    }
                },
            };
            t = self
                .released
                .wait_timeout(t, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Releases every lock in `keys` owned by `txn`.
    pub(crate) fn release(&self, txn: u64, keys: &[Key]) {
        if keys.is_empty() {
            return;
        }
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        for k in keys {
            if t.owners.get(k) == Some(&txn) {
                t.owners.remove(k);
            }
        }
        drop(t);
        self.released.notify_all();
    }

    /// Runs `f` while no transaction holds a lock on a row of `table` and none can take one
    /// (the lock table stays locked during `f`): `None`, without running `f`, if one holds a
    /// lock there. DDL uses it as MySQL uses metadata locks: a table with uncommitted changes is
    /// not dropped under them.
    pub(crate) fn while_table_unlocked<R>(&self, table: &str, f: impl FnOnce() -> R) -> Option<R> {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if t.fenced.contains(table) || t.owners.keys().any(|(name, _)| name == table) {
            return None;
        }
        let r = f();
        drop(t);
        Some(r)
    }

    /// Fences `table` off for a bulk operation (a load, a truncation): until the returned
    /// guard is dropped, no row lock is granted on it (`Fenced`: writers are refused rather
    /// than made to wait for a load), and [`LockManager::while_table_unlocked`] refuses it.
    /// `None` if a transaction holds a lock on one of its rows (uncommitted changes a bulk
    /// rewrite would race with) or it is already fenced. Unlike `while_table_unlocked` it
    /// does not keep the lock table locked while the operation runs.
    pub(crate) fn fence<'a>(&'a self, table: &str) -> Option<Fence<'a>> {
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if t.fenced.contains(table) || t.owners.keys().any(|(name, _)| name == table) {
            return None;
        }
        t.fenced.insert(table.to_string());
        Some(Fence {
            locks: self,
            table: table.to_string(),
        })
    }

    /// Whether `table` is fenced off now.
    pub(crate) fn is_fenced(&self, table: &str) -> bool {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .fenced
            .contains(table)
    }

    /// Locks held right now (for checks).
    pub(crate) fn held(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .owners
            .len()
    }
}

/// See [`LockManager::fence`]: the table is open to row locks again when this is dropped
/// (also by a panic or an error in the bulk operation).
pub(crate) struct Fence<'a> {
    locks: &'a LockManager,
    table: String,
}

impl Drop for Fence<'_> {
    fn drop(&mut self) {
        let mut t = self.locks.table.lock().unwrap_or_else(|p| p.into_inner());
        t.fenced.remove(&self.table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(id: u32) -> Key {
        ("t".to_string(), id)
    }

    #[test]
    fn a_cycle_of_three_is_refused_to_the_transaction_closing_it() {
        let m = LockManager::default();
        m.try_lock(1, &k(1)).unwrap();
        m.try_lock(2, &k(2)).unwrap();
        m.try_lock(3, &k(3)).unwrap();
        {
            let mut t = m.table.lock().unwrap();
            t.waits.insert(1, k(2)); // 1 waits for 2
            t.waits.insert(2, k(3)); // 2 waits for 3
        }
        assert_eq!(m.try_lock(3, &k(1)), Err(Refused::Deadlock));
        assert_eq!(m.try_lock(4, &k(1)), Err(Refused::Busy));
        assert_eq!(m.try_lock(1, &k(1)), Ok(()), "re-entrant");
        assert_eq!(
            m.lock(4, &k(1), Duration::from_millis(1)),
            Err(Refused::Timeout)
        );
        m.release(1, &[k(1)]);
        assert_eq!(m.lock(4, &k(1), Duration::from_millis(1)), Ok(()));
        assert_eq!(m.held(), 3);
    }
}
