//! Orphans (B7): an instance no lease holds, counted against its pool's room
//! until it is gone, and collected (destroyed) once seen for `orphan_grace`.

use std::time::SystemTime;

use billet_provider::{Error, Instance, InstanceId, Teardown};

use crate::protocol::{Call, CallId, Decision, OrphanFate};
use crate::routing::PoolId;

use super::{Core, Purpose};

#[derive(Debug)]
pub(super) struct Orphan {
    name: String,
    first_seen: SystemTime,
    pub(super) collecting: Option<CallId>,
}

impl Core {
    pub(super) fn on_collect(
        &mut self,
        pool: PoolId,
        instance: &InstanceId,
        result: &Result<Teardown, Error>,
    ) {
        let Some(orphan) = self.pools[pool.0].orphans.get_mut(instance) else {
            return;
        };
        orphan.collecting = None;
        match result {
            Ok(Teardown::Stopped) => {
                let Some(orphan) = self.pools[pool.0].orphans.remove(instance) else {
                    return;
                };
                self.counts.orphans_collected += 1;
                self.may_place = true;
                self.decide(Decision::Orphan {
                    pool,
                    instance: instance.clone(),
                    name: orphan.name,
                    fate: OrphanFate::Collected,
                });
            }
            // Confirmed gone, but not by this call (pools sharing one
            // inventory each try): forgotten, counted once by whoever removed it.
            Ok(Teardown::Absent) => {
                self.pools[pool.0].orphans.remove(instance);
                self.may_place = true;
            }
            Ok(Teardown::Requested) | Err(_) => {}
        }
    }

    pub(super) fn orphan(&mut self, pool: PoolId, instance: &Instance) {
        let now = self.now;
        let grace = self.settings.orphan_grace;
        let orphans = &mut self.pools[pool.0].orphans;
        let seen = orphans.contains_key(&instance.id);
        let orphan = orphans
            .entry(instance.id.clone())
            .or_insert_with(|| Orphan {
                name: instance.name.to_string(),
                first_seen: now,
                collecting: None,
            });
        let due = orphan.collecting.is_none()
            && now.duration_since(orphan.first_seen).unwrap_or_default() >= grace;
        if !seen {
            self.decide(Decision::Orphan {
                pool,
                instance: instance.id.clone(),
                name: instance.name.to_string(),
                fate: OrphanFate::Seen,
            });
        }
        if due {
            let call = self.call(
                pool,
                Call::Destroy(instance.id.clone()),
                Purpose::Collect {
                    pool,
                    instance: instance.id.clone(),
                },
            );
            if let Some(orphan) = self.pools[pool.0].orphans.get_mut(&instance.id) {
                orphan.collecting = Some(call);
            }
        }
    }
}
