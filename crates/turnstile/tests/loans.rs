//! `auto`'s slot loans (the automatic step-out) against sessions that move between threads,
//! and the stall check's hand-off against a panicking waker. A slot is lent only by the
//! thread running its session's call; a thread a session left lends nothing of it. No test
//! asserts a timing: waits for another thread poll under a watchdog, and a join that never
//! comes fails after a generous bound instead of hanging.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::channel;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use turnstile::mutex::{current_waiters, Instrumented};
use turnstile::{Gate, GateConfig, GateError, Policy, Session};

/// `auto` with a fixed limit and a 1 s quantum: a session keeps its slot between calls.
fn fixed_auto(limit: u32) -> Gate {
    Gate::new(
        GateConfig::new(Policy::Auto)
            .limit(limit)
            .adaptive_limit(false)
            .quantum(Duration::from_secs(1)),
    )
    .unwrap()
}

/// This thread's `/proc` stat file (its scheduler state follows the name in parentheses).
fn this_thread_stat() -> std::path::PathBuf {
    let rel = std::fs::read_link("/proc/thread-self").expect("Linux /proc");
    std::path::Path::new("/proc").join(rel).join("stat")
}

/// Whether a thread (its stat file `stat`) is registered as waiting for the instrumented lock
/// `lock` and asleep: parked, so whatever its park lends is lent by now. Registration is read
/// first, so the sleep seen is one after it.
fn parked(stat: &std::path::Path, lock: &str) -> bool {
    current_waiters().iter().any(|w| w.lock == lock)
        && std::fs::read_to_string(stat)
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| r.trim_start().starts_with('S'))
            })
            .unwrap_or(false)
}

/// Polls `done` until it holds; panics after 20 s (a lost wake-up, not slowness).
fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "watchdog: never saw {what}"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Calls running at once: now, and the most seen.
#[derive(Default)]
struct Running {
    now: AtomicU32,
    max: AtomicU32,
}

