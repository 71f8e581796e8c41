//! H14: the harness plays GitHub at fleet scale. Every deployment's service
//! takes its jobs as GitHub's `workflow_job` deliveries from a simulated
//! GitHub on the scenario's clock, which answers the API as GitHub's
//! description says, hands each queued job to whichever idle runner's
//! labels fit, and completes it when its modelled run time has passed.
//!
//! * A fleet of 1,000 leases and 20,000 jobs, 1% of deliveries lost and 1%
//!   repeated, one crash: H10's invariants and H14's hold at every step,
//!   every job billet takes completes once, no registration is left.
//! * Each check of H14 fails when what it guards is broken: faults planted
//!   in the simulated GitHub ([`Plant`]) are caught, each by its check.
//! * Deliveries late and out of order, and the API's outage windows (`503`,
//!   `403` with `Retry-After`): the invariants hold.
//! * The differential: with no loss, no repeat and no restart, a job is
//!   placed on the same deployment at the same modelled time, and waits as
//!   long, as through `POST /v1/jobs`.

use billet_harness::github::{Faults, Plant};
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::Placements;
use billet_harness::service::{Intake, ServiceOptions, ServiceScheduler, StoreKind};

fn options(intake: Intake) -> ServiceOptions {
    ServiceOptions {
        store: StoreKind::Durable,
        intake,
        ..ServiceOptions::default()
    }
}

fn run(scenario: &Scenario, intake: Intake) -> (Report, Placements) {
    let mut tap = Placements::new(scenario.start);
    let options = options(intake);
    let report = scenario
        .run_tapped(|ctx| ServiceScheduler::new(ctx, options), &mut tap)
        .unwrap_or_else(|failure| panic!("{failure}"));
    (report, tap)
}

/// A small fleet's run through GitHub with `plant`: what failed.
fn planted(plant: Plant) -> String {
    planted_on(plant, 20)
}

/// [`planted`] on `concurrency` leases.
fn planted_on(plant: Plant, concurrency: usize) -> String {
    let fleet = Fleet {
        jobs: 300,
        concurrency,
        deployments: 1,
        restarts: 0,
        strays: 0,
        outages: 0,
        hints: false,
        routed: false,
        ..Fleet::production()
    };
    let faults = Faults {
        plant: Some(plant),
        ..Faults::default()
    };
    let options = options(Intake::Github(faults));
    match Scenario::fleet(fleet).run(|ctx| ServiceScheduler::new(ctx, options)) {
        Ok(report) => panic!("{plant:?} was not caught:\n{report}"),
        Err(failure) => failure.to_string(),
    }
}

// H14: a job GitHub hands to two runners is caught (every job runs once).
#[test]
fn h14_a_job_run_twice_is_caught() {
    let failure = planted(Plant::HandTwice);
    assert!(failure.contains("placed job"), "{failure}");
}

// H14: a job GitHub never hands out leaves billet a runner no job takes,
// more than the jobs waiting (G6): caught.
#[test]
fn h14_more_runners_than_jobs_waiting_are_caught() {
    let failure = planted(Plant::StuckJob);
    assert!(failure.contains("runners no job took"), "{failure}");
}

// H14: a runner GitHub never brings online and says is busy when billet
// would remove it (a ghost) idles past its timeout and a reconcile: caught.
#[test]
fn h14_a_runner_idle_past_its_timeout_is_caught() {
    // Few leases: jobs wait the whole run, so the ghost always has one to
    // serve, and G6's check holds while it idles.
    let failure = planted_on(Plant::GhostRunner, 4);
    assert!(failure.contains("past its timeout"), "{failure}");
}

// H14: the harness's books of the runners, checked against the engine's
// leases at every step: books that miss a runner's end are caught.
#[test]
fn h14_books_that_miss_an_end_are_caught() {
    let failure = planted(Plant::MissAnEnd);
    assert!(
        failure.contains("its runners' decisions add up to"),
        "{failure}"
    );
}

// H14: registrations GitHub still holds at the end are caught.
#[test]
fn h14_registrations_left_at_the_end_are_caught() {
    let failure = planted(Plant::KeepRemovedRunners);
    assert!(
        failure.contains("runners registered at GitHub"),
        "{failure}"
    );
}

