//! The writer: one thread that commits batches of changes to the store, in
//! order, and only then applies them to the table and answers the requests
//! waiting on them (L6).
//!
//! Batches that arrive while a commit is under way are committed together,
//! in one transaction (group commit): under load, one `fsync` answers many
//! requests.
//!
//! Retention (L12): a batch may carry a cutoff; the writer then removes the
//! jobs that ended before it, [`PRUNE_BATCH`] at a time, each its own short
//! transaction, and only while no batch is waiting: a commit waits behind at
//! most one such removal.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use parking_lot::RwLock;
use tokio::sync::mpsc::UnboundedSender;

use crate::jobs::Jobs;
use crate::output::OutputStore;
use crate::record::Change;
use crate::store::{Store, StoreError};

/// The most batches committed in one transaction.
const MAX_GROUP: usize = 4096;

/// The most ended jobs one retention transaction removes.
pub(crate) const PRUNE_BATCH: usize = 256;

/// Run once the batch it came with is committed and applied, with the table
/// as it then is: how a request is answered only after its commit.
pub(crate) type Reply = Box<dyn FnOnce(&Jobs) + Send>;

/// Changes to commit together, and the replies that wait on them.
pub(crate) struct Batch {
    /// The batch's number: 1, 2, ... in the order sent.
    pub(crate) seq: u64,
    pub(crate) changes: Vec<Change>,
    pub(crate) replies: Vec<Reply>,
    /// Jobs that ended before this are to be removed (L12).
    pub(crate) prune: Option<SystemTime>,
}

/// What the writer tells the engine.
#[derive(Debug)]
pub(crate) enum Written {
    /// Every batch up to this number is committed and applied.
    Committed(u64),
    /// A commit failed: nothing of it was applied, and the writer stopped.
    Failed(StoreError),
    /// A commit failed for lack of space (L25): nothing of it was applied,
    /// and the writer tries it again every [`FULL_RETRY`] until it goes
    /// through (then [`Written::Committed`] says so). Carries the error.
    Full(String),
}

/// How often the writer tries again a commit that failed for lack of space
/// (L25).
pub(crate) const FULL_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Where the engine's batches go: to the writer thread, or, for a store in
/// memory that commits at once, committed on the engine's own task (a thread
/// there would add nothing but two wake-ups per batch). The engine hears of
/// a thread's commits through `written`, in order, and of an inline commit
/// from [`Writer::send`] itself; of a failed commit, through `written`.
pub(crate) enum Writer {
    /// The writer thread, and the channel its batches go by.
    Thread {
        batches: mpsc::Sender<Batch>,
        thread: JoinHandle<()>,
    },
    /// Committed as sent.
    Immediate(Box<Immediate>),
}

/// A writer that commits on its caller's task.
pub(crate) struct Immediate {
    store: Store,
    jobs: Arc<RwLock<Jobs>>,
    /// Where the output of the jobs retention removes is removed too.
    output: Option<Arc<OutputStore>>,
    written: UnboundedSender<Written>,
    /// The cutoff retention is still working towards, one batch of it per
    /// batch sent.
    pruning: Option<SystemTime>,
    /// Set once a commit failed: nothing more is committed.
    failed: bool,
}

impl Writer {
    /// A writer for `store`: inline when it is in memory with no delay,
    /// else a thread ([`spawn`]). The output of each job retention removes
    /// is removed from `output` once that removal is committed (L15).
    pub(crate) fn start(
        store: Store,
        jobs: Arc<RwLock<Jobs>>,
        written: UnboundedSender<Written>,
        output: Option<Arc<OutputStore>>,
    ) -> std::io::Result<Writer> {
        if store.is_instant() {
            return Ok(Writer::Immediate(Box::new(Immediate {
                store,
                jobs,
                output,
                written,
                pruning: None,
                failed: false,
            })));
        }
        let (batches, inbox) = mpsc::channel();
        let thread = spawn(store, jobs, inbox, written, output)?;
        Ok(Writer::Thread { batches, thread })
    }

