//! The concurrent mode of the suite (H12): several tasks call the providers
//! of one fixture at once, every call is recorded with the order of its
//! invocation and its answer, and the history is checked for linearizability
//! with `todc-utils`' Wing-Gong-Lowe checker.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use billet_provider::{Error, ErrorKind, Instance, InstanceId, Provider, Spec, State, Teardown};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use todc_utils::linearizability::WGLChecker;
use todc_utils::linearizability::history::{Action, History};
use todc_utils::specifications::Specification;

use billet_provider::TrustClass;

use crate::{Fixture, ProviderFactory, Timing};

/// How many histories the concurrent mode runs, and how big each is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrentConfig {
    /// Histories to run; each on a fresh fixture.
    pub histories: u32,
    /// Tasks calling at once in each history (2 to 4).
    pub tasks: usize,
    /// Calls each task makes in each history (at least 1).
    pub calls_per_task: usize,
    /// Instance names per deployment the tasks share (1 to 4): few names make
    /// many races on one name.
    pub names: usize,
    /// Where the run's random choices start: the same seed makes the same
    /// calls (their interleaving is the runtime's).
    pub seed: u64,
    /// Whether the tasks run on a multi-thread runtime (two workers), so that
    /// calls really overlap, rather than interleave at await points on one
    /// thread.
    pub multi_thread: bool,
    /// Histories tried at each smaller size (fewer tasks, fewer calls) when
    /// shrinking a failure: the cost of a failure is up to `tasks - 1` x
    /// `calls_per_task` times this many histories, so keep it small for a
    /// backend whose histories take seconds. 0 keeps the failing history
    /// as found (still shrunk by deleting the calls it does not need).
    pub shrink_attempts: u32,
}

impl Default for ConcurrentConfig {
    /// 64 histories of 3 tasks x 10 calls over 2 names per deployment, on a
    /// multi-thread runtime, seed 0, 20 shrinking attempts per size.
    fn default() -> Self {
        ConcurrentConfig {
            histories: 64,
            tasks: 3,
            calls_per_task: 10,
            names: 2,
            seed: 0,
            multi_thread: true,
            shrink_attempts: 20,
        }
    }
}

/// What a passing concurrent run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrentSummary {
    /// Histories run and checked.
    pub histories: u32,
    /// Provider calls made, in all histories.
    pub calls: u64,
    /// Wall time the run took.
    pub wall_time: Duration,
}

/// A concurrent history the providers answered wrongly: the smallest found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrentFailure {
    /// What is wrong.
    pub reason: String,
    /// The seed whose history failed first (before shrinking).
    pub seed: u64,
    /// The calls of the smallest failing history, one line each, in order of
    /// invocation: task, provider object, call, the global order of its
    /// invocation and of its answer, and the answer.
    pub calls: Vec<String>,
}

impl fmt::Display for ConcurrentFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "H12: {} (seed {}); smallest history ({} calls, [invoked..answered] in one global order):",
            self.reason,
            self.seed,
            self.calls.len()
        )?;
        for line in &self.calls {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConcurrentFailure {}

/// One of the fixture's deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Dep {
    Blue,
    Green,
}

/// A provider object: a deployment's own, or the second object of `blue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Blue,
    Blue2,
    Green,
}

impl Via {
    fn dep(self) -> Dep {
        match self {
            Via::Blue | Via::Blue2 => Dep::Blue,
            Via::Green => Dep::Green,
        }
    }
}

/// A call a task is to make.
#[derive(Debug, Clone, Copy)]
enum Planned {
    Launch(usize),
    Destroy(usize),
    Find(usize),
    List,
}

/// What a destroy or launch answered, as the sequential model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Launched(InstanceId),
    Failed(ErrorKind),
    Torn(Teardown),
    Found(Option<InstanceId>),
    Listed(Vec<(usize, InstanceId)>),
}

/// A call made.
#[derive(Debug, Clone)]
enum Call {
    Launch(usize),
    Destroy(usize, InstanceId),
    Find(usize),
    List,
}

/// One recorded call of a history.
#[derive(Debug, Clone)]
struct Record {
    task: usize,
    via: Via,
    call: Call,
    invoked: u64,
    answered: u64,
    answer: Answer,
}

impl Record {
    fn line(&self, names: &[String]) -> String {
        let call = match &self.call {
            Call::Launch(n) => format!("launch({:?})", names[*n]),
            Call::Destroy(n, id) => format!("destroy({id}) [of {:?}]", names[*n]),
            Call::Find(n) => format!("find({:?})", names[*n]),
            Call::List => "list()".to_owned(),
        };
        let answer = match &self.answer {
            Answer::Launched(id) => format!("Ok({id})"),
            Answer::Failed(kind) => format!("Err({kind:?})"),
            Answer::Torn(t) => format!("Ok({t:?})"),
            Answer::Found(Some(id)) => format!("Ok(Some({id}))"),
            Answer::Found(None) => "Ok(None)".to_owned(),
            Answer::Listed(all) => {
                let all: Vec<String> = all
                    .iter()
                    .map(|(n, id)| format!("{:?}={id}", names[*n]))
                    .collect();
                format!("Ok([{}])", all.join(", "))
            }
        };
        format!(
            "task {} via {:?}: {call} [{}..{}] -> {answer}",
            self.task, self.via, self.invoked, self.answered
        )
    }

