//! The docker-specific clauses (D1-D7) on a real daemon. Every test skips with
//! one line when no daemon answers, unless `BILLET_DOCKER_REQUIRED=1` (set by
//! `.ci/run`) makes that a failure. Every container a test starts is removed
//! when it ends, also when it fails (`support::Scope`).

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use billet_docker::{
    DaemonError, DockerProvider, LAUNCH_LABEL, NAME_LABEL, OWNER_LABEL, PullPolicy, container_name,
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

fn names(instances: &[Instance]) -> BTreeSet<String> {
    instances.iter().map(|i| i.name.clone()).collect()
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
        raw_client()
            .inspect_container(&id, None)
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
    assert_eq!(launched.owner, scope.owner("blue"));
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
        assert_eq!(launched.name, name);
    }
    let listed = blue.list().await.unwrap();
    assert_eq!(
        names(&listed),
        all.iter().map(|s| (*s).to_owned()).collect()
    );
    for name in all {
        assert_eq!(blue.find(name).await.unwrap().unwrap().name, name);
    }
    for near in ["job 1 ", "JOB 1", "job", "ジョ", "x"] {
        assert_eq!(blue.find(near).await.unwrap(), None, "{near:?}");
    }
}

// D2: a name this deployment holds is a conflict (the held one untouched); the
// same name in another deployment is allowed and invisible.
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
// of them leaves anything on the daemon.
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
    // ceiling the host's CPUs): the daemon's 400, as InvalidSpec.
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
// with the container's real exit code.
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
    let state = |name: &str| listed.iter().find(|i| i.name == name).unwrap().state;
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
        .builder("blue")
        .endpoint(proxy.endpoint())
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let direct = scope.provider("blue");
    for name in ["a", "b", "c"] {
        direct.launch(sleeper(name)).await.unwrap();
    }
    let before = blue.list().await.unwrap();
    for passed in 1..=3 {
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
        .builder("blue")
        .endpoint(proxy.endpoint())
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
        .builder("blue")
        .endpoint(proxy.endpoint())
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

// D6: two clients destroying the same container at once: exactly one removed
// it (Stopped), the other finds it gone (Absent), whether the daemon answered
// it 404 or 409 (removal already in progress).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d6_two_destroys_race_one_removes() {
    let Some(scope) = daemon("d6race") else {
        return;
    };
    let one = scope.provider("blue");
    let two = scope.provider("blue");
    for round in 0..3 {
        let held = one.launch(sleeper(&format!("job-{round}"))).await.unwrap();
        let (a, b) = tokio::join!(one.destroy(&held.id), two.destroy(&held.id));
        let mut answers = [a.unwrap(), b.unwrap()];
        answers.sort_by_key(|t| *t == Teardown::Absent);
        assert_eq!(
            answers,
            [Teardown::Stopped, Teardown::Absent],
            "round {round}"
        );
        assert!(!exists(held.id.as_str()));
    }
    assert!(one.list().await.unwrap().is_empty());
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
