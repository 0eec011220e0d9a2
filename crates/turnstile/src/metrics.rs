//! Operator metrics: the gate's [`GateStats`] (and an instrumented lock's [`LockReport`]) as
//! Prometheus text, and — with the `metrics` cargo feature — through the `metrics`
//! facade, under the same names.
//!
//! Nothing here runs a server or a thread: an application calls [`write_prometheus`] (or
//! [`GateStats::to_prometheus`]) from its own `/metrics` handler, or calls
//! `Gate::publish_metrics` periodically to feed whatever
//! recorder it installed.
//!
//! # The Prometheus text
//!
//! [`write_prometheus`] writes the text exposition format 0.0.4: for each metric family one
//! `# HELP` and one `# TYPE` line, then one sample per gate, every sample labelled
//! `gate="<name>"` (the name is the caller's; `\`, `"` and newlines in it are escaped as the
//! format requires). Families with no gate to report are left out.
//!
//! | Metric | Type | Labels | Value |
//! |---|---|---|---|
//! | `turnstile_gate_info` | gauge | `gate`, `policy` | always 1; `policy` is [`Policy::name`](crate::Policy::name) |
//! | `turnstile_gate_admissions_total` | counter | `gate` | [`Counters::admissions`](crate::Counters::admissions) |
//! | `turnstile_gate_ticket_reentries_total` | counter | `gate` | [`Counters::ticket_reentries`](crate::Counters::ticket_reentries) |
//! | `turnstile_gate_sleeps_total` | counter | `gate` | [`Counters::sleeps`](crate::Counters::sleeps) |
//! | `turnstile_gate_yields_total` | counter | `gate` | [`Counters::yields`](crate::Counters::yields) |
//! | `turnstile_gate_queue_waits_total` | counter | `gate` | [`Counters::queue_waits`](crate::Counters::queue_waits) |
//! | `turnstile_gate_handoffs_total` | counter | `gate` | [`Counters::handoffs`](crate::Counters::handoffs) |
//! | `turnstile_gate_lifo_admissions_total` | counter | `gate` | [`Counters::lifo_admissions`](crate::Counters::lifo_admissions) |
//! | `turnstile_gate_forced_entries_total` | counter | `gate` | [`Counters::forced_entries`](crate::Counters::forced_entries) |
//! | `turnstile_gate_unchecked_reentries_total` | counter | `gate` | [`Counters::unchecked_reentries`](crate::Counters::unchecked_reentries) |
//! | `turnstile_gate_step_outs_total` | counter | `gate` | [`Counters::step_outs`](crate::Counters::step_outs) |
//! | `turnstile_gate_cancellations_total` | counter | `gate` | [`Counters::cancellations`](crate::Counters::cancellations) |
//! | `turnstile_gate_timeouts_total` | counter | `gate` | [`Counters::timeouts`](crate::Counters::timeouts) |
//! | `turnstile_gate_limit` | gauge | `gate` | [`GateStats::limit`] (0 = unlimited) |
//! | `turnstile_gate_tickets` | gauge | `gate` | [`GateStats::tickets`] |
//! | `turnstile_gate_inside` | gauge | `gate` | [`GateStats::inside`] |
//! | `turnstile_gate_lifo_running` | gauge | `gate` | [`GateStats::lifo_running`] |
//! | `turnstile_gate_fifo_pending` | gauge | `gate` | [`GateStats::fifo_pending`] |
//! | `turnstile_gate_limit_raises_total` | counter | `gate` | `auto`: [`crate::AutoStats::limit_raises`] (0 otherwise) |
//! | `turnstile_gate_limit_cuts_total` | counter | `gate` | `auto`: [`crate::AutoStats::limit_cuts`] |
//! | `turnstile_gate_limit_windows_total` | counter | `gate` | `auto`: [`crate::LimitReasons::windows`] (windows with threads queued) |
//! | `turnstile_gate_limit_raises_fill_total` | counter | `gate` | `auto`: [`crate::LimitReasons::fill`] |
//! | `turnstile_gate_limit_raises_floor_total` | counter | `gate` | `auto`: [`crate::LimitReasons::floor`] |
//! | `turnstile_gate_long_holders` | gauge | `gate` | `auto`: [`crate::AutoStats::long_holders`] |
//! | `turnstile_gate_control_window_seconds` | gauge | `gate` | `auto`: [`crate::AutoStats::control_window_ns`] |
//! | `turnstile_gate_cpus_available` | gauge | `gate` | `auto`: [`crate::AutoStats::cpus_available_milli`] ÷ 1000 (0: unknown) |
//! | `turnstile_gate_limit_cuts_late_total` | counter | `gate` | `auto`: [`crate::LimitReasons::late`] |
//! | `turnstile_gate_limit_cuts_busy_total` | counter | `gate` | `auto`: [`crate::LimitReasons::busy`] |
//! | `turnstile_gate_limit_cuts_undone_total` | counter | `gate` | `auto`: [`crate::LimitReasons::undone`] |
//! | `turnstile_gate_limit_bounds_total` | counter | `gate` | `auto`: [`crate::LimitReasons::bounds`] |
//! | `turnstile_gate_limit_deferred_total` | counter | `gate` | `auto`: [`crate::LimitReasons::deferred`] (windows whose CPU reading was too short to decide) |
//! | `turnstile_gate_stall_checks_total` | counter | `gate` | `auto`: [`crate::AutoStats::stall_ticks`] |
//! | `turnstile_gate_overload_rejections_total` | counter | `gate` | `auto`: [`crate::AutoStats::rejections`] |
//! | `turnstile_gate_queued` | gauge | `gate` | [`GateStats::queued`] |
//! | `turnstile_gate_sleeping` | gauge | `gate` | [`GateStats::sleeping`] |
//! | `turnstile_gate_waiting` | gauge | `gate` | [`GateStats::waiting`] |
//! | `turnstile_gate_stepped_out` | gauge | `gate` | [`GateStats::stepped_out`] |
//! | `turnstile_gate_sessions` | gauge | `gate` | [`GateStats::sessions`] |
//! | `turnstile_gate_lock_waiting` | gauge | `gate` | [`GateStats::lock_waiting`] (`classic`/`flifo`) |
//! | `turnstile_gate_lock_waits_total` | counter | `gate` | [`GateStats::lock_waits`] |
//! | `turnstile_gate_sleep_delay_seconds` | gauge | `gate` | [`GateStats::sleep_delay`] |
//! | `turnstile_gate_wait_seconds` | histogram | `gate` (+ `le`) | [`GateStats::wait`] |
//! | `turnstile_gate_wake_latency_seconds` | histogram | `gate` (+ `le`) | [`GateStats::wake_latency`] |
//!
//! [`write_lock_prometheus`] does the same for instrumented locks, labelled `lock="<name>"`
//! (the lock's [`LockReport::name`]):
//!
//! | Metric | Type | Value |
//! |---|---|---|
//! | `turnstile_lock_acquisitions_total` | counter | [`LockReport::acquisitions`] |
//! | `turnstile_lock_contended_total` | counter | [`LockReport::waited`] (acquisitions whose fast try failed) |
//! | `turnstile_lock_spins_total` | counter | spin iterations ([`LockCountersSnapshot::spins`](crate::mutex::LockCountersSnapshot::spins)) |
//! | `turnstile_lock_parks_total` | counter | sleeps in the parking table |
//! | `turnstile_lock_handoffs_total` | counter | direct hand-offs to a starving waiter |
//! | `turnstile_lock_wait_seconds` | histogram (+ `le`) | [`LockReport::wait`]: wait times of the acquisitions that waited |
//!
//! ## Histograms
//!
//! The crate's histograms are log-linear in nanoseconds (see [`crate::histogram`]); Prometheus
//! wants cumulative counts at fixed upper bounds. Every histogram is written with the same
//! bounds, [`HISTOGRAM_BOUNDS_NS`], as `le` values in seconds: 1, 2.5, 5, 10, 25, 50, 100, 250
//! and 500 µs, then 1, 2.5, 5, 10, 25, 50, 100, 250 and 500 ms, then 1, 2.5, 5 and 10 s, and
//! `+Inf`. A log-linear bucket is counted under an `le` only if its *upper* bound is ≤ `le`, so
//! a count is never reported under a bound smaller than a value it holds; values near a bound
//! may be reported under the next one (a bucket is at most 12.5 % wide). The `_bucket` counts
//! therefore never decrease as `le` grows, `le="+Inf"` counts every value, and `_count` is the
//! sum of the buckets (not a separate counter, so the two always agree). `_sum` is the sum of
//! the values in seconds; it is read separately from the buckets, so while values are being
//! recorded it may be off by a value or two.
//!
//! # The `metrics` facade (feature `metrics`)
//!
//! `metrics::publish` (and `Gate::publish_metrics`) sets the same
//! counters (with `Counter::absolute`) and gauges (with `Gauge::set`), under the same names and
//! labels, in whatever recorder is installed. The facade records samples, not snapshots of a
//! histogram, so each histogram `turnstile_gate_X_seconds` is published as:
//!
//! * gauges `turnstile_gate_X_seconds{gate, quantile}` for quantiles `0.5`, `0.9` and `0.99`
//!   ([`HistogramSnapshot::quantile`], within 12.5 %) and `1` (the exact maximum), in seconds,
//!   over the gate's whole life;
//! * a counter `turnstile_gate_X_seconds_count` (values recorded, the sum of the buckets);
//! * a gauge `turnstile_gate_X_seconds_sum` (their sum in seconds: a gauge because the facade's
//!   counters are integers).
//!
//! `metrics::publish_lock` does the same for a [`LockReport`], labelled `lock`. Descriptions
//! are registered once per process, by the first publish; call `metrics::describe` again after installing
//! another recorder.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::{self, Write};

