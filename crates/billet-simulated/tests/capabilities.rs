//! P9 on the simulated backend: its output (modelled from the command, made
//! as it is read) and its hints (at the modelled instant an instance stops),
//! held to the contract's capability checks in modelled and wall time; and
//! two wrong providers the checks catch (output that survives destroy, a
//! hint that names another owner's instance).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_clock::{Clock, ManualClock};
use billet_conformance::{
    Deployment, Fixture, FixtureError, Policies, ProviderFactory, check_capabilities,
};
use billet_provider::{
    Error, ErrorKind, Hint, HintKind, HintStream, Hints, Instance, InstanceId, OUTPUT_CHUNK,
    Output, OutputStream, Provider, ProviderKind, Spec, Teardown, TrustClass,
};
use billet_simulated::{Host, Severable, SimulatedFactory, SimulatedProvider, run_for_writing};
use futures::{FutureExt, StreamExt};

fn provider(owner: &str, host: &Host, clock: &ManualClock) -> SimulatedProvider {
    SimulatedProvider::builder(owner)
        .host(host.clone())
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap()
}

fn spec(name: &str, command: Vec<String>) -> Spec {
    Spec::new(name, command).with_trust(TrustClass::Trusted)
}

/// What `stream` has ready now, without waiting.
fn ready(stream: &mut OutputStream) -> Vec<u8> {
    let mut bytes = Vec::new();
    while let Some(Some(item)) = stream.next().now_or_never() {
        bytes.extend_from_slice(&item.unwrap());
    }
    bytes
}

// P9: the simulated backend keeps its contract's capabilities, in modelled
// time and in wall time.
#[test]
fn p9_the_simulated_backend_passes_the_capability_checks() {
    for factory in [SimulatedFactory::modelled(), SimulatedFactory::wall()] {
        let report = check_capabilities(&factory).unwrap_or_else(|f| panic!("{f}"));
        assert!(report.output && report.hints, "{report:?}");
        assert!(report.hints_seen >= 3, "{report:?}");
    }
}

// P9: an instance writes its bytes at an even pace over its run, all by its
// stop; a reader follows it in pieces of at most OUTPUT_CHUNK, each byte the
// same on every read, and nothing is made before it is read.
#[tokio::test]
async fn p9_output_is_written_at_an_even_pace_and_followed() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let host = Host::new();
    let blue = provider("blue", &host, &clock);
    let bytes = 4 * OUTPUT_CHUNK as u64;
    let launched = blue
        .launch(spec("a", run_for_writing(Duration::from_secs(100), bytes)))
        .await
        .unwrap();
    let output = Provider::output(&blue).unwrap();
    let mut follower = output.read(&launched.id, 0).await.unwrap();
    assert!(
        ready(&mut follower).is_empty(),
        "nothing written at the start"
    );
    clock.advance(Duration::from_secs(25)).unwrap();
    let first = ready(&mut follower);
    assert_eq!(
        first.len() as u64,
        bytes / 4,
        "a quarter by a quarter of the run"
    );
    clock.advance(Duration::from_secs(75)).unwrap();
    let mut rest = Vec::new();
    while let Some(item) = follower.next().await {
        let item = item.unwrap();
        assert!(item.len() <= OUTPUT_CHUNK);
        rest.extend_from_slice(&item);
    }
    let whole = [first, rest].concat();
    assert_eq!(
        whole.len() as u64,
        bytes,
        "every byte by its stop, then the end"
    );
    let mut again = output.read(&launched.id, 1000).await.unwrap();
    assert_eq!(ready(&mut again), whole[1000..]);
    assert!(whole.starts_with(b"billet-simulated output: "));
    // Another owner's instance is not shown; a destroyed one is gone.
    let green = provider("green", &host, &clock);
    let refused = Provider::output(&green)
        .unwrap()
        .read(&launched.id, 0)
        .await
        .err()
        .unwrap();
    assert_eq!(refused.kind(), ErrorKind::NotOwned);
    blue.destroy(&launched.id).await.unwrap();
    let gone = output.read(&launched.id, 0).await.err().unwrap();
    assert_eq!(gone.kind(), ErrorKind::NotFound);
}

