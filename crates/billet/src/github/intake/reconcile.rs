//! The intake's reconcile with GitHub's API (G7), at start and every
//! `reconcile_every`:
//! what deliveries lost or a crash left unsaid, read from the API.
//!
//! 1. GitHub jobs billet took that are queued or in progress, and whose
//!    news billet has reason to doubt ([`doubtful`]), are asked of the API
//!    ([`ask_now`]): queued ones at every reconcile while runners of their
//!    pool idle ([`idles`]), the oldest first ([`ask_order`]), one for each
//!    runner idling ([`still_doubted`]); others least recently heard of
//!    first, at once when the doubt comes. A job completed (or gone) while
//!    its delivery was lost ends; a job still queued whose run ended (a
//!    `startup_failure`, say) ends too. A job in progress asked again with
//!    nothing new waits twice as long before the next ask ([`stale_at`]),
//!    so that what one job costs stays bounded however long it runs.
//! 2. For each `repository` scope, the jobs of its queued runs (the newest
//!    [`MAX_PAGES`](billet_github::MAX_PAGES) pages when more are queued)
//!    that billet
//!    never heard of, or left for want of their run's facts, are taken as
//!    if their `queued` delivery had come. A
//!    run one of whose jobs billet holds is not listed: a sibling's lost
//!    delivery is found once the jobs billet holds of it are done. A run
//!    listed with nothing new found (its jobs billet left, say, to wait for
//!    another runner) is listed again after [`stale_at`]'s backoff, not at
//!    every reconcile. (An organization's runs cannot be listed in one
//!    call: see the README.)
//! 3. Registrations named for this store that GitHub lists, not busy,
//!    whose billet job has ended or is unknown, are removed: swept at the
//!    first reconcile, at the next after a removal failed, and otherwise
//!    at doubling intervals while sweeps find none ([`Sweeps`]), each a
//!    search of the listing's first pages.
//!
//! Bounded: at most [`CALLS`] API calls per reconcile, listings in pages
//! as `billet-github` bounds them; a rate limit ends the reconcile at once
//! (the client blocks calls until it passes).

use std::time::{Duration, SystemTime};

use billet_config::ScopeTarget;
use billet_github::{ApiError, JobStatus, Scope, WorkflowJobEvent};
use billet_scheduler::InstanceName;

use super::super::demand::JobStage;
use super::Intake;

/// The most API calls one reconcile makes. Every 60 s (the default) that
/// is at most 3,000 an hour, of an App's 5,000.
pub const CALLS: usize = 50;

/// The unit of the wait between asks of a job that bring nothing new
/// ([`stale_at`]: doubled per ask), and between listings of a run that
/// find nothing: one reconcile interval.
pub fn stale_after(reconcile_every: Duration) -> Duration {
    reconcile_every
}

/// The most times a job's wait between asks doubles ([`stale_at`]).
pub const MAX_BACKOFF: u32 = 6;

/// Whether billet has reason to doubt what it knows of a job at `stage`: a
/// job it knows queued while a runner of its pool idles ([`idles`]: GitHub
/// hands an idle runner the oldest queued job whose labels fit, so the
/// `in_progress` of the job it took may have gone unsaid); a job it
/// knows in progress that no live runner of its holds (the runner that took
/// it ended, or is another's, and its `completed` may have been lost). A
/// job waiting for room, or running on a runner billet watches, is not
/// asked of the API: its runner's end says when to.
pub fn doubtful(stage: JobStage, idle_runner_in_pool: bool, held_by_live_runner: bool) -> bool {
    match stage {
        JobStage::Queued => idle_runner_in_pool,
        JobStage::InProgress => !held_by_live_runner,
        JobStage::Completed => false,
    }
}

/// When a job last heard of at `heard`, asked `asked` times in a row since
/// with nothing new, is next stale: `age` after, doubled per ask up to
/// [`MAX_BACKOFF`] times.
pub fn stale_at(heard: SystemTime, age: Duration, asked: u32) -> SystemTime {
    heard + age * (1u32 << asked.min(MAX_BACKOFF))
}

