//! D17: mutual TLS to a daemon. Each TLS file that cannot serve is refused
//! when the provider is made, naming the file; a daemon of the test's own
//! (`--tlsverify` on loopback) serves a provider whose certificates its CA
//! signed, and refuses, with a clear error and well within the call's
//! deadline, a client certificate of another CA, a daemon certificate the
//! client's CA did not sign, and plain HTTP.

mod support;

use std::time::{Duration, Instant};

use billet_docker::{ClientTls, DockerProvider, TlsError, TlsFile, TlsFiles};
use billet_provider::{Error, Provider, Spec, TrustClass};
use support::tls::{Ca, TlsDaemon, can_start_daemons, client_tls, write_files};
use support::{TEST_IMAGE, block};

/// The deadline of every call in these tests.
const TIMEOUT: Duration = Duration::from_secs(10);

fn files_of(dir: &std::path::Path) -> (Ca, TlsFiles) {
    let ca = Ca::new("billet test CA");
    let files = ca.client_files(dir);
    (ca, files)
}

// D17: good files load; each bad one is refused naming its role and path,
// and a key others may read is refused as the token file is (L13).
#[test]
fn d17_each_unusable_tls_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, files) = files_of(dir.path());
    let loaded = ClientTls::load(files.clone()).expect("good files load");
    assert_eq!(loaded.files(), &files);

    // A missing file, for each role.
    for role in [TlsFile::Ca, TlsFile::Cert, TlsFile::Key] {
        let mut missing = files.clone();
        let path = dir.path().join(format!("missing-{role}.pem"));
        match role {
            TlsFile::Ca => missing.ca = path.clone(),
            TlsFile::Cert => missing.cert = path.clone(),
            TlsFile::Key => missing.key = path.clone(),
        }
        let err = ClientTls::load(missing).unwrap_err();
        assert!(
            matches!(&err, TlsError::Unreadable { file, path: p, .. } if *file == role && *p == path),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("`{role}`")) && text.contains(&path.display().to_string()),
            "{text}"
        );
    }

    // A directory is not a file.
    let mut directory = files.clone();
    directory.ca = dir.path().to_owned();
    assert!(matches!(
        ClientTls::load(directory),
        Err(TlsError::Unreadable {
            file: TlsFile::Ca,
            ..
        })
    ));

    // A file that holds no certificate, or a key where the certificate goes.
    let other = tempfile::tempdir().unwrap();
    let (cert, key) = ca.client("billet");
    let garbage = write_files(other.path(), "not a certificate\n", &key, &key);
    let err = ClientTls::load(garbage.clone()).unwrap_err();
    assert!(
        matches!(&err, TlsError::Malformed { file: TlsFile::Ca, path, .. } if *path == garbage.ca),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("holds no PEM certificate"),
        "{err}"
    );
    let key_as_cert = write_files(other.path(), &ca.pem, &key, &key);
    let err = ClientTls::load(key_as_cert).unwrap_err();
    assert!(
        matches!(
            &err,
            TlsError::Malformed {
                file: TlsFile::Cert,
                ..
            }
        ),
        "{err:?}"
    );

    // A certificate where the key goes.
    let cert_as_key = write_files(other.path(), &ca.pem, &cert, &cert);
    let err = ClientTls::load(cert_as_key).unwrap_err();
    assert!(
        matches!(
            &err,
            TlsError::Malformed {
                file: TlsFile::Key,
                ..
            }
        ),
        "{err:?}"
    );

    // A PEM block that says CERTIFICATE but holds no certificate.
    let broken =
        "-----BEGIN CERTIFICATE-----\nAAECAwQFBgcICQoLDA0ODw==\n-----END CERTIFICATE-----\n";
    let broken_ca = write_files(other.path(), broken, &cert, &key);
    let err = ClientTls::load(broken_ca).unwrap_err();
    assert!(
        matches!(&err, TlsError::Malformed { file: TlsFile::Ca, reason, .. } if reason.contains("does not parse")),
        "{err:?}"
    );
    let broken_cert = write_files(other.path(), &ca.pem, broken, &key);
    let err = ClientTls::load(broken_cert).unwrap_err();
    assert!(
        matches!(
            &err,
            TlsError::Malformed {
                file: TlsFile::Cert,
                ..
            }
        ),
        "{err:?}"
    );

    // A key that is not the certificate's.
    let (_, stranger) = ca.client("someone else");
    let mismatched = write_files(other.path(), &ca.pem, &cert, &stranger);
    let err = ClientTls::load(mismatched.clone()).unwrap_err();
    assert_eq!(
        err,
        TlsError::KeyMismatch {
            cert: mismatched.cert.clone(),
            key: mismatched.key
        }
    );
    assert!(err.to_string().contains("is not the private key"), "{err}");

    // A file far larger than any PEM file is not read whole.
    let huge = other.path().join("huge.pem");
    std::fs::write(
        &huge,
        vec![b'A'; (billet_docker::MAX_PEM_BYTES + 1) as usize],
    )
    .unwrap();
    std::fs::set_permissions(&huge, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut too_big = files.clone();
    too_big.key = huge;
    assert!(matches!(
        ClientTls::load(too_big),
        Err(TlsError::Unreadable {
            file: TlsFile::Key,
            ..
        })
    ));

    // A key group or others may read or write is refused, saying its mode
    // and what to do; the CA and the certificate are public.
    use std::os::unix::fs::PermissionsExt;
    let set = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set(&files.ca, 0o644);
    set(&files.cert, 0o644);
    for private in [0o600, 0o400, 0o700] {
        set(&files.key, private);
        ClientTls::load(files.clone()).unwrap_or_else(|e| panic!("{private:o}: {e}"));
    }
    for exposed in [0o640, 0o620, 0o604, 0o602, 0o644, 0o666] {
        set(&files.key, exposed);
        let err = ClientTls::load(files.clone()).unwrap_err();
        assert_eq!(
            err,
            TlsError::Exposed {
                path: files.key.clone(),
                mode: exposed
            }
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("mode {exposed:04o}")) && text.contains("chmod 600"),
            "{text}"
        );
    }
}

