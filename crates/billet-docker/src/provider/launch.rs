//! How [`DockerProvider`] launches: the spec's checks, the create under the
//! daemon-side name, the image pull when the provider pulls, the start, the
//! read of what was started, and the undo of a launch that fails.
//!
//! A launch checks the spec (trust, a name, an image, a command) before any
//! daemon call, reads the host's CPU count for a spec asking more than one
//! CPU (D18), and reclaims the name from a launch of it given up on
//! ([`given_up`](super::given_up)). The create is tried again, within the
//! deadline, while the daemon refuses the name but shows no holder of it,
//! or only one being removed (H12). A create that finds the image missing
//! pulls it when the provider pulls ([`PullPolicy::IfMissing`]), under the
//! pull's own bound, and the launch's deadline then runs anew. A launch that
//! fails after its create removes its container within what is left of the
//! deadline, but only one that never started: one whose start reached the
//! daemon has run its command (D11). What it cannot look at or undo now is
//! left to its [`LaunchGuard`], settled at the next look.

use std::collections::HashMap;
use std::time::Duration;

use billet_provider::{Error, Instance, Provider, Spec};
use bollard::Docker;
use bollard::models::{ContainerCreateBody, ContainerStateStatusEnum, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, CreateImageOptionsBuilder};
use futures::TryStreamExt;

use super::given_up::LaunchGuard;
use super::removal::Removal;
use super::state::never_started;
use super::{DockerProvider, PullPolicy};
use crate::daemon::{DaemonError, Deadline, Failure, bounded};
use crate::dialect;
use crate::naming::{
    LAUNCH_LABEL, NAME_LABEL, OWNER_LABEL, container_name, is_full_id, new_launch_mark,
};
use crate::runtime::{Listed, RuntimeError, applied};

/// What a failed `create container` means for `launch`.
enum CreateFailure {
    /// The daemon lacks the image (it answered so: nothing was created).
    MissingImage,
    /// The daemon answered a refusal: nothing was created.
    Refused(Error),
    /// No answer: the container may or may not exist.
    Lost(Error),
}

