//! Opt-in instrumentation for the turnstile lock: counters, a wait-time histogram, the holder
//! and where it locked, a process-wide registry of current waiters, and a watchdog that reports
//! (and optionally aborts on) long waits, as InnoDB's does.
//!
//! The plain [`crate::mutex::Mutex`] pays nothing for any of this: the counters are a
//! [`LockStats`] type parameter of the raw lock (a zero-sized no-op by default), and the rest
//! lives in [`Instrumented`]. Even here the uncontended path adds only stores to the lock's own
//! fields while holding it; the waiter registry, the clock and the histogram are touched only by
//! threads that actually had to wait.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex as StdMutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lock_api::RawMutex as _;

use super::raw::{LockStats, RawTurnstileMutex};
use crate::histogram::{Histogram, HistogramSnapshot};

/// Slow-path counters of a turnstile lock (shared atomics, touched only when a thread spins,
/// parks or is woken). They sit on a cache line of their own (the alignment), so that a
/// waiter counting its spins does not take the lock word's line away from the holder; the
/// price is that the data of a counted `Mutex<T>` starts on the line after. `bench mutex`
/// measured no difference between this layout and the counters before the word
/// (docs/BENCHMARKS.md), so the one that cannot slow the holder was kept.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct LockCounters {
    spins: AtomicU64,
    parks: AtomicU64,
    wakeups: AtomicU64,
    wakes_sent: AtomicU64,
    handoffs: AtomicU64,
    grants: AtomicU64,
    slept_acquires: AtomicU64,
}

impl LockStats for LockCounters {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = LockCounters {
        spins: AtomicU64::new(0),
        parks: AtomicU64::new(0),
        wakeups: AtomicU64::new(0),
        wakes_sent: AtomicU64::new(0),
        handoffs: AtomicU64::new(0),
        grants: AtomicU64::new(0),
        slept_acquires: AtomicU64::new(0),
    };
    fn spun(&self, n: u32) {
        self.spins.fetch_add(n as u64, Ordering::Relaxed);
    }
    fn park(&self) {
        self.parks.fetch_add(1, Ordering::Relaxed);
    }
    fn woken(&self) {
        self.wakeups.fetch_add(1, Ordering::Relaxed);
    }
    fn wake_sent(&self) {
        self.wakes_sent.fetch_add(1, Ordering::Relaxed);
    }
    fn handoff(&self) {
        self.handoffs.fetch_add(1, Ordering::Relaxed);
    }
    fn grant(&self) {
        self.grants.fetch_add(1, Ordering::Relaxed);
    }
    fn slept_acquire(&self) {
        self.slept_acquires.fetch_add(1, Ordering::Relaxed);
    }
}

/// A copy of [`LockCounters`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockCountersSnapshot {
    /// Spin iterations before acquiring or parking.
    pub spins: u64,
    /// Sleeps in the parking table.
    pub parks: u64,
    /// Sleeps ended by an unlock's wake-up (not by a timeout).
    pub wakeups: u64,
    /// Wake-ups sent by unlocks.
    pub wakes_sent: u64,
    /// Direct hand-offs to a starving waiter.
    pub handoffs: u64,
    /// Unlocks that locked again for a claiming woken waiter.
    pub grants: u64,
    /// Acquisitions that slept at least once.
    pub slept_acquires: u64,
}

impl LockCounters {
    /// The counters now.
    pub fn snapshot(&self) -> LockCountersSnapshot {
        LockCountersSnapshot {
            spins: self.spins.load(Ordering::Relaxed),
            parks: self.parks.load(Ordering::Relaxed),
            wakeups: self.wakeups.load(Ordering::Relaxed),
            wakes_sent: self.wakes_sent.load(Ordering::Relaxed),
            handoffs: self.handoffs.load(Ordering::Relaxed),
            grants: self.grants.load(Ordering::Relaxed),
            slept_acquires: self.slept_acquires.load(Ordering::Relaxed),
        }
    }
}

/// A small process-unique number for the current thread (std's `ThreadId` is not atomic).
pub fn thread_number() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static ME: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
    ME.with(|m| *m)
}

