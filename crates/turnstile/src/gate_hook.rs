//! Automatic step-out (`auto`): a thread inside an `auto` gate that blocks on a
//! [`crate::Mutex`], an [`crate::mutex::Instrumented`] lock or a [`crate::Condvar`] frees its
//! slot for the wait and takes it back after, without the engine declaring the wait. This is
//! the MariaDB thread pool's `wait_begin`/`wait_end`, made by the lock instead of the server
//! (seed 004's pileup: a session holding its slot while it waits for the commit mutex).
//!
//! How it finds the session: an `auto` admission records, in a thread-local, the session it
//! admitted on this thread (once per session and thread: a pointer comparison otherwise) and
//! marks the session's record `SLOT` with this thread as its owner. The lock calls [`lend`]
//! when it is about to park and [`reclaim`] once it has the lock (or gave up); a condition
//! variable calls them around its wait. The locks know nothing of gates: these two functions
//! are their only link, and they do nothing for a thread with no `auto` session inside.
//!
//! The loan is a state of the session's record (`held`): `SLOT` → `LENT` by the lender
//! (a compare-and-swap, so a second park lends nothing), `LENT` → `SLOT` by its reclaim. The
//! word also names the thread that marked it (its token, in the bits above the state), and
//! only that thread lends or reclaims: so a session leaving on the thread that marked it
//! `SLOT` knows nobody else can change the word, and clears it with a plain store instead of
//! a swap. That is one atomic read-modify-write less on every admission: on the lent 16-core
//! Xeon (2026-11-26, `bench gate --policies auto,polling --threads 1`, 4 alternated runs)
//! `auto`'s uncontended admission went from 1.25 × `polling`'s (median; 39–47 ns against
//! 31–38) to 1.07 × (32–44 against 32–42). The
//! session's own [`crate::policy::Hold`] stays where it is, so its exit gives the slot back
//! once, as usual: the core counts the loan's give-back and the reclaim's take. A session
//! that leaves while its slot is lent (possible only if it moved to another thread mid-call)
//! swaps `LENT` → `NONE` and gives nothing back: the loan already did.
//!
//! The reclaim's rule ([`crate::policy::auto::AutoCore::reclaim`]): a free slot, else a
//! slot above the limit while those inside are fewer than twice the limit, else the queue as
//! a priority waiter (blocking, with the lock held: the slots are held by threads not waiting
//! for this lock, since those lent theirs). That wait is a session's queued wait like any
//! other: if it keeps the stall watch, it runs the stall check every stall period (the slots'
//! holders may all be in waits nobody declared).
//!
//! Under loom every function here does nothing: loom runs its model threads on one OS thread,
//! so a thread-local would be shared between them, and its models never park on the real
//! lock (they drive the lock's algorithm with a table of their own).

use std::cell::RefCell;

use crate::gate::GateInner;
use crate::monitor::{Counter, SessionState, StepOutReason};
use crate::registry::SessionShared;
use crate::sync::{Arc, Ordering};
use std::sync::atomic::AtomicUsize;

/// `held` states, in the word's low two bits; the bits above are the marking thread's
/// [`token`]. `NONE` is the whole word 0.
pub(crate) const NONE: usize = 0;
pub(crate) const SLOT: usize = 1;
pub(crate) const LENT: usize = 2;
const STATE: usize = 0b11;

/// The thread's recorded session and its gate. The gate weakly: a pool thread that served a
/// session of a gate since dropped does not keep the gate alive (the session's record is a
/// few words, and read first on every park).
struct Current {
    gate: WeakRef<GateInner>,
    sh: Arc<SessionShared>,
    /// The recording thread's token.
    me: usize,
}

