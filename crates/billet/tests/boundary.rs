//! D19 end to end: `billet serve` with a mixed fleet on the local daemon, a
//! pool on the daemon's default runtime (runc) and a pool on gVisor
//! (`runtime: runsc, isolation: boundary`), both of kind docker with
//! `untrusted_kinds: [docker]`. Trusted jobs run on either; untrusted and
//! unclassified jobs only behind gVisor (a watcher inspects every container
//! the deployment ever has on the daemon); what they print is gVisor's
//! kernel, not the host's; kill -9 of `serve` mid-job and a restart adopt
//! the gVisor container, which ends once. A runtime the daemon does not
//! list stops the start naming the pool. With the GitHub intake (its API
//! the loopback stand-in), a public repository's job and a fork's pull
//! request get runners only behind gVisor, though a runc pool with the
//! same labels comes first.
//!
//! On podman (the `podman` step), whose Docker-compatible API runs every
//! container on its service's default runtime, the gVisor pool is served by
//! a second podman service whose default is runsc (`.ci/run` starts it), and
//! runtimes are read from podman's own inspect.

mod support;

#[path = "../../billet-github/tests/support/standin.rs"]
#[allow(dead_code, unreachable_pub)]
mod standin;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use standin::{Auth, StandIn};
use support::{
    RUNSC, Service, TEST_IMAGE, containers_of, daemon, daemon_endpoint, daemon_socket, engine_at,
    lists_runsc_at, podman_runsc_socket, runtime_at, serve_refused,
};

/// The bound on every wait for jobs to end.
const END: Duration = Duration::from_secs(90);

/// The pool on the daemon's default runtime.
const RUNC_POOL: &str = "runc-pool";

/// The pool behind gVisor.
const GVISOR_POOL: &str = "gvisor";

/// The engine the gVisor pool runs on: the test daemon, or on podman its
/// service whose default runtime is runsc.
fn gvisor_endpoint() -> String {
    if engine_at(&daemon_socket()) == "podman" {
        format!("unix://{}", podman_runsc_socket().display())
    } else {
        daemon_endpoint()
    }
}

