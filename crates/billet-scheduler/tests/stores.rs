//! The core among several stores (L10), and what never waits for ever
//! (L14): another store's instances, the give-up bound, deadlines kept
//! across restarts.

mod support;

use billet_provider::InstanceId;
use billet_scheduler::{Call, Decision, FailReason, Identity, JobId, OrphanFate, Outcome, PoolId};
use support::*;

fn identity(text: &str) -> Identity {
    Identity::new(text).expect("an identity")
}

fn world_of(capacity: u32, store: &str) -> World {
    World::over(
        core(one_pool(capacity)).with_identity(identity(store)),
        Fake::default(),
    )
}

fn foreign(world: &World) -> Vec<(String, bool)> {
    world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Foreign { name, live, .. } => Some((name.clone(), *live)),
            _ => None,
        })
        .collect()
}

// L10: a store names its instances under its identity, and a job of its own
// is never bound to an instance of the same job under another identity (or
// none): the fresh-store case of issue 27. Leftovers from before it started
// are reported and collected as orphans; a live store's are reported, never
// destroyed, and both count against room.
#[test]
fn l10_another_stores_instances_are_never_adopted() {
    let mut world = world_of(3, "0000000a");
    let before = world.now - secs(60);
    // Another store's job 1, started before this core was made; and an
    // older release's job 1, named without an identity.
    let leftover = world
        .fake
        .plant(0, "0000000b.job-1.a", before, secs(10_000));
    let unnamed = world.fake.plant(0, "job-1.a", before, secs(10_000));
    world.submit(job(1, 5, 0)).unwrap();
    world.settle();
    assert_eq!(world.core.identity(), Some(&identity("0000000a")));
    // Job 1 launched its own instance, under its own name.
    assert_eq!(
        world.core.instance_name(JobId(1), PoolId(0)),
        "0000000a.job-1.a"
    );
    let own = world
        .fake
        .by_name(0, "0000000a.job-1.a")
        .expect("its own instance");
    assert_eq!(own.runs, secs(5));
    assert_eq!(world.count(|d| matches!(d, Decision::Adopted { .. })), 0);
    let mut seen = foreign(&world);
    seen.sort();
    assert_eq!(
        seen,
        [
            ("0000000b.job-1.a".to_owned(), false),
            ("job-1.a".to_owned(), false)
        ]
    );
    let stats = &world.core.stats().pools[0];
    assert_eq!((stats.leftovers, stats.contested, stats.orphans), (2, 0, 2));
    // A second store starts launching while this one runs.
    world.wait(secs(1));
    let live = world
        .fake
        .plant(0, "0000000b.job-2.a", world.now, secs(10_000));
    world.advance(secs(10));
    assert!(foreign(&world).contains(&("0000000b.job-2.a".to_owned(), true)));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
    let stats = &world.core.stats().pools[0];
    assert_eq!(stats.contested, 1);
    // Reported once, not at every inventory.
    world.advance(secs(10));
    assert_eq!(foreign(&world).len(), 3);
    // Room: capacity 3, two leftovers and one live instance: nothing fits.
    world.submit(job(2, 5, 0)).unwrap();
    world.settle();
    assert_eq!(world.core.leases(PoolId(0)), 0, "no room while they stand");
    // After the grace, the leftovers are collected; the live one stays.
    world.advance(secs(10));
    world.advance(secs(10));
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
    let mut expected = vec![leftover, unnamed];
    expected.sort();
    assert_eq!(collected, expected);
    assert!(world.fake.pools[&0].contains_key(&live), "never destroyed");
    world.run_until_idle(secs(600));
    assert!(world.fake.pools[&0].contains_key(&live), "never destroyed");
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(
        world
            .fake
            .by_name(0, "0000000b.job-2.a")
            .map(|i| i.id.clone()),
        Some(live)
    );
    assert!(
        !world
            .log
            .iter()
            .any(|d| matches!(d, Decision::Adopted { .. })),
        "{:?}",
        world.log
    );
}

