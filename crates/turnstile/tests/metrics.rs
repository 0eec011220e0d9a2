//! Operator metrics: the Prometheus text parses and says what the stats say; the `serde` and
//! `metrics` features (when on) carry the same values.
#![cfg(not(loom))]

use std::collections::BTreeMap;

use turnstile::metrics::{write_lock_prometheus, write_prometheus, HISTOGRAM_BOUNDS_NS};
use turnstile::mutex::Instrumented;
use turnstile::{Gate, GateConfig, GateStats, Histogram, Policy, StepOutReason};

#[path = "common/wait_for.rs"]
mod wait_for;
use wait_for::wait_for;

/// One sample line: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// What a scrape holds: `# HELP` and `# TYPE` per family (in order), and the samples.
#[derive(Debug, Default)]
struct Scrape {
    help: Vec<(String, String)>,
    types: Vec<(String, String)>,
    samples: Vec<Sample>,
}

impl Scrape {
    fn type_of(&self, family: &str) -> Option<&str> {
        self.types
            .iter()
            .find(|(n, _)| n == family)
            .map(|(_, t)| t.as_str())
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        assert_eq!(found.len(), 1, "one sample {name} {labels:?}: {found:?}");
        found[0].value
    }
}

/// A simple parser of the text format 0.0.4: panics on any line it does not understand.
fn parse(text: &str) -> Scrape {
    let mut s = Scrape::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            s.help.push((name.into(), help.into()));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            s.types.push((name.into(), kind.into()));
        } else {
            assert!(!line.starts_with('#'), "unknown comment: {line}");
            let open = line.find('{').expect("every sample has labels");
            let close = line.rfind('}').expect("labels close");
            let name = &line[..open];
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
                "metric name {name}"
            );
            let labels = parse_labels(&line[open + 1..close]);
            let value = line[close + 1..].trim();
            let value = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("value in {line}")),
            };
            s.samples.push(Sample {
                name: name.into(),
                labels,
                value,
            });
        }
    }
    s
}

fn parse_labels(mut s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    while !s.is_empty() {
        let (k, rest) = s.split_once("=\"").expect("label=\"value\"");
        let mut v = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("closing quote") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => v.push('\n'),
                    c => v.push(c),
                },
                (_, c) => v.push(c),
            }
        };
        out.insert(k.to_string(), v);
        s = rest[end + 1..].trim_start_matches(',');
    }
    out
}

/// The family a sample belongs to: histograms' `_bucket`, `_sum` and `_count` are theirs.
fn family<'a>(scrape: &Scrape, sample: &'a str) -> &'a str {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = sample.strip_suffix(suffix) {
            if scrape.type_of(base) == Some("histogram") {
                return base;
            }
        }
    }
    sample
}

const COUNTERS: [&str; 12] = [
    "admissions",
    "ticket_reentries",
    "sleeps",
    "yields",
    "queue_waits",
    "handoffs",
    "lifo_admissions",
    "forced_entries",
    "unchecked_reentries",
    "step_outs",
    "cancellations",
    "timeouts",
];

fn counter_of(s: &GateStats, field: &str) -> u64 {
    let c = &s.counters;
    match field {
        "admissions" => c.admissions,
        "ticket_reentries" => c.ticket_reentries,
        "sleeps" => c.sleeps,
        "yields" => c.yields,
        "queue_waits" => c.queue_waits,
        "handoffs" => c.handoffs,
        "lifo_admissions" => c.lifo_admissions,
        "forced_entries" => c.forced_entries,
        "unchecked_reentries" => c.unchecked_reentries,
        "step_outs" => c.step_outs,
        "cancellations" => c.cancellations,
        "timeouts" => c.timeouts,
        f => panic!("no counter {f}"),
    }
}

/// A gate that has admitted, re-entered on tickets, stepped out, and still has one inside.
fn busy_gate() -> (Gate, turnstile::Session) {
    let gate = Gate::new(GateConfig::new(Policy::Classic).limit(3).tickets(5)).unwrap();
    let mut a = gate.named_session("a");
    let mut stmt = a.begin();
    for _ in 0..10 {
        drop(stmt.enter().unwrap());
    }
    let mut call = stmt.enter().unwrap();
    call.step_out(StepOutReason::RowLockWait, || ());
    call.resume().unwrap();
    drop(call);
    drop(stmt);
    let mut b = gate.named_session("b");
    {
        let mut stmt = b.begin();
        drop(stmt.enter().unwrap());
        std::mem::forget(stmt); // keeps its slot: `inside` is 1 when the stats are taken
    }
    (gate, b)
}

