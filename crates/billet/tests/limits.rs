//! The service in process over the simulated backend: what each credential
//! may do (L11), the `Bearer` scheme (L13), the timeouts a job gets and
//! keeps across a crash (L14), connections that are slow, idle or too many
//! (L12) or too many of one peer (L23), idempotency keys each credential
//! keeps to itself (L18), the jobs not yet ended (L19), and a step of the
//! wall clock (L24).

mod client;
mod in_process;

use in_process::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use billet::engine::Bounds;
use billet::http::{FULL_RETRY_AFTER, JobLimits};
use billet::listener::HEAD_TIMEOUT;
use billet::output::{MAX_FOLLOWS, OutputStore};
use billet::{Limits, Service, Store};
use billet_clock::{Clock, ManualClock, SteadyClock};
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, run_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn work(trust: &str) -> Value {
    json!({"command": run_for(Duration::from_millis(10)), "trust": trust})
}

// L18: a key names a job among its credential's alone: two credentials with
// one key scheme get a job each; a repeat with another body is `409` naming
// `key` and records nothing; a repeat shows only the id to a credential that
// may not read; and all of it holds once the job has ended (read from the
// store's archive) and across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l18_keys_are_each_credentials_own() {
    let host = Host::new();
    let state = private_dir();
    let running = start(&host, Some(state.path()), Limits::default()).await;
    let short = json!({"command": run_for(Duration::from_millis(200)), "trust": "trusted", "key": "build-7"});
    let mut other = short.clone();
    other["labels"] = json!(["linux"]);
    let submit = |token: &'static str, body: Value| {
        let running = &running;
        async move {
            running
                .call(&format!("Bearer {token}"), "POST", "/v1/jobs", Some(body))
                .await
        }
    };
    let (status, first) = submit(ALL, short.clone()).await;
    assert_eq!(
        (status, first["id"].clone()),
        (StatusCode::CREATED, json!(1)),
        "{first}"
    );
    let (status, theirs) = submit(SUBMITTER, short.clone()).await;
    assert_eq!(
        (status, theirs["id"].clone()),
        (StatusCode::CREATED, json!(2)),
        "another credential's key is another key: {theirs}"
    );
    assert_eq!(running.jobs().await, 2);

    let check = async |when: &str| {
        let (status, again) = submit(ALL, short.clone()).await;
        assert_eq!(
            (status, again["id"].clone(), again["command"].clone()),
            (StatusCode::OK, json!(1), short["command"].clone()),
            "{when}: {again}"
        );
        let (status, again) = submit(SUBMITTER, short.clone()).await;
        assert_eq!(
            (status, again.clone()),
            (StatusCode::OK, json!({"id": 2})),
            "{when}: without `read`, the id alone"
        );
        for token in [ALL, SUBMITTER] {
            let (status, refused) = submit(token, other.clone()).await;
            assert_eq!(status, StatusCode::CONFLICT, "{when}: {refused}");
            let said = refused["error"].as_str().unwrap_or_default();
            assert!(said.starts_with("field `key`"), "{when}: {said}");
            assert!(
                !said.contains("run_for") && !said.contains("sleep"),
                "{when}: {said}"
            );
        }
        assert_eq!(running.jobs().await, 2, "{when}: nothing recorded");
    };
    check("while the jobs run").await;
    running.until_ended(1).await;
    running.until_ended(2).await;
    check("once they ended").await;
    running.service.stop(Duration::from_secs(5)).await.unwrap();

    let running = start(&host, Some(state.path()), Limits::default()).await;
    let (status, again) = running
        .call(
            &format!("Bearer {SUBMITTER}"),
            "POST",
            "/v1/jobs",
            Some(short.clone()),
        )
        .await;
    assert_eq!(
        (status, again),
        (StatusCode::OK, json!({"id": 2})),
        "after a restart, the same scope"
    );
    running.service.stop(Duration::from_secs(5)).await.unwrap();
}

