//! One place that chooses between `std` and `loom` synchronisation types, so the gate's real
//! code is what `loom` model-checks (`RUSTFLAGS="--cfg loom" cargo test -p turnstile --test loom`).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

/// Locks `m`, ignoring poisoning: every critical section in this crate leaves its data
/// consistent before any call that could panic, so a poisoned lock still guards valid state.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Gives up the CPU once.
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}
