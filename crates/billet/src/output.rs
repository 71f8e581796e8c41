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
//!   what the instance wrote (at most [`FINISH_WAIT`]; an instance still
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
//!   one capture task per live instance, holding at most one
//!   [`OUTPUT_CHUNK`](billet_provider::OUTPUT_CHUNK) at a time.

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

/// The longest a destroy waits for its instance's capture to read to the
/// end of what the instance wrote.
pub const FINISH_WAIT: Duration = Duration::from_secs(5);

/// The longest a destroy waits for the capture it asked to finish: past
/// [`FINISH_WAIT`], room for the capture's last read and its `fsync`.
const FINISH_BOUND: Duration = Duration::from_secs(6);

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
        Ok(OutputStore {
            dir,
            limit,
            identity: identity.map(ToString::to_string),
            unnamed_through: None,
            live: Mutex::new(HashMap::new()),
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
        let len = std::fs::metadata(self.path(job)).map_or(0, |m| m.len());
        let truncated = self.cut_path(job).exists();
        let bytes = if truncated {
            len.saturating_sub(CUT_NOTICE.len() as u64)
        } else {
            len
        };
        Kept { bytes, truncated }
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
        // Absent files are the usual case: a job that wrote nothing.
        let _ = std::fs::remove_file(self.path(job));
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
mod tests {
    use std::fs::OpenOptions;
    use std::io::Write;
    use std::sync::Arc;
    use std::time::SystemTime;

    use billet_clock::ManualClock;
    use billet_provider::{
        Error, Instance, Output, Provider, ProviderKind, Spec, Teardown, TrustClass, async_trait,
    };
    use billet_scheduler::JobId;
    use billet_simulated::{Host, SimulatedProvider, run_for_writing};
    use futures::StreamExt;
    use tokio::sync::watch;

    use super::capture::wait_to_reopen;
    use super::*;

    struct Fixture {
        _dir: tempfile::TempDir,
        clock: ManualClock,
        raw: Arc<dyn Provider>,
        store: Arc<OutputStore>,
        capturing: Capturing,
    }

    fn fixture(limit: u64, identity: Option<&str>) -> Fixture {
        fixture_through(limit, identity, None)
    }

    /// [`fixture`], taking unnamed instances as jobs' through `unnamed`.
    fn fixture_through(limit: u64, identity: Option<&str>, unnamed: Option<u64>) -> Fixture {
        let dir = crate::store::private_tempdir();
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
        let raw: Arc<dyn Provider> = Arc::new(
            SimulatedProvider::builder("blue")
                .host(Host::new())
                .clock(Arc::new(clock.clone()))
                .build()
                .unwrap(),
        );
        let identity = identity.map(|text| Identity::new(text).unwrap());
        let store = Arc::new(
            OutputStore::open(dir.path(), identity.as_ref(), limit)
                .unwrap()
                .with_unnamed_through(unnamed),
        );
        let capturing = Capturing::new(Arc::clone(&raw), Arc::clone(&store));
        Fixture {
            _dir: dir,
            clock,
            raw,
            store,
            capturing,
        }
    }

    fn spec(job: u64, seconds: u64, bytes: u64) -> Spec {
        Spec::new(
            JobId(job).instance_name("linux"),
            run_for_writing(Duration::from_secs(seconds), bytes),
        )
        .with_trust(TrustClass::Trusted)
    }

    /// Everything `provider` gives of `id`'s output from byte 0.
    async fn whole(provider: &dyn Provider, id: &InstanceId) -> Vec<u8> {
        let mut stream = provider.output().unwrap().read(id, 0).await.unwrap();
        let mut all = Vec::new();
        while let Some(piece) = stream.next().await {
            all.extend_from_slice(&piece.unwrap());
        }
        all
    }

    /// Waits (bounded) until no capture of `job` is under way.
    async fn until_captured(store: &OutputStore, job: u64) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while store.capturing(job) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the capture to end");
    }

    #[test]
    fn l15_sizes_are_bytes_or_binary_units() {
        assert_eq!(parse_size("1"), Ok(1));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("3MiB"), Ok(3 << 20));
        assert_eq!(parse_size(" 2GiB "), Ok(2 << 30));
        assert_eq!(parse_size("5 KiB"), Ok(5 << 10));
        for bad in [
            "0", "0KiB", "", "KiB", "10MB", "10kib", "1.5MiB", "-1", "abc",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} was taken");
        }
        let err = parse_size("10MB").unwrap_err();
        assert!(err.contains("KiB, MiB, GiB"), "{err}");
        assert!(parse_size("18446744073709551615GiB").is_err());
        assert!(parse_size("17179869184GiB").is_err(), "2^64 bytes");
        assert_eq!(parse_size("17179869183GiB"), Ok(17_179_869_183 << 30));
    }

    // L15: a capture keeps every byte the instance wrote, and the job says
    // so; nothing is kept of a job that wrote nothing.
    #[tokio::test]
    async fn l15_a_capture_keeps_every_byte_written() {
        let f = fixture(1 << 20, None);
        assert_eq!(f.store.kept(7), Kept::default());
        let instance = f.capturing.launch(spec(7, 10, 5000)).await.unwrap();
        assert!(f.store.capturing(7));
        f.clock.advance(Duration::from_secs(10)).unwrap();
        until_captured(&f.store, 7).await;
        let written = whole(&*f.raw, &instance.id).await;
        assert_eq!(written.len(), 5000);
        assert_eq!(std::fs::read(f.store.path(7)).unwrap(), written);
        assert_eq!(
            f.store.kept(7),
            Kept {
                bytes: 5000,
                truncated: false
            }
        );
        f.capturing.destroy(&instance.id).await.unwrap();
        assert!(f.raw.list().await.unwrap().is_empty());
        f.store.remove(7);
        assert!(!f.store.path(7).exists());
        assert_eq!(f.store.kept(7), Kept::default());
    }

    // L15: past the limit the capture stops: exactly the limit is kept,
    // the notice follows it, and the job says it was cut; retention removes
    // both files.
    #[tokio::test]
    async fn l15_output_past_the_limit_is_cut_and_said() {
        let f = fixture(300, None);
        let instance = f.capturing.launch(spec(3, 10, 5000)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        until_captured(&f.store, 3).await;
        let written = whole(&*f.raw, &instance.id).await;
        let kept = std::fs::read(f.store.path(3)).unwrap();
        assert_eq!(&kept[..300], &written[..300]);
        assert_eq!(&kept[300..], CUT_NOTICE.as_bytes());
        assert_eq!(
            f.store.kept(3),
            Kept {
                bytes: 300,
                truncated: true
            }
        );
        // A capture started again (an inventory after a restart) adds
        // nothing to a cut output.
        f.capturing.list().await.unwrap();
        until_captured(&f.store, 3).await;
        assert_eq!(std::fs::read(f.store.path(3)).unwrap(), kept);
        f.store.remove(3);
        assert_eq!(f.store.kept(3), Kept::default());
        assert!(!f.store.cut_path(3).exists());
    }

    // L15: a limit the output meets exactly cuts nothing.
    #[tokio::test]
    async fn l15_output_of_exactly_the_limit_is_whole() {
        let f = fixture(5000, None);
        let _ = f.capturing.launch(spec(4, 10, 5000)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        until_captured(&f.store, 4).await;
        assert_eq!(
            f.store.kept(4),
            Kept {
                bytes: 5000,
                truncated: false
            }
        );
    }

    // L15, L6: after a crash the capture goes on from the file's length,
    // learnt from the inventory: the output is whole, nothing twice.
    #[tokio::test]
    async fn l15_a_restart_resumes_the_capture_from_the_file() {
        let f = fixture(1 << 20, None);
        // Launched before the crash, not captured since.
        let instance = f.raw.launch(spec(9, 10, 4000)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        let written = whole(&*f.raw, &instance.id).await;
        std::fs::write(f.store.path(9), &written[..1234]).unwrap();
        let listed = f.capturing.list().await.unwrap();
        assert_eq!(listed.len(), 1);
        until_captured(&f.store, 9).await;
        assert_eq!(std::fs::read(f.store.path(9)).unwrap(), written);
        // `find` starts a capture too, which adds nothing to a whole one.
        f.capturing.find(&instance.name).await.unwrap();
        until_captured(&f.store, 9).await;
        assert_eq!(std::fs::read(f.store.path(9)).unwrap(), written);
    }

    // L15: a destroy of an instance still running (a cancelled job) waits
    // for its capture to take what was written, then destroys it.
    #[tokio::test]
    async fn l15_destroy_finishes_the_capture_first() {
        let f = fixture(1 << 20, None);
        let instance = f.capturing.launch(spec(5, 100, 10_000)).await.unwrap();
        f.clock.advance(Duration::from_secs(50)).unwrap();
        let so_far = whole_ready(&*f.raw, &instance.id).await;
        assert!(!so_far.is_empty());
        let started = tokio::time::Instant::now();
        f.capturing.destroy(&instance.id).await.unwrap();
        // Two settles (the stream, then the one opened again), far from
        // the finish's bound: a capture that kept opening again until the
        // bound would take all of it.
        assert!(
            started.elapsed() < FINISH_WAIT / 2,
            "{:?}",
            started.elapsed()
        );
        assert!(!f.store.capturing(5));
        assert_eq!(std::fs::read(f.store.path(5)).unwrap(), so_far);
        assert!(f.raw.list().await.unwrap().is_empty());
        // A destroy of an instance no capture knows goes straight on.
        f.capturing.destroy(&instance.id).await.unwrap();
    }

    /// What `provider` has of `id`'s output now, without waiting for more.
    async fn whole_ready(provider: &dyn Provider, id: &InstanceId) -> Vec<u8> {
        let mut stream = provider.output().unwrap().read(id, 0).await.unwrap();
        let mut all = Vec::new();
        while let Ok(Some(piece)) =
            tokio::time::timeout(Duration::from_millis(100), stream.next()).await
        {
            all.extend_from_slice(&piece.unwrap());
        }
        all
    }

    // L15, L20: only this store's jobs are captured: an instance named under
    // another store's identity, named as no job's, or named without an
    // identity past the jobs of a store from before identities, is left
    // alone.
    #[tokio::test]
    async fn l15_only_this_stores_instances_are_captured() {
        let own = "0a1b2c3d";
        let f = fixture_through(1 << 20, Some(own), Some(6));
        let other = Identity::new("deadbeef").unwrap();
        let theirs = Spec::new(
            JobId(1).instance_name_in(Some(&other), "linux"),
            run_for_writing(Duration::from_secs(10), 100),
        )
        .with_trust(TrustClass::Trusted);
        f.capturing.launch(theirs).await.unwrap();
        let stray = Spec::new("not-a-job", run_for_writing(Duration::from_secs(10), 100))
            .with_trust(TrustClass::Trusted);
        f.capturing.launch(stray).await.unwrap();
        assert!(!f.store.capturing(1));
        assert!(f.store.live.lock().is_empty());
        let mine = Spec::new(
            JobId(2).instance_name_in(Identity::new(own).as_ref(), "linux"),
            run_for_writing(Duration::from_secs(10), 100),
        )
        .with_trust(TrustClass::Trusted);
        f.capturing.launch(mine).await.unwrap();
        assert!(f.store.capturing(2));
        // An old name, without an identity, is this store's job too when
        // the store made it before it had an identity (job 6 and before).
        f.capturing.launch(spec(6, 10, 100)).await.unwrap();
        assert!(f.store.capturing(6));
        f.capturing.launch(spec(7, 10, 100)).await.unwrap();
        assert!(
            !f.store.capturing(7),
            "a name without identity past the old jobs"
        );
        let young = fixture(1 << 20, Some(own));
        young.capturing.launch(spec(3, 10, 100)).await.unwrap();
        assert!(
            !young.store.capturing(3),
            "a store that always had its identity"
        );
        let anonymous = fixture(1 << 20, None);
        anonymous.capturing.launch(spec(3, 10, 100)).await.unwrap();
        assert!(
            anonymous.store.capturing(3),
            "a store without identity takes them all"
        );
        let theirs = Spec::new(
            JobId(4).instance_name_in(Some(&other), "linux"),
            run_for_writing(Duration::from_secs(10), 100),
        )
        .with_trust(TrustClass::Trusted);
        anonymous.capturing.launch(theirs).await.unwrap();
        assert!(!anonymous.store.capturing(4), "but no store's that has one");
        f.clock.advance(Duration::from_secs(10)).unwrap();
        until_captured(&f.store, 2).await;
        assert_eq!(f.store.kept(2).bytes, 100);
        assert_eq!(f.store.kept(1).bytes, 0);
    }

    // L20: a store made afresh in the same state directory (another
    // identity) has its own output directory: job 1's file of the old store
    // is neither read nor appended to by the new store's job 1.
    #[test]
    fn l20_a_new_store_never_reads_an_old_stores_output() {
        let dir = crate::store::private_tempdir();
        let old = Identity::new("0a1b2c3d").unwrap();
        let new = Identity::new("deadbeef").unwrap();
        let before = OutputStore::open(dir.path(), Some(&old), 1 << 20).unwrap();
        std::fs::write(before.path(1), "the old job 1's secret").unwrap();
        assert_eq!(before.kept(1).bytes, 22);
        let after = OutputStore::open(dir.path(), Some(&new), 1 << 20).unwrap();
        assert_eq!(after.kept(1), Kept::default());
        assert_ne!(after.path(1), before.path(1));
        assert_eq!(after.path(1), dir.path().join("output/deadbeef/1.out"));
        let none = OutputStore::open(dir.path(), None, 1 << 20).unwrap();
        assert_eq!(none.path(1), dir.path().join("output/1.out"));
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("output")), 0o700);
        assert_eq!(mode(&dir.path().join("output/deadbeef")), 0o700);
    }

    /// Everything `serve` gives (bounded: a follow that never ends fails).
    async fn served(store: &Arc<OutputStore>, job: u64, follow: bool, ended: bool) -> Vec<u8> {
        // Read on a thread of its own, within a bound of wall time: a body
        // that never yields (a loop that is always ready) is then a failure
        // in seconds, not a test that hangs.
        let store = Arc::clone(store);
        let (sender, answer) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = sender.send(runtime.block_on(body_of(store, job, follow, ended)));
        });
        tokio::task::spawn_blocking(move || answer.recv_timeout(Duration::from_secs(10)))
            .await
            .unwrap()
            .expect("the body to end within 10 s")
    }

    /// The whole body, of at most 1,000 pieces, none of them empty.
    async fn body_of(store: Arc<OutputStore>, job: u64, follow: bool, ended: bool) -> Vec<u8> {
        let slot = follow.then(|| store.follow_slot().expect("a follow slot free"));
        let mut body = std::pin::pin!(serve(store, job, slot, move || ended));
        let mut all = Vec::new();
        for _ in 0..1000 {
            let Some(piece) = body.next().await else {
                return all;
            };
            let piece = piece.unwrap();
            assert!(!piece.is_empty(), "a body's piece is never empty");
            all.extend_from_slice(&piece);
        }
        panic!("the body did not end within 1000 pieces");
    }

    // L15: the route's body is the file, in pieces; a follow of an ended
    // job whose capture is done ends at the file's end; without a file,
    // nothing.
    #[tokio::test]
    async fn l15_the_body_is_what_is_kept_and_a_follow_ends_with_the_job() {
        let f = fixture(1 << 20, None);
        assert!(served(&f.store, 8, false, true).await.is_empty());
        assert!(served(&f.store, 8, true, true).await.is_empty());
        let text: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(f.store.path(8), &text).unwrap();
        assert_eq!(served(&f.store, 8, false, false).await, text);
        assert_eq!(served(&f.store, 8, true, true).await, text);
        let pieces: Vec<usize> = tokio::time::timeout(
            Duration::from_secs(5),
            serve(Arc::clone(&f.store), 8, None, || true)
                .map(|piece| piece.unwrap().len())
                .collect(),
        )
        .await
        .expect("the body to end");
        assert!(pieces.iter().all(|&n| n <= billet_provider::OUTPUT_CHUNK));
        // A follow of a job not ended waits; the job's end ends it.
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let told = Arc::clone(&ended);
        let follower = tokio::spawn({
            let store = Arc::clone(&f.store);
            async move {
                let slot = store.follow_slot();
                let body = serve(store, 8, slot, move || {
                    told.load(std::sync::atomic::Ordering::SeqCst)
                });
                let pieces: Vec<io::Result<Vec<u8>>> = body.collect().await;
                pieces
                    .into_iter()
                    .flat_map(Result::unwrap)
                    .collect::<Vec<u8>>()
            }
        });
        tokio::time::sleep(FOLLOW_POLL * 3).await;
        assert!(!follower.is_finished());
        let mut file = OpenOptions::new()
            .append(true)
            .open(f.store.path(8))
            .unwrap();
        file.write_all(b"more").unwrap();
        ended.store(true, std::sync::atomic::Ordering::SeqCst);
        let all = tokio::time::timeout(Duration::from_secs(5), follower)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&all[..text.len()], &text[..]);
        assert_eq!(&all[text.len()..], b"more");
    }

    /// A provider over the simulated one whose output streams break once
    /// each after `after` pieces, while `refuse_opens` opens are refused.
    #[derive(Debug)]
    struct Flaky {
        inner: SimulatedProvider,
        after: usize,
        /// The first stream stalls after `after` pieces, neither yielding
        /// nor ending, instead of breaking.
        stall: bool,
        broken: Mutex<std::collections::HashSet<InstanceId>>,
        refuse_opens: std::sync::atomic::AtomicU32,
    }

    #[async_trait]
    impl Provider for Flaky {
        fn kind(&self) -> ProviderKind {
            self.inner.kind()
        }
        fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
            self.inner.accepts(trust)
        }
        async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
            self.inner.launch(spec).await
        }
        async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
            self.inner.find(name).await
        }
        async fn list(&self) -> Result<Vec<Instance>, Error> {
            self.inner.list().await
        }
        async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
            self.inner.destroy(id).await
        }
        fn output(&self) -> Option<&dyn Output> {
            Some(self)
        }
    }

    #[async_trait]
    impl Output for Flaky {
        async fn read(
            &self,
            id: &InstanceId,
            from: u64,
        ) -> Result<billet_provider::OutputStream, Error> {
            use std::sync::atomic::Ordering::SeqCst;
            if self
                .refuse_opens
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(Error::unavailable("refused, as a daemon restarting would"));
            }
            let stream = Output::read(&self.inner, id, from).await?;
            if !self.broken.lock().insert(id.clone()) {
                return Ok(stream);
            }
            let first = stream.take(self.after);
            if self.stall {
                return Ok(Box::pin(first.chain(futures::stream::pending())));
            }
            let broken = first.chain(futures::stream::once(async {
                Err(Error::unavailable("the stream broke"))
            }));
            Ok(Box::pin(broken))
        }
    }

    fn flaky(limit: u64, after: usize, refuse_opens: u32, stall: bool) -> (Fixture, Arc<Flaky>) {
        let f = fixture(limit, None);
        let flaky = Arc::new(Flaky {
            inner: SimulatedProvider::builder("blue")
                .host(Host::new())
                .clock(Arc::new(f.clock.clone()))
                .build()
                .unwrap(),
            after,
            stall,
            broken: Mutex::new(std::collections::HashSet::new()),
            refuse_opens: std::sync::atomic::AtomicU32::new(refuse_opens),
        });
        (f, flaky)
    }

    // L15 (D16): a stream that breaks mid-read, and opens refused for a
    // while, cost time, never a byte: the capture opens again from where the
    // file ends, and the output is whole, nothing twice.
    #[tokio::test]
    async fn l15_a_broken_stream_is_read_again_from_where_the_file_ends() {
        let (f, flaky) = flaky(1 << 20, 1, 2, false);
        let provider: Arc<dyn Provider> = flaky.clone();
        let capturing = Capturing::new(Arc::clone(&provider), Arc::clone(&f.store));
        let instance = capturing.launch(spec(11, 10, 200_000)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        until_captured(&f.store, 11).await;
        let written = whole(&flaky.inner, &instance.id).await;
        assert_eq!(written.len(), 200_000);
        assert_eq!(std::fs::read(f.store.path(11)).unwrap(), written);
    }

    // L15: a follow that stalls past its instance's end, with bytes not yet
    // yielded (as podman's can), loses none of them: once the destroy's
    // settle passes, the capture reads again from where the file ends.
    #[tokio::test]
    async fn l15_a_follow_that_stalls_at_the_end_loses_nothing() {
        let (f, flaky) = flaky(1 << 20, 1, 0, true);
        let provider: Arc<dyn Provider> = flaky.clone();
        let capturing = Capturing::new(Arc::clone(&provider), Arc::clone(&f.store));
        let instance = capturing.launch(spec(18, 10, 200_000)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        let written = whole(&flaky.inner, &instance.id).await;
        assert_eq!(written.len(), 200_000);
        let started = tokio::time::Instant::now();
        capturing.destroy(&instance.id).await.unwrap();
        assert!(started.elapsed() < FINISH_WAIT, "{:?}", started.elapsed());
        let kept = std::fs::read(f.store.path(18)).unwrap();
        assert_eq!(kept.len(), written.len(), "bytes kept");
        assert!(kept == written, "the bytes kept are the bytes written");
    }

    // L15: the limit counts every piece: a cut that falls in a later piece
    // keeps exactly the limit.
    #[tokio::test]
    async fn l15_the_limit_counts_across_pieces() {
        let f = fixture(70_000, None);
        let instance = f.capturing.launch(spec(12, 10, 200_000)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        until_captured(&f.store, 12).await;
        let written = whole(&*f.raw, &instance.id).await;
        let kept = std::fs::read(f.store.path(12)).unwrap();
        assert_eq!(&kept[..70_000], &written[..70_000]);
        assert_eq!(&kept[70_000..], CUT_NOTICE.as_bytes());
    }

    // L15: an instance gone before its capture could read (destroyed behind
    // its back) ends the capture, and it is forgotten.
    #[tokio::test]
    async fn l15_an_instance_gone_ends_its_capture() {
        let f = fixture(1 << 20, None);
        let instance = f.capturing.launch(spec(13, 10, 100)).await.unwrap();
        f.raw.destroy(&instance.id).await.unwrap();
        tokio::time::timeout(Duration::from_secs(2), async {
            while !f.store.live.lock().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the capture of a destroyed instance to end and be forgotten");
        assert_eq!(f.store.kept(13).bytes, 0);
    }

    // L15: a destroy asked before the capture read anything still waits for
    // it to read what the instance wrote.
    #[tokio::test]
    async fn l15_a_destroy_at_once_still_keeps_what_was_written() {
        let f = fixture(16 << 20, None);
        let instance = f.capturing.launch(spec(14, 10, 4 << 20)).await.unwrap();
        f.clock.advance(Duration::from_secs(10)).unwrap();
        let written = whole(&*f.raw, &instance.id).await;
        f.capturing.destroy(&instance.id).await.unwrap();
        assert_eq!(std::fs::read(f.store.path(14)).unwrap(), written);
    }

    // The pauses between opens: doubled from the first to the cap while no
    // finish is asked; a finish asked ends the wait and bounds the rest;
    // past the bound, no more opens.
    #[tokio::test(start_paused = true)]
    async fn l15_opens_again_after_pauses_that_double_until_a_finish_bounds_them() {
        let (sender, mut finishing) = watch::channel(false);
        let mut pause = REOPEN_FIRST;
        let mut finish_by = None;
        let start = tokio::time::Instant::now();
        assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
        assert_eq!(start.elapsed(), REOPEN_FIRST);
        assert_eq!(pause, REOPEN_FIRST * 2);
        for _ in 0..10 {
            assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
        }
        assert_eq!(pause, REOPEN_MAX);
        assert_eq!(finish_by, None);
        // A finish asked during the wait ends it at once.
        let asked = tokio::time::Instant::now();
        let ask = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            sender.send(true).unwrap();
            sender
        });
        assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
        assert_eq!(asked.elapsed(), Duration::from_secs(1));
        assert_eq!(
            finish_by,
            Some(asked + Duration::from_secs(1) + FINISH_WAIT)
        );
        let _sender = ask.await.unwrap();
        // Bounded from then on: the wait stops at the bound, then none.
        let before = tokio::time::Instant::now();
        assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
        assert_eq!(before.elapsed(), REOPEN_MAX.min(FINISH_WAIT));
        let mut waits = 0;
        while wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await {
            waits += 1;
            assert!(waits < 100, "a finish bounds the waits");
        }
        assert_eq!(tokio::time::Instant::now(), finish_by.unwrap());
        // A finish asked before the first wait starts the bound at once.
        let (_asked, mut finishing) = watch::channel(true);
        let mut pause = REOPEN_FIRST;
        let mut finish_by = None;
        let now = tokio::time::Instant::now();
        assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
        assert_eq!(finish_by, Some(now + FINISH_WAIT));
        assert_eq!(now.elapsed(), REOPEN_FIRST);
    }

    // Capturing is its provider in every call but destroy's wait: the same
    // kind, the same refusals, the same instance found, the capabilities
    // passed on.
    #[tokio::test]
    async fn l15_capturing_answers_as_its_provider() {
        let f = fixture(1 << 20, None);
        assert_eq!(f.capturing.kind(), f.raw.kind());
        assert!(f.capturing.output().is_some());
        assert!(f.capturing.hints().is_some());
        let docker: Arc<dyn Provider> =
            Arc::new(billet_docker::DockerProvider::new("blue").unwrap());
        let wrapped = Capturing::new(Arc::clone(&docker), Arc::clone(&f.store));
        assert_eq!(wrapped.kind(), ProviderKind::Docker);
        for trust in [
            TrustClass::Trusted,
            TrustClass::Untrusted,
            TrustClass::Unknown,
        ] {
            assert_eq!(
                wrapped.accepts(trust).map_err(|e| e.kind()),
                docker.accepts(trust).map_err(|e| e.kind())
            );
        }
        assert!(wrapped.accepts(TrustClass::Untrusted).is_err());
        let instance = f.capturing.launch(spec(15, 10, 10)).await.unwrap();
        let found = f.capturing.find(&instance.name).await.unwrap();
        assert_eq!(found.map(|i| i.id), Some(instance.id));
    }

    // L15: once a destroy asked the capture to finish, output that comes
    // within SETTLE of the last is still taken (paused time: exact).
    #[tokio::test(start_paused = true)]
    async fn l15_a_finish_takes_what_comes_within_the_settle() {
        let f = fixture(1 << 20, None);
        let instance = f.capturing.launch(spec(16, 100, 10_000)).await.unwrap();
        f.clock.advance(Duration::from_secs(50)).unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let destroy = {
            let capturing = Capturing::new(Arc::clone(&f.raw), Arc::clone(&f.store));
            let id = instance.id.clone();
            // The same store: this wrapper's destroy finishes the capture
            // the first one started.
            tokio::spawn(async move { capturing.destroy(&id).await })
        };
        tokio::time::sleep(SETTLE / 4).await;
        f.clock.advance(Duration::from_secs(10)).unwrap();
        let at_60 = whole_ready(&*f.raw, &instance.id).await;
        destroy.await.unwrap().unwrap();
        let kept = std::fs::read(f.store.path(16)).unwrap();
        assert_eq!(kept.len(), 6_000);
        assert_eq!(kept, at_60);
    }

    // L15: a file that cannot be read is an error in the body, not an
    // empty output.
    #[tokio::test]
    async fn l15_an_unreadable_file_is_an_error_not_nothing() {
        let f = fixture(1 << 20, None);
        std::os::unix::fs::symlink(f.store.path(17), f.store.path(17)).unwrap();
        // At most two items are taken: a body that yields for ever fails.
        let pieces: Vec<io::Result<Vec<u8>>> = tokio::time::timeout(
            Duration::from_secs(5),
            serve(Arc::clone(&f.store), 17, f.store.follow_slot(), || true)
                .take(2)
                .collect(),
        )
        .await
        .expect("the body to end");
        assert_eq!(pieces.len(), 1, "{pieces:?}");
        assert!(pieces[0].is_err(), "{pieces:?}");
    }
}
