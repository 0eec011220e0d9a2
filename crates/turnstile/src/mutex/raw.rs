//! The turnstile lock: a 4-byte futex mutex that wakes one waiter at a time, spins only while
//! nobody is parked and only for a bounded time, avoids redundant wake-ups, and hands the lock
//! directly to a waiter that has waited more than 1 ms — at a bounded rate, so that fairness
//! does not turn into a convoy.
//!
//! The design starts from Go's `sync.Mutex` (a waiter count and `woken`/`starving` bits in the
//! state word) with the semaphore replaced by a futex on the state word itself, so the whole
//! lock is one `u32`. Go hands off on *every* unlock while starving; on a machine with many
//! more runnable threads than cores every waiter has waited over 1 ms, the lock then stays in
//! hand-off mode, and each hand-off leaves the lock idle for a wake-up latency (the FIFO
//! problem of seed 001; measured here as an 8× slowdown at 256 threads, hold 1 µs). So, like
//! parking_lot's eventual fairness, a thread performs at most one hand-off per
//! [`FAIR_HANDOFF_INTERVAL`]; its other unlocks release normally.
//!
//! # The state word
//!
//! | bits | name | meaning |
//! |---|---|---|
//! | 0 | `LOCKED` | someone owns the lock (or it is being handed off, see `HANDOFF`) |
//! | 1 | `WOKEN` | a waiter has been woken (or told to re-check) and is on its way: an unlocker need not wake another |
//! | 2 | `HANDOFF` | hand-off in progress: `LOCKED` stays set and the first *waiter* to re-check takes ownership |
//! | 3 | `STARVING` | a waiter has waited > 1 ms and asks for a hand-off |
//! | 4–31 | waiters | threads registered as waiting (parked, or about to park / re-check) |
//!
//! Legal combinations and who moves between them (`n·W`: n registered waiters):
//!
//! | state | reached by | left by |
//! |---|---|---|
//! | `0` | unlock with no waiters | fast lock (`CAS 0 → LOCKED`) |
//! | `LOCKED` | fast lock, or acquisition by a spinner or the last waiter | fast unlock (`CAS LOCKED → 0`) |
//! | `LOCKED + n·W (+ STARVING)` | a thread registering (or a waiter past 1 ms re-parking) while the lock is held | unlock: `−LOCKED +WOKEN` and wake one; or, if `STARVING` and this thread's hand-off budget allows, `+HANDOFF +WOKEN` and wake one |
//! | `n·W + WOKEN (+ STARVING)` (unlocked) | unlock that woke a waiter | a waiter acquiring (`−W −WOKEN +LOCKED`), or a newcomer barging (`+LOCKED`) |
//! | `LOCKED + n·W + WOKEN (+ STARVING)` | a newcomer barged in while a woken waiter was on its way | that waiter re-parking (`−WOKEN`) or timing out (`−W −WOKEN`); unlock only clears `LOCKED` |
//! | `LOCKED + HANDOFF + WOKEN + STARVING + n·W` | hand-off | a waiter claiming it (`−W −HANDOFF −WOKEN −STARVING`) |
//!
//! Invariants: `HANDOFF ⇒ LOCKED + STARVING + WOKEN + waiters ≥ 1`; `STARVING ⇒ waiters > 0`
//! (the last waiter to leave clears it); `WOKEN ⇒` some registered waiter will re-check the
//! word (it was woken, or its futex wait fails because the word changed) and every re-check
//! clears `WOKEN`, so an unlocker that skipped the wake-up because of `WOKEN` never strands a
//! waiter. A waiter never leaves while `HANDOFF` is set: it takes the lock instead.

use std::time::{Duration, Instant};

use super::futex::{FutexWord, Wake, Word};

const LOCKED: u32 = 1;
const WOKEN: u32 = 1 << 1;
const HANDOFF: u32 = 1 << 2;
const STARVING: u32 = 1 << 3;
const WAITER: u32 = 1 << 4;

#[inline]
fn waiters(s: u32) -> u32 {
    s >> 4
}

