//! [`ProductionScheduler`]: the production scheduler, `billet-scheduler`,
//! driven through the harness's [`Scheduler`] trait (H10).
//!
//! Each deployment of a scenario is one `billet-scheduler`, an
//! [`Inline`] driver over [`Pools`] built from the deployment's own
//! [`billet_config::Config`] (made in code from the scenario's
//! [`Layout`](crate::scenario::Layout)) with the scenario's simulated
//! providers injected under the configured pool names, all over the one
//! shared host and the one [`ManualClock`](billet_clock::ManualClock). Every
//! decision the scheduler makes is translated into a [`FleetChange`] for the
//! harness to check against the host.
//!
//! What the harness adds, since a scenario has several deployments and one
//! stream of jobs:
//!
//! * **Which deployment takes a job** (the harness's dispatcher, not part of
//!   `billet-scheduler`): the one with the most room, counted as its capacity
//!   less its leases and its queue, ties going to the first. The deployment's
//!   scheduler routes it to a pool (B3) or refuses it.
//! * **The durable store**: the jobs each deployment accepted and has not
//!   placed, in the order accepted, which the store of a real service would
//!   hold; here they are read from the scheduler's own queue
//!   ([`Core::queued_jobs`](billet_scheduler::Core::queued_jobs)) at the
//!   moment of the restart, before it is dropped. A
//!   [`restart`](Scheduler::restart) drops the deployment's `Inline`, builds
//!   a new one over the same [`Pools`], starts it (it reads every inventory
//!   first and learns what is running, B8), then hands it those jobs again,
//!   in order.

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use billet_clock::Clock;
use billet_scheduler::{
    BuildError, Decision, FailReason, Inline, JobId as CoreJobId, Outcome, PoolId, Pools,
};

use crate::scheduler::{
    Adopted, FleetChange, FreeReason, Freed, Launched, OrphanChange, Placed, RestartUnsupported,
    Scheduler, SchedulerContext, Step,
};
use crate::workload::{Job, JobId};

/// The production scheduler, one [`Inline`] per deployment. See the
/// [module docs](self).
#[derive(Debug)]
pub struct ProductionScheduler {
    clock: Arc<dyn Clock>,
    /// Whether each deployment's driver reads hints (B12).
    hints: bool,
    /// By deployment index; `None` for a deployment with no lease (it has no
    /// valid configuration, so no scheduler, and never takes a job).
    deployments: Vec<Option<Deployment>>,
    /// Pools per deployment, for the counts of a deployment with none.
    pool_counts: Vec<usize>,
    /// What was done since the last tick, in order.
    changes: Vec<FleetChange>,
}

#[derive(Debug)]
struct Deployment {
    pools: Pools,
    /// The configured pool names, by pool index: an instance's name is the
    /// job's and its pool's (`job-42.linux`).
    pool_names: Vec<String>,
    inline: Inline,
    capacity: u64,
}

impl Deployment {
    fn leases(&self) -> u64 {
        let core = self.inline.core();
        (0..core.pools().len())
            .map(|p| u64::from(core.leases(PoolId(p))))
            .sum()
    }

    /// Translates every decision made so far into changes for the harness.
    fn drain(&mut self, index: usize, changes: &mut Vec<FleetChange>) {
        while let Some(decision) = self.inline.poll_decision() {
            let pool_names = &self.pool_names;
            let change = change_of(
                decision,
                index,
                |job| job.0,
                |job, pool| job.instance_name(&pool_names[pool.0]),
            );
            changes.extend(change);
        }
    }
}

