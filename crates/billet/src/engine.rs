//! The engine: the task that owns the scheduler's [`Core`], performs its
//! provider calls, and turns what it decides into committed changes (L6).
//!
//! # Guarantees
//!
//! * A request is answered only once the changes it made are committed: an
//!   accepted job is in the store before `201` goes out.
//! * Every provider call the core asks for is made only after every change
//!   decided before it is committed: a job's lease is in the store before its
//!   launch, and its outcome before the destroy of the instance that shows it.
//! * At start, jobs come back from the store: ended ones are told to the core
//!   so their leftover instances are collected, an outcome decided before the
//!   crash is kept, and every unfinished job queues again in submission
//!   order; one that held a lease is placed only once its pool's first
//!   inventory answered, so that the instance it may still have is adopted,
//!   never doubled.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use billet_clock::Clock;
use billet_provider::Provider;
use billet_scheduler::{Action, Answer, Call, CallId, Core, Decision, Job, JobId, PoolId, Pools};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::api::{JobState, JobView, NewJob};
use crate::commit::{self, Batch, Reply, Written};
use crate::jobs::{Change, Ending, JobRecord, Jobs};
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};

/// One pool as `GET /v1/pools` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PoolView {
    /// Its configured name.
    pub name: String,
    /// Its kind.
    pub kind: String,
    /// The most leases it holds at once.
    pub capacity: u32,
    /// Leases it holds now.
    pub held: u32,
    /// Jobs waiting whose first choice it is.
    pub queued: u64,
    /// Instances of this deployment that another store launched while this
    /// service runs, in the last inventory: never adopted nor destroyed, and
    /// counted against room (L10). Also said by `/healthz`.
    pub contested: u32,
    /// Another store's instances from before this service started, in the
    /// last inventory: never adopted, collected as orphans (L10).
    pub leftovers: u32,
    /// Jobs given up on (L14) whose instance may still be there: counted
    /// against room until an inventory shows it gone.
    pub unsettled: u32,
}

/// What the HTTP side reads without asking the engine.
#[derive(Debug)]
pub struct Shared {
    /// Every job, exactly as committed.
    pub jobs: Arc<RwLock<Jobs>>,
    /// The pools after the engine's last step.
    pub pools: RwLock<Vec<PoolView>>,
    /// Pools whose last inventory could not be read.
    pub unreadable: Mutex<BTreeSet<String>>,
    /// The metrics.
    pub metrics: Metrics,
    /// Cleared once shutdown begins: requests then answer `503`.
    pub accepting: AtomicBool,
    /// Per pool, since when its inventory read has been outstanding.
    listing: Mutex<Vec<Option<SystemTime>>>,
    /// How long an inventory read may be outstanding before the pool is
    /// reported unreadable (L14): [`stall_bound`] of the reconcile interval.
    stall_after: Duration,
    clock: Arc<dyn Clock>,
}

/// How long a pool's inventory read may be outstanding before `/healthz`
/// reports the pool unreadable, for a reconcile interval `every` (L14): the
/// interval itself, but at least 2 s and at most 10 s, so a daemon that
/// hangs is said within ten seconds, long before a call's deadline.
pub fn stall_bound(every: Duration) -> Duration {
    every.clamp(Duration::from_secs(2), Duration::from_secs(10))
}

/// What `/healthz` says is wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Pools whose last inventory could not be read, or whose read has been
    /// outstanding longer than the stall bound.
    pub unreadable: Vec<String>,
    /// Pools where another store launches instances of this deployment.
    pub contested: Vec<String>,
}

impl Shared {
    /// What is wrong now; nothing when healthy.
    pub fn health(&self) -> Health {
        let now = self.clock.now();
        let mut unreadable = self.unreadable.lock().clone();
        let pools = self.pools.read();
        for (pool, since) in pools.iter().zip(self.listing.lock().iter()) {
            if since.is_some_and(|since| {
                now.duration_since(since).unwrap_or_default() > self.stall_after
            }) {
                unreadable.insert(pool.name.clone());
            }
        }
        Health {
            unreadable: unreadable.into_iter().collect(),
            contested: pools
                .iter()
                .filter(|pool| pool.contested > 0)
                .map(|pool| pool.name.clone())
                .collect(),
        }
    }
}

