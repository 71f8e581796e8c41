//! The one loop ([`Driver`]) with hooks of the test's own: the tap sees every
//! decision after the counts that include it, the gate holds calls until
//! released and in order, a drain drops new calls but still hands the core
//! the answers of calls in flight, and a call past its deadline is dropped.
//! The provider is scripted: its lists answer empty, or wait until the test
//! lets them go, and its launches fail as unavailable.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, SystemClock};
use billet_config::Config;
use billet_provider::{
    Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass,
};
use billet_scheduler::{
    Action, Answer, Call, CallEnded, Core, Decision, Driver, Flow, Gate, Hooks, Job, JobId, Pools,
    Settings, Turn,
};
use tokio::sync::{Semaphore, mpsc};

const ONE: &str = "
deployment: {id: blue}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: runner}}
  - {name: big, kind: docker, capacity: 2, docker: {image: runner}}
routing: {default_kind: docker}
";

/// Lists answer empty once a permit is there (every list takes one; with
/// `free`, permits never run out); launches fail as unavailable.
#[derive(Debug)]
struct Scripted {
    lists: Semaphore,
    listed: AtomicUsize,
}

impl Scripted {
    fn new(free: bool) -> Arc<Scripted> {
        Arc::new(Scripted {
            lists: Semaphore::new(if free { Semaphore::MAX_PERMITS } else { 0 }),
            listed: AtomicUsize::new(0),
        })
    }
}

#[async_trait::async_trait]
impl Provider for Scripted {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Docker
    }
    fn accepts(&self, _: TrustClass) -> Result<(), Error> {
        Ok(())
    }
    async fn launch(&self, _: Spec) -> Result<Instance, Error> {
        Err(Error::unavailable("scripted"))
    }
    async fn find(&self, _: &str) -> Result<Option<Instance>, Error> {
        Ok(None)
    }
    async fn list(&self) -> Result<Vec<Instance>, Error> {
        self.lists.acquire().await.expect("never closed").forget();
        self.listed.fetch_add(1, Ordering::SeqCst);
        Ok(Vec::new())
    }
    async fn destroy(&self, _: &InstanceId) -> Result<Teardown, Error> {
        Ok(Teardown::Absent)
    }
}

fn pools_of(provider: &Arc<Scripted>, settings: Settings) -> Pools {
    let provider: Arc<dyn Provider> = provider.clone();
    Pools::builder(Config::from_yaml_str(ONE).unwrap())
        .provider("linux", Arc::clone(&provider))
        .provider("big", provider)
        .settings(settings)
        .build()
        .unwrap()
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// What the hooks were told, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Told {
    /// `observe`, with the accepted count it read.
    Observed(u64),
    Decided(String),
    DecidedAll,
    Calling(&'static str, usize),
    Ended(usize, bool, bool),
}

fn call_name(call: &Call) -> &'static str {
    match call {
        Call::Launch(_) => "launch",
        Call::Find(_) => "find",
        Call::List => "list",
        Call::Destroy(_) => "destroy",
    }
}

fn decision_name(decision: &Decision) -> String {
    match decision {
        Decision::Placed { job, .. } => format!("placed {}", job.0),
        Decision::Retrying { job, .. } => format!("retrying {}", job.0),
        other => format!("{other:?}"),
    }
}

/// Inputs from the test: a job to submit, a release, a drain, or a permit
/// for the provider's lists.
#[derive(Debug)]
enum In {
    Submit(u64),
    Release(u64),
    Drain(Duration),
}

struct Recorder {
    inputs: mpsc::UnboundedReceiver<In>,
    told: Vec<Told>,
    /// What the gate answers.
    gate: Gate,
    /// Released into the provider's lists when a drain is asked for.
    on_drain: Option<(Arc<Scripted>, usize)>,
    in_flight_at_drain: Option<usize>,
    /// Asks for a drain once this many of pool 0's calls were dropped.
    drain_after_drops: Option<(usize, mpsc::UnboundedSender<In>)>,
    /// Asks for a drain once this decision is told.
    drain_on: Option<(String, mpsc::UnboundedSender<In>)>,
}

