//! End-to-end tests of the service (L9, with L2-L7): the built `billet`
//! binary run as a child process, driven over real HTTP, running jobs on a
//! real docker daemon. Each test has deployment ids of its own, so they run
//! in parallel on one daemon, and each ends by checking that the daemon holds
//! no container of its deployments. Without a daemon they skip with one line,
//! unless `BILLET_DOCKER_REQUIRED=1` (set by `.ci/run`) makes that a failure.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use support::{
    Answer, Auth, Body, Deadline, POLL, POOL, Pool, Service, SocketProxy, Watch, daemon,
    daemon_endpoint, expected_code, id_of, is_ended, is_rfc3339, job_of_instance, metric,
    run_billet,
};

/// How long any job of these tests may take to end once submitted.
const END: Duration = Duration::from_secs(60);

/// The bound SIGTERM must be answered within (L7).
const SHUTDOWN_BOUND: Duration = Duration::from_secs(20);

/// A trusted job running `sh -c script`, as a request body.
fn sh(script: &str) -> Value {
    json!({"command": ["sh", "-c", script], "trust": "trusted"})
}

/// Checks that `job` has every field of L4, with the types L4 gives them.
fn assert_job_shape(job: &Value) {
    for field in [
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
    ] {
        assert!(
            job.get(field).is_some(),
            "no field {field:?} in the job {job}"
        );
    }
    assert!(job["id"].is_u64(), "{job}");
    assert!(
        matches!(
            job["state"].as_str(),
            Some("queued" | "running" | "finished" | "failed" | "cancelled")
        ),
        "{job}"
    );
    assert!(
        job["labels"].is_array() && job["command"].is_array(),
        "{job}"
    );
    for time in ["submitted_at", "started_at", "ended_at"] {
        let value = &job[time];
        assert!(
            value.is_null() || value.as_str().is_some_and(is_rfc3339),
            "{time} is neither null nor RFC 3339 in {job}"
        );
    }
    assert!(
        job["submitted_at"].as_str().is_some(),
        "no submitted_at: {job}"
    );
}

/// Checks that `job` finished with `code`, with its start, end, pool and
/// instance known.
fn assert_finished(job: &Value, code: i64) {
    assert_job_shape(job);
    assert_eq!(job["state"], "finished", "{job}");
    assert_eq!(job["exit_code"], code, "{job}");
    assert_eq!(job["pool"], POOL, "{job}");
    assert!(
        job["instance"].as_str().is_some_and(|s| !s.is_empty()),
        "{job}"
    );
    for time in ["started_at", "ended_at"] {
        assert!(job[time].as_str().is_some_and(is_rfc3339), "{time}: {job}");
    }
}

/// How long a container may stay `created` (never started) before a test
/// calls its job stuck: a launch takes well under a second here.
const STUCK_CREATED: Duration = Duration::from_secs(10);

/// What must hold at every look while jobs run across restarts: never more
/// live containers nor `running` jobs than the capacity (B4, B8), and no
/// container left `created` (never started) for longer than
/// [`STUCK_CREATED`]: that is a launch that never completes, whose job would
/// hold its lease for ever (L6, D11). Remembers since when it saw each
/// `created` container.
struct Invariants {
    capacity: usize,
    created: BTreeMap<String, Instant>,
}

impl Invariants {
    fn new(capacity: u32) -> Invariants {
        Invariants {
            capacity: capacity as usize,
            created: BTreeMap::new(),
        }
    }

    /// Looks once; panics naming what broke.
    async fn check(&mut self, service: &Service) {
        let containers = service.containers().await;
        let live: Vec<_> = containers.iter().filter(|c| c.is_live()).collect();
        assert!(
            live.len() <= self.capacity,
            "{} live containers on a pool of capacity {}: {live:#?}",
            live.len(),
            self.capacity
        );
        let running = service.jobs(Some("running")).await;
        assert!(
            running.len() <= self.capacity,
            "{} jobs running on a pool of capacity {}: {running:#?}",
            running.len(),
            self.capacity
        );
        self.created.retain(|id, _| {
            containers
                .iter()
                .any(|c| &c.id == id && c.state == "created")
        });
        for c in containers.iter().filter(|c| c.state == "created") {
            let since = *self
                .created
                .entry(c.id.clone())
                .or_insert_with(Instant::now);
            if since.elapsed() > STUCK_CREATED {
                let job = match job_of_instance(&c.name) {
                    Some(id) => service.job(id).await,
                    None => Value::Null,
                };
                panic!(
                    "container {} ({}) has stayed `created` (never started) for {:?}; its job: {job}",
                    c.id,
                    c.name,
                    since.elapsed()
                );
            }
        }
    }
}

/// Polls until every job has ended, checking `invariants` at every look;
/// the jobs `ids`, by id.
async fn wait_all_ended(
    service: &Service,
    invariants: &mut Invariants,
    ids: &[u64],
) -> BTreeMap<u64, Value> {
    let deadline = Deadline::after(END, "every job to end");
    loop {
        let jobs = service.jobs(None).await;
        if jobs.iter().all(is_ended) {
            break;
        }
        invariants.check(service).await;
        deadline.check(&jobs);
        tokio::time::sleep(POLL).await;
    }
    service.wait_ended(ids, END).await
}

/// The ids of `jobs`, in their order.
fn ids(jobs: &[Value]) -> Vec<u64> {
    jobs.iter().map(id_of).collect()
}

