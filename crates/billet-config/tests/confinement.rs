//! D15: a docker pool's confinement settings (`cpus`, `memory`,
//! `pids_limit`, `user`, `read_only`, `cap_add`): read when valid, refused
//! with their location when they hold nonsense.

mod common;

use std::num::{NonZeroU32, NonZeroU64};

use billet_config::ConfigError;
use common::{
    EXAMPLE, assert_at, assert_bad_docker_setting, docker_settings, edit, line_of, refuse,
    with_docker_lines,
};

// D15: absent, every setting is its safe default: nothing set (the backend's
// default applies), a writable root, no capability added.
#[test]
fn d15_absent_settings_are_defaults() {
    let settings = docker_settings(EXAMPLE);
    assert_eq!(settings.nano_cpus, None);
    assert_eq!(settings.cpus(), None);
    assert_eq!(settings.whole_cpus(), None);
    assert_eq!(settings.memory, None);
    assert_eq!(settings.memory_mib(), None);
    assert_eq!(settings.pids_limit, None);
    assert_eq!(settings.user, None);
    assert!(!settings.read_only);
    assert!(settings.cap_add.is_empty());
}

// D15: every setting is read, sizes by unit, capabilities canonical.
#[test]
fn d15_settings_are_read() {
    let text = with_docker_lines(
        "      cpus: 1.5\n      memory: 2GiB\n      pids_limit: 256\n      user: '1000:1000'\n      read_only: true\n      cap_add: [net_raw, CAP_SYS_PTRACE, Cap_Net_Raw]\n",
    );
    let settings = docker_settings(&text);
    assert_eq!(settings.nano_cpus, NonZeroU64::new(1_500_000_000));
    assert_eq!(settings.cpus(), Some(1.5));
    assert_eq!(settings.whole_cpus(), Some(2));
    assert_eq!(settings.memory, NonZeroU64::new(2 << 30));
    assert_eq!(settings.memory_mib(), Some(2048));
    assert_eq!(settings.pids_limit, NonZeroU32::new(256));
    assert_eq!(settings.user.as_deref(), Some("1000:1000"));
    assert!(settings.read_only);
    assert_eq!(settings.cap_add, ["NET_RAW", "SYS_PTRACE"]);

    let whole = docker_settings(&with_docker_lines(
        "      cpus: 2\n      memory: 10000000\n",
    ));
    assert_eq!(whole.cpus(), Some(2.0));
    assert_eq!(whole.whole_cpus(), Some(2));
    assert_eq!(whole.memory, NonZeroU64::new(10_000_000));
    assert_eq!(whole.memory_mib(), Some(10), "rounded up to whole MiB");
    let odd = docker_settings(&with_docker_lines(
        "      memory: 512MiB\n      cpus: 0.25\n",
    ));
    assert_eq!(odd.memory_mib(), Some(512));
    assert_eq!(odd.whole_cpus(), Some(1));
    assert_eq!(
        docker_settings(&with_docker_lines("      memory: '1 GB'\n")).memory,
        NonZeroU64::new(1_000_000_000)
    );
    let max = docker_settings(&with_docker_lines("      cpus: 65536\n"));
    assert_eq!(max.whole_cpus(), Some(65_536));
}

// D15: nonsense is refused by `billet validate` with its location: zero or
// malformed sizes, zero cpus, a zero pids limit, a blank user, an unknown
// capability.
#[test]
fn d15_nonsense_is_refused_with_location() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("      memory: 0\n", "memory: 0", "memory", "at least 6MiB"),
        (
            "      memory: 0GiB\n",
            "memory: 0GiB",
            "memory",
            "at least 6MiB",
        ),
        (
            "      memory: 1KiB\n",
            "memory: 1KiB",
            "memory",
            "at least 6MiB",
        ),
        (
            "      memory: 2 lots\n",
            "memory: 2 lots",
            "memory",
            "must be a size",
        ),
        (
            "      memory: 1.5GiB\n",
            "memory: 1.5GiB",
            "memory",
            "must be a size",
        ),
        (
            "      memory: -5\n",
            "memory: -5",
            "memory",
            "must be a size",
        ),
        (
            "      memory: 2.5\n",
            "memory: 2.5",
            "memory",
            "must be a size",
        ),
        (
            "      memory: 9999999TiB\n",
            "memory: 9999999TiB",
            "memory",
            "too large",
        ),
        ("      cpus: 0\n", "cpus: 0", "cpus", "from 0.01"),
        ("      cpus: -2\n", "cpus: -2", "cpus", "from 0.01"),
        ("      cpus: 100000\n", "cpus: 100000", "cpus", "from 0.01"),
        (
            "      pids_limit: 0\n",
            "pids_limit: 0",
            "pids_limit",
            "at least 1",
        ),
        ("      user: ''\n", "user: ''", "user", "USER or USER:GROUP"),
        (
            "      user: 'a b'\n",
            "user: 'a b'",
            "user",
            "USER or USER:GROUP",
        ),
        (
            "      user: '1000:'\n",
            "user: '1000:'",
            "user",
            "USER or USER:GROUP",
        ),
    ];
    for (setting, needle, field, says) in cases {
        assert_bad_docker_setting(&with_docker_lines(setting), needle, field, says);
    }
}

