//! `pages`: what a page of `GET /v1/jobs` costs with a million ended jobs
//! retained against a thousand, in one run (L12, issue 26). Goal: at most 2x.
//!
//! Each size is a fresh durable store ([`Store::open`] under
//! `std::env::temp_dir()`) filled directly, 10,000 jobs a transaction: every
//! job accepted and ended (one in ten failed, the rest finished), ended a
//! millisecond apart. A [`Service`] is then started on it over one simulated
//! pool, so that the jobs are read as `billet serve` reads them: not in
//! memory, from the store's archive. The client, in the same process on one
//! keep-alive connection, asks `BILLET_BENCH_PAGES` pages (2,000 by default)
//! of `limit=100` at ids spread evenly over the whole table
//! (`after=K*N/pages`), then as many of `state=failed&limit=100`, then as
//! many single jobs (`GET /v1/jobs/{id}`); each request's latency (sent to
//! body read) goes into an HDR histogram, and every answer must be `200`
//! with a full page. The figures: p50 and p99 of each, per size, and the
//! ratio of the large table's to the small one's.
//!
//! Beside them, the store: bytes per retained ended job (the database file
//! after a checkpoint, over the jobs in it); then retention removes the
//! older half and as many new jobs are written and ended: the file's size
//! before and after shows whether the pruned pages were reused.
//!
//! ```sh
//! cargo bench -p billet --bench pages
//! BILLET_BENCH_JOBS=1000,100000 cargo bench -p billet --bench pages
//! ```
//!
//! `cargo test --benches` runs it once with 100 and 5,000 jobs and 50 pages.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use billet::Service;
use billet::Store;
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_scheduler::{Pools, Settings};
use billet_simulated::SimulatedProvider;
use hdrhistogram::Histogram;
use store::{at, fill};
use tokio::net::TcpListener;

#[path = "support/store.rs"]
mod store;

