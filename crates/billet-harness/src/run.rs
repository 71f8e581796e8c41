//! A run of a scenario: a play that moves a [`ManualClock`] from event to
//! event, feeds the scheduler, and checks the invariants after every step.
//!
//! Here: the entry points ([`Scenario::run`] and its kin) that build the
//! host, the deployments and the scheduler, and the play's state. The loop
//! is in `run/events.rs`, the invariants in `run/checks.rs`, and what a run
//! answers when one breaks in `run/failure.rs`.

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
    DeploymentHandle, FleetChange, FreeReason, OrphanFate, PoolHandle, Scheduler, SchedulerContext,
    Step, Tap,
};
use crate::trace::{TraceError, TraceJobs};
use crate::workload::{Arrivals, Job, JobId};

mod checks;
mod events;
mod failure;

pub use failure::{Outlived, RunFailure, Violation};

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

/// One play of a scenario through one scheduler: the clock, the host, the
/// deployments, and what the checks keep.
struct Play<'a> {
    scenario: &'a Scenario,
    clock: ManualClock,
    host: Host,
    /// Each deployment's provider, serving all its pools, as the harness
    /// holds it (to inject outages).
    faulted: Vec<Arc<SimulatedProvider>>,
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
    /// Each job in flight's run time, from its arrival until it is done.
    run_times: FxHashMap<JobId, Duration>,
    /// When each launched job's instance stops (its launch plus its run
    /// time), until its lease is freed.
    stops: FxHashMap<JobId, SystemTime>,
    /// How long after its instance stopped each finished job's lease was
    /// freed, in modelled time (B12).
    seen_after: WaitHistogram,
    /// Their sum: lease time idle after the jobs ended.
    idle_after: Duration,
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
            .enable_all()
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
            .enable_all()
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
            // One provider serves every pool of the deployment, as one
            // daemon serves several pools: its inventory and its hints are
            // the owner's, whichever pool asks, so the scheduler reads one
            // hint stream for them all (issue 49).
            let provider = Arc::new(build_one()?);
            let mut pools = Vec::new();
            for (layout, &capacity) in self.layout.pools.iter().zip(&capacities) {
                let mut seen: Arc<dyn Provider> = provider.clone();
                if let Some(wrap) = &self.wrap {
                    seen = wrap(index, seen);
                }
                pools.push(PoolHandle {
                    name: layout.name.clone(),
                    kind: layout.kind,
                    capacity,
                    provider: seen,
                });
            }
            let yaml = config
                .is_some()
                .then(|| self.layout.yaml(&spec.name, &capacities));
            faulted.push(provider);
            pool_caps.push(capacities);
            pool_names.push(self.layout.pools.iter().map(|p| p.name.clone()).collect());
            handles.push(DeploymentHandle {
                name: spec.name.clone(),
                provider: Arc::clone(&pools[0].provider),
                capacity: spec.capacity,
                pools,
                config,
                yaml,
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
            hints: self.hints,
            host: host.clone(),
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
        let mut play = Play {
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
                extra: Vec::new(),
                hints: false,
                end_seen: Default::default(),
                idle_after_end: Duration::ZERO,
                steps: 0,
                digest: String::new(),
                series: Vec::new(),
                trace: None,
            },
            waits: WaitHistogram::new(),
            run_times: FxHashMap::default(),
            stops: FxHashMap::default(),
            seen_after: WaitHistogram::new(),
            idle_after: Duration::ZERO,
            trace: Xxh3::new(),
            step: 0,
            next_sample: Duration::ZERO,
            sample_every: (expected_span / (self.chart_points.max(1) as u32))
                .max(Duration::from_nanos(1)),
        };
        let source = match &self.trace {
            Some(trace) => Source::Trace(Box::new(
                TraceJobs::open(trace, self.start)
                    .map_err(|error| play.fail(Violation::Trace { error }))?,
            )),
            None => Source::Generated(Box::new(self.workload.arrivals(self.seed, self.start))),
        };
        let source = play.play(&mut scheduler, source, progress, tap).await?;
        play.report.scheduler = scheduler.name().unwrap_or("custom").to_owned();
        let mut report = play.report;
        if let Source::Trace(jobs) = &source {
            report.trace = Some(jobs.summary());
        }
        report.queue_wait = play.waits.percentiles();
        report.end_seen = play.seen_after.percentiles();
        report.idle_after_end = play.idle_after;
        report.hints = scheduler.reads_hints();
        report.wall = wall.elapsed();
        report.digest = format!("{:032x}", play.trace.digest128());
        Ok(report)
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
