//! `classic` (InnoDB 5.0–5.5) and `flifo` (`innodb_thread_lifo`, seed 001): a count of threads
//! inside and a FIFO of wait slots, guarded by one mutex that the driver holds around every call.
//!
//! The algorithm, as `srv_conc_enter_innodb` / `srv_conc_force_exit_innodb` in InnoDB 5.5:
//!
//! * **Enter** (a thread without tickets). If fewer than `limit` threads are inside, count it
//!   inside and grant the full ticket allowance. Otherwise, once per enter and only if the
//!   thread holds no locks, sleep `sleep_delay` "before joining the queue" and retry. Otherwise
//!   append a slot to the FIFO and wait on it.
//! * **Exit** (tickets exhausted, or forced). Count the thread out. If that leaves room, take
//!   the first slot whose wait has not already been ended, mark it ended, count its thread
//!   inside *on its behalf*, and signal it. The woken thread removes its slot when it runs.
//!   Because the slot is counted before the signal, no newcomer can take it.
//! * **FLIFO** adds `fifo_pending` (threads released by a hand-off that have not yet begun to
//!   run) and `lifo_running` (threads running by the LIFO rule). A thread the FIFO rule would
//!   queue is admitted at once while `lifo_running < fifo_pending`, so a slot does not sit idle
//!   for the length of a wake-up. LIFO threads do not take one of the limit's slots; at most
//!   `limit` more can run, hence the 2 × limit bound.
//!
//! A sleep delay of zero skips the sleep (InnoDB tests `SRV_THREAD_SLEEP_DELAY > 0`); the thread
//! then queues at once, as the seed 001 FLIFO configuration (`innodb_thread_sleep_delay=0`) does.

use std::collections::VecDeque;
use std::time::Duration;

use super::{dec, Admission, AdmittedBy, Attempt, Hold, HoldKind, Step, WaitId};

/// A waiter released by an exit or a limit change: signal it (after dropping the lock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release<W> {
    /// The handle the waiter was queued with.
    pub waiter: W,
    /// The wait this release ends.
    pub id: WaitId,
}

#[derive(Debug)]
struct Slot<W> {
    id: WaitId,
    waiter: W,
    /// InnoDB's `wait_ended`: a hand-off already chose this slot.
    released: bool,
}

/// The shared state of `classic` and `flifo`. See the module documentation.
#[derive(Debug)]
pub struct QueueCore<W> {
    limit: u32,
    tickets: u32,
    sleep_delay: Duration,
    lifo: bool,
    inside: u32,
    sleeping: u32,
    queue: VecDeque<Slot<W>>,
    /// Slots in `queue` not yet released.
    queued: u32,
    fifo_pending: u32,
    lifo_running: u32,
    next_id: u64,
}

impl<W: Clone> QueueCore<W> {
    /// A core for `classic` (`lifo == false`) or `flifo` (`lifo == true`).
    pub fn new(limit: u32, tickets: u32, sleep_delay: Duration, lifo: bool) -> Self {
        QueueCore {
            limit,
            tickets,
            sleep_delay,
            lifo,
            inside: 0,
            sleeping: 0,
            queue: VecDeque::new(),
            queued: 0,
            fifo_pending: 0,
            lifo_running: 0,
            next_id: 0,
        }
    }

    fn admission(&self, by: AdmittedBy, hold: HoldKind) -> Admission {
        Admission::new(by, hold, self.tickets)
    }