impl Recorder {
    fn new(gate: Gate) -> (Recorder, mpsc::UnboundedSender<In>) {
        let (send, inputs) = mpsc::unbounded_channel();
        let recorder = Recorder {
            inputs,
            told: Vec::new(),
            gate,
            on_drain: None,
            in_flight_at_drain: None,
            drain_after_drops: None,
            drain_on: None,
        };
        (recorder, send)
    }

    fn calls(&self) -> Vec<(&'static str, usize)> {
        self.told
            .iter()
            .filter_map(|told| match told {
                Told::Calling(call, pool) => Some((*call, *pool)),
                _ => None,
            })
            .collect()
    }
}

impl Hooks for Recorder {
    type Input = In;
    type Error = String;

    async fn next_input(&mut self) -> Option<In> {
        self.inputs.recv().await
    }

    fn on_input(&mut self, input: In, turn: Turn<'_>) -> Result<Flow, String> {
        Ok(match input {
            In::Submit(id) => {
                let job = Job::new(JobId(id), ["true"]).with_trust(TrustClass::Trusted);
                turn.core.submit(job, turn.now).map_err(|r| r.to_string())?;
                Flow::Continue
            }
            In::Release(through) => Flow::Release(through),
            In::Drain(grace) => {
                self.in_flight_at_drain = Some(turn.in_flight);
                if let Some((provider, permits)) = &self.on_drain {
                    provider.lists.add_permits(*permits);
                }
                Flow::Drain(turn.now + grace)
            }
        })
    }

    fn observe(&mut self, core: &Core) {
        self.told.push(Told::Observed(core.stats().accepted));
    }

    fn decided(&mut self, decision: Decision, _: SystemTime) {
        let name = decision_name(&decision);
        if let Some((wanted, inputs)) = &self.drain_on
            && *wanted == name
        {
            inputs.send(In::Drain(Duration::ZERO)).unwrap();
        }
        self.told.push(Told::Decided(name));
    }

    fn decided_all(&mut self, _: SystemTime) {
        self.told.push(Told::DecidedAll);
    }

    fn gate(&mut self, _: &Action) -> Gate {
        self.gate
    }

    fn calling(&mut self, action: &Action, _: SystemTime) {
        self.told
            .push(Told::Calling(call_name(&action.call), action.pool.0));
    }

    fn ended(&mut self, call: &CallEnded) {
        let listed = matches!(call.answer, Some(Answer::Listed(Ok(_))));
        self.told.push(Told::Ended(call.pool.0, call.list, listed));
        if let Some((wanted, inputs)) = &self.drain_on
            && *wanted == format!("ended {}", call.pool.0)
        {
            inputs.send(In::Drain(Duration::ZERO)).unwrap();
        }
        if call.answer.is_none()
            && call.pool.0 == 0
            && let Some((left, inputs)) = &mut self.drain_after_drops
        {
            *left -= 1;
            if *left == 0 {
                inputs.send(In::Drain(Duration::ZERO)).unwrap();
            }
        }
    }
}

/// Runs the loop, failing the test rather than hanging if it never returns.
async fn run(driver: &mut Driver, hooks: &mut Recorder) -> Result<(), String> {
    tokio::time::timeout(Duration::from_secs(20), driver.run(hooks))
        .await
        .expect("the loop returned")
}

// B1, B8: a step tells the counts, then every decision in order, then that
// the decisions are all told, and only then asks the gate for each call: the
// first step's calls are one inventory read per pool, in pool order. Held
// calls go out only when a release names their ticket, in the order held.
#[tokio::test]
async fn b1_the_gate_holds_calls_until_their_ticket_is_released() {
    let provider = Scripted::new(true);
    let pools = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, _inputs) = Recorder::new(Gate::Hold(3));
    driver.step(&mut hooks);
    assert_eq!(hooks.told, [Told::Observed(0), Told::DecidedAll]);
    assert_eq!((driver.held(), driver.in_flight()), (2, 0));
    driver.release(2, &mut hooks);
    assert_eq!((driver.held(), driver.in_flight()), (2, 0), "ticket 3 > 2");
    driver.release(3, &mut hooks);
    assert_eq!((driver.held(), driver.in_flight()), (0, 2));
    assert_eq!(hooks.calls(), [("list", 0), ("list", 1)]);
    assert!(format!("{driver:?}").contains("in_flight: 2"));
}

