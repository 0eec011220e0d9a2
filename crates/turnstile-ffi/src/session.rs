//! `ts_session`: one connection's tickets and slot, driven by explicit calls.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use turnstile::{Canceler, Session, StepOutReason};

use crate::gate::{ts_gate, utf8};
use crate::guard;
use crate::status::{gate_error, ts_status};

/// Why a session declares a blocking wait (`ts_wait_begin`'s `reason`). Pass these as `int`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ts_wait_reason {
    /// Waiting for a row lock. A wait begun inside a call re-enters at `ts_wait_end` without
    /// checking the limit, with one ticket (InnoDB's rule, so the lock holder is not blocked
    /// by its waiters).
    TS_WAIT_ROW_LOCK = 1,
    /// Blocking disk I/O.
    TS_WAIT_DISK_IO = 2,
    /// Waiting for the commit (binlog) mutex and its fsync.
    TS_WAIT_COMMIT = 3,
    /// Sending results to the client.
    TS_WAIT_SENDING_RESULTS = 4,
    /// A file sort or other long work outside the engine.
    TS_WAIT_FILE_SORT = 5,
}

impl ts_wait_reason {
    fn from_code(code: c_int) -> Option<StepOutReason> {
        Some(match code {
            1 => StepOutReason::RowLockWait,
            2 => StepOutReason::DiskIo,
            3 => StepOutReason::CommitWait,
            4 => StepOutReason::SendingResults,
            5 => StepOutReason::FileSort,
            _ => return None,
        })
    }
}

/// A session on a gate (opaque): one per connection, holding its tickets and its slot.
///
/// **Threads**: a session may move between threads, but must be used by one thread at a time.
/// A call made while another thread is inside a call on the same session is refused with
/// `TS_ERR_BUSY` and does nothing (a cheap check; it is not a lock to rely on). The exceptions
/// are `ts_session_cancel`, which any thread may call at any time while the session lives, and
/// `ts_session_free`, which must not overlap any other call on the session. Under `auto`, a
/// thread that blocks on a `ts_mutex` lends its session's slot (the automatic step-out) only
/// while it runs one of the session's calls (`ts_enter` … `ts_exit`). A thread that blocks
/// between the session's calls lends nothing, nor does a thread the session has moved away
/// from: the session keeps its slot, and only the thread running its next call may lend it.
/// (A call moved to another thread between its `ts_enter` and `ts_exit` may be lent by the
/// thread that entered it until that call's exit.)
///
/// **Calls**: `ts_enter` … `ts_exit` brackets one call into the engine (one row). After an
/// admission the session keeps its slot between calls while tickets remain; `ts_force_exit`
/// ends the statement and frees the slot. `ts_wait_begin` … `ts_wait_end` brackets a blocking
/// wait during which the slot is freed for others.
pub struct ts_session {
    /// A call is running on the session (the one-thread-at-a-time check).
    busy: AtomicBool,
    /// Accessed only by the thread that set `busy` (see [`with_session`]), or by
    /// `ts_session_free`, which has the handle to itself by contract.
    session: UnsafeCell<Session>,
    /// Shared with the session's waits; safe from any thread.
    canceler: Canceler,
}

/// Runs `f` on the session behind `s`, holding the one-thread-at-a-time flag.
///
/// # Safety
/// `s` is NULL or a live session from `ts_session_new` (not freed, and not being freed).
unsafe fn with_session(s: *mut ts_session, f: impl FnOnce(&mut Session) -> ts_status) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live session by contract; only shared access to the handle is
        // taken here (the Session inside is reached through its UnsafeCell below).
        let Some(h) = (unsafe { s.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        if h.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return ts_status::TS_ERR_BUSY;
        }
        // Clears the flag when `f` returns or unwinds.
        struct Busy<'a>(&'a AtomicBool);
        impl Drop for Busy<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _busy = Busy(&h.busy);
        // SAFETY: this thread turned `busy` from false to true, and every other access to the
        // Session (other than ts_session_free, which by contract does not overlap any call)
        // first does the same, so this &mut is exclusive until `_busy` clears the flag. The
        // Acquire here pairs with the previous holder's Release store, ordering its accesses
        // before ours. Session is Send, so using it from this thread is sound.
        let session = unsafe { &mut *h.session.get() };
        f(session)
    })
    .code()
}

