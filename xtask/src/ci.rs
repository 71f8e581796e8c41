//! `cargo xtask ci`: every check and test, in order, stopping at the first failure.
//!
//! The steps: `fmt`, `clippy`, `clippy-c5` (the same over billet-clock with its
//! `shuttle` feature), `deps` (the [`crate::deps`] check, run in-process),
//! `test`, `c5` (billet-clock's C5 run under the shuttle checker), `benches`,
//! `doc`, `fetch`, `deny`, `mutants` (`cargo xtask mutants --ci`, see
//! [`crate::mutants`], run in-process).

use std::path::Path;
use std::process::{Command, ExitCode};

use crate::{deps, mutants, workspace};

/// One step of the CI run: a name people read, and what it runs.
struct Step {
    name: &'static str,
    action: Action,
}

/// What a step runs.
enum Action {
    /// A cargo command: its arguments and extra environment.
    Cargo {
        args: &'static [&'static str],
        env: &'static [(&'static str, &'static str)],
    },
    /// [`deps::check`] over the workspace, in this process.
    Deps,
    /// `cargo xtask mutants --ci`, in this process.
    Mutants,
}

const STEPS: &[Step] = &[
    Step {
        name: "fmt",
        action: Action::Cargo {
            args: &["fmt", "--all", "--", "--check"],
            env: &[],
        },
    },
    Step {
        name: "clippy",
        action: Action::Cargo {
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
    },
    Step {
        // billet-clock's checked build and its C5 test compile only with the
        // crate's `shuttle` feature, which the workspace run leaves off.
        name: "clippy-c5",
        action: Action::Cargo {
            args: &[
                "clippy",
                "-p",
                "billet-clock",
                "--features",
                "shuttle",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
            env: &[],
        },
    },
    Step {
        // No production crate depends on billet-simulated (SPEC X1, X2). Cheap, so
        // it runs before the tests.
        name: "deps",
        action: Action::Deps,
    },
    Step {
        name: "test",
        action: Action::Cargo {
            args: &["test", "--workspace"],
            env: &[],
        },
    },
    Step {
        // C5: the manual clock under the shuttle checker (random and PCT
        // schedules, and the broken clocks it must catch). The test needs the
        // crate's `shuttle` feature (`required-features`), so `test --workspace`
        // skips it; about 15 s of a debug build on two cores.
        name: "c5",
        action: Action::Cargo {
            args: &[
                "test",
                "-p",
                "billet-clock",
                "--features",
                "shuttle",
                "--test",
                "c5_shuttle",
            ],
            env: &[],
        },
    },
    Step {
        // Every bench compiles and runs once with tiny inputs; `cargo bench`
        // runs them in full (see BENCHMARKS.md).
        name: "benches",
        action: Action::Cargo {
            args: &["test", "--workspace", "--benches"],
            env: &[],
        },
    },
    Step {
        name: "doc",
        action: Action::Cargo {
            args: &["doc", "--workspace", "--no-deps"],
            env: &[("RUSTDOCFLAGS", "-D warnings")],
        },
    },
    Step {
        // cargo-deny reads the graph for every platform offline, so every
        // platform's packages must be in the local registry cache first.
        name: "fetch",
        action: Action::Cargo {
            args: &["fetch", "--locked"],
            env: &[],
        },
    },
    Step {
        // `-A unused-wrapper`: a ban wrapper (deny.toml) may name a crate that does
        // not depend on the banned one yet; that is allowed, not a finding.
        name: "deny",
        action: Action::Cargo {
            args: &[
                "deny",
                "--offline",
                "check",
                "-A",
                "unused-wrapper",
                "licenses",
                "bans",
                "sources",
            ],
            env: &[],
        },
    },
    Step {
        // Mutation testing of the core crates, last: it is the longest step,
        // and in place it reuses the build the `test` step left behind.
        name: "mutants",
        action: Action::Mutants,
    },
];

/// Runs every step from the workspace root; answers failure at the first step that fails.
pub fn run() -> ExitCode {
    let root = workspace::root();
    let cargo = workspace::cargo();
    for (i, step) in STEPS.iter().enumerate() {
        println!("==> [{}/{}] {}", i + 1, STEPS.len(), step.name);
        let outcome = match &step.action {
            Action::Cargo { args, env } => run_cargo(&cargo, &root, args, env),
            Action::Deps => {
                if deps::run(Some(&root.join("Cargo.toml"))) == ExitCode::SUCCESS {
                    Ok(())
                } else {
                    Err("see above".to_owned())
                }
            }
            Action::Mutants => {
                if mutants::run(&["--ci".to_owned()]) == ExitCode::SUCCESS {
                    Ok(())
                } else {
                    Err("see above".to_owned())
                }
            }
        };
        if let Err(why) = outcome {
            eprintln!("xtask ci: step `{}` failed ({why})", step.name);
            return ExitCode::FAILURE;
        }
    }
    println!("==> ci: all {} steps passed", STEPS.len());
    ExitCode::SUCCESS
}

/// Runs one cargo command in `root`; answers why it failed, if it did.
fn run_cargo(cargo: &str, root: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let status = Command::new(cargo)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .status();
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(status.to_string()),
        Err(err) => Err(format!("could not start cargo: {err}")),
    }
}
