//! Retrying a launch, find or destroy whose effect is unknown, after a
//! capped backoff (B5), and giving up on it after `give_up_after` (L14).

use std::time::SystemTime;

use crate::job::{FailReason, JobId, Outcome};
use crate::protocol::Decision;
use crate::routing::PoolId;

use super::{Core, Stage};

/// Which call a backoff retries.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Launch,
    Find,
    Destroy,
}

impl Core {
    pub(super) fn retry(&mut self, id: JobId, at: SystemTime) {
        let Some(rec) = self.jobs.get(&id) else {
            return;
        };
        if rec.stage.retry_at() != Some(at) {
            return;
        }
        match rec.stage.clone() {
            Stage::Launching { pool, attempt, .. } => {
                if rec.end_requested.is_some() {
                    self.find(id, pool, attempt);
                } else {
                    self.launch(id, pool, attempt);
                }
            }
            Stage::Finding { pool, attempt, .. } => self.find(id, pool, attempt),
            Stage::Stopping {
                pool,
                instance,
                since,
                attempt,
                outcome,
                ..
            } => self.destroy(id, pool, instance, since, attempt, outcome),
            Stage::Queued { .. } | Stage::Running { .. } => {}
        }
    }

    pub(super) fn back_off(
        &mut self,
        id: JobId,
        pool: PoolId,
        attempt: u32,
        kind: Kind,
        why: &str,
    ) {
        let now = self.now;
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let since = *rec.unsettled_since.get_or_insert(now);
        let tried = now.duration_since(since).unwrap_or_default();
        if tried >= self.settings.give_up_after {
            let outcome = rec.end_requested.clone().or_else(|| match &rec.stage {
                Stage::Stopping { outcome, .. } => Some(outcome.clone()),
                _ => None,
            });
            self.give_up(id, pool, kind, attempt, tried, why, outcome);
            return;
        }
        let rec = &self.jobs[&id];
        let at = self
            .now
            .checked_add(self.settings.backoff(attempt))
            .unwrap_or(self.now);
        let stage = match (kind, rec.stage.clone()) {
            (Kind::Launch, _) => Stage::Launching {
                pool,
                attempt,
                call: None,
                retry_at: Some(at),
            },
            (Kind::Find, _) => Stage::Finding {
                pool,
                attempt,
                call: None,
                retry_at: Some(at),
            },
            (
                Kind::Destroy,
                Stage::Stopping {
                    instance,
                    since,
                    requested,
                    outcome,
                    ..
                },
            ) => Stage::Stopping {
                pool,
                instance,
                since,
                attempt,
                call: None,
                retry_at: Some(at),
                requested,
                outcome,
            },
            (Kind::Destroy, _) => return,
        };
        self.set_stage(id, stage);
        self.retries.insert((at, id));
        self.decide(Decision::Retrying {
            job: id,
            pool,
            attempt,
            at,
        });
    }

    /// Ends `job` failed after its launch or destroy kept an unknown effect
    /// for `give_up_after` (L14). The instance it may have left is counted
    /// against `pool`'s room until a later inventory lacks its name.
    #[allow(clippy::too_many_arguments)]
    fn give_up(
        &mut self,
        id: JobId,
        pool: PoolId,
        kind: Kind,
        attempts: u32,
        tried: std::time::Duration,
        why: &str,
        decided: Option<Outcome>,
    ) {
        let call = match kind {
            Kind::Launch | Kind::Find => "launching its instance",
            Kind::Destroy => "destroying its instance",
        };
        let mut reason = format!(
            "{call}: {attempts} attempts over {}s left its effect unknown; the last: {why}",
            tried.as_secs()
        );
        if let Some(outcome) = decided {
            reason.push_str(&format!("; it had ended {outcome}"));
        }
        let name = self.instance_name(id, pool);
        self.pools[pool.0].unsettled.insert(name, self.epoch);
        self.mark_dirty(pool);
        self.end(
            id,
            Outcome::Failed {
                reason: FailReason::GaveUp(reason),
            },
        );
    }
}
