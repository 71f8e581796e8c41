//! What the end-to-end tests share: the daemon (or one line saying how to run
//! the tests without it), the offline test image, the built `billet` binary
//! run as a child process with its log captured, an HTTP client for its API,
//! a record of every docker event of a deployment, and a socket proxy the test
//! owns between the service and the daemon, to cut and restore the connection
//! for real.
//!
//! Every deployment id is unique to its test and to this test process, so the
//! tests run in parallel on one daemon; dropping a [`Service`] kills its
//! server, prints its logs when the test is failing, and force-removes every
//! container carrying its owner label.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use billet_docker::{NAME_LABEL, OWNER_LABEL};
use bollard::query_parameters::{
    EventsOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::Value;

/// The docker backend's test support, shared rather than written twice: the
/// daemon's socket, a raw client, the offline test image
/// ([`ensure_test_image`]: a static busybox imported through the API, the
/// same `billet-test:latest` the docker tests use) and the variable that
/// makes a missing daemon a failure.
#[path = "../../../billet-docker/tests/support/mod.rs"]
mod docker;

/// Mutual TLS for the tests (D17): certificates made offline, and docker
/// daemons of the test's own on loopback with `--tlsverify`.
#[allow(unused_imports)]
pub use docker::tls;
pub use docker::{REQUIRED_VAR, TEST_IMAGE, block, daemon_socket, ensure_test_image, raw_client};
/// D19: gVisor's runtime as `.ci/run` registers it, and whether a daemon lists it.
#[allow(unused_imports)]
pub use docker::{
    RUNSC, RUNSC_REQUIRED_VAR, engine_at, ensure_test_image_on, lists_runsc_at,
    podman_runsc_socket, runtime_at,
};

/// The built binary under test.
pub const BILLET: &str = env!("CARGO_BIN_EXE_billet");

/// The pool name every test configuration uses for its docker provider.
pub const POOL: &str = "linux";

/// How long a server may take to answer `/healthz` after it was started.
const READY_WITHIN: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------
// The daemon and the test image
// ---------------------------------------------------------------------------

/// The daemon's endpoint as `billet.yaml` writes it.
pub fn daemon_endpoint() -> String {
    format!("unix://{}", daemon_socket().display())
}

/// Whether this test can run: a daemon answers (and the test image is
/// there), or, when none does, `false` after one line on stderr. With
/// [`REQUIRED_VAR`] set to `1`, a missing daemon fails the test instead.
pub fn daemon(test: &str) -> bool {
    let socket = daemon_socket();
    let reachable = socket.exists() && block(async { raw_client().ping().await.is_ok() });
    if !reachable {
        let required = std::env::var(REQUIRED_VAR).is_ok_and(|v| v == "1");
        assert!(
            !required,
            "{REQUIRED_VAR}=1 but no docker daemon answers at {}",
            socket.display()
        );
        eprintln!(
            "skipped {test}: no docker daemon at {}; start dockerd (as root: `dockerd &`) and install busybox-static to run the end-to-end tests, or run `bash .ci/run`",
            socket.display()
        );
        return false;
    }
    ensure_test_image();
    true
}

/// A deployment id unique to this test process and to this call:
/// `e2e-{pid}-{start}-{n}-{tag}`.
pub fn unique_id(tag: &str) -> String {
    static START: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = START.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        format!("{}-{:x}", std::process::id(), nanos & 0xffff_ffff_ffff)
    });
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("e2e-{start}-{n}-{tag}")
}

/// A TCP port on 127.0.0.1 nobody listened on a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One container of a deployment as the daemon lists it.
#[derive(Debug, Clone)]
pub struct Container {
    pub id: String,
    /// The instance name billet gave it (its `billet.name` label).
    pub name: String,
    /// `created`, `running`, `exited`, ...
    pub state: String,
}

impl Container {
    /// Whether the container runs (or is about to: created, restarting).
    pub fn is_live(&self) -> bool {
        matches!(self.state.as_str(), "running" | "created" | "restarting")
    }
}