impl Running {
    fn begin(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
    }
    fn end(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn a_session_moved_to_another_thread_is_not_lent_by_the_thread_it_left() {
    // Thread A admits S and ends the call (S keeps its slot for the quantum), hands S to this
    // thread, then parks on a turnstile lock. A runs no call of S any more: its park must
    // lend nothing, or S's next call here runs on a slot another session is given.
    let g = fixed_auto(1);
    let m = Arc::new(Instrumented::new("loans-left-thread", ()));
    let held = m.lock();
    let running = Arc::new(Running::default());
    let (to_here, from_a) = channel::<Session>();
    let (stat_tx, stat_rx) = channel();
    let a = {
        let (g, m) = (g.clone(), m.clone());
        thread::spawn(move || {
            stat_tx.send(this_thread_stat()).unwrap();
            let mut s = g.named_session("moved");
            assert!(s.enter().unwrap(), "admitted on A");
            s.exit().unwrap();
            to_here.send(s).unwrap();
            drop(m.lock()); // parks, S's call over on this thread
        })
    };
    let mut s = from_a.recv().unwrap();
    let a_stat = stat_rx.recv().unwrap();
    poll_until("A parked on the lock", || {
        parked(&a_stat, "loans-left-thread")
    });
    // S's next call, on this thread: a re-entry on the slot S kept.
    assert!(!s.enter().unwrap(), "a re-entry: S kept its slot");
    running.begin();
    // A newcomer asks for a slot while S's call runs: limit 1, so it must not get one (it
    // gives up after its wait timeout; a bound on the test, not a timing).
    let newcomer = {
        let (g, running) = (g.clone(), running.clone());
        thread::spawn(move || {
            let mut c = g.named_session("newcomer");
            c.set_wait_timeout(Some(Duration::from_millis(300)));
            match c.enter() {
                Ok(_) => {
                    running.begin();
                    let inside = g.stats().inside;
                    running.end();
                    c.exit().unwrap();
                    c.end_statement();
                    Some(inside)
                }
                Err(GateError::TimedOut { .. }) => None,
                Err(e) => panic!("newcomer: {e}"),
            }
        })
    };
    let newcomer_saw = newcomer.join().unwrap();
    let st = g.stats();
    assert!(
        running.max.load(Ordering::SeqCst) <= 1,
        "{} calls ran at once under limit 1 (the newcomer saw {newcomer_saw:?} inside): {st:?}",
        running.max.load(Ordering::SeqCst)
    );
    assert_eq!(
        st.inside,
        running.now.load(Ordering::SeqCst),
        "counted inside vs calls running: {st:?}"
    );
    assert_eq!((st.stepped_out, st.counters.step_outs), (0, 0), "{st:?}");
    running.end();
    s.exit().unwrap();
    s.end_statement();
    drop(held);
    a.join().unwrap();
    let st = g.stats();
    assert_eq!((st.inside, st.queued, st.stepped_out), (0, 0, 0), "{st:?}");
}

#[test]
fn a_reclaim_does_not_deadlock_against_a_session_that_moved() {
    // A admits S, ends the call, hands S to B and parks on m1. B runs S's next call. C is
    // admitted, takes m and parks on m2 holding it; D takes the slot C lent and stays until
    // B is done. Then m1 and m2 are released, and B takes m. Had A lent S's slot, A's reclaim
    // would count a slot above the limit, C's reclaim would queue holding m (two inside:
    // twice the limit), and B, running S's call, would park on m lending nothing: nobody
    // could leave. Every thread must finish.
    let g = fixed_auto(1);
    let m1 = Arc::new(Instrumented::new("loans-m1", ()));
    let m2 = Arc::new(Instrumented::new("loans-m2", ()));
    let m = Arc::new(Instrumented::new("loans-m", ()));
    let (held1, held2) = (m1.lock(), m2.lock());
    let (to_b, from_a) = channel::<Session>();
    let (a_stat_tx, a_stat_rx) = channel();
    let a = {
        let (g, m1) = (g.clone(), m1.clone());
        thread::spawn(move || {
            a_stat_tx.send(this_thread_stat()).unwrap();
            let mut s = g.named_session("moved");
            assert!(s.enter().unwrap(), "admitted on A");
            s.exit().unwrap();
            to_b.send(s).unwrap();
            drop(m1.lock());
        })
    };
    let a_stat = a_stat_rx.recv().unwrap();
    poll_until("A parked on m1", || parked(&a_stat, "loans-m1"));
    let (b_in_tx, b_in_rx) = channel::<()>();
    let (go_b_tx, go_b_rx) = channel::<()>();
    let (b_done_tx, b_done_rx) = channel::<()>();
    let b = {
        let m = m.clone();
        thread::spawn(move || {
            let mut s = from_a.recv().unwrap();
            assert!(!s.enter().unwrap(), "a re-entry: S kept its slot");
            b_in_tx.send(()).unwrap();
            go_b_rx.recv().unwrap();
            drop(m.lock());
            s.exit().unwrap();
            s.end_statement();
            drop(b_done_tx);
        })
    };
    b_in_rx.recv().unwrap();
    let (c_stat_tx, c_stat_rx) = channel();
    let c = {
        let (g, m, m2) = (g.clone(), m.clone(), m2.clone());
        thread::spawn(move || {
            c_stat_tx.send(this_thread_stat()).unwrap();
            let mut c = g.named_session("c");
            c.enter().unwrap();
            let holding = m.lock();
            drop(m2.lock());
            drop(holding);
            c.exit().unwrap();
            c.end_statement();
        })
    };
    let c_stat = c_stat_rx.recv().unwrap();
    poll_until("C parked on m2 holding m, or queued for a slot", || {
        parked(&c_stat, "loans-m2") || g.stats().queued == 1
    });
    let (d_in_tx, d_in_rx) = channel::<()>();
    let d = {
        let g = g.clone();
        thread::spawn(move || {
            let mut d = g.named_session("d");
            d.enter().unwrap();
            d_in_tx.send(()).unwrap();
            let _ = b_done_rx.recv(); // B's end: its sender dropped
            d.exit().unwrap();
            d.end_statement();
        })
    };
    let mut d_in = false;
    poll_until("D inside, or queued", || {
        d_in |= d_in_rx.try_recv().is_ok();
        d_in || g.stats().queued == 2
    });
    drop(held1);
    poll_until("A done", || a.is_finished());
    a.join().unwrap();
    drop(held2);
    poll_until("a wait queued", || g.stats().queued >= 1);
    go_b_tx.send(()).unwrap();
    let start = Instant::now();
    let bound = Duration::from_secs(10);
    while !(b.is_finished() && c.is_finished() && d.is_finished()) {
        if start.elapsed() > bound {
            let snap = g.snapshot();
            g.set_limit(3).unwrap(); // frees the threads before the test fails
            panic!("deadlock: B, C and D not done after {bound:?}:\n{snap}");
        }
        thread::sleep(Duration::from_millis(1));
    }
    for t in [b, c, d] {
        t.join().unwrap();
    }
    let st = g.stats();
    assert_eq!((st.inside, st.queued, st.stepped_out), (0, 0, 0), "{st:?}");
    assert_eq!(st.auto.as_ref().map(|a| a.extra), Some(0), "{st:?}");
}

#[cfg(feature = "async")]
#[path = "common/wait_for.rs"]
mod wait_for;

#[cfg(feature = "async")]
#[path = "common/manual_waker.rs"]
#[allow(dead_code)] // shared with other test files; this one counts no wakes
mod manual_waker;

#[cfg(feature = "async")]
mod stall_check {
    use super::*;
    use std::future::Future;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::task::{Context, Poll, Wake, Waker};

    use super::manual_waker::Task;
    use super::wait_for::wait_for;

    /// A waker that panics when woken: foreign code the gate must survive.
    struct PanickingWaker;

    impl Wake for PanickingWaker {
        fn wake(self: Arc<Self>) {
            panic!("a foreign waker panics");
        }
    }

    #[test]
    fn a_panicking_waker_during_a_stall_check_leaks_no_slot() {
        // The holder keeps the only slot without declaring a wait. An async waiter queues
        // first (the oldest: once past the age cap it is served first), then a thread
        // session, which keeps the stall watch (async waiters never do). Its stall check
        // raises the limit and hands the async waiter a slot; that waiter's waker panics,
        // and the panic goes on out of the keeper's enter. The keeper's own queued wait
        // must not stay behind: not queued, not released and counted for nobody.
        let g = Gate::new(GateConfig::new(Policy::Auto).limit(1)).unwrap();
        let mut holder = g.named_session("holder");
        assert!(holder.enter().unwrap());
        let mut w = g.async_session("async-waiter").unwrap();
        let waker = Waker::from(Arc::new(PanickingWaker));
        let mut enter = Box::pin(w.enter());
        assert!(enter
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        wait_for(&g, "the async waiter queued", |s| s.queued == 1);
        let keeper = {
            let g = g.clone();
            thread::spawn(move || {
                let mut k = g.named_session("keeper");
                let r = catch_unwind(AssertUnwindSafe(|| k.enter().map(|_| ())));
                if matches!(r, Ok(Ok(()))) {
                    k.exit().unwrap();
                }
                r.is_err()
            })
        };
        let start = Instant::now();
        while !keeper.is_finished() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "watchdog: the keeper never got past its wait:\n{}",
                g.snapshot()
            );
            thread::sleep(Duration::from_millis(1));
        }
        assert!(
            keeper.join().unwrap(),
            "the waker's panic reached the keeper's enter"
        );
        assert!(g.stats().auto.unwrap().stall_ticks >= 1);
        // The async waiter was released before its waker panicked: polled again, it is in.
        assert!(matches!(Task::new().poll(&mut enter), Poll::Ready(Ok(_))));
        drop(enter);
        drop(w);
        holder.exit().unwrap();
        holder.end_statement();
        let st = g.stats();
        assert_eq!(
            (
                st.inside,
                st.queued,
                st.waiting,
                st.fifo_pending,
                st.lifo_running
            ),
            (0, 0, 0, 0, 0),
            "{st:?}"
        );
    }
}
