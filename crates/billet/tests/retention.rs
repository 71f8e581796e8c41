//! L12 in process, over the simulated backend: `GET /v1/jobs` in pages,
//! ended jobs served from the store once they leave memory, `--retain`
//! removing them (with their keys) in modelled time, and a row removed from
//! the store by hand breaking nothing else.

mod client;

use client::support_client;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet::engine::Bounds;
use billet::{Limits, Service, Store};
use billet_clock::{Clock, ManualClock};
use billet_config::Config;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, SimulatedProvider, run_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const TOKEN: &str = "retention-token-0123456789abcdef";
const OWNER: &str = "retention";

fn config(capacity: u32) -> Config {
    Config::from_yaml_str(&format!(
        "deployment: {{id: {OWNER}}}
providers:
  - {{name: linux, kind: docker, capacity: {capacity}, docker: {{image: img}}}}
routing: {{default_kind: docker}}
"
    ))
    .unwrap()
}

struct Running {
    service: Service,
    base: String,
    client: reqwest::Client,
    clock: Arc<ManualClock>,
}

/// A service over `host` on the durable store in `dir`, timed by `clock`,
/// keeping ended jobs for `retain`.
async fn start(
    host: &Host,
    dir: &Path,
    clock: &Arc<ManualClock>,
    capacity: u32,
    retain: Duration,
) -> Running {
    let shared: Arc<dyn Clock> = Arc::clone(clock) as Arc<dyn Clock>;
    let provider = Arc::new(
        SimulatedProvider::builder(OWNER)
            .host(host.clone())
            .clock(Arc::clone(&shared))
            .build()
            .unwrap(),
    );
    let pools = Pools::builder(config(capacity))
        .provider("linux", provider as Arc<dyn billet_provider::Provider>)
        .settings(Settings {
            reconcile_every: Duration::from_secs(10),
            orphan_grace: Duration::from_secs(1),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let (store, records) = Store::open(dir).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let limits = Limits {
        engine: Bounds {
            retain,
            ..Bounds::default()
        },
        ..Limits::default()
    };
    let service = Service::start_with(
        &pools,
        store,
        records,
        shared,
        TOKEN.into(),
        listener,
        limits,
    )
    .await
    .unwrap();
    let base = format!("http://{}", service.addr());
    Running {
        service,
        base,
        client: support_client(),
        clock: Arc::clone(clock),
    }
}

impl Running {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {TOKEN}"));
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn submit(&self, secs: u64, key: Option<&str>) -> (StatusCode, Value) {
        let mut body = json!({"command": run_for(Duration::from_secs(secs)), "trust": "trusted"});
        if let Some(key) = key {
            body["key"] = json!(key);
        }
        self.call("POST", "/v1/jobs", Some(body)).await
    }

    async fn state(&self, id: u64) -> (StatusCode, String) {
        let (status, job) = self.call("GET", &format!("/v1/jobs/{id}"), None).await;
        (status, job["state"].as_str().unwrap_or("").to_owned())
    }

    /// Moves the clock on a second at a time (the engine's timers fire as it
    /// goes) until `done` holds; fails after `bound` of modelled time.
    async fn advance_until<F>(&self, bound: Duration, what: &str, done: F)
    where
        F: AsyncFnMut(&Running) -> bool,
    {
        self.advance_by_until(Duration::from_secs(1), bound, what, done)
            .await;
    }

    /// [`advance_until`](Running::advance_until), `step` at a time.
    async fn advance_by_until<F>(&self, step: Duration, bound: Duration, what: &str, mut done: F)
    where
        F: AsyncFnMut(&Running) -> bool,
    {
        let until = self.clock.now() + bound;
        let wall = Instant::now() + Duration::from_secs(60);
        loop {
            // The engine has done all it had to at this instant (H13): a
            // loaded machine slows the test, never skips the engine's work.
            let now = self.clock.now();
            if let Err(last) = self.service.quiescent(now, Duration::from_secs(20)).await {
                panic!("{what}: the engine was not quiescent at {now:?} (it last said {last:?})");
            }
            if done(self).await {
                break;
            }
            assert!(
                self.clock.now() < until && Instant::now() < wall,
                "{what}: not within {bound:?} of modelled time"
            );
            self.clock.advance(step).unwrap();
        }
    }

    /// Every id `GET /v1/jobs` answers, page by page, `limit` at a time.
    async fn walk(&self, query: &str, limit: usize) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut after = 0;
        loop {
            let (status, page) = self
                .call(
                    "GET",
                    &format!("/v1/jobs?limit={limit}&after={after}{query}"),
                    None,
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{page}");
            let jobs = page["jobs"].as_array().unwrap();
            assert!(jobs.len() <= limit, "{page}");
            ids.extend(jobs.iter().map(|job| job["id"].as_u64().unwrap()));
            match page["next"].as_u64() {
                Some(next) => after = next,
                None => {
                    assert!(page["next"].is_null(), "{page}");
                    return ids;
                }
            }
        }
    }
}

fn manual() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
    ))
}

