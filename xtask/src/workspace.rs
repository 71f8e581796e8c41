//! What every task shares about the workspace it runs in: where its root is
//! and which cargo to run. Its own module, so that the tasks that need it
//! ([`crate::ci`], [`crate::mutants`]) depend on it and not on each other.

use std::path::PathBuf;

/// The workspace root: the parent of this crate's manifest directory.
pub(crate) fn root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}

/// The cargo to run: `$CARGO` (set by cargo for the commands it runs), else
/// `cargo` from `PATH`.
pub(crate) fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}
