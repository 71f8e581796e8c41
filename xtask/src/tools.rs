//! The cargo tools `cargo xtask ci` runs besides cargo itself, at the
//! versions its gates are measured with, and their installation when one is
//! missing (or another version is there), so that `cargo xtask ci` does all
//! of its own set-up on a machine with only the Rust toolchain.
//!
//! System packages and daemons (docker, podman, busybox, curl) are not
//! cargo's to install: `.ci/run` installs and starts them, and without them
//! the docker tests skip with one line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::mutants::CARGO_MUTANTS_VERSION;

/// A cargo subcommand installed from crates.io at a pinned version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    /// The crate, which is also the binary (`cargo-deny`).
    pub krate: &'static str,
    /// The subcommand it adds (`deny` for `cargo deny`).
    pub subcommand: &'static str,
    /// The version the gates are measured with.
    pub version: &'static str,
}

impl Tool {
    /// What `cargo SUBCOMMAND --version` prints for the pinned version.
    pub fn expected(&self) -> String {
        format!("{} {}", self.krate, self.version)
    }

    /// The command that installs it (with [`INSTALL_ENV`] set).
    pub fn install_args(&self) -> Vec<String> {
        vec![
            "install".to_owned(),
            "--locked".to_owned(),
            format!("{}@{}", self.krate, self.version),
        ]
    }
}

/// What every install of a tool runs with: its release profile built
/// without link-time optimization and in parallel codegen units. cargo-deny's
/// own profile asks for fat LTO in one unit, minutes of a two-core machine's
/// CI for a tool that runs for seconds; the tools run the same.
pub const INSTALL_ENV: &[(&str, &str)] = &[
    ("CARGO_PROFILE_RELEASE_LTO", "false"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "16"),
];

/// The shell line that installs `tool` as [`ensure`] does, as `.ci/run`
/// spells it.
pub fn install_line(tool: &Tool) -> String {
    let env: Vec<String> = INSTALL_ENV
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{} cargo {}", env.join(" "), tool.install_args().join(" "))
}

/// The tools `cargo xtask ci` needs: cargo-deny for the `deny` step,
/// cargo-mutants for the `mutants` step (its version is the one
/// [`crate::mutants`] refuses any other than).
pub const TOOLS: &[Tool] = &[
    Tool {
        krate: "cargo-deny",
        subcommand: "deny",
        version: "0.20.2",
    },
    Tool {
        krate: "cargo-mutants",
        subcommand: "mutants",
        version: CARGO_MUTANTS_VERSION,
    },
];

/// Where cargo looks for a subcommand: `PATH`, and `CARGO_HOME/bin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The `PATH` cargo runs with.
    pub path: OsString,
    /// The `CARGO_HOME` cargo runs with.
    pub cargo_home: PathBuf,
}

impl Lookup {
    /// What this process runs with.
    pub fn current() -> Lookup {
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")))
            .unwrap_or_else(|| PathBuf::from(".cargo"));
        Lookup {
            path: std::env::var_os("PATH").unwrap_or_default(),
            cargo_home,
        }
    }
}

/// What `cargo SUBCOMMAND --version` prints (trimmed) when cargo finds the
/// tool with `lookup`, or `None` when it does not.
pub fn installed(cargo: &str, tool: &Tool, lookup: &Lookup) -> Option<String> {
    let output = Command::new(cargo)
        .args([tool.subcommand, "--version"])
        .env("PATH", &lookup.path)
        .env("CARGO_HOME", &lookup.cargo_home)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The tools of `tools` whose pinned version `version_of` does not report.
pub fn missing(tools: &[Tool], version_of: impl Fn(&Tool) -> Option<String>) -> Vec<&Tool> {
    tools
        .iter()
        .filter(|tool| version_of(tool).as_deref() != Some(tool.expected().as_str()))
        .collect()
}

/// Installs every tool of [`TOOLS`] missing for this process, saying so in
/// one line each; an error naming the tool when an install fails.
pub fn ensure(cargo: &str) -> Result<(), String> {
    let lookup = Lookup::current();
    for tool in missing(TOOLS, |tool| installed(cargo, tool, &lookup)) {
        let args = tool.install_args();
        println!(
            "==> installing {} (cargo {}): `cargo xtask ci` runs it and it is not here",
            tool.expected(),
            args.join(" ")
        );
        let status = Command::new(cargo)
            .args(&args)
            .envs(INSTALL_ENV.iter().copied())
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => return Err(format!("installing {} failed: {status}", tool.expected())),
            Err(err) => {
                return Err(format!(
                    "installing {}: could not start cargo: {err}",
                    tool.expected()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cargo() -> String {
        crate::workspace::cargo()
    }

    // Issue 30, point 6: on a PATH and a CARGO_HOME without the tools,
    // cargo finds neither, and both are planned for installation with the
    // pinned versions; where they are (this machine, set up by `.ci/run`),
    // nothing is.
    #[test]
    fn a_path_without_the_tools_plans_their_installation() {
        let empty = tempfile::tempdir().unwrap();
        let bare = Lookup {
            path: empty.path().as_os_str().to_owned(),
            cargo_home: empty.path().to_owned(),
        };
        for tool in TOOLS {
            assert_eq!(installed(&cargo(), tool, &bare), None, "{tool:?}");
        }
        let planned = missing(TOOLS, |tool| installed(&cargo(), tool, &bare));
        assert_eq!(planned, TOOLS.iter().collect::<Vec<_>>());
        let commands: Vec<String> = planned.iter().map(|t| t.install_args().join(" ")).collect();
        assert_eq!(
            commands,
            [
                "install --locked cargo-deny@0.20.2".to_owned(),
                format!("install --locked cargo-mutants@{CARGO_MUTANTS_VERSION}"),
            ]
        );
        // With the tools found at their versions, nothing is installed; at
        // another version, that one is.
        assert!(missing(TOOLS, |tool| Some(tool.expected())).is_empty());
        let other = missing(TOOLS, |tool| {
            Some(if tool.krate == "cargo-deny" {
                "cargo-deny 0.19.0".to_owned()
            } else {
                tool.expected()
            })
        });
        assert_eq!(other, [&TOOLS[0]]);
    }

    // `.ci/run` installs the same versions, so that CI never installs
    // twice, and the same way.
    #[test]
    fn ci_run_installs_the_same_versions() {
        let script = std::fs::read_to_string(crate::workspace::root().join(".ci/run")).unwrap();
        for tool in TOOLS {
            assert!(script.contains(&install_line(tool)), "{tool:?}");
        }
        assert_eq!(
            install_line(&TOOLS[0]),
            "CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo install --locked cargo-deny@0.20.2"
        );
    }
}
