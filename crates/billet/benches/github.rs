//! `github`: issue 44's two benchmarks, each against its baseline in the
//! same run. GitHub's API is the loopback stand-in held to GitHub's
//! published description (G9), as in the tests.
//!
//! * **Deliveries** (G2): `workflow_job` `queued` deliveries accepted a
//!   second by a [`Service`] in this process with a `github:` section and
//!   its durable store (SQLite, WAL, `synchronous = FULL`; `github.db`
//!   beside it), over 32 connections, against `POST /v1/jobs` to the same
//!   kind of service (same configuration, same store kind, a fresh
//!   directory) in the same run. Each delivery is a GitHub job of its own
//!   (its own job id and delivery id, signed as GitHub signs), all of one
//!   run of the trusted scope, so that the run's facts are asked once. The
//!   pool has room for every runner, so each delivery also becomes a
//!   runner's billet job, placed and launched (its JIT config asked of the
//!   stand-in) while the deliveries come, as each `POST /v1/jobs` becomes a
//!   placed and launched job. A `503` (the intake's inbox full) is sent
//!   again after 10 ms, as GitHub's operator would redeliver; its latency
//!   counts from the first send, and the retries are reported. A run is
//!   3,000 timed requests (`BILLET_BENCH_REQUESTS`) after 300 untimed, so
//!   that a run fits in the intake's inbox ([`EVENTS`](billet::github::intake::EVENTS), 4,096); beside
//!   the rate accepted, the rate at which requests became billet jobs (from
//!   the first timed request to the last one's job made: for a delivery,
//!   its runner's job, through the intake) is reported. Bodies and
//!   signatures are made before the timed part. Three runs of each,
//!   interleaved; each side's median run by throughput. Goal: deliveries
//!   within 1.5x of jobs (jobs a second over deliveries a second).
//! * **Runner startup** (G5), on the real docker daemon: a `queued`
//!   delivery sent to the container of its runner started (the daemon's
//!   `start` event, its own nanosecond time), against a bare create and
//!   start of the same image in the pool's network mode (`none`) by the
//!   same client library plus one JIT round trip to the stand-in through
//!   billet's own API client, timed the same way, one at a time,
//!   interleaved. Goal: p50 within 1.25x. Beside them, the same bare
//!   container with no network stack at all (`NetworkDisabled`, which no
//!   pool uses: the daemon then skips its network sandbox, half of a
//!   start), and the JIT round trip and billet's docker provider's own
//!   launch of the same image (its confinement, D15, included), for a
//!   deployment of its own: what the service and the intake add, apart
//!   from what the provider's container costs the daemon.
//!
//! ```sh
//! cargo bench -p billet --bench github
//! BILLET_BENCH_REQUESTS=20000 BILLET_BENCH_STARTS=50 \
//!    cargo bench -p billet --bench github
//! ```
//!
//! `cargo test --benches` runs it once small (200 deliveries, 2 starts),
//! checking that every delivery became a runner's billet job and that every
//! call to the stand-in is one GitHub's description allows. Without a
//! docker daemon the startup part says so in one line (with
//! `BILLET_DOCKER_REQUIRED=1`, a failure).

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "../../billet-github/tests/support/standin.rs"]
#[allow(dead_code, unreachable_pub)]
mod standin;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use billet::github::Github;
use billet::github::deliveries::Deliveries;
use billet::github::webhook::Webhook;
use billet::token::Credentials;
use billet::{Limits, Service, Store};
use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_github::{Scope, sign};
use billet_provider::Provider;
use billet_scheduler::{Pools, Settings};
use billet_simulated::SimulatedProvider;
use bollard::query_parameters::EventsOptionsBuilder;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::{Value, json};
use standin::{Auth, StandIn};
use tokio::net::TcpListener;

const SECRET: &str = "the bench's webhook secret";
const GH_TOKEN: &str = "ghp_the-bench-token";
const TOKEN: &str = "bench-token-0123456789abcdef0123";
const JIT: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

