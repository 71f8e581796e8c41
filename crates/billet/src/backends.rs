//! One provider per configured pool (L2): docker pools over their daemon;
//! a kind this release cannot build stops the start, naming the pool.

use std::sync::Arc;
use std::time::Duration;

use billet_config::{Config, ConfigKind, Settings as PoolSettings};
use billet_docker::{
    ClientTls, Confinement, DEFAULT_LOG_MAX_SIZE, DockerProvider, RuntimeError, StorageError,
    TlsError, TlsFiles,
};
use billet_provider::Provider;

/// A pool's provider under the pool's configured name.
pub type Named = (String, Arc<dyn Provider>);

/// Every configured pool's provider, and the docker pools among them that
/// name a runtime, to be checked against their daemon ([`check_runtimes`]).
pub struct Built {
    /// Every pool's provider, in configuration order.
    pub named: Vec<Named>,
    /// The docker pools that name a runtime (D19), by name.
    pub runtimes: Vec<(String, Arc<DockerProvider>)>,
    /// The docker pools that bound a container's writable layer (L27), by
    /// name, with their image ([`check_storage`]).
    pub storages: Vec<(String, Arc<DockerProvider>, String)>,
}

/// A pool whose provider could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// This release has no backend for the pool's kind.
    #[error(
        "provider {provider:?} is of kind {kind}, which this release of billet cannot run (it runs docker)"
    )]
    Unsupported {
        /// The pool.
        provider: String,
        /// Its kind.
        kind: ConfigKind,
    },
    /// A docker pool's `tls` files cannot serve (D17): missing, unreadable,
    /// no certificate or key in them, or a key that is not its
    /// certificate's. The error names the file.
    #[error("provider {provider:?}: {source}")]
    Tls {
        /// The pool.
        provider: String,
        /// Which file, and why.
        source: TlsError,
    },
    /// A docker pool's runtime cannot serve it (D19): its daemon does not
    /// list it, or runs a host-kernel runtime for a pool that says
    /// `isolation: boundary`.
    #[error("provider {provider:?}: {reason}")]
    Runtime {
        /// The pool.
        provider: String,
        /// What the daemon said, and what to do.
        reason: String,
    },
    /// A docker pool's `storage` cannot be kept by its daemon (L27).
    #[error("provider {provider:?}: {reason}")]
    Storage {
        /// The pool.
        provider: String,
        /// What the daemon said, and what to do.
        reason: String,
    },
    /// The backend refused its settings.
    #[error("provider {provider:?} ({kind}): {reason}")]
    Invalid {
        /// The pool.
        provider: String,
        /// Its kind.
        kind: ConfigKind,
        /// Why.
        reason: String,
    },
}

/// Builds every configured pool's provider, in configuration order, named
/// as configured. Docker pools use the file's `docker` settings (endpoint,
/// network, mutual TLS; the image goes into every launch) and `call_timeout`
/// as the deadline of each provider call. With `output_limit` (the service
/// captures each job's output up to that many bytes, L15), each docker
/// container keeps its log as [`captured_log`] says, so that the daemon's
/// rotation never moves the bytes a capture reads. A pool's TLS files are
/// read and checked here, so a bad one stops the start naming the pool and
/// the file.
pub fn build(
    config: &Config,
    call_timeout: Duration,
    output_limit: Option<u64>,
) -> Result<Built, BackendError> {
    let owner = config.deployment().id();
    let mut runtimes = Vec::new();
    let mut storages = Vec::new();
    let named = config
        .providers()
        .iter()
        .map(|pool| {
            let name = pool.name().to_owned();
            let provider: Arc<dyn Provider> = match pool.settings() {
                PoolSettings::Docker(docker) => {
                    let mut builder = DockerProvider::builder(owner).timeout(call_timeout);
                    if let Some(endpoint) = &docker.endpoint {
                        builder = builder.endpoint(endpoint.clone());
                    }
                    if let Some(tls) = &docker.tls {
                        let files = TlsFiles {
                            ca: tls.ca.clone(),
                            cert: tls.cert.clone(),
                            key: tls.key.clone(),
                        };
                        let tls = ClientTls::load(files).map_err(|source| BackendError::Tls {
                            provider: name.clone(),
                            source,
                        })?;
                        builder = builder.tls(tls);
                    }
                    builder = builder.confinement(confinement(docker, output_limit));
                    if let Some(network) = &docker.network {
                        builder = builder.network(network.clone());
                    }
                    if let Some(runtime) = &docker.runtime {
                        builder = builder.runtime(runtime.clone());
                    }
                    builder = builder.isolation(docker.isolation);
                    let provider =
                        Arc::new(builder.build().map_err(|e| BackendError::Invalid {
                            provider: name.clone(),
                            kind: pool.kind(),
                            reason: e.to_string(),
                        })?);
                    if docker.runtime.is_some() {
                        runtimes.push((name.clone(), Arc::clone(&provider)));
                    }
                    if docker.storage.is_some() {
                        storages.push((name.clone(), Arc::clone(&provider), docker.image.clone()));
                    }
                    provider
                }
                _ => {
                    return Err(BackendError::Unsupported {
                        provider: name,
                        kind: pool.kind(),
                    });
                }
            };
            Ok((name, provider))
        })
        .collect::<Result<Vec<Named>, BackendError>>()?;
    Ok(Built {
        named,
        runtimes,
        storages,
    })
}

