//! What every docker test shares: the daemon (or one line saying how to run the
//! tests without it), the offline test image, a cleanup guard that removes
//! every container a test started (also when it fails), and a socket proxy the
//! test owns between a provider and the daemon, to cut, hang, slow down and
//! restore the connection for real, and to lose an answer mid-call.

#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use billet_docker::{DockerProvider, OWNER_LABEL};
use bollard::Docker;
use bollard::query_parameters::{
    CreateImageOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;
use tokio::task::AbortHandle;

/// The image every docker test and the D10 bench start containers from: a
/// static busybox and nothing else, made offline (see [`ensure_test_image`]).
/// The one place its name is written; `.ci/run` leaves it to the tests.
pub const TEST_IMAGE: &str = "billet-test:latest";

/// Where the static busybox the test image is made of comes from (Debian's
/// `busybox-static`).
pub const BUSYBOX: &str = "/bin/busybox";

/// Set (to `1`) by `.ci/run`: a missing daemon is then a failure, not a skip.
pub const REQUIRED_VAR: &str = "BILLET_DOCKER_REQUIRED";

/// The label on every container a test makes by hand (not through a
/// provider), so the cleanup guard finds those too.
pub const TEST_RUN_LABEL: &str = "billet.test-run";

/// The daemon's socket for tests: `$DOCKER_HOST` when it is a unix socket,
/// else the local default.
pub fn daemon_socket() -> PathBuf {
    match std::env::var("DOCKER_HOST") {
        Ok(host) if host.starts_with("unix://") => PathBuf::from(&host["unix://".len()..]),
        _ => PathBuf::from(billet_docker::DEFAULT_SOCKET),
    }
}

/// Runs `future` to completion on a runtime of its own, in a thread of its
/// own, so that it works from sync code, from `Drop`, and from inside another
/// runtime alike.
pub fn block<F>(future: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(future)
    })
    .join()
    .expect("the helper thread")
}

/// A raw bollard client on the daemon's socket.
pub fn raw_client() -> Docker {
    client_on(&daemon_socket()).expect("a client")
}

/// A raw bollard client on `socket`, or why there can be none (no socket there).
fn client_on(socket: &Path) -> Result<Docker, String> {
    Docker::connect_with_unix(&socket.to_string_lossy(), 30, bollard::API_DEFAULT_VERSION)
        .map_err(|e| format!("connect to {}: {e}", socket.display()))
}

/// A daemon for this test, with the test image present, and a cleanup guard
/// scoped to this test; or `None`, after one line on stderr, when no daemon
/// answers and [`REQUIRED_VAR`] is not set. With it set, a missing daemon
/// fails the test.
pub fn daemon(test: &str) -> Option<Scope> {
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
            "skipped {test}: no docker daemon at {}; start dockerd (as root: `dockerd &`) and install busybox-static to run the docker tests, or run `bash .ci/run`",
            socket.display()
        );
        return None;
    }
    ensure_test_image();
    Some(Scope::new(test))
}

/// The runtime the D19 tests run containers under: gVisor's `runsc`, as
/// `.ci/run` registers it with docker and with podman.
pub const RUNSC: &str = "runsc";

/// Set (to `1`) by `.ci/run`: a daemon that does not list [`RUNSC`] is then
/// a failure, not a skip.
pub const RUNSC_REQUIRED_VAR: &str = "BILLET_RUNSC_REQUIRED";

/// Whether the engine behind `scope` lists [`RUNSC`] ([`lists_runsc_at`]).
pub fn lists_runsc(scope: &Scope, test: &str) -> bool {
    lists_runsc_at(scope.socket(), test)
}

/// Whether the engine at `socket` lists [`RUNSC`]; when it does not, one
/// line on stderr says how to register it, and with [`RUNSC_REQUIRED_VAR`]
/// set that is a failure instead.
pub fn lists_runsc_at(socket: &Path, test: &str) -> bool {
    let client = client_on(socket).expect("a client");
    let info = block(async move { client.info().await }).expect("the daemon's system info");
    if info
        .runtimes
        .is_some_and(|runtimes| runtimes.contains_key(RUNSC))
    {
        return true;
    }
    assert!(
        std::env::var(RUNSC_REQUIRED_VAR).as_deref() != Ok("1"),
        "{RUNSC_REQUIRED_VAR}=1 but the engine at {} lists no runtime {RUNSC:?}",
        socket.display()
    );
    eprintln!(
        "skipped {test} at {}: it lists no runtime {RUNSC:?}; install gVisor's runsc and register it (README, \"Untrusted jobs on gVisor\"), or run `bash .ci/run`",
        socket.display()
    );
    false
}

