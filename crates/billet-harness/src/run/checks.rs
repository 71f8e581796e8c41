//! The invariants checked after every step (H10): no pool and no
//! deployment over capacity, no lease freed while its instance runs, every
//! job in exactly one outcome, no orphan past its grace; and the bookkeeping
//! they are checked against (leases taken and freed, the trace digest).

use super::*;

impl Play<'_> {
    pub(super) fn not_in_flight(&self, job: JobId, what: String) -> RunFailure {
        self.fail(Violation::NotInFlight { job, what })
    }

    /// Checks one step against the harness's books and the host's ground truth.
    pub(super) async fn check<S: Scheduler>(
        &mut self,
        step: &Step,
        scheduler: &mut S,
    ) -> Result<(), RunFailure> {
        let now = self.clock.now();
        let deployments = self.held.len();
        for change in &step.changes {
            match change {
                FleetChange::InventoryError { deployment, pool } => {
                    self.report.inventory_errors += 1;
                    self.record(Event::InventoryError, 0, *deployment, *pool);
                }
                FleetChange::Placed(placed) => {
                    let state = self.jobs.get(&placed.job).copied();
                    let Some(JobState::Queued { since }) = state else {
                        return Err(self.fail(Violation::Inconsistent {
                            what: format!("placed job {} but it was {state:?}", placed.job),
                        }));
                    };
                    self.take(placed.job, placed.deployment, placed.pool)?;
                    self.waits
                        .record(now.duration_since(since).unwrap_or_default());
                    self.record(Event::Launch, placed.job, placed.deployment, placed.pool);
                }
                FleetChange::Launched(launched) => {
                    let state = self.jobs.get(&launched.job).copied();
                    if !matches!(state, Some(JobState::Held { deployment, .. }) if deployment == launched.deployment)
                    {
                        return Err(self.fail(Violation::Inconsistent {
                            what: format!(
                                "launched job {} on deployment {} but it was {state:?}",
                                launched.job, launched.deployment
                            ),
                        }));
                    }
                    if let Some(run) = self.run_times.get(&launched.job) {
                        self.stops.insert(launched.job, now + *run);
                    }
                }
                FleetChange::Adopted(adopted) => {
                    let state = self.jobs.get(&adopted.job).copied();
                    match state {
                        Some(JobState::Limbo { deployment })
                            if deployment == adopted.deployment =>
                        {
                            self.limbo[deployment] -= 1;
                            self.take(adopted.job, adopted.deployment, adopted.pool)?;
                        }
                        Some(JobState::Queued { since }) => {
                            self.take(adopted.job, adopted.deployment, adopted.pool)?;
                            self.waits
                                .record(now.duration_since(since).unwrap_or_default());
                        }
                        Some(JobState::Held { deployment, pool })
                            if deployment == adopted.deployment && pool == adopted.pool => {}
                        _ => {
                            return Err(self.fail(Violation::Inconsistent {
                                what: format!(
                                    "adopted job {} on pool {} of deployment {} but it was {state:?}",
                                    adopted.job, adopted.pool, adopted.deployment
                                ),
                            }));
                        }
                    }
                    self.report.adopted += 1;
                    self.record(
                        Event::Adopted,
                        adopted.job,
                        adopted.deployment,
                        adopted.pool,
                    );
                }
                FleetChange::Freed(freed) => {
                    let state = self.jobs.get(&freed.job).copied();
                    match state {
                        Some(JobState::Held { deployment, pool })
                            if deployment == freed.deployment && pool == freed.pool => {}
                        None => {
                            return Err(self.not_in_flight(
                                freed.job,
                                format!(
                                    "its lease on pool {} of deployment {} was freed ({:?})",
                                    freed.pool, freed.deployment, freed.reason
                                ),
                            ));
                        }
                        Some(state) => {
                            return Err(self.fail(Violation::Inconsistent {
                                what: format!(
                                    "freed job {} on deployment {} but it was {state:?}",
                                    freed.job, freed.deployment
                                ),
                            }));
                        }
                    }
                    let oracle = &self.oracle[freed.deployment];
                    let running = matches!(oracle.find(&freed.name).await, Ok(Some(i)) if i.state.is_running());
                    if running {
                        return Err(self.fail(Violation::FreedWhileRunning {
                            job: freed.job,
                            deployment: self.scenario.deployments[freed.deployment].name.clone(),
                            instance: freed.name.clone(),
                        }));
                    }
                    self.jobs.remove(&freed.job);
                    self.run_times.remove(&freed.job);
                    if let Some(stop) = self.stops.remove(&freed.job)
                        && freed.reason == FreeReason::Stopped
                    {
                        let after = now.duration_since(stop).unwrap_or_default();
                        self.seen_after.record(after);
                        self.idle_after = self.idle_after.saturating_add(after);
                    }
                    self.held[freed.deployment] -= 1;
                    self.pool_held[freed.deployment][freed.pool] -= 1;
                    self.total_held -= 1;
                    self.report.finished += 1;
                    let event = self.ended(freed.reason);
                    self.record(event, freed.job, freed.deployment, freed.pool);
                }
                FleetChange::Ended {
                    job,
                    deployment,
                    reason,
                } => {
                    match self.jobs.get(job).copied() {
                        Some(JobState::Queued { .. }) => {}
                        None => {
                            return Err(self.not_in_flight(
                                *job,
                                format!("it ended ({reason:?}) without a lease"),
                            ));
                        }
                        Some(state) => {
                            return Err(self.fail(Violation::Inconsistent {
                                what: format!(
                                    "job {job} ended ({reason:?}) without a lease but it was {state:?}"
                                ),
                            }));
                        }
                    }
                    self.jobs.remove(job);
                    self.run_times.remove(job);
                    self.report.finished += 1;
                    self.ended(*reason);
                    self.record(Event::EndedQueued, *job, *deployment, 0);
                }
                FleetChange::Orphan(orphan) => {
                    let key = (orphan.deployment, orphan.instance.clone());
                    match orphan.fate {
                        OrphanFate::Seen => {
                            if !self.watched.contains_key(&key) {
                                self.report.orphans_seen += 1;
                                let deadline = self.orphan_deadline(orphan.deployment, now);
                                self.watched.insert(
                                    key,
                                    Watched {
                                        deployment: orphan.deployment,
                                        name: orphan.name.clone(),
                                        seen: now,
                                        deadline,
                                    },
                                );
                                self.record(Event::OrphanSeen, 0, orphan.deployment, orphan.pool);
                            }
                        }
                        OrphanFate::Collected => {
                            // Pools that share an inventory may each report
                            // the collection of one orphan: count it once.
                            let first = self.watched.remove(&key).is_some()
                                || self.strays.contains_key(&orphan.instance);
                            if first {
                                self.report.orphans_collected += 1;
                                self.record(
                                    Event::OrphanCollected,
                                    0,
                                    orphan.deployment,
                                    orphan.pool,
                                );
                            }
                            if let Some(d) = self.strays.remove(&orphan.instance) {
                                self.strays_of[d] -= 1;
                            }
                        }
                    }
                }
                FleetChange::Restarted {
                    deployment,
                    handed_over,
                } => {
                    self.report.handed_over += *handed_over as u64;
                    let d = *deployment;
                    let mut moved = 0;
                    for state in self.jobs.values_mut() {
                        if let JobState::Held { deployment, .. } = *state
                            && deployment == d
                        {
                            *state = JobState::Limbo { deployment };
                            moved += 1;
                        }
                    }
                    self.limbo[d] += moved;
                    self.held[d] -= moved;
                    self.total_held -= moved;
                    self.pool_held[d].iter_mut().for_each(|n| *n = 0);
                    // A new scheduler sees its orphans afresh: their grace
                    // period starts again when it first sees them.
                    self.watched.retain(|(owner, _), _| *owner != d);
                }
                FleetChange::Lost {
                    job,
                    deployment,
                    why,
                } => {
                    return Err(self.fail(Violation::LostAtRestart {
                        job: *job,
                        deployment: self.scenario.deployments[*deployment].name.clone(),
                        why: why.clone(),
                    }));
                }
            }
        }
        for d in 0..deployments {
            for (p, &held) in self.pool_held[d].iter().enumerate() {
                let capacity = self.pool_caps[d][p];
                if held > capacity {
                    return Err(self.fail(Violation::PoolOverCapacity {
                        deployment: self.scenario.deployments[d].name.clone(),
                        pool: self.pool_names[d][p].clone(),
                        held: u32::try_from(held).unwrap_or(u32::MAX),
                        capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
                    }));
                }
            }
            let spec = &self.scenario.deployments[d];
            // The host's count, less the strays the harness itself left there.
            let instances = self.host.instances_of(&spec.name) - self.strays_of[d];
            let held = (self.held[d] + self.limbo[d]).max(instances);
            if held > spec.capacity {
                return Err(self.fail(Violation::CapacityExceeded {
                    deployment: spec.name.clone(),
                    held,
                    capacity: spec.capacity,
                }));
            }
        }
        if !scheduler.leases_are(&self.held) {
            return Err(self.fail(Violation::Inconsistent {
                what: format!(
                    "the scheduler says it holds {:?} leases, its reports add up to {:?}",
                    scheduler.leases(),
                    self.held
                ),
            }));
        }
        if !step.is_empty() && !scheduler.pool_leases_are(&self.pool_held) {
            return Err(self.fail(Violation::Inconsistent {
                what: format!(
                    "the scheduler says its pools hold {:?} leases, its reports add up to {:?}",
                    scheduler.pool_leases(),
                    self.pool_held
                ),
            }));
        }
        if let Some((_, w)) = self.watched.iter().find(|(_, w)| now > w.deadline) {
            let w = w.clone();
            let still = matches!(self.oracle[w.deployment].find(&w.name).await, Ok(Some(_)));
            if still {
                let since =
                    |t: SystemTime| t.duration_since(self.scenario.start).unwrap_or_default();
                return Err(self.fail(Violation::OrphanOutlived(Box::new(Outlived {
                    deployment: self.scenario.deployments[w.deployment].name.clone(),
                    instance: w.name.clone(),
                    seen: since(w.seen),
                    deadline: since(w.deadline),
                }))));
            }
            // Gone without a collection reported (a restart's new scheduler
            // may find it gone): stop watching it.
            self.watched
                .retain(|_, other| !(other.deployment == w.deployment && other.name == w.name));
        }
        self.report.peak_leases = self.report.peak_leases.max(self.total_held);
        let queued = scheduler.queued();
        self.report.peak_queue = self.report.peak_queue.max(queued);
        self.report.steps = self.step;
        let elapsed = self.elapsed();
        if elapsed >= self.next_sample {
            self.report.series.push(Sample {
                at: elapsed,
                leases: self.total_held,
                queued,
            });
            self.next_sample = elapsed + self.sample_every;
            // Past twice the points asked for (a trace runs longer than its
            // first estimate), keep every other point and sample half as
            // often: the series stays bounded whatever the run's length.
            if self.report.series.len() >= 2 * self.scenario.chart_points.max(1) {
                let mut k = 0;
                self.report.series.retain(|_| {
                    k += 1;
                    k % 2 == 1
                });
                self.sample_every *= 2;
                self.next_sample = elapsed + self.sample_every;
            }
        }
        Ok(())
    }

    /// Books a lease on `pool` of `deployment` for `job`, refusing a pool
    /// index the scenario lacks.
    pub(super) fn take(
        &mut self,
        job: JobId,
        deployment: usize,
        pool: usize,
    ) -> Result<(), RunFailure> {
        if deployment >= self.held.len() || pool >= self.pool_held[deployment].len() {
            return Err(self.fail(Violation::Inconsistent {
                what: format!(
                    "job {job} took a lease on pool {pool} of deployment {deployment}, which the scenario lacks"
                ),
            }));
        }
        self.jobs.insert(job, JobState::Held { deployment, pool });
        self.held[deployment] += 1;
        self.pool_held[deployment][pool] += 1;
        self.total_held += 1;
        Ok(())
    }

    /// Counts an outcome; answers the event that records it.
    pub(super) fn ended(&mut self, reason: FreeReason) -> Event {
        let o = &mut self.report.outcomes;
        match reason {
            FreeReason::Stopped => {
                o.finished += 1;
                Event::FreeStopped
            }
            FreeReason::Absent => {
                self.report.vanished += 1;
                o.vanished += 1;
                Event::FreeAbsent
            }
            FreeReason::TimedOut => {
                o.timed_out += 1;
                Event::FreeTimedOut
            }
            FreeReason::Cancelled => {
                o.cancelled += 1;
                Event::FreeCancelled
            }
            FreeReason::Refused => {
                o.refused_at_launch += 1;
                Event::FreeRefused
            }
            FreeReason::Invalid => {
                o.invalid += 1;
                Event::FreeInvalid
            }
            FreeReason::GaveUp => {
                o.gave_up += 1;
                Event::FreeGaveUp
            }
        }
    }

    pub(super) fn elapsed(&self) -> Duration {
        self.clock
            .now()
            .duration_since(self.scenario.start)
            .unwrap_or_default()
    }

    /// Hashes one event into the digest. The pool goes into the high half of
    /// the deployment's word, so a run of one pool per deployment hashes as
    /// the harness always did.
    pub(super) fn record(&mut self, event: Event, job: JobId, deployment: usize, pool: usize) {
        let at = self.elapsed().as_nanos() as u64;
        let place = deployment as u64 | ((pool as u64) << 32);
        let mut bytes = [0u8; 25];
        bytes[0] = event as u8;
        bytes[1..9].copy_from_slice(&at.to_le_bytes());
        bytes[9..17].copy_from_slice(&job.to_le_bytes());
        bytes[17..25].copy_from_slice(&place.to_le_bytes());
        self.trace.update(&bytes);
    }

    pub(super) fn fail(&self, violation: Violation) -> RunFailure {
        RunFailure {
            seed: self.scenario.seed,
            violation,
            at: self.elapsed(),
            step: self.step,
            replay: replay_for(&self.scenario.replay_command(), &self.report.scheduler),
        }
    }
}
