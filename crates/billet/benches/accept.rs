//! `accept`: jobs accepted per second over HTTP, with the durable store
//! against the same service with a store in memory, and the p50 and p99
//! latency of a `POST /v1/jobs` on each, in one run (issue 19's benchmark).
//! Goal: the durable service within 5x of the one in memory, on throughput
//! and on both latencies.
//!
//! The service is [`Service::start`] over one docker-named pool backed by a
//! [`SimulatedProvider`] on the system clock, reconciling every hour (so the
//! bench sees no inventory after the first), with capacity for every job the
//! run submits: each accepted job is also placed and launched, so each job
//! is three committed changes (accepted, placed, backed by its instance) in
//! two batches. The durable store is [`Store::open`] on a fresh directory
//! under `std::env::temp_dir()` (its filesystem is printed), SQLite in WAL
//! mode with `synchronous = FULL`; the other is [`Store::memory`], which
//! keeps nothing but goes through the same writer thread.
//!
//! The client is in the same process, on the same tokio runtime as the
//! service: `C` tasks (32 by default), each with a client of its own and so
//! a keep-alive connection of its own, each posting
//! `{"command": run_for(1 hour), "trust": "trusted"}` as fast as it is
//! answered. A run is a fresh service, a warm-up of a tenth of the requests
//! (untimed), then `BILLET_BENCH_REQUESTS` requests (20,000 by default),
//! timed: accepted jobs per second is their count over the wall time of all
//! of them; each request's latency (sent to its body read) goes into an HDR
//! histogram. Every answer must be `201`, and after the service stops the
//! durable store must read back every job. Three runs of each, interleaved
//! (durable then memory, memory then durable, ...), so both see the same
//! machine; the figures are each store's median run by throughput.
//!
//! Beside them, to tell where the time goes: the CPU the whole process and
//! the store's writer thread used during the timed part (from
//! `/proc/self/task/*/schedstat`), and per accepted job; the CPU the rest of
//! the machine used meanwhile (other processes, and time the hypervisor
//! stole: `/proc/stat` less this process), for the noise; and one SQLite
//! commit of one row, alone, on the same filesystem (the cost of an
//! `fsync`ed transaction, which the writer's group commit shares among the
//! requests waiting on it).
//!
//! ```sh
//! cargo bench -p billet --bench accept
//! BILLET_BENCH_REQUESTS=10000 BILLET_BENCH_CONCURRENCY=1,8,32 cargo bench -p billet --bench accept
//! ```
//!
//! `cargo test --benches` runs it once with 200 requests and 32 connections,
//! checking the answers and the store.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use billet::Service;
use billet::Store;
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{SimulatedProvider, run_for};
use hdrhistogram::Histogram;
use tokio::net::TcpListener;

const TOKEN: &str = "bench-token";

/// Whether this is a real bench run (`cargo bench`), rather than
/// `cargo test --benches`, which runs every bench once with tiny inputs.
fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// A number from the environment, or `default`.
fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, not {text:?}")),
        Err(_) => default,
    }
}

/// The concurrency levels to measure: `BILLET_BENCH_CONCURRENCY` (`1,8,32`),
/// or 32.
fn concurrency_levels() -> Vec<usize> {
    match std::env::var("BILLET_BENCH_CONCURRENCY") {
        Ok(text) => text
            .split(',')
            .map(|c| {
                c.trim().parse().unwrap_or_else(|_| {
                    panic!("BILLET_BENCH_CONCURRENCY takes numbers, not {text:?}")
                })
            })
            .collect(),
        Err(_) => vec![32],
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Durable,
    Memory,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Durable => "durable (SQLite)",
            Kind::Memory => "memory",
        }
    }
}

/// What one run measured, over its timed part.
struct Run {
    accepted: usize,
    wall: Duration,
    latency: Histogram<u64>,
    /// CPU used by every thread of the process, and by the store's writer.
    cpu: Duration,
    writer_cpu: Duration,
    /// CPU the whole machine used (every process, from `/proc/stat`).
    machine_cpu: Duration,
    /// Leases the pool held at the end: every job placed.
    held: u64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.accepted as f64 / self.wall.as_secs_f64()
    }

    /// Cores used on average: `cpu` over the wall time.
    fn cores(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// Cores the rest of the machine used on average: other processes, and
    /// time stolen by the hypervisor.
    fn others(&self) -> f64 {
        self.cores(self.machine_cpu.saturating_sub(self.cpu))
    }

    /// CPU this process used per accepted job, in microseconds.
    fn cpu_per_job(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.accepted as f64
    }

    /// A latency quantile, in microseconds.
    fn quantile(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64
    }
}

