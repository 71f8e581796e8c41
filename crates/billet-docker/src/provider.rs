//! [`DockerProvider`] and its [`Builder`]: one deployment's containers on a docker daemon.
//!
//! This file holds the type, its builder and settings, the daemon calls
//! every part makes (the client, one call bounded by its method's deadline,
//! an inspect, a filtered list), and the [`Provider`] impl, whose methods
//! are the entry points. What they do is divided by concern into the
//! modules below it, each with its own `impl DockerProvider`:
//!
//! * [`launch`]: a launch, from the spec's checks to the started container,
//!   and the undo of one that fails;
//! * [`inventory`]: what `list` and `find` answer for each container they
//!   see, and the inspects of a `list`;
//! * [`ownership`]: the one rule for whose a container is;
//! * [`state`]: an inspected container read as an instance;
//! * [`given_up`]: the launches given up on after their create may have
//!   reached the daemon, and how each is settled (D11);
//! * [`stale_launch`]: containers left `created` by a launch that will never
//!   finish, finished by the inventory;
//! * [`removal`]: how a container is removed, by `destroy` and by the
//!   settling of launches;
//! * [`output`]: an instance's output, from the daemon's logs (D16);
//! * [`hints`]: change hints, from the daemon's events (D16).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use billet_provider::{
    Error, Hints, Instance, InstanceId, Isolation, Output, Provider, ProviderKind, Spec, Teardown,
    TrustClass,
};
use bollard::Docker;
use bollard::models::{ContainerInspectResponse, ContainerSummary};
use bollard::query_parameters::ListContainersOptionsBuilder;
use parking_lot::Mutex;
use tracing::Dispatch;

use crate::confinement::Confinement;
use crate::daemon::{DaemonError, Deadline, Failure, bounded};
use crate::dialect;
use crate::endpoint::Endpoint;
use crate::naming::{NAME_LABEL, OWNER_LABEL, container_name, is_full_id};
use crate::runtime::{Listed, RuntimeError, judge, runs_on_host_kernel};
use crate::seen::Seen;
use crate::tls::ClientTls;

mod given_up;
mod hints;
mod inventory;
mod launch;
mod output;
mod ownership;
mod removal;
mod stale_launch;
mod state;
mod storage;

use given_up::Abandoned;
use ownership::Claim;

pub use hints::{HINT_BACKOFF_FIRST, HINT_BACKOFF_MAX, HINT_BUFFER};
pub(crate) use storage::storage_opt;
pub use storage::{STORAGE_CHECK_LABEL, StorageError};

/// The deadline of each provider call (`launch`, `list`, `find`, `destroy`)
/// unless the builder sets another.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// The bound on one image pull (when the provider was built to pull) unless
/// the builder sets another.
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(300);

/// How many of one provider's launches talk to its daemon at once, unless
/// the builder sets another number ([`Builder::launches_at_once`]); the rest
/// wait their turn. A launch is four daemon calls, and a burst of them takes
/// the daemon's whole CPU: with every launch of a 50-job burst at once on a
/// 2-core host, an `inspect` waited up to a second behind them, and so did
/// the end of every job that stopped meanwhile (the `ends_and_output`
/// bench: the p99 of exit to lease free went from 1.6 s to 0.56 s with 8,
/// while the burst took as long to launch). Each launch holds its turn at
/// most its deadline, so a wait is bounded by the launches ahead of it.
pub const LAUNCHES_AT_ONCE: usize = 8;

/// How many times one `inspect` is asked when the daemon answers that the
/// container's process ended while it was read (podman's `500` "read
/// /proc/N/cgroup: no such process", a race with its own clean-up), before
/// that answer is the call's error. The pauses between tries start at
/// [`INSPECT_PAUSE_FIRST`] and double (10, 20, 40, 80 ms), all within the
/// call's one deadline.
pub const INSPECT_TRIES: u32 = 5;

/// The first pause before an `inspect` is asked again (see [`INSPECT_TRIES`]).
pub const INSPECT_PAUSE_FIRST: Duration = Duration::from_millis(10);

