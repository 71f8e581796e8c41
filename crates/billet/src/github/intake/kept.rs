//! What the intake keeps in `github.db` beside the deliveries (the jobs it
//! took, which GitHub job each runner serves), and what a restart reads
//! back of it: the runners adopted, the jobs taken again (G6, G7, G8).
//!
//! Bounded: what waits to be written is at most [`KEPT_BATCH`] records;
//! what a restart reads, the jobs taken in the last three days that have
//! not completed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use billet_github::Action;
use billet_provider::TrustClass;
use billet_scheduler::InstanceName;

use super::super::deliveries::{JobFacts, TookJob};
use super::super::demand::{JobStage, RunnerId};
use super::super::registering::{Place, runner_of_key};
use super::{Intake, Taken, place_of};

/// How many records of the jobs taken and of which GitHub job a runner
/// serves wait, at most, before they are written to `github.db` in one
/// transaction (between a driver's ticks, deliveries keep coming).
pub const KEPT_BATCH: usize = 1024;

/// Whether `waiting` records of the jobs taken and of the runners' jobs
/// are written at once rather than at the end of the intake's turn: once
/// [`KEPT_BATCH`] wait.
pub fn kept_full(waiting: usize) -> bool {
    waiting >= KEPT_BATCH
}

/// A GitHub job billet took, as `github.db` kept it across a restart.
struct Kept {
    facts: JobFacts,
    place: Place,
    /// The pool its runners run in.
    pool: String,
    /// What the intake kept of its taking, if it was written.
    took: Option<TookJob>,
}

impl Intake {
    /// Adopts the runners' billet jobs the table holds, and takes again
    /// the GitHub jobs `github.db` says billet took that have not completed
    /// (G7):
    /// - A runner that GitHub's deliveries say took a job still in progress
    ///   (its `in_progress`, committed before it was answered, G2) is
    ///   adopted with it: when the runner ends and the job's `completed`
    ///   never came, the reconcile asks of it.
    /// - Any other runner is adopted idle: no delivery said it took a job,
    ///   so the reconcile asks of its pool's queued jobs while it idles, and
    ///   one GitHub refuses to remove (it runs a job whose `in_progress` was
    ///   lost) is counted busy until it ends.
    /// - A job still queued waits again, for the runners adopted and, when
    ///   they are too few, new ones.
    /// - A job in progress on no live runner (its runner ended, or is not
    ///   this store's) is asked of at the first reconcile.
    pub(super) fn adopt(&mut self) {
        let now = self.parts.shared.now();
        let (mut on_runners, others) = self.kept_at_start();
        let shared = Arc::clone(&self.parts.shared);
        let jobs = shared.jobs.read();
        for record in jobs.iter() {
            let (Some(n), Some(pool)) = (
                record.key.as_deref().and_then(runner_of_key),
                record.pinned.as_deref(),
            ) else {
                continue;
            };
            let runner = RunnerId(n);
            match on_runners.remove(&record.id) {
                Some(kept) => {
                    self.demand.restore(runner, pool, None, None);
                    self.demand.taken(kept.facts.id, pool);
                    self.demand.took(runner, kept.facts.id);
                    self.retake(kept.facts, kept.place, record.trust, pool, None, now);
                }
                None => self.demand.restore(runner, pool, None, None),
            }
            self.job_of.insert(runner, record.id);
            self.runner_of.insert(record.id, runner);
            self.watched.touched.push(record.id);
        }
        drop(jobs);
        // In the order of GitHub's ids, so that a restart decides the same
        // whatever the map's order.
        let mut ended: Vec<Kept> = on_runners.into_values().collect();
        ended.sort_unstable_by_key(|kept| kept.facts.id);
        for kept in ended.into_iter().chain(others) {
            let id = kept.facts.id;
            self.demand.taken(id, &kept.pool);
            let queued_at = match kept.facts.action {
                Action::InProgress => {
                    self.demand.reached(id, JobStage::InProgress);
                    None
                }
                _ => kept.took.as_ref().map(|took| took.at),
            };
            let trust = kept.took.map_or(TrustClass::Unknown, |took| took.trust);
            let pool = kept.pool;
            self.retake(kept.facts, kept.place, trust, &pool, queued_at, now);
        }
    }

