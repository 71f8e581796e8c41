//! Hints (B12): a provider's word that one of this deployment's instances
//! stopped or vanished (P9) leads to a look at that instance, a `find` asked
//! for in the same step, so that a stopped instance's job ends and its lease
//! frees without waiting for the next reconcile. Only the look's answer acts,
//! never the hint: a hint lost, late, repeated or invented changes no
//! outcome, only how soon one is seen.

use billet_provider::{Error, Hint, HintKind, Instance, InstanceId, State};

use crate::job::{InstanceName, JobId};
use crate::protocol::Call;
use crate::routing::PoolId;

use super::{Core, Purpose, Stage};

impl Core {
    /// A hint from `pool`'s provider, at `now` (B12). When it says that the
    /// instance backing one of this pool's running leases stopped or
    /// vanished, the core asks to look at it ([`Call::Find`] of its name) in
    /// this step, unless a look at it is already under way. When the hint
    /// comes while that job's launch is still in flight (an instance that
    /// stopped before its launch was answered), the look is asked in the
    /// step that learns the job runs on that instance. Any other hint
    /// (an instance that appeared, one no running lease of this pool holds,
    /// a name that is no job's) is ignored. On the look's answer, a stopped
    /// instance's job ends with its exit code, as a reconcile would end it;
    /// an instance confirmed absent has that pool's inventory read at once,
    /// which decides, as it always does; a running one changes nothing.
    pub fn handle_hint(&mut self, pool: PoolId, hint: &Hint, now: std::time::SystemTime) {
        self.handle_shared_hint(&[pool], hint, now);
    }

    /// A hint from one provider that serves every pool of `pools` (one
    /// stream they share), at `now` (B12): [`Core::handle_hint`] from the
    /// pool whose running lease the instance backs, when that pool is one of
    /// `pools`; ignored otherwise. What it decides is what the same hint
    /// read from that pool's own stream would decide.
    pub fn handle_shared_hint(
        &mut self,
        pools: &[PoolId],
        hint: &Hint,
        now: std::time::SystemTime,
    ) {
        self.advance(now);
        if hint.kind == HintKind::Appeared {
            return;
        }
        let Some(job) = InstanceName::parse(&hint.name).map(|name| name.job) else {
            return;
        };
        let Some(rec) = self.jobs.get_mut(&job) else {
            return;
        };
        let pool = match rec.stage {
            Stage::Running {
                pool, ref instance, ..
            } if pools.contains(&pool) && *instance == hint.id => pool,
            // Its launch (or the find that settles it) is still in flight:
            // an instance that ran for a few milliseconds can stop before
            // billet learns it runs. Looked at once it does.
            Stage::Launching { pool, .. } | Stage::Finding { pool, .. }
                if pools.contains(&pool) =>
            {
                rec.stopped_early = Some(hint.id.clone());
                return;
            }
            _ => return,
        };
        if self.looking.insert(job) {
            self.look(job, pool);
        }
    }

    /// After `job` came to run on `instance` in `pool` (its launch
    /// answered, or its instance found): a look at once when a hint said
    /// that instance stopped or vanished while the launch was in flight,
    /// which [`Core::handle_shared_hint`] kept.
    pub(super) fn look_if_stopped_early(
        &mut self,
        job: JobId,
        pool: PoolId,
        instance: &InstanceId,
    ) {
        let Some(rec) = self.jobs.get_mut(&job) else {
            return;
        };
        if rec.stopped_early.take().as_ref() == Some(instance) {
            self.looking.insert(job);
            self.look(job, pool);
        }
    }

    /// Asks for a look at `job`'s instance on `pool` (a find of its name).
    fn look(&mut self, job: JobId, pool: PoolId) {
        let name = self.instance_name(job, pool);
        self.call(pool, Call::Find(name), Purpose::Look { job, pool });
    }

    /// The answer to a look at `job`'s instance on `pool`.
    pub(super) fn on_look(
        &mut self,
        job: JobId,
        pool: PoolId,
        result: Result<Option<Instance>, Error>,
    ) {
        self.looking.remove(&job);
        let Some(Stage::Running {
            pool: held,
            instance,
            ..
        }) = self.jobs.get(&job).map(|rec| rec.stage.clone())
        else {
            return;
        };
        if held != pool {
            return;
        }
        match result {
            Ok(Some(found)) if found.id == instance => {
                if let State::Stopped { exit_code } = found.state {
                    self.end_stopped(pool, vec![(job, exit_code)]);
                }
            }
            Ok(None) => {
                if self.pools[pool.0].listing.is_none() {
                    self.list(pool);
                }
            }
            // Another instance under its name, or no answer: the next
            // inventory decides.
            Ok(Some(_)) | Err(_) => {}
        }
    }

    /// A look that got no answer: the next inventory decides.
    pub(super) fn look_lost(&mut self, job: JobId) {
        self.looking.remove(&job);
    }
}
