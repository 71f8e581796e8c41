//! The concurrent mode of the suite (H12): several tasks call the providers
//! of one fixture at once, every call is recorded with the order of its
//! invocation and its answer, and the history is checked for linearizability
//! with `todc-utils`' Wing-Gong-Lowe checker.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use billet_provider::{Error, ErrorKind, Instance, InstanceId, Provider, Spec, State, Teardown};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use todc_utils::linearizability::WGLChecker;
use todc_utils::linearizability::history::{Action, History};
use todc_utils::specifications::Specification;

use billet_provider::TrustClass;

use crate::{Fixture, FixtureError, Outage, ProviderFactory, Timing};

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
    /// Faults made in each history, one after another, each at a random
    /// moment of it and lasting a few calls: an outage of one deployment
    /// ([`ProviderFactory::set_outage`], H8), or, for a factory that
    /// declares [`Policies::mid_call`](crate::Policies::mid_call), half of
    /// them an answer lost mid-call ([`ProviderFactory::lose_answer`], H11).
    /// 0 makes none. Faults that would begin after the tasks are done are
    /// not made.
    pub faults: u32,
}

impl Default for ConcurrentConfig {
    /// 64 histories of 3 tasks x 10 calls over 2 names per deployment, on a
    /// multi-thread runtime, seed 0, 20 shrinking attempts per size, 2
    /// faults per history.
    fn default() -> Self {
        ConcurrentConfig {
            histories: 64,
            tasks: 3,
            calls_per_task: 10,
            names: 2,
            seed: 0,
            multi_thread: true,
            shrink_attempts: 20,
            faults: 2,
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
    /// Faults made ([`ConcurrentConfig::faults`] in each history, less those
    /// that would have begun after its tasks were done).
    pub faults: u64,
    /// Calls answered an outage's error that a fault excused.
    pub fault_errors: u64,
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
    /// The instances it saw `Pending`, each with whether that was right
    /// when it was seen (the backend declares a pending window, or a launch
    /// of the name was under way): one that was not is right only for an
    /// instance no launch answered (one a lost launch made).
    pending: Vec<(InstanceId, bool)>,
    /// How a fault window excuses an error it answered.
    excuse: Excuse,
    /// The global order by which what it did has surely landed: its answer;
    /// for a call a fault cut short that may have reached the daemon
    /// ([`Excuse::Maybe`]), the end of the last fault it overlapped, since
    /// a request the daemon received may still be at work after its caller
    /// saw the error (a fixture ends an outage only once everything it
    /// delivered has been answered).
    settled: u64,
}

impl Record {
    /// Whether it saw `id` `Pending`.
    fn saw_pending(&self, id: &InstanceId) -> bool {
        self.pending.iter().any(|(p, _)| p == id)
    }

    fn shown(&self, id: &InstanceId) -> String {
        if self.saw_pending(id) {
            format!("{id} Pending")
        } else {
            id.to_string()
        }
    }

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
            Answer::Found(Some(id)) => format!("Ok(Some({}))", self.shown(id)),
            Answer::Found(None) => "Ok(None)".to_owned(),
            Answer::Listed(all) => {
                let all: Vec<String> = all
                    .iter()
                    .map(|(n, id)| format!("{:?}={}", names[*n], self.shown(id)))
                    .collect();
                format!("Ok([{}])", all.join(", "))
            }
        };
        format!(
            "task {} via {:?}: {call} [{}..{}] -> {answer}{}",
            self.task,
            self.via,
            self.invoked,
            self.answered,
            if self.settled == self.answered {
                String::new()
            } else {
                format!(" (may take effect until [{}])", self.settled)
            }
        )
    }

    /// The name this call concerns, projected for the per-name check: `None`
    /// if it says nothing about `name`.
    fn about(&self, name: usize) -> Option<NameOp> {
        let op = match (&self.call, &self.answer) {
            (Call::Launch(n), Answer::Launched(id)) if *n == name => {
                NameOp::Launched(id.as_str().to_owned())
            }
            (Call::Launch(n), Answer::Failed(kind)) if *n == name => {
                NameOp::LaunchFailed(*kind, self.excuse)
            }
            (Call::Destroy(n, id), answer) if *n == name => NameOp::Destroy(
                id.as_str().to_owned(),
                match answer {
                    Answer::Torn(t) => Ok(*t),
                    Answer::Failed(kind) => Err((*kind, self.excuse)),
                    _ => return None,
                },
            ),
            (Call::Find(n), Answer::Found(found)) if *n == name => {
                NameOp::Sees(found.as_ref().map(|id| self.sighting(id)))
            }
            (Call::Find(n), Answer::Failed(kind)) if *n == name => {
                NameOp::Failed(*kind, self.excuse)
            }
            (Call::List, Answer::Listed(all)) => NameOp::Sees(
                all.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, id)| self.sighting(id)),
            ),
            (Call::List, Answer::Failed(kind)) => NameOp::Failed(*kind, self.excuse),
            _ => return None,
        };
        Some(op)
    }

    fn sighting(&self, id: &InstanceId) -> (String, bool) {
        (id.as_str().to_owned(), self.saw_pending(id))
    }
}

/// Whether an error answered during a fault window excuses the call, and
/// whether the call may still have taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
enum Excuse {
    /// The call overlapped no fault window of its deployment (or the
    /// backend's outages leave this call working): an error is wrong.
    #[default]
    None,
    /// The call began after an outage had begun and answered before it
    /// ended: it reached no daemon, so it changed nothing (H8).
    Nothing,
    /// The call overlapped the start or the end of an outage, or a mid-call
    /// fault was armed: it may have reached the daemon before its answer was
    /// lost (H11).
    Maybe,
}

/// A call about one name, as the per-name sequential specification reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NameOp {
    /// A launch answered this id.
    Launched(String),
    /// A launch answered this error: `Conflict` is right while the name is
    /// held; an outage's error only when excused, and then the launch may
    /// have made an instance whose id nobody was told.
    LaunchFailed(ErrorKind, Excuse),
    /// A find or a list answered this error: right only when excused.
    Failed(ErrorKind, Excuse),
    /// A destroy of this id answered this.
    Destroy(String, Result<Teardown, (ErrorKind, Excuse)>),
    /// A find or a list saw this instance of the name (and whether it was
    /// `Pending`), or none.
    Sees(Option<(String, bool)>),
}

impl NameOp {
    /// Whether deleting this call from a history can only make the history
    /// easier to linearize: a call that changes what the name holds in no
    /// sequential history (a refusal, an `Absent` destroy, an error that
    /// reached nothing), or a sighting that binds nothing (`launched` holds
    /// every id a launch answered; an id outside it belongs to an instance a
    /// lost launch made, which its first sighting names).
    fn observes_only(&self, launched: &BTreeSet<String>) -> bool {
        match self {
            NameOp::Launched(_) => false,
            NameOp::Failed(..) => true,
            // An error a fault excused stays, made inside the outage or not:
            // it shows the call that may have been wrongly applied.
            NameOp::LaunchFailed(kind, excuse) | NameOp::Destroy(_, Err((kind, excuse))) => {
                !outage_error(*kind) || *excuse == Excuse::None
            }
            NameOp::Destroy(_, Ok(t)) => *t == Teardown::Absent,
            NameOp::Sees(None) => true,
            NameOp::Sees(Some((id, _))) => launched.contains(id),
        }
    }
}

/// What holds one name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Holder {
    /// The instance a launch answered, with its id.
    Known(String),
    /// An instance a launch answered with an error may have made (H11): its
    /// id is unknown until a find or list names it (`id`). Until one has
    /// seen it `Running` (`firm`), it may still be unstarted and its
    /// backend may remove it (a lost launch cleaned up, even while another
    /// provider object of the deployment saw it `Pending`); once firm it
    /// holds the name like any other, until destroyed.
    Lost { id: Option<String>, firm: bool },
}

impl Holder {
    /// Whether a destroy of `id` names this instance.
    fn is(&self, id: &str) -> bool {
        match self {
            Holder::Known(held) | Holder::Lost { id: Some(held), .. } => held == id,
            // Never named: any id the caller could have learned of it.
            Holder::Lost { id: None, .. } => true,
        }
    }
}

/// What one (deployment, name) holds: one world of the sequential
/// specification.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
struct NameState {
    held: Option<Holder>,
    retired: BTreeSet<String>,
}

impl NameState {
    /// This world with the held instance gone and its id (if known) never
    /// to be answered again.
    fn freed(&self) -> NameState {
        let mut next = self.clone();
        if let Some(Holder::Known(id) | Holder::Lost { id: Some(id), .. }) = next.held.take() {
            next.retired.insert(id);
        }
        next
    }
}

/// Every world a history may have left one (deployment, name) in, sorted
/// and without repeats: a call whose answer was lost may or may not have
/// happened, and an instance only a lost launch made may vanish.
type Worlds = Vec<NameState>;

/// What `destroy` answers for an id the backend does not hold: `Absent` for
/// an authoritative backend, `Requested` for one that can only ask
/// (`ASKING`, [`Policies::unknown_destroy`](crate::Policies::unknown_destroy)).
const fn unknown_destroy(asking: bool) -> Teardown {
    if asking {
        Teardown::Requested
    } else {
        Teardown::Absent
    }
}

/// The contract, sequentially, for one name of one deployment: a launch of a
/// held name is `Conflict`, of a free one a fresh id that holds it; a destroy
/// of the held id is `Stopped` (or, for a backend that can only ask,
/// `Requested`) and frees the name, of any other id `Absent` (`Requested`);
/// find and list see exactly the held instance; an outage's error is right
/// only for a call a fault window excuses.
struct PerName<const ASKING: bool>;

impl<const ASKING: bool> Specification for PerName<ASKING> {
    type State = Worlds;
    type Operation = NameOp;

    fn init() -> Worlds {
        vec![NameState::default()]
    }

    fn apply(op: &NameOp, worlds: &Worlds) -> (bool, Worlds) {
        apply(op, worlds, unknown_destroy(ASKING))
    }
}

/// [`PerName`] for an authoritative backend (`unknown_destroy == Absent`).
type Authoritative = PerName<false>;
/// [`PerName`] for a backend that can only ask (`unknown_destroy ==
/// Requested`): a destroy may answer `Requested` for any id, and removes the
/// held instance if it was its id.
type Asking = PerName<true>;

/// Applies `op` to every world: valid when it is valid in at least one, and
/// the worlds it leaves are those it was valid in, each followed by what
/// may happen on its own (an unseen or `Pending` lost instance vanishing).
fn apply(op: &NameOp, worlds: &Worlds, unknown: Teardown) -> (bool, Worlds) {
    let mut next = Vec::new();
    for world in worlds {
        step(op, world, unknown, &mut next);
    }
    let mut all = Vec::with_capacity(next.len() * 2);
    for world in next {
        drift(world, &mut all);
    }
    all.sort_unstable();
    all.dedup();
    if all.is_empty() {
        return (false, worlds.clone());
    }
    (true, all)
}

/// The worlds a name's world may move to on its own after a call: an
/// instance only a lost launch made, never seen `Running`, vanishing.
fn drift(world: NameState, into: &mut Vec<NameState>) {
    if matches!(world.held, Some(Holder::Lost { firm: false, .. })) {
        into.push(world.freed());
    }
    into.push(world);
}

/// A call about a whole deployment: what it says of each name it concerns
/// (a list: every name at one instant; any other call: its one name).
type JointOp = Vec<(usize, NameOp)>;