    /// One decision for a thread without tickets. `waiter` is cloned into the queue if the
    /// thread must wait.
    pub fn enter(&mut self, at: &mut Attempt, waiter: &W) -> Step {
        if at.sleeping {
            at.end_sleep();
            dec(&mut self.sleeping, "queue: sleepers");
        }
        if self.limit == 0 {
            // Counted though not limited, so that a limit set later sees this thread.
            self.inside += 1;
            return Step::Admitted(self.admission(AdmittedBy::Unlimited, HoldKind::Slot));
        }
        if self.inside < self.limit {
            self.inside += 1;
            return Step::Admitted(self.admission(AdmittedBy::Free, HoldKind::Slot));
        }
        if !at.slept && !at.holds_locks {
            // "We let it sleep only once to avoid starvation" (InnoDB 5.5).
            at.slept = true;
            if !self.sleep_delay.is_zero() {
                at.sleeping = true;
                self.sleeping += 1;
                return Step::Sleep(self.sleep_delay);
            }
        }
        // The seed's rule, bounded by `inside + lifo_running < 2 × limit`. The bound follows
        // from the rule while the limit stands and no unchecked re-entry (after a row-lock
        // wait) has pushed `inside` past the limit (`fifo_pending` ≤ `inside` ≤ `limit`);
        // after a lower limit, the old limit's pending hand-offs would otherwise let as many
        // newcomers in, and past the limit by re-entries, the newcomer queues instead.
        if self.lifo
            && self.lifo_running < self.fifo_pending
            && self.inside + self.lifo_running < self.limit.saturating_mul(2)
        {
            self.lifo_running += 1;
            return Step::Admitted(self.admission(AdmittedBy::Lifo, HoldKind::Lifo));
        }
        let id = WaitId(self.next_id);
        self.next_id += 1;
        self.queue.push_back(Slot {
            id,
            waiter: waiter.clone(),
            released: false,
        });
        self.queued += 1;
        Step::Wait(id)
    }

    /// Re-entry after a row-lock wait: counted inside without checking the limit, with one
    /// ticket (InnoDB 5.0–5.5 `srv_conc_force_enter_innodb`, under `srv_conc_mutex`).
    pub fn enter_unchecked(&mut self) -> Admission {
        self.inside += 1;
        Admission::unchecked()
    }

    /// The queued thread `id` has been signalled and is running: it removes its slot and is
    /// inside (the releasing thread already counted it). For FLIFO, it is no longer pending.
    ///
    /// # Panics
    /// If `id` is not a released slot of this core: a driver bug.
    pub fn finish_wait(&mut self, id: WaitId) -> Admission {
        let pos = self.position(id).expect("finish_wait: no such queued wait");
        let slot = self.queue.remove(pos).expect("position is in range");
        assert!(slot.released, "finish_wait before the slot was released");
        if self.lifo {
            dec(&mut self.fifo_pending, "flifo: fifo-pending");
        }
        self.admission(AdmittedBy::HandOff, HoldKind::Slot)
    }

    /// The queued thread `id` gives up (cancelled, timed out). Returns `None` if it left the
    /// queue without being counted anywhere, or `Some(admission)` if a hand-off had already
    /// released it: then it is inside and must exit normally.
    pub fn cancel_wait(&mut self, id: WaitId) -> Option<Admission> {
        let pos = self.position(id)?;
        if self.queue[pos].released {
            return Some(self.finish_wait(id));
        }
        self.queue.remove(pos);
        dec(&mut self.queued, "queue: waiters");
        None
    }

    /// A thread that was told to sleep gives up before asking again (cancelled, timed out).
    pub fn abandon(&mut self, at: &mut Attempt) {
        if at.sleeping {
            at.sleeping = false;
            dec(&mut self.sleeping, "queue: sleepers");
        }
    }

    /// A thread leaves for real (tickets exhausted or forced), giving back `hold`. Returns the
    /// waiter to signal, if the freed slot was handed over.
    pub fn exit(&mut self, hold: Hold) -> Option<Release<W>> {
        match hold.kind() {
            HoldKind::Uncounted => None,
            HoldKind::Lifo => {
                dec(&mut self.lifo_running, "flifo: lifo-running");
                None
            }
            HoldKind::Slot => {
                dec(&mut self.inside, "queue: threads inside");
                self.hand_off()
            }
        }
    }

    /// Changes the limit. Raising it (or setting 0) releases waiters at once; lowering it never
    /// evicts anyone: exits stop handing off until the count is under the new limit. Threads
    /// admitted while the limit was 0 are counted, so a limit set later sees them.
    pub fn set_limit(&mut self, limit: u32) -> Vec<Release<W>> {
        self.limit = limit;
        let mut released = Vec::new();
        while let Some(r) = self.hand_off() {
            released.push(r);
        }
        released
    }

