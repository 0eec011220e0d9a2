//! The read-only sweep's shared vocabulary: the table, the gate settings compared, the sweep's
//! configuration and one point's result row. Both drivers of the sweep use it — the built-in
//! generator ([`super::oltp`]) and real sysbench through the server ([`super::sysbench`]) — so
//! it sits below both and depends on neither.

use std::time::Duration;

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::RowSend;

use super::census::Census;
use super::ReproError;

/// The table.
pub const TABLE: &str = "sbtest1";

/// One gate configuration of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct GateSetting {
    /// A label for the report: the setting's name (`auto@L` for `auto` with a fixed limit).
    pub name: String,
    /// Policy.
    #[serde(serialize_with = "ser_policy")]
    pub policy: Policy,
    /// Limit.
    pub limit: u32,
    /// Tickets.
    pub tickets: u32,
    /// Sleep delay, µs.
    pub sleep_delay_us: u64,
    /// What the server layer does with the slot for each row sent to the client.
    #[serde(serialize_with = "ser_row_send")]
    pub row_send: RowSend,
    /// `auto` with its limit held at `limit` instead of adapting (`auto@L`): a point of the
    /// fixed-limit sweep that `auto`'s own limit is judged against.
    pub fixed_limit: bool,
}

fn ser_row_send<S: serde::Serializer>(r: &RowSend, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.name())
}

pub(crate) fn ser_policy<S: serde::Serializer>(p: &Policy, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.name())
}

impl GateSetting {
    /// The seed's two configurations as the seed ran them, and the other policies on the same
    /// server. `classic`: "FIFO: limit 32, default tickets" on MySQL 5.0.84, whose default
    /// `innodb_concurrency_tickets` is 500 (5.5 raised it to 5000) and whose
    /// `innodb_thread_sleep_delay` is 10 ms; `flifo`: limit 16, tickets 500, sleep delay 0;
    /// `polling` and `timer` run the classic setting, `unlimited` its tickets. All send rows
    /// with [`RowSend::ForceExit`], as 5.0 does.
    pub fn seed_settings() -> Vec<GateSetting> {
        let classic = GateSetting {
            name: "classic".into(),
            policy: Policy::Classic,
            limit: 32,
            tickets: 500,
            sleep_delay_us: 10_000,
            row_send: RowSend::ForceExit,
            fixed_limit: false,
        };
        vec![
            classic.clone(),
            GateSetting {
                name: "flifo".into(),
                policy: Policy::Flifo,
                limit: 16,
                tickets: 500,
                sleep_delay_us: 0,
                row_send: RowSend::ForceExit,
                fixed_limit: false,
            },
            GateSetting {
                name: "polling".into(),
                policy: Policy::Polling,
                ..classic.clone()
            },
            GateSetting {
                name: "timer".into(),
                policy: Policy::Timer,
                ..classic.clone()
            },
            GateSetting {
                name: "unlimited".into(),
                policy: Policy::Unlimited,
                limit: 0,
                ..classic.clone()
            },
            // Untuned, on the same server: its limit starts at the CPUs the process may use
            // and adapts; it grants a time quantum, so the tickets shown are unused.
            GateSetting {
                name: "auto".into(),
                policy: Policy::Auto,
                limit: GateConfig::new(Policy::Auto).limit,
                ..classic
            },
        ]
    }

    /// `auto` with its limit fixed at `limit` (named `auto@L`): everything else as `auto`'s.
    pub fn auto_fixed(limit: u32) -> GateSetting {
        GateSetting {
            name: format!("auto@{limit}"),
            limit,
            fixed_limit: true,
            ..GateSetting::seed_settings()
                .pop()
                .expect("the seed settings end with auto")
        }
    }

    /// The setting names [`GateSetting::select`] knows, comma-separated (for errors).
    pub fn names() -> String {
        let mut v: Vec<String> = GateSetting::seed_settings()
            .into_iter()
            .map(|s| s.name)
            .collect();
        v.push(format!(
            "auto@L (auto with its limit fixed at L, 1–{})",
            turnstile::MAX_LIMIT
        ));
        v.join(", ")
    }

    /// The settings named in `names`, in the order given, each sending rows by `row_send`:
    /// the seed settings by name, and `auto@L` for `auto` with its limit fixed at L. An
    /// unknown or repeated name is an error that lists the known ones.
    pub fn select(names: &[String], row_send: RowSend) -> Result<Vec<GateSetting>, String> {
        let all = GateSetting::seed_settings();
        let mut out: Vec<GateSetting> = Vec::new();
        for n in names {
            let n = n.trim();
            let s = match n.strip_prefix("auto@") {
                Some(l) => match l.parse::<u32>() {
                    Ok(l) if (1..=turnstile::MAX_LIMIT).contains(&l) => GateSetting::auto_fixed(l),
                    _ => {
                        return Err(format!(
                            "oltp setting '{n}': the fixed limit after 'auto@' must be a whole \
                             number from 1 to {}",
                            turnstile::MAX_LIMIT
                        ))
                    }
                },
                None => match all.iter().find(|s| s.name == n) {
                    Some(s) => s.clone(),
                    None => {
                        return Err(format!(
                            "unknown oltp setting '{n}': expected one of {}",
                            GateSetting::names()
                        ))
                    }
                },
            };
            if out.iter().any(|o| o.name == s.name) {
                return Err(format!("oltp setting '{n}' is named twice"));
            }
            out.push(GateSetting { row_send, ..s });
        }
        if out.is_empty() {
            return Err(format!(
                "no oltp setting named: expected some of {}",
                GateSetting::names()
            ));
        }
        Ok(out)
    }

