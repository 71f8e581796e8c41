//! The reference model of the provider contract: what two deployments on one
//! host must answer, as a `proptest-state-machine` sequential strategy
//! ([`strategy`]) over [`ModelState`].
//!
//! Times are offsets from the case's start, and instances are named by the
//! order of their successful launches, so the model needs nothing from the
//! backend but its [`Policies`] and, under wall timing, the windows its
//! run times and clock moves are scaled to ([`Pace`]). Under wall timing the
//! model's time is only the sum of the moves asked for: the driver checks
//! states against the wall clock, never against it.

use std::fmt;
use std::time::Duration;

use billet_provider::TrustClass;
use proptest::collection::SizeRange;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use proptest_state_machine::strategy::Sequential;

use crate::factory::{Outage, Policies, WallWindows};

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
    /// One of the backend's invalid commands ([`Policies::invalid_commands`]).
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

/// Reads back one step as [`Transition`]'s `Display` prints it (the lines of
/// a [`ContractFailure`](crate::ContractFailure)), so that a printed sequence
/// can be replayed ([`crate::replay`]). A leading step number (`  3. `) is
/// skipped. `invalid_commands` are the backend's ([`Policies`]): an invalid
/// command is one of them.
pub(crate) fn parse_step(
    line: &str,
    invalid_commands: &'static [&'static [&'static str]],
) -> Result<Transition, String> {
    let line = line.trim();
    let line = match line.split_once(". ") {
        Some((number, rest)) if number.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => line,
    };
    if let Some(rest) = line.strip_prefix("clock: advance ") {
        for (words, nudge) in [
            ("to just before the stop time of ", Nudge::Before),
            ("to just after the stop time of ", Nudge::After),
            ("to the stop time of ", Nudge::At),
        ] {
            if let Some(key) = rest.strip_prefix(words) {
                let (of, rest) = parse_key(key)?;
                return done(rest, Transition::AdvanceToStop { of, nudge });
            }
        }
        return Ok(Transition::Advance(parse_duration(rest)?));
    }
    let (side, rest) = if let Some(rest) = line.strip_prefix("blue: ") {
        (Side::Blue, rest)
    } else if let Some(rest) = line.strip_prefix("green: ") {
        (Side::Green, rest)
    } else {
        return Err("a step starts with \"blue: \", \"green: \" or \"clock: \"".to_owned());
    };
    match rest {
        "list" => return Ok(Transition::List { side }),
        "outage starts" => return Ok(Transition::Outage { side, down: true }),
        "outage ends" => return Ok(Transition::Outage { side, down: false }),
        _ => {}
    }
    if let Some(trust) = rest
        .strip_prefix("accepts(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        let trust = parse_trust(trust)?;
        return Ok(Transition::Accepts { side, trust });
    }
    if let Some(rest) = rest.strip_prefix("find ") {
        let (name, rest) = parse_quoted(rest)?;
        return done(rest, Transition::Find { side, name });
    }
    // A launch or a destroy, perhaps losing its answer (H11).
    let (call, after) = match rest.split_once("; the connection fails mid-call after ") {
        Some((call, lost)) => {
            let count = lost
                .strip_suffix(" exchanges, losing the next answer")
                .or_else(|| lost.strip_suffix(" exchange, losing the next answer"))
                .ok_or("expected \"N exchange(s), losing the next answer\" at the end")?;
            let after = count
                .parse::<u32>()
                .map_err(|_| format!("{count:?} is not a number of exchanges"))?;
            (call, Some(after))
        }
        None => (rest, None),
    };
    if let Some(rest) = call.strip_prefix("launch ") {
        let (name, rest) = parse_quoted(rest)?;
        let (trust, rest) = rest
            .strip_prefix(" (")
            .and_then(|rest| rest.split_once(", "))
            .ok_or("expected \" (<trust>, \" after the launch's name")?;
        let trust = parse_trust(trust)?;
        let rest = rest
            .strip_suffix(')')
            .ok_or("expected the launch's command to end with \")\"")?;
        let command = if let Some(d) = rest.strip_prefix("runs for ") {
            Command::RunFor(parse_duration(d)?)
        } else if let Some(argv) = rest.strip_prefix("invalid command ") {
            let argv = invalid_commands
                .iter()
                .find(|known| format!("{known:?}") == argv)
                .ok_or_else(|| format!("{argv} is not one of the backend's invalid commands"))?;
            Command::Invalid(argv)
        } else {
            return Err("expected \"runs for <time>\" or \"invalid command [...]\"".to_owned());
        };
        return Ok(match after {
            None => Transition::Launch {
                side,
                name,
                trust,
                command,
            },
            Some(after) => Transition::LaunchLosingAnswer {
                side,
                name,
                trust,
                command,
                after,
            },
        });
    }
    if let Some(rest) = call.strip_prefix("destroy ") {
        let target = if let Some(text) = rest.strip_prefix("the never-issued id ") {
            let (text, rest) = parse_quoted(text)?;
            done(rest, ())?;
            let text = NEVER_ISSUED
                .iter()
                .find(|never| **never == text)
                .ok_or_else(|| format!("{text:?} is not one of the suite's never-issued ids"))?;
            Target::Never(text)
        } else if let Some(key) = rest.strip_prefix("the id of ") {
            let (key, rest) = parse_key(key)?;
            match rest {
                "" => Target::Issued(key),
                " with a leading space" => Target::NearMiss(key, Miss::Leading),
                " with a trailing space" => Target::NearMiss(key, Miss::Trailing),
                " in the other case" => Target::NearMiss(key, Miss::Case),
                _ => return Err(format!("unexpected {rest:?} after the destroyed id")),
            }
        } else {
            return Err("expected \"the id of ...\" or \"the never-issued id ...\"".to_owned());
        };
        return Ok(match after {
            None => Transition::Destroy { side, target },
            Some(after) => Transition::DestroyLosingAnswer {
                side,
                target,
                after,
            },
        });
    }
    Err(format!("{side} does no {rest:?}"))
}

/// `value` if nothing is left of the line.
fn done<T>(rest: &str, value: T) -> Result<T, String> {
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(format!("unexpected {rest:?} at the end"))
    }
}