use crate::histogram::HistogramSnapshot;
use crate::monitor::GateStats;
use crate::mutex::LockReport;

/// The histogram bucket bounds every histogram is exported with, in nanoseconds (`le` labels
/// are these in seconds): 1 µs to 10 s in a 1, 2.5, 5 sequence. See the module documentation
/// for how the log-linear buckets are mapped onto them.
pub const HISTOGRAM_BOUNDS_NS: [u64; 22] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Counter,
    Gauge,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

impl Value {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn as_f64(self) -> f64 {
        match self {
            Value::Int(v) => v as f64,
            Value::Float(v) => v,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{}", PromFloat(v)),
        }
    }
}

/// A float as the text format writes it: `+Inf`, `-Inf`, `NaN`, or a plain decimal.
struct PromFloat(f64);

impl fmt::Display for PromFloat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_nan() {
            f.write_str("NaN")
        } else if v.is_infinite() {
            f.write_str(if v > 0.0 { "+Inf" } else { "-Inf" })
        } else {
            write!(f, "{v}")
        }
    }
}

/// A label value with `\`, `"` and newline escaped.
struct LabelValue<'a>(&'a str);

impl fmt::Display for LabelValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                '"' => f.write_str("\\\"")?,
                '\n' => f.write_str("\\n")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// One counter or gauge family read from `S`.
