//! Containers of this owner left `created` by a launch that will never
//! finish (the process making it died between the create and the start),
//! and how the inventory finishes them.
//!
//! A container still `created` (never started) longer than twice the
//! timeout after its creation, and not of a launch this provider gave up on
//! ([`given_up`](super::given_up)), is such a one. `list` and `find` finish
//! it: they start it and report what it then is. One the daemon will never
//! start (a `4xx`) is removed and left out; one that cannot be started now
//! stays `Pending`, and is tried again at the next look. So no container
//! stays `created` for ever, and a job's command runs once.

use std::time::SystemTime;

use billet_provider::Error;
use bollard::Docker;
use bollard::models::{ContainerInspectResponse, ContainerStateStatusEnum};

use super::DockerProvider;
use super::removal::Removal;
use super::state::parse_time;
use crate::daemon::Deadline;
use crate::dialect;

impl DockerProvider {
    /// Whether `container` (this deployment's, by the one rule) has stayed
    /// `created` longer than any live launch takes to start it (twice the
    /// timeout: a launch's create and start are within one timeout, and the
    /// daemon's clock may differ from ours).
    pub(super) fn is_stale_launch(&self, container: &ContainerInspectResponse) -> bool {
        let created = container.state.as_ref().and_then(|state| state.status)
            == Some(ContainerStateStatusEnum::CREATED);
        let old = container
            .created
            .as_deref()
            .and_then(|at| parse_time(at).ok().flatten())
            .and_then(|at| SystemTime::now().duration_since(at).ok())
            .is_some_and(|age| age > self.timeout.saturating_mul(2));
        created && old
    }

    /// Finishes a launch that never started its container: starts it and
    /// answers it as it then is; `None` when the daemon will never start it
    /// (it is removed) or it is gone. A start that fails for now leaves it as
    /// it was (`Pending`), to be tried at the next look.
    pub(super) async fn finish_launch(
        &self,
        client: &Docker,
        deadline: Deadline,
        container: ContainerInspectResponse,
    ) -> Result<Option<ContainerInspectResponse>, Error> {
        let Some(id) = container.id.clone() else {
            return Ok(Some(container));
        };
        // The start is handed the full id: never while a container named
        // like it could take its place (D12).
        self.refuse_look_alikes(client, deadline, &id)
            .await
            .map_err(|err| Error::inventory_unavailable(err.describe(&id)))?;
        let started = self
            .call(
                deadline,
                "start container",
                client.start_container(&id, None),
            )
            .await;
        // What the refusal means, on every engine (D18): gone, or never
        // startable (a `4xx`, or the spec cannot start), else for now.
        let started = started.as_ref().map_err(|err| {
            if dialect::no_such_container(err) {
                Some(404)
            } else if dialect::spec_cannot_start(err) {
                Some(400)
            } else {
                err.status()
            }
        });
        match started {
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
                self.inspect(client, deadline, &id)
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
                match self.remove_exact(client, deadline, &id).await {
                    Ok(Removal::Removed | Removal::Gone) => Ok(None),
                    Ok(Removal::InProgress) => Ok(None),
                    Err(err) => Err(Error::inventory_unavailable(err.describe(&id))),
                }
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
}
