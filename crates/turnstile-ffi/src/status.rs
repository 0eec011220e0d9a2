//! Status codes and their messages.

use std::ffi::{c_char, c_int, CStr};

use turnstile::{ConfigError, GateError, Misuse};

use crate::guard;

/// What a `ts_*` call did. Functions return these as `int`: 0 and positive values are
/// success, negative values are errors. `ts_strerror` names each one.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ts_status {
    /// Success. From `ts_enter`: a ticket re-entry (the session already held its slot).
    TS_OK = 0,
    /// Success, from `ts_enter` (and only there): an admission — the session took a slot by
    /// the gate's policy and was granted its tickets.
    TS_ADMITTED = 1,
    /// From `ts_mutex_trylock`: the mutex is held (by another thread, or by the caller); not
    /// an error.
    TS_BUSY = 2,
    /// A handle or pointer argument that must not be NULL was NULL.
    TS_ERR_NULL = -1,
    /// Unknown policy name (expected auto, classic, polling, timer, flifo or unlimited).
    TS_ERR_POLICY = -2,
    /// A setting out of range (limit 0..=1000, tickets at least 1; the limits of every
    /// `ts_gate_options` field are in its documentation), or one the policy does not read
    /// set to other than its default; `ts_config_error` names the setting.
    TS_ERR_CONFIG = -3,
    /// The session's wait timeout (`ts_set_wait_timeout_us`) expired before admission.
    TS_ERR_TIMEOUT = -4,
    /// The wait for admission was cancelled (`ts_session_cancel`).
    TS_ERR_CANCELLED = -5,
    /// `ts_enter` while a call is already in progress (no `ts_exit` since the last enter).
    TS_ERR_NESTED_ENTER = -6,
    /// `ts_exit` without a matching `ts_enter`.
    TS_ERR_EXIT_WITHOUT_ENTER = -7,
    /// `ts_enter` or `ts_exit` while a declared wait is in progress (call `ts_wait_end`).
    TS_ERR_CALL_DURING_WAIT = -8,
    /// `ts_wait_begin` while a declared wait is already in progress.
    TS_ERR_NESTED_WAIT = -9,
    /// `ts_wait_end` without a `ts_wait_begin`.
    TS_ERR_WAIT_END_WITHOUT_BEGIN = -10,
    /// A call out of order of a kind this version of the C API does not name.
    TS_ERR_MISUSE = -11,
    /// A wait reason that is not one of the `TS_WAIT_*` values.
    TS_ERR_REASON = -12,
    /// A string argument that is not valid UTF-8.
    TS_ERR_UTF8 = -13,
    /// `ts_gate_stats`: `out->size` is smaller than `TS_STATS_MIN_SIZE`; `ts_gate_new_with`:
    /// `opts->size` outside what this library accepts (see `ts_gate_options`).
    TS_ERR_SIZE = -14,
    /// The session is in use by another thread right now (a session is for one thread at a
    /// time); nothing was done.
    TS_ERR_BUSY = -15,
    /// `ts_mutex_unlock` by a thread that does not hold the mutex (or of an unlocked one);
    /// nothing was done.
    TS_ERR_NOT_OWNER = -16,
    /// `ts_mutex_lock` by the thread that already holds the mutex (it would deadlock).
    TS_ERR_DEADLOCK = -17,
    /// An error this version of the C API does not name.
    TS_ERR_OTHER = -18,
    /// An internal panic was caught at the boundary (a bug in turnstile): the handle is only
    /// guaranteed to be freeable.
    TS_ERR_PANIC = -19,
    /// The `auto` gate refused the admission to protect itself (`max_waiting` sessions
    /// already queued, or not admitted within `queue_timeout_us`; see `ts_gate_options`):
    /// nothing is counted, the session is outside, and the statement may be retried later or
    /// answered with "server busy".
    TS_ERR_OVERLOADED = -20,
}