/// Every world a history may have left a whole deployment in: each world
/// the state of every name (trailing names that hold nothing and retired
/// nothing left out, so that equal worlds compare equal), sorted, without
/// repeats.
type JointWorlds = Vec<Vec<NameState>>;

/// The contract for a whole deployment: each name as [`PerName`], and a
/// list sees every name at one instant.
struct Whole<const ASKING: bool>;

impl<const ASKING: bool> Specification for Whole<ASKING> {
    type State = JointWorlds;
    type Operation = JointOp;

    fn init() -> JointWorlds {
        vec![Vec::new()]
    }

    fn apply(op: &JointOp, worlds: &JointWorlds) -> (bool, JointWorlds) {
        apply_joint(op, worlds, unknown_destroy(ASKING))
    }
}

/// [`Whole`] for an authoritative backend.
type JointAuthoritative = Whole<false>;
/// [`Whole`] for a backend that can only ask.
type JointAsking = Whole<true>;

/// Applies a call about a whole deployment to every world: each name it
/// concerns steps as [`apply`] would, all at the same instant.
fn apply_joint(op: &JointOp, worlds: &JointWorlds, unknown: Teardown) -> (bool, JointWorlds) {
    let mut all: JointWorlds = Vec::new();
    for world in worlds {
        let mut partial = vec![world.clone()];
        for (name, name_op) in op {
            let mut moved = Vec::new();
            for world in &partial {
                let mut steps = Vec::new();
                let here = world.get(*name).cloned().unwrap_or_default();
                step(name_op, &here, unknown, &mut steps);
                let mut drifted = Vec::new();
                for next in steps {
                    drift(next, &mut drifted);
                }
                for next in drifted {
                    let mut world = world.clone();
                    if world.len() <= *name {
                        world.resize(*name + 1, NameState::default());
                    }
                    world[*name] = next;
                    moved.push(world);
                }
            }
            partial = moved;
        }
        all.extend(partial);
    }
    for world in &mut all {
        while world.last().is_some_and(|s| *s == NameState::default()) {
            world.pop();
        }
    }
    all.sort_unstable();
    all.dedup();
    if all.is_empty() {
        return (false, worlds.clone());
    }
    (true, all)
}

/// Whether the calls of one deployment form a linearizable history taken
/// whole: what the per-name check cannot see, a list that saw its names at
/// instants that never were one.
fn linearizable_joint(records: &[&Record], names: usize, unknown: Teardown) -> bool {
    let op = |record: &Record| {
        let op: JointOp = (0..names)
            .filter_map(|name| record.about(name).map(|op| (name, op)))
            .collect();
        (!op.is_empty()).then_some(op)
    };
    match unknown {
        Teardown::Requested => linearizable_as::<JointAsking>(records, op),
        _ => linearizable_as::<JointAuthoritative>(records, op),
    }
}

/// Whether an error of this kind is one an outage answers.
fn outage_error(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::Unavailable | ErrorKind::InventoryUnavailable
    )
}

/// The worlds `op` may leave `world` in (none when it is wrong there).
fn step(op: &NameOp, world: &NameState, unknown: Teardown, next: &mut Vec<NameState>) {
    match op {
        NameOp::Launched(id) => {
            if world.held.is_none() && !world.retired.contains(id) {
                let mut taken = world.clone();
                taken.held = Some(Holder::Known(id.clone()));
                next.push(taken);
            }
        }
        NameOp::LaunchFailed(ErrorKind::Conflict, _) => {
            if world.held.is_some() {
                next.push(world.clone());
            }
        }
        NameOp::LaunchFailed(kind, excuse) => {
            if outage_error(*kind) && *excuse != Excuse::None {
                next.push(world.clone());
                if *excuse == Excuse::Maybe && world.held.is_none() {
                    let mut made = world.clone();
                    made.held = Some(Holder::Lost {
                        id: None,
                        firm: false,
                    });
                    next.push(made);
                }
            }
        }
        NameOp::Failed(kind, excuse) => {
            if outage_error(*kind) && *excuse != Excuse::None {
                next.push(world.clone());
            }
        }
        NameOp::Destroy(id, answer) => {
            let holds =
                !world.retired.contains(id) && world.held.as_ref().is_some_and(|h| h.is(id));
            match answer {
                Ok(Teardown::Stopped) if holds => next.push(world.freed()),
                Ok(Teardown::Stopped) => {}
                Ok(t) if *t == unknown && unknown == Teardown::Requested => {
                    next.push(if holds { world.freed() } else { world.clone() });
                }
                Ok(t) if *t == unknown && !holds => next.push(world.clone()),
                Ok(_) => {}
                Err((kind, excuse)) => {
                    if outage_error(*kind) && *excuse != Excuse::None {
                        next.push(world.clone());
                        if *excuse == Excuse::Maybe && holds {
                            next.push(world.freed());
                        }
                    }
                }
            }
        }
        NameOp::Sees(None) => {
            if world.held.is_none() {
                next.push(world.clone());
            }
        }
        NameOp::Sees(Some((id, pending))) => match &world.held {
            Some(Holder::Known(held)) if held == id => next.push(world.clone()),
            Some(Holder::Lost { id: named, firm }) => {
                let same = match named {
                    Some(named) => named == id,
                    None => !world.retired.contains(id),
                };
                if same && !(*firm && *pending) {
                    let mut seen = world.clone();
                    seen.held = Some(Holder::Lost {
                        id: Some(id.clone()),
                        firm: !*pending,
                    });
                    next.push(seen);
                }
            }
            _ => {}
        },
    }
}

/// Whether the calls about one name form a linearizable history. Each call
/// is its own process to the checker, since a call a fault cut short may
/// take effect until its fault ends, after its task's next call began.
fn linearizable(records: &[&Record], name: usize, unknown: Teardown) -> bool {
    let op = |record: &Record| record.about(name);
    match unknown {
        Teardown::Requested => linearizable_as::<Asking>(records, op),
        _ => linearizable_as::<Authoritative>(records, op),
    }
}

/// Whether `records`, read by `op` (`None`: a call that says nothing here),
/// form a history linearizable with respect to `S`: each call is invoked at
/// its invocation and answered where what it did has surely landed.
fn linearizable_as<S: Specification>(
    records: &[&Record],
    op: impl Fn(&Record) -> Option<S::Operation>,
) -> bool {
    let mut events: Vec<(u64, usize, Action<S::Operation>)> = Vec::new();
    for (process, record) in records.iter().enumerate() {
        if let Some(op) = op(record) {
            events.push((record.invoked, process, Action::Call(op.clone())));
            events.push((record.settled, process, Action::Response(op)));
        }
    }
    if events.is_empty() {
        return true;
    }
    events.sort_by_key(|(at, _, _)| *at);
    let history = History::from_actions(
        events
            .into_iter()
            .map(|(_, process, action)| (process, action))
            .collect(),
    );
    WGLChecker::<S>::is_linearizable(history)
}

/// A fault the suite made during a history: an outage of a deployment's
/// connection (H8), or a mid-call fault armed and then an outage (H11).
#[derive(Debug, Clone)]
struct Window {
    dep: Dep,
    /// `Some(after)` when it began with [`ProviderFactory::lose_answer`].
    lose: Option<u32>,
    /// Invocation of the call that began it (`set_outage(true)` or
    /// `lose_answer`).
    start: u64,
    /// Answer of `set_outage(true)`: from here the connection refuses all.
    cut: u64,
    /// Invocation of `set_outage(false)`: until here it refuses all.
    restore: u64,
    /// Answer of `set_outage(false)`.
    end: u64,
}

impl Window {
    fn line(&self) -> String {
        match self.lose {
            Some(after) => format!(
                "fault of {:?}: an answer lost after {after} exchanges armed [{}], connection cut [..{}], restored [{}..{}]",
                self.dep, self.start, self.cut, self.restore, self.end
            ),
            None => format!(
                "fault of {:?}: an outage [{}..{}], restored [{}..{}]",
                self.dep, self.start, self.cut, self.restore, self.end
            ),
        }
    }

    /// Whether `record`'s call overlapped this fault at some instant.
    fn overlaps(&self, record: &Record) -> bool {
        record.via.dep() == self.dep && record.invoked < self.end && record.answered > self.start
    }

    /// Whether `record`'s call began after the connection was cut and
    /// answered before it was restored: it reached no daemon.
    fn holds_inside(&self, record: &Record) -> bool {
        record.via.dep() == self.dep && record.invoked > self.cut && record.answered < self.restore
    }
}

/// How `windows` excuse an error `record` answered: an outage excuses an
/// outage's error from a call that overlapped it, and one that overlapped
/// its edges, or a mid-call fault, may have reached the daemon. With
/// outages of the inventory only, `launch` and `destroy` are never excused.
fn excuse(record: &Record, windows: &[Window], whole: bool) -> Excuse {
    let mutating = matches!(record.call, Call::Launch(_) | Call::Destroy(..));
    if mutating && !whole {
        return Excuse::None;
    }
    if !windows.iter().any(|w| w.overlaps(record)) {
        return Excuse::None;
    }
    if !mutating || windows.iter().any(|w| w.holds_inside(record)) {
        return Excuse::Nothing;
    }
    Excuse::Maybe
}

/// A recorded history of one fixture.
#[derive(Debug, Clone)]
struct Recorded {
    names: Vec<String>,
    blue: Vec<Record>,
    green: Vec<Record>,
    /// The faults made, in order.
    windows: Vec<Window>,
    /// A wrong answer found while recording (an instance that is not what
    /// was asked for), with the record that carries it.
    wrong: Option<(String, Record)>,
}

/// A failing history: why, the calls it needs, and the faults around them.
type Failing = (String, Vec<Record>, Vec<Window>);

/// The faults of `dep` that overlap the span of `calls`.
fn around(windows: &[Window], dep: Dep, calls: &[Record]) -> Vec<Window> {
    let (Some(from), Some(to)) = (
        calls.iter().map(|r| r.invoked).min(),
        calls.iter().map(|r| r.answered).max(),
    ) else {
        return Vec::new();
    };
    windows
        .iter()
        .filter(|w| w.dep == dep && w.start < to && w.end > from)
        .cloned()
        .collect()
}

