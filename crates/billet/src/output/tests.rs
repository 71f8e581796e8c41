//! The tests of job output (L15, L20, L26): captures over the simulated
//! backend timed by a manual clock, and the files they keep.

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

use super::capture::{gather, wait_to_reopen};
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
    let identity = identity.map(|text| Identity::new(text).unwrap());
    fixture_of(|dir| {
        OutputStore::open(dir, identity.as_ref(), limit)
            .unwrap()
            .with_unnamed_through(unnamed)
    })
}

/// A fixture over the output store `open` makes in its directory.
fn fixture_of(open: impl FnOnce(&std::path::Path) -> OutputStore) -> Fixture {
    let dir = crate::store::private_tempdir();
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let raw: Arc<dyn Provider> = Arc::new(
        SimulatedProvider::builder("blue")
            .host(Host::new())
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap(),
    );
    let store = Arc::new(open(dir.path()));
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
    let (sender, mut finishing) = watch::channel(None);
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
        sender.send(Some(Duration::from_secs(7))).unwrap();
        sender
    });
    assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
    assert_eq!(asked.elapsed(), Duration::from_secs(1));
    assert_eq!(
        finish_by,
        Some(asked + Duration::from_secs(1) + Duration::from_secs(7)),
        "the finish's own wait bounds it"
    );
    let _sender = ask.await.unwrap();
    // Bounded from then on: the wait stops at the bound, then none.
    let before = tokio::time::Instant::now();
    assert!(wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await);
    assert_eq!(before.elapsed(), REOPEN_MAX);
    let mut waits = 0;
    while wait_to_reopen(&mut pause, &mut finish_by, &mut finishing).await {
        waits += 1;
        assert!(waits < 100, "a finish bounds the waits");
    }
    assert_eq!(tokio::time::Instant::now(), finish_by.unwrap());
    // A finish asked before the first wait starts the bound at once.
    let (_asked, mut finishing) = watch::channel(Some(FINISH_WAIT));
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
    let docker: Arc<dyn Provider> = Arc::new(billet_docker::DockerProvider::new("blue").unwrap());
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

// L26: the output of all jobs is kept within --output-total: the capture
// that would pass it keeps what fits, ends with the notice saying why, and
// its job says it was cut; the count follows what captures write and what
// retention removes.
#[tokio::test]
async fn l26_the_output_of_all_jobs_is_cut_at_the_total() {
    let f = fixture_of(|dir| {
        OutputStore::open(dir, None, 1 << 20)
            .unwrap()
            .with_total(6000)
    });
    assert_eq!(f.store.total(), 0);
    f.capturing.launch(spec(1, 10, 5000)).await.unwrap();
    f.clock.advance(Duration::from_secs(10)).unwrap();
    until_captured(&f.store, 1).await;
    assert_eq!(f.store.total(), 5000);
    assert!(!f.store.kept(1).truncated);
    let instance = f.capturing.launch(spec(2, 10, 5000)).await.unwrap();
    f.clock.advance(Duration::from_secs(10)).unwrap();
    until_captured(&f.store, 2).await;
    let written = whole(&*f.raw, &instance.id).await;
    let kept = std::fs::read(f.store.path(2)).unwrap();
    assert_eq!(&kept[..1000], &written[..1000]);
    assert_eq!(&kept[1000..], TOTAL_CUT_NOTICE.as_bytes());
    assert_eq!(
        f.store.kept(2),
        Kept {
            bytes: 1000,
            truncated: true
        }
    );
    assert_eq!(f.store.total(), 6000 + TOTAL_CUT_NOTICE.len() as u64);
    // Past the total, a capture keeps nothing but the notice.
    f.capturing.launch(spec(3, 10, 10)).await.unwrap();
    f.clock.advance(Duration::from_secs(10)).unwrap();
    until_captured(&f.store, 3).await;
    assert_eq!(
        std::fs::read(f.store.path(3)).unwrap(),
        TOTAL_CUT_NOTICE.as_bytes()
    );
    f.store.remove(1);
    f.store.remove(3);
    assert_eq!(f.store.total(), 1000 + TOTAL_CUT_NOTICE.len() as u64);
    f.store.remove(2);
    f.store.remove(2);
    assert_eq!(f.store.total(), 0);
}

