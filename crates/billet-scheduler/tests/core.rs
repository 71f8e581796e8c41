//! The core's clauses, one scripted world at a time: no provider, no
//! runtime, every answer chosen by the test (B1-B11).

mod support;

use billet_provider::{Error, Instance, InstanceId, ProviderKind, State, Teardown, TrustClass};
use billet_scheduler::{
    Answer, Call, Core, Decision, FailReason, Job, JobId, OrphanFate, Outcome, PoolId, Refusal,
};
use support::*;

fn placed(world: &World, n: u64) -> Option<PoolId> {
    world.log.iter().find_map(|d| match d {
        Decision::Placed { job, pool } if *job == JobId(n) => Some(*pool),
        _ => None,
    })
}

const THREE: &str = "
deployment: {id: blue}
providers:
  - {name: linux, kind: docker, capacity: 1, docker: {image: ubuntu}}
  - {name: mac, kind: tart, capacity: 1, tart: {image: macos, cpus: 4, memory_mib: 8192}}
  - {name: vm-a, kind: firecracker, capacity: 2, firecracker: {kernel: /k, rootfs: /r.ext4, vcpus: 2}}
  - {name: vm-b, kind: firecracker, capacity: 3, firecracker: {kernel: /k, rootfs: /r.ext4}}
routing:
  routes:
    - {labels: [macos], provider: mac}
    - {labels: [linux], provider: linux, fallback_kind: firecracker}
  default_kind: firecracker
  untrusted_kinds: [firecracker]
";

// B1: the core decides without I/O: it starts by asking for every pool's
// inventory and places nothing in a pool before that pool answers (B8).
#[test]
fn b1_b8_starts_by_listing_every_pool_and_places_nothing_before() {
    let mut world = World::new(config(THREE));
    world.collect();
    let calls = world.calls();
    assert_eq!(calls.len(), 4);
    for (i, action) in calls.iter().enumerate() {
        assert_eq!(action.pool, PoolId(i));
        assert_eq!(action.call, Call::List);
        assert_eq!(action.deadline, t0() + secs(5));
    }
    world.submit(job(1, 10, 0).with_labels(["linux"])).unwrap();
    world.collect();
    assert_eq!(
        world.calls().len(),
        4,
        "nothing launched before the inventories"
    );
    assert_eq!(world.core.stats().queued, 1);
    assert!(world.core.stats().pools.iter().all(|p| !p.ready));
    // Only the docker pool answers: the job goes there and nowhere else.
    let list = world.calls()[0].id;
    world.answer_with(list, Answer::Listed(Ok(vec![])));
    assert_eq!(placed(&world, 1), Some(PoolId(0)));
    let launch = world
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Launch(_)));
    let Some(launch) = launch else {
        panic!("a launch was asked for");
    };
    let Call::Launch(spec) = launch.call else {
        unreachable!()
    };
    assert_eq!(spec.name, "job-1.linux");
    assert_eq!(spec.image, "ubuntu");
    assert_eq!(spec.command, run(10, 0));
    assert_eq!(spec.trust, TrustClass::Trusted);
}

// B3: each pool's settings shape its spec: image and resources.
#[test]
fn b3_specs_carry_the_pool_settings() {
    let mut world = World::new(config(THREE));
    world.settle();
    world.submit(job(1, 10, 0).with_labels(["macos"])).unwrap();
    world.submit(job(2, 10, 0).with_labels(["other"])).unwrap();
    world.collect();
    let specs: Vec<_> = world
        .calls()
        .into_iter()
        .filter_map(|a| match a.call {
            Call::Launch(spec) => Some((a.pool, spec)),
            _ => None,
        })
        .collect();
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[0].0, PoolId(1));
    assert_eq!(specs[0].1.image, "macos");
    assert_eq!(specs[0].1.resources.cpus, 4);
    assert_eq!(specs[0].1.resources.memory_mib, 8192);
    // The default kind: the firecracker pool with the most room (vm-b: 3).
    assert_eq!(specs[1].0, PoolId(3));
    assert_eq!(specs[1].1.image, "/r.ext4");
    assert_eq!(specs[1].1.resources.cpus, 1);
    let info: Vec<_> = world.core.pools().map(|p| p.name.clone()).collect();
    assert_eq!(info, ["linux", "mac", "vm-a", "vm-b"]);
    assert_eq!(world.core.config().deployment().id(), "blue");
    assert_eq!(world.core.settings().orphan_grace, secs(30));
}

// B3: a pinned job is routed to its pool whatever its labels, each time,
// also after jobs of the same labels were routed elsewhere or refused; its
// launch is in that pool.
#[test]
fn b3_a_pinned_job_is_placed_in_its_pool_whatever_its_labels() {
    let mut world = World::new(config(THREE));
    world.settle();
    let linux = || job(1, 1, 0).with_labels(["linux"]);
    assert_eq!(world.core.would_take(&linux()), Ok(()));
    assert_eq!(
        world.core.would_take(&linux().in_pool("nowhere")),
        Err(Refusal::NoPool {
            pool: "nowhere".into()
        })
    );
    world.submit(linux().in_pool("vm-a")).unwrap();
    world
        .submit(job(2, 1, 0).with_labels(["linux"]).in_pool("vm-a"))
        .unwrap();
    world.collect();
    let pools: Vec<PoolId> = world
        .calls()
        .into_iter()
        .filter(|a| matches!(a.call, Call::Launch(_)))
        .map(|a| a.pool)
        .collect();
    assert_eq!(pools, [PoolId(2), PoolId(2)]);
}

// B3: a job no pool could ever take is refused at submission with the
// reason, and nothing is recorded.
#[test]
fn b3_refused_at_submission_records_nothing() {
    let mut world = World::new(config(THREE));
    world.settle();
    let untrusted = Job::new(JobId(1), run(1, 0))
        .with_labels(["macos"])
        .with_trust(TrustClass::Untrusted);
    // Asked beforehand, the core answers the refusal submit gives, and
    // takes nothing.
    let foreseen = world.core.would_take(&untrusted).unwrap_err();
    assert!(matches!(foreseen, Refusal::Trust { .. }), "{foreseen}");
    assert_eq!(
        world.core.would_take(&job(1, 1, 0).with_labels(["macos"])),
        Ok(())
    );
    let refused = world.submit(untrusted).unwrap_err();
    assert_eq!(refused, foreseen);
    // The firecracker pools accept nothing here (trusted only).
    let refused = world
        .submit(Job::new(JobId(2), run(1, 0)).with_labels(["linux"]))
        .unwrap_err();
    assert!(refused.to_string().contains("unknown work"), "{refused}");
    world.collect();
    assert!(world.calls().is_empty());
    assert!(world.log.is_empty());
    let stats = world.core.stats();
    assert_eq!((stats.accepted, stats.refused, stats.queued), (0, 2, 0));
    assert!(!world.core.knows(JobId(1)));
    // The same id may be submitted again once refused.
    world.submit(job(1, 1, 0).with_labels(["macos"])).unwrap();
    assert_eq!(
        world.submit(job(1, 1, 0)).unwrap_err(),
        Refusal::Duplicate { id: 1 }
    );
    assert_eq!(world.core.stats().refused, 3);
}