struct Scalar<S> {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    get: fn(&S) -> Value,
}

/// One histogram family read from `S`, with the names the facade publishes it under.
struct Hist<S> {
    name: &'static str,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    count_name: &'static str,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    sum_name: &'static str,
    help: &'static str,
    get: fn(&S) -> &HistogramSnapshot,
}

const fn counter<S>(name: &'static str, help: &'static str, get: fn(&S) -> Value) -> Scalar<S> {
    Scalar {
        name,
        help,
        kind: Kind::Counter,
        get,
    }
}

const fn gauge<S>(name: &'static str, help: &'static str, get: fn(&S) -> Value) -> Scalar<S> {
    Scalar {
        name,
        help,
        kind: Kind::Gauge,
        get,
    }
}

const GATE_INFO: &str = "turnstile_gate_info";
const GATE_INFO_HELP: &str = "Always 1; labels name the gate's admission policy.";

const GATE_SCALARS: &[Scalar<GateStats>] = &[
    counter(
        "turnstile_gate_admissions_total",
        "Admissions of every kind (a re-entry with tickets is not one).",
        |s| Value::Int(s.counters.admissions),
    ),
    counter(
        "turnstile_gate_ticket_reentries_total",
        "Enters that spent a ticket and asked nobody.",
        |s| Value::Int(s.counters.ticket_reentries),
    ),
    counter(
        "turnstile_gate_sleeps_total",
        "Sleeps taken (before queueing, between polls, timer sleeps).",
        |s| Value::Int(s.counters.sleeps),
    ),
    counter(
        "turnstile_gate_yields_total",
        "Yields taken (timer policy).",
        |s| Value::Int(s.counters.yields),
    ),
    counter(
        "turnstile_gate_queue_waits_total",
        "Times a session waited in the FIFO queue.",
        |s| Value::Int(s.counters.queue_waits),
    ),
    counter(
        "turnstile_gate_handoffs_total",
        "Slots handed directly to a queued waiter.",
        |s| Value::Int(s.counters.handoffs),
    ),
    counter(
        "turnstile_gate_lifo_admissions_total",
        "FLIFO admissions by the LIFO rule.",
        |s| Value::Int(s.counters.lifo_admissions),
    ),
    counter(
        "turnstile_gate_forced_entries_total",
        "Timer-policy entries without checking the limit.",
        |s| Value::Int(s.counters.forced_entries),
    ),
    counter(
        "turnstile_gate_unchecked_reentries_total",
        "Polling re-entries after a row-lock wait without checking the limit.",
        |s| Value::Int(s.counters.unchecked_reentries),
    ),
    counter(
        "turnstile_gate_step_outs_total",
        "Step-outs of the gate around blocking work.",
        |s| Value::Int(s.counters.step_outs),
    ),
    counter(
        "turnstile_gate_cancellations_total",
        "Waits ended by a canceler.",
        |s| Value::Int(s.counters.cancellations),
    ),
    counter(
        "turnstile_gate_timeouts_total",
        "Waits ended by the session's wait timeout.",
        |s| Value::Int(s.counters.timeouts),
    ),
    gauge(
        "turnstile_gate_limit",
        "Threads allowed inside at once (0 = unlimited).",
        |s| Value::Int(s.limit.into()),
    ),
    gauge(
        "turnstile_gate_tickets",
        "Tickets granted per admission.",
        |s| Value::Int(s.tickets.into()),
    ),
    gauge(
        "turnstile_gate_inside",
        "Threads counted in the limit's slots.",
        |s| Value::Int(s.inside.into()),
    ),
    gauge(
        "turnstile_gate_lifo_running",
        "FLIFO: threads running by the LIFO rule; auto: its extra admissions (newcomers and sessions back from a wait running in a waking grantee's place). Not in inside.",
        |s| Value::Int(s.lifo_running.into()),
    ),
    gauge(
        "turnstile_gate_fifo_pending",
        "FLIFO and auto: released waiters that have not begun to run.",
        |s| Value::Int(s.fifo_pending.into()),
    ),
    counter(
        "turnstile_gate_limit_raises_total",
        "auto: times the limit controller raised the limit.",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_raises)),
    ),
    counter(
        "turnstile_gate_limit_cuts_total",
        "auto: times the limit controller lowered the limit.",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_cuts)),
    ),
    counter(
        "turnstile_gate_limit_windows_total",
        "auto: controller windows in which threads queued (each made a decision, a hold included).",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.windows)),
    ),
    counter(
        "turnstile_gate_limit_raises_fill_total",
        "auto: raises because threads queued while the CPUs were not all busy with statements (holders blocked in waits nobody declared, or CPU spent on hand-offs).",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.fill)),
    ),
    counter(
        "turnstile_gate_limit_raises_floor_total",
        "auto: raises to the floor (two slots per CPU; beside long statements, a slot each plus the CPUs they leave).",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.floor)),
    ),
    gauge(
        "turnstile_gate_control_window_seconds",
        "auto: the limit controller's window (20 ms; longer, up to 200 ms, where reading the process's CPU time is costly).",
        |s| Value::Float(s.auto.map_or(0.0, |a| a.control_window_ns as f64 / 1e9)),
    ),
    gauge(
        "turnstile_gate_cpus_available",
        "auto: the CPUs other processes left this one over the last half second or more, which the controller reads its CPU use against (0: not known yet).",
        |s| {
            Value::Float(
                s.auto
                    .and_then(|a| a.cpus_available_milli)
                    .map_or(0.0, |m| f64::from(m) / 1000.0),
            )
        },
    ),
    gauge(
        "turnstile_gate_long_holders",
        "auto: slots held now by long statements (kept past a quantum beside waiters the other slots served).",
        |s| Value::Int(s.auto.map_or(0, |a| a.long_holders.into())),
    ),
    counter(
        "turnstile_gate_limit_cuts_late_total",
        "auto: cuts because grantees started late while the CPUs were busy.",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.late)),
    ),
    counter(
        "turnstile_gate_limit_cuts_busy_total",
        "auto: cuts with every CPU busy and the limit above its floor (by one; by a quarter beside long statements that keep their slots; halved where nobody queued).",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.busy)),
    ),
    counter(
        "turnstile_gate_limit_cuts_undone_total",
        "auto: fills undone because the CPU use did not rise with the slots (the idle CPUs were another process's or cgroup's).",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.undone)),
    ),
    counter(
        "turnstile_gate_limit_bounds_total",
        "auto: moves back within the controller's bounds after an operator's limit outside them.",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.bounds)),
    ),
    counter(
        "turnstile_gate_limit_deferred_total",
        "auto: windows whose CPU reading could not yet tell the CPU use from the clock's error; the reading went on.",
        |s| Value::Int(s.auto.map_or(0, |a| a.limit_reasons.deferred)),
    ),
    counter(
        "turnstile_gate_stall_checks_total",
        "auto: controller runs by a waiter that saw no slot released for a stall period.",
        |s| Value::Int(s.auto.map_or(0, |a| a.stall_ticks)),
    ),
    counter(
        "turnstile_gate_overload_rejections_total",
        "auto: enters refused because the queue was full (max_waiting).",
        |s| Value::Int(s.auto.map_or(0, |a| a.rejections)),
    ),
    gauge(
        "turnstile_gate_queued",
        "Threads waiting in the FIFO queue.",
        |s| Value::Int(s.queued.into()),
    ),
    gauge(
        "turnstile_gate_sleeping",
        "Threads sleeping before (re)trying to enter.",
        |s| Value::Int(s.sleeping.into()),
    ),
    gauge(
        "turnstile_gate_waiting",
        "Sessions waiting to be admitted (sleeping, yielding, queued or woken).",
        |s| Value::Int(s.waiting.into()),
    ),
    gauge(
        "turnstile_gate_stepped_out",
        "Sessions stepped out of the gate around blocking work.",
        |s| Value::Int(s.stepped_out.into()),
    ),
    gauge("turnstile_gate_sessions", "Live sessions.", |s| {
        Value::Int(s.sessions.into())
    }),
    gauge(
        "turnstile_gate_lock_waiting",
        "classic/flifo: threads waiting for the gate's own lock (InnoDB's srv_conc_mutex).",
        |s| Value::Int(s.lock_waiting.into()),
    ),
    counter(
        "turnstile_gate_lock_waits_total",
        "classic/flifo: acquisitions of the gate's own lock that had to wait.",
        |s| Value::Int(s.lock_waits),
    ),
    gauge(
        "turnstile_gate_sleep_delay_seconds",
        "The sleep delay in force.",
        |s| Value::Float(s.sleep_delay.as_secs_f64()),
    ),
];

