//! The service in process with its state directory on a small tmpfs that
//! fills up: a store that cannot commit refuses new work and recovers (L25),
//! and job output within its budget, or cut where the disk is full (L26);
//! and an output file that never answers (a hung disk) holds up no one
//! (L22).
//!
//! Mounting a tmpfs needs root: CI runs these as root
//! (`BILLET_TMPFS_REQUIRED=1`, set by `.ci/run`); elsewhere they skip with
//! one line saying so.

mod client;
mod in_process;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use std::sync::Arc;

use billet::Limits;
use billet::output::OutputStore;
use billet_simulated::{Host, run_for, run_for_writing};
use in_process::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A tmpfs of a few MiB mounted on a private directory, unmounted when
/// dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one of `size` (as `mount -o size=` takes it), or says why
    /// `test` skips; with `BILLET_TMPFS_REQUIRED=1` a failed mount fails it.
    fn mount(size: &str, test: &str) -> Option<Tmpfs> {
        let dir = private_dir();
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .is_ok_and(|status| status.success());
        if mounted {
            return Some(Tmpfs { dir });
        }
        assert!(
            std::env::var("BILLET_TMPFS_REQUIRED").as_deref() != Ok("1"),
            "{test}: mounting a tmpfs failed, and BILLET_TMPFS_REQUIRED=1"
        );
        eprintln!("{test}: skipped: mounting a tmpfs needs root (CI runs it so)");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A directory on it only its owner may enter.
    fn private(&self, name: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap();
        path
    }

    /// Fills it to the last byte with a file, whose path it answers.
    fn fill(&self) -> PathBuf {
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 4096];
        loop {
            if let Err(err) = file.write_all(&chunk) {
                assert_eq!(err.raw_os_error(), Some(28), "{err}");
                break;
            }
        }
        let _ = file.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

use std::os::unix::fs::DirBuilderExt;

/// Asks `path` of `running` until `done` holds of the answer, for at most
/// 20 s; answers the last answer.
async fn until(
    running: &Running,
    auth: &str,
    path: &str,
    done: impl Fn(StatusCode, &Value) -> bool,
) -> (StatusCode, Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = running.call(auth, "GET", path, None).await;
        if done(status, &body) {
            return (status, body);
        }
        assert!(
            Instant::now() < deadline,
            "{path} never came: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// L25: a store that cannot commit for lack of space neither exits nor loses
// a request: the submission whose commit met the full disk waits for space;
// `/healthz` says `store_full`; new submissions and cancels answer `507`
// with `Retry-After`, recording nothing; reads still answer and the job
// that runs goes on; once space is freed, the waiting submission is
// created, and new work is taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l25_a_full_disk_refuses_new_work_and_recovers() {
    let Some(fs) = Tmpfs::mount("2m", "l25_a_full_disk_refuses_new_work_and_recovers") else {
        return;
    };
    let state = fs.private("state");
    let host = Host::new();
    let running = start(&host, Some(&state), Limits::default()).await;
    let auth = format!("Bearer {ALL}");
    let hour = json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted"});
    let (status, job) = running
        .call(&auth, "POST", "/v1/jobs", Some(hour.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let first = format!("/v1/jobs/{}", job["id"]);
    until(&running, &auth, &first, |_, job| job["state"] == "running").await;

    let filler = fs.fill();
    let base = running.base.clone();
    let client = running.client.clone();
    let (waiting_auth, body) = (auth.clone(), hour.clone());
    let waiting = tokio::spawn(async move {
        let response = client
            .post(format!("{base}/v1/jobs"))
            .header("Authorization", waiting_auth)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    });
    let (_, health) = until(&running, "", "/healthz", |status, health| {
        status == StatusCode::SERVICE_UNAVAILABLE && health["store_full"].is_string()
    })
    .await;
    assert!(
        health["store_full"].as_str().unwrap().contains("full"),
        "{health}"
    );

    let (status, refused) = running
        .call(&auth, "POST", "/v1/jobs", Some(hour.clone()))
        .await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("lack of space"),
        "{refused}"
    );
    let (status, refused) = running.call(&auth, "DELETE", &first, None).await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{refused}");
    let (status, job) = running.call(&auth, "GET", &first, None).await;
    assert_eq!(
        (status, job["state"].as_str()),
        (StatusCode::OK, Some("running")),
        "{job}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "the waiting submission was answered on a full disk"
    );

    std::fs::remove_file(filler).unwrap();
    let (status, created) = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiting submission answered once space was freed")
        .unwrap();
    assert_eq!(status, StatusCode::CREATED, "{created}");
    until(&running, "", "/healthz", |status, _| {
        status == StatusCode::OK
    })
    .await;
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(hour)).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let (status, job) = running.call(&auth, "DELETE", &first, None).await;
    assert_eq!(status, StatusCode::OK, "{job}");
    assert_eq!(running.jobs().await, 3);
    running.service.abort();
}

// L26: output a full disk holds up is read again from where its file ends
// once space is freed: the job that wrote while the disk was full keeps
// every byte, and says nothing was cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l26_output_a_full_disk_held_up_is_whole_once_space_returns() {
    let Some(fs) = Tmpfs::mount(
        "4m",
        "l26_output_a_full_disk_held_up_is_whole_once_space_returns",
    ) else {
        return;
    };
    let state = fs.private("state");
    // The store's identity names its jobs' instances: opened once to learn it.
    let identity = billet::Store::open(&state).unwrap().0.identity().cloned();
    let output = Arc::new(OutputStore::open(&state, identity.as_ref(), 1 << 20).unwrap());
    let limits = Limits {
        output: Some(Arc::clone(&output)),
        ..Limits::default()
    };
    let host = Host::new();
    let running = start(&host, Some(&state), limits).await;
    let auth = format!("Bearer {ALL}");
    let bytes = 400_000;
    let body =
        json!({"command": run_for_writing(Duration::from_secs(4), bytes), "trust": "trusted"});
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let id = job["id"].as_u64().unwrap();
    let path = format!("/v1/jobs/{id}");
    until(&running, &auth, &path, |_, job| {
        job["output_bytes"].as_u64() > Some(0)
    })
    .await;
    let filler = fs.fill();
    let held = std::fs::metadata(output.path(id)).unwrap().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, job) = running.call(&auth, "GET", &path, None).await;
    assert!(
        job["output_bytes"].as_u64().unwrap() <= held + 4096,
        "{job} {held}"
    );
    assert!(output.capturing(id), "the capture gave up on a full disk");
    std::fs::remove_file(filler).unwrap();
    let ended = running.until_ended(id).await;
    assert_eq!(ended["state"], "finished", "{ended}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while output.capturing(id) {
        assert!(Instant::now() < deadline, "the capture never ended");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, job) = running.call(&auth, "GET", &path, None).await;
    assert_eq!(job["output_bytes"], bytes, "{job}");
    assert_eq!(job["output_truncated"], false, "{job}");
    assert_eq!(std::fs::read(output.path(id)).unwrap().len() as u64, bytes);
    running.service.abort();
}