    pub(crate) fn gate(&self) -> Result<Gate, ReproError> {
        Ok(Gate::new(self.config())?)
    }

    /// The gate configuration of this setting.
    pub fn config(&self) -> GateConfig {
        let c = GateConfig::new(self.policy).innodb_settings(
            self.limit,
            self.tickets,
            Duration::from_micros(self.sleep_delay_us),
        );
        if self.fixed_limit {
            c.adaptive_limit(false)
        } else {
            c
        }
    }
}

/// Settings.
#[derive(Debug, Clone, Serialize)]
pub struct OltpConfig {
    /// Rows in the table.
    pub rows: u32,
    /// Rows per range.
    pub range: u32,
    /// Client thread counts.
    pub threads: Vec<usize>,
    /// Gate settings.
    pub settings: Vec<GateSetting>,
    /// Measured time per point, after an unmeasured warm-up of a quarter of it
    /// ([`crate::gate::WARMUP_DIVISOR`]).
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Repetitions of the whole sweep (at least 1). Each point reports the repetition with the
    /// median TPS, and every repetition's TPS in [`OltpRun::tps_reps`]. The sweeps run one after
    /// the other, so a drift of the machine during the run spreads over every point alike; within
    /// a sweep, every setting runs at one thread count before any runs at the next.
    pub reps: usize,
    /// After the sweep, pairs of points run back to back for each
    /// [`VersusBest`](super::oltp::VersusBest) peak (0: none).
    pub versus_best: usize,
    /// CPU-bound processes, each in a session of its own, running beside the whole run
    /// ([`crate::competing`]): another service's share of the CPUs. 0: none.
    pub competing_processes: u32,
    /// Extra CPU per row fetched, inside the engine's call, in ns
    /// ([`turnstile_engine::EngineConfig::row_work`]): rows as costly as seed 001's (~2500 ns)
    /// instead of this engine's ~150. 0: none.
    pub row_work_ns: u64,
}

impl OltpConfig {
    /// Defaults: 100,000 rows, range 1000, threads 1…1024, 2 s per point (a little over two
    /// minutes of load on two cores, plus a one-time load of the table).
    pub fn full() -> Self {
        OltpConfig {
            rows: 100_000,
            range: 1000,
            threads: crate::gate::DEFAULT_THREADS.to_vec(),
            settings: GateSetting::seed_settings(),
            duration: Duration::from_secs(2),
            reps: 1,
            versus_best: 0,
            competing_processes: 0,
            row_work_ns: 0,
        }
    }

    /// Under a minute: 20,000 rows, threads 1, 4, 16, 64, 256, 0.5 s per point.
    pub fn quick() -> Self {
        OltpConfig {
            rows: 20_000,
            threads: vec![1, 4, 16, 64, 256],
            duration: Duration::from_millis(500),
            ..OltpConfig::full()
        }
    }
}

