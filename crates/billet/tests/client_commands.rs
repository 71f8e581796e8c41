//! The `billet` client (K1-K6), the built binary against the service in
//! process over the simulated backend: where it connects and with which
//! token, `submit` with and without `--wait`, `ls`, `show`, `logs`,
//! `cancel`, `pools`, `--json`, and its exit statuses.

mod client;
mod in_process;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use billet::Limits;
use billet::output::OutputStore;
use billet_simulated::{Host, run_for, run_for_writing};
use in_process::*;
use serde_json::Value;
use std::sync::Arc;

/// The built binary.
const BILLET: &str = env!("CARGO_BIN_EXE_billet");

/// A client run's exit status, stdout and stderr.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `billet ARGS` against `server` with `token` in `BILLET_TOKEN` (none
/// when `None`), in an empty directory, off the runtime's workers.
async fn billet(server: &str, token: Option<&str>, args: &[&str]) -> Ran {
    let (server, token) = (server.to_owned(), token.map(str::to_owned));
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(BILLET);
        command
            .args(&args)
            .current_dir(dir.path())
            .env("BILLET_SERVER", &server)
            .env_remove("BILLET_TOKEN")
            .env_remove("BILLET_TOKEN_FILE");
        if let Some(token) = &token {
            command.env("BILLET_TOKEN", token);
        }
        let Output {
            status,
            stdout,
            stderr,
        } = command.output().expect("run billet");
        Ran {
            code: status.code(),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// A service with its output kept, and its store's identity learnt.
async fn service(host: &Host, state: &std::path::Path) -> (Running, Arc<OutputStore>) {
    let (limits, output) = keeping_output(state);
    (start(host, Some(state), limits).await, output)
}

/// `billet jobs submit ... -- COMMAND` with `flags` before the `--`.
async fn submit(base: &str, token: &str, flags: &[&str], command: Vec<String>) -> Ran {
    let mut args = vec!["jobs", "submit"];
    args.extend_from_slice(flags);
    args.push("--");
    args.extend(command.iter().map(String::as_str));
    billet(base, Some(token), &args).await
}

// K1: the token comes from BILLET_TOKEN, else from --token-file (or
// BILLET_TOKEN_FILE); one on the command line is refused (exit 2) before any
// request; none at all is exit 2 saying where one is looked for; a server
// that cannot be reached is exit 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_where_the_client_connects_and_with_which_token() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let base = running.base.clone();
    let ran = billet(&base, Some(ALL), &["pools"]).await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(ran.stdout.contains("linux"), "{}", ran.stdout);

    let refused = billet(&base, Some(ALL), &["pools", "--token", ALL]).await;
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--token is refused"),
        "{}",
        refused.stderr
    );

    let none = billet(&base, None, &["pools"]).await;
    assert_eq!(none.code, Some(2), "{}", none.stderr);
    assert!(none.stderr.contains("BILLET_TOKEN"), "{}", none.stderr);

    let dir = private_dir();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("# the reader\n{READER} read\n")).unwrap();
    let file = file.to_str().unwrap();
    let from_file = billet(&base, None, &["pools", "--token-file", file]).await;
    assert_eq!(from_file.code, Some(0), "{}", from_file.stderr);
    // BILLET_TOKEN comes first: the metrics-only token is refused reading.
    let first = billet(&base, Some(METRICS), &["pools", "--token-file", file]).await;
    assert_eq!(first.code, Some(3), "{}", first.stderr);
    assert!(first.stderr.contains("403"), "{}", first.stderr);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = billet(&format!("http://127.0.0.1:{port}"), Some(ALL), &["pools"]).await;
    assert_eq!(gone.code, Some(4), "{}", gone.stderr);
    assert!(
        gone.stderr.contains("cannot reach the server"),
        "{}",
        gone.stderr
    );
    running.service.abort();
}

