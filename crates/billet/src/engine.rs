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
//! * A change nothing waits on ([`Change::can_wait`]: an instance backing a
//!   job, a job's end once its instance is destroyed) rides with the next
//!   batch, and is committed on its own at the latest [`Bounds::hold`] after
//!   it was decided, or when the engine stops in order: under load, one
//!   `fsync` per step rather than two. A crash loses at most those, and the
//!   restart learns them again (the inventory, the committed outcome).
//! * At start, jobs come back from the store: the core is told that every
//!   job up to the last id that is not handed over again ended (so their
//!   leftover instances are collected), an outcome decided before the crash
//!   is kept, and every unfinished job queues again in submission order; one
//!   that held a lease is placed only once its pool's first inventory
//!   answered, so that the instance it may still have is adopted, never
//!   doubled.
//! * Intake is bounded (L12): at most [`Bounds::intake`] requests wait for
//!   the engine, and one past that is refused at once
//!   ([`Unanswered::Saturated`], `503` with `Retry-After`), nothing recorded.
//!   The engine takes at most [`INTAKE_BATCH`] of them at a time, and the
//!   loop then handles every provider answer and due timer before it takes
//!   more ([`Driver::run`]): intake never starves reconciles.
//! * Retention (L12): every [`PRUNE_EVERY`], jobs that ended more than
//!   [`Bounds::retain`] ago are removed from the store with their keys, in
//!   small transactions between commits (the writer, `commit.rs`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use billet_clock::Clock;
use billet_scheduler::{
    Action, Answer, Call, CallEnded, Core, Decision, Driver, Flow, Gate, Hooks, Job, JobId, PoolId,
    PoolStats, Pools, Stats, Turn, Waiting,
};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::api::JobView;
use crate::commit::{Batch, Reply, Writer, Written};
use crate::jobs::Jobs;
use crate::metrics::Metrics;
use crate::output::OutputStore;
use crate::record::{Change, JobRecord, JobState, NewJob, Verdict};
use crate::store::{Archive, Store, StoreError};

mod intake;
mod keys;

use intake::Command;
pub use intake::{Cancelled, EngineHandle, Submitted, Unanswered};
use keys::Keys;

/// How many requests the engine takes from its intake in one input: the
/// most intake any provider answer or due timer waits behind (L12).
pub const INTAKE_BATCH: usize = 256;

/// How long, in wall time, the engine waits for the store to answer one
/// commit when it must (at the start, before it serves; at the end, before
/// it stops) before it gives up with an error: a store that hangs stops a
/// start rather than holding it for ever.
pub const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// The longest a change nothing waits on ([`Change::can_wait`]) is held
/// back for a later batch to carry by default ([`Bounds::hold`]), in wall
/// time: a job's end is shown (and its instance's id) at most this late.
pub const LAZY_COMMIT: Duration = Duration::from_millis(50);

/// How often retention looks for ended jobs past [`Bounds::retain`], in the
/// clock's time.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The engine is quiescent (H13): at clock time `at` it had no request
/// waiting, no provider call in flight or held at the gate, and everything
/// it decided committed (so every request it took is answered), but for
/// changes held back that nothing waits on ([`Quiet::settled`]); nothing but
/// a new request wakes it before `wake` (`None`: nothing at all), and what
/// the commit of those held back wakes it for decides nothing.
///
/// It stays so at any later time `t` with `wake` past `t` until a request
/// comes: a caller who knows its own requests are answered can move a
/// manual clock to `t` and know nothing happened in between
/// ([`Quiet::holds_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet {
    /// When it was last seen quiescent.
    pub at: SystemTime,
    /// When it next wakes by itself.
    pub wake: Option<SystemTime>,
    /// Whether its core waits for nothing (no job, no orphan, no instance
    /// unsettled, every inventory read): it then wakes only to read the
    /// inventories again, and a driver with no more work to give it need
    /// not move its clock for it.
    pub idle: bool,
    /// Whether every change decided is committed and shown, none held back
    /// for a later batch ([`LAZY_COMMIT`]): what a reader over HTTP sees is
    /// then all the engine decided.
    pub settled: bool,
}

