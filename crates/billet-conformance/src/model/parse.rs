//! Reading a printed step back ([`parse_step`]), so that the sequence a
//! failure prints can be replayed.

use std::time::Duration;

use billet_provider::TrustClass;

use super::strategy::NEVER_ISSUED;
use super::transition::{Command, Key, Miss, Nudge, Side, Target, Transition};

/// Reads back one step as [`Transition`]'s `Display` prints it (the lines of
/// a [`ContractFailure`](crate::ContractFailure)), so that a printed sequence
/// can be replayed ([`crate::replay`]). A leading step number (`  3. `) is
/// skipped. `invalid_commands` are the backend's
/// ([`Policies`](crate::Policies)): an invalid command is one of them.
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::transition::{Side, Transition};
    use super::{parse_duration, parse_step};

    // H1: a leading step number is skipped, and only a number: a step that
    // has none but holds ". " (in an instance's name) is read whole.
    #[test]
    fn h1_only_a_number_is_taken_for_the_step_number() {
        let find = Transition::Find {
            side: Side::Blue,
            name: "job-a. b".to_owned(),
        };
        assert_eq!(parse_step("blue: find \"job-a. b\"", &[]), Ok(find.clone()));
        assert_eq!(parse_step("  12. blue: find \"job-a. b\"", &[]), Ok(find));
        assert!(parse_step("x1. blue: list", &[]).is_err());
    }

    // H1: a time in a printed step is read back exactly as `Debug` printed
    // it, and nothing else is taken for one: no sign, no digits missing on
    // either side of the point, no more than nine decimals, no part of a
    // nanosecond, nothing that is not a digit.
    #[test]
    fn h1_times_are_read_exactly_as_printed() {
        for printed in [
            Duration::from_secs(60),
            Duration::from_millis(1500),
            Duration::from_nanos(1),
            Duration::from_micros(250),
            Duration::new(3, 123_456_789),
            Duration::MAX,
        ] {
            assert_eq!(parse_duration(&format!("{printed:?}")), Ok(printed));
        }
        for refused in [
            "+5s",
            "1.+5s",
            "+1.5ms",
            "-1s",
            "1.1234567890s",
            "1.0000000001s",
            "1.0001µs",
            "1.5ns",
            "1.5xs",
            "a5s",
            ".5s",
            "s",
            "5",
            "",
        ] {
            let error = parse_duration(refused).expect_err(refused);
            assert!(error.contains("is not a time"), "{refused}: {error}");
        }
    }
}