// P9: a reader of an instance destroyed while it follows is told NotFound,
// and its stream ends.
#[tokio::test]
async fn p9_a_follower_is_told_when_its_instance_is_destroyed() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let blue = provider("blue", &Host::new(), &clock);
    let launched = blue
        .launch(spec("a", run_for_writing(Duration::from_secs(10), 1000)))
        .await
        .unwrap();
    let mut follower = Provider::output(&blue)
        .unwrap()
        .read(&launched.id, 0)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(ready(&mut follower).len(), 100);
    blue.destroy(&launched.id).await.unwrap();
    clock.advance(Duration::from_secs(1)).unwrap();
    let told = follower.next().await.unwrap().unwrap_err();
    assert_eq!(told.kind(), ErrorKind::NotFound);
    assert!(follower.next().await.is_none());
}

// P9: hints come at the modelled instant an instance stops, and as
// instances appear and vanish; never for another owner's.
#[tokio::test]
async fn p9_hints_come_at_the_instant_of_a_stop() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let host = Host::new();
    let blue = provider("blue", &host, &clock);
    let green = provider("green", &host, &clock);
    let mut hints = Hints::subscribe(&blue);
    let short = blue
        .launch(spec("short", run_for_writing(Duration::from_secs(5), 0)))
        .await
        .unwrap();
    let long = blue
        .launch(spec("long", run_for_writing(Duration::from_secs(50), 0)))
        .await
        .unwrap();
    green
        .launch(spec("short", run_for_writing(Duration::from_secs(5), 0)))
        .await
        .unwrap();
    let next = |hints: &mut HintStream| hints.next().now_or_never().flatten();
    let hint = |kind, instance: &Instance| Hint {
        kind,
        id: instance.id.clone(),
        name: instance.name.clone(),
    };
    assert_eq!(next(&mut hints), Some(hint(HintKind::Appeared, &short)));
    assert_eq!(next(&mut hints), Some(hint(HintKind::Appeared, &long)));
    assert_eq!(next(&mut hints), None, "nothing of green's");
    clock.advance(Duration::from_millis(4_999)).unwrap();
    assert_eq!(next(&mut hints), None, "not before its stop");
    clock.advance(Duration::from_millis(1)).unwrap();
    assert_eq!(next(&mut hints), Some(hint(HintKind::Stopped, &short)));
    assert_eq!(next(&mut hints), None);
    blue.destroy(&long.id).await.unwrap();
    assert_eq!(next(&mut hints), Some(hint(HintKind::Vanished, &long)));
    clock.advance(Duration::from_secs(100)).unwrap();
    assert_eq!(next(&mut hints), None, "a destroyed instance never stops");
}

// P9: a poll of a hint stream answers at once, on its own thread under a
// real-time watchdog (a stream that loops instead of answering `Pending`
// fails here in seconds rather than hanging the run): nothing to tell is
// `Pending`; a stop reached is `Stopped` at the first poll, then `Pending`.
#[test]
fn p9_a_poll_of_a_hint_stream_answers_at_once() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let host = Host::new();
    let blue = provider("blue", &host, &clock);
    let launched = blue
        .launch(spec("job", run_for_writing(Duration::from_secs(5), 0)))
        .now_or_never()
        .unwrap()
        .unwrap();
    let hints = Hints::subscribe(&blue);
    let (polls, answers) = std::sync::mpsc::channel();
    let (ask, asked) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut hints = hints;
        while asked.recv().is_ok() {
            let answer = hints
                .next()
                .now_or_never()
                .map(|hint| hint.map(|h| (h.kind, h.name)));
            if polls.send(answer).is_err() {
                return;
            }
        }
    });
    let poll = || {
        ask.send(()).unwrap();
        answers
            .recv_timeout(Duration::from_secs(10))
            .expect("a poll of the hint stream answered within the watchdog")
    };
    assert_eq!(poll(), None, "nothing to tell: pending");
    clock.advance(Duration::from_secs(5)).unwrap();
    assert_eq!(poll(), Some(Some((HintKind::Stopped, launched.name))));
    assert_eq!(poll(), None, "told: pending again");
}

