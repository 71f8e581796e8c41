//! What a webhook delivery holds (G2): `ping`, a `workflow_job` event, or an
//! event billet does not act on.
//!
//! The types read only the fields billet uses and ignore the rest, so a field
//! GitHub adds later changes nothing. Read a body with [`Delivery::parse`]
//! only once its signature is verified.

use serde::Deserialize;

/// One delivery, by its `X-GitHub-Event` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// `ping`: GitHub checking the webhook when it is made. Its body is not read.
    Ping,
    /// `workflow_job`: a job queued, waiting, taken by a runner or completed.
    WorkflowJob(Box<WorkflowJobEvent>),
    /// Any other event: counted, nothing else. Its body is not read.
    Other {
        /// The event's name, as the header gave it.
        event: String,
    },
}

/// Why a delivery could not be read. It answers `400` and records nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// A `workflow_job` body that is not the event GitHub documents: not
    /// JSON, or a field billet needs is missing or of the wrong type.
    #[error("the workflow_job delivery cannot be read: {reason}")]
    Malformed {
        /// What is wrong and where (serde_json's line and column).
        reason: String,
    },
}

impl Delivery {
    /// Reads a delivery whose `X-GitHub-Event` header is `event` and whose
    /// (verified) body is `body`. Only a `workflow_job` body is parsed; an
    /// event name is compared exactly, as GitHub sends it.
    pub fn parse(event: &str, body: &[u8]) -> Result<Delivery, DeliveryError> {
        match event {
            "ping" => Ok(Delivery::Ping),
            "workflow_job" => serde_json::from_slice(body)
                .map(|event| Delivery::WorkflowJob(Box::new(event)))
                .map_err(|error| DeliveryError::Malformed {
                    reason: error.to_string(),
                }),
            other => Ok(Delivery::Other {
                event: other.to_owned(),
            }),
        }
    }
}

/// A `workflow_job` event: what happened to which job, in which repository.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WorkflowJobEvent {
    /// What happened.
    pub action: Action,
    /// The job, as of this event.
    pub workflow_job: WorkflowJob,
    /// The repository whose workflow the job belongs to.
    pub repository: Repository,
    /// The organization that owns the repository, when one does.
    #[serde(default)]
    pub organization: Option<Organization>,
}

/// A `workflow_job` event's `action`, ordered as a job's life is: `Waiting`
/// and `Queued` before `InProgress` before `Completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Held by an environment's protection rule; no runner may take it yet.
    Waiting,
    /// Waiting for a runner.
    Queued,
    /// A runner took it (`runner_name` says which).
    InProgress,
    /// It ended (`conclusion` says how).
    Completed,
    /// An action GitHub added after this crate was written: counted, not acted on.
    #[serde(other)]
    Unknown,
}

impl Action {
    /// The name GitHub gives it (`unknown` for [`Action::Unknown`]).
    pub const fn as_str(self) -> &'static str {
        match self {
            Action::Waiting => "waiting",
            Action::Queued => "queued",
            Action::InProgress => "in_progress",
            Action::Completed => "completed",
            Action::Unknown => "unknown",
        }
    }
}

/// The job a `workflow_job` event is about.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WorkflowJob {
    /// GitHub's id of the job: the same in every event about it.
    pub id: u64,
    /// The workflow run it belongs to.
    pub run_id: u64,
    /// The job's name in its workflow.
    #[serde(default)]
    pub name: Option<String>,
    /// Its `runs-on` labels.
    pub labels: Vec<String>,
    /// `completed` only: `success`, `failure`, `cancelled`, `skipped` ...
    #[serde(default)]
    pub conclusion: Option<String>,
    /// The runner that took it, once one did (GitHub's own examples fill it
    /// in `queued` events too: read it only from `in_progress` on).
    #[serde(default)]
    pub runner_name: Option<String>,
    /// That runner's id.
    #[serde(default)]
    pub runner_id: Option<u64>,
}

/// The repository a job's workflow belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Repository {
    /// GitHub's id of the repository.
    pub id: u64,
    /// `OWNER/NAME`.
    pub full_name: String,
    /// Whether only people given access can see it (`false`: public).
    pub private: bool,
}

/// The organization that owns a repository.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Organization {
    /// Its login, as `scopes[].org` names it.
    pub login: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    // G2: only workflow_job bodies are read; other events are named, ping is ping.
    #[test]
    fn g2_events_are_told_apart_by_their_header() {
        assert_eq!(Delivery::parse("ping", b"not json"), Ok(Delivery::Ping));
        assert_eq!(
            Delivery::parse("push", b"not json"),
            Ok(Delivery::Other {
                event: "push".to_owned()
            })
        );
        assert_eq!(
            Delivery::parse("Workflow_Job", b"{}"),
            Ok(Delivery::Other {
                event: "Workflow_Job".to_owned()
            })
        );
        let err = Delivery::parse("workflow_job", b"{\"action\": \"queued\"}").unwrap_err();
        assert!(err.to_string().contains("workflow_job"), "{err}");
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    // Actions are ordered as a job's life is, whatever order they arrive in.
    #[test]
    fn actions_are_ordered_as_a_jobs_life_is() {
        let mut actions = [
            Action::Completed,
            Action::Queued,
            Action::InProgress,
            Action::Waiting,
        ];
        actions.sort();
        let names: Vec<_> = actions.iter().map(|a| a.as_str()).collect();
        assert_eq!(names, ["waiting", "queued", "in_progress", "completed"]);
        assert_eq!(Action::Unknown.as_str(), "unknown");
    }
}
