//! Checks that run as ordinary tests: the service is a production crate that
//! reaches neither the simulated backend nor the harness (L1, X1).

use std::path::Path;

use cargo_metadata::{DependencyKind, MetadataCommand};

// L1, X1: `cargo xtask deps` over the real workspace passes, and this crate
// is production: not marked test-only, publishable, and neither
// billet-simulated nor billet-harness is among its normal or build
// dependencies. (That the check fails for a service crate that reaches
// billet-simulated is proven over fixtures in xtask/tests/deps.rs.)
#[test]
fn l1_the_service_is_a_production_crate_that_never_reaches_simulated() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let report = xtask::deps::check(Some(&manifest)).expect("cargo metadata runs");
    assert!(report.is_ok(), "{report}");
    let metadata = MetadataCommand::new()
        .manifest_path(&manifest)
        .no_deps()
        .exec()
        .expect("cargo metadata runs");
    let billet = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "billet")
        .expect("the billet package is a member");
    assert!(
        billet
            .metadata
            .get("billet")
            .and_then(|b| b.get("test-only"))
            .is_none(),
        "billet must not be marked test-only"
    );
    assert_ne!(billet.publish, Some(vec![]), "billet must be publishable");
    for dependency in &billet.dependencies {
        if dependency.kind == DependencyKind::Development {
            continue;
        }
        assert!(
            !["billet-simulated", "billet-harness"].contains(&dependency.name.as_str()),
            "billet depends on {} outside [dev-dependencies]",
            dependency.name
        );
    }
}
