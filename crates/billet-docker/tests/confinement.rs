//! D15 on a real daemon, on docker's and on podman's (D18): what a job's
//! container may do, seen from inside it (busybox reading `/proc/self/status`
//! and the pids cgroup, trying what it must not manage) and in the
//! container's `HostConfig`. Every test runs on docker's daemon and again on
//! podman's service when one answers (`support::podman`), and checks that no
//! container of its scope is left afterwards.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use billet_docker::{
    Confinement, DEFAULT_CAPABILITIES, DEFAULT_PIDS_LIMIT, DockerProvider, NO_NEW_PRIVILEGES,
    STORAGE_CHECK_LABEL, StorageError,
};
use billet_provider::{ErrorKind, Isolation, Provider, Resources, Spec, State, TrustClass};
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{LogsOptionsBuilder, RemoveContainerOptionsBuilder};
use futures::StreamExt;
use support::{
    RUNSC, RUNSC_REQUIRED_VAR, Scope, TEST_IMAGE, TEST_RUN_LABEL, daemon, lists_runsc, podman,
    podman_runsc,
};

/// The default capabilities as a `CapEff` mask: CHOWN (0), DAC_OVERRIDE (1),
/// FOWNER (3), FSETID (4), KILL (5), SETGID (6), SETUID (7),
/// NET_BIND_SERVICE (10).
const DEFAULT_MASK: u64 = 0x4fb;

/// Bits of capabilities a job must not hold by default.
const NET_RAW: u64 = 1 << 13;
const SYS_ADMIN: u64 = 1 << 21;
const SYS_PTRACE: u64 = 1 << 19;
const MKNOD: u64 = 1 << 27;

/// Prints what the job sees of its confinement: its capabilities, its
/// no-new-privileges flag, its user and its pids limit (cgroup v2 or v1).
const SEE: &str = "busybox grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; \
     echo uid=$(busybox id -u); \
     echo pids.max=$(busybox cat /sys/fs/cgroup/pids.max 2>/dev/null || busybox cat /sys/fs/cgroup/pids/pids.max)";

/// The scopes a test runs in: the daemon `DOCKER_HOST` names, and podman's
/// service when one answers; each with the engine that answers on it, asked
/// of the engine itself (the `podman` step of `cargo xtask ci` points
/// `DOCKER_HOST` at podman).
fn engines(test: &str) -> Vec<(&'static str, Scope)> {
    let mut scopes = Vec::new();
    if let Some(scope) = daemon(test) {
        scopes.push((engine_of(&scope), scope));
    }
    if let Some(scope) = podman(&format!("{test}-podman")) {
        scopes.push(("podman", scope));
    }
    scopes
}

/// `podman` when the engine behind `scope` says it is podman, else `docker`.
fn engine_of(scope: &Scope) -> &'static str {
    support::engine_at(scope.socket())
}

/// A trusted spec on the test image running `script` in busybox's shell,
/// its standard error sent to its standard output: an engine may interleave
/// a log's two streams mid-line (podman once gave `sh: forked=30`), and the
/// tests read lines.
fn job(name: &str, script: &str) -> Spec {
    Spec::new(
        name,
        ["busybox", "sh", "-c", &format!("exec 2>&1; {script}")],
    )
    .with_image(TEST_IMAGE)
    .with_trust(TrustClass::Trusted)
    .with_resources(Resources {
        cpus: 1,
        memory_mib: 128,
    })
}

/// A provider of `scope` confined by `confinement`.
fn confined(scope: &Scope, confinement: Confinement) -> DockerProvider {
    scope
        .builder("pool")
        .timeout(Duration::from_secs(30))
        .confinement(confinement)
        .build()
        .expect("a provider")
}

