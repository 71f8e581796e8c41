//! The [`Scheduler`] trait: how a scheduler under test plugs into a scenario.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use billet_clock::Clock;
use billet_provider::{InstanceId, Provider, ProviderKind};

use crate::workload::{Job, JobId};

/// One pool of a deployment: a configured provider with its capacity. In a
/// scenario every pool of a deployment is a simulated provider built for the
/// deployment's owner over the one shared host, so the pools of one
/// deployment see each other's instances in their inventories.
#[derive(Debug, Clone)]
pub struct PoolHandle {
    /// The configured name (`providers[].name`).
    pub name: String,
    /// The configured kind, which routing matches against (the provider
    /// itself is simulated whatever this says).
    pub kind: ProviderKind,
    /// The most leases the pool may hold at once.
    pub capacity: usize,
    /// Its backend: a simulated provider over the shared host, possibly wrapped.
    pub provider: Arc<dyn Provider>,
}

/// One deployment as a scheduler sees it: its name (the owner identity), its
/// pools, its configuration, and how many leases it may hold at once.
#[derive(Debug, Clone)]
pub struct DeploymentHandle {
    /// The deployment identity, as written on its instances.
    pub name: String,
    /// The provider of its first pool. Every pool of a deployment is built for
    /// the same owner over the same host, so this one provider sees (and can
    /// destroy) all of the deployment's instances: a scheduler that knows no
    /// pools (the reference) runs the deployment as one pool through it.
    pub provider: Arc<dyn Provider>,
    /// The most leases it may hold at once: the sum of its pools' capacities.
    pub capacity: usize,
    /// Its pools, in configuration order (at least one when `capacity > 0`).
    pub pools: Vec<PoolHandle>,
    /// Its `billet.yaml`, made in code from the scenario's layout; `None`
    /// when the deployment has no lease at all (no valid configuration has a
    /// pool of capacity zero).
    pub config: Option<billet_config::Config>,
    /// The text `config` was read from (a driver that adds a section, the
    /// service's `github:`, reads it again with that section).
    pub yaml: Option<String>,
}

/// What the harness gives a scheduler when it builds one.
#[derive(Debug, Clone)]
pub struct SchedulerContext {
    /// Every deployment, in a fixed order; [`Step`] refers to them by index.
    pub deployments: Vec<DeploymentHandle>,
    /// The scenario's clock. The harness moves it; the scheduler only reads it
    /// (or sleeps on it).
    pub clock: Arc<dyn Clock>,
    /// The scenario's scheduler settings (its reconcile interval and orphan
    /// grace period), for schedulers that take them.
    pub settings: billet_scheduler::Settings,
    /// Whether the scenario asks for hints (P9, B12): a scheduler that can
    /// read its providers' hints does; one that cannot says so in its
    /// report's `hints` line.
    pub hints: bool,
    /// The simulated host every provider of the run is over: where a
    /// scheduler playing the other side of a job (the simulated GitHub's
    /// runners, H14) sees instances start and makes them stop.
    pub host: billet_simulated::Host,
}

/// A restart the scheduler under test cannot do: the run records it and goes
/// on with the scheduler it has (never silently).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartUnsupported;

impl fmt::Display for RestartUnsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("this scheduler cannot be restarted")
    }
}

impl std::error::Error for RestartUnsupported {}

/// A scheduler under test.
///
/// The harness drives it from one task: it submits each job when it arrives,
/// then calls [`tick`](Scheduler::tick); it also ticks at every other event
/// (a wake-up the scheduler asked for, an outage starting or ending, a sleeper
/// on the clock reaching its deadline). The scheduler tells the harness what
/// it did, in the order it did it, in the [`Step`] each tick answers (what it
/// did inside [`submit`](Scheduler::submit) or
/// [`restart`](Scheduler::restart) is reported by the next tick), and the
/// harness checks that against the host.
#[async_trait]
pub trait Scheduler: Send {
    /// Called once, at the run's start time, before anything is submitted:
    /// a scheduler with work to do before it takes jobs (starting a
    /// service) does it here. The default: nothing.
    async fn start(&mut self) {}

    /// Accepts a job that has just arrived. Answers `false` when it refuses
    /// the job outright (no deployment accepts its trust class, no route
    /// takes its labels): a refused job is done and never placed.
    async fn submit(&mut self, job: Job) -> bool;

    /// Accepts the jobs that arrived at one instant, in arrival order, and
    /// answers for each whether it was accepted ([`submit`](Scheduler::submit)'s
    /// answer), in the same order. The default submits them one by one; a
    /// scheduler behind a network service sends them at once.
    async fn submit_all(&mut self, jobs: Vec<Job>) -> Vec<bool> {
        let mut accepted = Vec::with_capacity(jobs.len());
        for job in jobs {
            accepted.push(self.submit(job).await);
        }
        accepted
    }

    /// Does whatever work is due at the clock's current time (placing queued
    /// jobs, reconciling inventories) and reports it, with whatever was done
    /// since the last tick.
    async fn tick(&mut self) -> Step;

