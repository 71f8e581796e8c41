//! `cargo xtask ci`: every check and test, in order, stopping at the first failure.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// One step of the CI run: a name people read, and the command it runs.
struct Step {
    name: &'static str,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
}

const STEPS: &[Step] = &[
    Step {
        name: "fmt",
        args: &["fmt", "--all", "--", "--check"],
        env: &[],
    },
    Step {
        name: "clippy",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        env: &[],
    },
    Step {
        name: "test",
        args: &["test", "--workspace"],
        env: &[],
    },
    Step {
        name: "doc",
        args: &["doc", "--workspace", "--no-deps"],
        env: &[("RUSTDOCFLAGS", "-D warnings")],
    },
    Step {
        // cargo-deny reads the graph for every platform offline, so every
        // platform's packages must be in the local registry cache first.
        name: "fetch",
        args: &["fetch", "--locked"],
        env: &[],
    },
    Step {
        name: "deny",
        args: &["deny", "--offline", "check", "licenses", "bans", "sources"],
        env: &[],
    },
];

/// Runs every step from the workspace root; answers failure at the first step that fails.
pub(crate) fn run() -> ExitCode {
    let root = workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for (i, step) in STEPS.iter().enumerate() {
        println!("==> [{}/{}] {}", i + 1, STEPS.len(), step.name);
        let status = Command::new(&cargo)
            .args(step.args)
            .envs(step.env.iter().copied())
            .current_dir(&root)
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("xtask ci: step `{}` failed ({status})", step.name);
                return ExitCode::FAILURE;
            }
            Err(err) => {
                eprintln!(
                    "xtask ci: step `{}` could not start cargo: {err}",
                    step.name
                );
                return ExitCode::FAILURE;
            }
        }
    }
    println!("==> ci: all {} steps passed", STEPS.len());
    ExitCode::SUCCESS
}

/// The workspace root: the parent of this crate's manifest directory.
fn workspace_root() -> PathBuf {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or(manifest_dir)
}
