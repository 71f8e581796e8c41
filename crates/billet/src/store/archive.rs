//! [`Archive`]: ended jobs, once they have left the service's memory (L12).
//!
//! The service keeps in memory only the jobs that have not ended; a job's
//! end, once committed, moves it here. A durable store's archive is the
//! database itself, read through connections of its own (SQLite's WAL lets
//! them read while the writer commits): one the HTTP readers share, and one
//! for the engine's lookups by key alone, so that no reader, however busy,
//! makes the engine wait (L22); a store in memory keeps its
//! ended jobs in maps, so that it still answers for them (it is the store
//! that measures what durability costs, not one a fleet runs on).
//!
//! Every read is bounded: one job by id or key, or one page of at most the
//! number of jobs asked, found through an index, never a scan of the table.
//! Pruning (what `--retain` removes) goes through [`super::Store::prune`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use rusqlite::{Connection, OptionalExtension, params};

use super::rows::{self, COLUMNS};
use super::{StoreError, id};
use crate::record::JobRecord;
use crate::record::JobState;

/// How long a read of the archive waits for SQLite's own locks (a
/// checkpoint, a recovery) before it answers an error: reads in WAL mode
/// otherwise never wait for the writer.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// Ended jobs, by id and by idempotency key, and pages of them in id order.
#[derive(Debug)]
pub struct Archive {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Memory(Mutex<Ended>),
    Sqlite {
        /// The readers' connection: jobs by id, and pages.
        conn: Mutex<Connection>,
        /// The engine's: jobs by key, nothing else (L22).
        keys: Mutex<Connection>,
        path: PathBuf,
    },
}

/// A store in memory's ended jobs.
#[derive(Debug, Default)]
struct Ended {
    jobs: BTreeMap<u64, JobRecord>,
    keys: HashMap<String, u64>,
    /// `(ended_at, id)`: the order retention removes them in.
    by_end: BTreeSet<(SystemTime, u64)>,
}

impl Archive {
    /// An archive in memory, empty.
    pub(crate) fn memory() -> Archive {
        Archive {
            inner: Inner::Memory(Mutex::new(Ended::default())),
        }
    }

    /// The archive of the database at `path`, read through two connections
    /// of its own that never write: the readers' and the engine's (L22).
    pub(super) fn sqlite(path: &Path) -> Result<Archive, StoreError> {
        let sqlite = |source| StoreError::Sqlite {
            path: path.to_owned(),
            source,
        };
        let open = || -> Result<Connection, StoreError> {
            let conn = Connection::open(path).map_err(sqlite)?;
            conn.execute_batch("PRAGMA query_only = ON;")
                .map_err(sqlite)?;
            conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
            Ok(conn)
        };
        Ok(Archive {
            inner: Inner::Sqlite {
                conn: Mutex::new(open()?),
                keys: Mutex::new(open()?),
                path: path.to_owned(),
            },
        })
    }

