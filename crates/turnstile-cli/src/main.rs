//! `turnstile`: benchmarks and reproductions for the turnstile gate.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use turnstile_bench::gate::{self as gate_bench, GateBenchConfig, GateBenchReport, Variant};
use turnstile_bench::mutex::{self as mutex_bench, LockVariant, MutexBenchConfig};

mod auto_cmd;
mod calibrate_cmd;
mod metrics_file;
mod repro_cmd;
mod serve_cmd;
mod sim_cmd;
mod table;

#[derive(Parser)]
#[command(
    name = "turnstile",
    version,
    about = "Admission control and locking for database engines: benchmarks and reproductions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(Bench),
    /// Reproduce the seed experiments on the embedded engine.
    #[command(subcommand)]
    Repro(repro_cmd::Repro),
    /// Serve the engine over the MySQL protocol (TCP and a Unix socket; a password with
    /// --password or TURNSTILE_PASSWORD, else loopback only), one OS thread per connection or
    /// a pool of threads the gate governs, until Ctrl-C.
    Serve(serve_cmd::ServeArgs),
    /// Simulate an N-core machine running the same gate policies.
    Sim(sim_cmd::SimArgs),
    /// Measure the host's parameters for the simulator (context switch, cache refill,
    /// wake-up latency and preemption, a sleeper behind busy threads, the waker's call, timer
    /// slack, yield, mutex hand-off) and write them as TOML.
    Calibrate(calibrate_cmd::CalibrateArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// The gate: ticket re-entry and uncontended admission costs, and a synthetic load over
    /// 1…1024 threads, for every policy and the mutex-condvar baseline.
    Gate(GateArgs),
    /// Mutexes (innotsim, seed 002): threads × mutexes × hold time for the turnstile lock, the
    /// InnoDB 5.6 mutex, spin-limited variants, std, parking_lot and pthread.
    Mutex(MutexArgs),
    /// `auto`, untuned, against the best fixed limit (classic and polling, 1…256) over a
    /// grid of workloads: statement length, undeclared and declared waits, 2…1024 threads, a
    /// competing process, a step in load. Table, chart, JSON.
    Auto(auto_cmd::AutoArgs),
}

#[derive(Args)]
struct MutexArgs {
    /// Under a minute: threads 1,4,16,64,256; mutexes 1,4; hold 0,1000 ns; 50 ms per point.
    #[arg(long)]
    quick: bool,
    /// Print the report as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
    /// Variants (comma-separated): turnstile, innodb, spin-global, spin-per-mutex, std,
    /// parking_lot, pthread, pthread-adaptive. Default: all.
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Thread counts (comma-separated). Default 1,2,4,…,1024.
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Mutex counts (comma-separated). Default 1,4,16.
    #[arg(long, value_delimiter = ',')]
    mutexes: Option<Vec<usize>>,
    /// Hold times in ns of work inside the lock (comma-separated). Default 0,1000,4000.
    #[arg(long, value_delimiter = ',')]
    hold_ns: Option<Vec<u64>>,
    /// Measured time per point, milliseconds.
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Runs per point (interleaved across variants); each point reports its median run.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Folder for the SVG charts (one per hold time and mutex count) and `results.json`.
    #[arg(long, default_value = "reports/bench-mutex")]
    out: std::path::PathBuf,
}

impl MutexArgs {
    fn config(&self) -> Result<MutexBenchConfig, String> {
        let mut c = if self.quick {
            MutexBenchConfig::quick()
        } else {
            MutexBenchConfig::full()
        };
        if let Some(v) = &self.variants {
            c.variants = v
                .iter()
                .map(|s| LockVariant::parse(s))
                .collect::<Result<_, _>>()?;
        }
        if let Some(t) = &self.threads {
            c.threads = t.clone();
        }
        if let Some(m) = &self.mutexes {
            c.mutexes = m.clone();
        }
        if let Some(h) = &self.hold_ns {
            c.hold_ns = h.clone();
        }
        if let Some(ms) = self.duration_ms {
            c.duration = Duration::from_millis(ms);
        }
        c.repeat = self.repeat;
        c.validate()?;
        Ok(c)
    }
}

#[derive(Args)]
struct GateArgs {
    /// Under 30 s: threads 1,4,16,64, short points, 5 repetitions.
    #[arg(long)]
    quick: bool,
    /// Print the report as JSON on stdout instead of tables.
    #[arg(long)]
    json: bool,
    /// Policies to run (comma-separated): classic, polling, timer, flifo, unlimited, auto,
    /// mutex-condvar. Default: all.
    #[arg(long, value_delimiter = ',')]
    policies: Option<Vec<String>>,
    /// Thread counts for the load (comma-separated). Default 1,2,4,…,1024 (quick: 1,4,16,64).
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Threads allowed inside at once (innodb_thread_concurrency), 0..=1000.
    #[arg(long)]
    limit: Option<u32>,
    /// Tickets per admission (innodb_concurrency_tickets), ≥ 1.
    #[arg(long)]
    tickets: Option<u32>,
    /// Calls into the engine per statement.
    #[arg(long)]
    calls: Option<u32>,
    /// CPU work per call, microseconds.
    #[arg(long)]
    work_us: Option<f64>,
    /// A blocking sleep per call inside the slot, declared to nobody, microseconds (0: none):
    /// a load whose best fixed limit is far above the CPU count.
    #[arg(long)]
    block_us: Option<u64>,
    /// The gate's sleep delay (innodb_thread_sleep_delay), microseconds, 0..=1000000.
    #[arg(long)]
    sleep_delay_us: Option<u64>,
    /// Measured time per load point, milliseconds (after a warm-up of a quarter of it, not
    /// counted).
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Repetitions of each fast-path measurement (the median is reported).
    #[arg(long)]
    reps: Option<usize>,
    /// Tasks in the async line's load (the async session beside tokio's Semaphore, on a
    /// multi-thread runtime with one worker per CPU); 0 skips the async line. Default 64.
    #[arg(long)]
    async_tasks: Option<usize>,
    /// Every second, write the Prometheus text of the gate(s) running now to this file, each
    /// labelled `gate="<run>/<policy>/<setting>"` (written to PATH.tmp, then renamed, so a reader
    /// never sees half a file); between runs and at the end it holds the last gate's final
    /// figures. Example: `watch cat PATH`.
    #[arg(long, value_name = "PATH")]
    metrics_file: Option<std::path::PathBuf>,
}

