//! Fixture workspaces for the tests of `cargo xtask deps` and of the cargo-deny bans,
//! and fixture trees of plain files ([`tree`]) for the tidy checks' tests.
//!
//! Each fixture is a small workspace written into a fresh temporary directory: a
//! root `Cargo.toml` whose members are `crates/*`, a fake `billet-simulated` (an
//! empty test-only library), and the crates a test adds. Every dependency is a path
//! dependency, so nothing is downloaded: the tests run offline.

#![allow(dead_code)] // each test crate uses its own part of this module

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

/// A fixture workspace; deleted when dropped.
pub(crate) struct Fixture {
    dir: TempDir,
}

impl Fixture {
    /// A workspace holding only the fake `billet-simulated` (test-only, unpublished).
    pub(crate) fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("billet-deps-fixture-")
            .tempdir()
            .expect("create a temporary directory");
        write(
            &dir.path().join("Cargo.toml"),
            "[workspace]\nresolver = \"3\"\nmembers = [\"crates/*\"]\n",
        );
        let fixture = Self { dir };
        fixture.with_crate(
            "billet-simulated",
            "publish = false\n\n[package.metadata.billet]\ntest-only = true\n",
        )
    }

    /// Adds a production crate (publishable, unmarked); `rest` is everything after
    /// its `[package]` table: dependency tables, features.
    pub(crate) fn production(self, name: &str, rest: &str) -> Self {
        self.with_crate(name, &format!("\n{rest}"))
    }

    /// Adds a test-only crate (`publish = false`, marked); `rest` as for [`Self::production`].
    pub(crate) fn test_only(self, name: &str, rest: &str) -> Self {
        self.with_crate(
            name,
            &format!("publish = false\n\n[package.metadata.billet]\ntest-only = true\n\n{rest}"),
        )
    }

    /// Adds a crate whose manifest is `[package]` (name, version, edition, license)
    /// followed by `tail` verbatim, with an empty library.
    pub(crate) fn with_crate(self, name: &str, tail: &str) -> Self {
        let root = self.dir.path().join("crates").join(name);
        write(
            &root.join("Cargo.toml"),
            &format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\
                 license = \"MIT\"\n{tail}"
            ),
        );
        write(&root.join("src/lib.rs"), "//! A fixture crate.\n");
        self
    }

    /// The fixture's root `Cargo.toml`.
    pub(crate) fn manifest(&self) -> PathBuf {
        self.dir.path().join("Cargo.toml")
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("a file has a parent")).expect("create directories");
    fs::write(path, text).expect("write a fixture file");
}

/// What a command answered.
pub(crate) struct Run {
    /// The exit code (`None` if killed by a signal).
    pub(crate) code: Option<i32>,
    /// Standard output.
    pub(crate) stdout: String,
    /// Standard error.
    pub(crate) stderr: String,
}

impl Run {
    fn from(output: &Output) -> Self {
        Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The lines of standard output before the summary line: one per problem.
    pub(crate) fn problems(&self) -> Vec<&str> {
        let lines: Vec<&str> = self.stdout.lines().collect();
        lines[..lines.len().saturating_sub(1)].to_vec()
    }

    /// The last line of standard output: the summary.
    pub(crate) fn summary(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }
}

/// Runs the built `xtask deps` binary with `args`, offline.
pub(crate) fn xtask_deps(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("deps")
        .args(args)
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .expect("run the xtask binary");
    Run::from(&output)
}

/// Runs `cargo xtask deps --manifest-path <fixture>`.
pub(crate) fn deps(fixture: &Fixture) -> Run {
    let manifest = fixture.manifest();
    xtask_deps(&[
        "--manifest-path",
        manifest.to_str().expect("a UTF-8 temp path"),
    ])
}

/// The workspace's own `deny.toml`.
pub(crate) fn real_deny_toml() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deny.toml")
        .canonicalize()
        .expect("the workspace has a deny.toml")
}

/// Runs `cargo deny --offline check bans` over a fixture with the workspace's own
/// `deny.toml`. Panics with instructions when cargo-deny is not installed: CI
/// installs it, and a bans check that silently did not run would prove nothing.
pub(crate) fn cargo_deny_bans(fixture: &Fixture) -> Run {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let probe = Command::new(&cargo).args(["deny", "--version"]).output();
    match probe {
        Ok(output) if output.status.success() => {}
        _ => panic!(
            "cargo-deny is not installed, so the X5 bans cannot be verified: \
             run `cargo install --locked cargo-deny` (`.ci/run` installs it)"
        ),
    }
    let output = Command::new(&cargo)
        .arg("deny")
        .arg("--offline")
        .arg("--manifest-path")
        .arg(fixture.manifest())
        .arg("--config")
        .arg(real_deny_toml())
        .args(["--color", "never", "check", "-A", "unused-wrapper", "bans"])
        .output()
        .expect("run cargo deny");
    Run::from(&output)
}

