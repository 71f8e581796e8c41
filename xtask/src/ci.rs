//! `cargo xtask ci`: every check and test, in order, stopping at the first failure.
//!
//! The steps: `fmt`, `clippy`, `clippy-c5` (the same over billet-clock with its
//! `shuttle` feature), `deps` (the [`crate::deps`] check, run in-process),
//! `test` (with one long test run beside the rest: [`BESIDE`]), `podman`
//! (the tests that run on a docker daemon, run again on
//! podman's Docker-compatible service: [`podman_socket`]), `c5` (billet-clock's
//! C5 run under the shuttle checker), `benches`,
//! `doc`, `fetch`, `deny`, `mutants` (`cargo xtask mutants --ci`, see
//! [`crate::mutants`], run in-process). Before the first, the cargo tools the
//! steps run are installed at their pinned versions when missing
//! ([`crate::tools`]).

use std::path::Path;
use std::process::{Command, ExitCode};

use crate::{deps, mutants, tools, workspace};

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
    /// The tests that need a docker daemon, on podman's service (D18).
    Podman,
    /// `cargo test --workspace`, with [`BESIDE`] run beside the rest.
    Test,
}

/// A test that runs alone for minutes on one core (its binary's other
/// tests end long before it): the `test` step runs it in a cargo process
/// of its own, beside the rest of the tests (which skip it), so the second
/// core works through the others meanwhile. Its target (the integration
/// test's file stem) and its name. `the_test_beside_is_there` holds it to
/// the file.
pub const BESIDE: (&str, &str) = (
    "github",
    "h14_a_fleet_through_github_survives_lost_and_repeated_deliveries_and_a_crash",
);

/// The three cargo commands of the `test` step: the build of every test,
/// then, at once, [`BESIDE`] alone and every other test.
fn test_commands() -> [Vec<&'static str>; 3] {
    let (target, name) = BESIDE;
    [
        vec!["test", "--workspace", "--no-run"],
        vec![
            "test",
            "--workspace",
            "--test",
            target,
            "--",
            "--exact",
            name,
        ],
        vec!["test", "--workspace", "--", "--skip", name],
    ]
}

/// Where `.ci/run` starts podman's service, and where the `podman` step
/// looks for it unless [`PODMAN_HOST_VAR`] names another socket: podman's
/// own path for its root service (`podman.socket` under systemd).
pub const PODMAN_DEFAULT_SOCKET: &str = "/run/podman/podman.sock";

/// Names the podman service's socket for the `podman` step
/// (`unix:///path`, or a bare path).
pub const PODMAN_HOST_VAR: &str = "BILLET_PODMAN_HOST";

/// Set to `1` (by `.ci/run`): the `podman` step fails rather than skips when
/// no podman socket is there.
pub const PODMAN_REQUIRED_VAR: &str = "BILLET_PODMAN_REQUIRED";

/// The cargo command the `podman` step runs with `DOCKER_HOST` on podman's
/// socket: every test target of the docker backend
/// ([`PODMAN_DOCKER_TARGETS`]: its clauses, the contract suite in both modes,
/// its outages through the socket proxy), and the service's test targets
/// that run on a daemon ([`PODMAN_SERVICE_TARGETS`]). The service's other
/// targets run in process and would only run twice.
///
/// One command over `--workspace`, as the `test` step's: a command that
/// selects packages (`-p billet-docker`) unifies their dependencies'
/// features differently, and cargo built every dependency again (83 s of
/// the step's 311 s in CI). A target name two packages share runs in both;
/// the others of those names run in process in a few seconds.
fn podman_tests() -> Vec<&'static str> {
    let mut args = vec!["test", "--workspace"];
    for target in PODMAN_DOCKER_TARGETS.iter().chain(PODMAN_SERVICE_TARGETS) {
        args.extend(["--test", target]);
    }
    args
}

/// The docker backend's test targets (`crates/billet-docker/tests/NAME.rs`):
/// every one runs in the `podman` step.
/// `the_podman_step_runs_every_daemon_test_of_the_service` holds this list
/// to the files.
const PODMAN_DOCKER_TARGETS: &[&str] = &[
    "clauses",
    "cleanup",
    "confinement",
    "conformance",
    "events",
    "tls",
];

