//! Mutual TLS for the tests (D17): certificates made offline with rcgen
//! ([`Pki`]), and docker daemons of the test's own, started on loopback with
//! `--tlsverify` ([`TlsDaemon`]), stopped and removed when the test ends.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use billet_docker::{ClientTls, TlsFiles};
use parking_lot::Mutex;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::{REQUIRED_VAR, Scope, block, client_on, ensure_test_image_on};

/// A certificate authority made for one test, with its key in memory.
pub struct Ca {
    /// The CA certificate, PEM.
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("a CA certificate");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A daemon's certificate for 127.0.0.1 (and `localhost`), and its key,
    /// both PEM.
    pub fn server(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("a server key");
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().expect("an address")));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate and its key, both PEM.
    pub fn client(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("a client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a client certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes this CA's certificate and a client certificate and key it
    /// signed into `dir` (`ca.pem`, `cert.pem`, `key.pem`), and answers their
    /// paths.
    pub fn client_files(&self, dir: &Path) -> TlsFiles {
        let (cert, key) = self.client("billet");
        write_files(dir, &self.pem, &cert, &key)
    }
}

/// Writes `ca`, `cert` and `key` as `ca.pem`, `cert.pem` and `key.pem` in
/// `dir` (made if missing), the key mode 0600.
pub fn write_files(dir: &Path, ca: &str, cert: &str, key: &str) -> TlsFiles {
    std::fs::create_dir_all(dir).expect("the certificates' directory");
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.ca, ca).expect("write ca.pem");
    std::fs::write(&files.cert, cert).expect("write cert.pem");
    std::fs::write(&files.key, key).expect("write key.pem");
    // The key its owner's alone, as billet asks of a client key (D17).
    std::fs::set_permissions(
        &files.key,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("make key.pem private");
    files
}

/// Whether this machine can start a docker daemon of the test's own: a
/// `dockerd` and `ip` (iproute2) on the path, run as root. With [`REQUIRED_VAR`] set, a machine
/// that cannot fails the test instead of answering `false`.
pub fn can_start_daemons(test: &str) -> bool {
    let runs = |program: &str, arg: &str| {
        Command::new(program)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    let dockerd = runs("dockerd", "--version");
    let ip = runs("ip", "-V");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if dockerd && ip && root {
        return true;
    }
    let required = std::env::var(REQUIRED_VAR).is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{REQUIRED_VAR}=1 but this machine cannot start a docker daemon of its own (dockerd on the path: {dockerd}; `ip`: {ip}; root: {root})"
    );
    eprintln!(
        "skipped {test}: starting a TLS daemon needs dockerd, ip and root; run `bash .ci/run`"
    );
    false
}

/// A docker daemon of the test's own: its own data and exec roots, pid file
/// and containerd namespaces under a temporary directory, a bridge interface
/// of its own (never the host's `docker0`) and no iptables rules (its
/// containers run with network `none`), listening on a
/// unix socket of its own (for the test's setup and cleanup) and on
/// `tcp://127.0.0.1:PORT` with `--tlsverify` (clients must present a
/// certificate `ca` signed). The test image is imported before it is handed
/// over. Dropping it removes its containers, stops it and waits for it.
pub struct TlsDaemon {
    /// `tcp://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Its unix socket.
    pub socket: PathBuf,
    child: Child,
    dir: tempfile::TempDir,
    certs: Option<tempfile::TempDir>,
    /// The bridge interface made for it, removed when it is dropped.
    bridge: String,
    args: Vec<String>,
}

impl TlsDaemon {
    /// Starts a daemon whose certificate `ca` signed and that accepts only
    /// clients `ca` signed. Panics (with its log) if it does not answer
    /// within a minute.
    pub fn start(name: &str, ca: &Ca) -> TlsDaemon {
        let certs = tempfile::Builder::new()
            .prefix(&format!("billet-dockerd-{name}-certs-"))
            .tempdir_in("/tmp")
            .expect("a directory for the daemon's certificates");
        let (cert, key) = ca.server(name);
        let files = write_files(certs.path(), &ca.pem, &cert, &key);
        let port = free_port();
        let flags = vec![
            "--tlsverify".to_owned(),
            format!("--tlscacert={}", files.ca.display()),
            format!("--tlscert={}", files.cert.display()),
            format!("--tlskey={}", files.key.display()),
            format!("--host=tcp://127.0.0.1:{port}"),
        ];
        let mut daemon = TlsDaemon::with_flags(name, &flags, port);
        daemon.certs = Some(certs);
        daemon
    }

    /// Starts a daemon with `flags` (its TLS flags and its
    /// `--host=tcp://127.0.0.1:PORT`, as an operator would give them), on
    /// roots, a socket, a bridge and containerd namespaces of its own, with
    /// no iptables rules.
    pub fn with_flags(name: &str, flags: &[String], port: u16) -> TlsDaemon {
        let dir = tempfile::Builder::new()
            .prefix(&format!("billet-dockerd-{name}-"))
            .tempdir_in("/tmp")
            .expect("a directory for the daemon");
        let socket = dir.path().join("docker.sock");
        let tag = format!("billet-test-{}-{port}", std::process::id());
        // A bridge of its own: `--bridge=none` would make dockerd delete the
        // host's `docker0`, the local daemon's bridge.
        let bridge = format!("billet{port}");
        let subnet = format!("10.211.{}.1/24", port % 250);
        for args in [
            vec!["link", "add", bridge.as_str(), "type", "bridge"],
            vec!["addr", "add", subnet.as_str(), "dev", bridge.as_str()],
            vec!["link", "set", bridge.as_str(), "up"],
        ] {
            let status = Command::new("ip").args(&args).status().expect("run ip");
            assert!(status.success(), "`ip {}` failed", args.join(" "));
        }
        let path = |p: &str| dir.path().join(p).to_string_lossy().into_owned();
        let mut args: Vec<String> = vec![
            format!("--data-root={}", path("data")),
            format!("--exec-root={}", path("exec")),
            format!("--pidfile={}", path("dockerd.pid")),
            format!("--host=unix://{}", socket.display()),
            format!("--bridge={bridge}"),
            "--iptables=false".to_owned(),
            "--ip-masq=false".to_owned(),
            format!("--containerd-namespace={tag}"),
            format!("--containerd-plugins-namespace={tag}-plugins"),
        ];
        args.extend(flags.iter().cloned());
        let child = spawn(dir.path(), &args);
        let mut daemon = TlsDaemon {
            endpoint: format!("tcp://127.0.0.1:{port}"),
            socket,
            child,
            dir,
            certs: None,
            bridge,
            args,
        };
        daemon.wait_ready();
        ensure_test_image_on(&daemon.socket);
        daemon
    }

    /// A cleanup scope on this daemon (through its unix socket).
    pub fn scope(&self, test: &str) -> Scope {
        Scope::on_socket(test, self.socket.clone())
    }

    /// Freezes the daemon (`SIGSTOP`): connections are accepted by the
    /// kernel but nothing answers, as a hung or unreachable host. Its
    /// containers go on running.
    pub fn freeze(&self) {
        signal("STOP", self.child.id());
    }

    /// Thaws a frozen daemon (`SIGCONT`).
    pub fn thaw(&self) {
        signal("CONT", self.child.id());
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default()
    }

    /// Stops the daemon (`SIGTERM`, then `SIGKILL` after 30 s) and waits.
    fn stop(&mut self) {
        signal("CONT", self.child.id());
        signal("TERM", self.child.id());
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the daemon as [`Drop`] does and starts it again on the same
    /// roots, socket and port: its containers are those it had.
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn(self.dir.path(), &self.args);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if self.socket.exists()
                && let Ok(client) = client_on(&self.socket)
                && block(async move { client.ping().await.is_ok() })
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "dockerd exited ({status}) before answering; its log:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < until,
                "dockerd did not answer within 60 s; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for TlsDaemon {
    fn drop(&mut self) {
        signal("CONT", self.child.id());
        // Whatever the test left: the daemon is its own, so all of it.
        if let Ok(client) = client_on(&self.socket) {
            block(async move {
                use bollard::query_parameters::{
                    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
                };
                let all = ListContainersOptionsBuilder::default().all(true).build();
                let listed = tokio::time::timeout(
                    Duration::from_secs(20),
                    client.list_containers(Some(all)),
                )
                .await;
                if let Ok(Ok(containers)) = listed {
                    for id in containers.into_iter().filter_map(|c| c.id) {
                        let force = RemoveContainerOptionsBuilder::default().force(true).build();
                        let _ = tokio::time::timeout(
                            Duration::from_secs(20),
                            client.remove_container(&id, Some(force)),
                        )
                        .await;
                    }
                }
            });
        }
        self.stop();
        let _ = Command::new("ip")
            .args(["link", "delete", self.bridge.as_str()])
            .status();
    }
}

/// Starts `dockerd` with `args`, its output appended to `dir/dockerd.log`.
fn spawn(dir: &Path, args: &[String]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("dockerd.log"))
        .expect("the daemon's log");
    Command::new("dockerd")
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("the log, twice"))
        .stderr(log)
        .spawn()
        .expect("start dockerd")
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

fn signal(name: &str, pid: u32) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status();
}

