//! The README's "Run billet for real" session, run as written (L9, K6): its
//! `billet.yaml`, then every `$ ` command of its `console` blocks, in order,
//! on the docker daemon, each output compared with the README's (times,
//! container ids and the token aside). `cargo run --release -p billet --` is
//! replaced by the binary this test run built; the `^C` is a SIGINT.
//!
//! Needs the daemon and `curl`; without a daemon it says so and passes,
//! unless `BILLET_DOCKER_REQUIRED=1` (set by `.ci/run`), which makes a missing
//! daemon a failure. The image the README names is made offline from the
//! static busybox when the daemon lacks it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

#[path = "../../billet-github/tests/support/standin.rs"]
#[allow(dead_code, unreachable_pub)]
mod standin;

const BINARY: &str = env!("CARGO_BIN_EXE_billet");
const CARGO_RUN: &str = "cargo run --release -p billet --";
const DEPLOYMENT: &str = "my-ci";

/// One `console` block: each command with the lines printed after it.
type Block = Vec<(String, Vec<String>)>;

struct Session {
    yaml: String,
    /// The file of the "On podman" paragraph: the same with an endpoint.
    podman_yaml: String,
    blocks: Vec<Block>,
}

/// The text of the first ```` ```yaml ```` block after `marker` in `text`.
fn yaml_after(text: &str, marker: &str) -> String {
    let at = text.find(marker).expect("the marker") + marker.len();
    let start = text[at..].find("```yaml\n").expect("a yaml block") + at + "```yaml\n".len();
    let end = text[start..].find("```").expect("its end") + start;
    text[start..end].to_owned()
}

/// Where the README's podman paragraph names podman's socket.
const PODMAN_ENDPOINT_LINE: &str = "      endpoint: unix:///run/podman/podman.sock";

/// The README, whole.
fn readme_text() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
        .expect("read README.md")
}

