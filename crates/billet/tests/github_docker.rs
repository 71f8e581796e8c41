//! G9 end to end on a real daemon (docker, and podman in `cargo xtask ci`'s
//! podman step): the built `billet` binary serving a `github:` section whose
//! API is the loopback stand-in held to GitHub's published description. A
//! `queued` delivery gives a runner container with its JIT config in its
//! environment, registered with the pool's labels under the container's
//! name; `in_progress` and `completed` end it, also when GitHub hands it
//! another job than the one it was made for; a fork's pull request and a
//! public repository's job are left; the JIT config appears nowhere else
//! (the log, the API's answers).
//! Without a daemon the test skips with one line, unless
//! `BILLET_DOCKER_REQUIRED=1` (set by `.ci/run`) makes that a failure.

mod support;

#[path = "../../billet-github/tests/support/standin.rs"]
#[allow(dead_code, unreachable_pub)]
mod standin;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use standin::{Auth, StandIn};
use support::{Deadline, POLL, Pool, Service, daemon, daemon_endpoint, docker_config, raw_client};

const SECRET: &str = "the webhook's secret";
const TOKEN: &str = "ghp_the-operators-token";
const JIT: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

fn private_file(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A `workflow_job` delivery's body.
fn event(action: &str, id: u64, run: u64, runner: Option<&str>) -> Value {
    json!({
        "action": action,
        "workflow_job": {
            "id": id,
            "run_id": run,
            "labels": ["self-hosted", "linux"],
            "runner_name": runner,
            "conclusion": (action == "completed").then_some("success"),
        },
        "repository": {"id": 1, "full_name": "octo-org/app", "private": true},
    })
}

async fn deliver(base: &str, n: u64, body: &Value) -> u16 {
    support::deliver_github(base, SECRET, n, body).await
}

/// A service of deployment `tag` (one docker pool of `capacity`) whose
/// `github:` section reads GitHub through `standin`, its secrets in a
/// directory of their own (answered, to be kept while the service runs),
/// with `rest` (the section's other keys, indented) after them.
fn github_service(
    tag: &str,
    capacity: u32,
    standin: &StandIn,
    rest: &str,
) -> (Service, tempfile::TempDir) {
    let secrets = tempfile::tempdir().unwrap();
    private_file(&secrets.path().join("token"), TOKEN);
    private_file(&secrets.path().join("secret"), SECRET);
    let pool = Pool {
        capacity,
        endpoint: daemon_endpoint(),
    };
    let url = standin.url.clone();
    let dir = secrets.path().display().to_string();
    let service = Service::with_yaml(tag, |id| {
        format!(
            "{docker}github:
  api_url: {url}
  token_file: {dir}/token
  webhook_secret_file: {dir}/secret
{rest}",
            docker = docker_config(id, &pool),
        )
    });
    (service, secrets)
}

// G4, G5, G6, G9, P2: on a real daemon, each queued GitHub job gets a runner
// container whose environment holds the JIT config GitHub made for a runner
// named as the container, with the pool's labels; GitHub hands each runner
// the other's job (a runner taken by another job than the one it was made
// for), and in_progress and completed (the runner exits after its one job)
// end both with no third runner; a fork's pull request and a public
// repository's job are left for other runners (this pool is trusted only);
// neither the log nor any answer holds a JIT config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g9_a_queued_job_gets_a_runner_container_with_its_jit_config() {
    if !daemon("g9_a_queued_job_gets_a_runner_container_with_its_jit_config") {
        return;
    }
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    {
        let repo =
            |name: &str, private: bool| json!({"id": 1, "full_name": name, "private": private});
        let mut github = standin.state.lock();
        github.runs.insert(
            10,
            json!({"id": 10, "repository": repo("octo-org/app", true), "head_repository": repo("octo-org/app", true)}),
        );
        github.runs.insert(
            20,
            json!({"id": 20, "repository": repo("octo-org/app", true), "head_repository": repo("someone/app", true)}),
        );
        github.runs.insert(
            30,
            json!({"id": 30, "repository": repo("octo-org/site", false), "head_repository": repo("octo-org/site", false)}),
        );
    }
    let (mut service, _secrets) = github_service(
        "github",
        2,
        &standin,
        &format!(
            "  scopes: [{{org: octo-org, trust: trusted}}]
  pools: [{{pool: linux, labels: [self-hosted, linux]}}]
  runner:
    command:
      - sh
      - -c
      - 'test -n \"${JIT}\" && sleep 10'
"
        ),
    );
    service.start().await;
    let base = service.base().to_owned();

    // Jobs 1 and 4 of run 10; job 2 a fork's pull request; job 3 a public
    // repository's.
    assert_eq!(deliver(&base, 1, &event("queued", 1, 10, None)).await, 202);
    assert_eq!(deliver(&base, 2, &event("queued", 2, 20, None)).await, 202);
    let mut public = event("queued", 3, 30, None);
    public["repository"] = json!({"id": 1, "full_name": "octo-org/site", "private": false});
    assert_eq!(deliver(&base, 3, &public).await, 202);
    assert_eq!(deliver(&base, 4, &event("queued", 4, 10, None)).await, 202);
    service
        .wait_containers_running(2, Duration::from_secs(60))
        .await;
    let containers = service.containers().await;
    assert_eq!(containers.len(), 2, "{containers:?}");
    for container in &containers {
        let inspected = billet_docker::dialect::inspect_container(&raw_client(), &container.id)
            .await
            .expect("inspect");
        let env = inspected.config.and_then(|c| c.env).unwrap_or_default();
        let secret = format!("jit-secret-for-{}", container.name);
        assert!(
            env.contains(&format!("{JIT}={secret}")),
            "the container's environment: {env:?}"
        );
    }
    let mut registered = standin.registered();
    registered.sort();
    let mut expected: Vec<(String, Vec<String>)> = containers
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                vec!["self-hosted".to_owned(), "linux".to_owned()],
            )
        })
        .collect();
    expected.sort();
    assert_eq!(registered, expected);

    // Which runner was made for which job: each runner's job names it.
    let jobs = service.jobs(None).await;
    assert_eq!(
        jobs.len(),
        2,
        "two runners; the fork's and the public repository's jobs were left: {jobs:?}"
    );
    let mut made_for = std::collections::BTreeMap::new();
    for job in &jobs {
        let id = job["id"].as_u64().unwrap();
        let part = format!(".job-{id}.");
        let name = containers
            .iter()
            .find(|c| c.name.contains(&part))
            .unwrap_or_else(|| panic!("job {id}'s container among {containers:?}"))
            .name
            .clone();
        let github = service.job(id).await["github"]["job_id"].as_u64();
        made_for.insert(
            github.expect("a runner's job names its GitHub job"),
            (id, name),
        );
    }
    assert_eq!(made_for.keys().copied().collect::<Vec<_>>(), [1, 4]);
    let (for_1, name_1) = made_for[&1].clone();
    let (for_4, name_4) = made_for[&4].clone();

    // GitHub hands each runner the other's job; both run and complete; the
    // runners exit.
    deliver(&base, 5, &event("in_progress", 1, 10, Some(&name_4))).await;
    deliver(&base, 6, &event("in_progress", 4, 10, Some(&name_1))).await;
    deliver(&base, 7, &event("completed", 1, 10, Some(&name_4))).await;
    deliver(&base, 8, &event("completed", 4, 10, Some(&name_1))).await;
    let ended = service
        .wait_ended(&[for_1, for_4], Duration::from_secs(60))
        .await;
    for (id, took) in [(for_1, 4), (for_4, 1)] {
        assert_eq!(ended[&id]["state"], "finished", "{:?}", ended[&id]);
        assert_eq!(ended[&id]["exit_code"], 0, "the runner saw its JIT config");
        let view = service.job(id).await;
        assert_eq!(view["github"]["job_id"], took, "{view}");
        assert_eq!(view["github"]["conclusion"], "success", "{view}");
        assert!(!view.to_string().contains("jit-secret"));
    }
    let jobs = service.jobs(None).await;
    assert_eq!(jobs.len(), 2, "no third runner: {jobs:?}");

    let deadline = Deadline::after(
        Duration::from_secs(20),
        "the fork's and the public repository's jobs counted as left",
    );
    loop {
        let metrics = service.metrics().await;
        if metrics.contains(r#"billet_github_jobs_left_total{reason="trust"} 2"#) {
            break;
        }
        deadline.check(&metrics);
        tokio::time::sleep(POLL).await;
    }
    standin.assert_no_violation();
    service.finish().await;
    let log = service.log();
    assert!(!log.contains("jit-secret"), "the log holds a JIT config");
    assert!(log.contains("took a GitHub job"), "{log}");
}

