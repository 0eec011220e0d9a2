//! The turnstile lock: a 4-byte state word, one atomic instruction to lock and one to unlock
//! when uncontended (`lock bts` and `lock xadd` on x86: neither reads the line first nor
//! loops). Waiters sleep in the [parking table](super::park), each on a word of its own,
//! never on the lock word (which changes too often for a futex wait on it to hold). An unlock
//! wakes at most one waiter, and none while a woken one is still on its way; the woken one
//! claims the next release, so that a holder re-locking at once cannot beat it again (the
//! unlock locks on its behalf: a *grant*), and the unlock that grants wakes the next waiter,
//! so the new holder never stops for that system call. Arriving threads spin, for a bounded
//! time, only while nobody is parked; a waiter that has waited more than 1 ms is handed the
//! lock directly, at a bounded rate, so that fairness does not turn into a convoy.
//!
//! The state word's bits and transitions are documented on `RawTurnstileMutex::state`. The
//! reasons behind each choice, with the measurements, are in `docs/BENCHMARKS.md`, section
//! "The turnstile lock: design history".
//!
//! # Invariants
//!
//! A thread parks only if its validate step, under the bucket mutex, still sees
//! `LOCKED` (and, for a woken waiter, no `GRANT`), so the unlock that follows sees `PARKED`.
//! `PARKED` without `LOCKED` or `WOKEN` lasts only until the wake step of the unlock that
//! produced it. `WOKEN` is a *duty* to make progress for the parked waiters, and someone always
//! carries it: every setting of `WOKEN` comes with one unparked thread, which clears `WOKEN`
//! by its next move on the lock (acquiring, parking again while the lock is held, or timing
//! out while it is held) or passes it on by taking a grant — a grant either clears `WOKEN` or
//! keeps it for its granter, which, in the same unlock, unparks a successor to carry it (under
//! the bucket mutex) or clears it (no waiter left, or the one unparked is handed the lock).
//! So if `WOKEN` is set, a woken thread has not yet made its move or a granter has not yet
//! finished its successor step, and an unlock that skipped waking because of `WOKEN` strands
//! nobody. (Two unlocks can race to wake — the second finds `PARKED` before the first's wake
//! step — and then two threads carry the duty: a wasted wake-up, never a lost one.) Only a woken waiter sets `CLAIM`, and every
//! woken waiter clears `CLAIM` (whoever set it) in the same CAS as any move that ends its
//! polling, made while `LOCKED` is set (parking, timing out) or that sets `LOCKED` (acquiring)
//! — except taking a grant, which the grant itself paid for by clearing `CLAIM`. So a claim is
//! withdrawn only while the lock is held, an unlock that released a claimed lock finds the
//! claim still there unless someone has locked since (whose own unlock then sees it), and a
//! `GRANT` is set only while some woken waiter is still polling and will take it (a woken
//! waiter never parks or leaves while `GRANT` is set, nor while the lock is free). A
//! starvation hand-off gives the lock to exactly the unparked thread, which returns owning it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::park::{Parked, Table, TOKEN_HANDOFF, TOKEN_RETRY};

const LOCKED: u32 = 1;
const PARKED: u32 = 1 << 1;
const WOKEN: u32 = 1 << 2;
const CLAIM: u32 = 1 << 3;
const GRANT: u32 = 1 << 4;
const LONG: u32 = 1 << 5;

/// The most an arriving thread spins before it parks, while nobody is parked: about one park
/// and wake-up round trip (the waker's `FUTEX_WAKE` of a sleeping thread, then the sleeper's
/// own wake-up), the budget of competitive spin-then-block (spinning as long as blocking would
/// cost is within twice the best choice made knowing the wait: Karlin, Li, Manasse and
/// Owicki, SOSP 1991). At 2 threads and 1 µs holds, 20 µs parked about half as often as 4 µs
/// and ran faster (docs/BENCHMARKS.md, "the lock at two threads"; a per-thread budget halved
/// by each failed spin parked as often as 4 µs did, since against a holder that re-locks at
/// once most spins fail even when critical sections are short).
pub(crate) const SPIN_LIMIT: Duration = Duration::from_micros(20);

/// The arrival spin while the lock's `LONG` hint is set (a woken waiter recently polled out
/// [`WOKEN_SPIN_LIMIT`] without getting the lock: critical sections are long, and spinning
/// the full [`SPIN_LIMIT`] would only burn the core): the fixed budget of the lock's earlier
/// versions, for which 2, 4 and 10 µs measured alike (docs/BENCHMARKS.md, design history).
pub(crate) const LONG_SPIN_LIMIT: Duration = Duration::from_micros(4);

/// An arriving spinner's back-off cap: up to 2^6 PAUSEs (a microsecond or two, at tens of ns
/// each) between polls before it turns to yields, so that while a critical section of a
/// microsecond runs the spinner does not pull the lock's line from its holder at every poll
/// (2^6 and 2^3 measured alike within the noise; docs/BENCHMARKS.md, design history).
const ARRIVAL_MAX_PAUSES_LOG2: u32 = 6;

/// How long a woken thread polls, with its claim on the next release, before parking again: a
/// shorter critical section ends in a grant, a longer one in another park and wake-up; 10 and
/// 20 µs lost in the full sweep and at hold 100 µs (`turnstile bench mutex --hold-ns 100000`),
/// see docs/BENCHMARKS.md (design history).
pub(crate) const WOKEN_SPIN_LIMIT: Duration = Duration::from_micros(50);

/// Back-off cap while a woken thread polls: at most 2^3 PAUSEs (~0.2 µs) between polls, then
/// yields; polling every PAUSE stole the holder's line and 2^5 was no better (docs/BENCHMARKS.md,
/// design history).
const MAX_PAUSES_LOG2: u32 = 3;

