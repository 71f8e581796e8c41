//! What an engine speaking the Docker API means by its answers (D18).
//!
//! docker's daemon and podman's Docker-compatible service answer the same
//! requests, but not always in the same words: podman names states docker
//! has no name for, and answers some refusals with a `500` and its own
//! message where docker answers a `409` or a `400`. Every answer is read here
//! by what it means, never by which engine gave it, so that one code path
//! serves both:
//!
//! | what the answer means | docker says | podman says |
//! | --- | --- | --- |
//! | a container ended, its exit code known | `exited` | `exited`, or `stopped` before its clean-up ran |
//! | a container made, never started | `created` | `created` (also `configured`, `initialized` in its own API) |
//! | the name is held by another container | `409` | `500` "... that name is already in use" |
//! | the program cannot be run | `400` from start | `500` "OCI runtime attempted to invoke a command that was not found" / "OCI permission denied" |
//! | a removal refused: the container runs | `409` "You cannot remove a running container" | `500` "... as it is running ... container state improper" |
//! | a pause refused: already paused | `409` "... is already paused" | `500` "... is already paused: container state improper" |
//! | a forced removal of a paused container whose process ended meanwhile (gVisor) | (not seen) | `500` "container state improper: stopped", the container left exited |
//! | a name filter | matches `/name` | matches `name` |
//! | a container's removal, as an event | `destroy` | `remove` |
//! | an inspect raced the container's exit (asked again) | (not seen) | `500` "read /proc/N/cgroup: no such process" |
//!
//! Anything not in this table is read as docker's own API documents it; an
//! answer billet cannot read is still an error (D13), never a guess.

use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::{ContainerInspectResponse, ContainerSummary};
use bollard::query_parameters::ListContainersOptions;
use serde::de::DeserializeOwned;

use crate::daemon::DaemonError;

/// docker's name for a state another engine names otherwise, or the word
/// itself when it is docker's own (or one nobody knows: then bollard's typed
/// reading refuses it, and the answer is an error).
fn docker_state(word: &str) -> &str {
    match word {
        // podman: the container's process ended and its exit code is
        // recorded, but its clean-up has not run yet.
        "stopped" => "exited",
        // podman: made (storage configured, or also created in the OCI
        // runtime), never started.
        "configured" | "initialized" => "created",
        other => other,
    }
}

/// docker's name for a container event's action (`die`, `destroy`, ...),
/// where another engine names it otherwise: podman's `remove` is docker's
/// `destroy`. Any other action is answered as it is.
pub fn docker_event_action(action: &str) -> &str {
    match action {
        "remove" => "destroy",
        other => other,
    }
}

/// Rewrites, in place, the state word at `value[key]` to docker's.
fn translate_state(value: &mut serde_json::Value, key: &str) {
    if let Some(word) = value.get_mut(key)
        && let Some(text) = word.as_str()
    {
        let docker = docker_state(text);
        if docker != text {
            *word = serde_json::Value::String(docker.to_owned());
        }
    }
}

/// An answer bollard's typed reading refused, read again with every state
/// word translated by [`docker_state`]; the original error when the answer
/// still cannot be read (or bollard kept no copy of it).
fn reread<T: DeserializeOwned>(
    err: BollardError,
    translate: impl FnOnce(&mut serde_json::Value),
) -> Result<T, BollardError> {
    let BollardError::JsonDataError { contents, .. } = &err else {
        return Err(err);
    };
    let Ok(mut value) = serde_json::from_str::<serde_json::Value>(contents) else {
        return Err(err);
    };
    translate(&mut value);
    serde_json::from_value(value).map_err(|_| err)
}

/// bollard's `inspect_container`, read as [`DockerProvider`](crate::DockerProvider)
/// reads it: a state word another engine uses for one of docker's states
/// (podman's `stopped` for `exited`, ...) is read as docker's. A state
/// nobody knows is still an error.
pub async fn inspect_container(
    client: &Docker,
    reference: &str,
) -> Result<ContainerInspectResponse, BollardError> {
    match client.inspect_container(reference, None).await {
        Err(err) => reread(err, |value| {
            if let Some(state) = value.get_mut("State") {
                translate_state(state, "Status");
            }
        }),
        answer => answer,
    }
}