impl DockerProvider {
    pub(super) fn refuse(&self, name: &str, err: Error) -> Error {
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

    pub(super) fn check_spec(&self, spec: &Spec) -> Result<(), Error> {
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
        match spec.env.problem() {
            Some(problem) => Err(Error::invalid_spec(problem)),
            None => Ok(()),
        }
    }

    fn create_body(&self, spec: &Spec, mark: &str) -> ContainerCreateBody {
        let labels = HashMap::from([
            (OWNER_LABEL.to_owned(), String::from(&*self.owner)),
            (NAME_LABEL.to_owned(), spec.name.clone()),
            (LAUNCH_LABEL.to_owned(), mark.to_owned()),
        ]);
        ContainerCreateBody {
            image: Some(spec.image.clone()),
            entrypoint: Some(spec.command[..1].to_vec()),
            cmd: Some(spec.command[1..].to_vec()),
            // P2: the spec's environment, as docker's `NAME=value`; the body
            // is never logged (its values are secrets).
            env: (!spec.env.is_empty()).then(|| {
                spec.env
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect()
            }),
            labels: Some(labels),
            user: self.confinement.user.clone(),
            host_config: Some(HostConfig {
                runtime: self.runtime.clone(),
                ..self
                    .confinement
                    .host_config(&spec.resources, self.network.clone())
            }),
            ..ContainerCreateBody::default()
        }
    }

    async fn create(
        &self,
        client: &Docker,
        deadline: Deadline,
        spec: &Spec,
        mark: &str,
    ) -> Result<String, CreateFailure> {
        let derived = container_name(&self.owner, &spec.name);
        let created = loop {
            let options = CreateContainerOptionsBuilder::new().name(&derived).build();
            let created = self
                .call(
                    deadline,
                    "create container",
                    client.create_container(Some(options), self.create_body(spec, mark)),
                )
                .await;
            if !created.as_ref().err().is_some_and(dialect::name_in_use) {
                break created;
            }
            // H12: the daemon reserves a name when a create of it begins,
            // before the container can be seen, and keeps it while a removal
            // is under way, after `find` and `list` stopped showing the
            // container. A conflict is answered only once a holder they show
            // can be seen, so that no look finds the name free while a
            // launch of it is refused; while the holder is unseen or being
            // removed, this create is tried again, within the deadline.
            match self.inspect(client, deadline, &derived).await {
                Ok(Some(holder))
                    if holder.state.as_ref().and_then(|state| state.status)
                        != Some(ContainerStateStatusEnum::REMOVING) =>
                {
                    break created;
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(err) => break Err(err),
            }
        };
        match created {
            Ok(response) if is_full_id(&response.id) => Ok(response.id),
            Ok(response) => Err(CreateFailure::Lost(Error::unavailable(format!(
                "the docker daemon answered the create of {:?} with {:?}, which is not a full container id",
                spec.name, response.id
            )))),
            Err(err) if dialect::name_in_use(&err) => {
                Err(CreateFailure::Refused(Error::Conflict {
                    name: spec.name.clone(),
                }))
            }
            // D19: the daemon no longer lists the pool's runtime (its
            // configuration changed since the check): not the spec's fault,
            // and the next launch asks again.
            Err(err) if dialect::unknown_runtime(&err) => {
                *self.runtimes.lock() = None;
                Err(CreateFailure::Refused(Error::unavailable(err)))
            }
            Err(err) => Err(match err.status() {
                Some(404) => CreateFailure::MissingImage,
                Some(400) => CreateFailure::Refused(Error::invalid_spec(format!(
                    "the docker daemon refused the container for {:?}: {}",
                    spec.name,
                    daemon_message(&err)
                ))),
                Some(_) => CreateFailure::Refused(Error::unavailable(err)),
                // Never sent (the connection was refused): nothing created.
                None if err.surely_unsent() => CreateFailure::Refused(Error::unavailable(err)),
                None => CreateFailure::Lost(Error::unavailable(err)),
            }),
        }
    }

    async fn pull_image(&self, client: &Docker, image: &str) -> Result<(), Error> {
        let (from, tag) = pull_reference(image);
        let mut options = CreateImageOptionsBuilder::new().from_image(from);
        if let Some(tag) = tag {
            options = options.tag(tag);
        }
        let pulled = bounded(
            &self.endpoint_text,
            "pull image",
            Deadline::after(self.pull_timeout),
            client
                .create_image(Some(options.build()), None, None)
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

    pub(super) async fn launch_checked(&self, spec: &Spec) -> Result<Instance, Error> {
        let mut deadline = self.deadline();
        let client = self
            .client("create container")
            .map_err(Error::unavailable)?;
        // D19: no container starts under a runtime the daemon has not shown
        // it lists as the pool needs (asked once per provider).
        let listed = self
            .listed_runtimes(deadline)
            .await
            .map_err(Error::unavailable)?;
        if self
            .confinement
            .nano_cpus(&spec.resources)
            .is_some_and(|nano| nano > 1_000_000_000)
        {
            self.check_cpus(&client, deadline, spec).await?;
        }
        self.reclaim_name(&client, deadline, &spec.name).await?;
        let mut guard = LaunchGuard {
            provider: self,
            name: spec.name.clone(),
            mark: new_launch_mark(),
            armed: false,
        };
        let mut pulled = false;
        let id = loop {
            guard.armed = true;
            match self.create(&client, deadline, spec, &guard.mark).await {
                Ok(id) => break id,
                Err(CreateFailure::Lost(err)) => return Err(err),
                Err(CreateFailure::Refused(err)) => {
                    guard.armed = false;
                    return Err(err);
                }
                Err(CreateFailure::MissingImage)
                    if self.pull == PullPolicy::IfMissing && !pulled =>
                {
                    guard.armed = false;
                    self.pull_image(&client, &spec.image).await?;
                    pulled = true;
                    // The pull had its own bound; the launch's deadline runs anew.
                    deadline = self.deadline();
                }
                Err(CreateFailure::MissingImage) => {
                    guard.armed = false;
                    return Err(Error::invalid_spec(format!(
                        "image {:?} is not on the docker daemon at {} (this provider does not pull images)",
                        spec.image, self.endpoint_text
                    )));
                }
            }
        };
        let answer = match self.runtime_applied(&client, deadline, &id, listed).await {
            Ok(()) => self.start_and_read(&client, deadline, spec, &id).await,
            Err(err) => Err(err),
        };
        match answer {
            Ok(instance) => {
                guard.armed = false;
                Ok(instance)
            }
            Err(err) => {
                // Undo within what is left of the deadline, but only a
                // container that never started: one whose start reached the
                // daemon (its answer lost) has run its command, and removing
                // it would make a relaunch run it twice; it is reported from
                // the next look on (D11). What cannot be looked at or undone
                // now is settled at the next look (the guard). (Found by H12
                // with faults: a find saw the container running, then the
                // failing launch removed it.)
                match self.inspect(&client, deadline, &id).await {
                    Ok(None) => guard.armed = false,
                    Ok(Some(container)) if never_started(&container) => {
                        if matches!(
                            self.remove_exact(&client, deadline, &id).await,
                            Ok(Removal::Removed | Removal::Gone)
                        ) {
                            guard.armed = false;
                        }
                    }
                    Ok(Some(_)) | Err(_) => {}
                }
                Err(err)
            }
        }
    }

    /// D19: whether the container `id` a launch created (not yet started)
    /// runs under the pool's runtime, by what the engine reports on it and
    /// what it `listed`; `Ok` at once for a pool that names none. A
    /// container that would not is refused with [`RuntimeError::NotApplied`]
    /// (and the provider asks the daemon again at its next launch): the
    /// launch then removes it, never started.
    async fn runtime_applied(
        &self,
        client: &Docker,
        deadline: Deadline,
        id: &str,
        listed: Option<Listed>,
    ) -> Result<(), Error> {
        let (Some(runtime), Some(listed)) = (&self.runtime, listed) else {
            return Ok(());
        };
        let created = self
            .inspect(client, deadline, id)
            .await
            .map_err(Error::unavailable)?
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "the container {id} this launch created is gone from the docker daemon at {} before its start",
                    self.endpoint_text
                ))
            })?;
        let reported = created.host_config.and_then(|config| config.runtime);
        if applied(runtime, reported.as_deref(), &listed) {
            return Ok(());
        }
        *self.runtimes.lock() = None;
        Err(Error::unavailable(RuntimeError::NotApplied {
            runtime: runtime.clone(),
            endpoint: self.endpoint_text.clone(),
            reported: reported.unwrap_or_default(),
            default: listed.default,
        }))
    }

