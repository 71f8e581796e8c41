//! The test support's own guarantees, proven on the daemon: a failing test
//! leaves no container behind, and the proxy's cut really refuses connections.

mod support;

use std::path::PathBuf;

use billet_provider::{Provider, Spec, TrustClass};
use support::{Scope, SocketProxy, TEST_IMAGE, daemon, exists};

// D9: a test that fails (panics) mid-way still removes every container it
// started, through its scope's guard.
#[test]
fn d9_a_failing_test_leaves_nothing_behind() {
    let Some(probe) = daemon("cleanup-probe") else {
        return;
    };
    drop(probe);
    let outcome = std::thread::spawn(|| {
        let scope = daemon("cleanup").expect("the daemon answered a moment ago");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let id = runtime.block_on(async {
            let blue = scope.provider("blue");
            let spec = Spec::new("job", ["sleep", "300"])
                .with_image(TEST_IMAGE)
                .with_trust(TrustClass::Trusted);
            blue.launch(spec).await.unwrap().id
        });
        assert!(exists(id.as_str()));
        std::panic::panic_any(id.into_string());
    })
    .join();
    let id = *outcome
        .expect_err("the test thread failed on purpose")
        .downcast::<String>()
        .expect("the id");
    assert!(!exists(&id), "container {id} outlived its failing test");
}

// D9: a test that fails while the daemon is gone fails as itself. Its scope's
// guard cannot clean up; while the test thread unwinds it says so on stderr
// and does not panic again (a panic during unwinding aborts the whole test
// run, this test included). A scope dropped by a test that did not fail still
// fails loudly, naming the daemon's socket. Both ways a daemon is gone: no
// socket at all, and a socket nothing listens on (connections refused).
// Needs no daemon: it has none.
#[test]
fn d9_a_failing_test_with_the_daemon_gone_does_not_abort_the_run() {
    let dir = std::env::temp_dir().join(format!("billet-d9-gone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let refusing = dir.join("docker.sock");
    let _ = std::fs::remove_file(&refusing);
    drop(std::os::unix::net::UnixListener::bind(&refusing).unwrap());
    let missing = PathBuf::from("/nonexistent/billet/docker.sock");
    for gone in [missing, refusing] {
        let socket = gone.clone();
        let failed = std::thread::spawn(move || {
            let _scope = Scope::on_socket("daemon-gone-failing", socket);
            panic!("the test fails on purpose");
        })
        .join()
        .expect_err("the test thread failed on purpose");
        assert_eq!(
            failed.downcast_ref::<&str>(),
            Some(&"the test fails on purpose"),
            "the test's own failure is what it failed with ({})",
            gone.display()
        );

        let socket = gone.clone();
        let passed = std::thread::spawn(move || {
            let _scope = Scope::on_socket("daemon-gone-passing", socket);
        })
        .join()
        .expect_err("a cleanup that cannot run fails a test that passed");
        let message = passed
            .downcast_ref::<String>()
            .expect("the guard's message");
        assert!(
            message.contains(&gone.display().to_string()) && message.contains("cleanup"),
            "{message}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// D7: a cut proxy refuses connections, a restored one passes them again.
#[test]
fn d7_the_proxy_cut_is_real() {
    let Some(_scope) = daemon("proxy") else {
        return;
    };
    let proxy = SocketProxy::start();
    assert!(std::os::unix::net::UnixStream::connect(proxy.path()).is_ok());
    proxy.cut();
    let refused = std::os::unix::net::UnixStream::connect(proxy.path()).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    proxy.restore();
    assert!(std::os::unix::net::UnixStream::connect(proxy.path()).is_ok());
}

// D11 (the tool H11 uses): the proxy's lost answer is real. It counts
// requests, not connections (here several ride one kept-alive connection):
// after `n` answered requests, the next reaches the daemon (the container is
// created) while its caller gets no answer; then connects are refused until
// `restore`. `cut_answer_after` hands over only part of the answer.
#[test]
fn d11_the_proxy_loses_an_answer_for_real() {
    let Some(scope) = daemon("proxy-lose") else {
        return;
    };
    let proxy = SocketProxy::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        use hyper_util::rt::TokioIo;
        let stream = tokio::net::UnixStream::connect(proxy.path()).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        let ping = || {
            hyper::Request::get("/_ping")
                .header("Host", "docker")
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap()
        };
        proxy.lose_answer_after(2);
        for _ in 0..2 {
            let answer = sender.send_request(ping()).await.unwrap();
            assert!(answer.status().is_success());
        }
        let body = format!(
            r#"{{"Image":"{TEST_IMAGE}","Cmd":["true"],"Labels":{{"{}":"{}"}}}}"#,
            support::TEST_RUN_LABEL,
            scope.run_id()
        );
        let create = hyper::Request::post("/containers/create")
            .header("Host", "docker")
            .header("Content-Type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(body)))
            .unwrap();
        sender.ready().await.unwrap();
        let lost = sender.send_request(create).await;
        assert!(lost.is_err(), "the answer came: {lost:?}");
        let _ = driver.await;
    });
    assert_eq!(proxy.delivered(), 3);
    assert_eq!(scope.leftovers().len(), 1, "the create reached the daemon");
    let refused = std::os::unix::net::UnixStream::connect(proxy.path()).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    proxy.restore();
    assert!(std::os::unix::net::UnixStream::connect(proxy.path()).is_ok());

    // Part of an answer: the head and 5 bytes of the body, then closed.
    proxy.cut_answer_after(0, 5);
    let cut = runtime.block_on(async {
        use http_body_util::BodyExt;
        use hyper_util::rt::TokioIo;
        let stream = tokio::net::UnixStream::connect(proxy.path()).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::get("/version")
            .header("Host", "docker")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let answer = sender.send_request(request).await.unwrap();
        assert!(answer.status().is_success());
        answer.into_body().collect().await.map(|b| b.to_bytes())
    });
    assert!(cut.is_err(), "the whole answer came: {cut:?}");
    assert_eq!(proxy.delivered(), 4);
}

/// Asks the daemon for a scope and does nothing with it: the probe the next
/// test runs in a child process with the daemon's socket pointed elsewhere.
#[test]
fn d9_probe_asks_for_a_daemon() {
    let _scope = daemon("d9-probe");
}

// D9: with no daemon, the docker tests skip with one line saying how to run
// them; with BILLET_DOCKER_REQUIRED=1 (as `.ci/run` sets it) they fail.
#[test]
fn d9_a_missing_daemon_skips_or_fails_as_configured() {
    let run = |required: bool| {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                "d9_probe_asks_for_a_daemon",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("DOCKER_HOST", "unix:///nonexistent/billet/docker.sock")
            .env("RUST_BACKTRACE", "0");
        if required {
            child.env(support::REQUIRED_VAR, "1");
        } else {
            child.env_remove(support::REQUIRED_VAR);
        }
        let out = child.output().expect("run the probe");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (passed, text) = run(false);
    assert!(passed, "{text}");
    let skip_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("skipped d9-probe"))
        .collect();
    assert_eq!(skip_lines.len(), 1, "{text}");
    assert!(
        skip_lines[0].contains("/nonexistent/billet/docker.sock")
            && skip_lines[0].contains("dockerd")
    );
    let (passed, text) = run(true);
    assert!(!passed, "{text}");
    assert!(
        text.contains("BILLET_DOCKER_REQUIRED=1 but no docker daemon answers"),
        "{text}"
    );
}