/// bollard's `list_containers`, read as [`DockerProvider`](crate::DockerProvider)
/// reads it: each container's state word is read as docker's (see
/// [`inspect_container`]). One container whose state nobody knows fails the
/// whole answer, as D5 asks of a list.
pub async fn list_containers(
    client: &Docker,
    options: Option<ListContainersOptions>,
) -> Result<Vec<ContainerSummary>, BollardError> {
    match client.list_containers(options).await {
        Err(err) => reread(err, |value| {
            if let Some(summaries) = value.as_array_mut() {
                summaries
                    .iter_mut()
                    .for_each(|summary| translate_state(summary, "State"));
            }
        }),
        answer => answer,
    }
}

/// The daemon's message in lower case, when it answered with a status.
fn message(err: &DaemonError) -> Option<String> {
    match &err.failure {
        crate::daemon::Failure::Status { message, .. } => Some(message.to_lowercase()),
        _ => None,
    }
}

/// Whether a refused `create container` means its name is held by another
/// container: docker's `409`, or podman's `500` saying the name is in use.
pub(crate) fn name_in_use(err: &DaemonError) -> bool {
    err.status() == Some(409)
        || message(err).is_some_and(|m| m.contains("name") && m.contains("already in use"))
}

/// Whether a refused `start container` means the spec itself cannot start:
/// its program is not in the image or not executable, or its memory is
/// less than the container needs to start. docker's `400`; podman's `500`
/// carrying the OCI runtime's "command not found" or "permission denied"
/// (gVisor's runsc: "error finding executable"),
/// or its failure to set the memory limit (podman takes a memory limit at
/// create that docker refuses there, with a `400`, as under its floor).
pub(crate) fn spec_cannot_start(err: &DaemonError) -> bool {
    err.status() == Some(400)
        || message(err).is_some_and(|m| {
            m.contains("oci runtime attempted to invoke a command that was not found")
                || m.contains("oci permission denied")
                // gVisor's runsc, under either engine.
                || m.contains("error finding executable")
                || m.contains("unable to set memory limit")
        })
}

/// Whether the engine that answered `version` arbitrates two forced
/// removals of one container itself, answering the second `409` (removal in
/// progress) or `404`: docker does; podman answers both `204`, and is told by
/// the components its version names. Read once per provider, at its first
/// destroy of a running container: where the engine arbitrates, a destroy
/// needs no pause to claim the container.
pub(crate) fn arbitrates_forced_removals(version: &bollard::models::SystemVersion) -> bool {
    !version.components.as_ref().is_some_and(|components| {
        components
            .iter()
            .any(|component| component.name.to_lowercase().contains("podman"))
    })
}

/// Whether a refused `create container` means the daemon lists no runtime
/// of the name the container asks for: docker's `400` "Unknown runtime
/// specified NAME" (podman creates it and fails at the start instead).
pub(crate) fn unknown_runtime(err: &DaemonError) -> bool {
    message(err).is_some_and(|m| m.contains("unknown runtime"))
}

/// Whether a refusal means the daemon holds no such container: `404` on
/// both engines, and podman's `500` for a container removed while it was
/// being read ("... does not exist in database: no such container").
pub(crate) fn no_such_container(err: &DaemonError) -> bool {
    err.status() == Some(404)
        || (err.status() == Some(500)
            && message(err).is_some_and(|m| m.ends_with("no such container")))
}

/// Whether an `inspect` failed because the container's process ended while
/// the daemon read it: podman's `500` "read /proc/N/cgroup: no such
/// process" (its state still named the process that its clean-up had not
/// yet recorded as gone). Asked again, it answers the container ended.
pub(crate) fn process_just_ended(err: &DaemonError) -> bool {
    err.status() == Some(500) && message(err).is_some_and(|m| m.ends_with("no such process"))
}

