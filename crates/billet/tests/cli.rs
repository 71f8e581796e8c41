//! The built `billet` binary where no docker daemon is needed: `validate`,
//! what stops `serve` at start (exit status 2), JSON logs, a daemon that is
//! not there (degraded, nothing lost), and SIGTERM (L1-L3, L6-L8, F3).
//!
//! Each docker pool here points at a socket that does not exist, so no test
//! in this file can touch a daemon.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BINARY: &str = env!("CARGO_BIN_EXE_billet");

/// A docker pool on a socket nobody listens on.
fn nowhere(dir: &Path) -> String {
    format!(
        "deployment:
  id: cli-test
providers:
  - name: linux
    kind: docker
    capacity: 2
    docker:
      image: billet-test:latest
      endpoint: unix://{}/no-daemon.sock
routing:
  default_kind: docker
",
        dir.display()
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn run(args: &[&str]) -> (ExitStatus, String, String) {
    let output = Command::new(BINARY).args(args).output().unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `billet serve` child, killed if the test ends first.
struct Server {
    child: Child,
    port: u16,
    token: String,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_listening(dir, "127.0.0.1", extra)
    }

    /// Serves on `host` (its port a free one), reached over the loopback.
    fn start_listening(dir: &Path, host: &str, extra: &[&str]) -> Server {
        let config = write(dir, "billet.yaml", &nowhere(dir));
        let port = free_port();
        let listen = format!("{host}:{port}");
        let state = dir.join("state");
        let mut args = vec![
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--listen",
            &listen,
            "--reconcile-every",
            "200ms",
            "--call-timeout",
            "1s",
        ];
        args.extend_from_slice(extra);
        let mut child = Command::new(BINARY)
            .args(&args)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let (lines, stderr) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "serve never listened");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("serve exited early: {status}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let token = std::fs::read_to_string(state.join("token"))
            .unwrap()
            .trim()
            .to_owned();
        Server {
            child,
            port,
            token,
            stderr,
        }
    }

    /// One HTTP/1.1 request over a fresh connection: status and body.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.token,
            body.len()
        )
        .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        (status, body)
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the exit, within `bound`.
    fn wait(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "serve did not exit within {bound:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

// L1, F3: `validate` answers the summary, or the error with its location
// and exit status 2; the simulated kind is refused there too.
#[test]
fn l1_validate_checks_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.yaml", &nowhere(dir.path()));
    let (status, stdout, _) = run(&["validate", good.to_str().unwrap()]);
    assert!(status.success());
    assert!(
        stdout.starts_with("ok: deployment \"cli-test\""),
        "{stdout}"
    );
    let simulated = write(
        dir.path(),
        "simulated.yaml",
        &nowhere(dir.path()).replace("kind: docker", "kind: simulated"),
    );
    for args in [
        vec!["validate", simulated.to_str().unwrap()],
        vec!["serve", "--config", simulated.to_str().unwrap()],
    ] {
        let (status, _, stderr) = run(&args);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        let located = format!("{}:5:11", simulated.display());
        assert!(stderr.contains(&located), "{args:?}: {stderr}");
        assert!(stderr.contains("simulated"), "{stderr}");
    }
    let (status, _, stderr) = run(&[
        "validate",
        dir.path().join("missing.yaml").to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
}

// L2: a kind this release cannot build stops `serve` at start, naming the
// provider and the kind, exit status 2.
#[test]
fn l2_serve_refuses_kinds_it_cannot_build() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(
        dir.path(),
        "tart.yaml",
        &nowhere(dir.path()).replace(
            "routing:",
            "  - {name: macs, kind: tart, capacity: 1, tart: {image: m}}\nrouting:",
        ),
    );
    let state = dir.path().join("state");
    let (status, _, stderr) = run(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("\"macs\"") && stderr.contains("tart"),
        "{stderr}"
    );
    assert!(
        !state.exists(),
        "nothing is made before the pools are built"
    );
}

/// `billet serve` with `args`, which must stop at start: its status and
/// stderr, or a failure (not a hang) when it serves instead.
fn refused_start(args: &[&str]) -> (ExitStatus, String) {
    let mut child = Command::new(BINARY)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve {args:?} served rather than stop at start");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status, stderr)
}

// L21: a store holding a job running on a pool the configuration lost stops
// the start (exit 2) naming the pool and the job, and changes nothing; with
// `--forget-pool` the job ends failed saying why; a configuration naming
// another deployment than the store was first started for stops the start.
#[test]
fn l21_a_lost_pool_or_a_changed_deployment_stops_the_start() {
    use billet::record::{Change, JobRecord, NewJob};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    {
        let (mut store, _) = billet::Store::open(&state).unwrap();
        let job = NewJob {
            command: vec!["sleep".into(), "600".into()],
            labels: vec![],
            trust: billet_provider::TrustClass::Trusted,
            timeout: None,
            key: None,
            pinned: None,
        };
        let now = std::time::SystemTime::now();
        store
            .commit(&[
                Change::Accepted(Box::new(JobRecord::accepted(1, job, now))),
                Change::Placed {
                    id: 1,
                    pool: "old".into(),
                    at: now,
                },
            ])
            .unwrap();
    }
    let config = write(dir.path(), "billet.yaml", &nowhere(dir.path()));
    let serve = |extra: &[&str], config: &Path| {
        let mut args = vec![
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        refused_start(&args)
    };
    let (status, stderr) = serve(&[], &config);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`old` (jobs 1)"), "{stderr}");
    let (status, stderr) = serve(&["--forget-pool", "linux"], &config);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--forget-pool linux"), "{stderr}");

    let server = Server::start(dir.path(), &["--forget-pool", "old"]);
    let (code, body) = server.request("GET", "/v1/jobs/1", "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(r#""state":"failed""#), "{body}");
    assert!(body.contains("--forget-pool old"), "{body}");
    drop(server);

    let other = write(
        dir.path(),
        "other.yaml",
        &nowhere(dir.path()).replace("id: cli-test", "id: cli-other"),
    );
    let (status, stderr) = serve(&[], &other);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("belongs to deployment `cli-test`") && stderr.contains("`cli-other`"),
        "{stderr}"
    );
}

// D17: `validate` refuses plain tcp:// naming the place and the way out;
// `serve` with a pool whose tls file is missing stops at start (exit 2)
// naming the pool and the file, before anything is made.
#[test]
fn d17_plain_tcp_and_a_missing_tls_file_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let far = |docker: &str| {
        nowhere(dir.path()).replace(
            "routing:",
            &format!("  - {{name: far, kind: docker, capacity: 1, docker: {{image: i, {docker}}}}}\nrouting:"),
        )
    };
    let plain = write(
        dir.path(),
        "plain.yaml",
        &far("endpoint: 'tcp://10.0.0.5:2375'"),
    );
    let (status, _, stderr) = run(&["validate", plain.to_str().unwrap()]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("providers[1].docker.endpoint")
            && stderr.contains("\"far\"")
            && stderr.contains("insecure: true"),
        "{stderr}"
    );

    let missing = write(
        dir.path(),
        "missing.yaml",
        &far(
            "endpoint: 'tcp://10.0.0.5:2376', tls: {ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem}",
        ),
    );
    let (status, _, _) = run(&["validate", missing.to_str().unwrap()]);
    assert!(
        status.success(),
        "the form is right: validate reads no file"
    );
    let state = dir.path().join("state");
    let (status, _, stderr) = run(&[
        "serve",
        "--config",
        missing.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    let ca = dir.path().join("certs/ca.pem");
    assert!(
        stderr.contains("\"far\"") && stderr.contains(&ca.display().to_string()),
        "{stderr}"
    );
    assert!(
        !state.exists(),
        "nothing is made before the pools are built"
    );
}

// L6: a corrupt store stops `serve` at start with an error naming the file,
// exit status 2, and the file is left byte for byte as it was.
#[test]
fn l6_a_corrupt_store_stops_the_start_and_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "billet.yaml", &nowhere(dir.path()));
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    // The operator's own directory, private as billet asks (L16).
    #[cfg(unix)]
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let database = state.join("billet.db");
    let garbage: Vec<u8> = (0..20_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(&database, &garbage).unwrap();
    let (status, _, stderr) = run(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&database.display().to_string()), "{stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
    assert_eq!(std::fs::read(&database).unwrap(), garbage);
}

// L3, L8, L4, B6: with `--log-format json` every line of stderr is one JSON
// object; the token file is made 0600; a daemon that is not there makes the
// pool unreadable (503 degraded), accepted jobs wait, nothing is lost.
#[test]
fn l8_json_logs_and_an_absent_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--log-format", "json"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(dir.path().join("state/token")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = server.request("GET", "/healthz", "");
        if status == 503 {
            assert_eq!(body, r#"{"status":"degraded","unreadable":["linux"]}"#);
            break;
        }
        assert!(Instant::now() < deadline, "never degraded: {status} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = server.request(
        "POST",
        "/v1/jobs",
        r#"{"command": ["true"], "trust": "trusted"}"#,
    );
    assert_eq!(status, 201, "{body}");
    std::thread::sleep(Duration::from_millis(500));
    let (status, body) = server.request("GET", "/v1/jobs/1", "");
    assert_eq!(status, 200);
    assert!(
        body.contains(r#""state":"queued""#),
        "waits for an inventory: {body}"
    );
    server.signal("TERM");
    let status = server.wait(Duration::from_secs(20));
    assert!(status.success(), "{status}");
    let lines = server.log();
    assert!(lines.len() >= 3, "{lines:?}");
    for line in &lines {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not one JSON object: {line:?}: {e}"));
        assert!(value.is_object(), "{line}");
        assert!(
            value["level"].is_string() && value["timestamp"].is_string(),
            "{line}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains("listening on 127.0.0.1:")),
        "{lines:?}"
    );
    // The next start reads the job back, still queued.
    let server = Server::start(dir.path(), &[]);
    let (status, body) = server.request("GET", "/v1/jobs?state=queued", "");
    assert_eq!(status, 200);
    assert!(body.contains(r#""id":1"#), "{body}");
}

// L7: SIGINT and SIGHUP, like SIGTERM, stop the service in order: exit
// status 0 within a bound; text logs say so (a hang-up never kills it
// without its stop).
#[test]
fn l7_sigint_and_sighup_stop_in_order() {
    for signal in ["INT", "HUP"] {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Server::start(dir.path(), &[]);
        let (status, _) = server.request("GET", "/v1/pools", "");
        assert_eq!(status, 200);
        server.signal(signal);
        let status = server.wait(Duration::from_secs(20));
        assert!(status.success(), "SIG{signal}: {status}");
        let lines = server.log();
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("SIG{signal}: shutting down"))),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l.contains("stopped")), "{lines:?}");
    }
}

// L17: an address off the loopback stops the start (exit 2) saying why and
// what to write, unless --allow-plain-http says so; then it serves, and warns.
#[test]
fn l17_a_listen_off_the_loopback_needs_the_operators_word() {
    let dir = tempfile::tempdir().unwrap();
    let config = write(dir.path(), "billet.yaml", &nowhere(dir.path()));
    let state = dir.path().join("state");
    let (status, _, stderr) = run(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--listen 0.0.0.0:0 is off the loopback")
            && stderr.contains("--allow-plain-http"),
        "{stderr}"
    );
    assert!(!state.exists(), "refused before anything is made");
    let mut server = Server::start_listening(dir.path(), "0.0.0.0", &["--allow-plain-http"]);
    let (status, _) = server.request("GET", "/healthz", "");
    assert!(status == 200 || status == 503, "it serves: {status}");
    server.signal("TERM");
    assert!(server.wait(Duration::from_secs(20)).success());
    let lines = server.log();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("WARN") && l.contains("plain HTTP")),
        "{lines:?}"
    );
}
