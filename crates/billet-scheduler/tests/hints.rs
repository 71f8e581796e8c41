//! B12: hints make ends prompt. A hint that a running lease's instance
//! stopped or vanished leads to a look in the same step; the look's answer
//! ends the job, never the hint; a hint lost, late, repeated or invented
//! changes no outcome.

mod support;

use billet_provider::{Hint, HintKind, InstanceId};
use billet_scheduler::{Answer, Call, Decision, FailReason, JobId, Outcome, PoolId};
use support::*;

/// A world with one pool of capacity 1 where job 1 (3 s, exit 7) runs and
/// job 2 waits for its lease.
fn running() -> (World, InstanceId, String) {
    let mut w = World::new(one_pool(1));
    w.settle();
    w.submit(job(1, 3, 7)).unwrap();
    w.submit(job(2, 3, 0)).unwrap();
    w.settle();
    let instance = w.fake.instances(0)[0].clone();
    (w, instance.id, instance.name)
}

fn hint(kind: HintKind, id: &InstanceId, name: &str) -> Hint {
    Hint {
        kind,
        id: id.clone(),
        name: name.to_owned(),
    }
}

fn finds(w: &World) -> Vec<String> {
    w.calls()
        .into_iter()
        .filter_map(|action| match action.call {
            Call::Find(name) => Some(name),
            _ => None,
        })
        .collect()
}

fn placed_at(w: &World, n: u64) -> usize {
    w.log
        .iter()
        .position(|d| matches!(d, Decision::Placed { job, .. } if *job == JobId(n)))
        .expect("placed")
}

// B12: a hint that the instance stopped is a look in the same step; its
// answer ends the job with its exit code and frees the lease at once, long
// before the next reconcile (at 10 s); the queued job takes the lease.
#[test]
fn b12_a_stop_hinted_ends_its_job_at_once() {
    let (mut w, id, name) = running();
    w.now += secs(3);
    w.core
        .handle_hint(PoolId(0), &hint(HintKind::Stopped, &id, &name), w.now);
    w.collect();
    assert_eq!(
        finds(&w),
        std::slice::from_ref(&name),
        "one look, at its own name"
    );
    w.settle();
    assert_eq!(w.outcome(1), Some(Outcome::Finished { exit_code: 7 }));
    assert!(placed_at(&w, 2) > placed_at(&w, 1));
    assert_eq!(
        w.fake.instances(0).len(),
        1,
        "job 2's instance, job 1's destroyed"
    );
    assert_ne!(w.fake.instances(0)[0].id, id);
}

// B12: hints never end a job by themselves. Repeated while a look is under
// way: one look. Invented (the instance still runs): nothing. About another
// instance, another pool, a name that is no job's, or an instance that
// appeared: no look at all. Lost: the reconcile ends the job as before.
#[test]
fn b12_hints_change_no_outcome() {
    let (mut w, id, name) = running();
    let stopped = hint(HintKind::Stopped, &id, &name);
    // Invented: it still runs (1 s of 3).
    w.now += secs(1);
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    assert_eq!(finds(&w).len(), 1, "one look however often it is told");
    w.settle();
    assert_eq!(w.outcome(1), None, "a running instance ends nothing");
    for other in [
        hint(HintKind::Stopped, &InstanceId::from("i-99"), &name),
        hint(HintKind::Stopped, &id, "not-a-job"),
        hint(HintKind::Appeared, &id, &name),
    ] {
        w.core.handle_hint(PoolId(0), &other, w.now);
    }
    w.core.handle_hint(PoolId(1), &stopped, w.now);
    w.collect();
    assert!(finds(&w).is_empty(), "{:?}", w.calls());
    // Lost: the stop is seen by the reconcile, as without hints.
    w.run_until_idle(secs(60));
    assert_eq!(w.outcome(1), Some(Outcome::Finished { exit_code: 7 }));
    assert_eq!(w.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
    // Late: the job has ended; nothing more.
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    assert!(w.calls().is_empty());
}

// B12: a hint that the instance vanished is a look; confirmed absent, the
// pool's inventory is read at once, and it decides: the job ends vanished.
#[test]
fn b12_a_vanish_hinted_reads_the_inventory_at_once() {
    let (mut w, id, name) = running();
    w.now += secs(1);
    w.fake.pools.get_mut(&0).unwrap().remove(&id);
    w.core
        .handle_hint(PoolId(0), &hint(HintKind::Vanished, &id, &name), w.now);
    w.collect();
    let look = w
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Find(_)))
        .unwrap();
    let answer = w.fake.answer(&look, w.now);
    w.answer_with(look.id, answer);
    assert!(
        w.calls().iter().any(|a| a.call == Call::List),
        "the inventory is asked for in the look's step: {:?}",
        w.calls()
    );
    w.settle();
    assert_eq!(
        w.outcome(1),
        Some(Outcome::Failed {
            reason: FailReason::Vanished
        })
    );
}

// B12: a look that errs or gets no answer is forgotten: the next hint looks
// again, and a stopped instance then ends its job.
#[test]
fn b12_a_look_that_fails_is_asked_again_by_the_next_hint() {
    let (mut w, id, name) = running();
    w.now += secs(3);
    let stopped = hint(HintKind::Stopped, &id, &name);
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    let look = w
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Find(_)))
        .unwrap();
    w.answer_with(
        look.id,
        Answer::Found(Err(billet_provider::Error::inventory_unavailable("down"))),
    );
    assert_eq!(w.outcome(1), None);
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    let look = w
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Find(_)))
        .unwrap();
    // No answer before its deadline (5 s): lost, and forgotten.
    w.pending.remove(&look.id);
    w.wait(secs(5));
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    assert_eq!(finds(&w).len(), 1, "looked at again: {:?}", w.calls());
    w.answer_only(|call| matches!(call, Call::Find(_)));
    w.settle();
    assert_eq!(w.outcome(1), Some(Outcome::Finished { exit_code: 7 }));
}