/// A new session on `gate`, or NULL (NULL gate, a name that is not UTF-8, or an internal
/// panic; `ts_session_new_with_status` says which). `name` is a label shown in
/// `ts_gate_status` (a connection id, a query); NULL means none. The name is copied.
///
/// The session keeps the gate's state alive: it may outlive `ts_gate_free`.
///
/// # Safety
/// `gate` is NULL or a live gate; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ts_session_new(
    gate: *mut ts_gate,
    name: *const c_char,
) -> *mut ts_session {
    // SAFETY: the same contract, and a NULL status pointer.
    unsafe { ts_session_new_with_status(gate, name, ptr::null_mut()) }
}

/// `ts_session_new`, also writing `TS_OK`, `TS_ERR_NULL` (NULL gate), `TS_ERR_UTF8` or
/// `TS_ERR_PANIC` to `*status` when `status` is not NULL.
///
/// # Safety
/// `gate` is NULL or a live gate; `name` is NULL or a NUL-terminated string; `status` is NULL
/// or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn ts_session_new_with_status(
    gate: *mut ts_gate,
    name: *const c_char,
    status: *mut c_int,
) -> *mut ts_session {
    let (session, st) = guard((ptr::null_mut(), ts_status::TS_ERR_PANIC), || {
        // SAFETY: NULL or a live gate by contract; only shared access is taken.
        let Some(g) = (unsafe { gate.as_ref() }) else {
            return (ptr::null_mut(), ts_status::TS_ERR_NULL);
        };
        let label = if name.is_null() {
            ""
        } else {
            // SAFETY: non-NULL and NUL-terminated by contract; read (and copied by
            // named_session) during this call only.
            match unsafe { utf8(name) } {
                Ok(label) => label,
                Err(e) => return (ptr::null_mut(), e),
            }
        };
        let session = g.gate.named_session(label);
        let handle = ts_session {
            busy: AtomicBool::new(false),
            canceler: session.canceler(),
            session: UnsafeCell::new(session),
        };
        (Box::into_raw(Box::new(handle)), ts_status::TS_OK)
    });
    // SAFETY: NULL or a writable int by this function's contract.
    unsafe { crate::gate::write_status(status, st) };
    session
}

/// Frees a session. NULL does nothing. A session still inside the gate (in a call, keeping its
/// slot between calls, or in a declared wait) first ends its statement, as `ts_force_exit`
/// does, so its slot goes to the next waiter. Freeing a session twice, or while another thread
/// is in a call on it, is undefined (as `free(3)`).
///
/// # Safety
/// `s` is NULL or a session from `ts_session_new` not yet freed, and no other call on it runs
/// during or after this one.
#[no_mangle]
pub unsafe extern "C" fn ts_session_free(s: *mut ts_session) {
    guard((), || {
        if s.is_null() {
            return;
        }
        // SAFETY: by contract `s` came from Box::into_raw in ts_session_new_with_status and is
        // freed once, with no other call running on it.
        let mut handle = unsafe { Box::from_raw(s) };
        // Dropping a Session ends its statement too; saying so here keeps the promise visible.
        handle.session.get_mut().end_statement();
        drop(handle);
    })
}

/// Enters the engine for one call. Returns `TS_ADMITTED` (1) when this enter was an admission
/// (the session took a slot by the gate's policy, possibly after waiting, and got its
/// tickets), `TS_OK` (0) when it was a ticket re-entry (the session kept its slot and spent
/// one ticket, touching nothing shared). Errors: `TS_ERR_TIMEOUT`, `TS_ERR_CANCELLED` (the
/// session is outside, nothing counted), `TS_ERR_NESTED_ENTER`, `TS_ERR_CALL_DURING_WAIT`,
/// `TS_ERR_NULL`, `TS_ERR_BUSY`. May block while the gate is full.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_enter(s: *mut ts_session) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| match s.enter() {
            Ok(true) => ts_status::TS_ADMITTED,
            Ok(false) => ts_status::TS_OK,
            Err(e) => gate_error(&e),
        })
    }
}

/// Exits after a call: the session keeps its slot while tickets remain, and leaves the gate
/// when they are spent. Errors: `TS_ERR_EXIT_WITHOUT_ENTER`, `TS_ERR_CALL_DURING_WAIT`,
/// `TS_ERR_NULL`, `TS_ERR_BUSY`.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_exit(s: *mut ts_session) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| match s.exit() {
            Ok(()) => ts_status::TS_OK,
            Err(e) => gate_error(&e),
        })
    }
}

