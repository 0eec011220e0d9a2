//! `timer`: MySQL 5.4's timer-based gate (seed 003, `srv_conc_enter_innodb_timer_based`).
//!
//! An atomic counter, no mutex, no queue: "use the OS scheduler to queue the threads". A thread
//! that finds the gate full yields once, then sleeps 10 ms at most twice, checking the counter
//! after each; after those three tries it enters without checking. A thread that holds locks
//! enters at once after its yield rather than sleep while others wait on its locks. Newcomers
//! can overtake waiters, and forced entries can push the count past the limit: the wait is
//! bounded, the limit is not.

use std::time::Duration;

use super::{Admission, AdmittedBy, Attempt, Hold, Step};
use crate::sync::{AtomicU32, Ordering};

/// The sleep between checks: 10 ms, "slept for 10 milliseconds twice at most" (seed 003).
pub const TIMER_SLEEP: Duration = Duration::from_millis(10);
/// Sleeps before entering regardless: two (seed 003; its author found one yield and two sleeps
/// optimal "at the first attempt").
pub const TIMER_MAX_SLEEPS: u32 = 2;

/// The shared state of `timer`. See the module documentation.
#[derive(Debug)]
pub struct TimerCore {
    inside: AtomicU32,
    limit: AtomicU32,
    tickets: u32,
}

impl TimerCore {
    /// A core with this limit and ticket allowance.
    pub fn new(limit: u32, tickets: u32) -> Self {
        TimerCore {
            inside: AtomicU32::new(0),
            limit: AtomicU32::new(limit),
            tickets,
        }
    }

    fn admission(&self, by: AdmittedBy, hold: Hold) -> Admission {
        Admission {
            by,
            hold,
            tickets: self.tickets,
        }
    }

    /// One try for a thread without tickets.
    #[inline]
    pub fn enter(&self, at: &mut Attempt) -> Step {
        if at.sleeping {
            at.sleeping = false;
            at.sleeps += 1;
        }
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == 0 {
            return Step::Admitted(self.admission(AdmittedBy::Unlimited, Hold::Uncounted));
        }
        if self.inside.load(Ordering::Relaxed) < limit {
            let n = self.inside.fetch_add(1, Ordering::AcqRel) + 1;
            if n <= limit {
                return Step::Admitted(self.admission(AdmittedBy::Free, Hold::Slot));
            }
            self.inside.fetch_sub(1, Ordering::AcqRel);
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
            self.inside.fetch_add(1, Ordering::AcqRel);
            return Step::Admitted(self.admission(AdmittedBy::Forced, Hold::Slot));
        }
        at.sleeping = true;
        Step::Sleep(TIMER_SLEEP)
    }

    /// Re-entry after a row-lock wait: counted inside without checking, one ticket (MySQL 5.4
    /// kept InnoDB's `srv_conc_force_enter_innodb`, with an atomic increment).
    pub fn enter_unchecked(&self) -> Admission {
        if self.limit.load(Ordering::Relaxed) == 0 {
            return Admission {
                by: AdmittedBy::Unlimited,
                hold: Hold::Uncounted,
                tickets: 1,
            };
        }
        self.inside.fetch_add(1, Ordering::AcqRel);
        Admission {
            by: AdmittedBy::Unchecked,
            hold: Hold::Slot,
            tickets: 1,
        }
    }

    /// A thread that was told to sleep gives up (cancelled, timed out).
    pub fn abandon(&self, at: &mut Attempt) {
        at.sleeping = false;
    }

    /// A thread leaves for real, giving back `hold`.
    #[inline]
    pub fn exit(&self, hold: Hold) {
        if hold == Hold::Slot {
            self.inside.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Changes the limit; sleepers see it at their next check.
    pub fn set_limit(&self, limit: u32) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Threads counted inside (forced entries included).
    pub fn inside(&self) -> u32 {
        self.inside.load(Ordering::Relaxed)
    }

    /// The current limit.
    pub fn limit(&self) -> u32 {
        self.limit.load(Ordering::Relaxed)
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
        assert!(matches!(
            c.enter(&mut Attempt::new(false)),
            Step::Admitted(_)
        ));
        let mut at = Attempt::new(false);
        assert_eq!(c.enter(&mut at), Step::Yield);
        c.exit(Hold::Slot);
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