// B3: when the route's provider is full, the fallback kind's pools take the
// job (most free leases first); a route without fallback waits.
#[test]
fn b3_fallback_when_the_route_provider_is_full() {
    let mut world = World::new(config(THREE));
    world.settle();
    for n in 1..=4 {
        world.submit(job(n, 100, 0).with_labels(["linux"])).unwrap();
    }
    world.settle();
    assert_eq!(placed(&world, 1), Some(PoolId(0)));
    assert_eq!(
        placed(&world, 2),
        Some(PoolId(3)),
        "vm-b has 3 free, vm-a 2"
    );
    assert_eq!(
        placed(&world, 3),
        Some(PoolId(2)),
        "2 free each: vm-a first"
    );
    assert_eq!(placed(&world, 4), Some(PoolId(3)));
    world.submit(job(5, 100, 0).with_labels(["macos"])).unwrap();
    world.submit(job(6, 100, 0).with_labels(["macos"])).unwrap();
    world.settle();
    assert_eq!(placed(&world, 5), Some(PoolId(1)));
    assert_eq!(placed(&world, 6), None, "mac has no fallback: it waits");
    assert_eq!(world.core.stats().pools[1].queued, 1);
}

// B4: launches in flight count against capacity.
#[test]
fn b4_launches_in_flight_count() {
    let mut world = World::new(one_pool(2));
    world.settle();
    for n in 1..=5 {
        world.submit(job(n, 10, 0)).unwrap();
    }
    world.collect();
    let launches = world
        .calls()
        .iter()
        .filter(|a| matches!(a.call, Call::Launch(_)))
        .count();
    assert_eq!(launches, 2);
    let stats = world.core.stats();
    assert_eq!(stats.pools[0].leases, 2);
    assert_eq!(stats.pools[0].launching, 2);
    assert_eq!(stats.queued, 3);
    assert_eq!(world.core.leases(PoolId(0)), 2);
    assert_eq!(world.core.leases(PoolId(7)), 0);
    world.settle();
    let stats = world.core.stats();
    assert_eq!((stats.pools[0].leases, stats.pools[0].launching), (2, 0));
    assert_eq!(world.core.lease_of(JobId(1)), Some(PoolId(0)));
    assert_eq!(world.core.lease_of(JobId(3)), None);
}

// B4: no head-of-line blocking: a job waits only behind jobs that want the
// same pools; among those, first come first served.
#[test]
fn b4_no_head_of_line_blocking_and_fifo_per_target() {
    let yaml = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 1, docker: {image: i}}
  - {name: b, kind: docker, capacity: 1, docker: {image: i}}
routing:
  routes: [{labels: [a], provider: a}, {labels: [b], provider: b}]
";
    let mut world = World::new(config(yaml));
    world.settle();
    world.submit(job(1, 10, 0).with_labels(["a"])).unwrap();
    world.submit(job(2, 10, 0).with_labels(["a"])).unwrap();
    world.submit(job(3, 10, 0).with_labels(["a"])).unwrap();
    world.submit(job(4, 10, 0).with_labels(["b"])).unwrap();
    world.settle();
    assert_eq!(placed(&world, 1), Some(PoolId(0)));
    assert_eq!(
        placed(&world, 4),
        Some(PoolId(1)),
        "b is not blocked by a's queue"
    );
    assert_eq!(placed(&world, 2), None);
    // Job 1 ends: 2 goes before 3.
    world.advance(secs(10));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(placed(&world, 2), Some(PoolId(0)));
    assert_eq!(placed(&world, 3), None);
}

// B5: an answer that leaves the effect unknown keeps the lease and retries
// with a capped backoff; the job keeps its place.
#[test]
fn b5_unknown_effect_retries_with_capped_backoff() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.submit(job(2, 100, 0)).unwrap();
    world.fake.down.insert(0, true);
    world.settle();
    let mut delays = Vec::new();
    for _ in 0..6 {
        let Some(Decision::Retrying {
            job, attempt, at, ..
        }) = world
            .log
            .iter()
            .rev()
            .find(|d| matches!(d, Decision::Retrying { .. }))
            .cloned()
        else {
            panic!("a retry was decided");
        };
        assert_eq!(job, JobId(1));
        delays.push((attempt, at.duration_since(world.now).unwrap().as_secs()));
        world.now = at;
        world.core.handle_timeout(world.now);
        world.settle();
    }
    assert_eq!(delays, [(1, 1), (2, 2), (3, 4), (4, 8), (5, 8), (6, 8)]);
    assert_eq!(world.core.leases(PoolId(0)), 1, "the lease is kept");
    assert_eq!(world.core.stats().pools[0].launching, 1);
    assert_eq!(placed(&world, 2), None, "job 2 still waits behind it");
    assert_eq!(world.fake.count(), 0);
    world.fake.down.insert(0, false);
    world.run_until_idle(secs(1_000));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
}

// B5: a Conflict on a retry means the earlier attempt happened: the instance
// is found and adopted, never launched twice.
#[test]
fn b5_conflict_on_retry_adopts_the_instance() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 100, 7)).unwrap();
    world.collect();
    // The launch reaches the backend, but its answer is lost.
    let launch = world.calls()[0].clone();
    let _lost = world.fake.answer(&launch, world.now);
    world.answer_with(launch.id, Answer::Launched(Err(Error::unavailable("cut"))));
    assert_eq!(world.fake.count(), 1);
    world.advance(secs(1));
    assert_eq!(
        world.count(|d| matches!(d, Decision::Adopted { job: JobId(1), .. })),
        1
    );
    assert_eq!(world.fake.count(), 1, "never launched twice");
    assert_eq!(world.core.stats().adopted, 1);
    world.run_until_idle(secs(1_000));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 7 }));
    assert_eq!(world.fake.count(), 0);
}

// B5: a find that answers nothing after a conflict launches again; a find
// that errors is retried.
#[test]
fn b5_conflict_then_absent_launches_again() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 5, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].id;
    world.answer_with(
        launch,
        Answer::Launched(Err(Error::Conflict {
            name: "job-1.a".into(),
        })),
    );
    let find = world.calls()[0].clone();
    assert_eq!(find.call, Call::Find("job-1.a".into()));
    world.answer_with(
        find.id,
        Answer::Found(Err(Error::inventory_unavailable("x"))),
    );
    world.wait(secs(1));
    let find = world.calls()[0].clone();
    assert_eq!(find.call, Call::Find("job-1.a".into()));
    world.answer_with(find.id, Answer::Found(Ok(None)));
    assert_eq!(world.core.leases(PoolId(0)), 1);
    world.run_until_idle(secs(1_000));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
}

// B5: a refusal or an invalid spec ends the job failed with the reason and
// frees the lease.
#[test]
fn b5_refused_and_invalid_launches_fail_the_job() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 5, 0)).unwrap();
    world
        .submit(Job::new(JobId(2), ["not-run"]).with_trust(TrustClass::Trusted))
        .unwrap();
    world.collect();
    let launch = world.calls()[0].id;
    world.answer_with(
        launch,
        Answer::Launched(Err(Error::Refused {
            trust: TrustClass::Trusted,
            kind: ProviderKind::Docker,
        })),
    );
    let Some(Outcome::Failed {
        reason: FailReason::Refused(why),
    }) = world.outcome(1)
    else {
        panic!("job 1 failed refused: {:?}", world.outcome(1));
    };
    assert!(why.contains("refuses trusted work"), "{why}");
    assert_eq!(placed(&world, 2), Some(PoolId(0)), "the lease was freed");
    world.settle();
    let Some(Outcome::Failed {
        reason: FailReason::Invalid(why),
    }) = world.outcome(2)
    else {
        panic!("job 2 failed invalid: {:?}", world.outcome(2));
    };
    assert!(why.contains("run SECS EXIT"), "{why}");
    assert_eq!(world.core.leases(PoolId(0)), 0);
    assert_eq!(world.core.stats().failed, 2);
    assert!(world.core.is_idle());
}

