//! The real-thread driver: owns a policy's decision core, performs its steps with OS threads,
//! and keeps the registry of sessions that monitoring reads.

use std::time::{Duration, Instant};

use crate::clock::coarse_ns;
use crate::config::{check_limit, GateConfig, Policy};
use crate::error::ConfigError;
use crate::histogram::{Histogram, HistogramSnapshot};
use crate::monitor::{Counter, Counters, GateSnapshot, SessionSnapshot, SessionState, N_COUNTERS};
use crate::policy::polling::PollingCore;
use crate::policy::queue::{QueueCore, Release};
use crate::policy::timer::TimerCore;
use crate::policy::Core;
use crate::session::Session;
use crate::sync::{lock, Arc, AtomicBool, Condvar, Mutex};
// Monitoring fields (states, tickets, counters) are published with plain std atomics even under
// loom: they are written by one thread and read by monitors, and carry no synchronisation.
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// A thread-concurrency gate: at most `limit` threads inside an engine at once, with InnoDB's
/// concurrency tickets, under one of the [`Policy`] rules.
///
/// Cloning a `Gate` is cheap and shares it. Each thread (connection) works through its own
/// [`Session`]. See the crate documentation for a complete example.
#[derive(Clone)]
pub struct Gate {
    pub(crate) inner: Arc<GateInner>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("policy", &self.inner.config.policy)
            .field("limit", &self.limit())
            .finish_non_exhaustive()
    }
}

pub(crate) struct GateInner {
    pub(crate) config: GateConfig,
    pub(crate) engine: Engine,
    epoch: Instant,
    next_session: AtomicU64,
    /// The limit for the `unlimited` policy, kept only to report what was set.
    unlimited_limit: AtomicU32,
    /// Bumped whenever the limit is raised: a sleeper that sees it change re-checks at once.
    pub(crate) raise_generation: AtomicU64,
    registry: Mutex<Vec<Arc<SessionShared>>>,
    retired: Mutex<Retired>,
}

/// The decision core of the configured policy.
pub(crate) enum Engine {
    Queue(Mutex<QueueCore<Arc<SessionShared>>>),
    Polling(PollingCore),
    Timer(TimerCore),
    Unlimited,
}

/// Totals of sessions that have been dropped, and hand-offs made by limit changes.
#[derive(Default)]
struct Retired {
    counters: [u64; N_COUNTERS],
    wait: HistogramSnapshot,
    wake: HistogramSnapshot,
}

/// What a session publishes for monitoring and hand-offs. Written by its owning thread only,
/// except `state`/`since_ns` when an exiting thread marks it `Woken`, and `wake`/`cancel`.
pub(crate) struct SessionShared {
    pub(crate) id: u64,
    label: String,
    state: AtomicU8,
    pub(crate) tickets: AtomicU32,
    since_ns: AtomicU64,
    counters: [AtomicU64; N_COUNTERS],
    pub(crate) wait_hist: Histogram,
    pub(crate) wake_hist: Histogram,
    /// Hand-off delivery, under its own small lock.
    pub(crate) wake: Mutex<WakeState>,
    pub(crate) cv: Condvar,
    /// Set by a [`crate::Canceler`]; consumed by the wait that observes it or at statement end.
    pub(crate) cancel: AtomicBool,
}

#[derive(Default)]
pub(crate) struct WakeState {
    /// The last wait a hand-off released (ids are unique, so stale ones never match).
    pub(crate) released: Option<crate::policy::WaitId>,
    /// When that hand-off was made (gate clock, ns).
    pub(crate) handoff_ns: u64,
}

