//! H1, H7, H8: the contract suite catches deliberately wrong providers, each a
//! wrapper around the simulated provider that breaks one obligation, and
//! shrinks each failure to a short sequence. The modelled flaws run on a
//! manual clock; the wall-time flaws on the system clock with whole-connection
//! outages, as a real backend runs the suite.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_conformance::{
    ContractConfig, ContractFailure, Deployment, Fixture, FixtureError, Outage, Policies,
    ProviderFactory, WallWindows, check_contract, replay,
};
use billet_provider::{
    Error, ErrorKind, Instance, InstanceId, Provider, ProviderKind, Spec, State, Teardown,
    TrustClass,
};
use billet_simulated::conformance::SimulatedClock;
use billet_simulated::{Severable, SimulatedFactory, parse_run_for};

/// The one obligation a [`Broken`] provider breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// `list` drops an instance when it holds three or more.
    ListDropsOne,
    /// `destroy` of another deployment's id answers `Absent` instead of `NotOwned`.
    DestroyForeignSucceeds,
    /// `find` compares names ignoring case (answering the match with the
    /// least id, so that it fails the same way on every run).
    FindFoldsCase,
    /// `list` answers an empty inventory instead of its error during an outage.
    OutageListsEmpty,
    /// `launch` starts unclassified work instead of refusing it.
    LaunchesUnknownTrust,
    /// Instances report `Running` until well after their run time ([`LATE`]).
    StopsLate,
    /// Instances report `Pending` for ever instead of `Running`.
    PendingForever,
    /// When a whole-connection outage ends, one instance is gone.
    ForgetsAcrossOutage,
    /// A launch during a whole-connection outage answers `Unavailable` but
    /// starts the instance all the same.
    LaunchLeaksDuringOutage,
    /// A destroy during a whole-connection outage answers `Unavailable` but
    /// removes the instance all the same.
    DestroyRemovesDuringOutage,
    /// Every instance says it started an hour before it did.
    StartedAnHourEarly,
    /// `list` answers each instance's name in upper case.
    ListRenames,
    /// `list` answers each instance with another owner.
    ListDisowns,
    /// `list` answers each instance as of another kind than the provider's.
    ListChangesKind,
    /// `list` answers each instance with a start time a millisecond after
    /// the one its launch answered.
    ListMovesStart,
    /// Breaks nothing: instances are `Pending` for [`LAG_PENDING`] after
    /// launch returns (one a launch that lost its answer left: after the
    /// outage that followed ends) and stop [`LAG_END`] late, inside
    /// [`LAGGING_WINDOWS`].
    LagsWithinWindows,
    /// `launch` answers `Running`, and answers in the next [`LAG_PENDING`]
    /// say `Pending` again.
    GoesBackToPending,
    /// `destroy` compares ids ignoring case.
    DestroyFoldsCase,
    /// Breaks nothing: ids are digits only (each byte of the simulated id as
    /// three decimal digits), so upper and lower case of an id are the id itself.
    DigitIds,
    /// `find` of a held name answers the deployment's newest instance.
    FindAnswersNewest,
    /// `accepts(Trusted)` refuses.
    RefusesTrusted,
    /// `accepts` refuses with the right trust class but another kind.
    RefusalNamesWrongKind,
    /// `destroy` of another deployment's id answers `NotOwned` naming the wrong owner.
    NotOwnedWrongOwner,
    /// A spec `launch` finds invalid is answered `Unavailable`.
    InvalidSpecUnavailable,
    /// A spec with an invalid command and a held name is answered `Unavailable`.
    HeldNameInvalidUnavailable,
    /// `Conflict` names the held name in upper case.
    ConflictNamesAnother,
    /// `list` answers the first instance twice.
    ListDuplicates,
    /// `list` answers `Unavailable` instead of `InventoryUnavailable` during an outage.
    OutageListsUnavailable,
    /// `destroy` of a held instance answers `Requested` although the backend is
    /// authoritative (`Policies::unknown_destroy` is `Absent`).
    DestroyAnswersRequested,
    /// `destroy` of an id the host does not hold answers `Stopped`.
    NeverHeldStopped,
    /// Breaks nothing: a backend that can only ask (`unknown_destroy` is
    /// `Requested`) and answers every destroy `Requested`.
    AsksOnly,
    /// Every instance says it started an hour after it did.
    StartedAnHourLate,
    /// During a whole-connection outage, `launch` of a spec that would start
    /// (trusted, named, a valid command) answers `InvalidSpec`.
    CutLaunchSaysInvalid,
    /// During a whole-connection outage, `destroy` answers `InvalidSpec`.
    CutDestroySaysInvalid,
    /// During a whole-connection outage, `destroy` of another deployment's id
    /// answers `Absent`.
    CutForeignDestroyAbsent,
    /// Breaks nothing: during a whole-connection outage, `launch` still
    /// refuses what it can judge without its daemon (trust, name, command)
    /// and `destroy` of another deployment's id still answers `NotOwned`.
    JudgesOfflineDuringCut,
    /// An instance left by a launch whose answer was lost mid-call is
    /// reported `Pending` for ever (as a container created and never started).
    PendingAfterLostLaunch,
    /// An instance left by a launch whose answer was lost mid-call is
    /// reported under another name.
    RenamesAfterLostLaunch,
    /// A destroy whose answer was lost mid-call removed the instance, yet
    /// `list` and `find` still show it as it was.
    ShowsLostDestroy,
    /// A launch whose answer was lost mid-call answers `InvalidSpec` instead
    /// of an outage's error.
    LostLaunchSaysInvalid,
    /// A destroy whose answer was lost mid-call answers `InvalidSpec` instead
    /// of an outage's error.
    LostDestroySaysInvalid,
    /// Breaks nothing: a mid-call fault before the first exchange loses the
    /// request instead of its answer, so the call never reaches the host (the
    /// worlds where a lost launch or destroy did not happen).
    LosesRequests,
    /// `launch` works out when an instance stops as `SystemTime` plus its run
    /// time, which panics (an overflow) for a run time of `Duration::MAX`.
    PanicsOnNeverEnding,
}

/// The windows of the wall-time fixtures of [`Flaw::LagsWithinWindows`] and
/// [`Flaw::GoesBackToPending`]: `Pending` may last 20 ms after launch returns.
const LAGGING_WINDOWS: WallWindows = WallWindows {
    pending: Duration::from_millis(20),
    around_end: Duration::from_millis(5),
};
/// How long after launch returns a lagging instance says `Pending`: half its window.
const LAG_PENDING: Duration = Duration::from_millis(10);
/// How long after its stop time a lagging instance says `Running`: half its window.
const LAG_END: Duration = Duration::from_micros(2500);