    fn hand_off(&mut self) -> Option<Release<W>> {
        if self.limit != 0 && self.inside >= self.limit {
            return None;
        }
        let slot = self.queue.iter_mut().find(|s| !s.released)?;
        slot.released = true;
        let release = Release {
            waiter: slot.waiter.clone(),
            id: slot.id,
        };
        dec(&mut self.queued, "queue: waiters");
        self.inside += 1;
        if self.lifo {
            self.fifo_pending += 1;
        }
        Some(release)
    }

    fn position(&self, id: WaitId) -> Option<usize> {
        // Released slots gather at the front and are removed by their threads as they run, so
        // this scan is short in practice (InnoDB scans its slot list the same way).
        self.queue.iter().position(|s| s.id == id)
    }

    /// Threads counted inside (including released waiters not yet running; excluding LIFO).
    pub fn inside(&self) -> u32 {
        self.inside
    }

    /// Threads waiting in the queue and not yet released.
    pub fn queued(&self) -> u32 {
        self.queued
    }

    /// Threads sleeping before joining the queue.
    pub fn sleeping(&self) -> u32 {
        self.sleeping
    }

    /// FLIFO: threads released by a hand-off that have not begun to run.
    pub fn fifo_pending(&self) -> u32 {
        self.fifo_pending
    }

    /// FLIFO: threads running by the LIFO rule.
    pub fn lifo_running(&self) -> u32 {
        self.lifo_running
    }

    /// The current limit (0 = unlimited).
    pub fn limit(&self) -> u32 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS10: Duration = Duration::from_millis(10);

    #[test]
    fn flifo_admits_no_newcomer_past_twice_a_lowered_limit_while_old_hand_offs_are_pending() {
        // Raise then lower: three hand-offs of the raise are pending under the new limit.
        let mut c = QueueCore::new(1, 500, Duration::ZERO, true);
        admitted(c.enter(&mut Attempt::new(false), &0));
        for w in 1..=3 {
            wait_id(c.enter(&mut Attempt::new(false), &w));
        }
        assert_eq!(c.set_limit(4).len(), 3);
        assert!(c.set_limit(1).is_empty());
        let lifo = (10..20)
            .filter(|w| matches!(c.enter(&mut Attempt::new(false), w), Step::Admitted(_)))
            .count();
        assert_eq!(lifo, 0, "4 inside under a limit of 1 already");
        // After an unlimited spell: 100 released, then a limit of 2.
        let mut c = QueueCore::new(1, 500, Duration::ZERO, true);
        admitted(c.enter(&mut Attempt::new(false), &0));
        for w in 1..=100 {
            wait_id(c.enter(&mut Attempt::new(false), &w));
        }
        assert_eq!(c.set_limit(0).len(), 100);
        c.set_limit(2);
        for w in 200..400 {
            let _ = c.enter(&mut Attempt::new(false), &w);
        }
        assert_eq!(c.lifo_running(), 0);
        // The seed's rule where the limit stands: one LIFO newcomer per pending hand-off.
        let mut c = QueueCore::new(2, 500, Duration::ZERO, true);
        let a = admitted(c.enter(&mut Attempt::new(false), &0));
        admitted(c.enter(&mut Attempt::new(false), &1));
        wait_id(c.enter(&mut Attempt::new(false), &2));
        assert!(c.exit(a.hold).is_some());
        assert!(matches!(
            c.enter(&mut Attempt::new(false), &3),
            Step::Admitted(a) if a.by == AdmittedBy::Lifo
        ));
        assert!(matches!(
            c.enter(&mut Attempt::new(false), &4),
            Step::Wait(_)
        ));
    }

    fn admitted(step: Step) -> Admission {
        match step {
            Step::Admitted(a) => a,
            other => panic!("expected admission, got {other:?}"),
        }
    }

