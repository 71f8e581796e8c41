//! [`ReferenceScheduler`]: the harness's own scheduler, for its runs and the fleet example.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_provider::Spec;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::scheduler::{
    DeploymentHandle, FleetChange, FreeReason, Freed, Launched, Placed, Scheduler,
    SchedulerContext, Step,
};
use crate::workload::{Job, JobId};

/// A small, correct scheduler: an allocator with per-deployment capacity, a
/// placer across deployments, a launcher over the provider contract, and a
/// reconciler.
///
/// * **Allocator**: a deployment never holds more leases than its capacity.
/// * **Placer**: first come, first served; each job goes to the deployment
///   with the most free leases among those that accept its trust class (ties:
///   the first deployment). A job no deployment accepts is refused at submission.
/// * **Launcher**: one instance per lease, named after the job.
/// * **Reconciler**: every `reconcile_every` of modelled time, lists each
///   deployment's inventory. A lease whose instance is stopped is freed after
///   the instance is destroyed; a lease whose instance is absent is freed.
///   **When an inventory errors, nothing is freed there**: an unreadable
///   inventory is unknown, not empty.
///
/// Everything it does is deterministic: what it frees and destroys in one
/// reconciliation is handled in job order, never in hash or inventory order.
///
/// It knows no pools, routing or labels: each deployment is one pool (its
/// first pool's provider, which sees all the deployment's instances, with the
/// deployment's whole capacity). It cannot restart ([`Scheduler::restart`]
/// answers unsupported) and does not collect orphans.
#[derive(Debug)]
pub struct ReferenceScheduler {
    deployments: Vec<Deployment>,
    clock: std::sync::Arc<dyn billet_clock::Clock>,
    queue: VecDeque<Job>,
    reconcile_every: Duration,
    next_reconcile: SystemTime,
}

#[derive(Debug)]
struct Deployment {
    handle: DeploymentHandle,
    /// The leases held, by the name of the job's instance.
    leases: FxHashMap<String, JobId>,
}

impl ReferenceScheduler {
    /// The default interval between reconciliations: one modelled minute.
    pub const DEFAULT_RECONCILE_EVERY: Duration = Duration::from_secs(60);

    /// A scheduler over the context's deployments, reconciling every modelled minute.
    pub fn new(ctx: SchedulerContext) -> Self {
        Self::with_reconcile_every(ctx, Self::DEFAULT_RECONCILE_EVERY)
    }

    /// A scheduler that reconciles every `every` of modelled time (at least
    /// one nanosecond).
    pub fn with_reconcile_every(ctx: SchedulerContext, every: Duration) -> Self {
        let every = every.max(Duration::from_nanos(1));
        let now = ctx.clock.now();
        ReferenceScheduler {
            deployments: ctx
                .deployments
                .into_iter()
                .map(|handle| Deployment {
                    handle,
                    leases: FxHashMap::default(),
                })
                .collect(),
            clock: ctx.clock,
            queue: VecDeque::new(),
            reconcile_every: every,
            next_reconcile: now + every,
        }
    }

    fn busy(&self) -> bool {
        !self.queue.is_empty() || self.deployments.iter().any(|d| !d.leases.is_empty())
    }

