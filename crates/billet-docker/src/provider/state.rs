//! How an inspected container is read (D5, D13): its state, its start time,
//! whether it ever started, and the [`Instance`] it is when it is this
//! deployment's.
//!
//! What the daemon answers that billet cannot read (a stopped container
//! without an exit code, an exit code out of range, a start or creation time
//! it cannot parse, a running container without a start time, a state it
//! does not know) is an error, never taken as success or as 0. Which daemon
//! state is which [`State`] is on [`DockerProvider`].

use std::time::SystemTime;

use billet_provider::{Instance, InstanceId, ProviderKind, State};
use bollard::models::{ContainerInspectResponse, ContainerStateStatusEnum};

use super::DockerProvider;
use super::ownership::Claim;

impl DockerProvider {
    /// The instance an inspected container is, if it is this deployment's.
    pub(super) fn instance(
        &self,
        inspected: &ContainerInspectResponse,
    ) -> Result<Option<Instance>, String> {
        let Claim::Ours { name, .. } = self.claim_inspected(inspected) else {
            return Ok(None);
        };
        let id = inspected
            .id
            .clone()
            .ok_or("the daemon answered a container without an id")?;
        read_state(&id, inspected).map(|(state, started_at)| {
            Some(Instance {
                id: InstanceId::from(id),
                name: name.into(),
                owner: std::sync::Arc::clone(&self.owner),
                kind: ProviderKind::Docker,
                state,
                started_at,
            })
        })
    }
}

/// Whether an inspected container was never started: still `created`, and
/// with no start time.
pub(super) fn never_started(container: &ContainerInspectResponse) -> bool {
    let state = container.state.as_ref();
    state.and_then(|state| state.status) == Some(ContainerStateStatusEnum::CREATED)
        && state
            .and_then(|state| state.started_at.as_deref())
            .is_none_or(|at| matches!(parse_time(at), Ok(None)))
}

/// A daemon timestamp (RFC 3339, UTC, up to nanoseconds): `Ok(None)` for
/// docker's zero time (`0001-01-01T00:00:00Z`, "never"), an error for anything
/// unreadable.
pub(super) fn parse_time(text: &str) -> Result<Option<SystemTime>, String> {
    if text.starts_with("0001-01-01T00:00:00") {
        return Ok(None);
    }
    humantime::parse_rfc3339(text)
        .map(Some)
        .map_err(|err| format!("unreadable time {text:?}: {err}"))
}