// H14: a fleet of 1,000 leases over two deployments and 20,000 GitHub
// jobs, 1% of deliveries lost and 1% repeated, and one crash: every
// invariant holds at every step, every job billet takes completes once, no
// registration is left, no job gets more than a few runners of its own, and
// the report says what GitHub saw.
#[test]
fn h14_a_fleet_through_github_survives_lost_and_repeated_deliveries_and_a_crash() {
    let fleet = Fleet {
        jobs: 20_000,
        concurrency: 1_000,
        restarts: 1,
        hints: false,
        ..Fleet::production()
    };
    let faults = Faults {
        lose: 0.01,
        repeat: 0.01,
        seed: 42,
        ..Faults::default()
    };
    let (report, _) = run(&Scenario::fleet(fleet), Intake::Github(faults));
    println!("{report}");
    assert_eq!(report.finished + report.refused, 20_000);
    assert_eq!(report.restarts, 1);
    assert!(report.peak_leases <= 1_000);
    // Loaded to scale: the mac pools (50 leases of each deployment's 500)
    // and the jobs' labels keep the peak short of every lease.
    assert!(report.peak_leases > 800, "{report}");
    let deliveries = line(&report, "github deliveries: ");
    assert!(!deliveries.contains(" 0 lost"), "{deliveries}");
    assert!(!deliveries.contains(" 0 repeated"), "{deliveries}");
    let runners = line(&report, "github runners: ");
    assert!(runners.contains(" registered"), "{runners}");
    let per_job: f64 = runners
        .split_once(" started (")
        .and_then(|(_, rest)| rest.split_once(" per job"))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no runners per job in {runners:?}"));
    assert!(per_job <= 1.05, "{runners}");
    assert!(
        line(&report, "github API: ").contains("per job"),
        "{report}"
    );
}

// H14: deliveries late and out of order, and two windows in which GitHub's
// API answers every call 503, or 403 with Retry-After: every invariant
// holds, every job billet takes completes once and none is cut short (a
// run whose facts the API could not give is asked again, not taken as
// unknown work for good, G4).
#[test]
fn h14_late_deliveries_and_api_outages_keep_every_invariant() {
    let fleet = Fleet {
        jobs: 1_000,
        concurrency: 60,
        restarts: 0,
        hints: false,
        ..Fleet::production()
    };
    let scenario = Scenario::fleet(fleet);
    let faults = Faults {
        lose: 0.01,
        late: 0.05,
        outages: 2,
        span: scenario.workload.span(),
        seed: 7,
        ..Faults::default()
    };
    let (report, _) = run(&scenario, Intake::Github(faults));
    println!("{report}");
    assert_eq!(report.finished + report.refused, 1_000);
    assert_eq!(report.outcomes.cancelled, 0, "{report}");
    let deliveries = line(&report, "github deliveries: ");
    assert!(!deliveries.contains(" 0 late"), "{deliveries}");
    let api = line(&report, "github API: ");
    assert!(!api.contains(" 0 refused in outage windows"), "{api}");
}

// H14: the same seed gives the same digest, a crash included: the new
// engine's start (what it adopts) is over before its intake is ticked, what
// the engine does at an instant by itself before deliveries reach it, the
// intake settles its runners at the tick (deliveries sent together arrive in
// any order), and nothing it reads of the job table is held back.
#[test]
fn h14_the_same_seed_gives_the_same_digest_across_a_crash() {
    let fleet = Fleet {
        jobs: 1_000,
        concurrency: 200,
        deployments: 1,
        restarts: 1,
        strays: 0,
        outages: 0,
        hints: false,
        ..Fleet::production()
    };
    let scenario = Scenario::fleet(fleet);
    let (first, _) = run(&scenario, Intake::Github(Faults::default()));
    let (second, _) = run(&scenario, Intake::Github(Faults::default()));
    assert_eq!(first.restarts, 1);
    assert_eq!(first.digest, second.digest, "{first}\n{second}");
}

/// The line of `report` that starts with `prefix`.
fn line<'a>(report: &'a Report, prefix: &str) -> &'a str {
    report
        .extra
        .iter()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{report}"))
}

// H14: with no fault (no loss, no repeat, no restart, and no inventory
// outage: during one, GitHub's word that a job completed frees its runner's
// lease after a grace, which `POST /v1/jobs` has no way to), the same placements, at the same modelled times, and
// the same queue waits as through `POST /v1/jobs`.
#[test]
fn h14_github_places_as_http_does() {
    let fleet = Fleet {
        jobs: 1_500,
        concurrency: 100,
        restarts: 0,
        strays: 0,
        hints: false,
        routed: false,
        outages: 0,
        ..Fleet::production()
    };
    let scenario = Scenario::fleet(fleet);
    let (http, h) = run(&scenario, Intake::Http);
    let (github, g) = run(&scenario, Intake::Github(Faults::default()));
    if let Some(k) = (0..h.placed.len().min(g.placed.len())).find(|&k| h.placed[k] != g.placed[k]) {
        panic!(
            "placement {k} differs: http {:?}, github {:?}",
            h.placed[k], g.placed[k]
        );
    }
    assert_eq!(h.placed.len(), g.placed.len());
    assert_eq!(h.waits, g.waits);
    assert_eq!(
        (http.finished, http.refused, http.outcomes, http.peak_leases),
        (
            github.finished,
            github.refused,
            github.outcomes,
            github.peak_leases
        ),
    );
    println!("{github}");
    assert!(
        line(&github, "github runners: ").contains("(1.000 per job)"),
        "{github}"
    );
}