/// A thread waiting for an instrumented lock, as the registry shows it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WaiterInfo {
    /// The lock's name.
    pub lock: &'static str,
    /// The lock's address.
    pub lock_addr: usize,
    /// The waiting thread ([`thread_number`]) and its name, if it has one.
    pub thread: u64,
    /// The waiting thread's name.
    pub thread_name: Option<String>,
    /// Where it asked for the lock.
    pub location: &'static Location<'static>,
    /// When it began to wait.
    pub since: Instant,
    /// The holder when the wait began, and where it had locked.
    pub holder: Option<(u64, &'static Location<'static>)>,
}

impl fmt::Display for WaiterInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread {} ({}) waits {:.3} s for '{}' at {}",
            self.thread,
            self.thread_name.as_deref().unwrap_or("unnamed"),
            self.since.elapsed().as_secs_f64(),
            self.lock,
            self.location
        )?;
        if let Some((t, at)) = self.holder {
            write!(f, "; held by thread {t}, locked at {at}")?;
        }
        Ok(())
    }
}

/// The waiter registry: one slot per thread that has ever waited for an [`Instrumented`]
/// lock, made on its first wait and removed when it exits. A wait fills the thread's own slot
/// and empties it after (its slot's mutex, which only a lister can contend: O(1), no shared
/// cache line, no allocation); only a thread's first wait and its exit touch a shard's list, and
/// only [`current_waiters`] reads them all. The thread's name is resolved when listing, from the
/// `Thread` handle the slot keeps. (InnoDB's sync array, one global mutex taken twice per wait
/// and scanned, is the bottleneck seed 002 blames; this is the opposite shape.)
mod registry {
    use std::panic::Location;
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::thread::Thread;
    use std::time::Instant;

    /// One wait, as a slot holds it (all `Copy`: filling a slot allocates nothing).
    #[derive(Clone, Copy)]
    pub(super) struct Wait {
        pub(super) lock: &'static str,
        pub(super) lock_addr: usize,
        pub(super) location: &'static Location<'static>,
        pub(super) since: Instant,
        pub(super) holder: Option<(u64, &'static Location<'static>)>,
    }

    /// A thread's slot, on a cache line of its own (threads fill theirs concurrently).
    #[repr(align(64))]
    pub(super) struct Slot {
        pub(super) thread: Thread,
        pub(super) number: u64,
        pub(super) wait: Mutex<Option<Wait>>,
    }

    /// Shards of the slot list: a thread's first wait and its exit lock one, chosen by its
    /// thread number; 16 keeps a burst of new threads from queueing on one mutex and costs a
    /// lister 16 lock round-trips.
    const SHARDS: usize = 16;

    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: Mutex<Vec<Arc<Slot>>> = Mutex::new(Vec::new());
    static SHARDS_: [Mutex<Vec<Arc<Slot>>>; SHARDS] = [EMPTY; SHARDS];

    /// Locks ignoring poisoning: no code panics while holding these mutexes with data
    /// half-changed.
    pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn shard(number: u64) -> &'static Mutex<Vec<Arc<Slot>>> {
        &SHARDS_[number as usize % SHARDS]
    }

    /// A slot linked into its shard, unlinked on drop.
    pub(super) struct Registered(pub(super) Arc<Slot>);

    impl Registered {
        fn new() -> Self {
            let slot = Arc::new(Slot {
                thread: std::thread::current(),
                number: super::thread_number(),
                wait: Mutex::new(None),
            });
            lock(shard(slot.number)).push(slot.clone());
            Registered(slot)
        }
    }

    impl Drop for Registered {
        fn drop(&mut self) {
            let mut v = lock(shard(self.0.number));
            if let Some(i) = v.iter().position(|s| Arc::ptr_eq(s, &self.0)) {
                v.swap_remove(i);
            }
        }
    }

    /// Runs `f` with this thread's slot (a temporary one if thread-local storage is already
    /// gone, in a destructor at thread exit).
    pub(super) fn with_slot<R>(f: impl FnOnce(&Slot) -> R) -> R {
        thread_local!(static MINE: Registered = Registered::new());
        match MINE.try_with(|r| r.0.clone()) {
            Ok(slot) => f(&slot),
            Err(_) => f(&Registered::new().0),
        }
    }

    /// Every slot's thread and current wait, if any.
    pub(super) fn each(mut f: impl FnMut(&Slot, Wait)) {
        for shard in &SHARDS_ {
            for slot in lock(shard).iter() {
                if let Some(w) = *lock(&slot.wait) {
                    f(slot, w);
                }
            }
        }
    }

    /// How many slots exist for the threads numbered in `numbers` (tests: exited threads
    /// leave none).
    #[cfg(test)]
    pub(super) fn slots_of(numbers: &[u64]) -> usize {
        SHARDS_
            .iter()
            .map(|s| {
                lock(s)
                    .iter()
                    .filter(|x| numbers.contains(&x.number))
                    .count()
            })
            .sum()
    }
}

