//! The C API's documented contract, checked from Rust through the rlib: the cases a review
//! found the implementation and the header's promises to differ on.

use std::ffi::CStr;

use turnstile_ffi::*;

const OK: i32 = ts_status::TS_OK as i32;
const ADMITTED: i32 = ts_status::TS_ADMITTED as i32;

fn gate(policy: &CStr, limit: u32, tickets: u32) -> *mut ts_gate {
    let mut st = 12345;
    // SAFETY: a NUL-terminated policy name and a writable status.
    let g = unsafe { ts_gate_new(policy.as_ptr(), limit, tickets, &mut st) };
    assert_eq!(st, OK);
    assert!(!g.is_null());
    g
}

/// `ts_session_cancel`: "a cancel no wait consumed is dropped at the statement's end", and
/// `ts_force_exit` ends the statement. A cancel made while the session was not waiting, in a
/// statement that then ended without waiting, must not cancel a wait in a later statement.
#[test]
fn a_cancel_no_wait_consumed_is_dropped_at_the_statement_end() {
    let g = gate(c"classic", 1, 10);
    // SAFETY: live handles from ts_*_new, used from this thread only, freed once at the end.
    unsafe {
        let holder = ts_session_new(g, c"holder".as_ptr());
        let s = ts_session_new(g, c"s".as_ptr());

        // Statement 1 of `s`: a KILL QUERY arrives while it is not waiting, and the statement
        // ends without ever waiting (admitted at once: the gate is empty).
        assert_eq!(ts_session_cancel(s), OK);
        assert_eq!(ts_enter(s), ADMITTED);
        assert_eq!(ts_exit(s), OK);
        assert_eq!(ts_force_exit(s), OK); // statement end: the unused cancel is dropped

        // Statement 2: the gate is full, so `s` waits, and times out; it was not cancelled.
        assert_eq!(ts_enter(holder), ADMITTED);
        assert_eq!(ts_set_wait_timeout_us(s, 30_000), OK);
        assert_eq!(
            ts_enter(s),
            ts_status::TS_ERR_TIMEOUT as i32,
            "a stale cancel from an ended statement cancelled a later statement's wait"
        );

        // The same with no call at all in the first statement: cancel, then statement end.
        assert_eq!(ts_session_cancel(s), OK);
        assert_eq!(ts_force_exit(s), OK);
        assert_eq!(ts_enter(s), ts_status::TS_ERR_TIMEOUT as i32);

        ts_session_free(s);
        ts_session_free(holder);
        ts_gate_free(g);
    }
}

/// `tickets` 0 is refused with `TS_ERR_CONFIG`, and the status's documentation and message say
/// which settings that covers (they named only the limit's range).
#[test]
fn zero_tickets_is_a_config_error_that_strerror_names() {
    let mut st = 12345;
    // SAFETY: a NUL-terminated policy name and a writable status.
    let g = unsafe { ts_gate_new(c"classic".as_ptr(), 4, 0, &mut st) };
    assert!(g.is_null());
    assert_eq!(st, ts_status::TS_ERR_CONFIG as i32);
    // SAFETY: ts_strerror returns a static NUL-terminated string.
    let msg = unsafe { CStr::from_ptr(ts_strerror(st)) }.to_str().unwrap();
    assert!(msg.contains("tickets"), "TS_ERR_CONFIG's message: {msg:?}");
}
