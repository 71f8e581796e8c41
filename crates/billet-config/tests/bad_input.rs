//! F4: bad input gets a clear error with its location, and never a panic.

mod common;

use billet_config::{Config, ConfigError};
use common::{EXAMPLE, assert_at, edit, edits, line_of, refuse};

// F4: an empty file, a file of comments, and a null document are each "empty".
#[test]
fn f4_empty_file_is_refused() {
    for text in [
        "",
        "   \n\n",
        "# nothing here\n",
        "---\n",
        "~\n",
        "null\n",
        "--- # a comment\n...\n",
    ] {
        let error = refuse(text);
        assert!(
            matches!(error, ConfigError::Empty { .. }),
            "{text:?}: {error}"
        );
        assert!(
            error.to_string().contains("the configuration is empty"),
            "{error}"
        );
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join("f4-empty-billet.yaml");
    std::fs::write(&path, "").expect("write the fixture");
    let error = Config::load(&path).expect_err("an empty file is refused");
    assert!(matches!(error, ConfigError::Empty { .. }), "{error}");
    assert_eq!(error.location().file.as_deref(), Some(path.as_path()));
    assert!(error.to_string().starts_with(&path.display().to_string()));
}

// F4: malformed YAML is refused with the line and column where the parser stopped.
#[test]
fn f4_malformed_yaml_is_refused_with_line_and_column() {
    for (text, line) in [
        (
            edit("  id: ci-eu-west-1", "  id: [ci-eu-west-1"),
            line_of(EXAMPLE, "  description:"),
        ),
        (
            edit("    capacity: 4\n", "   capacity: 4\n"),
            line_of(EXAMPLE, "    capacity: 4\n"),
        ),
        // The scanner reports a tab where the plain scalar before it started.
        (
            edit("    capacity: 4\n", "\tcapacity: 4\n"),
            line_of(EXAMPLE, "    kind: tart"),
        ),
        (edit("  id: ci-eu-west-1", "  id: \"ci-eu-west-1"), 0),
        (
            edit("    kind: tart", "    kind: *undefined"),
            line_of(EXAMPLE, "    kind: tart"),
        ),
        // The second document is reported where its content starts.
        (
            format!("{EXAMPLE}---\n{EXAMPLE}"),
            EXAMPLE.lines().count() as u64 + 1 + line_of(EXAMPLE, "deployment:"),
        ),
    ] {
        let error = refuse(&text);
        assert!(matches!(error, ConfigError::Syntax { .. }), "{error}");
        let location = error.location();
        assert!(
            location.line.is_some() && location.column.is_some(),
            "{error}"
        );
        if line > 0 {
            assert_eq!(location.line, Some(line), "{error}");
        }
        assert!(error.to_string().contains("malformed YAML"), "{error}");
    }
}

// F4: an unknown field is refused, naming the field, its path and the fields allowed there.
#[test]
fn f4_unknown_fields_are_refused() {
    let text = edit("    capacity: 4\n", "    capacity: 4\n    colour: silver\n");
    let error = refuse(&text);
    let ConfigError::UnknownField {
        field, expected, ..
    } = &error
    else {
        panic!("expected an unknown field, got: {error}");
    };
    assert_eq!(field, "colour");
    assert!(expected.contains(&"capacity"));
    assert_at(&error, "providers[1].colour", line_of(&text, "colour"));
    // The message lists every field allowed there, each quoted.
    assert!(
        error.to_string().ends_with(
            "unknown field `colour`, expected one of `name`, `kind`, `capacity`, \
             `docker`, `tart`, `firecracker`"
        ),
        "{error}"
    );

    for (from, to, path, needle) in [
        ("routing:\n", "extras: 1\nrouting:\n", "extras", "extras"),
        (
            "      cpus: 4\n",
            "      cpus: 4\n      gpus: 1\n",
            "providers[1].tart.gpus",
            "gpus",
        ),
        (
            "      fallback_kind: firecracker\n",
            "      fallback_kind: firecracker\n      weight: 2\n",
            "routing.routes[2].weight",
            "weight",
        ),
        (
            "  description:",
            "  owner: me\n  description:",
            "deployment.owner",
            "owner: me",
        ),
    ] {
        let text = edit(from, to);
        let error = refuse(&text);
        assert!(matches!(error, ConfigError::UnknownField { .. }), "{error}");
        assert_at(&error, path, line_of(&text, needle));
    }
}

// F4: a value of the wrong type is refused at its path.
#[test]
fn f4_wrong_types_are_refused() {
    for (from, to, path) in [
        ("capacity: 4\n", "capacity: four\n", "providers[1].capacity"),
        ("capacity: 4\n", "capacity: -4\n", "providers[1].capacity"),
        ("capacity: 4\n", "capacity: 4.5\n", "providers[1].capacity"),
        (
            "capacity: 4\n",
            "capacity: 99999999999\n",
            "providers[1].capacity",
        ),
        ("capacity: 4\n", "capacity: [4]\n", "providers[1].capacity"),
        ("    kind: tart", "    kind: [tart]", "providers[1].kind"),
        ("    kind: tart", "    kind: ~", "providers[1].kind"),
        (
            "labels: [linux]",
            "labels: linux",
            "routing.routes[2].labels",
        ),
        (
            "      cpus: 4",
            "      cpus: many",
            "providers[1].tart.cpus",
        ),
        (
            "  - name: macos-tart",
            "  - name: {first: macos}",
            "providers[1].name",
        ),
    ] {
        let text = edit(from, to);
        let error = refuse(&text);
        assert!(
            matches!(error, ConfigError::WrongType { .. }),
            "{to}: {error}"
        );
        assert_at(&error, path, line_of(&text, to.trim()));
        assert!(error.to_string().contains("wrong type"), "{error}");
    }
    let error = refuse("- a list\n- is not a configuration\n");
    assert!(matches!(error, ConfigError::WrongType { .. }), "{error}");
    assert_eq!(error.location().line, Some(1));
}

// F4: a number outside its field's type is refused with the field's exact
// range: capacities and CPU counts are u32, memory sizes u64.
#[test]
fn f4_out_of_range_numbers_name_their_range() {
    for (from, to, path, range) in [
        (
            "capacity: 4\n",
            "capacity: 4294967296\n",
            "providers[1].capacity",
            "from 0 to 4294967295",
        ),
        (
            "capacity: 4\n",
            "capacity: -1\n",
            "providers[1].capacity",
            "from 0 to 4294967295",
        ),
        (
            "      cpus: 4",
            "      cpus: 4294967296",
            "providers[1].tart.cpus",
            "from 0 to 4294967295",
        ),
        (
            "      memory_mib: 8192",
            "      memory_mib: 18446744073709551616",
            "providers[1].tart.memory_mib",
            "from 0 to 18446744073709551615",
        ),
    ] {
        let text = edit(from, to);
        let error = refuse(&text);
        let ConfigError::WrongType { message, .. } = &error else {
            panic!("{to}: expected a wrong type, got {error}");
        };
        assert_eq!(message, &format!("expected a whole number {range}"), "{to}");
        assert_at(&error, path, line_of(&text, to.trim()));
    }
    // The largest value of each type is still a value.
    let text = edits(&[
        ("capacity: 4\n", "capacity: 4294967295\n"),
        (
            "      memory_mib: 8192",
            "      memory_mib: 18446744073709551615",
        ),
    ]);
    let config = Config::from_yaml_str(&text).expect("the largest values load");
    assert_eq!(
        config.provider("macos-tart").map(|p| p.capacity().get()),
        Some(u32::MAX)
    );
}

// F4: YAML this loader will not read is reported as malformed wherever it is,
// ahead of a schema error earlier in the file: the whole text is checked for
// structure (here, a tag the loader does not know, on the last key) before
// any value is read against the schema (here, a capacity that is not a
// number, 30 lines up).
#[test]
fn f4_malformed_yaml_is_reported_before_schema_errors() {
    let text = edits(&[
        ("capacity: 4\n", "capacity: four\n"),
        ("  default_kind: docker", "  default_kind: !custom docker"),
    ]);
    let error = refuse(&text);
    let ConfigError::Syntax { message, .. } = &error else {
        panic!("expected malformed YAML, got {error}");
    };
    assert_eq!(message, "unsupported tag `!custom`");
    assert_eq!(error.location().line, Some(line_of(&text, "!custom")));
    // The schema pass stopped 30 lines up: its path is not this error's.
    assert_eq!(error.location().path, None, "{error}");
}

// F4: a tag on a field name is refused, even a standard tag that spells a
// known field (`!!binary ZG9ja2Vy` decodes to `docker`): a field is matched by
// its text alone, so the tag would otherwise be dropped without a word. The
// plain string tags (`!!str`, `!`) leave the key a string and are read.
#[test]
fn f4_tagged_field_names_are_refused() {
    for tagged in ["!!binary ZG9ja2Vy", "!!int docker", "!!null docker"] {
        let text = edit("    docker:\n", &format!("    {tagged}:\n"));
        let error = refuse(&text);
        let tag = tagged.split(' ').next().unwrap_or_default();
        assert!(
            error.to_string().contains(&format!(
                "tag `{tag}` on a struct field name is not allowed"
            )),
            "{tagged}: {error}"
        );
        assert_eq!(error.location().path.as_deref(), Some("providers[0]"));
        assert_eq!(error.location().line, Some(line_of(&text, tagged)));
    }
    for plain in ["!!str docker", "! docker"] {
        let text = edit("    docker:\n", &format!("    {plain}:\n"));
        Config::from_yaml_str(&text).unwrap_or_else(|error| panic!("{plain}: {error}"));
    }
}

// F4: a missing deployment identity is refused: the whole block, the id, a
// null id, a blank id.
#[test]
fn f4_missing_identity_is_refused() {
    let no_block = EXAMPLE.replace(
        "deployment:\n  # The owner string written onto every instance this scheduler starts.\n  # Two schedulers on one machine must not share it.\n  id: ci-eu-west-1\n  description: Shared CI fleet for the eu-west-1 build farm\n",
        "",
    );
    assert_ne!(no_block, EXAMPLE);
    let error = refuse(&no_block);
    assert!(
        matches!(error, ConfigError::MissingIdentity { .. }),
        "{error}"
    );
    assert_eq!(error.location().path.as_deref(), Some("deployment"));
    assert!(error.location().line.is_some(), "{error}");

    for (to, path) in [
        ("", "deployment.id"),
        ("  id:\n", "deployment.id"),
        ("  id: ~\n", "deployment.id"),
        ("  id: '   '\n", "deployment.id"),
    ] {
        let text = edit("  id: ci-eu-west-1\n", to);
        let error = refuse(&text);
        assert!(
            matches!(error, ConfigError::MissingIdentity { .. }),
            "{to:?}: {error}"
        );
        assert_eq!(error.location().path.as_deref(), Some(path), "{error}");
        assert!(error.location().line.is_some(), "{error}");
        assert!(
            error.to_string().contains("missing deployment identity"),
            "{error}"
        );
    }
}

// F4: two providers with one name are refused at the second, naming the first.
#[test]
fn f4_duplicate_provider_names_are_refused() {
    let text = edit("name: macos-tart", "name: linux-docker");
    let error = refuse(&text);
    let ConfigError::DuplicateProvider { name, first, .. } = &error else {
        panic!("expected a duplicate provider, got: {error}");
    };
    assert_eq!(name, "linux-docker");
    assert_eq!(first.path.as_deref(), Some("providers[0].name"));
    assert_eq!(first.line, Some(line_of(EXAMPLE, "name: linux-docker")));
    assert_at(
        &error,
        "providers[1].name",
        line_of(EXAMPLE, "name: macos-tart"),
    );
    assert!(
        error
            .to_string()
            .contains("duplicate provider name \"linux-docker\""),
        "{error}"
    );
    // The message points at the first provider by path, line and column.
    let first_at = format!(
        "it already names providers[0].name (line {}, column {})",
        first.line.unwrap_or_default(),
        first.column.unwrap_or_default()
    );
    assert!(error.to_string().ends_with(&first_at), "{error}");
}

// F4: a route that names no provider is refused, listing the providers there are.
#[test]
fn f4_route_naming_no_provider_is_refused() {
    let text = edit("provider: macos-tart", "provider: macos-tarts");
    let error = refuse(&text);
    assert!(
        matches!(error, ConfigError::UnknownProvider { .. }),
        "{error}"
    );
    assert_at(
        &error,
        "routing.routes[1].provider",
        line_of(&text, "provider: macos-tarts"),
    );
    assert!(
        error
            .to_string()
            .contains("linux-docker, macos-tart, untrusted-firecracker"),
        "{error}"
    );
}

// F4: a provider with zero capacity is refused.
#[test]
fn f4_zero_capacity_is_refused() {
    let text = edit("capacity: 4\n", "capacity: 0\n");
    let error = refuse(&text);
    assert!(matches!(error, ConfigError::ZeroCapacity { .. }), "{error}");
    assert_at(
        &error,
        "providers[1].capacity",
        line_of(&text, "capacity: 0"),
    );
    assert!(
        error.to_string().contains("\"macos-tart\" has capacity 0"),
        "{error}"
    );
}

// F4: a key given twice in one mapping is refused at the second.
#[test]
fn f4_duplicate_keys_are_refused() {
    let text = edit("    capacity: 4\n", "    capacity: 4\n    capacity: 5\n");
    let error = refuse(&text);
    assert!(matches!(error, ConfigError::DuplicateKey { .. }), "{error}");
    assert_eq!(error.location().line, Some(line_of(&text, "capacity: 5")));
    assert!(
        error.to_string().contains("duplicate key `capacity`"),
        "{error}"
    );
}

/// Whether an error is the one a case expects.
type IsExpected = fn(&ConfigError) -> bool;

// F4: the other rules of the schema each have their error and location.
#[test]
fn f4_schema_rules_are_refused_with_location() {
    let tart_block = "    tart:\n      image: ghcr.io/cirruslabs/macos-sequoia-xcode:16.2\n      cpus: 4\n      memory_mib: 8192\n";
    let cases: Vec<(String, &str, IsExpected)> = vec![
        (edit(tart_block, ""), "providers[1]", |e| {
            matches!(e, ConfigError::MissingSettings { .. })
        }),
        (
            edit(
                tart_block,
                &format!("{tart_block}    docker:\n      image: x\n"),
            ),
            "providers[1].docker",
            |e| matches!(e, ConfigError::ForeignSettings { .. }),
        ),
        (
            edit("name: macos-tart", "name: ' '"),
            "providers[1].name",
            |e| matches!(e, ConfigError::BlankProviderName { .. }),
        ),
        (
            edit("labels: [linux]", "labels: []"),
            "routing.routes[2].labels",
            |e| matches!(e, ConfigError::BadLabels { .. }),
        ),
        (
            edit("labels: [linux]", "labels: [linux, '']"),
            "routing.routes[2].labels",
            |e| matches!(e, ConfigError::BadLabels { .. }),
        ),
    ];
    for (text, path, is_expected) in cases {
        let error = refuse(&text);
        assert!(is_expected(&error), "{path}: {error}");
        assert_eq!(error.location().path.as_deref(), Some(path), "{error}");
        assert!(error.location().line.is_some(), "{error}");
    }

    // No providers at all.
    let text = "deployment: {id: blue}\nproviders: []\nrouting: {default_kind: docker}\n";
    let error = refuse(text);
    assert!(matches!(error, ConfigError::NoProviders { .. }), "{error}");
    assert_eq!(error.location().path.as_deref(), Some("providers"));
    assert_eq!(error.location().line, Some(2));

    // A fallback or default kind that no provider has.
    let base = "deployment: {id: blue}\nproviders:\n  - {name: a, kind: docker, capacity: 1, docker: {image: x}}\n";
    let text = format!(
        "{base}routing:\n  routes:\n    - {{labels: [l], provider: a, fallback_kind: tart}}\n"
    );
    let error = refuse(&text);
    assert!(
        matches!(error, ConfigError::NoProviderOfKind { .. }),
        "{error}"
    );
    assert_at(&error, "routing.routes[0].fallback_kind", 6);
    let text = format!("{base}routing:\n  default_kind: firecracker\n");
    let error = refuse(&text);
    assert!(
        matches!(error, ConfigError::NoProviderOfKind { .. }),
        "{error}"
    );
    assert_at(&error, "routing.default_kind", 5);

    // Routing that sends no job anywhere, and no routing at all.
    let error = refuse(&format!("{base}routing: {{}}\n"));
    assert!(matches!(error, ConfigError::NoRoutes { .. }), "{error}");
    assert_eq!(error.location().line, Some(4));
    let error = refuse(base);
    assert!(
        matches!(
            error,
            ConfigError::MissingField {
                field: "routing",
                ..
            }
        ),
        "{error}"
    );
}

// F4: bytes that are not UTF-8 are refused at the first bad byte; an unreadable
// path is refused naming the file.
#[test]
fn f4_not_utf8_and_unreadable_files_are_refused() {
    let error = Config::from_yaml_bytes(b"deployment:\n  id: caf\xe9\n").expect_err("refused");
    assert!(matches!(error, ConfigError::NotUtf8 { .. }), "{error}");
    assert_eq!(
        (error.location().line, error.location().column),
        (Some(2), Some(10))
    );

    let missing = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-billet.yaml");
    let error = Config::load(&missing).expect_err("refused");
    assert!(matches!(error, ConfigError::Read { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with(&missing.display().to_string()),
        "{error}"
    );
}

// F4: hostile input is refused, not a crash: deep nesting, an alias bomb,
// control characters in keys, a huge scalar.
#[test]
fn f4_hostile_input_is_refused_without_panic() {
    let deep = format!("deployment: {}", "[".repeat(100_000));
    assert!(matches!(refuse(&deep), ConfigError::Syntax { .. }));
    let deep_maps = format!("deployment: {}", "{a: ".repeat(10_000));
    assert!(matches!(refuse(&deep_maps), ConfigError::Syntax { .. }));

    // An alias bomb, well-formed YAML with no duplicate key: each level holds
    // ten aliases of the one before, so the last stands for 10^11 copies of
    // one scalar. Neither pass expands it: the structure pass skips aliased
    // nodes without replaying them, and the typed pass stops at the unknown
    // key before reading its value. (Were it expanded, this test would not
    // finish: 10^11 events.)
    let mut bomb = String::from("deployment:\n  id: blue\nbomb:\n  - &a0 lol\n");
    for level in 1..12 {
        let prev = level - 1;
        let aliases = vec![format!("*a{prev}"); 10].join(", ");
        bomb.push_str(&format!("  - &a{level} [{aliases}]\n"));
    }
    let error = refuse(&bomb);
    assert!(matches!(error, ConfigError::UnknownField { .. }), "{error}");
    assert_eq!(error.location().line, Some(3), "{error}");

    let text = edit(
        "    capacity: 4\n",
        "    \"col\\u001b[31mour\": red\n    capacity: 4\n",
    );
    let shown = refuse(&text).to_string();
    assert!(
        !shown.contains('\u{1b}'),
        "control characters are escaped: {shown}"
    );

    let huge = edit(
        "  id: ci-eu-west-1",
        &format!("  id: {}", "x".repeat(1 << 20)),
    );
    Config::from_yaml_str(&huge).expect("a long identity is still an identity");
}
