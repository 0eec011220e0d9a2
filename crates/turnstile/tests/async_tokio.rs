//! The async session under a real multi-thread runtime: thousands of tasks, half of them
//! racing their enter against a random cancellation (a timeout, or a few scheduling rounds),
//! an independent count of the tasks inside checked against the policy's bound at every
//! admission, and every slot accounted for at the end.
//!
//! Feature `async` (required-features in Cargo.toml).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use turnstile::{Gate, GateConfig, Policy, SleepFuture, Sleeper};

/// A small deterministic generator (splitmix64): random points without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn tokio_sleeper() -> Sleeper {
    Sleeper::new(|d| Box::pin(tokio::time::sleep(d)) as SleepFuture)
}

#[derive(Default)]
struct Tally {
    /// Tasks inside now, counted by the tasks themselves (independent of the gate).
    inside: AtomicU32,
    most_inside: AtomicU32,
    admitted: AtomicU64,
    cancelled: AtomicU64,
}

/// Gives up after `n` scheduling rounds: a cancellation point finer than the timer's.
async fn after_yields(n: u64) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// Runs `tasks` tasks through `gate`; every other task races its enter against a random
/// cancellation. Returns the tally after every task has finished.
async fn run(gate: &Gate, tasks: u64, bound: Option<u32>, sleeper: Option<Sleeper>) -> Tally {
    let tally = Arc::new(Tally::default());
    let mut handles = Vec::with_capacity(tasks as usize);
    for i in 0..tasks {
        let gate = gate.clone();
        let tally = tally.clone();
        let sleeper = sleeper.clone();
        handles.push(tokio::spawn(async move {
            let mut rng = Rng(i.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xDEAD_BEEF);
            let mut s = match sleeper {
                Some(sl) => gate.async_session_with_sleeper(format!("t{i}"), sl),
                None => gate.async_session(format!("t{i}")).unwrap(),
            };
            let outcome = if i % 2 == 1 {
                // Cancelled at a random point: a timer, or a few scheduling rounds. The enter
                // is polled first in both, so every attempt reaches the gate.
                if rng.below(2) == 0 {
                    let d = Duration::from_micros(rng.below(3_000));
                    tokio::time::timeout(d, s.enter()).await.ok()
                } else {
                    let n = rng.below(16);
                    tokio::select! {
                        biased;
                        r = s.enter() => Some(r),
                        () = after_yields(n) => None,
                    }
                }
            } else {
                Some(s.enter().await)
            };
            let Some(call) = outcome.map(|r| r.expect("no gate error but a cancellation")) else {
                tally.cancelled.fetch_add(1, Ordering::Relaxed);
                return;
            };
            tally.admitted.fetch_add(1, Ordering::Relaxed);
            let now = tally.inside.fetch_add(1, Ordering::SeqCst) + 1;
            tally.most_inside.fetch_max(now, Ordering::Relaxed);
            if let Some(bound) = bound {
                assert!(now <= bound, "{now} tasks inside, bound {bound}");
            }
            // Hold briefly: a few scheduling rounds, now and then a timer tick.
            if rng.below(16) == 0 {
                tokio::time::sleep(Duration::from_micros(200)).await;
            } else {
                after_yields(rng.below(4)).await;
            }
            tally.inside.fetch_sub(1, Ordering::SeqCst);
            drop(call);
            s.end_statement();
        }));
    }
    for h in handles {
        h.await.expect("a task panicked");
    }
    Arc::try_unwrap(tally).ok().expect("every task is done")
}