/// The simulated backend in wall time with [`LAGGING_WINDOWS`].
fn lagging() -> SimulatedFactory {
    SimulatedFactory {
        clock: SimulatedClock::Wall(LAGGING_WINDOWS),
        ..SimulatedFactory::wall()
    }
}

/// How long after its run time a [`Flaw::StopsLate`] instance still runs:
/// twenty times the simulated backend's window around the end.
const LATE: Duration = Duration::from_millis(100);

/// The simulated provider with one flaw.
#[derive(Debug)]
struct Broken {
    inner: Severable,
    flaw: Flaw,
    /// When each instance really stops, by id.
    stops: Mutex<HashMap<InstanceId, SystemTime>>,
    /// When each instance's launch returned, by id.
    returned: Mutex<HashMap<InstanceId, SystemTime>>,
    /// The id of each held instance, by name.
    held: Mutex<HashMap<String, InstanceId>>,
    /// The instances launches that lost their answer left, by id.
    left: Mutex<HashSet<InstanceId>>,
    /// Instances a destroy that lost its answer removed, as they were.
    ghosts: Mutex<Vec<Instance>>,
    /// Instances launches that lost their answer left, whose outage has not
    /// ended yet.
    awaiting: Mutex<Vec<InstanceId>>,
    /// A mid-call fault of [`Flaw::LosesRequests`] armed for the next call.
    loses_request: AtomicBool,
}

impl Broken {
    /// An instance as this flawed provider reports it.
    fn report(&self, mut instance: Instance) -> Instance {
        if self.flaw == Flaw::StartedAnHourEarly {
            instance.started_at -= Duration::from_secs(3600);
        }
        if self.flaw == Flaw::StartedAnHourLate {
            instance.started_at += Duration::from_secs(3600);
        }
        if self.left.lock().unwrap().contains(&instance.id) {
            match self.flaw {
                Flaw::PendingAfterLostLaunch => instance.state = State::Pending,
                Flaw::RenamesAfterLostLaunch => {
                    instance.name = format!("lost-{}", instance.name).into();
                }
                _ => {}
            }
        }
        match (self.flaw, instance.state) {
            (Flaw::PendingForever, State::Running) => instance.state = State::Pending,
            (Flaw::StopsLate, State::Stopped { .. }) => {
                let stop = self.stops.lock().unwrap().get(&instance.id).copied();
                if stop.is_some_and(|stop| SystemTime::now() < stop + LATE) {
                    instance.state = State::Running;
                }
            }
            (Flaw::LagsWithinWindows, state) => {
                let now = SystemTime::now();
                let returned = self.returned.lock().unwrap().get(&instance.id).copied();
                let stop = self.stops.lock().unwrap().get(&instance.id).copied();
                // Launch has not returned yet, or has only just.
                if returned.is_none_or(|returned| now < returned + LAG_PENDING) {
                    instance.state = State::Pending;
                } else if matches!(state, State::Stopped { .. })
                    && stop.is_some_and(|stop| now < stop + LAG_END)
                {
                    instance.state = State::Running;
                }
            }
            (Flaw::GoesBackToPending, State::Running) => {
                let returned = self.returned.lock().unwrap().get(&instance.id).copied();
                if returned.is_some_and(|returned| SystemTime::now() < returned + LAG_PENDING) {
                    instance.state = State::Pending;
                }
            }
            _ => {}
        }
        if self.flaw == Flaw::DigitIds {
            instance.id = digits(&instance.id);
        }
        instance
    }

    /// Whether this provider launched `id`.
    fn launched(&self, id: &InstanceId) -> bool {
        self.returned.lock().unwrap().contains_key(id)
    }
}

/// A simulated id as digits only, each byte as three decimal digits
/// ([`Flaw::DigitIds`]).
fn digits(id: &InstanceId) -> InstanceId {
    InstanceId::from(
        id.as_str()
            .bytes()
            .map(|b| format!("{b:03}"))
            .collect::<String>(),
    )
}

