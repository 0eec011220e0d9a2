use super::super::test_params;
use super::*;
use crate::config::DEFAULT_QUANTUM;
use std::time::Duration;

const MS: u64 = 1_000_000;

fn params(limit: u32) -> AutoParams {
    // The tests' times are written for a 5 ms cap.
    test_params(limit, Duration::from_millis(5))
}

fn admitted(step: Step) -> Admission {
    match step {
        Step::Admitted(a) => a,
        other => panic!("expected an admission, got {other:?}"),
    }
}

fn wait_id(step: Step) -> WaitId {
    match step {
        Step::Wait(id) => id,
        other => panic!("expected a queue wait, got {other:?}"),
    }
}

fn enter(core: &AutoCore<u32>, who: u32, now: u64) -> Step {
    let mut out = Vec::new();
    let step = core.enter(&mut Attempt::new(false), &who, || now, || {}, &mut out);
    assert!(out.is_empty(), "no slot was free to hand off");
    step
}

/// An adaptive core with a limit of 1: thread 0 holds the slot and thread 1 queues, at 0.
fn adaptive_one_held_one_queued() -> (AutoCore<u32>, Admission, WaitId) {
    let core: AutoCore<u32> = AutoCore::new(AutoParams {
        adaptive: true,
        ..params(1)
    });
    let held = admitted(enter(&core, 0, 0));
    let id = wait_id(enter(&core, 1, 0));
    (core, held, id)
}

/// Exits one slot at `now`; returns who was handed it, and lets them run at `now`.
fn exit_to(core: &AutoCore<u32>, hold: Hold, now: u64) -> Option<(u32, Admission)> {
    let out = core.exit(hold, || now);
    assert!(out.len() <= 1);
    let r = out.into_iter().next()?;
    let (a, more) = core.finish_wait(r.id, now, || None);
    assert!(more.is_empty());
    Some((r.waiter, a))
}

#[test]
fn admits_at_once_with_a_quantum_and_no_ticket_count_while_slots_are_free() {
    let core: AutoCore<u32> = AutoCore::new(params(2));
    for who in 0..2 {
        let a = admitted(enter(&core, who, 0));
        assert_eq!((a.by, a.hold.kind()), (AdmittedBy::Free, HoldKind::Slot));
        assert_eq!((a.tickets, a.quantum), (u32::MAX, DEFAULT_QUANTUM));
    }
    wait_id(enter(&core, 9, 0));
    assert_eq!(core.gauges().queued, 1);
}

#[test]
fn a_freed_slot_goes_to_the_newest_waiter_while_all_are_younger_than_the_age_cap() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let held = admitted(enter(&core, 0, 0));
    for who in 1..=3 {
        wait_id(enter(&core, who, who as u64 * MS / 10));
    }
    let (who, a) = exit_to(&core, held.hold, MS).expect("a waiter is handed the slot");
    assert_eq!(who, 3, "hot first: the most recently queued");
    assert_eq!(a.by, AdmittedBy::HandOff);
    assert!(!core.gauges().starving);
}

#[test]
fn once_a_waiter_is_past_the_age_cap_the_oldest_are_served_first_until_none_is() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let mut held = admitted(enter(&core, 0, 0)).hold;
    wait_id(enter(&core, 1, 0));
    wait_id(enter(&core, 2, MS));
    wait_id(enter(&core, 3, 7 * MS));
    // At 6.5 ms waiters 1 and 2 (queued at 0 and 1 ms) are past the 5 ms cap: oldest
    // first, though 3 is the newest.
    let now = 6 * MS + MS / 2;
    let (who, a) = exit_to(&core, held, now).unwrap();
    assert_eq!(who, 1);
    assert!(core.gauges().starving);
    held = a.hold;
    let (who, a) = exit_to(&core, held, now).unwrap();
    assert_eq!(who, 2, "still past the cap: still oldest first");
    held = a.hold;
    // Now the only waiter is 3, queued at 7 ms: young again, hot first.
    let (who, _) = exit_to(&core, held, 8 * MS).unwrap();
    assert_eq!(who, 3);
    assert!(!core.gauges().starving);
    assert_eq!(core.gauges().age_handoffs, 2);
}

