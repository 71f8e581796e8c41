//! Checks that run as ordinary tests: the service is a production crate that
//! reaches neither the simulated backend nor the harness (L1, X1).

use std::path::Path;

use cargo_metadata::{DependencyKind, MetadataCommand};

// L1, X1: `cargo xtask deps` over the real workspace passes, and this crate
// is production: not marked test-only, publishable, and neither
// billet-simulated nor billet-harness is among its normal or build
// dependencies. (That the check fails for a service crate that reaches
// billet-simulated is proven over fixtures in xtask/tests/deps.rs.)
#[test]
fn l1_the_service_is_a_production_crate_that_never_reaches_simulated() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let report = xtask::deps::check(Some(&manifest)).expect("cargo metadata runs");
    assert!(report.is_ok(), "{report}");
    let metadata = MetadataCommand::new()
        .manifest_path(&manifest)
        .no_deps()
        .exec()
        .expect("cargo metadata runs");
    let billet = metadata
        .packages
        .iter()
        .find(|p| p.name.as_str() == "billet")
        .expect("the billet package is a member");
    assert!(
        billet
            .metadata
            .get("billet")
            .and_then(|b| b.get("test-only"))
            .is_none(),
        "billet must not be marked test-only"
    );
    assert_ne!(billet.publish, Some(vec![]), "billet must be publishable");
    for dependency in &billet.dependencies {
        if dependency.kind == DependencyKind::Development {
            continue;
        }
        assert!(
            !["billet-simulated", "billet-harness"].contains(&dependency.name.as_str()),
            "billet depends on {} outside [dev-dependencies]",
            dependency.name
        );
    }
}

/// Crates that would hand the `log` facade's records to an output. bollard
/// logs every request body it sends at `debug` through `log`, and a
/// container's body holds its environment: a runner's JIT config (P2).
const LOG_FORWARDERS: &[&str] = &[
    "tracing-log",
    "env_logger",
    "pretty_env_logger",
    "log4rs",
    "fern",
    "flexi_logger",
    "simple_logger",
    "simplelog",
    "stderrlog",
    "syslog",
];

/// The forwarders `lock` (a Cargo.lock's text) holds.
fn forwarders_in(lock: &str) -> Vec<&str> {
    lock.lines()
        .filter_map(|line| line.strip_prefix("name = \""))
        .filter_map(|rest| rest.strip_suffix('"'))
        .filter(|name| LOG_FORWARDERS.contains(name))
        .collect()
}

// P2: nothing in the build forwards the `log` facade's records anywhere, so
// what bollard logs of a container's create body (its environment, a
// runner's secrets) is dropped; and the check finds a forwarder planted in
// a lock file.
#[test]
fn p2_no_logger_receives_the_log_facades_records() {
    let lock =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock"))
            .expect("Cargo.lock is committed");
    assert_eq!(forwarders_in(&lock), Vec::<&str>::new());
    let planted = format!("{lock}\n[[package]]\nname = \"tracing-log\"\nversion = \"0.2.0\"\n");
    assert_eq!(forwarders_in(&planted), ["tracing-log"]);
    for file in [
        "src/logging.rs",
        "src/main.rs",
        "src/cli.rs",
        "src/service.rs",
    ] {
        let text =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
        for call in ["set_logger", "set_boxed_logger", "LogTracer"] {
            assert!(!text.contains(call), "{file} calls {call}");
        }
    }
}
