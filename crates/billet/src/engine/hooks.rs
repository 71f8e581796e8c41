//! The engine's side of the scheduler's loop ([`EngineHooks`]): requests,
//! commits and the stop come in as inputs; decisions become changes; a call
//! waits at the gate until what was decided before it is committed (L6).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_scheduler::{
    Action, Answer, Call, CallEnded, Core, Decision, Driver, Flow, Gate, Hooks, Job, JobId, PoolId,
    Turn, Waiting,
};
use tokio::sync::{mpsc, oneshot};

use crate::api::JobView;
use crate::commit::{Batch, Reply, Writer, Written};
use crate::jobs::Jobs;
use crate::record::{Change, JobRecord, JobState, NewJob, Verdict};

use super::intake::{Cancelled, Command, Submitted};
use super::keys::Keys;
use super::shared::Shared;
use super::{COMMIT_WAIT, DecisionTap, EngineError, INTAKE_BATCH, PRUNE_EVERY, Quiet};

/// The engine's side of the scheduler's loop ([`Driver`]): requests, commits
/// and the stop come in as inputs; decisions become changes (the tap); a
/// call waits at the gate until what was decided before it is committed.
pub(super) struct EngineHooks {
    pub(super) names: Vec<String>,
    pub(super) shared: Arc<Shared>,
    /// Where batches go to be committed; taken at the end.
    pub(super) writer: Option<Writer>,
    pub(super) written: mpsc::UnboundedReceiver<Written>,
    pub(super) inbox: mpsc::Receiver<Command>,
    pub(super) stop: oneshot::Receiver<Duration>,
    /// The batch being gathered in this step.
    pub(super) changes: Vec<Change>,
    pub(super) replies: Vec<Reply>,
    /// The last batch sent, and the last committed.
    pub(super) sent: u64,
    pub(super) committed: u64,
    /// The idempotency keys of jobs not yet ended (see [`Keys`]); older
    /// ones are found in the archive.
    pub(super) keys: Keys,
    pub(super) next_id: u64,
    /// Set once the stop is asked or the requests end: no request is read
    /// from then on.
    pub(super) draining: bool,
    /// Whether each pool's inventory has been read once since the start.
    pub(super) read: Vec<bool>,
    /// How long ended jobs are kept.
    pub(super) retain: Duration,
    /// The most jobs not yet ended (L19).
    pub(super) max_queued: usize,
    /// How long a change that can wait is held back at most.
    pub(super) hold: Duration,
    /// When retention next looks.
    pub(super) next_prune: SystemTime,
    /// The cutoff the batch being gathered carries to the writer.
    pub(super) prune: Option<SystemTime>,
    /// Told of every decision, if anyone asked.
    pub(super) tap: Option<DecisionTap>,
    /// Whether the core waited for nothing after the last step.
    pub(super) idle: bool,
    /// When the changes held back ([`Change::can_wait`]) are committed on
    /// their own if no batch carried them before; `None` while none is held.
    pub(super) flush_at: Option<tokio::time::Instant>,
    /// Set when the changes held back are to go with the next step's batch.
    pub(super) flush: bool,
}

pub(super) fn to_job(record: &JobRecord) -> Job {
    let job = Job::new(JobId(record.id), record.command.clone())
        .with_labels(record.labels.clone())
        .with_trust(record.trust);
    let job = match &record.pinned {
        Some(pool) => job.in_pool(pool.clone()),
        None => job,
    };
    match record.timeout {
        Some(timeout) => job.with_timeout(timeout),
        None => job,
    }
}

/// The answer to a submission whose key names `record` (L18): that job when
/// it asks for the same, its id alone when it asks for something else.
fn repeated(record: &JobRecord, asked: &NewJob) -> Submitted {
    if record.asked_as(asked) {
        Submitted::Existing(JobView::of(record))
    } else {
        Submitted::Conflicting(record.id)
    }
}

/// An input of the engine's own, beside the calls and timers the loop waits
/// on: a commit, the stop, a request.
pub(super) enum Input {
    Written(Option<Written>),
    Stop(Duration),
    /// At most [`INTAKE_BATCH`] requests, in the order sent.
    Commands(Vec<Command>),
    /// Every handle is gone: no request will come.
    Closed,
    /// The changes held back have waited [`Bounds::hold`].
    Flush,
}