// B1: a release the owner's input asks for ([`Flow::Release`]) lets the
// held calls go from inside the loop.
#[tokio::test]
async fn b1_an_input_releases_held_calls_inside_the_loop() {
    let provider = Scripted::new(true);
    let pools = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Hold(1));
    inputs.send(In::Release(1)).unwrap();
    hooks.drain_on = Some(("ended 1".to_owned(), inputs));
    run(&mut driver, &mut hooks).await.unwrap();
    assert_eq!(hooks.calls(), [("list", 0), ("list", 1)]);
    assert!(provider.listed.load(Ordering::SeqCst) >= 1);
}

// B1: with the gate open, the loop makes each call at once; the tap sees a
// submitted job's decisions after the counts that include it; an inventory
// read's end is told to `ended` before the core sees it; when the inputs end,
// the loop returns.
#[tokio::test]
async fn b1_the_tap_sees_each_decision_after_counts_that_include_it() {
    let provider = Scripted::new(true);
    let pools = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Go);
    inputs.send(In::Submit(1)).unwrap();
    hooks.drain_on = Some(("retrying 1".to_owned(), inputs));
    run(&mut driver, &mut hooks).await.unwrap();
    let placed = hooks
        .told
        .iter()
        .position(|t| *t == Told::Decided("placed 1".to_owned()));
    let Some(placed) = placed else {
        panic!("job 1 was not placed: {:?}", hooks.told)
    };
    assert_eq!(
        hooks.told[placed - 1],
        Told::Observed(1),
        "{:?}",
        hooks.told
    );
    assert!(hooks.told[..placed].contains(&Told::Ended(0, true, true)));
    assert!(
        hooks.told[placed..].contains(&Told::DecidedAll),
        "{:?}",
        hooks.told
    );
    // The submission came first (inputs before answers), so it waited for
    // the inventories (B8) and was placed by the step after the first.
    let first_calls = &hooks.calls()[..2];
    assert_eq!(first_calls, [("list", 0), ("list", 1)]);
    assert!(
        hooks.calls().contains(&("launch", 0)),
        "{:?}",
        hooks.calls()
    );
}

// L7 (through the loop): once a drain is asked, no new call goes out, but
// the answers of calls in flight still reach the core; the loop returns as
// soon as none is left, long before the drain's end.
#[tokio::test]
async fn l7_a_drain_drops_new_calls_and_waits_for_those_in_flight() {
    let provider = Scripted::new(false);
    let pools = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Go);
    hooks.on_drain = Some((Arc::clone(&provider), 2));
    // The lists hang until the drain lets them answer; the submission
    // leads to a placement only once they have.
    inputs.send(In::Submit(1)).unwrap();
    inputs.send(In::Drain(Duration::from_secs(3600))).unwrap();
    run(&mut driver, &mut hooks).await.unwrap();
    assert_eq!(hooks.in_flight_at_drain, Some(2));
    assert_eq!(provider.listed.load(Ordering::SeqCst), 2);
    let ended: Vec<_> = hooks
        .told
        .iter()
        .filter(|t| matches!(t, Told::Ended(..)))
        .collect();
    assert_eq!(ended.len(), 2, "both lists answered: {:?}", hooks.told);
    assert!(
        hooks.told.contains(&Told::Decided("placed 1".to_owned())),
        "the answers reached the core while draining: {:?}",
        hooks.told
    );
    assert_eq!(
        hooks.calls(),
        [("list", 0), ("list", 1)],
        "the launch asked for while draining was never made"
    );
    assert_eq!(driver.in_flight(), 0);
}

// L7: a drain whose calls never answer ends at its deadline, the calls
// dropped; calls held by the gate are dropped too, even when released.
#[tokio::test]
async fn l7_a_drain_ends_at_its_deadline_and_drops_held_calls() {
    let provider = Scripted::new(false);
    let pools = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Go);
    inputs.send(In::Drain(Duration::from_millis(50))).unwrap();
    run(&mut driver, &mut hooks).await.unwrap();
    assert_eq!(driver.in_flight(), 2, "the hung lists are still there");
    assert!(!hooks.told.iter().any(|t| matches!(t, Told::Ended(..))));

    let provider = Scripted::new(true);
    let held = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&held, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Hold(1));
    inputs.send(In::Drain(Duration::from_secs(3600))).unwrap();
    // Nothing in flight: the drain is over at once.
    run(&mut driver, &mut hooks).await.unwrap();
    assert_eq!(driver.held(), 2);
    driver.release(1, &mut hooks);
    assert_eq!(hooks.calls(), [], "held calls are dropped once draining");
    assert_eq!((driver.held(), driver.in_flight()), (0, 0));
}

