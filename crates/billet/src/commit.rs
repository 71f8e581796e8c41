//! The writer: one thread that commits batches of changes to the store, in
//! order, and only then applies them to the table and answers the requests
//! waiting on them (L6).
//!
//! Batches that arrive while a commit is under way are committed together,
//! in one transaction (group commit): under load, one `fsync` answers many
//! requests.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use parking_lot::RwLock;
use tokio::sync::mpsc::UnboundedSender;

use crate::jobs::{Change, Jobs};
use crate::store::{Store, StoreError};

/// The most batches committed in one transaction.
const MAX_GROUP: usize = 4096;

/// Run once the batch it came with is committed and applied, with the table
/// as it then is: how a request is answered only after its commit.
pub(crate) type Reply = Box<dyn FnOnce(&Jobs) + Send>;

/// Changes to commit together, and the replies that wait on them.
pub(crate) struct Batch {
    /// The batch's number: 1, 2, ... in the order sent.
    pub(crate) seq: u64,
    pub(crate) changes: Vec<Change>,
    pub(crate) replies: Vec<Reply>,
}

/// What the writer tells the engine.
#[derive(Debug)]
pub(crate) enum Written {
    /// Every batch up to this number is committed and applied.
    Committed(u64),
    /// A commit failed: nothing of it was applied, and the writer stopped.
    Failed(StoreError),
}

/// Starts the writer over `store` and `jobs`; it stops when every sender of
/// batches is dropped (after committing what it was sent) or a commit fails.
pub(crate) fn spawn(
    mut store: Store,
    jobs: Arc<RwLock<Jobs>>,
    batches: mpsc::Receiver<Batch>,
    written: UnboundedSender<Written>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("billet-store".to_owned())
        .spawn(move || {
            let mut group = Vec::new();
            let mut changes = Vec::new();
            while let Ok(first) = batches.recv() {
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
                }
                if let Err(error) = store.commit(&changes) {
                    tracing::error!(%error, "the store failed to commit; stopping");
                    let _ = written.send(Written::Failed(error));
                    return;
                }
                let last = group.last().map_or(0, |batch| batch.seq);
                {
                    let mut table = jobs.write();
                    for change in &changes {
                        table.apply(change);
                    }
                }
                let table = jobs.read();
                for batch in group.drain(..) {
                    for reply in batch.replies {
                        reply(&table);
                    }
                }
                drop(table);
                if written.send(Written::Committed(last)).is_err() {
                    return;
                }
            }
        })
}
