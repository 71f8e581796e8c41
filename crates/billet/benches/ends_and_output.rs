//! `ends_and_output`: issue 28's two measures on a real docker daemon, each
//! through a [`Service`] in this process over one docker pool, its output
//! captured as `billet serve` captures it ([`Capturing`]).
//!
//! * **Ends** (B12, D16): jobs of `sleep 1`, all submitted at once, the
//!   inventory read every 60 s. For each, the time from its container's
//!   exit (the daemon's `die` event, its own nanosecond time) to the job's
//!   `ended_at` (its outcome committed, the container removed, the lease
//!   free again), with the daemon's events as hints and without, in the
//!   same run. Goal with hints: p50 <= 200 ms, p99 <= 1 s.
//! * **Capture** (L15): one job writing 256 MiB (no newline, so the daemon
//!   logs it in 16 KiB pieces): bytes captured a second (from the job's
//!   start to its end), this process's CPU per MiB captured (user and
//!   system, from `/proc/self/stat`), and its peak resident memory during
//!   the job against the idle service's just before. Goal: at most 16 MiB
//!   more.
//!
//! ```sh
//! cargo bench -p billet --bench ends_and_output
//! ```
//!
//! `cargo test --benches` runs it once small: 3 jobs (without hints, the
//! inventory then read every 2 s) and 1 MiB of output. Without a docker
//! daemon it says so in one line and measures nothing (with
//! `BILLET_DOCKER_REQUIRED=1`, a failure).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet::engine::Bounds;
use billet::output::{Capturing, OutputStore};
use billet::{Limits, Service, Store};
use billet_clock::SystemClock;
use billet_config::Config;
use billet_scheduler::{Pools, Settings};
use bollard::query_parameters::EventsOptionsBuilder;
use futures::StreamExt;
use serde_json::{Value, json};
use support::{Pool, docker_config, unique_id};
use tokio::net::TcpListener;

const TOKEN: &str = "bench-token-0123456789abcdef0123";

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// A service over one docker pool of `capacity`, its store and output in
/// `dir`.
async fn service(
    owner: &str,
    dir: &std::path::Path,
    capacity: u32,
    reconcile_every: Duration,
    hints: bool,
    output_limit: u64,
) -> Service {
    let yaml = docker_config(
        owner,
        &Pool {
            capacity,
            endpoint: support::daemon_endpoint(),
        },
    );
    let config = Config::from_yaml_str(&yaml).expect("the bench's configuration");
    let providers = billet::backends::build(&config, Duration::from_secs(30), Some(output_limit))
        .expect("the docker pool")
        .named;
    let (store, records) = Store::open(&dir.join("state")).expect("the store opens");
    let output = Arc::new(
        OutputStore::open(&dir.join("state"), store.identity(), output_limit)
            .expect("the output directory"),
    );
    let mut builder = Pools::builder(config).settings(Settings {
        reconcile_every,
        ..Settings::default()
    });
    for (name, provider) in providers {
        let capturing: Arc<dyn billet_provider::Provider> =
            Arc::new(Capturing::new(provider, Arc::clone(&output)));
        builder = builder.provider(name, capturing);
    }
    let pools = builder.build().expect("the pools");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let limits = Limits {
        engine: Bounds {
            hints,
            ..Bounds::default()
        },
        output: Some(output),
        ..Limits::default()
    };
    Service::start_with(
        &pools,
        store,
        records,
        Arc::new(SystemClock),
        TOKEN.into(),
        listener,
        limits,
    )
    .await
    .expect("the service starts")
}

async fn submit(client: &reqwest::Client, base: &str, script: &str) -> u64 {
    let job: Value = client
        .post(format!("{base}/v1/jobs"))
        .bearer_auth(TOKEN)
        .json(&json!({"command": ["sh", "-c", script], "trust": "trusted"}))
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("a job");
    job["id"].as_u64().expect("an id")
}

async fn job(client: &reqwest::Client, base: &str, id: u64) -> Value {
    client
        .get(format!("{base}/v1/jobs/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("a job")
}

/// Polls until every job of `ids` has ended (at most `bound`); the jobs.
async fn ended(client: &reqwest::Client, base: &str, ids: &[u64], bound: Duration) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let mut jobs = Vec::new();
        for &id in ids {
            jobs.push(job(client, base, id).await);
        }
        if jobs.iter().all(|j| !j["ended_at"].is_null()) {
            return jobs;
        }
        assert!(start.elapsed() < bound, "jobs still not ended: {jobs:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn rfc3339(text: &str) -> SystemTime {
    humantime::parse_rfc3339(text).expect("an RFC 3339 time")
}

/// The `q`-quantile (0..=1) of `samples`, nearest rank.
fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let rank = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

/// Container exit to job end, for `jobs` jobs of one second.
async fn ends(jobs: u32, hints: bool, reconcile_every: Duration) -> Vec<Duration> {
    let owner = unique_id(if hints { "ends-hints" } else { "ends-nohints" });
    let dir = tempfile::tempdir().expect("a directory");
    // The exits, from the daemon's own events, by container id.
    let client = bollard::Docker::connect_with_unix_defaults().expect("the daemon");
    let filters = HashMap::from([
        ("type", vec!["container".to_owned()]),
        ("event", vec!["die".to_owned()]),
        ("label", vec![format!("billet.owner={owner}")]),
    ]);
    let mut events = client.events(Some(EventsOptionsBuilder::new().filters(&filters).build()));
    let exits = tokio::spawn(async move {
        let mut exits = HashMap::new();
        while let Some(Ok(event)) = events.next().await {
            let id = event.actor.and_then(|a| a.id).unwrap_or_default();
            let nanos = u64::try_from(event.time_nano.unwrap_or_default()).unwrap_or_default();
            exits.insert(id, SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos));
            if exits.len() == jobs as usize {
                break;
            }
        }
        exits
    });
    let service = service(&owner, dir.path(), jobs, reconcile_every, hints, 1 << 20).await;
    let base = format!("http://{}", service.addr());
    let http = reqwest::Client::new();
    let mut ids = Vec::new();
    for _ in 0..jobs {
        ids.push(submit(&http, &base, "sleep 1").await);
    }
    let done = ended(
        &http,
        &base,
        &ids,
        reconcile_every * 3 + Duration::from_secs(120),
    )
    .await;
    let exits = tokio::time::timeout(Duration::from_secs(30), exits)
        .await
        .expect("every exit seen")
        .expect("the events task");
    service
        .stop(Duration::from_secs(10))
        .await
        .expect("the service stops");
    support::remove_containers_of(&owner).await;
    done.iter()
        .map(|job| {
            let instance = job["instance"].as_str().expect("the job's container");
            let exit = exits[instance];
            let end = rfc3339(job["ended_at"].as_str().expect("ended"));
            end.duration_since(exit).unwrap_or_default()
        })
        .collect()
}

/// This process's CPU time (user and system) so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Past the command's name, in parentheses: fields 14 and 15 are utime
    // and stime, in clock ticks (100 a second on Linux).
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

/// This process's resident memory now, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .expect("a VmRSS line")
        * 1024
}

