//! `turnstile calibrate`: measures the host's parameters for the simulator's machine model
//! and writes them as a TOML file whose `[machine]` table is a
//! `turnstile_sim::machine::MachineConfig` (the measuring is `turnstile_bench::machine`).

use std::path::{Path, PathBuf};

use clap::Args;

#[derive(Args)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct CalibrateArgs {
    /// Under 15 s: fewer repetitions, samples and round trips (full: under a minute).
    #[arg(long)]
    quick: bool,
    /// Print the whole calibration as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// The TOML file to write: `[machine]` for the simulator, `[measured]` with the raw
    /// figures. Its folder is created.
    #[arg(long, default_value = "reports/calibrate/machine.toml")]
    out: PathBuf,
    /// The `cores` written to `[machine]` (1..=4096). Default: the CPUs this process may use.
    /// The measurements themselves always use the CPUs this process may use.
    #[arg(long)]
    cores: Option<u32>,
    /// Also measure the embedded engine's own OLTP costs (a point select, a row, a sort, a
    /// gate call) on one connection, and write them to this file as `sim oltp --config` keys:
    /// with this file and the `[machine]` above, `sim oltp --cores N` stands for `repro oltp`
    /// on the host.
    #[arg(long, value_name = "FILE")]
    oltp: Option<PathBuf>,
    /// The engine's data directory for `--oltp` (the table of `repro oltp` is reused).
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
    /// With `--oltp`: measure the engine with this much extra CPU per row fetched, in ns
    /// (0–1,000,000), as `repro oltp --row-work-ns` runs it, so that the costs written are the
    /// ones that run pays. Default 0: none.
    #[arg(long, default_value_t = 0)]
    row_work_ns: u64,
}

/// Checks `--row-work-ns`: in range, and only with `--oltp` (it changes nothing else).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn check_row_work(a: &CalibrateArgs) -> Result<(), String> {
    if a.row_work_ns > 1_000_000 {
        return Err(format!(
            "--row-work-ns {} is out of range: 0..=1000000",
            a.row_work_ns
        ));
    }
    if a.row_work_ns > 0 && a.oltp.is_none() {
        return Err("--row-work-ns applies to the engine costs: add --oltp FILE".into());
    }
    Ok(())
}

/// The simulator's limit on `cores` (`MachineConfig::validate`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const MAX_CORES: u32 = 4096;

/// Measures the engine's OLTP costs and writes them as `sim oltp --config` keys.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn write_oltp_costs(
    path: &Path,
    data_dir: &Path,
    quick: bool,
    row_work_ns: u64,
) -> Result<(), String> {
    use turnstile_bench::repro::{oltp, Common, Progress};
    struct Lines;
    impl Progress for Lines {
        fn step(&mut self, what: &str) {
            eprintln!("{what}");
        }
        fn load(&mut self, done: u64, total: u64) {
            if done == total {
                eprintln!("loaded {total} rows");
            }
        }
    }
    let common = Common {
        data_dir: data_dir.to_path_buf(),
        fsync_delay: None,
    };
    let cfg = oltp::OltpConfig {
        row_work_ns,
        ..if quick {
            oltp::OltpConfig::quick()
        } else {
            oltp::OltpConfig::full()
        }
    };
    let c = oltp::measure_costs(&common, &cfg, if quick { 3 } else { 7 }, &mut Lines)
        .map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create folder {}: {e}", dir.display()))?;
    }
    let text = format!(
        "# turnstile calibrate --oltp: the embedded engine's costs on this machine ({} rows, \
         one connection, fastest of repetitions), as `turnstile sim oltp --config` keys.\n\
         # Use with the [machine] calibration: sim oltp --config THIS --machine MACHINE --cores N\n\
         {}range = {}\npoint_us = {:.3}\nrow_us = {:.4}\nsort_us = {:.2}\ngate_call_us = {:.4}\n{}",
        cfg.rows,
        if row_work_ns > 0 {
            format!(
                "# Measured with {row_work_ns} ns of extra CPU per row fetched (repro oltp --row-work-ns {row_work_ns}).\n"
            )
        } else {
            String::new()
        },
        c.range,
        c.point_us,
        c.row_us,
        c.sort_us,
        c.gate_call_us,
        c.switch_us
            .map_or(String::new(), |us| format!("switch_us = {us:.3}\n"))
    );
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!(
        "engine costs: point select {:.2} µs, row {:.3} µs, sort {:.1} µs, gate call {:.3} µs, switch {} µs; wrote {}",
        c.point_us,
        c.row_us,
        c.sort_us,
        c.gate_call_us,
        c.switch_us.map_or("-".into(), |v| format!("{v:.2}")),
        path.display()
    );
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn run(_: &CalibrateArgs) -> Result<(), String> {
    Err("calibrate measures Linux futexes and scheduling: it runs on Linux only".into())
}