/// Whether a runner that started at `started` idles at `now`, if billet
/// knows of no job it took: it started before `now`. GitHub hands a runner
/// a job as it comes online, so one up since before this reconcile with no
/// `in_progress` heard for it most likely took a job whose delivery was
/// lost; asking at the first reconcile after its start is what finds such
/// a loss within one interval. A runner still starting when asked for
/// costs that reconcile one ask (at most one per runner idling).
pub fn idles(started: Option<SystemTime>, now: SystemTime) -> bool {
    started.is_some_and(|at| at < now)
}

/// Where a doubted job stands among this reconcile's asks ([`ask_now`]):
/// a queued job by when its `queued` delivery came (GitHub hands the oldest
/// queued job first, so that is the one an idle runner most likely took),
/// any other by when it was last heard of.
pub(super) fn ask_order(
    stage: Option<JobStage>,
    queued_at: Option<SystemTime>,
    heard: SystemTime,
) -> SystemTime {
    match (stage, queued_at) {
        (Some(JobStage::Queued), Some(at)) => at,
        _ => heard,
    }
}

/// Whether a job at `stage`, last heard of at `heard`, asked `asked` times
/// in a row with nothing new, is asked at `now`: when `doubted`
/// ([`doubtful`]). A queued job is, at every reconcile while runners of its
/// pool idle (as many of the pool's as runners idle, oldest first:
/// [`still_doubted`], [`ask_order`]); any other at once if not asked since
/// the doubt came, then when stale ([`stale_at`]). A job not doubted has its
/// count reset: a doubt that comes anew is asked at once, however often an
/// earlier one was.
pub(super) fn ask_now(
    stage: Option<JobStage>,
    doubted: bool,
    now: SystemTime,
    heard: SystemTime,
    age: Duration,
    asked: &mut u32,
) -> bool {
    if !doubted {
        *asked = 0;
        return false;
    }
    stage == Some(JobStage::Queued) || *asked == 0 || now >= stale_at(heard, age, *asked)
}

/// Whether a job at `before` is still asked when `idled` runners of its
/// pool idle that no ask of this reconcile has been spent on yet: a queued
/// job is doubted for those runners alone, one ask each, so a reconcile
/// asks at most as many of a pool's queued jobs as runners idle there.
pub(super) fn still_doubted(before: Option<JobStage>, idled: usize) -> bool {
    before != Some(JobStage::Queued) || idled > 0
}

/// What one reconcile did, for its log line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reconciled {
    /// API calls made.
    pub calls: usize,
    /// Jobs the API said more of than the deliveries had.
    pub settled: usize,
    /// Queued jobs found whose delivery never came.
    pub found: usize,
    /// Orphan registrations removed.
    pub orphans: usize,
}

impl Reconciled {
    /// Whether the reconcile found anything to act on (what its log line
    /// says at `info`).
    fn acted(&self) -> bool {
        self.settled + self.found + self.orphans > 0
    }
}

/// An event as a delivery would have said what `status` says of a job of
/// `repository`.
fn event_of(status: &JobStatus, repository: &str) -> Option<WorkflowJobEvent> {
    let action = match status.status.as_str() {
        "queued" => "queued",
        "in_progress" => "in_progress",
        "completed" => "completed",
        _ => return None,
    };
    serde_json::from_value(serde_json::json!({
        "action": action,
        "workflow_job": {
            "id": status.id,
            "run_id": status.run_id,
            "labels": status.labels,
            "runner_name": status.runner_name,
            "conclusion": status.conclusion,
        },
        // The payload's `private` decides nothing (G4 reads the run's own
        // facts); said public, the cautious reading, all the same.
        "repository": {"id": 0, "full_name": repository, "private": false},
    }))
    .map_err(
        |error| tracing::warn!(%error, "a job the API described could not be read as an event"),
    )
    .ok()
}

/// A `completed` event for GitHub job `job` of run `run` in `repository`.
fn completed(job: u64, run: u64, repository: &str) -> Option<WorkflowJobEvent> {
    let status = JobStatus {
        id: job,
        run_id: run,
        status: "completed".to_owned(),
        conclusion: None,
        runner_name: None,
        labels: Vec::new(),
    };
    event_of(&status, repository)
}

