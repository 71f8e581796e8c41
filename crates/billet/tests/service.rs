//! The service in process, over the simulated backend put in under a docker
//! pool's name: the API's answers (L4), bad requests (L5), restarts from the
//! store (L6) and shutdown (L7), quickly and on any machine. The same things
//! on a real daemon, through the built binary, are in `e2e.rs`.

mod client;

use client::support_client;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use billet::engine::Bounds;
use billet::record::JobRecord;
use billet::{Limits, Service, Store};
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_provider::Error;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, SimulatedProvider, run_for};
use proptest::prelude::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "test-token";

fn config(capacity: u32) -> Config {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("billet.yaml");
    std::fs::write(
        &path,
        format!(
            "deployment: {{id: svc}}
providers:
  - {{name: linux, kind: docker, capacity: {capacity}, docker: {{image: img}}}}
routing: {{default_kind: docker}}
"
        ),
    )
    .unwrap();
    Config::load(&path).unwrap()
}

struct Running {
    service: Service,
    provider: Arc<SimulatedProvider>,
    client: reqwest::Client,
    base: String,
}

async fn start(capacity: u32, host: &Host, store: Option<&Path>) -> Running {
    start_holding(capacity, host, store, Bounds::default().hold).await
}

/// The settings the tests run with: a reconcile every 50 ms.
fn quick() -> Settings {
    Settings {
        reconcile_every: Duration::from_millis(50),
        call_timeout: Duration::from_secs(5),
        orphan_grace: Duration::from_millis(200),
        ..Settings::default()
    }
}

/// [`start`], with the longest a change that can wait is held back.
async fn start_holding(
    capacity: u32,
    host: &Host,
    store: Option<&Path>,
    hold: Duration,
) -> Running {
    let bounds = Bounds {
        hold,
        ..Bounds::default()
    };
    start_tuned(capacity, host, store, quick(), bounds).await
}

