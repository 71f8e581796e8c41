//! Runners by demand (G6): which runners billet should have, given what
//! GitHub has said of the jobs billet took. A core that decides without
//! I/O: it is told facts (a job queued in a pool, a job taken by a runner,
//! a job completed, a runner gone) and answers what to do (launch a runner
//! in a pool, retire one).
//!
//! GitHub, not billet, decides which runner takes which job: the runner
//! made for one job may take another whose labels fit. So billet accounts by
//! demand: in each pool it keeps exactly one runner that no job has taken
//! yet for each job it took there that no runner has taken yet. A runner
//! that took a job is busy and counts for nothing; a runner whose job was
//! taken by another runner, or completed, serves another waiting job of its
//! pool if there is one, and is retired if not.
//!
//! Facts only move forward (a job's state never goes back, a runner that
//! took a job stays busy), and [`Demand::settle`] decides from the facts
//! alone, never from the order they came in: deliveries in any order,
//! repeated or late, give the same runners.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many of the last runners' changes [`Demand::runners_changed_since`]
/// can name: a reader further behind walks the runners instead.
pub const RUNNER_LOG: usize = 65_536;

/// A runner billet made, by the number it was given. Its billet job and
/// instance are named from it by the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunnerId(pub u64);

/// Where a GitHub job billet took stands, as GitHub said. Ordered: a job
/// only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobStage {
    /// Waiting for a runner.
    Queued,
    /// A runner took it.
    InProgress,
    /// It ended.
    Completed,
}

/// A GitHub job billet took, or heard of before it took it (a late
/// `queued` after its `completed`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct TakenJob {
    /// The pool that took it; `None` while only its later stages are known.
    pool: Option<String>,
    stage: JobStage,
}

/// A runner billet made.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Runner {
    pool: String,
    /// The waiting job it is kept for, while no job has taken it.
    kept_for: Option<u64>,
    /// The job it took, once GitHub said so.
    took: Option<u64>,
    /// It was retired, or its instance ended: it takes nothing more.
    gone: bool,
}

/// What billet should do for its runners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// Launch a new runner in `pool`, kept for GitHub job `for_job`.
    Launch {
        /// The runner's number.
        runner: RunnerId,
        /// The pool.
        pool: String,
        /// The job it is made for.
        for_job: u64,
    },
    /// Retire a runner no waiting job needs: cancel it if it has not
    /// started, else remove its registration (which GitHub refuses while it
    /// runs a job) and destroy it.
    Retire {
        /// The runner.
        runner: RunnerId,
    },
}

/// The runners billet keeps for the GitHub jobs it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Demand {
    jobs: BTreeMap<u64, TakenJob>,
    runners: BTreeMap<RunnerId, Runner>,
    next_runner: u64,
    /// See [`Demand::changes`].
    changes: u64,
    /// The count at the end of the last [`settle`](Demand::settle): while
    /// it stays, a settle has nothing to do (a settle leaves nothing for
    /// the next one).
    settled: Option<u64>,
    /// The count at the end of the last
    /// [`forget_completed`](Demand::forget_completed), likewise.
    forgotten: Option<u64>,
    /// What [`job_counts`](Demand::job_counts) answers, kept as facts come.
    counted: (usize, usize),
    /// See [`Demand::runner_changes`].
    runner_changes: u64,
    /// The runner each of the last runners' changes was to, oldest first,
    /// at most [`RUNNER_LOG`].
    runner_log: VecDeque<RunnerId>,
    /// The runners kept for each job: every runner whose `kept_for` names
    /// it (none gone, none busy), so that a settle finds a job's runners
    /// without walking them all.
    keepers: BTreeMap<u64, BTreeSet<RunnerId>>,
    /// Jobs a fact touched since the last settle: one that no longer waits
    /// frees its runners, one that waits with no runner gets one. A settle
    /// looks at these and [`unsettled_runners`](Demand::unsettled_runners)
    /// only: every other job and runner is as the last settle left it.
    unsettled_jobs: BTreeSet<u64>,
    /// Runners restored since the last settle, which may be kept for no
    /// waiting job.
    unsettled_runners: BTreeSet<RunnerId>,
    /// Jobs that completed and are not forgotten yet.
    completed: BTreeSet<u64>,
}

impl Demand {
    /// No job taken, no runner made; the next runner is numbered `first`.
    pub fn new(first: u64) -> Demand {
        Demand {
            next_runner: first,
            ..Demand::default()
        }
    }