/// Whether this is a real bench run (`cargo bench`).
fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name} takes a number, not {text:?}")),
        Err(_) => default,
    }
}

fn private_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("a secret file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .expect("the secret file made private");
}

/// `billet.yaml`: `pools` (a `providers:` list), routing to docker, and a
/// `github:` section over the stand-in at `url` whose one pool, `linux`,
/// runs `command`; its secrets in `dir`.
fn yaml(owner: &str, pools: &str, url: &str, dir: &Path, command: &str) -> String {
    format!(
        "deployment: {{id: {owner}}}
providers:
{pools}
routing: {{default_kind: docker}}
github:
  api_url: {url}
  token_file: {dir}/gh-token
  webhook_secret_file: {dir}/gh-secret
  scopes: [{{org: octo-org, trust: trusted}}]
  pools: [{{pool: linux, labels: [self-hosted, linux]}}]
  runner: {{command: {command}, idle_timeout: 1h}}
",
        dir = dir.display(),
    )
}

/// A service as `billet serve` wires one with a `github:` section: `yaml`
/// over `providers` (by pool name), its durable store in `dir`.
async fn service(yaml: &str, providers: Vec<(String, Arc<dyn Provider>)>, dir: &Path) -> Service {
    private_file(&dir.join("gh-token"), GH_TOKEN);
    private_file(&dir.join("gh-secret"), SECRET);
    let config = Config::from_yaml_str(yaml).expect("the bench's configuration");
    let settings = config.github().expect("a github section").clone();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let api = billet::github::wiring::api(&settings, Arc::clone(&clock)).expect("the API client");
    let webhook = Arc::new(Webhook::new(
        SECRET.as_bytes().to_vec(),
        Deliveries::open(dir).expect("github.db"),
    ));
    let github = Github::new(settings, api, webhook);
    let mut builder = Pools::builder(config).settings(Settings {
        reconcile_every: Duration::from_secs(3600),
        call_timeout: Duration::from_secs(60),
        ..Settings::default()
    });
    for (name, provider) in providers {
        let wrapped = github.provider(&name, provider);
        builder = builder.provider(name, wrapped);
    }
    let pools = builder.build().expect("the pools");
    let (store, records) = Store::open(dir).expect("the store opens");
    let identity = store.identity().map(|id| id.as_str().to_owned());
    let credentials =
        Credentials::parse(&format!("{TOKEN}\n"), Path::new("token")).expect("the token");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let limits = Limits {
        github: Some(github.webhook()),
        ..Limits::default()
    };
    let service = Service::start_with(&pools, store, records, clock, credentials, listener, limits)
        .await
        .expect("the service starts");
    github
        .start(service.engine_parts(), &pools, identity)
        .expect("the intake starts");
    service
}

/// The stand-in, with run 10 of `octo-org/app` (the scope's own code).
async fn standin() -> StandIn {
    let standin = StandIn::start(Auth::Token(GH_TOKEN.to_owned())).await;
    let repo = json!({"id": 1, "full_name": "octo-org/app", "private": true});
    standin.state.lock().runs.insert(
        10,
        json!({"id": 10, "repository": repo, "head_repository": repo}),
    );
    standin
}

/// GitHub job `id`'s delivery at `action` (run 10), taken by `runner`.
fn event(action: &str, id: u64, runner: Option<&str>) -> String {
    json!({
        "action": action,
        "workflow_job": {
            "id": id,
            "run_id": 10,
            "labels": ["self-hosted", "linux"],
            "status": action,
            "runner_name": runner,
        },
        "repository": {"id": 1, "full_name": "octo-org/app", "private": true},
    })
    .to_string()
}