/// One pool, `linux`, of kind docker, with room for `capacity` jobs.
fn config(capacity: usize) -> Config {
    Config::from_yaml_str(&format!(
        "deployment: {{id: bench}}
providers:
  - {{name: linux, kind: docker, capacity: {capacity}, docker: {{image: runner}}}}
routing: {{default_kind: docker}}
"
    ))
    .expect("a valid bench configuration")
}

/// The time each live thread of this process has spent on a CPU, by thread
/// id, and the id of the store's writer (`billet-store`), if running.
fn thread_cpu() -> (HashMap<u32, Duration>, Option<u32>) {
    let mut cpu = HashMap::new();
    let mut writer = None;
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (cpu, writer);
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let path = task.path();
        let Some(ns) = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        else {
            continue;
        };
        cpu.insert(tid, Duration::from_nanos(ns));
        if std::fs::read_to_string(path.join("comm"))
            .is_ok_and(|comm| comm.trim() == "billet-store")
        {
            writer = Some(tid);
        }
    }
    (cpu, writer)
}

/// The CPU time the whole machine has spent busy (user, nice, system, irq,
/// softirq, steal), from the first line of `/proc/stat`, in its clock ticks
/// of 10 ms.
fn machine_cpu() -> Duration {
    let busy = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|text| {
            let line = text.lines().next()?;
            let ticks: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|f| f.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal
            Some(
                [0, 1, 2, 5, 6, 7]
                    .iter()
                    .filter_map(|&i| ticks.get(i))
                    .sum::<u64>(),
            )
        })
        .unwrap_or(0);
    Duration::from_millis(busy * 10)
}

/// CPU used between two readings of [`thread_cpu`], over every thread, and
/// by thread `writer`.
fn cpu_between(
    before: &HashMap<u32, Duration>,
    after: &HashMap<u32, Duration>,
    writer: Option<u32>,
) -> (Duration, Duration) {
    let used =
        |tid: &u32, now: &Duration| now.saturating_sub(*before.get(tid).unwrap_or(&Duration::ZERO));
    let all = after.iter().map(|(tid, now)| used(tid, now)).sum();
    let writer = writer
        .and_then(|tid| after.get(&tid).map(|now| used(&tid, now)))
        .unwrap_or_default();
    (all, writer)
}

/// `count` requests over `clients`, one task per client, each posting `body`
/// as soon as its last answer is read. Answers the wall time, the latency
/// histogram (µs) and how many were answered `201`; panics on any other
/// answer.
async fn phase(
    clients: &[reqwest::Client],
    url: &str,
    body: &str,
    count: usize,
) -> (Duration, Histogram<u64>, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, url, body, next) = (
                client.clone(),
                url.to_owned(),
                body.to_owned(),
                Arc::clone(&next),
            );
            tokio::spawn(async move {
                let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
                    .expect("valid histogram bounds");
                let mut created = 0;
                while next.fetch_add(1, Ordering::Relaxed) < count {
                    let sent = Instant::now();
                    let response = client
                        .post(&url)
                        .bearer_auth(TOKEN)
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await
                        .expect("the service answers");
                    let status = response.status();
                    let answer = response.bytes().await.expect("the answer's body");
                    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    latency.saturating_record(micros.max(1));
                    assert_eq!(
                        status,
                        reqwest::StatusCode::CREATED,
                        "a job refused: {}",
                        String::from_utf8_lossy(&answer)
                    );
                    created += 1;
                }
                (latency, created)
            })
        })
        .collect();
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds");
    let mut created = 0;
    for task in tasks {
        let (theirs, n) = task.await.expect("a client task panicked");
        latency.add(theirs).expect("histograms of the same bounds");
        created += n;
    }
    (started.elapsed(), latency, created)
}