// B5 (through the loop): a call still running at its deadline is dropped
// and told to `ended` with no answer; the core, timed by its own timer,
// treats it as lost and asks again.
#[tokio::test]
async fn b5_a_call_past_its_deadline_is_dropped_and_asked_again() {
    let provider = Scripted::new(false);
    let settings = Settings {
        call_timeout: Duration::from_millis(20),
        reconcile_every: Duration::from_millis(20),
        ..Settings::default()
    };
    let pools = pools_of(&provider, settings);
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Go);
    hooks.drain_after_drops = Some((2, inputs));
    run(&mut driver, &mut hooks).await.unwrap();
    let dropped = hooks
        .told
        .iter()
        .filter(|t| **t == Told::Ended(0, true, false))
        .count();
    assert_eq!(dropped, 2, "{:?}", hooks.told);
    let lists = hooks.calls().iter().filter(|c| **c == ("list", 0)).count();
    assert_eq!(lists, 2, "asked again after the first drop");
}

// The owner's error stops the loop and is the loop's answer.
#[tokio::test]
async fn b1_an_input_that_fails_stops_the_loop_with_its_error() {
    let provider = Scripted::new(true);
    let pools = pools_of(&provider, Settings::default());
    let mut driver = Driver::new(&pools, clock());
    let (mut hooks, inputs) = Recorder::new(Gate::Go);
    inputs.send(In::Submit(1)).unwrap();
    // The same id twice is refused by the core.
    inputs.send(In::Submit(1)).unwrap();
    let error = run(&mut driver, &mut hooks).await.unwrap_err();
    assert!(!error.is_empty());
}

/// An owner whose inputs never run out: each moves a manual clock on by
/// `step` and notes whether anything was due and not yet handled when it
/// came in.
struct Flood {
    clock: Arc<billet_clock::ManualClock>,
    step: Duration,
    inputs: usize,
    /// Inputs handled while a timer of the core was already due.
    behind_a_due_timer: usize,
    /// Inputs handled while a call had ended and not been handed to the core.
    lists_ended: usize,
    listed_at_input: Vec<usize>,
    provider: Arc<Scripted>,
}

impl Hooks for Flood {
    type Input = ();
    type Error = String;

    async fn next_input(&mut self) -> Option<()> {
        Some(())
    }

    fn on_input(&mut self, (): (), turn: Turn<'_>) -> Result<Flow, String> {
        if turn.core.poll_timeout().is_some_and(|at| at <= turn.now) {
            self.behind_a_due_timer += 1;
        }
        self.listed_at_input
            .push(self.provider.listed.load(Ordering::SeqCst));
        self.inputs += 1;
        self.clock.advance(self.step).map_err(|e| e.to_string())?;
        Ok(if self.inputs == 400 {
            Flow::Drain(turn.now)
        } else {
            Flow::Continue
        })
    }

    fn decided(&mut self, _: Decision, _: SystemTime) {}

    fn ended(&mut self, call: &CallEnded) {
        if call.list {
            self.lists_ended += 1;
        }
    }
}

