//! Serving a job's kept output over HTTP (`GET /v1/jobs/{id}/output`), and
//! following it while the job runs.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use super::OutputStore;

/// How often a follower of a job's output looks for more while the job
/// runs.
pub const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// The most `follow` readers of jobs' output served at once (L23): each
/// holds a connection and looks for more every [`FOLLOW_POLL`] for as long
/// as its job runs (at most its timeout). Past it a `follow` answers `503`
/// with `Retry-After`; reading what is kept so far is not bounded by it.
pub const MAX_FOLLOWS: usize = 256;

/// One of the [`MAX_FOLLOWS`] slots, held by a `follow` body until it ends.
#[derive(Debug)]
pub struct FollowSlot {
    _permit: OwnedSemaphorePermit,
}

impl OutputStore {
    /// A slot to follow a job's output, or `None` when [`MAX_FOLLOWS`]
    /// readers already follow.
    pub fn follow_slot(&self) -> Option<FollowSlot> {
        Arc::clone(&self.follows)
            .try_acquire_owned()
            .ok()
            .map(|permit| FollowSlot { _permit: permit })
    }
}

/// The body of `GET /v1/jobs/{id}/output`: job `job`'s kept output in
/// pieces of at most [`OUTPUT_CHUNK`](billet_provider::OUTPUT_CHUNK); when
/// `follow`, then what is added, looked for every [`FOLLOW_POLL`], until
/// `ended` says the job has ended and no capture of it is under way. A
/// follower holds its `slot` until the body ends or is dropped.
pub fn serve(
    store: Arc<OutputStore>,
    job: u64,
    follow: Option<FollowSlot>,
    ended: impl Fn() -> bool + Send + Sync + 'static,
) -> impl futures::Stream<Item = io::Result<Vec<u8>>> + Send + 'static {
    let reader = Follower {
        store,
        job,
        follow,
        file: None,
        last: false,
    };
    futures::stream::unfold(Some((reader, ended)), |state| async move {
        let (mut reader, ended) = state?;
        match reader.next(&ended).await {
            Ok(Some(piece)) => Some((Ok(piece), Some((reader, ended)))),
            Ok(None) => None,
            // The error is the body's last item.
            Err(err) => Some((Err(err), None)),
        }
    })
}

/// One reader of a job's output file.
struct Follower {
    store: Arc<OutputStore>,
    job: u64,
    /// Set for a follower: the slot it holds.
    follow: Option<FollowSlot>,
    /// Opened once the file is there (a capture makes it at its first
    /// byte), and read on from where it is; opened and read on tokio's
    /// blocking threads, never on the runtime's workers (L22).
    file: Option<tokio::fs::File>,
    /// Set once nothing more will come: what is read from here on is the
    /// last of it.
    last: bool,
}

impl Follower {
    async fn next(&mut self, ended: &(impl Fn() -> bool + Sync)) -> io::Result<Option<Vec<u8>>> {
        use tokio::io::AsyncReadExt;
        loop {
            if self.file.is_none() {
                match tokio::fs::File::open(self.store.path(self.job)).await {
                    Ok(file) => self.file = Some(file),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
            if let Some(file) = self.file.as_mut() {
                let mut piece = vec![0; billet_provider::OUTPUT_CHUNK];
                let n = file.read(&mut piece).await?;
                if n > 0 {
                    piece.truncate(n);
                    return Ok(Some(piece));
                }
            }
            if self.follow.is_none() || self.last {
                return Ok(None);
            }
            if ended() && !self.store.capturing(self.job) {
                // Read to the end once more: the capture may have written
                // since the last read.
                self.last = true;
                continue;
            }
            tokio::time::sleep(FOLLOW_POLL).await;
        }
    }
}