/// The simulated id [`digits`] made `id` from, if it is one.
fn undigits(id: &InstanceId) -> Option<InstanceId> {
    let text = id.as_str();
    if text.is_empty() || !text.len().is_multiple_of(3) || !text.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let bytes = (0..text.len())
        .step_by(3)
        .map(|at| text[at..at + 3].parse::<u8>().ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok().map(InstanceId::from)
}

impl Broken {
    /// An instance as this flawed provider's `list` reports it.
    fn misreport_listed(&self, mut instance: Instance) -> Instance {
        match self.flaw {
            Flaw::ListRenames => instance.name = instance.name.to_uppercase().into(),
            Flaw::ListDisowns => instance.owner = format!("not-{}", instance.owner).into(),
            Flaw::ListChangesKind => instance.kind = ProviderKind::Docker,
            Flaw::ListMovesStart => instance.started_at += Duration::from_millis(1),
            _ => {}
        }
        instance
    }
}

#[async_trait]
impl Provider for Broken {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        match (self.flaw, self.inner.accepts(trust)) {
            (Flaw::RefusesTrusted, Ok(())) => Err(Error::Refused {
                trust,
                kind: self.kind(),
            }),
            (Flaw::RefusalNamesWrongKind, Err(Error::Refused { trust, .. })) => {
                Err(Error::Refused {
                    trust,
                    kind: ProviderKind::Docker,
                })
            }
            (_, answer) => answer,
        }
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        if self.loses_request.swap(false, Ordering::SeqCst) {
            self.inner.sever(true);
            return Err(Error::unavailable("the request was lost"));
        }
        if self.flaw == Flaw::LaunchesUnknownTrust && spec.trust == TrustClass::Unknown {
            return self
                .inner
                .launch(spec.with_trust(TrustClass::Trusted))
                .await;
        }
        if self.flaw == Flaw::LaunchLeaksDuringOutage && self.inner.is_severed() {
            let _ = self.inner.provider().launch(spec).await;
            return Err(Error::unavailable("the connection is cut"));
        }
        let run_time = parse_run_for(&spec.command).ok();
        if self.flaw == Flaw::PanicsOnNeverEnding
            && let Some(run_time) = run_time
        {
            // A backend's deadline arithmetic, unchecked.
            let _stops = SystemTime::now() + run_time;
        }
        if self.inner.is_severed() {
            match self.flaw {
                Flaw::CutLaunchSaysInvalid
                    if spec.trust == TrustClass::Trusted
                        && !spec.name.is_empty()
                        && run_time.is_some() =>
                {
                    return Err(Error::invalid_spec("the daemon did not answer"));
                }
                Flaw::JudgesOfflineDuringCut if spec.trust != TrustClass::Trusted => {
                    return Err(Error::Refused {
                        trust: spec.trust,
                        kind: self.kind(),
                    });
                }
                Flaw::JudgesOfflineDuringCut if spec.name.is_empty() || run_time.is_none() => {
                    return Err(Error::invalid_spec("judged without the daemon"));
                }
                _ => {}
            }
        }
        if self.flaw == Flaw::HeldNameInvalidUnavailable
            && run_time.is_none()
            && self.held.lock().unwrap().contains_key(&spec.name)
        {
            return Err(Error::unavailable("the daemon choked on a held name"));
        }
        let name = spec.name.clone();
        let was_severed = self.inner.is_severed();
        let answer = self.inner.launch(spec).await;
        if let Err(err) = &answer
            && err.kind() == ErrorKind::Unavailable
            && let Ok(Some(left)) = self.inner.provider().find(&name).await
            && self.held.lock().unwrap().get(&name) != Some(&left.id)
        {
            // The launch reached the host and its answer was lost: the
            // instance is this provider's; it counts as launched when the
            // outage ends (`BrokenFactory::set_outage`).
            self.left.lock().unwrap().insert(left.id.clone());
            self.awaiting.lock().unwrap().push(left.id.clone());
            self.held.lock().unwrap().insert(name.clone(), left.id);
        }
        let instance = match (self.flaw, answer) {
            (Flaw::LostLaunchSaysInvalid, Err(err))
                if !was_severed && err.kind() == ErrorKind::Unavailable =>
            {
                return Err(Error::invalid_spec("the daemon did not answer"));
            }
            (Flaw::InvalidSpecUnavailable, Err(err)) if err.kind() == ErrorKind::InvalidSpec => {
                return Err(Error::unavailable("the daemon choked on the spec"));
            }
            (Flaw::ConflictNamesAnother, Err(Error::Conflict { name })) => {
                return Err(Error::Conflict {
                    name: name.to_uppercase(),
                });
            }
            (_, answer) => answer?,
        };
        if let Some(stop) = run_time.and_then(|d| instance.started_at.checked_add(d)) {
            self.stops.lock().unwrap().insert(instance.id.clone(), stop);
        }
        let id = instance.id.clone();
        self.held.lock().unwrap().insert(name, id.clone());
        let reported = self.report(instance);
        self.returned.lock().unwrap().insert(id, SystemTime::now());
        Ok(reported)
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        if self.flaw == Flaw::FindFoldsCase {
            let all = self.inner.list().await?;
            return Ok(all
                .into_iter()
                .filter(|i| i.name.to_lowercase() == name.to_lowercase())
                .min_by(|a, b| a.id.cmp(&b.id)));
        }
        let found = self.inner.find(name).await?;
        if found.is_none()
            && let Some(ghost) = self
                .ghosts
                .lock()
                .unwrap()
                .iter()
                .find(|g| *g.name == *name)
        {
            return Ok(Some(ghost.clone()));
        }
        if self.flaw == Flaw::FindAnswersNewest && found.is_some() {
            let all = self.inner.list().await?;
            return Ok(all
                .into_iter()
                .max_by(|a, b| a.id.cmp(&b.id))
                .map(|i| self.report(i)));
        }
        Ok(found.map(|i| self.report(i)))
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        match (self.flaw, self.inner.list().await) {
            (Flaw::ListDropsOne, Ok(mut all)) if all.len() >= 3 => {
                all.pop();
                Ok(all)
            }
            (Flaw::OutageListsEmpty, Err(err)) if err.kind() == ErrorKind::InventoryUnavailable => {
                Ok(Vec::new())
            }
            (Flaw::OutageListsUnavailable, Err(err))
                if err.kind() == ErrorKind::InventoryUnavailable =>
            {
                Err(Error::unavailable("the inventory went away"))
            }
            (Flaw::ListDuplicates, Ok(mut all)) if !all.is_empty() => {
                all.push(all[0].clone());
                Ok(all)
            }
            (_, answer) => answer.map(|all| {
                let ghosts = self.ghosts.lock().unwrap().clone();
                all.into_iter()
                    .map(|i| self.misreport_listed(self.report(i)))
                    .chain(ghosts)
                    .collect()
            }),
        }
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        if self.loses_request.swap(false, Ordering::SeqCst) {
            self.inner.sever(true);
            return Err(Error::unavailable("the request was lost"));
        }
        if self.flaw == Flaw::ShowsLostDestroy && !self.inner.is_severed() {
            let held = self.inner.provider().list().await?;
            let answer = self.inner.destroy(id).await;
            let removed = self.inner.provider().list().await?;
            if let Err(err) = &answer
                && err.kind() == ErrorKind::Unavailable
                && let Some(was) = held.into_iter().find(|i| i.id == *id)
                && !removed.iter().any(|i| i.id == *id)
            {
                self.ghosts.lock().unwrap().push(was);
            }
            return answer;
        }
        if self.flaw == Flaw::DestroyRemovesDuringOutage && self.inner.is_severed() {
            let _ = self.inner.provider().destroy(id).await;
            return Err(Error::unavailable("the connection is cut"));
        }
        let id = &match self.flaw {
            Flaw::DigitIds => undigits(id).unwrap_or_else(|| id.clone()),
            Flaw::DestroyFoldsCase => InstanceId::from(id.as_str().to_lowercase()),
            _ => id.clone(),
        };
        if self.inner.is_severed() {
            match self.flaw {
                Flaw::CutDestroySaysInvalid => {
                    return Err(Error::invalid_spec("the daemon did not answer"));
                }
                Flaw::CutForeignDestroyAbsent | Flaw::JudgesOfflineDuringCut
                    if !self.launched(id) =>
                {
                    // Another deployment's id is refused by the host without
                    // touching anything; this provider's own are not asked.
                    if let Err(err) = self.inner.provider().destroy(id).await
                        && err.kind() == ErrorKind::NotOwned
                    {
                        return match self.flaw {
                            Flaw::CutForeignDestroyAbsent => Ok(Teardown::Absent),
                            _ => Err(err),
                        };
                    }
                }
                _ => {}
            }
        }
        let was_severed = self.inner.is_severed();
        let answer = self.inner.destroy(id).await;
        if let Ok(Teardown::Stopped) = answer {
            self.held.lock().unwrap().retain(|_, held| held != id);
        }
        match (self.flaw, answer) {
            (Flaw::LostDestroySaysInvalid, Err(err))
                if !was_severed && err.kind() == ErrorKind::Unavailable =>
            {
                Err(Error::invalid_spec("the daemon did not answer"))
            }
            (Flaw::DestroyForeignSucceeds, Err(err)) if err.kind() == ErrorKind::NotOwned => {
                Ok(Teardown::Absent)
            }
            (Flaw::NotOwnedWrongOwner, Err(Error::NotOwned { id, .. })) => Err(Error::NotOwned {
                id,
                owner: "wrong-owner".to_owned(),
            }),
            (Flaw::DigitIds, Err(Error::NotOwned { id, owner })) => Err(Error::NotOwned {
                id: digits(&id),
                owner,
            }),
            (Flaw::DestroyAnswersRequested, Ok(Teardown::Stopped))
            | (Flaw::AsksOnly, Ok(Teardown::Stopped | Teardown::Absent)) => Ok(Teardown::Requested),
            (Flaw::NeverHeldStopped, Ok(Teardown::Absent)) => Ok(Teardown::Stopped),
            (_, answer) => answer,
        }
    }
}