// K2: `submit` prints the new job's id (its JSON with --json); with --wait
// it streams the job's output as it comes and exits 0 once it finished; a
// job that fails exits 1 saying why; a refusal is exit 3 with the server's
// words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k2_submit_and_wait_for_a_job() {
    let host = Host::new();
    let state = private_dir();
    let (running, output) = service(&host, state.path()).await;
    let base = running.base.clone();

    let plain = submit(
        &base,
        ALL,
        &["--trust", "trusted"],
        run_for(Duration::from_millis(10)),
    )
    .await;
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    assert_eq!(plain.stdout.trim(), "1", "{}", plain.stdout);

    let json = submit(
        &base,
        ALL,
        &[
            "--json", "--trust", "trusted", "--key", "k2", "--label", "linux",
        ],
        run_for(Duration::from_millis(10)),
    )
    .await;
    assert_eq!(json.code, Some(0), "{}", json.stderr);
    let job: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(job["id"], 2, "{job}");

    let waited = submit(
        &base,
        ALL,
        &["--trust", "trusted", "--wait"],
        run_for_writing(Duration::from_millis(500), 3000),
    )
    .await;
    assert_eq!(waited.code, Some(0), "{}", waited.stderr);
    assert_eq!(waited.stdout.len(), 3000, "the output streamed whole");
    assert_eq!(std::fs::read(output.path(3)).unwrap().len(), 3000);

    let timed_out = submit(
        &base,
        ALL,
        &["--trust", "trusted", "--timeout", "1s", "--wait"],
        run_for(Duration::from_secs(3600)),
    )
    .await;
    assert_eq!(timed_out.code, Some(1), "{}", timed_out.stderr);
    assert!(
        timed_out.stderr.contains("job 4 failed: timed out"),
        "{}",
        timed_out.stderr
    );

    let refused = submit(&base, READER, &[], run_for(Duration::from_millis(10))).await;
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("the server answered 403"),
        "{}",
        refused.stderr
    );
    running.service.abort();
}

// K3: `ls` shows one page as an aligned table, `--all` follows the pages to
// the last, `--state` filters, and `--json` prints one job a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k3_ls_follows_pages() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let base = running.base.clone();
    for _ in 0..5 {
        let ran = submit(
            &base,
            ALL,
            &["--trust", "trusted"],
            run_for(Duration::from_millis(1)),
        )
        .await;
        assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    }
    for id in 1..=5 {
        running.until_ended(id).await;
    }
    let page = billet(&base, Some(ALL), &["jobs", "ls", "--limit", "2"]).await;
    assert_eq!(page.code, Some(0), "{}", page.stderr);
    let lines: Vec<&str> = page.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", page.stdout);
    assert!(
        lines[0].contains("STATE") && lines[1].contains("finished"),
        "{}",
        page.stdout
    );
    assert_eq!(
        lines[1].find("finished"),
        lines[0].find("STATE"),
        "aligned: {}",
        page.stdout
    );

    let all = billet(
        &base,
        Some(ALL),
        &["jobs", "ls", "--limit", "2", "--all", "--json"],
    )
    .await;
    assert_eq!(all.code, Some(0), "{}", all.stderr);
    let ids: Vec<u64> = all
        .stdout
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);

    let none = billet(
        &base,
        Some(ALL),
        &["jobs", "ls", "--state", "queued", "--json"],
    )
    .await;
    assert_eq!(
        (none.code, none.stdout.as_str()),
        (Some(0), ""),
        "{}",
        none.stderr
    );
    let bad = billet(&base, Some(ALL), &["jobs", "ls", "--state", "sleeping"]).await;
    assert_eq!(bad.code, Some(3), "{}", bad.stderr);
    assert!(bad.stderr.contains("state"), "{}", bad.stderr);
    running.service.abort();
}

