//! The docker-specific clauses (D1-D7) on a real daemon. Every test skips with
//! one line when no daemon answers, unless `BILLET_DOCKER_REQUIRED=1` (set by
//! `.ci/run`) makes that a failure. Every container a test starts is removed
//! when it ends, also when it fails (`support::Scope`).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use billet_docker::{
    DaemonError, DockerProvider, INSPECT_TRIES, LAUNCH_LABEL, NAME_LABEL, OWNER_LABEL, PullPolicy,
    container_name,
};
use billet_provider::{
    ErrorKind, Instance, InstanceId, Provider, Resources, Spec, State, Teardown, TrustClass,
};
use support::{SocketProxy, TEST_IMAGE, block, create_by_hand, daemon, exists, raw_client};

/// A well-formed launch mark, for containers made by hand to look like a
/// launch billet made (D12: every mark must be there).
const A_MARK: &str = "0123456789abcdef0123456789abcdef";

/// A trusted spec on the test image.
fn job(name: &str, command: &[&str]) -> Spec {
    Spec::new(name, command.iter().copied())
        .with_image(TEST_IMAGE)
        .with_trust(TrustClass::Trusted)
        .with_resources(Resources {
            cpus: 1,
            memory_mib: 64,
        })
}

fn sleeper(name: &str) -> Spec {
    job(name, &["sleep", "300"])
}

/// The answers of two destroys of `id` made at once through `one` and
/// `two`, `Stopped` first.
async fn destroyed_at_once(
    one: &DockerProvider,
    two: &DockerProvider,
    id: &InstanceId,
) -> [Teardown; 2] {
    let (a, b) = tokio::join!(one.destroy(id), two.destroy(id));
    let mut answers = [a.unwrap(), b.unwrap()];
    answers.sort_by_key(|t| *t == Teardown::Absent);
    answers
}

fn names(instances: &[Instance]) -> BTreeSet<String> {
    instances.iter().map(|i| i.name.to_string()).collect()
}

/// Polls `find` until the instance's state satisfies `done`; a liveness guard
/// of 30 s, not a timing assertion.
async fn wait_for(provider: &DockerProvider, name: &str, done: impl Fn(State) -> bool) -> Instance {
    for _ in 0..600 {
        let found = provider.find(name).await.unwrap().expect("still held");
        if done(found.state) {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} never reached the expected state");
}

/// Raw inspection of a container on the daemon.
fn inspect(id: &str) -> bollard::models::ContainerInspectResponse {
    let id = id.to_owned();
    block(async move {
        billet_docker::dialect::inspect_container(&raw_client(), &id)
            .await
            .expect("inspect")
    })
}

// D1: an empty owner is refused, an unreadable endpoint is refused naming the
// forms expected, and kind() is docker. No daemon needed.
#[test]
fn d1_builder_refuses_empty_owner_and_bad_endpoint() {
    for owner in ["", "  "] {
        let err = DockerProvider::new(owner).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidOwner);
    }
    let err = DockerProvider::builder("blue")
        .endpoint("docker.sock")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert!(err.to_string().contains("unix://"), "{err}");
    let err = DockerProvider::builder("blue")
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    let provider = DockerProvider::new("blue").unwrap();
    assert_eq!(provider.kind(), billet_provider::ProviderKind::Docker);
    assert_eq!(provider.owner(), "blue");
    assert_eq!(provider.timeout(), billet_docker::DEFAULT_TIMEOUT);
    assert_eq!(
        provider.endpoint().to_string(),
        "unix:///var/run/docker.sock"
    );
}

// D19: a boundary needs a runtime that can be one: the builder refuses a
// boundary on the daemon's default runtime or on a host-kernel runtime, and
// a blank runtime; a boundary on another runtime accepts every trust class,
// a runtime alone none but trusted work.
#[test]
fn d19_the_builder_refuses_a_boundary_it_cannot_be() {
    use billet_provider::Isolation;
    let build = |runtime: Option<&str>, isolation| {
        let mut builder = DockerProvider::builder("blue").isolation(isolation);
        if let Some(runtime) = runtime {
            builder = builder.runtime(runtime);
        }
        builder.build()
    };
    for (runtime, says) in [
        (None, "needs a runtime"),
        (Some("runc"), "host's kernel"),
        (Some("crun"), "host's kernel"),
        (Some("io.containerd.runc.v2"), "host's kernel"),
        (Some(" "), "not blank"),
    ] {
        let err = build(runtime, Isolation::Boundary).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{runtime:?}");
        assert!(err.to_string().contains(says), "{runtime:?}: {err}");
    }
    assert!(build(Some(""), Isolation::NoBoundary).is_err());
    let gvisor = build(Some("runsc"), Isolation::Boundary).unwrap();
    assert_eq!(
        (gvisor.runtime(), gvisor.isolation()),
        (Some("runsc"), Isolation::Boundary)
    );
    for trust in [
        TrustClass::Trusted,
        TrustClass::Unknown,
        TrustClass::Untrusted,
    ] {
        assert!(gvisor.accepts(trust).is_ok(), "{trust:?}");
    }
    let kata = build(Some("kata"), Isolation::NoBoundary).unwrap();
    assert!(kata.accepts(TrustClass::Trusted).is_ok());
    assert_eq!(
        kata.accepts(TrustClass::Untrusted).unwrap_err().kind(),
        ErrorKind::Refused
    );
    let plain = DockerProvider::builder("blue").build().unwrap();
    assert_eq!(
        (plain.runtime(), plain.isolation()),
        (None, Isolation::NoBoundary)
    );
}

// D19: a provider asks its daemon about its runtime before its first
// launch: one the daemon does not list makes the launch `Unavailable` (not
// the spec's fault) naming what it lists, and leaves nothing; the daemon's
// default runtime named outright is listed, and runs.
#[tokio::test]
async fn d19_a_runtime_the_daemon_does_not_list_runs_nothing() {
    let Some(scope) = daemon("d19unlisted") else {
        return;
    };
    let odd = scope
        .builder("odd")
        .runtime("billet-no-such-runtime")
        .build()
        .unwrap();
    let err = odd.check_runtime().await.unwrap_err();
    assert!(
        matches!(err, billet_docker::RuntimeError::Unlisted { .. }),
        "{err:?}"
    );
    let err = odd.launch(sleeper("job")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string()
            .contains("lists no runtime \"billet-no-such-runtime\""),
        "{err}"
    );
    assert!(odd.list().await.unwrap().is_empty());
    let client = scope.client();
    let default = client
        .info()
        .await
        .unwrap()
        .default_runtime
        .expect("a default runtime");
    let named = scope.builder("named").runtime(default).build().unwrap();
    named.check_runtime().await.unwrap();
    let instance = named.launch(sleeper("job")).await.unwrap();
    named.destroy(&instance.id).await.unwrap();
    assert!(scope.leftovers().is_empty());
}

// D3: only trusted work is accepted, and a refused launch leaves nothing.
#[tokio::test]
async fn d3_accepts_only_trusted_and_refusals_leave_nothing() {
    let Some(scope) = daemon("d3") else { return };
    let blue = scope.provider("blue");
    assert!(blue.accepts(TrustClass::Trusted).is_ok());
    for trust in [TrustClass::Unknown, TrustClass::Untrusted] {
        let err = blue.accepts(trust).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
        assert!(err.to_string().contains("docker") && err.to_string().contains(trust.as_str()));
        let err = blue
            .launch(sleeper("job").with_trust(trust))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Refused);
    }
    assert!(blue.list().await.unwrap().is_empty());
    assert!(scope.leftovers().is_empty());
}

// D2: every container carries the owner and name labels and the derived
// daemon name; D4: the answer carries the full id, the daemon's start time, and
// the spec's image, command, cpus and memory reached the container.
#[tokio::test]
async fn d2_d4_labels_derived_name_full_id_and_start_time() {
    let Some(scope) = daemon("d2d4") else { return };
    let blue = scope.provider("blue");
    let spec = job("job-1", &["sleep", "300"]).with_resources(Resources {
        cpus: 1,
        memory_mib: 48,
    });
    let launched = blue.launch(spec).await.unwrap();
    assert_eq!(launched.state, State::Running);
    assert_eq!(*launched.owner, *scope.owner("blue"));
    assert_eq!(launched.kind, billet_provider::ProviderKind::Docker);
    assert_eq!(launched.id.as_str().len(), 64, "a full container id");

    let raw = inspect(launched.id.as_str());
    assert_eq!(raw.id.as_deref(), Some(launched.id.as_str()));
    let labels = raw.config.as_ref().unwrap().labels.clone().unwrap();
    assert_eq!(labels[OWNER_LABEL], scope.owner("blue"));
    assert_eq!(labels[NAME_LABEL], "job-1");
    assert_eq!(
        raw.name.as_deref(),
        Some(format!("/{}", container_name(&scope.owner("blue"), "job-1")).as_str())
    );
    let started = raw.state.as_ref().unwrap().started_at.clone().unwrap();
    assert_eq!(
        launched.started_at,
        humantime::parse_rfc3339(&started).unwrap()
    );
    let host = raw.host_config.as_ref().unwrap();
    assert_eq!(host.nano_cpus, Some(1_000_000_000));
    assert_eq!(host.memory, Some(48 << 20));
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(raw.path.as_deref(), Some("sleep"));
    assert_eq!(raw.args.as_deref(), Some(&["300".to_owned()][..]));

    // find and list answer the same instance, start time included.
    assert_eq!(blue.find("job-1").await.unwrap(), Some(launched.clone()));
    assert_eq!(blue.list().await.unwrap(), vec![launched]);
}