/// One request over a plain socket from the calling thread, with every wait
/// bounded by `within`: answers the status line and body, or `None` when
/// nothing came in time. Used where the runtime's own clients could be
/// stalled by what the test looks for.
fn raw(addr: &str, method: &str, path: &str, auth: &str, within: Duration) -> Option<String> {
    use std::io::Read;
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(within)).ok()?;
    stream.set_write_timeout(Some(within)).ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: billet\r\nAuthorization: {auth}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// Opens the FIFO at `path` for writing, and closes it, when dropped: its
/// readers, blocked in `open`, then read its end.
struct Release(PathBuf);

impl Drop for Release {
    fn drop(&mut self) {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc_nonblock())
            .open(&self.0);
    }
}

/// `O_NONBLOCK` on Linux: opening a FIFO no one reads fails at once rather
/// than waits.
fn libc_nonblock() -> i32 {
    0o4000
}

// L22: jobs' output files are opened and read off the runtime's workers: four
// readers of an output whose file never answers (a FIFO no one writes, as a
// hung disk or network file system would be) hold up neither `/healthz`, nor
// other requests, nor the engine, which still cancels that job (it waits:
// placed, its capture would write to the FIFO).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l22_an_output_file_that_never_answers_holds_up_no_one() {
    let state = private_dir();
    let (limits, output) = keeping_output(state.path());
    let host = Host::new();
    let running = start(&host, Some(state.path()), limits).await;
    let auth = format!("Bearer {ALL}");
    let hour = json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted"});
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, job) = running
            .call(&auth, "POST", "/v1/jobs", Some(hour.clone()))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{job}");
        ids.push(job["id"].as_u64().unwrap());
    }
    // The pool holds two: the third waits, and no capture opens its file.
    let first = format!("/v1/jobs/{}", ids[0]);
    until(&running, &auth, &first, |_, job| job["state"] == "running").await;
    let fifo = output.path(ids[2]);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let _release = Release(fifo);
    let addr = running.base.trim_start_matches("http://").to_owned();
    let path = format!("/v1/jobs/{}/output", ids[2]);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (addr, path, auth) = (addr.clone(), path.clone(), auth.clone());
            std::thread::spawn(move || raw(&addr, "GET", &path, &auth, Duration::from_secs(15)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let within = Duration::from_secs(5);
    let health = raw(&addr, "GET", "/healthz", "", within);
    assert!(
        health
            .as_deref()
            .is_some_and(|answer| answer.starts_with("HTTP/1.1 200")),
        "/healthz: {health:?}"
    );
    let waiting = format!("/v1/jobs/{}", ids[2]);
    let cancel = raw(&addr, "DELETE", &waiting, &auth, within);
    assert!(
        cancel
            .as_deref()
            .is_some_and(|answer| answer.starts_with("HTTP/1.1 200")),
        "the cancel: {cancel:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let job = raw(&addr, "GET", &waiting, &auth, within).unwrap_or_default();
        if job.contains("\"state\":\"cancelled\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cancel never ended the job: {job}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(_release);
    for reader in readers {
        let answer = reader.join().unwrap();
        assert!(
            answer
                .as_deref()
                .is_some_and(|answer| answer.starts_with("HTTP/1.1 200")),
            "a reader: {answer:?}"
        );
    }
    running.service.abort();
}

// L25: a restart after a crash (`kill -9` leaves SQLite's `-wal` and `-shm`
// files) on a full disk serves. Its store holds a job that was running, which
// the restart requeues: that commit meets the full disk, and the service
// answers meanwhile (`/healthz` says `store_full`, a submission is `507`, the
// job reads as last committed, `running`); once space is freed the job runs
// to its end and new work is taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l25_a_start_on_a_full_disk_serves_and_recovers() {
    let Some(fs) = Tmpfs::mount("2m", "l25_a_start_on_a_full_disk_serves_and_recovers") else {
        return;
    };
    let state = fs.private("state");
    {
        let (mut store, _) = billet::Store::open(&state).unwrap();
        let job = billet::record::NewJob {
            command: run_for(Duration::from_secs(1)),
            labels: Vec::new(),
            trust: billet_provider::TrustClass::Trusted,
            timeout: None,
            key: None,
            pinned: None,
        };
        let record = billet::record::JobRecord::accepted(1, job, std::time::SystemTime::now());
        let placed = billet::record::Change::Placed {
            id: 1,
            pool: "linux".to_owned(),
            at: std::time::SystemTime::now(),
        };
        store
            .commit(&[billet::record::Change::Accepted(Box::new(record)), placed])
            .unwrap();
        // A crash: the connection is never closed, SQLite's files stay.
        std::mem::forget(store);
    }
    let filler = fs.fill();
    let host = Host::new();
    let running = tokio::time::timeout(
        Duration::from_secs(15),
        start(&host, Some(&state), Limits::default()),
    )
    .await
    .expect("a start on a full disk serves");
    let auth = format!("Bearer {ALL}");
    let (_, health) = until(&running, "", "/healthz", |status, health| {
        status == StatusCode::SERVICE_UNAVAILABLE && health["store_full"].is_string()
    })
    .await;
    assert!(
        health["store_full"].as_str().unwrap().contains("full"),
        "{health}"
    );
    let hour = json!({"command": run_for(Duration::from_secs(3600)), "trust": "trusted"});
    let (status, refused) = running
        .call(&auth, "POST", "/v1/jobs", Some(hour.clone()))
        .await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{refused}");
    let (status, job) = running.call(&auth, "GET", "/v1/jobs/1", None).await;
    assert_eq!(
        (status, job["state"].as_str()),
        (StatusCode::OK, Some("running")),
        "{job}"
    );

    std::fs::remove_file(filler).unwrap();
    let ended = running.until_ended(1).await;
    assert_eq!(ended["state"], "finished", "{ended}");
    until(&running, "", "/healthz", |status, _| {
        status == StatusCode::OK
    })
    .await;
    let (status, job) = running.call(&auth, "POST", "/v1/jobs", Some(hour)).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    running.service.abort();
}

// L25: a store whose file system has no space left to open it (after a clean
// stop SQLite must make its `-shm` file again) is said to be so, and never
// taken for a damaged one (whose error says to move the file aside).
#[test]
fn l25_a_store_a_full_disk_cannot_open_is_not_called_damaged() {
    let Some(fs) = Tmpfs::mount(
        "1m",
        "l25_a_store_a_full_disk_cannot_open_is_not_called_damaged",
    ) else {
        return;
    };
    let state = fs.private("state");
    drop(billet::Store::open(&state).unwrap());
    let filler = fs.fill();
    let error = billet::Store::open(&state).unwrap_err();
    assert!(
        matches!(error, billet::store::StoreError::NoSpace { .. }),
        "{error}"
    );
    let said = error.to_string();
    assert!(
        said.contains("no space left") && said.contains("not damaged"),
        "{said}"
    );
    assert!(!said.contains("move it aside"), "{said}");
    std::fs::remove_file(filler).unwrap();
    billet::Store::open(&state).expect("opens once space is freed");
}

// L25: a store SQLite cannot read for another reason than space (here its
// file is a directory) is neither said to lack space nor called damaged:
// the error is SQLite's own, and nothing is moved.
#[test]
fn l25_a_store_that_cannot_be_read_is_not_said_full_nor_damaged() {
    let state = private_dir();
    std::fs::create_dir(state.path().join("billet.db")).unwrap();
    std::fs::write(state.path().join("billet.db").join("x"), "x").unwrap();
    let error = billet::Store::open(state.path()).unwrap_err();
    assert!(
        matches!(error, billet::store::StoreError::Sqlite { .. }),
        "{error}"
    );
    let said = error.to_string();
    assert!(
        !said.contains("no space") && !said.contains("move it aside"),
        "{said}"
    );
    assert!(state.path().join("billet.db").join("x").exists());
}
