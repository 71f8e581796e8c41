//! F5: a docker pool's network. One that puts jobs in a namespace outside
//! their container (`host`, `container:ID`, podman's `ns:PATH`) is refused at
//! its place unless the block says `allow_host_network: true`; that flag on a
//! pool whose network is its own is refused as a contradiction.

mod common;

use common::{DOCKER_LAST, assert_bad_docker_setting, docker_settings, edit};

/// The example with its docker pool's network line replaced by `settings`.
fn with(settings: &str) -> String {
    edit(DOCKER_LAST, settings)
}

// F5: a network of the job's own is read as written; one sharing a
// namespace is taken when the pool allows it.
#[test]
fn f5_networks_are_read_and_shared_ones_taken_when_allowed() {
    for own in [
        "none",
        "bridge",
        "ci-runners",
        "hostile",
        "my-container:net",
    ] {
        let settings = docker_settings(&with(&format!("      network: {own}\n")));
        assert_eq!(settings.network.as_deref(), Some(own));
    }
    assert_eq!(docker_settings(&with("")).network, None);
    for shared in [
        "host",
        "HOST",
        "container:ci",
        "Container:ab12",
        "ns:/run/netns/x",
    ] {
        let settings = docker_settings(&with(&format!(
            "      network: '{shared}'\n      allow_host_network: true\n"
        )));
        assert_eq!(settings.network.as_deref(), Some(shared));
    }
}

// F5: a shared namespace without the flag (or with it false) is refused at
// the network's line, saying what a job would reach and what to write; the
// flag without such a network is refused at the flag.
#[test]
fn f5_a_shared_network_needs_the_operators_word() {
    for shared in [
        "host",
        " Host ",
        "container:ci",
        "CONTAINER:1f2e",
        "ns:/run/netns/x",
    ] {
        for flag in ["", "      allow_host_network: false\n"] {
            assert_bad_docker_setting(
                &with(&format!("      network: '{shared}'\n{flag}")),
                "network: '",
                "network",
                "allow_host_network: true",
            );
        }
    }
    assert_bad_docker_setting(
        &with("      network: host\n"),
        "network: host",
        "network",
        "billet's own API included",
    );
    for own in ["      network: bridge\n", ""] {
        assert_bad_docker_setting(
            &with(&format!("{own}      allow_host_network: true\n")),
            "allow_host_network: true",
            "allow_host_network",
            "this pool's network is its own",
        );
    }
}
