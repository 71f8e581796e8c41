//! D19: a docker pool's `runtime` (the OCI runtime its containers run
//! under) and `isolation` (whether that runtime is a boundary): read as
//! written; `isolation: boundary` without a runtime, a blank runtime and an
//! isolation that is neither `boundary` nor `none` refused, each at its
//! place.

mod common;

use billet_provider::Isolation;
use common::{assert_bad_docker_setting, docker_settings, with_docker_lines};

// D19: absent, the daemon's default runtime and no boundary; a runtime alone
// is no boundary; `isolation: boundary` with a runtime is one; `none` says
// the default.
#[test]
fn d19_runtime_and_isolation_are_read() {
    let plain = docker_settings(&with_docker_lines(""));
    assert_eq!(
        (plain.runtime, plain.isolation),
        (None, Isolation::NoBoundary)
    );
    let runtime = docker_settings(&with_docker_lines("      runtime: kata\n"));
    assert_eq!(
        (runtime.runtime.as_deref(), runtime.isolation),
        (Some("kata"), Isolation::NoBoundary)
    );
    let boundary = docker_settings(&with_docker_lines(
        "      runtime: runsc\n      isolation: boundary\n",
    ));
    assert_eq!(
        (boundary.runtime.as_deref(), boundary.isolation),
        (Some("runsc"), Isolation::Boundary)
    );
    let none = docker_settings(&with_docker_lines(
        "      runtime: runsc\n      isolation: none\n",
    ));
    assert_eq!(none.isolation, Isolation::NoBoundary);
    let none = docker_settings(&with_docker_lines("      isolation: none\n"));
    assert_eq!(
        (none.runtime, none.isolation),
        (None, Isolation::NoBoundary)
    );
}

// D19: a boundary needs a runtime that is one: under the daemon's default a
// container shares the host's kernel. `validate` says so where the file
// says `boundary`.
#[test]
fn d19_a_boundary_without_a_runtime_is_refused_where_it_is_said() {
    let text = with_docker_lines("      isolation: boundary\n");
    assert_bad_docker_setting(
        &text,
        "isolation: boundary",
        "isolation",
        "needs `runtime:`",
    );
}

// D19: a runtime is a name; isolation is `boundary` or `none`.
#[test]
fn d19_a_blank_runtime_or_another_isolation_is_refused() {
    for (setting, needle, field, says) in [
        ("runtime: ''\n", "runtime: ''", "runtime", "not \"\""),
        (
            "runtime: ' runsc'\n",
            "runtime: ' runsc'",
            "runtime",
            "not \" runsc\"",
        ),
        (
            "runtime: runsc\n      isolation: gvisor\n",
            "isolation: gvisor",
            "isolation",
            "`boundary` or `none`, not \"gvisor\"",
        ),
        (
            "runtime: runsc\n      isolation: Boundary\n",
            "isolation: Boundary",
            "isolation",
            "not \"Boundary\"",
        ),
    ] {
        let text = with_docker_lines(&format!("      {setting}"));
        assert_bad_docker_setting(&text, needle, field, says);
    }
}