// L12: an owner whose inputs are always ready does not starve the loop: after
// each input, the calls that ended and the timer that fell due are handled
// before the next input, so no input is ever handled while the core's timer
// is due, and the reconciles keep their interval in the clock's time.
#[tokio::test]
async fn l12_a_flood_of_inputs_never_holds_back_a_due_timer_or_an_answer() {
    let provider = Scripted::new(true);
    let settings = Settings {
        reconcile_every: Duration::from_secs(60),
        ..Settings::default()
    };
    let pools = pools_of(&provider, settings);
    let manual = Arc::new(billet_clock::ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let clock: Arc<dyn Clock> = Arc::clone(&manual) as Arc<dyn Clock>;
    let mut driver = Driver::new(&pools, clock);
    let mut flood = Flood {
        clock: manual,
        step: Duration::from_secs(1),
        inputs: 0,
        behind_a_due_timer: 0,
        lists_ended: 0,
        listed_at_input: Vec::new(),
        provider: Arc::clone(&provider),
    };
    tokio::time::timeout(Duration::from_secs(20), driver.run(&mut flood))
        .await
        .expect("the loop returned")
        .unwrap();
    assert_eq!(flood.inputs, 400);
    assert_eq!(
        flood.behind_a_due_timer, 0,
        "an input went before a due timer"
    );
    // 400 modelled seconds with a reconcile every 60: the first inventory
    // of both pools and six more rounds at least, every answer handed over.
    let lists = provider.listed.load(Ordering::SeqCst);
    assert!(lists >= 2 * 7, "{lists} lists in 400 s of a 60 s interval");
    assert!(flood.lists_ended >= 2 * 7, "{}", flood.lists_ended);
    // The first inventories were answered behind the first input, not last.
    assert!(
        flood.listed_at_input[1] >= 2,
        "{:?}",
        &flood.listed_at_input[..3]
    );
}

/// Records what the loop says it waits on, and drains once it has seen
/// `quiet_turns` turns with nothing in flight.
struct Watcher {
    waits: Vec<billet_scheduler::Waiting>,
    inputs: mpsc::UnboundedReceiver<In>,
    gate: Gate,
}

impl Hooks for Watcher {
    type Input = In;
    type Error = String;

    async fn next_input(&mut self) -> Option<In> {
        self.inputs.recv().await
    }

    fn on_input(&mut self, input: In, turn: Turn<'_>) -> Result<Flow, String> {
        Ok(match input {
            In::Release(through) => Flow::Release(through),
            In::Drain(grace) => Flow::Drain(turn.now + grace),
            In::Submit(_) => Flow::Continue,
        })
    }

    fn decided(&mut self, _: Decision, _: SystemTime) {}

    fn gate(&mut self, _: &Action) -> Gate {
        self.gate
    }

    fn waiting(&mut self, waiting: &billet_scheduler::Waiting) {
        self.waits.push(*waiting);
    }
}

// B1: before each wait the loop says what it waits on: the calls in flight
// and held, and when its timer wakes it. Held calls are counted until a
// release lets them go; once the first inventories are answered (behind the
// release, by the loop's catch-up) nothing is in flight and the loop waits
// for the next reconcile.
#[tokio::test]
async fn b1_the_loop_says_what_it_waits_on() {
    let provider = Scripted::new(true);
    let every = Duration::from_secs(60);
    let pools = pools_of(
        &provider,
        Settings {
            reconcile_every: every,
            ..Settings::default()
        },
    );
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let manual = Arc::new(billet_clock::ManualClock::new(start));
    let clock: Arc<dyn Clock> = Arc::clone(&manual) as Arc<dyn Clock>;
    let mut driver = Driver::new(&pools, clock);
    let (send, inputs) = mpsc::unbounded_channel();
    let mut watcher = Watcher {
        waits: Vec::new(),
        inputs,
        gate: Gate::Hold(1),
    };
    send.send(In::Release(1)).unwrap();
    send.send(In::Drain(Duration::ZERO)).unwrap();
    tokio::time::timeout(Duration::from_secs(20), driver.run(&mut watcher))
        .await
        .expect("the loop returned")
        .unwrap();
    let waits = watcher.waits;
    // First: both pools' lists held by the gate, none in flight.
    assert_eq!(
        (waits[0].held, waits[0].in_flight, waits[0].draining),
        (2, 0, false)
    );
    assert_eq!(waits[0].now, start);
    // Released, made, answered: nothing in flight, the next reconcile ahead.
    let quiet = waits
        .iter()
        .find(|w| w.held == 0 && w.in_flight == 0 && !w.draining)
        .expect("a quiet wait");
    assert_eq!(quiet.wake, Some(start + every), "{waits:?}");
    assert_eq!(waits.len(), 2, "then the drain ends the loop: {waits:?}");
    assert_eq!(provider.listed.load(Ordering::SeqCst), 2);
}
