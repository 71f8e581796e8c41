//! [`DockerProvider`] and its [`Builder`]: one deployment's containers on a docker daemon.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_provider::{
    Error, Instance, InstanceId, Provider, ProviderKind, Spec, State, Teardown, TrustClass,
};
use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, ContainerStateStatusEnum, HostConfig,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures::{StreamExt, TryStreamExt};
use parking_lot::Mutex;
use tracing::Dispatch;

use crate::daemon::{DaemonError, Failure, bounded};
use crate::endpoint::Endpoint;
use crate::naming::{NAME_LABEL, OWNER_LABEL, container_name, is_full_id};

/// The timeout of every daemon call unless the builder sets another.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// How many containers `list` inspects at once.
const INSPECT_CONCURRENCY: usize = 8;

/// Whether `launch` pulls an image the daemon does not have.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PullPolicy {
    /// Never pull: an image the daemon lacks is [`Error::InvalidSpec`] naming
    /// it. The default: a fleet's images are put on its daemons on purpose, and
    /// a launch should not wait on a registry.
    #[default]
    Never,
    /// Pull an image the daemon lacks, then create the container. A registry
    /// that does not know the image is [`Error::InvalidSpec`]; one that cannot
    /// be reached is [`Error::Unavailable`].
    IfMissing,
}

/// The docker backend for one deployment, over one docker daemon.
///
/// Every container it starts carries the labels [`OWNER_LABEL`](crate::OWNER_LABEL)
/// (this deployment) and [`NAME_LABEL`](crate::NAME_LABEL) (the instance name,
/// exactly), and the daemon-side name [`container_name`](crate::container_name)
/// derives from both, so the daemon itself refuses a second container for a
/// name this deployment holds, even from two processes at once.
///
/// Every obligation of [`Provider`] holds, on a real daemon:
///
/// * `accepts` passes only [`TrustClass::Trusted`]: containers share the
///   host's kernel, so there is no isolation boundary.
/// * `launch` creates and starts one container with the spec's image and
///   command (run exactly as argv: the first element is the entrypoint), its
///   cpus and memory. It answers the full container id and the daemon's start
///   time. A refused launch leaves nothing on the daemon.
/// * `list` asks the daemon for this owner's containers in every state and
///   inspects each for its exit code and start time; if any part cannot be
///   had, the whole call is [`Error::InventoryUnavailable`], never a short
///   answer. `find` compares names exactly.
/// * `destroy` answers only to a full container id, compared by the provider
///   itself (the daemon would also resolve id prefixes and container names);
///   it force-removes this owner's container, answers [`Teardown::Absent`] for
///   an id the daemon does not hold, and refuses, untouched, another
///   deployment's container ([`Error::NotOwned`] with its owner) or one billet
///   did not start ([`Error::NotOwned`] with an empty owner: no deployment).
/// * Every daemon call is bounded by the timeout; a daemon that is gone or hung
///   answers an error of the right kind within it.
///
/// * A container of this owner still `created` (never started) longer than
///   twice the timeout after its creation is a launch that will never
///   finish: its launch call was dropped, or the process making it died
///   between the create and the start. `list` and `find` finish it: they start
///   it and report what it then is. One the daemon will never start (a
///   `4xx`) is removed and left out; one that cannot be started now stays
///   `Pending`, and is tried again at the next look. So no container stays
///   `created` for ever, and a job's command runs once.
///
/// States: `created` is [`State::Pending`]; `running`, `paused`, `restarting`
/// (and `stopping` on newer daemons) are [`State::Running`]; `exited` and
/// `dead` are [`State::Stopped`] with the container's exit code. A container
/// being removed (`removing`) is reported by its last exit code if it has
/// finished, else as running.
///
/// Launches, destroys and refusals emit `tracing` events (target
/// `billet_docker`) carrying `deployment`, `id` and `name`.
pub struct DockerProvider {
    owner: Arc<str>,
    endpoint: Endpoint,
    endpoint_text: String,
    timeout: Duration,
    network: Option<String>,
    pull: PullPolicy,
    logger: Option<Dispatch>,
    client: Mutex<Option<Docker>>,
}

