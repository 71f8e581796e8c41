//! `--intake github` (H14): a deployment's jobs reach its service as GitHub's
//! `workflow_job` deliveries from a [`SimulatedGithub`], not as `POST
//! /v1/jobs`.
//!
//! Each deployment's `billet.yaml` gains a `github:` section whose scope is
//! the deployment's own repository (`fleet/<deployment>`, trusted), whose
//! pools offer the labels `[self-hosted, <pool>]`, and whose API is the
//! simulated GitHub's. A harness job becomes a GitHub job of its own run,
//! labelled for the pool its route names (a job's labels are the pool's:
//! GitHub matches labels exactly, routing by a subset); a job not trusted
//! is a pull request's from a fork (billet then trusts it less, G4).
//!
//! What the harness books is the GitHub jobs: a job is placed when a runner
//! takes it (its lease the runner's), and freed when that runner's billet
//! job ends. The runners themselves, billet's jobs, are checked against the
//! engine's own view at every step ([`Side::check`]).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet::github::Github;
use billet::github::deliveries::Deliveries;
use billet::github::intake::{Ticked, Ticks};
use billet::github::webhook::Webhook;
use billet_config::Config;
use billet_provider::{InstanceId, Provider, TrustClass};
use billet_scheduler::{Decision, Identity, InstanceName, Pools};
use hdrhistogram::Histogram;
use rustc_hash::FxHashMap;

use crate::github::{Faults, GithubJob, Plant, Played, SimulatedGithub, Status, api::TOKEN};
use crate::production::reason;
use crate::scheduler::{Adopted, FleetChange, FreeReason, Freed, Launched, Placed};
use crate::workload::{Job, JobId};
use futures::StreamExt;

use super::{IN_FLIGHT, QUIESCENT_BOUND};

/// The most rounds of deliveries, ticks and the runners' play one instant
/// may take under `--intake github` before the run fails saying so (each
/// round answers what the last changed; a run that keeps changing at one
/// instant is a livelock).
const SETTLE_ROUNDS: usize = 1_000;

/// The webhook's secret every deployment is given.
const SECRET: &str = "the-harness-webhook-secret";

/// How long a runner runs with no job before its instance ends by itself:
/// longer than any run; billet retires an idle runner long before.
const RUNNER_LIVES: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How the jobs reach each deployment's service.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Intake {
    /// `POST /v1/jobs` (H13).
    #[default]
    Http,
    /// GitHub's deliveries from a simulated GitHub, with these faults (H14).
    Github(Faults),
}

/// One runner: a billet job of the deployment's service, as its decisions
/// and the simulated GitHub say.
#[derive(Debug, Clone)]
struct Runner {
    pool: usize,
    /// Whether its lease is held (not since a crash, until adopted).
    held: bool,
    instance: Option<InstanceId>,
    /// The harness job (GitHub job) it took.
    took: Option<JobId>,
    /// When its instance was launched (or adopted).
    up_since: Option<SystemTime>,
    /// The GitHub job billet made it for, as its `github.db` says.
    made_for: Option<u64>,
}

/// What the report adds (H14).
#[derive(Debug)]
pub(super) struct Measured {
    /// Queued to `in_progress`, modelled, in milliseconds.
    startup: Histogram<u64>,
    /// How long each lost delivery took to be found: billet told what it
    /// carried, by the API or a later delivery.
    lost_found: Histogram<u64>,
    /// Lost deliveries found within one reconcile interval.
    found_in_one: u64,
    /// Runners that took a job other than the one billet made them for.
    taken_by_another: u64,
    runners: u64,
    completed: u64,
    queued: u64,
}

impl Default for Measured {
    fn default() -> Self {
        let histogram = || {
            Histogram::new_with_bounds(1, 366 * 24 * 3_600_000, 3)
                .expect("bounds of 1 ms to a year at 3 significant figures are valid")
        };
        Measured {
            startup: histogram(),
            lost_found: histogram(),
            found_in_one: 0,
            taken_by_another: 0,
            runners: 0,
            completed: 0,
            queued: 0,
        }
    }
}