// L12: pages run in submission order across jobs in memory and jobs ended
// (read from the store); `state` picks either; bounds on `limit` and `after`
// are `400` naming the field. An ended job keeps answering by id and by key
// until retention removes it, with its key: then `404`, and its key takes a
// new job whose id is past every id given, also after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l12_pages_and_retention_over_http() {
    let host = Host::new();
    let dir = private_dir();
    let clock = manual();
    let hour = Duration::from_secs(3600);
    let running = start(&host, dir.path(), &clock, 2, hour).await;
    for id in 1..=5u64 {
        let secs = if id <= 3 { 2 } else { 100_000 };
        let (status, job) = running.submit(secs, Some(&format!("k{id}"))).await;
        assert_eq!(status, StatusCode::CREATED, "{job}");
        assert_eq!(job["id"], id);
    }
    running
        .advance_until(Duration::from_secs(300), "jobs 1 to 3 end", async |r| {
            let mut ended = true;
            for id in 1..=3 {
                ended &= r.state(id).await.1 == "finished";
            }
            ended
        })
        .await;
    for limit in [1, 2, 3, 100] {
        assert_eq!(
            running.walk("", limit).await,
            [1, 2, 3, 4, 5],
            "limit {limit}"
        );
    }
    assert_eq!(running.walk("&state=finished", 2).await, [1, 2, 3]);
    let unfinished: Vec<u64> = [
        running.walk("&state=running", 1).await,
        running.walk("&state=queued", 1).await,
    ]
    .concat();
    let mut unfinished = unfinished;
    unfinished.sort_unstable();
    assert_eq!(unfinished, [4, 5]);
    let (status, page) = running.call("GET", "/v1/jobs", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["jobs"].as_array().unwrap().len(), 5);
    assert!(page["next"].is_null(), "{page}");
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("after=-3", "after"),
        ("sort=id", "sort"),
    ] {
        let (status, answer) = running
            .call("GET", &format!("/v1/jobs?{query}"), None)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains(&format!("`{field}`")),
            "{query}: {answer}"
        );
    }
    // Ended, out of memory, still answered: by id, by key, and a cancel says
    // it ended.
    let (status, job) = running.call("GET", "/v1/jobs/2", None).await;
    assert_eq!(
        (status, job["exit_code"].clone()),
        (StatusCode::OK, json!(0))
    );
    let (status, again) = running.submit(2, Some("k2")).await;
    assert_eq!(
        (status, again["id"].clone()),
        (StatusCode::OK, json!(2)),
        "{again}"
    );
    let (status, _) = running.call("DELETE", "/v1/jobs/2", None).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Past the retention: jobs 1 to 3 go, keys and all; 4 and 5 stay.
    running
        .advance_by_until(
            Duration::from_secs(10),
            hour + Duration::from_secs(200),
            "ended jobs pruned",
            async |r| r.state(3).await.0 == StatusCode::NOT_FOUND,
        )
        .await;
    for id in 1..=3 {
        assert_eq!(running.state(id).await.0, StatusCode::NOT_FOUND, "job {id}");
    }
    assert_eq!(running.walk("", 2).await, [4, 5]);
    let (status, new) = running.submit(2, Some("k1")).await;
    assert_eq!(
        (status, new["id"].clone()),
        (StatusCode::CREATED, json!(6)),
        "{new}"
    );
    let (status, old) = running.submit(100_000, Some("k4")).await;
    assert_eq!(
        (status, old["id"].clone()),
        (StatusCode::OK, json!(4)),
        "{old}"
    );
    running.service.stop(Duration::from_secs(5)).await.unwrap();

    // A restart: jobs 4 and 5 ended at their (default, one hour) timeout
    // and are kept; job 6 alone comes back to memory; the next id is 7.
    let (store, records) = Store::open(dir.path()).unwrap();
    let ids: Vec<u64> = records.iter().map(|r| r.id).collect();
    assert_eq!(ids, [6]);
    assert_eq!(store.last_id(), 6);
    drop(store);
    let running = start(&host, dir.path(), &clock, 2, hour).await;
    assert_eq!(
        running.state(4).await,
        (StatusCode::OK, "failed".to_owned())
    );
    assert_eq!(running.walk("", 1).await, [4, 5, 6]);
    let (status, job) = running.submit(2, None).await;
    assert_eq!((status, job["id"].clone()), (StatusCode::CREATED, json!(7)));
    running.service.stop(Duration::from_secs(5)).await.unwrap();
}