/// How long an arriving thread may spin (and then yield) before it parks, while nobody is
/// parked. A futex sleep and wake-up costs two system calls (about 1 µs each in the
/// development VM) and the waiter a wake-up latency, so a short bounded spin pays for
/// critical sections of a microsecond or so. Measured with `turnstile bench mutex` on the
/// 2-core development machine: 0.5, 2 and 8 µs of pure PAUSE spinning gave the same ns/loop
/// within noise at hold 0 and 1000 ns; yielding after 32 PAUSEs (as parking_lot's SpinWait
/// does) helped at hold 0 with several mutexes, so the spin is 32 PAUSEs, then yields, for at
/// most 2 µs in all.
pub const SPIN_LIMIT: Duration = Duration::from_micros(2);

/// PAUSE iterations before the spinner starts yielding instead.
const SPIN_PAUSES: u32 = 32;

/// A waiter that has waited this long asks for a hand-off: Go's `starvationThresholdNs`
/// (1 ms), the bound the brief asks for.
pub const STARVATION_THRESHOLD: Duration = Duration::from_millis(1);

/// A thread hands the lock off at most once per this interval (its other unlocks release
/// normally): parking_lot's eventual-fairness period (0.5 ms on average), which bounds the
/// throughput lost to hand-offs to one wake-up latency per interval per unlocking thread.
pub const FAIR_HANDOFF_INTERVAL: Duration = Duration::from_micros(500);

thread_local! {
    /// When this thread may next hand a lock off (shared by every lock it unlocks).
    static NEXT_FAIR_HANDOFF: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Whether this thread may hand off now (and if so, spends its budget).
fn may_hand_off(interval: Duration) -> bool {
    if interval.is_zero() {
        return true;
    }
    let now = Instant::now();
    NEXT_FAIR_HANDOFF.with(|c| {
        if c.get().is_some_and(|t| now < t) {
            false
        } else {
            c.set(Some(now + interval));
            true
        }
    })
}

/// Hooks the slow paths call, for instrumentation. [`NoStats`] compiles to nothing.
pub trait LockStats {
    /// The empty value (for `const` construction).
    const INIT: Self;
    /// Spun `iterations` times before taking the lock or parking (called once per slow path).
    fn spun(&self, iterations: u32) {
        let _ = iterations;
    }
    /// About to sleep on the futex.
    fn park(&self) {}
    /// Returned from a futex sleep because another thread woke it.
    fn woken(&self) {}
    /// Acquired the lock after sleeping at least once.
    fn slept_acquire(&self) {}
    /// An unlock woke a waiter.
    fn wake_sent(&self) {}
    /// An unlock handed ownership directly to a waiter (starvation mode).
    fn handoff(&self) {}
}

/// No instrumentation: the plain lock.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStats;

impl LockStats for NoStats {
    const INIT: Self = NoStats;
}

/// The turnstile raw mutex. Use it through [`crate::mutex::Mutex`] (a `lock_api::Mutex`), or
/// with a [`LockStats`] implementation for counters (see [`crate::mutex::Instrumented`]).
#[derive(Debug)]
pub struct RawTurnstileMutex<S: LockStats = NoStats> {
    word: FutexWord,
    stats: S,
}

impl<S: LockStats> RawTurnstileMutex<S> {
    /// An unlocked mutex.
    pub const fn new() -> Self {
        RawTurnstileMutex {
            word: FutexWord::new(0),
            stats: S::INIT,
        }
    }

    /// The instrumentation hooks.
    pub fn stats(&self) -> &S {
        &self.stats
    }

    /// Locks, waiting at most until `deadline`. Returns whether it got the lock.
    #[inline]
    pub fn lock_until(&self, deadline: Option<Instant>) -> bool {
        self.word.cas(0, LOCKED).is_ok() || lock_slow(&self.word, &self.stats, deadline)
    }
}

impl<S: LockStats> Default for RawTurnstileMutex<S> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `lock` returns only after this thread set `LOCKED` by a successful CAS from a state
// without `LOCKED`, or took a `HANDOFF` (which keeps `LOCKED` set and admits exactly one
// claimer, by CAS). Until `unlock` clears `LOCKED` or passes it on by `HANDOFF`, no other
// thread can do either, so at most one thread holds the lock. The CASes are acquire/release,
// so the critical sections are ordered.
unsafe impl<S: LockStats + Send + Sync> lock_api::RawMutex for RawTurnstileMutex<S> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if self.word.cas(0, LOCKED).is_err() {
            lock_slow(&self.word, &self.stats, None);
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        let s = self.word.load();
        s & LOCKED == 0 && self.word.cas(s, s | LOCKED).is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        if self.word.cas(LOCKED, 0).is_err() {
            unlock_slow(&self.word, &self.stats);
        }
    }

    fn is_locked(&self) -> bool {
        self.word.load() & LOCKED != 0
    }
}