#[cfg(target_os = "linux")]
pub use linux::run;

#[cfg(target_os = "linux")]
mod linux {
    use std::fmt::Write as _;

    use serde::Serialize;
    use turnstile_bench::machine::{self, CalibrateConfig, Calibration, Repeated};
    use turnstile_sim::machine::{Distribution, MachineConfig};

    use super::{CalibrateArgs, MAX_CORES};
    use crate::emit;

    /// Why two fields are not measured, and where `cores` came from.
    #[derive(Debug, Clone, Serialize)]
    pub(super) struct Notes {
        pub time_slice_ns: String,
        pub wake_distribution: String,
        pub cores: String,
    }

    /// The `[measured]` table: the notes, then everything measured.
    #[derive(Debug, Clone, Serialize)]
    pub(super) struct Measured {
        pub notes: Notes,
        #[serde(flatten)]
        pub calibration: Calibration,
    }

    /// The file `calibrate` writes (and, with `--json`, prints).
    #[derive(Debug, Clone, Serialize)]
    pub(super) struct CalibrationFile {
        pub machine: MachineConfig,
        pub measured: Measured,
    }

    /// A measured figure as the whole, non-negative ns the machine model takes.
    fn whole_ns(v: f64) -> u64 {
        if v.is_finite() && v > 0.0 {
            v.round() as u64
        } else {
            0
        }
    }

    /// The machine model for `c`, with `cores` cores.
    pub(super) fn machine_config(c: &Calibration, cores: u32) -> MachineConfig {
        MachineConfig {
            cores,
            time_slice_ns: MachineConfig::default().time_slice_ns,
            context_switch_ns: whole_ns(c.context_switch.per_switch.median_ns),
            cache_refill_ns: whole_ns(c.cache_refill.refill_ns),
            wake_base_ns: whole_ns(c.wake.base_ns),
            wake_per_runnable_ns: whole_ns(c.wake.slope_ns_per_runnable),
            wake_distribution: Distribution::Exponential,
            timer_slack_ns: whole_ns(c.timer_slack.sleep_1ms.median_ns),
            yield_ns: whole_ns(c.yield_cost.alone.median_ns),
            mutex_handoff_ns: whole_ns(c.mutex.contended_per_acquisition.median_ns),
            mutex_uncontended_ns: whole_ns(c.mutex.uncontended_pair.median_ns),
            wake_preempt_ns: c.wake_preempt.min_run_ns.map(whole_ns),
            wake_busy_ns: Some(whole_ns(c.wake.intercept_ns)),
            wake_call_ns: whole_ns(c.wake_call.same_cpu.median_ns),
            wake_call_idle_ns: whole_ns(
                c.wake_call
                    .other_idle_cpu
                    .as_ref()
                    .map_or(c.wake_call.same_cpu.median_ns, |l| l.median_ns),
            ),
            switch_by_threads: c
                .ring
                .iter()
                .map(|p| [p.threads as u64, whole_ns(p.per_switch.median_ns)])
                .collect(),
        }
    }

    pub(super) fn file(c: Calibration, cores: Option<u32>) -> CalibrationFile {
        let (n, how) = match cores {
            Some(n) => (n, format!("--cores {n}")),
            None => (
                c.host.cpus_available as u32,
                "the CPUs this process may use (available_parallelism)".to_string(),
            ),
        };
        CalibrationFile {
            machine: machine_config(&c, n),
            measured: Measured {
                notes: Notes {
                    time_slice_ns: format!(
                        "not measured: MachineConfig::default()'s {} ns (the scheduler's setting, see its doc)",
                        MachineConfig::default().time_slice_ns
                    ),
                    wake_distribution: "not measured: exponential (memoryless scheduling noise)".into(),
                    cores: how,
                },
                calibration: c,
            },
        }
    }

