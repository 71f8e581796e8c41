//! `cargo xtask`: the workspace's own tasks.
//!
//! * `cargo xtask ci`: every check and test, in order; the first failure stops the run.

use std::process::ExitCode;

mod ci;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(),
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

const USAGE: &str = "usage: cargo xtask <task>

tasks:
  ci      run every check and test: fmt, clippy, tests, docs, cargo-deny";
