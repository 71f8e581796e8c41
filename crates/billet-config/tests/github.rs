//! G1: the `github:` section, read as written with its defaults, and each
//! thing billet could not use refused at its place (F4).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use billet_config::{
    Config, ConfigError, DEFAULT_API_URL, GithubCredential, GithubSettings, ScopeTarget,
};
use billet_provider::TrustClass;
use common::{EXAMPLE, assert_at, edit, line_of, refuse};

fn github(text: &str) -> GithubSettings {
    Config::from_yaml_str(text)
        .unwrap_or_else(|error| panic!("refused: {error}"))
        .github()
        .expect("a github section")
        .clone()
}

/// Asserts `text` is refused with a `BadGithub` at `path`, on the line of
/// `needle`, saying `says`.
fn assert_bad(text: &str, path: &str, needle: &str, says: &str) {
    let error = refuse(text);
    assert!(matches!(error, ConfigError::BadGithub { .. }), "{error:?}");
    assert_at(&error, path, line_of(text, needle));
    assert!(error.to_string().contains(says), "{error}");
}

// G1: the shipped example's section, read as written.
#[test]
fn g1_the_example_section_is_read_as_written() {
    let settings = github(EXAMPLE);
    assert_eq!(settings.api_url, DEFAULT_API_URL);
    assert_eq!(
        settings.credential,
        GithubCredential::App {
            id: 123_456,
            private_key_file: PathBuf::from("/etc/billet/github-app.private-key.pem"),
            installation_id: Some(7_890_123),
        }
    );
    assert_eq!(
        settings.webhook_secret_file,
        Path::new("/etc/billet/github-webhook-secret")
    );
    assert_eq!(settings.scopes.len(), 2);
    assert_eq!(
        settings.scopes[0].target,
        ScopeTarget::Org {
            name: "example-org".to_owned(),
            runner_group_id: 1
        }
    );
    assert_eq!(settings.scopes[0].trust, TrustClass::Trusted);
    assert_eq!(
        settings.scopes[1].target.describe(),
        "repository friends-of-example/docs"
    );
    assert_eq!(
        settings.scopes[1].trust,
        TrustClass::Untrusted,
        "the default"
    );
    assert_eq!(settings.pools.len(), 1);
    assert_eq!(settings.pools[0].pool, "linux-docker");
    assert_eq!(settings.pools[0].labels, ["self-hosted", "linux", "x64"]);
    assert_eq!(settings.runner.command, ["/home/runner/run.sh"]);
    assert_eq!(settings.runner.idle_timeout, Duration::from_secs(600));
    assert_eq!(settings.reconcile_every, Duration::from_secs(60));

    // Without the section, no intake.
    let cut = EXAMPLE
        .split("\n# GitHub Actions as an intake")
        .next()
        .unwrap();
    assert_eq!(Config::from_yaml_str(cut).unwrap().github(), None);
}

