//! Model checks of the core's own races that the gate-level models (tests/loom.rs) cannot
//! reach: `RUSTFLAGS="--cfg loom" cargo test -p turnstile --release --lib auto`.
use super::super::test_params;
use super::*;
use crate::config::DEFAULT_AGE_CAP;
use loom::sync::Arc;

fn params(limit: u32) -> AutoParams {
    test_params(limit, DEFAULT_AGE_CAP)
}

fn admitted(step: Step) -> Hold {
    match step {
        Step::Admitted(a) => a.hold,
        other => panic!("expected an admission, got {other:?}"),
    }
}

fn enter(core: &AutoCore<u32>, who: u32) -> Step {
    let mut out = Vec::new();
    core.enter(&mut Attempt::new(false), &who, || 0, || {}, &mut out)
}

#[test]
fn a_reclaim_that_queues_while_the_holders_leave_is_handed_a_slot() {
    // Limit 1, and 2 inside (one above the limit by an earlier reclaim): the reclaim of a
    // third lent slot must queue, while both holders exit on another thread. Whatever
    // the interleaving, it ends counted: its slot taken at once, or handed to it by an
    // exit (a reclaim counted in `queued` only after it looked for a slot was missed by
    // both exits, and nobody was left to hand it one).
    loom::model(|| {
        let core: Arc<AutoCore<u32>> = Arc::new(AutoCore::new(params(1)));
        let r = admitted(enter(&core, 0));
        assert!(core.lend(0).is_empty());
        let z = admitted(enter(&core, 1));
        assert!(core.lend(0).is_empty());
        let x = admitted(enter(&core, 2));
        let z_back = core.reclaim(&1, || {}).expect("above the limit: 2 inside");
        drop(z_back); // z's own hold stands for it
        let exits = {
            let core = core.clone();
            loom::thread::spawn(move || {
                let mut out = core.exit(x, || 0);
                out.extend(core.exit(z, || 0));
                out
            })
        };
        let reclaimed = core.reclaim(&0, || {});
        let handed = exits.join().unwrap();
        match reclaimed {
            Ok(hold) => {
                assert!(handed.is_empty(), "nobody else queued");
                drop(hold);
            }
            Err(id) => {
                let got: Vec<_> = handed.iter().map(|h| (h.waiter, h.id)).collect();
                assert_eq!(got, [(0, id)], "the queued reclaim was handed a slot");
                let (a, _) = core.finish_wait(id, 0, || None);
                drop(a.hold);
            }
        }
        assert_eq!(core.gauges().inside, 1, "the reclaimer alone");
        let out = core.exit(r, || 0);
        assert!(out.is_empty());
        assert_eq!(core.gauges().inside, 0);
    });
}