    /// The name this call concerns, projected for the per-name check: `None`
    /// if it says nothing about `name`.
    fn about(&self, name: usize) -> Option<NameOp> {
        let op = match (&self.call, &self.answer) {
            (Call::Launch(n), Answer::Launched(id)) if *n == name => {
                NameOp::Launched(id.as_str().to_owned())
            }
            (Call::Launch(n), Answer::Failed(kind)) if *n == name => NameOp::LaunchFailed(*kind),
            (Call::Destroy(n, id), answer) if *n == name => NameOp::Destroy(
                id.as_str().to_owned(),
                match answer {
                    Answer::Torn(t) => Ok(*t),
                    Answer::Failed(kind) => Err(*kind),
                    _ => return None,
                },
            ),
            (Call::Find(n), Answer::Found(found)) if *n == name => {
                NameOp::Sees(found.as_ref().map(|id| id.as_str().to_owned()))
            }
            (Call::Find(n), Answer::Failed(kind)) if *n == name => NameOp::Failed(*kind),
            (Call::List, Answer::Listed(all)) => NameOp::Sees(
                all.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, id)| id.as_str().to_owned()),
            ),
            (Call::List, Answer::Failed(kind)) => NameOp::Failed(*kind),
            _ => return None,
        };
        Some(op)
    }
}

/// A call about one name, as the per-name sequential specification reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NameOp {
    /// A launch answered this id.
    Launched(String),
    /// A launch answered this error: only `Conflict`, while the name is held,
    /// is right in this mode (no outages, valid specs).
    LaunchFailed(ErrorKind),
    /// A find or a list answered this error: always wrong in this mode.
    Failed(ErrorKind),
    /// A destroy of this id answered this.
    Destroy(String, Result<Teardown, ErrorKind>),
    /// A find or a list saw this instance of the name, or none.
    Sees(Option<String>),
}

impl NameOp {
    /// Whether this call changes what the name holds in no sequential
    /// history: a find, a list, a refusal, an `Absent` destroy.
    fn observes_only(&self) -> bool {
        !matches!(
            self,
            NameOp::Launched(_) | NameOp::Destroy(_, Ok(Teardown::Stopped | Teardown::Requested))
        )
    }
}

/// What one (deployment, name) holds: the sequential specification's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct NameState {
    held: Option<String>,
    retired: BTreeSet<String>,
}

/// The contract, sequentially, for one name of one deployment of an
/// authoritative backend (`Policies::unknown_destroy == Absent`): a launch of
/// a held name is `Conflict`, of a free one a fresh id; a destroy of the held
/// id is `Stopped` and frees the name, of any other id `Absent`; find and list
/// see exactly the held instance.
struct Authoritative;

impl Specification for Authoritative {
    type State = NameState;
    type Operation = NameOp;

    fn init() -> NameState {
        NameState::default()
    }

    fn apply(op: &NameOp, state: &NameState) -> (bool, NameState) {
        apply(op, state, Teardown::Absent)
    }
}

/// The same for a backend that can only ask (`unknown_destroy ==
/// Requested`): a destroy may answer `Requested` for any id, and removes the
/// held instance if it was its id.
struct Asking;

impl Specification for Asking {
    type State = NameState;
    type Operation = NameOp;

    fn init() -> NameState {
        NameState::default()
    }

    fn apply(op: &NameOp, state: &NameState) -> (bool, NameState) {
        apply(op, state, Teardown::Requested)
    }
}

fn apply(op: &NameOp, state: &NameState, unknown: Teardown) -> (bool, NameState) {
    let unchanged = (false, state.clone());
    match op {
        NameOp::Launched(id) => {
            if state.held.is_some() || state.retired.contains(id) {
                return unchanged;
            }
            let mut next = state.clone();
            next.held = Some(id.clone());
            (true, next)
        }
        NameOp::LaunchFailed(kind) => (
            *kind == ErrorKind::Conflict && state.held.is_some(),
            state.clone(),
        ),
        NameOp::Destroy(id, answer) => {
            let holds = state.held.as_deref() == Some(id.as_str());
            let ok = match answer {
                Ok(Teardown::Stopped) => holds,
                Ok(t) => *t == unknown && (!holds || unknown == Teardown::Requested),
                Err(_) => false,
            };
            if !ok {
                return unchanged;
            }
            let mut next = state.clone();
            if holds {
                next.held = None;
                next.retired.insert(id.clone());
            }
            (true, next)
        }
        NameOp::Failed(_) => unchanged,
        NameOp::Sees(seen) => (*seen == state.held, state.clone()),
    }
}