const GATE_HISTOGRAMS: &[Hist<GateStats>] = &[
    Hist {
        name: "turnstile_gate_wait_seconds",
        count_name: "turnstile_gate_wait_seconds_count",
        sum_name: "turnstile_gate_wait_seconds_sum",
        help: "Time from asking to enter to admission, per admission (0 when it did not wait).",
        get: |s| &s.wait,
    },
    Hist {
        name: "turnstile_gate_wake_latency_seconds",
        count_name: "turnstile_gate_wake_latency_seconds_count",
        sum_name: "turnstile_gate_wake_latency_seconds_sum",
        help: "Time from a hand-off's signal to the woken thread running.",
        get: |s| &s.wake_latency,
    },
];

const LOCK_SCALARS: &[Scalar<LockReport>] = &[
    counter(
        "turnstile_lock_acquisitions_total",
        "Acquisitions of the lock.",
        |r| Value::Int(r.acquisitions),
    ),
    counter(
        "turnstile_lock_contended_total",
        "Acquisitions that had to wait (the fast try failed).",
        |r| Value::Int(r.waited),
    ),
    counter(
        "turnstile_lock_spins_total",
        "Spin iterations before acquiring or parking.",
        |r| Value::Int(r.counters.spins),
    ),
    counter(
        "turnstile_lock_parks_total",
        "Sleeps in the parking table.",
        |r| Value::Int(r.counters.parks),
    ),
    counter(
        "turnstile_lock_handoffs_total",
        "Direct hand-offs to a starving waiter.",
        |r| Value::Int(r.counters.handoffs),
    ),
];

