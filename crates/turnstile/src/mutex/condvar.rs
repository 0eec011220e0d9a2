//! A condition variable for the turnstile lock, whose waiters sleep in the lock's own parking
//! table ([`super::park`]), keyed by the condition variable's address.
//!
//! The condition variable is one word: 0 while nobody waits, otherwise the address of the
//! mutex its waiters use. Every write of it is made under the bucket mutex of the condition
//! variable's key, where the queue changes too, so the word is non-zero exactly while the
//! queue holds a waiter for this key. A wait:
//!
//! 1. under the bucket mutex (the park's validate step) records its mutex in the word, or
//!    finds the same mutex there (another mutex there is a misuse: it panics, still holding
//!    its lock), and queues itself;
//! 2. after the bucket mutex is released and before it sleeps (the park's `before_sleep`),
//!    unlocks its mutex. Queued first, so a notify that comes after the unlock finds it;
//!    outside the bucket mutex, because the unlock's wake step takes the bucket of the mutex,
//!    which may be this very bucket;
//! 3. sleeps until a notify dequeues it (and leaves a token) or its deadline passes (then it
//!    dequeues itself, clearing the word if it was the last), then locks the mutex again.
//!
//! A notify reads the word without the bucket mutex and returns at once if it is 0: a waiter
//! it must wake recorded itself before unlocking the mutex, so a notify that comes after that
//! unlock (by a thread that locked the mutex since, or any later event) sees the record, or a
//! later value, which is 0 only if every waiter has left the queue meanwhile. Otherwise it
//! dequeues one waiter (or all) under the bucket mutex, clears the word if none remains, and
//! wakes them after releasing it.
//!
//! The core functions take the table as a parameter and are generic over the word, as the
//! lock's `lock_slow` is, so loom model-checks this code with the lock's own algorithm over a
//! table of its own (`loom_tests`, at the end).

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::park::{Parked, Table, TOKEN_RETRY};

/// The token a notify leaves its waiters: any non-zero token would do (a woken waiter only
/// learns that it was notified, and then locks the mutex as any thread would); the lock's
/// "retry" says just that, and a condition variable never hands the mutex over.
const TOKEN_NOTIFIED: u32 = TOKEN_RETRY;
use super::{MutexGuard, RawTurnstileMutex};

/// The condition variable's word, as the core functions need it (the real atomic, or loom's
/// under model checking).
///
/// All accesses are relaxed: every write, and every read but one, is made under the bucket
/// mutex of the condition variable's key, which orders them. The one read outside it, a
/// notify's check for waiters, needs no more: the waiter's write is sequenced before its
/// unlock of the mutex (a release), so it happens before any notify that happens after that
/// unlock, and coherence then gives the notify that write or a later one.
pub(crate) trait CondvarWord {
    fn get(&self) -> usize;
    fn set(&self, mutex: usize);
    /// The key the parking table files this condition variable's waiters under.
    fn key(&self) -> usize {
        self as *const Self as *const () as usize
    }
}

/// Implements [`CondvarWord`] for an atomic type with `AtomicUsize`'s methods: the shipped
/// `std::sync::atomic::AtomicUsize` and, under `--cfg loom`, loom's, with the same bodies.
macro_rules! impl_condvar_word {
    ($atomic:ty) => {
        impl CondvarWord for $atomic {
            #[inline]
            fn get(&self) -> usize {
                self.load(Ordering::Relaxed)
            }
            #[inline]
            fn set(&self, mutex: usize) {
                self.store(mutex, Ordering::Relaxed)
            }
        }
    };
}

impl_condvar_word!(AtomicUsize);
#[cfg(loom)]
impl_condvar_word!(loom::sync::atomic::AtomicUsize);

/// What a wait that uses another mutex than the current waiters' panics with.
const TWO_MUTEXES: &str = "attempted to use a turnstile::Condvar with more than one mutex at a \
                           time (its current waiters wait with another mutex)";