/// Every container (any state) carrying `owner` as its owner label, asked of
/// the daemon directly. Podman answers a list `500` ("read /proc/PID/cgroup:
/// no such process") when a container ends while it reads it: such an answer
/// is asked again, up to 10 times, 100 ms apart.
pub async fn containers_of(owner: &str) -> Vec<Container> {
    let filters = HashMap::from([("label", vec![format!("{OWNER_LABEL}={owner}")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let mut attempt = 1;
    let listed = loop {
        match billet_docker::dialect::list_containers(&raw_client(), Some(options.clone())).await {
            Ok(listed) => break listed,
            Err(bollard::errors::Error::DockerResponseServerError { status_code, .. })
                if status_code >= 500 && attempt < 10 =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("list containers (attempt {attempt}): {e}"),
        }
    };
    listed
        .into_iter()
        .map(|c| {
            let labels = c.labels.unwrap_or_default();
            Container {
                id: c.id.unwrap_or_default(),
                name: labels.get(NAME_LABEL).cloned().unwrap_or_default(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
            }
        })
        .collect()
}

/// Force-removes every container carrying `owner` as its owner label.
pub async fn remove_containers_of(owner: &str) {
    let client = raw_client();
    for container in containers_of(owner).await {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        let _ = client.remove_container(&container.id, Some(options)).await;
    }
}

/// The job id in an instance name `job-<id>.<pool>`, or the same under a
/// store's identity (`<identity>.job-<id>.<pool>`, L10).
pub fn job_of_instance(name: &str) -> Option<u64> {
    billet_scheduler::InstanceName::parse(name).map(|parsed| parsed.job.0)
}

// ---------------------------------------------------------------------------
// Deadlines
// ---------------------------------------------------------------------------

/// A point in time a polling loop must not pass.
pub struct Deadline {
    at: Instant,
    what: String,
}

impl Deadline {
    /// `within` from now, for `what` (named when it passes).
    pub fn after(within: Duration, what: impl Into<String>) -> Deadline {
        Deadline {
            at: Instant::now() + within,
            what: what.into(),
        }
    }

    /// Panics, naming what was awaited and the last thing seen, once passed.
    pub fn check(&self, last: impl std::fmt::Debug) {
        assert!(
            Instant::now() < self.at,
            "timed out waiting for {}; last seen: {last:#?}",
            self.what
        );
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// The interval polling loops sleep between looks.
pub const POLL: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------
// The service under test
// ---------------------------------------------------------------------------

/// What a configuration holds for the tests' one docker pool.
#[derive(Debug, Clone)]
pub struct Pool {
    pub capacity: u32,
    /// The daemon endpoint the pool's provider uses (the daemon itself, or a
    /// [`SocketProxy`]).
    pub endpoint: String,
}

/// `billet.yaml` for deployment `id` with one docker pool [`POOL`].
pub fn docker_config(id: &str, pool: &Pool) -> String {
    format!(
        "deployment: {{id: {id}}}\n\
         providers:\n  \
           - name: {POOL}\n    \
             kind: docker\n    \
             capacity: {capacity}\n    \
             docker: {{image: \"{TEST_IMAGE}\", endpoint: \"{endpoint}\", network: none}}\n\
         routing: {{default_kind: docker}}\n",
        capacity = pool.capacity,
        endpoint = pool.endpoint,
    )
}

/// Flags every test server gets, short so that tests run quickly.
pub struct Timing {
    pub reconcile_every: &'static str,
    pub call_timeout: &'static str,
    pub orphan_grace: &'static str,
    pub shutdown_grace: &'static str,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            reconcile_every: "500ms",
            call_timeout: "2s",
            orphan_grace: "2s",
            shutdown_grace: "5s",
        }
    }
}

/// How a request authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// The server's token.
    Token,
    /// No `Authorization` header.
    None,
    /// A bearer token that is not the server's.
    Wrong,
}

/// An HTTP answer: its status, its body, and the body as JSON when it is.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub json: Option<Value>,
}

impl Answer {
    /// The `error` string of a JSON error body; panics naming the answer
    /// when there is none.
    pub fn error(&self) -> String {
        self.json
            .as_ref()
            .and_then(|j| j.get("error"))
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no {{\"error\": string}} in the answer {self:?}"))
            .to_owned()
    }

    /// The JSON body; panics naming the answer when it is not JSON.
    pub fn json(&self) -> &Value {
        self.json
            .as_ref()
            .unwrap_or_else(|| panic!("the answer is not JSON: {self:?}"))
    }
}

/// One deployment of `billet serve`, run from the built binary: its
/// configuration, state directory and logs live in a temporary directory of
/// its own; it can be started, killed (`kill -9`), terminated (SIGTERM) and
/// started again on the same state.
pub struct Service {
    /// The deployment id: the owner label of its containers.
    pub id: String,
    dir: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
    token_file: Option<PathBuf>,
    timing: Timing,
    /// More flags for `serve`, after the timing's.
    extra: Vec<String>,
    child: Option<Child>,
    port: u16,
    logs: Vec<PathBuf>,
    api: Option<Api>,
}

impl Service {
    /// A deployment (not started yet) with one docker pool.
    pub fn new(tag: &str, pool: &Pool) -> Service {
        let id = unique_id(tag);
        let yaml = docker_config(&id, pool);
        Service::with_config(id, tag, |path| std::fs::write(path, yaml))
    }

    /// A deployment (not started yet) whose `billet.yaml` is `yaml(id)`, in
    /// a directory of its own.
    pub fn with_yaml(tag: &str, yaml: impl FnOnce(&str) -> String) -> Service {
        let id = unique_id(tag);
        let text = yaml(&id);
        Service::with_config(id, tag, |path| std::fs::write(path, text))
    }

    /// Another service of the same deployment (the same `billet.yaml`, the
    /// same containers' owner) on a state directory of its own: a fresh
    /// store, as when `serve` is started from another directory (L10).
    pub fn beside(&self, tag: &str) -> Service {
        let from = self.config.clone();
        Service::with_config(self.id.clone(), tag, |path| {
            std::fs::copy(&from, path).map(drop)
        })
    }

    /// A service of deployment `id` in a directory of its own, its
    /// `billet.yaml` written there by `write`.
    fn with_config(
        id: String,
        tag: &str,
        write: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Service {
        let dir = tempfile::Builder::new()
            .prefix(&format!("billet-{tag}-"))
            .tempdir()
            .expect("a temporary directory");
        let config = dir.path().join("billet.yaml");
        write(&config).expect("write billet.yaml");
        let state = dir.path().join("state");
        Service {
            id,
            config,
            state,
            token_file: None,
            timing: Timing::default(),
            extra: Vec::new(),
            child: None,
            port: 0,
            logs: Vec::new(),
            api: None,
            dir,
        }
    }

    /// Uses a call deadline of `call_timeout` (`--call-timeout`).
    pub fn with_call_timeout(mut self, call_timeout: &'static str) -> Service {
        self.timing.call_timeout = call_timeout;
        self
    }

    /// Reads every inventory every `every` (`--reconcile-every`).
    pub fn with_reconcile_every(mut self, every: &'static str) -> Service {
        self.timing.reconcile_every = every;
        self
    }

    /// Passes `flag` and `value` to `serve` besides the timing flags.
    pub fn with_flag(mut self, flag: &str, value: &str) -> Service {
        self.extra.push(flag.to_owned());
        self.extra.push(value.to_owned());
        self
    }

    /// Uses `--token-file PATH` instead of the default `STATE/token`.
    pub fn with_token_file(mut self, path: PathBuf) -> Service {
        self.token_file = Some(path);
        self
    }

    /// The temporary directory this deployment's files live in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The `--state` directory.
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// Where the token is read from: `--token-file`, or `STATE/token`.
    pub fn token_path(&self) -> PathBuf {
        self.token_file
            .clone()
            .unwrap_or_else(|| self.state.join("token"))
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("a running server").id()
    }

    /// Waits until the current run of the server has read its pool's
    /// inventory once (its log says "first inventory read"): until then nothing is placed (L8), so a
    /// test that makes the daemon unreadable before it would wait forever.
    pub async fn wait_first_inventory_read(&self) {
        let deadline = Deadline::after(Duration::from_secs(10), "the first inventory read");
        while !self.last_log().contains("first inventory read") {
            deadline.check(self.last_log());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every log the server wrote (stderr of every run, in order).
    pub fn log(&self) -> String {
        let mut all = String::new();
        for (n, path) in self.logs.iter().enumerate() {
            all.push_str(&format!("----- run {n}: {} -----\n", path.display()));
            all.push_str(&std::fs::read_to_string(path).unwrap_or_default());
        }
        all
    }

    /// The log of the current (or last) run.
    pub fn last_log(&self) -> String {
        self.logs
            .last()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Starts `billet serve` on a fresh port, on this deployment's state, and
    /// waits until `/healthz` answers; panics with the log if it exits or does
    /// not answer in time.
    pub async fn start(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        self.port = free_port();
        let run = self.logs.len();
        let log = self.dir.path().join(format!("serve-{run}.log"));
        let out = self.dir.path().join(format!("serve-{run}.out"));
        let stderr = std::fs::File::create(&log).expect("a log file");
        let stdout = std::fs::File::create(&out).expect("an output file");
        self.logs.push(log);
        let mut command = Command::new(BILLET);
        command
            .arg("serve")
            .arg("--config")
            .arg(&self.config)
            .arg("--state")
            .arg(&self.state)
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .args(["--reconcile-every", self.timing.reconcile_every])
            .args(["--call-timeout", self.timing.call_timeout])
            .args(["--orphan-grace", self.timing.orphan_grace])
            .args(["--shutdown-grace", self.timing.shutdown_grace])
            .args(&self.extra);
        if let Some(path) = &self.token_file {
            command.arg("--token-file").arg(path);
        }
        command
            .env(
                "RUST_LOG",
                std::env::var("BILLET_E2E_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        self.child = Some(command.spawn().expect("spawn billet serve"));

        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(20))
            .build()
            .expect("an HTTP client");
        let base = format!("http://127.0.0.1:{}", self.port);
        let deadline = Deadline::after(READY_WITHIN, "the server to answer /healthz");
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "billet serve exited with {status} before answering; its log:\n{}",
                    self.last_log()
                );
            }
            let answer = http
                .get(format!("{base}/healthz"))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if answer.is_ok() {
                break;
            }
            deadline.check(&answer);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let token = std::fs::read_to_string(self.token_path()).unwrap_or_else(|e| {
            panic!(
                "no token file at {} after start: {e}",
                self.token_path().display()
            )
        });
        self.api = Some(Api {
            http,
            base,
            token: token.trim().to_owned(),
        });
    }

    /// The API of the server last started (a clone, for tasks of its own).
    pub fn api(&self) -> Api {
        (**self).clone()
    }

    /// `kill -9` the server and reap it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM to the server, without waiting.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed: {status}");
    }

    /// Waits up to `bound` for the server to exit; its status, or `None`
    /// (the server still runs) when the bound passed.
    pub async fn wait_exit(&mut self, bound: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + bound;
        loop {
            let child = self.child.as_mut().expect("a running server");
            if let Some(status) = child.try_wait().expect("try_wait") {
                self.child = None;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then the exit within `bound`, which must be status 0.
    pub async fn terminate(&mut self, bound: Duration) -> Duration {
        let started = Instant::now();
        self.sigterm();
        let status = self.wait_exit(bound).await;
        let took = started.elapsed();
        match status {
            Some(status) => assert!(
                status.success(),
                "billet serve exited with {status} after SIGTERM"
            ),
            None => panic!("billet serve still runs {bound:?} after SIGTERM"),
        }
        took
    }

    /// Whether the server process still runs.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// This deployment's containers on the daemon, any state.
    pub async fn containers(&self) -> Vec<Container> {
        containers_of(&self.id).await
    }

    /// Polls until the daemon holds at least `n` running containers of this
    /// deployment; their ids.
    pub async fn wait_containers_running(&self, n: usize, within: Duration) -> BTreeSet<String> {
        let deadline = Deadline::after(within, format!("{n} running containers of {}", self.id));
        loop {
            let all = self.containers().await;
            let running: BTreeSet<String> = all
                .iter()
                .filter(|c| c.state == "running")
                .map(|c| c.id.clone())
                .collect();
            if running.len() >= n {
                return running;
            }
            deadline.check(&all);
            tokio::time::sleep(POLL).await;
        }
    }

    /// Polls until the daemon holds no container of this deployment.
    pub async fn wait_no_containers(&self, within: Duration) {
        let deadline = Deadline::after(within, format!("no container of {}", self.id));
        loop {
            let left = self.containers().await;
            if left.is_empty() {
                return;
            }
            deadline.check(&left);
            tokio::time::sleep(POLL).await;
        }
    }

    /// The end of every test: waits for the running server to remove its
    /// containers, stops it (SIGTERM, exit 0), and checks that the daemon
    /// holds nothing with this deployment's owner label.
    pub async fn finish(&mut self) {
        if self.running() {
            self.wait_no_containers(Duration::from_secs(20)).await;
            self.terminate(Duration::from_secs(20)).await;
        }
        let left = self.containers().await;
        assert!(
            left.is_empty(),
            "containers of {} left on the daemon: {left:?}",
            self.id
        );
    }
}

impl std::ops::Deref for Service {
    type Target = Api;

    fn deref(&self) -> &Api {
        self.api.as_ref().expect("a started server")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "===== logs of billet serve for deployment {} =====\n{}",
                self.id,
                self.log()
            );
        }
        let owner = self.id.clone();
        block(async move { remove_containers_of(&owner).await });
    }
}

/// The HTTP API of one started server: its address and token.
#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    /// The token the server uses (read from its file when it started).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Uses `token` from now on (to try another deployment's).
    pub fn set_token(&mut self, token: &str) {
        token.clone_into(&mut self.token);
    }

    /// `http://127.0.0.1:PORT` of the server.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request: `method` on `path`, with this JSON `body` (or raw
    /// text sent as `application/json`), authenticated as `auth`.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Body>,
        auth: Auth,
    ) -> Result<Answer, reqwest::Error> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        match auth {
            Auth::Token => request = request.bearer_auth(self.token()),
            Auth::Wrong => request = request.bearer_auth(format!("{}x", self.token())),
            Auth::None => {}
        }
        match body {
            Some(Body::Json(value)) => request = request.json(&value),
            Some(Body::Raw(bytes)) => {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(bytes);
            }
            None => {}
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let body = response.text().await?;
        let json = serde_json::from_str(&body).ok();
        Ok(Answer { status, body, json })
    }

    /// A request that must get an answer (any status).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Body>,
        auth: Auth,
    ) -> Answer {
        let what = format!("{method} {path}");
        self.request(method, path, body, auth)
            .await
            .unwrap_or_else(|e| panic!("{what}: no answer: {e:?}"))
    }

    /// `GET path` with the token, which must answer 200; its JSON.
    pub async fn get(&self, path: &str) -> Value {
        let answer = self
            .call(reqwest::Method::GET, path, None, Auth::Token)
            .await;
        assert_eq!(answer.status, 200, "GET {path}: {answer:?}");
        answer.json().clone()
    }

    /// `POST /v1/jobs` with this body.
    pub async fn submit(&self, body: Value) -> Answer {
        self.call(
            reqwest::Method::POST,
            "/v1/jobs",
            Some(Body::Json(body)),
            Auth::Token,
        )
        .await
    }

    /// Submits a trusted job running `sh -c script`, which must be accepted
    /// (201); the job.
    pub async fn submit_sh(&self, script: &str) -> Value {
        let answer = self
            .submit(serde_json::json!({"command": ["sh", "-c", script], "trust": "trusted"}))
            .await;
        assert_eq!(answer.status, 201, "submit {script:?}: {answer:?}");
        answer.json().clone()
    }

    /// `GET /v1/jobs/{id}`, which must answer 200.
    pub async fn job(&self, id: u64) -> Value {
        self.get(&format!("/v1/jobs/{id}")).await
    }

    /// `GET /v1/jobs` (every job, or those in `state`), in the order answered.
    pub async fn jobs(&self, state: Option<&str>) -> Vec<Value> {
        let path = match state {
            Some(state) => format!("/v1/jobs?state={state}"),
            None => "/v1/jobs".to_owned(),
        };
        let answer = self.get(&path).await;
        answer
            .get("jobs")
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("GET {path}: no \"jobs\" array in {answer}"))
            .clone()
    }

    /// `GET /healthz` (no token): its status and JSON.
    pub async fn health(&self) -> Answer {
        self.call(reqwest::Method::GET, "/healthz", None, Auth::None)
            .await
    }

    /// `GET /metrics`: the text, which must answer 200.
    pub async fn metrics(&self) -> String {
        let answer = self
            .call(reqwest::Method::GET, "/metrics", None, Auth::Token)
            .await;
        assert_eq!(answer.status, 200, "GET /metrics: {answer:?}");
        answer.body
    }

    /// `GET /v1/pools`: the pool named [`POOL`].
    pub async fn pool(&self) -> Value {
        let pools = self.get("/v1/pools").await;
        pools
            .get("pools")
            .and_then(Value::as_array)
            .and_then(|p| p.iter().find(|p| p["name"] == POOL))
            .unwrap_or_else(|| panic!("no pool {POOL} in {pools}"))
            .clone()
    }

    /// Polls until every job of `ids` has ended; their jobs, by id.
    pub async fn wait_ended(&self, ids: &[u64], within: Duration) -> BTreeMap<u64, Value> {
        let deadline = Deadline::after(within, format!("jobs {ids:?} to end"));
        loop {
            let mut ended = BTreeMap::new();
            let mut pending = Vec::new();
            for &id in ids {
                let job = self.job(id).await;
                if is_ended(&job) {
                    ended.insert(id, job);
                } else {
                    pending.push(job);
                }
            }
            if pending.is_empty() {
                return ended;
            }
            deadline.check(&pending);
            tokio::time::sleep(POLL).await;
        }
    }

    /// Polls until job `id` satisfies `done`; that job.
    pub async fn wait_job(
        &self,
        id: u64,
        within: Duration,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Deadline::after(within, format!("job {id}: {what}"));
        loop {
            let job = self.job(id).await;
            if done(&job) {
                return job;
            }
            deadline.check(&job);
            tokio::time::sleep(POLL).await;
        }
    }

    /// Polls until at least `n` jobs are `running`; those jobs.
    pub async fn wait_running(&self, n: usize, within: Duration) -> Vec<Value> {
        let deadline = Deadline::after(within, format!("{n} running jobs"));
        loop {
            let running = self.jobs(Some("running")).await;
            if running.len() >= n {
                return running;
            }
            deadline.check(&running);
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Sends `body` to the GitHub webhook of the service at `base` as GitHub
/// would: a `workflow_job` event, delivery id `delivery-{n}`, signed with
/// `secret`; the status it answers.
pub async fn deliver_github(base: &str, secret: &str, n: u64, body: &Value) -> u16 {
    let body = body.to_string();
    reqwest::Client::new()
        .post(format!("{base}/v1/github/webhook"))
        .header("X-GitHub-Event", "workflow_job")
        .header("X-GitHub-Delivery", format!("delivery-{n}"))
        .header(
            "X-Hub-Signature-256",
            billet_github::sign(secret.as_bytes(), body.as_bytes()),
        )
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the webhook answers")
        .status()
        .as_u16()
}

/// A request body: JSON, or raw bytes (sent as `application/json`).
pub enum Body {
    Json(Value),
    Raw(Vec<u8>),
}

/// Whether a job has ended (finished, failed or cancelled).
pub fn is_ended(job: &Value) -> bool {
    matches!(
        job["state"].as_str(),
        Some("finished" | "failed" | "cancelled")
    )
}

/// The exit code a job's script ends with (`...; exit N`).
pub fn expected_code(job: &Value) -> i64 {
    job["command"][2]
        .as_str()
        .and_then(|s| s.rsplit("exit ").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `exit N` in the command of {job}"))
}

/// The id of a job.
pub fn id_of(job: &Value) -> u64 {
    job["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no numeric id in {job}"))
}

/// Whether `s` reads as an RFC 3339 date-time (`2024-01-02T03:04:05Z`, with
/// optional fractional seconds and `Z` or a `±hh:mm` offset).
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || !matches!(b[10], b'T' | b't')
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    if rest == "Z" || rest == "z" {
        return true;
    }
    let o = rest.as_bytes();
    o.len() == 6
        && matches!(o[0], b'+' | b'-')
        && o[1..3].iter().all(u8::is_ascii_digit)
        && o[3] == b':'
        && o[4..6].iter().all(u8::is_ascii_digit)
}

/// The value of the Prometheus series `name` whose labels include every
/// `key="value"` of `labels`, in a text exposition.
pub fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, series_labels) = match series.split_once('{') {
                Some((n, l)) => (n, l.trim_end_matches('}')),
                None => (series, ""),
            };
            if series_name != name {
                return None;
            }
            let matches = labels
                .iter()
                .all(|(k, v)| series_labels.contains(&format!("{k}=\"{v}\"")));
            if !matches {
                return None;
            }
            value.trim().parse().ok()
        })
}

