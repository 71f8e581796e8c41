//! The service's jobs: [`Jobs`], the table every answer reads (the jobs not
//! yet ended, in memory, over the archive of those ended), and [`page`], one
//! page of them for `GET /v1/jobs`. A job's record and the changes that move
//! it live in [`crate::record`].
//!
//! A change is written to the store and applied to the table in the same
//! order, by the same writer, after its commit: the table is always exactly
//! what the store holds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::record::{Change, JobRecord};
use crate::store::{Archive, StoreError};

mod page;

pub use page::{MAX_PAGE_BYTES, Page, PageQuery, page};

/// How many of the last changes [`Jobs::changed_since`] can name: a reader
/// further behind walks the table instead. 512 KiB of ids.
pub const CHANGE_LOG: usize = 65_536;

/// The jobs the service holds in memory: those that have not ended, by id
/// (gaps allowed: an id the store no longer holds is simply absent); and the
/// [`Archive`] ended jobs move to once their end is applied (L12). The keys
/// of jobs not ended are the engine's to answer from; the ids are the
/// store's to count. Memory grows with jobs not yet ended, not with jobs ever
/// accepted.
#[derive(Debug, Clone)]
pub struct Jobs {
    live: BTreeMap<u64, JobRecord>,
    archive: Arc<Archive>,
    /// How many records were inserted and changes applied: see
    /// [`Jobs::changes`].
    changes: u64,
    /// The job each of the last changes was to, oldest first, at most
    /// [`CHANGE_LOG`]: see [`Jobs::changed_since`].
    log: VecDeque<u64>,
}

impl Default for Jobs {
    /// No job, over an archive in memory.
    fn default() -> Jobs {
        Jobs::over(Arc::new(Archive::memory()), Vec::new())
    }
}

impl Jobs {
    /// The table holding `records` over an archive in memory.
    pub fn from_records(records: Vec<JobRecord>) -> Jobs {
        Jobs::over(Arc::new(Archive::memory()), records)
    }

    /// The table over `archive`, holding `records` (those ended go to the
    /// archive).
    pub fn over(archive: Arc<Archive>, records: Vec<JobRecord>) -> Jobs {
        let mut jobs = Jobs {
            live: BTreeMap::new(),
            archive,
            changes: 0,
            log: VecDeque::new(),
        };
        for record in records {
            jobs.insert(record);
        }
        jobs
    }

    /// Counts a change to job `id`, and logs it.
    fn changed(&mut self, id: u64) {
        self.changes += 1;
        if self.log.len() == CHANGE_LOG {
            self.log.pop_front();
        }
        self.log.push_back(id);
    }

    fn insert(&mut self, record: JobRecord) {
        self.changed(record.id);
        if record.state.has_ended() {
            self.archive.keep(record);
            return;
        }
        self.live.insert(record.id, record);
    }

    /// Job `id`, if it has not ended.
    pub fn live(&self, id: u64) -> Option<&JobRecord> {
        self.live.get(&id)
    }

    /// Job `id`, ended or not: from memory, else from the archive.
    pub fn find(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        match self.live.get(&id) {
            Some(record) => Ok(Some(record.clone())),
            None => self.archive.get(id),
        }
    }

    /// Every job not yet ended, in submission order.
    pub fn iter(&self) -> impl Iterator<Item = &JobRecord> {
        self.live.values()
    }

