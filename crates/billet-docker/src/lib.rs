//! The docker backend of the billet fleet: one deployment's containers on a
//! docker daemon, through [`bollard`].
//!
//! [`DockerProvider`] keeps every obligation of [`billet_provider::Provider`]
//! on a real daemon: its inventory never answers short, destroy is scoped by
//! the deployment identity and answers only to a full container id, only
//! trusted work runs (containers share the host's kernel), and each call has
//! one deadline, however many daemon calls it makes, so that a daemon that is
//! gone or hung answers errors of the right kind instead of hanging the
//! scheduler. A launch whose answer is lost, or whose caller drops it, leaves
//! nothing once the daemon answers again.
//!
//! # Identity on the daemon
//!
//! Every container carries three labels, [`OWNER_LABEL`] (the deployment),
//! [`NAME_LABEL`] (the instance name, exactly) and [`LAUNCH_LABEL`] (a mark
//! drawn at random for each launch), and a daemon-side name derived from the
//! owner and the name by [`container_name`], so that the daemon itself refuses
//! a second container for a name this deployment holds. A container is this
//! deployment's only if every one of these marks is there: `list`, `find` and
//! `destroy` apply that one rule. Any instance name works, though docker's own
//! container names allow only a few characters.
//!
//! # Confinement (D15)
//!
//! Every container runs with [`NO_NEW_PRIVILEGES`], every capability dropped
//! but a minimal set ([`DEFAULT_CAPABILITIES`] unless the pool grants more), a
//! pids limit, a json-file log bounded in size and files, and never
//! privileged; CPUs, memory, the user and a read-only root come from the
//! pool's [`Confinement`] ([`Builder::confinement`]), CPUs and memory from
//! each spec's resources where the pool sets none.
//!
//! # A boundary on the same host (D19)
//!
//! A pool may run its containers under another OCI runtime the daemon lists
//! ([`Builder::runtime`]), such as gVisor's `runsc`, and take it for an
//! isolation boundary ([`Builder::isolation`]): such a provider accepts
//! untrusted and unknown work. [`DockerProvider::check_runtime`] asks the
//! daemon whether it lists the runtime, and whether a boundary is surely
//! not one ([`HOST_KERNEL_RUNTIMES`]); a launch asks it once before the
//! provider's first container.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use billet_docker::{DockerProvider, PullPolicy};
//! use billet_provider::{Provider, Spec, TrustClass};
//!
//! # async fn run() -> Result<(), billet_provider::Error> {
//! let docker = DockerProvider::builder("ci-eu-west-1")
//!     .endpoint("unix:///var/run/docker.sock")
//!     .timeout(Duration::from_secs(10))
//!     .network("none")
//!     .pull(PullPolicy::Never)
//!     .build()?;
//! let spec = Spec::new("job-1", ["sleep", "30"])
//!     .with_image("busybox:latest")
//!     .with_trust(TrustClass::Trusted);
//! let instance = docker.launch(spec).await?;
//! assert_eq!(docker.find("job-1").await?.map(|i| i.id), Some(instance.id.clone()));
//! docker.destroy(&instance.id).await?;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod confinement;
mod daemon;
pub mod dialect;
mod endpoint;
mod naming;
mod provider;
mod runtime;
mod seen;
mod tls;

pub use confinement::{
    Confinement, DEFAULT_CAPABILITIES, DEFAULT_LOG_MAX_FILES, DEFAULT_LOG_MAX_SIZE,
    DEFAULT_PIDS_LIMIT, NO_NEW_PRIVILEGES,
};
pub use daemon::{DaemonError, Failure};
pub use endpoint::{DEFAULT_SOCKET, Endpoint};
pub use naming::{LAUNCH_LABEL, NAME_LABEL, NAME_PREFIX, OWNER_LABEL, container_name};
pub use provider::{
    Builder, DEFAULT_PULL_TIMEOUT, DEFAULT_TIMEOUT, DockerProvider, HINT_BACKOFF_FIRST,
    HINT_BACKOFF_MAX, HINT_BUFFER, INSPECT_PAUSE_FIRST, INSPECT_TRIES, LAUNCHES_AT_ONCE,
    PullPolicy, STORAGE_CHECK_LABEL, StorageError,
};
pub use runtime::{HOST_KERNEL_RUNTIMES, RuntimeError, runs_on_host_kernel};
pub use tls::{
    ClientTls, IDLE_TIMEOUT, MAX_IDLE_CONNECTIONS, MAX_PEM_BYTES, STALE_RETRIES, TlsError, TlsFile,
    TlsFiles,
};
