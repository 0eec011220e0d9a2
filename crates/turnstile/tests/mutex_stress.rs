//! Every lock of the family under stress: mutual exclusion (an unsynchronised counter ends
//! exact), no lost wake-up (every thread finishes under a watchdog), and panic safety.
#![cfg(not(loom))]

use std::cell::UnsafeCell;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use lock_api::RawMutex;
use turnstile::mutex::{InnodbMutex, RawTurnstileMutex, SpinGlobalMutex, SpinPerMutex};

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
                if (i + t as u64) % 64 == 0 {
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
fn innodb_mutex_excludes_and_loses_no_wake_up() {
    hammer::<InnodbMutex>("innodb", 8, 5_000);
}

#[test]
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
