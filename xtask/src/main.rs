//! `cargo xtask`: the workspace's own tasks. The work is in the `xtask` library;
//! this binary only reads the command line.
//!
//! * `cargo xtask ci`: every check and test, in order; the first failure stops the run.
//! * `cargo xtask deps [--manifest-path PATH]`: no production crate depends on
//!   `billet-simulated`. Exit code 0 when the rule holds, 1 when it is broken,
//!   2 when the check could not run (see `xtask::deps`).
//! * `cargo xtask mutants [--ci] [--package NAME]... [-- ARGS]`: mutation testing as
//!   a gate: fails on any missed mutant or timeout (see `xtask::mutants`).

use std::path::PathBuf;
use std::process::ExitCode;

use xtask::{ci, deps, mutants};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(),
        Some("deps") => match deps_manifest_path(&args[1..]) {
            Ok(Some(DepsArgs::Help)) => {
                eprintln!("{DEPS_USAGE}");
                ExitCode::SUCCESS
            }
            Ok(Some(DepsArgs::ManifestPath(path))) => deps::run(Some(&path)),
            Ok(None) => deps::run(None),
            Err(message) => {
                eprintln!("error: {message}\n\n{DEPS_USAGE}");
                ExitCode::from(deps::EXIT_ERROR)
            }
        },
        Some("mutants") => match args.get(1).map(String::as_str) {
            Some("help" | "--help" | "-h") => {
                eprintln!("{}", mutants::USAGE);
                ExitCode::SUCCESS
            }
            _ => mutants::run(&args[1..]),
        },
        Some("help" | "--help" | "-h") | None => {
            eprintln!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("error: unknown task {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// What `cargo xtask deps` was asked, beyond the default workspace.
enum DepsArgs {
    Help,
    ManifestPath(PathBuf),
}

/// Reads the arguments after `deps`: `--manifest-path PATH`, `--manifest-path=PATH`,
/// or `--help`.
fn deps_manifest_path(args: &[String]) -> Result<Option<DepsArgs>, String> {
    let mut manifest_path = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let path = match arg.as_str() {
            "-h" | "--help" => return Ok(Some(DepsArgs::Help)),
            "--manifest-path" => rest.next().ok_or("`--manifest-path` needs a path")?.clone(),
            other => match other.strip_prefix("--manifest-path=") {
                Some(path) => path.to_owned(),
                None => return Err(format!("unexpected argument {other:?}")),
            },
        };
        if path.is_empty() {
            return Err("`--manifest-path` needs a path".to_owned());
        }
        if manifest_path.replace(PathBuf::from(path)).is_some() {
            return Err("`--manifest-path` given twice".to_owned());
        }
    }
    Ok(manifest_path.map(DepsArgs::ManifestPath))
}

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  ci      run every check and test: fmt, clippy, deps, tests, docs, cargo-deny
  deps    check that no production crate depends on billet-simulated
  mutants mutation testing as a gate: fails on any missed mutant or timeout";

const DEPS_USAGE: &str = "usage: cargo xtask deps [--manifest-path PATH]

Fails (exit 1) when a workspace crate not marked `[package.metadata.billet]
test-only = true` reaches billet-simulated through normal or build dependencies,
or when a test-only crate is publishable; prints every offending chain.
Exit 2 when the check cannot run. PATH: a Cargo.toml, or a directory holding one
(default: the workspace of the current directory).";
