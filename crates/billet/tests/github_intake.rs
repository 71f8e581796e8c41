//! G3-G6 through the service in process: deliveries signed as GitHub signs
//! them reach the real webhook, engine and scheduler over the simulated
//! backend; GitHub's API is the loopback stand-in held to GitHub's published
//! description (G9). A runner is registered just in time with the pool's
//! labels and its instance's name, its JIT config handed in its environment
//! and nowhere else; runners are kept by demand; a runner taken by a job
//! trusted less than it is destroyed.

mod client;

#[path = "../../billet-github/tests/support/standin.rs"]
#[allow(dead_code, unreachable_pub)]
mod standin;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet::github::Github;
use billet::github::deliveries::Deliveries;
use billet::github::intake::{
    COMPLETED_GRACE, KEPT_BATCH, LOOK_EVERY, RECONCILE_CALLS, RUNNER_BLOCK, Ticked, Ticks,
    kept_full,
};
use billet::github::registering::JITCONFIG_VARIABLE;
use billet::github::webhook::Webhook;
use billet::token::Credentials;
use billet::{Limits, Service, Store};
use billet_clock::{Clock, ManualClock};
use billet_config::Config;
use billet_github::sign;
use billet_provider::Provider;
use billet_scheduler::{Pools, Settings};
use billet_simulated::{Host, SimulatedProvider};
use serde_json::{Value, json};
use standin::{Auth, StandIn};
use tokio::net::TcpListener;

const SECRET: &str = "the webhook's secret";
const TOKEN: &str = "ghp_the-operators-token";
const BILLET_TOKEN: &str = "all-grants-token-0123456789abcdef";
const OWNER: &str = "gh";

struct Running {
    service: Service,
    base: String,
    client: reqwest::Client,
    standin: StandIn,
    host: Host,
    clock: ManualClock,
    state: tempfile::TempDir,
    deliveries: u64,
    identity: Option<String>,
    /// The intake's ticks, when a driver ticks it ([`start_driven`]).
    ticks: Option<Ticks>,
}

fn private_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// The service with a `github:` section: one pool (`linux`, trusted work
/// only, as docker's provider) offering `self-hosted, linux`, the scope
/// `octo-org` trusted, runners that run for an hour of modelled time.
async fn start() -> Running {
    start_with("").await
}

/// [`start`], with `extra` added to the `github:` section.
async fn start_with(extra: &str) -> Running {
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    let state = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap();
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    start_in(standin, state, Host::new(), clock, extra).await
}

/// [`start_with`] `extra`, then job 1 of run 10 (the scope's own code)
/// queued and its runner running: the service and that runner's billet job.
async fn one_runner(extra: &str) -> (Running, Value) {
    let mut running = start_with(extra).await;
    let runner = running.first_runner().await;
    (running, runner)
}

/// [`start`] over `standin`, `state`, `host` and `clock` as an earlier
/// start left them (a restart).
/// `extra` is added to the `github:` section (indented as its keys).
async fn start_in(
    standin: StandIn,
    state: tempfile::TempDir,
    host: Host,
    clock: ManualClock,
    extra: &str,
) -> Running {
    start_ticked(standin, state, host, clock, extra, false).await
}

/// [`start`], its intake looking and reconciling only when ticked
/// ([`Running::tick`]), as the harness drives it (H14).
async fn start_driven() -> Running {
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    let state = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap();
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    // The reconcile comes at the first tick, then an hour later: past
    // what the test looks at.
    let extra = "  reconcile_every: 1h\n";
    start_ticked(standin, state, Host::new(), clock, extra, true).await
}