    fn wait_id(step: Step) -> WaitId {
        match step {
            Step::Wait(id) => id,
            other => panic!("expected a queue wait, got {other:?}"),
        }
    }

    /// Drives one thread to the queue through its sleep.
    fn queue_up(core: &mut QueueCore<u32>, who: u32) -> WaitId {
        let mut at = Attempt::new(false);
        assert_eq!(core.enter(&mut at, &who), Step::Sleep(MS10));
        wait_id(core.enter(&mut at, &who))
    }

    #[test]
    fn admits_up_to_the_limit_with_full_tickets_then_sleeps_once_then_queues() {
        let mut core = QueueCore::new(2, 500, MS10, false);
        for who in 0..2 {
            let a = admitted(core.enter(&mut Attempt::new(false), &who));
            assert_eq!(
                (a.by, a.hold.kind(), a.tickets),
                (AdmittedBy::Free, HoldKind::Slot, 500)
            );
        }
        let mut at = Attempt::new(false);
        assert_eq!(core.enter(&mut at, &7), Step::Sleep(MS10));
        assert_eq!(core.sleeping(), 1);
        wait_id(core.enter(&mut at, &7));
        assert_eq!((core.sleeping(), core.queued(), core.inside()), (0, 1, 2));
    }

    #[test]
    fn a_thread_holding_locks_queues_without_sleeping() {
        let mut core = QueueCore::new(1, 500, MS10, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        wait_id(core.enter(&mut Attempt::new(true), &1));
    }

    #[test]
    fn zero_sleep_delay_queues_at_once() {
        let mut core = QueueCore::new(1, 500, Duration::ZERO, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        wait_id(core.enter(&mut Attempt::new(false), &1));
    }

    #[test]
    fn exits_hand_slots_to_waiters_in_fifo_order() {
        let mut core = QueueCore::new(1, 500, MS10, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        let ids: Vec<WaitId> = (1..=3).map(|w| queue_up(&mut core, w)).collect();
        for (who, id) in (1..=3).zip(ids) {
            let r = core
                .exit(Hold::of(HoldKind::Slot))
                .expect("a waiter is released");
            assert_eq!((r.waiter, r.id), (who, id));
            let a = core.finish_wait(id);
            assert_eq!((a.by, a.tickets), (AdmittedBy::HandOff, 500));
        }
        assert_eq!(core.exit(Hold::of(HoldKind::Slot)), None);
        assert_eq!(core.inside(), 0);
    }

    #[test]
    fn a_handed_off_slot_cannot_be_taken_by_a_newcomer() {
        let mut core = QueueCore::new(1, 500, MS10, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        let id = queue_up(&mut core, 1);
        let r = core.exit(Hold::of(HoldKind::Slot)).unwrap();
        assert_eq!(r.id, id);
        // Before the released waiter runs, it is already counted inside: a newcomer finds
        // the gate full and is told to sleep, then queue.
        assert_eq!(core.inside(), 1);
        let mut at = Attempt::new(false);
        assert_eq!(core.enter(&mut at, &2), Step::Sleep(MS10));
        wait_id(core.enter(&mut at, &2));
        core.finish_wait(id);
        assert_eq!(core.inside(), 1);
    }

    #[test]
    fn flifo_admits_by_lifo_only_while_lifo_running_is_below_fifo_pending() {
        let mut core = QueueCore::new(1, 500, Duration::ZERO, true);
        admitted(core.enter(&mut Attempt::new(false), &0));
        let first = wait_id(core.enter(&mut Attempt::new(false), &1));
        // No hand-off pending yet: the FIFO rule queues.
        assert_eq!((core.fifo_pending(), core.lifo_running()), (0, 0));
        let r = core.exit(Hold::of(HoldKind::Slot)).unwrap();
        assert_eq!(r.id, first);
        assert_eq!(core.fifo_pending(), 1);
        // One released waiter has not begun to run: one newcomer may run by LIFO...
        let a = admitted(core.enter(&mut Attempt::new(false), &2));
        assert_eq!((a.by, a.hold.kind()), (AdmittedBy::Lifo, HoldKind::Lifo));
        assert_eq!(core.lifo_running(), 1);
        // ...but not two.
        wait_id(core.enter(&mut Attempt::new(false), &3));
        // The woken thread runs: no longer pending. Running = 1 counted + 1 LIFO = 2 × limit.
        core.finish_wait(first);
        assert_eq!((core.fifo_pending(), core.inside()), (0, 1));
        // A LIFO thread's exit frees no counted slot and hands nothing off.
        assert_eq!(core.exit(Hold::of(HoldKind::Lifo)), None);
        assert_eq!(core.lifo_running(), 0);
        assert_eq!(core.queued(), 1);
    }

    #[test]
    fn cancelling_a_queued_wait_forgets_it_unless_it_was_already_released() {
        let mut core = QueueCore::new(1, 500, Duration::ZERO, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        let a = wait_id(core.enter(&mut Attempt::new(false), &1));
        let b = wait_id(core.enter(&mut Attempt::new(false), &2));
        assert_eq!(core.cancel_wait(a), None);
        assert_eq!(core.queued(), 1);
        let r = core.exit(Hold::of(HoldKind::Slot)).unwrap();
        assert_eq!(r.id, b);
        // b's timer fired in the same instant its slot was handed over: it is inside.
        let adm = core
            .cancel_wait(b)
            .expect("already released means admitted");
        assert_eq!(adm.by, AdmittedBy::HandOff);
        assert_eq!((core.inside(), core.queued()), (1, 0));
    }

    #[test]
    fn raising_the_limit_releases_waiters_and_lowering_evicts_no_one() {
        let mut core = QueueCore::new(1, 500, Duration::ZERO, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        let ids: Vec<WaitId> = (1..=3)
            .map(|w| wait_id(core.enter(&mut Attempt::new(false), &w)))
            .collect();
        let released = core.set_limit(3);
        assert_eq!(released.iter().map(|r| r.id).collect::<Vec<_>>(), ids[..2]);
        for r in released {
            core.finish_wait(r.id);
        }
        assert_eq!(core.inside(), 3);
        assert!(core.set_limit(1).is_empty());
        assert_eq!(core.inside(), 3, "lowering the limit evicts no one");
        // Exits hand off nothing until the count is under the new limit.
        assert_eq!(core.exit(Hold::of(HoldKind::Slot)), None);
        assert_eq!(core.exit(Hold::of(HoldKind::Slot)), None);
        assert_eq!(
            core.exit(Hold::of(HoldKind::Slot)).map(|r| r.id),
            Some(ids[2])
        );
    }

    #[test]
    fn limit_zero_admits_counted_and_releases_every_waiter() {
        let mut core = QueueCore::new(1, 500, Duration::ZERO, false);
        admitted(core.enter(&mut Attempt::new(false), &0));
        wait_id(core.enter(&mut Attempt::new(false), &1));
        wait_id(core.enter(&mut Attempt::new(false), &2));
        assert_eq!(core.set_limit(0).len(), 2);
        let a = admitted(core.enter(&mut Attempt::new(false), &3));
        assert_eq!(
            (a.by, a.hold.kind()),
            (AdmittedBy::Unlimited, HoldKind::Slot)
        );
        // Counted though unlimited: the holder, the two released waiters and this one.
        assert_eq!(core.inside(), 4);
        // A limit set now sees all four: nobody else gets in until three have left.
        core.set_limit(1);
        let mut at = Attempt::new(true);
        wait_id(core.enter(&mut at, &4));
    }

    #[test]
    #[should_panic(expected = "would go below zero")]
    fn giving_back_a_slot_that_was_never_taken_panics_instead_of_wrapping() {
        // Only the policy code can forge a Hold; a driver bug that did would otherwise wrap
        // `inside` to ~4e9 and close the gate for good.
        let mut core: QueueCore<u32> = QueueCore::new(1, 500, MS10, false);
        let _ = core.exit(Hold::of(HoldKind::Slot));
    }
}