    /// Holds the readers' connection until the guard is dropped: what a
    /// reader at full tilt does to the others (L22's test).
    #[cfg(test)]
    pub(crate) fn hold_readers(&self) -> Option<parking_lot::MutexGuard<'_, Connection>> {
        match &self.inner {
            Inner::Memory(_) => None,
            Inner::Sqlite { conn, .. } => Some(conn.lock()),
        }
    }

    /// Ended job `id`, if the archive holds it.
    pub fn get(&self, id: u64) -> Result<Option<JobRecord>, StoreError> {
        match &self.inner {
            Inner::Memory(ended) => Ok(ended.lock().jobs.get(&id).cloned()),
            Inner::Sqlite { conn, path, .. } => conn
                .lock()
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM jobs WHERE id = ?1 AND ended_at IS NOT NULL"
                ))
                .and_then(|mut statement| {
                    statement
                        .query_row(params![self::id(id)], rows::record)
                        .optional()
                })
                .map_err(|source| read_error(path, source)),
        }
    }

    /// The job accepted with idempotency key `key`. A durable store's archive
    /// answers for every committed job, ended or not; one in memory, for the
    /// ended jobs it holds. Either way a job whose end was just committed is
    /// found here by then.
    pub fn by_key(&self, key: &str) -> Result<Option<JobRecord>, StoreError> {
        match &self.inner {
            Inner::Memory(ended) => {
                let ended = ended.lock();
                Ok(ended
                    .keys
                    .get(key)
                    .and_then(|id| ended.jobs.get(id))
                    .cloned())
            }
            Inner::Sqlite { keys, path, .. } => keys
                .lock()
                .prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE key = ?1"))
                .and_then(|mut statement| {
                    statement.query_row(params![key], rows::record).optional()
                })
                .map_err(|source| read_error(path, source)),
        }
    }

    /// At most `limit` ended jobs with ids past `after`, in id order; only
    /// those in `state` when it is given (an ended state: no other is here).
    pub fn page(
        &self,
        after: u64,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<Vec<JobRecord>, StoreError> {
        match &self.inner {
            Inner::Memory(ended) => Ok(ended
                .lock()
                .jobs
                .range((Bound::Excluded(after), Bound::Unbounded))
                .map(|(_, record)| record)
                .filter(|record| state.is_none_or(|state| record.state == state))
                .take(limit)
                .cloned()
                .collect()),
            Inner::Sqlite { conn, path, .. } => {
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let conn = conn.lock();
                let read = || -> rusqlite::Result<Vec<JobRecord>> {
                    // Each form is answered from an index: the primary key, or
                    // the ended jobs' (state, id).
                    match state {
                        None => conn
                            .prepare_cached(&format!(
                                "SELECT {COLUMNS} FROM jobs
                                 WHERE id > ?1 AND ended_at IS NOT NULL ORDER BY id LIMIT ?2"
                            ))?
                            .query_map(params![id(after), limit], rows::record)?
                            .collect(),
                        Some(state) => conn
                            .prepare_cached(&format!(
                                "SELECT {COLUMNS} FROM jobs INDEXED BY jobs_ended_by_state
                                 WHERE state = ?3 AND id > ?1 AND ended_at IS NOT NULL
                                 ORDER BY id LIMIT ?2"
                            ))?
                            .query_map(params![id(after), limit, state.as_str()], rows::record)?
                            .collect(),
                    }
                };
                read().map_err(|source| read_error(path, source))
            }
        }
    }

    /// Takes a job whose end was just committed and applied: kept by an
    /// archive in memory, dropped by a durable one (the database has it).
    pub(crate) fn keep(&self, record: JobRecord) {
        if let Inner::Memory(ended) = &self.inner {
            let mut ended = ended.lock();
            if let Some(key) = &record.key {
                ended.keys.insert(key.clone(), record.id);
            }
            if let Some(at) = record.ended_at {
                ended.by_end.insert((at, record.id));
            }
            ended.jobs.insert(record.id, record);
        }
    }

    /// An archive in memory: removes at most `max` of the jobs that ended
    /// before `before`, earliest end first, with their keys; answers their
    /// ids. A durable archive removes nothing here.
    pub(super) fn prune_memory(&self, before: SystemTime, max: usize) -> Vec<u64> {
        let Inner::Memory(ended) = &self.inner else {
            return Vec::new();
        };
        let mut ended = ended.lock();
        let due: Vec<(SystemTime, u64)> = ended
            .by_end
            .range(..(before, 0))
            .take(max)
            .copied()
            .collect();
        for entry in &due {
            ended.by_end.remove(entry);
            if let Some(record) = ended.jobs.remove(&entry.1)
                && let Some(key) = record.key
            {
                ended.keys.remove(&key);
            }
        }
        due.into_iter().map(|(_, id)| id).collect()
    }
}