#[test]
fn lock_holders_are_chosen_first_within_the_age_cap() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let held = admitted(enter(&core, 0, 0));
    let mut out = Vec::new();
    wait_id(core.enter(&mut Attempt::new(true), &1, || 0, || {}, &mut out));
    wait_id(enter(&core, 2, MS / 10));
    let (who, _) = exit_to(&core, held.hold, MS / 5).unwrap();
    assert_eq!(who, 1, "the lock holder, though not the newest");
}

#[test]
fn a_newcomer_runs_in_a_waking_waiters_place_once_per_pending_grantee() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let held = admitted(enter(&core, 0, 0));
    wait_id(enter(&core, 1, 0));
    wait_id(enter(&core, 2, 0));
    // Hand off at 1 ms without letting the grantee run yet.
    let out = core.exit(held.hold, || MS);
    assert_eq!(out.len(), 1);
    let a = admitted(enter(&core, 3, MS));
    assert_eq!((a.by, a.hold.kind()), (AdmittedBy::Lifo, HoldKind::Lifo));
    assert_eq!(core.gauges().extra, 1);
    // One pending grantee, one extra: the next newcomer queues.
    wait_id(enter(&core, 4, MS));
    let _ = core.exit(a.hold, || MS);
    assert_eq!(core.gauges().extra, 0);
    // The grantee runs: no place to fill any more, the next newcomer queues.
    let (_, more) = core.finish_wait(out[0].id, MS, || None);
    assert!(more.is_empty());
    wait_id(enter(&core, 5, MS));
}

#[test]
fn a_session_back_from_a_wait_takes_a_free_slot_or_an_extra_place_never_more_than_the_limit() {
    let core: AutoCore<u32> = AutoCore::new(params(2));
    let _a = admitted(enter(&core, 0, 0));
    let _b = admitted(enter(&core, 1, 0));
    let e1 = admitted(core.enter_after_wait(&2, || {}));
    let e2 = admitted(core.enter_after_wait(&3, || {}));
    assert_eq!(e1.hold.kind(), HoldKind::Lifo);
    assert_eq!(e2.by, AdmittedBy::Unchecked);
    // Two counted, two extra: 2 × limit. The next one back from a wait queues (first).
    wait_id(core.enter_after_wait(&4, || {}));
    wait_id(enter(&core, 5, 0));
    let _ = core.exit(e1.hold, || 0);
    let (who, _) = exit_to(&core, _a.hold, 0).unwrap();
    assert_eq!(who, 4, "priority over the newer plain waiter");
    let _ = core.exit(e2.hold, || 0);
}

#[test]
fn sessions_back_from_a_wait_are_served_first_in_turn_even_while_the_oldest_are_served() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let a = admitted(enter(&core, 0, 0));
    let e = admitted(core.enter_after_wait(&1, || {}));
    wait_id(enter(&core, 2, 0));
    wait_id(core.enter_after_wait(&3, || {}));
    wait_id(core.enter_after_wait(&4, || {}));
    // 20 ms on, waiter 2 is past the age cap; those back from a wait still go first, in
    // the order they came back.
    assert!(core.exit(e.hold, || 20 * MS).is_empty());
    let mut hold = a.hold;
    for expected in [3, 4, 2] {
        let (who, next) = exit_to(&core, hold, 20 * MS).unwrap();
        assert_eq!(who, expected);
        hold = next.hold;
    }
    assert!(core.exit(hold, || 20 * MS).is_empty());
    assert_eq!(core.gauges().inside, 0);
}

