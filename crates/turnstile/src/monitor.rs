//! The live picture: what each session is doing and why, the gate's counters and histograms,
//! and an InnoDB-style status text (`SHOW ENGINE INNODB STATUS`'s "N queries inside InnoDB, M
//! queries in queue" and per-transaction "declared inside InnoDB 383").

use std::fmt;
use std::time::Duration;

use crate::auto_stats::AutoStats;
use crate::config::Policy;
use crate::histogram::HistogramSnapshot;

pub use crate::policy::step_out::StepOutReason;

/// What a session is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum SessionState {
    /// Not inside and not asking to be.
    Outside,
    /// Inside, executing a call.
    InCall,
    /// Between calls, keeping its slot because it still has tickets ("declared inside").
    DeclaredInside,
    /// Sleeping before joining the queue (`classic`, `flifo`) or between polls (`polling`,
    /// `timer`).
    Sleeping,
    /// Yielding the processor before re-checking (`timer`).
    Yielding,
    /// Waiting in the FIFO queue for a hand-off.
    Queued,
    /// Handed a slot by a leaving thread, signalled, and not yet running: the latency seed 001
    /// blamed ("the threads took too long to begin running").
    Woken,
    /// Stepped out of the gate around blocking work.
    SteppedOut(StepOutReason),
}

const STEPPED_OUT_BASE: u8 = 7;

impl SessionState {
    pub(crate) fn code(self) -> u8 {
        match self {
            SessionState::Outside => 0,
            SessionState::InCall => 1,
            SessionState::DeclaredInside => 2,
            SessionState::Sleeping => 3,
            SessionState::Yielding => 4,
            SessionState::Queued => 5,
            SessionState::Woken => 6,
            SessionState::SteppedOut(r) => STEPPED_OUT_BASE + r as u8,
        }
    }

    pub(crate) fn from_code(c: u8) -> SessionState {
        match c {
            0 => SessionState::Outside,
            1 => SessionState::InCall,
            2 => SessionState::DeclaredInside,
            3 => SessionState::Sleeping,
            4 => SessionState::Yielding,
            5 => SessionState::Queued,
            6 => SessionState::Woken,
            c => SessionState::SteppedOut(
                StepOutReason::ALL[(c - STEPPED_OUT_BASE) as usize % StepOutReason::ALL.len()],
            ),
        }
    }

    /// The session holds a slot (or a LIFO place, or is inside while unlimited).
    pub fn is_inside(self) -> bool {
        matches!(self, SessionState::InCall | SessionState::DeclaredInside)
    }

    /// The session is waiting to get in.
    pub fn is_waiting(self) -> bool {
        matches!(
            self,
            SessionState::Sleeping
                | SessionState::Yielding
                | SessionState::Queued
                | SessionState::Woken
        )
    }
}

/// Event counts, summed over every session the gate has had. Every field only grows over the
/// gate's life (an exporter may treat each as a counter).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Counters {
    /// Admissions of every kind (a re-entry with tickets is not one).
    pub admissions: u64,
    /// Enters that spent a ticket and asked nobody.
    pub ticket_reentries: u64,
    /// Sleeps taken (before queueing, between polls, timer sleeps).
    pub sleeps: u64,
    /// Yields taken (`timer`).
    pub yields: u64,
    /// Times a session waited in the FIFO queue.
    pub queue_waits: u64,
    /// Slots handed directly to a queued waiter.
    pub handoffs: u64,
    /// FLIFO admissions by the LIFO rule.
    pub lifo_admissions: u64,
    /// `timer` entries without checking after the yield and two sleeps (or holding locks).
    pub forced_entries: u64,
    /// `polling` re-entries after a row-lock wait without checking the limit.
    pub unchecked_reentries: u64,
    /// Step-outs around blocking work.
    pub step_outs: u64,
    /// Waits ended by a [`crate::Canceler`].
    pub cancellations: u64,
    /// Waits ended by the session's wait timeout.
    pub timeouts: u64,
}

/// Indices of the per-session counter array, in [`Counters`] field order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    Admissions,
    TicketReentries,
    Sleeps,
    Yields,
    QueueWaits,
    /// Never counted per session: the driver counts every hand-off where it is made
    /// (`Driver::handoffs`); the slot keeps the array in [`Counters`] order.
    HandOffs,
    LifoAdmissions,
    ForcedEntries,
    UncheckedReentries,
    StepOuts,
    Cancellations,
    Timeouts,
    /// Admissions that did not wait (the zeros of the wait histogram; not in [`Counters`]).
    AdmissionsWithoutWait,
}

pub(crate) const N_COUNTERS: usize = 13;

