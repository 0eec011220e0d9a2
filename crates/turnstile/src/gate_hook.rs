//! Automatic step-out (`auto`): a thread inside an `auto` gate that blocks on a
//! [`crate::Mutex`], an [`crate::mutex::Instrumented`] lock or a [`crate::Condvar`] frees its
//! slot for the wait and takes it back after, without the engine declaring the wait. This is
//! the MariaDB thread pool's `wait_begin`/`wait_end`, made by the lock instead of the server
//! (seed 004's pileup: a session holding its slot while it waits for the commit mutex).
//!
//! How it finds the session: each call of an `auto` session that holds a slot (its
//! admission, or a re-entry on the slot it kept) records the session in a thread-local (once
//! per session and thread: a pointer comparison otherwise) and marks the session's record
//! `SLOT` with this thread's token; the call's exit takes the token off again when the
//! session keeps its slot between calls. The lock calls [`lend`] when it is about to park and
//! [`reclaim`] once it has the lock (or gave up); a condition variable calls them around its
//! wait. The locks know nothing of gates: these two functions are their only link, and they
//! do nothing for a thread with no `auto` session inside.
//!
//! **The invariant: a slot is lent only by the thread running a call of its session** (from
//! the call's enter to its exit on that thread). A thread that ran an earlier call and handed
//! the session on finds the word without its token and lends nothing: were it to lend, the
//! session's next call elsewhere would run on a slot given to another session (more calls
//! running than the limit), and its reclaim, counted above the limit, could queue a third
//! thread's reclaim behind a lock that the session's real runner parks on lending nothing
//! (nobody leaves). Between calls, the session's slot is lent by nobody. A session moved to
//! another thread mid-call (the explicit `enter`/`exit` allow it) is the one exception that
//! nothing can see: the thread that entered the call may lend it until that call's exit, on
//! whichever thread, takes the token off (a compare-and-swap there, as that thread may be
//! lending at that moment).
//!
//! The loan is a state of the session's record (`held`): `SLOT` → `LENT` by the lender
//! (a compare-and-swap, so a second park lends nothing), `LENT` → `SLOT` by its reclaim. The
//! word names the thread in the call (its token, in the bits above the state; none between
//! calls), and only that thread lends or reclaims: so a call's exit or a leave on the thread
//! whose token is in the word, or of a word with no token, knows nobody else can change the
//! word, and writes it with a plain store instead of a swap. That is one atomic
//! read-modify-write less on every admission, and none on a re-entry (the mark and the
//! unmark are a load and a store each, on the record the re-entry writes anyway: measure
//! with `bench gate --policies auto,polling --threads 1`). The
//! session's own [`crate::policy::Hold`] stays where it is, so its exit gives the slot back
//! once, as usual: the core counts the loan's give-back and the reclaim's take. A session
//! that leaves while its slot is lent (moved to another thread mid-call, or a reclaim that
//! never ran) swaps `LENT` → `NONE` and gives nothing back: the loan already did. A call
//! that exits with its slot still lent leaves the gate the same way instead of keeping it.
//!
//! The reclaim's rule ([`crate::policy::auto::AutoCore::reclaim`]): a free slot, else a
//! slot above the limit while those inside are fewer than twice the limit, else the queue as
//! a priority waiter (blocking, with the lock held: the slots are held by threads not waiting
//! for this lock, since those lent theirs). That wait is a session's queued wait like any
//! other: if it keeps the stall watch, it runs the stall check every stall period (the slots'
//! holders may all be in waits nobody declared).
//!
//! Under loom every function the sessions and locks call does nothing: loom runs its model
//! threads on one OS thread, so a thread-local would be shared between them, and its models
//! never park on the real lock (they drive the lock's algorithm with a table of their own).
//! The word's transitions are modelled on their own (`loom_models`), with the same functions.

use std::cell::RefCell;

use crate::inner::GateInner;
use crate::monitor::{Counter, SessionState, StepOutReason};
use crate::registry::{SessionShared, Word};
use crate::sync::{Arc, Ordering};