// L9: jobs over capacity with mixed exit codes all end finished with their
// exit codes, and the daemon never holds more containers of the deployment
// at once than the pool's capacity (from every container event, and from
// sampling its container list). L4: the jobs' fields, `running` jobs, the
// pools, listing by state in submission order, the metrics and health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l9_jobs_over_capacity_all_end_with_their_exit_codes() {
    if !daemon("l9_jobs_over_capacity_all_end_with_their_exit_codes") {
        return;
    }
    let capacity = 2;
    let mut service = Service::new(
        "capacity",
        &Pool {
            capacity,
            endpoint: daemon_endpoint(),
        },
    );
    let watch = Watch::start(&service.id).await;
    service.start().await;
    let listening = format!(
        "listening on {}",
        service.base().trim_start_matches("http://")
    );
    assert!(
        service.last_log().contains(&listening),
        "no {listening:?} in the log:\n{}",
        service.last_log()
    );

    let codes = [0, 3, 1, 7, 0, 42];
    let mut submitted = Vec::new();
    for code in codes {
        let script = format!("sleep 1; exit {code}");
        let job = service.submit_sh(&script).await;
        assert_job_shape(&job);
        assert!(
            matches!(job["state"].as_str(), Some("queued" | "running")),
            "{job}"
        );
        assert_eq!(job["trust"], "trusted", "{job}");
        assert_eq!(job["labels"], json!([]), "{job}");
        assert_eq!(job["command"], json!(["sh", "-c", script]), "{job}");
        assert!(
            job["exit_code"].is_null() && job["ended_at"].is_null(),
            "{job}"
        );
        submitted.push(id_of(&job));
    }
    let unique: BTreeSet<_> = submitted.iter().collect();
    assert_eq!(unique.len(), codes.len(), "ids repeat: {submitted:?}");

    // While they run: never more running jobs, leases or containers than capacity.
    let deadline = Deadline::after(END, "every job to end");
    let mut most_running = 0;
    loop {
        let running = service.jobs(Some("running")).await;
        most_running = most_running.max(running.len());
        assert!(running.len() <= capacity as usize, "running: {running:#?}");
        let pool = service.pool().await;
        assert_eq!(pool["capacity"], capacity, "{pool}");
        assert_eq!(pool["kind"], "docker", "{pool}");
        assert!(
            pool["held"]
                .as_u64()
                .is_some_and(|h| h <= u64::from(capacity)),
            "{pool}"
        );
        assert!(pool["queued"].is_u64(), "{pool}");
        let metrics = service.metrics().await;
        let leases = metric(&metrics, "billet_pool_leases", &[("pool", POOL)]);
        assert!(
            leases.is_some_and(|l| l <= f64::from(capacity)),
            "billet_pool_leases: {leases:?} in\n{metrics}"
        );
        let live = service
            .containers()
            .await
            .into_iter()
            .filter(|c| c.is_live())
            .count();
        assert!(live <= capacity as usize, "{live} live containers");
        let all = service.jobs(None).await;
        if all.iter().all(is_ended) {
            break;
        }
        deadline.check(&all);
        tokio::time::sleep(POLL).await;
    }
    assert!(most_running >= 1, "no job was ever seen running");

    let ended = service.wait_ended(&submitted, END).await;
    for (id, code) in submitted.iter().zip(codes) {
        assert_finished(&ended[id], code);
    }
    // Listing by state answers in submission order.
    assert_eq!(ids(&service.jobs(Some("finished")).await), submitted);
    assert_eq!(ids(&service.jobs(None).await), submitted);
    assert!(service.jobs(Some("queued")).await.is_empty());
    assert!(service.jobs(Some("failed")).await.is_empty());

    let metrics = service.metrics().await;
    for (name, labels, value) in [
        (
            "billet_pool_capacity",
            vec![("pool", POOL)],
            f64::from(capacity),
        ),
        ("billet_pool_leases", vec![("pool", POOL)], 0.0),
        ("billet_jobs_queued", vec![], 0.0),
        (
            "billet_jobs_ended_total",
            vec![("outcome", "finished")],
            6.0,
        ),
        ("billet_inventory_errors_total", vec![("pool", POOL)], 0.0),
    ] {
        assert_eq!(
            metric(&metrics, name, &labels),
            Some(value),
            "{name}{labels:?} in\n{metrics}"
        );
    }
    let health = service.health().await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(health.json()["status"], "ok", "{health:?}");

    service.wait_no_containers(Duration::from_secs(20)).await;
    watch
        .wait_events("destroy", codes.len(), Duration::from_secs(10))
        .await;
    let tally = watch.tally();
    let samples = watch.samples();
    assert!(samples.count > 0, "the daemon was never sampled");
    assert!(
        tally.max_running <= capacity as usize,
        "{} containers ran at once: {tally:?}",
        tally.max_running
    );
    assert!(
        tally.max_existing <= capacity as usize,
        "{} containers existed at once (capacity {capacity}): {tally:?}",
        tally.max_existing
    );
    assert!(samples.max_live <= capacity as usize, "{samples:?}");
    for id in &submitted {
        assert_eq!(tally.starts.get(id), Some(&1), "job {id}: {tally:?}");
    }
    // The instance the job names is its container (by id or by name).
    for event in watch.events().iter().filter(|e| e.action == "start") {
        let job = &ended[&job_of_instance(&event.name).expect("a job's instance")];
        let instance = job["instance"].as_str().unwrap_or_default();
        assert!(
            instance == event.id || instance == event.name,
            "job {job} names instance {instance:?}, its container is {} ({})",
            event.id,
            event.name
        );
    }
    service.finish().await;
}