// D2: names docker's own container names could not hold work, each exactly:
// case, spaces, slashes, non-ASCII, a very long name.
#[tokio::test]
async fn d2_names_docker_could_not_hold() {
    let Some(scope) = daemon("d2names") else {
        return;
    };
    let blue = scope.provider("blue");
    let long = "n".repeat(300);
    let all = ["Job 1", "job 1", "job/1:ß", "ジョブ", long.as_str(), "-x"];
    for name in all {
        let launched = blue.launch(sleeper(name)).await.unwrap();
        assert_eq!(&*launched.name, name);
    }
    let listed = blue.list().await.unwrap();
    assert_eq!(
        names(&listed),
        all.iter().map(|s| (*s).to_owned()).collect()
    );
    for name in all {
        assert_eq!(blue.find(name).await.unwrap().unwrap().name.as_ref(), name);
    }
    for near in ["job 1 ", "JOB 1", "job", "ジョ", "x"] {
        assert_eq!(blue.find(near).await.unwrap(), None, "{near:?}");
    }
}

// D2: a name this deployment holds is a conflict (the held one untouched); the
// same name in another deployment is allowed and invisible. D18: podman
// answers the create `500` ("that name is already in use"), read as the
// conflict it is.
#[tokio::test]
async fn d2_conflict_in_one_deployment_invisible_across() {
    let Some(scope) = daemon("d2conflict") else {
        return;
    };
    let blue = scope.provider("blue");
    let green = scope.provider("green");
    let held = blue.launch(sleeper("job-1")).await.unwrap();
    let err = blue.launch(sleeper("job-1")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("job-1"));
    assert_eq!(blue.find("job-1").await.unwrap(), Some(held.clone()));
    let theirs = green.launch(sleeper("job-1")).await.unwrap();
    assert_ne!(theirs.id, held.id);
    assert_eq!(blue.list().await.unwrap(), vec![held]);
    assert_eq!(green.list().await.unwrap(), vec![theirs]);
}

// D2: two clients of one deployment racing to launch the same name: the
// daemon lets exactly one win, every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d2_two_clients_race_to_launch_one_name() {
    let Some(scope) = daemon("d2race") else {
        return;
    };
    let one = scope.provider("blue");
    let two = scope.provider("blue");
    for round in 0..4 {
        let name = format!("race-{round}");
        let (a, b) = tokio::join!(one.launch(sleeper(&name)), two.launch(sleeper(&name)));
        let oks = [&a, &b].iter().filter(|r| r.is_ok()).count();
        let conflicts = [&a, &b]
            .iter()
            .filter(|r| r.as_ref().is_err_and(|e| e.kind() == ErrorKind::Conflict))
            .count();
        assert_eq!((oks, conflicts), (1, 1), "round {round}: {a:?} {b:?}");
        let winner = a.or(b).unwrap();
        assert_eq!(one.find(&name).await.unwrap(), Some(winner));
    }
    assert_eq!(one.list().await.unwrap().len(), 4);
}

// D4: an image the daemon lacks is InvalidSpec naming it; an empty command or
// image is InvalidSpec; a program the image does not hold is InvalidSpec; none
// of them leaves anything on the daemon. D18: podman answers a missing
// program `500` from start (the OCI runtime's "command not found"), takes a
// memory limit under the floor at create and fails its start, and takes more
// CPUs than the host has as a cap: each is InvalidSpec on both engines.
#[tokio::test]
async fn d4_refused_launches_leave_nothing() {
    let Some(scope) = daemon("d4refused") else {
        return;
    };
    let blue = scope.provider("blue");
    let missing = "billet-no-such-image:never";
    let err = blue
        .launch(sleeper("job").with_image(missing))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    assert!(err.to_string().contains(missing), "{err}");

    let err = blue.launch(job("job", &[])).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    let err = blue
        .launch(sleeper("job").with_image(""))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    let err = blue.launch(sleeper("")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);

    let err = blue
        .launch(job("job", &["/no/such/program"]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{err}");

    // Resources the daemon cannot give (docker's floor is 6 MB of memory, its
    // ceiling the host's CPUs): the daemon's 400, as InvalidSpec (billet
    // refuses the CPUs itself, having read the host's count: podman would
    // take them as a cap).
    for resources in [
        Resources {
            cpus: 1,
            memory_mib: 1,
        },
        Resources {
            cpus: 4096,
            memory_mib: 64,
        },
    ] {
        let err = blue
            .launch(sleeper("job").with_resources(resources))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidSpec, "{resources:?}: {err}");
    }

    assert!(blue.list().await.unwrap().is_empty());
    assert!(scope.leftovers().is_empty(), "{:?}", scope.leftovers());
    // The name is free again: nothing held it.
    blue.launch(sleeper("job")).await.unwrap();
}

// D4: a provider built to pull tries the registry for a missing image (one
// built not to pull never does: see d4_refused_launches_leave_nothing); a
// registry that cannot be reached is Unavailable naming it, and nothing is
// left. (The registry is a closed port on this machine.)
#[tokio::test]
async fn d4_pull_if_missing_from_an_unreachable_registry() {
    let Some(scope) = daemon("d4pull") else {
        return;
    };
    let blue = scope
        .builder("blue")
        .pull(PullPolicy::IfMissing)
        .build()
        .unwrap();
    let image = "127.0.0.1:9/billet-missing:1";
    let err = blue
        .launch(sleeper("job").with_image(image))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("127.0.0.1:9"), "{err}");
    assert!(scope.leftovers().is_empty());
}

// D5: created is Pending, running and paused are Running, exited is Stopped
// with the container's real exit code. D18: podman's `stopped` (exited, its
// clean-up not yet run) is Stopped with the exit code too.
#[tokio::test]
async fn d5_states_and_real_exit_codes() {
    let Some(scope) = daemon("d5states") else {
        return;
    };
    let blue = scope.provider("blue");
    blue.launch(job("exits-3", &["sh", "-c", "exit 3"]))
        .await
        .unwrap();
    blue.launch(job("exits-0", &["true"])).await.unwrap();
    let paused = blue.launch(sleeper("paused")).await.unwrap();
    let running = blue.launch(sleeper("running")).await.unwrap();
    let owner = scope.owner("blue");
    create_by_hand(
        &scope,
        Some(&container_name(&owner, "pending")),
        &[
            (OWNER_LABEL, &owner),
            (NAME_LABEL, "pending"),
            (LAUNCH_LABEL, A_MARK),
        ],
        &["sleep", "300"],
    );
    let id = paused.id.as_str().to_owned();
    block(async move { raw_client().pause_container(&id).await.unwrap() });

    let three = wait_for(&blue, "exits-3", State::is_stopped).await;
    assert_eq!(three.state, State::Stopped { exit_code: 3 });
    let zero = wait_for(&blue, "exits-0", State::is_stopped).await;
    assert_eq!(zero.state, State::Stopped { exit_code: 0 });
    let listed = blue.list().await.unwrap();
    let state = |name: &str| listed.iter().find(|i| *i.name == *name).unwrap().state;
    assert_eq!(state("exits-3"), State::Stopped { exit_code: 3 });
    assert_eq!(state("paused"), State::Running);
    assert_eq!(state("running"), State::Running);
    assert_eq!(state("pending"), State::Pending);
    assert_eq!(listed.len(), 5);
    let _ = running;
}

// D5: list answers exactly this owner's containers, in every state, and no
// one else's; find compares names exactly.
#[tokio::test]
async fn d5_list_is_exact_and_scoped() {
    let Some(scope) = daemon("d5list") else {
        return;
    };
    let blue = scope.provider("blue");
    let green = scope.provider("green");
    let blue_only = scope.provider("blue-2");
    for name in ["a", "b", "c"] {
        blue.launch(sleeper(name)).await.unwrap();
    }
    green.launch(sleeper("a")).await.unwrap();
    // A hand-made container with no labels, and one whose owner label is a
    // prefix of blue's owner: neither is blue's.
    create_by_hand(&scope, None, &[], &["true"]);
    create_by_hand(
        &scope,
        None,
        &[(OWNER_LABEL, &scope.owner("blu")), (NAME_LABEL, "a")],
        &["true"],
    );
    assert_eq!(
        names(&blue.list().await.unwrap()),
        BTreeSet::from(["a".into(), "b".into(), "c".into()])
    );
    assert_eq!(
        names(&green.list().await.unwrap()),
        BTreeSet::from(["a".into()])
    );
    assert!(blue_only.list().await.unwrap().is_empty());
    assert_eq!(blue.find("A").await.unwrap(), None);
}