impl Counters {
    pub(crate) fn from_array(a: &[u64; N_COUNTERS]) -> Counters {
        Counters {
            admissions: a[Counter::Admissions as usize],
            ticket_reentries: a[Counter::TicketReentries as usize],
            sleeps: a[Counter::Sleeps as usize],
            yields: a[Counter::Yields as usize],
            queue_waits: a[Counter::QueueWaits as usize],
            handoffs: a[Counter::HandOffs as usize],
            lifo_admissions: a[Counter::LifoAdmissions as usize],
            forced_entries: a[Counter::ForcedEntries as usize],
            unchecked_reentries: a[Counter::UncheckedReentries as usize],
            step_outs: a[Counter::StepOuts as usize],
            cancellations: a[Counter::Cancellations as usize],
            timeouts: a[Counter::Timeouts as usize],
        }
    }
}

/// One session in a [`GateSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SessionSnapshot {
    /// The session's id, unique within its gate.
    pub id: u64,
    /// The label it was created with (may be empty).
    pub label: String,
    /// What it is doing.
    pub state: SessionState,
    /// Tickets left.
    pub tickets: u32,
    /// How long it has been in this state: for inside states, since admission; for waiting
    /// states (sleeping, yielding, queued), since it began waiting to enter; `None` outside.
    /// Coarse clock: resolution one scheduler tick (1–4 ms). Serialized as `in_state_ns`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "in_state_ns", serialize_with = "crate::serde_impl::opt_ns")
    )]
    pub in_state: Option<Duration>,
}

/// How full the gate is now, from [`crate::Gate::occupancy`]: what a scheduler in front of it
/// (a thread pool deciding whether to start another worker) reads on every decision, so it
/// comes from the policy's own counters without a pass over the sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Occupancy {
    /// The limit now (0 = unlimited).
    pub limit: u32,
    /// Threads counted inside.
    pub inside: u32,
    /// Threads queued or sleeping before the gate.
    pub waiting: u32,
    /// Threads stepped out of their slot for a declared wait.
    pub stepped_out: u32,
}

/// The gate's totals and gauges, from [`crate::Gate::stats`]: cheap to take (no allocation
/// per session), lifetime counters that never decrease, and gate-wide histograms.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GateStats {
    /// The gate's policy.
    pub policy: Policy,
    /// The limit now (0 = unlimited).
    pub limit: u32,
    /// Tickets per admission.
    pub tickets: u32,
    /// Threads counted in the limit's slots (released-but-not-yet-running waiters included;
    /// `polling` and `timer` may include a thread mid-check; while the limit is 0, every
    /// thread inside is counted too). Always 0 for the `unlimited` policy, which counts nothing.
    pub inside: u32,
    /// FLIFO: threads running by the LIFO rule; `auto`: its extra admissions (newcomers and
    /// sessions back from a wait running in a waking grantee's place). Not in `inside`.
    pub lifo_running: u32,
    /// FLIFO and `auto`: released waiters that have not begun to run.
    pub fifo_pending: u32,
    /// Threads waiting in the FIFO queue.
    pub queued: u32,
    /// Threads sleeping before (re)trying.
    pub sleeping: u32,
    /// Sessions waiting to be admitted, whatever the way (sleeping, yielding, queued, woken).
    pub waiting: u32,
    /// Sessions stepped out of the gate around blocking work.
    pub stepped_out: u32,
    /// Live sessions.
    pub sessions: u32,
    /// `classic`/`flifo`: threads waiting for the gate's own lock now (InnoDB 5.0's
    /// `srv_conc_mutex`, which every admission, exit and hand-off takes). 0 for the policies
    /// without one.
    pub lock_waiting: u32,
    /// `classic`/`flifo`: acquisitions of that lock that had to wait, over the gate's life.
    pub lock_waits: u64,
    /// The sleep delay in force (`polling`'s adapts). Serialized as `sleep_delay_ns`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "sleep_delay_ns", serialize_with = "crate::serde_impl::ns")
    )]
    pub sleep_delay: Duration,
    /// `auto`: how long an admission keeps its slot between calls (its tickets' stand-in).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "quantum_ns", serialize_with = "crate::serde_impl::ns")
    )]
    pub quantum: Duration,
    /// `auto`: whether its limit adapts.
    pub adaptive_limit: bool,
    /// `auto`: the limit controller's decisions, extra admissions, and the queue's mode
    /// (`None` for the other policies).
    pub auto: Option<AutoStats>,
    /// Event counts over the gate's life.
    pub counters: Counters,
    /// Time from asking to enter to admission, per admission; admissions that did not wait
    /// count as 0 ns.
    pub wait: HistogramSnapshot,
    /// Time from a hand-off's signal to the woken thread running (queue policies).
    pub wake_latency: HistogramSnapshot,
    /// How long the gate had existed when this was taken. Serialized as `taken_at_ns`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "taken_at_ns", serialize_with = "crate::serde_impl::ns")
    )]
    pub taken_at: Duration,
}

