//! `production_scenario`: the reference scenario of `benches/scenario.rs`,
//! 1,000,000 jobs arriving over a modelled day onto 10,000 concurrent leases
//! (two deployments of one pool each, three inventory outages), through the
//! production scheduler (`billet-scheduler`, one per deployment, H10). Three
//! runs, median wall time; then the same scenario through the harness's
//! reference scheduler (three runs), and the ratio. Goal: under 10 s wall.
//!
//! Under `cargo test --benches` it runs 2,000 jobs onto 100 leases, once.
//! Like the fleet example, this binary uses mimalloc.

mod support;

use std::time::{Duration, Instant};

use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::{Scheduler, SchedulerContext};
use support::{full_run, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn measure<S: Scheduler>(
    scenario: &Scenario,
    runs: usize,
    build: impl Fn(SchedulerContext) -> S,
) -> (Report, Duration, Vec<Duration>) {
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let report = scenario.run(&build).unwrap_or_else(|f| panic!("{f}"));
        walls.push(report.wall);
        last = Some(report);
    }
    walls.sort();
    let median = walls[walls.len() / 2];
    (last.expect("at least one run"), median, walls)
}

fn main() {
    let jobs = size(1_000_000, 2_000) as u64;
    let concurrency = size(10_000, 100);
    let scenario = Scenario::fleet(Fleet {
        jobs,
        concurrency,
        load: 0.97,
        arrivals_over: Some(Duration::from_secs(86_400)),
        ..Fleet::default()
    });
    let runs = if full_run() { 3 } else { 1 };
    let started = Instant::now();
    let (report, wall, walls) = measure(&scenario, runs, ProductionScheduler::new);
    println!("{report}");
    assert_eq!(report.finished + report.refused, jobs);
    if !full_run() {
        return;
    }
    let (_, baseline, baselines) = measure(&scenario, runs, ReferenceScheduler::new);
    let verdict = if wall < Duration::from_secs(10) {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "production_scenario: {jobs} jobs, {concurrency} leases: production median wall {:.2}s of {runs} runs ({walls:?}) (goal < 10 s: {verdict})",
        wall.as_secs_f64()
    );
    println!(
        "production_scenario: speed-up {:.0}x",
        report.modelled.as_secs_f64() / wall.as_secs_f64()
    );
    println!(
        "ratio production/reference: {:.2}s / {:.2}s (reference median of {runs}: {baselines:?}) = {:.2}x",
        wall.as_secs_f64(),
        baseline.as_secs_f64(),
        wall.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "production_scenario: {:.0}s in all",
        started.elapsed().as_secs_f64()
    );
}