// B12, P9: a driver that steps modelled time never yields to the runtime,
// so tokio's cooperative budget is spent early and never renewed; hints must
// reach it all the same, each as soon as it is told. (Before issue 49 the
// stream waited on tokio's broadcast `recv`, which counts against that
// budget: past it, launches' and destroys' hints were read only at the
// stream's next stop, and a stop earlier than the one it slept on was missed
// at its instant.)
#[tokio::test]
async fn b12_hints_reach_a_driver_that_never_yields_at_once() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let host = Host::new();
    let blue = provider("blue", &host, &clock);
    let mut hints = Hints::subscribe(&blue);
    let next = |hints: &mut HintStream| hints.next().now_or_never().flatten();
    let long = blue
        .launch(spec("long", run_for_writing(Duration::from_secs(500), 0)))
        .await
        .unwrap();
    assert_eq!(next(&mut hints).map(|h| h.kind), Some(HintKind::Appeared));
    assert_eq!(next(&mut hints), None, "asleep until the long one's stop");
    // Well past tokio's budget of 128 polls a turn, all in one turn.
    for k in 0..1_000 {
        let name = format!("job-{k}");
        let instance = blue
            .launch(spec(&name, run_for_writing(Duration::from_secs(1_000), 0)))
            .await
            .unwrap();
        let told = next(&mut hints).unwrap_or_else(|| panic!("launch {k} told nothing"));
        assert_eq!(
            (told.kind, told.id),
            (HintKind::Appeared, instance.id.clone())
        );
        assert_eq!(next(&mut hints), None);
        blue.destroy(&instance.id).await.unwrap();
        let told = next(&mut hints).unwrap_or_else(|| panic!("destroy {k} told nothing"));
        assert_eq!((told.kind, told.id), (HintKind::Vanished, instance.id));
    }
    assert_eq!(next(&mut hints), None);
    // An instance that stops before the one the stream sleeps on: the clock
    // holds its stop as a deadline, and it is told at that instant; once it
    // is destroyed, the stream sleeps on the long one's again.
    let secs = |s| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
    let short = blue
        .launch(spec("short", run_for_writing(Duration::from_secs(5), 0)))
        .await
        .unwrap();
    assert_eq!(next(&mut hints).map(|h| h.id), Some(short.id.clone()));
    assert_eq!(next(&mut hints), None);
    assert_eq!(clock.next_deadline(), Some(secs(5)), "the earliest stop");
    blue.destroy(&short.id).await.unwrap();
    assert_eq!(next(&mut hints).map(|h| h.kind), Some(HintKind::Vanished));
    assert_eq!(next(&mut hints), None);
    assert_eq!(
        clock.next_deadline(),
        Some(secs(500)),
        "the short one is gone"
    );
    let short = blue
        .launch(spec("short", run_for_writing(Duration::from_secs(5), 0)))
        .await
        .unwrap();
    assert_eq!(next(&mut hints).map(|h| h.id), Some(short.id.clone()));
    assert_eq!(next(&mut hints), None);
    assert_eq!(clock.next_deadline(), Some(secs(5)));
    clock.advance(Duration::from_secs(5)).unwrap();
    let told = next(&mut hints).expect("the short one's stop, at its instant");
    assert_eq!((told.kind, told.id), (HintKind::Stopped, short.id));
    assert_eq!(next(&mut hints), None);
    clock.advance(Duration::from_secs(495)).unwrap();
    let told = next(&mut hints).expect("the long one's stop");
    assert_eq!((told.kind, told.id), (HintKind::Stopped, long.id));
    // A launch and a destroy between two reads change the next stop, though
    // the count of instances is as it was.
    let a = blue
        .launch(spec("a", run_for_writing(Duration::from_secs(100), 0)))
        .await
        .unwrap();
    assert_eq!(next(&mut hints).map(|h| h.id), Some(a.id.clone()));
    assert_eq!(next(&mut hints), None);
    assert_eq!(clock.next_deadline(), Some(secs(600)));
    let b = blue
        .launch(spec("b", run_for_writing(Duration::from_secs(50), 0)))
        .await
        .unwrap();
    blue.destroy(&a.id).await.unwrap();
    assert_eq!(next(&mut hints).map(|h| h.id), Some(b.id));
    assert_eq!(next(&mut hints).map(|h| h.id), Some(a.id));
    assert_eq!(next(&mut hints), None);
    assert_eq!(clock.next_deadline(), Some(secs(550)), "b's stop, not a's");
}

