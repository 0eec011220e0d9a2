//! What every handle of one gate shares: its configuration, its driver (the policy's core,
//! driven with threads) and the registry of sessions. Below `Gate`, `Session` and the lock
//! hook, which all reach the gate through it, so none of them imports another's module.

use std::time::Duration;

use crate::config::GateConfig;
use crate::driver::Driver;
use crate::monitor::{Counters, GateStats, Occupancy};
use crate::registry::{Registry, Totals};
use crate::sync::{AtomicU64, Ordering};

/// The shared state behind every `Gate` clone and `Session` of one gate.
pub(crate) struct GateInner {
    pub(crate) config: GateConfig,
    pub(crate) driver: Driver,
    pub(crate) registry: Registry,
    pub(crate) next_session: std::sync::atomic::AtomicU64,
    /// Bumped whenever the limit is raised: a sleeper that sees it change re-checks at once.
    /// It orders the new limit before the sleeper's re-check, so it is one of the atomics the
    /// model checker tracks (`crate::sync`).
    pub(crate) raise_generation: AtomicU64,
}

impl GateInner {
    pub(crate) fn occupancy(&self) -> Occupancy {
        let g = self.driver.gauges(self.config.sleep_delay);
        let r = &self.registry;
        Occupancy {
            limit: g.limit,
            inside: g.inside,
            waiting: r.waiting.load(Ordering::Relaxed).max(g.queued + g.sleeping),
            stepped_out: r.stepped_out.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn stats_from(&self, totals: Totals) -> GateStats {
        let c = &self.config;
        let g = self.driver.gauges(c.sleep_delay);
        let r = &self.registry;
        let (lock_waiting, lock_waits) = self.driver.lock_contention();
        GateStats {
            policy: c.policy,
            limit: g.limit,
            tickets: c.tickets,
            inside: g.inside,
            lifo_running: g.lifo_running,
            fifo_pending: g.fifo_pending,
            queued: g.queued,
            sleeping: g.sleeping,
            // A session is counted queued or sleeping by the policy before it counts itself
            // waiting (the fast path counts nothing): never show fewer waiting than those.
            waiting: r.waiting.load(Ordering::Relaxed).max(g.queued + g.sleeping),
            stepped_out: r.stepped_out.load(Ordering::Relaxed),
            sessions: totals.sessions,
            lock_waiting,
            lock_waits,
            sleep_delay: g.sleep_delay,
            quantum: c.quantum,
            adaptive_limit: c.adaptive_limit,
            auto: g.auto,
            counters: Counters {
                // Counted where slots are handed over, not per session (a raise or a stall
                // check hands slots that no session's exit made).
                handoffs: self.driver.handoffs(),
                ..Counters::from_array(&totals.counters)
            },
            wait: r.wait_histogram(&totals.counters),
            wake_latency: r.wake.snapshot(),
            taken_at: Duration::from_nanos(self.driver.precise_ns()),
        }
    }
}
