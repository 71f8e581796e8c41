//! Tidy checks on the scheduler crate's place in the dependency graph, run as
//! ordinary tests so they cannot be skipped (B1).
//!
//! The graph is the workspace's as `cargo metadata --all-features` resolves it
//! (every platform, optional dependencies included); an edge counts when it is
//! a normal or build dependency, whatever name the manifest gives it.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use cargo_metadata::{Metadata, MetadataCommand, PackageId};
use serde_json::{Value, json};

/// The crate under test.
const SCHEDULER: &str = "billet-scheduler";

/// The workspace's backends: crates that start (or fabricate) compute.
const BACKENDS: &[&str] = &["billet-docker", "billet-simulated"];

/// Test-only crates named here as well as found by their marker
/// (`[package.metadata.billet] test-only = true`), so that a harness that
/// lost its marker is still refused.
const TEST_ONLY: &[&str] = &["billet-harness"];

/// The only workspace crates the scheduler may reach through normal or build
/// dependencies: the contract, the clock and the configuration.
const ALLOWED: &[&str] = &["billet-provider", "billet-clock", "billet-config"];

/// The real workspace's `cargo metadata --all-features`, as JSON, read once.
fn workspace() -> &'static Value {
    static METADATA: OnceLock<Value> = OnceLock::new();
    METADATA.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let mut command = MetadataCommand::new();
        command
            .manifest_path(manifest)
            .features(cargo_metadata::CargoOpt::AllFeatures);
        let output = command
            .cargo_command()
            .output()
            .expect("run cargo metadata");
        assert!(
            output.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("cargo metadata answers JSON")
    })
}

/// Whether a package's manifest marks it test-only.
fn marked_test_only(metadata: &Value) -> bool {
    metadata["billet"]["test-only"] == Value::Bool(true)
}

/// Every way the scheduler breaks B1 in `graph` (a `cargo metadata` answer):
/// one line per crate it must not reach, with the path that reaches it
/// (`billet-scheduler -> billet-config -> billet-simulated`). Empty when the
/// rule holds.
fn b1_violations(graph: &Value) -> Vec<String> {
    let metadata: Metadata =
        serde_json::from_value(graph.clone()).expect("a cargo metadata answer");
    let name_of = |id: &PackageId| -> String {
        metadata
            .packages
            .iter()
            .find(|p| p.id == *id)
            .map_or_else(|| id.repr.clone(), |p| p.name.to_string())
    };
    let test_only: BTreeSet<&PackageId> = metadata
        .packages
        .iter()
        .filter(|p| marked_test_only(&p.metadata) || TEST_ONLY.contains(&p.name.as_str()))
        .map(|p| &p.id)
        .collect();
    let members: BTreeSet<&PackageId> = metadata.workspace_members.iter().collect();
    // The workspace's one walk of the graph (`xtask deps`): what counts as an
    // edge is said there.
    let Some(reached) = xtask::deps::reached_from(&metadata, SCHEDULER).expect("a resolve graph")
    else {
        return vec![format!("{SCHEDULER} is not a workspace member")];
    };
    let mut violations = Vec::new();
    for xtask::deps::Reached { package, path } in reached {
        let name = name_of(package);
        let why = if BACKENDS.contains(&name.as_str()) {
            "a backend"
        } else if test_only.contains(package) {
            "a test-only crate"
        } else if members.contains(package) && !ALLOWED.contains(&name.as_str()) {
            "a workspace crate other than the contract, the clock and the configuration"
        } else {
            continue;
        };
        violations.push(format!("{} ({name} is {why})", path.join(" -> ")));
    }
    violations.sort();
    violations
}

// B1: the scheduler depends on the contract, the clock and the configuration
// (and well-kept crates), never on a backend (billet-docker,
// billet-simulated) or a test-only crate (billet-harness), by any path of
// normal or build dependencies, on any platform, optional or renamed.
#[test]
fn b1_scheduler_reaches_no_backend_and_no_test_only_crate() {
    assert_eq!(b1_violations(workspace()), Vec::<String>::new());
}

