//! The engine: the task that owns the scheduler's [`Core`](billet_scheduler::Core), performs its
//! provider calls, and turns what it decides into committed changes (L6).
//!
//! # Guarantees
//!
//! * A request is answered only once the changes it made are committed: an
//!   accepted job is in the store before `201` goes out.
//! * Every provider call the core asks for is made only after every change
//!   decided before it is committed: a job's lease is in the store before its
//!   launch, and its outcome before the destroy of the instance that shows it.
//! * A change nothing waits on ([`Change::can_wait`](crate::record::Change::can_wait): an instance backing a
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use billet_clock::Clock;
use billet_scheduler::{Decision, Driver, Pools, Stats};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{mpsc, oneshot};

use crate::commit::Writer;
use crate::jobs::Jobs;
use crate::metrics::Metrics;
use crate::output::OutputStore;
use crate::record::JobRecord;
use crate::store::{Store, StoreError};

mod hooks;
mod intake;
mod keys;
mod shared;

use hooks::EngineHooks;
pub use intake::{Cancelled, EngineHandle, Submitted, Unanswered};
use keys::Keys;
pub use shared::{Health, PoolView, Shared, stall_bound};

/// How many requests the engine takes from its intake in one input: the
/// most intake any provider answer or due timer waits behind (L12).
pub const INTAKE_BATCH: usize = 256;

/// How long, in wall time, the engine waits for the store to answer one
/// commit when it must (at the start, before it serves; at the end, before
/// it stops) before it gives up with an error: a store that hangs stops a
/// start rather than holding it for ever.
pub const COMMIT_WAIT: Duration = Duration::from_secs(10);

/// The longest a change nothing waits on ([`Change::can_wait`](crate::record::Change::can_wait)) is held
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
    /// ([`Change::can_wait`](crate::record::Change::can_wait)) is held back for a later batch to carry
    /// ([`LAZY_COMMIT`] by default). Zero holds nothing back: every change
    /// goes in the batch of the step that decided it, so that once the engine
    /// is quiescent the job table shows all it decided (what a driver whose
    /// GitHub intake reads that table needs, H14).
    pub hold: Duration,
    /// Whether the engine reads its providers' hints (P9, B12), so that a
    /// job's end is seen when its instance stops rather than at the next
    /// reconcile. On by default; a provider without hints changes nothing.
    pub hints: bool,
    /// The most jobs not yet ended (queued or running) at once
    /// (`--max-queued`, L19): past it a new submission is refused, nothing
    /// recorded, while a repeat of a known key is still answered.
    pub max_queued: usize,
}

