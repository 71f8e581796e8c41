//! `service_scenario` (H13): the default fleet scenario (50,000 jobs onto
//! 1,000 leases, three routed pools per deployment, outages, two strays; no
//! restart, which a store in memory cannot survive) through the production
//! scheduler, then through the whole service (`--scheduler service`) with
//! its store in memory and durable, all in one run; and the ratios (seven
//! rounds, each running the three back to back; each ratio judged by its
//! median over the rounds, every wall time printed). Goals:
//! the service in memory within 15x of the production scheduler, durable
//! within 5x of memory. Then the commits and `fsync`s per job and per
//! modelled instant with work, beside the latency of one lone commit to a
//! durable store measured in the same run (the floor a commit costs), and
//! what durability added per commit against that floor; and
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
use billet::record::NewJob;
use billet::record::{Change, JobRecord};
use billet_harness::production::ProductionScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::{Step, Tap};
use billet_harness::service::{ServiceOptions, ServiceScheduler, StoreKind, Submission};
use billet_harness::workload::Job;
use billet_provider::TrustClass;
use support::{lcg_one_deployment, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// How many rounds of the default scenario: each runs it through the
/// production scheduler, the service in memory and the service durable, in
/// that order, back to back, so that the three see the machine alike.
const ROUNDS: usize = 7;

/// Wall times, as `1.23s, 1.30s`.
fn walls(walls: &[Duration]) -> String {
    walls
        .iter()
        .map(|w| format!("{:.2}s", w.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The median of `values` (the upper one of an even count; NaN for none).
fn median_of(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn through_service(scenario: &Scenario, store: StoreKind) -> (Report, Seen) {
    let options = ServiceOptions {
        store,
        submission: Submission::Concurrent,
        ..ServiceOptions::default()
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
    let dir = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("a temporary directory only its owner may enter (L16)");
    let (mut store, _) = Store::open(dir.path()).expect("a new store");
    let mut took = Vec::with_capacity(n);
    for id in 1..=n as u64 {
        let job = NewJob {
            command: vec!["run-for".to_owned(), "1s".to_owned()],
            labels: Vec::new(),
            trust: TrustClass::Trusted,
            timeout: None,
            key: None,
            pinned: None,
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
    // The three kinds run in rounds, each round taking them back to back,
    // and each ratio is judged by its median over the rounds: a ratio of two
    // runs made at the same moment, so that both sides meet the same
    // machine. The machine is shared and its speed moves by a third from
    // one minute to the next. Judging each kind by its fastest run instead
    // (as the ninth and earlier runs did) favours the short runs: a third of
    // a second is often clean, half a minute never is. That ratio is printed
    // too, not judged, with every wall time. Each run is held to the
    // differential below; each is deterministic: the same placements every
    // time.
    let mut runs: [Vec<(Report, Seen)>; 3] = Default::default();
    for _ in 0..size(ROUNDS, 1) {
        let mut placed = Seen::default();
        let report = scenario
            .run_tapped(ProductionScheduler::new, &mut placed)
            .unwrap_or_else(|f| panic!("{f}"));
        runs[0].push((report, placed));
        runs[1].push(through_service(&scenario, StoreKind::Memory));
        runs[2].push(through_service(&scenario, StoreKind::Durable));
    }
    let [production_runs, memory_runs, durable_runs] = runs;
    let placed = &production_runs[0].1;
    let production = &production_runs[0].0;
    for (name, runs) in [
        ("production", &production_runs),
        ("in memory", &memory_runs),
        ("durable", &durable_runs),
    ] {
        for (report, run) in runs {
            assert_eq!(report.finished + report.refused, jobs, "{name}");
            // The differential on the whole scenario (its arrivals never
            // share an instant, so the jobs sent at once are sent in order
            // anyway).
            if let Some(k) =
                (0..placed.placed.len()).find(|&k| placed.placed.get(k) != run.placed.get(k))
            {
                panic!(
                    "the {name} run placed differently at placement {k}: production {:?}, this run {:?}",
                    placed.placed.get(k),
                    run.placed.get(k)
                );
            }
            assert_eq!(placed.placed.len(), run.placed.len(), "{name}");
            assert_eq!(production.queue_wait, report.queue_wait, "{name}");
        }
    }
    println!(
        "differential: every run of the service (in memory and durable) placed all {} jobs as the production scheduler did (job, deployment, modelled time)",
        placed.placed.len()
    );
    let wall_times = |runs: &[(Report, Seen)]| -> Vec<Duration> {
        runs.iter().map(|(report, _)| report.wall).collect()
    };
    let [production_walls, memory_walls, durable_walls] =
        [&production_runs, &memory_runs, &durable_runs].map(|runs| wall_times(runs));
    println!(
        "walls, by round: production {}; service in memory {}; service durable {}",
        walls(&production_walls),
        walls(&memory_walls),
        walls(&durable_walls)
    );
    let secs = |w: &Duration| w.as_secs_f64();
    // Each round's two ratios, in round order.
    let to_memory: Vec<f64> = memory_walls
        .iter()
        .zip(&production_walls)
        .map(|(m, p)| secs(m) / secs(p))
        .collect();
    let to_durable: Vec<f64> = durable_walls
        .iter()
        .zip(&memory_walls)
        .map(|(d, m)| secs(d) / secs(m))
        .collect();
    let listed = |ratios: &[f64]| {
        ratios
            .iter()
            .map(|r| format!("{r:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "ratios by round: in memory / production {}; durable / in memory {}",
        listed(&to_memory),
        listed(&to_durable)
    );
    let fastest_durable = durable_runs
        .iter()
        .min_by_key(|(report, _)| report.wall)
        .expect("a durable run");
    let (durable, seen) = (&fastest_durable.0, &fastest_durable.1);
    let instants = seen.instants.len();
    println!("{durable}");
    let (p50, p99) = lone_commit(size(500, 5));
    let [p, median_memory, median_durable] = [&production_walls, &memory_walls, &durable_walls]
        .map(|w| median_of(&w.iter().map(secs).collect::<Vec<_>>()));
    println!(
        "default scenario ({jobs} jobs), median of {} rounds: production {p:.2}s, service in memory {median_memory:.2}s, service durable {median_durable:.2}s",
        production_walls.len()
    );
    let (to_memory, to_durable) = (median_of(&to_memory), median_of(&to_durable));
    println!(
        "ratio service (memory) / production: {to_memory:.2}x, the median of the rounds' (goal <= 15x: {})",
        verdict(to_memory, 15.0)
    );
    println!(
        "ratio service (durable) / service (memory): {to_durable:.2}x, the median of the rounds' (goal <= 5x: {})",
        verdict(to_durable, 5.0)
    );
    let fastest = |walls: &[Duration]| walls.iter().copied().min().unwrap_or_default();
    let [p, m, d] = [&production_walls, &memory_walls, &durable_walls].map(|w| secs(&fastest(w)));
    println!(
        "fastest of each, not judged: production {p:.2}s, in memory {m:.2}s ({:.2}x), durable {d:.2}s ({:.2}x)",
        m / p,
        d / m
    );
    let commits = count(durable, "commits (");
    let fsyncs = count(durable, "fsyncs (");
    println!(
        "durable: {commits} commits and {fsyncs} fsyncs: {:.2} per job of the scenario (the report counts per job sent), {:.2} per modelled instant with work ({instants} instants)",
        commits / jobs as f64,
        commits / instants.max(1) as f64,
    );
    println!("lone commit to a durable store: p50 {p50:?}, p99 {p99:?}");
    // What durability adds, per commit, against what one commit costs alone:
    // near 1x, the durable run is at the disk's floor, whatever the ratio.
    let added = (median_durable - median_memory) / commits;
    println!(
        "durable over in memory, median walls: {:.0}µs a commit, {:.2}x a lone commit's p50 (not judged)",
        added * 1e6,
        added / p50.as_secs_f64()
    );
    let lcg = lcg_one_deployment(2_000, 100);
    let (report, _) = through_service(&lcg, StoreKind::Durable);
    println!("{report}");
    println!(
        "LCG through the durable service: {:.1}s wall (goal < 180s: {})",
        secs(&report.wall),
        verdict(secs(&report.wall), 180.0)
    );
}