/// Values 0, well under 1 µs, around 1 µs, 3 ms, 20 s.
fn crafted_histogram() -> (turnstile::HistogramSnapshot, Vec<u64>) {
    let values = vec![0, 0, 500, 999, 1_000, 1_001, 3_000_000, 20_000_000_000];
    let h = Histogram::new();
    for &v in &values {
        h.record(v);
    }
    (h.snapshot(), values)
}

#[test]
fn prometheus_text_parses_with_one_header_per_family_and_values_equal_to_the_stats() {
    let (gate, _b) = busy_gate();
    let stats = gate.stats();
    assert!(stats.counters.admissions >= 2 && stats.counters.ticket_reentries > 0);
    let text = stats.to_prometheus("orders");
    let scrape = parse(&text);

    // Every family has exactly one HELP and one TYPE, and every sample belongs to one.
    for (name, _) in &scrape.types {
        assert_eq!(scrape.types.iter().filter(|(n, _)| n == name).count(), 1);
        assert_eq!(scrape.help.iter().filter(|(n, _)| n == name).count(), 1);
    }
    for s in &scrape.samples {
        let f = family(&scrape, &s.name);
        assert!(scrape.type_of(f).is_some(), "{} has a TYPE", s.name);
        assert_eq!(s.labels["gate"], "orders", "{} is labelled", s.name);
    }

    for field in COUNTERS {
        let name = format!("turnstile_gate_{field}_total");
        assert_eq!(scrape.type_of(&name), Some("counter"), "{name}");
        assert_eq!(
            scrape.value(&name, &[("gate", "orders")]),
            counter_of(&stats, field) as f64,
            "{name}"
        );
    }
    for (name, v) in [
        ("turnstile_gate_inside", stats.inside),
        ("turnstile_gate_waiting", stats.waiting),
        ("turnstile_gate_queued", stats.queued),
        ("turnstile_gate_sleeping", stats.sleeping),
        ("turnstile_gate_stepped_out", stats.stepped_out),
        ("turnstile_gate_sessions", stats.sessions),
        ("turnstile_gate_limit", stats.limit),
        ("turnstile_gate_tickets", stats.tickets),
    ] {
        assert_eq!(scrape.type_of(name), Some("gauge"), "{name}");
        assert_eq!(scrape.value(name, &[]), v as f64, "{name}");
    }
    assert_eq!(scrape.value("turnstile_gate_inside", &[]), 1.0);
    assert_eq!(scrape.value("turnstile_gate_limit", &[]), 3.0);
    assert_eq!(
        scrape.value("turnstile_gate_info", &[("policy", "classic")]),
        1.0
    );
    for h in [
        "turnstile_gate_wait_seconds",
        "turnstile_gate_wake_latency_seconds",
    ] {
        assert_eq!(scrape.type_of(h), Some("histogram"), "{h}");
    }
    assert_eq!(
        scrape.value("turnstile_gate_wait_seconds_count", &[]),
        stats.wait.count() as f64
    );
}

#[test]
fn an_auto_gate_exports_its_controller_window_in_seconds() {
    let gate = Gate::new(GateConfig::new(Policy::Auto)).unwrap();
    let scrape = parse(&gate.stats().to_prometheus("orders"));
    let name = "turnstile_gate_control_window_seconds";
    assert_eq!(scrape.type_of(name), Some("gauge"));
    assert_eq!(
        scrape.value(name, &[("gate", "orders")]),
        turnstile::sim::auto::CONTROL_WINDOW.as_secs_f64()
    );
}

