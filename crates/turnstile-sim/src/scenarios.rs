//! The scenarios of `turnstile sim`: the seeds at their own scale, and the check against exact
//! Mean Value Analysis. Every parameter has a default with its reason; a TOML file can override
//! any of them (`--config`).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use turnstile::{GateConfig, Policy};

use crate::engine::{CensusMean, Sim};
use crate::machine::MachineConfig;
use crate::workload::{inserter, querier, CentralServer, Oltp, OltpCosts, RowSend, Scan};

const NS: f64 = 1e9;

fn gate(policy: Policy, limit: u32, tickets: u32, sleep_us: u64) -> GateConfig {
    GateConfig::new(policy).innodb_settings(limit, tickets, Duration::from_micros(sleep_us))
}

/// Speed of a scenario's simulation.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Speed {
    /// Events simulated.
    pub events: u64,
    /// Events per second of wall time.
    pub events_per_s: f64,
    /// Wall time, s.
    pub wall_s: f64,
}

struct Clock {
    start: Instant,
    events: u64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            start: Instant::now(),
            events: 0,
        }
    }
    fn add(&mut self, sim: &Sim) {
        self.events += sim.events;
    }
    fn speed(&self) -> Speed {
        let wall = self.start.elapsed().as_secs_f64();
        Speed {
            events: self.events,
            events_per_s: self.events as f64 / wall.max(1e-9),
            wall_s: wall,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// MVA check

/// Exact MVA for a closed network of queueing stations with demands `d` (s) and think time `z`
/// (s): throughput and response time at population `n`.
pub fn mva(d: &[f64], z: f64, n: usize) -> (f64, f64) {
    let mut q = vec![0.0; d.len()];
    let (mut x, mut r_total) = (0.0, 0.0);
    for pop in 1..=n {
        let r: Vec<f64> = d.iter().zip(&q).map(|(dk, qk)| dk * (1.0 + qk)).collect();
        r_total = r.iter().sum();
        x = pop as f64 / (z + r_total);
        for (qk, rk) in q.iter_mut().zip(&r) {
            *qk = x * rk;
        }
    }
    (x, r_total)
}

/// Settings of the MVA check.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MvaParams {
    /// Populations.
    pub n: Vec<usize>,
    /// Mean CPU demand, ms (exponential; one core, run to completion: an M/M/1 FCFS station).
    pub cpu_ms: f64,
    /// Mean disk demand, ms (exponential, FCFS).
    pub disk_ms: f64,
    /// Mean think time, ms.
    pub think_ms: f64,
    /// Completions to measure per population (after as many again of warm-up).
    pub completions: u64,
    /// Seed.
    pub seed: u64,
}

impl Default for MvaParams {
    fn default() -> Self {
        MvaParams {
            n: vec![1, 2, 4, 8, 16, 32, 64, 128, 256],
            cpu_ms: 1.0,
            disk_ms: 1.5,
            think_ms: 5.0,
            completions: 200_000,
            seed: 1,
        }
    }
}

/// One population of the MVA check.
#[derive(Debug, Clone, Serialize)]
pub struct MvaPoint {
    /// Population.
    pub n: usize,
    /// Simulated throughput, per s.
    pub sim_throughput: f64,
    /// MVA throughput, per s.
    pub mva_throughput: f64,
    /// Relative error of throughput.
    pub rel_err: f64,
    /// Simulated response time (CPU + disk), ms.
    pub sim_response_ms: f64,
    /// MVA response time, ms.
    pub mva_response_ms: f64,
    /// Relative error of response time.
    pub response_rel_err: f64,
    /// Little's law: mean number at CPU+disk over throughput × response time, minus 1.
    pub little_err: f64,
}

/// The MVA check's report.
#[derive(Debug, Clone, Serialize)]
pub struct MvaReport {
    /// Settings.
    pub params: MvaParams,
    /// Points.
    pub points: Vec<MvaPoint>,
    /// Speed.
    #[serde(flatten)]
    pub speed: Speed,
}

/// Runs the MVA check: every overhead at zero, one core, no gate.
pub fn mva_check(p: &MvaParams) -> Result<MvaReport, String> {
    check_counts("mva-check", "populations", &p.n, MAX_SIM_THREADS)?;
    if p.completions == 0 || p.completions > 100_000_000 {
        return Err("mva-check: completions must be 1 to 100,000,000".into());
    }
    check_cost("mva-check", "cpu_ms", p.cpu_ms, 1e6, true)?;
    check_cost("mva-check", "disk_ms", p.disk_ms, 1e6, false)?;
    check_cost("mva-check", "think_ms", p.think_ms, 1e6, false)?;
    let mut clock = Clock::new();
    let mut points = Vec::new();
    for &n in &p.n {
        let mut sim = Sim::new(
            MachineConfig::ideal(1),
            GateConfig::new(Policy::Unlimited),
            p.seed ^ n as u64,
        )?;
        for _ in 0..n {
            sim.spawn(Box::new(CentralServer::new(
                p.think_ms * 1e6,
                p.cpu_ms * 1e6,
                p.disk_ms * 1e6,
            )));
        }
        let (x_mva, r_mva) = mva(&[p.cpu_ms / 1e3, p.disk_ms / 1e3], p.think_ms / 1e3, n);
        // Run long enough for the wanted completions at the predicted rate.
        let span = (p.completions as f64 / x_mva * NS) as u64;
        sim.run_until(span);
        sim.reset_stats();
        sim.run_until(2 * span);
        let k = sim.kinds.first().cloned().unwrap_or_default();
        let secs = sim.measured_secs();
        let x = k.count as f64 / secs;
        let r = k.response_sum / k.count.max(1) as f64 / NS;
        let l = sim.mean_in_system();
        clock.add(&sim);
        points.push(MvaPoint {
            n,
            sim_throughput: x,
            mva_throughput: x_mva,
            rel_err: (x - x_mva) / x_mva,
            sim_response_ms: r * 1e3,
            mva_response_ms: r_mva * 1e3,
            response_rel_err: (r - r_mva) / r_mva,
            little_err: l / (x * r) - 1.0,
        });
    }
    Ok(MvaReport {
        params: p.clone(),
        points,
        speed: clock.speed(),
    })
}

// ---------------------------------------------------------------------------------------------
// Seed 000

/// A scenario's `[machine]` table read over the scenario's own machine `base`: the fields it
/// leaves out keep `base`'s values, not `MachineConfig`'s own defaults (8 cores), so that a
/// table naming one field does not move a 4-core scenario to 8 cores.
fn machine_over<'de, D: serde::Deserializer<'de>>(
    base: MachineConfig,
    d: D,
) -> Result<MachineConfig, D::Error> {
    use serde::de::Error;
    let given = toml::Table::deserialize(d)?;
    let mut t = toml::Table::try_from(&base).map_err(D::Error::custom)?;
    t.extend(given);
    t.try_into().map_err(D::Error::custom)
}

fn tickets_machine<'de, D: serde::Deserializer<'de>>(d: D) -> Result<MachineConfig, D::Error> {
    machine_over(TicketsParams::default().machine, d)
}

fn pileup_machine<'de, D: serde::Deserializer<'de>>(d: D) -> Result<MachineConfig, D::Error> {
    machine_over(PileupParams::default().machine, d)
}

/// Settings of the tickets scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TicketsParams {
    /// The machine (default: 4 cores, default overheads). A `[machine]` table given changes
    /// only the fields it names.
    #[serde(deserialize_with = "tickets_machine")]
    pub machine: MachineConfig,
    /// Rows per scan (the seed's table).
    pub rows: u64,
    /// CPU per row, ns: 16.2 s / 9,028,285 rows = 1794 ns (the seed's scan alone).
    pub row_ns: u64,
    /// Ticket settings.
    pub tickets: Vec<u32>,
    /// Policy (the seed ran MySQL 5.5: classic).
    #[serde(with = "policy_name")]
    pub policy: Policy,
    /// Sleep delay, µs (default 10000).
    pub sleep_delay_us: u64,
    /// Wake-up base latencies to sweep, µs: does any plausible one produce the seed's 95 s?
    pub wake_sweep_us: Vec<u64>,
    /// Seed.
    pub seed: u64,
}

