//! The intake's task: it takes the `workflow_job` events the webhook
//! committed, decides which jobs billet takes (G3, G4, [`take`]), keeps
//! runners by demand ([`demand`]) and turns what that decides into billet
//! jobs pinned to their pools (a runner's billet job, which the pool's
//! [`Registering`](super::registering::Registering) provider registers just
//! in time, G5) or into their cancellation.
//!
//! Bounded: events wait in a channel of [`EVENTS`]; the webhook answers
//! `503` when it is full, before committing anything, so GitHub's operator
//! may redeliver. Runs' facts are cached per run, at most [`RUNS_CACHED`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use billet_config::{GithubSettings, ScopeTarget};
use billet_github::{Action, Api, RunFacts, Scope, WorkflowJobEvent};
use billet_provider::TrustClass;
use billet_scheduler::InstanceName;
use tokio::sync::mpsc;

use super::demand::{Act, Demand, JobStage, RunnerId};
use super::registering::{Place, Runners, runner_key};
use super::take::{self, Take};
use crate::engine::{Cancelled, EngineHandle, Shared, Submitted};
use crate::record::NewJob;

/// How many committed events may wait for the intake.
pub const EVENTS: usize = 4096;
/// How many runs' facts are kept (the cache is emptied past it).
pub const RUNS_CACHED: usize = 10_000;
/// How often the intake looks for runners whose billet job ended.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// What the intake needs of the service.
pub struct Parts {
    /// The `github:` section.
    pub settings: GithubSettings,
    /// GitHub's API.
    pub api: Api,
    /// The engine, to submit and cancel runners' billet jobs.
    pub engine: EngineHandle,
    /// The table, to see runners' billet jobs end.
    pub shared: Arc<Shared>,
    /// The runners, shared with the pools' providers.
    pub runners: Arc<Runners>,
    /// Whether a pool may run work of a trust (its provider and routing's
    /// `untrusted_kinds`).
    pub may_run: Box<dyn Fn(&str, TrustClass) -> bool + Send + Sync>,
}

/// The intake's state, on its task.
struct Intake {
    parts: Parts,
    demand: Demand,
    /// Each taken GitHub job's trust and where its runners register.
    taken: HashMap<u64, (TrustClass, Place)>,
    /// Runners' billet jobs, both ways.
    job_of: HashMap<RunnerId, u64>,
    runner_of: HashMap<u64, RunnerId>,
    runs: HashMap<u64, Option<RunFacts>>,
}

