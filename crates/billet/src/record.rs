//! A job's record and its life: what was asked ([`NewJob`]), where the job
//! is ([`JobState`]), how it ended ([`Verdict`]), the record the store and
//! every answer read ([`JobRecord`]), and the [`Change`]s that move it along.
//!
//! The leaf of the service's modules: it takes nothing from the others, so
//! the API, the table, the store and the engine all build on it.

use std::fmt;
use std::time::{Duration, SystemTime};

use billet_provider::TrustClass;
use billet_scheduler::{FailReason, Outcome};
use serde::{Deserialize, Serialize};

/// What a job asks for: a request that passed every check of
/// [`parse_job`](crate::api::parse_job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// The argv to run: at least one argument.
    pub command: Vec<String>,
    /// Labels, for routing (may be empty).
    pub labels: Vec<String>,
    /// The trust class; [`TrustClass::Unknown`] when not given.
    pub trust: TrustClass,
    /// How long it may run once started, if bounded.
    pub timeout: Option<Duration>,
    /// The idempotency key: a second request with it answers the first job.
    pub key: Option<String>,
    /// The pool it must run in, and no other (a GitHub runner, B3); `None`
    /// for every job submitted over HTTP, which routing places.
    pub pinned: Option<String>,
}

/// Where a job is (L4). `running` means it holds a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Accepted, waiting for a lease.
    Queued,
    /// Holding a lease: its instance is being launched, runs, or is being
    /// destroyed.
    Running,
    /// Its command ran and exited (`exit_code`).
    Finished,
    /// It could not run to the end (`reason`).
    Failed,
    /// It was cancelled.
    Cancelled,
}

impl JobState {
    /// Every state, in the order a job can pass through them.
    pub const ALL: [JobState; 5] = [
        JobState::Queued,
        JobState::Running,
        JobState::Finished,
        JobState::Failed,
        JobState::Cancelled,
    ];

    /// The API's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Finished => "finished",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether a job in this state has ended for good.
    pub fn has_ended(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Cancelled
        )
    }

    /// The state named `name` (as [`as_str`](Self::as_str) spells it), if any.
    pub fn from_name(name: &str) -> Option<JobState> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == name)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The API's name of a trust class.
pub fn trust_name(trust: TrustClass) -> &'static str {
    match trust {
        TrustClass::Trusted => "trusted",
        TrustClass::Untrusted => "untrusted",
        _ => "unknown",
    }
}

/// The trust class the API names `name`, if any.
pub fn trust_from_name(name: &str) -> Option<TrustClass> {
    match name {
        "trusted" => Some(TrustClass::Trusted),
        "untrusted" => Some(TrustClass::Untrusted),
        "unknown" => Some(TrustClass::Unknown),
        _ => None,
    }
}

/// How a job ended, as it is stored and shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `finished`, `failed` or `cancelled`.
    pub state: JobState,
    /// The exit code of a finished job.
    pub exit_code: Option<i32>,
    /// Why a failed job failed.
    pub reason: Option<String>,
}

impl From<&Outcome> for Verdict {
    fn from(outcome: &Outcome) -> Verdict {
        match outcome {
            Outcome::Finished { exit_code } => Verdict {
                state: JobState::Finished,
                exit_code: Some(*exit_code),
                reason: None,
            },
            Outcome::Failed { reason } => Verdict {
                state: JobState::Failed,
                exit_code: None,
                reason: Some(reason_text(reason)),
            },
            Outcome::Cancelled => Verdict {
                state: JobState::Cancelled,
                exit_code: None,
                reason: None,
            },
        }
    }
}

fn reason_text(reason: &FailReason) -> String {
    reason.to_string()
}

/// One accepted job: what was asked, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// Its id.
    pub id: u64,
    /// Its idempotency key, if it was given one.
    pub key: Option<String>,
    /// Its command.
    pub command: Vec<String>,
    /// Its labels.
    pub labels: Vec<String>,
    /// Its trust class.
    pub trust: TrustClass,
    /// Its timeout, if bounded.
    pub timeout: Option<Duration>,
    /// The pool it must run in, if pinned to one (B3).
    pub pinned: Option<String>,
    /// Where it is.
    pub state: JobState,
    /// The pool holding (or that held) its lease.
    pub pool: Option<String>,
    /// Its instance's id.
    pub instance: Option<String>,
    /// When it was accepted.
    pub submitted_at: SystemTime,
    /// When it first took a lease: its timeout runs from here, across
    /// restarts (L14).
    pub started_at: Option<SystemTime>,
    /// When it ended.
    pub ended_at: Option<SystemTime>,
    /// A cancel was asked for and answered: it survives a restart.
    pub cancel_requested: bool,
    /// Its outcome: decided and committed before the instance that shows it
    /// is destroyed (L6), and kept once the job ends. While the job still
    /// runs it is not shown ([`outcome`](JobRecord::outcome) is `None`).
    pub verdict: Option<Verdict>,
}

