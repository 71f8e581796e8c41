//! [`Scenario`]: a seeded workload, deployments over one host, and a fault schedule.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_provider::{Provider, ProviderKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::trace::{Trace, TraceError};
use crate::workload::{LabelMix, RunTime, TrustMix, Workload};

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

/// A restart of one deployment's scheduler at `at` (modelled time since the
/// scenario's start): the scheduler is dropped and a new one built over the
/// same providers (H10, B8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restart {
    /// The deployment index.
    pub deployment: usize,
    /// When, as an offset from the scenario's start.
    pub at: Duration,
}

/// A stray: an instance the harness starts on the host under a deployment's
/// owner, named after no job (`stray-K`), as a crashed earlier process would
/// leave one. No lease holds it, so it is an orphan the scheduler must
/// collect within its grace period (B7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stray {
    /// The deployment index.
    pub deployment: usize,
    /// When it appears, as an offset from the scenario's start.
    pub at: Duration,
    /// How long it runs if nobody destroys it.
    pub lasting: Duration,
}

/// One pool of every deployment of a scenario: a configured provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolLayout {
    /// Its configured name.
    pub name: String,
    /// Its configured kind (docker, tart or firecracker: the configuration
    /// refuses the simulated kind; the provider behind it is simulated anyway).
    pub kind: ProviderKind,
    /// Its share of the deployment's leases, as a weight.
    pub share: u32,
}

/// One route of the scenario's routing (`routing.routes[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteLayout {
    /// The labels a job must all carry.
    pub labels: Vec<String>,
    /// The pool it routes to, by name.
    pub pool: String,
    /// The kind whose pools take the job when that pool is full.
    pub fallback_kind: Option<ProviderKind>,
}

/// The shape every deployment of a scenario shares: its pools, with their
/// shares of its leases, and its routing. Each deployment's `billet.yaml` is
/// made from it in code ([`Layout::config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The pools, in configuration order.
    pub pools: Vec<PoolLayout>,
    /// The routes, in order.
    pub routes: Vec<RouteLayout>,
    /// Where jobs no route matches go.
    pub default_kind: Option<ProviderKind>,
    /// The kinds that may run untrusted and unclassified jobs.
    pub untrusted_kinds: Vec<ProviderKind>,
}

impl Default for Layout {
    /// One docker pool, `linux`, with all the leases; every job goes there.
    fn default() -> Self {
        Layout {
            pools: vec![PoolLayout {
                name: "linux".to_owned(),
                kind: ProviderKind::Docker,
                share: 1,
            }],
            routes: Vec::new(),
            default_kind: Some(ProviderKind::Docker),
            untrusted_kinds: Vec::new(),
        }
    }
}

impl Layout {
    /// Three pools per deployment: `linux` (docker, 60% of the leases, its
    /// route falling back to firecracker), `vm` (firecracker, 30%) and `mac`
    /// (tart, 10%); routes `[macos] -> mac`, `[kvm] -> vm`, `[linux] -> linux`
    /// (fallback firecracker); `default_kind: docker`; `untrusted_kinds:
    /// [firecracker]` (the simulated providers refuse untrusted work anyway).
    /// [`LabelMix::routed`] is the label mix made for it.
    pub fn routed() -> Self {
        let pool = |name: &str, kind, share| PoolLayout {
            name: name.to_owned(),
            kind,
            share,
        };
        let route = |label: &str, pool: &str, fallback_kind| RouteLayout {
            labels: vec![label.to_owned()],
            pool: pool.to_owned(),
            fallback_kind,
        };
        Layout {
            pools: vec![
                pool("linux", ProviderKind::Docker, 6),
                pool("vm", ProviderKind::Firecracker, 3),
                pool("mac", ProviderKind::Tart, 1),
            ],
            routes: vec![
                route("macos", "mac", None),
                route("kvm", "vm", None),
                route("linux", "linux", Some(ProviderKind::Firecracker)),
            ],
            default_kind: Some(ProviderKind::Docker),
            untrusted_kinds: vec![ProviderKind::Firecracker],
        }
    }