/// A point-in-time picture of a gate, from [`crate::Gate::snapshot`]: its [`GateStats`] (which
/// the snapshot dereferences to, so `snapshot.inside` reads them) and every live session.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GateSnapshot {
    /// Totals and gauges.
    pub stats: GateStats,
    /// Every live session.
    pub sessions: Vec<SessionSnapshot>,
}

impl std::ops::Deref for GateSnapshot {
    type Target = GateStats;

    fn deref(&self) -> &GateStats {
        &self.stats
    }
}

impl GateSnapshot {
    /// Sessions in `state`.
    pub fn count_in(&self, pred: impl Fn(SessionState) -> bool) -> usize {
        self.sessions.iter().filter(|s| pred(s.state)).count()
    }

    fn describe(&self, s: &SessionSnapshot) -> String {
        // `auto` grants a time quantum, not tickets: its count means nothing to a reader.
        let tickets = if self.policy == Policy::Auto {
            "its quantum".to_string()
        } else {
            format!("{} tickets", s.tickets)
        };
        match s.state {
            SessionState::Outside => "outside".to_string(),
            SessionState::InCall => format!("declared inside, {tickets} (in a call)"),
            SessionState::DeclaredInside => {
                format!("declared inside, {tickets} (between calls)")
            }
            SessionState::Sleeping => match self.policy {
                Policy::Classic | Policy::Flifo => "sleeping before joining queue".to_string(),
                _ => "sleeping before entering".to_string(),
            },
            SessionState::Yielding => "yielding before entering".to_string(),
            SessionState::Queued => "waiting in queue".to_string(),
            SessionState::Woken => "handed a slot, not yet running".to_string(),
            SessionState::SteppedOut(r) => format!("stepped out: {}", r.describe()),
        }
    }
}

