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
        name: name.into(),
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

/// The look asked for (the pending find).
fn the_look(w: &World) -> billet_scheduler::Action {
    w.calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Find(_)))
        .expect("a look")
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
    let look = the_look(&w);
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
    let look = the_look(&w);
    w.answer_with(
        look.id,
        Answer::Found(Err(billet_provider::Error::inventory_unavailable("down"))),
    );
    assert_eq!(w.outcome(1), None);
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    let look = the_look(&w);
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

// B12: a look that finds another instance under the job's name (not the
// one its lease holds) decides nothing, stopped or not: the inventory will.
#[test]
fn b12_a_look_that_finds_another_instance_decides_nothing() {
    let (mut w, id, name) = running();
    w.now += secs(3);
    w.core
        .handle_hint(PoolId(0), &hint(HintKind::Stopped, &id, &name), w.now);
    w.collect();
    let look = the_look(&w);
    let mut other = w.fake.instances(0)[0].instance(w.now);
    other.id = InstanceId::from("i-other");
    w.answer_with(look.id, Answer::Found(Ok(Some(other))));
    assert_eq!(w.outcome(1), None);
    assert!(w.calls().is_empty(), "nothing asked: {:?}", w.calls());
}

// B12: a hint read from a stream that several pools share (one provider
// serving them all) looks in the pool whose lease the instance backs, as
// the same hint from that pool's own stream would; a stream that does not
// serve that pool looks nowhere.
#[test]
fn b12_a_hint_from_a_shared_stream_looks_in_the_pool_that_holds_it() {
    let mut w = World::new(config(
        "deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 1, docker: {image: img}}
  - {name: b, kind: docker, capacity: 1, docker: {image: img}}
routing: {default_kind: docker}",
    ));
    w.settle();
    w.submit(job(1, 3, 7)).unwrap();
    w.submit(job(2, 3, 5)).unwrap();
    w.settle();
    let instance = w.fake.instances(1)[0].clone();
    assert_eq!(
        instance.name,
        JobId(2).instance_name("b"),
        "job 2 runs in b"
    );
    let stopped = hint(HintKind::Stopped, &instance.id, &instance.name);
    w.now += secs(3);
    w.core.handle_shared_hint(&[PoolId(0)], &stopped, w.now);
    w.collect();
    assert!(finds(&w).is_empty(), "a stream of a alone: {:?}", w.calls());
    w.core
        .handle_shared_hint(&[PoolId(0), PoolId(1)], &stopped, w.now);
    w.collect();
    let look = the_look(&w);
    assert_eq!(look.pool, PoolId(1), "looked at in b, where it runs");
    assert_eq!(look.call, Call::Find(instance.name));
    w.settle();
    assert_eq!(w.outcome(2), Some(Outcome::Finished { exit_code: 5 }));
    assert_eq!(w.outcome(1), None, "job 1 is told of nothing yet");
}

/// A world with one pool where job 1 (exit 7) has its launch asked for and
/// not yet answered: the launch's call, and the answer the backend gave
/// (its instance started at once and ran for 0 s, so it has stopped).
fn launch_in_flight() -> (World, billet_scheduler::Action, Answer) {
    let mut w = World::new(one_pool(1));
    w.settle();
    w.submit(job(1, 0, 7)).unwrap();
    w.collect();
    let launch = w
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Launch(_)))
        .expect("a launch");
    let answer = w.fake.answer(&launch, w.now);
    (w, launch, answer)
}

// B12: an instance that stops before its launch is answered (a job of a
// few milliseconds: the backend tells its stop while billet still waits
// for the launch) is looked at in the step its launch's answer comes, and
// its job ends at once, not at the next reconcile (10 s).
#[test]
fn b12_a_stop_hinted_before_the_launch_is_answered_is_looked_at_then() {
    let (mut w, launch, answer) = launch_in_flight();
    let instance = w.fake.instances(0)[0].clone();
    let stopped = hint(HintKind::Stopped, &instance.id, &instance.name);
    w.core.handle_hint(PoolId(0), &stopped, w.now);
    w.collect();
    assert!(
        finds(&w).is_empty(),
        "no look while it launches: {:?}",
        w.calls()
    );
    w.answer_with(launch.id, answer);
    assert_eq!(
        finds(&w),
        std::slice::from_ref(&instance.name),
        "looked at in the launch's step"
    );
    w.settle();
    assert_eq!(w.outcome(1), Some(Outcome::Finished { exit_code: 7 }));
    assert!(w.fake.instances(0).is_empty(), "its instance destroyed");
}

