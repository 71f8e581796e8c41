//! The random steps of a case: the names,
//! ids, run times and clock moves drawn, the weighted transitions from a
//! state, and the `proptest-state-machine` strategy of whole sequences
//! ([`strategy`]).

use billet_provider::TrustClass;
use proptest::collection::SizeRange;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use proptest_state_machine::strategy::Sequential;

use crate::factory::Policies;

use super::pace::Pace;
use super::state::ModelState;
use super::transition::{Command, Key, Miss, Nudge, Side, Target, Transition};

/// Names a launch or find may use: a few base names, so that duplicates are
/// common, and near misses of `job-a` that differ by case, spaces, a prefix
/// or an accent.
const NAMES: &[&str] = &["job-a", "job-b", "job-c"];
const NEAR_MISSES: &[&str] = &[
    "Job-a", "JOB-A", " job-a", "job-a ", "job-a\t", "job-", "job", "job-ab", "jöb-a",
];
/// Ids no backend issues.
pub(super) const NEVER_ISSUED: &[&str] =
    &["no-such-instance", "", "billet-conformance/never-issued"];
fn side() -> BoxedStrategy<Side> {
    prop_oneof![Just(Side::Blue), Just(Side::Green)].boxed()
}

fn name() -> BoxedStrategy<String> {
    prop_oneof![
        6 => select(NAMES),
        3 => select(NEAR_MISSES),
        1 => Just(""),
    ]
    .prop_map(String::from)
    .boxed()
}

fn any_trust() -> BoxedStrategy<TrustClass> {
    select(&TrustClass::ALL[..]).boxed()
}

fn launch_trust() -> BoxedStrategy<TrustClass> {
    prop_oneof![
        6 => Just(TrustClass::Trusted),
        1 => Just(TrustClass::Unknown),
        1 => Just(TrustClass::Untrusted),
    ]
    .boxed()
}

fn command(policies: &Policies, pace: Pace) -> BoxedStrategy<Command> {
    let run_for = select(pace.run_times()).prop_map(Command::RunFor);
    if policies.invalid_commands.is_empty() {
        run_for.boxed()
    } else {
        prop_oneof![
            8 => run_for,
            1 => select(policies.invalid_commands).prop_map(Command::Invalid),
        ]
        .boxed()
    }
}

fn target(keys: &[Key]) -> BoxedStrategy<Target> {
    let never = select(NEVER_ISSUED).prop_map(Target::Never);
    if keys.is_empty() {
        return never.boxed();
    }
    let miss = prop_oneof![Just(Miss::Leading), Just(Miss::Trailing), Just(Miss::Case)];
    prop_oneof![
        6 => select(keys.to_vec()).prop_map(Target::Issued),
        1 => never,
        2 => (select(keys.to_vec()), miss).prop_map(|(key, miss)| Target::NearMiss(key, miss)),
    ]
    .boxed()
}

/// How many exchanges a mid-call fault lets through before it loses an
/// answer: 0 to 3 (H11).
const MOST_EXCHANGES_BEFORE_A_FAULT: u32 = 3;