/// Builds a [`DockerProvider`]; start from [`DockerProvider::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder {
    owner: String,
    endpoint: Option<String>,
    timeout: Duration,
    network: Option<String>,
    pull: PullPolicy,
    logger: Option<Dispatch>,
}

impl Builder {
    /// Talks to the daemon at `endpoint` (`unix:///var/run/docker.sock`, an
    /// absolute socket path, or `tcp://host:port`) instead of the local socket
    /// [`DEFAULT_SOCKET`](crate::DEFAULT_SOCKET). Checked by [`build`](Builder::build).
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Bounds every daemon call by `timeout` instead of [`DEFAULT_TIMEOUT`]
    /// (15 s). A call the daemon does not answer in time is an error of the
    /// kind its method answers when the daemon is gone. A method makes one or
    /// a few calls: `launch` creates, starts and inspects (and removes what it
    /// created when a later call fails), `list` lists and then inspects each
    /// container, eight at a time, `find` inspects once, `destroy` inspects and
    /// removes. Starting a container takes a docker daemon a good part of a
    /// second, so a timeout much under a second makes launches fail.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Puts every container on this docker network mode (`none`, `bridge`,
    /// `host`, or a network's name) instead of the daemon's default.
    pub fn network(mut self, network: impl Into<String>) -> Self {
        self.network = Some(network.into());
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
    /// [`Error::InvalidOwner`], a zero timeout with [`Error::InvalidSpec`], and
    /// an endpoint it cannot read with [`Error::Unavailable`] naming the forms
    /// expected. It does not contact the daemon: a provider may be built before
    /// its daemon is up, and every call connects afresh.
    pub fn build(self) -> Result<DockerProvider, Error> {
        if self.owner.trim().is_empty() {
            return Err(Error::InvalidOwner {
                owner: self.owner,
                reason: "a deployment identity must not be empty".to_owned(),
            });
        }
        if self.timeout.is_zero() {
            return Err(Error::invalid_spec(
                "the docker daemon call timeout must be longer than zero",
            ));
        }
        let endpoint = match &self.endpoint {
            Some(text) => Endpoint::parse(text).map_err(Error::unavailable)?,
            None => Endpoint::default(),
        };
        Ok(DockerProvider {
            owner: Arc::from(self.owner),
            endpoint_text: endpoint.to_string(),
            endpoint,
            timeout: self.timeout,
            network: self.network,
            pull: self.pull,
            logger: self.logger,
            client: Mutex::new(None),
        })
    }
}

/// What a failed `create container` means for `launch`.
enum CreateFailure {
    MissingImage,
    Other(Error),
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
            timeout: DEFAULT_TIMEOUT,
            network: None,
            pull: PullPolicy::Never,
            logger: None,
        }
    }

    /// The deployment identity written onto every container this provider starts.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The daemon this provider talks to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The bound on every daemon call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The bollard client, made on first use. Making it does not contact the
    /// daemon; it fails only when the unix socket does not exist.
    fn client(&self, operation: &'static str) -> Result<Docker, DaemonError> {
        let mut slot = self.client.lock();
        if let Some(client) = &*slot {
            return Ok(client.clone());
        }
        // bollard's own timeout is whole seconds; ours (tokio, exact) is the
        // authority, bollard's only a backstop behind it.
        let backstop = self.timeout.as_secs() + 1;
        let made = match &self.endpoint {
            Endpoint::Unix(path) => Docker::connect_with_unix(
                &path.to_string_lossy(),
                backstop,
                bollard::API_DEFAULT_VERSION,
            ),
            Endpoint::Tcp(address) => Docker::connect_with_http(
                &format!("http://{address}"),
                backstop,
                bollard::API_DEFAULT_VERSION,
            ),
        };
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

    /// Runs one bounded daemon call.
    async fn call<T>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, DaemonError> {
        bounded(&self.endpoint_text, operation, self.timeout, call).await
    }

    /// Runs `f` with this provider's logger as the default subscriber, if it has one.
    fn log(&self, f: impl FnOnce()) {
        match &self.logger {
            Some(logger) => tracing::dispatcher::with_default(logger, f),
            None => f(),
        }
    }

    fn refuse(&self, name: &str, err: Error) -> Error {
        self.log(|| {
            tracing::warn!(
                target: "billet_docker",
                deployment = %self.owner,
                id = tracing::field::Empty,
                name = %name,
                error = %err,
                "launch refused"
            );
        });
        err
    }

    fn check_spec(&self, spec: &Spec) -> Result<(), Error> {
        self.accepts(spec.trust)?;
        if spec.name.is_empty() {
            return Err(Error::invalid_spec("the instance name is empty"));
        }
        if spec.image.trim().is_empty() {
            return Err(Error::invalid_spec(
                "the image is empty: a docker spec names the image its container starts from",
            ));
        }
        if spec.command.first().is_none_or(String::is_empty) {
            return Err(Error::invalid_spec(
                "the command is empty: a docker spec's command is an argv whose first element is the program to run",
            ));
        }
        Ok(())
    }

    fn create_body(&self, spec: &Spec) -> ContainerCreateBody {
        let labels = HashMap::from([
            (OWNER_LABEL.to_owned(), String::from(&*self.owner)),
            (NAME_LABEL.to_owned(), spec.name.clone()),
        ]);
        let cpus = spec.resources.cpus;
        let memory = spec.resources.memory_mib;
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(spec.command[..1].to_vec()),
            cmd: Some(spec.command[1..].to_vec()),
            labels: Some(labels),
            host_config: Some(HostConfig {
                nano_cpus: (cpus > 0).then(|| i64::from(cpus) * 1_000_000_000),
                memory: (memory > 0)
                    .then(|| i64::try_from(memory.saturating_mul(1 << 20)).unwrap_or(i64::MAX)),
                network_mode: self.network.clone(),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }

    async fn create(&self, client: &Docker, spec: &Spec) -> Result<String, CreateFailure> {
        let options = CreateContainerOptionsBuilder::new()
            .name(&container_name(&self.owner, &spec.name))
            .build();
        let created = self
            .call(
                "create container",
                client.create_container(Some(options), self.create_body(spec)),
            )
            .await;
        match created {
            Ok(response) => Ok(response.id),
            Err(err) => Err(match err.status() {
                Some(404) => CreateFailure::MissingImage,
                Some(409) => CreateFailure::Other(Error::Conflict {
                    name: spec.name.clone(),
                }),
                Some(400) => CreateFailure::Other(Error::invalid_spec(format!(
                    "the docker daemon refused the container for {:?}: {}",
                    spec.name,
                    daemon_message(&err)
                ))),
                _ => CreateFailure::Other(Error::unavailable(err)),
            }),
        }
    }

    async fn pull_image(&self, client: &Docker, image: &str) -> Result<(), Error> {
        let options = CreateImageOptionsBuilder::new().from_image(image).build();
        let pulled = self
            .call(
                "pull image",
                client
                    .create_image(Some(options), None, None)
                    .try_for_each(|_| async { Ok(()) }),
            )
            .await;
        match pulled {
            Ok(()) => Ok(()),
            Err(err) if err.status() == Some(404) => Err(Error::invalid_spec(format!(
                "image {image:?} is on neither the docker daemon nor its registry: {}",
                daemon_message(&err)
            ))),
            Err(err) => Err(Error::unavailable(err)),
        }
    }

    /// Removes a container this launch created and could not finish; best
    /// effort, bounded by the timeout. What cannot be removed stays in the
    /// inventory, where the caller sees it.
    async fn undo_create(&self, client: &Docker, id: &str) {
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        if let Err(err) = self
            .call(
                "remove container",
                client.remove_container(id, Some(options)),
            )
            .await
        {
            self.log(|| {
                tracing::warn!(
                    target: "billet_docker",
                    deployment = %self.owner,
                    id,
                    error = %err,
                    "a container this launch created could not be removed; it stays in the inventory"
                );
            });
        }
    }

    async fn inspect(
        &self,
        client: &Docker,
        reference: &str,
    ) -> Result<Option<ContainerInspectResponse>, DaemonError> {
        match self
            .call(
                "inspect container",
                client.inspect_container(reference, None),
            )
            .await
        {
            Ok(found) => Ok(Some(found)),
            Err(err) if err.status() == Some(404) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The instance an inspected container is, if it is this owner's.
    fn instance(&self, inspected: &ContainerInspectResponse) -> Result<Option<Instance>, String> {
        let labels = inspected.config.as_ref().and_then(|c| c.labels.as_ref());
        let (Some(owner), Some(name)) = (
            labels.and_then(|l| l.get(OWNER_LABEL)),
            labels.and_then(|l| l.get(NAME_LABEL)),
        ) else {
            return Ok(None);
        };
        if **owner != *self.owner {
            return Ok(None);
        }
        let id = inspected
            .id
            .clone()
            .ok_or("the daemon answered a container without an id")?;
        let state = inspected
            .state
            .as_ref()
            .ok_or_else(|| format!("the daemon answered container {id} without a state"))?;
        let exit_code = i32::try_from(state.exit_code.unwrap_or(0)).unwrap_or(i32::MIN);
        let status = state.status.unwrap_or(ContainerStateStatusEnum::EMPTY);
        let instance_state = match status {
            ContainerStateStatusEnum::CREATED => State::Pending,
            ContainerStateStatusEnum::RUNNING
            | ContainerStateStatusEnum::PAUSED
            | ContainerStateStatusEnum::RESTARTING
            | ContainerStateStatusEnum::STOPPING => State::Running,
            ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD => {
                State::Stopped { exit_code }
            }
            ContainerStateStatusEnum::REMOVING => {
                if state.running == Some(true) {
                    State::Running
                } else {
                    State::Stopped { exit_code }
                }
            }
            ContainerStateStatusEnum::EMPTY => {
                return Err(format!("the daemon answered container {id} with no status"));
            }
        };
        // A container that never started has the zero time as its start; its
        // creation time stands in until it starts.
        let started = state
            .started_at
            .as_deref()
            .and_then(parse_time)
            .or_else(|| inspected.created.as_deref().and_then(parse_time))
            .ok_or_else(|| {
                format!("the daemon answered container {id} without a start or creation time")
            })?;
        Ok(Some(Instance {
            id: InstanceId::from(id),
            name: name.clone(),
            owner: owner.clone(),
            kind: ProviderKind::Docker,
            state: instance_state,
            started_at: started,
        }))
    }

    async fn launch_checked(&self, spec: &Spec) -> Result<Instance, Error> {
        let client = self
            .client("create container")
            .map_err(Error::unavailable)?;
        let mut pulled = false;
        let id = loop {
            match self.create(&client, spec).await {
                Ok(id) => break id,
                Err(CreateFailure::Other(err)) => return Err(err),
                Err(CreateFailure::MissingImage)
                    if self.pull == PullPolicy::IfMissing && !pulled =>
                {
                    self.pull_image(&client, &spec.image).await?;
                    pulled = true;
                }
                Err(CreateFailure::MissingImage) => {
                    return Err(Error::invalid_spec(format!(
                        "image {:?} is not on the docker daemon at {} (this provider does not pull images)",
                        spec.image, self.endpoint_text
                    )));
                }
            }
        };
        if let Err(err) = self
            .call("start container", client.start_container(&id, None))
            .await
        {
            self.undo_create(&client, &id).await;
            return Err(match err.status() {
                Some(code) if (400..500).contains(&code) => Error::invalid_spec(format!(
                    "the docker daemon could not start {:?} from image {:?}: {}",
                    spec.name,
                    spec.image,
                    daemon_message(&err)
                )),
                _ => Error::unavailable(err),
            });
        }
        let answered = match self.inspect(&client, &id).await {
            Ok(Some(inspected)) => self.instance(&inspected).map_err(Error::unavailable),
            Ok(None) => Err(Error::unavailable(format!(
                "container {id} vanished from the daemon as it started"
            ))),
            Err(err) => Err(Error::unavailable(err)),
        };
        match answered {
            Ok(Some(instance)) => Ok(instance),
            Ok(None) => Err(Error::unavailable(format!(
                "container {id} lost its billet labels as it started"
            ))),
            Err(err) => {
                self.undo_create(&client, &id).await;
                Err(err)
            }
        }
    }

    /// Whether `container` is this owner's, has both billet labels, and has
    /// stayed `created` longer than any live launch takes to start it (twice
    /// the timeout: the create and the start are each bounded by it).
    fn is_stale_launch(&self, container: &ContainerInspectResponse) -> bool {
        let created = container.state.as_ref().and_then(|state| state.status)
            == Some(ContainerStateStatusEnum::CREATED);
        let ours = matches!(self.instance(container), Ok(Some(_)));
        let old = container
            .created
            .as_deref()
            .and_then(parse_time)
            .and_then(|at| SystemTime::now().duration_since(at).ok())
            .is_some_and(|age| age > self.timeout.saturating_mul(2));
        created && ours && old
    }

    /// Finishes a launch that never started its container: starts it and
    /// answers it as it then is; `None` when the daemon will never start it
    /// (it is removed) or it is gone. A start that fails for now leaves it as
    /// it was (`Pending`), to be tried at the next look.
    async fn finish_launch(
        &self,
        client: &Docker,
        container: ContainerInspectResponse,
    ) -> Result<Option<ContainerInspectResponse>, Error> {
        let Some(id) = container.id.clone() else {
            return Ok(Some(container));
        };
        let started = self
            .call("start container", client.start_container(&id, None))
            .await;
        match started.as_ref().map_err(DaemonError::status) {
            // Started now, or by someone else in between (304).
            Ok(()) | Err(Some(304)) => {
                self.log(|| {
                    tracing::info!(
                        target: "billet_docker",
                        deployment = %self.owner,
                        id = %id,
                        "started a container whose launch never finished"
                    );
                });
                self.inspect(client, &id)
                    .await
                    .map_err(Error::inventory_unavailable)
            }
            Err(Some(404)) => Ok(None),
            Err(Some(code)) if (400..500).contains(&code) => {
                self.log(|| {
                    tracing::warn!(
                        target: "billet_docker",
                        deployment = %self.owner,
                        id = %id,
                        status = code,
                        "a container whose launch never finished cannot start; removed"
                    );
                });
                self.undo_create(client, &id).await;
                Ok(None)
            }
            Err(_) => {
                self.log(|| {
                    tracing::warn!(
                        target: "billet_docker",
                        deployment = %self.owner,
                        id = %id,
                        "a container whose launch never finished could not be started now; tried again at the next look"
                    );
                });
                Ok(Some(container))
            }
        }
    }

    /// Inspects each of `ids`; the whole answer or an error.
    async fn inspect_all(&self, client: &Docker, ids: Vec<String>) -> Result<Vec<Instance>, Error> {
        let inspected: Vec<Option<ContainerInspectResponse>> =
            futures::stream::iter(ids.into_iter().map(|id| {
                let client = client.clone();
                async move { self.inspect(&client, &id).await }
            }))
            .buffer_unordered(INSPECT_CONCURRENCY)
            .try_collect()
            .await
            .map_err(Error::inventory_unavailable)?;
        let mut finished = Vec::with_capacity(inspected.len());
        for container in inspected.into_iter().flatten() {
            if self.is_stale_launch(&container) {
                finished.extend(self.finish_launch(client, container).await?);
            } else {
                finished.push(container);
            }
        }
        let inspected = finished;
        let mut instances = Vec::with_capacity(inspected.len());
        // A container removed between the list and its inspect (404) is gone:
        // leaving it out is the exact answer as of now.
        for container in &inspected {
            if let Some(instance) = self
                .instance(container)
                .map_err(Error::inventory_unavailable)?
            {
                instances.push(instance);
            }
        }
        Ok(instances)
    }
}

/// The daemon's own message in a failure, or the whole failure.
fn daemon_message(err: &DaemonError) -> String {
    match &err.failure {
        Failure::Status { message, .. } => message.clone(),
        _ => err.to_string(),
    }
}

/// A daemon timestamp (RFC 3339, UTC, up to nanoseconds); `None` for docker's
/// zero time (`0001-01-01T00:00:00Z`, "never") or anything unreadable.
fn parse_time(text: &str) -> Option<SystemTime> {
    if text.starts_with("0001-") {
        return None;
    }
    humantime::parse_rfc3339(text).ok()
}

impl fmt::Debug for DockerProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DockerProvider")
            .field("owner", &self.owner)
            .field("endpoint", &self.endpoint_text)
            .field("timeout", &self.timeout)
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
        // D3: containers share the host's kernel, no isolation boundary: only trusted work.
        billet_provider::accepts_trust(self.kind(), billet_provider::Isolation::NoBoundary, trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        if let Err(err) = self.check_spec(&spec) {
            return Err(self.refuse(&spec.name, err));
        }
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
        let client = self
            .client("inspect container")
            .map_err(Error::inventory_unavailable)?;
        // The derived name is resolved by the daemon as an exact name (it holds
        // non-hex letters, so never as an id prefix); the labels are compared
        // here, exactly, as well.
        let inspected = self
            .inspect(&client, &container_name(&self.owner, name))
            .await
            .map_err(Error::inventory_unavailable)?;
        let Some(mut inspected) = inspected else {
            return Ok(None);
        };
        if self.is_stale_launch(&inspected) {
            match self.finish_launch(&client, inspected).await? {
                Some(now) => inspected = now,
                None => return Ok(None),
            }
        }
        let instance = self
            .instance(&inspected)
            .map_err(Error::inventory_unavailable)?;
        Ok(instance.filter(|instance| instance.name == name))
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        let client = self
            .client("list containers")
            .map_err(Error::inventory_unavailable)?;
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![format!("{OWNER_LABEL}={}", self.owner)],
        )]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let summaries = self
            .call("list containers", client.list_containers(Some(options)))
            .await
            .map_err(Error::inventory_unavailable)?;
        let mut ids = Vec::with_capacity(summaries.len());
        for summary in summaries {
            let owned = summary
                .labels
                .as_ref()
                .and_then(|labels| labels.get(OWNER_LABEL))
                .is_some_and(|owner| **owner == *self.owner);
            if !owned {
                continue;
            }
            let Some(id) = summary.id else {
                return Err(Error::inventory_unavailable(
                    "the docker daemon listed a container without an id",
                ));
            };
            ids.push(id);
        }
        self.inspect_all(&client, ids).await
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        let client = self
            .client("inspect container")
            .map_err(Error::unavailable)?;
        if !is_full_id(id.as_str()) {
            // Not a container id at all: the daemon holds no container by it.
            // Never handed to the daemon as a reference, which it would
            // resolve as an id prefix or a container name. Confirmed absent
            // only while the daemon answers, as every destroy is (H8).
            self.call("ping", client.ping())
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
            .inspect(&client, id.as_str())
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
        let labels = inspected.config.as_ref().and_then(|c| c.labels.as_ref());
        let owner = labels.and_then(|l| l.get(OWNER_LABEL)).cloned();
        let name = labels
            .and_then(|l| l.get(NAME_LABEL))
            .cloned()
            .unwrap_or_default();
        if owner.as_deref() != Some(&*self.owner) {
            // Another deployment's container, or one billet did not start
            // (no owner label: it belongs to no deployment).
            let err = Error::NotOwned {
                id: id.clone(),
                owner: owner.unwrap_or_default(),
            };
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
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        let removed = self
            .call(
                "remove container",
                client.remove_container(id.as_str(), Some(options)),
            )
            .await;
        let teardown = match removed {
            Ok(()) => Teardown::Stopped,
            Err(err) if err.status() == Some(404) => Teardown::Absent,
            Err(err) if err.status() == Some(409) => {
                // Another call is removing it right now; wait for it to be gone.
                self.await_removal(&client, id).await?;
                Teardown::Absent
            }
            Err(err) => return Err(Error::unavailable(err)),
        };
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
}

impl DockerProvider {
    /// Waits, within the timeout, until the daemon no longer holds `id`.
    async fn await_removal(&self, client: &Docker, id: &InstanceId) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match self.inspect(client, id.as_str()).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(Some(_)) => {
                    return Err(Error::unavailable(format!(
                        "container {id} was still being removed by another call after {:?}",
                        self.timeout
                    )));
                }
                Err(err) => return Err(Error::unavailable(err)),
            }
        }
    }
}