impl Quiet {
    /// Whether, told no request since, the engine is quiescent at `t`: `t`
    /// is at or after `at`, and before it wakes.
    pub fn holds_at(&self, t: SystemTime) -> bool {
        t >= self.at && self.wake.is_none_or(|wake| wake > t)
    }
}

/// Told of every decision the engine's core makes, at the clock time it
/// makes it, in order, on the engine's task and before the decision's
/// changes are committed: for a driver that checks what a service decided
/// against what the backend holds (H13). It must not block; whatever it
/// keeps is its own to bound.
pub type DecisionTap = Arc<dyn Fn(&Decision, SystemTime) + Send + Sync>;

/// What the engine keeps bounded (L12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// How long an ended job is kept (`--retain`); removed, with its key,
    /// from memory and store after that.
    pub retain: Duration,
    /// The most requests waiting for the engine; past it a request is
    /// refused at once.
    pub intake: usize,
    /// The longest, in wall time, a change nothing waits on
    /// ([`Change::can_wait`]) is held back for a later batch to carry
    /// ([`LAZY_COMMIT`] by default).
    pub hold: Duration,
    /// Whether the engine reads its providers' hints (P9, B12), so that a
    /// job's end is seen when its instance stops rather than at the next
    /// reconcile. On by default; a provider without hints changes nothing.
    pub hints: bool,
}

/// Ended jobs are kept a week by default: long enough to look back on a
/// week's CI, short enough that the store stays small.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The most requests waiting for the engine by default: a few seconds of
/// intake at the rate a durable store commits.
pub const DEFAULT_INTAKE: usize = 4096;

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            retain: DEFAULT_RETAIN,
            intake: DEFAULT_INTAKE,
            hold: LAZY_COMMIT,
            hints: true,
        }
    }
}

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

impl PoolView {
    /// `pool`'s counts as the API shows them.
    pub fn of(pool: &PoolStats) -> PoolView {
        PoolView {
            name: pool.name.clone(),
            kind: pool.kind.to_string(),
            capacity: pool.capacity,
            held: pool.leases,
            queued: pool.queued,
            contested: pool.contested,
            leftovers: pool.leftovers,
            unsettled: pool.unsettled,
        }
    }
}

/// What the HTTP side reads without asking the engine.
#[derive(Debug)]
pub struct Shared {
    /// Every job not yet ended, exactly as committed, over the archive of
    /// those ended.
    pub jobs: Arc<RwLock<Jobs>>,
    /// Where ended jobs are read from.
    pub archive: Arc<Archive>,
    /// The scheduler's counts after the engine's last step: where the pools'
    /// figures are read ([`Shared::pools`]).
    pub stats: RwLock<Stats>,
    /// Pools whose last inventory could not be read.
    pub unreadable: Mutex<BTreeSet<String>>,
    /// The metrics.
    pub metrics: Metrics,
    /// Cleared once shutdown begins: requests then answer `503`.
    pub accepting: AtomicBool,
    /// Whether (and since when) the engine is quiescent (H13): `None` while
    /// it works.
    pub quiet: tokio::sync::watch::Sender<Option<Quiet>>,
    /// How many commits the store has made (see [`Store::commits`]).
    pub commits: Arc<AtomicU64>,
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
    /// Every pool as the engine's last step left it (what `GET /v1/pools`
    /// answers), in configuration order.
    pub fn pools(&self) -> Vec<PoolView> {
        self.stats.read().pools.iter().map(PoolView::of).collect()
    }

    /// What is wrong now; nothing when healthy.
    pub fn health(&self) -> Health {
        let now = self.clock.now();
        let mut unreadable = self.unreadable.lock().clone();
        let stats = self.stats.read();
        let pools = &stats.pools;
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
        bounds: Bounds,
    ) -> Result<Engine, EngineError> {
        Engine::start_tapped(pools, store, records, clock, bounds, None, None).await
    }

