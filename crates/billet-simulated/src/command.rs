//! [`run_for`], [`run_for_writing`] and their parsers: the command that names
//! an instance's modelled run time, and how much output it writes.

use std::time::Duration;

use billet_provider::Error;

/// The program name at the head of every simulated command.
pub const PROGRAM: &str = "billet-simulated";
/// The verb that follows the program name.
pub const VERB: &str = "run-for";
/// The word before the count of bytes an instance writes
/// ([`run_for_writing`]).
pub const WRITING: &str = "writing";

const EXPECTED: &str = "expected [\"billet-simulated\", \"run-for\", \"<seconds>[.<fraction of up to 9 digits>]s\"], \
     optionally followed by \"writing\", \"<bytes>\", \
     for example [\"billet-simulated\", \"run-for\", \"90s\"] or [\"billet-simulated\", \"run-for\", \"0.25s\", \"writing\", \"4096\"]";

/// The command that makes a simulated instance run for `d` of modelled time.
///
/// The answer is `["billet-simulated", "run-for", "<d>"]`, where `<d>` is whole
/// seconds followed by `s` (`"90s"`), with a decimal fraction when `d` has one
/// (`"1.5s"`, `"0.000000001s"`). [`parse_run_for`] reads it back exactly, to the
/// nanosecond, for every `Duration`, [`Duration::MAX`] included.
pub fn run_for(d: Duration) -> Vec<String> {
    let nanos = d.subsec_nanos();
    let text = if nanos == 0 {
        format!("{}s", d.as_secs())
    } else {
        let fraction = format!("{nanos:09}");
        format!("{}.{}s", d.as_secs(), fraction.trim_end_matches('0'))
    };
    vec![PROGRAM.to_owned(), VERB.to_owned(), text]
}

/// The command that makes a simulated instance run for `d` of modelled time
/// and write `bytes` bytes of output over it, at an even pace, all of them
/// by its stop (P9): [`run_for`] followed by `"writing"` and the count
/// (`["billet-simulated", "run-for", "90s", "writing", "4096"]`).
pub fn run_for_writing(d: Duration, bytes: u64) -> Vec<String> {
    let mut command = run_for(d);
    command.push(WRITING.to_owned());
    command.push(bytes.to_string());
    command
}

/// Reads the duration a command names: the inverse of [`run_for`], and the
/// duration of [`run_for_writing`]'s form.
///
/// A command of any other shape, or a duration that is malformed or overflows
/// a `Duration`, is [`Error::InvalidSpec`] with a message that quotes what was
/// given and shows the expected form.
pub fn parse_run_for(command: &[String]) -> Result<Duration, Error> {
    parse_run_for_writing(command).map(|(d, _)| d)
}

/// Reads the duration and the bytes written a command names: the inverse of
/// [`run_for_writing`]; [`run_for`]'s form writes 0 bytes. Refuses as
/// [`parse_run_for`] does, and a count that is not a whole number of bytes.
pub fn parse_run_for_writing(command: &[String]) -> Result<(Duration, u64), Error> {
    let no_duration = || {
        Error::invalid_spec(format!(
            "the command {command:?} names no duration: {EXPECTED}"
        ))
    };
    let (program, verb, text, writes) = match command {
        [program, verb, text] => (program, verb, text, None),
        [program, verb, text, writing, bytes] if writing == WRITING => {
            (program, verb, text, Some(bytes))
        }
        _ => return Err(no_duration()),
    };
    if program != PROGRAM || verb != VERB {
        return Err(no_duration());
    }
    let d = parse_duration(text).map_err(|why| {
        Error::invalid_spec(format!("the duration {text:?} is {why}: {EXPECTED}"))
    })?;
    let bytes = match writes {
        None => 0,
        Some(bytes) if !bytes.is_empty() && bytes.bytes().all(|b| b.is_ascii_digit()) => {
            bytes.parse().map_err(|_| {
                Error::invalid_spec(format!("the count {bytes:?} is too large: {EXPECTED}"))
            })?
        }
        Some(bytes) => {
            return Err(Error::invalid_spec(format!(
                "the count {bytes:?} is not a whole number of bytes: {EXPECTED}"
            )));
        }
    };
    Ok((d, bytes))
}