    /// GitHub job `job` was taken into `pool` (its `queued` delivery, or
    /// the reconcile's finding). Taking a job twice changes nothing; its
    /// pool is the first one given. A job already said to be further on
    /// stays there.
    pub fn taken(&mut self, job: u64, pool: &str) {
        self.changes += 1;
        let taken = self.jobs.entry(job).or_insert(TakenJob {
            pool: None,
            stage: JobStage::Queued,
        });
        if taken.pool.is_none() {
            taken.pool = Some(pool.to_owned());
            let stage = taken.stage;
            self.count(stage, 1);
            self.unsettled_jobs.insert(job);
        }
    }

    /// Adds `by` (1 or -1) to the count of jobs taken at `stage`.
    fn count(&mut self, stage: JobStage, by: isize) {
        let counted = match stage {
            JobStage::Queued => &mut self.counted.0,
            JobStage::InProgress => &mut self.counted.1,
            JobStage::Completed => return,
        };
        *counted = counted.saturating_add_signed(by);
    }

    /// GitHub said job `job` reached `stage` (a delivery or the API). A
    /// stage behind the known one changes nothing; a job not taken yet is
    /// remembered at that stage, so that a `queued` arriving late cannot
    /// make it wait again.
    pub fn reached(&mut self, job: u64, stage: JobStage) {
        self.changes += 1;
        let taken = self
            .jobs
            .entry(job)
            .or_insert(TakenJob { pool: None, stage });
        let (was, counted) = (taken.stage, taken.pool.is_some());
        taken.stage = taken.stage.max(stage);
        let now = taken.stage;
        if now != was {
            if counted {
                self.count(was, -1);
                self.count(now, 1);
            }
            self.unsettled_jobs.insert(job);
        }
        if now == JobStage::Completed {
            self.completed.insert(job);
        }
    }

    /// GitHub said runner `runner` took job `job` (`in_progress`). The
    /// first job a runner is said to take is the one it took.
    pub fn took(&mut self, runner: RunnerId, job: u64) {
        // Counted by `reached`, which every call ends with.
        self.keep(runner, None);
        if let Some(held) = self.runners.get_mut(&runner) {
            let first = held.took.is_none();
            held.took.get_or_insert(job);
            if first {
                self.runner_changed(runner);
            }
        }
        self.reached(job, JobStage::InProgress);
    }

    /// Runner `runner` is gone: its instance ended, or it was retired.
    pub fn gone(&mut self, runner: RunnerId) {
        self.changes += 1;
        self.keep(runner, None);
        if let Some(held) = self.runners.get_mut(&runner) {
            held.gone = true;
        }
    }

    /// Runner `runner` is kept for `job` now: the index of keepers follows,
    /// and the job it was kept for before may wait with no runner.
    fn keep(&mut self, runner: RunnerId, job: Option<u64>) {
        let Some(held) = self.runners.get_mut(&runner) else {
            return;
        };
        let was = std::mem::replace(&mut held.kept_for, job);
        if was == job {
            return;
        }
        if let Some(was) = was {
            if let Some(keepers) = self.keepers.get_mut(&was) {
                keepers.remove(&runner);
                if keepers.is_empty() {
                    self.keepers.remove(&was);
                }
            }
            self.unsettled_jobs.insert(was);
        }
        if let Some(job) = job {
            self.keepers.entry(job).or_default().insert(runner);
        }
    }

    /// A runner billet made before a restart, with what it was kept for and
    /// what it took: keeps its number from being given again.
    pub fn restore(
        &mut self,
        runner: RunnerId,
        pool: &str,
        kept_for: Option<u64>,
        took: Option<u64>,
    ) {
        self.changes += 1;
        self.runner_changed(runner);
        self.next_runner = self.next_runner.max(runner.0 + 1);
        self.keep(runner, None);
        self.runners.insert(
            runner,
            Runner {
                pool: pool.to_owned(),
                kept_for: None,
                took,
                gone: false,
            },
        );
        self.keep(runner, kept_for.filter(|_| took.is_none()));
        self.unsettled_runners.insert(runner);
    }

    /// Forgets every job that completed and that no runner is kept for:
    /// what the table of jobs is bounded by. (A `queued` arriving after a
    /// job is forgotten is the caller's to refuse, from what it keeps.)
    pub fn forget_completed(&mut self) {
        if self.forgotten == Some(self.changes) {
            return;
        }
        let before = self.jobs.len();
        let keepers = &self.keepers;
        let jobs = &mut self.jobs;
        self.completed.retain(|job| {
            let kept = keepers.contains_key(job);
            if !kept {
                jobs.remove(job);
            }
            kept
        });
        if self.jobs.len() != before {
            self.changes += 1;
        }
        self.forgotten = Some(self.changes);
    }