// B5: a launch whose answer never comes is treated as lost at its deadline
// and retried; its late answer is ignored.
#[test]
fn b5_lost_launch_is_retried_and_late_answers_ignored() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].clone();
    assert_eq!(world.core.poll_timeout(), Some(t0() + secs(5)));
    world.wait(secs(5));
    assert_eq!(world.core.stats().calls_lost, 1);
    assert!(matches!(
        world.log.last(),
        Some(Decision::Retrying { attempt: 1, .. })
    ));
    // The late answer: ignored.
    let late = world.fake.answer(&launch, world.now);
    world.answer_with(launch.id, late);
    assert_eq!(world.count(|d| matches!(d, Decision::Launched { .. })), 0);
    world.pending.clear();
    // The retry meets the instance the lost call left: adopted.
    world.advance(secs(1));
    assert_eq!(world.count(|d| matches!(d, Decision::Adopted { .. })), 1);
    assert_eq!(world.fake.count(), 1);
}

// B6: a stopped instance is destroyed and its job ends finished with the
// exit code; the lease is freed only once the destroy is confirmed.
#[test]
fn b6_stopped_instances_are_destroyed_and_finish() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 15, 3)).unwrap();
    world.settle();
    world.advance(secs(10));
    assert_eq!(world.outcome(1), None, "still running at +10 s");
    world.wait(secs(10));
    // The list shows it stopped: a destroy is asked for.
    let list = world.calls()[0].clone();
    let answer = world.fake.answer(&list, world.now);
    world.answer_with(list.id, answer);
    let destroy = world.calls()[0].clone();
    assert!(matches!(destroy.call, Call::Destroy(_)));
    assert_eq!(
        world.core.leases(PoolId(0)),
        1,
        "not freed before the destroy"
    );
    world.answer_with(destroy.id, Answer::Destroyed(Err(Error::unavailable("x"))));
    assert_eq!(world.core.leases(PoolId(0)), 1, "not freed on an error");
    world.advance(secs(1));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 3 }));
    assert_eq!(world.core.leases(PoolId(0)), 0);
    assert_eq!(world.fake.count(), 0);
    assert_eq!(world.core.stats().finished, 1);
}

// B6: a leased instance absent from an inventory that answered ends failed
// (vanished) and frees its lease; an inventory that errors frees nothing.
#[test]
fn b6_vanished_and_inventory_errors() {
    let mut world = World::new(one_pool(2));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.submit(job(2, 100, 0)).unwrap();
    world.settle();
    world.fake.down.insert(0, true);
    world.fake.pools.get_mut(&0).unwrap().clear();
    world.advance(secs(10));
    assert_eq!(
        world.core.leases(PoolId(0)),
        2,
        "an unreadable inventory frees nothing"
    );
    assert_eq!(world.core.stats().inventory_errors, 1);
    assert!(matches!(
        world.log.last(),
        Some(Decision::InventoryError { pool: PoolId(0), error }) if error.contains("pool down")
    ));
    world.fake.down.insert(0, false);
    world.advance(secs(10));
    assert_eq!(
        world.outcome(1),
        Some(Outcome::Failed {
            reason: FailReason::Vanished
        })
    );
    assert!(world.outcome(2).is_some());
    assert_eq!(world.core.leases(PoolId(0)), 0);
}

// B6: an inventory asked for before a launch was answered cannot show that
// instance: its absence there is not a vanishing.
#[test]
fn b6_a_list_older_than_the_launch_does_not_vanish_it() {
    let mut world = world_with(one_pool(1), 60);
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].clone();
    world.wait(secs(10));
    let list = world
        .calls()
        .into_iter()
        .find(|a| a.call == Call::List)
        .unwrap();
    // The list is answered (empty) after the launch is: a concurrent driver.
    let empty = world.fake.answer(&list, world.now);
    let launched = world.fake.answer(&launch, world.now);
    world.answer_with(launch.id, launched);
    world.answer_with(list.id, empty);
    assert_eq!(world.outcome(1), None);
    assert_eq!(world.core.leases(PoolId(0)), 1);
    world.advance(secs(10));
    assert_eq!(world.outcome(1), None, "the next list shows it running");
}

// B7: an instance no lease holds is an orphan: seen, and destroyed once it
// has been seen for the grace period; counted.
#[test]
fn b7_orphans_are_collected_after_the_grace_period() {
    let mut world = World::new(one_pool(2));
    world.settle();
    world.submit(job(1, 1_000, 0)).unwrap();
    world.settle();
    let stray = world.fake.plant(0, "someone-else", world.now, secs(10_000));
    let late = world.fake.plant(0, "job-99.a", world.now, secs(10_000));
    world.advance(secs(10));
    assert_eq!(
        world.count(|d| matches!(
            d,
            Decision::Orphan {
                fate: OrphanFate::Seen,
                ..
            }
        )),
        2
    );
    assert_eq!(world.core.stats().pools[0].orphans, 2);
    world.advance(secs(10));
    world.advance(secs(10));
    assert_eq!(world.fake.count(), 3, "not before the grace period");
    world.advance(secs(10));
    assert_eq!(world.fake.count(), 1, "collected at +30 s");
    let collected: Vec<InstanceId> = world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Orphan {
                instance,
                fate: OrphanFate::Collected,
                ..
            } => Some(instance.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(collected, [stray, late]);
    assert_eq!(world.core.stats().orphans_collected, 2);
    assert_eq!(world.core.leases(PoolId(0)), 1);
    assert_eq!(world.outcome(1), None);
}

// B7: an orphan named after a job this scheduler knows and has not ended
// (queued) is adopted, not launched again.
#[test]
fn b7_an_orphan_named_after_a_queued_job_is_adopted() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 50, 0)).unwrap();
    world.submit(job(2, 50, 4)).unwrap();
    world.settle();
    let planted = world.fake.plant(0, "job-2.a", world.now, secs(15));
    world.advance(secs(10));
    assert!(world.log.contains(&Decision::Adopted {
        job: JobId(2),
        pool: PoolId(0),
        instance: planted,
    }));
    assert_eq!(world.core.stats().queued, 0);
    // Counted where it runs, whatever the capacity: it exists.
    assert_eq!(world.core.leases(PoolId(0)), 2);
    assert_eq!(world.core.lease_of(JobId(2)), Some(PoolId(0)));
    world.run_until_idle(secs(1_000));
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(
        world.count(|d| matches!(d, Decision::Placed { job: JobId(2), .. })),
        0
    );
    assert_eq!(world.fake.count(), 0);
}

// B7 and B5: an instance left by a launch answered with an error is adopted
// when an inventory shows it while the retry waits.
#[test]
fn b7_an_instance_left_by_an_errored_launch_is_adopted_from_the_inventory() {
    let config = one_pool(1);
    let settings = billet_scheduler::Settings {
        backoff_base: secs(60),
        backoff_cap: secs(60),
        ..settings()
    };
    let mut world = World::over(
        Core::new(config, |_| [false, false, true], settings, t0()),
        Fake::default(),
    );
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].clone();
    let _ = world.fake.answer(&launch, world.now);
    world.answer_with(launch.id, Answer::Launched(Err(Error::unavailable("cut"))));
    world.advance(secs(10));
    assert_eq!(world.count(|d| matches!(d, Decision::Adopted { .. })), 1);
    assert_eq!(world.core.stats().pools[0].launching, 0);
    // The retry no longer fires.
    world.advance(secs(60));
    assert_eq!(world.fake.count(), 1);
}