/// A deployment's GitHub: the simulated one, the intake's ticks, and the
/// runners as the harness books them.
#[derive(Debug)]
pub(super) struct Side {
    pub(super) sim: SimulatedGithub,
    api_url: Option<String>,
    pub(super) webhook_url: Option<hyper::Uri>,
    ticks: Option<Ticks>,
    pub(super) ticked: Ticked,
    pool_names: Vec<String>,
    raw: Vec<Arc<dyn Provider>>,
    idle_timeout: Duration,
    reconcile_every: Duration,
    runners: FxHashMap<u64, Runner>,
    /// Runners (placed, not ended) per pool, and those of them that took a job.
    held: Vec<usize>,
    busy: Vec<usize>,
    /// Jobs GitHub completed whose runner's lease is not yet freed.
    completed: rustc_hash::FxHashSet<JobId>,
    pub(super) measured: Measured,
    /// The service's webhook, whose `github.db` says which job each runner
    /// was made for.
    webhook: Option<Arc<Webhook>>,
    /// [`Plant::MissAnEnd`], until planted.
    miss_an_end: bool,
}

/// The labels a GitHub job of pool `pool` runs on, and its runners offer.
fn labels_of(pool: &str) -> Vec<String> {
    vec!["self-hosted".to_owned(), pool.to_owned()]
}

impl Side {
    /// The GitHub of deployment `name` over `host`, its pools `raw` (named
    /// `pool_names`), with `faults`.
    pub(super) fn new(
        name: &str,
        host: billet_simulated::Host,
        faults: Faults,
        pool_names: Vec<String>,
        raw: Vec<Arc<dyn Provider>>,
        reconcile_every: Duration,
    ) -> Result<Side, String> {
        let repository = format!("fleet/{name}");
        let sim = SimulatedGithub::new(&repository, name, host, SECRET.as_bytes(), faults)?;
        let faults = &faults;
        let pools = pool_names.len();
        Ok(Side {
            sim,
            api_url: None,
            webhook_url: None,
            ticks: None,
            ticked: Ticked::default(),
            pool_names,
            raw,
            idle_timeout: billet_config::DEFAULT_IDLE_TIMEOUT,
            reconcile_every: reconcile_every.max(billet_config::MIN_RECONCILE_EVERY),
            runners: FxHashMap::default(),
            held: vec![0; pools],
            busy: vec![0; pools],
            completed: Default::default(),
            measured: Measured::default(),
            webhook: None,
            miss_an_end: faults.plant == Some(Plant::MissAnEnd),
        })
    }