/// Checks one recorded history: `Err` with the reason and the calls of the
/// smallest failing sub-history.
fn check(recorded: &Recorded, unknown: Teardown) -> Result<(), Failing> {
    for (dep, records) in [(Dep::Blue, &recorded.blue), (Dep::Green, &recorded.green)] {
        let launched: BTreeSet<String> = records
            .iter()
            .filter_map(|r| match &r.answer {
                Answer::Launched(id) => Some(id.as_str().to_owned()),
                _ => None,
            })
            .collect();
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
            // those whose deletion can only make the history easier to
            // linearize (finds and lists that bind nothing, refusals,
            // `Absent`, errors that reached nothing): a history without
            // some of them that is not linearizable shows the original is
            // not either, for the same reason. Launches and destroys that
            // may have changed what the name holds stay, since without them
            // a call left could fail for a reason the recorded history never
            // had; `check_concurrent` shrinks those by running smaller
            // histories.
            let mut i = 0;
            while i < core.len() {
                if !core[i]
                    .about(name)
                    .is_some_and(|op| op.observes_only(&launched))
                {
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
            let windows = around(&recorded.windows, dep, &calls);
            return Err((
                format!(
                    "the calls about name {shown:?} of deployment {dep:?} are not linearizable"
                ),
                calls,
                windows,
            ));
        }
        // Each name is linearizable on its own; the deployment taken whole
        // must be too (a list sees all its names at one instant).
        let names = recorded.names.len();
        let all: Vec<&Record> = records.iter().collect();
        if !linearizable_joint(&all, names, unknown) {
            let observes_only = |r: &Record| {
                (0..names).all(|name| r.about(name).is_none_or(|op| op.observes_only(&launched)))
            };
            let mut core = all;
            let mut i = 0;
            while i < core.len() {
                if !observes_only(core[i]) {
                    i += 1;
                    continue;
                }
                let mut fewer = core.clone();
                fewer.remove(i);
                if linearizable_joint(&fewer, names, unknown) {
                    i += 1;
                } else {
                    core = fewer;
                }
            }
            let calls: Vec<Record> = core.into_iter().cloned().collect();
            let windows = around(&recorded.windows, dep, &calls);
            return Err((
                format!(
                    "the calls of deployment {dep:?} are linearizable name by name but not together: a list saw its names at instants that never were one"
                ),
                calls,
                windows,
            ));
        }
        // An instance seen `Pending` when nothing allowed it: right only for
        // one no launch answered, made by a launch whose answer a fault
        // lost (it may never have been started).
        let faulted = recorded.windows.iter().any(|w| w.dep == dep);
        for record in records {
            for (id, allowed) in &record.pending {
                if *allowed || (faulted && !launched.contains(id.as_str())) {
                    continue;
                }
                let mut calls: Vec<Record> = records
                    .iter()
                    .filter(|r| {
                        std::ptr::eq(*r, record)
                            || matches!(&r.answer, Answer::Launched(l) if l == id)
                    })
                    .cloned()
                    .collect();
                calls.sort_by_key(|r| r.invoked);
                let windows = around(&recorded.windows, dep, &calls);
                return Err((
                    format!(
                        "instance {id} of deployment {dep:?} was seen Pending, though its command never stops and time does not move: only the instance of a launch still under way (in wall time) or of a launch a fault cut short may be"
                    ),
                    calls,
                    windows,
                ));
            }
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
        let windows = around(&recorded.windows, record.via.dep(), &calls);
        return Err((reason.clone(), calls, windows));
    }
    Ok(())
}

/// The lines a failure prints: calls and faults in order of their start.
fn lines(calls: &[Record], windows: &[Window], names: &[String]) -> Vec<String> {
    let mut lines: Vec<(u64, String)> = calls
        .iter()
        .map(|r| (r.invoked, r.line(names)))
        .chain(windows.iter().map(|w| (w.start, w.line())))
        .collect();
    lines.sort_by_key(|(at, _)| *at);
    lines.into_iter().map(|(_, line)| line).collect()
}

/// Runs the concurrent mode (H12) against `factory`'s fixtures: for each of
/// `config.histories` fresh fixtures, `config.tasks` tasks each make
/// `config.calls_per_task` random calls at once (launch, destroy, find, list
/// over `config.names` names per deployment, through every provider object:
/// `blue`, `green`, and [`ProviderFactory::second`] when it gives one), while
/// `config.faults` faults are made (outages, H8, and answers lost mid-call,
/// H11), then the history is checked.
///
/// # What is checked
///
/// Every call's invocation and answer, and every fault's start and end, get
/// a place in one global order (an atomic counter read right before each
/// call and right after it returns). The history of each (deployment, name)
/// must be linearizable with respect to the contract, sequentially: a launch
/// of a held name answers `Conflict`, of a free one a fresh id that holds
/// it; a destroy of the held id answers `Stopped` (or `Requested` for a
/// backend that can only ask) exactly once and frees the name, of another id
/// `Absent` (`Requested`); a find, and a list read for that name, sees
/// exactly the held instance. Each instance answered must carry the name
/// asked, the deployment's owner, the provider's kind and the state
/// `Running` (never `Stopped`, and `Pending` only as below), and a list only
/// this deployment's instances of the shared names, each once.
///
/// # Faults
///
/// With [`ConcurrentConfig::faults`], faults are made one after another at
/// random moments while the tasks call, each lasting a few calls: an outage
/// of one deployment ([`ProviderFactory::set_outage`] `true`, then `false`),
/// or, for a factory that declares [`Policies::mid_call`](crate::Policies::mid_call),
/// half of them [`ProviderFactory::lose_answer`] (0 to 2 exchanges let
/// through) followed by an outage. The fault meets whichever calls reach the
/// connection while it lasts, from any task and any provider object of that
/// deployment. Then:
///
/// * An outage's error (`Unavailable`, `InventoryUnavailable`) is right only
///   from a call that overlapped a fault of its deployment; with
///   [`Outage::InventoryOnly`](crate::Outage::InventoryOnly), only from a
///   find or a list. Any other error is wrong, as without faults.
/// * A call that began after the connection was cut and answered before it
///   was restored reached no daemon: it changed nothing (H8).
/// * A launch or destroy answered an outage's error that overlapped a
///   fault's edges, or a lost answer, may or may not have happened (H11), and
///   may take effect as late as the fault's end: a request the daemon
///   received can still be at work after its caller saw the connection
///   break, so a fixture ends an outage only once its daemon has answered
///   everything delivered before.
/// * An instance such a launch made is named by its first sighting. Until a
///   find or list has seen it `Running`, it may be seen `Pending` (it may
///   never have been started) and may vanish (a backend removing what a
///   lost launch left, perhaps while another provider object of the
///   deployment saw it); once seen `Running`, it holds its name until
///   destroyed, like any other.
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
/// * Histories are checked per name first (small searches, and a failure
///   shrunk to the calls about one name), then each deployment's taken
///   whole, where a list must see all its names at one instant.
/// * Only valid, trusted specs; the rules for invalid and untrusted specs,
///   time and exit codes are the sequential suite's ([`check_contract`](crate::check_contract)).
///
/// # Failures
///
/// A failing history is first shrunk to the fewest calls about its name that
/// still fail the check, then histories with fewer tasks and calls (the same
/// seed sequence, [`ConcurrentConfig::shrink_attempts`] each) are tried, and the smallest failing
/// history found is answered, one line per call and per fault around them.
///
/// # Where it runs
///
/// Each history builds its fixture, calls, and tears it down inside a tokio
/// runtime of its own: two worker threads with
/// [`multi_thread`](ConcurrentConfig::multi_thread), one otherwise. The tasks
/// are spawned on it, so the provider must be `'static`. The faults are made
/// from the history's own task, alongside the callers.
///
/// # Panics
///
/// Never on a wrong answer. A `config` with fewer than 2 or more than 4
/// tasks, no calls, or no names or more than 4 is answered as a failure
/// naming the field; so is a fixture the factory could not build, or a
/// fault it could not make.
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
    let mut faults = 0;
    let mut fault_errors = 0;
    for n in 0..config.histories {
        let seed = config.seed.wrapping_add(u64::from(n));
        let recorded = record(factory, &config, seed).map_err(|reason| ConcurrentFailure {
            reason,
            seed,
            calls: Vec::new(),
        })?;
        calls += (recorded.blue.len() + recorded.green.len()) as u64;
        faults += recorded.windows.len() as u64;
        fault_errors += recorded
            .blue
            .iter()
            .chain(&recorded.green)
            .filter(|r| {
                r.excuse != Excuse::None && matches!(r.answer, Answer::Failed(k) if outage_error(k))
            })
            .count() as u64;
        if let Err((reason, found, windows)) = check(&recorded, unknown) {
            let ((reason, found, windows), names) = shrink(factory, &config, seed, unknown)
                .filter(|((_, smaller, _), _)| smaller.len() < found.len())
                .unwrap_or(((reason, found, windows), recorded.names));
            return Err(ConcurrentFailure {
                reason,
                seed,
                calls: lines(&found, &windows, &names),
            });
        }
    }
    Ok(ConcurrentSummary {
        histories: config.histories,
        calls,
        faults,
        fault_errors,
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
) -> Option<(Failing, Vec<String>)>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let mut best: Option<(Failing, Vec<String>)> = None;
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
                if let Err(failing) = check(&recorded, unknown)
                    && best
                        .as_ref()
                        .is_none_or(|((_, b, _), _)| failing.1.len() < b.len())
                {
                    best = Some((failing, recorded.names));
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
    /// Told whenever `clock` moves or the tasks are done: what the faults
    /// wait on.
    moved: tokio::sync::Notify,
    /// Whether every task is done.
    done: AtomicBool,
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

    /// Why `instance`, answered for `name` of `dep` through `via`, is wrong.
    /// An instance `Pending` is noted in `pending`, with whether that was
    /// right when seen (`pending_ok`: a launch of that name overlapped the
    /// call; or the backend declares a pending window), for [`check`] to
    /// judge once the history is known.
    fn judge(
        &self,
        via: Via,
        name: usize,
        instance: &Instance,
        pending_ok: bool,
        pending: &mut Vec<(InstanceId, bool)>,
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
        if instance.state == State::Pending {
            pending.push((instance.id.clone(), self.pending_allowed || pending_ok));
        } else if instance.state != State::Running {
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
        let mut pending = Vec::new();
        let ended_before = self.launches.lock().expect("not poisoned").clone();
        let invoked = self.clock.fetch_add(1, Ordering::SeqCst);
        self.moved.notify_waiters();
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
                    wrong = self.judge(via, *name, instance, false, &mut pending);
                    self.learn(dep, *name, &instance.id);
                }
                answer.map(|i| Answer::Launched(i.id))
            }
            Call::Destroy(_, id) => provider.destroy(id).await.map(Answer::Torn),
            Call::Find(name) => {
                let answer = provider.find(&self.names[*name]).await;
                if let Ok(Some(instance)) = &answer {
                    let pending_ok = self.launch_overlapped(dep, *name, &ended_before);
                    wrong = self.judge(via, *name, instance, pending_ok, &mut pending);
                    self.learn(dep, *name, &instance.id);
                }
                answer.map(|found| Answer::Found(found.map(|i| i.id)))
            }
            Call::List => provider.list().await.map(|all| {
                let wrong = &mut wrong;
                let pending = &mut pending;
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
                        .or_else(|| self.judge(via, name, instance, pending_ok, pending));
                    self.learn(dep, name, &instance.id);
                    seen.push((name, instance.id.clone()));
                }
                seen.sort_by_key(|(n, _)| *n);
                Answer::Listed(seen)
            }),
        }
        .unwrap_or_else(|err: Error| Answer::Failed(err.kind()));
        let answered = self.clock.fetch_add(1, Ordering::SeqCst);
        self.moved.notify_waiters();
        let record = Record {
            task,
            via,
            call,
            invoked,
            answered,
            answer,
            pending,
            excuse: Excuse::None,
            settled: answered,
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
            moved: tokio::sync::Notify::new(),
            done: AtomicBool::new(false),
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
        let faults = faults(config, seed, factory.policies().mid_call);
        let joined = async {
            let mut panicked = None;
            for handle in handles {
                if let Err(err) = handle.await {
                    panicked.get_or_insert(format!("a task calling the provider failed: {err}"));
                }
            }
            shared.done.store(true, Ordering::SeqCst);
            shared.moved.notify_waiters();
            panicked
        };
        let (panicked, windows) = tokio::join!(joined, control(factory, &shared, &faults));
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
        let windows = windows?;
        let whole = factory.policies().outage == Outage::WholeConnection;
        let mut records = shared.records.into_inner().expect("not poisoned");
        for record in &mut records {
            record.excuse = excuse(record, &windows, whole);
            if record.excuse == Excuse::Maybe && matches!(record.answer, Answer::Failed(_)) {
                record.settled = windows
                    .iter()
                    .filter(|w| w.overlaps(record))
                    .map(|w| w.end)
                    .fold(record.answered, u64::max);
            }
        }
        records.sort_by_key(|r| r.invoked);
        let (blue, green) = records.into_iter().partition(|r| r.via.dep() == Dep::Blue);
        Ok(Recorded {
            names: shared.names,
            blue,
            green,
            windows,
            wrong: shared.wrong.into_inner().expect("not poisoned"),
        })
    })
}

