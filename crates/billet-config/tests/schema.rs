//! F1 and F2: the schema, the shipped example, and the one kind type.

mod common;

use billet_config::{Config, ConfigKind, Settings};
use billet_provider::ProviderKind;
use common::{EXAMPLE, edit, edits};

// F2: the shipped example loads, and every part of the schema reaches the Config.
#[test]
fn f2_shipped_example_loads_with_every_part_of_the_schema() {
    let config = Config::from_yaml_str(EXAMPLE).expect("the shipped example is valid");

    assert_eq!(config.deployment().id(), "ci-eu-west-1");
    assert!(config.deployment().description().is_some());

    let kinds: Vec<_> = config
        .providers()
        .iter()
        .map(|provider| {
            (
                provider.name(),
                provider.kind().get(),
                provider.capacity().get(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("linux-docker", ProviderKind::Docker, 48),
            ("macos-tart", ProviderKind::Tart, 4),
            ("untrusted-firecracker", ProviderKind::Firecracker, 32),
        ]
    );
    assert_eq!(config.total_capacity(), 84);

    let Some(Settings::Docker(docker)) = config.provider("linux-docker").map(|p| p.settings())
    else {
        panic!("linux-docker carries docker settings");
    };
    assert_eq!(docker.image, "ghcr.io/example/ci-runner-ubuntu:24.04");
    assert_eq!(docker.network.as_deref(), Some("ci-runners"));
    let Some(Settings::Tart(tart)) = config.provider("macos-tart").map(|p| p.settings()) else {
        panic!("macos-tart carries tart settings");
    };
    assert_eq!((tart.cpus, tart.memory_mib), (Some(4), Some(8192)));
    let Some(Settings::Firecracker(firecracker)) = config
        .provider("untrusted-firecracker")
        .map(|p| p.settings())
    else {
        panic!("untrusted-firecracker carries firecracker settings");
    };
    assert!(firecracker.jailer.is_some());

    let routing = config.routing();
    // F2: each route carries its labels as the file lists them, in file order.
    let routes: Vec<(&[String], &str)> = routing
        .routes()
        .iter()
        .map(|route| (route.labels(), route.provider()))
        .collect();
    assert_eq!(
        routes,
        [
            (&["untrusted".to_owned()][..], "untrusted-firecracker"),
            (&["macos".to_owned(), "arm64".to_owned()][..], "macos-tart"),
            (&["linux".to_owned()][..], "linux-docker"),
        ]
    );
    assert_eq!(
        routing.default_kind().map(ConfigKind::get),
        Some(ProviderKind::Docker)
    );
    assert_eq!(
        routing
            .untrusted_kinds()
            .iter()
            .map(|k| k.get())
            .collect::<Vec<_>>(),
        [ProviderKind::Firecracker]
    );
    let route = routing
        .route_for(&["linux", "x64"])
        .expect("a linux job is routed");
    assert_eq!(route.provider(), "linux-docker");
    assert_eq!(
        route.fallback_kind().map(ConfigKind::get),
        Some(ProviderKind::Firecracker)
    );
    assert_eq!(
        routing.route_for(&["macos", "arm64"]).map(|r| r.provider()),
        Some("macos-tart")
    );
    assert_eq!(routing.route_for(&["macos"]).map(|r| r.provider()), None);
    // The first match wins: an untrusted linux job goes to firecracker.
    assert_eq!(
        routing
            .route_for(&["linux", "untrusted"])
            .map(|r| r.provider()),
        Some("untrusted-firecracker")
    );
}

// F2: loading from a path gives the same configuration as loading the text.
#[test]
fn f2_load_from_path_and_from_string_agree() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/billet.yaml");
    let from_path = Config::load(path).expect("the shipped example loads from its path");
    let from_text = Config::from_yaml_str(EXAMPLE).expect("the shipped example parses");
    let from_bytes = Config::from_yaml_bytes(EXAMPLE.as_bytes()).expect("and from bytes");
    assert_eq!(from_path, from_text);
    assert_eq!(from_bytes, from_text);
}

// F2: the schema in the crate documentation is itself a valid file, so the
// documentation cannot drift from the loader.
#[test]
fn f2_schema_in_the_crate_docs_loads() {
    let lib = include_str!("../src/lib.rs");
    let mut yaml = String::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        if inside && doc.starts_with("```") {
            break;
        }
        if inside {
            yaml.push_str(doc);
            yaml.push('\n');
        }
        if doc == "```yaml" {
            inside = true;
        }
    }
    assert!(
        yaml.contains("providers:"),
        "the crate docs show the schema"
    );
    let config = Config::from_yaml_str(&yaml).expect("the documented schema is a valid file");
    assert_eq!(config.providers().len(), 3);
    assert_eq!(config.routing().routes().len(), 1);
}

// F2: optional parts may be left out: no description, no optional settings,
// no routes when a default kind routes everything, no untrusted kinds.
#[test]
fn f2_optional_parts_may_be_left_out() {
    let text = "\
deployment:
  id: blue
providers:
  - name: only
    kind: docker
    capacity: 1
    docker:
      image: runner:latest
routing:
  default_kind: docker
";
    let config = Config::from_yaml_str(text).expect("a minimal file is valid");
    assert_eq!(config.deployment().description(), None);
    assert!(config.routing().routes().is_empty());
    assert!(config.routing().untrusted_kinds().is_empty());
    assert_eq!(
        config.summary(),
        "deployment \"blue\": 1 provider (only: docker x1), total capacity 1, 0 routes, default kind docker"
    );
}

// F1: every kind field of the schema names its kind through ConfigKind, and
// each kind a file may name reaches the Config as the provider contract's
// ProviderKind.
#[test]
fn f1_every_kind_field_goes_through_config_kind() {
    for kind in ConfigKind::all() {
        let name = kind.as_str();
        let default = format!("default_kind: {name}");
        let untrusted = format!("untrusted_kinds: [{name}]");
        let text = edits(&[
            ("default_kind: docker", &default),
            ("untrusted_kinds: [firecracker]", &untrusted),
        ]);
        let config = Config::from_yaml_str(&text).expect("every real kind is a valid default");
        let default: ProviderKind = config.routing().default_kind().expect("set").into();
        assert_eq!(default, kind.get());
        assert_eq!(config.routing().untrusted_kinds(), [kind]);
    }
    // A tidy check: in the raw schema, every field whose name mentions a kind
    // has a type built on ConfigKind, and ProviderKind is never read directly.
    let raw = include_str!("../src/raw.rs");
    let mut kind_fields = 0;
    for line in raw.lines().map(str::trim) {
        let Some(field) = line.strip_prefix("pub(crate) ") else {
            continue;
        };
        let Some((name, ty)) = field.split_once(':') else {
            continue;
        };
        if name.contains("kind") {
            kind_fields += 1;
            assert!(
                ty.contains("ConfigKind"),
                "field {name} is not a ConfigKind: {ty}"
            );
        }
        assert!(
            !ty.contains("ProviderKind"),
            "field {name} reads ProviderKind directly"
        );
    }
    assert_eq!(
        kind_fields, 4,
        "kind, default_kind, untrusted_kinds, fallback_kind"
    );
}

// F1: kinds are read with whitespace trimmed and case folded, like the refusal.
#[test]
fn f1_real_kinds_are_read_in_any_case() {
    let text = edit("kind: tart", "kind: ' Tart '");
    let config = Config::from_yaml_str(&text).expect("a kind in another case is still a kind");
    assert_eq!(config.providers()[1].kind(), ProviderKind::Tart);
}