/// The change the harness checks for one decision of deployment
/// `deployment`'s scheduler, if it is one the harness follows; `job` names
/// a core's job as the harness does, `name` gives the name of a job's
/// instance in a pool.
pub(crate) fn change_of(
    decision: Decision,
    deployment: usize,
    job: impl Fn(CoreJobId) -> JobId,
    name: impl Fn(CoreJobId, PoolId) -> String,
) -> Option<FleetChange> {
    Some(match decision {
        Decision::Placed { job: id, pool } => FleetChange::Placed(Placed {
            job: job(id),
            deployment,
            pool: pool.0,
        }),
        Decision::Launched {
            job: id, instance, ..
        } => FleetChange::Launched(Launched {
            job: job(id),
            deployment,
            instance,
        }),
        Decision::Adopted {
            job: id,
            pool,
            instance,
        } => FleetChange::Adopted(Adopted {
            job: job(id),
            deployment,
            pool: pool.0,
            instance,
        }),
        Decision::Retrying { .. } | Decision::OutcomeDecided { .. } | Decision::Foreign { .. } => {
            return None;
        }
        Decision::Ended {
            job: id,
            pool,
            outcome,
        } => {
            let reason = reason(&outcome);
            match pool {
                Some(pool) => FleetChange::Freed(Freed {
                    job: job(id),
                    deployment,
                    pool: pool.0,
                    name: name(id, pool),
                    reason,
                }),
                None => FleetChange::Ended {
                    job: job(id),
                    deployment,
                    reason,
                },
            }
        }
        Decision::Orphan {
            pool,
            instance,
            name,
            fate,
        } => FleetChange::Orphan(OrphanChange {
            deployment,
            pool: pool.0,
            instance,
            name,
            fate,
        }),
        Decision::InventoryError { pool, .. } => FleetChange::InventoryError {
            deployment,
            pool: pool.0,
        },
    })
}

/// How the harness counts an outcome.
pub(crate) fn reason(outcome: &Outcome) -> FreeReason {
    match outcome {
        Outcome::Finished { .. } => FreeReason::Stopped,
        Outcome::Failed { reason } => match reason {
            FailReason::Vanished => FreeReason::Absent,
            FailReason::TimedOut => FreeReason::TimedOut,
            FailReason::Refused(_) => FreeReason::Refused,
            FailReason::Invalid(_) => FreeReason::Invalid,
            FailReason::GaveUp(_) => FreeReason::GaveUp,
        },
        Outcome::Cancelled => FreeReason::Cancelled,
    }
}

impl ProductionScheduler {
    /// One `billet-scheduler` per deployment of the context, built from its
    /// configuration and its pools' providers, with the context's settings.
    ///
    /// Panics when a deployment's providers do not match its configuration:
    /// the harness makes both from one layout, so that is a harness bug. Use
    /// [`ProductionScheduler::try_new`] to see the error instead.
    pub fn new(ctx: SchedulerContext) -> Self {
        match Self::try_new(ctx) {
            Ok(scheduler) => scheduler,
            Err(err) => panic!("the harness built a deployment its scheduler refuses: {err}"),
        }
    }

    /// [`ProductionScheduler::new`], answering the scheduler's [`BuildError`]
    /// (B2) instead of panicking.
    pub fn try_new(ctx: SchedulerContext) -> Result<Self, BuildError> {
        let mut deployments = Vec::with_capacity(ctx.deployments.len());
        let mut pool_counts = Vec::with_capacity(ctx.deployments.len());
        for handle in ctx.deployments {
            pool_counts.push(handle.pools.len());
            let Some(config) = handle.config else {
                deployments.push(None);
                continue;
            };
            let mut builder = Pools::builder(config).settings(ctx.settings);
            for pool in handle.pools {
                builder = builder.provider(pool.name, pool.provider);
            }
            let pools = builder.build()?;
            let pool_names = pools
                .config()
                .providers()
                .iter()
                .map(|p| p.name().to_owned())
                .collect();
            let mut inline = Inline::new(&pools, Arc::clone(&ctx.clock));
            if ctx.hints {
                inline = inline.with_hints();
            }
            deployments.push(Some(Deployment {
                pools,
                pool_names,
                inline,
                capacity: handle.capacity as u64,
            }));
        }
        Ok(ProductionScheduler {
            clock: ctx.clock,
            hints: ctx.hints,
            deployments,
            pool_counts,
            changes: Vec::new(),
        })
    }

    /// Deployment `index`'s scheduler, to read its counts (`core().stats()`,
    /// B11); `None` for a deployment with no lease.
    pub fn inline(&self, index: usize) -> Option<&Inline> {
        self.deployments
            .get(index)
            .and_then(|d| d.as_ref())
            .map(|d| &d.inline)
    }

    /// How many jobs deployment `index`'s durable store holds: accepted and
    /// not yet placed.
    pub fn stored(&self, index: usize) -> usize {
        self.deployments
            .get(index)
            .and_then(|d| d.as_ref())
            .map_or(0, |d| d.inline.core().queued() as usize)
    }

