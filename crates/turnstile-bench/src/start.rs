//! A start line for a run's threads: each waits there until every one has arrived, then all
//! go at once (as [`std::sync::Barrier`]); unlike a barrier, the run can be called off, so
//! that a thread the OS refused to start does not leave the others waiting for ever.

use std::sync::{Condvar, Mutex, MutexGuard};

/// See the module documentation.
pub(crate) struct StartLine {
    state: Mutex<Line>,
    cv: Condvar,
}

struct Line {
    expected: usize,
    arrived: usize,
    /// `Some(true)`: started; `Some(false)`: called off.
    outcome: Option<bool>,
}

impl StartLine {
    /// A line for `threads` workers (and one coordinator calling [`StartLine::start`]).
    pub(crate) fn new(threads: usize) -> Self {
        StartLine {
            state: Mutex::new(Line {
                expected: threads,
                arrived: 0,
                outcome: None,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Line> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker arrives and waits: `true` when the run starts, `false` if it was called off.
    pub(crate) fn ready(&self) -> bool {
        let mut s = self.lock();
        s.arrived += 1;
        if s.arrived == s.expected {
            // Only the coordinator waits for this (the workers wait for the outcome).
            self.cv.notify_all();
        }
        loop {
            if let Some(go) = s.outcome {
                return go;
            }
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The coordinator waits for every worker, then starts them all.
    pub(crate) fn start(&self) {
        let mut s = self.lock();
        while s.arrived < s.expected && s.outcome.is_none() {
            s = self.cv.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.outcome.get_or_insert(true);
        self.cv.notify_all();
    }

    /// Calls the run off: every worker waiting, or still to arrive, gets `false`.
    pub(crate) fn call_off(&self) {
        self.lock().outcome = Some(false);
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
}