#[test]
fn the_cpu_reading_is_due_when_a_window_may_end_and_not_again_until_the_next_window_ends() {
    // Times are synthetic inputs; no clock is read.
    let fixed: AutoCore<u32> = AutoCore::new(params(1));
    assert!(
        !fixed.cpu_reading_due(0),
        "a fixed limit never reads the CPUs"
    );
    let (core, held, _) = adaptive_one_held_one_queued();
    let window = CONTROL_WINDOW.as_nanos() as u64;
    // The first window runs from the core's making, at 0.
    assert!(!core.cpu_reading_due(window - 1));
    assert!(core.cpu_reading_due(window));
    // The hand-off's grantee runs at 25 ms, past the window: the controller reads there.
    let t = 25 * MS;
    let mut reads = 0;
    let out = core.exit(held.hold, || t);
    let (a, _) = core.finish_wait(out[0].id, t, || {
        reads += 1;
        Some(0)
    });
    assert_eq!(reads, 1);
    assert!(!core.cpu_reading_due(t + window - 1));
    assert!(core.cpu_reading_due(t + window));
    let _ = core.exit(a.hold, || t + window);
}

#[test]
fn a_noted_reading_cost_sets_when_the_next_reading_is_due_and_shows_in_the_gauges() {
    // Times and costs are synthetic inputs; no clock is read.
    let (core, held, _) = adaptive_one_held_one_queued();
    // The stretch applies to the window under way too: this one ends at 100 ms.
    let t = 150 * MS;
    core.note_reading_cost(MS);
    let out = core.exit(held.hold, || t);
    let (a, _) = core.finish_wait(out[0].id, t, || Some(0));
    assert_eq!(core.gauges().control_window_ns, 100 * MS);
    assert!(!core.cpu_reading_due(t + 100 * MS - 1));
    assert!(core.cpu_reading_due(t + 100 * MS));
    let _ = core.exit(a.hold, || t + 100 * MS);
}

#[test]
fn the_queue_cap_refuses_at_once_and_leaves_nothing_counted() {
    let core: AutoCore<u32> = AutoCore::new(AutoParams {
        max_waiting: 1,
        ..params(1)
    });
    let held = admitted(enter(&core, 0, 0));
    wait_id(enter(&core, 1, 0));
    match enter(&core, 2, 0) {
        Step::Reject(RejectReason::QueueFull { max_waiting: 1 }) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    let g = core.gauges();
    assert_eq!((g.queued, g.inside, g.rejections), (1, 1, 1));
    let (who, a) = exit_to(&core, held.hold, 0).unwrap();
    assert_eq!(who, 1);
    let _ = core.exit(a.hold, || 0);
    assert_eq!(core.gauges().inside, 0);
}

#[test]
fn a_cancel_after_a_hand_off_returns_the_admission_and_before_it_forgets_the_waiter() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let held = admitted(enter(&core, 0, 0));
    let a = wait_id(enter(&core, 1, 0));
    let b = wait_id(enter(&core, 2, 0));
    assert_eq!(core.cancel_wait(b), None);
    let out = core.exit(held.hold, || 0);
    assert_eq!(out[0].id, a);
    let adm = core.cancel_wait(a).expect("already handed the slot");
    assert_eq!(core.gauges().pending, 0);
    let _ = core.exit(adm.hold, || 0);
    let g = core.gauges();
    assert_eq!((g.inside, g.queued), (0, 0));
}

