//! Submitting and cancelling jobs, the queues they wait in, and placement
//! (B3, B4): routing a job to its queue (class), keeping each queue's live
//! head, a pool's room, and taking a head onto a pool with its instance's spec.

use std::collections::VecDeque;
use std::time::SystemTime;

use billet_provider::Spec;

use crate::job::{Identity, Job, JobId, Outcome};
use crate::protocol::{Call, CallId, Decision};
use crate::routing::{PoolId, PoolInfo, Refusal, Target, target, trust_index};

use super::{Core, Purpose, Rec, Stage};

#[derive(Debug)]
pub(super) struct Class {
    target: Target,
    /// (sequence, job); entries whose job left the queue are skipped lazily.
    queue: VecDeque<(u64, JobId)>,
}

impl Core {
    /// Accepts `job` at `now`, or refuses it with the reason (B3): no pool
    /// could ever take it, or a job with its id has not ended yet. A refused
    /// job records nothing. A job this core learned from an inventory at
    /// start (B8) is accepted again: it keeps its instance and lease, and
    /// takes the details given (its timeout counted from its instance's
    /// start), so whoever keeps the jobs can hand every unfinished one over
    /// after a restart. An accepted job is placed at once when a pool it
    /// may run on has room and nothing it waits behind is queued.
    pub fn submit(&mut self, job: Job, now: SystemTime) -> Result<(), Refusal> {
        self.advance(now);
        if let Some(rec) = self.jobs.get_mut(&job.id) {
            // A job learned from an inventory (B8), handed over again by
            // whoever keeps the jobs: it gets its details back, its timeout
            // counted from its instance's start.
            if let Some(started) = rec.learned.take() {
                let id = job.id;
                rec.deadline = job.timeout.and_then(|t| started.checked_add(t));
                rec.job = job;
                if let Some(at) = rec.deadline {
                    self.timeouts.insert((at, id));
                }
                self.counts.accepted += 1;
                return Ok(());
            }
            self.counts.refused += 1;
            return Err(Refusal::Duplicate { id: job.id.0 });
        }
        let class = match self.route(&job) {
            Ok(class) => class,
            Err(refusal) => {
                self.counts.refused += 1;
                tracing::info!(target: "billet_scheduler", job = job.id.0, %refusal, "refused");
                return Err(refusal);
            }
        };
        self.counts.accepted += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        let id = job.id;
        let first = self.classes[class].target.pools().next().map(|p| p.0);
        if let Some(p) = first {
            self.pools[p].queued += 1;
        }
        self.jobs.insert(
            id,
            Rec {
                job,
                stage: Stage::Queued { class, seq },
                end_requested: None,
                deadline: None,
                learned: None,
                started: None,
                unsettled_since: None,
                stopped_early: None,
            },
        );
        let queue = &mut self.classes[class].queue;
        let was_empty = queue.is_empty();
        queue.push_back((seq, id));
        tracing::debug!(target: "billet_scheduler", job = id.0, "queued");
        if was_empty {
            self.waiting.insert((seq, class));
            self.may_place = true;
        }
        self.place();
        Ok(())
    }

    /// The queue (class) of jobs with `job`'s labels and trust, or why no
    /// pool could ever take them. Routing depends on nothing else, so it is
    /// decided once per labels and trust and remembered.
    /// Whether [`submit`](Core::submit) would route `job` to a pool, and the
    /// refusal it would answer if not, without submitting it: for a caller
    /// that must know before it sends a job on (a dispatcher over several
    /// deployments). It says nothing of duplicates.
    pub fn would_take(&mut self, job: &Job) -> Result<(), Refusal> {
        self.route(job).map(|_| ())
    }

    fn route(&mut self, job: &Job) -> Result<usize, Refusal> {
        // A pinned job's target is its pool's, whatever its labels: not
        // cached by labels (pins are few: GitHub's runners).
        if job.pool.is_some() {
            return target(&self.config, &self.infos, job).map(|t| self.class_for(t));
        }
        let trust = trust_index(job.trust);
        if let Some(known) = self
            .routes
            .get(job.labels.as_slice())
            .and_then(|by_trust| by_trust[trust].clone())
        {
            return known;
        }
        let routed = target(&self.config, &self.infos, job).map(|t| self.class_for(t));
        self.routes.entry(job.labels.clone()).or_default()[trust] = Some(routed.clone());
        routed
    }

    fn class_for(&mut self, target: Target) -> usize {
        if let Some(&class) = self.class_of.get(&target) {
            return class;
        }
        let class = self.classes.len();
        self.class_of.insert(target.clone(), class);
        self.classes.push(Class {
            target,
            queue: VecDeque::new(),
        });
        class
    }

    /// Cancels `job` at `now` (B9). A queued job is removed and ends
    /// cancelled at once; a running job's instance is destroyed and the job
    /// ends cancelled once that is confirmed; a launch not yet settled is
    /// settled first. Answers `false` when the job is unknown, has ended, or
    /// is already ending.
    pub fn cancel(&mut self, job: JobId, now: SystemTime) -> bool {
        self.advance(now);
        self.end_early(job, Outcome::Cancelled)
    }

    /// Jobs waiting for a lease.
    pub fn queued(&self) -> u64 {
        self.pools.iter().map(|pool| pool.queued).sum()
    }