/// Every thread waiting for an [`Instrumented`] lock now, oldest first.
pub fn current_waiters() -> Vec<WaiterInfo> {
    let mut v = Vec::new();
    registry::each(|slot, w| {
        v.push(WaiterInfo {
            lock: w.lock,
            lock_addr: w.lock_addr,
            thread: slot.number,
            thread_name: slot.thread.name().map(str::to_string),
            location: w.location,
            since: w.since,
            holder: w.holder,
        })
    });
    v.sort_by_key(|w| w.since);
    v
}

/// A mutex with instrumentation. See the module documentation.
pub struct Instrumented<T: ?Sized> {
    raw: RawTurnstileMutex<LockCounters>,
    name: &'static str,
    holder: AtomicU64,
    holder_at: AtomicPtr<Location<'static>>,
    acquisitions: AtomicU64,
    waited: AtomicU64,
    waits: Histogram,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives one thread at a time access to `data`, so sharing the mutex is sound
// whenever `T` may be sent between threads (the same bound as `std::sync::Mutex`).
unsafe impl<T: ?Sized + Send> Sync for Instrumented<T> {}
// SAFETY: moving the mutex moves `T`.
unsafe impl<T: ?Sized + Send> Send for Instrumented<T> {}

/// What an [`Instrumented`] lock has seen.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LockReport {
    /// The lock's name.
    pub name: &'static str,
    /// Acquisitions.
    pub acquisitions: u64,
    /// Acquisitions that had to wait (the fast try failed).
    pub waited: u64,
    /// The raw lock's slow-path counters.
    pub counters: LockCountersSnapshot,
    /// Wait times of the acquisitions that waited, ns.
    pub wait: HistogramSnapshot,
    /// The holder now (thread number) and where it locked.
    pub holder: Option<(u64, &'static Location<'static>)>,
}

impl LockReport {
    /// Adds `other`'s counts and waits into this report (the holder stays this one's): one
    /// figure for locks that share a name, as MySQL's performance_schema sums a mutex
    /// instrument's instances. [`crate::metrics::write_lock_prometheus`] does this for
    /// reports with the same name.
    pub fn add(&mut self, other: &LockReport) {
        self.acquisitions += other.acquisitions;
        self.waited += other.waited;
        let (c, o) = (&mut self.counters, &other.counters);
        c.spins += o.spins;
        c.parks += o.parks;
        c.wakeups += o.wakeups;
        c.wakes_sent += o.wakes_sent;
        c.handoffs += o.handoffs;
        c.grants += o.grants;
        c.slept_acquires += o.slept_acquires;
        self.wait.merge(&other.wait);
    }
}

impl<T> Instrumented<T> {
    /// A named, unlocked mutex holding `value`.
    pub fn new(name: &'static str, value: T) -> Self {
        Instrumented {
            raw: RawTurnstileMutex::new(),
            name,
            holder: AtomicU64::new(0),
            holder_at: AtomicPtr::new(std::ptr::null_mut()),
            acquisitions: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            waits: Histogram::new(),
            data: UnsafeCell::new(value),
        }
    }
}

