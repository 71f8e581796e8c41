//! What a run answers when it breaks an invariant: the [`Violation`], the
//! [`RunFailure`] around it (when, at which step, how to replay it), and the
//! [`Outlived`] orphan a violation names.

use std::fmt;
use std::time::Duration;

use crate::report::Human;
use crate::trace::TraceError;
use crate::workload::JobId;

/// An invariant the run broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A deployment held more leases (or more instances) than its capacity.
    CapacityExceeded {
        /// The deployment's name.
        deployment: String,
        /// How many it held.
        held: usize,
        /// Its capacity.
        capacity: usize,
    },
    /// A lease was freed while its job's instance was still running: the
    /// capacity it frees is still in use.
    FreedWhileRunning {
        /// The job.
        job: JobId,
        /// The deployment's name.
        deployment: String,
        /// The instance's name.
        instance: String,
    },
    /// The scheduler reported something that contradicts what it reported
    /// before (a launch of a job it never got, a free of a lease it never held).
    Inconsistent {
        /// What was contradictory.
        what: String,
    },
    /// The run ended (or hit its drain limit) with jobs unfinished.
    Unfinished {
        /// Jobs neither finished nor refused.
        jobs: u64,
        /// Why the run stopped.
        why: String,
    },
    /// Instances were left on the host after every job was done.
    Leaked {
        /// How many.
        instances: usize,
    },
    /// A pool held more leases than its capacity (H10).
    PoolOverCapacity {
        /// The deployment's name.
        deployment: String,
        /// The pool's configured name.
        pool: String,
        /// How many leases it held.
        held: u32,
        /// Its capacity.
        capacity: u32,
    },
    /// An orphan was still on the host past its grace period and one
    /// reconcile interval after it was first seen (the time its deployment's
    /// inventory could not be read added) (H10, B7).
    OrphanOutlived(Box<Outlived>),
    /// A job ended, or was said to, when it was not in flight: it had ended
    /// already (a second outcome) or was never accepted (H10, B9).
    NotInFlight {
        /// The job.
        job: JobId,
        /// What the scheduler reported of it.
        what: String,
    },
    /// A job accepted by a deployment was lost across a restart: the new
    /// scheduler refused it when the durable store handed it over (H10, B8).
    LostAtRestart {
        /// The job.
        job: JobId,
        /// The deployment's name.
        deployment: String,
        /// Why the new scheduler refused it.
        why: String,
    },
    /// The scenario itself cannot run.
    InvalidScenario {
        /// Why.
        reason: String,
    },
    /// The scenario's trace could not be read (T1): the error names the file
    /// and the line.
    Trace {
        /// What was wrong, and where.
        error: TraceError,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::CapacityExceeded {
                deployment,
                held,
                capacity,
            } => write!(
                f,
                "capacity exceeded: deployment {deployment} held {held} leases or instances, capacity {capacity}"
            ),
            Violation::FreedWhileRunning {
                job,
                deployment,
                instance,
            } => write!(
                f,
                "lease of job {job} on deployment {deployment} was freed while its instance {instance} was still running"
            ),
            Violation::Inconsistent { what } => write!(f, "scheduler report inconsistent: {what}"),
            Violation::Unfinished { jobs, why } => write!(f, "{jobs} jobs never finished: {why}"),
            Violation::Leaked { instances } => {
                write!(
                    f,
                    "{instances} instances were left on the host after every job was done"
                )
            }
            Violation::PoolOverCapacity {
                deployment,
                pool,
                held,
                capacity,
            } => write!(
                f,
                "pool over capacity: pool {pool} of deployment {deployment} held {held} leases, capacity {capacity}"
            ),
            Violation::OrphanOutlived(o) => write!(
                f,
                "orphan {} of deployment {}, first seen at +{}, was still on the host after +{}",
                o.instance,
                o.deployment,
                Human(o.seen),
                Human(o.deadline)
            ),
            Violation::NotInFlight { job, what } => {
                write!(
                    f,
                    "job {job} is not in flight (it ended already, or was never accepted), but {what}"
                )
            }
            Violation::LostAtRestart {
                job,
                deployment,
                why,
            } => write!(
                f,
                "job {job}, accepted by deployment {deployment}, was lost at its restart: {why}"
            ),
            Violation::InvalidScenario { reason } => write!(f, "invalid scenario: {reason}"),
            Violation::Trace { error } => write!(f, "the trace cannot be replayed: {error}"),
        }
    }
}

/// An orphan that outlived its grace period: [`Violation::OrphanOutlived`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outlived {
    /// The deployment's name.
    pub deployment: String,
    /// The instance's name.
    pub instance: String,
    /// When it was first seen, as modelled time since the start.
    pub seen: Duration,
    /// When it should have been gone by, as modelled time since the start.
    pub deadline: Duration,
}

/// A run that broke an invariant: what, when, and how to replay it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invariant violated at modelled +{} (step {step}): {violation}\nseed: {seed}\nreplay: {replay}",
    Human(*.at)
)]
pub struct RunFailure {
    /// The scenario's seed.
    pub seed: u64,
    /// What broke.
    pub violation: Violation,
    /// When, as modelled time since the start.
    pub at: Duration,
    /// At which step.
    pub step: u64,
    /// The command that replays the run.
    pub replay: String,
}