/// Builds simulated fixtures whose providers have `flaw`, reusing the
/// simulated factory through [`Fixture::map`].
struct BrokenFactory {
    flaw: Flaw,
    inner: SimulatedFactory,
}

#[async_trait]
impl ProviderFactory for BrokenFactory {
    type Provider = Broken;

    fn policies(&self) -> Policies {
        let mut policies = self.inner.policies();
        if self.flaw == Flaw::AsksOnly {
            policies.unknown_destroy = Teardown::Requested;
        }
        policies
    }

    async fn build(&self) -> Result<Fixture<Broken>, FixtureError> {
        let flaw = self.flaw;
        Ok(self.inner.build().await?.map(|inner| Broken {
            inner,
            flaw,
            stops: Mutex::default(),
            returned: Mutex::default(),
            held: Mutex::default(),
            left: Mutex::default(),
            ghosts: Mutex::default(),
            awaiting: Mutex::default(),
            loses_request: AtomicBool::new(false),
        }))
    }

    async fn lose_answer(
        &self,
        deployment: &Deployment<Broken>,
        after: u32,
    ) -> Result<(), FixtureError> {
        let provider = &deployment.provider;
        if self.flaw == Flaw::LosesRequests && after == 0 {
            provider.loses_request.store(true, Ordering::SeqCst);
            return Ok(());
        }
        self.inner.arm_lost_answer(&provider.inner, after)
    }

    async fn set_outage(
        &self,
        deployment: &Deployment<Broken>,
        down: bool,
    ) -> Result<(), FixtureError> {
        let provider = &deployment.provider;
        if self.flaw == Flaw::ForgetsAcrossOutage && !down {
            // The instance with the least id is lost while the connection is down.
            let held = provider.inner.provider().list().await?;
            if let Some(first) = held.iter().min_by(|a, b| a.id.cmp(&b.id)) {
                provider.inner.provider().destroy(&first.id).await?;
            }
        }
        if !down {
            provider.loses_request.store(false, Ordering::SeqCst);
            // What a lost launch left counts as launched from now: a lagging
            // one is Pending for a while after the outage ends, as H11 allows.
            let now = SystemTime::now();
            let mut returned = provider.returned.lock().unwrap();
            for id in provider.awaiting.lock().unwrap().drain(..) {
                returned.insert(id, now);
            }
        }
        self.inner.apply_outage(&provider.inner, down);
        Ok(())
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        self.inner.command(run_time)
    }
}

/// Runs the suite on a provider with `flaw` (modelled time) and answers its
/// failure; fails the test if the flaw went unnoticed or the sequence did not
/// shrink to `shortest` steps, the fewest that show the flaw.
fn caught(flaw: Flaw, shortest: usize) -> ContractFailure {
    // A fixed case count and seed, whatever PROPTEST_CASES says: the flaw
    // must be found, and shrinking (which can stop in a local minimum for
    // an unlucky draw) is reproducible.
    let failure = failure_of(
        flaw,
        SimulatedFactory::modelled(),
        ContractConfig::default().with_cases(256),
    );
    assert_eq!(
        failure.steps.len(),
        shortest,
        "{flaw:?}: the failure did not shrink to the shortest sequence:\n{failure}"
    );
    failure
}

/// Runs the suite on a provider with `flaw` in wall time (the system clock,
/// whole-connection outages) and answers its failure; fails the test if the
/// flaw went unnoticed or its sequence did not shrink to `at_most` steps.
/// Wall time makes a run depend on the machine's pace, so only the bound is fixed.
fn caught_in_wall_time(flaw: Flaw, at_most: usize) -> ContractFailure {
    let failure = failure_of(flaw, SimulatedFactory::wall(), ContractConfig::wall(64));
    assert!(
        !failure.steps.is_empty() && failure.steps.len() <= at_most,
        "{flaw:?}: the failure did not shrink to at most {at_most} steps:\n{failure}"
    );
    failure
}

fn failure_of(flaw: Flaw, inner: SimulatedFactory, mut config: ContractConfig) -> ContractFailure {
    let factory = BrokenFactory { flaw, inner };
    config.proptest.rng_seed = proptest::test_runner::RngSeed::Fixed(0x0b11_e75e_ed00);
    let failure = match check_contract(&factory, config) {
        Ok(summary) => panic!("{flaw:?} went unnoticed by the suite: {summary:?}"),
        Err(failure) => failure,
    };
    println!("{flaw:?} is caught:\n{failure}\n");
    failure
}

// H1: a provider that panics (an overflow on `Duration::MAX` inside
// `launch`) is a failure like any other: `check_contract` answers it (before
// the fix it panicked itself), with the one launch that shows it and a reason
// that names the step and gives the panic's message once.
#[test]
fn h1_a_panicking_provider_is_a_failure_with_its_sequence() {
    let failure = caught(Flaw::PanicsOnNeverEnding, 1);
    assert!(
        failure.steps[0].contains("launch") && failure.steps[0].contains("18446744073709551615"),
        "{failure}"
    );
    assert!(
        failure.reason.starts_with("step 1 (") && failure.reason.contains(": panicked at "),
        "{failure}"
    );
    assert_eq!(failure.reason.matches("overflow").count(), 1, "{failure}");
}

// H1: a run prints its seed, and the same seed draws the same cases and
// shrinks the failure to the same sequence, whatever PROPTEST_RNG_SEED says.
#[test]
fn h1_a_seed_gives_the_same_shrunk_sequence_twice() {
    let run = || {
        let factory = BrokenFactory {
            flaw: Flaw::FindFoldsCase,
            inner: SimulatedFactory::modelled(),
        };
        let config = ContractConfig::default()
            .with_cases(256)
            .with_seed(20_261_201);
        check_contract(&factory, config).expect_err("a find that folds case is caught")
    };
    let first = run();
    assert_eq!(first.seed, Some(20_261_201), "{first}");
    assert!(
        first.to_string().contains(
            "\nseed: 20261201 (BILLET_CONFORMANCE_SEED=20261201 runs the same cases again"
        ),
        "{first}"
    );
    assert_eq!(run(), first);
}

