//! The InnoDB 5.6 mutex (`ib_mutex_t`, `mutex_enter_func` / `mutex_spin_wait` / `mutex_exit`),
//! reproduced to measure it, not to use it.
//!
//! * **Lock**: test-and-set the lock word. On failure spin: up to `SYNC_SPIN_ROUNDS` (30) rounds
//!   of testing the word, each followed by `ut_delay(ut_rnd_interval(0, srv_spin_wait_delay))`
//!   — a random 0–6 × 50 PAUSE instructions. After the rounds, yield once, try again; then
//!   reserve a cell in the global *sync array* (a table guarded by its own mutex), reset the
//!   mutex's event, set the `waiters` flag, try the lock 4 more times, and sleep on the event.
//!   When woken, start over from the spin loop.
//! * **Unlock**: clear the lock word; if `waiters` is set, clear it and *set the event*, which
//!   broadcasts: every sleeper wakes, and all but one go back to sleep. With N waiters that is
//!   O(N) wake-ups per unlock and O(N²) CPU per N hand-overs — the behaviour seed 002 measured.
//! * It remembers the file and line of the last locker, counts requests, spin rounds, yields and
//!   sync-array waits, and the sync array can be listed by a monitor
//!   ([`sync_array_waits`]) as `SHOW ENGINE INNODB STATUS` does, with InnoDB's long-wait
//!   warning ([`long_waits`]).

use std::cell::Cell as StdCell;
use std::panic::Location;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// `SYNC_SPIN_ROUNDS`: spin rounds before the yield and the sync array (InnoDB 5.6 default of
/// `innodb_sync_spin_loops` = 30).
pub const SYNC_SPIN_ROUNDS: u32 = 30;
/// `srv_spin_wait_delay`: the upper bound of the random delay per round (5.6 default 6).
pub const SPIN_WAIT_DELAY: u32 = 6;
/// `ut_delay(n)` executes `n * 50` PAUSE instructions (`UT_RELAX_CPU`) in 5.6.
const PAUSES_PER_DELAY_UNIT: u32 = 50;
/// Extra test-and-set attempts after setting the waiters flag (`for (i = 0; i < 4; i++)`).
const TRIES_AFTER_RESERVE: u32 = 4;

/// `os_event_t`: a manual-reset event with a signal count, on a pthread-style mutex and
/// condition variable. `set` broadcasts.
#[derive(Debug)]
struct OsEvent {
    state: Mutex<EventState>,
    cond: Condvar,
}

#[derive(Debug)]
struct EventState {
    is_set: bool,
    signal_count: u64,
}

impl OsEvent {
    const fn new() -> Self {
        OsEvent {
            state: Mutex::new(EventState {
                is_set: false,
                signal_count: 1,
            }),
            cond: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EventState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `os_event_reset`: clear, and return the signal count to wait against.
    fn reset(&self) -> u64 {
        let mut s = self.lock();
        s.is_set = false;
        s.signal_count
    }

    /// `os_event_set`: set and wake every waiter.
    fn set(&self) {
        let mut s = self.lock();
        if !s.is_set {
            s.is_set = true;
            s.signal_count += 1;
            self.cond.notify_all();
        }
    }

    /// `os_event_wait_low`: wait until set, or the signal count moved past `reset_count`.
    /// Returns how many times this thread woke from the condition variable.
    fn wait(&self, reset_count: u64) -> u64 {
        let mut wakeups = 0;
        let mut s = self.lock();
        while !s.is_set && s.signal_count == reset_count {
            s = self.cond.wait(s).unwrap_or_else(|e| e.into_inner());
            wakeups += 1;
        }
        wakeups
    }
}

/// One waiting thread in the sync array (`sync_cell_t`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SyncCell {
    /// Address of the mutex waited for.
    pub mutex: usize,
    /// The waiting thread.
    pub thread: ThreadId,
    /// Where it asked for the lock.
    pub location: &'static Location<'static>,
    /// When it reserved the cell.
    pub since: Instant,
    /// Where the holder locked it, when the cell was reserved.
    pub holder_location: Option<&'static Location<'static>>,
}

/// `sync_array_t`: the global wait table, guarded by its own mutex (InnoDB's was a pthread
/// mutex, `sync_array_enter`/`sync_array_exit`).
static SYNC_ARRAY: Mutex<Vec<Option<SyncCell>>> = Mutex::new(Vec::new());

fn sync_array() -> std::sync::MutexGuard<'static, Vec<Option<SyncCell>>> {
    SYNC_ARRAY.lock().unwrap_or_else(|e| e.into_inner())
}

fn reserve_cell(cell: SyncCell) -> usize {
    let mut a = sync_array();
    if let Some(i) = a.iter().position(Option::is_none) {
        a[i] = Some(cell);
        i
    } else {
        a.push(Some(cell));
        a.len() - 1
    }
}

fn free_cell(i: usize) {
    sync_array()[i] = None;
}

/// The threads waiting in the sync array now (`sync_array_print`).
pub fn sync_array_waits() -> Vec<SyncCell> {
    sync_array().iter().flatten().cloned().collect()
}