/// Every status, in code order from `TS_OK`.
pub(crate) const ALL: [ts_status; 23] = [
    ts_status::TS_OK,
    ts_status::TS_ADMITTED,
    ts_status::TS_BUSY,
    ts_status::TS_ERR_NULL,
    ts_status::TS_ERR_POLICY,
    ts_status::TS_ERR_CONFIG,
    ts_status::TS_ERR_TIMEOUT,
    ts_status::TS_ERR_CANCELLED,
    ts_status::TS_ERR_NESTED_ENTER,
    ts_status::TS_ERR_EXIT_WITHOUT_ENTER,
    ts_status::TS_ERR_CALL_DURING_WAIT,
    ts_status::TS_ERR_NESTED_WAIT,
    ts_status::TS_ERR_WAIT_END_WITHOUT_BEGIN,
    ts_status::TS_ERR_MISUSE,
    ts_status::TS_ERR_REASON,
    ts_status::TS_ERR_UTF8,
    ts_status::TS_ERR_SIZE,
    ts_status::TS_ERR_BUSY,
    ts_status::TS_ERR_NOT_OWNER,
    ts_status::TS_ERR_DEADLOCK,
    ts_status::TS_ERR_OTHER,
    ts_status::TS_ERR_PANIC,
    ts_status::TS_ERR_OVERLOADED,
];

impl ts_status {
    /// The code as C sees it.
    pub fn code(self) -> c_int {
        self as c_int
    }

    /// The status with this code, if any.
    pub fn from_code(code: c_int) -> Option<ts_status> {
        ALL.into_iter().find(|s| s.code() == code)
    }

    /// A static, NUL-terminated message.
    pub fn message(self) -> &'static CStr {
        match self {
            ts_status::TS_OK => c"ok",
            ts_status::TS_ADMITTED => c"ok: admitted",
            ts_status::TS_BUSY => c"mutex is held",
            ts_status::TS_ERR_NULL => c"null handle or pointer",
            ts_status::TS_ERR_POLICY => {
                c"unknown gate policy: expected auto, classic, polling, timer, flifo or unlimited"
            }
            ts_status::TS_ERR_CONFIG => {
                c"setting out of range (limit: 0..=1000, tickets: at least 1, durations: see ts_gate_options)"
            }
            ts_status::TS_ERR_TIMEOUT => c"admission timed out",
            ts_status::TS_ERR_CANCELLED => c"admission cancelled",
            ts_status::TS_ERR_NESTED_ENTER => c"enter while a call is already in progress",
            ts_status::TS_ERR_EXIT_WITHOUT_ENTER => c"exit without a matching enter",
            ts_status::TS_ERR_CALL_DURING_WAIT => {
                c"enter or exit while a declared wait is in progress"
            }
            ts_status::TS_ERR_NESTED_WAIT => c"wait_begin while a wait is already in progress",
            ts_status::TS_ERR_WAIT_END_WITHOUT_BEGIN => c"wait_end without a wait_begin",
            ts_status::TS_ERR_MISUSE => c"call out of order",
            ts_status::TS_ERR_REASON => c"unknown wait reason",
            ts_status::TS_ERR_UTF8 => c"string is not valid UTF-8",
            ts_status::TS_ERR_SIZE => c"struct size not accepted (ts_stats too small, or ts_gate_options of another version)",
            ts_status::TS_ERR_BUSY => c"session in use by another thread",
            ts_status::TS_ERR_NOT_OWNER => c"mutex not held by the calling thread",
            ts_status::TS_ERR_DEADLOCK => c"mutex already held by the calling thread",
            ts_status::TS_ERR_OTHER => c"unnamed error",
            ts_status::TS_ERR_PANIC => c"internal panic caught at the C boundary",
            ts_status::TS_ERR_OVERLOADED => {
                c"admission refused: the gate is overloaded (queue full or queue timeout)"
            }
        }
    }
}

impl From<ts_status> for c_int {
    fn from(s: ts_status) -> c_int {
        s.code()
    }
}

