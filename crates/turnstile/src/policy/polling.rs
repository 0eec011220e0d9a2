//! `polling`: InnoDB 5.6–8.0's lock-free gate (`srv_conc_enter_innodb_with_atomics`).
//!
//! No mutex and no queue: an atomic count of threads inside and one of threads waiting. Enter:
//! an optimistic read of the count; if there is room, `fetch_add` and check the result; if
//! that overshot, `fetch_sub` and fall through. A thread that did not get in registers as a
//! waiter once, sleeps the shared sleep delay, and polls again. Ordering is not guaranteed: a
//! newcomer can overtake a sleeper.
//!
//! Adaptive sleep delay (when `adaptive_max_sleep_delay` > 0), exactly as InnoDB 5.6:
//! * every sleep after a thread's first adds 1 µs to the shared delay;
//! * a thread admitted after exactly one sleep takes 1 µs off (only while the delay is > 20 µs);
//! * an admission that finds no waiters halves the delay;
//! * the delay used is capped at the maximum (and the shared value clamped to it).
//!
//! These updates are plain loads and stores, not read-modify-writes, as in InnoDB: the delay is
//! a hint, and a lost update only makes it a microsecond off.
//!
//! After a row-lock wait a thread re-enters through [`PollingCore::enter_unchecked`]: counted
//! inside without checking the limit, with one ticket (`srv_conc_force_enter_innodb`).

use std::time::Duration;

use super::slots::AtomicSlots;
use super::{Admission, Attempt, Hold, HoldKind, Step};
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The floor below which a post-single-sleep admission no longer shortens the adaptive delay:
/// InnoDB 5.6 `if (srv_thread_sleep_delay > 20 && n_sleeps == 1) --srv_thread_sleep_delay`.
pub const ADAPTIVE_FLOOR_US: u64 = 20;

/// The shared state of `polling`. See the module documentation.
#[derive(Debug)]
pub struct PollingCore {
    slots: AtomicSlots,
    waiting: AtomicU32,
    delay_us: AtomicU64,
    max_delay_us: u64,
    tickets: u32,
}

impl PollingCore {
    /// A core with a starting sleep delay and an adaptive maximum (zero = not adaptive).
    pub fn new(limit: u32, tickets: u32, sleep_delay: Duration, adaptive_max: Duration) -> Self {
        PollingCore {
            slots: AtomicSlots::new(limit),
            waiting: AtomicU32::new(0),
            delay_us: AtomicU64::new(sleep_delay.as_micros() as u64),
            max_delay_us: adaptive_max.as_micros() as u64,
            tickets,
        }
    }

    fn adaptive(&self) -> bool {
        self.max_delay_us > 0
    }

    /// One poll for a thread without tickets: admitted, or told how long to sleep.
    #[inline]
    pub fn enter(&self, at: &mut Attempt) -> Step {
        // A whole sleep (not cut short by a raise) past the first lengthens the delay.
        if at.sleeping && at.end_sleep() && self.adaptive() && at.sleeps > 1 {
            let d = self.delay_us.load(Ordering::Relaxed);
            self.delay_us.store(d + 1, Ordering::Relaxed);
        }
        if let Some(by) = self.slots.try_take() {
            self.stop_waiting(at);
            if self.adaptive() {
                self.adapt_on_admission(at);
            }
            return Step::Admitted(Admission::new(by, HoldKind::Slot, self.tickets));
        }
        self.slow_sleep(at)
    }

    #[cold]
    fn slow_sleep(&self, at: &mut Attempt) -> Step {
        if !at.notified {
            at.notified = true;
            self.waiting.fetch_add(1, Ordering::AcqRel);
        }
        let mut us = self.delay_us.load(Ordering::Relaxed);
        if self.adaptive() && us > self.max_delay_us {
            us = self.max_delay_us;
            self.delay_us.store(us, Ordering::Relaxed);
        }
        at.sleeping = true;
        Step::Sleep(Duration::from_micros(us))
    }

    #[inline]
    fn adapt_on_admission(&self, at: &Attempt) {
        if at.sleeps == 1 {
            let d = self.delay_us.load(Ordering::Relaxed);
            if d > ADAPTIVE_FLOOR_US {
                self.delay_us.store(d - 1, Ordering::Relaxed);
            }
        }
        if self.waiting.load(Ordering::Relaxed) == 0 {
            let d = self.delay_us.load(Ordering::Relaxed);
            // Skip the store when it changes nothing, so the uncontended path does not write a
            // shared cache line on every admission.
            if d != 0 {
                self.delay_us.store(d >> 1, Ordering::Relaxed);
            }
        }
    }

    #[inline]
    fn stop_waiting(&self, at: &mut Attempt) {
        if at.notified {
            at.notified = false;
            let before = self.waiting.fetch_sub(1, Ordering::AcqRel);
            debug_assert!(before > 0, "polling: waiters below zero");
        }
    }

    /// Re-entry after a row-lock wait: counted inside without checking the limit, one ticket.
    pub fn enter_unchecked(&self) -> Admission {
        self.slots.force_take();
        Admission::unchecked()
    }

    /// A thread that was told to sleep gives up (cancelled, timed out).
    pub fn abandon(&self, at: &mut Attempt) {
        at.sleeping = false;
        self.stop_waiting(at);
    }

    /// A thread leaves for real, giving back `hold`.
    #[inline]
    pub fn exit(&self, hold: Hold) {
        self.slots.exit(hold.kind());
    }

    /// Changes the limit; sleepers see it at their next poll. Once this returns, no newcomer
    /// is admitted beyond the new limit (see `slots.rs`).
    ///
    /// Returns the limit it replaced.
    pub fn set_limit(&self, limit: u32) -> u32 {
        self.slots.set_limit(limit)
    }