/// Everything a container printed, stdout and stderr interleaved.
async fn output(client: &Docker, id: &str) -> String {
    let options = LogsOptionsBuilder::new().stdout(true).stderr(true).build();
    let mut logs = client.logs(id, Some(options));
    let mut text = Vec::new();
    while let Some(chunk) = logs.next().await {
        text.extend_from_slice(&chunk.expect("read the container's log").into_bytes());
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The container's `HostConfig` as the engine reports it.
async fn host_config(client: &Docker, id: &str) -> HostConfig {
    billet_docker::dialect::inspect_container(client, id)
        .await
        .expect("inspect the container")
        .host_config
        .expect("a host config")
}

/// What a finished job: its output and `HostConfig`, read after it stopped;
/// the container is destroyed before this answers.
struct Ran {
    output: String,
    config: HostConfig,
    /// The OCI runtime the engine says ran it ([`support::runtime_of`]).
    runtime: Option<String>,
}

/// Runs `script` as a job of `provider` to its end (a liveness guard of 60 s),
/// reads what it printed and its `HostConfig`, then destroys it.
async fn run(scope: &Scope, provider: &DockerProvider, name: &str, script: &str) -> Ran {
    run_spec(scope, provider, job(name, script)).await
}

/// [`run`] of a whole spec.
async fn run_spec(scope: &Scope, provider: &DockerProvider, spec: Spec) -> Ran {
    let name = spec.name.clone();
    let name = name.as_str();
    let instance = provider.launch(spec).await.expect("launch");
    let mut stopped = false;
    for _ in 0..600 {
        let found = provider.find(name).await.unwrap().expect("still held");
        if matches!(found.state, State::Stopped { .. }) {
            stopped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = scope.client();
    let ran = Ran {
        output: output(&client, instance.id.as_str()).await,
        config: host_config(&client, instance.id.as_str()).await,
        runtime: support::runtime_of(scope, instance.id.as_str()),
    };
    assert!(stopped, "{name} never stopped; it printed:\n{}", ran.output);
    provider.destroy(&instance.id).await.expect("destroy");
    ran
}

/// The value of `KEY:\tvalue` or `key=value` in a job's output.
fn seen<'a>(output: &'a str, key: &str) -> Option<&'a str> {
    output.lines().find_map(|line| {
        line.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix(':').or_else(|| rest.strip_prefix('=')))
            .map(str::trim)
    })
}

/// A capability mask the job printed.
fn mask(output: &str, key: &str) -> u64 {
    let hex = seen(output, key).unwrap_or_else(|| panic!("no {key} in:\n{output}"));
    u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{key} {hex:?}: {e}"))
}

/// Asserts that the engine was told what every container gets by default:
/// never privileged, no new privileges, the default pids limit.
fn told_the_defaults(config: &HostConfig, engine: &str) {
    assert_eq!(config.privileged, Some(false), "{engine}");
    assert!(
        config
            .security_opt
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|opt| opt == NO_NEW_PRIVILEGES),
        "{engine}"
    );
    assert_eq!(
        config.pids_limit,
        Some(i64::from(DEFAULT_PIDS_LIMIT)),
        "{engine}"
    );
}

/// Asserts that nothing of this scope is left on its engine.
fn nothing_left(engine: &str, scope: &Scope) {
    assert_eq!(scope.leftovers(), Vec::<String>::new(), "left on {engine}");
}

// D15: what a job sees by default: no new privileges, the minimal capability
// set (nothing more to regain: the bounding set is the same), the default
// pids limit; and what the engine was told: never privileged, every
// capability dropped but the default set, a json-file log bounded by size
// and files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_the_default_confinement_is_what_the_job_sees() {
    for (engine, scope) in engines("d15default") {
        let provider = confined(&scope, Confinement::default());
        let ran = run(&scope, &provider, "sees", SEE).await;
        eprintln!(
            "[{engine}] the job saw, by default:\n{}",
            ran.output.trim_end()
        );
        assert_eq!(seen(&ran.output, "NoNewPrivs"), Some("1"), "{engine}");
        assert_eq!(mask(&ran.output, "CapEff"), DEFAULT_MASK, "{engine}");
        assert_eq!(mask(&ran.output, "CapBnd"), DEFAULT_MASK, "{engine}");
        assert_eq!(
            seen(&ran.output, "uid"),
            Some("0"),
            "{engine}: the image's user"
        );
        assert_eq!(
            seen(&ran.output, "pids.max"),
            Some(DEFAULT_PIDS_LIMIT.to_string().as_str()),
            "{engine}"
        );

        let config = ran.config;
        told_the_defaults(&config, engine);
        assert_eq!(config.readonly_rootfs, Some(false), "{engine}");
        let log = config.log_config.expect("a log config");
        assert_eq!(log.typ.as_deref(), Some("json-file"), "{engine}");
        // Docker reports the bounds it was given; podman's compatible
        // inspect leaves them out (it keeps the size: the log test shows it).
        if let Some(options) = log.config.filter(|options| !options.is_empty()) {
            assert_eq!(
                options,
                HashMap::from([
                    ("max-size".to_owned(), (10u64 << 20).to_string()),
                    ("max-file".to_owned(), "3".to_owned()),
                ]),
                "{engine}"
            );
        } else {
            assert_eq!(engine, "podman", "docker reports its log's bounds");
        }
        nothing_left(engine, &scope);
    }
}