// B8: a scheduler built over pools that already hold its owner's instances
// counts them before placing anything, and their jobs end with their real
// outcome.
#[test]
fn b8_restart_counts_held_instances_first() {
    let mut fake = Fake::default();
    fake.plant(0, "job-1.a", t0(), secs(15));
    fake.plant(0, "job-2.a", t0(), secs(100));
    let mut world = World::over(core(one_pool(2)), fake);
    // A job submitted before the first inventory answers waits.
    world.submit(job(3, 10, 0)).unwrap();
    world.settle();
    assert_eq!(world.core.stats().learned, 2);
    assert_eq!(world.core.leases(PoolId(0)), 2);
    assert_eq!(world.core.unended(), 3, "two learned and one queued");
    assert_eq!(
        placed(&world, 3),
        None,
        "never over-commits after a restart"
    );
    world.advance(secs(10));
    world.advance(secs(10));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(placed(&world, 3), Some(PoolId(0)));
    assert!(world.core.knows(JobId(2)));
    world.run_until_idle(secs(1_000));
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(world.outcome(3), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(world.fake.count(), 0);
    assert_eq!(world.core.unended(), 0);
}

// B8: a learned job whose instance has stopped ends finished at once; a
// foreign name at start is an orphan, not a job.
#[test]
fn b8_learned_stopped_instances_and_foreign_names() {
    let mut fake = Fake::default();
    fake.plant(0, "job-1.a", t0() - secs(100), secs(10));
    fake.plant(0, "job-01.a", t0(), secs(100));
    let mut world = World::over(core(one_pool(1)), fake);
    world.settle();
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(world.core.stats().pools[0].orphans, 1);
    assert_eq!(world.core.leases(PoolId(0)), 0);
}

// B8: told that every job up to 3 not handed over ended before, a new core
// collects the instances named after jobs 2 and 3 as orphans, adopts job 1's
// (handed over again), and learns job 4's (past the range).
#[test]
fn b8_a_range_of_ended_jobs_is_never_learned() {
    let mut fake = Fake::default();
    fake.plant(0, "job-1.a", t0(), secs(1_000));
    fake.plant(0, "job-2.a", t0(), secs(1_000));
    fake.plant(0, "job-3.a", t0(), secs(1_000));
    fake.plant(0, "job-4.a", t0(), secs(1_000));
    let mut core = core(one_pool(4));
    core.ended_through(JobId(3));
    core.submit(job(1, 1_000, 0), t0()).unwrap();
    let mut world = World::over(core, fake);
    world.settle();
    let orphans: Vec<String> = world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Orphan { name, .. } => Some(name.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(orphans, ["job-2.a", "job-3.a"]);
    assert_eq!(world.core.stats().learned, 1);
    assert!(world.core.knows(JobId(1)) && world.core.knows(JobId(4)));
    assert!(!world.core.knows(JobId(2)) && !world.core.knows(JobId(3)));
}

// B9: cancelling a queued job removes it; a running job's instance is
// destroyed; each ends cancelled exactly once.
#[test]
fn b9_cancel_queued_and_running() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.submit(job(2, 100, 0)).unwrap();
    world.submit(job(3, 100, 0)).unwrap();
    world.settle();
    assert!(world.core.cancel(JobId(2), world.now));
    world.collect();
    assert_eq!(world.outcome(2), Some(Outcome::Cancelled));
    assert!(!world.core.cancel(JobId(2), world.now), "already ended");
    assert!(!world.core.cancel(JobId(9), world.now), "unknown");
    assert!(world.core.cancel(JobId(1), world.now));
    assert!(!world.core.cancel(JobId(1), world.now), "already ending");
    world.collect();
    assert_eq!(world.outcome(1), None, "ends once the destroy is confirmed");
    world.settle();
    assert_eq!(world.outcome(1), Some(Outcome::Cancelled));
    assert_eq!(world.fake.by_name(0, "job-1.a").map(|i| i.id.clone()), None);
    assert_eq!(
        placed(&world, 3),
        Some(PoolId(0)),
        "job 3 skips the cancelled 2"
    );
    assert_eq!(world.core.stats().cancelled, 2);
}

// B9: a cancel while the launch is in flight destroys what the launch makes;
// while a retry waits, the launch is settled by name first.
#[test]
fn b9_cancel_while_launching() {
    let mut world = World::new(one_pool(2));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.submit(job(2, 100, 0)).unwrap();
    world.collect();
    let calls = world.calls();
    world.pending.remove(&calls[1].id);
    assert!(world.core.cancel(JobId(1), world.now));
    let made = world.fake.answer(&calls[0], world.now);
    world.answer_with(calls[0].id, made);
    world.settle();
    assert_eq!(world.outcome(1), Some(Outcome::Cancelled));
    // Job 2: its launch reached the backend, the answer was an error.
    let _ = world.fake.answer(&calls[1], world.now);
    world.answer_with(
        calls[1].id,
        Answer::Launched(Err(Error::unavailable("cut"))),
    );
    assert!(world.core.cancel(JobId(2), world.now));
    world.collect();
    assert_eq!(world.calls()[0].call, Call::Find("job-2.a".into()));
    world.settle();
    assert_eq!(world.outcome(2), Some(Outcome::Cancelled));
    assert_eq!(world.fake.count(), 0);
    // A launch of unknown effect leaves the pool to be listed once more.
    assert!(!world.core.is_idle());
    assert_eq!(world.core.poll_timeout(), Some(t0() + secs(10)));
    world.run_until_idle(secs(100));
    assert!(world.core.is_idle());
    // Idle, it still reconciles every interval (strays are found).
    let next = world.core.poll_timeout().unwrap();
    assert!(next > world.now && next <= world.now + secs(10));
}

// B9: a job's timeout destroys its instance once exceeded.
#[test]
fn b9_timeout_destroys_the_instance() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world
        .submit(job(1, 1_000, 0).with_timeout(secs(25)))
        .unwrap();
    world.settle();
    world.advance(secs(20));
    assert_eq!(world.outcome(1), None);
    assert_eq!(world.core.poll_timeout(), Some(t0() + secs(25)));
    world.advance(secs(5));
    assert_eq!(
        world.outcome(1),
        Some(Outcome::Failed {
            reason: FailReason::TimedOut
        })
    );
    assert_eq!(world.fake.count(), 0);
    assert!(world.core.is_idle());
    // Idle, it still reconciles every interval (strays are found).
    let next = world.core.poll_timeout().unwrap();
    assert!(next > world.now && next <= world.now + secs(10));
}

// B10: the same events in the same order give the same decisions, whatever
// order the inventory answers in.
#[test]
fn b10_same_events_same_decisions() {
    fn run_once(reverse_lists: bool) -> Vec<Decision> {
        let mut world = World::new(config(THREE));
        world.settle();
        for n in 1..=12 {
            let labels = match n % 3 {
                0 => "linux",
                1 => "macos",
                _ => "other",
            };
            world
                .submit(job(n, 5 + n, 0).with_labels([labels]))
                .unwrap();
        }
        for _ in 0..30 {
            world.wait(secs(5));
            world.collect();
            while let Some((id, action)) = world.pending.pop_first() {
                let mut answer = world.fake.answer(&action, world.now);
                if let (true, Answer::Listed(Ok(list))) = (reverse_lists, &mut answer) {
                    list.reverse();
                }
                world.core.handle_answer(id, answer, world.now);
                world.collect();
            }
        }
        world.log
    }
    let first = run_once(false);
    assert!(first.len() > 40);
    assert_eq!(first, run_once(false));
    assert_eq!(first, run_once(true));
}

