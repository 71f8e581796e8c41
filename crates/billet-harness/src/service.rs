//! [`ServiceScheduler`]: the whole of `billet serve` driven through the
//! harness's [`Scheduler`] trait (H13).
//!
//! Each deployment of a scenario is a [`billet::Service`] in this process:
//! its listener on `127.0.0.1:0`, its store ([`StoreKind`]: SQLite in a
//! temporary directory as `serve` keeps it, or in memory), its engine over
//! the deployment's simulated pools injected under the configured pool
//! names, all over the one shared host and the one
//! [`ManualClock`](billet_clock::ManualClock).
//!
//! * **Jobs go over HTTP**: `POST /v1/jobs` on keep-alive connections, the
//!   jobs of one instant sent together ([`Submission`]); at the end, every
//!   job is read back page by page (`GET /v1/jobs`) and must be there once,
//!   ended as the host and the decisions said.
//! * **The clock moves only when every service is quiescent**: a tick waits
//!   for [`Service::quiescent`] at the clock's time, so nothing a service
//!   would do before its next wake is left undone when the harness moves on
//!   (never a sleep, never a poll of wall time). A service that is not
//!   quiescent within [`QUIESCENT_BOUND`] of wall time breaks the run.
//! * **What a service decided** reaches the harness through the engine's
//!   decision tap, in order, and becomes the [`Step`] the harness checks
//!   against the host, as the production scheduler's decisions do. The
//!   leases and queue the harness compares with its books are the engine's
//!   own (`GET /v1/pools`'s view), not counted from those decisions.
//! * **A restart is a crash**: [`Service::abort`], then a new service on the
//!   same store (reopened, as `serve` would after `kill -9`) and the same
//!   host. Only a durable store survives one; with the store in memory a
//!   restart is unsupported, and the run says so.
//! * **Which deployment takes a job**: as for the production scheduler, the
//!   one with the most room (capacity less leases and queue), ties to the
//!   first; a job the chosen deployment's routing refuses is refused.
//!
//! What it keeps is bounded by the jobs not yet ended: the ids of those, and
//! the decisions of one step. The outcomes it checks at the end are one byte
//! per job.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use billet::engine::{Bounds, DecisionTap, PoolView};
use billet::http::JobLimits;
use billet::{Limits, Service, Store};
use billet_clock::Clock;
use billet_scheduler::{Core, Decision, Identity, JobId as CoreJobId, Pools};
use futures::StreamExt;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

mod client;
mod github;
mod http;

use client::Client;
pub use github::Intake;
use http::{Page, Posted, body, post};

use crate::production::change_of;
use crate::scheduler::{
    FleetChange, FreeReason, RestartUnsupported, Scheduler, SchedulerContext, Step,
};
use crate::workload::{Job, JobId};

/// The most wall time a service may take to become quiescent, or to
/// answer one request, before the run fails saying so.
pub const QUIESCENT_BOUND: Duration = Duration::from_secs(60);

/// The most requests one deployment has in flight at once (its intake
/// holds thousands: this stays well inside it).
pub const IN_FLIGHT: usize = 64;

/// The longest request latency the report tells apart, in microseconds (an
/// hour; a longer one counts as an hour).
const LATENCY_MAX_MICROS: u64 = 3_600_000_000;

/// The token every service of a run is started with.
const TOKEN: &str = "billet-harness-service-token-0123456789";
/// The `Authorization` header every request carries.
const BEARER: &str = "Bearer billet-harness-service-token-0123456789";

/// How long a job may run: longer than any scenario or trace, since the
/// harness's jobs have no timeout of their own.
const NO_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// Where each service keeps its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreKind {
    /// SQLite in a temporary directory, as `billet serve` keeps it: every
    /// commit a transaction with its `fsync`. Survives a restart.
    #[default]
    Durable,
    /// In memory, as the accept bench uses it: nothing survives a restart.
    Memory,
}