#[test]
fn a_holder_past_its_quantum_gives_way_only_to_a_waiter_queued_before_its_quantum_began() {
    let core: AutoCore<u32> = AutoCore::new(params(2));
    let mut a = admitted(enter(&core, 0, 0));
    let mut b = admitted(enter(&core, 1, 0));
    // Nobody waits: keep, and nothing to tell the controller.
    assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
    assert_eq!(core.long_peak.load(Ordering::Relaxed), 0);
    assert!(!a.hold.is_long());
    wait_id(enter(&core, 2, 3 * MS));
    wait_id(enter(&core, 3, 4 * MS));
    // Both waiters queued after a quantum that began at 0: the holder keeps its slot,
    // and the controller learns that a long statement runs beside waiters.
    assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
    assert_eq!(core.long_peak.swap(0, Ordering::Relaxed), 1);
    // The hold is marked and counted once, however many quanta it keeps.
    assert!(a.hold.is_long());
    assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
    assert_eq!(core.long_holders(), 1);
    assert_eq!(core.long_peak.swap(0, Ordering::Relaxed), 1);
    assert!(core.long_kept.swap(false, Ordering::Relaxed));
    // One of them queued before a quantum that began at 3.5 ms: give way. The whole
    // quantum spent with threads queued marks the hold all the same (a long statement
    // that locked a waiter out), but no keep is reported.
    assert!(core.yields_quantum(7 * MS / 2, &mut b.hold, 0, || None));
    assert!(b.hold.is_long());
    assert_eq!(core.long_holders(), 2);
    assert_eq!(core.long_peak.swap(0, Ordering::Relaxed), 2);
    assert!(!core.long_kept.load(Ordering::Relaxed));
    // A hold marked again (a long statement admitted again after it gave way) is counted
    // once.
    assert_eq!(core.mark_long(&mut b.hold), 2);
    // A hand-off serves the newest (3, under the age cap); the oldest not yet served is
    // still 2, queued at 3 ms.
    let (who, mut d) = exit_to(&core, b.hold, 5 * MS).expect("handed off");
    assert_eq!(who, 3);
    assert!(!core.yields_quantum(2 * MS, &mut d.hold, 0, || None));
    assert!(core.yields_quantum(3 * MS, &mut d.hold, 0, || None));
    assert_eq!(core.long_holders(), 2);
    assert_eq!(core.long_peak.load(Ordering::Relaxed), 2);
    // Once 2 is served too, nobody waits: keep. The long statement that left is no
    // longer counted.
    let (who, mut c) = exit_to(&core, d.hold, 6 * MS).expect("handed off");
    assert_eq!(who, 2);
    assert_eq!(core.long_holders(), 1);
    assert!(!core.yields_quantum(u64::MAX, &mut c.hold, 0, || None));
    // A waiter that cancels is forgotten as the oldest.
    let e = wait_id(enter(&core, 4, 7 * MS));
    assert!(core.yields_quantum(8 * MS, &mut c.hold, 0, || None));
    assert!(core.cancel_wait(e).is_none());
    assert!(!core.yields_quantum(8 * MS, &mut c.hold, 0, || None));
    for hold in [a.hold, c.hold] {
        assert!(exit_to(&core, hold, 9 * MS).is_none());
    }
    assert_eq!(core.inside(), 0);
    assert_eq!(core.long_holders(), 0);
}

#[test]
fn a_lent_long_holders_hold_forgotten_after_its_loan_is_no_longer_counted() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let mut a = admitted(enter(&core, 0, 0));
    wait_id(enter(&core, 1, 3 * MS));
    assert!(!core.yields_quantum(0, &mut a.hold, 0, || None));
    assert_eq!(core.long_holders(), 1);
    // The holder parks on a lock: its slot is lent to the waiter, and the session drops
    // its hold once the loan gave the slot back.
    assert_eq!(core.lend(4 * MS).len(), 1);
    core.forget_lent(a.hold);
    assert_eq!(core.long_holders(), 0);
}