// B11: per pool capacity, leases held, launches in flight, jobs queued; and
// totals per outcome, readable at any moment.
#[test]
fn b11_stats_while_running() {
    let mut world = World::new(config(THREE));
    world.settle();
    world.submit(job(1, 10, 0).with_labels(["macos"])).unwrap();
    world.submit(job(2, 10, 0).with_labels(["macos"])).unwrap();
    world.collect();
    let stats = world.core.stats();
    let mac = &stats.pools[1];
    assert_eq!(
        (
            mac.name.as_str(),
            mac.kind,
            mac.capacity,
            mac.leases,
            mac.launching,
            mac.queued
        ),
        ("mac", ProviderKind::Tart, 1, 1, 1, 1)
    );
    assert!(mac.ready);
    assert_eq!(stats.leases(), 1);
    assert_eq!((stats.accepted, stats.queued), (2, 1));
    world.run_until_idle(secs(1_000));
    let stats = world.core.stats();
    assert_eq!((stats.finished, stats.ended(), stats.leases()), (2, 2, 0));
}

// B6: a destroy answered `Requested` keeps the lease until an inventory no
// longer shows the instance; one still showing it is asked again.
#[test]
fn b6_requested_teardown_waits_for_the_inventory() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 5, 0)).unwrap();
    world.settle();
    world.wait(secs(10));
    let list = world.calls()[0].clone();
    let answer = world.fake.answer(&list, world.now);
    world.answer_with(list.id, answer);
    let destroy = world.calls()[0].clone();
    world.answer_with(destroy.id, Answer::Destroyed(Ok(Teardown::Requested)));
    assert_eq!(world.core.leases(PoolId(0)), 1);
    // Still listed: asked again.
    world.wait(secs(10));
    let list = world.calls()[0].clone();
    let answer = world.fake.answer(&list, world.now);
    world.answer_with(list.id, answer);
    let again = world.calls()[0].clone();
    assert!(matches!(again.call, Call::Destroy(_)));
    // The backend removes it, answering Requested again; the next list confirms.
    let _ = world.fake.answer(&again, world.now);
    world.answer_with(again.id, Answer::Destroyed(Ok(Teardown::Requested)));
    assert_eq!(world.outcome(1), None);
    world.advance(secs(10));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
}

// B6: an instance reported with a state the core does not expect (pending)
// is running as far as capacity is concerned.
#[test]
fn b6_pending_instances_hold_their_lease() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 5, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].clone();
    let pending = Instance {
        id: "p-1".into(),
        name: "job-1.a".into(),
        owner: "blue".into(),
        kind: ProviderKind::Docker,
        state: State::Pending,
        started_at: t0(),
    };
    world.answer_with(launch.id, Answer::Launched(Ok(pending.clone())));
    world.wait(secs(10));
    let list = world.calls()[0].clone();
    world.answer_with(list.id, Answer::Listed(Ok(vec![pending])));
    assert_eq!(world.outcome(1), None);
    assert_eq!(world.core.leases(PoolId(0)), 1);
}

// B4: first come first served across targets that share a pool: when a pool
// both want frees up, the older head goes first, whatever target it has.
#[test]
fn b4_fcfs_across_targets_sharing_a_pool() {
    let yaml = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 1, docker: {image: i}}
  - {name: v, kind: firecracker, capacity: 1, firecracker: {kernel: /k, rootfs: /r}}
routing:
  routes: [{labels: [a], provider: a, fallback_kind: firecracker}]
  default_kind: firecracker
";
    let mut world = World::new(config(yaml));
    world.settle();
    world.submit(job(1, 1_000, 0).with_labels(["a"])).unwrap();
    world.submit(job(2, 5, 0).with_labels(["a"])).unwrap();
    world.settle();
    assert_eq!(placed(&world, 1), Some(PoolId(0)));
    assert_eq!(placed(&world, 2), Some(PoolId(1)), "the fallback");
    world.submit(job(3, 5, 0)).unwrap();
    world.submit(job(4, 5, 0).with_labels(["a"])).unwrap();
    world.settle();
    world.advance(secs(10));
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(placed(&world, 3), Some(PoolId(1)), "job 3 came first");
    assert_eq!(placed(&world, 4), None);
}

/// A world whose calls time out after `call_timeout`.
fn world_with(config: billet_config::Config, call_timeout: u64) -> World {
    let settings = billet_scheduler::Settings {
        call_timeout: secs(call_timeout),
        ..settings()
    };
    World::over(
        Core::new(config, |_| [false, false, true], settings, t0()),
        Fake::default(),
    )
}

/// The retries decided for `job`: (attempt, delay from `from`).
fn retries(world: &World, job: u64) -> Vec<(u32, u64)> {
    world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Retrying {
                job: j,
                attempt,
                at,
                ..
            } if *j == JobId(job) => Some((*attempt, at.duration_since(t0()).unwrap().as_secs())),
            _ => None,
        })
        .collect()
}

// B5: finds after a conflict back off too, doubling; a find that answers
// nothing leads to a relaunch after the next delay.
#[test]
fn b5_finds_back_off_and_count_attempts() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].id;
    world.answer_with(
        launch,
        Answer::Launched(Err(Error::Conflict {
            name: "job-1.a".into(),
        })),
    );
    for wait in [1, 2] {
        let find = world.calls()[0].id;
        world.answer_with(find, Answer::Found(Err(Error::unavailable("x"))));
        world.wait(secs(wait));
    }
    let find = world.calls()[0].clone();
    assert_eq!(find.call, Call::Find("job-1.a".into()));
    world.answer_with(find.id, Answer::Found(Ok(None)));
    // Launched again after 4 s more.
    assert_eq!(retries(&world, 1), [(1, 1), (2, 3), (3, 7)]);
    world.wait(secs(4));
    assert!(matches!(world.calls()[0].call, Call::Launch(_)));
}

// B6: destroys that error back off, doubling; a destroy answered NotOwned
// ends the job at once (the instance is not this deployment's to wait for).
#[test]
fn b6_destroy_errors_back_off_and_not_owned_ends() {
    let mut world = World::new(one_pool(2));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.submit(job(2, 100, 0)).unwrap();
    world.settle();
    assert!(world.core.cancel(JobId(1), world.now));
    assert!(world.core.cancel(JobId(2), world.now));
    world.collect();
    let calls = world.calls();
    world.answer_with(
        calls[1].id,
        Answer::Destroyed(Err(Error::NotOwned {
            id: "i-2".into(),
            owner: "green".into(),
        })),
    );
    assert_eq!(world.outcome(2), Some(Outcome::Cancelled));
    assert_eq!(world.core.leases(PoolId(0)), 1);
    world.answer_with(calls[0].id, Answer::Destroyed(Err(Error::unavailable("x"))));
    for wait in [1, 2] {
        world.wait(secs(wait));
        let destroy = world.calls()[0].id;
        world.answer_with(destroy, Answer::Destroyed(Err(Error::unavailable("x"))));
    }
    assert_eq!(retries(&world, 1), [(1, 1), (2, 3), (3, 7)]);
    assert_eq!(world.outcome(1), None);
}

// B6: a reconciliation lists every pool, busy or not, and never a pool whose
// list is still in flight.
#[test]
fn b6_reconcile_lists_every_pool_once() {
    let yaml = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 1, docker: {image: i}}
  - {name: b, kind: docker, capacity: 1, docker: {image: i}}