// SAFETY: as for `RawMutex`; the timed variants only add a deadline to the same slow path,
// and a waiter that times out leaves by CAS without ever owning the lock.
unsafe impl<S: LockStats + Send + Sync> lock_api::RawMutexTimed for RawTurnstileMutex<S> {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        // A timeout too large to add to a clock reading means no deadline.
        self.lock_until(Instant::now().checked_add(timeout))
    }

    fn try_lock_until(&self, deadline: Instant) -> bool {
        self.lock_until(Some(deadline))
    }
}

/// The slow path of lock: spin briefly while nobody is parked, then register and park.
#[cold]
pub(crate) fn lock_slow<W: Word, S: LockStats>(
    w: &W,
    stats: &S,
    deadline: Option<Instant>,
) -> bool {
    lock_slow_with(w, stats, deadline, STARVATION_THRESHOLD)
}

/// [`lock_slow`] with the starvation threshold as a parameter (the model checker sets it to
/// zero to explore the hand-off path).
fn lock_slow_with<W: Word, S: LockStats>(
    w: &W,
    stats: &S,
    deadline: Option<Instant>,
    starve_after: Duration,
) -> bool {
    // 1. Spin while the lock is held and nobody is parked, for a bounded time. Most
    //    collisions clear within a few iterations, so the clock is first read after 32 of them
    //    and then every 16.
    let mut spin_start = None;
    let mut i = 0u32;
    let mut s = w.load();
    loop {
        if s & LOCKED == 0 {
            match w.cas(s, s | LOCKED) {
                Ok(_) => {
                    if i > 0 {
                        stats.spun(i);
                    }
                    return true;
                }
                Err(x) => {
                    s = x;
                    continue;
                }
            }
        }
        if waiters(s) != 0 || cfg!(loom) {
            break;
        }
        i += 1;
        if i <= SPIN_PAUSES {
            std::hint::spin_loop();
        } else {
            let start = *spin_start.get_or_insert_with(Instant::now);
            if start.elapsed() >= SPIN_LIMIT {
                break;
            }
            std::thread::yield_now();
        }
        s = w.load();
    }
    if i > 0 {
        stats.spun(i);
    }
    // 2. Register as a waiter (or take the lock if it came free).
    loop {
        if s & LOCKED == 0 {
            match w.cas(s, s | LOCKED) {
                Ok(_) => return true,
                Err(x) => s = x,
            }
            continue;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        match w.cas(s, s + WAITER) {
            Ok(_) => {
                s += WAITER;
                break;
            }
            Err(x) => s = x,
        }
    }
    // 3. Re-check, then park until woken; we are counted in the waiters until we leave. The
    //    re-check comes first, also right after registering: it clears WOKEN before any
    //    sleep, so no futex wait ever expects a word with WOKEN or HANDOFF set. (Parking on the
    //    value the registration wrote, which could hold WOKEN, let that value come back later
    //    — ABA — and a waiter sleep while WOKEN told every unlocker not to wake anyone: a lost
    //    wake-up found by review with an exhaustive model of this state machine.)
    let wait_start = Instant::now();
    let mut starving = false;
    let mut slept = false;
    let mut timed_out = deadline.is_some_and(|d| Instant::now() >= d);
    loop {
        if slept {
            let timeout = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let woke = w.wait(s, timeout);
            if woke == Wake::Woken {
                stats.woken();
            }
            timed_out = woke == Wake::TimedOut || deadline.is_some_and(|d| Instant::now() >= d);
            starving = starving || wait_start.elapsed() >= starve_after;
            s = w.load();
        }
        loop {
            let last = waiters(s) == 1;
            if s & HANDOFF != 0 {
                // The hand-off answers the current request; waiters still past the threshold
                // ask again when they next re-park.
                let new = (s - WAITER) & !(HANDOFF | WOKEN | STARVING);
                match w.cas(s, new) {
                    Ok(_) => {
                        if slept {
                            stats.slept_acquire();
                        }
                        return true;
                    }
                    Err(x) => s = x,
                }
                continue;
            }
            if s & LOCKED == 0 {
                let mut new = ((s - WAITER) | LOCKED) & !WOKEN;
                if last {
                    new &= !STARVING;
                }
                match w.cas(s, new) {
                    Ok(_) => {
                        if slept {
                            stats.slept_acquire();
                        }
                        return true;
                    }
                    Err(x) => s = x,
                }
                continue;
            }
            if timed_out {
                let mut new = (s - WAITER) & !WOKEN;
                if last {
                    new &= !STARVING;
                }
                match w.cas(s, new) {
                    Ok(_) => return false,
                    Err(x) => s = x,
                }
                continue;
            }
            // Still held: park again, giving up any WOKEN mark so the holder's unlock wakes
            // someone, and announcing starvation if we have waited too long.
            let mut new = s & !WOKEN;
            if starving {
                new |= STARVING;
            }
            if new == s {
                break;
            }
            match w.cas(s, new) {
                Ok(_) => {
                    s = new;
                    break;
                }
                Err(x) => s = x,
            }
        }
        debug_assert_eq!(
            s & (WOKEN | HANDOFF),
            0,
            "parking on a word that asks for a wake-up"
        );
        slept = true;
        stats.park();
    }
}

/// The slow path of unlock: wake one waiter, hand off, or just release.
#[cold]
pub(crate) fn unlock_slow<W: Word, S: LockStats>(w: &W, stats: &S) {
    unlock_slow_with(w, stats, FAIR_HANDOFF_INTERVAL)
}

/// [`unlock_slow`] with the hand-off interval as a parameter (zero: always hand off when
/// asked; the model checker uses it, as thread-local clocks would make the model
/// nondeterministic).
fn unlock_slow_with<W: Word, S: LockStats>(w: &W, stats: &S, fair_every: Duration) {
    let mut budget: Option<bool> = None;
    let mut s = w.load();
    loop {
        debug_assert!(
            s & LOCKED != 0 && s & HANDOFF == 0,
            "unlock of an unlocked mutex"
        );
        let r = if waiters(s) == 0 || s & WOKEN != 0 {
            // Nobody to wake, or someone is already on the way.
            w.cas(s, s & !LOCKED).map(|_| false)
        } else if s & STARVING != 0 && *budget.get_or_insert_with(|| may_hand_off(fair_every)) {
            w.cas(s, s | HANDOFF | WOKEN).map(|_| {
                stats.handoff();
                true
            })
        } else {
            w.cas(s, (s & !LOCKED) | WOKEN).map(|_| true)
        };
        match r {
            Ok(wake) => {
                if wake {
                    stats.wake_sent();
                    w.wake_one();
                }
                return;
            }
            Err(x) => s = x,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lock_api::{RawMutex, RawMutexTimed};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_lock_is_four_bytes() {
        assert_eq!(std::mem::size_of::<RawTurnstileMutex>(), 4);
    }

    #[test]
    fn try_lock_fails_while_held_and_timed_lock_expires() {
        let m = Arc::new(RawTurnstileMutex::<NoStats>::new());
        m.lock();
        assert!(!m.try_lock());
        assert!(m.is_locked());
        let m2 = m.clone();
        let got = std::thread::spawn(move || m2.try_lock_for(Duration::from_millis(20)))
            .join()
            .unwrap();
        assert!(!got, "the timed lock expired while held");
        // The expired waiter left nothing behind: the word is just LOCKED.
        assert_eq!(m.word.load(), LOCKED);
        unsafe { m.unlock() };
        assert_eq!(m.word.load(), 0);
        assert!(m.try_lock_for(Duration::from_millis(1)));
        unsafe { m.unlock() };
    }

    #[test]
    fn a_timed_lock_succeeds_when_released_in_time() {
        let m = Arc::new(RawTurnstileMutex::<NoStats>::new());
        m.lock();
        let m2 = m.clone();
        let t = std::thread::spawn(move || {
            let ok = m2.try_lock_for(Duration::from_secs(20));
            if ok {
                unsafe { m2.unlock() };
            }
            ok
        });
        std::thread::sleep(Duration::from_millis(5));
        unsafe { m.unlock() };
        assert!(t.join().unwrap());
        assert_eq!(m.word.load(), 0);
    }

    #[derive(Default)]
    struct Counting {
        handoffs: AtomicU64,
    }
    impl LockStats for Counting {
        const INIT: Self = Counting {
            handoffs: AtomicU64::new(0),
        };
        fn handoff(&self) {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_waiter_starved_past_a_millisecond_gets_the_lock_handed_to_it() {
        let m = Arc::new(RawTurnstileMutex::<Counting>::new());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        m.lock();
        let (m2, done2) = (m.clone(), done.clone());
        // The waiter keeps asking (if it wins a race normally, it simply asks again).
        let waiter = std::thread::spawn(move || {
            while !done2.load(Ordering::Relaxed) {
                m2.lock();
                unsafe { m2.unlock() };
            }
        });
        // This thread holds the lock for 2 ms at a time and re-locks at once after each
        // release, winning the race against a woken waiter; a waiter past the threshold asks
        // for a hand-off and gets one.
        let deadline = Instant::now() + Duration::from_secs(60);
        while m.stats().handoffs.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "no hand-off happened");
            std::thread::sleep(Duration::from_millis(2));
            unsafe { m.unlock() };
            m.lock();
        }
        done.store(true, Ordering::Relaxed);
        unsafe { m.unlock() };
        waiter.join().unwrap();
        assert_eq!(m.word.load(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the lock's state machine: `RUSTFLAGS="--cfg loom" cargo test -p
    //! turnstile --release --lib mutex`. The futex is modelled by a loom mutex and condition
    //! variable with the kernel's compare-and-sleep semantics.
    use super::*;
    use loom::sync::atomic::{AtomicU32, Ordering};
    use loom::sync::{Arc, Condvar, Mutex};

    struct LoomWord {
        v: AtomicU32,
        m: Mutex<()>,
        cv: Condvar,
    }

    impl LoomWord {
        fn new() -> Self {
            LoomWord {
                v: AtomicU32::new(0),
                m: Mutex::new(()),
                cv: Condvar::new(),
            }
        }
    }

    impl Word for LoomWord {
        fn load(&self) -> u32 {
            self.v.load(Ordering::Acquire)
        }
        fn cas(&self, c: u32, n: u32) -> Result<u32, u32> {
            self.v
                .compare_exchange(c, n, Ordering::AcqRel, Ordering::Acquire)
        }
        fn swap(&self, n: u32) -> u32 {
            self.v.swap(n, Ordering::AcqRel)
        }
        fn wait(&self, expected: u32, _timeout: Option<Duration>) -> Wake {
            let g = self.m.lock().unwrap();
            if self.v.load(Ordering::Acquire) != expected {
                return Wake::Changed;
            }
            drop(self.cv.wait(g).unwrap());
            Wake::Woken
        }
        fn wake_one(&self) {
            let _g = self.m.lock().unwrap();
            self.cv.notify_one();
        }
    }

    fn lock(w: &LoomWord, starve_after: Duration) {
        if w.cas(0, LOCKED).is_err() {
            assert!(lock_slow_with(w, &NoStats, None, starve_after));
        }
    }

    fn unlock(w: &LoomWord) {
        if w.cas(LOCKED, 0).is_err() {
            unlock_slow_with(w, &NoStats, Duration::ZERO);
        }
    }

    /// `threads` threads each lock and unlock `rounds` times; `starve_after` is `MAX` (never:
    /// real elapsed time would make the model nondeterministic) or zero (always hand off).
    /// Checks mutual exclusion, that nobody is stranded (loom reports deadlock), and
    /// that the word returns to 0.
    fn check(threads: usize, rounds: usize, starve_after: Duration) {
        loom::model(move || {
            let w = Arc::new(LoomWord::new());
            let inside = Arc::new(AtomicU32::new(0));
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let (w, inside) = (w.clone(), inside.clone());
                    loom::thread::spawn(move || {
                        for _ in 0..rounds {
                            lock(&w, starve_after);
                            assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                            inside.fetch_sub(1, Ordering::SeqCst);
                            unlock(&w);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(w.load(), 0);
        });
    }

    #[test]
    fn two_threads_exclude_each_other_and_nobody_is_stranded() {
        check(2, 2, Duration::MAX);
    }

    #[test]
    fn three_threads_exclude_each_other_and_nobody_is_stranded() {
        check(3, 1, Duration::MAX);
    }

    #[test]
    fn three_threads_two_rounds_lose_no_wake_up() {
        check(3, 2, Duration::MAX);
    }

    #[test]
    fn starvation_hand_offs_keep_exclusion_and_lose_no_wake_up() {
        check(2, 2, Duration::ZERO);
        check(3, 1, Duration::ZERO);
    }
}
