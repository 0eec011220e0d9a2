//! A 32-bit word threads can sleep on: Linux futexes, or a yield loop elsewhere. The turnstile
//! lock's parked threads each sleep on a word of their own ([`super::park`]), never on the
//! lock's state, so a lock that changes hands millions of times a second does not make its
//! sleepers' futex waits fail; the spin-limited variants' Drepper mutex sleeps on its own word.

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

    /// Compare-and-swap, acquire-release on success.
    #[inline]
    pub(crate) fn cas(&self, current: u32, new: u32) -> Result<u32, u32> {
        self.0
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Relaxed)
    }

    /// Swaps in `new`, returning the old value (acquire-release).
    #[inline]
    pub(crate) fn swap(&self, new: u32) -> u32 {
        self.0.swap(new, Ordering::AcqRel)
    }

    /// Sleeps while the word holds `expected`, for at most `timeout`. May return early
    /// (a signal, a stale wake-up): callers re-check the word.
    #[cfg(target_os = "linux")]
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
    #[cfg(target_os = "linux")]
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

    /// Without futexes: yield until the word changes (correct, not fast).
    #[cfg(not(target_os = "linux"))]
    pub(crate) fn wait(&self, expected: u32, timeout: Option<Duration>) {
        let start = std::time::Instant::now();
        while self.load() == expected && !timeout.is_some_and(|t| start.elapsed() >= t) {
            std::thread::yield_now();
        }
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn wake_one(&self) {}
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
