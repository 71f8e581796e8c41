//! A simulated GitHub for one deployment (H14): the jobs of its repository,
//! the runners registered there, the `workflow_job` deliveries it owes the
//! deployment's webhook, and the runner's side of each runner billet
//! starts.
//!
//! * **The API** ([`api`]) answers on loopback the calls billet makes, held
//!   to GitHub's own description of each operation (the one `billet-github`
//!   keeps in `testdata/octokit-openapi`, with its source and licence): a
//!   call that no described operation names, or with a query parameter the
//!   operation does not declare, is a violation the run fails on. Answers
//!   are the operation's own example, changed where the state says.
//! * **Deliveries** are GitHub's example payloads (`billet-github`'s
//!   `testdata/octokit-webhooks-examples`), changed where the job says,
//!   signed as GitHub signs them. A share of them is lost or repeated,
//!   drawn from the run's seed ([`Faults`]).
//! * **The runner's side**: a runner registered here whose instance runs on
//!   the simulated host is handed the oldest queued job whose labels its
//!   labels cover, first come, first served: not necessarily the job billet
//!   made it for. Its instance then stops when the job's modelled run time
//!   has passed ([`Host::stop_at`]), and the job completes; its registration
//!   goes with it (a just-in-time runner is single-use).
//!
//! Everything happens when the driver says ([`SimulatedGithub::play`]), at
//! the clock's time: the API answers what the state holds, and the state
//! moves only between the driver's steps. What it keeps is bounded by the
//! jobs not yet completed and the runners registered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_simulated::Host;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use serde_json::{Value, json};

pub mod api;
mod template;

use template::Template;

use crate::workload::JobId;

/// The environment variable a runner's instance finds its JIT config in:
/// billet's, which the simulated GitHub reads back to know the runner.
pub const JITCONFIG_VARIABLE: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

/// GitHub's example `workflow_job` payloads, as `billet-github` keeps them.
const WEBHOOK_EXAMPLES: &str =
    include_str!("../../billet-github/testdata/octokit-webhooks-examples/workflow_job.json");

/// How long a late delivery may be held back, at most ([`Faults::late`]).
pub const LATE_BY: Duration = Duration::from_secs(600);

/// How long each of the API's outage windows lasts ([`Faults::outages`]).
pub const OUTAGE_LASTS: Duration = Duration::from_secs(600);

/// The share of deliveries lost, repeated and late, the API's outage
/// windows, and the seed that draws which (H14).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// The share of deliveries never sent, in `[0, 1]`.
    pub lose: f64,
    /// The share of deliveries sent twice, in `[0, 1]`.
    pub repeat: f64,
    /// The share of deliveries held back, each by a delay drawn up to
    /// [`LATE_BY`]: overtaken by the job's later deliveries, they come out
    /// of order. In `[0, 1]`.
    pub late: f64,
    /// How many windows of [`OUTAGE_LASTS`] the API answers every call
    /// with an error, spread evenly over `span` from the run's start: the
    /// even ones `503`, the odd ones `403` with `Retry-After` until the
    /// window ends (a rate limit spent).
    pub outages: u32,
    /// What `outages` are spread over: the scenario's arrivals.
    pub span: Duration,
    /// The seed of the draws.
    pub seed: u64,
    /// A fault planted to prove that a check catches what it guards
    /// (tests only; `None` in every real run).
    pub plant: Option<Plant>,
}

/// A fault planted in the simulated GitHub, so that a test sees the check
/// that guards against it fail (H14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// GitHub removes no runner: not a single-use one once its job is done,
    /// nor one billet removes (answered `204` all the same): the check at
    /// the end finds registrations left.
    KeepRemovedRunners,
    /// With the first job, a second one is queued that GitHub never hands
    /// to a runner: billet keeps a runner for it that no job takes, more
    /// runners than the jobs waiting (G6).
    StuckJob,
    /// The first job a runner takes is handed to a second idle runner too:
    /// a job run twice.
    HandTwice,
    /// The first runner registered never comes online, and GitHub says it
    /// is busy when billet would remove it (a ghost runner): billet keeps
    /// it, idle, past its timeout.
    GhostRunner,
    /// The harness's books miss the first runner's end that freed a lease
    /// (planted in the harness, not in GitHub): the engine holds fewer
    /// leases than the runners booked.
    MissAnEnd,
}

