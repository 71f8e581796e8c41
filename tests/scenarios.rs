//! Workspace-level scenario tests: a small fleet runs end to end through the
//! reference scheduler and through the production scheduler, and runs are
//! reproducible from their seed.

use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario};

fn smoke(seed: u64) -> Scenario {
    Scenario::fleet(Fleet {
        seed,
        jobs: 1_500,
        concurrency: 60,
        deployments: 2,
        outages: 3,
        ..Fleet::default()
    })
}

// H2, H3, H6: a small fleet scenario runs to the end, every job done, the
// fleet driven to capacity, every outage survived.
#[test]
fn h2_scenario_smoke() {
    let report = smoke(42)
        .run(ReferenceScheduler::new)
        .expect("invariants hold");
    assert_eq!(report.finished + report.refused, 1_500);
    assert_eq!(report.peak_leases, 60);
    assert_eq!(report.outages_survived, 3);
}

// H4: two runs with one seed give one digest; two seeds give two.
#[test]
fn h4_determinism_by_seed() {
    let first = smoke(7).run(ReferenceScheduler::new).unwrap();
    let again = smoke(7).run(ReferenceScheduler::new).unwrap();
    let other = smoke(8).run(ReferenceScheduler::new).unwrap();
    assert_eq!(first.digest, again.digest);
    assert_ne!(first.digest, other.digest);
}

fn production(seed: u64) -> Scenario {
    Scenario::fleet(Fleet {
        seed,
        jobs: 1_500,
        concurrency: 60,
        deployments: 2,
        outages: 3,
        ..Fleet::production()
    })
}

// H10: the production scheduler, one per deployment over three routed pools,
// runs the same kind of fleet to the end through outages, a restart and two
// strays, every invariant kept; and it is reproducible from its seed (H4).
#[test]
fn h10_production_scenario_smoke_and_determinism() {
    let first = production(7)
        .run(ProductionScheduler::new)
        .expect("invariants hold");
    assert_eq!(first.finished + first.refused, 1_500);
    assert_eq!(first.peak_leases, 60);
    assert_eq!((first.restarts, first.orphans_collected), (1, 2));
    let again = production(7).run(ProductionScheduler::new).unwrap();
    let other = production(8).run(ProductionScheduler::new).unwrap();
    assert_eq!(first.digest, again.digest);
    assert_ne!(first.digest, other.digest);
}