/// Waits on `cv` as a user of `mutex` (the mutex's address, never 0), which the caller holds:
/// queues this thread, calls `unlock` (which must release that mutex), and sleeps until a
/// notify or `deadline`. Returns whether the deadline passed (then this thread has left the
/// queue). Does not lock the mutex again: the caller does. Panics, without calling `unlock`,
/// if waiters of `cv` are using another mutex.
pub(crate) fn wait<W: CondvarWord>(
    cv: &W,
    mutex: usize,
    table: &Table,
    unlock: impl FnOnce(),
    deadline: Option<Instant>,
) -> bool {
    debug_assert_ne!(mutex, 0);
    let validate = || {
        // Under the bucket mutex: the word is 0 exactly while nobody waits.
        let current = cv.get();
        if current == 0 {
            cv.set(mutex);
        }
        current == 0 || current == mutex
    };
    let timed_out = |last: bool| {
        // Under the bucket mutex, having left the queue: the last waiter clears the record.
        if last {
            cv.set(0);
        }
    };
    // `since` feeds only the lock's starvation hand-off, which a notify never grants.
    match table.park_with(
        cv.key(),
        Instant::now(),
        false,
        validate,
        unlock,
        timed_out,
        deadline,
    ) {
        Parked::Unparked(_) => false,
        Parked::TimedOut => true,
        Parked::Invalid => panic!("{TWO_MUTEXES}"),
    }
}

/// Wakes the oldest waiter of `cv`, if any; returns whether there was one.
pub(crate) fn notify_one<W: CondvarWord>(cv: &W, table: &Table) -> bool {
    if cv.get() == 0 {
        return false;
    }
    table.unpark_one(cv.key(), |u| {
        // Under the bucket mutex: the last waiter leaving clears the record.
        if !u.more {
            cv.set(0);
        }
        TOKEN_NOTIFIED
    })
}

/// Wakes every waiter of `cv`; returns how many there were.
pub(crate) fn notify_all<W: CondvarWord>(cv: &W, table: &Table) -> usize {
    if cv.get() == 0 {
        return 0;
    }
    table.unpark_all(cv.key(), |_| {
        // Under the bucket mutex, with every waiter for the key dequeued.
        cv.set(0);
        TOKEN_NOTIFIED
    })
}

/// Runs `f` with the parking table the turnstile lock's waiters sleep in.
#[cfg(not(loom))]
fn with_table<R>(f: impl FnOnce(&Table) -> R) -> R {
    f(&super::raw::TABLE)
}

#[cfg(loom)]
fn with_table<R>(f: impl FnOnce(&Table) -> R) -> R {
    let _ = f;
    unreachable!("the model checks drive the condition variable with a table of their own")
}

/// A condition variable for [`Mutex`](crate::Mutex): threads wait on it, releasing the mutex
/// while they sleep, until another thread notifies it.
///
/// One word; its waiters sleep in the same parking table as the lock's (keyed by the condition
/// variable's address), each on a word of its own. A wait queues the thread before it releases
/// the mutex, so a notify that comes after the release (for instance, made by a thread that
/// then locked the mutex and changed the data) always finds it: no notify is lost. Waiters are
/// woken in the order they began to wait, and wake up holding the mutex again.
///
/// Like every condition variable, a wait may return without the condition the waiter waits
/// for being true: another thread may have changed the data between the notify and the
/// waiter's re-lock, and the contract allows spurious wake-ups (this implementation produces
/// none of its own, but a later version may). Check the condition in a loop, or use
/// [`wait_while`](Self::wait_while), which does.
///
/// While threads wait on it, a condition variable belongs to one mutex: a wait with a guard of
/// another mutex panics. Once its waiters have left, it may be used with another.
///
/// [`notify_all`](Self::notify_all) wakes every waiter, and they then contend for the mutex
/// (the lock's bounded spin and parking absorb the herd); it does not move them onto the
/// mutex's queue the way `parking_lot` requeues them.
///
/// # Example: a producer and a consumer
///
/// ```
/// use std::collections::VecDeque;
/// use std::sync::Arc;
/// use turnstile::{Condvar, Mutex};
///
/// let queue = Arc::new((Mutex::new(VecDeque::new()), Condvar::new()));
///
/// let producer = {
///     let queue = queue.clone();
///     std::thread::spawn(move || {
///         let (items, not_empty) = &*queue;
///         for i in 1..=100u64 {
///             items.lock().push_back(i);
///             not_empty.notify_one();
///         }
///     })
/// };
///
/// let (items, not_empty) = &*queue;
/// let mut sum = 0;
/// for _ in 0..100 {
///     let mut q = items.lock();
///     not_empty.wait_while(&mut q, |q| q.is_empty());
///     sum += q.pop_front().unwrap();
/// }
/// producer.join().unwrap();
/// assert_eq!(sum, 5050);
/// ```
pub struct Condvar {
    /// 0, or the address of the mutex its waiters use (see the module docs).
    state: AtomicUsize,
}