impl Faults {
    /// An error naming the share outside `[0, 1]`, if one is.
    pub fn validate(&self) -> Result<(), String> {
        for (name, share) in [
            ("--lose", self.lose),
            ("--repeat", self.repeat),
            ("--late", self.late),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(format!("{name} {share}: a share between 0 and 1"));
            }
        }
        Ok(())
    }

    /// The API's outage windows, as offsets from the run's start: when
    /// each starts, and whether it answers as a spent rate limit (`403`
    /// with `Retry-After`) rather than `503`.
    pub fn outage_windows(&self) -> Vec<(Duration, bool)> {
        (0..self.outages)
            .map(|k| {
                let at = self
                    .span
                    .mul_f64(f64::from(k + 1) / f64::from(self.outages + 1));
                (at, k % 2 == 1)
            })
            .collect()
    }
}

/// Where a GitHub job stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Waiting for a runner.
    Queued,
    /// Taken by the runner of this name.
    InProgress {
        /// The runner's name.
        runner: Arc<str>,
    },
    /// Done.
    Completed {
        /// The runner that ran it.
        runner: Arc<str>,
    },
}

/// One GitHub job (its run has it alone).
#[derive(Debug, Clone)]
pub struct GithubJob {
    /// The harness's job it is.
    pub job: JobId,
    /// Its labels (`runs-on`).
    pub labels: Arc<[String]>,
    /// Whether its run's code comes from a fork (billet then trusts it less).
    pub forked: bool,
    /// Whether billet is expected to take it: a job no pool of billet may
    /// run is GitHub's to run elsewhere, and no runner of billet's is handed
    /// it.
    pub for_billet: bool,
    /// How long it runs once a runner takes it.
    pub run_time: Duration,
    /// When it was queued.
    pub queued_at: SystemTime,
    /// Where it stands.
    pub status: Status,
    /// Whether one of its deliveries was lost.
    pub lost: bool,
}

/// A runner registered with GitHub.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Its name (billet's instance name).
    pub name: Arc<str>,
    /// The labels it registered with.
    pub labels: Vec<String>,
    /// The JIT config handed out for it.
    pub jitconfig: String,
    /// The job it runs, once handed one.
    pub busy: Option<u64>,
}

/// What a step of the runner's side did, for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Played {
    /// The runner named `runner` took GitHub job `github` (the harness's
    /// `job`).
    Took {
        /// The GitHub job.
        github: u64,
        /// The harness's job.
        job: JobId,
        /// The runner's name.
        runner: Arc<str>,
    },
    /// GitHub job `github` completed.
    Completed {
        /// The GitHub job.
        github: u64,
    },
}

/// One delivery owed to the webhook: its id, its event's body, signed.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The GitHub job it is of.
    pub github: u64,
    /// `X-GitHub-Delivery`.
    pub id: String,
    /// The body, as sent.
    pub body: Arc<[u8]>,
}

/// The counts the report reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// API calls answered.
    pub calls: u64,
    /// The most calls in one hour of modelled time (by the hour since the
    /// run's start).
    pub peak_hour: u64,
    /// Deliveries made.
    pub deliveries: u64,
    /// Deliveries lost.
    pub lost: u64,
    /// Deliveries sent twice.
    pub repeated: u64,
    /// Deliveries held back late.
    pub late: u64,
    /// API calls answered `503` or `403` in an outage window.
    pub refused: u64,
    /// JIT configs handed out: runners registered.
    pub registered: u64,
    /// Runners removed by billet.
    pub removed: u64,
}

/// API calls by operation id, most first.
pub type CallsByOperation = Vec<(String, u64)>;