    /// Commits `batch`, after every batch sent before it. Answers the
    /// batch's number when it is committed (and applied, and its replies
    /// run) before this returns, as an instant store's is: that commit is
    /// not told through `written` again. Answers `None` when the commit
    /// comes later, told through `written`, and when it failed, which
    /// `written` tells too.
    pub(crate) fn send(&mut self, mut batch: Batch) -> Option<u64> {
        match self {
            // A writer that is gone reports why through `written`.
            Writer::Thread { batches, .. } => {
                let _ = batches.send(batch);
                None
            }
            Writer::Immediate(inline) => {
                let Immediate {
                    store,
                    jobs,
                    output,
                    written,
                    pruning,
                    failed,
                } = &mut **inline;
                if *failed {
                    return None;
                }
                let changes = std::mem::take(&mut batch.changes);
                let prune = batch.prune;
                let mut group = vec![batch];
                match commit_group(store, jobs, &changes, &mut group) {
                    Ok(seq) => {
                        *pruning = prune.or(*pruning);
                        if let Some(before) = *pruning {
                            *pruning = prune_some(store, output.as_deref(), before);
                        }
                        Some(seq)
                    }
                    Err(error) => {
                        *failed = true;
                        let _ = written.send(Written::Failed(error));
                        None
                    }
                }
            }
        }
    }

    /// Waits for the thread, if there is one, to commit what it was sent
    /// and end.
    pub(crate) fn finish(self) {
        if let Writer::Thread { batches, thread } = self {
            drop(batches);
            let _ = thread.join();
        }
    }
}

/// Commits `changes` (the changes of every batch of `group`, in order) in
/// one transaction, then applies them to the table and runs the group's
/// replies; answers the last batch's number.
fn commit_group(
    store: &mut Store,
    jobs: &RwLock<Jobs>,
    changes: &[Change],
    group: &mut Vec<Batch>,
) -> Result<u64, StoreError> {
    store.commit(changes)?;
    let last = group.last().map_or(0, |batch| batch.seq);
    {
        let mut table = jobs.write();
        for change in changes {
            table.apply(change);
        }
    }
    let table = jobs.read();
    for batch in group.drain(..) {
        for reply in batch.replies {
            reply(&table);
        }
    }
    Ok(last)
}

/// Starts the writer over `store` and `jobs`; it stops when every sender of
/// batches is dropped (after committing what it was sent) or a commit fails.
pub(crate) fn spawn(
    mut store: Store,
    jobs: Arc<RwLock<Jobs>>,
    batches: mpsc::Receiver<Batch>,
    written: UnboundedSender<Written>,
    output: Option<Arc<OutputStore>>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("billet-store".to_owned())
        .spawn(move || {
            let mut group = Vec::new();
            let mut changes = Vec::new();
            // The cutoff retention is still working towards, if any.
            let mut pruning: Option<SystemTime> = None;
            loop {
                let first = match pruning {
                    None => match batches.recv() {
                        Ok(batch) => batch,
                        Err(_) => return,
                    },
                    Some(before) => match batches.try_recv() {
                        Ok(batch) => batch,
                        Err(mpsc::TryRecvError::Empty) => {
                            pruning = prune_some(&mut store, output.as_deref(), before);
                            continue;
                        }
                        Err(mpsc::TryRecvError::Disconnected) => return,
                    },
                };
                group.push(first);
                while group.len() < MAX_GROUP {
                    match batches.try_recv() {
                        Ok(batch) => group.push(batch),
                        Err(_) => break,
                    }
                }
                changes.clear();
                for batch in &mut group {
                    changes.append(&mut batch.changes);
                    pruning = batch.prune.or(pruning);
                }
                // Set once the store said it is full, until a commit goes
                // through again (`/healthz` says it all along).
                let mut full = false;
                let last = loop {
                    match commit_group(&mut store, &jobs, &changes, &mut group) {
                        Ok(last) => break last,
                        Err(error) if error.is_full() => {
                            if !full {
                                tracing::error!(
                                    %error,
                                    "the store cannot commit for lack of space: new work is refused (507) \
                                     and the commit is tried again every {}s until space is freed",
                                    FULL_RETRY.as_secs()
                                );
                                let _ = written.send(Written::Full(error.to_string()));
                                full = true;
                            }
                            std::thread::sleep(FULL_RETRY);
                        }
                        Err(error) => {
                            tracing::error!(%error, "the store failed to commit; stopping");
                            let _ = written.send(Written::Failed(error));
                            return;
                        }
                    }
                };
                if full {
                    tracing::info!("the store commits again: new work is taken");
                }
                if written.send(Written::Committed(last)).is_err() {
                    return;
                }
            }
        })
}