impl<T> Instrumented<T> {
    /// The value, consuming the mutex (no lock needed: nobody else can hold it).
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: Default> Default for Instrumented<T> {
    /// An unlocked mutex holding `T::default()`, named after the type `T`.
    fn default() -> Self {
        Instrumented::new(std::any::type_name::<T>(), T::default())
    }
}

impl<T: ?Sized> fmt::Debug for Instrumented<T> {
    /// The name and whether it is locked now; never blocks, never reads the data.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instrumented")
            .field("name", &self.name)
            .field("locked", &self.raw.is_locked())
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized> Instrumented<T> {
    /// The value, through `&mut self` (no lock needed: the borrow proves exclusive access).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Locks if the lock is free now, recording the caller as the holder; never waits (and
    /// so never counts as a wait).
    #[track_caller]
    pub fn try_lock(&self) -> Option<InstrumentedGuard<'_, T>> {
        let at = Location::caller();
        if self.raw.try_lock() {
            Some(self.acquired(at))
        } else {
            None
        }
    }

    /// Locks, recording the caller as the holder.
    #[track_caller]
    pub fn lock(&self) -> InstrumentedGuard<'_, T> {
        let at = Location::caller();
        if !self.raw.try_lock() {
            self.wait_for(at, None);
        }
        self.acquired(at)
    }

    /// Locks unless `timeout` passes first.
    #[track_caller]
    pub fn try_lock_for(&self, timeout: Duration) -> Option<InstrumentedGuard<'_, T>> {
        let at = Location::caller();
        // A timeout too large to add to a clock reading means no deadline.
        if !self.raw.try_lock() && !self.wait_for(at, Instant::now().checked_add(timeout)) {
            return None;
        }
        Some(self.acquired(at))
    }

    #[cold]
    fn wait_for(&self, at: &'static Location<'static>, deadline: Option<Instant>) -> bool {
        let since = Instant::now();
        let holder = self.holder.load(Ordering::Relaxed);
        // SAFETY: null or a pointer stored from a `&'static Location`.
        let holder_at = unsafe { self.holder_at.load(Ordering::Relaxed).as_ref() };
        let wait = registry::Wait {
            lock: self.name,
            lock_addr: self as *const Self as *const () as usize,
            location: at,
            since,
            holder: if holder == 0 {
                None
            } else {
                holder_at.map(|a| (holder, a))
            },
        };
        let got = registry::with_slot(|slot| {
            *registry::lock(&slot.wait) = Some(wait);
            // Cleared on every way out, unwinding included (a panic in the gate's reclaim
            // after the slow lock): a stale entry would show this thread waiting for ever.
            struct Clear<'a>(&'a registry::Slot);
            impl Drop for Clear<'_> {
                fn drop(&mut self) {
                    *registry::lock(&self.0.wait) = None;
                }
            }
            let _clear = Clear(slot);
            // Without the gate's reclaim (below): a wait in the gate's queue after the lock
            // is had is not this lock's, and the thread holds the lock by then.
            self.raw.try_lock() || self.raw.lock_slow_lending(deadline)
        });
        if got {
            // Holding the lock: this thread is the histogram's only writer right now.
            self.waits
                .record_single_writer(since.elapsed().as_nanos() as u64);
            bump(&self.waited);
            // Shown held from here (`acquired` sets the same), through the reclaim.
            self.holder.store(thread_number(), Ordering::Relaxed);
            self.holder_at
                .store(at as *const Location<'static> as *mut _, Ordering::Relaxed);
        }
        // A reclaim that panics releases the lock (`reclaim_after`): then no holder either.
        struct NoHolderOnUnwind<'a>(&'a AtomicU64, &'a AtomicPtr<Location<'static>>);
        impl Drop for NoHolderOnUnwind<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(0, Ordering::Relaxed);
                    self.1.store(std::ptr::null_mut(), Ordering::Relaxed);
                }
            }
        }
        let _unwind = NoHolderOnUnwind(&self.holder, &self.holder_at);
        self.raw.reclaim_after(got);
        got
    }

    #[inline]
    fn acquired(&self, at: &'static Location<'static>) -> InstrumentedGuard<'_, T> {
        bump(&self.acquisitions);
        self.holder.store(thread_number(), Ordering::Relaxed);
        self.holder_at
            .store(at as *const Location<'static> as *mut _, Ordering::Relaxed);
        InstrumentedGuard {
            m: self,
            _not_shared: std::marker::PhantomData,
        }
    }

    /// Counters, wait histogram and holder.
    pub fn report(&self) -> LockReport {
        let holder = self.holder.load(Ordering::Relaxed);
        // SAFETY: null or a pointer stored from a `&'static Location`.
        let at = unsafe { self.holder_at.load(Ordering::Relaxed).as_ref() };
        // A waited acquisition bumps `waited` just before `acquisitions`: a report taken
        // between the two must not show more waited acquisitions than acquisitions (both stay
        // monotone: each is the larger of two monotone counts).
        let waited = self.waited.load(Ordering::Relaxed);
        LockReport {
            name: self.name,
            acquisitions: self.acquisitions.load(Ordering::Relaxed).max(waited),
            waited,
            counters: self.raw.stats().snapshot(),
            wait: self.waits.snapshot(),
            holder: if holder == 0 {
                None
            } else {
                at.map(|a| (holder, a))
            },
        }
    }
}