// L19: past `--max-queued` jobs not yet ended, a submission is `503` with
// `Retry-After`, says the flag, and records nothing (not even an id); a
// repeat of a known key is still answered; a job that ends makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l19_jobs_not_yet_ended_are_bounded() {
    let host = Host::new();
    let limits = Limits {
        engine: Bounds {
            max_queued: 3,
            ..Bounds::default()
        },
        ..Limits::default()
    };
    let running = start(&host, None, limits).await;
    let long = |key: &str| json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted", "key": key});
    let post = |body: Value| {
        let running = &running;
        async move {
            let response = running
                .client
                .post(format!("{}/v1/jobs", running.base))
                .header("Authorization", format!("Bearer {ALL}"))
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            let status = response.status();
            let retry = response
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned());
            let body: Value = response.json().await.unwrap();
            (status, retry, body)
        }
    };
    for (n, key) in ["a", "b", "c"].into_iter().enumerate() {
        let (status, _, job) = post(long(key)).await;
        assert_eq!(
            (status, job["id"].clone()),
            (StatusCode::CREATED, json!(n + 1)),
            "{job}"
        );
    }
    let (status, retry, refused) = post(long("d")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(retry.as_deref(), Some(FULL_RETRY_AFTER));
    let said = refused["error"].as_str().unwrap_or_default();
    assert!(
        said.contains("--max-queued") && said.starts_with("3 jobs"),
        "{said}"
    );
    assert_eq!(running.jobs().await, 3, "nothing recorded");
    let (status, _, again) = post(long("a")).await;
    assert_eq!(
        (status, again["id"].clone()),
        (StatusCode::OK, json!(1)),
        "a known key"
    );
    let (status, _) = running
        .call(&format!("Bearer {ALL}"), "DELETE", "/v1/jobs/3", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    running.until_ended(3).await;
    let (status, _, job) = post(long("d")).await;
    assert_eq!(
        (status, job["id"].clone()),
        (StatusCode::CREATED, json!(4)),
        "room once a job ended, and no id spent on the refusal: {job}"
    );
    running.service.stop(Duration::from_secs(5)).await.unwrap();
}

// L11: the grants table, each credential against each route: allowed, or
// `403` naming the grant it lacks and recording nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l11_each_credential_does_what_its_grants_allow() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let (status, _) = running
        .call(
            &format!("Bearer {ALL}"),
            "POST",
            "/v1/jobs",
            Some(work("trusted")),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let mut recorded = 1;
    type Row = (
        &'static str,
        &'static str,
        &'static str,
        Option<Value>,
        u16,
        Option<&'static str>,
    );
    let rows: Vec<Row> = vec![
        (METRICS, "GET", "/metrics", None, 200, None),
        (METRICS, "GET", "/v1/jobs", None, 403, Some("read")),
        (METRICS, "GET", "/v1/jobs/1", None, 403, Some("read")),
        (METRICS, "GET", "/v1/pools", None, 403, Some("read")),
        (
            METRICS,
            "POST",
            "/v1/jobs",
            Some(work("untrusted")),
            403,
            Some("submit"),
        ),
        // Refused before its body is read: even a malformed one.
        (
            METRICS,
            "POST",
            "/v1/jobs",
            Some(json!("not a job")),
            403,
            Some("submit"),
        ),
        (METRICS, "DELETE", "/v1/jobs/1", None, 403, Some("cancel")),
        // Past the grant check: no pool here takes untrusted work (the
        // simulated backend refuses it, as docker does), so 422, not 403.
        (
            INTAKE,
            "POST",
            "/v1/jobs",
            Some(work("untrusted")),
            422,
            None,
        ),
        (INTAKE, "POST", "/v1/jobs", Some(work("unknown")), 422, None),
        (
            INTAKE,
            "POST",
            "/v1/jobs",
            Some(work("trusted")),
            403,
            Some("submit"),
        ),
        (INTAKE, "GET", "/v1/jobs/1", None, 200, None),
        (INTAKE, "GET", "/metrics", None, 403, Some("metrics")),
        (INTAKE, "DELETE", "/v1/jobs/1", None, 403, Some("cancel")),
        (READER, "GET", "/v1/jobs", None, 200, None),
        (READER, "GET", "/v1/pools", None, 200, None),
        (
            READER,
            "POST",
            "/v1/jobs",
            Some(work("untrusted")),
            403,
            Some("submit"),
        ),
        (READER, "GET", "/metrics", None, 403, Some("metrics")),
        (ALL, "GET", "/metrics", None, 200, None),
        (ALL, "DELETE", "/v1/jobs/999", None, 404, None),
    ];
    for (token, method, path, body, want, grant) in rows {
        let (status, answer) = running
            .call(&format!("Bearer {token}"), method, path, body)
            .await;
        assert_eq!(status.as_u16(), want, "{token} {method} {path}: {answer}");
        if status == StatusCode::CREATED {
            recorded += 1;
        }
        if let Some(grant) = grant {
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(
                error.contains(&format!("`{grant}`")),
                "{token} {method} {path}: {answer}"
            );
        }
        assert_eq!(running.jobs().await, recorded, "{token} {method} {path}");
    }
    // No token, a wrong one: 401 as before; /healthz needs none.
    let (status, _) = running
        .call(
            "Bearer not-a-token-of-this-service-at-all",
            "GET",
            "/v1/jobs",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = running.call("", "GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    running.service.abort();
}

// L13: the scheme is matched case-insensitively, as HTTP says; the token
// itself is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l13_bearer_is_matched_case_insensitively() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let (status, _) = running
            .call(&format!("{scheme} {READER}"), "GET", "/v1/pools", None)
            .await;
        assert_eq!(status, StatusCode::OK, "{scheme}");
    }
    for auth in [
        format!("Bearer {}", READER.to_uppercase()),
        format!("Basic {READER}"),
        format!("Bearer{READER}"),
        READER.to_owned(),
    ] {
        let (status, _) = running.call(&auth, "GET", "/v1/pools", None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth}");
    }
    running.service.abort();
}

// L14: a job naming more than the maximum is refused (`422` naming
// `timeout_secs`, nothing recorded); one naming none gets the default, and
// is stopped at it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l14_default_and_maximum_timeouts() {
    let host = Host::new();
    let limits = Limits {
        jobs: JobLimits {
            default_timeout: Duration::from_secs(1),
            max_timeout: Duration::from_secs(60),
        },
        ..Limits::default()
    };
    let running = start(&host, None, limits).await;
    let auth = format!("Bearer {ALL}");
    let long = json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted"});
    let mut too_long = long.clone();
    too_long["timeout_secs"] = json!(61);
    let (status, answer) = running
        .call(&auth, "POST", "/v1/jobs", Some(too_long))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("timeout_secs"),
        "{answer}"
    );
    assert_eq!(running.jobs().await, 0);
    let mut allowed = long.clone();
    allowed["timeout_secs"] = json!(60);
    let (status, _) = running.call(&auth, "POST", "/v1/jobs", Some(allowed)).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(long)).await;
    assert_eq!(status, StatusCode::CREATED);
    let ended = running.until_ended(job["id"].as_u64().unwrap()).await;
    assert_eq!(ended["state"], "failed", "{ended}");
    assert!(
        ended["reason"].as_str().unwrap().contains("timed out"),
        "{ended}"
    );
    running.service.abort();
}