// G1: the defaults, a token, an Enterprise Server's URL, loopback http, and
// relative paths made the file's directory's when loaded from a path.
#[test]
fn g1_defaults_token_and_urls() {
    let minimal = edit(
        "  runner:\n    command: [/home/runner/run.sh]   # the runner image's entry point\n    idle_timeout: 10m\n  reconcile_every: 60s\n",
        "",
    );
    let settings = github(&minimal);
    assert_eq!(settings.runner.command, ["/home/runner/run.sh"]);
    assert_eq!(settings.runner.idle_timeout, Duration::from_secs(600));
    assert_eq!(settings.reconcile_every, Duration::from_secs(60));

    let token = edit(
        "  app:                          # a GitHub App (or `token_file: PATH`)\n    id: 123456\n    private_key_file: /etc/billet/github-app.private-key.pem\n    installation_id: 7890123    # optional: found from a scope when left out\n",
        "  token_file: secrets/token\n",
    );
    assert_eq!(
        github(&token).credential,
        GithubCredential::Token {
            file: PathBuf::from("secrets/token")
        }
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("billet.yaml");
    std::fs::write(&path, &token).unwrap();
    let loaded = Config::load(&path).unwrap();
    assert_eq!(
        loaded.github().unwrap().credential,
        GithubCredential::Token {
            file: dir.path().join("secrets/token")
        }
    );

    for (written, read) in [
        (
            "https://github.example.com/api/v3/",
            "https://github.example.com/api/v3",
        ),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:9/api", "http://localhost:9/api"),
        ("http://[::1]:7/", "http://[::1]:7"),
    ] {
        let text = edit(
            "  # api_url: https://github.example.com/api/v3   # a GitHub Enterprise Server\n",
            &format!("  api_url: {written}\n"),
        );
        assert_eq!(github(&text).api_url, read, "{written}");
    }
}

// G1: a URL billet must not use, each refused at `github.api_url`.
#[test]
fn g1_api_urls_billet_must_not_use_are_refused() {
    for (url, says) in [
        ("http://github.example.com/api/v3", "in the clear"),
        ("http://10.0.0.1/api", "in the clear"),
        ("ftp://github.example.com", "scheme"),
        ("not a url", "not a URL"),
        ("https://user:pass@github.example.com", "credentials"),
        ("https://user@github.example.com", "credentials"),
        ("https://:pass@github.example.com", "credentials"),
        ("https://api.github.com/?x=1", "query"),
    ] {
        let text = edit(
            "  # api_url: https://github.example.com/api/v3   # a GitHub Enterprise Server\n",
            &format!("  api_url: \"{url}\"\n"),
        );
        assert_bad(&text, "github.api_url", "api_url:", says);
    }
}

// G1: one credential, exactly.
#[test]
fn g1_one_credential_exactly() {
    let both = edit(
        "  webhook_secret_file:",
        "  token_file: /etc/billet/token\n  webhook_secret_file:",
    );
    assert_bad(&both, "github.token_file", "  token_file: /etc", "not both");
    let none = edit(
        "  app:                          # a GitHub App (or `token_file: PATH`)\n    id: 123456\n    private_key_file: /etc/billet/github-app.private-key.pem\n    installation_id: 7890123    # optional: found from a scope when left out\n",
        "",
    );
    let error = refuse(&none);
    assert!(matches!(error, ConfigError::BadGithub { .. }), "{error:?}");
    assert_eq!(error.location().path.as_deref(), Some("github"));
    assert!(error.to_string().contains("no credential"), "{error}");
    let blank = edit(
        "    private_key_file: /etc/billet/github-app.private-key.pem",
        "    private_key_file: ' '",
    );
    assert_bad(
        &blank,
        "github.app.private_key_file",
        "private_key_file:",
        "blank",
    );
}

// G1: scopes: one kind each, well-formed names, none twice (case aside), no
// repository inside a named org, a known trust, a group only on an org.
#[test]
fn g1_scopes_are_checked() {
    let twice = edit(
        "    - repository: friends-of-example/docs\n",
        "    - org: Example-Org\n",
    );
    assert_bad(
        &twice,
        "github.scopes[1]",
        "- org: Example-Org",
        "named twice",
    );
    let inside = edit(
        "    - repository: friends-of-example/docs\n",
        "    - repository: example-org/app\n",
    );
    assert_bad(
        &inside,
        "github.scopes[1]",
        "- repository: example-org/app",
        "lies in the organization",
    );
    let both = edit(
        "    - repository: friends-of-example/docs\n",
        "    - repository: a/b\n      org: c\n",
    );
    assert_bad(
        &both,
        "github.scopes[1].repository",
        "- repository: a/b",
        "not both",
    );
    let neither = edit(
        "    - repository: friends-of-example/docs\n      # trust: untrusted        # the default\n",
        "    - trust: trusted\n",
    );
    assert_bad(
        &neither,
        "github.scopes[1]",
        "- trust: trusted",
        "needs `org",
    );
    for bad_name in [
        "friends-of-example",
        "a/b/c",
        "/docs",
        "-a/docs",
        "a/..",
        "a b/c",
    ] {
        let text = edit(
            "    - repository: friends-of-example/docs\n",
            &format!("    - repository: \"{bad_name}\"\n"),
        );
        assert_bad(
            &text,
            "github.scopes[1].repository",
            "- repository:",
            "not OWNER/NAME",
        );
    }
    let org = edit("    - org: example-org ", "    - org: example_org ");
    assert_bad(&org, "github.scopes[0].org", "- org: example_org", "login");
    let trust = edit("      trust: trusted ", "      trust: unknown ");
    assert_bad(
        &trust,
        "github.scopes[0].trust",
        "trust: unknown",
        "`trusted` or `untrusted`",
    );
    let group = edit("      runner_group_id: 1 ", "      runner_group_id: 0 ");
    assert_bad(
        &group,
        "github.scopes[0].runner_group_id",
        "runner_group_id: 0",
        "start at 1",
    );
    let repo_group = edit(
        "    - repository: friends-of-example/docs\n",
        "    - repository: friends-of-example/docs\n      runner_group_id: 3\n",
    );
    assert_bad(
        &repo_group,
        "github.scopes[1].runner_group_id",
        "runner_group_id: 3",
        "belongs to an `org`",
    );
    let empty = edit(
        "    - org: example-org          # every repository of the organization\n      runner_group_id: 1        # optional: the default group\n      trust: trusted            # the most trust a job from here may have\n    - repository: friends-of-example/docs\n      # trust: untrusted        # the default\n",
        "",
    )
    .replace("  scopes:\n", "  scopes: []\n");
    assert_bad(&empty, "github.scopes", "scopes: []", "no scope");
}

// G1: pools: configured providers, each once, with 1 to 100 labels, none
// blank or repeated (case aside).
#[test]
fn g1_pools_are_checked() {
    let unknown = edit("    - pool: linux-docker", "    - pool: linux-podman");
    assert_bad(
        &unknown,
        "github.pools[0].pool",
        "- pool: linux-podman",
        "no configured provider",
    );
    let twice = edit(
        "      labels: [self-hosted, linux, x64]\n",
        "      labels: [self-hosted, linux, x64]\n    - pool: linux-docker\n      labels: [gpu]\n",
    );
    assert_bad(
        &twice,
        "github.pools[1].pool",
        "- pool: linux-docker\n      labels: [gpu]",
        "named twice",
    );
    let none = edit(
        "      labels: [self-hosted, linux, x64]",
        "      labels: []",
    );
    assert_bad(
        &none,
        "github.pools[0].labels",
        "labels: []",
        "1 to 100 labels",
    );
    let many = (0..101)
        .map(|i| format!("l{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let many = edit(
        "      labels: [self-hosted, linux, x64]",
        &format!("      labels: [{many}]"),
    );
    assert_bad(
        &many,
        "github.pools[0].labels",
        "labels: [l0",
        "1 to 100 labels",
    );
    let most = (0..100)
        .map(|i| format!("l{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let most = edit(
        "      labels: [self-hosted, linux, x64]",
        &format!("      labels: [{most}]"),
    );
    assert_eq!(github(&most).pools[0].labels.len(), 100, "100 is allowed");
    let blank = edit(
        "      labels: [self-hosted, linux, x64]",
        "      labels: [self-hosted, ' ']",
    );
    assert_bad(
        &blank,
        "github.pools[0].labels[1]",
        "labels: [self-hosted, ' ']",
        "blank",
    );
    let repeated = edit(
        "      labels: [self-hosted, linux, x64]",
        "      labels: [linux, Linux]",
    );
    assert_bad(
        &repeated,
        "github.pools[0].labels[1]",
        "labels: [linux, Linux]",
        "twice",
    );
    let empty = edit(
        "    - pool: linux-docker\n      labels: [self-hosted, linux, x64]\n",
        "",
    )
    .replace(
        "  pools:                        # the first pool whose labels fit takes a job\n",
        "  pools: []\n",
    );
    assert_bad(&empty, "github.pools", "pools: []", "no pool");
}

// G1: the runner's command and the durations.
#[test]
fn g1_runner_and_durations_are_checked() {
    let command = edit("    command: [/home/runner/run.sh]", "    command: []");
    assert_bad(&command, "github.runner.command", "command: []", "argv");
    let blank = edit(
        "    command: [/home/runner/run.sh]",
        "    command: [' ', x]",
    );
    assert_bad(&blank, "github.runner.command", "command: [' ', x]", "argv");
    for (written, says) in [("0s", "zero"), ("soon", "not a duration")] {
        let idle = edit(
            "    idle_timeout: 10m",
            &format!("    idle_timeout: {written}"),
        );
        assert_bad(&idle, "github.runner.idle_timeout", "idle_timeout:", says);
    }
    let quick = edit("  reconcile_every: 60s", "  reconcile_every: 500ms");
    assert_bad(
        &quick,
        "github.reconcile_every",
        "reconcile_every:",
        "once a second",
    );
    let one = edit("  reconcile_every: 60s", "  reconcile_every: 1s");
    assert_eq!(github(&one).reconcile_every, Duration::from_secs(1));
    let unknown = edit(
        "  reconcile_every: 60s",
        "  reconcile_every: 60s\n  webhook_secret: x",
    );
    let error = refuse(&unknown);
    assert!(
        matches!(error, ConfigError::UnknownField { .. }),
        "{error:?}"
    );
}
