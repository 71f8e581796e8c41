//! The engine's orderings, in process over the simulated backend (L6, L7):
//! a launch is made only once the job's lease is committed; a restart never
//! places a job that held a lease before its pool's first inventory; a stop
//! lets the calls in flight finish and commits what they decided.

mod client;

use client::support_client;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use billet::Service;
use billet::Store;
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_provider::{
    Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass,
};
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, SimulatedProvider, run_for};
use parking_lot::Mutex;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "t";

/// A simulated provider behind hooks: a launch may wait first, and may look
/// at the service (over HTTP) before it happens.
#[derive(Debug)]
struct Hooked {
    inner: SimulatedProvider,
    launch_delay: Duration,
    /// The service's address, once it listens: each launch reads its job
    /// there first and records what it saw.
    watch: Mutex<Option<String>>,
    seen: Mutex<Vec<(u64, Value)>>,
}

impl Hooked {
    fn new(owner: &str, host: &Host, launch_delay: Duration) -> Arc<Hooked> {
        Arc::new(Hooked {
            inner: SimulatedProvider::builder(owner)
                .host(host.clone())
                .clock(Arc::new(SystemClock))
                .build()
                .unwrap(),
            launch_delay,
            watch: Mutex::new(None),
            seen: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl Provider for Hooked {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        self.inner.accepts(trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        let base = self.watch.lock().clone();
        if let Some(base) = base {
            let id: u64 = spec
                .name
                .strip_prefix("job-")
                .and_then(|rest| rest.split('.').next())
                .and_then(|n| n.parse().ok())
                .unwrap();
            let job: Value = support_client()
                .get(format!("{base}/v1/jobs/{id}"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            self.seen.lock().push((id, job));
        }
        tokio::time::sleep(self.launch_delay).await;
        self.inner.launch(spec).await
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        self.inner.find(name).await
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        self.inner.list().await
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        self.inner.destroy(id).await
    }
}

fn config(yaml: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("billet.yaml");
    std::fs::write(&path, yaml).unwrap();
    Config::load(&path).unwrap()
}

const ONE: &str = "deployment: {id: order}
providers:
  - {name: linux, kind: docker, capacity: 4, docker: {image: img}}
routing: {default_kind: docker}
";

/// Two pools: jobs labelled `a` go to `a`, and to `b` when `a` is full.
const TWO: &str = "deployment: {id: order}
providers:
  - {name: a, kind: docker, capacity: 1, docker: {image: img}}
  - {name: b, kind: docker, capacity: 1, docker: {image: img}}
routing:
  routes:
    - {labels: [a], provider: a, fallback_kind: docker}
";

async fn start(
    yaml: &str,
    providers: &[(&str, Arc<dyn Provider>)],
    state: &Path,
) -> (Service, String) {
    let (store, records) = Store::open(state).unwrap();
    start_over(yaml, providers, store, records).await
}

async fn start_over(
    yaml: &str,
    providers: &[(&str, Arc<dyn Provider>)],
    store: Store,
    records: Vec<billet::record::JobRecord>,
) -> (Service, String) {
    let mut builder = Pools::builder(config(yaml)).settings(Settings {
        reconcile_every: Duration::from_millis(50),
        call_timeout: Duration::from_secs(5),
        orphan_grace: Duration::from_millis(200),
        ..Settings::default()
    });
    for (name, provider) in providers {
        builder = builder.provider(*name, Arc::clone(provider));
    }
    let pools = builder.build().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let service = Service::start(&pools, store, records, clock, TOKEN, listener)
        .await
        .unwrap();
    let base = format!("http://{}", service.addr());
    (service, base)
}

async fn post(base: &str, job: Value) -> Value {
    let response = support_client()
        .post(format!("{base}/v1/jobs"))
        .bearer_auth(TOKEN)
        .body(job.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    response.json().await.unwrap()
}

async fn get(base: &str, id: u64) -> Value {
    support_client()
        .get(format!("{base}/v1/jobs/{id}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn until(base: &str, id: u64, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let job = get(base, id).await;
        if job["state"] == state {
            return job;
        }
        assert!(Instant::now() < deadline, "job {id} never {state}: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn work(millis: u64) -> Value {
    json!({"command": run_for(Duration::from_millis(millis)), "trust": "trusted"})
}

// L6: every launch is made only after the job's lease (`running`, its pool)
// is committed and shown: many submissions at once, on a store whose every
// commit takes 30 ms, so that a launch made early could not miss it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_launch_follows_the_commit_of_its_lease() {
    let host = Host::new();
    let hooked = Hooked::new("order", &host, Duration::ZERO);
    let provider: Arc<dyn Provider> = Arc::clone(&hooked) as Arc<dyn Provider>;
    let store = Store::slow_memory(Duration::from_millis(30));
    let (service, base) = start_over(ONE, &[("linux", provider)], store, Vec::new()).await;
    *hooked.watch.lock() = Some(base.clone());
    let posts: Vec<_> = (0..24)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move { post(&base, work(50)).await })
        })
        .collect();
    for post in posts {
        post.await.unwrap();
    }
    for id in 1..=24 {
        until(&base, id, "finished").await;
    }
    let seen = hooked.seen.lock().clone();
    assert_eq!(seen.len(), 24, "one launch a job");
    for (id, job) in seen {
        assert_eq!(
            job["state"], "running",
            "job {id} launched before its lease was committed: {job}"
        );
        assert_eq!(job["pool"], "linux", "job {id}: {job}");
    }
    service.stop(Duration::from_secs(1)).await.unwrap();
}

// L6, B8: after a crash, a job that held a lease on pool `a` is not placed on
// `b` (which has room and whose inventory reads) while `a`'s cannot be read:
// it waits, shown `queued` (its pool still `a`), also across a second crash
// in that window, and is adopted on `a` once `a` answers; it never runs twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_a_restart_waits_for_the_pool_a_job_held() {
    let host = Host::new();
    let state = private_dir();
    let a = Hooked::new("order", &host, Duration::ZERO);
    let b = Hooked::new("order", &host, Duration::ZERO);
    let providers: [(&str, Arc<dyn Provider>); 2] = [
        ("a", Arc::clone(&a) as Arc<dyn Provider>),
        ("b", Arc::clone(&b) as Arc<dyn Provider>),
    ];
    let (first, base) = start(TWO, &providers, state.path()).await;
    let mut job = work(60_000);
    job["labels"] = json!(["a"]);
    post(&base, job).await;
    let running = until(&base, 1, "running").await;
    assert_eq!(running["pool"], "a");
    let instance = until_instance(&base, 1).await;
    first.abort();

    a.inner
        .fail_inventory(Some(Error::inventory_unavailable("pool a is away")));
    let (second, base) = start(TWO, &providers, state.path()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting = get(&base, 1).await;
    assert_eq!(waiting["state"], "queued", "not placed on b: {waiting}");
    assert_eq!(
        host.instances_of("order"),
        1,
        "never two instances of job 1"
    );
    // A second crash before `a` answered: the third start still knows where
    // job 1 held its lease.
    second.abort();
    let (second, base) = start(TWO, &providers, state.path()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let waiting = get(&base, 1).await;
    assert_eq!(
        waiting["state"], "queued",
        "still not placed on b: {waiting}"
    );
    assert_eq!(waiting["pool"], "a", "where it held its lease: {waiting}");
    assert_eq!(
        host.instances_of("order"),
        1,
        "never two instances of job 1"
    );
    a.inner.fail_inventory(None);
    let adopted = until(&base, 1, "running").await;
    assert_eq!(adopted["pool"], "a", "adopted where it ran: {adopted}");
    assert_eq!(adopted["instance"], instance, "the same instance");
    assert_eq!(host.instances_of("order"), 1);
    second.stop(Duration::from_secs(1)).await.unwrap();
}

async fn until_instance(base: &str, id: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let job = get(base, id).await;
        if job["instance"].is_string() {
            return job["instance"].clone();
        }
        assert!(Instant::now() < deadline, "job {id} never launched: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// L7: a stop lets a launch in flight finish within the grace and commits
// what it decided: the next start reads the job with its instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l7_a_stop_finishes_the_calls_in_flight_and_commits_them() {
    let host = Host::new();
    let state = private_dir();
    let slow = Hooked::new("order", &host, Duration::from_millis(400));
    let provider: Arc<dyn Provider> = Arc::clone(&slow) as Arc<dyn Provider>;
    let (service, base) = start(ONE, &[("linux", Arc::clone(&provider))], state.path()).await;
    post(&base, work(60_000)).await;
    until(&base, 1, "running").await;
    assert!(
        get(&base, 1).await["instance"].is_null(),
        "its launch is in flight"
    );
    service.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(host.instances_of("order"), 1, "the launch finished");
    let (_, records) = Store::open(state.path()).unwrap();
    assert!(
        records[0].instance.is_some(),
        "what the launch decided was committed before the stop ended: {:?}",
        records[0]
    );
}

/// A temporary state directory only its owner may enter (L16): `tempfile`'s
/// follow the umask, and `serve` refuses a state directory others may enter.
fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap()
}
