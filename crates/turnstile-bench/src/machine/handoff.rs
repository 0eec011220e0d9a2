//! Mutex hand-off: one default pthread mutex hammered by one thread per CPU (the serial cost
//! per acquisition and how evenly the threads got it), and the uncontended lock/unlock pair.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::futex::StopOnDrop;
use super::ns_per;
use crate::mutex::{BenchLock, Pthread};
use crate::start::StartLine;

/// `threads` threads lock one default pthread mutex, bump a shared counter and unlock, for
/// `run`: (serial ns per acquisition, acquisitions, the busiest thread's share of them).
pub(super) fn mutex_contended_ns(threads: usize, run: Duration) -> Result<(f64, u64, f64), String> {
    let m = Pthread::<false>::create();
    let counter = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let start = StartLine::new(threads);
    let (elapsed, per_thread) = thread::scope(|s| {
        let hs: Result<Vec<_>, _> = (0..threads)
            .map(|_| {
                thread::Builder::new().spawn_scoped(s, || {
                    if !start.ready() {
                        return 0;
                    }
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // A plain load and store, not an atomic add: the mutex alone makes the
                        // increment safe, as in a real critical section.
                        m.with(|| {
                            counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed)
                        });
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let hs = hs.map_err(|e| {
            // The threads started so far see the call-off and end, so the scope can.
            start.call_off();
            crate::start::refused(threads, &e)
        })?;
        let _stop = StopOnDrop(&stop);
        start.start();
        let t = Instant::now();
        thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        let elapsed = t.elapsed();
        let ns: Result<Vec<u64>, _> = hs.into_iter().map(|h| h.join()).collect();
        Ok::<_, String>((elapsed, ns))
    })?;
    let per_thread = per_thread.map_err(|_| "a mutex thread panicked".to_string())?;
    let total: u64 = per_thread.iter().sum();
    if counter.load(Ordering::Relaxed) != total {
        return Err(format!(
            "the pthread mutex lost updates: counter {} after {total} acquisitions",
            counter.load(Ordering::Relaxed)
        ));
    }
    let busiest = per_thread.iter().copied().max().unwrap_or(0);
    Ok((
        ns_per(elapsed, total),
        total,
        busiest as f64 / total.max(1) as f64,
    ))
}

/// ns per lock+unlock pair of a default pthread mutex nobody else uses.
pub(super) fn mutex_uncontended_ns(pairs: u64) -> f64 {
    let m = Pthread::<false>::create();
    let counter = AtomicU64::new(0);
    let t = Instant::now();
    for _ in 0..pairs {
        m.with(|| counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed));
    }
    ns_per(t.elapsed(), pairs)
}