    /// The TOML text: a comment header, `[machine]`, `[measured]`.
    pub(super) fn to_toml(f: &CalibrationFile) -> Result<String, String> {
        let h = &f.measured.calibration.host;
        let body = toml::to_string(f).map_err(|e| format!("cannot write TOML: {e}"))?;
        Ok(format!(
            "# turnstile calibrate: this machine's parameters for the simulator's machine model.\n\
             # [machine] is turnstile_sim::machine::MachineConfig; [measured] holds the raw figures.\n\
             # {} ({} CPUs available, {} online), {} {}, {}.\n\n{body}",
            if h.cpu_model.is_empty() { "unknown CPU" } else { &h.cpu_model },
            h.cpus_available,
            h.cpus_online,
            h.kernel,
            h.arch,
            h.date
        ))
    }

    /// Share of the CPUs other processes may use during a calibration before its figures are
    /// called disturbed: 5 %, a little over what an idle machine's daemons use, and a tenth of
    /// one busy neighbour thread on 2 cores (50 %).
    const DISTURBED_SHARE: f64 = 0.05;

    /// A warning when neighbours or the hypervisor took a noticeable share of the CPUs.
    pub(super) fn disturbed(c: &Calibration) -> Option<String> {
        let h = &c.host;
        (h.others_cpu_share + h.steal_share > DISTURBED_SHARE).then(|| {
            format!(
                "warning: other processes used {:.0} % of the CPUs (and steal {:.0} %) during the calibration: its figures are disturbed; run it again on a quiet machine",
                100.0 * h.others_cpu_share,
                100.0 * h.steal_share
            )
        })
    }

    fn spread(r: &Repeated) -> String {
        format!(
            "median of {} ({:.0}…{:.0})",
            r.runs_ns.len(),
            r.min_ns,
            r.max_ns
        )
    }