impl Intake {
    /// One reconcile (see the module's docs).
    pub(super) async fn reconcile(&mut self) {
        let mut done = Reconciled::default();
        if self.settle_stale(&mut done).await.is_err()
            || self.find_lost(&mut done).await.is_err()
            || self.remove_orphans(&mut done).await.is_err()
        {
            tracing::warn!("GitHub's rate limit ended the reconcile early");
        }
        self.parts
            .shared
            .metrics
            .github_reconciled([done.settled, done.found, done.orphans]);
        if done.acted() {
            tracing::info!(
                calls = done.calls,
                settled = done.settled,
                found = done.found,
                orphans = done.orphans,
                "reconciled with GitHub's API"
            );
        }
    }

    /// Keeps what the API said of a job in `github.db`, as its delivery
    /// would have.
    fn record(&self, event: &WorkflowJobEvent) {
        let Some(webhook) = self.parts.webhook.upgrade() else {
            return;
        };
        if let Err(error) = webhook.record(event, self.parts.shared.now()) {
            tracing::warn!(github_job = event.workflow_job.id, %error, "what the API said of a GitHub job could not be kept");
        }
    }

    /// A call may be made: counts it, or says the budget is spent.
    fn spend(done: &mut Reconciled) -> bool {
        if done.calls >= CALLS {
            return false;
        }
        done.calls += 1;
        true
    }

    /// Step 1: jobs without news, asked of the API.
    async fn settle_stale(&mut self, done: &mut Reconciled) -> Result<(), ApiError> {
        let now = self.parts.shared.now();
        let age = stale_after(self.parts.settings.reconcile_every);
        let (mut idle_pools, held) = self.runner_facts(now);
        let mut stale: Vec<(SystemTime, u64)> = Vec::new();
        for (job, taken) in &mut self.taken {
            let stage = self.demand.stage(*job);
            // Every pool `runner_facts` names has a runner idling.
            let doubted = stage.is_some_and(|stage| {
                doubtful(
                    stage,
                    idle_pools.contains_key(&taken.pool),
                    held.contains(job),
                )
            });
            if ask_now(stage, doubted, now, taken.heard, age, &mut taken.asked) {
                stale.push((ask_order(stage, taken.queued_at, taken.heard), *job));
            }
        }
        stale.sort_unstable();
        for (_, job) in stale {
            let Some(taken) = self.taken.get_mut(&job) else {
                continue;
            };
            let before = self.demand.stage(job);
            // A queued job is doubted for a runner of its pool that idles:
            // the pool's queued jobs are asked oldest first (GitHub hands
            // an idle runner the oldest queued job that fits), one for each
            // runner idling there.
            let idled = idle_pools.get_mut(&taken.pool);
            if !still_doubted(before, idled.as_deref().copied().unwrap_or(0)) {
                continue;
            }
            if before == Some(JobStage::Queued)
                && let Some(idled) = idled
            {
                *idled -= 1;
            }
            taken.heard = now;
            let asked = taken.asked;
            let (repository, run) = (taken.repository.clone(), taken.run_id);
            let Some((owner, repo)) = repository.split_once('/') else {
                continue;
            };
            if !Intake::spend(done) {
                return Ok(());
            }
            let status = match self.parts.api.job(owner, repo, job).await {
                Ok(status) => status,
                Err(ApiError::NotFound { .. }) => JobStatus {
                    id: job,
                    run_id: run,
                    status: "completed".to_owned(),
                    conclusion: None,
                    runner_name: None,
                    labels: Vec::new(),
                },
                Err(error @ ApiError::RateLimited { .. }) => return Err(error),
                Err(error) => {
                    tracing::warn!(github_job = job, %error, "the reconcile could not read a GitHub job");
                    continue;
                }
            };
            let event = if status.status == "queued" {
                // Still queued: its run may have ended without it.
                if !Intake::spend(done) {
                    return Ok(());
                }
                match self.parts.api.run(owner, repo, run).await {
                    Ok(run) if run.status.as_deref() == Some("completed") => {
                        completed(job, run.id, &repository)
                    }
                    Ok(_) => None,
                    Err(error @ ApiError::RateLimited { .. }) => return Err(error),
                    Err(_) => None,
                }
            } else {
                event_of(&status, &repository)
            };
            if let Some(event) = event.filter(|event| event.action != billet_github::Action::Queued)
            {
                self.record(&event);
                self.on_event(event).await;
            }
            if self.demand.stage(job) != before {
                done.settled += 1;
            }
            // Nothing new: the next ask waits twice as long.
            if let Some(taken) = self.taken.get_mut(&job) {
                taken.heard = now;
                taken.asked = if self.demand.stage(job) == before {
                    asked.saturating_add(1)
                } else {
                    0
                };
            }
        }
        Ok(())
    }