/// Whether `launch` pulls an image the daemon does not have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PullPolicy {
    /// Never pull: an image the daemon lacks is [`Error::InvalidSpec`] naming
    /// it. The default: a fleet's images are put on its daemons on purpose, and
    /// a launch should not wait on a registry.
    #[default]
    Never,
    /// Pull an image the daemon lacks, then create the container. An image
    /// named without a tag or digest is pulled as `:latest` (never every tag).
    /// The pull is bounded by [`Builder::pull_timeout`], apart from the
    /// launch's own deadline. A registry that does not know the image is
    /// [`Error::InvalidSpec`] when the daemon answers so with a `404` (docker
    /// 20.10 answers a registry's "unknown" with a `500`: then it is
    /// [`Error::Unavailable`] carrying the registry's words); one that cannot
    /// be reached, or a pull that does not finish within its bound, is
    /// [`Error::Unavailable`].
    IfMissing,
}

/// The docker backend for one deployment, over one docker daemon.
///
/// Every container it starts carries the labels [`OWNER_LABEL`](crate::OWNER_LABEL)
/// (this deployment), [`NAME_LABEL`](crate::NAME_LABEL) (the instance name,
/// exactly) and [`LAUNCH_LABEL`](crate::LAUNCH_LABEL) (a mark drawn at random
/// for each launch), and the daemon-side name
/// [`container_name`](crate::container_name) derives from the owner and the
/// name, so the daemon itself refuses a second container for a name this
/// deployment holds, even from two processes at once.
///
/// Every obligation of [`Provider`] holds, on a real daemon:
///
/// * `accepts` passes only [`TrustClass::Trusted`]: containers share the
///   host's kernel, so there is no isolation boundary (D3). A provider built
///   with [`Isolation::Boundary`](billet_provider::Isolation::Boundary) on a
///   runtime that is one ([`Builder::isolation`], D19) passes every class.
/// * Ownership is proven by every mark together (D12, D14), by one rule for
///   `list`, `find` and `destroy`, so they never disagree. A container
///   missing any mark is one billet did not start: never reported, never
///   removed.
/// * `launch` creates and starts one container with the spec's image and
///   command (run exactly as argv: the first element is the entrypoint), its
///   cpus and memory (the pool's [`Confinement`] wins where it sets them),
///   confined (D15): no new privileges, every capability dropped but the
///   confinement's, its pids limit, a bounded log, never privileged. It
///   answers the full container id and the daemon's start time. A refused
///   launch leaves nothing on the daemon. A start the daemon refuses for the
///   spec's own sake (`400`: the program is not in the image) is
///   [`Error::InvalidSpec`]; refused for any other reason (a network that
///   does not exist: `404`) it is [`Error::Unavailable`].
/// * At most [`LAUNCHES_AT_ONCE`] launches ([`Builder::launches_at_once`])
///   talk to the daemon at once; the rest wait their turn, so that a burst
///   of launches does not hold up the looks and removals that end jobs.
/// * A launch whose answer is lost or that its caller drops (D11) leaves
///   nothing once the daemon answers again, or an instance reported
///   truthfully: a container it never started is removed at the next `list`,
///   or `find` or `launch` of its name, and never reported; one it started
///   is an instance like any other (its command runs once).
/// * `list` answers every container of this deployment, in every state, or
///   [`Error::InventoryUnavailable`], never a short answer; unchanged
///   containers are not inspected again, so one started again by hand and
///   seen in the same state at two lists keeps the start time first read.
///   `find` inspects, and compares names exactly.
/// * `destroy` answers only to a full container id, compared by the provider
///   itself (the daemon would also resolve id prefixes and container names);
///   it force-removes this owner's container, answers [`Teardown::Absent`] for
///   an id the daemon does not hold, and refuses, untouched, another
///   deployment's container ([`Error::NotOwned`] with its owner) or one billet
///   did not start ([`Error::NotOwned`] with an empty owner: no deployment).
///   While the daemon holds a container *named* like the id, it refuses with
///   [`Error::Unavailable`], removing nothing. Of two destroys of one id at
///   once, exactly one answers [`Teardown::Stopped`], on every engine.
/// * Each call answers within its own deadline, the provider's timeout
///   ([`Builder::timeout`]), however many daemon calls it makes; a daemon
///   that is gone or hung answers an error of the right kind within it. An
///   image pull has its own bound ([`Builder::pull_timeout`]).
/// * What the daemon answers that billet cannot read (a stopped container
///   without an exit code, a start or creation time it cannot parse, a state
///   it does not know) fails the call; it is never taken as success or as 0.
/// * A container left `created` (never started) longer than twice the
///   timeout by a process that died mid-launch is started by `list` and
///   `find`, or removed if the daemon will never start it, so none stays
///   `created` for ever.
///
/// States: `created` is [`State::Pending`](billet_provider::State::Pending);
/// `running`, `paused`, `restarting` (and `stopping` on newer daemons) are
/// [`State::Running`](billet_provider::State::Running); `exited` and `dead`
/// are [`State::Stopped`](billet_provider::State::Stopped) with the
/// container's exit code. A container being removed (`removing`: a destroy
/// is under way, here or in another process) is left out of `list` and
/// `find`, as gone.
///
/// Docker's daemon and podman's Docker-compatible service are read alike
/// (D18): an answer worded otherwise is read by what it means
/// ([`dialect`](crate::dialect)). Launches, destroys and refusals emit
/// `tracing` events (target `billet_docker`) carrying `deployment`, `id` and
/// `name`.
///
/// How each of these is kept is told in the module docs beside the code, in
/// `src/provider/`: `launch.rs`, `inventory.rs` (`list` and `find`),
/// `ownership.rs`, `state.rs`, `given_up.rs`, `stale_launch.rs`, and
/// `removal.rs` (`destroy`).
pub struct DockerProvider {
    owner: std::sync::Arc<str>,
    endpoint: Endpoint,
    /// Mutual TLS to a `tcp://` endpoint (D17); `None` on a socket or plain tcp.
    tls: Option<ClientTls>,
    endpoint_text: String,
    timeout: Duration,
    pull_timeout: Duration,
    network: Option<String>,
    /// The OCI runtime every container runs under; `None`: the daemon's default.
    runtime: Option<String>,
    /// Whether [`runtime`](Self::runtime) is an isolation boundary (D19).
    isolation: Isolation,
    /// What the daemon listed once it showed the runtime as the pool needs
    /// it ([`DockerProvider::check_runtime`]); launches ask until then.
    runtimes: Mutex<Option<Listed>>,
    /// Whether the engine arbitrates forced removals, once asked.
    arbitrates: Mutex<Option<bool>>,
    /// Containers a destroy asked the engine to pause (its claim, on an
    /// engine that does not arbitrate) and that ended in an error before it
    /// removed them: the inventory finishes their removal ([`removal`]).
    /// At most [`removal::CLAIMS_KEPT`], the oldest forgotten first.
    claims_left: Mutex<std::collections::VecDeque<String>>,
    confinement: Confinement,
    pull: PullPolicy,
    logger: Option<Dispatch>,
    client: Mutex<Option<Docker>>,
    /// Launches given up on after their create may have reached the daemon.
    abandoned: Mutex<Vec<Abandoned>>,
    /// What `list` read by inspects, kept while each container stays in the
    /// state it was read in.
    seen: Mutex<Seen>,
    /// How many CPUs the daemon's host has, read at the first launch that
    /// asks for more than one.
    host_cpus: Mutex<Option<u32>>,
    /// One permit per launch under way ([`Builder::launches_at_once`]).
    launches: tokio::sync::Semaphore,
}

