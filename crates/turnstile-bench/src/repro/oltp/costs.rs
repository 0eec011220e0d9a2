//! The engine's own costs for the simulator's OLTP workload, measured on one connection with
//! nothing else running, so that `sim oltp` can stand for `repro oltp` on the same machine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::{Connection, Engine, RowSend};

use super::{GateSetting, OltpConfig, Rng, TABLE};
use crate::repro::{Common, Progress, ReproError};

/// The engine's own costs for the simulator's OLTP workload, measured on one connection with
/// nothing else running (`turnstile calibrate --oltp FILE`): what `sim oltp` needs to stand
/// for `repro oltp` on the same machine. Field names are `sim oltp --config` keys.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EngineCosts {
    /// Rows per range.
    pub range: u64,
    /// One point select, µs (statement, call, row decode).
    pub point_us: f64,
    /// One row of a range fetched on tickets, µs.
    pub row_us: f64,
    /// The sort (ORDER BY c) of one range's rows after its statement, µs.
    pub sort_us: f64,
    /// One gate call that reaches the policy (an admission or an exit that leaves), µs: half
    /// the extra cost per row of a sent range under `force-exit` over `keep`, on an
    /// uncontended `polling` gate.
    pub gate_call_us: f64,
    /// What a switch between two clients costs this workload, µs: two connections pinned to
    /// one CPU hand the CPU to each other after every row they fetch (each its own range, as
    /// OLTP clients do), against one connection fetching the same rows alone; the difference
    /// per switch (the direct cost, the futex calls, and the refill of what the other client
    /// evicted). `None` off Linux.
    pub switch_us: Option<f64>,
}

/// Measures [`EngineCosts`] on `cfg.rows` rows: `reps` repetitions of each figure, keeping the
/// fastest (the least disturbed by the rest of a shared machine: a cost is a floor, and noise
/// only adds to it), on an uncontended gate of the `polling` setting (limit 32, tickets 500).
pub fn measure_costs(
    common: &Common,
    cfg: &OltpConfig,
    reps: usize,
    progress: &mut dyn Progress,
) -> Result<EngineCosts, ReproError> {
    if cfg.rows < cfg.range || cfg.range == 0 || reps == 0 {
        return Err(ReproError::BadInput(
            "costs: the table must hold a range, and repetitions must be positive".into(),
        ));
    }
    let engine = common.open_engine(Duration::ZERO, Duration::from_nanos(cfg.row_work_ns))?;
    progress.step(&format!("engine costs: table of {} rows", cfg.rows));
    engine.ensure_table(TABLE, cfg.rows, &mut |d, t| progress.load(d, t))?;
    let gate = GateSetting {
        name: "polling".into(),
        policy: Policy::Polling,
        limit: 32,
        tickets: 500,
        sleep_delay_us: 10_000,
        row_send: RowSend::Keep,
        fixed_limit: false,
    }
    .gate()?;
    let mut c = Connection::new(engine.clone(), &gate, "costs");
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let range = cfg.range;
    let span = cfg.rows - range + 1;
    // Enough work per repetition for a stable median on a noisy machine: ~20k rows.
    let ranges = (20_000 / range as usize).max(5);
    let fastest = |v: Vec<f64>| v.into_iter().fold(f64::INFINITY, f64::min);
    let mut timed = |c: &mut Connection,
                     f: &mut dyn FnMut(&mut Connection, &mut Rng) -> Result<(), ReproError>|
     -> Result<f64, ReproError> {
        let mut v = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            f(c, &mut rng)?;
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(fastest(v))
    };
    progress.step("engine costs: point selects, ranges, sorts, forced exits");
    let points = 5_000;
    let point_us = timed(&mut c, &mut |c, rng| {
        for _ in 0..points {
            std::hint::black_box(c.point_select(TABLE, 1 + rng.below(cfg.rows))?);
        }
        Ok(())
    })? / points as f64;
    let scan = |c: &mut Connection, rng: &mut Rng, sent: bool| -> Result<(), ReproError> {
        for _ in 0..ranges {
            let lo = 1 + rng.below(span);
            if sent {
                c.scan_sent(TABLE, lo, lo + range - 1, |r| {
                    std::hint::black_box(r.c);
                })?;
            } else {
                c.scan(TABLE, lo, lo + range - 1, |r| {
                    std::hint::black_box(r.c);
                })?;
            }
        }
        Ok(())
    };
    let scan_us = timed(&mut c, &mut |c, rng| scan(c, rng, false))? / ranges as f64;
    let sorted_us = timed(&mut c, &mut |c, rng| {
        for _ in 0..ranges {
            let lo = 1 + rng.below(span);
            std::hint::black_box(c.range_sorted_by_c(TABLE, lo, lo + range - 1, false)?);
        }
        Ok(())
    })? / ranges as f64;
    c.set_row_send(RowSend::Keep);
    let keep_us = timed(&mut c, &mut |c, rng| scan(c, rng, true))? / ranges as f64;
    c.set_row_send(RowSend::ForceExit);
    let force_us = timed(&mut c, &mut |c, rng| scan(c, rng, true))? / ranges as f64;
    #[cfg(target_os = "linux")]
    let switch_us = {
        progress.step("engine costs: a switch between two clients after every row");
        let v = (0..reps)
            .map(|i| switch_cost_us(&engine, cfg, i as u32))
            .collect::<Result<Vec<_>, _>>()?;
        Some(fastest(v))
    };
    #[cfg(not(target_os = "linux"))]
    let switch_us = None;
    Ok(EngineCosts {
        range: range as u64,
        point_us,
        row_us: scan_us / range as f64,
        sort_us: (sorted_us - scan_us).max(0.0),
        gate_call_us: ((force_us - keep_us) / range as f64 / 2.0).max(0.0),
        switch_us,
    })
}

