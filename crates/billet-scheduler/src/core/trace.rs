//! The `tracing` event of each decision, naming the job and the pool (B11).

use crate::protocol::Decision;
use crate::routing::{PoolId, PoolInfo};

/// The `tracing` event of one decision, naming the job and the pool (B11).
pub(super) fn trace(pools: &[PoolInfo], decision: &Decision) {
    let name = |pool: &PoolId| pools.get(pool.0).map_or("?", |p| p.name.as_str());
    match decision {
        Decision::Placed { job, pool } => {
            tracing::debug!(target: "billet_scheduler", job = job.0, pool = name(pool), "placed");
        }
        Decision::Launched {
            job,
            pool,
            instance,
        } => tracing::debug!(
            target: "billet_scheduler",
            job = job.0, pool = name(pool), instance = instance.as_str(), "launched"
        ),
        Decision::Adopted {
            job,
            pool,
            instance,
        } => tracing::info!(
            target: "billet_scheduler",
            job = job.0, pool = name(pool), instance = instance.as_str(), "adopted"
        ),
        Decision::Retrying {
            job, pool, attempt, ..
        } => tracing::info!(
            target: "billet_scheduler",
            job = job.0, pool = name(pool), attempt, "retrying"
        ),
        Decision::OutcomeDecided {
            job,
            pool,
            instance,
            outcome,
        } => tracing::debug!(
            target: "billet_scheduler",
            job = job.0, pool = name(pool), instance = instance.as_str(), %outcome, "outcome decided"
        ),
        Decision::Ended { job, pool, outcome } => tracing::debug!(
            target: "billet_scheduler",
            job = job.0, pool = pool.as_ref().map_or("-", name), %outcome, "ended"
        ),
        Decision::Orphan {
            pool,
            instance,
            name: instance_name,
            fate,
        } => tracing::info!(
            target: "billet_scheduler",
            pool = name(pool), instance = instance.as_str(), name = instance_name.as_str(),
            fate = ?fate, "orphan"
        ),
        Decision::Foreign {
            pool,
            instance,
            name: instance_name,
            live,
        } => tracing::warn!(
            target: "billet_scheduler",
            pool = name(pool), instance = instance.as_str(), name = instance_name.as_str(), live,
            "another store's instance: never adopted"
        ),
        Decision::InventoryError { pool, error } => tracing::warn!(
            target: "billet_scheduler",
            pool = name(pool), error = error.as_str(), "inventory unavailable; nothing freed"
        ),
    }
}
