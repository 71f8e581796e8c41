//! Job output (L15): what each job's instance writes, captured while it runs
//! into the state directory, and served by `GET /v1/jobs/{id}/output`.
//!
//! # Where it is kept
//!
//! `STATE/output/ID.out` holds job `ID`'s output, as its backend's
//! [`Output`](billet_provider::Output) gives it (stdout and stderr in one
//! sequence). It holds at most the limit (`--output-limit`,
//! [`DEFAULT_OUTPUT_LIMIT`]); past it the capture stops, [`CUT_NOTICE`] is
//! appended, and `STATE/output/ID.cut` is made: the job's JSON then says
//! `output_truncated: true`. The files go with the job when retention
//! removes it.
//!
//! # Guarantees
//!
//! * **Captured while it runs.** A capture starts when the job's instance is
//!   launched, or first seen by an inventory (an instance adopted after a
//!   restart), and reads the instance's output as it is written.
//! * **Durable before destroy.** [`Capturing`] stands in front of each
//!   pool's provider: its `destroy` first lets the capture read to the end of
//!   what the instance wrote (at most [`FINISH_WAIT_STOPPED`] for an instance
//!   seen stopped, [`FINISH_WAIT`] for one that may still run; output still
//!   coming when that wait is over is cut and the cut said with
//!   [`LATE_CUT_NOTICE`]; an instance still
//!   running, as a cancelled job's is, gives what comes within [`SETTLE`] of
//!   the last byte, and then what a read opened again from the file's end
//!   gives within another [`SETTLE`]: a backend's follow that stalls at the
//!   end loses nothing), `fsync`s the file, and only then destroys. The engine
//!   commits a job's outcome before it asks the destroy (L6), so the output
//!   and the outcome are both on disk before the instance is gone.
//! * **A crash loses no more than the backend keeps.** After `kill -9`, the
//!   restarted service sees the instance again (the inventory) and resumes
//!   its capture from the file's length: what the crash interrupted is read
//!   again from the backend, which keeps it until the instance is destroyed.
//! * **Bounded.** One file per job of at most the limit plus the notice;
//!   one capture task per live instance, holding at most two
//!   [`OUTPUT_CHUNK`](billet_provider::OUTPUT_CHUNK)s at a time (what it
//!   gathered of the pieces ready for one write, and the next piece).

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use billet_provider::InstanceId;
use billet_scheduler::{Identity, InstanceName};
use parking_lot::Mutex;

mod capture;
mod capturing;
mod serving;

use capture::Live;
pub use capturing::Capturing;
pub use serving::{FOLLOW_POLL, FollowSlot, MAX_FOLLOWS, serve};

/// The most bytes of one job's output kept by default (`--output-limit`):
/// 64 MiB.
pub const DEFAULT_OUTPUT_LIMIT: u64 = 67_108_864;

/// What is appended to a job's output where the limit cut it.
pub const CUT_NOTICE: &str =
    "\n[billet: the output was cut here: the job wrote more than --output-limit]\n";

/// What is appended to a job's output where the budget of all jobs' output
/// cut it (L26).
pub const TOTAL_CUT_NOTICE: &str =
    "\n[billet: the output was cut here: the output kept of all jobs reached --output-total]\n";

/// What is appended to a job's output where it could not be written (a full
/// disk) until its instance was removed (L26).
pub const UNWRITTEN_CUT_NOTICE: &str =
    "\n[billet: the output was cut here: it could not be written to the state directory]\n";

/// The most bytes of all jobs' output kept at once by default
/// (`--output-total`): 8 GiB.
pub const DEFAULT_OUTPUT_TOTAL: u64 = 8 << 30;

/// The longest a destroy waits for its instance's capture to read to the
/// end of what the instance wrote, when the instance may still be running
/// (a cancelled job's, one timed out).
pub const FINISH_WAIT: Duration = Duration::from_secs(5);