/// A waiter that has waited this long is handed the lock: Go's `starvationThresholdNs` (1 ms),
/// see docs/BENCHMARKS.md (design history) for the variant tried and dropped.
pub(crate) const STARVATION_THRESHOLD: Duration = Duration::from_millis(1);

/// At most one hand-off per this interval per parking-table bucket: parking_lot's
/// eventual-fairness period (0.5 ms on average); a hand-off at every unlock would pay a
/// wake-up with the lock idle at every change of holder once waiters pass the starvation
/// threshold (docs/BENCHMARKS.md, design history).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const FAIR_HANDOFF_INTERVAL: Duration = Duration::from_micros(500);

/// Buckets in the parking table: a power of two, a few times the number of locks expected to
/// have sleepers at once (parking_lot sizes its table at 3 × threads; a fixed table keeps
/// the slow path free of resizing, and a collision only costs a longer queue scan).
#[cfg_attr(loom, allow(dead_code))]
const BUCKETS: usize = 1024;

#[cfg(not(loom))]
pub(crate) static TABLE: std::sync::LazyLock<Table> =
    std::sync::LazyLock::new(|| Table::new(BUCKETS, STARVATION_THRESHOLD, FAIR_HANDOFF_INTERVAL));

/// Hooks the slow paths call, for instrumentation. [`NoStats`] compiles to nothing.
pub trait LockStats {
    /// The empty value (for `const` construction).
    const INIT: Self;
    /// Spun `iterations` times before taking the lock or parking (called once per slow path).
    fn spun(&self, iterations: u32) {
        let _ = iterations;
    }
    /// About to sleep in the parking table.
    fn park(&self) {}
    /// Returned from a sleep because an unlock woke it.
    fn woken(&self) {}
    /// Acquired the lock after sleeping at least once.
    fn slept_acquire(&self) {}
    /// An unlock woke a waiter.
    fn wake_sent(&self) {}
    /// An unlock handed ownership directly to a waiter (starvation mode).
    fn handoff(&self) {}
    /// An unlock locked again on behalf of a claiming woken waiter.
    fn grant(&self) {}
}

/// No instrumentation: the plain lock.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStats;

impl LockStats for NoStats {
    const INIT: Self = NoStats;
}

/// The state word, as the algorithm needs it (the real atomic, or loom's under model checking).
pub(crate) trait StateWord {
    fn load(&self) -> u32;
    /// Compare-and-swap, acquire-release on success.
    fn cas(&self, current: u32, new: u32) -> Result<u32, u32>;
    /// Sets `LOCKED`, returning whether it was clear (acquire).
    fn acquire(&self) -> bool;
    /// Clears `LOCKED`, which the caller owns, returning the old state (release). A
    /// subtraction (`lock xadd`: one instruction, no retry loop, no read of the line first),
    /// exact because the bit is known to be set.
    fn release(&self) -> u32;
    /// The key the parking table files this lock's waiters under.
    fn key(&self) -> usize {
        self as *const Self as *const () as usize
    }
}

/// The memory orderings of the state word's operations, in one place for the shipped atomic and
/// the model checker's (see [`impl_state_word`]): a plain load is only a hint (every decision is
/// confirmed by a CAS), a successful CAS may acquire the lock (taking it, a grant, a hand-off's
/// re-lock) or publish a critical section (a grant after the release), lock acquires and unlock
/// releases. A failed CAS only returns a hint, like a load.
const LOAD: Ordering = Ordering::Relaxed;
const CAS_OK: Ordering = Ordering::AcqRel;
const CAS_FAIL: Ordering = Ordering::Relaxed;
const LOCK: Ordering = Ordering::Acquire;
const UNLOCK: Ordering = Ordering::Release;

/// Implements [`StateWord`] for an atomic type with `AtomicU32`'s methods: the shipped
/// `std::sync::atomic::AtomicU32` and, under `--cfg loom`, loom's, with the same bodies and
/// the same ordering constants, so the model checks exactly the orderings that ship.
macro_rules! impl_state_word {
    ($atomic:ty) => {
        impl StateWord for $atomic {
            #[inline]
            fn load(&self) -> u32 {
                <$atomic>::load(self, LOAD)
            }
            #[inline]
            fn cas(&self, current: u32, new: u32) -> Result<u32, u32> {
                self.compare_exchange(current, new, CAS_OK, CAS_FAIL)
            }
            #[inline]
            fn acquire(&self) -> bool {
                self.fetch_or(LOCKED, LOCK) & LOCKED == 0
            }
            #[inline]
            fn release(&self) -> u32 {
                self.fetch_sub(LOCKED, UNLOCK)
            }
        }
    };
}

impl_state_word!(std::sync::atomic::AtomicU32);
#[cfg(loom)]
impl_state_word!(loom::sync::atomic::AtomicU32);

