//! Safe to run for real, on a real daemon through the built binary: a
//! fresh store never adopts an older store's containers and a live second
//! store's are never destroyed (L10); a second `serve` on a state directory
//! in use is refused (L10); the files are private (L13); a daemon that hangs
//! is reported long before the call deadline (L14). Each test checks the
//! daemon afterwards.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{
    Deadline, POLL, POOL, Pool, Service, SocketProxy, daemon, daemon_endpoint, id_of, run_billet,
};

const END: Duration = Duration::from_secs(60);

fn pool(capacity: u32, endpoint: String) -> Pool {
    Pool { capacity, endpoint }
}

/// The store identity in front of a container's instance name.
fn store_of(name: &str) -> Option<&str> {
    billet_scheduler::InstanceName::parse(name).and_then(|parsed| parsed.store)
}

// L10: the session of issue 27. A service on state A takes a job and is
// killed; a second on a fresh state B takes one of its own: its job 1 runs
// its own command (exit 0, never A's 7), A's container is reported as
// another store's leftover and collected after the grace. Then A runs again
// while B does: B reports A's new container as contested (`/healthz`
// degraded, saying so) and never destroys it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l10_a_fresh_store_never_adopts_an_older_stores_container() {
    if !daemon("l10_a_fresh_store_never_adopts_an_older_stores_container") {
        return;
    }
    let mut a = Service::new("store-a", &pool(2, daemon_endpoint()));
    a.start().await;
    let old = a.submit_sh("sleep 25; exit 7").await;
    assert_eq!(id_of(&old), 1);
    a.wait_containers_running(1, END).await;
    let a_identity = {
        let containers = a.containers().await;
        store_of(&containers[0].name)
            .expect("an identity")
            .to_owned()
    };
    a.kill9();

    let mut b = a.beside("store-b");
    b.start().await;
    let new = b.submit_sh("exit 0").await;
    assert_eq!(id_of(&new), 1, "a fresh store's first job is job 1 too");
    let ended = b.wait_ended(&[1], END).await;
    let job = &ended[&1];
    assert_eq!(job["state"], "finished", "{job}");
    assert_eq!(job["exit_code"], 0, "its own command ran: {job}");
    let deadline = Deadline::after(END, "store A's leftover collected by B");
    loop {
        let left = b.containers().await;
        if left
            .iter()
            .all(|c| store_of(&c.name) != Some(a_identity.as_str()))
        {
            break;
        }
        deadline.check(&left);
        tokio::time::sleep(POLL).await;
    }
    let log = b.log();
    assert!(log.contains("an instance another store left"), "{log}");
    let metrics = b.metrics().await;
    assert!(
        metrics.contains(&format!(
            "billet_foreign_instances_total{{pool=\"{POOL}\",origin=\"leftover\"}} 1"
        )),
        "{metrics}"
    );
    let health = b.health().await;
    assert_eq!(health.status, 200, "a leftover is not a fault: {health:?}");

    // A again, on its own state, while B runs: a live second store.
    a.start().await;
    let second = a.submit_sh("sleep 20; exit 0").await;
    let deadline = Deadline::after(END, "B to say its pool is contested");
    let degraded = loop {
        let health = b.health().await;
        if health.status == 503 {
            break health;
        }
        deadline.check(&health);
        tokio::time::sleep(POLL).await;
    };
    assert_eq!(degraded.json()["contested"], json!([POOL]), "{degraded:?}");
    assert_eq!(degraded.json()["unreadable"], json!([]), "{degraded:?}");
    // A's new job, and its job 1 relaunched (its container was collected
    // by B as a leftover: A cannot know; it ran once at a time).
    let pools = b.pool().await;
    assert!(
        pools["contested"].as_u64().is_some_and(|n| n >= 1),
        "{pools}"
    );
    // Several of B's orphan graces pass: A's container stays, A's job runs.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let job = a.job(id_of(&second)).await;
    assert_eq!(job["state"], "running", "B never destroyed it: {job}");
    assert!(!a.containers().await.is_empty());
    // A's first job: its container was another store's leftover to B, and
    // gone; A relaunches it (or finds it ended) on its own, and both drain.
    let cancel = a
        .call(
            reqwest::Method::DELETE,
            &format!("/v1/jobs/{}", id_of(&second)),
            None,
            support::Auth::Token,
        )
        .await;
    assert_eq!(cancel.status, 200, "{cancel:?}");
    let cancel = a
        .call(
            reqwest::Method::DELETE,
            "/v1/jobs/1",
            None,
            support::Auth::Token,
        )
        .await;
    assert!([200, 409].contains(&cancel.status), "{cancel:?}");
    a.finish().await;
    b.finish().await;
}