// H1: a printed sequence is a regression test through `replay`: the steps a
// failure printed reproduce it against the wrong provider, with the same
// reason, and pass against the simulated provider; so does a sequence
// written by hand, numbered as a report prints it.
#[test]
fn h1_a_replayed_sequence_reproduces_its_failure_and_passes_on_the_simulated_backend() {
    let broken = BrokenFactory {
        flaw: Flaw::ListDropsOne,
        inner: SimulatedFactory::modelled(),
    };
    let failure = caught(Flaw::ListDropsOne, 3);
    let printed = failure.steps.join("\n");
    let replayed = replay(&broken, &printed).expect_err("the printed sequence fails again");
    assert_eq!(replayed.steps, failure.steps, "{replayed}");
    assert_eq!(replayed.reason, failure.reason, "{replayed}");
    assert_eq!(replayed.seed, None);
    replay(&SimulatedFactory::modelled(), &printed)
        .unwrap_or_else(|failure| panic!("the simulated backend keeps the contract:\n{failure}"));

    let by_hand = r#"
        1. blue: launch "job-a" (trusted, runs for 60s)
        2. blue: launch "job-b" (trusted, runs for 1.5s)
        3. clock: advance 1s
        4. blue: launch "job-c" (trusted, runs for 60s)
        5. blue: list
    "#;
    let replayed = replay(&broken, by_hand).expect_err("three held instances, one dropped");
    assert!(replayed.reason.contains("inventory"), "{replayed}");
    replay(&SimulatedFactory::modelled(), by_hand)
        .unwrap_or_else(|failure| panic!("the simulated backend keeps the contract:\n{failure}"));
}

// H1: a line that is no step, or a step the ones before it do not allow, is
// refused before anything runs, naming the line.
#[test]
fn h1_replay_refuses_a_line_that_is_no_step() {
    let simulated = SimulatedFactory::modelled();
    let failure = replay(&simulated, "blue: list\nblue: launch job-a").unwrap_err();
    assert!(
        failure
            .reason
            .starts_with("line 2 (\"blue: launch job-a\") is not a step: "),
        "{failure}"
    );
    let failure = replay(&simulated, "green: destroy the id of blue's \"job-a\"").unwrap_err();
    assert!(failure.reason.starts_with("step 1 ("), "{failure}");
    assert!(failure.steps.is_empty(), "{failure}");
}

// H1: a list that drops an instance is reported (S6: list never answers short).
#[test]
fn h1_catches_a_list_that_drops_an_instance() {
    let failure = caught(Flaw::ListDropsOne, 3);
    assert!(failure.reason.contains("inventory"), "{failure}");
    assert!(
        failure.steps.iter().all(|s| s.contains("launch")),
        "three launches are the whole story:\n{failure}"
    );
}

// H1: a destroy of a foreign id that succeeds is reported (S8: destroy is
// scoped by identity; another deployment's id is refused with NotOwned).
#[test]
fn h1_catches_a_destroy_of_a_foreign_id_that_succeeds() {
    let failure = caught(Flaw::DestroyForeignSucceeds, 2);
    assert!(failure.reason.contains("NotOwned"), "{failure}");
    assert!(failure.reason.ends_with("got Ok(Absent)"), "{failure}");
    assert!(
        failure.steps.last().unwrap().contains("destroy"),
        "{failure}"
    );
}

// H1: a find that folds case is reported (S7: find compares names exactly).
#[test]
fn h1_catches_a_find_that_folds_case() {
    let failure = caught(Flaw::FindFoldsCase, 2);
    assert!(failure.steps.last().unwrap().contains("find"), "{failure}");
}

// H1: a list that answers empty during an outage is reported (S6, S10: the
// inventory errors rather than answers short).
#[test]
fn h1_catches_a_list_that_answers_empty_during_an_outage() {
    let failure = caught(Flaw::OutageListsEmpty, 2);
    assert!(failure.reason.contains("InventoryUnavailable"), "{failure}");
}

// H1: during an outage list answers InventoryUnavailable (S10, P6): the
// error that tells a caller the inventory is unknown, not another one.
#[test]
fn h1_catches_a_list_that_answers_another_error_during_an_outage() {
    let failure = caught(Flaw::OutageListsUnavailable, 2);
    assert!(failure.steps[0].contains("outage starts"), "{failure}");
    assert!(
        failure.reason.contains(
            "the inventory is failing: expected Err(InventoryUnavailable), got Err(Unavailable"
        ),
        "{failure}"
    );
}

// H1: a launch that starts unclassified work is reported (S9: Unknown is
// refused alongside Untrusted, and nothing is recorded).
#[test]
fn h1_catches_a_launch_that_starts_unknown_work() {
    let failure = caught(Flaw::LaunchesUnknownTrust, 1);
    assert!(failure.reason.contains("Refused"), "{failure}");
}

// H7: instances that report Running well after their run time are caught in
// wall time, once the wall clock is past the window around their end. The
// shortest sequence is a launch and a wait (with a list, 3 steps); on a
// loaded machine a shrink attempt that drops a step may miss the window and
// keep it (CI once kept two steps before the launch), so the bound is looser
// than the shortest and the launch may come after steps that do not matter.
#[test]
fn h7_catches_instances_that_stop_well_after_their_run_time() {
    let failure = caught_in_wall_time(Flaw::StopsLate, 5);
    assert!(failure.reason.contains("wrong state: Running"), "{failure}");
    assert!(
        failure.steps.iter().any(|step| step.contains("launch")),
        "{failure}"
    );
}

// H7: an instance that stays Pending past the declared pending window is caught.
#[test]
fn h7_catches_instances_pending_for_ever() {
    let failure = caught_in_wall_time(Flaw::PendingForever, 2);
    assert!(failure.reason.contains("wrong state: Pending"), "{failure}");
}

// H8: an instance lost across a whole-connection outage is caught when the
// inventory answers again: after recovery it must be exact.
#[test]
fn h8_catches_an_instance_forgotten_across_a_whole_outage() {
    let failure = caught_in_wall_time(Flaw::ForgetsAcrossOutage, 3);
    assert!(failure.reason.contains("missing"), "{failure}");
    assert!(
        failure.steps.last().unwrap().contains("outage ends"),
        "{failure}"
    );
}

// H8: a launch answered with an error during a whole-connection outage that
// started an instance all the same is caught: the model knows that launch did
// not happen, so the instance is unexpected once the inventory answers.
#[test]
fn h8_catches_a_launch_during_a_whole_outage_that_leaves_an_instance() {
    let failure = caught_in_wall_time(Flaw::LaunchLeaksDuringOutage, 3);
    assert!(failure.reason.contains("unexpected"), "{failure}");
    assert!(
        failure.steps.iter().any(|s| s.contains("outage starts")),
        "{failure}"
    );
}