const LOCK_HISTOGRAMS: &[Hist<LockReport>] = &[Hist {
    name: "turnstile_lock_wait_seconds",
    count_name: "turnstile_lock_wait_seconds_count",
    sum_name: "turnstile_lock_wait_seconds_sum",
    help: "Wait times of the acquisitions that waited.",
    get: |r| &r.wait,
}];

fn header(out: &mut impl Write, name: &str, help: &str, kind: &str) -> fmt::Result {
    write!(out, "# HELP {name} ")?;
    for c in help.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            c => out.write_char(c)?,
        }
    }
    writeln!(out)?;
    writeln!(out, "# TYPE {name} {kind}")
}

/// Cumulative counts at each of [`HISTOGRAM_BOUNDS_NS`], and the total (the `+Inf` count).
fn cumulative(h: &HistogramSnapshot) -> ([u64; HISTOGRAM_BOUNDS_NS.len()], u64) {
    let mut at = [0u64; HISTOGRAM_BOUNDS_NS.len()];
    let mut total = 0u64;
    for (_, high, n) in h.nonzero_buckets() {
        total += n;
        if let Some(i) = HISTOGRAM_BOUNDS_NS.iter().position(|&le| high <= le) {
            at[i] += n;
        }
    }
    let mut run = 0;
    for c in &mut at {
        run += *c;
        *c = run;
    }
    (at, total)
}