/// Builds a [`DockerProvider`]; start from [`DockerProvider::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder {
    owner: String,
    endpoint: Option<String>,
    tls: Option<ClientTls>,
    timeout: Duration,
    pull_timeout: Duration,
    network: Option<String>,
    runtime: Option<String>,
    isolation: Isolation,
    confinement: Confinement,
    pull: PullPolicy,
    logger: Option<Dispatch>,
    launches_at_once: usize,
}

impl Builder {
    /// Talks to the daemon at `endpoint` (`unix:///var/run/docker.sock`, an
    /// absolute socket path, or `tcp://host:port`) instead of the local socket
    /// [`DEFAULT_SOCKET`](crate::DEFAULT_SOCKET). Checked by [`build`](Builder::build).
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Talks to a `tcp://` endpoint over mutual TLS (D17): the daemon's
    /// certificate checked against `tls`'s CA alone, billet's client
    /// certificate presented. [`build`](Builder::build) refuses it with a
    /// unix socket.
    pub fn tls(mut self, tls: ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The deadline of each call, instead of [`DEFAULT_TIMEOUT`] (15 s): one
    /// deadline for the whole method, however many daemon calls it makes
    /// (`launch` creates, starts and inspects, and removes what it created
    /// when a later step fails; `list` lists, then inspects each container
    /// that is new or changed state since the last list, eight at a time;
    /// `find` inspects; `destroy` inspects, checks for a container named like
    /// the id, and removes). A call the daemon does not
    /// finish in time is an error of the kind its method answers when the
    /// daemon is gone. An image pull is bounded apart
    /// ([`pull_timeout`](Builder::pull_timeout)): a launch that pulls may take
    /// the pull's bound and then its own deadline. Starting a container takes
    /// a docker daemon a good part of a second, so a timeout much under a
    /// second makes launches fail.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Bounds one image pull by `bound` instead of [`DEFAULT_PULL_TIMEOUT`]
    /// (5 minutes); used only with [`PullPolicy::IfMissing`]. A pull that
    /// does not finish within it makes the launch [`Error::Unavailable`].
    pub fn pull_timeout(mut self, bound: Duration) -> Self {
        self.pull_timeout = bound;
        self
    }

    /// Puts every container on this docker network mode (`none`, `bridge`,
    /// `host`, or a network's name) instead of the daemon's default. A
    /// network the daemon does not have makes every launch
    /// [`Error::Unavailable`] naming it (not the spec's fault).
    pub fn network(mut self, network: impl Into<String>) -> Self {
        self.network = Some(network.into());
        self
    }

    /// Runs every container under the daemon's OCI runtime `name` (docker's
    /// `--runtime`; `runsc` for gVisor once the daemon lists it) instead of
    /// the daemon's default. Checked against what the daemon lists by
    /// [`DockerProvider::check_runtime`], which the first launch calls.
    pub fn runtime(mut self, name: impl Into<String>) -> Self {
        self.runtime = Some(name.into());
        self
    }

    /// Whether the [`runtime`](Builder::runtime) is an isolation boundary
    /// (D19): with [`Isolation::Boundary`], `accepts` and `launch` take
    /// untrusted and unknown work (P7's one rule). The default is
    /// [`Isolation::NoBoundary`]: containers share the host's kernel (D3).
    /// [`build`](Builder::build) refuses a boundary without a runtime or on
    /// one of [`HOST_KERNEL_RUNTIMES`](crate::HOST_KERNEL_RUNTIMES).
    pub fn isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// Confines every container so (D15) instead of [`Confinement::default`]:
    /// whatever it holds, no container gains privileges, keeps a capability
    /// beyond its [`cap_add`](Confinement::cap_add), forks past its pids
    /// limit, writes an unbounded log, or runs privileged. Its CPUs and
    /// memory, when set, win over each spec's resources. Checked by
    /// [`build`](Builder::build).
    pub fn confinement(mut self, confinement: Confinement) -> Self {
        self.confinement = confinement;
        self
    }

    /// At most `launches` of this provider's launches talk to the daemon at
    /// once, instead of [`LAUNCHES_AT_ONCE`]; `0` is taken as 1. A launch
    /// past them waits its turn before its first daemon call, and its own
    /// deadline starts when its turn comes; a caller that gives up while it
    /// waits leaves nothing on the daemon.
    pub fn launches_at_once(mut self, launches: usize) -> Self {
        self.launches_at_once = launches.max(1);
        self
    }

    /// Whether `launch` pulls an image the daemon lacks; the default is
    /// [`PullPolicy::Never`].
    pub fn pull(mut self, pull: PullPolicy) -> Self {
        self.pull = pull;
        self
    }

    /// Sends this provider's events to `logger` instead of the default subscriber.
    pub fn logger(mut self, logger: Dispatch) -> Self {
        self.logger = Some(logger);
        self
    }

    /// The provider. Refuses an owner that is empty or only whitespace with
    /// [`Error::InvalidOwner`], a zero timeout or pull bound, or a
    /// [`Confinement`] that makes no sense (a zero pids limit, log size or log
    /// file count, zero or non-finite CPUs, zero memory, a blank user, a blank
    /// capability or `ALL`), with [`Error::InvalidSpec`], and an endpoint it cannot read with
    /// [`Error::Unavailable`] naming the forms expected. It does not contact
    /// the daemon: a provider may be built before its daemon is up, and every
    /// call connects afresh.
    pub fn build(self) -> Result<DockerProvider, Error> {
        if self.owner.trim().is_empty() {
            return Err(Error::InvalidOwner {
                owner: self.owner,
                reason: "a deployment identity must not be empty".to_owned(),
            });
        }
        if self.timeout.is_zero() {
            return Err(Error::invalid_spec(
                "the docker provider's call timeout must be longer than zero",
            ));
        }
        if self.pull_timeout.is_zero() {
            return Err(Error::invalid_spec(
                "the docker provider's image pull bound must be longer than zero",
            ));
        }
        self.confinement.check().map_err(|reason| {
            Error::invalid_spec(format!("the docker provider's confinement: {reason}"))
        })?;
        let endpoint = match &self.endpoint {
            Some(text) => Endpoint::parse(text).map_err(Error::unavailable)?,
            None => Endpoint::default(),
        };
        if let Some(runtime) = &self.runtime
            && runtime.trim().is_empty()
        {
            return Err(Error::invalid_spec(
                "the docker provider's runtime must be a runtime's name, not blank",
            ));
        }
        if self.isolation == Isolation::Boundary {
            match &self.runtime {
                None => {
                    return Err(Error::invalid_spec(
                        "an isolation boundary needs a runtime that is one (such as gVisor's runsc): containers under the daemon's default runtime share the host's kernel",
                    ));
                }
                Some(runtime) if runs_on_host_kernel(runtime, None) => {
                    return Err(Error::invalid_spec(format!(
                        "runtime {runtime:?} runs jobs on the host's kernel: it is no isolation boundary"
                    )));
                }
                Some(_) => {}
            }
        }
        if self.tls.is_some() && !matches!(endpoint, Endpoint::Tcp(_)) {
            return Err(Error::invalid_spec(format!(
                "mutual TLS is for a tcp://host:port endpoint, not {endpoint}"
            )));
        }
        Ok(DockerProvider {
            owner: std::sync::Arc::from(self.owner),
            endpoint_text: match &self.tls {
                Some(_) => format!("{endpoint} (mutual TLS)"),
                None => endpoint.to_string(),
            },
            endpoint,
            tls: self.tls,
            timeout: self.timeout,
            pull_timeout: self.pull_timeout,
            network: self.network,
            runtime: self.runtime,
            isolation: self.isolation,
            runtimes: Mutex::new(None),
            arbitrates: Mutex::new(None),
            claims_left: Mutex::new(std::collections::VecDeque::new()),
            confinement: self.confinement,
            pull: self.pull,
            logger: self.logger,
            client: Mutex::new(None),
            abandoned: Mutex::new(Vec::new()),
            seen: Mutex::new(Seen::default()),
            host_cpus: Mutex::new(None),
            launches: tokio::sync::Semaphore::new(self.launches_at_once),
        })
    }
}

impl DockerProvider {
    /// A provider for the deployment `owner` on the local socket, with the
    /// default timeout. An empty owner is refused with [`Error::InvalidOwner`].
    pub fn new(owner: impl Into<String>) -> Result<Self, Error> {
        Self::builder(owner).build()
    }