    /// How many jobs have not ended.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether every job has ended.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// A count that grows by one with every record put in the table and
    /// every change applied to it: a reader that saw the same count before
    /// saw the same jobs, so what it decided from them still holds.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The jobs changed since the table's [`changes`](Jobs::changes) was
    /// `count`, one id per change, oldest first (an id repeats when its job
    /// changed more than once); every other job is as it was then. `None`
    /// when the table cannot say: more than [`CHANGE_LOG`] changes since,
    /// or a count this table never had.
    pub fn changed_since(&self, count: u64) -> Option<impl Iterator<Item = u64> + '_> {
        let behind = usize::try_from(self.changes.checked_sub(count)?).ok()?;
        let from = self.log.len().checked_sub(behind)?;
        Some(self.log.range(from..).copied())
    }

    /// Where ended jobs are.
    pub fn archive(&self) -> &Arc<Archive> {
        &self.archive
    }

    /// Applies a committed change. A job's end moves it to the archive.
    pub fn apply(&mut self, change: &Change) {
        if let Change::Accepted(record) = change {
            self.insert((**record).clone());
            return;
        }
        let id = change.job();
        self.changed(id);
        let Some(record) = self.live.get_mut(&id) else {
            return;
        };
        record.apply(change);
        if record.state.has_ended()
            && let Some(record) = self.live.remove(&id)
        {
            self.archive.keep(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use billet_provider::TrustClass;
    use billet_scheduler::{FailReason, Outcome};

    use super::*;
    use crate::api::JobView;
    use crate::record::{JobState, NewJob, Verdict};

    fn new_job(key: Option<&str>) -> NewJob {
        NewJob {
            command: vec!["true".into()],
            labels: vec![],
            trust: TrustClass::Trusted,
            timeout: None,
            key: key.map(str::to_owned),
            pinned: None,
        }
    }

    /// Job `id`, from memory or the archive.
    fn get(jobs: &Jobs, id: u64) -> Option<JobRecord> {
        jobs.find(id).unwrap()
    }

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    // H14: every record put in the table and every change applied to it
    // moves its count, so a reader that kept the count knows whether what it
    // decided from the table still holds.
    #[test]
    fn h14_the_table_counts_its_changes() {
        let records = vec![
            JobRecord::accepted(1, new_job(None), t(1)),
            JobRecord::accepted(2, new_job(None), t(1)),
        ];
        let mut jobs = Jobs::from_records(records);
        assert_eq!(jobs.changes(), 2);
        jobs.apply(&Change::Accepted(Box::new(JobRecord::accepted(
            3,
            new_job(None),
            t(2),
        ))));
        assert_eq!(jobs.changes(), 3);
        jobs.apply(&Change::Placed {
            id: 1,
            pool: "linux".into(),
            at: t(3),
        });
        assert_eq!(jobs.changes(), 4);
        assert_eq!(Jobs::default().changes(), 0);
    }

    // H14: the table names the jobs each change since a count was to, in
    // order, and says when it cannot (too far back, or a count it never had).
    #[test]
    fn h14_the_table_names_what_changed_since_a_count() {
        let since =
            |jobs: &Jobs, count| jobs.changed_since(count).map(Iterator::collect::<Vec<u64>>);
        let mut jobs = Jobs::from_records(vec![JobRecord::accepted(1, new_job(None), t(1))]);
        assert_eq!(since(&jobs, 0), Some(vec![1]));
        assert_eq!(since(&jobs, 1), Some(vec![]));
        assert_eq!(since(&jobs, 2), None, "a count the table never had");
        jobs.apply(&Change::Accepted(Box::new(JobRecord::accepted(
            2,
            new_job(None),
            t(2),
        ))));
        jobs.apply(&Change::Placed {
            id: 1,
            pool: "linux".into(),
            at: t(3),
        });
        // A change to a job the table does not hold is counted and named.
        jobs.apply(&Change::Placed {
            id: 9,
            pool: "linux".into(),
            at: t(3),
        });
        assert_eq!(since(&jobs, 0), Some(vec![1, 2, 1, 9]));
        assert_eq!(since(&jobs, 2), Some(vec![1, 9]));
        // Past the log's bound, only the last CHANGE_LOG are named.
        for _ in 0..CHANGE_LOG {
            jobs.apply(&Change::Placed {
                id: 2,
                pool: "linux".into(),
                at: t(4),
            });
        }
        let count = jobs.changes();
        assert_eq!(
            since(&jobs, count - CHANGE_LOG as u64).map(|ids| ids.len()),
            Some(CHANGE_LOG)
        );
        assert_eq!(
            since(&jobs, count - CHANGE_LOG as u64 - 1),
            None,
            "too far back"
        );
    }

    // L4, L6: a job's changes, applied in order, give the states the API shows.
    #[test]
    fn l4_a_job_moves_through_its_states() {
        let mut jobs = Jobs::default();
        assert!(jobs.is_empty());
        jobs.apply(&Change::Accepted(Box::new(JobRecord::accepted(
            1,
            new_job(Some("k")),
            t(1),
        ))));
        jobs.apply(&Change::Accepted(Box::new(JobRecord::accepted(
            2,
            new_job(None),
            t(2),
        ))));
        assert_eq!(jobs.len(), 2);
        assert!(!jobs.is_empty());
        // Accepting an id again replaces its record (a restart's store
        // holds each id once; this keeps the table a function of it).
        let mut again = JobRecord::accepted(2, new_job(None), t(2));
        again.labels = vec!["again".into()];
        jobs.apply(&Change::Accepted(Box::new(again)));
        assert_eq!(jobs.len(), 2);
        assert_eq!(get(&jobs, 2).unwrap().labels, ["again"]);
        assert_eq!(get(&jobs, 3), None);
        assert_eq!(get(&jobs, 0), None);
        jobs.apply(&Change::Placed {
            id: 1,
            pool: "linux".into(),
            at: t(3),
        });
        let job = get(&jobs, 1).unwrap();
        assert_eq!(job.state, JobState::Running);
        assert_eq!(job.pool.as_deref(), Some("linux"));
        assert_eq!(job.started_at, Some(t(3)));
        jobs.apply(&Change::Backed {
            id: 1,
            pool: "linux".into(),
            instance: "c1".into(),
            at: t(4),
        });
        let job = get(&jobs, 1).unwrap();
        assert_eq!(job.instance.as_deref(), Some("c1"));
        assert_eq!(job.started_at, Some(t(3)), "the lease's start is kept");
        let finished = Verdict::from(&Outcome::Finished { exit_code: 3 });
        jobs.apply(&Change::Decided {
            id: 1,
            verdict: finished.clone(),
        });
        let job = get(&jobs, 1).unwrap();
        assert_eq!(job.state, JobState::Running, "shown once destroyed");
        assert_eq!(job.decided(), Some(&finished));
        assert_eq!(job.outcome(), None, "not shown while it runs");
        jobs.apply(&Change::Ended {
            id: 1,
            verdict: finished.clone(),
            at: t(5),
        });
        let view = JobView::of(&get(&jobs, 1).unwrap());
        assert_eq!(view.state, JobState::Finished);
        assert_eq!(view.exit_code, Some(3));
        assert_eq!(view.reason, None);
        assert_eq!(view.ended_at.as_deref(), Some("1970-01-01T00:00:05.000Z"));
        let ended = get(&jobs, 1).unwrap();
        assert_eq!(ended.decided(), None);
        assert_eq!(ended.outcome(), Some(&finished));
        jobs.apply(&Change::CancelRequested { id: 2 });
        assert!(get(&jobs, 2).unwrap().cancel_requested);
        jobs.apply(&Change::Ended {
            id: 2,
            verdict: Verdict::from(&Outcome::Cancelled),
            at: t(6),
        });
        assert_eq!(get(&jobs, 2).unwrap().state, JobState::Cancelled);
        // Both ended: neither is in memory, both are found (L12).
        assert!(jobs.is_empty());
        assert_eq!(jobs.iter().count(), 0);
        assert_eq!(jobs.live(1), None);
        assert_eq!(jobs.archive().by_key("k").unwrap().map(|r| r.id), Some(1));
    }

    // L6: at a restart an unfinished job holds no lease until adopted.
    #[test]
    fn l6_requeued_jobs_lose_their_lease_not_where_they_held_it() {
        let mut jobs = Jobs::from_records(vec![JobRecord::accepted(7, new_job(None), t(1))]);
        assert_eq!(get(&jobs, 7).map(|r| r.id), Some(7));
        assert_eq!(get(&jobs, 6), None);
        assert_eq!(get(&jobs, 8), None);
        jobs.apply(&Change::Backed {
            id: 7,
            pool: "p".into(),
            instance: "i".into(),
            at: t(2),
        });
        assert_eq!(get(&jobs, 7).unwrap().started_at, Some(t(2)));
        jobs.apply(&Change::Requeued { id: 7 });
        let job = get(&jobs, 7).unwrap();
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(job.pool.as_deref(), Some("p"), "where it held a lease");
        assert_eq!(job.instance.as_deref(), Some("i"));
        assert_eq!(job.started_at, Some(t(2)));
        let failed = Verdict::from(&Outcome::Failed {
            reason: FailReason::TimedOut,
        });
        assert_eq!(failed.state, JobState::Failed);
        assert_eq!(failed.reason.as_deref(), Some("timed out"));
        // A change for a job the table does not hold changes nothing.
        jobs.apply(&Change::CancelRequested { id: 99 });
        assert_eq!(jobs.len(), 1);
    }
}