// L6, L9: `kill -9` at four moments (right after submissions were answered,
// with two more in flight; as soon as a job holds a lease again, its launch
// likely in flight; while containers run; once some jobs have ended), each
// followed by a restart on the same state: no accepted job lost, none run
// twice (one container start per job, never two containers of a job at
// once), running containers adopted (their jobs end with their real exit
// codes, never relaunched), no launch left half done (`created`) for ever,
// outcomes ended before a kill kept as they were, and never more containers
// or running jobs than capacity across the restarts (B4, B8).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_l9_kill_9_at_any_moment_loses_and_duplicates_nothing() {
    if !daemon("l6_l9_kill_9_at_any_moment_loses_and_duplicates_nothing") {
        return;
    }
    let capacity = 2;
    let mut service = Service::new(
        "kill9",
        &Pool {
            capacity,
            endpoint: daemon_endpoint(),
        },
    );
    let watch = Watch::start(&service.id).await;
    service.start().await;

    let body = |key: &str, code: i64| {
        json!({
            "command": ["sh", "-c", format!("sleep 2; exit {code}")],
            "trust": "trusted",
            "key": key,
        })
    };
    // key -> id of every job known to be accepted.
    let mut accepted: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..6 {
        let key = format!("k{i}");
        let answer = service.submit(body(&key, 10 + i)).await;
        assert_eq!(answer.status, 201, "{answer:?}");
        accepted.insert(key, id_of(answer.json()));
    }

    // Moment 1: right after the answers, with two more submissions in flight.
    let in_flight: Vec<_> = (0..2)
        .map(|i| {
            let api = service.api();
            let request = body(&format!("s{i}"), 20 + i);
            tokio::spawn(async move {
                api.request(
                    Method::POST,
                    "/v1/jobs",
                    Some(Body::Json(request)),
                    Auth::Token,
                )
                .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(5)).await;
    service.kill9();
    let mut unsure = Vec::new();
    for (i, task) in in_flight.into_iter().enumerate() {
        let key = format!("s{i}");
        match task.await.expect("the request task") {
            Ok(answer) if answer.status == 201 => {
                accepted.insert(key, id_of(answer.json()));
            }
            Ok(answer) => panic!("a submission in flight answered {answer:?}"),
            Err(_) => unsure.push(i),
        }
    }
    service.start().await;
    // Accepted jobs are all there; a submission whose answer was lost is
    // sent again with its key: the same job when it was committed, never two.
    let listed = service.jobs(None).await;
    for (key, id) in &accepted {
        assert!(
            listed.iter().any(|j| id_of(j) == *id),
            "job {id} (key {key}) was answered 201 and is lost after kill -9: {listed:#?}"
        );
    }
    for i in 0..2i64 {
        let key = format!("s{i}");
        let answer = service.submit(body(&key, 20 + i)).await;
        let id = id_of(answer.json());
        match accepted.get(&key) {
            Some(&known) => {
                assert_eq!(answer.status, 200, "key {key} again: {answer:?}");
                assert_eq!(id, known, "key {key} again: {answer:?}");
            }
            None => {
                assert!(
                    matches!(answer.status, 200 | 201),
                    "key {key} again: {answer:?}"
                );
                accepted.insert(key, id);
            }
        }
    }
    let all_ids: BTreeSet<u64> = accepted.values().copied().collect();
    assert_eq!(all_ids.len(), 8, "{accepted:?}");
    let listed = service.jobs(None).await;
    assert_eq!(
        ids(&listed).into_iter().collect::<BTreeSet<_>>(),
        all_ids,
        "after the first restart (unsure before it: {unsure:?}): {listed:#?}"
    );

    // Moment 2: as soon as a job holds a lease again (its launch is
    // likely in flight).
    let mut invariants = Invariants::new(capacity);
    service.wait_running(1, END).await;
    service.kill9();
    service.start().await;

    // Moment 3: while jobs run (a container of theirs really runs).
    let deadline = Deadline::after(END, "a running container");
    loop {
        let containers = service.containers().await;
        if containers.iter().any(|c| c.state == "running") {
            break;
        }
        invariants.check(&service).await;
        deadline.check(&containers);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    service.kill9();
    service.start().await;
    assert_eq!(
        ids(&service.jobs(None).await)
            .into_iter()
            .collect::<BTreeSet<_>>(),
        all_ids
    );

    // Moment 4: once some have ended and others have not.
    let deadline = Deadline::after(END, "some jobs ended, others not");
    let before = loop {
        let jobs = service.jobs(None).await;
        let ended = jobs.iter().filter(|j| is_ended(j)).count();
        if ended >= 2 && ended < jobs.len() {
            break jobs;
        }
        invariants.check(&service).await;
        deadline.check(&jobs);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    service.kill9();
    service.start().await;

    let ids_sorted: Vec<u64> = all_ids.iter().copied().collect();
    let ended = wait_all_ended(&service, &mut invariants, &ids_sorted).await;
    for job in ended.values() {
        assert_finished(job, expected_code(job));
    }
    for job in before.iter().filter(|j| is_ended(j)) {
        let after = &ended[&id_of(job)];
        for field in [
            "state",
            "exit_code",
            "submitted_at",
            "started_at",
            "ended_at",
        ] {
            assert_eq!(
                job[field], after[field],
                "the ended job's {field} changed across kill -9: before {job}, after {after}"
            );
        }
    }
    assert_eq!(service.jobs(None).await.len(), 8);

    service.wait_no_containers(Duration::from_secs(20)).await;
    watch
        .wait_events("destroy", 8, Duration::from_secs(10))
        .await;
    let tally = watch.tally();
    for id in &all_ids {
        assert_eq!(
            tally.starts.get(id),
            Some(&1),
            "job {id} was started {:?} times: {tally:?}",
            tally.starts.get(id)
        );
    }
    assert!(tally.max_existing_per_job <= 1, "{tally:?}");
    assert!(
        watch.samples().max_live_per_job <= 1,
        "{:?}",
        watch.samples()
    );
    assert!(tally.max_running <= capacity as usize, "{tally:?}");
    assert!(tally.max_existing <= capacity as usize, "{tally:?}");
    service.finish().await;
}

// L6, D11, B5: a launch whose answer is lost mid-call (a proxy passes the
// create to the daemon, which makes the container, and drops the answer)
// still runs its job once: once the daemon answers again, the job ends
// finished with its own exit code, its container started once (adopted, or
// destroyed and made again, never run twice), never left `created`; the
// same when the server is killed (`kill -9`) after losing the answer and
// started again. Never more containers than capacity meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_d11_a_launch_whose_answer_is_lost_runs_its_job_once() {
    if !daemon("l6_d11_a_launch_whose_answer_is_lost_runs_its_job_once") {
        return;
    }
    let proxy = SocketProxy::start();
    let capacity = 2;
    let mut service = Service::new(
        "lost",
        &Pool {
            capacity,
            endpoint: proxy.endpoint(),
        },
    );
    let watch = Watch::start(&service.id).await;
    service.start().await;
    let mut invariants = Invariants::new(capacity);
    let made = |service: &Service, id: u64| {
        let owner = service.id.clone();
        async move {
            let deadline = Deadline::after(END, format!("a container for job {id}"));
            loop {
                let all = support::containers_of(&owner).await;
                if all.iter().any(|c| job_of_instance(&c.name) == Some(id)) {
                    return;
                }
                deadline.check(&all);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    // Lost answers fail every list too: the first inventory must have been
    // read before, or nothing is ever placed (seen once in CI, on podman).
    service.wait_first_inventory_read().await;

    // The answer lost, the daemon answering again, no restart.
    proxy.lose_answers();
    let first = id_of(&service.submit_sh("sleep 1; exit 3").await);
    made(&service, first).await;
    proxy.restore();
    let ended = wait_all_ended(&service, &mut invariants, &[first]).await;
    assert_finished(&ended[&first], 3);

    // The answer lost, then kill -9 and a restart.
    proxy.lose_answers();
    let second = id_of(&service.submit_sh("sleep 1; exit 4").await);
    made(&service, second).await;
    service.kill9();
    proxy.restore();
    service.start().await;
    let ended = wait_all_ended(&service, &mut invariants, &[first, second]).await;
    assert_finished(&ended[&first], 3);
    assert_finished(&ended[&second], 4);

    service.wait_no_containers(Duration::from_secs(20)).await;
    watch
        .wait_events("destroy", 2, Duration::from_secs(10))
        .await;
    let tally = watch.tally();
    for id in [first, second] {
        assert_eq!(tally.starts.get(&id), Some(&1), "job {id}: {tally:?}");
    }
    assert!(tally.max_existing_per_job <= 1, "{tally:?}");
    service.finish().await;
}

// L6, B4, B8: a launch still on its way to the daemon when the server is
// killed (a proxy holds the create request and delivers it only after the
// restart, as a daemon that received it late would): the restarted server
// never holds more containers or running jobs than capacity, whatever
// lands, and both jobs end finished with their exit codes, each started
// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l6_b8_a_launch_landing_after_a_restart_never_overcommits() {
    if !daemon("l6_b8_a_launch_landing_after_a_restart_never_overcommits") {
        return;
    }
    let proxy = SocketProxy::start();
    let capacity = 1;
    let mut service = Service::new(
        "late",
        &Pool {
            capacity,
            endpoint: proxy.endpoint(),
        },
    );
    let watch = Watch::start(&service.id).await;
    service.start().await;
    let mut invariants = Invariants::new(capacity);
    // The hold shuts every open connection and holds every new one, lists
    // included: the first inventory must have been read before it, or the
    // pool is never ready and nothing is ever placed (seen once in CI).
    service.wait_first_inventory_read().await;

    let hold = proxy.hold();
    let first = id_of(&service.submit_sh("sleep 1; exit 3").await);
    let second = id_of(&service.submit_sh("sleep 1; exit 4").await);
    let deadline = Deadline::after(Duration::from_secs(10), "the first job's create held");
    while hold.creates() == 0 {
        deadline.check(hold.creates());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    service.kill9();
    proxy.pass();
    service.start().await;
    // The restarted server places what it will; then the old create lands,
    // well before the first job (1 s) could have run to its end.
    tokio::time::sleep(Duration::from_millis(300)).await;
    invariants.check(&service).await;
    hold.release();
    let look = Instant::now();
    while look.elapsed() < Duration::from_millis(1500) {
        invariants.check(&service).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ended = wait_all_ended(&service, &mut invariants, &[first, second]).await;
    assert_finished(&ended[&first], 3);
    assert_finished(&ended[&second], 4);

    service.wait_no_containers(Duration::from_secs(20)).await;
    let tally = watch.tally();
    assert!(tally.max_existing <= capacity as usize, "{tally:?}");
    for id in [first, second] {
        assert_eq!(tally.starts.get(&id), Some(&1), "job {id}: {tally:?}");
    }
    service.finish().await;
}

// L9, L4, B6: the daemon cut (a proxy between the service and the daemon
// closes its socket and every connection) for several reconcile intervals:
// `/healthz` answers 503 degraded naming the pool, the inventory errors are
// counted, and nothing is freed: running jobs stay running with their leases
// and containers, the queued job stays queued, no job fails or vanishes.
// Restored, health is ok again and every job finishes with its exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l9_a_daemon_cut_frees_nothing_and_health_says_so() {
    if !daemon("l9_a_daemon_cut_frees_nothing_and_health_says_so") {
        return;
    }
    let proxy = SocketProxy::start();
    let mut service = Service::new(
        "cut",
        &Pool {
            capacity: 2,
            endpoint: proxy.endpoint(),
        },
    );
    let watch = Watch::start(&service.id).await;
    service.start().await;
    let long = [
        service.submit_sh("sleep 10; exit 5").await,
        service.submit_sh("sleep 10; exit 6").await,
    ];
    let queued = service.submit_sh("sleep 1; exit 7").await;
    let running = service.wait_running(2, END).await;
    assert_eq!(ids(&running), ids(&long));
    // Cut once both containers really run (a lease is held from placement on).
    service.wait_containers_running(2, END).await;
    let health = service.health().await;
    assert_eq!(health.status, 200, "{health:?}");

    proxy.cut();
    let cut_at = Instant::now();
    let deadline = Deadline::after(Duration::from_secs(15), "/healthz to say degraded");
    let degraded = loop {
        let health = service.health().await;
        if health.status == 503 {
            break health;
        }
        deadline.check(&health);
        tokio::time::sleep(POLL).await;
    };
    assert_eq!(degraded.json()["status"], "degraded", "{degraded:?}");
    assert_eq!(degraded.json()["unreadable"], json!([POOL]), "{degraded:?}");

    // Several reconcile intervals (500 ms) with the daemon cut: nothing freed.
    let hold = Instant::now();
    while hold.elapsed() < Duration::from_millis(2500) {
        for job in &long {
            let now = service.job(id_of(job)).await;
            assert_eq!(now["state"], "running", "during the cut: {now}");
        }
        let now = service.job(id_of(&queued)).await;
        assert_eq!(now["state"], "queued", "during the cut: {now}");
        let pool = service.pool().await;
        assert_eq!(pool["held"], 2, "during the cut: {pool}");
        let health = service.health().await;
        assert_eq!(health.status, 503, "during the cut: {health:?}");
        let live = service
            .containers()
            .await
            .into_iter()
            .filter(|c| c.state == "running")
            .count();
        assert_eq!(live, 2, "the containers stopped during the cut");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = service.metrics().await;
    let errors = metric(&metrics, "billet_inventory_errors_total", &[("pool", POOL)]);
    assert!(
        errors.is_some_and(|e| e >= 1.0),
        "billet_inventory_errors_total: {errors:?} in\n{metrics}"
    );
    assert!(
        service.jobs(Some("failed")).await.is_empty(),
        "a job failed during the cut"
    );
    assert!(
        cut_at.elapsed() < Duration::from_secs(9),
        "the cut lasted past the jobs' run time; the test proves less than it should"
    );

    proxy.restore();
    let deadline = Deadline::after(Duration::from_secs(15), "/healthz to be ok again");
    loop {
        let health = service.health().await;
        if health.status == 200 {
            assert_eq!(health.json()["status"], "ok", "{health:?}");
            break;
        }
        deadline.check(&health);
        tokio::time::sleep(POLL).await;
    }
    let all = [id_of(&long[0]), id_of(&long[1]), id_of(&queued)];
    let ended = service.wait_ended(&all, END).await;
    for (id, code) in all.iter().zip([5, 6, 7]) {
        assert_finished(&ended[id], code);
    }
    service.wait_no_containers(Duration::from_secs(20)).await;
    let tally = watch.tally();
    for id in &all {
        assert_eq!(tally.starts.get(id), Some(&1), "job {id}: {tally:?}");
    }
    service.finish().await;
}

// L9: two deployments (two servers, their own ids, state and tokens) on one
// daemon never see each other's jobs or containers: each lists only its own
// jobs, an id only the other has is 404, the other's token is refused, each
// pool counts only its own containers, and both complete. L3: `--token-file`
// names where the token is read, and a token already there is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l9_two_deployments_on_one_daemon_never_see_each_other() {
    if !daemon("l9_two_deployments_on_one_daemon_never_see_each_other") {
        return;
    }
    let mut blue = Service::new(
        "blue",
        &Pool {
            capacity: 2,
            endpoint: daemon_endpoint(),
        },
    );
    let green_token_dir = tempfile::tempdir().expect("a directory");
    let green_token = green_token_dir.path().join("green-token");
    std::fs::write(&green_token, "green-secret-token-of-32-characters\n").expect("write the token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // L13: a token file others can read is refused.
        std::fs::set_permissions(&green_token, std::fs::Permissions::from_mode(0o600))
            .expect("chmod the token");
    }
    let mut green = Service::new(
        "green",
        &Pool {
            capacity: 1,
            endpoint: daemon_endpoint(),
        },
    )
    .with_token_file(green_token.clone());
    let blue_watch = Watch::start(&blue.id).await;
    let green_watch = Watch::start(&green.id).await;
    blue.start().await;
    green.start().await;
    assert_eq!(green.token(), "green-secret-token-of-32-characters");
    assert!(
        !green.state_dir().join("token").exists(),
        "a token was written to the state directory though --token-file was given"
    );

    let mut blue_ids = Vec::new();
    let mut green_ids = Vec::new();
    for _ in 0..3 {
        blue_ids.push(id_of(&blue.submit_sh("sleep 1; exit 11").await));
    }
    for _ in 0..2 {
        green_ids.push(id_of(&green.submit_sh("sleep 1; exit 22").await));
    }

    // While both run.
    blue.wait_running(1, END).await;
    for (service, own, code) in [(&blue, &blue_ids, 11), (&green, &green_ids, 22)] {
        let listed = service.jobs(None).await;
        assert_eq!(&ids(&listed), own, "{listed:#?}");
        for job in &listed {
            assert_eq!(expected_code(job), code, "{job}");
        }
    }
    for id in blue_ids.iter().filter(|id| !green_ids.contains(id)) {
        let answer = green
            .call(Method::GET, &format!("/v1/jobs/{id}"), None, Auth::Token)
            .await;
        assert_eq!(
            answer.status, 404,
            "green answers blue's job {id}: {answer:?}"
        );
    }
    let mut blue_with_greens_token = blue.api();
    blue_with_greens_token.set_token(green.token());
    let answer = blue_with_greens_token
        .call(Method::GET, "/v1/jobs", None, Auth::Token)
        .await;
    assert_eq!(answer.status, 401, "blue took green's token: {answer:?}");

    let blue_ended = blue.wait_ended(&blue_ids, END).await;
    let green_ended = green.wait_ended(&green_ids, END).await;
    for job in blue_ended.values() {
        assert_finished(job, 11);
    }
    for job in green_ended.values() {
        assert_finished(job, 22);
    }
    for (service, n) in [(&blue, 3.0), (&green, 2.0)] {
        let metrics = service.metrics().await;
        assert_eq!(
            metric(
                &metrics,
                "billet_jobs_ended_total",
                &[("outcome", "finished")]
            ),
            Some(n),
            "{metrics}"
        );
    }
    blue.wait_no_containers(Duration::from_secs(20)).await;
    green.wait_no_containers(Duration::from_secs(20)).await;
    let (blue_tally, green_tally) = (blue_watch.tally(), green_watch.tally());
    assert!(blue_tally.max_existing <= 2, "{blue_tally:?}");
    assert!(green_tally.max_existing <= 1, "{green_tally:?}");
    assert_eq!(
        blue_tally.starts.keys().copied().collect::<Vec<_>>(),
        blue_ids
    );
    assert_eq!(
        green_tally.starts.keys().copied().collect::<Vec<_>>(),
        green_ids
    );
    blue.finish().await;
    green.finish().await;
}

/// Sends `body` (raw) to `POST /v1/jobs` and checks the answer is a 4xx
/// with a JSON `error` mentioning every word of `names`.
async fn refused(service: &Service, what: &str, body: Body, names: &[&str]) -> Answer {
    let answer = service
        .request(Method::POST, "/v1/jobs", Some(body), Auth::Token)
        .await
        .unwrap_or_else(|e| panic!("{what}: no answer: {e:?}"));
    assert!(
        (400..500).contains(&answer.status),
        "{what}: not a 4xx: {answer:?}"
    );
    let error = answer.error();
    for name in names {
        assert!(
            error.contains(name),
            "{what}: the error does not name {name:?}: {error:?}"
        );
    }
    answer
}

// L5, L4: every kind of bad request answers 4xx with {"error"} naming the
// field where there is one; a missing or wrong token answers 401; a job no
// pool could take answers 422; nothing of it is recorded, and the server
// keeps serving (a good job afterwards runs and is the only one listed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l5_bad_requests_answer_4xx_naming_the_field_and_record_nothing() {
    if !daemon("l5_bad_requests_answer_4xx_naming_the_field_and_record_nothing") {
        return;
    }
    let mut service = Service::new(
        "bad",
        &Pool {
            capacity: 1,
            endpoint: daemon_endpoint(),
        },
    );
    service.start().await;
    let raw = |s: &str| Body::Raw(s.as_bytes().to_vec());
    let json_body = |v: Value| Body::Raw(serde_json::to_vec(&v).expect("json"));

    refused(
        &service,
        "malformed JSON",
        raw("{\"command\": [\"true\""),
        &[],
    )
    .await;
    refused(&service, "not JSON at all", raw("command=true"), &[]).await;
    refused(&service, "an empty body", raw(""), &[]).await;
    refused(&service, "a JSON array", raw("[\"true\"]"), &[]).await;
    refused(
        &service,
        "an unknown field",
        json_body(json!({"command": ["true"], "trust": "trusted", "colour": "red"})),
        &["colour"],
    )
    .await;
    refused(
        &service,
        "no command",
        json_body(json!({"trust": "trusted"})),
        &["command"],
    )
    .await;
    refused(
        &service,
        "an empty command",
        json_body(json!({"command": [], "trust": "trusted"})),
        &["command"],
    )
    .await;
    refused(
        &service,
        "a command that is a string",
        json_body(json!({"command": "true", "trust": "trusted"})),
        &["command"],
    )
    .await;
    refused(
        &service,
        "a command of numbers",
        json_body(json!({"command": [1, 2], "trust": "trusted"})),
        &["command"],
    )
    .await;
    refused(
        &service,
        "labels that are a string",
        json_body(json!({"command": ["true"], "trust": "trusted", "labels": "linux"})),
        &["labels"],
    )
    .await;
    refused(
        &service,
        "an unknown trust",
        json_body(json!({"command": ["true"], "trust": "maybe"})),
        &["trust"],
    )
    .await;
    refused(
        &service,
        "a timeout that is a string",
        json_body(json!({"command": ["true"], "trust": "trusted", "timeout_secs": "soon"})),
        &["timeout_secs"],
    )
    .await;
    refused(
        &service,
        "a negative timeout",
        json_body(json!({"command": ["true"], "trust": "trusted", "timeout_secs": -1})),
        &["timeout_secs"],
    )
    .await;
    refused(
        &service,
        "a key that is a number",
        json_body(json!({"command": ["true"], "trust": "trusted", "key": 5})),
        &["key"],
    )
    .await;
    let many: Vec<String> = (0..100).map(|i| format!("l{i}")).collect();
    refused(
        &service,
        "100 labels",
        json_body(json!({"command": ["true"], "trust": "trusted", "labels": many})),
        &["labels"],
    )
    .await;
    refused(
        &service,
        "a label of 1000 characters",
        json_body(json!({"command": ["true"], "trust": "trusted", "labels": ["x".repeat(1000)]})),
        &["labels"],
    )
    .await;
    let huge = json!({"command": ["sh", "-c", "x".repeat(2 << 20)], "trust": "trusted"});
    // Sent by a client of its own: the server answers 413 and closes the
    // connection without reading the rest of the body, and that connection
    // must not go back to the shared client's pool, where the next request
    // would find it closed (seen once: `IncompleteMessage` on the next POST).
    let response = reqwest::Client::new()
        .post(format!("{}/v1/jobs", service.base()))
        .bearer_auth(service.token())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&huge).expect("json"))
        .send()
        .await;
    match response {
        Ok(response) => {
            let status = response.status().as_u16();
            assert!(
                matches!(status, 413 | 400),
                "a body over the limit: {status}"
            );
        }
        // The server answered and closed while the client was still writing
        // the rest of the body: the client sees the connection closed under
        // its write, and the answer may be lost with it (seen once in CI,
        // `BodyWrite`, broken pipe). That too is a refusal; that nothing was
        // recorded is checked below either way.
        Err(error) if error.is_request() && error.to_string().contains("/v1/jobs") => {
            let cause = format!("{error:?}");
            assert!(
                cause.contains("BodyWrite")
                    || cause.contains("reset")
                    || cause.contains("Broken pipe"),
                "a body of 2 MiB: {cause}"
            );
        }
        Err(error) => panic!("a body of 2 MiB: no answer: {error:?}"),
    }

    // A job no pool could ever take: 422 with the reason.
    for trust in [None, Some("unknown"), Some("untrusted")] {
        let mut body = json!({"command": ["true"]});
        if let Some(trust) = trust {
            body["trust"] = json!(trust);
        }
        let answer = service.submit(body).await;
        assert_eq!(answer.status, 422, "trust {trust:?}: {answer:?}");
        assert!(!answer.error().is_empty(), "{answer:?}");
    }

    // Unknown and malformed ids; a state that is not one.
    for method in [Method::GET, Method::DELETE] {
        let answer = service
            .call(method.clone(), "/v1/jobs/999999", None, Auth::Token)
            .await;
        assert_eq!(answer.status, 404, "{method} an unknown id: {answer:?}");
        assert!(!answer.error().is_empty(), "{answer:?}");
        let answer = service
            .call(method.clone(), "/v1/jobs/abc", None, Auth::Token)
            .await;
        assert!(
            matches!(answer.status, 400 | 404),
            "{method} a malformed id: {answer:?}"
        );
        assert!(!answer.error().is_empty(), "{answer:?}");
    }
    let answer = service
        .call(Method::GET, "/v1/jobs?state=sleeping", None, Auth::Token)
        .await;
    assert!((400..500).contains(&answer.status), "{answer:?}");
    assert!(answer.error().contains("state"), "{answer:?}");

    // No token, a wrong token: 401 on every path but /healthz.
    for auth in [Auth::None, Auth::Wrong] {
        let answer = service
            .call(
                Method::POST,
                "/v1/jobs",
                Some(Body::Json(sh("exit 0"))),
                auth,
            )
            .await;
        assert_eq!(answer.status, 401, "POST with {auth:?}: {answer:?}");
        for (method, path) in [
            (Method::GET, "/v1/jobs"),
            (Method::GET, "/v1/jobs/1"),
            (Method::DELETE, "/v1/jobs/1"),
            (Method::GET, "/v1/pools"),
            (Method::GET, "/metrics"),
        ] {
            let answer = service.call(method.clone(), path, None, auth).await;
            assert_eq!(
                answer.status, 401,
                "{method} {path} with {auth:?}: {answer:?}"
            );
        }
        let health = service.call(Method::GET, "/healthz", None, auth).await;
        assert_eq!(health.status, 200, "/healthz with {auth:?}: {health:?}");
    }

    // Nothing recorded; the server still serves.
    assert!(service.running(), "the server exited:\n{}", service.log());
    let listed = service.jobs(None).await;
    assert!(listed.is_empty(), "bad requests recorded jobs: {listed:#?}");
    let metrics = service.metrics().await;
    assert_eq!(
        metric(&metrics, "billet_jobs_queued", &[]),
        Some(0.0),
        "{metrics}"
    );
    let job = service.submit_sh("exit 4").await;
    let ended = service.wait_ended(&[id_of(&job)], END).await;
    assert_finished(&ended[&id_of(&job)], 4);
    assert_eq!(ids(&service.jobs(None).await), vec![id_of(&job)]);
    service.finish().await;
}

// L1, L2, F3: `billet.yaml` naming the simulated kind is refused by
// `validate` and by `serve` with exit status 2 and its location
// (file:line:column); a configuration error likewise; a tart or firecracker
// pool passes `validate` but stops `serve` at start with exit status 2 and an
// error naming the provider and the kind. Nothing is started on the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l2_refused_configurations_exit_2_with_their_location() {
    if !daemon("l2_refused_configurations_exit_2_with_their_location") {
        return;
    }
    let dir = tempfile::tempdir().expect("a directory");
    let id = support::unique_id("refused");
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write a configuration");
        path.to_string_lossy().into_owned()
    };
    let docker = format!(
        "  - name: {POOL}\n    kind: docker\n    capacity: 1\n    docker: {{image: \"billet-test:latest\", endpoint: \"{}\", network: none}}\n",
        daemon_endpoint()
    );
    let simulated = write(
        "simulated.yaml",
        format!(
            "deployment: {{id: {id}}}\nproviders:\n  - name: fake\n    kind: simulated\n    capacity: 2\nrouting: {{default_kind: docker}}\n"
        ),
    );
    let typo = write(
        "typo.yaml",
        format!(
            "deployment: {{id: {id}}}\nproviders:\n{docker}    capacty: 3\nrouting: {{default_kind: docker}}\n"
        ),
    );
    let tart = write(
        "tart.yaml",
        format!(
            "deployment: {{id: {id}}}\nproviders:\n{docker}  - name: mac-builders\n    kind: tart\n    capacity: 2\n    tart: {{image: ghcr.io/cirruslabs/macos-sequoia-xcode:16}}\nrouting: {{default_kind: docker}}\n"
        ),
    );
    let firecracker = write(
        "firecracker.yaml",
        format!(
            "deployment: {{id: {id}}}\nproviders:\n{docker}  - name: microvms\n    kind: firecracker\n    capacity: 2\n    firecracker: {{kernel: /var/lib/billet/vmlinux, rootfs: /var/lib/billet/rootfs.ext4}}\nrouting: {{default_kind: docker}}\n"
        ),
    );
    let good = write(
        "good.yaml",
        format!(
            "deployment: {{id: {id}}}\nproviders:\n{docker}routing: {{default_kind: docker}}\n"
        ),
    );
    let state = dir.path().join("state").to_string_lossy().into_owned();
    let listen = format!("127.0.0.1:{}", support::free_port());
    let serve = |config: &str| {
        vec![
            "serve".to_owned(),
            "--config".to_owned(),
            config.to_owned(),
            "--state".to_owned(),
            state.clone(),
            "--listen".to_owned(),
            listen.clone(),
        ]
    };
    let run = |args: Vec<String>| {
        let dir = dir.path().to_path_buf();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run_billet(&args, &dir).await
        }
    };

    // validate: ok on a good file and on one with tart and firecracker pools.
    for file in [&good, &tart, &firecracker] {
        let (status, out, err) = run(vec!["validate".to_owned(), file.clone()]).await;
        assert_eq!(status.code(), Some(0), "validate {file}: {out}{err}");
        assert!(out.starts_with("ok: "), "validate {file}: {out:?} {err:?}");
    }
    // The simulated kind (line 4, column 11) and a typo (line 7): refused by
    // validate and by serve, exit 2, located.
    for (file, line, names) in [
        (&simulated, 4, &["simulated"][..]),
        (&typo, 7, &["capacty"][..]),
    ] {
        for args in [vec!["validate".to_owned(), file.clone()], serve(file)] {
            let (status, out, err) = run(args.clone()).await;
            assert_eq!(status.code(), Some(2), "{args:?}: {out}{err}");
            let location = format!("{file}:{line}:");
            assert!(
                err.contains(&location),
                "{args:?}: no location {location:?} in stderr: {err:?}"
            );
            for name in names {
                assert!(err.contains(name), "{args:?}: {name:?} not in {err:?}");
            }
        }
    }
    // A kind this release cannot build stops serve: exit 2, provider and kind named.
    for (file, provider, kind) in [
        (&tart, "mac-builders", "tart"),
        (&firecracker, "microvms", "firecracker"),
    ] {
        let (status, out, err) = run(serve(file)).await;
        assert_eq!(status.code(), Some(2), "serve {file}: {out}{err}");
        assert!(
            err.contains(provider) && err.contains(kind),
            "serve {file}: stderr does not name {provider:?} and {kind:?}: {err:?}"
        );
    }
    // A file that is not there.
    let missing = dir
        .path()
        .join("missing.yaml")
        .to_string_lossy()
        .into_owned();
    for args in [
        vec!["validate".to_owned(), missing.clone()],
        serve(&missing),
    ] {
        let (status, out, err) = run(args.clone()).await;
        assert_eq!(status.code(), Some(2), "{args:?}: {out}{err}");
        assert!(err.contains(&missing), "{args:?}: {err:?}");
    }
    let left = support::containers_of(&id).await;
    assert!(left.is_empty(), "containers left: {left:?}");
}