    /// Forgets runner `runner` once it is gone.
    pub fn forget_runner(&mut self, runner: RunnerId) {
        if self.runners.get(&runner).is_some_and(|held| held.gone) {
            self.runners.remove(&runner);
            self.changes += 1;
            self.runner_changed(runner);
        }
    }

    /// What to do now so that each pool keeps exactly one untaken runner for
    /// each of its waiting jobs: a runner whose job no longer waits is kept
    /// for another waiting job of its pool (the oldest, by GitHub's id), or
    /// retired; a waiting job with no runner kept for it gets a new one.
    pub fn settle(&mut self) -> Vec<Act> {
        if self.settled == Some(self.changes) {
            return Vec::new();
        }
        let mut acts = Vec::new();
        let waits = |jobs: &BTreeMap<u64, TakenJob>, job: u64| {
            jobs.get(&job)
                .is_some_and(|job| job.stage == JobStage::Queued)
        };
        // Runners whose job no longer waits are free; jobs that wait with
        // no runner kept for them are waiting, oldest first. Only what a
        // fact touched since the last settle can be either.
        let mut free: BTreeSet<RunnerId> = BTreeSet::new();
        let mut waiting: Vec<(u64, String)> = Vec::new();
        for job in std::mem::take(&mut self.unsettled_jobs) {
            if !waits(&self.jobs, job) {
                for runner in self.keepers.remove(&job).unwrap_or_default() {
                    if let Some(held) = self.runners.get_mut(&runner) {
                        held.kept_for = None;
                    }
                    free.insert(runner);
                }
            } else if !self.keepers.contains_key(&job)
                && let Some(pool) = self.jobs.get(&job).and_then(|job| job.pool.clone())
            {
                waiting.push((job, pool));
            }
        }
        for runner in std::mem::take(&mut self.unsettled_runners) {
            let Some(held) = self.runners.get(&runner) else {
                continue;
            };
            if held.gone || held.took.is_some() {
                continue;
            }
            match held.kept_for {
                Some(job) if waits(&self.jobs, job) => {}
                _ => {
                    self.keep(runner, None);
                    free.insert(runner);
                }
            }
        }
        // A free runner is kept for a waiting job or retired, and a waiting
        // job gets a runner: either is a change.
        if !free.is_empty() || !waiting.is_empty() {
            self.changes += 1;
        }
        for (job, pool) in waiting {
            let spare = free
                .iter()
                .copied()
                .find(|id| self.runners.get(id).is_some_and(|r| r.pool == pool));
            match spare {
                Some(id) => {
                    free.remove(&id);
                    self.keep(id, Some(job));
                }
                None => {
                    let runner = RunnerId(self.next_runner);
                    self.next_runner += 1;
                    self.runner_changed(runner);
                    self.runners.insert(
                        runner,
                        Runner {
                            pool: pool.clone(),
                            kept_for: None,
                            took: None,
                            gone: false,
                        },
                    );
                    self.keep(runner, Some(job));
                    acts.push(Act::Launch {
                        runner,
                        pool,
                        for_job: job,
                    });
                }
            }
        }
        for runner in free {
            if let Some(held) = self.runners.get_mut(&runner) {
                held.gone = true;
            }
            acts.push(Act::Retire { runner });
        }
        // What `keep` marked while settling is settled: a runner freed here
        // left a job that does not wait.
        self.unsettled_jobs.clear();
        self.settled = Some(self.changes);
        acts
    }

    /// How many runners of `pool` no job has taken and that are not gone:
    /// starting or idle.
    pub fn untaken_runners(&self, pool: &str) -> usize {
        self.runners
            .values()
            .filter(|r| r.pool == pool && !r.gone && r.took.is_none())
            .count()
    }

    /// How many jobs billet took in `pool` that no runner has taken yet.
    pub fn waiting_jobs(&self, pool: &str) -> usize {
        self.jobs
            .values()
            .filter(|j| j.pool.as_deref() == Some(pool) && j.stage == JobStage::Queued)
            .count()
    }

    /// How many GitHub jobs billet took are `queued` and `in_progress` (a
    /// job known only from a later delivery, not taken, is not counted).
    pub fn job_counts(&self) -> (usize, usize) {
        self.counted
    }

    /// The job runner `runner` is kept for, and the one it took.
    pub fn runner(&self, runner: RunnerId) -> Option<(Option<u64>, Option<u64>)> {
        self.runners.get(&runner).map(|r| (r.kept_for, r.took))
    }