/// Runs the binary with `args` to its exit (at most 30 s): its status, stdout
/// and stderr.
pub async fn run_billet(args: &[&str], dir: &Path) -> (ExitStatus, String, String) {
    let out = dir.join(format!("run-{}.out", unique_id("run")));
    let err = dir.join(format!("run-{}.err", unique_id("run")));
    let mut child = Command::new(BILLET)
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("an output file"))
        .stderr(std::fs::File::create(&err).expect("an error file"))
        .spawn()
        .expect("spawn billet");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "billet {args:?} still runs after 30 s; stderr:\n{}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    (
        status,
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default(),
    )
}

// ---------------------------------------------------------------------------
// What the daemon saw: every event of a deployment, and samples of its
// containers
// ---------------------------------------------------------------------------

/// One docker event of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When the daemon says it happened, in nanoseconds since the epoch.
    pub at: i64,
    /// `create`, `start`, `die`, `destroy`, ...
    pub action: String,
    pub id: String,
    /// The instance name (`billet.name` label).
    pub name: String,
}

/// Largest counts seen by sampling the daemon's container list.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    pub count: u32,
    /// Most containers of the deployment listed at once, any state.
    pub max_total: usize,
    /// Most running (or created) containers listed at once.
    pub max_live: usize,
    /// Most live containers of one job listed at once.
    pub max_live_per_job: usize,
}

