//! `GET /metrics`: the scheduler's counts in Prometheus text format (L4),
//! through `prometheus-client`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use billet_scheduler::Stats;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ForeignLabel {
    pool: String,
    /// `live` (a second store launching now) or `leftover`.
    origin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabel {
    event: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

/// The service's metrics: per pool capacity, leases and inventory errors;
/// jobs queued; jobs ended per outcome.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    capacity: Family<PoolLabel, Gauge>,
    leases: Family<PoolLabel, Gauge>,
    pool_queued: Family<PoolLabel, Gauge>,
    queued: Gauge,
    ended: Family<OutcomeLabel, Counter>,
    inventory_errors: Family<PoolLabel, Counter>,
    contested: Family<PoolLabel, Gauge>,
    unsettled: Family<PoolLabel, Gauge>,
    foreign: Family<ForeignLabel, Counter>,
    deliveries: Family<DeliveryLabel, Counter>,
    /// Each configured pool's gauges, in the order the pools were named:
    /// handles on the families' own series, so that `observe` (once per
    /// engine step) sets them without a label's hash and lookup.
    pools: Vec<(String, PoolGauges)>,
}

/// One pool's series of the per-pool gauges.
#[derive(Debug)]
struct PoolGauges {
    capacity: Gauge,
    leases: Gauge,
    contested: Gauge,
    unsettled: Gauge,
    queued: Gauge,
}

/// The outcome labels of `billet_jobs_ended_total`.
pub const OUTCOMES: [&str; 3] = ["finished", "failed", "cancelled"];