impl Default for TicketsParams {
    fn default() -> Self {
        TicketsParams {
            machine: MachineConfig {
                cores: 4,
                ..MachineConfig::default()
            },
            rows: 9_028_285,
            row_ns: 1794,
            tickets: vec![500, 10_000_000],
            policy: Policy::Classic,
            sleep_delay_us: 10_000,
            wake_sweep_us: vec![20, 200, 1000, 3500],
            seed: 1,
        }
    }
}

mod policy_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use turnstile::Policy;

    pub fn serialize<S: Serializer>(p: &Policy, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(p.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Policy, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One tickets run.
#[derive(Debug, Clone, Serialize)]
pub struct TicketsRun {
    /// Policy.
    pub policy: &'static str,
    /// Tickets; `None` for `auto` (its time quantum instead, its limit fixed at 1).
    pub tickets: Option<u32>,
    /// Wake-up base latency used, µs.
    pub wake_base_us: u64,
    /// Rows per scan.
    pub rows: u64,
    /// Scan alone, s.
    pub alone_s: f64,
    /// The two concurrent scans, s.
    pub concurrent_s: Vec<f64>,
    /// Admissions per concurrent scan.
    pub handoffs: f64,
    /// Sleeps before queueing, over both scans.
    pub sleeps: u64,
    /// Queue waits over both scans.
    pub queue_waits: u64,
    /// Mean hand-off latency, µs.
    pub wake_latency_us: f64,
}

/// The tickets report.
#[derive(Debug, Clone, Serialize)]
pub struct TicketsReport {
    /// Settings.
    pub params: TicketsParams,
    /// Runs.
    pub runs: Vec<TicketsRun>,
    /// Speed.
    #[serde(flatten)]
    pub speed: Speed,
}

fn scans(
    p: &TicketsParams,
    m: &MachineConfig,
    tickets: u32,
    n: usize,
) -> Result<(Vec<f64>, Sim), String> {
    let mut g = gate(p.policy, 1, tickets, p.sleep_delay_us);
    if p.policy == Policy::Auto {
        // The scenario's limit of 1, not the cores `auto` would start at: the scans take
        // turns by its quantum, as `repro tickets` runs it.
        g = g.adaptive_limit(false);
    }
    let mut sim = Sim::new(m.clone(), g, p.seed)?;
    for _ in 0..n {
        sim.spawn(Box::new(Scan::new(p.rows, p.row_ns)));
    }
    let limit = (p.rows * p.row_ns) * 20 + 60 * 1_000_000_000;
    sim.run_to_completion(limit);
    if !sim.all_halted() {
        return Err(format!(
            "tickets: the scans did not finish within {} s",
            limit / 1_000_000_000
        ));
    }
    let done = sim.done_at.iter().map(|&t| t as f64 / NS).collect();
    Ok((done, sim))
}

/// The most rows a simulated scan may have: `repro tickets`' seed table is 9 M.
const MAX_SCAN_ROWS: u64 = 1_000_000_000;

fn check_tickets(p: &TicketsParams) -> Result<(), String> {
    if p.rows == 0 || p.rows > MAX_SCAN_ROWS {
        return Err(format!(
            "tickets: rows = {} must be 1 to {MAX_SCAN_ROWS}",
            p.rows
        ));
    }
    check_cost("tickets", "row_ns", p.row_ns as f64, 1.0, true)?;
    // The run's own bound (20 × the scan's CPU, see `scans`) must fit the clock.
    if (p.rows as f64) * (p.row_ns as f64) * 20.0 > 1e18 {
        return Err("tickets: rows × row_ns is too long a scan to simulate".into());
    }
    if p.tickets.is_empty() || p.tickets.contains(&0) {
        return Err("tickets: tickets must list positive counts".into());
    }
    if p.wake_sweep_us.is_empty() || p.wake_sweep_us.iter().any(|&w| w > 10_000_000) {
        return Err("tickets: wake_sweep_us must list wake-up latencies of at most 10 s".into());
    }
    check_cost(
        "tickets",
        "sleep_delay_us",
        p.sleep_delay_us as f64,
        1e3,
        false,
    )
}

/// Runs seed 000 at its scale.
pub fn tickets(p: &TicketsParams) -> Result<TicketsReport, String> {
    check_tickets(p)?;
    let mut clock = Clock::new();
    let mut runs = Vec::new();
    // `auto` runs once per wake-up latency: it has a quantum, not tickets.
    let settings: Vec<Option<u32>> = if p.policy == Policy::Auto {
        vec![None]
    } else {
        p.tickets.iter().copied().map(Some).collect()
    };
    for &wake in &p.wake_sweep_us {
        let m = MachineConfig {
            wake_base_ns: wake * 1000,
            ..p.machine.clone()
        };
        for &setting in &settings {
            let t = setting.unwrap_or(1);
            let (alone, s1) = scans(p, &m, t, 1)?;
            clock.add(&s1);
            let (conc, s2) = scans(p, &m, t, 2)?;
            clock.add(&s2);
            let g = s2.gate_counts;
            runs.push(TicketsRun {
                policy: p.policy.name(),
                tickets: setting,
                wake_base_us: wake,
                rows: p.rows,
                alone_s: alone[0],
                concurrent_s: conc,
                handoffs: g.admissions as f64 / 2.0,
                sleeps: g.sleeps,
                queue_waits: g.queue_waits,
                wake_latency_us: g.handoff_latency_sum / g.handoff_resumes.max(1) as f64 / 1e3,
            });
        }
    }
    Ok(TicketsReport {
        params: p.clone(),
        runs,
        speed: clock.speed(),
    })
}

// ---------------------------------------------------------------------------------------------
// Seed 001

/// One gate configuration of the OLTP sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OltpSetting {
    /// Label.
    pub name: String,
    /// Policy.
    #[serde(with = "policy_name")]
    pub policy: Policy,
    /// Limit.
    pub limit: u32,
    /// Tickets.
    pub tickets: u32,
    /// Sleep delay, µs.
    pub sleep_delay_us: u64,
    /// What the server layer does when it sends a row (default `force-exit`: MySQL 5.0/5.1,
    /// the server of seeds 001 and 003).
    #[serde(default)]
    pub row_send: RowSend,
    /// Whether the gate decides under a mutex of its own; default: the policy's history
    /// (`classic` and `flifo` had InnoDB's `srv_conc_mutex`; the others have none). For
    /// ablations.
    #[serde(default)]
    pub gate_mutex: Option<bool>,
    /// `auto` only: keep the limit where it is set (`auto@L`) instead of starting at the
    /// machine's cores and adapting. The sweep of fixed limits `auto`'s own is judged against.
    #[serde(default)]
    pub fixed_limit: bool,
}

impl OltpSetting {
    /// A setting named after its policy.
    pub fn new(policy: Policy, limit: u32, tickets: u32, sleep_delay_us: u64) -> OltpSetting {
        OltpSetting {
            name: policy.name().into(),
            policy,
            limit,
            tickets,
            sleep_delay_us,
            row_send: RowSend::ForceExit,
            gate_mutex: None,
            fixed_limit: false,
        }
    }

    /// Seed 001's FIFO: MySQL 5.0.84's defaults with `innodb_thread_concurrency=32`: 500
    /// tickets (`innodb_concurrency_tickets`' default before 5.5), 10 ms sleep delay.
    pub fn seed_fifo() -> OltpSetting {
        OltpSetting::new(Policy::Classic, 32, 500, 10_000)
    }

    /// Seed 001's FLIFO: limit 16, 500 tickets, sleep delay 0.
    pub fn seed_flifo() -> OltpSetting {
        OltpSetting::new(Policy::Flifo, 16, 500, 0)
    }

    /// `auto` with its limit fixed at `limit` (named `auto@L`, as in `repro oltp`).
    pub fn auto_fixed(limit: u32) -> OltpSetting {
        OltpSetting {
            name: format!("auto@{limit}"),
            limit,
            fixed_limit: true,
            // Tickets and sleep delay are unused by `auto`; classic's, as for `auto`.
            ..OltpSetting::new(Policy::Auto, limit, 500, 10_000)
        }
    }

    /// The settings `--policies` can name: the seed's two, and `polling`, `timer` and
    /// `unlimited` run with classic's limit, tickets and sleep delay (as `repro oltp` does);
    /// `auto`, and `auto@L` for `auto` with its limit fixed at L.
    pub fn by_name(name: &str) -> Result<OltpSetting, String> {
        if let Some(l) = name.strip_prefix("auto@") {
            return match l.parse::<u32>() {
                Ok(l) if (1..=turnstile::MAX_LIMIT).contains(&l) => Ok(OltpSetting::auto_fixed(l)),
                _ => Err(format!(
                    "setting `{name}`: the fixed limit after `auto@` must be a whole number \
                     from 1 to {}",
                    turnstile::MAX_LIMIT
                )),
            };
        }
        let fifo = OltpSetting::seed_fifo();
        let with = |policy: Policy| OltpSetting {
            name: policy.name().into(),
            policy,
            ..fifo.clone()
        };
        Ok(match name {
            "classic" => fifo,
            "flifo" => OltpSetting::seed_flifo(),
            "polling" => with(Policy::Polling),
            "timer" => with(Policy::Timer),
            "unlimited" => OltpSetting {
                limit: 0,
                ..with(Policy::Unlimited)
            },
            // Untuned: the simulator starts it at the machine's cores; tickets and sleep
            // delay are unused.
            "auto" => with(Policy::Auto),
            _ => {
                return Err(format!(
                    "unknown setting `{name}`: classic, flifo, polling, timer, unlimited, auto \
                     or auto@L (auto with its limit fixed at L)"
                ))
            }
        })
    }
}

/// Settings of the OLTP scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OltpParams {
    /// The machine (default: the seed's 8 cores, default overheads).
    pub machine: MachineConfig,
    /// Client thread counts (the seed's eleven, 1…1024).
    pub threads: Vec<usize>,
    /// Simulated seconds per point (the seed ran 180; 20 gives every client at 1024 threads
    /// several completions, and a per-row forced exit makes each simulated second costly).
    pub seconds: f64,
    /// Warm-up seconds per point (not measured).
    pub warmup_seconds: f64,
    /// CPU per point select, µs.
    pub point_us: f64,
    /// CPU per range row, µs. With the defaults a transaction costs ~10.8 ms of CPU, so 8
    /// cores peak near the seed's ~720 TPS.
    pub row_us: f64,
    /// Rows per range (the seed's 1000).
    pub range: u64,
    /// CPU of one sort of a range's rows, µs (outside the gate).
    pub sort_us: f64,
    /// CPU of one gate call that reaches the policy (an admission attempt or an exit that
    /// leaves), µs. Default 0: at the seed's scale `row_us` is derived from the seed's peak
    /// TPS and already holds it; for the real engine `turnstile calibrate` measures it.
    pub gate_call_us: f64,
    /// This workload's own CPU loss per switch between two client threads, µs, when measured
    /// (`turnstile calibrate --oltp`: two engine clients pinned to one CPU switching after
    /// every row, against one alone). Its part above the machine's two-thread switch
    /// (`context_switch_ns`) replaces the machine's `cache_refill_ns` (a generic cache-sized
    /// working set) as this workload's refill; the direct part still grows with the threads
    /// alive (`switch_by_threads`).
    pub switch_us: Option<f64>,
    /// The gate settings (the seed's FIFO and FLIFO).
    pub settings: Vec<OltpSetting>,
    /// Seed.
    pub seed: u64,
}

