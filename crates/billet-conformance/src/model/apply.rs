//! What a step does to the reference state, and whether it may be taken
//! there: [`ModelState::apply`] and [`ModelState::allows`], the state
//! machine's transition and precondition (checked again while shrinking).

use super::state::{DestroyOutcome, Doubt, LaunchOutcome, Launched, ModelState};
use super::transition::{Command, Key, Side, Target, Transition};

impl ModelState {
    /// The state after `transition`.
    pub(crate) fn apply(mut self, transition: &Transition) -> Self {
        // H11: the suite reads every reachable inventory after each step, so
        // a lost answer on a side whose outage has ended is settled before
        // the next step (the driver refines its model then). The strategy,
        // which cannot read one, assumes the world where the call happened.
        let failing = self.failing;
        for launched in &mut self.launches {
            if !failing[launched.side.index()] {
                launched.doubt = None;
            }
        }
        match transition {
            Transition::Launch {
                side,
                name,
                trust,
                command,
            } => {
                // A launch answered with an error during a whole outage did not happen.
                if !self.is_cut(*side)
                    && self.launch_outcome(*side, name, *trust, command) == LaunchOutcome::Started
                {
                    let Command::RunFor(run_time) = command else {
                        unreachable!("an invalid command never starts");
                    };
                    self.launches.push(Launched {
                        side: *side,
                        name: name.clone(),
                        started: self.now,
                        run_time: *run_time,
                        held: true,
                        doubt: None,
                    });
                }
            }
            Transition::LaunchLosingAnswer {
                side,
                name,
                trust,
                command,
                ..
            } => {
                // H11: the launch went out on a live connection; the model
                // takes the world where it happened until an inventory says.
                if self.launch_outcome(*side, name, *trust, command) == LaunchOutcome::Started {
                    let Command::RunFor(run_time) = command else {
                        unreachable!("an invalid command never starts");
                    };
                    self.launches.push(Launched {
                        side: *side,
                        name: name.clone(),
                        started: self.now,
                        run_time: *run_time,
                        held: true,
                        doubt: Some(Doubt::Launch),
                    });
                }
                self.failing[side.index()] = true;
                self.lost[side.index()] = true;
            }
            Transition::DestroyLosingAnswer { side, target, .. } => {
                if let DestroyOutcome::Removed(ix) = self.destroy_outcome(*side, target) {
                    self.launches[ix].held = false;
                    self.launches[ix].doubt = Some(Doubt::Destroy);
                }
                self.failing[side.index()] = true;
                self.lost[side.index()] = true;
            }
            Transition::Destroy { side, target } => {
                if let DestroyOutcome::Removed(ix) = self.destroy_outcome(*side, target)
                    && !self.is_cut(*side)
                {
                    self.launches[ix].held = false;
                }
            }
            Transition::Outage { side, down } => {
                self.failing[side.index()] = *down;
                self.lost[side.index()] = false;
            }
            Transition::Advance(d) => self.now += *d,
            Transition::AdvanceToStop { of, nudge } => {
                if let Some(target) = self.stop_target(of, *nudge) {
                    self.now = target;
                }
            }
            Transition::Find { .. } | Transition::List { .. } | Transition::Accepts { .. } => {}
        }
        self
    }

