//! The parking table: where threads that wait for a turnstile lock sleep.
//!
//! A waiting thread does not sleep on the lock's state word (which changes every time the lock
//! changes hands, so a futex wait on it fails over and over under load: with 0 ns critical
//! sections most futex waits return `EAGAIN` at once; docs/BENCHMARKS.md). It queues in a
//! bucket chosen by the lock's address and sleeps on a word of its own, its [`Parker`]; only an
//! unlocker that takes it off the queue wakes it. The lock itself stays one word: the queue
//! lives here, and the lock only keeps a `PARKED` bit that says "this bucket may hold waiters
//! of mine", set and cleared under the bucket's mutex.
//!
//! The shape is WebKit's `ParkingLot` and Rust's `parking_lot_core` (a global table of
//! buckets, each a mutex and a FIFO, and a validate callback run under the bucket mutex so a
//! thread parks only if the lock still says it should), reduced to what a lock and a condition
//! variable need: park (with a step run once queued, where a condition variable's waiter
//! releases its mutex), unpark one or all, time out. The bucket also keeps the clock of the
//! starvation hand-off, so the unlocker learns under the same mutex whether the thread it wakes
//! has waited too long.
//!
//! Invariants (all under the bucket mutex):
//! - a waiter is in exactly one queue from `park`'s validate until an unparker removes it
//!   (and then sets its token) or it times out and removes itself; never both;
//! - a parker's token is set, to non-zero, only by the unparker that removed it, while it
//!   still holds the bucket mutex, so a timing-out thread that no longer finds itself queued
//!   reads its token at once;
//! - the futex wake-up comes after the bucket mutex is released; the `Arc` keeps the parker
//!   alive for it, and a late wake-up of a thread that has since parked elsewhere is only
//!   spurious (the sleeper re-checks its token).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::sync::{lock, Arc, Mutex};

/// The token an unparker leaves: the waiter should retry the lock.
pub(crate) const TOKEN_RETRY: u32 = 1;
/// The token an unparker leaves: the lock is the waiter's now (it was handed off).
pub(crate) const TOKEN_HANDOFF: u32 = 2;

/// What the unparker learns, under the bucket mutex, before it sets the token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unparked {
    /// A waiter was taken off the queue.
    pub(crate) unparked: bool,
    /// Other waiters for the same key remain.
    pub(crate) more: bool,
    /// The unparked waiter has waited past the starvation threshold and the bucket's fairness
    /// interval has passed: the lock should be handed to it.
    pub(crate) be_fair: bool,
}

/// How a park ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parked {
    /// Woken by an unparker, with its token.
    Unparked(u32),
    /// The validate callback said not to park.
    Invalid,
    /// The deadline passed; the waiter removed itself.
    TimedOut,
}

/// The word a parker sleeps on: a futex word, or under `--cfg loom` the model checker's
/// version of one (same orderings, modelled sleep), so the model runs this very `Parker`.
#[cfg(not(loom))]
type Word = super::futex::FutexWord;
#[cfg(loom)]
type Word = super::futex::ModelFutexWord;

/// One thread's sleeping place: 0 while it waits, the unparker's token after.
pub(crate) struct Parker {
    word: Word,
}

impl Parker {
    fn new() -> Self {
        Parker { word: Word::new(0) }
    }
    fn prepare(&self) {
        self.word.store(0);
    }
    fn set(&self, token: u32) {
        self.word.store(token);
    }
    fn token(&self) -> u32 {
        self.word.load()
    }
    fn wake(&self) {
        self.word.wake_one();
    }
    /// Sleeps until a token is set or the deadline passes (`None`).
    fn wait(&self, deadline: Option<Instant>) -> Option<u32> {
        loop {
            let t = self.word.load();
            if t != 0 {
                return Some(t);
            }
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    Some(d - now)
                }
            };
            self.word.wait(0, timeout);
        }
    }
}

/// This thread's parker: one per thread, made on its first park (a fresh one if thread-local
/// storage is already gone, in a destructor at thread exit).
#[cfg(not(loom))]
fn current_parker() -> Arc<Parker> {
    thread_local!(static PARKER: Arc<Parker> = Arc::new(Parker::new()));
    PARKER
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::new(Parker::new()))
}

#[cfg(loom)]
fn current_parker() -> Arc<Parker> {
    Arc::new(Parker::new())
}

struct Waiter {
    key: usize,
    parker: Arc<Parker>,
    since: Instant,
}

struct BucketInner {
    queue: VecDeque<Waiter>,
    /// Before this instant no hand-off is granted from this bucket.
    next_fair: Option<Instant>,
}

/// One bucket on its own cache line, so unrelated locks' parkers do not share one.
#[repr(align(64))]
struct Bucket {
    inner: Mutex<BucketInner>,
}

/// The table: buckets, and the fairness thresholds it applies when unparking.
pub(crate) struct Table {
    buckets: Box<[Bucket]>,
    starve_after: Duration,
    fair_every: Duration,
}