    /// The jobs waiting for a lease, in the order they were accepted: what a
    /// caller keeping the jobs hands a new core after a restart.
    pub fn queued_jobs(&self) -> Vec<&Job> {
        let mut waiting: Vec<(u64, &Job)> = self
            .jobs
            .values()
            .filter_map(|rec| match rec.stage {
                Stage::Queued { seq, .. } => Some((seq, &rec.job)),
                _ => None,
            })
            .collect();
        waiting.sort_unstable_by_key(|(seq, _)| *seq);
        waiting.into_iter().map(|(_, job)| job).collect()
    }

    /// Removes a queued job from its queue (lazily: the entry is skipped).
    pub(super) fn unqueue(&mut self, id: JobId) {
        let Some(rec) = self.jobs.get(&id) else {
            return;
        };
        let Stage::Queued { class, .. } = rec.stage else {
            return;
        };
        if let Some(p) = self.classes[class].target.pools().next() {
            self.pools[p.0].queued -= 1;
        }
        // Mark it gone from the queue, then drop dead entries at the head.
        if let Some(rec) = self.jobs.get_mut(&id) {
            rec.stage = Stage::Queued {
                class: usize::MAX,
                seq: u64::MAX,
            };
        }
        self.settle_head(class);
    }

    /// Drops entries at the head of `class`'s queue whose job left it, and
    /// keeps `waiting` keyed by the live head.
    fn settle_head(&mut self, class: usize) {
        let Some(&(head, _)) = self.classes[class].queue.front() else {
            return;
        };
        self.waiting.remove(&(head, class));
        while let Some(&(seq, job)) = self.classes[class].queue.front() {
            let live = matches!(
                self.jobs.get(&job).map(|rec| &rec.stage),
                Some(Stage::Queued { class: c, seq: s }) if *c == class && *s == seq
            );
            if live {
                self.waiting.insert((seq, class));
                return;
            }
            self.classes[class].queue.pop_front();
        }
    }

    fn free(&self, pool: PoolId) -> u32 {
        let p = &self.pools[pool.0];
        if !p.ready {
            return 0;
        }
        // Orphans use capacity too, until they are collected; so do a live
        // second store's instances, and what a job given up on may have left.
        self.infos[pool.0]
            .capacity
            .saturating_sub(p.leases.len() as u32)
            .saturating_sub(p.orphans.len() as u32)
            .saturating_sub(p.contested.len() as u32)
            .saturating_sub(p.unsettled.len() as u32)
    }

    /// Places queued jobs while a pool they want has room: each time the
    /// oldest head among the queues that can be placed (B4).
    pub(super) fn place(&mut self) {
        if !std::mem::take(&mut self.may_place) {
            return;
        }
        // Room only shrinks while placing, so a queue whose head finds none
        // is blocked for the whole pass: set aside, put back at the end.
        let mut blocked = Vec::new();
        while let Some((seq, class)) = self.waiting.pop_first() {
            if self.head_waits_for_an_inventory(class) {
                blocked.push((seq, class));
                continue;
            }
            match self.classes[class].target.choose(|p| self.free(p)) {
                // Its next head, if any, goes back into `waiting`.
                Some(pool) => self.place_head(class, pool),
                None => blocked.push((seq, class)),
            }
        }
        self.waiting.extend(blocked);
    }

    /// Whether the head of `class`'s queue held a lease on a pool in an
    /// earlier life and that pool's first inventory has not answered yet.
    fn head_waits_for_an_inventory(&self, class: usize) -> bool {
        if self.held_before.is_empty() {
            return false;
        }
        self.classes[class]
            .queue
            .front()
            .and_then(|(_, id)| self.held_before.get(id))
            .is_some_and(|pool| !self.pools[pool.0].ready)
    }

    /// Takes the head of `class`'s queue onto `pool`: a lease, its timeout,
    /// its spec, and the launch asked for.
    fn place_head(&mut self, class: usize, pool: PoolId) {
        let Some((_, id)) = self.classes[class].queue.pop_front() else {
            return;
        };
        if let Some(first) = self.classes[class].target.pools().next() {
            self.pools[first.0].queued -= 1;
        }
        self.settle_head(class);
        let now = self.now;
        let call = CallId(self.next_call);
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let started = *rec.started.get_or_insert(now);
        rec.deadline = rec.job.timeout.and_then(|t| started.checked_add(t));
        if let Some(at) = rec.deadline {
            self.timeouts.insert((at, id));
        }
        let spec = spec_for(&self.infos[pool.0], self.identity.as_ref(), id, &rec.job);
        rec.stage = Stage::Launching {
            pool,
            attempt: 0,
            call: Some(call),
            retry_at: None,
        };
        let p = &mut self.pools[pool.0];
        p.leases.insert(id);
        p.launching += 1;
        self.decide(Decision::Placed { job: id, pool });
        let made = self.call(pool, Call::Launch(spec), Purpose::Job(id));
        debug_assert_eq!(made, call);
    }
}

/// The spec of `job`'s instance in the pool `info`.
pub(super) fn spec_for(info: &PoolInfo, identity: Option<&Identity>, id: JobId, job: &Job) -> Spec {
    Spec {
        name: id.instance_name_in(identity, &info.name),
        image: info.image.clone(),
        command: job.command.clone(),
        trust: job.trust,
        resources: info.resources,
        env: billet_provider::Environment::new(),
    }
}