// L12: a row removed from the store by hand (an operator's `DELETE` in
// sqlite3) hides no other job: the jobs before and after it keep their
// state and changes, its id answers `404`, its instance is collected as an
// orphan, and a new submission is committed and placed with the next id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l12_a_removed_row_breaks_nothing() {
    let host = Host::new();
    let dir = private_dir();
    let clock = manual();
    let running = start(&host, dir.path(), &clock, 3, Duration::from_secs(3600)).await;
    for _ in 1..=3 {
        assert_eq!(running.submit(100_000, None).await.0, StatusCode::CREATED);
    }
    running
        .advance_until(Duration::from_secs(60), "three jobs running", async |r| {
            let (_, page) = r.call("GET", "/v1/jobs?state=running", None).await;
            page["jobs"].as_array().unwrap().len() == 3
        })
        .await;
    running.service.stop(Duration::from_secs(5)).await.unwrap();
    assert_eq!(host.instances_of(OWNER), 3);
    let conn = rusqlite::Connection::open(dir.path().join("billet.db")).unwrap();
    assert_eq!(
        conn.execute("DELETE FROM jobs WHERE id = 2", []).unwrap(),
        1
    );
    drop(conn);

    let running = start(&host, dir.path(), &clock, 3, Duration::from_secs(3600)).await;
    assert_eq!(running.state(2).await.0, StatusCode::NOT_FOUND);
    let (status, job) = running.submit(100_000, None).await;
    assert_eq!(
        (status, job["id"].clone()),
        (StatusCode::CREATED, json!(4)),
        "{job}"
    );
    running
        .advance_until(
            Duration::from_secs(120),
            "1, 3 and 4 running, 2's instance gone",
            async |r| {
                let (_, page) = r.call("GET", "/v1/jobs?state=running", None).await;
                let ids: Vec<u64> = page["jobs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|job| job["id"].as_u64().unwrap())
                    .collect();
                ids == [1, 3, 4] && host.instances_of(OWNER) == 3
            },
        )
        .await;
    assert_eq!(running.walk("", 1).await, [1, 3, 4]);
    let (status, cancelled) = running.call("DELETE", "/v1/jobs/3", None).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    running
        .advance_until(Duration::from_secs(60), "job 3 cancelled", async |r| {
            r.state(3).await.1 == "cancelled"
        })
        .await;
    running.service.stop(Duration::from_secs(5)).await.unwrap();
}

/// A temporary state directory only its owner may enter (L16): `tempfile`'s
/// follow the umask, and `serve` refuses a state directory others may enter.
fn private_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap()
}
