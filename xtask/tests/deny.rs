//! The cargo-deny bans of `deny.toml` (X5), verified over the same fixture
//! workspaces as the lint: `cargo deny --offline check bans`, with the workspace's
//! own `deny.toml`, fails on each broken fixture for the banned crate, and passes
//! the clean one. Needs cargo-deny on PATH: without it these tests fail, with
//! instructions, rather than pass unverified.

mod support;

use support::{Fixture, Run, SIM, broken, cargo_deny_bans, clean, deps, service};

/// Builds one fixture workspace.
type MakeFixture = fn() -> Fixture;

/// Asserts that cargo-deny failed because `banned` is banned, not for another reason.
fn assert_banned(name: &str, run: &Run, banned: &str) {
    assert_ne!(
        run.code,
        Some(0),
        "{name}: cargo deny passed\n{}",
        run.stderr
    );
    assert_eq!(run.stdout.trim(), "bans FAILED", "{name}\n{}", run.stderr);
    assert!(
        run.stderr.contains(&format!(
            "error[banned]: crate '{banned} = 0.1.0' is explicitly banned"
        )),
        "{name}: no ban of {banned}\n{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("error[wildcard]"),
        "{name}: a wildcard error muddles the fixture\n{}",
        run.stderr
    );
}

#[test]
fn x5_cargo_deny_bans_simulated_in_every_broken_fixture() {
    // X5: each way of breaking the rule that the lint catches (X1) fails cargo-deny too
    let cases: [(&str, MakeFixture); 7] = [
        ("direct", broken::direct),
        ("transitive", broken::transitive),
        ("build-dependency", broken::build_dependency),
        ("renamed", broken::renamed),
        ("target-specific", broken::target_specific),
        ("optional", broken::optional),
        ("dev-and-normal", broken::dev_and_normal),
    ];
    for (name, fixture) in cases {
        assert_banned(name, &cargo_deny_bans(&fixture()), "billet-simulated");
    }
}

#[test]
fn x5_cargo_deny_bans_the_harness_outside_its_wrappers() {
    // X5: a production crate depending on the test-only harness fails (the harness is banned too)
    let run = cargo_deny_bans(&broken::through_test_only());
    assert_banned("through-test-only", &run, "billet-harness");
}

#[test]
fn x5_cargo_deny_passes_the_clean_fixture() {
    // X5: dev-dependencies are outside the graph (exclude-dev) and the harness is a wrapper
    let run = cargo_deny_bans(&clean());
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "bans ok", "{}", run.stderr);
}

#[test]
fn x5_what_cargo_deny_cannot_see_the_lint_does() {
    // X5: the gaps written in deny.toml, pinned: cargo-deny knows no test-only marker
    // and no `publish` rule, so a publishable test-only harness passes it; the lint fails it.
    let fixture = broken::publishable_test_only();
    let run = cargo_deny_bans(&fixture);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout.trim(), "bans ok", "{}", run.stderr);
    assert_eq!(deps(&fixture).code, Some(1));
}

#[test]
fn x5_cargo_deny_covers_the_service_crate() {
    // X5, L1: the service binary with billet-simulated in [dev-dependencies]
    // passes; were the scheduler under it to take billet-simulated, it fails.
    let run = cargo_deny_bans(&service(""));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let run = cargo_deny_bans(&service(&format!("[dependencies]\n{SIM}\n")));
    assert_banned("service", &run, "billet-simulated");
}