    /// A builder for a provider for the deployment `owner`.
    pub fn builder(owner: impl Into<String>) -> Builder {
        Builder {
            owner: owner.into(),
            endpoint: None,
            tls: None,
            timeout: DEFAULT_TIMEOUT,
            pull_timeout: DEFAULT_PULL_TIMEOUT,
            network: None,
            runtime: None,
            isolation: Isolation::NoBoundary,
            confinement: Confinement::default(),
            pull: PullPolicy::Never,
            logger: None,
            launches_at_once: LAUNCHES_AT_ONCE,
        }
    }

    /// What every container this provider starts may do (D15).
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// The OCI runtime every container this provider starts runs under;
    /// `None`: the daemon's default.
    pub fn runtime(&self) -> Option<&str> {
        self.runtime.as_deref()
    }

    /// Whether this provider's containers run behind an isolation boundary
    /// (D19): what `accepts` answers by.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Asks the daemon whether it can run this provider's containers as the
    /// pool needs (D19): the [`runtime`](Self::runtime) is one the daemon
    /// lists, and, for [`Isolation::Boundary`], not one whose file is among
    /// [`HOST_KERNEL_RUNTIMES`](crate::HOST_KERNEL_RUNTIMES). `Ok` at once,
    /// without a daemon call, when the provider names no runtime. Answers
    /// within the provider's timeout; [`RuntimeError::Daemon`] when the daemon
    /// cannot be asked. Once it has answered `Ok`, launches no longer ask;
    /// each still reads the runtime back from the container it created, and
    /// starts it only under the runtime ([`RuntimeError::NotApplied`]).
    pub async fn check_runtime(&self) -> Result<(), RuntimeError> {
        self.check_runtime_by(self.deadline()).await.map(|_| ())
    }