/// Counts its wakes.
#[derive(Default)]
struct Wakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A manual clock that counts the sleeps made on it.
#[derive(Debug)]
struct Counting {
    clock: ManualClock,
    sleeps: std::sync::atomic::AtomicUsize,
}

impl Clock for Counting {
    fn now(&self) -> SystemTime {
        self.clock.now()
    }

    fn sleep_until(&self, deadline: SystemTime) -> billet_clock::Sleep {
        self.sleeps
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.clock.sleep_until(deadline)
    }
}

// B12, P9: a stream with nothing to read is woken by the next hint told
// (its waker is kept, the last poll's), and by the clock at the next stop
// through one sleep it keeps while that stop stays the next; a second owner
// on the host (its shelf not the host's first) is told its own stops.
#[test]
fn b12_a_waiting_stream_is_woken_by_what_is_told_and_sleeps_once() {
    use std::sync::atomic::Ordering::SeqCst;
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
    let counting = Arc::new(Counting {
        clock: clock.clone(),
        sleeps: Default::default(),
    });
    let host = Host::new();
    let blue = provider("blue", &host, &clock);
    let green = SimulatedProvider::builder("green")
        .host(host)
        .clock(counting.clone())
        .build()
        .unwrap();
    blue.launch(spec("first", run_for_writing(Duration::from_secs(1), 0)))
        .now_or_never()
        .unwrap()
        .unwrap();
    let mut hints = Hints::subscribe(&green);
    let (first, later) = (Arc::new(Wakes::default()), Arc::new(Wakes::default()));
    let mut poll = |wakes: &Arc<Wakes>| {
        let waker = std::task::Waker::from(Arc::clone(wakes));
        hints
            .poll_next_unpin(&mut std::task::Context::from_waker(&waker))
            .map(|hint| hint.map(|h| (h.kind, h.name)))
    };
    assert!(poll(&first).is_pending());
    assert!(poll(&later).is_pending(), "the later poll's waker is kept");
    let launched = green
        .launch(spec("job", run_for_writing(Duration::from_secs(10), 0)))
        .now_or_never()
        .unwrap()
        .unwrap();
    assert_eq!((first.0.load(SeqCst), later.0.load(SeqCst)), (0, 1));
    assert_eq!(
        poll(&later),
        std::task::Poll::Ready(Some((HintKind::Appeared, launched.name.clone())))
    );
    for _ in 0..3 {
        assert!(poll(&later).is_pending());
    }
    assert_eq!(counting.sleeps.load(SeqCst), 1, "one sleep, kept");
    clock.advance(Duration::from_secs(1)).unwrap();
    assert_eq!(later.0.load(SeqCst), 1, "blue's stop is not green's");
    clock.advance(Duration::from_secs(9)).unwrap();
    assert_eq!(later.0.load(SeqCst), 2, "woken at its stop");
    assert_eq!(
        poll(&later),
        std::task::Poll::Ready(Some((HintKind::Stopped, launched.name)))
    );
}

/// The one obligation a [`Wrong`] provider breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// Output read after its instance was destroyed answers what it wrote.
    OutputSurvivesDestroy,
    /// Hints include those of the other deployment on the host.
    HintsForeign,
}

/// A simulated provider that breaks one capability obligation.
#[derive(Debug)]
struct Wrong {
    inner: Severable,
    flaw: Flaw,
    /// A provider of the other owner over the same host, for HintsForeign.
    other: SimulatedProvider,
}

#[async_trait]
impl Provider for Wrong {
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
    fn hints(&self) -> Option<&dyn Hints> {
        Some(self)
    }
}

#[async_trait]
impl Output for Wrong {
    async fn read(&self, id: &InstanceId, from: u64) -> Result<OutputStream, Error> {
        match Output::read(&self.inner, id, from).await {
            Err(err)
                if err.kind() == ErrorKind::NotFound
                    && self.flaw == Flaw::OutputSurvivesDestroy =>
            {
                Ok(Box::pin(futures::stream::iter([
                    Ok(b"still here".to_vec()),
                ])))
            }
            answer => answer,
        }
    }
}

impl Hints for Wrong {
    fn subscribe(&self) -> HintStream {
        let own = Hints::subscribe(&self.inner);
        match self.flaw {
            Flaw::HintsForeign => {
                Box::pin(futures::stream::select(own, Hints::subscribe(&self.other)))
            }
            Flaw::OutputSurvivesDestroy => own,
        }
    }
}

