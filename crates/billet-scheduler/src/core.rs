//! [`Core`]: the scheduler's every decision, made without I/O (B1).
//!
//! This file holds the type and its state (pools, jobs and their stages,
//! calls waited for, counts), its constructor and builders, the dispatch of
//! each input and the outputs drained after it. The rest of its `impl` is
//! split by concern, one file each under `core/`:
//!
//! * `queue`: submitting and cancelling jobs, their queues, placement (B3, B4);
//! * `leases`: a job's lease from taking it to the job's end (B9);
//! * `calls`: asking for provider calls and reading the answers to a job's
//!   launch, find and destroy (B5);
//! * `retries`: backoff and giving up on a call whose effect stays unknown
//!   (B5, L14);
//! * `reconcile`: listing the pools and deciding on each inventory (B6);
//! * `orphans`: instances no lease holds, and their collection (B7);
//! * `identity`: instance names and whose they are (L10);
//! * `restore`: what a restarted core is told of, or learns about, an earlier
//!   life (B8);
//! * `trace`: the `tracing` event of each decision (B11).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::SystemTime;

use billet_config::{Config, Settings as PoolSettings};
use billet_provider::{InstanceId, Resources};
use rustc_hash::FxHashMap;

use crate::job::{FailReason, Identity, Job, JobId, Outcome};
use crate::protocol::{Action, Answer, CallId, Decision};
use crate::routing::{PoolId, PoolInfo, Refusal, Target};
use crate::settings::Settings;
use crate::stats::{PoolStats, Stats};

mod calls;
mod hints;
mod identity;
mod leases;
mod orphans;
mod queue;
mod reconcile;
mod restore;
mod retries;
mod trace;

use orphans::Orphan;
use queue::Class;
use trace::trace;

