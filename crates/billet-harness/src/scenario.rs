//! [`Scenario`]: a seeded workload, deployments over one host, and a fault schedule.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_provider::Provider;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::trace::{Trace, TraceError};
use crate::workload::{RunTime, TrustMix, Workload};

/// One deployment of a scenario: its identity and its capacity in leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentSpec {
    /// The deployment identity (the owner written on its instances).
    pub name: String,
    /// The most leases it may hold at once.
    pub capacity: usize,
}

/// An inventory outage: from `at` (modelled time since the scenario's start)
/// for `lasting`, the deployment's `list` and `find` answer an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// The deployment index.
    pub deployment: usize,
    /// When it starts, as an offset from the scenario's start.
    pub at: Duration,
    /// How long it lasts.
    pub lasting: Duration,
}

/// Wraps a deployment's provider before the scheduler sees it: the seam for
/// fault injection beyond inventory outages (a provider that answers short,
/// say). Called with the deployment index.
pub type Wrap = Arc<dyn Fn(usize, Arc<dyn Provider>) -> Arc<dyn Provider> + Send + Sync>;

/// A complete, seeded description of one run: the workload, the deployments
/// sharing one host, and the fault schedule.
///
/// The same scenario with the same seed produces the same trace, whatever the
/// machine: run it with [`Scenario::run`].
#[derive(Clone)]
pub struct Scenario {
    /// The seed of every random draw.
    pub seed: u64,
    /// The jobs that arrive, unless a trace is set.
    pub workload: Workload,
    /// When set, the jobs are replayed from this trace, read as the run goes
    /// (T1, T2), and `workload` is not used.
    pub trace: Option<Trace>,
    /// The deployments, all over one simulated host.
    pub deployments: Vec<DeploymentSpec>,
    /// The inventory outages.
    pub outages: Vec<Outage>,
    /// Where modelled time starts.
    pub start: SystemTime,
    /// The scheduler's reconciliation interval, for schedulers that take one.
    pub reconcile_every: Duration,
    /// A run that has not finished this long after its last arrival fails.
    pub drain_limit: Duration,
    /// How many points the chart's series hold at most.
    pub chart_points: usize,
    /// The command that replays this scenario, printed when a run fails.
    pub replay: Option<String>,
    /// Wraps each provider before the scheduler sees it.
    pub wrap: Option<Wrap>,
}

impl fmt::Debug for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scenario")
            .field("seed", &self.seed)
            .field("workload", &self.workload)
            .field("trace", &self.trace)
            .field("deployments", &self.deployments)
            .field("outages", &self.outages)
            .field("start", &self.start)
            .field("reconcile_every", &self.reconcile_every)
            .field("wrapped", &self.wrap.is_some())
            .finish_non_exhaustive()
    }
}

/// The parameters of [`Scenario::fleet`], the shape of the fleet example.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fleet {
    /// The seed.
    pub seed: u64,
    /// Jobs in all.
    pub jobs: u64,
    /// Leases across all deployments, exactly: the peak the workload drives
    /// toward. See [`split_leases`] for how they are shared out.
    pub concurrency: usize,
    /// Deployments sharing the host; the leases are split as evenly as
    /// whole numbers allow.
    pub deployments: usize,
    /// Inventory outages, spread over the run and across deployments.
    pub outages: usize,
    /// Offered load: arrivals times mean run time over capacity. Above 1 a
    /// queue builds.
    pub load: f64,
    /// Share of jobs that are not trusted (half untrusted, half unclassified);
    /// no simulated deployment accepts them, so they are refused.
    pub untrusted_share: f64,
    /// When set, jobs arrive evenly over this much modelled time, and the
    /// median run time is scaled so that the offered load is still `load`.
    /// When unset, run times keep a ten-minute median and the arrival rate
    /// follows from `load`.
    pub arrivals_over: Option<Duration>,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            seed: 42,
            jobs: 50_000,
            concurrency: 1_000,
            deployments: 2,
            outages: 3,
            load: 0.97,
            untrusted_share: 0.02,
            arrivals_over: None,
        }
    }
}

/// The epoch of every scenario unless told otherwise: 2026-01-01T00:00:00Z.
pub const DEFAULT_START: Duration = Duration::from_secs(1_767_225_600);

