//! Reconciliation (B6): listing every pool on schedule, and deciding on an
//! inventory's answer (`on_list`): stopped and vanished leases, the instances
//! no lease holds (adopted, learned, foreign or orphaned), what a give-up may
//! have left, and an inventory that could not be read.

use std::collections::BTreeSet;

use billet_provider::{Error, Instance, State};

use crate::job::{FailReason, JobId, Outcome};
use crate::protocol::{Call, CallId, Decision};
use crate::routing::PoolId;

use super::{Core, Purpose, Stage, identity::Whose};

impl Core {
    pub(super) fn reconcile(&mut self) {
        self.next_reconcile = self
            .now
            .checked_add(self.settings.reconcile_every)
            .unwrap_or(self.now);
        // Every pool, busy or not: an instance nobody launched (a stray) is
        // found wherever it appears (B6, B7). A pool whose list is still in
        // flight is not asked twice.
        for p in 0..self.pools.len() {
            if self.pools[p].listing.is_none() {
                self.list(PoolId(p));
            }
        }
    }

    pub(super) fn on_list(
        &mut self,
        pool: PoolId,
        call: CallId,
        issued: u64,
        result: Result<Vec<Instance>, Error>,
    ) {
        if self.pools[pool.0].listing == Some(call) {
            self.pools[pool.0].listing = None;
        }
        let inventory = match result {
            Ok(inventory) => inventory,
            Err(err) => {
                self.inventory_error(pool, &err);
                return;
            }
        };
        let first = !self.pools[pool.0].ready;
        {
            let p = &mut self.pools[pool.0];
            p.ready = true;
            // Asked for at or after the epoch it was dirtied in (lists are
            // asked for after the call results of their input): it shows
            // what that left.
            if p.dirty_since.is_some_and(|since| since <= issued) {
                p.dirty_since = None;
            }
        }
        // Whatever this answer settles (a pool ready, leases freed, orphans
        // gone), placement looks again once it is read.
        self.may_place = true;

        // One pass over the answer, in whatever order it came: the instances
        // backing this pool's launched leases are counted (and the stopped
        // ones noted); the rest are set aside. Decisions are then made in job
        // or instance order, never in the answer's (B10).
        let here = self.infos[pool.0].name.clone();
        let mut backing = 0usize;
        let mut stopped: Vec<(JobId, i32)> = Vec::new();
        let mut others: Vec<&Instance> = Vec::new();
        let mut again: Vec<JobId> = Vec::new();
        for instance in &inventory {
            let job = match self.whose(&instance.name) {
                Whose::Ours(id, named) if named == here.as_str() => Some(id),
                // Another configured pool's instance, seen through an
                // inventory the two share: that pool's own list judges it.
                Whose::Ours(_, named) | Whose::Foreign(named)
                    if named != here.as_str()
                        && self.infos.iter().any(|info| info.name == named) =>
                {
                    continue;
                }
                _ => None,
            };
            let backs = job.and_then(|id| self.jobs.get(&id)).map(|rec| &rec.stage);
            match backs {
                Some(Stage::Running {
                    pool: p,
                    instance: held,
                    ..
                }) if *p == pool && *held == instance.id => {
                    backing += 1;
                    if let (Some(id), State::Stopped { exit_code }) = (job, instance.state) {
                        stopped.push((id, exit_code));
                    }
                }
                Some(Stage::Stopping {
                    pool: p,
                    instance: held,
                    requested,
                    ..
                }) if *p == pool && *held == instance.id => {
                    backing += 1;
                    // Asked to go, not confirmed, and still here: ask again.
                    // (`requested` is set only once a destroy has answered,
                    // and cleared by the next one: no call waits then.)
                    if *requested {
                        again.extend(job);
                    }
                }
                _ => others.push(instance),
            }
        }

        // 1. Launched leases whose instance has stopped: destroyed, finished.
        stopped.sort_unstable();
        for (id, exit_code) in stopped {
            if let Some(Stage::Running {
                instance, since, ..
            }) = self.jobs.get(&id).map(|rec| rec.stage.clone())
            {
                self.stop(id, pool, instance, since, Outcome::Finished { exit_code });
            }
        }

        again.sort_unstable();
        for id in again {
            if let Some(Stage::Stopping {
                instance,
                since,
                attempt,
                outcome,
                ..
            }) = self.jobs.get(&id).map(|rec| rec.stage.clone())
            {
                self.destroy(id, pool, instance, since, attempt, outcome);
            }
        }

        // 2. Launched leases whose instance the answer lacks, looked for only
        // when fewer instances backed leases than there are launched leases.
        let launched = {
            let p = &self.pools[pool.0];
            p.leases.len() - p.launching as usize
        };
        if backing < launched {
            let present: rustc_hash::FxHashSet<&str> =
                inventory.iter().map(|i| i.id.as_str()).collect();
            let held: Vec<JobId> = self.pools[pool.0].leases.iter().copied().collect();
            for id in held {
                let Some(rec) = self.jobs.get(&id) else {
                    continue;
                };
                let gone = match &rec.stage {
                    Stage::Running {
                        instance, since, ..
                    } if *since < issued && !present.contains(instance.as_str()) => {
                        Some(Outcome::Failed {
                            reason: FailReason::Vanished,
                        })
                    }
                    Stage::Stopping {
                        instance,
                        since,
                        outcome,
                        ..
                    } if *since < issued && !present.contains(instance.as_str()) => {
                        Some(outcome.clone())
                    }
                    _ => None,
                };
                if let Some(outcome) = gone {
                    self.end(id, outcome);
                }
            }
        }

        // 3. Instances that back no launched lease: a waiting retry adopting
        // what its lost launch made, learned (at start), adopted, or orphans.
        others.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let mut listed = BTreeSet::new();
        let mut contested = BTreeSet::new();
        let mut leftovers = 0;
        for instance in others {
            let job = match self.whose(&instance.name) {
                Whose::Ours(id, named) if named == here.as_str() => Some(id),
                Whose::Foreign(_) => {
                    // Another store's (L10): never adopted nor learned.
                    let live = instance.started_at >= self.born;
                    let known = if live {
                        self.pools[pool.0].contested.contains(&instance.id)
                    } else {
                        self.pools[pool.0].orphans.contains_key(&instance.id)
                    };
                    if !known {
                        self.decide(Decision::Foreign {
                            pool,
                            instance: instance.id.clone(),
                            name: instance.name.clone(),
                            live,
                        });
                    }
                    if live {
                        contested.insert(instance.id.clone());
                    } else {
                        leftovers += 1;
                        listed.insert(instance.id.clone());
                        self.orphan(pool, instance);
                    }
                    continue;
                }
                _ => None,
            };
            let stage = job
                .and_then(|id| self.jobs.get(&id))
                .map(|rec| rec.stage.clone());
            match (job, stage) {
                (
                    Some(id),
                    Some(Stage::Launching {
                        pool: p,
                        call: None,
                        ..
                    }),
                ) if p == pool => self.adopt(id, pool, instance),
                (Some(id), Some(Stage::Queued { .. })) => {
                    self.unqueue(id);
                    self.take_lease(id, pool, Stage::Queued { class: 0, seq: 0 });
                    self.adopt(id, pool, instance);
                }
                // May be what its unsettled launch here makes: look again once
                // that has settled.
                (Some(_), Some(stage)) if stage.is_launching() && stage.pool() == Some(pool) => {
                    self.mark_dirty(pool);
                }
                (Some(id), None) if first && !self.ended_earlier(id) => {
                    self.learn(id, pool, instance);
                }
                // Named after a job that ended, or whose lease another
                // instance backs, or no job's at all.
                _ => {
                    listed.insert(instance.id.clone());
                    self.orphan(pool, instance);
                }
            }
        }
        if first && self.pools.iter().all(|pool| pool.ready) {
            self.ended_before = Default::default();
            self.ended_through = None;
            self.held_before = Default::default();
        }
        // Orphans gone by themselves are forgotten.
        let p = &mut self.pools[pool.0];
        p.orphans
            .retain(|id, orphan| listed.contains(id) || orphan.collecting.is_some());
        p.contested = contested;
        p.leftovers = leftovers;
        // What a job given up on may have left: settled once an inventory
        // asked for after the give-up lacks its name (L14).
        if !p.unsettled.is_empty() {
            let names: BTreeSet<&str> = inventory.iter().map(|i| i.name.as_str()).collect();
            p.unsettled
                .retain(|name, since| *since >= issued || names.contains(name.as_str()));
        }
    }

    /// An inventory that could not be read: counted and reported; nothing
    /// is freed (B6).
    fn inventory_error(&mut self, pool: PoolId, err: &Error) {
        self.counts.inventory_errors += 1;
        self.decide(Decision::InventoryError {
            pool,
            error: err.to_string(),
        });
    }

    pub(super) fn list(&mut self, pool: PoolId) {
        let epoch = self.epoch;
        let call = self.call(pool, Call::List, Purpose::List { pool, epoch });
        self.pools[pool.0].listing = Some(call);
    }

    pub(super) fn mark_dirty(&mut self, pool: PoolId) {
        let epoch = self.epoch;
        let p = &mut self.pools[pool.0];
        p.dirty_since = Some(p.dirty_since.map_or(epoch, |since| since.max(epoch)));
    }
}
