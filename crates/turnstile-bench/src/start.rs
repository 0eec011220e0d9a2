//! A start line for a run's threads: each waits there until every one has arrived, then all
//! go at once (as [`std::sync::Barrier`]); unlike a barrier, the run can be called off, so
//! that a thread the OS refused to start does not leave the others waiting for ever.
//!
//! The workers are released one `unpark` each and read the outcome from an atomic, never
//! from under a lock: a condvar's `notify_all` would wake them all onto its mutex, which
//! lets them go one at a time, each after the one before got a CPU, runs and unlocks. With
//! the first ones released already filling the CPUs, that chain is slow: at 1024 clients,
//! hundreds may not have crossed a condvar start line by the end of a point's window, and
//! would count as starved (docs/BENCHMARKS.md).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, Thread};
use std::time::Duration;

/// [`StartLine::outcome`]: no decision yet.
const WAITING: u8 = 0;
/// The run started.
const GO: u8 = 1;
/// The run was called off.
const OFF: u8 = 2;

/// See the module documentation.
pub(crate) struct StartLine {
    state: Mutex<Line>,
    /// Only the coordinator waits on it (for the last arrival).
    cv: Condvar,
    /// `WAITING`, `GO` or `OFF`; set once, under `state`'s lock.
    outcome: AtomicU8,
    /// Workers that have crossed the line (returned `true` from [`StartLine::ready`]).
    crossed: AtomicUsize,
}

struct Line {
    expected: usize,
    arrived: usize,
    /// The workers waiting for the outcome, unparked when it is set.
    parked: Vec<Thread>,
}

impl StartLine {
    /// A line for `threads` workers (and one coordinator calling [`StartLine::start`]).
    pub(crate) fn new(threads: usize) -> Self {
        StartLine {
            state: Mutex::new(Line {
                expected: threads,
                arrived: 0,
                parked: Vec::with_capacity(threads),
            }),
            cv: Condvar::new(),
            outcome: AtomicU8::new(WAITING),
            crossed: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Line> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker arrives and waits: `true` when the run starts, `false` if it was called off.
    pub(crate) fn ready(&self) -> bool {
        {
            let mut s = self.lock();
            s.arrived += 1;
            if s.arrived == s.expected {
                self.cv.notify_all();
            }
            // Registered under the lock the outcome is set under: either the outcome is
            // already set (read below) or the setter will unpark this thread.
            if self.outcome.load(Ordering::Acquire) == WAITING {
                s.parked.push(thread::current());
            }
        }
        loop {
            match self.outcome.load(Ordering::Acquire) {
                // A spurious or early return of `park` (its token may be left from an
                // earlier `unpark` of this thread) only loops.
                WAITING => thread::park(),
                GO => {
                    self.crossed.fetch_add(1, Ordering::Release);
                    return true;
                }
                _ => return false,
            }
        }
    }

    /// Sets the outcome once and unparks every registered worker (outside the lock).
    fn decide(&self, mut s: MutexGuard<'_, Line>, outcome: u8) {
        if self.outcome.load(Ordering::Relaxed) == WAITING {
            self.outcome.store(outcome, Ordering::Release);
        }
        let parked = std::mem::take(&mut s.parked);
        drop(s);
        for t in parked {
            t.unpark();
        }
    }

    /// The coordinator waits for every worker, starts them all, and returns once every one
    /// has crossed the line (so a run's clock starts with all of them running).
    pub(crate) fn start(&self) {
        let mut s = self.lock();
        while s.arrived < s.expected && self.outcome.load(Ordering::Relaxed) == WAITING {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        let expected = s.expected;
        self.decide(s, GO);
        if self.outcome.load(Ordering::Acquire) != GO {
            return;
        }
        // Each crossing is a worker that got a CPU once: with the CPUs already full of the
        // first ones, the last may take a few scheduler periods. Polled, not waited on, so
        // that the workers never touch a lock after the line.
        while self.crossed.load(Ordering::Acquire) < expected {
            thread::sleep(Duration::from_micros(200));
        }
    }

    /// Calls the run off (before [`StartLine::start`]; after it, the outcome stays a start):
    /// every worker waiting, or still to arrive, gets `false`.
    pub(crate) fn call_off(&self) {
        let s = self.lock();
        self.decide(s, OFF);
        self.cv.notify_all();
    }
}

/// The error for a run whose `threads` threads the OS would not all start.
pub(crate) fn refused(threads: usize, e: &std::io::Error) -> String {
    format!(
        "cannot start {threads} threads: {e} (the OS limit on threads or memory: `ulimit -u`, `ulimit -v`)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn workers_start_together_once_all_arrived_or_all_give_up_when_called_off() {
        let line = Arc::new(StartLine::new(3));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let l = line.clone();
                std::thread::spawn(move || l.ready())
            })
            .collect();
        line.start();
        assert!(hs.into_iter().all(|h| h.join().unwrap()));
        // Two of three started (the third could not be): called off, both return.
        let line = Arc::new(StartLine::new(3));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let l = line.clone();
                std::thread::spawn(move || l.ready())
            })
            .collect();
        line.call_off();
        assert!(hs.into_iter().all(|h| !h.join().unwrap()));
        // One arriving after the call-off does not wait either.
        assert!(!line.ready());
    }

    #[test]
    fn start_returns_once_every_worker_crossed_and_a_late_arrival_still_goes() {
        let n = 64;
        let line = Arc::new(StartLine::new(n));
        let crossed = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let (l, c) = (line.clone(), crossed.clone());
                std::thread::spawn(move || {
                    let go = l.ready();
                    c.fetch_add(1, Ordering::SeqCst);
                    go
                })
            })
            .collect();
        line.start();
        // Every worker had crossed when `start` returned (they count after crossing, so
        // the line's own count is the one to read here).
        assert_eq!(line.crossed.load(Ordering::SeqCst), n);
        assert!(hs.into_iter().all(|h| h.join().unwrap()));
        assert_eq!(crossed.load(Ordering::SeqCst), n);
        // A call-off after the start changes nothing: the outcome is set once.
        line.call_off();
        assert!(line.ready(), "a late arrival after the start still goes");
    }
}
