//! Human-readable tables for reports.

use std::fmt::Write;

use turnstile_bench::gate::GateBenchReport;

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
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_print_in_the_right_unit() {
        assert_eq!(ns(850), "850ns");
        assert_eq!(ns(12_345), "12.3us");
        assert_eq!(ns(4_560_000), "4.56ms");
        assert_eq!(ns(1_200_000_000), "1.20s");
    }
}
