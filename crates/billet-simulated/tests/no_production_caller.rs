//! X4: this crate proves, from its own tests, that nothing outside a test reaches it.

use std::path::Path;

// X4: the same check as `cargo xtask deps`, over the real workspace: no crate
// that is not marked test-only depends on billet-simulated outside
// [dev-dependencies], and this crate itself is marked test-only.
#[test]
fn x4_no_production_crate_depends_on_billet_simulated() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let report =
        xtask::deps::check(Some(&manifest)).expect("cargo metadata runs over the workspace");
    assert!(report.is_ok(), "{report}");
    assert!(report.members_checked >= 5, "{report}");
}
