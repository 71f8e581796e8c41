//! The intake's task: it takes the `workflow_job` events the webhook
//! committed, decides which jobs billet takes (G3, G4, [`take`]), keeps
//! runners by demand ([`demand`](super::demand)) and turns what that decides into billet
//! jobs pinned to their pools (a runner's billet job, which the pool's
//! [`Registering`](super::registering::Registering) provider registers just
//! in time, G5) or into their cancellation.
//!
//! Bounded: events wait in a channel of [`EVENTS`]; the webhook answers
//! `503` when it is full, before committing anything, so GitHub's operator
//! may redeliver. Runs' facts are cached per run, at most [`RUNS_CACHED`].
//! Runner numbers are reserved in `github.db` [`RUNNER_BLOCK`] at a time,
//! so a number is never given twice, across restarts too.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use billet_config::{GithubSettings, ScopeTarget};
use billet_github::{Action, Api, ApiError, RunFacts, Scope, WorkflowJobEvent};
use billet_provider::TrustClass;
use billet_scheduler::{InstanceName, Pools};
use tokio::sync::{mpsc, oneshot};

use super::deliveries::TookJob;
use super::demand::{Act, Demand, JobStage, RunnerId};
use super::registering::{Place, Runners, runner_key};
use super::take::{self, Take};
use super::webhook::Webhook;

mod kept;
mod reconcile;
mod watch;

use crate::engine::{Cancelled, EngineHandle, Shared, Submitted};
use crate::jobs::Jobs;
use crate::record::NewJob;
pub use kept::{KEPT_BATCH, kept_full};
pub use reconcile::{
    CALLS as RECONCILE_CALLS, MAX_BACKOFF, doubtful, idles, stale_after, stale_at,
};
use watch::{Stands, Watch};

/// How many committed events may wait for the intake.
pub const EVENTS: usize = 4096;
/// How many runs' facts are kept (the cache is emptied past it).
pub const RUNS_CACHED: usize = 10_000;
/// How often the intake looks for runners whose billet job ended, idled
/// too long, or outlived their job.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How many runner numbers are reserved in `github.db` at once.
pub const RUNNER_BLOCK: u64 = 1024;
/// How long a runner may still run after GitHub said the job it took
/// completed (the runner exits by itself once it has reported): past it,
/// its instance is destroyed (G6).
pub const COMPLETED_GRACE: Duration = Duration::from_secs(120);
/// What a runner is said to have taken when billet knows it runs a job but
/// not which: one GitHub refused to remove because it runs a job whose
/// `in_progress` was lost. GitHub's job ids
/// start at 1, so none is this one. Such a runner is busy until its billet
/// job ends.
const TAKEN_UNSAID: u64 = 0;

/// What the intake needs of the service.
pub struct Parts {
    /// The `github:` section.
    pub settings: GithubSettings,
    /// GitHub's API.
    pub api: Api,
    /// The webhook, whose database reserves runner numbers. Held weakly:
    /// the webhook holds the intake's inbox, and the intake ends once the
    /// service's listener, the webhook's owner, is gone.
    pub webhook: Weak<Webhook>,
    /// The engine, to submit and cancel runners' billet jobs.
    pub engine: EngineHandle,
    /// The table, to see runners' billet jobs start and end.
    pub shared: Arc<Shared>,
    /// The runners, shared with the pools' providers.
    pub runners: Arc<Runners>,
    /// The pools: which may run a job's trust (provider and routing's
    /// `untrusted_kinds`, the scheduler's rule).
    pub pools: Pools,
    /// The store's identity, which names its instances and so its runners
    /// (L10): what says a registration is this store's. `None`: the
    /// reconcile removes no orphan.
    pub identity: Option<String>,
}

/// A GitHub job billet took: its trust, where its runners register, and
/// its labels (its runners' billet jobs carry them, G3).
#[derive(Debug, Clone)]
struct Taken {
    trust: TrustClass,
    place: Place,
    labels: Vec<String>,
    /// When its `queued` delivery came, until a runner took it.
    queued_at: Option<SystemTime>,
    /// `OWNER/NAME`.
    repository: String,
    /// Its run.
    run_id: u64,
    /// When billet last heard of it (a delivery, or the reconcile asking).
    heard: SystemTime,
    /// The pool it was taken into.
    pool: String,
    /// How many reconciles in a row asked the API of it (backing off).
    asked: u32,
}