/// How the jobs of one instant go to a deployment's service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Submission {
    /// All at once, at most [`IN_FLIGHT`] in flight: the service takes them
    /// in whatever order they reach it.
    #[default]
    Concurrent,
    /// One after another, each answered before the next is sent: the order
    /// of arrival is the order of acceptance, so that a run is the same as
    /// the production scheduler's job for job (the differential test).
    /// Deployments still receive theirs at the same time.
    Ordered,
}

/// What a [`ServiceScheduler`] is built with.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ServiceOptions {
    /// Where the services keep their jobs.
    pub store: StoreKind,
    /// How the jobs of one instant are sent.
    pub submission: Submission,
    /// How jobs reach the services: `POST /v1/jobs`, or GitHub's
    /// deliveries from a simulated GitHub (H14).
    pub intake: Intake,
}

/// What one restart recovered, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recovery {
    /// The deployment index.
    pub deployment: usize,
    /// Unended jobs the reopened store handed to the new service.
    pub resumed: usize,
    /// Jobs whose instance the new service adopted from an inventory.
    pub adopted: usize,
}

/// The whole service, one per deployment. See the [module docs](self).
#[derive(Debug)]
pub struct ServiceScheduler {
    clock: Arc<dyn Clock>,
    options: ServiceOptions,
    client: Client,
    deployments: Vec<Option<Deployment>>,
    pool_counts: Vec<usize>,
    changes: Vec<FleetChange>,
    /// The first thing that went wrong, if anything did.
    broken: Option<String>,
    /// Requests sent, and their wall-time latency in microseconds.
    requests: u64,
    latency: Histogram<u64>,
    /// Jobs accepted by the services.
    accepted: u64,
    /// Jobs launched twice (across restarts): must stay 0.
    twice: u64,
    recoveries: Vec<Recovery>,
    /// The deployments until [`Scheduler::start`] starts their services.
    pending: Option<Vec<Option<Deployment>>>,
}

/// One deployment's service and what the harness knows of it.
struct Deployment {
    pools: Pools,
    pool_names: Vec<String>,
    capacity: usize,
    /// The store's directory (durable stores only); removed with the run.
    dir: Option<tempfile::TempDir>,
    service: Option<Service>,
    base: String,
    /// `POST /v1/jobs`'s address, parsed once per start.
    jobs_url: Option<hyper::Uri>,
    identity: Option<Identity>,
    /// Decisions told by the engine's tap since the last tick.
    tapped: Arc<Mutex<Vec<Decision>>>,
    /// The harness's job for each job of the service not yet ended.
    ids: FxHashMap<u64, JobId>,
    /// The service's jobs launched so far (ended ones included): a second
    /// launch of one is a job run twice.
    launched: FxHashSet<u64>,
    /// How each ended job ended, by the service's id: what the end's
    /// read-back over HTTP must show.
    ended: FxHashMap<u64, Ending>,
    /// Jobs its service accepted.
    accepted: u64,
    /// Asked whether the deployment's routing takes a job, before it is
    /// sent (the dispatcher must know, as it does for the production one).
    router: Core,
    /// The engine's view after the last tick.
    view: Vec<PoolView>,
    /// Commits of the services before the last restart.
    commits_before: u64,
    /// The deployment's GitHub, under `--intake github` (H14).
    github: Option<github::Side>,
    /// The configuration's text, for the `github:` section added to it.
    yaml: String,
    /// The scheduler's settings the pools are built with.
    settings: billet_scheduler::Settings,
}

impl std::fmt::Debug for Deployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployment")
            .field("base", &self.base)
            .field("capacity", &self.capacity)
            .field("in_flight", &self.ids.len())
            .finish_non_exhaustive()
    }
}

/// How a job ended, as the API says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Finished,
    Failed,
    Cancelled,
}

