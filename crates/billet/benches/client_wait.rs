//! `client_wait`: `billet jobs submit --wait` of a job that exits at once,
//! on the real docker daemon, against the same job through curl and a poll
//! (issue 46). Goal: the client adds no more than one poll interval.
//!
//! A `billet serve` of the built binary (one docker pool of the offline test
//! image, `network: none`) takes both. Each round, one at a time and
//! interleaved:
//!
//! * **client**: `billet jobs submit --trust trusted --wait -- sh -c true`,
//!   timed from the process's start to its exit (it submits, follows the
//!   output until the job has ended, reads the job, exits with its code);
//! * **curl + poll**: `curl -d ...` to submit, then `curl` of
//!   `GET /v1/jobs/{id}` every [`POLL`] (the server's own follow poll,
//!   `billet::output::FOLLOW_POLL`) until the job has ended, timed from the
//!   first curl's start to the last one's exit.
//!
//! Every job must finish with exit code 0. The figures: p50 and p99 of each
//! and the client's p50 less curl's, against the poll interval.
//!
//! ```sh
//! cargo bench -p billet --bench client_wait
//! BILLET_BENCH_ROUNDS=100 cargo bench -p billet --bench client_wait
//! ```
//!
//! `cargo test --benches` runs two rounds. Without a docker daemon it says
//! so in one line (with `BILLET_DOCKER_REQUIRED=1`, a failure).

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How often the curl side asks whether the job has ended.
const POLL: Duration = billet::output::FOLLOW_POLL;

fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn p(times: &mut [Duration], q: f64) -> Duration {
    times.sort();
    let at = ((times.len() as f64 - 1.0) * q).round() as usize;
    times[at]
}

/// Runs `curl ARGS`; its stdout as JSON.
fn curl(args: &[&str]) -> Value {
    let out = Command::new("curl")
        .arg("-sf")
        .args(args)
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).expect("JSON from the server")
}

fn main() {
    if !support::daemon("the client_wait bench") {
        return;
    }
    let rounds: usize = std::env::var("BILLET_BENCH_ROUNDS").map_or_else(
        |_| if full_run() { 40 } else { 2 },
        |text| text.parse().expect("BILLET_BENCH_ROUNDS takes a number"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut service = support::Service::new(
        "wait",
        &support::Pool {
            capacity: 2,
            endpoint: support::daemon_endpoint(),
        },
    );
    runtime.block_on(async {
        service.start().await;
        service.wait_first_inventory_read().await;
    });
    let api = service.api();
    let (base, token) = (api.base().to_owned(), api.token().to_owned());
    let auth = format!("Authorization: Bearer {token}");
    let body = r#"{"command": ["sh", "-c", "true"], "trust": "trusted"}"#;
    let (mut client, mut polled) = (Vec::new(), Vec::new());
    for round in 0..rounds + 1 {
        let started = Instant::now();
        let out = Command::new(support::BILLET)
            .args(["jobs", "submit", "--trust", "trusted", "--wait", "--"])
            .args(["sh", "-c", "true"])
            .env("BILLET_SERVER", &base)
            .env("BILLET_TOKEN", &token)
            .output()
            .expect("run the client");
        let took = started.elapsed();
        assert!(out.status.success(), "the client: {out:?}");

        let started = Instant::now();
        let job = curl(&["-H", &auth, "-d", body, &format!("{base}/v1/jobs")]);
        let id = job["id"].as_u64().expect("a job id");
        loop {
            let job = curl(&["-H", &auth, &format!("{base}/v1/jobs/{id}")]);
            match job["state"].as_str() {
                Some("finished") => {
                    assert_eq!(job["exit_code"], 0, "{job}");
                    break;
                }
                Some("queued" | "running") => std::thread::sleep(POLL),
                _ => panic!("the job did not finish: {job}"),
            }
        }
        let took_polled = started.elapsed();
        // The first round warms the daemon and the binary's page cache.
        if round > 0 {
            client.push(took);
            polled.push(took_polled);
        }
    }
    runtime.block_on(async {
        support::remove_containers_of(&service.id).await;
    });
    drop(service);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (c50, c99) = (p(&mut client, 0.5), p(&mut client, 0.99));
    let (p50, p99) = (p(&mut polled, 0.5), p(&mut polled, 0.99));
    println!(
        "submit --wait of `sh -c true` on docker, {rounds} rounds: client p50 {:.1} ms, p99 {:.1} ms; curl + poll every {} ms p50 {:.1} ms, p99 {:.1} ms; the client's p50 less curl's: {:+.1} ms (goal: at most {} ms, one poll)",
        ms(c50),
        ms(c99),
        POLL.as_millis(),
        ms(p50),
        ms(p99),
        ms(c50) - ms(p50),
        POLL.as_millis(),
    );
}
