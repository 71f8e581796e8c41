//! The loaded configuration: [`Config`] and the types it holds.
//!
//! These are valid by construction: the only way to get a [`Config`] is to
//! load one, and loading checks every rule of the schema.

use std::num::{NonZeroU32, NonZeroU64};
use std::path::PathBuf;

use billet_provider::Isolation;
use serde::Deserialize;

use crate::github::GithubSettings;
use crate::kind::ConfigKind;

/// One scheduler deployment's configuration, as loaded from `billet.yaml`.
///
/// See the [crate documentation](crate) for the schema. Get one with
/// [`Config::load`], [`Config::from_yaml_str`] or [`Config::from_yaml_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub(crate) deployment: Deployment,
    pub(crate) providers: Vec<Provider>,
    pub(crate) routing: Routing,
    pub(crate) github: Option<GithubSettings>,
}

impl Config {
    /// Makes every relative `tls` path of a docker pool relative to `dir`
    /// (the directory of the file that names it).
    pub(crate) fn rebase_tls(&mut self, dir: &std::path::Path) {
        for provider in &mut self.providers {
            if let Settings::Docker(DockerSettings { tls: Some(tls), .. }) = &mut provider.settings
            {
                for path in [&mut tls.ca, &mut tls.cert, &mut tls.key] {
                    if path.is_relative() {
                        *path = dir.join(&*path);
                    }
                }
            }
        }
        if let Some(github) = &mut self.github {
            github.rebase(dir);
        }
    }

    /// The deployment's identity.
    pub fn deployment(&self) -> &Deployment {
        &self.deployment
    }

    /// The providers, in file order. Never empty; names are unique.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// The provider with exactly this name (no case folding or trimming).
    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.iter().find(|provider| provider.name == name)
    }

    /// How jobs are routed to providers.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }

    /// GitHub Actions as an intake (the `github:` section, G1), if configured.
    pub fn github(&self) -> Option<&GithubSettings> {
        self.github.as_ref()
    }

    /// The sum of every provider's capacity: the most leases this deployment
    /// holds at once.
    pub fn total_capacity(&self) -> u64 {
        self.providers
            .iter()
            .map(|provider| u64::from(provider.capacity.get()))
            .sum()
    }

    /// A one-line summary, as the `validate` example prints it after `ok: `.
    ///
    /// For example: `deployment "ci-eu-west-1": 3 providers (linux-docker:
    /// docker x48, macos-tart: tart x4, untrusted-vm: firecracker x32), total
    /// capacity 84, 3 routes, default kind docker`.
    pub fn summary(&self) -> String {
        let providers = self
            .providers
            .iter()
            .map(|provider| {
                format!(
                    "{}: {} x{}",
                    provider.name, provider.kind, provider.capacity
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let routes = self.routing.routes.len();
        let default = match self.routing.default_kind {
            Some(kind) => format!("default kind {kind}"),
            None => "no default kind".to_owned(),
        };
        format!(
            "deployment {:?}: {} provider{} ({providers}), total capacity {}, {routes} route{}, {default}",
            self.deployment.id,
            self.providers.len(),
            plural(self.providers.len()),
            self.total_capacity(),
            plural(routes),
        )
    }
}

/// `s` unless there is exactly one.
fn plural(count: usize) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// Who this scheduler is: the owner string written onto every instance it
/// starts (`deployment.id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub(crate) id: String,
    pub(crate) description: Option<String>,
}

impl Deployment {
    /// The deployment identity: never blank.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A free-form description, for people.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
}

/// One pool of compute: a backend of some kind, with a capacity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    pub(crate) name: String,
    pub(crate) kind: ConfigKind,
    pub(crate) capacity: NonZeroU32,
    pub(crate) settings: Settings,
}

impl Provider {
    /// The provider's name, unique in the file; routes name providers by it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The provider's kind: never the simulated one.
    pub fn kind(&self) -> ConfigKind {
        self.kind
    }

    /// How many leases this provider holds at once.
    pub fn capacity(&self) -> NonZeroU32 {
        self.capacity
    }

    /// The settings of the provider's kind.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
}

/// The kind-specific settings of a provider; the variant always matches the
/// provider's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settings {
    /// A docker provider's `docker:` block.
    Docker(DockerSettings),
    /// A tart provider's `tart:` block.
    Tart(TartSettings),
    /// A firecracker provider's `firecracker:` block.
    Firecracker(FirecrackerSettings),
}

