//! `scenario`: the reference scenario of 1,000,000 jobs arriving over a
//! modelled day onto 10,000 concurrent leases (two deployments, three
//! inventory outages), through the harness's reference scheduler. Reports wall
//! time and speed-up (modelled time over wall time: the baseline is real
//! time itself). Goal: under 10 s wall, a speed-up of at least 8,640x.
//!
//! Like the fleet example, this binary uses mimalloc as its allocator.

mod support;

use std::time::Duration;

use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario};
use support::{full_run, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let report = scenario
            .run(ReferenceScheduler::new)
            .expect("the invariants hold");
        walls.push(report.wall);
        last = Some(report);
    }
    let Some(report) = last else { return };
    walls.sort();
    let median = walls[walls.len() / 2];
    let speed_up = report.modelled.as_secs_f64() / median.as_secs_f64();
    println!("{report}");
    if full_run() {
        let wall_ok = if median < Duration::from_secs(10) {
            "met"
        } else {
            "MISSED"
        };
        let speed_ok = if speed_up >= 8_640.0 { "met" } else { "MISSED" };
        println!(
            "scenario: {jobs} jobs, {concurrency} leases: median wall {:.2}s of {runs} runs ({:?}) (goal < 10 s: {wall_ok})",
            median.as_secs_f64(),
            walls
        );
        println!("scenario: speed-up {speed_up:.0}x (goal >= 8640x: {speed_ok})");
    }
}
