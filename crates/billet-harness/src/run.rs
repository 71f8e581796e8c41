//! The driver: moves a [`ManualClock`] from event to event, feeds the
//! scheduler, and checks the invariants after every step.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_provider::{Error, InstanceId, Provider, Spec, TrustClass};
use billet_simulated::{Host, SimulatedProvider};
use rustc_hash::FxHashMap;
use xxhash_rust::xxh3::Xxh3;

use crate::report::{Human, Outcomes, Report, Sample, WaitHistogram};
use crate::scenario::Scenario;
use crate::scheduler::{
    Change, DeploymentHandle, FreeReason, OrphanFate, PoolHandle, Scheduler, SchedulerContext,
    Step, Tap,
};
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
    /// A pool held more leases than its capacity (H10).
    PoolOverCapacity {
        /// The deployment's name.
        deployment: String,
        /// The pool's configured name.
        pool: String,
        /// How many leases it held.
        held: u32,
        /// Its capacity.
        capacity: u32,
    },
    /// An orphan was still on the host past its grace period and one
    /// reconcile interval after it was first seen (the time its deployment's
    /// inventory could not be read added) (H10, B7).
    OrphanOutlived(Box<Outlived>),
    /// A job ended, or was said to, when it was not in flight: it had ended
    /// already (a second outcome) or was never accepted (H10, B9).
    NotInFlight {
        /// The job.
        job: JobId,
        /// What the scheduler reported of it.
        what: String,
    },
    /// A job accepted by a deployment was lost across a restart: the new
    /// scheduler refused it when the durable store handed it over (H10, B8).
    LostAtRestart {
        /// The job.
        job: JobId,
        /// The deployment's name.
        deployment: String,
        /// Why the new scheduler refused it.
        why: String,
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
            Violation::PoolOverCapacity {
                deployment,
                pool,
                held,
                capacity,
            } => write!(
                f,
                "pool over capacity: pool {pool} of deployment {deployment} held {held} leases, capacity {capacity}"
            ),
            Violation::OrphanOutlived(o) => write!(
                f,
                "orphan {} of deployment {}, first seen at +{}, was still on the host after +{}",
                o.instance,
                o.deployment,
                Human(o.seen),
                Human(o.deadline)
            ),
            Violation::NotInFlight { job, what } => {
                write!(
                    f,
                    "job {job} is not in flight (it ended already, or was never accepted), but {what}"
                )
            }
            Violation::LostAtRestart {
                job,
                deployment,
                why,
            } => write!(
                f,
                "job {job}, accepted by deployment {deployment}, was lost at its restart: {why}"
            ),
            Violation::InvalidScenario { reason } => write!(f, "invalid scenario: {reason}"),
            Violation::Trace { error } => write!(f, "the trace cannot be replayed: {error}"),
        }
    }
}

/// An orphan that outlived its grace period: [`Violation::OrphanOutlived`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outlived {
    /// The deployment's name.
    pub deployment: String,
    /// The instance's name.
    pub instance: String,
    /// When it was first seen, as modelled time since the start.
    pub seen: Duration,
    /// When it should have been gone by, as modelled time since the start.
    pub deadline: Duration,
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
    Queued {
        since: SystemTime,
    },
    Held {
        deployment: usize,
        pool: usize,
    },
    /// Held by a deployment's scheduler that was restarted: its instance is
    /// on the host, no scheduler counts it until the new one adopts it.
    Limbo {
        deployment: usize,
    },
}

/// An orphan the harness watches, from the first time a scheduler saw it.
#[derive(Debug, Clone)]
struct Watched {
    deployment: usize,
    name: String,
    seen: SystemTime,
    deadline: SystemTime,
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
    Adopted = 9,
    FreeTimedOut = 10,
    FreeCancelled = 11,
    FreeRefused = 12,
    FreeInvalid = 13,
    EndedQueued = 14,
    OrphanSeen = 15,
    OrphanCollected = 16,
    Restart = 17,
    RestartUnsupported = 18,
    Stray = 19,
    FreeGaveUp = 20,
}

