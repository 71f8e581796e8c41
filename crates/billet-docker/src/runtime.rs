//! The OCI runtime a pool's containers run under (`runtime:` in
//! `billet.yaml`), whether the pool takes it for an isolation boundary, and
//! the check of both against what the daemon lists.
//!
//! A runtime is named as the daemon names it (`runsc` once gVisor is
//! registered in docker's `daemon.json` or podman's `containers.conf`). The
//! provider cannot see inside a runtime: it takes the operator's word that
//! one is a boundary (`isolation: boundary`), and refuses only what is surely
//! not one: a runtime that is, by its name or by the file the daemon runs for
//! it, one of [`HOST_KERNEL_RUNTIMES`].

use std::collections::{HashMap, HashSet};
use std::fmt;

use billet_provider::Isolation;
use bollard::models::Runtime;

use crate::daemon::DaemonError;

/// The runtimes that run a job's processes on the host's own kernel, by the
/// name a daemon gives them or the file it runs for them: runc (docker's and
/// podman's usual default, also under containerd's shim names), crun (podman's
/// default on many distributions) and youki. None of them is an isolation
/// boundary, whatever a pool says.
pub const HOST_KERNEL_RUNTIMES: [&str; 5] = [
    "runc",
    "crun",
    "youki",
    "io.containerd.runc.v2",
    "io.containerd.runtime.v1.linux",
];

/// Whether `name`, or the last part of the path `path` (as a daemon lists
/// it, with or without directories), is one of [`HOST_KERNEL_RUNTIMES`].
pub fn runs_on_host_kernel(name: &str, path: Option<&str>) -> bool {
    let file = path.map(|path| path.rsplit('/').next().unwrap_or(path));
    HOST_KERNEL_RUNTIMES
        .iter()
        .any(|known| *known == name || Some(*known) == file)
}

/// Why a pool's runtime cannot serve it, as [`DockerProvider::check_runtime`]
/// finds on its daemon.
///
/// [`DockerProvider::check_runtime`]: crate::DockerProvider::check_runtime
#[derive(Debug)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The daemon does not list the runtime: it is not registered there
    /// (docker's `daemon.json` `runtimes`, podman's `[engine.runtimes]`).
    Unlisted {
        /// The runtime the pool names.
        runtime: String,
        /// The daemon's endpoint.
        endpoint: String,
        /// The runtimes it lists, sorted.
        listed: Vec<String>,
    },
    /// The pool takes the runtime for an isolation boundary, but the daemon
    /// runs one of [`HOST_KERNEL_RUNTIMES`] for it.
    HostKernel {
        /// The runtime the pool names.
        runtime: String,
        /// The daemon's endpoint.
        endpoint: String,
        /// The file the daemon runs for it, as it lists it.
        path: String,
    },
    /// A container the provider created does not run under the runtime:
    /// the engine reports another, and its default is another too. Podman's
    /// Docker-compatible API (4.x) ignores the runtime a container asks for
    /// and runs the engine's default, reporting `oci`: a podman pool runs a
    /// runtime only from a service whose default it is.
    NotApplied {
        /// The runtime the pool names.
        runtime: String,
        /// The daemon's endpoint.
        endpoint: String,
        /// The runtime the engine reports on the container (empty: none).
        reported: String,
        /// The engine's default runtime, as its system info said.
        default: Option<String>,
    },
    /// The daemon could not be asked (unreachable, or no answer in time).
    Daemon(DaemonError),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Unlisted {
                runtime,
                endpoint,
                listed,
            } => write!(
                f,
                "the docker daemon at {endpoint} lists no runtime {runtime:?} (it lists {}): register it in the daemon's configuration (docker: `runtimes` in daemon.json; podman: `[engine.runtimes]` in containers.conf)",
                listed.join(", ")
            ),
            RuntimeError::HostKernel {
                runtime,
                endpoint,
                path,
            } => write!(
                f,
                "runtime {runtime:?} on the docker daemon at {endpoint} runs {path:?}, which runs jobs on the host's kernel: it is no isolation boundary, so `isolation: boundary` cannot hold"
            ),
            RuntimeError::NotApplied {
                runtime,
                endpoint,
                reported,
                default,
            } => write!(
                f,
                "the engine at {endpoint} did not apply runtime {runtime:?} to a container (it reports {reported:?}, and its default runtime is {}): the container was removed before it started. An engine that ignores the runtime a container asks for (podman's Docker-compatible API) runs a pool's runtime only as its default: serve the pool from one started so (`podman --runtime {runtime} system service`)",
                default.as_deref().unwrap_or("unknown")
            ),
            RuntimeError::Daemon(err) => write!(f, "cannot check the pool's runtime: {err}"),
        }
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RuntimeError::Daemon(err) => Some(err),
            _ => None,
        }
    }
}

/// What a daemon's system info says of its runtimes: the names it lists and
/// its default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Listed {
    /// Every runtime name it lists.
    pub(crate) names: HashSet<String>,
    /// Its default runtime, if it said.
    pub(crate) default: Option<String>,
}

/// Whether a container that asked for `runtime` runs under it, by what the
/// engine `reported` on it: the runtime itself; or, where the engine reports
/// no runtime it lists (podman's `oci`, or nothing), its default when that
/// is the runtime (such an engine ran its default).
pub(crate) fn applied(runtime: &str, reported: Option<&str>, listed: &Listed) -> bool {
    match reported {
        Some(reported) if reported == runtime => true,
        Some(reported) if listed.names.contains(reported) => false,
        _ => listed.default.as_deref() == Some(runtime),
    }
}