impl Ending {
    fn of(reason: FreeReason) -> Ending {
        match reason {
            FreeReason::Stopped => Ending::Finished,
            FreeReason::Cancelled => Ending::Cancelled,
            FreeReason::Absent
            | FreeReason::TimedOut
            | FreeReason::Refused
            | FreeReason::Invalid
            | FreeReason::GaveUp => Ending::Failed,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Ending::Finished => "finished",
            Ending::Failed => "failed",
            Ending::Cancelled => "cancelled",
        }
    }
}

impl Deployment {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Leases the engine holds, and jobs it has queued.
    fn held(&self) -> usize {
        self.view.iter().map(|p| p.held as usize).sum()
    }

    fn queued(&self) -> usize {
        self.view.iter().map(|p| p.queued as usize).sum()
    }

    /// What takes room: the leases held and the jobs waiting for one (under
    /// `--intake github`, jobs runners took and jobs queued at GitHub).
    fn load(&self) -> usize {
        match &self.github {
            Some(side) => side.busy().iter().sum::<usize>() + side.sim.queued(),
            None => self.held() + self.queued(),
        }
    }

    /// The harness's leases: the engine's, or under `--intake github` those
    /// of runners that took a job (H14).
    fn leases(&self) -> usize {
        match &self.github {
            Some(side) => side.busy().iter().sum(),
            None => self.held(),
        }
    }

    fn commits(&self) -> u64 {
        self.commits_before + self.service.as_ref().map_or(0, Service::commits)
    }
}

/// Why a service could not be started or reached.
fn broke(what: impl std::fmt::Display) -> String {
    what.to_string()
}

impl ServiceScheduler {
    /// A service per deployment of the context, each started (on the run's
    /// runtime) when the run starts ([`Scheduler::start`]), reading its
    /// first inventory before it answers.
    pub fn new(ctx: SchedulerContext, options: ServiceOptions) -> Self {
        let mut scheduler = ServiceScheduler {
            clock: Arc::clone(&ctx.clock),
            options,
            client: Client::new(BEARER, IN_FLIGHT, QUIESCENT_BOUND),
            deployments: Vec::new(),
            pool_counts: ctx.deployments.iter().map(|d| d.pools.len()).collect(),
            changes: Vec::new(),
            broken: None,
            requests: 0,
            latency: Histogram::new_with_bounds(1, LATENCY_MAX_MICROS, 3)
                .expect("bounds of 1 us to an hour at 3 significant figures are valid"),
            accepted: 0,
            twice: 0,
            recoveries: Vec::new(),
            pending: None,
        };
        match scheduler.build(ctx) {
            Ok(deployments) => scheduler.pending = Some(deployments),
            Err(why) => scheduler.broken = Some(why),
        }
        scheduler
    }

    /// Each deployment's pools and store, not yet started.
    fn build(&mut self, ctx: SchedulerContext) -> Result<Vec<Option<Deployment>>, String> {
        let mut deployments = Vec::with_capacity(ctx.deployments.len());
        for handle in ctx.deployments {
            let Some(config) = handle.config else {
                deployments.push(None);
                continue;
            };
            let github = match self.options.intake {
                Intake::Http => None,
                Intake::Github(faults) => Some(github::Side::new(
                    &handle.name,
                    ctx.host.clone(),
                    faults,
                    handle.pools.iter().map(|p| p.name.clone()).collect(),
                    handle
                        .pools
                        .iter()
                        .map(|p| Arc::clone(&p.provider))
                        .collect(),
                    ctx.settings.reconcile_every,
                )?),
            };
            let mut builder = Pools::builder(config).settings(ctx.settings);
            for pool in handle.pools {
                builder = builder.provider(pool.name, pool.provider);
            }
            let pools = builder.build().map_err(broke)?;
            let pool_names = pools
                .config()
                .providers()
                .iter()
                .map(|p| p.name().to_owned())
                .collect();
            let dir = match (self.options.store, &github) {
                // Only its owner may enter a state directory (L16);
                // `tempfile`'s follow the umask. GitHub's deliveries are
                // kept there whatever the store.
                (StoreKind::Durable, _) | (_, Some(_)) => Some(
                    tempfile::Builder::new()
                        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                        .tempdir()
                        .map_err(broke)?,
                ),
                (StoreKind::Memory, None) => None,
            };
            let router = pools.core(ctx.clock.now());
            deployments.push(Some(Deployment {
                pools,
                pool_names,
                capacity: handle.capacity,
                dir,
                service: None,
                base: String::new(),
                jobs_url: None,
                identity: None,
                tapped: Arc::default(),
                ids: FxHashMap::default(),
                launched: FxHashSet::default(),
                ended: FxHashMap::default(),
                accepted: 0,
                router,
                view: Vec::new(),
                commits_before: 0,
                github,
                yaml: handle.yaml.unwrap_or_default(),
                settings: ctx.settings,
            }));
        }
        Ok(deployments)
    }