/// [`start_in`]; `driven`: the intake is ticked ([`Github::driven`]).
async fn start_ticked(
    standin: StandIn,
    state: tempfile::TempDir,
    host: Host,
    clock: ManualClock,
    extra: &str,
    driven: bool,
) -> Running {
    let dir = state.path();
    private_file(&dir.join("gh-token"), &format!("{TOKEN}\n"));
    private_file(&dir.join("gh-secret"), SECRET);
    let yaml = format!(
        "deployment: {{id: {OWNER}}}
providers:
  - {{name: linux, kind: docker, capacity: 4, docker: {{image: img}}}}
routing: {{default_kind: docker, untrusted_kinds: [docker]}}
github:
  api_url: {url}
  token_file: {dir}/gh-token
  webhook_secret_file: {dir}/gh-secret
  scopes: [{{org: octo-org, trust: trusted}}, {{repository: solo/tool, trust: trusted}}]
  pools: [{{pool: linux, labels: [self-hosted, linux]}}]
  runner: {{command: [billet-simulated, run-for, 3600s], idle_timeout: 10m}}
{extra}",
        url = standin.url,
        dir = dir.display(),
    );
    let config = Config::from_yaml_str(&yaml).unwrap();
    let settings = config.github().unwrap().clone();
    let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let api = billet::github::wiring::api(&settings, Arc::clone(&shared_clock)).unwrap();
    let webhook = Arc::new(Webhook::new(
        SECRET.as_bytes().to_vec(),
        Deliveries::open(dir).unwrap(),
    ));
    let mut github = Github::new(settings, api, webhook);
    let ticks = driven.then(|| github.driven());
    let simulated: Arc<dyn Provider> = Arc::new(
        SimulatedProvider::builder(OWNER)
            .host(host.clone())
            .clock(Arc::clone(&shared_clock))
            .build()
            .unwrap(),
    );
    let pools = Pools::builder(config)
        .provider("linux", github.provider("linux", simulated))
        .settings(Settings {
            reconcile_every: Duration::from_millis(50),
            call_timeout: Duration::from_secs(5),
            orphan_grace: Duration::from_millis(200),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let (store, records) = Store::open(dir).unwrap();
    let identity = store
        .identity()
        .map(|identity| identity.as_str().to_owned());
    let credentials = Credentials::parse(&format!("{BILLET_TOKEN}\n"), Path::new("token")).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let limits = Limits {
        github: Some(github.webhook()),
        ..Limits::default()
    };
    let service = Service::start_with(
        &pools,
        store,
        records,
        shared_clock,
        credentials,
        listener,
        limits,
    )
    .await
    .unwrap();
    github
        .start(service.engine_parts(), &pools, identity.clone())
        .unwrap();
    let base = format!("http://{}", service.addr());
    Running {
        service,
        base,
        client: client::support_client(),
        standin,
        host,
        clock,
        state,
        deliveries: 0,
        identity,
        ticks,
    }
}

/// A `workflow_job` delivery's body: GitHub job `id` of run `run` in
/// `repository`, at `action`, taken by `runner` once it is.
fn event(action: &str, id: u64, run: u64, repository: &str, runner: Option<&str>) -> Value {
    json!({
        "action": action,
        "workflow_job": {
            "id": id,
            "run_id": run,
            "labels": ["self-hosted", "Linux"],
            "status": action,
            "runner_name": runner,
        },
        "repository": {"id": 1, "full_name": repository, "private": true},
    })
}

/// The run `run` as GitHub's API answers it: from `repository`, its code
/// from `head`.
fn run(standin: &StandIn, run: u64, repository: &str, head: &str) {
    let repo = |name: &str| json!({"id": 1, "full_name": name, "private": true});
    standin.state.lock().runs.insert(
        run,
        json!({"id": run, "repository": repo(repository), "head_repository": repo(head)}),
    );
}

impl Running {
    async fn deliver(&mut self, body: &Value) -> reqwest::StatusCode {
        self.deliveries += 1;
        let body = body.to_string();
        self.client
            .post(format!("{}/v1/github/webhook", self.base))
            .header("X-GitHub-Event", "workflow_job")
            .header("X-GitHub-Delivery", format!("d-{}", self.deliveries))
            .header(
                "X-Hub-Signature-256",
                sign(SECRET.as_bytes(), body.as_bytes()),
            )
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn jobs(&self) -> Vec<Value> {
        let list: Value = self
            .client
            .get(format!("{}/v1/jobs?limit=100", self.base))
            .bearer_auth(BILLET_TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        list["jobs"].as_array().unwrap().clone()
    }

    async fn job(&self, id: u64) -> (Value, String) {
        let response = self
            .client
            .get(format!("{}/v1/jobs/{id}", self.base))
            .bearer_auth(BILLET_TOKEN)
            .send()
            .await
            .unwrap();
        let text = response.text().await.unwrap();
        (serde_json::from_str(&text).unwrap(), text)
    }

    /// Waits (at most 20 s) until `done` holds of the jobs.
    async fn until(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let jobs = self.jobs().await;
            if done(&jobs) {
                return jobs;
            }
            assert!(Instant::now() < deadline, "never {what}: {jobs:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Cancels billet job `id` over the API, as an operator would.
    async fn cancel(&self, id: u64) {
        let answer = self
            .client
            .delete(format!("{}/v1/jobs/{id}", self.base))
            .bearer_auth(BILLET_TOKEN)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{answer:?}");
    }

    /// Ticks the driven intake ([`start_driven`]) at the clock's time now.
    async fn tick(&self) -> Ticked {
        self.ticks.as_ref().expect("driven").tick().await.unwrap()
    }

    /// Ticks until the tick answers `want` as when a look would next act
    /// (at most 20 s). A runner retired at a tick counts as idle until its
    /// billet job has ended (a retirement that failed is tried again), so
    /// until the engine has ended it the answer is a look's interval.
    async fn tick_until_due(&self, want: SystemTime) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let Ticked { due, .. } = self.tick().await;
            if due == Some(want) {
                return;
            }
            let retry = self.clock.now() + LOOK_EVERY;
            assert_eq!(due, Some(retry), "neither {want:?} nor a look's interval");
            assert!(Instant::now() < deadline, "never answered {want:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The billet job of the runner made for GitHub job `github_job`.
    async fn runner_for(&self, github_job: u64) -> u64 {
        for job in self.jobs().await {
            let id = job["id"].as_u64().unwrap();
            if self.job(id).await.0["github"]["job_id"] == github_job {
                return id;
            }
        }
        panic!("no runner for GitHub job {github_job}");
    }

    /// Whether the runner of billet job `id` is registered.
    fn registered(&self, id: u64) -> bool {
        let part = format!(".job-{id}.");
        self.registrations()
            .iter()
            .any(|(name, _)| name.contains(&part))
    }

    /// The stand-in answers the next API call `status`, whatever it is.
    fn answer_next_call(&self, status: u16) {
        self.standin.state.lock().faults.push_back(standin::Fault {
            status,
            headers: vec![],
        });
    }

    /// The name of billet job `id`'s instance, as its runner registered
    /// (`STORE.job-ID.POOL`, L10).
    fn runner_name(&self, id: &Value) -> String {
        let part = format!(".job-{}.", id.as_u64().unwrap());
        let names: Vec<String> = self
            .registrations()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| name.contains(&part))
            .collect();
        assert_eq!(names.len(), 1, "one registration for job {id}: {names:?}");
        names[0].clone()
    }

    /// How many calls of GitHub's operation `operation` billet made.
    fn calls_to(&self, operation: &str) -> usize {
        let suffix = format!(" {operation}");
        self.standin
            .state
            .lock()
            .calls
            .iter()
            .filter(|call| call.ends_with(&suffix))
            .count()
    }

    /// How many times billet asked GitHub's API of a job.
    fn asked_of_jobs(&self) -> usize {
        self.calls_to("actions/get-job-for-workflow-run")
    }

    /// GitHub job 1, taken by runner `name`, completes at GitHub; its
    /// `completed` is lost; the runner's instance ends, and the clock moves
    /// two minutes on.
    fn job_1_done_unsaid(&self, name: &str) {
        self.standin.state.lock().jobs.insert(
            1,
            json!({"id": 1, "run_id": 10, "status": "completed", "conclusion": "success", "runner_name": name}),
        );
        let now = self.clock.now();
        assert!(self.host.stop_at(OWNER, name, now));
        self.clock.advance(Duration::from_secs(120)).unwrap();
    }

    /// Waits until billet asked GitHub's API of a job (`when`, for the
    /// failure's message) and settled one from the answer.
    async fn until_job_1_asked_and_settled(&self, when: &str) {
        until_true(&format!("the job is asked {when}"), || {
            self.asked_of_jobs() >= 1
        })
        .await;
        self.until_metrics(&[r#"billet_github_reconciled_total{what="settled"} 1"#])
            .await;
    }

    /// A crash and a restart: the service stops, and a new one starts over
    /// what it left (the stand-in, `github.db` and the store, the host and
    /// the clock), its `github:` section with `extra` added.
    async fn restarted(self, extra: &str) -> Running {
        let Running {
            service,
            standin,
            host,
            clock,
            state,
            deliveries,
            ..
        } = self;
        service.abort();
        let mut running = start_in(standin, state, host, clock, extra).await;
        running.deliveries = deliveries;
        running
    }

    /// Waits (at most 20 s) until `GET /metrics` shows every one of
    /// `series`.
    async fn until_metrics(&self, series: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self
                .client
                .get(format!("{}/metrics", self.base))
                .bearer_auth(BILLET_TOKEN)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if series.iter().all(|line| text.contains(line)) {
                return;
            }
            assert!(Instant::now() < deadline, "never {series:?} in\n{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `/healthz`'s status and body.
    async fn health(&self) -> (u16, Value) {
        let response = self
            .client
            .get(format!("{}/healthz", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// The registrations the stand-in holds: (name, labels).
    /// Job 1 of run 10 (the scope's own code) queued, and its runner
    /// running: that runner's billet job.
    async fn first_runner(&mut self) -> Value {
        run(&self.standin, 10, "octo-org/app", "octo-org/app");
        self.deliver(&event("queued", 1, 10, "octo-org/app", None))
            .await;
        let jobs = self
            .until("a runner runs", |jobs| live(jobs).len() == 1)
            .await;
        live(&jobs)[0].clone()
    }

    /// The end of a test: every call billet made was one GitHub's
    /// description allows; the service stops.
    fn end(self) {
        self.standin.assert_no_violation();
        self.service.abort();
    }

    fn registrations(&self) -> Vec<(String, Vec<String>)> {
        self.standin.registered()
    }
}

/// Waits (at most 20 s) until `done` holds; fails saying `what` otherwise.
async fn until_true(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "not seen: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn live(jobs: &[Value]) -> Vec<&Value> {
    jobs.iter()
        .filter(|job| job["state"] == "running" && job["instance"].is_string())
        .collect()
}

fn state_of(jobs: &[Value], id: u64) -> String {
    jobs.iter()
        .find(|job| job["id"] == id)
        .map_or("absent".to_owned(), |job| {
            job["state"].as_str().unwrap().to_owned()
        })
}

// G3, G5, G9: a queued job from the scope whose labels the pool offers (in
// another case) is taken: a runner's billet job pinned to the pool, with
// the GitHub job's labels and its trust; at launch, GitHub is asked for a
// JIT config named as the instance, with the pool's labels; the instance
// gets it in ACTIONS_RUNNER_INPUT_JITCONFIG, and no answer of billet's and
// no file of its state holds it. Every call billet made is one GitHub's
// description allows.
#[tokio::test]
async fn g5_a_runner_is_registered_just_in_time_and_its_config_kept_secret() {
    let mut running = start().await;
    run(&running.standin, 10, "octo-org/app", "octo-org/app");
    assert_eq!(
        running
            .deliver(&event("queued", 1, 10, "octo-org/app", None))
            .await,
        202
    );
    let jobs = running
        .until("a runner's instance runs", |jobs| live(jobs).len() == 1)
        .await;
    let runner = live(&jobs)[0].clone();
    assert_eq!(runner["labels"], json!(["self-hosted", "Linux"]));
    assert_eq!(runner["trust"], "trusted");
    assert_eq!(runner["pool"], "linux");
    let instance = running.runner_name(&runner["id"]);
    assert!(instance.ends_with(&format!(".job-{}.linux", runner["id"])));
    assert_eq!(
        running.registrations(),
        [(
            instance.clone(),
            vec!["self-hosted".to_owned(), "linux".to_owned()]
        )],
        "registered as the instance, with the pool's labels"
    );
    let secret = format!("jit-secret-for-{instance}");
    let env = running.host.environment_of(OWNER, &instance).unwrap();
    assert_eq!(env.get(JITCONFIG_VARIABLE), Some(secret.as_str()));
    assert_eq!(env.len(), 1, "nothing else in its environment");

    // Nothing billet answers holds the JIT config, nor anything it stores.
    let (_, text) = running.job(runner["id"].as_u64().unwrap()).await;
    assert!(!text.contains("jit-secret"), "{text}");
    let listed = serde_json::to_string(&running.jobs().await).unwrap();
    assert!(!listed.contains("jit-secret"));
    for entry in std::fs::read_dir(running.state.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(10).any(|w| w == b"jit-secret"),
                "{} holds a JIT config",
                path.display()
            );
        }
    }
    // The same delivery again, and another queued for a job from a scope
    // billet does not serve, change nothing.
    running.deliveries -= 1;
    assert_eq!(
        running
            .deliver(&event("queued", 1, 10, "octo-org/app", None))
            .await,
        200
    );
    run(&running.standin, 11, "other-org/app", "other-org/app");
    assert_eq!(
        running
            .deliver(&event("queued", 2, 11, "other-org/app", None))
            .await,
        202
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(running.jobs().await.len(), 1, "one runner for one job");
    // G8: what the intake holds, in the metrics.
    running
        .until_metrics(&[
            r#"billet_github_jobs{state="queued"} 1"#,
            r#"billet_github_runners{state="idle"} 1"#,
            r#"billet_github_jobs_left_total{reason="other_scope"} 1"#,
            r#"billet_github_api_requests_total{status="201"} 1"#,
            r#"billet_github_deliveries_total{event="workflow_job",result="accepted"} 2"#,
        ])
        .await;
    running.standin.assert_no_violation();
    assert!(
        running
            .standin
            .operations_called()
            .contains(&"actions/generate-runner-jitconfig-for-org".to_owned())
    );
    running.service.abort();
}

// G6: GitHub hands jobs to whichever runner fits. Two jobs, two runners;
// each runner takes the other's job; both complete. A job that completes
// before any runner took it frees its runner, which is retired: its
// registration removed, its billet job cancelled. A runner still running
// past its job's completion and the grace is destroyed.
#[tokio::test]
async fn g6_runners_are_kept_by_demand_not_identity() {
    let mut running = start().await;
    run(&running.standin, 10, "octo-org/app", "octo-org/app");
    for id in [1, 2] {
        running
            .deliver(&event("queued", id, 10, "octo-org/app", None))
            .await;
    }
    let jobs = running
        .until("two runners run", |jobs| live(jobs).len() == 2)
        .await;
    let names: Vec<String> = live(&jobs)
        .iter()
        .map(|job| running.runner_name(&job["id"]))
        .collect();
    let ids: Vec<u64> = live(&jobs)
        .iter()
        .map(|job| job["id"].as_u64().unwrap())
        .collect();
    // Each takes the other's job.
    running
        .deliver(&event(
            "in_progress",
            1,
            10,
            "octo-org/app",
            Some(&names[1]),
        ))
        .await;
    running
        .deliver(&event(
            "in_progress",
            2,
            10,
            "octo-org/app",
            Some(&names[0]),
        ))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let jobs = running.jobs().await;
    assert_eq!(live(&jobs).len(), 2, "no runner retired, none added");
    // G8: each runner's job names the GitHub job it took; a list does not.
    let (view, _) = running.job(ids[1]).await;
    assert_eq!(
        view["github"],
        json!({"job_id": 1, "run_id": 10, "repository": "octo-org/app", "runner": names[1], "conclusion": null}),
    );
    assert_eq!(running.job(ids[0]).await.0["github"]["job_id"], 2);
    assert!(jobs.iter().all(|job| job.get("github").is_none()));
    // A third job, completed (cancelled on GitHub) before any runner took it:
    // its runner is retired.
    running
        .deliver(&event("queued", 3, 10, "octo-org/app", None))
        .await;
    let jobs = running
        .until("a third runner runs", |jobs| live(jobs).len() == 3)
        .await;
    let third = live(&jobs)
        .into_iter()
        .find(|job| !ids.contains(&job["id"].as_u64().unwrap()))
        .unwrap()
        .clone();
    let third_id = third["id"].as_u64().unwrap();
    let third_name = running.runner_name(&third["id"]);
    running
        .deliver(&event("completed", 3, 10, "octo-org/app", None))
        .await;
    running
        .until("the third runner is retired", |jobs| {
            state_of(jobs, third_id) == "cancelled"
        })
        .await;
    assert!(
        !running
            .registrations()
            .iter()
            .any(|(name, _)| *name == third_name),
        "its registration is removed"
    );
    // Jobs 1 and 2 complete; the runners still run (they have not exited):
    // past the grace they are destroyed.
    let mut completed = event("completed", 1, 10, "octo-org/app", Some(&names[1]));
    completed["workflow_job"]["conclusion"] = json!("success");
    running.deliver(&completed).await;
    running
        .deliver(&event("completed", 2, 10, "octo-org/app", Some(&names[0])))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(live(&running.jobs().await).len(), 2, "within the grace");
    assert_eq!(
        running.job(ids[1]).await.0["github"]["conclusion"],
        "success"
    );
    running.clock.advance(COMPLETED_GRACE).unwrap();
    tokio::time::sleep(LOOK_EVERY + Duration::from_millis(500)).await;
    assert_eq!(
        live(&running.jobs().await).len(),
        2,
        "at the grace's end exactly"
    );
    running.clock.advance(Duration::from_secs(1)).unwrap();
    let jobs = running
        .until("both runners are destroyed", |jobs| {
            ids.iter().all(|id| state_of(jobs, *id) == "cancelled")
        })
        .await;
    assert_eq!(jobs.len(), 3, "no runner more than the jobs taken");
    // A queued delivery that comes after its job completed (and billet
    // forgot it) changes nothing: forward only.
    running
        .deliver(&event("queued", 3, 10, "octo-org/app", None))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(running.jobs().await.len(), 3, "a late queued takes nothing");
    running.end();
}

// G5: a registration left under a runner's name (a launch that registered,
// then billet died before it started) is removed and made anew: used,
// never left, and the runner starts with the new one's JIT config.
#[tokio::test]
async fn g5_a_registration_left_under_a_runners_name_is_made_anew() {
    let mut running = start().await;
    let identity = running.identity.clone().expect("an identity");
    // The reconcile at start has listed every scope's registrations (it
    // would remove the planted one as an orphan: the stand-in holds one
    // table for all scopes); the next comes a minute later.
    until_true("a reconcile at start", || {
        let called = running.standin.operations_called();
        [
            "actions/list-self-hosted-runners-for-org",
            "actions/list-self-hosted-runners-for-repo",
        ]
        .iter()
        .all(|operation| called.contains(&(*operation).to_owned()))
    })
    .await;
    let planted = format!("{identity}.job-1.linux");
    running.standin.state.lock().runners.insert(
        9001,
        (planted.clone(), vec!["self-hosted".to_owned()], false),
    );
    let runner = running.first_runner().await;
    let name = running.runner_name(&runner["id"]);
    assert_eq!(name, planted, "the runner is billet job 1's");
    let held: Vec<(u64, String)> = running
        .standin
        .state
        .lock()
        .runners
        .iter()
        .map(|(id, (name, _, _))| (*id, name.clone()))
        .collect();
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].1, planted);
    assert_ne!(held[0].0, 9001, "made anew: {held:?}");
    let env = running.host.environment_of(OWNER, &name).unwrap();
    assert_eq!(
        env.get(JITCONFIG_VARIABLE),
        Some(format!("jit-secret-for-{name}").as_str())
    );
    running.end();
}

// G6: a runner no job took whose billet job ends (cancelled here; a
// runner that exits) leaves no registration: it is removed at once, not a
// reconcile later.
#[tokio::test]
async fn g6_an_ended_runner_no_job_took_leaves_no_registration() {
    let (running, runner) = one_runner("").await;
    let id = runner["id"].as_u64().unwrap();
    let name = running.runner_name(&runner["id"]);
    assert_eq!(running.registrations().len(), 1);
    running.cancel(id).await;
    until_true("the registration removed", || {
        !running
            .registrations()
            .iter()
            .any(|(held, _)| *held == name)
    })
    .await;
    running.end();
}

// H14, G6: an intake a driver ticks (the harness) settles its runners at
// the tick, so deliveries sent together give the same runners in any order
// they arrive: the older GitHub job's runner is made first. Each tick
// answers when a look would next act by the clock alone (the first idle
// timeout, a completed job's grace, no sooner than a look's interval); a
// look before it does nothing, one at it or past it retires the idle
// runner, and a runner whose billet job ended is forgotten at the next tick,
// its registration removed.
#[tokio::test]
async fn h14_a_driven_intake_acts_at_its_ticks() {
    let mut running = start_driven().await;
    let t0 = running.clock.now();
    run(&running.standin, 10, "octo-org/app", "octo-org/app");
    for job in [2, 1] {
        let queued = event("queued", job, 10, "octo-org/app", None);
        assert!(running.deliver(&queued).await.is_success());
    }
    running.tick().await;
    running
        .until("two runners run", |jobs| live(jobs).len() == 2)
        .await;
    let (first, second) = (running.runner_for(1).await, running.runner_for(2).await);
    assert!(first < second, "job 1's runner {first}, job 2's {second}");

    // Job 2's runner ends: forgotten at the next tick, its registration
    // removed.
    assert!(running.registered(second));
    running.cancel(second).await;
    running
        .until("job 2's runner ended", |jobs| {
            state_of(jobs, second) == "cancelled"
        })
        .await;
    running.tick().await;
    assert!(!running.registered(second), "removed at the tick");

    // A third runner, a minute later: each idles out at its own instant.
    running.clock.advance(Duration::from_secs(60)).unwrap();
    let queued = event("queued", 3, 10, "octo-org/app", None);
    assert!(running.deliver(&queued).await.is_success());
    running.tick().await;
    running
        .until("two runners run", |jobs| live(jobs).len() == 2)
        .await;
    let third = running.runner_for(3).await;
    let timeout = Duration::from_secs(600) + Duration::from_nanos(1);
    let Ticked { due, .. } = running.tick().await;
    assert_eq!(due, Some(t0 + timeout), "the first runner's idle timeout");
    let just_before = t0 + timeout - Duration::from_nanos(1);
    running.clock.advance_to(just_before).unwrap();
    let Ticked { due, .. } = running.tick().await;
    assert!(running.registered(first), "not yet idle past its timeout");
    assert_eq!(
        due,
        Some(just_before + LOOK_EVERY),
        "asked again no sooner than a look's interval"
    );
    running.clock.advance_to(t0 + timeout).unwrap();
    running.tick().await;
    assert!(!running.registered(first), "retired at its timeout");
    assert!(running.registered(third));
    let at = t0 + Duration::from_secs(60) + timeout;
    running.tick_until_due(at).await;
    running
        .clock
        .advance_to(at + Duration::from_secs(1))
        .unwrap();
    running.tick().await;
    assert!(!running.registered(third), "retired past its timeout");

    // A runner whose job completed is due at the end of its grace.
    let queued = event("queued", 4, 10, "octo-org/app", None);
    assert!(running.deliver(&queued).await.is_success());
    running.tick().await;
    let fourth = running.runner_for(4).await;
    running
        .until("job 4's runner runs", |jobs| {
            live(jobs).iter().any(|job| job["id"] == fourth)
        })
        .await;
    let name = running.runner_name(&json!(fourth));
    for action in ["in_progress", "completed"] {
        let delivery = event(action, 4, 10, "octo-org/app", Some(&name));
        assert!(running.deliver(&delivery).await.is_success());
    }
    let completed = running.clock.now();
    running
        .tick_until_due(completed + COMPLETED_GRACE + Duration::from_nanos(1))
        .await;
    running.end();
}

// G7: the jobs the intake took are kept in `github.db` at the end of its
// turn, or at once when KEPT_BATCH wait: a driven intake's turn ends at a
// tick, and KEPT_BATCH queued deliveries with no tick between are written
// all the same, so what waits is bounded.
#[tokio::test]
async fn g7_the_jobs_taken_are_kept_once_a_batch_waits() {
    assert!(!kept_full(KEPT_BATCH - 1));
    assert!(kept_full(KEPT_BATCH));
    assert!(kept_full(KEPT_BATCH + 1));
    let mut running = start_driven().await;
    run(&running.standin, 10, "octo-org/app", "octo-org/app");
    running.tick().await;
    let n = u64::try_from(KEPT_BATCH).unwrap();
    for job in 1..=n {
        let queued = event("queued", job, 10, "octo-org/app", None);
        assert!(running.deliver(&queued).await.is_success());
    }
    let kept = || -> i64 {
        let db = rusqlite::Connection::open(running.state.path().join("github.db")).unwrap();
        db.query_row("SELECT COUNT(*) FROM taken_jobs", [], |row| row.get(0))
            .unwrap()
    };
    until_true("the jobs taken are kept with no tick", || {
        kept() == i64::try_from(n).unwrap()
    })
    .await;
    running.end();
}

// G7: registrations are swept at the first reconcile, then back off while
// sweeps find none (the second reconcile does not sweep, the third does,
// the next three do not), and the reconcile after one of billet's removals
// failed sweeps: the registration that removal left is removed.
#[tokio::test]
async fn g7_registrations_are_swept_at_start_and_after_a_failed_removal() {
    let mut running = start_driven().await;
    let hour = Duration::from_secs(3600);
    let sweeps = |running: &Running| {
        running
            .standin
            .operations_called()
            .iter()
            .filter(|op| op.starts_with("actions/list-self-hosted-runners"))
            .count()
    };
    running.tick().await;
    let per_sweep = sweeps(&running);
    assert!(per_sweep > 0, "the first reconcile sweeps");
    running.clock.advance(hour).unwrap();
    running.tick().await;
    assert_eq!(
        sweeps(&running),
        per_sweep,
        "found none: the next is skipped"
    );
    running.clock.advance(hour).unwrap();
    running.tick().await;
    assert_eq!(sweeps(&running), 2 * per_sweep, "then one sweeps");

    // A runner no job took ends; its registration's removal fails.
    run(&running.standin, 10, "octo-org/app", "octo-org/app");
    let queued = event("queued", 1, 10, "octo-org/app", None);
    assert!(running.deliver(&queued).await.is_success());
    running.tick().await;
    let runner = running.runner_for(1).await;
    running.cancel(runner).await;
    running
        .until("the runner ended", |jobs| {
            state_of(jobs, runner) == "cancelled"
        })
        .await;
    running.clock.advance(hour).unwrap();
    running.answer_next_call(503);
    running.tick().await;
    assert_eq!(
        sweeps(&running),
        3 * per_sweep,
        "a failed removal: the reconcile sweeps"
    );
    assert!(!running.registered(runner), "the orphan it left is removed");
    running.end();
}

// G4: a run's facts are read once for all its jobs, whatever other runs'
// jobs come between (cached per run).
#[tokio::test]
async fn g4_each_runs_facts_are_read_once() {
    let mut running = start().await;
    run(&running.standin, 10, "octo-org/app", "octo-org/app");
    run(&running.standin, 11, "octo-org/app", "octo-org/app");
    for (id, run) in [(1, 10), (2, 11), (3, 10)] {
        running
            .deliver(&event("queued", id, run, "octo-org/app", None))
            .await;
    }
    running
        .until("three runners run", |jobs| live(jobs).len() == 3)
        .await;
    let calls = running.standin.state.lock().calls.clone();
    for run in [10, 11] {
        let path = format!("GET /repos/octo-org/app/actions/runs/{run} ");
        let reads = calls.iter().filter(|call| call.starts_with(&path)).count();
        assert_eq!(reads, 1, "run {run}: {calls:?}");
    }
    running.end();
}

// G4: labels are no trust boundary. A runner made for a trusted job that
// GitHub reports taken by a fork's pull request (its run's code from
// another repository) is destroyed at once and its registration removed; a
// job whose run cannot be read is unknown work, left by a pool that runs
// trusted work only.
#[tokio::test]
async fn g4_a_runner_taken_by_less_trusted_work_is_destroyed() {
    let (mut running, runner) = one_runner("").await;
    run(&running.standin, 20, "octo-org/app", "someone/app");
    let id = runner["id"].as_u64().unwrap();
    let name = running.runner_name(&runner["id"]);
    // The fork's job (queued delivery lost) is reported taken by it.
    running
        .deliver(&event("in_progress", 5, 20, "octo-org/app", Some(&name)))
        .await;
    running
        .until("the runner is destroyed", |jobs| {
            state_of(jobs, id) == "cancelled"
        })
        .await;
    assert!(
        !running
            .registrations()
            .iter()
            .any(|(held, _)| *held == name),
        "its registration is removed"
    );
    // Job 1 still waits: a new runner is made for it.
    running
        .until("a new runner runs for the waiting job", |jobs| {
            live(jobs).len() == 1 && live(jobs)[0]["id"] != id
        })
        .await;
    // A job whose run GitHub does not answer is unknown: left.
    let before = running.jobs().await.len();
    running
        .deliver(&event("queued", 7, 99, "octo-org/app", None))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(running.jobs().await.len(), before, "left, not taken");
    running
        .until_metrics(&[r#"billet_github_jobs_left_total{reason="trust"} 1"#])
        .await;

    // G8: while GitHub's API answers 503, /healthz says so; an answer
    // clears it.
    assert_eq!(running.health().await.0, 200);
    running.answer_next_call(503);
    running
        .deliver(&event("queued", 8, 98, "octo-org/app", None))
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, body) = loop {
        let (status, body) = running.health().await;
        if status == 503 || Instant::now() > deadline {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status, 503, "{body}");
    assert!(body["github"].as_str().unwrap().contains("503"), "{body}");
    run(&running.standin, 97, "octo-org/app", "octo-org/app");
    running
        .deliver(&event("queued", 9, 97, "octo-org/app", None))
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while running.health().await.0 != 200 {
        assert!(Instant::now() < deadline, "{:?}", running.health().await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.end();
}

// G4, G7, H14: a run's facts GitHub could not give (a `503` here; an
// outage, a spent rate limit) are not kept. Job 1's `queued` came while the
// API answered 503: unknown work, left (no pool runs it). Job 2 of the same
// run asks again, and is trusted as the facts then say. The reconcile,
// finding job 1 still queued, takes it again: trusted now.
#[tokio::test]
async fn g4_a_runs_facts_not_read_are_asked_again() {
    let mut running = start_with("  reconcile_every: 1s\n").await;
    run(&running.standin, 10, "solo/tool", "solo/tool");
    until_true("the first reconcile is done", || {
        running.standin.state.lock().calls.len() >= 3
    })
    .await;
    running.answer_next_call(503);
    running
        .deliver(&event("queued", 1, 10, "solo/tool", None))
        .await;
    running
        .deliver(&event("queued", 2, 10, "solo/tool", None))
        .await;
    let jobs = running
        .until("job 2's runner runs, trusted", |jobs| {
            live(jobs).iter().any(|job| job["trust"] == "trusted")
        })
        .await;
    assert_eq!(live(&jobs).len(), 1, "job 1 is left: {jobs:?}");
    let calls = running.standin.state.lock().calls.clone();
    let asked = calls
        .iter()
        .filter(|call| call.ends_with(" actions/get-workflow-run"))
        .count();
    assert_eq!(asked, 2, "{calls:?} {jobs:?}");
    // Job 2 completes (elsewhere): run 10 is no longer one billet holds a
    // job of, and is listed.
    let first = live(&jobs)[0]["id"].clone();
    running
        .deliver(&event("completed", 2, 10, "solo/tool", None))
        .await;
    {
        let mut github = running.standin.state.lock();
        github.runs_by_status.insert("queued".to_owned(), vec![10]);
        github.run_jobs.insert(
            10,
            vec![json!({"id": 1, "run_id": 10, "status": "queued", "labels": ["self-hosted", "linux"]})],
        );
    }
    running.clock.advance(Duration::from_secs(2)).unwrap();
    let jobs = running
        .until("job 1 is taken again", |jobs| {
            live(jobs)
                .iter()
                .any(|job| job["id"] != first && job["trust"] == "trusted")
        })
        .await;
    let again = live(&jobs)
        .into_iter()
        .find(|job| job["id"] != first)
        .unwrap();
    let (view, _) = running.job(again["id"].as_u64().unwrap()).await;
    let served = view["github"]["job_id"].clone();
    assert_eq!(served, json!(1), "{view}");
    running.end();
}

// G5, G6, G7, L6: a crash and a restart. The runner running before it is
// adopted, and job 1, still queued, taken again from `github.db`: no
// delivery said the runner took a job, so it idles, kept for job 1 (no
// second runner is made for it). Runner numbers are never given twice, so
// the next runner is a new billet job, not the old one's key answered
// again. A runner idle past `idle_timeout` is retired (registration
// removed, job cancelled) and, its job still waiting, another is made.
#[tokio::test]
async fn g6_runners_survive_a_restart_and_idle_ones_are_retired() {
    let (running, runner) = one_runner("").await;
    let first = runner["id"].as_u64().unwrap();
    // Runner numbers are reserved in github.db a block at a time, before
    // any is given.
    let reserved = Deliveries::open(running.state.path())
        .unwrap()
        .runners_reserved()
        .unwrap();
    assert_eq!(reserved, 1 + RUNNER_BLOCK);
    let mut running = running.restarted("").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let jobs = running.jobs().await;
    assert_eq!(
        state_of(&jobs, first),
        "running",
        "adopted, kept: {jobs:#?}"
    );
    // The intake counts it idle, and job 1 queued: taken again.
    running
        .until_metrics(&[
            r#"billet_github_runners{state="idle"} 1"#,
            r#"billet_github_jobs{state="queued"} 1"#,
        ])
        .await;
    running
        .deliver(&event("queued", 2, 10, "octo-org/app", None))
        .await;
    let jobs = running
        .until("a second runner runs", |jobs| live(jobs).len() == 2)
        .await;
    let second = live(&jobs)
        .iter()
        .map(|job| job["id"].as_u64().unwrap())
        .find(|id| *id != first)
        .unwrap();
    assert_eq!(jobs.len(), 2, "a new job, not the first one's key again");
    let second_name = running.runner_name(&json!(second));

    // At the idle timeout exactly, nothing is retired yet; past it, both
    // runners no job took are retired. Jobs 1 and 2 still wait: two new
    // runners.
    running.clock.advance(Duration::from_secs(10 * 60)).unwrap();
    tokio::time::sleep(LOOK_EVERY + Duration::from_millis(500)).await;
    let jobs = running.jobs().await;
    assert_eq!(state_of(&jobs, second), "running", "not idle past 10m yet");
    assert_eq!(state_of(&jobs, first), "running", "not idle past 10m yet");
    assert_eq!(live(&jobs).len(), 2, "{jobs:#?}");
    running.clock.advance(Duration::from_secs(1)).unwrap();
    running
        .until("the idle runners are retired and replaced", |jobs| {
            state_of(jobs, first) == "cancelled"
                && state_of(jobs, second) == "cancelled"
                && live(jobs).len() == 2
        })
        .await;
    assert!(
        !running
            .registrations()
            .iter()
            .any(|(name, _)| *name == second_name),
        "the idle runner's registration is removed"
    );
    running.end();
}

// G7: every reconcile_every, what deliveries lost is read from the API. A
// job completed while its delivery was lost ends (its runner retired); a
// queued job of a repository scope whose delivery never came is taken;
// registrations named for this store whose billet job has ended are
// removed, and no other: another store's, a busy one, a live runner's.
#[tokio::test]
async fn g7_the_reconcile_finds_what_deliveries_lost() {
    let (running, runner) = one_runner("  reconcile_every: 1s\n").await;
    let identity = running
        .identity
        .clone()
        .expect("a store on disk has an identity");
    let first = runner["id"].as_u64().unwrap();
    let first_name = running.runner_name(&runner["id"]);
    {
        let mut github = running.standin.state.lock();
        // Orphans: this store's, ended; another store's; this store's, busy.
        for (id, name, busy) in [
            (9001, format!("{identity}.job-77.linux"), false),
            (9002, "0123456789abcdef.job-78.linux".to_owned(), false),
            (9003, format!("{identity}.job-79.linux"), true),
        ] {
            github
                .runners
                .insert(id, (name, vec!["self-hosted".to_owned()], busy));
        }
        // Job 1 was cancelled on GitHub; its completed delivery was lost.
        github.jobs.insert(
            1,
            json!({"id": 1, "run_id": 10, "status": "completed", "conclusion": "cancelled"}),
        );
    }
    // Reconciles come every second of real time; by the service's clock
    // (held) job 1 was heard of just now: not stale, not asked of the API.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let calls = running.standin.state.lock().calls.clone();
    assert!(
        !calls
            .iter()
            .any(|call| call.ends_with(" actions/get-job-for-workflow-run")),
        "{calls:?}"
    );
    // The job goes without news past one interval.
    running.clock.advance(Duration::from_secs(2)).unwrap();
    running
        .until("job 1's runner is retired", |jobs| {
            state_of(jobs, first) == "cancelled"
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let names: Vec<String> = running
            .registrations()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        if !names.iter().any(|n| n.ends_with(".job-77.linux")) {
            assert!(names.contains(&"0123456789abcdef.job-78.linux".to_owned()));
            assert!(
                names.iter().any(|n| n.ends_with(".job-79.linux")),
                "busy: kept"
            );
            assert!(!names.contains(&first_name), "retired with its job");
            break;
        }
        assert!(Instant::now() < deadline, "the orphan stays: {names:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each scope's registrations are listed (the stand-in holds one table
    // for all scopes, so which listing found the orphan is not said).
    let calls = running.standin.operations_called();
    for operation in [
        "actions/list-self-hosted-runners-for-org",
        "actions/list-self-hosted-runners-for-repo",
    ] {
        assert!(calls.contains(&operation.to_owned()), "{calls:?}");
    }
    // Run 30 of a repository scope is queued; its job's delivery was lost.
    run(&running.standin, 30, "solo/tool", "solo/tool");
    {
        let mut github = running.standin.state.lock();
        github.runs_by_status.insert("queued".to_owned(), vec![30]);
        github.run_jobs.insert(
            30,
            vec![json!({"id": 300, "run_id": 30, "status": "queued", "labels": ["self-hosted", "linux"]})],
        );
    }
    let jobs = running
        .until("job 300 gets a runner", |jobs| live(jobs).len() == 1)
        .await;
    let (view, _) = running.job(live(&jobs)[0]["id"].as_u64().unwrap()).await;
    assert_eq!(view["github"]["job_id"], 300);
    assert_eq!(view["github"]["repository"], "solo/tool");
    running
        .until_metrics(&[
            r#"billet_github_reconciled_total{what="settled"} 1"#,
            r#"billet_github_reconciled_total{what="found"} 1"#,
            r#"billet_github_reconciled_total{what="orphans"} 1"#,
        ])
        .await;
    running.end();
}

// G7: what the API says of jobs whose deliveries were lost. Job 1's
// `in_progress` was lost: the API names the runner that took it, which is
// then busy, not idle. Job 2 is still queued but its run ended (a
// `startup_failure`, say): it ends, and its runner, no longer needed, is
// retired. Job 3 is queued in a run still going: it stays, with its runner.
#[tokio::test]
async fn g7_lost_in_progress_and_ended_runs_are_read_from_the_api() {
    let mut running = start_with("  reconcile_every: 1s\n").await;
    for (run, status) in [(10, "in_progress"), (11, "completed"), (12, "in_progress")] {
        crate::run(&running.standin, run, "octo-org/app", "octo-org/app");
        running.standin.state.lock().runs.get_mut(&run).unwrap()["status"] = json!(status);
    }
    for (id, run) in [(1, 10), (2, 11), (3, 12)] {
        running
            .deliver(&event("queued", id, run, "octo-org/app", None))
            .await;
    }
    let jobs = running
        .until("three runners run", |jobs| live(jobs).len() == 3)
        .await;
    let ids: Vec<u64> = live(&jobs)
        .iter()
        .map(|job| job["id"].as_u64().unwrap())
        .collect();
    let taker = running.runner_name(&json!(ids[0]));
    {
        let mut github = running.standin.state.lock();
        github.jobs.insert(
            1,
            json!({"id": 1, "run_id": 10, "status": "in_progress", "runner_name": taker}),
        );
        github
            .jobs
            .insert(2, json!({"id": 2, "run_id": 11, "status": "queued"}));
        github
            .jobs
            .insert(3, json!({"id": 3, "run_id": 12, "status": "queued"}));
    }
    running.clock.advance(Duration::from_secs(2)).unwrap();
    running
        .until_metrics(&[
            r#"billet_github_reconciled_total{what="settled"} 2"#,
            r#"billet_github_runners{state="busy"} 1"#,
            r#"billet_github_jobs{state="queued"} 1"#,
            r#"billet_github_jobs{state="in_progress"} 1"#,
        ])
        .await;
    let jobs = running
        .until("one runner retired", |jobs| live(jobs).len() == 2)
        .await;
    assert_eq!(state_of(&jobs, ids[0]), "running", "the taker stays");
    let retired = jobs
        .iter()
        .find(|job| job["state"] == "cancelled")
        .unwrap_or_else(|| panic!("{jobs:#?}"));
    let (view, _) = running.job(retired["id"].as_u64().unwrap()).await;
    assert_eq!(view["github"]["job_id"], 2, "job 2's runner: {view}");
    running.end();
}

// G7: a queued job is doubted for a runner of its pool that idles, and
// only as many are asked as runners idle. Six jobs queued, four runners (the
// pool's capacity), each of which took one of the four oldest jobs with its
// `in_progress` lost: the reconcile asks those four, oldest first, finds
// each taken, and asks neither of the two jobs still waiting for room.
#[tokio::test]
async fn g7_queued_jobs_are_asked_only_for_the_runners_that_idle() {
    let mut running = start_with("  reconcile_every: 1s\n").await;
    for id in 1..=6 {
        crate::run(&running.standin, 10 + id, "octo-org/app", "octo-org/app");
        running
            .deliver(&event("queued", id, 10 + id, "octo-org/app", None))
            .await;
    }
    let jobs = running
        .until("four runners run", |jobs| live(jobs).len() == 4)
        .await;
    let runners: Vec<Value> = live(&jobs).iter().map(|job| job["id"].clone()).collect();
    let takers: Vec<String> = runners.iter().map(|r| running.runner_name(r)).collect();
    {
        let mut github = running.standin.state.lock();
        for (k, taker) in takers.iter().enumerate() {
            let id = k as u64 + 1;
            github.jobs.insert(
                id,
                json!({"id": id, "run_id": 10 + id, "status": "in_progress", "runner_name": taker}),
            );
        }
        for id in 5..=6u64 {
            github
                .jobs
                .insert(id, json!({"id": id, "run_id": 10 + id, "status": "queued"}));
        }
        github.calls.clear();
    }
    running.clock.advance(Duration::from_secs(2)).unwrap();
    running
        .until_metrics(&[
            r#"billet_github_reconciled_total{what="settled"} 4"#,
            r#"billet_github_runners{state="busy"} 4"#,
        ])
        .await;
    let calls = running.standin.state.lock().calls.clone();
    let asked: Vec<&String> = calls
        .iter()
        .filter(|call| call.ends_with(" actions/get-job-for-workflow-run"))
        .collect();
    assert_eq!(asked.len(), 4, "{calls:?}");
    for (k, call) in asked.iter().enumerate() {
        assert!(
            call.contains(&format!("/actions/jobs/{} ", k + 1)),
            "{calls:?}"
        );
    }
    running.end();
}

// G7, G8: a runner that serves a GitHub job still in progress when the
// service crashes is adopted with it (what it serves is in `github.db`):
// when its instance ends and the job's `completed` never came, the
// reconcile asks GitHub of the job and ends it. (Before, an adopted runner
// was busy with a job billet no longer knew, and the loss was never found.)
#[tokio::test]
async fn g7_a_job_in_progress_across_a_restart_is_asked_when_its_runner_ends() {
    in_progress_across_a_restart(false).await;
}

// G2, G7: the same when the crash comes after the `in_progress` delivery
// was answered and before the intake kept, at the end of its turn, which
// job the runner serves: the delivery itself, committed before its answer,
// says which runner took the job. (Before, such a runner was adopted busy
// with a job billet no longer knew, and a lost `completed` never found.)
#[tokio::test]
async fn g7_a_runner_that_took_its_job_just_before_a_crash_is_adopted_with_it() {
    in_progress_across_a_restart(true).await;
}

/// A runner takes job 1 and the service crashes; after the restart, the
/// job's `completed` is lost and the runner ends: the reconcile asks of the
/// job. With `unkept`, the intake's own record of what the runner serves is
/// gone at the crash, as when the process dies before its turn writes it.
async fn in_progress_across_a_restart(unkept: bool) {
    let (mut running, runner) = one_runner("  reconcile_every: 1s\n").await;
    let first = runner["id"].as_u64().unwrap();
    let name = running.runner_name(&runner["id"]);
    running
        .deliver(&event("in_progress", 1, 10, "octo-org/app", Some(&name)))
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while running.job(first).await.0["github"]["job_id"] != 1 {
        assert!(
            Instant::now() < deadline,
            "what the runner serves is never kept"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if unkept {
        let db = rusqlite::Connection::open(running.state.path().join("github.db")).unwrap();
        assert_eq!(db.execute("DELETE FROM runner_jobs", []).unwrap(), 1);
    }
    let running = running.restarted("  reconcile_every: 1s\n").await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        running.asked_of_jobs(),
        0,
        "held by a live runner: not asked"
    );
    // The job completes; its `completed` is lost; the runner's instance ends.
    running.job_1_done_unsaid(&name);
    running
        .until_job_1_asked_and_settled("once its runner ended")
        .await;
    running.end();
}

// G7: a runner takes job 1 and ends; the job's `completed` is lost and the
// service crashes before a reconcile asks of it. After the restart the job
// is in progress on no live runner: the first reconcile asks, and ends it.
// (Before, the restarted intake forgot every job in progress, and this loss
// was never found.)
#[tokio::test]
async fn g7_a_job_whose_runner_ended_before_a_crash_is_asked_after_it() {
    // A reconcile at start, then none for an hour of the wall.
    let hourly = "  reconcile_every: 1h\n";
    let (mut running, runner) = one_runner(hourly).await;
    let first = runner["id"].as_u64().unwrap();
    let name = running.runner_name(&runner["id"]);
    running
        .deliver(&event("in_progress", 1, 10, "octo-org/app", Some(&name)))
        .await;
    running.job_1_done_unsaid(&name);
    running
        .until("the runner's billet job ends", |jobs| {
            jobs.iter()
                .any(|job| job["id"] == first && job["state"] == "finished")
        })
        .await;
    assert_eq!(
        running.asked_of_jobs(),
        0,
        "no reconcile since the runner ended"
    );
    let running = running.restarted(hourly).await;
    running
        .until_job_1_asked_and_settled("at the first reconcile")
        .await;
    running.end();
}

// G7: a queued job is asked at every reconcile while a runner of its pool
// idles, not backed off: GitHub hands an idle runner the oldest queued job,
// so the one asked is the likeliest to have been taken. Job 1 is queued and
// its runner idles (its `in_progress` never comes): the first reconcile
// after the runner started asks; GitHub still says queued, and the next
// reconcile asks again. (A job in progress backs off: `g7_asks_back_off_to_a_bound`.)
#[tokio::test]
async fn g7_a_queued_job_is_asked_at_every_reconcile_while_a_runner_idles() {
    let (running, _runner) = one_runner("  reconcile_every: 1s\n").await;
    {
        let mut github = running.standin.state.lock();
        github.runs.get_mut(&10).unwrap()["status"] = json!("in_progress");
        github
            .jobs
            .insert(1, json!({"id": 1, "run_id": 10, "status": "queued"}));
    }
    let asked = || running.calls_to("actions/get-job-for-workflow-run");
    running.clock.advance(Duration::from_secs(1)).unwrap();
    until_true("job 1 is asked", || asked() == 1).await;
    // The reconcile runs every second of the wall: the next asks again, at
    // the same modelled time, with no backoff.
    until_true("job 1 is asked again at the next reconcile", || {
        asked() >= 2
    })
    .await;
    running.end();
}

// G7: a reconcile makes at most RECONCILE_CALLS API calls. With 60 queued
// runs in a repository scope, the first reconcile (at start) lists them and
// reads the jobs of as many as its budget allows, then stops: no runner
// listing after.
#[tokio::test]
async fn g7_a_reconcile_makes_at_most_its_calls() {
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    standin
        .state
        .lock()
        .runs_by_status
        .insert("queued".to_owned(), (1..=60).collect());
    let state = tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .unwrap();
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let running = start_in(
        standin,
        state,
        Host::new(),
        clock,
        "  reconcile_every: 1h\n",
    )
    .await;
    let jobs_read = |calls: &[String]| {
        calls
            .iter()
            .filter(|call| call.ends_with(" actions/list-jobs-for-workflow-run"))
            .count()
    };
    until_true("the reconcile reads the runs' jobs", || {
        jobs_read(&running.standin.state.lock().calls) >= RECONCILE_CALLS - 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = running.standin.state.lock().calls.clone();
    assert_eq!(jobs_read(&calls), RECONCILE_CALLS - 1, "{calls:?}");
    assert_eq!(calls.len(), RECONCILE_CALLS, "{calls:?}");
    assert!(
        calls[0].ends_with(" actions/list-workflow-runs-for-repo"),
        "{calls:?}"
    );
    running.end();
}

// G6, L10: a runner's name is matched by its store's identity too. Another
// store's runner whose billet job has the same id takes job 1: billet's own
// runner, made for job 1, is no longer needed and is retired, not counted
// as the taker.
#[tokio::test]
async fn g6_another_stores_runner_of_the_same_job_id_is_not_ours() {
    let (mut running, runner) = one_runner("").await;
    let id = runner["id"].as_u64().unwrap();
    let ours = running.runner_name(&runner["id"]);
    let theirs = format!("0123456789abcdef.job-{id}.linux");
    assert_ne!(ours, theirs);
    running
        .deliver(&event("in_progress", 1, 10, "octo-org/app", Some(&theirs)))
        .await;
    running
        .until("billet's runner is retired", |jobs| {
            state_of(jobs, id) == "cancelled"
        })
        .await;
    running.end();
}