struct Driver<'a> {
    scenario: &'a Scenario,
    clock: ManualClock,
    host: Host,
    /// Each deployment's providers, one per pool, as the harness holds them
    /// (to inject outages).
    faulted: Vec<Vec<Arc<SimulatedProvider>>>,
    /// One provider per deployment over the same host, never faulted: ground truth.
    oracle: Vec<SimulatedProvider>,
    /// Jobs not yet done, by id: done jobs leave, so this holds what is in
    /// flight (queued or held), never the whole workload (T2).
    jobs: FxHashMap<JobId, JobState>,
    /// Leases held, by deployment.
    held: Vec<usize>,
    /// Leases held, by deployment and pool.
    pool_held: Vec<Vec<usize>>,
    /// Each pool's capacity, by deployment and pool.
    pool_caps: Vec<Vec<usize>>,
    /// Each pool's name, by deployment and pool.
    pool_names: Vec<Vec<String>>,
    /// Jobs in limbo (held by a restarted scheduler, not yet adopted), by deployment.
    limbo: Vec<usize>,
    total_held: usize,
    /// Strays on the host, by instance id: their deployment.
    strays: FxHashMap<InstanceId, usize>,
    /// Strays on the host, by deployment.
    strays_of: Vec<usize>,
    /// Orphans seen and not yet collected, by deployment and instance id.
    watched: std::collections::BTreeMap<(usize, InstanceId), Watched>,
    /// The scheduler's reconcile interval, for the orphans' deadlines.
    reconcile_every: Duration,
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

    /// [`Scenario::run`], telling `tap` of every job as it is submitted and
    /// of every step's changes as the scheduler reports them: how an observer
    /// records what a scheduler did without wrapping it.
    pub fn run_tapped<S, F>(&self, build: F, tap: &mut dyn Tap) -> Result<Report, RunFailure>
    where
        S: Scheduler,
        F: FnOnce(SchedulerContext) -> S,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|err| self.invalid(format!("cannot start a runtime: {err}")))?;
        runtime.block_on(self.run_with(build, &mut |_| {}, tap))
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
        self.run_with(build, progress, &mut ()).await
    }

    async fn run_with<S, F>(
        &self,
        build: F,
        progress: &mut dyn FnMut(Progress),
        tap: &mut dyn Tap,
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
        let configs = self.configs().map_err(|reason| self.invalid(reason))?;
        let mut faulted = Vec::new();
        let mut oracle = Vec::new();
        let mut handles = Vec::new();
        let mut pool_caps = Vec::new();
        let mut pool_names = Vec::new();
        for (index, (spec, config)) in self.deployments.iter().zip(configs).enumerate() {
            let build_one = || {
                SimulatedProvider::builder(spec.name.clone())
                    .host(host.clone())
                    .clock(Arc::clone(&shared_clock))
                    .build()
                    .map_err(|err| self.invalid(err.to_string()))
            };
            oracle.push(build_one()?);
            let capacities = self.layout.split(spec.capacity);
            let mut providers = Vec::new();
            let mut pools = Vec::new();
            for (layout, &capacity) in self.layout.pools.iter().zip(&capacities) {
                let provider = Arc::new(build_one()?);
                let mut seen: Arc<dyn Provider> = provider.clone();
                if let Some(wrap) = &self.wrap {
                    seen = wrap(index, seen);
                }
                providers.push(provider);
                pools.push(PoolHandle {
                    name: layout.name.clone(),
                    kind: layout.kind,
                    capacity,
                    provider: seen,
                });
            }
            faulted.push(providers);
            pool_caps.push(capacities);
            pool_names.push(self.layout.pools.iter().map(|p| p.name.clone()).collect());
            handles.push(DeploymentHandle {
                name: spec.name.clone(),
                provider: Arc::clone(&pools[0].provider),
                capacity: spec.capacity,
                pools,
                config,
            });
        }
        let mut scheduler = build(SchedulerContext {
            deployments: handles,
            clock: Arc::clone(&shared_clock),
            settings: billet_scheduler::Settings {
                reconcile_every: self.reconcile_every,
                orphan_grace: self.orphan_grace,
                ..billet_scheduler::Settings::default()
            },
        });
        if !self.strays.is_empty() && !scheduler.collects_orphans() {
            return Err(self.invalid(format!(
                "the scenario leaves {} strays on the host, and the {} scheduler does not collect orphans",
                self.strays.len(),
                scheduler.name().unwrap_or("custom")
            )));
        }
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
            pool_held: pool_caps.iter().map(|caps| vec![0; caps.len()]).collect(),
            pool_caps,
            pool_names,
            limbo: vec![0; self.deployments.len()],
            total_held: 0,
            strays: FxHashMap::default(),
            strays_of: vec![0; self.deployments.len()],
            watched: std::collections::BTreeMap::new(),
            reconcile_every: self.reconcile_every,
            report: Report {
                seed: self.seed,
                scheduler: scheduler.name().unwrap_or("custom").to_owned(),
                layout: self.layout.describe(
                    &self
                        .deployments
                        .iter()
                        .map(|d| d.capacity)
                        .collect::<Vec<_>>(),
                ),
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
                outcomes: Outcomes::default(),
                restarts: 0,
                restarts_unsupported: 0,
                handed_over: 0,
                adopted: 0,
                strays: 0,
                orphans_seen: 0,
                orphans_collected: 0,
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
        let source = driver.drive(&mut scheduler, source, progress, tap).await?;
        driver.report.scheduler = scheduler.name().unwrap_or("custom").to_owned();
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
        tap: &mut dyn Tap,
    ) -> Result<Source, RunFailure> {
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
                self.record(Event::Submit, id, 0, 0);
                tap.submitted(&job);
                if !scheduler.submit(job).await {
                    self.jobs.remove(&id);
                    self.report.refused += 1;
                    self.record(Event::Refuse, id, 0, 0);
                }
            }
            let step = scheduler.tick().await;
            tap.stepped(&step, self.clock.now());
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
    fn outage(&mut self, deployment: usize, starts: bool) {
        let fault = starts.then(|| {
            Error::inventory_unavailable(format!(
                "scheduled outage of deployment {}",
                self.scenario.deployments[deployment].name
            ))
        });
        for provider in &self.faulted[deployment] {
            provider.fail_inventory(fault.clone());
        }
        if starts {
            self.record(Event::OutageStart, 0, deployment, 0);
        } else {
            self.report.outages_survived += 1;
            self.record(Event::OutageEnd, 0, deployment, 0);
        }
    }

    /// Leaves stray number `k` on the host under `deployment`'s owner.
    async fn stray(&mut self, deployment: usize, k: usize) -> Result<(), RunFailure> {
        let stray = self.scenario.strays[k];
        let spec = Spec::new(
            format!("stray-{k}"),
            billet_simulated::run_for(stray.lasting),
        )
        .with_trust(TrustClass::Trusted);
        match self.faulted[deployment][0].launch(spec).await {
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
    fn orphan_deadline(&self, deployment: usize, seen: SystemTime) -> SystemTime {
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

    fn not_in_flight(&self, job: JobId, what: String) -> RunFailure {
        self.fail(Violation::NotInFlight { job, what })
    }

    /// Checks one step against the harness's books and the host's ground truth.
    async fn check<S: Scheduler>(
        &mut self,
        step: &Step,
        scheduler: &mut S,
    ) -> Result<(), RunFailure> {
        let now = self.clock.now();
        let deployments = self.held.len();
        for change in &step.changes {
            match change {
                Change::InventoryError { deployment, pool } => {
                    self.report.inventory_errors += 1;
                    self.record(Event::InventoryError, 0, *deployment, *pool);
                }
                Change::Placed(placed) => {
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
                Change::Launched(launched) => {
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
                }
                Change::Adopted(adopted) => {
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
                Change::Freed(freed) => {
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
                    self.held[freed.deployment] -= 1;
                    self.pool_held[freed.deployment][freed.pool] -= 1;
                    self.total_held -= 1;
                    self.report.finished += 1;
                    let event = self.ended(freed.reason);
                    self.record(event, freed.job, freed.deployment, freed.pool);
                }
                Change::Ended {
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
                    self.report.finished += 1;
                    self.ended(*reason);
                    self.record(Event::EndedQueued, *job, *deployment, 0);
                }
                Change::Orphan(orphan) => {
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
                Change::Restarted {
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
                Change::Lost {
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
        if scheduler.leases() != self.held {
            return Err(self.fail(Violation::Inconsistent {
                what: format!(
                    "the scheduler says it holds {:?} leases, its reports add up to {:?}",
                    scheduler.leases(),
                    self.held
                ),
            }));
        }
        if !step.is_empty() && scheduler.pool_leases() != self.pool_held {
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
    fn take(&mut self, job: JobId, deployment: usize, pool: usize) -> Result<(), RunFailure> {
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
    fn ended(&mut self, reason: FreeReason) -> Event {
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

    fn elapsed(&self) -> Duration {
        self.clock
            .now()
            .duration_since(self.scenario.start)
            .unwrap_or_default()
    }

    /// Hashes one event into the digest. The pool goes into the high half of
    /// the deployment's word, so a run of one pool per deployment hashes as
    /// the harness always did.
    fn record(&mut self, event: Event, job: JobId, deployment: usize, pool: usize) {
        let at = self.elapsed().as_nanos() as u64;
        let place = deployment as u64 | ((pool as u64) << 32);
        let mut bytes = [0u8; 25];
        bytes[0] = event as u8;
        bytes[1..9].copy_from_slice(&at.to_le_bytes());
        bytes[9..17].copy_from_slice(&job.to_le_bytes());
        bytes[17..25].copy_from_slice(&place.to_le_bytes());
        self.trace.update(&bytes);
    }

    fn fail(&self, violation: Violation) -> RunFailure {
        RunFailure {
            seed: self.scenario.seed,
            violation,
            at: self.elapsed(),
            step: self.step,
            replay: replay_for(&self.scenario.replay_command(), &self.report.scheduler),
        }
    }
}

/// The replay command, naming the scheduler that ran: a fleet's command names
/// the one its [`Fleet`](crate::scenario::Fleet) was made for, which a run
/// through the other one corrects.
fn replay_for(command: &str, scheduler: &str) -> String {
    for which in ["production", "reference"] {
        let flag = format!("--scheduler {which}");
        if which != scheduler && command.contains(&flag) {
            return command.replace(&flag, &format!("--scheduler {scheduler}"));
        }
    }
    command.to_owned()
}