// L26: a store opened over files already there counts them (only jobs'
// output files), and a cut file says the bytes kept; an empty one (from
// before it did) was cut by the limit, its notice last.
#[test]
fn l26_the_total_counts_what_is_there_and_a_cut_says_what_was_kept() {
    let dir = crate::store::private_tempdir();
    let store = OutputStore::open(dir.path(), None, 1 << 20).unwrap();
    std::fs::write(store.path(4), vec![b'x'; 700]).unwrap();
    std::fs::write(store.path(5), format!("{}{CUT_NOTICE}", "y".repeat(50))).unwrap();
    std::fs::write(store.cut_path(5), "").unwrap();
    std::fs::write(
        store.path(6),
        format!("{}{TOTAL_CUT_NOTICE}", "z".repeat(20)),
    )
    .unwrap();
    std::fs::write(store.cut_path(6), "20").unwrap();
    std::fs::write(dir.path().join("output").join("notes.txt"), "not output").unwrap();
    drop(store);
    let store = OutputStore::open(dir.path(), None, 1 << 20).unwrap();
    let files = 700 + 50 + CUT_NOTICE.len() + 20 + TOTAL_CUT_NOTICE.len();
    assert_eq!(store.total(), files as u64);
    assert_eq!(
        store.kept(4),
        Kept {
            bytes: 700,
            truncated: false
        }
    );
    assert_eq!(
        store.kept(5),
        Kept {
            bytes: 50,
            truncated: true
        }
    );
    assert_eq!(
        store.kept(6),
        Kept {
            bytes: 20,
            truncated: true
        }
    );
    assert_eq!(store.kept(7), Kept::default());
}

// L26: a capture whose file takes no byte (a full disk: here its file is
// /dev/full) keeps trying, and when its instance is removed while it still
// cannot write, its job says the output was cut, from memory, as the disk
// takes no notice either; retention forgets it.
#[tokio::test]
async fn l26_output_that_cannot_be_written_is_said_cut_from_memory() {
    let f = fixture(1 << 20, None);
    std::os::unix::fs::symlink("/dev/full", f.store.path(8)).unwrap();
    let instance = f.capturing.launch(spec(8, 100, 10_000)).await.unwrap();
    f.clock.advance(Duration::from_secs(50)).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(f.store.capturing(8), "the capture gave up on a full disk");
    assert_eq!(f.store.kept(8), Kept::default());
    f.capturing.destroy(&instance.id).await.unwrap();
    assert!(!f.store.capturing(8));
    assert_eq!(
        f.store.kept(8),
        Kept {
            bytes: 0,
            truncated: true
        }
    );
    assert_eq!(f.store.total(), 0);
    f.store.remove(8);
    assert_eq!(f.store.kept(8), Kept::default());
}

/// A stream of `items`, every one ready, then (when `stall`) pending for
/// good rather than ended.
fn ready_stream(items: Vec<Result<Vec<u8>, Error>>, stall: bool) -> billet_provider::OutputStream {
    let ready = futures::stream::iter(items);
    if stall {
        Box::pin(ready.chain(futures::stream::pending()))
    } else {
        Box::pin(ready)
    }
}

// L15: the pieces a backend has ready are gathered into one write, up to
// one chunk; what does not fit, an error, or the end is handed back, in
// order, and nothing waits for a piece not yet there.
#[test]
fn l15_ready_pieces_are_gathered_in_order_up_to_a_chunk() {
    use billet_provider::OUTPUT_CHUNK;
    // Many one-line pieces, then a stall: every line in one buffer, in order.
    let lines: Vec<Result<Vec<u8>, Error>> = (0..1000)
        .map(|n| Ok(format!("line-{n}\n").into_bytes()))
        .collect();
    let mut stream = ready_stream(lines, true);
    let mut bytes = b"first\n".to_vec();
    assert!(
        gather(&mut stream, &mut bytes).is_none(),
        "nothing more is ready"
    );
    let expected: String = std::iter::once("first\n".to_owned())
        .chain((0..1000).map(|n| format!("line-{n}\n")))
        .collect();
    assert_eq!(String::from_utf8(bytes).unwrap(), expected);

    // Bytes that would pass a chunk are handed back whole, untouched.
    let mut stream = ready_stream(
        vec![
            Ok(vec![b'a'; OUTPUT_CHUNK - 10]),
            Ok(vec![b'b'; 10]),
            Ok(vec![b'c'; 1]),
        ],
        false,
    );
    let mut bytes = Vec::new();
    let held = gather(&mut stream, &mut bytes);
    assert_eq!(bytes.len(), OUTPUT_CHUNK, "exactly one chunk fits");
    assert!(
        matches!(held, Some(Some(Ok(ref c))) if c == &vec![b'c'; 1]),
        "{held:?}"
    );

    // An error is handed back after what came before it.
    let mut stream = ready_stream(
        vec![
            Ok(b"x".to_vec()),
            Err(Error::unavailable("cut")),
            Ok(b"y".to_vec()),
        ],
        false,
    );
    let mut bytes = Vec::new();
    let held = gather(&mut stream, &mut bytes);
    assert_eq!(bytes, b"x");
    assert!(matches!(held, Some(Some(Err(_)))), "{held:?}");

    // The end is handed back.
    let mut stream = ready_stream(vec![Ok(b"z".to_vec())], false);
    let mut bytes = Vec::new();
    assert!(matches!(gather(&mut stream, &mut bytes), Some(None)));
    assert_eq!(bytes, b"z");
}

