//! `ts_mutex`: the turnstile lock for C.

use std::ffi::c_int;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use lock_api::RawMutex;
use turnstile::mutex::RawTurnstileMutex;

use crate::guard;
use crate::status::ts_status;

/// The turnstile lock (opaque): waiters parked off the lock word, bounded spinning, a
/// starvation hand-off. Create with `ts_mutex_new`, free with `ts_mutex_free`.
///
/// It checks its owner: `ts_mutex_unlock` by a thread that does not hold it returns
/// `TS_ERR_NOT_OWNER`, and `ts_mutex_lock` by the holder returns `TS_ERR_DEADLOCK`, both
/// without changing anything (like an error-checking pthread mutex). It is not recursive.
pub struct ts_mutex {
    raw: RawTurnstileMutex,
    /// The holder's [`thread_id`], 0 when unlocked. Written only by the holder (after
    /// acquiring, and before releasing), so a thread reads its own id here exactly while it
    /// holds the lock: by coherence a thread always sees its own last write or a later one,
    /// and after its own `store(0)` no other thread writes its id. Relaxed is enough.
    owner: AtomicU64,
}

/// A process-unique id for the calling thread, never 0 and never reused.
fn thread_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

/// A new, unlocked mutex (NULL only on an internal panic).
#[no_mangle]
pub extern "C" fn ts_mutex_new() -> *mut ts_mutex {
    guard(ptr::null_mut(), || {
        Box::into_raw(Box::new(ts_mutex {
            raw: RawTurnstileMutex::new(),
            owner: AtomicU64::new(0),
        }))
    })
}

/// Frees a mutex. NULL does nothing. The mutex must be unlocked with no thread waiting for it;
/// freeing it otherwise, or twice, is undefined (as `pthread_mutex_destroy` + `free(3)`).
///
/// # Safety
/// `m` is NULL or a mutex from `ts_mutex_new` not yet freed, unlocked, and unused by any other
/// thread during or after this call.
#[no_mangle]
pub unsafe extern "C" fn ts_mutex_free(m: *mut ts_mutex) {
    guard((), || {
        if !m.is_null() {
            // SAFETY: by contract `m` came from Box::into_raw in ts_mutex_new and is freed
            // once, with no other user.
            drop(unsafe { Box::from_raw(m) });
        }
    })
}

/// Locks, waiting as long as it takes. Returns `TS_OK`, `TS_ERR_DEADLOCK` (the calling thread
/// already holds it; nothing done) or `TS_ERR_NULL`. Under an `auto` gate, a thread running a
/// call of its session (`ts_enter` … `ts_exit`) lends the session's slot while it waits here
/// (between calls it lends nothing), and takes it back once it has the lock: with the gate at
/// twice its limit, that takes the next free slot (first in line), so this call may also wait
/// for the gate.
///
/// # Safety
/// `m` is NULL or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn ts_mutex_lock(m: *mut ts_mutex) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live mutex by contract; only shared access is taken.
        let Some(m) = (unsafe { m.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        let me = thread_id();
        if m.owner.load(Ordering::Relaxed) == me {
            return ts_status::TS_ERR_DEADLOCK;
        }
        m.raw.lock();
        m.owner.store(me, Ordering::Relaxed);
        ts_status::TS_OK
    })
    .code()
}

/// Locks if the mutex is free, without waiting. Returns `TS_OK` (locked), `TS_BUSY` (held by
/// another thread or by the caller; nothing done) or `TS_ERR_NULL`.
///
/// # Safety
/// `m` is NULL or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn ts_mutex_trylock(m: *mut ts_mutex) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live mutex by contract; only shared access is taken.
        let Some(m) = (unsafe { m.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        if !m.raw.try_lock() {
            return ts_status::TS_BUSY;
        }
        m.owner.store(thread_id(), Ordering::Relaxed);
        ts_status::TS_OK
    })
    .code()
}

/// Unlocks. Returns `TS_OK`, `TS_ERR_NOT_OWNER` (the calling thread does not hold it, or it is
/// not locked; nothing done) or `TS_ERR_NULL`.
///
/// # Safety
/// `m` is NULL or a live mutex.
#[no_mangle]
pub unsafe extern "C" fn ts_mutex_unlock(m: *mut ts_mutex) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live mutex by contract; only shared access is taken.
        let Some(m) = (unsafe { m.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        if m.owner.load(Ordering::Relaxed) != thread_id() {
            return ts_status::TS_ERR_NOT_OWNER;
        }
        m.owner.store(0, Ordering::Relaxed);
        // SAFETY: `owner` held this thread's id, which (see the `owner` field) means this
        // thread locked `raw` and has not unlocked it since.
        unsafe { m.raw.unlock() };
        ts_status::TS_OK
    })
    .code()
}