#[test]
fn histogram_buckets_are_cumulative_and_inf_equals_count_and_sum() {
    let (gate, _b) = busy_gate();
    let mut stats = gate.stats();
    let (h, values) = crafted_histogram();
    stats.wait = h;
    let scrape = parse(&stats.to_prometheus("g"));
    let buckets: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| s.name == "turnstile_gate_wait_seconds_bucket")
        .collect();
    assert_eq!(buckets.len(), HISTOGRAM_BOUNDS_NS.len() + 1);
    let mut last = (0.0f64, 0.0f64);
    for (b, le_ns) in buckets.iter().zip(HISTOGRAM_BOUNDS_NS) {
        let le: f64 = b.labels["le"].parse().unwrap();
        assert!(
            (le - le_ns as f64 / 1e9).abs() < 1e-15,
            "le {le} is {le_ns} ns"
        );
        assert!(le > last.0, "le grows");
        assert!(b.value >= last.1, "counts never decrease with le");
        // Never counted under a bound below a value it holds.
        let truly_at_most = values.iter().filter(|&&v| v <= le_ns).count() as f64;
        assert!(
            b.value <= truly_at_most,
            "le {le}: {} > {truly_at_most}",
            b.value
        );
        last = (le, b.value);
    }
    let inf = buckets.last().unwrap();
    assert_eq!(inf.labels["le"], "+Inf");
    assert_eq!(inf.value, values.len() as f64);
    assert_eq!(
        scrape.value("turnstile_gate_wait_seconds_count", &[]),
        inf.value
    );
    // The two zeros and 500 ns (bucket 480..=511) are under 1 µs; 999, 1000 and 1001 share
    // the bucket 960..=1023, which ends above 1 µs, so they are reported under 2.5 µs; 20 s
    // only under +Inf.
    assert_eq!(buckets[0].value, 3.0);
    assert_eq!(buckets[1].value, 6.0);
    assert_eq!(buckets[HISTOGRAM_BOUNDS_NS.len() - 1].value, 7.0);
    let sum: u64 = values.iter().sum();
    let got = scrape.value("turnstile_gate_wait_seconds_sum", &[]);
    assert!((got - sum as f64 / 1e9).abs() < 1e-9, "sum {got}");
}