impl JobRecord {
    /// A job just accepted: queued, nothing known yet.
    pub fn accepted(id: u64, job: NewJob, at: SystemTime) -> JobRecord {
        JobRecord {
            id,
            key: job.key,
            command: job.command,
            labels: job.labels,
            trust: job.trust,
            timeout: job.timeout,
            pinned: job.pinned,
            state: JobState::Queued,
            pool: None,
            instance: None,
            submitted_at: at,
            started_at: None,
            ended_at: None,
            cancel_requested: false,
            verdict: None,
        }
    }

    /// Whether `job` asks for what this job was accepted for: the same
    /// command, labels, trust, timeout and pool (its key aside). A key repeated
    /// with another request is refused (L18).
    pub fn asked_as(&self, job: &NewJob) -> bool {
        self.command == job.command
            && self.labels == job.labels
            && self.trust == job.trust
            && self.timeout == job.timeout
            && self.pinned == job.pinned
    }

    /// How it ended, once it has: its exit code or the reason it failed.
    /// `None` while it has not ended, even when its outcome is decided (L6).
    pub fn outcome(&self) -> Option<&Verdict> {
        self.verdict.as_ref().filter(|_| self.state.has_ended())
    }

    /// Its outcome, decided but not yet shown: the job has not ended.
    pub fn decided(&self) -> Option<&Verdict> {
        self.verdict.as_ref().filter(|_| !self.state.has_ended())
    }

    /// Applies `change`, which concerns this job.
    pub(crate) fn apply(&mut self, change: &Change) {
        match change {
            Change::Accepted(_) => {}
            Change::Requeued { .. } => self.state = JobState::Queued,
            Change::Placed { pool, at, .. } => {
                self.state = JobState::Running;
                self.pool = Some(pool.clone());
                self.instance = None;
                self.started_at.get_or_insert(*at);
            }
            Change::Backed {
                pool, instance, at, ..
            } => {
                self.state = JobState::Running;
                self.pool = Some(pool.clone());
                self.instance = Some(instance.clone());
                self.started_at.get_or_insert(*at);
            }
            Change::CancelRequested { .. } => self.cancel_requested = true,
            Change::Decided { verdict, .. } => self.verdict = Some(verdict.clone()),
            Change::Ended { verdict, at, .. } => {
                self.state = verdict.state;
                self.ended_at = Some(*at);
                self.verdict = Some(verdict.clone());
            }
        }
    }
}

/// One step of a job's life, as committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A job was accepted.
    Accepted(Box<JobRecord>),
    /// At a restart, an unfinished job waits again: it holds no lease until
    /// the scheduler adopts its instance or places it. Its pool and instance
    /// stay, as the ones it held: a later restart still knows where to look.
    Requeued {
        /// The job.
        id: u64,
    },
    /// The job took a lease on `pool`; its launch follows the commit.
    Placed {
        /// The job.
        id: u64,
        /// The pool.
        pool: String,
        /// When.
        at: SystemTime,
    },
    /// An instance backs the job's lease (launched or adopted).
    Backed {
        /// The job.
        id: u64,
        /// The pool.
        pool: String,
        /// The instance's id.
        instance: String,
        /// When.
        at: SystemTime,
    },
    /// A cancel was asked for.
    CancelRequested {
        /// The job.
        id: u64,
    },
    /// The job's outcome is decided; its instance is destroyed after this
    /// commit.
    Decided {
        /// The job.
        id: u64,
        /// The outcome.
        verdict: Verdict,
    },
    /// The job ended.
    Ended {
        /// The job.
        id: u64,
        /// The outcome.
        verdict: Verdict,
        /// When.
        at: SystemTime,
    },
}

impl Change {
    /// The job the change concerns.
    pub fn job(&self) -> u64 {
        match self {
            Change::Accepted(record) => record.id,
            Change::Requeued { id }
            | Change::Placed { id, .. }
            | Change::Backed { id, .. }
            | Change::CancelRequested { id }
            | Change::Decided { id, .. }
            | Change::Ended { id, .. } => *id,
        }
    }

    /// Whether the change's commit may wait for a later batch's (see
    /// [`LAZY_COMMIT`](crate::engine::LAZY_COMMIT)): nothing waits on it (no
    /// answer, no call), and a crash that loses it loses nothing a restart
    /// does not learn again. An instance backing a job is found again by the
    /// first inventory, which names it after its job, and adopted (B8); an
    /// end after its instance was destroyed follows again from the outcome
    /// committed before the destroy (L6). Every other change is waited on.
    pub fn can_wait(&self) -> bool {
        matches!(self, Change::Backed { .. } | Change::Ended { .. })
    }
}