/// The intake's state, on its task.
struct Intake {
    parts: Parts,
    demand: Demand,
    taken: HashMap<u64, Taken>,
    /// Runners' billet jobs, both ways.
    job_of: HashMap<RunnerId, u64>,
    runner_of: HashMap<u64, RunnerId>,
    /// Runners whose GitHub job completed, with when they are destroyed if
    /// they still run.
    finishing: HashMap<RunnerId, SystemTime>,
    runs: HashMap<u64, Option<RunFacts>>,
    /// Queued runs the reconcile listed the jobs of: when, and how many
    /// times in a row with nothing new found (at most [`RUNS_CACHED`]).
    listed_runs: HashMap<u64, (SystemTime, u32)>,
    /// When the reconcile next sweeps registrations for orphans.
    sweeps: reconcile::Sweeps,
    /// Runner numbers below this are reserved in `github.db`.
    reserved_below: u64,
    /// Jobs left because their run's facts could not be read (at most
    /// [`RUNS_CACHED`]): the reconcile takes them again, as it does jobs
    /// never heard of.
    unread: std::collections::HashSet<u64>,
    /// What [`due`](Intake::due) last found, and when it holds.
    seen: Option<Seen>,
    /// Which GitHub job each runner serves (G8), and the jobs taken (G7),
    /// not yet written to `github.db`: written together at the end of each
    /// turn of the intake's loop, or once [`KEPT_BATCH`] wait.
    served: Vec<(u64, u64, SystemTime)>,
    took: Vec<TookJob>,
    /// Where each runner stands, as of [`Watched::at`].
    watched: Watched,
}

/// The intake's [`Watch`], and how far it is caught up.
#[derive(Debug, Default)]
struct Watched {
    watch: Watch,
    /// The job table's [`Jobs::changes`] and the demand's
    /// [`Demand::runner_changes`] the watch was caught up at; `None`: never.
    at: Option<(u64, u64)>,
    /// Billet jobs made or removed a runner's since (`runner_of`), at most
    /// as many as the runners the intake made or removed between two looks.
    touched: Vec<u64>,
}

/// What [`Intake::due`] found when the job table and the demand were at the
/// counts kept here ([`Jobs::changes`], [`Demand::changes`]): while both
/// stay there, the same runners are idle, finishing and ended, so a look
/// before `earliest` has nothing to do unless a runner's billet job had
/// ended. (The intake's own `runner_of` and `finishing` change only with the
/// demand: a runner is launched from a settle that made it, removed when it
/// is gone, and finishing once GitHub said its job reached `completed`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    counts: (u64, u64),
    /// The earliest instant a runner is overdue (idle past its timeout, or
    /// past its job's completion and grace); `None`: none will be.
    earliest: Option<SystemTime>,
    /// Some runner's billet job had ended: the next look removes it.
    ended: bool,
    /// Runners starting, idle and busy, in that order.
    runners: [usize; 3],
    /// GitHub jobs billet took that are queued, and in progress.
    jobs: (usize, usize),
}

/// What sets the intake's looks and reconciles going.
#[derive(Debug)]
pub enum Timers {
    /// Wall-time intervals: a look every [`LOOK_EVERY`], a reconcile at
    /// start and every `reconcile_every`. What `billet serve` runs.
    Wall,
    /// A driver's ticks ([`Ticks`]): the intake looks only when ticked, and
    /// reconciles at a tick once `reconcile_every` of the service's clock
    /// has passed since the last (the first tick reconciles). Deliveries
    /// already handed to the intake are handled before a tick, so a driver
    /// that moves the service's clock only between ticks makes a run that
    /// depends on nothing but what it sent (H14).
    Driven(mpsc::Receiver<Tick>),
}

/// One driver's tick: what [`Ticks::tick`] sends.
#[derive(Debug)]
pub struct Tick {
    done: oneshot::Sender<Ticked>,
}