/// The turnstile raw mutex. Use it through [`crate::mutex::Mutex`] (a `lock_api::Mutex`), or
/// with a [`LockStats`] implementation for counters (see [`crate::mutex::Instrumented`]).
#[derive(Debug)]
pub struct RawTurnstileMutex<S: LockStats = NoStats> {
    /// The state word.
    ///
    /// | bit | name | meaning |
    /// |---|---|---|
    /// | 0 | `LOCKED` | owned (or granted to a claimer that has not taken it yet) |
    /// | 1 | `PARKED` | the bucket may hold waiters (changed only under the bucket mutex) |
    /// | 2 | `WOKEN` | a woken waiter, or a granter about to wake one, is on its way: unlocks wake nobody |
    /// | 3 | `CLAIM` | a woken waiter asks the next unlock to lock on its behalf |
    /// | 4 | `GRANT` | an unlock did: `LOCKED` belongs to the woken waiter, which clears `GRANT` |
    /// | 5 | `LONG` | hint: a woken waiter recently gave up polling, so grants wake no successor |
    ///
    /// Lock sets `LOCKED` (`fetch_or`: a newcomer may barge in ahead of a woken waiter);
    /// unlock clears it (`fetch_sub`) and looks at what it cleared: `CLAIM` → grant; `PARKED`
    /// without `WOKEN` → wake one; otherwise nothing. The states (`PARKED` and `LONG` may
    /// accompany any; `+`/`−` set/clear bits):
    ///
    /// | state | reached by | left by |
    /// |---|---|---|
    /// | `0` | unlock, nobody parked or woken | lock |
    /// | `LOCKED` | lock; the last woken waiter acquiring | unlock; a parker (`+PARKED`) |
    /// | `LOCKED PARKED` | a parker | unlock, then its wake step: unpark the oldest (`+WOKEN`, `−PARKED` if last) or hand it the lock (`+LOCKED`) |
    /// | `PARKED` | unlock, until its wake step | the wake step; a newcomer (`+LOCKED`) |
    /// | `WOKEN` | the wake step | the woken waiter acquiring (`+LOCKED −WOKEN −LONG`) or claiming (`+CLAIM`); a newcomer |
    /// | `LOCKED WOKEN` | a newcomer; a grant with a successor being woken | the woken waiter claiming, parking again (`−WOKEN +PARKED +LONG`) or timing out (`−WOKEN`); the successor step (`−WOKEN`) |
    /// | `LOCKED WOKEN CLAIM` | the woken waiter claiming | unlock, then the grant (`+LOCKED +GRANT −CLAIM`, `−WOKEN` unless it wakes a successor); the claimer parking or timing out (`−WOKEN −CLAIM`) |
    /// | `WOKEN CLAIM` | unlock, until its grant; claiming a free lock | the grant; the claimer acquiring; a newcomer |
    /// | `LOCKED GRANT` (± `WOKEN`) | the grant | the claimer taking it (`−GRANT −LONG`) |
    state: std::sync::atomic::AtomicU32,
    stats: S,
}

impl<S: LockStats> RawTurnstileMutex<S> {
    /// An unlocked mutex.
    pub const fn new() -> Self {
        RawTurnstileMutex {
            state: std::sync::atomic::AtomicU32::new(0),
            stats: S::INIT,
        }
    }

    /// The instrumentation hooks.
    pub fn stats(&self) -> &S {
        &self.stats
    }

    /// Locks, waiting at most until `deadline`. Returns whether it got the lock.
    #[inline]
    pub fn lock_until(&self, deadline: Option<Instant>) -> bool {
        self.state.acquire() || self.lock_slow(deadline)
    }

    #[cold]
    fn lock_slow(&self, deadline: Option<Instant>) -> bool {
        let got = self.lock_slow_lending(deadline);
        self.reclaim_after(got);
        got
    }

    /// The slow path without its end: a thread inside an `auto` gate lends its slot while it
    /// sleeps here (`gate_hook`; nothing for any other thread), and [`Self::reclaim_after`]
    /// must follow. Split so that an instrumented lock can stop counting its wait, and show
    /// itself held, before the reclaim's own wait in the gate's queue.
    #[cold]
    pub(crate) fn lock_slow_lending(&self, deadline: Option<Instant>) -> bool {
        #[cfg(loom)]
        unreachable!("the model checks drive lock_slow with a table of their own");
        #[cfg(not(loom))]
        lock_slow(
            &self.state,
            &TABLE,
            &self.stats,
            deadline,
            crate::gate_hook::lend,
        )
    }

    /// Takes back a slot lent by [`Self::lock_slow_lending`] (`got`: it got the lock).
    pub(crate) fn reclaim_after(&self, got: bool) {
        if !got {
            crate::gate_hook::reclaim();
            return;
        }
        // The lock is this thread's, but no guard holds it yet: if the reclaim panics (a
        // gate accounting bug), the lock is released before the panic goes on, not left held
        // by nobody.
        if let Err(panic) = std::panic::catch_unwind(crate::gate_hook::reclaim) {
            self.release_owned();
            std::panic::resume_unwind(panic);
        }
    }

    /// Locks without the `auto` gate's step-out around the wait (the condition variable's
    /// relock: its wait lent the slot already, and takes it back once the guard's lock is held
    /// again).
    pub(crate) fn lock_without_gate(&self) {
        if self.state.acquire() {
            return;
        }
        #[cfg(loom)]
        unreachable!("the model checks drive lock_slow with a table of their own");
        #[cfg(not(loom))]
        lock_slow(&self.state, &TABLE, &self.stats, None, || {});
    }

    /// Whether waiters are parked on it (tests that need a waiter to be asleep first).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn has_parked(&self) -> bool {
        StateWord::load(&self.state) & PARKED != 0
    }

    /// Unlocks a lock this thread holds.
    #[inline]
    fn release_owned(&self) {
        let old = self.state.release();
        debug_assert!(old & LOCKED != 0, "unlock of an unlocked mutex");
        if needs_unlock_slow(old) {
            self.unlock_slow(old);
        }
    }

    #[cold]
    fn unlock_slow(&self, old: u32) {
        #[cfg(not(loom))]
        after_unlock(&self.state, &TABLE, &self.stats, old);
        #[cfg(loom)]
        {
            let _ = old;
            unreachable!("the model checks drive unlock_slow with a table of their own")
        }
    }
}

