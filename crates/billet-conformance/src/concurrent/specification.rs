//! The contract, taken sequentially, as the linearizability checker reads
//! it: what a call says of one name ([`NameOp`]), the worlds a (deployment,
//! name) may be in ([`NameState`], [`Worlds`]), and the specifications of
//! one name ([`PerName`]) and of a whole deployment ([`Whole`]).

use std::collections::BTreeSet;

use billet_provider::{ErrorKind, Teardown};
use todc_utils::specifications::Specification;

/// Whether an error answered during a fault window excuses the call, and
/// whether the call may still have taken effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(super) enum Excuse {
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
pub(super) enum NameOp {
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
    pub(super) fn observes_only(&self, launched: &BTreeSet<String>) -> bool {
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
pub(super) struct NameState {
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
pub(super) struct PerName<const ASKING: bool>;

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
pub(super) type Authoritative = PerName<false>;
/// [`PerName`] for a backend that can only ask (`unknown_destroy ==
/// Requested`): a destroy may answer `Requested` for any id, and removes the
/// held instance if it was its id.
pub(super) type Asking = PerName<true>;

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
pub(super) type JointOp = Vec<(usize, NameOp)>;

/// Every world a history may have left a whole deployment in: each world
/// the state of every name (trailing names that hold nothing and retired
/// nothing left out, so that equal worlds compare equal), sorted, without
/// repeats.
type JointWorlds = Vec<Vec<NameState>>;

/// The contract for a whole deployment: each name as [`PerName`], and a
/// list sees every name at one instant.
pub(super) struct Whole<const ASKING: bool>;

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
pub(super) type JointAuthoritative = Whole<false>;
/// [`Whole`] for a backend that can only ask.
pub(super) type JointAsking = Whole<true>;

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

/// Whether an error of this kind is one an outage answers.
pub(super) fn outage_error(kind: ErrorKind) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::concurrent::test_support::{LOST, sees};

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
}