/// Waits longer than `threshold` (`sync_array_print_long_waits`: InnoDB warns past 240 s and
/// aborts the server when a wait passes `srv_fatal_semaphore_wait_threshold`, 600 s).
pub fn long_waits(threshold: Duration) -> Vec<SyncCell> {
    sync_array_waits()
        .into_iter()
        .filter(|c| c.since.elapsed() > threshold)
        .collect()
}

/// Counters of one mutex, as InnoDB keeps them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct InnodbMutexStats {
    /// Lock requests.
    pub requests: u64,
    /// Spin rounds taken.
    pub spin_rounds: u64,
    /// Yields after a full set of spin rounds.
    pub yields: u64,
    /// Sleeps in the sync array (`count_os_wait`).
    pub os_waits: u64,
    /// Returns from the condition variable (every broadcast wakes every sleeper).
    pub wakeups: u64,
    /// Acquisitions that slept at least once: `wakeups / slept_acquisitions` is how many times
    /// a sleeping thread was woken before it got the lock (1 for a wake-one lock; it grows with
    /// the number of sleepers under a broadcast).
    pub slept_acquisitions: u64,
}

/// The InnoDB 5.6 mutex. See the module documentation.
#[derive(Debug)]
pub struct InnodbMutex {
    lock_word: AtomicU32,
    waiters: AtomicU32,
    event: OsEvent,
    /// Last locker's `#[track_caller]` location (`file_name`, `line`), as a raw pointer-sized
    /// value written only by the holder.
    last_locker: std::sync::atomic::AtomicPtr<Location<'static>>,
    requests: AtomicU64,
    spin_rounds: AtomicU64,
    yields: AtomicU64,
    os_waits: AtomicU64,
    wakeups: AtomicU64,
    slept_acquisitions: AtomicU64,
}

impl Default for InnodbMutex {
    fn default() -> Self {
        Self::new()
    }
}

thread_local! {
    /// `ut_rnd_gen_ulint`'s state; per thread here (InnoDB's was a racy global).
    static RND: StdCell<u32> = const { StdCell::new(0x9E37_79B9) };
}

/// `ut_rnd_interval(0, high)`.
fn rnd_interval(high: u32) -> u32 {
    RND.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        r.set(x);
        x % (high + 1)
    })
}

/// `ut_delay(n)`: `n * 50` PAUSE instructions.
fn ut_delay(n: u32) {
    for _ in 0..n * PAUSES_PER_DELAY_UNIT {
        std::hint::spin_loop();
    }
}

impl InnodbMutex {
    /// An unlocked mutex.
    pub const fn new() -> Self {
        InnodbMutex {
            lock_word: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            event: OsEvent::new(),
            last_locker: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            requests: AtomicU64::new(0),
            spin_rounds: AtomicU64::new(0),
            yields: AtomicU64::new(0),
            os_waits: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
            slept_acquisitions: AtomicU64::new(0),
        }
    }

    #[inline]
    fn test_and_set(&self) -> bool {
        self.lock_word.swap(1, Ordering::Acquire) == 0
    }

    /// [`Self::test_and_set`] after the waiter announced itself (`waiters = 1`): the unlock
    /// stores the lock word and then loads `waiters`, this thread stores `waiters` and then
    /// swaps the lock word. Both sides `SeqCst`, so one of them sees the other's store (an
    /// `Acquire` swap would let both miss on a weak machine such as POWER, and the waiter
    /// would sleep with nobody left to wake it). On x86 and ARMv8 it is the same instruction.
    #[inline]
    fn test_and_set_announced(&self) -> bool {
        self.lock_word.swap(1, Ordering::SeqCst) == 0
    }