/// The scheduler's every decision, made without I/O (B1).
///
/// The core is a deterministic state machine. It is fed inputs, each with the
/// time it happened at ([`submit`](Core::submit), [`cancel`](Core::cancel),
/// [`handle_answer`](Core::handle_answer), [`handle_timeout`](Core::handle_timeout)),
/// and answers outputs, drained after every input:
/// [`poll_action`](Core::poll_action) (provider calls to make),
/// [`poll_decision`](Core::poll_decision) (what it decided), and
/// [`poll_timeout`](Core::poll_timeout) (when it next needs
/// [`handle_timeout`](Core::handle_timeout), read again after every input).
/// It never reads a clock, never calls a provider, never spawns: the same
/// inputs in the same order give the same outputs (B10).
///
/// # Guarantees
///
/// * **Capacity (B4).** A pool never holds more leases than its capacity by
///   this core's placements; a lease is taken when the launch is asked for, so
///   launches in flight count. (Instances found in an inventory at start, or
///   adopted, are counted where they are, whatever the capacity: they exist.)
/// * **No head-of-line blocking (B4).** Jobs are queued by [`Target`](crate::Target),
///   the pools routing allows them; a job waits only behind jobs of targets
///   that want a pool it wants, first come first served. A placement looks at
///   the head of each non-empty queue, never at every queued job.
/// * **Launch (B5).** An error that leaves a launch's effect unknown
///   (`Unavailable`, `InventoryUnavailable`, a lost answer) keeps the lease and
///   retries with capped backoff; `Conflict` means an earlier attempt happened,
///   so the instance is found and adopted; a refusal or an invalid spec ends the
///   job failed and frees the lease.
/// * **Reconcile (B6).** Every `reconcile_every`, each busy pool is listed: a
///   stopped instance is destroyed and its job ends finished with the exit
///   code; a running lease absent from an inventory that answered (and that
///   was asked for after the launch was answered) ends failed (vanished); an
///   inventory that errors frees nothing.
/// * **Orphans (B7).** An instance no lease holds is adopted when its name is
///   a job still queued (or a job waiting to retry its launch), and otherwise
///   destroyed once seen for `orphan_grace`. Until then it counts against
///   its pool's room: it uses capacity, whoever started it.
/// * **Restart (B8).** A new core lists every pool first and places nothing in
///   a pool before its inventory answered; instances named after jobs are
///   learned (counted against capacity) and end with their real outcome.
/// * **Identity (L10).** A core given a store's identity
///   ([`with_identity`](Core::with_identity)) names every instance under it
///   and adopts or learns only instances so named. A job's instance under
///   another identity (or none) is another store's: never adopted, never
///   learned; one that started before this core was made is a leftover,
///   reported ([`Decision::Foreign`]) and collected as an orphan; one that
///   started since is a live second store's, reported and never destroyed.
///   Both count against their pool's room.
/// * **Giving up (L14).** A launch or destroy whose effect stays unknown is
///   retried for at most [`Settings::give_up_after`]; the job then ends
///   failed ([`FailReason::GaveUp`]), and its pool counts the instance it may
///   have until an inventory asked for after that shows no instance of the
///   job's name.
/// * **Deadlines (L14).** A job's timeout runs from its first placement (or
///   from the start a store knows, [`started_before`](Core::started_before)),
///   never again from a later placement or adoption.
/// * **Outcomes (B9).** Every job accepted ends exactly once, in one
///   [`Decision::Ended`].
/// * **Time.** A `now` earlier than one already seen is taken as the later
///   one: time never goes backwards inside the core. A timeout that fires
///   early, late or twice is harmless.
#[derive(Debug)]
pub struct Core {
    config: Config,
    settings: Settings,
    /// What each pool is, in configuration order.
    infos: Vec<PoolInfo>,
    /// What each pool holds, in the same order.
    pools: Vec<Pool>,
    jobs: FxHashMap<JobId, Rec>,
    classes: Vec<Class>,
    class_of: BTreeMap<Target, usize>,
    /// Routing decided, by labels, then by trust class.
    routes: FxHashMap<Vec<String>, [Option<Result<usize, Refusal>>; 3]>,
    /// Classes with jobs waiting, by the sequence number of their head.
    waiting: BTreeSet<(u64, usize)>,
    next_seq: u64,
    /// Calls not yet answered or expired, by id from `first_call`, each with
    /// its deadline. Made in id order with `now` never going back and a
    /// fixed timeout, they are in deadline order too; answered ones are
    /// `None` until the front passes them.
    calls: VecDeque<(SystemTime, Option<Purpose>)>,
    first_call: u64,
    retries: BTreeSet<(SystemTime, JobId)>,
    timeouts: BTreeSet<(SystemTime, JobId)>,
    next_call: u64,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    now: SystemTime,
    /// Counts inputs; orders a list against the launches it may reflect.
    epoch: u64,
    next_reconcile: SystemTime,
    /// Something changed that may let a queued job be placed.
    may_place: bool,
    /// Jobs that ended in an earlier life: never learned again (B8).
    ended_before: rustc_hash::FxHashSet<JobId>,
    /// Every job up to this one that was not handed over again ended in an
    /// earlier life: never learned again (B8). What a store that no longer
    /// holds its ended jobs in memory says in one number.
    ended_through: Option<JobId>,
    /// Jobs that held a lease on a pool in an earlier life: not placed before
    /// that pool's first inventory has shown whether their instance is
    /// still there (B8).
    held_before: rustc_hash::FxHashMap<JobId, PoolId>,
    /// Running jobs whose instance a hint asked to look at, the look not yet
    /// answered (B12): at most one look each.
    looking: rustc_hash::FxHashSet<JobId>,
    /// The store's identity every instance name carries (L10).
    identity: Option<Identity>,
    /// Jobs up to this one were launched before the store had an identity:
    /// their instances named without one are theirs.
    unnamed_through: Option<JobId>,
    /// When this core was made: a foreign instance started since is a live
    /// second store's.
    born: SystemTime,
    counts: Counts,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    accepted: u64,
    refused: u64,
    finished: u64,
    failed: u64,
    cancelled: u64,
    learned: u64,
    adopted: u64,
    orphans_collected: u64,
    inventory_errors: u64,
    calls_lost: u64,
}

#[derive(Debug)]
struct Pool {
    leases: BTreeSet<JobId>,
    launching: u32,
    queued: u64,
    /// The inventory has answered once: placing here is allowed (B8).
    ready: bool,
    /// Something may have left an instance no lease accounts for (a launch
    /// whose effect is unknown), at this epoch; a later list settles it.
    dirty_since: Option<u64>,
    listing: Option<CallId>,
    orphans: BTreeMap<InstanceId, Orphan>,
    /// Instances a live second store launched, in the last inventory (L10).
    contested: BTreeSet<InstanceId>,
    /// Another store's leftovers in the last inventory (L10).
    leftovers: u32,
    /// Jobs given up on (L14), by name of the instance they may have left,
    /// with the epoch they were given up at: counted against room until an
    /// inventory asked for later lacks that name.
    unsettled: BTreeMap<String, u64>,
}

