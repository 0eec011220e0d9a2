//! `ts_gate_options`: every gate setting, for `ts_gate_new_with`, in a struct that can grow.

use std::ffi::{c_char, c_int};
use std::mem::size_of;
use std::ptr;
use std::time::Duration;

use turnstile::{GateConfig, Policy};

use crate::gate::{new_gate, ts_gate, utf8, write_status};
use crate::guard;
use crate::status::{config_error, ts_status};

/// Every setting of a gate. Fill it with `ts_gate_options_init` (which sets `size` and each
/// field to the policy's default), change what you need, and pass it to `ts_gate_new_with`.
///
/// **Growing**: `size` is `sizeof(ts_gate_options)` as the caller was compiled. A later
/// version adds members only at the end and accepts a smaller `size` from callers built
/// against an earlier header (the members they lack take their defaults). A `size` below
/// `TS_GATE_OPTIONS_MIN_SIZE`, or above what this library knows (a caller built against a
/// newer header asks for settings this library cannot honour), gives `TS_ERR_SIZE`.
///
/// Durations are in microseconds. Fields that only one policy reads are ignored by the
/// others, as the Rust `GateConfig` does.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ts_gate_options {
    /// `sizeof(ts_gate_options)`; set by `ts_gate_options_init`.
    pub size: u32,
    /// Threads inside at once, 0..=1000 (0 = unlimited). `auto`: where the limit starts
    /// (default: the CPUs this process may use); it then adapts unless `adaptive_limit` is 0.
    pub limit: u32,
    /// Enters allowed per admission (InnoDB's `innodb_concurrency_tickets`, default 500), at
    /// least 1. Not read by `auto`, which grants a time quantum instead.
    pub tickets: u32,
    /// `auto`: refuse a newcomer with `TS_ERR_OVERLOADED` once this many sessions are queued
    /// (0, the default: no cap). Another policy given a cap is refused with `TS_ERR_CONFIG`.
    pub max_waiting: u32,
    /// `auto`: 1 (the default) lets the limit adapt to the machine; 0 keeps it at `limit`.
    pub adaptive_limit: u32,
    /// Must be 0 (room for flags).
    pub reserved: u32,
    /// The policy's name, NUL-terminated within the array (`"auto"`, `"classic"`,
    /// `"polling"`, `"timer"`, `"flifo"`, `"unlimited"`, case-insensitive); an empty string is
    /// `"auto"`. Set by `ts_gate_options_init`.
    pub policy: [c_char; TS_POLICY_NAME_LEN],
    /// InnoDB's `innodb_thread_sleep_delay`: the sleep before queueing (classic, flifo) or
    /// between polls (polling), default 10,000 µs, at most 1,000,000.
    pub sleep_delay_us: u64,
    /// polling: InnoDB 5.6's `innodb_adaptive_max_sleep_delay`, the most the adaptive sleep
    /// grows to (default 150,000 µs; 0 = a fixed `sleep_delay_us`), at most 1,000,000.
    pub adaptive_max_sleep_delay_us: u64,
    /// `auto`: the time a session may run per admission before it yields to a waiter,
    /// default 10,000 µs, 1..=1,000,000.
    pub quantum_us: u64,
    /// `auto`: past this age the oldest waiter is served before the newest, default
    /// 1,000 µs, at most 1,000,000.
    pub age_cap_us: u64,
    /// Every policy: refuse with `TS_ERR_OVERLOADED` a session not admitted within this time
    /// (0, the default: wait as long as it takes), at most 3,600,000,000 (an hour).
    pub queue_timeout_us: u64,
}

/// Bytes of `ts_gate_options.policy`, its NUL included: room for every policy name.
pub const TS_POLICY_NAME_LEN: usize = 16;

/// The smallest `ts_gate_options.size` accepted: the whole first version of the struct
/// (six 4-byte members, the 16-byte name, five 8-byte durations: no padding, one size on
/// every platform).
pub const TS_GATE_OPTIONS_MIN_SIZE: u32 = 80;
const _: () = assert!(size_of::<ts_gate_options>() == TS_GATE_OPTIONS_MIN_SIZE as usize);