routing: {routes: [{labels: [a], provider: a}], default_kind: docker}
";
    let mut world = world_with(config(yaml), 60);
    world.settle();
    world.submit(job(1, 100, 0).with_labels(["a"])).unwrap();
    world.settle();
    world.wait(secs(10));
    let lists: Vec<PoolId> = world.calls().iter().map(|a| a.pool).collect();
    assert_eq!(lists, [PoolId(0), PoolId(1)], "the idle pool b too");
    // Unanswered, still in flight at the next reconciliation: not asked twice.
    world.wait(secs(10));
    assert_eq!(world.calls().len(), 2);
    world.settle();
    world.wait(secs(10));
    assert_eq!(world.calls().len(), 2);
}

// B6: an inventory asked for when a lost launch's deadline passed shows what
// that launch left; once it has, nothing is left to settle.
#[test]
fn b6_a_list_at_the_deadline_settles_a_lost_launch() {
    let mut world = world_with(one_pool(1), 10);
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.collect();
    assert!(world.core.cancel(JobId(1), world.now));
    world.pending.clear();
    world.wait(secs(10));
    // The lost launch is settled by a find; the reconciliation lists the pool.
    world.settle();
    assert_eq!(world.outcome(1), Some(Outcome::Cancelled));
    assert!(world.core.is_idle());
    // Idle, it still reconciles every interval (strays are found).
    let next = world.core.poll_timeout().unwrap();
    assert!(next > world.now && next <= world.now + secs(10));
}

// B6: a job stopping (its destroy in flight) whose instance an inventory
// older than its launch does not show is not freed; a list that shows it
// while the destroy is in flight asks for no second destroy.
#[test]
fn b6_stopping_jobs_wait_for_their_destroy() {
    let mut world = world_with(one_pool(1), 60);
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.collect();
    let launch = world.calls()[0].clone();
    world.wait(secs(10));
    let list = world
        .calls()
        .into_iter()
        .find(|a| a.call == Call::List)
        .unwrap();
    let empty = world.fake.answer(&list, world.now);
    let launched = world.fake.answer(&launch, world.now);
    world.answer_with(launch.id, launched);
    assert!(world.core.cancel(JobId(1), world.now));
    world.collect();
    world.answer_with(list.id, empty);
    assert_eq!(world.outcome(1), None, "the destroy is not confirmed yet");
    assert_eq!(world.core.leases(PoolId(0)), 1);
    let destroys = |world: &World| {
        world
            .calls()
            .iter()
            .filter(|a| matches!(a.call, Call::Destroy(_)))
            .count()
    };
    assert_eq!(destroys(&world), 1);
    world.wait(secs(10));
    let list = world
        .calls()
        .into_iter()
        .find(|a| a.call == Call::List)
        .unwrap();
    let shown = world.fake.answer(&list, world.now);
    world.answer_with(list.id, shown);
    assert_eq!(
        destroys(&world),
        1,
        "no second destroy while one is in flight"
    );
    // The destroy errors: it waits for its backoff, even when listed again.
    let destroy = world
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Destroy(_)))
        .unwrap();
    world.answer_with(destroy.id, Answer::Destroyed(Err(Error::unavailable("x"))));
    let list_now = |world: &mut World| {
        world.core.handle_timeout(world.now + secs(10));
        world.now += secs(10);
        world.collect();
        let list = world
            .calls()
            .into_iter()
            .find(|a| a.call == Call::List)
            .unwrap();
        let shown = world.fake.answer(&list, world.now);
        world.answer_with(list.id, shown);
    };
    assert_eq!(destroys(&world), 0);
    // Its retry fires first (1 s), at the same handle_timeout; answered
    // Requested, the next list that shows it asks again, once.
    list_now(&mut world);
    let destroy = world
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Destroy(_)))
        .unwrap();
    world.answer_with(destroy.id, Answer::Destroyed(Ok(Teardown::Requested)));
    assert_eq!(destroys(&world), 0);
    list_now(&mut world);
    assert_eq!(destroys(&world), 1);
}

// B7: an instance named for another configured pool is that pool's to judge
// (pools may share one inventory); one named for a pool the configuration
// lacks is an orphan.
#[test]
fn b7_names_for_other_pools() {
    let yaml = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 2, docker: {image: i}}
  - {name: b, kind: docker, capacity: 2, docker: {image: i}}
routing: {default_kind: docker}
";
    let mut fake = Fake::default();
    fake.plant(0, "job-5.b", t0(), secs(1_000));
    fake.plant(0, "job-6.gone", t0(), secs(1_000));
    fake.plant(1, "job-5.b", t0(), secs(1_000));
    let mut world = World::over(core(config(yaml)), fake);
    world.settle();
    let orphans: Vec<String> = world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Orphan { name, pool, .. } => Some(format!("{name}@{pool}")),
            _ => None,
        })
        .collect();
    assert_eq!(orphans, ["job-6.gone@#0"]);
    assert_eq!(world.core.stats().learned, 1);
    assert_eq!(world.core.lease_of(JobId(5)), Some(PoolId(1)));
}

// B7: while a job's launch in this pool is in flight, an instance with its
// name is what that launch makes, not an orphan; one named for a pool where
// the job does not hold its lease is an orphan.
#[test]
fn b7_in_flight_launches_and_leases_elsewhere() {
    let yaml = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 2, docker: {image: i}}
  - {name: b, kind: docker, capacity: 2, docker: {image: i}}
routing: {routes: [{labels: [b], provider: b}], default_kind: docker}
";
    let mut world = world_with(config(yaml), 60);
    world.settle();
    world.submit(job(1, 1_000, 0)).unwrap();
    world.submit(job(2, 1_000, 0).with_labels(["b"])).unwrap();
    world.collect();
    let launches = world.calls();
    // Job 1's launch happens, its answer is slow; job 2 runs in b.
    let made = world.fake.answer(&launches[0], world.now);
    world.pending.remove(&launches[0].id);
    let ran = world.fake.answer(&launches[1], world.now);
    world.answer_with(launches[1].id, ran);
    world.fake.plant(0, "job-2.a", world.now, secs(1_000));
    world.advance(secs(10));
    let orphans: Vec<String> = world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Orphan { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(orphans, ["job-2.a"]);
    world.answer_with(launches[0].id, made);
    assert_eq!(world.outcome(1), None);
    assert_eq!(world.core.stats().pools[0].orphans, 1);
}

// B8: a job learned at start, handed over again by whoever keeps the jobs,
// gets its details back: its timeout counts from its instance's start.
#[test]
fn b8_learned_jobs_take_their_details_back() {
    let mut fake = Fake::default();
    fake.plant(0, "job-1.a", t0() - secs(100), secs(1_000));
    let mut world = World::over(core(one_pool(1)), fake);
    world.settle();
    assert_eq!(world.core.stats().learned, 1);
    world
        .submit(job(1, 1_000, 0).with_timeout(secs(150)))
        .unwrap();
    assert_eq!(world.core.stats().accepted, 1);
    assert_eq!(
        world.submit(job(1, 1_000, 0)).unwrap_err(),
        Refusal::Duplicate { id: 1 },
        "handed over once"
    );
    world.collect();
    assert!(
        world.calls().is_empty(),
        "nothing launched: it runs already"
    );
    world.advance(secs(49));
    assert_eq!(world.outcome(1), None);
    world.advance(secs(1));
    assert_eq!(
        world.outcome(1),
        Some(Outcome::Failed {
            reason: FailReason::TimedOut
        })
    );
    // Without a timeout, a handed-over job just runs on.
    let mut fake = Fake::default();
    fake.plant(0, "job-2.a", t0() - secs(100), secs(150));
    let mut world = World::over(core(one_pool(1)), fake);
    world.settle();
    world.submit(job(2, 1, 0)).unwrap();
    world.run_until_idle(secs(1_000));
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
}