    /// How many runners no job took that started before `now` each pool
    /// has ([`idles`]), and the jobs live runners of billet's took.
    fn runner_facts(
        &self,
        now: SystemTime,
    ) -> (
        std::collections::HashMap<String, usize>,
        std::collections::HashSet<u64>,
    ) {
        let jobs = self.parts.shared.jobs.read();
        let mut idle_pools = std::collections::HashMap::new();
        let mut held = std::collections::HashSet::new();
        for (&id, &runner) in &self.runner_of {
            let Some(record) = jobs.live(id) else {
                continue;
            };
            match self.demand.runner(runner).and_then(|(_, took)| took) {
                Some(took) => {
                    held.insert(took);
                }
                None => {
                    let idled = idles(record.started_at, now);
                    if let (true, Some(pool)) = (idled, record.pinned.as_deref()) {
                        *idle_pools.entry(pool.to_owned()).or_insert(0) += 1;
                    }
                }
            }
        }
        (idle_pools, held)
    }

    /// Step 2: queued jobs of `repository` scopes whose delivery never came.
    async fn find_lost(&mut self, done: &mut Reconciled) -> Result<(), ApiError> {
        let repositories: Vec<(String, String)> = self
            .parts
            .settings
            .scopes
            .iter()
            .filter_map(|scope| match &scope.target {
                ScopeTarget::Repository { owner, name } => Some((owner.clone(), name.clone())),
                _ => None,
            })
            .collect();
        for (owner, repo) in repositories {
            if !Intake::spend(done) {
                return Ok(());
            }
            // The newest queued runs when there are more than a listing's
            // pages: a job found in them is found; one not in them is not
            // thought gone (nothing is inferred from a run's absence).
            let runs = match self.parts.api.newest_runs(&owner, &repo, "queued").await {
                Ok((runs, _whole)) => runs,
                Err(error @ ApiError::RateLimited { .. }) => return Err(error),
                Err(error) => {
                    tracing::warn!(%owner, %repo, %error, "the reconcile could not list queued runs");
                    continue;
                }
            };
            let held_runs: std::collections::HashSet<u64> =
                self.taken.values().map(|taken| taken.run_id).collect();
            let now = self.parts.shared.now();
            let age = stale_after(self.parts.settings.reconcile_every);
            let due = |run: &u64| {
                !held_runs.contains(run)
                    && self
                        .listed_runs
                        .get(run)
                        .is_none_or(|(at, asked)| now >= stale_at(*at, age, *asked))
            };
            let runs: Vec<u64> = runs.into_iter().filter(due).collect();
            for run in runs {
                if !Intake::spend(done) {
                    return Ok(());
                }
                let found_before = done.found;
                let jobs = match self.parts.api.run_jobs(&owner, &repo, run).await {
                    Ok(jobs) => jobs,
                    Err(error @ ApiError::RateLimited { .. }) => return Err(error),
                    Err(_) => continue,
                };
                let full_name = format!("{owner}/{repo}");
                for status in jobs {
                    // Never heard of: not taken, and no delivery of it
                    // committed (a job billet left is not found again,
                    // unless it was left for want of its run's facts).
                    let unheard = self.demand.stage(status.id).is_none()
                        && (self.unread.remove(&status.id)
                            || self
                                .parts
                                .webhook
                                .upgrade()
                                .is_none_or(|webhook| webhook.job(status.id).is_none()));
                    if status.status == "queued"
                        && unheard
                        && let Some(event) = event_of(&status, &full_name)
                    {
                        done.found += 1;
                        tracing::info!(
                            github_job = status.id,
                            run,
                            "found a queued GitHub job whose delivery never came"
                        );
                        self.record(&event);
                        self.on_event(event).await;
                    }
                }
                if self.listed_runs.len() >= super::RUNS_CACHED {
                    self.listed_runs.clear();
                }
                let asked = self.listed_runs.get(&run).map_or(0, |(_, asked)| *asked);
                let asked = if done.found > found_before {
                    0
                } else {
                    asked.saturating_add(1)
                };
                self.listed_runs.insert(run, (now, asked));
            }
        }
        Ok(())
    }