/// The state the API and the driver share.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) repository: String,
    pub(crate) jobs: FxHashMap<u64, GithubJob>,
    /// Queued jobs for billet, oldest first (ids rise with arrival).
    pub(crate) queue: BTreeSet<u64>,
    /// Every job whose status is `queued`, billet's or not: what the
    /// queued runs' listing pages through, newest first.
    pub(crate) queued_runs: BTreeSet<u64>,
    /// How many jobs of each set of labels wait in `queue`.
    pub(crate) queued_by_labels: FxHashMap<Arc<[String]>, usize>,
    /// Jobs for billet, not completed, one of whose deliveries was lost.
    pub(crate) unsure: usize,
    pub(crate) runners: BTreeMap<u64, Registration>,
    pub(crate) runner_ids: FxHashMap<Arc<str>, u64>,
    pub(crate) next_runner: u64,
    /// Completions due, by (instant, job).
    pub(crate) completions: BTreeSet<(SystemTime, u64)>,
    pub(crate) counts: Counts,
    /// Calls per hour of modelled time since `start`.
    pub(crate) hour: (u64, u64),
    pub(crate) start: Option<SystemTime>,
    pub(crate) now: Option<SystemTime>,
    pub(crate) violations: Vec<String>,
    pub(crate) by_operation: BTreeMap<String, u64>,
    pub(crate) plant: Option<Plant>,
    /// Jobs for billet one of whose deliveries was lost, and billet not yet
    /// told what it carried (by the API or a later delivery): since when.
    /// Bounded by the deliveries lost.
    pub(crate) unfound: FxHashMap<u64, SystemTime>,
    /// How long each lost delivery took to be found, since the driver last
    /// took them ([`SimulatedGithub::take_found`]).
    pub(crate) found: Vec<Duration>,
    /// The API's outage windows ([`Faults::outage_windows`]).
    pub(crate) outages: Vec<(Duration, bool)>,
}

impl State {
    /// Counts one call, at the driver's time.
    pub(crate) fn count_call(&mut self) {
        self.counts.calls += 1;
        let (Some(start), Some(now)) = (self.start, self.now) else {
            return;
        };
        let hour = now.duration_since(start).unwrap_or_default().as_secs() / 3600;
        if hour != self.hour.0 {
            self.hour = (hour, 0);
        }
        self.hour.1 += 1;
        self.counts.peak_hour = self.counts.peak_hour.max(self.hour.1);
    }

    /// The outage window the API is in now, if one: when it ends, and
    /// whether it answers as a spent rate limit.
    pub(crate) fn outage(&self) -> Option<(SystemTime, bool)> {
        let (start, now) = (self.start?, self.now?);
        let since = now.duration_since(start).unwrap_or_default();
        self.outages
            .iter()
            .find(|(at, _)| since >= *at && since < *at + OUTAGE_LASTS)
            .map(|(at, limit)| (start + *at + OUTAGE_LASTS, *limit))
    }

    /// Billet was told what job `github`'s lost delivery carried, now: an
    /// API answer about it, or a later delivery.
    pub(crate) fn found(&mut self, github: u64) {
        if let (Some(since), Some(now)) = (self.unfound.remove(&github), self.now) {
            self.found
                .push(now.duration_since(since).unwrap_or_default());
        }
    }
}

/// A simulated GitHub for one deployment. See the [module docs](self).
#[derive(Debug)]
pub struct SimulatedGithub {
    state: Arc<Mutex<State>>,
    owner: String,
    host: Host,
    secret: Vec<u8>,
    faults: Faults,
    rng: ChaCha8Rng,
    /// Deliveries made and not yet taken by the driver.
    outbox: Vec<Delivery>,
    /// Late deliveries, by when they are due (and the order made).
    late: BTreeMap<(SystemTime, u64), Delivery>,
    templates: Templates,
    delivered: u64,
    /// Whether the planted fault was planted (once).
    planted: bool,
}

/// The GitHub id of [`Plant::StuckJob`]'s job.
const STUCK_JOB: u64 = u64::MAX / 2;

/// The id of [`Plant::GhostRunner`]'s runner: the first registered.
pub(crate) const GHOST_RUNNER: u64 = 1;

/// The example payload of each action, serialized once with holes for
/// what a delivery changes ([`PAYLOAD_HOLES`]).
#[derive(Debug)]
struct Templates {
    queued: Template,
    in_progress: Template,
    completed: Template,
}

/// What a delivery changes of GitHub's example, in the order
/// [`SimulatedGithub::payload`] gives the values.
const PAYLOAD_HOLES: [&str; 8] = [
    "/workflow_job/id",
    "/workflow_job/run_id",
    "/workflow_job/labels",
    "/workflow_job/status",
    "/workflow_job/runner_name",
    "/workflow_job/conclusion",
    "/repository/full_name",
    "/repository/private",
];