/// `graph` with one more dependency edge, `from -> to`, of `kind` (`None`:
/// normal, else `"build"` or `"dev"`), for `target` (`None`: every platform),
/// declared under a name of its own (as `sim = { package = ".." }` would be).
fn with_edge(
    graph: &Value,
    from: &str,
    to: &str,
    kind: Option<&str>,
    target: Option<&str>,
) -> Value {
    let mut graph = graph.clone();
    let id_of = |graph: &Value, name: &str| {
        graph["packages"]
            .as_array()
            .and_then(|packages| packages.iter().find(|p| p["name"] == name))
            .map(|p| p["id"].clone())
            .unwrap_or_else(|| panic!("no package {name}"))
    };
    let (from_id, to_id) = (id_of(&graph, from), id_of(&graph, to));
    let nodes = graph["resolve"]["nodes"]
        .as_array_mut()
        .expect("resolve nodes");
    let node = nodes
        .iter_mut()
        .find(|node| node["id"] == from_id)
        .unwrap_or_else(|| panic!("no node for {from}"));
    node["dependencies"]
        .as_array_mut()
        .expect("dependencies")
        .push(to_id.clone());
    node["deps"].as_array_mut().expect("deps").push(json!({
        "name": "renamed_dependency",
        "pkg": to_id,
        "dep_kinds": [{ "kind": kind, "target": target }],
    }));
    graph
}

/// `graph` with `name`'s manifest marked test-only.
fn marked(graph: &Value, name: &str) -> Value {
    let mut graph = graph.clone();
    let package = graph["packages"]
        .as_array_mut()
        .and_then(|packages| packages.iter_mut().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no package {name}"));
    package["metadata"] = json!({ "billet": { "test-only": true } });
    graph
}

// B1: the check above fails when the graph is broken: a backend or a
// test-only crate reached directly, through a build script, on one platform
// only, under another name, or through a crate the scheduler may depend on;
// and a workspace crate it has no business with. A dev-dependency is fine.
#[test]
fn b1_check_catches_a_backend_or_test_only_dependency() {
    let real = workspace();
    let cases = [
        (
            with_edge(real, SCHEDULER, "billet-simulated", None, None),
            "billet-scheduler -> billet-simulated (billet-simulated is a backend)",
        ),
        (
            with_edge(real, SCHEDULER, "billet-docker", Some("build"), None),
            "billet-scheduler -> billet-docker (billet-docker is a backend)",
        ),
        (
            with_edge(
                real,
                SCHEDULER,
                "billet-harness",
                None,
                Some("cfg(windows)"),
            ),
            "billet-scheduler -> billet-harness (billet-harness is a test-only crate)",
        ),
        (
            with_edge(real, "billet-config", "billet-simulated", None, None),
            "billet-scheduler -> billet-config -> billet-simulated \
             (billet-simulated is a backend)",
        ),
        (
            marked(real, "billet-clock"),
            "billet-scheduler -> billet-clock (billet-clock is a test-only crate)",
        ),
        (
            with_edge(real, SCHEDULER, "billet-conformance", None, None),
            "billet-scheduler -> billet-conformance (billet-conformance is a workspace \
             crate other than the contract, the clock and the configuration)",
        ),
    ];
    for (graph, expected) in cases {
        let found = b1_violations(&graph);
        assert!(
            found.iter().any(|line| line == expected),
            "not caught: {expected}\nfound: {found:#?}"
        );
    }
    let dev_only = with_edge(real, SCHEDULER, "billet-simulated", Some("dev"), None);
    assert_eq!(b1_violations(&dev_only), Vec::<String>::new());
}

// B1: the scheduler is a production crate: no test-only marker, publishable,
// so `cargo xtask deps` and the bans of deny.toml hold it to the rule that no
// production crate reaches billet-simulated.
#[test]
fn b1_scheduler_is_a_production_crate() {
    let graph = workspace();
    let package = graph["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == SCHEDULER))
        .expect("the scheduler's package");
    assert!(!marked_test_only(&package["metadata"]), "{package:#}");
    assert!(
        package["metadata"]["billet"].is_null(),
        "{}",
        package["metadata"]
    );
    assert_ne!(package["publish"], json!([]), "publish = false");
}
