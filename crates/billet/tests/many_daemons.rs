//! D17 end to end: `billet serve` with one deployment's pools on three
//! docker daemons, the local one over its socket and two of the test's own
//! reached over mutual TLS on loopback (`--tlsverify`, certificates made
//! offline). Every test watches every daemon while it runs: no pool ever
//! holds more containers than its capacity, and no job is run twice (one
//! container per job name, on one daemon, ever).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use billet_docker::{NAME_LABEL, OWNER_LABEL};
use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;
use parking_lot::Mutex;
use serde_json::Value;
use support::tls::{Ca, TlsDaemon, can_start_daemons, write_files};
use support::{
    Deadline, POLL, Service, TEST_IMAGE, daemon, daemon_socket, expected_code, id_of, metric,
};

/// How long any job of these tests may take to end once submitted.
const END: Duration = Duration::from_secs(90);

/// Each pool's capacity.
const CAPACITY: usize = 2;

/// The three pools, in configuration order, and the daemons they sit on.
const POOLS: [&str; 3] = ["local", "far-a", "far-b"];

/// Two TLS daemons beside the local one, and the client's certificates.
struct Fleet {
    far: [TlsDaemon; 2],
    _certs: tempfile::TempDir,
    files: billet_docker::TlsFiles,
}

impl Fleet {
    /// The fleet, or `None` where this machine has no daemon or cannot start
    /// one (failures with `BILLET_DOCKER_REQUIRED=1`).
    fn start(test: &str) -> Option<Fleet> {
        if !daemon(test) || !can_start_daemons(test) {
            return None;
        }
        let ca = Ca::new("billet fleet CA");
        let far = [
            TlsDaemon::start(&format!("{test}-a"), &ca),
            TlsDaemon::start(&format!("{test}-b"), &ca),
        ];
        let certs = tempfile::tempdir().expect("a directory for the certificates");
        let (cert, key) = ca.client("billet");
        let files = write_files(&certs.path().join("tls"), &ca.pem, &cert, &key);
        Some(Fleet {
            far,
            _certs: certs,
            files,
        })
    }

    /// `billet.yaml` for deployment `id`: the three pools, capacity
    /// [`CAPACITY`] each, the far ones with relative `tls` paths (the
    /// certificates are copied beside the file by [`Fleet::service`]).
    fn yaml(&self, id: &str) -> String {
        let far = |name: &str, daemon: &TlsDaemon| {
            format!(
                "  - name: {name}\n    kind: docker\n    capacity: {CAPACITY}\n    docker:\n      image: \"{TEST_IMAGE}\"\n      network: none\n      endpoint: \"{}\"\n      tls: {{ca: tls/ca.pem, cert: tls/cert.pem, key: tls/key.pem}}\n",
                daemon.endpoint
            )
        };
        format!(
            "deployment: {{id: {id}}}\nproviders:\n  - name: local\n    kind: docker\n    capacity: {CAPACITY}\n    docker: {{image: \"{TEST_IMAGE}\", network: none, endpoint: \"unix://{}\"}}\n{}{}routing: {{default_kind: docker}}\n",
            daemon_socket().display(),
            far("far-a", &self.far[0]),
            far("far-b", &self.far[1]),
        )
    }

    /// A service of a new deployment over the fleet, its certificates in
    /// `tls/` beside its `billet.yaml`.
    fn service(&self, tag: &str) -> Service {
        // Three tests start six daemons at once on a machine of two cores:
        // a call deadline of 5 s rather than the tests' usual 2 s.
        let service = Service::with_yaml(tag, |id| self.yaml(id)).with_call_timeout("5s");
        let dir = service.dir().join("tls");
        std::fs::create_dir_all(&dir).unwrap();
        for file in [&self.files.ca, &self.files.cert, &self.files.key] {
            std::fs::copy(file, dir.join(file.file_name().unwrap())).unwrap();
        }
        service
    }

