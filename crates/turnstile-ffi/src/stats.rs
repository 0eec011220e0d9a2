//! `ts_stats`: the gate's counters and gauges as a plain, growable struct.

use std::ffi::{c_char, c_int};
use std::mem::{offset_of, size_of};
use std::ptr;

use turnstile::HistogramSnapshot;

use crate::gate::ts_gate;
use crate::guard;
use crate::status::ts_status;

/// The layout version `ts_gate_stats` fills (`ts_stats.version`). Later versions only append
/// members: version 2 appended `lock_waiting` and `lock_waits`.
pub const TS_STATS_VERSION: u32 = 2;

/// The smallest `ts_stats.size` accepted: the `size` and `version` members.
pub const TS_STATS_MIN_SIZE: u32 = 8;

/// The gate's totals and gauges, from `ts_gate_stats`.
///
/// **Versioning**: set `size = sizeof(ts_stats)` before the call. The library fills the first
/// `min(size, its own sizeof(ts_stats))` bytes, sets `size` to that number and `version` to
/// the layout it knows (`TS_STATS_VERSION`), and touches nothing after them. A program built
/// against an older, shorter `ts_stats` thus keeps working with a newer library, and a newer
/// program reads `size` to see which members an older library filled. Members are only ever
/// appended, and the struct has no padding.
///
/// Counters (`admissions` .. `timeouts`) only grow over the gate's life and include sessions
/// already freed; gauges are the state now.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ts_stats {
    /// In: `sizeof(ts_stats)` as the caller was compiled. Out: the bytes filled.
    pub size: u32,
    /// Out: the layout version filled (`TS_STATS_VERSION`).
    pub version: u32,
    /// The policy's name, NUL-terminated ("classic", "polling", …).
    pub policy: [c_char; 16],
    /// The limit now (0 = unlimited).
    pub limit: u32,
    /// Tickets per admission.
    pub tickets: u32,
    /// Threads counted in the limit's slots (also those between calls that keep their slot;
    /// `polling` and `timer` may briefly count a thread mid-check; always 0 for `unlimited`).
    pub inside: u32,
    /// `flifo`: threads running by the LIFO rule (not in `inside`).
    pub lifo_running: u32,
    /// `flifo`: released waiters that have not begun to run.
    pub fifo_pending: u32,
    /// Threads waiting in the FIFO queue.
    pub queued: u32,
    /// Threads sleeping before (re)trying.
    pub sleeping: u32,
    /// Sessions waiting to be admitted, whatever the way.
    pub waiting: u32,
    /// Sessions inside a declared wait (`ts_wait_begin`).
    pub stepped_out: u32,
    /// Live sessions.
    pub sessions: u32,
    /// The sleep delay in force, in nanoseconds (`polling`'s adapts).
    pub sleep_delay_ns: u64,
    /// Admissions: enters that took a slot by the policy (`ts_enter` returning `TS_ADMITTED`,
    /// and the re-admission of `ts_wait_end` within a call).
    pub admissions: u64,
    /// Enters that spent a ticket (`ts_enter` returning `TS_OK`).
    pub ticket_reentries: u64,
    /// Sleeps before queueing or between polls.
    pub sleeps: u64,
    /// Processor yields (`timer`).
    pub yields: u64,
    /// Waits in the FIFO queue.
    pub queue_waits: u64,
    /// Slots handed directly to a waiter by a leaving thread.
    pub handoffs: u64,
    /// `flifo`: admissions by the LIFO rule.
    pub lifo_admissions: u64,
    /// `timer`: entries forced after the last sleep.
    pub forced_entries: u64,
    /// Re-entries after a row-lock wait, without checking the limit.
    pub unchecked_reentries: u64,
    /// Declared waits (`ts_wait_begin`).
    pub step_outs: u64,
    /// Waits that ended with `TS_ERR_CANCELLED`.
    pub cancellations: u64,
    /// Waits that ended with `TS_ERR_TIMEOUT`.
    pub timeouts: u64,
    /// Admissions recorded in the wait-time distribution (those that did not wait count 0).
    pub wait_count: u64,
    /// Median wait for admission, in nanoseconds.
    pub wait_p50_ns: u64,
    /// 99th percentile wait for admission, in nanoseconds.
    pub wait_p99_ns: u64,
    /// Longest wait for admission, in nanoseconds.
    pub wait_max_ns: u64,
    /// Hand-offs recorded in the wake-up latency distribution (queue policies).
    pub wake_count: u64,
    /// Median time from a hand-off's signal to the woken thread running, in nanoseconds.
    pub wake_p50_ns: u64,
    /// 99th percentile wake-up latency, in nanoseconds.
    pub wake_p99_ns: u64,
    /// Longest wake-up latency, in nanoseconds.
    pub wake_max_ns: u64,
    /// How long the gate had existed when these were taken, in nanoseconds.
    pub taken_at_ns: u64,
    /// Version 2. `classic`/`flifo`: threads waiting for the gate's own lock now (InnoDB
    /// 5.0's `srv_conc_mutex`), spinning or asleep; 0 for the other policies. (64 bits so the
    /// struct keeps no padding.)
    pub lock_waiting: u64,
    /// Version 2. `classic`/`flifo`: acquisitions of that lock that had to wait, over the
    /// gate's life.
    pub lock_waits: u64,
}