/// A request ready to send: the body, and its headers.
#[derive(Clone)]
struct Request {
    body: String,
    headers: Vec<(&'static str, String)>,
}

/// The `n`th delivery of `body`, signed.
fn delivery(n: u64, body: String) -> Request {
    let signature = sign(SECRET.as_bytes(), body.as_bytes());
    Request {
        headers: vec![
            ("X-GitHub-Event", "workflow_job".to_owned()),
            ("X-GitHub-Delivery", format!("bench-{n}")),
            ("X-Hub-Signature-256", signature),
            ("content-type", "application/json".to_owned()),
        ],
        body,
    }
}

/// A `POST /v1/jobs` of a runner-like job.
fn job_request() -> Request {
    Request {
        body: json!({
            "command": billet_simulated::run_for(Duration::from_secs(3600)),
            "trust": "trusted",
        })
        .to_string(),
        headers: vec![
            ("authorization", format!("Bearer {TOKEN}")),
            ("content-type", "application/json".to_owned()),
        ],
    }
}

/// `requests` sent over `clients`, each as soon as its client's last was
/// answered; a `503` is sent again after 10 ms. Answers the wall time, the
/// latency histogram (µs, first send to the accepting answer), and the
/// count of retries; panics on any answer but `expect` and `503`.
async fn phase(
    clients: &[reqwest::Client],
    url: &str,
    requests: Arc<Vec<Request>>,
    expect: u16,
) -> (Duration, Histogram<u64>, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, url, requests, next) = (
                client.clone(),
                url.to_owned(),
                Arc::clone(&requests),
                Arc::clone(&next),
            );
            tokio::spawn(async move {
                let mut latency =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds");
                let mut retries = 0;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(request) = requests.get(i) else {
                        break;
                    };
                    let sent = Instant::now();
                    loop {
                        let mut post = client.post(&url).body(request.body.clone());
                        for (name, value) in &request.headers {
                            post = post.header(*name, value);
                        }
                        let response = post.send().await.expect("the service answers");
                        let status = response.status().as_u16();
                        let answer = response.bytes().await.expect("the answer's body");
                        if status == expect {
                            break;
                        }
                        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&answer));
                        retries += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                    latency.saturating_record(micros.max(1));
                }
                (latency, retries)
            })
        })
        .collect();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram");
    let mut retries = 0;
    for task in tasks {
        let (theirs, n) = task.await.expect("a client task panicked");
        latency.add(theirs).expect("histograms of the same bounds");
        retries += n;
    }
    (started.elapsed(), latency, retries)
}

/// What one run of the deliveries part measured.
struct Accepted {
    rate: f64,
    /// Requests a second, from the first timed one sent to the last one's
    /// billet job made (for a delivery, its runner's job).
    made: f64,
    latency: Histogram<u64>,
    retries: usize,
}

/// Every job the service lists, over every page.
async fn all_jobs(client: &reqwest::Client, base: &str) -> Vec<Value> {
    let mut jobs = Vec::new();
    let mut after = 0;
    loop {
        let page: Value = client
            .get(format!("{base}/v1/jobs?limit=1000&after={after}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET /v1/jobs")
            .json()
            .await
            .expect("a page of jobs");
        jobs.extend(page["jobs"].as_array().expect("jobs").iter().cloned());
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => return jobs,
        }
    }
}

