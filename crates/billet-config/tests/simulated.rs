//! F3: a file that names the simulated kind is refused, wherever and however
//! it names it, with an error that says so and where.

mod common;

use billet_config::{Config, ConfigError};
use common::{EXAMPLE, assert_at, edit, edits, line_of, refuse};

/// Asserts `text` is refused as naming the simulated backend (spelled
/// `given`) at `path`, on the line where `needle` first occurs.
fn assert_simulated(text: &str, given: &str, path: &str, needle: &str) {
    let error = refuse(text);
    match &error {
        ConfigError::SimulatedKind { given: named, .. } => assert_eq!(named, given, "{error}"),
        other => panic!("expected the simulated refusal, got: {other}"),
    }
    assert!(error.is_simulated_refusal());
    let shown = error.to_string();
    assert!(shown.contains("simulated backend is test-only"), "{shown}");
    assert!(shown.contains("cannot be configured"), "{shown}");
    assert_at(&error, path, line_of(text, needle));
}

// F3: a provider's kind, in any case and with any surrounding whitespace.
#[test]
fn f3_provider_kind_in_any_spelling_is_refused() {
    for (spelling, given) in [
        ("simulated", "simulated"),
        ("Simulated", "Simulated"),
        ("SIMULATED", "SIMULATED"),
        ("sImUlAtEd", "sImUlAtEd"),
        ("' SIMULATED '", " SIMULATED "),
        ("\"\\tsimulated\\n\"", "\tsimulated\n"),
        ("\"\u{a0}Simulated\u{a0}\"", "\u{a0}Simulated\u{a0}"),
    ] {
        let text = edit("kind: tart", &format!("kind: {spelling}"));
        assert_simulated(
            &text,
            given,
            "providers[1].kind",
            &format!("kind: {spelling}"),
        );
    }
}

// F3: simulated in a fallback kind is refused.
#[test]
fn f3_fallback_kind_is_refused() {
    let text = edit("fallback_kind: firecracker", "fallback_kind: Simulated");
    assert_simulated(
        &text,
        "Simulated",
        "routing.routes[2].fallback_kind",
        "fallback_kind: S",
    );
}

// F3: simulated as the default kind is refused.
#[test]
fn f3_default_kind_is_refused() {
    let text = edit("default_kind: docker", "default_kind: ' simulated'");
    assert_simulated(&text, " simulated", "routing.default_kind", "default_kind:");
}

// F3: simulated among the untrusted kinds is refused, in flow and block lists.
#[test]
fn f3_untrusted_kinds_are_refused() {
    let text = edit(
        "untrusted_kinds: [firecracker]",
        "untrusted_kinds: [firecracker, SIMULATED]",
    );
    assert_simulated(
        &text,
        "SIMULATED",
        "routing.untrusted_kinds[1]",
        "untrusted_kinds:",
    );
    let text = edit(
        "untrusted_kinds: [firecracker]",
        "untrusted_kinds:\n    - firecracker\n    - simulated",
    );
    assert_simulated(
        &text,
        "simulated",
        "routing.untrusted_kinds[1]",
        "    - simulated",
    );
}

// F3: quoted and tagged strings are strings: `!!str`, the verbatim form of the
// same tag, and `!!binary` (whose bytes spell the name) are all refused.
#[test]
fn f3_tagged_and_quoted_strings_are_refused() {
    for spelling in [
        "!!str simulated",
        "!!str 'Simulated'",
        "!<tag:yaml.org,2002:str> simulated",
        "\"simul\\x61ted\"",
        "!!binary c2ltdWxhdGVk",
    ] {
        let text = edit("kind: tart", &format!("kind: {spelling}"));
        let error = refuse(&text);
        assert!(error.is_simulated_refusal(), "{spelling}: {error}");
        assert_at(&error, "providers[1].kind", line_of(EXAMPLE, "kind: tart"));
    }
}

// F3: a tag the loader does not know cannot smuggle a kind past it: the file
// is refused as malformed, at the tag.
#[test]
fn f3_unknown_tags_are_refused() {
    let text = edit("kind: tart", "kind: !simulated tart");
    let error = refuse(&text);
    assert!(matches!(error, ConfigError::Syntax { .. }), "{error}");
    assert!(error.to_string().contains("unsupported tag"), "{error}");
    assert_eq!(error.location().line, Some(line_of(&text, "!simulated")));
}

// F3: an alias carries the anchored value, which is refused where it is used,
// and the error also says where the anchor defined it.
#[test]
fn f3_alias_carrying_simulated_is_refused_where_used() {
    let text = edits(&[
        (
            "description: Shared CI fleet for the eu-west-1 build farm",
            "description: &backend simulated",
        ),
        ("kind: tart", "kind: *backend"),
    ]);
    assert_simulated(&text, "simulated", "providers[1].kind", "kind: *backend");
    let error = refuse(&text);
    let defined = error.location().defined_at.expect("the anchor's position");
    assert_eq!(defined.0, line_of(&text, "&backend"));
    assert!(error.to_string().contains("copied from line"), "{error}");

    // An alias of a real kind is fine.
    let text = edits(&[
        ("    kind: docker", "    kind: &k docker"),
        ("default_kind: docker", "default_kind: *k"),
    ]);
    Config::from_yaml_str(&text).expect("an alias of docker is docker");
}