impl Scenario {
    /// A scenario with this seed, the default workload, one deployment of 100
    /// leases, and no outages.
    pub fn new(seed: u64) -> Self {
        Scenario {
            seed,
            workload: Workload::default(),
            trace: None,
            deployments: vec![DeploymentSpec {
                name: "deployment-0".to_owned(),
                capacity: 100,
            }],
            outages: Vec::new(),
            start: SystemTime::UNIX_EPOCH + DEFAULT_START,
            reconcile_every: Duration::from_secs(60),
            drain_limit: Duration::from_secs(30 * 24 * 3600),
            chart_points: 600,
            replay: None,
            wrap: None,
        }
    }

    /// A fleet of `deployments` over one host sharing `concurrency` leases,
    /// fed `jobs` log-normal CI jobs (median ten minutes) at the offered
    /// `load`, with `outages` five-minute inventory outages spread over the run.
    pub fn fleet(fleet: Fleet) -> Self {
        let mut run_time = Workload::default().run_time;
        let deployments = fleet.deployments.max(1);
        let split = split_leases(fleet.concurrency, deployments);
        // No lease at all is refused when the scenario runs; the rates below
        // are computed as if there were one, so they stay finite.
        let capacity = fleet.concurrency.max(1);
        // Offered load = arrivals per second x mean run time / capacity.
        let per_second = match fleet.arrivals_over {
            Some(span) if !span.is_zero() => {
                let per_second = fleet.jobs as f64 / span.as_secs_f64();
                let mean = fleet.load * capacity as f64 / per_second;
                if let RunTime::LogNormal { median, .. } = &mut run_time {
                    let scale = mean / Workload::default().run_time.mean().as_secs_f64();
                    *median = median.mul_f64(scale.clamp(1e-6, 1e6));
                }
                per_second
            }
            _ => fleet.load * capacity as f64 / run_time.mean().as_secs_f64(),
        };
        let span =
            Duration::try_from_secs_f64(fleet.jobs as f64 / per_second.max(f64::MIN_POSITIVE))
                .unwrap_or(Duration::MAX);
        let untrusted = fleet.untrusted_share.clamp(0.0, 1.0);
        let outages = (0..fleet.outages)
            .map(|k| Outage {
                deployment: k % deployments,
                at: span.mul_f64((k + 1) as f64 / (fleet.outages + 1) as f64),
                lasting: Duration::from_secs(300),
            })
            .collect();
        Scenario {
            workload: Workload {
                jobs: fleet.jobs,
                arrivals_per_minute: per_second * 60.0,
                run_time,
                trust: TrustMix {
                    trusted: 1.0 - untrusted,
                    untrusted: untrusted / 2.0,
                    unknown: untrusted / 2.0,
                },
                name_prefix: "job-".to_owned(),
            },
            deployments: deployment_specs(&split),
            outages,
            replay: Some(format!(
                "cargo run --release --example fleet -- --seed {} --jobs {} --concurrency {} --deployments {} --outages {}",
                fleet.seed, fleet.jobs, fleet.concurrency, deployments, fleet.outages
            )),
            ..Scenario::new(fleet.seed)
        }
    }

    /// A replay of `trace` through a fleet sized by `fleet`: its seed,
    /// `concurrency` (leases in all, split by [`split_leases`]), `deployments`
    /// and `outages`; the fleet's job count, load and trust mix are not used,
    /// since the trace says what arrives (T2, T3).
    ///
    /// The outages are the one thing still drawn from the seed: each starts at
    /// a time drawn uniformly over the trace's submit span and lasts five
    /// modelled minutes, on deployments in turn. Finding that span reads the
    /// trace once, as a replay does (constant memory), and only when outages
    /// are asked for.
    ///
    /// Errors: the trace cannot be opened, or (when scanned for outages) it is
    /// malformed; the error names the file and line.
    pub fn replay(trace: Trace, fleet: Fleet) -> Result<Self, TraceError> {
        let deployments = fleet.deployments.max(1);
        let split = split_leases(fleet.concurrency, deployments);
        let outages = if fleet.outages == 0 {
            // Still fail early on a trace that cannot be opened.
            drop(trace.open()?);
            Vec::new()
        } else {
            let span = trace.scan()?.counts.submit_span();
            let mut rng = ChaCha8Rng::seed_from_u64(fleet.seed);
            let mut times: Vec<Duration> = (0..fleet.outages)
                .map(|_| Duration::from_secs(rng.random_range(0..=span.as_secs())))
                .collect();
            times.sort_unstable();
            times
                .into_iter()
                .enumerate()
                .map(|(k, at)| Outage {
                    deployment: k % deployments,
                    at,
                    lasting: Duration::from_secs(300),
                })
                .collect()
        };
        let replay = format!(
            "cargo run --release --example fleet -- --trace {} --seed {} --concurrency {} --deployments {} --outages {}",
            trace.name(),
            fleet.seed,
            fleet.concurrency,
            deployments,
            fleet.outages
        );
        Ok(Scenario {
            trace: Some(trace),
            deployments: deployment_specs(&split),
            outages,
            replay: Some(replay),
            ..Scenario::new(fleet.seed)
        })
    }