/// Reads the section "Run billet for real" of the README.
fn session() -> Session {
    let readme = readme_text();
    let start = readme
        .find("## Run billet for real")
        .expect("the README has the section");
    let rest = &readme[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let section = &rest[..end];
    let yaml = yaml_after(section, "Save this as `billet.yaml`:\n");
    let podman_start = section.find("### On podman").expect("the podman paragraph");
    let podman_yaml = yaml_after(&section[podman_start..], "");
    let mut blocks = Vec::new();
    let mut rest = &section[..podman_start];
    while let Some(at) = rest.find("```console\n") {
        let body_start = at + "```console\n".len();
        let body_end = rest[body_start..].find("```").expect("a closed block") + body_start;
        let mut block: Block = Vec::new();
        for line in rest[body_start..body_end].lines() {
            if let Some(command) = line.strip_prefix("$ ") {
                block.push((command.to_owned(), Vec::new()));
            } else if let Some((_, output)) = block.last_mut() {
                output.push(line.to_owned());
            }
        }
        blocks.push(block);
        rest = &rest[body_end + 3..];
    }
    Session {
        yaml,
        podman_yaml,
        blocks,
    }
}

fn docker_ok() -> bool {
    Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes `image` from the static busybox when the daemon lacks it.
fn ensure_image(image: &str) {
    let have = Command::new("docker")
        .args(["image", "inspect", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if have {
        return;
    }
    let busybox = std::fs::read("/bin/busybox")
        .expect("a static busybox at /bin/busybox (apt-get install busybox-static)");
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(busybox.len() as u64);
    header.set_mode(0o755);
    tar.append_data(&mut header, "bin/busybox", busybox.as_slice())
        .unwrap();
    for applet in ["sh", "sleep", "echo", "true", "false", "cat", "uname"] {
        let mut link = tar::Header::new_gnu();
        link.set_entry_type(tar::EntryType::Symlink);
        link.set_size(0);
        link.set_mode(0o777);
        tar.append_link(&mut link, format!("bin/{applet}"), "busybox")
            .unwrap();
    }
    let bytes = tar.into_inner().unwrap();
    let mut import = Command::new("docker")
        .args(["import", "-", image])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    import.stdin.take().unwrap().write_all(&bytes).unwrap();
    assert!(import.wait().unwrap().success(), "docker import {image}");
}

/// Containers of the README's deployment, stopped ones included.
fn containers() -> Vec<String> {
    let output = Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=billet.owner={DEPLOYMENT}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Kills the service and removes the deployment's containers, also when the
/// test fails.
struct Cleanup(Option<Child>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
        let ids = containers();
        if !ids.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f"])
                .args(&ids)
                .output();
        }
    }
}

/// `text` with what differs from run to run masked: every run of exactly 16
/// lower-case hex digits (a store's identity, L10, in instance and container
/// names) as `<store>`, of 32 (a container name's hash, which the identity
/// changes) as `<hash>`, and of 64 (a container id) as `<id>`.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        match run.len() {
            16 => out.push_str("<store>"),
            32 => out.push_str("<hash>"),
            64 => out.push_str("<id>"),
            _ => out.push_str(run),
        }
        run.clear();
    };
    for c in text.chars() {
        if matches!(c, '0'..='9' | 'a'..='f') {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// A log line without its timestamp, what differs between runs masked.
fn normal_log(line: &str) -> String {
    let body = line.split_once(' ').map_or(line, |(_, rest)| rest).trim();
    mask(body)
}

/// Whether `actual` is what `expected` shows: JSON compared field by field,
/// times and instance ids only for being there or not; other text exactly.
fn same(expected: &[String], actual: &str) -> bool {
    let actual: Vec<&str> = actual.lines().collect();
    if expected.len() != actual.len() {
        return false;
    }
    expected.iter().zip(actual).all(|(want, got)| {
        match (
            serde_json::from_str::<Value>(want),
            serde_json::from_str::<Value>(got),
        ) {
            (Ok(Value::Object(want)), Ok(Value::Object(got))) => {
                let volatile = ["instance", "submitted_at", "started_at", "ended_at"];
                want.len() == got.len()
                    && want.iter().all(|(key, value)| match got.get(key) {
                        None => false,
                        Some(other) if volatile.contains(&key.as_str()) => {
                            value.is_null() == other.is_null()
                        }
                        Some(other) => other == value,
                    })
            }
            _ => loose(want) == loose(got),
        }
    })
}

/// A line of text as [`same`] compares it: [`mask`]ed, a time relative to
/// now (`12s ago`) as `<ago>`, and runs of blanks as one (a table's columns
/// widen with what they hold).
fn loose(line: &str) -> String {
    let words: Vec<String> = mask(line).split_whitespace().map(str::to_owned).collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for word in words {
        let relative = word == "ago"
            && out.last().is_some_and(|last| {
                last.len() > 1
                    && last[..last.len() - 1].chars().all(|c| c.is_ascii_digit())
                    && last.ends_with(['s', 'm', 'h', 'd'])
            });
        if relative {
            out.pop();
            out.push("<ago>".to_owned());
        } else {
            out.push(word);
        }
    }
    out.join(" ")
}

// The mask keeps what is the same in every run, and only that.
#[test]
fn the_mask_hides_identities_hashes_and_ids_only() {
    let id = "7648f9cd534b1d17d2cd95afe2f0d67bea80ef786a39f54cf18b3d912816ea40";
    assert_eq!(
        mask(&format!("id={id} name=0a1b2c3d4e5f6071.job-1.linux")),
        "id=<id> name=<store>.job-1.linux"
    );
    assert_eq!(
        mask("billet-0a1b2c3d4e5f6071.job-1.l-e6c5f257613d38b29b40e4496ccdea2c"),
        "billet-<store>.job-1.l-<hash>"
    );
    assert_eq!(
        mask("exit code 3, deadbeef, job-12"),
        "exit code 3, deadbeef, job-12"
    );
    // A table's times and widths aside, its words are compared.
    assert_eq!(
        loose("1   finished  linux  3     13s ago    7s ago  sh -c exit 3"),
        "1 finished linux 3 <ago> <ago> sh -c exit 3"
    );
    assert_eq!(loose("in 4s, ago, 5x ago"), "in 4s, ago, 5x ago");
    assert!(!same(&["1 finished".to_owned()], "1 failed"));
}

// L9 and the README: the session runs as written and prints what it shows.
#[test]
fn readme_run_billet_for_real_session() {
    if !docker_ok() {
        assert!(
            std::env::var("BILLET_DOCKER_REQUIRED").as_deref() != Ok("1"),
            "BILLET_DOCKER_REQUIRED=1 but no docker daemon answers `docker info`"
        );
        eprintln!("skipped: no docker daemon (set BILLET_DOCKER_REQUIRED=1 to fail instead)");
        return;
    }
    let session = session();
    assert_eq!(
        session.blocks.len(),
        6,
        "validate, serve, submit, read back, the client, the status page"
    );
    // D18: the podman paragraph's file is the session's plus one line, its
    // endpoint; with `DOCKER_HOST` on another socket than docker's (podman's,
    // in `.ci/run`), the session runs with that file, its endpoint that
    // socket.
    let with_endpoint: Vec<&str> = session.podman_yaml.lines().collect();
    let without: Vec<&str> = with_endpoint
        .iter()
        .copied()
        .filter(|line| *line != PODMAN_ENDPOINT_LINE)
        .collect();
    assert_eq!(with_endpoint.len(), without.len() + 1, "{with_endpoint:?}");
    assert_eq!(without, session.yaml.lines().collect::<Vec<_>>());
    let yaml = match std::env::var("DOCKER_HOST") {
        Ok(host) if host.starts_with("unix://") && host != "unix:///var/run/docker.sock" => {
            eprintln!(
                "the README's session on the engine at {host}, with the podman paragraph's file"
            );
            session
                .podman_yaml
                .replace("unix:///run/podman/podman.sock", &host)
        }
        _ => session.yaml.clone(),
    };
    let image = session
        .yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("image: "))
        .expect("the file names an image")
        .to_owned();
    ensure_image(&image);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("billet.yaml"), &yaml).unwrap();
    let mut cleanup = Cleanup(None);
    assert!(
        containers().is_empty(),
        "containers of {DEPLOYMENT} are on the daemon already"
    );
    let shell = |command: &str, variables: &BTreeMap<String, String>| {
        let command = command.replace(CARGO_RUN, BINARY);
        let output = Command::new("sh")
            .arg("-c")
            .arg(&command)
            .current_dir(dir.path())
            .envs(variables)
            .output()
            .unwrap();
        (
            output.status,
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };

    // The first block: validate.
    let mut variables = BTreeMap::new();
    for (command, expected) in &session.blocks[0] {
        let (status, out) = shell(command, &variables);
        assert!(status.success(), "{command}");
        assert!(
            same(expected, &out),
            "{command}:\n{out}\nthe README shows:\n{expected:?}"
        );
    }

    // The second block: serve, in the background, its log to a file.
    let serve_block = &session.blocks[1];
    let (serve, _) = &serve_block[0];
    assert!(serve.starts_with(&format!("{CARGO_RUN} serve")), "{serve}");
    let log_path = dir.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {}", serve.replace(CARGO_RUN, BINARY)))
        .current_dir(dir.path())
        .stderr(log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    cleanup.0 = Some(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("listening on") {
            break;
        }
        assert!(Instant::now() < deadline, "serve never listened:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Jobs are placed once the pool's first inventory is read.
    loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("first inventory read") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the inventory was never read:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // The third to the sixth blocks, in the second terminal. Commands
    // that only read are tried again until they show what the README shows.
    for block in &session.blocks[2..] {
        for (command, expected) in block {
            if let Some((name, value)) = command.split_once('=')
                && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            {
                let (status, out) = shell(&format!("printf %s {value}"), &variables);
                assert!(status.success(), "{command}");
                variables.insert(name.to_owned(), out.trim().to_owned());
                continue;
            }
            let reads = !command.contains(" -d ") && !command.contains("jobs submit");
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let (status, out) = shell(command, &variables);
                if status.success() && same(expected, &out) {
                    break;
                }
                assert!(
                    reads && Instant::now() < deadline,
                    "{command}:\n{out}\nthe README shows:\n{expected:?}\nlog:\n{}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    // `^C`, then `echo $?`.
    let child = cleanup.0.as_mut().unwrap();
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "serve did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    cleanup.0 = None;
    let (echo, shown) = serve_block.last().unwrap();
    assert_eq!(echo, "echo $?");
    assert_eq!(shown, &[status.code().unwrap_or(-1).to_string()]);

    // The log lines the README shows appear, in that order.
    let text = std::fs::read_to_string(&log_path).unwrap();
    let actual: Vec<String> = text.lines().map(normal_log).collect();
    let mut at: usize = 0;
    for line in &serve_block[0].1 {
        if line == "^C" {
            continue;
        }
        let want = normal_log(line);
        // Two lines logged at the same moment by two tasks (a job's
        // `ended` and its container's `destroyed`) may come in either order:
        // a line may stand just before the one matched last.
        let from = at.saturating_sub(2);
        match actual[from..].iter().position(|got| *got == want) {
            Some(found) => at = at.max(from + found + 1),
            None => panic!("the README's log line\n  {want}\nis not in the log, in order:\n{text}"),
        }
    }
    assert!(containers().is_empty(), "billet left containers behind");
}

/// The README's section "A second machine: mutual TLS": its `openssl`
/// commands, its `dockerd` line and its `billet.yaml`.
struct SecondMachine {
    commands: Vec<String>,
    dockerd: String,
    yaml: String,
}

/// The README's section under `heading` (a `## ` or `### ` line), up to
/// the next heading.
fn readme_section(heading: &str) -> String {
    let readme = readme_text();
    let start = readme.find(heading).expect("the README has the section");
    let rest = &readme[start..];
    let end = rest[heading.len()..]
        .find("\n#")
        .map_or(rest.len(), |i| i + heading.len());
    rest[..end].to_owned()
}

/// The body of the first block fenced by `fence` (such as ```` ```yaml\n ````)
/// in `section`.
fn fenced(section: &str, fence: &str) -> String {
    let at = section.find(fence).expect("the block") + fence.len();
    let len = section[at..].find("```").expect("its end");
    section[at..at + len].to_owned()
}

/// Reads the section "A second machine: mutual TLS" of the README.
fn second_machine() -> SecondMachine {
    let section = readme_section("### A second machine: mutual TLS");
    let commands = fenced(&section, "```console\n")
        .lines()
        .filter_map(|line| line.strip_prefix("$ ").map(str::to_owned))
        .collect();
    SecondMachine {
        commands,
        dockerd: fenced(&section, "```sh\n").trim().to_owned(),
        yaml: fenced(&section, "```yaml\n"),
    }
}

/// The address the README's second machine has.
const SECOND_ADDRESS: &str = "192.0.2.10";

// D17: the README's second machine, as written: its `openssl` commands make
// the certificates, a daemon started with its `dockerd` flags (on loopback,
// on roots of the test's own) serves over mutual TLS, and its `billet.yaml`
// (the address, the deployment and the image aside) validates and runs jobs
// to their exit codes on both pools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d17_readme_second_machine_session() {
    if !support::daemon("readme-d17") || !support::tls::can_start_daemons("readme-d17") {
        return;
    }
    let readme = second_machine();
    assert_eq!(readme.commands.len(), 7, "{:?}", readme.commands);
    let certs = tempfile::tempdir().unwrap();
    for command in &readme.commands {
        let command = command.replace(SECOND_ADDRESS, "127.0.0.1");
        let out = Command::new("sh")
            .args(["-c", &command])
            .current_dir(certs.path())
            .output()
            .expect("run sh");
        assert!(
            out.status.success(),
            "`{command}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // The daemon: the README's TLS flags and its tcp address (on a free
    // port), the paths those of the files just made.
    let port = support::tls::free_port();
    let flags: Vec<String> = readme
        .dockerd
        .split_whitespace()
        .skip(1)
        .collect::<Vec<_>>()
        .chunks(1)
        .map(|flag| flag[0].to_owned())
        .filter(|flag| flag.starts_with("--tls") || flag.starts_with("tcp://"))
        .map(|flag| {
            if let Some((name, file)) = flag.split_once('=') {
                format!("{name}={}", certs.path().join(file).display())
            } else if flag.starts_with("tcp://") {
                format!("--host=tcp://127.0.0.1:{port}")
            } else {
                flag
            }
        })
        .collect();
    assert_eq!(flags.len(), 5, "{flags:?} from {:?}", readme.dockerd);
    let daemon = support::tls::TlsDaemon::with_flags("readme-d17", &flags, port);

    let yaml = readme
        .yaml
        .replace(&format!("tcp://{SECOND_ADDRESS}:2376"), &daemon.endpoint)
        .replace("busybox:latest", support::TEST_IMAGE);
    let mut service = support::Service::with_yaml("readme-d17", |id| {
        yaml.replace("id: my-ci", &format!("id: {id}"))
    });
    let tls = service.dir().join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    for file in ["ca.pem", "cert.pem", "key.pem"] {
        std::fs::copy(certs.path().join(file), tls.join(file)).unwrap();
    }
    let validated = Command::new(BINARY)
        .arg("validate")
        .arg(service.dir().join("billet.yaml"))
        .output()
        .expect("run billet validate");
    assert!(
        validated.status.success(),
        "{}",
        String::from_utf8_lossy(&validated.stderr)
    );
    service.start().await;
    let api = service.api();
    let mut ids = Vec::new();
    for n in 0..8 {
        ids.push(support::id_of(
            &api.submit_sh(&format!("sleep 1; exit {n}")).await,
        ));
    }
    let ended = api.wait_ended(&ids, Duration::from_secs(90)).await;
    let mut pools = BTreeMap::new();
    for (n, id) in ids.iter().enumerate() {
        let job = &ended[id];
        assert_eq!(job["exit_code"].as_i64(), Some(n as i64), "{job}");
        *pools
            .entry(job["pool"].as_str().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    assert!(
        pools.contains_key("linux-2"),
        "no job on the second machine: {pools:?}"
    );
    println!("D17 README second machine: jobs per pool {pools:?}");
    service.finish().await;
    drop(daemon);
}

/// The README's section "Untrusted jobs on gVisor": its `daemon.json`
/// entry, its `billet.yaml`, and its session's commands with what each
/// printed.
struct GvisorSection {
    json: String,
    yaml: String,
    session: Block,
}

/// Reads the section "Untrusted jobs on gVisor" of the README.
fn gvisor_section() -> GvisorSection {
    let section = readme_section("## Untrusted jobs on gVisor");
    let mut session: Block = Vec::new();
    for line in fenced(&section, "```console\n").lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            session.push((command.to_owned(), Vec::new()));
        } else if let Some((_, output)) = session.last_mut() {
            output.push(line.to_owned());
        }
    }
    GvisorSection {
        json: fenced(&section, "```json\n"),
        yaml: fenced(&section, "```yaml\n"),
        session,
    }
}

// D19: the README's gVisor section, as written: its `daemon.json` entry
// registers the runtime the daemon lists (at that path, on docker), its
// `billet.yaml` (endpoints and the deployment aside) validates, and under
// `billet serve` its session prints what the README shows: an untrusted job
// placed on the gVisor pool, printing gVisor's kernel. On podman (the
// `podman` step) the gVisor pool is served by podman's runsc service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d19_readme_gvisor_section() {
    let socket = support::daemon_socket();
    if !support::daemon("readme-d19") || !support::lists_runsc_at(&socket, "readme-d19") {
        return;
    }
    let readme = gvisor_section();
    let entry: Value = serde_json::from_str(&readme.json).expect("the daemon.json entry is JSON");
    let path = entry["runtimes"][support::RUNSC]["path"]
        .as_str()
        .expect("it registers runsc with a path");
    let podman = support::engine_at(&socket) == "podman";
    let gvisor_endpoint = if podman {
        format!("unix://{}", support::podman_runsc_socket().display())
    } else {
        let client = support::raw_client();
        let info = client.info().await.expect("the daemon's system info");
        let listed = info.runtimes.unwrap_or_default()[support::RUNSC]
            .path
            .clone();
        assert_eq!(listed.as_deref(), Some(path), "the path the daemon runs");
        support::daemon_endpoint()
    };
    ensure_image("busybox:latest");
    let yaml = readme
        .yaml
        .replace(
            "      runtime: runsc\n",
            &format!("      runtime: runsc\n      endpoint: {gvisor_endpoint}\n"),
        )
        .replace(
            "      image: busybox:latest\n  - name: gvisor",
            &format!(
                "      image: busybox:latest\n      endpoint: {}\n  - name: gvisor",
                support::daemon_endpoint()
            ),
        );
    assert_eq!(yaml.matches("endpoint:").count(), 2, "{yaml}");
    let mut service = support::Service::with_yaml("readme-d19", |id| {
        yaml.replace("id: my-ci", &format!("id: {id}"))
    });
    let validated = Command::new(BINARY)
        .arg("validate")
        .arg(service.dir().join("billet.yaml"))
        .output()
        .expect("run billet validate");
    assert!(
        validated.status.success(),
        "{}",
        String::from_utf8_lossy(&validated.stderr)
    );
    service.start().await;
    // The README shows the job `running` at once: the gvisor pool has read
    // its first inventory by then, as `serve` says in its log. A podman
    // service on runsc can take longer than `/healthz` to answer that.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !service
        .last_log()
        .contains("first inventory read; placing from now on pool=gvisor")
    {
        assert!(
            Instant::now() < deadline,
            "the gvisor pool's inventory was never read:\n{}",
            service.last_log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api = service.api();
    assert_eq!(readme.session.len(), 2, "{:?}", readme.session);
    for (command, expected) in &readme.session {
        let command = command.replace("http://127.0.0.1:7878", api.base());
        let out = Command::new("sh")
            .args(["-c", &command])
            .env("TOKEN", api.token())
            .output()
            .expect("run sh");
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && same(expected, &printed),
            "`{command}` printed\n{printed}\nnot\n{}",
            expected.join("\n")
        );
    }
    service.finish().await;
}

/// Runs every `$ ` command of `section`'s first `console` block in `dir`,
/// each to success; how many there were.
fn run_console_commands(section: &str, dir: &Path) -> usize {
    let commands: Vec<String> = fenced(section, "```console\n")
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("$ ").map(str::to_owned))
        .collect();
    for command in &commands {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(dir)
            .output()
            .expect("run sh");
        assert!(
            out.status.success(),
            "`{command}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    commands.len()
}

// G1: the README's "Run GitHub Actions jobs" section as written: its
// commands make the secret private, and the built binary validates its
// `billet.yaml` (the paths it names relative to the file). A section that
// breaks the schema fails here.
#[test]
fn readme_github_actions_section_validates() {
    let section = readme_section("## Run GitHub Actions jobs");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("github-app.pem"), "not read by validate\n").unwrap();
    assert_eq!(run_console_commands(&section, dir.path()), 2);
    use std::os::unix::fs::PermissionsExt;
    for file in ["webhook-secret", "github-app.pem"] {
        let mode = std::fs::metadata(dir.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{file} is private: {mode:o}");
    }
    let yaml = fenced(&section, "```yaml\n");
    assert!(yaml.contains("github:"), "{yaml}");
    std::fs::write(dir.path().join("billet.yaml"), &yaml).unwrap();
    let out = Command::new(BINARY)
        .args(["validate", "billet.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("run billet validate");
    assert!(
        out.status.success(),
        "billet validate refused the README's github section: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A broken section is refused: the check can fail.
    std::fs::write(
        dir.path().join("billet.yaml"),
        yaml.replace("pool: linux-docker", "pool: no-such-pool"),
    )
    .unwrap();
    let out = Command::new(BINARY)
        .args(["validate", "billet.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// G1, G5, G9: the README's "Run GitHub Actions jobs" section, run against
// the GitHub stand-in on a real daemon: its commands make the webhook's
// secret in the service's directory beside the App's private key, and its
// `billet.yaml` as written serves, with only what this machine needs
// changed: the deployment, the App's id and `api_url` (the stand-in's), the
// pool's endpoint, and its image (no registry: busybox made offline, with a
// runner command in place of the runner image's entry point). A `queued`
// job of the organization, signed with the secret the README's command
// made, gets a runner container holding its JIT config, registered with
// the pool's labels through the App's installation token; `in_progress`
// and `completed` end it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g9_readme_github_actions_section_runs_against_the_stand_in() {
    use serde_json::json;
    if !support::daemon("readme-github") {
        return;
    }
    let section = readme_section("## Run GitHub Actions jobs");
    let standin = standin::StandIn::start(standin::Auth::App).await;
    let repo = json!({"id": 7, "full_name": "my-org/app", "private": true});
    standin.state.lock().runs.insert(
        10,
        json!({"id": 10, "repository": repo, "head_repository": repo}),
    );
    ensure_image("busybox:latest");
    // The block sits in a list item: its lines, their common indent taken off.
    let block = fenced(&section, "```yaml\n");
    let indent = block
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let yaml: String = block
        .lines()
        .map(|line| format!("{}\n", line.get(indent..).unwrap_or("")))
        .collect();
    let image = "    docker: {image: \"ghcr.io/actions/actions-runner:2.321.0\"}\n";
    assert!(yaml.contains(image), "{yaml}");
    let yaml = yaml
        .replace(
            image,
            &format!(
                "    docker: {{image: \"busybox:latest\", endpoint: \"{}\"}}\n",
                support::daemon_endpoint()
            ),
        )
        .replace(
            "  app: {id: 123456,",
            &format!(
                "  api_url: {}\n  app: {{id: {},",
                standin.url,
                standin::APP_ID
            ),
        );
    assert!(yaml.contains("api_url"), "{yaml}");
    let yaml = format!(
        "{yaml}  runner:\n    command: [sh, -c, 'test -n \"$ACTIONS_RUNNER_INPUT_JITCONFIG\" && sleep 3']\n"
    );
    let mut service = support::Service::with_yaml("readme-github", |id| {
        yaml.replace("id: my-ci", &format!("id: {id}"))
    });
    let key =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../billet-github/testdata/app-key/private.pem");
    std::fs::copy(key, service.dir().join("github-app.pem")).unwrap();
    assert_eq!(run_console_commands(&section, service.dir()), 2);
    let secret = std::fs::read_to_string(service.dir().join("webhook-secret")).unwrap();
    let secret = secret.trim_end();
    assert_eq!(secret.len(), 64, "32 random bytes in hex");
    service.start().await;
    let base = service.base().to_owned();
    let event = |action: &str, runner: Option<&str>| {
        json!({
            "action": action,
            "workflow_job": {
                "id": 1,
                "run_id": 10,
                "labels": ["self-hosted", "linux"],
                "runner_name": runner,
                "conclusion": (action == "completed").then_some("success"),
            },
            "repository": {"id": 7, "full_name": "my-org/app", "private": true},
        })
    };
    assert_eq!(
        support::deliver_github(&base, secret, 1, &event("queued", None)).await,
        202
    );
    service
        .wait_containers_running(1, Duration::from_secs(60))
        .await;
    let container = service.containers().await.remove(0);
    let registered = standin.registered();
    assert_eq!(
        registered,
        [(
            container.name.clone(),
            vec!["self-hosted".to_owned(), "linux".to_owned()]
        )]
    );
    for (n, action) in [(2, "in_progress"), (3, "completed")] {
        let body = event(action, Some(&container.name));
        assert_eq!(support::deliver_github(&base, secret, n, &body).await, 202);
    }
    let jobs = service.jobs(None).await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let id = jobs[0]["id"].as_u64().unwrap();
    let ended = service.wait_ended(&[id], Duration::from_secs(60)).await;
    assert_eq!(ended[&id]["state"], "finished", "{:?}", ended[&id]);
    assert_eq!(ended[&id]["exit_code"], 0, "the runner saw its JIT config");
    assert_eq!(service.job(id).await["github"]["conclusion"], "success");
    let calls = standin.operations_called();
    assert!(
        calls
            .iter()
            .any(|c| c == "apps/create-installation-access-token"),
        "the App's installation token was made: {calls:?}"
    );
    standin.assert_no_violation();
    service.finish().await;
}