// D5: when any part of the answer cannot be had (here: the daemon answers the
// list, then hangs on the inspections), the whole list errors; it never
// answers short. Once the daemon answers again, the list is exact.
#[tokio::test]
async fn d5_list_errors_whole_when_an_inspect_fails() {
    let Some(scope) = daemon("d5whole") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let direct = scope.provider("blue");
    for name in ["a", "b", "c"] {
        direct.launch(sleeper(name)).await.unwrap();
    }
    let before = blue.list().await.unwrap();
    for passed in 1..=3 {
        // A provider that has not listed yet: it must inspect every one.
        let blue = scope
            .through("blue", &proxy)
            .timeout(Duration::from_millis(800))
            .build()
            .unwrap();
        proxy.allow(passed);
        let err = blue.list().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
    }
    proxy.restore();
    let mut after = blue.list().await.unwrap();
    let mut before = before;
    after.sort_by(|a, b| a.name.cmp(&b.name));
    before.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(after, before);
}

/// Polls the daemon (not the provider) until container `id` has exited; a
/// liveness guard of 30 s, not a timing assertion.
fn await_exit(id: &str) {
    for _ in 0..600 {
        let state = inspect(id).state.and_then(|s| s.status);
        if state == Some(bollard::models::ContainerStateStatusEnum::EXITED) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("container {id} never exited");
}

fn sorted(mut instances: Vec<Instance>) -> Vec<Instance> {
    instances.sort_by(|a, b| a.name.cmp(&b.name));
    instances
}

// D5 (issue 20): at fleet scale `list` inspects only the containers that are
// new or changed state since this provider last listed; with nothing changed
// it is one daemon request (the list call), and what it answers is still
// exact: a container that exits is inspected once and reported with its real
// exit code; one removed and made again under the same name is inspected
// under its new id; a container of this owner missing a mark, or renamed away
// from its derived name, is never inspected nor reported (D12, D14: the rule
// read from the list call's summary is the inspect's rule).
#[tokio::test]
async fn d5_list_inspects_only_what_changed() {
    let Some(scope) = daemon("d5changed") else {
        return;
    };
    let proxy = SocketProxy::start();
    // `blue` lists through the proxy, which counts its requests; the test
    // launches through `direct`, whose requests are not counted.
    let blue = scope.through("blue", &proxy).build().unwrap();
    let direct = scope.provider("blue");
    let owner = scope.owner("blue");
    for name in ["a", "b", "c"] {
        direct.launch(sleeper(name)).await.unwrap();
    }
    // Exits 7 on SIGTERM (not 0, not a signal's 128 + n).
    let trapper = direct
        .launch(job(
            "d",
            &[
                "sh",
                "-c",
                "trap 'exit 7' TERM; while true; do sleep 0.1; done",
            ],
        ))
        .await
        .unwrap();
    create_by_hand(&scope, None, &[(OWNER_LABEL, &owner)], &["sleep", "300"]);
    let requests = |before: u64| proxy.delivered() - before;

    let before = proxy.delivered();
    let first = sorted(blue.list().await.unwrap());
    assert_eq!(
        requests(before),
        5,
        "the list call and one inspect for each of the 4"
    );
    assert_eq!(first.len(), 4);
    for _ in 0..3 {
        let before = proxy.delivered();
        let again = sorted(blue.list().await.unwrap());
        assert_eq!(requests(before), 1, "nothing changed: the list call alone");
        assert_eq!(again, first);
    }

    // `d` exits 7: one inspect, its exit code exact; then nothing again.
    let id = trapper.id.as_str().to_owned();
    block(async move {
        let options = bollard::query_parameters::KillContainerOptionsBuilder::new()
            .signal("SIGTERM")
            .build();
        raw_client()
            .kill_container(&id, Some(options))
            .await
            .unwrap();
    });
    await_exit(trapper.id.as_str());
    let before = proxy.delivered();
    let listed = sorted(blue.list().await.unwrap());
    assert_eq!(requests(before), 2, "the list call and an inspect of d");
    assert_eq!(&*listed[3].name, "d");
    assert_eq!(listed[3].id, trapper.id);
    assert_eq!(listed[3].state, State::Stopped { exit_code: 7 });
    assert_eq!(listed[..3], first[..3]);
    let before = proxy.delivered();
    assert_eq!(sorted(blue.list().await.unwrap()), listed);
    assert_eq!(requests(before), 1);

    // `b` removed and made again under its name: its new id is inspected.
    assert_eq!(
        direct.destroy(&listed[1].id).await.unwrap(),
        Teardown::Stopped
    );
    let remade = direct.launch(sleeper("b")).await.unwrap();
    assert_ne!(remade.id, listed[1].id);
    let before = proxy.delivered();
    let now = sorted(blue.list().await.unwrap());
    assert_eq!(
        requests(before),
        2,
        "the list call and an inspect of b's new container"
    );
    assert_eq!(now[1], remade);
    assert_eq!(now[0], listed[0]);
    assert_eq!(now[2..], listed[2..]);

    // `c` renamed away from its derived name is no instance (D12), without an
    // inspect; named back, it is again, as it was read.
    let rename = |from: String, to: String| {
        block(async move {
            let options = bollard::query_parameters::RenameContainerOptionsBuilder::new()
                .name(&to)
                .build();
            raw_client().rename_container(&from, options).await.unwrap();
        });
    };
    let c_id = now[2].id.as_str().to_owned();
    let elsewhere = format!("elsewhere-{}", &c_id[..16]);
    rename(c_id.clone(), elsewhere);
    let before = proxy.delivered();
    let without_c = blue.list().await.unwrap();
    assert_eq!(requests(before), 1);
    assert_eq!(
        names(&without_c),
        BTreeSet::from(["a".into(), "b".into(), "d".into()])
    );
    assert_eq!(blue.find("c").await.unwrap(), None, "D14: find agrees");
    rename(c_id, container_name(&owner, "c"));
    let before = proxy.delivered();
    assert_eq!(sorted(blue.list().await.unwrap()), now);
    assert_eq!(requests(before), 1);
}

// D5 (issue 20): a container that exited, was read, then was started again
// by hand and exited with another code is read again by the next list (its
// state is `exited` at both lists, but the list call's status text carries
// the new code): the list never reports the old exit code.
#[tokio::test]
async fn d5_list_reads_again_a_container_run_again_by_hand() {
    let Some(scope) = daemon("d5again") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope.through("blue", &proxy).build().unwrap();
    let direct = scope.provider("blue");
    // First run: exits 7 on SIGTERM; every later run exits 4 at once.
    let twice = direct
        .launch(job(
            "twice",
            &[
                "sh",
                "-c",
                "if [ -f /ran ]; then exit 4; fi; touch /ran; \
                 trap 'exit 7' TERM; while true; do sleep 0.1; done",
            ],
        ))
        .await
        .unwrap();
    let id = twice.id.as_str().to_owned();
    let signalled = id.clone();
    block(async move {
        let options = bollard::query_parameters::KillContainerOptionsBuilder::new()
            .signal("SIGTERM")
            .build();
        raw_client()
            .kill_container(&signalled, Some(options))
            .await
            .unwrap();
    });
    await_exit(&id);
    let first = blue.list().await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].state, State::Stopped { exit_code: 7 });
    let before = proxy.delivered();
    assert_eq!(blue.list().await.unwrap(), first);
    assert_eq!(proxy.delivered() - before, 1, "read once, kept");

    let started = id.clone();
    block(async move { raw_client().start_container(&started, None).await.unwrap() });
    await_exit(&id);
    assert_eq!(
        inspect(&id).state.and_then(|s| s.exit_code),
        Some(4),
        "the second run exited 4"
    );
    let before = proxy.delivered();
    let again = blue.list().await.unwrap();
    assert_eq!(
        proxy.delivered() - before,
        2,
        "the list call and an inspect"
    );
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, twice.id);
    assert_eq!(again[0].state, State::Stopped { exit_code: 4 });
    assert!(
        again[0].started_at > first[0].started_at,
        "{again:?} {first:?}"
    );
}