fn write_families<S>(
    out: &mut impl Write,
    label: &str,
    items: &[(&str, &S)],
    scalars: &[Scalar<S>],
    hists: &[Hist<S>],
) -> fmt::Result {
    if items.is_empty() {
        return Ok(());
    }
    for f in scalars {
        header(out, f.name, f.help, f.kind.name())?;
        for (name, s) in items {
            writeln!(
                out,
                "{}{{{label}=\"{}\"}} {}",
                f.name,
                LabelValue(name),
                (f.get)(s)
            )?;
        }
    }
    for h in hists {
        header(out, h.name, h.help, "histogram")?;
        for (name, s) in items {
            let snap = (h.get)(s);
            let (at, total) = cumulative(snap);
            let name = LabelValue(name);
            for (le, n) in HISTOGRAM_BOUNDS_NS.iter().zip(at) {
                let le = PromFloat(*le as f64 / 1e9);
                writeln!(
                    out,
                    "{}_bucket{{{label}=\"{name}\",le=\"{le}\"}} {n}",
                    h.name
                )?;
            }
            writeln!(
                out,
                "{}_bucket{{{label}=\"{name}\",le=\"+Inf\"}} {total}",
                h.name
            )?;
            let sum = PromFloat(snap.sum() as f64 / 1e9);
            writeln!(out, "{}_sum{{{label}=\"{name}\"}} {sum}", h.name)?;
            writeln!(out, "{}_count{{{label}=\"{name}\"}} {total}", h.name)?;
        }
    }
    Ok(())
}