/// What the daemon's listed `runtimes` say of the pool's `runtime` under
/// `isolation`: `Ok` when it is listed and, for a boundary, its file is not
/// one of [`HOST_KERNEL_RUNTIMES`].
pub(crate) fn judge(
    runtime: &str,
    isolation: Isolation,
    listed: &HashMap<String, Runtime>,
    endpoint: &str,
) -> Result<(), RuntimeError> {
    let Some(entry) = listed.get(runtime) else {
        let mut names: Vec<String> = listed.keys().cloned().collect();
        names.sort();
        return Err(RuntimeError::Unlisted {
            runtime: runtime.to_owned(),
            endpoint: endpoint.to_owned(),
            listed: names,
        });
    };
    if isolation == Isolation::Boundary && runs_on_host_kernel(runtime, entry.path.as_deref()) {
        return Err(RuntimeError::HostKernel {
            runtime: runtime.to_owned(),
            endpoint: endpoint.to_owned(),
            path: entry.path.clone().unwrap_or_else(|| runtime.to_owned()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(entries: &[(&str, Option<&str>)]) -> HashMap<String, Runtime> {
        entries
            .iter()
            .map(|(name, path)| {
                (
                    (*name).to_owned(),
                    Runtime {
                        path: path.map(str::to_owned),
                        ..Runtime::default()
                    },
                )
            })
            .collect()
    }

    // D19: a host-kernel runtime is known by its name or its file.
    #[test]
    fn d19_host_kernel_runtimes_are_known_by_name_or_file() {
        for name in HOST_KERNEL_RUNTIMES {
            assert!(runs_on_host_kernel(name, None), "{name}");
        }
        assert!(runs_on_host_kernel("runsc", Some("/usr/bin/runc")));
        assert!(runs_on_host_kernel("safe", Some("crun")));
        assert!(runs_on_host_kernel("safe", Some("/opt/youki")));
        assert!(!runs_on_host_kernel("runsc", Some("/usr/bin/runsc")));
        assert!(!runs_on_host_kernel("runsc", None));
        assert!(!runs_on_host_kernel("kata", Some("/usr/bin/kata-runtime")));
        assert!(!runs_on_host_kernel("runcx", Some("/usr/bin/runcx")));
        assert!(!runs_on_host_kernel("runsc", Some("/usr/bin/runc/runsc")));
    }

    // D19: a container runs under the runtime the engine reports on it, or
    // under the engine's default where it reports none it lists.
    #[test]
    fn d19_a_runtime_is_applied_by_name_or_as_the_default() {
        let names = ["runc", "runsc"].map(str::to_owned).into();
        let docker = Listed {
            names,
            default: Some("runc".to_owned()),
        };
        assert!(applied("runsc", Some("runsc"), &docker));
        assert!(!applied("runsc", Some("runc"), &docker));
        assert!(!applied("runsc", Some("oci"), &docker));
        assert!(!applied("runsc", None, &docker));
        let podman_runsc = Listed {
            default: Some("runsc".to_owned()),
            ..docker
        };
        assert!(applied("runsc", Some("oci"), &podman_runsc));
        assert!(applied("runsc", None, &podman_runsc));
        assert!(applied("runsc", Some("runsc"), &podman_runsc));
        assert!(!applied("runsc", Some("runc"), &podman_runsc));
        assert!(!applied("runsc", Some("oci"), &Listed::default()));
        let err = RuntimeError::NotApplied {
            runtime: "runsc".into(),
            endpoint: "unix:///p.sock".into(),
            reported: "oci".into(),
            default: Some("runc".into()),
        };
        let text = err.to_string();
        assert!(
            text.contains(r#"(it reports "oci", and its default runtime is runc)"#)
                && text.contains("podman --runtime runsc system service"),
            "{text}"
        );
    }

    // D19: the daemon must list the runtime; a boundary must not be a
    // host-kernel runtime; a runtime that is no boundary may be anything
    // listed.
    #[test]
    fn d19_a_runtime_is_judged_by_what_the_daemon_lists() {
        let daemon = listed(&[
            ("runc", Some("runc")),
            ("runsc", Some("/usr/bin/runsc")),
            ("fake", Some("/usr/sbin/runc")),
            ("bare", None),
        ]);
        let judge = |name, isolation| judge(name, isolation, &daemon, "unix:///d.sock");
        assert!(judge("runsc", Isolation::Boundary).is_ok());
        assert!(judge("runsc", Isolation::NoBoundary).is_ok());
        assert!(judge("runc", Isolation::NoBoundary).is_ok());
        assert!(judge("bare", Isolation::Boundary).is_ok());
        match judge("fake", Isolation::Boundary) {
            Err(RuntimeError::HostKernel { runtime, path, .. }) => {
                assert_eq!(
                    (runtime.as_str(), path.as_str()),
                    ("fake", "/usr/sbin/runc")
                );
            }
            other => panic!("{other:?}"),
        }
        let err = judge("runc", Isolation::Boundary).unwrap_err();
        assert!(err.to_string().contains("no isolation boundary"), "{err}");
        match judge("kata", Isolation::Boundary) {
            Err(err @ RuntimeError::Unlisted { .. }) => {
                let text = err.to_string();
                assert!(
                    text.contains(r#"no runtime "kata" (it lists bare, fake, runc, runsc)"#),
                    "{text}"
                );
                assert!(text.contains("unix:///d.sock"), "{text}");
            }
            other => panic!("{other:?}"),
        }
    }
}