    /// Waits for every service to be quiescent at the clock's time, then
    /// takes what each decided and how its pools stand.
    async fn settle(&mut self) {
        let now = self.clock.now();
        for index in 0..self.deployments.len() {
            let Some(d) = self.deployments[index].as_mut() else {
                continue;
            };
            let Some(service) = &d.service else { continue };
            if d.github.is_some() {
                if let Err(why) = self.settle_github(index, now).await {
                    self.broken.get_or_insert(why);
                }
                continue;
            }
            if let Err(last) = service.quiescent(now, QUIESCENT_BOUND).await {
                self.broken.get_or_insert(format!(
                    "deployment {index}'s service was not quiescent at {now:?} within {QUIESCENT_BOUND:?} (it last said {last:?})"
                ));
                continue;
            }
            d.view = service.pools();
            let decisions = std::mem::take(&mut *d.tapped.lock());
            for decision in decisions {
                if let Err(what) = self.translate(index, decision) {
                    self.broken.get_or_insert(what);
                }
            }
        }
    }

    /// One decision of deployment `index`'s service as the harness's change.
    fn translate(&mut self, index: usize, decision: Decision) -> Result<(), String> {
        let Some(d) = self.deployments[index].as_mut() else {
            return Ok(());
        };
        let ours = match &decision {
            Decision::Placed { job, .. }
            | Decision::Launched { job, .. }
            | Decision::Adopted { job, .. }
            | Decision::Ended { job, .. } => Some(job.0),
            _ => None,
        };
        if let Some(id) = ours
            && !d.ids.contains_key(&id)
        {
            return Err(format!(
                "deployment {index}'s service decided {decision:?} for its job {id}, which it never accepted or which had ended"
            ));
        }
        match &decision {
            Decision::Launched { job, .. } if !d.launched.insert(job.0) => self.twice += 1,
            Decision::Adopted { .. } => {
                if let Some(last) = self
                    .recoveries
                    .iter_mut()
                    .rev()
                    .find(|r| r.deployment == index)
                {
                    last.adopted += 1;
                }
            }
            _ => {}
        }
        let (ids, names, identity) = (&d.ids, &d.pool_names, d.identity.as_ref());
        let change = change_of(
            decision,
            index,
            |job| ids.get(&job.0).copied().unwrap_or_default(),
            |job, pool| job.instance_name_in(identity, &names[pool.0]),
        );
        if let Some(change) = change {
            let ended = match &change {
                FleetChange::Freed(freed) => Some((freed.job, freed.reason)),
                FleetChange::Ended { job, reason, .. } => Some((*job, *reason)),
                _ => None,
            };
            if let (Some(id), Some((_, reason))) = (ours, ended) {
                d.ids.remove(&id);
                d.ended.insert(id, Ending::of(reason));
            }
            self.changes.push(change);
        }
        Ok(())
    }

    /// The deployment the dispatcher gives the next job: the most room,
    /// ties to the first, counting the jobs already given in this instant.
    fn choose(&self, given: &[usize]) -> Option<usize> {
        let mut best: Option<(usize, i128)> = None;
        for (index, deployment) in self.deployments.iter().enumerate() {
            let Some(d) = deployment else { continue };
            let room = d.capacity as i128 - d.load() as i128 - given[index] as i128;
            if best.is_none_or(|(_, most)| room > most) {
                best = Some((index, room));
            }
        }
        best.map(|(index, _)| index)
    }

