//! What sessions publish for monitoring, and the gate-wide totals an operator scrapes.
//!
//! Each session owns a [`SessionShared`] record: its state and when it began, its tickets, and
//! its event counters, written by its own thread with plain relaxed stores (no shared
//! read-modify-write on the fast paths). The [`Registry`] lists the live records and keeps the
//! totals of dropped sessions.
//!
//! Invariants:
//! - **Lifetime totals never decrease.** A session leaves the live list and its counts join
//!   the retired sums in one step, under the registry lock then the retired lock (the order
//!   every reader takes them in too), so no reader sees it in neither or in both.
//! - Every histogram bucket is a sum of monotonic counts: waits are recorded in gate-wide
//!   histograms by the thread that waited, and admissions that did not wait are their own
//!   per-session counter (never derived by subtraction).

use std::time::Duration;

/// A session's `held` word: loom's atomic under loom, so that the models of the word's
/// transitions (`gate_hook`'s `loom_models`) check the functions and orderings that ship.
#[cfg(not(loom))]
pub(crate) type Word = std::sync::atomic::AtomicUsize;
#[cfg(loom)]
pub(crate) type Word = loom::sync::atomic::AtomicUsize;

use crate::clock::coarse_ns;
use crate::histogram::{Histogram, HistogramSnapshot};
use crate::monitor::{Counter, SessionSnapshot, SessionState, N_COUNTERS};
use crate::policy::WaitId;
use crate::sync::{lock, Arc, AtomicBool, Condvar, Mutex};
// Monitoring fields (states, tickets, counters) are published with plain std atomics even under
// loom: they are written by one thread and read by monitors, and carry no synchronisation.
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// What a session publishes for monitoring and hand-offs. Written by its owning thread only,
/// except `state`/`since_ns` when a hand-off marks it `Woken`, and `wake`/`cancel`.
pub(crate) struct SessionShared {
    pub(crate) id: u64,
    label: String,
    state: AtomicU8,
    pub(crate) tickets: AtomicU32,
    since_ns: AtomicU64,
    counters: [AtomicU64; N_COUNTERS],
    /// Hand-off delivery, under its own small lock.
    pub(crate) wake: Mutex<WakeState>,
    pub(crate) cv: Condvar,
    /// Set by a [`crate::Canceler`]; consumed by the wait that observes it or at statement end.
    pub(crate) cancel: AtomicBool,
    /// `auto`'s automatic step-out (`gate_hook`): the thread whose record holds this session
    /// (0: none; a thread that records another session in its place resets it).
    pub(crate) owner: std::sync::atomic::AtomicUsize,
    /// `auto`'s automatic step-out: `gate_hook::{NONE, SLOT, LENT}` in the low two bits,
    /// the thread running the session's call above them (none between calls).
    pub(crate) held: Word,
    /// An async session's: its waits do not wake on a timer, so it never keeps `auto`'s
    /// stall watch. Set once, before its first wait.
    pub(crate) is_async: AtomicBool,
    /// `gate_hook`'s loan: when the session's inside state began, restored by the reclaim
    /// (the loan's step-out state has its own timestamp).
    pub(crate) lent_since: AtomicU64,
    /// `gate_hook`'s loan: the state it replaced (`SessionState::code`: in a call, or a
    /// step-out within a call that keeps the slot), restored by the reclaim.
    pub(crate) lent_state: std::sync::atomic::AtomicU8,
}

#[derive(Default)]
pub(crate) struct WakeState {
    /// The last wait a hand-off released (ids are unique, so stale ones never match).
    pub(crate) released: Option<WaitId>,
    /// When that hand-off was made (gate clock, ns).
    pub(crate) handoff_ns: u64,
    /// The waker of an async session's pending admission (feature `async`): a hand-off takes
    /// and wakes it, a raise of the limit wakes it; the pending future re-registers it on
    /// every poll. Always `None` for a thread session, which waits on `cv`.
    pub(crate) waker: Option<std::task::Waker>,
}