/// One run: a fresh service over `kind` of store (a new directory under
/// `root` when durable), `warmup` requests untimed, then `requests` timed,
/// over `concurrency` connections. With `check`, also reads every job back
/// over the API.
async fn run_once(
    kind: Kind,
    concurrency: usize,
    warmup: usize,
    requests: usize,
    root: &Path,
    check: bool,
) -> Run {
    let total = warmup + requests;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = Arc::new(
        SimulatedProvider::builder("bench")
            .clock(Arc::clone(&clock))
            .build()
            .expect("a simulated provider"),
    );
    let pools = Pools::builder(config(total))
        .provider("linux", provider as Arc<dyn billet_provider::Provider>)
        .settings(Settings {
            reconcile_every: Duration::from_secs(3600),
            call_timeout: Duration::from_secs(60),
            ..Settings::default()
        })
        .build()
        .expect("the pools");
    let dir = tempfile::Builder::new()
        .prefix("billet-accept-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(root)
        .expect("a directory for the store");
    let (store, records) = match kind {
        Kind::Durable => Store::open(dir.path()).expect("the store opens"),
        Kind::Memory => (Store::memory(), Vec::new()),
    };
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port on loopback");
    let service = Service::start(&pools, store, records, clock, TOKEN, listener)
        .await
        .expect("the service starts");
    let base = format!("http://{}", service.addr());
    let url = format!("{base}/v1/jobs");
    let body = serde_json::json!({
        "command": run_for(Duration::from_secs(3600)),
        "trust": "trusted",
    })
    .to_string();
    let clients: Vec<reqwest::Client> = (0..concurrency)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .tcp_nodelay(true)
                .build()
                .expect("an HTTP client")
        })
        .collect();

    let (_, _, warmed) = phase(&clients, &url, &body, warmup).await;
    assert_eq!(warmed, warmup);
    let (cpu_before, writer) = thread_cpu();
    let machine_before = machine_cpu();
    let (wall, latency, accepted) = phase(&clients, &url, &body, requests).await;
    let machine_cpu = machine_cpu().saturating_sub(machine_before);
    let (cpu_after, _) = thread_cpu();
    let (cpu, writer_cpu) = cpu_between(&cpu_before, &cpu_after, writer);
    assert_eq!(accepted, requests, "every request answered 201");

    let get = |path: &str| {
        clients[0]
            .get(format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .send()
    };
    let pools_seen: serde_json::Value = get("/v1/pools")
        .await
        .expect("GET /v1/pools")
        .json()
        .await
        .expect("the pools as JSON");
    let held = pools_seen["pools"][0]["held"].as_u64().unwrap_or(0);
    if check {
        // Every page of `GET /v1/jobs` (at most 1,000 jobs each, L12).
        let mut jobs = Vec::new();
        let mut after = 0;
        loop {
            let page: serde_json::Value = get(&format!("/v1/jobs?limit=1000&after={after}"))
                .await
                .expect("GET /v1/jobs")
                .json()
                .await
                .expect("the jobs as JSON");
            jobs.extend(
                page["jobs"]
                    .as_array()
                    .expect("a list of jobs")
                    .iter()
                    .cloned(),
            );
            match page["next"].as_u64() {
                Some(next) => after = next,
                None => break,
            }
        }
        assert_eq!(jobs.len(), total, "every accepted job is listed");
        for (n, job) in jobs.iter().enumerate() {
            assert_eq!(job["id"], n + 1, "ids in order, none missing: {job}");
            assert_eq!(job["trust"], "trusted");
            assert!(
                ["queued", "running"].contains(&job["state"].as_str().unwrap_or("")),
                "{job}"
            );
        }
    }
    drop(clients);
    service
        .stop(Duration::from_secs(5))
        .await
        .expect("the service stops");
    if kind == Kind::Durable {
        let (_, records) = Store::open(dir.path()).expect("the store reopens");
        assert_eq!(
            records.len(),
            total,
            "every job answered 201 is in the store"
        );
    }
    Run {
        accepted,
        wall,
        latency,
        cpu,
        writer_cpu,
        machine_cpu,
        held,
    }
}

/// The filesystem `path` is on: its type, device and mount point, from
/// `/proc/self/mounts` (the longest mount point that holds it).
fn filesystem(path: &Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return "unknown filesystem".to_owned();
    };
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (device, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            path.starts_with(point)
                .then(|| (point.len(), format!("{kind} ({device} on {point})")))
        })
        .max_by_key(|(len, _)| *len)
        .map_or_else(|| "unknown filesystem".to_owned(), |(_, fs)| fs)
}