/// A fault a history is to have.
#[derive(Debug, Clone, Copy)]
struct Fault {
    dep: Dep,
    /// The global order at which it begins, and for how many more it lasts.
    begin: u64,
    length: u64,
    /// `Some(after)`: it begins with an answer lost after `after` exchanges.
    lose: Option<u32>,
}

/// Plans `config.faults` faults from `seed` (a stream of its own, so the
/// calls planned are the same with and without faults), in order of their
/// beginning.
fn faults(config: &ConcurrentConfig, seed: u64, mid_call: bool) -> Vec<Fault> {
    let mut rng = rng_of(seed ^ 0x5eed_fa17);
    let span = 2 * (config.tasks * config.calls_per_task) as u64;
    let mut faults: Vec<Fault> = (0..config.faults)
        .map(|_| Fault {
            dep: if rng.random_bool(0.5) {
                Dep::Blue
            } else {
                Dep::Green
            },
            begin: rng.random_range(0..span),
            length: 2 * rng.random_range(2..=6u64),
            lose: (mid_call && rng.random_bool(0.5)).then(|| rng.random_range(0..=2u32)),
        })
        .collect();
    faults.sort_by_key(|f| f.begin);
    faults
}

/// Waits until the history's global order reaches `at`: `false` if the
/// tasks were done first.
async fn reach<P>(shared: &Shared<P>, at: u64) -> bool {
    loop {
        let moved = shared.moved.notified();
        let mut moved = std::pin::pin!(moved);
        moved.as_mut().enable();
        if shared.clock.load(Ordering::SeqCst) >= at {
            return true;
        }
        if shared.done.load(Ordering::SeqCst) {
            return false;
        }
        moved.await;
    }
}

/// Makes `faults` while the tasks call, one after another, and answers
/// where each fell in the history's global order. Ends every outage it
/// began, even when a factory call fails.
async fn control<F>(
    factory: &F,
    shared: &Shared<F::Provider>,
    faults: &[Fault],
) -> Result<Vec<Window>, String>
where
    F: ProviderFactory,
{
    let tick = || shared.clock.fetch_add(1, Ordering::SeqCst);
    let failed = |what: &str, err: FixtureError| format!("the factory could not {what}: {err}");
    let mut windows = Vec::new();
    for fault in faults {
        if !reach(shared, fault.begin).await {
            break;
        }
        let deployment = match fault.dep {
            Dep::Blue => &shared.fixture.blue,
            Dep::Green => &shared.fixture.green,
        };
        let start = tick();
        let begun = match fault.lose {
            Some(after) => factory
                .lose_answer(deployment, after)
                .await
                .map_err(|err| failed("arm a lost answer", err)),
            None => factory
                .set_outage(deployment, true)
                .await
                .map_err(|err| failed("start an outage", err)),
        };
        let cut = match begun {
            Ok(()) if fault.lose.is_some() => {
                reach(shared, start + fault.length / 2).await;
                tick();
                let cut = factory
                    .set_outage(deployment, true)
                    .await
                    .map_err(|err| failed("start an outage", err));
                cut.map(|()| tick())
            }
            Ok(()) => Ok(tick()),
            Err(err) => Err(err),
        };
        if cut.is_ok() {
            reach(shared, start + fault.length).await;
        }
        let restore = tick();
        let ended = factory
            .set_outage(deployment, false)
            .await
            .map_err(|err| failed("end an outage", err));
        let end = tick();
        let cut = cut?;
        ended?;
        windows.push(Window {
            dep: fault.dep,
            lose: fault.lose,
            start,
            cut,
            restore,
            end,
        });
    }
    Ok(windows)
}

/// Linearizable histories made without a provider, for the checker's
/// benchmark and tests: not part of the suite's API.
#[doc(hidden)]
pub mod synthetic {
    use super::*;

