//! The gates running now, by name, so a monitor thread (the CLI's `--metrics-file`) can export
//! them while a benchmark or reproduction runs. Each run registers its gate with [`watch`] for
//! as long as the returned [`Watched`] lives.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use turnstile::{Gate, GateStats};

struct Live {
    running: Vec<(u64, String, Gate)>,
    /// The last gate to finish, with its final stats: exported while nothing runs.
    last: Option<(String, GateStats)>,
}

static LIVE: Mutex<Live> = Mutex::new(Live {
    running: Vec::new(),
    last: None,
});
static NEXT: AtomicU64 = AtomicU64::new(1);

fn live() -> std::sync::MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A gate registered by [`watch`]; dropping it unregisters the gate, keeping its final stats
/// as the last finished gate.
#[must_use = "the gate is watched only while this lives"]
pub struct Watched(u64);

impl Drop for Watched {
    fn drop(&mut self) {
        let mut l = live();
        if let Some(i) = l.running.iter().position(|(id, _, _)| *id == self.0) {
            let (_, name, gate) = l.running.swap_remove(i);
            l.last = Some((name, gate.stats()));
        }
    }
}

/// Registers `gate` under `name` (the run: policy and setting, such as `oltp/classic/64
/// threads`) until the returned guard is dropped.
pub fn watch(name: impl Into<String>, gate: &Gate) -> Watched {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    live().running.push((id, name.into(), gate.clone()));
    Watched(id)
}

/// The stats of every gate running now, by name in registration order; when none runs, the
/// final stats of the last one to finish (none before the first).
pub fn stats() -> Vec<(String, GateStats)> {
    let l = live();
    if l.running.is_empty() {
        return l.last.iter().cloned().collect();
    }
    let mut v: Vec<(u64, String, GateStats)> = l
        .running
        .iter()
        .map(|(id, n, g)| (*id, n.clone(), g.stats()))
        .collect();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|(_, n, s)| (n, s)).collect()
}

/// [`stats`] as Prometheus text, each gate labelled `gate="<name>"` (see `turnstile::metrics`).
pub fn prometheus() -> String {
    let stats = stats();
    let items: Vec<(&str, &GateStats)> = stats.iter().map(|(n, s)| (n.as_str(), s)).collect();
    let mut out = String::new();
    turnstile::metrics::write_prometheus(&mut out, &items).expect("writing to a String");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstile::{GateConfig, Policy};

    #[test]
    fn a_watched_gate_is_exported_while_it_runs_and_its_final_stats_after() {
        let gate = Gate::new(GateConfig::new(Policy::Classic).limit(2)).unwrap();
        let w = watch("live-test/classic", &gate);
        assert!(prometheus().contains("turnstile_gate_limit{gate=\"live-test/classic\"} 2"));
        let mut s = gate.session();
        drop(s.begin().enter().unwrap());
        drop(w);
        // Another test may register gates concurrently; ours is then no longer listed, or is
        // the last finished one with its admission counted.
        let text = prometheus();
        if text.contains("gate=\"live-test/classic\"") {
            assert!(text.contains("turnstile_gate_admissions_total{gate=\"live-test/classic\"} 1"));
        }
    }
}