/// One run of the deliveries part: a fresh service, `warmup` requests
/// untimed, then `requests` timed over `concurrency` connections;
/// deliveries when `github`, else `POST /v1/jobs`. With `check`, waits
/// until every request is a billet job.
async fn accept_once(
    github: bool,
    concurrency: usize,
    warmup: usize,
    requests: usize,
    root: &Path,
    check: bool,
) -> Accepted {
    let total = warmup + requests;
    let standin = standin().await;
    let dir = tempfile::Builder::new()
        .prefix("billet-github-bench-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(root)
        .expect("a directory for the store");
    let provider: Arc<dyn Provider> = Arc::new(
        SimulatedProvider::builder("bench")
            .clock(Arc::new(SystemClock))
            .build()
            .expect("a simulated provider"),
    );
    let yaml = yaml(
        "bench",
        &format!("  - {{name: linux, kind: docker, capacity: {total}, docker: {{image: runner}}}}"),
        &standin.url,
        dir.path(),
        "[billet-simulated, run-for, 3600s]",
    );
    let service = service(&yaml, vec![("linux".to_owned(), provider)], dir.path()).await;
    let base = format!("http://{}", service.addr());
    let (url, all): (String, Vec<Request>) = if github {
        (
            format!("{base}/v1/github/webhook"),
            (1..=total as u64)
                .map(|n| delivery(n, event("queued", n, None)))
                .collect(),
        )
    } else {
        (format!("{base}/v1/jobs"), vec![job_request(); total])
    };
    let expect = if github { 202 } else { 201 };
    let clients: Vec<reqwest::Client> = (0..concurrency)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .tcp_nodelay(true)
                .build()
                .expect("an HTTP client")
        })
        .collect();
    let timed = all[warmup..].to_vec();
    let warm = all[..warmup].to_vec();
    phase(&clients, &url, Arc::new(warm), expect).await;
    let begun = Instant::now();
    let (wall, latency, retries) = phase(&clients, &url, Arc::new(timed), expect).await;
    // Every request is a billet job (ids are given in order): the last
    // one's id is `total`.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let status = clients[0]
            .get(format!("{base}/v1/jobs/{total}"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("GET /v1/jobs/{id}")
            .status();
        if status.is_success() {
            break;
        }
        assert!(Instant::now() < deadline, "never {total} billet jobs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let made = begun.elapsed();
    if check {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let jobs = all_jobs(&clients[0], &base).await;
            if jobs.len() == total {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {total} requests became billet jobs",
                jobs.len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        standin.assert_no_violation();
    }
    drop(clients);
    service
        .stop(Duration::from_secs(5))
        .await
        .expect("the service stops");
    Accepted {
        rate: requests as f64 / wall.as_secs_f64(),
        made: requests as f64 / made.as_secs_f64(),
        latency,
        retries,
    }
}

fn median_by_rate(mut runs: Vec<Accepted>) -> Accepted {
    runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    runs.swap_remove(runs.len() / 2)
}

fn accept_part(full: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let requests = if full {
        env_usize("BILLET_BENCH_REQUESTS", 3_000)
    } else {
        200
    };
    let concurrency = 32;
    let rounds = if full { 3 } else { 1 };
    let root = std::env::temp_dir();
    let (mut deliveries, mut jobs) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Interleaved, each side first in turn.
        for github in [round % 2 == 0, round % 2 == 1] {
            let run = runtime.block_on(accept_once(
                github,
                concurrency,
                requests / 10,
                requests,
                &root,
                !full,
            ));
            println!(
                "deliveries: run {round}, {}: {:.0} a second accepted, {:.0} a second made billet jobs, p50 {} µs, p99 {} µs, {} sent again after 503",
                if github {
                    "queued deliveries"
                } else {
                    "POST /v1/jobs"
                },
                run.rate,
                run.made,
                run.latency.value_at_quantile(0.5),
                run.latency.value_at_quantile(0.99),
                run.retries,
            );
            if github {
                deliveries.push(run);
            } else {
                jobs.push(run);
            }
        }
    }
    let (d, j) = (median_by_rate(deliveries), median_by_rate(jobs));
    let ratio = j.rate / d.rate;
    println!(
        "ratio deliveries: POST /v1/jobs {:.0}/s over queued deliveries {:.0}/s = {ratio:.2}x (goal <= 1.5x: {}); p50 {} vs {} µs, p99 {} vs {} µs; {requests} requests, {concurrency} connections, durable, medians of {rounds}",
        j.rate,
        d.rate,
        if ratio <= 1.5 { "met" } else { "MISSED" },
        d.latency.value_at_quantile(0.5),
        j.latency.value_at_quantile(0.5),
        d.latency.value_at_quantile(0.99),
        j.latency.value_at_quantile(0.99),
    );
}

/// Container `start` events of the daemon: names to the daemon's time of
/// each, as the events come.
struct Starts {
    seen: tokio::sync::mpsc::UnboundedReceiver<(String, SystemTime)>,
    task: tokio::task::JoinHandle<()>,
}

impl Starts {
    async fn open() -> Starts {
        let (send, seen) = tokio::sync::mpsc::unbounded_channel();
        let (ready, opened) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let docker = support::raw_client();
            let filters = HashMap::from([
                ("type".to_owned(), vec!["container".to_owned()]),
                ("event".to_owned(), vec!["start".to_owned()]),
            ]);
            let mut events =
                docker.events(Some(EventsOptionsBuilder::new().filters(&filters).build()));
            let _ = ready.send(());
            while let Some(Ok(event)) = events.next().await {
                let name = event
                    .actor
                    .and_then(|actor| actor.attributes)
                    .and_then(|attributes| attributes.get("name").cloned())
                    .unwrap_or_default();
                let nanos = u64::try_from(event.time_nano.unwrap_or(0)).unwrap_or(0);
                if send
                    .send((name, UNIX_EPOCH + Duration::from_nanos(nanos)))
                    .is_err()
                {
                    return;
                }
            }
        });
        opened.await.expect("the events task");
        // The stream is open once the daemon answered its headers; a short
        // pause lets that happen before the first container starts.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Starts { seen, task }
    }

    /// The next start of a container whose name `matches`, within 60 s.
    async fn next(&mut self, matches: impl Fn(&str) -> bool) -> (String, SystemTime) {
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some((name, at)) = self.seen.recv().await {
                if matches(&name) {
                    return (name, at);
                }
            }
            panic!("the daemon's events ended");
        })
        .await;
        found.expect("a container started within 60 s")
    }
}