    fn record(&mut self, took: Duration) {
        self.requests += 1;
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        self.latency.saturating_record(micros);
    }
}

/// Starts deployment `d`'s service on its store (opened again when it is
/// durable: the jobs it holds are handed to the new engine); answers how
/// many unended jobs the store handed over.
async fn launch(
    d: &mut Deployment,
    clock: &Arc<dyn Clock>,
    kind: StoreKind,
) -> Result<usize, String> {
    let (store, records) = match (&d.dir, kind) {
        (Some(dir), StoreKind::Durable) => Store::open(dir.path()).map_err(broke)?,
        _ => (Store::memory(), Vec::new()),
    };
    let resumed = records.len();
    d.identity = store.identity().cloned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(broke)?;
    let tapped = Arc::clone(&d.tapped);
    let tap: DecisionTap = Arc::new(move |decision: &Decision, _| {
        tapped.lock().push(decision.clone());
    });
    let limits = Limits {
        jobs: JobLimits {
            default_timeout: NO_TIMEOUT,
            max_timeout: NO_TIMEOUT,
        },
        engine: Bounds {
            retain: NO_TIMEOUT,
            // The engine would read hints on the clock's own sleepers, which
            // the harness does not move to (the service sleeps on the clock):
            // its ends are seen at the reconciles, as the production
            // scheduler's with `--hints off`.
            hints: false,
            // A scenario's workload is its own bound: every job it submits
            // is taken, as the production scheduler takes it (L19 is tested
            // in billet's own tests).
            max_queued: usize::MAX,
            // Under `--intake github` the intake reads the job table at
            // each tick: nothing is held back, so that at quiescence the
            // table shows every end the engine decided, in every run alike
            // (a held-back end would show after a wall-time wait).
            hold: if d.github.is_some() {
                Duration::ZERO
            } else {
                billet::engine::LAZY_COMMIT
            },
            ..Bounds::default()
        },
        // The harness is one peer for all it sends, as a proxy in front of
        // billet would be (L23 is tested in billet's own tests).
        max_connections_per_peer: billet::listener::DEFAULT_MAX_CONNECTIONS,
        ..Limits::default()
    };
    let intake = match (&mut d.github, &d.dir) {
        (Some(side), Some(dir)) => {
            let (pools, github) = side
                .prepare(&d.yaml, dir.path(), d.settings, Arc::clone(clock))
                .await?;
            d.pools = pools;
            Some(github)
        }
        _ => None,
    };
    let limits = Limits {
        github: intake.as_ref().map(billet::github::Github::webhook),
        ..limits
    };
    let parts = (&d.pools, store, records, Arc::clone(clock));
    let service = Service::start_tapped(parts, TOKEN.into(), listener, limits, Some(tap))
        .await
        .map_err(broke)?;
    if let (Some(github), Some(side)) = (intake, &mut d.github) {
        side.attach(github, &service, &d.pools, d.identity.as_ref())?;
    }
    d.base = format!("http://{}", service.addr());
    d.jobs_url = Some(d.url("/v1/jobs").parse().map_err(broke)?);
    d.service = Some(service);
    Ok(resumed)
}

#[async_trait]
impl Scheduler for ServiceScheduler {
    async fn start(&mut self) {
        let Some(mut deployments) = self.pending.take() else {
            return;
        };
        for (index, d) in deployments.iter_mut().enumerate() {
            let Some(d) = d else { continue };
            if let Err(why) = launch(d, &self.clock, self.options.store).await {
                self.broken
                    .get_or_insert(format!("deployment {index}'s service did not start: {why}"));
            }
        }
        self.deployments = deployments;
        // What the first inventories decided is the first tick's.
        self.settle().await;
    }

