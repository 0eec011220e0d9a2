//! A 32-bit word threads can sleep on: Linux futexes, or elsewhere a futex emulated with std's
//! thread parking ([`portable`]). The turnstile lock's parked threads each sleep on a word of
//! their own ([`super::park`]), never on the lock's state, so a lock that changes hands
//! millions of times a second does not make its sleepers' futex waits fail; the spin-limited
//! variants' Drepper mutex sleeps on its own word.
//!
//! The emulation can be forced on Linux, to test it there:
//! `RUSTFLAGS="--cfg turnstile_portable_park" cargo test -p turnstile --release`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The word's memory orderings, shared with the model checker's word ([`ModelFutexWord`]): a
/// token or lock state stored with release is read with acquire by the thread it wakes.
const LOAD: Ordering = Ordering::Acquire;
const STORE: Ordering = Ordering::Release;

/// The word: an `AtomicU32`, slept on with `futex(2)` on Linux.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct FutexWord(AtomicU32);

impl FutexWord {
    pub(crate) const fn new(v: u32) -> Self {
        FutexWord(AtomicU32::new(v))
    }

    #[inline]
    pub(crate) fn load(&self) -> u32 {
        self.0.load(LOAD)
    }

    #[inline]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn store(&self, v: u32) {
        self.0.store(v, STORE)
    }

    /// Compare-and-swap, acquire-release on success (the historical locks' word).
    #[cfg(feature = "historical")]
    #[inline]
    pub(crate) fn cas(&self, current: u32, new: u32) -> Result<u32, u32> {
        self.0
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Relaxed)
    }

    /// Swaps in `new`, returning the old value (acquire-release; the historical locks' word).
    #[cfg(feature = "historical")]
    #[inline]
    pub(crate) fn swap(&self, new: u32) -> u32 {
        self.0.swap(new, Ordering::AcqRel)
    }

    /// Sleeps while the word holds `expected`, for at most `timeout`. May return early
    /// (a signal, a stale wake-up): callers re-check the word.
    #[cfg(all(target_os = "linux", not(turnstile_portable_park)))]
    pub(crate) fn wait(&self, expected: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: FUTEX_WAIT reads the u32 at `self.0.as_ptr()`, which is valid and aligned for
        // as long as `self` is borrowed (the whole call); `ts_ptr` is null or points to a
        // timespec that outlives the call. The kernel compares and sleeps atomically, so a
        // wake after our caller's last check of the word cannot be missed.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
            );
        }
    }

    /// Wakes one thread sleeping on the word, if any.
    #[cfg(all(target_os = "linux", not(turnstile_portable_park)))]
    pub(crate) fn wake_one(&self) {
        // SAFETY: FUTEX_WAKE only uses the address as a key to find sleepers; it never
        // dereferences it beyond validation, and the address is valid while `self` is.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }

    /// Sleeps while the word holds `expected`, for at most `timeout`. May return early (a
    /// stale wake-up): callers re-check the word.
    #[cfg(any(not(target_os = "linux"), turnstile_portable_park))]
    pub(crate) fn wait(&self, expected: u32, timeout: Option<Duration>) {
        portable::wait(&self.0, expected, timeout)
    }

    /// Wakes one thread sleeping on the word, if any.
    #[cfg(any(not(target_os = "linux"), turnstile_portable_park))]
    pub(crate) fn wake_one(&self) {
        portable::wake_one(&self.0)
    }
}

/// Without futexes (or with `--cfg turnstile_portable_park`): `wait` and `wake_one` on any
/// 32-bit word, built on `std::thread::park_timeout`. A sleeper queues a record of itself (its
/// `Thread` and a woken flag, made once per thread) under the word's address in a fixed table of
/// buckets, after checking the word under the bucket mutex; a waker takes the first record for
/// the address off the queue under the same mutex, sets its flag and unparks it. As with a
/// futex, a wake after the sleeper's check cannot be missed: the waker changed the word before
/// taking the bucket mutex, so either the sleeper's check (under that mutex) sees the change or
/// the waker finds the sleeper queued. A timed-out sleeper removes its record, unless a waker
/// already has (then the wake-up is its).
#[cfg(any(not(target_os = "linux"), turnstile_portable_park))]
mod portable {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::thread::Thread;
    use std::time::{Duration, Instant};

    /// A sleeping thread: its handle, and whether a waker has taken it off its queue.
    struct Sleeper {
        thread: Thread,
        woken: AtomicBool,
    }

    type Queue = VecDeque<(usize, Arc<Sleeper>)>;

    /// One bucket's queue, on a cache line of its own so that sleepers on unrelated words do
    /// not share one.
    #[repr(align(64))]
    struct Bucket(Mutex<Queue>);

    /// Buckets: a power of two, a few times the cores that may have sleepers at once (the
    /// sizing rule of the parking table, `super::super::raw`'s `BUCKETS`, scaled to this
    /// fallback, which only the spin-limited mutexes' words and the parkers' own words use);
    /// a collision only lengthens a queue scan.
    const BUCKETS: usize = 256;

    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: Bucket = Bucket(Mutex::new(VecDeque::new()));
    static TABLE: [Bucket; BUCKETS] = [EMPTY; BUCKETS];