impl EngineHooks {
    /// Hands the stored jobs to the new core (L6, B8).
    pub(super) fn restore(&mut self, core: &mut Core, now: SystemTime) {
        let jobs = Arc::clone(&self.shared.jobs);
        let jobs = jobs.read();
        // Every job up to the last not handed over below ended (or was
        // pruned): its instance, if one is left, is an orphan (B8).
        core.ended_through(JobId(self.next_id - 1));
        for record in jobs.iter() {
            if let Some(key) = &record.key {
                self.keys.insert(key, record.id);
            }
            let id = JobId(record.id);
            if let Some(verdict) = record.decided() {
                // Decided and committed before the crash: its instance, if
                // still there, is collected as an orphan.
                core.ended_before(id);
                self.retire_key(record.id);
                self.changes.push(Change::Ended {
                    id: record.id,
                    verdict: verdict.clone(),
                    at: now,
                });
                self.shared.metrics.ended(verdict.state.as_str());
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
                core.held_before(id, PoolId(pool));
            }
            // Every unfinished job goes back in submission order, before any
            // inventory answers, so none overtakes another.
            self.hand_over(core, to_job(record), record.cancel_requested, now);
            // Its timeout still runs from its first start (L14).
            if let Some(started) = record.started_at {
                core.started_before(id, started);
            }
        }
    }