    async fn submit(&mut self, job: Job) -> bool {
        self.submit_all(vec![job])
            .await
            .first()
            .copied()
            .unwrap_or(false)
    }

    async fn submit_all(&mut self, jobs: Vec<Job>) -> Vec<bool> {
        // The engines do what is due at this instant first (their wake may
        // be now), as a production scheduler's tick would before it takes
        // new work; the room each job is given by is the room after the
        // last tick, as the production dispatcher counts it.
        if matches!(self.options.intake, Intake::Github(_)) {
            return self.queue_at_github(&jobs);
        }
        let mut given = vec![0; self.deployments.len()];
        let mut accepted = vec![false; jobs.len()];
        // By deployment: (position among the jobs, harness id, body).
        let mut sends: Vec<Vec<(usize, JobId, String)>> = vec![Vec::new(); self.deployments.len()];
        for (at, job) in jobs.iter().enumerate() {
            let Some(index) = self.choose(&given) else {
                continue;
            };
            let Some(d) = self.deployments[index].as_mut() else {
                continue;
            };
            let core_job = billet_scheduler::Job::new(CoreJobId(job.id), job.command.clone())
                .with_labels(job.labels.clone())
                .with_trust(job.trust);
            if d.router.would_take(&core_job).is_err() {
                continue;
            }
            given[index] += 1;
            sends[index].push((at, job.id, body(job)));
        }
        let now = self.clock.now();
        for d in self.deployments.iter().flatten() {
            if let Some(service) = &d.service
                && service.quiescent(now, QUIESCENT_BOUND).await.is_err()
            {
                self.broken.get_or_insert(format!(
                    "a service was not quiescent at {now:?} before its jobs were sent"
                ));
            }
        }
        let client = &self.client;
        let ordered = self.options.submission == Submission::Ordered;
        let per_deployment = sends.into_iter().enumerate().map(|(index, sends)| {
            let url = self.deployments[index]
                .as_ref()
                .and_then(|d| d.jobs_url.clone());
            async move {
                let limit = if ordered { 1 } else { IN_FLIGHT };
                futures::stream::iter(sends)
                    .map(|(at, id, body)| {
                        let url = url.clone();
                        async move {
                            match url {
                                Some(url) => (at, id, post(client, &url, body).await),
                                None => (
                                    at,
                                    id,
                                    (
                                        Posted::Failed("no service to send to".to_owned()),
                                        Duration::ZERO,
                                    ),
                                ),
                            }
                        }
                    })
                    .buffered(limit)
                    .collect::<Vec<_>>()
                    .await
            }
        });
        let answers = futures::future::join_all(per_deployment).await;
        for (index, answers) in answers.into_iter().enumerate() {
            for (at, id, (posted, took)) in answers {
                self.record(took);
                let Some(d) = self.deployments[index].as_mut() else {
                    continue;
                };
                match posted {
                    Posted::Accepted(service_id) => {
                        if d.ids.insert(service_id, id).is_some() {
                            self.broken.get_or_insert(format!(
                                "deployment {index}'s service gave id {service_id} twice"
                            ));
                        }
                        d.accepted += 1;
                        self.accepted += 1;
                        accepted[at] = true;
                    }
                    Posted::Refused => {
                        self.broken.get_or_insert(format!(
                            "deployment {index}'s service refused job {id}, which its routing takes"
                        ));
                    }
                    Posted::Failed(why) => {
                        self.broken.get_or_insert(why);
                    }
                }
            }
        }
        accepted
    }

    async fn tick(&mut self) -> Step {
        self.settle().await;
        Step {
            changes: std::mem::take(&mut self.changes),
        }
    }

