//! `GET /metrics`: the scheduler's counts in Prometheus text format (L4),
//! through `prometheus-client`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
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
struct StateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WhatLabel {
    what: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// The GitHub intake's series (G8), registered whether or not the intake
/// runs (they stay empty or zero without it).
#[derive(Debug)]
struct GithubMetrics {
    jobs: Family<StateLabel, Gauge>,
    left: Family<ReasonLabel, Counter>,
    startup: Histogram,
    runners: Family<StateLabel, Gauge>,
    api: Family<StatusLabel, Counter>,
    rate_limit_remaining: Gauge,
    reconciled: Family<WhatLabel, Counter>,
}

impl GithubMetrics {
    fn register(registry: &mut Registry) -> GithubMetrics {
        let metrics = GithubMetrics {
            jobs: Family::default(),
            left: Family::default(),
            startup: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            runners: Family::default(),
            api: Family::default(),
            rate_limit_remaining: Gauge::default(),
            reconciled: Family::default(),
        };
        registry.register(
            "billet_github_jobs",
            "GitHub jobs billet took that have not completed, by state (queued, in_progress)",
            metrics.jobs.clone(),
        );
        registry.register(
            "billet_github_jobs_left",
            "Queued GitHub jobs billet left for other runners, by reason",
            metrics.left.clone(),
        );
        registry.register(
            "billet_github_job_startup_seconds",
            "From a GitHub job's queued delivery to its in_progress one",
            metrics.startup.clone(),
        );
        registry.register(
            "billet_github_runners",
            "billet's GitHub runners, by state (starting, idle, busy)",
            metrics.runners.clone(),
        );
        registry.register(
            "billet_github_api_requests",
            "Requests to GitHub's API, by answer status (transport: none came)",
            metrics.api.clone(),
        );
        registry.register(
            "billet_github_rate_limit_remaining",
            "The last X-RateLimit-Remaining GitHub's API sent",
            metrics.rate_limit_remaining.clone(),
        );
        registry.register(
            "billet_github_reconciled",
            "What the reconciles with GitHub's API found that deliveries had not said, by what (settled, found, orphans)",
            metrics.reconciled.clone(),
        );
        for what in RECONCILED {
            let _ = metrics.reconciled.get_or_create(&WhatLabel {
                what: what.to_owned(),
            });
        }
        for state in GITHUB_JOB_STATES {
            let _ = metrics.jobs.get_or_create(&StateLabel {
                state: state.to_owned(),
            });
        }
        for state in RUNNER_STATES {
            let _ = metrics.runners.get_or_create(&StateLabel {
                state: state.to_owned(),
            });
        }
        metrics
    }
}

/// The state labels of `billet_github_jobs`.
pub const GITHUB_JOB_STATES: [&str; 2] = ["queued", "in_progress"];
/// The labels of `billet_github_reconciled_total`: jobs settled from the
/// API, queued jobs found whose delivery never came, orphan registrations
/// removed.
pub const RECONCILED: [&str; 3] = ["settled", "found", "orphans"];
/// The state labels of `billet_github_runners`.
pub const RUNNER_STATES: [&str; 3] = ["starting", "idle", "busy"];

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
    github: GithubMetrics,
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
        let github = GithubMetrics::register(&mut registry);
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
            github,
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