fn time(job: &Value, field: &str) -> SystemTime {
    humantime::parse_rfc3339(job[field].as_str().unwrap()).unwrap()
}

// L14: a job's timeout is a deadline from its start, kept across a crash:
// a job of 3 s whose service crashes 2 s in ends about 3 s after it
// started, not 3 s after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l14_a_timeout_is_kept_across_a_crash() {
    let host = Host::new();
    let state = private_dir();
    let running = start(&host, Some(state.path()), Limits::default()).await;
    let auth = format!("Bearer {ALL}");
    let body = json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted", "timeout_secs": 3});
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let id = job["id"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    running.service.abort();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let restarted = start(&host, Some(state.path()), Limits::default()).await;
    let restarted_at = SystemTime::now();
    let ended = restarted.until_ended(id).await;
    assert_eq!(ended["state"], "failed", "{ended}");
    let ran = time(&ended, "ended_at")
        .duration_since(time(&ended, "started_at"))
        .unwrap();
    let after_restart = time(&ended, "ended_at")
        .duration_since(restarted_at)
        .unwrap_or_default();
    eprintln!(
        "L14: started, crashed 2 s in, restarted; ended {ran:?} after its start, {after_restart:?} after the restart"
    );
    assert!(ran >= Duration::from_secs(3), "{ran:?}");
    assert!(
        ran < Duration::from_millis(4_500),
        "the timeout started again at the restart: {ran:?}"
    );
    restarted.service.abort();
}