// D15: a capability that Linux does not have is refused at its entry.
#[test]
fn d15_unknown_capability_is_refused_at_its_entry() {
    let text = with_docker_lines("      cap_add:\n        - NET_RAW\n        - CAP_FLY\n");
    let error = refuse(&text);
    let ConfigError::UnknownCapability {
        given, provider, ..
    } = &error
    else {
        panic!("not an unknown capability: {error}");
    };
    assert_eq!(
        (given.as_str(), provider.as_str()),
        ("CAP_FLY", "linux-docker")
    );
    assert_at(
        &error,
        "providers[0].docker.cap_add[1]",
        line_of(&text, "- CAP_FLY"),
    );
    assert!(
        error.to_string().contains("not a Linux capability"),
        "{error}"
    );
    for bad in ["ALL", "''", "sys-admin"] {
        let error = refuse(&with_docker_lines(&format!("      cap_add: [{bad}]\n")));
        assert!(
            matches!(error, ConfigError::UnknownCapability { .. }),
            "{bad}: {error}"
        );
    }
}

// D15: the types stay strict, and unknown fields are still refused.
#[test]
fn d15_wrong_types_and_unknown_fields_are_refused() {
    for (setting, path) in [
        ("      pids_limit: -1\n", "providers[0].docker.pids_limit"),
        ("      read_only: maybe\n", "providers[0].docker.read_only"),
        ("      cap_add: NET_RAW\n", "providers[0].docker.cap_add"),
        ("      cpus: many\n", "providers[0].docker.cpus"),
    ] {
        let error = refuse(&with_docker_lines(setting));
        assert!(
            matches!(error, ConfigError::WrongType { .. }),
            "{setting}: {error}"
        );
        assert_eq!(
            error.location().path.as_deref(),
            Some(path),
            "{setting}: {error}"
        );
    }
    for setting in ["      memory: true\n", "      memory: [1]\n"] {
        let error = refuse(&with_docker_lines(setting));
        assert!(
            matches!(error, ConfigError::WrongType { .. }),
            "{setting}: {error}"
        );
        assert!(
            error
                .to_string()
                .contains("a size such as 2GiB, 512MiB or a number of bytes"),
            "{setting}: {error}"
        );
    }
    let error = refuse(&with_docker_lines("      privileged: true\n"));
    assert!(matches!(error, ConfigError::UnknownField { .. }), "{error}");
    let shown = error.to_string();
    for field in [
        "cpus",
        "memory",
        "pids_limit",
        "user",
        "read_only",
        "cap_add",
    ] {
        assert!(shown.contains(&format!("`{field}`")), "{shown}");
    }
}

// D15: a docker block on a provider of another kind is still refused as
// foreign, even when its settings are nonsense.
#[test]
fn d15_foreign_block_is_refused_before_its_settings() {
    let tart = "      memory_mib: 8192\n";
    let text = edit(
        tart,
        &format!("{tart}    docker:\n      image: x\n      memory: 0\n"),
    );
    let error = refuse(&text);
    assert!(
        matches!(error, ConfigError::ForeignSettings { .. }),
        "{error}"
    );
}

// L27: `storage` bounds a container's writable layer: absent, no bound; read
// by unit; refused with its location below 1 MiB, when malformed, or past
// what docker's API counts.
#[test]
fn l27_storage_is_read_and_refused_with_location() {
    assert_eq!(docker_settings(EXAMPLE).storage, None);
    let read = |lines: &str| docker_settings(&with_docker_lines(lines)).storage;
    assert_eq!(read("      storage: 10GiB\n"), NonZeroU64::new(10 << 30));
    assert_eq!(read("      storage: 1048576\n"), NonZeroU64::new(1 << 20));
    assert_eq!(
        read("      storage: '2 GB'\n"),
        NonZeroU64::new(2_000_000_000)
    );
    let cases: &[(&str, &str, &str)] = &[
        ("      storage: 0\n", "storage: 0", "at least 1MiB"),
        (
            "      storage: 1048575\n",
            "storage: 1048575",
            "at least 1MiB",
        ),
        (
            "      storage: 512KiB\n",
            "storage: 512KiB",
            "at least 1MiB",
        ),
        (
            "      storage: lots\n",
            "storage: lots",
            "`storage` must be a size",
        ),
        (
            "      storage: 9999999TiB\n",
            "storage: 9999999TiB",
            "`storage` is too large",
        ),
        (
            "      storage: 9223372036854775808\n",
            "storage: 9223372036854775808",
            "`storage` is too large",
        ),
    ];
    for (setting, needle, says) in cases {
        assert_bad_docker_setting(&with_docker_lines(setting), needle, "storage", says);
    }
}
