//! How [`DockerProvider`] removes a container: only the one with the full id
//! it was handed (D12), and, of two destroys of one id at once, exactly one
//! answering that it removed it (D6), on every engine (D18).
//!
//! docker arbitrates two removals of one container itself: the second is
//! answered `409` (removal in progress) or `404`, and a forced removal marks
//! the container `removing` before it stops it, so that no look sees it
//! stopped (a state its command did not reach): on docker a running
//! container is force-removed at once. podman does not arbitrate when the
//! removal is forced: two forced removals of one running container are both
//! answered `204`. Whether the engine arbitrates is read once per provider
//! from the components its version names
//! ([`dialect`](crate::dialect)). Where it does not, two calls the engine
//! serialises and answers differently to the loser are used instead:
//!
//! * a container that is not running (it ended, or never started) is
//!   removed **without force**: the engine removes it once and answers the
//!   other call `404` (podman) or `409`/`404` (docker);
//! * a running one is first **paused**, which only one call can do (the other
//!   is answered "already paused"); the call that paused it force-removes
//!   it, the other waits until it is gone and answers
//!   [`Teardown::Absent`]. A paused container still reads as `Running`, so a
//!   look in between sees no state its command did not reach. One found
//!   paused with nobody removing it (paused by hand, or by a destroy that
//!   failed after its pause) is force-removed after [`PAUSED_GRACE`] of the
//!   timeout.
//! * a destroy that asked for the pause and then failed (its connection lost
//!   with the pause's answer or the removal's) may have left the container
//!   paused, its job frozen, where it would stay until another destroy. So
//!   the provider keeps its id ([`DockerProvider::claims_left`]), and its
//!   inventory, finding that container paused, finishes the removal before it
//!   answers: the destroy happened, as its caller asked, rather than leave a
//!   job that never ends. Found running, the pause did not happen, and the
//!   container is left as it is. Only after the destroy has ended: a removal
//!   under way is never raced.
//!
//! Docker needs no pause, and must not have one: a pause whose answer is
//! lost leaves the job frozen until another destroy (the H11 suite found
//! it: the destroy "did not happen", yet its job never ended), and under
//! docker gVisor's `runsc` never reports a paused sandbox's end, so a forced
//! removal of a paused gVisor container waits out docker's 10 s kill timeout
//! and one resumed meanwhile is left a zombie (D19).

use std::time::{Duration, Instant as StdInstant};

use billet_provider::{Error, Teardown};
use bollard::Docker;
use bollard::models::ContainerStateStatusEnum as Status;
use bollard::query_parameters::RemoveContainerOptionsBuilder;

use super::DockerProvider;
use crate::daemon::{DaemonError, Deadline};
use crate::dialect;

/// How long, as a share of the provider's timeout (a quarter), a destroy
/// waits for a container it found paused to be removed by the call that
/// paused it before it removes the container itself.
pub(super) const PAUSED_GRACE: u32 = 4;

/// The most ids of failed claims kept ([`DockerProvider::claims_left`]): one
/// past it forgets the oldest, whose container, if it is still paused, the
/// next destroy of it removes after [`PAUSED_GRACE`].
pub(super) const CLAIMS_KEPT: usize = 1024;

/// What became of a removal.
pub(super) enum Removal {
    /// Removed now.
    Removed,
    /// The daemon no longer held it (`404`).
    Gone,
    /// Another call is removing it.
    InProgress,
}

/// Why a removal was not made.
pub(super) enum RemoveError {
    Daemon(DaemonError),
    /// The daemon holds a container *named* like the id (its id here): the
    /// id could resolve to it, so nothing is removed through it.
    LookAlike(String),
}

impl RemoveError {
    pub(super) fn describe(&self, id: &str) -> String {
        match self {
            RemoveError::Daemon(err) => err.to_string(),
            RemoveError::LookAlike(other) => format!(
                "container {other} on the docker daemon is named {id:?}, like the container to remove: \
                 the daemon could resolve that id to it, so billet removes nothing through it while it exists"
            ),
        }
    }
}