// D6: this owner's container is removed and answers Stopped; then Absent,
// every time; a full id the daemon never held is Absent.
#[tokio::test]
async fn d6_destroy_own_then_absent() {
    let Some(scope) = daemon("d6own") else { return };
    let blue = scope.provider("blue");
    let running = blue.launch(sleeper("running")).await.unwrap();
    let stopped = blue.launch(job("stopped", &["true"])).await.unwrap();
    wait_for(&blue, "stopped", State::is_stopped).await;
    assert_eq!(blue.destroy(&running.id).await.unwrap(), Teardown::Stopped);
    assert_eq!(blue.destroy(&stopped.id).await.unwrap(), Teardown::Stopped);
    for _ in 0..2 {
        assert_eq!(blue.destroy(&running.id).await.unwrap(), Teardown::Absent);
    }
    assert!(!exists(running.id.as_str()) && !exists(stopped.id.as_str()));
    assert!(blue.list().await.unwrap().is_empty());
    let never: InstanceId = "0".repeat(64).into();
    assert_eq!(blue.destroy(&never).await.unwrap(), Teardown::Absent);
}

/// podman 4.3's answer to an inspect that raced the container's exit.
const RACED_EXIT: &str = "read /proc/4196/cgroup: no such process";

// D18, D5, D6: an inspect answered with podman's "no such process" (the
// container's process ended while the daemon read it) is asked again, at
// most INSPECT_TRIES times in all, so that `find`, `list` and `destroy`
// answer what the daemon holds; past that bound, and for any other 500,
// the call errs with its kind at once.
#[tokio::test]
async fn d18_an_inspect_that_raced_an_exit_is_asked_again_a_bounded_number_of_times() {
    let Some(scope) = daemon("d18raced") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope.through("blue", &proxy).build().unwrap();
    let direct = scope.provider("blue");
    let ended = direct.launch(job("ended", &["true"])).await.unwrap();
    wait_for(&direct, "ended", State::is_stopped).await;

    proxy.refuse_inspects(INSPECT_TRIES - 1, RACED_EXIT);
    let found = blue.find("ended").await.unwrap().expect("found");
    assert_eq!(found.state, State::Stopped { exit_code: 0 });
    assert_eq!(proxy.inspect_refusals_left(), 0);

    proxy.refuse_inspects(INSPECT_TRIES + 1, RACED_EXIT);
    let err = blue.find("ended").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
    assert_eq!(
        proxy.inspect_refusals_left(),
        1,
        "asked {INSPECT_TRIES} times, no more"
    );

    proxy.refuse_inspects(2, "container state improper");
    let err = blue.find("ended").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
    assert_eq!(
        proxy.inspect_refusals_left(),
        1,
        "another 500 is not asked again"
    );

    // A list that must inspect (a provider that never listed) reads it too.
    let fresh = scope.through("blue", &proxy).build().unwrap();
    proxy.refuse_inspects(2, RACED_EXIT);
    let listed = fresh.list().await.unwrap();
    assert_eq!(listed, vec![found.clone()]);
    assert_eq!(proxy.inspect_refusals_left(), 0);

    proxy.refuse_inspects(2, RACED_EXIT);
    assert_eq!(blue.destroy(&ended.id).await.unwrap(), Teardown::Stopped);
    assert_eq!(proxy.inspect_refusals_left(), 0);
    assert!(!exists(ended.id.as_str()));
}