// B12: a hint told during the launch about another instance (an earlier
// attempt's, under the job's name), or read from a stream that does not
// serve the job's pool, leads to no look once the launch is answered; a
// hint about an instance that appeared, none at all.
#[test]
fn b12_a_hint_during_the_launch_about_another_instance_looks_at_nothing() {
    for (pools, id, kind) in [
        (&[PoolId(0)][..], "i-old", HintKind::Stopped),
        (&[PoolId(1)][..], "", HintKind::Stopped),
        (&[PoolId(0)][..], "", HintKind::Appeared),
    ] {
        let (mut w, launch, answer) = launch_in_flight();
        let instance = w.fake.instances(0)[0].clone();
        let id = if id.is_empty() {
            instance.id.clone()
        } else {
            InstanceId::from(id)
        };
        w.core
            .handle_shared_hint(pools, &hint(kind, &id, &instance.name), w.now);
        w.answer_with(launch.id, answer);
        assert!(
            finds(&w).is_empty(),
            "{pools:?} {id:?} {kind:?}: {:?}",
            w.calls()
        );
        assert_eq!(w.outcome(1), None, "the reconcile will end it");
    }
}

// B12: a stop told while the launch's effect is being settled by name
// (the launch conflicted: a find) is looked at once the find adopts the
// instance as running.
#[test]
fn b12_a_stop_hinted_while_a_launch_is_settled_is_looked_at_on_adoption() {
    let (mut w, launch, _) = launch_in_flight();
    let instance = w.fake.instances(0)[0].clone();
    // The launch's answer is lost to a conflict: its name is taken (by the
    // instance it made), so the core finds it by name.
    w.answer_with(
        launch.id,
        Answer::Launched(Err(billet_provider::Error::Conflict {
            name: instance.name.clone(),
        })),
    );
    let find = the_look(&w);
    w.core.handle_hint(
        PoolId(0),
        &hint(HintKind::Stopped, &instance.id, &instance.name),
        w.now,
    );
    w.collect();
    assert_eq!(
        finds(&w).len(),
        1,
        "only the settling find: {:?}",
        w.calls()
    );
    // The find saw it still running (read before it stopped).
    let mut running = instance.instance(w.now);
    running.state = billet_provider::State::Running;
    w.answer_with(find.id, Answer::Found(Ok(Some(running))));
    assert_eq!(
        finds(&w),
        std::slice::from_ref(&instance.name),
        "looked at on adoption"
    );
    w.settle();
    assert_eq!(w.outcome(1), Some(Outcome::Finished { exit_code: 7 }));
}

mod drivers {
    //! B12 through the drivers, over the simulated backend and a manual
    //! clock: with hints read, a job whose instance stops at 5 s ends at 5
    //! s; without, at the reconcile a minute in.

    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use billet_clock::{Clock, ManualClock};
    use billet_provider::{Provider, TrustClass};
    use billet_scheduler::{
        Decision, Driver, Flow, Hooks, Inline, Job, JobId, Pools, Settings, Turn,
    };
    use billet_simulated::{Host, SimulatedProvider, run_for};
    use parking_lot::Mutex;

    /// Pools a and b over one host; `shared`: one provider serves both
    /// (one hint stream), else each has its own (two streams telling the
    /// same hints, the owner's).
    fn pools_over(clock: &ManualClock, shared: bool) -> Pools {
        let config = billet_config::Config::from_yaml_str(
            "deployment: {id: blue}\n\
             providers:\n  - {name: a, kind: docker, capacity: 2, docker: {image: img}}\n  - {name: b, kind: docker, capacity: 2, docker: {image: img}}\n\
             routing: {default_kind: docker}\n",
        )
        .unwrap();
        let host = Host::new();
        let provider = || -> Arc<dyn Provider> {
            Arc::new(
                SimulatedProvider::builder("blue")
                    .host(host.clone())
                    .clock(Arc::new(clock.clone()))
                    .build()
                    .unwrap(),
            )
        };
        let a = provider();
        let b = if shared { Arc::clone(&a) } else { provider() };
        Pools::builder(config)
            .provider("a", a)
            .provider("b", b)
            .settings(Settings {
                reconcile_every: Duration::from_secs(60),
                ..Settings::default()
            })
            .build()
            .unwrap()
    }

    fn pools(clock: &ManualClock) -> Pools {
        pools_over(clock, false)
    }

    fn job() -> Job {
        Job::new(JobId(1), run_for(Duration::from_secs(5))).with_trust(TrustClass::Trusted)
    }

    /// When job 1 ended, seconds after the start, as `Inline` drives it.
    async fn inline_end(hints: bool) -> u64 {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let inline = Inline::new(&pools(&clock), Arc::clone(&shared));
        let mut inline = if hints { inline.with_hints() } else { inline };
        inline.start().await;
        inline.submit(job()).await.unwrap();
        loop {
            while let Some(decision) = inline.poll_decision() {
                if matches!(decision, Decision::Ended { .. }) {
                    return clock
                        .now()
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap()
                        .as_secs();
                }
            }
            let next = [clock.next_deadline(), inline.next_wakeup()]
                .into_iter()
                .flatten()
                .min()
                .expect("a wake while job 1 runs");
            clock.advance_to(next).unwrap();
            inline.tick().await;
        }
    }

    // B12: `Inline` with hints ends the job at its instance's stop.
    #[tokio::test]
    async fn b12_inline_with_hints_ends_a_job_when_its_instance_stops() {
        assert_eq!(inline_end(true).await, 5);
        assert_eq!(inline_end(false).await, 60);
    }

