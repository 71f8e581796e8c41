//! The deliveries GitHub sent and what they said of each GitHub job, kept
//! in their own SQLite database (`DIR/github.db`, mode 0600 like the
//! store), so that a delivery is committed before it is answered and a
//! redelivery is known after a restart (G2).
//!
//! Bounded: a delivery is kept [`KEEP`] (GitHub lets an operator redeliver
//! the last three days' deliveries), a GitHub job as long after it
//! completed, and one never said completed (its `completed` lost, or taken
//! by another store's runner) [`UNENDED_KEEP`] after its last delivery; all
//! are removed as new deliveries are committed.

use std::path::Path;
use std::time::{Duration, SystemTime};

use billet_github::{Action, WorkflowJobEvent};
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::{StoreError, private_file};
use billet_provider::TrustClass;

/// How long a delivery's id, and a completed job, are kept.
pub const KEEP: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// How long a GitHub job no delivery said completed is kept after its last
/// delivery: GitHub cancels a job queued for a self-hosted runner after 24
/// hours and ends one that has run 5 days, so by then it has ended at
/// GitHub whatever billet heard.
pub const UNENDED_KEEP: Duration = Duration::from_secs(6 * 24 * 60 * 60);

/// The database file's name inside the state directory.
pub const DATABASE_FILE: &str = "github.db";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    received_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_by_age ON deliveries (received_at);
CREATE TABLE IF NOT EXISTS github_jobs (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    repository TEXT NOT NULL,
    labels TEXT NOT NULL,
    stage INTEGER NOT NULL,
    runner TEXT,
    conclusion TEXT,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS github_jobs_completed ON github_jobs (updated_at) WHERE stage = 3;
CREATE INDEX IF NOT EXISTS github_jobs_unended ON github_jobs (updated_at) WHERE stage < 3;
CREATE TABLE IF NOT EXISTS runner_jobs (
    billet_job INTEGER PRIMARY KEY,
    github_job INTEGER NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runner_jobs_by_age ON runner_jobs (at);
CREATE TABLE IF NOT EXISTS taken_jobs (
    id INTEGER PRIMARY KEY,
    pool TEXT NOT NULL,
    trust TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS taken_jobs_by_age ON taken_jobs (at);
CREATE TABLE IF NOT EXISTS runner_numbers (
    only INTEGER PRIMARY KEY CHECK (only = 0),
    reserved_below INTEGER NOT NULL
);
";

/// A GitHub job as the deliveries left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFacts {
    /// GitHub's job id.
    pub id: u64,
    /// Its run.
    pub run_id: u64,
    /// `OWNER/NAME`.
    pub repository: String,
    /// Its `runs-on` labels.
    pub labels: Vec<String>,
    /// The furthest action any delivery said.
    pub action: Action,
    /// The runner that took it, once one did.
    pub runner: Option<String>,
    /// How it ended, once it did.
    pub conclusion: Option<String>,
}

/// A GitHub job the intake took: into which pool, at which trust, when
/// (its `queued` delivery, or the reconcile's finding). Kept until its
/// `completed` is committed, or [`KEEP`] after it was taken, so that a
/// restart takes again the jobs still queued without asking GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TookJob {
    /// GitHub's job id.
    pub id: u64,
    /// The pool its runners run in.
    pub pool: String,
    /// The trust its runners run at.
    pub trust: TrustClass,
    /// When it was taken.
    pub at: SystemTime,
}

/// A row of `github_jobs`, selected as `id, run_id, repository, labels,
/// stage, runner, conclusion`.
fn facts_of(row: &rusqlite::Row<'_>) -> rusqlite::Result<JobFacts> {
    let labels: String = row.get(3)?;
    Ok(JobFacts {
        id: row.get::<_, i64>(0)? as u64,
        run_id: row.get::<_, i64>(1)? as u64,
        repository: row.get(2)?,
        labels: serde_json::from_str(&labels).unwrap_or_default(),
        action: action_of(row.get(4)?),
        runner: row.get(5)?,
        conclusion: row.get(6)?,
    })
}

/// What committing a delivery found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// A delivery not seen before: committed.
    New,
    /// Its id was committed before (a redelivery): nothing changed.
    Repeated,
}