/// A dependency on the fixture's simulated crate, as a manifest line.
pub(crate) const SIM: &str =
    r#"billet-simulated = { path = "../billet-simulated", version = "0.1.0" }"#;

/// The service crate's shape: a production crate `billet` over
/// `billet-scheduler` (whose dependency tables are `scheduler_rest`), with
/// billet-simulated among its `[dev-dependencies]` only.
pub(crate) fn service(scheduler_rest: &str) -> Fixture {
    Fixture::new()
        .production("billet-scheduler", scheduler_rest)
        .production(
            "billet",
            &format!(
                "[dependencies]\nbillet-scheduler = {{ path = \"../billet-scheduler\", version = \"0.1.0\" }}\n\n[dev-dependencies]\n{SIM}\n"
            ),
        )
}

/// The fixtures that break the rule, one per way, shared by the lint's tests and
/// the cargo-deny tests. Production crates are publishable and give path
/// dependencies a version, as a real one would (cargo-deny refuses wildcards).
pub(crate) mod broken {
    use super::{Fixture, SIM};

    /// A production crate depends on simulated directly.
    pub(crate) fn direct() -> Fixture {
        Fixture::new().production("billet-scheduler", &format!("[dependencies]\n{SIM}\n"))
    }

    /// A production crate reaches simulated through another production crate.
    pub(crate) fn transitive() -> Fixture {
        Fixture::new()
            .production("billet-agent", &format!("[dependencies]\n{SIM}\n"))
            .production(
                "billet-scheduler",
                "[dependencies]\nbillet-agent = { path = \"../billet-agent\", version = \"0.1.0\" }\n",
            )
    }

    /// A production crate's build script depends on simulated.
    pub(crate) fn build_dependency() -> Fixture {
        Fixture::new().production(
            "billet-scheduler",
            &format!("[build-dependencies]\n{SIM}\n"),
        )
    }

    /// A production crate depends on simulated under another name.
    pub(crate) fn renamed() -> Fixture {
        Fixture::new().production(
            "billet-scheduler",
            "[dependencies]\n\
             sim = { package = \"billet-simulated\", path = \"../billet-simulated\", version = \"0.1.0\" }\n",
        )
    }

    /// Production crates depend on simulated on one platform each: one that is
    /// the host here (unix) and one that is not (windows).
    pub(crate) fn target_specific() -> Fixture {
        Fixture::new()
            .production(
                "billet-scheduler",
                &format!("[target.'cfg(unix)'.dependencies]\n{SIM}\n"),
            )
            .production(
                "billet-worker",
                &format!("[target.'cfg(windows)'.dependencies]\n{SIM}\n"),
            )
    }

    /// A production crate depends on simulated behind a feature no one enables.
    pub(crate) fn optional() -> Fixture {
        Fixture::new().production(
            "billet-scheduler",
            "[dependencies]\n\
             billet-simulated = { path = \"../billet-simulated\", version = \"0.1.0\", optional = true }\n\n\
             [features]\nsimulated = [\"dep:billet-simulated\"]\n",
        )
    }

    /// A production crate declares simulated both as a dev and as a normal dependency.
    pub(crate) fn dev_and_normal() -> Fixture {
        Fixture::new().production(
            "billet-scheduler",
            &format!("[dependencies]\n{SIM}\n\n[dev-dependencies]\n{SIM}\n"),
        )
    }

    /// A production crate depends on a test-only crate that depends on simulated.
    pub(crate) fn through_test_only() -> Fixture {
        Fixture::new()
            .test_only("billet-harness", &format!("[dependencies]\n{SIM}\n"))
            .production(
                "billet-scheduler",
                "[dependencies]\nbillet-harness = { path = \"../billet-harness\", version = \"0.1.0\" }\n",
            )
    }

    /// A crate marked test-only that can be published.
    pub(crate) fn publishable_test_only() -> Fixture {
        Fixture::new().with_crate(
            "billet-harness",
            &format!("\n[package.metadata.billet]\ntest-only = true\n\n[dependencies]\n{SIM}\n"),
        )
    }
}

/// The fixture that keeps the rule: simulated and the harness only as
/// dev-dependencies of production crates, and a test-only harness that depends on
/// simulated normally.
pub(crate) fn clean() -> Fixture {
    Fixture::new()
        .test_only("billet-harness", &format!("[dependencies]\n{SIM}\n"))
        .production(
            "billet-scheduler",
            &format!(
                "[dev-dependencies]\n{SIM}\n\
                 billet-harness = {{ path = \"../billet-harness\" }}\n"
            ),
        )
        .production(
            "billet-agent",
            "[dependencies]\nbillet-scheduler = { path = \"../billet-scheduler\", version = \"0.1.0\" }\n",
        )
}

/// A fresh directory holding `files` (path relative to it, text), folders
/// made as needed; deleted when dropped.
pub(crate) fn tree(files: &[(&str, &str)]) -> TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create the folder");
        fs::write(path, text).expect("write the file");
    }
    dir
}