impl DockerProvider {
    /// Force-removes the container with the full id `id`, and only it (D12):
    /// for containers that never started, whose removal answers nobody.
    ///
    /// The daemon resolves a reference as a full id, then as a container
    /// name, then as an id prefix: were the container removed by another
    /// call between our inspect and this removal, a container *named* `id`
    /// would be removed in its place. So nothing is removed while the daemon
    /// holds a container of that name (asked through the list call's name
    /// filter, which never resolves references).
    pub(super) async fn remove_exact(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
    ) -> Result<Removal, RemoveError> {
        self.refuse_look_alikes(client, deadline, id).await?;
        match self.remove(client, deadline, id, true).await {
            Ok(Some(removal)) => Ok(removal),
            // A forced removal is never refused for running.
            Ok(None) => Ok(Removal::InProgress),
            Err(err) => Err(RemoveError::Daemon(err)),
        }
    }

    /// One removal handed the full id `id`, with or without force; `None`
    /// when, without force, the engine refused it because the container
    /// runs. A forced removal that met the end of the container's process
    /// ([`dialect::removal_met_its_end`]: podman on gVisor, the container
    /// left exited) is asked once more, and then removes it.
    async fn remove(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
        force: bool,
    ) -> Result<Option<Removal>, DaemonError> {
        let mut again = force;
        loop {
            let options = RemoveContainerOptionsBuilder::new()
                .force(force)
                .v(true)
                .build();
            match self
                .call(
                    deadline,
                    "remove container",
                    client.remove_container(id, Some(options)),
                )
                .await
            {
                Ok(()) => return Ok(Some(Removal::Removed)),
                Err(err) if dialect::no_such_container(&err) => return Ok(Some(Removal::Gone)),
                Err(err) if !force && dialect::removal_refused_running(&err) => return Ok(None),
                Err(err) if dialect::removal_in_progress(&err) => {
                    return Ok(Some(Removal::InProgress));
                }
                Err(err) if again && dialect::removal_met_its_end(&err) => again = false,
                Err(err) => return Err(err),
            }
        }
    }

    /// Removes this deployment's container `id`, last seen in `status`, so
    /// that of two destroys at once exactly one answers
    /// [`Teardown::Stopped`] (see the module's documentation). One that asked
    /// for a pause and failed leaves `id` to the inventory to finish.
    pub(super) async fn remove_claimed(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
        status: Option<Status>,
    ) -> Result<Teardown, Error> {
        let mut paused = false;
        let removed = self
            .claim_and_remove(client, deadline, id, status, &mut paused)
            .await;
        match &removed {
            Ok(_) => self.forget_claim(id),
            Err(_) if paused => self.leave_claim(id),
            Err(_) => {}
        }
        removed
    }

    /// Whether a destroy here asked to pause container `id` and failed
    /// before it removed it (see the module's documentation).
    pub(super) fn claim_left(&self, id: &str) -> bool {
        self.claims_left.lock().iter().any(|left| left == id)
    }

    /// Removes container `id`, which a destroy here paused and failed to
    /// remove (see the module's documentation).
    pub(super) async fn finish_claim(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
    ) -> Result<(), RemoveError> {
        self.remove_exact(client, deadline, id)
            .await
            .map(|_| self.forget_claim(id))
    }

    /// Container `id` is removed, or known to be left as it is.
    pub(super) fn forget_claim(&self, id: &str) {
        self.claims_left.lock().retain(|left| left != id);
    }

    fn leave_claim(&self, id: &str) {
        let mut left = self.claims_left.lock();
        if left.iter().any(|known| known == id) {
            return;
        }
        if left.len() == CLAIMS_KEPT {
            left.pop_front();
        }
        left.push_back(id.to_owned());
    }

