//! The reference state ([`ModelState`]): modelled time, every successful
//! launch ([`Launched`]), each deployment's outages and the calls whose
//! answer was lost ([`Doubt`]), and what it says a launch or a destroy must
//! answer ([`LaunchOutcome`], [`DestroyOutcome`]).

use std::time::Duration;

use billet_provider::TrustClass;

use crate::factory::{Outage, Policies};

use super::pace::Pace;
use super::transition::{Command, Key, Nudge, Side, Target};

/// One successful launch, as the model remembers it.
#[derive(Debug, Clone)]
pub(crate) struct Launched {
    pub(crate) side: Side,
    pub(crate) name: String,
    /// Offset of its start from the fixture's start.
    pub(crate) started: Duration,
    pub(crate) run_time: Duration,
    /// Whether the backend still holds it (not yet destroyed). While
    /// `doubt` is set, whether it does in the world where that call happened.
    pub(crate) held: bool,
    /// A call about this instance whose answer was lost mid-call (H11) and
    /// whose world no inventory has settled yet.
    pub(crate) doubt: Option<Doubt>,
}

/// A call whose answer a mid-call fault lost (H11): it happened or it did
/// not, and only an inventory read after the outage tells which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Doubt {
    /// The launch that made this instance: if it did not happen, the instance
    /// never existed.
    Launch,
    /// A destroy of this held instance: if it did not happen, the instance is
    /// still held.
    Destroy,
}

impl Launched {
    /// When it stops, as an offset; `None` when that is past representable time.
    pub(crate) fn stop(&self) -> Option<Duration> {
        self.started.checked_add(self.run_time)
    }

    /// Whether it is running at `now`: until `started + run_time`, not at it.
    pub(crate) fn running_at(&self, now: Duration) -> bool {
        self.stop().is_none_or(|stop| now < stop)
    }
}

/// What a launch must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LaunchOutcome {
    /// `Error::Refused` for the spec's trust class.
    Refused,
    /// `Error::InvalidSpec`.
    Invalid,
    /// `Error::Conflict` for the spec's name.
    Conflict,
    /// Both apply; the contract does not order them, so either is right.
    InvalidOrConflict,
    /// A new instance, recorded under the next launch index.
    Started,
}

/// What a destroy must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DestroyOutcome {
    /// The caller's held instance with this launch index: removed.
    Removed(usize),
    /// Another deployment's held instance with this launch index: refused, untouched.
    NotOwned(usize),
    /// The host holds no such id: the policy's answer, nothing changes.
    NotHeld,
}

/// The reference state: modelled time, every successful launch, and which
/// deployments are in an outage.
#[derive(Debug, Clone)]
pub(crate) struct ModelState {
    pub(crate) policies: Policies,
    pub(crate) pace: Pace,
    /// Modelled time since the fixture's start.
    pub(crate) now: Duration,
    /// Every successful launch, in order; a launch's index names its id.
    pub(crate) launches: Vec<Launched>,
    /// Whether each side is in an outage, by [`Side::index`].
    pub(crate) failing: [bool; 2],
    /// Whether each side's outage is one a lost answer left (H11), by
    /// [`Side::index`]: the same in every world, unlike which call it left
    /// open.
    pub(crate) lost: [bool; 2],
}

impl ModelState {
    pub(crate) fn new(policies: Policies, pace: Pace) -> Self {
        ModelState {
            policies,
            pace,
            now: Duration::ZERO,
            launches: Vec::new(),
            failing: [false; 2],
            lost: [false; 2],
        }
    }

    /// The index of the latest launch `key` names.
    pub(crate) fn latest(&self, key: &Key) -> Option<usize> {
        self.launches
            .iter()
            .rposition(|l| l.side == key.side && l.name == key.name)
    }

    /// The index of `side`'s held instance named exactly `name`.
    pub(crate) fn held_named(&self, side: Side, name: &str) -> Option<usize> {
        self.launches
            .iter()
            .position(|l| l.held && l.side == side && l.name == name)
    }