/// `held` states, in the word's low two bits; the bits above are the [`token`] of the thread
/// running the session's call (0 between calls). `NONE` is the whole word 0.
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

/// This thread's token. A thread-local's address, not a number drawn from a counter: a lazily
/// drawn number adds its first-use check to every policy's ticket re-entry and admission
/// (docs/BENCHMARKS.md).
#[inline]
pub(crate) fn token() -> usize {
    TOKEN.with(|t| t as *const Token as usize)
}

/// A call begins on thread `me` (0: a thread that cannot lend) with a slot just counted for
/// the session (an admission: the word is `NONE`, and nobody changes a `NONE` word).
#[inline]
fn mark(held: &Word, me: usize) {
    debug_assert_eq!(me & STATE, 0, "a token's state bits are free");
    held.store(me | SLOT, Ordering::Release);
}

/// A call begins on thread `me` on the slot the session kept between calls (a re-entry).
#[inline]
fn remark(held: &Word, me: usize) {
    // Between calls the word has no token, and a word with no token is changed by nobody
    // (only the thread whose token is in it lends): a plain store.
    if held.load(Ordering::Relaxed) == SLOT {
        held.store(me | SLOT, Ordering::Release);
    } else {
        remark_slow(held, me);
    }
}

/// [`remark`] on a word that still has a token: the previous call never exited (a `Call`
/// forgotten), and the thread that ran it may be lending the slot now. A lent slot stays
/// lent: its reclaim takes it back, or this call's exit finds it lent and leaves.
#[cold]
fn remark_slow(held: &Word, me: usize) {
    let mut h = held.load(Ordering::Relaxed);
    while h & STATE == SLOT && h != me | SLOT {
        match held.compare_exchange(h, me | SLOT, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return,
            Err(now) => h = now,
        }
    }
}

/// The call on thread `me` exits and the session keeps its slot: the token comes off, so no
/// thread lends the slot until the next call begins. False if the slot is lent (a loan the
/// call never took back): the caller leaves instead, and gives nothing back.
#[inline]
fn unmark(held: &Word, me: usize) -> bool {
    let h = held.load(Ordering::Relaxed);
    // This thread's token (it is here, not lending) or none: nobody else changes the word.
    if h == me | SLOT || h == SLOT {
        held.store(SLOT, Ordering::Release);
        return true;
    }
    unmark_slow(held, h)
}

/// [`unmark`] on a word with another thread's token (the session moved here mid-call: that
/// thread may be lending it at this moment) or lent.
#[cold]
fn unmark_slow(held: &Word, mut h: usize) -> bool {
    while h & STATE == SLOT {
        match held.compare_exchange(h, SLOT, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => h = now,
        }
    }
    false
}

/// The session leaves on thread `me`: clears `held`; true if its slot was lent then.
#[inline]
fn clear(held: &Word, me: usize) -> bool {
    // This thread's token (it is here, leaving) or none (between calls): nobody else changes
    // the word between this load and the store.
    let h = held.load(Ordering::Relaxed);
    if h == me | SLOT || h == SLOT {
        held.store(NONE, Ordering::Release);
        return false;
    }
    if h == NONE {
        return false; // never marked (an uncounted hold) or already clear
    }
    // Lent, or another thread's token (the session moved mid-call).
    held.swap(NONE, Ordering::AcqRel) & STATE == LENT
}