    /// The deployment's configuration with its `github:` section, its files
    /// in `dir`; the simulated GitHub's API started on first use.
    async fn config(&mut self, yaml: &str, dir: &std::path::Path) -> Result<Config, String> {
        use std::os::unix::fs::PermissionsExt;
        let url = match &self.api_url {
            Some(url) => url.clone(),
            None => {
                let url = self.sim.serve().await?;
                self.api_url = Some(url.clone());
                url
            }
        };
        for (file, text) in [("gh-token", TOKEN), ("gh-secret", SECRET)] {
            let path = dir.join(file);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let pools: Vec<String> = self
            .pool_names
            .iter()
            .map(|pool| {
                let labels: Vec<String> =
                    labels_of(pool).iter().map(|l| format!("{l:?}")).collect();
                format!("{{pool: {pool:?}, labels: [{}]}}", labels.join(", "))
            })
            .collect();
        let command: Vec<String> = billet_simulated::run_for(RUNNER_LIVES)
            .iter()
            .map(|a| format!("{a:?}"))
            .collect();
        let text = format!(
            "{yaml}github:
  api_url: {url}
  token_file: {dir}/gh-token
  webhook_secret_file: {dir}/gh-secret
  scopes: [{{repository: {repository}, trust: trusted}}]
  pools: [{pools}]
  runner: {{command: [{command}], idle_timeout: {idle}s}}
  reconcile_every: {every}ms
",
            dir = dir.display(),
            repository = self.sim.repository(),
            pools = pools.join(", "),
            command = command.join(", "),
            idle = self.idle_timeout.as_secs(),
            every = self.reconcile_every.as_millis(),
        );
        Config::from_yaml_str(&text)
            .map_err(|e| format!("the github: section is refused: {e}\n{text}"))
    }

    /// The pools a deployment's service runs with its GitHub intake (each
    /// wrapped to register its runners just in time), the intake not yet
    /// started, its files in `dir`, its API client on `clock`.
    pub(super) async fn prepare(
        &mut self,
        yaml: &str,
        dir: &std::path::Path,
        settings: billet_scheduler::Settings,
        clock: Arc<dyn billet_clock::Clock>,
    ) -> Result<(Pools, Github), String> {
        let config = self.config(yaml, dir).await?;
        let github_settings = config
            .github()
            .cloned()
            .ok_or_else(|| "the configuration lost its github: section".to_owned())?;
        let api = billet::github::wiring::api(&github_settings, clock)?;
        let deliveries = Deliveries::open(dir).map_err(|e| format!("github.db: {e}"))?;
        let webhook = Arc::new(Webhook::new(SECRET.as_bytes().to_vec(), deliveries));
        self.webhook = Some(Arc::clone(&webhook));
        let mut github = Github::new(github_settings, api, webhook);
        self.ticks = Some(github.driven());
        let mut builder = Pools::builder(config).settings(settings);
        for (name, raw) in self.pool_names.iter().zip(&self.raw) {
            builder = builder.provider(name.clone(), github.provider(name, Arc::clone(raw)));
        }
        let pools = builder.build().map_err(|e| e.to_string())?;
        Ok((pools, github))
    }

    /// Starts `github`'s intake beside `service`, over `pools`, for the
    /// store of `identity`.
    pub(super) fn attach(
        &mut self,
        github: Github,
        service: &billet::Service,
        pools: &Pools,
        identity: Option<&Identity>,
    ) -> Result<(), String> {
        github.start(
            service.engine_parts(),
            pools,
            identity.map(|i| i.as_str().to_owned()),
        )?;
        self.webhook_url = Some(
            format!("http://{}/v1/github/webhook", service.addr())
                .parse()
                .map_err(|e| format!("the webhook's address: {e}"))?,
        );
        Ok(())
    }

    /// Queues `job` at GitHub for the pool its route names (`pool`), billet
    /// expected to take it when `for_billet`.
    pub(super) fn queue(&mut self, job: &Job, pool: usize, for_billet: bool) {
        let labels = labels_of(&self.pool_names[pool]);
        self.measured.queued += 1;
        self.sim.queue(
            github_id(job.id),
            GithubJob {
                job: job.id,
                labels: labels.into(),
                forked: job.trust != TrustClass::Trusted,
                for_billet,
                run_time: job.run_time,
                queued_at: job.submitted_at,
                status: Status::Queued,
                lost: false,
            },
        );
    }

    /// Ticks the intake: it handles what was delivered, looks, reconciles
    /// when due.
    pub(super) async fn tick(&mut self) -> Result<(), String> {
        let Some(ticks) = &self.ticks else {
            return Ok(());
        };
        self.ticked = ticks.tick().await?;
        Ok(())
    }

    /// When the deployment's GitHub side next needs the clock moved for its
    /// own sake: a completion, a look due, a reconcile while any job is
    /// outstanding (what finds a lost delivery).
    pub(super) fn next_wakeup(&self) -> Option<SystemTime> {
        let reconcile = self
            .ticked
            .reconcile_at
            .filter(|_| self.sim.outstanding() || self.runners.values().any(|r| r.took.is_none()));
        [self.sim.next_due(), self.ticked.due, reconcile]
            .into_iter()
            .flatten()
            .min()
    }

    /// One decision of the service's engine about a runner, as the
    /// harness's change (if any): `deployment`'s, whose store is `identity`.
    pub(super) fn translate(
        &mut self,
        deployment: usize,
        decision: Decision,
        now: SystemTime,
        identity: Option<&Identity>,
        changes: &mut Vec<FleetChange>,
    ) -> Result<(), String> {
        let change = self.translate_one(deployment, decision, now, identity, changes)?;
        changes.extend(change);
        Ok(())
    }

    /// [`translate`](Self::translate)'s change, if one (a second, before
    /// it, pushed on `changes`).
    fn translate_one(
        &mut self,
        deployment: usize,
        decision: Decision,
        now: SystemTime,
        identity: Option<&Identity>,
        changes: &mut Vec<FleetChange>,
    ) -> Result<Option<FleetChange>, String> {
        Ok(match decision {
            Decision::Placed { job, pool } => {
                let made_for = self
                    .webhook
                    .as_ref()
                    .and_then(|webhook| webhook.served_by(job.0).ok().flatten())
                    .map(|facts| facts.id);
                let earlier = self.runners.insert(
                    job.0,
                    Runner {
                        pool: pool.0,
                        held: true,
                        instance: None,
                        took: None,
                        up_since: None,
                        made_for,
                    },
                );
                if let Some(earlier) = earlier.filter(|r| r.held) {
                    return Err(format!(
                        "deployment {deployment} placed runner job {} twice (it held a lease in pool {})",
                        job.0, earlier.pool
                    ));
                }
                self.held[pool.0] += 1;
                None
            }
            Decision::Launched { job, instance, .. } => {
                let runner = self.runners.get_mut(&job.0).ok_or_else(|| {
                    format!(
                        "deployment {deployment} launched runner job {} it never placed",
                        job.0
                    )
                })?;
                runner.instance = Some(instance);
                runner.up_since = Some(now);
                self.measured.runners += 1;
                None
            }
            Decision::Adopted {
                job,
                pool,
                instance,
            } => {
                let runner = self.runners.entry(job.0).or_insert_with(|| Runner {
                    pool: pool.0,
                    held: false,
                    instance: None,
                    took: None,
                    up_since: Some(now),
                    made_for: None,
                });
                if runner.pool != pool.0 {
                    return Err(format!(
                        "deployment {deployment} adopted runner job {} in pool {}, placed in {}",
                        job.0, pool.0, runner.pool
                    ));
                }
                runner.instance = Some(instance.clone());
                if runner.held {
                    return Ok(None);
                }
                runner.held = true;
                self.held[pool.0] += 1;
                if runner.took.is_some() {
                    self.busy[pool.0] += 1;
                }
                runner.took.map(|took| {
                    FleetChange::Adopted(Adopted {
                        job: took,
                        deployment,
                        pool: pool.0,
                        instance,
                    })
                })
            }
            Decision::Ended { job, pool, outcome } => {
                let Some(runner) = self.runners.remove(&job.0) else {
                    // A runner that ended before it was placed.
                    return Ok(None);
                };
                let Some(pool) = pool else {
                    // A runner the service ended before it held a lease: one
                    // cancelled while it waited for one, or, after a crash,
                    // one the new service gave up on before an inventory
                    // showed its instance (GitHub said its job completed).
                    // The job such a runner took is done: the deployment's
                    // again, and freed.
                    let (Some(took), Some(instance)) = (runner.took, runner.instance) else {
                        return Ok(None);
                    };
                    if runner.held {
                        return Err(format!(
                            "deployment {deployment}'s runner job {} ended unplaced while it held a lease",
                            job.0
                        ));
                    }
                    changes.push(FleetChange::Adopted(Adopted {
                        job: took,
                        deployment,
                        pool: runner.pool,
                        instance,
                    }));
                    let reason = if self.completed.remove(&took) {
                        FreeReason::Stopped
                    } else {
                        FreeReason::Cancelled
                    };
                    return Ok(Some(FleetChange::Freed(Freed {
                        job: took,
                        deployment,
                        pool: runner.pool,
                        name: job.instance_name_in(identity, &self.pool_names[runner.pool]),
                        reason,
                    })));
                };
                if !runner.held {
                    return Err(format!(
                        "deployment {deployment}'s runner job {} ended in pool {} without a lease since the crash",
                        job.0, pool.0
                    ));
                }
                if std::mem::take(&mut self.miss_an_end) {
                    // Planted: the books miss this end.
                    return Ok(None);
                }
                self.held[runner.pool] -= 1;
                match runner.took {
                    Some(took) => {
                        self.busy[runner.pool] -= 1;
                        // The job ended as GitHub says: a runner destroyed
                        // after its job completed (its end unseen, say,
                        // through an inventory outage) ran it to the end.
                        let completed = self.completed.remove(&took);
                        let reason = match reason(&outcome) {
                            FreeReason::Cancelled if completed => FreeReason::Stopped,
                            other => other,
                        };
                        Some(FleetChange::Freed(Freed {
                            job: took,
                            deployment,
                            pool: pool.0,
                            name: job.instance_name_in(identity, &self.pool_names[pool.0]),
                            reason,
                        }))
                    }
                    None => None,
                }
            }
            other => crate::production::change_of(other, deployment, |_| 0, |_, _| String::new()),
        })
    }

    /// The runner's side at `now`: the changes of the jobs runners took
    /// (placed and launched, in the harness's books). `names` gives each
    /// runner's instance name.
    pub(super) fn play(
        &mut self,
        deployment: usize,
        now: SystemTime,
        identity: Option<&Identity>,
        changes: &mut Vec<FleetChange>,
    ) -> Result<bool, String> {
        let played = self.sim.play(now);
        let acted = !played.is_empty();
        for played in played {
            match played {
                Played::Took {
                    github,
                    job,
                    runner,
                } => {
                    let parsed = InstanceName::parse(&runner)
                        .filter(|name| name.store == identity.map(Identity::as_str))
                        .ok_or_else(|| {
                            format!("GitHub handed job {github} to runner {runner:?}, not of deployment {deployment}'s store")
                        })?;
                    let id = parsed.job.0;
                    let book = self.runners.get_mut(&id).ok_or_else(|| {
                        format!("GitHub handed job {github} to runner {runner:?}, whose billet job {id} holds no lease")
                    })?;
                    let instance = book.instance.clone().ok_or_else(|| {
                        format!("GitHub handed job {github} to runner {runner:?}, never launched")
                    })?;
                    if let Some(earlier) = book.took.replace(job) {
                        return Err(format!(
                            "runner {runner:?} took job {github} after job {earlier}: a runner is single-use"
                        ));
                    }
                    self.busy[book.pool] += 1;
                    let pool = book.pool;
                    if book.made_for.is_some_and(|made_for| made_for != github) {
                        self.measured.taken_by_another += 1;
                    }
                    if let Some(taken) = self.sim.job(github) {
                        let waited = now.duration_since(taken.queued_at).unwrap_or_default();
                        self.measured.startup.saturating_record(millis(waited));
                    }
                    changes.push(FleetChange::Placed(Placed {
                        job,
                        deployment,
                        pool,
                    }));
                    changes.push(FleetChange::Launched(Launched {
                        job,
                        deployment,
                        instance,
                    }));
                }
                Played::Completed { github } => {
                    self.measured.completed += 1;
                    if let Some(job) = self.sim.job(github) {
                        self.completed.insert(job.job);
                    }
                    self.sim.forget(github);
                }
            }
        }
        for found in self.sim.take_found() {
            self.measured.lost_found.saturating_record(millis(found));
            if found <= self.reconcile_every {
                self.measured.found_in_one += 1;
            }
        }
        Ok(acted)
    }

    /// The deployment's service crashed: the runners' leases are nobody's
    /// until the new one adopts them (as the harness's books say of the
    /// jobs they took).
    pub(super) fn restarted(&mut self) {
        // The crashed service's intake ends once its ticks are gone.
        self.ticks = None;
        for runner in self.runners.values_mut() {
            runner.held = false;
        }
        self.held.iter_mut().for_each(|n| *n = 0);
        self.busy.iter_mut().for_each(|n| *n = 0);
    }

    /// Runners that took a job, in each pool: the harness's leases.
    pub(super) fn busy(&self) -> &[usize] {
        &self.busy
    }

    /// H14's invariants at `now`, against the engine's view `view` (its
    /// leases per pool): the runners booked are the engine's leases; idle
    /// runners in a pool are at most the jobs queued for it (as billet can
    /// know them: jobs whose news was lost count too); no runner idles past
    /// its timeout plus one reconcile.
    pub(super) fn check(
        &self,
        deployment: usize,
        view: &[billet::engine::PoolView],
        now: SystemTime,
    ) -> Result<(), String> {
        for (pool, (booked, seen)) in self.held.iter().zip(view).enumerate() {
            if *booked != seen.held as usize {
                return Err(format!(
                    "deployment {deployment}'s pool {} holds {} leases; its runners' decisions add up to {booked}",
                    self.pool_names[pool], seen.held
                ));
            }
        }
        let (queued, unsure) = self.sim.queued_by_labels();
        for (pool, name) in self.pool_names.iter().enumerate() {
            let idle = self.held[pool] - self.busy[pool];
            let waiting = queued.get(labels_of(name).as_slice()).copied().unwrap_or(0);
            if idle > waiting + unsure {
                return Err(format!(
                    "deployment {deployment}'s pool {name} keeps {idle} runners no job took, for {waiting} jobs queued ({unsure} of uncertain news): G6 keeps one per job"
                ));
            }
        }
        let bound = self.idle_timeout + self.reconcile_every;
        if let Some((job, since)) = self
            .runners
            .iter()
            .filter(|(_, r)| r.took.is_none() && r.held)
            .filter_map(|(job, r)| Some((job, r.up_since?)))
            .find(|(_, since)| now.duration_since(*since).unwrap_or_default() > bound)
        {
            return Err(format!(
                "deployment {deployment}'s runner job {job} has idled since {since:?}, past its timeout and a reconcile ({bound:?})"
            ));
        }
        Ok(())
    }

    /// The checks at the end: no registration left, every job billet was to
    /// take completed, the API held to GitHub's description.
    pub(super) fn finish(&self, deployment: usize) -> Result<(), String> {
        let violations = self.sim.violations();
        if let Some(first) = violations.first() {
            return Err(format!(
                "deployment {deployment}'s service made {} calls GitHub's description does not allow; the first: {first}",
                violations.len()
            ));
        }
        let left = self.sim.registrations();
        if let Some(first) = left.first() {
            return Err(format!(
                "deployment {deployment} left {} runners registered at GitHub, {:?} first",
                left.len(),
                first.name
            ));
        }
        if let Some((github, job)) = self
            .sim
            .jobs()
            .into_iter()
            .find(|(_, job)| job.for_billet && !matches!(job.status, Status::Completed { .. }))
        {
            return Err(format!(
                "deployment {deployment}'s GitHub job {github} ended the run {:?}",
                job.status
            ));
        }
        Ok(())
    }
}

/// `duration` in whole milliseconds, at least one (a histogram's least).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The GitHub job id of harness job `job` (GitHub's start at 1).
pub(super) fn github_id(job: JobId) -> u64 {
    job + 1
}

/// The report's lines for every deployment's `sides` (H14).
pub(super) fn report(sides: &[&Side]) -> Vec<String> {
    let mut startup = Measured::default();
    let mut counts = crate::github::Counts::default();
    let mut unfound = 0;
    for side in sides {
        let m = &side.measured;
        let _ = startup.startup.add(&m.startup);
        let _ = startup.lost_found.add(&m.lost_found);
        startup.runners += m.runners;
        startup.found_in_one += m.found_in_one;
        startup.taken_by_another += m.taken_by_another;
        unfound += side.sim.unfound();
        startup.completed += m.completed;
        startup.queued += m.queued;
        let c = side.sim.counts();
        counts.calls += c.calls;
        counts.peak_hour += c.peak_hour;
        counts.deliveries += c.deliveries;
        counts.lost += c.lost;
        counts.repeated += c.repeated;
        counts.late += c.late;
        counts.refused += c.refused;
        counts.registered += c.registered;
        counts.removed += c.removed;
    }
    let ms = |h: &Histogram<u64>, q: f64| Duration::from_millis(h.value_at_quantile(q));
    let reconcile_every = sides
        .first()
        .map(|side| side.reconcile_every)
        .unwrap_or_default();
    let per_job = |n: u64| n as f64 / startup.completed.max(1) as f64;
    let peak_per_deployment = sides
        .iter()
        .map(|s| s.sim.counts().peak_hour)
        .max()
        .unwrap_or(0);
    let mut by_operation: std::collections::BTreeMap<String, u64> = Default::default();
    for side in sides {
        for (op, n) in side.sim.calls_by_operation() {
            *by_operation.entry(op).or_default() += n;
        }
    }
    let mut by_operation: Vec<(String, u64)> = by_operation.into_iter().collect();
    by_operation.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let by_operation: Vec<String> = by_operation
        .iter()
        .map(|(op, n)| format!("{op} {:.2}", *n as f64 / startup.completed.max(1) as f64))
        .collect();
    vec![
        format!(
            "github: {} jobs queued, {} completed by billet's runners; job startup (queued to in_progress, modelled) p50 {:?}, p99 {:?}",
            startup.queued,
            startup.completed,
            ms(&startup.startup, 0.50),
            ms(&startup.startup, 0.99),
        ),
        format!(
            "github runners: {} started ({:.3} per job), {} taken by another job than their own, {} registered, {} removed by billet",
            startup.runners,
            per_job(startup.runners),
            startup.taken_by_another,
            counts.registered,
            counts.removed,
        ),
        format!(
            "github API: {} calls ({:.2} per job), {} refused in outage windows; peak {} in an hour of one deployment (an App may make 5,000); per job: {}",
            counts.calls,
            per_job(counts.calls),
            counts.refused,
            peak_per_deployment,
            by_operation.join(", "),
        ),
        format!(
            "github deliveries: {} made, {} lost, {} repeated, {} late; a lost one found (the API asked of its job, or a later delivery) after p50 {:?}, p99 {:?}, {} of {} within one reconcile interval ({:?}); {} never found",
            counts.deliveries,
            counts.lost,
            counts.repeated,
            counts.late,
            ms(&startup.lost_found, 0.50),
            ms(&startup.lost_found, 0.99),
            startup.found_in_one,
            startup.lost_found.len(),
            reconcile_every,
            unfound,
        ),
    ]
}

impl super::ServiceScheduler {
    /// [`settle`](Self::settle) for a deployment under `--intake github`
    /// (H14): until nothing more happens at `now`, the deliveries GitHub
    /// owes are sent, the intake is ticked, the engine waited for, what it
    /// decided translated, and GitHub's runners play; then H14's checks.
    pub(super) async fn settle_github(
        &mut self,
        index: usize,
        now: SystemTime,
    ) -> Result<(), String> {
        let mut unsent = Vec::new();
        let mut rounds = 0usize;
        let mut latencies = Vec::new();
        let settled = self
            .settle_rounds(index, now, &mut unsent, &mut rounds, &mut latencies)
            .await;
        for took in latencies {
            self.record(took);
        }
        settled
    }