// F3: a merge key (`<<`) that carries a kind is refused, inline or through an
// anchor of another provider.
#[test]
fn f3_merge_key_carrying_simulated_is_refused() {
    let text = edit(
        "  - name: macos-tart\n    kind: tart\n",
        "  - <<: {kind: simulated}\n    name: macos-tart\n",
    );
    assert_simulated(&text, "simulated", "providers[1].kind", "<<:");

    let text = edits(&[
        (
            "  - name: linux-docker\n",
            "  - &base\n    name: linux-docker\n",
        ),
        (
            "  - name: macos-tart\n    kind: tart\n    capacity: 4\n    tart:\n      image: ghcr.io/cirruslabs/macos-sequoia-xcode:16.2\n      cpus: 4\n      memory_mib: 8192\n",
            "  - <<: *base\n    name: second-docker\n  - <<: [*base]\n    name: third-docker\n    kind: \" Simulated\"\n",
        ),
    ]);
    assert_simulated(
        &text,
        " Simulated",
        "providers[2].kind",
        "kind: \" Simulated\"",
    );
}

// F3: a key spelling the kind (such as a `simulated:` settings block) names
// the backend too, and is refused with the same error.
#[test]
fn f3_simulated_settings_block_is_refused() {
    let text = edit("    tart:\n", "    Simulated:\n      image: x\n    tart:\n");
    assert_simulated(&text, "Simulated", "providers[1].Simulated", "Simulated:");
    let text = edit("routing:\n", "simulated: true\nrouting:\n");
    assert_simulated(&text, "simulated", "simulated", "simulated: true");
}

// F3: a provider named after the simulated backend, and a route sending jobs
// to such a name, are refused the same way.
#[test]
fn f3_simulated_as_a_provider_name_is_refused() {
    let text = edit("name: macos-tart", "name: SIMULATED");
    assert_simulated(&text, "SIMULATED", "providers[1].name", "name: SIMULATED");
    let text = edit("provider: macos-tart", "provider: simulated");
    assert_simulated(
        &text,
        "simulated",
        "routing.routes[1].provider",
        "provider: simulated",
    );
}

// F3: a name that is merely unknown gets its own error, listing the valid kinds.
#[test]
fn f3_unknown_kind_gets_its_own_error() {
    for spelling in [
        "podman",
        "simulate",
        "simulated-docker",
        "'sim ulated'",
        "12",
    ] {
        let text = edit("kind: tart", &format!("kind: {spelling}"));
        let error = refuse(&text);
        assert!(
            matches!(error, ConfigError::UnknownKind { .. }),
            "{spelling}: {error}"
        );
        let shown = error.to_string();
        assert!(shown.contains("unknown provider kind"), "{shown}");
        assert!(
            shown.contains("expected one of docker, tart, firecracker"),
            "{shown}"
        );
        assert_at(
            &error,
            "providers[1].kind",
            line_of(&text, &format!("kind: {spelling}")),
        );
    }
}

// F3: through a file on disk, the error also names the file.
#[test]
fn f3_refusal_from_a_file_names_the_file() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("f3-simulated-billet.yaml");
    let text = edit("    kind: docker", "    kind: Simulated");
    std::fs::write(&path, &text).expect("write the fixture");
    let error = Config::load(&path).expect_err("refused");
    assert!(error.is_simulated_refusal(), "{error}");
    assert_eq!(error.location().file.as_deref(), Some(path.as_path()));
    let line = line_of(&text, "kind: Simulated");
    assert!(
        error
            .to_string()
            .starts_with(&format!("{}:{line}:", path.display())),
        "{error}"
    );
    assert!(
        !EXAMPLE.contains("imulated"),
        "the shipped example stays clean"
    );
}

// F3: `is_simulated_refusal` answers true for the simulated refusal only:
// every other refusal, including those about kinds, answers false.
#[test]
fn f3_only_the_simulated_refusal_says_it_is_one() {
    let refusals = [
        refuse(&edit("    kind: tart", "    kind: podman")),
        refuse(&edit("capacity: 4\n", "capacity: 0\n")),
        refuse(&edit("capacity: 4\n", "capacity: four\n")),
        refuse("deployment: [unclosed\n"),
        refuse(""),
        refuse(&edit(
            "    capacity: 4\n",
            "    colour: red\n    capacity: 4\n",
        )),
    ];
    for error in &refusals {
        assert!(!error.is_simulated_refusal(), "{error}");
    }
    assert!(refuse(&edit("    kind: tart", "    kind: simulated")).is_simulated_refusal());
}

// F3: a refusal belongs to the parse that made it. A file refused for naming
// the simulated kind, then a valid file, loads; a refusal left behind by
// reading a `ConfigKind` outside the loader changes nothing about the next
// parse, whether that parse is valid or refused for another reason.
#[test]
fn f3_a_refusal_does_not_outlive_its_parse() {
    let simulated = edit("    kind: tart", "    kind: simulated");
    assert!(refuse(&simulated).is_simulated_refusal());
    Config::from_yaml_str(EXAMPLE).expect("a valid file after a refused one loads");

    use serde::de::{Deserialize, IntoDeserializer, value::Error as ValueError};
    let direct = billet_config::ConfigKind::deserialize(
        IntoDeserializer::<ValueError>::into_deserializer("simulated"),
    );
    assert!(direct.is_err());
    Config::from_yaml_str(EXAMPLE).expect("a valid file after a direct refusal loads");
    let error = refuse(&edit("capacity: 4\n", "capacity: four\n"));
    assert!(matches!(error, ConfigError::WrongType { .. }), "{error}");
    let error = refuse(&edit("    kind: tart", "    kind: podman"));
    assert!(matches!(error, ConfigError::UnknownKind { .. }), "{error}");
}