// B6, B7: reconciliation never stops: a stray that appears while nothing
// runs is found at the next interval and collected after its grace period.
#[test]
fn b7_a_stray_that_appears_while_idle_is_collected() {
    let mut world = World::new(one_pool(1));
    world.settle();
    assert!(world.core.is_idle());
    world.fake.plant(0, "stray", world.now, secs(100_000));
    world.advance(secs(10));
    assert_eq!(
        world.count(|d| matches!(
            d,
            Decision::Orphan {
                fate: OrphanFate::Seen,
                ..
            }
        )),
        1
    );
    assert!(!world.core.is_idle());
    world.run_until_idle(secs(1_000));
    assert_eq!(world.fake.count(), 0);
    assert_eq!(world.core.stats().orphans_collected, 1);
    assert!(world.core.is_idle());
}

// B7: an orphan someone else removed first (pools sharing one inventory each
// try) is forgotten, not counted as collected here.
#[test]
fn b7_an_orphan_removed_by_another_is_not_counted() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.fake.plant(0, "stray", world.now, secs(100_000));
    for _ in 0..3 {
        world.advance(secs(10));
    }
    world.wait(secs(10));
    let list = world.calls()[0].clone();
    let shown = world.fake.answer(&list, world.now);
    world.answer_with(list.id, shown);
    let collect = world
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Destroy(_)));
    let Some(collect) = collect else {
        panic!("the orphan is collected after its grace period");
    };
    world.fake.pools.clear();
    world.answer_with(collect.id, Answer::Destroyed(Ok(Teardown::Absent)));
    let stats = world.core.stats();
    assert_eq!((stats.orphans_collected, stats.pools[0].orphans), (0, 0));
    assert_eq!(
        world.count(|d| matches!(
            d,
            Decision::Orphan {
                fate: OrphanFate::Collected,
                ..
            }
        )),
        0
    );
}

// B8: what a new core is handed after a restart: the jobs waiting, in the
// order they were accepted, across targets; placed or ended jobs are not.
#[test]
fn b8_queued_jobs_in_acceptance_order() {
    let mut world = World::new(config(THREE));
    world.settle();
    world.submit(job(1, 100, 0).with_labels(["macos"])).unwrap();
    world.submit(job(7, 100, 0).with_labels(["macos"])).unwrap();
    world.submit(job(3, 100, 0).with_labels(["linux"])).unwrap();
    world.submit(job(5, 100, 0).with_labels(["macos"])).unwrap();
    world.submit(job(2, 100, 0).with_labels(["macos"])).unwrap();
    world.settle();
    assert!(world.core.cancel(JobId(5), world.now));
    let queued: Vec<u64> = world.core.queued_jobs().iter().map(|j| j.id.0).collect();
    assert_eq!(queued, [7, 2]);
    let first = world.core.queued_jobs()[0].clone();
    assert_eq!(first.labels, ["macos"]);
    assert_eq!(first.command, run(100, 0));
}

/// The names of the orphans seen, in order.
fn orphans_seen(world: &World) -> Vec<String> {
    world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Orphan {
                name,
                fate: OrphanFate::Seen,
                ..
            } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

const AB: &str = "
deployment: {id: blue}
providers:
  - {name: a, kind: docker, capacity: 2, docker: {image: i}}
  - {name: b, kind: docker, capacity: 2, docker: {image: i}}
routing: {routes: [{labels: [b], provider: b}], default_kind: docker}
";

// B7: a second instance with a running job's name, in that job's own pool,
// is an orphan: the lease is backed by the first.
#[test]
fn b7_a_duplicate_of_a_running_job_is_an_orphan() {
    let mut world = World::new(one_pool(2));
    world.settle();
    world.submit(job(1, 1_000, 0)).unwrap();
    world.settle();
    world.fake.plant(0, "job-1.a", world.now, secs(1_000));
    world.advance(secs(10));
    assert_eq!(orphans_seen(&world), ["job-1.a"]);
    assert_eq!(world.outcome(1), None);
}

// B7: an instance named for this pool after a job that is stopping, or
// launching, in another pool is an orphan here.
#[test]
fn b7_names_of_jobs_held_elsewhere_are_orphans() {
    let mut world = world_with(config(AB), 60);
    world.settle();
    world.submit(job(1, 1_000, 0).with_labels(["b"])).unwrap();
    world.submit(job(2, 1_000, 0).with_labels(["b"])).unwrap();
    world.collect();
    let launches = world.calls();
    // Job 1 runs in b and is cancelled: its destroy stays in flight.
    let ran = world.fake.answer(&launches[0], world.now);
    world.answer_with(launches[0].id, ran);
    assert!(world.core.cancel(JobId(1), world.now));
    world.collect();
    let destroy = world
        .calls()
        .into_iter()
        .find(|a| matches!(a.call, Call::Destroy(_)));
    let destroy = destroy.unwrap();
    world.pending.remove(&destroy.id);
    // Job 2's launch in b stays in flight.
    world.pending.remove(&launches[1].id);
    world.fake.plant(0, "job-1.a", world.now, secs(1_000));
    world.fake.plant(0, "job-2.a", world.now, secs(1_000));
    world.advance(secs(10));
    assert_eq!(orphans_seen(&world), ["job-1.a", "job-2.a"]);
}

// B4, B7: room an orphan took comes back when it goes, by itself: the job
// waiting for it is placed as soon as the inventory shows it gone.
#[test]
fn b7_room_an_orphan_took_comes_back_when_it_goes() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.fake.plant(0, "stray", world.now, secs(1_000));
    world.advance(secs(10));
    world.submit(job(1, 100, 0)).unwrap();
    world.settle();
    assert_eq!(placed(&world, 1), None, "the orphan holds the only room");
    world.fake.pools.clear();
    world.advance(secs(10));
    assert_eq!(placed(&world, 1), Some(PoolId(0)));
    assert_eq!(world.core.stats().pools[0].orphans, 0);
}

// B7, B9: a queued job adopted from an inventory has its timeout armed from
// the adoption.
#[test]
fn b7_an_adopted_queued_job_keeps_its_timeout() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 1_000, 0)).unwrap();
    world
        .submit(job(2, 1_000, 0).with_timeout(secs(25)))
        .unwrap();
    world.settle();
    world.fake.plant(0, "job-2.a", world.now, secs(1_000));
    world.advance(secs(10));
    assert_eq!(world.core.lease_of(JobId(2)), Some(PoolId(0)));
    world.advance(secs(20));
    assert_eq!(world.outcome(2), None);
    world.advance(secs(5));
    assert_eq!(
        world.outcome(2),
        Some(Outcome::Failed {
            reason: FailReason::TimedOut
        })
    );
}

// B7: a second instance with the name of a job that is stopping, in that
// job's own pool, is an orphan: the lease is backed by the first.
#[test]
fn b7_a_duplicate_of_a_stopping_job_is_an_orphan() {
    let mut world = world_with(one_pool(2), 60);
    world.settle();
    world.submit(job(1, 1_000, 0)).unwrap();
    world.settle();
    assert!(world.core.cancel(JobId(1), world.now));
    world.collect();
    // Its destroy stays in flight.
    world.pending.clear();
    world.fake.plant(0, "job-1.a", world.now, secs(1_000));
    world.advance(secs(10));
    assert_eq!(orphans_seen(&world), ["job-1.a"]);
    assert_eq!(world.outcome(1), None);
}

