//! The steps of a case: the two deployments ([`Side`]), how a step names an
//! instance ([`Key`]) and an id ([`Target`]), every call the suite makes or
//! thing it does to the fixture ([`Transition`]), and the line each step
//! prints as.

use std::fmt;
use std::time::Duration;

use billet_provider::TrustClass;

/// One of the fixture's two deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Blue,
    Green,
}

impl Side {
    pub(crate) fn index(self) -> usize {
        match self {
            Side::Blue => 0,
            Side::Green => 1,
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Blue => "blue",
            Side::Green => "green",
        })
    }
}

/// An instance as the transitions name it: the latest one `side` launched
/// under `name`. Deleting an unrelated launch while shrinking keeps its meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) side: Side,
    pub(crate) name: String,
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}'s {:?}", self.side, self.name)
    }
}

/// The command of a launched spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// The factory's command for this modelled run time.
    RunFor(Duration),
    /// One of the backend's invalid commands
    /// ([`Policies::invalid_commands`](crate::Policies::invalid_commands)).
    Invalid(&'static [&'static str]),
}

/// How a near-miss id differs from an id the backend issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Miss {
    /// A space before it.
    Leading,
    /// A space after it.
    Trailing,
    /// Its letters in the other case.
    Case,
}

/// The id a destroy names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// The id the backend issued for this launch (held, destroyed, own or foreign).
    Issued(Key),
    /// Text the backend never issued.
    Never(&'static str),
    /// An issued id, slightly altered: an id the backend never issued.
    NearMiss(Key, Miss),
}

/// Where an [`Transition::AdvanceToStop`] lands relative to a stop time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nudge {
    /// Exactly at it: the instance has stopped (in wall time: inside the
    /// window around the end, where either state is right).
    At,
    /// One nanosecond before: still running (in wall time: just before the
    /// window around the end).
    Before,
    /// One nanosecond after (in wall time: just after the window).
    After,
}

/// One call the suite makes, or one thing it does to the fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transition {
    Launch {
        side: Side,
        name: String,
        trust: TrustClass,
        command: Command,
    },
    Find {
        side: Side,
        name: String,
    },
    List {
        side: Side,
    },
    Destroy {
        side: Side,
        target: Target,
    },
    Accepts {
        side: Side,
        trust: TrustClass,
    },
    /// An outage of `side` starts (`down`) or ends.
    Outage {
        side: Side,
        down: bool,
    },
    Advance(Duration),
    AdvanceToStop {
        of: Key,
        nudge: Nudge,
    },
    /// A launch whose answer a mid-call fault loses after `after` exchanges
    /// (H11); `side`'s connection is down after it.
    LaunchLosingAnswer {
        side: Side,
        name: String,
        trust: TrustClass,
        command: Command,
        after: u32,
    },
    /// A destroy whose answer a mid-call fault loses after `after` exchanges
    /// (H11); `side`'s connection is down after it.
    DestroyLosingAnswer {
        side: Side,
        target: Target,
        after: u32,
    },
}

impl Transition {
    /// The side whose outage this step starts (`true`: by hand, or by losing
    /// an answer) or ends (`false`), if any.
    pub(crate) fn outage(&self) -> Option<(Side, bool)> {
        match self {
            Transition::Outage { side, down } => Some((*side, *down)),
            Transition::LaunchLosingAnswer { side, .. }
            | Transition::DestroyLosingAnswer { side, .. } => Some((*side, true)),
            _ => None,
        }
    }

    /// The same call with no fault, for a step that loses its answer (H11).
    pub(crate) fn plain(&self) -> Option<Transition> {
        match self {
            Transition::LaunchLosingAnswer {
                side,
                name,
                trust,
                command,
                ..
            } => Some(Transition::Launch {
                side: *side,
                name: name.clone(),
                trust: *trust,
                command: command.clone(),
            }),
            Transition::DestroyLosingAnswer { side, target, .. } => Some(Transition::Destroy {
                side: *side,
                target: target.clone(),
            }),
            _ => None,
        }
    }
}

fn write_launch(
    f: &mut fmt::Formatter<'_>,
    side: Side,
    name: &str,
    trust: TrustClass,
    command: &Command,
) -> fmt::Result {
    write!(f, "{side}: launch {name:?} ({trust}, ")?;
    match command {
        Command::RunFor(d) => write!(f, "runs for {d:?})"),
        Command::Invalid(argv) => write!(f, "invalid command {argv:?})"),
    }
}

fn write_destroy(f: &mut fmt::Formatter<'_>, side: Side, target: &Target) -> fmt::Result {
    write!(f, "{side}: destroy ")?;
    match target {
        Target::Issued(key) => write!(f, "the id of {key}"),
        Target::Never(text) => write!(f, "the never-issued id {text:?}"),
        Target::NearMiss(key, miss) => {
            let how = match miss {
                Miss::Leading => "with a leading space",
                Miss::Trailing => "with a trailing space",
                Miss::Case => "in the other case",
            };
            write!(f, "the id of {key} {how}")
        }
    }
}