// D18, D19, D5: podman on gVisor refuses the forced removal of a container
// whose process ended as it was being removed ("container state improper:
// stopped", the container left exited; seen in CI on 2026-12-08): the
// destroy asks once more, removes it, and answers `Stopped`. Refused twice,
// the destroy errs, unavailable, and leaves the container to the next one.
#[tokio::test]
async fn d19_a_forced_removal_that_met_its_containers_end_is_asked_once_more() {
    let Some(scope) = daemon("d19metend") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope.through("blue", &proxy).build().unwrap();
    let held = blue.launch(sleeper("job")).await.unwrap();
    proxy.refuse_removals(1, "container state improper: stopped");
    assert_eq!(blue.destroy(&held.id).await.unwrap(), Teardown::Stopped);
    assert_eq!(proxy.removal_refusals_left(), 0);
    assert!(!exists(held.id.as_str()));

    let second = blue.launch(sleeper("other")).await.unwrap();
    proxy.refuse_removals(2, "container state improper: stopped");
    let err = blue.destroy(&second.id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert_eq!(proxy.removal_refusals_left(), 0, "asked twice, no more");
    proxy.refuse_removals(1, "container state improper");
    assert!(
        blue.destroy(&second.id).await.is_err(),
        "another 500 is not asked again"
    );
    assert_eq!(proxy.removal_refusals_left(), 0);
    proxy.restore();
    assert!(blue.destroy(&second.id).await.is_ok());
    assert!(!exists(second.id.as_str()));
}

// D6: an id prefix, the container's daemon name, or another container's
// *name* that looks like a full id never remove anything: only a full id
// compared by the provider names an instance.
#[tokio::test]
async fn d6_prefixes_and_names_remove_nothing() {
    let Some(scope) = daemon("d6prefix") else {
        return;
    };
    let blue = scope.provider("blue");
    let held = blue.launch(sleeper("job")).await.unwrap();
    let daemon_name = container_name(&scope.owner("blue"), "job");
    for reference in [
        &held.id.as_str()[..12],
        &held.id.as_str()[..63],
        daemon_name.as_str(),
        &format!("/{daemon_name}"),
        "job",
        &held.id.as_str().to_uppercase(),
    ] {
        let answer = blue.destroy(&InstanceId::from(reference)).await.unwrap();
        assert_eq!(answer, Teardown::Absent, "{reference}");
        assert!(
            exists(held.id.as_str()),
            "{reference} removed the container"
        );
    }
    // A container whose name is a 64-hex string that is not its id: docker
    // would resolve that string to it; the provider sees the ids differ.
    let lookalike = "ab".repeat(32);
    let owner = scope.owner("blue");
    let other = create_by_hand(
        &scope,
        Some(&lookalike),
        &[(OWNER_LABEL, &owner), (NAME_LABEL, "other")],
        &["true"],
    );
    assert_ne!(other, lookalike);
    assert_eq!(
        blue.destroy(&lookalike.clone().into()).await.unwrap(),
        Teardown::Absent
    );
    assert!(exists(&other));
    // D12: the look-alike carries blue's labels but neither a launch mark nor
    // the derived name: billet did not start it, so only `job` is listed.
    assert_eq!(blue.list().await.unwrap(), vec![held]);
}

// D6: another deployment's container is NotOwned (naming its owner) and left
// untouched; a container billet did not start is refused (NotOwned, no owner)
// and left untouched.
#[tokio::test]
async fn d6_other_owners_and_foreign_containers_untouched() {
    let Some(scope) = daemon("d6owners") else {
        return;
    };
    let blue = scope.provider("blue");
    let green = scope.provider("green");
    let theirs = green.launch(sleeper("job")).await.unwrap();
    let err = blue.destroy(&theirs.id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotOwned);
    match &err {
        billet_provider::Error::NotOwned { id, owner } => {
            assert_eq!(id, &theirs.id);
            assert_eq!(owner, &scope.owner("green"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        green.find("job").await.unwrap().map(|i| i.id),
        Some(theirs.id.clone())
    );

    let foreign = create_by_hand(&scope, None, &[], &["sleep", "300"]);
    let err = blue.destroy(&foreign.clone().into()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotOwned);
    match &err {
        billet_provider::Error::NotOwned { owner, .. } => assert_eq!(owner, ""),
        other => panic!("{other:?}"),
    }
    assert!(exists(&foreign));
}

// D7: a socket that does not exist: every call that needs the daemon answers
// an error of the right kind; the daemon is never needed to refuse bad input.
#[tokio::test]
async fn d7_socket_missing_answers_errors_of_the_right_kind() {
    let blue = DockerProvider::builder("blue")
        .endpoint("unix:///nonexistent/billet/docker.sock")
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    assert_daemon_gone(&blue).await;
    // No daemon is needed to refuse what is refused anyway.
    let err = blue
        .launch(sleeper("job").with_trust(TrustClass::Untrusted))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Refused);
    // Even an id that could never be a container's is confirmed absent only
    // by a daemon that answers.
    let err = blue.destroy(&"abc".into()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
}

/// Every call that needs the daemon answers its kind of error (within a
/// generous guard: the provider's own timeout is what bounds it).
async fn assert_daemon_gone(provider: &DockerProvider) {
    let guard = Duration::from_secs(30);
    let err = tokio::time::timeout(guard, provider.launch(sleeper("job-gone")))
        .await
        .expect("launch returned")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let daemon_cause =
        std::error::Error::source(&err).and_then(|s| s.downcast_ref::<DaemonError>());
    assert!(
        daemon_cause.is_some() || err.to_string().contains("docker daemon"),
        "{err}"
    );
    let err = tokio::time::timeout(guard, provider.list())
        .await
        .expect("list returned")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
    let err = tokio::time::timeout(guard, provider.find("job"))
        .await
        .expect("find returned")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InventoryUnavailable, "{err}");
    let id: InstanceId = "1".repeat(64).into();
    let err = tokio::time::timeout(guard, provider.destroy(&id))
        .await
        .expect("destroy returned")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
}

// D7: a daemon that accepts and never answers: every call answers its error
// once the provider's timeout has passed; after it answers again, the
// inventory is exact.
#[tokio::test]
async fn d7_hung_daemon_answers_within_the_timeout() {
    let Some(scope) = daemon("d7hung") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    // Launched straight to the daemon with the default timeout: starting a
    // container takes this daemon longer than the 400 ms the test bounds by.
    let held = scope
        .provider("blue")
        .launch(sleeper("held"))
        .await
        .unwrap();
    proxy.hang();
    let before = std::time::Instant::now();
    assert_daemon_gone(&blue).await;
    // Four calls, each bounded by the timeout (not a speed claim: a guard that
    // the bound exists at all, with slack for a loaded machine).
    assert!(before.elapsed() < Duration::from_secs(20));
    proxy.restore();
    assert_eq!(blue.list().await.unwrap(), vec![held.clone()]);
    assert_eq!(blue.find("job-gone").await.unwrap(), None);
}

// D7: the daemon is cut mid-run (connects refused, open connections closed):
// every call answers its error, a launch during the cut records nothing, and
// once the connection is restored the inventory is exact.
#[tokio::test]
async fn d7_daemon_cut_mid_run_then_inventory_exact() {
    let Some(scope) = daemon("d7cut") else { return };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let running = blue.launch(sleeper("running")).await.unwrap();
    blue.launch(job("stopped", &["sh", "-c", "exit 7"]))
        .await
        .unwrap();
    wait_for(&blue, "stopped", State::is_stopped).await;
    let mut before = blue.list().await.unwrap();
    proxy.cut();
    assert_daemon_gone(&blue).await;
    let err = blue.destroy(&running.id).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    proxy.restore();
    let mut after = blue.list().await.unwrap();
    before.sort_by(|a, b| a.name.cmp(&b.name));
    after.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(after, before, "nothing lost, nothing invented");
    assert!(exists(running.id.as_str()));
    assert_eq!(blue.find("job-gone").await.unwrap(), None);
}

// D6, D18: two clients destroying the same container at once: exactly one
// removed it (Stopped), the other finds it gone (Absent), whether the daemon
// answered it 404 or 409 (removal already in progress). podman answers two
// forced removals of one running container both `204`: the pause that claims
// a running container is what tells the two destroys apart there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d6_two_destroys_race_one_removes() {
    let Some(scope) = daemon("d6race") else {
        return;
    };
    let one = scope.provider("blue");
    let two = scope.provider("blue");
    for round in 0..3 {
        let held = one.launch(sleeper(&format!("job-{round}"))).await.unwrap();
        assert_eq!(
            destroyed_at_once(&one, &two, &held.id).await,
            [Teardown::Stopped, Teardown::Absent],
            "round {round}"
        );
        assert!(!exists(held.id.as_str()));
    }
    assert!(one.list().await.unwrap().is_empty());
}

// D6, D18: the same race over containers that have ended (the common case: a
// job's container is destroyed once its outcome is read) and one that never
// started: removed without force, which both engines do once, answering the
// other call 404 (podman answers two forced removals both `204`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d18_two_destroys_of_an_ended_container_answer_one_stopped() {
    let Some(scope) = daemon("d18ended") else {
        return;
    };
    let one = scope.provider("blue");
    let two = scope.provider("blue");
    for round in 0..3 {
        let name = format!("ended-{round}");
        let held = one
            .launch(job(&name, &["sh", "-c", "exit 5"]))
            .await
            .unwrap();
        wait_for(&one, &name, State::is_stopped).await;
        assert_eq!(
            destroyed_at_once(&one, &two, &held.id).await,
            [Teardown::Stopped, Teardown::Absent],
            "round {round}"
        );
        assert!(!exists(held.id.as_str()));
    }
    let owner = scope.owner("blue");
    let never = create_by_hand(
        &scope,
        Some(&container_name(&owner, "never")),
        &[
            (OWNER_LABEL, &owner),
            (NAME_LABEL, "never"),
            (LAUNCH_LABEL, A_MARK),
        ],
        &["sleep", "300"],
    );
    let id = InstanceId::from(never.clone());
    assert_eq!(
        destroyed_at_once(&one, &two, &id).await,
        [Teardown::Stopped, Teardown::Absent]
    );
    assert!(!exists(&never));
    assert!(one.list().await.unwrap().is_empty());
}

// D6, D18: a container paused with nobody removing it (by hand here, or by a
// destroy that failed after its pause) is not waited on for ever: the destroy
// that finds it paused waits a quarter of its timeout for another call to
// remove it, then removes it itself. While paused it reads as Running.
#[tokio::test]
async fn d18_a_container_paused_by_hand_is_destroyed_after_the_grace() {
    let Some(scope) = daemon("d18paused") else {
        return;
    };
    let blue = scope
        .builder("blue")
        .timeout(Duration::from_secs(4))
        .build()
        .unwrap();
    let held = blue.launch(sleeper("paused")).await.unwrap();
    let id = held.id.as_str().to_owned();
    block(async move { raw_client().pause_container(&id).await.unwrap() });
    assert_eq!(
        blue.find("paused").await.unwrap().unwrap().state,
        State::Running
    );
    let started = std::time::Instant::now();
    assert_eq!(blue.destroy(&held.id).await.unwrap(), Teardown::Stopped);
    // The grace was waited (a liveness bound, not a timing assertion: it
    // shows the paused branch ran, not how fast).
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(!exists(held.id.as_str()));
    assert_eq!(blue.destroy(&held.id).await.unwrap(), Teardown::Absent);
}

// D6, D18: a destroy whose container is removed by another call after its
// inspect and before its claim (here its calls wait a second each in a slow
// proxy while a second destroy, straight to the daemon, removes it): its
// pause finds nothing (`404`, on both engines) and it answers Absent, never
// an error and never a second Stopped.
#[tokio::test]
async fn d18_a_container_removed_before_the_claim_is_absent() {
    let Some(scope) = daemon("d18vanish") else {
        return;
    };
    let proxy = SocketProxy::start();
    let slow = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let direct = scope.provider("blue");
    let held = direct.launch(sleeper("job")).await.unwrap();
    proxy.slow(Duration::from_secs(1));
    let first = slow.destroy(&held.id);
    let second = async {
        // Once the slow destroy's inspect has reached the daemon, remove it.
        while proxy.delivered() < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        direct.destroy(&held.id).await
    };
    let (a, b) = tokio::join!(first, second);
    assert_eq!(b.unwrap(), Teardown::Stopped);
    assert_eq!(a.unwrap(), Teardown::Absent);
    assert!(!exists(held.id.as_str()));
}

// D5, L6: a container of this owner left `created` (a launch whose start
// never came: its call dropped, or its process killed between create and
// start) is `Pending` while a live launch could still start it, and is then
// finished by the next look, `list` or `find`: started, and reported running.
// Nothing stays `created` for ever, and its command runs once.
#[tokio::test]
async fn d5_a_launch_that_never_started_is_finished_by_the_next_look() {
    let Some(scope) = daemon("d5stale") else {
        return;
    };
    let blue = scope
        .builder("blue")
        // One deadline covers the look and the start it makes (D13): a start
        // takes this daemon a good part of a second.
        .timeout(Duration::from_millis(1_500))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    for name in ["left-by-list", "left-by-find"] {
        create_by_hand(
            &scope,
            Some(&container_name(&owner, name)),
            &[
                (OWNER_LABEL, &owner),
                (NAME_LABEL, name),
                (LAUNCH_LABEL, A_MARK),
            ],
            &["sleep", "300"],
        );
    }
    let listed = blue.list().await.unwrap();
    assert!(
        listed.iter().all(|i| i.state == State::Pending),
        "a live launch could still start them: {listed:?}"
    );
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    let found = blue.find("left-by-find").await.unwrap().expect("held");
    assert_eq!(found.state, State::Running, "find finished its launch");
    let listed = blue.list().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|i| i.state == State::Running),
        "list finished the other: {listed:?}"
    );
    for instance in listed {
        assert_eq!(blue.destroy(&instance.id).await.unwrap(), Teardown::Stopped);
    }
    assert!(scope.leftovers().is_empty());
}

/// The daemon's container of `name` in deployment `owner`, if any: its id and
/// status, straight from the daemon.
fn on_daemon(owner: &str, name: &str) -> Option<(String, String)> {
    let reference = container_name(owner, name);
    block(async move {
        billet_docker::dialect::inspect_container(&raw_client(), &reference)
            .await
            .ok()
            .map(|c| {
                let status = c
                    .state
                    .and_then(|s| s.status)
                    .map(|s| s.to_string())
                    .unwrap_or_default();
                (c.id.unwrap_or_default(), status)
            })
    })
}