#[derive(Debug)]
struct Rec {
    job: Job,
    stage: Stage,
    /// An end asked for (cancel, timeout) while the launch was unsettled.
    end_requested: Option<Outcome>,
    /// When the job times out, if it has a timeout and holds a lease.
    deadline: Option<SystemTime>,
    /// Learned from an inventory (B8) and not handed over since: when its
    /// instance started.
    learned: Option<SystemTime>,
    /// When the job first took a lease (or the start a store knew): its
    /// timeout runs from here (L14).
    started: Option<SystemTime>,
    /// Since when its launch or destroy has had an unknown effect.
    unsettled_since: Option<SystemTime>,
    /// The instance a hint said stopped or vanished while the job's launch
    /// (or the find that settles it) was still in flight: looked at as soon
    /// as the job runs on that instance (B12).
    stopped_early: Option<InstanceId>,
}

#[derive(Debug, Clone)]
enum Stage {
    Queued {
        class: usize,
        seq: u64,
    },
    Launching {
        pool: PoolId,
        attempt: u32,
        call: Option<CallId>,
        retry_at: Option<SystemTime>,
    },
    Finding {
        pool: PoolId,
        attempt: u32,
        call: Option<CallId>,
        retry_at: Option<SystemTime>,
    },
    Running {
        pool: PoolId,
        instance: InstanceId,
        since: u64,
    },
    Stopping {
        pool: PoolId,
        instance: InstanceId,
        since: u64,
        attempt: u32,
        call: Option<CallId>,
        retry_at: Option<SystemTime>,
        requested: bool,
        outcome: Outcome,
    },
}

impl Stage {
    fn pool(&self) -> Option<PoolId> {
        match *self {
            Stage::Queued { .. } => None,
            Stage::Launching { pool, .. }
            | Stage::Finding { pool, .. }
            | Stage::Running { pool, .. }
            | Stage::Stopping { pool, .. } => Some(pool),
        }
    }

    fn is_launching(&self) -> bool {
        matches!(self, Stage::Launching { .. } | Stage::Finding { .. })
    }

    fn call(&self) -> Option<CallId> {
        match *self {
            Stage::Launching { call, .. }
            | Stage::Finding { call, .. }
            | Stage::Stopping { call, .. } => call,
            Stage::Queued { .. } | Stage::Running { .. } => None,
        }
    }

    fn retry_at(&self) -> Option<SystemTime> {
        match *self {
            Stage::Launching { retry_at, .. }
            | Stage::Finding { retry_at, .. }
            | Stage::Stopping { retry_at, .. } => retry_at,
            Stage::Queued { .. } | Stage::Running { .. } => None,
        }
    }
}

#[derive(Debug, Clone)]
enum Purpose {
    Job(JobId),
    List {
        pool: PoolId,
        epoch: u64,
    },
    /// A look at a running job's instance a hint asked for (B12).
    Look {
        job: JobId,
        pool: PoolId,
    },
    Collect {
        pool: PoolId,
        instance: InstanceId,
    },
}

impl Core {
    /// A core for `config`'s pools, at `now`.
    ///
    /// `accepts` is asked once per configured provider, in file order, whether
    /// its provider accepts each trust class (indexed as
    /// [`TrustClass::ALL`](billet_provider::TrustClass::ALL)); the driver asks
    /// the real provider's `accepts`. The core starts by asking for every
    /// pool's inventory (B8): nothing is placed in a pool before it answers.
    pub fn new(
        config: Config,
        mut accepts: impl FnMut(&billet_config::Provider) -> [bool; 3],
        settings: Settings,
        now: SystemTime,
    ) -> Core {
        let infos: Vec<PoolInfo> = config
            .providers()
            .iter()
            .map(|provider| pool_info(provider, accepts(provider)))
            .collect();
        let pools = infos
            .iter()
            .map(|_| Pool {
                leases: BTreeSet::new(),
                launching: 0,
                queued: 0,
                ready: false,
                dirty_since: None,
                listing: None,
                orphans: BTreeMap::new(),
                contested: BTreeSet::new(),
                leftovers: 0,
                unsettled: BTreeMap::new(),
            })
            .collect();
        let mut core = Core {
            config,
            settings,
            infos,
            pools,
            jobs: FxHashMap::default(),
            classes: Vec::new(),
            class_of: BTreeMap::new(),
            routes: FxHashMap::default(),
            waiting: BTreeSet::new(),
            next_seq: 0,
            calls: VecDeque::new(),
            first_call: 0,
            retries: BTreeSet::new(),
            timeouts: BTreeSet::new(),
            next_call: 0,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            now,
            epoch: 0,
            next_reconcile: now.checked_add(settings.reconcile_every).unwrap_or(now),
            may_place: false,
            ended_before: Default::default(),
            ended_through: None,
            held_before: Default::default(),
            looking: Default::default(),
            identity: None,
            unnamed_through: None,
            born: now,
            counts: Counts::default(),
        };
        for p in 0..core.pools.len() {
            core.list(PoolId(p));
        }
        core
    }