/// The deliveries' database.
#[derive(Debug)]
pub struct Deliveries {
    conn: Connection,
}

/// How far an action goes, as stored: forward only.
fn rank(action: Action) -> i64 {
    match action {
        Action::Waiting => 0,
        Action::Queued => 1,
        Action::InProgress => 2,
        Action::Completed => 3,
        Action::Unknown => -1,
    }
}

fn action_of(rank: i64) -> Action {
    match rank {
        0 => Action::Waiting,
        1 => Action::Queued,
        2 => Action::InProgress,
        3 => Action::Completed,
        _ => Action::Unknown,
    }
}

fn millis(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Deliveries {
    /// Opens (or makes) `DIR/github.db` and its journal, private to their
    /// owner (L13).
    pub fn open(dir: &Path) -> Result<Deliveries, StoreError> {
        let path = dir.join(DATABASE_FILE);
        let corrupt = |error: rusqlite::Error| StoreError::Corrupt {
            path: path.clone(),
            detail: error.to_string(),
        };
        let conn = Connection::open(&path).map_err(corrupt)?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
            .map_err(corrupt)?;
        let deliveries = Deliveries::with(conn).map_err(corrupt)?;
        for suffix in ["", "-wal", "-shm"] {
            private_file(&dir.join(format!("{DATABASE_FILE}{suffix}")))?;
        }
        Ok(deliveries)
    }

    /// A database in memory, kept for the service's life alone.
    pub fn memory() -> rusqlite::Result<Deliveries> {
        Deliveries::with(Connection::open_in_memory()?)
    }

    fn with(conn: Connection) -> rusqlite::Result<Deliveries> {
        conn.execute_batch(SCHEMA)?;
        Ok(Deliveries { conn })
    }

    /// Commits delivery `id` at `now`, and what `event` says of its job
    /// (forward only: an action behind the one kept changes nothing but
    /// what only it says). A delivery id committed before changes nothing.
    /// Deliveries and completed jobs older than [`KEEP`], and jobs not
    /// completed older than [`UNENDED_KEEP`], are removed in the same
    /// transaction.
    pub fn commit(
        &mut self,
        id: &str,
        event: Option<&WorkflowJobEvent>,
        now: SystemTime,
    ) -> rusqlite::Result<Committed> {
        let mut committed = self.commit_many(&[(id, event, now)])?;
        Ok(committed.pop().unwrap_or(Committed::Repeated))
    }

    /// [`commit`](Deliveries::commit) of each of `deliveries` (id, event,
    /// when received), in order, in one transaction: one write to the disk
    /// for them all (group commit). Answers what each was, in the same
    /// order; on an error none is committed.
    pub fn commit_many(
        &mut self,
        deliveries: &[(&str, Option<&WorkflowJobEvent>, SystemTime)],
    ) -> rusqlite::Result<Vec<Committed>> {
        let Some(latest) = deliveries.iter().map(|(_, _, now)| *now).max() else {
            return Ok(Vec::new());
        };
        let cutoff = millis(latest.checked_sub(KEEP).unwrap_or(SystemTime::UNIX_EPOCH));
        let unended_cutoff = millis(
            latest
                .checked_sub(UNENDED_KEEP)
                .unwrap_or(SystemTime::UNIX_EPOCH),
        );
        let tx = self.conn.transaction()?;
        let mut answers = Vec::with_capacity(deliveries.len());
        for &(id, event, now) in deliveries {
            let at = millis(now);
            let inserted = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO deliveries (id, received_at) VALUES (?1, ?2)",
                )?
                .execute(params![id, at])?;
            if inserted == 0 {
                answers.push(Committed::Repeated);
                continue;
            }
            answers.push(Committed::New);
            let Some(event) = event else {
                continue;
            };
            let job = &event.workflow_job;
            let labels = serde_json::to_string(&job.labels).unwrap_or_else(|_| "[]".to_owned());
            let runner = (event.action >= Action::InProgress)
                .then(|| job.runner_name.clone())
                .flatten();
            let conclusion = (event.action == Action::Completed)
                .then(|| job.conclusion.clone())
                .flatten();
            if event.action == Action::Completed {
                tx.prepare_cached("DELETE FROM taken_jobs WHERE id = ?1")?
                    .execute(params![i64::try_from(job.id).unwrap_or(i64::MAX)])?;
            }
            tx.prepare_cached(
                "INSERT INTO github_jobs (id, run_id, repository, labels, stage, runner, conclusion, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (id) DO UPDATE SET
                   stage = MAX(stage, excluded.stage),
                   runner = COALESCE(runner, excluded.runner),
                   conclusion = COALESCE(conclusion, excluded.conclusion),
                   updated_at = excluded.updated_at",
            )?
            .execute(params![
                    i64::try_from(job.id).unwrap_or(i64::MAX),
                    i64::try_from(job.run_id).unwrap_or(i64::MAX),
                    event.repository.full_name,
                    labels,
                    rank(event.action),
                    runner,
                    conclusion,
                at,
            ])?;
        }
        for forget in [
            "DELETE FROM deliveries WHERE received_at < ?1",
            "DELETE FROM github_jobs WHERE stage = 3 AND updated_at < ?1",
            "DELETE FROM runner_jobs WHERE at < ?1",
            "DELETE FROM taken_jobs WHERE at < ?1",
        ] {
            tx.prepare_cached(forget)?.execute(params![cutoff])?;
        }
        tx.prepare_cached("DELETE FROM github_jobs WHERE stage < 3 AND updated_at < ?1")?
            .execute(params![unended_cutoff])?;
        tx.commit()?;
        Ok(answers)
    }

    /// Runner billet job `billet_job` serves GitHub job `github_job` (it
    /// took it), as of `now`. Kept [`KEEP`], as deliveries are.
    pub fn runner_serves(
        &mut self,
        billet_job: u64,
        github_job: u64,
        now: SystemTime,
    ) -> rusqlite::Result<()> {
        self.keep(&[], &[(billet_job, github_job, now)])
    }

    /// Keeps each job of `took` as taken, and each of `served` (billet job,
    /// GitHub job, as of) as [`runner_serves`](Deliveries::runner_serves)
    /// does, in order, in one transaction. On an error none is kept.
    ///
    /// Committed without waiting for the disk (`synchronous = NORMAL` for
    /// this transaction alone): what a runner serves is what its view shows
    /// (G8), and what a restart reads of the jobs taken, GitHub's API says
    /// too (G7). In WAL mode such a commit survives the process's crash;
    /// the next delivery's commit (`FULL`) puts it on the disk with its
    /// own, so only the machine's crash before then can lose it.
    /// Deliveries, facts and reserved runner numbers keep waiting for the
    /// disk.
    pub fn keep(
        &mut self,
        took: &[TookJob],
        served: &[(u64, u64, SystemTime)],
    ) -> rusqlite::Result<()> {
        self.conn.execute_batch("PRAGMA synchronous = NORMAL")?;
        let written = self.write_kept(took, served);
        let restored = self.conn.execute_batch("PRAGMA synchronous = FULL");
        written.and(restored)
    }

    /// [`keep`](Deliveries::keep)'s transaction.
    fn write_kept(
        &mut self,
        took: &[TookJob],
        served: &[(u64, u64, SystemTime)],
    ) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        for took in took {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO taken_jobs (id, pool, trust, at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                i64::try_from(took.id).unwrap_or(i64::MAX),
                took.pool,
                took.trust.as_str(),
                millis(took.at)
            ])?;
        }
        for &(billet_job, github_job, now) in served {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO runner_jobs (billet_job, github_job, at) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![
                i64::try_from(billet_job).unwrap_or(i64::MAX),
                i64::try_from(github_job).unwrap_or(i64::MAX),
                millis(now)
            ])?;
        }
        tx.commit()
    }

    /// Every job kept as taken ([`keep`](Deliveries::keep)) that no
    /// `completed` was committed for, with what the deliveries said of it,
    /// by id: what a restart takes again (G7). As many as the jobs taken in
    /// the last [`KEEP`] that have not completed.
    pub fn taken(&self) -> rusqlite::Result<Vec<(TookJob, JobFacts)>> {
        self.conn
            .prepare_cached(
                "SELECT g.id, g.run_id, g.repository, g.labels, g.stage, g.runner, g.conclusion,
                        t.pool, t.trust, t.at
                 FROM taken_jobs t JOIN github_jobs g ON g.id = t.id
                 WHERE g.stage < 3 ORDER BY t.id",
            )?
            .query_map([], |row| {
                let facts = facts_of(row)?;
                let trust: String = row.get(8)?;
                let took = TookJob {
                    id: facts.id,
                    pool: row.get(7)?,
                    trust: crate::record::trust_from_name(&trust).unwrap_or_default(),
                    at: SystemTime::UNIX_EPOCH
                        + Duration::from_millis(u64::try_from(row.get::<_, i64>(9)?).unwrap_or(0)),
                };
                Ok((took, facts))
            })?
            .collect()
    }

    /// The GitHub job runner billet job `billet_job` serves, and what the
    /// deliveries said of it (`None`: not a runner's job, or nothing kept).
    pub fn served_by(&self, billet_job: u64) -> rusqlite::Result<Option<JobFacts>> {
        let github_job: Option<i64> = self
            .conn
            .prepare_cached("SELECT github_job FROM runner_jobs WHERE billet_job = ?1")?
            .query_row(
                params![i64::try_from(billet_job).unwrap_or(i64::MAX)],
                |row| row.get(0),
            )
            .optional()?;
        match github_job {
            Some(id) => self.job(id as u64),
            None => Ok(None),
        }
    }

    /// What the deliveries said of GitHub job `id`, if any was kept.
    pub fn job(&self, id: u64) -> rusqlite::Result<Option<JobFacts>> {
        self.conn
            .prepare_cached(
                "SELECT id, run_id, repository, labels, stage, runner, conclusion FROM github_jobs WHERE id = ?1",
            )?
            .query_row(params![i64::try_from(id).unwrap_or(i64::MAX)], facts_of)
            .optional()
    }

    /// Every GitHub job a delivery (or the API, [`commit`](Deliveries::commit)
    /// of what it said) last said is in progress on a named runner, by id:
    /// what a restart reads to know which runner took which job, and which
    /// jobs' `completed` has not come (G7, G8). Committed with the delivery
    /// itself, so a crash just after its answer loses none. As many as the
    /// jobs in progress, and those whose `completed` was lost and that no
    /// reconcile has settled yet; read by a walk of the jobs kept, which a
    /// start makes once.
    pub fn in_progress(&self) -> rusqlite::Result<Vec<JobFacts>> {
        self.conn
            .prepare_cached(
                "SELECT id, run_id, repository, labels, stage, runner, conclusion FROM github_jobs
                 WHERE stage = 2 AND runner IS NOT NULL ORDER BY id",
            )?
            .query_map([], facts_of)?
            .collect()
    }

    /// The first runner number no start of this state directory may have
    /// given (1 when none was): every number below it may name a runner's
    /// billet job already, ended or not, and is never given again.
    pub fn runners_reserved(&self) -> rusqlite::Result<u64> {
        let below: Option<i64> = self
            .conn
            .query_row(
                "SELECT reserved_below FROM runner_numbers WHERE only = 0",
                [],
                |row| row.get(0),
            )
            .optional()?;
        Ok(below.map_or(1, |n| u64::try_from(n).unwrap_or(1).max(1)))
    }

    /// Reserves every runner number below `below` (durably, before any is
    /// given); a number at or below the one kept changes nothing.
    pub fn reserve_runners(&mut self, below: u64) -> rusqlite::Result<()> {
        let below = i64::try_from(below).unwrap_or(i64::MAX);
        self.conn.execute(
            "INSERT INTO runner_numbers (only, reserved_below) VALUES (0, ?1)
             ON CONFLICT (only) DO UPDATE SET reserved_below = MAX(reserved_below, excluded.reserved_below)",
            params![below],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(id: u64) -> WorkflowJobEvent {
        serde_json::from_value(serde_json::json!({
            "action": "queued",
            "workflow_job": {"id": id, "run_id": 7, "labels": ["linux"]},
            "repository": {"id": 3, "full_name": "octo-org/app", "private": true},
        }))
        .unwrap()
    }

    /// A delivery about job `id` saying `action` (as GitHub names it).
    fn saying(action: &str, id: u64) -> WorkflowJobEvent {
        let mut event = queued(id);
        event.action = serde_json::from_value(serde_json::json!(action)).unwrap();
        event
    }

    // G2: each action a delivery says is kept as said and read back as
    // such, an action GitHub added later as unknown (not as a queued job);
    // a delivery's id is known for three days (GitHub redelivers the last
    // three days') and forgotten past them.
    #[test]
    fn g2_every_action_is_kept_as_said_and_ids_for_three_days() {
        let mut deliveries = Deliveries::memory().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let said = [
            ("waiting", Action::Waiting),
            ("queued", Action::Queued),
            ("in_progress", Action::InProgress),
            ("completed", Action::Completed),
            ("a_later_action", Action::Unknown),
        ];
        for (id, (name, action)) in (1..).zip(said) {
            let event = saying(name, id);
            assert_eq!(event.action, action);
            deliveries
                .commit(&format!("d-{id}"), Some(&event), t0)
                .unwrap();
            let kept = deliveries.job(id).unwrap().expect("kept");
            assert_eq!(kept.action, action, "{name}");
        }
        let day = 24 * 60 * 60;
        let within = t0 + Duration::from_secs(3 * day - 60);
        // A commit removes what is past KEEP after it answers its own id:
        // another delivery first, then the old id again.
        deliveries.commit("d-within", None, within).unwrap();
        assert_eq!(
            deliveries.commit("d-1", None, within).unwrap(),
            Committed::Repeated
        );
        let past = t0 + Duration::from_secs(3 * day + 60);
        deliveries.commit("d-late", None, past).unwrap();
        assert_eq!(
            deliveries.commit("d-2", None, past).unwrap(),
            Committed::New,
            "forgotten past three days"
        );
    }

    // G2: a job no delivery said completed (its `completed` lost, or run by
    // another store's runner) is kept UNENDED_KEEP after its last delivery,
    // by which GitHub has ended it, and then forgotten: github.db holds no
    // job for good.
    #[test]
    fn g2_a_job_never_said_completed_is_forgotten_after_six_days() {
        let mut deliveries = Deliveries::memory().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let hour = Duration::from_secs(60 * 60);
        deliveries.commit("d-1", Some(&queued(1)), t0).unwrap();
        deliveries.commit("d-2", Some(&queued(2)), t0).unwrap();
        let started = t0 + hour;
        deliveries
            .commit("d-3", Some(&saying("in_progress", 1)), started)
            .unwrap();
        let days = |n: u64| Duration::from_secs(n * 24 * 60 * 60);
        assert_eq!(UNENDED_KEEP, days(6));
        // Past KEEP, a job not completed is still known.
        deliveries.commit("d-4", None, started + days(4)).unwrap();
        assert_eq!(
            deliveries.job(1).unwrap().expect("kept").action,
            Action::InProgress
        );
        assert!(deliveries.job(2).unwrap().is_some());
        // Exactly six days after its last delivery, still kept.
        deliveries.commit("d-5", None, t0 + days(6)).unwrap();
        assert!(deliveries.job(2).unwrap().is_some(), "kept to the bound");
        // Just past six days after its last delivery, gone; the job whose
        // last delivery was an hour later stays until its own bound.
        let past = t0 + days(6) + Duration::from_millis(1);
        deliveries.commit("d-6", None, past).unwrap();
        assert_eq!(deliveries.job(2).unwrap(), None, "forgotten");
        assert!(deliveries.job(1).unwrap().is_some(), "its bound is later");
        deliveries
            .commit("d-7", None, started + days(6) + Duration::from_millis(1))
            .unwrap();
        assert_eq!(deliveries.job(1).unwrap(), None, "forgotten");
    }

    // G8: a runner's billet job names the GitHub job it serves (the one it
    // was made for, then the one it took), while that job's facts are kept;
    // both go KEEP after they were last written.
    #[test]
    fn g8_a_runners_job_names_the_github_job_it_serves() {
        let mut deliveries = Deliveries::memory().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        deliveries.commit("d-1", Some(&queued(41)), t0).unwrap();
        deliveries.commit("d-2", Some(&queued(42)), t0).unwrap();
        assert_eq!(deliveries.served_by(5).unwrap(), None, "not a runner's");
        deliveries.runner_serves(5, 41, t0).unwrap();
        assert_eq!(deliveries.served_by(5).unwrap().unwrap().id, 41);
        deliveries.runner_serves(5, 42, t0).unwrap();
        let facts = deliveries.served_by(5).unwrap().unwrap();
        assert_eq!((facts.id, facts.run_id), (42, 7));
        assert_eq!(facts.repository, "octo-org/app");
        deliveries.runner_serves(6, 99, t0).unwrap();
        assert_eq!(deliveries.served_by(6).unwrap(), None, "no facts kept");
        // Past KEEP, the next commit removes what the runner served.
        let later = t0 + KEEP + Duration::from_secs(1);
        deliveries.commit("d-3", None, later).unwrap();
        assert_eq!(deliveries.served_by(5).unwrap(), None);
        let kept: i64 = deliveries
            .conn
            .query_row("SELECT COUNT(*) FROM runner_jobs", [], |row| row.get(0))
            .unwrap();
        assert_eq!(kept, 0);
    }

    // G2, G7: the jobs in progress are read back from the deliveries that
    // said so, committed with them: named runners only, none that
    // completed, none still queued, and across a reopening.
    #[test]
    fn g7_jobs_in_progress_are_read_back_with_their_runners() {
        let dir = tempfile::tempdir().unwrap();
        let mut deliveries = Deliveries::open(dir.path()).unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let taken = |id: u64, runner: Option<&str>| {
            let mut event = saying("in_progress", id);
            event.workflow_job.runner_name = runner.map(str::to_owned);
            event
        };
        deliveries.commit("d-1", Some(&queued(1)), t0).unwrap();
        deliveries
            .commit("d-2", Some(&taken(2, Some("r-2"))), t0)
            .unwrap();
        deliveries
            .commit("d-3", Some(&taken(3, Some("r-3"))), t0)
            .unwrap();
        deliveries
            .commit("d-4", Some(&saying("completed", 3)), t0)
            .unwrap();
        deliveries.commit("d-5", Some(&taken(5, None)), t0).unwrap();
        deliveries
            .commit("d-6", Some(&taken(6, Some("r-6"))), t0)
            .unwrap();
        // A late `queued` moves nothing back.
        deliveries.commit("d-7", Some(&queued(6)), t0).unwrap();
        drop(deliveries);
        let deliveries = Deliveries::open(dir.path()).unwrap();
        let read: Vec<(u64, Option<String>, Action)> = deliveries
            .in_progress()
            .unwrap()
            .into_iter()
            .map(|facts| (facts.id, facts.runner, facts.action))
            .collect();
        assert_eq!(
            read,
            [
                (2, Some("r-2".to_owned()), Action::InProgress),
                (6, Some("r-6".to_owned()), Action::InProgress),
            ]
        );
    }

    // G7: the jobs kept as taken are read back, with their pool, trust
    // and when they were taken, until their `completed` is committed (which
    // removes them) or KEEP has passed; a job never delivered is not read.
    #[test]
    fn g7_jobs_taken_are_read_back_until_they_complete() {
        let mut deliveries = Deliveries::memory().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000_123);
        let took = |id: u64, trust: TrustClass| TookJob {
            id,
            pool: format!("pool-{id}"),
            trust,
            at: t0 + Duration::from_millis(id),
        };
        for id in [1, 2, 3] {
            deliveries
                .commit(&format!("q-{id}"), Some(&queued(id)), t0)
                .unwrap();
        }
        let kept = [
            took(1, TrustClass::Trusted),
            took(2, TrustClass::Untrusted),
            took(3, TrustClass::Trusted),
            took(4, TrustClass::Trusted),
        ];
        deliveries.keep(&kept, &[]).unwrap();
        deliveries
            .commit("p-2", Some(&saying("in_progress", 2)), t0)
            .unwrap();
        deliveries
            .commit("c-3", Some(&saying("completed", 3)), t0)
            .unwrap();
        let read = deliveries.taken().unwrap();
        let ids: Vec<(u64, Action)> = read.iter().map(|(_, f)| (f.id, f.action)).collect();
        assert_eq!(ids, [(1, Action::Queued), (2, Action::InProgress)]);
        assert_eq!(read[0].0, kept[0]);
        assert_eq!(read[1].0, kept[1]);
        let rows = |deliveries: &Deliveries| -> i64 {
            deliveries
                .conn
                .query_row("SELECT COUNT(*) FROM taken_jobs", [], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(
            rows(&deliveries),
            3,
            "3's completed removed it; 4 waits for facts"
        );
        // Past KEEP, the next commit removes what was taken then.
        let later = t0 + KEEP + Duration::from_secs(1);
        deliveries.commit("d-late", None, later).unwrap();
        assert_eq!(rows(&deliveries), 0);
        assert!(deliveries.taken().unwrap().is_empty());
    }

    // G2, G8: what a runner serves is committed without waiting for the
    // disk, and every commit after it waits again.
    #[test]
    fn g8_what_a_runner_serves_is_written_and_deliveries_still_wait_for_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut deliveries = Deliveries::open(dir.path()).unwrap();
        let synchronous = |deliveries: &Deliveries| -> i64 {
            deliveries
                .conn
                .query_row("PRAGMA synchronous", [], |row| row.get(0))
                .unwrap()
        };
        assert_eq!(synchronous(&deliveries), 2, "FULL");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        deliveries.commit("d-1", Some(&queued(41)), t0).unwrap();
        deliveries.keep(&[], &[(7, 41, t0)]).unwrap();
        assert_eq!(synchronous(&deliveries), 2, "FULL again");
        drop(deliveries);
        let deliveries = Deliveries::open(dir.path()).unwrap();
        assert_eq!(
            deliveries.served_by(7).unwrap().map(|facts| facts.id),
            Some(41)
        );
    }

    // G2: deliveries committed together (group commit) answer each as it
    // would alone, in order: an id seen before, in an earlier commit or
    // earlier in the same one, is a redelivery; what each says of its job
    // is kept, forward only.
    #[test]
    fn g2_deliveries_committed_together_answer_each_as_alone() {
        let mut deliveries = Deliveries::memory().unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(
            deliveries.commit("d-1", Some(&queued(41)), t0).unwrap(),
            Committed::New
        );
        let mut completed = queued(41);
        completed.action = Action::Completed;
        let answers = deliveries
            .commit_many(&[
                ("d-1", Some(&queued(41)), t0),
                ("d-2", Some(&completed), t0),
                ("d-2", Some(&queued(41)), t0),
                ("d-3", Some(&queued(41)), t0),
                ("d-4", Some(&queued(43)), t0),
            ])
            .unwrap();
        assert_eq!(
            answers,
            [
                Committed::Repeated,
                Committed::New,
                Committed::Repeated,
                Committed::New,
                Committed::New
            ]
        );
        assert_eq!(
            deliveries.job(41).unwrap().unwrap().action,
            Action::Completed
        );
        assert_eq!(deliveries.job(43).unwrap().unwrap().action, Action::Queued);
        assert_eq!(deliveries.commit_many(&[]).unwrap(), []);
    }

    // G5: runner numbers name runners' billet jobs by their keys, which the
    // store keeps after the job ends: a number reserved is never given again,
    // across a restart, and a reservation never moves back.
    #[test]
    fn g5_runner_numbers_reserved_survive_a_restart_and_never_move_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = Deliveries::open(dir.path()).unwrap();
        assert_eq!(first.runners_reserved().unwrap(), 1, "none reserved yet");
        first.reserve_runners(1_025).unwrap();
        assert_eq!(first.runners_reserved().unwrap(), 1_025);
        first.reserve_runners(7).unwrap();
        assert_eq!(first.runners_reserved().unwrap(), 1_025, "never back");
        first.reserve_runners(2_049).unwrap();
        drop(first);
        let again = Deliveries::open(dir.path()).unwrap();
        assert_eq!(again.runners_reserved().unwrap(), 2_049);
        let mut memory = Deliveries::memory().unwrap();
        memory.reserve_runners(0).unwrap();
        assert_eq!(memory.runners_reserved().unwrap(), 1, "0 names no runner");
        memory.reserve_runners(u64::MAX).unwrap();
        assert_eq!(memory.runners_reserved().unwrap(), i64::MAX as u64);
    }
}