#[test]
fn a_holder_past_its_quantum_with_nobody_queued_runs_the_controller_once_a_window_and_it_cuts_to_the_resting_floor(
) {
    // An adaptive core on 2 CPUs started at 32; two holders past their quanta, nobody
    // queued. Each quantum end keeps its slot; once per window the controller decides on
    // the CPU reading it is handed (both CPUs busy) and cuts towards the resting floor.
    // Neither holder is counted long: with every session inside, a preempted short
    // statement would look the same.
    let core: AutoCore<u32> = AutoCore::new(AutoParams {
        start_limit: 32,
        cpus: 2,
        min_limit: 2,
        adaptive: true,
        ..params(32)
    });
    let mut a = admitted(enter(&core, 0, 0));
    let mut b = admitted(enter(&core, 1, 0));
    let mut reads: u64 = 0;
    let mut t = 0;
    while core.limit() > 4 && t < 2_000 * MS {
        t += 5 * MS;
        for h in [&mut a.hold, &mut b.hold] {
            assert!(!core.yields_quantum(0, h, t, || {
                reads += 1;
                Some(2 * t)
            }));
        }
    }
    assert_eq!(core.limit(), 4, "two slots per CPU");
    let g = core.gauges();
    assert_eq!((g.long_holders, g.limit_reasons.busy), (0, 3));
    // At most one reading per controller window, not one per quantum end (two holders'
    // quanta end in each step): a count of calls against a count of windows of the
    // synthetic clock the test feeds in, no clock is read.
    let windows = t / CONTROL_WINDOW.as_nanos() as u64;
    let quantum_ends = 2 * t / (5 * MS);
    assert!(
        reads <= windows + 1 && reads < quantum_ends,
        "{reads} readings for {windows} windows and {quantum_ends} quantum ends"
    );
    // At the floor nothing more is read or cut.
    let before = reads;
    for _ in 0..10 {
        t += 20 * MS;
        assert!(!core.yields_quantum(0, &mut a.hold, t, || {
            reads += 1;
            Some(2 * t)
        }));
    }
    assert_eq!((core.limit(), reads), (4, before));
    let _ = core.exit(a.hold, || t);
    let _ = core.exit(b.hold, || t);
}

#[test]
fn with_nobody_queued_busy_cpus_halve_the_limit_to_the_resting_floor_beside_long_statements_too() {
    // 9 holders on 2 CPUs at a limit of 32, 8 of them long statements (marked while
    // threads queued, earlier): with nobody queued now the limit is halved down to the
    // resting floor of 4 (their lane, one past the CPUs, is below it) and read no more.
    let core: AutoCore<u32> = AutoCore::new(AutoParams {
        start_limit: 32,
        cpus: 2,
        min_limit: 2,
        adaptive: true,
        ..params(32)
    });
    let mut holds: Vec<Admission> = (0..9).map(|i| admitted(enter(&core, i, 0))).collect();
    for a in &mut holds[..8] {
        core.mark_long(&mut a.hold);
    }
    let mut t = 0;
    for _ in 0..100 {
        t += 10 * MS;
        assert!(!core.yields_quantum(0, &mut holds[8].hold, t, || Some(2 * t)));
    }
    assert_eq!(core.limit(), 4);
    let r = core.gauges().limit_reasons;
    assert_eq!(r.busy, 3, "32 -> 16 -> 8 -> 4");
    for a in holds {
        let _ = core.exit(a.hold, || t);
    }
}

#[test]
fn a_stall_check_raises_the_limit_and_hands_off_when_no_slot_moved_for_a_stall_period() {
    let (core, _held, id) = adaptive_one_held_one_queued();
    let period = STALL_PERIOD.as_nanos() as u64;
    assert!(
        core.stall_check(period / 2, || Some(0)).is_empty(),
        "too early"
    );
    // The CPU reading: nothing used (the holder is blocked).
    let out = core.stall_check(period, || Some(0));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].id, id);
    let g = core.gauges();
    assert_eq!((g.stall_ticks, g.limit), (1, 2));
}