impl Templates {
    fn parse() -> Result<Templates, String> {
        let text = WEBHOOK_EXAMPLES.trim_end().trim_end_matches(',');
        let described: Value = serde_json::from_str(text)
            .map_err(|e| format!("GitHub's example workflow_job payloads: {e}"))?;
        let examples = described["examples"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let of = |action: &str| {
            examples
                .iter()
                .find(|e| e["action"] == action && e["workflow_job"]["status"] == action)
                .cloned()
                .map(|example| Template::new(example, &PAYLOAD_HOLES))
                .ok_or_else(|| format!("GitHub's examples have no `{action}` payload"))
        };
        Ok(Templates {
            queued: of("queued")?,
            in_progress: of("in_progress")?,
            completed: of("completed")?,
        })
    }
}

impl SimulatedGithub {
    /// A GitHub with repository `repository` (`OWNER/NAME`), whose runners'
    /// instances are deployment `owner`'s on `host`, signing deliveries
    /// with `secret`, losing and repeating them as `faults` says.
    pub fn new(
        repository: &str,
        owner: &str,
        host: Host,
        secret: &[u8],
        faults: Faults,
    ) -> Result<SimulatedGithub, String> {
        faults.validate()?;
        Ok(SimulatedGithub {
            state: Arc::new(Mutex::new(State {
                repository: repository.to_owned(),
                next_runner: 1,
                plant: faults.plant,
                outages: faults.outage_windows(),
                ..State::default()
            })),
            owner: owner.to_owned(),
            host,
            secret: secret.to_vec(),
            faults,
            rng: ChaCha8Rng::seed_from_u64(faults.seed),
            outbox: Vec::new(),
            late: BTreeMap::new(),
            templates: Templates::parse()?,
            delivered: 0,
            planted: false,
        })
    }

    /// Starts its API on a free loopback port of the current runtime;
    /// answers the API's base address.
    pub async fn serve(&self) -> Result<String, String> {
        api::serve(Arc::clone(&self.state)).await
    }

    /// Sets the time the API counts its calls by (and, the first time, the
    /// run's start): the driver's clock at each step.
    pub fn at(&self, now: SystemTime) {
        let mut state = self.state.lock();
        state.start.get_or_insert(now);
        state.now = Some(now);
    }

    /// Queues GitHub job `github` (the harness's `job`) at `now`, and owes
    /// the webhook its `queued` delivery.
    pub fn queue(&mut self, github: u64, job: GithubJob) {
        self.at(job.queued_at);
        if self.faults.plant == Some(Plant::StuckJob) && !self.planted && job.for_billet {
            self.planted = true;
            let stuck = GithubJob {
                for_billet: false,
                ..job.clone()
            };
            self.queue(STUCK_JOB, stuck);
        }
        let body = {
            let mut state = self.state.lock();
            if job.for_billet {
                state.queue.insert(github);
                *state
                    .queued_by_labels
                    .entry(Arc::clone(&job.labels))
                    .or_default() += 1;
            }
            let body = self.payload("queued", github, &job, &state.repository, None);
            if matches!(job.status, Status::Queued) {
                state.queued_runs.insert(github);
            }
            state.jobs.insert(github, job);
            body
        };
        self.deliver(github, body);
    }

