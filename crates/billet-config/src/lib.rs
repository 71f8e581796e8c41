//! The billet scheduler's configuration: loads `billet.yaml`, checks it, and
//! refuses the test-only simulated backend wherever a file could name it.
//!
//! ```no_run
//! let config = billet_config::Config::load("billet.yaml")?;
//! println!("{}", config.summary());
//! # Ok::<(), billet_config::ConfigError>(())
//! ```
//!
//! # The schema
//!
//! One YAML document, a mapping with three keys and an optional fourth. Every mapping refuses keys
//! it does not know, and every key is required unless marked optional.
//! `examples/billet.yaml` in this crate is a complete, realistic file.
//!
//! ```yaml
//! deployment:
//!   id: ci-eu-west-1            # the deployment identity: the owner written onto
//!                               # every instance this scheduler starts; not blank
//!   description: Shared CI      # optional, free text
//!
//! providers:                    # at least one
//!   - name: linux-docker        # unique (exact comparison), not blank
//!     kind: docker              # a kind: docker, tart or firecracker
//!     capacity: 48              # leases held at once, at least 1
//!     docker:                   # the settings block of the provider's kind,
//!       image: ghcr.io/example/runner:24.04     # and no other kind's block
//!       endpoint: unix:///var/run/docker.sock   # optional; or tcp://HOST:PORT, which
//!                               # needs `tls` (or `insecure: true`: plain TCP is
//!                               # root on that machine for whoever reaches it)
//!       # tls: {ca: certs/ca.pem, cert: certs/cert.pem, key: certs/key.pem}
//!                               # mutual TLS to a tcp:// daemon (D17): its CA, and
//!                               # billet's client certificate and key; relative
//!                               # paths are the file's directory's
//!       # insecure: true        # plain tcp:// knowingly; default false
//!       network: ci-runners                     # optional
//!       cpus: 2                 # optional (D15): CPUs per container, fractions
//!                               # allowed, from 0.01 to 65536; default: the job's
//!       memory: 2GiB            # optional: a size (B, KiB, MiB, GiB, TiB, KB,
//!                               # MB, GB, TB, any case) or bytes; at least 6MiB
//!       storage: 10GiB          # optional (L27): the most a container's writable
//!                               # layer holds, at least 1MiB; only where the
//!                               # daemon's storage driver bounds it (overlay2 on
//!                               # xfs with pquota, btrfs, zfs): `serve` refuses
//!                               # a pool whose daemon cannot; default: no bound
//!       pids_limit: 1024        # optional: at least 1; default: the backend's
//!       user: '1000:1000'       # optional: USER or USER:GROUP; default: the image's
//!       read_only: false        # optional: a read-only root; default false
//!       cap_add: [NET_RAW]      # optional: Linux capabilities granted on top of
//!                               # the backend's minimal set (any case, `CAP_`
//!                               # prefix optional); default none
//!       # runtime: runsc        # optional (D19): the OCI runtime containers run
//!                               # under, by the daemon's name for it; default:
//!                               # the daemon's default
//!       # isolation: boundary   # optional: `boundary` (the runtime isolates a
//!                               # job from the host: the pool takes untrusted and
//!                               # unclassified jobs; needs `runtime`) or `none`
//!                               # (the default)
//!   - name: macos-tart
//!     kind: tart
//!     capacity: 4
//!     tart:
//!       image: ghcr.io/cirruslabs/macos-sequoia-xcode:16
//!       cpus: 4                 # optional
//!       memory_mib: 8192        # optional
//!   - name: untrusted-vm
//!     kind: firecracker
//!     capacity: 32
//!     firecracker:
//!       kernel: /var/lib/billet/vmlinux
//!       rootfs: /var/lib/billet/rootfs.ext4
//!       vcpus: 2                # optional
//!       memory_mib: 2048        # optional
//!       jailer: /usr/bin/jailer # optional
//!
//! routing:
//!   routes:                     # optional; tried in order, the first match wins
//!     - labels: [linux]         # a job matches when it carries every label; at
//!                               # least one label, none blank
//!       provider: linux-docker  # a configured provider's name
//!       fallback_kind: firecracker  # optional: when the provider is full, any
//!                               # provider of this kind may take the job
//!   default_kind: docker        # optional: where jobs no route matches go
//!   untrusted_kinds: [firecracker]  # optional: kinds that may run untrusted
//!                               # and unclassified jobs (default: none)
//!
//! github:                       # optional (G1): GitHub Actions as an intake
//!   api_url: https://api.github.com   # optional, the default; a GitHub
//!                               # Enterprise Server's https://HOST/api/v3;
//!                               # http:// only to a loopback address
//!   app:                        # a GitHub App; or `token_file: PATH`, not both
//!     id: 123456
//!     private_key_file: /etc/billet/app.pem
//!     installation_id: 789      # optional: found from a scope when left out
//!   webhook_secret_file: /etc/billet/webhook-secret
//!                               # files: relative paths are the file's
//!                               # directory's; `serve` refuses one others can read
//!   scopes:                     # at least one; none twice (case aside), and
//!                               # no repository inside an org also named
//!     - org: example-org        # or `repository: OWNER/NAME`
//!       runner_group_id: 1      # optional, org scopes only; default 1
//!       trust: trusted          # optional: trusted or untrusted (the default),
//!                               # the most trust a job from here may have
//!   pools:                      # at least one; the first that fits takes a job
//!     - pool: linux-docker      # a configured provider, named once
//!       labels: [self-hosted, linux]   # 1 to 100, none blank or repeated
//!   runner:                     # optional
//!     command: [/home/runner/run.sh]   # optional, the default
//!     idle_timeout: 10m         # optional, the default; not zero
//!   reconcile_every: 60s        # optional, the default; at least 1s
//! ```
//!
//! Routing must send jobs somewhere: at least one route or a `default_kind`.
//! A `default_kind` or `fallback_kind` must be the kind of some provider.
//!
//! # Kinds, and the simulated one (F1, F3)
//!
//! Every field that names a kind (`providers[].kind`, `routing.default_kind`,
//! `routing.untrusted_kinds[]`, `routing.routes[].fallback_kind`) has the one
//! type [`ConfigKind`], which wraps [`billet_provider::ProviderKind`] and
//! cannot hold the simulated kind. Its names are read with surrounding
//! whitespace trimmed and case folded, and `simulated` in any spelling is
//! refused with [`ConfigError::SimulatedKind`], which says the simulated
//! backend is test-only and cannot be configured, and where the file names
//! it. Other names that are not kinds get [`ConfigError::UnknownKind`], which
//! lists the valid kinds.
//!
//! The refusal is made on the value the parser resolves, so it holds however
//! the file spells it: plain, single- or double-quoted, with escapes
//! (`"simul\x61ted"`), tagged (`!!str simulated`, even `!!binary`), through an
//! anchor and alias (`*k`), or through a merge key (`<<: *base`). Tags the
//! loader does not know (`!custom simulated`) are refused as malformed.
//! Two more places could name the backend and are refused the same way: a
//! mapping key spelling it (a `simulated:` settings block is an unknown
//! field), and a provider name or route target spelling it.
//!
//! # Errors (F4)
//!
//! Every error is a [`ConfigError`] carrying a [`Location`]: the file when
//! loaded from a path, the line and column where the parser or the schema
//! knows them, and the path inside the document (such as
//! `providers[2].kind`). Malformed YAML, unknown fields, wrong types, a
//! missing identity, duplicate provider names, a route naming no provider,
//! zero capacity and an empty file each have their own variant; a docker
//! pool's confinement setting that makes no sense is
//! [`ConfigError::BadSetting`], a capability Linux does not have
//! [`ConfigError::UnknownCapability`] (D15). The loader
//! never panics, on any input.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod config;
mod docker;
mod error;
mod github;
mod kind;
mod load;
mod raw;

pub use config::{
    Config, Deployment, DockerSettings, DockerTls, FirecrackerSettings, Provider, Route, Routing,
    Settings, TartSettings,
};
pub use error::{ConfigError, Location};
pub use github::{
    DEFAULT_API_URL, DEFAULT_IDLE_TIMEOUT, DEFAULT_RECONCILE_EVERY, DEFAULT_RUNNER_COMMAND,
    GithubCredential, GithubPool, GithubScope, GithubSettings, MAX_LABELS, MIN_RECONCILE_EVERY,
    RunnerSettings, ScopeTarget,
};
pub use kind::{ConfigKind, KindError};

/// What the `validate` example does with one file: `Ok` holds the line it
/// prints on success (`ok: ` and the [`Config::summary`]), `Err` the error it
/// prints before exiting with status 1.
pub fn validate(path: impl AsRef<std::path::Path>) -> Result<String, ConfigError> {
    Config::load(path).map(|config| format!("ok: {}", config.summary()))
}