impl<S: LockStats> Default for RawTurnstileMutex<S> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `lock` returns only after this thread turned `LOCKED` from clear to set by an atomic
// RMW of its own (`fetch_or` seeing it clear, or a CAS from a state without it); or received a
// hand-off token, which a wake step gives to exactly one dequeued waiter after itself turning
// `LOCKED` from clear to set (a CAS, under the bucket mutex) on that waiter's behalf; or
// cleared `GRANT` by a CAS, which an unlock sets in the same CAS that turns `LOCKED` from clear
// to set on a claimer's behalf, and which only one thread's CAS can clear. Each such
// transition is exclusive until the owner's `unlock` clears `LOCKED`, so at most one thread
// holds the lock. The RMWs are acquire (lock, taking a grant) and release (unlock), the grant
// is an acquire-release CAS after the granter's release, and a hand-off passes through the
// bucket mutex and the parker's release/acquire token, so the critical sections are ordered.
unsafe impl<S: LockStats + Send + Sync> lock_api::RawMutex for RawTurnstileMutex<S> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Self::new();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.state.acquire() {
            self.lock_slow(None);
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.state.acquire()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.release_owned();
    }

    fn is_locked(&self) -> bool {
        StateWord::load(&self.state) & LOCKED != 0
    }
}

// SAFETY: as for `RawMutex`; the timed variants only add a deadline to the same slow path,
// and a waiter that times out leaves without ever owning the lock.
unsafe impl<S: LockStats + Send + Sync> lock_api::RawMutexTimed for RawTurnstileMutex<S> {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        // A timeout too large to add to a clock reading means no deadline.
        self.lock_until(Instant::now().checked_add(timeout))
    }

    fn try_lock_until(&self, deadline: Instant) -> bool {
        self.lock_until(Some(deadline))
    }
}

/// Bounded spinning with exponential backoff between polls of the lock: 1, 2, 4, … PAUSEs
/// between polls up to 2^`max_log2`, then a `yield` between polls (which lets another runnable
/// thread have the core, and is itself a ~0.6 µs back-off when none is), until the time limit
/// passes. Never spins under loom, whose model would have to explore every iteration.
struct Spin {
    steps: u32,
    start: Option<Instant>,
    limit: Duration,
    max_log2: u32,
    #[cfg_attr(not(loom), allow(dead_code))]
    loom_steps: u32,
}

impl Spin {
    /// Spins for at most `limit`; under loom, `loom_steps` polls (each a modelled yield), so
    /// that the model explores what happens between polls.
    fn new(limit: Duration, max_log2: u32, loom_steps: u32) -> Self {
        Spin {
            steps: 0,
            start: None,
            limit,
            max_log2,
            loom_steps,
        }
    }

    /// Spins once; false (without spinning) once the budget is spent.
    #[inline]
    fn step(&mut self) -> bool {
        #[cfg(loom)]
        {
            if self.steps >= self.loom_steps {
                return false;
            }
            self.steps += 1;
            crate::sync::yield_now();
            return true;
        }
        #[cfg_attr(loom, allow(unreachable_code))]
        // The first polls come within ~0.4 µs and need no clock (a reading costs ~30 ns).
        if self.steps > self.max_log2 {
            let start = *self.start.get_or_insert_with(Instant::now);
            if start.elapsed() >= self.limit {
                return false;
            }
            std::thread::yield_now();
        } else {
            for _ in 0..1u32 << self.steps {
                std::hint::spin_loop();
            }
        }
        self.steps += 1;
        true
    }
}

/// The slow path of lock, in phases: an arriving thread spins while nobody is parked
/// ([`Acquisition::arrive`]), then parks ([`Acquisition::park`]); a thread woken with the
/// `WOKEN` duty polls with a claim on the next release ([`Acquisition::poll_woken`]), taking
/// the lock, a grant, or parking again. A hand-off arrives as a token of the park itself.
pub(crate) fn lock_slow<B: StateWord, S: LockStats>(
    state: &B,
    table: &Table,
    stats: &S,
    deadline: Option<Instant>,
    before_park: fn(),
) -> bool {
    let mut a = Acquisition {
        state,
        stats,
        deadline,
        before_park,
        spin: Spin::new(SPIN_LIMIT, ARRIVAL_MAX_PAUSES_LOG2, 0),
        spun: 0,
        woken: false,
        slept: false,
        since: None,
    };
    loop {
        let next = if a.woken { a.poll_woken() } else { a.arrive() };
        match next {
            Next::Acquired => return a.finish(true),
            Next::GaveUp => return a.finish(false),
            Next::Park => {}
        }
        match a.park(table) {
            // The lock came free or was granted; any duty is still ours: poll again.
            Parked::Invalid => {}
            Parked::TimedOut => return a.finish(false),
            Parked::Unparked(TOKEN_HANDOFF) => return a.finish(true),
            Parked::Unparked(_) => {
                // Woken with the duty (the unlock set `WOKEN` for us): it is cleared by our
                // next move on the lock, whichever it is.
                a.woken = true;
                a.spun += a.spin.steps;
                a.spin = Spin::new(WOKEN_SPIN_LIMIT, MAX_PAUSES_LOG2, 1);
            }
        }
    }
}

/// How a polling phase of [`lock_slow`] ended.
enum Next {
    /// This thread owns the lock.
    Acquired,
    /// The deadline passed; this thread holds no duty and no claim.
    GaveUp,
    /// The lock is held and polling is over: park.
    Park,
}

/// One acquisition on the slow path: what its phases share.
struct Acquisition<'a, B, S> {
    state: &'a B,
    stats: &'a S,
    deadline: Option<Instant>,
    /// Called before each park (the gate's automatic step-out; a no-op in the models).
    before_park: fn(),
    /// The current phase's spin budget.
    spin: Spin,
    /// Spin steps of earlier phases.
    spun: u32,
    /// This thread was woken by an unlock that set `WOKEN` for it: it must clear `WOKEN`
    /// (and any `CLAIM`) by its next move: acquire, park again, or time out.
    woken: bool,
    /// This thread has slept at least once.
    slept: bool,
    /// When it first parked (the starvation clock does not restart when it parks again).
    since: Option<Instant>,
}

