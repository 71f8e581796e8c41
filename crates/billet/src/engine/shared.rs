//! What the HTTP side reads without asking the engine ([`Shared`]): the jobs
//! as committed, the pools' figures after the last step ([`PoolView`]), and
//! the service's health ([`Health`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, WallOffset};
use billet_scheduler::{PoolStats, Stats};
use parking_lot::{Mutex, RwLock};

use crate::jobs::Jobs;
use crate::metrics::Metrics;
use crate::store::Archive;

use super::Quiet;

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
    /// The pools' counts over the last hour, recorded after every step:
    /// what the status page's charts draw (K7).
    pub history: crate::history::History,
    /// Pools whose last inventory could not be read.
    pub unreadable: Mutex<BTreeSet<String>>,
    /// Set while the store cannot commit for lack of space (L25), with the
    /// error: new work is refused until a commit goes through again.
    pub store_full: Mutex<Option<String>>,
    /// The metrics.
    pub metrics: Metrics,
    /// Cleared once shutdown begins: requests then answer `503`.
    pub accepting: AtomicBool,
    /// Whether (and since when) the engine is quiescent (H13): `None` while
    /// it works.
    pub quiet: tokio::sync::watch::Sender<Option<Quiet>>,
    /// How many commits the store has made (see [`Store::commits`](crate::store::Store::commits)).
    pub commits: Arc<AtomicU64>,
    /// Per pool, since when its inventory read has been outstanding.
    pub(super) listing: Mutex<Vec<Option<SystemTime>>>,
    /// How long an inventory read may be outstanding before the pool is
    /// reported unreadable (L14): [`stall_bound`] of the reconcile interval.
    pub(super) stall_after: Duration,
    pub(super) clock: Arc<dyn Clock>,
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
    /// Why the store cannot commit, while it cannot for lack of space (L25).
    pub store_full: Option<String>,
    /// The wall clock against the service's clock, when they are at least
    /// [`billet_clock::STEP_AT`] apart: a step the service does not follow
    /// (L24). Said, but not a reason to answer `503`.
    pub wall_clock: Option<WallOffset>,
}

impl Shared {
    /// The time by the service's clock.
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

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
            store_full: self.store_full.lock().clone(),
            wall_clock: self
                .clock
                .wall_offset()
                .filter(|offset| offset.magnitude() >= billet_clock::STEP_AT),
        }
    }
}
