//! H13: the whole of `billet serve` (listener, engine, store) driven through
//! the simulated backend at fleet scale, one service per deployment, jobs
//! over HTTP on a manual clock moved only when every service is quiescent.
//!
//! * A fleet of 1,000 leases and 20,000 jobs with one crash, on the durable
//!   store: every invariant of H10 holds at every step, every accepted job
//!   ends once and reads so over HTTP, and the report says what the
//!   recovery did.
//! * The differential: with `--restarts 0 --strays 0`, the service places
//!   the same jobs on the same deployments at the same modelled times, with
//!   the same queue waits, as the production scheduler does, on the default
//!   fleet's shape and on the first 20,000 jobs of the LCG trace. The jobs
//!   of an instant are sent one after another there ([`Submission::Ordered`]):
//!   sent at once, two jobs of one instant that want the last lease take it
//!   in whichever order they reach the service, which is the service's to
//!   choose and not a difference of placement.

use billet_harness::production::ProductionScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::Placements;
use billet_harness::service::{ServiceOptions, ServiceScheduler, StoreKind, Submission};
use billet_harness::trace::Trace;

const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

fn service(store: StoreKind, submission: Submission) -> ServiceOptions {
    ServiceOptions {
        store,
        submission,
        ..ServiceOptions::default()
    }
}

/// Runs `scenario` through the service (with `options`) or the production
/// scheduler; answers the report and what was placed.
fn run(scenario: &Scenario, options: Option<ServiceOptions>) -> (Report, Placements) {
    let mut tap = Placements::new(scenario.start);
    let report = match options {
        Some(options) => scenario.run_tapped(|ctx| ServiceScheduler::new(ctx, options), &mut tap),
        None => scenario.run_tapped(ProductionScheduler::new, &mut tap),
    };
    let report = report.unwrap_or_else(|failure| panic!("{failure}"));
    (report, tap)
}

/// Asserts the service placed as the production scheduler did, naming the
/// first difference; answers the service's report.
fn assert_agree(what: &str, scenario: &Scenario, store: StoreKind) -> Report {
    let (production, p) = run(scenario, None);
    let (service, s) = run(scenario, Some(self::service(store, Submission::Ordered)));
    assert_eq!(service.scheduler, "service");
    if let Some(k) = (0..p.placed.len().min(s.placed.len())).find(|&k| p.placed[k] != s.placed[k]) {
        panic!(
            "{what}: placement {k} differs: production {:?}, service {:?}",
            p.placed[k], s.placed[k]
        );
    }
    assert_eq!(p.placed.len(), s.placed.len(), "{what}: placements");
    assert_eq!(p.waits, s.waits, "{what}: queue waits");
    assert_eq!(
        (
            production.submitted,
            production.finished,
            production.refused,
            production.outcomes,
            production.queue_wait,
            production.peak_leases,
            production.peak_queue,
        ),
        (
            service.submitted,
            service.finished,
            service.refused,
            service.outcomes,
            service.queue_wait,
            service.peak_leases,
            service.peak_queue,
        ),
        "{what}"
    );
    service
}

// H13: 1,000 leases, 20,000 jobs and one crash through the service on its
// durable store: every invariant holds at every step, every job ends once
// and reads so over HTTP, and the recovery is reported.
#[test]
fn h13_a_fleet_through_the_service_survives_a_crash() {
    let fleet = Fleet {
        jobs: 20_000,
        concurrency: 1_000,
        restarts: 1,
        hints: false,
        ..Fleet::production()
    };
    let scenario = Scenario::fleet(fleet);
    let (report, _) = run(
        &scenario,
        Some(service(StoreKind::Durable, Submission::Concurrent)),
    );
    println!("{report}");
    assert_eq!(report.finished + report.refused, 20_000);
    assert_eq!(report.restarts, 1);
    assert_eq!(report.restarts_unsupported, 0);
    assert!(report.peak_leases <= 1_000);
    assert_eq!(report.orphans_collected, 2, "{report}");
    let text = report.to_string();
    assert!(text.contains("service: store durable"), "{text}");
    assert!(text.contains("service HTTP latency (wall): p50"), "{text}");
    let recovery = report
        .extra
        .iter()
        .find(|line| line.starts_with("recovery of deployment"))
        .unwrap_or_else(|| panic!("no recovery line in:\n{text}"));
    assert!(recovery.ends_with("nothing run twice"), "{recovery}");
    assert!(
        report.adopted > 0,
        "the crash left running jobs to adopt: {text}"
    );
}

// H13: a store in memory survives no crash: the restart is said to be
// unsupported, and the run goes on with the service it has.
#[test]
fn h13_a_memory_store_cannot_be_restarted() {
    let fleet = Fleet {
        jobs: 1_000,
        concurrency: 100,
        restarts: 1,
        strays: 0,
        hints: false,
        ..Fleet::production()
    };
    let (report, _) = run(
        &Scenario::fleet(fleet),
        Some(service(StoreKind::Memory, Submission::Concurrent)),
    );
    assert_eq!((report.restarts, report.restarts_unsupported), (0, 1));
    assert_eq!(report.finished + report.refused, 1_000);
    assert!(report.to_string().contains("0 fsyncs"), "{report}");
}

// H13 against H10: the default scenario whole (50,000 jobs onto 1,000
// leases, three routed pools per deployment, labelled jobs, outages) with
// `--restarts 0 --strays 0`: the same placements and queue waits through the
// service as through the production scheduler. The store is in memory, so
// that a debug build runs it in seconds; the `service_scenario` bench holds
// the durable store to the same differential on the same scenario.
#[test]
fn h13_the_service_places_as_the_production_scheduler_on_the_default_fleet() {
    let fleet = Fleet {
        restarts: 0,
        strays: 0,
        hints: false,
        ..Fleet::production()
    };
    assert_eq!(fleet.jobs, 50_000, "the default scenario's jobs");
    let report = assert_agree("default fleet", &Scenario::fleet(fleet), StoreKind::Memory);
    assert_eq!(report.finished + report.refused, 50_000);
}

// H13 against H10 on a recorded workload: the first 20,000 records of the
// LCG trace onto 500 leases through four outages (its bursts queue for
// hours), through the durable store.
#[test]
fn h13_the_service_places_as_the_production_scheduler_on_the_lcg_trace() {
    let scenario = Scenario::replay(
        Trace::new(LCG).first(20_000),
        Fleet {
            concurrency: 500,
            deployments: 1,
            outages: 4,
            restarts: 0,
            strays: 0,
            hints: false,
            ..Fleet::production()
        },
    )
    .unwrap();
    let report = assert_agree("LCG, first 20,000 records", &scenario, StoreKind::Durable);
    assert_eq!(report.submitted, 20_000, "{report}");
    assert!(report.peak_queue > 0, "{report}");
}