/// The mixed fleet's `billet.yaml` for deployment `id`: two pools of two,
/// one on the test daemon's default runtime, one on gVisor.
fn mixed_fleet(id: &str) -> String {
    let endpoint = daemon_endpoint();
    let gvisor = gvisor_endpoint();
    format!(
        "deployment: {{id: {id}}}
providers:
  - {{name: {RUNC_POOL}, kind: docker, capacity: 2, docker: {{image: \"{TEST_IMAGE}\", endpoint: \"{endpoint}\", network: none}}}}
  - {{name: {GVISOR_POOL}, kind: docker, capacity: 2, docker: {{image: \"{TEST_IMAGE}\", endpoint: \"{gvisor}\", network: none, runtime: {RUNSC}, isolation: boundary}}}}
routing: {{default_kind: docker, untrusted_kinds: [docker]}}
"
    )
}

/// Whether this test can run: a daemon that lists gVisor's runtime (and on
/// podman, its service whose default it is).
fn gvisor(test: &str) -> bool {
    if !daemon(test) || !lists_runsc_at(&daemon_socket(), test) {
        return false;
    }
    if engine_at(&daemon_socket()) == "podman" {
        let socket = podman_runsc_socket();
        if !socket.exists() {
            assert!(
                std::env::var(support::RUNSC_REQUIRED_VAR).as_deref() != Ok("1"),
                "no podman service on runsc at {}",
                socket.display()
            );
            eprintln!(
                "skipped {test}: no podman service on runsc at {}",
                socket.display()
            );
            return false;
        }
        support::ensure_test_image_on(&socket);
    }
    true
}

/// One container a [`Runtimes`] saw: its job id, its pool, and the runtime
/// the engine said it runs under.
type Seen = (u64, String, Option<String>);

/// Every container of a deployment the daemon ever listed, sampled every
/// 50 ms, each with the runtime its inspect reports: container id to (job
/// id, pool, runtime).
struct Runtimes {
    seen: Arc<Mutex<BTreeMap<String, Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Runtimes {
    fn start(owner: &str) -> Runtimes {
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let into = Arc::clone(&seen);
        let owner = owner.to_owned();
        let task = tokio::spawn(async move {
            loop {
                for container in containers_of(&owner).await {
                    if into.lock().contains_key(&container.id) {
                        continue;
                    }
                    let Some(parsed) = billet_scheduler::InstanceName::parse(&container.name)
                    else {
                        continue;
                    };
                    // Gone between the list and the inspect: its next
                    // container (if any) is seen at the next list.
                    let id = container.id.clone();
                    let Ok(Some(runtime)) =
                        tokio::task::spawn_blocking(move || runtime_at(&daemon_socket(), &id))
                            .await
                    else {
                        continue;
                    };
                    let runtime = Some(runtime);
                    into.lock().insert(
                        container.id,
                        (parsed.job.0, parsed.pool.to_owned(), runtime),
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Runtimes { seen, task }
    }

    /// Stops sampling: per job id, the (pool, runtime) of each container.
    fn finish(self) -> BTreeMap<u64, Vec<(String, Option<String>)>> {
        self.task.abort();
        let mut per_job: BTreeMap<u64, Vec<(String, Option<String>)>> = BTreeMap::new();
        for (job, pool, runtime) in self.seen.lock().values() {
            per_job
                .entry(*job)
                .or_default()
                .push((pool.clone(), runtime.clone()));
        }
        per_job
    }
}

/// Submits `sh -c script` with `trust` (`None`: the field left out, so
/// unclassified), which must be accepted; its id.
async fn submit(service: &Service, script: &str, trust: Option<&str>) -> u64 {
    let mut body = json!({"command": ["sh", "-c", script]});
    if let Some(trust) = trust {
        body["trust"] = json!(trust);
    }
    let answer = service.api().submit(body).await;
    assert_eq!(answer.status, 201, "{answer:?}");
    answer.json()["id"].as_u64().expect("an id")
}

/// What job `id` printed, whole.
async fn output(service: &Service, id: u64) -> String {
    let api = service.api();
    let response = reqwest::Client::builder()
        .no_proxy()
        .timeout(END)
        .build()
        .expect("an HTTP client")
        .get(format!("{}/v1/jobs/{id}/output", api.base()))
        .bearer_auth(api.token())
        .send()
        .await
        .expect("an answer");
    assert_eq!(response.status().as_u16(), 200);
    String::from_utf8_lossy(&response.bytes().await.expect("the body")).into_owned()
}

/// The host's kernel release.
fn host_kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .expect("the host's kernel release")
        .trim()
        .to_owned()
}

/// Asserts that job `job` ended with exit code 0 on `pool`.
fn ended_well(job: &Value, pool: &str) {
    assert_eq!(job["state"], "finished", "{job}");
    assert_eq!(job["exit_code"], 0, "{job}");
    assert_eq!(job["pool"], pool, "{job}");
}

// D19 (P7, B3): in a mixed fleet trusted jobs fill both pools, and
// untrusted and unclassified jobs run only on the gVisor pool, every one of
// their containers under runsc (a watcher inspects each), printing gVisor's
// kernel and seeing only their own processes; the trusted jobs on the runc
// pool print the host's kernel. Kill -9 of `serve` while an untrusted job
// runs, and a restart: the job is adopted on the gVisor pool and ends once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d19_a_mixed_fleet_runs_untrusted_jobs_only_behind_gvisor() {
    if !gvisor("d19-mixed") {
        return;
    }
    let mut service = Service::with_yaml("d19-mixed", mixed_fleet);
    service.start().await;
    let runtimes = Runtimes::start(&service.id);
    let host = host_kernel();
    let see = "uname -r; echo procs=$(ps -o pid | tail -n +2 | wc -l)";

    // Four trusted jobs at once fill both pools (two each); then untrusted
    // and unclassified ones, which wait for the gVisor pool.
    let mut trusted = Vec::new();
    for _ in 0..4 {
        trusted.push(submit(&service, &format!("sleep 2; {see}"), Some("trusted")).await);
    }
    service.api().wait_running(4, END).await;
    let mut boundary = Vec::new();
    for trust in [Some("untrusted"), None, Some("unknown"), Some("untrusted")] {
        // A second's sleep first, so that the watcher inspects each
        // container while it is there.
        boundary.push(submit(&service, &format!("sleep 1; {see}"), trust).await);
    }
    let ended = service
        .api()
        .wait_ended(&[trusted.clone(), boundary.clone()].concat(), END)
        .await;
    let trusted_pools: BTreeSet<&str> = trusted
        .iter()
        .map(|id| ended[id]["pool"].as_str().expect("a pool"))
        .collect();
    assert_eq!(
        trusted_pools,
        BTreeSet::from([RUNC_POOL, GVISOR_POOL]),
        "trusted work runs on either pool"
    );
    for id in &trusted {
        let job = &ended[id];
        assert_eq!(job["exit_code"], 0, "{job}");
        let printed = output(&service, *id).await;
        let kernel = printed.lines().next().unwrap_or_default();
        if job["pool"] == RUNC_POOL {
            assert_eq!(kernel, host, "job {id} on runc: {printed}");
        } else {
            assert_ne!(kernel, host, "job {id} behind gVisor: {printed}");
        }
    }
    for id in &boundary {
        let job = &ended[id];
        ended_well(job, GVISOR_POOL);
        let printed = output(&service, *id).await;
        let kernel = printed.lines().next().unwrap_or_default();
        assert_ne!(
            kernel, host,
            "job {id} ({}) ran on the host's kernel",
            job["trust"]
        );
        let procs: u32 = printed
            .lines()
            .find_map(|line| line.strip_prefix("procs="))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no process count in {printed:?}"));
        assert!(procs <= 6, "job {id} saw {procs} processes: {printed}");
    }
    println!(
        "D19 mixed fleet: trusted jobs on {trusted_pools:?}; {} untrusted and unclassified jobs behind gVisor (kernel {:?}, the host's {host:?})",
        boundary.len(),
        output(&service, boundary[0]).await.lines().next()
    );

    // Kill -9 mid-job, and a restart that adopts the gVisor container.
    let adopted = submit(&service, &format!("sleep 4; {see}"), Some("untrusted")).await;
    service
        .api()
        .wait_job(adopted, END, "running", |job| job["state"] == "running")
        .await;
    service.kill9();
    service.start().await;
    let ended = service.api().wait_ended(&[adopted], END).await;
    ended_well(&ended[&adopted], GVISOR_POOL);
    let printed = output(&service, adopted).await;
    assert_ne!(
        printed.lines().next().unwrap_or_default(),
        host,
        "{printed}"
    );
    service.finish().await;

    let per_job = runtimes.finish();
    for id in boundary.iter().chain([&adopted]) {
        let containers = per_job
            .get(id)
            .unwrap_or_else(|| panic!("the watcher never saw job {id}'s container"));
        assert_eq!(
            containers,
            &vec![(GVISOR_POOL.to_owned(), Some(RUNSC.to_owned()))],
            "job {id}: one container, on the gVisor pool, under runsc"
        );
    }
    for id in &trusted {
        let containers = &per_job[id];
        assert_eq!(containers.len(), 1, "job {id}: {containers:?}");
        let (pool, runtime) = &containers[0];
        let expected = (pool == GVISOR_POOL).then(|| RUNSC.to_owned());
        assert_eq!(
            runtime.as_deref().filter(|name| *name != "runc"),
            expected.as_deref(),
            "job {id} on {pool}"
        );
    }
}

// D19: a pool naming a runtime its daemon does not list stops `serve` at
// start (exit 2), naming the pool and what the daemon lists, before the
// state directory is made.
#[test]
fn d19_a_runtime_the_daemon_does_not_list_stops_the_start() {
    if !daemon("d19-unlisted") {
        return;
    }
    let refused = serve_refused(&format!(
        "deployment: {{id: d19-unlisted}}
providers:
  - {{name: odd, kind: docker, capacity: 1, docker: {{image: \"{TEST_IMAGE}\", endpoint: \"{}\", runtime: billet-no-such-runtime, isolation: boundary}}}}
routing: {{default_kind: docker, untrusted_kinds: [docker]}}
",
        daemon_endpoint()
    ));
    let stderr = &refused.stderr;
    assert_eq!(refused.code, Some(2), "{stderr}");
    assert!(
        stderr.contains("provider \"odd\"")
            && stderr.contains("no runtime \"billet-no-such-runtime\"")
            && stderr.contains("runc"),
        "{stderr}"
    );
    assert!(
        !refused.state_made,
        "nothing is made before the pools are checked"
    );
}

/// The intake test's GitHub jobs: (job id, run id, repository).
const GITHUB_JOBS: [(u64, u64, &str); 3] = [
    (1, 10, "octo-org/app"),
    (2, 20, "octo-org/site"),
    (3, 30, "octo-org/app"),
];

/// The GitHub webhook's secret and API token of the intake's test.
const SECRET: &str = "the webhook's secret";
const TOKEN: &str = "ghp_the-operators-token";

/// A `workflow_job` delivery's body: GitHub job `id` of run `run` in
/// `repository`, labelled `self-hosted, linux`.
fn workflow_job(action: &str, id: u64, run: u64, repository: &str) -> Value {
    json!({
        "action": action,
        "workflow_job": {"id": id, "run_id": run, "labels": ["self-hosted", "linux"]},
        "repository": {"id": 1, "full_name": repository, "private": true},
    })
}

// D19, G3, G4 (issue 50): the GitHub intake over the mixed fleet, the runc
// pool first in `github.pools` with the same labels as the gVisor pool.
// A private repository's job of the trusted scope gets its runner on the
// runc pool (the first that fits); a public repository's job and a fork's
// pull request (their trust lowered to untrusted) get theirs only on the
// gVisor pool, under runsc (a watcher inspects every container), never on
// the runc pool. Each runner's container holds its JIT config.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d19_g4_public_and_fork_jobs_get_runners_only_behind_gvisor() {
    if !gvisor("d19-github") {
        return;
    }
    let standin = StandIn::start(Auth::Token(TOKEN.to_owned())).await;
    {
        let repo =
            |name: &str, private: bool| json!({"id": 1, "full_name": name, "private": private});
        let mut github = standin.state.lock();
        for (run, repository, head, private) in [
            (10, "octo-org/app", "octo-org/app", true),
            (20, "octo-org/site", "octo-org/site", false),
            (30, "octo-org/app", "someone/app", true),
        ] {
            github.runs.insert(
                run,
                json!({"id": run, "repository": repo(repository, private), "head_repository": repo(head, private)}),
            );
        }
    }
    let secrets = tempfile::tempdir().expect("a directory");
    for (name, text) in [("token", TOKEN), ("secret", SECRET)] {
        let path = secrets.path().join(name);
        std::fs::write(&path, text).expect("a secret");
        std::fs::set_permissions(
            &path,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o600),
        )
        .expect("mode 0600");
    }
    let (url, dir) = (standin.url.clone(), secrets.path().display().to_string());
    let mut service = Service::with_yaml("d19-github", |id| {
        format!(
            "{fleet}github:
  api_url: {url}
  token_file: {dir}/token
  webhook_secret_file: {dir}/secret
  scopes: [{{org: octo-org, trust: trusted}}]
  pools:
    - {{pool: {RUNC_POOL}, labels: [self-hosted, linux]}}
    - {{pool: {GVISOR_POOL}, labels: [self-hosted, linux]}}
  runner:
    command: [sh, -c, 'test -n \"$ACTIONS_RUNNER_INPUT_JITCONFIG\" && sleep 60']
",
            fleet = mixed_fleet(id)
        )
    });
    service.start().await;
    let runtimes = Runtimes::start(&service.id);
    for (id, run, repository) in GITHUB_JOBS {
        let queued = workflow_job("queued", id, run, repository);
        let status = support::deliver_github(service.base(), SECRET, id, &queued).await;
        assert_eq!(status, 202, "GitHub job {id}'s delivery");
    }
    let running = service.api().wait_running(3, END).await;
    let mut pool_of = BTreeMap::new();
    for job in &running {
        let view = service.api().job(job["id"].as_u64().expect("an id")).await;
        let github_job = view["github"]["job_id"]
            .as_u64()
            .unwrap_or_else(|| panic!("{view}"));
        pool_of.insert(
            github_job,
            view["pool"].as_str().expect("a pool").to_owned(),
        );
        assert_eq!(
            view["trust"],
            if github_job == 1 {
                "trusted"
            } else {
                "untrusted"
            },
            "{view}"
        );
    }
    assert_eq!(
        pool_of,
        BTreeMap::from([
            (1, RUNC_POOL.to_owned()),
            (2, GVISOR_POOL.to_owned()),
            (3, GVISOR_POOL.to_owned()),
        ]),
        "GitHub job to its runner's pool"
    );
    // The runners' containers run (their JIT config seen) while the
    // watcher inspects them.
    service.wait_containers_running(3, END).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The jobs are cancelled before any runner took one: each runner is
    // retired, its container removed.
    for (id, run, repository) in GITHUB_JOBS {
        let completed = workflow_job("completed", id, run, repository);
        let status = support::deliver_github(service.base(), SECRET, 10 + id, &completed).await;
        assert_eq!(status, 202, "GitHub job {id}'s completion");
    }
    standin.assert_no_violation();
    service.finish().await;

    let per_job = runtimes.finish();
    for job in &running {
        let id = job["id"].as_u64().expect("an id");
        let containers = per_job
            .get(&id)
            .unwrap_or_else(|| panic!("the watcher never saw runner job {id}'s container"));
        assert_eq!(containers.len(), 1, "runner job {id}: {containers:?}");
        let (pool, runtime) = &containers[0];
        assert_eq!(
            pool,
            job["pool"].as_str().unwrap_or_default(),
            "runner job {id}"
        );
        let expected = (pool == GVISOR_POOL).then(|| RUNSC.to_owned());
        assert_eq!(
            runtime.as_deref().filter(|name| *name != "runc"),
            expected.as_deref(),
            "runner job {id} on {pool}"
        );
    }
    println!("D19 with GitHub's intake: GitHub job to its runner's pool {pool_of:?}");
}