/// One retention transaction, then the output of the jobs it removed:
/// answers the cutoff again while there may be more to remove, `None` once a
/// transaction removed less than a full batch or failed (said in the log;
/// the next cutoff tries again).
fn prune_some(
    store: &mut Store,
    output: Option<&OutputStore>,
    before: SystemTime,
) -> Option<SystemTime> {
    match store.prune(before, PRUNE_BATCH) {
        Ok(removed) => {
            tracing::debug!(
                removed = removed.len(),
                "ended jobs past their retention removed"
            );
            if let Some(output) = output {
                for &job in &removed {
                    output.remove(job);
                }
            }
            (removed.len() == PRUNE_BATCH).then_some(before)
        }
        Err(error) => {
            tracing::warn!(%error, "retention could not remove ended jobs; it tries again later");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::JobRecord;
    use crate::record::NewJob;
    use std::time::SystemTime;

    fn accepted(id: u64) -> Change {
        Change::Accepted(Box::new(JobRecord::accepted(
            id,
            NewJob {
                command: vec!["true".into()],
                labels: vec![],
                trust: billet_provider::TrustClass::Trusted,
                timeout: None,
                key: None,
                pinned: None,
            },
            SystemTime::UNIX_EPOCH,
        )))
    }

    // L6: batches waiting when the writer looks are committed together (one
    // transaction, at most MAX_GROUP batches), in order; each reply runs after
    // its batch is applied, and sees it.
    #[test]
    fn l6_waiting_batches_commit_together_and_replies_see_them() {
        let jobs = Arc::new(RwLock::new(Jobs::default()));
        let (batches, inbox) = mpsc::channel();
        let (written_tx, mut written) = tokio::sync::mpsc::unbounded_channel();
        let total = MAX_GROUP as u64 + 10;
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        for seq in 1..=total {
            let seen = Arc::clone(&seen);
            let reply: Reply = Box::new(move |table: &Jobs| {
                seen.lock().push(table.live(seq).map(|r| r.id));
            });
            batches
                .send(Batch {
                    seq,
                    changes: vec![accepted(seq)],
                    replies: vec![reply],
                    prune: None,
                })
                .unwrap();
        }
        drop(batches);
        let writer = spawn(Store::memory(), Arc::clone(&jobs), inbox, written_tx, None).unwrap();
        writer.join().unwrap();
        let mut committed = Vec::new();
        while let Ok(Written::Committed(seq)) = written.try_recv() {
            committed.push(seq);
        }
        assert_eq!(committed, [MAX_GROUP as u64, total]);
        let seen = seen.lock().clone();
        assert_eq!(seen.len(), total as usize);
        assert!(
            seen.iter()
                .enumerate()
                .all(|(i, id)| *id == Some(i as u64 + 1))
        );
        assert_eq!(jobs.read().len(), total as usize);
    }

    // L6, L12: a store in memory with no delay is written on the caller's
    // task: each batch is applied and answered as it is sent, and said
    // committed in order; a retention cutoff removes one PRUNE_BATCH per
    // batch sent after it, until done. A store with a delay, or a database,
    // gets the thread.
    // L6: `finish` returns only once the writer thread has committed what
    // it was sent, reported it, and ended (its hold on the table and its
    // sender of reports gone with it): a service that says it stopped holds
    // its store no more. The reply keeps the thread busy for a while, so a
    // `finish` that did not wait would return before the report.
    #[test]
    fn l6_finish_waits_for_the_thread_to_commit_what_it_was_sent_and_end() {
        let jobs: Arc<RwLock<Jobs>> = Arc::default();
        let (written_tx, mut written) = tokio::sync::mpsc::unbounded_channel();
        let mut writer = Writer::start(
            Store::slow_memory(std::time::Duration::from_millis(1)),
            Arc::clone(&jobs),
            written_tx,
            None,
        )
        .unwrap();
        let reply: Reply = Box::new(|_| std::thread::sleep(std::time::Duration::from_millis(500)));
        writer.send(Batch {
            seq: 1,
            changes: vec![accepted(1)],
            replies: vec![reply],
            prune: None,
        });
        writer.finish();
        assert!(
            matches!(written.try_recv(), Ok(Written::Committed(1))),
            "committed and reported before finish returned"
        );
        assert!(matches!(
            written.try_recv(),
            Err(tokio::sync::mpsc::error::TryRecvError::Disconnected)
        ));
        assert_eq!(Arc::strong_count(&jobs), 1, "the thread's hold is gone");
    }

    #[test]
    fn l6_an_instant_store_commits_as_each_batch_is_sent() {
        assert!(Store::memory().is_instant());
        assert!(!Store::slow_memory(std::time::Duration::from_millis(1)).is_instant());
        let mut thread = Writer::start(
            Store::slow_memory(std::time::Duration::from_millis(1)),
            Arc::default(),
            tokio::sync::mpsc::unbounded_channel().0,
            None,
        )
        .unwrap();
        assert!(matches!(thread, Writer::Thread { .. }));
        let later = thread.send(Batch {
            seq: 1,
            changes: vec![accepted(1)],
            replies: vec![],
            prune: None,
        });
        assert_eq!(later, None, "a thread's commit is told through `written`");
        thread.finish();

        let store = Store::memory();
        let archive = store.archive();
        let jobs = Arc::new(RwLock::new(Jobs::over(Arc::clone(&archive), Vec::new())));
        let (written_tx, mut written) = tokio::sync::mpsc::unbounded_channel();
        let mut writer = Writer::start(store, Arc::clone(&jobs), written_tx, None).unwrap();
        assert!(matches!(writer, Writer::Immediate(_)));
        let seen = Arc::new(parking_lot::Mutex::new(None));
        let reply: Reply = {
            let seen = Arc::clone(&seen);
            Box::new(move |table: &Jobs| *seen.lock() = Some(table.len()))
        };
        let total = PRUNE_BATCH as u64 + 3;
        let committed = writer.send(Batch {
            seq: 1,
            changes: ended_jobs(total),
            replies: vec![reply],
            prune: None,
        });
        assert_eq!(committed, Some(1), "committed before `send` returns");
        assert_eq!(*seen.lock(), Some(0), "ended jobs go to the archive");
        assert_eq!(archive.page(0, None, 10_000).unwrap().len(), total as usize);
        let cutoff = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        let committed = writer.send(Batch {
            seq: 2,
            changes: vec![],
            replies: vec![],
            prune: Some(cutoff),
        });
        assert_eq!(committed, Some(2));
        assert_eq!(
            archive.page(0, None, 10_000).unwrap().len(),
            3,
            "one batch pruned"
        );
        let committed = writer.send(Batch {
            seq: 3,
            changes: vec![accepted(total + 1)],
            replies: vec![],
            prune: None,
        });
        assert_eq!(committed, Some(3));
        assert!(
            written.try_recv().is_err(),
            "an instant commit is not told again"
        );
        assert!(
            archive.page(0, None, 10_000).unwrap().is_empty(),
            "the rest"
        );
        assert_eq!(jobs.read().len(), 1);
        writer.finish();
    }

    // L15: retention removes a pruned job's output with it, and no other's.
    #[test]
    fn l15_retention_removes_the_output_of_the_jobs_it_prunes() {
        let dir = crate::store::private_tempdir();
        let (mut store, _) = Store::open(dir.path()).unwrap();
        let output = OutputStore::open(dir.path(), store.identity(), 1 << 20).unwrap();
        store.commit(&ended_jobs(2)).unwrap();
        store.commit(&[accepted(3)]).unwrap();
        for job in 1..=3 {
            std::fs::write(output.path(job), b"kept").unwrap();
        }
        let early = SystemTime::UNIX_EPOCH;
        assert_eq!(prune_some(&mut store, Some(&output), early), None);
        assert!(
            output.path(1).exists() && output.path(2).exists(),
            "none due yet"
        );
        let cutoff = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        assert_eq!(prune_some(&mut store, Some(&output), cutoff), None);
        assert!(!output.path(1).exists());
        assert!(!output.path(2).exists());
        assert_eq!(output.kept(3).bytes, 4, "a job not ended keeps its output");
    }

    /// Jobs `1..=n` accepted and ended at the epoch.
    fn ended_jobs(n: u64) -> Vec<Change> {
        let mut changes: Vec<Change> = (1..=n).map(accepted).collect();
        changes.extend((1..=n).map(|id| Change::Ended {
            id,
            verdict: crate::record::Verdict::from(&billet_scheduler::Outcome::Cancelled),
            at: SystemTime::UNIX_EPOCH,
        }));
        changes
    }

    // L12: one retention transaction removes at most PRUNE_BATCH jobs and
    // asks for another only after a full one.
    #[test]
    fn l12_retention_goes_on_only_after_a_full_batch() {
        let mut store = Store::memory();
        let mut table = Jobs::over(store.archive(), Vec::new());
        let extra = 44;
        let changes = ended_jobs(PRUNE_BATCH as u64 + extra);
        store.commit(&changes).unwrap();
        for change in &changes {
            table.apply(change);
        }
        let cutoff = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1);
        assert_eq!(
            prune_some(&mut store, None, cutoff),
            Some(cutoff),
            "a full batch"
        );
        assert_eq!(
            store.archive().page(0, None, 1000).unwrap().len(),
            extra as usize
        );
        assert_eq!(
            prune_some(&mut store, None, cutoff),
            None,
            "the rest, then done"
        );
        assert!(store.archive().page(0, None, 1000).unwrap().is_empty());
        assert_eq!(prune_some(&mut store, None, cutoff), None);
    }

    // L12: a cutoff sent once is worked through to the end while the writer
    // is idle, a transaction at a time, with no further batch to prompt it.
    #[test]
    fn l12_the_writer_prunes_past_one_batch_while_idle() {
        let jobs = Arc::new(RwLock::new(Jobs::default()));
        let store = Store::memory();
        let archive = store.archive();
        *jobs.write() = Jobs::over(Arc::clone(&archive), Vec::new());
        let (batches, inbox) = mpsc::channel();
        let (written_tx, _written) = tokio::sync::mpsc::unbounded_channel();
        let total = 3 * PRUNE_BATCH as u64 + 7;
        batches
            .send(Batch {
                seq: 1,
                changes: ended_jobs(total),
                replies: vec![],
                prune: None,
            })
            .unwrap();
        let writer = spawn(store, Arc::clone(&jobs), inbox, written_tx, None).unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while archive.page(0, None, 10_000).unwrap().len() < total as usize {
            assert!(std::time::Instant::now() < until, "the jobs were not kept");
            std::thread::yield_now();
        }
        batches
            .send(Batch {
                seq: 2,
                changes: vec![],
                replies: vec![],
                prune: Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1)),
            })
            .unwrap();
        while !archive.page(0, None, 10_000).unwrap().is_empty() {
            assert!(
                std::time::Instant::now() < until,
                "retention stopped with jobs due: {} left",
                archive.page(0, None, 10_000).unwrap().len()
            );
            std::thread::yield_now();
        }
        drop(batches);
        writer.join().unwrap();
    }

    // L6: a commit that fails applies nothing, answers no one, reports the
    // failure and stops the writer.
    #[test]
    fn l6_a_failed_commit_applies_nothing() {
        let dir = crate::store::private_tempdir();
        let (store, _) = Store::open(dir.path()).unwrap();
        let jobs = Arc::new(RwLock::new(Jobs::default()));
        let (batches, inbox) = mpsc::channel();
        let (written_tx, mut written) = tokio::sync::mpsc::unbounded_channel();
        let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&answered);
        batches
            .send(Batch {
                seq: 1,
                // One id twice: the transaction fails on the second insert.
                changes: vec![accepted(1), accepted(1)],
                replies: vec![Box::new(move |_: &Jobs| {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                })],
                prune: None,
            })
            .unwrap();
        let writer = spawn(store, Arc::clone(&jobs), inbox, written_tx, None).unwrap();
        // It stops by itself, its channel still open; bounded, so a writer
        // that goes on fails the test rather than hangs it.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !writer.is_finished() {
            assert!(std::time::Instant::now() < until, "the writer went on");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        writer.join().unwrap();
        assert!(matches!(written.try_recv(), Ok(Written::Failed(_))));
        assert!(jobs.read().is_empty());
        assert!(!answered.load(std::sync::atomic::Ordering::SeqCst));
        drop(batches);
    }
}