    /// When the scheduler next needs a tick even if nothing arrives: its next
    /// reconciliation, say. `None` when it has nothing to wait for.
    fn next_wakeup(&mut self) -> Option<SystemTime>;

    /// How many jobs wait for placement.
    fn queued(&self) -> usize;

    /// How many leases each deployment holds, by deployment index.
    fn leases(&self) -> Vec<usize>;

    /// How many leases each pool holds, by deployment index and then pool
    /// index. A scheduler that knows no pools holds each deployment's leases
    /// in its first pool (the default).
    fn pool_leases(&self) -> Vec<Vec<usize>> {
        self.leases().into_iter().map(|held| vec![held]).collect()
    }

    /// Whether [`leases`](Scheduler::leases) equals `held`: what the checks
    /// ask after every step. A scheduler may answer without building the
    /// vector; the answer must be the comparison's.
    fn leases_are(&self, held: &[usize]) -> bool {
        self.leases() == held
    }

    /// Whether [`pool_leases`](Scheduler::pool_leases) equals `held`, as
    /// [`leases_are`](Scheduler::leases_are) is for the deployments.
    fn pool_leases_are(&self, held: &[Vec<usize>]) -> bool {
        self.pool_leases() == held
    }

    /// Drops deployment `deployment`'s scheduler and builds a new one over
    /// the same providers, as a process restart would: what the old one held
    /// is the new one's to find in the inventories (B8), and the jobs it had
    /// accepted and not placed are handed to the new one again (the harness
    /// plays the durable store). Reported by the next tick, which starts with
    /// [`FleetChange::Restarted`]. The default: unsupported.
    async fn restart(&mut self, deployment: usize) -> Result<(), RestartUnsupported> {
        let _ = deployment;
        Err(RestartUnsupported)
    }

    /// The scheduler's name as the fleet example's `--scheduler` flag takes
    /// it (`production`, `reference`), printed in the report; `None` for
    /// other schedulers (the default), reported as `custom`.
    fn name(&self) -> Option<&'static str> {
        None
    }

    /// Whether the scheduler reads its providers' hints (P9, B12), as the
    /// report's `hints` line says. The default: it does not.
    fn reads_hints(&self) -> bool {
        false
    }

    /// Whether the scheduler's own tasks sleep on the clock (a service's
    /// engine waits on it for its timers). The driver then moves the clock
    /// to [`next_wakeup`](Scheduler::next_wakeup) and the run's events only,
    /// never to a sleeper's deadline: those are the scheduler's, and
    /// `next_wakeup` says which of them it needs. The default: it does not.
    fn sleeps_on_clock(&self) -> bool {
        false
    }

    /// What has gone wrong inside the scheduler that no [`Step`] can say
    /// (a service that stopped answering, say), checked after every tick:
    /// the run fails with it. The default: nothing.
    fn broken(&mut self) -> Option<String> {
        None
    }

    /// Called once the run's last job is done, before the report is made:
    /// the lines the scheduler adds to the report (the service's own, H13),
    /// or what it found wrong at the end, which fails the run. The default:
    /// no lines.
    async fn finish(&mut self) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }

    /// Whether the scheduler destroys orphans (instances of its deployment
    /// that no lease holds) once their grace period is over (B7). A scenario
    /// that leaves strays on the host runs only with one that does. The
    /// default: it does not.
    fn collects_orphans(&self) -> bool {
        false
    }
}

/// An observer of a run ([`Scenario::run_tapped`](crate::scenario::Scenario::run_tapped)):
/// told of every job as it is submitted and of every step's changes, in
/// the order the run sees them, so that a test or a bench records what a
/// scheduler did without wrapping it. Both methods do nothing by default.
pub trait Tap {
    /// `job` is about to be submitted (also when the scheduler then refuses
    /// it).
    fn submitted(&mut self, _job: &Job) {}

    /// The scheduler reported `step` at the modelled time `now`.
    fn stepped(&mut self, _step: &Step, _now: SystemTime) {}
}

/// Taps nothing.
impl Tap for () {}

/// A [`Tap`] that writes down what a run placed, in the order placed: each
/// placement as (job, deployment, modelled time since `start`), and each
/// job's queue wait. What two runs placed compares job for job (the
/// differential tests). It holds the arrival of every job not yet placed.
#[derive(Debug, Clone, Default)]
pub struct Placements {
    start: Option<SystemTime>,
    arrived: rustc_hash::FxHashMap<JobId, SystemTime>,
    /// (job, deployment, modelled time since the start), in order.
    pub placed: Vec<(JobId, usize, std::time::Duration)>,
    /// (job, its queue wait), in the order placed.
    pub waits: Vec<(JobId, std::time::Duration)>,
}

impl Placements {
    /// An empty log for a run that starts at `start`.
    pub fn new(start: SystemTime) -> Placements {
        Placements {
            start: Some(start),
            ..Placements::default()
        }
    }
}