impl Default for OltpParams {
    fn default() -> Self {
        OltpParams {
            machine: MachineConfig::default(),
            threads: vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
            seconds: 20.0,
            warmup_seconds: 2.0,
            point_us: 20.0,
            row_us: 2.5,
            range: 1000,
            sort_us: 300.0,
            gate_call_us: 0.0,
            switch_us: None,
            settings: vec![OltpSetting::seed_fifo(), OltpSetting::seed_flifo()],
            seed: 1,
        }
    }
}

/// What a measured window of a closed-loop run shows: throughput, the machine's churn, the
/// gate's counters per transaction, fairness across clients, and Little's law.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    /// Transactions (completions of kind 0) per second.
    pub tps: f64,
    /// Mean response time, ms.
    pub mean_ms: f64,
    /// Context switches per second.
    pub cs_per_s: f64,
    /// Context switches per transaction.
    pub cs_per_txn: f64,
    /// Gate admissions (not ticket re-entries) per transaction.
    pub admissions_per_txn: f64,
    /// Sleeps before queueing (or polls) per transaction.
    pub sleeps_per_txn: f64,
    /// Queue waits per transaction.
    pub queue_waits_per_txn: f64,
    /// Gate-mutex acquisitions that had to sleep, per transaction.
    pub mutex_waits_per_txn: f64,
    /// Gate-mutex (or shared-line) acquisitions that found it held and spun, per transaction.
    pub mutex_spins_per_txn: f64,
    /// Core time idle, %.
    pub idle_pct: f64,
    /// Core time spent switching threads (direct cost and cache refill), % — the simulator's
    /// stand-in for system time.
    pub switch_pct: f64,
    /// Mean threads holding a slot.
    pub mean_inside: f64,
    /// Most threads holding a slot.
    pub max_inside: u32,
    /// The gate's limit at the window's end: `auto`'s where its controller left it (0:
    /// unlimited); `repro oltp`'s `limit_end`.
    pub limit_end: u32,
    /// Mean hand-off latency (signal to running), µs.
    pub wake_latency_us: f64,
    /// LIFO admissions per second.
    pub lifo_per_s: f64,
    /// 99th percentile response time of the transactions completed in the window (each from
    /// its begin, even before the window), ms; nearest rank, 0 if none: `repro oltp`'s.
    pub p99_ms: f64,
    /// 99.9th percentile response time, ms (as `p99_ms`).
    pub p999_ms: f64,
    /// Longest response time completed in the window, ms.
    pub max_ms: f64,
    /// Threads ÷ TPS, ms: the response time a perfectly fair server would give; 0 if nothing
    /// completed.
    pub fair_share_ms: f64,
    /// Clients that completed nothing in the window.
    pub starved_clients: usize,
    /// Jain's fairness index over per-client completions (1 = equal).
    pub jain: f64,
    /// Little's law: mean in system ÷ (throughput × response) − 1.
    pub little_err: f64,
    /// FNV-1a over every event of the run.
    pub trace_hash: String,
    /// Wake-up preemptions per second (`MachineConfig::wake_preempt_ns`).
    pub wake_preemptions_per_s: f64,
    /// All preemptions per second (slice over, or a wake-up preemption): `repro oltp`'s
    /// `preempted_per_s` measures the same.
    pub preemptions_per_s: f64,
    /// Events simulated.
    pub events: u64,
    /// Where the threads were, on average over the window (OLTP points: sampled every
    /// [`CENSUS_EVERY_NS`] of virtual time; `samples` is 0 where a scenario does not sample):
    /// the counterpart of `repro oltp`'s `census`.
    pub census: CensusMean,
}