    /// Submits a stored job to the core again; one it now refuses (the
    /// configuration changed) ends failed, saying why.
    fn hand_over(&mut self, core: &mut Core, job: Job, cancel: bool, now: SystemTime) {
        let id = job.id;
        match core.submit(job, now) {
            Ok(()) => {
                if cancel {
                    core.cancel(id, now);
                }
            }
            Err(refusal) => {
                tracing::warn!(job = id.0, %refusal, "a stored job is refused at restart; it ends failed");
                self.retire_key(id.0);
                self.changes.push(Change::Ended {
                    id: id.0,
                    verdict: Verdict {
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

    /// Waits until every batch sent is committed, releasing the calls each
    /// commit lets go; a store that answers no commit for [`COMMIT_WAIT`]
    /// is an error. With `or_full`, a store that says it is full (L25) ends
    /// the wait at once: the engine's loop goes on waiting for that commit
    /// while the service answers (`507` to new work), as at a start on a
    /// full disk.
    pub(super) async fn wait_committed(
        &mut self,
        driver: &mut Driver,
        or_full: bool,
    ) -> Result<(), EngineError> {
        while self.committed < self.sent {
            if or_full && self.shared.store_full.lock().is_some() {
                return Ok(());
            }
            let Ok(written) = tokio::time::timeout(COMMIT_WAIT, self.written.recv()).await else {
                return Err(EngineError::Writer(format!(
                    "no commit answered within {COMMIT_WAIT:?}"
                )));
            };
            let through = self.on_written(written)?;
            driver.release(through, self);
        }
        Ok(())
    }

    /// Sends the batch gathered, unless all it holds is changes that can
    /// wait ([`Change::can_wait`]) and no flush is due: those are then held
    /// for a later batch, at most [`Bounds::hold`].
    pub(super) fn send_gathered(&mut self) {
        let urgent = self.flush
            || self.hold.is_zero()
            || !self.replies.is_empty()
            || self.prune.is_some()
            || self.changes.iter().any(|change| !change.can_wait());
        if !urgent {
            if !self.changes.is_empty() && self.flush_at.is_none() {
                self.flush_at = Some(tokio::time::Instant::now() + self.hold);
            }
            return;
        }
        self.flush = false;
        self.flush_at = None;
        if self.changes.is_empty() && self.replies.is_empty() && self.prune.is_none() {
            return;
        }
        self.sent += 1;
        let batch = Batch {
            seq: self.sent,
            changes: std::mem::take(&mut self.changes),
            replies: std::mem::take(&mut self.replies),
            prune: self.prune.take(),
        };
        if let Some(writer) = &mut self.writer
            && let Some(through) = writer.send(batch)
        {
            // Committed already (an instant store): the calls this step
            // asks for need not wait for it.
            self.on_committed(through);
        }
    }

    /// Every batch through `seq` is committed and applied.
    fn on_committed(&mut self, seq: u64) {
        self.committed = seq;
        self.shared.store_full.lock().take();
        self.keys.applied(seq);
    }

    /// Job `id` ends in the batch being gathered: its key, if it has one,
    /// is found in the archive once that batch is committed.
    fn retire_key(&mut self, id: u64) {
        self.keys.retire(id, self.sent);
    }

    /// Takes a commit: answers the batch committed through.
    fn on_written(&mut self, written: Option<Written>) -> Result<u64, EngineError> {
        match written {
            Some(Written::Committed(seq)) => {
                self.on_committed(seq);
                Ok(seq)
            }
            Some(Written::Failed(error)) => Err(error.into()),
            Some(Written::Full(why)) => {
                *self.shared.store_full.lock() = Some(why);
                Ok(self.committed)
            }
            None => Err(EngineError::Writer("its channel closed".to_owned())),
        }
    }

    fn submit(
        &mut self,
        core: &mut Core,
        new: NewJob,
        reply: oneshot::Sender<Submitted>,
        now: SystemTime,
    ) {
        if let Some(why) = self.shared.store_full.lock().clone() {
            let _ = reply.send(Submitted::NoSpace(why));
            return;
        }
        if let Some(id) = new.key.as_ref().and_then(|key| self.keys.get(key)) {
            self.replies.push(Box::new(move |jobs: &Jobs| {
                let answer = match jobs.find(id) {
                    Ok(Some(record)) => repeated(&record, &new),
                    Ok(None) => Submitted::Refused("its key's job is not recorded".to_owned()),
                    Err(error) => Submitted::Unreadable(error.to_string()),
                };
                let _ = reply.send(answer);
            }));
            return;
        }
        if let Some(key) = &new.key {
            // Not a job in memory's: an ended job's, if any, is in the archive.
            match self.shared.archive.by_key(key) {
                Ok(None) => {}
                Ok(Some(record)) => {
                    let answer = repeated(&record, &new);
                    self.replies.push(Box::new(move |_: &Jobs| {
                        let _ = reply.send(answer);
                    }));
                    return;
                }
                Err(error) => {
                    let _ = reply.send(Submitted::Unreadable(error.to_string()));
                    return;
                }
            }
        }
        if core.unended() >= self.max_queued {
            let _ = reply.send(Submitted::Full(self.max_queued));
            return;
        }
        let id = self.next_id;
        let record = JobRecord::accepted(id, new, now);
        match core.submit(to_job(&record), now) {
            Err(refusal) => {
                let _ = reply.send(Submitted::Refused(refusal.to_string()));
            }
            Ok(()) => {
                self.next_id += 1;
                if let Some(key) = &record.key {
                    self.keys.insert(key, id);
                }
                tracing::info!(job = id, "accepted");
                self.changes.push(Change::Accepted(Box::new(record)));
                self.replies.push(Box::new(move |jobs: &Jobs| {
                    let answer = match jobs.find(id) {
                        Ok(Some(record)) => Submitted::Created(JobView::of(&record)),
                        Ok(None) => return,
                        Err(error) => Submitted::Unreadable(error.to_string()),
                    };
                    let _ = reply.send(answer);
                }));
            }
        }
    }

    fn cancel(
        &mut self,
        core: &mut Core,
        id: u64,
        reply: oneshot::Sender<Cancelled>,
        now: SystemTime,
    ) {
        if let Some(why) = self.shared.store_full.lock().clone() {
            let _ = reply.send(Cancelled::NoSpace(why));
            return;
        }
        let asked = core.cancel(JobId(id), now);
        if asked {
            self.changes.push(Change::CancelRequested { id });
        }
        self.replies.push(Box::new(move |jobs: &Jobs| {
            let answer = match jobs.find(id) {
                Ok(None) => Cancelled::Unknown,
                Ok(Some(record)) if !asked && record.state.has_ended() => {
                    Cancelled::Ended(JobView::of(&record))
                }
                Ok(Some(record)) => Cancelled::Requested(JobView::of(&record)),
                Err(error) => Cancelled::Unreadable(error.to_string()),
            };
            let _ = reply.send(answer);
        }));
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
            Decision::OutcomeDecided { job, outcome, .. } => Some(Change::Decided {
                id: job.0,
                verdict: Verdict::from(&outcome),
            }),
            Decision::Ended { job, outcome, .. } => {
                self.retire_key(job.0);
                let verdict = Verdict::from(&outcome);
                self.shared.metrics.ended(verdict.state.as_str());
                tracing::info!(job = job.0, %outcome, "ended");
                Some(Change::Ended {
                    id: job.0,
                    verdict,
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
}

/// How the engine plugs into the scheduler's loop. After every input the loop
/// steps: the counts become the metrics and pool views, decisions become
/// changes, the batch goes to the writer, and calls go out once what was
/// decided before them is committed.
impl Hooks for EngineHooks {
    type Input = Input;
    type Error = EngineError;

    async fn next_input(&mut self) -> Option<Input> {
        let draining = self.draining;
        let inbox = &mut self.inbox;
        let flush_at = self.flush_at;
        // Commits first, then the stop, then requests (none once stopping):
        // at most INTAKE_BATCH of them, after which the loop looks at its
        // calls and timer before it asks again.
        Some(tokio::select! {
            biased;
            written = self.written.recv() => Input::Written(written),
            grace = &mut self.stop, if !draining => Input::Stop(grace.unwrap_or_default()),
            () = async {
                if let Some(at) = flush_at {
                    tokio::time::sleep_until(at).await;
                }
            }, if flush_at.is_some() => Input::Flush,
            commands = async {
                let mut commands = Vec::new();
                // Cancel-safe: nothing is taken unless it is returned.
                inbox.recv_many(&mut commands, INTAKE_BATCH).await;
                commands
            }, if !draining => if commands.is_empty() {
                Input::Closed
            } else {
                Input::Commands(commands)
            },
        })
    }

    fn on_input(&mut self, input: Input, turn: Turn<'_>) -> Result<Flow, EngineError> {
        let now = turn.now;
        Ok(match input {
            Input::Written(written) => Flow::Release(self.on_written(written)?),
            Input::Stop(grace) => {
                tracing::info!(
                    calls = turn.in_flight,
                    "shutting down: finishing the calls in flight"
                );
                self.draining = true;
                self.inbox.close();
                Flow::Drain(now + grace)
            }
            Input::Commands(commands) => {
                // Not quiescent from here: said before the batch these make
                // is sent, so before any of them is answered (H13).
                self.shared
                    .quiet
                    .send_if_modified(|quiet| quiet.take().is_some());
                for command in commands {
                    match command {
                        Command::Submit(job, reply) => self.submit(turn.core, job, reply, now),
                        Command::Cancel(id, reply) => self.cancel(turn.core, id, reply, now),
                    }
                }
                Flow::Continue
            }
            Input::Closed => {
                self.draining = true;
                Flow::Drain(now)
            }
            Input::Flush => {
                // The timer has fired: the next step sends what is held.
                self.flush_at = None;
                self.flush = true;
                Flow::Continue
            }
        })
    }

    fn observe(&mut self, core: &Core) {
        self.idle = core.is_idle();
        let stats = core.stats();
        self.shared.metrics.observe(&stats);
        self.shared.history.record(self.shared.now(), &stats.pools);
        *self.shared.stats.write() = stats;
    }

    fn decided(&mut self, decision: Decision, now: SystemTime) {
        if let Some(tap) = &self.tap {
            tap(&decision, now);
        }
        self.on_decision(decision, now);
    }

    fn decided_all(&mut self, now: SystemTime) {
        if now >= self.next_prune {
            self.next_prune = now + PRUNE_EVERY;
            self.prune = now.checked_sub(self.retain);
        }
        self.send_gathered();
    }

    /// A call waits for the commit of the last batch sent before it.
    fn gate(&mut self, _: &Action) -> Gate {
        if self.committed < self.sent {
            Gate::Hold(self.sent)
        } else {
            Gate::Go
        }
    }

    fn calling(&mut self, action: &Action, now: SystemTime) {
        if matches!(action.call, Call::List) {
            self.shared.listing.lock()[action.pool.0] = Some(now);
        }
    }

    /// Quiescent (H13) when the loop waits on nothing but its timer and
    /// nothing of the engine's own is pending: no request waiting, every
    /// batch committed, not draining. (A timer already due makes a `Quiet`
    /// whose wake is its `at`: it holds at no time, [`Quiet::holds_at`].)
    fn waiting(&mut self, waiting: &Waiting) {
        let quiet = (waiting.in_flight == 0
            && waiting.held == 0
            && !waiting.draining
            && self.committed == self.sent
            && self.inbox.is_empty())
        .then_some(Quiet {
            at: waiting.now,
            wake: waiting.wake,
            idle: self.idle,
            settled: self.changes.is_empty(),
        });
        self.shared.quiet.send_if_modified(|now| {
            let changed = *now != quiet;
            *now = quiet;
            changed
        });
    }

    fn ended(&mut self, call: &CallEnded) {
        if !call.list {
            return;
        }
        let pool = &self.names[call.pool.0];
        self.shared.listing.lock()[call.pool.0] = None;
        let listed = match &call.answer {
            Some(Answer::Listed(Ok(instances))) => Some(instances.len()),
            _ => None,
        };
        let mut unreadable = self.shared.unreadable.lock();
        match listed {
            Some(instances) => {
                unreadable.remove(pool);
                if !std::mem::replace(&mut self.read[call.pool.0], true) {
                    tracing::info!(%pool, instances, "first inventory read; placing from now on");
                }
            }
            None => {
                unreadable.insert(pool.clone());
            }
        }
    }
}