    /// Each pool's capacity out of a deployment's `capacity`, by share:
    /// `capacity * share / total` rounded down, the leases left over given one
    /// each to the pools in order. They add up to `capacity` exactly.
    pub fn split(&self, capacity: usize) -> Vec<usize> {
        let total: u64 = self.pools.iter().map(|p| u64::from(p.share)).sum();
        if total == 0 {
            return vec![0; self.pools.len()];
        }
        let mut caps: Vec<usize> = self
            .pools
            .iter()
            .map(|p| (capacity as u128 * u128::from(p.share) / u128::from(total)) as usize)
            .collect();
        let mut left = capacity - caps.iter().sum::<usize>();
        for (cap, pool) in caps.iter_mut().zip(&self.pools) {
            if left == 0 {
                break;
            }
            if pool.share > 0 {
                *cap += 1;
                left -= 1;
            }
        }
        caps
    }

    /// The pools of deployments of these capacities, for a report:
    /// `linux (docker) 300, vm (firecracker) 150 per deployment of 500`, each
    /// distinct deployment size once.
    pub fn describe(&self, capacities: &[usize]) -> String {
        let mut sizes: Vec<usize> = capacities.to_vec();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        sizes.dedup();
        let described: Vec<String> = sizes
            .iter()
            .map(|&capacity| {
                let pools: Vec<String> = self
                    .pools
                    .iter()
                    .zip(self.split(capacity))
                    .map(|(pool, cap)| format!("{} ({}) {cap}", pool.name, pool.kind))
                    .collect();
                format!("{} per deployment of {capacity}", pools.join(", "))
            })
            .collect();
        described.join("; ")
    }

    /// The `billet.yaml` of deployment `id` with these pool capacities, as text.
    pub fn yaml(&self, id: &str, capacities: &[usize]) -> String {
        let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let mut yaml = format!("deployment: {{id: {}}}\nproviders:\n", quote(id));
        for (pool, capacity) in self.pools.iter().zip(capacities) {
            let settings = match pool.kind {
                ProviderKind::Docker => "docker: {image: runner}".to_owned(),
                ProviderKind::Tart => "tart: {image: macos-runner}".to_owned(),
                ProviderKind::Firecracker => {
                    "firecracker: {kernel: /var/lib/billet/vmlinux, rootfs: /var/lib/billet/rootfs.ext4}"
                        .to_owned()
                }
                other => format!("{other}: {{}}"),
            };
            yaml += &format!(
                "  - {{name: {}, kind: {}, capacity: {capacity}, {settings}}}\n",
                quote(&pool.name),
                pool.kind
            );
        }
        yaml += "routing:\n";
        if !self.routes.is_empty() {
            yaml += "  routes:\n";
            for route in &self.routes {
                let labels: Vec<String> = route.labels.iter().map(|l| quote(l)).collect();
                yaml += &format!(
                    "    - {{labels: [{}], provider: {}",
                    labels.join(", "),
                    quote(&route.pool)
                );
                if let Some(kind) = route.fallback_kind {
                    yaml += &format!(", fallback_kind: {kind}");
                }
                yaml += "}\n";
            }
        }
        if let Some(kind) = self.default_kind {
            yaml += &format!("  default_kind: {kind}\n");
        }
        if !self.untrusted_kinds.is_empty() {
            let kinds: Vec<&str> = self.untrusted_kinds.iter().map(|k| k.as_str()).collect();
            yaml += &format!("  untrusted_kinds: [{}]\n", kinds.join(", "));
        }
        yaml
    }