    /// What the daemon listed of its runtimes, asked now
    /// ([`check_runtime`](Self::check_runtime)) unless known; `None` for a
    /// provider that names no runtime.
    async fn listed_runtimes(&self, deadline: Deadline) -> Result<Option<Listed>, RuntimeError> {
        match (&self.runtime, self.runtimes.lock().clone()) {
            (None, _) => return Ok(None),
            (Some(_), Some(known)) => return Ok(Some(known)),
            (Some(_), None) => {}
        }
        self.check_runtime_by(deadline).await
    }

    /// Whether the engine arbitrates two forced removals of one container
    /// itself ([`dialect::arbitrates_forced_removals`]), asked once per
    /// provider, at its first destroy of a running container.
    async fn arbitrates_forced_removals(
        &self,
        client: &Docker,
        deadline: Deadline,
    ) -> Result<bool, DaemonError> {
        if let Some(known) = *self.arbitrates.lock() {
            return Ok(known);
        }
        let version = self
            .call(deadline, "read the daemon's version", client.version())
            .await?;
        let arbitrates = dialect::arbitrates_forced_removals(&version);
        *self.arbitrates.lock() = Some(arbitrates);
        Ok(arbitrates)
    }

    /// [`check_runtime`](Self::check_runtime) within `deadline`: what the
    /// daemon listed, or `None` for a provider that names no runtime.
    async fn check_runtime_by(&self, deadline: Deadline) -> Result<Option<Listed>, RuntimeError> {
        let Some(runtime) = &self.runtime else {
            return Ok(None);
        };
        let client = self
            .client("read the daemon's system info")
            .map_err(RuntimeError::Daemon)?;
        let info = self
            .call(deadline, "read the daemon's system info", client.info())
            .await
            .map_err(RuntimeError::Daemon)?;
        let runtimes = info.runtimes.unwrap_or_default();
        judge(runtime, self.isolation, &runtimes, &self.endpoint_text)?;
        let listed = Listed {
            names: runtimes.into_keys().collect(),
            default: info.default_runtime,
        };
        *self.runtimes.lock() = Some(listed.clone());
        Ok(Some(listed))
    }