/// What a tick left the intake waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ticked {
    /// The earliest instant a look would act by the clock alone: a runner's
    /// idle timeout or a completed job's grace running out. `None`: none.
    pub due: Option<SystemTime>,
    /// When the next reconcile is due.
    pub reconcile_at: Option<SystemTime>,
}

/// A driver's handle on an intake started with [`Timers::Driven`].
#[derive(Debug, Clone)]
pub struct Ticks {
    sender: mpsc::Sender<Tick>,
}

impl Ticks {
    /// A handle and the timers to start the intake with.
    pub fn new() -> (Ticks, Timers) {
        let (sender, receiver) = mpsc::channel(1);
        (Ticks { sender }, Timers::Driven(receiver))
    }

    /// Ticks the intake: once every delivery handed to it before is handled,
    /// it looks (and reconciles when due), acts on what that decided, and
    /// answers what it waits for. Errors when the intake has ended.
    pub async fn tick(&self) -> Result<Ticked, String> {
        let (done, answer) = oneshot::channel();
        self.sender
            .send(Tick { done })
            .await
            .map_err(|_| "the GitHub intake has ended".to_owned())?;
        answer
            .await
            .map_err(|_| "the GitHub intake ended during a tick".to_owned())
    }
}

/// Starts the intake's task; answers the channel the webhook sends to.
/// Runners' billet jobs left by an earlier start are adopted, and the
/// GitHub jobs billet took that have not completed are taken again, as
/// `github.db` kept them. (A runner that never
/// launched is refused at launch by its pool's
/// [`Registering`](super::registering::Registering) provider, which no
/// longer knows where it registers; the store may still say `queued` of one
/// that launched, its start not yet committed when billet stopped.)
pub fn start(parts: Parts, timers: Timers) -> Result<mpsc::Sender<WorkflowJobEvent>, String> {
    let reserved_below = parts
        .webhook
        .upgrade()
        .ok_or_else(|| "the webhook is gone".to_owned())?
        .runners_reserved()
        .map_err(|error| format!("github.db: {error}"))?;
    let (events, inbox) = mpsc::channel(EVENTS);
    let mut intake = Intake {
        demand: Demand::new(reserved_below),
        taken: HashMap::new(),
        job_of: HashMap::new(),
        runner_of: HashMap::new(),
        finishing: HashMap::new(),
        runs: HashMap::new(),
        listed_runs: HashMap::new(),
        sweeps: reconcile::Sweeps::default(),
        unread: std::collections::HashSet::new(),
        seen: None,
        served: Vec::new(),
        took: Vec::new(),
        watched: Watched::default(),
        reserved_below,
        parts,
    };
    intake.adopt();
    match timers {
        Timers::Wall => tokio::spawn(intake.run(inbox)),
        Timers::Driven(ticks) => tokio::spawn(intake.run_driven(inbox, ticks)),
    };
    Ok(events)
}

/// The sooner of `earliest` and `at`.
fn soonest(earliest: Option<SystemTime>, at: SystemTime) -> Option<SystemTime> {
    Some(earliest.map_or(at, |earliest| earliest.min(at)))
}

/// Where runners of a job from `repository` register, under `settings`.
fn place_of(settings: &GithubSettings, repository: &str) -> Option<Place> {
    let scope = take::scope_of(settings, repository)?;
    Some(match &scope.target {
        ScopeTarget::Org {
            name,
            runner_group_id,
        } => Place {
            scope: Scope::Org(name.clone()),
            runner_group_id: *runner_group_id,
        },
        ScopeTarget::Repository { owner, name } => Place {
            scope: Scope::Repository {
                owner: owner.clone(),
                name: name.clone(),
            },
            runner_group_id: 1,
        },
        _ => return None,
    })
}