/// Writes the Prometheus text (format 0.0.4) of several gates, each `(name, stats)` labelled
/// `gate="<name>"`, every family's `# HELP` and `# TYPE` once (a scrape must not repeat them).
/// The metrics are listed in the module documentation. Writes nothing for no gates.
///
/// ```
/// use turnstile::{Gate, GateConfig, Policy};
///
/// let gate = Gate::new(GateConfig::new(Policy::Classic).limit(4))?;
/// let mut text = String::new();
/// turnstile::metrics::write_prometheus(&mut text, &[("orders", &gate.stats())])?;
/// assert!(text.contains("turnstile_gate_limit{gate=\"orders\"} 4\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Names should be unique: two series with the same labels break a scrape (Prometheus keeps
/// one and a `rate` over them sees resets). A repeated name is written as `<name>#2`,
/// `<name>#3`, … in the order given.
pub fn write_prometheus(out: &mut impl Write, gates: &[(&str, &GateStats)]) -> fmt::Result {
    if gates.is_empty() {
        return Ok(());
    }
    let names = unique_names(gates.iter().map(|(n, _)| *n));
    let gates: Vec<(&str, &GateStats)> = names
        .iter()
        .zip(gates)
        .map(|(n, (_, s))| (n.as_ref(), *s))
        .collect();
    header(out, GATE_INFO, GATE_INFO_HELP, "gauge")?;
    for (name, s) in &gates {
        writeln!(
            out,
            "{GATE_INFO}{{gate=\"{}\",policy=\"{}\"}} 1",
            LabelValue(name),
            s.policy.name()
        )?;
    }
    write_families(out, "gate", &gates, GATE_SCALARS, GATE_HISTOGRAMS)
}

/// The names as given, each repeat suffixed `#k` (its k-th use) unless that too is taken.
fn unique_names<'a>(names: impl Iterator<Item = &'a str> + Clone) -> Vec<Cow<'a, str>> {
    let mut seen: HashMap<Cow<'a, str>, u32> = names.clone().map(|n| (n.into(), 0)).collect();
    names
        .map(|n| {
            let uses = seen.get_mut(n).expect("every name was listed");
            *uses += 1;
            if *uses == 1 {
                return Cow::Borrowed(n);
            }
            let mut k = *uses;
            loop {
                let candidate: Cow<'a, str> = format!("{n}#{k}").into();
                if !seen.contains_key(&candidate) {
                    seen.insert(candidate.clone(), 1);
                    return candidate;
                }
                k += 1;
            }
        })
        .collect()
}

/// Writes the Prometheus text (format 0.0.4) of instrumented locks' reports, each labelled
/// `lock="<report.name>"`. The metrics are listed in the module documentation. Writes nothing
/// for no locks.
///
/// Reports that share a name (the locks of one kind: one per table, say, or
/// [`Instrumented::default`](crate::mutex::Instrumented)'s type names) are added up into one
/// series ([`LockReport::add`]), in the order their names first appear: two series with the
/// same labels would break the scrape.
pub fn write_lock_prometheus(out: &mut impl Write, locks: &[&LockReport]) -> fmt::Result {
    let mut merged: Vec<LockReport> = Vec::with_capacity(locks.len());
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(locks.len());
    for r in locks {
        match index.get(r.name) {
            Some(&i) => merged[i].add(r),
            None => {
                index.insert(r.name, merged.len());
                merged.push((*r).clone());
            }
        }
    }
    let items: Vec<(&str, &LockReport)> = merged.iter().map(|r| (r.name, r)).collect();
    write_families(out, "lock", &items, LOCK_SCALARS, LOCK_HISTOGRAMS)
}

impl GateStats {
    /// Writes these stats as Prometheus text, labelled `gate="<gate>"`: see
    /// [`crate::metrics`] for the names. To expose several gates in one scrape, use
    /// [`write_prometheus`], which writes each family's header once.
    pub fn write_prometheus(&self, gate: &str, out: &mut impl Write) -> fmt::Result {
        write_prometheus(out, &[(gate, self)])
    }

    /// These stats as Prometheus text, labelled `gate="<gate>"` (see
    /// [`GateStats::write_prometheus`]).
    pub fn to_prometheus(&self, gate: &str) -> String {
        let mut s = String::new();
        self.write_prometheus(gate, &mut s)
            .expect("writing to a String cannot fail");
        s
    }
}

#[cfg(feature = "metrics")]
mod facade {
    use super::{Hist, Kind, Scalar, GATE_HISTOGRAMS, GATE_INFO, GATE_INFO_HELP, GATE_SCALARS};
    use super::{LOCK_HISTOGRAMS, LOCK_SCALARS};
    use crate::gate::Gate;
    use crate::monitor::GateStats;
    use crate::mutex::LockReport;
    use ::metrics::{counter, describe_counter, describe_gauge, gauge, Unit};

    /// The quantiles published for each histogram, with their label values (1 = the maximum).
    const QUANTILES: [(f64, &str); 4] = [(0.5, "0.5"), (0.9, "0.9"), (0.99, "0.99"), (1.0, "1")];