    /// The human table (Markdown).
    pub(super) fn table(f: &CalibrationFile) -> String {
        let m = &f.machine;
        let c = &f.measured.calibration;
        let h = &c.host;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "turnstile calibrate — {} ({} CPUs available, {} online), {} {}, {}; {} repetitions, {:.1} s; other processes used {:.1} % of the CPUs meanwhile, hypervisor steal {:.1} %\n",
            if h.cpu_model.is_empty() { "unknown CPU" } else { &h.cpu_model },
            h.cpus_available,
            h.cpus_online,
            h.kernel,
            h.arch,
            h.date,
            c.reps,
            c.wall_s,
            100.0 * h.others_cpu_share,
            100.0 * h.steal_share
        );
        if let Some(w) = disturbed(c) {
            let _ = writeln!(s, "**{w}**\n");
        }
        s.push_str("| parameter | value | how measured |\n|---|---:|---|\n");
        let mut row = |name: &str, v: String, how: String| {
            let _ = writeln!(s, "| {name} | {v} | {how} |");
        };
        row("cores", m.cores.to_string(), f.measured.notes.cores.clone());
        row(
            "time_slice_ns",
            m.time_slice_ns.to_string(),
            f.measured.notes.time_slice_ns.clone(),
        );
        row(
            "context_switch_ns",
            m.context_switch_ns.to_string(),
            format!(
                "futex ping-pong, 2 threads pinned to CPU {}, {} round trips: elapsed / 2N; {}",
                h.pinned_cpu,
                c.context_switch.round_trips,
                spread(&c.context_switch.per_switch)
            ),
        );
        row(
            "switch_by_threads",
            m.switch_by_threads
                .iter()
                .map(|[t, ns]| format!("{t}: {ns}"))
                .collect::<Vec<_>>()
                .join(", "),
            format!(
                "a token around a ring of N threads pinned to CPU {}: ns per switch against N, median of {}",
                h.pinned_cpu,
                c.reps.min(5)
            ),
        );
        let cr = &c.cache_refill;
        row(
            "cache_refill_ns",
            m.cache_refill_ns.to_string(),
            format!(
                "ping-pong touching {} KiB per thread per turn ({:.0} ns per switch, {}) − small set ({:.0}) − warm touch ({:.0}, {}) = {:.0}, floored at 0; working set: {}",
                cr.working_set_bytes >> 10,
                cr.per_switch_with_working_set.median_ns,
                spread(&cr.per_switch_with_working_set),
                cr.small_set_per_switch_ns,
                cr.warm_touch.median_ns,
                spread(&cr.warm_touch),
                cr.refill_raw_ns,
                cr.working_set_source
            ),
        );
        let idle = &c.wake.idle_core;
        let (waker_cpu, waiter_cpu) = c.wake.idle_core_cpus;
        row(
            "wake_base_ns",
            m.wake_base_ns.to_string(),
            format!(
                "futex wake → waiter runs, idle, waker on CPU {waker_cpu} and waiter on CPU {waiter_cpu}: median of {} samples (p10 {:.0}, p90 {:.0}); unpinned: {:.0} (first sweep point)",
                idle.samples,
                idle.p10_ns,
                idle.p90_ns,
                c.wake.points.first().map_or(f64::NAN, |p| p.latency.median_ns)
            ),
        );
        row(
            "wake_per_runnable_ns",
            m.wake_per_runnable_ns.to_string(),
            format!(
                "least-squares slope of the unpinned median wake-up against runnable threads per core, {} points (below): {:.1} ns, intercept {:.0} ns{}",
                c.wake.points.len(),
                c.wake.slope_ns_per_runnable,
                c.wake.intercept_ns,
                if c.wake.slope_ns_per_runnable < 0.0 { ", floored at 0" } else { "" }
            ),
        );
        row(
            "wake_busy_ns",
            m.wake_busy_ns.unwrap_or(0).to_string(),
            format!(
                "the sweep's intercept (below): a wake-up when no core is idle, the woken thread running on the waker's CPU once it blocks ({:.0} ns, floored at 0)",
                c.wake.intercept_ns
            ),
        );
        row(
            "wake_distribution",
            "exponential".into(),
            f.measured.notes.wake_distribution.clone(),
        );
        let ts = &c.timer_slack;
        row(
            "timer_slack_ns",
            m.timer_slack_ns.to_string(),
            format!(
                "overshoot of sleep(1 ms), {}; sleep(10 ms) overshoots {:.0} ns ({})",
                spread(&ts.sleep_1ms),
                ts.sleep_10ms.median_ns,
                spread(&ts.sleep_10ms)
            ),
        );
        let y = &c.yield_cost;
        row(
            "yield_ns",
            m.yield_ns.to_string(),
            format!(
                "{} sched_yield calls pinned to CPU {}, nothing else runnable there: {}; beside a busy thread pinned there: {:.0} ns per call ({})",
                y.calls,
                h.pinned_cpu,
                spread(&y.alone),
                y.with_busy_thread.median_ns,
                spread(&y.with_busy_thread)
            ),
        );
        let mx = &c.mutex;
        row(
            "mutex_handoff_ns",
            m.mutex_handoff_ns.to_string(),
            format!(
                "{} threads lock/increment/unlock one default pthread mutex for {} ms: elapsed / acquisitions, {}, busiest thread's share {}; uncontended lock+unlock {:.1} ns ({})",
                mx.threads,
                mx.run_ms,
                spread(&mx.contended_per_acquisition),
                mx.busiest_thread_share
                    .iter()
                    .map(|v| format!("{v:.2}"))
                    .collect::<Vec<_>>()
                    .join("/"),
                mx.uncontended_pair.median_ns,
                spread(&mx.uncontended_pair)
            ),
        );
        row(
            "mutex_uncontended_ns",
            m.mutex_uncontended_ns.to_string(),
            format!(
                "one thread locks and unlocks one default pthread mutex {} times: ns per pair, {}",
                mx.uncontended_pairs,
                spread(&mx.uncontended_pair)
            ),
        );
        let wc = &c.wake_call;
        row(
            "wake_call_ns",
            m.wake_call_ns.to_string(),
            format!(
                "duration of a futex_wake that woke a waiter pinned to the caller's own CPU {}: median of {} (p10 {:.0}, p90 {:.0}); with nobody waiting the call takes {:.0} ns ({})",
                h.pinned_cpu,
                wc.same_cpu.samples,
                wc.same_cpu.p10_ns,
                wc.same_cpu.p90_ns,
                wc.nobody_waiting.median_ns,
                spread(&wc.nobody_waiting)
            ),
        );
        row(
            "wake_call_idle_ns",
            m.wake_call_idle_ns.to_string(),
            match &wc.other_idle_cpu {
                Some(l) => format!(
                    "the same, waking a waiter pinned to another, idle CPU (the call wakes that CPU too): median of {} (p10 {:.0}, p90 {:.0})",
                    l.samples, l.p10_ns, l.p90_ns
                ),
                None => "one CPU: the same-CPU figure".into(),
            },
        );
        let wp = &c.wake_preempt;
        row(
            "wake_preempt_ns",
            m.wake_preempt_ns
                .map_or_else(|| "none".to_string(), |v| v.to_string()),
            format!(
                "two threads pinned to CPU {}, taking turns; one is woken from CPU {} while the other has run a set time since it woke: the shortest run at which at least half the wake-ups ran within {:.0} µs (took the CPU) rather than at the running thread's slice end, confirmed at the next longer run (sweep below){}",
                wp.cpu,
                wp.waker_cpu,
                machine::PREEMPT_AT_ONCE_NS / 1e3,
                if wp.points.is_empty() { "; not measured: one CPU" } else { "" }
            ),
        );
        let _ = writeln!(
            s,
            "\nWake-up latency sweep (the waker sleeps {} µs, wakes the waiter and sleeps until it has run; spinners, waker and waiter unpinned):\n\n\
             | spinners per core | spinners | runnable per core | samples | discarded | median ns | p10 ns | p90 ns |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|",
            c.wake.gap_us
        );
        for p in &c.wake.points {
            let l = &p.latency;
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {} | {} | {:.0} | {:.0} | {:.0} |",
                p.spinners_per_core,
                p.spinners,
                p.runnable_per_core,
                l.samples,
                l.discarded,
                l.median_ns,
                l.p10_ns,
                l.p90_ns
            );
        }
        if !c.sleeper.is_empty() {
            let _ = writeln!(
                s,
                "\nA sleeper behind busy threads (10 ms sleeps on CPU {} beside busy threads pinned there; the overshoot includes the wait for the CPU; the simulator lets a woken thread wait at most a time slice, {} ns):\n\n\
                 | busy threads | samples | median ns | p90 ns | max ns |\n\
                 |---:|---:|---:|---:|---:|",
                h.pinned_cpu, m.time_slice_ns
            );
            for p in &c.sleeper {
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {:.0} | {:.0} |",
                    p.busy,
                    p.overshoot.samples,
                    p.overshoot.median_ns,
                    p.overshoot.p90_ns,
                    p.max_ns
                );
            }
        }
        if !wp.points.is_empty() {
            let _ = writeln!(
                s,
                "\nWake-up preemption sweep (the woken thread's latency against how long the running one had run):\n\n\
                 | running thread had run, µs | samples | median ns | p10 ns | p90 ns | took the CPU at once |\n\
                 |---:|---:|---:|---:|---:|---:|"
            );
            for p in &wp.points {
                let l = &p.latency;
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} % |",
                    p.ran_us,
                    l.samples,
                    l.median_ns,
                    l.p10_ns,
                    l.p90_ns,
                    100.0 * p.at_once_share
                );
            }
        }
        s
    }

    /// Runs `turnstile calibrate`.
    pub fn run(a: &CalibrateArgs) -> Result<(), String> {
        if let Some(n) = a.cores {
            if n == 0 || n > MAX_CORES {
                return Err(format!(
                    "--cores must be between 1 and {MAX_CORES} (got {n})"
                ));
            }
        }
        super::check_row_work(a)?;
        // Every place written to is checked before measuring (a minute of it without
        // `--quick`): a directory given as `--out` lost the whole calibration at the end.
        crate::repro_cmd::check_file_writable("--out", &a.out)?;
        if let Some(oltp) = &a.oltp {
            crate::repro_cmd::check_file_writable("--oltp", oltp)?;
            crate::repro_cmd::check_writable("data folder", &a.data_dir)?;
        }
        let cfg = if a.quick {
            CalibrateConfig::quick()
        } else {
            CalibrateConfig::full()
        };
        let mut step = 0;
        let c = machine::run(&cfg, &mut |what| {
            step += 1;
            eprintln!("[{step}/{}] {what}", machine::STEPS);
        })?;
        if let Some(w) = disturbed(&c) {
            eprintln!("{w}");
        }
        let f = file(c, a.cores);
        f.machine.validate()?;
        let text = to_toml(&f)?;
        std::fs::write(&a.out, &text)
            .map_err(|e| format!("cannot write {}: {e}", a.out.display()))?;
        eprintln!("wrote {}", a.out.display());
        if let Some(path) = &a.oltp {
            super::write_oltp_costs(path, &a.data_dir, a.quick, a.row_work_ns)?;
        }
        emit(a.json, &f, table(&f))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::linux::*;
    use serde::Deserialize;
    use turnstile_bench::machine::{Calibration, Latencies, WakePoint};
    use turnstile_sim::machine::MachineConfig;

    /// What the simulator reads: `[machine]`, other tables ignored.
    #[derive(Deserialize)]
    struct Wrapper {
        machine: MachineConfig,
    }

    fn calibration() -> Calibration {
        let mut c = Calibration::default();
        c.host.cpus_available = 2;
        c.host.kernel = "Linux 6.1".into();
        c.context_switch.per_switch.median_ns = 2_345.6;
        c.cache_refill.refill_ns = 0.0;
        c.wake.points = vec![WakePoint {
            latency: Latencies {
                median_ns: 3_000.0,
                ..Latencies::default()
            },
            ..WakePoint::default()
        }];
        c.wake.idle_core.median_ns = 41_000.4;
        c.wake.base_ns = 41_000.4;
        c.wake.slope_ns_per_runnable = 1_234.5;
        c.timer_slack.sleep_1ms.median_ns = 57_000.0;
        c.yield_cost.alone.median_ns = 321.2;
        c.mutex.contended_per_acquisition.median_ns = 80.7;
        c.wake_preempt.min_run_ns = Some(1_500_000.2);
        c.wake.intercept_ns = 3_300.2;
        c.wake_call.same_cpu.median_ns = 1_442.4;
        c.wake_call.other_idle_cpu = Some(Latencies {
            median_ns: 6_199.0,
            ..Default::default()
        });
        c
    }

    #[test]
    fn the_written_toml_reads_back_as_the_same_machine() {
        let f = file(calibration(), None);
        let text = to_toml(&f).unwrap();
        let back: Wrapper = toml::from_str(&text).unwrap();
        assert_eq!(back.machine, f.machine);
        assert!(text.contains("\n[measured"), "{text}");
        let m = &f.machine;
        assert_eq!(m.cores, 2);
        assert_eq!(m.context_switch_ns, 2_346);
        assert_eq!(m.wake_base_ns, 41_000);
        assert_eq!(m.wake_per_runnable_ns, 1_235);
        assert_eq!(m.timer_slack_ns, 57_000);
        assert_eq!(m.yield_ns, 321);
        assert_eq!(m.mutex_handoff_ns, 81);
        assert_eq!(m.wake_preempt_ns, Some(1_500_000));
        assert_eq!((m.wake_call_ns, m.wake_call_idle_ns), (1_442, 6_199));
        assert_eq!(m.wake_busy_ns, Some(3_300));
        assert_eq!(m.time_slice_ns, MachineConfig::default().time_slice_ns);
        assert!(m.validate().is_ok());
    }

    #[test]
    fn cores_flag_overrides_the_cpu_count_a_negative_slope_becomes_zero_and_no_preemption_stays_none(
    ) {
        let mut c = calibration();
        c.wake.slope_ns_per_runnable = -50.0;
        c.cache_refill.refill_ns = f64::NAN;
        c.wake_preempt.min_run_ns = None;
        c.wake_call.other_idle_cpu = None;
        let m = file(c, Some(8)).machine;
        assert_eq!(m.wake_preempt_ns, None);
        // One CPU: the idle-CPU wake is the same-CPU one.
        assert_eq!(m.wake_call_idle_ns, m.wake_call_ns);
        assert_eq!(m.cores, 8);
        assert_eq!(m.wake_per_runnable_ns, 0);
        assert_eq!(m.cache_refill_ns, 0);
    }

    #[test]
    fn a_busy_neighbour_is_flagged_and_a_quiet_machine_is_not() {
        let mut c = calibration();
        c.host.others_cpu_share = 0.01;
        assert!(disturbed(&c).is_none());
        c.host.others_cpu_share = 0.4;
        let w = disturbed(&c).unwrap();
        assert!(w.contains("40 %"), "{w}");
        assert!(table(&file(c, None)).contains(&w));
    }

    #[test]
    fn the_table_lists_every_machine_field() {
        let f = file(calibration(), None);
        let t = table(&f);
        let fields = toml::to_string(&f.machine).unwrap();
        for line in fields.lines() {
            let name = line.split(" = ").next().unwrap();
            assert!(t.contains(&format!("| {name} |")), "{name} missing:\n{t}");
        }
    }
}