#[test]
fn gate_names_are_escaped_in_label_values() {
    let (gate, _b) = busy_gate();
    let name = "a\"b\\c\nd";
    let text = gate.stats().to_prometheus(name);
    assert!(text.contains(r#"gate="a\"b\\c\nd""#), "{text}");
    let scrape = parse(&text);
    assert!(scrape.samples.iter().all(|s| s.labels["gate"] == name));
}

#[test]
fn several_gates_share_one_header_per_family_and_keep_their_own_values() {
    let (one, _b) = busy_gate();
    let two = Gate::new(GateConfig::new(Policy::Polling).limit(7)).unwrap();
    let (s1, s2) = (one.stats(), two.stats());
    let mut text = String::new();
    write_prometheus(&mut text, &[("one", &s1), ("two", &s2)]).unwrap();
    let scrape = parse(&text);
    assert_eq!(
        text.matches("# TYPE turnstile_gate_limit gauge\n").count(),
        1
    );
    assert_eq!(
        scrape.value("turnstile_gate_limit", &[("gate", "one")]),
        3.0
    );
    assert_eq!(
        scrape.value("turnstile_gate_limit", &[("gate", "two")]),
        7.0
    );
    assert_eq!(scrape.value("turnstile_gate_info", &[("gate", "two")]), 1.0);
    assert_eq!(
        scrape
            .samples
            .iter()
            .find(|s| s.name == "turnstile_gate_info" && s.labels["gate"] == "two")
            .unwrap()
            .labels["policy"],
        "polling"
    );
    let mut empty = String::new();
    write_prometheus(&mut empty, &[]).unwrap();
    assert!(empty.is_empty(), "no gates, no families");
}

#[test]
fn an_instrumented_lock_is_exported_with_its_name_as_the_lock_label() {
    let lock = Instrumented::new("orders_index", 0u32);
    for _ in 0..5 {
        *lock.lock() += 1;
    }
    let report = lock.report();
    let mut text = String::new();
    write_lock_prometheus(&mut text, &[&report]).unwrap();
    let scrape = parse(&text);
    assert_eq!(
        scrape.type_of("turnstile_lock_acquisitions_total"),
        Some("counter")
    );
    assert_eq!(
        scrape.value(
            "turnstile_lock_acquisitions_total",
            &[("lock", "orders_index")]
        ),
        report.acquisitions as f64
    );
    assert_eq!(report.acquisitions, 5);
    assert_eq!(
        scrape.value("turnstile_lock_contended_total", &[]),
        report.waited as f64
    );
    assert_eq!(
        scrape.value("turnstile_lock_wait_seconds_bucket", &[("le", "+Inf")]),
        report.wait.count() as f64
    );
}

#[cfg(feature = "serde")]
#[test]
fn serde_writes_durations_as_ns_policies_by_name_and_histograms_as_summaries() {
    let (gate, _b) = busy_gate();
    let mut stats = gate.stats();
    let (h, values) = crafted_histogram();
    stats.wait = h;
    let v = serde_json::to_value(&stats).unwrap();
    assert_eq!(v["policy"], "classic");
    assert_eq!(v["limit"], 3);
    assert_eq!(v["counters"]["admissions"], stats.counters.admissions);
    assert_eq!(v["sleep_delay_ns"], stats.sleep_delay.as_nanos() as u64);
    assert!(v["taken_at_ns"].is_u64());
    assert_eq!(v["wait"]["count"], values.len());
    assert_eq!(v["wait"]["max_ns"], 20_000_000_000u64);
    assert_eq!(v["wait"]["p50_ns"], stats.wait.quantile(0.5));
    let buckets = v["wait"]["buckets"].as_array().unwrap();
    assert_eq!(buckets[0], serde_json::json!([0, 0, 2]), "two zeros");
    let in_buckets: u64 = buckets.iter().map(|b| b[2].as_u64().unwrap()).sum();
    assert_eq!(in_buckets, values.len() as u64);

    let snap = gate.snapshot();
    let v = serde_json::to_value(&snap).unwrap();
    let b = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == "b")
        .unwrap();
    assert_eq!(b["state"], "declared_inside");
    assert!(b["in_state_ns"].is_u64());
    assert_eq!(
        serde_json::to_value(turnstile::SessionState::SteppedOut(
            StepOutReason::CommitWait
        ))
        .unwrap(),
        serde_json::json!({"stepped_out": "commit_wait"})
    );
}

#[cfg(feature = "metrics")]
mod facade {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, CounterFn, Gauge, GaugeFn, Histogram, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };

    use super::*;

    /// A recorder that keeps every counter and gauge by name and sorted labels.
    #[derive(Default)]
    struct Capture {
        counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
        gauges: Mutex<BTreeMap<String, Arc<GaugeCell>>>,
        descriptions: Mutex<BTreeMap<String, String>>,
    }

    #[derive(Default)]
    struct GaugeCell(AtomicU64);

    impl GaugeFn for GaugeCell {
        fn increment(&self, v: f64) {
            self.set(f64::from_bits(self.0.load(Ordering::Relaxed)) + v)
        }
        fn decrement(&self, v: f64) {
            self.increment(-v)
        }
        fn set(&self, v: f64) {
            self.0.store(v.to_bits(), Ordering::Relaxed)
        }
    }

    struct CounterCell(Arc<AtomicU64>);

    impl CounterFn for CounterCell {
        fn increment(&self, v: u64) {
            self.0.fetch_add(v, Ordering::Relaxed);
        }
        fn absolute(&self, v: u64) {
            self.0.fetch_max(v, Ordering::Relaxed);
        }
    }

    fn id(key: &Key) -> String {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        format!("{}{{{}}}", key.name(), labels.join(","))
    }

    impl Capture {
        fn counter(&self, id: &str) -> u64 {
            self.counters.lock().unwrap()[id].load(Ordering::Relaxed)
        }
        fn gauge(&self, id: &str) -> f64 {
            f64::from_bits(self.gauges.lock().unwrap()[id].0.load(Ordering::Relaxed))
        }
        fn describe(&self, key: KeyName, d: SharedString) {
            self.descriptions
                .lock()
                .unwrap()
                .insert(key.as_str().to_string(), d.to_string());
        }
    }

    impl Recorder for Capture {
        fn describe_counter(&self, key: KeyName, _: Option<Unit>, d: SharedString) {
            self.describe(key, d)
        }
        fn describe_gauge(&self, key: KeyName, _: Option<Unit>, d: SharedString) {
            self.describe(key, d)
        }
        fn describe_histogram(&self, key: KeyName, _: Option<Unit>, d: SharedString) {
            self.describe(key, d)
        }
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let cell = self
                .counters
                .lock()
                .unwrap()
                .entry(id(key))
                .or_default()
                .clone();
            Counter::from_arc(Arc::new(CounterCell(cell)))
        }
        fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
            let cell = self
                .gauges
                .lock()
                .unwrap()
                .entry(id(key))
                .or_default()
                .clone();
            Gauge::from_arc(cell)
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    #[test]
    fn publish_sets_the_prometheus_names_in_the_installed_recorder() {
        let (gate, _b) = busy_gate();
        let mut stats = gate.stats();
        let (h, values) = crafted_histogram();
        stats.wait = h;
        let rec = Capture::default();
        metrics::with_local_recorder(&rec, || {
            turnstile::metrics::describe();
            turnstile::metrics::publish("orders", &stats);
        });
        for field in COUNTERS {
            assert_eq!(
                rec.counter(&format!("turnstile_gate_{field}_total{{gate=orders}}")),
                counter_of(&stats, field),
                "{field}"
            );
        }
        assert_eq!(rec.gauge("turnstile_gate_inside{gate=orders}"), 1.0);
        assert_eq!(rec.gauge("turnstile_gate_limit{gate=orders}"), 3.0);
        assert_eq!(
            rec.gauge("turnstile_gate_info{gate=orders,policy=classic}"),
            1.0
        );
        assert_eq!(
            rec.gauge("turnstile_gate_wait_seconds{gate=orders,quantile=1}"),
            20.0,
            "quantile 1 is the maximum"
        );
        assert_eq!(
            rec.gauge("turnstile_gate_wait_seconds{gate=orders,quantile=0.5}"),
            stats.wait.quantile(0.5) as f64 / 1e9
        );
        assert_eq!(
            rec.counter("turnstile_gate_wait_seconds_count{gate=orders}"),
            values.len() as u64
        );
        assert!(rec
            .descriptions
            .lock()
            .unwrap()
            .contains_key("turnstile_gate_admissions_total"));
    }

    #[test]
    fn publish_metrics_and_publish_lock_label_gates_and_locks_by_name() {
        let (gate, _b) = busy_gate();
        let lock = Instrumented::new("orders_index", ());
        drop(lock.lock());
        drop(lock.lock());
        let rec = Capture::default();
        metrics::with_local_recorder(&rec, || {
            gate.publish_metrics("g1");
            turnstile::metrics::publish_lock(&lock.report());
        });
        assert_eq!(
            rec.counter("turnstile_gate_admissions_total{gate=g1}"),
            gate.stats().counters.admissions
        );
        assert_eq!(
            rec.counter("turnstile_lock_acquisitions_total{lock=orders_index}"),
            2
        );
        assert_eq!(
            rec.counter("turnstile_lock_contended_total{lock=orders_index}"),
            0
        );
    }
}