/// Every slot and every waiter is accounted for: nothing inside, queued, sleeping or
/// waiting; the gate's admissions and cancellations are the tasks' own, and add up to the
/// attempts.
fn assert_all_accounted(gate: &Gate, tally: &Tally, tasks: u64) {
    let st = gate.stats();
    let c = &st.counters;
    eprintln!(
        "{}: {tasks} tasks, at most {} inside; admissions {} (queue waits {}, sleeps {}, \
         hand-offs {}, lifo {}, forced {}), cancellations {}",
        st.policy,
        tally.most_inside.load(Ordering::Relaxed),
        c.admissions,
        c.queue_waits,
        c.sleeps,
        c.handoffs,
        c.lifo_admissions,
        c.forced_entries,
        c.cancellations
    );
    assert_eq!(
        (
            st.inside,
            st.queued,
            st.waiting,
            st.sleeping,
            st.fifo_pending,
            st.lifo_running
        ),
        (0, 0, 0, 0, 0, 0),
        "{st:?}"
    );
    let admitted = tally.admitted.load(Ordering::Relaxed);
    let cancelled = tally.cancelled.load(Ordering::Relaxed);
    assert_eq!(admitted + cancelled, tasks);
    assert_eq!(st.counters.admissions, admitted);
    assert_eq!(st.counters.cancellations, cancelled);
    assert_eq!(st.sessions, 0);
    assert_eq!(tally.inside.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn classic_ten_thousand_tasks_never_exceed_the_limit_and_every_cancelled_slot_passes_on() {
    let gate = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(8)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let tasks = 10_000;
    let tally = run(&gate, tasks, Some(8), None).await;
    assert_all_accounted(&gate, &tally, tasks);
    let c = gate.stats().counters;
    assert!(c.queue_waits > 0, "the load queued: {c:?}");
    assert!(c.cancellations > 0, "some waiters were cancelled: {c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flifo_ten_thousand_tasks_stay_within_twice_the_limit_and_every_slot_is_accounted_for() {
    let gate = Gate::new(
        GateConfig::new(Policy::Flifo)
            .limit(8)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let tasks = 10_000;
    let tally = run(&gate, tasks, Some(16), None).await;
    assert_all_accounted(&gate, &tally, tasks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn classic_with_its_sleep_before_queueing_on_a_tokio_timer_keeps_the_limit() {
    let gate = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(8)
            .tickets(1)
            .sleep_delay(Duration::from_micros(500)),
    )
    .unwrap();
    let tasks = 2_000;
    let tally = run(&gate, tasks, Some(8), Some(tokio_sleeper())).await;
    assert_all_accounted(&gate, &tally, tasks);
    assert!(gate.stats().counters.sleeps > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn polling_on_a_tokio_timer_keeps_the_limit_and_abandons_cancelled_sleeps() {
    let gate = Gate::new(
        GateConfig::new(Policy::Polling)
            .limit(8)
            .tickets(1)
            .sleep_delay(Duration::from_micros(500)),
    )
    .unwrap();
    let tasks = 2_000;
    let tally = run(&gate, tasks, Some(8), Some(tokio_sleeper())).await;
    assert_all_accounted(&gate, &tally, tasks);
    assert!(gate.stats().counters.sleeps > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn timer_on_a_tokio_timer_accounts_for_every_forced_entry_and_cancellation() {
    // `timer` has no bound by design (forced entries); only the accounting is checked.
    let gate = Gate::new(GateConfig::new(Policy::Timer).limit(8).tickets(1)).unwrap();
    let tasks = 2_000;
    let tally = run(&gate, tasks, None, Some(tokio_sleeper())).await;
    assert_all_accounted(&gate, &tally, tasks);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unlimited_admits_every_task_and_counts_nothing_inside() {
    let gate = Gate::new(GateConfig::new(Policy::Unlimited).tickets(1)).unwrap();
    let tasks = 2_000;
    let tally = run(&gate, tasks, None, None).await;
    assert_all_accounted(&gate, &tally, tasks);
    assert_eq!(tally.cancelled.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raise_of_the_limit_admits_queued_tasks_at_once() {
    let gate = Gate::new(
        GateConfig::new(Policy::Classic)
            .limit(1)
            .tickets(1)
            .sleep_delay(Duration::ZERO),
    )
    .unwrap();
    let mut holder = gate.async_session("holder").unwrap();
    let call = holder.enter().await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..4 {
        let gate = gate.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut s = gate.async_session(format!("w{i}")).unwrap();
            let c = s.enter().await.unwrap();
            tx.send(()).unwrap();
            // Stay inside until the test is done with the gate.
            std::future::pending::<()>().await;
            drop(c);
        });
    }
    while gate.stats().queued < 4 {
        tokio::task::yield_now().await;
    }
    gate.set_limit(5).unwrap();
    for _ in 0..4 {
        rx.recv().await.unwrap();
    }
    assert_eq!(gate.stats().inside, 5);
    drop(call);
}