// No padding anywhere (the partial copy below then copies only initialized bytes, and every
// member boundary is the same on every platform): the members' sizes add up to the struct's.
const _: () = assert!(size_of::<ts_stats>() == 2 * 4 + 16 + 10 * 4 + 24 * 8);
const _: () = assert!(offset_of!(ts_stats, sleep_delay_ns) % 8 == 0);
const _: () = assert!(offset_of!(ts_stats, policy) == TS_STATS_MIN_SIZE as usize);

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn percentiles(h: &HistogramSnapshot) -> [u64; 4] {
    [h.count(), h.quantile(0.5), h.quantile(0.99), h.max()]
}

fn collect(g: &ts_gate) -> ts_stats {
    let s = g.gate.stats();
    let c = s.counters;
    let mut policy = [0 as c_char; 16];
    for (dst, &b) in policy
        .iter_mut()
        .zip(s.policy.name().as_bytes().iter().take(15))
    {
        *dst = b as c_char;
    }
    let [wait_count, wait_p50_ns, wait_p99_ns, wait_max_ns] = percentiles(&s.wait);
    let [wake_count, wake_p50_ns, wake_p99_ns, wake_max_ns] = percentiles(&s.wake_latency);
    ts_stats {
        size: size_of::<ts_stats>() as u32,
        version: TS_STATS_VERSION,
        policy,
        limit: s.limit,
        tickets: s.tickets,
        inside: s.inside,
        lifo_running: s.lifo_running,
        fifo_pending: s.fifo_pending,
        queued: s.queued,
        sleeping: s.sleeping,
        waiting: s.waiting,
        stepped_out: s.stepped_out,
        sessions: s.sessions,
        sleep_delay_ns: ns(s.sleep_delay),
        admissions: c.admissions,
        ticket_reentries: c.ticket_reentries,
        sleeps: c.sleeps,
        yields: c.yields,
        queue_waits: c.queue_waits,
        handoffs: c.handoffs,
        lifo_admissions: c.lifo_admissions,
        forced_entries: c.forced_entries,
        unchecked_reentries: c.unchecked_reentries,
        step_outs: c.step_outs,
        cancellations: c.cancellations,
        timeouts: c.timeouts,
        wait_count,
        wait_p50_ns,
        wait_p99_ns,
        wait_max_ns,
        wake_count,
        wake_p50_ns,
        wake_p99_ns,
        wake_max_ns,
        taken_at_ns: ns(s.taken_at),
        lock_waiting: u64::from(s.lock_waiting),
        lock_waits: s.lock_waits,
    }
}

/// Fills `*out` with the gate's counters and gauges; see `ts_stats` for the `size` protocol.
/// Returns `TS_OK`, `TS_ERR_NULL` (NULL gate or `out`), or `TS_ERR_SIZE` (`out->size` below
/// `TS_STATS_MIN_SIZE`; nothing written).
///
/// # Safety
/// `gate` is NULL or a live gate; `out` is NULL or points to at least `out->size` writable
/// bytes, its `size` member set by the caller.
#[no_mangle]
pub unsafe extern "C" fn ts_gate_stats(gate: *mut ts_gate, out: *mut ts_stats) -> c_int {
    guard(ts_status::TS_ERR_PANIC, || {
        // SAFETY: NULL or a live gate by contract; only shared access is taken.
        let Some(g) = (unsafe { gate.as_ref() }) else {
            return ts_status::TS_ERR_NULL;
        };
        if out.is_null() {
            return ts_status::TS_ERR_NULL;
        }
        // SAFETY: `out` is non-NULL and its `size` member (the first 4 bytes) was set by the
        // caller; the read is unaligned-safe and touches only those bytes.
        let size = unsafe { ptr::addr_of!((*out).size).read_unaligned() };
        if size < TS_STATS_MIN_SIZE {
            return ts_status::TS_ERR_SIZE;
        }
        let mut full = collect(g);
        let n = (size as usize).min(size_of::<ts_stats>());
        full.size = n as u32;
        // SAFETY: `out` points to at least `size >= n` writable bytes by contract; `full` is a
        // local of `size_of::<ts_stats>() >= n` bytes with no padding (asserted above), so
        // every byte copied is initialized; the two do not overlap.
        unsafe { ptr::copy_nonoverlapping(ptr::addr_of!(full).cast::<u8>(), out.cast::<u8>(), n) };
        ts_status::TS_OK
    })
    .code()
}
