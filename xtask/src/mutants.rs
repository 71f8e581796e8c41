//! `cargo xtask mutants`: mutation testing as a gate.
//!
//! Runs [cargo-mutants](https://mutants.rs) ([`CARGO_MUTANTS_VERSION`], pinned:
//! `.ci/run` installs exactly it) over the covered crates, each mutant tested by
//! its own crate's tests (and, for the crates in [`TESTED_ALSO_BY`], by the
//! tests of the crates that exercise them), and fails on any mutant the tests
//! miss or that makes them time out. Mutants that no test could tell apart from the real code
//! (equivalent mutants) are excluded in `.cargo/mutants.toml`, each with the
//! reason.
//!
//! # Usage
//!
//! ```text
//! cargo xtask mutants [--ci] [--package NAME]... [-- CARGO-MUTANTS-ARGS...]
//! ```
//!
//! * With no option: every crate in [`COVERED`] that is in the workspace.
//! * `--ci`: what `cargo xtask ci` runs on every CI run: the crates in
//!   [`CI_COVERED`], built in place (`--in-place`: CI's clone is disposable, and
//!   the build the `test` step left behind is reused).
//!
//! Every run sets `PROPTEST_CASES` to [`PROPTEST_CASES`] unless the caller's
//! environment already sets it: each property still runs for every mutant, on
//! fewer cases, so a mutant costs seconds rather than minutes. Every run
//! builds incrementally ([`INCREMENTAL`]).
//! * `--package NAME` (repeatable): only these crates (each must be in
//!   [`COVERED`]).
//! * Anything after `--` goes to cargo-mutants unchanged (`--file`, `--re`,
//!   `--list`, ...).
//!
//! The crates without extra test packages run as one cargo-mutants run
//! (report under `target/mutants/`); each crate in [`TESTED_ALSO_BY`] runs on
//! its own (report under `target/mutants/<crate>/`), built with the
//! [`MUTANTS_PROFILE`] profile and testing only lib and integration-test
//! targets (no doctests).
//!
//! At the end it prints, per crate, the mutants caught, unviable, missed and
//! timed out, read from each run's `outcomes.json`. Exit code `0` when nothing was missed and nothing timed
//! out, `1` otherwise, `2` when the run could not start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The cargo-mutants release the gate is measured with. `.ci/run` installs it
/// with `cargo install --locked cargo-mutants@<this>`.
pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";

/// Every crate the gate covers, in the order they run. A crate not (yet) in
/// the workspace is skipped with a note. `billet-scheduler`'s mutants are
/// judged by its own tests: the core's clause and property tests drive it
/// with no provider, so no other crate's tests are needed.
pub const COVERED: &[&str] = &[
    "billet-provider",
    "billet-clock",
    "billet-simulated",
    "billet-config",
    "billet-github",
    "billet-conformance",
    "billet-scheduler",
    "billet",
];

/// Crates the gate covers in part: only these files, judged only by these
/// test targets (`cargo test` arguments). `billet`'s are the service's
/// decision code (the engine, the writer, the job table and its pages, the
/// archive of ended jobs, the GitHub intake, the status page's sessions and
/// charts and the counts they draw), judged by its in-process tests over the
/// simulated backend; the HTTP glue, the HTML, the CLI and the docker-backed
/// tests are not.
pub const ONLY: &[Only] = &[Only {
    package: "billet",
    files: &[
        "crates/billet/src/engine.rs",
        "crates/billet/src/engine/hooks.rs",
        "crates/billet/src/engine/intake.rs",
        "crates/billet/src/engine/keys.rs",
        "crates/billet/src/engine/shared.rs",
        "crates/billet/src/commit.rs",
        "crates/billet/src/record.rs",
        "crates/billet/src/jobs.rs",
        "crates/billet/src/jobs/page.rs",
        "crates/billet/src/store/archive.rs",
        "crates/billet/src/output.rs",
        "crates/billet/src/output/capture.rs",
        "crates/billet/src/output/capturing.rs",
        "crates/billet/src/output/serving.rs",
        "crates/billet/src/output/tests.rs",
        "crates/billet/src/metrics.rs",
        "crates/billet/src/github/demand.rs",
        "crates/billet/src/github/take.rs",
        "crates/billet/src/github/webhook.rs",
        "crates/billet/src/github/deliveries.rs",
        "crates/billet/src/github/intake.rs",
        "crates/billet/src/github/intake/kept.rs",
        "crates/billet/src/github/intake/reconcile.rs",
        "crates/billet/src/github/intake/watch.rs",
        "crates/billet/src/github/registering.rs",
        "crates/billet/src/github/wiring.rs",
        "crates/billet/src/history.rs",
        "crates/billet/src/http/page/session.rs",
        "crates/billet/src/http/page/chart.rs",
    ],
    tests: &[
        "--lib",
        "--test=service",
        "--test=ordering",
        "--test=retention",
        "--test=limits",
        "--test=quiescence",
        "--test=disk",
        "--test=github_webhook",
        "--test=github_intake",
        "--test=status_page",
    ],
}];

