//! H10: the production scheduler against the reference scheduler, where the
//! two must agree: one deployment of one pool, every job on the default route
//! (no labels), the same reconcile interval (a modelled minute), no restart,
//! no stray, no timeout. Then the placements, as (job, deployment, modelled
//! time), and every job's queue wait are equal, job for job, through
//! inventory outages and queues that build and drain.
//!
//! The workloads: generated fleets at three seeds and three loads (under,
//! at and over capacity), and the LCG trace shipped in `data/LCG.swf.gz`. In
//! this debug-mode test the trace is replayed up to its first 20,000 records
//! (onto 500 leases, so its bursts queue); the whole trace (188,041 jobs onto
//! 2,000 leases) is compared the same way by the `production_replay` bench
//! under `cargo bench -p billet-harness --bench production_replay`.

use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::Placements;
use billet_harness::trace::Trace;

const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

/// Runs `scenario` through both schedulers; answers both reports and what
/// each placed.
fn both(scenario: &Scenario) -> [(Report, Placements); 2] {
    let run = |production: bool| {
        let mut tap = Placements::new(scenario.start);
        let report = if production {
            scenario.run_tapped(ProductionScheduler::new, &mut tap)
        } else {
            scenario.run_tapped(ReferenceScheduler::new, &mut tap)
        };
        let report = report.unwrap_or_else(|failure| panic!("{failure}"));
        (report, tap)
    };
    [run(true), run(false)]
}

/// Asserts the two runs placed the same jobs on the same deployments at the
/// same modelled times, with the same queue waits; names the first difference.
fn assert_agree(what: &str, scenario: &Scenario) -> Report {
    let [(production, p), (reference, r)] = both(scenario);
    assert_eq!(production.scheduler, "production");
    assert_eq!(reference.scheduler, "reference");
    assert_eq!(
        p.placed.len(),
        r.placed.len(),
        "{what}: {} placements by the production scheduler, {} by the reference",
        p.placed.len(),
        r.placed.len()
    );
    if let Some(k) = (0..p.placed.len()).find(|&k| p.placed[k] != r.placed[k]) {
        panic!(
            "{what}: placement {k} differs: production {:?}, reference {:?}",
            p.placed[k], r.placed[k]
        );
    }
    if let Some(k) = (0..p.waits.len()).find(|&k| p.waits[k] != r.waits[k]) {
        panic!(
            "{what}: queue wait {k} differs: production {:?}, reference {:?}",
            p.waits[k], r.waits[k]
        );
    }
    assert_eq!(
        (
            production.queue_wait,
            production.peak_queue,
            production.peak_leases
        ),
        (
            reference.queue_wait,
            reference.peak_queue,
            reference.peak_leases
        ),
        "{what}"
    );
    assert_eq!(
        (
            production.submitted,
            production.finished,
            production.refused
        ),
        (reference.submitted, reference.finished, reference.refused),
        "{what}"
    );
    assert_eq!(production.outages_survived, reference.outages_survived);
    production
}

/// One deployment, one pool, no labels, no restart, no stray: where the two
/// schedulers must agree.
fn agreeing(seed: u64, load: f64, jobs: u64, concurrency: usize) -> Scenario {
    Scenario::fleet(Fleet {
        seed,
        jobs,
        concurrency,
        deployments: 1,
        outages: 4,
        load,
        ..Fleet::default()
    })
}

// H10: generated workloads at three seeds and three loads (a queue that
// never builds, one that comes and goes, one that grows), with inventory
// outages: the production scheduler places every job where and when the
// reference does, and every queue wait is the same.
#[test]
fn h10_production_agrees_with_reference_on_generated_workloads() {
    for (seed, load) in [(1, 0.6), (2, 0.97), (3, 1.3)] {
        let scenario = agreeing(seed, load, 3_000, 150);
        let report = assert_agree(&format!("seed {seed}, load {load}"), &scenario);
        assert_eq!(report.finished + report.refused, 3_000);
        assert!(
            report.inventory_errors > 0,
            "the outages were seen: {report}"
        );
        if load > 1.0 {
            assert!(report.peak_queue > 100, "a queue built: {report}");
        }
    }
}

// H10: the LCG trace's first 20,000 records onto 500 leases, through four
// outages: its bursts queue jobs for hours, and the two schedulers still place
// every job at the same modelled time. (The whole trace: the
// `production_replay` bench.)
#[test]
fn h10_production_agrees_with_reference_on_the_lcg_trace() {
    let scenario = Scenario::replay(
        Trace::new(LCG).first(20_000),
        Fleet {
            concurrency: 500,
            deployments: 1,
            outages: 4,
            ..Fleet::default()
        },
    )
    .unwrap();
    let report = assert_agree("LCG, first 20,000 records", &scenario);
    assert_eq!(report.submitted, 20_000);
    assert_eq!(report.finished, 20_000);
    assert!(report.peak_queue > 0, "{report}");
}