    fn describe_families<S>(scalars: &[Scalar<S>], hists: &[Hist<S>]) {
        for f in scalars {
            match f.kind {
                Kind::Counter => describe_counter!(f.name, f.help),
                Kind::Gauge => describe_gauge!(f.name, f.help),
            }
        }
        for h in hists {
            describe_gauge!(h.name, Unit::Seconds, h.help);
            describe_counter!(h.count_name, Unit::Count, h.help);
            describe_gauge!(h.sum_name, Unit::Seconds, h.help);
        }
    }

    /// Registers every metric's description (and unit, for the seconds) with the recorder in
    /// force. The first [`publish`] or [`publish_lock`] in a process does it; call it again
    /// after installing another recorder.
    pub fn describe() {
        describe_gauge!(GATE_INFO, GATE_INFO_HELP);
        describe_families(GATE_SCALARS, GATE_HISTOGRAMS);
        describe_families(LOCK_SCALARS, LOCK_HISTOGRAMS);
    }

    fn describe_once() {
        static DESCRIBED: std::sync::Once = std::sync::Once::new();
        DESCRIBED.call_once(describe);
    }

    fn publish_families<S>(
        label: &'static str,
        name: &str,
        s: &S,
        scalars: &[Scalar<S>],
        hists: &[Hist<S>],
    ) {
        for f in scalars {
            let v = (f.get)(s);
            match (f.kind, v) {
                (Kind::Counter, super::Value::Int(n)) => {
                    counter!(f.name, label => name.to_owned()).absolute(n)
                }
                _ => gauge!(f.name, label => name.to_owned()).set(v.as_f64()),
            }
        }
        for h in hists {
            let snap = (h.get)(s);
            for (q, q_label) in QUANTILES {
                let ns = if q >= 1.0 {
                    snap.max()
                } else {
                    snap.quantile(q)
                };
                gauge!(h.name, label => name.to_owned(), "quantile" => q_label)
                    .set(ns as f64 / 1e9);
            }
            let (_, total) = super::cumulative(snap);
            counter!(h.count_name, label => name.to_owned()).absolute(total);
            gauge!(h.sum_name, label => name.to_owned()).set(snap.sum() as f64 / 1e9);
        }
    }

    /// Publishes `stats` through the [`metrics`](::metrics) facade, labelled `gate` =>
    /// `gate`: counters set with `absolute`, gauges with `set`, histograms as quantile gauges
    /// plus `_count` and `_sum` (see [`crate::metrics`]). Registers the descriptions on the
    /// process's first publish.
    ///
    /// `absolute` keeps the largest value seen in the `metrics` crate's own counters (and in
    /// most recorders): a gate rebuilt under the same name would show the old gate's totals
    /// until it overtook them. Publish a rebuilt gate under a new name (a generation in it,
    /// say), as the text exposition's reset needs no such care.
    pub fn publish(gate: &str, stats: &GateStats) {
        describe_once();
        gauge!(GATE_INFO, "gate" => gate.to_owned(), "policy" => stats.policy.name()).set(1.0);
        publish_families("gate", gate, stats, GATE_SCALARS, GATE_HISTOGRAMS);
    }

    /// Publishes an instrumented lock's report through the [`metrics`](::metrics) facade,
    /// labelled `lock` => its name (see [`crate::metrics`] for the names). Locks that share
    /// a name share the series: add their reports up first ([`LockReport::add`]) and
    /// publish the sum, or each publish replaces the last.
    pub fn publish_lock(report: &LockReport) {
        describe_once();
        publish_families("lock", report.name, report, LOCK_SCALARS, LOCK_HISTOGRAMS);
    }

    impl Gate {
        /// Publishes this gate's [`Gate::stats`] through the [`metrics`](::metrics) facade,
        /// labelled `gate` => `name` (feature `metrics`; see [`crate::metrics::publish`]).
        /// Call it periodically (every scrape interval, say): each call sets the current
        /// values.
        pub fn publish_metrics(&self, name: &str) {
            publish(name, &self.stats());
        }
    }
}

#[cfg(feature = "metrics")]
pub use facade::{describe, publish, publish_lock};
