//! The decisions of each admission policy, written once.
//!
//! A *decision core* holds a policy's shared state and answers one question for a thread that
//! wants in: what must it do next? The answer is a [`Step`]. The core never sleeps, blocks,
//! reads a clock or signals a thread: it says *sleep this long*, *yield*, *wait in the queue*,
//! or *you are in*, and, on exit, *wake this waiter*. Whoever drives it performs the step:
//! [`crate::Gate`] with real threads, the simulator with events in virtual time. That is how
//! both run the same policy code.
//!
//! A thread's progress through one admission lives in an [`Attempt`], which the driver keeps
//! and passes back on every call (InnoDB keeps the same facts in local variables of
//! `srv_conc_enter_innodb`: `has_slept`, `n_sleeps`, `notified_mysql`, `has_yielded`).
//!
//! | core | policy | shared state | driver provides |
//! |---|---|---|---|
//! | [`queue::QueueCore`] | `classic`, `flifo` | plain struct (`&mut self`) | the mutex around it, a way to wake a waiter |
//! | [`polling::PollingCore`] | `polling` | atomics (`&self`) | sleeping |
//! | [`timer::TimerCore`] | `timer` | atomics (`&self`) | yielding, sleeping |

use std::time::Duration;

use crate::config::{GateConfig, Policy};

pub mod polling;
pub mod queue;
pub mod timer;

/// The decision core a configuration calls for, built in one place for every driver (the real
/// gate wraps the queue core in its mutex; the simulator owns it outright).
#[derive(Debug)]
pub enum Core<W> {
    /// `classic` or `flifo`.
    Queue(queue::QueueCore<W>),
    /// `polling`.
    Polling(polling::PollingCore),
    /// `timer`.
    Timer(timer::TimerCore),
    /// `unlimited`: no core, every enter is admitted uncounted.
    Unlimited,
}

impl<W: Clone> Core<W> {
    /// The core for `c` (which the caller has validated).
    pub fn new(c: &GateConfig) -> Core<W> {
        match c.policy {
            Policy::Classic | Policy::Flifo => Core::Queue(queue::QueueCore::new(
                c.limit,
                c.tickets,
                c.sleep_delay,
                c.policy == Policy::Flifo,
            )),
            Policy::Polling => Core::Polling(polling::PollingCore::new(
                c.limit,
                c.tickets,
                c.sleep_delay,
                c.adaptive_max_sleep_delay,
            )),
            Policy::Timer => Core::Timer(timer::TimerCore::new(c.limit, c.tickets)),
            Policy::Unlimited => Core::Unlimited,
        }
    }
}

/// What a thread asking to enter must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The thread is inside now.
    Admitted(Admission),
    /// Sleep for this long, then ask again. A zero duration means "retry at once" (yield).
    Sleep(Duration),
    /// Yield the processor once, then ask again.
    Yield,
    /// The thread is queued under this id: block until a [`queue::Release`] with the same id
    /// is delivered, then call [`queue::QueueCore::finish_wait`].
    Wait(WaitId),
}

/// Identifies one queued wait. Ids are never reused by a core, so a late or duplicated
/// release signal can always be told apart from the one a waiter expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitId(pub u64);

/// How a thread got in and what it must give back when it really leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// The rule that admitted it.
    pub by: AdmittedBy,
    /// What the thread holds until its exit.
    pub hold: Hold,
    /// Tickets granted: later enters spend them without asking the core.
    pub tickets: u32,
}

/// The rule under which a thread was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmittedBy {
    /// It found a free slot (possibly after sleeping or yielding).
    Free,
    /// A leaving thread handed it its slot (FIFO queue).
    HandOff,
    /// FLIFO's LIFO rule: `lifo_running < fifo_pending`.
    Lifo,
    /// `timer` gave up checking after a yield and two sleeps, or the thread held locks.
    Forced,
    /// Re-entry after a row-lock wait without checking the limit (InnoDB 5.6
    /// `srv_conc_force_enter_innodb`).
    Unchecked,
    /// The limit is 0 or the policy is `unlimited`: nothing is counted.
    Unlimited,
}

/// What an admitted thread holds, so that exit gives back exactly that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// One counted slot of the limit.
    Slot,
    /// A place among FLIFO's lifo-running threads (not one of the limit's slots).
    Lifo,
    /// Nothing: admitted while unlimited.
    Uncounted,
}

/// One thread's progress through one admission. Create a fresh one per admission.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// The thread holds row locks or latches: InnoDB never makes such a thread sleep before
    /// queueing (`classic`) and lets it in at once after its yield (`timer`).
    pub holds_locks: bool,
    /// `classic`/`flifo`: the one sleep before queueing has been taken (InnoDB `has_slept`).
    pub(crate) slept: bool,
    /// Sleeps completed (`polling`'s `n_sleeps`, `timer`'s `has_slept`).
    pub(crate) sleeps: u32,
    /// `timer`: the one yield has been taken.
    pub(crate) yielded: bool,
    /// A `Sleep` step is outstanding and counted in the core's sleeper count.
    pub(crate) sleeping: bool,
    /// `polling`: counted in the core's waiter count (InnoDB `notified_mysql`).
    pub(crate) notified: bool,
}

impl Attempt {
    /// A fresh attempt for a thread that does (`true`) or does not hold locks.
    pub fn new(holds_locks: bool) -> Self {
        Attempt {
            holds_locks,
            ..Attempt::default()
        }
    }

    /// Sleeps completed so far in this attempt.
    pub fn sleeps(&self) -> u32 {
        self.sleeps
    }
}