/// Starts the intake's task; answers the channel the webhook sends to.
pub fn start(parts: Parts) -> mpsc::Sender<WorkflowJobEvent> {
    let (events, inbox) = mpsc::channel(EVENTS);
    let intake = Intake {
        parts,
        demand: Demand::new(1),
        taken: HashMap::new(),
        job_of: HashMap::new(),
        runner_of: HashMap::new(),
        runs: HashMap::new(),
    };
    tokio::spawn(intake.run(inbox));
    events
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
        loop {
            tokio::select! {
                event = inbox.recv() => match event {
                    Some(event) => self.on_event(event).await,
                    None => return,
                },
                _ = tick.tick() => self.look(),
            }
            self.settle().await;
        }
    }

    /// The facts of `event`'s run, asked of the API once per run.
    async fn facts(&mut self, event: &WorkflowJobEvent) -> Option<RunFacts> {
        let run = event.workflow_job.run_id;
        if let Some(known) = self.runs.get(&run) {
            return *known;
        }
        let (owner, repo) = event.repository.full_name.split_once('/')?;
        let facts = match self.parts.api.run(owner, repo, run).await {
            Ok(run) => run.facts.ok(),
            Err(error) => {
                tracing::warn!(run, %error, "the run's facts could not be read: its jobs are unknown work");
                None
            }
        };
        if self.runs.len() >= RUNS_CACHED {
            self.runs.clear();
        }
        self.runs.insert(run, facts);
        facts
    }

    async fn on_event(&mut self, event: WorkflowJobEvent) {
        let job = event.workflow_job.id;
        match event.action {
            Action::Queued if self.demand.stage(job).is_none() => {
                let facts = self.facts(&event).await;
                let settings = &self.parts.settings;
                match take::decide(settings, &event, facts, |pool, trust| {
                    (self.parts.may_run)(pool, trust)
                }) {
                    Take::Into { pool, trust } => {
                        let Some(place) = place_of(settings, &event.repository.full_name) else {
                            return;
                        };
                        tracing::info!(github_job = job, pool, trust = %trust, "took a GitHub job");
                        self.taken.insert(job, (trust, place));
                        self.demand.taken(job, &pool);
                    }
                    Take::Leave(why) => {
                        tracing::info!(
                            github_job = job,
                            reason = why.as_str(),
                            "left a GitHub job"
                        );
                    }
                }
            }
            Action::Queued | Action::Waiting | Action::Unknown => {}
            Action::InProgress => {
                let runner = event
                    .workflow_job
                    .runner_name
                    .as_deref()
                    .and_then(InstanceName::parse)
                    .and_then(|name| self.runner_of.get(&name.job.0).copied());
                match runner {
                    Some(runner) => self.demand.took(runner, job),
                    None => self.demand.reached(job, JobStage::InProgress),
                }
            }
            Action::Completed => {
                self.demand.reached(job, JobStage::Completed);
            }
        }
    }

    /// Runners whose billet job ended are gone.
    fn look(&mut self) {
        let ended: Vec<u64> = {
            let jobs = self.parts.shared.jobs.read();
            self.runner_of
                .keys()
                .copied()
                .filter(|id| jobs.live(*id).is_none())
                .collect()
        };
        for id in ended {
            if let Some(runner) = self.runner_of.remove(&id) {
                self.job_of.remove(&runner);
                self.parts.runners.remove(runner.0);
                self.demand.gone(runner);
                self.demand.forget_runner(runner);
            }
        }
    }

    async fn settle(&mut self) {
        for act in self.demand.settle() {
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
        let Some((trust, place)) = self.taken.get(&for_job).cloned() else {
            return;
        };
        self.parts.runners.insert(runner.0, place);
        let new = NewJob {
            command: self.parts.settings.runner.command.clone(),
            labels: Vec::new(),
            trust,
            timeout: None,
            key: Some(runner_key(runner.0)),
            pinned: Some(pool.clone()),
        };
        match self.parts.engine.submit(new).await {
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
            }
            Ok(other) => {
                tracing::warn!(runner = runner.0, answer = ?other, "a runner's job was not taken");
                self.parts.runners.remove(runner.0);
                self.demand.gone(runner);
            }
            Err(why) => {
                tracing::warn!(runner = runner.0, %why, "a runner's job was not taken");
                self.parts.runners.remove(runner.0);
                self.demand.gone(runner);
            }
        }
    }

    /// Retires a runner no waiting job needs: its registration removed (GitHub
    /// refuses while it runs a job, and then it is kept), its job cancelled.
    async fn retire(&mut self, runner: RunnerId) {
        let Some(&job) = self.job_of.get(&runner) else {
            return;
        };
        if let Some((place, Some(registration))) = self.parts.runners.get(runner.0)
            && let Err(error) = self
                .parts
                .api
                .delete_runner(&place.scope, registration)
                .await
        {
            tracing::warn!(runner = runner.0, %error, "a runner's registration could not be removed: it is kept");
            return;
        }
        match self.parts.engine.cancel(job).await {
            Ok(Cancelled::Requested(_) | Cancelled::Ended(_) | Cancelled::Unknown) => {}
            Ok(other) => {
                tracing::warn!(runner = runner.0, answer = ?other, "a runner's job could not be cancelled")
            }
            Err(why) => {
                tracing::warn!(runner = runner.0, %why, "a runner's job could not be cancelled")
            }
        }
    }
}
