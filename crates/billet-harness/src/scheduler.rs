//! The [`Scheduler`] trait: how a scheduler under test plugs into a scenario.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use billet_clock::Clock;
use billet_provider::{InstanceId, Provider};

use crate::workload::{Job, JobId};

/// One deployment as a scheduler sees it: its name (the owner identity), its
/// provider, and how many leases it may hold at once.
#[derive(Debug, Clone)]
pub struct DeploymentHandle {
    /// The deployment identity, as written on its instances.
    pub name: String,
    /// Its backend. In a scenario, a simulated provider over the shared host,
    /// possibly wrapped.
    pub provider: Arc<dyn Provider>,
    /// The most leases it may hold at once.
    pub capacity: usize,
}

/// What the harness gives a scheduler when it builds one.
#[derive(Debug, Clone)]
pub struct SchedulerContext {
    /// Every deployment, in a fixed order; [`Step`] refers to them by index.
    pub deployments: Vec<DeploymentHandle>,
    /// The scenario's clock. The harness moves it; the scheduler only reads it
    /// (or sleeps on it).
    pub clock: Arc<dyn Clock>,
}

/// A scheduler under test.
///
/// The harness drives it from one task: it submits each job when it arrives,
/// then calls [`tick`](Scheduler::tick); it also ticks at every other event
/// (a wake-up the scheduler asked for, an outage starting or ending, a sleeper
/// on the clock reaching its deadline). The scheduler tells the harness what
/// it did in each tick, and the harness checks that against the host.
#[async_trait]
pub trait Scheduler: Send {
    /// Accepts a job that has just arrived. Answers `false` when it refuses
    /// the job outright (no deployment accepts its trust class): a refused job
    /// is done and never placed.
    async fn submit(&mut self, job: Job) -> bool;

    /// Does whatever work is due at the clock's current time (placing queued
    /// jobs, reconciling inventories) and reports it.
    async fn tick(&mut self) -> Step;

    /// When the scheduler next needs a tick even if nothing arrives: its next
    /// reconciliation, say. `None` when it has nothing to wait for.
    fn next_wakeup(&self) -> Option<SystemTime>;

    /// How many jobs wait for placement.
    fn queued(&self) -> usize;

    /// How many leases each deployment holds, by deployment index.
    fn leases(&self) -> Vec<usize>;
}

/// What a scheduler did in one tick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// Jobs placed and launched: each now holds a lease.
    pub launched: Vec<Launched>,
    /// Leases given up: each job's capacity is free again.
    pub freed: Vec<Freed>,
    /// Deployments whose inventory could not be read, so nothing was freed there.
    pub inventory_errors: Vec<usize>,
}

/// A job placed on a deployment, whose instance was launched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// The job.
    pub job: JobId,
    /// The deployment index.
    pub deployment: usize,
    /// The instance's id.
    pub instance: InstanceId,
}

/// Why a lease was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FreeReason {
    /// The inventory showed the instance stopped, and it was destroyed.
    Stopped,
    /// The instance was absent from an inventory that answered.
    Absent,
}

/// A lease given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freed {
    /// The job whose lease it was.
    pub job: JobId,
    /// The deployment index.
    pub deployment: usize,
    /// The name of the job's instance, so the harness can look it up.
    pub name: String,
    /// Why it was given up.
    pub reason: FreeReason,
}