    /// The deployment identity written onto every container this provider starts.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The daemon this provider talks to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The mutual TLS this provider's calls go over, if any (D17).
    pub fn tls(&self) -> Option<&ClientTls> {
        self.tls.as_ref()
    }

    /// The deadline of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The bound on one image pull.
    pub fn pull_timeout(&self) -> Duration {
        self.pull_timeout
    }

    /// The bollard client, made on first use. Making it does not contact the
    /// daemon; it fails only when the unix socket does not exist.
    fn client(&self, operation: &'static str) -> Result<Docker, DaemonError> {
        let mut slot = self.client.lock();
        if let Some(client) = &*slot {
            return Ok(client.clone());
        }
        let made = self.connector().connect();
        match made {
            Ok(client) => {
                *slot = Some(client.clone());
                Ok(client)
            }
            Err(err) => Err(DaemonError::new(
                &self.endpoint_text,
                operation,
                Failure::Connection(err),
            )),
        }
    }

    /// What makes a client to this provider's daemon, apart from the
    /// provider (a hint stream reopens through it).
    fn connector(&self) -> Connector {
        // bollard's own timeout is whole seconds; ours (tokio, exact) is the
        // authority, bollard's only a backstop behind it.
        Connector {
            endpoint: self.endpoint.clone(),
            tls: self.tls.clone(),
            backstop: self.timeout.max(self.pull_timeout).as_secs() + 1,
        }
    }

    /// The deadline of a call starting now.
    fn deadline(&self) -> Deadline {
        Deadline::after(self.timeout)
    }