/// How a submission was answered.
#[derive(Debug)]
pub enum Submitted {
    /// Accepted and committed.
    Created(JobView),
    /// Its key was seen before: that job.
    Existing(JobView),
    /// No pool could ever take it; nothing recorded.
    Refused(String),
}

/// How a cancel was answered.
#[derive(Debug)]
pub enum Cancelled {
    /// Cancelled (a queued job) or being cancelled (a running one).
    Done(JobView),
    /// It had already ended.
    Ended(JobView),
    /// No such job.
    Unknown,
}

enum Command {
    Submit(NewJob, oneshot::Sender<Submitted>),
    Cancel(u64, oneshot::Sender<Cancelled>),
}

/// The engine's task stopped: shut down, or its store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the service is stopping")]
pub struct Stopping;

/// How the HTTP side talks to the engine.
#[derive(Debug, Clone)]
pub struct EngineHandle {
    commands: mpsc::UnboundedSender<Command>,
}

impl EngineHandle {
    /// Submits a job; answered once committed.
    pub async fn submit(&self, job: NewJob) -> Result<Submitted, Stopping> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Submit(job, reply))
            .map_err(|_| Stopping)?;
        answer.await.map_err(|_| Stopping)
    }

    /// Cancels job `id`; answered once committed.
    pub async fn cancel(&self, id: u64) -> Result<Cancelled, Stopping> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Cancel(id, reply))
            .map_err(|_| Stopping)?;
        answer.await.map_err(|_| Stopping)
    }
}

/// Why the engine stopped other than by being asked to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The store failed to commit.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store's writer thread could not start or went away.
    #[error("the store's writer stopped: {0}")]
    Writer(String),
}

/// A running engine: its handle, what it shares, and its task.
#[derive(Debug)]
pub struct Engine {
    /// Sends it requests.
    pub handle: EngineHandle,
    /// What it shares with the HTTP side.
    pub shared: Arc<Shared>,
    /// Ends with the engine; `Ok` after an orderly shutdown.
    pub task: tokio::task::JoinHandle<Result<(), EngineError>>,
    stop: Option<oneshot::Sender<Duration>>,
}

impl Engine {
    /// Starts the engine on the current runtime over `pools`, with the jobs
    /// `records` read from `store`, timed by `clock`. Commits what the
    /// restart decides (outcomes kept, leases given up) before it returns.
    pub async fn start(
        pools: &Pools,
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
    ) -> Result<Engine, EngineError> {
        let names: Vec<String> = pools
            .config()
            .providers()
            .iter()
            .map(|p| p.name().to_owned())
            .collect();
        let metrics = Metrics::new(names.iter().map(String::as_str));
        let jobs = Arc::new(RwLock::new(Jobs::from_records(records)));
        let shared = Arc::new(Shared {
            jobs: Arc::clone(&jobs),
            pools: RwLock::new(Vec::new()),
            unreadable: Mutex::new(BTreeSet::new()),
            metrics,
            accepting: AtomicBool::new(true),
            listing: Mutex::new(vec![None; names.len()]),
            stall_after: stall_bound(pools.settings().reconcile_every),
            clock: Arc::clone(&clock),
        });
        let mut core = pools.core(clock.now());
        if let Some(identity) = store.identity() {
            core = core.with_identity(identity.clone());
        }
        if let Some(last) = store.unnamed_through() {
            core = core.with_unnamed_through(last);
        }
        let (batches, batch_inbox) = std::sync::mpsc::channel();
        let (written_tx, written) = mpsc::unbounded_channel();
        let writer = commit::spawn(store, jobs, batch_inbox, written_tx)
            .map_err(|e| EngineError::Writer(e.to_string()))?;
        let (commands, inbox) = mpsc::unbounded_channel();
        let (stop, stopped) = oneshot::channel();
        let now = clock.now();
        let mut state = State {
            core,
            providers: pools.providers().to_vec(),
            names,
            clock,
            shared: Arc::clone(&shared),
            batches: Some(batches),
            written,
            changes: Vec::new(),
            replies: Vec::new(),
            sent: 0,
            committed: 0,
            held: VecDeque::new(),
            keys: HashMap::new(),
            next_id: 1,
            calls: FuturesUnordered::new(),
            draining: false,
            read: vec![false; pools.providers().len()],
        };
        state.restore(now);
        state.step();
        // The restart's own changes are committed before anything is served.
        state.wait_committed().await?;
        let task = tokio::spawn(async move {
            let result = state.run(inbox, stopped).await;
            let batches = state.batches.take();
            drop(batches);
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
            result
        });
        Ok(Engine {
            handle: EngineHandle { commands },
            shared,
            task,
            stop: Some(stop),
        })
    }