    /// The configuration of deployment `id` holding `capacity` leases, made in
    /// code (H10); `Ok(None)` when `capacity` is zero (a deployment with no
    /// lease has no valid configuration, and no scheduler). Errors: a pool
    /// would get no lease, or `billet-config` refuses the file (a simulated
    /// kind, say); the message says which.
    pub fn config(
        &self,
        id: &str,
        capacity: usize,
    ) -> Result<Option<billet_config::Config>, String> {
        if capacity == 0 {
            return Ok(None);
        }
        let capacities = self.split(capacity);
        if let Some((pool, _)) = self.pools.iter().zip(&capacities).find(|(_, c)| **c == 0) {
            return Err(format!(
                "deployment {id}'s {capacity} leases leave pool {} none: give it more leases or change the layout",
                pool.name
            ));
        }
        let yaml = self.yaml(id, &capacities);
        billet_config::Config::from_yaml_str(&yaml)
            .map(Some)
            .map_err(|err| format!("deployment {id}'s configuration is refused: {err}\n{yaml}"))
    }
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
    /// The inventory outages: every pool of the deployment at once.
    pub outages: Vec<Outage>,
    /// The pools and routing every deployment shares.
    pub layout: Layout,
    /// Restarts of a deployment's scheduler.
    pub restarts: Vec<Restart>,
    /// Stray instances left on the host for the scheduler to collect.
    pub strays: Vec<Stray>,
    /// How long an orphan may stay before the scheduler destroys it, for
    /// schedulers that collect orphans (B7).
    pub orphan_grace: Duration,
    /// Where modelled time starts.
    pub start: SystemTime,
    /// The scheduler's reconciliation interval, for schedulers that take one.
    pub reconcile_every: Duration,
    /// Whether the scheduler reads hints (P9, B12), for schedulers that can.
    pub hints: bool,
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
            .field("layout", &self.layout)
            .field("restarts", &self.restarts)
            .field("strays", &self.strays)
            .field("orphan_grace", &self.orphan_grace)
            .field("start", &self.start)
            .field("reconcile_every", &self.reconcile_every)
            .field("hints", &self.hints)
            .field("wrapped", &self.wrap.is_some())
            .finish_non_exhaustive()
    }
}

/// Which scheduler a fleet is meant for: only the replay command printed on a
/// failure and the fleet's shape depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Which {
    /// The production scheduler, `billet-scheduler` (H10).
    Production,
    /// The harness's reference scheduler (H3).
    Reference,
}

impl Which {
    /// The name the fleet example's `--scheduler` flag takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Which::Production => "production",
            Which::Reference => "reference",
        }
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
    /// Which scheduler the fleet is for: named in the replay command.
    pub scheduler: Which,
    /// Whether every deployment has three routed pools ([`Layout::routed`])
    /// and jobs carry [`LabelMix::routed`] labels; otherwise one pool and no labels.
    pub routed: bool,
    /// Restarts of a deployment's scheduler spread over the run, on
    /// deployments in turn, each two minutes into the outage of that
    /// deployment nearest in time when there is one.
    pub restarts: usize,
    /// Stray instances spread over the run, on deployments in turn.
    pub strays: usize,
    /// Whether the scheduler reads its providers' hints (P9, B12), so that
    /// an end is seen at the modelled instant its instance stops: on for the
    /// production scheduler's fleet, off otherwise (the reference scheduler
    /// and the service take none).
    pub hints: bool,
}

impl Default for Fleet {
    /// The reference scheduler's fleet: one pool per deployment, no labels,
    /// no restart, no stray.
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
            scheduler: Which::Reference,
            routed: false,
            restarts: 0,
            strays: 0,
            hints: false,
        }
    }
}

impl Fleet {
    /// The production scheduler's fleet (H10): as [`Fleet::default`], with
    /// three routed pools per deployment and labelled jobs, one restart and
    /// two strays.
    pub fn production() -> Self {
        Fleet {
            scheduler: Which::Production,
            routed: true,
            restarts: 1,
            strays: 2,
            hints: true,
            ..Fleet::default()
        }
    }

