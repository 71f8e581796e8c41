//! The run's loop: moves the clock to the next event (an arrival, an
//! outage's start or end, a stray, a restart, the scheduler's wake-up),
//! submits what arrived, ticks the scheduler and hands its step to the
//! checks; and the faults it makes on the way (outages, strays).

use super::*;

impl Play<'_> {
    pub(super) async fn play<S: Scheduler>(
        &mut self,
        scheduler: &mut S,
        mut source: Source,
        progress: &mut dyn FnMut(Progress),
        tap: &mut dyn Tap,
    ) -> Result<Source, RunFailure> {
        scheduler.start().await;
        if let Some(what) = scheduler.broken() {
            return Err(self.fail(Violation::Inconsistent { what }));
        }
        let mut pending = source
            .next_job()
            .map_err(|error| self.fail(Violation::Trace { error }))?;
        // Scheduled events in time order: (when, kind, deployment, index).
        // Kinds: 0 outage start, 1 outage end, 2 stray, 3 restart; at one
        // instant outages start first, then strays, restarts, and outages end
        // (the outages' order is the one the harness always had).
        let mut edges: Vec<(SystemTime, u8, usize, usize)> = Vec::new();
        for (k, o) in self.scenario.outages.iter().enumerate() {
            edges.push((self.scenario.start + o.at, 0, o.deployment, k));
            edges.push((self.scenario.start + o.at + o.lasting, 1, o.deployment, k));
        }
        for (k, stray) in self.scenario.strays.iter().enumerate() {
            edges.push((self.scenario.start + stray.at, 2, stray.deployment, k));
        }
        for (k, restart) in self.scenario.restarts.iter().enumerate() {
            edges.push((self.scenario.start + restart.at, 3, restart.deployment, k));
        }
        edges.sort_by_key(|e| (e.0, e.1 == 1, e.1, e.3));
        let mut edge = 0;
        let mut last_arrival = self.scenario.start;
        let announced = match &source {
            Source::Generated(_) => Some(self.scenario.workload.jobs),
            Source::Trace(jobs) => jobs.header().max_jobs,
        };
        let total = |submitted: u64| announced.unwrap_or(submitted).max(submitted);
        loop {
            let now = self.clock.now();
            let next = [
                pending.as_ref().map(|j| j.submitted_at),
                edges.get(edge).map(|e| e.0),
                scheduler.next_wakeup(),
                self.clock
                    .next_deadline()
                    .filter(|_| !scheduler.sleeps_on_clock()),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next else { break };
            let next = next.max(now);
            if next > last_arrival + self.scenario.drain_limit && pending.is_none() {
                let unfinished = self.report.submitted - self.report.finished - self.report.refused;
                return Err(self.fail(Violation::Unfinished {
                    jobs: unfinished,
                    why: format!(
                        "still busy {} after the last arrival",
                        Human(self.scenario.drain_limit)
                    ),
                }));
            }
            if self.clock.advance_to(next).is_err() {
                return Err(self.fail(Violation::Inconsistent {
                    what: "the clock refused to move forward".to_owned(),
                }));
            }
            self.step += 1;
            while let Some(&(at, kind, deployment, k)) = edges.get(edge) {
                if at > next {
                    break;
                }
                edge += 1;
                match kind {
                    0 | 1 => self.outage(deployment, kind == 0),
                    2 => self.stray(deployment, k).await?,
                    _ => match scheduler.restart(deployment).await {
                        Ok(()) => {
                            self.report.restarts += 1;
                            self.record(Event::Restart, 0, deployment, 0);
                        }
                        Err(_) => {
                            self.report.restarts_unsupported += 1;
                            self.record(Event::RestartUnsupported, 0, deployment, 0);
                        }
                    },
                }
            }
            // Every job of this instant goes to the scheduler at once.
            let mut arrived = Vec::new();
            while pending.as_ref().is_some_and(|j| j.submitted_at <= next) {
                let Some(job) = pending.take() else { break };
                pending = source
                    .next_job()
                    .map_err(|error| self.fail(Violation::Trace { error }))?;
                last_arrival = job.submitted_at;
                self.report.submitted += 1;
                self.jobs.insert(
                    job.id,
                    JobState::Queued {
                        since: job.submitted_at,
                    },
                );
                self.run_times.insert(job.id, job.run_time);
                tap.submitted(&job);
                arrived.push(job);
            }
            if !arrived.is_empty() {
                let ids: Vec<JobId> = arrived.iter().map(|job| job.id).collect();
                let accepted = scheduler.submit_all(arrived).await;
                if accepted.len() != ids.len() {
                    return Err(self.fail(Violation::Inconsistent {
                        what: format!(
                            "{} jobs submitted at once, {} answers",
                            ids.len(),
                            accepted.len()
                        ),
                    }));
                }
                for (id, accepted) in ids.into_iter().zip(accepted) {
                    self.record(Event::Submit, id, 0, 0);
                    if !accepted {
                        self.jobs.remove(&id);
                        self.report.refused += 1;
                        self.record(Event::Refuse, id, 0, 0);
                    }
                }
            }
            let step = scheduler.tick().await;
            tap.stepped(&step, self.clock.now());
            if let Some(what) = scheduler.broken() {
                return Err(self.fail(Violation::Inconsistent { what }));
            }
            self.check(&step, scheduler).await?;
            if self.step.is_multiple_of(4096) {
                progress(Progress {
                    done: self.report.finished + self.report.refused,
                    total: total(self.report.submitted),
                });
            }
        }
        match scheduler.finish().await {
            Ok(lines) => self.report.extra = lines,
            Err(what) => return Err(self.fail(Violation::Inconsistent { what })),
        }
        let submitted = self.report.submitted;
        progress(Progress {
            done: self.report.finished + self.report.refused,
            total: submitted,
        });
        self.report.modelled = self.elapsed();
        let done = self.report.finished + self.report.refused;
        let limbo: usize = self.limbo.iter().sum();
        if done != submitted || scheduler.queued() > 0 || self.total_held > 0 || limbo > 0 {
            return Err(self.fail(Violation::Unfinished {
                jobs: submitted - done,
                why: format!(
                    "the scheduler stopped asking for time with work outstanding \
                     ({} queued, {} leases held, {limbo} held by a restarted scheduler and never adopted)",
                    scheduler.queued(),
                    self.total_held
                ),
            }));
        }
        if !self.host.is_empty() {
            return Err(self.fail(Violation::Leaked {
                instances: self.host.len(),
            }));
        }
        Ok(source)
    }

    /// Starts or ends an outage of every pool of `deployment`.
    pub(super) fn outage(&mut self, deployment: usize, starts: bool) {
        let fault = starts.then(|| {
            Error::inventory_unavailable(format!(
                "scheduled outage of deployment {}",
                self.scenario.deployments[deployment].name
            ))
        });
        self.faulted[deployment].fail_inventory(fault);
        if starts {
            self.record(Event::OutageStart, 0, deployment, 0);
        } else {
            self.report.outages_survived += 1;
            self.record(Event::OutageEnd, 0, deployment, 0);
        }
    }

    /// Leaves stray number `k` on the host under `deployment`'s owner.
    pub(super) async fn stray(&mut self, deployment: usize, k: usize) -> Result<(), RunFailure> {
        let stray = self.scenario.strays[k];
        let spec = Spec::new(
            format!("stray-{k}"),
            billet_simulated::run_for(stray.lasting),
        )
        .with_trust(TrustClass::Trusted);
        match self.faulted[deployment].launch(spec).await {
            Ok(instance) => {
                self.strays.insert(instance.id, deployment);
                self.strays_of[deployment] += 1;
                self.report.strays += 1;
                self.record(Event::Stray, k as u64, deployment, 0);
                Ok(())
            }
            Err(err) => Err(self.fail(Violation::InvalidScenario {
                reason: format!("stray-{k} could not be left on the host: {err}"),
            })),
        }
    }

    /// When an orphan of `deployment` first seen at `seen` must be gone by:
    /// its grace period, pushed past any outage of the deployment's
    /// inventory it would end in, and one reconcile interval.
    pub(super) fn orphan_deadline(&self, deployment: usize, seen: SystemTime) -> SystemTime {
        let mut due = seen + self.scenario.orphan_grace;
        loop {
            let covering = self.scenario.outages.iter().find(|o| {
                let start = self.scenario.start + o.at;
                o.deployment == deployment && start <= due && due < start + o.lasting
            });
            match covering {
                Some(o) => due = self.scenario.start + o.at + o.lasting,
                None => break,
            }
        }
        due + self.reconcile_every
    }
}