/// The library's defaults for `policy`, as a C struct.
fn defaults(policy: Policy) -> ts_gate_options {
    let c = GateConfig::new(policy);
    ts_gate_options {
        size: size_of::<ts_gate_options>() as u32,
        limit: c.limit,
        tickets: c.tickets,
        max_waiting: c.max_waiting,
        adaptive_limit: c.adaptive_limit as u32,
        reserved: 0,
        policy: [0; TS_POLICY_NAME_LEN],
        sleep_delay_us: c.sleep_delay.as_micros() as u64,
        adaptive_max_sleep_delay_us: c.adaptive_max_sleep_delay.as_micros() as u64,
        quantum_us: c.quantum.as_micros() as u64,
        age_cap_us: c.age_cap.as_micros() as u64,
        queue_timeout_us: c.queue_timeout.map_or(0, |d| d.as_micros() as u64),
    }
}

/// Reads the policy name at `p` (NULL = `auto`).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for this call.
unsafe fn policy_at(p: *const c_char) -> Result<Policy, ts_status> {
    if p.is_null() {
        return Ok(Policy::Auto);
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract, read during this call.
    let name = unsafe { utf8(p) }?;
    name.parse::<Policy>().map_err(|e| config_error(&e))
}

/// The policy named in the options' array: up to its first NUL (none: `TS_ERR_CONFIG`, the
/// name does not fit), empty = `auto`.
fn policy_in(name: &[c_char; TS_POLICY_NAME_LEN]) -> Result<Policy, ts_status> {
    let bytes: Vec<u8> = name.iter().map(|&c| c as u8).collect();
    let Some(end) = bytes.iter().position(|&b| b == 0) else {
        return Err(ts_status::TS_ERR_CONFIG);
    };
    if end == 0 {
        return Ok(Policy::Auto);
    }
    let name = std::str::from_utf8(&bytes[..end]).map_err(|_| ts_status::TS_ERR_UTF8)?;
    name.parse::<Policy>().map_err(|e| config_error(&e))
}

/// Fills `*opts` with the defaults of `policy` (NULL = `"auto"`): `size`, every setting, and
/// the policy's name copied into `opts->policy`. Returns `TS_OK`, `TS_ERR_NULL` (NULL
/// `opts`), `TS_ERR_UTF8` or `TS_ERR_POLICY` (nothing written then).
///
/// It writes the first version's members only (`TS_GATE_OPTIONS_MIN_SIZE` bytes, which every
/// caller's struct has) and sets `size` to that: a caller built against a later header, whose
/// struct has more, should call `ts_gate_options_init_size(opts, sizeof *opts, policy)`,
/// which fills every member both know.
///
/// # Safety
/// `opts` is NULL or points to `TS_GATE_OPTIONS_MIN_SIZE` writable bytes; `policy` is NULL or
/// a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_options_init(
    opts: *mut ts_gate_options,
    policy: *const c_char,
) -> c_int {
    // SAFETY: the same contract, with the first version's size.
    unsafe { ts_gate_options_init_size(opts, TS_GATE_OPTIONS_MIN_SIZE as usize, policy) }
}

/// `ts_gate_options_init` for a struct of `size` bytes (`sizeof *opts` as the caller was
/// compiled): fills the members both this library and the caller know, and sets `size` to
/// their extent. Returns `TS_OK`, `TS_ERR_NULL`, `TS_ERR_SIZE` (`size` below
/// `TS_GATE_OPTIONS_MIN_SIZE`), `TS_ERR_UTF8` or `TS_ERR_POLICY` (nothing written on an
/// error).
///
/// # Safety
/// `opts` is NULL or points to `size` writable bytes; `policy` is NULL or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_options_init_size(
    opts: *mut ts_gate_options,
    size: usize,
    policy: *const c_char,
) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        if opts.is_null() {
            return ts_status::TS_ERR_NULL;
        }
        if size < TS_GATE_OPTIONS_MIN_SIZE as usize {
            return ts_status::TS_ERR_SIZE;
        }
        // SAFETY: NULL or NUL-terminated by contract.
        let p = match unsafe { policy_at(policy) } {
            Ok(p) => p,
            Err(e) => return e,
        };
        let n = size.min(size_of::<ts_gate_options>());
        let mut o = defaults(p);
        o.size = n as u32;
        // Every policy name is ASCII and shorter than the array (checked in the tests).
        for (dst, src) in o.policy.iter_mut().zip(p.name().bytes()) {
            *dst = src as c_char;
        }
        // SAFETY: `opts` is non-NULL and points to `size` ≥ `n` writable bytes by contract;
        // `o` is a whole struct without padding (its size is the sum of its members', see
        // `TS_GATE_OPTIONS_MIN_SIZE`), so its first `n` bytes are initialised; byte copies ask
        // nothing of alignment, and the two do not overlap (`o` is a local).
        unsafe {
            ptr::copy_nonoverlapping((&o as *const ts_gate_options).cast::<u8>(), opts.cast(), n)
        };
        ts_status::TS_OK
    })
    .code()
}

