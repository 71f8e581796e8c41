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
//! What limits it is measured too, in two further runs: one counting, through
//! a provider wrapper, how many `list` calls the scheduler makes and how many
//! instances they report (not timed); one replaying with the reference
//! scheduler reconciling every ten modelled minutes instead of every minute
//! (median of three), so a tenth of the lists.
//!
//! Under `cargo test --benches` it replays the first 2,000 records onto 100
//! leases, once. Like the fleet example, this binary uses mimalloc.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::trace::{Trace, TraceJobs};
use billet_provider::{
    Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass,
};
use support::{full_run, size};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

/// A provider that counts the `list` calls made through it and the instances
/// they report, and otherwise passes every call through.
#[derive(Debug)]
struct CountingLists {
    inner: Arc<dyn Provider>,
    lists: Arc<AtomicU64>,
    reported: Arc<AtomicU64>,
}

#[async_trait]
impl Provider for CountingLists {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }
    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        self.inner.accepts(trust)
    }
    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        self.inner.launch(spec).await
    }
    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        self.inner.find(name).await
    }
    async fn list(&self) -> Result<Vec<Instance>, Error> {
        let inventory = self.inner.list().await?;
        self.lists.fetch_add(1, Ordering::Relaxed);
        self.reported
            .fetch_add(inventory.len() as u64, Ordering::Relaxed);
        Ok(inventory)
    }
    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        self.inner.destroy(id).await
    }
}

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
    // What limits it: how many instances the reconciler's lists report...
    let lists = Arc::new(AtomicU64::new(0));
    let reported = Arc::new(AtomicU64::new(0));
    let counted = Scenario::replay(trace.clone(), fleet)
        .expect("the trace opens")
        .run(|mut ctx| {
            for deployment in &mut ctx.deployments {
                deployment.provider = Arc::new(CountingLists {
                    inner: Arc::clone(&deployment.provider),
                    lists: Arc::clone(&lists),
                    reported: Arc::clone(&reported),
                });
            }
            ReferenceScheduler::new(ctx)
        })
        .expect("the invariants hold");
    // ...and what a tenth of the lists costs.
    let tenth = Duration::from_secs(600);
    let mut sparse = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let scenario = Scenario::replay(trace.clone(), fleet).expect("the trace opens");
        scenario
            .run(|ctx| ReferenceScheduler::with_reconcile_every(ctx, tenth))
            .expect("the invariants hold");
        sparse.push(started.elapsed());
    }

    let Some(report) = last else { return };
    assert_eq!(
        counted.digest, report.digest,
        "counting lists changes nothing the scheduler does"
    );
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
        let lists = lists.load(Ordering::Relaxed);
        let reported = reported.load(Ordering::Relaxed);
        let sparse = median(sparse);
        println!(
            "replay: the reconciler made {lists} lists reporting {reported} instances \
             ({:.0} per list); {:.0} ns of replay per instance reported",
            reported as f64 / lists.max(1) as f64,
            wall.as_nanos() as f64 / reported.max(1) as f64
        );
        println!(
            "ratio replay/sparse: {:.3}s / {:.3}s (reconciling every 10 modelled minutes, a tenth of the lists) = {:.1}x",
            wall.as_secs_f64(),
            sparse.as_secs_f64(),
            wall.as_secs_f64() / sparse.as_secs_f64()
        );
    }
}