    fn next_wakeup(&mut self) -> Option<SystemTime> {
        if self.broken.is_some() {
            return None;
        }
        // As the production scheduler's: an engine whose core waits for
        // nothing asks for no time (it still reads its inventories when the
        // clock passes its wake for another's sake).
        let github = self
            .deployments
            .iter()
            .flatten()
            .filter_map(|d| d.github.as_ref())
            .filter_map(github::Side::next_wakeup)
            .min();
        self.deployments
            .iter()
            .flatten()
            .filter_map(|d| d.service.as_ref())
            .filter_map(|service| *service.quiet().borrow())
            .filter(|quiet| !quiet.idle)
            .filter_map(|quiet| quiet.wake)
            .chain(github)
            .min()
    }

    fn queued(&self) -> usize {
        self.deployments
            .iter()
            .flatten()
            .map(|d| match &d.github {
                Some(side) => side.sim.queued(),
                None => d.queued(),
            })
            .sum()
    }

    fn leases(&self) -> Vec<usize> {
        self.deployments
            .iter()
            .map(|d| d.as_ref().map_or(0, Deployment::leases))
            .collect()
    }

    fn pool_leases(&self) -> Vec<Vec<usize>> {
        self.deployments
            .iter()
            .zip(&self.pool_counts)
            .map(|(d, &pools)| match d {
                Some(d) => match &d.github {
                    Some(side) => side.busy().to_vec(),
                    None => d.view.iter().map(|p| p.held as usize).collect(),
                },
                None => vec![0; pools],
            })
            .collect()
    }

    async fn restart(&mut self, index: usize) -> Result<(), RestartUnsupported> {
        if self.options.store == StoreKind::Memory {
            return Err(RestartUnsupported);
        }
        let Some(Some(d)) = self.deployments.get_mut(index) else {
            return Ok(());
        };
        // A crash: nothing more is committed, calls in flight are dropped.
        // It comes once what the service held back is committed (at most
        // its hold of wall time), so that what it loses is the same in every
        // run: a crash that loses held-back changes is billet's own test.
        if let Some(service) = &d.service
            && let Err(last) = service.settled(QUIESCENT_BOUND).await
        {
            self.broken.get_or_insert(format!(
                "deployment {index}'s service did not settle before its crash within {QUIESCENT_BOUND:?} (it last said {last:?})"
            ));
        }
        if let Some(service) = d.service.take() {
            d.commits_before += service.commits();
            service.abort();
        }
        if let Some(side) = d.github.as_mut() {
            side.restarted();
        }
        // Let the aborted tasks be dropped (their store's writer with them)
        // before the store is opened again.
        tokio::task::yield_now().await;
        match launch(d, &self.clock, self.options.store).await {
            Ok(resumed) => {
                // Under `--intake github` the new engine's own start (its
                // inventories read, what it adopts) is over before its
                // intake is first ticked: the two would otherwise race, and
                // the order of what they decide would differ run to run.
                if d.github.is_some()
                    && let Some(service) = &d.service
                    && let Err(last) = service.quiescent(self.clock.now(), QUIESCENT_BOUND).await
                {
                    self.broken.get_or_insert(format!(
                        "deployment {index}'s service was not quiescent after its restart within {QUIESCENT_BOUND:?} (it last said {last:?})"
                    ));
                }
                self.changes.push(FleetChange::Restarted {
                    deployment: index,
                    handed_over: resumed,
                });
                self.recoveries.push(Recovery {
                    deployment: index,
                    resumed,
                    adopted: 0,
                });
            }
            Err(why) => {
                self.broken.get_or_insert(format!(
                    "deployment {index}'s service did not restart: {why}"
                ));
            }
        }
        Ok(())
    }