/// How many times a [`Watch`] opens its event stream again after it ended.
const WATCH_REOPENS: u32 = 100;

/// Every container event of one deployment, from a subscription to the
/// daemon's event stream made before anything happens, plus a sampler that
/// lists the deployment's containers every 100 ms.
pub struct Watch {
    owner: String,
    events: Arc<Mutex<Vec<Event>>>,
    /// How each stream that was opened again ended, in order.
    broken: Arc<Mutex<Vec<String>>>,
    samples: Arc<Mutex<Samples>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// What a deployment's events show.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Most containers existing at once (create to destroy).
    pub max_existing: usize,
    /// Most containers running at once (start to die).
    pub max_running: usize,
    /// `start` events per job id.
    pub starts: BTreeMap<u64, usize>,
    /// Most containers of one job existing at once.
    pub max_existing_per_job: usize,
    /// Containers created and never destroyed.
    pub undestroyed: usize,
}

impl Watch {
    /// Subscribes to `owner`'s container events (from a moment before this
    /// call) and starts sampling its containers.
    pub async fn start(owner: &str) -> Watch {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(Duration::from_secs(1));
        let events = Arc::new(Mutex::new(Vec::<Event>::new()));
        let samples = Arc::new(Mutex::new(Samples::default()));
        let filters = HashMap::from([
            ("label", vec![format!("{OWNER_LABEL}={owner}")]),
            ("type", vec!["container".to_owned()]),
        ]);
        let record = Arc::clone(&events);
        let broken = Arc::new(Mutex::new(Vec::new()));
        let breaks = Arc::clone(&broken);
        let subscriber = tokio::spawn(async move {
            // From `since`, then from the last event seen: a stream that
            // ends or errs is opened again (podman 4.3 ends one when it
            // reads a line of its events file while another process is
            // still writing it), and what the new one repeats is skipped.
            let mut from = i64::try_from(since.as_nanos()).unwrap_or(i64::MAX);
            for _ in 0..WATCH_REOPENS {
                let options = EventsOptionsBuilder::new()
                    .since(&format!(
                        "{}.{:09}",
                        from.div_euclid(1_000_000_000),
                        from.rem_euclid(1_000_000_000)
                    ))
                    .filters(&filters)
                    .build();
                let mut stream = Box::pin(raw_client().events(Some(options)));
                let ended = loop {
                    match stream.next().await {
                        Some(Ok(event)) => {
                            // D18: each engine's word for an action read as docker's.
                            let action = billet_docker::dialect::docker_event_action(
                                &event.action.unwrap_or_default(),
                            )
                            .to_owned();
                            let actor = event.actor.unwrap_or_default();
                            let attributes = actor.attributes.unwrap_or_default();
                            let seen = Event {
                                at: event.time_nano.unwrap_or_default(),
                                action,
                                id: actor.id.unwrap_or_default(),
                                name: attributes.get(NAME_LABEL).cloned().unwrap_or_default(),
                            };
                            let mut record = record.lock();
                            let repeated = record
                                .iter()
                                .rev()
                                .take_while(|e| e.at >= from)
                                .any(|e| *e == seen);
                            if !repeated {
                                record.push(seen);
                            }
                        }
                        Some(Err(error)) => break error.to_string(),
                        None => break "the stream ended".to_owned(),
                    }
                };
                breaks.lock().push(ended);
                if let Some(last) = record.lock().last() {
                    from = from.max(last.at);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let owner_sampled = owner.to_owned();
        let sampled = Arc::clone(&samples);
        let sampler = tokio::spawn(async move {
            loop {
                let all = containers_of(&owner_sampled).await;
                let live: Vec<_> = all.iter().filter(|c| c.is_live()).collect();
                let mut per_job: HashMap<&str, usize> = HashMap::new();
                for c in &live {
                    *per_job.entry(c.name.as_str()).or_default() += 1;
                }
                {
                    let mut s = sampled.lock();
                    s.count += 1;
                    s.max_total = s.max_total.max(all.len());
                    s.max_live = s.max_live.max(live.len());
                    s.max_live_per_job = s
                        .max_live_per_job
                        .max(per_job.values().copied().max().unwrap_or(0));
                }
                tokio::time::sleep(POLL).await;
            }
        });
        Watch {
            owner: owner.to_owned(),
            events,
            broken,
            samples,
            tasks: vec![subscriber, sampler],
        }
    }

    /// The events seen so far, in the daemon's order.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().clone()
    }

    /// The samples' maxima so far.
    pub fn samples(&self) -> Samples {
        self.samples.lock().clone()
    }

    /// Counts from the events seen so far.
    pub fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        let mut existing: HashMap<String, String> = HashMap::new();
        let mut running: HashSet<String> = HashSet::new();
        for event in self.events.lock().iter() {
            match event.action.as_str() {
                "create" => {
                    existing.insert(event.id.clone(), event.name.clone());
                }
                "start" => {
                    running.insert(event.id.clone());
                    if let Some(job) = job_of_instance(&event.name) {
                        *tally.starts.entry(job).or_default() += 1;
                    }
                }
                "die" => {
                    running.remove(&event.id);
                }
                "destroy" => {
                    existing.remove(&event.id);
                    running.remove(&event.id);
                }
                _ => {}
            }
            tally.max_existing = tally.max_existing.max(existing.len());
            tally.max_running = tally.max_running.max(running.len());
            let mut per_job: HashMap<&str, usize> = HashMap::new();
            for name in existing.values() {
                *per_job.entry(name.as_str()).or_default() += 1;
            }
            tally.max_existing_per_job = tally
                .max_existing_per_job
                .max(per_job.values().copied().max().unwrap_or(0));
        }
        tally.undestroyed = existing.len();
        tally
    }

    /// Waits until the events stream has shown `action` for at least `n`
    /// containers (events may arrive a moment after the fact).
    pub async fn wait_events(&self, action: &str, n: usize, within: Duration) {
        let deadline = Deadline::after(within, format!("{n} {action} events of {}", self.owner));
        loop {
            let seen = self
                .events
                .lock()
                .iter()
                .filter(|e| e.action == action)
                .count();
            if seen >= n {
                return;
            }
            deadline.check(self.events());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if std::thread::panicking() {
            let mut lines = String::new();
            for e in self.events.lock().iter() {
                let secs = e.at.div_euclid(1_000_000_000);
                let nanos = e.at.rem_euclid(1_000_000_000);
                let short = e.id.get(..12).unwrap_or(&e.id);
                lines.push_str(&format!(
                    "{:02}:{:02}:{:02}.{:06} {:<8} {short} {}\n",
                    (secs / 3600) % 24,
                    (secs / 60) % 60,
                    secs % 60,
                    nanos / 1000,
                    e.action,
                    e.name
                ));
            }
            eprintln!(
                "===== docker events of deployment {} (UTC) =====\n{lines}{:?}\n{:?}\nstreams opened again after: {:?}",
                self.owner,
                self.tally(),
                self.samples(),
                self.broken.lock()
            );
        }
    }
}

// ---------------------------------------------------------------------------
// A socket proxy between the service and the daemon
// ---------------------------------------------------------------------------

/// One proxied connection: both ends, to shut down at a cut, and how many
/// of its two directions have finished copying.
struct Connection {
    client: UnixStream,
    daemon: UnixStream,
    done: Arc<AtomicU64>,
}

struct ProxyShared {
    /// Open connections, and whether the proxy is cut: one lock, so that no
    /// connection accepted around a cut escapes it.
    state: Mutex<ProxyState>,
}

struct ProxyState {
    connections: Vec<Connection>,
    /// Pass requests to the daemon but lose its answers: each connection is
    /// closed as soon as the daemon starts answering.
    lose_answers: bool,
    /// Hold new connections: their requests are read and kept, and reach
    /// the daemon only when the hold is released (see [`Hold`]).
    hold: Option<Arc<Hold>>,
    /// Every hold made, to discard at drop what was never released.
    holds: Vec<Arc<Hold>>,
    /// Set to stop the current accept loop.
    stop: Arc<AtomicBool>,
}

/// A unix-socket proxy between a `billet serve` and the daemon, owned by the
/// test, on plain threads (it serves another process, so it needs no
/// runtime). [`cut`](SocketProxy::cut) closes its socket (connects are
/// refused) and every open connection, as a daemon that died would;
/// [`restore`](SocketProxy::restore) listens and passes everything through
/// again.
pub struct SocketProxy {
    dir: tempfile::TempDir,
    path: PathBuf,
    upstream: PathBuf,
    shared: Arc<ProxyShared>,
}

impl SocketProxy {
    /// A proxy to the daemon's socket, open, on a fresh socket path.
    pub fn start() -> SocketProxy {
        let dir = tempfile::Builder::new()
            .prefix("billet-e2e-proxy-")
            .tempdir()
            .expect("a proxy directory");
        let proxy = SocketProxy {
            path: dir.path().join("docker.sock"),
            dir,
            upstream: daemon_socket(),
            shared: Arc::new(ProxyShared {
                state: Mutex::new(ProxyState {
                    connections: Vec::new(),
                    lose_answers: false,
                    hold: None,
                    holds: Vec::new(),
                    stop: Arc::new(AtomicBool::new(true)),
                }),
            }),
        };
        proxy.listen();
        proxy
    }

    /// The endpoint a configuration names to go through this proxy.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    fn listen(&self) {
        let _ = std::fs::remove_file(&self.path);
        let listener = UnixListener::bind(&self.path).expect("bind the proxy socket");
        listener.set_nonblocking(true).expect("non-blocking");
        let stop = Arc::new(AtomicBool::new(false));
        self.shared.state.lock().stop = Arc::clone(&stop);
        let shared = Arc::clone(&self.shared);
        let upstream = self.upstream.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let hold = shared.state.lock().hold.clone();
                        if let Some(hold) = hold {
                            held(hold, client, upstream.clone());
                            continue;
                        }
                        let Ok(daemon) = UnixStream::connect(&upstream) else {
                            continue;
                        };
                        pipe(&shared, &stop, client, daemon);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            // The listener is dropped here: its socket stops accepting.
        });
    }

