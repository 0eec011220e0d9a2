//! Every lock of the family under stress: mutual exclusion (an unsynchronised counter ends
//! exact), no lost wake-up (every thread finishes under a watchdog), and panic safety.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use lock_api::RawMutex;
use turnstile::mutex::RawTurnstileMutex;
#[cfg(feature = "historical")]
use turnstile::mutex::{InnodbMutex, SpinGlobalMutex, SpinPerMutex};

/// A counter protected only by the lock under test.
struct Guarded<R: RawMutex> {
    lock: R,
    count: UnsafeCell<u64>,
}

// SAFETY: `count` is only touched while `lock` is held (see `hammer`).
unsafe impl<R: RawMutex + Sync> Sync for Guarded<R> {}

fn hammer<R: RawMutex + Send + Sync + 'static>(name: &str, threads: usize, rounds: u64) {
    let g = Arc::new(Guarded {
        lock: R::INIT,
        count: UnsafeCell::new(0),
    });
    let (tx, rx) = mpsc::channel();
    for t in 0..threads {
        let (g, tx) = (g.clone(), tx.clone());
        thread::spawn(move || {
            for i in 0..rounds {
                g.lock.lock();
                // SAFETY: the lock is held.
                unsafe { *g.count.get() += 1 };
                if (i + t as u64).is_multiple_of(64) {
                    thread::yield_now(); // get preempted while holding, sometimes
                }
                // SAFETY: this thread holds the lock.
                unsafe { g.lock.unlock() };
            }
            tx.send(()).unwrap();
        });
    }
    for _ in 0..threads {
        rx.recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{name}: a thread never finished (lost wake-up?)"));
    }
    g.lock.lock();
    // SAFETY: the lock is held and every worker has finished.
    assert_eq!(unsafe { *g.count.get() }, threads as u64 * rounds, "{name}");
    // SAFETY: held by this thread.
    unsafe { g.lock.unlock() };
}

#[test]
fn turnstile_lock_excludes_and_loses_no_wake_up() {
    hammer::<RawTurnstileMutex>("turnstile", 16, 20_000);
}

#[test]
#[cfg(feature = "historical")]
fn innodb_mutex_excludes_and_loses_no_wake_up() {
    hammer::<InnodbMutex>("innodb", 8, 5_000);
}

#[test]
#[cfg(feature = "historical")]
fn spin_limited_mutexes_exclude_and_lose_no_wake_up() {
    hammer::<SpinGlobalMutex>("spin-global", 16, 20_000);
    hammer::<SpinPerMutex>("spin-per-mutex", 16, 20_000);
}

