//! The driver: moves a [`ManualClock`] from event to event, feeds the
//! scheduler, and checks the invariants after every step.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_provider::{Error, Provider};
use billet_simulated::{Host, SimulatedProvider};
use rustc_hash::FxHashMap;
use xxhash_rust::xxh3::Xxh3;

use crate::report::{Human, Report, Sample, WaitHistogram};
use crate::scenario::Scenario;
use crate::scheduler::{DeploymentHandle, FreeReason, Scheduler, SchedulerContext, Step};
use crate::trace::{TraceError, TraceJobs};
use crate::workload::{Arrivals, Job, JobId};

/// An invariant the run broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A deployment held more leases (or more instances) than its capacity.
    CapacityExceeded {
        /// The deployment's name.
        deployment: String,
        /// How many it held.
        held: usize,
        /// Its capacity.
        capacity: usize,
    },
    /// A lease was freed while its job's instance was still running: the
    /// capacity it frees is still in use.
    FreedWhileRunning {
        /// The job.
        job: JobId,
        /// The deployment's name.
        deployment: String,
        /// The instance's name.
        instance: String,
    },
    /// The scheduler reported something that contradicts what it reported
    /// before (a launch of a job it never got, a free of a lease it never held).
    Inconsistent {
        /// What was contradictory.
        what: String,
    },
    /// The run ended (or hit its drain limit) with jobs unfinished.
    Unfinished {
        /// Jobs neither finished nor refused.
        jobs: u64,
        /// Why the run stopped.
        why: String,
    },
    /// Instances were left on the host after every job was done.
    Leaked {
        /// How many.
        instances: usize,
    },
    /// The scenario itself cannot run.
    InvalidScenario {
        /// Why.
        reason: String,
    },
    /// The scenario's trace could not be read (T1): the error names the file
    /// and the line.
    Trace {
        /// What was wrong, and where.
        error: TraceError,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::CapacityExceeded {
                deployment,
                held,
                capacity,
            } => write!(
                f,
                "capacity exceeded: deployment {deployment} held {held} leases or instances, capacity {capacity}"
            ),
            Violation::FreedWhileRunning {
                job,
                deployment,
                instance,
            } => write!(
                f,
                "lease of job {job} on deployment {deployment} was freed while its instance {instance} was still running"
            ),
            Violation::Inconsistent { what } => write!(f, "scheduler report inconsistent: {what}"),
            Violation::Unfinished { jobs, why } => write!(f, "{jobs} jobs never finished: {why}"),
            Violation::Leaked { instances } => {
                write!(
                    f,
                    "{instances} instances were left on the host after every job was done"
                )
            }
            Violation::InvalidScenario { reason } => write!(f, "invalid scenario: {reason}"),
            Violation::Trace { error } => write!(f, "the trace cannot be replayed: {error}"),
        }
    }
}

/// A run that broke an invariant: what, when, and how to replay it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invariant violated at modelled +{} (step {step}): {violation}\nseed: {seed}\nreplay: {replay}",
    Human(*.at)
)]
pub struct RunFailure {
    /// The scenario's seed.
    pub seed: u64,
    /// What broke.
    pub violation: Violation,
    /// When, as modelled time since the start.
    pub at: Duration,
    /// At which step.
    pub step: u64,
    /// The command that replays the run.
    pub replay: String,
}

/// Progress of a run, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Jobs done (finished or refused).
    pub done: u64,
    /// Jobs in all: for a trace, what its header announces (`MaxJobs`), or
    /// the jobs submitted so far when it announces nothing.
    pub total: u64,
}

/// Where a run's jobs come from: the seeded generator or a trace, both lazy.
enum Source {
    Generated(Box<Arrivals>),
    Trace(Box<TraceJobs>),
}