    /// The same core, naming every instance under the store's `identity`
    /// and adopting only instances so named (L10). Call it before the first
    /// input.
    #[must_use]
    pub fn with_identity(mut self, identity: Identity) -> Core {
        self.identity = Some(identity);
        self
    }

    /// The same core, for a store that had no identity until job `last`:
    /// instances named without one ([`JobId::instance_name`]) are those
    /// jobs' (up to and including `last`), and no later job's (L10).
    #[must_use]
    pub fn with_unnamed_through(mut self, last: JobId) -> Core {
        self.unnamed_through = Some(last);
        self
    }

    /// The pools, in configuration order; a [`PoolId`] indexes this.
    pub fn pools(&self) -> impl ExactSizeIterator<Item = &PoolInfo> {
        self.infos.iter()
    }

    /// The configuration the core was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The settings the core runs with.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Hands in the answer to call `id`, at `now`. An answer to a call the
    /// core no longer waits for (past its deadline, or answered already) is
    /// ignored; so is an answer of the wrong type, which is treated as lost.
    pub fn handle_answer(&mut self, id: CallId, answer: Answer, now: SystemTime) {
        self.advance(now);
        let Some(purpose) = self.take_call(id) else {
            return;
        };
        match (purpose, answer) {
            (Purpose::Job(job), Answer::Launched(result)) => self.on_launch(job, id, result),
            (Purpose::Job(job), Answer::Found(result)) => self.on_find(job, id, result),
            (Purpose::Job(job), Answer::Destroyed(result)) => self.on_destroy(job, id, result),
            (Purpose::List { pool, epoch }, Answer::Listed(result)) => {
                self.on_list(pool, id, epoch, result.as_deref());
            }
            (Purpose::Collect { pool, instance }, Answer::Destroyed(result)) => {
                self.on_collect(pool, &instance, &result);
            }
            (Purpose::Look { job, pool }, Answer::Found(result)) => {
                self.on_look(job, pool, result);
            }
            (purpose, _) => self.lost(id, purpose),
        }
        self.place();
    }

    /// [`Core::handle_answer`] for a list's answer lent rather than given:
    /// `listed` is what `list` answered on the pool's provider. A driver
    /// whose consecutive lists of several pools go to one provider object
    /// may make them one call and lend its answer to each (see
    /// [`Inline`](crate::Inline)). What it decides is what
    /// [`Answer::Listed`] with an owned copy would; an `id` that is not a
    /// list's is answered as lost.
    pub fn handle_listed(
        &mut self,
        id: CallId,
        listed: Result<&[billet_provider::Instance], &billet_provider::Error>,
        now: SystemTime,
    ) {
        self.advance(now);
        let Some(purpose) = self.take_call(id) else {
            return;
        };
        match purpose {
            Purpose::List { pool, epoch } => self.on_list(pool, id, epoch, listed),
            purpose => self.lost(id, purpose),
        }
        self.place();
    }

    /// Does what is due at `now`: calls past their deadline are treated as
    /// lost, retries and job timeouts that are due fire, and a reconciliation
    /// runs when `reconcile_every` has passed since the last. Calling it early,
    /// late or twice is harmless.
    pub fn handle_timeout(&mut self, now: SystemTime) {
        self.advance(now);
        let now = self.now;
        while let Some(&(at, _)) = self.calls.front() {
            if at > now {
                break;
            }
            let call = CallId(self.first_call);
            let expired = self.calls.pop_front().and_then(|(_, purpose)| purpose);
            self.first_call += 1;
            self.drop_answered();
            if let Some(purpose) = expired {
                self.counts.calls_lost += 1;
                self.lost(call, purpose);
            }
        }
        while let Some(&(at, job)) = self.retries.first() {
            if at > now {
                break;
            }
            self.retries.pop_first();
            self.retry(job, at);
        }
        while let Some(&(at, job)) = self.timeouts.first() {
            if at > now {
                break;
            }
            self.timeouts.pop_first();
            let due = self
                .jobs
                .get(&job)
                .is_some_and(|rec| rec.deadline == Some(at));
            if due {
                self.end_early(
                    job,
                    Outcome::Failed {
                        reason: FailReason::TimedOut,
                    },
                );
            }
        }
        if now >= self.next_reconcile {
            self.reconcile();
        }
        self.place();
    }