#[test]
fn a_lent_slot_comes_back_free_then_above_the_limit_up_to_twice_it_then_first_in_line() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let a = admitted(enter(&core, 0, 0));
    assert!(core.lend(0).is_empty());
    let b = admitted(enter(&core, 1, 0));
    assert!(core.lend(0).is_empty());
    let c = admitted(enter(&core, 2, 0));
    wait_id(enter(&core, 3, 0));
    let over = core.reclaim(&0, || {}).expect("above the limit: 2 inside");
    assert_eq!(over.kind(), HoldKind::Slot);
    drop(over); // the session's own hold stands for it
    assert_eq!(core.gauges().inside, 2);
    let id = core
        .reclaim(&1, || {})
        .expect_err("twice the limit: queued");
    assert_eq!(core.gauges().reclaims_over, 1);
    // c leaves: 1 inside (a), limit 1: nobody is handed a slot yet.
    assert!(core.exit(c.hold, || 0).is_empty());
    // a leaves: the reclaimer is first in line, ahead of the newer plain waiter.
    let out = core.exit(a.hold, || 0);
    assert_eq!((out[0].waiter, out[0].id), (1, id));
    let (adm, _) = core.finish_wait(id, 0, || None);
    drop(adm.hold); // the session's own hold stands for it
    let out = core.exit(b.hold, || 0);
    assert_eq!(out[0].waiter, 3);
}

#[test]
fn one_waiter_keeps_the_stall_watch_and_it_passes_to_the_oldest_while_the_newest_are_served() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let a = admitted(enter(&core, 0, 0));
    let b = wait_id(enter(&core, 1, 0));
    let c = wait_id(enter(&core, 2, MS / 10));
    let d = wait_id(enter(&core, 3, MS / 5));
    // The first to queue keeps the watch; the others sleep without a timer.
    assert!(core.is_stall_watch(b));
    assert!(!core.is_stall_watch(c) && !core.is_stall_watch(d));
    assert_eq!(core.take_nudge(), None);
    // The queue is young: the newest (`d`) is served; the watch stays where it is.
    let (who, _) = exit_to(&core, a.hold, MS / 2).unwrap();
    assert_eq!(who, 3);
    assert!(core.is_stall_watch(b));
    assert_eq!(core.take_nudge(), None);
    // `b` gives up: the watch passes to the waiter hot-first reaches last, the oldest
    // left (`c`), who is woken to take it, once.
    assert_eq!(core.cancel_wait(b), None);
    assert!(core.is_stall_watch(c));
    assert_eq!(core.take_nudge(), Some(2));
    assert_eq!(core.take_nudge(), None);
    // The last waiter leaves: nobody keeps the watch.
    assert_eq!(core.cancel_wait(c), None);
    assert!(!core.is_stall_watch(c));
    assert_eq!(core.take_nudge(), None);
}

#[test]
fn while_the_oldest_are_served_the_watch_passes_to_the_newest() {
    let core: AutoCore<u32> = AutoCore::new(params(1));
    let a = admitted(enter(&core, 0, 0));
    let b = wait_id(enter(&core, 1, 0));
    wait_id(enter(&core, 2, 0));
    let d = wait_id(enter(&core, 3, 0));
    assert!(core.is_stall_watch(b));
    // Past the age cap the oldest (`b`, the keeper) is served; when it runs, the watch
    // passes to the newest, whom oldest-first reaches last.
    let (who, _) = exit_to(&core, a.hold, 10 * MS).unwrap();
    assert_eq!(who, 1);
    assert!(core.is_stall_watch(d));
    assert_eq!(core.take_nudge(), Some(3));
}

#[test]
fn a_waiter_the_hook_refuses_never_keeps_the_watch() {
    // The real gate's hook refuses async sessions (their waits have no timer).
    let core: AutoCore<u32> = AutoCore::new(params(1)).with_watch_hook(|w| *w < 100);
    admitted(enter(&core, 0, 0));
    let x = wait_id(enter(&core, 100, 0));
    let b = wait_id(enter(&core, 1, 0));
    assert!(!core.is_stall_watch(x));
    assert!(core.is_stall_watch(b));
    // `b` leaves; the only other waiter may not watch: nobody keeps it, nobody is woken.
    assert_eq!(core.cancel_wait(b), None);
    assert!(!core.is_stall_watch(x));
    assert_eq!(core.take_nudge(), None);
    // The next thread to queue takes it.
    let c = wait_id(enter(&core, 2, 0));
    assert!(core.is_stall_watch(c));
}