impl Table {
    /// `buckets` (a power of two) buckets; a waiter that has waited `starve_after` is handed
    /// the lock, at most once per `fair_every` per bucket.
    pub(crate) fn new(buckets: usize, starve_after: Duration, fair_every: Duration) -> Self {
        assert!(buckets.is_power_of_two());
        Table {
            buckets: (0..buckets)
                .map(|_| Bucket {
                    inner: Mutex::new(BucketInner {
                        queue: VecDeque::new(),
                        next_fair: None,
                    }),
                })
                .collect(),
            starve_after,
            fair_every,
        }
    }

    fn bucket(&self, key: usize) -> &Bucket {
        // Fibonacci hashing: the high bits of key × 2^64/φ spread nearby addresses (locks on
        // consecutive cache lines) over the table.
        let h = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32;
        &self.buckets[h as usize & (self.buckets.len() - 1)]
    }

    /// Queues this thread under `key` if `validate` (run under the bucket mutex) returns true,
    /// and sleeps until unparked or until `deadline`. `since` is when the thread began to
    /// wait (its first park for this acquisition: the starvation clock does not restart when
    /// a woken thread parks again), and `front` queues it ahead of every other waiter (a
    /// woken thread that lost the race keeps its turn). On a timeout the thread leaves the
    /// queue and `timed_out(last)` runs under the bucket mutex, `last` saying that no waiter
    /// for `key` remains.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn park(
        &self,
        key: usize,
        since: Instant,
        front: bool,
        validate: impl FnOnce() -> bool,
        timed_out: impl FnOnce(bool),
        deadline: Option<Instant>,
    ) -> Parked {
        self.park_with(key, since, front, validate, || {}, timed_out, deadline)
    }

    /// [`park`](Self::park), with `before_sleep` run once this thread is queued, after the
    /// bucket mutex is released and before it sleeps (not at all if `validate` refuses). A
    /// condition variable's waiter unlocks its mutex there: queued first, so a notify that
    /// follows the unlock finds it; outside the bucket mutex, because the unlock may wake a
    /// waiter of the mutex, whose key may hash to this very bucket.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn park_with(
        &self,
        key: usize,
        since: Instant,
        front: bool,
        validate: impl FnOnce() -> bool,
        before_sleep: impl FnOnce(),
        timed_out: impl FnOnce(bool),
        deadline: Option<Instant>,
    ) -> Parked {
        let bucket = self.bucket(key);
        let parker = current_parker();
        {
            let mut b = lock(&bucket.inner);
            if !validate() {
                return Parked::Invalid;
            }
            parker.prepare();
            let w = Waiter {
                key,
                parker: parker.clone(),
                since,
            };
            if front {
                b.queue.push_front(w);
            } else {
                b.queue.push_back(w);
            }
        }
        before_sleep();
        if let Some(t) = parker.wait(deadline) {
            return Parked::Unparked(t);
        }
        let mut b = lock(&bucket.inner);
        // An unparker may have taken us off the queue since the deadline passed: its token
        // is already set (it sets it under this mutex), and it wins.
        let t = parker.token();
        if t != 0 {
            return Parked::Unparked(t);
        }
        let i = b
            .queue
            .iter()
            .position(|w| Arc::ptr_eq(&w.parker, &parker))
            .expect("a parked thread with no token is still queued");
        b.queue.remove(i);
        let last = !b.queue.iter().any(|w| w.key == key);
        timed_out(last);
        Parked::TimedOut
    }

    /// Takes the oldest waiter for `key` off its queue (if any), lets `decide` choose its
    /// token under the bucket mutex (where `decide` also updates the lock's state), and wakes
    /// it. Returns whether a waiter was unparked.
    pub(crate) fn unpark_one(&self, key: usize, decide: impl FnOnce(Unparked) -> u32) -> bool {
        let bucket = self.bucket(key);
        let mut b = lock(&bucket.inner);
        let Some(i) = b.queue.iter().position(|w| w.key == key) else {
            decide(Unparked {
                unparked: false,
                more: false,
                be_fair: false,
            });
            return false;
        };
        let w = b.queue.remove(i).expect("position is in the queue");
        // Waiters before `i` are for other keys.
        let more = b.queue.iter().skip(i).any(|x| x.key == key);
        let now = Instant::now();
        let be_fair = now.saturating_duration_since(w.since) >= self.starve_after
            && b.next_fair.is_none_or(|t| now >= t);
        let token = decide(Unparked {
            unparked: true,
            more,
            be_fair,
        });
        if token == TOKEN_HANDOFF {
            b.next_fair = now.checked_add(self.fair_every);
        }
        w.parker.set(token);
        drop(b);
        w.parker.wake();
        true
    }

    /// Takes every waiter for `key` off its queue, lets `decide` choose their token under the
    /// bucket mutex (told how many there are; it runs even for none), and wakes them, oldest
    /// first. Returns how many were unparked.
    pub(crate) fn unpark_all(&self, key: usize, decide: impl FnOnce(usize) -> u32) -> usize {
        let bucket = self.bucket(key);
        let mut b = lock(&bucket.inner);
        let mut woken = Vec::new();
        b.queue.retain(|w| {
            if w.key == key {
                woken.push(w.parker.clone());
                false
            } else {
                true
            }
        });
        let token = decide(woken.len());
        for p in &woken {
            p.set(token);
        }
        drop(b);
        for p in &woken {
            p.wake();
        }
        woken.len()
    }
}