    /// The socket of each pool's daemon, in [`POOLS`] order.
    fn sockets(&self) -> [std::path::PathBuf; 3] {
        [
            daemon_socket(),
            self.far[0].socket.clone(),
            self.far[1].socket.clone(),
        ]
    }
}

/// What a [`Watcher`] saw: per pool, the most containers of the deployment
/// alive at once; per job name, every container id it ever had that was
/// started (a container created by a launch that was given up, and removed
/// before it ever started, ran nothing), with its pool.
#[derive(Debug, Default)]
struct Seen {
    peak: BTreeMap<&'static str, usize>,
    containers: BTreeMap<String, BTreeSet<(String, &'static str)>>,
    /// Lists that could not be made (a frozen daemon).
    unanswered: u64,
}

/// Lists the deployment's containers on every daemon every 50 ms until
/// dropped.
struct Watcher {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watcher {
    fn start(owner: &str, sockets: [std::path::PathBuf; 3]) -> Watcher {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let into = Arc::clone(&seen);
        let owner = owner.to_owned();
        let task = tokio::spawn(async move {
            let clients: Vec<Docker> = sockets.iter().map(|socket| client_on(socket)).collect();
            loop {
                for (pool, client) in POOLS.iter().zip(&clients) {
                    let listed = tokio::time::timeout(
                        Duration::from_millis(500),
                        containers(client, &owner),
                    )
                    .await;
                    let mut seen = into.lock();
                    match listed {
                        Ok(Some(containers)) => {
                            let live = containers.iter().filter(|c| c.live).count();
                            let peak = seen.peak.entry(pool).or_default();
                            *peak = (*peak).max(live);
                            for container in containers.into_iter().filter(|c| c.started) {
                                seen.containers
                                    .entry(container.name)
                                    .or_default()
                                    .insert((container.id, pool));
                            }
                        }
                        _ => seen.unanswered += 1,
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Watcher { seen, task }
    }

    /// Stops watching; what was seen, checked: no pool past its capacity, no
    /// job name with more than one container.
    fn finish(self) -> Seen {
        self.task.abort();
        let seen = std::mem::take(&mut *self.seen.lock());
        for (pool, peak) in &seen.peak {
            assert!(
                *peak <= CAPACITY,
                "pool {pool} held {peak} containers at once, more than its capacity {CAPACITY}"
            );
        }
        for (name, containers) in &seen.containers {
            assert_eq!(
                containers.len(),
                1,
                "job {name} was run more than once: {containers:?}"
            );
        }
        seen
    }
}

fn client_on(socket: &Path) -> Docker {
    Docker::connect_with_unix(&socket.to_string_lossy(), 10, bollard::API_DEFAULT_VERSION)
        .expect("a client")
}

/// One of the deployment's containers as a daemon lists it.
#[derive(Debug)]
struct Listed {
    id: String,
    /// Its job's instance name.
    name: String,
    /// Running, or about to (created, restarting): it holds a lease.
    live: bool,
    /// Running, or stopped after running: its command was started.
    started: bool,
}

/// The deployment's containers on one daemon.
async fn containers(client: &Docker, owner: &str) -> Option<Vec<Listed>> {
    let filters =
        std::collections::HashMap::from([("label", vec![format!("{OWNER_LABEL}={owner}")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let listed = billet_docker::dialect::list_containers(client, Some(options))
        .await
        .ok()?;
    Some(
        listed
            .into_iter()
            .map(|c| {
                let name = c
                    .labels
                    .unwrap_or_default()
                    .get(NAME_LABEL)
                    .cloned()
                    .unwrap_or_default();
                let state = c.state.map(|s| s.to_string()).unwrap_or_default();
                Listed {
                    id: c.id.unwrap_or_default(),
                    name,
                    live: matches!(state.as_str(), "running" | "created" | "restarting"),
                    // Not `created`, nor `removing` or `dead` (a container
                    // created by a launch given up and removed unstarted
                    // passes through those): seen running, or after it.
                    started: matches!(
                        state.as_str(),
                        "running" | "exited" | "paused" | "restarting"
                    ),
                }
            })
            .collect(),
    )
}

/// Waits until no daemon holds a container of `owner`.
async fn wait_none_left(fleet: &Fleet, owner: &str) {
    let deadline = Deadline::after(Duration::from_secs(30), "every container to be removed");
    loop {
        let mut left = Vec::new();
        for socket in fleet.sockets() {
            left.extend(
                containers(&client_on(&socket), owner)
                    .await
                    .unwrap_or_default(),
            );
        }
        if left.is_empty() {
            return;
        }
        deadline.check(&left);
        tokio::time::sleep(POLL).await;
    }
}

/// Checks every ended job finished with its script's exit code; the jobs
/// per pool.
fn check_codes(ended: &BTreeMap<u64, Value>) -> BTreeMap<String, usize> {
    let mut per_pool = BTreeMap::new();
    for job in ended.values() {
        assert_eq!(job["exit_code"].as_i64(), Some(expected_code(job)), "{job}");
        let pool = job["pool"]
            .as_str()
            .unwrap_or_else(|| panic!("no pool: {job}"));
        *per_pool.entry(pool.to_owned()).or_default() += 1;
    }
    per_pool
}

// D17: jobs over the capacity of three pools on three daemons (the local
// socket and two over mutual TLS) all end with their exit codes, every
// pool takes some, and no daemon ever holds more of the deployment's
// containers than its pool's capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d17_jobs_over_three_pools_on_three_daemons_all_end() {
    let Some(fleet) = Fleet::start("d17-three") else {
        return;
    };
    let mut service = fleet.service("d17-three");
    service.start().await;
    let api = service.api();
    let watcher = Watcher::start(&service.id, fleet.sockets());
    let mut ids = Vec::new();
    for n in 0..15 {
        let job = api.submit_sh(&format!("sleep 1; exit {}", n % 7)).await;
        ids.push(id_of(&job));
    }
    let ended = api.wait_ended(&ids, END).await;
    let per_pool = check_codes(&ended);
    println!("D17 three daemons: jobs per pool {per_pool:?}");
    for pool in POOLS {
        assert!(
            per_pool.get(pool).copied().unwrap_or(0) > 0,
            "{pool} took no job: {per_pool:?}"
        );
    }
    let health = api.health().await;
    assert_eq!(health.status, 200, "{health:?}");
    wait_none_left(&fleet, &service.id).await;
    let seen = watcher.finish();
    println!(
        "D17 three daemons: peak containers per pool {:?}",
        seen.peak
    );
    assert_eq!(seen.containers.len(), ids.len(), "{seen:?}");
    service.finish().await;
}

// D17 (B8, L14): one daemon frozen for several reconcile intervals makes
// only its pool unreadable (`/healthz` degraded naming it, its inventory
// errors counted) while the other pools go on placing and ending jobs; its
// jobs are neither freed nor run again meanwhile, and once it answers again
// they end with their exit codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d17_a_frozen_daemon_freezes_only_its_pool() {
    let Some(fleet) = Fleet::start("d17-frozen") else {
        return;
    };
    let mut service = fleet.service("d17-frozen");
    service.start().await;
    let api = service.api();
    let watcher = Watcher::start(&service.id, fleet.sockets());

    // Fill every pool with jobs that outlast the freeze.
    let mut first = Vec::new();
    for n in 0..(3 * CAPACITY) {
        let job = api.submit_sh(&format!("sleep 6; exit {}", 10 + n)).await;
        first.push(id_of(&job));
    }
    let running = api.wait_running(3 * CAPACITY, END).await;
    let on_a: BTreeSet<u64> = running
        .iter()
        .filter(|job| job["pool"] == "far-a")
        .map(id_of)
        .collect();
    assert_eq!(on_a.len(), CAPACITY, "{running:?}");

    fleet.far[0].freeze();
    // Several reconcile intervals (500 ms) and past the call deadline: far-a,
    // and only far-a, is reported unreadable.
    let deadline = Deadline::after(
        Duration::from_secs(30),
        "far-a, and only far-a, to be reported unreadable",
    );
    loop {
        let health = api.health().await;
        if health.status == 503 && health.json()["unreadable"] == serde_json::json!(["far-a"]) {
            break;
        }
        deadline.check(&health);
        tokio::time::sleep(POLL).await;
    }
    // The other pools go on: more jobs, placed there, ending, while far-a
    // is still frozen.
    let mut during = Vec::new();
    for n in 0..(2 * CAPACITY) {
        let job = api.submit_sh(&format!("exit {}", 20 + n)).await;
        during.push(id_of(&job));
    }
    let ended = api.wait_ended(&during, END).await;
    let per_pool = check_codes(&ended);
    assert!(
        !per_pool.contains_key("far-a"),
        "placed on the frozen pool: {per_pool:?}"
    );
    let metrics = api.metrics().await;
    let errors = metric(
        &metrics,
        "billet_inventory_errors_total",
        &[("pool", "far-a")],
    )
    .or_else(|| metric(&metrics, "billet_inventory_errors", &[("pool", "far-a")]))
    .unwrap_or_else(|| panic!("no inventory error count for far-a:\n{metrics}"));
    assert!(errors >= 1.0, "{metrics}");
    for id in &on_a {
        let job = api.job(*id).await;
        assert_eq!(
            job["state"], "running",
            "a job of the frozen pool changed: {job}"
        );
    }
    let health = api.health().await;
    assert!(
        health.json()["unreadable"]
            .as_array()
            .is_some_and(|pools| pools.iter().any(|p| p == "far-a")),
        "the frozen pool is still unreadable: {health:?}"
    );

    fleet.far[0].thaw();
    let ended = api.wait_ended(&first, END).await;
    check_codes(&ended);
    let deadline = Deadline::after(Duration::from_secs(30), "/healthz to be ok again");
    loop {
        let health = api.health().await;
        if health.status == 200 {
            break;
        }
        deadline.check(&health);
        tokio::time::sleep(POLL).await;
    }
    wait_none_left(&fleet, &service.id).await;
    let seen = watcher.finish();
    assert!(
        seen.unanswered > 0,
        "the watcher never met the frozen daemon"
    );
    service.finish().await;
}

// D17 (L6): `kill -9` of `serve` while jobs run on all three daemons, and a
// restart on the same store: every job ends once, with its exit code, and
// none is run twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn d17_kill_9_and_restart_with_pools_on_three_daemons() {
    let Some(fleet) = Fleet::start("d17-kill") else {
        return;
    };
    let mut service = fleet.service("d17-kill");
    service.start().await;
    let api = service.api();
    let watcher = Watcher::start(&service.id, fleet.sockets());
    let mut ids = Vec::new();
    for n in 0..(3 * CAPACITY + 3) {
        let job = api.submit_sh(&format!("sleep 3; exit {}", 30 + n)).await;
        ids.push(id_of(&job));
    }
    let running = api.wait_running(3 * CAPACITY, END).await;
    let pools: BTreeSet<&str> = running
        .iter()
        .filter_map(|job| job["pool"].as_str())
        .collect();
    assert_eq!(pools.len(), 3, "{running:?}");
    service.kill9();
    service.start().await;
    let api = service.api();
    let ended = api.wait_ended(&ids, END).await;
    check_codes(&ended);
    wait_none_left(&fleet, &service.id).await;
    let seen = watcher.finish();
    assert_eq!(seen.containers.len(), ids.len(), "{seen:?}");
    service.finish().await;
}