/// Ends the statement: leaves the gate (tickets to 0, the slot freed or handed to a waiter),
/// also ending a call or declared wait still open. Returns `TS_OK` (also when already
/// outside), `TS_ERR_NULL` or `TS_ERR_BUSY`.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_force_exit(s: *mut ts_session) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| {
            s.end_statement();
            ts_status::TS_OK
        })
    }
}

/// Declares a blocking wait (`reason`: a `TS_WAIT_*` value): the session leaves the gate for
/// its length, so its slot is not wasted. Pair with `ts_wait_end`. Errors: `TS_ERR_REASON`,
/// `TS_ERR_NESTED_WAIT`, `TS_ERR_NULL`, `TS_ERR_BUSY`.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_wait_begin(s: *mut ts_session, reason: c_int) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| {
            let Some(reason) = ts_wait_reason::from_code(reason) else {
                return ts_status::TS_ERR_REASON;
            };
            match s.wait_begin(reason) {
                Ok(()) => ts_status::TS_OK,
                Err(e) => gate_error(&e),
            }
        })
    }
}

/// Ends a declared wait. Within a call (between `ts_enter` and `ts_exit`) the session
/// re-enters at once (after `TS_WAIT_ROW_LOCK`, without checking the limit; otherwise a normal
/// admission, which may block and may fail with `TS_ERR_TIMEOUT` / `TS_ERR_CANCELLED` — the
/// wait is over either way, and the call goes on outside the gate). Outside a call the next
/// `ts_enter` re-enters by that rule. Errors also: `TS_ERR_WAIT_END_WITHOUT_BEGIN`,
/// `TS_ERR_NULL`, `TS_ERR_BUSY`.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_wait_end(s: *mut ts_session) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| match s.wait_end() {
            Ok(()) => ts_status::TS_OK,
            Err(e) => gate_error(&e),
        })
    }
}

/// Caps how long one admission may wait, in microseconds; 0 (the default) waits as long as it
/// takes. An expired wait returns `TS_ERR_TIMEOUT` and leaves nothing counted.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_set_wait_timeout_us(s: *mut ts_session, timeout_us: u64) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| {
            s.set_wait_timeout((timeout_us > 0).then(|| Duration::from_micros(timeout_us)));
            ts_status::TS_OK
        })
    }
}

/// Declares whether the session is inside a multi-statement transaction: call it with 1 at
/// `BEGIN` and with 0 at `COMMIT`/`ROLLBACK`. Under `auto`, once the transaction has been
/// admitted, each later admission it needs (its next statement, or a call after its quantum
/// ran out) comes back ahead of the transactions not yet begun: a free slot, else an extra
/// place (never more extras than the limit), else the head of the queue. Autocommit
/// statements wait their turn. Other policies ignore it. Returns `TS_OK`, `TS_ERR_NULL` or
/// `TS_ERR_BUSY`.
///
/// # Safety
/// `s` is NULL or a live session.
#[no_mangle]
pub unsafe extern "C" fn ts_set_in_transaction(s: *mut ts_session, in_transaction: c_int) -> c_int {
    // SAFETY: the same contract.
    unsafe {
        with_session(s, |s| {
            s.set_in_transaction(in_transaction != 0);
            ts_status::TS_OK
        })
    }
}

/// Cancels the session's current wait to enter (like `KILL QUERY`): that `ts_enter` (or
/// `ts_wait_end`) returns `TS_ERR_CANCELLED`. If the session is not waiting, its next wait in
/// the current statement is cancelled; a cancel no wait consumed is dropped at the statement's
/// end (`ts_force_exit`). Safe to call from any thread, also while another thread is in a call
/// on the session.
///
/// # Safety
/// `s` is NULL or a live session (not freed, and not being freed, during this call).
#[no_mangle]
pub unsafe extern "C" fn ts_session_cancel(s: *mut ts_session) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live session by contract; only the `canceler` member is used,
        // which is Sync and never accessed mutably after construction.
        let Some(h) = (unsafe { s.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        h.canceler.cancel();
        ts_status::TS_OK
    })
    .code()
}