impl Metrics {
    /// Metrics for the pools named `pools`, every series present from the
    /// start (at zero).
    pub fn new<'a>(pools: impl IntoIterator<Item = &'a str>) -> Metrics {
        let mut registry = Registry::default();
        let capacity = Family::<PoolLabel, Gauge>::default();
        let leases = Family::<PoolLabel, Gauge>::default();
        let pool_queued = Family::<PoolLabel, Gauge>::default();
        let queued = Gauge::default();
        let ended = Family::<OutcomeLabel, Counter>::default();
        let inventory_errors = Family::<PoolLabel, Counter>::default();
        let contested = Family::<PoolLabel, Gauge>::default();
        let unsettled = Family::<PoolLabel, Gauge>::default();
        let foreign = Family::<ForeignLabel, Counter>::default();
        let deliveries = Family::<DeliveryLabel, Counter>::default();
        registry.register(
            "billet_github_deliveries",
            "GitHub webhook deliveries, by event and by what they were answered",
            deliveries.clone(),
        );
        registry.register(
            "billet_pool_contested",
            "Instances another live store launched into a pool, in its last inventory (L10)",
            contested.clone(),
        );
        registry.register(
            "billet_pool_unsettled",
            "Jobs given up on whose instance a pool may still hold (L14)",
            unsettled.clone(),
        );
        registry.register(
            "billet_foreign_instances",
            "Instances of another store first seen in a pool, by origin: live or leftover (L10)",
            foreign.clone(),
        );
        registry.register(
            "billet_pool_capacity",
            "The most leases a pool holds at once",
            capacity.clone(),
        );
        registry.register(
            "billet_pool_leases",
            "Leases a pool holds now, launches in flight included",
            leases.clone(),
        );
        registry.register(
            "billet_pool_queued",
            "Jobs waiting whose first choice is this pool",
            pool_queued.clone(),
        );
        registry.register(
            "billet_jobs_queued",
            "Jobs waiting for a lease",
            queued.clone(),
        );
        registry.register(
            "billet_jobs_ended",
            "Jobs ended since this process started, per outcome",
            ended.clone(),
        );
        registry.register(
            "billet_inventory_errors",
            "Inventories of a pool that could not be read since this process started",
            inventory_errors.clone(),
        );
        let mut gauges = Vec::new();
        for pool in pools {
            let label = PoolLabel {
                pool: pool.to_owned(),
            };
            gauges.push((
                pool.to_owned(),
                PoolGauges {
                    capacity: capacity.get_or_create(&label).clone(),
                    leases: leases.get_or_create(&label).clone(),
                    contested: contested.get_or_create(&label).clone(),
                    unsettled: unsettled.get_or_create(&label).clone(),
                    queued: pool_queued.get_or_create(&label).clone(),
                },
            ));
            let _ = inventory_errors.get_or_create(&label);
            for origin in ["live", "leftover"] {
                let _ = foreign.get_or_create(&ForeignLabel {
                    pool: pool.to_owned(),
                    origin: origin.to_owned(),
                });
            }
        }
        for outcome in OUTCOMES {
            let _ = ended.get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            });
        }
        Metrics {
            registry,
            capacity,
            leases,
            pool_queued,
            queued,
            ended,
            inventory_errors,
            contested,
            unsettled,
            foreign,
            deliveries,
            pools: gauges,
        }
    }

    /// Counts an instance of another store first seen in `pool`: `live` when
    /// a second store launched it while this one runs (L10).
    pub fn foreign(&self, pool: &str, live: bool) {
        self.foreign
            .get_or_create(&ForeignLabel {
                pool: pool.to_owned(),
                origin: if live { "live" } else { "leftover" }.to_owned(),
            })
            .inc();
    }

    /// Sets the gauges from the scheduler's counts.
    pub fn observe(&self, stats: &Stats) {
        for (index, pool) in stats.pools.iter().enumerate() {
            let found;
            let gauges = match self.pools.get(index) {
                Some((name, gauges)) if *name == pool.name => gauges,
                // A pool not named at the start: its series, looked up.
                _ => {
                    let label = PoolLabel {
                        pool: pool.name.clone(),
                    };
                    found = PoolGauges {
                        capacity: self.capacity.get_or_create(&label).clone(),
                        leases: self.leases.get_or_create(&label).clone(),
                        contested: self.contested.get_or_create(&label).clone(),
                        unsettled: self.unsettled.get_or_create(&label).clone(),
                        queued: self.pool_queued.get_or_create(&label).clone(),
                    };
                    &found
                }
            };
            gauges.capacity.set(i64::from(pool.capacity));
            gauges.leases.set(i64::from(pool.leases));
            gauges.contested.set(i64::from(pool.contested));
            gauges.unsettled.set(i64::from(pool.unsettled));
            gauges
                .queued
                .set(i64::try_from(pool.queued).unwrap_or(i64::MAX));
        }
        self.queued
            .set(i64::try_from(stats.queued).unwrap_or(i64::MAX));
    }

    /// Counts a job ended `outcome` (`finished`, `failed` or `cancelled`).
    pub fn ended(&self, outcome: &str) {
        self.ended
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Counts an inventory of `pool` that could not be read.
    pub fn inventory_error(&self, pool: &str) {
        self.inventory_errors
            .get_or_create(&PoolLabel {
                pool: pool.to_owned(),
            })
            .inc();
    }

    /// Counts a GitHub delivery of `event` answered `result`: the
    /// caller bounds both to a few names.
    pub fn delivery(&self, event: &str, result: &str) {
        self.deliveries
            .get_or_create(&DeliveryLabel {
                event: event.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use billet_provider::ProviderKind;
    use billet_scheduler::PoolStats;

    // L4: the series the contract names, present from the start and following the counts.
    #[test]
    fn l4_metrics_name_every_series() {
        let metrics = Metrics::new(["linux", "mac"]);
        let text = metrics.render();
        for series in [
            r#"billet_pool_capacity{pool="linux"} 0"#,
            r#"billet_pool_leases{pool="mac"} 0"#,
            "billet_jobs_queued 0",
            r#"billet_jobs_ended_total{outcome="finished"} 0"#,
            r#"billet_jobs_ended_total{outcome="cancelled"} 0"#,
            r#"billet_inventory_errors_total{pool="linux"} 0"#,
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
        let stats = Stats {
            pools: vec![PoolStats {
                name: "linux".into(),
                kind: ProviderKind::Docker,
                capacity: 4,
                leases: 3,
                launching: 1,
                queued: 7,
                orphans: 0,
                ready: true,
                contested: 2,
                leftovers: 0,
                unsettled: 1,
            }],
            queued: 9,
            ..Stats::default()
        };
        metrics.observe(&stats);
        metrics.ended("failed");
        metrics.ended("failed");
        metrics.inventory_error("mac");
        metrics.foreign("linux", true);
        let text = metrics.render();
        for series in [
            r#"billet_pool_capacity{pool="linux"} 4"#,
            r#"billet_pool_leases{pool="linux"} 3"#,
            r#"billet_pool_queued{pool="linux"} 7"#,
            "billet_jobs_queued 9",
            r#"billet_jobs_ended_total{outcome="failed"} 2"#,
            r#"billet_inventory_errors_total{pool="mac"} 1"#,
            r#"billet_pool_contested{pool="linux"} 2"#,
            r#"billet_pool_unsettled{pool="linux"} 1"#,
            r#"billet_foreign_instances_total{pool="linux",origin="live"} 1"#,
            r#"billet_foreign_instances_total{pool="linux",origin="leftover"} 0"#,
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
        // Counts of pools in another order than named, and of one never
        // named, go to their own series.
        let pool = |name: &str, capacity| PoolStats {
            name: name.into(),
            capacity,
            ..stats.pools[0].clone()
        };
        metrics.observe(&Stats {
            pools: vec![pool("mac", 5), pool("vm", 6)],
            ..Stats::default()
        });
        let text = metrics.render();
        for series in [
            r#"billet_pool_capacity{pool="linux"} 4"#,
            r#"billet_pool_capacity{pool="mac"} 5"#,
            r#"billet_pool_capacity{pool="vm"} 6"#,
            r#"billet_pool_leases{pool="vm"} 3"#,
            r#"billet_pool_queued{pool="vm"} 7"#,
            r#"billet_pool_contested{pool="vm"} 2"#,
            r#"billet_pool_unsettled{pool="vm"} 1"#,
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
    }
}