/// One crate of [`ONLY`].
#[derive(Debug, PartialEq, Eq)]
pub struct Only {
    /// The crate.
    pub package: &'static str,
    /// Its files under the gate.
    pub files: &'static [&'static str],
    /// The test targets that judge them.
    pub tests: &'static [&'static str],
}

/// The crates `cargo xtask mutants --ci` covers: the two smallest core crates
/// and GitHub's side of the intake (G2-G4's checks), whose full runs take
/// about nine minutes together in CI (548 s on 2026-12-08, built
/// incrementally) and so fit the CI budget. The
/// others take longer than a CI run allows (see CONTRIBUTING.md for the measured
/// times); `cargo xtask mutants` runs them.
pub const CI_COVERED: &[&str] = &["billet-provider", "billet-clock", "billet-github"];

/// Crates whose mutants are tested by other crates' tests as well as their
/// own, and by which (the crate itself first). `billet-conformance` is the
/// contract suite: its model, driver and shrinking are exercised by the
/// backends that run it, chiefly `billet-simulated`'s tests that run the suite
/// against deliberately wrong providers, so its mutants are judged by those
/// tests too.
pub const TESTED_ALSO_BY: &[(&str, &[&str])] = &[(
    "billet-conformance",
    &["billet-conformance", "billet-simulated"],
)];

/// The cargo profile (defined in the root `Cargo.toml`) the runs of
/// [`TESTED_ALSO_BY`] crates build with: the test profile without debug info,
/// so each mutant links its test binaries faster.
pub const MUTANTS_PROFILE: &str = "mutants";

/// `PROPTEST_CASES` inside a run, unless the environment sets it: every
/// property still runs, on fewer cases, so a mutant costs seconds rather than
/// minutes. `cargo test` keeps the full count.
pub const PROPTEST_CASES: &str = "32";

/// `CARGO_INCREMENTAL` inside a run, even where the caller turned it off
/// (`.ci/run` does, for the one clean build of every other step): each
/// mutant changes one function of a crate built just before, and
/// incremental compilation rebuilds only what that change reaches. Measured
/// on billet-github's mutants (a quarter of them, in place): 4.1 s of build
/// per mutant without, 2.4 s with (BENCHMARKS.md, "CI's time").
pub const INCREMENTAL: &str = "1";

/// Seconds a mutant's tests may run before it counts as a timeout (a failure
/// of the gate). Tests that could hang on a broken clock carry their own
/// real-time watchdog of a few seconds, so a hang is a caught mutant well
/// before this.
pub const TEST_TIMEOUT_SECS: &str = "120";

/// What one `cargo xtask mutants` run was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `--ci`: the CI subset, in place, with fewer proptest cases.
    pub ci: bool,
    /// `--package` names, in the order given; empty means the default set.
    pub packages: Vec<String>,
    /// Arguments after `--`, passed to cargo-mutants unchanged.
    pub passthrough: Vec<String>,
}

/// Reads the arguments after `mutants`.
pub fn parse_args(args: &[String]) -> Result<Request, String> {
    let mut request = Request {
        ci: false,
        packages: Vec::new(),
        passthrough: Vec::new(),
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--ci" => request.ci = true,
            "--package" | "-p" => {
                let name = rest.next().ok_or("`--package` needs a crate name")?;
                request.packages.push(covered_name(name)?);
            }
            "--" => {
                request.passthrough = rest.cloned().collect();
                break;
            }
            other => match other.strip_prefix("--package=") {
                Some(name) => request.packages.push(covered_name(name)?),
                None => return Err(format!("unexpected argument {other:?}")),
            },
        }
    }
    if request.ci && !request.packages.is_empty() {
        return Err("`--ci` chooses its own crates: give `--ci` or `--package`, not both".into());
    }
    Ok(request)
}