/// Whether a timed wait returned because its time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// Whether the wait's time ran out: for [`Condvar::wait_for`] and
    /// [`Condvar::wait_until`], it was not notified in time; for
    /// [`Condvar::wait_while_for`] and [`Condvar::wait_while_until`], the condition still
    /// held when the time ran out.
    #[must_use]
    pub fn timed_out(self) -> bool {
        self.0
    }
}

/// Locks the mutex again when dropped, if the wait released it: on every way out of a wait,
/// unwinding included, the guard's mutex is held again before the guard can be used.
struct Relock<'a> {
    raw: &'a RawTurnstileMutex,
    unlocked: Cell<bool>,
}

impl Drop for Relock<'_> {
    fn drop(&mut self) {
        if self.unlocked.get() {
            // Without the gate's step-out: the wait lent the slot before it began and takes
            // it back after this relock (`ReclaimAfter`), with the guard's lock held again. A
            // reclaim inside the lock would run before the lock is the guard's, and if it
            // panicked the lock would be released under a live guard.
            self.raw.lock_without_gate();
        }
    }
}

/// Takes back the gate slot a wait lent (`gate_hook::reclaim`) when dropped: on every way
/// out of the wait, unwinding included (a wait refused for a second mutex), after the relock.
struct ReclaimAfter;

impl Drop for ReclaimAfter {
    fn drop(&mut self) {
        crate::gate_hook::reclaim();
    }
}

impl Condvar {
    /// A condition variable nobody waits on.
    pub const fn new() -> Self {
        Condvar {
            state: AtomicUsize::new(0),
        }
    }

    /// Wakes one thread waiting on this condition variable (the one that has waited longest);
    /// returns whether there was one.
    ///
    /// A notify wakes only threads already waiting: it is not remembered for a later wait.
    #[inline]
    pub fn notify_one(&self) -> bool {
        with_table(|table| notify_one(&self.state, table))
    }

    /// Wakes every thread waiting on this condition variable; returns how many there were.
    ///
    /// A notify wakes only threads already waiting: it is not remembered for a later wait.
    #[inline]
    pub fn notify_all(&self) -> usize {
        with_table(|table| notify_all(&self.state, table))
    }

    /// Releases the guard's mutex, sleeps until notified, and locks the mutex again before
    /// returning. May also return without a notify (see the type's docs): check the condition
    /// again, or use [`wait_while`](Self::wait_while).
    ///
    /// # Panics
    ///
    /// If threads are waiting on this condition variable with another mutex (the guard is
    /// still held when the panic unwinds).
    pub fn wait<T: ?Sized>(&self, guard: &mut MutexGuard<'_, T>) {
        self.wait_until_internal(guard, None);
    }