// K4: `show`, `logs` (and `logs --follow` while the job runs), `cancel` and
// `pools`, in tables and in JSON; an unknown job is exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k4_show_logs_cancel_and_pools() {
    let host = Host::new();
    let state = private_dir();
    let (running, _output) = service(&host, state.path()).await;
    let base = running.base.clone();
    let ran = submit(
        &base,
        ALL,
        &["--trust", "trusted"],
        run_for_writing(Duration::from_millis(800), 2000),
    )
    .await;
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let followed = billet(&base, Some(ALL), &["jobs", "logs", "1", "--follow"]).await;
    assert_eq!(followed.code, Some(0), "{}", followed.stderr);
    assert_eq!(followed.stdout.len(), 2000);
    let logs = billet(&base, Some(ALL), &["jobs", "logs", "1"]).await;
    assert_eq!(logs.stdout.len(), 2000, "{}", logs.stderr);

    let shown = billet(&base, Some(ALL), &["jobs", "show", "1"]).await;
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    for needle in ["finished", "2000 bytes", "linux", "ago ("] {
        assert!(shown.stdout.contains(needle), "{needle}: {}", shown.stdout);
    }
    let json = billet(&base, Some(ALL), &["jobs", "show", "1", "--json"]).await;
    let job: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(
        (job["id"].as_u64(), job["output_bytes"].as_u64()),
        (Some(1), Some(2000))
    );

    let long = submit(
        &base,
        ALL,
        &["--trust", "trusted"],
        run_for(Duration::from_secs(3600)),
    )
    .await;
    assert_eq!(long.stdout.trim(), "2");
    let cancelled = billet(&base, Some(ALL), &["jobs", "cancel", "2", "--json"]).await;
    assert_eq!(cancelled.code, Some(0), "{}", cancelled.stderr);
    assert_eq!(running.until_ended(2).await["state"], "cancelled");
    let again = billet(&base, Some(ALL), &["jobs", "cancel", "2"]).await;
    assert_eq!(again.code, Some(3), "{}", again.stderr);
    assert!(again.stderr.contains("409"), "{}", again.stderr);
    let unknown = billet(&base, Some(ALL), &["jobs", "show", "99"]).await;
    assert_eq!(unknown.code, Some(3), "{}", unknown.stderr);
    assert!(unknown.stderr.contains("404"), "{}", unknown.stderr);

    let pools = billet(&base, Some(ALL), &["pools"]).await;
    let row: Vec<&str> = pools
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["linux", "docker", "2"], "{}", pools.stdout);
    let json = billet(&base, Some(ALL), &["pools", "--json"]).await;
    let pool: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(pool["capacity"], 2, "{pool}");
    running.service.abort();
}

/// Sends SIGINT (what `^C` sends) to the process `pid`.
fn interrupt(pid: u32) {
    let sent = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

// K5: `^C` while waiting leaves the job running (exit 130, saying how to
// cancel it); with --cancel-on-interrupt the job is cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k5_an_interrupt_leaves_the_job_running_unless_told() {
    let host = Host::new();
    let state = private_dir();
    let (running, _output) = service(&host, state.path()).await;
    let base = running.base.clone();
    for (flags, id, after) in [
        (&["--wait"][..], 1u64, "running"),
        (&["--wait", "--cancel-on-interrupt"][..], 2, "cancelled"),
    ] {
        let mut args = vec!["jobs", "submit", "--trust", "trusted"];
        args.extend_from_slice(flags);
        args.push("--");
        let command = run_for(Duration::from_secs(3600));
        args.extend(command.iter().map(String::as_str));
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(BILLET)
            .args(&args)
            .current_dir(dir.path())
            .env("BILLET_SERVER", &base)
            .env("BILLET_TOKEN", ALL)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, job) = running
                .call(
                    &format!("Bearer {ALL}"),
                    "GET",
                    &format!("/v1/jobs/{id}"),
                    None,
                )
                .await;
            if job["state"] == "running" {
                break;
            }
            assert!(Instant::now() < deadline, "job {id} never ran: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The follow is open by now or soon; the interrupt is taken either way.
        tokio::time::sleep(Duration::from_millis(200)).await;
        interrupt(child.id());
        let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{stderr}");
        assert!(stderr.contains("interrupted"), "{stderr}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, job) = running
                .call(
                    &format!("Bearer {ALL}"),
                    "GET",
                    &format!("/v1/jobs/{id}"),
                    None,
                )
                .await;
            if job["state"] == after {
                break;
            }
            assert!(Instant::now() < deadline, "job {id} is not {after}: {job}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    running.service.abort();
}