impl GateArgs {
    fn config(&self) -> Result<GateBenchConfig, String> {
        let mut c = if self.quick {
            GateBenchConfig::quick()
        } else {
            GateBenchConfig::full()
        };
        if let Some(p) = &self.policies {
            c.variants = p
                .iter()
                .map(|s| Variant::parse(s))
                .collect::<Result<_, _>>()?;
        }
        if let Some(t) = &self.threads {
            c.threads = t.clone();
        }
        c.limit = self.limit.unwrap_or(c.limit);
        c.tickets = self.tickets.unwrap_or(c.tickets);
        c.calls = self.calls.unwrap_or(c.calls);
        c.work_us = self.work_us.unwrap_or(c.work_us);
        c.block_us = self.block_us.unwrap_or(c.block_us);
        c.sleep_delay_us = self.sleep_delay_us.unwrap_or(c.sleep_delay_us);
        if let Some(ms) = self.duration_ms {
            c.duration = Duration::from_millis(ms);
        }
        c.reps = self.reps.unwrap_or(c.reps);
        c.async_tasks = self.async_tasks.unwrap_or(c.async_tasks);
        c.validate()?;
        Ok(c)
    }
}

/// Progress on stderr: a bar on a terminal, plain lines otherwise (CI logs).
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    done: usize,
    last_load_pct: u64,
}

impl Progress {
    pub(crate) fn new(total: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
                    .expect("static template"),
            );
            b
        });
        Progress {
            bar,
            total,
            done: 0,
            last_load_pct: 0,
        }
    }

    /// Rows loaded into a table being built.
    fn load(&mut self, done: u64, total: u64) {
        let pct = 100 * done / total.max(1);
        match &self.bar {
            Some(b) => b.set_message(format!("loading rows: {done}/{total} ({pct}%)")),
            None if pct >= self.last_load_pct + 10 || done == total => {
                eprintln!("      loading rows: {done}/{total} ({pct}%)");
                self.last_load_pct = pct;
            }
            None => {}
        }
        if done == total {
            self.last_load_pct = 0;
        }
    }

    pub(crate) fn step(&mut self, what: &str) {
        match &self.bar {
            Some(b) => {
                if self.done > 0 {
                    b.inc(1);
                }
                b.set_message(what.to_string());
            }
            None => eprintln!("[{}/{}] {what}", self.done + 1, self.total),
        }
        self.done += 1;
    }

    pub(crate) fn finish(self) {
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// Prints `value` as JSON, or `text` for people, on stdout.
pub(crate) fn emit<T: serde::Serialize>(json: bool, value: &T, text: String) -> Result<(), String> {
    let s = if json {
        serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n"
    } else {
        text
    };
    std::io::stdout()
        .lock()
        .write_all(s.as_bytes())
        .map_err(|e| e.to_string())
}

fn bench_gate(args: &GateArgs) -> Result<(), String> {
    let cfg = args.config()?;
    let _metrics = metrics_file::start(args.metrics_file.as_deref())?;
    let async_steps = if cfg.async_tasks > 0 { 2 } else { 0 };
    let mut progress = Progress::new(cfg.variants.len() * (1 + cfg.threads.len()) + async_steps);
    let report = gate_bench::run(&cfg, &mut |s| progress.step(s));
    progress.finish();
    let report: GateBenchReport = report?;
    emit(args.json, &report, table::gate_report(&report))
}

fn bench_mutex(args: &MutexArgs) -> Result<(), String> {
    let cfg = args.config()?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create chart folder {}: {e}", args.out.display()))?;
    let mut progress = Progress::new(cfg.runs());
    let report = mutex_bench::run(&cfg, &mut |s| progress.step(s));
    progress.finish();
    let report = report?;
    let charts = table::mutex_charts(&report, &args.out)?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())? + "\n";
    let saved = args.out.join("results.json");
    std::fs::write(&saved, &json).map_err(|e| format!("cannot write {}: {e}", saved.display()))?;
    eprintln!("wrote {} and {}", saved.display(), charts.join(", "));
    emit(args.json, &report, table::mutex_report(&report))
}

fn main() -> ExitCode {
    let cli = Cli::parse(); // clap exits with code 2 on bad arguments
                            // `repro` and `serve` check the stop request and end cleanly; the others end at once.
    repro_cmd::install_ctrlc(matches!(cli.command, Command::Repro(_) | Command::Serve(_)));
    let result = match &cli.command {
        Command::Repro(r) => repro_cmd::run(r),
        Command::Sim(a) => sim_cmd::run(a),
        Command::Serve(a) => serve_cmd::run(a),
        Command::Calibrate(a) => calibrate_cmd::run(a),
        Command::Bench(Bench::Gate(args)) => bench_gate(args),
        Command::Bench(Bench::Mutex(args)) => bench_mutex(args),
        Command::Bench(Bench::Auto(args)) => auto_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.starts_with("interrupted") => {
            eprintln!("{e}");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
