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
//! session's own [`crate::policy::Hold`] stays where it is, so its exit gives the slot back
//! once, as usual: the core counts the loan's give-back and the reclaim's take. A session
//! that leaves while its slot is lent (possible only if it moved to another thread mid-call)
//! swaps `LENT` → `NONE` and gives nothing back: the loan already did.
//!
//! The reclaim's rule ([`crate::policy::auto::AutoCore::reclaim`]): a free slot, else a
//! slot above the limit while those inside are fewer than twice the limit, else the queue as
//! a priority waiter (blocking, with the lock held: the slots are held by threads not waiting
//! for this lock, since those lent theirs).
//!
//! Under loom every function here does nothing: loom runs its model threads on one OS thread,
//! so a thread-local would be shared between them, and its models never park on the real
//! lock (they drive the lock's algorithm with a table of their own).

use std::cell::RefCell;

use crate::gate::GateInner;
use crate::monitor::{Counter, SessionState, StepOutReason};
use crate::registry::SessionShared;
use crate::sync::{lock, Arc, Ordering};

/// `held` states.
pub(crate) const NONE: u8 = 0;
pub(crate) const SLOT: u8 = 1;
pub(crate) const LENT: u8 = 2;

struct Current {
    gate: Arc<GateInner>,
    sh: Arc<SessionShared>,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
    /// Its address identifies the thread.
    static TOKEN: u8 = const { 0 };
}

fn token() -> usize {
    TOKEN.with(|t| t as *const u8 as usize)
}

/// An `auto` admission on this thread: the session may lend its slot while this thread
/// blocks on a turnstile lock.
#[inline]
pub(crate) fn register(gate: &Arc<GateInner>, sh: &Arc<SessionShared>) {
    if cfg!(loom) {
        return;
    }
    let me = token();
    if sh.owner.load(Ordering::Relaxed) != me {
        let recorded = CURRENT.try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            *c = Some(Current {
                gate: gate.clone(),
                sh: sh.clone(),
            });
            true
        });
        if recorded != Ok(true) {
            // Not recorded (the thread is exiting): this admission lends nothing.
            return;
        }
        sh.owner.store(me, Ordering::Relaxed);
    }
    sh.held.store(SLOT, Ordering::Release);
}

/// The session leaves (its hold given back or about to be): returns whether the slot was
/// lent at that moment, in which case the caller must not give it back (the loan did).
#[inline]
pub(crate) fn leave(sh: &SessionShared) -> bool {
    sh.held.swap(NONE, Ordering::AcqRel) == LENT
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
        let sh = &cur.sh;
        if sh.owner.load(Ordering::Relaxed) != token()
            || sh
                .held
                .compare_exchange(SLOT, LENT, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        sh.bump(Counter::StepOuts);
        sh.set_state_now(SessionState::SteppedOut(StepOutReason::LockWait));
        cur.gate
            .registry
            .stepped_out
            .fetch_add(1, Ordering::Relaxed);
        cur.gate.driver.lend();
    });
}

/// This thread has the lock (or gave up waiting for it): take back a lent slot, by the
/// reclaim rule (see the module documentation).
pub(crate) fn reclaim() {
    with_current(|cur| {
        let sh = &cur.sh;
        if sh.held.load(Ordering::Relaxed) != LENT
            || sh
                .held
                .compare_exchange(LENT, SLOT, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        cur.gate
            .registry
            .stepped_out
            .fetch_sub(1, Ordering::Relaxed);
        if let Some(id) = cur.gate.driver.reclaim(sh) {
            // Queued as a priority waiter: wait for the hand-off (no timeout, no cancel:
            // the lock is already held and the call goes on).
            let mut w = lock(&sh.wake);
            while w.released != Some(id) {
                w = sh.cv.wait(w).unwrap_or_else(|e| e.into_inner());
            }
            drop(w);
            // The hand-off counted a slot for it; the session's own hold stands for it.
            let a = cur.gate.driver.finish_wait(id);
            drop(a.hold);
        }
        sh.set_state(SessionState::InCall);
    });
}