/// A scope on the test daemon ([`daemon`]) when it lists [`RUNSC`]
/// ([`lists_runsc`]).
pub fn runsc(test: &str) -> Option<Scope> {
    daemon(test).filter(|scope| lists_runsc(scope, test))
}

/// The socket of a podman service whose default runtime is [`RUNSC`]
/// (`podman --runtime runsc system service`, as `.ci/run` starts one):
/// `$BILLET_PODMAN_RUNSC_HOST` (a `unix://` socket), else
/// `/run/podman/runsc.sock`. Podman's Docker-compatible API runs every
/// container on its service's default runtime, whatever the container asks.
pub fn podman_runsc_socket() -> PathBuf {
    match std::env::var("BILLET_PODMAN_RUNSC_HOST") {
        Ok(host) if !host.is_empty() => {
            PathBuf::from(host.strip_prefix("unix://").unwrap_or(&host))
        }
        _ => PathBuf::from("/run/podman/runsc.sock"),
    }
}

/// A scope on the podman service of [`podman_runsc_socket`] with the test
/// image there, or `None` when none answers (with [`RUNSC_REQUIRED_VAR`]
/// set, a failure instead).
pub fn podman_runsc(test: &str) -> Option<Scope> {
    let socket = podman_runsc_socket();
    let reachable = socket.exists()
        && client_on(&socket).is_ok_and(|client| block(async move { client.ping().await.is_ok() }));
    if !reachable {
        assert!(
            std::env::var(RUNSC_REQUIRED_VAR).as_deref() != Ok("1"),
            "{RUNSC_REQUIRED_VAR}=1 but no podman service answers at {}",
            socket.display()
        );
        return None;
    }
    ensure_test_image_on(&socket);
    Some(Scope::on_socket(test, socket))
}

/// `podman` when the engine at `socket` says it is podman, else `docker`.
pub fn engine_at(socket: &Path) -> &'static str {
    let client = client_on(socket).expect("a client");
    let version = block(async move { client.version().await });
    let podman = version.ok().is_some_and(|version| {
        version
            .components
            .unwrap_or_default()
            .iter()
            .any(|component| component.name.to_lowercase().contains("podman"))
    });
    if podman { "podman" } else { "docker" }
}

/// The OCI runtime the engine behind `scope` runs container `id` under
/// ([`runtime_at`]).
pub fn runtime_of(scope: &Scope, id: &str) -> Option<String> {
    runtime_at(scope.socket(), id)
}

/// The OCI runtime the engine at `socket` runs container `id` under, as the
/// engine itself says: podman's own inspect (`OCIRuntime`, through `curl`:
/// its Docker-compatible inspect says `oci` whatever ran), else docker's
/// `HostConfig.Runtime`; `None` when it has no such container.
pub fn runtime_at(socket: &Path, id: &str) -> Option<String> {
    let out = std::process::Command::new("curl")
        .args(["-sf", "--unix-socket"])
        .arg(socket)
        .arg(format!("http://engine/v4.0.0/libpod/containers/{id}/json"))
        .output()
        .expect("run curl");
    if out.status.success() {
        let libpod: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("podman's inspect is JSON");
        return libpod["OCIRuntime"].as_str().map(str::to_owned);
    }
    let client = client_on(socket).expect("a client");
    let id = id.to_owned();
    block(async move { billet_docker::dialect::inspect_container(&client, &id).await })
        .ok()?
        .host_config
        .and_then(|config| config.runtime)
}