    /// Waits, as [`wait`](Self::wait), while `condition` holds: returns, holding the mutex,
    /// once `condition` (called with the mutex held) returns false. Returns at once, without
    /// releasing the mutex, if it is false already.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_while<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) {
        while condition(&mut **guard) {
            self.wait(guard);
        }
    }

    /// Waits, as [`wait`](Self::wait), for at most `timeout`. The result says whether the time
    /// ran out; either way, the mutex is held again on return. A timeout too large to add to
    /// the clock means none.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_for<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
    ) -> WaitTimeoutResult {
        self.wait_until_internal(guard, Instant::now().checked_add(timeout))
    }

    /// Waits, as [`wait`](Self::wait), until `deadline` at the latest. The result says
    /// whether the deadline passed; either way, the mutex is held again on return. A deadline
    /// already past still releases and re-locks the mutex once.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_until<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Instant,
    ) -> WaitTimeoutResult {
        self.wait_until_internal(guard, Some(deadline))
    }

    /// Waits, as [`wait_while`](Self::wait_while), for at most `timeout`. The result is timed
    /// out only if the condition still held when the time ran out; either way, the mutex is
    /// held on return. A timeout too large to add to the clock means none.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_while_for<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        condition: impl FnMut(&mut T) -> bool,
        timeout: Duration,
    ) -> WaitTimeoutResult {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.wait_while_until(guard, condition, deadline),
            None => {
                self.wait_while(guard, condition);
                WaitTimeoutResult(false)
            }
        }
    }

    /// Waits, as [`wait_while`](Self::wait_while), until `deadline` at the latest. The result
    /// is timed out only if the condition still held when the deadline passed; either way, the
    /// mutex is held on return.
    ///
    /// # Panics
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_while_until<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        mut condition: impl FnMut(&mut T) -> bool,
        deadline: Instant,
    ) -> WaitTimeoutResult {
        while condition(&mut **guard) {
            if self.wait_until_internal(guard, Some(deadline)).timed_out() {
                return WaitTimeoutResult(condition(&mut **guard));
            }
        }
        WaitTimeoutResult(false)
    }

    fn wait_until_internal<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Option<Instant>,
    ) -> WaitTimeoutResult {
        // SAFETY: `raw` is unsafe because it lets the caller unlock the mutex while a guard
        // still exists. The only unlock below releases the lock this guard holds, and
        // `relock` locks it again before this function returns or unwinds, while the guard is
        // borrowed here (`&mut`), so the guard is never used while the mutex is unlocked.
        let raw: &RawTurnstileMutex = unsafe { MutexGuard::mutex(guard).raw() };
        // A thread inside an `auto` gate lends its slot for the wait (`gate_hook`), and takes
        // it back once the wait is over and the lock is held again: declared before `relock`,
        // so dropped after it.
        crate::gate_hook::lend();
        let _reclaim = ReclaimAfter;
        let relock = Relock {
            raw,
            unlocked: Cell::new(false),
        };
        let unlock = || {
            // SAFETY: the guard is held, so this thread owns the lock; this closure runs at
            // most once (`FnOnce`), and `relock` records that it did, so the lock is taken
            // again (below, or while unwinding) before the guard can be used.
            unsafe { lock_api::RawMutex::unlock(raw) };
            relock.unlocked.set(true);
        };
        let mutex = raw as *const RawTurnstileMutex as usize;
        let timed_out = with_table(|table| wait(&self.state, mutex, table, unlock, deadline));
        drop(relock);
        WaitTimeoutResult(timed_out)
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Condvar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Condvar")
            .field("has_waiters", &(self.state.get() != 0))
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_condvar_is_one_word_and_a_timed_out_waiter_leaves_it_clear() {
        assert_eq!(std::mem::size_of::<Condvar>(), std::mem::size_of::<usize>());
        let m = crate::Mutex::new(());
        let cv = Condvar::new();
        let mut g = m.lock();
        assert!(cv.wait_for(&mut g, Duration::ZERO).timed_out());
        assert_eq!(
            cv.state.get(),
            0,
            "the last waiter to leave clears the word"
        );
        assert_eq!(format!("{cv:?}"), "Condvar { has_waiters: false }");
    }

    #[test]
    fn a_panic_in_the_slot_reclaim_after_a_wait_unwinds_with_the_lock_held_and_releases_it() {
        use crate::gate_hook::tests::PANIC_IN_RECLAIM;
        use std::sync::Arc;
        let m = Arc::new(crate::Mutex::new(0u32));
        let cv = Arc::new(Condvar::new());
        let (m2, cv2) = (m.clone(), cv.clone());
        let waiter = std::thread::spawn(move || {
            PANIC_IN_RECLAIM.with(|p| p.set(true));
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut g = m2.lock();
                let _ = cv2.wait_for(&mut g, Duration::from_millis(30));
                *g += 1;
            }))
            .is_err()
        });
        let watchdog = std::time::Instant::now();
        let alive = |what: &str| {
            assert!(
                watchdog.elapsed() < Duration::from_secs(20),
                "watchdog: {what}"
            );
            std::thread::yield_now();
        };
        while cv.state.get() == 0 {
            alive("the waiter never waited");
        }
        // Held here when the wait times out: its relock takes the slow path and parks.
        let g = m.lock();
        // SAFETY: only reads the state word.
        let raw = unsafe { m.raw() };
        while !raw.has_parked() {
            alive("the relock never parked");
        }
        drop(g);
        assert!(
            waiter.join().unwrap(),
            "the reclaim's panic reached the caller"
        );
        let g = m
            .try_lock()
            .expect("released as the guard unwound, not left held");
        assert_eq!(*g, 0, "the critical section after the wait never ran");
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the condition variable together with the lock and the parking table:
    //! `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --lib condvar`. The mutex is
    //! the turnstile lock's own algorithm (`lock_slow`, `after_unlock`) on loom's atomic, and
    //! the table has one bucket, so the condition variable's waiters and the lock's share it
    //! (the case that requires the unlock outside the bucket mutex). Loom reports a lost
    //! wake-up as a deadlock, and a flag written without the mutex's ordering as a race.
    use super::*;
    use crate::mutex::raw::{after_unlock, lock_slow, needs_unlock_slow, NoStats, StateWord};
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicU32, AtomicUsize};
    use loom::sync::Arc;

    /// A mutex-protected flag, a condition variable, and the table they park in.
    struct Model {
        lock: AtomicU32,
        flag: UnsafeCell<bool>,
        cv: AtomicUsize,
        table: Table,
    }

    impl Model {
        fn new() -> Arc<Self> {
            Arc::new(Model {
                lock: AtomicU32::new(0),
                flag: UnsafeCell::new(false),
                cv: AtomicUsize::new(0),
                // Never a starvation hand-off: real elapsed time would make the model
                // nondeterministic.
                table: Table::new(1, Duration::MAX, Duration::ZERO),
            })
        }

        fn lock(&self) {
            if !self.lock.acquire() {
                assert!(lock_slow(&self.lock, &self.table, &NoStats, None, || {}));
            }
        }

        fn unlock(&self) {
            let old = self.lock.release();
            if needs_unlock_slow(old) {
                after_unlock(&self.lock, &self.table, &NoStats, old);
            }
        }

        /// Reads the flag; the caller holds the lock.
        fn flag(&self) -> bool {
            // SAFETY: under the lock; loom reports a race if the writer's unlock does not
            // happen before this read.
            self.flag.with(|f| unsafe { *f })
        }

        /// Sets the flag; the caller holds the lock.
        fn set_flag(&self) {
            // SAFETY: under the lock, as above.
            self.flag.with_mut(|f| unsafe { *f = true });
        }

        /// One wait, with the lock held on entry and on return; whether it timed out.
        fn wait(&self, deadline: Option<Instant>) -> bool {
            let timed_out = wait(
                &self.cv,
                StateWord::key(&self.lock),
                &self.table,
                || self.unlock(),
                deadline,
            );
            self.lock();
            timed_out
        }

        /// `wait_while(!flag)`, as `Condvar::wait_while` runs it.
        fn wait_for_flag(&self) {
            self.lock();
            while !self.flag() {
                assert!(!self.wait(None), "no deadline, no time-out");
            }
            self.unlock();
        }

        /// Nobody is left waiting or holding the lock.
        fn assert_quiet(&self) {
            assert_eq!(self.cv.get(), 0, "no waiter left on the condition variable");
            assert!(!notify_one(&self.cv, &self.table));
            assert_eq!(StateWord::load(&self.lock), 0, "unlocked, nobody parked");
        }
    }

    #[test]
    fn a_notify_after_the_unlock_that_set_the_flag_is_never_lost() {
        loom::model(|| {
            let m = Model::new();
            let m2 = m.clone();
            let waiter = loom::thread::spawn(move || m2.wait_for_flag());
            m.lock();
            m.set_flag();
            m.unlock();
            notify_one(&m.cv, &m.table);
            waiter.join().unwrap();
            m.assert_quiet();
        });
    }

    #[test]
    fn a_notify_made_while_holding_the_mutex_is_never_lost() {
        loom::model(|| {
            let m = Model::new();
            let m2 = m.clone();
            let waiter = loom::thread::spawn(move || m2.wait_for_flag());
            m.lock();
            m.set_flag();
            notify_one(&m.cv, &m.table);
            m.unlock();
            waiter.join().unwrap();
            m.assert_quiet();
        });
    }

    #[test]
    fn notify_all_wakes_both_waiters() {
        loom::model(|| {
            let m = Model::new();
            let waiters: Vec<_> = (0..2)
                .map(|_| {
                    let m = m.clone();
                    loom::thread::spawn(move || m.wait_for_flag())
                })
                .collect();
            m.lock();
            m.set_flag();
            m.unlock();
            notify_all(&m.cv, &m.table);
            for w in waiters {
                w.join().unwrap();
            }
            m.assert_quiet();
        });
    }

    #[test]
    fn a_time_out_racing_a_notify_ends_either_woken_or_dequeued_never_both() {
        // A deadline already past: the waiter queues, unlocks, finds no token and leaves,
        // unless the notify dequeued it first (deterministic without a clock).
        loom::model(|| {
            let m = Model::new();
            let m2 = m.clone();
            let waiter = loom::thread::spawn(move || {
                m2.lock();
                let timed_out = m2.wait(Some(Instant::now()));
                m2.unlock();
                timed_out
            });
            m.lock();
            m.unlock();
            let notified = notify_one(&m.cv, &m.table);
            let timed_out = waiter.join().unwrap();
            assert_eq!(
                notified, !timed_out,
                "a notify that dequeued the waiter wakes it; a waiter that timed out was \
                 dequeued by nobody else"
            );
            m.assert_quiet();
        });
    }
}