impl fmt::Display for GateSnapshot {
    /// InnoDB-style status text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = if self.limit == 0 {
            "unlimited".to_string()
        } else {
            self.limit.to_string()
        };
        // Each policy's line shows the settings it reads ([`Policy::uses`]).
        match self.policy {
            Policy::Auto => writeln!(
                f,
                "GATE auto limit {limit} ({}), quantum {} us",
                if self.adaptive_limit {
                    "adaptive"
                } else {
                    "fixed"
                },
                self.quantum.as_micros()
            )?,
            Policy::Timer | Policy::Unlimited => writeln!(
                f,
                "GATE {} limit {limit}, tickets {}",
                self.policy, self.tickets
            )?,
            _ => writeln!(
                f,
                "GATE {} limit {}, tickets {}, sleep delay {} us",
                self.policy,
                limit,
                self.tickets,
                self.sleep_delay.as_micros()
            )?,
        }
        write!(
            f,
            "{} queries inside, {} queries in queue, {} sleeping",
            self.inside, self.queued, self.sleeping
        )?;
        if self.policy == Policy::Flifo {
            write!(
                f,
                ", {} lifo-running, {} fifo-pending",
                self.lifo_running, self.fifo_pending
            )?;
        }
        writeln!(f)?;
        if let Some(a) = &self.auto {
            writeln!(
                f,
                "auto: {} extra running, {} pending, {}, {} long statements inside; limit raised {} times (to fill the CPUs {}, to the floor {}), cut {} times (busy CPUs {}, late grants {}, fills undone {}), back within bounds {}, {} windows read on, {} stall checks, {} age hand-offs, {} refused",
                a.extra,
                a.pending,
                if a.starving { "serving the oldest" } else { "hot first" },
                a.long_holders,
                a.limit_raises,
                a.limit_reasons.fill,
                a.limit_reasons.floor,
                a.limit_cuts,
                a.limit_reasons.busy,
                a.limit_reasons.late,
                a.limit_reasons.undone,
                a.limit_reasons.bounds,
                a.limit_reasons.deferred,
                a.stall_ticks,
                a.age_handoffs,
                a.rejections
            )?;
            if a.control_window_ns > crate::policy::auto::CONTROL_WINDOW.as_nanos() as u64 {
                writeln!(
                    f,
                    "auto: controller window {} ms (its reading of the process's CPU time is costly: many threads)",
                    a.control_window_ns / 1_000_000
                )?;
            }
            if let Some(m) = a.cpus_available_milli {
                writeln!(
                    f,
                    "auto: CPU use read against {:.2} CPUs (what other processes left it over the last half second)",
                    f64::from(m) / 1000.0
                )?;
            }
        }
        let c = &self.counters;
        writeln!(
            f,
            "admissions {}, {} re-entries {}, sleeps {}, yields {}, queue waits {}, hand-offs {}, lifo {}, forced {}, unchecked {}, step-outs {}, cancelled {}, timed out {}",
            c.admissions,
            if self.policy == Policy::Auto {
                "quantum"
            } else {
                "ticket"
            },
            c.ticket_reentries,
            c.sleeps,
            c.yields,
            c.queue_waits,
            c.handoffs,
            c.lifo_admissions,
            c.forced_entries,
            c.unchecked_reentries,
            c.step_outs,
            c.cancellations,
            c.timeouts
        )?;
        writeln!(
            f,
            "admission wait: p50 {} ns, p99 {} ns, max {} ns ({:.1}% without waiting); wake-up latency p50 {} ns, p99 {} ns",
            self.wait.quantile(0.5),
            self.wait.quantile(0.99),
            self.wait.max(),
            100.0 * self.wait.zero_fraction(),
            self.wake_latency.quantile(0.5),
            self.wake_latency.quantile(0.99)
        )?;
        for s in &self.sessions {
            write!(f, "---SESSION {}", s.id)?;
            if !s.label.is_empty() {
                // Escaped: a label with a line break cannot forge a line of this text.
                write!(f, " '{}'", s.label.escape_debug())?;
            }
            if let Some(d) = s.in_state {
                write!(f, ", {:.3} s", d.as_secs_f64())?;
            }
            writeln!(f, ", {}", self.describe(s))?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_state_survives_its_code() {
        let mut states = vec![
            SessionState::Outside,
            SessionState::InCall,
            SessionState::DeclaredInside,
            SessionState::Sleeping,
            SessionState::Yielding,
            SessionState::Queued,
            SessionState::Woken,
        ];
        states.extend(StepOutReason::ALL.map(SessionState::SteppedOut));
        for s in states {
            assert_eq!(SessionState::from_code(s.code()), s);
        }
    }

    #[test]
    fn a_label_with_a_line_break_cannot_forge_a_session_line_and_auto_shows_no_ticket_count() {
        let gate = crate::Gate::new(crate::GateConfig::default()).unwrap();
        let mut s = gate.named_session("evil\n---SESSION 99 'forged', outside");
        assert!(s.enter().unwrap());
        let text = gate.snapshot().to_string();
        assert_eq!(
            text.lines().filter(|l| l.starts_with("---SESSION")).count(),
            1,
            "{text}"
        );
        assert!(text.contains("'evil\\n---SESSION 99"), "escaped: {text}");
        assert!(
            text.contains("declared inside, its quantum (in a call)"),
            "{text}"
        );
        assert!(!text.contains("4294967295"), "{text}");
        s.exit().unwrap();
        s.end_statement();
    }

    #[test]
    fn each_policys_status_line_shows_the_settings_it_reads() {
        let line = |c: crate::GateConfig| {
            let gate = crate::Gate::new(c).unwrap();
            let text = gate.snapshot().to_string();
            text.lines().next().unwrap().to_string()
        };
        let auto = line(crate::GateConfig::default().limit(4));
        assert_eq!(auto, "GATE auto limit 4 (adaptive), quantum 10000 us");
        let classic = line(crate::GateConfig::new(Policy::Classic));
        assert_eq!(
            classic,
            "GATE classic limit 8, tickets 500, sleep delay 10000 us"
        );
        let timer = line(crate::GateConfig::new(Policy::Timer));
        assert_eq!(timer, "GATE timer limit 8, tickets 500");
        let gate = crate::Gate::new(crate::GateConfig::default()).unwrap();
        let text = gate.snapshot().to_string();
        assert!(
            text.contains("quantum re-entries 0") && !text.contains("ticket"),
            "{text}"
        );
    }

    #[test]
    fn the_status_text_names_a_stretched_controller_window_and_is_silent_about_the_plain_one() {
        let gate = crate::Gate::new(crate::GateConfig::default()).unwrap();
        let mut snap = gate.snapshot();
        let plain = snap.stats.auto.expect("auto is the default policy");
        assert_eq!(
            plain.control_window_ns,
            crate::policy::auto::CONTROL_WINDOW.as_nanos() as u64
        );
        assert!(!snap.to_string().contains("controller window"));
        snap.stats.auto = Some(AutoStats {
            control_window_ns: 100_000_000,
            ..plain
        });
        assert!(
            snap.to_string().contains("auto: controller window 100 ms"),
            "{snap}"
        );
    }

    #[test]
    fn the_status_text_names_the_cpus_other_processes_left_once_they_are_known() {
        let gate = crate::Gate::new(crate::GateConfig::default()).unwrap();
        let mut snap = gate.snapshot();
        let mut a = snap.stats.auto.expect("auto is the default policy");
        a.cpus_available_milli = None;
        snap.stats.auto = Some(a);
        assert!(!snap.to_string().contains("CPU use read against"), "{snap}");
        a.cpus_available_milli = Some(1250);
        snap.stats.auto = Some(a);
        assert!(
            snap.to_string()
                .contains("auto: CPU use read against 1.25 CPUs (what other processes left it"),
            "{snap}"
        );
    }
}