    /// A count that grows with every fact told and every change
    /// [`settle`](Demand::settle) and the forgetting made: the same count
    /// as before means the same runners and jobs, so what a caller decided
    /// from them still holds. A [`settle`](Demand::settle) that finds
    /// nothing to do leaves it as it was.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// A count that grows by one with every runner made, restored or
    /// forgotten, and every runner said to take its job: what
    /// [`runner`](Demand::runner) answers changes with it only.
    pub fn runner_changes(&self) -> u64 {
        self.runner_changes
    }

    /// The runners changed since [`runner_changes`](Demand::runner_changes)
    /// was `count`, one per change, oldest first; every other runner is as
    /// [`runner`](Demand::runner) said then, but for what it is kept for.
    /// `None` when the demand cannot say: more than [`RUNNER_LOG`] changes
    /// since, or a count it never had.
    pub fn runners_changed_since(&self, count: u64) -> Option<impl Iterator<Item = RunnerId> + '_> {
        let behind = usize::try_from(self.runner_changes.checked_sub(count)?).ok()?;
        let from = self.runner_log.len().checked_sub(behind)?;
        Some(self.runner_log.range(from..).copied())
    }

    fn runner_changed(&mut self, runner: RunnerId) {
        self.runner_changes += 1;
        if self.runner_log.len() == RUNNER_LOG {
            self.runner_log.pop_front();
        }
        self.runner_log.push_back(runner);
    }

    /// Where job `job` stands, if billet took it.
    pub fn stage(&self, job: u64) -> Option<JobStage> {
        self.jobs.get(&job).map(|j| j.stage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn launch(runner: u64, pool: &str, for_job: u64) -> Act {
        Act::Launch {
            runner: RunnerId(runner),
            pool: pool.to_owned(),
            for_job,
        }
    }

    // G6: a runner for each waiting job; a runner made for one job that takes
    // another leaves its runner to the first; a completed job's runner is
    // retired; a busy runner counts for nothing.
    #[test]
    fn g6_runners_follow_demand_not_identity() {
        let mut demand = Demand::new(1);
        demand.taken(10, "linux");
        demand.taken(11, "linux");
        demand.taken(20, "gpu");
        assert_eq!(
            demand.settle(),
            [
                launch(1, "linux", 10),
                launch(2, "linux", 11),
                launch(3, "gpu", 20)
            ]
        );
        assert_eq!(demand.settle(), [], "settled: nothing more");
        assert_eq!(demand.untaken_runners("linux"), 2);
        assert_eq!(demand.waiting_jobs("linux"), 2);
        // G8: a job known only from a delivery, never taken, is not counted.
        demand.reached(99, JobStage::InProgress);
        assert_eq!(demand.job_counts(), (3, 0));

        // Runner 1 (made for 10) takes 11: runner 2 (made for 11) is kept
        // for 10 now; nothing is launched or retired.
        demand.took(RunnerId(1), 11);
        assert_eq!(demand.settle(), []);
        assert_eq!(demand.runner(RunnerId(2)), Some((Some(10), None)));
        assert_eq!(demand.runner(RunnerId(1)), Some((None, Some(11))));
        assert_eq!(demand.job_counts(), (2, 1));
        assert_eq!(
            (
                demand.untaken_runners("linux"),
                demand.waiting_jobs("linux")
            ),
            (1, 1)
        );

        // Job 20 completes before any runner takes it: its runner retires.
        demand.reached(20, JobStage::Completed);
        assert_eq!(
            demand.settle(),
            [Act::Retire {
                runner: RunnerId(3)
            }]
        );
        assert_eq!(demand.untaken_runners("gpu"), 0);
        assert_eq!(
            demand.job_counts(),
            (1, 1),
            "a completed job is not counted"
        );

        // A runner of billet's takes a job billet never took (its delivery
        // was lost): the job it was kept for gets a new runner.
        demand.took(RunnerId(2), 99);
        assert_eq!(demand.settle(), [launch(4, "linux", 10)]);

        // A runner that dies before taking anything is replaced.
        demand.gone(RunnerId(4));
        assert_eq!(demand.settle(), [launch(5, "linux", 10)]);
        demand.forget_runner(RunnerId(4));
        assert_eq!(demand.runner(RunnerId(4)), None);
        demand.forget_runner(RunnerId(5));
        assert!(demand.runner(RunnerId(5)).is_some(), "not gone: kept");

        // Completed jobs with no runner kept for them are forgotten.
        demand.reached(10, JobStage::Completed);
        assert_eq!(
            demand.settle(),
            [Act::Retire {
                runner: RunnerId(5)
            }]
        );
        demand.reached(12, JobStage::Completed);
        demand.taken(13, "linux");
        assert_eq!(demand.settle(), [launch(6, "linux", 13)]);
        demand.reached(13, JobStage::Completed);
        demand.forget_completed();
        assert_eq!(demand.stage(10), None);
        assert_eq!(demand.stage(12), None, "known only from its completion");
        assert_eq!(
            demand.stage(13),
            Some(JobStage::Completed),
            "a runner is kept for it until the next settle"
        );
        demand.settle();
        demand.forget_completed();
        assert_eq!(demand.stage(13), None);
        assert_eq!(
            demand.stage(11),
            Some(JobStage::InProgress),
            "not completed: kept"
        );
    }

    // G6, H14: every fact told moves the demand's count, and so does a
    // settle or a forgetting that changed something; one that found nothing
    // to do leaves it, so that a caller who kept the count knows the runners
    // are as it saw them.
    #[test]
    fn g6_the_demand_counts_its_changes() {
        let mut demand = Demand::new(1);
        let mut last = demand.changes();
        let mut moved = |demand: &Demand| {
            let now = demand.changes();
            let moved = now > last;
            last = now;
            moved
        };
        demand.taken(10, "linux");
        assert!(moved(&demand), "taken");
        assert_eq!(demand.settle(), [launch(1, "linux", 10)]);
        assert!(moved(&demand), "a launch");
        assert_eq!(demand.settle(), []);
        demand.forget_completed();
        assert!(!moved(&demand), "nothing to settle or forget");
        demand.took(RunnerId(1), 10);
        assert!(moved(&demand), "took");
        assert_eq!(demand.settle(), []);
        assert!(!moved(&demand), "a busy runner is kept for nothing");
        demand.reached(10, JobStage::Completed);
        assert!(moved(&demand), "reached");
        demand.forget_completed();
        assert!(moved(&demand), "a completed job forgotten");
        demand.gone(RunnerId(1));
        assert!(moved(&demand), "gone");
        demand.forget_runner(RunnerId(1));
        assert!(moved(&demand), "a gone runner forgotten");
        demand.forget_runner(RunnerId(1));
        assert!(!moved(&demand), "no runner to forget");
        demand.restore(RunnerId(5), "linux", None, Some(7));
        assert!(moved(&demand), "restored");
        demand.taken(11, "linux");
        assert!(moved(&demand));
        assert_eq!(demand.settle(), [launch(6, "linux", 11)]);
        assert!(moved(&demand));
        demand.reached(11, JobStage::Completed);
        assert!(moved(&demand));
        assert_eq!(
            demand.settle(),
            [Act::Retire {
                runner: RunnerId(6)
            }],
        );
        assert!(moved(&demand), "a retirement");
    }

    // G6: a stage behind the known one, a job taken twice, a runner said to
    // take a second job, and facts about jobs billet never took change nothing.
    #[test]
    fn g6_facts_only_move_forward() {
        let mut demand = Demand::new(1);
        demand.taken(1, "linux");
        demand.reached(1, JobStage::Completed);
        demand.reached(1, JobStage::Queued);
        demand.taken(1, "gpu");
        assert_eq!(demand.stage(1), Some(JobStage::Completed));
        assert_eq!(demand.settle(), []);
        // A job heard of only as taken is remembered so; queued late, it
        // does not wait again.
        demand.reached(2, JobStage::InProgress);
        assert_eq!(demand.stage(2), Some(JobStage::InProgress));
        demand.taken(2, "linux");
        assert_eq!(demand.stage(2), Some(JobStage::InProgress));
        assert_eq!(demand.waiting_jobs("linux"), 0);
        assert_eq!(demand.settle(), []);

        let mut demand = Demand::new(7);
        demand.taken(5, "linux");
        assert_eq!(demand.settle(), [launch(7, "linux", 5)]);
        demand.took(RunnerId(7), 5);
        demand.took(RunnerId(7), 6);
        assert_eq!(demand.runner(RunnerId(7)), Some((None, Some(5))));
        demand.took(RunnerId(99), 5);
        assert_eq!(demand.runner(RunnerId(99)), None);
        demand.reached(5, JobStage::Queued);
        assert_eq!(demand.stage(5), Some(JobStage::InProgress));

        // A restored runner keeps its number from being given again, and is
        // kept for its job only while nothing took it.
        let mut demand = Demand::new(1);
        demand.taken(3, "linux");
        demand.restore(RunnerId(40), "linux", Some(3), None);
        demand.restore(RunnerId(41), "linux", Some(3), Some(8));
        assert_eq!(demand.runner(RunnerId(41)), Some((None, Some(8))));
        assert_eq!(demand.settle(), []);
        demand.taken(4, "linux");
        assert_eq!(demand.settle(), [launch(42, "linux", 4)]);
    }

    // G6: the runners' log is bounded: past RUNNER_LOG changes it says it
    // cannot name them, never names a part of them.
    #[test]
    fn g6_the_runners_log_is_bounded() {
        let mut demand = Demand::new(1);
        assert_eq!(
            demand.runners_changed_since(1).map(Iterator::count),
            None,
            "a count never had"
        );
        for n in 0..RUNNER_LOG as u64 {
            demand.restore(RunnerId(n + 1), "linux", None, Some(n + 1));
        }
        assert_eq!(
            demand.runners_changed_since(0).map(Iterator::count),
            Some(RUNNER_LOG)
        );
        assert_eq!(
            demand.runner_changes(),
            RUNNER_LOG as u64,
            "one count per change"
        );
        demand.restore(RunnerId(1), "linux", None, Some(1));
        assert_eq!(
            demand.runners_changed_since(0).map(Iterator::count),
            None,
            "too far back"
        );
        assert_eq!(
            demand
                .runners_changed_since(1)
                .map(|mut ids| (ids.next(), ids.last())),
            Some((Some(RunnerId(2)), Some(RunnerId(1))))
        );
    }

    /// What `settle` decides, by walking every runner and job: the oracle
    /// its bookkeeping of what facts touched is held to.
    fn settle_by_walk(demand: &mut Demand) -> Vec<Act> {
        let mut acts = Vec::new();
        let mut free: Vec<RunnerId> = Vec::new();
        for (&id, runner) in &mut demand.runners {
            if runner.gone || runner.took.is_some() {
                runner.kept_for = None;
                continue;
            }
            let waits = runner
                .kept_for
                .and_then(|job| demand.jobs.get(&job))
                .is_some_and(|job| job.stage == JobStage::Queued);
            if !waits {
                runner.kept_for = None;
                free.push(id);
            }
        }
        let kept: BTreeSet<u64> = demand.runners.values().filter_map(|r| r.kept_for).collect();
        let waiting: Vec<(u64, String)> = demand
            .jobs
            .iter()
            .filter(|(id, job)| job.stage == JobStage::Queued && !kept.contains(id))
            .filter_map(|(id, job)| Some((*id, job.pool.clone()?)))
            .collect();
        for (job, pool) in waiting {
            let spare = free
                .iter()
                .position(|id| demand.runners.get(id).is_some_and(|r| r.pool == pool));
            match spare {
                Some(at) => {
                    let id = free.remove(at);
                    if let Some(runner) = demand.runners.get_mut(&id) {
                        runner.kept_for = Some(job);
                    }
                }
                None => {
                    let runner = RunnerId(demand.next_runner);
                    demand.next_runner += 1;
                    demand.runners.insert(
                        runner,
                        Runner {
                            pool: pool.clone(),
                            kept_for: Some(job),
                            took: None,
                            gone: false,
                        },
                    );
                    acts.push(Act::Launch {
                        runner,
                        pool,
                        for_job: job,
                    });
                }
            }
        }
        for runner in free {
            if let Some(held) = demand.runners.get_mut(&runner) {
                held.gone = true;
            }
            acts.push(Act::Retire { runner });
        }
        acts
    }

    /// What `forget_completed` forgets, by walking every job.
    fn forget_by_walk(demand: &mut Demand) {
        let kept: BTreeSet<u64> = demand.runners.values().filter_map(|r| r.kept_for).collect();
        demand
            .jobs
            .retain(|id, job| job.stage != JobStage::Completed || kept.contains(id));
    }

    /// One GitHub job's deliveries, as they may arrive.
    #[derive(Debug, Clone, Copy)]
    enum Delivery {
        Queued,
        InProgress(u64),
        Completed,
    }

    fn apply(demand: &mut Demand, job: u64, delivery: Delivery) -> Vec<Act> {
        match delivery {
            Delivery::Queued => demand.taken(job, "linux"),
            Delivery::InProgress(runner) => demand.took(RunnerId(runner), job),
            Delivery::Completed => demand.reached(job, JobStage::Completed),
        }
        demand.settle()
    }

    proptest! {
        // G6: the deliveries of two jobs, in any order, each repeated any
        // number of times, always give the same end (both jobs completed,
        // no job waiting, every runner busy or retired), and at no step are
        // there more untaken runners than waiting jobs.
        #[test]
        fn g6_any_order_and_repetition_gives_the_same_end(
            order in Just((0..6usize).collect::<Vec<_>>()).prop_shuffle(),
            repeats in proptest::collection::vec(0..6usize, 0..6),
        ) {
            // In order: both jobs queued, runner 1 takes job 2 and runner 2
            // job 1, both complete.
            let script = [
                (1, Delivery::Queued),
                (2, Delivery::Queued),
                (2, Delivery::InProgress(1)),
                (1, Delivery::InProgress(2)),
                (1, Delivery::Completed),
                (2, Delivery::Completed),
            ];
            let mut shuffled: Vec<(u64, Delivery)> = order.iter().map(|&i| script[i]).collect();
            for &r in &repeats {
                let at = r % (shuffled.len() + 1);
                shuffled.insert(at, script[r]);
            }
            let mut demand = Demand::new(1);
            for (job, delivery) in shuffled {
                apply(&mut demand, job, delivery);
                prop_assert!(demand.untaken_runners("linux") <= demand.waiting_jobs("linux"));
            }
            prop_assert_eq!(demand.waiting_jobs("linux"), 0);
            prop_assert_eq!(demand.untaken_runners("linux"), 0);
            prop_assert_eq!(demand.stage(1), Some(JobStage::Completed));
            prop_assert_eq!(demand.stage(2), Some(JobStage::Completed));
            prop_assert!(demand.runners.values().all(|r| r.gone || r.took.is_some()));
        }

        // G6, G7: any of one job's deliveries lost, the rest in any order
        // and repeated, then what the reconcile reads of a job still open
        // (GitHub says it completed): the same end as every delivery once,
        // in order. At no step are there more untaken runners than waiting
        // jobs.
        #[test]
        fn g6_any_loss_order_and_repetition_of_one_jobs_deliveries_gives_the_same_end(
            order in Just((0..3usize).collect::<Vec<_>>()).prop_shuffle(),
            lost in proptest::collection::vec(any::<bool>(), 3),
            repeats in proptest::collection::vec(0..3usize, 0..4),
        ) {
            let script = [
                (7, Delivery::Queued),
                (7, Delivery::InProgress(1)),
                (7, Delivery::Completed),
            ];
            let end = |demand: &Demand| {
                (
                    demand.stage(7),
                    demand.waiting_jobs("linux"),
                    demand.untaken_runners("linux"),
                    demand.runners.values().all(|r| r.gone || r.took.is_some()),
                )
            };
            let mut in_order = Demand::new(1);
            for (job, delivery) in script {
                apply(&mut in_order, job, delivery);
            }
            let mut arrived: Vec<(u64, Delivery)> = order
                .iter()
                .filter(|&&i| !lost[i])
                .map(|&i| script[i])
                .collect();
            for &r in &repeats {
                if !lost[r] {
                    let at = r % (arrived.len() + 1);
                    arrived.insert(at, script[r]);
                }
            }
            let mut demand = Demand::new(1);
            for (job, delivery) in arrived {
                apply(&mut demand, job, delivery);
                prop_assert!(demand.untaken_runners("linux") <= demand.waiting_jobs("linux"));
            }
            // The reconcile: a job heard of and not completed is read from
            // the API, which says it completed.
            if demand.stage(7).is_some_and(|stage| stage != JobStage::Completed) {
                demand.reached(7, JobStage::Completed);
                demand.settle();
            }
            let expected = end(&in_order);
            prop_assert_eq!(expected, (Some(JobStage::Completed), 0, 0, true));
            if demand.stage(7).is_some() {
                prop_assert_eq!(end(&demand), expected);
            } else {
                // Every delivery lost: billet never heard of the job and
                // holds nothing for it.
                prop_assert_eq!(end(&demand), (None, 0, 0, true));
            }
        }

        // G6: whatever facts come, every runner whose answer from `runner`
        // changed (made, forgotten, or said to take a job) is named by
        // `runners_changed_since` the count before.
        #[test]
        fn g6_every_runner_whose_answer_changed_is_named(
            ops in proptest::collection::vec((0..7u8, 1..5u64, 1..5u64), 0..40),
        ) {
            let mut demand = Demand::new(1);
            for (op, job, runner) in ops {
                let pool = if job % 2 == 0 { "linux" } else { "gpu" };
                let before: BTreeMap<RunnerId, Option<u64>> =
                    demand.runners.iter().map(|(id, r)| (*id, r.took)).collect();
                let count = demand.runner_changes();
                match op {
                    0 => demand.taken(job, pool),
                    1 => demand.reached(job, JobStage::Completed),
                    2 => demand.took(RunnerId(runner), job),
                    3 => demand.gone(RunnerId(runner)),
                    4 => demand.forget_runner(RunnerId(runner)),
                    5 => demand.restore(RunnerId(runner + 10), pool, Some(job), None),
                    _ => {
                        demand.settle();
                    }
                }
                let after: BTreeMap<RunnerId, Option<u64>> =
                    demand.runners.iter().map(|(id, r)| (*id, r.took)).collect();
                let named: std::collections::BTreeSet<RunnerId> =
                    demand.runners_changed_since(count).expect("within the log").collect();
                for id in before.keys().chain(after.keys()) {
                    if before.get(id) != after.get(id) {
                        prop_assert!(named.contains(id), "runner {} changed unnamed", id.0);
                    }
                }
            }
        }

        // G6: a settle looks only at what facts touched since the last one,
        // and skips when the count has not moved since; a forgetting looks
        // only at completed jobs, likewise. Whatever facts came, in any
        // order, each decides what a walk of every runner and job decides.
        #[test]
        fn g6_a_settle_skipped_for_an_unchanged_count_decides_as_a_full_one(
            ops in proptest::collection::vec((0..8u8, 1..5u64, 1..5u64), 0..40),
        ) {
            let mut demand = Demand::new(1);
            for (op, job, runner) in ops {
                let pool = if job % 2 == 0 { "linux" } else { "gpu" };
                match op {
                    0 => demand.taken(job, pool),
                    1 => demand.reached(job, JobStage::Completed),
                    2 => demand.took(RunnerId(runner), job),
                    3 => demand.gone(RunnerId(runner)),
                    4 => demand.forget_runner(RunnerId(runner)),
                    5 => demand.restore(RunnerId(runner + 10), pool, Some(job), None),
                    6 => {
                        let mut walked = demand.clone();
                        forget_by_walk(&mut walked);
                        demand.forget_completed();
                        prop_assert_eq!(&demand.jobs, &walked.jobs);
                        let kept: Vec<u64> = demand.runners.values().filter_map(|r| r.kept_for).collect();
                        prop_assert!(
                            demand.jobs.iter().all(|(id, j)| j.stage != JobStage::Completed || kept.contains(id)),
                            "a completed job no runner is kept for is forgotten"
                        );
                    }
                    _ => {
                        let mut walked = demand.clone();
                        let acts = settle_by_walk(&mut walked);
                        prop_assert_eq!(demand.settle(), acts);
                        prop_assert_eq!(&demand.runners, &walked.runners);
                        prop_assert_eq!(demand.next_runner, walked.next_runner);
                        let mut keepers: BTreeMap<u64, BTreeSet<RunnerId>> = BTreeMap::new();
                        for (id, runner) in &demand.runners {
                            if let Some(job) = runner.kept_for {
                                keepers.entry(job).or_default().insert(*id);
                            }
                        }
                        prop_assert_eq!(&demand.keepers, &keepers);
                        let untaken = |r: &Runner| !r.gone && r.took.is_none();
                        for (id, job) in &demand.jobs {
                            if job.stage == JobStage::Queued && job.pool.is_some() {
                                prop_assert!(
                                    demand.runners.values().any(|r| untaken(r) && r.kept_for == Some(*id)),
                                    "job {} waits with no runner kept for it", id
                                );
                            }
                        }
                        for runner in demand.runners.values().filter(|r| untaken(r)) {
                            let waits = runner.kept_for.and_then(|job| demand.jobs.get(&job));
                            prop_assert!(
                                waits.is_some_and(|job| job.stage == JobStage::Queued),
                                "an untaken runner is kept for a waiting job"
                            );
                        }
                        prop_assert_eq!(demand.settle(), [], "a settle leaves nothing to the next");
                    }
                }
                let walked = demand.jobs.values().filter(|job| job.pool.is_some()).fold(
                    (0, 0),
                    |(queued, running), job| match job.stage {
                        JobStage::Queued => (queued + 1, running),
                        JobStage::InProgress => (queued, running + 1),
                        JobStage::Completed => (queued, running),
                    },
                );
                prop_assert_eq!(demand.job_counts(), walked);
            }
        }
    }
}