/// Whether the server closed `stream` (EOF or reset) within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

// L12: connections that send half a head, and kept-alive connections left
// idle, are closed after the head timeout; past `--max-connections`, a few
// more are answered `503` with `Retry-After`, but `/healthz` still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l12_slow_idle_and_surplus_connections_are_bounded() {
    let host = Host::new();
    let limits = Limits {
        max_connections: 300,
        // Every connection here is the loopback's: one peer (L23 apart).
        max_connections_per_peer: 300,
        ..Limits::default()
    };
    let running = start(&host, None, limits).await;
    let addr = running.service.addr();
    let mut half = Vec::new();
    for _ in 0..300 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthor")
            .await
            .unwrap();
        half.push(stream);
    }
    // The cap is reached: a new connection is told 503, but /healthz answers.
    let mut surplus = TcpStream::connect(addr).await.unwrap();
    surplus
        .write_all(
            format!("GET /v1/pools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALL}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = surplus.read(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer[..n]).to_lowercase();
    assert!(text.starts_with("http/1.1 503"), "{text}");
    assert!(text.contains("retry-after: 1"), "{text}");
    let mut health = TcpStream::connect(addr).await.unwrap();
    health
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let n = health.read(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer[..n]).to_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    let started = Instant::now();
    let mut all_closed = true;
    for stream in &mut half {
        all_closed &= closed_within(stream, HEAD_TIMEOUT + Duration::from_secs(5)).await;
    }
    assert!(
        all_closed,
        "a half-sent connection was still open after {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() >= HEAD_TIMEOUT - Duration::from_secs(1));
    // With the half-sent ones gone, connections are served again; one kept
    // alive and left idle is closed after the head timeout too.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let stream = &mut idle;
    stream
        .write_all(
            format!("GET /v1/pools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALL}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let n = stream.read(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer[..n]).to_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    let idle_from = Instant::now();
    assert!(closed_within(stream, HEAD_TIMEOUT + Duration::from_secs(5)).await);
    assert!(idle_from.elapsed() >= HEAD_TIMEOUT - Duration::from_secs(1));
    let (status, _) = running
        .call(&format!("Bearer {ALL}"), "GET", "/v1/pools", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    running.service.abort();
}

// L23: one peer holding its share of connections (heads half sent) is
// told `503` for its next, naming the flag, while another peer's requests
// answer; `/healthz` answers the crowded peer too; once it lets go, it is
// served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l23_one_peer_never_takes_every_slot() {
    let host = Host::new();
    let limits = Limits {
        max_connections_per_peer: 4,
        ..Limits::default()
    };
    let running = start(&host, None, limits).await;
    let addr = running.service.addr();
    let crowded = std::net::Ipv4Addr::new(127, 0, 0, 2);
    let from_crowded = || async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((crowded, 0).into()).unwrap();
        socket.connect(addr).await.unwrap()
    };
    let ask = |path: &str| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALL}\r\nConnection: close\r\n\r\n"
        )
    };
    async fn answer(stream: &mut TcpStream, request: &str) -> String {
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut text = Vec::new();
        let _ = stream.read_to_end(&mut text).await;
        String::from_utf8_lossy(&text).to_lowercase()
    }
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut stream = from_crowded().await;
        stream
            .write_all(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthor")
            .await
            .unwrap();
        held.push(stream);
    }
    let text = answer(&mut from_crowded().await, &ask("/v1/pools")).await;
    assert!(text.starts_with("http/1.1 503"), "{text}");
    assert!(text.contains("--max-connections-per-peer"), "{text}");
    let (status, _) = running
        .call(&format!("Bearer {ALL}"), "GET", "/v1/pools", None)
        .await;
    assert_eq!(status, StatusCode::OK, "another peer is served");
    let text = answer(
        &mut from_crowded().await,
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert!(text.starts_with("http/1.1 200"), "{text}");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = answer(&mut from_crowded().await, &ask("/v1/pools")).await;
        if text.starts_with("http/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "never served again: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.service.abort();
}

/// A provider whose inventory never answers: a daemon that hangs.
#[derive(Debug)]
struct Hung;

#[async_trait::async_trait]
impl billet_provider::Provider for Hung {
    fn kind(&self) -> billet_provider::ProviderKind {
        billet_provider::ProviderKind::Docker
    }
    fn accepts(&self, trust: billet_provider::TrustClass) -> Result<(), billet_provider::Error> {
        billet_provider::accepts_trust(
            billet_provider::ProviderKind::Docker,
            billet_provider::Isolation::NoBoundary,
            trust,
        )
    }
    async fn launch(
        &self,
        _: billet_provider::Spec,
    ) -> Result<billet_provider::Instance, billet_provider::Error> {
        std::future::pending().await
    }
    async fn find(
        &self,
        _: &str,
    ) -> Result<Option<billet_provider::Instance>, billet_provider::Error> {
        std::future::pending().await
    }
    async fn list(&self) -> Result<Vec<billet_provider::Instance>, billet_provider::Error> {
        std::future::pending().await
    }
    async fn destroy(
        &self,
        _: &billet_provider::InstanceId,
    ) -> Result<billet_provider::Teardown, billet_provider::Error> {
        std::future::pending().await
    }
}

// L14: an inventory read outstanding for longer than the stall bound (2 s at
// a 50 ms reconcile interval) makes the pool unreadable in `/healthz`; not
// at the bound itself, nor before; long before the call deadline (60 s).
// On a manual clock, so the bound is hit exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l14_an_inventory_read_that_hangs_is_said_past_the_stall_bound() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let manual = Arc::new(ManualClock::new(start));
    let clock: Arc<dyn Clock> = manual.clone();
    let pools = Pools::builder(config())
        .provider(
            "linux",
            Arc::new(Hung) as Arc<dyn billet_provider::Provider>,
        )
        .settings(Settings {
            reconcile_every: Duration::from_millis(50),
            call_timeout: Duration::from_secs(60),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let service = Service::start(&pools, Store::memory(), Vec::new(), clock, ALL, listener)
        .await
        .unwrap();
    let url = format!("http://{}/healthz", service.addr());
    let health = || async {
        let response = reqwest::get(&url).await.unwrap();
        let status = response.status();
        (status, response.json::<Value>().await.unwrap())
    };
    // Let the engine ask for the first inventory.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(health().await.0, StatusCode::OK);
    manual.advance(Duration::from_secs(2)).unwrap();
    assert_eq!(health().await.0, StatusCode::OK, "not at the bound itself");
    manual.advance(Duration::from_millis(1)).unwrap();
    let (status, body) = health().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body, json!({"status": "degraded", "unreadable": ["linux"]}));
    service.abort();
}

// L12, L7: a stop never waits without bound. Here the engine's clock stands
// still (a manual clock nobody moves) with an inventory read hung, so its
// drain never ends by itself: STOP_SLACK past the grace, in wall time, the
// stop gives up on it, aborts it and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l12_a_stop_that_cannot_finish_gives_up_after_its_slack() {
    let manual = Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ));
    let clock: Arc<dyn Clock> = manual.clone();
    let pools = Pools::builder(config())
        .provider(
            "linux",
            Arc::new(Hung) as Arc<dyn billet_provider::Provider>,
        )
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let service = Service::start(&pools, Store::memory(), Vec::new(), clock, ALL, listener)
        .await
        .unwrap();
    // Let the engine ask for the first inventory, which never answers.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let stopped = tokio::time::timeout(
        Duration::from_secs(60),
        service.stop(Duration::from_millis(500)),
    )
    .await
    .expect("the stop returned");
    let took = started.elapsed();
    let error = stopped.expect_err("the engine could not finish");
    assert!(
        matches!(error, billet::ServeError::EngineLost(_)),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("decided again at the next start"),
        "{error}"
    );
    assert!(
        took >= billet::service::STOP_SLACK,
        "gave up after {took:?}, before its slack"
    );
}