    /// The indexes of every instance `side` holds.
    pub(crate) fn held_by(&self, side: Side) -> impl Iterator<Item = usize> + '_ {
        self.launches
            .iter()
            .enumerate()
            .filter(move |(_, l)| l.held && l.side == side)
            .map(|(ix, _)| ix)
    }

    /// The call of `side` whose answer was lost and whose world is not settled
    /// yet: the launch index it concerns and what it was. At most one per side,
    /// since a lost answer leaves the side's connection down until an
    /// inventory read after the outage settles it.
    pub(crate) fn doubt(&self, side: Side) -> Option<(usize, Doubt)> {
        self.launches
            .iter()
            .enumerate()
            .find_map(|(ix, l)| l.doubt.filter(|_| l.side == side).map(|doubt| (ix, doubt)))
    }

    /// Settles the world of the call on launch `ix` whose answer was lost:
    /// `happened` keeps the world the model assumed (the launch made the
    /// instance, the destroy removed it); otherwise the other world holds (the
    /// instance never existed, or is still held). Does nothing for a launch
    /// with no doubt.
    pub(crate) fn settle(&mut self, ix: usize, happened: bool) {
        let launched = &mut self.launches[ix];
        if launched.doubt.take().is_some() && !happened {
            launched.held = !launched.held;
        }
    }

    /// Whether a destroy may name `key`'s instance: one was launched, and its
    /// side is in no outage a lost answer left (H11). While it is, the call
    /// the answer was lost on may have made the instance (its id unknown) or
    /// removed it, so no step names that side's instances until the outage
    /// ends and an inventory settles it. The rule does not depend on which
    /// world holds, so the steps the strategy generated for the world it
    /// assumed are allowed in the one the driver settles on.
    pub(super) fn names_settled(&self, key: &Key) -> bool {
        self.latest(key).is_some() && !self.lost[key.side.index()]
    }

    /// Whether `side` is in an outage (of either kind): its inventory fails.
    pub(crate) fn is_failing(&self, side: Side) -> bool {
        self.failing[side.index()]
    }

    /// Whether `side` is in an outage of its whole connection: launch and
    /// destroy fail too, and change nothing.
    pub(crate) fn is_cut(&self, side: Side) -> bool {
        self.is_failing(side) && self.policies.outage == Outage::WholeConnection
    }

    /// Whether work of `trust` may run on this backend.
    pub(crate) fn accepts(&self, trust: TrustClass) -> bool {
        trust == TrustClass::Trusted || self.policies.isolation
    }

    pub(crate) fn launch_outcome(
        &self,
        side: Side,
        name: &str,
        trust: TrustClass,
        command: &Command,
    ) -> LaunchOutcome {
        if !self.accepts(trust) {
            return LaunchOutcome::Refused;
        }
        let invalid = !(self.policies.valid_name)(name) || matches!(command, Command::Invalid(_));
        let conflict = self.held_named(side, name).is_some();
        match (invalid, conflict) {
            (true, true) => LaunchOutcome::InvalidOrConflict,
            (true, false) => LaunchOutcome::Invalid,
            (false, true) => LaunchOutcome::Conflict,
            (false, false) => LaunchOutcome::Started,
        }
    }

    pub(crate) fn destroy_outcome(&self, side: Side, target: &Target) -> DestroyOutcome {
        let Target::Issued(key) = target else {
            return DestroyOutcome::NotHeld;
        };
        match self.latest(key) {
            Some(ix) if self.launches[ix].held && self.launches[ix].side == side => {
                DestroyOutcome::Removed(ix)
            }
            Some(ix) if self.launches[ix].held => DestroyOutcome::NotOwned(ix),
            _ => DestroyOutcome::NotHeld,
        }
    }

    /// Where an advance to `key`'s stop time lands (never before now), or
    /// `None` when it names no launch, or one that stops more than
    /// the pace's horizon from now (`Duration::MAX` run times never stop).
    pub(crate) fn stop_target(&self, key: &Key, nudge: Nudge) -> Option<Duration> {
        let stop = self.launches[self.latest(key)?].stop()?;
        if stop > self.now.checked_add(self.pace.horizon())? {
            return None;
        }
        let target = match nudge {
            Nudge::At => stop,
            Nudge::Before => stop.saturating_sub(Duration::from_nanos(1)),
            Nudge::After => stop.checked_add(Duration::from_nanos(1))?,
        };
        Some(target.max(self.now))
    }

    /// Every distinct key a launch so far answers to.
    pub(super) fn keys(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = Vec::new();
        for l in &self.launches {
            let key = Key {
                side: l.side,
                name: l.name.clone(),
            };
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::factory::WallWindows;
    use crate::model::test_support::{key, launch, policies};
    use crate::model::transition::Transition;

    // H1: a key names the latest launch of that name by that deployment, not
    // a launch of the same name by the other deployment, nor another name of
    // the same deployment.
    #[test]
    fn h1_a_key_names_the_latest_launch_of_its_side_and_name() {
        let mut state = ModelState::new(policies(Outage::InventoryOnly), Pace::Modelled);
        for (side, name) in [
            (Side::Blue, "job-a"),
            (Side::Green, "job-a"),
            (Side::Blue, "job-b"),
        ] {
            state = state.apply(&launch(side, name, Duration::from_secs(60)));
        }
        assert_eq!(state.latest(&key(Side::Blue, "job-a")), Some(0));
        assert_eq!(state.latest(&key(Side::Green, "job-a")), Some(1));
        assert_eq!(state.latest(&key(Side::Green, "job-b")), None);
        assert_eq!(state.latest(&key(Side::Blue, "job-c")), None);
    }

    // H1: a clock move jumps to an instance's stop time (exactly, a
    // nanosecond before or after) only when it lies at most the horizon (a
    // week of modelled time) ahead, never before now, and never for an
    // instance that does not stop.
    #[test]
    fn h1_a_move_to_a_stop_time_reaches_as_far_as_the_horizon() {
        let week = Duration::from_secs(7 * 24 * 3600);
        let nanos = Duration::from_nanos;
        let mut state = ModelState::new(policies(Outage::InventoryOnly), Pace::Modelled);
        for (name, run_time) in [
            ("job-a", week),
            ("job-b", week + nanos(1)),
            ("job-c", Duration::MAX),
            ("job", Duration::from_secs(60)),
        ] {
            state = state.apply(&launch(Side::Blue, name, run_time));
        }
        let target = |state: &ModelState, name: &str, nudge| {
            state.stop_target(&key(Side::Blue, name), nudge)
        };
        assert_eq!(target(&state, "job-a", Nudge::At), Some(week));
        assert_eq!(
            target(&state, "job-a", Nudge::Before),
            Some(week - nanos(1))
        );
        assert_eq!(target(&state, "job-a", Nudge::After), Some(week + nanos(1)));
        for nudge in [Nudge::At, Nudge::Before, Nudge::After] {
            assert_eq!(target(&state, "job-b", nudge), None, "{nudge:?}");
            assert_eq!(target(&state, "job-c", nudge), None, "{nudge:?}");
            assert_eq!(target(&state, "job-d", nudge), None, "{nudge:?}");
        }
        let later = state.apply(&Transition::Advance(Duration::from_secs(3600)));
        assert_eq!(later.now, Duration::from_secs(3600));
        assert_eq!(
            target(&later, "job-b", Nudge::At),
            Some(week + nanos(1)),
            "an hour later it is within a week"
        );
        assert_eq!(
            target(&later, "job", Nudge::Before),
            Some(later.now),
            "a stop time already past lands on now"
        );

        let windows = WallWindows {
            pending: Duration::ZERO,
            around_end: Duration::from_millis(5),
        };
        let mut wall = ModelState::new(policies(Outage::WholeConnection), Pace::Wall(windows));
        for (name, units) in [("job-a", 8), ("job-b", 9)] {
            let run_time = Duration::from_millis(5 * units);
            wall = wall.apply(&launch(Side::Green, name, run_time));
        }
        let of = |name: &str| wall.stop_target(&key(Side::Green, name), Nudge::At);
        assert_eq!(
            of("job-a"),
            Some(Duration::from_millis(40)),
            "eight units ahead"
        );
        assert_eq!(of("job-b"), None, "nine units ahead");
    }
}