fn parse_trust(text: &str) -> Result<TrustClass, String> {
    TrustClass::ALL
        .into_iter()
        .find(|trust| trust.as_str() == text)
        .ok_or_else(|| format!("{text:?} is not a trust class (unknown, untrusted, trusted)"))
}

/// A [`Key`] as its `Display` prints it (`blue's "job-a"`), and the rest.
fn parse_key(text: &str) -> Result<(Key, &str), String> {
    let (side, rest) = if let Some(rest) = text.strip_prefix("blue's ") {
        (Side::Blue, rest)
    } else if let Some(rest) = text.strip_prefix("green's ") {
        (Side::Green, rest)
    } else {
        return Err(format!("expected blue's or green's \"name\", got {text:?}"));
    };
    let (name, rest) = parse_quoted(rest)?;
    Ok((Key { side, name }, rest))
}

/// A string as `Debug` quotes it, and the rest of the line.
fn parse_quoted(text: &str) -> Result<(String, &str), String> {
    let bad = || format!("expected a quoted name, got {text:?}");
    let mut chars = text.strip_prefix('"').ok_or_else(bad)?.char_indices();
    let mut out = String::new();
    while let Some((_, c)) = chars.next() {
        match c {
            '"' => return Ok((out, chars.as_str())),
            '\\' => match chars.next().map(|(_, c)| c).ok_or_else(bad)? {
                't' => out.push('\t'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                'u' => {
                    let rest = chars.as_str().strip_prefix('{').ok_or_else(bad)?;
                    let (hex, rest) = rest.split_once('}').ok_or_else(bad)?;
                    let code = u32::from_str_radix(hex, 16).map_err(|_| bad())?;
                    out.push(char::from_u32(code).ok_or_else(bad)?);
                    chars = rest.char_indices();
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    Err(bad())
}

/// A [`Duration`] as its `Debug` prints it (`60s`, `1.5ms`, `1ns`), exactly.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a time as the suite prints it (60s, 1.5ms, 1ns)");
    let (number, unit) = [
        ("ns", 1u128),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .into_iter()
    .find_map(|(suffix, unit)| Some((text.strip_suffix(suffix)?, unit)))
    .ok_or_else(bad)?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(fraction.is_empty() || digits(fraction)) || fraction.len() > 9 {
        return Err(bad());
    }
    let whole: u128 = whole.parse().map_err(|_| bad())?;
    let scale = 10u128.pow(u32::try_from(fraction.len()).map_err(|_| bad())?);
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().map_err(|_| bad())?
    };
    if !(fraction * unit).is_multiple_of(scale) {
        return Err(bad());
    }
    let nanos = whole
        .checked_mul(unit)
        .and_then(|n| n.checked_add(fraction * unit / scale))
        .ok_or_else(bad)?;
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad())?;
    let sub = u32::try_from(nanos % 1_000_000_000).map_err(|_| bad())?;
    Ok(Duration::new(secs, sub))
}

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

/// How the case's time passes, which sets the run times and moves drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pace {
    /// A manual clock: exact stop times, moves from a nanosecond to an hour.
    Modelled,
    /// Real time: run times and moves are multiples of the windows' unit.
    Wall(WallWindows),
}

impl Pace {
    /// The run times a launch may name.
    fn run_times(self) -> Vec<Duration> {
        match self {
            Pace::Modelled => RUN_TIMES.to_vec(),
            Pace::Wall(windows) => {
                let unit = windows.unit();
                vec![
                    Duration::ZERO,
                    unit,
                    unit.saturating_mul(3),
                    unit.saturating_mul(6),
                    Duration::MAX,
                ]
            }
        }
    }

    /// The clock moves an advance may make.
    fn advances(self) -> Vec<Duration> {
        match self {
            Pace::Modelled => ADVANCES.to_vec(),
            Pace::Wall(windows) => {
                let unit = windows.unit();
                vec![
                    unit / 2,
                    unit,
                    unit.saturating_mul(2),
                    unit.saturating_mul(4),
                ]
            }
        }
    }

    /// How far ahead a clock move may jump to a stop time.
    fn horizon(self) -> Duration {
        match self {
            Pace::Modelled => HORIZON,
            Pace::Wall(windows) => windows.unit().saturating_mul(8),
        }
    }
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
    fn names_settled(&self, key: &Key) -> bool {
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
    fn keys(&self) -> Vec<Key> {
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

/// How far ahead a clock move may jump to a stop time. Together with the
/// bounded number and size of moves, it keeps modelled time far from the end
/// of representable time, where a backend rightly treats a stop time as never.
const HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// Names a launch or find may use: a few base names, so that duplicates are
/// common, and near misses of `job-a` that differ by case, spaces, a prefix
/// or an accent.
const NAMES: &[&str] = &["job-a", "job-b", "job-c"];
const NEAR_MISSES: &[&str] = &[
    "Job-a", "JOB-A", " job-a", "job-a ", "job-a\t", "job-", "job", "job-ab", "jöb-a",
];
/// Ids no backend issues.
const NEVER_ISSUED: &[&str] = &["no-such-instance", "", "billet-conformance/never-issued"];
/// Modelled run times: the common, the boundary-prone and the never-ending.
const RUN_TIMES: &[Duration] = &[
    Duration::from_secs(60),
    Duration::ZERO,
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_secs(1),
    Duration::new(59, 999_999_999),
    Duration::from_millis(90_500),
    Duration::from_secs(3600),
    Duration::MAX,
];
/// Clock moves, small and large; exact stop times come from `AdvanceToStop`.
const ADVANCES: &[Duration] = &[
    Duration::from_secs(1),
    Duration::from_nanos(1),
    Duration::from_millis(1),
    Duration::from_secs(30),
    Duration::from_secs(59),
    Duration::from_secs(60),
    Duration::from_secs(3600),
];

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

    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    use super::*;

    /// The simulated backend's choices, with an outage of either kind.
    fn policies(outage: Outage) -> Policies {
        Policies {
            invalid_commands: &[&[], &["sleep", "90"]],
            outage,
            ..Policies::STRICT
        }
    }

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

    /// The simulated backend's choices with mid-call faults (H11).
    fn mid_call() -> Policies {
        Policies {
            mid_call: true,
            ..policies(Outage::WholeConnection)
        }
    }

    fn lose_launch(side: Side, name: &str, after: u32) -> Transition {
        Transition::LaunchLosingAnswer {
            side,
            name: name.to_owned(),
            trust: TrustClass::Trusted,
            command: Command::RunFor(Duration::from_secs(60)),
            after,
        }
    }

    fn outage(side: Side, down: bool) -> Transition {
        Transition::Outage { side, down }
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

    fn key(side: Side, name: &str) -> Key {
        Key {
            side,
            name: name.to_owned(),
        }
    }

    fn launch(side: Side, name: &str, run_time: Duration) -> Transition {
        Transition::Launch {
            side,
            name: name.to_owned(),
            trust: TrustClass::Trusted,
            command: Command::RunFor(run_time),
        }
    }

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
