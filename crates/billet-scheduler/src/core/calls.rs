//! Provider calls: asking for one (with its deadline) and ceasing to wait
//! for it, asking for a job's launch or find, and the answers to a job's
//! launch, find and destroy, a lost one included (B5).

use billet_provider::{Error, ErrorKind, Instance, Teardown};

use crate::job::{FailReason, JobId, Outcome};
use crate::protocol::{Action, Call, CallId, Decision};
use crate::routing::PoolId;

use super::{Core, Purpose, Stage, queue::spec_for, retries::Kind};

impl Core {
    pub(super) fn on_launch(&mut self, id: JobId, call: CallId, result: Result<Instance, Error>) {
        let Some(rec) = self.jobs.get(&id) else {
            return;
        };
        let Stage::Launching {
            pool,
            attempt,
            call: Some(waiting),
            ..
        } = rec.stage
        else {
            return;
        };
        if waiting != call {
            return;
        }
        let end_requested = rec.end_requested.clone();
        match result {
            Ok(instance) => match end_requested {
                Some(outcome) => self.stop(id, pool, instance.id, self.epoch, outcome),
                None => {
                    self.run_on(id, pool, &instance.id);
                    self.decide(Decision::Launched {
                        job: id,
                        pool,
                        instance: instance.id,
                    });
                }
            },
            Err(err) if err.kind() == ErrorKind::Conflict => self.find(id, pool, attempt),
            Err(err) if effect_unknown(&err) => {
                self.mark_dirty(pool);
                if end_requested.is_some() {
                    self.find(id, pool, attempt);
                } else {
                    self.back_off(id, pool, attempt + 1, Kind::Launch, &err.to_string());
                }
            }
            Err(err) => {
                let outcome = end_requested.unwrap_or(Outcome::Failed {
                    reason: match err.kind() {
                        ErrorKind::InvalidSpec => FailReason::Invalid(err.to_string()),
                        _ => FailReason::Refused(err.to_string()),
                    },
                });
                self.end(id, outcome);
            }
        }
    }

    pub(super) fn on_find(
        &mut self,
        id: JobId,
        call: CallId,
        result: Result<Option<Instance>, Error>,
    ) {
        let Some(rec) = self.jobs.get(&id) else {
            return;
        };
        let Stage::Finding {
            pool,
            attempt,
            call: Some(waiting),
            ..
        } = rec.stage
        else {
            return;
        };
        if waiting != call {
            return;
        }
        let end_requested = rec.end_requested.clone();
        match (result, end_requested) {
            (Ok(Some(instance)), Some(outcome)) => {
                self.stop(id, pool, instance.id, self.epoch, outcome);
            }
            (Ok(Some(instance)), None) => self.adopt(id, pool, &instance),
            (Ok(None), Some(outcome)) => self.end(id, outcome),
            // Confirmed absent: launch again, after a pause.
            (Ok(None), None) => self.back_off(
                id,
                pool,
                attempt + 1,
                Kind::Launch,
                "its launch met a conflict, then no instance of its name was found",
            ),
            (Err(err), _) => self.back_off(id, pool, attempt + 1, Kind::Find, &err.to_string()),
        }
    }

    pub(super) fn on_destroy(&mut self, id: JobId, call: CallId, result: Result<Teardown, Error>) {
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let Stage::Stopping {
            pool,
            attempt,
            call: ref mut waiting,
            ref mut requested,
            ref outcome,
            ..
        } = rec.stage
        else {
            return;
        };
        if *waiting != Some(call) {
            return;
        }
        let outcome = outcome.clone();
        match result {
            Ok(teardown) if teardown.is_confirmed() => self.end(id, outcome),
            // Asked, not confirmed: the next inventory without it confirms.
            Ok(_) => {
                *waiting = None;
                *requested = true;
            }
            // Not this deployment's: nothing of ours to wait for.
            Err(err) if err.kind() == ErrorKind::NotOwned => self.end(id, outcome),
            Err(err) => self.back_off(id, pool, attempt + 1, Kind::Destroy, &err.to_string()),
        }
    }

    /// A call the core stopped waiting for: its effect is unknown.
    pub(super) fn lost(&mut self, call: CallId, purpose: Purpose) {
        match purpose {
            Purpose::Job(id) => {
                let Some(rec) = self.jobs.get(&id) else {
                    return;
                };
                if rec.stage.call() != Some(call) {
                    return;
                }
                let unavailable = || Error::unavailable("no answer before the call's deadline");
                match rec.stage {
                    Stage::Launching { .. } => self.on_launch(id, call, Err(unavailable())),
                    Stage::Finding { .. } => self.on_find(id, call, Err(unavailable())),
                    Stage::Stopping { .. } => self.on_destroy(id, call, Err(unavailable())),
                    Stage::Queued { .. } | Stage::Running { .. } => {}
                }
            }
            Purpose::List { pool, epoch } => self.on_list(
                pool,
                call,
                epoch,
                Err(&Error::inventory_unavailable(
                    "no answer before the call's deadline",
                )),
            ),
            Purpose::Collect { pool, instance } => self.on_collect(
                pool,
                &instance,
                &Err(Error::unavailable("no answer before the call's deadline")),
            ),
            Purpose::Look { job, .. } => self.look_lost(job),
        }
    }

    /// Asks for `job`'s launch again (a retry), with the spec its placement
    /// built.
    pub(super) fn launch(&mut self, id: JobId, pool: PoolId, attempt: u32) {
        let Some(rec) = self.jobs.get(&id) else {
            return;
        };
        let spec = spec_for(&self.infos[pool.0], self.identity.as_ref(), id, &rec.job);
        let call = self.call(pool, Call::Launch(spec), Purpose::Job(id));
        self.set_stage(
            id,
            Stage::Launching {
                pool,
                attempt,
                call: Some(call),
                retry_at: None,
            },
        );
    }

    pub(super) fn find(&mut self, id: JobId, pool: PoolId, attempt: u32) {
        let name = self.instance_name(id, pool);
        let call = self.call(pool, Call::Find(name), Purpose::Job(id));
        self.set_stage(
            id,
            Stage::Finding {
                pool,
                attempt,
                call: Some(call),
                retry_at: None,
            },
        );
    }

    /// Stops waiting for call `id`: its purpose, if the core still waited.
    pub(super) fn take_call(&mut self, id: CallId) -> Option<Purpose> {
        let index = usize::try_from(id.0.checked_sub(self.first_call)?).ok()?;
        let purpose = self.calls.get_mut(index)?.1.take();
        self.drop_answered();
        purpose
    }

    /// Keeps the front of `calls` a call still waited for.
    pub(super) fn drop_answered(&mut self) {
        while self.calls.front().is_some_and(|(_, p)| p.is_none()) {
            self.calls.pop_front();
            self.first_call += 1;
        }
    }

    pub(super) fn call(&mut self, pool: PoolId, call: Call, purpose: Purpose) -> CallId {
        let id = CallId(self.next_call);
        self.next_call += 1;
        let deadline = self
            .now
            .checked_add(self.settings.call_timeout)
            .unwrap_or(self.now);
        self.calls.push_back((deadline, Some(purpose)));
        self.actions.push_back(Action {
            id,
            pool,
            call,
            deadline,
        });
        id
    }
}

/// What an error means for a call whose effect may have happened.
fn effect_unknown(err: &Error) -> bool {
    !matches!(
        err.kind(),
        ErrorKind::Refused | ErrorKind::InvalidSpec | ErrorKind::NotOwned | ErrorKind::InvalidOwner
    )
}