/// How a step that loses its answer ends its line.
fn write_lost(f: &mut fmt::Formatter<'_>, after: u32) -> fmt::Result {
    let plural = if after == 1 { "" } else { "s" };
    write!(
        f,
        "; the connection fails mid-call after {after} exchange{plural}, losing the next answer"
    )
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transition::Launch {
                side,
                name,
                trust,
                command,
            } => write_launch(f, *side, name, *trust, command),
            Transition::Find { side, name } => write!(f, "{side}: find {name:?}"),
            Transition::List { side } => write!(f, "{side}: list"),
            Transition::Destroy { side, target } => write_destroy(f, *side, target),
            Transition::LaunchLosingAnswer {
                side,
                name,
                trust,
                command,
                after,
            } => {
                write_launch(f, *side, name, *trust, command)?;
                write_lost(f, *after)
            }
            Transition::DestroyLosingAnswer {
                side,
                target,
                after,
            } => {
                write_destroy(f, *side, target)?;
                write_lost(f, *after)
            }
            Transition::Accepts { side, trust } => write!(f, "{side}: accepts({trust})"),
            Transition::Outage { side, down: true } => write!(f, "{side}: outage starts"),
            Transition::Outage { side, down: false } => write!(f, "{side}: outage ends"),
            Transition::Advance(d) => write!(f, "clock: advance {d:?}"),
            Transition::AdvanceToStop { of, nudge } => {
                let when = match nudge {
                    Nudge::At => "to",
                    Nudge::Before => "to just before",
                    Nudge::After => "to just after",
                };
                write!(f, "clock: advance {when} the stop time of {of}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::test_support::{key, launch, lose_launch};

    // H1: a failure is reported as its sequence of steps, one line each, so
    // every step reads as what the suite did: which deployment, which call,
    // with which name, trust, command, id or clock move.
    #[test]
    fn h1_each_step_reads_as_what_the_suite_did() {
        let job = key(Side::Blue, "job-a");
        let cases = [
            (
                launch(Side::Green, "job-b", Duration::from_millis(1500)),
                r#"green: launch "job-b" (trusted, runs for 1.5s)"#,
            ),
            (
                Transition::Launch {
                    side: Side::Blue,
                    name: String::new(),
                    trust: TrustClass::Unknown,
                    command: Command::Invalid(&["sleep", "90"]),
                },
                r#"blue: launch "" (unknown, invalid command ["sleep", "90"])"#,
            ),
            (
                Transition::Find {
                    side: Side::Blue,
                    name: "Job-a".to_owned(),
                },
                r#"blue: find "Job-a""#,
            ),
            (Transition::List { side: Side::Green }, "green: list"),
            (
                Transition::Destroy {
                    side: Side::Green,
                    target: Target::Issued(job.clone()),
                },
                r#"green: destroy the id of blue's "job-a""#,
            ),
            (
                Transition::Destroy {
                    side: Side::Blue,
                    target: Target::Never("no-such-instance"),
                },
                r#"blue: destroy the never-issued id "no-such-instance""#,
            ),
            (
                Transition::Destroy {
                    side: Side::Blue,
                    target: Target::NearMiss(job.clone(), Miss::Leading),
                },
                r#"blue: destroy the id of blue's "job-a" with a leading space"#,
            ),
            (
                Transition::Destroy {
                    side: Side::Blue,
                    target: Target::NearMiss(job.clone(), Miss::Trailing),
                },
                r#"blue: destroy the id of blue's "job-a" with a trailing space"#,
            ),
            (
                Transition::Destroy {
                    side: Side::Blue,
                    target: Target::NearMiss(job.clone(), Miss::Case),
                },
                r#"blue: destroy the id of blue's "job-a" in the other case"#,
            ),
            (
                Transition::Accepts {
                    side: Side::Green,
                    trust: TrustClass::Untrusted,
                },
                "green: accepts(untrusted)",
            ),
            (
                Transition::Outage {
                    side: Side::Blue,
                    down: true,
                },
                "blue: outage starts",
            ),
            (
                Transition::Outage {
                    side: Side::Green,
                    down: false,
                },
                "green: outage ends",
            ),
            (
                Transition::Advance(Duration::from_nanos(1)),
                "clock: advance 1ns",
            ),
            (
                Transition::AdvanceToStop {
                    of: job.clone(),
                    nudge: Nudge::At,
                },
                r#"clock: advance to the stop time of blue's "job-a""#,
            ),
            (
                Transition::AdvanceToStop {
                    of: job.clone(),
                    nudge: Nudge::Before,
                },
                r#"clock: advance to just before the stop time of blue's "job-a""#,
            ),
            (
                Transition::AdvanceToStop {
                    of: job,
                    nudge: Nudge::After,
                },
                r#"clock: advance to just after the stop time of blue's "job-a""#,
            ),
        ];
        for (transition, text) in cases {
            assert_eq!(transition.to_string(), text);
        }
        // H11: a step that loses its answer says how many exchanges went
        // through before the fault.
        assert_eq!(
            lose_launch(Side::Blue, "job-a", 0).to_string(),
            r#"blue: launch "job-a" (trusted, runs for 60s); the connection fails mid-call after 0 exchanges, losing the next answer"#
        );
        assert_eq!(
            Transition::DestroyLosingAnswer {
                side: Side::Green,
                target: Target::Issued(key(Side::Blue, "job-a")),
                after: 1,
            }
            .to_string(),
            r#"green: destroy the id of blue's "job-a"; the connection fails mid-call after 1 exchange, losing the next answer"#
        );
    }
}