/// Mutual TLS to a daemon `ca` signed, with a client certificate it signed,
/// the files written in `dir`.
pub fn client_tls(ca: &Ca, dir: &Path) -> ClientTls {
    ClientTls::load(ca.client_files(dir)).expect("the test's TLS files load")
}

/// A TCP proxy on loopback in front of a TLS daemon, owned by a test. TLS
/// passes through it untouched (it cannot read the requests, so it counts
/// connections, not requests). [`cut`](TcpProxy::cut) closes every open
/// connection and closes each new one at once, as a daemon host that went
/// away would; [`restore`](TcpProxy::restore) passes connections again.
/// [`close_kept`](TcpProxy::close_kept) closes each open connection at the
/// next bytes its client sends, as a daemon that dropped an idle connection
/// just as the client reused it would.
pub struct TcpProxy {
    /// `tcp://127.0.0.1:PORT`, the endpoint a provider is built with.
    pub endpoint: String,
    cut: Arc<AtomicBool>,
    /// Bumped by `close_kept`: a connection opened in an earlier epoch is
    /// closed when its client next sends.
    epoch: Arc<AtomicU64>,
    open: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl TcpProxy {
    /// A proxy to `upstream` (`tcp://HOST:PORT`), open.
    pub fn start(upstream: &str) -> TcpProxy {
        let upstream = upstream.trim_start_matches("tcp://").to_owned();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a proxy runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let port = listener.local_addr().expect("its address").port();
        let cut = Arc::new(AtomicBool::new(false));
        let epoch = Arc::new(AtomicU64::new(0));
        let open: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (cut_flag, connections) = (Arc::clone(&cut), Arc::clone(&open));
        let epochs = Arc::clone(&epoch);
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    continue;
                };
                if cut_flag.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let epochs = Arc::clone(&epochs);
                let born = epochs.load(Ordering::SeqCst);
                let task = tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let Ok(daemon) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = daemon.set_nodelay(true);
                    let (mut client_in, mut client_out) = client.split();
                    let (mut daemon_in, mut daemon_out) = daemon.into_split();
                    let up = async {
                        let mut buffer = vec![0u8; 16 * 1024];
                        loop {
                            let n = client_in.read(&mut buffer).await.unwrap_or(0);
                            if n == 0 || epochs.load(Ordering::SeqCst) != born {
                                return;
                            }
                            if daemon_out.write_all(&buffer[..n]).await.is_err() {
                                return;
                            }
                        }
                    };
                    let down = tokio::io::copy(&mut daemon_in, &mut client_out);
                    // Either direction ending closes both: the client then
                    // sees its connection closed.
                    tokio::select! {
                        () = up => {}
                        _ = down => {}
                    }
                });
                let mut open = connections.lock();
                open.retain(|handle| !handle.is_finished());
                open.push(task.abort_handle());
            }
        });
        TcpProxy {
            endpoint: format!("tcp://127.0.0.1:{port}"),
            cut,
            epoch,
            open,
            runtime: Some(runtime),
        }
    }

    /// Closes every open connection and each new one.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for handle in self.open.lock().drain(..) {
            handle.abort();
        }
    }

    /// Passes connections again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Every connection open now is closed, unanswered, when its client next
    /// sends on it; connections opened from now on pass.
    pub fn close_kept(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
