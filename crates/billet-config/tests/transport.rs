//! D17: how a docker pool reaches its daemon. `tcp://` with `tls: {ca,
//! cert, key}` is mutual TLS, its relative paths taken from the file's
//! directory; plain `tcp://` is refused unless the pool says `insecure:
//! true`; `tls` without a `tcp://` endpoint, and `insecure` with `tls` or
//! without plain TCP, are refused, each at its place.

mod common;

use std::path::PathBuf;

use billet_config::{Config, DockerTls};
use common::{EXAMPLE, assert_bad_docker_setting, docker_of, docker_settings, edit, refuse};

/// The example's docker pool's endpoint line; `with` puts settings in its
/// place.
const ENDPOINT: &str = "      endpoint: unix:///var/run/docker.sock\n";

/// The example with its docker pool's endpoint line replaced by `settings`
/// (lines of the docker block; no endpoint unless they give one).
fn with(settings: &str) -> String {
    edit(ENDPOINT, settings)
}

const TLS: &str = "      endpoint: tcp://10.0.0.5:2376\n      tls: {ca: certs/ca.pem, cert: certs/cert.pem, key: /etc/billet/key.pem}\n";

// D17: a socket needs nothing; tcp:// with tls is read with its paths; a
// pool that says insecure: true may use plain tcp.
#[test]
fn d17_tls_and_insecure_are_read() {
    let plain = docker_settings(EXAMPLE);
    assert_eq!((plain.tls, plain.insecure), (None, false));
    let local = docker_settings(&with(""));
    assert_eq!(
        (local.endpoint, local.tls, local.insecure),
        (None, None, false)
    );

    let socket = docker_settings(&with("      endpoint: unix:///run/docker.sock\n"));
    assert_eq!(socket.tls, None);

    let tls = docker_settings(&with(TLS));
    assert_eq!(tls.endpoint.as_deref(), Some("tcp://10.0.0.5:2376"));
    assert_eq!(
        tls.tls,
        Some(DockerTls {
            ca: PathBuf::from("certs/ca.pem"),
            cert: PathBuf::from("certs/cert.pem"),
            key: PathBuf::from("/etc/billet/key.pem"),
        }),
        "from text, paths stay as written"
    );
    assert!(!tls.insecure);

    let insecure = docker_settings(&with(
        "      endpoint: tcp://10.0.0.5:2375\n      insecure: true\n",
    ));
    assert_eq!((insecure.tls, insecure.insecure), (None, true));
    let said_false = docker_settings(&with("      insecure: false\n"));
    assert!(!said_false.insecure);
}

// D17: loaded from a file, a relative tls path is relative to the file's
// directory; an absolute one stays.
#[test]
fn d17_relative_tls_paths_are_the_files_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conf").join("billet.yaml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, with(TLS)).unwrap();
    let tls = docker_of(&Config::load(&path).unwrap()).tls.unwrap();
    assert_eq!(tls.ca, dir.path().join("conf/certs/ca.pem"));
    assert_eq!(tls.cert, dir.path().join("conf/certs/cert.pem"));
    assert_eq!(tls.key, PathBuf::from("/etc/billet/key.pem"));
}

// D17: plain TCP without `insecure: true` is refused at the endpoint,
// saying why and what to write instead; so are tls without tcp://, blank
// tls paths, insecure with tls, insecure without plain TCP, and a tls
// block missing a file or naming another.
#[test]
fn d17_unsafe_or_contradictory_transports_are_refused_at_their_place() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "      endpoint: tcp://10.0.0.5:2375\n",
            "endpoint: tcp://",
            "endpoint",
            "is plain TCP",
        ),
        (
            "      endpoint: http://10.0.0.5:2375\n",
            "endpoint: http://",
            "endpoint",
            "insecure: true",
        ),
        (
            "      endpoint: TCP://10.0.0.5:2375\n      insecure: false\n",
            "endpoint: TCP://",
            "endpoint",
            "root on the daemon's machine",
        ),
        (
            "      tls: {ca: a, cert: b, key: c}\n",
            "tls: {",
            "tls",
            "needs `endpoint: tcp://HOST:PORT`",
        ),
        (
            "      endpoint: unix:///run/docker.sock\n      tls: {ca: a, cert: b, key: c}\n",
            "tls: {",
            "tls",
            "needs `endpoint: tcp://HOST:PORT`",
        ),
        (
            "      endpoint: http://h:1\n      tls: {ca: a, cert: b, key: c}\n",
            "tls: {",
            "tls",
            "needs `endpoint: tcp://HOST:PORT`",
        ),
        (
            "      endpoint: tcp://h:1\n      tls: {ca: ' ', cert: b, key: c}\n",
            "' '",
            "tls.ca",
            "not blank",
        ),
        (
            "      endpoint: tcp://h:1\n      tls: {ca: a, cert: '', key: c}\n",
            "''",
            "tls.cert",
            "not blank",
        ),
        (
            "      endpoint: tcp://h:1\n      tls: {ca: a, cert: b, key: ''}\n",
            "''",
            "tls.key",
            "not blank",
        ),
        (
            "      endpoint: tcp://h:1\n      tls: {ca: a, cert: b, key: c}\n      insecure: true\n",
            "insecure: true",
            "insecure",
            "contradict",
        ),
        (
            "      insecure: true\n",
            "insecure: true",
            "insecure",
            "this pool has none",
        ),
        (
            "      endpoint: unix:///run/docker.sock\n      insecure: true\n",
            "insecure: true",
            "insecure",
            "this pool has none",
        ),
    ];
    for (setting, needle, field, says) in cases {
        assert_bad_docker_setting(&with(setting), needle, field, says);
    }
    for broken in [
        "      endpoint: tcp://h:1\n      tls: {ca: a, cert: b}\n",
        "      endpoint: tcp://h:1\n      tls: {ca: a, cert: b, key: c, password: d}\n",
        "      endpoint: tcp://h:1\n      tls: yes\n",
        "      endpoint: tcp://h:1\n      insecure: maybe\n",
    ] {
        let error = refuse(&with(broken));
        assert!(
            error.to_string().contains("providers[0].docker"),
            "{broken}: {error}"
        );
    }
}