// D11: a launch whose answer is lost, at each moment of it (the create, the
// start, the inspect delivered to the daemon and its answer lost, then the
// connection down): the launch answers Unavailable; once the daemon answers
// again, the first list never shows it `Pending`. A container never started
// is gone (nothing left on the daemon, and a relaunch of the name is not
// refused because of it); one whose start reached the daemon is reported
// truthfully (running, its own id), holds its name (a relaunch is a
// conflict), and is destroyable: its command is never run twice.
#[tokio::test]
async fn d11_a_launch_whose_answer_is_lost_leaves_nothing() {
    let Some(scope) = daemon("d11lost") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    // (requests through, then the one whose answer is lost; bytes of it kept)
    let faults: [(u32, Option<usize>); 4] = [(0, None), (1, None), (2, None), (0, Some(12))];
    for (round, (after, keep)) in faults.into_iter().enumerate() {
        let name = format!("job-{round}");
        let before = proxy.delivered();
        match keep {
            None => proxy.lose_answer_after(after),
            Some(bytes) => proxy.cut_answer_after(after, bytes),
        }
        let err = blue.launch(sleeper(&name)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable, "round {round}: {err}");
        assert_eq!(
            proxy.delivered(),
            before + u64::from(after) + 1,
            "round {round}: the lost request reached the daemon"
        );
        assert!(on_daemon(&owner, &name).is_some(), "round {round}: made");
        assert!(proxy.is_cut(), "round {round}");
        // The start, when it reached the daemon, may still be under way.
        let started = after >= 1;
        let (id, status) = loop {
            let (id, status) = on_daemon(&owner, &name).expect("the daemon holds the container");
            if !started || status != "created" {
                break (id, status);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        proxy.restore();
        let listed = blue.list().await.unwrap();
        if started {
            assert_eq!(listed.len(), 1, "round {round}: {listed:?}");
            assert_eq!(listed[0].id.as_str(), id, "round {round}");
            assert_eq!(&*listed[0].name, name, "round {round}");
            assert_eq!(listed[0].state, State::Running, "round {round}");
            assert_eq!(blue.find(&name).await.unwrap().as_ref(), Some(&listed[0]));
            let err = blue.launch(sleeper(&name)).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Conflict, "round {round}: {err}");
            assert_eq!(
                blue.destroy(&listed[0].id).await.unwrap(),
                Teardown::Stopped
            );
        } else {
            assert!(
                listed.is_empty(),
                "round {round} (the container was {status}): {listed:?}"
            );
        }
        assert_eq!(on_daemon(&owner, &name), None, "round {round}: left behind");
        let again = blue.launch(sleeper(&name)).await.unwrap();
        assert_eq!(blue.find(&name).await.unwrap(), Some(again.clone()));
        assert_eq!(blue.destroy(&again.id).await.unwrap(), Teardown::Stopped);
    }
    assert!(scope.leftovers().is_empty(), "{:?}", scope.leftovers());
}

// D18: a destroy whose answer is lost at any exchange (the inspect, the
// look for look-alikes, the version, the claiming pause on an engine that
// does not arbitrate, the removal) never leaves its job frozen: the first
// list once the daemon answers again shows the container gone (the destroy
// happened: a pause it left is finished by that list), or running as before
// (it did not), never paused with nobody to remove it. On docker no pause is
// made; the `podman` step runs it where one is.
#[tokio::test]
async fn d18_a_destroy_whose_answer_is_lost_never_leaves_its_job_frozen() {
    let Some(scope) = daemon("d18frozen") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    for after in 0..7u32 {
        let name = format!("job-{after}");
        let instance = blue.launch(sleeper(&name)).await.unwrap();
        proxy.lose_answer_after(after);
        let answer = blue.destroy(&instance.id).await;
        proxy.restore();
        if let Ok(teardown) = answer {
            // Fewer exchanges than `after`: nothing was lost.
            assert_eq!(teardown, Teardown::Stopped, "after {after}");
        }
        let listed = blue.list().await.unwrap();
        match on_daemon(&owner, &name) {
            None => assert!(listed.is_empty(), "after {after}: {listed:?}"),
            Some((id, status)) => {
                assert_eq!(status, "running", "after {after}: left {status}");
                assert_eq!(listed.len(), 1, "after {after}: {listed:?}");
                assert_eq!(listed[0].id.as_str(), id);
                assert_eq!(
                    blue.destroy(&listed[0].id).await.unwrap(),
                    Teardown::Stopped
                );
            }
        }
        assert_eq!(on_daemon(&owner, &name), None, "after {after}: left behind");
    }
    assert!(scope.leftovers().is_empty(), "{:?}", scope.leftovers());
}

// D11: a lost launch answer is also cleaned up by the first `find` or
// relaunch of its name, whichever comes first, not only by a list.
#[tokio::test]
async fn d11_find_or_relaunch_removes_a_lost_launch_of_the_name() {
    let Some(scope) = daemon("d11find") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    proxy.lose_answer_after(0);
    blue.launch(sleeper("by-find")).await.unwrap_err();
    proxy.restore();
    assert!(on_daemon(&owner, "by-find").is_some());
    assert_eq!(blue.find("by-find").await.unwrap(), None);
    assert_eq!(on_daemon(&owner, "by-find"), None);

    proxy.lose_answer_after(0);
    blue.launch(sleeper("by-launch")).await.unwrap_err();
    proxy.restore();
    let lost = on_daemon(&owner, "by-launch").expect("created, answer lost");
    let again = blue.launch(sleeper("by-launch")).await.unwrap();
    assert_ne!(
        again.id.as_str(),
        lost.0,
        "a new container, not the lost one"
    );
    assert_eq!(blue.list().await.unwrap(), vec![again]);

    // A launch whose create never left (connects refused) is no lost launch:
    // the next launch of its name makes its three calls and no more.
    proxy.cut();
    let err = blue.launch(sleeper("never-sent")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    proxy.restore();
    let before = proxy.delivered();
    blue.launch(sleeper("never-sent")).await.unwrap();
    assert_eq!(proxy.delivered() - before, 3, "create, start, inspect");
}

// D11: a launch whose caller drops it after its create reached the daemon
// (here: the start hangs, and the caller gives up on the call) leaves
// nothing once the provider next looks, and the name is free again.
#[tokio::test]
async fn d11_a_dropped_launch_leaves_nothing() {
    let Some(scope) = daemon("d11drop") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    proxy.allow(1);
    let created = async {
        while proxy.delivered() < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        answered = blue.launch(sleeper("job")) => panic!("the start hangs: {answered:?}"),
        () = created => {}
    }
    // The launch future is dropped here, its create done, its start hanging.
    let (_, status) = on_daemon(&owner, "job").expect("the create reached the daemon");
    assert_eq!(status, "created");
    proxy.restore();
    assert_eq!(blue.list().await.unwrap(), vec![]);
    assert_eq!(on_daemon(&owner, "job"), None);
    let again = blue.launch(sleeper("job")).await.unwrap();
    assert_eq!(blue.list().await.unwrap(), vec![again]);
}

// D11, D5 (issue 20): a list that read a launch's container while the launch
// was still in flight (its create and start done, its inspect hanging) reads
// it again once the launch is given up (dropped), not from its cache: the
// container had started, so it is reported as it is (never removed behind the
// caller's back: its command ran once), holds its name, and is destroyable.
#[tokio::test]
async fn d11_a_started_launch_given_up_is_reported_not_removed() {
    let Some(scope) = daemon("d11kept") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    // The create and the start pass; the launch's inspect hangs.
    proxy.allow(2);
    let started = async {
        while proxy.delivered() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    // Boxed, so that dropping it drops the launch's future (and its guard).
    let mut launch = Box::pin(blue.launch(sleeper("job")));
    tokio::select! {
        answered = &mut launch => panic!("the inspect hangs: {answered:?}"),
        () = started => {}
    }
    let (id, status) = on_daemon(&owner, "job").expect("the launch made its container");
    assert_eq!(status, "running");
    // New requests pass again; the launch's inspect still hangs.
    proxy.restore();
    let listed = blue.list().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].id.as_str(), id);
    assert_eq!(listed[0].state, State::Running);
    // Given up: the launch future is dropped mid-call.
    drop(launch);
    let before = proxy.delivered();
    assert_eq!(blue.list().await.unwrap(), listed);
    assert_eq!(
        proxy.delivered() - before,
        2,
        "a given-up launch's container is inspected again, not read from the cache"
    );
    assert_eq!(on_daemon(&owner, "job").map(|(id, _)| id), Some(id));
    let err = blue.launch(sleeper("job")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert_eq!(
        blue.destroy(&listed[0].id).await.unwrap(),
        Teardown::Stopped
    );
    let again = blue.launch(sleeper("job")).await.unwrap();
    assert_eq!(blue.list().await.unwrap(), vec![again]);
}

// D12: ownership needs every mark. Containers carrying this owner's label but
// missing another mark (the issue's repro: only `billet.owner`; the name
// label without the derived name; the derived name without a launch mark; a
// malformed mark; the derived name of another name) are not billet's:
// `destroy` of their full id refuses them (NotOwned, no owner) and leaves
// them, and neither `list` nor `find` shows them.
#[tokio::test]
async fn d12_destroy_refuses_a_container_missing_any_mark() {
    let Some(scope) = daemon("d12marks") else {
        return;
    };
    let blue = scope.provider("blue");
    let owner = scope.owner("blue");
    let derived = container_name(&owner, "job");
    let only_owner = create_by_hand(&scope, None, &[(OWNER_LABEL, &owner)], &["sleep", "300"]);
    let no_derived_name = create_by_hand(
        &scope,
        None,
        &[
            (OWNER_LABEL, &owner),
            (NAME_LABEL, "job"),
            (LAUNCH_LABEL, A_MARK),
        ],
        &["sleep", "300"],
    );
    let no_mark = create_by_hand(
        &scope,
        Some(&derived),
        &[(OWNER_LABEL, &owner), (NAME_LABEL, "job")],
        &["sleep", "300"],
    );
    let other_name = container_name(&owner, "other");
    let bad_mark = create_by_hand(
        &scope,
        Some(&other_name),
        &[
            (OWNER_LABEL, &owner),
            (NAME_LABEL, "other"),
            (LAUNCH_LABEL, "not-a-mark"),
        ],
        &["sleep", "300"],
    );
    let wrong_derived = create_by_hand(
        &scope,
        Some(&container_name(&owner, "third")),
        &[
            (OWNER_LABEL, &owner),
            (NAME_LABEL, "fourth"),
            (LAUNCH_LABEL, A_MARK),
        ],
        &["sleep", "300"],
    );
    for id in [
        &only_owner,
        &no_derived_name,
        &no_mark,
        &bad_mark,
        &wrong_derived,
    ] {
        let err = blue.destroy(&id.clone().into()).await.unwrap_err();
        match &err {
            billet_provider::Error::NotOwned { owner, .. } => assert_eq!(owner, "", "{id}"),
            other => panic!("{id}: {other:?}"),
        }
        assert!(exists(id), "{id} was removed");
    }
    assert_eq!(blue.list().await.unwrap(), vec![]);
    for name in ["job", "other", "third", "fourth"] {
        assert_eq!(blue.find(name).await.unwrap(), None, "{name}");
    }
}

// D12: destroy never acts through docker's name lookup. The daemon resolves a
// reference as a full id, then as a name: once the container is gone (here a
// second destroy removes it first), a container *named* after its id would be
// removed in its place. With such a look-alike on the daemon, two destroys of
// the id at once remove nothing else, round after round. D18: podman matches
// a name filter against the name without docker's leading `/`; the filter
// that finds the look-alike fits both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d12_two_destroys_and_a_look_alike_named_after_the_id_remove_nothing_else() {
    let Some(scope) = daemon("d12lookalike") else {
        return;
    };
    let one = scope.provider("blue");
    let two = scope.provider("blue");
    for round in 0..3 {
        let held = one.launch(sleeper(&format!("job-{round}"))).await.unwrap();
        let lookalike = create_by_hand(&scope, Some(held.id.as_str()), &[], &["sleep", "300"]);
        let (a, b) = tokio::join!(one.destroy(&held.id), two.destroy(&held.id));
        assert!(
            exists(&lookalike),
            "round {round}: {a:?} {b:?} removed the look-alike"
        );
        // While it exists, neither destroy removes through that id.
        for answer in [&a, &b] {
            let err = answer.as_ref().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Unavailable, "round {round}: {err}");
            assert!(err.to_string().contains(&lookalike), "{err}");
        }
        assert!(exists(held.id.as_str()));
        // Once the look-alike is gone, the destroy goes through.
        let gone = lookalike.clone();
        block(async move {
            let options = bollard::query_parameters::RemoveContainerOptionsBuilder::new()
                .force(true)
                .build();
            raw_client()
                .remove_container(&gone, Some(options))
                .await
                .unwrap();
        });
        assert_eq!(one.destroy(&held.id).await.unwrap(), Teardown::Stopped);
        assert_eq!(two.destroy(&held.id).await.unwrap(), Teardown::Absent);
    }
}