    /// Adds to a counter while holding the lock: only the holder writes, so a load and a store
    /// suffice.
    #[inline]
    fn add_locked(c: &AtomicU64, n: u64) {
        if n != 0 {
            c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
    }

    /// `mutex_enter`: locks, recording the caller as the last locker.
    #[track_caller]
    #[inline]
    pub fn lock(&self) {
        let location = Location::caller();
        let (mut rounds, mut yields, mut os_waits, mut wakeups) = (0u64, 0u64, 0u64, 0u64);
        if !self.test_and_set() {
            self.spin_wait(
                location,
                &mut rounds,
                &mut yields,
                &mut os_waits,
                &mut wakeups,
            );
        }
        self.last_locker
            .store(location as *const _ as *mut _, Ordering::Relaxed);
        Self::add_locked(&self.requests, 1);
        Self::add_locked(&self.spin_rounds, rounds);
        Self::add_locked(&self.yields, yields);
        Self::add_locked(&self.os_waits, os_waits);
        Self::add_locked(&self.wakeups, wakeups);
        Self::add_locked(&self.slept_acquisitions, (os_waits > 0) as u64);
    }

    /// `mutex_enter_nowait`.
    pub fn try_lock(&self) -> bool {
        self.test_and_set()
    }

    #[cold]
    fn spin_wait(
        &self,
        location: &'static Location<'static>,
        rounds: &mut u64,
        yields: &mut u64,
        os_waits: &mut u64,
        wakeups: &mut u64,
    ) {
        loop {
            // mutex_loop:
            let mut i = 0;
            loop {
                // spin_loop:
                while self.lock_word.load(Ordering::Relaxed) != 0 && i < SYNC_SPIN_ROUNDS {
                    ut_delay(rnd_interval(SPIN_WAIT_DELAY));
                    i += 1;
                    *rounds += 1;
                }
                if i == SYNC_SPIN_ROUNDS {
                    *yields += 1;
                    std::thread::yield_now();
                }
                if self.test_and_set() {
                    return;
                }
                i += 1;
                if i >= SYNC_SPIN_ROUNDS {
                    break;
                }
            }
            let holder = self.last_locker.load(Ordering::Relaxed);
            let cell = reserve_cell(SyncCell {
                mutex: self as *const _ as usize,
                thread: std::thread::current().id(),
                location,
                since: Instant::now(),
                // SAFETY: the pointer is null or was stored from a `&'static Location`.
                holder_location: unsafe { holder.as_ref() },
            });
            let signal_count = self.event.reset();
            self.waiters.store(1, Ordering::SeqCst);
            for _ in 0..TRIES_AFTER_RESERVE {
                if self.test_and_set_announced() {
                    // The waiters flag stays set: others may be waiting too.
                    free_cell(cell);
                    return;
                }
            }
            *os_waits += 1;
            *wakeups += self.event.wait(signal_count);
            free_cell(cell);
        }
    }

    /// `mutex_exit`: clears the lock word, and if anyone waits, wakes them all.
    ///
    /// # Safety
    /// The caller must hold the lock.
    #[inline]
    pub unsafe fn unlock(&self) {
        self.lock_word.store(0, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            self.waiters.store(0, Ordering::SeqCst);
            self.event.set();
        }
    }

    /// Where the mutex was last locked.
    pub fn last_locker(&self) -> Option<&'static Location<'static>> {
        // SAFETY: the pointer is null or was stored from a `&'static Location`.
        unsafe { self.last_locker.load(Ordering::Relaxed).as_ref() }
    }

    /// The mutex's counters.
    pub fn stats(&self) -> InnodbMutexStats {
        InnodbMutexStats {
            requests: self.requests.load(Ordering::Relaxed),
            spin_rounds: self.spin_rounds.load(Ordering::Relaxed),
            yields: self.yields.load(Ordering::Relaxed),
            os_waits: self.os_waits.load(Ordering::Relaxed),
            wakeups: self.wakeups.load(Ordering::Relaxed),
            slept_acquisitions: self.slept_acquisitions.load(Ordering::Relaxed),
        }
    }
}

// SAFETY: `lock` returns only after a successful test-and-set of the lock word from 0, and
// `unlock` (called only by the holder, per lock_api's contract) is the only place it returns to
// 0, so at most one thread holds it; the swap is acquire and the clearing store SeqCst.
unsafe impl lock_api::RawMutex for InnodbMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = InnodbMutex::new();
    type GuardMarker = lock_api::GuardSend;

    #[track_caller]
    fn lock(&self) {
        InnodbMutex::lock(self)
    }

    fn try_lock(&self) -> bool {
        InnodbMutex::try_lock(self)
    }

    unsafe fn unlock(&self) {
        // SAFETY: lock_api guarantees the caller holds the lock.
        unsafe { InnodbMutex::unlock(self) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn counts_requests_and_remembers_the_last_locker() {
        let m = InnodbMutex::new();
        m.lock();
        let line = line!() - 1;
        assert_eq!(m.last_locker().unwrap().line(), line);
        unsafe { m.unlock() };
        m.lock();
        unsafe { m.unlock() };
        assert_eq!(m.stats().requests, 2);
    }

    #[test]
    fn a_blocked_thread_shows_in_the_sync_array_and_wakes_on_unlock() {
        let m = Arc::new(InnodbMutex::new());
        m.lock();
        let m2 = m.clone();
        let t = std::thread::spawn(move || {
            m2.lock();
            unsafe { m2.unlock() };
        });
        let addr = Arc::as_ptr(&m) as usize;
        let start = Instant::now();
        while !sync_array_waits().iter().any(|c| c.mutex == addr) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "never reached the sync array"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let cell = sync_array_waits()
            .into_iter()
            .find(|c| c.mutex == addr)
            .unwrap();
        assert!(cell.location.file().ends_with("innodb.rs"));
        std::thread::sleep(Duration::from_millis(5));
        assert!(long_waits(Duration::from_millis(1))
            .iter()
            .any(|c| c.mutex == addr));
        unsafe { m.unlock() };
        t.join().unwrap();
        let s = m.stats();
        assert!(
            s.os_waits >= 1 && s.spin_rounds >= SYNC_SPIN_ROUNDS as u64,
            "{s:?}"
        );
        assert!(!sync_array_waits().iter().any(|c| c.mutex == addr));
    }
}
