//! What [`DockerProvider`]'s inventory answers for the containers it sees:
//! the one path `list` and `find` take for each of them (D14), and the
//! inspects of a `list`. (`list` and `find` themselves are in the
//! [`Provider`](billet_provider::Provider) impl, beside the type.)
//!
//! `list` asks the daemon for this owner's containers in every state (one
//! list call), decides from its summaries which are this deployment's (the
//! one rule, [`ownership`](super::ownership): labels and name are in the
//! summary), and inspects each of them for its exit code and start time,
//! eight at a time, except one it inspected at an earlier list and that the
//! list call shows in the same state since: what an inspect reads does not
//! change while a container stays running, paused, exited or dead, so with
//! nothing changed a list is one daemon call ([`seen`](crate::seen)).
//! `created` containers and passing states are inspected at every list.
//! This relies on billet's containers going through their states once
//! (billet sets no restart policy and starts no container that has run): a
//! container started again by hand and seen in the same state at two lists
//! keeps the start time first read (an exit code that differs from the one
//! read shows in the list call's status text, and has the container
//! inspected again). What is kept is only for containers the last list call
//! showed. If any part of the answer cannot be had, the whole call is
//! [`Error::InventoryUnavailable`], never a short answer. `find` inspects
//! the daemon-side name, and compares names exactly.
//!
//! Each container inspected is then settled
//! ([`settle`](DockerProvider::settle)): one of a launch given up on is
//! removed if it never started ([`given_up`](super::given_up)), a stale
//! `created` one is finished ([`stale_launch`](super::stale_launch)), one
//! being removed is gone (the kill of a forced removal is no state its
//! command reached).

use billet_provider::{Error, Instance};
use bollard::Docker;
use bollard::models::{
    ContainerInspectResponse, ContainerStateStatusEnum, ContainerSummaryStateEnum,
};
use futures::{StreamExt, TryStreamExt};

use super::DockerProvider;
use super::ownership::Claim;
use super::state::never_started;
use crate::daemon::Deadline;
use crate::seen::as_listed;

/// How many containers `list` inspects at once.
const INSPECT_CONCURRENCY: usize = 8;

impl DockerProvider {
    /// What the inventory answers for one inspected container: the one path
    /// both `list` and `find` take (D14). Not this deployment's: nothing. Of
    /// a launch this provider gave up on: removed, nothing. Stale `created`:
    /// finished. Else its instance.
    pub(super) async fn settle(
        &self,
        client: &Docker,
        deadline: Deadline,
        container: ContainerInspectResponse,
    ) -> Result<Option<Instance>, Error> {
        let (name, mark) = match self.claim_inspected(&container) {
            Claim::Ours { name, mark } => (name.to_owned(), mark.to_owned()),
            Claim::Theirs { .. } | Claim::Foreign => return Ok(None),
        };
        let Some(id) = container.id.clone() else {
            return Err(Error::inventory_unavailable(
                "the docker daemon answered a container without an id",
            ));
        };
        // Being removed (a destroy under way, here or in another process):
        // gone as of now. Reporting it killed (`Stopped` with the kill's
        // code) would show a state its command never reached (H12).
        if container.state.as_ref().and_then(|state| state.status)
            == Some(ContainerStateStatusEnum::REMOVING)
        {
            return Ok(None);
        }
        // Paused by a destroy here that failed before it removed it: the
        // removal is finished now, so the job is not left frozen (see
        // `removal`). One not paused is left as it is.
        if self.claim_left(&id) {
            let status = container.state.as_ref().and_then(|state| state.status);
            if status == Some(ContainerStateStatusEnum::PAUSED) {
                self.finish_claim(client, deadline, &id)
                    .await
                    .map_err(|err| Error::inventory_unavailable(err.describe(&id)))?;
                return Ok(None);
            }
            self.forget_claim(&id);
        }
        if self.is_abandoned(&mark) {
            if never_started(&container) {
                self.remove_abandoned(client, deadline, &id, &name, &mark)
                    .await
                    .map_err(Error::inventory_unavailable)?;
                return Ok(None);
            }
            // Its start reached the daemon: the instance exists and its
            // command has run or is running. Reported as it is, never
            // removed behind the caller's back, so a job's command runs once.
            self.adopt_abandoned(&id, &name, &mark);
        }
        let container = if self.is_stale_launch(&container) {
            match self.finish_launch(client, deadline, container).await? {
                Some(now) => now,
                None => return Ok(None),
            }
        } else {
            container
        };
        self.instance(&container)
            .map_err(Error::inventory_unavailable)
    }

    /// Inspects and settles each of `ids`, each with the state the list call
    /// showed it in (none when its reading may not be kept); the whole answer
    /// or an error. An instance read in the state the list call showed is
    /// kept for the next list.
    pub(super) async fn inspect_all(
        &self,
        client: &Docker,
        deadline: Deadline,
        ids: Vec<(String, Option<ContainerSummaryStateEnum>)>,
    ) -> Result<Vec<Instance>, Error> {
        let settled: Vec<Option<Instance>> =
            futures::stream::iter(ids.into_iter().map(|(id, listed)| {
                let client = client.clone();
                async move {
                    // A container removed between the list and its inspect (404)
                    // is gone: leaving it out is the exact answer as of now.
                    let container = match self.inspect(&client, deadline, &id).await {
                        Ok(Some(container)) => container,
                        Ok(None) => return Ok(None),
                        Err(err) => return Err(Error::inventory_unavailable(err)),
                    };
                    let read_in = container
                        .state
                        .as_ref()
                        .and_then(|state| state.status)
                        .map(as_listed);
                    let instance = self.settle(&client, deadline, container).await?;
                    if let (Some(instance), Some(state)) = (&instance, listed)
                        && read_in == Some(state)
                    {
                        self.seen.lock().keep(&id, state, instance);
                    }
                    Ok(instance)
                }
            }))
            .buffer_unordered(INSPECT_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(settled.into_iter().flatten().collect())
    }
}