// D15: a job cannot fork past its pids limit: a loop starting background
// sleeps fails at the limit ("can't fork"), well short of the hundred it
// tries, and the cgroup shows the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_a_job_cannot_fork_past_its_pids_limit() {
    let script = format!(
        "{SEE}; ( i=0; while [ $i -lt 100 ]; do busybox sleep 60 & i=$((i+1)); echo $i > /forked; done ); \
         read n < /forked; echo forked=$n"
    );
    for (engine, scope) in engines("d15pids") {
        let provider = confined(&scope, Confinement::default().with_pids_limit(32));
        let ran = run(&scope, &provider, "forks", &script).await;
        eprintln!(
            "[{engine}] a job limited to 32 pids saw:\n{}",
            ran.output.trim_end()
        );
        assert_eq!(seen(&ran.output, "pids.max"), Some("32"), "{engine}");
        let forked: u32 = seen(&ran.output, "forked")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{engine}: no count in:\n{}", ran.output));
        assert!(
            (20..32).contains(&forked),
            "{engine}: forked {forked} sleeps under a limit of 32"
        );
        assert!(
            ran.output.contains("can't fork"),
            "{engine}: {}",
            ran.output
        );
        assert_eq!(ran.config.pids_limit, Some(32), "{engine}");
        nothing_left(engine, &scope);
    }
}