/// Increment of a counter only the lock holder writes.
#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Access to an [`Instrumented`] lock's data; unlocks on drop (also during a panic).
pub struct InstrumentedGuard<'a, T: ?Sized> {
    m: &'a Instrumented<T>,
    /// Makes the guard `Sync` only when `T` is (as `std::sync::MutexGuard`): it hands out
    /// `&mut T`, so sharing it must not let two threads reach a `T: !Sync`.
    _not_shared: std::marker::PhantomData<&'a mut T>,
}

impl<T: ?Sized> Deref for InstrumentedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.m.data.get() }
    }
}

impl<T: ?Sized> DerefMut for InstrumentedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and `&mut self`
        // makes this the only reference through it.
        unsafe { &mut *self.m.data.get() }
    }
}

impl<T: ?Sized> Drop for InstrumentedGuard<'_, T> {
    fn drop(&mut self) {
        self.m.holder.store(0, Ordering::Relaxed);
        // SAFETY: this guard's existence proves the current thread holds the lock.
        unsafe { self.m.raw.unlock() };
    }
}

/// Settings of a [`Watchdog`]: build with [`WatchdogConfig::new`] or `Default` (InnoDB's
/// 240 s warning threshold, looked for every second), then adjust.
///
/// ```
/// use std::time::Duration;
/// use turnstile::mutex::WatchdogConfig;
///
/// let c = WatchdogConfig::new(Duration::from_secs(30), Duration::from_secs(5)).abort(true);
/// assert_eq!((c.threshold, c.interval, c.abort), (Duration::from_secs(30), Duration::from_secs(5), true));
/// assert_eq!(WatchdogConfig::default().threshold, Duration::from_secs(240));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogConfig {
    /// Report waits longer than this (InnoDB warns at 240 s).
    pub threshold: Duration,
    /// How often to look.
    pub interval: Duration,
    /// Abort the process after reporting, as InnoDB does past
    /// `innodb_fatal_semaphore_wait_threshold` (600 s).
    pub abort: bool,
}

impl WatchdogConfig {
    /// Report waits longer than `threshold`, looking every `interval`; no abort.
    pub const fn new(threshold: Duration, interval: Duration) -> Self {
        WatchdogConfig {
            threshold,
            interval,
            abort: false,
        }
    }

    /// Whether to abort the process after reporting.
    pub const fn abort(mut self, abort: bool) -> Self {
        self.abort = abort;
        self
    }
}

impl Default for WatchdogConfig {
    /// InnoDB's: warn about waits past 240 s (`sync_array_print_long_waits`), looking every
    /// second (its error monitor thread's period); no abort.
    fn default() -> Self {
        WatchdogConfig::new(Duration::from_secs(240), Duration::from_secs(1))
    }
}

/// A background thread that reports waits on [`Instrumented`] locks longer than a threshold.
/// Stops when dropped: the drop wakes it at once, whatever the interval.
pub struct Watchdog {
    stop: Arc<(StdMutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watchdog").finish_non_exhaustive()
    }
}