impl Source {
    fn next_job(&mut self) -> Result<Option<Job>, TraceError> {
        match self {
            Source::Generated(arrivals) => Ok(arrivals.next()),
            Source::Trace(jobs) => jobs.next_job(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Queued { since: SystemTime },
    Held { deployment: usize },
}

/// Event kinds hashed into the trace digest.
#[derive(Clone, Copy)]
#[repr(u8)]
enum Event {
    Submit = 1,
    Refuse = 2,
    Launch = 3,
    FreeStopped = 4,
    FreeAbsent = 5,
    InventoryError = 6,
    OutageStart = 7,
    OutageEnd = 8,
}

struct Driver<'a> {
    scenario: &'a Scenario,
    clock: ManualClock,
    host: Host,
    /// One provider per deployment, as the harness holds it (to inject outages).
    faulted: Vec<Arc<SimulatedProvider>>,
    /// One provider per deployment over the same host, never faulted: ground truth.
    oracle: Vec<SimulatedProvider>,
    /// Jobs not yet done, by id: done jobs leave, so this holds what is in
    /// flight (queued or held), never the whole workload (T2).
    jobs: FxHashMap<JobId, JobState>,
    held: Vec<usize>,
    total_held: usize,
    report: Report,
    waits: WaitHistogram,
    trace: Xxh3,
    step: u64,
    next_sample: Duration,
    sample_every: Duration,
}

impl Scenario {
    /// Runs the scenario with the scheduler `build` makes, and reports.
    ///
    /// Builds its own single-threaded runtime: call it from synchronous code
    /// (a test, `main`). From async code, use [`Scenario::run_async`].
    pub fn run<S, F>(&self, build: F) -> Result<Report, RunFailure>
    where
        S: Scheduler,
        F: FnOnce(SchedulerContext) -> S,
    {
        self.run_observed(build, &mut |_| {})
    }

    /// [`Scenario::run`], calling `progress` now and then with how far it got.
    pub fn run_observed<S, F>(
        &self,
        build: F,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Report, RunFailure>
    where
        S: Scheduler,
        F: FnOnce(SchedulerContext) -> S,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|err| self.invalid(format!("cannot start a runtime: {err}")))?;
        runtime.block_on(self.run_async(build, progress))
    }

    fn invalid(&self, reason: String) -> RunFailure {
        RunFailure {
            seed: self.seed,
            violation: Violation::InvalidScenario { reason },
            at: Duration::ZERO,
            step: 0,
            replay: self.replay_command(),
        }
    }

    /// Runs the scenario on the caller's runtime. The scheduler is driven from
    /// this one task; nothing is spawned.
    pub async fn run_async<S, F>(
        &self,
        build: F,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Report, RunFailure>
    where
        S: Scheduler,
        F: FnOnce(SchedulerContext) -> S,
    {
        self.validate().map_err(|reason| self.invalid(reason))?;
        let wall = Instant::now();
        let clock = ManualClock::new(self.start);
        let shared_clock: Arc<dyn Clock> = Arc::new(clock.clone());
        let host = Host::new();
        let mut faulted = Vec::new();
        let mut oracle = Vec::new();
        let mut handles = Vec::new();
        for (index, spec) in self.deployments.iter().enumerate() {
            let build_one = || {
                SimulatedProvider::builder(spec.name.clone())
                    .host(host.clone())
                    .clock(Arc::clone(&shared_clock))
                    .build()
                    .map_err(|err| self.invalid(err.to_string()))
            };
            let provider = Arc::new(build_one()?);
            oracle.push(build_one()?);
            let mut seen: Arc<dyn Provider> = provider.clone();
            if let Some(wrap) = &self.wrap {
                seen = wrap(index, seen);
            }
            faulted.push(provider);
            handles.push(DeploymentHandle {
                name: spec.name.clone(),
                provider: seen,
                capacity: spec.capacity,
            });
        }
        let mut scheduler = build(SchedulerContext {
            deployments: handles,
            clock: Arc::clone(&shared_clock),
        });
        // A trace's span is not known before it is read: start from a day and
        // let the series thin itself as the run goes on.
        let expected_span = match &self.trace {
            Some(_) => Duration::from_secs(86_400),
            None => Duration::try_from_secs_f64(
                self.workload.jobs as f64 / (self.workload.arrivals_per_minute / 60.0)
                    + self.workload.run_time.mean().as_secs_f64(),
            )
            .unwrap_or(Duration::MAX),
        };
        let mut driver = Driver {
            scenario: self,
            clock,
            host,
            faulted,
            oracle,
            jobs: FxHashMap::default(),
            held: vec![0; self.deployments.len()],
            total_held: 0,
            report: Report {
                seed: self.seed,
                deployments: self.deployments.len(),
                capacity: self.deployments.iter().map(|d| d.capacity).sum(),
                submitted: 0,
                finished: 0,
                vanished: 0,
                refused: 0,
                peak_leases: 0,
                peak_queue: 0,
                queue_wait: Default::default(),
                modelled: Duration::ZERO,
                wall: Duration::ZERO,
                outages_survived: 0,
                inventory_errors: 0,
                steps: 0,
                digest: String::new(),
                series: Vec::new(),
                trace: None,
            },
            waits: WaitHistogram::new(),
            trace: Xxh3::new(),
            step: 0,
            next_sample: Duration::ZERO,
            sample_every: (expected_span / (self.chart_points.max(1) as u32))
                .max(Duration::from_nanos(1)),
        };
        let source = match &self.trace {
            Some(trace) => Source::Trace(Box::new(
                TraceJobs::open(trace, self.start)
                    .map_err(|error| driver.fail(Violation::Trace { error }))?,
            )),
            None => Source::Generated(Box::new(self.workload.arrivals(self.seed, self.start))),
        };
        let source = driver.drive(&mut scheduler, source, progress).await?;
        let mut report = driver.report;
        if let Source::Trace(jobs) = &source {
            report.trace = Some(jobs.summary());
        }
        report.queue_wait = driver.waits.percentiles();
        report.wall = wall.elapsed();
        report.digest = format!("{:032x}", driver.trace.digest128());
        Ok(report)
    }
}

impl Driver<'_> {
    async fn drive<S: Scheduler>(
        &mut self,
        scheduler: &mut S,
        mut source: Source,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Source, RunFailure> {
        let mut pending = source
            .next_job()
            .map_err(|error| self.fail(Violation::Trace { error }))?;
        // Outage edges in time order: (when, deployment, starts?).
        let mut edges: Vec<(SystemTime, usize, bool, usize)> = Vec::new();
        for (k, o) in self.scenario.outages.iter().enumerate() {
            edges.push((self.scenario.start + o.at, o.deployment, true, k));
            edges.push((
                self.scenario.start + o.at + o.lasting,
                o.deployment,
                false,
                k,
            ));
        }
        edges.sort_by_key(|e| (e.0, !e.2, e.3));
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
                self.clock.next_deadline(),
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
            while let Some(&(at, deployment, starts, _)) = edges.get(edge) {
                if at > next {
                    break;
                }
                edge += 1;
                let fault = starts.then(|| {
                    Error::inventory_unavailable(format!(
                        "scheduled outage of deployment {}",
                        self.scenario.deployments[deployment].name
                    ))
                });
                self.faulted[deployment].fail_inventory(fault);
                if starts {
                    self.record(Event::OutageStart, 0, deployment);
                } else {
                    self.report.outages_survived += 1;
                    self.record(Event::OutageEnd, 0, deployment);
                }
            }
            while pending.as_ref().is_some_and(|j| j.submitted_at <= next) {
                let Some(job) = pending.take() else { break };
                pending = source
                    .next_job()
                    .map_err(|error| self.fail(Violation::Trace { error }))?;
                last_arrival = job.submitted_at;
                let id = job.id;
                self.report.submitted += 1;
                self.jobs.insert(
                    id,
                    JobState::Queued {
                        since: job.submitted_at,
                    },
                );
                self.record(Event::Submit, id, 0);
                if !scheduler.submit(job).await {
                    self.jobs.remove(&id);
                    self.report.refused += 1;
                    self.record(Event::Refuse, id, 0);
                }
            }
            let step = scheduler.tick().await;
            self.check(&step, scheduler).await?;
            if self.step.is_multiple_of(4096) {
                progress(Progress {
                    done: self.report.finished + self.report.refused,
                    total: total(self.report.submitted),
                });
            }
        }
        let submitted = self.report.submitted;
        progress(Progress {
            done: self.report.finished + self.report.refused,
            total: submitted,
        });
        self.report.modelled = self.elapsed();
        let done = self.report.finished + self.report.refused;
        if done != submitted || scheduler.queued() > 0 || self.total_held > 0 {
            return Err(self.fail(Violation::Unfinished {
                jobs: submitted - done,
                why: "the scheduler stopped asking for time with work outstanding".to_owned(),
            }));
        }
        if !self.host.is_empty() {
            return Err(self.fail(Violation::Leaked {
                instances: self.host.len(),
            }));
        }
        Ok(source)
    }

    /// Checks one step against the harness's books and the host's ground truth.
    async fn check<S: Scheduler>(&mut self, step: &Step, scheduler: &S) -> Result<(), RunFailure> {
        let now = self.clock.now();
        for &d in &step.inventory_errors {
            self.report.inventory_errors += 1;
            self.record(Event::InventoryError, 0, d);
        }
        for freed in &step.freed {
            let state = self.jobs.get(&freed.job).copied();
            if state
                != Some(JobState::Held {
                    deployment: freed.deployment,
                })
            {
                return Err(self.fail(Violation::Inconsistent {
                    what: format!(
                        "freed job {} on deployment {} but it was {state:?}",
                        freed.job, freed.deployment
                    ),
                }));
            }
            let oracle = &self.oracle[freed.deployment];
            let running =
                matches!(oracle.find(&freed.name).await, Ok(Some(i)) if i.state.is_running());
            if running {
                return Err(self.fail(Violation::FreedWhileRunning {
                    job: freed.job,
                    deployment: self.scenario.deployments[freed.deployment].name.clone(),
                    instance: freed.name.clone(),
                }));
            }
            self.jobs.remove(&freed.job);
            self.held[freed.deployment] -= 1;
            self.total_held -= 1;
            self.report.finished += 1;
            let event = match freed.reason {
                FreeReason::Stopped => Event::FreeStopped,
                FreeReason::Absent => {
                    self.report.vanished += 1;
                    Event::FreeAbsent
                }
            };
            self.record(event, freed.job, freed.deployment);
        }
        for launched in &step.launched {
            let state = self.jobs.get(&launched.job).copied();
            let Some(JobState::Queued { since }) = state else {
                return Err(self.fail(Violation::Inconsistent {
                    what: format!("launched job {} but it was {state:?}", launched.job),
                }));
            };
            if launched.deployment >= self.held.len() {
                return Err(self.fail(Violation::Inconsistent {
                    what: format!(
                        "launched on deployment {} of {}",
                        launched.deployment,
                        self.held.len()
                    ),
                }));
            }
            self.jobs.insert(
                launched.job,
                JobState::Held {
                    deployment: launched.deployment,
                },
            );
            self.held[launched.deployment] += 1;
            self.total_held += 1;
            self.waits
                .record(now.duration_since(since).unwrap_or_default());
            self.record(Event::Launch, launched.job, launched.deployment);
        }
        for (d, spec) in self.scenario.deployments.iter().enumerate() {
            let held = self.held[d].max(self.host.instances_of(&spec.name));
            if held > spec.capacity {
                return Err(self.fail(Violation::CapacityExceeded {
                    deployment: spec.name.clone(),
                    held,
                    capacity: spec.capacity,
                }));
            }
        }
        if scheduler.leases() != self.held {
            return Err(self.fail(Violation::Inconsistent {
                what: format!(
                    "the scheduler says it holds {:?} leases, its reports add up to {:?}",
                    scheduler.leases(),
                    self.held
                ),
            }));
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

    fn elapsed(&self) -> Duration {
        self.clock
            .now()
            .duration_since(self.scenario.start)
            .unwrap_or_default()
    }

    fn record(&mut self, event: Event, job: JobId, deployment: usize) {
        let at = self.elapsed().as_nanos() as u64;
        let mut bytes = [0u8; 25];
        bytes[0] = event as u8;
        bytes[1..9].copy_from_slice(&at.to_le_bytes());
        bytes[9..17].copy_from_slice(&job.to_le_bytes());
        bytes[17..25].copy_from_slice(&(deployment as u64).to_le_bytes());
        self.trace.update(&bytes);
    }

    fn fail(&self, violation: Violation) -> RunFailure {
        RunFailure {
            seed: self.scenario.seed,
            violation,
            at: self.elapsed(),
            step: self.step,
            replay: self.scenario.replay_command(),
        }
    }
}