/// The simulated factory, each deployment's provider made [`Wrong`].
struct WrongFactory {
    flaw: Flaw,
    inner: SimulatedFactory,
}

#[async_trait]
impl ProviderFactory for WrongFactory {
    type Provider = Wrong;

    fn policies(&self) -> Policies {
        self.inner.policies()
    }

    async fn build(&self) -> Result<Fixture<Wrong>, FixtureError> {
        let fixture = self.inner.build().await?;
        let host = fixture.blue.provider.provider().host().clone();
        let clock: Arc<dyn Clock> = match &fixture.timing {
            billet_conformance::Timing::Modelled(clock) => Arc::new(clock.clone()),
            billet_conformance::Timing::Wall(_) => Arc::new(billet_clock::SystemClock),
        };
        let other = |owner: &str| {
            SimulatedProvider::builder(owner)
                .host(host.clone())
                .clock(Arc::clone(&clock))
                .build()
        };
        let (blue_other, green_other) = (other("green")?, other("blue")?);
        Ok(Fixture {
            blue: Deployment {
                owner: fixture.blue.owner,
                provider: Wrong {
                    inner: fixture.blue.provider,
                    flaw: self.flaw,
                    other: blue_other,
                },
            },
            green: Deployment {
                owner: fixture.green.owner,
                provider: Wrong {
                    inner: fixture.green.provider,
                    flaw: self.flaw,
                    other: green_other,
                },
            },
            timing: fixture.timing,
        })
    }

    async fn set_outage(
        &self,
        deployment: &Deployment<Wrong>,
        down: bool,
    ) -> Result<(), FixtureError> {
        self.inner.apply_outage(&deployment.provider.inner, down);
        Ok(())
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        self.inner.command(run_time)
    }

    fn command_writing(&self, run_time: Duration, bytes: u64) -> Option<Vec<String>> {
        self.inner.command_writing(run_time, bytes)
    }
}

// P9: the checks catch output that survives its instance's destroy.
#[test]
fn p9_catches_output_that_survives_destroy() {
    let factory = WrongFactory {
        flaw: Flaw::OutputSurvivesDestroy,
        inner: SimulatedFactory::modelled(),
    };
    let failure = check_capabilities(&factory).unwrap_err();
    assert_eq!(failure.clause, "P9");
    assert!(failure.what.contains("must be NotFound"), "{failure}");
}

// P9: the checks catch a hint that names another owner's instance.
#[test]
fn p9_catches_a_hint_for_another_owners_instance() {
    let factory = WrongFactory {
        flaw: Flaw::HintsForeign,
        inner: SimulatedFactory::modelled(),
    };
    let failure = check_capabilities(&factory).unwrap_err();
    assert_eq!(failure.clause, "P9");
    assert!(
        failure.what.contains("another owner's instance"),
        "{failure}"
    );
}

// P9: a backend without the capabilities passes, saying it has neither.
#[test]
fn p9_a_backend_without_capabilities_says_so() {
    struct Without(SimulatedFactory);
    #[derive(Debug)]
    struct Bare(Severable);
    #[async_trait]
    impl Provider for Bare {
        fn kind(&self) -> ProviderKind {
            self.0.kind()
        }
        fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
            self.0.accepts(trust)
        }
        async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
            self.0.launch(spec).await
        }
        async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
            self.0.find(name).await
        }
        async fn list(&self) -> Result<Vec<Instance>, Error> {
            self.0.list().await
        }
        async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
            self.0.destroy(id).await
        }
    }
    #[async_trait]
    impl ProviderFactory for Without {
        type Provider = Bare;
        fn policies(&self) -> Policies {
            self.0.policies()
        }
        async fn build(&self) -> Result<Fixture<Bare>, FixtureError> {
            Ok(self.0.build().await?.map(Bare))
        }
        async fn set_outage(&self, d: &Deployment<Bare>, down: bool) -> Result<(), FixtureError> {
            self.0.apply_outage(&d.provider.0, down);
            Ok(())
        }
        fn command(&self, run_time: Duration) -> Vec<String> {
            self.0.command(run_time)
        }
    }
    let report = check_capabilities(&Without(SimulatedFactory::modelled())).unwrap();
    assert!(!report.output && !report.hints && report.hints_seen == 0);
}