    /// [`remove_claimed`](Self::remove_claimed)'s work; sets `paused` once
    /// it asks the engine to pause the container.
    async fn claim_and_remove(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
        mut status: Option<Status>,
        paused: &mut bool,
    ) -> Result<Teardown, Error> {
        self.refuse_look_alikes(client, deadline, id)
            .await
            .map_err(|err| Error::unavailable(err.describe(id)))?;
        let grace = self.timeout / PAUSED_GRACE;
        let mut paused_since = None;
        loop {
            let removal = match status {
                // An engine that arbitrates forced removals needs no claim.
                Some(Status::RUNNING | Status::RESTARTING | Status::STOPPING)
                    if self
                        .arbitrates_forced_removals(client, deadline)
                        .await
                        .map_err(Error::unavailable)? =>
                {
                    self.remove(client, deadline, id, true).await
                }
                Some(Status::RUNNING | Status::RESTARTING | Status::STOPPING) => {
                    *paused = true;
                    match self
                        .call(deadline, "pause container", client.pause_container(id))
                        .await
                    {
                        // This call holds the claim: it removes the container.
                        Ok(()) => self.remove(client, deadline, id, true).await,
                        Err(err) if dialect::no_such_container(&err) => Ok(Some(Removal::Gone)),
                        Err(err) if dialect::already_paused(&err) => {
                            status = Some(Status::PAUSED);
                            continue;
                        }
                        Err(err) if dialect::not_running(&err) => {
                            match self.status_of(client, deadline, id).await? {
                                Some(now) => status = Some(now),
                                None => return Ok(Teardown::Absent),
                            }
                            continue;
                        }
                        // The daemon answered but did not pause, in words
                        // not read above: a container that ended while it
                        // was being paused makes podman's runc fail with
                        // only "exit status 1". Look again: one that is no
                        // longer running goes the way of one that ended;
                        // one still running makes this the answer.
                        Err(err) if err.status().is_some() => {
                            match self.status_of(client, deadline, id).await? {
                                None => return Ok(Teardown::Absent),
                                Some(Status::RUNNING | Status::RESTARTING | Status::STOPPING) => {
                                    return Err(Error::unavailable(err));
                                }
                                Some(now) => status = Some(now),
                            }
                            continue;
                        }
                        Err(err) => return Err(Error::unavailable(err)),
                    }
                }
                Some(Status::PAUSED) => {
                    let since = *paused_since.get_or_insert_with(StdInstant::now);
                    if since.elapsed() < grace {
                        // Another call paused it to remove it: wait for that.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        match self.status_of(client, deadline, id).await? {
                            Some(now) => status = Some(now),
                            None => return Ok(Teardown::Absent),
                        }
                        continue;
                    }
                    // Nobody is removing it: this call does.
                    self.remove(client, deadline, id, true).await
                }
                Some(Status::REMOVING) => Ok(Some(Removal::InProgress)),
                // Ended or never started: no claim needed, the engine
                // removes it once.
                _ => self.remove(client, deadline, id, false).await,
            };
            match removal.map_err(Error::unavailable)? {
                Some(Removal::Removed) => return Ok(Teardown::Stopped),
                Some(Removal::Gone) => return Ok(Teardown::Absent),
                Some(Removal::InProgress) => {
                    self.await_removal(client, deadline, id).await?;
                    return Ok(Teardown::Absent);
                }
                // It started since it was inspected: claim it as a running one.
                None => match self.status_of(client, deadline, id).await? {
                    Some(now) => status = Some(now),
                    None => return Ok(Teardown::Absent),
                },
            }
        }
    }

    /// The status of container `id` now (`EMPTY` when the daemon names
    /// none); `None` once the daemon no longer holds it, or answers another
    /// container for it (one named like it). Gone is answered at once, never
    /// by one more call handed `id`: with the container gone, the daemon
    /// would resolve `id` as a name, to such a look-alike (D12).
    async fn status_of(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
    ) -> Result<Option<Status>, Error> {
        let inspected = self
            .inspect(client, deadline, id)
            .await
            .map_err(Error::unavailable)?;
        Ok(inspected.filter(|c| c.id.as_deref() == Some(id)).map(|c| {
            c.state
                .and_then(|state| state.status)
                .unwrap_or(Status::EMPTY)
        }))
    }

    /// An error while the daemon holds a container *named* `id` (a full id):
    /// a call handed `id` would reach it once the container `id` is gone.
    /// Asked through the list call's name filter, which never resolves
    /// references.
    pub(super) async fn refuse_look_alikes(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
    ) -> Result<(), RemoveError> {
        let named = self
            .list_filtered(client, deadline, "name", dialect::exact_name_filter(id))
            .await
            .map_err(RemoveError::Daemon)?;
        match named.into_iter().find(|c| c.id.as_deref() != Some(id)) {
            Some(other) => Err(RemoveError::LookAlike(other.id.unwrap_or_default())),
            None => Ok(()),
        }
    }

    /// Waits, within the deadline, until the daemon no longer holds `id`.
    pub(super) async fn await_removal(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
    ) -> Result<(), Error> {
        loop {
            // A container answered under another id (one named like `id`) is
            // not the one being removed: that one is gone.
            match self.inspect(client, deadline, id).await {
                Ok(None) => return Ok(()),
                Ok(Some(other)) if other.id.as_deref() != Some(id) => return Ok(()),
                Ok(Some(_)) if !deadline.passed() => {
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