/// `name`, if the gate covers it.
fn covered_name(name: &str) -> Result<String, String> {
    if COVERED.contains(&name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "{name:?} is not a crate the gate covers (covered: {})",
            COVERED.join(", ")
        ))
    }
}

/// The crates to mutate: those asked for (or the default set) that are in the
/// workspace, in [`COVERED`] order, and those left out because they are not.
pub fn select<'a>(request: &'a Request, members: &[String]) -> (Vec<&'a str>, Vec<&'a str>) {
    let wanted: Vec<&str> = if request.ci {
        CI_COVERED.to_vec()
    } else if request.packages.is_empty() {
        COVERED.to_vec()
    } else {
        COVERED
            .iter()
            .copied()
            .filter(|name| request.packages.iter().any(|p| p == name))
            .collect()
    };
    wanted
        .into_iter()
        .partition(|name| members.iter().any(|member| member == name))
}

/// One cargo-mutants run of a `cargo xtask mutants` invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run<'a> {
    /// The crates whose mutants this run tests.
    pub packages: Vec<&'a str>,
    /// The crates whose tests judge every mutant (`--test-package`); empty
    /// means each mutant's own crate's tests.
    pub test_packages: &'a [&'a str],
    /// Where cargo-mutants writes its `mutants.out` report.
    pub output: PathBuf,
    /// For a crate of [`ONLY`]: its files and test targets.
    pub only: Option<&'a Only>,
}

/// The runs for `packages`, in order: first one run over every crate that is
/// tested by its own tests only, reporting under `output`; then one run per
/// crate in [`TESTED_ALSO_BY`], reporting under `output/<crate>`.
pub fn plan<'a>(packages: &[&'a str], output: &Path) -> Vec<Run<'a>> {
    let also = |name: &str| {
        TESTED_ALSO_BY
            .iter()
            .find(|(crate_name, _)| *crate_name == name)
            .map(|(_, by)| *by)
    };
    let only = |name: &str| ONLY.iter().find(|only| only.package == name);
    let own: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|name| also(name).is_none() && only(name).is_none())
        .collect();
    let mut runs = Vec::new();
    if !own.is_empty() {
        runs.push(Run {
            packages: own,
            test_packages: &[],
            output: output.to_owned(),
            only: None,
        });
    }
    for name in packages {
        if let Some(by) = also(name) {
            runs.push(Run {
                packages: vec![*name],
                test_packages: by,
                output: output.join(name),
                only: None,
            });
        }
    }
    for name in packages {
        if let Some(only) = only(name) {
            runs.push(Run {
                packages: vec![*name],
                test_packages: &[],
                output: output.join(name),
                only: Some(only),
            });
        }
    }
    runs
}

/// The cargo-mutants arguments (after `cargo`) for one run.
pub fn mutants_args(request: &Request, run: &Run<'_>) -> Vec<String> {
    let mut args: Vec<String> = vec!["mutants".into()];
    for package in &run.packages {
        args.push("--package".into());
        args.push((*package).into());
    }
    for package in run.test_packages {
        args.push("--test-package".into());
        args.push((*package).into());
    }
    if !run.test_packages.is_empty() {
        // Every mutant rebuilds the test binaries of several crates: without
        // debug info they link faster. Doctests are left out: they are
        // compiled afresh for every mutant, and the suite's are examples.
        args.extend(["--profile", MUTANTS_PROFILE, "--cargo-test-arg=--tests"].map(String::from));
    }
    if let Some(only) = run.only {
        args.extend(["--profile", MUTANTS_PROFILE].map(String::from));
        for file in only.files {
            args.push("--file".into());
            args.push((*file).into());
        }
        for test in only.tests {
            args.push(format!("--cargo-test-arg={test}"));
        }
    }
    // One job (cargo-mutants' default; `--in-place` allows no other): the
    // machine's cores go to each mutant's own build and tests.
    args.extend(["--timeout", TEST_TIMEOUT_SECS, "--no-shuffle", "--output"].map(String::from));
    args.push(run.output.display().to_string());
    if request.ci {
        args.push("--in-place".into());
    }
    args.extend(request.passthrough.iter().cloned());
    args
}