// H7: under wall timing, a start time that does not lie around the launch call
// is caught at once.
#[test]
fn h7_catches_a_start_time_far_from_the_launch_call() {
    let failure = caught_in_wall_time(Flaw::StartedAnHourEarly, 1);
    assert!(
        failure.reason.contains("from the launch call's start"),
        "{failure}"
    );
    // An hour before the instant the launch started, less the time the call
    // took to get there.
    assert!(
        failure.reason.contains("the instance started at -3599.9"),
        "{failure}"
    );
    let failure = caught_in_wall_time(Flaw::StartedAnHourLate, 1);
    assert!(
        failure.reason.contains("the instance started at +3600.0"),
        "{failure}"
    );
}

// H8: a destroy answered with an error during a whole-connection outage that
// removed the instance all the same is caught: once the inventory answers
// (it is missing), or, sooner, when the other deployment's destroy of its id
// is answered Absent instead of NotOwned (it is gone from the host).
#[test]
fn h8_catches_a_destroy_during_a_whole_outage_that_removes() {
    let failure = caught_in_wall_time(Flaw::DestroyRemovesDuringOutage, 4);
    assert!(
        failure.reason.contains("missing")
            || failure
                .reason
                .contains(r#"held by "blue": expected Err(NotOwned"#),
        "{failure}"
    );
    assert!(
        failure.steps.iter().any(|s| s.ends_with("outage starts")),
        "{failure}"
    );
}

/// The failure of the suite run on a provider with `flaw` (modelled time) when
/// proptest's own shrinking is switched off, so that only the suite's
/// deletion pass (which deletes every step it can while the sequence stays
/// valid and failing) shortens the generated sequence.
fn caught_without_proptest_shrinking(flaw: Flaw) -> ContractFailure {
    let mut config = ContractConfig::default().with_cases(256);
    config.proptest.max_shrink_iters = 0;
    failure_of(flaw, SimulatedFactory::modelled(), config)
}

// H1: a failure shrinks to its shortest sequence even when proptest's
// shrinking does nothing: the suite's own pass deletes every step the failure
// does not need. A launch of unclassified work that starts is one step.
// (With shrinking off, check_contract once panicked inside
// proptest-state-machine, "Unexpected non-zero `seen_transitions_counter`",
// instead of reporting the failure.)
#[test]
fn h1_the_suite_deletes_every_step_a_failure_does_not_need() {
    let failure = caught_without_proptest_shrinking(Flaw::LaunchesUnknownTrust);
    assert_eq!(failure.steps.len(), 1, "{failure}");
    assert!(failure.steps[0].contains("launch"), "{failure}");
    assert!(failure.steps[0].contains("unknown"), "{failure}");
    assert!(failure.reason.starts_with("step 1 ("), "{failure}");
    assert!(failure.reason.contains("Refused"), "{failure}");

    // A destroy of the other deployment's instance needs that instance's
    // launch first: deletion keeps the launch the destroy names.
    let failure = caught_without_proptest_shrinking(Flaw::DestroyForeignSucceeds);
    assert_eq!(failure.steps.len(), 2, "{failure}");
    assert!(failure.steps[0].contains("launch"), "{failure}");
    assert!(failure.steps[1].contains("destroy the id of"), "{failure}");
    assert!(failure.reason.starts_with("step 2 ("), "{failure}");
}

// H7: in wall time, every answer about an instance keeps its identity: the
// id, name, owner and kind it was launched with, and the start time its
// launch answered. A list that changes any one of them is caught at the check
// after the launch, and the report shows what was expected and what came.
#[test]
fn h7_wall_time_answers_keep_each_instances_identity() {
    for (flaw, field) in [
        (Flaw::ListRenames, "name: "),
        (Flaw::ListDisowns, "owner: "),
        (Flaw::ListChangesKind, "kind: "),
        (Flaw::ListMovesStart, "started_at: "),
    ] {
        let failure = caught_in_wall_time(flaw, 1);
        assert!(failure.steps[0].contains("launch"), "{flaw:?}: {failure}");
        assert!(
            failure.reason.starts_with("after step 1 ("),
            "{flaw:?}: {failure}"
        );
        let (expected, got) = failure
            .reason
            .split_once("inventory: expected the instance { id: ")
            .and_then(|(_, rest)| rest.split_once(", got Instance {"))
            .unwrap_or_else(|| panic!("{flaw:?}: {failure}"));
        // A field's value in one half of the report (a start time runs to
        // its closing brace; the expected kind is shown as `Display`, the
        // answered one as `Debug`).
        let value = |text: &'static str, part: &str| -> String {
            let at = part
                .find(text)
                .unwrap_or_else(|| panic!("{flaw:?}: {failure}"));
            let value = &part[at + text.len()..];
            let end = if text == "started_at: " {
                value.find(" }")
            } else {
                value.find(", ")
            };
            let value = &value[..end.unwrap_or(value.len())];
            if text == "kind: " {
                value.to_lowercase()
            } else {
                value.to_owned()
            }
        };
        assert_ne!(
            value(field, expected),
            value(field, got),
            "{flaw:?}: {failure}"
        );
        for other in ["name: ", "owner: ", "kind: ", "started_at: "] {
            if other != field {
                assert_eq!(
                    value(other, expected),
                    value(other, got),
                    "{flaw:?}: {failure}"
                );
            }
        }
    }
}

// H7, H11: a backend whose instances stay Pending for a while after launch
// returns (after the outage ends, for one a launch that lost its answer left)
// and stop a little late, each inside the windows it declares, keeps the
// contract in wall time: the suite takes every state its windows allow.
#[test]
fn h7_states_inside_the_declared_windows_pass() {
    let factory = BrokenFactory {
        flaw: Flaw::LagsWithinWindows,
        inner: lagging(),
    };
    // A fixed seed: the sequences include launches that lose their answer
    // and outages after them that last longer than the pending window.
    let mut config = ContractConfig::wall(32);
    config.proptest.rng_seed = proptest::test_runner::RngSeed::Fixed(0x0b11_e75e_ed00);
    let summary = check_contract(&factory, config).unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(summary.cases, 32);
}

// H7: an instance's states only move on (Pending, Running, Stopped): one seen
// Running that is answered Pending again is caught, although Pending alone
// would still be inside its window.
#[test]
fn h7_catches_an_instance_that_goes_back_to_pending() {
    let failure = failure_of(Flaw::GoesBackToPending, lagging(), ContractConfig::wall(64));
    assert_eq!(failure.steps.len(), 1, "{failure}");
    assert!(failure.steps[0].contains("launch"), "{failure}");
    assert!(
        failure
            .reason
            .contains("went back to Pending after it was seen Running"),
        "{failure}"
    );
}