    /// The runner's side at `now` (see the [module docs](self)): completes
    /// the jobs whose run time has passed, then hands queued jobs to the
    /// idle runners whose instances run. Answers what it did, in order; the
    /// deliveries it owes are in [`take_deliveries`](Self::take_deliveries).
    pub fn play(&mut self, now: SystemTime) -> Vec<Played> {
        self.at(now);
        let mut played = Vec::new();
        let mut owed = Vec::new();
        {
            let mut state = self.state.lock();
            while let Some(&(at, github)) = state.completions.first() {
                if at > now {
                    break;
                }
                state.completions.pop_first();
                let Some(job) = state.jobs.get_mut(&github) else {
                    continue;
                };
                let Status::InProgress { runner } = job.status.clone() else {
                    continue;
                };
                job.status = Status::Completed {
                    runner: Arc::clone(&runner),
                };
                let job = job.clone();
                if job.lost && job.for_billet {
                    state.unsure -= 1;
                }
                // A just-in-time runner is single-use: GitHub removes it
                // once its job is done.
                if state.plant != Some(Plant::KeepRemovedRunners)
                    && let Some(id) = state.runner_ids.remove(&runner)
                {
                    state.runners.remove(&id);
                }
                let repository = state.repository.clone();
                owed.push((
                    github,
                    self.payload("completed", github, &job, &repository, Some(&runner)),
                ));
                played.push(Played::Completed { github });
            }
            // Idle runners in the order of their names, not of their
            // registrations: billet registers the runners of one instant
            // concurrently, and which job each takes must not depend on
            // which call GitHub answered first (the run's digest would).
            let mut idle: Vec<(u64, Arc<str>, Vec<String>, String)> = state
                .runners
                .iter()
                .filter(|(_, r)| r.busy.is_none())
                .map(|(id, r)| {
                    (
                        *id,
                        Arc::clone(&r.name),
                        r.labels.clone(),
                        r.jitconfig.clone(),
                    )
                })
                .collect();
            idle.sort_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| a.1.cmp(&b.1)));
            for (id, name, labels, jitconfig) in idle {
                if state.queue.is_empty() {
                    break;
                }
                // The runner is up once its instance runs with its config
                // (a ghost never is).
                let ghost = state.plant == Some(Plant::GhostRunner) && id == GHOST_RUNNER;
                let up = !ghost
                    && self
                        .host
                        .environment_of(&self.owner, &name)
                        .is_some_and(|env| {
                            env.iter()
                                .any(|(k, v)| k == JITCONFIG_VARIABLE && *v == jitconfig)
                        });
                if !up {
                    continue;
                }
                let fits = state.queue.iter().copied().find(|github| {
                    state
                        .jobs
                        .get(github)
                        .is_some_and(|job| billet_github::fits(&job.labels, &labels))
                });
                let Some(github) = fits else { continue };
                state.queue.remove(&github);
                state.queued_runs.remove(&github);
                let Some(job) = state.jobs.get_mut(&github) else {
                    continue;
                };
                let labels = Arc::clone(&job.labels);
                if let Some(n) = state.queued_by_labels.get_mut(&labels) {
                    *n -= 1;
                }
                let Some(job) = state.jobs.get_mut(&github) else {
                    continue;
                };
                job.status = Status::InProgress {
                    runner: Arc::clone(&name),
                };
                let ends = now + job.run_time;
                let job = job.clone();
                if let Some(runner) = state.runners.get_mut(&id) {
                    runner.busy = Some(github);
                }
                state.completions.insert((ends, github));
                self.host.stop_at(&self.owner, &name, ends);
                let repository = state.repository.clone();
                owed.push((
                    github,
                    self.payload("in_progress", github, &job, &repository, Some(&name)),
                ));
                played.push(Played::Took {
                    github,
                    job: job.job,
                    runner: Arc::clone(&name),
                });
                if self.faults.plant == Some(Plant::HandTwice) && !self.planted {
                    self.planted = true;
                    state.queue.insert(github);
                    *state.queued_by_labels.entry(labels).or_default() += 1;
                }
            }
        }
        for (github, body) in owed {
            self.deliver(github, body);
        }
        played
    }

    /// When the simulated GitHub next has something to do by the clock
    /// alone: the next completion, or the next late delivery.
    pub fn next_due(&self) -> Option<SystemTime> {
        let completion = self.state.lock().completions.first().map(|(at, _)| *at);
        let late = self.late.first_key_value().map(|((at, _), _)| *at);
        completion.into_iter().chain(late).min()
    }

    /// How many jobs for billet wait for a runner.
    pub fn queued(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether any job is queued for billet or in progress, or a delivery
    /// is still held back.
    pub fn outstanding(&self) -> bool {
        let state = self.state.lock();
        !state.queue.is_empty() || !state.completions.is_empty() || !self.late.is_empty()
    }

    /// The deliveries owed at `now`: those made since the last call, in the
    /// order made (a repeated one twice, a lost one not at all, a late one
    /// not yet), then the late ones due by `now`.
    pub fn take_deliveries(&mut self, now: SystemTime) -> Vec<Delivery> {
        let mut owed = std::mem::take(&mut self.outbox);
        while let Some(entry) = self.late.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let delivery = entry.remove();
            self.state.lock().found(delivery.github);
            owed.push(delivery);
        }
        owed
    }

    /// GitHub job `github`, as it stands.
    pub fn job(&self, github: u64) -> Option<GithubJob> {
        self.state.lock().jobs.get(&github).cloned()
    }

    /// Every job, by GitHub id, as they stand: for the checks at the end.
    pub fn jobs(&self) -> Vec<(u64, GithubJob)> {
        let state = self.state.lock();
        let mut jobs: Vec<_> = state.jobs.iter().map(|(k, v)| (*k, v.clone())).collect();
        jobs.sort_by_key(|(k, _)| *k);
        jobs
    }

    /// Forgets a completed job (its checks are done): what keeps the state
    /// bounded by the jobs not yet completed.
    pub fn forget(&self, github: u64) {
        let mut state = self.state.lock();
        if matches!(
            state.jobs.get(&github).map(|j| &j.status),
            Some(Status::Completed { .. })
        ) {
            state.jobs.remove(&github);
        }
    }

    /// The runners registered now.
    pub fn registrations(&self) -> Vec<Registration> {
        self.state.lock().runners.values().cloned().collect()
    }

    /// Its repository, `OWNER/NAME`.
    pub fn repository(&self) -> String {
        self.state.lock().repository.clone()
    }

    /// How many jobs for billet wait for a runner, by their labels; and how
    /// many jobs for billet not completed had a delivery lost (billet may
    /// not know where they stand).
    pub fn queued_by_labels(&self) -> (FxHashMap<Arc<[String]>, usize>, usize) {
        let state = self.state.lock();
        (state.queued_by_labels.clone(), state.unsure)
    }

    /// API calls so far by operation id, most first.
    pub fn calls_by_operation(&self) -> CallsByOperation {
        let state = self.state.lock();
        let mut calls: CallsByOperation = state
            .by_operation
            .iter()
            .map(|(op, n)| (op.clone(), *n))
            .collect();
        calls.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        calls
    }

    /// How long each lost delivery took to be found (billet told what it
    /// carried, by an API answer or a later delivery), since the last call.
    pub fn take_found(&self) -> Vec<Duration> {
        std::mem::take(&mut self.state.lock().found)
    }

    /// Lost deliveries not found yet.
    pub fn unfound(&self) -> usize {
        self.state.lock().unfound.len()
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        self.state.lock().counts
    }

    /// Requests the API refused as GitHub's description does not allow.
    pub fn violations(&self) -> Vec<String> {
        self.state.lock().violations.clone()
    }

    /// The payload of `action` for `job`, from GitHub's example.
    fn payload(
        &self,
        action: &str,
        github: u64,
        job: &GithubJob,
        repository: &str,
        runner: Option<&str>,
    ) -> Vec<u8> {
        let template = match action {
            "queued" => &self.templates.queued,
            "in_progress" => &self.templates.in_progress,
            _ => &self.templates.completed,
        };
        let json = |value: Value| value.to_string();
        let values = [
            json(json!(github)),
            json(json!(github)),
            json(json!(&*job.labels)),
            json(json!(action)),
            json(json!(runner)),
            json(match action {
                "completed" => json!("success"),
                _ => Value::Null,
            }),
            json(json!(repository)),
            "true".to_owned(),
        ];
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        template.render(&values)
    }

    /// Owes the webhook `body`, unless the draw loses it; twice if the draw
    /// repeats it.
    fn deliver(&mut self, github: u64, body: Vec<u8>) {
        self.delivered += 1;
        let lost = self.faults.lose > 0.0 && self.rng.random_bool(self.faults.lose);
        let repeat = !lost && self.faults.repeat > 0.0 && self.rng.random_bool(self.faults.repeat);
        let late = (!lost && self.faults.late > 0.0 && self.rng.random_bool(self.faults.late))
            .then(|| {
                let millis = u64::try_from(LATE_BY.as_millis()).unwrap_or(u64::MAX);
                Duration::from_millis(self.rng.random_range(1_000..=millis.max(1_000)))
            });
        let now = {
            let mut state = self.state.lock();
            state.counts.deliveries += 1;
            if lost {
                state.counts.lost += 1;
                // Measured for jobs billet is to take: what it misses of
                // the others changes nothing.
                let for_billet = state.jobs.get(&github).is_some_and(|job| job.for_billet);
                if let (Some(now), true) = (state.now, for_billet) {
                    state.unfound.entry(github).or_insert(now);
                }
                let mut newly = false;
                if let Some(job) = state.jobs.get_mut(&github) {
                    newly = !job.lost && job.for_billet;
                    job.lost = true;
                }
                if newly {
                    state.unsure += 1;
                }
                return;
            }
            if repeat {
                state.counts.repeated += 1;
            }
            if late.is_some() {
                state.counts.late += 1;
            } else {
                state.found(github);
            }
            state.now
        };
        let delivery = Delivery {
            github,
            id: format!("sim-{github}-{}", self.delivered),
            body: body.into(),
        };
        if repeat {
            self.outbox.push(delivery.clone());
        }
        match (late, now) {
            (Some(by), Some(now)) => {
                self.late.insert((now + by, self.delivered), delivery);
            }
            _ => self.outbox.push(delivery),
        }
    }

    /// The signature GitHub would send with `body`.
    pub fn sign(&self, body: &[u8]) -> String {
        billet_github::sign(&self.secret, body)
    }
}