    /// Begins an orderly shutdown: requests answer `503` from now on; calls
    /// in flight may finish within `grace`; what they decide is committed.
    /// Await [`task`](Engine::task) for the end.
    pub fn shutdown(&mut self, grace: Duration) {
        self.shared.accepting.store(false, Ordering::SeqCst);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(grace);
        }
    }
}

type CallFuture = Pin<Box<dyn Future<Output = Finished> + Send>>;

/// A call that ended: answered, or dropped at its deadline.
struct Finished {
    id: CallId,
    pool: PoolId,
    list: bool,
    answer: Option<Answer>,
}

struct State {
    core: Core,
    providers: Vec<Arc<dyn Provider>>,
    names: Vec<String>,
    clock: Arc<dyn Clock>,
    shared: Arc<Shared>,
    batches: Option<std::sync::mpsc::Sender<Batch>>,
    written: mpsc::UnboundedReceiver<Written>,
    /// The batch being gathered in this step.
    changes: Vec<Change>,
    replies: Vec<Reply>,
    /// The last batch sent, and the last committed.
    sent: u64,
    committed: u64,
    /// Calls waiting for the commit of the batch numbered with them.
    held: VecDeque<(u64, Action)>,
    /// Every idempotency key, committed or not yet.
    keys: HashMap<String, u64>,
    next_id: u64,
    calls: FuturesUnordered<CallFuture>,
    draining: bool,
    /// Whether each pool's inventory has been read once since the start.
    read: Vec<bool>,
}

fn to_job(record: &JobRecord) -> Job {
    let job = Job::new(JobId(record.id), record.command.clone())
        .with_labels(record.labels.clone())
        .with_trust(record.trust);
    match record.timeout {
        Some(timeout) => job.with_timeout(timeout),
        None => job,
    }
}

impl State {
    /// Hands the stored jobs to the new core (L6, B8).
    fn restore(&mut self, now: SystemTime) {
        let jobs = Arc::clone(&self.shared.jobs);
        let jobs = jobs.read();
        self.next_id = jobs.last_id() + 1;
        for record in jobs.iter() {
            if let Some(key) = &record.key {
                self.keys.insert(key.clone(), record.id);
            }
            let id = JobId(record.id);
            if record.state.has_ended() {
                self.core.ended_before(id);
                continue;
            }
            if let Some(ending) = &record.ending {
                // Decided and committed before the crash: its instance, if
                // still there, is collected as an orphan.
                self.core.ended_before(id);
                self.changes.push(Change::Ended {
                    id: record.id,
                    ending: ending.clone(),
                    at: now,
                });
                self.shared.metrics.ended(ending.state.as_str());
                continue;
            }
            if record.state == JobState::Running {
                self.changes.push(Change::Requeued { id: record.id });
            }
            // A job that held a lease (running at the crash, or requeued by
            // an earlier start that died before adopting it) is not placed
            // before that pool's first inventory shows whether its instance
            // is still there: adopted then, never doubled.
            let held_on = record
                .pool
                .as_ref()
                .and_then(|pool| self.names.iter().position(|name| name == pool));
            if let Some(pool) = held_on {
                self.core.held_before(id, PoolId(pool));
            }
            // Every unfinished job goes back in submission order, before any
            // inventory answers, so none overtakes another.
            self.hand_over(to_job(record), record.cancel_requested, now);
            // Its timeout still runs from its first start (L14).
            if let Some(started) = record.started_at {
                self.core.started_before(id, started);
            }
        }
    }