/// The service's test targets (`crates/billet/tests/NAME.rs`) the `podman`
/// step runs: each one that asks for a daemon (`daemon(...)` of the tests'
/// support). `the_podman_step_runs_every_daemon_test_of_the_service` holds
/// this list to the files.
const PODMAN_SERVICE_TARGETS: &[&str] = &[
    "boundary",
    "e2e",
    "github_docker",
    "many_daemons",
    "output",
    "readme",
    "storage",
    "stores",
];

/// The podman socket the `podman` step runs on: `Ok(Some(path))`; `Ok(None)`
/// when there is none and none is required (the step then skips with one
/// line); an error saying what is missing when one is required. `host` is
/// [`PODMAN_HOST_VAR`]'s value, `exists` tells whether a socket is there.
pub fn podman_socket(
    host: Option<&str>,
    required: bool,
    exists: impl Fn(&Path) -> bool,
) -> Result<Option<String>, String> {
    let socket = match host {
        Some(host) if !host.is_empty() => host.strip_prefix("unix://").unwrap_or(host),
        _ => PODMAN_DEFAULT_SOCKET,
    };
    if exists(Path::new(socket)) {
        return Ok(Some(socket.to_owned()));
    }
    if required {
        return Err(format!(
            "{PODMAN_REQUIRED_VAR}=1 but there is no podman socket at {socket} (start `podman system service --time=0 unix://{socket}`, or name another socket in {PODMAN_HOST_VAR})"
        ));
    }
    Ok(None)
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
        // No production crate depends on billet-simulated (X1, X2). Cheap, so
        // it runs before the tests.
        name: "deps",
        action: Action::Deps,
    },
    Step {
        name: "test",
        action: Action::Test,
    },
    Step {
        // D18: the same tests again on podman's Docker-compatible service.
        name: "podman",
        action: Action::Podman,
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
        // runs them in full (see BENCHMARKS.md). `--bench '*'`, not
        // `--benches`: that also runs every library's unit tests again
        // (`bench = true` is a library's default), which the `test` step ran.
        name: "benches",
        action: Action::Cargo {
            args: &["test", "--workspace", "--bench", "*"],
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
    // The cargo tools the steps run, at their pinned versions, before the
    // first step: a machine with only the toolchain needs nothing else here.
    if let Err(why) = tools::ensure(&cargo) {
        eprintln!("xtask ci: {why}");
        return ExitCode::FAILURE;
    }
    let started = std::time::Instant::now();
    for (i, step) in STEPS.iter().enumerate() {
        println!("==> [{}/{}] {}", i + 1, STEPS.len(), step.name);
        let step_started = std::time::Instant::now();
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
            Action::Podman => run_on_podman(&cargo, &root),
            Action::Test => run_tests(&cargo, &root),
        };
        // What the step left on disk: a CI machine's disk is not ours to
        // size, and a build that outgrows it fails far from its cause.
        println!("{}", disk_line(&root.join("target")));
        println!(
            "    time: step `{}` {} s, {} s since the first step",
            step.name,
            step_started.elapsed().as_secs(),
            started.elapsed().as_secs()
        );
        if let Err(why) = outcome {
            eprintln!("xtask ci: step `{}` failed ({why})", step.name);
            return ExitCode::FAILURE;
        }
    }
    println!("==> ci: all {} steps passed", STEPS.len());
    ExitCode::SUCCESS
}

/// The `podman` step: [`podman_tests`] with `DOCKER_HOST` on podman's
/// socket and the docker tests required to run; one line and a pass when
/// there is no socket and none is required.
fn run_on_podman(cargo: &str, root: &Path) -> Result<(), String> {
    let host = std::env::var(PODMAN_HOST_VAR).ok();
    let required = std::env::var(PODMAN_REQUIRED_VAR).is_ok_and(|v| v == "1");
    match podman_socket(host.as_deref(), required, Path::exists)? {
        None => {
            println!(
                "skipped: no podman socket at {PODMAN_DEFAULT_SOCKET} (start `podman system service --time=0 unix://{PODMAN_DEFAULT_SOCKET}` to run the docker tests on podman too, or run `bash .ci/run`)"
            );
            Ok(())
        }
        Some(socket) => {
            let docker_host = format!("unix://{socket}");
            println!("running the docker tests on podman's service at {docker_host}");
            run_cargo(
                cargo,
                root,
                &podman_tests(),
                &[
                    ("DOCKER_HOST", docker_host.as_str()),
                    ("BILLET_DOCKER_REQUIRED", "1"),
                ],
            )
        }
    }
}