    /// The next provider call to make, in the order asked for.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next decision made, in the order made.
    pub fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    /// When [`handle_timeout`](Core::handle_timeout) is next needed: the
    /// earliest call deadline, retry, job timeout or reconciliation. Always
    /// `Some`: reconciliation never stops, so a stray that appears while
    /// nothing runs is found too. (A caller stepping modelled time may stop
    /// once [`is_idle`](Core::is_idle); [`Inline::next_wakeup`](crate::Inline::next_wakeup)
    /// does.) Read it again after every input; it may be in the past, and
    /// must still be honoured.
    pub fn poll_timeout(&mut self) -> Option<SystemTime> {
        let reconcile = Some(self.next_reconcile);
        [
            self.calls.front().map(|d| d.0),
            self.retries.first().map(|r| r.0),
            self.timeouts.first().map(|t| t.0),
            reconcile,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether nothing is queued, held, unsettled or orphaned, and every
    /// pool's inventory has answered: the core waits for nothing.
    pub fn is_idle(&self) -> bool {
        self.jobs.is_empty()
            && self.pools.iter().all(|pool| {
                pool.ready
                    && pool.dirty_since.is_none()
                    && pool.orphans.is_empty()
                    && pool.unsettled.is_empty()
            })
    }

    /// How many jobs are accepted and have not ended: queued or holding a
    /// lease. What a bound on jobs not yet ended counts (L19).
    pub fn unended(&self) -> usize {
        self.jobs.len()
    }

    /// Whether `job` is accepted and has not ended.
    pub fn knows(&self, job: JobId) -> bool {
        self.jobs.contains_key(&job)
    }

    /// The counts of B11: per pool, and totals per outcome.
    pub fn stats(&self) -> Stats {
        let c = self.counts;
        Stats {
            pools: self
                .pools
                .iter()
                .zip(&self.infos)
                .map(|(pool, info)| PoolStats {
                    name: info.name.clone(),
                    kind: info.kind,
                    capacity: info.capacity,
                    leases: pool.leases.len() as u32,
                    launching: pool.launching,
                    queued: pool.queued,
                    orphans: pool.orphans.len() as u32,
                    ready: pool.ready,
                    contested: pool.contested.len() as u32,
                    leftovers: pool.leftovers,
                    unsettled: pool.unsettled.len() as u32,
                })
                .collect(),
            queued: self.queued(),
            accepted: c.accepted,
            refused: c.refused,
            finished: c.finished,
            failed: c.failed,
            cancelled: c.cancelled,
            learned: c.learned,
            adopted: c.adopted,
            orphans_collected: c.orphans_collected,
            inventory_errors: c.inventory_errors,
            calls_lost: c.calls_lost,
        }
    }

    fn advance(&mut self, now: SystemTime) {
        self.now = self.now.max(now);
        self.epoch += 1;
    }

    fn decide(&mut self, decision: Decision) {
        trace(&self.infos, &decision);
        self.decisions.push_back(decision);
    }
}

/// A pool's info from its configuration and what its provider accepts.
pub(crate) fn pool_info(provider: &billet_config::Provider, accepts: [bool; 3]) -> PoolInfo {
    let (image, resources) = match provider.settings() {
        PoolSettings::Docker(docker) => (
            docker.image.clone(),
            Resources {
                cpus: docker.whole_cpus().unwrap_or(Resources::default().cpus),
                memory_mib: docker
                    .memory_mib()
                    .unwrap_or(Resources::default().memory_mib),
            },
        ),
        PoolSettings::Tart(tart) => (
            tart.image.clone(),
            Resources {
                cpus: tart.cpus.unwrap_or(Resources::default().cpus),
                memory_mib: tart.memory_mib.unwrap_or(Resources::default().memory_mib),
            },
        ),
        PoolSettings::Firecracker(vm) => (
            vm.rootfs.display().to_string(),
            Resources {
                cpus: vm.vcpus.unwrap_or(1),
                memory_mib: vm.memory_mib.unwrap_or(Resources::default().memory_mib),
            },
        ),
        _ => (String::new(), Resources::default()),
    };
    PoolInfo {
        name: provider.name().to_owned(),
        kind: provider.kind().get(),
        capacity: provider.capacity().get(),
        accepts,
        image,
        resources,
    }
}