    /// [`settle_github`](Self::settle_github)'s rounds; the wall time of
    /// each delivery sent goes to `latencies`.
    async fn settle_rounds(
        &mut self,
        index: usize,
        now: SystemTime,
        unsent: &mut Vec<crate::github::Delivery>,
        rounds: &mut usize,
        latencies: &mut Vec<Duration>,
    ) -> Result<(), String> {
        let Some(d) = self.deployments[index].as_mut() else {
            return Ok(());
        };
        let (Some(side), Some(service)) = (d.github.as_mut(), d.service.as_ref()) else {
            return Ok(());
        };
        loop {
            *rounds += 1;
            // What the engine does at `now` by itself (its wake: a
            // reconcile, a timeout) is done before deliveries and the tick
            // reach it: the two would race, and what they decide would come
            // in another order run to run.
            quiet(service, index, now).await?;
            side.sim.at(now);
            let mut owed = std::mem::take(unsent);
            owed.extend(side.sim.take_deliveries(now));
            let sent = !owed.is_empty();
            if let Some(url) = &side.webhook_url {
                let answers = futures::stream::iter(owed)
                    .map(|delivery| {
                        let signature = side.sim.sign(&delivery.body);
                        let client = &self.client;
                        async move {
                            let headers = [
                                ("x-github-event", "workflow_job"),
                                ("x-github-delivery", delivery.id.as_str()),
                                ("x-hub-signature-256", signature.as_str()),
                                ("user-agent", "GitHub-Hookshot/harness"),
                            ];
                            let body = bytes::Bytes::copy_from_slice(&delivery.body);
                            let started = Instant::now();
                            let answer = client.post_with(url, &headers, body).await;
                            (delivery, answer.map(|a| (a, started.elapsed())))
                        }
                    })
                    .buffer_unordered(IN_FLIGHT)
                    .collect::<Vec<_>>()
                    .await;
                for (delivery, answer) in answers {
                    let (answer, took) = answer?;
                    latencies.push(took);
                    match answer.status.as_u16() {
                        200 | 202 => {}
                        // The intake is full: redelivered, as GitHub's
                        // operator would, once it has drained.
                        503 => unsent.push(delivery),
                        status => {
                            return Err(format!(
                                "deployment {index}'s webhook answered delivery {} {status}: {}",
                                delivery.id,
                                String::from_utf8_lossy(&answer.body)
                            ));
                        }
                    }
                }
            }
            quiet(service, index, now).await?;
            side.tick().await?;
            quiet(service, index, now).await?;
            d.view = service.pools();
            let decisions = std::mem::take(&mut *d.tapped.lock());
            let decided = !decisions.is_empty();
            let from = self.changes.len();
            for decision in decisions {
                side.translate(index, decision, now, d.identity.as_ref(), &mut self.changes)?;
            }
            order_sets(&mut self.changes[from..]);
            let played = side.play(index, now, d.identity.as_ref(), &mut self.changes)?;
            if !sent && !decided && !played && unsent.is_empty() {
                break;
            }
            if *rounds >= SETTLE_ROUNDS {
                return Err(format!(
                    "deployment {index}'s service and GitHub did not settle at {now:?} in {rounds} rounds (the last: deliveries sent {sent}, decisions {decided}, runners' play {played}, {} redeliveries due)",
                    unsent.len()
                ));
            }
        }
        side.check(index, &d.view, now)
    }