/// The `test` step ([`test_commands`]): every test built, then [`BESIDE`]
/// in a cargo process of its own while the other tests run. Its output goes
/// to `target/test-beside.log` (a file, not a pipe no one reads until the
/// rest is done) and is printed after theirs, so the two never interleave.
fn run_tests(cargo: &str, root: &Path) -> Result<(), String> {
    let [build, beside, rest] = test_commands();
    run_cargo(cargo, root, &build, &[])?;
    let (target, name) = BESIDE;
    let log = root.join("target").join("test-beside.log");
    let file = std::fs::File::create(&log)
        .map_err(|err| format!("cannot create {}: {err}", log.display()))?;
    let err_file = file
        .try_clone()
        .map_err(|err| format!("cannot share {}: {err}", log.display()))?;
    println!("running {target}'s {name} beside the other tests (its output follows theirs)");
    let mut held = Command::new(cargo)
        .args(&beside)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stdout(file)
        .stderr(err_file)
        .spawn()
        .map_err(|err| format!("could not start cargo: {err}"))?;
    let rest = run_cargo(cargo, root, &rest, &[]);
    let status = held.wait();
    println!("==> {target}'s {name}, run beside ({}):", log.display());
    print!("{}", std::fs::read_to_string(&log).unwrap_or_default());
    let beside = match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("{name}: {status}")),
        Err(err) => Err(format!("{name}: {err}")),
    };
    rest.and(beside)
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

/// One line on the target directory's size and the space left beside it.
fn disk_line(target: &Path) -> String {
    let free = Command::new("df")
        .args(["-Pk"])
        .arg(target)
        .output()
        .ok()
        .and_then(|out| available_kib(&String::from_utf8_lossy(&out.stdout)));
    let free = free.map_or_else(
        || "free space unknown".to_owned(),
        |kib| format!("{} free", gib(kib.saturating_mul(1024))),
    );
    format!(
        "    disk: target/ holds {}, {free}",
        gib(tree_bytes(target))
    )
}

/// Bytes held by the files under `path` (symbolic links not followed); 0 for
/// a path that is not there. Entries that vanish or cannot be read while it
/// walks are left out: it reports, it never fails.
pub fn tree_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| tree_bytes(&entry.path()))
        .sum()
}

/// The "Available" column (KiB) of `df -Pk`'s one data line.
pub fn available_kib(df_output: &str) -> Option<u64> {
    df_output
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()
}