// D13: one deadline per method, not one per daemon call: on a daemon that
// takes 600 ms to answer each request, a launch (create, start, inspect: each
// under the 1.5 s timeout alone, 1.8 s together) answers Unavailable naming
// the deadline; once the daemon is quick again, nothing of it is left but
// what D11 reports.
#[tokio::test]
async fn d13_a_launch_has_one_deadline_not_one_per_daemon_call() {
    let Some(scope) = daemon("d13deadline") else {
        return;
    };
    let proxy = SocketProxy::start();
    let blue = scope
        .through("blue", &proxy)
        .timeout(Duration::from_millis(1_500))
        .build()
        .unwrap();
    proxy.slow(Duration::from_millis(600));
    let err = blue.launch(sleeper("job")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("deadline"), "{err}");
    proxy.restore();
    // D11: what the given-up launch left is gone if it never started, else
    // reported as it is (never `Pending`) and destroyable.
    let listed = blue.list().await.unwrap();
    assert!(listed.len() <= 1, "{listed:?}");
    for instance in &listed {
        assert_eq!(&*instance.name, "job");
        assert_ne!(instance.state, State::Pending, "{instance:?}");
        assert_eq!(blue.destroy(&instance.id).await.unwrap(), Teardown::Stopped);
    }
    assert_eq!(on_daemon(&scope.owner("blue"), "job"), None);
}

// D13: a start the daemon refuses for a reason that is not the spec's (the
// provider's network does not exist: the daemon answers 404) is Unavailable,
// not InvalidSpec, naming the network; nothing is left.
#[tokio::test]
async fn d13_a_start_refused_for_a_missing_network_is_unavailable() {
    let Some(scope) = daemon("d13network") else {
        return;
    };
    let blue = scope
        .builder("blue")
        .network("billet-no-such-network")
        .build()
        .unwrap();
    let err = blue.launch(sleeper("job")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("billet-no-such-network"), "{err}");
    assert!(scope.leftovers().is_empty(), "{:?}", scope.leftovers());
}

/// A container made by hand for D14: the name asked for, the daemon-side name
/// (if any), and its labels besides the owner's.
type LookAlike<'a> = (&'a str, Option<String>, Vec<(&'a str, &'a str)>);

// D14: `find` and `list` apply one rule, so they agree on every container:
// built by hand, one with every mark (billet's, as a launch would leave it),
// and look-alikes each missing one (no name label, the derived name of
// another name, another owner's derived name, no launch mark, a malformed
// mark), another deployment's, and one billet made whose launch never
// started. Whatever `list` reports `find` finds under its name, and the
// reverse.
#[tokio::test]
async fn d14_find_and_list_agree_on_every_look_alike() {
    let Some(scope) = daemon("d14agree") else {
        return;
    };
    let blue = scope
        .builder("blue")
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let owner = scope.owner("blue");
    let green = scope.owner("green");
    let cases: Vec<LookAlike<'_>> = vec![
        (
            "whole",
            Some(container_name(&owner, "whole")),
            vec![(NAME_LABEL, "whole"), (LAUNCH_LABEL, A_MARK)],
        ),
        (
            "no-name-label",
            Some(container_name(&owner, "no-name-label")),
            vec![(LAUNCH_LABEL, A_MARK)],
        ),
        (
            "wrong-derived",
            Some(container_name(&owner, "something-else")),
            vec![(NAME_LABEL, "wrong-derived"), (LAUNCH_LABEL, A_MARK)],
        ),
        (
            "green-derived",
            Some(container_name(&green, "green-derived")),
            vec![(NAME_LABEL, "green-derived"), (LAUNCH_LABEL, A_MARK)],
        ),
        (
            "no-mark",
            Some(container_name(&owner, "no-mark")),
            vec![(NAME_LABEL, "no-mark")],
        ),
        (
            "bad-mark",
            Some(container_name(&owner, "bad-mark")),
            vec![(NAME_LABEL, "bad-mark"), (LAUNCH_LABEL, "x")],
        ),
        (
            "no-name",
            None,
            vec![(NAME_LABEL, "no-name"), (LAUNCH_LABEL, A_MARK)],
        ),
    ];
    for (_, container, labels) in &cases {
        let mut all = vec![(OWNER_LABEL, owner.as_str())];
        all.extend(labels.iter().copied());
        create_by_hand(&scope, container.as_deref(), &all, &["sleep", "300"]);
    }
    // Another deployment's, whole: blue sees none of it.
    create_by_hand(
        &scope,
        Some(&container_name(&green, "theirs")),
        &[
            (OWNER_LABEL, &green),
            (NAME_LABEL, "theirs"),
            (LAUNCH_LABEL, A_MARK),
        ],
        &["sleep", "300"],
    );
    let all_names: Vec<&str> = cases
        .iter()
        .map(|(name, _, _)| *name)
        .chain(["theirs"])
        .collect();
    let agree = |listed: &[Instance], found: &[(String, Option<Instance>)]| {
        for (name, instance) in found {
            let in_list = listed.iter().find(|i| *i.name == **name);
            assert_eq!(
                in_list.map(|i| &i.id),
                instance.as_ref().map(|i| &i.id),
                "{name}: list {listed:?}, find {instance:?}"
            );
        }
        for instance in listed {
            assert!(
                found
                    .iter()
                    .any(|(n, f)| **n == *instance.name && f.is_some()),
                "{instance:?} listed, not found"
            );
        }
    };
    let listed = blue.list().await.unwrap();
    let mut found = Vec::new();
    for name in &all_names {
        found.push(((*name).to_owned(), blue.find(name).await.unwrap()));
    }
    agree(&listed, &found);
    assert_eq!(names(&listed), BTreeSet::from(["whole".to_owned()]));
    // Past the window a live launch has (twice the timeout), the one whose
    // launch never started is finished by both, the same way.
    tokio::time::sleep(Duration::from_millis(4_100)).await;
    let found_first = blue.find("whole").await.unwrap().expect("still held");
    assert_eq!(found_first.state, State::Running);
    let listed = blue.list().await.unwrap();
    let mut found = Vec::new();
    for name in &all_names {
        found.push(((*name).to_owned(), blue.find(name).await.unwrap()));
    }
    agree(&listed, &found);
    assert_eq!(listed, vec![found_first]);
    // A list that reuses what it read (nothing changed) answers the same.
    assert_eq!(blue.list().await.unwrap(), listed);
}