    /// A recorded history of one deployment, made by [`history`].
    #[derive(Debug, Clone)]
    pub struct SyntheticHistory(pub(super) Recorded);

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
        faulted_history(tasks, calls_per_task, names, seed, 0.0)
    }

    /// As [`history`], but each launch and destroy is, with probability
    /// `cut`, one a fault cut short (H11): answered `Unavailable`, and
    /// applied to the store or not, by a coin (an instance such a launch
    /// makes is seen `Running` from then on). The history holds one fault
    /// over its whole span.
    pub fn faulted_history(
        tasks: usize,
        calls_per_task: usize,
        names: usize,
        seed: u64,
        cut: f64,
    ) -> SyntheticHistory {
        let mut rng = rng_of(seed);
        let mut faults = rng_of(seed ^ 0x00c0_ffee);
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
        let mut cuts = 0;
        for (_, task, invoked, answered, call) in planned {
            let short =
                matches!(call, Planned::Launch(_) | Planned::Destroy(_)) && faults.random_bool(cut);
            let happened = faults.random_bool(0.5);
            let (call, answer) = match call {
                Planned::Launch(n) if short => {
                    if held[n].is_none() && happened {
                        next += 1;
                        held[n] = Some(InstanceId::from(format!("s-{next}")));
                    }
                    (Call::Launch(n), Answer::Failed(ErrorKind::Unavailable))
                }
                Planned::Destroy(n) if short && held[n].is_some() => {
                    let id = held[n].clone().unwrap_or_else(|| InstanceId::from("none"));
                    if happened {
                        held[n] = None;
                        retired[n] = Some(id.clone());
                    }
                    (Call::Destroy(n, id), Answer::Failed(ErrorKind::Unavailable))
                }
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
                pending: Vec::new(),
                excuse: if short {
                    cuts += 1;
                    Excuse::Maybe
                } else {
                    Excuse::None
                },
                settled: answered,
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
            record.settled = record.answered;
        }
        records.sort_by_key(|r| r.invoked);
        let end = 2 * records.len() as u64;
        SyntheticHistory(Recorded {
            names: (0..names).map(|n| format!("h12-{n}")).collect(),
            blue: records,
            green: Vec::new(),
            windows: if cuts > 0 {
                vec![Window {
                    dep: Dep::Blue,
                    lose: Some(0),
                    start: 0,
                    cut: end,
                    restore: end,
                    end,
                }]
            } else {
                Vec::new()
            },
            wrong: None,
        })
    }

    /// Whether [`check_concurrent`]'s check passes `history`.
    pub fn check(history: &SyntheticHistory) -> bool {
        super::check(&history.0, Teardown::Absent).is_ok()
    }

    /// Whether each name's history, taken on its own, is linearizable: the
    /// first part of the check, without the whole deployment's.
    pub fn check_names(history: &SyntheticHistory) -> bool {
        let all: Vec<&Record> = history.0.blue.iter().collect();
        (0..history.0.names.len()).all(|name| linearizable(&all, name, Teardown::Absent))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        // H12: the benchmark's check fails a history that is not
        // linearizable: one whose find saw an instance nobody launched.
        #[test]
        fn h12_synthetic_check_fails_a_history_that_is_not_linearizable() {
            let mut history = history(2, 10, 1, 3);
            assert!(check(&history));
            let find = history
                .0
                .blue
                .iter_mut()
                .find(|r| matches!(r.call, Call::Find(_)))
                .expect("a find");
            find.answer = Answer::Found(Some(InstanceId::from("nobody".to_owned())));
            // Within ten seconds: a shrinking loop that never ends fails the
            // test rather than hanging it.
            let (answer, answered) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = answer.send(check(&history));
            });
            let passed = answered
                .recv_timeout(Duration::from_secs(10))
                .expect("check answered within ten seconds");
            assert!(!passed);
        }

        // H12: the benchmark's histories are a fixed function of their
        // seed (so its numbers compare across versions): each task's calls
        // follow one another, the global order ranks every invocation and
        // answer once, launches answer fresh ids `s-1`, `s-2`, ... in the
        // order they take effect, and every kind of call and answer occurs.
        #[test]
        fn h12_synthetic_histories_are_fixed_by_their_seed() {
            let small = history(2, 3, 1, 3);
            let names = vec!["h12-0".to_owned()];
            let shown: Vec<String> = small.0.blue.iter().map(|r| r.line(&names)).collect();
            assert_eq!(shown, GOLDEN);
            let big = history(4, 40, 2, 1);
            let records = &big.0.blue;
            let mut ranks: Vec<u64> = records
                .iter()
                .flat_map(|r| [r.invoked, r.answered])
                .collect();
            ranks.sort_unstable();
            assert_eq!(ranks, (0..2 * 160).collect::<Vec<u64>>());
            for task in 0..4 {
                let own: Vec<&Record> = records.iter().filter(|r| r.task == task).collect();
                assert_eq!(own.len(), 40);
                assert!(own.windows(2).all(|p| p[0].answered < p[1].invoked));
            }
            let ids: Vec<String> = records
                .iter()
                .filter_map(|r| match &r.answer {
                    Answer::Launched(id) => Some(id.as_str().to_owned()),
                    _ => None,
                })
                .collect();
            let mut fresh: Vec<String> = (1..=ids.len()).map(|n| format!("s-{n}")).collect();
            fresh.retain(|id| ids.contains(id));
            assert_eq!(fresh.len(), ids.len(), "{ids:?}");
            let has = |f: &dyn Fn(&Record) -> bool| records.iter().any(f);
            assert!(has(&|r| matches!(r.answer, Answer::Launched(_))));
            assert!(has(&|r| matches!(
                r.answer,
                Answer::Failed(ErrorKind::Conflict)
            )));
            assert!(has(&|r| matches!(
                r.answer,
                Answer::Torn(Teardown::Stopped)
            )));
            assert!(has(&|r| matches!(r.answer, Answer::Torn(Teardown::Absent))));
            assert!(has(&|r| matches!(r.call, Call::Find(_))));
            assert!(has(
                &|r| matches!(r.answer, Answer::Listed(ref l) if !l.is_empty())
            ));
        }

        // H12/H11: the benchmark's histories with calls cut short are a
        // fixed function of their seed too: which launches and destroys a
        // fault cut short, whether each happened (a lost launch's instance
        // is named and seen from then on), and the one fault over the whole
        // history; a history with none cut short has no fault.
        #[test]
        fn h12_synthetic_faulted_histories_are_fixed_by_their_seed() {
            let names = vec!["h12-0".to_owned()];
            let shown = |seed| {
                let h = faulted_history(2, 4, 1, seed, 0.5);
                assert!(check(&h), "{h:?}");
                lines(&h.0.blue, &h.0.windows, &names)
            };
            assert_eq!(shown(8), FAULTED_8);
            assert_eq!(shown(7), FAULTED_7);
            // Seed 10 cuts nothing short: no fault.
            assert!(shown(10).iter().all(|l| !l.starts_with("fault")));
            assert!(faulted_history(3, 10, 2, 1, 0.0).0.windows.is_empty());
            assert!(history(3, 10, 2, 1).0.windows.is_empty());
        }

        /// `faulted_history(2, 4, 1, 8, 0.5)`: a lost launch made `s-1`,
        /// which a find then sees and a relaunch meets as a conflict.
        const FAULTED_8: [&str; 9] = [
            "task 1 via Blue: list() [0..4] -> Ok([])",
            "fault of Blue: an answer lost after 0 exchanges armed [0], connection cut [..16], restored [16..16]",
            "task 0 via Blue: find(\"h12-0\") [1..2] -> Ok(None)",
            "task 0 via Blue: launch(\"h12-0\") [3..5] -> Err(Unavailable)",
            "task 1 via Blue: launch(\"h12-0\") [6..9] -> Err(Conflict)",
            "task 0 via Blue: find(\"h12-0\") [7..8] -> Ok(Some(s-1))",
            "task 0 via Blue: launch(\"h12-0\") [10..12] -> Err(Conflict)",
            "task 1 via Blue: destroy(s-1) [of \"h12-0\"] [11..13] -> Ok(Stopped)",
            "task 1 via Blue: list() [14..15] -> Ok([])",
        ];

        /// `faulted_history(2, 4, 1, 7, 0.5)`: destroys and launches cut
        /// short, some of which happened.
        const FAULTED_7: [&str; 9] = [
            "task 1 via Blue: list() [0..4] -> Ok([\"h12-0\"=s-1])",
            "fault of Blue: an answer lost after 0 exchanges armed [0], connection cut [..16], restored [16..16]",
            "task 0 via Blue: launch(\"h12-0\") [1..2] -> Ok(s-1)",
            "task 0 via Blue: list() [3..5] -> Ok([\"h12-0\"=s-1])",
            "task 0 via Blue: launch(\"h12-0\") [6..8] -> Err(Unavailable)",
            "task 1 via Blue: destroy(s-1) [of \"h12-0\"] [7..9] -> Err(Unavailable)",
            "task 1 via Blue: launch(\"h12-0\") [10..12] -> Err(Unavailable)",
            "task 0 via Blue: launch(\"h12-0\") [11..13] -> Err(Unavailable)",
            "task 1 via Blue: destroy(s-2) [of \"h12-0\"] [14..15] -> Err(Unavailable)",
        ];

        // H12: the per-name part of the check, as the benchmark's baseline,
        // fails a history one name of which is not linearizable.
        #[test]
        fn h12_synthetic_check_names_fails_a_name_that_is_not_linearizable() {
            let mut history = history(2, 10, 2, 3);
            assert!(check_names(&history));
            let find = history
                .0
                .blue
                .iter_mut()
                .find(|r| matches!(r.call, Call::Find(_)))
                .expect("a find");
            find.answer = Answer::Found(Some(InstanceId::from("nobody".to_owned())));
            assert!(!check_names(&history));
        }

        /// `history(2, 3, 1, 3)`, one line per call: a seed whose history
        /// changes if an effect may fall on an invocation's or an answer's
        /// instant (its effect instants are odd, strictly inside).
        const GOLDEN: [&str; 6] = [
            "task 1 via Blue: destroy(s-1) [of \"h12-0\"] [0..4] -> Ok(Stopped)",
            "task 0 via Blue: launch(\"h12-0\") [1..2] -> Ok(s-1)",
            "task 0 via Blue: list() [3..5] -> Ok([])",
            "task 0 via Blue: destroy(s-1) [of \"h12-0\"] [6..9] -> Ok(Absent)",
            "task 1 via Blue: find(\"h12-0\") [7..8] -> Ok(None)",
            "task 1 via Blue: list() [10..11] -> Ok([])",
        ];
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
            pending: Vec::new(),
            excuse: Excuse::None,
            settled: answered,
        }
    }

    fn id(s: &str) -> InstanceId {
        InstanceId::from(s.to_owned())
    }

    /// [`check`] of `recorded` (authoritative), failing the test when it
    /// takes more than ten seconds: a shrinking loop that never ends fails
    /// the test rather than hanging it.
    fn checked(recorded: &Recorded) -> Result<(), Failing> {
        let (answer, answered) = std::sync::mpsc::channel();
        let recorded = recorded.clone();
        std::thread::spawn(move || {
            let _ = answer.send(check(&recorded, Teardown::Absent));
        });
        answered
            .recv_timeout(Duration::from_secs(10))
            .expect("check answered within ten seconds")
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
            windows: Vec::new(),
            wrong: None,
        };
        let (reason, calls, _) = checked(&recorded).unwrap_err();
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
            windows: Vec::new(),
            wrong: None,
        };
        let (_, calls, _) = checked(&recorded).unwrap_err();
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 2, 4, 6], "{calls:?}");
    }

    // H12: every history a correct sequential store makes, each call taking
    // effect inside its own interval, passes the check, at every size the
    // benchmark measures; so does one where a fifth of the launches and
    // destroys were cut short by a fault (H11) and happened or not.
    #[test]
    fn h12_linearizable_histories_pass() {
        // Under a watchdog: a history whose check takes exponential time
        // fails the test rather than hanging it (it takes well under a
        // second).
        let (finished, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for tasks in 2..=4 {
                for calls in [1, 10, 40] {
                    for seed in 0..20 {
                        let history = synthetic::history(tasks, calls, 2, seed);
                        assert_eq!(history.calls(), tasks * calls);
                        assert!(synthetic::check(&history), "{history:?}");
                        assert!(synthetic::check_names(&history), "{history:?}");
                        let history = synthetic::faulted_history(tasks, calls, 2, seed, 0.2);
                        assert_eq!(history.calls(), tasks * calls);
                        assert!(synthetic::check(&history), "{history:?}");
                    }
                }
            }
            let _ = finished.send(());
        });
        done.recv_timeout(Duration::from_secs(20))
            .expect("every history checked, within twenty seconds");
        // The faulted histories do hold calls cut short.
        let cut = synthetic::faulted_history(4, 40, 2, 1, 0.2);
        assert!(cut.0.blue.iter().any(|r| r.excuse == Excuse::Maybe));
        assert!(!cut.0.windows.is_empty());
    }

    fn valid(ops: &[NameOp]) -> bool {
        let mut worlds = Authoritative::init();
        for op in ops {
            let (ok, next) = Authoritative::apply(op, &worlds);
            if !ok {
                return false;
            }
            worlds = next;
        }
        true
    }

    fn sees(id: &str, pending: bool) -> NameOp {
        NameOp::Sees(Some((id.to_owned(), pending)))
    }

    const LOST: ErrorKind = ErrorKind::Unavailable;

    // H12/H8: an outage's error is right only from a call a fault excuses;
    // any other error never is.
    #[test]
    fn h12_h8_an_outage_error_is_right_only_when_a_fault_excuses_it() {
        let failed = |kind, excuse| NameOp::Failed(kind, excuse);
        assert!(!valid(&[failed(
            ErrorKind::InventoryUnavailable,
            Excuse::None
        )]));
        assert!(valid(&[failed(
            ErrorKind::InventoryUnavailable,
            Excuse::Nothing
        )]));
        assert!(valid(&[failed(ErrorKind::Unavailable, Excuse::Maybe)]));
        assert!(!valid(&[failed(ErrorKind::InvalidSpec, Excuse::Maybe)]));
        assert!(!valid(&[NameOp::LaunchFailed(LOST, Excuse::None)]));
        assert!(!valid(&[NameOp::LaunchFailed(
            ErrorKind::InvalidSpec,
            Excuse::Maybe
        )]));
        assert!(valid(&[NameOp::LaunchFailed(LOST, Excuse::Nothing)]));
        let destroy = |excuse| NameOp::Destroy("a".to_owned(), Err((LOST, excuse)));
        assert!(!valid(&[destroy(Excuse::None)]));
        assert!(valid(&[destroy(Excuse::Nothing)]));
        assert!(!valid(&[NameOp::Destroy(
            "a".to_owned(),
            Err((ErrorKind::Conflict, Excuse::Maybe))
        )]));
    }

    // H12/H8: a launch made inside an outage made nothing; one a fault cut
    // short (H11) may have made an instance, whose first sighting names it.
    #[test]
    fn h12_h11_a_launch_cut_short_may_or_may_not_have_made_its_instance() {
        let inside = NameOp::LaunchFailed(LOST, Excuse::Nothing);
        let cut = NameOp::LaunchFailed(LOST, Excuse::Maybe);
        assert!(!valid(&[inside.clone(), sees("x", false)]));
        assert!(valid(&[inside, NameOp::Sees(None)]));
        assert!(valid(&[cut.clone(), NameOp::Sees(None)]));
        assert!(valid(&[cut.clone(), sees("x", false), sees("x", false)]));
        // Named once, it is that instance, and it holds the name.
        assert!(!valid(&[cut.clone(), sees("x", false), sees("y", false)]));
        assert!(!valid(&[
            cut.clone(),
            sees("x", false),
            NameOp::Launched("b".to_owned())
        ]));
        assert!(valid(&[
            cut.clone(),
            sees("x", false),
            NameOp::LaunchFailed(ErrorKind::Conflict, Excuse::None)
        ]));
        // Destroyed like any other; its id is never answered again.
        assert!(valid(&[
            cut.clone(),
            sees("x", false),
            NameOp::Destroy("x".to_owned(), Ok(Teardown::Stopped)),
            NameOp::Sees(None),
            NameOp::Destroy("x".to_owned(), Ok(Teardown::Absent)),
        ]));
        assert!(!valid(&[
            cut.clone(),
            sees("x", false),
            NameOp::Destroy("x".to_owned(), Ok(Teardown::Stopped)),
            sees("x", false),
        ]));
        assert!(!valid(&[
            cut.clone(),
            sees("x", false),
            NameOp::Destroy("x".to_owned(), Ok(Teardown::Absent)),
        ]));
        // An id retired before is not the lost instance's.
        assert!(!valid(&[
            NameOp::Launched("a".to_owned()),
            NameOp::Destroy("a".to_owned(), Ok(Teardown::Stopped)),
            cut.clone(),
            sees("a", false),
        ]));
        // Never a launch that answered a fresh id while it may be held: the
        // world where the lost launch made nothing allows it.
        assert!(valid(&[cut.clone(), NameOp::Launched("b".to_owned())]));
        // A launch of a held name changes nothing, cut short or not.
        assert!(!valid(&[
            NameOp::Launched("a".to_owned()),
            cut,
            NameOp::Destroy("a".to_owned(), Ok(Teardown::Stopped)),
            sees("x", false),
        ]));
    }

    // H12/H11: an instance only a lost launch made may be seen Pending (it
    // may never have started) and may vanish until seen Running; once
    // seen Running it holds its name until destroyed, never Pending again.
    #[test]
    fn h12_h11_a_lost_instance_seen_running_holds_its_name() {
        let cut = NameOp::LaunchFailed(LOST, Excuse::Maybe);
        assert!(valid(&[cut.clone(), sees("x", true), NameOp::Sees(None)]));
        assert!(valid(&[cut.clone(), sees("x", true), sees("x", false)]));
        assert!(!valid(&[cut.clone(), sees("x", false), NameOp::Sees(None)]));
        assert!(!valid(&[cut.clone(), sees("x", false), sees("x", true)]));
        // A Pending sighting names it too.
        assert!(!valid(&[cut, sees("x", true), sees("y", true)]));
        // A known instance is held whatever a sighting says of its state
        // (the Pending rule for those is judged apart).
        assert!(valid(&[NameOp::Launched("a".to_owned()), sees("a", true)]));
        assert!(!valid(&[
            NameOp::Launched("a".to_owned()),
            sees("b", false)
        ]));
    }

    // H12/H11: a destroy a fault cut short may or may not have happened.
    #[test]
    fn h12_h11_a_destroy_cut_short_may_or_may_not_have_happened() {
        let launched = NameOp::Launched("a".to_owned());
        let destroy = |excuse| NameOp::Destroy("a".to_owned(), Err((LOST, excuse)));
        assert!(valid(&[
            launched.clone(),
            destroy(Excuse::Maybe),
            NameOp::Sees(None)
        ]));
        assert!(valid(&[
            launched.clone(),
            destroy(Excuse::Maybe),
            sees("a", false)
        ]));
        assert!(!valid(&[
            launched.clone(),
            destroy(Excuse::Nothing),
            NameOp::Sees(None)
        ]));
        // Once seen gone, it stays gone.
        assert!(!valid(&[
            launched.clone(),
            destroy(Excuse::Maybe),
            NameOp::Sees(None),
            sees("a", false)
        ]));
        // A destroy of another id cut short frees nothing.
        assert!(!valid(&[
            launched,
            NameOp::Destroy("b".to_owned(), Err((LOST, Excuse::Maybe))),
            NameOp::Sees(None)
        ]));
    }

    // H12: with a backend that can only ask, a destroy may answer
    // Requested for any id, and frees the name when it named the held one.
    #[test]
    fn h12_requested_frees_the_held_instance_and_nothing_else() {
        let apply_all = |ops: &[NameOp]| {
            let mut worlds = Asking::init();
            for op in ops {
                let (ok, next) = Asking::apply(op, &worlds);
                if !ok {
                    return false;
                }
                worlds = next;
            }
            true
        };
        let launched = NameOp::Launched("a".to_owned());
        let requested = |id: &str| NameOp::Destroy(id.to_owned(), Ok(Teardown::Requested));
        assert!(apply_all(&[
            launched.clone(),
            requested("a"),
            NameOp::Sees(None)
        ]));
        assert!(apply_all(&[
            launched.clone(),
            requested("b"),
            sees("a", false)
        ]));
        assert!(!apply_all(&[
            launched.clone(),
            requested("b"),
            NameOp::Sees(None)
        ]));
        assert!(!apply_all(&[
            launched.clone(),
            NameOp::Destroy("a".to_owned(), Ok(Teardown::Absent))
        ]));
        assert!(apply_all(&[
            launched,
            NameOp::Destroy("a".to_owned(), Ok(Teardown::Stopped)),
            NameOp::Sees(None)
        ]));
    }

    fn window(start: u64, cut: u64, restore: u64, end: u64) -> Window {
        Window {
            dep: Dep::Blue,
            lose: None,
            start,
            cut,
            restore,
            end,
        }
    }

    // H12/H8: which calls a fault excuses, and which may have reached the
    // daemon: inside the cut nothing did; across its edges a launch or a
    // destroy may have; a find or list never changes anything; with
    // outages of the inventory only, launch and destroy are never excused.
    #[test]
    fn h12_h8_a_fault_excuses_the_calls_that_overlap_it() {
        let windows = [window(10, 12, 20, 22)];
        let launch =
            |invoked, answered| record(0, invoked, answered, Call::Launch(0), Answer::Failed(LOST));
        assert_eq!(excuse(&launch(0, 9), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(23, 24), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(13, 19), &windows, true), Excuse::Nothing);
        assert_eq!(excuse(&launch(12, 19), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(13, 20), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(5, 11), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(21, 30), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(5, 30), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(5, 10), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(22, 30), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(13, 19), &windows, false), Excuse::None);
        let destroy = record(0, 5, 30, Call::Destroy(0, id("a")), Answer::Failed(LOST));
        assert_eq!(excuse(&destroy, &windows, true), Excuse::Maybe);
        let find = record(0, 5, 30, Call::Find(0), Answer::Failed(LOST));
        assert_eq!(excuse(&find, &windows, false), Excuse::Nothing);
        assert_eq!(excuse(&find, &windows, true), Excuse::Nothing);
        let list = record(0, 0, 9, Call::List, Answer::Failed(LOST));
        assert_eq!(excuse(&list, &windows, true), Excuse::None);
        // Another deployment's fault excuses nothing.
        let green = Window {
            dep: Dep::Green,
            ..window(10, 12, 20, 22)
        };
        assert_eq!(excuse(&launch(13, 19), &[green], true), Excuse::None);
    }

    // H12/H11: a launch a fault cut short may take effect until the fault
    // ends (the daemon may still be at work on it), and no later.
    #[test]
    fn h12_h11_a_call_cut_short_takes_effect_by_the_end_of_its_fault() {
        let mut cut = record(0, 0, 3, Call::Launch(0), Answer::Failed(LOST));
        cut.excuse = Excuse::Maybe;
        let seen = |invoked, answered| {
            let mut r = record(
                1,
                invoked,
                answered,
                Call::Find(0),
                Answer::Found(Some(id("x"))),
            );
            r.task = 1;
            r
        };
        let none = record(2, 4, 5, Call::Find(0), Answer::Found(None));
        // Seen gone after the call answered, then there: only if its effect
        // may land after its answer.
        assert!(!linearizable(
            &[&cut, &none, &seen(6, 7)],
            0,
            Teardown::Absent
        ));
        cut.settled = 8;
        assert!(linearizable(
            &[&cut, &none, &seen(6, 7)],
            0,
            Teardown::Absent
        ));
        let gone = record(2, 9, 10, Call::Find(0), Answer::Found(None));
        assert!(!linearizable(
            &[&cut, &seen(6, 7), &gone],
            0,
            Teardown::Absent
        ));
        assert!(
            cut.line(&["h12-0".to_owned()])
                .ends_with("(may take effect until [8])"),
            "{}",
            cut.line(&["h12-0".to_owned()])
        );
    }

    // H12: an instance seen Pending when no launch of its name was under
    // way and the backend declares no pending window is wrong, unless it is
    // one no launch answered (a lost launch's) in a history with faults.
    #[test]
    fn h12_a_pending_sighting_is_right_only_for_a_lost_launch() {
        let launched = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        let mut seen = record(1, 2, 3, Call::Find(0), Answer::Found(Some(id("a"))));
        seen.pending = vec![(id("a"), false)];
        let recorded = |blue: Vec<Record>, windows: Vec<Window>| Recorded {
            names: vec!["h12-0".to_owned()],
            blue,
            green: Vec::new(),
            windows,
            wrong: None,
        };
        let failing = check(
            &recorded(
                vec![launched.clone(), seen.clone()],
                vec![window(10, 11, 12, 13)],
            ),
            Teardown::Absent,
        )
        .unwrap_err();
        assert!(failing.0.contains("seen Pending"), "{}", failing.0);
        assert_eq!(failing.1.len(), 2);
        // Allowed when seen (a launch was under way).
        let mut allowed = seen.clone();
        allowed.pending = vec![(id("a"), true)];
        assert!(
            check(
                &recorded(vec![launched, allowed], Vec::new()),
                Teardown::Absent
            )
            .is_ok()
        );
        // An instance no launch answered: a lost launch's, with a fault.
        let mut cut = record(0, 0, 1, Call::Launch(0), Answer::Failed(LOST));
        cut.excuse = Excuse::Maybe;
        let faults = vec![window(0, 1, 2, 3)];
        assert!(
            check(
                &recorded(vec![cut.clone(), seen.clone()], faults),
                Teardown::Absent
            )
            .is_ok()
        );
        // Without a fault, no launch could have been lost.
        let failing = check(&recorded(vec![cut, seen], Vec::new()), Teardown::Absent).unwrap_err();
        assert!(!failing.1.is_empty());
    }

    // H12: a failure prints its calls and the faults around them in the
    // order they began.
    #[test]
    fn h12_failure_lines_interleave_calls_and_faults() {
        let names = vec!["h12-0".to_owned()];
        let calls = [
            record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a"))),
            record(1, 14, 15, Call::Find(0), Answer::Found(None)),
        ];
        let faults = [
            window(10, 11, 12, 13),
            Window {
                lose: Some(2),
                ..window(2, 4, 6, 7)
            },
        ];
        let printed = lines(&calls, &faults, &names);
        assert_eq!(
            printed,
            [
                "task 0 via Blue: launch(\"h12-0\") [0..1] -> Ok(a)",
                "fault of Blue: an answer lost after 2 exchanges armed [2], connection cut [..4], restored [6..7]",
                "fault of Blue: an outage [10..11], restored [12..13]",
                "task 1 via Blue: find(\"h12-0\") [14..15] -> Ok(None)",
            ]
        );
        assert_eq!(around(&faults, Dep::Blue, &calls[1..]).len(), 0);
        assert_eq!(around(&faults, Dep::Blue, &calls).len(), 2);
        assert_eq!(around(&faults, Dep::Green, &calls).len(), 0);
        assert!(around(&faults, Dep::Blue, &[]).is_empty());
    }

    // H12: a list must see all its names at one instant: one that saw the
    // second name's instance but not the first's, though the first was
    // launched before the second and destroyed after, passes name by name
    // and fails taken whole.
    #[test]
    fn h12_a_list_torn_across_names_fails_the_whole_deployment_check() {
        let recorded = Recorded {
            names: vec!["h12-0".to_owned(), "h12-1".to_owned()],
            blue: vec![
                record(1, 0, 7, Call::List, Answer::Listed(vec![(1, id("b"))])),
                record(0, 1, 2, Call::Launch(0), Answer::Launched(id("a"))),
                record(0, 3, 4, Call::Launch(1), Answer::Launched(id("b"))),
                record(0, 8, 9, Call::Find(0), Answer::Found(Some(id("a")))),
            ],
            green: Vec::new(),
            windows: Vec::new(),
            wrong: None,
        };
        let all: Vec<&Record> = recorded.blue.iter().collect();
        assert!(linearizable(&all, 0, Teardown::Absent));
        assert!(linearizable(&all, 1, Teardown::Absent));
        assert!(!linearizable_joint(&all, 2, Teardown::Absent));
        assert!(!linearizable_joint(&all, 2, Teardown::Requested));
        let (reason, calls, _) = checked(&recorded).unwrap_err();
        assert!(reason.contains("not together"), "{reason}");
        // The find that changes nothing is not needed.
        assert_eq!(calls.len(), 3, "{calls:?}");
        // Seeing both, or neither, is fine.
        let both = record(
            1,
            0,
            7,
            Call::List,
            Answer::Listed(vec![(0, id("a")), (1, id("b"))]),
        );
        let neither = record(1, 0, 7, Call::List, Answer::Listed(Vec::new()));
        for list in [both, neither] {
            let fine = [&list, all[1], all[2], all[3]];
            assert!(linearizable_joint(&fine, 2, Teardown::Absent));
        }
        assert!(linearizable_joint(&[], 2, Teardown::Absent));
        // A backend that can only ask may answer Requested for an id it
        // does not hold, and the whole check knows which backend it checks.
        let requested = record(
            1,
            5,
            6,
            Call::Destroy(1, id("c")),
            Answer::Torn(Teardown::Requested),
        );
        let asked = [all[1], all[2], &requested];
        assert!(linearizable_joint(&asked, 2, Teardown::Requested));
        assert!(!linearizable_joint(&asked, 2, Teardown::Absent));
    }

    // H12: the whole-deployment specification keeps one canonical form of
    // each world (names that hold and retired nothing left out), and holds
    // the worlds a call cut short leaves, name by name.
    #[test]
    fn h12_joint_worlds_are_canonical_and_hold_every_outcome() {
        let init = JointAuthoritative::init();
        let (ok, worlds) = JointAuthoritative::apply(
            &vec![(1, NameOp::Sees(None)), (0, NameOp::Sees(None))],
            &init,
        );
        assert!(ok);
        assert_eq!(worlds, init);
        let (ok, worlds) =
            JointAuthoritative::apply(&vec![(1, NameOp::Launched("b".to_owned()))], &init);
        assert!(ok);
        assert_eq!(worlds.len(), 1);
        assert_eq!(worlds[0].len(), 2);
        assert_eq!(worlds[0][0], NameState::default());
        let cut = vec![(0, NameOp::LaunchFailed(LOST, Excuse::Maybe))];
        let (ok, worlds) = JointAuthoritative::apply(&cut, &worlds);
        assert!(ok);
        // Made or not (made: seen yet, so it may still vanish).
        assert_eq!(worlds.len(), 2, "{worlds:?}");
        let (ok, worlds) = JointAsking::apply(&vec![(0, sees("x", false))], &worlds);
        assert!(ok);
        assert_eq!(worlds.len(), 1, "{worlds:?}");
        let (ok, _) = JointAuthoritative::apply(&vec![(1, NameOp::Sees(None))], &worlds);
        assert!(!ok);
    }

    // H12: a failure prints each call as it was made and answered: an
    // instance seen Pending is marked so (only that one), errors and
    // teardowns by their kind, and the report leads with reason and seed.
    #[test]
    fn h12_failure_lines_show_every_answer_as_made() {
        let names = vec!["h12-0".to_owned(), "h12-1".to_owned()];
        let mut find = record(1, 2, 3, Call::Find(1), Answer::Found(Some(id("a"))));
        find.pending = vec![(id("a"), true)];
        assert_eq!(
            find.line(&names),
            "task 1 via Blue: find(\"h12-1\") [2..3] -> Ok(Some(a Pending))"
        );
        find.pending = vec![(id("b"), false)];
        assert_eq!(
            find.line(&names),
            "task 1 via Blue: find(\"h12-1\") [2..3] -> Ok(Some(a))"
        );
        let mut list = record(
            2,
            4,
            7,
            Call::List,
            Answer::Listed(vec![(0, id("a")), (1, id("b"))]),
        );
        list.via = Via::Green;
        list.pending = vec![(id("b"), false)];
        assert_eq!(
            list.line(&names),
            "task 2 via Green: list() [4..7] -> Ok([\"h12-0\"=a, \"h12-1\"=b Pending])"
        );
        let mut destroy = record(
            0,
            8,
            9,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        destroy.via = Via::Blue2;
        assert_eq!(
            destroy.line(&names),
            "task 0 via Blue2: destroy(a) [of \"h12-0\"] [8..9] -> Ok(Stopped)"
        );
        let failed = record(3, 10, 11, Call::Find(0), Answer::Failed(LOST));
        assert_eq!(
            failed.line(&names),
            "task 3 via Blue: find(\"h12-0\") [10..11] -> Err(Unavailable)"
        );
        let none = record(3, 12, 13, Call::Find(0), Answer::Found(None));
        assert_eq!(
            none.line(&names),
            "task 3 via Blue: find(\"h12-0\") [12..13] -> Ok(None)"
        );
        let failure = ConcurrentFailure {
            reason: "why".to_owned(),
            seed: 7,
            calls: vec!["one".to_owned(), "two".to_owned()],
        };
        assert_eq!(
            failure.to_string(),
            "H12: why (seed 7); smallest history (2 calls, [invoked..answered] in one global order):\n  one\n  two\n"
        );
    }

    // H12: each call is read for one name as what it says of that name, and
    // as nothing when it concerns another: a list as a sighting (or not) of
    // every name, a failed list as a failure for every name.
    #[test]
    fn h12_each_call_says_what_it_says_of_one_name_only() {
        let excused = |mut r: Record, excuse| {
            r.excuse = excuse;
            r
        };
        let launched = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        assert_eq!(launched.about(0), Some(NameOp::Launched("a".to_owned())));
        assert_eq!(launched.about(1), None);
        let refused = excused(
            record(
                0,
                0,
                1,
                Call::Launch(0),
                Answer::Failed(ErrorKind::Conflict),
            ),
            Excuse::Maybe,
        );
        assert_eq!(
            refused.about(0),
            Some(NameOp::LaunchFailed(ErrorKind::Conflict, Excuse::Maybe))
        );
        assert_eq!(refused.about(1), None);
        let stopped = record(
            0,
            0,
            1,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        assert_eq!(
            stopped.about(0),
            Some(NameOp::Destroy("a".to_owned(), Ok(Teardown::Stopped)))
        );
        assert_eq!(stopped.about(1), None);
        let cut = excused(
            record(0, 0, 1, Call::Destroy(0, id("a")), Answer::Failed(LOST)),
            Excuse::Nothing,
        );
        assert_eq!(
            cut.about(0),
            Some(NameOp::Destroy(
                "a".to_owned(),
                Err((LOST, Excuse::Nothing))
            ))
        );
        assert_eq!(cut.about(1), None);
        let odd = record(0, 0, 1, Call::Destroy(0, id("a")), Answer::Found(None));
        assert_eq!(odd.about(0), None);
        let mut seen = record(0, 0, 1, Call::Find(0), Answer::Found(Some(id("a"))));
        seen.pending = vec![(id("a"), false)];
        assert_eq!(seen.about(0), Some(sees("a", true)));
        assert_eq!(seen.about(1), None);
        let none = record(0, 0, 1, Call::Find(0), Answer::Found(None));
        assert_eq!(none.about(0), Some(NameOp::Sees(None)));
        let lost = excused(
            record(0, 0, 1, Call::Find(0), Answer::Failed(LOST)),
            Excuse::Nothing,
        );
        assert_eq!(lost.about(0), Some(NameOp::Failed(LOST, Excuse::Nothing)));
        assert_eq!(lost.about(1), None);
        let odd = record(0, 0, 1, Call::Launch(0), Answer::Found(None));
        assert_eq!(odd.about(0), None);
        let list = record(0, 0, 1, Call::List, Answer::Listed(vec![(1, id("b"))]));
        assert_eq!(list.about(0), Some(NameOp::Sees(None)));
        assert_eq!(list.about(1), Some(sees("b", false)));
        let lost = excused(
            record(0, 0, 1, Call::List, Answer::Failed(LOST)),
            Excuse::Maybe,
        );
        assert_eq!(lost.about(0), Some(NameOp::Failed(LOST, Excuse::Maybe)));
        assert_eq!(lost.about(1), Some(NameOp::Failed(LOST, Excuse::Maybe)));
        // A list that failed with no fault to excuse it fails the history.
        let unexcused = record(0, 0, 1, Call::List, Answer::Failed(LOST));
        assert!(!linearizable(&[&unexcused], 0, Teardown::Absent));
    }

    // H12: shrinking may delete only calls that change what a name holds in
    // no sequential history: refusals, `Absent` destroys, errors no fault
    // excused, sightings of a launched instance or of none. An outage's
    // error a fault excused stays, since the call may have been applied.
    #[test]
    fn h12_only_calls_that_change_nothing_are_deletable() {
        let launched: BTreeSet<String> = ["a".to_owned()].into();
        let deletable = |op: NameOp| op.observes_only(&launched);
        assert!(!deletable(NameOp::Launched("a".to_owned())));
        assert!(deletable(NameOp::Failed(LOST, Excuse::Maybe)));
        for excuse in [Excuse::None, Excuse::Nothing, Excuse::Maybe] {
            assert!(deletable(NameOp::LaunchFailed(ErrorKind::Conflict, excuse)));
            assert!(deletable(NameOp::Destroy(
                "a".to_owned(),
                Err((ErrorKind::Conflict, excuse))
            )));
        }
        assert!(deletable(NameOp::LaunchFailed(LOST, Excuse::None)));
        assert!(!deletable(NameOp::LaunchFailed(LOST, Excuse::Nothing)));
        assert!(!deletable(NameOp::LaunchFailed(LOST, Excuse::Maybe)));
        assert!(deletable(NameOp::Destroy(
            "a".to_owned(),
            Err((LOST, Excuse::None))
        )));
        assert!(!deletable(NameOp::Destroy(
            "a".to_owned(),
            Err((LOST, Excuse::Maybe))
        )));
        assert!(deletable(NameOp::Destroy(
            "a".to_owned(),
            Ok(Teardown::Absent)
        )));
        assert!(!deletable(NameOp::Destroy(
            "a".to_owned(),
            Ok(Teardown::Stopped)
        )));
        assert!(!deletable(NameOp::Destroy(
            "a".to_owned(),
            Ok(Teardown::Requested)
        )));
        assert!(deletable(NameOp::Sees(None)));
        assert!(deletable(sees("a", false)));
        assert!(!deletable(sees("x", false)));
    }

    // H12/H11: a failing history keeps the launch a fault cut short when the
    // failure needs it (it made the instance seen), and loses the refusal
    // it does not need.
    #[test]
    fn h12_h11_check_keeps_a_launch_cut_short_that_the_failure_needs() {
        let mut cut = record(0, 0, 3, Call::Launch(0), Answer::Failed(LOST));
        cut.excuse = Excuse::Maybe;
        let recorded = Recorded {
            names: vec!["h12-0".to_owned()],
            blue: vec![
                cut,
                record(1, 4, 5, Call::Find(0), Answer::Found(Some(id("x")))),
                record(2, 6, 7, Call::Find(0), Answer::Found(Some(id("y")))),
                record(
                    1,
                    8,
                    9,
                    Call::Launch(0),
                    Answer::Failed(ErrorKind::Conflict),
                ),
            ],
            green: Vec::new(),
            windows: vec![window(1, 2, 3, 4)],
            wrong: None,
        };
        let (reason, calls, windows) = checked(&recorded).unwrap_err();
        assert!(reason.contains("not linearizable"), "{reason}");
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 4, 6], "{calls:?}");
        assert_eq!(windows.len(), 1);
    }

    // H12: a wrong instance found while recording fails the history, which
    // shows every call (of either deployment) invoked before the wrong
    // answer, and the faults of its deployment around them.
    #[test]
    fn h12_a_wrong_instance_shows_the_calls_before_it() {
        let launch = record(0, 0, 3, Call::Launch(0), Answer::Launched(id("a")));
        let mut green = record(2, 2, 8, Call::Find(1), Answer::Found(None));
        green.via = Via::Green;
        let recorded = Recorded {
            names: vec!["h12-0".to_owned(), "h12-1".to_owned()],
            blue: vec![
                launch.clone(),
                record(1, 1, 2, Call::Find(1), Answer::Found(None)),
                record(1, 3, 4, Call::Find(1), Answer::Found(None)),
                record(1, 5, 6, Call::List, Answer::Listed(vec![(0, id("a"))])),
            ],
            green: vec![green],
            windows: vec![
                Window {
                    dep: Dep::Green,
                    ..window(1, 2, 3, 4)
                },
                window(3, 4, 5, 9),
                window(6, 7, 8, 9),
            ],
            wrong: Some(("instance a is wrong".to_owned(), launch)),
        };
        let (reason, calls, windows) = checked(&recorded).unwrap_err();
        assert_eq!(reason, "instance a is wrong");
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 1, 2], "{calls:?}");
        let starts: Vec<u64> = windows.iter().map(|w| w.start).collect();
        assert_eq!(starts, [3, 6], "{windows:?}");
    }

    // H12/H8: a fault is shown with the calls it overlapped, not with calls
    // that ended as it began or began as it ended.
    #[test]
    fn h12_h8_the_faults_shown_are_those_around_the_calls() {
        let faults = [window(10, 12, 20, 22)];
        let span = |invoked, answered| {
            [record(
                0,
                invoked,
                answered,
                Call::List,
                Answer::Listed(Vec::new()),
            )]
        };
        assert!(around(&faults, Dep::Blue, &span(5, 10)).is_empty());
        assert!(around(&faults, Dep::Blue, &span(22, 25)).is_empty());
        assert_eq!(around(&faults, Dep::Blue, &span(5, 11)).len(), 1);
        assert_eq!(around(&faults, Dep::Blue, &span(21, 25)).len(), 1);
        assert!(around(&faults, Dep::Green, &span(5, 25)).is_empty());
    }

    // H12/H8: only a fault of the call's own deployment holds it inside its
    // cut: a blue call across a blue outage's edge may have reached the
    // daemon, though a green outage held that whole call inside.
    #[test]
    fn h12_h8_only_its_own_deployments_fault_holds_a_call_inside() {
        let blue = window(10, 12, 20, 22);
        let green = Window {
            dep: Dep::Green,
            ..window(0, 2, 40, 42)
        };
        let launch = record(0, 11, 19, Call::Launch(0), Answer::Failed(LOST));
        assert!(blue.overlaps(&launch) && !blue.holds_inside(&launch));
        assert!(!green.overlaps(&launch) && !green.holds_inside(&launch));
        assert_eq!(excuse(&launch, &[blue, green], true), Excuse::Maybe);
    }

    // H12/H8: the faults of a history begin anywhere in its global order
    // (which runs to twice its calls), last 4 to 12 steps, come in the
    // order they begin, lose an answer only for a factory that can (about
    // half of them then, after 0 to 2 exchanges), and are the same for the
    // same seed and different for different seeds.
    #[test]
    fn h12_h8_faults_spread_over_the_history_and_follow_the_seed() {
        let config = ConcurrentConfig {
            faults: 3,
            ..ConcurrentConfig::default()
        };
        let span = 2 * 3 * 10;
        let mut schedules = BTreeSet::new();
        let (mut latest, mut longest, mut losing, mut blue) = (0, 0, 0, 0);
        for seed in 0..200 {
            let planned = faults(&config, seed, true);
            assert_eq!(planned.len(), 3);
            assert!(planned.windows(2).all(|f| f[0].begin <= f[1].begin));
            for fault in &planned {
                assert!(fault.begin < span, "{fault:?}");
                assert!(fault.length % 2 == 0 && (4..=12).contains(&fault.length));
                assert!(fault.lose.is_none_or(|after| after <= 2), "{fault:?}");
                latest = latest.max(fault.begin);
                longest = longest.max(fault.length);
                losing += usize::from(fault.lose.is_some());
                blue += usize::from(fault.dep == Dep::Blue);
            }
            let shown = format!("{planned:?}");
            assert_eq!(format!("{:?}", faults(&config, seed, true)), shown);
            schedules.insert(shown);
            assert!(
                faults(&config, seed, false)
                    .iter()
                    .all(|f| f.lose.is_none())
            );
        }
        assert_eq!(schedules.len(), 200);
        assert!(latest >= span - 5, "{latest}");
        assert_eq!(longest, 12);
        assert!((200..400).contains(&losing), "{losing}");
        assert!((200..400).contains(&blue), "{blue}");
        let none = ConcurrentConfig {
            faults: 0,
            ..config
        };
        assert!(faults(&none, 1, true).is_empty());
    }

    // H12: the calls planned use every provider object (the second blue one
    // only when the factory gives one) and every kind of call, over every
    // name, and are the same for the same seed.
    #[test]
    fn h12_plans_use_every_object_call_and_name() {
        let config = ConcurrentConfig {
            tasks: 4,
            calls_per_task: 50,
            names: 3,
            ..ConcurrentConfig::default()
        };
        let planned = plan(&config, 5, true);
        assert_eq!(planned.len(), 4);
        assert!(planned.iter().all(|calls| calls.len() == 50));
        let all: Vec<(Via, Planned)> = planned.iter().flatten().copied().collect();
        let count = |f: &dyn Fn(&(Via, Planned)) -> bool| all.iter().filter(|c| f(c)).count();
        for via in [Via::Blue, Via::Blue2, Via::Green] {
            assert!(count(&|(v, _)| *v == via) > 20, "{via:?}");
        }
        assert!(count(&|(_, p)| matches!(p, Planned::Launch(_))) > 30);
        assert!(count(&|(_, p)| matches!(p, Planned::Destroy(_))) > 30);
        assert!(count(&|(_, p)| matches!(p, Planned::Find(_))) > 20);
        assert!(count(&|(_, p)| matches!(p, Planned::List)) > 20);
        for name in 0..3 {
            assert!(count(&|(_, p)| matches!(p, Planned::Launch(n) if *n == name)) > 5);
        }
        assert_eq!(
            format!("{:?}", plan(&config, 5, true)),
            format!("{planned:?}")
        );
        let single = plan(&config, 5, false);
        assert!(single.iter().flatten().all(|(v, _)| *v != Via::Blue2));
        assert!(single.iter().flatten().any(|(v, _)| *v == Via::Green));
    }

    /// A provider that holds nothing: the fault tests call none of it.
    #[derive(Debug)]
    struct Idle;

    #[async_trait::async_trait]
    impl Provider for Idle {
        fn kind(&self) -> billet_provider::ProviderKind {
            billet_provider::ProviderKind::Simulated
        }

        fn accepts(&self, _: TrustClass) -> Result<(), Error> {
            Ok(())
        }

        async fn launch(&self, _: Spec) -> Result<Instance, Error> {
            Err(Error::unavailable("idle"))
        }

        async fn find(&self, _: &str) -> Result<Option<Instance>, Error> {
            Ok(None)
        }

        async fn list(&self) -> Result<Vec<Instance>, Error> {
            Ok(Vec::new())
        }

        async fn destroy(&self, _: &InstanceId) -> Result<Teardown, Error> {
            Ok(Teardown::Absent)
        }
    }

    /// A factory whose fault calls say, in order, what they were asked.
    #[derive(Default)]
    struct Faulty {
        asked: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl ProviderFactory for Faulty {
        type Provider = Idle;

        fn policies(&self) -> crate::Policies {
            crate::Policies {
                outage: Outage::WholeConnection,
                mid_call: true,
                ..crate::Policies::STRICT
            }
        }

        async fn build(&self) -> Result<Fixture<Idle>, FixtureError> {
            Err("not built here".into())
        }

        async fn set_outage(
            &self,
            deployment: &crate::Deployment<Idle>,
            down: bool,
        ) -> Result<(), FixtureError> {
            let state = if down { "down" } else { "up" };
            self.asked
                .lock()
                .expect("not poisoned")
                .push(format!("{} {state}", deployment.owner));
            Ok(())
        }

        async fn lose_answer(
            &self,
            deployment: &crate::Deployment<Idle>,
            after: u32,
        ) -> Result<(), FixtureError> {
            self.asked
                .lock()
                .expect("not poisoned")
                .push(format!("{} loses after {after}", deployment.owner));
            Ok(())
        }

        fn command(&self, _: Duration) -> Vec<String> {
            Vec::new()
        }
    }

    /// The windows `control` makes of `faults` while the history's global
    /// order moves one step at a time, `steps` steps, after which the tasks
    /// are done.
    fn windows_of(factory: &Faulty, faults: &[Fault], steps: u64) -> Result<Vec<Window>, String> {
        let deployment = |owner: &str| crate::Deployment {
            owner: owner.to_owned(),
            provider: Idle,
        };
        let shared = Shared {
            fixture: Fixture {
                blue: deployment("blue"),
                green: deployment("green"),
                timing: Timing::Modelled(billet_clock::ManualClock::new(
                    std::time::SystemTime::UNIX_EPOCH,
                )),
            },
            second: None,
            names: vec!["h12-0".to_owned()],
            command: Vec::new(),
            image: String::new(),
            pending_allowed: false,
            wall: false,
            launches: Mutex::new(vec![(0, 0); 2]),
            clock: AtomicU64::new(0),
            moved: tokio::sync::Notify::new(),
            done: AtomicBool::new(false),
            known: Mutex::new(vec![None; 2]),
            records: Mutex::new(Vec::new()),
            wrong: Mutex::new(None),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let settle = || async {
                for _ in 0..4 {
                    tokio::task::yield_now().await;
                }
            };
            let tasks = async {
                for _ in 0..steps {
                    settle().await;
                    shared.clock.fetch_add(1, Ordering::SeqCst);
                    shared.moved.notify_waiters();
                }
                settle().await;
                shared.done.store(true, Ordering::SeqCst);
                shared.moved.notify_waiters();
            };
            let (windows, ()) = tokio::join!(control(factory, &shared, faults), tasks);
            windows
        })
    }

    // H12 with H8/H11: each fault begins once the history's global order
    // reaches its beginning: an outage is cut at once and restored once it
    // has lasted its length; a lost answer is armed, the connection cut
    // halfway through, and restored at its end. Each edge takes its own
    // place in the global order. A fault that would begin after the tasks
    // are done is not made.
    #[test]
    fn h12_h8_h11_faults_fall_where_they_were_planned() {
        let factory = Faulty::default();
        let faults = [
            Fault {
                dep: Dep::Blue,
                begin: 3,
                length: 6,
                lose: None,
            },
            Fault {
                dep: Dep::Green,
                begin: 12,
                length: 8,
                lose: Some(1),
            },
            Fault {
                dep: Dep::Blue,
                begin: 100,
                length: 4,
                lose: None,
            },
        ];
        let windows = windows_of(&factory, &faults, 20).expect("faults made");
        let made: Vec<(Dep, Option<u32>, [u64; 4])> = windows
            .iter()
            .map(|w| (w.dep, w.lose, [w.start, w.cut, w.restore, w.end]))
            .collect();
        assert_eq!(
            made,
            [
                (Dep::Blue, None, [3, 4, 9, 10]),
                (Dep::Green, Some(1), [12, 17, 20, 21]),
            ]
        );
        assert_eq!(
            *factory.asked.lock().expect("not poisoned"),
            [
                "blue down",
                "blue up",
                "green loses after 1",
                "green down",
                "green up"
            ]
        );
        // No fault at all when the tasks are done before the first begins.
        let quiet = Faulty::default();
        assert!(
            windows_of(&quiet, &faults[2..], 20)
                .expect("none")
                .is_empty()
        );
        assert!(quiet.asked.lock().expect("not poisoned").is_empty());
    }

    // H12: shrinking keeps a sighting the failure needs: a list that missed
    // a launch that had returned is the failure itself.
    #[test]
    fn h12_check_keeps_the_sightings_the_failure_needs() {
        let recorded = Recorded {
            names: vec!["h12-0".to_owned()],
            blue: vec![
                record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a"))),
                record(1, 2, 3, Call::List, Answer::Listed(Vec::new())),
                record(1, 4, 5, Call::Find(0), Answer::Found(Some(id("a")))),
            ],
            green: Vec::new(),
            windows: Vec::new(),
            wrong: None,
        };
        let (_, calls, _) = checked(&recorded).unwrap_err();
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 2], "{calls:?}");
    }
}
