//! GitHub's side knows nothing of the service: `billet-github` reaches no
//! workspace crate but the contract and the clock, by any path (normal or
//! build, any platform, optional included), walked by `xtask deps`' own walk.

use std::path::Path;

use cargo_metadata::{CargoOpt, Metadata, MetadataCommand};

/// The workspace crates `billet-github` may reach.
const ALLOWED: &[&str] = &["billet-github", "billet-provider", "billet-clock"];

/// Every workspace crate `member` reaches that it may not, with its path.
fn violations(metadata: &Metadata, member: &str) -> Vec<String> {
    let reached = xtask::deps::reached_from(metadata, member)
        .expect("a resolve graph")
        .expect("a workspace member");
    reached
        .into_iter()
        .filter(|reached| metadata.workspace_members.contains(reached.package))
        .filter(|reached| !ALLOWED.contains(&reached.path.last().map_or("", String::as_str)))
        .map(|reached| reached.path.join(" -> "))
        .collect()
}

// The intake's GitHub side reaches only the contract and the clock; the same
// check over a member that reaches the service's crates finds them (the
// harness reaches billet), so it can fail.
#[test]
fn github_side_reaches_only_the_contract_and_the_clock() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let metadata = MetadataCommand::new()
        .manifest_path(manifest)
        .features(CargoOpt::AllFeatures)
        .exec()
        .expect("cargo metadata runs");
    assert_eq!(violations(&metadata, "billet-github"), Vec::<String>::new());
    let harness = violations(&metadata, "billet-harness");
    assert!(
        harness.iter().any(|path| path.ends_with("-> billet")),
        "{harness:?}"
    );
}