/// The socket of podman's service for the tests and benches that measure it
/// beside docker (D18): `$BILLET_PODMAN_HOST` (a `unix://` socket), else
/// podman's own path for its root service.
pub fn podman_socket() -> PathBuf {
    match std::env::var("BILLET_PODMAN_HOST") {
        Ok(host) if !host.is_empty() => {
            PathBuf::from(host.strip_prefix("unix://").unwrap_or(&host))
        }
        _ => PathBuf::from("/run/podman/podman.sock"),
    }
}

/// A scope on podman's service ([`podman_socket`]) with the test image
/// there, or `None` when no podman answers (with
/// `BILLET_PODMAN_REQUIRED=1`, a failure instead).
pub fn podman(test: &str) -> Option<Scope> {
    let socket = podman_socket();
    let reachable = socket.exists()
        && client_on(&socket).is_ok_and(|client| block(async move { client.ping().await.is_ok() }));
    if !reachable {
        assert!(
            std::env::var("BILLET_PODMAN_REQUIRED").as_deref() != Ok("1"),
            "BILLET_PODMAN_REQUIRED=1 but no podman service answers at {}",
            socket.display()
        );
        return None;
    }
    ensure_test_image_on(&socket);
    Some(Scope::on_socket(test, socket))
}

/// Makes [`TEST_IMAGE`] on the daemon if it lacks it: a tar of a static
/// busybox with its applets linked, imported through the API. No network.
pub fn ensure_test_image() {
    ensure_test_image_on(&daemon_socket());
}

/// [`ensure_test_image`] on the daemon at `socket`.
pub fn ensure_test_image_on(socket: &Path) {
    static MADE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if made.iter().any(|done| done == socket) {
        return;
    }
    let client = client_on(socket).expect("a client");
    block(async move {
        if client.inspect_image(TEST_IMAGE).await.is_ok() {
            return;
        }
        let mut busybox = Vec::new();
        std::fs::File::open(BUSYBOX)
            .and_then(|mut f| f.read_to_end(&mut busybox))
            .unwrap_or_else(|e| {
                panic!("the test image needs a static busybox at {BUSYBOX} (apt-get install busybox-static): {e}")
            });
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(busybox.len() as u64);
        header.set_mode(0o755);
        header.set_mtime(0);
        tar.append_data(&mut header, "bin/busybox", busybox.as_slice())
            .expect("tar busybox");
        for applet in ["sh", "sleep", "true", "false", "cat", "echo"] {
            let mut link = tar::Header::new_gnu();
            link.set_entry_type(tar::EntryType::Symlink);
            link.set_size(0);
            link.set_mode(0o777);
            link.set_mtime(0);
            tar.append_link(&mut link, format!("bin/{applet}"), "busybox")
                .expect("tar link");
        }
        let bytes = tar.into_inner().expect("tar");
        let (repo, tag) = TEST_IMAGE.split_once(':').expect("name:tag");
        let options = CreateImageOptionsBuilder::new()
            .from_src("-")
            .repo(repo)
            .tag(tag)
            .build();
        client
            .create_image(Some(options), Some(bollard::body_full(bytes.into())), None)
            .try_collect::<Vec<_>>()
            .await
            .expect("import the test image");
    });
    made.push(socket.to_owned());
}

/// A unique prefix for every owner and hand-made container of this test
/// process: containers of an earlier run that died are told apart by it.
fn run_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        format!("billet-test-{}-{nanos:x}", std::process::id())
    })
}

/// One test's scope on the daemon: owners made by [`Scope::owner`] are unique
/// to it, and dropping it (at the end of the test, or as a failing test
/// unwinds) force-removes every container carrying one of them, and every
/// hand-made container labelled [`TEST_RUN_LABEL`] with [`Scope::run_id`].
///
/// When that cleanup cannot run (the daemon is gone), the drop panics, so a
/// passing test fails; but while the test is already failing (its thread
/// unwinding) it only says so on stderr: a second panic would abort the whole
/// test run, and the test's own failure would be lost.
pub struct Scope {
    prefix: String,
    socket: PathBuf,
}

impl Scope {
    fn new(test: &str) -> Scope {
        Scope::on_socket(test, daemon_socket())
    }

    /// A scope whose providers and cleanup talk to the daemon at `socket`,
    /// whether or not one answers there: for tests of the guard itself.
    pub fn on_socket(test: &str, socket: PathBuf) -> Scope {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Scope {
            prefix: format!("{}-{n}-{test}", run_prefix()),
            socket,
        }
    }