/// Random transitions from `state`, weighted towards launches and destroys.
fn transitions(state: &ModelState) -> BoxedStrategy<Transition> {
    let keys = state.keys();
    // The keys a destroy may name: none whose world a lost answer left open.
    let targets: Vec<Key> = keys
        .iter()
        .filter(|key| state.names_settled(key))
        .cloned()
        .collect();
    let mut choices: Vec<(u32, BoxedStrategy<Transition>)> = vec![
        (
            8,
            (
                side(),
                name(),
                launch_trust(),
                command(&state.policies, state.pace),
            )
                .prop_map(|(side, name, trust, command)| Transition::Launch {
                    side,
                    name,
                    trust,
                    command,
                })
                .boxed(),
        ),
        (
            4,
            (side(), name())
                .prop_map(|(side, name)| Transition::Find { side, name })
                .boxed(),
        ),
        (2, side().prop_map(|side| Transition::List { side }).boxed()),
        (
            5,
            (side(), target(&targets))
                .prop_map(|(side, target)| Transition::Destroy { side, target })
                .boxed(),
        ),
        (
            1,
            (side(), any_trust())
                .prop_map(|(side, trust)| Transition::Accepts { side, trust })
                .boxed(),
        ),
        (
            // Real time makes moves costly, so a wall case is short: outages
            // come more often there, so that launches and destroys meet them.
            match state.pace {
                Pace::Modelled => 1,
                Pace::Wall(_) => 3,
            },
            side()
                .prop_map({
                    let failing = state.failing;
                    move |side| Transition::Outage {
                        side,
                        down: !failing[side.index()],
                    }
                })
                .boxed(),
        ),
        (
            3,
            select(state.pace.advances())
                .prop_map(Transition::Advance)
                .boxed(),
        ),
    ];
    // H11: faults in the middle of a launch or a destroy, on a live
    // connection of a fixture that declares them.
    let live: Vec<Side> = [Side::Blue, Side::Green]
        .into_iter()
        .filter(|side| !state.is_failing(*side))
        .collect();
    if state.policies.mid_call && !live.is_empty() {
        let after = 0..=MOST_EXCHANGES_BEFORE_A_FAULT;
        choices.push((
            2,
            (
                select(live.clone()),
                name(),
                launch_trust(),
                command(&state.policies, state.pace),
                after.clone(),
            )
                .prop_map(
                    |(side, name, trust, command, after)| Transition::LaunchLosingAnswer {
                        side,
                        name,
                        trust,
                        command,
                        after,
                    },
                )
                .boxed(),
        ));
        choices.push((
            2,
            (select(live), target(&targets), after)
                .prop_map(|(side, target, after)| Transition::DestroyLosingAnswer {
                    side,
                    target,
                    after,
                })
                .boxed(),
        ));
    }
    let stoppable: Vec<Key> = keys
        .into_iter()
        .filter(|key| state.stop_target(key, Nudge::At).is_some())
        .collect();
    if !stoppable.is_empty() {
        let nudge = prop_oneof![Just(Nudge::At), Just(Nudge::Before), Just(Nudge::After)];
        choices.push((
            2,
            (select(stoppable), nudge)
                .prop_map(|(of, nudge)| Transition::AdvanceToStop { of, nudge })
                .boxed(),
        ));
    }
    Union::new_weighted(choices).boxed()
}

/// The strategy of the contract's reference state machine: sequences of
/// `steps` transitions from `initial`, which shrink by deleting and
/// simplifying steps while the model's preconditions hold.
pub(crate) type ContractStrategy =
    Sequential<ModelState, Transition, BoxedStrategy<ModelState>, BoxedStrategy<Transition>>;