// G5, G6, G7, L6: `kill -9` between a placement and its launch, on a real
// daemon. GitHub made the runner's registration (its JIT config) but
// billet died before the answer reached it, so no container was made. The
// restarted service does not start that runner (where it registers is no
// longer known); its billet job ends, and the reconcile removes the
// registration named for it: removed, never left. Job 1, still queued and
// kept in `github.db` as taken, is taken again: a new runner is made for
// it and starts. GitHub then cancels job 1: that runner is retired, and no
// container of the deployment is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g9_kill_9_between_a_placement_and_its_launch_leaves_no_registration() {
    if !daemon("g9_kill_9_between_a_placement_and_its_launch_leaves_no_registration") {
        return;
    }
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    standin.state.lock().jit_hold = Some(Duration::from_secs(120));
    {
        let repo = json!({"id": 1, "full_name": "octo-org/app", "private": true});
        standin.state.lock().runs.insert(
            10,
            json!({"id": 10, "repository": repo, "head_repository": repo}),
        );
        // What GitHub's API says of job 1 while no runner has taken it.
        standin.state.lock().jobs.insert(
            1,
            json!({"id": 1, "run_id": 10, "status": "queued", "labels": ["self-hosted", "linux"]}),
        );
    }
    let (mut service, _secrets) = github_service(
        "github-kill",
        2,
        &standin,
        "  reconcile_every: 1s
  scopes: [{org: octo-org, trust: trusted}]
  pools: [{pool: linux, labels: [self-hosted, linux]}]
  runner: {command: [sleep, '30']}
",
    );
    service.start().await;
    let base = service.base().to_owned();
    assert_eq!(deliver(&base, 1, &event("queued", 1, 10, None)).await, 202);

    // The registration is made; its answer is held back: billet dies.
    let deadline = Deadline::after(Duration::from_secs(30), "the runner's registration");
    let registered = loop {
        let names = registered_names(&standin.state.lock());
        if let [name] = names.as_slice() {
            break name.clone();
        }
        deadline.check(&names);
        tokio::time::sleep(POLL).await;
    };
    service.kill9();
    standin.state.lock().jit_hold = None;
    assert!(
        service.containers().await.is_empty(),
        "no container was made before the crash"
    );

    service.start().await;
    until_github(
        &standin,
        "the crashed launch's registration removed",
        Duration::from_secs(60),
        |state| !registered_names(state).contains(&registered),
    )
    .await;
    service
        .wait_containers_running(1, Duration::from_secs(60))
        .await;
    let jobs = service.jobs(None).await;
    assert_eq!(
        jobs.len(),
        2,
        "the crashed runner, and job 1's new one: {jobs:?}"
    );
    let ended: Vec<bool> = jobs.iter().map(support::is_ended).collect();
    assert_eq!(ended.iter().filter(|ended| **ended).count(), 1, "{jobs:?}");
    assert_eq!(registered_names(&standin.state.lock()).len(), 1);
    // The restarted service listens on a port of its own.
    let base = service.base().to_owned();
    assert_eq!(
        deliver(&base, 2, &event("completed", 1, 10, None)).await,
        202
    );
    service.wait_no_containers(Duration::from_secs(60)).await;
    until_github(
        &standin,
        "the cancelled job's runner's registration removed",
        Duration::from_secs(60),
        |state| registered_names(state).is_empty(),
    )
    .await;
    standin.assert_no_violation();
    service.finish().await;
    let log = service.log();
    assert!(
        log.contains("never launched"),
        "the restarted service refused the runner it never launched: {log}"
    );
}