/// Whether a refused removal without force means the container runs (or is
/// paused): docker's `409` "cannot remove a running (paused) container",
/// podman's `500` "... as it is running ... cannot be removed without force".
pub(crate) fn removal_refused_running(err: &DaemonError) -> bool {
    matches!(err.status(), Some(409 | 500))
        && message(err).is_some_and(|m| {
            m.contains("cannot remove a running")
                || m.contains("cannot remove a paused")
                || m.contains("cannot be removed without force")
        })
}

/// Whether a refused removal means another call is removing the container:
/// docker's `409` "removal ... already in progress" (any other `409` that is
/// not [`removal_refused_running`] is read so too), podman's "is being removed".
pub(crate) fn removal_in_progress(err: &DaemonError) -> bool {
    if removal_refused_running(err) {
        return false;
    }
    err.status() == Some(409)
        || message(err).is_some_and(|m| m.contains("in progress") || m.contains("being removed"))
}

/// Whether a refused forced removal means the paused container's process
/// ended as it was being removed, and the container is left ended (podman
/// on gVisor's runsc: `500` "container state improper: stopped"): asked
/// again, it is removed.
pub(crate) fn removal_met_its_end(err: &DaemonError) -> bool {
    err.status() == Some(500)
        && message(err).is_some_and(|m| m.ends_with("container state improper: stopped"))
}

/// Whether a refused pause means the container is paused already (by
/// another call, or by hand): docker's `409`, podman's `500`, both saying
/// "already paused".
pub(crate) fn already_paused(err: &DaemonError) -> bool {
    message(err).is_some_and(|m| m.contains("already paused"))
}

/// Whether a refused pause means the container is not running (it ended, or
/// never started): docker's `409` "is not running", podman's `500` "... is
/// not running" / "container state improper".
pub(crate) fn not_running(err: &DaemonError) -> bool {
    !already_paused(err)
        && matches!(err.status(), Some(409 | 500))
        && message(err).is_some_and(|m| m.contains("not running") || m.contains("state improper"))
}