    fn queue(addr: usize) -> MutexGuard<'static, Queue> {
        // Fibonacci hashing, as in the parking table.
        let h = (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        // Poisoning: no code panics while holding a bucket mutex with the queue half-changed.
        TABLE[h as usize & (BUCKETS - 1)]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn new_sleeper() -> Arc<Sleeper> {
        Arc::new(Sleeper {
            thread: std::thread::current(),
            woken: AtomicBool::new(false),
        })
    }

    /// This thread's record, made on its first sleep (a fresh one if thread-local storage is
    /// already gone, in a destructor at thread exit).
    fn me() -> Arc<Sleeper> {
        thread_local!(static ME: Arc<Sleeper> = new_sleeper());
        ME.try_with(Arc::clone).unwrap_or_else(|_| new_sleeper())
    }

    pub(super) fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let addr = word as *const AtomicU32 as usize;
        // A timeout too large to add to a clock reading means none.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let me = me();
        {
            let mut q = queue(addr);
            if word.load(Ordering::Acquire) != expected {
                return;
            }
            me.woken.store(false, Ordering::Relaxed);
            q.push_back((addr, me.clone()));
        }
        loop {
            // Set by the waker under the bucket mutex, before its unpark; a stale unpark (from
            // an earlier wait's waker) only makes `park` return early.
            if me.woken.load(Ordering::Acquire) {
                return;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    std::thread::park_timeout(d - now);
                }
            }
        }
        let mut q = queue(addr);
        if let Some(i) = q.iter().position(|(_, s)| Arc::ptr_eq(s, &me)) {
            q.remove(i);
        }
    }

    pub(super) fn wake_one(word: &AtomicU32) {
        let addr = word as *const AtomicU32 as usize;
        let mut q = queue(addr);
        if let Some(i) = q.iter().position(|(a, _)| *a == addr) {
            let (_, s) = q.remove(i).expect("position is in the queue");
            s.woken.store(true, Ordering::Release);
            drop(q);
            s.thread.unpark();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::FutexWord;
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    #[test]
    fn a_wait_on_a_word_that_no_longer_holds_the_expected_value_returns() {
        let w = FutexWord::new(1);
        w.wait(0, None);
        assert_eq!(w.load(), 1);
    }

    #[test]
    fn a_timed_wait_returns_without_a_wake_up() {
        let w = FutexWord::new(0);
        w.wait(0, Some(Duration::from_millis(10)));
        assert_eq!(w.load(), 0);
    }

    #[test]
    fn a_wake_up_ends_a_sleep_even_while_the_word_is_unchanged() {
        // The sleeper really sleeps: only `wake_one` (never a change of the word, which stays
        // 0) can end its wait. The former non-Linux fallback, a yield loop with a `wake_one`
        // that did nothing, never returned here.
        let w = Arc::new(FutexWord::new(0));
        let (tx, rx) = mpsc::channel();
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            w2.wait(0, None);
            tx.send(()).unwrap();
        });
        let mut woke = false;
        for _ in 0..2000 {
            w.wake_one(); // a wake before the sleep begins wakes nobody: try again
            if rx.recv_timeout(Duration::from_millis(10)).is_ok() {
                woke = true;
                break;
            }
        }
        assert!(woke, "wake_one never ended the wait");
        t.join().unwrap();
    }

    #[test]
    fn every_sleeper_on_a_word_is_woken_by_as_many_wake_ups() {
        let w = Arc::new(FutexWord::new(0));
        let (tx, rx) = mpsc::channel();
        let sleepers: Vec<_> = (0..8)
            .map(|_| {
                let (w, tx) = (w.clone(), tx.clone());
                std::thread::spawn(move || {
                    while w.load() == 0 {
                        w.wait(0, None);
                    }
                    tx.send(()).unwrap();
                })
            })
            .collect();
        w.store(1);
        for _ in 0..8 {
            w.wake_one();
        }
        // A sleeper that had not begun its wait when the wake-ups came sees the word changed.
        for _ in 0..8 {
            rx.recv_timeout(Duration::from_secs(60))
                .expect("a sleeper was never woken");
        }
        for t in sleepers {
            t.join().unwrap();
        }
    }
}

/// Under `--cfg loom`: a futex word the model checker can explore, for the parking table's
/// parkers (the real [`Parker`](super::park) code runs on it). The word is loom's atomic with
/// [`FutexWord`]'s orderings; the sleep is a modelled mutex and condition variable, checked
/// and entered atomically with respect to a wake (the waker takes the mutex after changing
/// the word), which is the guarantee `FUTEX_WAIT` gives. Loom has no clock: timeouts are not
/// modelled (the model checks pass no deadlines).
#[cfg(loom)]
#[cfg_attr(not(test), allow(dead_code))] // only the model checks park
pub(crate) struct ModelFutexWord {
    word: crate::sync::AtomicU32,
    sleep: crate::sync::Mutex<()>,
    cv: crate::sync::Condvar,
}

#[cfg(loom)]
#[cfg_attr(not(test), allow(dead_code))]
impl ModelFutexWord {
    pub(crate) fn new(v: u32) -> Self {
        ModelFutexWord {
            word: crate::sync::AtomicU32::new(v),
            sleep: crate::sync::Mutex::new(()),
            cv: crate::sync::Condvar::new(),
        }
    }

    pub(crate) fn load(&self) -> u32 {
        self.word.load(LOAD)
    }

    pub(crate) fn store(&self, v: u32) {
        self.word.store(v, STORE)
    }

    pub(crate) fn wait(&self, expected: u32, _timeout: Option<Duration>) {
        let g = crate::sync::lock(&self.sleep);
        if self.load() == expected {
            drop(self.cv.wait(g));
        }
    }

    pub(crate) fn wake_one(&self) {
        let _g = crate::sync::lock(&self.sleep);
        self.cv.notify_one();
    }
}
