//! What a restarted core is told of, or learns about, an earlier life (B8,
//! L14): jobs that took a lease, ended, or held a lease on a pool before, as a
//! durable store knows, and jobs learned from the first inventories.

use std::time::SystemTime;

use billet_provider::Instance;

use crate::job::{Job, JobId};
use crate::routing::PoolId;

use super::{Core, Rec, Stage};

impl Core {
    /// Tells a new core that `job`, handed over again, first took a lease
    /// at `at` in an earlier life (a durable store knows): its timeout runs
    /// from `at`, not from a placement or adoption in this life (L14). Call
    /// it after the job's [`submit`](Core::submit).
    pub fn started_before(&mut self, job: JobId, at: SystemTime) {
        if let Some(rec) = self.jobs.get_mut(&job) {
            rec.started = Some(at);
        }
    }

    /// Tells a new core that `job` ended in an earlier life of this
    /// deployment (a durable store knows): an instance named after it found by
    /// the first inventories is an orphan to collect, not a job to learn (B8).
    /// Only the first inventories consult it; it is forgotten once every pool
    /// has answered.
    pub fn ended_before(&mut self, job: JobId) {
        if self.pools.iter().any(|pool| !pool.ready) {
            self.ended_before.insert(job);
        }
    }

    /// Tells a new core that every job up to `last` it is not handed (before
    /// or after this call, until the first inventories have answered) ended
    /// in an earlier life: [`ended_before`](Core::ended_before) for a whole
    /// range, without naming each. An instance named after such a job is an
    /// orphan to collect, not a job to learn (B8). Only the first inventories
    /// consult it; it is forgotten once every pool has answered.
    pub fn ended_through(&mut self, last: JobId) {
        self.ended_through = Some(last);
    }

    /// Whether `job` ended in an earlier life, as this core was told.
    pub(super) fn ended_earlier(&self, job: JobId) -> bool {
        self.ended_before.contains(&job) || self.ended_through.is_some_and(|last| job <= last)
    }

    /// Tells a new core that `job`, handed over again, held a lease on
    /// `pool` in an earlier life of this deployment (a durable store knows):
    /// it is not placed anywhere before `pool`'s first inventory has answered,
    /// so that an instance it may still have there is adopted rather than
    /// doubled on another pool (B8). It keeps its place in its queue, and the
    /// jobs behind it wait behind it. Only the first inventories consult it;
    /// it is forgotten once every pool has answered.
    pub fn held_before(&mut self, job: JobId, pool: PoolId) {
        if self.pools.get(pool.0).is_some_and(|p| !p.ready) {
            self.held_before.insert(job, pool);
        }
    }

    pub(super) fn learn(&mut self, id: JobId, pool: PoolId, instance: &Instance) {
        self.counts.learned += 1;
        self.jobs.insert(
            id,
            Rec {
                job: Job::new(id, Vec::<String>::new()),
                stage: Stage::Queued { class: 0, seq: 0 },
                end_requested: None,
                deadline: None,
                learned: Some(instance.started_at),
                started: Some(instance.started_at),
                unsettled_since: None,
                stopped_early: None,
            },
        );
        self.pools[pool.0].leases.insert(id);
        self.adopt(id, pool, instance);
    }
}
