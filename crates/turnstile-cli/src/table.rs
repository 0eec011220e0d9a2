//! Human-readable tables for reports.

use std::fmt::Write;

use std::collections::BTreeSet;
use std::path::Path;

use turnstile_bench::chart::{LineChart, Series};
use turnstile_bench::gate::GateBenchReport;
use turnstile_bench::mutex::{MutexBenchReport, MutexResult};

/// Nanoseconds as a short human figure: `850ns`, `12.3us`, `4.56ms`, `1.20s`.
pub fn ns(v: u64) -> String {
    let f = v as f64;
    if v < 1_000 {
        format!("{v}ns")
    } else if v < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if v < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

/// The `bench gate` report as text tables.
pub fn gate_report(r: &GateBenchReport) -> String {
    let mut s = String::new();
    let c = &r.config;
    let _ = writeln!(
        s,
        "turnstile bench gate — {} cpus, {}; limit {}, tickets {}, {} calls × {} us per statement, sleep delay {} us, {} ms per point",
        r.machine.cpus,
        r.machine.os,
        c.limit,
        c.tickets,
        c.calls,
        c.work_us,
        c.sleep_delay_us,
        c.duration.as_millis()
    );
    let _ = writeln!(
        s,
        "\nFast paths (median of {} repetitions × {} iterations, one thread):",
        c.reps, c.iters
    );
    let _ = writeln!(
        s,
        "{:<14} {:>18} {:>22} {:>14}",
        "policy", "ticket re-entry", "admission+release", "vs baseline"
    );
    for f in &r.fast_path {
        let reentry = f
            .ticket_reentry_ns
            .map_or("-".to_string(), |v| format!("{v:.2} ns"));
        let ratio = f
            .admission_vs_baseline
            .map_or("-".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            s,
            "{:<14} {:>18} {:>22} {:>14}",
            f.policy,
            reentry,
            format!("{:.2} ns", f.admission_ns),
            ratio
        );
    }
    s.push_str(
        "\nLoad (closed loop). wait: completed admission waits (0 when none); waiting: longest\n\
         wait still in progress at the end; inside: most threads holding a slot; fair: fewest /\n\
         most statements per thread; starved: threads that completed none; cs/adm: context\n\
         switches per admission:\n",
    );
    let _ = writeln!(
        s,
        "{:<14} {:>7} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>7} {:>8} {:>9} {:>6} {:>6}",
        "policy",
        "threads",
        "stmts/s",
        "wait p50",
        "wait p99",
        "wait max",
        "waiting",
        "inside",
        "fair",
        "starved",
        "cs/adm",
        "wake p50",
        "usr%",
        "sys%"
    );
    let mut last = "";
    for p in &r.results {
        if !last.is_empty() && last != p.policy {
            s.push('\n');
        }
        last = p.policy;
        let _ = writeln!(
            s,
            "{:<14} {:>7} {:>11.0} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6.2} {:>7} {:>8.2} {:>9} {:>6.1} {:>6.1}",
            p.policy,
            p.threads,
            p.throughput_per_s,
            ns(p.wait_p50_ns),
            ns(p.wait_p99_ns),
            ns(p.wait_max_ns),
            if p.waiting_at_end == 0 {
                "-".to_string()
            } else {
                ns(p.longest_waiting_ns)
            },
            p.max_inside,
            p.fairness,
            p.starved_threads,
            p.ctx_switches_per_admission,
            if p.wake_p50_ns == 0 {
                "-".to_string()
            } else {
                ns(p.wake_p50_ns)
            },
            100.0 * p.cpu_user,
            100.0 * p.cpu_sys
        );
    }
    let autos: Vec<_> = r
        .results
        .iter()
        .filter_map(|p| p.limit_reasons.as_ref().map(|x| (p, x)))
        .collect();
    if !autos.is_empty() {
        s.push_str(
            "\n`auto`'s limit: where it ended, and its decisions in the measured interval:\n",
        );
        for (p, x) in autos {
            let _ = writeln!(
                s,
                "  {} × {} threads: limit {}; {}",
                p.policy,
                p.threads,
                p.limit,
                turnstile_bench::gate::limit_reasons_text(x)
            );
        }
    }
    if let Some(a) = &r.async_gate {
        let f = &a.fast_path;
        let _ = writeln!(
            s,
            "\nAsync (tokio; the gate is classic with a zero sleep delay, queueing at once as the \
             semaphore does):"
        );
        let _ = writeln!(
            s,
            "  uncontended admission+release, current-thread runtime (median of {} repetitions \
             × {} iterations): turnstile async {:.2} ns, tokio Semaphore {:.2} ns ({:.2}x)",
            c.reps, c.iters, f.gate_admission_ns, f.semaphore_admission_ns, f.gate_vs_semaphore
        );
        for l in &a.load {
            let _ = writeln!(
                s,
                "  load, {} tasks on {} workers, limit {}: {:<16} {:>11.0} stmts/s, inside at most {}",
                l.tasks, l.workers, l.limit, l.variant, l.throughput_per_s, l.max_inside
            );
        }
        let _ = writeln!(
            s,
            "  load throughput, turnstile async over tokio Semaphore: {:.2}x",
            a.load_gate_vs_semaphore
        );
    }
    s
}

/// The (hold, mutexes) groups of a mutex report, in run order.
fn mutex_groups(r: &MutexBenchReport) -> Vec<(u64, usize)> {
    let mut seen = Vec::new();
    for p in &r.results {
        if !seen.contains(&(p.hold_ns, p.mutexes)) {
            seen.push((p.hold_ns, p.mutexes));
        }
    }
    seen
}

fn variants_of(r: &MutexBenchReport) -> Vec<&'static str> {
    let mut v = Vec::new();
    for p in &r.results {
        if !v.contains(&p.variant) {
            v.push(p.variant);
        }
    }
    v
}