/// A docker provider's settings: the `docker:` block.
///
/// The confinement fields (`cpus` to `cap_add`, clause D15) are checked when
/// the file is loaded: what a loaded value holds is always valid. Each is
/// optional; absent, the docker backend applies its safe default (see
/// `billet_docker::Confinement`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DockerSettings {
    /// The image every runner container starts from.
    pub image: String,
    /// The docker daemon to talk to (`unix:///var/run/docker.sock`, an
    /// absolute socket path, or `tcp://host:port`); `None` means the
    /// local default. Handed to `billet_docker::Builder::endpoint`, which
    /// checks the form when the provider is built. A `tcp://` (or
    /// `http://`) endpoint always comes with [`tls`](Self::tls) or with
    /// [`insecure`](Self::insecure) set (D17).
    pub endpoint: Option<String>,
    /// Mutual TLS to a `tcp://` endpoint (`tls: {ca, cert, key}`, D17). Only
    /// ever with a `tcp://` endpoint. The files are not read here: `billet
    /// serve` reads and checks them at start.
    pub tls: Option<DockerTls>,
    /// `insecure: true`: plain, unauthenticated HTTP to a `tcp://`
    /// endpoint, chosen knowingly. Only ever with a `tcp://` or `http://`
    /// endpoint and without `tls`; `false` when absent.
    pub insecure: bool,
    /// The docker network runner containers join (`none`, `bridge`, `host` or a
    /// network's name), handed to `billet_docker::Builder::network`; `None`
    /// means the daemon's default (the bridge).
    pub network: Option<String>,
    /// The CPUs each container may use, in billionths of a CPU (docker's
    /// `NanoCpus`): `cpus: 1.5` is `1_500_000_000`. Never zero; `None` means
    /// the job's own request (one CPU unless it asks otherwise).
    pub nano_cpus: Option<NonZeroU64>,
    /// The memory each container may use, in bytes (`memory: 2GiB`); at least
    /// [`DockerSettings::MIN_MEMORY`]. `None` means the job's own request
    /// (1 GiB unless it asks otherwise).
    pub memory: Option<NonZeroU64>,
    /// The most bytes each container's writable layer may hold
    /// (`storage: 10GiB`, L27): docker's `--storage-opt size=`. At least
    /// [`DockerSettings::MIN_STORAGE`]; `None` means no bound. Engines bound
    /// it only on some storage drivers (docker's overlay2 on xfs mounted with
    /// `pquota`, btrfs, zfs; podman's overlay on xfs with quotas): `billet
    /// serve` refuses at start a pool whose daemon cannot.
    pub storage: Option<NonZeroU64>,
    /// The most processes and threads one container may hold at once
    /// (`pids_limit`); never zero. `None` means the backend's default.
    pub pids_limit: Option<NonZeroU32>,
    /// The user the job runs as (`user: 1000:1000`, `nobody`): a user and an
    /// optional group, each a name or a number, with no blank part and no
    /// whitespace. `None` means the image's user.
    pub user: Option<String>,
    /// Whether the container's root filesystem is mounted read-only
    /// (`read_only: true`); `false` when absent.
    pub read_only: bool,
    /// Linux capabilities granted on top of the backend's minimal default set
    /// (`cap_add: [NET_RAW]`), each in its canonical spelling: upper case,
    /// without the `CAP_` prefix, each once, in file order. Empty when absent.
    pub cap_add: Vec<String>,
    /// The OCI runtime every container runs under, by the name the daemon
    /// lists it by (`runtime: runsc` for gVisor, D19); never blank. `None`
    /// means the daemon's default. Whether the daemon lists it is checked by
    /// `billet serve` at start.
    pub runtime: Option<String>,
    /// Whether [`runtime`](Self::runtime) is an isolation boundary
    /// (`isolation: boundary`, D19): such a pool takes untrusted and
    /// unclassified jobs. [`Isolation::Boundary`] only ever comes with a
    /// runtime; [`Isolation::NoBoundary`] when absent (`isolation: none`).
    pub isolation: Isolation,
}