/// Thread `me` is about to park: lends the slot if it runs the session's call. True if it
/// did.
fn try_lend(held: &Word, me: usize) -> bool {
    held.compare_exchange(me | SLOT, me | LENT, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// Thread `me` has its lock: takes back the slot it lent. True if it had lent one.
fn try_reclaim(held: &Word, me: usize) -> bool {
    held.load(Ordering::Relaxed) == me | LENT
        && held
            .compare_exchange(me | LENT, me | SLOT, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
}

/// This thread's token if it has recorded `sh` as its session (recording it now if not), 0
/// if it cannot (the thread is exiting): then it lends nothing for it.
#[inline]
fn lender(gate: &Arc<GateInner>, sh: &Arc<SessionShared>) -> usize {
    let me = token();
    // Once per session and thread: a comparison otherwise.
    if sh.owner.load(Ordering::Relaxed) == me || record(gate, sh, me) {
        me
    } else {
        0
    }
}

/// An `auto` admission on this thread, for a call: the slot is this thread's to lend while
/// the call runs.
#[inline]
pub(crate) fn admitted(gate: &Arc<GateInner>, sh: &Arc<SessionShared>) {
    if cfg!(loom) {
        return;
    }
    mark(&sh.held, lender(gate, sh));
}

/// A call of `sh` begins on this thread on the `auto` slot it kept (a re-entry, maybe on
/// another thread than the last call's): the slot is this thread's to lend while the call
/// runs.
#[inline]
pub(crate) fn reentered(gate: &Arc<GateInner>, sh: &Arc<SessionShared>) {
    if cfg!(loom) {
        return;
    }
    remark(&sh.held, lender(gate, sh));
}

/// The call ends and the session keeps its `auto` slot between calls: nobody lends it until
/// the next call. False if the slot is lent now (the caller must leave: see [`unmark`]).
#[inline]
pub(crate) fn call_ends(sh: &SessionShared) -> bool {
    if cfg!(loom) {
        return true;
    }
    unmark(&sh.held, token())
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
        // call here records it again (a thread serving two sessions in turn lends for
        // each). Unless it has been recorded on another thread since, which owns it now.
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

/// The session leaves (its hold given back or about to be): returns whether the slot was
/// lent at that moment, in which case the caller must not give it back (the loan did).
#[inline]
pub(crate) fn leave(sh: &SessionShared) -> bool {
    if cfg!(loom) {
        return false;
    }
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

/// This thread is about to block on a turnstile lock or condition variable: if it runs a
/// call of an `auto` session that holds its slot, lend the slot for the wait.
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
            // Back in the state the loan replaced (in a call, or a step-out within it that
            // keeps the slot), since when it began, not since the loan.
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

    #[cfg(not(loom))]
    const ME: usize = 0x1000;
    #[cfg(not(loom))]
    const OTHER: usize = 0x2000;

    #[test]
    #[cfg(not(loom))]
    fn a_slot_marked_and_cleared_by_one_thread_was_not_lent() {
        let held = Word::new(NONE);
        mark(&held, ME);
        assert!(!clear(&held, ME));
        assert_eq!(held.load(Ordering::Relaxed), NONE);
    }

    #[test]
    #[cfg(not(loom))]
    fn only_the_thread_running_the_call_lends_and_reclaims() {
        let held = Word::new(NONE);
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
    #[cfg(not(loom))]
    fn between_calls_nobody_lends_the_slot_and_the_next_call_lends_it_from_its_thread() {
        let held = Word::new(NONE);
        mark(&held, OTHER);
        assert!(unmark(&held, OTHER), "the call ends, the slot is kept");
        assert!(
            !try_lend(&held, OTHER),
            "the thread it ran on lends nothing"
        );
        // The session moved here: its next call here marks the slot this thread's.
        remark(&held, ME);
        assert!(!try_lend(&held, OTHER));
        assert!(try_lend(&held, ME));
        assert!(try_reclaim(&held, ME));
        assert!(unmark(&held, ME));
        assert!(!clear(&held, OTHER), "kept between calls: not lent");
        assert_eq!(held.load(Ordering::Relaxed), NONE);
    }

    #[test]
    #[cfg(not(loom))]
    fn a_call_that_exits_with_its_slot_still_lent_does_not_keep_it() {
        let held = Word::new(NONE);
        mark(&held, ME);
        assert!(try_lend(&held, ME));
        // The reclaim never ran (it panicked, or the thread was exiting).
        assert!(!unmark(&held, ME), "lent: the call must leave");
        assert!(clear(&held, ME), "the loan already gave the slot back");
    }

    #[test]
    #[cfg(not(loom))]
    fn a_session_leaving_on_another_thread_while_lent_learns_the_loan_gave_the_slot_back() {
        let held = Word::new(NONE);
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
    #[cfg(not(loom))]
    fn a_call_moved_mid_call_ends_on_its_new_thread_and_its_old_thread_lends_no_more() {
        let held = Word::new(NONE);
        mark(&held, OTHER);
        // Its exit here takes the other thread's token off.
        assert!(unmark(&held, ME));
        assert!(!try_lend(&held, OTHER));
        assert_eq!(held.load(Ordering::Relaxed), SLOT);
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

/// The word's transitions under every interleaving, with the functions the sessions and
/// locks use (`Word` is loom's atomic here). A slot is counted in `inside` as the core does:
/// a loan gives it back, a reclaim counts it before it looks at the word and gives it back
/// if the word says the session left meanwhile, a leave gives it back unless it was lent.
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::AtomicI32;
    use loom::sync::Arc;
    use loom::thread;

    const A: usize = 0x1000;
    const B: usize = 0x2000;

    /// One slot given back: never below zero.
    fn give_back(inside: &AtomicI32) {
        let before = inside.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a slot given back twice");
    }

    /// Thread `me` parks on a lock (lends if it runs the call), then has it (takes the slot
    /// back): `gate_hook::lend` then `gate_hook::reclaim`. Whether it lent.
    fn park(held: &Word, inside: &AtomicI32, me: usize) -> bool {
        if held.load(Ordering::Relaxed) != me | SLOT || !try_lend(held, me) {
            return false;
        }
        give_back(inside);
        if held.load(Ordering::Relaxed) == me | LENT {
            inside.fetch_add(1, Ordering::SeqCst);
            if !try_reclaim(held, me) {
                give_back(inside); // the session left meanwhile: `driver.exit(hold)`
            }
        }
        true
    }

    /// The session's call exits on thread `me` keeping its slot, then its statement ends
    /// (`Session::exit_call`, then `Session::leave`).
    fn exit_then_leave(held: &Word, inside: &AtomicI32, me: usize) {
        let kept = unmark(held, me);
        let lent = clear(held, me);
        assert!(!(kept && lent), "a slot kept between calls was lent");
        if !lent {
            give_back(inside);
        }
    }

    #[test]
    fn a_session_moved_mid_call_is_counted_once_whatever_its_old_thread_does() {
        // A entered the call and the session moved to B mid-call: A may still lend it (it
        // cannot know), while B's exit takes A's token off and the statement ends.
        loom::model(|| {
            let held = Arc::new(Word::new(NONE));
            let inside = Arc::new(AtomicI32::new(1));
            mark(&held, A);
            let a = {
                let (held, inside) = (held.clone(), inside.clone());
                thread::spawn(move || {
                    park(&held, &inside, A);
                })
            };
            exit_then_leave(&held, &inside, B);
            a.join().unwrap();
            assert_eq!(
                inside.load(Ordering::SeqCst),
                0,
                "counted once, given back once"
            );
            assert_eq!(held.load(Ordering::Relaxed), NONE);
        });
    }

    #[test]
    fn a_thread_a_session_left_between_calls_never_lends_its_slot() {
        // A ran a call and ended it, keeping the slot, and handed the session to B, which
        // runs its next call (a re-entry), parks in it, and ends the statement. A parks on a
        // lock meanwhile: it must lend nothing.
        loom::model(|| {
            let held = Arc::new(Word::new(NONE));
            let inside = Arc::new(AtomicI32::new(1));
            mark(&held, A);
            assert!(unmark(&held, A));
            let a = {
                let (held, inside) = (held.clone(), inside.clone());
                thread::spawn(move || park(&held, &inside, A))
            };
            remark(&held, B);
            assert!(park(&held, &inside, B), "the thread running the call lends");
            exit_then_leave(&held, &inside, B);
            assert!(
                !a.join().unwrap(),
                "the thread the session left lent its slot"
            );
            assert_eq!(inside.load(Ordering::SeqCst), 0);
            assert_eq!(held.load(Ordering::Relaxed), NONE);
        });
    }
}