    /// Submits a stored job to the core again; one it now refuses (the
    /// configuration changed) ends failed, saying why.
    fn hand_over(&mut self, job: Job, cancel: bool, now: SystemTime) {
        let id = job.id;
        match self.core.submit(job, now) {
            Ok(()) => {
                if cancel {
                    self.core.cancel(id, now);
                }
            }
            Err(refusal) => {
                tracing::warn!(job = id.0, %refusal, "a stored job is refused at restart; it ends failed");
                self.changes.push(Change::Ended {
                    id: id.0,
                    ending: Ending {
                        state: JobState::Failed,
                        exit_code: None,
                        reason: Some(format!("refused at restart: {refusal}")),
                    },
                    at: now,
                });
                self.shared.metrics.ended("failed");
            }
        }
    }

    async fn run(
        &mut self,
        mut inbox: mpsc::UnboundedReceiver<Command>,
        mut stop: oneshot::Receiver<Duration>,
    ) -> Result<(), EngineError> {
        let mut drain_until: Option<SystemTime> = None;
        loop {
            if let Some(until) = drain_until
                && (self.calls.is_empty() || self.clock.now() >= until)
            {
                // Whatever the last answers decided is committed; calls still
                // running are dropped (their effect is settled by the next
                // start's inventories).
                self.step();
                self.wait_committed().await?;
                return Ok(());
            }
            let wake = if self.draining {
                drain_until
            } else {
                self.core.poll_timeout()
            };
            let clock = Arc::clone(&self.clock);
            let sleep = async move {
                match wake {
                    Some(at) => clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                written = self.written.recv() => self.on_written(written)?,
                grace = &mut stop, if !self.draining => {
                    let grace = grace.unwrap_or_default();
                    tracing::info!(calls = self.calls.len(), "shutting down: finishing the calls in flight");
                    self.draining = true;
                    drain_until = Some(self.clock.now() + grace);
                    inbox.close();
                }
                command = inbox.recv(), if !self.draining => match command {
                    Some(command) => self.on_command(command),
                    None => {
                        self.draining = true;
                        drain_until = Some(self.clock.now());
                    }
                },
                Some(finished) = self.calls.next(), if !self.calls.is_empty() => {
                    self.on_finished(finished);
                }
                () = sleep => {
                    if !self.draining {
                        self.core.handle_timeout(self.clock.now());
                    }
                }
            }
            self.step();
        }
    }

    /// Waits until every batch sent is committed.
    async fn wait_committed(&mut self) -> Result<(), EngineError> {
        while self.committed < self.sent {
            let written = self.written.recv().await;
            self.on_written(written)?;
        }
        Ok(())
    }

    fn on_written(&mut self, written: Option<Written>) -> Result<(), EngineError> {
        match written {
            Some(Written::Committed(seq)) => {
                self.committed = seq;
                while let Some((gate, _)) = self.held.front() {
                    if *gate > self.committed {
                        break;
                    }
                    if let Some((_, action)) = self.held.pop_front() {
                        self.perform(action);
                    }
                }
                Ok(())
            }
            Some(Written::Failed(error)) => Err(error.into()),
            None => Err(EngineError::Writer("its channel closed".to_owned())),
        }
    }

    fn on_command(&mut self, command: Command) {
        let now = self.clock.now();
        match command {
            Command::Submit(job, reply) => self.submit(job, reply, now),
            Command::Cancel(id, reply) => self.cancel(id, reply, now),
        }
    }

    fn submit(&mut self, new: NewJob, reply: oneshot::Sender<Submitted>, now: SystemTime) {
        if let Some(&id) = new.key.as_ref().and_then(|key| self.keys.get(key)) {
            self.replies.push(Box::new(move |jobs: &Jobs| {
                let answer = match jobs.get(id) {
                    Some(record) => Submitted::Existing(record.view()),
                    None => Submitted::Refused("its key's job is not recorded".to_owned()),
                };
                let _ = reply.send(answer);
            }));
            return;
        }
        let id = self.next_id;
        let record = JobRecord::accepted(id, new, now);
        match self.core.submit(to_job(&record), now) {
            Err(refusal) => {
                let _ = reply.send(Submitted::Refused(refusal.to_string()));
            }
            Ok(()) => {
                self.next_id += 1;
                if let Some(key) = &record.key {
                    self.keys.insert(key.clone(), id);
                }
                tracing::info!(job = id, "accepted");
                self.changes.push(Change::Accepted(Box::new(record)));
                self.replies.push(Box::new(move |jobs: &Jobs| {
                    if let Some(record) = jobs.get(id) {
                        let _ = reply.send(Submitted::Created(record.view()));
                    }
                }));
            }
        }
    }

    fn cancel(&mut self, id: u64, reply: oneshot::Sender<Cancelled>, now: SystemTime) {
        let asked = self.core.cancel(JobId(id), now);
        if asked {
            self.changes.push(Change::CancelRequested { id });
        }
        self.replies.push(Box::new(move |jobs: &Jobs| {
            let answer = match jobs.get(id) {
                None => Cancelled::Unknown,
                Some(record) if !asked && record.state.has_ended() => {
                    Cancelled::Ended(record.view())
                }
                Some(record) => Cancelled::Done(record.view()),
            };
            let _ = reply.send(answer);
        }));
    }

    fn on_finished(&mut self, finished: Finished) {
        let pool = &self.names[finished.pool.0];
        if finished.list {
            self.shared.listing.lock()[finished.pool.0] = None;
            let listed = match &finished.answer {
                Some(Answer::Listed(Ok(instances))) => Some(instances.len()),
                _ => None,
            };
            let mut unreadable = self.shared.unreadable.lock();
            match listed {
                Some(instances) => {
                    unreadable.remove(pool);
                    if !std::mem::replace(&mut self.read[finished.pool.0], true) {
                        tracing::info!(%pool, instances, "first inventory read; placing from now on");
                    }
                }
                None => {
                    unreadable.insert(pool.clone());
                }
            }
        }
        if self.draining {
            // Answers still reach the core, so what they decide is committed.
            if let Some(answer) = finished.answer {
                self.core
                    .handle_answer(finished.id, answer, self.clock.now());
            }
            return;
        }
        match finished.answer {
            Some(answer) => self
                .core
                .handle_answer(finished.id, answer, self.clock.now()),
            // Dropped at its deadline: the core treats it as lost at that
            // deadline; hand it the time.
            None => self.core.handle_timeout(self.clock.now()),
        }
    }

    /// After every input: decisions become changes, the batch goes to the
    /// writer, and calls go out once what was decided before them is
    /// committed.
    fn step(&mut self) {
        let now = self.clock.now();
        while let Some(decision) = self.core.poll_decision() {
            self.on_decision(decision, now);
        }
        if !self.changes.is_empty() || !self.replies.is_empty() {
            self.sent += 1;
            let batch = Batch {
                seq: self.sent,
                changes: std::mem::take(&mut self.changes),
                replies: std::mem::take(&mut self.replies),
            };
            if let Some(batches) = &self.batches {
                // A writer that is gone reports why through `written`.
                let _ = batches.send(batch);
            }
        }
        while let Some(action) = self.core.poll_action() {
            if self.draining {
                // Not started while stopping: its effect is decided again
                // at the next start.
                continue;
            }
            if self.committed < self.sent {
                self.held.push_back((self.sent, action));
            } else {
                self.perform(action);
            }
        }
        let stats = self.core.stats();
        self.shared.metrics.observe(&stats);
        *self.shared.pools.write() = stats
            .pools
            .iter()
            .map(|pool| PoolView {
                name: pool.name.clone(),
                kind: pool.kind.to_string(),
                capacity: pool.capacity,
                held: pool.leases,
                queued: pool.queued,
                contested: pool.contested,
                leftovers: pool.leftovers,
                unsettled: pool.unsettled,
            })
            .collect();
    }

    fn on_decision(&mut self, decision: Decision, now: SystemTime) {
        let name = |pool: PoolId| self.names[pool.0].clone();
        let change = match decision {
            Decision::Placed { job, pool } => Some(Change::Placed {
                id: job.0,
                pool: name(pool),
                at: now,
            }),
            Decision::Launched {
                job,
                pool,
                instance,
            }
            | Decision::Adopted {
                job,
                pool,
                instance,
            } => Some(Change::Backed {
                id: job.0,
                pool: name(pool),
                instance: instance.as_str().to_owned(),
                at: now,
            }),
            Decision::Retrying { .. } => None,
            Decision::Ending { job, outcome, .. } => Some(Change::Ending {
                id: job.0,
                ending: Ending::from(&outcome),
            }),
            Decision::Ended { job, outcome, .. } => {
                let ending = Ending::from(&outcome);
                self.shared.metrics.ended(ending.state.as_str());
                tracing::info!(job = job.0, %outcome, "ended");
                Some(Change::Ended {
                    id: job.0,
                    ending,
                    at: now,
                })
            }
            Decision::Orphan {
                pool,
                instance,
                name: instance_name,
                fate,
            } => {
                tracing::info!(pool = %name(pool), instance = instance.as_str(), name = %instance_name, ?fate, "orphan");
                None
            }
            Decision::Foreign {
                pool,
                instance,
                name: instance_name,
                live,
            } => {
                let pool = name(pool);
                if live {
                    tracing::warn!(%pool, instance = instance.as_str(), name = %instance_name,
                        "another store is launching into this deployment: its instance is never adopted nor destroyed; run one billet serve per deployment");
                } else {
                    tracing::warn!(%pool, instance = instance.as_str(), name = %instance_name,
                        "an instance another store left: never adopted; collected as an orphan after the grace");
                }
                self.shared.metrics.foreign(&pool, live);
                None
            }
            Decision::InventoryError { pool, error } => {
                let pool = name(pool);
                tracing::warn!(%pool, %error, "inventory unreadable; nothing freed");
                self.shared.metrics.inventory_error(&pool);
                self.shared.unreadable.lock().insert(pool);
                None
            }
        };
        if let Some(change) = change {
            self.changes.push(change);
        }
    }

    fn perform(&mut self, action: Action) {
        let provider = Arc::clone(&self.providers[action.pool.0]);
        let deadline = self.clock.sleep_until(action.deadline);
        let list = matches!(action.call, Call::List);
        let (id, pool) = (action.id, action.pool);
        if list {
            self.shared.listing.lock()[pool.0] = Some(self.clock.now());
        }
        self.calls.push(Box::pin(async move {
            let answer = tokio::select! {
                answer = billet_scheduler::perform(&*provider, action.call) => Some(answer),
                () = deadline => None,
            };
            Finished {
                id,
                pool,
                list,
                answer,
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // L14: a hung inventory read is said after the reconcile interval, but
    // never before 2 s nor after 10 s.
    #[test]
    fn l14_the_stall_bound_follows_the_reconcile_interval() {
        let secs = Duration::from_secs;
        assert_eq!(stall_bound(Duration::from_millis(500)), secs(2));
        assert_eq!(stall_bound(secs(2)), secs(2));
        assert_eq!(stall_bound(secs(5)), secs(5));
        assert_eq!(stall_bound(secs(10)), secs(10));
        assert_eq!(stall_bound(secs(60)), secs(10));
    }
}
