//! [`Stats`]: what a running scheduler can tell about itself (B11).

use billet_provider::ProviderKind;

/// One pool's counts at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStats {
    /// The configured name.
    pub name: String,
    /// The configured kind.
    pub kind: ProviderKind,
    /// The most leases it holds at once.
    pub capacity: u32,
    /// Leases held, launches in flight included: never above `capacity` by
    /// this scheduler's own placements.
    pub leases: u32,
    /// Of those, leases whose instance is not launched yet (a launch asked
    /// for, or waiting to be retried).
    pub launching: u32,
    /// Jobs waiting whose first choice is this pool.
    pub queued: u64,
    /// Orphans seen in its inventory and not yet collected.
    pub orphans: u32,
    /// Whether its inventory has answered once since the scheduler started:
    /// nothing is placed here before (B8).
    pub ready: bool,
    /// Instances a live second store launched here, in the last inventory:
    /// never destroyed, counted against room (L10).
    pub contested: u32,
    /// Another store's leftovers in the last inventory, collected as orphans
    /// (L10).
    pub leftovers: u32,
    /// Jobs given up on whose instance may still be here, counted against
    /// room until an inventory lacks it (L14).
    pub unsettled: u32,
}

/// The scheduler's counts at one moment: per pool, and totals per outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every pool, in configuration order.
    pub pools: Vec<PoolStats>,
    /// Jobs waiting for a lease.
    pub queued: u64,
    /// Jobs accepted.
    pub accepted: u64,
    /// Jobs refused at submission.
    pub refused: u64,
    /// Jobs that ended finished.
    pub finished: u64,
    /// Jobs that ended failed.
    pub failed: u64,
    /// Jobs that ended cancelled.
    pub cancelled: u64,
    /// Jobs learned from an inventory at start (B8).
    pub learned: u64,
    /// Instances adopted: found after a conflict, seen while a retry waited,
    /// or orphans named after a queued job (B5, B7).
    pub adopted: u64,
    /// Orphans destroyed after their grace period (B7).
    pub orphans_collected: u64,
    /// Inventories that could not be read (B6).
    pub inventory_errors: u64,
    /// Provider calls treated as lost at their deadline.
    pub calls_lost: u64,
}

impl Stats {
    /// Leases held across every pool.
    pub fn leases(&self) -> u64 {
        self.pools.iter().map(|p| u64::from(p.leases)).sum()
    }

    /// Jobs ended, whatever the outcome.
    pub fn ended(&self) -> u64 {
        self.finished + self.failed + self.cancelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(leases: u32) -> PoolStats {
        PoolStats {
            name: "p".into(),
            kind: ProviderKind::Docker,
            capacity: 10,
            leases,
            launching: 0,
            queued: 0,
            orphans: 0,
            ready: true,
            contested: 0,
            leftovers: 0,
            unsettled: 0,
        }
    }

    // B11: the totals add up what they say.
    #[test]
    fn b11_totals() {
        let stats = Stats {
            pools: vec![pool(3), pool(4)],
            finished: 5,
            failed: 3,
            cancelled: 2,
            ..Stats::default()
        };
        assert_eq!(stats.ended(), 10);
        assert_eq!(stats.leases(), 7);
        assert_eq!(Stats::default().leases(), 0);
    }
}