/// `bytes` in GiB, one decimal.
fn gib(bytes: u64) -> String {
    // Display only: the loss of precision past 2^53 bytes does not matter.
    #[allow(clippy::cast_precision_loss)]
    let gib = bytes as f64 / f64::from(1u32 << 30);
    format!("{gib:.1} GiB")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a test file of the service asks for a docker daemon: it calls
    /// the tests' support `daemon` check.
    fn asks_for_a_daemon(text: &str) -> bool {
        text.contains("!daemon(") || text.contains("support::daemon(")
    }

    /// The test targets (file stems) in `crates/<package>/tests`, sorted.
    fn targets_of(package: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let dir = workspace::root().join("crates").join(package).join("tests");
        let mut targets = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if keep(&text) {
                    targets.push(path.file_stem().unwrap().to_string_lossy().into_owned());
                }
            }
        }
        targets.sort();
        targets
    }

    // D18: the podman step runs every test target of the docker backend and
    // every one of the service's that asks for a daemon, names no target
    // that is not there, and runs them in one command over the workspace
    // (no package selection that would rebuild the dependencies).
    #[test]
    fn the_podman_step_runs_every_daemon_test_of_the_service() {
        assert_eq!(
            targets_of("billet", asks_for_a_daemon),
            PODMAN_SERVICE_TARGETS,
            "the service's daemon tests"
        );
        assert_eq!(
            targets_of("billet-docker", |_| true),
            PODMAN_DOCKER_TARGETS,
            "the docker backend's tests"
        );
        let args = podman_tests();
        assert_eq!(args[..2], ["test", "--workspace"]);
        assert!(!args.contains(&"-p") && !args.contains(&"--package"));
        let named: Vec<&str> = args[2..]
            .chunks(2)
            .map(|pair| {
                assert_eq!(pair[0], "--test");
                pair[1]
            })
            .collect();
        let expected: Vec<&str> = PODMAN_DOCKER_TARGETS
            .iter()
            .chain(PODMAN_SERVICE_TARGETS)
            .copied()
            .collect();
        assert_eq!(named, expected);
    }

    // The test the `test` step runs beside the others is there, by its
    // name, in its target; the rest skip it, and nothing else.
    #[test]
    fn the_test_beside_is_there() {
        let (target, name) = BESIDE;
        let text = std::fs::read_to_string(
            workspace::root()
                .join("crates/billet-harness/tests")
                .join(format!("{target}.rs")),
        )
        .unwrap();
        assert!(
            text.contains(&format!("fn {name}()")),
            "{name} in {target}.rs"
        );
        let [build, beside, rest] = test_commands();
        assert_eq!(build, ["test", "--workspace", "--no-run"]);
        assert_eq!(
            beside,
            [
                "test",
                "--workspace",
                "--test",
                target,
                "--",
                "--exact",
                name
            ]
        );
        assert_eq!(rest, ["test", "--workspace", "--", "--skip", name]);
    }

    #[test]
    fn a_test_file_asks_for_a_daemon_by_the_support_check() {
        assert!(asks_for_a_daemon("    if !daemon(\"x\") {"));
        assert!(asks_for_a_daemon("    if !support::daemon(\"x\") {"));
        assert!(!asks_for_a_daemon(
            "fn l8_json_logs_and_an_absent_daemon() {"
        ));
    }

    #[test]
    fn the_disk_line_counts_every_file_and_reads_df() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![0u8; 1000]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), vec![0u8; 24]).unwrap();
        assert_eq!(tree_bytes(dir.path()), 1024);
        assert_eq!(tree_bytes(&dir.path().join("sub/b")), 24);
        assert_eq!(tree_bytes(&dir.path().join("absent")), 0);

        let df = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                  /dev/vda       263174212 83886080  12582912      88% /\n";
        assert_eq!(available_kib(df), Some(12_582_912));
        assert_eq!(available_kib("Filesystem\n"), None);
        assert_eq!(available_kib(""), None);
        assert_eq!(gib(3 << 29), "1.5 GiB");
    }

    // D18: the podman step runs on the socket it is told, else on podman's
    // own path; skips without one unless required, then fails naming it.
    #[test]
    fn d18_the_podman_step_finds_its_socket_or_says_why_not() {
        let only = |there: &'static str| move |p: &Path| p == Path::new(there);
        assert_eq!(
            podman_socket(None, true, only(PODMAN_DEFAULT_SOCKET)),
            Ok(Some(PODMAN_DEFAULT_SOCKET.to_owned()))
        );
        assert_eq!(
            podman_socket(Some("unix:///tmp/p.sock"), true, only("/tmp/p.sock")),
            Ok(Some("/tmp/p.sock".to_owned()))
        );
        assert_eq!(
            podman_socket(Some("/tmp/p.sock"), false, only("/tmp/p.sock")),
            Ok(Some("/tmp/p.sock".to_owned()))
        );
        assert_eq!(
            podman_socket(Some(""), false, only(PODMAN_DEFAULT_SOCKET)),
            Ok(Some(PODMAN_DEFAULT_SOCKET.to_owned()))
        );
        // Named but absent: the default is not used in its place.
        assert_eq!(
            podman_socket(Some("/tmp/p.sock"), false, only(PODMAN_DEFAULT_SOCKET)),
            Ok(None)
        );
        let err = podman_socket(Some("/tmp/p.sock"), true, |_| false).unwrap_err();
        assert!(
            err.contains("/tmp/p.sock") && err.contains(PODMAN_REQUIRED_VAR),
            "{err}"
        );
        assert_eq!(podman_socket(None, false, |_| false), Ok(None));
    }
}
