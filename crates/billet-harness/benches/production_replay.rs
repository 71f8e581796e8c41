//! `production_replay`: the whole LCG trace shipped in `data/LCG.swf.gz`
//! (188,041 jobs over about 13 modelled days) replayed onto 2,000 leases (two
//! deployments of one pool each, three inventory outages drawn from the
//! seed), through the production scheduler (`billet-scheduler`, one per
//! deployment, H10) and, as its baseline, through the harness's reference
//! scheduler, the same scenario for both. Three runs each, median wall time.
//! Goal: the production scheduler within 1.5x of the reference.
//!
//! A full run also replays the whole trace through both onto 2,000 leases of
//! one deployment, where the two must agree (H10: one pool, default route,
//! one reconcile interval, no restart), and checks that every job is placed
//! at the same modelled time by both (the `differential` test does the same
//! on the trace's first 20,000 records).
//!
//! Under `cargo test --benches` it replays the first 2,000 records onto 100
//! leases, once. Like the fleet example, this binary uses mimalloc.

mod support;

use std::time::{Duration, Instant, SystemTime};

use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::{FleetChange, Scheduler, SchedulerContext, Step, Tap};
use billet_harness::trace::Trace;
use billet_harness::workload::JobId;
use support::{full_run, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

fn median(mut walls: Vec<Duration>) -> Duration {
    walls.sort();
    walls[walls.len() / 2]
}

/// Runs `scenario` `runs` times through the scheduler `build` makes; answers
/// the last report and the median wall time (the scenario's run alone).
fn measure<S: Scheduler>(
    scenario: &Scenario,
    runs: usize,
    build: impl Fn(SchedulerContext) -> S,
) -> (Report, Duration, Vec<Duration>) {
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        let report = scenario.run(&build).unwrap_or_else(|f| panic!("{f}"));
        walls.push(started.elapsed());
        last = Some(report);
    }
    let report = last.expect("at least one run");
    (report, median(walls.clone()), walls)
}

/// Writes down every placement, (job, deployment, modelled time), as the
/// run's tap.
#[derive(Default)]
struct Placements(Vec<(JobId, usize, SystemTime)>);

impl Tap for Placements {
    fn stepped(&mut self, step: &Step, now: SystemTime) {
        for change in &step.changes {
            if let FleetChange::Placed(p) = change {
                self.0.push((p.job, p.deployment, now));
            }
        }
    }
}

fn placements<S: Scheduler>(
    scenario: &Scenario,
    build: impl FnOnce(SchedulerContext) -> S,
) -> (Report, Vec<(JobId, usize, SystemTime)>) {
    let mut tap = Placements::default();
    let report = scenario
        .run_tapped(build, &mut tap)
        .unwrap_or_else(|f| panic!("{f}"));
    (report, tap.0)
}

fn main() {
    let mut trace = Trace::new(LCG);
    if !full_run() {
        trace = trace.first(2_000);
    }
    let concurrency = size(2_000, 100);
    let fleet = Fleet {
        concurrency,
        deployments: 2,
        outages: 3,
        ..Fleet::default()
    };
    let runs = if full_run() { 3 } else { 1 };
    let scenario = Scenario::replay(trace.clone(), fleet).expect("the trace opens");

    let (production, wall, walls) = measure(&scenario, runs, ProductionScheduler::new);
    let (reference, baseline, baselines) = measure(&scenario, runs, ReferenceScheduler::new);
    assert_eq!(production.submitted, reference.submitted);
    assert_eq!(production.finished, production.submitted, "{production}");
    println!("{production}");
    if full_run() {
        let ratio = wall.as_secs_f64() / baseline.as_secs_f64();
        let verdict = if ratio <= 1.5 { "met" } else { "MISSED" };
        println!(
            "production_replay: {} jobs onto {concurrency} leases: production median {:.3}s of {runs} ({walls:?}), reference median {:.3}s ({baselines:?})",
            production.submitted,
            wall.as_secs_f64(),
            baseline.as_secs_f64()
        );
        println!(
            "ratio production/reference: {:.3}s / {:.3}s = {ratio:.2}x (goal <= 1.5x: {verdict})",
            wall.as_secs_f64(),
            baseline.as_secs_f64()
        );
    }

    // H10: where the two must agree, the whole trace places alike.
    let one = Scenario::replay(
        trace,
        Fleet {
            deployments: 1,
            ..fleet
        },
    )
    .expect("the trace opens");
    let (p_report, p) = placements(&one, ProductionScheduler::new);
    let (r_report, r) = placements(&one, ReferenceScheduler::new);
    assert_eq!(p.len(), r.len(), "as many placements");
    if let Some(k) = (0..p.len()).find(|&k| p[k] != r[k]) {
        panic!(
            "placement {k} differs: production {:?}, reference {:?}",
            p[k], r[k]
        );
    }
    assert_eq!(
        (p_report.queue_wait, p_report.peak_queue),
        (r_report.queue_wait, r_report.peak_queue)
    );
    println!(
        "differential: {} placements onto one deployment of {concurrency} leases, equal job for job \
         (job, deployment, modelled time); queue wait p50 {:?}, p99 {:?}, max {:?} in both",
        p.len(),
        p_report.queue_wait.p50,
        p_report.queue_wait.p99,
        p_report.queue_wait.max
    );
}