/// Parses `<seconds>[.<fraction>]s`, answering why not when it cannot.
fn parse_duration(text: &str) -> Result<Duration, &'static str> {
    let number = text.strip_suffix('s').ok_or("missing its `s` suffix")?;
    let (secs, fraction) = match number.split_once('.') {
        Some((secs, fraction)) => (secs, Some(fraction)),
        None => (number, None),
    };
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a whole number of seconds");
    }
    let secs: u64 = secs.parse().map_err(|_| "too large for a duration")?;
    let nanos = match fraction {
        None => 0,
        Some(f) if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) => {
            return Err("not a fraction of 1 to 9 digits");
        }
        Some(f) => {
            let digits: u32 = f.parse().map_err(|_| "not a fraction of 1 to 9 digits")?;
            digits * 10u32.pow(9 - f.len() as u32)
        }
    };
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use billet_provider::ErrorKind;
    use proptest::prelude::*;

    fn cmd(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| (*s).to_owned()).collect()
    }

    // S4: the command is one a person recognises in a log.
    #[test]
    fn s4_run_for_reads_like_a_command() {
        assert_eq!(
            run_for(Duration::from_secs(90)),
            ["billet-simulated", "run-for", "90s"]
        );
        assert_eq!(run_for(Duration::from_millis(1500))[2], "1.5s");
        assert_eq!(run_for(Duration::from_nanos(1))[2], "0.000000001s");
        assert_eq!(run_for(Duration::ZERO)[2], "0s");
        assert_eq!(
            parse_run_for(&run_for(Duration::MAX)).unwrap(),
            Duration::MAX
        );
    }

    // S4: anything else is refused as an invalid spec that shows the expected form.
    #[test]
    fn s4_malformed_commands_are_refused_with_the_expected_form() {
        let bad = [
            cmd(&[]),
            cmd(&["sleep", "90"]),
            cmd(&["billet-simulated", "run-for"]),
            cmd(&["billet-simulated", "run-for", "90s", "extra"]),
            cmd(&["billet-simulated", "sleep", "90s"]),
            cmd(&["Billet-Simulated", "run-for", "90s"]),
            cmd(&["billet-simulated", "run-for", "90"]),
            cmd(&["billet-simulated", "run-for", "s"]),
            cmd(&["billet-simulated", "run-for", "-1s"]),
            cmd(&["billet-simulated", "run-for", "+1s"]),
            cmd(&["billet-simulated", "run-for", " 1s"]),
            cmd(&["billet-simulated", "run-for", "1.s"]),
            cmd(&["billet-simulated", "run-for", ".5s"]),
            cmd(&["billet-simulated", "run-for", "1.0000000001s"]),
            cmd(&["billet-simulated", "run-for", "1.-5s"]),
            cmd(&["billet-simulated", "run-for", "1m"]),
            cmd(&["billet-simulated", "run-for", "١s"]),
            // one past u64::MAX seconds overflows
            cmd(&["billet-simulated", "run-for", "18446744073709551616s"]),
            cmd(&["billet-simulated", "run-for", "90s", "writing"]),
            cmd(&["billet-simulated", "run-for", "90s", "writes", "1"]),
            cmd(&["billet-simulated", "run-for", "90s", "writing", ""]),
            cmd(&["billet-simulated", "run-for", "90s", "writing", "-1"]),
            cmd(&["billet-simulated", "run-for", "90s", "writing", "1e3"]),
            cmd(&[
                "billet-simulated",
                "run-for",
                "90s",
                "writing",
                "18446744073709551616",
            ]),
            cmd(&["billet-simulated", "run-for", "9x", "writing", "1"]),
            cmd(&["billet-simulated", "run-for", "90s", "writing", "1", "more"]),
        ];
        for command in bad {
            let err = parse_run_for(&command).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{command:?}");
            assert!(
                err.to_string().contains("\"run-for\", \"90s\""),
                "{command:?}: {err}"
            );
        }
    }

    // P9: the writing form names the bytes written; the plain form none.
    #[test]
    fn p9_the_command_names_what_an_instance_writes() {
        let d = Duration::from_millis(1500);
        assert_eq!(
            run_for_writing(d, 4096),
            ["billet-simulated", "run-for", "1.5s", "writing", "4096"]
        );
        assert_eq!(
            parse_run_for_writing(&run_for_writing(d, 4096)).unwrap(),
            (d, 4096)
        );
        assert_eq!(parse_run_for_writing(&run_for(d)).unwrap(), (d, 0));
        assert_eq!(parse_run_for(&run_for_writing(d, 7)).unwrap(), d);
        let max = run_for_writing(Duration::MAX, u64::MAX);
        assert_eq!(
            parse_run_for_writing(&max).unwrap(),
            (Duration::MAX, u64::MAX)
        );
    }

    proptest! {
        // S4: the round trip is exact for every Duration.
        #[test]
        fn s4_round_trip_is_exact_for_every_duration(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let d = Duration::new(secs, nanos);
            prop_assert_eq!(parse_run_for(&run_for(d)).unwrap(), d);
        }

        // S4: no text makes the parser panic; what it accepts round-trips.
        #[test]
        fn s4_parser_never_panics(text in "\\PC{0,24}") {
            let command = vec![PROGRAM.to_owned(), VERB.to_owned(), text];
            if let Ok(d) = parse_run_for(&command) {
                prop_assert_eq!(parse_run_for(&run_for(d)).unwrap(), d);
            }
        }
    }
}