impl Drop for Starts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn quantile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples.get(i).copied().unwrap_or_default()
}

fn since(start: SystemTime, at: SystemTime) -> Duration {
    at.duration_since(start).unwrap_or_default()
}

/// What the startup part measured: the delivery to its runner's start,
/// the bare JIT round trip and create and start (in the pool's network
/// mode, and with no network stack), and the JIT round trip and the docker
/// provider's own launch (with its confinement, D15).
struct Startups {
    subject: Vec<Duration>,
    bare: Vec<Duration>,
    no_network: Vec<Duration>,
    provider: Vec<Duration>,
}

async fn startup(starts: usize) -> Startups {
    let owner = support::unique_id("ghbench");
    let standin = standin().await;
    let dir = tempfile::Builder::new()
        .prefix("billet-github-startup-")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .expect("a directory");
    let pool = support::docker_config(
        &owner,
        &support::Pool {
            capacity: u32::try_from(starts + 2).unwrap_or(u32::MAX),
            endpoint: support::daemon_endpoint(),
        },
    );
    let providers_yaml: String = pool
        .lines()
        .skip_while(|line| !line.starts_with("providers:"))
        .skip(1)
        .take_while(|line| line.starts_with(' '))
        .map(|line| format!("{line}\n"))
        .collect();
    let command = format!("[sh, -c, 'test -n \"${JIT}\" && sleep 2']");
    let yaml = yaml(
        &owner,
        providers_yaml.trim_end(),
        &standin.url,
        dir.path(),
        &command,
    );
    let config = Config::from_yaml_str(&yaml).expect("the configuration");
    let providers = billet::backends::build(&config, Duration::from_secs(30), None)
        .expect("the docker pool")
        .named;
    let service = service(&yaml, providers, dir.path()).await;
    let base = format!("http://{}", service.addr());
    let client = reqwest::Client::new();
    let docker = support::raw_client();
    let settings = config.github().expect("github").clone();
    let api = billet::github::wiring::api(&settings, Arc::new(SystemClock)).expect("the API");
    let scope = Scope::Org("octo-org".to_owned());
    let labels = vec!["self-hosted".to_owned(), "linux".to_owned()];
    // The provider alone, for a deployment of its own (a client removes
    // only what it created).
    let direct_owner = format!("{owner}-direct");
    let direct_config = Config::from_yaml_str(&support::docker_config(
        &direct_owner,
        &support::Pool {
            capacity: 2,
            endpoint: support::daemon_endpoint(),
        },
    ))
    .expect("the provider's configuration");
    let direct = billet::backends::build(&direct_config, Duration::from_secs(30), None)
        .expect("the docker provider")
        .named
        .remove(0)
        .1;
    let mut starts_seen = Starts::open().await;
    let (mut subject, mut baseline, mut provider) = (Vec::new(), Vec::new(), Vec::new());
    let mut no_network = Vec::new();
    for n in 0..starts {
        // Four kinds, each once per round, in an order that turns.
        for which in 0..4 {
            let kind = (which + n) % 4;
            let id = n as u64 + 1;
            if kind == 0 {
                let request = delivery(id * 10, event("queued", id, None));
                let sent = SystemTime::now();
                let mut post = client
                    .post(format!("{base}/v1/github/webhook"))
                    .body(request.body);
                for (name, value) in request.headers {
                    post = post.header(name, value);
                }
                let status = post.send().await.expect("the webhook answers").status();
                assert_eq!(status.as_u16(), 202);
                let (name, at) = starts_seen.next(|name| name.contains(".job-")).await;
                subject.push(since(sent, at));
                // GitHub hands the runner its job, which completes: the
                // runner is no longer needed, and exits by itself.
                for (k, action) in [(1, "in_progress"), (2, "completed")] {
                    let request = delivery(id * 10 + k, event(action, id, Some(&name)));
                    let mut post = client
                        .post(format!("{base}/v1/github/webhook"))
                        .body(request.body);
                    for (header, value) in request.headers {
                        post = post.header(header, value);
                    }
                    post.send().await.expect("the webhook answers");
                }
            } else if kind == 1 {
                let name = format!("direct-{id}");
                // The container's name on the daemon starts with the
                // instance's (billet-docker's naming).
                let prefix = format!("billet-{name}-");
                let sent = SystemTime::now();
                let jit = api
                    .generate_jitconfig(&scope, &name, 1, &labels)
                    .await
                    .expect("a JIT config");
                let mut spec = billet_provider::Spec::new(&name, ["sleep", "2"]);
                spec.image = support::TEST_IMAGE.to_owned();
                spec.trust = billet_provider::TrustClass::Trusted;
                spec.env.set(JIT, jit.encoded());
                let instance = direct.launch(spec).await.expect("the provider launches");
                let (_, at) = starts_seen.next(|seen| seen.starts_with(&prefix)).await;
                provider.push(since(sent, at));
                tokio::time::sleep(Duration::from_millis(2500)).await;
                let _ = direct.destroy(&instance.id).await;
                continue;
            } else {
                // The two bare baselines: in the pool's network mode
                // (`none`), and with no network stack at all.
                let disabled = kind == 3;
                let name = format!("{owner}-baseline-{n}-{kind}");
                let sent = SystemTime::now();
                let jit = api
                    .generate_jitconfig(&scope, &name, 1, &labels)
                    .await
                    .expect("a JIT config");
                bare_start(&docker, &name, jit.encoded(), disabled).await;
                let (_, at) = starts_seen.next(|seen| seen == name).await;
                if disabled {
                    no_network.push(since(sent, at));
                } else {
                    baseline.push(since(sent, at));
                }
            }
            // The last one's container ends before the next is measured.
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
    }
    standin.assert_no_violation();
    service
        .stop(Duration::from_secs(10))
        .await
        .expect("the service stops");
    support::remove_containers_of(&owner).await;
    support::remove_containers_of(&direct_owner).await;
    Startups {
        subject,
        bare: baseline,
        no_network,
        provider,
    }
}

/// A bare create and start of the test image named `name`, with `jit` in
/// its environment, removed when it exits: in the pool's network mode
/// (`none`: the daemon sets up a network sandbox with a loopback device), or
/// with `NetworkDisabled` (no sandbox at all: a setting no pool uses).
async fn bare_start(docker: &bollard::Docker, name: &str, jit: &str, network_disabled: bool) {
    let body = bollard::models::ContainerCreateBody {
        image: Some(support::TEST_IMAGE.to_owned()),
        cmd: Some(vec!["sleep".to_owned(), "2".to_owned()]),
        env: Some(vec![format!("{JIT}={jit}")]),
        network_disabled: network_disabled.then_some(true),
        host_config: Some(bollard::models::HostConfig {
            network_mode: Some("none".to_owned()),
            auto_remove: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = bollard::query_parameters::CreateContainerOptionsBuilder::new()
        .name(name)
        .build();
    docker
        .create_container(Some(options), body)
        .await
        .expect("the baseline's container");
    docker
        .start_container(
            name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .expect("the baseline's container starts");
}

fn startup_part(full: bool) {
    if !support::daemon("the github bench's runner startup") {
        return;
    }
    let starts = if full {
        env_usize("BILLET_BENCH_STARTS", 30)
    } else {
        2
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let Startups {
        mut subject,
        bare: mut baseline,
        mut no_network,
        mut provider,
    } = runtime.block_on(startup(starts));
    let (p50, p99) = (quantile(&mut subject, 0.5), quantile(&mut subject, 0.99));
    let (b50, b99) = (quantile(&mut baseline, 0.5), quantile(&mut baseline, 0.99));
    let (n50, n99) = (
        quantile(&mut no_network, 0.5),
        quantile(&mut no_network, 0.99),
    );
    let (d50, d99) = (quantile(&mut provider, 0.5), quantile(&mut provider, 0.99));
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "startup: queued delivery to runner container started: p50 {p50:.1?}, p99 {p99:.1?}; bare JIT round trip + create + start, the pool's network mode (none): p50 {b50:.1?}, p99 {b99:.1?}; {starts} of each, interleaved"
    );
    println!(
        "ratio startup: {p50:.1?} / {b50:.1?} = {:.2}x (goal p50 <= 1.25x: {}); p99 {:.2}x",
        ratio(p50, b50),
        if ratio(p50, b50) <= 1.25 {
            "met"
        } else {
            "MISSED"
        },
        ratio(p99, b99)
    );
    println!(
        "ratio startup against a bare container with no network stack (NetworkDisabled, which no pool uses): {p50:.1?} / {n50:.1?} (p99 {n99:.1?}) = {:.2}x; p99 {:.2}x",
        ratio(p50, n50),
        ratio(p99, n99)
    );
    println!(
        "ratio startup against the provider: {p50:.1?} / {d50:.1?} (JIT round trip + DockerProvider::launch, its confinement included; p99 {d99:.1?}) = {:.2}x; p99 {:.2}x",
        ratio(p50, d50),
        ratio(p99, d99)
    );
}

fn main() {
    // What the service does, with timestamps, to see where a startup's
    // time goes: `BILLET_BENCH_LOG=billet=debug`.
    if let Ok(filter) = std::env::var("BILLET_BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .init();
    }
    let full = full_run();
    // `BILLET_BENCH_ONLY=deliveries` or `startup`: one part alone.
    let only = std::env::var("BILLET_BENCH_ONLY").unwrap_or_default();
    if only != "startup" {
        accept_part(full);
    }
    if only != "deliveries" {
        startup_part(full);
    }
}