/// The name filter of `list containers` that matches exactly the container
/// named `name`, on every engine: docker matches it against `/name`, podman
/// against `name`.
pub(crate) fn exact_name_filter(name: &str) -> String {
    format!("^/?{name}$")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::Failure;
    use bollard::models::ContainerStateStatusEnum;

    fn refused(code: u16, message: &str) -> DaemonError {
        DaemonError::new(
            "unix:///test.sock",
            "test call",
            Failure::Status {
                code,
                message: message.to_owned(),
            },
        )
    }

    fn unreadable(contents: &str) -> BollardError {
        BollardError::JsonDataError {
            message: "unknown variant".to_owned(),
            contents: contents.to_owned(),
            column: 0,
        }
    }

    // D18: podman's state words are read as docker's for the same state;
    // docker's own words pass; a word nobody knows stays an error (D13).
    #[test]
    fn d18_state_words_are_read_by_meaning() {
        assert_eq!(docker_state("stopped"), "exited");
        assert_eq!(docker_state("configured"), "created");
        assert_eq!(docker_state("initialized"), "created");
        for own in [
            "created",
            "running",
            "paused",
            "restarting",
            "removing",
            "exited",
            "dead",
            "stopping",
        ] {
            assert_eq!(docker_state(own), own);
        }
        assert_eq!(docker_state("unknown"), "unknown");
        assert_eq!(docker_event_action("remove"), "destroy");
        for own in ["create", "start", "die", "destroy", "kill"] {
            assert_eq!(docker_event_action(own), own);
        }

        let inspected: ContainerInspectResponse = reread(
            unreadable(r#"{"Id":"a","State":{"Status":"stopped","ExitCode":3}}"#),
            |v| translate_state(&mut v["State"], "Status"),
        )
        .unwrap();
        let state = inspected.state.unwrap();
        assert_eq!(state.status, Some(ContainerStateStatusEnum::EXITED));
        assert_eq!(state.exit_code, Some(3));

        let listed: Vec<ContainerSummary> = reread(
            unreadable(r#"[{"Id":"a","State":"running"},{"Id":"b","State":"stopped"}]"#),
            |v| {
                v.as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .for_each(|s| translate_state(s, "State"));
            },
        )
        .unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(
            listed[1].state,
            Some(bollard::models::ContainerSummaryStateEnum::EXITED)
        );

        // A state nobody knows: the whole answer is still an error.
        let err = reread::<Vec<ContainerSummary>>(
            unreadable(r#"[{"Id":"a","State":"running"},{"Id":"b","State":"unknown"}]"#),
            |v| {
                v.as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .for_each(|s| translate_state(s, "State"));
            },
        )
        .unwrap_err();
        assert!(matches!(err, BollardError::JsonDataError { .. }), "{err:?}");
        // Not JSON at all, or another error: passed on as it was.
        assert!(reread::<ContainerSummary>(unreadable("not json"), |_| {}).is_err());
        let other = reread::<ContainerSummary>(BollardError::RequestTimeoutError, |_| {});
        assert!(matches!(other, Err(BollardError::RequestTimeoutError)));
    }

    // D18: refusals read by what the engine says, on both engines, and no
    // wider: each predicate refuses the other refusals of the table.
    #[test]
    fn d18_refusals_are_read_by_what_the_engine_says() {
        let docker_in_use = refused(
            409,
            "Conflict. The container name \"/x\" is already in use by container \"abc\".",
        );
        let podman_in_use = refused(
            500,
            "container create: creating container storage: the container name \"x\" is already in use by abc. You have to remove that container to be able to reuse that name: that name is already in use",
        );
        let podman_network = refused(
            500,
            "container create: unable to find network with name or ID nosuchnet: network not found",
        );
        assert!(name_in_use(&docker_in_use) && name_in_use(&podman_in_use));
        assert!(!name_in_use(&podman_network));
        assert!(!name_in_use(&refused(500, "image already in use")));

        let docker_missing = refused(
            400,
            "failed to create shim task: OCI runtime create failed: exec: \"/nope\": stat /nope: no such file or directory: unknown",
        );
        let podman_missing = refused(
            500,
            "runc: runc create failed: unable to start container process: exec: \"/nope\": stat /nope: no such file or directory: OCI runtime attempted to invoke a command that was not found",
        );
        let podman_denied = refused(500, "crun: /etc: Permission denied: OCI permission denied");
        assert!(spec_cannot_start(&docker_missing));
        assert!(spec_cannot_start(&podman_missing) && spec_cannot_start(&podman_denied));
        assert!(!spec_cannot_start(&refused(404, "network x not found")));
        assert!(!spec_cannot_start(&refused(
            500,
            "runc: something else failed"
        )));
        let podman_memory = refused(
            500,
            "runc: runc create failed: unable to start container process: error during container init: error setting cgroup config for procHooks process: unable to set memory limit to 1048576 (current usage: 2715648, peak usage: 2985984): OCI runtime error",
        );
        assert!(spec_cannot_start(&podman_memory));
        // D19: gVisor's runsc says a program is missing in words of its own.
        let runsc_missing = refused(
            500,
            "starting container: starting root container: starting sandbox: error finding executable \"/nope\" in PATH [/bin]: no such file or directory",
        );
        assert!(spec_cannot_start(&runsc_missing));
        // D19: podman names itself among its version's components.
        let component = |name: &str| bollard::models::SystemVersionComponents {
            name: name.to_owned(),
            version: "1".to_owned(),
            details: None,
        };
        let version = |names: &[&str]| bollard::models::SystemVersion {
            components: Some(names.iter().map(|name| component(name)).collect()),
            ..bollard::models::SystemVersion::default()
        };
        assert!(arbitrates_forced_removals(&version(&[
            "Engine",
            "containerd",
            "runc"
        ])));
        assert!(!arbitrates_forced_removals(&version(&["Podman Engine"])));
        assert!(!arbitrates_forced_removals(&version(&["Engine", "podman"])));
        assert!(arbitrates_forced_removals(
            &bollard::models::SystemVersion::default()
        ));
        // D19: a runtime the daemon does not list is docker's 400 on create,
        // read as that, not as the spec's fault.
        let docker_runtime = refused(400, "Unknown runtime specified runsc");
        assert!(unknown_runtime(&docker_runtime));
        assert!(!unknown_runtime(&docker_missing));
        assert!(!unknown_runtime(&refused(
            404,
            "No such image: runtime:latest"
        )));

        let podman_vanished = refused(
            500,
            "container abc does not exist in database: no such container",
        );
        assert!(no_such_container(&podman_vanished));
        assert!(no_such_container(&refused(404, "No such container: abc")));
        assert!(!no_such_container(&refused(
            500,
            "no such container runtime: crun"
        )));
        assert!(!no_such_container(&refused(409, "no such container")));

        // An inspect that raced the container's exit is asked again; any
        // other failure, or the same words under another status, is not.
        let podman_raced = refused(500, "read /proc/4196/cgroup: no such process");
        assert!(process_just_ended(&podman_raced));
        assert!(!no_such_container(&podman_raced));
        assert!(!process_just_ended(&refused(404, "no such process")));
        assert!(!process_just_ended(&refused(
            500,
            "no such process: the daemon gave up"
        )));
        assert!(!process_just_ended(&podman_vanished));

        let docker_running = refused(
            409,
            "You cannot remove a running container abc. Stop the container before attempting removal or force remove",
        );
        let docker_paused = refused(
            409,
            "You cannot remove a paused container abc. Unpause and then stop the container before attempting removal or force remove",
        );
        let podman_running = refused(
            500,
            "cannot remove container abc as it is running - running or paused containers cannot be removed without force: container state improper",
        );
        let docker_progress = refused(409, "removal of container abc is already in progress");
        for running in [&docker_running, &docker_paused, &podman_running] {
            assert!(removal_refused_running(running), "{running}");
            assert!(!removal_in_progress(running), "{running}");
        }
        assert!(removal_in_progress(&docker_progress));
        // Any other 409 is read as a removal under way; a 500 only by its words.
        assert!(removal_in_progress(&refused(409, "Conflict")));
        assert!(removal_in_progress(&refused(
            500,
            "container abc is being removed"
        )));
        assert!(removal_in_progress(&refused(
            500,
            "its removal is already in progress"
        )));
        assert!(!removal_refused_running(&docker_progress));
        assert!(!removal_in_progress(&refused(500, "an error")));
        assert!(!removal_refused_running(&refused(
            400,
            "cannot remove a running container"
        )));

        let docker_paused_already = refused(409, "Container abc is already paused");
        let podman_paused_already =
            refused(500, "\"abc\" is already paused: container state improper");
        let docker_not_running = refused(409, "Container abc is not running");
        let podman_not_running = refused(
            500,
            "\"abc\" is not running, can't pause: container state improper",
        );
        for paused in [&docker_paused_already, &podman_paused_already] {
            assert!(already_paused(paused) && !not_running(paused), "{paused}");
        }
        for ended in [&docker_not_running, &podman_not_running] {
            assert!(not_running(ended) && !already_paused(ended), "{ended}");
        }
        assert!(!not_running(&refused(400, "is not running")));
        assert!(!not_running(&refused(500, "the daemon broke")));

        // podman on runsc, a paused container's forced removal meeting its
        // process's end: asked again, not an error.
        assert!(removal_met_its_end(&refused(
            500,
            "container state improper: stopped"
        )));
        assert!(removal_met_its_end(&refused(
            500,
            "abc: Container State Improper: Stopped"
        )));
        assert!(!removal_met_its_end(&refused(
            409,
            "container state improper: stopped"
        )));
        assert!(!removal_met_its_end(&refused(
            500,
            "container state improper"
        )));
        assert!(!removal_met_its_end(&refused(
            500,
            "stopped: container state improper, again"
        )));
    }
}
