//! The atomic slot count that `polling` and `timer` share: threads inside and the limit, no
//! mutex, no queue.
//!
//! # Why the limit is read again after the increment
//!
//! An admission increments `inside` and then decides with the limit it reads *after* the
//! increment (the limit store, the increment and that load are `SeqCst`). If that load returns
//! an older limit than a concurrent [`AtomicSlots::set_limit`] stores, the single total order
//! puts the increment before the store: the thread was inside before the change took effect,
//! like one that had entered a moment earlier, and is counted in `inside` for everyone who
//! looks after `set_limit` returns. So once `set_limit(n)` has returned, no thread is admitted
//! unless its own increment left `inside` at most `n`: a lowered limit or a limit set after a
//! spell of 0 (unlimited, but still counted) is never overshot by newcomers. Those already
//! inside are never evicted. On x86 the `SeqCst` increment is the same `lock xadd` and the load
//! a plain `mov`; only `set_limit` pays (an `xchg`).

use super::{AdmittedBy, HoldKind};
use crate::sync::{AtomicU32, Ordering};

#[derive(Debug)]
pub(crate) struct AtomicSlots {
    inside: AtomicU32,
    limit: AtomicU32,
}

impl AtomicSlots {
    pub(crate) fn new(limit: u32) -> Self {
        AtomicSlots {
            inside: AtomicU32::new(0),
            limit: AtomicU32::new(limit),
        }
    }

    /// Takes a slot if one is free (or the limit is 0: counted, not limited). `None`: full.
    #[inline]
    pub(crate) fn try_take(&self) -> Option<AdmittedBy> {
        // An optimistic look first, as InnoDB does: a full gate costs no read-modify-write.
        let limit = self.limit.load(Ordering::Relaxed);
        if limit != 0 && self.inside.load(Ordering::Relaxed) >= limit {
            return None;
        }
        self.try_take_checked()
    }

    /// [`Self::try_take`] without the optimistic look: the increment always happens, so a
    /// `SeqCst` store another thread made before it (`auto`'s queued count) is ordered with it.
    #[inline]
    pub(crate) fn try_take_checked(&self) -> Option<AdmittedBy> {
        let n = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        match self.limit.load(Ordering::SeqCst) {
            0 => Some(AdmittedBy::Unlimited),
            limit if n <= limit => Some(AdmittedBy::Free),
            _ => {
                self.give_back();
                None
            }
        }
    }

    /// Counts a thread inside without checking the limit (forced and unchecked entries).
    pub(crate) fn force_take(&self) {
        self.inside.fetch_add(1, Ordering::SeqCst);
    }

    /// Gives back a slot taken by [`Self::try_take`] or [`Self::force_take`]. `SeqCst`: `auto`
    /// reads its queued count after this (its "no lost wake-up" argument); on x86 it is the
    /// same `lock xadd` as `AcqRel`.
    #[inline]
    pub(crate) fn give_back(&self) {
        let before = self.inside.fetch_sub(1, Ordering::SeqCst);
        if before == 0 {
            self.inside.fetch_add(1, Ordering::AcqRel);
            panic!("turnstile: threads inside would go below zero (a slot given back twice)");
        }
    }

    /// Gives back what `hold` counted.
    #[inline]
    pub(crate) fn exit(&self, hold: HoldKind) {
        if hold == HoldKind::Slot {
            self.give_back();
        }
    }

    /// Stores the new limit and returns the one it replaced.
    pub(crate) fn set_limit(&self, limit: u32) -> u32 {
        self.limit.swap(limit, Ordering::SeqCst)
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
    }

    pub(crate) fn inside(&self) -> u32 {
        self.inside.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_slot_given_back_twice_panics_and_leaves_the_count_at_zero() {
        let slots = AtomicSlots::new(1);
        assert_eq!(slots.try_take(), Some(AdmittedBy::Free));
        slots.give_back();
        let twice = std::panic::catch_unwind(|| slots.give_back());
        assert!(twice.is_err(), "a second give-back is a bug, reported");
        assert_eq!(slots.inside(), 0, "not wrapped to u32::MAX");
        assert_eq!(
            slots.try_take(),
            Some(AdmittedBy::Free),
            "the gate still admits"
        );
    }

    #[test]
    fn a_limit_of_zero_admits_and_still_counts() {
        let slots = AtomicSlots::new(0);
        assert_eq!(slots.try_take(), Some(AdmittedBy::Unlimited));
        assert_eq!(slots.try_take(), Some(AdmittedBy::Unlimited));
        assert_eq!(slots.inside(), 2);
        assert_eq!(slots.set_limit(1), 0);
        assert_eq!(slots.try_take(), None, "two inside, limit 1");
    }
}