// D17: mutual TLS is for a tcp endpoint; with a unix socket the provider
// is refused, saying so.
#[test]
fn d17_tls_with_a_socket_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, files) = files_of(dir.path());
    let tls = ClientTls::load(files).unwrap();
    let err = DockerProvider::builder("d17")
        .endpoint("unix:///var/run/docker.sock")
        .tls(tls.clone())
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::InvalidSpec { .. }), "{err:?}");
    assert!(err.to_string().contains("tcp://"), "{err}");
    let provider = DockerProvider::builder("d17")
        .endpoint("tcp://127.0.0.1:2376")
        .tls(tls)
        .build()
        .unwrap();
    assert!(provider.tls().is_some());
}

/// A provider for `owner` on `endpoint` over `tls`.
fn provider(owner: &str, endpoint: &str, tls: Option<ClientTls>) -> DockerProvider {
    let mut builder = DockerProvider::builder(owner)
        .endpoint(endpoint)
        .timeout(TIMEOUT)
        .network("none");
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    builder.build().unwrap()
}

/// `list` on `provider`: its error and how long it took.
fn list_fails(provider: DockerProvider) -> (Error, Duration) {
    let started = Instant::now();
    let answer = block(async move { provider.list().await });
    (
        answer.expect_err("the daemon must refuse this client"),
        started.elapsed(),
    )
}