impl<B: StateWord, S: LockStats> Acquisition<'_, B, S> {
    /// Reports the acquisition's spins (and, if it got the lock after sleeping, that) and
    /// returns `got`.
    fn finish(&self, got: bool) -> bool {
        report_spins(self.stats, self.spun + self.spin.steps);
        if got && self.slept {
            self.stats.slept_acquire();
        }
        got
    }

    fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// An arriving thread: take the lock if free, spin (bounded) while nobody is parked; only
    /// briefly if the `LONG` hint says critical sections are long.
    fn arrive(&mut self) -> Next {
        let mut s = self.state.load();
        if s & LONG != 0 && self.spin.steps == 0 {
            self.spin.limit = LONG_SPIN_LIMIT;
        }
        loop {
            if s & LOCKED == 0 {
                match self.state.cas(s, s | LOCKED) {
                    Ok(_) => return Next::Acquired,
                    Err(x) => s = x,
                }
            } else if s & PARKED == 0 && self.spin.step() {
                s = self.state.load();
            } else if self.expired() {
                return Next::GaveUp;
            } else {
                return Next::Park;
            }
        }
    }

    /// A woken thread, carrying the duty: claim the next release and poll (bounded) for the
    /// lock or a grant; past the deadline, give the duty and the claim back.
    fn poll_woken(&mut self) -> Next {
        let mut s = self.state.load();
        loop {
            if s & LOCKED == 0 {
                s = match self.take_free(s) {
                    Ok(true) => return Next::Acquired,
                    Ok(false) => self.state.load(),
                    Err(x) => x,
                };
                continue;
            }
            if s & GRANT != 0 {
                // An unlock found our claim and locked on our behalf: the lock is ours.
                match self.state.cas(s, s & !(GRANT | LONG)) {
                    Ok(_) => return Next::Acquired,
                    Err(x) => s = x,
                }
                continue;
            }
            if s & CLAIM == 0 {
                // Held: ask its holder's unlock to lock on our behalf rather than release.
                match self.state.cas(s, s | CLAIM) {
                    Ok(_) => s |= CLAIM,
                    Err(x) => {
                        s = x;
                        continue;
                    }
                }
            }
            if self.spin.step() {
                s = self.state.load();
            } else if !self.expired() {
                return Next::Park;
            } else {
                // Give the duty and the claim back, in the one CAS that also shows whether the
                // lock was granted to us meanwhile (then we own it: take it above). The
                // holder's unlock will see WOKEN clear and wake someone.
                match self.state.cas(s, s & !(WOKEN | CLAIM)) {
                    Ok(_) => return Next::GaveUp,
                    Err(x) => s = x,
                }
            }
        }
    }

    /// A woken thread finds the lock free in state `s`. If others are parked and nobody has
    /// claimed it, it claims it rather than take it, so that if the holder that just released
    /// re-locks (a loop), its next unlock grants us the lock and wakes the next waiter itself;
    /// it takes it only if it is still free and claimed after a pause (the longest back-off
    /// step, ~0.2 µs: a looping holder re-locks within nanoseconds). Otherwise it takes it,
    /// ending the duty and the claim, and the `LONG` hint (we waited only as long as a short
    /// critical section). `Ok(true)`: taken; `Ok(false)`: claimed; `Err`: the state changed.
    fn take_free(&self, s: u32) -> Result<bool, u32> {
        if s & (PARKED | CLAIM) == PARKED {
            self.state.cas(s, s | CLAIM)?;
            #[cfg(loom)]
            crate::sync::yield_now();
            #[cfg(not(loom))]
            for _ in 0..1u32 << MAX_PAUSES_LOG2 {
                std::hint::spin_loop();
            }
            return Ok(false);
        }
        self.state.cas(s, (s | LOCKED) & !(WOKEN | CLAIM | LONG))?;
        Ok(true)
    }

    /// Parks, if the lock is still held (and, for a woken thread, not granted to it), giving
    /// up any duty and claim in the same CAS that sets `PARKED` (and `LONG`: a woken thread
    /// that parks again waited out a long critical section).
    fn park(&mut self, table: &Table) -> Parked {
        let state = self.state;
        let had_duty = self.woken;
        let validate = || {
            // Under the bucket mutex: park only while the lock is held (and not granted to a
            // claimer, if we may be that claimer), and say so.
            let mut s = state.load();
            loop {
                if s & LOCKED == 0 || (had_duty && s & GRANT != 0) {
                    return false;
                }
                let mut new = s | PARKED;
                if had_duty {
                    new = (new | LONG) & !(WOKEN | CLAIM);
                }
                match state.cas(s, new) {
                    Ok(_) => return true,
                    Err(x) => s = x,
                }
            }
        };
        let timed_out = |last: bool| {
            if last {
                clear(state, PARKED);
            }
        };
        let since = *self.since.get_or_insert_with(Instant::now);
        (self.before_park)();
        let parked = table.park(
            state.key(),
            since,
            had_duty,
            validate,
            timed_out,
            self.deadline,
        );
        if parked != Parked::Invalid {
            self.stats.park();
        }
        if let Parked::Unparked(_) = parked {
            self.stats.woken();
            self.slept = true;
        }
        parked
    }
}

/// Reports spinning to the hooks, if there was any (a counter update is a shared RMW).
#[inline]
fn report_spins<S: LockStats>(stats: &S, steps: u32) {
    if steps > 0 {
        stats.spun(steps);
    }
}

/// Clears `bits` in the state (a CAS loop).
fn clear<B: StateWord>(state: &B, bits: u32) {
    let mut s = state.load();
    while let Err(x) = state.cas(s, s & !bits) {
        s = x;
    }
}

/// Whether an unlock that released a state of `old` has more to do: grant the lock to a
/// claiming woken waiter, or wake a parked one when nobody woken is on the way.
#[inline]
pub(crate) fn needs_unlock_slow(old: u32) -> bool {
    let x = old & (PARKED | WOKEN | CLAIM);
    x == PARKED || x & CLAIM != 0
}