impl Watchdog {
    /// Starts watching; `report` receives every over-long wait found in a pass.
    pub fn start(
        config: WatchdogConfig,
        report: impl Fn(&[WaiterInfo]) + Send + 'static,
    ) -> Watchdog {
        let stop = Arc::new((StdMutex::new(false), Condvar::new()));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("turnstile-watchdog".into())
            .spawn(move || loop {
                // Sleep one interval, or until the drop says stop.
                let (m, cv) = &*stop2;
                let g = m.lock().unwrap_or_else(|e| e.into_inner());
                let (g, _) = cv
                    .wait_timeout_while(g, config.interval, |stop| !*stop)
                    .unwrap_or_else(|e| e.into_inner());
                if *g {
                    return;
                }
                drop(g);
                let long: Vec<WaiterInfo> = current_waiters()
                    .into_iter()
                    .filter(|w| w.since.elapsed() > config.threshold)
                    .collect();
                if !long.is_empty() {
                    report(&long);
                    if config.abort {
                        eprintln!("turnstile watchdog: aborting after long lock waits:");
                        for w in &long {
                            eprintln!("  {w}");
                        }
                        std::process::abort();
                    }
                }
            })
            .expect("spawn the watchdog thread");
        Watchdog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::mpsc;

    #[test]
    fn a_panic_in_the_slow_lock_leaves_no_entry_in_the_waiter_registry() {
        use crate::gate_hook::tests::PANIC_IN_RECLAIM;
        let m = Arc::new(Instrumented::new("panics-in-reclaim", ()));
        let g = m.lock();
        let m2 = m.clone();
        let (done_tx, done_rx) = mpsc::channel();
        let (exit_tx, exit_rx) = mpsc::channel::<()>();
        // Alive until the check below: a thread's slot leaves the registry when it exits.
        let waiter = std::thread::spawn(move || {
            PANIC_IN_RECLAIM.with(|p| p.set(true));
            let lock = std::panic::AssertUnwindSafe(|| drop(m2.lock()));
            done_tx
                .send(std::panic::catch_unwind(lock).is_err())
                .unwrap();
            let _ = exit_rx.recv();
        });
        let listed = || {
            current_waiters()
                .iter()
                .any(|w| w.lock == "panics-in-reclaim")
        };
        let start = Instant::now();
        while !listed() {
            assert!(start.elapsed() < Duration::from_secs(20), "never waited");
            std::thread::yield_now();
        }
        drop(g);
        let panicked = done_rx.recv().unwrap();
        assert!(panicked, "the reclaim's panic reached the caller");
        assert!(!listed(), "no stale entry while the thread lives on");
        assert!(m.try_lock().is_some(), "the lock was released");
        exit_tx.send(()).unwrap();
        waiter.join().unwrap();
    }

    #[test]
    fn an_uncontended_lock_records_the_holder_and_no_wait() {
        let m = Instrumented::new("uncontended", 0u32);
        let g = m.lock();
        let line = line!() - 1;
        let r = m.report();
        let (thread, at) = r.holder.unwrap();
        assert_eq!((thread, at.line()), (thread_number(), line));
        drop(g);
        let r = m.report();
        assert_eq!((r.acquisitions, r.waited, r.wait.count()), (1, 0, 0));
        assert!(r.holder.is_none());
    }

    #[test]
    fn a_waiter_is_listed_with_its_location_and_the_holder() {
        let m = Arc::new(Instrumented::new("listed", ()));
        let g = m.lock();
        let m2 = m.clone();
        let t = std::thread::Builder::new()
            .name("the-waiter".into())
            .spawn(move || drop(m2.lock()))
            .unwrap();
        let start = Instant::now();
        let w = loop {
            if let Some(w) = current_waiters().into_iter().find(|w| w.lock == "listed") {
                break w;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "never listed");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(w.thread_name.as_deref(), Some("the-waiter"));
        assert!(w.location.file().ends_with("instrument.rs"));
        assert_eq!(w.holder.unwrap().0, thread_number());
        assert!(w.to_string().contains("waits") && w.to_string().contains("'listed'"));
        drop(g);
        t.join().unwrap();
        assert!(!current_waiters().iter().any(|w| w.lock == "listed"));
        let r = m.report();
        assert_eq!((r.acquisitions, r.waited, r.wait.count()), (2, 1, 1));
    }

    /// Waits until `n` threads are listed waiting for the lock named `name`, and returns them.
    fn listed(name: &str, n: usize) -> Vec<WaiterInfo> {
        let start = Instant::now();
        loop {
            let v: Vec<_> = current_waiters()
                .into_iter()
                .filter(|w| w.lock == name)
                .collect();
            if v.len() >= n {
                return v;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "never listed");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn many_threads_waiting_on_one_lock_are_each_listed_once_by_name_oldest_first() {
        let m = Arc::new(Instrumented::new("crowded", ()));
        let g = m.lock();
        let before = Instant::now();
        let ts: Vec<_> = (0..24)
            .map(|i| {
                let m = m.clone();
                std::thread::Builder::new()
                    .name(format!("crowd-{i}"))
                    .spawn(move || {
                        drop(m.lock());
                        thread_number()
                    })
                    .unwrap()
            })
            .collect();
        let v = listed("crowded", 24);
        let mut threads: Vec<u64> = v.iter().map(|w| w.thread).collect();
        threads.sort_unstable();
        threads.dedup();
        assert_eq!(threads.len(), 24, "each waiter listed once");
        assert!(v.iter().all(|w| w.since >= before
            && w.thread_name
                .as_deref()
                .is_some_and(|n| n.starts_with("crowd-"))
            && w.lock_addr == &*m as *const Instrumented<()> as usize));
        assert!(
            v.windows(2).all(|p| p[0].since <= p[1].since),
            "oldest first"
        );
        drop(g);
        let numbers: Vec<u64> = ts.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(!current_waiters().iter().any(|w| w.lock == "crowded"));
        assert_eq!(
            registry::slots_of(&numbers),
            0,
            "exited threads leave no slot behind"
        );
    }

    #[test]
    fn registration_from_many_contending_threads_stays_consistent_and_leaves_nothing() {
        let locks: Arc<Vec<Instrumented<u64>>> = Arc::new(
            ["contended-a", "contended-b"]
                .into_iter()
                .map(|n| Instrumented::new(n, 0))
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let lister = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let v: Vec<_> = current_waiters()
                        .into_iter()
                        .filter(|w| w.lock.starts_with("contended-"))
                        .collect();
                    let mut threads: Vec<u64> = v.iter().map(|w| w.thread).collect();
                    threads.sort_unstable();
                    threads.dedup();
                    assert_eq!(
                        threads.len(),
                        v.len(),
                        "a thread waits for one lock at a time"
                    );
                }
            })
        };
        let rounds = 2_000u64;
        let ts: Vec<_> = (0..16)
            .map(|t| {
                let locks = locks.clone();
                std::thread::spawn(move || {
                    for i in 0..rounds {
                        *locks[(t + i as usize) % 2].lock() += 1;
                    }
                    thread_number()
                })
            })
            .collect();
        let numbers: Vec<u64> = ts.into_iter().map(|t| t.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        lister.join().unwrap();
        let total: u64 = locks.iter().map(|m| *m.lock()).sum();
        assert_eq!(total, 16 * rounds);
        let waited: u64 = locks.iter().map(|m| m.report().waited).sum();
        let recorded: u64 = locks.iter().map(|m| m.report().wait.count()).sum();
        assert_eq!(waited, recorded, "every wait recorded once");
        assert!(!current_waiters()
            .iter()
            .any(|w| w.lock.starts_with("contended-")));
        assert_eq!(registry::slots_of(&numbers), 0);
    }

    #[test]
    fn dropping_a_watchdog_returns_without_waiting_out_its_interval() {
        // An interval of a year: a drop that waited it out would never return, so the
        // behaviour checked is that it returns at all (the receive below is only a guard
        // against hanging the suite, as in the other tests).
        let dog = Watchdog::start(
            WatchdogConfig {
                threshold: Duration::from_secs(1),
                interval: Duration::from_secs(365 * 24 * 3600),
                abort: false,
            },
            |_| {},
        );
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(dog);
            let _ = tx.send(());
        });
        assert!(
            rx.recv_timeout(Duration::from_secs(60)).is_ok(),
            "the drop waited for the watchdog's interval"
        );
    }