    /// Counts a queued GitHub job billet left, for `reason` (one of a few
    /// names the caller bounds).
    pub fn github_left(&self, reason: &str) {
        self.github
            .left
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The GitHub jobs billet took that have not completed: `queued` and
    /// `in_progress`.
    pub fn github_jobs(&self, queued: usize, in_progress: usize) {
        for (state, n) in GITHUB_JOB_STATES.into_iter().zip([queued, in_progress]) {
            self.github
                .jobs
                .get_or_create(&StateLabel {
                    state: state.to_owned(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// A GitHub job went from its `queued` delivery to `in_progress` in
    /// `took`.
    pub fn github_startup(&self, took: std::time::Duration) {
        self.github.startup.observe(took.as_secs_f64());
    }

    /// What one reconcile with GitHub's API did: `[settled, found,
    /// orphans]` (in [`RECONCILED`] order), added.
    pub fn github_reconciled(&self, counts: [usize; 3]) {
        for (what, n) in RECONCILED.into_iter().zip(counts) {
            self.github
                .reconciled
                .get_or_create(&WhatLabel {
                    what: what.to_owned(),
                })
                .inc_by(u64::try_from(n).unwrap_or(u64::MAX));
        }
    }

    /// billet's runners: `[starting, idle, busy]` (in [`RUNNER_STATES`]
    /// order).
    pub fn github_runners(&self, counts: [usize; 3]) {
        for (state, n) in RUNNER_STATES.into_iter().zip(counts) {
            self.github
                .runners
                .get_or_create(&StateLabel {
                    state: state.to_owned(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// GitHub's API client's counts: its answers so far by status (each
    /// series raised to the count, never lowered), and the rate limit's
    /// remaining calls when GitHub said.
    pub fn github_api(
        &self,
        answers: &std::collections::BTreeMap<String, u64>,
        remaining: Option<u64>,
    ) {
        for (status, &count) in answers {
            let counter = self.github.api.get_or_create(&StatusLabel {
                status: status.clone(),
            });
            // Raised to the count, never lowered.
            counter.inc_by(count.saturating_sub(counter.get()));
        }
        if let Some(remaining) = remaining {
            self.github
                .rate_limit_remaining
                .set(i64::try_from(remaining).unwrap_or(i64::MAX));
        }
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

    // G8: the GitHub intake's series, present from the start and following
    // what the intake tells them; API counts only move forward.
    #[test]
    fn g8_the_github_series_follow_the_intake() {
        let metrics = Metrics::new(["linux"]);
        let text = metrics.render();
        for series in [
            r#"billet_github_jobs{state="queued"} 0"#,
            r#"billet_github_jobs{state="in_progress"} 0"#,
            r#"billet_github_runners{state="starting"} 0"#,
            r#"billet_github_runners{state="idle"} 0"#,
            r#"billet_github_runners{state="busy"} 0"#,
            "billet_github_rate_limit_remaining 0",
            "billet_github_job_startup_seconds_count 0",
            r#"billet_github_reconciled_total{what="settled"} 0"#,
            r#"billet_github_reconciled_total{what="found"} 0"#,
            r#"billet_github_reconciled_total{what="orphans"} 0"#,
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
        metrics.github_left("trust");
        metrics.github_left("trust");
        metrics.github_jobs(3, 2);
        metrics.github_runners([1, 4, 2]);
        metrics.github_startup(std::time::Duration::from_secs(3));
        metrics.github_reconciled([1, 0, 2]);
        metrics.github_reconciled([2, 3, 0]);
        let answers = |ok, refused| {
            [("200".to_owned(), ok), ("422".to_owned(), refused)]
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        metrics.github_api(&answers(5, 1), Some(4_990));
        metrics.github_api(&answers(7, 1), None);
        metrics.github_api(&answers(6, 0), None);
        let text = metrics.render();
        for series in [
            r#"billet_github_jobs_left_total{reason="trust"} 2"#,
            r#"billet_github_reconciled_total{what="settled"} 3"#,
            r#"billet_github_reconciled_total{what="found"} 3"#,
            r#"billet_github_reconciled_total{what="orphans"} 2"#,
            r#"billet_github_jobs{state="queued"} 3"#,
            r#"billet_github_jobs{state="in_progress"} 2"#,
            r#"billet_github_runners{state="starting"} 1"#,
            r#"billet_github_runners{state="idle"} 4"#,
            r#"billet_github_runners{state="busy"} 2"#,
            "billet_github_job_startup_seconds_sum 3.0",
            "billet_github_job_startup_seconds_count 1",
            r#"billet_github_job_startup_seconds_bucket{le="2.0"} 0"#,
            r#"billet_github_job_startup_seconds_bucket{le="4.0"} 1"#,
            r#"billet_github_api_requests_total{status="200"} 7"#,
            r#"billet_github_api_requests_total{status="422"} 1"#,
            "billet_github_rate_limit_remaining 4990",
        ] {
            assert!(text.contains(series), "{series} missing from\n{text}");
        }
    }
}
