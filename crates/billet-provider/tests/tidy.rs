//! Tidy checks on the contract crate itself, run as ordinary tests so they
//! cannot be skipped.

/// The contract crate's manifest, as written.
const MANIFEST: &str = include_str!("../Cargo.toml");

// P1: the contract crate stays light: its only normal dependencies are
// async-trait, thiserror and futures-core (the `Stream` trait alone, for the
// optional capabilities of P9), so any backend or scheduler can take it
// without pulling in a runtime or a configuration format.
#[test]
fn contract_crate_stays_light() {
    let mut section = String::new();
    let mut deps = Vec::new();
    for line in MANIFEST.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.', ' ']).next().unwrap_or_default();
            deps.push(name.to_owned());
        }
        assert!(
            !section.starts_with("[target."),
            "platform-specific dependencies in the contract crate: {line}"
        );
    }
    deps.sort();
    assert_eq!(deps, ["async-trait", "futures-core", "thiserror"]);
}