    /// An owner (deployment identity) unique to this test: `{prefix}/{tag}`.
    pub fn owner(&self, tag: &str) -> String {
        format!("{}/{tag}", self.prefix)
    }

    /// The daemon's socket this scope talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The value of [`TEST_RUN_LABEL`] on this test's hand-made containers.
    pub fn run_id(&self) -> &str {
        &self.prefix
    }

    /// A provider for `owner(tag)` on the daemon's socket, network `none`.
    pub fn provider(&self, tag: &str) -> DockerProvider {
        self.builder(tag).build().expect("a provider")
    }

    /// A builder for `owner(tag)` on the scope's socket, network `none`.
    pub fn builder(&self, tag: &str) -> billet_docker::Builder {
        DockerProvider::builder(self.owner(tag))
            .endpoint(self.socket.to_string_lossy().into_owned())
            .network("none")
    }

    /// A builder for `owner(tag)` whose requests go through `proxy`,
    /// network `none`.
    pub fn through(&self, tag: &str, proxy: &SocketProxy) -> billet_docker::Builder {
        self.builder(tag).endpoint(proxy.endpoint())
    }

    /// A raw bollard client on the scope's socket.
    pub fn client(&self) -> Docker {
        client_on(&self.socket).expect("a client")
    }

    /// Every container of this scope still on the daemon, by id.
    pub fn leftovers(&self) -> Vec<String> {
        let prefix = self.prefix.clone();
        let client = client_on(&self.socket).expect("a client");
        block(async move { scoped_containers(&client, &prefix).await })
            .unwrap_or_else(|e| panic!("list the containers of scope {}: {e}", self.prefix))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let prefix = self.prefix.clone();
        let socket = self.socket.clone();
        // Nothing in here panics: a panic in the helper thread would panic
        // this one too, while it may be unwinding already.
        let cleaned = block(async move {
            let client = client_on(&socket)?;
            let ids = scoped_containers(&client, &prefix).await?;
            let mut failed = Vec::new();
            for id in ids {
                let options = RemoveContainerOptionsBuilder::new()
                    .force(true)
                    .v(true)
                    .build();
                match client.remove_container(&id, Some(options)).await {
                    // Gone already, or being removed by someone else.
                    Err(bollard::errors::Error::DockerResponseServerError {
                        status_code: 404 | 409,
                        ..
                    })
                    | Ok(()) => {}
                    Err(err) => failed.push(format!("remove {id}: {err}")),
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                Err(failed.join("; "))
            }
        });
        let Err(why) = cleaned else {
            return;
        };
        let message = format!(
            "test scope {}: cleanup on the daemon at {} failed, containers may be left behind: {why}",
            self.prefix,
            self.socket.display()
        );
        if std::thread::panicking() {
            // The test is already failing: a second panic would abort the run.
            eprintln!("{message} (not panicking: the test is already failing)");
        } else {
            panic!("{message}");
        }
    }
}

/// How many times [`scoped_containers`] asks a list that failed on the
/// engine's side.
const LIST_ATTEMPTS: u32 = 10;

/// Ids of the containers whose owner label or test-run label starts with
/// `prefix`, or why the daemon could not list them.
///
/// Podman answers a list `500` ("read /proc/PID/cgroup: no such process")
/// when a container of another test ends while it reads it: that answer is
/// asked again, up to [`LIST_ATTEMPTS`] times, 100 ms apart.
async fn scoped_containers(client: &Docker, prefix: &str) -> Result<Vec<String>, String> {
    let options = ListContainersOptionsBuilder::new().all(true).build();
    let mut attempt = 1;
    let all = loop {
        match billet_docker::dialect::list_containers(client, Some(options.clone())).await {
            Ok(all) => break all,
            Err(bollard::errors::Error::DockerResponseServerError { status_code, .. })
                if status_code >= 500 && attempt < LIST_ATTEMPTS =>
            {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(format!("list containers (attempt {attempt}): {e}")),
        }
    };
    Ok(all
        .into_iter()
        .filter(|c| {
            let labels = c.labels.clone().unwrap_or_default();
            [OWNER_LABEL, TEST_RUN_LABEL]
                .iter()
                .any(|key| labels.get(*key).is_some_and(|v| v.starts_with(prefix)))
        })
        .filter_map(|c| c.id)
        .collect())
}

/// Creates (not starts) a container by hand with these labels (plus this
/// scope's test-run label) and this name, from the test image; its full id.
pub fn create_by_hand(
    scope: &Scope,
    name: Option<&str>,
    labels: &[(&str, &str)],
    command: &[&str],
) -> String {
    let mut all: HashMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    all.insert(TEST_RUN_LABEL.to_owned(), scope.run_id().to_owned());
    let name = name.map(str::to_owned);
    let command: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
    block(async move {
        let client = raw_client();
        let mut options = bollard::query_parameters::CreateContainerOptionsBuilder::new();
        if let Some(name) = &name {
            options = options.name(name);
        }
        let body = bollard::models::ContainerCreateBody {
            image: Some(TEST_IMAGE.to_owned()),
            cmd: Some(command),
            labels: Some(all),
            host_config: Some(bollard::models::HostConfig {
                network_mode: Some("none".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        };
        client
            .create_container(Some(options.build()), body)
            .await
            .expect("create a container by hand")
            .id
    })
}

/// Whether the daemon holds a container with exactly this id.
pub fn exists(id: &str) -> bool {
    let id = id.to_owned();
    block(async move {
        billet_docker::dialect::inspect_container(&raw_client(), &id)
            .await
            .is_ok_and(|c| c.id.as_deref() == Some(id.as_str()))
    })
}

/// What the proxy does with the requests it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Pass every request through to the daemon.
    Open,
    /// Pass this many more requests, then hang every later one.
    Allow(u32),
    /// Accept connections and never answer.
    Hung,
    /// Pass `pass` more requests; deliver the next one to the daemon and lose
    /// its answer (all of it, or all but the first `keep` bytes of its body);
    /// then behave as [`SocketProxy::cut`] until restored.
    LoseAnswer { pass: u32, keep: Option<usize> },
}

/// What one request is to meet.
enum Fate {
    Pass,
    Hang,
    Lose { keep: Option<usize> },
}

struct Shared {
    upstream: PathBuf,
    mode: Mutex<Mode>,
    connections: Mutex<Vec<AbortHandle>>,
    acceptor: Mutex<Option<AbortHandle>>,
    /// Requests that reached the daemon through this proxy.
    delivered: AtomicU64,
    /// Requests sent on to the daemon whose answer has not come back yet,
    /// whether or not their caller still waits for it.
    in_flight: Arc<AtomicU64>,
    /// `create container` requests sent on and not yet answered, and the
    /// most there were at once.
    creates: Arc<(AtomicU64, AtomicU64)>,
    /// How long each request waits in the proxy before it is forwarded.
    delay: Mutex<Duration>,
    /// How many of the next `inspect container` requests the proxy answers
    /// itself, with a `500` and this message, never forwarding them.
    inspect_refusals: Mutex<(u32, &'static str)>,
    /// The same for the next `remove container` requests.
    removal_refusals: Mutex<(u32, &'static str)>,
}

impl Shared {
    /// Decides the fate of the next request, and counts it down.
    fn next_fate(&self) -> Fate {
        let mut mode = self.mode.lock();
        match *mode {
            Mode::Open => Fate::Pass,
            Mode::Allow(0) | Mode::Hung => Fate::Hang,
            Mode::Allow(n) => {
                *mode = Mode::Allow(n - 1);
                Fate::Pass
            }
            Mode::LoseAnswer { pass: 0, keep } => {
                // Once lost, nothing passes until `restore`.
                *mode = Mode::Hung;
                Fate::Lose { keep }
            }
            Mode::LoseAnswer { pass, keep } => {
                *mode = Mode::LoseAnswer {
                    pass: pass - 1,
                    keep,
                };
                Fate::Pass
            }
        }
    }

    /// The message to refuse `request` with, when it is an `inspect
    /// container` or a `remove container` and refusals of its kind are left
    /// (one is counted down).
    fn refused(&self, request: &hyper::Request<hyper::body::Incoming>) -> Option<&'static str> {
        let path = request.uri().path();
        let inspect = request.method() == hyper::Method::GET
            && path.contains("/containers/")
            && path.ends_with("/json")
            && !path.ends_with("/containers/json");
        let removal = request.method() == hyper::Method::DELETE
            && path.contains("/containers/")
            && !path.trim_end_matches('/').ends_with("/containers");
        let mut refusals = if inspect {
            self.inspect_refusals.lock()
        } else if removal {
            self.removal_refusals.lock()
        } else {
            return None;
        };
        if refusals.0 == 0 {
            return None;
        }
        refusals.0 -= 1;
        Some(refusals.1)
    }

    /// As [`SocketProxy::cut`], from inside the proxy: stop accepting, close
    /// every open connection (this one too, once its task next yields).
    fn cut_now(&self) {
        if let Some(acceptor) = self.acceptor.lock().take() {
            acceptor.abort();
        }
        for connection in self.connections.lock().drain(..) {
            connection.abort();
        }
    }
}

type ProxyBody = http_body_util::combinators::BoxBody<bytes::Bytes, BoxError>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sends one request to the daemon on a connection of its own, in a task of
/// its own: once sent, it runs until the daemon's answer comes back even if
/// the caller's connection is cut meanwhile (the daemon acts on it either
/// way), and is counted in flight until then.
async fn forward(
    shared: &Shared,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<hyper::body::Incoming>, BoxError> {
    let upstream = shared.upstream.clone();
    let in_flight = Arc::clone(&shared.in_flight);
    in_flight.fetch_add(1, Ordering::SeqCst);
    let create = request.uri().path().ends_with("/containers/create");
    let creates = Arc::clone(&shared.creates);
    if create {
        let now = creates.0.fetch_add(1, Ordering::SeqCst) + 1;
        creates.1.fetch_max(now, Ordering::SeqCst);
    }
    let sent = tokio::spawn(async move {
        let answer = send(&upstream, request).await;
        in_flight.fetch_sub(1, Ordering::SeqCst);
        if create {
            creates.0.fetch_sub(1, Ordering::SeqCst);
        }
        answer
    });
    sent.await?
}

/// Sends one request to the daemon on a connection of its own.
async fn send(
    upstream: &Path,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<hyper::body::Incoming>, BoxError> {
    let stream = tokio::net::UnixStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender.send_request(request).await?)
}

/// What the proxy does with one request from a provider.
async fn serve(
    shared: Arc<Shared>,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<ProxyBody>, BoxError> {
    use http_body_util::BodyExt;
    let delay = *shared.delay.lock();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(message) = shared.refused(&request) {
        let body = serde_json::json!({ "message": message, "response": 500 }).to_string();
        let body = http_body_util::Full::new(bytes::Bytes::from(body))
            .map_err(BoxError::from)
            .boxed();
        let answer = hyper::Response::builder()
            .status(500)
            .header("content-type", "application/json")
            .body(body)?;
        return Ok(answer);
    }
    match shared.next_fate() {
        Fate::Hang => std::future::pending().await,
        Fate::Pass => {
            let answer = forward(&shared, request).await?;
            shared.delivered.fetch_add(1, Ordering::SeqCst);
            Ok(answer.map(|body| body.map_err(BoxError::from).boxed()))
        }
        Fate::Lose { keep } => {
            // The daemon gets the request and answers it in full (so whatever
            // it does, it has done); the caller gets none of it, or a head
            // and the first `keep` bytes of the body, then a closed
            // connection.
            let answer = forward(&shared, request).await;
            shared.delivered.fetch_add(1, Ordering::SeqCst);
            let (head, body) = answer?.into_parts();
            let whole = body.collect().await?.to_bytes();
            match keep {
                None => {
                    shared.cut_now();
                    Err("the proxy lost this answer".into())
                }
                Some(keep) => {
                    let part = whole.slice(..keep.min(whole.len()));
                    let cut = Arc::clone(&shared);
                    // The head and the part are written out before the
                    // connection breaks (hyper flushes while the rest waits).
                    let frames = futures::stream::iter([Ok(hyper::body::Frame::data(part))]).chain(
                        futures::stream::once(async move {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            cut.cut_now();
                            Err(BoxError::from("the proxy cut this answer short"))
                        }),
                    );
                    let body = BodyExt::boxed(http_body_util::StreamBody::new(frames));
                    Ok(hyper::Response::from_parts(head, body))
                }
            }
        }
    }
}

/// A unix-socket proxy between providers and the daemon, owned by a test.
///
/// It speaks HTTP/1 on both sides, so it sees each request, also when a client
/// sends several on one kept-alive connection (each is forwarded to the
/// daemon on a connection of its own). [`cut`](SocketProxy::cut) stops
/// accepting (connects are refused) and drops every open connection, as a
/// daemon that died would; [`hang`](SocketProxy::hang) accepts and never
/// answers, as a hung daemon would; [`allow`](SocketProxy::allow) passes a
/// number of requests, then hangs; [`lose_answer_after`](SocketProxy::lose_answer_after)
/// passes a number of requests, delivers the next and loses its answer, then
/// is cut; [`restore`](SocketProxy::restore) passes everything through again.
pub struct SocketProxy {
    dir: PathBuf,
    path: PathBuf,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl SocketProxy {
    /// A proxy to the daemon's socket, open, on a fresh socket path.
    pub fn start() -> SocketProxy {
        SocketProxy::to(daemon_socket())
    }

    /// A proxy to the engine at `upstream`, open, on a fresh socket path.
    pub fn to(upstream: PathBuf) -> SocketProxy {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "billet-proxy-{}-{n}",
            run_prefix().trim_start_matches("billet-test-")
        ));
        std::fs::create_dir_all(&dir).expect("a proxy directory");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a proxy runtime");
        let proxy = SocketProxy {
            path: dir.join("docker.sock"),
            dir,
            shared: Arc::new(Shared {
                upstream,
                mode: Mutex::new(Mode::Open),
                connections: Mutex::new(Vec::new()),
                acceptor: Mutex::new(None),
                delivered: AtomicU64::new(0),
                in_flight: Arc::default(),
                creates: Arc::default(),
                delay: Mutex::new(Duration::ZERO),
                inspect_refusals: Mutex::new((0, "")),
                removal_refusals: Mutex::new((0, "")),
            }),
            runtime: Some(runtime),
        };
        proxy.listen();
        proxy
    }

    /// The endpoint a provider is built with to go through this proxy.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// The proxy's socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many requests have reached the daemon through this proxy, answered
    /// or not.
    pub fn delivered(&self) -> u64 {
        self.shared.delivered.load(Ordering::SeqCst)
    }

    /// The most `create container` requests that were at the daemon at
    /// once through this proxy (sent on, not yet answered).
    pub fn peak_creates(&self) -> u64 {
        self.shared.creates.1.load(Ordering::SeqCst)
    }

    /// Whether no request it sent on to the daemon still waits for its
    /// answer: once idle, the daemon has acted on everything the proxy
    /// delivered, including requests whose answers were lost or whose caller
    /// gave up.
    pub fn is_idle(&self) -> bool {
        self.shared.in_flight.load(Ordering::SeqCst) == 0
    }

    fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime.as_ref().expect("a running proxy").handle()
    }

    fn listen(&self) {
        let _ = std::fs::remove_file(&self.path);
        let listener =
            std::os::unix::net::UnixListener::bind(&self.path).expect("bind the proxy socket");
        listener.set_nonblocking(true).expect("non-blocking");
        let shared = Arc::clone(&self.shared);
        let handle = self.handle().clone();
        let acceptor = self.handle().spawn(async move {
            let listener = tokio::net::UnixListener::from_std(listener).expect("a tokio listener");
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    continue;
                };
                let for_requests = Arc::clone(&shared);
                let task = handle.spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        serve(Arc::clone(&for_requests), request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(conn), service)
                        .await;
                });
                let mut connections = shared.connections.lock();
                connections.retain(|c| !c.is_finished());
                connections.push(task.abort_handle());
            }
        });
        *self.shared.acceptor.lock() = Some(acceptor.abort_handle());
    }

    fn drop_connections(&self) {
        for connection in self.shared.connections.lock().drain(..) {
            connection.abort();
        }
    }

    /// Waits until connects are refused (the aborted acceptor's listener is
    /// closed once its task is dropped).
    fn await_refusal(&self) {
        for _ in 0..200 {
            if std::os::unix::net::UnixStream::connect(&self.path).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!(
            "the proxy at {} still accepts after a cut",
            self.path.display()
        );
    }

    /// The daemon is gone: connects are refused from now on, and every open
    /// connection is closed.
    pub fn cut(&self) {
        self.shared.cut_now();
        self.await_refusal();
    }

    /// The daemon hangs: connections are accepted and never answered, and
    /// every open connection is closed.
    pub fn hang(&self) {
        *self.shared.mode.lock() = Mode::Hung;
        self.drop_connections();
        if self.shared.acceptor.lock().is_none() {
            self.listen();
        }
    }

    /// Passes `n` more requests through, then hangs every later one.
    pub fn allow(&self, n: u32) {
        *self.shared.mode.lock() = Mode::Allow(n);
        if self.shared.acceptor.lock().is_none() {
            self.listen();
        }
    }

    /// A fault in the middle of a call: the next `n` requests go through with
    /// their answers; the one after is delivered to the daemon (which acts on
    /// it and answers) and its answer is lost: the caller's connection is
    /// closed before any byte of it. From then on the proxy is as
    /// [`cut`](SocketProxy::cut) until [`restore`](SocketProxy::restore).
    pub fn lose_answer_after(&self, n: u32) {
        *self.shared.mode.lock() = Mode::LoseAnswer {
            pass: n,
            keep: None,
        };
        if self.shared.acceptor.lock().is_none() {
            self.listen();
        }
    }

    /// As [`lose_answer_after`](SocketProxy::lose_answer_after), but the
    /// caller gets the answer's head and the first `bytes` bytes of its body
    /// before the connection is closed.
    pub fn cut_answer_after(&self, n: u32, bytes: usize) {
        *self.shared.mode.lock() = Mode::LoseAnswer {
            pass: n,
            keep: Some(bytes),
        };
        if self.shared.acceptor.lock().is_none() {
            self.listen();
        }
    }

    /// Whether the proxy is down after losing an answer (or a cut), as the
    /// daemon being gone.
    pub fn is_cut(&self) -> bool {
        self.shared.acceptor.lock().is_none()
    }

    /// A slow daemon: every later request waits `delay` in the proxy before
    /// it is forwarded (whatever else the proxy does with it), until
    /// [`restore`](SocketProxy::restore).
    pub fn slow(&self, delay: Duration) {
        *self.shared.delay.lock() = delay;
    }

    /// The next `n` `inspect container` requests are answered by the proxy
    /// with a `500` carrying `message`, as the daemon answers one that fails;
    /// they never reach the daemon (and are not counted as delivered).
    pub fn refuse_inspects(&self, n: u32, message: &'static str) {
        *self.shared.inspect_refusals.lock() = (n, message);
    }

    /// The next `n` `remove container` requests are answered by the proxy
    /// with a `500` carrying `message`, never reaching the daemon.
    pub fn refuse_removals(&self, n: u32, message: &'static str) {
        *self.shared.removal_refusals.lock() = (n, message);
    }

    /// How many of the refusals [`refuse_removals`](SocketProxy::refuse_removals)
    /// set are not yet used.
    pub fn removal_refusals_left(&self) -> u32 {
        self.shared.removal_refusals.lock().0
    }

    /// How many of the refusals [`refuse_inspects`](SocketProxy::refuse_inspects)
    /// set are not yet used.
    pub fn inspect_refusals_left(&self) -> u32 {
        self.shared.inspect_refusals.lock().0
    }

    /// The daemon is back: every request passes through again.
    pub fn restore(&self) {
        *self.shared.mode.lock() = Mode::Open;
        *self.shared.delay.lock() = Duration::ZERO;
        *self.shared.inspect_refusals.lock() = (0, "");
        *self.shared.removal_refusals.lock() = (0, "");
        self.drop_connections();
        if self.shared.acceptor.lock().is_none() {
            self.listen();
        }
    }
}

impl Drop for SocketProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
pub mod tls;
