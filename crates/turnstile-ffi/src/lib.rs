//! # turnstile-ffi
//!
//! The C API of [`turnstile`]: the admission gate, its sessions and statistics, and the
//! turnstile lock, behind opaque handles and integer status codes. The header is
//! `include/turnstile.h`, generated from this crate's source by cbindgen (see
//! `tests/header.rs`); this documentation and the header's comments are the same text.
//!
//! The boundary's rules, for every `ts_*` function:
//!
//! * **No panic crosses it.** Every entry point runs its body under
//!   [`std::panic::catch_unwind`]; a panic returns [`ts_status::TS_ERR_PANIC`] (or `NULL`, or 0,
//!   where the function returns a pointer or a length). After a panic the handle involved is
//!   still safe to free, but its state is otherwise unspecified.
//! * **NULL is a status, not a crash**: a NULL handle gives [`ts_status::TS_ERR_NULL`]; every
//!   `*_free` of NULL does nothing.
//! * **Misuse that can be checked is a status**: calls out of order (exit without enter, …),
//!   an unknown policy name, an out-of-range setting, a bad wait reason, a string that is not
//!   UTF-8, two threads using one session at once, unlocking a mutex the caller does not hold.
//! * **What cannot be checked is the caller's contract, as in C**: a pointer that is not NULL
//!   must come from the matching `*_new` and not have been freed (double free is undefined,
//!   like `free(3)`); strings must be NUL-terminated; buffers must be as long as stated.
//!
//! Handles: `ts_gate` (shared by all threads), `ts_session` (one per connection; see
//! [`ts_session`] for threads), `ts_mutex` (the lock).

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

mod gate;
mod mutex;
mod options;
mod session;
mod stats;
mod status;

pub use gate::{ts_gate, ts_gate_free, ts_gate_new, ts_gate_set_limit, ts_gate_status};
pub use mutex::{
    ts_mutex, ts_mutex_free, ts_mutex_lock, ts_mutex_new, ts_mutex_trylock, ts_mutex_unlock,
};
pub use options::{
    ts_gate_new_with, ts_gate_options, ts_gate_options_init, ts_gate_options_init_size,
    TS_GATE_OPTIONS_MIN_SIZE, TS_POLICY_NAME_LEN,
};
pub use session::{
    ts_enter, ts_exit, ts_force_exit, ts_session, ts_session_cancel, ts_session_free,
    ts_session_new, ts_session_new_with_status, ts_set_in_transaction, ts_set_wait_timeout_us,
    ts_wait_begin, ts_wait_end, ts_wait_reason,
};
pub use stats::{ts_gate_stats, ts_stats, TS_STATS_MIN_SIZE, TS_STATS_VERSION};
pub use status::{ts_config_error, ts_status, ts_strerror};

/// Runs `f`, turning a panic into `on_panic`: the one way every entry point keeps unwinding
/// from crossing into C.
///
/// `AssertUnwindSafe`: a panic may leave a handle's Rust state half-updated, but never
/// memory-unsafe (safe Rust cannot be made unsound by unwinding); the header documents that
/// after `TS_ERR_PANIC` a handle is only guaranteed to be freeable.
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(on_panic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_a_panic_into_the_fallback_value() {
        let code = guard(ts_status::TS_ERR_PANIC as i32, || {
            panic!("inside an entry point")
        });
        assert_eq!(code, ts_status::TS_ERR_PANIC as i32);
        assert_eq!(guard(-1, || 7), 7);
    }
}
