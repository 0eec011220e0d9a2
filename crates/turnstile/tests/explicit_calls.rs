//! The explicit-call API of `Session` (enter / exit / end_statement / wait_begin / wait_end),
//! for callers that cannot hold guards, such as the C API: the same rules as the guards, and a
//! typed refusal for every call out of order.
#![cfg(not(loom))]

use std::time::Duration;

use turnstile::{Gate, GateConfig, GateError, Misuse, Policy, SessionState, StepOutReason};

fn gate(policy: Policy, limit: u32, tickets: u32) -> Gate {
    Gate::new(GateConfig::new(policy).innodb_settings(limit, tickets, Duration::from_millis(1)))
        .unwrap()
}

#[test]
fn explicit_enters_spend_tickets_keep_the_slot_and_statement_end_force_exits() {
    for policy in Policy::ALL {
        let g = gate(policy, 1, 3);
        let mut s = g.session();
        assert!(
            s.enter().unwrap(),
            "{policy}: the first enter is an admission"
        );
        s.exit().unwrap();
        assert!(
            s.is_inside(),
            "{policy}: the slot is kept while tickets remain"
        );
        assert!(!s.enter().unwrap(), "{policy}: a ticket re-entry");
        s.exit().unwrap();
        s.end_statement();
        assert!(!s.is_inside());
        assert_eq!(s.tickets(), 0);
        let st = g.stats();
        assert_eq!(
            (st.counters.admissions, st.counters.ticket_reentries),
            (1, 1),
            "{policy}"
        );
        assert_eq!(st.inside, 0, "{policy}");
    }
}

#[test]
fn every_call_out_of_order_is_refused_with_its_reason_and_changes_nothing() {
    let g = gate(Policy::Classic, 1, 10);
    let mut s = g.session();
    assert_eq!(s.exit(), Err(GateError::Misuse(Misuse::ExitWithoutEnter)));
    assert_eq!(
        s.wait_end(),
        Err(GateError::Misuse(Misuse::WaitEndWithoutBegin))
    );
    s.enter().unwrap();
    assert_eq!(s.enter(), Err(GateError::Misuse(Misuse::NestedEnter)));
    s.wait_begin(StepOutReason::DiskIo).unwrap();
    assert_eq!(
        s.wait_begin(StepOutReason::DiskIo),
        Err(GateError::Misuse(Misuse::NestedWait))
    );
    assert_eq!(s.exit(), Err(GateError::Misuse(Misuse::CallDuringWait)));
    assert_eq!(s.enter(), Err(GateError::Misuse(Misuse::CallDuringWait)));
    assert_eq!(g.stats().stepped_out, 1);
    s.wait_end().unwrap();
    assert!(s.is_inside(), "a wait ended within a call re-enters");
    s.exit().unwrap();
    s.end_statement();
    let st = g.stats();
    assert_eq!((st.inside, st.stepped_out), (0, 0));
    assert!(GateError::Misuse(Misuse::NestedEnter)
        .to_string()
        .contains("enter while a call is already in progress"));
}

#[test]
fn a_declared_row_lock_wait_frees_the_slot_and_re_enters_unchecked_with_one_ticket() {
    let g = gate(Policy::Classic, 1, 500);
    let mut s = g.session();
    let mut other = g.session();
    s.enter().unwrap();
    s.wait_begin(StepOutReason::RowLockWait).unwrap();
    assert_eq!(
        g.snapshot().sessions[0].state,
        SessionState::SteppedOut(StepOutReason::RowLockWait)
    );
    // The freed slot is taken at once by another session, which keeps it.
    assert!(other.enter().unwrap());
    s.wait_end().unwrap();
    assert_eq!(s.tickets(), 1);
    assert_eq!(g.stats().inside, 2, "re-entered without checking the limit");
    s.exit().unwrap();
    s.end_statement();
    other.exit().unwrap();
    other.end_statement();
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn a_wait_end_whose_re_entry_times_out_leaves_the_call_outside_and_its_exit_harmless() {
    let g = gate(Policy::Classic, 1, 500);
    let mut s = g.session();
    let mut other = g.session();
    s.set_wait_timeout(Some(Duration::from_millis(5)));
    s.enter().unwrap();
    s.wait_begin(StepOutReason::CommitWait).unwrap();
    other.enter().unwrap();
    assert!(matches!(s.wait_end(), Err(GateError::TimedOut { .. })));
    assert!(!s.is_inside());
    s.exit().unwrap();
    s.end_statement();
    assert_eq!(g.stats().inside, 1, "only the other session is inside");
    other.end_statement();
    assert_eq!(g.stats().inside, 0);
}

#[test]
fn dropping_a_session_in_a_declared_wait_ends_the_wait() {
    let g = gate(Policy::Polling, 2, 500);
    let mut s = g.session();
    s.enter().unwrap();
    s.wait_begin(StepOutReason::DiskIo).unwrap();
    drop(s);
    let st = g.stats();
    assert_eq!((st.inside, st.stepped_out, st.sessions), (0, 0, 0));
}