/// A docker pool's mutual TLS files (`tls:`, D17). [`Config::load`] makes a
/// relative path relative to the directory of the file that names it; a
/// configuration parsed from text keeps them as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerTls {
    /// The CA certificate(s) the daemon's certificate must be signed by
    /// (PEM). Only this CA is trusted for the pool.
    pub ca: PathBuf,
    /// billet's client certificate, presented to the daemon (PEM).
    pub cert: PathBuf,
    /// The client certificate's private key (PEM).
    pub key: PathBuf,
}

impl DockerSettings {
    /// The least memory a pool may give a container: 6 MiB, the least docker's
    /// daemon accepts.
    pub const MIN_MEMORY: u64 = 6 << 20;

    /// The least writable layer a pool may bound a container to: 1 MiB.
    pub const MIN_STORAGE: u64 = 1 << 20;

    /// The CPUs each container may use, as the file wrote them (`1.5`).
    pub fn cpus(&self) -> Option<f64> {
        self.nano_cpus.map(|nano| nano.get() as f64 / 1e9)
    }

    /// The CPUs each container may use, rounded up to whole CPUs (`1.5` is 2):
    /// what a job's resources say it holds.
    pub fn whole_cpus(&self) -> Option<u32> {
        self.nano_cpus
            .map(|nano| u32::try_from(nano.get().div_ceil(1_000_000_000)).unwrap_or(u32::MAX))
    }

    /// The memory each container may use, rounded up to whole mebibytes: what
    /// a job's resources say it holds.
    pub fn memory_mib(&self) -> Option<u64> {
        self.memory.map(|bytes| bytes.get().div_ceil(1 << 20))
    }
}

/// A tart provider's settings: the `tart:` block.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TartSettings {
    /// The macOS VM image every runner is cloned from.
    pub image: String,
    /// Virtual CPUs per VM; `None` keeps the image's setting.
    #[serde(default)]
    pub cpus: Option<u32>,
    /// Memory per VM in MiB; `None` keeps the image's setting.
    #[serde(default)]
    pub memory_mib: Option<u64>,
}

/// A firecracker provider's settings: the `firecracker:` block.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct FirecrackerSettings {
    /// The guest kernel image.
    pub kernel: PathBuf,
    /// The root filesystem image each microVM boots from.
    pub rootfs: PathBuf,
    /// Virtual CPUs per microVM; `None` means 1.
    #[serde(default)]
    pub vcpus: Option<u32>,
    /// Memory per microVM in MiB; `None` means the backend's default.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// The jailer binary that confines each microVM; `None` means the one on `PATH`.
    #[serde(default)]
    pub jailer: Option<PathBuf>,
}

/// How jobs are routed to providers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    pub(crate) routes: Vec<Route>,
    pub(crate) default_kind: Option<ConfigKind>,
    pub(crate) untrusted_kinds: Vec<ConfigKind>,
}

impl Routing {
    /// The routes, in file order; the first that matches a job wins.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The first route whose labels the job carries, if any.
    pub fn route_for<S: AsRef<str>>(&self, job_labels: &[S]) -> Option<&Route> {
        self.routes.iter().find(|route| route.matches(job_labels))
    }

    /// The kind whose providers take a job that no route matches; `None`
    /// means such a job is refused. Some provider has this kind.
    pub fn default_kind(&self) -> Option<ConfigKind> {
        self.default_kind
    }

    /// The kinds allowed to run untrusted and unclassified jobs (empty: none).
    pub fn untrusted_kinds(&self) -> &[ConfigKind] {
        &self.untrusted_kinds
    }
}

/// One routing rule: jobs carrying every one of `labels` go to `provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub(crate) labels: Vec<String>,
    pub(crate) provider: String,
    pub(crate) fallback_kind: Option<ConfigKind>,
}

impl Route {
    /// The labels a job must all carry to match; never empty.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// The name of the provider matching jobs go to; a configured provider.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// When the provider is full: the kind whose other providers may take the
    /// job instead; `None` means the job waits. Some provider has this kind.
    pub fn fallback_kind(&self) -> Option<ConfigKind> {
        self.fallback_kind
    }

    /// Whether a job with these labels matches: it carries every label of
    /// the route (exact comparison).
    pub fn matches<S: AsRef<str>>(&self, job_labels: &[S]) -> bool {
        self.labels
            .iter()
            .all(|label| job_labels.iter().any(|job| job.as_ref() == label))
    }
}