// D17: over mutual TLS a job runs to its exit code on the daemon; a client
// certificate another CA signed, a daemon certificate the client's CA did
// not sign, and plain HTTP to the TLS port are each refused with an error
// that says why, and none waits for the call's deadline.
#[test]
fn d17_the_daemon_serves_its_ca_and_refuses_everything_else() {
    if !can_start_daemons("d17-refusals") {
        return;
    }
    let ca = Ca::new("billet test CA");
    let daemon = TlsDaemon::start("d17-refusals", &ca);
    let scope = daemon.scope("d17-refusals");
    let dir = tempfile::tempdir().unwrap();

    // Its own CA: launch, list, destroy.
    let good = provider(
        &scope.owner("good"),
        &daemon.endpoint,
        Some(client_tls(&ca, &dir.path().join("good"))),
    );
    let answered = block(async move {
        let spec = Spec::new("job-1", ["sh", "-c", "exit 3"])
            .with_image(TEST_IMAGE)
            .with_trust(TrustClass::Trusted);
        let instance = good.launch(spec).await?;
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let listed = good.list().await?;
            let seen = listed.iter().find(|i| i.id == instance.id).cloned();
            if let Some(seen) = seen
                && seen.state.is_stopped()
            {
                good.destroy(&instance.id).await?;
                return Ok::<_, Error>(seen);
            }
            assert!(Instant::now() < until, "the job did not end");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .expect("the daemon serves a client its CA signed");
    assert_eq!(
        answered.state,
        billet_provider::State::Stopped { exit_code: 3 },
        "{answered:?}"
    );

    // A client certificate another CA signed (the daemon's CA trusted).
    let stranger = Ca::new("another CA");
    let (cert, key) = stranger.client("billet");
    let files = write_files(&dir.path().join("foreign-client"), &ca.pem, &cert, &key);
    let (err, took) = list_fails(provider(
        &scope.owner("foreign"),
        &daemon.endpoint,
        Some(ClientTls::load(files).unwrap()),
    ));
    assert!(matches!(err, Error::InventoryUnavailable { .. }), "{err:?}");
    let text = err.to_string();
    println!("D17 client certificate of another CA: {text} ({took:?})");
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert!(took < TIMEOUT / 2, "refused only after {took:?}");

    // A daemon certificate the client's CA did not sign.
    let files = stranger.client_files(&dir.path().join("foreign-ca"));
    let (err, took) = list_fails(provider(
        &scope.owner("unsigned"),
        &daemon.endpoint,
        Some(ClientTls::load(files).unwrap()),
    ));
    let text = err.to_string();
    println!("D17 daemon certificate the CA did not sign: {text} ({took:?})");
    assert!(matches!(err, Error::InventoryUnavailable { .. }), "{err:?}");
    assert!(
        text.contains("UnknownIssuer") || text.contains("issuer"),
        "{text}"
    );
    assert!(took < TIMEOUT / 2, "refused only after {took:?}");

    // Plain HTTP to the TLS port.
    let (err, took) = list_fails(provider(&scope.owner("plain"), &daemon.endpoint, None));
    println!("D17 plain HTTP to the TLS port: {err} ({took:?})");
    assert!(matches!(err, Error::InventoryUnavailable { .. }), "{err:?}");
    assert!(took < TIMEOUT / 2, "refused only after {took:?}");

    assert!(scope.leftovers().is_empty(), "containers were left behind");
}

// D17: a connection the pool kept that the daemon's side closes just as it
// is reused (the keep-alive race) costs no answer: the read is sent again on
// a new connection (at most STALE_RETRIES times), and the inventory is whole.
#[test]
fn d17_a_kept_connection_closed_under_a_read_costs_no_answer() {
    if !can_start_daemons("d17-kept") {
        return;
    }
    let ca = Ca::new("billet test CA");
    let daemon = TlsDaemon::start("d17-kept", &ca);
    let scope = daemon.scope("d17-kept");
    let proxy = support::tls::TcpProxy::start(&daemon.endpoint);
    let dir = tempfile::tempdir().unwrap();
    let provider = provider(
        &scope.owner("kept"),
        &proxy.endpoint,
        Some(client_tls(&ca, dir.path())),
    );
    let proxy = std::sync::Arc::new(proxy);
    let closer = std::sync::Arc::clone(&proxy);
    let answers = block(async move {
        let mut answers = Vec::new();
        for _ in 0..3 {
            // A connection is kept after each list; the next list finds it
            // closed under its request.
            answers.push(provider.list().await.map(|listed| listed.len()));
            closer.close_kept();
        }
        answers
    });
    assert_eq!(answers.len(), 3, "{answers:?}");
    for answer in answers {
        assert_eq!(answer.as_ref().ok(), Some(&0), "{answer:?}");
    }
    drop(proxy);
}