const TOKEN: &str = "bench-token-0123456789abcdef0123";

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn env_list(name: &str, default: &[u64]) -> Vec<u64> {
    match std::env::var(name) {
        Ok(text) => text
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} takes numbers, not {text:?}"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// The database file's size once its WAL is checkpointed into it.
fn file_size(dir: &Path) -> u64 {
    let path = dir.join(billet::store::DATABASE_FILE);
    let conn = rusqlite::Connection::open(&path).expect("the store opens");
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .expect("a checkpoint");
    drop(conn);
    std::fs::metadata(&path).expect("the store's file").len()
}

struct Figures {
    pages: Histogram<u64>,
    failed: Histogram<u64>,
    single: Histogram<u64>,
    bytes_per_job: f64,
}

async fn measure(jobs: u64, pages: u64) -> Figures {
    let dir = store::state_dir();
    let (mut store, _) = Store::open(dir.path()).expect("the store opens");
    let started = Instant::now();
    fill(&mut store, 1, jobs + 1);
    drop(store);
    let bytes_per_job = file_size(dir.path()) as f64 / jobs as f64;
    eprintln!(
        "  {jobs} jobs written in {:.1?} ({bytes_per_job:.0} bytes each)",
        started.elapsed()
    );
    let (store, records) = Store::open(dir.path()).expect("the store reopens");
    assert!(records.is_empty(), "every job has ended");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = Arc::new(
        SimulatedProvider::builder("pages")
            .clock(Arc::clone(&clock))
            .build()
            .expect("a simulated provider"),
    );
    let config = Config::from_yaml_str(
        "deployment: {id: pages}\nproviders: [{name: linux, kind: docker, capacity: 1, docker: {image: img}}]\nrouting: {default_kind: docker}\n",
    )
    .expect("the bench's configuration");
    let pools = Pools::builder(config)
        .provider("linux", provider as Arc<dyn billet_provider::Provider>)
        .settings(Settings {
            reconcile_every: Duration::from_secs(3600),
            ..Settings::default()
        })
        .build()
        .expect("the pools");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let service = Service::start(&pools, store, records, clock, TOKEN, listener)
        .await
        .expect("the service starts");
    let base = format!("http://{}", service.addr());
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let sent = Instant::now();
            let response = client
                .get(url)
                .header("Authorization", format!("Bearer {TOKEN}"))
                .send()
                .await
                .expect("an answer");
            let status = response.status();
            let body: serde_json::Value = response.json().await.expect("JSON");
            assert_eq!(status, 200, "{body}");
            (sent.elapsed(), body)
        }
    };
    let histogram = || Histogram::<u64>::new(3).expect("a histogram");
    let (mut paged, mut failed, mut single) = (histogram(), histogram(), histogram());
    let stride = (jobs.saturating_sub(100) / pages).max(1);
    for k in 0..pages {
        let after = (k * stride) % jobs.saturating_sub(100).max(1);
        let (took, body) = get(format!("/v1/jobs?limit=100&after={after}")).await;
        assert_eq!(body["jobs"].as_array().map(Vec::len), Some(100), "{after}");
        paged.record(took.as_micros() as u64).expect("recorded");
    }
    for k in 0..pages {
        // One job in ten failed: a page of 100 failed jobs spans 1,000 ids.
        let after = (k * stride) % jobs.saturating_sub(1_000).max(1);
        let (took, body) = get(format!("/v1/jobs?state=failed&limit=100&after={after}")).await;
        let shown = body["jobs"].as_array().map_or(0, Vec::len);
        assert!(shown == 100 || jobs < 1_100, "{after}: {shown}");
        failed.record(took.as_micros() as u64).expect("recorded");
    }
    for k in 0..pages {
        let id = 1 + (k * stride) % jobs;
        let (took, body) = get(format!("/v1/jobs/{id}")).await;
        assert_eq!(body["id"], id);
        single.record(took.as_micros() as u64).expect("recorded");
    }
    service
        .stop(Duration::from_secs(5))
        .await
        .expect("the service stops");

    // Retention: the older half goes; as many new jobs are written.
    let before = file_size(dir.path());
    let (mut store, _) = Store::open(dir.path()).expect("the store reopens");
    while !store
        .prune(at(jobs / 2 + 1), 256)
        .expect("pruned")
        .is_empty()
    {}
    fill(&mut store, jobs + 1, jobs + 1 + jobs / 2);
    drop(store);
    let after = file_size(dir.path());
    eprintln!(
        "  retention: the file {before} bytes before half was pruned and as many written again, {after} after ({:+.1}%)",
        (after as f64 - before as f64) * 100.0 / before as f64
    );
    Figures {
        pages: paged,
        failed,
        single,
        bytes_per_job,
    }
}

fn line(what: &str, small: &Histogram<u64>, large: &Histogram<u64>, sizes: (u64, u64)) {
    let p = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{what}: p50 {:.3} ms with {} jobs, {:.3} ms with {} ({:.2}x); p99 {:.3} ms, {:.3} ms ({:.2}x)",
        p(small, 0.5),
        sizes.0,
        p(large, 0.5),
        sizes.1,
        p(large, 0.5) / p(small, 0.5),
        p(small, 0.99),
        p(large, 0.99),
        p(large, 0.99) / p(small, 0.99),
    );
}

fn main() {
    let (sizes, pages) = if full_run() {
        (env_list("BILLET_BENCH_JOBS", &[1_000, 1_000_000]), 2_000)
    } else {
        (vec![1_100, 5_000], 50)
    };
    let pages = env_list("BILLET_BENCH_PAGES", &[pages])[0];
    assert_eq!(sizes.len(), 2, "BILLET_BENCH_JOBS takes two sizes");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut figures = Vec::new();
    for &jobs in &sizes {
        eprintln!("pages: {jobs} ended jobs retained");
        figures.push(runtime.block_on(measure(jobs, pages)));
    }
    let pair = (sizes[0], sizes[1]);
    line(
        "GET /v1/jobs?limit=100",
        &figures[0].pages,
        &figures[1].pages,
        pair,
    );
    line(
        "GET /v1/jobs?state=failed&limit=100",
        &figures[0].failed,
        &figures[1].failed,
        pair,
    );
    line(
        "GET /v1/jobs/{id}",
        &figures[0].single,
        &figures[1].single,
        pair,
    );
    println!(
        "store bytes per retained ended job: {:.0} with {} jobs, {:.0} with {}",
        figures[0].bytes_per_job, sizes[0], figures[1].bytes_per_job, sizes[1]
    );
}
