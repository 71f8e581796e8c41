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

/// One pass over an inventory's answer ([`Core::sort_answer`]).
#[derive(Default)]
struct Sorted<'a> {
    /// Instances backing this pool's launched (running or stopping) leases.
    backing: usize,
    /// Running leases whose instance has stopped, with its exit code.
    stopped: Vec<(JobId, i32)>,
    /// Stopping leases whose instance is still there after a destroy answered.
    again: Vec<JobId>,
    /// Instances backing no launched lease of this pool.
    others: Vec<&'a Instance>,
}

/// What the instances backing no lease left for the pool's books.
#[derive(Default)]
struct Unheld {
    /// Instances listed as orphans (collected, or to be).
    listed: BTreeSet<billet_provider::InstanceId>,
    /// Another store's live instances.
    contested: BTreeSet<billet_provider::InstanceId>,
    /// Another store's instances from before this core.
    leftovers: u32,
}

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

    /// An inventory's answer, decided in the steps below, each in job or
    /// instance order, never in the answer's (B10).
    pub(super) fn on_list(
        &mut self,
        pool: PoolId,
        call: CallId,
        issued: u64,
        result: Result<&[Instance], &Error>,
    ) {
        if self.pools[pool.0].listing == Some(call) {
            self.pools[pool.0].listing = None;
        }
        let inventory = match result {
            Ok(inventory) => inventory,
            Err(err) => {
                self.inventory_error(pool, err);
                return;
            }
        };
        let first = self.mark_read(pool, issued);
        let Sorted {
            backing,
            stopped,
            again,
            others,
        } = self.sort_answer(pool, inventory);
        self.end_stopped(pool, stopped);
        self.destroy_again(pool, again);
        self.end_vanished(pool, issued, backing, inventory);
        let unheld = self.judge_unheld(pool, first, others);
        if first && self.pools.iter().all(|pool| pool.ready) {
            // Every pool has given its first answer: what an earlier life
            // left to consult (B8) is forgotten. (Memory only: nothing
            // consults these once every pool is ready.)
            self.ended_before = Default::default();
            self.ended_through = None;
            self.held_before = Default::default();
        }
        self.settle_pool(pool, issued, unheld, inventory);
    }

    /// The pool has answered: it is ready (answers whether this was its first
    /// answer), clean if the list was asked for at or after the epoch it was
    /// dirtied in, and placement looks again once this answer is read.
    fn mark_read(&mut self, pool: PoolId, issued: u64) -> bool {
        let p = &mut self.pools[pool.0];
        let first = !p.ready;
        p.ready = true;
        // Asked for at or after the epoch it was dirtied in (lists are
        // asked for after the call results of their input): it shows
        // what that left.
        if p.dirty_since.is_some_and(|since| since <= issued) {
            p.dirty_since = None;
        }
        // Whatever this answer settles (a pool ready, leases freed, orphans
        // gone), placement looks again once it is read.
        self.may_place = true;
        first
    }

    /// One pass over the answer, in whatever order it came: the instances
    /// backing this pool's launched leases are counted (the stopped ones
    /// noted, and the stopping ones whose destroy must be asked again); the
    /// rest are set aside. Another configured pool's instance, seen through
    /// an inventory the two share, is left to that pool's own list.
    fn sort_answer<'a>(&self, pool: PoolId, inventory: &'a [Instance]) -> Sorted<'a> {
        let here = self.infos[pool.0].name.as_str();
        let mut sorted = Sorted::default();
        for instance in inventory {
            let job = match self.whose(&instance.name) {
                Whose::Ours(id, named) if named == here => Some(id),
                Whose::Ours(_, named) | Whose::Foreign(named)
                    if named != here && self.infos.iter().any(|info| info.name == named) =>
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
                    sorted.backing += 1;
                    if let (Some(id), State::Stopped { exit_code }) = (job, instance.state) {
                        sorted.stopped.push((id, exit_code));
                    }
                }
                Some(Stage::Stopping {
                    pool: p,
                    instance: held,
                    requested,
                    ..
                }) if *p == pool && *held == instance.id => {
                    sorted.backing += 1;
                    // Asked to go, not confirmed, and still here: ask again.
                    // (`requested` is set only once a destroy has answered,
                    // and cleared by the next one: no call waits then.)
                    if *requested {
                        sorted.again.extend(job);
                    }
                }
                _ => sorted.others.push(instance),
            }
        }
        sorted
    }

    /// Step 1: launched leases whose instance has stopped: destroyed, and the job
    /// finished with the instance's exit code once that is confirmed.
    pub(super) fn end_stopped(&mut self, pool: PoolId, mut stopped: Vec<(JobId, i32)>) {
        stopped.sort_unstable();
        for (id, exit_code) in stopped {
            if let Some(Stage::Running {
                instance, since, ..
            }) = self.jobs.get(&id).map(|rec| rec.stage.clone())
            {
                self.stop(id, pool, instance, since, Outcome::Finished { exit_code });
            }
        }
    }

    /// Leases being stopped whose instance is still listed after a destroy
    /// answered: the destroy is asked again.
    fn destroy_again(&mut self, pool: PoolId, mut again: Vec<JobId>) {
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
    }

    /// Step 2: launched leases whose instance the answer lacks (and that were
    /// known before the list was asked for): a running one failed as
    /// vanished, a stopping one ended with its outcome. Looked for only when
    /// fewer instances backed leases than there are launched leases.
    fn end_vanished(&mut self, pool: PoolId, issued: u64, backing: usize, inventory: &[Instance]) {
        let launched = {
            let p = &self.pools[pool.0];
            p.leases.len() - p.launching as usize
        };
        if backing >= launched {
            return;
        }
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

    /// Step 3: instances that back no launched lease, in instance order: another
    /// store's (reported; contested while it is live, else a leftover
    /// collected as an orphan), a waiting retry adopting what its lost
    /// launch made, a job learned (at start), adopted, or an orphan.
    fn judge_unheld(&mut self, pool: PoolId, first: bool, mut others: Vec<&Instance>) -> Unheld {
        others.sort_unstable_by(|a, b| a.id.cmp(&b.id));
        let here = self.infos[pool.0].name.clone();
        let mut unheld = Unheld::default();
        for instance in others {
            let job = match self.whose(&instance.name) {
                Whose::Ours(id, named) if named == here.as_str() => Some(id),
                Whose::Foreign(_) => {
                    self.judge_foreign(pool, instance, &mut unheld);
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
                    unheld.listed.insert(instance.id.clone());
                    self.orphan(pool, instance);
                }
            }
        }
        unheld
    }

    /// Another store's instance (L10): never adopted nor learned; reported
    /// the first time it is seen; contested while it is live (started after
    /// this core), else a leftover collected as an orphan.
    fn judge_foreign(&mut self, pool: PoolId, instance: &Instance, unheld: &mut Unheld) {
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
                name: instance.name.to_string(),
                live,
            });
        }
        if live {
            unheld.contested.insert(instance.id.clone());
        } else {
            unheld.leftovers += 1;
            unheld.listed.insert(instance.id.clone());
            self.orphan(pool, instance);
        }
    }

    /// The pool's own books after its answer: orphans gone by themselves are
    /// forgotten, the contested and leftover counts are the answer's, and
    /// what a job given up on may have left is settled once an inventory
    /// asked for after the give-up lacks its name (L14).
    fn settle_pool(&mut self, pool: PoolId, issued: u64, unheld: Unheld, inventory: &[Instance]) {
        let p = &mut self.pools[pool.0];
        p.orphans
            .retain(|id, orphan| unheld.listed.contains(id) || orphan.collecting.is_some());
        p.contested = unheld.contested;
        p.leftovers = unheld.leftovers;
        if !p.unsettled.is_empty() {
            let names: BTreeSet<&str> = inventory.iter().map(|i| &*i.name).collect();
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
