//! `cargo xtask deps` over fixture workspaces (X1, X2, X3): one fixture per way
//! of breaking the rule, and one that keeps it. Each runs the built binary with
//! `deps --manifest-path <fixture>` offline and checks its exit code and every line
//! it prints.

mod support;

use support::{Fixture, SIM, broken, clean, deps, service, xtask_deps};

const FAILED: &str = "deps: FAILED: ";

#[test]
fn x1_a_direct_normal_dependency_is_caught() {
    // X1, X3: a production crate with billet-simulated in [dependencies] fails
    let run = deps(&broken::direct());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-simulated (normal)"]
    );
    assert!(run.summary().starts_with(FAILED), "{}", run.stdout);
}

#[test]
fn x1_a_transitive_dependency_is_caught_with_every_chain() {
    // X1, X3: a chain through another crate fails, and each offending member gets its chain
    let run = deps(&broken::transitive());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        [
            "billet-agent -> billet-simulated (normal)",
            "billet-scheduler -> billet-agent -> billet-simulated (normal, normal)",
        ]
    );
}

#[test]
fn x1_a_build_dependency_is_caught() {
    // X1, X3: [build-dependencies] count
    let run = deps(&broken::build_dependency());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-simulated (build)"]
    );
}

#[test]
fn x1_a_renamed_dependency_is_still_caught() {
    // X1, X3: `sim = { package = "billet-simulated", .. }` is matched by package name
    let run = deps(&broken::renamed());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-simulated (normal)"]
    );
}

#[test]
fn x1_a_target_specific_dependency_is_caught_for_every_platform() {
    // X1, X3: [target.'cfg(..)'.dependencies] count, for the host and for other platforms
    let run = deps(&broken::target_specific());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        [
            "billet-scheduler -> billet-simulated (normal on cfg(unix))",
            "billet-worker -> billet-simulated (normal on cfg(windows))",
        ]
    );
}

#[test]
fn x1_an_optional_dependency_behind_a_feature_is_caught() {
    // X1, X3: optional dependencies count though no feature enables them by default
    let run = deps(&broken::optional());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-simulated (normal)"]
    );
}

#[test]
fn x1_an_edge_both_dev_and_normal_counts_as_normal() {
    // X1, X3: declaring it in [dev-dependencies] too does not excuse [dependencies]
    let run = deps(&broken::dev_and_normal());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-simulated (normal)"]
    );
}

#[test]
fn x1_every_kind_of_one_edge_is_named() {
    // X1: one crate declaring simulated as normal on a platform and as build shows both
    let fixture = Fixture::new().production(
        "billet-scheduler",
        &format!("[target.'cfg(windows)'.dependencies]\n{SIM}\n\n[build-dependencies]\n{SIM}\n"),
    );
    let run = deps(&fixture);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-simulated (normal on cfg(windows) + build)"]
    );
}

#[test]
fn x2_a_production_crate_depending_on_a_test_only_crate_that_leads_to_simulated_fails() {
    // X2, X3: a test-only crate may depend on simulated; a production crate on it may not
    let run = deps(&broken::through_test_only());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-scheduler -> billet-harness -> billet-simulated (normal, normal)"]
    );
}

#[test]
fn x2_the_harness_may_depend_on_the_scheduler_never_the_reverse() {
    // X2, X3: the workspace's own shape: the test-only harness takes simulated and the
    // production scheduler as normal dependencies, and passes; the scheduler taking the
    // harness fails.
    let scheduler = r#"billet-scheduler = { path = "../billet-scheduler", version = "0.1.0" }"#;
    let fixture = Fixture::new()
        .production("billet-scheduler", &format!("[dev-dependencies]\n{SIM}\n"))
        .test_only(
            "billet-harness",
            &format!("[dependencies]\n{SIM}\n{scheduler}\n"),
        );
    let run = deps(&fixture);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        "deps: ok: no production crate depends on billet-simulated (3 workspace crates checked)\n"
    );
    let reverse = deps(&broken::through_test_only());
    assert_eq!(
        reverse.code,
        Some(1),
        "{}{}",
        reverse.stdout,
        reverse.stderr
    );
}

#[test]
fn x2_a_publishable_test_only_crate_fails() {
    // X2, X3: a test-only crate must be `publish = false`
    let run = deps(&broken::publishable_test_only());
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        [
            "billet-harness: marked test-only but publishable: a test-only crate must set \
             `publish = false`"
        ]
    );
}

#[test]
fn x2_a_marker_that_is_not_a_boolean_fails_and_counts_as_production() {
    // X2: `test-only = "yes"` is not a marker; the crate is checked as production
    let fixture = Fixture::new().with_crate(
        "billet-harness",
        &format!(
            "publish = false\n\n[package.metadata.billet]\ntest-only = \"yes\"\n\n\
             [dependencies]\n{SIM}\n"
        ),
    );
    let run = deps(&fixture);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        [
            "billet-harness: `[package.metadata.billet] test-only` must be true or false, \
             found \"yes\"",
            "billet-harness -> billet-simulated (normal)",
        ]
    );
}

#[test]
fn x2_the_simulated_crate_itself_must_be_marked_test_only() {
    // X2: billet-simulated is the first test-only crate and must say so
    let fixture = Fixture::new().with_crate("billet-simulated", "publish = false\n");
    let run = deps(&fixture);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        ["billet-simulated: must itself be marked `[package.metadata.billet] test-only = true`"]
    );
}

