//! The bound on a container's writable layer (`storage:`, L27), and the
//! check that the daemon keeps it.
//!
//! Docker bounds a container's writable layer (`--storage-opt size=`) only
//! on some storage drivers: overlay2 over xfs mounted with `pquota`, btrfs,
//! zfs, devicemapper; podman on overlay over xfs with quotas. Elsewhere the
//! daemon refuses such a container, or (an engine that ignores the option)
//! creates it unbounded. [`DockerProvider::check_storage`] finds out before
//! any job is placed, by creating one such container, never started, and
//! reading the bound back.

use std::collections::HashMap;
use std::fmt;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::RemoveContainerOptionsBuilder;

use super::DockerProvider;
use super::launch::daemon_message;
use crate::daemon::DaemonError;
use crate::dialect;

/// The label on the container [`DockerProvider::check_storage`] creates, its
/// value the deployment: never one of a deployment's containers (it carries
/// none of their marks), and removed once read.
pub const STORAGE_CHECK_LABEL: &str = "dev.billet.storage-check";

/// Why a pool's `storage` bound cannot be kept, as
/// [`DockerProvider::check_storage`] finds on its daemon.
#[derive(Debug)]
#[non_exhaustive]
pub enum StorageError {
    /// The daemon refused a container with the bound: its storage driver
    /// cannot keep one (or the image is missing: the daemon says which).
    Refused {
        /// The bound, in bytes.
        storage: u64,
        /// The daemon's endpoint.
        endpoint: String,
        /// The daemon's own words.
        message: String,
    },
    /// The daemon created the container but reports no such bound on it: it
    /// ignores the option.
    Ignored {
        /// The bound, in bytes.
        storage: u64,
        /// The daemon's endpoint.
        endpoint: String,
        /// What it reports instead (empty: nothing).
        reported: String,
    },
    /// The daemon could not be asked.
    Daemon(DaemonError),
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const WHERE: &str = "a daemon bounds a container's writable layer only on some storage \
             drivers (docker: overlay2 over xfs mounted with pquota, btrfs, zfs; podman: overlay \
             over xfs with quotas): remove `storage`, or give the daemon such storage";
        match self {
            StorageError::Refused {
                storage,
                endpoint,
                message,
            } => write!(
                f,
                "`storage: {storage}` cannot be kept by the daemon at {endpoint}, which refused a container with it: {message}; {WHERE}"
            ),
            StorageError::Ignored {
                storage,
                endpoint,
                reported,
            } => write!(
                f,
                "`storage: {storage}` is ignored by the daemon at {endpoint}: a container created with it reports {reported:?}; {WHERE}"
            ),
            StorageError::Daemon(err) => write!(f, "{err}"),
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Daemon(err) => Some(err),
            _ => None,
        }
    }
}

/// The `StorageOpt` that bounds a writable layer to `bytes`.
pub(crate) fn storage_opt(bytes: u64) -> HashMap<String, String> {
    HashMap::from([("size".to_owned(), bytes.to_string())])
}

impl DockerProvider {
    /// Whether the daemon keeps the provider's bound on a container's
    /// writable layer ([`Confinement::storage`](crate::Confinement::storage),
    /// L27): creates one container from `image` with the bound, never starts
    /// it, reads the bound back, and removes it. `Ok` at once, without a
    /// daemon call, when the confinement sets no bound. Answers within the
    /// provider's timeout for each call.
    pub async fn check_storage(&self, image: &str) -> Result<(), StorageError> {
        let Some(storage) = self.confinement.storage else {
            return Ok(());
        };
        let client = self
            .client("create a container to check `storage`")
            .map_err(StorageError::Daemon)?;
        let body = ContainerCreateBody {
            image: Some(image.to_owned()),
            cmd: Some(vec!["true".to_owned()]),
            labels: Some(HashMap::from([(
                STORAGE_CHECK_LABEL.to_owned(),
                String::from(&*self.owner),
            )])),
            host_config: Some(HostConfig {
                storage_opt: Some(storage_opt(storage)),
                runtime: self.runtime.clone(),
                network_mode: Some("none".to_owned()),
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        };
        let created = self
            .call(
                self.deadline(),
                "create a container to check `storage`",
                client.create_container(None, body),
            )
            .await;
        let id = match created {
            Ok(created) => created.id,
            Err(err) if err.status().is_some() => {
                return Err(StorageError::Refused {
                    storage,
                    endpoint: self.endpoint_text.clone(),
                    message: daemon_message(&err),
                });
            }
            Err(err) => return Err(StorageError::Daemon(err)),
        };
        let read = self
            .call(
                self.deadline(),
                "inspect the container made to check `storage`",
                dialect::inspect_container(&client, &id),
            )
            .await;
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        let removed = self
            .call(
                self.deadline(),
                "remove the container made to check `storage`",
                client.remove_container(&id, Some(options)),
            )
            .await;
        let reported = read
            .map_err(StorageError::Daemon)?
            .host_config
            .and_then(|host| host.storage_opt)
            .and_then(|opt| opt.get("size").cloned())
            .unwrap_or_default();
        removed.map_err(StorageError::Daemon)?;
        if reported != storage.to_string() {
            return Err(StorageError::Ignored {
                storage,
                endpoint: self.endpoint_text.clone(),
                reported,
            });
        }
        Ok(())
    }
}