impl SessionShared {
    pub(crate) fn new(id: u64, label: String) -> SessionShared {
        SessionShared {
            id,
            label,
            state: AtomicU8::new(SessionState::Outside.code()),
            tickets: AtomicU32::new(0),
            since_ns: AtomicU64::new(0),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            wake: Mutex::new(WakeState::default()),
            owner: std::sync::atomic::AtomicUsize::new(0),
            held: Word::new(0),
            cv: Condvar::new(),
            cancel: AtomicBool::new(false),
            is_async: AtomicBool::new(false),
            lent_since: AtomicU64::new(0),
            lent_state: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// Counts one event (owner thread only: a load and a store, no read-modify-write).
    #[inline]
    pub(crate) fn bump(&self, c: Counter) {
        let a = &self.counters[c as usize];
        a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Counts one event from a thread that may not be the session's (`gate_hook`'s loan: the
    /// session may have moved threads): a read-modify-write. A counter that another thread
    /// may count too (`StepOuts`) is counted with this one on the owner's side as well: a
    /// plain `bump` racing with it would overwrite its increment.
    pub(crate) fn bump_shared(&self, c: Counter) {
        self.counters[c as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Publishes a state without touching its timestamp (the fast paths).
    #[inline]
    pub(crate) fn set_state(&self, s: SessionState) {
        self.state.store(s.code(), Ordering::Relaxed);
    }

    /// Publishes a state and when it began (coarse clock).
    #[inline]
    pub(crate) fn set_state_now(&self, s: SessionState) {
        self.since_ns.store(coarse_ns(), Ordering::Relaxed);
        self.state.store(s.code(), Ordering::Relaxed);
    }

    /// Publishes a state that began at `since_ns` (coarse clock).
    pub(crate) fn set_state_since(&self, s: SessionState, since_ns: u64) {
        self.since_ns.store(since_ns, Ordering::Relaxed);
        self.state.store(s.code(), Ordering::Relaxed);
    }

    pub(crate) fn state(&self) -> SessionState {
        SessionState::from_code(self.state.load(Ordering::Relaxed))
    }

    /// When the current state began (coarse clock; 0 = never set).
    pub(crate) fn since_ns(&self) -> u64 {
        self.since_ns.load(Ordering::Relaxed)
    }

    fn add_counters_to(&self, totals: &mut [u64; N_COUNTERS]) {
        for (t, a) in totals.iter_mut().zip(&self.counters) {
            *t += a.load(Ordering::Relaxed);
        }
    }

    fn snapshot(&self, now: u64) -> SessionSnapshot {
        let state = self.state();
        let since = self.since_ns.load(Ordering::Relaxed);
        SessionSnapshot {
            id: self.id,
            label: self.label.clone(),
            state,
            tickets: self.tickets.load(Ordering::Relaxed),
            in_state: (state != SessionState::Outside && since != 0)
                .then(|| Duration::from_nanos(now.saturating_sub(since))),
        }
    }
}

/// The live sessions, the totals of dropped ones, and the gate-wide histograms and gauges.
pub(crate) struct Registry {
    live: Mutex<Vec<Arc<SessionShared>>>,
    /// Counter totals of dropped sessions plus events no session owns (limit hand-offs).
    /// Lock order: `live`, then `retired`.
    retired: Mutex<[u64; N_COUNTERS]>,
    /// Time from asking to enter to admission, for admissions that waited.
    pub(crate) wait: Histogram,
    /// Time from a hand-off's signal to the woken thread running.
    pub(crate) wake: Histogram,
    /// Sessions in an admission's slow path (sleeping, yielding, queued, woken).
    pub(crate) waiting: AtomicU32,
    /// Sessions stepped out of the gate around blocking work.
    pub(crate) stepped_out: AtomicU32,
}

/// Totals read in one consistent step.
/// See [`Registry::count_waiting`].
pub(crate) struct Waiting<'a>(&'a AtomicU32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(crate) struct Totals {
    pub(crate) counters: [u64; N_COUNTERS],
    pub(crate) sessions: u32,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            live: Mutex::new(Vec::new()),
            retired: Mutex::new([0; N_COUNTERS]),
            wait: Histogram::new(),
            wake: Histogram::new(),
            waiting: AtomicU32::new(0),
            stepped_out: AtomicU32::new(0),
        }
    }

    pub(crate) fn add(&self, s: Arc<SessionShared>) {
        lock(&self.live).push(s);
    }

    /// Removes a dropped session and keeps its totals, in one step for every reader.
    pub(crate) fn retire(&self, s: &Arc<SessionShared>) {
        let mut live = lock(&self.live);
        let mut retired = lock(&self.retired);
        s.add_counters_to(&mut retired);
        live.retain(|x| !Arc::ptr_eq(x, s));
    }

    /// Counts a thread session waiting to be admitted until the guard is dropped (also by
    /// a panic in its wait).
    pub(crate) fn count_waiting(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting(&self.waiting)
    }

    /// Lifetime counter totals and the number of live sessions: no allocation, one pass.
    pub(crate) fn totals(&self) -> Totals {
        let live = lock(&self.live);
        let mut counters = *lock(&self.retired);
        for s in live.iter() {
            s.add_counters_to(&mut counters);
        }
        Totals {
            counters,
            sessions: live.len() as u32,
        }
    }

    /// Totals plus every live session's picture.
    pub(crate) fn sessions(&self) -> (Totals, Vec<SessionSnapshot>) {
        let now = coarse_ns();
        let live = lock(&self.live);
        let mut counters = *lock(&self.retired);
        let mut sessions = Vec::with_capacity(live.len());
        for s in live.iter() {
            s.add_counters_to(&mut counters);
            sessions.push(s.snapshot(now));
        }
        let totals = Totals {
            counters,
            sessions: live.len() as u32,
        };
        (totals, sessions)
    }

    /// Runs `f` on every live session (under the registry lock: `f` may take a session's wake
    /// lock, never the registry's).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&SessionShared)) {
        for s in lock(&self.live).iter() {
            f(s);
        }
    }

    /// The live-session lock is held now (by anyone): lets a test's waker see whether it is
    /// woken under it.
    #[cfg(all(test, feature = "async", not(loom)))]
    pub(crate) fn live_is_locked(&self) -> bool {
        matches!(
            self.live.try_lock(),
            Err(std::sync::TryLockError::WouldBlock)
        )
    }

    /// The wait histogram with the admissions that did not wait added as zeros.
    pub(crate) fn wait_histogram(&self, counters: &[u64; N_COUNTERS]) -> HistogramSnapshot {
        let mut h = self.wait.snapshot();
        h.add_zeros(counters[Counter::AdmissionsWithoutWait as usize]);
        h
    }
}