struct Captured {
    bytes: u64,
    kept: u64,
    wall: Duration,
    cpu: Duration,
    idle_rss: u64,
    peak_rss: u64,
}

/// One job writing `bytes`, captured.
async fn capture(bytes: u64) -> Captured {
    let owner = unique_id("capture");
    let dir = tempfile::tempdir().expect("a directory");
    let service = service(
        &owner,
        dir.path(),
        1,
        Duration::from_secs(60),
        true,
        bytes * 2,
    )
    .await;
    let base = format!("http://{}", service.addr());
    let http = reqwest::Client::new();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = rss();
    let peak = Arc::new(std::sync::atomic::AtomicU64::new(idle_rss));
    let sampler = {
        let peak = Arc::clone(&peak);
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss(), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let cpu_before = cpu();
    let id = submit(
        &http,
        &base,
        &format!("head -c {bytes} /dev/zero | tr '\\0' x"),
    )
    .await;
    let done = ended(&http, &base, &[id], Duration::from_secs(600)).await;
    let cpu = cpu() - cpu_before;
    sampler.abort();
    let job = &done[0];
    let wall = rfc3339(job["ended_at"].as_str().expect("ended"))
        .duration_since(rfc3339(job["started_at"].as_str().expect("started")))
        .unwrap_or_default();
    let kept = job["output_bytes"].as_u64().expect("output_bytes");
    service
        .stop(Duration::from_secs(10))
        .await
        .expect("the service stops");
    support::remove_containers_of(&owner).await;
    Captured {
        bytes,
        kept,
        wall,
        cpu,
        idle_rss,
        peak_rss: peak.load(std::sync::atomic::Ordering::Relaxed),
    }
}

fn main() {
    if !support::daemon("the ends_and_output bench") {
        return;
    }
    let full = full_run();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (jobs, without_every, bytes) = if full {
        (50, Duration::from_secs(60), 256 << 20)
    } else {
        (3, Duration::from_secs(2), 1 << 20)
    };
    let mut with = runtime.block_on(ends(jobs, true, Duration::from_secs(60)));
    let mut without = runtime.block_on(ends(jobs, false, without_every));
    let (p50, p99) = (quantile(&mut with, 0.5), quantile(&mut with, 0.99));
    let (q50, q99) = (quantile(&mut without, 0.5), quantile(&mut without, 0.99));
    println!(
        "ends: {jobs} jobs of 1 s, container exit to outcome committed and lease free, with hints (reconcile every 60s): p50 {p50:.1?}, p99 {p99:.1?}, max {:.1?}",
        with.last().copied().unwrap_or_default()
    );
    println!(
        "ends: without hints (reconcile every {without_every:?}): p50 {q50:.1?}, p99 {q99:.1?}, max {:.1?}; without / with at p50: {:.1}x",
        without.last().copied().unwrap_or_default(),
        q50.as_secs_f64() / p50.as_secs_f64().max(1e-6)
    );
    println!(
        "ends: goal with hints p50 <= 200ms: {}; p99 <= 1s: {}",
        if p50 <= Duration::from_millis(200) {
            "met"
        } else {
            "MISSED"
        },
        if p99 <= Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        }
    );
    let captured = runtime.block_on(capture(bytes));
    let mib = captured.bytes as f64 / f64::from(1 << 20);
    let more = captured.peak_rss.saturating_sub(captured.idle_rss) as f64 / f64::from(1 << 20);
    println!(
        "capture: one job writing {mib:.0} MiB: {} bytes kept ({}), job start to end {:.2?}, {:.1} MiB/s captured, {:.2} ms of CPU per MiB",
        captured.kept,
        if captured.kept == captured.bytes {
            "all"
        } else {
            "SHORT"
        },
        captured.wall,
        mib / captured.wall.as_secs_f64(),
        captured.cpu.as_secs_f64() * 1000.0 / mib
    );
    println!(
        "capture: resident memory idle {:.1} MiB, peak during the job {:.1} MiB: {more:+.1} MiB (goal at most 16 MiB more: {})",
        captured.idle_rss as f64 / f64::from(1 << 20),
        captured.peak_rss as f64 / f64::from(1 << 20),
        if more <= 16.0 { "met" } else { "MISSED" }
    );
}