    #[test]
    fn try_lock_takes_a_free_lock_and_fails_on_a_held_one_without_counting_a_wait() {
        let m = Instrumented::new("tried", 5u32);
        let g = m.try_lock().expect("free");
        let line = line!() - 1;
        assert_eq!(m.report().holder.unwrap().1.line(), line);
        assert!(m.try_lock().is_none(), "held");
        drop(g);
        let r = m.report();
        assert_eq!((r.acquisitions, r.waited), (1, 0));
        assert_eq!(*m.try_lock().unwrap(), 5);
    }

    #[test]
    fn get_mut_and_into_inner_reach_the_value_without_locking() {
        let mut m = Instrumented::new("owned", vec![1]);
        m.get_mut().push(2);
        assert_eq!(m.report().acquisitions, 0);
        assert_eq!(m.into_inner(), vec![1, 2]);
    }

    #[test]
    fn debug_shows_the_name_and_whether_locked_without_blocking() {
        let m = Instrumented::new("shown", 0u8);
        assert_eq!(
            format!("{m:?}"),
            "Instrumented { name: \"shown\", locked: false, .. }"
        );
        let _g = m.lock();
        // Formatting a held lock from its holder returns: it never locks.
        assert!(format!("{m:?}").contains("locked: true"));
    }

    #[test]
    fn a_default_instrumented_lock_holds_the_default_and_is_named_after_its_type() {
        let m: Instrumented<Vec<u8>> = Instrumented::default();
        assert!(m.lock().is_empty());
        assert!(m.report().name.contains("Vec<u8>"));
    }