/// The longest a destroy waits for the capture of an instance seen stopped
/// to read to the end of what it wrote: all of it is written, and a backend
/// may give a long output slowly (podman gives a log line per message, each
/// a trip between tasks).
pub const FINISH_WAIT_STOPPED: Duration = Duration::from_secs(60);

/// Past a finish's wait, the room left for the capture's last write and its
/// `fsync` before the destroy goes on without it.
const FINISH_SLACK: Duration = Duration::from_secs(1);

/// What is appended to a job's output where its instance was removed with
/// output still coming: the finish's wait ([`FINISH_WAIT`],
/// [`FINISH_WAIT_STOPPED`]) was over.
pub const LATE_CUT_NOTICE: &str =
    "\n[billet: the output was cut here: more was still coming when its instance was removed]\n";

/// Once a destroy asked the capture to finish: how long it waits for more
/// output after the last byte before it takes what it has.
pub const SETTLE: Duration = Duration::from_millis(200);

/// The pause before a capture opens its instance's output again after the
/// stream broke or could not be opened (the daemon restarted, the
/// connection cut): doubled on each failure in a row, up to
/// [`REOPEN_MAX`]. A capture retries as long as its instance may be there;
/// once a destroy asked it to finish, only until [`FINISH_WAIT`] has passed.
pub const REOPEN_FIRST: Duration = Duration::from_millis(100);

/// The longest pause between two opens of an instance's output.
pub const REOPEN_MAX: Duration = Duration::from_secs(5);

/// A size as `--output-limit` takes it: bytes, or a whole number with a
/// `KiB`, `MiB` or `GiB` suffix. At least one byte.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let shift = match unit.trim() {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        other => {
            return Err(format!(
                "{text:?}: the unit {other:?} is none of KiB, MiB, GiB (or none, for bytes)"
            ));
        }
    };
    let number: u64 = digits.parse().map_err(|_| {
        format!("{text:?} is not a size: a whole number of bytes, or of KiB, MiB or GiB")
    })?;
    let bytes = number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is more bytes than billet can count"))?;
    if bytes == 0 {
        return Err(format!("{text:?}: the limit must be at least one byte"));
    }
    Ok(bytes)
}

/// What is kept of one job's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kept {
    /// How many bytes of the job's output are kept (the notice not counted).
    pub bytes: u64,
    /// Whether the limit cut it.
    pub truncated: bool,
}

/// The output directory and the captures under way.
#[derive(Debug)]
pub struct OutputStore {
    dir: PathBuf,
    limit: u64,
    /// The store's identity: only instances named under it are this
    /// service's jobs'.
    identity: Option<String>,
    /// The last job whose instance may be named without an identity (a
    /// store made before identities): only those are taken as this store's.
    unnamed_through: Option<u64>,
    live: Mutex<HashMap<InstanceId, Live>>,
    /// The most bytes of all jobs' files at once (L26).
    total_limit: u64,
    /// The bytes of all jobs' files: counted at open, and as captures write
    /// and retention removes.
    total: std::sync::atomic::AtomicU64,
    /// Jobs whose output was cut where its cut could not be written (a full
    /// disk), with the bytes kept: said from memory until the service ends.
    unsaid: Mutex<HashMap<u64, u64>>,
    /// The `follow` readers' slots: at most [`MAX_FOLLOWS`] at once.
    follows: Arc<tokio::sync::Semaphore>,
}

