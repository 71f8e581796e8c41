//! A job's lease on a pool, from taking it to the job's end: moving a job
//! between stages, adopting an instance, stopping and destroying it, and
//! ending the job, early (a cancel, a timeout) or not, with its outcome (B9).

use billet_provider::{Instance, InstanceId, State};

use crate::job::{JobId, Outcome};
use crate::protocol::{Call, Decision};
use crate::routing::PoolId;

use super::{Core, Purpose, Stage};

impl Core {
    /// Ends `job` early with `outcome` (a cancel or a timeout).
    pub(super) fn end_early(&mut self, id: JobId, outcome: Outcome) -> bool {
        let Some(rec) = self.jobs.get_mut(&id) else {
            return false;
        };
        if rec.end_requested.is_some() {
            return false;
        }
        match rec.stage.clone() {
            Stage::Queued { .. } => {
                self.unqueue(id);
                self.end(id, outcome);
            }
            Stage::Launching {
                pool,
                attempt,
                call,
                ..
            } => {
                rec.end_requested = Some(outcome);
                if call.is_none() {
                    // Waiting to retry: the effect of the last attempt is
                    // unknown, so settle it by name first.
                    self.find(id, pool, attempt);
                }
            }
            Stage::Finding { .. } => rec.end_requested = Some(outcome),
            Stage::Running {
                pool,
                instance,
                since,
            } => {
                self.stop(id, pool, instance, since, outcome);
            }
            Stage::Stopping { .. } => return false,
        }
        self.place();
        true
    }

    /// Leases `pool` holds now, launches in flight included.
    pub fn leases(&self, pool: PoolId) -> u32 {
        self.pools
            .get(pool.0)
            .map_or(0, |pool| pool.leases.len() as u32)
    }

    /// The pool whose lease `job` holds, if it holds one.
    pub fn lease_of(&self, job: JobId) -> Option<PoolId> {
        self.jobs.get(&job).and_then(|rec| rec.stage.pool())
    }

    /// Makes `instance` back `job`'s lease on `pool`: running, or stopping
    /// when it has stopped already.
    pub(super) fn adopt(&mut self, id: JobId, pool: PoolId, instance: &Instance) {
        self.counts.adopted += 1;
        self.decide(Decision::Adopted {
            job: id,
            pool,
            instance: instance.id.clone(),
        });
        match instance.state {
            State::Stopped { exit_code } => self.stop(
                id,
                pool,
                instance.id.clone(),
                self.epoch,
                Outcome::Finished { exit_code },
            ),
            State::Pending | State::Running => self.run_on(id, pool, &instance.id),
        }
    }

    /// `job` runs on `instance` in `pool` from now (its launch answered, or
    /// its instance adopted), and is looked at once if a hint told that
    /// instance's stop while its launch was in flight (B12).
    pub(super) fn run_on(&mut self, id: JobId, pool: PoolId, instance: &InstanceId) {
        self.set_stage(
            id,
            Stage::Running {
                pool,
                instance: instance.clone(),
                since: self.epoch,
            },
        );
        self.look_if_stopped_early(id, pool, instance);
    }

    pub(super) fn stop(
        &mut self,
        id: JobId,
        pool: PoolId,
        instance: InstanceId,
        since: u64,
        outcome: Outcome,
    ) {
        self.decide(Decision::OutcomeDecided {
            job: id,
            pool,
            instance: instance.clone(),
            outcome: outcome.clone(),
        });
        self.destroy(id, pool, instance, since, 0, outcome);
    }

    pub(super) fn destroy(
        &mut self,
        id: JobId,
        pool: PoolId,
        instance: InstanceId,
        since: u64,
        attempt: u32,
        outcome: Outcome,
    ) {
        let call = self.call(pool, Call::Destroy(instance.clone()), Purpose::Job(id));
        self.set_stage(
            id,
            Stage::Stopping {
                pool,
                instance,
                since,
                attempt,
                call: Some(call),
                retry_at: None,
                requested: false,
                outcome,
            },
        );
    }

    /// Moves `job` to `stage`, keeping the pool's launching count true.
    pub(super) fn set_stage(&mut self, id: JobId, stage: Stage) {
        if matches!(stage, Stage::Running { .. })
            && let Some(rec) = self.jobs.get_mut(&id)
        {
            rec.unsettled_since = None;
        }
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let was = rec.stage.is_launching().then(|| rec.stage.pool()).flatten();
        let now = stage.is_launching().then(|| stage.pool()).flatten();
        if let Some(at) = rec.stage.retry_at() {
            self.retries.remove(&(at, id));
        }
        rec.stage = stage;
        if let Some(pool) = was {
            self.pools[pool.0].launching -= 1;
        }
        if let Some(pool) = now {
            self.pools[pool.0].launching += 1;
        }
    }

    /// Takes a lease on `pool` for `job` (leaving `stage` for the caller to
    /// replace), arming the job's timeout.
    pub(super) fn take_lease(&mut self, id: JobId, pool: PoolId, stage: Stage) {
        let now = self.now;
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let started = *rec.started.get_or_insert(now);
        rec.deadline = rec.job.timeout.and_then(|t| started.checked_add(t));
        if let Some(at) = rec.deadline {
            self.timeouts.insert((at, id));
        }
        self.pools[pool.0].leases.insert(id);
        self.set_stage(id, stage);
    }

    /// Ends `job` with `outcome`, freeing its lease if it holds one.
    pub(super) fn end(&mut self, id: JobId, outcome: Outcome) {
        let Some(rec) = self.jobs.remove(&id) else {
            return;
        };
        if let Some(at) = rec.stage.retry_at() {
            self.retries.remove(&(at, id));
        }
        if let Some(at) = rec.deadline {
            self.timeouts.remove(&(at, id));
        }
        // Until every first inventory has answered, an instance named after
        // this job must not be learned as a job again (B8).
        if self.pools.iter().any(|pool| !pool.ready) {
            self.ended_before.insert(id);
        }
        let pool = rec.stage.pool();
        if let Some(pool) = pool {
            let p = &mut self.pools[pool.0];
            p.leases.remove(&id);
            if rec.stage.is_launching() {
                p.launching -= 1;
            }
            self.may_place = true;
        }
        match outcome {
            Outcome::Finished { .. } => self.counts.finished += 1,
            Outcome::Failed { .. } => self.counts.failed += 1,
            Outcome::Cancelled => self.counts.cancelled += 1,
        }
        self.decide(Decision::Ended {
            job: id,
            pool,
            outcome,
        });
    }
}