/// A provider over the simulated one whose output never ends: a byte every
/// 100 ms, as a job that keeps writing; its inventory says its instances
/// stopped when `stopped`.
#[derive(Debug)]
struct Endless {
    inner: SimulatedProvider,
    stopped: bool,
}

#[async_trait]
impl Provider for Endless {
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
        let mut instances = self.inner.list().await?;
        if self.stopped {
            for instance in &mut instances {
                instance.state = billet_provider::State::Stopped { exit_code: 0 };
            }
        }
        Ok(instances)
    }
    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        self.inner.destroy(id).await
    }
    fn output(&self) -> Option<&dyn Output> {
        Some(self)
    }
}

#[async_trait]
impl Output for Endless {
    async fn read(
        &self,
        _id: &InstanceId,
        _from: u64,
    ) -> Result<billet_provider::OutputStream, Error> {
        Ok(Box::pin(futures::stream::unfold((), |()| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((Ok(b"x".to_vec()), ()))
        })))
    }
}

/// How long a destroy of an instance of `Endless { stopped }` waits, with
/// what the job's output file then holds.
async fn destroy_endless(stopped: bool) -> (Duration, Vec<u8>, bool) {
    let f = fixture(1 << 20, None);
    let provider: Arc<dyn Provider> = Arc::new(Endless {
        inner: SimulatedProvider::builder("blue")
            .host(Host::new())
            .clock(Arc::new(f.clock.clone()))
            .build()
            .unwrap(),
        stopped,
    });
    let capturing = Capturing::new(Arc::clone(&provider), Arc::clone(&f.store));
    let instance = capturing.launch(spec(21, 100, 10)).await.unwrap();
    // The inventory: seen stopped (or running).
    assert_eq!(capturing.list().await.unwrap().len(), 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = tokio::time::Instant::now();
    capturing.destroy(&instance.id).await.unwrap();
    let waited = started.elapsed();
    let kept = std::fs::read(f.store.path(21)).unwrap();
    let cut = f.store.cut_path(21).exists();
    (waited, kept, cut)
}

// L15: a destroy waits for the output of an instance seen stopped for up to
// FINISH_WAIT_STOPPED (all of it is written, and may come slowly), for one
// that may run for up to FINISH_WAIT; output still coming then is cut
// there, and the cut said (paused time: exact).
#[tokio::test(start_paused = true)]
async fn l15_output_still_coming_when_the_wait_is_over_is_cut_and_said() {
    for (stopped, wait) in [(true, FINISH_WAIT_STOPPED), (false, FINISH_WAIT)] {
        let (waited, kept, cut) = destroy_endless(stopped).await;
        assert!(
            waited >= wait && waited < wait + Duration::from_millis(500),
            "stopped {stopped}: waited {waited:?}"
        );
        let notice = LATE_CUT_NOTICE.as_bytes();
        assert!(kept.ends_with(notice), "stopped {stopped}: {kept:?}");
        let bytes = kept.len() - notice.len();
        assert!(kept[..bytes].iter().all(|&b| b == b'x'));
        // A byte every 100 ms from the launch, through the wait.
        let expected = (wait + Duration::from_secs(1)).as_millis() / 100;
        assert!(
            (bytes as u128).abs_diff(expected) <= 2,
            "stopped {stopped}: {bytes} bytes, about {expected} expected"
        );
        assert!(cut, "stopped {stopped}: the cut is said");
    }
}
