//! `turnstile::Condvar` with `turnstile::Mutex`: no lost notify under stress (a watchdog turns
//! a lost one into a failure instead of a hang), `notify_all`, timeouts that keep the mutex,
//! `wait_while`, and the one-mutex-at-a-time rule. Also run on the off-Linux parking path:
//! `RUSTFLAGS="--cfg turnstile_portable_park" cargo test -p turnstile --release --test condvar`.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use turnstile::{Condvar, Mutex};

/// How long the tests wait for progress before calling it a lost wake-up: far beyond any
/// scheduling delay on a loaded machine with few cores, short enough that a hang fails the run.
const STALL: Duration = Duration::from_secs(20);

/// Joins `handles`, panicking if `progress` stays unchanged for [`STALL`] while some still run.
fn join_watched<R>(what: &str, handles: Vec<JoinHandle<R>>, progress: &AtomicU64) -> Vec<R> {
    let mut last = progress.load(Ordering::Relaxed);
    let mut since = Instant::now();
    while !handles.iter().all(|h| h.is_finished()) {
        thread::sleep(Duration::from_millis(5));
        let now = progress.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= STALL {
            panic!("{what}: no progress for {STALL:?} at {now}: a lost notify?");
        }
    }
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Polls `done` until it returns true, panicking after [`STALL`].
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < STALL, "{what}: not after {STALL:?}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// A bounded queue: producers wait on `not_full`, consumers on `not_empty`.
struct Channel {
    state: Mutex<Queue>,
    not_empty: Condvar,
    not_full: Condvar,
}

struct Queue {
    items: VecDeque<u64>,
    /// Items taken so far, by all consumers.
    taken: u64,
}

/// Small, so that producers wait too (and `not_full` sees as much traffic as `not_empty`).
const CAPACITY: usize = 4;

/// Waits on `cv` while `condition` holds: untimed, or in 1 ms slices so that time-outs race
/// the notifies.
fn wait_while(
    cv: &Condvar,
    g: &mut turnstile::MutexGuard<'_, Queue>,
    timed: bool,
    mut condition: impl FnMut(&mut Queue) -> bool,
) {
    if timed {
        while cv
            .wait_while_for(g, &mut condition, Duration::from_millis(1))
            .timed_out()
        {}
    } else {
        cv.wait_while(g, condition);
    }
}

/// `producers` threads push `each` distinct items (1 ..= producers × each); `consumers` threads
/// pop until all are taken. Every item must arrive exactly once (count and sum), and nobody may
/// hang.
fn pass_items(producers: u64, consumers: u64, each: u64, timed: bool) {
    let ch = Arc::new(Channel {
        state: Mutex::new(Queue {
            items: VecDeque::new(),
            taken: 0,
        }),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    });
    let total = producers * each;
    let progress = Arc::new(AtomicU64::new(0));
    let mut handles: Vec<JoinHandle<(u64, u64)>> = Vec::new();
    for p in 0..producers {
        let (ch, progress) = (ch.clone(), progress.clone());
        handles.push(thread::spawn(move || {
            for i in 0..each {
                let mut g = ch.state.lock();
                wait_while(&ch.not_full, &mut g, timed, |q| q.items.len() >= CAPACITY);
                g.items.push_back(p * each + i + 1);
                // Notify with the mutex held, or after releasing it: both must be seen.
                if i % 2 == 0 {
                    ch.not_empty.notify_one();
                    drop(g);
                } else {
                    drop(g);
                    ch.not_empty.notify_one();
                }
                progress.fetch_add(1, Ordering::Relaxed);
            }
            (0, 0)
        }));
    }
    for _ in 0..consumers {
        let (ch, progress) = (ch.clone(), progress.clone());
        handles.push(thread::spawn(move || {
            let (mut count, mut sum) = (0, 0);
            loop {
                let mut g = ch.state.lock();
                wait_while(&ch.not_empty, &mut g, timed, |q| {
                    q.items.is_empty() && q.taken < total
                });
                let Some(v) = g.items.pop_front() else {
                    break; // every item has been taken
                };
                g.taken += 1;
                if g.taken == total {
                    // The other consumers wait for items that will not come: release them.
                    ch.not_empty.notify_all();
                }
                drop(g);
                ch.not_full.notify_one();
                count += 1;
                sum += v;
                progress.fetch_add(1, Ordering::Relaxed);
            }
            (count, sum)
        }));
    }
    let results = join_watched("producers and consumers", handles, &progress);
    let count: u64 = results.iter().map(|r| r.0).sum();
    let sum: u64 = results.iter().map(|r| r.1).sum();
    assert_eq!(count, total, "every item taken exactly once");
    assert_eq!(
        sum,
        total * (total + 1) / 2,
        "the items taken are the items pushed"
    );
    let g = ch.state.lock();
    assert!(g.items.is_empty());
    assert_eq!(g.taken, total);
    assert!(!ch.not_empty.notify_one() && !ch.not_full.notify_one());
}

#[test]
fn producers_and_consumers_pass_every_item_and_no_notify_is_lost() {
    pass_items(4, 4, 25_000, false);
}

#[test]
fn timed_waits_racing_notifies_lose_no_item_and_no_waiter() {
    pass_items(3, 3, 10_000, true);
}

/// `waiters` threads wait on `cv` (each marks itself under the mutex first, then waits, with
/// `wait_while` on the flag if `flagged`, else with one `wait`). Returns once all are queued:
/// each released the mutex only inside its wait, after queueing.
fn queued_waiters(
    m: &Arc<Mutex<(usize, bool)>>,
    cv: &Arc<Condvar>,
    waiters: usize,
    flagged: bool,
) -> Vec<JoinHandle<()>> {
    let handles = (0..waiters)
        .map(|_| {
            let (m, cv) = (m.clone(), cv.clone());
            thread::spawn(move || {
                let mut g = m.lock();
                g.0 += 1;
                if flagged {
                    cv.wait_while(&mut g, |s| !s.1);
                } else {
                    cv.wait(&mut g);
                }
            })
        })
        .collect();
    until("all waiters queued", || m.lock().0 == waiters);
    handles
}

#[test]
fn notify_all_wakes_every_waiter() {
    const K: usize = 8;
    let m = Arc::new(Mutex::new((0, false)));
    let cv = Arc::new(Condvar::new());
    let waiters = queued_waiters(&m, &cv, K, true);
    let woken = {
        let mut g = m.lock();
        g.1 = true;
        cv.notify_all()
    };
    assert_eq!(woken, K, "one notify_all dequeued every waiter");
    join_watched("waiters after notify_all", waiters, &AtomicU64::new(0));
    assert_eq!(cv.notify_all(), 0, "nobody is left waiting");
}

#[test]
fn each_notify_one_wakes_one_waiter_until_none_is_left() {
    const K: usize = 3;
    let m = Arc::new(Mutex::new((0, false)));
    let cv = Arc::new(Condvar::new());
    let waiters = queued_waiters(&m, &cv, K, false);
    for i in 0..K {
        assert!(cv.notify_one(), "waiter {i} of {K} was still queued");
    }
    assert!(!cv.notify_one(), "all {K} were woken, one per notify");
    join_watched("waiters after notify_one", waiters, &AtomicU64::new(0));
}

#[test]
fn notify_with_no_waiters_wakes_nobody() {
    let cv = Condvar::default();
    assert!(!cv.notify_one());
    assert_eq!(cv.notify_all(), 0);
    // Also once a waiter has come and gone (timed out).
    let m = Mutex::new(());
    assert!(cv.wait_for(&mut m.lock(), Duration::ZERO).timed_out());
    assert!(!cv.notify_one());
    assert_eq!(cv.notify_all(), 0);
}

#[test]
fn a_wait_for_without_a_notify_times_out_and_returns_holding_the_mutex() {
    let m = Mutex::new(0u32);
    let cv = Condvar::new();
    let mut g = m.lock();
    assert!(cv.wait_for(&mut g, Duration::from_millis(10)).timed_out());
    assert!(m.try_lock().is_none(), "the mutex is held again");
    *g += 1;
    // A deadline already past: the wait still releases and re-locks, and times out.
    assert!(cv.wait_until(&mut g, Instant::now()).timed_out());
    assert!(m.try_lock().is_none(), "the mutex is held again");
    *g += 1;
    drop(g);
    assert_eq!(*m.lock(), 2);
}

#[test]
fn a_timed_wait_that_is_notified_in_time_does_not_time_out() {
    let m = Arc::new(Mutex::new((0, false)));
    let cv = Arc::new(Condvar::new());
    let waiter = {
        let (m, cv) = (m.clone(), cv.clone());
        thread::spawn(move || {
            let mut g = m.lock();
            g.0 += 1;
            let r = cv.wait_while_for(&mut g, |s| !s.1, Duration::from_secs(3600));
            assert!(g.1, "returned with the condition false");
            r
        })
    };
    until("the waiter queued", || m.lock().0 == 1);
    m.lock().1 = true;
    assert!(cv.notify_one());
    let r = join_watched("timed waiter", vec![waiter], &AtomicU64::new(0));
    assert!(!r[0].timed_out());
}

#[test]
fn wait_while_returns_only_once_the_condition_is_false() {
    // (value, times the condition was checked)
    let m = Arc::new(Mutex::new((0u32, 0u32)));
    let cv = Arc::new(Condvar::new());
    let waiter = {
        let (m, cv) = (m.clone(), cv.clone());
        thread::spawn(move || {
            let mut g = m.lock();
            cv.wait_while(&mut g, |s| {
                s.1 += 1;
                s.0 < 5
            });
            *g
        })
    };
    for v in 1..=5 {
        // The waiter checked the condition with the previous value, found it true, and
        // waits (it holds the mutex from the check until it is queued).
        until("the waiter checked the condition", || m.lock().1 >= v);
        assert!(!waiter.is_finished(), "returned while the condition held");
        let mut g = m.lock();
        g.0 = v;
        assert!(cv.notify_one(), "the waiter was queued");
    }
    let r = join_watched("wait_while", vec![waiter], &AtomicU64::new(0));
    assert_eq!(r[0], (5, 6), "returned at the first false check, value 5");
}

#[test]
fn wait_while_with_a_false_condition_returns_at_once_without_a_notify() {
    let m = Mutex::new(1u32);
    let cv = Condvar::new();
    let mut g = m.lock();
    cv.wait_while(&mut g, |v| *v == 0);
    assert!(!cv
        .wait_while_for(&mut g, |v| *v == 0, Duration::ZERO)
        .timed_out());
    assert_eq!(*g, 1);
}

#[test]
fn wait_while_for_times_out_only_while_the_condition_still_holds() {
    let m = Mutex::new(0u32);
    let cv = Condvar::new();
    let mut g = m.lock();
    assert!(cv
        .wait_while_for(&mut g, |v| *v == 0, Duration::from_millis(5))
        .timed_out());
    // The condition turns false during the wait (here: on its own re-check after the time-out):
    // not timed out.
    let mut checks = 0;
    let r = cv.wait_while_until(
        &mut g,
        |_| {
            checks += 1;
            checks == 1
        },
        Instant::now(),
    );
    assert!(!r.timed_out());
    assert_eq!(checks, 2);
}

#[test]
fn a_condvar_used_with_a_second_mutex_panics_while_the_first_mutexs_waiter_waits() {
    let cv = Arc::new(Condvar::new());
    let m1 = Arc::new(Mutex::new((0, false)));
    let first = queued_waiters(&m1, &cv, 1, true);

    let m2 = Arc::new(Mutex::new(0u32));
    let err = {
        let (m2, cv) = (m2.clone(), cv.clone());
        thread::spawn(move || {
            let mut g = m2.lock();
            cv.wait(&mut g);
        })
        .join()
        .expect_err("a wait with a second mutex panics")
    };
    let msg = err
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("");
    assert!(
        msg.contains("more than one mutex"),
        "the panic says why: {msg:?}"
    );
    assert!(
        m2.try_lock().is_some(),
        "the panicking wait still held its mutex, and unwinding released it"
    );

    // The first waiter is unaffected.
    {
        let mut g = m1.lock();
        g.1 = true;
    }
    assert_eq!(
        cv.notify_all(),
        1,
        "the first mutex's waiter was still queued"
    );
    join_watched("the first waiter", first, &AtomicU64::new(0));

    // Once its waiters have left, the condition variable may serve another mutex.
    let mut g = m2.lock();
    assert!(cv.wait_for(&mut g, Duration::from_millis(1)).timed_out());
}

#[test]
fn a_condvar_can_be_a_static() {
    static CV: Condvar = Condvar::new();
    static M: Mutex<bool> = Mutex::new(false);
    let t = thread::spawn(|| {
        let mut g = M.lock();
        CV.wait_while(&mut g, |ready| !*ready);
    });
    *M.lock() = true;
    CV.notify_all();
    join_watched("static condvar", vec![t], &AtomicU64::new(0));
    assert_eq!(format!("{CV:?}"), "Condvar { has_waiters: false }");
}