/// One crate's line of the score.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Score {
    /// Mutants the tests caught.
    pub caught: usize,
    /// Mutants that did not build.
    pub unviable: usize,
    /// Mutants the tests did not catch.
    pub missed: usize,
    /// Mutants whose tests ran past the timeout.
    pub timeout: usize,
    /// Seconds spent building and testing this crate's mutants.
    pub seconds: f64,
}

/// The score per crate, from the text of cargo-mutants' `outcomes.json`.
///
/// Each outcome is `{"scenario": "Baseline" | {"Mutant": {"package": ...}},
/// "summary": "CaughtMutant" | "MissedMutant" | "Unviable" | "Timeout" | ...,
/// "phase_results": [{"duration": seconds}, ...]}`.
pub fn score(outcomes_json: &str) -> Result<BTreeMap<String, Score>, String> {
    let value: serde_json::Value =
        serde_json::from_str(outcomes_json).map_err(|err| format!("not JSON: {err}"))?;
    let outcomes = value
        .get("outcomes")
        .and_then(serde_json::Value::as_array)
        .ok_or("no `outcomes` list")?;
    let mut scores: BTreeMap<String, Score> = BTreeMap::new();
    for outcome in outcomes {
        let Some(mutant) = outcome.get("scenario").and_then(|s| s.get("Mutant")) else {
            continue;
        };
        let package = mutant
            .get("package")
            .and_then(serde_json::Value::as_str)
            .ok_or("a mutant without a `package`")?;
        let score = scores.entry(package.to_owned()).or_default();
        match outcome.get("summary").and_then(serde_json::Value::as_str) {
            Some("CaughtMutant") => score.caught += 1,
            Some("Unviable") => score.unviable += 1,
            Some("MissedMutant") => score.missed += 1,
            Some("Timeout") => score.timeout += 1,
            other => return Err(format!("a mutant of {package} with summary {other:?}")),
        }
        score.seconds += outcome
            .get("phase_results")
            .and_then(serde_json::Value::as_array)
            .map_or(0.0, |phases| {
                phases
                    .iter()
                    .filter_map(|phase| phase.get("duration").and_then(serde_json::Value::as_f64))
                    .sum()
            });
    }
    Ok(scores)
}