/// A registry on 127.0.0.1 (which the daemon speaks plain HTTP to) that holds
/// no image: it answers the API check, and every other request, after
/// `delay`, with the registry API's 404; it records the paths it was asked.
struct EmptyRegistry {
    port: u16,
    paths: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl EmptyRegistry {
    fn start(delay: Duration) -> EmptyRegistry {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let paths = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&paths);
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((conn, _)) = listener.accept().await else {
                    continue;
                };
                let seen = std::sync::Arc::clone(&seen);
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                        let seen = std::sync::Arc::clone(&seen);
                        async move {
                            let path = request.uri().path().to_owned();
                            seen.lock().push(path.clone());
                            let answer = hyper::Response::builder()
                                .header("Docker-Distribution-Api-Version", "registry/2.0")
                                .header("Content-Type", "application/json");
                            let answer = if path == "/v2/" {
                                answer.status(200).body("{}".to_owned())
                            } else {
                                tokio::time::sleep(delay).await;
                                answer.status(404).body(
                                    r#"{"errors":[{"code":"NAME_UNKNOWN","message":"repository name not known to registry"}]}"#
                                        .to_owned(),
                                )
                            };
                            answer.map(|a| a.map(|text| http_body_util::Full::new(bytes::Bytes::from(text))))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(conn), service)
                        .await;
                });
            }
        });
        EmptyRegistry {
            port,
            paths,
            runtime: Some(runtime),
        }
    }
}

impl Drop for EmptyRegistry {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

// D13: a pull has its own bound, apart from the launch's deadline: a registry
// that takes 1.5 s to answer is waited for by a provider whose calls have 1 s
// (its answer, that it does not know the image, comes through), and not by
// one whose pull bound is 300 ms (Unavailable, the pull's deadline). An image named without a tag is pulled
// as `latest`, never as every tag. Nothing is left either way.
#[tokio::test]
async fn d13_a_pull_has_its_own_bound_and_an_untagged_image_means_latest() {
    let Some(scope) = daemon("d13pull") else {
        return;
    };
    let registry = EmptyRegistry::start(Duration::from_millis(1_500));
    let image = format!("127.0.0.1:{}/billet-absent", registry.port);
    let patient = scope
        .builder("blue")
        .pull(PullPolicy::IfMissing)
        .timeout(Duration::from_secs(1))
        .pull_timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let err = patient
        .launch(sleeper("job").with_image(&image))
        .await
        .unwrap_err();
    // The registry's own answer came, past the launch's 1 s: the pull was
    // bounded by its own bound. (This daemon answers a registry's 404 with a
    // 500 naming it, so the kind is the daemon's, Unavailable.)
    assert!(err.to_string().contains("name unknown"), "{err}");
    assert!(!err.to_string().contains("deadline"), "{err}");
    let paths = registry.paths.lock().clone();
    assert!(
        paths.contains(&"/v2/billet-absent/manifests/latest".to_owned()),
        "{paths:?}"
    );
    assert!(!paths.iter().any(|p| p.contains("tags/list")), "{paths:?}");

    let hasty = scope
        .builder("blue")
        .pull(PullPolicy::IfMissing)
        .pull_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = hasty
        .launch(sleeper("job").with_image(&image))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        err.to_string().contains("pull image") && err.to_string().contains("deadline"),
        "{err}"
    );
    assert!(scope.leftovers().is_empty(), "{:?}", scope.leftovers());
}

// D12: the container a destroy inspected disappears before its removal (here
// a second destroy, straight to the daemon, removes it while the first one's
// calls wait a second each in a slow proxy), and a container named after its
// id is on the daemon: the first destroy's removal must not fall through to
// that look-alike by name. Nothing but the destroyed container is removed.
#[tokio::test]
async fn d12_a_destroy_whose_container_vanishes_in_between_removes_no_look_alike() {
    let Some(scope) = daemon("d12between") else {
        return;
    };
    let proxy = SocketProxy::start();
    let slow = scope
        .through("blue", &proxy)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let direct = scope.provider("blue");
    let held = direct.launch(sleeper("job")).await.unwrap();
    let lookalike = create_by_hand(&scope, Some(held.id.as_str()), &[], &["sleep", "300"]);
    proxy.slow(Duration::from_secs(1));
    let first = slow.destroy(&held.id);
    let second = async {
        // Once the first destroy has inspected the container, remove it.
        while proxy.delivered() < 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        direct.destroy(&held.id).await
    };
    let (a, b) = tokio::join!(first, second);
    assert!(
        exists(&lookalike),
        "{a:?} {b:?}: the look-alike was removed"
    );
}

// D16, B12: a burst of launches takes turns at the daemon, so that the looks
// and removals that end jobs are not held up behind it: with a bound of 2,
// six launches at once never have more than two creates at the daemon, and
// every one of them launches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d16_b12_a_burst_of_launches_takes_turns_at_the_daemon() {
    let Some(scope) = daemon("d16turns") else {
        return;
    };
    let proxy = SocketProxy::start();
    let provider = scope
        .through("blue", &proxy)
        .launches_at_once(2)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // Each request waits in the proxy, so launches that run together
    // overlap at the daemon.
    proxy.slow(Duration::from_millis(200));
    let launches = (0..6).map(|i| provider.launch(sleeper(&format!("turn-{i}"))));
    let launched = futures::future::join_all(launches).await;
    assert!(launched.iter().all(Result::is_ok), "{launched:?}");
    assert_eq!(proxy.peak_creates(), 2);
    proxy.restore();
    let listed = provider.list().await.unwrap();
    assert_eq!(listed.len(), 6);
}

// P2: the spec's environment reaches the container's process as written;
// an environment no process can hold is refused before the daemon is asked,
// naming the variable and never its value, and leaves nothing.
#[tokio::test]
async fn p2_the_environment_reaches_the_container_and_a_bad_one_is_refused() {
    let Some(scope) = daemon("p2env") else { return };
    let blue = scope.provider("blue");
    let env: billet_provider::Environment = [
        ("ACTIONS_RUNNER_INPUT_JITCONFIG", "eyJzZWNyZXQiOiJ5ZXMifQ=="),
        ("SPACED", "a b=c"),
    ]
    .into_iter()
    .collect();
    let launched = blue
        .launch(sleeper("with-env").with_env(env))
        .await
        .unwrap();
    let raw = inspect(launched.id.as_str());
    let held = raw.config.as_ref().unwrap().env.clone().unwrap_or_default();
    assert!(
        held.contains(&"ACTIONS_RUNNER_INPUT_JITCONFIG=eyJzZWNyZXQiOiJ5ZXMifQ==".to_owned()),
        "{held:?}"
    );
    assert!(held.contains(&"SPACED=a b=c".to_owned()), "{held:?}");

    let bad: billet_provider::Environment = [("SECRET", "s3cr3t\0tail")].into_iter().collect();
    let err = blue
        .launch(sleeper("bad-env").with_env(bad))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidSpec);
    assert!(err.to_string().contains("SECRET"), "{err}");
    assert!(!err.to_string().contains("s3cr3t"), "{err}");
    assert_eq!(blue.find("bad-env").await.unwrap(), None);
    assert_eq!(
        names(&blue.list().await.unwrap()),
        BTreeSet::from(["with-env".to_owned()])
    );
}
