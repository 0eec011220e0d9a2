//! `timer`: MySQL 5.4's timer-based gate (seed 003, `srv_conc_enter_innodb_timer_based`).
//!
//! An atomic counter, no mutex, no queue: "use the OS scheduler to queue the threads". A thread
//! that finds the gate full yields once, then sleeps 10 ms at most twice, checking the counter
//! after each; after those three tries it enters without checking. A thread that holds locks
//! enters at once after its yield rather than sleep while others wait on its locks. Newcomers
//! can overtake waiters, and forced entries can push the count past the limit: the wait is
//! bounded, the limit is not.

use std::time::Duration;

use super::slots::AtomicSlots;
use super::{Admission, AdmittedBy, Attempt, Hold, HoldKind, Step};
use crate::sync::{AtomicU32, Ordering};

/// The sleep between checks: 10 ms, "slept for 10 milliseconds twice at most" (seed 003).
pub const TIMER_SLEEP: Duration = Duration::from_millis(10);
/// Sleeps before entering regardless: two (seed 003; its author found one yield and two sleeps
/// optimal "at the first attempt").
pub const TIMER_MAX_SLEEPS: u32 = 2;

/// The shared state of `timer`. See the module documentation.
#[derive(Debug)]
pub struct TimerCore {
    slots: AtomicSlots,
    /// Threads told to sleep and not yet back (a gauge for monitoring).
    sleeping: AtomicU32,
    tickets: u32,
}

impl TimerCore {
    /// A core with this limit and ticket allowance.
    pub fn new(limit: u32, tickets: u32) -> Self {
        TimerCore {
            slots: AtomicSlots::new(limit),
            sleeping: AtomicU32::new(0),
            tickets,
        }
    }

    fn woke(&self, at: &mut Attempt) {
        if at.sleeping {
            at.sleeping = false;
            self.sleeping.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// One try for a thread without tickets.
    #[inline]
    pub fn enter(&self, at: &mut Attempt) -> Step {
        if at.sleeping {
            self.sleeping.fetch_sub(1, Ordering::Relaxed);
            at.end_sleep();
        }
        if let Some(by) = self.slots.try_take() {
            return Step::Admitted(Admission::new(by, HoldKind::Slot, self.tickets));
        }
        self.slow(at)
    }

    #[cold]
    fn slow(&self, at: &mut Attempt) -> Step {
        if !at.yielded {
            at.yielded = true;
            return Step::Yield;
        }
        if at.holds_locks || at.sleeps >= TIMER_MAX_SLEEPS {
            self.slots.force_take();
            return Step::Admitted(Admission::new(
                AdmittedBy::Forced,
                HoldKind::Slot,
                self.tickets,
            ));
        }
        at.sleeping = true;
        self.sleeping.fetch_add(1, Ordering::Relaxed);
        Step::Sleep(TIMER_SLEEP)
    }

    /// Re-entry after a row-lock wait: counted inside without checking, one ticket (MySQL 5.4
    /// kept InnoDB's `srv_conc_force_enter_innodb`, with an atomic increment).
    pub fn enter_unchecked(&self) -> Admission {
        self.slots.force_take();
        Admission::unchecked()
    }

    /// A thread that was told to sleep gives up (cancelled, timed out).
    pub fn abandon(&self, at: &mut Attempt) {
        self.woke(at);
    }

    /// A thread leaves for real, giving back `hold`.
    #[inline]
    pub fn exit(&self, hold: Hold) {
        self.slots.exit(hold.kind());
    }

    /// Changes the limit; sleepers see it at their next check. Once this returns, no newcomer
    /// is admitted by the check beyond the new limit (see `slots.rs`); forced entries still
    /// are, by design.
    ///
    /// Returns the limit it replaced.
    pub fn set_limit(&self, limit: u32) -> u32 {
        self.slots.set_limit(limit)
    }

    /// Threads told to sleep between checks and not yet back.
    pub fn sleeping(&self) -> u32 {
        self.sleeping.load(Ordering::Relaxed)
    }

    /// Threads counted inside (forced entries included).
    pub fn inside(&self) -> u32 {
        self.slots.inside()
    }

    /// The current limit.
    pub fn limit(&self) -> u32 {
        self.slots.limit()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_finding_the_gate_full_yields_sleeps_twice_then_enters_regardless() {
        let c = TimerCore::new(1, 500);
        assert!(matches!(
            c.enter(&mut Attempt::new(false)),
            Step::Admitted(_)
        ));
        let mut at = Attempt::new(false);
        assert_eq!(c.enter(&mut at), Step::Yield);
        assert_eq!(c.enter(&mut at), Step::Sleep(TIMER_SLEEP));
        assert_eq!(c.enter(&mut at), Step::Sleep(TIMER_SLEEP));
        let Step::Admitted(a) = c.enter(&mut at) else {
            panic!("third try must enter")
        };
        assert_eq!((a.by, a.tickets), (AdmittedBy::Forced, 500));
        assert_eq!(c.inside(), 2, "a forced entry overshoots the limit");
    }

    #[test]
    fn a_sleep_cut_short_by_a_raise_does_not_count_towards_the_forced_entry() {
        let c = TimerCore::new(1, 500);
        assert!(matches!(
            c.enter(&mut Attempt::new(false)),
            Step::Admitted(_)
        ));
        let mut at = Attempt::new(false);
        assert_eq!(c.enter(&mut at), Step::Yield);
        // Two sleeps woken early by raises whose slot another thread took, then two whole
        // ones: the forced entry comes after the whole ones only.
        let mut steps = Vec::new();
        for cut in [true, true, false, false, false] {
            steps.push(c.enter(&mut at));
            if cut {
                at.sleep_cut_short();
            }
        }
        assert!(
            steps[..4].iter().all(|s| *s == Step::Sleep(TIMER_SLEEP)),
            "{steps:?}"
        );
        assert!(matches!(
            steps[4],
            Step::Admitted(Admission {
                by: AdmittedBy::Forced,
                ..
            })
        ));
        assert_eq!((at.sleeps(), c.sleeping()), (2, 0));
    }

    #[test]
    fn a_thread_holding_locks_enters_right_after_its_yield() {
        let c = TimerCore::new(1, 500);
        assert!(matches!(
            c.enter(&mut Attempt::new(false)),
            Step::Admitted(_)
        ));
        let mut at = Attempt::new(true);
        assert_eq!(c.enter(&mut at), Step::Yield);
        assert!(matches!(
            c.enter(&mut at),
            Step::Admitted(Admission {
                by: AdmittedBy::Forced,
                ..
            })
        ));
    }

    #[test]
    fn a_freed_slot_is_taken_at_the_next_check() {
        let c = TimerCore::new(1, 500);
        let Step::Admitted(held) = c.enter(&mut Attempt::new(false)) else {
            panic!("the gate is empty")
        };
        let mut at = Attempt::new(false);
        assert_eq!(c.enter(&mut at), Step::Yield);
        c.exit(held.hold);
        assert!(matches!(
            c.enter(&mut at),
            Step::Admitted(Admission {
                by: AdmittedBy::Free,
                ..
            })
        ));
        assert_eq!(c.inside(), 1);
    }
}