/// Whether the calls about one name form a linearizable history.
fn linearizable(records: &[&Record], name: usize, unknown: Teardown) -> bool {
    let mut events: Vec<(u64, usize, Action<NameOp>)> = Vec::new();
    for record in records {
        if let Some(op) = record.about(name) {
            events.push((record.invoked, record.task, Action::Call(op.clone())));
            events.push((record.answered, record.task, Action::Response(op)));
        }
    }
    if events.is_empty() {
        return true;
    }
    events.sort_by_key(|(at, _, _)| *at);
    let history = History::from_actions(
        events
            .into_iter()
            .map(|(_, task, action)| (task, action))
            .collect(),
    );
    match unknown {
        Teardown::Requested => WGLChecker::<Asking>::is_linearizable(history),
        _ => WGLChecker::<Authoritative>::is_linearizable(history),
    }
}

/// A recorded history of one fixture.
#[derive(Debug, Clone)]
struct Recorded {
    names: Vec<String>,
    blue: Vec<Record>,
    green: Vec<Record>,
    /// A wrong answer found while recording (an instance that is not what
    /// was asked for), with the record that carries it.
    wrong: Option<(String, Record)>,
}

/// Checks one recorded history: `Err` with the reason and the calls of the
/// smallest failing sub-history.
fn check(recorded: &Recorded, unknown: Teardown) -> Result<(), (String, Vec<Record>)> {
    for (dep, records) in [(Dep::Blue, &recorded.blue), (Dep::Green, &recorded.green)] {
        for (name, shown) in recorded.names.iter().enumerate() {
            let all: Vec<&Record> = records.iter().collect();
            if linearizable(&all, name, unknown) {
                continue;
            }
            let mut core: Vec<&Record> = all
                .into_iter()
                .filter(|r| r.about(name).is_some())
                .collect();
            // Delete every call the failure does not need, one at a time, of
            // those that change nothing in any linearization (finds, lists,
            // refusals, `Absent`): a history without some of them that is
            // not linearizable shows the original is not either, for the
            // same reason. Launches and confirmed destroys stay, since
            // without them a call left could fail for a reason the recorded
            // history never had; `check_concurrent` shrinks those by running
            // smaller histories.
            let mut i = 0;
            while i < core.len() {
                if !core[i].about(name).is_some_and(|op| op.observes_only()) {
                    i += 1;
                    continue;
                }
                let mut fewer = core.clone();
                fewer.remove(i);
                if linearizable(&fewer, name, unknown) {
                    i += 1;
                } else {
                    core = fewer;
                }
            }
            let mut calls: Vec<Record> = core.into_iter().cloned().collect();
            calls.sort_by_key(|r| r.invoked);
            return Err((
                format!(
                    "the calls about name {shown:?} of deployment {dep:?} are not linearizable"
                ),
                calls,
            ));
        }
    }
    if let Some((reason, record)) = &recorded.wrong {
        let mut calls: Vec<Record> = recorded
            .blue
            .iter()
            .chain(&recorded.green)
            .filter(|r| r.invoked < record.answered)
            .cloned()
            .collect();
        calls.sort_by_key(|r| r.invoked);
        return Err((reason.clone(), calls));
    }
    Ok(())
}