/// One measurement of [`EngineCosts::switch_us`]: rows per client per run.
#[cfg(target_os = "linux")]
fn switch_cost_us(engine: &Arc<Engine>, cfg: &OltpConfig, rep: u32) -> Result<f64, ReproError> {
    use std::sync::atomic::AtomicU32;

    use crate::machine::{allowed_cpus, give, pin_to, take};

    const ROWS: u32 = 20_000;
    let cpu = *allowed_cpus()
        .map_err(ReproError::BadInput)?
        .last()
        .ok_or_else(|| ReproError::BadInput("no CPU allowed".into()))?;
    let span = cfg.rows - cfg.range + 1;
    let gate = Gate::new(GateConfig::new(Policy::Unlimited))?;
    // Each client scans ROWS rows in ranges of `range` from its own random starts.
    let client = |seed: u64, each: &mut dyn FnMut()| -> Result<(), ReproError> {
        let mut c = Connection::new(engine.clone(), &gate, "switch");
        let mut rng = Rng(seed);
        let mut left = ROWS;
        while left > 0 {
            let lo = 1 + rng.below(span);
            let n = cfg.range.min(left);
            c.scan(TABLE, lo, lo + n - 1, |r| {
                std::hint::black_box(r.c);
                each();
            })?;
            left -= n;
        }
        Ok(())
    };
    let seed = |k: u64| 0x9E37_79B9_7F4A_7C15 ^ (k + 2 * rep as u64 + 1);
    // Alone: one thread pinned to the CPU fetches both clients' rows.
    let alone = thread::scope(|s| {
        s.spawn(|| -> Result<Duration, ReproError> {
            pin_to(cpu).map_err(ReproError::BadInput)?;
            let t = Instant::now();
            client(seed(0), &mut || {})?;
            client(seed(1), &mut || {})?;
            Ok(t.elapsed())
        })
        .join()
        .map_err(|_| ReproError::Panicked("switch-cost thread".into()))?
    })?;
    // Ping-pong: two threads pinned to the CPU hand it over after every row.
    let (to_a, to_b) = (AtomicU32::new(0), AtomicU32::new(0));
    let (done_a, done_b) = (AtomicBool::new(false), AtomicBool::new(false));
    let both = thread::scope(|s| {
        let b = s.spawn(|| -> Result<(), ReproError> {
            pin_to(cpu).map_err(ReproError::BadInput)?;
            take(&to_b);
            client(seed(1), &mut || {
                if !done_a.load(Ordering::Acquire) {
                    give(&to_a);
                    take(&to_b);
                }
            })?;
            done_b.store(true, Ordering::Release);
            give(&to_a);
            Ok(())
        });
        let a = s.spawn(|| -> Result<Duration, ReproError> {
            pin_to(cpu).map_err(ReproError::BadInput)?;
            let t = Instant::now();
            client(seed(0), &mut || {
                if !done_b.load(Ordering::Acquire) {
                    give(&to_b);
                    take(&to_a);
                }
            })?;
            done_a.store(true, Ordering::Release);
            give(&to_b);
            // Wait for B to finish its rows (it runs alone from here).
            while !done_b.load(Ordering::Acquire) {
                take(&to_a);
            }
            Ok(t.elapsed())
        });
        let ra = a
            .join()
            .map_err(|_| ReproError::Panicked("switch-cost thread".into()))?;
        b.join()
            .map_err(|_| ReproError::Panicked("switch-cost thread".into()))??;
        ra
    })?;
    let switches = 2.0 * ROWS as f64;
    Ok(((both.as_secs_f64() - alone.as_secs_f64()) * 1e6 / switches).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_costs_are_positive_and_a_forced_exit_costs_no_less_than_keeping_the_slot() {
        let dir =
            std::env::temp_dir().join(format!("turnstile-repro-costs-{}", std::process::id()));
        let common = Common {
            data_dir: dir.clone(),
            fsync_delay: Some(Duration::ZERO),
        };
        let cfg = OltpConfig {
            rows: 3000,
            range: 100,
            ..OltpConfig::quick()
        };
        let c = measure_costs(&common, &cfg, 1, &mut crate::repro::Quiet).unwrap();
        assert_eq!(c.range, 100);
        for (name, v) in [("point", c.point_us), ("row", c.row_us)] {
            assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        }
        for (name, v) in [("sort", c.sort_us), ("gate call", c.gate_call_us)] {
            assert!(v.is_finite() && v >= 0.0, "{name} = {v}");
        }
        #[cfg(target_os = "linux")]
        assert!(
            c.switch_us.is_some_and(|v| v.is_finite() && v >= 0.0),
            "{c:?}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