    /// Runs one daemon call, bounded by its method's deadline.
    async fn call<T>(
        &self,
        deadline: Deadline,
        operation: &'static str,
        call: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, DaemonError> {
        bounded(&self.endpoint_text, operation, deadline, call).await
    }

    /// Runs `f` with this provider's logger as the default subscriber, if it has one.
    fn log(&self, f: impl FnOnce()) {
        match &self.logger {
            Some(logger) => tracing::dispatcher::with_default(logger, f),
            None => f(),
        }
    }

    /// Inspects a container by a reference the provider chose (a full id, or
    /// a derived name); `None` when the daemon holds none by it.
    async fn inspect(
        &self,
        client: &Docker,
        deadline: Deadline,
        reference: &str,
    ) -> Result<Option<ContainerInspectResponse>, DaemonError> {
        let mut pause = INSPECT_PAUSE_FIRST;
        let mut tries = 1;
        loop {
            match self
                .call(
                    deadline,
                    "inspect container",
                    dialect::inspect_container(client, reference),
                )
                .await
            {
                Ok(found) => return Ok(Some(found)),
                Err(err) if dialect::no_such_container(&err) => return Ok(None),
                // The container's process ended while the daemon read it: the
                // next look reads it ended. Asked again, a bounded number of
                // times, within the same deadline.
                Err(err) if dialect::process_just_ended(&err) && tries < INSPECT_TRIES => {
                    tries += 1;
                    deadline.sleep(pause).await;
                    pause = pause.saturating_mul(2);
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// One `list containers` call over containers in every state, filtered
    /// by the daemon's `filter` (`label`, `name`) equal to `value`.
    async fn list_filtered(
        &self,
        client: &Docker,
        deadline: Deadline,
        filter: &str,
        value: String,
    ) -> Result<Vec<ContainerSummary>, DaemonError> {
        let filters = HashMap::from([(filter.to_owned(), vec![value])]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        self.call(
            deadline,
            "list containers",
            dialect::list_containers(client, Some(options)),
        )
        .await
    }
}

/// How to make a bollard client to one daemon: its endpoint, its mutual
/// TLS, and bollard's backstop timeout (whole seconds).
#[derive(Clone)]
struct Connector {
    endpoint: Endpoint,
    tls: Option<ClientTls>,
    backstop: u64,
}

impl Connector {
    /// A new client. Making it does not contact the daemon; it fails only
    /// when the unix socket does not exist.
    fn connect(&self) -> Result<Docker, bollard::errors::Error> {
        match &self.endpoint {
            Endpoint::Unix(path) => Docker::connect_with_unix(
                &path.to_string_lossy(),
                self.backstop,
                bollard::API_DEFAULT_VERSION,
            ),
            Endpoint::Tcp(address) if let Some(tls) = &self.tls => {
                tls.client(address, self.backstop)
            }
            Endpoint::Tcp(address) => Docker::connect_with_http(
                &format!("http://{address}"),
                self.backstop,
                bollard::API_DEFAULT_VERSION,
            ),
        }
    }
}

impl fmt::Debug for DockerProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DockerProvider")
            .field("owner", &self.owner)
            .field("endpoint", &self.endpoint_text)
            .field("timeout", &self.timeout)
            .field("pull_timeout", &self.pull_timeout)
            .field("network", &self.network)
            .field("pull", &self.pull)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Provider for DockerProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Docker
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        // D3: containers share the host's kernel, no isolation boundary: only
        // trusted work; D19: unless the pool's runtime is a boundary.
        billet_provider::accepts_trust(self.kind(), self.isolation, trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        if let Err(err) = self.check_spec(&spec) {
            return Err(self.refuse(&spec.name, err));
        }
        // Never closed, so never an error; held until the launch answers.
        let _turn = self.launches.acquire().await;
        match self.launch_checked(&spec).await {
            Ok(instance) => {
                self.log(|| {
                    tracing::info!(
                        target: "billet_docker",
                        deployment = %self.owner,
                        id = %instance.id,
                        name = %instance.name,
                        image = %spec.image,
                        "launched"
                    );
                });
                Ok(instance)
            }
            Err(err) => Err(self.refuse(&spec.name, err)),
        }
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        let deadline = self.deadline();
        let client = self
            .client("inspect container")
            .map_err(Error::inventory_unavailable)?;
        // The derived name is resolved by the daemon as an exact name (it holds
        // non-hex letters, so never as an id prefix); the marks are checked
        // here by the rule `list` applies too.
        let inspected = self
            .inspect(&client, deadline, &container_name(&self.owner, name))
            .await
            .map_err(Error::inventory_unavailable)?;
        let Some(inspected) = inspected else {
            return Ok(None);
        };
        let instance = self.settle(&client, deadline, inspected).await?;
        Ok(instance.filter(|instance| *instance.name == *name))
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        let deadline = self.deadline();
        let client = self
            .client("list containers")
            .map_err(Error::inventory_unavailable)?;
        let summaries = self
            .list_filtered(
                &client,
                deadline,
                "label",
                format!("{OWNER_LABEL}={}", self.owner),
            )
            .await
            .map_err(Error::inventory_unavailable)?;
        // Each container of this owner is this deployment's instance or not
        // by the one rule, read from the summary (labels and name are all it
        // needs); an instance read before in the state the summary shows
        // stands for it; every other one of ours is inspected.
        let mut listed = HashSet::with_capacity(summaries.len());
        let mut candidates = Vec::with_capacity(summaries.len());
        for summary in &summaries {
            let owned = summary
                .labels
                .as_ref()
                .and_then(|labels| labels.get(OWNER_LABEL))
                .is_some_and(|owner| **owner == *self.owner);
            if !owned {
                continue;
            }
            let Some(id) = summary.id.as_deref() else {
                return Err(Error::inventory_unavailable(
                    "the docker daemon listed a container without an id",
                ));
            };
            listed.insert(id.to_owned());
            let reusable = match self.claim_listed(summary) {
                // Not this deployment's: the inspect would say the same.
                Some(Claim::Theirs { .. } | Claim::Foreign) => continue,
                // Of a launch given up on: settled by the inspected path.
                Some(Claim::Ours { mark, .. }) => !self.is_abandoned(mark),
                None => false,
            };
            candidates.push((
                id,
                summary.state.filter(|_| reusable),
                summary.status.as_deref(),
            ));
        }
        let mut instances = Vec::with_capacity(candidates.len());
        let mut ids = Vec::new();
        {
            let seen = self.seen.lock();
            for (id, state, status) in candidates {
                match state.and_then(|state| seen.get(id, state, status)) {
                    Some(instance) => instances.push(instance),
                    None => ids.push((id.to_owned(), state)),
                }
            }
        }
        instances.extend(self.inspect_all(&client, deadline, ids).await?);
        self.seen.lock().retain(&listed);
        // Every container of a launch given up on that the daemon held has
        // just been removed; one it still does not hold after twice the
        // timeout never will.
        let horizon = self.timeout.saturating_mul(2);
        self.abandoned
            .lock()
            .retain(|a| a.since.elapsed() <= horizon);
        Ok(instances)
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        let deadline = self.deadline();
        let client = self
            .client("inspect container")
            .map_err(Error::unavailable)?;
        if !is_full_id(id.as_str()) {
            // Not a container id at all: the daemon holds no container by it.
            // Never handed to the daemon as a reference, which it would
            // resolve as an id prefix or a container name. Confirmed absent
            // only while the daemon answers, as every destroy is (H8).
            self.call(deadline, "ping", client.ping())
                .await
                .map_err(Error::unavailable)?;
            self.log(|| {
                tracing::debug!(
                    target: "billet_docker",
                    deployment = %self.owner,
                    %id,
                    name = tracing::field::Empty,
                    "destroy: not a full container id, so no container of this deployment; absent"
                );
            });
            return Ok(Teardown::Absent);
        }
        let inspected = self
            .inspect(&client, deadline, id.as_str())
            .await
            .map_err(Error::unavailable)?;
        // The daemon resolves names before prefixes but after full ids; a
        // container answered under another id is not the one asked for.
        let Some(inspected) = inspected.filter(|c| c.id.as_deref() == Some(id.as_str())) else {
            self.log(|| {
                tracing::debug!(
                    target: "billet_docker",
                    deployment = %self.owner,
                    %id,
                    name = tracing::field::Empty,
                    "destroy: the daemon holds no such container; absent"
                );
            });
            return Ok(Teardown::Absent);
        };
        let name = match self.claim_inspected(&inspected) {
            Claim::Ours { name, .. } => name.to_owned(),
            claim => {
                // Another deployment's container, or one billet did not start
                // (a mark missing: it belongs to no deployment).
                let owner = match claim {
                    Claim::Theirs { owner } => owner.to_owned(),
                    _ => String::new(),
                };
                let err = Error::NotOwned {
                    id: id.clone(),
                    owner,
                };
                let name = inspected
                    .config
                    .as_ref()
                    .and_then(|c| c.labels.as_ref())
                    .and_then(|l| l.get(NAME_LABEL))
                    .map_or("", String::as_str);
                self.log(|| {
                    tracing::warn!(
                        target: "billet_docker",
                        deployment = %self.owner,
                        %id,
                        name = %name,
                        error = %err,
                        "destroy refused"
                    );
                });
                return Err(err);
            }
        };
        let status = inspected.state.as_ref().and_then(|state| state.status);
        let teardown = self
            .remove_claimed(&client, deadline, id.as_str(), status)
            .await?;
        self.log(|| {
            tracing::info!(
                target: "billet_docker",
                deployment = %self.owner,
                %id,
                name = %name,
                teardown = ?teardown,
                "destroyed"
            );
        });
        Ok(teardown)
    }

    fn output(&self) -> Option<&dyn Output> {
        Some(self)
    }

    fn hints(&self) -> Option<&dyn Hints> {
        Some(self)
    }
}
