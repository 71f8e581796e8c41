//! What crosses the core's edge: the provider calls it asks for
//! ([`Action`], [`Call`]), their answers ([`Answer`]), and the decisions it
//! reports ([`Decision`]).

use std::time::SystemTime;

use billet_provider::{Error, Instance, InstanceId, Spec, Teardown};

use crate::job::{JobId, Outcome};
use crate::routing::PoolId;

/// A call's identity, minted by the core, never reused; answers carry it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

/// A provider call the core asks its driver to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `launch(spec)`.
    Launch(Spec),
    /// `find(name)`.
    Find(String),
    /// `list()`.
    List,
    /// `destroy(id)`.
    Destroy(InstanceId),
}

/// One call to make: on which pool, what, and by when its answer counts.
///
/// The driver makes the call on the pool's provider and hands the answer back
/// with [`Core::handle_answer`](crate::Core::handle_answer) under the same
/// [`CallId`]. An answer that arrives after `deadline` is ignored: the core
/// has already treated the call as lost (a launch or destroy retried, a list
/// freeing nothing) and lets the next inventory settle what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// The call's identity.
    pub id: CallId,
    /// The pool whose provider takes the call.
    pub pool: PoolId,
    /// What to call.
    pub call: Call,
    /// When the core stops waiting for the answer.
    pub deadline: SystemTime,
}

/// The answer to a [`Call`], as the provider gave it.
#[derive(Debug, Clone)]
pub enum Answer {
    /// What `launch` answered.
    Launched(Result<Instance, Error>),
    /// What `find` answered.
    Found(Result<Option<Instance>, Error>),
    /// What `list` answered.
    Listed(Result<Vec<Instance>, Error>),
    /// What `destroy` answered.
    Destroyed(Result<Teardown, Error>),
}

/// What became of an orphan: an instance in a pool's inventory that no lease
/// of this scheduler holds (B7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrphanFate {
    /// First seen; destroyed if still there once the grace period is over.
    Seen,
    /// Destroyed after its grace period.
    Collected,
}

/// A decision the core made, reported in the order made. Each also goes out
/// as a `tracing` event (target `billet_scheduler`) naming the job and pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The job took a lease on the pool and its launch was asked for.
    Placed {
        /// The job.
        job: JobId,
        /// The pool.
        pool: PoolId,
    },
    /// The job's instance was launched: the lease is backed by it.
    Launched {
        /// The job.
        job: JobId,
        /// The pool.
        pool: PoolId,
        /// The instance's id.
        instance: InstanceId,
    },
    /// An existing instance now backs the job's lease: found after a launch
    /// answered `Conflict`, seen in an inventory while a retry waited, an
    /// orphan named after a job still queued (B7), or an instance held at
    /// start (B8).
    Adopted {
        /// The job.
        job: JobId,
        /// The pool.
        pool: PoolId,
        /// The instance's id.
        instance: InstanceId,
    },
    /// A call whose effect is unknown (an error, a lost answer) is tried
    /// again at `at`; the job keeps its place and its lease.
    Retrying {
        /// The job.
        job: JobId,
        /// The pool.
        pool: PoolId,
        /// How many attempts have failed so far.
        attempt: u32,
        /// When the next attempt is made.
        at: SystemTime,
    },
    /// The job's outcome is decided and its instance is about to be
    /// destroyed: emitted before the destroy is asked for, so that whoever
    /// keeps outcomes durably can commit this one before the instance that
    /// shows it is gone. [`Ended`](Decision::Ended) follows, with the same
    /// outcome, once the destroy is confirmed; the job holds its lease until
    /// then.
    OutcomeDecided {
        /// The job.
        job: JobId,
        /// The pool holding its lease.
        pool: PoolId,
        /// The instance about to be destroyed.
        instance: InstanceId,
        /// How the job ends.
        outcome: Outcome,
    },
    /// The job ended; its lease on `pool`, if it held one, is free.
    Ended {
        /// The job.
        job: JobId,
        /// The pool whose lease it gave up; `None` when it never held one.
        pool: Option<PoolId>,
        /// How it ended.
        outcome: Outcome,
    },
    /// An orphan was seen or collected.
    Orphan {
        /// The pool whose inventory holds it.
        pool: PoolId,
        /// The instance's id.
        instance: InstanceId,
        /// The instance's name.
        name: String,
        /// What became of it.
        fate: OrphanFate,
    },
    /// An instance named after a job of another store (another identity, or
    /// none) was first seen (L10). Never adopted. A `live` one started since
    /// this core was made: a second store is launching into this deployment,
    /// and it is never destroyed; otherwise it is a leftover, collected as an
    /// orphan.
    Foreign {
        /// The pool whose inventory holds it.
        pool: PoolId,
        /// The instance's id.
        instance: InstanceId,
        /// The instance's name.
        name: String,
        /// Whether it started after this core was made.
        live: bool,
    },
    /// A pool's inventory could not be read; nothing was freed there (B6).
    InventoryError {
        /// The pool.
        pool: PoolId,
        /// The error, as text.
        error: String,
    },
}