    /// The jobs `inline` ended since last asked, in order, with their pools.
    fn ended(inline: &mut Inline) -> Vec<(u64, usize)> {
        std::iter::from_fn(|| inline.poll_decision())
            .filter_map(|decision| match decision {
                Decision::Ended {
                    job,
                    pool: Some(pool),
                    ..
                } => Some((job.0, pool.0)),
                _ => None,
            })
            .collect()
    }

    // B12: every hint ready in a step is read in that step, one from each
    // pool's stream in turn. Jobs 1 to 4 are placed on pools a, b, a, b (the
    // most room, ties to the first) and all stop at 10 s; each pool's stream
    // tells all four stops, in launch order. All four end in that step, in
    // the order they stopped, whichever stream is read first: a stream that
    // has just given a hint is read again only after the other has had its
    // turn, so neither pool's ends wait behind the other's.
    //
    // One provider serving both pools: one stream, read once, ends the same
    // four jobs in the same step and the same order.
    #[tokio::test]
    async fn b12_inline_reads_every_hint_ready_each_pool_in_turn() {
        for (shared, streams) in [(false, 2), (true, 1)] {
            assert_eq!(
                ends_of_four_stopping_at_once(shared, streams).await,
                [(1, 0), (2, 1), (3, 0), (4, 1)],
                "shared: {shared}"
            );
        }
    }

    /// Jobs 1 to 4 placed on pools a, b, a, b, all stopping at 10 s: which
    /// ended in the step at 10 s, in order, with `streams` hint streams read.
    async fn ends_of_four_stopping_at_once(shared: bool, streams: usize) -> Vec<(u64, usize)> {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let clocked: Arc<dyn Clock> = Arc::new(clock.clone());
        let mut inline = Inline::new(&pools_over(&clock, shared), clocked).with_hints();
        assert_eq!(inline.hint_streams(), streams);
        let shown = format!("{inline:?}");
        assert!(
            shown.contains(&format!("hint_streams: {streams}")),
            "{shown}"
        );
        inline.start().await;
        for id in 1..=4 {
            let job = Job::new(JobId(id), run_for(Duration::from_secs(10)))
                .with_trust(TrustClass::Trusted);
            inline.submit(job).await.unwrap();
        }
        let placed: Vec<(u64, usize)> = std::iter::from_fn(|| inline.poll_decision())
            .filter_map(|decision| match decision {
                Decision::Placed { job, pool } => Some((job.0, pool.0)),
                _ => None,
            })
            .collect();
        assert_eq!(placed, [(1, 0), (2, 1), (3, 0), (4, 1)]);
        let stop = SystemTime::UNIX_EPOCH + Duration::from_secs(10);
        assert_eq!(clock.next_deadline(), Some(stop));
        clock.advance_to(stop).unwrap();
        inline.tick().await;
        ended(&mut inline)
    }

    /// Submits job 1, then records when each job ended.
    struct Submit {
        job: Option<Job>,
        ended: Arc<Mutex<Option<SystemTime>>>,
    }

    impl Hooks for Submit {
        type Input = Job;
        type Error = String;

        async fn next_input(&mut self) -> Option<Job> {
            match self.job.take() {
                Some(job) => Some(job),
                None => std::future::pending().await,
            }
        }

        fn on_input(&mut self, job: Job, turn: Turn<'_>) -> Result<Flow, String> {
            turn.core.submit(job, turn.now).map_err(|r| r.to_string())?;
            Ok(Flow::Continue)
        }

        fn decided(&mut self, decision: Decision, now: SystemTime) {
            if matches!(decision, Decision::Ended { .. }) {
                *self.ended.lock() = Some(now);
            }
        }
    }

    /// When job 1 ended, seconds after the start, as `Driver` runs it.
    /// With `shared`, one provider serves both pools: one stream.
    async fn driver_end(hints: bool, shared: bool) -> u64 {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let mut driver = Driver::new(&pools_over(&clock, shared), Arc::new(clock.clone()));
        assert_eq!(driver.hinted_pools(), 0);
        if hints {
            driver.subscribe_hints();
            let streams = if shared { 1 } else { 2 };
            assert_eq!(driver.hinted_pools(), streams, "one stream per provider");
        }
        let ended = Arc::new(Mutex::new(None));
        let mut hooks = Submit {
            job: Some(job()),
            ended: Arc::clone(&ended),
        };
        let steer = async {
            for _ in 0..1000 {
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                if let Some(at) = *ended.lock() {
                    return at;
                }
                if let Some(next) = clock.next_deadline() {
                    clock.advance_to(next).unwrap();
                }
            }
            panic!("job 1 never ended");
        };
        let at = tokio::select! {
            result = driver.run(&mut hooks) => panic!("the loop ended: {result:?}"),
            at = steer => at,
        };
        at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs()
    }

    // B12: the driver's loop reads hints once subscribed, as events of
    // their own: the job ends at its instance's stop, not at the reconcile.
    #[tokio::test]
    async fn b12_the_driver_reads_hints_once_subscribed() {
        for shared in [false, true] {
            assert_eq!(driver_end(true, shared).await, 5, "shared: {shared}");
            assert_eq!(driver_end(false, shared).await, 60, "shared: {shared}");
        }
    }
}
