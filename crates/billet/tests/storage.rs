//! L27: a pool's `storage` bound, checked by the built `billet serve` at
//! start against the pool's daemon: one whose storage driver cannot bound a
//! container's writable layer (CI's docker and podman keep theirs on ext4)
//! stops the start, naming the pool and the daemon's words, before the
//! state directory is made. Without a daemon the test skips with one line,
//! unless `BILLET_DOCKER_REQUIRED=1`.

mod support;

use billet_docker::{Confinement, DockerProvider, StorageError};
use support::{TEST_IMAGE, daemon, daemon_endpoint, serve_refused};

// L27: `storage` on a daemon that cannot keep it stops `serve` at start
// (exit 2), naming the pool, the bound and what the daemon said; on one that
// can, the start goes on (and this test says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l27_a_storage_bound_the_daemon_cannot_keep_stops_the_start() {
    if !daemon("l27-storage") {
        return;
    }
    let endpoint = daemon_endpoint();
    let provider = DockerProvider::builder("l27-storage-probe")
        .endpoint(endpoint.clone())
        .confinement(Confinement::default().with_storage(1 << 30))
        .build()
        .unwrap();
    match provider.check_storage(TEST_IMAGE).await {
        Err(StorageError::Refused { .. } | StorageError::Ignored { .. }) => {}
        Ok(()) => {
            eprintln!("l27: the daemon at {endpoint} keeps a `storage` bound: no start to refuse");
            return;
        }
        Err(err) => panic!("the daemon could not be asked: {err}"),
    }
    let refused = tokio::task::spawn_blocking(move || {
        serve_refused(&format!(
            "deployment: {{id: l27-storage}}
providers:
  - {{name: bounded, kind: docker, capacity: 1, docker: {{image: \"{TEST_IMAGE}\", endpoint: \"{endpoint}\", storage: 1GiB}}}}
routing: {{default_kind: docker}}
"
        ))
    })
    .await
    .unwrap();
    let stderr = &refused.stderr;
    assert_eq!(refused.code, Some(2), "{stderr}");
    assert!(
        stderr.contains("provider \"bounded\"")
            && stderr.contains("`storage: 1073741824` cannot be kept")
            && stderr.contains("storage drivers"),
        "{stderr}"
    );
    assert!(
        !refused.state_made,
        "nothing is made before the pools are checked"
    );
}