    /// Step 3: registrations named for this store that no live runner
    /// holds, when a sweep is due ([`Sweeps`]).
    async fn remove_orphans(&mut self, done: &mut Reconciled) -> Result<(), ApiError> {
        let Some(identity) = self.parts.identity.clone() else {
            // Without an identity no name says it is this store's.
            return Ok(());
        };
        if !self.sweeps.due() {
            return Ok(());
        }
        let mut whole = true;
        let mut scopes: Vec<Scope> = Vec::new();
        for scope in &self.parts.settings.scopes {
            let scope = match &scope.target {
                ScopeTarget::Org { name, .. } => Scope::Org(name.clone()),
                ScopeTarget::Repository { owner, name } => Scope::Repository {
                    owner: owner.clone(),
                    name: name.clone(),
                },
                _ => continue,
            };
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        for scope in scopes {
            if !Intake::spend(done) {
                return Ok(());
            }
            // A search: each runner shown is judged on its own, and none
            // is judged by its absence, so the first pages serve when
            // more are registered (one past them is shown once those
            // ahead of it, single-use, are gone).
            let runners = match self.parts.api.runners_shown(&scope).await {
                Ok((runners, _)) => runners,
                Err(error @ ApiError::RateLimited { .. }) => return Err(error),
                Err(error) => {
                    tracing::warn!(%error, "the reconcile could not list runners");
                    whole = false;
                    continue;
                }
            };
            let orphans: Vec<(u64, String)> = {
                let jobs = self.parts.shared.jobs.read();
                runners
                    .into_iter()
                    .filter(|runner| !runner.busy)
                    .filter(|runner| {
                        InstanceName::parse(&runner.name).is_some_and(|name| {
                            name.store == Some(identity.as_str()) && jobs.live(name.job.0).is_none()
                        })
                    })
                    .map(|runner| (runner.id, runner.name))
                    .collect()
            };
            for (id, name) in orphans {
                if !Intake::spend(done) {
                    return Ok(());
                }
                match self.parts.api.delete_runner(&scope, id).await {
                    Ok(_) => {
                        done.orphans += 1;
                        tracing::info!(runner = %name, "removed an orphan registration: its billet job has ended");
                    }
                    Err(error @ ApiError::RateLimited { .. }) => return Err(error),
                    Err(error) => {
                        whole = false;
                        tracing::warn!(runner = %name, %error, "an orphan registration could not be removed");
                    }
                }
            }
        }
        // Step 3 is the only one that counts orphans.
        if whole {
            self.sweeps.swept(done.orphans);
        }
        Ok(())
    }
}

/// When the reconcile sweeps GitHub's registrations for orphans (step 3).
///
/// billet removes the registration of every runner it retires, destroys,
/// or sees end before it took a job, so an orphan is left only by a crash
/// (a registration made and not yet recorded) or a removal that failed. A
/// sweep lists every scope's registrations (up to
/// [`MAX_PAGES`](billet_github::MAX_PAGES) calls each), so it runs at the
/// first reconcile after start, at the next one after a removal failed
/// ([`doubt`](Sweeps::doubt)), and otherwise backs off: after `n` sweeps
/// in a row that found none, the next comes `2^n` reconciles later, at
/// most [`MAX_BACKOFF`] doublings (64 intervals: an hour at the default
/// 60 s). A sweep that found one, or did not finish (a listing or a
/// removal failed, the calls ran out), is followed by one at the next
/// reconcile.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sweeps {
    /// Reconciles still to pass before the next sweep.
    skip: u32,
    /// Sweeps in a row that found no orphan (at most [`MAX_BACKOFF`]).
    empty: u32,
}