    /// Lists every deployment and frees what its inventory shows done:
    /// inventory errors into `errors`, frees into `step`.
    async fn reconcile(&mut self, errors: &mut Vec<FleetChange>, step: &mut Step) {
        for (index, deployment) in self.deployments.iter_mut().enumerate() {
            if deployment.leases.is_empty() {
                continue;
            }
            let inventory = match deployment.handle.provider.list().await {
                Ok(inventory) => inventory,
                Err(_) => {
                    errors.push(FleetChange::InventoryError {
                        deployment: index,
                        pool: 0,
                    });
                    continue;
                }
            };
            // Leases whose instance shows stopped, then (rarely) those absent.
            let mut done = Vec::new();
            let mut seen = 0;
            for instance in &inventory {
                if let Some(job) = deployment.leases.get(&*instance.name) {
                    seen += 1;
                    if instance.state.is_stopped() {
                        done.push((*job, &*instance.name, Some(&instance.id)));
                    }
                }
            }
            if seen < deployment.leases.len() {
                let present: FxHashSet<&str> = inventory.iter().map(|i| &*i.name).collect();
                for (name, job) in &deployment.leases {
                    if !present.contains(name.as_str()) {
                        done.push((*job, name.as_str(), None));
                    }
                }
            }
            done.sort_unstable_by_key(|(job, _, _)| *job);
            let mut freed = Vec::with_capacity(done.len());
            for (job, name, stopped) in done {
                let reason = match stopped {
                    None => FreeReason::Absent,
                    Some(id) if deployment.handle.provider.destroy(id).await.is_ok() => {
                        FreeReason::Stopped
                    }
                    // Not destroyed: keep the lease and try again next time.
                    Some(_) => continue,
                };
                freed.push((job, name.to_owned(), reason));
            }
            for (job, name, reason) in freed {
                deployment.leases.remove(&name);
                step.changes.push(FleetChange::Freed(Freed {
                    job,
                    deployment: index,
                    pool: 0,
                    name,
                    reason,
                }));
            }
        }
    }

    /// Places queued jobs, first come first served, while capacity lasts.
    async fn place(&mut self, step: &mut Step) {
        while let Some(job) = self.queue.front() {
            let target = self
                .deployments
                .iter()
                .enumerate()
                .filter(|(_, d)| d.leases.len() < d.handle.capacity)
                .filter(|(_, d)| d.handle.provider.accepts(job.trust).is_ok())
                .max_by_key(|(i, d)| (d.handle.capacity - d.leases.len(), std::cmp::Reverse(*i)))
                .map(|(i, _)| i);
            let Some(index) = target else { break };
            let Some(job) = self.queue.pop_front() else {
                break;
            };
            let deployment = &mut self.deployments[index];
            let spec = Spec::new(job.name.clone(), job.command.clone()).with_trust(job.trust);
            match deployment.handle.provider.launch(spec).await {
                Ok(instance) => {
                    deployment.leases.insert(job.name, job.id);
                    step.changes.push(FleetChange::Placed(Placed {
                        job: job.id,
                        deployment: index,
                        pool: 0,
                    }));
                    step.changes.push(FleetChange::Launched(Launched {
                        job: job.id,
                        deployment: index,
                        instance: instance.id,
                    }));
                }
                Err(_) => {
                    // Try again at the next tick; keep the queue's order.
                    self.queue.push_front(job);
                    break;
                }
            }
        }
    }
}

#[async_trait]
impl Scheduler for ReferenceScheduler {
    async fn submit(&mut self, job: Job) -> bool {
        let placeable = self
            .deployments
            .iter()
            .any(|d| d.handle.capacity > 0 && d.handle.provider.accepts(job.trust).is_ok());
        if placeable {
            self.queue.push_back(job);
        }
        placeable
    }

    async fn tick(&mut self) -> Step {
        let mut errors = Vec::new();
        let mut step = Step::default();
        let now = self.clock.now();
        if now >= self.next_reconcile {
            self.reconcile(&mut errors, &mut step).await;
            self.next_reconcile = now + self.reconcile_every;
        }
        self.place(&mut step).await;
        // The inventory errors first, then the frees, then the placements:
        // the order the harness has always hashed them in.
        if !errors.is_empty() {
            errors.append(&mut step.changes);
            step.changes = errors;
        }
        step
    }

    fn name(&self) -> Option<&'static str> {
        Some("reference")
    }

    fn next_wakeup(&mut self) -> Option<SystemTime> {
        self.busy().then_some(self.next_reconcile)
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn leases(&self) -> Vec<usize> {
        self.deployments.iter().map(|d| d.leases.len()).collect()
    }
}