/// `threads` sessions each run `statements` one-call statements of `work` spinning.
fn churn(gate: &Gate, threads: usize, statements: usize, work: std::time::Duration) {
    let start = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (g, start) = (gate.clone(), start.clone());
            std::thread::spawn(move || {
                let mut s = g.session();
                start.wait();
                for _ in 0..statements {
                    let mut st = s.begin();
                    let call = st.enter().expect("no timeout or cancel is set");
                    let t = std::time::Instant::now();
                    while t.elapsed() < work {
                        std::hint::spin_loop();
                    }
                    drop(call);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("a session thread panicked");
    }
}

#[test]
fn every_slot_handed_to_a_waiter_is_counted_once_whichever_path_hands_it() {
    // A released wait's wake latency is recorded exactly once per hand-off it finished (no
    // waits are cancelled or time out here), so the two counts must agree. Under adaptive
    // `auto` the controller's raises and stall checks hand slots too, and must be counted as
    // an exit's release is.
    for (name, cfg) in [
        (
            "classic",
            GateConfig::new(Policy::Classic).limit(1).tickets(1),
        ),
        ("flifo", GateConfig::new(Policy::Flifo).limit(1).tickets(1)),
        (
            "auto, fixed limit",
            GateConfig::new(Policy::Auto).limit(1).adaptive_limit(false),
        ),
        ("auto, adaptive", GateConfig::new(Policy::Auto)),
    ] {
        let gate = Gate::new(cfg).unwrap();
        churn(&gate, 8, 300, std::time::Duration::from_micros(50));
        let s = gate.stats();
        assert_eq!(
            s.counters.handoffs,
            s.wake_latency.count(),
            "{name}: hand-offs against released waits that finished"
        );
    }
}

#[test]
fn a_limit_raise_counts_the_slots_it_hands_to_queued_waiters() {
    let gate = Gate::new(GateConfig::new(Policy::Classic).limit(1).tickets(1)).unwrap();
    let mut holder = gate.session();
    assert!(holder.enter().unwrap(), "admitted");
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let g = gate.clone();
            std::thread::spawn(move || {
                let mut s = g.session();
                assert!(s.enter().unwrap(), "admitted");
                s.exit().unwrap();
            })
        })
        .collect();
    wait_for(&gate, "three waiters queued", |s| s.queued == 3);
    gate.set_limit(4).unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    holder.exit().unwrap();
    drop(holder);
    assert_eq!(
        gate.stats().counters.handoffs,
        3,
        "the raise handed three slots"
    );
}