/// The state and start time of an inspected container (D5, D13): anything
/// billet cannot read is an error, never a guess.
fn read_state(
    id: &str,
    inspected: &ContainerInspectResponse,
) -> Result<(State, SystemTime), String> {
    let state = inspected
        .state
        .as_ref()
        .ok_or_else(|| format!("the daemon answered container {id} without a state"))?;
    let exit_code = || -> Result<i32, String> {
        let code = state.exit_code.ok_or_else(|| {
            format!("the daemon answered stopped container {id} without an exit code")
        })?;
        i32::try_from(code).map_err(|_| {
            format!("the daemon answered container {id} with exit code {code}, out of range")
        })
    };
    let status = state
        .status
        .ok_or_else(|| format!("the daemon answered container {id} with no status"))?;
    let (instance_state, has_run) = match status {
        ContainerStateStatusEnum::CREATED => (State::Pending, false),
        ContainerStateStatusEnum::RUNNING
        | ContainerStateStatusEnum::PAUSED
        | ContainerStateStatusEnum::RESTARTING
        | ContainerStateStatusEnum::STOPPING => (State::Running, true),
        ContainerStateStatusEnum::EXITED | ContainerStateStatusEnum::DEAD => (
            State::Stopped {
                exit_code: exit_code()?,
            },
            false,
        ),
        ContainerStateStatusEnum::REMOVING => {
            if state.running == Some(true) {
                (State::Running, true)
            } else {
                (
                    State::Stopped {
                        exit_code: exit_code()?,
                    },
                    false,
                )
            }
        }
        ContainerStateStatusEnum::EMPTY => {
            return Err(format!("the daemon answered container {id} with no status"));
        }
    };
    let started = match state.started_at.as_deref() {
        Some(text) => parse_time(text)
            .map_err(|err| format!("the daemon answered container {id} with an {err}"))?,
        None => None,
    };
    let started = match started {
        Some(at) => at,
        None if has_run => {
            return Err(format!(
                "the daemon answered running container {id} without a start time"
            ));
        }
        // A container that never started has the zero time as its start; its
        // creation time stands in until it starts.
        None => inspected
            .created
            .as_deref()
            .map(parse_time)
            .transpose()
            .map_err(|err| format!("the daemon answered container {id} with an {err}"))?
            .flatten()
            .ok_or_else(|| {
                format!("the daemon answered container {id} without a start or creation time")
            })?,
    };
    Ok((instance_state, started))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerConfig, ContainerState};
    use std::collections::HashMap;

    use crate::naming::{LAUNCH_LABEL, NAME_LABEL, OWNER_LABEL, container_name};

    /// A container as the daemon would answer it for blue's launch of `job`,
    /// every mark present, in `state`.
    fn answered(state: ContainerState) -> ContainerInspectResponse {
        ContainerInspectResponse {
            id: Some("a".repeat(64)),
            name: Some(format!("/{}", container_name("blue", "job"))),
            created: Some("2026-01-02T03:04:05.123456789Z".to_owned()),
            config: Some(ContainerConfig {
                labels: Some(HashMap::from([
                    (OWNER_LABEL.to_owned(), "blue".to_owned()),
                    (NAME_LABEL.to_owned(), "job".to_owned()),
                    (
                        LAUNCH_LABEL.to_owned(),
                        "0123456789abcdef0123456789abcdef".to_owned(),
                    ),
                ])),
                ..ContainerConfig::default()
            }),
            state: Some(state),
            ..ContainerInspectResponse::default()
        }
    }

    fn exited(exit_code: Option<i64>, started_at: &str) -> ContainerState {
        ContainerState {
            status: Some(ContainerStateStatusEnum::EXITED),
            running: Some(false),
            exit_code,
            started_at: Some(started_at.to_owned()),
            ..ContainerState::default()
        }
    }

    // D13: what billet cannot read in the daemon's answer is an error, never
    // a guess: a stopped container without an exit code (not 0), an exit code
    // out of range, an unreadable start time, a running container with no
    // start time. What it can read is read exactly.
    #[test]
    fn d13_unreadable_answers_are_errors_never_guesses() {
        let blue = DockerProvider::new("blue").unwrap();
        let good = blue
            .instance(&answered(exited(Some(3), "2026-01-02T03:04:06Z")))
            .unwrap()
            .unwrap();
        assert_eq!(good.state, State::Stopped { exit_code: 3 });
        assert_eq!(
            good.started_at,
            humantime::parse_rfc3339("2026-01-02T03:04:06Z").unwrap()
        );

        let err = blue
            .instance(&answered(exited(None, "2026-01-02T03:04:06Z")))
            .unwrap_err();
        assert!(err.contains("without an exit code"), "{err}");
        let err = blue
            .instance(&answered(exited(Some(1 << 40), "2026-01-02T03:04:06Z")))
            .unwrap_err();
        assert!(err.contains("out of range"), "{err}");
        let err = blue
            .instance(&answered(exited(Some(0), "yesterday")))
            .unwrap_err();
        assert!(err.contains("yesterday"), "{err}");
        let running = ContainerState {
            status: Some(ContainerStateStatusEnum::RUNNING),
            running: Some(true),
            started_at: Some("0001-01-01T00:00:00Z".to_owned()),
            ..ContainerState::default()
        };
        let err = blue.instance(&answered(running)).unwrap_err();
        assert!(err.contains("without a start time"), "{err}");
        // Never started: its creation time stands in, exactly.
        let created = ContainerState {
            status: Some(ContainerStateStatusEnum::CREATED),
            started_at: Some("0001-01-01T00:00:00Z".to_owned()),
            ..ContainerState::default()
        };
        let pending = blue.instance(&answered(created)).unwrap().unwrap();
        assert_eq!(pending.state, State::Pending);
        assert_eq!(
            pending.started_at,
            humantime::parse_rfc3339("2026-01-02T03:04:05.123456789Z").unwrap()
        );
    }
}
