//! The sweep's figures: medians per point, paired ratios between servers, and the report's
//! Markdown.

use super::*;

/// The medians of one server at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointSummary {
    /// The sysbench test.
    pub workload: String,
    /// sysbench threads.
    pub clients: usize,
    /// The server's name.
    pub server: String,
    /// Runs that gave figures, of `runs`.
    pub runs_ok: usize,
    /// Runs at this point.
    pub runs: usize,
    /// Median TPS.
    pub tps: f64,
    /// Median QPS.
    pub qps: f64,
    /// Median p95 latency, ms.
    pub p95_ms: f64,
    /// Median maximum latency, ms.
    pub max_ms: f64,
    /// Median server CPU, per cent of the machine.
    pub server_cpu_pct: f64,
    /// Median sysbench CPU, per cent of the machine.
    pub sysbench_cpu_pct: f64,
    /// Median of the runs' peak thread counts.
    pub threads_peak: f64,
    /// Median thread count after the runs.
    pub threads_after: f64,
    /// Errors and reconnects over every run.
    pub errors: u64,
}

/// TPS ratios at one point: for each pair, the median over repetitions of the ratio within
/// the repetition (the two runs seconds apart); `None` where a pair did not run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatioRow {
    /// The sysbench test.
    pub workload: String,
    /// sysbench threads.
    pub clients: usize,
    /// turnstile pool-of-threads ÷ MariaDB pool-of-threads.
    pub pool_vs_mariadb_pool: Option<f64>,
    /// turnstile pool-of-threads ÷ turnstile one-thread-per-connection.
    pub pool_vs_one_thread: Option<f64>,
    /// turnstile one-thread-per-connection ÷ MariaDB one-thread-per-connection.
    pub one_thread_vs_mariadb_one_thread: Option<f64>,
}

/// Medians per workload × clients × server, in the configuration's order.
pub fn summarize(cfg: &ServerBenchConfig, runs: &[ServerRun]) -> Vec<PointSummary> {
    let mut out = Vec::new();
    for w in &cfg.workloads {
        for &c in &cfg.clients {
            for s in &cfg.servers {
                let name = s.name();
                let here: Vec<&ServerRun> = runs
                    .iter()
                    .filter(|r| &r.workload == w && r.clients == c && r.server == name)
                    .collect();
                if here.is_empty() {
                    continue;
                }
                let ok: Vec<&&ServerRun> = here.iter().filter(|r| r.error.is_none()).collect();
                let med = |f: fn(&ServerRun) -> f64| {
                    median(&ok.iter().map(|r| f(r)).collect::<Vec<f64>>())
                };
                out.push(PointSummary {
                    workload: w.clone(),
                    clients: c,
                    server: name,
                    runs_ok: ok.len(),
                    runs: here.len(),
                    tps: med(|r| r.tps),
                    qps: med(|r| r.qps),
                    p95_ms: med(|r| r.p95_ms),
                    max_ms: med(|r| r.max_ms),
                    server_cpu_pct: med(|r| r.server_cpu_pct),
                    sysbench_cpu_pct: med(|r| r.sysbench_cpu_pct),
                    threads_peak: med(|r| r.threads_peak as f64),
                    threads_after: med(|r| r.threads_after as f64),
                    errors: here.iter().map(|r| r.errors).sum(),
                });
            }
        }
    }
    out
}

/// The median over repetitions of `a`'s TPS ÷ `b`'s, each repetition where both gave figures.
pub(super) fn paired_ratio(
    runs: &[ServerRun],
    w: &str,
    c: usize,
    a: ServerKind,
    b: ServerKind,
) -> Option<f64> {
    let (a, b) = (a.name(), b.name());
    let find = |name: &str, rep: usize| {
        runs.iter().find(|r| {
            r.workload == w
                && r.clients == c
                && r.server == name
                && r.rep == rep
                && r.error.is_none()
        })
    };
    let ratios: Vec<f64> = runs
        .iter()
        .filter(|r| r.workload == w && r.clients == c && r.server == a && r.error.is_none())
        .filter_map(|x| {
            let y = find(&b, x.rep)?;
            (y.tps > 0.0).then(|| x.tps / y.tps)
        })
        .collect();
    (!ratios.is_empty()).then(|| median(&ratios))
}

