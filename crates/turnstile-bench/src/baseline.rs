//! The baseline every gate policy is measured against: a textbook counting semaphore on
//! `std::sync::Mutex` + `Condvar`, the way `std::sync::Semaphore` (Rust ≤ 1.7) and most
//! hand-rolled admission limits are written: every release takes the lock and notifies one
//! waiter.

use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// A counting semaphore: `acquire` blocks while no permit is free.
#[derive(Debug)]
pub struct MutexCondvarSemaphore {
    permits: Mutex<u32>,
    cv: Condvar,
}

impl MutexCondvarSemaphore {
    /// A semaphore with `permits` permits.
    pub fn new(permits: u32) -> Self {
        MutexCondvarSemaphore {
            permits: Mutex::new(permits),
            cv: Condvar::new(),
        }
    }

    /// Takes a permit, blocking while none is free. Returns the nanoseconds spent blocked
    /// (0 when a permit was free at once), for the same wait histogram the gate keeps.
    #[inline]
    pub fn acquire(&self) -> u64 {
        let mut p = self.permits.lock().unwrap();
        if *p > 0 {
            *p -= 1;
            return 0;
        }
        let start = Instant::now();
        while *p == 0 {
            p = self.cv.wait(p).unwrap();
        }
        *p -= 1;
        start.elapsed().as_nanos() as u64
    }

    /// Gives a permit back and wakes one waiter.
    #[inline]
    pub fn release(&self) {
        *self.permits.lock().unwrap() += 1;
        self.cv.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    #[test]
    fn never_hands_out_more_permits_than_it_has() {
        let sem = Arc::new(MutexCondvarSemaphore::new(2));
        let inside = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (sem, inside) = (sem.clone(), inside.clone());
                std::thread::spawn(move || {
                    for _ in 0..2000 {
                        sem.acquire();
                        assert!(inside.fetch_add(1, Ordering::SeqCst) < 2);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        sem.release();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*sem.permits.lock().unwrap(), 2);
    }
}