    /// The same scenario with its jobs replayed from `trace` instead of
    /// generated.
    #[must_use]
    pub fn with_trace(mut self, trace: Trace) -> Self {
        self.trace = Some(trace);
        self
    }

    /// The same scenario with this workload.
    #[must_use]
    pub fn with_workload(mut self, workload: Workload) -> Self {
        self.workload = workload;
        self
    }

    /// The same scenario with these deployments.
    #[must_use]
    pub fn with_deployments(mut self, deployments: Vec<DeploymentSpec>) -> Self {
        self.deployments = deployments;
        self
    }

    /// The same scenario with one more outage.
    #[must_use]
    pub fn with_outage(mut self, outage: Outage) -> Self {
        self.outages.push(outage);
        self
    }

    /// The same scenario with every provider wrapped by `wrap` before the
    /// scheduler sees it.
    #[must_use]
    pub fn with_wrap(
        mut self,
        wrap: impl Fn(usize, Arc<dyn Provider>) -> Arc<dyn Provider> + Send + Sync + 'static,
    ) -> Self {
        self.wrap = Some(Arc::new(wrap));
        self
    }

    /// The same scenario with a fixed run time for every job.
    #[must_use]
    pub fn with_run_time(mut self, run_time: RunTime) -> Self {
        self.workload.run_time = run_time;
        self
    }

    /// Checks the scenario can run; says what is wrong if not.
    pub fn validate(&self) -> Result<(), String> {
        self.workload.validate()?;
        if self.deployments.is_empty() {
            return Err("a scenario needs at least one deployment".to_owned());
        }
        if self.deployments.iter().all(|d| d.capacity == 0) {
            return Err(format!(
                "no deployment of the {} has any lease: a scenario needs at least one",
                self.deployments.len()
            ));
        }
        let mut names: Vec<&str> = self.deployments.iter().map(|d| d.name.as_str()).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|p| p[0] == p[1]) {
            return Err(format!("deployment name {:?} is used twice", pair[0]));
        }
        if let Some(o) = self
            .outages
            .iter()
            .find(|o| o.deployment >= self.deployments.len())
        {
            return Err(format!(
                "outage at +{:?} names deployment {} of {}",
                o.at,
                o.deployment,
                self.deployments.len()
            ));
        }
        Ok(())
    }

    /// The command that replays this scenario, or a sentence saying how.
    pub fn replay_command(&self) -> String {
        self.replay.clone().unwrap_or_else(|| {
            format!(
                "re-run this scenario with Scenario {{ seed: {}, .. }}",
                self.seed
            )
        })
    }
}

/// Splits `leases` across `deployments` so that they add up to exactly
/// `leases`: each deployment gets `leases / deployments`, and the first
/// `leases % deployments` one more. When there are fewer leases than
/// deployments, the last ones get none. (A split that leaves every deployment
/// without a lease, `leases == 0`, is refused when the scenario is validated.)
///
/// ```
/// use billet_harness::scenario::split_leases;
/// assert_eq!(split_leases(13, 7), [2, 2, 2, 2, 2, 2, 1]);
/// assert_eq!(split_leases(1, 2), [1, 0]);
/// ```
pub fn split_leases(leases: usize, deployments: usize) -> Vec<usize> {
    let deployments = deployments.max(1);
    let (each, extra) = (leases / deployments, leases % deployments);
    (0..deployments)
        .map(|i| each + usize::from(i < extra))
        .collect()
}

fn deployment_specs(split: &[usize]) -> Vec<DeploymentSpec> {
    split
        .iter()
        .enumerate()
        .map(|(i, &capacity)| DeploymentSpec {
            name: format!("deployment-{i}"),
            capacity,
        })
        .collect()
}