    /// [`start`](Engine::start), telling `tap` of every decision (also those
    /// of the restart itself), and removing from `output` the output of each
    /// ended job retention removes (L15).
    pub async fn start_tapped(
        pools: &Pools,
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
        bounds: Bounds,
        tap: Option<DecisionTap>,
        output: Option<Arc<OutputStore>>,
    ) -> Result<Engine, EngineError> {
        let names: Vec<String> = pools
            .config()
            .providers()
            .iter()
            .map(|p| p.name().to_owned())
            .collect();
        let metrics = Metrics::new(names.iter().map(String::as_str));
        let archive = store.archive();
        let last_id = store.last_id();
        let jobs = Arc::new(RwLock::new(Jobs::over(Arc::clone(&archive), records)));
        let shared = Arc::new(Shared {
            jobs: Arc::clone(&jobs),
            archive,
            stats: RwLock::new(Stats::default()),
            unreadable: Mutex::new(BTreeSet::new()),
            metrics,
            accepting: AtomicBool::new(true),
            quiet: tokio::sync::watch::Sender::new(None),
            commits: store.commits(),
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
        let (written_tx, written) = mpsc::unbounded_channel();
        let writer = Writer::start(store, jobs, written_tx, output)
            .map_err(|e| EngineError::Writer(e.to_string()))?;
        let (commands, inbox) = mpsc::channel(bounds.intake.max(1));
        let (stop, stopped) = oneshot::channel();
        let now = clock.now();
        let mut driver = Driver::with_core(core, pools, clock);
        if bounds.hints {
            driver.subscribe_hints();
        }
        let mut state = EngineHooks {
            names,
            shared: Arc::clone(&shared),
            writer: Some(writer),
            written,
            inbox,
            stop: stopped,
            changes: Vec::new(),
            replies: Vec::new(),
            sent: 0,
            committed: 0,
            keys: Keys::default(),
            next_id: last_id + 1,
            draining: false,
            read: vec![false; pools.providers().len()],
            retain: bounds.retain,
            hold: bounds.hold,
            next_prune: now,
            prune: None,
            tap,
            idle: false,
            flush_at: None,
            flush: true,
        };
        state.restore(driver.core_mut(), now);
        // The restart's own changes all go in its first batch.
        driver.step(&mut state);
        // The restart's own changes are committed before anything is served.
        state.wait_committed(&mut driver).await?;
        let task = tokio::spawn(async move {
            let mut result = driver.run(&mut state).await;
            if result.is_ok() {
                // Whatever the last answers decided is committed, the
                // changes held back with it.
                state.flush = true;
                state.send_gathered();
                result = state.wait_committed(&mut driver).await;
            }
            if let Some(writer) = state.writer.take() {
                let _ = tokio::task::spawn_blocking(move || writer.finish()).await;
            }
            result
        });
        Ok(Engine {
            handle: EngineHandle {
                commands,
                shared: Arc::clone(&shared),
            },
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

/// The engine's side of the scheduler's loop ([`Driver`]): requests, commits
/// and the stop come in as inputs; decisions become changes (the tap); a
/// call waits at the gate until what was decided before it is committed.
struct EngineHooks {
    names: Vec<String>,
    shared: Arc<Shared>,
    /// Where batches go to be committed; taken at the end.
    writer: Option<Writer>,
    written: mpsc::UnboundedReceiver<Written>,
    inbox: mpsc::Receiver<Command>,
    stop: oneshot::Receiver<Duration>,
    /// The batch being gathered in this step.
    changes: Vec<Change>,
    replies: Vec<Reply>,
    /// The last batch sent, and the last committed.
    sent: u64,
    committed: u64,
    /// The idempotency keys of jobs not yet ended (see [`Keys`]); older
    /// ones are found in the archive.
    keys: Keys,
    next_id: u64,
    /// Set once the stop is asked or the requests end: no request is read
    /// from then on.
    draining: bool,
    /// Whether each pool's inventory has been read once since the start.
    read: Vec<bool>,
    /// How long ended jobs are kept.
    retain: Duration,
    /// How long a change that can wait is held back at most.
    hold: Duration,
    /// When retention next looks.
    next_prune: SystemTime,
    /// The cutoff the batch being gathered carries to the writer.
    prune: Option<SystemTime>,
    /// Told of every decision, if anyone asked.
    tap: Option<DecisionTap>,
    /// Whether the core waited for nothing after the last step.
    idle: bool,
    /// When the changes held back ([`Change::can_wait`]) are committed on
    /// their own if no batch carried them before; `None` while none is held.
    flush_at: Option<tokio::time::Instant>,
    /// Set when the changes held back are to go with the next step's batch.
    flush: bool,
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

/// An input of the engine's own, beside the calls and timers the loop waits
/// on: a commit, the stop, a request.
enum Input {
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
    fn restore(&mut self, core: &mut Core, now: SystemTime) {
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
    /// is an error.
    async fn wait_committed(&mut self, driver: &mut Driver) -> Result<(), EngineError> {
        while self.committed < self.sent {
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
    fn send_gathered(&mut self) {
        let urgent = self.flush
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
        if let Some(id) = new.key.as_ref().and_then(|key| self.keys.get(key)) {
            self.replies.push(Box::new(move |jobs: &Jobs| {
                let answer = match jobs.find(id) {
                    Ok(Some(record)) => Submitted::Existing(JobView::of(&record)),
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
                    let view = JobView::of(&record);
                    self.replies.push(Box::new(move |_: &Jobs| {
                        let _ = reply.send(Submitted::Existing(view));
                    }));
                    return;
                }
                Err(error) => {
                    let _ = reply.send(Submitted::Unreadable(error.to_string()));
                    return;
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    use billet_provider::{Provider, TrustClass};
    use billet_simulated::{Host, SimulatedProvider};

    async fn engine() -> Engine {
        engine_over(Store::memory(), Vec::new()).await
    }

    async fn engine_over(store: Store, records: Vec<JobRecord>) -> Engine {
        engine_with(store, records, Arc::new(billet_clock::SystemClock)).await
    }

    async fn engine_with(store: Store, records: Vec<JobRecord>, clock: Arc<dyn Clock>) -> Engine {
        let provider: Arc<dyn Provider> = Arc::new(
            SimulatedProvider::builder("blue")
                .host(Host::new())
                .clock(Arc::clone(&clock))
                .build()
                .unwrap(),
        );
        engine_on(store, records, clock, provider).await
    }

    async fn engine_on(
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
        provider: Arc<dyn Provider>,
    ) -> Engine {
        let config = billet_config::Config::from_yaml_str(
            "deployment: {id: blue}\n\
             providers: [{name: linux, kind: docker, capacity: 2, docker: {image: runner}}]\n\
             routing: {default_kind: docker}\n",
        )
        .unwrap();
        let pools = Pools::builder(config)
            .provider("linux", provider)
            .build()
            .unwrap();
        Engine::start(&pools, store, records, clock, Bounds::default())
            .await
            .unwrap()
    }

    // L6: what a restart decides is committed, and the table shows it,
    // before the engine starts serving: a job that ran at the crash is
    // queued again the moment `start` returns (a durable store's commit
    // takes an fsync, so a start that did not wait would show it running).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn l6_a_restart_commits_what_it_decided_before_it_serves() {
        let dir = tempfile::tempdir().unwrap();
        let (store, records) = stored(dir.path(), None);
        assert_eq!(records[0].state, JobState::Running);
        let engine = engine_over(store, records).await;
        let state = engine.shared.jobs.read().find(1).unwrap().unwrap().state;
        assert_eq!(state, JobState::Queued);
        assert!(engine.shared.commits.load(Ordering::Relaxed) >= 1);
    }

    /// `f`, or a failure once an hour has passed: in paused time that is at
    /// once when nothing else can happen, so a mutant that never answers
    /// fails fast rather than hangs.
    async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(3600), f)
            .await
            .expect("answered")
    }

    // L6: a change nothing waits on (an instance backing a job) is not
    // committed on its own at once: it rides with the next batch, and alone
    // it is committed once LAZY_COMMIT has passed. Time is paused: tokio
    // moves it only when every task waits, so what is seen between is exact.
    #[tokio::test(start_paused = true)]
    async fn l6_a_change_nothing_waits_on_rides_with_the_next_batch() {
        let clock = Arc::new(billet_clock::ManualClock::new(SystemTime::UNIX_EPOCH));
        let engine = engine_with(Store::memory(), Vec::new(), clock).await;
        let commits = || engine.shared.commits.load(Ordering::Relaxed);
        let instance = |id| {
            let jobs = engine.shared.jobs.read();
            jobs.find(id).unwrap().unwrap().instance
        };
        let mut quiet = engine.shared.quiet.subscribe();
        let long = || NewJob {
            command: billet_simulated::run_for(Duration::from_secs(3600)),
            ..job()
        };
        // The first inventory is read: a job is placed as it is accepted.
        within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        let start = tokio::time::Instant::now();
        // A request that changes nothing is answered at once, alone.
        assert!(matches!(
            within(engine.handle.cancel(99)).await,
            Ok(Cancelled::Unknown)
        ));
        assert!(start.elapsed() < LAZY_COMMIT, "a reply waits for nothing");
        let base = commits();
        assert!(matches!(
            within(engine.handle.submit(long())).await,
            Ok(Submitted::Created(_))
        ));
        let seen = *within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        assert_eq!(
            seen.map(|q| q.settled),
            Some(false),
            "its instance is held back"
        );
        assert_eq!((commits(), instance(1)), (base + 1, None));
        // The next submission's batch carries it: one commit for both.
        assert!(matches!(
            within(engine.handle.submit(long())).await,
            Ok(Submitted::Created(_))
        ));
        assert_eq!(commits(), base + 2);
        assert!(instance(1).is_some(), "committed with job 2's acceptance");
        assert_eq!(instance(2), None);
        assert!(start.elapsed() < LAZY_COMMIT, "no flush was waited for");
        // Alone, it goes once LAZY_COMMIT has passed, not before.
        let seen = *within(quiet.wait_for(|q| q.is_some_and(|q| q.settled)))
            .await
            .unwrap();
        assert!(seen.is_some());
        assert_eq!(commits(), base + 3);
        assert!(instance(2).is_some());
        assert!(start.elapsed() >= LAZY_COMMIT);
        assert!(start.elapsed() < LAZY_COMMIT * 2);
    }

    /// A provider whose launches answer `delay` (tokio's time) after its
    /// backend's, and each later launch `stagger` more than the one before
    /// it, noting when.
    #[derive(Debug)]
    struct SlowLaunch {
        inner: Arc<dyn Provider>,
        delay: Duration,
        stagger: Duration,
        begun: std::sync::atomic::AtomicU32,
        answered: Mutex<Vec<tokio::time::Instant>>,
    }

    impl SlowLaunch {
        fn new(inner: Arc<dyn Provider>, delay: Duration, stagger: Duration) -> Self {
            SlowLaunch {
                inner,
                delay,
                stagger,
                begun: std::sync::atomic::AtomicU32::new(0),
                answered: Mutex::new(Vec::new()),
            }
        }
    }

    #[async_trait::async_trait]
    impl Provider for SlowLaunch {
        fn kind(&self) -> billet_provider::ProviderKind {
            self.inner.kind()
        }
        fn accepts(&self, trust: TrustClass) -> Result<(), billet_provider::Error> {
            self.inner.accepts(trust)
        }
        async fn launch(
            &self,
            spec: billet_provider::Spec,
        ) -> Result<billet_provider::Instance, billet_provider::Error> {
            let launched = self.inner.launch(spec).await;
            let nth = self.begun.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.delay + self.stagger * nth).await;
            self.answered.lock().push(tokio::time::Instant::now());
            launched
        }
        async fn find(
            &self,
            name: &str,
        ) -> Result<Option<billet_provider::Instance>, billet_provider::Error> {
            self.inner.find(name).await
        }
        async fn list(&self) -> Result<Vec<billet_provider::Instance>, billet_provider::Error> {
            self.inner.list().await
        }
        async fn destroy(
            &self,
            id: &billet_provider::InstanceId,
        ) -> Result<billet_provider::Teardown, billet_provider::Error> {
            self.inner.destroy(id).await
        }
    }

    /// An engine on a manual clock and a store in memory, over a
    /// [`SlowLaunch`] of a simulated provider.
    async fn slow_engine(delay: Duration, stagger: Duration) -> (Engine, Arc<SlowLaunch>) {
        let clock = Arc::new(billet_clock::ManualClock::new(SystemTime::UNIX_EPOCH));
        let simulated: Arc<dyn Provider> = Arc::new(
            SimulatedProvider::builder("blue")
                .host(Host::new())
                .clock(Arc::clone(&clock) as Arc<dyn Clock>)
                .build()
                .unwrap(),
        );
        let slow = Arc::new(SlowLaunch::new(simulated, delay, stagger));
        let engine = engine_on(
            Store::memory(),
            Vec::new(),
            clock,
            Arc::clone(&slow) as Arc<dyn Provider>,
        )
        .await;
        (engine, slow)
    }

    // L6: a held change waits its whole hold, counted from when it was
    // decided: a step before it that held nothing arms no flush (which
    // would commit it early, alone, and wake an idle engine for nothing).
    // The instance's id comes half a hold after the acceptance's commit.
    #[tokio::test(start_paused = true)]
    async fn l6_a_held_change_waits_its_whole_hold_from_when_it_was_decided() {
        let (engine, slow) = slow_engine(LAZY_COMMIT / 2, Duration::ZERO).await;
        let commits = || engine.shared.commits.load(Ordering::Relaxed);
        let mut quiet = engine.shared.quiet.subscribe();
        within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        let base = commits();
        let job = NewJob {
            command: billet_simulated::run_for(Duration::from_secs(3600)),
            ..job()
        };
        assert!(matches!(
            within(engine.handle.submit(job)).await,
            Ok(Submitted::Created(_))
        ));
        within(quiet.wait_for(|q| q.is_some_and(|q| q.settled)))
            .await
            .unwrap();
        let committed = tokio::time::Instant::now();
        let answered = slow.answered.lock()[0];
        assert_eq!(commits(), base + 2, "the acceptance, then the instance");
        assert!(
            committed - answered >= LAZY_COMMIT,
            "held {:?}",
            committed - answered
        );
        assert!(committed - answered < LAZY_COMMIT * 2);
        let jobs = engine.shared.jobs.read();
        assert!(jobs.find(1).unwrap().unwrap().instance.is_some());
    }

    // L6: a later change that can wait does not move the flush of one held
    // before it: the first instance's id is committed a hold after it was
    // decided, with the second's (decided half a hold later), not a hold
    // after the second.
    #[tokio::test(start_paused = true)]
    async fn l6_a_later_held_change_does_not_put_off_the_flush() {
        let (engine, slow) = slow_engine(LAZY_COMMIT / 4, LAZY_COMMIT / 2).await;
        let commits = || engine.shared.commits.load(Ordering::Relaxed);
        let mut quiet = engine.shared.quiet.subscribe();
        within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        let job = || NewJob {
            command: billet_simulated::run_for(Duration::from_secs(3600)),
            ..job()
        };
        for _ in 0..2 {
            assert!(matches!(
                within(engine.handle.submit(job())).await,
                Ok(Submitted::Created(_))
            ));
        }
        let accepted = commits();
        within(quiet.wait_for(|q| q.is_some_and(|q| q.settled)))
            .await
            .unwrap();
        let committed = tokio::time::Instant::now();
        let answered = slow.answered.lock().clone();
        assert_eq!(answered.len(), 2);
        assert_eq!(answered[1] - answered[0], LAZY_COMMIT / 2, "the setup");
        assert_eq!(commits(), accepted + 1, "both instances in one commit");
        let held = committed - answered[0];
        assert!(
            held >= LAZY_COMMIT && held < LAZY_COMMIT + LAZY_COMMIT / 4,
            "a hold after the first was decided, not after the second: held {held:?}"
        );
        let jobs = engine.shared.jobs.read();
        for id in [1, 2] {
            assert!(jobs.find(id).unwrap().unwrap().instance.is_some());
        }
    }

    /// A log sink for a test's own subscriber.
    #[derive(Clone, Default)]
    struct Logs(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Logs {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    // L8: a pool's first inventory read is logged once ("placing from now
    // on"), not at each read after it. The clock is moved to each reconcile
    // the engine names, three times.
    #[tokio::test(start_paused = true)]
    async fn l8_the_first_inventory_read_is_logged_once() {
        let logs = Logs::default();
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let clock = Arc::new(billet_clock::ManualClock::new(SystemTime::UNIX_EPOCH));
        let engine = engine_with(
            Store::memory(),
            Vec::new(),
            Arc::clone(&clock) as Arc<dyn Clock>,
        )
        .await;
        let mut quiet = engine.shared.quiet.subscribe();
        let mut seen = within(quiet.wait_for(|q| q.is_some()))
            .await
            .unwrap()
            .expect("quiescent");
        for _ in 0..3 {
            let wake = seen.wake.expect("a reconcile is ahead");
            clock.advance_to(wake).unwrap();
            seen = within(quiet.wait_for(|q| q.is_some_and(|q| q.at >= wake)))
                .await
                .unwrap()
                .expect("quiescent");
        }
        let text = String::from_utf8(logs.0.lock().clone()).unwrap();
        assert_eq!(text.matches("first inventory read").count(), 1, "{text}");
    }

    // L7: an engine stopped in order commits the changes it held back.
    #[tokio::test(start_paused = true)]
    async fn l7_a_shutdown_commits_what_was_held_back() {
        let clock = Arc::new(billet_clock::ManualClock::new(SystemTime::UNIX_EPOCH));
        let mut engine = engine_with(Store::memory(), Vec::new(), clock).await;
        let mut quiet = engine.shared.quiet.subscribe();
        let job = NewJob {
            command: billet_simulated::run_for(Duration::from_secs(3600)),
            ..job()
        };
        let start = tokio::time::Instant::now();
        assert!(matches!(
            within(engine.handle.submit(job)).await,
            Ok(Submitted::Created(_))
        ));
        let seen = *within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        assert_eq!(seen.map(|q| q.settled), Some(false));
        engine.shutdown(Duration::ZERO);
        within(&mut engine.task).await.unwrap().unwrap();
        assert!(start.elapsed() < LAZY_COMMIT, "not the flush's timer");
        let jobs = engine.shared.jobs.read();
        assert!(jobs.find(1).unwrap().unwrap().instance.is_some());
    }

    // L6: a restart whose only changes can wait (the ends of jobs whose
    // outcomes were committed) commits them before it serves.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn l6_a_restart_commits_the_ends_it_learns_before_it_serves() {
        let dir = tempfile::tempdir().unwrap();
        let finished = Verdict::from(&billet_scheduler::Outcome::Finished { exit_code: 0 });
        let (store, records) = stored(dir.path(), Some(finished));
        let engine = engine_over(store, records).await;
        let state = engine.shared.jobs.read().find(1).unwrap().unwrap().state;
        assert_eq!(state, JobState::Finished);
    }

    /// A durable store in `dir` where job 1 was accepted and placed on
    /// `linux`, and, given a verdict, its outcome decided; opened again.
    fn stored(dir: &std::path::Path, decided: Option<Verdict>) -> (Store, Vec<JobRecord>) {
        let now = SystemTime::now();
        {
            let (mut store, _) = Store::open(dir).unwrap();
            let mut changes = vec![
                Change::Accepted(Box::new(JobRecord::accepted(1, job(), now))),
                Change::Placed {
                    id: 1,
                    pool: "linux".to_owned(),
                    at: now,
                },
            ];
            if let Some(verdict) = decided {
                changes.push(Change::Decided { id: 1, verdict });
            }
            store.commit(&changes).unwrap();
        }
        Store::open(dir).unwrap()
    }

    fn job() -> NewJob {
        NewJob {
            command: vec!["true".to_owned()],
            labels: Vec::new(),
            trust: TrustClass::Trusted,
            timeout: None,
            key: None,
        }
    }

    // L7: a request the engine no longer answers says why: an engine that
    // stopped unasked is not "shutting down"; once the shutdown began, it is.
    #[tokio::test]
    async fn l7_an_unanswered_request_says_whether_billet_is_shutting_down() {
        let mut engine = engine().await;
        // Bounded: an engine that never answers fails the test, not hangs it.
        let answer = tokio::time::timeout(Duration::from_secs(10), engine.handle.submit(job()))
            .await
            .expect("the engine answers a submission");
        assert!(matches!(answer, Ok(Submitted::Created(_))));
        engine.task.abort();
        let _ = (&mut engine.task).await;
        assert_eq!(
            engine.handle.submit(job()).await.unwrap_err(),
            Unanswered::EngineStopped
        );
        engine.shutdown(Duration::ZERO);
        assert_eq!(
            engine.handle.cancel(1).await.unwrap_err(),
            Unanswered::ShuttingDown
        );
        assert_eq!(
            Unanswered::ShuttingDown.to_string(),
            "billet is shutting down"
        );
    }

    // L12: a full intake refuses at once, saying so, without waiting for
    // room; nothing reaches the engine. Room again, and the request waits
    // for its answer as before.
    #[tokio::test]
    async fn l12_a_full_intake_refuses_at_once() {
        let engine = engine().await;
        let (commands, mut inbox) = mpsc::channel(1);
        let handle = EngineHandle {
            commands,
            shared: Arc::clone(&engine.shared),
        };
        let first = tokio::spawn({
            let handle = handle.clone();
            async move { handle.submit(job()).await }
        });
        // Bounded, so that a submission that never reaches the inbox fails
        // the test rather than hangs it.
        for _ in 0..10_000 {
            if !inbox.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(inbox.len(), 1, "the first submission reached the inbox");
        assert_eq!(
            handle.submit(job()).await.unwrap_err(),
            Unanswered::Saturated
        );
        assert_eq!(handle.cancel(1).await.unwrap_err(), Unanswered::Saturated);
        assert_eq!(
            Unanswered::Saturated.to_string(),
            "billet's intake is full: try again shortly"
        );
        assert_eq!(inbox.len(), 1, "the refused requests never reached it");
        // The waiting request is answered by whoever takes it.
        match inbox.recv().await {
            Some(Command::Submit(_, reply)) => {
                let _ = reply.send(Submitted::Refused("taken".to_owned()));
            }
            _ => panic!("the first submission"),
        }
        assert!(matches!(first.await.unwrap(), Ok(Submitted::Refused(_))));
        assert_eq!(Bounds::default().intake, DEFAULT_INTAKE);
        assert_eq!(Bounds::default().retain, DEFAULT_RETAIN);
    }

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