/// A temporary state directory only its owner may enter (L16): `tempfile`'s
/// follow the umask, and `serve` refuses a state directory others may enter.

// L24: deadlines keep to the monotonic clock. Over a wall clock that steps
// an hour forward, a running job with a minute's timeout is not failed as
// timed out; after a step two hours back, a job's 2 s timeout still ends it
// in seconds, not in an hour; `/healthz` says the offset each time and stays
// `200`; the clock counts both steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l24_a_step_of_the_wall_clock_moves_no_deadline() {
    let host = Host::new();
    let (ahead, behind) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (a, b) = (Arc::clone(&ahead), Arc::clone(&behind));
    let clock = SteadyClock::over(move || {
        SystemTime::now() + Duration::from_secs(a.load(Ordering::SeqCst))
            - Duration::from_secs(b.load(Ordering::SeqCst))
    });
    let running = start_on(&host, None, Limits::default(), Arc::new(clock.clone())).await;
    let auth = format!("Bearer {ALL}");
    let hour = run_for(Duration::from_secs(3600));
    let body = json!({"command": hour, "trust": "trusted", "timeout_secs": 60});
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let long = job["id"].as_u64().unwrap();
    let state = |job: &Value| job["state"].as_str().unwrap_or("").to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    while state(
        &running
            .call(&auth, "GET", &format!("/v1/jobs/{long}"), None)
            .await
            .1,
    ) != "running"
    {
        assert!(Instant::now() < deadline, "job {long} never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let offset = |health: &Value| health["wall_clock_offset_seconds"].as_f64();
    let (status, health) = running.call("", "GET", "/healthz", None).await;
    assert_eq!(
        (status, offset(&health)),
        (StatusCode::OK, None),
        "{health}"
    );

    ahead.store(3600, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, job) = running
        .call(&auth, "GET", &format!("/v1/jobs/{long}"), None)
        .await;
    assert_eq!(
        state(&job),
        "running",
        "a step forward timed the job out: {job}"
    );
    let (status, health) = running.call("", "GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert!(offset(&health).is_some_and(|s| s > 3500.0), "{health}");

    behind.store(7200, Ordering::SeqCst);
    let body = json!({"command": hour, "trust": "trusted", "timeout_secs": 2});
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let ended = running.until_ended(job["id"].as_u64().unwrap()).await;
    assert_eq!(state(&ended), "failed", "{ended}");
    assert!(
        ended["reason"].as_str().unwrap().contains("timed out"),
        "{ended}"
    );
    let ran = time(&ended, "ended_at")
        .duration_since(time(&ended, "started_at"))
        .unwrap();
    assert!(
        ran < Duration::from_secs(10),
        "a step back stalled the timeout: {ran:?}"
    );
    let (status, health) = running.call("", "GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert!(offset(&health).is_some_and(|s| s < -3500.0), "{health}");
    assert_eq!(clock.steps(), 2);
    let (_, job) = running
        .call(&auth, "GET", &format!("/v1/jobs/{long}"), None)
        .await;
    assert_eq!(state(&job), "running", "{job}");
    running.service.abort();
}

// L23: `follow` readers are bounded in number: with MAX_FOLLOWS slots
// taken, a `follow` answers `503` with `Retry-After` saying so, while
// reading what is kept still answers; a slot given back serves the next,
// and a follow's body holds its slot until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l23_follows_are_bounded_in_number() {
    let host = Host::new();
    let state = private_dir();
    let output = Arc::new(OutputStore::open(state.path(), None, 1 << 20).unwrap());
    let limits = Limits {
        output: Some(Arc::clone(&output)),
        ..Limits::default()
    };
    let running = start(&host, None, limits).await;
    let auth = format!("Bearer {ALL}");
    let body = json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted"});
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let path = format!("/v1/jobs/{}/output", job["id"]);
    let mut held: Vec<_> = (0..MAX_FOLLOWS)
        .map(|_| output.follow_slot().unwrap())
        .collect();
    assert!(output.follow_slot().is_none());
    let follow = |path: &str| {
        running
            .client
            .get(format!("{}{path}?follow=true", running.base))
            .header("Authorization", &auth)
            .send()
    };
    let refused = follow(&path).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "5");
    let said = refused.text().await.unwrap();
    assert!(said.contains("256 readers already follow"), "{said}");
    let (status, _) = running.call(&auth, "GET", &path, None).await;
    assert_eq!(status, StatusCode::OK);
    held.pop();
    let followed = follow(&path).await.unwrap();
    assert_eq!(followed.status(), StatusCode::OK);
    assert!(output.follow_slot().is_none(), "the follow holds no slot");
    drop(followed);
    let deadline = Instant::now() + Duration::from_secs(10);
    while output.follow_slot().is_none() {
        assert!(Instant::now() < deadline, "a closed follow kept its slot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.service.abort();
}