// H1: destroy compares ids exactly (P7, S8): one that removes the instance
// whose id is the named one in the other case is caught by a near miss.
#[test]
fn h1_catches_a_destroy_that_folds_case() {
    let failure = caught(Flaw::DestroyFoldsCase, 2);
    assert!(failure.steps[1].contains("in the other case"), "{failure}");
    assert!(
        failure
            .reason
            .contains(", which the host does not hold: expected Ok(Absent), got "),
        "{failure}"
    );
}

// H1: the suite's near misses never name an issued id, whatever the backend's
// ids are made of: a backend whose ids are digits only (no case to change)
// keeps the contract.
#[test]
fn h1_a_backend_with_ids_of_digits_only_passes() {
    let factory = BrokenFactory {
        flaw: Flaw::DigitIds,
        inner: SimulatedFactory::modelled(),
    };
    let summary = check_contract(&factory, ContractConfig::default().with_cases(64))
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(summary.cases, 64);
}

// H1: find answers the instance of that name (S7), not another one the
// deployment holds: two launches and the find. (With this seed the sequence
// found keeps an outage that starts and ends before the find, a pair no
// single deletion removes: the suite deletes such pairs too.)
#[test]
fn h1_catches_a_find_that_answers_another_instance() {
    let failure = caught(Flaw::FindAnswersNewest, 3);
    assert!(failure.steps[0].contains("launch"), "{failure}");
    assert!(failure.steps[1].contains("launch"), "{failure}");
    assert!(failure.steps[2].contains("find"), "{failure}");
    assert!(
        failure.reason.contains("expected Ok(Some(the instance "),
        "{failure}"
    );
}

// H1: accepts takes trusted work on every backend (S9, P7).
#[test]
fn h1_catches_a_refusal_of_trusted_work() {
    let failure = caught(Flaw::RefusesTrusted, 1);
    assert!(
        failure
            .reason
            .contains("expected trusted work to be accepted, got Err(Refused"),
        "{failure}"
    );
}

// H1: a refusal names the trust class refused and the backend's own kind (P6).
#[test]
fn h1_catches_a_refusal_that_names_another_kind() {
    let failure = caught(Flaw::RefusalNamesWrongKind, 1);
    assert!(failure.steps[0].contains("accepts("), "{failure}");
    assert!(
        failure
            .reason
            .contains("kind: simulated }), got Err(Refused"),
        "{failure}"
    );
    assert!(failure.reason.ends_with("kind: docker })"), "{failure}");
}