    fn name(&self) -> Option<&'static str> {
        Some("service")
    }

    fn collects_orphans(&self) -> bool {
        true
    }

    fn sleeps_on_clock(&self) -> bool {
        true
    }

    fn broken(&mut self) -> Option<String> {
        self.broken.clone()
    }

    async fn finish(&mut self) -> Result<Vec<String>, String> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        if self.twice > 0 {
            return Err(format!("{} jobs were launched twice", self.twice));
        }
        // Every job accepted is there once, ended as its decisions said.
        for index in 0..self.deployments.len() {
            let Some(d) = self.deployments[index].as_ref() else {
                continue;
            };
            // What it held back (a job's end, at most LAZY_COMMIT) is shown.
            if let Some(service) = &d.service
                && let Err(last) = service.settled(QUIESCENT_BOUND).await
            {
                return Err(format!(
                    "deployment {index}'s service did not settle within {QUIESCENT_BOUND:?} (it last said {last:?})"
                ));
            }
            if let Some(side) = &d.github {
                side.finish(index)?;
                continue;
            }
            let mut seen = 0u64;
            let mut after: Option<u64> = None;
            loop {
                let url = match after {
                    Some(after) => d.url(&format!("/v1/jobs?limit=1000&after={after}")),
                    None => d.url("/v1/jobs?limit=1000"),
                };
                let started = Instant::now();
                let uri: hyper::Uri = url.parse().map_err(|e| format!("GET {url}: {e}"))?;
                let answer = self.client.get(&uri).await?;
                if !answer.status.is_success() {
                    return Err(format!(
                        "GET {url}: {}: {}",
                        answer.status,
                        String::from_utf8_lossy(&answer.body)
                    ));
                }
                let page: Page<'_> =
                    serde_json::from_slice(&answer.body).map_err(|e| format!("GET {url}: {e}"))?;
                self.requests += 1;
                self.latency.saturating_record(
                    u64::try_from(started.elapsed().as_micros())
                        .unwrap_or(u64::MAX)
                        .max(1),
                );
                for job in &page.jobs {
                    let (id, state) = (job.id, &*job.state);
                    let expected = d.ended.get(&id).map(|e| e.as_str());
                    if expected != Some(state) {
                        return Err(format!(
                            "deployment {index}'s job {id} reads {state:?} over HTTP, its decisions said {expected:?}"
                        ));
                    }
                    seen += 1;
                }
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            if seen != d.accepted || seen != d.ended.len() as u64 {
                return Err(format!(
                    "deployment {index}'s service lists {seen} jobs over HTTP; it accepted {} and {} ended",
                    d.accepted,
                    d.ended.len()
                ));
            }
        }
        let jobs = self.accepted.max(1) as f64;
        let commits: u64 = self
            .deployments
            .iter()
            .flatten()
            .map(Deployment::commits)
            .sum();
        let fsyncs = match self.options.store {
            StoreKind::Durable => commits,
            StoreKind::Memory => 0,
        };
        let store = match self.options.store {
            StoreKind::Durable => "durable (SQLite, synchronous = FULL: one fsync per commit)",
            StoreKind::Memory => "memory",
        };
        let micros = |q: f64| Duration::from_micros(self.latency.value_at_quantile(q));
        let mut lines = vec![
            format!(
                "service: store {store}; {} requests ({:.2} per job), {commits} commits ({:.2} per job), {fsyncs} fsyncs ({:.2} per job)",
                self.requests,
                self.requests as f64 / jobs,
                commits as f64 / jobs,
                fsyncs as f64 / jobs,
            ),
            format!(
                "service HTTP latency (wall): p50 {:?}, p99 {:?}, max {:?}; peak memory (process RSS) {}",
                micros(0.50),
                micros(0.99),
                Duration::from_micros(self.latency.max()),
                peak_rss()
                    .map_or_else(|| "unknown".to_owned(), |kib| format!("{} MiB", kib / 1024)),
            ),
        ];
        let sides: Vec<&github::Side> = self
            .deployments
            .iter()
            .flatten()
            .filter_map(|d| d.github.as_ref())
            .collect();
        if !sides.is_empty() {
            lines.extend(github::report(&sides));
        }
        for r in &self.recoveries {
            lines.push(format!(
                "recovery of deployment {}: {} unended jobs resumed from the store, {} instances adopted, nothing run twice",
                r.deployment, r.resumed, r.adopted
            ));
        }
        Ok(lines)
    }
}

/// The process's peak resident set, in KiB (`VmHWM`), where the system says.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}