/// Runs the concurrent mode (H12) against `factory`'s fixtures: for each of
/// `config.histories` fresh fixtures, `config.tasks` tasks each make
/// `config.calls_per_task` random calls at once (launch, destroy, find, list
/// over `config.names` names per deployment, through every provider object:
/// `blue`, `green`, and [`ProviderFactory::second`] when it gives one), then
/// the history is checked.
///
/// # What is checked
///
/// Every call's invocation and answer get a place in one global order (an
/// atomic counter read right before the call and right after it returns).
/// The history of each (deployment, name) must be linearizable with respect
/// to the contract, sequentially: a launch of a held name answers `Conflict`,
/// of a free one a fresh id that holds it; a destroy of the held id answers
/// `Stopped` (or `Requested` for a backend that can only ask) exactly once
/// and frees the name, of another id `Absent` (`Requested`); a find, and a
/// list read for that name, sees exactly the held instance. Any other error
/// is wrong here. Each instance answered must carry the name asked, the
/// deployment's owner, the provider's kind and the state `Running` (never
/// `Pending` or `Stopped`), and a list only this deployment's instances of
/// the shared names, each once.
///
/// # Restrictions
///
/// * Time does not move: every instance is launched with
///   `factory.command(Duration::MAX)`, so no state changes during a history,
///   and the sequential specification needs no time. Under
///   [`Timing::Modelled`] the clock is never moved; under [`Timing::Wall`]
///   an instance must be `Running` from the moment its launch returned (a
///   backend that declares a `pending` window may also answer `Pending`);
///   a find or list that overlapped a launch of the name still under way may
///   see it `Pending` (a real backend's launch makes the instance before it
///   starts it).
/// * Histories are checked per name: a list is read as one observation of
///   each name, so two names seen by one list at inconsistent instants (an
///   atomic-snapshot fault across names) is not caught.
/// * No outages or mid-call faults (H8, H11) in this mode yet, and only
///   valid, trusted specs.
///
/// # Failures
///
/// A failing history is first shrunk to the fewest calls about its name that
/// still fail the check, then histories with fewer tasks and calls (the same
/// seed sequence, [`ConcurrentConfig::shrink_attempts`] each) are tried, and the smallest failing
/// history found is answered, one line per call.
///
/// # Where it runs
///
/// Each history builds its fixture, calls, and tears it down inside a tokio
/// runtime of its own: two worker threads with
/// [`multi_thread`](ConcurrentConfig::multi_thread), one otherwise. The tasks
/// are spawned on it, so the provider must be `'static`.
///
/// # Panics
///
/// Never on a wrong answer. A `config` with fewer than 2 or more than 4
/// tasks, no calls, or no names or more than 4 is answered as a failure
/// naming the field; so is a fixture the factory could not build.
pub fn check_concurrent<F>(
    factory: &F,
    config: ConcurrentConfig,
) -> Result<ConcurrentSummary, ConcurrentFailure>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let refuse = |reason: String| ConcurrentFailure {
        reason,
        seed: config.seed,
        calls: Vec::new(),
    };
    if !(2..=4).contains(&config.tasks) {
        return Err(refuse(format!(
            "ConcurrentConfig::tasks must be 2 to 4, not {}",
            config.tasks
        )));
    }
    if config.calls_per_task == 0 {
        return Err(refuse(
            "ConcurrentConfig::calls_per_task must be at least 1".to_owned(),
        ));
    }
    if !(1..=4).contains(&config.names) {
        return Err(refuse(format!(
            "ConcurrentConfig::names must be 1 to 4, not {}",
            config.names
        )));
    }
    let unknown = factory.policies().unknown_destroy;
    let started = Instant::now();
    let mut calls = 0;
    for n in 0..config.histories {
        let seed = config.seed.wrapping_add(u64::from(n));
        let recorded = record(factory, &config, seed).map_err(|reason| ConcurrentFailure {
            reason,
            seed,
            calls: Vec::new(),
        })?;
        calls += (recorded.blue.len() + recorded.green.len()) as u64;
        if let Err((reason, found)) = check(&recorded, unknown) {
            let (reason, found, names) = shrink(factory, &config, seed, unknown)
                .filter(|(_, smaller, _)| smaller.len() < found.len())
                .unwrap_or((reason, found, recorded.names));
            return Err(ConcurrentFailure {
                reason,
                seed,
                calls: found.iter().map(|r| r.line(&names)).collect(),
            });
        }
    }
    Ok(ConcurrentSummary {
        histories: config.histories,
        calls,
        wall_time: started.elapsed(),
    })
}

/// [`check_concurrent`], panicking with the failure's report.
///
/// # Panics
///
/// When [`check_concurrent`] answers a failure.
pub fn assert_concurrent<F>(factory: &F, config: ConcurrentConfig) -> ConcurrentSummary
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    match check_concurrent(factory, config) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    }
}

/// The smallest failing history found with fewer tasks and calls than
/// `config`, already shrunk by [`check`].
fn shrink<F>(
    factory: &F,
    config: &ConcurrentConfig,
    seed: u64,
    unknown: Teardown,
) -> Option<(String, Vec<Record>, Vec<String>)>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let mut best: Option<(String, Vec<Record>, Vec<String>)> = None;
    for tasks in 2..=config.tasks {
        for calls_per_task in 1..=config.calls_per_task {
            if tasks == config.tasks && calls_per_task == config.calls_per_task {
                continue;
            }
            let smaller = ConcurrentConfig {
                tasks,
                calls_per_task,
                ..*config
            };
            for attempt in 0..u64::from(config.shrink_attempts) {
                let Ok(recorded) = record(factory, &smaller, seed.wrapping_add(attempt)) else {
                    continue;
                };
                if let Err((reason, found)) = check(&recorded, unknown)
                    && best.as_ref().is_none_or(|(_, b, _)| found.len() < b.len())
                {
                    best = Some((reason, found, recorded.names));
                }
            }
            if best.is_some() {
                return best;
            }
        }
    }
    best
}