    /// What `github.db` says of the GitHub jobs billet took that have not
    /// completed: those in progress on runners of this store, by the
    /// runner's billet job (the pool the runner's name names), and the
    /// others billet kept as taken. Empty when it cannot be read (a warning
    /// says so): the restart then knows only what the reconcile finds.
    fn kept_at_start(&self) -> (HashMap<u64, Kept>, Vec<Kept>) {
        let Some(webhook) = self.parts.webhook.upgrade() else {
            return (HashMap::new(), Vec::new());
        };
        let read = webhook
            .in_progress()
            .and_then(|in_progress| webhook.taken().map(|taken| (in_progress, taken)));
        let (in_progress, taken) = match read {
            Ok(read) => read,
            Err(error) => {
                tracing::warn!(%error, "the GitHub jobs taken could not be read from github.db at start");
                return (HashMap::new(), Vec::new());
            }
        };
        let mut took: HashMap<u64, TookJob> = taken
            .iter()
            .map(|(took, _)| (took.id, took.clone()))
            .collect();
        let mut on_runners = HashMap::new();
        for facts in in_progress {
            let Some((job, pool)) = facts
                .runner
                .as_deref()
                .and_then(InstanceName::parse)
                .filter(|name| name.store == self.parts.identity.as_deref())
                .map(|name| (name.job.0, name.pool.to_owned()))
            else {
                continue;
            };
            let Some(place) = place_of(&self.parts.settings, &facts.repository) else {
                continue;
            };
            let took = took.remove(&facts.id);
            on_runners.insert(
                job,
                Kept {
                    facts,
                    place,
                    pool,
                    took,
                },
            );
        }
        let others = taken
            .into_iter()
            .filter_map(|(_, facts)| {
                let took = took.remove(&facts.id)?;
                // A pool no longer configured runs none of them.
                let pools = &self.parts.settings.pools;
                if !pools.iter().any(|pool| pool.pool == took.pool) {
                    return None;
                }
                let place = place_of(&self.parts.settings, &facts.repository)?;
                Some(Kept {
                    facts,
                    place,
                    pool: took.pool.clone(),
                    took: Some(took),
                })
            })
            .collect();
        (on_runners, others)
    }

    /// Keeps GitHub job `facts` as taken into `pool` at `trust`, queued
    /// since `queued_at` if it still is, heard of `now`, after a restart.
    fn retake(
        &mut self,
        facts: JobFacts,
        place: Place,
        trust: TrustClass,
        pool: &str,
        queued_at: Option<SystemTime>,
        now: SystemTime,
    ) {
        self.taken.insert(
            facts.id,
            Taken {
                trust,
                place,
                labels: facts.labels,
                queued_at,
                repository: facts.repository,
                run_id: facts.run_id,
                heard: now,
                pool: pool.to_owned(),
                asked: 0,
            },
        );
    }

    /// Records that runner billet job `billet_job` serves GitHub job
    /// `github_job`, for its view's `github` object (G8): kept until
    /// [`write_kept`](Intake::write_kept).
    pub(super) fn serves(&mut self, billet_job: u64, github_job: u64) {
        self.served
            .push((billet_job, github_job, self.parts.shared.now()));
        self.kept();
    }

    /// Writes what waits to be kept once [`KEPT_BATCH`] wait.
    pub(super) fn kept(&mut self) {
        if kept_full(self.served.len() + self.took.len()) {
            self.write_kept();
        }
    }

    /// Writes what [`serves`](Intake::serves) and the jobs taken kept to
    /// `github.db`, in one transaction.
    pub(super) fn write_kept(&mut self) {
        if self.served.is_empty() && self.took.is_empty() {
            return;
        }
        let served = std::mem::take(&mut self.served);
        let took = std::mem::take(&mut self.took);
        let Some(webhook) = self.parts.webhook.upgrade() else {
            return;
        };
        if let Err(error) = webhook.keep(&took, &served) {
            tracing::warn!(runners = served.len(), jobs = took.len(), %error, "the jobs taken and which GitHub job each runner serves could not be recorded");
        }
    }
}
