//! `status_page`: what the status page's main view (`GET /`) costs with a
//! million ended jobs retained and 100 pools, against a thousand jobs and one
//! pool, in one run (K7, issue 46). Goal: at most 2x at p50.
//!
//! Each size is a fresh durable store filled directly with ended jobs (as the
//! `pages` bench does), under a [`Service`] over that many simulated pools of
//! eight leases each. Every pool's chart is full: an hour of buckets, each
//! with counts of its own (held from 0 to 8, queued from 0 to 19), recorded
//! into the service's history as the engine records its own, on a manual
//! clock moved on by the hour recorded (the service does nothing else
//! meanwhile: no job is submitted). The client, in
//! the same process on one keep-alive connection with a bearer token of the
//! grant `read`, asks the main view `BILLET_BENCH_PAGES` times (2,000 by
//! default), then as many first pages of `/jobs`, the two deployments'
//! requests interleaved (both services run at once) so that both meet the
//! same machine; each answer must be `200` and show every pool (or a full
//! page of jobs). Latency is sent to body read, into an HDR histogram: p50
//! and p99 per size, and their ratio.
//!
//! ```sh
//! cargo bench -p billet --bench status_page
//! ```
//!
//! `cargo test --benches` runs it once with 100 jobs and 1 pool against
//! 2,000 jobs and 10 pools, 50 requests each.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet::Service;
use billet::Store;
use billet::history::{BUCKETS, STEP};
use billet_clock::{Clock, ManualClock};
use billet_config::Config;
use billet_provider::{Provider, ProviderKind};
use billet_scheduler::{PoolStats, Pools, Settings};
use billet_simulated::SimulatedProvider;
use hdrhistogram::Histogram;
use tokio::net::TcpListener;

#[path = "support/store.rs"]
mod store;

const TOKEN: &str = "bench-token-0123456789abcdef0123";
/// Leases of each pool.
const CAPACITY: u32 = 8;

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |text| {
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, not {text:?}"))
    })
}

/// A service over a filled store, and what the bench asks it.
struct Deployment {
    service: Service,
    base: String,
    client: reqwest::Client,
    pools: usize,
    jobs: u64,
    _dir: tempfile::TempDir,
}

/// An hour of counts for every pool, each bucket its own, from the clock's
/// time on; the clock is then an hour on, at the last bucket.
fn fill_history(shared: &billet::engine::Shared, clock: &ManualClock, names: &[String]) {
    let start = shared.now();
    for bucket in 0..BUCKETS as u64 {
        let at = start + STEP * bucket as u32;
        let stats: Vec<PoolStats> = names
            .iter()
            .enumerate()
            .map(|(n, name)| PoolStats {
                name: name.clone(),
                kind: ProviderKind::Docker,
                capacity: CAPACITY,
                leases: ((bucket * 7 + n as u64 * 3) % u64::from(CAPACITY + 1)) as u32,
                launching: 0,
                queued: (bucket * 13 + n as u64 * 5) % 20,
                orphans: 0,
                ready: true,
                contested: 0,
                leftovers: 0,
                unsettled: 0,
            })
            .collect();
        shared.history.record(at, &stats);
    }
    clock
        .advance(STEP * (BUCKETS as u32 - 1))
        .expect("the clock moves on");
}

async fn deploy(jobs: u64, pools: usize) -> Deployment {
    let dir = store::state_dir();
    let (mut store, _) = Store::open(dir.path()).expect("the store opens");
    let started = Instant::now();
    store::fill(&mut store, 1, jobs + 1);
    drop(store);
    eprintln!("  {jobs} jobs written in {:.1?}", started.elapsed());
    let (store, records) = Store::open(dir.path()).expect("the store reopens");
    // A manual clock, so that the service's first counts (recorded at
    // start) are the first of the hour the bench then records, in order.
    let manual = Arc::new(ManualClock::new(
        SystemTime::now() - Duration::from_secs(3_600),
    ));
    let clock: Arc<dyn Clock> = manual.clone();
    let names: Vec<String> = (0..pools).map(|n| format!("pool-{n:03}")).collect();
    let yaml = format!(
        "deployment: {{id: status}}\nproviders:\n{}routing: {{default_kind: docker}}\n",
        names
            .iter()
            .map(|name| format!(
                "  - {{name: {name}, kind: docker, capacity: {CAPACITY}, docker: {{image: img}}}}\n"
            ))
            .collect::<String>()
    );
    let mut builder = Pools::builder(Config::from_yaml_str(&yaml).expect("the configuration"))
        .settings(Settings {
            reconcile_every: Duration::from_secs(3600),
            ..Settings::default()
        });
    for name in &names {
        let provider = SimulatedProvider::builder("status")
            .clock(Arc::clone(&clock))
            .build()
            .expect("a simulated provider");
        builder = builder.provider(name, Arc::new(provider) as Arc<dyn Provider>);
    }
    let pools_built = builder.build().expect("the pools");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let service = Service::start(&pools_built, store, records, clock, TOKEN, listener)
        .await
        .expect("the service starts");
    fill_history(&service.engine_parts().1, &manual, &names);
    let base = format!("http://{}", service.addr());
    Deployment {
        service,
        base,
        client: reqwest::Client::new(),
        pools,
        jobs,
        _dir: dir,
    }
}

