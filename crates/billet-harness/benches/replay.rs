//! `replay`: the whole LCG trace shipped in `data/LCG.swf.gz` (188,041 jobs
//! over about 13 modelled days) replayed onto 2,000 leases (two deployments,
//! three inventory outages drawn from the seed), through the harness's
//! reference scheduler. Three runs, median wall time; the speed-up is modelled
//! time over that wall time (real time is its baseline). Goal: under 1 s wall,
//! a speed-up over 1,000,000x.
//!
//! The baseline measured in the same run is reading the trace alone: gunzip,
//! parse every record and build every job, no scheduler, no host (median of
//! three). The ratio says how much of a replay is the scheduling it drives.
//!
//! Under `cargo test --benches` it replays the first 2,000 records onto 100
//! leases, once. Like the fleet example, this binary uses mimalloc.

mod support;

use std::time::{Duration, Instant, SystemTime};

use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::trace::{Trace, TraceJobs};
use support::{full_run, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

fn median(mut walls: Vec<Duration>) -> Duration {
    walls.sort();
    walls[walls.len() / 2]
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

    // Baseline: read the trace into jobs, nothing else.
    let mut reads = Vec::new();
    let mut jobs_read = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let mut jobs = TraceJobs::open(&trace, SystemTime::UNIX_EPOCH).expect("the trace opens");
        let mut n = 0u64;
        while let Some(job) = jobs.next_job().expect("the trace reads") {
            n += 1;
            std::hint::black_box(job);
        }
        reads.push(started.elapsed());
        jobs_read = n;
    }

    // Subject: the whole replay, scenario construction (its outage scan) included.
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        let scenario = Scenario::replay(trace.clone(), fleet).expect("the trace opens");
        let report = scenario
            .run(ReferenceScheduler::new)
            .expect("the invariants hold");
        walls.push(started.elapsed());
        last = Some(report);
    }
    let Some(report) = last else { return };
    let read = median(reads);
    let wall = median(walls.clone());
    let speed_up = report.modelled.as_secs_f64() / wall.as_secs_f64();
    println!("{report}");
    if full_run() {
        let wall_ok = if wall < Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        };
        let speed_ok = if speed_up > 1_000_000.0 {
            "met"
        } else {
            "MISSED"
        };
        println!(
            "replay: {} jobs onto {concurrency} leases: median wall {:.3}s of {runs} runs ({walls:?}) (goal < 1 s: {wall_ok})",
            report.submitted,
            wall.as_secs_f64()
        );
        println!("replay: speed-up {speed_up:.0}x (goal > 1000000x: {speed_ok})");
        println!(
            "ratio replay/read: {:.3}s / {:.3}s (reading {jobs_read} jobs alone) = {:.1}x",
            wall.as_secs_f64(),
            read.as_secs_f64(),
            wall.as_secs_f64() / read.as_secs_f64()
        );
    }
}