/// Job `id` of run `run` of `solo/tool` as GitHub's API answers it.
fn solo_job(id: u64, run: u64, status: &str) -> Value {
    json!({"id": id, "run_id": run, "status": status, "labels": ["self-hosted", "linux"]})
}

/// A delivery about `solo/tool`'s job `id` of run `run`.
fn solo_event(action: &str, id: u64, run: u64) -> Value {
    let mut body = event(action, id, run, None);
    body["repository"] = json!({"id": 2, "full_name": "solo/tool", "private": true});
    body
}

/// The names of the runners registered with the stand-in.
fn registered_names(state: &standin::State) -> Vec<String> {
    state
        .runners
        .values()
        .map(|(name, _, _)| name.clone())
        .collect()
}

/// Waits (at most `within`) until `done` holds of the stand-in's state.
async fn until_github(
    standin: &StandIn,
    what: &str,
    within: Duration,
    done: impl Fn(&standin::State) -> bool,
) {
    let deadline = Deadline::after(within, what);
    loop {
        if done(&standin.state.lock()) {
            return;
        }
        deadline.check(standin.state.lock().calls.len());
        tokio::time::sleep(POLL).await;
    }
}

// G2, G6, G7, G8, G9: on a real daemon, deliveries repeated (the same id
// again, and the same event under a new id) give one runner; a job's
// `completed` before its `queued` gives none; a queued job whose delivery
// was lost is found by the reconcile and gets its runner; GitHub's API
// rate-limited (403 with Retry-After) and then down (503) for several
// reconciles, while a job's `completed` is lost: /healthz says so, and
// once the API answers again the reconcile ends that job's runner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g9_lost_repeated_and_reordered_deliveries_and_an_outage_on_a_daemon() {
    if !daemon("g9_lost_repeated_and_reordered_deliveries_and_an_outage_on_a_daemon") {
        return;
    }
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    {
        let repo = json!({"id": 2, "full_name": "solo/tool", "private": true});
        let mut github = standin.state.lock();
        for run in [10, 20, 30] {
            github.runs.insert(
                run,
                json!({"id": run, "repository": repo, "head_repository": repo}),
            );
        }
        github.jobs.insert(1, solo_job(1, 10, "queued"));
        github.jobs.insert(2, solo_job(2, 20, "completed"));
    }
    let (mut service, _secrets) = github_service(
        "github-faults",
        3,
        &standin,
        &format!(
            "  reconcile_every: 1s
  scopes: [{{repository: solo/tool, trust: trusted}}]
  pools: [{{pool: linux, labels: [self-hosted, linux]}}]
  runner:
    command: [sh, -c, 'test -n \"${JIT}\" && sleep 120']
"
        ),
    );
    service.start().await;
    let base = service.base().to_owned();

    // Repeated: the same delivery twice, and the same event once more
    // under another id.
    assert_eq!(deliver(&base, 1, &solo_event("queued", 1, 10)).await, 202);
    assert_eq!(deliver(&base, 1, &solo_event("queued", 1, 10)).await, 200);
    assert_eq!(deliver(&base, 2, &solo_event("queued", 1, 10)).await, 202);
    // Reordered: job 2's completed before its queued.
    assert_eq!(
        deliver(&base, 3, &solo_event("completed", 2, 20)).await,
        202
    );
    assert_eq!(deliver(&base, 4, &solo_event("queued", 2, 20)).await, 202);
    let first = service
        .wait_containers_running(1, Duration::from_secs(60))
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let jobs = service.jobs(None).await;
    assert_eq!(jobs.len(), 1, "one runner, for job 1 only: {jobs:?}");
    let runner = jobs[0]["id"].as_u64().unwrap();
    assert_eq!(service.job(runner).await["github"]["job_id"], 1);

    // Lost: job 300 of run 30 is queued; its delivery never comes.
    {
        let mut github = standin.state.lock();
        github.jobs.insert(300, solo_job(300, 30, "queued"));
        github.runs_by_status.insert("queued".to_owned(), vec![30]);
        github
            .run_jobs
            .insert(30, vec![solo_job(300, 30, "queued")]);
    }
    let both = service
        .wait_containers_running(2, Duration::from_secs(60))
        .await;
    assert!(first.is_subset(&both), "{first:?} {both:?}");
    let jobs = service.jobs(None).await;
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let found = jobs
        .iter()
        .map(|job| job["id"].as_u64().unwrap())
        .find(|id| *id != runner)
        .unwrap();
    assert_eq!(service.job(found).await["github"]["job_id"], 300);
    {
        let mut github = standin.state.lock();
        github.runs_by_status.clear();
        // Job 1 is cancelled on GitHub; its completed delivery is lost.
        github.jobs.insert(1, solo_job(1, 10, "completed"));
        // Rate-limited, then down for several reconciles.
        github.faults.push_back(standin::Fault {
            status: 403,
            headers: vec![
                ("retry-after", "2".to_owned()),
                ("x-ratelimit-remaining", "0".to_owned()),
            ],
        });
        // A reconcile stops each of its three parts at the part's first
        // failure: twelve 503s take at least four reconciles.
        for _ in 0..12 {
            github.faults.push_back(standin::Fault {
                status: 503,
                headers: vec![],
            });
        }
    }
    let deadline = Deadline::after(
        Duration::from_secs(30),
        "/healthz to say GitHub's API fails",
    );
    loop {
        let health = service.health().await;
        if health.status == 503 {
            let body = health.json();
            assert!(body["github"].is_string(), "{body}");
            break;
        }
        deadline.check(health.json());
        tokio::time::sleep(POLL).await;
    }
    until_github(
        &standin,
        "every fault answered",
        Duration::from_secs(60),
        |github| github.faults.is_empty(),
    )
    .await;
    let ended = service.wait_ended(&[runner], Duration::from_secs(60)).await;
    assert_eq!(ended[&runner]["state"], "cancelled", "{:?}", ended[&runner]);
    let deadline = Deadline::after(Duration::from_secs(30), "/healthz well again");
    while service.health().await.status != 200 {
        deadline.check(service.health().await.json());
        tokio::time::sleep(POLL).await;
    }
    assert!(
        !support::is_ended(&service.job(found).await),
        "job 300's runner still waits for it"
    );
    // Job 300 is cancelled before any runner took it: its runner retires.
    assert_eq!(
        deliver(&base, 5, &solo_event("completed", 300, 30)).await,
        202
    );
    let ended = service.wait_ended(&[found], Duration::from_secs(60)).await;
    assert_eq!(ended[&found]["state"], "cancelled", "{:?}", ended[&found]);
    standin.assert_no_violation();
    service.finish().await;
}