/// The status for a session call's error.
pub(crate) fn gate_error(e: &GateError) -> ts_status {
    match e {
        GateError::Cancelled { .. } => ts_status::TS_ERR_CANCELLED,
        GateError::TimedOut { .. } => ts_status::TS_ERR_TIMEOUT,
        GateError::Overloaded { .. } => ts_status::TS_ERR_OVERLOADED,
        GateError::Misuse(m) => match m {
            Misuse::NestedEnter => ts_status::TS_ERR_NESTED_ENTER,
            Misuse::ExitWithoutEnter => ts_status::TS_ERR_EXIT_WITHOUT_ENTER,
            Misuse::CallDuringWait => ts_status::TS_ERR_CALL_DURING_WAIT,
            Misuse::NestedWait => ts_status::TS_ERR_NESTED_WAIT,
            Misuse::WaitEndWithoutBegin => ts_status::TS_ERR_WAIT_END_WITHOUT_BEGIN,
            _ => ts_status::TS_ERR_MISUSE,
        },
        _ => ts_status::TS_ERR_OTHER,
    }
}

std::thread_local! {
    /// This thread's last refused setting, in words ([`ts_config_error`]).
    static LAST_CONFIG_ERROR: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The status for a configuration error; its words are kept for [`ts_config_error`].
pub(crate) fn config_error(e: &ConfigError) -> ts_status {
    LAST_CONFIG_ERROR.with(|l| *l.borrow_mut() = e.to_string());
    match e {
        ConfigError::UnknownPolicy(_) => ts_status::TS_ERR_POLICY,
        ConfigError::OutOfRange { .. } | ConfigError::NotForPolicy { .. } => {
            ts_status::TS_ERR_CONFIG
        }
        _ => ts_status::TS_ERR_OTHER,
    }
}

/// Writes `text` into `buf` like `snprintf` (at most `len - 1` bytes and a NUL; nothing when
/// `len` is 0) and returns its full length.
///
/// # Safety
/// `buf` is NULL only if `len` is 0, and otherwise points to `len` writable bytes.
pub(crate) unsafe fn write_text(text: &str, buf: *mut c_char, len: usize) -> usize {
    if !buf.is_null() && len > 0 {
        let n = text.len().min(len - 1);
        // SAFETY: `buf` points to `len` writable bytes by contract and `n + 1 <= len`; `text`
        // is a separate Rust allocation, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    text.len()
}

/// Writes which setting the calling thread's last `TS_ERR_CONFIG` or `TS_ERR_POLICY` refused,
/// and why, into `buf` (for example "tickets does not apply to the auto policy (it would be
/// ignored)"), like `snprintf`: at most `len - 1` bytes and a NUL, returning the text's full
/// length (0 and "" before any refusal on this thread).
///
/// # Safety
/// `buf` is NULL only if `len` is 0, and otherwise points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ts_config_error(buf: *mut c_char, len: usize) -> usize {
    let text = guard(String::new(), || {
        LAST_CONFIG_ERROR.with(|l| l.borrow().clone())
    });
    // SAFETY: the caller's contract is this function's.
    unsafe { write_text(&text, buf, len) }
}

/// A static, NUL-terminated description of a status code (never NULL; an unknown code gives
/// "unknown turnstile status"). The string must not be freed or modified.
#[no_mangle]
pub extern "C" fn ts_strerror(status: c_int) -> *const c_char {
    guard(c"internal panic caught at the C boundary".as_ptr(), || {
        ts_status::from_code(status)
            .map_or(c"unknown turnstile status", ts_status::message)
            .as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_distinct_code_and_message() {
        for (i, a) in ALL.iter().enumerate() {
            assert_eq!(ts_status::from_code(a.code()), Some(*a));
            for b in &ALL[i + 1..] {
                assert_ne!(a.code(), b.code());
                assert_ne!(a.message(), b.message());
            }
        }
        assert_eq!(ALL.len(), 23);
    }

    #[test]
    fn strerror_of_an_unknown_code_is_a_static_message() {
        // SAFETY: ts_strerror returns a pointer to a static NUL-terminated string.
        let s = unsafe { CStr::from_ptr(ts_strerror(12345)) };
        assert_eq!(s, c"unknown turnstile status");
    }
}