    #[test]
    fn the_watchdog_reports_a_wait_only_once_it_is_past_the_threshold() {
        let threshold = Duration::from_millis(20);
        let m = Arc::new(Instrumented::new("watched", ()));
        let (tx, rx) = mpsc::channel();
        let dog = Watchdog::start(
            WatchdogConfig {
                threshold,
                interval: Duration::from_millis(5),
                abort: false,
            },
            move |long| {
                for w in long.iter().filter(|w| w.lock == "watched") {
                    let _ = tx.send(w.clone());
                }
            },
        );
        let g = m.lock();
        let m2 = m.clone();
        let t = std::thread::spawn(move || drop(m2.lock()));
        let w = rx.recv_timeout(Duration::from_secs(20)).expect("a report");
        // Behaviour, not speed: a wait is never reported younger than the threshold.
        assert!(
            w.since.elapsed() >= threshold,
            "reported before its threshold"
        );
        drop(g);
        t.join().unwrap();
        drop(dog);
    }

    #[test]
    fn a_timed_lock_gives_up_and_leaves_the_registry() {
        let m = Arc::new(Instrumented::new("timed", ()));
        let g = m.lock();
        let m2 = m.clone();
        let got = std::thread::spawn(move || m2.try_lock_for(Duration::from_millis(10)).is_some())
            .join()
            .unwrap();
        assert!(!got);
        assert!(!current_waiters().iter().any(|w| w.lock == "timed"));
        drop(g);
        assert!(m.try_lock_for(Duration::from_millis(10)).is_some());
    }

    #[test]
    fn a_panic_while_holding_releases_through_the_guard() {
        let m = Arc::new(Instrumented::new("panicky", 0));
        let m2 = m.clone();
        let r = std::thread::spawn(move || {
            let mut g = m2.lock();
            *g += 1;
            panic!("inside the critical section");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(
            *m.try_lock_for(Duration::from_secs(5)).expect("released"),
            1
        );
    }

    #[test]
    fn a_huge_timeout_means_no_deadline() {
        let m = Instrumented::new("huge", ());
        assert!(m.try_lock_for(Duration::MAX).is_some());
        let raw = RawTurnstileMutex::<crate::mutex::NoStats>::new();
        assert!(lock_api::RawMutexTimed::try_lock_for(&raw, Duration::MAX));
    }
}