impl Sweeps {
    /// Whether this reconcile sweeps; counts one skipped when not.
    pub(super) fn due(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// A sweep finished, having found `found` orphans.
    pub(super) fn swept(&mut self, found: usize) {
        self.empty = if found > 0 {
            0
        } else {
            (self.empty + 1).min(MAX_BACKOFF)
        };
        self.skip = (1u32 << self.empty) - 1;
    }

    /// A registration billet meant to remove may be left: the next
    /// reconcile sweeps, and the backoff starts again.
    pub(super) fn doubt(&mut self) {
        *self = Sweeps::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of the next `reconciles` sweep, from `sweeps`, each sweep
    /// finding what `found` says of it (by its number among the sweeps).
    fn sweeping(
        sweeps: &mut Sweeps,
        reconciles: usize,
        found: impl Fn(usize) -> usize,
    ) -> Vec<usize> {
        let mut swept = Vec::new();
        for at in 0..reconciles {
            if sweeps.due() {
                sweeps.swept(found(swept.len()));
                swept.push(at);
            }
        }
        swept
    }

    // G7: registrations are swept at the first reconcile, then at
    // doubling intervals while none is found, at most 64 reconciles
    // apart; a sweep that finds one, or a doubt, brings the next back to
    // the next reconcile.
    #[test]
    fn g7_orphan_sweeps_back_off_to_a_bound() {
        let mut sweeps = Sweeps::default();
        let swept = sweeping(&mut sweeps, 400, |_| 0);
        assert_eq!(swept, [0, 2, 6, 14, 30, 62, 126, 190, 254, 318, 382]);
        // A sweep that found one: the next at the next reconcile.
        let mut sweeps = Sweeps::default();
        let swept = sweeping(&mut sweeps, 20, |n| usize::from(n == 2));
        assert_eq!(swept, [0, 2, 6, 7, 9, 13]);
        let swept = sweeping(&mut Sweeps::default(), 20, |n| if n == 1 { 2 } else { 0 });
        assert_eq!(swept, [0, 2, 3, 5, 9, 17]);
        // A doubt: the next reconcile sweeps, and the backoff starts again.
        let mut sweeps = Sweeps::default();
        sweeping(&mut sweeps, 100, |_| 0);
        assert!(!sweeps.due());
        sweeps.doubt();
        assert_eq!(sweeping(&mut sweeps, 10, |_| 0), [0, 2, 6]);
    }

    // G7: a reconcile is said at `info` when it settled, found or removed
    // anything, each alone; the calls it made alone are not news.
    #[test]
    fn g7_a_reconcile_that_acted_is_said() {
        let base = Reconciled {
            calls: 3,
            ..Reconciled::default()
        };
        assert!(!base.acted());
        for acted in [
            Reconciled { settled: 1, ..base },
            Reconciled { found: 1, ..base },
            Reconciled { orphans: 1, ..base },
            Reconciled {
                settled: 2,
                found: 3,
                orphans: 1,
                ..base
            },
        ] {
            assert!(acted.acted(), "{acted:?}");
        }
    }

    // G7, H14: the reconcile asks only what it has reason to doubt. A job
    // queued is doubtful only while a runner of its pool idles; a job in
    // progress only when no live runner of billet's holds it; a completed
    // job never.
    #[test]
    fn g7_only_doubtful_jobs_are_asked() {
        for idle in [false, true] {
            for held in [false, true] {
                assert_eq!(
                    doubtful(JobStage::Queued, idle, held),
                    idle,
                    "{idle} {held}"
                );
                assert_eq!(
                    doubtful(JobStage::InProgress, idle, held),
                    !held,
                    "{idle} {held}"
                );
                assert!(!doubtful(JobStage::Completed, idle, held), "{idle} {held}");
            }
        }
    }

    // G7, H14: a job in progress that is doubted is asked at once, then
    // when stale, backing off; one no longer doubted starts again, so a new
    // doubt is asked at once. A queued job that is doubted is asked at every
    // reconcile (how many of a pool's are asked is bounded by the runners
    // idling there: `still_doubted`).
    #[test]
    fn g7_a_new_doubt_is_asked_at_once() {
        let running = Some(JobStage::InProgress);
        let heard = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let age = Duration::from_secs(60);
        let mut asked = 0;
        assert!(
            ask_now(running, true, heard, heard, age, &mut asked),
            "at once"
        );
        asked = 3;
        let soon = heard + age;
        assert!(
            !ask_now(running, true, soon, heard, age, &mut asked),
            "backing off"
        );
        assert_eq!(asked, 3, "a doubt kept keeps its backoff");
        assert!(ask_now(
            running,
            true,
            heard + age * 8,
            heard,
            age,
            &mut asked
        ));
        let early = heard + age * 8 - Duration::from_nanos(1);
        assert!(!ask_now(running, true, early, heard, age, &mut asked));
        assert!(
            !ask_now(running, false, heard + age * 8, heard, age, &mut asked),
            "not doubted"
        );
        assert_eq!(asked, 0, "reset");
        assert!(
            ask_now(running, true, heard, heard, age, &mut asked),
            "a new doubt"
        );
        // Queued: asked whenever doubted, whatever the count.
        let queued = Some(JobStage::Queued);
        asked = 3;
        assert!(ask_now(queued, true, soon, heard, age, &mut asked));
        assert!(!ask_now(queued, false, soon, heard, age, &mut asked));
        assert_eq!(asked, 0, "reset");
    }

    // G7, H14: a runner no job is known for idles once it started before
    // the reconcile, not at the instant it starts, nor before its start.
    #[test]
    fn g7_a_runner_idles_once_it_started_before_the_reconcile() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert!(idles(Some(now - Duration::from_nanos(1)), now));
        assert!(idles(Some(now - Duration::from_secs(600)), now));
        assert!(!idles(Some(now), now));
        assert!(!idles(Some(now + Duration::from_secs(1)), now));
        assert!(!idles(None, now), "not started");
    }

    // G7, H14: doubted queued jobs are asked in the order their deliveries
    // came (GitHub hands the oldest first), others by when last heard of.
    #[test]
    fn g7_queued_jobs_are_asked_oldest_first() {
        let at = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let queued = Some(JobStage::Queued);
        assert_eq!(ask_order(queued, Some(at(5)), at(90)), at(5));
        assert_eq!(ask_order(queued, None, at(90)), at(90), "after a restart");
        for stage in [None, Some(JobStage::InProgress), Some(JobStage::Completed)] {
            assert_eq!(ask_order(stage, Some(at(5)), at(90)), at(90), "{stage:?}");
        }
    }

    // G7, H14: queued jobs are asked only while runners of their pool idle
    // that no ask was spent on yet; others whatever the count.
    #[test]
    fn g7_queued_jobs_are_asked_for_the_runners_that_idle() {
        assert!(still_doubted(Some(JobStage::Queued), 1));
        assert!(!still_doubted(Some(JobStage::Queued), 0));
        for stage in [None, Some(JobStage::InProgress), Some(JobStage::Completed)] {
            assert!(still_doubted(stage, 0), "{stage:?}");
            assert!(still_doubted(stage, 2), "{stage:?}");
        }
    }

    // G7, H14: a job asked with nothing new waits twice as long before the
    // next ask, up to MAX_BACKOFF doublings.
    #[test]
    fn g7_asks_back_off_to_a_bound() {
        let heard = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let age = Duration::from_secs(60);
        let after = |asked| stale_at(heard, age, asked).duration_since(heard).unwrap();
        assert_eq!(after(0), age);
        assert_eq!(after(1), 2 * age);
        assert_eq!(after(2), 4 * age);
        assert_eq!(after(MAX_BACKOFF), age * 64);
        assert_eq!(after(MAX_BACKOFF + 1), age * 64, "bounded");
        assert_eq!(after(u32::MAX), age * 64, "bounded");
        assert_eq!(MAX_BACKOFF, 6);
    }
}