// L7, L6: SIGTERM while jobs run: new submissions are refused (503, never
// accepted after a refusal), the server exits 0 within a bound, the running
// containers keep running, and a restart on the same state adopts them: they
// finish with their exit codes, started once; the queued job and any
// submission accepted before the signal run too. L3: the token file is made
// with mode 0600 when missing, and kept across restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l7_sigterm_exits_0_and_a_restart_adopts_the_running_containers() {
    if !daemon("l7_sigterm_exits_0_and_a_restart_adopts_the_running_containers") {
        return;
    }
    let mut service = Service::new(
        "sigterm",
        &Pool {
            capacity: 2,
            endpoint: daemon_endpoint(),
        },
    );
    assert!(!service.token_path().exists());
    let watch = Watch::start(&service.id).await;
    service.start().await;
    let mode = std::fs::metadata(service.token_path())
        .expect("the token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "token file mode {mode:o}");
    assert!(
        service.token().len() >= 16,
        "a short token: {:?}",
        service.token()
    );
    let token = service.token().to_owned();

    let mut jobs = vec![
        service.submit_sh("sleep 6; exit 4").await,
        service.submit_sh("sleep 6; exit 5").await,
        service.submit_sh("sleep 1; exit 6").await,
    ];
    service.wait_running(2, END).await;
    let running_before = service.wait_containers_running(2, END).await;

    let signalled = Instant::now();
    service.sigterm();
    let api = service.api();
    let mut answers = Vec::new();
    let mut refused_once = false;
    for n in 0.. {
        let request = json!({
            "command": ["sh", "-c", "exit 0"],
            "trust": "trusted",
            "key": format!("late-{n}"),
        });
        match api
            .request(
                Method::POST,
                "/v1/jobs",
                Some(Body::Json(request)),
                Auth::Token,
            )
            .await
        {
            Ok(answer) => {
                assert!(
                    matches!(answer.status, 201 | 503),
                    "a submission during shutdown: {answer:?}"
                );
                assert!(
                    !(refused_once && answer.status == 201),
                    "a submission was accepted after one was refused: {answer:?}"
                );
                refused_once |= answer.status == 503;
                if answer.status == 201 {
                    jobs.push(answer.json().clone());
                }
                answers.push(answer.status);
            }
            Err(_) => break,
        }
        if signalled.elapsed() > SHUTDOWN_BOUND {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let status = service
        .wait_exit(SHUTDOWN_BOUND.saturating_sub(signalled.elapsed()))
        .await
        .unwrap_or_else(|| panic!("still running {SHUTDOWN_BOUND:?} after SIGTERM"));
    let took = signalled.elapsed();
    assert!(status.success(), "exit {status} after SIGTERM");
    eprintln!("SIGTERM: exit 0 after {took:?}; answers meanwhile: {answers:?}");

    // The containers keep running without the server.
    let running_after: BTreeSet<String> = service
        .containers()
        .await
        .into_iter()
        .filter(|c| c.state == "running")
        .map(|c| c.id)
        .collect();
    assert_eq!(
        running_after, running_before,
        "the running containers did not survive the shutdown"
    );

    service.start().await;
    assert_eq!(service.token(), token, "the token changed across a restart");
    let all: Vec<u64> = jobs.iter().map(id_of).collect();
    let ended = service.wait_ended(&all, END).await;
    for job in &jobs {
        let id = id_of(job);
        assert_finished(&ended[&id], expected_code(job));
    }
    service.wait_no_containers(Duration::from_secs(20)).await;
    let tally = watch.tally();
    for id in &all {
        assert_eq!(tally.starts.get(id), Some(&1), "job {id}: {tally:?}");
    }
    service.finish().await;
}

// L4: cancelling a queued job answers it cancelled at once, and it never
// starts; cancelling a running job makes it cancelled once its container is
// destroyed; cancelling an ended job answers 409 with the job. A `key` seen
// before answers 200 and that same job (even with another body), never a
// second one. L7: SIGINT stops the server like SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l4_cancel_and_idempotency_keys() {
    if !daemon("l4_cancel_and_idempotency_keys") {
        return;
    }
    let mut service = Service::new(
        "cancel",
        &Pool {
            capacity: 1,
            endpoint: daemon_endpoint(),
        },
    );
    let watch = Watch::start(&service.id).await;
    service.start().await;
    let running = service.submit_sh("sleep 60; exit 0").await;
    let queued = service.submit_sh("sleep 1; exit 0").await;
    let (running_id, queued_id) = (id_of(&running), id_of(&queued));
    service.wait_running(1, END).await;
    assert_eq!(service.job(queued_id).await["state"], "queued");

    let delete = |id: u64| format!("/v1/jobs/{id}");
    let answer = service
        .call(Method::DELETE, &delete(queued_id), None, Auth::Token)
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["state"], "cancelled", "{answer:?}");
    assert_eq!(id_of(answer.json()), queued_id);
    let job = service.job(queued_id).await;
    assert_eq!(job["state"], "cancelled", "{job}");
    assert!(job["ended_at"].as_str().is_some_and(is_rfc3339), "{job}");

    let answer = service
        .call(Method::DELETE, &delete(running_id), None, Auth::Token)
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(id_of(answer.json()), running_id);
    let job = service
        .wait_job(running_id, Duration::from_secs(20), "cancelled", |j| {
            j["state"] == "cancelled"
        })
        .await;
    assert!(job["ended_at"].as_str().is_some_and(is_rfc3339), "{job}");
    // Its container is gone. Under load a launch can outlast the 2 s call
    // deadline: cancelled once a find confirms no container, a create that
    // lands later is collected as an orphan (D11): so within the grace.
    let deadline = Deadline::after(
        Duration::from_secs(20),
        "the cancelled job's container gone",
    );
    loop {
        let left: Vec<_> = service
            .containers()
            .await
            .into_iter()
            .filter(|c| job_of_instance(&c.name) == Some(running_id))
            .collect();
        if left.is_empty() {
            break;
        }
        deadline.check(&left);
        tokio::time::sleep(POLL).await;
    }
    for id in [running_id, queued_id] {
        let answer = service
            .call(Method::DELETE, &delete(id), None, Auth::Token)
            .await;
        assert_eq!(answer.status, 409, "cancel an ended job: {answer:?}");
        assert_eq!(id_of(answer.json()), id, "{answer:?}");
        assert_eq!(answer.json()["state"], "cancelled", "{answer:?}");
    }

    // Idempotency keys.
    let keyed = json!({"command": ["sh", "-c", "exit 9"], "trust": "trusted", "key": "same"});
    let first = service.submit(keyed.clone()).await;
    assert_eq!(first.status, 201, "{first:?}");
    let again = service.submit(keyed).await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(id_of(again.json()), id_of(first.json()), "{again:?}");
    let other = json!({"command": ["sh", "-c", "exit 1"], "trust": "trusted", "key": "same"});
    let other = service.submit(other).await;
    assert_eq!(
        other.status, 409,
        "the key with another body (L18): {other:?}"
    );
    assert!(
        other.json()["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("field `key`"),
        "{other:?}"
    );
    let keyed_id = id_of(first.json());
    let ended = service.wait_ended(&[keyed_id], END).await;
    assert_finished(&ended[&keyed_id], 9);
    let answer = service
        .call(Method::DELETE, &delete(keyed_id), None, Auth::Token)
        .await;
    assert_eq!(answer.status, 409, "cancel a finished job: {answer:?}");
    assert_eq!(answer.json()["state"], "finished", "{answer:?}");

    assert_eq!(
        ids(&service.jobs(Some("cancelled")).await),
        vec![running_id, queued_id]
    );
    assert_eq!(
        ids(&service.jobs(None).await),
        vec![running_id, queued_id, keyed_id]
    );
    let metrics = service.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "billet_jobs_ended_total",
            &[("outcome", "cancelled")]
        ),
        Some(2.0),
        "{metrics}"
    );
    service.wait_no_containers(Duration::from_secs(20)).await;
    // The event stream may lag the daemon's answers (podman's does): wait
    // until it has shown the keyed job's container gone too.
    watch
        .wait_events("destroy", 2, Duration::from_secs(20))
        .await;
    let tally = watch.tally();
    assert_eq!(
        tally.starts.get(&queued_id),
        None,
        "the cancelled queued job started"
    );
    assert_eq!(tally.starts.get(&keyed_id), Some(&1), "{tally:?}");

    // SIGINT, like SIGTERM: exit 0.
    let status = std::process::Command::new("kill")
        .args(["-INT", &service.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let exit = service.wait_exit(SHUTDOWN_BOUND).await;
    assert!(exit.is_some_and(|s| s.success()), "after SIGINT: {exit:?}");
    service.finish().await;
}