impl Intake {
    async fn run(mut self, mut inbox: mpsc::Receiver<WorkflowJobEvent>) {
        let mut tick = tokio::time::interval(LOOK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first reconcile comes at once: a start may follow a crash,
        // and what GitHub said meanwhile is read now, not an interval later.
        let mut reconcile = tokio::time::interval(self.parts.settings.reconcile_every);
        reconcile.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = inbox.recv() => match event {
                    Some(event) => self.on_event(event).await,
                    None => return,
                },
                _ = tick.tick() => {
                    self.look().await;
                }
                _ = reconcile.tick() => {
                    self.reconcile().await;
                }
            }
            self.settle().await;
            self.write_kept();
        }
    }

    /// [`run`](Intake::run) under a driver's ticks ([`Timers::Driven`]).
    async fn run_driven(
        mut self,
        mut inbox: mpsc::Receiver<WorkflowJobEvent>,
        mut ticks: mpsc::Receiver<Tick>,
    ) {
        let mut reconcile_at: Option<SystemTime> = None;
        loop {
            tokio::select! {
                biased;
                // Settled only at the tick: deliveries sent together reach
                // the intake in whatever order their requests end, and the
                // runners settled from them are the same in any order (G6).
                event = inbox.recv() => match event {
                    Some(event) => self.on_event(event).await,
                    None => return,
                },
                tick = ticks.recv() => {
                    let Some(tick) = tick else { return };
                    self.settle().await;
                    let retired = self.look().await;
                    let now = self.parts.shared.now();
                    if reconcile_at.is_none_or(|at| now >= at) {
                        self.reconcile().await;
                        reconcile_at = Some(now + self.parts.settings.reconcile_every);
                    }
                    self.settle().await;
                    self.write_kept();
                    // A runner retired or destroyed at this tick is idle
                    // until the engine has ended its billet job, which it
                    // does while the tick goes on: the answer does not race
                    // it, it is the retry of a look's interval either way.
                    let due = if retired {
                        Some(now + LOOK_EVERY)
                    } else {
                        self.due()
                    };
                    let _ = tick.done.send(Ticked {
                        due,
                        reconcile_at,
                    });
                }
            }
        }
    }

    /// The earliest instant [`look`](Intake::look) would act by the clock
    /// alone: just past a started, untaken runner's idle timeout, or past a
    /// completed job's grace.
    fn due(&mut self) -> Option<SystemTime> {
        let earliest = self.seen().earliest;
        // A look that could not act on what was due (GitHub unreachable, say)
        // tries again a look's interval later, not at once.
        let retry = self.parts.shared.now() + LOOK_EVERY;
        earliest.map(|due| due.max(retry))
    }

    /// The counts [`Seen`] is kept at, as they are now.
    fn counts(&self, jobs: &Jobs) -> (u64, u64) {
        (jobs.changes(), self.demand.changes())
    }

    /// What the runners are waiting for, walked again only when the job
    /// table or the demand changed since the last walk.
    fn seen(&mut self) -> Seen {
        let table = Arc::clone(&self.parts.shared.jobs);
        let jobs = table.read();
        let counts = self.counts(&jobs);
        if let Some(seen) = self.seen
            && seen.counts == counts
        {
            return seen;
        }
        self.catch_up(&jobs);
        let watch = &self.watched.watch;
        let mut earliest = watch.first_overdue(self.parts.settings.runner.idle_timeout);
        for deadline in self.finishing.values() {
            earliest = soonest(earliest, *deadline + Duration::from_nanos(1));
        }
        let seen = Seen {
            counts,
            earliest,
            ended: watch.any_ended(),
            runners: watch.counts(),
            jobs: self.demand.job_counts(),
        };
        #[cfg(debug_assertions)]
        self.check_seen(&jobs, &seen);
        self.seen = Some(seen);
        seen
    }

    /// Brings the watch up to what the job table and the demand say now:
    /// only the runners whose billet job or demand changed since it was
    /// last caught up, or every runner when the logs cannot say which.
    fn catch_up(&mut self, jobs: &Jobs) {
        let now = (jobs.changes(), self.demand.runner_changes());
        let touched = std::mem::take(&mut self.watched.touched);
        let changed = self.watched.at.and_then(|(jobs_at, runners_at)| {
            let mut changed: std::collections::BTreeSet<u64> = touched.into_iter().collect();
            changed.extend(jobs.changed_since(jobs_at)?);
            let runners = self.demand.runners_changed_since(runners_at)?;
            changed.extend(runners.filter_map(|runner| self.job_of.get(&runner).copied()));
            Some(changed)
        });
        match changed {
            Some(changed) => {
                for id in changed {
                    let stands = self.stands(jobs, id);
                    self.watched.watch.set(id, stands);
                }
            }
            None => {
                self.watched.watch.clear();
                for &id in self.runner_of.keys() {
                    let stands = self.stands(jobs, id);
                    self.watched.watch.set(id, stands);
                }
            }
        }
        self.watched.at = Some(now);
    }

    /// Where the runner whose billet job is `id` stands (`None`: no
    /// runner's).
    fn stands(&self, jobs: &Jobs, id: u64) -> Option<Stands> {
        let runner = self.runner_of.get(&id)?;
        let untaken = self
            .demand
            .runner(*runner)
            .is_some_and(|(_, took)| took.is_none());
        Some(Stands::of(jobs.live(id), untaken))
    }

    /// In a debug build, holds what [`seen`](Intake::seen) kept up to a
    /// walk of every runner: a runner the watch was not told of fails here,
    /// in every test that runs the intake.
    #[cfg(debug_assertions)]
    fn check_seen(&self, jobs: &Jobs, seen: &Seen) {
        let idle_timeout = self.parts.settings.runner.idle_timeout;
        let mut ended = false;
        let mut runners = [0; 3];
        let mut earliest = None;
        for (&id, &runner) in &self.runner_of {
            let Some(record) = jobs.live(id) else {
                ended = true;
                continue;
            };
            let untaken = self
                .demand
                .runner(runner)
                .is_some_and(|(_, took)| took.is_none());
            runners[match (untaken, record.started_at) {
                (false, _) => 2,
                (true, Some(_)) => 1,
                (true, None) => 0,
            }] += 1;
            if untaken && let Some(started) = record.started_at {
                earliest = soonest(earliest, started + idle_timeout + Duration::from_nanos(1));
            }
        }
        for deadline in self.finishing.values() {
            earliest = soonest(earliest, *deadline + Duration::from_nanos(1));
        }
        let walked = (earliest, ended, runners);
        assert_eq!(
            (seen.earliest, seen.ended, seen.runners),
            walked,
            "the intake's watch of its runners differs from a walk of them"
        );
    }

    /// The facts of `event`'s run, asked of the API once per run. A run
    /// GitHub could not answer for (unreachable, its rate limit spent) is
    /// unknown work this time and asked again the next: an outage does not
    /// make a run unknown for good.
    async fn facts(&mut self, event: &WorkflowJobEvent) -> Option<RunFacts> {
        self.read_facts(event).await.ok().flatten()
    }

    /// [`facts`](Intake::facts), or the error that kept GitHub from saying
    /// them.
    async fn read_facts(&mut self, event: &WorkflowJobEvent) -> Result<Option<RunFacts>, ApiError> {
        let run = event.workflow_job.run_id;
        if let Some(known) = self.runs.get(&run) {
            return Ok(*known);
        }
        let Some((owner, repo)) = event.repository.full_name.split_once('/') else {
            return Ok(None);
        };
        let facts = match self.parts.api.run(owner, repo, run).await {
            Ok(run) => run.facts.ok(),
            Err(error) => {
                tracing::warn!(run, %error, "the run's facts could not be read: its jobs are unknown work until they are");
                return Err(error);
            }
        };
        if self.runs.len() >= RUNS_CACHED {
            self.runs.clear();
        }
        self.runs.insert(run, facts);
        Ok(facts)
    }

    async fn on_event(&mut self, event: WorkflowJobEvent) {
        let job = event.workflow_job.id;
        let now = self.parts.shared.now();
        if let Some(taken) = self.taken.get_mut(&job) {
            taken.heard = now;
        }
        match event.action {
            Action::Queued if self.demand.stage(job).is_none() && !self.went_further(job) => {
                self.on_queued(&event).await;
            }
            Action::Queued | Action::Waiting | Action::Unknown => {}
            Action::InProgress => {
                if let Some(queued_at) = self
                    .taken
                    .get_mut(&job)
                    .and_then(|taken| taken.queued_at.take())
                {
                    let took = self.parts.shared.now().duration_since(queued_at);
                    self.parts
                        .shared
                        .metrics
                        .github_startup(took.unwrap_or_default());
                }
                let runner = self.our_runner(event.workflow_job.runner_name.as_deref());
                match runner {
                    Some(runner) => {
                        self.demand.took(runner, job);
                        if let Some(&billet_job) = self.job_of.get(&runner) {
                            self.serves(billet_job, job);
                        }
                        self.check_trust(runner, &event).await;
                    }
                    None => self.demand.reached(job, JobStage::InProgress),
                }
            }
            Action::Completed => {
                self.demand.reached(job, JobStage::Completed);
                let runner = self.our_runner(event.workflow_job.runner_name.as_deref());
                if let Some(runner) = runner {
                    let deadline = self.parts.shared.now() + COMPLETED_GRACE;
                    self.finishing.entry(runner).or_insert(deadline);
                }
                self.taken.remove(&job);
            }
        }
    }

    /// The runner of this store a runner's name names: its instance's name
    /// carries this store's identity (L10) and the id of a runner's billet
    /// job billet holds. Another store's runner of the same job id is not
    /// one of ours.
    fn our_runner(&self, name: Option<&str>) -> Option<RunnerId> {
        let name = InstanceName::parse(name?)?;
        if name.store != self.parts.identity.as_deref() {
            return None;
        }
        self.runner_of.get(&name.job.0).copied()
    }

    async fn on_queued(&mut self, event: &WorkflowJobEvent) {
        let job = event.workflow_job.id;
        let read = self.read_facts(event).await;
        let unread = read.is_err();
        let facts = read.ok().flatten();
        let settings = &self.parts.settings;
        let pools = &self.parts.pools;
        match take::decide(settings, event, facts, |pool, trust| {
            pools.may_run(pool, trust)
        }) {
            Take::Into { pool, trust } => {
                let Some(place) = place_of(settings, &event.repository.full_name) else {
                    return;
                };
                tracing::info!(github_job = job, pool, trust = %trust, "took a GitHub job");
                self.taken.insert(
                    job,
                    Taken {
                        trust,
                        place,
                        labels: event.workflow_job.labels.clone(),
                        queued_at: Some(self.parts.shared.now()),
                        repository: event.repository.full_name.clone(),
                        run_id: event.workflow_job.run_id,
                        heard: self.parts.shared.now(),
                        pool: pool.clone(),
                        asked: 0,
                    },
                );
                self.demand.taken(job, &pool);
                self.took.push(TookJob {
                    id: job,
                    pool,
                    trust,
                    at: self.parts.shared.now(),
                });
                self.kept();
            }
            Take::Leave(why) => {
                if unread {
                    // Left for want of its run's facts: the reconcile takes
                    // it again once GitHub can say them (it is still queued).
                    if self.unread.len() >= RUNS_CACHED {
                        self.unread.clear();
                    }
                    self.unread.insert(job);
                }
                self.parts.shared.metrics.github_left(why.as_str());
                tracing::info!(github_job = job, reason = why.as_str(), "left a GitHub job");
            }
        }
    }

    /// G4: labels are no trust boundary. A runner GitHub says took a job
    /// trusted less than the runner's billet job is destroyed at once, its
    /// registration removed.
    async fn check_trust(&mut self, runner: RunnerId, event: &WorkflowJobEvent) {
        let Some(&billet_job) = self.job_of.get(&runner) else {
            return;
        };
        let Some(runner_trust) = self
            .parts
            .shared
            .jobs
            .read()
            .live(billet_job)
            .map(|record| record.trust)
        else {
            return;
        };
        let facts = self.facts(event).await;
        let trust = take::trust_of(&self.parts.settings, &event.repository.full_name, facts);
        if trust < runner_trust {
            tracing::warn!(
                runner = runner.0,
                job = billet_job,
                github_job = event.workflow_job.id,
                repository = %event.repository.full_name,
                job_trust = %trust,
                runner_trust = %runner_trust,
                "a runner took a GitHub job trusted less than its pool runs it: destroyed"
            );
            self.demand.gone(runner);
            self.destroy(runner).await;
        }
    }

    /// Runners whose billet job ended are gone; runners idle past the
    /// `idle_timeout`, and runners still running past their job's
    /// completion and its grace, are retired. Answers whether it retired or
    /// destroyed any.
    async fn look(&mut self) -> bool {
        let now = self.parts.shared.now();
        let idle_timeout = self.parts.settings.runner.idle_timeout;
        let seen = self.seen();
        let metrics = &self.parts.shared.metrics;
        metrics.github_runners(seen.runners);
        metrics.github_jobs(seen.jobs.0, seen.jobs.1);
        let api = &self.parts.api;
        metrics.github_api(&api.answers(), api.rate_limit_remaining());
        // Nothing ended and nothing overdue: no runner to walk.
        if !seen.ended && seen.earliest.is_none_or(|at| now < at) {
            return false;
        }
        let (ended, overdue) = {
            let jobs = self.parts.shared.jobs.read();
            let mut ended = Vec::new();
            let mut overdue = Vec::new();
            for (&id, &runner) in &self.runner_of {
                let Some(record) = jobs.live(id) else {
                    ended.push(id);
                    continue;
                };
                let untaken = self
                    .demand
                    .runner(runner)
                    .is_some_and(|(_, took)| took.is_none());
                let idle = untaken
                    && record
                        .started_at
                        .and_then(|at| now.duration_since(at).ok())
                        .is_some_and(|for_| for_ > idle_timeout);
                let outlived = self
                    .finishing
                    .get(&runner)
                    .is_some_and(|deadline| now > *deadline);
                if outlived {
                    overdue.push((runner, true));
                } else if idle {
                    overdue.push((runner, false));
                }
            }
            (ended, overdue)
        };
        // In the runners' order, whatever the map's: what billet does at
        // one instant does not depend on a hash's seed.
        let (mut ended, mut overdue) = (ended, overdue);
        ended.sort_unstable();
        overdue.sort_unstable();
        let retired = !overdue.is_empty();
        for (runner, outlived) in overdue {
            self.demand.gone(runner);
            if outlived {
                tracing::info!(
                    runner = runner.0,
                    "a runner still ran past its job's completion and grace: destroyed"
                );
                self.finishing.remove(&runner);
                self.destroy(runner).await;
            } else {
                tracing::info!(runner = runner.0, idle_timeout = ?idle_timeout, "a runner idled past its timeout: retired");
                self.retire(runner).await;
            }
        }
        for id in ended {
            let Some(runner) = self.runner_of.remove(&id) else {
                continue;
            };
            self.watched.touched.push(id);
            self.job_of.remove(&runner);
            self.finishing.remove(&runner);
            let untaken = self
                .demand
                .runner(runner)
                .is_some_and(|(_, took)| took.is_none());
            // A runner that never took a job leaves its registration
            // behind when its instance ends: removed (one that took a job
            // removed its own, being single-use).
            if let Some((place, Some(registration))) = self.parts.runners.remove(runner.0)
                && untaken
                && let Err(error) = self
                    .parts
                    .api
                    .delete_runner(&place.scope, registration)
                    .await
            {
                self.sweeps.doubt();
                tracing::warn!(runner = runner.0, %error, "an ended runner's registration could not be removed");
            }
            self.demand.gone(runner);
            self.demand.forget_runner(runner);
        }
        retired
    }

    /// Whether `github.db` says GitHub job `job` went past `queued` (a
    /// `queued` that comes late, after the job was forgotten, changes
    /// nothing: forward only, G6).
    fn went_further(&self, job: u64) -> bool {
        self.parts
            .webhook
            .upgrade()
            .and_then(|webhook| webhook.job(job))
            .is_some_and(|facts| matches!(facts.action, Action::InProgress | Action::Completed))
    }

    async fn settle(&mut self) {
        let acts = self.demand.settle();
        self.demand.forget_completed();
        for act in acts {
            match act {
                Act::Launch {
                    runner,
                    pool,
                    for_job,
                } => self.launch(runner, pool, for_job).await,
                Act::Retire { runner } => self.retire(runner).await,
            }
        }
    }

    async fn launch(&mut self, runner: RunnerId, pool: String, for_job: u64) {
        let Some(taken) = self.taken.get(&for_job).cloned() else {
            self.demand.gone(runner);
            return;
        };
        if runner.0 >= self.reserved_below {
            let below = runner.0.saturating_add(RUNNER_BLOCK);
            let reserved = match self.parts.webhook.upgrade() {
                Some(webhook) => webhook.reserve_runners(below),
                None => Err("the service is stopping".to_owned()),
            };
            if let Err(error) = reserved {
                tracing::warn!(runner = runner.0, %error, "runner numbers could not be reserved in github.db: no runner started");
                self.demand.gone(runner);
                return;
            }
            self.reserved_below = below;
        }
        self.parts.runners.insert(runner.0, taken.place);
        let new = NewJob {
            command: self.parts.settings.runner.command.clone(),
            labels: taken.labels,
            trust: taken.trust,
            timeout: None,
            key: Some(runner_key(runner.0)),
            pinned: Some(pool.clone()),
        };
        let refused = match self.parts.engine.submit(new).await {
            Ok(Submitted::Created(view) | Submitted::Existing(view)) => {
                tracing::info!(
                    runner = runner.0,
                    job = view.id,
                    pool,
                    github_job = for_job,
                    "a runner's job"
                );
                self.job_of.insert(runner, view.id);
                self.runner_of.insert(view.id, runner);
                self.watched.touched.push(view.id);
                self.serves(view.id, for_job);
                return;
            }
            Ok(other) => format!("{other:?}"),
            Err(why) => why.to_string(),
        };
        tracing::warn!(runner = runner.0, answer = %refused, "a runner's job was not taken: tried again");
        self.parts.runners.remove(runner.0);
        self.demand.gone(runner);
        self.demand.forget_runner(runner);
    }

    /// Retires a runner: its registration removed, then its billet job
    /// cancelled. GitHub refuses to remove a runner that runs a job (it took
    /// one whose delivery has not come yet): then it is kept, to finish it.
    async fn retire(&mut self, runner: RunnerId) {
        let Some(&job) = self.job_of.get(&runner) else {
            return;
        };
        match self.unregister(runner).await {
            Ok(()) => self.cancel(job).await,
            // GitHub refuses to remove a runner that runs a job: it took
            // one whose `in_progress` billet never heard. It is busy, with a
            // job billet does not know, until its billet job ends: not
            // retired again at every look.
            Err(ApiError::Refused { status: 422, .. }) => {
                tracing::info!(
                    runner = runner.0,
                    "GitHub says a runner billet would retire runs a job: kept, busy"
                );
                let pool = self
                    .parts
                    .shared
                    .jobs
                    .read()
                    .live(job)
                    .and_then(|record| record.pinned.clone());
                if let Some(pool) = pool {
                    self.demand.restore(runner, &pool, None, Some(TAKEN_UNSAID));
                }
            }
            Err(error) => {
                tracing::warn!(runner = runner.0, %error, "a runner's registration could not be removed: it is kept");
            }
        }
    }

    /// Removes runner `runner`'s registration, when billet knows it made one.
    async fn unregister(&self, runner: RunnerId) -> Result<(), billet_github::ApiError> {
        if let Some((place, Some(registration))) = self.parts.runners.get(runner.0) {
            self.parts
                .api
                .delete_runner(&place.scope, registration)
                .await?;
        }
        Ok(())
    }

    /// Destroys a runner whatever it runs: its billet job cancelled, then
    /// its registration removed (a runner whose instance is gone is no
    /// longer busy).
    async fn destroy(&mut self, runner: RunnerId) {
        let Some(&job) = self.job_of.get(&runner) else {
            return;
        };
        self.cancel(job).await;
        if let Err(error) = self.unregister(runner).await {
            self.sweeps.doubt();
            tracing::warn!(runner = runner.0, %error, "a destroyed runner's registration could not be removed");
        }
    }

    async fn cancel(&self, job: u64) {
        match self.parts.engine.cancel(job).await {
            Ok(Cancelled::Requested(_) | Cancelled::Ended(_) | Cancelled::Unknown) => {}
            Ok(other) => {
                tracing::warn!(job, answer = ?other, "a runner's job could not be cancelled");
            }
            Err(why) => {
                tracing::warn!(job, %why, "a runner's job could not be cancelled");
            }
        }
    }
}