/// How often an OLTP point samples its census, ns of virtual time: 1 ms gives thousands of
/// samples per window at a cost of one pass over the threads each.
pub const CENSUS_EVERY_NS: u64 = 1_000_000;

impl Window {
    /// Reads the window since the last `reset_stats` of `sim`.
    pub fn read(sim: &mut Sim) -> Window {
        let k = sim.kinds.first().cloned().unwrap_or_default();
        let secs = sim.measured_secs();
        let x = k.count as f64 / secs;
        let r = k.response_sum / k.count.max(1) as f64 / NS;
        let l = sim.mean_in_system();
        let g = sim.gate_counts;
        let n = k.count.max(1) as f64;
        let per = sim.done_per_thread.clone();
        let (sum, sq) = per.iter().fold((0.0, 0.0), |(s, q), &d| {
            (s + d as f64, q + (d as f64).powi(2))
        });
        let busy = sim.busy_fraction();
        let core_ns = secs * NS * sim.cores() as f64;
        let mut resp = k.responses.clone();
        resp.sort_unstable();
        // Nearest rank, as `repro oltp` computes its quantiles.
        let ms = |q: f64| {
            let rank = (q * resp.len() as f64).ceil() as usize;
            resp.get(rank.clamp(1, resp.len().max(1)) - 1)
                .map_or(0.0, |&v| v as f64 / 1e6)
        };
        Window {
            tps: x,
            mean_ms: r * 1e3,
            cs_per_s: sim.switches as f64 / secs,
            wake_preemptions_per_s: sim.wake_preemptions as f64 / secs,
            preemptions_per_s: sim.preemptions as f64 / secs,
            cs_per_txn: sim.switches as f64 / n,
            admissions_per_txn: g.admissions as f64 / n,
            sleeps_per_txn: g.sleeps as f64 / n,
            queue_waits_per_txn: g.queue_waits as f64 / n,
            mutex_waits_per_txn: g.mutex_waits as f64 / n,
            mutex_spins_per_txn: g.mutex_spins as f64 / n,
            idle_pct: 100.0 * (1.0 - busy),
            switch_pct: 100.0 * sim.switch_ns as f64 / core_ns,
            mean_inside: sim.mean_inside(),
            max_inside: sim.max_inside,
            limit_end: sim.gate_limit(),
            wake_latency_us: g.handoff_latency_sum / g.handoff_resumes.max(1) as f64 / 1e3,
            lifo_per_s: g.lifo as f64 / secs,
            p99_ms: ms(0.99),
            p999_ms: ms(0.999),
            max_ms: ms(1.0),
            fair_share_ms: if x > 0.0 {
                per.len() as f64 / x * 1e3
            } else {
                0.0
            },
            starved_clients: per.iter().filter(|&&d| d == 0).count(),
            jain: if sq > 0.0 {
                sum * sum / (per.len() as f64 * sq)
            } else {
                0.0
            },
            little_err: if k.count > 0 { l / (x * r) - 1.0 } else { 0.0 },
            trace_hash: format!("{:016x}", sim.trace_hash),
            events: sim.events,
            census: CensusMean::default(),
        }
    }
}

/// One OLTP point.
#[derive(Debug, Clone, Serialize)]
pub struct OltpRun {
    /// Setting label.
    pub policy: String,
    /// Threads.
    pub threads: usize,
    /// The server layer's row-send setting.
    pub row_send: &'static str,
    /// Whether the gate decided under its own mutex.
    pub gate_mutex: bool,
    /// What the window showed.
    #[serde(flatten)]
    pub w: Window,
}

/// The OLTP report.
#[derive(Debug, Clone, Serialize)]
pub struct OltpReport {
    /// Settings.
    pub params: OltpParams,
    /// Points.
    pub runs: Vec<OltpRun>,
    /// Speed.
    #[serde(flatten)]
    pub speed: Speed,
}

fn oltp_costs(p: &OltpParams) -> OltpCosts {
    OltpCosts {
        point_ns: (p.point_us * 1e3) as u64,
        row_ns: (p.row_us * 1e3) as u64,
        range: p.range,
        sort_ns: (p.sort_us * 1e3) as u64,
    }
}

/// One closed-loop OLTP point: `threads` clients through setting `s`.
pub fn oltp_point(
    p: &OltpParams,
    s: &OltpSetting,
    threads: usize,
) -> Result<(OltpRun, u64), String> {
    let costs = oltp_costs(p);
    let mut sim = Sim::new(
        p.machine.clone(),
        gate(s.policy, s.limit, s.tickets, s.sleep_delay_us).adaptive_limit(!s.fixed_limit),
        p.seed ^ threads as u64,
    )?;
    if let Some(on) = s.gate_mutex {
        sim.set_gate_mutex(on);
    }
    sim.set_gate_call_cpu((p.gate_call_us * 1e3) as u64);
    sim.set_refill(
        p.switch_us
            .map(|us| ((us * 1e3) as u64).saturating_sub(p.machine.context_switch_ns)),
    );
    for _ in 0..threads {
        sim.spawn(Box::new(Oltp::new(costs, s.row_send)));
    }
    let warm = (p.warmup_seconds * NS) as u64;
    sim.run_until(warm);
    sim.reset_stats();
    let end = warm + (p.seconds * NS) as u64;
    let census = sim.run_sampling(end, CENSUS_EVERY_NS);
    let mut w = Window::read(&mut sim);
    w.census = census;
    let run = OltpRun {
        policy: s.name.clone(),
        threads,
        row_send: s.row_send.name(),
        gate_mutex: sim.has_gate_mutex(),
        w,
    };
    Ok((run, sim.events))
}

/// The longest simulated span a setting may ask for: a day. The clock is u64 nanoseconds
/// (584 years), and simulated time costs real time in proportion (a busy point runs at a
/// few simulated seconds per real second), so a day is already far past any useful run.
const MAX_SIM_SECONDS: f64 = 86_400.0;

/// The longest one cost (a CPU burst, a disk wait) may be: 1000 s, so that sums of a few
/// of them stay far from the clock's end.
const MAX_COST_NS: f64 = 1e12;

/// The most simulated threads: `repro`'s bound (thread ids are u32, each thread is a
/// program in memory).
const MAX_SIM_THREADS: usize = 16_384;

/// A window length in seconds: finite, at least a microsecond (`zero_ok`: or zero), at
/// most [`MAX_SIM_SECONDS`]. A NaN or a span shorter than the clock's tick would report
/// NaN rates; an infinite one would never end.
fn check_seconds(what: &str, name: &str, v: f64, zero_ok: bool) -> Result<(), String> {
    let ok = v.is_finite() && v <= MAX_SIM_SECONDS && (v >= 1e-6 || (zero_ok && v == 0.0));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}: {name} = {v} must be {}1 µs to {MAX_SIM_SECONDS} s",
            if zero_ok { "0 or " } else { "" }
        ))
    }
}