#[test]
fn a_scrape_never_shows_fewer_waiting_than_queued_and_sleeping() {
    // The policy counts a session queued or sleeping before the session counts itself
    // waiting: a scrape in between read (queued, sleeping, waiting) = (1, 0, 0).
    use std::sync::atomic::{AtomicBool, Ordering};
    for cfg in [
        GateConfig::new(Policy::Classic)
            .limit(1)
            .tickets(1)
            .sleep_delay(std::time::Duration::ZERO),
        GateConfig::new(Policy::Polling).limit(1).tickets(1),
        GateConfig::new(Policy::Auto).limit(1).adaptive_limit(false),
    ] {
        let gate = Gate::new(cfg).unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (g, stop) = (gate.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut s = g.session();
                    while !stop.load(Ordering::Relaxed) {
                        let mut st = s.begin();
                        drop(st.enter().unwrap());
                    }
                })
            })
            .collect();
        let mut bad = None;
        for _ in 0..200_000 {
            let s = gate.stats();
            if s.queued + s.sleeping > s.waiting {
                bad = Some((s.queued, s.sleeping, s.waiting));
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(
            bad,
            None,
            "{:?}: (queued, sleeping, waiting)",
            gate.stats().policy
        );
    }
}

/// Every (name, labels) of a scrape appears once.
fn assert_no_repeated_series(scrape: &Scrape) {
    let mut seen = std::collections::BTreeSet::new();
    for s in &scrape.samples {
        assert!(
            seen.insert((s.name.clone(), s.labels.clone())),
            "repeated series {} {:?}",
            s.name,
            s.labels
        );
    }
}

#[test]
fn locks_that_share_a_name_are_one_series_with_their_counts_added() {
    // Two default locks of one type share its type name; two series with the same labels
    // break the scrape (Prometheus keeps one, and its value flips between the locks).
    let a: Instrumented<Vec<u8>> = Default::default();
    let b: Instrumented<Vec<u8>> = Default::default();
    let other = Instrumented::new("other", 0u8);
    for _ in 0..3 {
        drop(a.lock());
    }
    drop(b.lock());
    drop(other.lock());
    let (ra, rb, ro) = (a.report(), b.report(), other.report());
    let mut text = String::new();
    write_lock_prometheus(&mut text, &[&ra, &ro, &rb]).unwrap();
    let scrape = parse(&text);
    assert_no_repeated_series(&scrape);
    assert_eq!(
        scrape.value("turnstile_lock_acquisitions_total", &[("lock", ra.name)]),
        4.0
    );
    assert_eq!(
        scrape.value("turnstile_lock_acquisitions_total", &[("lock", "other")]),
        1.0
    );
    assert_eq!(
        scrape.value("turnstile_lock_wait_seconds_count", &[("lock", ra.name)]),
        (ra.wait.count() + rb.wait.count()) as f64
    );
}

#[test]
fn gates_given_the_same_name_are_written_under_distinct_names() {
    let one = Gate::new(GateConfig::new(Policy::Classic).limit(3)).unwrap();
    let two = Gate::new(GateConfig::new(Policy::Polling).limit(7)).unwrap();
    let three = Gate::new(GateConfig::new(Policy::Polling).limit(9)).unwrap();
    let (s1, s2, s3) = (one.stats(), two.stats(), three.stats());
    let mut text = String::new();
    // "db#2" is taken by the caller: the second "db" becomes "db#3".
    write_prometheus(&mut text, &[("db", &s1), ("db", &s2), ("db#2", &s3)]).unwrap();
    let scrape = parse(&text);
    assert_no_repeated_series(&scrape);
    let limit = |g| scrape.value("turnstile_gate_limit", &[("gate", g)]);
    assert_eq!((limit("db"), limit("db#3"), limit("db#2")), (3.0, 7.0, 9.0));
}