/// Asks each docker pool's daemon whether it can run the pool's runtime
/// (D19, [`DockerProvider::check_runtime`]), one pool after another, each
/// within the provider's call timeout. A daemon that does not list the
/// runtime, or runs a host-kernel runtime for a pool that says `isolation:
/// boundary`, stops the start naming the pool. A daemon that cannot be asked
/// now is logged and left to the pool's first launch, which asks again: a
/// pool whose daemon is down is unreadable as any other (D17), not a reason
/// to stop the others.
pub async fn check_runtimes(pools: &[(String, Arc<DockerProvider>)]) -> Result<(), BackendError> {
    for (name, provider) in pools {
        match provider.check_runtime().await {
            Ok(()) => tracing::info!(
                pool = %name,
                runtime = provider.runtime().unwrap_or_default(),
                isolation = ?provider.isolation(),
                "the pool's daemon lists its runtime"
            ),
            Err(RuntimeError::Daemon(err)) => tracing::warn!(
                pool = %name,
                error = %err,
                "cannot check the pool's runtime now; its first launch will"
            ),
            Err(err) => {
                return Err(BackendError::Runtime {
                    provider: name.clone(),
                    reason: err.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// Asks each docker pool that bounds a container's writable layer whether its
/// daemon keeps the bound (L27, [`DockerProvider::check_storage`]), one pool
/// after another: a daemon that refuses such a container, or ignores the
/// bound, stops the start naming the pool. A daemon that cannot be asked now
/// is logged, as for [`check_runtimes`]; its launches then say what it does.
pub async fn check_storage(
    pools: &[(String, Arc<DockerProvider>, String)],
) -> Result<(), BackendError> {
    for (name, provider, image) in pools {
        match provider.check_storage(image).await {
            Ok(()) => tracing::info!(pool = %name, "the pool's daemon keeps its `storage` bound"),
            Err(StorageError::Daemon(err)) => tracing::warn!(
                pool = %name,
                error = %err,
                "cannot check the pool's `storage` bound now"
            ),
            Err(err) => {
                return Err(BackendError::Storage {
                    provider: name.clone(),
                    reason: err.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// The log a container whose output is captured up to `output_limit`
/// bytes keeps on its docker daemon: one file of twice the limit, at least
/// [`DEFAULT_LOG_MAX_SIZE`], and at most `i64::MAX` bytes (what the daemon
/// reads). The daemon's logs API cannot seek by byte, so a capture's
/// offset counts from the start of what the daemon keeps; were a file
/// rotated away before the capture had read it (a fast writer outrunning
/// the follow, or a restart mid-job), the capture would lose or repeat
/// bytes. The json-file driver counts its own encoding (a line's stream and
/// time, about 60 bytes), so twice the limit holds a job's first `limit`
/// bytes unless its lines average under about 60 bytes. One file, rather
/// than docker's three: the container's log on the host stays within that
/// one size (D15).
pub fn captured_log(output_limit: u64) -> (u64, u32) {
    let size = output_limit
        .saturating_mul(2)
        .clamp(DEFAULT_LOG_MAX_SIZE, i64::MAX as u64);
    (size, 1)
}

/// A docker pool's confinement (D15): the backend's safe default, with what
/// the pool's `docker:` block sets (`cpus`, `memory`, `pids_limit`, `user`,
/// `read_only`; `cap_add` granted on top of the default set), and the log
/// [`captured_log`] sizes when the output is captured up to `output_limit`.
fn confinement(docker: &billet_config::DockerSettings, output_limit: Option<u64>) -> Confinement {
    let mut confinement = Confinement::default()
        .with_read_only(docker.read_only)
        .with_cap_add(docker.cap_add.iter().cloned());
    if let Some(cpus) = docker.cpus() {
        confinement = confinement.with_cpus(cpus);
    }
    if let Some(memory) = docker.memory {
        confinement = confinement.with_memory(memory.get());
    }
    if let Some(limit) = docker.pids_limit {
        confinement = confinement.with_pids_limit(limit.get());
    }
    if let Some(storage) = docker.storage {
        confinement = confinement.with_storage(storage.get());
    }
    if let Some(user) = &docker.user {
        confinement = confinement.with_user(user.clone());
    }
    if let Some(limit) = output_limit {
        let (max_size, max_files) = captured_log(limit);
        confinement = confinement.with_log(max_size, max_files);
    }
    confinement
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("billet.yaml");
        std::fs::write(&path, yaml).unwrap();
        Config::load(&path).unwrap()
    }

    // D15: a pool's `docker:` confinement settings reach its provider's
    // confinement; absent, the backend's safe default holds.
    #[test]
    fn d15_pool_settings_become_the_confinement() {
        let docker = |config: &Config| match config.providers()[0].settings() {
            PoolSettings::Docker(docker) => docker.clone(),
            _ => unreachable!("a docker pool"),
        };
        let plain = config(
            "deployment: {id: d}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: i}}
routing: {default_kind: docker}
",
        );
        assert_eq!(confinement(&docker(&plain), None), Confinement::default());
        let set = config(
            "deployment: {id: d}
providers:
  - name: linux
    kind: docker
    capacity: 2
    docker: {image: i, cpus: 1.5, memory: 2GiB, pids_limit: 64, user: '1000:1000', read_only: true, cap_add: [cap_net_raw]}
routing: {default_kind: docker}
",
        );
        let expected = Confinement::default()
            .with_cpus(1.5)
            .with_memory(2 << 30)
            .with_pids_limit(64)
            .with_user("1000:1000")
            .with_read_only(true)
            .with_cap_add(["NET_RAW"]);
        assert_eq!(confinement(&docker(&set), None), expected);
        // L15: a captured pool's containers keep their log as
        // `captured_log` says, the rest of the confinement as set.
        assert_eq!(
            confinement(&docker(&set), Some(64 << 20)),
            expected.with_log(128 << 20, 1)
        );
        assert!(build(&set, Duration::from_secs(5), None).is_ok());
    }

    // D19: a pool's runtime and isolation reach its provider, which then
    // accepts untrusted work; only such pools are checked against their
    // daemon; `isolation: boundary` on runc or crun stops the start naming
    // the pool.
    #[test]
    fn d19_a_pools_runtime_and_boundary_reach_its_provider() {
        use billet_provider::{Isolation, TrustClass};
        let yaml = |docker: &str| {
            format!(
                "deployment: {{id: d}}
providers:
  - {{name: plain, kind: docker, capacity: 2, docker: {{image: i}}}}
  - {{name: gvisor, kind: docker, capacity: 2, docker: {{image: i, {docker}}}}}
routing: {{default_kind: docker, untrusted_kinds: [docker]}}
"
            )
        };
        let built = build(
            &config(&yaml("runtime: runsc, isolation: boundary")),
            Duration::from_secs(5),
            None,
        )
        .unwrap();
        let names: Vec<&str> = built.named.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["plain", "gvisor"]);
        assert!(built.named[0].1.accepts(TrustClass::Untrusted).is_err());
        assert!(built.named[1].1.accepts(TrustClass::Untrusted).is_ok());
        assert!(built.named[1].1.accepts(TrustClass::Unknown).is_ok());
        assert_eq!(built.runtimes.len(), 1);
        let (name, gvisor) = &built.runtimes[0];
        assert_eq!(name, "gvisor");
        assert_eq!(
            (gvisor.runtime(), gvisor.isolation()),
            (Some("runsc"), Isolation::Boundary)
        );
        let runtime_only = build(
            &config(&yaml("runtime: kata")),
            Duration::from_secs(5),
            None,
        )
        .unwrap();
        assert!(
            runtime_only.named[1]
                .1
                .accepts(TrustClass::Untrusted)
                .is_err()
        );
        assert_eq!(
            runtime_only.runtimes[0].1.isolation(),
            Isolation::NoBoundary
        );
        for host_kernel in ["runc", "crun"] {
            let Err(err) = build(
                &config(&yaml(&format!(
                    "runtime: {host_kernel}, isolation: boundary"
                ))),
                Duration::from_secs(5),
                None,
            ) else {
                panic!("{host_kernel} taken for a boundary");
            };
            assert!(matches!(err, BackendError::Invalid { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains("provider \"gvisor\"") && text.contains("no isolation boundary"),
                "{text}"
            );
        }
    }

    // L15: a captured container's log is one file of twice the output
    // limit, never under docker's default size nor past what the daemon reads.
    #[test]
    fn l15_a_captured_log_holds_twice_the_limit_in_one_file() {
        assert_eq!(captured_log(64 << 20), (128 << 20, 1));
        assert_eq!(
            captured_log((DEFAULT_LOG_MAX_SIZE / 2) + 1),
            (DEFAULT_LOG_MAX_SIZE + 2, 1)
        );
        assert_eq!(
            captured_log(DEFAULT_LOG_MAX_SIZE / 2),
            (DEFAULT_LOG_MAX_SIZE, 1)
        );
        assert_eq!(captured_log(1), (DEFAULT_LOG_MAX_SIZE, 1));
        assert_eq!(captured_log(u64::MAX), (i64::MAX as u64, 1));
        assert_eq!(captured_log(i64::MAX as u64 / 2 + 1), (i64::MAX as u64, 1));
    }

    // D17: a pool's tls files are read at start: good ones reach its
    // provider; a missing file or a key that is not the certificate's stops
    // the start, naming the pool and the file.
    #[test]
    fn d17_tls_files_are_checked_at_start_naming_pool_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let client_key = rcgen::KeyPair::generate().unwrap();
        let client = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .signed_by(&client_key, &issuer)
            .unwrap();
        let other_key = rcgen::KeyPair::generate().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("cert.pem"), client.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), client_key.serialize_pem()).unwrap();
        std::fs::write(dir.path().join("other.pem"), other_key.serialize_pem()).unwrap();
        for key in ["key.pem", "other.pem"] {
            std::fs::set_permissions(
                dir.path().join(key),
                std::os::unix::fs::PermissionsExt::from_mode(0o600),
            )
            .unwrap();
        }
        let yaml = |key: &str| {
            format!(
                "deployment: {{id: d}}
providers:
  - {{name: linux, kind: docker, capacity: 2, docker: {{image: i}}}}
  - name: far
    kind: docker
    capacity: 2
    docker: {{image: i, endpoint: 'tcp://10.0.0.5:2376', tls: {{ca: ca.pem, cert: cert.pem, key: {key}}}}}
routing: {{default_kind: docker}}
"
            )
        };
        let load = |key: &str| {
            let path = dir.path().join("billet.yaml");
            std::fs::write(&path, yaml(key)).unwrap();
            Config::load(&path).unwrap()
        };
        let built = build(&load("key.pem"), Duration::from_secs(5), None).unwrap();
        assert_eq!(built.named.len(), 2);

        for (key, file) in [("missing.pem", "missing.pem"), ("other.pem", "other.pem")] {
            let error = build(&load(key), Duration::from_secs(5), None)
                .err()
                .unwrap();
            assert!(
                matches!(&error, BackendError::Tls { provider, .. } if provider == "far"),
                "{error}"
            );
            let text = error.to_string();
            assert!(text.contains("\"far\"") && text.contains(file), "{text}");
        }
    }

    // L2: docker pools are built with their settings; tart and firecracker
    // stop the start, naming the pool and the kind.
    #[test]
    fn l2_docker_is_built_and_other_kinds_are_refused() {
        let docker = config(
            "deployment: {id: d}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: i, endpoint: 'unix:///tmp/x.sock', network: n}}
routing: {default_kind: docker}
",
        );
        let built = build(&docker, Duration::from_secs(5), None).unwrap().named;
        assert_eq!(built.len(), 1);
        assert_eq!(built[0].0, "linux");
        assert_eq!(built[0].1.kind(), billet_provider::ProviderKind::Docker);

        let tart = config(
            "deployment: {id: d}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: i}}
  - {name: macs, kind: tart, capacity: 1, tart: {image: m}}
routing: {default_kind: docker}
",
        );
        let error = build(&tart, Duration::from_secs(5), None).err().unwrap();
        assert_eq!(
            error,
            BackendError::Unsupported {
                provider: "macs".into(),
                kind: ConfigKind::parse("tart").unwrap()
            }
        );
        let text = error.to_string();
        assert!(text.contains("\"macs\"") && text.contains("tart"), "{text}");

        let bad = config(
            "deployment: {id: d}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: i, endpoint: 'ftp://nowhere'}}
routing: {default_kind: docker}
",
        );
        let error = build(&bad, Duration::from_secs(5), None).err().unwrap();
        assert!(matches!(error, BackendError::Invalid { .. }), "{error}");
        let error = build(&docker, Duration::ZERO, None).err().unwrap();
        assert!(matches!(error, BackendError::Invalid { .. }), "{error}");
    }
}