    /// The deployment the dispatcher gives the next job: the most room
    /// (capacity less leases and queue), ties to the first.
    fn choose(&self) -> Option<usize> {
        let mut best: Option<(usize, i128)> = None;
        for (index, deployment) in self.deployments.iter().enumerate() {
            let Some(d) = deployment else { continue };
            let room = i128::from(d.capacity)
                - i128::from(d.leases())
                - i128::from(d.inline.core().queued());
            if best.is_none_or(|(_, most)| room > most) {
                best = Some((index, room));
            }
        }
        best.map(|(index, _)| index)
    }
}

#[async_trait]
impl Scheduler for ProductionScheduler {
    async fn submit(&mut self, job: Job) -> bool {
        let Some(index) = self.choose() else {
            return false;
        };
        let Some(d) = self.deployments[index].as_mut() else {
            return false;
        };
        let job = billet_scheduler::Job::new(CoreJobId(job.id), job.command)
            .with_labels(job.labels)
            .with_trust(job.trust);
        let accepted = d.inline.submit(job).await.is_ok();
        d.drain(index, &mut self.changes);
        accepted
    }

    async fn tick(&mut self) -> Step {
        for (index, deployment) in self.deployments.iter_mut().enumerate() {
            if let Some(d) = deployment {
                d.inline.tick().await;
                d.drain(index, &mut self.changes);
            }
        }
        Step {
            changes: std::mem::take(&mut self.changes),
        }
    }

    fn next_wakeup(&mut self) -> Option<SystemTime> {
        self.deployments
            .iter_mut()
            .flatten()
            .filter_map(|d| d.inline.next_wakeup())
            .min()
    }

    fn queued(&self) -> usize {
        self.deployments
            .iter()
            .flatten()
            .map(|d| d.inline.core().queued() as usize)
            .sum()
    }

    fn leases(&self) -> Vec<usize> {
        self.deployments
            .iter()
            .map(|d| d.as_ref().map_or(0, |d| d.leases() as usize))
            .collect()
    }

    fn leases_are(&self, held: &[usize]) -> bool {
        held.len() == self.deployments.len()
            && self
                .deployments
                .iter()
                .zip(held)
                .all(|(d, &held)| d.as_ref().map_or(0, |d| d.leases() as usize) == held)
    }

    fn pool_leases_are(&self, held: &[Vec<usize>]) -> bool {
        held.len() == self.deployments.len()
            && self
                .deployments
                .iter()
                .zip(&self.pool_counts)
                .zip(held)
                .all(|((d, &pools), held)| match d {
                    Some(d) => {
                        let core = d.inline.core();
                        core.pools().len() == held.len()
                            && held
                                .iter()
                                .enumerate()
                                .all(|(p, &n)| core.leases(PoolId(p)) as usize == n)
                    }
                    None => held.len() == pools && held.iter().all(|&n| n == 0),
                })
    }

    fn pool_leases(&self) -> Vec<Vec<usize>> {
        self.deployments
            .iter()
            .zip(&self.pool_counts)
            .map(|(d, &pools)| match d {
                Some(d) => {
                    let core = d.inline.core();
                    (0..core.pools().len())
                        .map(|p| core.leases(PoolId(p)) as usize)
                        .collect()
                }
                None => vec![0; pools],
            })
            .collect()
    }

    async fn restart(&mut self, index: usize) -> Result<(), RestartUnsupported> {
        let Some(Some(d)) = self.deployments.get_mut(index) else {
            // A deployment with no lease has no scheduler to restart.
            return Ok(());
        };
        // Whatever the old scheduler decided was drained after its last call.
        // The durable store: every job accepted and not placed, in order.
        let jobs: Vec<billet_scheduler::Job> =
            d.inline.core().queued_jobs().into_iter().cloned().collect();
        self.changes.push(FleetChange::Restarted {
            deployment: index,
            handed_over: jobs.len(),
        });
        let inline = Inline::new(&d.pools, Arc::clone(&self.clock));
        d.inline = if self.hints {
            inline.with_hints()
        } else {
            inline
        };
        d.inline.start().await;
        d.drain(index, &mut self.changes);
        // The store hands the new scheduler those jobs, in order.
        for job in jobs {
            let id = job.id;
            if let Err(refusal) = d.inline.submit(job).await {
                self.changes.push(FleetChange::Lost {
                    job: id.0,
                    deployment: index,
                    why: refusal.to_string(),
                });
            }
            d.drain(index, &mut self.changes);
        }
        Ok(())
    }

    fn name(&self) -> Option<&'static str> {
        Some("production")
    }

    fn reads_hints(&self) -> bool {
        self.hints
    }

    fn collects_orphans(&self) -> bool {
        true
    }
}