    /// Stops accepting and shuts every open connection down, without waiting.
    fn close(&self) {
        let mut state = self.shared.state.lock();
        state.stop.store(true, Ordering::SeqCst);
        for connection in state.connections.drain(..) {
            let _ = connection.client.shutdown(std::net::Shutdown::Both);
            let _ = connection.daemon.shutdown(std::net::Shutdown::Both);
        }
    }

    /// The daemon is gone: the socket is closed (connects fail) and every
    /// open connection is shut down.
    pub fn cut(&self) {
        self.close();
        let deadline = Instant::now() + Duration::from_secs(5);
        while UnixStream::connect(&self.path).is_ok() {
            assert!(
                Instant::now() < deadline,
                "the proxy at {} still accepts after a cut",
                self.path.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = std::fs::remove_file(&self.path);
    }

    /// Answers are lost from now on: every request reaches the daemon, which
    /// acts on it, but the connection is closed as soon as the daemon starts
    /// answering (a launch whose answer is lost mid-call, D11). Open
    /// connections are shut down, so that every later call takes a new one.
    pub fn lose_answers(&self) {
        let mut state = self.shared.state.lock();
        state.lose_answers = true;
        for connection in state.connections.drain(..) {
            let _ = connection.client.shutdown(std::net::Shutdown::Both);
            let _ = connection.daemon.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Holds every new connection from now on: its request is read and kept
    /// until [`release`](SocketProxy::release) sends it to the daemon (as if
    /// the daemon received it late), even if the client is gone by then.
    /// Open connections are shut down, so that every later call takes a new
    /// one.
    pub fn hold(&self) -> Arc<Hold> {
        let hold = Arc::new(Hold::default());
        let mut state = self.shared.state.lock();
        state.hold = Some(Arc::clone(&hold));
        state.holds.push(Arc::clone(&hold));
        for connection in state.connections.drain(..) {
            let _ = connection.client.shutdown(std::net::Shutdown::Both);
            let _ = connection.daemon.shutdown(std::net::Shutdown::Both);
        }
        hold
    }

    /// New connections pass through again; those already held stay held
    /// until their [`Hold`] is released.
    pub fn pass(&self) {
        self.shared.state.lock().hold = None;
    }

    /// The daemon is back: the socket listens and passes connections, and
    /// their answers, again.
    pub fn restore(&self) {
        let cut = {
            let mut state = self.shared.state.lock();
            if state.lose_answers {
                state.lose_answers = false;
                for connection in state.connections.drain(..) {
                    let _ = connection.client.shutdown(std::net::Shutdown::Both);
                    let _ = connection.daemon.shutdown(std::net::Shutdown::Both);
                }
            }
            state.stop.load(Ordering::SeqCst)
        };
        if cut {
            self.listen();
        }
    }
}

/// Connections held by [`SocketProxy::hold`]: how many container creates
/// they hold, and whether they are released (sent on to the daemon) or
/// discarded (the proxy is dropped).
#[derive(Default)]
pub struct Hold {
    /// 0: held; 1: released; 2: discarded.
    fate: std::sync::atomic::AtomicU8,
    creates: AtomicU64,
}

impl Hold {
    /// How many held requests create a container.
    pub fn creates(&self) -> u64 {
        self.creates.load(Ordering::SeqCst)
    }

    /// Sends every held request on to the daemon.
    pub fn release(&self) {
        let _ = self
            .fate
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst);
    }

    fn discard(&self) {
        let _ = self
            .fate
            .compare_exchange(0, 2, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Reads and keeps what `client` sends until `hold` is released, then sends
/// it to the daemon and passes the daemon's answer back (to a client that
/// may be gone), without ever closing the daemon's side early: a daemon
/// sees a request whose client it cannot tell has died.
fn held(hold: Arc<Hold>, mut client: UnixStream, upstream: PathBuf) {
    std::thread::spawn(move || {
        let _ = client.set_read_timeout(Some(Duration::from_millis(10)));
        let mut request = Vec::new();
        let mut counted = false;
        let mut chunk = [0u8; 8192];
        loop {
            match hold.fate.load(Ordering::SeqCst) {
                0 => {}
                1 => break,
                _ => return,
            }
            match client.read(&mut chunk) {
                Ok(0) => std::thread::sleep(Duration::from_millis(10)),
                Ok(n) => {
                    request.extend_from_slice(&chunk[..n]);
                    if !counted && request.windows(18).any(|w| w == b"/containers/create") {
                        counted = true;
                        hold.creates.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        let Ok(mut daemon) = UnixStream::connect(&upstream) else {
            return;
        };
        if std::io::Write::write_all(&mut daemon, &request).is_err() {
            return;
        }
        // The daemon's answer, for as long as it takes (bounded).
        let _ = daemon.set_read_timeout(Some(Duration::from_secs(15)));
        let _ = client.set_read_timeout(None);
        let _ = std::io::copy(&mut daemon, &mut client);
    });
}

/// Copies bytes both ways between `client` and `daemon`, on two threads,
/// keeping both ends so a cut can shut them down; drops both at once when
/// the proxy was cut meanwhile.
fn pipe(shared: &ProxyShared, stop: &AtomicBool, client: UnixStream, daemon: UnixStream) {
    let clones = (
        client.try_clone(),
        daemon.try_clone(),
        client.try_clone(),
        daemon.try_clone(),
    );
    let (Ok(client_read), Ok(daemon_read), Ok(client_keep), Ok(daemon_keep)) = clones else {
        return;
    };
    let done = Arc::new(AtomicU64::new(0));
    let lose_answers = {
        let mut state = shared.state.lock();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        state
            .connections
            .retain(|c| c.done.load(Ordering::SeqCst) < 2);
        state.connections.push(Connection {
            client: client_keep,
            daemon: daemon_keep,
            done: Arc::clone(&done),
        });
        state.lose_answers
    };
    let mut daemon_write = daemon;
    let mut client_write = client;
    let done_up = Arc::clone(&done);
    std::thread::spawn(move || {
        let mut from = client_read;
        let _ = std::io::copy(&mut from, &mut daemon_write);
        let _ = daemon_write.shutdown(std::net::Shutdown::Write);
        done_up.fetch_add(1, Ordering::SeqCst);
    });
    std::thread::spawn(move || {
        let mut from = daemon_read;
        if lose_answers {
            // The daemon has acted once it answers: drop the answer and the
            // connection both ways.
            let mut first = [0u8; 1];
            let _ = from.read(&mut first);
            let _ = client_write.shutdown(std::net::Shutdown::Both);
            let _ = from.shutdown(std::net::Shutdown::Both);
        } else {
            let _ = std::io::copy(&mut from, &mut client_write);
            let _ = client_write.shutdown(std::net::Shutdown::Write);
        }
        done.fetch_add(1, Ordering::SeqCst);
    });
}

impl Drop for SocketProxy {
    fn drop(&mut self) {
        for hold in self.shared.state.lock().holds.drain(..) {
            hold.discard();
        }
        self.close();
    }
}

/// How a `billet serve` that should not start ended ([`serve_refused`]).
pub struct Refused {
    /// Its exit status.
    pub code: Option<i32>,
    /// What it wrote on stderr.
    pub stderr: String,
    /// Whether its state directory was made.
    pub state_made: bool,
}

/// Runs `billet serve` over the configuration `yaml` in a fresh directory,
/// and waits for it to stop by itself: a start that is not refused serves
/// until stopped, so one still running after 30 s fails the test.
pub fn serve_refused(yaml: &str) -> Refused {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("billet.yaml");
    std::fs::write(&config, yaml).unwrap();
    let state = dir.path().join("state");
    let mut serve = Command::new(BILLET)
        .args(["serve", "--config"])
        .arg(&config)
        .arg("--state")
        .arg(&state)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run billet serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    while serve.try_wait().expect("wait for serve").is_none() {
        if Instant::now() > deadline {
            let _ = serve.kill();
            panic!("billet serve started, and should not have:\n{yaml}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = serve.wait_with_output().expect("serve's output");
    Refused {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        state_made: state.exists(),
    }
}