/// The `GateConfig` the options describe, or the status that refuses them.
fn config_of(o: &ts_gate_options) -> Result<GateConfig, ts_status> {
    if o.reserved != 0 {
        return Err(ts_status::TS_ERR_CONFIG);
    }
    let policy = policy_in(&o.policy)?;
    let us = Duration::from_micros;
    let config = GateConfig::new(policy)
        .limit(o.limit)
        .tickets(o.tickets)
        .sleep_delay(us(o.sleep_delay_us))
        .adaptive_max_sleep_delay(us(o.adaptive_max_sleep_delay_us))
        .quantum(us(o.quantum_us))
        .age_cap(us(o.age_cap_us))
        .max_waiting(o.max_waiting)
        .adaptive_limit(match o.adaptive_limit {
            0 => false,
            1 => true,
            _ => return Err(ts_status::TS_ERR_CONFIG),
        })
        .queue_timeout((o.queue_timeout_us > 0).then(|| us(o.queue_timeout_us)));
    config.validate().map_err(|e| config_error(&e))?;
    Ok(config)
}

/// A new gate with every setting of `*opts`, or NULL; `*status` (if not NULL) receives
/// `TS_OK` or the error: `TS_ERR_NULL` (NULL `opts`), `TS_ERR_SIZE` (see `ts_gate_options`),
/// `TS_ERR_UTF8`, `TS_ERR_POLICY`, or `TS_ERR_CONFIG` (a setting out of its documented range,
/// `adaptive_limit` not 0 or 1, `reserved` not 0). `opts` is only read during the call.
///
/// # Safety
/// `opts` is NULL or points to a readable `ts_gate_options` of at least `opts->size` bytes;
/// `status` is NULL or points to a writable `int`.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_new_with(
    opts: *const ts_gate_options,
    status: *mut c_int,
) -> *mut ts_gate {
    let (gate, st) = guard((ptr::null_mut(), ts_status::TS_ERR_PANIC), || {
        if opts.is_null() {
            return (ptr::null_mut(), ts_status::TS_ERR_NULL);
        }
        // SAFETY: `opts` is non-NULL and its first member, `size`, is readable by contract.
        let size = unsafe { ptr::addr_of!((*opts).size).read_unaligned() };
        if size < TS_GATE_OPTIONS_MIN_SIZE || size as usize > size_of::<ts_gate_options>() {
            return (ptr::null_mut(), ts_status::TS_ERR_SIZE);
        }
        // The caller's members over the defaults; members a caller built against an earlier
        // header lacks (past its `size`) keep the defaults of the policy it names.
        let over = |mut o: ts_gate_options| {
            // SAFETY: the caller guarantees `size` readable bytes, and `size` is at most this
            // version's struct (checked above), so the copy stays within `o`; byte copies ask
            // nothing of alignment, and `o` is a local.
            unsafe {
                ptr::copy_nonoverlapping(
                    opts.cast::<u8>(),
                    (&mut o as *mut ts_gate_options).cast::<u8>(),
                    size as usize,
                )
            };
            o
        };
        let named = match policy_in(&over(defaults(Policy::Auto)).policy) {
            Ok(p) => p,
            Err(e) => return (ptr::null_mut(), e),
        };
        let o = over(defaults(named));
        match config_of(&o) {
            Ok(c) => new_gate(c),
            Err(e) => (ptr::null_mut(), e),
        }
    });
    // SAFETY: NULL or a writable int by this function's contract.
    unsafe { write_status(status, st) };
    gate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_name_fits_the_array_with_its_nul() {
        for p in Policy::ALL {
            assert!(
                p.name().is_ascii() && p.name().len() < TS_POLICY_NAME_LEN,
                "{p:?}"
            );
        }
    }

    #[test]
    fn a_name_without_its_nul_is_refused() {
        let o = ts_gate_options {
            policy: [b'a' as c_char; TS_POLICY_NAME_LEN],
            ..defaults(Policy::Auto)
        };
        assert_eq!(config_of(&o), Err(ts_status::TS_ERR_CONFIG));
    }

    #[test]
    fn defaults_are_the_rust_configs_defaults_for_each_policy() {
        for p in [Policy::Auto, Policy::Classic, Policy::Polling] {
            let o = defaults(p);
            let mut c = config_of(&o).unwrap();
            assert_eq!(c.policy, Policy::Auto, "an empty name is auto");
            c.policy = p;
            assert_eq!(c, GateConfig::new(p));
        }
    }
}