fn read_error(path: &Path, source: rusqlite::Error) -> StoreError {
    StoreError::Sqlite {
        path: path.to_owned(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use billet_provider::TrustClass;
    use billet_scheduler::Outcome;

    use super::*;
    use crate::jobs::Jobs;
    use crate::record::NewJob;
    use crate::record::{Change, Verdict};
    use crate::store::Store;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn accepted(id: u64) -> Change {
        Change::Accepted(Box::new(JobRecord::accepted(
            id,
            NewJob {
                command: vec!["true".into()],
                labels: vec![],
                trust: TrustClass::Trusted,
                timeout: None,
                key: Some(format!("key-{id}")),
                pinned: None,
            },
            t(id),
        )))
    }

    fn ended(id: u64, outcome: &Outcome, at: u64) -> Change {
        Change::Ended {
            id,
            verdict: Verdict::from(outcome),
            at: t(at),
        }
    }

    fn ids(records: &[JobRecord]) -> Vec<u64> {
        records.iter().map(|record| record.id).collect()
    }

    /// Jobs 1 to 10 committed; the odd ones ended at 100 + id (finished,
    /// but 5 and 9 failed), the even ones still queued.
    fn changes() -> Vec<Change> {
        let mut changes: Vec<Change> = (1..=10).map(accepted).collect();
        for id in [1, 3, 5, 7, 9] {
            let outcome = if id % 4 == 1 && id > 1 {
                Outcome::Failed {
                    reason: billet_scheduler::FailReason::TimedOut,
                }
            } else {
                Outcome::Finished { exit_code: 0 }
            };
            changes.push(ended(id, &outcome, 100 + id));
        }
        changes
    }

    // L22: a reader holding the readers' connection (a page at full tilt)
    // never holds up the engine's lookup by key, which has its own: it
    // answers while the readers' connection stays held. (Bounded by a wall
    // deadline only so that a broken split fails rather than hangs.)
    #[test]
    fn l22_a_busy_reader_never_holds_up_a_lookup_by_key() {
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        store.commit(&changes()).unwrap();
        let archive = store.archive();
        let held = archive.hold_readers().expect("a durable archive");
        let (answer, answered) = std::sync::mpsc::channel();
        let engine = std::sync::Arc::clone(&archive);
        std::thread::spawn(move || {
            let _ = answer.send(engine.by_key("key-5").map(|r| r.map(|r| r.id)));
        });
        let found = answered
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the lookup by key waited for the readers' connection");
        assert_eq!(found.unwrap(), Some(5));
        drop(held);
        assert_eq!(archive.get(5).unwrap().map(|r| r.id), Some(5));
        assert!(Store::memory().archive().hold_readers().is_none());
    }

    // L12: a durable store's archive and one in memory answer alike: ended
    // jobs by id and key, pages in id order (of one state, through its
    // index), nothing for jobs not ended; retention removes the earliest
    // ended first, keys with them, and their ids are never given again.
    #[test]
    fn l12_both_archives_answer_and_prune_alike() {
        let dir = crate::store::private_tempdir();
        let (durable, _) = Store::open(dir.path()).unwrap();
        for mut store in [durable, Store::memory()] {
            let mut table = Jobs::over(store.archive(), Vec::new());
            let changes = changes();
            store.commit(&changes).unwrap();
            for change in &changes {
                table.apply(change);
            }
            let archive = store.archive();
            assert_eq!(table.len(), 5, "the even jobs stay in memory");
            assert_eq!(
                archive.get(3).unwrap().map(|r| r.state),
                Some(JobState::Finished)
            );
            assert_eq!(archive.get(4).unwrap(), None, "not ended");
            assert_eq!(archive.get(11).unwrap(), None);
            assert_eq!(archive.by_key("key-5").unwrap().map(|r| r.id), Some(5));
            assert_eq!(archive.by_key("key-none").unwrap(), None);
            assert_eq!(ids(&archive.page(0, None, 3).unwrap()), [1, 3, 5]);
            assert_eq!(ids(&archive.page(5, None, 3).unwrap()), [7, 9]);
            assert_eq!(ids(&archive.page(9, None, 3).unwrap()), Vec::<u64>::new());
            let failed = archive.page(0, Some(JobState::Failed), 10).unwrap();
            assert_eq!(ids(&failed), [5, 9]);
            assert_eq!(
                ids(&archive.page(5, Some(JobState::Failed), 10).unwrap()),
                [9]
            );
            let finished = archive.page(0, Some(JobState::Finished), 2).unwrap();
            assert_eq!(ids(&finished), [1, 3]);
            assert!(
                archive
                    .page(0, Some(JobState::Queued), 10)
                    .unwrap()
                    .is_empty()
            );

            // Ended before 104: jobs 1 and 3, at most one per transaction.
            assert_eq!(store.prune(t(104), 1).unwrap().len(), 1);
            assert_eq!(archive.get(1).unwrap(), None, "the earliest end goes first");
            assert!(archive.get(3).unwrap().is_some());
            assert_eq!(store.prune(t(104), 10).unwrap().len(), 1);
            assert_eq!(store.prune(t(104), 10).unwrap().len(), 0);
            assert_eq!(
                archive.by_key("key-3").unwrap(),
                None,
                "its key goes with it"
            );
            assert_eq!(ids(&archive.page(0, None, 10).unwrap()), [5, 7, 9]);
            // Jobs not ended are never pruned, whatever their age.
            assert_eq!(store.prune(t(10_000), 10).unwrap().len(), 3);
            assert!(archive.page(0, None, 10).unwrap().is_empty());
            assert_eq!(table.len(), 5);
            assert_eq!(store.last_id(), 10);
        }
    }

    // L12: the highest id pruning removed is kept, so a store whose last
    // jobs were all pruned still gives the next job an id past them; the
    // pages pruned rows held are reused rather than the file growing.
    #[test]
    fn l12_pruned_ids_are_never_given_again_and_pages_are_reused() {
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        let changes = changes();
        store.commit(&changes).unwrap();
        store
            .commit(&[ended(10, &Outcome::Cancelled, 120)])
            .unwrap();
        assert_eq!(store.prune(t(200), 100).unwrap().len(), 6);
        drop(store);
        let (store, records) = Store::open(dir.path()).unwrap();
        assert_eq!(ids(&records), [2, 4, 6, 8]);
        assert_eq!(
            store.last_id(),
            10,
            "job 10 was pruned; its id is not reused"
        );
        drop(store);

        // Many jobs ended and pruned, again and again: the file stops growing.
        let (mut store, _) = Store::open(dir.path()).unwrap();
        let path = dir.path().join(crate::store::DATABASE_FILE);
        let mut sizes = Vec::new();
        let mut next = 11;
        for round in 0..4u64 {
            let mut batch = Vec::new();
            for id in next..next + 500 {
                batch.push(accepted(id));
                batch.push(ended(
                    id,
                    &Outcome::Finished { exit_code: 0 },
                    1_000 + round,
                ));
            }
            next += 500;
            store.commit(&batch).unwrap();
            while !store.prune(t(1_000 + round + 1), 256).unwrap().is_empty() {}
            // Checkpoint the WAL so the main file holds what was written.
            if let Some((conn, _)) = &store.db {
                conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
                    .unwrap();
            }
            sizes.push(std::fs::metadata(&path).unwrap().len());
        }
        assert_eq!(store.last_id(), next - 1);
        assert!(
            sizes[3] <= sizes[1],
            "the file grew while every round's rows were pruned: {sizes:?}"
        );
    }
}