    /// The flags of the fleet example that give this fleet's shape.
    fn flags(&self) -> String {
        format!(
            "--scheduler {} --layout {} --restarts {} --strays {} --hints {}",
            self.scheduler.as_str(),
            if self.routed { "routed" } else { "single" },
            self.restarts,
            self.strays,
            if self.hints { "on" } else { "off" }
        )
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
            layout: Layout::default(),
            restarts: Vec::new(),
            strays: Vec::new(),
            orphan_grace: Duration::from_secs(300),
            start: SystemTime::UNIX_EPOCH + DEFAULT_START,
            reconcile_every: Duration::from_secs(60),
            hints: false,
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
        let outages: Vec<Outage> = (0..fleet.outages)
            .map(|k| Outage {
                deployment: k % deployments,
                at: span.mul_f64((k + 1) as f64 / (fleet.outages + 1) as f64),
                lasting: Duration::from_secs(300),
            })
            .collect();
        let restarts = restarts(fleet.restarts, deployments, span, &outages);
        let strays = (0..fleet.strays)
            .map(|k| Stray {
                deployment: k % deployments,
                at: span.mul_f64((k + 1) as f64 / (fleet.strays + 1) as f64)
                    + Duration::from_secs(60),
                lasting: Duration::from_secs(86_400),
            })
            .collect();
        let (layout, labels) = if fleet.routed {
            (Layout::routed(), LabelMix::routed())
        } else {
            (Layout::default(), LabelMix::NONE)
        };
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
                labels,
            },
            deployments: deployment_specs(&split),
            outages,
            layout,
            restarts,
            strays,
            hints: fleet.hints,
            replay: Some(format!(
                "cargo run --release --example fleet -- --seed {} --jobs {} --concurrency {} --deployments {} --outages {} {}",
                fleet.seed,
                fleet.jobs,
                fleet.concurrency,
                deployments,
                fleet.outages,
                fleet.flags()
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
        let needs_span = fleet.outages > 0 || fleet.restarts > 0 || fleet.strays > 0;
        let span = if needs_span {
            trace.scan()?.counts.submit_span()
        } else {
            // Still fail early on a trace that cannot be opened.
            drop(trace.open()?);
            Duration::ZERO
        };
        let outages = {
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
                .collect::<Vec<_>>()
        };
        let replay = format!(
            "cargo run --release --example fleet -- --trace {} --seed {} --concurrency {} --deployments {} --outages {} {}",
            trace.name(),
            fleet.seed,
            fleet.concurrency,
            deployments,
            fleet.outages,
            fleet.flags()
        );
        // A trace's jobs carry no labels: every one takes the default route.
        let layout = if fleet.routed {
            Layout::routed()
        } else {
            Layout::default()
        };
        let restarts = restarts(fleet.restarts, deployments, span, &outages);
        let strays = (0..fleet.strays)
            .map(|k| Stray {
                deployment: k % deployments,
                at: span.mul_f64((k + 1) as f64 / (fleet.strays + 1) as f64),
                lasting: Duration::from_secs(86_400),
            })
            .collect();
        Ok(Scenario {
            trace: Some(trace),
            deployments: deployment_specs(&split),
            outages,
            layout,
            restarts,
            strays,
            hints: fleet.hints,
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

    /// The same scenario with this layout for every deployment.
    #[must_use]
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The same scenario with one more restart.
    #[must_use]
    pub fn with_restart(mut self, restart: Restart) -> Self {
        self.restarts.push(restart);
        self
    }

    /// The same scenario with one more stray.
    #[must_use]
    pub fn with_stray(mut self, stray: Stray) -> Self {
        self.strays.push(stray);
        self
    }

    /// The configuration of every deployment, made in code from the layout
    /// (`None` for a deployment with no lease), or why one cannot be made.
    pub fn configs(&self) -> Result<Vec<Option<billet_config::Config>>, String> {
        self.deployments
            .iter()
            .map(|d| self.layout.config(&d.name, d.capacity))
            .collect()
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
        let n = self.deployments.len();
        if let Some(r) = self.restarts.iter().find(|r| r.deployment >= n) {
            return Err(format!(
                "restart at +{:?} names deployment {} of {n}",
                r.at, r.deployment
            ));
        }
        if let Some(s) = self.strays.iter().find(|s| s.deployment >= n) {
            return Err(format!(
                "stray at +{:?} names deployment {} of {n}",
                s.at, s.deployment
            ));
        }
        if self.layout.pools.is_empty() {
            return Err("the layout has no pool".to_owned());
        }
        self.configs().map(drop)
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

/// `count` restarts spread over `span`, on deployments in turn; a restart
/// whose deployment has an outage is moved two minutes into the one nearest
/// in time, so a new scheduler meets an inventory it cannot read (B8).
fn restarts(count: usize, deployments: usize, span: Duration, outages: &[Outage]) -> Vec<Restart> {
    (0..count)
        .map(|k| {
            let deployment = (k + 1) % deployments;
            let at = span.mul_f64((k + 1) as f64 / (count + 1) as f64);
            let nearest = outages
                .iter()
                .filter(|o| o.deployment == deployment)
                .min_by_key(|o| o.at.abs_diff(at));
            let at = match nearest {
                Some(o) => o.at + (o.lasting / 2).min(Duration::from_secs(120)),
                None => at,
            };
            Restart { deployment, at }
        })
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
