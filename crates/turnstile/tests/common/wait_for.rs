//! Waiting for another thread to reach a state, by polling the gate's snapshot under a
//! watchdog (shared by the gate test files: `#[path = "common/wait_for.rs"] mod wait_for;`).

use std::thread;
use std::time::{Duration, Instant};

use turnstile::{Gate, GateSnapshot};

/// Polls the snapshot until `pred` holds; panics after 20 s (a lost wake-up, not slowness).
pub fn wait_for(gate: &Gate, what: &str, pred: impl Fn(&GateSnapshot) -> bool) -> GateSnapshot {
    let start = Instant::now();
    loop {
        let s = gate.snapshot();
        if pred(&s) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "watchdog: never saw {what}; last snapshot:\n{s}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}