/// One point.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OltpRun {
    /// Gate setting label ([`GateSetting::name`]).
    pub policy: String,
    /// Client threads.
    pub threads: usize,
    /// Transactions per second. With [`OltpConfig::reps`] > 1, the median repetition's, and
    /// every other figure of this point is that repetition's too.
    pub tps: f64,
    /// Each repetition's TPS, in the order they ran (one entry without `--reps`).
    pub tps_reps: Vec<f64>,
    /// Median transaction response time, ms: over every transaction completed in the measured
    /// window, all clients together (exact, nearest rank; 0 if none completed). Transactions
    /// still running at the window's end are not counted, so where clients starve the
    /// quantiles miss their waits and can fall below `fair_share_ms` (see `window_s`).
    pub p50_ms: f64,
    /// 99th percentile transaction response time, ms (as `p50_ms`).
    pub p99_ms: f64,
    /// 99.9th percentile transaction response time, ms (as `p50_ms`; equal to `max_ms` below
    /// 1000 transactions in the window).
    pub p999_ms: f64,
    /// Longest transaction completed in the window, ms.
    pub max_ms: f64,
    /// The response time a perfectly fair server would give every client at this throughput:
    /// threads ÷ TPS, ms (Little's law for a closed loop with no think time); 0 if nothing
    /// completed. `p99_ms` ÷ `fair_share_ms` is how much worse than fair the tail is.
    pub fair_share_ms: f64,
    /// Clients that completed no transaction in the window. See `window_s`.
    pub starved_clients: usize,
    /// Jain's fairness index over per-client completions in the window: (Σx)² ÷ (n · Σx²), 1 =
    /// perfectly even, 1/n = one client did everything, 0 = nobody completed anything.
    /// See `window_s`.
    pub jain: f64,
    /// The measured window's length, s (the configured duration, plus the time the measuring
    /// thread took to get the CPU back). TPS, the quantiles, `starved_clients` and `jain` all
    /// count the transactions completed between the window's two readings.
    ///
    /// The window is not stretched to suit the thread count: `starved_clients` and `jain` are
    /// only about the gate when the window holds several fair shares (a client of a perfectly
    /// fair server completes `window_s` ÷ `fair_share_ms` transactions in it; at 1024 threads on
    /// two cores that is one every ~0.3–0.7 s, so a 2 s window is a few). The report flags every
    /// point whose window holds fewer than [`MIN_FAIR_SHARES`](super::oltp::MIN_FAIR_SHARES);
    /// `--seconds` lengthens them.
    pub window_s: f64,
    /// Context switches per second (whole process).
    pub cs_per_s: f64,
    /// Of those, involuntary ones (a thread preempted, `ru_nivcsw`) per second.
    pub preempted_per_s: f64,
    /// User CPU, % of the machine.
    pub cpu_user: f64,
    /// System CPU, % of the machine.
    pub cpu_sys: f64,
    /// The CPU this process left unused, % of the machine: 100 − `cpu_user` − `cpu_sys`
    /// (floored at 0). Not the machine's idle time: another process's use counts here.
    pub cpu_idle: f64,
    /// The setting's row send ([`RowSend::name`]).
    pub row_send: &'static str,
    /// Process context switches in the window ÷ transactions completed in it.
    pub cs_per_txn: f64,
    /// Gate admissions in the window ÷ transactions (ticket re-entries are not admissions).
    pub admissions_per_txn: f64,
    /// Sleeps taken (before queueing, between polls, timer sleeps) ÷ transactions.
    pub sleeps_per_txn: f64,
    /// Waits in the FIFO queue ÷ transactions.
    pub queue_waits_per_txn: f64,
    /// Most sessions declared inside at the end of the interval.
    pub inside_at_end: u32,
    /// Sessions waiting at the end of the interval.
    pub waiting_at_end: usize,
    /// Median hand-off wake-up latency, µs (queue policies): from the hand-off's signal to
    /// the woken thread running.
    pub wake_p50_us: f64,
    /// 99th percentile of the same, µs.
    pub wake_p99_us: f64,
    /// Mean of the same, µs (a heavy tail shows as a mean far above the median).
    pub wake_mean_us: f64,
    /// Where the threads were, on average over the window (sampled every
    /// [`CENSUS_EVERY`](super::census::CENSUS_EVERY)): the simulator's `at_end` census, measured.
    pub census: Census,
    /// The limit in force at the window's end (`auto` moves it).
    pub limit_end: u32,
    /// `auto`: the largest limit its controller set during the point, its warm-up included
    /// (`None` for the other policies).
    pub limit_max: Option<u32>,
    /// `auto`: why its controller moved the limit during the window, window by window
    /// (`None` for the other policies).
    pub limit_reasons: Option<turnstile::LimitReasons>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_picked_by_name_with_clear_errors() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let s = GateSetting::select(&names(&["flifo", "classic"]), RowSend::Keep).unwrap();
        assert_eq!(
            s.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["flifo", "classic"]
        );
        assert!(s
            .iter()
            .all(|s| !s.fixed_limit && s.config().adaptive_limit));
        // auto@L: auto with its limit fixed at L; the rest is auto's.
        let f = GateSetting::select(&names(&["auto", "auto@8"]), RowSend::Keep).unwrap();
        assert_eq!(f[1].name, "auto@8");
        assert_eq!(
            (f[1].policy, f[1].limit, f[1].fixed_limit),
            (Policy::Auto, 8, true)
        );
        assert!(f[0].config().adaptive_limit && !f[1].config().adaptive_limit);
        assert_eq!(f[1].row_send, RowSend::Keep);
        for bad in ["auto@0", "auto@x", "auto@", "auto@1001", "auto@-1"] {
            let e = GateSetting::select(&names(&[bad]), RowSend::Keep).unwrap_err();
            assert!(e.contains(bad) && e.contains("from 1 to 1000"), "{e}");
        }
        assert!(
            GateSetting::select(&names(&["auto@4", "auto@4"]), RowSend::Keep)
                .unwrap_err()
                .contains("twice")
        );
        assert!(s.iter().all(|s| s.row_send == RowSend::Keep));
        assert_eq!(
            (s[1].limit, s[1].tickets, s[1].sleep_delay_us),
            (32, 500, 10_000)
        );
        let e = GateSetting::select(&names(&["classic", "fifo"]), RowSend::Keep).unwrap_err();
        assert!(
            e.contains("'fifo'")
                && e.contains("classic, flifo, polling, timer, unlimited, auto, auto@L"),
            "{e}"
        );
        assert!(
            GateSetting::select(&names(&["timer", "timer"]), RowSend::Keep)
                .unwrap_err()
                .contains("twice")
        );
        assert!(GateSetting::select(&[], RowSend::Keep).is_err());
        assert!(GateSetting::seed_settings()
            .iter()
            .all(|s| s.row_send == RowSend::ForceExit));
    }
}