#[test]
fn a_panic_while_holding_a_turnstile_mutex_releases_it() {
    let m = Arc::new(turnstile::Mutex::new(0u32));
    let m2 = m.clone();
    let r = thread::spawn(move || {
        let mut g = m2.lock();
        *g = 7;
        panic!("boom");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(
        *m.try_lock_for(Duration::from_secs(5)).expect("released"),
        7
    );
}

#[test]
fn turnstile_timed_and_plain_waiters_mixed_lose_no_wake_up_and_count_exactly() {
    // Timed waiters give up (leaving the parking queue, maybe as the last waiter) while plain
    // ones park, are woken, and are handed the lock: every success is counted exactly once,
    // and every thread finishes.
    use lock_api::RawMutexTimed;
    const THREADS: usize = 12;
    const ROUNDS: u64 = 4_000;
    let g = Arc::new(Guarded {
        lock: RawTurnstileMutex::<turnstile::mutex::NoStats>::new(),
        count: UnsafeCell::new(0),
    });
    let (tx, rx) = mpsc::channel();
    for t in 0..THREADS {
        let (g, tx) = (g.clone(), tx.clone());
        thread::spawn(move || {
            let mut got = 0u64;
            for i in 0..ROUNDS {
                let ok = if t % 2 == 0 {
                    g.lock.lock();
                    true
                } else {
                    // 0–63 µs: many expire while the lock is held.
                    g.lock
                        .try_lock_for(Duration::from_micros((i * 7 + t as u64) % 64))
                };
                if ok {
                    // SAFETY: the lock is held.
                    unsafe { *g.count.get() += 1 };
                    got += 1;
                    if i % 32 == 0 {
                        thread::sleep(Duration::from_micros(50)); // long holds make waiters park
                    }
                    // SAFETY: this thread holds the lock.
                    unsafe { g.lock.unlock() };
                }
            }
            tx.send(got).unwrap();
        });
    }
    let mut total = 0;
    for _ in 0..THREADS {
        total += rx
            .recv_timeout(Duration::from_secs(120))
            .expect("a thread never finished (lost wake-up?)");
    }
    assert!(
        total >= (THREADS as u64 / 2) * ROUNDS,
        "plain lockers always succeed"
    );
    g.lock.lock();
    // SAFETY: the lock is held and every worker has finished.
    assert_eq!(unsafe { *g.count.get() }, total);
    // SAFETY: held by this thread.
    unsafe { g.lock.unlock() };
}

/// Counts the allocations each thread makes, to show the instrumented lock's wait path makes
/// none (the waiter registry fills a per-thread slot; the thread's name is read only when
/// listing).
mod alloc_count {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local!(static ALLOCS: Cell<u64> = const { Cell::new(0) });

    pub struct Counting;

    // SAFETY: every call is forwarded unchanged to the system allocator; the count is a
    // const-initialised thread-local `Cell`, which does not allocate.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            // SAFETY: the caller's contract for `alloc`, passed on.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract for `dealloc`, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
            // SAFETY: the caller's contract for `realloc`, passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    /// Allocations made by this thread so far.
    pub fn this_thread() -> u64 {
        ALLOCS.with(|c| c.get())
    }
}

#[global_allocator]
static ALLOC: alloc_count::Counting = alloc_count::Counting;

#[test]
fn an_instrumented_wait_allocates_nothing_after_the_threads_first() {
    use turnstile::mutex::{current_waiters, Instrumented};
    let m = Arc::new(Instrumented::new("allocation-free wait", 0u64));
    let (cmd_tx, cmd_rx) = mpsc::channel::<bool>();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let m2 = m.clone();
    // A named thread: the registry shows its name, which must not be copied per wait.
    let waiter = thread::Builder::new()
        .name("allocation-free waiter".into())
        .spawn(move || {
            // Each command comes while the main thread holds the lock: this lock waits.
            while let Ok(last) = cmd_rx.recv() {
                let before = alloc_count::this_thread();
                *m2.lock() += 1;
                done_tx.send(alloc_count::this_thread() - before).unwrap();
                if last {
                    break;
                }
            }
        })
        .unwrap();
    // One round: hold the lock, let the waiter wait for it (listed, then given time to
    // park), release; returns the waiter's allocations.
    let round = |last: bool| {
        let g = m.lock();
        cmd_tx.send(last).unwrap();
        let start = std::time::Instant::now();
        while !current_waiters()
            .iter()
            .any(|w| w.lock == "allocation-free wait")
        {
            assert!(start.elapsed() < Duration::from_secs(60), "never listed");
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(Duration::from_millis(5));
        drop(g);
        done_rx.recv().unwrap()
    };
    // Warm up until the waiter has parked once: its first park makes its parker, its first
    // wait its registry slot.
    let mut warm_ups = 0;
    while m.report().counters.parks == 0 {
        round(false);
        warm_ups += 1;
        assert!(warm_ups < 1000, "the waiter never parked");
    }
    assert_eq!(round(true), 0, "the wait path allocated");
    waiter.join().unwrap();
    let r = m.report();
    assert_eq!(*m.lock(), warm_ups + 1);
    assert_eq!(
        r.waited,
        warm_ups + 1,
        "every one of the waiter's locks waited"
    );
}