    /// Refuses a spec asking for more CPUs than the daemon's host has, as
    /// [`Error::InvalidSpec`]: docker refuses such a container itself, podman
    /// would take it as a cap no container can reach; either way no such
    /// container is given what it asks (D18). The host's count is read once,
    /// by the first launch asking for more than one CPU.
    async fn check_cpus(
        &self,
        client: &Docker,
        deadline: Deadline,
        spec: &Spec,
    ) -> Result<(), Error> {
        let known = *self.host_cpus.lock();
        let host = match known {
            Some(host) => host,
            None => {
                let info = self
                    .call(deadline, "read the daemon's system info", client.info())
                    .await
                    .map_err(Error::unavailable)?;
                let host = info
                    .ncpu
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        Error::unavailable(format!(
                            "the docker daemon at {} answered its system info without a CPU count",
                            self.endpoint_text
                        ))
                    })?;
                *self.host_cpus.lock() = Some(host);
                host
            }
        };
        let asked = self.confinement.nano_cpus(&spec.resources).unwrap_or(0);
        if asked > i64::from(host) * 1_000_000_000 {
            return Err(Error::invalid_spec(format!(
                "{:?} asks for {} CPUs; the host of the docker daemon at {} has {host}",
                spec.name,
                asked as f64 / 1e9,
                self.endpoint_text
            )));
        }
        Ok(())
    }

    /// Starts the container a launch created and reads what it is.
    async fn start_and_read(
        &self,
        client: &Docker,
        deadline: Deadline,
        spec: &Spec,
        id: &str,
    ) -> Result<Instance, Error> {
        if let Err(err) = self
            .call(
                deadline,
                "start container",
                client.start_container(id, None),
            )
            .await
        {
            return Err(match err {
                // The runtime could not run the spec's command (no such
                // program in the image, not executable).
                err if dialect::spec_cannot_start(&err) => Error::invalid_spec(format!(
                    "the docker daemon could not start {:?} from image {:?}: {}",
                    spec.name,
                    spec.image,
                    daemon_message(&err)
                )),
                // Anything else (a network that does not exist: 404) is
                // not the spec's fault.
                _ => Error::unavailable(err),
            });
        }
        let inspected = self
            .inspect(client, deadline, id)
            .await
            .map_err(Error::unavailable)?
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "container {id} vanished from the docker daemon as it started"
                ))
            })?;
        self.instance(&inspected)
            .map_err(Error::unavailable)?
            .ok_or_else(|| {
                Error::unavailable(format!(
                    "container {id} lost its billet marks as it started"
                ))
            })
    }
}

/// The daemon's own message in a failure, or the whole failure.
pub(super) fn daemon_message(err: &DaemonError) -> String {
    match &err.failure {
        Failure::Status { message, .. } => message.clone(),
        _ => err.to_string(),
    }
}

/// The image and tag a pull asks for: an image named without a tag or digest
/// is pulled as `latest` (the daemon would pull every tag of it).
fn pull_reference(image: &str) -> (&str, Option<&str>) {
    let last = image.rsplit('/').next().unwrap_or(image);
    if last.contains(':') || last.contains('@') {
        (image, None)
    } else {
        (image, Some("latest"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // D13: an untagged image is pulled as `latest` (the daemon would pull
    // every tag); a tag or digest is kept, and a registry's port is no tag.
    #[test]
    fn d13_untagged_pulls_mean_latest() {
        assert_eq!(pull_reference("busybox"), ("busybox", Some("latest")));
        assert_eq!(
            pull_reference("127.0.0.1:5000/team/app"),
            ("127.0.0.1:5000/team/app", Some("latest"))
        );
        assert_eq!(pull_reference("busybox:1.36"), ("busybox:1.36", None));
        assert_eq!(
            pull_reference("127.0.0.1:5000/app:2"),
            ("127.0.0.1:5000/app:2", None)
        );
        let digest = format!("app@sha256:{}", "0".repeat(64));
        assert_eq!(pull_reference(&digest), (digest.as_str(), None));
    }
}