/// The random source of one seed (proptest's ChaCha generator).
fn rng_of(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Plans each task's calls from `seed`.
fn plan(config: &ConcurrentConfig, seed: u64, second: bool) -> Vec<Vec<(Via, Planned)>> {
    let mut rng = rng_of(seed);
    (0..config.tasks)
        .map(|_| {
            (0..config.calls_per_task)
                .map(|_| {
                    let via = match rng.random_range(0..4) {
                        0 => Via::Green,
                        1 if second => Via::Blue2,
                        _ => Via::Blue,
                    };
                    let name = rng.random_range(0..config.names);
                    let call = match rng.random_range(0..10) {
                        0..=2 => Planned::Launch(name),
                        3..=5 => Planned::Destroy(name),
                        6..=7 => Planned::Find(name),
                        _ => Planned::List,
                    };
                    (via, call)
                })
                .collect()
        })
        .collect()
}

/// What every task shares while a history runs.
struct Shared<P> {
    fixture: Fixture<P>,
    second: Option<P>,
    names: Vec<String>,
    command: Vec<String>,
    image: String,
    pending_allowed: bool,
    /// Whether the fixture tells wall time, where an instance may be
    /// `Pending` while a launch of its name is still under way.
    wall: bool,
    /// Launches of each (deployment, name) begun and ended so far.
    launches: Mutex<Vec<(u64, u64)>>,
    clock: AtomicU64,
    /// The last id seen of each (deployment, name): what a destroy names.
    known: Mutex<Vec<Option<InstanceId>>>,
    records: Mutex<Vec<Record>>,
    wrong: Mutex<Option<(String, Record)>>,
}

impl<P: Provider> Shared<P> {
    fn provider(&self, via: Via) -> &P {
        match via {
            Via::Blue => &self.fixture.blue.provider,
            Via::Blue2 => self.second.as_ref().unwrap_or(&self.fixture.blue.provider),
            Via::Green => &self.fixture.green.provider,
        }
    }

    fn owner(&self, dep: Dep) -> &str {
        match dep {
            Dep::Blue => &self.fixture.blue.owner,
            Dep::Green => &self.fixture.green.owner,
        }
    }

    fn slot(&self, dep: Dep, name: usize) -> usize {
        match dep {
            Dep::Blue => name,
            Dep::Green => self.names.len() + name,
        }
    }

    fn learn(&self, dep: Dep, name: usize, id: &InstanceId) {
        self.known.lock().expect("not poisoned")[self.slot(dep, name)] = Some(id.clone());
    }

    /// Whether a launch of `name` of `dep` was under way at some moment of a
    /// call that began when `ended_before` launches of each name had ended
    /// (wall time only): then its instance may still be `Pending`.
    fn launch_overlapped(&self, dep: Dep, name: usize, ended_before: &[(u64, u64)]) -> bool {
        let slot = self.slot(dep, name);
        self.wall && self.launches.lock().expect("not poisoned")[slot].0 > ended_before[slot].1
    }

    /// Why `instance`, answered for `name` of `dep` through `via`, is wrong;
    /// `pending_ok` when a launch of that name overlapped the call.
    fn judge(
        &self,
        via: Via,
        name: usize,
        instance: &Instance,
        pending_ok: bool,
    ) -> Option<String> {
        let dep = via.dep();
        let kind = self.provider(via).kind();
        if instance.name != self.names[name] {
            return Some(format!(
                "instance {} is named {:?}, answered for {:?}",
                instance.id, instance.name, self.names[name]
            ));
        }
        if instance.owner != self.owner(dep) {
            return Some(format!(
                "instance {} has owner {:?}, answered to {:?}",
                instance.id,
                instance.owner,
                self.owner(dep)
            ));
        }
        if instance.kind != kind {
            return Some(format!(
                "instance {} has kind {:?}, answered by a {kind:?} provider",
                instance.id, instance.kind
            ));
        }
        let state_ok = instance.state == State::Running
            || (instance.state == State::Pending && (self.pending_allowed || pending_ok));
        if !state_ok {
            return Some(format!(
                "instance {} of {:?} is {:?}, though its command never stops and time does not move",
                instance.id, instance.name, instance.state
            ));
        }
        None
    }

    async fn run(&self, task: usize, via: Via, planned: Planned) {
        let dep = via.dep();
        let provider = self.provider(via);
        let call = match planned {
            Planned::Launch(name) => Call::Launch(name),
            Planned::Find(name) => Call::Find(name),
            Planned::List => Call::List,
            Planned::Destroy(name) => {
                let known = self.known.lock().expect("not poisoned")[self.slot(dep, name)].clone();
                match known {
                    Some(id) => Call::Destroy(name, id),
                    None => Call::Find(name),
                }
            }
        };
        let mut wrong = None;
        let ended_before = self.launches.lock().expect("not poisoned").clone();
        let invoked = self.clock.fetch_add(1, Ordering::SeqCst);
        let answer = match &call {
            Call::Launch(name) => {
                let spec = Spec::new(self.names[*name].clone(), self.command.clone())
                    .with_image(self.image.clone())
                    .with_trust(TrustClass::Trusted);
                let slot = self.slot(dep, *name);
                self.launches.lock().expect("not poisoned")[slot].0 += 1;
                let answer = provider.launch(spec).await;
                self.launches.lock().expect("not poisoned")[slot].1 += 1;
                if let Ok(instance) = &answer {
                    wrong = self.judge(via, *name, instance, false);
                    self.learn(dep, *name, &instance.id);
                }
                answer.map(|i| Answer::Launched(i.id))
            }
            Call::Destroy(_, id) => provider.destroy(id).await.map(Answer::Torn),
            Call::Find(name) => {
                let answer = provider.find(&self.names[*name]).await;
                if let Ok(Some(instance)) = &answer {
                    let pending_ok = self.launch_overlapped(dep, *name, &ended_before);
                    wrong = self.judge(via, *name, instance, pending_ok);
                    self.learn(dep, *name, &instance.id);
                }
                answer.map(|found| Answer::Found(found.map(|i| i.id)))
            }
            Call::List => provider.list().await.map(|all| {
                let wrong = &mut wrong;
                let mut seen = Vec::new();
                for instance in &all {
                    let Some(name) = self.names.iter().position(|n| *n == instance.name) else {
                        *wrong = Some(format!(
                            "list shows instance {} named {:?}, which no call launched",
                            instance.id, instance.name
                        ));
                        continue;
                    };
                    if seen.iter().any(|(n, _)| *n == name) {
                        *wrong = Some(format!("list shows name {:?} twice", instance.name));
                    }
                    let pending_ok = self.launch_overlapped(dep, name, &ended_before);
                    *wrong = wrong
                        .take()
                        .or_else(|| self.judge(via, name, instance, pending_ok));
                    self.learn(dep, name, &instance.id);
                    seen.push((name, instance.id.clone()));
                }
                seen.sort_by_key(|(n, _)| *n);
                Answer::Listed(seen)
            }),
        }
        .unwrap_or_else(|err: Error| Answer::Failed(err.kind()));
        let answered = self.clock.fetch_add(1, Ordering::SeqCst);
        let record = Record {
            task,
            via,
            call,
            invoked,
            answered,
            answer,
        };
        if let Some(reason) = wrong {
            self.wrong
                .lock()
                .expect("not poisoned")
                .get_or_insert((reason, record.clone()));
        }
        self.records.lock().expect("not poisoned").push(record);
    }
}

/// Builds a fixture, runs one history on it, tears it down.
fn record<F>(factory: &F, config: &ConcurrentConfig, seed: u64) -> Result<Recorded, String>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let runtime = if config.multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .map_err(|err| format!("could not start a tokio runtime: {err}"))?;
    runtime.block_on(async {
        let fixture = factory
            .build()
            .await
            .map_err(|err| format!("the factory could not build a fixture: {err}"))?;
        let second = factory
            .second(&fixture)
            .await
            .map_err(|err| format!("the factory could not build a second provider: {err}"))?;
        let plans = plan(config, seed, second.is_some());
        let names: Vec<String> = (0..config.names).map(|n| format!("h12-{n}")).collect();
        let shared = Arc::new(Shared {
            pending_allowed: matches!(fixture.timing, Timing::Wall(w) if !w.pending.is_zero()),
            wall: matches!(fixture.timing, Timing::Wall(_)),
            launches: Mutex::new(vec![(0, 0); 2 * names.len()]),
            fixture,
            second,
            known: Mutex::new(vec![None; 2 * names.len()]),
            names,
            command: factory.command(Duration::MAX),
            image: factory.image(),
            clock: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            wrong: Mutex::new(None),
        });
        let handles: Vec<_> = plans
            .into_iter()
            .enumerate()
            .map(|(task, calls)| {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    for (via, planned) in calls {
                        shared.run(task, via, planned).await;
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let mut panicked = None;
        for handle in handles {
            if let Err(err) = handle.await {
                panicked.get_or_insert(format!("a task calling the provider failed: {err}"));
            }
        }
        let Ok(shared) = Arc::try_unwrap(shared) else {
            return Err("a task still holds the fixture".to_owned());
        };
        factory
            .teardown(&shared.fixture)
            .await
            .map_err(|err| format!("the factory could not tear the fixture down: {err}"))?;
        if let Some(panicked) = panicked {
            return Err(panicked);
        }
        let mut records = shared.records.into_inner().expect("not poisoned");
        records.sort_by_key(|r| r.invoked);
        let (blue, green) = records.into_iter().partition(|r| r.via.dep() == Dep::Blue);
        Ok(Recorded {
            names: shared.names,
            blue,
            green,
            wrong: shared.wrong.into_inner().expect("not poisoned"),
        })
    })
}

/// Linearizable histories made without a provider, for the checker's
/// benchmark and tests: not part of the suite's API.
#[doc(hidden)]
pub mod synthetic {
    use super::*;

    /// A recorded history of one deployment, made by [`history`].
    #[derive(Debug, Clone)]
    pub struct SyntheticHistory(Recorded);

    impl SyntheticHistory {
        /// How many calls it holds.
        pub fn calls(&self) -> usize {
            self.0.blue.len()
        }
    }

    /// A linearizable history of `tasks` tasks making `calls_per_task` calls
    /// each over `names` names of one authoritative deployment: each call
    /// takes effect, on a correct sequential store, at a random instant
    /// strictly inside its own interval, and tasks' intervals overlap.
    pub fn history(
        tasks: usize,
        calls_per_task: usize,
        names: usize,
        seed: u64,
    ) -> SyntheticHistory {
        let mut rng = rng_of(seed);
        let names = names.max(1);
        // (effect instant, task, invoked, answered, planned)
        let mut planned = Vec::new();
        for task in 0..tasks {
            let mut cursor = 0u64;
            for _ in 0..calls_per_task {
                let invoked = cursor + 2 * rng.random_range(0..3u64);
                let answered = invoked + 2 * rng.random_range(1..6u64);
                let effect = rng.random_range(invoked..answered) | 1;
                let name = rng.random_range(0..names);
                let call = match rng.random_range(0..10) {
                    0..=2 => Planned::Launch(name),
                    3..=5 => Planned::Destroy(name),
                    6..=7 => Planned::Find(name),
                    _ => Planned::List,
                };
                planned.push((effect, task, invoked, answered, call));
                cursor = answered;
            }
        }
        planned.sort_by_key(|p| p.0);
        let mut held: Vec<Option<InstanceId>> = vec![None; names];
        let mut retired: Vec<Option<InstanceId>> = vec![None; names];
        let mut next = 0;
        let mut records = Vec::new();
        for (_, task, invoked, answered, call) in planned {
            let (call, answer) = match call {
                Planned::Launch(n) => match &held[n] {
                    Some(_) => (Call::Launch(n), Answer::Failed(ErrorKind::Conflict)),
                    None => {
                        next += 1;
                        let id = InstanceId::from(format!("s-{next}"));
                        held[n] = Some(id.clone());
                        (Call::Launch(n), Answer::Launched(id))
                    }
                },
                Planned::Destroy(n) => match (held[n].take(), &retired[n]) {
                    (Some(id), _) => {
                        retired[n] = Some(id.clone());
                        (Call::Destroy(n, id), Answer::Torn(Teardown::Stopped))
                    }
                    (None, Some(id)) => {
                        (Call::Destroy(n, id.clone()), Answer::Torn(Teardown::Absent))
                    }
                    (None, None) => (Call::Find(n), Answer::Found(None)),
                },
                Planned::Find(n) => (Call::Find(n), Answer::Found(held[n].clone())),
                Planned::List => (
                    Call::List,
                    Answer::Listed(
                        held.iter()
                            .enumerate()
                            .filter_map(|(n, id)| id.clone().map(|id| (n, id)))
                            .collect(),
                    ),
                ),
            };
            records.push(Record {
                task,
                via: Via::Blue,
                call,
                invoked,
                answered,
                answer,
            });
        }
        // One global order of invocations and answers: ranks of the instants
        // (ties in any order: every effect is strictly inside its interval).
        let mut instants: Vec<u64> = records
            .iter()
            .flat_map(|r| [r.invoked, r.answered])
            .collect();
        instants.sort_unstable();
        let mut order = 0..;
        let mut rank = std::collections::HashMap::new();
        for instant in instants {
            rank.entry(instant)
                .or_insert_with(Vec::new)
                .push(order.next().unwrap_or(0));
        }
        let mut take = |instant: u64| rank.get_mut(&instant).and_then(|r| r.pop()).unwrap_or(0);
        for record in &mut records {
            record.invoked = take(record.invoked);
        }
        for record in &mut records {
            record.answered = take(record.answered);
        }
        records.sort_by_key(|r| r.invoked);
        SyntheticHistory(Recorded {
            names: (0..names).map(|n| format!("h12-{n}")).collect(),
            blue: records,
            green: Vec::new(),
            wrong: None,
        })
    }

    /// Whether [`check_concurrent`]'s check passes `history`.
    pub fn check(history: &SyntheticHistory) -> bool {
        super::check(&history.0, Teardown::Absent).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(task: usize, invoked: u64, answered: u64, call: Call, answer: Answer) -> Record {
        Record {
            task,
            via: Via::Blue,
            call,
            invoked,
            answered,
            answer,
        }
    }

    fn id(s: &str) -> InstanceId {
        InstanceId::from(s.to_owned())
    }

    // H12: two overlapping launches of one name may not both succeed; one
    // succeeding and one answering Conflict is linearizable.
    #[test]
    fn h12_two_launches_of_one_name_both_succeeding_are_not_linearizable() {
        let a = record(0, 0, 2, Call::Launch(0), Answer::Launched(id("a")));
        let b = record(1, 1, 3, Call::Launch(0), Answer::Launched(id("b")));
        assert!(!linearizable(&[&a, &b], 0, Teardown::Absent));
        let c = record(
            1,
            1,
            3,
            Call::Launch(0),
            Answer::Failed(ErrorKind::Conflict),
        );
        assert!(linearizable(&[&a, &c], 0, Teardown::Absent));
        // A call about another name says nothing about this one.
        let other = record(1, 1, 3, Call::Launch(1), Answer::Launched(id("b")));
        assert!(linearizable(&[&a, &other], 0, Teardown::Absent));
    }

    // H12: a destroy of the held id answers Stopped once; a second overlapping
    // destroy must answer Absent (or Requested for a backend that can only ask).
    #[test]
    fn h12_two_destroys_answering_stopped_are_not_linearizable() {
        let l = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        let d1 = record(
            0,
            2,
            4,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        let d2 = record(
            1,
            3,
            5,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        assert!(!linearizable(&[&l, &d1, &d2], 0, Teardown::Absent));
        let d3 = record(
            1,
            3,
            5,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Absent),
        );
        assert!(linearizable(&[&l, &d1, &d3], 0, Teardown::Absent));
        let d4 = record(
            1,
            3,
            5,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Requested),
        );
        assert!(!linearizable(&[&l, &d1, &d4], 0, Teardown::Absent));
        assert!(linearizable(&[&l, &d1, &d4], 0, Teardown::Requested));
    }

    // H12: a list that began after a launch returned must show it; one that
    // overlapped the launch may or may not.
    #[test]
    fn h12_a_list_missing_a_finished_launch_is_not_linearizable() {
        let l = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        let list = record(1, 2, 3, Call::List, Answer::Listed(Vec::new()));
        assert!(!linearizable(&[&l, &list], 0, Teardown::Absent));
        let early = record(1, 0, 3, Call::List, Answer::Listed(Vec::new()));
        assert!(linearizable(&[&l, &early], 0, Teardown::Absent));
        let shows = record(1, 2, 3, Call::List, Answer::Listed(vec![(0, id("a"))]));
        assert!(linearizable(&[&l, &shows], 0, Teardown::Absent));
    }

    // H12: any error but a launch's Conflict on a held name is wrong here.
    #[test]
    fn h12_errors_other_than_conflict_are_not_linearizable() {
        let find = record(
            0,
            0,
            1,
            Call::Find(0),
            Answer::Failed(ErrorKind::Unavailable),
        );
        assert!(!linearizable(&[&find], 0, Teardown::Absent));
        let free = record(
            0,
            0,
            1,
            Call::Launch(0),
            Answer::Failed(ErrorKind::Conflict),
        );
        assert!(!linearizable(&[&free], 0, Teardown::Absent));
    }

    // H12: the check shrinks a failing history to the calls it needs.
    #[test]
    fn h12_check_shrinks_to_the_calls_the_failure_needs() {
        let recorded = Recorded {
            names: vec!["h12-0".to_owned(), "h12-1".to_owned()],
            blue: vec![
                record(0, 0, 1, Call::Find(1), Answer::Found(None)),
                record(0, 2, 5, Call::Launch(0), Answer::Launched(id("a"))),
                record(1, 3, 6, Call::Launch(0), Answer::Launched(id("b"))),
                record(2, 4, 7, Call::Find(0), Answer::Found(Some(id("a")))),
                record(2, 8, 9, Call::List, Answer::Listed(vec![(0, id("a"))])),
            ],
            green: Vec::new(),
            wrong: None,
        };
        let (reason, calls) = check(&recorded, Teardown::Absent).unwrap_err();
        assert!(reason.contains("\"h12-0\""), "{reason}");
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls.iter().all(|r| matches!(r.call, Call::Launch(0))));
        let line = calls[0].line(&recorded.names);
        assert_eq!(line, "task 0 via Blue: launch(\"h12-0\") [2..5] -> Ok(a)");
    }

    // H12: shrinking never deletes a launch or a confirmed destroy, whose
    // absence would fail the history for a reason it never had: here the
    // first destroy freed the name the second launch took.
    #[test]
    fn h12_check_keeps_the_calls_that_change_what_a_name_holds() {
        let stopped = || Answer::Torn(Teardown::Stopped);
        let recorded = Recorded {
            names: vec!["h12-0".to_owned()],
            blue: vec![
                record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a"))),
                record(0, 2, 3, Call::Destroy(0, id("a")), stopped()),
                record(1, 4, 5, Call::Destroy(0, id("a")), stopped()),
                record(0, 6, 7, Call::Launch(0), Answer::Launched(id("b"))),
                record(1, 8, 9, Call::Find(0), Answer::Found(Some(id("b")))),
            ],
            green: Vec::new(),
            wrong: None,
        };
        let (_, calls) = check(&recorded, Teardown::Absent).unwrap_err();
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 2, 4, 6], "{calls:?}");
    }

    // H12: every history a correct sequential store makes, each call taking
    // effect inside its own interval, passes the check, at every size the
    // benchmark measures.
    #[test]
    fn h12_linearizable_histories_pass() {
        for tasks in 2..=4 {
            for calls in [1, 10, 40] {
                for seed in 0..20 {
                    let history = synthetic::history(tasks, calls, 2, seed);
                    assert_eq!(history.calls(), tasks * calls);
                    assert!(synthetic::check(&history), "{history:?}");
                }
            }
        }
    }
}