    /// `submit_all` under `--intake github`: each job queued at the GitHub
    /// of the deployment with the most room, for the pool its route names;
    /// accepted when that pool may run its trust (else billet leaves it,
    /// G4, and GitHub runs it elsewhere). Its delivery goes at the next
    /// tick.
    pub(super) fn queue_at_github(&mut self, jobs: &[Job]) -> Vec<bool> {
        let mut given = vec![0; self.deployments.len()];
        let mut accepted = vec![false; jobs.len()];
        for (at, job) in jobs.iter().enumerate() {
            let Some(index) = self.choose(&given) else {
                continue;
            };
            let Some(d) = self.deployments[index].as_mut() else {
                continue;
            };
            let config = d.pools.config();
            let pool = config
                .routing()
                .route_for(&job.labels)
                .map(|route| route.provider().to_owned())
                .or_else(|| {
                    let kind = config.routing().default_kind()?;
                    config
                        .providers()
                        .iter()
                        .find(|p| p.kind() == kind)
                        .map(|p| p.name().to_owned())
                });
            let Some(pool) = pool.and_then(|name| d.pool_names.iter().position(|p| *p == name))
            else {
                continue;
            };
            // A job not trusted is a fork's: untrusted at GitHub (G4).
            let trust = match job.trust {
                TrustClass::Trusted => TrustClass::Trusted,
                _ => TrustClass::Untrusted,
            };
            let takes = d.pools.may_run(&d.pool_names[pool], trust);
            if let Some(side) = d.github.as_mut() {
                side.queue(job, pool, takes);
            }
            if takes {
                given[index] += 1;
                d.accepted += 1;
                self.accepted += 1;
                accepted[at] = true;
            }
        }
        accepted
    }
}

/// Waits until deployment `index`'s service is quiescent at `now`.
async fn quiet(service: &billet::Service, index: usize, now: SystemTime) -> Result<(), String> {
    service
        .quiescent(now, QUIESCENT_BOUND)
        .await
        .map(|_| ())
        .map_err(|last| {
            format!(
                "deployment {index}'s service was not quiescent at {now:?} within {QUIESCENT_BOUND:?} (it last said {last:?})"
            )
        })
}

/// Puts each run of changes in a row that commute in one order: what a
/// service decides at one instant from answers that came together is a
/// set, but it tells it in the order the answers came (a restarted
/// service's adoptions and the orphans its inventories show, in whatever
/// order its pools' lists were answered; a run of frees). Adoptions and
/// orphans are one set (the orphans first, by name, then the adoptions, by
/// job), frees another (by job): no change is put before one it follows
/// from, since each names its own instance, and what lies between two runs
/// keeps its place. So the same runs give the same digest.
fn order_sets(changes: &mut [FleetChange]) {
    fn set(change: &FleetChange) -> Option<u8> {
        match change {
            FleetChange::Adopted(_) | FleetChange::Orphan(_) => Some(0),
            FleetChange::Freed(_) => Some(1),
            _ => None,
        }
    }
    for run in changes.chunk_by_mut(|a, b| set(a).is_some() && set(a) == set(b)) {
        run.sort_by(|a, b| {
            let key = |change: &FleetChange| match change {
                FleetChange::Orphan(orphan) => (0, 0, orphan.name.clone()),
                FleetChange::Adopted(adopted) => (1, adopted.job, String::new()),
                FleetChange::Freed(freed) => (1, freed.job, String::new()),
                _ => (2, 0, String::new()),
            };
            key(a).cmp(&key(b))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::{OrphanChange, OrphanFate};

    fn adopted(job: JobId) -> FleetChange {
        FleetChange::Adopted(Adopted {
            job,
            deployment: 0,
            pool: 0,
            instance: format!("i{job}").as_str().into(),
        })
    }

    fn freed(job: JobId) -> FleetChange {
        FleetChange::Freed(Freed {
            job,
            deployment: 0,
            pool: 0,
            name: format!("i{job}"),
            reason: FreeReason::Stopped,
        })
    }

    fn jobs(changes: &[FleetChange]) -> Vec<(char, JobId)> {
        changes
            .iter()
            .map(|change| match change {
                FleetChange::Adopted(a) => ('a', a.job),
                FleetChange::Freed(f) => ('f', f.job),
                FleetChange::Orphan(o) => ('o', o.name[1..].parse().unwrap_or(0)),
                _ => ('?', 0),
            })
            .collect()
    }

    fn orphan(name: &str) -> FleetChange {
        FleetChange::Orphan(OrphanChange {
            deployment: 0,
            pool: 0,
            instance: name.into(),
            name: name.to_owned(),
            fate: OrphanFate::Seen,
        })
    }

    // H14: adoptions and orphans in a row, a set, come orphans first (by
    // name), then adoptions (by job), whatever order the service told them
    // in; frees in a row, another set, by job; what comes between two runs
    // (anything else) keeps its place, and a free never moves before the
    // adoption it follows.
    #[test]
    fn h14_changes_in_a_row_that_commute_are_put_in_one_order() {
        let mut changes = vec![
            adopted(9),
            orphan("o2"),
            adopted(3),
            orphan("o1"),
            adopted(5),
            freed(5),
            freed(3),
            adopted(2),
            adopted(1),
            FleetChange::Ended {
                job: 7,
                deployment: 0,
                reason: FreeReason::Cancelled,
            },
            freed(2),
            freed(1),
        ];
        order_sets(&mut changes);
        assert_eq!(
            jobs(&changes),
            [
                ('o', 1),
                ('o', 2),
                ('a', 3),
                ('a', 5),
                ('a', 9),
                ('f', 3),
                ('f', 5),
                ('a', 1),
                ('a', 2),
                ('?', 0),
                ('f', 1),
                ('f', 2),
            ]
        );
    }
}