// L10: a second `serve` on a state directory in use stops at start with
// exit 2 naming the directory; the first keeps serving, untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l10_a_second_serve_on_a_state_in_use_is_refused() {
    if !daemon("l10_a_second_serve_on_a_state_in_use_is_refused") {
        return;
    }
    let mut first = Service::new("locked", &pool(1, daemon_endpoint()));
    first.start().await;
    let job = first.submit_sh("exit 0").await;
    let config = first.dir().join("billet.yaml");
    let state = first.state_dir().to_owned();
    let (status, _, stderr) = run_billet(
        &[
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        first.dir(),
    )
    .await;
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in use by another billet serve")
            && stderr.contains(state.to_str().unwrap()),
        "{stderr}"
    );
    let ended = first.wait_ended(&[id_of(&job)], END).await;
    assert_eq!(ended[&id_of(&job)]["exit_code"], 0);
    assert_eq!(first.health().await.status, 200);
    // A crash releases the lock: `kill -9`, then a start on the same state.
    first.kill9();
    first.start().await;
    assert_eq!(first.job(id_of(&job)).await["state"], "finished");
    first.finish().await;
}

// L13: the state directory is 0700, the store and SQLite's files 0600, the
// made token file 0600, whatever the umask (the test's child inherits 022).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l13_the_state_is_readable_by_its_owner_only() {
    if !daemon("l13_the_state_is_readable_by_its_owner_only") {
        return;
    }
    let mut service = Service::new("modes", &pool(1, daemon_endpoint()));
    service.start().await;
    let job = service.submit_sh("exit 0").await;
    service.wait_ended(&[id_of(&job)], END).await;
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let state = service.state_dir().to_owned();
    assert_eq!(mode(&state), 0o700);
    for file in [
        "billet.db",
        "billet.db-wal",
        "billet.db-shm",
        "token",
        "lock",
    ] {
        let path = state.join(file);
        if file.ends_with("-shm") && !path.exists() {
            continue;
        }
        assert_eq!(mode(&path), 0o600, "{file}");
    }
    // L15: job output is the owner's alone too.
    assert_eq!(mode(&state.join("output")), 0o700);
    let job = service.submit_sh("echo secret").await;
    let id = id_of(&job);
    service.wait_ended(&[id], END).await;
    // Under the store's identity (L20), the one directory in `output`.
    let own = std::fs::read_dir(state.join("output"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect::<Vec<_>>();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(mode(&own[0]), 0o700);
    assert_eq!(mode(&own[0].join(format!("{id}.out"))), 0o600);
    service.finish().await;
}

// L14: a daemon that answers nothing (the proxy holds every request) is
// reported by `/healthz` within the stall bound (2 s at a 500 ms reconcile
// interval), long before the call deadline (60 s here); nothing is freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l14_a_hung_daemon_is_reported_before_the_call_deadline() {
    if !daemon("l14_a_hung_daemon_is_reported_before_the_call_deadline") {
        return;
    }
    let proxy = SocketProxy::start();
    let mut service = Service::new("hung", &pool(1, proxy.endpoint())).with_call_timeout("60s");
    service.start().await;
    let job = service.submit_sh("sleep 8; exit 4").await;
    service.wait_containers_running(1, END).await;
    assert_eq!(service.health().await.status, 200);
    let hold = proxy.hold();
    let held_at = Instant::now();
    let deadline = Deadline::after(Duration::from_secs(20), "/healthz to say degraded");
    let degraded = loop {
        let health = service.health().await;
        if health.status == 503 {
            break health;
        }
        deadline.check(&health);
        tokio::time::sleep(POLL).await;
    };
    let seen = held_at.elapsed();
    assert!(seen < Duration::from_secs(30), "said after {seen:?}");
    assert_eq!(degraded.json()["unreadable"], json!([POOL]), "{degraded:?}");
    assert_eq!(service.job(id_of(&job)).await["state"], "running");
    proxy.pass();
    hold.release();
    let ended = service
        .wait_ended(&[id_of(&job)], Duration::from_secs(120))
        .await;
    assert_eq!(ended[&id_of(&job)]["exit_code"], 4);
    eprintln!("L14: a hung daemon was reported after {seen:?}");
    service.finish().await;
}