    /// Threads counted inside (may transiently exceed the limit by threads mid-check).
    pub fn inside(&self) -> u32 {
        self.slots.inside()
    }

    /// Threads sleeping between polls.
    pub fn waiting(&self) -> u32 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The current shared sleep delay.
    pub fn sleep_delay(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// The current limit.
    pub fn limit(&self) -> u32 {
        self.slots.limit()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::AdmittedBy;

    fn admitted(step: Step) -> Admission {
        match step {
            Step::Admitted(a) => a,
            other => panic!("expected an admission, got {other:?}"),
        }
    }

    fn core(limit: u32, delay_us: u64, max_us: u64) -> PollingCore {
        PollingCore::new(
            limit,
            500,
            Duration::from_micros(delay_us),
            Duration::from_micros(max_us),
        )
    }

    fn sleep_us(step: Step) -> u64 {
        match step {
            Step::Sleep(d) => d.as_micros() as u64,
            other => panic!("expected a sleep, got {other:?}"),
        }
    }

    #[test]
    fn admits_up_to_the_limit_then_tells_the_thread_to_sleep_and_poll() {
        let c = core(2, 10_000, 0);
        let holders: Vec<Admission> = (0..2)
            .map(|_| admitted(c.enter(&mut Attempt::new(false))))
            .collect();
        let mut at = Attempt::new(false);
        assert_eq!(sleep_us(c.enter(&mut at)), 10_000);
        assert_eq!((c.inside(), c.waiting()), (2, 1));
        assert_eq!(sleep_us(c.enter(&mut at)), 10_000);
        assert_eq!(c.waiting(), 1, "a thread registers as a waiter once");
        let [first, _second] = <[Admission; 2]>::try_from(holders).unwrap();
        c.exit(first.hold);
        let Step::Admitted(a) = c.enter(&mut at) else {
            panic!("room after an exit")
        };
        assert_eq!((a.by, a.tickets), (AdmittedBy::Free, 500));
        assert_eq!((c.inside(), c.waiting(), at.sleeps()), (2, 0, 2));
    }

    #[test]
    fn adaptive_delay_grows_per_extra_sleep_and_shrinks_after_single_sleep_admissions() {
        let c = core(1, 100, 150_000);
        let mut holder = Attempt::new(false);
        let held = admitted(c.enter(&mut holder));
        // The delay was halved on that admission (no waiters): 100 -> 50.
        assert_eq!(c.sleep_delay().as_micros(), 50);
        let mut a = Attempt::new(false);
        assert_eq!(sleep_us(c.enter(&mut a)), 50);
        assert_eq!(sleep_us(c.enter(&mut a)), 50, "first sleep adds nothing");
        assert_eq!(sleep_us(c.enter(&mut a)), 51, "second sleep adds 1 µs");
        assert_eq!(sleep_us(c.enter(&mut a)), 52);
        // A second waiter, admitted after exactly one sleep, takes 1 µs off.
        let mut b = Attempt::new(false);
        assert_eq!(sleep_us(c.enter(&mut b)), 52);
        c.exit(held.hold);
        assert!(matches!(c.enter(&mut b), Step::Admitted(_)));
        // 52 - 1 = 51; another waiter (a) still waits, so no halving.
        assert_eq!(c.sleep_delay().as_micros(), 51);
    }

    #[test]
    fn a_sleep_cut_short_by_a_raise_neither_counts_nor_lengthens_the_delay() {
        let c = core(1, 100, 150_000);
        let _held = admitted(c.enter(&mut Attempt::new(false)));
        let mut a = Attempt::new(false);
        assert_eq!(sleep_us(c.enter(&mut a)), 50);
        for _ in 0..3 {
            a.sleep_cut_short();
            assert_eq!(sleep_us(c.enter(&mut a)), 50);
        }
        assert_eq!(a.sleeps(), 0);
        // Whole sleeps count again: the second adds 1 µs.
        assert_eq!(sleep_us(c.enter(&mut a)), 50);
        assert_eq!(sleep_us(c.enter(&mut a)), 51);
        assert_eq!(a.sleeps(), 2);
    }

    #[test]
    fn adaptive_delay_is_capped_at_the_maximum() {
        let c = core(1, 500, 300);
        assert!(matches!(
            c.enter(&mut Attempt::new(true)),
            Step::Admitted(_)
        ));
        // Halved to 250 by that admission; raise it past the cap through sleeps.
        let mut a = Attempt::new(false);
        let mut last = 0;
        for _ in 0..100 {
            last = sleep_us(c.enter(&mut a));
        }
        assert_eq!(last, 300);
        assert!(c.sleep_delay().as_micros() <= 301);
    }

    #[test]
    fn unchecked_reentry_ignores_the_limit_and_grants_one_ticket() {
        let c = core(1, 10, 0);
        assert!(matches!(
            c.enter(&mut Attempt::new(false)),
            Step::Admitted(_)
        ));
        let a = c.enter_unchecked();
        assert_eq!((a.by, a.tickets, c.inside()), (AdmittedBy::Unchecked, 1, 2));
    }

    #[test]
    fn abandoning_a_sleep_unregisters_the_waiter() {
        let c = core(1, 10, 0);
        assert!(matches!(
            c.enter(&mut Attempt::new(false)),
            Step::Admitted(_)
        ));
        let mut a = Attempt::new(false);
        sleep_us(c.enter(&mut a));
        c.abandon(&mut a);
        assert_eq!(c.waiting(), 0);
    }
}
