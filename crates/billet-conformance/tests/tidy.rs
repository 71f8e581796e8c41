//! Tidy checks on the conformance crate itself, run as ordinary tests so they
//! cannot be skipped.

/// The conformance crate's manifest, as written.
const MANIFEST: &str = include_str!("../Cargo.toml");

/// The backends of the workspace: crates a backend's tests must be able to run
/// the suite without.
const BACKENDS: &[&str] = &["billet-simulated", "billet-docker"];

/// The normal dependencies a manifest declares, by name, in order; an error
/// names what the crate must not have (platform-specific or build
/// dependencies, which a backend would inherit unseen).
fn normal_dependencies(manifest: &str) -> Result<Vec<String>, String> {
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
            if section.starts_with("[target.") || section.contains("build-dependencies") {
                return Err(format!("the conformance crate declares {section}"));
            }
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            deps.push(name.to_owned());
        } else if let Some(name) = section
            .strip_prefix("[dependencies.")
            .and_then(|rest| rest.strip_suffix(']'))
            && !deps.iter().any(|d| d == name)
        {
            deps.push(name.to_owned());
        }
    }
    Ok(deps)
}

/// Why a manifest breaks H9, if it does: a backend among its normal
/// dependencies (by name or through `package = ...`), or anything but the
/// contract, the clock, proptest, tokio, futures and async-trait.
fn h9_violation(manifest: &str) -> Option<String> {
    let deps = match normal_dependencies(manifest) {
        Ok(deps) => deps,
        Err(why) => return Some(why),
    };
    if let Some(backend) = BACKENDS.iter().find(|backend| {
        deps.iter().any(|d| d == *backend) || manifest.contains(&format!("\"{backend}\""))
    }) {
        return Some(format!(
            "the conformance crate depends on the backend {backend}"
        ));
    }
    let mut sorted = deps;
    sorted.sort();
    let allowed = [
        "async-trait",
        "billet-clock",
        "billet-provider",
        // P9: the capability checks read output and hints as streams.
        "futures",
        "proptest",
        "proptest-state-machine",
        // H12: the concurrent mode's linearizability checker (no dependencies
        // of its own).
        "todc-utils",
        "tokio",
    ];
    (sorted != allowed).then(|| format!("unexpected normal dependencies: {sorted:?}"))
}

// H9: the suite's crate depends on the contract and the clock (and proptest,
// tokio, async-trait) and on no backend, so a backend's [dev-dependencies]
// take it without the simulated one.
#[test]
fn h9_conformance_crate_depends_on_no_backend() {
    assert_eq!(h9_violation(MANIFEST), None);
}

// H9: the check above fails when a backend is among the normal dependencies,
// directly, renamed, as a table or for one platform only.
#[test]
fn h9_check_catches_a_backend_dependency() {
    let base = MANIFEST.to_owned();
    let direct = base.replace(
        "[dependencies]\n",
        "[dependencies]\nbillet-simulated.workspace = true\n",
    );
    let renamed = base.replace(
        "[dependencies]\n",
        "[dependencies]\nsim = { package = \"billet-simulated\", path = \"../billet-simulated\" }\n",
    );
    let table = format!("{base}\n[dependencies.billet-docker]\npath = \"../billet-docker\"\n");
    let platform = format!(
        "{base}\n[target.'cfg(unix)'.dependencies]\nbillet-simulated = {{ path = \"../billet-simulated\" }}\n"
    );
    let build = format!(
        "{base}\n[build-dependencies]\nbillet-simulated = {{ path = \"../billet-simulated\" }}\n"
    );
    for broken in [direct, renamed, table, platform, build] {
        assert!(h9_violation(&broken).is_some(), "not caught:\n{broken}");
    }
    assert_eq!(h9_violation(&base), None);
}

// H9: the crate is a publishable library, not a test-only one: it carries a
// version and no test-only marker, so `cargo xtask deps` holds it to the rule
// that no production crate reaches billet-simulated.
#[test]
fn h9_conformance_crate_is_not_test_only() {
    assert!(
        !MANIFEST.contains("[package.metadata.billet]"),
        "{MANIFEST}"
    );
    assert!(!MANIFEST.contains("publish = false"), "{MANIFEST}");
    assert!(MANIFEST.contains("version = \"0.1.0\""), "{MANIFEST}");
}