/// `commits` transactions of one row each, one after another, on a fresh
/// database under `root` set up as the store's (WAL, `synchronous = FULL`):
/// the p50 and p99 of one commit.
fn lone_commits(root: &Path, commits: usize) -> (Duration, Duration) {
    let dir = tempfile::Builder::new()
        .prefix("billet-accept-probe-")
        .tempdir_in(root)
        .expect("a directory for the probe");
    let mut conn = rusqlite::Connection::open(dir.path().join("probe.db")).expect("a database");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE jobs (id INTEGER PRIMARY KEY, command TEXT NOT NULL);",
    )
    .expect("the probe's table");
    let mut times = Vec::with_capacity(commits);
    for id in 0..commits {
        let started = Instant::now();
        let tx = conn.transaction().expect("a transaction");
        tx.execute(
            "INSERT INTO jobs (id, command) VALUES (?1, ?2)",
            rusqlite::params![id as i64, r#"["billet-simulated","run-for","3600s"]"#],
        )
        .expect("an insert");
        tx.commit().expect("a commit");
        times.push(started.elapsed());
    }
    times.sort();
    let at = |q: f64| times[((q * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1];
    (at(0.5), at(0.99))
}

fn micros(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The run with the median throughput.
fn median_run(runs: &[Run]) -> &Run {
    let mut order: Vec<&Run> = runs.iter().collect();
    order.sort_by(|a, b| a.rate().total_cmp(&b.rate()));
    order[order.len() / 2]
}

fn main() {
    let full = full_run();
    let requests = env_usize("BILLET_BENCH_REQUESTS", if full { 20_000 } else { 200 });
    let warmup = (requests / 10).max(1);
    let repeats = if full { 3 } else { 1 };
    let levels = concurrency_levels();
    let root = std::env::temp_dir();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let workers = runtime.metrics().num_workers();

    println!(
        "accept: {requests} timed requests per run after {warmup} of warm-up, {repeats} run(s) of each store, \
         interleaved; tokio runtime of {workers} workers shared by client and service; durable store under {} on {}",
        root.display(),
        filesystem(&root)
    );
    let (lone50, lone99) = lone_commits(&root, if full { 500 } else { 20 });
    println!(
        "accept: one SQLite commit of one row alone (WAL, synchronous = FULL) on that filesystem: p50 {}, p99 {}",
        micros(lone50.as_secs_f64() * 1e6),
        micros(lone99.as_secs_f64() * 1e6)
    );

    let mut results: Vec<(usize, Vec<Run>, Vec<Run>)> = Vec::new();
    for &concurrency in &levels {
        let (mut durable, mut memory) = (Vec::new(), Vec::new());
        for repeat in 0..repeats {
            let order = if repeat % 2 == 0 {
                [Kind::Durable, Kind::Memory]
            } else {
                [Kind::Memory, Kind::Durable]
            };
            for kind in order {
                let run =
                    runtime.block_on(run_once(kind, concurrency, warmup, requests, &root, !full));
                println!(
                    "accept: {concurrency} connections, {}, run {}: {:.0} jobs/s, p50 {}, p99 {}, max {}, \
                     CPU {:.2} cores ({:.1} µs a job; writer thread {:.2} cores), \
                     others {:.2} cores, {} leases held at the end",
                    kind.name(),
                    repeat + 1,
                    run.rate(),
                    micros(run.quantile(0.5)),
                    micros(run.quantile(0.99)),
                    micros(run.latency.max() as f64),
                    run.cores(run.cpu),
                    run.cpu_per_job(),
                    run.cores(run.writer_cpu),
                    run.others(),
                    run.held
                );
                match kind {
                    Kind::Durable => durable.push(run),
                    Kind::Memory => memory.push(run),
                }
            }
        }
        results.push((concurrency, durable, memory));
    }

    println!();
    println!(
        "| connections | store | accepted jobs/s | p50 | p99 | CPU, cores | CPU a job | writer thread, cores | others, cores | jobs/s of each run |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (concurrency, durable, memory) in &results {
        for (kind, runs) in [(Kind::Durable, durable), (Kind::Memory, memory)] {
            let run = median_run(runs);
            let each: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.rate())).collect();
            println!(
                "| {concurrency} | {} | {:.0} | {} | {} | {:.2} | {:.1} µs | {:.2} | {:.2} | {} |",
                kind.name(),
                run.rate(),
                micros(run.quantile(0.5)),
                micros(run.quantile(0.99)),
                run.cores(run.cpu),
                run.cpu_per_job(),
                run.cores(run.writer_cpu),
                run.others(),
                each.join(", ")
            );
        }
    }
    if !full {
        return;
    }
    println!();
    for (concurrency, durable, memory) in &results {
        let (d, m) = (median_run(durable), median_run(memory));
        let verdict = |ratio: f64| if ratio <= 5.0 { "met" } else { "MISSED" };
        let slowdown = m.rate() / d.rate();
        println!(
            "ratio accept throughput, {concurrency} connections: durable {:.0} jobs/s / memory {:.0} jobs/s = {:.2}x \
             (memory / durable = {slowdown:.2}x, goal <= 5x: {})",
            d.rate(),
            m.rate(),
            d.rate() / m.rate(),
            verdict(slowdown)
        );
        for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
            let ratio = d.quantile(q) / m.quantile(q);
            println!(
                "ratio accept latency {name}, {concurrency} connections: durable {} / memory {} = {ratio:.2}x (goal <= 5x: {})",
                micros(d.quantile(q)),
                micros(m.quantile(q)),
                verdict(ratio)
            );
        }
    }
}