/// A record goes (displaced by another session, forgotten, or with its thread): the session
/// is this thread's no more. At thread exit this matters: a new thread may be given the dead
/// thread's stack, and so its token, and would otherwise take the session for one it had
/// recorded itself (its lock waits then lent nothing for it).
impl Drop for Current {
    fn drop(&mut self) {
        let _ = self
            .sh
            .owner
            .compare_exchange(self.me, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// A weak reference: `std`'s, or nothing under loom (loom's `Arc` has no weak form; every
/// function here does nothing under loom, so none is ever made or read).
#[cfg(not(loom))]
type WeakRef<T> = std::sync::Weak<T>;
#[cfg(loom)]
type WeakRef<T> = std::marker::PhantomData<T>;

#[cfg(not(loom))]
fn downgrade<T>(a: &Arc<T>) -> WeakRef<T> {
    Arc::downgrade(a)
}
#[cfg(loom)]
fn downgrade<T>(_: &Arc<T>) -> WeakRef<T> {
    std::marker::PhantomData
}

#[cfg(not(loom))]
fn upgrade<T>(w: &WeakRef<T>) -> Option<Arc<T>> {
    w.upgrade()
}
#[cfg(loom)]
fn upgrade<T>(_: &WeakRef<T>) -> Option<Arc<T>> {
    None
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// The wake record this thread's queued reclaims wait on: its own, not the session's. A
    /// session that moved threads may be waiting on its own record at the same moment (its
    /// new thread queued for it), and a record holds one release: two waits on it would lose
    /// one. A thread has at most one reclaim queued at a time, and each wait gets exactly one
    /// release: the record is cleared before each (wait ids are per gate, so a release from
    /// one gate must not be read against a wait in another).
    static RECLAIM_WAKE: Arc<SessionShared> = Arc::new(SessionShared::new(0, String::new()));
    /// Its address identifies the thread while it lives (a new thread may get a dead one's
    /// address: see `Current`'s drop).
    static TOKEN: Token = const { Token(0) };
}

/// Aligned so that a token's low two bits are 0 and hold a state.
#[repr(align(8))]
struct Token(#[allow(dead_code)] u8);

/// This thread's token. A thread-local's address, not a number drawn from a counter: the
/// lazily drawn number made every policy's ticket re-entry 2.6 -> 4.4 ns and its admission
/// 4 ns dearer (`bench gate --quick --threads 1`, 5 alternated runs).
#[inline]
pub(crate) fn token() -> usize {
    TOKEN.with(|t| t as *const Token as usize)
}

/// Marks `held` as a slot held by the thread `me`.
#[inline]
fn mark(held: &AtomicUsize, me: usize) {
    debug_assert_eq!(me & STATE, 0, "a token's state bits are free");
    held.store(me | SLOT, Ordering::Release);
}

/// The session leaves on thread `me`: clears `held`; true if its slot was lent then.
#[inline]
fn clear(held: &AtomicUsize, me: usize) -> bool {
    // Only the thread whose token is in the word lends (`me | SLOT` → `me | LENT`), and that
    // thread is here, leaving: nobody changes the word between this load and the store.
    if held.load(Ordering::Relaxed) == me | SLOT {
        held.store(NONE, Ordering::Release);
        return false;
    }
    // Lent, by another thread (the session moved mid-call), or already clear.
    held.swap(NONE, Ordering::AcqRel) & STATE == LENT
}

/// Thread `me` is about to park: lends the slot if it marked it. True if it did.
fn try_lend(held: &AtomicUsize, me: usize) -> bool {
    held.compare_exchange(me | SLOT, me | LENT, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// Thread `me` has its lock: takes back the slot it lent. True if it had lent one.
fn try_reclaim(held: &AtomicUsize, me: usize) -> bool {
    held.load(Ordering::Relaxed) == me | LENT
        && held
            .compare_exchange(me | LENT, me | SLOT, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
}

/// An `auto` admission on this thread: the session may lend its slot while this thread
/// blocks on a turnstile lock. Returns the thread's token (0: nothing marked, the thread is
/// exiting, or under loom).
#[inline]
pub(crate) fn register(gate: &Arc<GateInner>, sh: &Arc<SessionShared>) -> usize {
    if cfg!(loom) {
        return 0;
    }
    let me = token();
    // Once per session and thread: a comparison otherwise.
    if sh.owner.load(Ordering::Relaxed) == me || record(gate, sh, me) {
        mark(&sh.held, me);
        return me;
    }
    0
}

/// Records `sh` as thread `me`'s session (it is not yet). False if it cannot be (the thread
/// is exiting): then the thread lends nothing for it.
#[cold]
fn record(gate: &Arc<GateInner>, sh: &Arc<SessionShared>, me: usize) -> bool {
    let recorded = CURRENT.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return false;
        };
        // The session it displaces is this thread's no more (`Current`'s drop): its next
        // admission here records it again (a thread serving two sessions in turn lends for
        // each). Unless it has been admitted on another thread since, which owns it now.
        drop(c.replace(Current {
            gate: downgrade(gate),
            sh: sh.clone(),
            me,
        }));
        true
    });
    if recorded != Ok(true) {
        return false;
    }
    sh.owner.store(me, Ordering::Relaxed);
    true
}

/// A call of `sh` begins on this thread without an admission (a re-entry while it keeps its
/// slot), and another thread marked the slot (the session moved threads since): the slot
/// becomes this thread's to lend, and the other thread's parks lend nothing of it. Returns
/// whether it did; not if the other thread has lent the slot already (the loan stands, its
/// reclaim takes it back, and the next re-entry here tries again) or the session holds none.
#[cold]
pub(crate) fn take_over(gate: &Arc<GateInner>, sh: &Arc<SessionShared>) -> bool {
    if cfg!(loom) {
        return false;
    }
    let me = token();
    let h = sh.held.load(Ordering::Relaxed);
    if h == me | SLOT {
        return true;
    }
    if h & STATE != SLOT {
        return false;
    }
    if sh.owner.load(Ordering::Relaxed) != me && !record(gate, sh, me) {
        return false;
    }
    // A compare-and-swap: the other thread may be lending it at this moment.
    sh.held
        .compare_exchange(h, me | SLOT, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// The session leaves (its hold given back or about to be): returns whether the slot was
/// lent at that moment, in which case the caller must not give it back (the loan did).
#[inline]
pub(crate) fn leave(sh: &SessionShared) -> bool {
    clear(&sh.held, token())
}

/// The session is dropped: forget it on this thread.
pub(crate) fn forget(sh: &Arc<SessionShared>) {
    if cfg!(loom) {
        return;
    }
    let _ = CURRENT.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        if c.as_ref().is_some_and(|cur| Arc::ptr_eq(&cur.sh, sh)) {
            *c = None;
        }
    });
}

/// Runs `f` with this thread's recorded `auto` session, if there is one (nothing under
/// loom, or while the thread-local is being torn down or already borrowed).
fn with_current(f: impl FnOnce(&Current)) {
    if cfg!(loom) {
        return;
    }
    let _ = CURRENT.try_with(|c| {
        if let Ok(c) = c.try_borrow() {
            if let Some(cur) = c.as_ref() {
                f(cur);
            }
        }
    });
}

/// This thread is about to block on a turnstile lock or condition variable: if it holds an
/// `auto` slot, lend it for the wait.
pub(crate) fn lend() {
    with_current(|cur| {
        let (sh, me) = (&cur.sh, token());
        if sh.held.load(Ordering::Relaxed) != me | SLOT {
            return;
        }
        // A session holding a slot holds its gate: gone, the session is gone too.
        let Some(gate) = upgrade(&cur.gate) else {
            return;
        };
        // Counted before the loan can be seen: a session moved to another thread mid-call
        // may leave as soon as the word says `LENT`, and that leave uncounts the step-out
        // (`Session::leave`), so the count must already be there.
        let stepped_out = &gate.registry.stepped_out;
        stepped_out.fetch_add(1, Ordering::Relaxed);
        if !try_lend(&sh.held, me) {
            stepped_out.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        sh.bump_shared(Counter::StepOuts);
        sh.lent_since.store(sh.since_ns(), Ordering::Relaxed);
        sh.lent_state.store(sh.state().code(), Ordering::Relaxed);
        sh.set_state_now(SessionState::SteppedOut(StepOutReason::LockWait));
        gate.driver.lend();
    });
}

/// This thread has the lock (or gave up waiting for it): take back a lent slot, by the
/// reclaim rule (see the module documentation).
///
/// The slot is counted before the word says `SLOT` again: a session that moved to another
/// thread mid-call and leaves as soon as it reads `SLOT` gives a slot back, which must be
/// counted by then (counted after, the leave's give-back could find none: the count would
/// dip, and at zero the give-back panics). If the session left while the slot was being
/// counted (it read `LENT`: it gave nothing back and uncounted the step-out), the slot
/// just counted is given back here.
pub(crate) fn reclaim() {
    #[cfg(test)]
    if tests::PANIC_IN_RECLAIM.with(std::cell::Cell::get) {
        panic!("a reclaim's accounting failed (a test's stand-in for a bug)");
    }
    with_current(|cur| {
        let (sh, me) = (&cur.sh, token());
        if sh.held.load(Ordering::Relaxed) != me | LENT {
            return;
        }
        let Some(gate) = upgrade(&cur.gate) else {
            return;
        };
        let Ok(waiter) = RECLAIM_WAKE.try_with(Arc::clone) else {
            return; // the thread is exiting: the loan stands until the session leaves
        };
        // Nothing is delivered to it now (this thread's last queued reclaim took its release
        // before going on): a release left from another gate, whose wait ids run on their
        // own, would be taken as stale against this wait (never woken: the thread slept for
        // ever holding the lock it had just taken) or as this wait's own.
        crate::sync::lock(&waiter.wake).released = None;
        let Some(counted) = gate.driver.reclaim(&waiter) else {
            return;
        };
        let hold = match counted {
            Ok(hold) => hold,
            // Queued as a priority waiter: wait for the hand-off, keeping the stall watch
            // if it has it (no timeout, no cancel: the lock is already held and the call
            // goes on).
            Err(id) => crate::session::wait_reclaim(&gate, &waiter, id).hold,
        };
        if try_reclaim(&sh.held, me) {
            gate.registry.stepped_out.fetch_sub(1, Ordering::Relaxed);
            // The session's own hold stands for the slot just counted.
            drop(hold);
            // Back in the state the loan replaced (in a call, between calls, or a step-out
            // that keeps the slot), since when it began, not since the loan.
            sh.set_state_since(
                SessionState::from_code(sh.lent_state.load(Ordering::Relaxed)),
                sh.lent_since.load(Ordering::Relaxed),
            );
        } else {
            gate.driver.exit(hold);
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    thread_local! {
        /// Makes this thread's next reclaims panic (the turnstile lock's panic-safety test).
        pub(crate) static PANIC_IN_RECLAIM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    const ME: usize = 0x1000;
    const OTHER: usize = 0x2000;

    #[test]
    fn a_slot_marked_and_cleared_by_one_thread_was_not_lent() {
        let held = AtomicUsize::new(NONE);
        mark(&held, ME);
        assert!(!clear(&held, ME));
        assert_eq!(held.load(Ordering::Relaxed), NONE);
    }

    #[test]
    fn only_the_marking_thread_lends_and_reclaims() {
        let held = AtomicUsize::new(NONE);
        mark(&held, ME);
        assert!(!try_lend(&held, OTHER), "another thread lends nothing");
        assert!(try_lend(&held, ME));
        assert!(!try_lend(&held, ME), "a second park lends nothing");
        assert!(!try_reclaim(&held, OTHER));
        assert!(try_reclaim(&held, ME));
        assert!(!try_reclaim(&held, ME), "nothing left to reclaim");
        assert!(
            !clear(&held, ME),
            "reclaimed: the leave gives the slot back itself"
        );
    }

    #[test]
    fn a_session_leaving_on_another_thread_while_lent_learns_the_loan_gave_the_slot_back() {
        let held = AtomicUsize::new(NONE);
        mark(&held, OTHER);
        assert!(try_lend(&held, OTHER));
        // The session moved to this thread mid-call and leaves while the other still parks.
        assert!(clear(&held, ME), "the loan already gave the slot back");
        assert_eq!(held.load(Ordering::Relaxed), NONE);
        assert!(
            !try_reclaim(&held, OTHER),
            "the old thread takes nothing back"
        );
    }

    #[test]
    fn a_thread_whose_registration_went_stale_lends_nothing() {
        let held = AtomicUsize::new(NONE);
        mark(&held, OTHER);
        // The session moved here and was admitted again: the word is this thread's now.
        mark(&held, ME);
        assert!(!try_lend(&held, OTHER));
        assert!(!clear(&held, ME));
    }

    #[test]
    #[cfg(not(loom))]
    fn a_threads_record_of_a_session_keeps_no_dropped_gate_alive() {
        use crate::{Gate, GateConfig, Policy};
        let g = Gate::new(GateConfig::new(Policy::Auto).limit(1)).unwrap();
        let weak = Arc::downgrade(&g.inner);
        let mut s = g.session();
        assert!(s.enter().unwrap(), "admitted: recorded on this thread");
        s.exit().unwrap();
        s.end_statement();
        // Moved away and dropped elsewhere: this thread's record still names it.
        std::thread::spawn(move || drop(s)).join().unwrap();
        let recorded = CURRENT.with(|c| c.borrow().is_some());
        assert!(recorded, "the record outlives the session on this thread");
        drop(g);
        assert!(
            weak.upgrade().is_none(),
            "the gate went with its last handle"
        );
        // Parking now lends nothing and does not fail.
        lend();
        reclaim();
        CURRENT.with(|c| *c.borrow_mut() = None);
    }

    #[test]
    fn tokens_leave_the_state_bits_free() {
        let me = token();
        assert_eq!(me & STATE, 0);
        let other = std::thread::spawn(token).join().unwrap();
        assert_ne!(me, other, "two live threads have two tokens");
    }
}
