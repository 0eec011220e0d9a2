//! The gate: its configuration, its driver (the policy's core, driven with threads), and the
//! registry of sessions that monitoring reads.

use crate::config::{check_limit, GateConfig, Policy};
use crate::driver::Driver;
use crate::error::ConfigError;
use crate::inner::GateInner;
use crate::monitor::{Counter, GateSnapshot, GateStats, Occupancy, N_COUNTERS};
use crate::registry::{Registry, SessionShared};
use crate::session::Session;
use crate::sync::{lock, Arc, AtomicU64, Ordering};

/// A thread-concurrency gate: at most `limit` threads inside an engine at once, with InnoDB's
/// concurrency tickets, under one of the [`Policy`] rules.
///
/// Cloning a `Gate` is cheap and shares it. Each thread (connection) works through its own
/// [`Session`]. See the crate documentation for a complete example.
///
/// ```
/// use turnstile::{Gate, GateConfig, Policy};
///
/// let gate = Gate::new(GateConfig::new(Policy::Classic).limit(2))?;
/// let mut session = gate.session();
/// let mut stmt = session.begin();
/// let call = stmt.enter()?;
/// assert_eq!(gate.stats().inside, 1);
/// drop(call);
/// drop(stmt);
/// assert_eq!(gate.stats().counters.admissions, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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

impl Gate {
    /// A gate with this configuration, or the first setting that is out of range.
    pub fn new(config: GateConfig) -> Result<Gate, ConfigError> {
        config.validate()?;
        Ok(Gate {
            inner: Arc::new(GateInner {
                config,
                driver: Driver::new(&config),
                registry: Registry::new(),
                next_session: std::sync::atomic::AtomicU64::new(1),
                raise_generation: AtomicU64::new(0),
            }),
        })
    }

    /// A new session (one per connection or thread).
    pub fn session(&self) -> Session {
        self.named_session("")
    }

    /// A new session with a label shown in status output (a connection id, a query name).
    pub fn named_session(&self, label: impl Into<String>) -> Session {
        Session::new(self.inner.clone(), self.new_shared(label.into()))
    }

    /// A new session's monitoring record, listed in the registry.
    pub(crate) fn new_shared(&self, label: String) -> Arc<SessionShared> {
        let id = self.inner.next_session.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(SessionShared::new(id, label));
        self.inner.registry.add(shared.clone());
        shared
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
        self.inner.driver.limit()
    }

    /// Changes the limit while threads run. Raising it admits waiters at once (queued waiters
    /// are handed slots; sleepers are woken to re-check); lowering it never evicts a thread
    /// already inside. Once this returns, no thread is admitted beyond the new limit by the
    /// limit check — `classic` and `polling` keep at most `limit` inside, `flifo` `2 × limit`,
    /// counting those admitted while the limit was 0; `timer`'s forced entries and the
    /// unchecked re-entry after a row-lock wait are, by design, not bound by it. The
    /// `unlimited` policy records the value and stays unlimited.
    pub fn set_limit(&self, limit: u32) -> Result<(), ConfigError> {
        check_limit(limit)?;
        let old = self.inner.driver.set_limit(limit);
        let raised = limit == 0 || (old != 0 && limit > old);
        if raised {
            self.wake_sleepers();
        }
        Ok(())
    }

    /// Wakes every sleeping session so it re-checks the gate now. A sleeper reads the
    /// generation *before* its policy decides to sleep, and compares it under its wake lock
    /// before each wait; this bumps it after the new limit is stored and then takes every
    /// session's wake lock to notify. So a sleeper either decided under the new limit, or
    /// sees the new generation at its check, or is already waiting when the notify comes.
    fn wake_sleepers(&self) {
        self.inner.raise_generation.fetch_add(1, Ordering::AcqRel);
        let mut wakers = Vec::new();
        self.inner.registry.for_each(|s| {
            // An async sleeper registered its waker before checking the generation, under
            // the same lock: it re-checks when woken.
            if let Some(waker) = lock(&s.wake).waker.clone() {
                wakers.push(waker);
            }
            s.cv.notify_one();
        });
        // Woken once the registry lock is released: a waker may run arbitrary executor code,
        // which must not find the gate's registry held (it might create a session).
        for waker in wakers {
            waker.wake();
        }
    }

    /// Totals and gauges now: cheap (one pass over the sessions' counters under the registry
    /// lock, no allocation per session), with lifetime counters that never decrease.
    pub fn stats(&self) -> GateStats {
        let totals = self.inner.registry.totals();
        self.inner.stats_from(totals)
    }

    /// How full the gate is now: cheap (the policy's counters, no pass over the sessions), for
    /// a scheduler that decides on every task whether another thread should run.
    pub fn occupancy(&self) -> Occupancy {
        self.inner.occupancy()
    }

    /// A picture of the gate now: its [`GateStats`] and every session's state and tickets.
    pub fn snapshot(&self) -> GateSnapshot {
        let (totals, sessions) = self.inner.registry.sessions();
        GateSnapshot {
            stats: self.inner.stats_from(totals),
            sessions,
        }
    }
}

/// A compile-time check that the counter array and [`Counters`] stay in step.
const _: () = assert!(N_COUNTERS == Counter::AdmissionsWithoutWait as usize + 1);