/// Sequences of `steps` transitions from `initial`.
pub(crate) fn strategy(initial: ModelState, steps: SizeRange) -> ContractStrategy {
    Sequential::new(
        steps,
        move || Just(initial.clone()).boxed(),
        ModelState::allows,
        transitions,
        ModelState::apply,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;
    use crate::factory::{Outage, WallWindows};
    use crate::model::state::{DestroyOutcome, LaunchOutcome};
    use crate::model::test_support::{mid_call, policies};

    /// What one transition from `state` exercises, by name.
    fn outcome(state: &ModelState, transition: &Transition) -> &'static str {
        match transition {
            Transition::Launch {
                side,
                name,
                trust,
                command,
            } if state.is_cut(*side) => match state.launch_outcome(*side, name, *trust, command) {
                LaunchOutcome::Started => "launch during a whole outage",
                _ => "launch refused during a whole outage",
            },
            Transition::Launch {
                side,
                name,
                trust,
                command,
            } => match state.launch_outcome(*side, name, *trust, command) {
                LaunchOutcome::Refused => "launch refused for trust",
                LaunchOutcome::Invalid if name.is_empty() => "launch with an empty name",
                LaunchOutcome::Invalid => "launch of an invalid command",
                LaunchOutcome::Conflict => "launch of a held name",
                LaunchOutcome::InvalidOrConflict => "launch invalid and held",
                LaunchOutcome::Started if NEAR_MISSES.contains(&name.as_str()) => {
                    "launch of a near-miss name"
                }
                LaunchOutcome::Started => "launch started",
            },
            Transition::Find { side, .. } if state.is_failing(*side) => "find while failing",
            Transition::Find { side, name } => match state.held_named(*side, name) {
                Some(ix) if state.launches[ix].running_at(state.now) => "find running",
                Some(_) => "find stopped",
                None => "find none",
            },
            Transition::List { side } if state.is_failing(*side) => "list while failing",
            Transition::List { .. } => "list",
            Transition::Destroy { side, target } if state.is_cut(*side) => {
                match state.destroy_outcome(*side, target) {
                    DestroyOutcome::Removed(_) => "destroy own held during a whole outage",
                    _ => "destroy of another during a whole outage",
                }
            }
            Transition::Destroy { side, target } => match state.destroy_outcome(*side, target) {
                DestroyOutcome::Removed(_) => "destroy own held",
                DestroyOutcome::NotOwned(_) => "destroy foreign held",
                DestroyOutcome::NotHeld => match target {
                    Target::Issued(_) => "destroy already destroyed",
                    Target::Never(_) => "destroy never issued",
                    Target::NearMiss(..) => "destroy near miss",
                },
            },
            Transition::LaunchLosingAnswer {
                side,
                name,
                trust,
                command,
                ..
            } => match state.launch_outcome(*side, name, *trust, command) {
                LaunchOutcome::Started => "launch losing its answer",
                _ => "refused launch losing its answer",
            },
            Transition::DestroyLosingAnswer { side, target, .. } => {
                match state.destroy_outcome(*side, target) {
                    DestroyOutcome::Removed(_) => "destroy own held losing its answer",
                    _ => "destroy of another losing its answer",
                }
            }
            Transition::Outage { side, down: false } if state.doubt(*side).is_some() => {
                "outage ends after a lost answer"
            }
            Transition::Accepts { trust, .. } if state.accepts(*trust) => "accepts",
            Transition::Accepts { .. } => "accepts refused",
            Transition::Outage { down: true, .. } => "outage starts",
            Transition::Outage { down: false, .. } => "outage ends",
            Transition::Advance(_) => "advance",
            Transition::AdvanceToStop { of, nudge } => {
                let ix = state.latest(of).unwrap();
                match (state.launches[ix].held, nudge) {
                    (true, Nudge::At) => "advance exactly to a held stop time",
                    (true, Nudge::Before) => "advance to 1ns before a held stop time",
                    (true, Nudge::After) => "advance past a held stop time",
                    (false, _) => "advance to a destroyed stop time",
                }
            }
        }
    }

    /// How often each outcome is reached over 256 default-sized sequences.
    fn outcomes(initial: ModelState) -> BTreeMap<&'static str, u32> {
        let strategy = strategy(initial, (40..=88).into());
        let mut runner = TestRunner::deterministic();
        let mut seen: BTreeMap<&'static str, u32> = BTreeMap::new();
        for _ in 0..256 {
            let (mut state, transitions, _) = strategy.new_tree(&mut runner).unwrap().current();
            for transition in &transitions {
                assert!(state.allows(transition), "{transition}");
                *seen.entry(outcome(&state, transition)).or_default() += 1;
                state = state.apply(transition);
            }
        }
        seen
    }

    // H1: the default-sized run reaches every outcome the model tells apart:
    // each launch refusal, starts, conflicts, own, foreign, destroyed,
    // never-issued and near-miss destroys, outages, and stop-time boundaries.
    #[test]
    fn h1_generated_sequences_reach_every_outcome() {
        let seen = outcomes(ModelState::new(
            policies(Outage::InventoryOnly),
            Pace::Modelled,
        ));
        println!("{seen:#?}");
        for expected in [
            "launch refused for trust",
            "launch with an empty name",
            "launch of an invalid command",
            "launch of a held name",
            "launch invalid and held",
            "launch of a near-miss name",
            "launch started",
            "find while failing",
            "find running",
            "find stopped",
            "find none",
            "list while failing",
            "list",
            "destroy own held",
            "destroy foreign held",
            "destroy already destroyed",
            "destroy never issued",
            "destroy near miss",
            "accepts",
            "accepts refused",
            "outage starts",
            "outage ends",
            "advance",
            "advance exactly to a held stop time",
            "advance to 1ns before a held stop time",
            "advance past a held stop time",
        ] {
            assert!(
                seen.get(expected).copied().unwrap_or(0) >= 10,
                "{expected:?} is (almost) never generated: {seen:#?}"
            );
        }
    }

    // H8: with whole-connection outages, launches and destroys of every kind
    // are tried while the connection is cut, and none of them changes the model.
    #[test]
    fn h8_whole_outages_reach_launch_and_destroy_and_change_nothing() {
        let initial = ModelState::new(policies(Outage::WholeConnection), Pace::Modelled);
        let seen = outcomes(initial.clone());
        for expected in [
            "launch during a whole outage",
            "launch refused during a whole outage",
            "destroy own held during a whole outage",
            "destroy of another during a whole outage",
            "outage ends",
        ] {
            assert!(
                seen.get(expected).copied().unwrap_or(0) >= 10,
                "{expected:?} is (almost) never generated: {seen:#?}"
            );
        }
        let cut = initial.apply(&Transition::Outage {
            side: Side::Blue,
            down: true,
        });
        let launch = Transition::Launch {
            side: Side::Blue,
            name: "job-a".to_owned(),
            trust: TrustClass::Trusted,
            command: Command::RunFor(Duration::from_secs(60)),
        };
        assert!(cut.clone().apply(&launch).launches.is_empty());
        let green = Transition::Launch {
            side: Side::Green,
            name: "job-a".to_owned(),
            trust: TrustClass::Trusted,
            command: Command::RunFor(Duration::from_secs(60)),
        };
        assert_eq!(cut.apply(&green).launches.len(), 1);
    }

    // H11: mid-call faults are generated only for a fixture that declares
    // them, on launches and destroys of every kind, and their outages end.
    #[test]
    fn h11_lost_answers_are_generated_only_when_declared() {
        let seen = outcomes(ModelState::new(mid_call(), Pace::Modelled));
        for expected in [
            "launch losing its answer",
            "refused launch losing its answer",
            "destroy own held losing its answer",
            "destroy of another losing its answer",
            "outage ends after a lost answer",
            "launch during a whole outage",
            "destroy own held",
        ] {
            assert!(
                seen.get(expected).copied().unwrap_or(0) >= 10,
                "{expected:?} is (almost) never generated: {seen:#?}"
            );
        }
        let undeclared = outcomes(ModelState::new(
            policies(Outage::WholeConnection),
            Pace::Modelled,
        ));
        assert!(
            !undeclared.keys().any(|outcome| outcome.contains("losing")),
            "{undeclared:#?}"
        );
    }

    // H7: under wall timing every run time and move is a multiple of the
    // declared windows' unit (or never stops), so a case takes seconds.
    #[test]
    fn h7_wall_pace_scales_run_times_and_moves_to_the_windows() {
        let windows = WallWindows {
            pending: Duration::from_millis(200),
            around_end: Duration::from_millis(500),
        };
        let pace = Pace::Wall(windows);
        let unit = Duration::from_millis(500);
        assert_eq!(windows.unit(), unit);
        for run_time in pace.run_times() {
            assert!(
                run_time == Duration::MAX || run_time <= unit * 6,
                "{run_time:?}"
            );
        }
        for advance in pace.advances() {
            assert!(advance >= unit / 2 && advance <= unit * 4, "{advance:?}");
        }
        assert_eq!(pace.horizon(), unit * 8);
        let seen = outcomes(ModelState::new(policies(Outage::WholeConnection), pace));
        assert!(
            seen["advance exactly to a held stop time"] >= 10,
            "{seen:#?}"
        );
    }
}