// D15: a job cannot regain a dropped capability: NET_RAW, SYS_ADMIN,
// SYS_PTRACE and MKNOD are neither effective nor in the bounding set, so
// `ping` cannot open its raw socket, `mknod` cannot make a device, and
// `setpriv` cannot raise an ambient capability; a pool's `cap_add` grants
// one on top of the default set, and only that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_a_job_cannot_regain_a_dropped_capability() {
    let script = format!(
        "{SEE}; busybox ping -c 1 -W 1 127.0.0.1 >/dev/null 2>&1; echo ping=$?; \
         busybox mknod /null c 1 3; echo mknod=$?; \
         busybox setpriv --inh-caps +sys_admin --ambient-caps +sys_admin busybox true; echo setpriv=$?"
    );
    for (engine, scope) in engines("d15caps") {
        let provider = confined(&scope, Confinement::default());
        let ran = run(&scope, &provider, "caps", &script).await;
        eprintln!(
            "[{engine}] trying dropped capabilities:\n{}",
            ran.output.trim_end()
        );
        for key in ["CapEff", "CapBnd"] {
            let held = mask(&ran.output, key);
            for (name, bit) in [
                ("NET_RAW", NET_RAW),
                ("SYS_ADMIN", SYS_ADMIN),
                ("SYS_PTRACE", SYS_PTRACE),
                ("MKNOD", MKNOD),
            ] {
                assert_eq!(held & bit, 0, "{engine}: {key} holds {name}");
            }
        }
        assert_ne!(
            seen(&ran.output, "ping"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        assert_ne!(
            seen(&ran.output, "mknod"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        assert!(
            ran.output.contains("mknod: /null: Operation not permitted"),
            "{engine}: {}",
            ran.output
        );
        assert_ne!(
            seen(&ran.output, "setpriv"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        let dropped = ran.config.cap_drop.unwrap_or_default();
        assert!(
            dropped.iter().any(|cap| cap == "ALL") || engine == "podman",
            "{engine}: docker keeps the drop of ALL: {dropped:?}"
        );

        // Granted by the pool: NET_RAW on top of the default set.
        let granted = confined(&scope, Confinement::default().with_cap_add(["cap_net_raw"]));
        let ran = run(&scope, &granted, "granted", &script).await;
        eprintln!(
            "[{engine}] with cap_add [cap_net_raw]:\n{}",
            ran.output.trim_end()
        );
        assert_eq!(
            mask(&ran.output, "CapEff"),
            DEFAULT_MASK | NET_RAW,
            "{engine}"
        );
        assert_eq!(
            seen(&ran.output, "ping"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        assert_ne!(seen(&ran.output, "mknod"), Some("0"), "{engine}");
        nothing_left(engine, &scope);
    }
}

/// Makes a setuid-root copy of busybox and a user `job` (uid 1000) with no
/// way to root but that copy: it runs `su root` from the setuid copy as
/// `job`, which reaches uid 0 only if the setuid bit is honoured (root has
/// no password in this `/etc/passwd`, so `su` asks nothing of a caller it
/// runs as root).
const SETUID: &str = "busybox mkdir -p /suid /etc && busybox cp /bin/busybox /suid/busybox && busybox chmod 4755 /suid/busybox; \
     printf 'root::0:0::/:/bin/sh\\njob:x:1000:1000::/:/bin/sh\\n' > /etc/passwd; \
     printf 'root:x:0:\\njob:x:1000:\\n' > /etc/group; \
     busybox su job -c 'echo as=$(busybox id -u); /suid/busybox su root -c \"echo escalated=\\$(busybox id -u)\" </dev/null; echo su=$?'";

// D15: no new privileges: a setuid-root binary does not give a non-root
// process root. A container made by hand without the flag (same capabilities)
// shows the same script reaching uid 0, so the refusal is the flag's; and a
// job run as a pool's non-root `user` sees that user, the flag, and no
// capability beyond the default set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_no_new_privileges_stops_a_setuid_binary() {
    for (engine, scope) in engines("d15setuid") {
        let provider = confined(&scope, Confinement::default());
        let ran = run(&scope, &provider, "setuid", SETUID).await;
        eprintln!(
            "[{engine}] a setuid-root busybox, as uid 1000:\n{}",
            ran.output.trim_end()
        );
        assert_eq!(
            seen(&ran.output, "as"),
            Some("1000"),
            "{engine}: {}",
            ran.output
        );
        assert_eq!(
            seen(&ran.output, "escalated"),
            None,
            "{engine}: {}",
            ran.output
        );
        assert_ne!(
            seen(&ran.output, "su"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        assert!(
            ran.output.contains("must be suid"),
            "{engine}: {}",
            ran.output
        );

        let control = by_hand_without_no_new_privileges(&scope, SETUID).await;
        eprintln!(
            "[{engine}] the same without no-new-privileges:\n{}",
            control.trim_end()
        );
        assert_eq!(
            seen(&control, "escalated"),
            Some("0"),
            "{engine}: {control}"
        );

        let as_user = confined(&scope, Confinement::default().with_user("1000:1000"));
        let ran = run(&scope, &as_user, "user", SEE).await;
        eprintln!(
            "[{engine}] run as user 1000:1000:\n{}",
            ran.output.trim_end()
        );
        assert_eq!(seen(&ran.output, "uid"), Some("1000"), "{engine}");
        assert_eq!(seen(&ran.output, "NoNewPrivs"), Some("1"), "{engine}");
        // Docker clears a non-root user's effective set; podman hands it the
        // granted set. Either way nothing beyond the default set.
        assert_eq!(
            mask(&ran.output, "CapEff") & !DEFAULT_MASK,
            0,
            "{engine}: {}",
            ran.output
        );
        nothing_left(engine, &scope);
    }
}

/// Runs `script` in a container made by hand on `scope`'s engine with the
/// default capabilities but without no-new-privileges (the control), and
/// answers what it printed; the container is removed.
async fn by_hand_without_no_new_privileges(scope: &Scope, script: &str) -> String {
    let client = scope.client();
    let body = ContainerCreateBody {
        image: Some(TEST_IMAGE.to_owned()),
        entrypoint: Some(vec!["busybox".to_owned()]),
        cmd: Some(vec!["sh".to_owned(), "-c".to_owned(), script.to_owned()]),
        labels: Some(HashMap::from([(
            TEST_RUN_LABEL.to_owned(),
            scope.run_id().to_owned(),
        )])),
        host_config: Some(HostConfig {
            network_mode: Some("none".to_owned()),
            cap_drop: Some(vec!["ALL".to_owned()]),
            cap_add: Some(DEFAULT_CAPABILITIES.map(str::to_owned).to_vec()),
            ..HostConfig::default()
        }),
        ..ContainerCreateBody::default()
    };
    let id = client
        .create_container(
            None::<bollard::query_parameters::CreateContainerOptions>,
            body,
        )
        .await
        .expect("create the control")
        .id;
    client
        .start_container(&id, None)
        .await
        .expect("start the control");
    // Its end, however it ends (bollard answers a non-zero exit as an error).
    let _ = client.wait_container(&id, None).collect::<Vec<_>>().await;
    let printed = output(&client, &id).await;
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    client
        .remove_container(&id, Some(options))
        .await
        .expect("remove the control");
    printed
}

// D15: a read-only root cannot be written when the pool sets `read_only`
// (its `/tmp` is a fresh tmpfs the job can write); without it, it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_a_read_only_root_cannot_be_written() {
    let script = "busybox touch /written; echo root=$?; busybox touch /tmp/written; echo tmp=$?";
    for (engine, scope) in engines("d15readonly") {
        let provider = confined(&scope, Confinement::default().with_read_only(true));
        let ran = run(&scope, &provider, "readonly", script).await;
        eprintln!("[{engine}] read_only: true:\n{}", ran.output.trim_end());
        assert_ne!(
            seen(&ran.output, "root"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        assert!(
            ran.output.contains("Read-only file system"),
            "{engine}: {}",
            ran.output
        );
        assert_eq!(
            seen(&ran.output, "tmp"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        assert_eq!(ran.config.readonly_rootfs, Some(true), "{engine}");

        let writable = confined(&scope, Confinement::default());
        let ran = run(&scope, &writable, "writable", script).await;
        assert_eq!(
            seen(&ran.output, "root"),
            Some("0"),
            "{engine}: {}",
            ran.output
        );
        nothing_left(engine, &scope);
    }
}

// D15: the log is bounded: a job printing about 1 MiB under a bound of
// 64 KiB in 2 files leaves no more than the bound (plus a line) on the
// engine; docker's inspect shows the bounds it was given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d15_the_log_is_bounded() {
    // 16384 lines of 64 bytes: 1 MiB.
    let script = "i=0; while [ $i -lt 16384 ]; do \
         echo 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde; i=$((i+1)); done; echo done";
    let bound = 64 << 10;
    for (engine, scope) in engines("d15log") {
        let provider = confined(&scope, Confinement::default().with_log(bound, 2));
        let ran = run(&scope, &provider, "floods", script).await;
        let kept = ran.output.len() as u64;
        eprintln!(
            "[{engine}] of 1 MiB printed under 64 KiB x 2 files, the engine kept {kept} bytes"
        );
        assert!(kept > 0, "{engine}: kept nothing");
        assert!(kept <= 2 * bound + 128, "{engine}: kept {kept} bytes");
        let log = ran.config.log_config.expect("a log config");
        assert_eq!(log.typ.as_deref(), Some("json-file"), "{engine}");
        if engine == "docker" {
            let options = log.config.unwrap_or_default();
            assert_eq!(options.get("max-size").map(String::as_str), Some("65536"));
            assert_eq!(options.get("max-file").map(String::as_str), Some("2"));
        }
        nothing_left(engine, &scope);
    }
}

/// Prints what a job behind gVisor sees besides [`SEE`]: the kernel, how many
/// processes it can see and whether any is the host's, what pid 1 is, the
/// kernel's first words, its memory, and whether its root is writable.
const SEE_BOUNDARY: &str = "echo kernel=$(busybox uname -r); \
     echo procs=$(busybox ps -o pid | busybox tail -n +2 | busybox wc -l); \
     echo host_procs=$(busybox ps -o comm | busybox grep -c -E 'dockerd|containerd|podman|conmon|cargo|runsc'); \
     echo dmesg=$(busybox dmesg | busybox head -n 1); \
     busybox grep MemTotal /proc/meminfo; \
     busybox touch /written 2>/dev/null && echo root=writable || echo root=read-only";

/// A provider of `scope` on gVisor's runtime, taken for a boundary (D19),
/// confined by `confinement`.
fn behind_gvisor(scope: &Scope, confinement: Confinement) -> DockerProvider {
    scope
        .builder("gvisor")
        .timeout(Duration::from_secs(30))
        .runtime(RUNSC)
        .isolation(Isolation::Boundary)
        .confinement(confinement)
        .build()
        .expect("a provider")
}

/// Whether `scope`'s engine would run a container asking for [`RUNSC`] on
/// another runtime: podman's Docker-compatible API runs its service's
/// default, whatever a container asks.
fn ignores_the_runtime(engine: &str, scope: &Scope) -> bool {
    let client = scope.client();
    let info = support::block(async move { client.info().await }).expect("system info");
    engine == "podman" && info.default_runtime.as_deref() != Some(RUNSC)
}

// D19: where the engine would not run a container on the pool's runtime
// (podman's service on its default runc ignores the runtime a container
// asks for), the launch is refused before the container starts, nothing is
// left, and the error says what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d19_a_container_the_engine_would_not_run_on_the_runtime_never_starts() {
    let mut refused_on = 0;
    for (engine, scope) in engines("d19ignored") {
        if !lists_runsc(&scope, "d19ignored") || !ignores_the_runtime(engine, &scope) {
            continue;
        }
        let provider = behind_gvisor(&scope, Confinement::default());
        let spec = job("untrusted", "echo ran").with_trust(TrustClass::Untrusted);
        let err = provider.launch(spec).await.unwrap_err();
        eprintln!("[{engine}, default runtime runc] {err}");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{engine}: {err}");
        assert!(
            err.to_string().contains("did not apply runtime \"runsc\""),
            "{engine}: {err}"
        );
        assert!(provider.list().await.unwrap().is_empty(), "{engine}");
        nothing_left(engine, &scope);
        refused_on += 1;
    }
    if std::env::var(RUNSC_REQUIRED_VAR).as_deref() == Ok("1") {
        assert!(refused_on > 0, "podman's default service was not tried");
    }
}

// D19, D15: an untrusted job on a runsc pool runs, on each engine, behind
// gVisor's kernel (its `uname -r` is gVisor's, not the host's; its kernel
// log is gVisor's), sees only its own processes, and keeps the pool's
// confinement where gVisor honours it: the capability set (effective and
// bounding), the user, the memory limit (its kernel's MemTotal), a
// read-only root; and the engine was told the runtime, never privileged,
// no new privileges and the pids limit. (gVisor's /proc shows no
// NoNewPrivs line and no pids cgroup: those bound the sandbox from the
// host's side.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn d19_an_untrusted_job_behind_gvisor_sees_its_kernel_and_its_confinement() {
    let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .expect("the host's kernel release")
        .trim()
        .to_owned();
    let mut ran_on = 0;
    let mut scopes = engines("d19sees");
    scopes.extend(podman_runsc("d19sees-podman-runsc").map(|scope| ("podman", scope)));
    for (engine, scope) in scopes {
        if !lists_runsc(&scope, "d19sees") || ignores_the_runtime(engine, &scope) {
            continue;
        }
        let script = format!("{SEE}; {SEE_BOUNDARY}");
        let provider = behind_gvisor(&scope, Confinement::default());
        let spec = job("untrusted", &script).with_trust(TrustClass::Untrusted);
        let ran = run_spec(&scope, &provider, spec).await;
        eprintln!(
            "[{engine}, runsc] an untrusted job saw, by default:\n{}",
            ran.output.trim_end()
        );
        let kernel = seen(&ran.output, "kernel").expect("the job's kernel");
        assert_ne!(kernel, host_kernel, "{engine}: the host's kernel");
        assert!(
            seen(&ran.output, "dmesg").is_some_and(|line| line.contains("gVisor")),
            "{engine}: {}",
            ran.output
        );
        let procs: u32 = seen(&ran.output, "procs")
            .and_then(|n| n.parse().ok())
            .expect("a process count");
        assert!((1..=6).contains(&procs), "{engine}: {procs} processes");
        assert_eq!(seen(&ran.output, "host_procs"), Some("0"), "{engine}");
        assert_eq!(mask(&ran.output, "CapEff"), DEFAULT_MASK, "{engine}");
        assert_eq!(mask(&ran.output, "CapBnd"), DEFAULT_MASK, "{engine}");
        assert_eq!(seen(&ran.output, "uid"), Some("0"), "{engine}");
        assert_eq!(seen(&ran.output, "MemTotal"), Some("131072 kB"), "{engine}");
        assert_eq!(seen(&ran.output, "root"), Some("writable"), "{engine}");
        assert_eq!(ran.runtime.as_deref(), Some(RUNSC), "{engine}");
        let config = ran.config;
        told_the_defaults(&config, engine);

        let provider = behind_gvisor(
            &scope,
            Confinement::default()
                .with_user("1000:1000")
                .with_read_only(true)
                .with_memory(64 << 20),
        );
        let spec = job("untrusted-user", &script).with_trust(TrustClass::Unknown);
        let ran = run_spec(&scope, &provider, spec).await;
        eprintln!(
            "[{engine}, runsc] an unclassified job as 1000:1000 on a read-only root saw:\n{}",
            ran.output.trim_end()
        );
        assert_eq!(seen(&ran.output, "uid"), Some("1000"), "{engine}");
        assert_eq!(seen(&ran.output, "root"), Some("read-only"), "{engine}");
        assert_eq!(seen(&ran.output, "MemTotal"), Some("65536 kB"), "{engine}");
        assert_eq!(ran.runtime.as_deref(), Some(RUNSC), "{engine}");
        nothing_left(engine, &scope);
        ran_on += 1;
    }
    eprintln!("d19: ran behind gVisor on {ran_on} engine(s)");
    if std::env::var(RUNSC_REQUIRED_VAR).as_deref() == Ok("1") {
        assert!(ran_on > 0, "no engine ran a job behind gVisor");
    }
}

// L27: a pool's `storage` bound. Where the engine keeps it, `check_storage`
// answers `Ok` and a job's container carries it (read back from its
// `HostConfig`); where it cannot (docker's overlay2 over ext4, as on CI's
// machine; podman alike), the check says so before any job, naming the
// bound, where engines keep one, and the daemon's own words. Either way
// the check leaves no container, and a pool without a bound asks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l27_a_storage_bound_is_kept_or_refused_before_any_job() {
    for (engine, scope) in engines("l27storage") {
        let provider = confined(&scope, Confinement::default().with_storage(64 << 20));
        match provider.check_storage(TEST_IMAGE).await {
            Ok(()) => {
                let ran = run(&scope, &provider, "bounded", "true").await;
                let size = ran
                    .config
                    .storage_opt
                    .and_then(|opt| opt.get("size").cloned());
                assert_eq!(size.as_deref(), Some("67108864"), "{engine}");
                eprintln!("L27 on {engine}: the daemon keeps the bound");
            }
            Err(err @ (StorageError::Refused { .. } | StorageError::Ignored { .. })) => {
                let said = err.to_string();
                assert!(
                    said.contains("`storage: 67108864`") && said.contains("storage drivers"),
                    "{engine}: {said}"
                );
                eprintln!("L27 on {engine}: {said}");
            }
            Err(err) => panic!("{engine}: the daemon could not be asked: {err}"),
        }
        let unbounded = confined(&scope, Confinement::default());
        unbounded
            .check_storage("billet-no-such-image:never")
            .await
            .expect("no bound, nothing asked");
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![format!("{STORAGE_CHECK_LABEL}={}", provider.owner())],
        )]);
        let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let left = scope.client().list_containers(Some(options)).await.unwrap();
        assert!(left.is_empty(), "{engine}: the check left {left:?}");
        nothing_left(engine, &scope);
    }
}