/// Runs `cargo xtask mutants` with the arguments after `mutants`.
pub fn run(args: &[String]) -> ExitCode {
    match parse_args(args) {
        Ok(request) => run_request(&request),
        Err(message) => {
            eprintln!("error: {message}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Runs the gate as asked.
pub fn run_request(request: &Request) -> ExitCode {
    let root = crate::workspace::root();
    let cargo = crate::workspace::cargo();
    if let Err(message) = check_version(&cargo) {
        eprintln!("xtask mutants: {message}");
        return ExitCode::from(2);
    }
    let members = match workspace_members(&root) {
        Ok(members) => members,
        Err(message) => {
            eprintln!("xtask mutants: {message}");
            return ExitCode::from(2);
        }
    };
    let (packages, absent) = select(request, &members);
    for name in &absent {
        println!("mutants: {name} is not in this workspace yet: not covered");
    }
    if packages.is_empty() {
        eprintln!("xtask mutants: no covered crate is in this workspace");
        return ExitCode::from(2);
    }
    let started = std::time::Instant::now();
    let mut gate_failed = false;
    // Reports go under the workspace's own `target/`, which does not exist
    // when the build goes elsewhere (`CARGO_TARGET_DIR`): make it.
    let reports = root.join("target").join("mutants");
    if let Err(err) = std::fs::create_dir_all(&reports) {
        eprintln!("xtask mutants: cannot create {}: {err}", reports.display());
        return ExitCode::from(2);
    }
    for run in plan(&packages, &reports) {
        gate_failed |= !run_one(request, &run, &cargo, &root);
    }
    println!(
        "mutants: {} over {} in {:.0}s",
        if gate_failed { "FAILED" } else { "ok" },
        packages.join(", "),
        started.elapsed().as_secs_f64()
    );
    if gate_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The environment every cargo-mutants run gets: [`PROPTEST_CASES`] unless
/// the caller's environment sets it (`proptest_set`), and incremental builds
/// ([`INCREMENTAL`]) whatever the caller's environment says.
pub fn mutants_env(proptest_set: bool) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![("CARGO_INCREMENTAL", INCREMENTAL)];
    if !proptest_set {
        env.push(("PROPTEST_CASES", PROPTEST_CASES));
    }
    env
}

/// Runs cargo-mutants once and prints its score per crate; answers whether
/// it ran, missed nothing and had no timeout.
fn run_one(request: &Request, run: &Run<'_>, cargo: &str, root: &Path) -> bool {
    let outcomes = run.output.join("mutants.out").join("outcomes.json");
    // A run that tests nothing (`-- --list`) writes no outcomes: never score
    // it with an earlier run's.
    if let Err(err) = std::fs::remove_file(&outcomes)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        eprintln!("xtask mutants: cannot remove {}: {err}", outcomes.display());
        return false;
    }
    let args = mutants_args(request, run);
    let mut command = Command::new(cargo);
    command
        .args(&args)
        .current_dir(root)
        .envs(mutants_env(std::env::var_os("PROPTEST_CASES").is_some()));
    println!("==> cargo {}", args.join(" "));
    let started = std::time::Instant::now();
    let status = command.status();
    let wall = started.elapsed();
    let status = match status {
        Ok(status) => status,
        Err(err) => {
            eprintln!("xtask mutants: could not start cargo-mutants: {err}");
            return false;
        }
    };
    let scores = std::fs::read_to_string(&outcomes)
        .map_err(|err| format!("cannot read {}: {err}", outcomes.display()))
        .and_then(|text| score(&text));
    let mut passed = status.success();
    match scores {
        Ok(scores) => {
            for (package, s) in &scores {
                println!(
                    "mutants: {package}: {} caught, {} unviable, {} missed, {} timeouts ({:.0}s)",
                    s.caught, s.unviable, s.missed, s.timeout, s.seconds
                );
                passed &= s.missed == 0 && s.timeout == 0;
            }
        }
        Err(message) => println!("mutants: no per-crate score: {message}"),
    }
    println!(
        "mutants: {} over {} in {:.0}s (cargo-mutants {status})",
        if passed { "ok" } else { "FAILED" },
        run.packages.join(", "),
        wall.as_secs_f64()
    );
    passed
}

/// Checks that the pinned cargo-mutants is installed.
fn check_version(cargo: &str) -> Result<(), String> {
    let install = format!("cargo install --locked cargo-mutants@{CARGO_MUTANTS_VERSION}");
    let output = Command::new(cargo)
        .args(["mutants", "--version"])
        .output()
        .map_err(|err| format!("could not run cargo-mutants ({err}); install it: {install}"))?;
    let version = String::from_utf8_lossy(&output.stdout);
    let version = version.trim();
    if !output.status.success() {
        return Err(format!(
            "cargo-mutants is not installed; install it: {install}"
        ));
    }
    if version != format!("cargo-mutants {CARGO_MUTANTS_VERSION}") {
        return Err(format!(
            "found {version:?}, but the gate is measured with cargo-mutants \
             {CARGO_MUTANTS_VERSION}; install it: {install}"
        ));
    }
    Ok(())
}

/// The names of the workspace's members.
fn workspace_members(root: &Path) -> Result<Vec<String>, String> {
    let metadata = cargo_metadata::MetadataCommand::new()
        .manifest_path(root.join("Cargo.toml"))
        .no_deps()
        .exec()
        .map_err(|err| format!("cargo metadata failed: {err}"))?;
    Ok(metadata
        .workspace_packages()
        .into_iter()
        .map(|package| package.name.to_string())
        .collect())
}

/// `cargo xtask mutants --help`.
pub const USAGE: &str =
    "usage: cargo xtask mutants [--ci] [--package NAME]... [-- CARGO-MUTANTS-ARGS...]

Mutation testing as a gate: runs the pinned cargo-mutants over the covered crates
(billet-provider, billet-clock, billet-simulated, billet-config, billet-github,
billet-conformance, billet-scheduler, and billet's decision code) and fails on any missed mutant or timeout. Exclusions: .cargo/mutants.toml.
billet-conformance's mutants run on their own, tested by the tests of
billet-conformance and billet-simulated (profile `mutants`, no doctests).

  --ci            the CI subset (billet-provider, billet-clock, billet-github),
                  built in place
  Every run sets PROPTEST_CASES=32 unless the environment sets it, and
  CARGO_INCREMENTAL=1 (each mutant rebuilds only what its change reaches).
  --package NAME  only this covered crate (repeatable)
  -- ARGS         passed to cargo-mutants (e.g. -- --file crates/billet-clock/src/manual.rs)";

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn arguments_choose_the_crates() {
        let members = args(&[
            "billet-provider",
            "billet-clock",
            "billet-simulated",
            "billet-config",
            "billet-scheduler",
            "xtask",
        ]);

        let all = parse_args(&[]).unwrap();
        let (chosen, absent) = select(&all, &members);
        assert_eq!(
            chosen,
            [
                "billet-provider",
                "billet-clock",
                "billet-simulated",
                "billet-config",
                "billet-scheduler",
            ]
        );
        assert_eq!(
            absent,
            ["billet-github", "billet-conformance", "billet"],
            "noted, not an error"
        );

        let ci = parse_args(&args(&["--ci"])).unwrap();
        assert_eq!(select(&ci, &members).0, ["billet-provider", "billet-clock"]);

        let some = parse_args(&args(&[
            "--package=billet-config",
            "-p",
            "billet-clock",
            "--",
            "--file",
            "x.rs",
        ]))
        .unwrap();
        assert_eq!(select(&some, &members).0, ["billet-clock", "billet-config"]);
        assert_eq!(some.passthrough, ["--file", "x.rs"]);

        let scheduler = parse_args(&args(&["--package", "billet-scheduler", "--", "--list"]));
        let scheduler = scheduler.unwrap();
        assert_eq!(select(&scheduler, &members).0, ["billet-scheduler"]);
        assert_eq!(scheduler.passthrough, ["--list"]);

        for bad in [
            &["--package"][..],
            &["--package", "xtask"],
            &["--ci", "--package", "billet-clock"],
            &["--all"],
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad:?}");
        }
    }

    // Mutants build incrementally even under `.ci/run`'s
    // CARGO_INCREMENTAL=0, and the caller's PROPTEST_CASES wins over ours.
    #[test]
    fn every_run_builds_incrementally_with_fewer_proptest_cases() {
        assert_eq!(
            mutants_env(false),
            [
                ("CARGO_INCREMENTAL", "1"),
                ("PROPTEST_CASES", PROPTEST_CASES)
            ]
        );
        assert_eq!(mutants_env(true), [("CARGO_INCREMENTAL", "1")]);
    }

    #[test]
    fn ci_runs_in_place_and_passes_the_rest_on() {
        let ci = parse_args(&args(&["--ci", "--", "--list"])).unwrap();
        let runs = plan(&["billet-clock"], Path::new("/t/m"));
        assert_eq!(runs.len(), 1);
        let argv = mutants_args(&ci, &runs[0]);
        assert_eq!(
            argv,
            args(&[
                "mutants",
                "--package",
                "billet-clock",
                "--timeout",
                TEST_TIMEOUT_SECS,
                "--no-shuffle",
                "--output",
                "/t/m",
                "--in-place",
                "--list",
            ])
        );
        let full = parse_args(&[]).unwrap();
        assert!(
            !mutants_args(&full, &runs[0]).contains(&"--in-place".to_owned()),
            "a developer's tree is never mutated in place"
        );
    }

    // The contract suite's mutants are judged by its own tests and by
    // billet-simulated's (which run the suite against wrong providers), in a
    // run of their own, reported apart; the other crates share one run, each
    // mutant judged by its own crate's tests.
    #[test]
    fn the_suite_is_tested_by_the_backend_that_runs_it() {
        let runs = plan(
            &["billet-provider", "billet-conformance", "billet-config"],
            Path::new("/t/m"),
        );
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].packages, ["billet-provider", "billet-config"]);
        assert!(runs[0].test_packages.is_empty());
        assert_eq!(runs[0].output, Path::new("/t/m"));
        assert_eq!(runs[1].packages, ["billet-conformance"]);
        assert_eq!(runs[1].output, Path::new("/t/m/billet-conformance"));
        let full = parse_args(&args(&["--", "--file", "x.rs"])).unwrap();
        assert_eq!(
            mutants_args(&full, &runs[1]),
            args(&[
                "mutants",
                "--package",
                "billet-conformance",
                "--test-package",
                "billet-conformance",
                "--test-package",
                "billet-simulated",
                "--profile",
                MUTANTS_PROFILE,
                "--cargo-test-arg=--tests",
                "--timeout",
                TEST_TIMEOUT_SECS,
                "--no-shuffle",
                "--output",
                "/t/m/billet-conformance",
                "--file",
                "x.rs",
            ])
        );
        assert!(
            !mutants_args(&full, &runs[0]).contains(&"--profile".to_owned()),
            "the other crates build as they always did"
        );
        assert_eq!(plan(&["billet-conformance"], Path::new("/t/m")).len(), 1);
    }

    // The service is under the gate in part: its decision code only, judged
    // by its in-process tests, in a run of its own built without debug info.
    #[test]
    fn the_service_is_judged_in_part_by_its_in_process_tests() {
        assert!(COVERED.contains(&"billet") && !CI_COVERED.contains(&"billet"));
        let runs = plan(&["billet-config", "billet"], Path::new("/t/m"));
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].packages, ["billet-config"]);
        assert_eq!(runs[0].only, None);
        assert_eq!(runs[1].packages, ["billet"]);
        assert_eq!(runs[1].output, Path::new("/t/m/billet"));
        let none = parse_args(&[]).unwrap();
        let built = mutants_args(&none, &runs[1]);
        let text = built.join(" ");
        assert!(
            text.starts_with(
                "mutants --package billet --profile mutants --file crates/billet/src/engine.rs"
            ),
            "{text}"
        );
        for wanted in [
            "--file crates/billet/src/commit.rs",
            "--file crates/billet/src/jobs/page.rs",
            "--file crates/billet/src/store/archive.rs",
            "--file crates/billet/src/output.rs",
            "--file crates/billet/src/metrics.rs",
            "--cargo-test-arg=--lib",
            "--cargo-test-arg=--test=retention",
            "--output /t/m/billet",
        ] {
            assert!(text.contains(wanted), "{wanted}: {text}");
        }
        for file in ONLY[0].files {
            assert!(
                crate::workspace::root().join(file).is_file(),
                "{file} is not a file of the workspace"
            );
        }
        let ungated = ungated_children(&crate::workspace::root(), ONLY[0].files);
        assert!(
            ungated.is_empty(),
            "code moved out of a gated file into its folder is gated too; add {ungated:?} to ONLY"
        );
    }

    /// The files in the folder of a gated file (`engine.rs` -> `engine/*.rs`)
    /// that are not gated themselves: code split out of a gated file must not
    /// leave the gate by moving.
    fn ungated_children(root: &Path, files: &[&str]) -> Vec<String> {
        let mut ungated = Vec::new();
        for file in files {
            let Some(folder) = file.strip_suffix(".rs") else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let child = format!("{folder}/{name}");
                if name.ends_with(".rs") && !files.contains(&child.as_str()) {
                    ungated.push(child);
                }
            }
        }
        ungated.sort();
        ungated
    }

    #[test]
    fn a_file_split_out_of_a_gated_one_is_caught_when_left_ungated() {
        let root = tempfile::tempdir().unwrap();
        let engine = root.path().join("src/engine");
        std::fs::create_dir_all(&engine).unwrap();
        std::fs::write(root.path().join("src/engine.rs"), "mod hooks;\n").unwrap();
        std::fs::write(engine.join("hooks.rs"), "fn f() {}\n").unwrap();
        assert_eq!(
            ungated_children(root.path(), &["src/engine.rs"]),
            ["src/engine/hooks.rs"]
        );
        assert!(
            ungated_children(root.path(), &["src/engine.rs", "src/engine/hooks.rs"]).is_empty()
        );
    }

    // The scheduler's mutants are judged by its own tests (its core is tested
    // without any provider), in the shared run, and it is too slow for CI.
    #[test]
    fn the_scheduler_is_judged_by_its_own_tests_outside_ci() {
        assert!(COVERED.contains(&"billet-scheduler"));
        assert!(!CI_COVERED.contains(&"billet-scheduler"));
        let runs = plan(&["billet-config", "billet-scheduler"], Path::new("/t/m"));
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].packages, ["billet-config", "billet-scheduler"]);
        assert!(runs[0].test_packages.is_empty());
        let list = parse_args(&args(&["-p", "billet-scheduler", "--", "--list"])).unwrap();
        let runs = plan(&["billet-scheduler"], Path::new("/t/m"));
        assert_eq!(
            mutants_args(&list, &runs[0]),
            args(&[
                "mutants",
                "--package",
                "billet-scheduler",
                "--timeout",
                TEST_TIMEOUT_SECS,
                "--no-shuffle",
                "--output",
                "/t/m",
                "--list",
            ])
        );
    }

    // Every covered crate is a member of this workspace and is named in the
    // usage text: a misspelt name would otherwise be skipped with a note.
    #[test]
    fn every_covered_crate_is_a_member_and_in_the_usage() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let members = workspace_members(&root).expect("cargo metadata runs");
        for name in COVERED.iter().chain(CI_COVERED) {
            assert!(members.iter().any(|m| m == name), "{name} is not a member");
            assert!(USAGE.contains(name), "the usage does not name {name}");
        }
        for (name, by) in TESTED_ALSO_BY {
            assert!(COVERED.contains(name), "{name}");
            assert!(by.iter().all(|b| members.iter().any(|m| m == b)), "{by:?}");
        }
    }

    // The profile the suite's run builds with exists in the workspace
    // manifest, so the run cannot fail on an unknown profile.
    #[test]
    fn the_mutants_profile_is_defined() {
        let manifest =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml"))
                .expect("read the workspace Cargo.toml");
        assert!(
            manifest.contains(&format!("[profile.{MUTANTS_PROFILE}]")),
            "Cargo.toml must define [profile.{MUTANTS_PROFILE}]"
        );
    }

    #[test]
    fn score_counts_each_crate_and_refuses_what_it_cannot_read() {
        let outcomes = r#"{"outcomes": [
            {"scenario": "Baseline", "summary": "Success", "phase_results": [{"duration": 9.0}]},
            {"scenario": {"Mutant": {"package": "a"}}, "summary": "CaughtMutant",
             "phase_results": [{"duration": 1.5}, {"duration": 2.0}]},
            {"scenario": {"Mutant": {"package": "a"}}, "summary": "Unviable",
             "phase_results": [{"duration": 0.5}]},
            {"scenario": {"Mutant": {"package": "b"}}, "summary": "MissedMutant", "phase_results": []},
            {"scenario": {"Mutant": {"package": "b"}}, "summary": "Timeout", "phase_results": []}
        ]}"#;
        let scores = score(outcomes).unwrap();
        assert_eq!(
            scores["a"],
            Score {
                caught: 1,
                unviable: 1,
                missed: 0,
                timeout: 0,
                seconds: 4.0
            }
        );
        assert_eq!((scores["b"].missed, scores["b"].timeout), (1, 1));
        assert_eq!(scores.len(), 2, "the baseline is no crate's score");

        assert!(score("not json").is_err());
        assert!(score("{}").is_err());
        assert!(
            score(r#"{"outcomes": [{"scenario": {"Mutant": {"package": "a"}}, "summary": "Failure"}]}"#)
                .is_err()
        );
    }

    // `.ci/run` installs exactly the cargo-mutants release the gate checks
    // for, so CI never fails on a version it installed itself.
    #[test]
    fn ci_script_installs_the_pinned_release() {
        let script =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/run"))
                .expect("read .ci/run");
        assert!(
            script.contains(&format!(
                "cargo install --locked cargo-mutants@{CARGO_MUTANTS_VERSION}"
            )),
            ".ci/run must install cargo-mutants {CARGO_MUTANTS_VERSION}"
        );
        assert!(script.contains(&format!("\"cargo-mutants {CARGO_MUTANTS_VERSION}\"")));
    }
}