/// A cost given in `unit_ns` units: finite, non-negative (`positive`: at least 1 ns, for
/// the cost that makes every operation take time; without one, a thread with nothing else
/// to wait for would run for ever at one instant), and at most [`MAX_COST_NS`].
fn check_cost(what: &str, name: &str, v: f64, unit_ns: f64, positive: bool) -> Result<(), String> {
    let ns = v * unit_ns;
    let ok = v.is_finite() && ns <= MAX_COST_NS && if positive { ns >= 1.0 } else { ns >= 0.0 };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}: {name} = {v} must be {} and at most {} s",
            if positive {
                "at least 1 ns"
            } else {
                "a finite, non-negative time"
            },
            MAX_COST_NS / 1e9
        ))
    }
}

/// Counts (threads, tables): given, positive, each once, at most `max`.
fn check_counts(what: &str, name: &str, v: &[usize], max: usize) -> Result<(), String> {
    if v.is_empty() || v.contains(&0) || v.iter().any(|&n| n > max) {
        return Err(format!("{what}: {name} must be 1 to {max}"));
    }
    let mut sorted = v.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("{what}: {name} lists a value twice: {v:?}"));
    }
    Ok(())
}

fn check_oltp(p: &OltpParams) -> Result<(), String> {
    check_counts("oltp", "thread counts", &p.threads, MAX_SIM_THREADS)?;
    check_seconds("oltp", "seconds", p.seconds, false)?;
    check_seconds("oltp", "warmup_seconds", p.warmup_seconds, true)?;
    // A range's rows are sent one by one: a billion of them would never end a transaction.
    if p.range == 0 || p.range > 1_000_000 {
        return Err(format!("oltp: range = {} must be 1 to 1,000,000", p.range));
    }
    // Every transaction makes point selects: their cost is the one that must be positive.
    check_cost("oltp", "point_us", p.point_us, 1e3, true)?;
    for (name, v) in [
        ("row_us", p.row_us),
        ("sort_us", p.sort_us),
        ("gate_call_us", p.gate_call_us),
        ("switch_us", p.switch_us.unwrap_or(0.0)),
    ] {
        check_cost("oltp", name, v, 1e3, false)?;
    }
    if p.settings.is_empty() {
        return Err("oltp: no gate settings".into());
    }
    for (i, a) in p.settings.iter().enumerate() {
        if p.settings[..i].iter().any(|b| b.name == a.name) {
            return Err(format!("oltp: the setting {} is listed twice", a.name));
        }
    }
    Ok(())
}

/// Runs seed 001 at its scale.
pub fn oltp(p: &OltpParams) -> Result<OltpReport, String> {
    check_oltp(p)?;
    let mut clock = Clock::new();
    let mut runs = Vec::new();
    for s in &p.settings {
        for &t in &p.threads {
            let (run, events) = oltp_point(p, s, t)?;
            clock.events += events;
            runs.push(run);
        }
    }
    Ok(OltpReport {
        params: p.clone(),
        runs,
        speed: clock.speed(),
    })
}

// ---------------------------------------------------------------------------------------------
// Seed 003

/// Settings of the timer scenario: MySQL 5.4's timer gate against the 5.0 gate with its mutex.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimerParams {
    /// The workload and machine (seed 003 states neither: assumed seed 001's sysbench
    /// read-only transaction on an 8-core machine, MySQL 5.1's server layer — the base of 5.4
    /// — forcing an exit per row sent).
    pub oltp: OltpParams,
    /// The limit for both gates (seed 003 found ~24 best for the new gate).
    pub limit: u32,
    /// Thread counts (the seed's 32, 64, 128).
    pub threads: Vec<usize>,
    /// The server layer's row-send setting for both gates.
    pub row_send: RowSend,
}

impl Default for TimerParams {
    fn default() -> Self {
        TimerParams {
            oltp: OltpParams::default(),
            limit: 24,
            threads: vec![32, 64, 128],
            row_send: RowSend::ForceExit,
        }
    }
}

/// One thread count of the timer scenario.
#[derive(Debug, Clone, Serialize)]
pub struct TimerPoint {
    /// Threads.
    pub threads: usize,
    /// The 5.0 gate (classic, with `srv_conc_mutex`).
    pub mutex_gate: OltpRun,
    /// MySQL 5.4's timer gate.
    pub timer_gate: OltpRun,
    /// The 5.0 gate's decisions without its mutex (ablation: how much the mutex costs).
    pub mutex_gate_without_mutex: OltpRun,
    /// Timer over mutex gate, minus 1, %.
    pub gain_pct: f64,
    /// The seed's gain at this thread count, % (+5/+10/+15 at 32/64/128).
    pub seed_gain_pct: Option<f64>,
    /// The part of the gap the mutex alone explains: (classic without its mutex ÷ classic − 1), %.
    pub mutex_share_pct: f64,
}

/// The timer report.
#[derive(Debug, Clone, Serialize)]
pub struct TimerReport {
    /// Settings.
    pub params: TimerParams,
    /// Points.
    pub points: Vec<TimerPoint>,
    /// Speed.
    #[serde(flatten)]
    pub speed: Speed,
}

/// Runs seed 003: at each thread count the 5.0 mutex gate, the 5.4 timer gate, and the 5.0
/// gate without its mutex.
pub fn timer(p: &TimerParams) -> Result<TimerReport, String> {
    check_oltp(&OltpParams {
        threads: p.threads.clone(),
        ..p.oltp.clone()
    })?;
    if p.limit == 0 {
        return Err("timer: the limit must be positive".into());
    }
    let mut clock = Clock::new();
    let classic = OltpSetting {
        row_send: p.row_send,
        ..OltpSetting::new(Policy::Classic, p.limit, 500, 10_000)
    };
    let timer = OltpSetting {
        row_send: p.row_send,
        ..OltpSetting::new(Policy::Timer, p.limit, 500, 10_000)
    };
    let bare = OltpSetting {
        name: "classic-no-mutex".into(),
        gate_mutex: Some(false),
        ..classic.clone()
    };
    let mut points = Vec::new();
    for &t in &p.threads {
        let mut one = |s: &OltpSetting| -> Result<OltpRun, String> {
            let (r, e) = oltp_point(&p.oltp, s, t)?;
            clock.events += e;
            Ok(r)
        };
        let (m, tg, b) = (one(&classic)?, one(&timer)?, one(&bare)?);
        points.push(TimerPoint {
            threads: t,
            gain_pct: 100.0 * (tg.w.tps / m.w.tps - 1.0),
            seed_gain_pct: match t {
                32 => Some(5.0),
                64 => Some(10.0),
                128 => Some(15.0),
                _ => None,
            },
            mutex_share_pct: 100.0 * (b.w.tps / m.w.tps - 1.0),
            mutex_gate: m,
            timer_gate: tg,
            mutex_gate_without_mutex: b,
        });
    }
    Ok(TimerReport {
        params: p.clone(),
        points,
        speed: clock.speed(),
    })
}

// ---------------------------------------------------------------------------------------------
// Seed 004

/// Settings of the pileup scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PileupParams {
    /// The machine (the seed's 4 cores). A `[machine]` table given changes only the fields
    /// it names.
    #[serde(deserialize_with = "pileup_machine")]
    pub machine: MachineConfig,
    /// Table counts.
    pub tables: Vec<usize>,
    /// Limit (the seed's 8).
    pub limit: u32,
    /// CPU per query, µs: the seed's 10,000 q/s on 4 busy cores is 4 core-seconds per
    /// 10,000 queries = 400 µs of CPU each.
    pub query_us: f64,
    /// CPU of the insert call, µs.
    pub insert_us: f64,
    /// Binlog fsync on the seed's SATA disk, ms (~16 commits/s through one mutex).
    pub fsync_ms: f64,
    /// Simulated seconds per run.
    pub seconds: f64,
    /// Seed.
    pub seed: u64,
}