impl OutputStore {
    /// The output directory of a store of `identity` under `state`,
    /// `STATE/output/IDENTITY` (`STATE/output` for a store without one),
    /// made if missing, keeping at most `limit` bytes per job. A store made
    /// afresh in the same state directory has another identity, so it never
    /// reads (nor appends to) an older store's files (L20).
    pub fn open(state: &Path, identity: Option<&Identity>, limit: u64) -> io::Result<OutputStore> {
        let dir = match identity {
            Some(identity) => state.join("output").join(identity.as_str()),
            None => state.join("output"),
        };
        // Job output holds what jobs print, secrets included: the owner's
        // alone, like the rest of the state directory.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let mut total = 0;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().ends_with(".out") {
                total += entry.metadata()?.len();
            }
        }
        Ok(OutputStore {
            dir,
            limit,
            identity: identity.map(ToString::to_string),
            unnamed_through: None,
            live: Mutex::new(HashMap::new()),
            total_limit: DEFAULT_OUTPUT_TOTAL,
            total: std::sync::atomic::AtomicU64::new(total),
            unsaid: Mutex::new(HashMap::new()),
            follows: Arc::new(tokio::sync::Semaphore::new(MAX_FOLLOWS)),
        })
    }

    /// The same store, taking instances named without an identity as its
    /// jobs' only up to job `last` ([`Store::unnamed_through`]): the jobs of
    /// a store from before identities. `None`: none.
    ///
    /// [`Store::unnamed_through`]: crate::store::Store::unnamed_through
    #[must_use]
    pub fn with_unnamed_through(mut self, last: Option<u64>) -> OutputStore {
        self.unnamed_through = last;
        self
    }

    /// The same store, keeping at most `total` bytes of all jobs' output at
    /// once (L26; [`DEFAULT_OUTPUT_TOTAL`] unless told): a capture that
    /// would pass it is cut, saying so.
    #[must_use]
    pub fn with_total(mut self, total: u64) -> OutputStore {
        self.total_limit = total;
        self
    }

    /// The bytes of all jobs' output kept now (the notices counted).
    pub fn total(&self) -> u64 {
        self.total.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts `bytes` more written.
    fn count(&self, bytes: u64) {
        self.total
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts `bytes` fewer kept (a file removed).
    fn uncount(&self, bytes: u64) {
        let _ = self.total.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |total| Some(total.saturating_sub(bytes)),
        );
    }

    /// The file of job `job`'s output.
    pub fn path(&self, job: u64) -> PathBuf {
        self.dir.join(format!("{job}.out"))
    }

    fn cut_path(&self, job: u64) -> PathBuf {
        self.dir.join(format!("{job}.cut"))
    }

    /// What is kept of job `job`'s output so far (nothing, for a job whose
    /// instance has written nothing or that has no file).
    pub fn kept(&self, job: u64) -> Kept {
        if let Some(&bytes) = self.unsaid.lock().get(&job) {
            return Kept {
                bytes,
                truncated: true,
            };
        }
        let len = std::fs::metadata(self.path(job)).map_or(0, |m| m.len());
        match std::fs::read_to_string(self.cut_path(job)) {
            // The cut file holds the bytes kept; one from before it did
            // (empty) was cut by the limit, its notice last.
            Ok(kept) => Kept {
                bytes: kept
                    .trim()
                    .parse()
                    .unwrap_or(len.saturating_sub(CUT_NOTICE.len() as u64)),
                truncated: true,
            },
            Err(_) => Kept {
                bytes: len,
                truncated: false,
            },
        }
    }

    /// Whether job `job`'s output may still grow: a capture of it is under
    /// way and has not ended.
    pub fn capturing(&self, job: u64) -> bool {
        self.live
            .lock()
            .values()
            .any(|live| live.job == job && !*live.done.borrow())
    }

    /// Removes job `job`'s files (retention).
    pub fn remove(&self, job: u64) {
        self.unsaid.lock().remove(&job);
        let path = self.path(job);
        if let Ok(meta) = std::fs::metadata(&path)
            && std::fs::remove_file(&path).is_ok()
        {
            self.uncount(meta.len());
        }
        // Absent files are the usual case: a job that wrote nothing.
        let _ = std::fs::remove_file(self.cut_path(job));
    }

    /// The job whose instance `name` is, if it is this store's.
    fn job_of(&self, name: &str) -> Option<u64> {
        let parsed = InstanceName::parse(name)?;
        match (parsed.store, &self.identity) {
            (Some(store), Some(own)) if store == own => Some(parsed.job.0),
            (None, None) => Some(parsed.job.0),
            (None, Some(_))
                if self
                    .unnamed_through
                    .is_some_and(|last| parsed.job.0 <= last) =>
            {
                Some(parsed.job.0)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