fn find<'a>(
    r: &'a MutexBenchReport,
    v: &str,
    t: usize,
    m: usize,
    h: u64,
) -> Option<&'a MutexResult> {
    r.results
        .iter()
        .find(|p| p.variant == v && p.threads == t && p.mutexes == m && p.hold_ns == h)
}

/// The `bench mutex` report as text tables.
pub fn mutex_report(r: &MutexBenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "turnstile bench mutex — {} cpus, {}; {} ms per point. ns/loop = wall time per completed\n\
         critical section (all threads); cpu = user+sys CPU per loop; wake/acq = wake-ups per\n\
         acquisition that slept (innodb: every broadcast wakes every sleeper).",
        r.machine.cpus,
        r.machine.os,
        r.config.duration.as_millis()
    );
    let variants = variants_of(r);
    let threads: BTreeSet<usize> = r.results.iter().map(|p| p.threads).collect();
    for (h, m) in mutex_groups(r) {
        for (what, f) in [
            (
                "ns per loop",
                (|p: &MutexResult| format!("{:.0}", p.ns_per_loop)) as fn(&MutexResult) -> String,
            ),
            ("CPU ns per loop (user+sys)", |p: &MutexResult| {
                format!("{:.0}", p.cpu_ns_per_loop)
            }),
            ("context switches per loop", |p: &MutexResult| {
                format!("{:.3}", p.cs_per_loop)
            }),
            (
                "fairness (fewest/most loops per thread)",
                |p: &MutexResult| format!("{:.2}", p.fairness),
            ),
            ("lock wait p99 (sampled)", |p: &MutexResult| {
                ns(p.wait_p99_ns)
            }),
        ] {
            let _ = writeln!(s, "\nhold {h} ns, {m} mutexes — {what}:");
            let _ = write!(s, "{:>8}", "threads");
            for v in &variants {
                let _ = write!(s, " {:>16}", v);
            }
            s.push('\n');
            for &t in &threads {
                let _ = write!(s, "{t:>8}");
                for v in &variants {
                    let cell = find(r, v, t, m, h).map_or("-".to_string(), f);
                    let _ = write!(s, " {cell:>16}");
                }
                s.push('\n');
            }
        }
        let _ = writeln!(
            s,
            "\nhold {h} ns, {m} mutexes — wake-ups per acquisition that slept:"
        );
        for &t in &threads {
            let mut line = format!("{t:>8}");
            for v in &variants {
                if let Some(w) = find(r, v, t, m, h).and_then(|p| p.wakeups_per_acquire) {
                    let _ = write!(line, "  {v} {w:.2}");
                }
            }
            let _ = writeln!(s, "{line}");
        }
    }
    s.push_str(&mutex_targets(r));
    s
}