/// [`start`], with the scheduler's settings and the engine's bounds given.
async fn start_tuned(
    capacity: u32,
    host: &Host,
    store: Option<&Path>,
    settings: Settings,
    bounds: Bounds,
) -> Running {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = Arc::new(
        SimulatedProvider::builder("svc")
            .host(host.clone())
            .clock(Arc::clone(&clock))
            .build()
            .unwrap(),
    );
    let pools = Pools::builder(config(capacity))
        .provider(
            "linux",
            Arc::clone(&provider) as Arc<dyn billet_provider::Provider>,
        )
        .settings(settings)
        .build()
        .unwrap();
    let (store, records): (Store, Vec<JobRecord>) = match store {
        Some(dir) => Store::open(dir).unwrap(),
        None => (Store::memory(), Vec::new()),
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let limits = Limits {
        engine: bounds,
        ..Limits::default()
    };
    let service = Service::start_with(
        &pools,
        store,
        records,
        clock,
        TOKEN.into(),
        listener,
        limits,
    )
    .await
    .unwrap();
    let base = format!("http://{}", service.addr());
    Running {
        service,
        provider,
        client: support_client(),
        base,
    }
}

impl Running {
    async fn call(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn post(&self, job: Value) -> (StatusCode, Value) {
        self.call("POST", "/v1/jobs", Some(job.to_string().into_bytes()))
            .await
    }

    async fn job(&self, id: u64) -> Value {
        let (status, job) = self.call("GET", &format!("/v1/jobs/{id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{job}");
        job
    }

    async fn jobs(&self) -> Vec<Value> {
        let (status, list) = self.call("GET", "/v1/jobs", None).await;
        assert_eq!(status, StatusCode::OK);
        list["jobs"].as_array().unwrap().clone()
    }

    /// Waits until job `id` is in `state`.
    async fn until(&self, id: u64, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let job = self.job(id).await;
            if job["state"] == state {
                return job;
            }
            assert!(Instant::now() < deadline, "job {id} never {state}: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn work(millis: u64) -> Value {
    json!({"command": run_for(Duration::from_millis(millis)), "trust": "trusted"})
}

// L4: a job is answered 201 with every field, in order, then runs and ends;
// a repeated key answers 200 and the same job; a job no pool could take is
// 422 and recorded nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l4_jobs_are_accepted_run_and_shown() {
    let host = Host::new();
    let running = start(2, &host, None).await;
    let mut job = work(100);
    job["labels"] = json!(["linux"]);
    job["key"] = json!("build-7");
    job["timeout_secs"] = json!(60);
    let (status, created) = running.post(job.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    // The fields, in the contract's order, read from the text itself.
    let text = running
        .client
        .get(format!("{}/v1/jobs/1", running.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let order = [
        "id",
        "state",
        "labels",
        "trust",
        "command",
        "pool",
        "instance",
        "exit_code",
        "reason",
        "submitted_at",
        "started_at",
        "ended_at",
        "output_bytes",
        "output_truncated",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|field| text.find(&format!("\"{field}\":")).expect(field))
        .collect();
    assert!(at.is_sorted(), "fields out of order: {text}");
    assert_eq!(created.as_object().unwrap().len(), order.len());
    assert_eq!(created["id"], 1);
    assert_eq!(created["labels"], json!(["linux"]));
    assert_eq!(created["trust"], "trusted");
    assert!(["queued", "running"].contains(&created["state"].as_str().unwrap()));
    let (status, again) = running.post(job).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["id"], 1, "a key seen before answers that job");
    let (status, refused) = running
        .post(json!({"command": ["x"], "trust": "untrusted"}))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("untrusted"));
    let done = running.until(1, "finished").await;
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["pool"], "linux");
    assert!(done["instance"].is_string());
    for time in ["submitted_at", "started_at", "ended_at"] {
        let text = done[time].as_str().unwrap();
        assert!(humantime::parse_rfc3339(text).is_ok(), "{time}: {text}");
    }
    assert_eq!(running.jobs().await.len(), 1, "the refused job is nowhere");
    running.service.stop(Duration::from_secs(1)).await.unwrap();
}

// L4: states listed in submission order; cancel of a queued job is at once,
// of a running one once its instance is gone, of an ended one 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l4_list_filters_and_cancels() {
    let host = Host::new();
    let running = start(1, &host, None).await;
    for _ in 0..3 {
        let (status, _) = running.post(work(60_000)).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    running.until(1, "running").await;
    let (_, queued) = running.call("GET", "/v1/jobs?state=queued", None).await;
    let ids: Vec<&Value> = queued["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["id"])
        .collect();
    assert_eq!(ids, [&json!(2), &json!(3)]);
    let (status, pools) = running.call("GET", "/v1/pools", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        pools,
        json!({"pools": [{"name": "linux", "kind": "docker", "capacity": 1, "held": 1, "queued": 2,
            "contested": 0, "leftovers": 0, "unsettled": 0}]})
    );
    let (status, cancelled) = running.call("DELETE", "/v1/jobs/3", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        cancelled["state"], "cancelled",
        "a queued job is cancelled at once"
    );
    let (status, cancelling) = running.call("DELETE", "/v1/jobs/1", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(cancelling["id"], 1);
    running.until(1, "cancelled").await;
    assert_eq!(host.instances_of("svc"), 1, "job 2 took the freed lease");
    let (status, ended) = running.call("DELETE", "/v1/jobs/1", None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(ended["state"], "cancelled");
    let (status, unknown) = running.call("DELETE", "/v1/jobs/99", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(unknown["error"].as_str().unwrap().contains("99"));
    let (_, metrics) = running.call("GET", "/metrics", None).await;
    let text = metrics.as_str().unwrap();
    assert!(
        text.contains(r#"billet_jobs_ended_total{outcome="cancelled"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"billet_pool_leases{pool="linux"} 1"#),
        "{text}"
    );
    assert!(text.contains("billet_jobs_queued 0"), "{text}");
    running.service.stop(Duration::from_secs(1)).await.unwrap();
}

// L4: /healthz needs no token and says which pool's inventory is unreadable;
// every other path needs the token (401, nothing recorded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l4_health_and_the_token() {
    let host = Host::new();
    let running = start(1, &host, None).await;
    let health = |client: reqwest::Client, base: String| async move {
        let response = client.get(format!("{base}/healthz")).send().await.unwrap();
        (response.status(), response.json::<Value>().await.unwrap())
    };
    let (status, body) = health(running.client.clone(), running.base.clone()).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
    running
        .provider
        .fail_inventory(Some(Error::unavailable("the daemon is away")));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = health(running.client.clone(), running.base.clone()).await;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(body, json!({"status": "degraded", "unreadable": ["linux"]}));
            break;
        }
        assert!(Instant::now() < deadline, "never degraded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.provider.fail_inventory(None);
    loop {
        let (status, _) = health(running.client.clone(), running.base.clone()).await;
        if status == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "never healthy again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for token in [None, Some("wrong"), Some("test-token2")] {
        let mut request = running
            .client
            .post(format!("{}/v1/jobs", running.base))
            .body(work(10).to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("Authorization"));
    }
    assert!(running.jobs().await.is_empty());
    running.service.stop(Duration::from_secs(1)).await.unwrap();
}

// L6: a service that dies without stopping (its tasks dropped mid-run) is
// started again over the same store and host: nothing accepted is lost,
// running instances are adopted, not launched again, and every job ends once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_crash_then_a_restart_loses_and_doubles_nothing() {
    let host = Host::new();
    let state = private_dir();
    let first = start(2, &host, Some(state.path())).await;
    for millis in [100, 1_500, 1_500, 200] {
        let (status, _) = first.post(work(millis)).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    first.until(1, "finished").await;
    first.until(2, "running").await;
    // The crash: the engine and listener are aborted, nothing is flushed.
    first.service.abort();
    let second = start(2, &host, Some(state.path())).await;
    let jobs = second.jobs().await;
    assert_eq!(jobs.len(), 4, "no accepted job lost");
    assert_eq!(jobs[0]["state"], "finished", "an ended outcome is kept");
    for id in 1..=4 {
        let job = second.until(id, "finished").await;
        assert_eq!(job["exit_code"], 0);
    }
    assert!(host.len() <= 2 || host.is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !host.is_empty() {
        assert!(Instant::now() < deadline, "instances left: {}", host.len());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    second.service.stop(Duration::from_secs(1)).await.unwrap();
}

// L6: a crash loses at most the changes held back (a job's end once its
// instance is gone, an instance backing a job), and the restart learns them
// again: the ended job's committed outcome stands; the running job's
// instance is adopted, not launched twice. They are held for an hour here,
// so each crash surely loses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_crash_loses_only_what_a_restart_learns_again() {
    let host = Host::new();
    let state = private_dir();
    let hour = Duration::from_secs(3600);
    let until_host_holds = |n: usize| {
        let host = host.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while host.len() != n {
                assert!(Instant::now() < deadline, "the host never held {n}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    // Job 1 ends, its instance is destroyed, and its end is held back.
    let first = start_holding(1, &host, Some(state.path()), hour).await;
    assert_eq!(first.post(work(100)).await.0, StatusCode::CREATED);
    until_host_holds(1).await;
    until_host_holds(0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(first.job(1).await["state"], "running", "its end is held");
    first.service.abort();
    // Its outcome, committed before the destroy, stands.
    let second = start_holding(1, &host, Some(state.path()), hour).await;
    let job = second.until(1, "finished").await;
    assert_eq!(job["exit_code"], 0);
    // Job 2 is launched, and the instance backing it is held back.
    assert_eq!(second.post(work(60_000)).await.0, StatusCode::CREATED);
    until_host_holds(1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let job = second.job(2).await;
    assert_eq!(job["instance"], Value::Null, "its instance is held: {job}");
    let before = billet_provider::Provider::list(&*second.provider)
        .await
        .unwrap();
    second.service.abort();
    // The first inventory finds it: adopted, not launched again.
    let third = start(1, &host, Some(state.path())).await;
    let job = third.until(2, "running").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut job = job;
    while job["instance"].is_null() {
        assert!(Instant::now() < deadline, "never adopted: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        job = third.job(2).await;
    }
    assert_eq!(job["instance"].as_str(), Some(before[0].id.as_str()));
    assert_eq!(host.len(), 1);
    assert_eq!(third.job(1).await["state"], "finished");
    third.service.stop(Duration::from_secs(1)).await.unwrap();
}

// B12: with hints (the default), a job's end is seen when its instance
// stops, not at the next reconcile a minute later; without them, it waits
// for that reconcile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b12_an_end_is_seen_when_the_instance_stops() {
    let minute = Settings {
        reconcile_every: Duration::from_secs(60),
        ..quick()
    };
    for hints in [true, false] {
        let host = Host::new();
        let bounds = Bounds {
            hints,
            ..Bounds::default()
        };
        let service = start_tuned(1, &host, None, minute, bounds).await;
        // The first inventory is read at the start; then nothing for a minute.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, _) = service.post(work(200)).await;
        assert_eq!(status, StatusCode::CREATED);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let state = service.job(1).await["state"].clone();
        if hints {
            assert_eq!(state, "finished", "seen when it stopped");
        } else {
            assert_eq!(state, "running", "seen only at the next reconcile");
        }
        service.service.stop(Duration::from_secs(1)).await.unwrap();
    }
}

// L7: once stopping, every request answers 503; the stop is orderly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l7_stopping_refuses_new_work() {
    let host = Host::new();
    let state = private_dir();
    let running = start(1, &host, Some(state.path())).await;
    let (status, _) = running.post(work(60_000)).await;
    assert_eq!(status, StatusCode::CREATED);
    running.until(1, "running").await;
    let client = running.client.clone();
    let base = running.base.clone();
    running.service.stop(Duration::from_secs(1)).await.unwrap();
    // The listener is closed now; the instance keeps running.
    assert!(client.get(format!("{base}/healthz")).send().await.is_err());
    assert_eq!(host.instances_of("svc"), 1, "instances keep running");
    let again = start(1, &host, Some(state.path())).await;
    let job = again.until(1, "running").await;
    assert!(job["instance"].is_string(), "adopted: {job}");
    let (status, _) = again.call("DELETE", "/v1/jobs/1", None).await;
    assert_eq!(status, StatusCode::OK);
    again.until(1, "cancelled").await;
    again.service.stop(Duration::from_secs(1)).await.unwrap();
    assert!(host.is_empty());
}

fn arbitrary_body() -> impl Strategy<Value = Vec<u8>> {
    let field = prop_oneof![
        Just("command".to_owned()),
        Just("labels".to_owned()),
        Just("trust".to_owned()),
        Just("timeout_secs".to_owned()),
        Just("key".to_owned()),
        "[a-z_]{1,12}",
    ];
    let leaf = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(|b| json!(b)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        ".{0,40}".prop_map(|s| json!(s)),
        Just(json!("trusted")),
    ];
    let value = leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        prop::collection::btree_map(field, value, 0..6)
            .prop_map(|m| { serde_json::to_vec(&Value::Object(m.into_iter().collect())).unwrap() }),
    ]
}

// L5: no body panics the server or records anything unless it is a valid
// job: every answer is 201/200/422 or a 4xx naming what is wrong, and the
// server keeps serving.
#[test]
fn l5_no_body_breaks_the_server() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let host = Host::new();
    let running = runtime.block_on(start(4, &host, None));
    let mut config = ProptestConfig::with_cases(256);
    config.failure_persistence = None;
    proptest!(config, |(body in arbitrary_body())| {
        let (status, answer, before, after) = runtime.block_on(async {
            let before = running.jobs().await.len();
            let (status, answer) = running.call("POST", "/v1/jobs", Some(body.clone())).await;
            let after = running.jobs().await.len();
            (status, answer, before, after)
        });
        let valid = billet::api::parse_job(&body).is_ok();
        if valid {
            prop_assert!(
                [StatusCode::CREATED, StatusCode::OK, StatusCode::UNPROCESSABLE_ENTITY].contains(&status),
                "{status} {answer}"
            );
        } else {
            prop_assert_eq!(status, StatusCode::BAD_REQUEST, "{}", answer);
            prop_assert!(answer["error"].is_string());
            prop_assert_eq!(before, after, "a bad request recorded something");
        }
        prop_assert!(!status.is_server_error());
    });
    let (status, _) = runtime.block_on(running.call("GET", "/v1/pools", None));
    assert_eq!(status, StatusCode::OK, "still serving");
    runtime
        .block_on(running.service.stop(Duration::from_secs(1)))
        .unwrap();
}

// L5: a body over the limit is refused whole, with a JSON error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l5_a_body_over_the_limit() {
    let host = Host::new();
    let running = start(1, &host, None).await;
    let body = vec![b' '; billet::api::MAX_BODY_BYTES * 4];
    let (status, answer) = running.call("POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(answer["error"].as_str().unwrap().contains("larger"));
    // The server closes a connection whose body it did not read: go on over
    // a new one.
    let running = Running {
        client: support_client(),
        ..running
    };
    let (status, answer) = running.call("GET", "/v1/jobs?state=done", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(answer["error"].as_str().unwrap().contains("state"));
    let (status, answer) = running.call("GET", "/v1/jobs/abc", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(answer["error"].as_str().unwrap().contains("abc"));
    let (status, _) = running.call("GET", "/v2/elsewhere", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(running.jobs().await.is_empty());
    running.service.stop(Duration::from_secs(1)).await.unwrap();
}

// L10: a second live store launching into this deployment is said by
// `/healthz` (degraded, naming the pool as contested) and by the pool's
// count; its instance is never touched. In process, two stores over one
// simulated host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l10_another_live_store_is_said_contested() {
    let host = Host::new();
    let (a_dir, b_dir) = (private_dir(), private_dir());
    let a = start(2, &host, Some(a_dir.path())).await;
    let health = || async {
        let response = reqwest::get(format!("{}/healthz", a.base)).await.unwrap();
        (response.status(), response.json::<Value>().await.unwrap())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while health().await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "A never healthy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = start(2, &host, Some(b_dir.path())).await;
    let (status, _) = b
        .post(json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted"}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let body = loop {
        let (status, body) = health().await;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            break body;
        }
        assert!(Instant::now() < deadline, "A never said it: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(body["contested"], json!(["linux"]), "{body}");
    assert_eq!(body["unreadable"], json!([]), "{body}");
    let (_, pools) = a.call("GET", "/v1/pools", None).await;
    assert_eq!(pools["pools"][0]["contested"], 1, "{pools}");
    assert_eq!(host.instances_of("svc"), 1, "B's instance stays");
    b.service.stop(Duration::from_secs(1)).await.unwrap();
    a.service.stop(Duration::from_secs(1)).await.unwrap();
}

/// A temporary state directory only its owner may enter (L16): `tempfile`'s
/// follow the umask, and `serve` refuses a state directory others may enter.
fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap()
}
