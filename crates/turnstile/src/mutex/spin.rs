//! Spin-limited mutexes (innotsim's variation, seed 002): busy-wait, then block, with a cap on
//! how many threads may spin at once — globally (`spin-global`) or per mutex
//! (`spin-per-mutex`) — to keep the benefit of spinning without every waiter burning a core.
//!
//! The blocking part is the classic three-state futex mutex (Drepper, "Futexes Are Tricky",
//! mutex #2: 0 unlocked, 1 locked, 2 locked with possible waiters), the same algorithm as
//! glibc's default `pthread_mutex_t` without its extras.

use std::sync::atomic::{AtomicU32, Ordering};

use super::futex::FutexWord;

/// Test-then-try rounds a spinner makes before blocking (innotsim-style busy-wait length,
/// comparable to glibc's adaptive mutex default of 100 spin iterations).
pub const SPIN_ROUNDS: u32 = 100;
/// Most threads spinning on one mutex at once in `spin-per-mutex`: one can take a freed lock
/// and one can be ready behind it; more only compete for the same cache line.
pub const PER_MUTEX_SPINNERS: u32 = 2;

/// Most threads spinning at once over all `spin-global` mutexes: the number of CPUs (read once),
/// since a spinner beyond that can only steal a core from the holder.
pub fn global_spinner_cap() -> u32 {
    static CAP: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
}

static GLOBAL_SPINNERS: AtomicU32 = AtomicU32::new(0);

/// Drepper's mutex #2 on a futex word.
#[derive(Debug)]
struct FutexMutex(FutexWord);

impl FutexMutex {
    const fn new() -> Self {
        FutexMutex(FutexWord::new(0))
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.0.cas(0, 1).is_ok()
    }

    fn lock_blocking(&self) {
        let mut c = match self.0.cas(0, 1) {
            Ok(_) => return,
            Err(c) => c,
        };
        if c != 2 {
            c = self.0.swap(2);
        }
        while c != 0 {
            self.0.wait(2, None);
            c = self.0.swap(2);
        }
    }

    #[inline]
    fn unlock(&self) {
        if self.0.swap(0) == 2 {
            self.0.wake_one();
        }
    }

    fn is_locked(&self) -> bool {
        self.0.load() != 0
    }
}

/// Where the spinner cap is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpinCap {
    /// One counter for every mutex of this kind in the process.
    Global,
    /// One counter per mutex.
    PerMutex,
}

/// A mutex that spins (within a cap on concurrent spinners) before blocking.
#[derive(Debug)]
pub struct SpinLimitedMutex<const PER_MUTEX: bool> {
    lock: FutexMutex,
    spinners: AtomicU32,
}

/// `spin-global`: the spinner cap is process-wide.
pub type SpinGlobalMutex = SpinLimitedMutex<false>;
/// `spin-per-mutex`: the spinner cap is per mutex.
pub type SpinPerMutex = SpinLimitedMutex<true>;

impl<const PER_MUTEX: bool> Default for SpinLimitedMutex<PER_MUTEX> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const PER_MUTEX: bool> SpinLimitedMutex<PER_MUTEX> {
    /// An unlocked mutex.
    pub const fn new() -> Self {
        SpinLimitedMutex {
            lock: FutexMutex::new(),
            spinners: AtomicU32::new(0),
        }
    }

    /// Which cap this mutex uses.
    pub const fn cap_kind(&self) -> SpinCap {
        if PER_MUTEX {
            SpinCap::PerMutex
        } else {
            SpinCap::Global
        }
    }

    fn counter(&self) -> (&AtomicU32, u32) {
        if PER_MUTEX {
            (&self.spinners, PER_MUTEX_SPINNERS)
        } else {
            (&GLOBAL_SPINNERS, global_spinner_cap())
        }
    }

    #[cold]
    fn lock_slow(&self) {
        let (spinners, cap) = self.counter();
        if spinners.fetch_add(1, Ordering::Relaxed) < cap {
            for _ in 0..SPIN_ROUNDS {
                std::hint::spin_loop();
                if !self.lock.is_locked() && self.lock.try_lock() {
                    spinners.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            }
        }
        spinners.fetch_sub(1, Ordering::Relaxed);
        self.lock.lock_blocking();
    }
}

// SAFETY: ownership is taken only by a successful CAS 0 → 1 (try_lock) or a swap that returned
// 0 (lock_blocking), and released only by the holder's swap to 0; so one holder at a time, with
// acquire/release ordering from the AcqRel word operations.
unsafe impl<const PER_MUTEX: bool> lock_api::RawMutex for SpinLimitedMutex<PER_MUTEX> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.lock.try_lock() {
            self.lock_slow();
        }
    }

    fn try_lock(&self) -> bool {
        self.lock.try_lock()
    }

    unsafe fn unlock(&self) {
        self.lock.unlock();
    }

    fn is_locked(&self) -> bool {
        self.lock.is_locked()
    }
}