/// turnstile against the rivals at each point: ns/loop over the best rival's, CPU over the
/// median rival's.
pub fn mutex_targets(r: &MutexBenchReport) -> String {
    let mut s = String::from(
        "\nturnstile vs rivals (std, parking_lot, pthread, pthread-adaptive), per point:\n",
    );
    let _ = writeln!(
        s,
        "{:>6} {:>8} {:>8} {:>12} {:>16} {:>14} {:>18}",
        "hold", "mutexes", "threads", "ns/loop", "best rival", "ratio", "cpu vs median"
    );
    let rivals = ["std", "parking_lot", "pthread", "pthread-adaptive"];
    for p in r.results.iter().filter(|p| p.variant == "turnstile") {
        let rs: Vec<&MutexResult> = rivals
            .iter()
            .filter_map(|v| find(r, v, p.threads, p.mutexes, p.hold_ns))
            .collect();
        let Some(best) = rs
            .iter()
            .min_by(|a, b| a.ns_per_loop.total_cmp(&b.ns_per_loop))
        else {
            continue;
        };
        let mut cpus: Vec<f64> = rs.iter().map(|x| x.cpu_ns_per_loop).collect();
        cpus.sort_by(f64::total_cmp);
        let median = turnstile_bench::stats::median(&cpus);
        let _ = writeln!(
            s,
            "{:>6} {:>8} {:>8} {:>12.0} {:>16} {:>13.2}x {:>17.2}x",
            p.hold_ns,
            p.mutexes,
            p.threads,
            p.ns_per_loop,
            format!("{} {:.0}", best.variant, best.ns_per_loop),
            p.ns_per_loop / best.ns_per_loop,
            p.cpu_ns_per_loop / median
        );
    }
    s
}

/// Writes one SVG per (hold, mutexes): ns per loop against threads, a line per variant.
pub fn mutex_charts(r: &MutexBenchReport, dir: &Path) -> Result<Vec<String>, String> {
    let mut written = Vec::new();
    for (h, m) in mutex_groups(r) {
        let series = variants_of(r)
            .into_iter()
            .map(|v| Series {
                name: v.to_string(),
                points: r
                    .results
                    .iter()
                    .filter(|p| p.variant == v && p.hold_ns == h && p.mutexes == m)
                    .map(|p| (p.threads as f64, p.ns_per_loop))
                    .collect(),
            })
            .collect();
        let path = dir.join(format!("mutex-hold{h}-m{m}.svg"));
        LineChart {
            title: format!(
                "ns per loop, hold {h} ns, {m} mutexes ({} cpus)",
                r.machine.cpus
            ),
            x_label: "threads".into(),
            y_label: "ns per loop (log)".into(),
            log_y: true,
            linear_x: false,
            series,
        }
        .write_svg(&path)?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_table_says_where_autos_limit_ended_and_why() {
        use turnstile_bench::gate::{run, GateBenchConfig, Variant};
        let cfg = GateBenchConfig {
            variants: vec![
                Variant::parse("polling").unwrap(),
                Variant::parse("auto").unwrap(),
            ],
            threads: vec![3],
            limit: 2,
            calls: 2,
            work_us: 1.0,
            duration: std::time::Duration::from_millis(30),
            reps: 1,
            iters: 1_000,
            async_tasks: 4,
            ..GateBenchConfig::full()
        };
        let r = run(&cfg, &mut |_| {}).expect("three threads start");
        let text = gate_report(&r);
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with("auto × 3 threads: limit "))
            .unwrap_or_else(|| panic!("no line for auto's limit in:\n{text}"));
        assert!(line.contains("windows: fill"), "{line}");
        assert!(
            !text
                .lines()
                .any(|l| l.trim_start().starts_with("polling × ")),
            "a fixed policy has no limit decisions to show:\n{text}"
        );
    }

    #[test]
    fn nanoseconds_print_in_the_right_unit() {
        assert_eq!(ns(850), "850ns");
        assert_eq!(ns(12_345), "12.3us");
        assert_eq!(ns(4_560_000), "4.56ms");
        assert_eq!(ns(1_200_000_000), "1.20s");
    }
}