// H1: NotOwned names the deployment that owns the instance (S8, P6).
#[test]
fn h1_catches_a_not_owned_that_names_the_wrong_owner() {
    let failure = caught(Flaw::NotOwnedWrongOwner, 2);
    assert!(
        failure.reason.contains(r#"owner: "wrong-owner""#),
        "{failure}"
    );
}

// H1: a spec the backend cannot run is refused as invalid (S4), not as an
// outage.
#[test]
fn h1_catches_an_invalid_spec_answered_as_unavailable() {
    let failure = caught(Flaw::InvalidSpecUnavailable, 1);
    assert!(
        failure
            .reason
            .contains("expected Err(InvalidSpec), nothing recorded; got Err(Unavailable"),
        "{failure}"
    );
}

// H1: a spec both invalid and naming a held instance may be refused either
// way, but only as invalid or as a conflict (S4, S5).
#[test]
fn h1_catches_an_invalid_spec_of_a_held_name_answered_as_unavailable() {
    let failure = caught(Flaw::HeldNameInvalidUnavailable, 2);
    assert!(
        failure.reason.contains(
            "expected Err(InvalidSpec) or Err(Conflict), nothing recorded; got Err(Unavailable"
        ),
        "{failure}"
    );
}

// H1: Conflict names the held name (S5, P6).
#[test]
fn h1_catches_a_conflict_that_names_another_name() {
    let failure = caught(Flaw::ConflictNamesAnother, 2);
    assert!(
        failure.reason.contains("got Err(Conflict { name: \"JOB-"),
        "{failure}"
    );
}

// H1: list answers each instance once (S6).
#[test]
fn h1_catches_a_list_that_answers_an_instance_twice() {
    let failure = caught(Flaw::ListDuplicates, 1);
    assert!(
        failure
            .reason
            .contains("unexpected or duplicated: [Instance {"),
        "{failure}"
    );
}

// H1: an authoritative backend answers Stopped for the held instance it
// removes (P5, S8), and Absent for an id it does not hold.
#[test]
fn h1_catches_destroy_answers_an_authoritative_backend_must_not_give() {
    let failure = caught(Flaw::DestroyAnswersRequested, 2);
    assert!(
        failure
            .reason
            .ends_with("expected Ok(Stopped), got Ok(Requested)"),
        "{failure}"
    );
    let failure = caught(Flaw::NeverHeldStopped, 1);
    assert!(
        failure
            .reason
            .ends_with("expected Ok(Absent), got Ok(Stopped)"),
        "{failure}"
    );
}

// H1: a backend that can only ask (Policies::unknown_destroy is Requested)
// may answer Requested for every destroy, of a held instance too (P5).
#[test]
fn h1_a_backend_that_can_only_ask_passes() {
    let factory = BrokenFactory {
        flaw: Flaw::AsksOnly,
        inner: SimulatedFactory::modelled(),
    };
    let summary = check_contract(&factory, ContractConfig::default().with_cases(64))
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(summary.cases, 64);
}

// H8: during a whole-connection outage launch and destroy answer Unavailable
// (or InventoryUnavailable), never another error that would tell the caller
// something about its spec or id.
#[test]
fn h8_catches_wrong_errors_during_a_whole_outage() {
    let failure = caught_in_wall_time(Flaw::CutLaunchSaysInvalid, 2);
    assert!(
        failure.reason.contains(
            "the connection is cut: expected launch to answer Err(Unavailable) or \
             Err(InventoryUnavailable), recorded nothing; got Err(InvalidSpec"
        ),
        "{failure}"
    );
    let failure = caught_in_wall_time(Flaw::CutDestroySaysInvalid, 3);
    assert!(
        failure.reason.contains(
            "the connection is cut: expected destroy to answer Err(Unavailable) or \
             Err(InventoryUnavailable), removed nothing; got Err(InvalidSpec"
        ),
        "{failure}"
    );
}

// H8: during a whole-connection outage a destroy of another deployment's id
// is not answered Absent: it was not confirmed gone.
#[test]
fn h8_catches_a_foreign_destroy_answered_absent_during_a_whole_outage() {
    let failure = caught_in_wall_time(Flaw::CutForeignDestroyAbsent, 3);
    assert!(
        failure
            .reason
            .contains("the connection is cut: expected destroy to answer"),
        "{failure}"
    );
    assert!(failure.reason.ends_with("got Ok(Absent)"), "{failure}");
}

// H8: during a whole-connection outage a backend may still give the refusals
// it can judge without its daemon: trust, an empty name or a bad command,
// and NotOwned for another deployment's id.
#[test]
fn h8_refusals_judged_without_the_daemon_pass_during_a_whole_outage() {
    let factory = BrokenFactory {
        flaw: Flaw::JudgesOfflineDuringCut,
        inner: SimulatedFactory::wall(),
    };
    let summary = check_contract(&factory, ContractConfig::wall(16))
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(summary.cases, 16);
}

/// The simulated backend in modelled time with whole-connection outages, and
/// so with mid-call faults (H11).
fn modelled_mid_call() -> SimulatedFactory {
    SimulatedFactory::modelled().with_outage(Outage::WholeConnection)
}

/// Runs the suite on a provider with `flaw` in modelled time with mid-call
/// faults; fails the test if the flaw went unnoticed or the sequence did not
/// shrink to `shortest` steps, the fewest that show the flaw.
fn caught_mid_call(flaw: Flaw, shortest: usize) -> ContractFailure {
    let failure = failure_of(
        flaw,
        modelled_mid_call(),
        ContractConfig::default().with_cases(256),
    );
    assert_eq!(
        failure.steps.len(),
        shortest,
        "{flaw:?}: the failure did not shrink to the shortest sequence:\n{failure}"
    );
    failure
}

// H11: an instance a launch left when its answer was lost, reported Pending
// for ever (a container created and never started), is caught once the
// declared pending window after the outage has passed: in wall time with a
// 20 ms window, and at once in modelled time, where states are exact.
#[test]
fn h11_catches_an_instance_left_pending_for_ever_by_a_lost_launch() {
    let failure = failure_of(
        Flaw::PendingAfterLostLaunch,
        lagging(),
        ContractConfig::wall(64),
    );
    assert!(
        (2..=4).contains(&failure.steps.len()),
        "the failure did not shrink:\n{failure}"
    );
    assert!(
        failure.steps[0].contains("launch") && failure.steps[0].contains("fails mid-call"),
        "{failure}"
    );
    assert!(
        failure.steps.iter().any(|s| s.ends_with("outage ends")),
        "{failure}"
    );
    assert!(failure.reason.contains("wrong state: Pending"), "{failure}");
    assert!(
        failure.reason.contains(
            "Pending up to 20ms after its launch lost its answer and the outage after it ended"
        ),
        "{failure}"
    );

    let failure = caught_mid_call(Flaw::PendingAfterLostLaunch, 2);
    assert!(
        failure.steps[0].contains("fails mid-call after 0 exchanges"),
        "{failure}"
    );
    assert!(failure.steps[1].ends_with("outage ends"), "{failure}");
    assert!(failure.reason.contains("state: Pending"), "{failure}");
    assert!(
        failure.reason.contains("lost its answer") && failure.reason.ends_with("so it happened"),
        "{failure}"
    );
}

// H11: an instance a launch left when its answer was lost must be reported
// under the name it was launched with: the inventory then holds an instance
// the settled world ("it did not happen") does not have.
#[test]
fn h11_catches_an_instance_left_by_a_lost_launch_under_another_name() {
    let failure = caught_mid_call(Flaw::RenamesAfterLostLaunch, 2);
    assert!(
        failure.steps[0].contains("fails mid-call after 0 exchanges"),
        "{failure}"
    );
    assert!(
        failure.reason.contains("unexpected or duplicated"),
        "{failure}"
    );
    assert!(failure.reason.contains("name: \"lost-"), "{failure}");
    assert!(
        failure
            .reason
            .contains("so it did not happen: an instance it left must be reported under its name"),
        "{failure}"
    );
    let failure = failure_of(
        Flaw::RenamesAfterLostLaunch,
        SimulatedFactory::wall(),
        ContractConfig::wall(64),
    );
    assert!(failure.steps.len() <= 3, "{failure}");
}

// H11: a destroy whose answer was lost but that removed the instance, while
// list still shows it: the suite takes the world the inventory shows (it did
// not happen), so the instance must still be destroyable and hold its name,
// and it is not.
#[test]
fn h11_catches_a_lost_destroy_that_removed_what_list_still_shows() {
    let failure = caught_mid_call(Flaw::ShowsLostDestroy, 4);
    assert!(failure.steps[0].contains("launch"), "{failure}");
    assert!(
        failure.steps[1].contains("destroy the id of")
            && failure.steps[1].contains("fails mid-call after 0 exchanges"),
        "{failure}"
    );
    assert!(
        failure.steps.iter().any(|s| s.ends_with("outage ends")),
        "{failure}"
    );
    assert!(failure.reason.contains("step 4 ("), "{failure}");
}

// H11: a backend whose lost calls never reached the host (the launch did not
// happen, the destroy did not either) keeps the contract: the suite settles
// the other world from the inventory, in modelled and in wall time.
#[test]
fn h11_calls_that_never_happened_pass() {
    let factory = BrokenFactory {
        flaw: Flaw::LosesRequests,
        inner: modelled_mid_call(),
    };
    let summary = check_contract(&factory, ContractConfig::default().with_cases(64))
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(summary.cases, 64);
    let factory = BrokenFactory {
        flaw: Flaw::LosesRequests,
        inner: SimulatedFactory::wall(),
    };
    let summary = check_contract(&factory, ContractConfig::wall(16))
        .unwrap_or_else(|failure| panic!("{failure}"));
    assert_eq!(summary.cases, 16);
}

// H11: a call whose answer was lost mid-call answers its normal answer or an
// outage's error (Unavailable, InventoryUnavailable), never another error that
// would tell the caller something about its spec or id: a launch that says
// InvalidSpec is caught in one step, and so is a destroy.
#[test]
fn h11_catches_a_lost_answer_reported_as_another_error() {
    let failure = caught_mid_call(Flaw::LostLaunchSaysInvalid, 1);
    assert!(
        failure.steps[0].contains("fails mid-call after 0 exchanges"),
        "{failure}"
    );
    assert!(
        failure.reason.contains(
            "expected a started instance (or, the connection having failed in the middle of the launch, Err(Unavailable) or Err(InventoryUnavailable)), got Err(InvalidSpec"
        ),
        "{failure}"
    );
    let failure = caught_mid_call(Flaw::LostDestroySaysInvalid, 1);
    assert!(failure.steps[0].contains("destroy"), "{failure}");
    assert!(
        failure.steps[0].contains("fails mid-call after 0 exchanges"),
        "{failure}"
    );
    assert!(
        failure.reason.contains(
            "(or, the connection having failed in the middle of the destroy, Err(Unavailable) or Err(InventoryUnavailable))"
        ),
        "{failure}"
    );
}