/// Ended jobs are kept a week by default: long enough to look back on a
/// week's CI, short enough that the store stays small.
pub const DEFAULT_RETAIN: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The most jobs not yet ended by default (L19): far more than the pools
/// of one service run at once, and few enough that the memory they take
/// stays bounded (each is at most one request body, 64 KiB, kept twice).
pub const DEFAULT_MAX_QUEUED: usize = 10_000;

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
            max_queued: DEFAULT_MAX_QUEUED,
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
            history: crate::history::History::default(),
            unreadable: Mutex::new(BTreeSet::new()),
            store_full: Mutex::new(None),
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
            max_queued: bounds.max_queued,
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
        // The restart's own changes are committed before anything is served,
        // or the store said it is full (L25): then the service answers while
        // the commit waits for space, and the table shows the jobs as they
        // were last committed.
        state.wait_committed(&mut driver, true).await?;
        let task = tokio::spawn(async move {
            let mut result = driver.run(&mut state).await;
            if result.is_ok() {
                // Whatever the last answers decided is committed, the
                // changes held back with it.
                state.flush = true;
                state.send_gathered();
                result = state.wait_committed(&mut driver, false).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    use billet_provider::{Provider, TrustClass};
    use intake::Command;

    use crate::record::{Change, JobState, NewJob, Verdict};
    use billet_simulated::{Host, SimulatedProvider};

    async fn engine() -> Engine {
        engine_over(Store::memory(), Vec::new()).await
    }

    async fn engine_over(store: Store, records: Vec<JobRecord>) -> Engine {
        engine_with(store, records, Arc::new(billet_clock::SystemClock)).await
    }

    async fn engine_with(store: Store, records: Vec<JobRecord>, clock: Arc<dyn Clock>) -> Engine {
        let provider = simulated(&clock);
        engine_on(store, records, clock, provider).await
    }

    /// A simulated provider of deployment `blue` on a host of its own.
    fn simulated(clock: &Arc<dyn Clock>) -> Arc<dyn Provider> {
        Arc::new(
            SimulatedProvider::builder("blue")
                .host(Host::new())
                .clock(Arc::clone(clock))
                .build()
                .unwrap(),
        )
    }

    async fn engine_on(
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
        provider: Arc<dyn Provider>,
    ) -> Engine {
        engine_bounded(store, records, clock, provider, Bounds::default()).await
    }

    async fn engine_bounded(
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
        provider: Arc<dyn Provider>,
        bounds: Bounds,
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
        Engine::start(&pools, store, records, clock, bounds)
            .await
            .unwrap()
    }

    // L6: what a restart decides is committed, and the table shows it,
    // before the engine starts serving: a job that ran at the crash is
    // queued again the moment `start` returns (a durable store's commit
    // takes an fsync, so a start that did not wait would show it running).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn l6_a_restart_commits_what_it_decided_before_it_serves() {
        let dir = crate::store::private_tempdir();
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

    // H14: a hold of zero holds nothing back: the change nothing waits on
    // (an instance backing a job) is committed in the step that decided it,
    // so the engine is settled whenever it is quiescent and the table shows
    // all it decided. Time is paused: nothing is waited for.
    #[tokio::test(start_paused = true)]
    async fn h14_a_hold_of_zero_holds_nothing_back() {
        let clock: Arc<dyn Clock> =
            Arc::new(billet_clock::ManualClock::new(SystemTime::UNIX_EPOCH));
        let provider = simulated(&clock);
        let bounds = Bounds {
            hold: Duration::ZERO,
            ..Bounds::default()
        };
        let engine = engine_bounded(Store::memory(), Vec::new(), clock, provider, bounds).await;
        let commits = || engine.shared.commits.load(Ordering::Relaxed);
        let mut quiet = engine.shared.quiet.subscribe();
        within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        let start = tokio::time::Instant::now();
        let base = commits();
        let job = NewJob {
            command: billet_simulated::run_for(Duration::from_secs(3600)),
            ..job()
        };
        assert!(matches!(
            within(engine.handle.submit(job)).await,
            Ok(Submitted::Created(_))
        ));
        let seen = *within(quiet.wait_for(|q| q.is_some())).await.unwrap();
        assert_eq!(seen.map(|q| q.settled), Some(true), "nothing held back");
        let instance = engine.shared.jobs.read().find(1).unwrap().unwrap().instance;
        assert!(instance.is_some(), "its instance is committed");
        assert_eq!(commits(), base + 2, "the acceptance, then the instance");
        assert_eq!(start.elapsed(), Duration::ZERO);
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
        // Another test's thread may have cached a callsite's interest while
        // no subscriber of this thread existed (it failed so once with 16
        // test threads): ask every callsite again, now that this one does.
        tracing::callsite::rebuild_interest_cache();
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
        let dir = crate::store::private_tempdir();
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
            pinned: None,
        }
    }

    // B3: a job pinned to a pool runs there; one pinned to a pool that is
    // not configured is refused at submission with the reason; the pin is
    // what the scheduler is given, also for a job read back at a restart.
    #[tokio::test]
    async fn b3_a_pinned_job_runs_in_its_pool_or_is_refused() {
        let engine = engine().await;
        let pinned = |pool: &str| NewJob {
            pinned: Some(pool.to_owned()),
            ..job()
        };
        let answer = within(engine.handle.submit(pinned("nowhere"))).await;
        match answer {
            Ok(Submitted::Refused(why)) => assert!(why.contains("no pool is named"), "{why}"),
            other => panic!("{other:?}"),
        }
        let answer = within(engine.handle.submit(pinned("linux"))).await;
        assert!(matches!(answer, Ok(Submitted::Created(_))), "{answer:?}");
        let record = JobRecord::accepted(9, pinned("linux"), SystemTime::UNIX_EPOCH);
        assert_eq!(hooks::to_job(&record).pool.as_deref(), Some("linux"));
        let unpinned = JobRecord::accepted(9, job(), SystemTime::UNIX_EPOCH);
        assert_eq!(hooks::to_job(&unpinned).pool, None);
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