// B5, B7: a job waiting to retry its launch in one pool adopts only what its
// lost launch made there; an instance named for another pool is an orphan.
#[test]
fn b7_a_retry_adopts_only_from_its_own_pool() {
    let settings = billet_scheduler::Settings {
        backoff_base: secs(60),
        backoff_cap: secs(60),
        ..settings()
    };
    let mut world = World::over(
        Core::new(config(AB), |_| [false, false, true], settings, t0()),
        Fake::default(),
    );
    world.settle();
    world.submit(job(2, 1_000, 0).with_labels(["b"])).unwrap();
    world.collect();
    let launch = world.calls()[0].id;
    world.answer_with(launch, Answer::Launched(Err(Error::unavailable("cut"))));
    world.fake.plant(0, "job-2.a", world.now, secs(1_000));
    world.advance(secs(10));
    assert_eq!(orphans_seen(&world), ["job-2.a"]);
    assert_eq!(world.count(|d| matches!(d, Decision::Adopted { .. })), 0);
    assert_eq!(world.core.lease_of(JobId(2)), Some(PoolId(1)));
    assert_eq!(world.core.stats().pools[1].launching, 1);
}

/// The `OutcomeDecided` decisions of `job`, with their outcomes, in order.
fn endings(world: &World, job: u64) -> Vec<(PoolId, InstanceId, Outcome)> {
    world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::OutcomeDecided {
                job: j,
                pool,
                instance,
                outcome,
            } if *j == JobId(job) => Some((*pool, instance.clone(), outcome.clone())),
            _ => None,
        })
        .collect()
}

// B6 (and L6, which a durable service builds on it): a job's outcome is
// decided, as `OutcomeDecided`, before the destroy of the instance that shows it is
// asked for, once however often that destroy is retried; `Ended` follows with
// the same outcome once the destroy is confirmed.
#[test]
fn b6_the_outcome_is_announced_before_its_instance_is_destroyed() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 15, 3)).unwrap();
    world.settle();
    world.advance(secs(10));
    assert!(endings(&world, 1).is_empty(), "nothing ends while it runs");
    world.wait(secs(10));
    let list = world.calls()[0].clone();
    let answer = world.fake.answer(&list, world.now);
    world.answer_with(list.id, answer);
    let destroy = world.calls()[0].clone();
    let Call::Destroy(instance) = destroy.call.clone() else {
        panic!("a destroy is asked for, not {:?}", destroy.call);
    };
    assert_eq!(
        endings(&world, 1),
        vec![(PoolId(0), instance, Outcome::Finished { exit_code: 3 })],
        "announced with the destroy, before it is answered"
    );
    assert_eq!(world.outcome(1), None, "not ended before the destroy");
    world.answer_with(destroy.id, Answer::Destroyed(Err(Error::unavailable("x"))));
    world.advance(secs(1));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 3 }));
    assert_eq!(
        endings(&world, 1).len(),
        1,
        "a retried destroy is not announced again"
    );
    let ending = world
        .log
        .iter()
        .position(|d| matches!(d, Decision::OutcomeDecided { .. }));
    let ended = world
        .log
        .iter()
        .position(|d| matches!(d, Decision::Ended { .. }));
    assert!(ending < ended, "OutcomeDecided comes before Ended");
}

// B9: cancelling a running job announces `OutcomeDecided` with the cancel before its
// destroy; a queued job has no instance and ends at once, with no `OutcomeDecided`.
#[test]
fn b9_a_cancel_announces_ending_only_for_a_job_with_an_instance() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 100, 0)).unwrap();
    world.submit(job(2, 100, 0)).unwrap();
    world.settle();
    assert!(world.core.cancel(JobId(2), world.now));
    world.collect();
    assert_eq!(world.outcome(2), Some(Outcome::Cancelled));
    assert!(endings(&world, 2).is_empty());
    assert!(world.core.cancel(JobId(1), world.now));
    world.collect();
    let ending = endings(&world, 1);
    assert_eq!(ending.len(), 1);
    assert_eq!(ending[0].2, Outcome::Cancelled);
    assert_eq!(
        world.outcome(1),
        None,
        "not ended before its destroy answers"
    );
    world.settle();
    assert_eq!(world.outcome(1), Some(Outcome::Cancelled));
    assert_eq!(endings(&world, 1).len(), 1);
}

/// Answers the pending list of each pool in `pools`, leaving the others.
fn answer_lists(world: &mut World, pools: &[usize]) {
    for action in world.calls() {
        if matches!(action.call, Call::List) && pools.contains(&action.pool.0) {
            let answer = world.fake.answer(&action, world.now);
            world.answer_with(action.id, answer);
        }
    }
}

// B8: a job handed over after a restart that held a lease on a pool waits,
// and its queue behind it, until that pool's first inventory answers, even
// when a fallback pool has room: its instance there is adopted, never doubled
// on another pool. Jobs of other queues are placed meanwhile.
#[test]
fn b8_a_job_that_held_a_lease_waits_for_its_pool_first_inventory() {
    let mut fake = Fake::default();
    fake.plant(0, "job-1.linux", t0(), secs(100));
    let mut world = World::over(core(config(THREE)), fake);
    world.core.held_before(JobId(1), PoolId(0));
    world.submit(job(1, 100, 0).with_labels(["linux"])).unwrap();
    world.submit(job(2, 100, 0).with_labels(["linux"])).unwrap();
    world.submit(job(3, 100, 0).with_labels(["macos"])).unwrap();
    answer_lists(&mut world, &[1, 2, 3]);
    world.settle_except_lists();
    assert_eq!(
        placed(&world, 1),
        None,
        "not on a fallback pool before linux answers"
    );
    assert_eq!(placed(&world, 2), None, "behind job 1, in its queue");
    assert_eq!(
        placed(&world, 3),
        Some(PoolId(1)),
        "another queue is placed"
    );
    answer_lists(&mut world, &[0]);
    world.settle();
    assert_eq!(
        world.core.lease_of(JobId(1)),
        Some(PoolId(0)),
        "adopted where it ran"
    );
    assert_eq!(
        world.count(|d| matches!(d, Decision::Adopted { job: JobId(1), .. })),
        1
    );
    assert_eq!(placed(&world, 1), None, "adopted, never launched again");
    assert!(matches!(placed(&world, 2), Some(PoolId(2) | PoolId(3))));
    let named = world
        .fake
        .instances(0)
        .into_iter()
        .chain(world.fake.instances(2))
        .chain(world.fake.instances(3))
        .filter(|i| i.name.starts_with("job-1."))
        .count();
    assert_eq!(named, 1, "job 1 runs once");
}

// B8: once its pool has answered without its instance, a job that held a
// lease there is placed like any other; a hint given after that pool's first
// inventory, or naming no pool, changes nothing.
#[test]
fn b8_a_job_whose_instance_is_gone_is_placed_once_its_pool_answered() {
    let mut world = World::new(config(THREE));
    world.core.held_before(JobId(1), PoolId(0));
    world.core.held_before(JobId(9), PoolId(99));
    world.submit(job(1, 100, 0).with_labels(["linux"])).unwrap();
    answer_lists(&mut world, &[1, 2, 3]);
    world.settle_except_lists();
    assert_eq!(placed(&world, 1), None);
    answer_lists(&mut world, &[0]);
    world.settle();
    assert_eq!(
        placed(&world, 1),
        Some(PoolId(0)),
        "its pool has room: placed there"
    );
    world.core.held_before(JobId(2), PoolId(0));
    world.submit(job(2, 100, 0).with_labels(["linux"])).unwrap();
    world.settle();
    assert!(
        matches!(placed(&world, 2), Some(PoolId(2) | PoolId(3))),
        "the hint came after linux answered: ignored"
    );
    world.submit(job(9, 100, 0)).unwrap();
    world.settle();
    assert!(placed(&world, 9).is_some());
}