    /// Whether `transition` still makes sense here (checked again while shrinking).
    pub(crate) fn allows(&self, transition: &Transition) -> bool {
        let names_settled = |key: &Key| self.names_settled(key);
        // H11: a fault is armed only on a live connection of a fixture that
        // declares mid-call faults.
        let can_lose = |side: Side| self.policies.mid_call && !self.is_failing(side);
        match transition {
            Transition::Destroy {
                target: Target::Issued(key) | Target::NearMiss(key, _),
                ..
            } => names_settled(key),
            Transition::DestroyLosingAnswer {
                side,
                target: Target::Issued(key) | Target::NearMiss(key, _),
                ..
            } => can_lose(*side) && names_settled(key),
            Transition::DestroyLosingAnswer { side, .. }
            | Transition::LaunchLosingAnswer { side, .. } => can_lose(*side),
            Transition::AdvanceToStop { of, nudge } => self.stop_target(of, *nudge).is_some(),
            // The suite never starts an outage that is on or ends one that is off.
            Transition::Outage { side, down } => self.is_failing(*side) != *down,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use billet_provider::TrustClass;

    use super::*;
    use crate::factory::Outage;
    use crate::model::pace::Pace;
    use crate::model::test_support::{key, launch, lose_launch, mid_call, policies};
    use crate::model::transition::{Miss, Nudge};

    fn outage(side: Side, down: bool) -> Transition {
        Transition::Outage { side, down }
    }

    // H11: a launch that loses its answer leaves its side cut and holds both
    // worlds: the model assumes the instance exists until it is settled; if
    // it did not happen, the name is free and nothing is held; if it did,
    // the instance holds its name and can be destroyed.
    #[test]
    fn h11_a_lost_launch_holds_both_worlds_until_settled() {
        let lost = ModelState::new(mid_call(), Pace::Modelled)
            .apply(&Transition::Advance(Duration::from_secs(5)))
            .apply(&lose_launch(Side::Blue, "job-a", 0));
        assert!(lost.is_cut(Side::Blue));
        assert!(!lost.is_failing(Side::Green));
        assert_eq!(lost.doubt(Side::Blue), Some((0, Doubt::Launch)));
        assert_eq!(lost.doubt(Side::Green), None);
        assert_eq!(lost.launches[0].started, Duration::from_secs(5));
        assert!(lost.launches[0].held);

        let restored = lost.apply(&outage(Side::Blue, false));
        assert_eq!(
            restored.doubt(Side::Blue),
            Some((0, Doubt::Launch)),
            "still open until an inventory settles it"
        );
        let relaunch = launch(Side::Blue, "job-a", Duration::from_secs(60));

        let mut happened = restored.clone();
        happened.settle(0, true);
        assert_eq!(happened.doubt(Side::Blue), None);
        assert_eq!(happened.held_named(Side::Blue, "job-a"), Some(0));
        assert_eq!(
            happened.launch_outcome(
                Side::Blue,
                "job-a",
                TrustClass::Trusted,
                &Command::RunFor(Duration::ZERO)
            ),
            LaunchOutcome::Conflict
        );
        let destroy = Target::Issued(key(Side::Blue, "job-a"));
        assert_eq!(
            happened.destroy_outcome(Side::Blue, &destroy),
            DestroyOutcome::Removed(0)
        );

        let mut not = restored;
        not.settle(0, false);
        assert_eq!(not.doubt(Side::Blue), None);
        assert_eq!(not.held_by(Side::Blue).count(), 0);
        assert_eq!(
            not.destroy_outcome(Side::Blue, &destroy),
            DestroyOutcome::NotHeld
        );
        let again = not.apply(&relaunch);
        assert_eq!(again.launches.len(), 2, "the name was free");
        assert_eq!(again.held_named(Side::Blue, "job-a"), Some(1));
    }

    // H11: a destroy that loses its answer holds both worlds: removed (the
    // model's assumption) or still held.
    #[test]
    fn h11_a_lost_destroy_holds_both_worlds_until_settled() {
        let job = Target::Issued(key(Side::Green, "job-b"));
        let lost = ModelState::new(mid_call(), Pace::Modelled)
            .apply(&launch(Side::Green, "job-b", Duration::from_secs(60)))
            .apply(&Transition::DestroyLosingAnswer {
                side: Side::Green,
                target: job.clone(),
                after: 2,
            });
        assert!(lost.is_cut(Side::Green));
        assert_eq!(lost.doubt(Side::Green), Some((0, Doubt::Destroy)));
        assert!(!lost.launches[0].held);

        let mut removed = lost.clone();
        removed.settle(0, true);
        assert_eq!(removed.doubt(Side::Green), None);
        assert!(!removed.launches[0].held);
        assert_eq!(
            removed.destroy_outcome(Side::Green, &job),
            DestroyOutcome::NotHeld
        );

        let mut kept = lost;
        kept.settle(0, false);
        assert_eq!(kept.doubt(Side::Green), None);
        assert!(kept.launches[0].held);
        assert_eq!(
            kept.destroy_outcome(Side::Green, &job),
            DestroyOutcome::Removed(0)
        );
        // Settling again changes nothing: the world stays settled.
        kept.settle(0, true);
        assert!(kept.launches[0].held);
    }

    // H11: a lost answer on a refused launch, or on a destroy of what the
    // side does not hold, records and removes nothing either way, and still
    // leaves the side's connection down.
    #[test]
    fn h11_lost_refusals_change_nothing_but_the_connection() {
        let state = ModelState::new(mid_call(), Pace::Modelled).apply(&launch(
            Side::Blue,
            "job-a",
            Duration::from_secs(60),
        ));
        let refused = state.clone().apply(&Transition::LaunchLosingAnswer {
            side: Side::Blue,
            name: "job-b".to_owned(),
            trust: TrustClass::Untrusted,
            command: Command::RunFor(Duration::from_secs(60)),
            after: 0,
        });
        assert_eq!(refused.launches.len(), 1);
        assert_eq!(refused.doubt(Side::Blue), None);
        assert!(refused.is_cut(Side::Blue));
        let conflict = state.clone().apply(&lose_launch(Side::Blue, "job-a", 0));
        assert_eq!(conflict.launches.len(), 1);
        assert_eq!(conflict.doubt(Side::Blue), None);
        let foreign = state.apply(&Transition::DestroyLosingAnswer {
            side: Side::Green,
            target: Target::Issued(key(Side::Blue, "job-a")),
            after: 0,
        });
        assert!(foreign.launches[0].held);
        assert_eq!(foreign.doubt(Side::Green), None);
        assert_eq!(foreign.doubt(Side::Blue), None);
        assert!(foreign.is_cut(Side::Green));
    }

    // H11: a fault is armed only on a live connection of a fixture that
    // declares mid-call faults, and no step names a launch or destroy whose
    // world is open while its side is cut (its id, or its fate, is unknown);
    // once the outage ends the strategy takes the world where it happened.
    #[test]
    fn h11_preconditions_around_a_lost_answer() {
        let lose = lose_launch(Side::Blue, "job-a", 1);
        let undeclared = ModelState::new(policies(Outage::WholeConnection), Pace::Modelled);
        assert!(!undeclared.allows(&lose));
        let state = ModelState::new(mid_call(), Pace::Modelled);
        assert!(state.allows(&lose));
        let cut = state.clone().apply(&outage(Side::Blue, true));
        assert!(!cut.allows(&lose), "the connection is already down");
        assert!(cut.allows(&lose_launch(Side::Green, "job-a", 1)));

        let lost = state.apply(&lose);
        let job = key(Side::Blue, "job-a");
        let named = [
            Transition::Destroy {
                side: Side::Green,
                target: Target::Issued(job.clone()),
            },
            Transition::Destroy {
                side: Side::Blue,
                target: Target::NearMiss(job.clone(), Miss::Case),
            },
            Transition::DestroyLosingAnswer {
                side: Side::Green,
                target: Target::Issued(job.clone()),
                after: 0,
            },
        ];
        for transition in &named {
            assert!(!lost.allows(transition), "{transition}");
        }
        assert!(!lost.allows(&lose_launch(Side::Blue, "job-b", 0)));
        assert!(lost.allows(&Transition::AdvanceToStop {
            of: job,
            nudge: Nudge::At
        }));
        let restored = lost.apply(&outage(Side::Blue, false));
        for transition in &named {
            assert!(restored.allows(transition), "{transition}");
        }
        // The rule holds in every world: a lost answer on a refused launch
        // (no doubt at all) blocks the side's instances too, and an outage
        // started by hand does not.
        let held = ModelState::new(mid_call(), Pace::Modelled).apply(&launch(
            Side::Blue,
            "job-a",
            Duration::from_secs(60),
        ));
        let refused = held.clone().apply(&lose_launch(Side::Blue, "job-a", 0));
        assert_eq!(refused.doubt(Side::Blue), None);
        assert!(!refused.allows(&named[0]), "{}", named[0]);
        let by_hand = held.apply(&outage(Side::Blue, true));
        assert!(by_hand.allows(&named[0]), "{}", named[0]);

        let next = restored.apply(&Transition::List { side: Side::Blue });
        assert_eq!(next.doubt(Side::Blue), None);
        assert!(next.launches[0].held, "the world where it happened");

        // A destroy's doubt is dropped the same way, once its side is back.
        let destroyed = next
            .apply(&Transition::DestroyLosingAnswer {
                side: Side::Blue,
                target: Target::Issued(key(Side::Blue, "job-a")),
                after: 0,
            })
            .apply(&Transition::Advance(Duration::from_secs(1)));
        assert_eq!(
            destroyed.doubt(Side::Blue),
            Some((0, Doubt::Destroy)),
            "still cut"
        );
        let later = destroyed
            .apply(&outage(Side::Blue, false))
            .apply(&Transition::Advance(Duration::from_secs(1)));
        assert_eq!(later.doubt(Side::Blue), None);
        assert!(!later.launches[0].held);
    }

    // H1, H8: the preconditions that keep a shrunk sequence meaningful: a
    // destroy of an issued id, or a move to a stop time, needs the launch it
    // names (and a stop time within the horizon); an outage starts only when
    // it is off and ends only when it is on, as the factory is promised.
    #[test]
    fn h1_shrunk_sequences_keep_their_preconditions() {
        let job = key(Side::Blue, "job-a");
        let empty = ModelState::new(policies(Outage::InventoryOnly), Pace::Modelled);
        let needs_launch = [
            Transition::Destroy {
                side: Side::Blue,
                target: Target::Issued(job.clone()),
            },
            Transition::Destroy {
                side: Side::Green,
                target: Target::NearMiss(job.clone(), Miss::Case),
            },
            Transition::AdvanceToStop {
                of: job,
                nudge: Nudge::At,
            },
        ];
        for transition in &needs_launch {
            assert!(!empty.allows(transition), "{transition}");
        }
        let always = [
            launch(Side::Blue, "job-a", Duration::from_secs(60)),
            Transition::Find {
                side: Side::Green,
                name: "job-a".to_owned(),
            },
            Transition::List { side: Side::Blue },
            Transition::Accepts {
                side: Side::Blue,
                trust: TrustClass::Untrusted,
            },
            Transition::Advance(Duration::from_secs(1)),
            Transition::Destroy {
                side: Side::Blue,
                target: Target::Never("no-such-instance"),
            },
        ];
        for transition in &always {
            assert!(empty.allows(transition), "{transition}");
        }
        let launched = empty
            .clone()
            .apply(&launch(Side::Blue, "job-a", Duration::from_secs(60)));
        for transition in &needs_launch {
            assert!(launched.allows(transition), "{transition}");
        }
        let never_stops = empty
            .clone()
            .apply(&launch(Side::Blue, "job-a", Duration::MAX));
        assert!(
            !never_stops.allows(&needs_launch[2]),
            "no stop time to move to"
        );

        let outage = |side, down| Transition::Outage { side, down };
        assert!(empty.allows(&outage(Side::Blue, true)));
        assert!(
            !empty.allows(&outage(Side::Blue, false)),
            "ends one that is off"
        );
        let down = empty.apply(&outage(Side::Blue, true));
        assert!(
            !down.allows(&outage(Side::Blue, true)),
            "starts one that is on"
        );
        assert!(down.allows(&outage(Side::Blue, false)));
        assert!(
            down.allows(&outage(Side::Green, true)),
            "the other side is apart"
        );
    }
}