impl Tap for Placements {
    fn submitted(&mut self, job: &Job) {
        self.arrived.insert(job.id, job.submitted_at);
    }

    fn stepped(&mut self, step: &Step, now: SystemTime) {
        let since = |t: SystemTime| now.duration_since(t).unwrap_or_default();
        for placed in step.placed() {
            let at = self.start.map(since).unwrap_or_default();
            self.placed.push((placed.job, placed.deployment, at));
            let arrived = self.arrived.remove(&placed.job).unwrap_or(now);
            self.waits.push((placed.job, since(arrived)));
        }
    }
}

/// What a scheduler did in one tick, in the order it did it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Every change, in order.
    pub changes: Vec<FleetChange>,
}

impl Step {
    /// Jobs placed: each now holds a lease.
    pub fn placed(&self) -> impl Iterator<Item = &Placed> {
        self.changes.iter().filter_map(|c| match c {
            FleetChange::Placed(p) => Some(p),
            _ => None,
        })
    }

    /// Leases given up.
    pub fn freed(&self) -> impl Iterator<Item = &Freed> {
        self.changes.iter().filter_map(|c| match c {
            FleetChange::Freed(f) => Some(f),
            _ => None,
        })
    }

    /// Whether nothing happened.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// One thing a scheduler did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FleetChange {
    /// A job took a lease on a pool (its launch asked for): it holds it until
    /// [`FleetChange::Freed`]. Its queue wait ends here.
    Placed(Placed),
    /// A placed job's instance was launched.
    Launched(Launched),
    /// A job's lease is now backed by an instance that already existed: an
    /// instance found in an inventory after a restart (B8), or an orphan named
    /// after a job still queued (B7). A job not holding a lease takes one.
    Adopted(Adopted),
    /// A job's lease was given up, and the job ended.
    Freed(Freed),
    /// A job ended without ever holding a lease (cancelled while queued).
    Ended {
        /// The job.
        job: JobId,
        /// The deployment index.
        deployment: usize,
        /// How it ended.
        reason: FreeReason,
    },
    /// A pool's inventory could not be read, so nothing was freed there.
    InventoryError {
        /// The deployment index.
        deployment: usize,
        /// The pool index.
        pool: usize,
    },
    /// An orphan (an instance of the deployment no lease holds) was seen or
    /// collected (B7).
    Orphan(OrphanChange),
    /// The deployment's scheduler was dropped and a new one built: the leases
    /// the old one held are nobody's until the new one adopts them.
    Restarted {
        /// The deployment index.
        deployment: usize,
        /// How many jobs the durable store handed to the new scheduler:
        /// accepted by the old one and not placed.
        handed_over: usize,
    },
    /// A job the durable store handed to a new scheduler after a restart was
    /// refused by it: the job is lost, which the harness reports.
    Lost {
        /// The job.
        job: JobId,
        /// The deployment index.
        deployment: usize,
        /// Why the new scheduler refused it.
        why: String,
    },
}

/// A job placed on a pool of a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// The job.
    pub job: JobId,
    /// The deployment index.
    pub deployment: usize,
    /// The pool index within the deployment.
    pub pool: usize,
}

/// A placed job whose instance was launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// The job.
    pub job: JobId,
    /// The deployment index.
    pub deployment: usize,
    /// The instance's id.
    pub instance: InstanceId,
}

/// An existing instance now backing a job's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    /// The job.
    pub job: JobId,
    /// The deployment index.
    pub deployment: usize,
    /// The pool index whose lease it holds.
    pub pool: usize,
    /// The instance's id.
    pub instance: InstanceId,
}

/// Why a lease was given up (or a job ended), that is how the job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FreeReason {
    /// The inventory showed the instance stopped, and it was destroyed: the
    /// job finished, with this exit code.
    Stopped,
    /// The instance was absent from an inventory that answered (vanished).
    Absent,
    /// The job held its lease longer than its timeout: its instance was destroyed.
    TimedOut,
    /// The job was cancelled (its instance destroyed, if it had one).
    Cancelled,
    /// The provider refused the launch.
    Refused,
    /// The provider found the spec invalid.
    Invalid,
    /// A launch or destroy whose effect stayed unknown was retried past the
    /// scheduler's bound (L14).
    GaveUp,
}

/// A lease given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freed {
    /// The job whose lease it was.
    pub job: JobId,
    /// The deployment index.
    pub deployment: usize,
    /// The pool index within the deployment.
    pub pool: usize,
    /// The name of the job's instance, so the harness can look it up.
    pub name: String,
    /// Why it was given up.
    pub reason: FreeReason,
}

/// What became of an orphan: the scheduler's own word for it.
pub use billet_scheduler::OrphanFate;

/// An orphan seen or collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanChange {
    /// The deployment index.
    pub deployment: usize,
    /// The pool whose inventory showed it.
    pub pool: usize,
    /// The instance's id.
    pub instance: InstanceId,
    /// The instance's name.
    pub name: String,
    /// What became of it.
    pub fate: OrphanFate,
}