/// `GET path` of `deployment` with the bench's token: how long it took, and
/// the body of its `200`.
async fn get(deployment: &Deployment, path: &str) -> (Duration, String) {
    let request = deployment
        .client
        .get(format!("{}{path}", deployment.base))
        .header("Authorization", format!("Bearer {TOKEN}"));
    let sent = Instant::now();
    let response = request.send().await.expect("an answer");
    let status = response.status();
    let body = response.text().await.expect("a body");
    assert_eq!(status, 200, "{body}");
    (sent.elapsed(), body)
}

/// The main view and a page of jobs of each deployment, `requests` times,
/// the deployments' requests interleaved so that both meet the same machine.
async fn measure(
    deployments: &[Deployment],
    requests: u64,
) -> Vec<(Histogram<u64>, Histogram<u64>, usize)> {
    let histogram = || Histogram::<u64>::new(3).expect("a histogram");
    let mut figures: Vec<_> = deployments
        .iter()
        .map(|_| (histogram(), histogram(), 0))
        .collect();
    for _ in 0..requests {
        for (deployment, figures) in deployments.iter().zip(figures.iter_mut()) {
            let (took, body) = get(deployment, "/").await;
            assert_eq!(body.matches("<tr data-pool=").count(), deployment.pools);
            assert_eq!(
                body.matches("<svg class=\"chart\"").count(),
                deployment.pools
            );
            figures.2 = body.len();
            figures.0.record(took.as_micros() as u64).expect("recorded");
        }
    }
    for _ in 0..requests {
        for (deployment, figures) in deployments.iter().zip(figures.iter_mut()) {
            let (took, body) = get(deployment, "/jobs").await;
            let page = deployment.jobs.min(100) as usize;
            assert_eq!(body.matches("<tr data-job=").count(), page);
            figures.1.record(took.as_micros() as u64).expect("recorded");
        }
    }
    figures
}

fn line(what: &str, small: &Histogram<u64>, large: &Histogram<u64>) {
    let p = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{what}: p50 {:.3} ms small, {:.3} ms large ({:.2}x); p99 {:.3} ms, {:.3} ms ({:.2}x)",
        p(small, 0.5),
        p(large, 0.5),
        p(large, 0.5) / p(small, 0.5),
        p(small, 0.99),
        p(large, 0.99),
        p(large, 0.99) / p(small, 0.99),
    );
}

fn main() {
    let (small, large, requests) = if full_run() {
        ((1_000, 1), (1_000_000, 100), 2_000)
    } else {
        ((100, 1), (2_000, 10), 50)
    };
    let requests = env_number("BILLET_BENCH_PAGES", requests);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let figures = runtime.block_on(async {
        let mut deployments = Vec::new();
        for (jobs, pools) in [small, large] {
            eprintln!("status_page: {jobs} ended jobs retained, {pools} pools");
            deployments.push(deploy(jobs, pools).await);
        }
        let figures = measure(&deployments, requests).await;
        for deployment in deployments {
            deployment.service.abort();
        }
        figures
    });
    println!(
        "small: {} jobs, {} pool; large: {} jobs, {} pools; the main view is {} bytes small, {} bytes large",
        small.0, small.1, large.0, large.1, figures[0].2, figures[1].2
    );
    line("GET / (the main view)", &figures[0].0, &figures[1].0);
    line("GET /jobs (a page of 100)", &figures[0].1, &figures[1].1);
}