#[test]
fn x3_the_clean_fixture_passes() {
    // X3: simulated as a dev-dependency, and a test-only crate depending on it normally, pass
    let run = deps(&clean());
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stdout,
        "deps: ok: no production crate depends on billet-simulated (4 workspace crates checked)\n"
    );
}

#[test]
fn x1_a_missing_manifest_is_an_error_not_a_verdict() {
    // X1: exit 2 (could not check) is distinct from exit 1 (rule broken)
    let run = xtask_deps(&["--manifest-path", "/nonexistent/billet/Cargo.toml"]);
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr
            .contains("xtask deps: error: no Cargo.toml at /nonexistent/billet/Cargo.toml"),
        "{}",
        run.stderr
    );
}

#[test]
fn x1_a_broken_manifest_is_an_error_not_a_verdict() {
    // X1: cargo metadata failing is reported with cargo's reason, exit 2
    let fixture = Fixture::new().with_crate("billet-scheduler", "[dependencies\n");
    let run = deps(&fixture);
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("xtask deps: error: could not read the dependency graph"),
        "{}",
        run.stderr
    );
}

#[test]
fn x1_bad_arguments_are_refused_with_usage() {
    // X1: an argument the task does not know is an error (exit 2), never ignored
    for args in [
        &["--manifest-pth", "x"][..],
        &["--manifest-path"][..],
        &["--manifest-path=a", "--manifest-path=b"][..],
    ] {
        let run = xtask_deps(args);
        assert_eq!(run.code, Some(2), "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("usage: cargo xtask deps"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn x1_a_directory_is_taken_as_its_cargo_toml() {
    // X1: `--manifest-path` may name the workspace directory
    let fixture = broken::direct();
    let dir = fixture.manifest().parent().map(ToOwned::to_owned);
    let dir = dir.expect("the manifest has a directory");
    let run = xtask_deps(&["--manifest-path", dir.to_str().expect("UTF-8")]);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
}

#[test]
fn x1_the_library_answers_the_same_report() {
    // X1 (and the API X4 uses): `check` answers chains as data, and Display is the CLI output
    let fixture = broken::through_test_only();
    let report = xtask::deps::check(Some(&fixture.manifest())).expect("the check runs");
    assert!(!report.is_ok());
    assert_eq!(report.members_checked, 3);
    let chains: Vec<_> = report.chains().collect();
    assert_eq!(chains.len(), 1);
    assert_eq!(chains[0].member(), "billet-scheduler");
    assert_eq!(
        chains[0].crates,
        ["billet-scheduler", "billet-harness", "billet-simulated"]
    );
    assert_eq!(chains[0].hops, ["normal", "normal"]);
    assert_eq!(deps(&fixture).stdout, format!("{report}\n"));

    let clean = clean();
    let report = xtask::deps::check(Some(&clean.manifest())).expect("the check runs");
    assert!(report.is_ok(), "{report}");
}

#[test]
fn x1_a_member_with_too_many_chains_lists_a_bounded_number_and_says_so() {
    // X1: every chain is printed up to a bound per member; past it a line says more were left out
    let layers = 7; // 2^7 = 128 chains from the top, more than the bound of 100
    let deps_on = |layer: usize| {
        if layer == layers {
            format!("[dependencies]\n{SIM}\n")
        } else {
            format!(
                "[dependencies]\n\
                 layer{layer}-a = {{ path = \"../layer{layer}-a\", version = \"0.1.0\" }}\n\
                 layer{layer}-b = {{ path = \"../layer{layer}-b\", version = \"0.1.0\" }}\n"
            )
        }
    };
    let mut fixture = Fixture::new().production("billet-scheduler", &deps_on(0));
    for layer in 0..layers {
        for side in ["a", "b"] {
            fixture = fixture.production(&format!("layer{layer}-{side}"), &deps_on(layer + 1));
        }
    }
    let run = deps(&fixture);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let listed = run
        .problems()
        .iter()
        .filter(|line| line.starts_with("billet-scheduler -> "))
        .count();
    assert_eq!(listed, xtask::deps::MAX_CHAINS_PER_CRATE);
    assert!(
        run.problems().contains(
            &"billet-scheduler: more chains to billet-simulated left out (first 100 listed)"
        ),
        "{}",
        run.stdout
    );
    // a member below the bound gets all of its chains: 2^6 from the first layer
    let layer0 = run
        .problems()
        .iter()
        .filter(|line| line.starts_with("layer0-a -> "))
        .count();
    assert_eq!(layer0, 64);
}

#[test]
fn x1_the_service_crate_may_test_with_simulated() {
    // X1, L1: the `billet` service takes billet-simulated for its tests and
    // benches only: that passes.
    let run = deps(&service(""));
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert!(run.problems().is_empty(), "{}", run.stdout);
}

#[test]
fn x1_the_service_crate_reaching_simulated_through_the_scheduler_is_caught() {
    // X1, L1: were the scheduler to depend on billet-simulated, the service
    // binary would ship it: both chains are named.
    let run = deps(&service(&format!("[dependencies]\n{SIM}\n")));
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.problems(),
        [
            "billet -> billet-scheduler -> billet-simulated (normal, normal)",
            "billet-scheduler -> billet-simulated (normal)",
        ]
    );
}