// L10: a core with no identity (the harness, a store in memory) is the
// reverse: names without one are its own, names with one another store's.
#[test]
fn l10_without_an_identity_named_instances_are_foreign() {
    let mut world = World::new(one_pool(2));
    let before = world.now - secs(1);
    world
        .fake
        .plant(0, "0000000b.job-1.a", before, secs(10_000));
    let old = world.fake.plant(0, "job-2.a", before, secs(10_000));
    world.submit(job(1, 5, 0)).unwrap();
    world.submit(job(2, 5, 0)).unwrap();
    world.settle();
    assert_eq!(world.core.identity(), None);
    assert_eq!(world.core.instance_name(JobId(1), PoolId(0)), "job-1.a");
    assert_eq!(foreign(&world), [("0000000b.job-1.a".to_owned(), false)]);
    let adopted: Vec<InstanceId> = world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Adopted { instance, .. } => Some(instance.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(adopted, [old]);
}

// L10: a store made before identities (layout 1) keeps its earlier jobs'
// instances, named without one, and no later job takes such a name.
#[test]
fn l10_a_store_from_before_identities_keeps_its_old_names() {
    let core = core(one_pool(3))
        .with_identity(identity("0000000a"))
        .with_unnamed_through(JobId(1));
    let mut world = World::over(core, Fake::default());
    let before = world.now - secs(1);
    let first = world.fake.plant(0, "job-1.a", before, secs(10_000));
    world.fake.plant(0, "job-2.a", before, secs(10_000));
    world.submit(job(1, 5, 0)).unwrap();
    world.submit(job(2, 5, 0)).unwrap();
    world.settle();
    let adopted: Vec<(JobId, InstanceId)> = world
        .log
        .iter()
        .filter_map(|d| match d {
            Decision::Adopted { job, instance, .. } => Some((*job, instance.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(adopted, [(JobId(1), first)]);
    assert_eq!(foreign(&world), [("job-2.a".to_owned(), false)]);
    assert!(world.fake.by_name(0, "0000000a.job-2.a").is_some());
}

fn gave_up(outcome: Option<Outcome>) -> String {
    match outcome {
        Some(Outcome::Failed {
            reason: FailReason::GaveUp(why),
        }) => why,
        other => panic!("not given up on: {other:?}"),
    }
}

// L14: a launch whose effect stays unknown is retried for `give_up_after`,
// then its job ends failed saying why; its capacity stays counted until an
// inventory asked for afterwards shows no instance of its name: never an
// over-commit.
#[test]
fn l14_an_unknown_launch_is_given_up_on_without_over_commit() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.fake.down.insert(0, true);
    world.submit(job(1, 5, 0)).unwrap();
    world.settle();
    world.wait(secs(599));
    world.run_until_idle(secs(1));
    assert_eq!(world.outcome(1), None, "not before the bound");
    world.run_until_idle(secs(60));
    let why = gave_up(world.outcome(1));
    assert!(why.starts_with("launching its instance: "), "{why}");
    assert!(
        why.contains("left its effect unknown") && why.contains("pool down"),
        "{why}"
    );
    let stats = &world.core.stats().pools[0];
    assert_eq!((stats.leases, stats.unsettled), (0, 1));
    // The pool comes back holding what the lost launch made after all.
    world.fake.down.insert(0, false);
    world.fake.plant(0, "job-1.a", world.now, secs(10_000));
    world.submit(job(2, 5, 0)).unwrap();
    world.advance(secs(10));
    assert_eq!(
        world.core.leases(PoolId(0)),
        0,
        "no room: job 1's instance stands"
    );
    assert!(world.fake.count() <= 1);
    // Named after an ended job, it is an orphan: collected after the grace,
    // and only once an inventory shows it gone is the room given back.
    world.run_until_idle(secs(600));
    assert_eq!(world.outcome(2), Some(Outcome::Finished { exit_code: 0 }));
    assert_eq!(world.core.stats().pools[0].unsettled, 0);
    assert!(world.fake.count() == 0);
}

// L14: an inventory asked for before a job was given up on settles
// nothing of it: the lost launch may still land after that list was read.
#[test]
fn l14_a_list_from_before_the_give_up_settles_nothing() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.fake.down.insert(0, true);
    world.submit(job(1, 5, 0)).unwrap();
    world.settle();
    world.run_until_idle(secs(590));
    assert_eq!(world.outcome(1), None);
    // A list and a retried launch are asked for; the launch fails first.
    world.wait(secs(15));
    let calls = world.calls();
    assert!(
        calls.iter().any(|a| matches!(a.call, Call::List)),
        "{calls:?}"
    );
    world.answer_only(|call| matches!(call, Call::Launch(_)));
    gave_up(world.outcome(1));
    assert_eq!(world.core.stats().pools[0].unsettled, 1);
    // The list, asked before, answers without the name: still unsettled.
    world.fake.down.insert(0, false);
    world.settle();
    assert_eq!(world.core.stats().pools[0].unsettled, 1);
    // The next one, asked after, settles it.
    world.advance(secs(10));
    assert_eq!(world.core.stats().pools[0].unsettled, 0);
}

// L14: a destroy that keeps failing is given up on too, saying the outcome
// it had; the instance keeps counting until it is gone.
#[test]
fn l14_an_unknown_destroy_is_given_up_on() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.submit(job(1, 5, 3)).unwrap();
    world.settle();
    // The next inventory shows it stopped; every call after it fails.
    world.wait(secs(10));
    world.answer_only(|call| matches!(call, Call::List));
    world.fake.down.insert(0, true);
    assert!(
        world
            .calls()
            .iter()
            .any(|a| matches!(a.call, Call::Destroy(_)))
    );
    world.run_until_idle(secs(700));
    let why = gave_up(world.outcome(1));
    assert!(why.starts_with("destroying its instance: "), "{why}");
    assert!(
        why.ends_with("it had ended finished (exit code 3)"),
        "{why}"
    );
    assert_eq!(world.core.stats().pools[0].unsettled, 1);
    world.fake.down.insert(0, false);
    world.run_until_idle(secs(600));
    assert_eq!(world.core.stats().pools[0].unsettled, 0);
    assert_eq!(world.fake.count(), 0);
}

// L14: an effect that becomes known in time resets nothing it should not:
// a launch that succeeds after failures runs, and a later failure has the
// whole bound again.
#[test]
fn l14_a_settled_launch_is_not_given_up_on() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.fake.down.insert(0, true);
    world.submit(job(1, 2_000, 0)).unwrap();
    world.settle();
    world.run_until_idle(secs(500));
    world.fake.down.insert(0, false);
    world.run_until_idle(secs(100));
    assert!(world.fake.by_name(0, "job-1.a").is_some());
    assert_eq!(world.outcome(1), None);
    world.run_until_idle(secs(3_000));
    assert_eq!(world.outcome(1), Some(Outcome::Finished { exit_code: 0 }));
}

// L14: a job's timeout runs from the start a store knew, not from this
// life's adoption.
#[test]
fn l14_a_timeout_runs_from_the_first_start() {
    let mut world = World::new(one_pool(1));
    let started = world.now - secs(50);
    world.fake.plant(0, "job-1.a", started, secs(10_000));
    world
        .submit(job(1, 10_000, 0).with_timeout(secs(60)))
        .unwrap();
    world.core.started_before(JobId(1), started);
    world.settle();
    assert_eq!(world.count(|d| matches!(d, Decision::Adopted { .. })), 1);
    world.advance(secs(9));
    assert_eq!(world.outcome(1), None);
    world.advance(secs(2));
    assert_eq!(
        world.outcome(1),
        Some(Outcome::Failed {
            reason: FailReason::TimedOut
        })
    );
    // Unknown jobs are ignored.
    world.core.started_before(JobId(9), started);
}

// L14: without a store's start, the timeout runs from the first placement,
// and a later retry of the launch does not restart it.
#[test]
fn l14_a_retried_launch_keeps_its_deadline() {
    let mut world = World::new(one_pool(1));
    world.settle();
    world.fake.down.insert(0, true);
    world
        .submit(job(1, 10_000, 0).with_timeout(secs(30)))
        .unwrap();
    world.settle();
    world.run_until_idle(secs(20));
    world.fake.down.insert(0, false);
    world.run_until_idle(secs(9));
    assert_eq!(world.outcome(1), None);
    world.run_until_idle(secs(30));
    assert_eq!(
        world.outcome(1),
        Some(Outcome::Failed {
            reason: FailReason::TimedOut
        })
    );
}
