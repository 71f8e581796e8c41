//! `github_scenario` (H14, issue 45): the fleet example's default scenario
//! (50,000 jobs onto 1,000 leases, three routed pools per deployment,
//! outages, a restart, two strays) through the whole service with its store
//! durable, its jobs sent as `POST /v1/jobs` (`--intake http`, the
//! baseline), then as GitHub's deliveries from the simulated GitHub
//! (`--intake github`), in one run: the wall time of each and their ratio
//! (goal <= 2x). Then through GitHub again with 1% of deliveries lost
//! (`--lose 0.01`): runners started per job (goal <= 1.05), API calls per
//! job (goal <= 3), and how long a lost delivery took to be found (goal: p99
//! within one reconcile interval), each read from the run's report.
//!
//! Last, the LCG trace (`data/LCG.swf.gz`, 188,041 jobs) onto one durable
//! deployment of 2,000 leases through `--intake github`, with the restart
//! every fleet has: its wall time (goal < 5 minutes).
//!
//! Under `cargo test --benches` it runs 300 jobs onto 20 leases, once each,
//! and the trace's first 300 records onto 20 leases.
//! Like the fleet example, this binary uses mimalloc.

mod support;

use std::time::{Duration, Instant};

use billet_harness::github::Faults;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::service::{Intake, ServiceOptions, ServiceScheduler, StoreKind};
use support::{full_run, lcg_one_deployment, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The scenario's run through the durable service with `intake`, and its
/// wall time.
fn through(scenario: &Scenario, intake: Intake) -> (Report, Duration) {
    let options = ServiceOptions {
        store: StoreKind::Durable,
        intake,
        ..ServiceOptions::default()
    };
    let started = Instant::now();
    let report = scenario
        .run(|ctx| ServiceScheduler::new(ctx, options))
        .unwrap_or_else(|f| panic!("{f}"));
    (report, started.elapsed())
}

/// The report's line that starts with `prefix` (empty when none).
fn line<'a>(report: &'a Report, prefix: &str) -> &'a str {
    report
        .extra
        .iter()
        .find(|line| line.starts_with(prefix))
        .map_or("", String::as_str)
}

/// The number just before the last `label` in `text` (as in `(1.000 per
/// job)`; an empty `label`: the number that ends `text`).
fn number_before(text: &str, label: &str) -> f64 {
    let split = if label.is_empty() {
        Some((text, ""))
    } else {
        text.rsplit_once(label)
    };
    split
        .and_then(|(before, _)| {
            before
                .rsplit([' ', '('])
                .find(|word| !word.is_empty())?
                .parse()
                .ok()
        })
        .unwrap_or(f64::NAN)
}

/// `met` or `MISSED`, as every bench says a goal.
fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

fn main() {
    let fleet = Fleet {
        jobs: size(50_000, 300) as u64,
        concurrency: size(1_000, 20),
        ..Fleet::production()
    };
    let scenario = Scenario::fleet(fleet);
    let (http, http_wall) = through(&scenario, Intake::Http);
    let (github, github_wall) = through(&scenario, Intake::Github(Faults::default()));
    assert_eq!(
        (http.finished, http.refused),
        (github.finished, github.refused),
        "the same jobs finish and are refused through either intake"
    );
    let ratio = github_wall.as_secs_f64() / http_wall.as_secs_f64();
    println!(
        "github_scenario: {} jobs onto {} leases, durable: --intake http {:.2}s, --intake github {:.2}s",
        fleet.jobs,
        fleet.concurrency,
        http_wall.as_secs_f64(),
        github_wall.as_secs_f64(),
    );
    if full_run() {
        println!(
            "ratio github/http wall: {ratio:.2}x (goal <= 2x: {})",
            verdict(ratio <= 2.0)
        );
    }
    let lossy = Faults {
        lose: 0.01,
        seed: fleet.seed,
        ..Faults::default()
    };
    let (lost, lost_wall) = through(&scenario, Intake::Github(lossy));
    println!(
        "--intake github --lose 0.01: {:.2}s",
        lost_wall.as_secs_f64()
    );
    for prefix in ["github runners: ", "github API: ", "github deliveries: "] {
        println!("  {}", line(&lost, prefix));
    }
    let runners = number_before(line(&lost, "github runners: "), " per job)");
    let calls = number_before(line(&lost, "github API: "), " per job)");
    let deliveries = line(&lost, "github deliveries: ");
    // "..., 35 of 55 within one reconcile interval (60s); ..."
    let counted = deliveries
        .split_once(" within one reconcile")
        .map_or("", |(before, _)| before);
    let found = number_before(counted, "");
    let within = number_before(counted, " of ");
    println!(
        "runners per job: {runners:.3} (goal <= 1.05: {})",
        verdict(runners <= 1.05)
    );
    println!(
        "API calls per job: {calls:.2} (goal <= 3: {})",
        verdict(calls <= 3.0)
    );
    let share = within / found;
    println!(
        "lost deliveries found within one reconcile interval: {within} of {found} ({:.1}%; goal: p99, so >= 99%: {})",
        share * 100.0,
        verdict(share >= 0.99)
    );
    let lcg = lcg_one_deployment(300, 20);
    let (report, wall) = through(&lcg, Intake::Github(Faults::default()));
    for prefix in ["service: ", "github API: "] {
        println!("  {}", line(&report, prefix));
    }
    let goal = if full_run() {
        format!(" (goal < 300s: {})", verdict(wall.as_secs_f64() < 300.0))
    } else {
        String::new()
    };
    println!(
        "LCG through --intake github, durable: {:.1}s wall, {} jobs finished{goal}",
        wall.as_secs_f64(),
        report.finished,
    );
}
