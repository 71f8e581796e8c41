//! `retained`: the memory of a service that accepted and ended a million
//! jobs against one that did ten thousand, in one run (L12, issue 26).
//! Goal: at most 64 MiB more. Memory must grow with the jobs not yet ended,
//! not with the jobs ever accepted.
//!
//! Each run is a fresh [`Service`] on a fresh durable store (SQLite under
//! `std::env::temp_dir()`), over one simulated pool of 1,000 leases on the
//! system clock, reconciling every 20 ms, so that a job's end is seen soon
//! after it ends. 64 client tasks in the same process, each on a keep-alive
//! connection of its own, post `{"command": run_for(0), "trust": "trusted"}`
//! until the run's jobs are all accepted; the run ends once every job has
//! ended (`GET /v1/jobs?state=queued` and `?state=running` both empty).
//! Each job is thus accepted, placed, launched, seen stopped, destroyed and
//! ended, as in a fleet.
//!
//! Memory is the heap as the process's allocator counts it (`peak_alloc`,
//! the global allocator of this bench): the peak during each run, the peak
//! reset before it, and what is still allocated after the service stopped.
//! The smaller run goes first, then the larger. Beside it, the process's
//! peak resident set (`VmHWM`), reset to the current one before each run
//! (`/proc/self/clear_refs`, Linux 4.0 and later; "unknown" elsewhere): the
//! figure the goal names, which also counts what the allocator kept of
//! the smaller run and what the runtime and SQLite's page cache hold.
//!
//! ```sh
//! cargo bench -p billet --bench retained
//! BILLET_BENCH_JOBS=10000,200000 cargo bench -p billet --bench retained
//! ```
//!
//! `cargo test --benches` runs it once with 200 and 2,000 jobs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use billet::Service;
use billet::Store;
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{SimulatedProvider, run_for};
use tokio::net::TcpListener;

#[global_allocator]
static ALLOCATOR: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

const TOKEN: &str = "bench-token-0123456789abcdef0123";
const CLIENTS: u64 = 64;

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn sizes() -> Vec<u64> {
    match std::env::var("BILLET_BENCH_JOBS") {
        Ok(text) => text
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("BILLET_BENCH_JOBS takes numbers, not {text:?}"))
            })
            .collect(),
        Err(_) if full_run() => vec![10_000, 1_000_000],
        Err(_) => vec![200, 2_000],
    }
}

struct Run {
    jobs: u64,
    wall: Duration,
    peak: f32,
    after: f32,
    rss: Option<f64>,
}

/// Resets the process's peak resident set to its current one; whether the
/// system allowed it.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set since the last reset, in MiB.
fn peak_rss() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

async fn run(jobs: u64) -> Run {
    // L16: a state directory only its owner may enter.
    let dir = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(std::env::temp_dir())
        .expect("a directory");
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = Arc::new(
        SimulatedProvider::builder("retained")
            .clock(Arc::clone(&clock))
            .build()
            .expect("a simulated provider"),
    );
    let config = Config::from_yaml_str(
        "deployment: {id: retained}\nproviders: [{name: linux, kind: docker, capacity: 1000, docker: {image: img}}]\nrouting: {default_kind: docker}\n",
    )
    .expect("the bench's configuration");
    let pools = Pools::builder(config)
        .provider("linux", provider as Arc<dyn billet_provider::Provider>)
        .settings(Settings {
            reconcile_every: Duration::from_millis(20),
            ..Settings::default()
        })
        .build()
        .expect("the pools");
    ALLOCATOR.reset_peak_usage();
    let rss_reset = reset_peak_rss();
    let (store, records) = Store::open(dir.path()).expect("the store opens");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let service = Service::start(&pools, store, records, clock, TOKEN, listener)
        .await
        .expect("the service starts");
    let base = format!("http://{}", service.addr());
    let body =
        serde_json::json!({"command": run_for(Duration::ZERO), "trust": "trusted"}).to_string();
    let left = Arc::new(AtomicU64::new(jobs));
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (left, body, url) = (Arc::clone(&left), body.clone(), format!("{base}/v1/jobs"));
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            while left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                loop {
                    let answer = client
                        .post(&url)
                        .header("Authorization", format!("Bearer {TOKEN}"))
                        .body(body.clone())
                        .send()
                        .await
                        .expect("an answer");
                    match answer.status().as_u16() {
                        201 => break,
                        // The intake is full: as a client should, again shortly.
                        503 => tokio::time::sleep(Duration::from_millis(5)).await,
                        other => panic!("POST answered {other}"),
                    }
                }
            }
        }));
    }
    for client in clients {
        client.await.expect("a client");
    }
    let client = reqwest::Client::new();
    let unfinished = |state: &'static str| {
        let client = client.clone();
        let url = format!("{base}/v1/jobs?state={state}&limit=1");
        async move {
            let page: serde_json::Value = client
                .get(url)
                .header("Authorization", format!("Bearer {TOKEN}"))
                .send()
                .await
                .expect("an answer")
                .json()
                .await
                .expect("JSON");
            page["jobs"].as_array().map_or(0, Vec::len)
        }
    };
    while unfinished("queued").await + unfinished("running").await > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wall = started.elapsed();
    let peak = ALLOCATOR.peak_usage_as_mb();
    let rss = peak_rss().filter(|_| rss_reset);
    service
        .stop(Duration::from_secs(5))
        .await
        .expect("the service stops");
    let (_, records) = Store::open(dir.path()).expect("the store reopens");
    assert!(records.is_empty(), "every job ended");
    drop(records);
    Run {
        jobs,
        wall,
        peak,
        after: ALLOCATOR.current_usage_as_mb(),
        rss,
    }
}

fn main() {
    let sizes = sizes();
    assert_eq!(sizes.len(), 2, "BILLET_BENCH_JOBS takes two sizes");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let runs: Vec<Run> = sizes
        .iter()
        .map(|&jobs| runtime.block_on(run(jobs)))
        .collect();
    let mib = |rss: Option<f64>| rss.map_or("unknown".to_owned(), |r| format!("{r:.1} MiB"));
    for run in &runs {
        println!(
            "retained: {} jobs accepted and ended in {:.1?} ({:.0} a second): heap peak {:.1} MiB, {:.1} MiB after the stop; peak RSS {}",
            run.jobs,
            run.wall,
            run.jobs as f64 / run.wall.as_secs_f64(),
            run.peak,
            run.after,
            mib(run.rss)
        );
    }
    if let (Some(small), Some(large)) = (runs[0].rss, runs[1].rss) {
        let more = large - small;
        println!(
            "retained: {} jobs against {}: {more:+.1} MiB of peak RSS ({:.2}x; goal at most 64 MiB more: {})",
            runs[1].jobs,
            runs[0].jobs,
            large / small,
            if more <= 64.0 { "met" } else { "MISSED" }
        );
    }
    let more = runs[1].peak - runs[0].peak;
    println!(
        "retained: {} jobs against {}: {more:+.1} MiB of heap at the peak ({:.2}x; goal at most 64 MiB more: {})",
        runs[1].jobs,
        runs[0].jobs,
        runs[1].peak / runs[0].peak,
        if more <= 64.0 { "met" } else { "MISSED" }
    );
}
