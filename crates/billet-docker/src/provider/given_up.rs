//! The launches [`DockerProvider`] gave up on after their create may have
//! reached the daemon (D11), and how each is settled.
//!
//! A launch is given up on when the connection fails after the daemon
//! received its create or its start, when its deadline passes, or when the
//! caller drops it. Its [`LaunchGuard`], armed while the create or the
//! start may have reached the daemon, records it as [`Abandoned`]. The
//! provider then looks at that launch's container (recognised by its launch
//! mark) at its next `list`, or at a `find` or `launch` of that name
//! ([`reclaim_name`](DockerProvider::reclaim_name)), before it answers. One
//! never started is removed and never reported, and a relaunch of the name
//! is not refused because of it. One whose start reached the daemon is an
//! instance like any other from then on (its command has run, so it is
//! never removed behind the caller's back: a job's command runs once); it
//! holds its name until destroyed. A launch given up on whose container the
//! daemon does not hold twice the timeout later never will: a `list` then
//! forgets it.

use std::time::Instant as StdInstant;

use billet_provider::Error;
use bollard::Docker;

use super::DockerProvider;
use super::ownership::Claim;
use super::removal::Removal;
use super::state::never_started;
use crate::daemon::Deadline;
use crate::naming::container_name;

/// A launch this provider gave up on after its create may have reached the
/// daemon: its container, if any, is removed at the next chance.
#[derive(Debug, Clone)]
pub(super) struct Abandoned {
    name: String,
    mark: String,
    pub(super) since: StdInstant,
}

/// Marks a launch that may have reached the daemon: unless disarmed (the
/// launch answered, or it is known to have left nothing), dropping it records
/// the launch as abandoned, so its container is removed at the next chance
/// if it never started (one that started is reported as it is).
/// Dropped also when the caller drops the launch's future.
pub(super) struct LaunchGuard<'a> {
    pub(super) provider: &'a DockerProvider,
    pub(super) name: String,
    pub(super) mark: String,
    pub(super) armed: bool,
}

impl Drop for LaunchGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.provider.abandoned.lock().push(Abandoned {
            name: self.name.clone(),
            mark: self.mark.clone(),
            since: StdInstant::now(),
        });
        self.provider.log(|| {
            tracing::warn!(
                target: "billet_docker",
                deployment = %self.provider.owner,
                id = tracing::field::Empty,
                name = %self.name,
                launch = %self.mark,
                "a launch was given up after the daemon may have created its container; at the next look it is removed if it never started, else reported as it is"
            );
        });
    }
}

impl DockerProvider {
    /// Whether the launch that left a container with this mark was given up.
    pub(super) fn is_abandoned(&self, mark: &str) -> bool {
        self.abandoned.lock().iter().any(|a| a.mark == mark)
    }

    fn forget(&self, mark: &str) {
        self.abandoned.lock().retain(|a| a.mark != mark);
    }

    /// A launch given up on whose container did start: no longer given up,
    /// an instance like any other from now on (D11).
    pub(super) fn adopt_abandoned(&self, id: &str, name: &str, mark: &str) {
        self.settle_abandoned(
            id,
            name,
            mark,
            "the container of a launch that was given up had started; reported as it is",
        );
    }

    /// A launch given up on is settled: forgotten, and said so.
    fn settle_abandoned(&self, id: &str, name: &str, mark: &str, what: &str) {
        self.forget(mark);
        self.log(|| {
            tracing::info!(
                target: "billet_docker",
                deployment = %self.owner,
                id,
                name,
                "{what}"
            );
        });
    }

    /// Removes the container of a launch this provider gave up on (D11).
    pub(super) async fn remove_abandoned(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
        name: &str,
        mark: &str,
    ) -> Result<(), String> {
        match self.remove_exact(client, deadline, id).await {
            Ok(Removal::Removed | Removal::Gone) => {}
            Ok(Removal::InProgress) => self
                .await_removal(client, deadline, id)
                .await
                .map_err(|err| err.to_string())?,
            Err(err) => return Err(err.describe(id)),
        }
        self.settle_abandoned(
            id,
            name,
            mark,
            "removed the container of a launch that was given up",
        );
        Ok(())
    }

    /// Before a launch of `name`: removes the container of a launch of that
    /// name this provider gave up on, so that the relaunch is not refused
    /// because of it (D11). No daemon call when there is none.
    pub(super) async fn reclaim_name(
        &self,
        client: &Docker,
        deadline: Deadline,
        name: &str,
    ) -> Result<(), Error> {
        let given_up: Vec<Abandoned> = self
            .abandoned
            .lock()
            .iter()
            .filter(|a| a.name == name)
            .cloned()
            .collect();
        if given_up.is_empty() {
            return Ok(());
        }
        let Some(container) = self
            .inspect(client, deadline, &container_name(&self.owner, name))
            .await
            .map_err(Error::unavailable)?
        else {
            return Ok(());
        };
        if let (Claim::Ours { mark, .. }, Some(id)) =
            (self.claim_inspected(&container), &container.id)
            && given_up.iter().any(|a| a.mark == mark)
        {
            let mark = mark.to_owned();
            if never_started(&container) {
                self.remove_abandoned(client, deadline, id, name, &mark)
                    .await
                    .map_err(Error::unavailable)?;
            } else {
                // Started: it holds the name, and the relaunch is a conflict.
                self.adopt_abandoned(id, name, &mark);
            }
        }
        Ok(())
    }
}