impl Default for PileupParams {
    fn default() -> Self {
        PileupParams {
            machine: MachineConfig {
                cores: 4,
                ..MachineConfig::default()
            },
            tables: vec![4, 8, 16],
            limit: 8,
            query_us: 400.0,
            insert_us: 50.0,
            fsync_ms: 60.0,
            seconds: 30.0,
            seed: 1,
        }
    }
}

/// One pileup run.
#[derive(Debug, Clone, Serialize)]
pub struct PileupRun {
    /// Tables.
    pub tables: usize,
    /// `hold-slot` or `release-slot`.
    pub mode: &'static str,
    /// Inserts per second.
    pub inserts_per_s: f64,
    /// Queries per second.
    pub queries_per_s: f64,
    /// Mean threads holding a slot.
    pub mean_inside: f64,
}

/// The pileup report.
#[derive(Debug, Clone, Serialize)]
pub struct PileupReport {
    /// Settings.
    pub params: PileupParams,
    /// Runs.
    pub runs: Vec<PileupRun>,
    /// Speed.
    #[serde(flatten)]
    pub speed: Speed,
}

/// Runs seed 004 at its scale.
pub fn pileup(p: &PileupParams) -> Result<PileupReport, String> {
    check_counts("pileup", "table counts", &p.tables, MAX_SIM_THREADS / 2)?;
    check_cost("pileup", "query_us", p.query_us, 1e3, true)?;
    check_cost("pileup", "insert_us", p.insert_us, 1e3, false)?;
    check_cost("pileup", "fsync_ms", p.fsync_ms, 1e6, false)?;
    if p.insert_us * 1e3 + p.fsync_ms * 1e6 < 1.0 {
        return Err("pileup: an insert must take at least 1 ns (insert_us or fsync_ms)".into());
    }
    check_seconds("pileup", "seconds", p.seconds, false)?;
    let mut clock = Clock::new();
    let mut runs = Vec::new();
    for &n in &p.tables {
        for (mode, hold) in [("hold-slot", true), ("release-slot", false)] {
            let mut sim = Sim::new(
                p.machine.clone(),
                gate(Policy::Classic, p.limit, 500, 10_000),
                p.seed ^ n as u64,
            )?;
            for _ in 0..n {
                sim.spawn(Box::new(inserter(
                    (p.insert_us * 1e3) as u64,
                    (p.fsync_ms * 1e6) as u64,
                    hold,
                )));
                sim.spawn(Box::new(querier((p.query_us * 1e3) as u64)));
            }
            sim.run_until(NS as u64);
            sim.reset_stats();
            sim.run_until(NS as u64 + (p.seconds * NS) as u64);
            let secs = sim.measured_secs();
            let count = |k: usize| sim.kinds.get(k).map_or(0, |s| s.count) as f64 / secs;
            runs.push(PileupRun {
                tables: n,
                mode,
                inserts_per_s: count(0),
                queries_per_s: count(1),
                mean_inside: sim.mean_inside(),
            });
            clock.add(&sim);
        }
    }
    Ok(PileupReport {
        params: p.clone(),
        runs,
        speed: clock.speed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_mva_matches_the_single_station_formula() {
        // One station, no think time: X(n) = 1/D for every n.
        let (x, r) = mva(&[0.01], 0.0, 5);
        assert!((x - 100.0).abs() < 1e-9 && (r - 0.05).abs() < 1e-12);
        // N = 1: X = 1/(Z + ΣD).
        let (x, _) = mva(&[0.001, 0.0015], 0.005, 1);
        assert!((x - 1.0 / 0.0075).abs() < 1e-9);
    }

    #[test]
    fn with_zero_overheads_the_simulator_agrees_with_mva_and_littles_law() {
        let r = mva_check(&MvaParams {
            n: vec![1, 3, 8, 32],
            completions: 60_000,
            ..MvaParams::default()
        })
        .unwrap();
        for p in &r.points {
            assert!(p.rel_err.abs() < 0.02, "{p:?}");
            assert!(p.response_rel_err.abs() < 0.03, "{p:?}");
            assert!(p.little_err.abs() < 0.01, "{p:?}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_trace_and_another_seed_a_different_one() {
        let run = |seed| {
            let mut sim = Sim::new(
                MachineConfig::default(),
                gate(Policy::Flifo, 4, 100, 0),
                seed,
            )
            .unwrap();
            for _ in 0..20 {
                sim.spawn(Box::new(Oltp::new(
                    OltpCosts {
                        point_ns: 20_000,
                        row_ns: 2_500,
                        range: 300,
                        sort_ns: 100_000,
                    },
                    RowSend::ForceExit,
                )));
            }
            sim.run_until(200_000_000);
            (
                sim.trace_hash,
                sim.events,
                sim.kinds.first().map_or(0, |k| k.count),
            )
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7).0, run(8).0);
    }

    #[test]
    fn a_scan_with_500_tickets_hands_the_slot_back_every_501_rows() {
        let p = TicketsParams {
            rows: 50_100,
            row_ns: 100,
            tickets: vec![500],
            wake_sweep_us: vec![20],
            ..TicketsParams::default()
        };
        let r = tickets(&p).unwrap();
        let run = &r.runs[0];
        assert_eq!(run.handoffs, 100.0, "{run:?}");
        assert_eq!(run.concurrent_s.len(), 2);
        // The slower of the two waited for the slot; the first can finish in its alone time
        // while the other sleeps before queueing.
        let slowest = run.concurrent_s.iter().copied().fold(0.0, f64::max);
        assert!(slowest > run.alone_s, "{run:?}");
    }

    #[test]
    fn each_scenario_runs_end_to_end_at_small_size() {
        let o = oltp(&OltpParams {
            threads: vec![1, 64],
            seconds: 4.0,
            warmup_seconds: 0.5,
            ..OltpParams::default()
        })
        .unwrap();
        assert_eq!(o.runs.len(), 4);
        for r in &o.runs {
            assert!(r.w.tps > 0.0, "{r:?}");
            // classic: limit 32; flifo: 2 × its limit of 16.
            assert!(r.w.max_inside <= 32, "{r:?}");
            assert!(r.w.little_err.abs() < 0.05, "{r:?}");
        }
        let p = pileup(&PileupParams {
            tables: vec![4, 16],
            seconds: 3.0,
            ..PileupParams::default()
        })
        .unwrap();
        assert_eq!(p.runs.len(), 4);
        assert!(p.speed.events > 0);
    }

    fn small_oltp(machine: MachineConfig, threads: usize, s: OltpSetting) -> OltpRun {
        let p = OltpParams {
            machine,
            threads: vec![threads],
            seconds: 1.0,
            warmup_seconds: 0.2,
            ..OltpParams::default()
        };
        oltp_point(&p, &s, threads).unwrap().0
    }

    #[test]
    fn a_forced_exit_per_row_sent_makes_one_admission_per_row_of_the_simple_range() {
        let m = MachineConfig::ideal(2);
        let force = small_oltp(m.clone(), 1, OltpSetting::seed_fifo());
        // 10 point selects + 1000 sent rows + 3 ranges of 1000 rows on 500 tickets (2 each),
        // within the window's edges (a transaction cut by them).
        assert!(
            (force.w.admissions_per_txn / 1016.0 - 1.0).abs() < 0.02,
            "{force:?}"
        );
        let keep = small_oltp(
            m,
            1,
            OltpSetting {
                row_send: RowSend::Keep,
                ..OltpSetting::seed_fifo()
            },
        );
        assert!(
            (keep.w.admissions_per_txn / 18.0 - 1.0).abs() < 0.05,
            "{keep:?}"
        );
        assert_eq!(force.row_send, "force-exit");
        assert_eq!(keep.row_send, "keep");
    }

    #[test]
    fn under_auto_an_open_transactions_later_statements_mostly_enter_without_queueing() {
        // 64 clients on 2 cores: the queue never empties. A transaction (BEGIN ... COMMIT)
        // queues for its first statement; its later ones come back by the rule after a wait
        // (a free slot, an extra place, or the head of the queue), so fewer than half of its
        // admissions queue (without the rule every one would), and the clients still complete
        // alike (nobody starved, Jain's index over per-client completions above 0.9).
        // The transaction is this engine's (`docs/results/sim/oltp-2core.toml`: rows of
        // 0.12 µs, ~0.7 ms of CPU), which fits in one quantum: the seed's (~11 ms) does not,
        // and gives its slot up at quantum ends to those it locks out (the real engine with
        // seed-like rows, `repro oltp --row-work-ns 2350`, queues several times a transaction
        // whatever the limit).
        let m = MachineConfig {
            cores: 2,
            ..MachineConfig::default()
        };
        let p = OltpParams {
            machine: m,
            threads: vec![64],
            seconds: 1.0,
            warmup_seconds: 0.2,
            row_us: 0.12,
            point_us: 1.0,
            sort_us: 40.0,
            ..OltpParams::default()
        };
        let r = oltp_point(&p, &OltpSetting::by_name("auto").unwrap(), 64)
            .unwrap()
            .0;
        assert!(r.w.admissions_per_txn > 13.0, "{r:?}");
        assert!(
            r.w.queue_waits_per_txn < r.w.admissions_per_txn / 2.0,
            "{r:?}"
        );
        assert_eq!(r.w.starved_clients, 0, "{r:?}");
        assert!(r.w.jain > 0.9, "{r:?}");
    }

    #[test]
    fn the_mutex_gates_decide_under_their_mutex_and_the_atomic_gates_do_not() {
        let m = MachineConfig {
            mutex_handoff_ns: 300,
            ..MachineConfig::default()
        };
        for (name, has) in [
            ("classic", true),
            ("flifo", true),
            ("polling", false),
            ("timer", false),
        ] {
            let r = small_oltp(m.clone(), 64, OltpSetting::by_name(name).unwrap());
            assert_eq!(r.gate_mutex, has, "{name}");
            if has {
                // Contended: waiters spin on it, or sleep when its holder is off a core.
                assert!(
                    r.w.mutex_waits_per_txn + r.w.mutex_spins_per_txn > 0.0,
                    "{name}: {r:?}"
                );
            } else {
                assert_eq!(r.w.mutex_waits_per_txn, 0.0, "{name}: a line never sleeps");
            }
        }
        let off = small_oltp(
            m,
            64,
            OltpSetting {
                gate_mutex: Some(false),
                ..OltpSetting::seed_fifo()
            },
        );
        assert!(
            !off.gate_mutex && off.w.mutex_waits_per_txn == 0.0,
            "{off:?}"
        );
    }

    #[test]
    fn a_contended_gate_mutex_costs_throughput() {
        let base = MachineConfig::default();
        let with = MachineConfig {
            mutex_handoff_ns: 300,
            ..base.clone()
        };
        let a = small_oltp(base, 256, OltpSetting::seed_fifo());
        let b = small_oltp(with, 256, OltpSetting::seed_fifo());
        assert!(b.w.tps < a.w.tps, "{a:?}\n{b:?}");
        assert!(
            b.w.mutex_waits_per_txn + b.w.mutex_spins_per_txn > 0.0,
            "{b:?}"
        );
    }

    #[test]
    fn an_atomic_gate_still_serialises_on_its_shared_line() {
        // 16 cores, every gate call a 2 µs line transfer: ~2000 calls per transaction cap the
        // modelled machine at ~250 TPS however many cores run.
        let m = |handoff| MachineConfig {
            cores: 16,
            mutex_handoff_ns: handoff,
            ..MachineConfig::default()
        };
        let free = small_oltp(m(0), 64, OltpSetting::by_name("polling").unwrap());
        let line = small_oltp(m(2_000), 64, OltpSetting::by_name("polling").unwrap());
        assert!(!line.gate_mutex, "polling has no mutex, only its line");
        assert!(line.w.tps < 0.5 * free.w.tps, "{free:?}\n{line:?}");
        assert!(line.w.tps < 300.0, "{line:?}");
    }

    #[test]
    fn a_cache_refill_charge_shows_as_switching_time() {
        let base = MachineConfig::default();
        let refill = MachineConfig {
            cache_refill_ns: 50_000,
            ..base.clone()
        };
        let a = small_oltp(base, 64, OltpSetting::seed_flifo());
        let b = small_oltp(refill, 64, OltpSetting::seed_flifo());
        assert!(b.w.switch_pct > a.w.switch_pct, "{a:?}\n{b:?}");
        assert!(b.w.tps < a.w.tps, "{a:?}\n{b:?}");
    }

    #[test]
    fn windows_report_fairness_starvation_and_a_trace_hash() {
        let r = small_oltp(MachineConfig::default(), 16, OltpSetting::seed_flifo());
        assert_eq!(r.w.starved_clients, 0, "{r:?}");
        assert!(r.w.jain > 0.9 && r.w.jain <= 1.0 + 1e-9, "{r:?}");
        assert_eq!(r.w.trace_hash.len(), 16);
        assert!(r.w.idle_pct >= 0.0 && r.w.idle_pct < 100.0, "{r:?}");
        assert!(r.w.cs_per_s > 0.0 && r.w.cs_per_txn > 0.0, "{r:?}");
        let w = &r.w;
        assert!(
            0.0 < w.p99_ms && w.p99_ms <= w.p999_ms && w.p999_ms <= w.max_ms,
            "{r:?}"
        );
        assert!((w.fair_share_ms - 16.0 / w.tps * 1e3).abs() < 1e-9, "{r:?}");
        // The mean counts each response from the window's start at the earliest, the max from
        // its begin: never above it.
        assert!(w.mean_ms <= w.max_ms, "{r:?}");
    }

    #[test]
    fn the_timer_scenario_compares_the_two_gates_at_each_thread_count() {
        let r = timer(&TimerParams {
            oltp: OltpParams {
                seconds: 0.5,
                warmup_seconds: 0.1,
                ..OltpParams::default()
            },
            threads: vec![32, 64],
            ..TimerParams::default()
        })
        .unwrap();
        assert_eq!(r.points.len(), 2);
        for x in &r.points {
            assert_eq!(x.mutex_gate.policy, "classic");
            assert_eq!(x.timer_gate.policy, "timer");
            assert!(!x.mutex_gate_without_mutex.gate_mutex);
            let g = 100.0 * (x.timer_gate.w.tps / x.mutex_gate.w.tps - 1.0);
            assert!((g - x.gain_pct).abs() < 1e-9);
        }
        assert_eq!(r.points[0].seed_gain_pct, Some(5.0));
    }

    #[test]
    fn auto_with_a_fixed_limit_keeps_it_and_the_window_reports_each_gates_limit() {
        // Time-sliced (the ideal machine never preempts: threads beyond the cores that never
        // block would not run at all, whatever the gate).
        let m = MachineConfig {
            cores: 2,
            ..MachineConfig::default()
        };
        let fixed = OltpSetting::by_name("auto@1").unwrap();
        assert_eq!((fixed.name.as_str(), fixed.limit), ("auto@1", 1));
        assert!(fixed.fixed_limit);
        // One slot on two cores: the adaptive `auto` would never stay below the cores.
        let one = small_oltp(m.clone(), 16, fixed);
        assert_eq!(one.w.limit_end, 1, "{one:?}");
        assert_eq!(one.policy, "auto@1");
        let adaptive = small_oltp(m.clone(), 16, OltpSetting::by_name("auto").unwrap());
        assert!(adaptive.w.limit_end >= 2, "{adaptive:?}");
        assert!(one.w.max_inside <= 2, "one slot, one extra place: {one:?}");
        let classic = small_oltp(m, 4, OltpSetting::seed_fifo());
        assert_eq!(classic.w.limit_end, 32);
    }

    #[test]
    fn bad_oltp_settings_are_refused_with_a_reason() {
        assert!(OltpSetting::by_name("fifo")
            .unwrap_err()
            .contains("unknown setting"));
        for bad in ["auto@0", "auto@", "auto@x", "auto@99999"] {
            let e = OltpSetting::by_name(bad).unwrap_err();
            assert!(e.contains("whole number from 1 to"), "{bad}: {e}");
        }
        let e = oltp(&OltpParams {
            threads: vec![0],
            ..OltpParams::default()
        })
        .unwrap_err();
        assert!(e.contains("1 to"), "{e}");
    }

    #[test]
    fn settings_that_would_hang_the_simulator_or_report_nan_are_refused_with_a_reason() {
        let oltp_err = |f: &dyn Fn(&mut OltpParams)| {
            let mut p = OltpParams::default();
            f(&mut p);
            oltp(&p).unwrap_err()
        };
        // No CPU per transaction (nothing ever moves virtual time), or under 1 ns.
        for v in [0.0, 0.0004] {
            let e = oltp_err(&|p| p.point_us = v);
            assert!(e.contains("point_us") && e.contains("1 ns"), "{v}: {e}");
        }
        // Windows: NaN, shorter than the clock's tick, infinite, negative.
        for v in [f64::NAN, 1e-10, f64::INFINITY, -1.0, 1e9] {
            let e = oltp_err(&|p| p.seconds = v);
            assert!(e.contains("seconds"), "{v}: {e}");
        }
        for v in [f64::NAN, f64::INFINITY] {
            let e = oltp_err(&|p| p.warmup_seconds = v);
            assert!(e.contains("warmup_seconds"), "{v}: {e}");
        }
        // A cost past the clock's reach.
        let e = oltp_err(&|p| p.row_us = 1e30);
        assert!(e.contains("row_us"), "{e}");
        // Repeated thread counts or settings.
        let e = oltp_err(&|p| p.threads = vec![4, 4]);
        assert!(e.contains("twice"), "{e}");
        let e = oltp_err(&|p| {
            p.settings = vec![
                OltpSetting::by_name("classic").unwrap(),
                OltpSetting::by_name("classic").unwrap(),
            ]
        });
        assert!(e.contains("twice"), "{e}");
        // Pileup: a free query, an empty window, no tables.
        for (f, what) in [
            (
                (|p: &mut PileupParams| p.query_us = 0.0) as fn(&mut PileupParams),
                "query_us",
            ),
            (|p| p.seconds = 0.0, "seconds"),
            (|p| p.tables = vec![], "table counts"),
            (
                |p| {
                    p.insert_us = 0.0;
                    p.fsync_ms = 0.0
                },
                "an insert",
            ),
        ] {
            let mut p = PileupParams::default();
            f(&mut p);
            let e = pileup(&p).unwrap_err();
            assert!(e.contains(what), "{what}: {e}");
        }
        // Limit 0 is the seed's unlimited control run, not an error.
        assert!(pileup(&PileupParams {
            limit: 0,
            tables: vec![4],
            seconds: 0.5,
            ..PileupParams::default()
        })
        .is_ok());
        // MVA: a negative or zero CPU demand.
        for v in [-1.0, 0.0] {
            let e = mva_check(&MvaParams {
                cpu_ms: v,
                ..MvaParams::default()
            })
            .unwrap_err();
            assert!(e.contains("cpu_ms"), "{v}: {e}");
        }
    }

    #[test]
    fn inputs_that_would_never_end_overflow_or_report_nan_are_refused_with_a_reason() {
        // A time slice meant as ms: an event per nanosecond per busy core.
        let m = MachineConfig {
            time_slice_ns: 4,
            ..MachineConfig::default()
        };
        assert!(m.validate().unwrap_err().contains("time_slice_ns"));
        assert!(MachineConfig {
            time_slice_ns: 0,
            ..MachineConfig::default()
        }
        .validate()
        .is_ok());
        // MVA: completions without bound.
        let e = mva_check(&MvaParams {
            completions: u64::MAX,
            ..MvaParams::default()
        })
        .unwrap_err();
        assert!(e.contains("completions"), "{e}");
        // OLTP: a range that never ends a transaction.
        let e = oltp(&OltpParams {
            range: u64::MAX,
            ..OltpParams::default()
        })
        .unwrap_err();
        assert!(e.contains("range"), "{e}");
        // Tickets: no rows (÷ alone NaN), a scan past the clock, no tickets.
        for (f, what) in [
            (
                (|p: &mut TicketsParams| p.rows = 0) as fn(&mut TicketsParams),
                "rows",
            ),
            (|p| p.row_ns = u64::MAX / 2, "row_ns"),
            (|p| p.tickets = vec![0], "tickets"),
            (|p| p.wake_sweep_us = vec![u64::MAX], "wake_sweep_us"),
        ] {
            let mut p = TicketsParams::default();
            f(&mut p);
            let e = tickets(&p).unwrap_err();
            assert!(e.contains(what), "{what}: {e}");
        }
    }

    #[test]
    fn a_partial_machine_table_changes_only_its_fields_of_the_scenarios_machine() {
        // A `[machine]` table naming any field must not move a 4-core scenario onto the
        // machine's own default of 8 cores.
        let p: PileupParams = toml::from_str("[machine]\nwake_base_ns = 5000\n").unwrap();
        assert_eq!(p.machine.cores, PileupParams::default().machine.cores);
        assert_eq!(p.machine.wake_base_ns, 5000);
        let t: TicketsParams = toml::from_str("[machine]\nyield_ns = 7\n").unwrap();
        assert_eq!(t.machine.cores, 4);
        assert_eq!(t.machine.yield_ns, 7);
        // An unknown field is still refused.
        assert!(toml::from_str::<PileupParams>("[machine]\nwake_base = 5\n").is_err());
    }

    #[test]
    fn auto_in_the_tickets_scenario_runs_once_at_the_scenarios_limit_of_one() {
        let p = TicketsParams {
            policy: Policy::Auto,
            rows: 2000,
            wake_sweep_us: vec![20],
            ..TicketsParams::default()
        };
        let r = tickets(&p).unwrap();
        assert_eq!(r.runs.len(), 1, "one run: a quantum, not two ticket counts");
        assert_eq!(r.runs[0].tickets, None);
        // At a limit of 1 the second scan waits for the first (or its quantum): never
        // both at once as with the cores' limit.
        assert!(r.runs[0].queue_waits >= 1, "{:?}", r.runs[0]);
    }

    #[test]
    fn a_machine_with_a_wake_up_latency_over_ten_seconds_is_refused() {
        for m in [
            MachineConfig {
                wake_busy_ns: Some(i64::MAX as u64),
                ..MachineConfig::default()
            },
            MachineConfig {
                wake_preempt_ns: Some(20_000_000_000),
                ..MachineConfig::default()
            },
            MachineConfig {
                wake_call_ns: i64::MAX as u64,
                ..MachineConfig::default()
            },
            MachineConfig {
                wake_call_idle_ns: 11_000_000_000,
                ..MachineConfig::default()
            },
        ] {
            let e = m.validate().unwrap_err();
            assert!(e.contains("wake_") && e.contains("10 s"), "{e}");
        }
        assert!(MachineConfig::default().validate().is_ok());
    }
}