impl SessionShared {
    #[inline]
    pub(crate) fn bump(&self, c: Counter) {
        let a = &self.counters[c as usize];
        a.store(a.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
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

    pub(crate) fn state(&self) -> SessionState {
        SessionState::from_code(self.state.load(Ordering::Relaxed))
    }

    /// The wait histogram with the admissions that did not wait added as zeros (the fast
    /// path records nothing; a zero is admissions minus recorded waits).
    fn wait_snapshot(&self, counters: &[u64; N_COUNTERS]) -> HistogramSnapshot {
        let mut h = self.wait_hist.snapshot();
        let zeros = counters[Counter::Admissions as usize].saturating_sub(h.count());
        h.add_zeros(zeros);
        h
    }

    /// Publishes only when the current state began (the state itself is already set).
    pub(crate) fn mark_since_now(&self) {
        self.since_ns.store(coarse_ns(), Ordering::Relaxed);
    }

    fn counters(&self) -> [u64; N_COUNTERS] {
        std::array::from_fn(|i| self.counters[i].load(Ordering::Relaxed))
    }
}

impl Gate {
    /// A gate with this configuration, or the first setting that is out of range.
    pub fn new(config: GateConfig) -> Result<Gate, ConfigError> {
        config.validate()?;
        let c = config;
        let engine = match Core::new(&c) {
            Core::Queue(q) => Engine::Queue(Mutex::new(q)),
            Core::Polling(p) => Engine::Polling(p),
            Core::Timer(t) => Engine::Timer(t),
            Core::Unlimited => Engine::Unlimited,
        };
        Ok(Gate {
            inner: Arc::new(GateInner {
                config,
                engine,
                epoch: Instant::now(),
                next_session: AtomicU64::new(1),
                unlimited_limit: AtomicU32::new(c.limit),
                raise_generation: AtomicU64::new(0),
                registry: Mutex::new(Vec::new()),
                retired: Mutex::new(Retired::default()),
            }),
        })
    }

    /// A new session (one per connection or thread).
    pub fn session(&self) -> Session {
        self.named_session("")
    }

    /// A new session with a label shown in status output (a connection id, a query name).
    pub fn named_session(&self, label: impl Into<String>) -> Session {
        let shared = Arc::new(SessionShared {
            id: self.inner.next_session.fetch_add(1, Ordering::Relaxed),
            label: label.into(),
            state: AtomicU8::new(SessionState::Outside.code()),
            tickets: AtomicU32::new(0),
            since_ns: AtomicU64::new(0),
            counters: std::array::from_fn(|_| AtomicU64::new(0)),
            wait_hist: Histogram::new(),
            wake_hist: Histogram::new(),
            wake: Mutex::new(WakeState::default()),
            cv: Condvar::new(),
            cancel: AtomicBool::new(false),
        });
        lock(&self.inner.registry).push(shared.clone());
        Session::new(self.inner.clone(), shared)
    }

    /// The configuration the gate was built with (the limit may have changed since: see
    /// [`Gate::limit`]).
    pub fn config(&self) -> GateConfig {
        self.inner.config
    }

    /// The gate's policy.
    pub fn policy(&self) -> Policy {
        self.inner.config.policy
    }

    /// The limit now (0 = unlimited).
    pub fn limit(&self) -> u32 {
        match &self.inner.engine {
            Engine::Queue(m) => lock(m).limit(),
            Engine::Polling(c) => c.limit(),
            Engine::Timer(c) => c.limit(),
            Engine::Unlimited => self.inner.unlimited_limit.load(Ordering::Relaxed),
        }
    }

    /// Changes the limit while threads run. Raising it admits waiters at once (queued waiters
    /// are handed slots; sleepers are woken to re-check); lowering it never evicts a thread
    /// already inside. The `unlimited` policy records the value and stays unlimited.
    pub fn set_limit(&self, limit: u32) -> Result<(), ConfigError> {
        check_limit(limit)?;
        let old = self.limit();
        match &self.inner.engine {
            Engine::Queue(m) => {
                let released = {
                    let mut core = lock(m);
                    let released = core.set_limit(limit);
                    mark_woken(&released);
                    released
                };
                lock(&self.inner.retired).counters[Counter::HandOffs as usize] +=
                    released.len() as u64;
                for r in released {
                    deliver(&self.inner, r);
                }
            }
            Engine::Polling(c) => c.set_limit(limit),
            Engine::Timer(c) => c.set_limit(limit),
            Engine::Unlimited => self.inner.unlimited_limit.store(limit, Ordering::Relaxed),
        }
        let raised = limit == 0 || (old != 0 && limit > old);
        if raised {
            self.wake_sleepers();
        }
        Ok(())
    }

    /// Wakes every sleeping session so it re-checks the gate now. The generation is bumped
    /// before any wake-up, and a sleeper compares it under its wake lock before sleeping, so
    /// none can miss it.
    fn wake_sleepers(&self) {
        self.inner.raise_generation.fetch_add(1, Ordering::Release);
        let sessions: Vec<Arc<SessionShared>> = lock(&self.inner.registry).clone();
        for s in sessions {
            if matches!(s.state(), SessionState::Sleeping) {
                drop(lock(&s.wake));
                s.cv.notify_one();
            }
        }
    }

    /// A picture of the gate now: counts, every session's state, counters and histograms.
    pub fn snapshot(&self) -> GateSnapshot {
        let inner = &*self.inner;
        let now = coarse_ns();
        let mut counters = [0u64; N_COUNTERS];
        let mut wait = HistogramSnapshot::default();
        let mut wake = HistogramSnapshot::default();
        let mut sessions = Vec::new();
        for s in lock(&inner.registry).iter() {
            let c = s.counters();
            for (t, v) in counters.iter_mut().zip(c) {
                *t += v;
            }
            wait.merge(&s.wait_snapshot(&c));
            wake.merge(&s.wake_hist.snapshot());
            let state = s.state();
            let since = s.since_ns.load(Ordering::Relaxed);
            sessions.push(SessionSnapshot {
                id: s.id,
                label: s.label.clone(),
                state,
                tickets: s.tickets.load(Ordering::Relaxed),
                in_state: (state != SessionState::Outside && since != 0)
                    .then(|| Duration::from_nanos(now.saturating_sub(since))),
            });
        }
        {
            let r = lock(&inner.retired);
            for (t, v) in counters.iter_mut().zip(r.counters) {
                *t += v;
            }
            wait.merge(&r.wait);
            wake.merge(&r.wake);
        }
        let count = |pred: fn(SessionState) -> bool| -> u32 {
            sessions.iter().filter(|s| pred(s.state)).count() as u32
        };
        let c = &inner.config;
        let (inside, lifo_running, fifo_pending, queued, sleeping, sleep_delay) =
            match &inner.engine {
                Engine::Queue(m) => {
                    let q = lock(m);
                    (
                        q.inside(),
                        q.lifo_running(),
                        q.fifo_pending(),
                        q.queued(),
                        q.sleeping(),
                        c.sleep_delay,
                    )
                }
                Engine::Polling(p) => (p.inside(), 0, 0, 0, p.waiting(), p.sleep_delay()),
                Engine::Timer(t) => (
                    t.inside(),
                    0,
                    0,
                    0,
                    count(|s| matches!(s, SessionState::Sleeping | SessionState::Yielding)),
                    crate::policy::timer::TIMER_SLEEP,
                ),
                Engine::Unlimited => (count(SessionState::is_inside), 0, 0, 0, 0, Duration::ZERO),
            };
        GateSnapshot {
            policy: c.policy,
            limit: self.limit(),
            tickets: c.tickets,
            inside,
            lifo_running,
            fifo_pending,
            queued,
            sleeping,
            sleep_delay,
            sessions,
            counters: Counters::from_array(&counters),
            wait,
            wake_latency: wake,
            taken_at: Duration::from_nanos(inner.precise_ns()),
        }
    }
}

impl GateInner {
    /// Precise nanoseconds since the gate was created (slow paths: hand-off stamps).
    pub(crate) fn precise_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64 + 1
    }

    /// Removes a dropped session from the registry and keeps its totals.
    pub(crate) fn retire(&self, s: &Arc<SessionShared>) {
        lock(&self.registry).retain(|x| !Arc::ptr_eq(x, s));
        let mut r = lock(&self.retired);
        for (t, v) in r.counters.iter_mut().zip(s.counters()) {
            *t += v;
        }
        r.wait.merge(&s.wait_snapshot(&s.counters()));
        r.wake.merge(&s.wake_hist.snapshot());
    }
}

/// Marks released waiters `Woken` while the queue lock is still held, so the mark is ordered
/// before anything the waiter itself publishes after it takes the lock again.
pub(crate) fn mark_woken(released: &[Release<Arc<SessionShared>>]) {
    for r in released {
        r.waiter.set_state_now(SessionState::Woken);
    }
}

/// Signals a released waiter (call without the queue lock held).
pub(crate) fn deliver(inner: &GateInner, r: Release<Arc<SessionShared>>) {
    let mut w = lock(&r.waiter.wake);
    // Wait ids only grow. A delivery delayed past a later wait of the same session (its first
    // wait ended by a cancel that found the slot already released) must not overwrite the
    // newer release, or that waiter would sleep forever holding a counted slot.
    if w.released.is_some_and(|newer| newer > r.id) {
        return;
    }
    w.released = Some(r.id);
    w.handoff_ns = inner.precise_ns();
    drop(w);
    r.waiter.cv.notify_one();
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::WaitId;
    use crate::Policy;

    #[test]
    fn a_late_delivery_never_overwrites_a_newer_release() {
        let gate = Gate::new(GateConfig::new(Policy::Classic)).unwrap();
        let s = gate.session();
        let sh = lock(&gate.inner.registry)[0].clone();
        deliver(
            &gate.inner,
            Release {
                waiter: sh.clone(),
                id: WaitId(5),
            },
        );
        deliver(
            &gate.inner,
            Release {
                waiter: sh.clone(),
                id: WaitId(3),
            },
        );
        assert_eq!(lock(&sh.wake).released, Some(WaitId(5)));
        drop(s);
    }
}
