//! What one hand-off costs in CPU where the gate runs, measured once per process: the gate's
//! controller counts that much CPU per hand-off as spent on the gate, not on statements.

use std::sync::OnceLock;
use std::time::Duration;

/// Round trips per batch, and batches: the median batch is taken, so a preemption of the
/// measuring threads spoils one batch, not the figure.
#[cfg(not(loom))]
const ROUND_TRIPS: u32 = 50;
#[cfg(not(loom))]
const BATCHES: usize = 5;

/// The CPU one hand-off costs: a thread wakes another (`unpark`, a futex wake) and parks,
/// and the other switches in; the two threads' CPU time over the hand-offs made, median of
/// [`BATCHES`]. Measured on first use (a few milliseconds), then remembered. Where a thread's
/// CPU clock cannot be read, the wall time of a hand-off (an upper bound). A cache refill
/// after the switch is not counted: it depends on the statement's working set, so the
/// figure is a floor and the controller errs towards fewer raises.
pub(crate) fn handoff_cpu() -> Duration {
    static COST: OnceLock<Duration> = OnceLock::new();
    *COST.get_or_init(measure)
}

#[cfg(not(loom))]
fn measure() -> Duration {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::thread;

    let now = || crate::clock::thread_cpu_ns();
    let mut per = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        // `turn` counts hand-offs: even, the main thread's turn; odd, the echo's.
        let turn = Arc::new(AtomicU32::new(0));
        let main = thread::current();
        let t = turn.clone();
        let echo = thread::spawn(move || {
            let c0 = crate::clock::thread_cpu_ns();
            let w0 = std::time::Instant::now();
            for i in 0..ROUND_TRIPS {
                while t.load(Ordering::Acquire) != 2 * i + 1 {
                    thread::park();
                }
                t.store(2 * i + 2, Ordering::Release);
                main.unpark();
            }
            (
                crate::clock::thread_cpu_ns().zip(c0).map(|(a, b)| a - b),
                w0.elapsed(),
            )
        });
        let c0 = now();
        for i in 0..ROUND_TRIPS {
            turn.store(2 * i + 1, Ordering::Release);
            echo.thread().unpark();
            while turn.load(Ordering::Acquire) != 2 * i + 2 {
                thread::park();
            }
        }
        let mine = now().zip(c0).map(|(a, b)| a - b);
        let Ok((theirs, wall)) = echo.join() else {
            continue;
        };
        let hand_offs = u64::from(2 * ROUND_TRIPS);
        per.push(match (mine, theirs) {
            (Some(a), Some(b)) => (a + b) / hand_offs,
            _ => wall.as_nanos() as u64 / hand_offs,
        });
    }
    per.sort_unstable();
    Duration::from_nanos(per.get(per.len() / 2).copied().unwrap_or(0))
}

/// Loom models build their parameters by hand; nothing measures under the model checker.
#[cfg(loom)]
fn measure() -> Duration {
    Duration::ZERO
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn the_hand_off_cost_is_measured_once_and_remembered() {
        let a = super::handoff_cpu();
        assert_eq!(super::handoff_cpu(), a, "remembered, not measured again");
    }
}