/// The slow path of unlock, after the lock has been released with `old` the state it released.
/// With a claim: lock again on the claimer's behalf (`+LOCKED +GRANT −CLAIM`) unless someone
/// already took the lock (their unlock will see the claim), keeping `WOKEN` for a successor
/// this thread then wakes if others are parked (and critical sections are not `LONG`).
/// Otherwise a parked waiter and nobody woken: wake one.
pub(crate) fn after_unlock<B: StateWord, S: LockStats>(
    state: &B,
    table: &Table,
    stats: &S,
    old: u32,
) {
    if old & CLAIM != 0 {
        // A claim is withdrawn only while the lock is held, so until someone locks again it is
        // still here.
        let mut s = state.load();
        while s & (LOCKED | CLAIM) == CLAIM {
            let new = (s | LOCKED | GRANT) & !CLAIM;
            let successor = s & (PARKED | LONG) == PARKED;
            let new = if successor { new } else { new & !WOKEN };
            match state.cas(s, new) {
                Ok(_) => {
                    stats.grant();
                    if successor {
                        wake_after_unlock(state, table, stats, true);
                    }
                    return;
                }
                Err(x) => s = x,
            }
        }
        return;
    }
    wake_after_unlock(state, table, stats, false);
}

/// The wake step of unlock, after the lock has been released (one `fetch_sub`, whatever the
/// other bits): the release found a parked waiter and nobody woken, so wake the oldest one —
/// or, if it has waited past the starvation threshold, take the lock back (unless a newcomer
/// already has) and hand it over. With `duty`, this is a granter's *successor step*: the grant
/// kept `WOKEN` for the thread woken here, so if nobody is woken (no waiter left, or the
/// waiter is handed the lock instead) the step clears `WOKEN` itself.
fn wake_after_unlock<B: StateWord, S: LockStats>(state: &B, table: &Table, stats: &S, duty: bool) {
    table.unpark_one(state.key(), |u| {
        // Under the bucket mutex: PARKED changes only here, so clearing it when no waiter of
        // this lock remains is exact. WOKEN may have been set meanwhile by another unlock
        // that found the same waiters: two woken threads are then on their way, which costs
        // a wake-up but strands nobody (each clears WOKEN by its next move).
        let mut s = state.load();
        loop {
            let mut keep = if u.more { !0 } else { !PARKED };
            if duty {
                keep &= !WOKEN; // set again below only for a thread woken to carry it
            }
            let (new, token) = if !u.unparked {
                (s & keep, TOKEN_RETRY)
            } else if u.be_fair && s & LOCKED == 0 {
                ((s | LOCKED) & keep, TOKEN_HANDOFF)
            } else {
                ((s & keep) | WOKEN, TOKEN_RETRY)
            };
            match state.cas(s, new) {
                Ok(_) => {
                    if u.unparked {
                        stats.wake_sent();
                    }
                    if token == TOKEN_HANDOFF {
                        stats.handoff();
                    }
                    return token;
                }
                Err(x) => s = x,
            }
        }
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lock_api::{RawMutex, RawMutexTimed};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_panic_in_the_slot_reclaim_after_a_slow_lock_leaves_the_lock_unlocked() {
        use crate::gate_hook::tests::PANIC_IN_RECLAIM;
        let m = std::sync::Arc::new(RawTurnstileMutex::<NoStats>::new());
        lock_api::RawMutex::lock(&*m);
        let m2 = m.clone();
        let t = std::thread::spawn(move || {
            PANIC_IN_RECLAIM.with(|p| p.set(true));
            // Finds the lock held: the slow path, then the reclaim, which panics.
            std::panic::catch_unwind(|| lock_api::RawMutex::lock(&*m2)).is_err()
        });
        // Until the other thread waits (parked or spinning), then let it have the lock.
        while StateWord::load(&m.state) & PARKED == 0 && !t.is_finished() {
            std::thread::yield_now();
        }
        // SAFETY: this thread locked it above.
        unsafe { lock_api::RawMutex::unlock(&*m) };
        assert!(t.join().unwrap(), "the panic reached the caller");
        assert!(
            lock_api::RawMutex::try_lock(&*m),
            "released on the way out, not left held by nobody"
        );
        // SAFETY: locked by the try_lock just above.
        unsafe { lock_api::RawMutex::unlock(&*m) };
    }

    #[test]
    fn the_lock_is_four_bytes() {
        assert_eq!(std::mem::size_of::<RawTurnstileMutex>(), 4);
        assert_eq!(std::mem::size_of::<crate::mutex::Mutex<u32>>(), 8);
    }

    #[test]
    fn an_unlock_that_releases_a_claimed_lock_locks_it_again_for_the_claimer() {
        let m = RawTurnstileMutex::<crate::mutex::LockCounters>::new();
        // Held, with a woken waiter polling and claiming the next release.
        m.state
            .store(LOCKED | WOKEN | CLAIM, std::sync::atomic::Ordering::Relaxed);
        unsafe { m.unlock() };
        // Nobody else is parked, so the grant also ends the woken duty.
        assert_eq!(StateWord::load(&m.state), LOCKED | GRANT);
        assert_eq!(m.stats().snapshot().grants, 1);
        // Granted means owned: a newcomer cannot take it.
        assert!(!m.try_lock());
        assert!(m.is_locked());
    }

    #[test]
    fn a_claim_outlives_a_newcomer_that_barges_in_and_that_newcomers_unlock_grants() {
        let m = RawTurnstileMutex::<crate::mutex::LockCounters>::new();
        m.state
            .store(LOCKED | WOKEN | CLAIM, std::sync::atomic::Ordering::Relaxed);
        // The holder releases; before its grant step runs, a newcomer takes the lock.
        let old = m.state.release();
        assert!(needs_unlock_slow(old));
        assert!(
            m.try_lock(),
            "a released lock is free for a barging newcomer"
        );
        after_unlock(&m.state, &TABLE, m.stats(), old);
        assert_eq!(
            StateWord::load(&m.state),
            LOCKED | WOKEN | CLAIM,
            "no grant while someone holds the lock; the claim stays for the next unlock"
        );
        unsafe { m.unlock() };
        assert_eq!(StateWord::load(&m.state), LOCKED | GRANT);
        assert_eq!(m.stats().snapshot().grants, 1);
    }

    #[test]
    fn a_grant_with_waiters_parked_keeps_the_woken_duty_and_the_granter_wakes_the_next_waiter() {
        let m = Arc::new(RawTurnstileMutex::<crate::mutex::LockCounters>::new());
        m.lock();
        let m2 = m.clone();
        let waiter = std::thread::spawn(move || {
            m2.lock();
            unsafe { m2.unlock() };
        });
        while StateWord::load(&m.state) & PARKED == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // This thread plays a woken waiter that polls and claims the next release, and the
        // holder whose unlock grants it.
        m.state
            .fetch_or(WOKEN | CLAIM, std::sync::atomic::Ordering::Relaxed);
        unsafe { m.unlock() };
        assert_eq!(
            m.stats().snapshot().wakes_sent,
            1,
            "the unlock that granted woke the parked waiter"
        );
        // As the claimer: take the grant, or (if the woken waiter took it first, as any woken
        // waiter may) wait for the lock and acquire it, ending the duty.
        loop {
            let s = StateWord::load(&m.state);
            let new = if s & GRANT != 0 {
                s & !(GRANT | LONG)
            } else if s & LOCKED == 0 {
                (s | LOCKED) & !(WOKEN | CLAIM | LONG)
            } else {
                std::thread::yield_now();
                continue;
            };
            if m.state.cas(s, new).is_ok() {
                break;
            }
        }
        unsafe { m.unlock() };
        waiter.join().unwrap();
        assert_eq!(
            StateWord::load(&m.state),
            0,
            "free, nobody parked, no duty left"
        );
    }

    #[test]
    fn a_grant_wakes_nobody_early_while_critical_sections_are_long_or_nobody_is_parked() {
        for (held, after) in [
            (
                LOCKED | WOKEN | CLAIM | PARKED | LONG,
                LOCKED | GRANT | PARKED | LONG,
            ),
            (LOCKED | WOKEN | CLAIM, LOCKED | GRANT),
        ] {
            let m = RawTurnstileMutex::<crate::mutex::LockCounters>::new();
            m.state.store(held, std::sync::atomic::Ordering::Relaxed);
            unsafe { m.unlock() };
            assert_eq!(StateWord::load(&m.state), after, "from {held:#b}");
            assert_eq!(m.stats().snapshot().wakes_sent, 0);
        }
    }

    #[test]
    fn an_unlock_takes_its_slow_path_only_to_wake_a_parked_waiter_or_grant_a_claim() {
        for (old, slow) in [
            (LOCKED, false),
            (LOCKED | PARKED, true),
            (LOCKED | WOKEN, false),
            (LOCKED | PARKED | WOKEN, false),
            (LOCKED | WOKEN | CLAIM, true),
            (LOCKED | PARKED | WOKEN | CLAIM, true),
        ] {
            assert_eq!(needs_unlock_slow(old), slow, "state {old:#b}");
        }
    }

    #[test]
    fn try_lock_fails_while_held_and_timed_lock_expires() {
        let m = Arc::new(RawTurnstileMutex::<NoStats>::new());
        m.lock();
        assert!(!m.try_lock());
        assert!(m.is_locked());
        let m2 = m.clone();
        let got = std::thread::spawn(move || m2.try_lock_for(Duration::from_millis(20)))
            .join()
            .unwrap();
        assert!(!got, "the timed lock expired while held");
        // The expired waiter left nothing behind: no PARKED bit, so unlock takes the fast path.
        assert_eq!(StateWord::load(&m.state), LOCKED);
        unsafe { m.unlock() };
        assert_eq!(StateWord::load(&m.state), 0);
        assert!(m.try_lock_for(Duration::from_millis(1)));
        unsafe { m.unlock() };
    }

    #[test]
    fn a_timed_lock_succeeds_when_released_in_time() {
        let m = Arc::new(RawTurnstileMutex::<NoStats>::new());
        m.lock();
        let m2 = m.clone();
        let t = std::thread::spawn(move || {
            let ok = m2.try_lock_for(Duration::from_secs(20));
            if ok {
                unsafe { m2.unlock() };
            }
            ok
        });
        std::thread::sleep(Duration::from_millis(5));
        unsafe { m.unlock() };
        assert!(t.join().unwrap());
        assert_eq!(StateWord::load(&m.state) & LOCKED, 0);
    }

    #[test]
    fn timed_waiters_that_expire_among_parked_ones_strand_nobody() {
        // Several timed waiters give up while others stay parked; the parked ones must still
        // be woken by the final unlock.
        let m = Arc::new(RawTurnstileMutex::<NoStats>::new());
        m.lock();
        let timed: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || m.try_lock_for(Duration::from_millis(30)))
            })
            .collect();
        let patient: Vec<_> = (0..3)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    m.lock();
                    unsafe { m.unlock() };
                })
            })
            .collect();
        for t in timed {
            assert!(
                !t.join().unwrap(),
                "the holder kept the lock past every deadline"
            );
        }
        assert_ne!(
            StateWord::load(&m.state) & PARKED,
            0,
            "the patient waiters are parked"
        );
        unsafe { m.unlock() };
        for t in patient {
            t.join().unwrap();
        }
        assert_eq!(StateWord::load(&m.state) & (LOCKED | PARKED), 0);
    }

    #[derive(Default)]
    struct Counting {
        handoffs: AtomicU64,
    }
    impl LockStats for Counting {
        const INIT: Self = Counting {
            handoffs: AtomicU64::new(0),
        };
        fn handoff(&self) {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_waiter_starved_past_a_millisecond_gets_the_lock_handed_to_it() {
        let m = Arc::new(RawTurnstileMutex::<Counting>::new());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        m.lock();
        let (m2, done2) = (m.clone(), done.clone());
        // The waiter keeps asking (if it wins a race normally, it simply asks again).
        let waiter = std::thread::spawn(move || {
            while !done2.load(Ordering::Relaxed) {
                m2.lock();
                unsafe { m2.unlock() };
            }
        });
        // This thread holds the lock for 2 ms at a time and re-locks at once after each
        // release, winning the race against a woken waiter; a waiter past the threshold is
        // handed the lock instead.
        let deadline = Instant::now() + Duration::from_secs(60);
        while m.stats().handoffs.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "no hand-off happened");
            std::thread::sleep(Duration::from_millis(2));
            unsafe { m.unlock() };
            m.lock();
        }
        done.store(true, Ordering::Relaxed);
        unsafe { m.unlock() };
        waiter.join().unwrap();
        assert_eq!(StateWord::load(&m.state) & (LOCKED | PARKED), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model checks of the lock's state machine together with the parking table:
    //! `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --lib mutex`. Loom explores
    //! every interleaving of the state word, the bucket mutex and the parkers (a modelled
    //! mutex and condition variable), and reports a deadlock if a waiter is stranded.
    use super::*;
    // The lock's state word is loom's `AtomicU32`, whose `StateWord` implementation is the
    // shipped one's (the same macro, the same ordering constants): the model checks the
    // orderings that ship. The critical section writes a loom `UnsafeCell`, so an ordering
    // too weak to carry one holder's writes to the next is reported as a data race.
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU32;
    use loom::sync::Arc;

    type LoomWord = AtomicU32;

    fn lock(w: &LoomWord, table: &Table) {
        if !w.acquire() {
            assert!(lock_slow(w, table, &NoStats, None, || {}));
        }
    }

    /// Counts, across all of a model's executions, the paths they took (a plain std atomic:
    /// outside the model, so loom does not explore it), to show the model reaches them.
    static GRANTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    /// Grants made while others were parked, whose granter then woke a successor.
    static SUCCESSOR_WAKES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// One unlock's hooks: whether it granted and whether it woke someone.
    struct UnlockPath {
        granted: std::sync::atomic::AtomicBool,
        woke: std::sync::atomic::AtomicBool,
    }

    impl LockStats for UnlockPath {
        const INIT: Self = UnlockPath {
            granted: std::sync::atomic::AtomicBool::new(false),
            woke: std::sync::atomic::AtomicBool::new(false),
        };
        fn grant(&self) {
            self.granted
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        fn wake_sent(&self) {
            self.woke.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn unlock(w: &LoomWord, table: &Table) {
        let old = w.release();
        assert_ne!(old & LOCKED, 0);
        if needs_unlock_slow(old) {
            let path = UnlockPath::INIT;
            after_unlock(w, table, &path, old);
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            if path.granted.load(relaxed) {
                GRANTS.fetch_add(1, relaxed);
                if path.woke.load(relaxed) {
                    SUCCESSOR_WAKES.fetch_add(1, relaxed);
                }
            }
        }
    }

    /// `threads` threads each lock and unlock `rounds` times; `starve_after` is `MAX` (never:
    /// real elapsed time would make the model nondeterministic) or zero (every unpark is a
    /// hand-off). Checks mutual exclusion, that nobody is stranded (loom reports deadlock),
    /// that every holder sees the previous holder's write (loom reports a race otherwise),
    /// and that the lock ends unlocked with nobody parked.
    fn check(threads: usize, rounds: usize, starve_after: Duration) {
        loom::model(move || {
            let w = Arc::new(LoomWord::new(0));
            let table = Arc::new(Table::new(1, starve_after, Duration::ZERO));
            let data = Arc::new(UnsafeCell::new(0usize));
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let (w, table, data) = (w.clone(), table.clone(), data.clone());
                    loom::thread::spawn(move || {
                        for _ in 0..rounds {
                            lock(&w, &table);
                            // SAFETY: under the lock; loom checks that the previous holder's
                            // write happens-before this access, or fails the model.
                            data.with_mut(|d| unsafe { *d += 1 });
                            unlock(&w, &table);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            assert_eq!(StateWord::load(&*w) & (LOCKED | PARKED), 0);
            // SAFETY: every thread has been joined.
            assert_eq!(data.with(|d| unsafe { *d }), threads * rounds);
        });
    }

    #[test]
    fn two_threads_exclude_each_other_and_nobody_is_stranded() {
        let before = GRANTS.load(std::sync::atomic::Ordering::Relaxed);
        check(2, 2, Duration::MAX);
        assert!(
            GRANTS.load(std::sync::atomic::Ordering::Relaxed) > before,
            "some interleaving granted the lock to a claiming woken waiter"
        );
    }

    #[test]
    fn three_threads_exclude_each_other_and_nobody_is_stranded() {
        check(3, 1, Duration::MAX);
    }

    #[test]
    fn three_threads_two_rounds_lose_no_wake_up() {
        let before = SUCCESSOR_WAKES.load(std::sync::atomic::Ordering::Relaxed);
        check(3, 2, Duration::MAX);
        assert!(
            SUCCESSOR_WAKES.load(std::sync::atomic::Ordering::Relaxed) > before,
            "some interleaving granted the lock while a third thread was parked, and the \
             granter woke it"
        );
    }

    #[test]
    fn starvation_hand_offs_keep_exclusion_and_lose_no_wake_up() {
        check(2, 2, Duration::ZERO);
        check(3, 1, Duration::ZERO);
    }
}
