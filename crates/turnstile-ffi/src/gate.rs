//! `ts_gate`: the admission gate.

use std::ffi::{c_char, c_int, CStr};
use std::ptr;

use turnstile::{Gate, GateConfig, Policy};

use crate::guard;
use crate::status::{config_error, ts_status, write_text};

/// An admission gate (opaque): at most `limit` threads inside the engine at once, with
/// concurrency tickets, under one policy. Create with `ts_gate_new`, free with `ts_gate_free`.
/// All functions on a gate may be called from any thread at any time.
pub struct ts_gate {
    pub(crate) gate: Gate,
}

/// Reads a NUL-terminated C string as UTF-8.
///
/// # Safety
/// `s` is non-NULL and points to a NUL-terminated string that stays valid and unmodified
/// for the returned lifetime.
pub(crate) unsafe fn utf8<'a>(s: *const c_char) -> Result<&'a str, ts_status> {
    // SAFETY: the caller's contract, stated above.
    let s = unsafe { CStr::from_ptr(s) };
    s.to_str().map_err(|_| ts_status::TS_ERR_UTF8)
}

/// A new gate, or NULL.
///
/// * `policy`: `"auto"` (turnstile's own: a time quantum, a self-adjusting limit, the
///   newest waiter first within an age cap; `limit` is where its limit starts and `tickets`
///   is unused), `"classic"` (InnoDB 5.0–5.5: FIFO queue, hand-off), `"polling"` (InnoDB
///   5.6–8.0), `"timer"` (MySQL 5.4), `"flifo"` (classic with the LIFO rule) or
///   `"unlimited"`; case-insensitive. NULL gives `TS_ERR_NULL`, not UTF-8 `TS_ERR_UTF8`,
///   another name `TS_ERR_POLICY`.
/// * `limit`: threads inside at once, 0..=1000 (0 = unlimited); otherwise `TS_ERR_CONFIG`.
/// * `tickets`: enters allowed after an admission before the session must be admitted again
///   (InnoDB's `innodb_concurrency_tickets`; 500 is InnoDB's default), at least 1; 0 gives
///   `TS_ERR_CONFIG`.
/// * `status`: if not NULL, receives `TS_OK` or the error.
///
/// The sleep delays are InnoDB's defaults (10 ms before queueing or between polls), and
/// `auto`'s settings its defaults; `ts_gate_new_with` sets every one.
///
/// # Safety
/// `policy` is NULL or a NUL-terminated string; `status` is NULL or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_new(
    policy: *const c_char,
    limit: u32,
    tickets: u32,
    status: *mut c_int,
) -> *mut ts_gate {
    let (gate, st) = guard((ptr::null_mut(), ts_status::TS_ERR_PANIC), || {
        if policy.is_null() {
            return (ptr::null_mut(), ts_status::TS_ERR_NULL);
        }
        // SAFETY: non-NULL, and a NUL-terminated string by this function's contract; it is
        // read only during this call.
        let name = match unsafe { utf8(policy) } {
            Ok(name) => name,
            Err(e) => return (ptr::null_mut(), e),
        };
        match name.parse::<Policy>() {
            // A policy without tickets (`auto`) takes 0 as "none given".
            Ok(p) if tickets == 0 && !p.uses("tickets") => {
                new_gate(GateConfig::new(p).limit(limit))
            }
            Ok(p) => new_gate(GateConfig::new(p).limit(limit).tickets(tickets)),
            Err(e) => (ptr::null_mut(), config_error(&e)),
        }
    });
    // SAFETY: NULL or a writable int by this function's contract.
    unsafe { write_status(status, st) };
    gate
}

/// A boxed gate for C from `config`, or NULL and the status that refused it.
pub(crate) fn new_gate(config: GateConfig) -> (*mut ts_gate, ts_status) {
    match Gate::new(config) {
        Ok(gate) => (Box::into_raw(Box::new(ts_gate { gate })), ts_status::TS_OK),
        Err(e) => (ptr::null_mut(), config_error(&e)),
    }
}

/// Writes `st` to `*status` unless `status` is NULL.
///
/// # Safety
/// `status` is NULL or points to a writable `int`.
pub(crate) unsafe fn write_status(status: *mut c_int, st: ts_status) {
    if !status.is_null() {
        // SAFETY: non-NULL, and writable by this function's contract.
        unsafe { status.write(st.code()) };
    }
}

/// Frees a gate. NULL does nothing. Sessions still open keep the gate's state alive and go on
/// working; it is released when the last of them is freed. Freeing a gate twice is undefined
/// (as `free(3)`).
///
/// # Safety
/// `gate` is NULL or a gate from `ts_gate_new` not yet freed, and no other thread uses it
/// during or after this call.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_free(gate: *mut ts_gate) {
    guard((), || {
        if !gate.is_null() {
            // SAFETY: by contract `gate` came from Box::into_raw in ts_gate_new and is freed
            // once, with no other user.
            drop(unsafe { Box::from_raw(gate) });
        }
    })
}

/// Changes the limit while threads run (0..=1000, 0 = unlimited; otherwise `TS_ERR_CONFIG`
/// and nothing changes). Raising it admits waiters at once; lowering it never evicts a thread
/// already inside.
///
/// # Safety
/// `gate` is NULL or a live gate from `ts_gate_new`.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_set_limit(gate: *mut ts_gate, limit: u32) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live gate by contract; only shared access is taken.
        let Some(g) = (unsafe { gate.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        match g.gate.set_limit(limit) {
            Ok(()) => ts_status::TS_OK,
            Err(e) => config_error(&e),
        }
    })
    .code()
}

/// Writes the gate's InnoDB-style status text ("N queries inside, M queries in queue", the
/// counters, then one line per session) into `buf`, like `snprintf`: at most `len - 1` bytes
/// and a terminating NUL (nothing when `len` is 0), and returns the text's full length
/// excluding the NUL. A return value `>= len` means the text was truncated: call again with
/// a buffer of at least the return value + 1. `ts_gate_status(gate, NULL, 0)` asks for the
/// length only. A NULL gate (or an internal panic) writes "" and returns 0. Truncation counts
/// bytes, and may cut a multi-byte UTF-8 character of a session name.
///
/// # Safety
/// `gate` is NULL or a live gate; `buf` is NULL only if `len` is 0, and otherwise points to
/// `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_status(gate: *mut ts_gate, buf: *mut c_char, len: usize) -> usize {
    let text = guard(String::new(), || {
        // SAFETY: NULL or a live gate by contract; only shared access is taken.
        unsafe { gate.as_ref() }.map_or_else(String::new, |g| g.gate.snapshot().to_string())
    });
    // SAFETY: the caller's contract is this function's.
    unsafe { write_text(&text, buf, len) }
}
