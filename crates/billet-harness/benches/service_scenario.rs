//! `service_scenario` (H13): the default fleet scenario (50,000 jobs onto
//! 1,000 leases, three routed pools per deployment, outages, two strays; no
//! restart, which a store in memory cannot survive) through the production
//! scheduler, then through the whole service (`--scheduler service`) with
//! its store in memory and durable, all in one run; and the ratios (the
//! production run 15 times and the in-memory run 5 times, each judged
//! by its fastest, every wall time printed). Goals:
//! the service in memory within 15x of the production scheduler, durable
//! within 5x of memory. Then the commits and `fsync`s per job and per
//! modelled instant with work, beside the latency of one lone commit to a
//! durable store measured in the same run (the floor a commit costs); and
//! the LCG trace whole (188,041 jobs onto 2,000 leases) through the durable
//! service. Goal: under 3 minutes.
//!
//! Under `cargo test --benches` it runs 2,000 jobs onto 100 leases, and the
//! trace's first 2,000 records, once each.
//! Like the fleet example, this binary uses mimalloc.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};

use billet::Store;
use billet::api::NewJob;
use billet::jobs::{Change, JobRecord};
use billet_harness::production::ProductionScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::{Step, Tap};
use billet_harness::service::{ServiceOptions, ServiceScheduler, StoreKind, Submission};
use billet_harness::trace::Trace;
use billet_harness::workload::Job;
use billet_provider::TrustClass;
use support::{full_run, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

/// What a run did, as the bench reads it: the modelled instants at which
/// anything happened (a job arrived or a step changed something), and every
/// placement as (job, deployment, modelled time), in order.
#[derive(Default)]
struct Seen {
    instants: BTreeSet<SystemTime>,
    placed: Vec<(u64, usize, SystemTime)>,
}

impl Tap for Seen {
    fn submitted(&mut self, job: &Job) {
        self.instants.insert(job.submitted_at);
    }
    fn stepped(&mut self, step: &Step, now: SystemTime) {
        if !step.is_empty() {
            self.instants.insert(now);
        }
        for placed in step.placed() {
            self.placed.push((placed.job, placed.deployment, now));
        }
    }
}

/// How many times the production scheduler runs the default scenario.
const PRODUCTION_RUNS: usize = 15;

/// How many times the service with its store in memory runs it.
const MEMORY_RUNS: usize = 5;

/// Wall times, as `1.23s, 1.30s`.
fn walls(walls: &[Duration]) -> String {
    walls
        .iter()
        .map(|w| format!("{:.2}s", w.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn through_service(scenario: &Scenario, store: StoreKind) -> (Report, Seen) {
    let options = ServiceOptions {
        store,
        submission: Submission::Concurrent,
    };
    let mut seen = Seen::default();
    let report = scenario
        .run_tapped(|ctx| ServiceScheduler::new(ctx, options), &mut seen)
        .unwrap_or_else(|f| panic!("{f}"));
    (report, seen)
}

/// The number after `label` in the report's service line.
fn count(report: &Report, label: &str) -> f64 {
    report
        .extra
        .iter()
        .find_map(|line| {
            let (before, _) = line.split_once(label)?;
            before.rsplit(' ').nth(1)?.parse().ok()
        })
        .unwrap_or(f64::NAN)
}

/// A lone commit to a durable store, `n` times: p50 and p99.
fn lone_commit(n: usize) -> (Duration, Duration) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut store, _) = Store::open(dir.path()).expect("a new store");
    let mut took = Vec::with_capacity(n);
    for id in 1..=n as u64 {
        let job = NewJob {
            command: vec!["run-for".to_owned(), "1s".to_owned()],
            labels: Vec::new(),
            trust: TrustClass::Trusted,
            timeout: None,
            key: None,
        };
        let change = Change::Accepted(Box::new(JobRecord::accepted(id, job, SystemTime::now())));
        let started = Instant::now();
        store.commit(&[change]).expect("a commit");
        took.push(started.elapsed());
    }
    took.sort();
    (took[n / 2], took[(n * 99 / 100).min(n - 1)])
}

fn verdict(ratio: f64, goal: f64) -> &'static str {
    if ratio <= goal { "met" } else { "MISSED" }
}

fn main() {
    let jobs = size(50_000, 2_000) as u64;
    let scenario = Scenario::fleet(Fleet {
        jobs,
        concurrency: size(1_000, 100),
        restarts: 0,
        hints: false,
        ..Fleet::production()
    });
    // The two faster runs are made several times and judged by their
    // fastest (the production scheduler's takes a third of a second, so a
    // single run is mostly the machine's noise); every run is printed, and
    // each is held to the differential below. Each run is deterministic:
    // the same placements every time.
    let mut production_walls = Vec::new();
    let mut production = None;
    let mut placed = Seen::default();
    for _ in 0..size(PRODUCTION_RUNS, 1) {
        placed = Seen::default();
        let report = scenario
            .run_tapped(ProductionScheduler::new, &mut placed)
            .unwrap_or_else(|f| panic!("{f}"));
        production_walls.push(report.wall);
        production = Some(report);
    }
    let mut production = production.expect("a production run");
    production.wall = production_walls.iter().copied().min().unwrap_or_default();
    let mut memory_runs = Vec::new();
    for _ in 0..size(MEMORY_RUNS, 1) {
        memory_runs.push(through_service(&scenario, StoreKind::Memory));
    }
    let memory_walls: Vec<Duration> = memory_runs.iter().map(|(r, _)| r.wall).collect();
    for (_, run) in &memory_runs[1..] {
        assert_eq!(
            run.placed, memory_runs[0].1.placed,
            "the memory runs differ"
        );
    }
    let (mut memory, in_memory) = memory_runs.swap_remove(0);
    memory.wall = memory_walls.iter().copied().min().unwrap_or_default();
    println!(
        "walls: production {}; service in memory {} (the fastest of each is judged)",
        walls(&production_walls),
        walls(&memory_walls)
    );
    let (durable, seen) = through_service(&scenario, StoreKind::Durable);
    for report in [&production, &memory, &durable] {
        assert_eq!(report.finished + report.refused, jobs);
    }
    // The differential on the whole scenario (its arrivals never share an
    // instant, so the jobs sent at once are sent in order anyway).
    for (name, run, report) in [
        ("in memory", &in_memory, &memory),
        ("durable", &seen, &durable),
    ] {
        if let Some(k) =
            (0..placed.placed.len()).find(|&k| placed.placed.get(k) != run.placed.get(k))
        {
            panic!(
                "the service {name} placed differently at placement {k}: production {:?}, service {:?}",
                placed.placed.get(k),
                run.placed.get(k)
            );
        }
        assert_eq!(placed.placed.len(), run.placed.len(), "{name}");
        assert_eq!(production.queue_wait, report.queue_wait, "{name}");
    }
    println!(
        "differential: the service (in memory and durable) placed all {} jobs as the production scheduler did (job, deployment, modelled time)",
        placed.placed.len()
    );
    let instants = seen.instants.len();
    println!("{durable}");
    let (p50, p99) = lone_commit(size(500, 5));
    let secs = |r: &Report| r.wall.as_secs_f64();
    let to_memory = secs(&memory) / secs(&production);
    let to_durable = secs(&durable) / secs(&memory);
    println!(
        "default scenario ({jobs} jobs): production {:.2}s, service in memory {:.2}s, service durable {:.2}s",
        secs(&production),
        secs(&memory),
        secs(&durable)
    );
    println!(
        "ratio service (memory) / production: {to_memory:.2}x (goal <= 15x: {})",
        verdict(to_memory, 15.0)
    );
    println!(
        "ratio service (durable) / service (memory): {to_durable:.2}x (goal <= 5x: {})",
        verdict(to_durable, 5.0)
    );
    let commits = count(&durable, "commits (");
    let fsyncs = count(&durable, "fsyncs (");
    println!(
        "durable: {commits} commits and {fsyncs} fsyncs: {:.2} per job, {:.2} per modelled instant with work ({instants} instants)",
        commits / jobs as f64,
        commits / instants.max(1) as f64,
    );
    println!("lone commit to a durable store: p50 {p50:?}, p99 {p99:?}");
    let trace = if full_run() {
        Trace::new(LCG)
    } else {
        Trace::new(LCG).first(2_000)
    };
    let lcg = Scenario::replay(
        trace,
        Fleet {
            concurrency: size(2_000, 100),
            deployments: 1,
            routed: false,
            hints: false,
            ..Fleet::production()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (report, _) = through_service(&lcg, StoreKind::Durable);
    println!("{report}");
    println!(
        "LCG through the durable service: {:.1}s wall (goal < 180s: {})",
        secs(&report),
        verdict(secs(&report), 180.0)
    );
}