/// The TPS ratios per workload × clients.
pub fn ratios(cfg: &ServerBenchConfig, runs: &[ServerRun]) -> Vec<RatioRow> {
    use Handling::*;
    use Program::*;
    let k = ServerKind::new;
    let mut out = Vec::new();
    for w in &cfg.workloads {
        for &c in &cfg.clients {
            let pair = |a, b| paired_ratio(runs, w, c, a, b);
            out.push(RatioRow {
                workload: w.clone(),
                clients: c,
                pool_vs_mariadb_pool: pair(k(Turnstile, PoolOfThreads), k(Mariadb, PoolOfThreads)),
                pool_vs_one_thread: pair(
                    k(Turnstile, PoolOfThreads),
                    k(Turnstile, OneThreadPerConnection),
                ),
                one_thread_vs_mariadb_one_thread: pair(
                    k(Turnstile, OneThreadPerConnection),
                    k(Mariadb, OneThreadPerConnection),
                ),
            });
        }
    }
    out
}

/// The sweep's results.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    /// `sysbench --version`.
    pub sysbench: String,
    /// Logical CPUs of the machine (servers and sysbench share them).
    pub cpus: usize,
    /// What ran.
    pub config: ServerBenchConfig,
    /// Rows in `sbtest1`.
    pub table_size: u32,
    /// Rows per range query (`--range-size`).
    pub range_size: u32,
    /// How each server was started and what it reported.
    pub servers: Vec<ServerSetup>,
    /// Servers left out, and why.
    pub skipped: Vec<String>,
    /// Every run, in the order they ran.
    pub runs: Vec<ServerRun>,
    /// Medians per workload × clients × server.
    pub points: Vec<PointSummary>,
    /// TPS ratios per workload × clients.
    pub ratios: Vec<RatioRow>,
    /// Seconds the whole command took.
    pub elapsed_s: f64,
}

/// `1h02m`, `12m30s`, `45s`.
pub(super) fn human(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// The report as Markdown: settings, then per workload a table of medians and one of ratios.
pub fn markdown(r: &ServerReport) -> String {
    use std::fmt::Write;
    let c = &r.config;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## Servers under sysbench: turnstile serve and MariaDB, by thread handling\n\n\
         `{}` over TCP on 127.0.0.1, table `sbtest1` of {} rows (range size {}), {} s per run, \
         {} repetition(s); every figure is the median over them. Each point runs the servers \
         back to back, the order reversed on odd repetitions. The servers and sysbench share \
         this machine's {} CPUs: *server CPU %* and *sysbench CPU %* are shares of all of them \
         (100 % = every CPU busy). *threads peak*: the server's most threads, sampled every \
         200 ms during the run; *threads after*: once sysbench has exited. *errors*: sysbench's \
         ignored errors and reconnects over every run. After its start each server ran every \
         workload for {} s with {} clients, unmeasured. The run took {}.\n",
        r.sysbench,
        r.table_size,
        r.range_size,
        c.seconds,
        c.reps,
        r.cpus,
        WARM_UP.1,
        WARM_UP.0,
        human(r.elapsed_s)
    );
    for line in &r.skipped {
        let _ = writeln!(s, "Skipped: {line}\n");
    }
    s.push_str("### Server settings\n\n| server | settings | started in |\n|---|---|---:|\n");
    for st in &r.servers {
        let set: Vec<String> = st
            .settings
            .iter()
            .map(|x| format!("{}={}", x.name, x.value))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} s |",
            st.server.name(),
            set.join(", ").replace('|', "\\|"),
            st.start_s
        );
    }
    let opt = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
    let num = |v: f64, digits: usize| {
        if v.is_nan() {
            "–".to_string()
        } else {
            format!("{v:.digits$}")
        }
    };
    for w in &c.workloads {
        let _ = writeln!(
            s,
            "\n### {w}\n\n\
             | clients | server | TPS | p95 ms | max ms | server CPU % | sysbench CPU % | threads peak | threads after | errors | runs |\n\
             |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for p in r.points.iter().filter(|p| &p.workload == w) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} |",
                p.clients,
                p.server,
                num(p.tps, 0),
                num(p.p95_ms, 2),
                num(p.max_ms, 1),
                num(p.server_cpu_pct, 0),
                num(p.sysbench_cpu_pct, 0),
                num(p.threads_peak, 0),
                num(p.threads_after, 0),
                p.errors,
                p.runs_ok,
                p.runs
            );
        }
        let _ = writeln!(
            s,
            "\nTPS ratios (the median of each repetition's ratio; above 1: the first is faster):\n\n\
             | clients | turnstile pool ÷ MariaDB pool | turnstile pool ÷ turnstile one-thread-per-connection | turnstile one-thread ÷ MariaDB one-thread |\n\
             |---:|---:|---:|---:|"
        );
        for x in r.ratios.iter().filter(|x| &x.workload == w) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                x.clients,
                opt(x.pool_vs_mariadb_pool),
                opt(x.pool_vs_one_thread),
                opt(x.one_thread_vs_mariadb_one_thread)
            );
        }
    }
    s
}
