//! A 32-bit word threads can sleep on: Linux futexes, or a yield loop elsewhere.
//!
//! The lock algorithms in this module are written against [`Word`], so the same code runs on
//! the real futex word and, under `--cfg loom`, on a model of it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How a sleep on the word ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Another thread woke this one.
    Woken,
    /// The word no longer held the expected value (or the sleep ended spuriously).
    Changed,
    /// The timeout expired.
    TimedOut,
}

/// An atomic word with sleep/wake, as the lock algorithms need it.
pub(crate) trait Word {
    fn load(&self) -> u32;
    /// Compare-and-swap with acquire-release ordering on success.
    fn cas(&self, current: u32, new: u32) -> Result<u32, u32>;
    /// Atomically swaps in `new`, returning the old value.
    fn swap(&self, new: u32) -> u32;
    /// Sleeps while the word holds `expected`, for at most `timeout`.
    fn wait(&self, expected: u32, timeout: Option<Duration>) -> Wake;
    /// Wakes one thread sleeping on the word, if any.
    fn wake_one(&self);
}

/// The real word: an `AtomicU32`, slept on with `futex(2)` on Linux.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct FutexWord(AtomicU32);

impl FutexWord {
    pub(crate) const fn new(v: u32) -> Self {
        FutexWord(AtomicU32::new(v))
    }
}

impl Word for FutexWord {
    #[inline]
    fn load(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    fn cas(&self, current: u32, new: u32) -> Result<u32, u32> {
        self.0
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Relaxed)
    }

    #[inline]
    fn swap(&self, new: u32) -> u32 {
        self.0.swap(new, Ordering::AcqRel)
    }

    #[cfg(target_os = "linux")]
    fn wait(&self, expected: u32, timeout: Option<Duration>) -> Wake {
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
        // wake after our caller's last state change cannot be missed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.0.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
            )
        };
        if r == 0 {
            return Wake::Woken;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ETIMEDOUT) => Wake::TimedOut,
            _ => Wake::Changed, // EAGAIN (value changed) or EINTR
        }
    }

    #[cfg(target_os = "linux")]
    fn wake_one(&self) {
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

    /// Without futexes: yield and report a change, so callers re-check (correct, not fast).
    #[cfg(not(target_os = "linux"))]
    fn wait(&self, expected: u32, timeout: Option<Duration>) -> Wake {
        let start = std::time::Instant::now();
        while self.load() == expected {
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return Wake::TimedOut;
            }
            std::thread::yield_now();
        }
        Wake::Changed
    }

    #[cfg(not(target_os = "linux"))]
    fn wake_one(&self) {}
}
