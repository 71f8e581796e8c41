//! D8 (H1, H7, H8): the contract suite of `billet-conformance` against
//! `DockerProvider` on a real daemon, in wall time, with whole-connection
//! outages made by really cutting each provider's connection: every provider
//! talks to the daemon through a socket proxy this test owns.
//!
//! D17: the same suite, sequential and concurrent, against a daemon of the
//! test's own reached over mutual TLS, each provider through a TCP proxy
//! that cuts its connections for the outages.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use billet_conformance::{
    ConcurrentConfig, ContractConfig, Deployment, Fixture, FixtureError, Outage, Policies,
    ProviderFactory, Timing, WallWindows, async_trait, check_capabilities, check_concurrent,
    check_contract,
};
use billet_docker::{ClientTls, DockerProvider, OWNER_LABEL};
use billet_provider::Isolation;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use parking_lot::Mutex;
use support::tls::{Ca, TcpProxy, TlsDaemon, can_start_daemons, client_tls};
use support::{
    RUNSC, Scope, SocketProxy, TEST_IMAGE, daemon, engine_at, lists_runsc, podman_runsc,
};

/// The windows the docker backend declares, from what this daemon does:
///
/// * `pending`: none. `launch` creates and starts the container before it
///   answers, so no container of a finished launch is `created`.
/// * `around_end`: 500 ms. The daemon's `StartedAt` is taken after the runtime
///   has started the process, and an exit reaches the daemon through the
///   runtime shim; both are milliseconds here, and `list` inspects every
///   container, which takes a few milliseconds more. But while `cargo xtask
///   ci`'s test step runs every test binary at once on two cores, a daemon
///   once still said `running` 340 ms after a 900 ms job's end (it was 300
///   ms then). 500 ms leaves room for that and keeps a case to seconds (run
///   times of 0, 0.3, 0.9 and 1.8 s, moves of 0.15 to 1.2 s).
const WINDOWS: WallWindows = WallWindows {
    pending: Duration::ZERO,
    around_end: Duration::from_millis(500),
};

/// Every daemon call's bound in the suite's providers.
const TIMEOUT: Duration = Duration::from_secs(10);

/// How a deployment's provider reaches the daemon: through a socket proxy
/// (the local daemon), or through a TCP proxy over mutual TLS (D17).
enum Link {
    Socket(SocketProxy),
    Tls(TcpProxy),
}

impl Link {
    fn endpoint(&self) -> String {
        match self {
            Link::Socket(proxy) => proxy.endpoint(),
            Link::Tls(proxy) => proxy.endpoint.clone(),
        }
    }

    /// Whether every request delivered has been answered. A TCP proxy
    /// cannot read TLS, so it is taken as idle: the TLS runs make outages
    /// only between calls (sequential) or none (concurrent).
    fn is_idle(&self) -> bool {
        match self {
            Link::Socket(proxy) => proxy.is_idle(),
            Link::Tls(_) => true,
        }
    }

    fn cut(&self) {
        match self {
            Link::Socket(proxy) => proxy.cut(),
            Link::Tls(proxy) => proxy.cut(),
        }
    }

    fn restore(&self) {
        match self {
            Link::Socket(proxy) => proxy.restore(),
            Link::Tls(proxy) => proxy.restore(),
        }
    }
}

/// A daemon of the test's own on loopback with `--tlsverify`, and the
/// client's side of its mutual TLS.
struct Tls {
    daemon: TlsDaemon,
    client: ClientTls,
    _files: tempfile::TempDir,
}

/// Two deployments over the one daemon, each behind a proxy of its own.
struct DockerFactory {
    scope: Scope,
    next: AtomicU64,
    proxies: Mutex<HashMap<String, Link>>,
    /// Set: every provider goes over mutual TLS to this daemon (D17).
    tls: Option<Tls>,
    /// Set: every provider runs its containers on gVisor, a boundary (D19).
    gvisor: bool,
    /// Whether the engine says why a start failed when the program is not
    /// in the image. Podman on gVisor does not: it answers only "`runsc
    /// start ID` failed: exit status 128", which no reading can tell from a
    /// sandbox that failed to boot, so the launch is `Unavailable` (not the
    /// spec's fault, D13) rather than `InvalidSpec`.
    says_missing_program: bool,
}

impl DockerFactory {
    fn on_local(scope: Scope) -> DockerFactory {
        DockerFactory {
            scope,
            next: AtomicU64::new(0),
            proxies: Mutex::new(HashMap::new()),
            tls: None,
            gvisor: false,
            says_missing_program: true,
        }
    }

    /// A factory over the engine of `scope`, every provider on gVisor's
    /// runtime and taken for a boundary (D19).
    fn behind_gvisor(scope: Scope) -> DockerFactory {
        DockerFactory {
            gvisor: true,
            says_missing_program: engine_at(scope.socket()) != "podman",
            ..DockerFactory::on_local(scope)
        }
    }

    /// A factory over a TLS daemon of its own, or `None` where this
    /// machine cannot start one (a failure with `BILLET_DOCKER_REQUIRED=1`).
    fn on_tls(test: &str) -> Option<DockerFactory> {
        if !can_start_daemons(test) {
            return None;
        }
        let ca = Ca::new("billet test CA");
        let daemon = TlsDaemon::start(test, &ca);
        let files = tempfile::tempdir().expect("a directory for the client's files");
        let client = client_tls(&ca, files.path());
        Some(DockerFactory {
            scope: daemon.scope(test),
            next: AtomicU64::new(0),
            proxies: Mutex::new(HashMap::new()),
            tls: Some(Tls {
                daemon,
                client,
                _files: files,
            }),
            gvisor: false,
            says_missing_program: true,
        })
    }

    /// A provider for `owner` through `link`.
    fn provider(&self, owner: &str, link: &Link) -> Result<DockerProvider, FixtureError> {
        let mut builder = DockerProvider::builder(owner.to_owned())
            .endpoint(link.endpoint())
            .timeout(TIMEOUT)
            .network("none");
        if let Some(tls) = &self.tls {
            builder = builder.tls(tls.client.clone());
        }
        if self.gvisor {
            builder = builder.runtime(RUNSC).isolation(Isolation::Boundary);
        }
        Ok(builder.build()?)
    }

    fn deployment(&self, tag: &str) -> Result<Deployment<DockerProvider>, FixtureError> {
        let owner = self.scope.owner(tag);
        let link = match &self.tls {
            Some(tls) => Link::Tls(TcpProxy::start(&tls.daemon.endpoint)),
            None => Link::Socket(SocketProxy::to(self.scope.socket().to_path_buf())),
        };
        let provider = self.provider(&owner, &link)?;
        self.proxies.lock().insert(owner.clone(), link);
        Ok(Deployment { owner, provider })
    }

    /// Runs `act` on the link between `deployment`'s provider and the daemon.
    fn with_proxy(
        &self,
        deployment: &Deployment<DockerProvider>,
        act: impl FnOnce(&Link),
    ) -> Result<(), FixtureError> {
        let proxies = self.proxies.lock();
        let proxy = proxies
            .get(&deployment.owner)
            .ok_or_else(|| format!("no proxy for {}", deployment.owner))?;
        act(proxy);
        Ok(())
    }
}

#[async_trait]
impl ProviderFactory for DockerFactory {
    type Provider = DockerProvider;

    /// No isolation boundary, authoritative (`Absent`), every non-empty name;
    /// an empty command and a program the image lacks are refused; an
    /// outage cuts the whole connection.
    fn policies(&self) -> Policies {
        Policies {
            // D19: on gVisor every trust class is taken.
            isolation: self.gvisor,
            invalid_commands: if self.says_missing_program {
                &[&[], &["/no/such/program"]]
            } else {
                &[&[]]
            },
            outage: Outage::WholeConnection,
            // A TCP proxy cannot see where one request ends in TLS, so it
            // cannot lose one answer: that is proven over the socket.
            mid_call: self.tls.is_none(),
            ..Policies::STRICT
        }
    }

    async fn build(&self) -> Result<Fixture<DockerProvider>, FixtureError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Ok(Fixture {
            blue: self.deployment(&format!("blue-{n}"))?,
            green: self.deployment(&format!("green-{n}"))?,
            timing: Timing::Wall(WINDOWS),
        })
    }

    async fn set_outage(
        &self,
        deployment: &Deployment<DockerProvider>,
        down: bool,
    ) -> Result<(), FixtureError> {
        if !down {
            // The daemon is back once it has answered everything the proxy
            // delivered: a request whose caller saw the connection cut may
            // still be at work on it (H12 checks that its effect lands by the
            // outage's end).
            let limit = Instant::now() + Duration::from_secs(30);
            loop {
                let mut idle = false;
                self.with_proxy(deployment, |proxy| idle = proxy.is_idle())?;
                if idle {
                    break;
                }
                if Instant::now() > limit {
                    return Err(format!(
                        "the proxy of {} still waits for the daemon after 30 s",
                        deployment.owner
                    )
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        self.with_proxy(deployment, |proxy| {
            if down {
                proxy.cut();
            } else {
                proxy.restore();
            }
        })
    }

    /// H11: the deployment's proxy passes `after` requests with their
    /// answers, delivers the next to the daemon and loses its answer, then
    /// refuses everything until `set_outage(false)` restores it.
    async fn lose_answer(
        &self,
        deployment: &Deployment<DockerProvider>,
        after: u32,
    ) -> Result<(), FixtureError> {
        self.with_proxy(deployment, |link| match link {
            Link::Socket(proxy) => proxy.lose_answer_after(after),
            Link::Tls(_) => unreachable!("mid_call is off over TLS"),
        })
    }

    /// H12: another provider for blue's owner, through blue's proxy: a
    /// second process of the same deployment over the same daemon.
    async fn second(
        &self,
        fixture: &Fixture<DockerProvider>,
    ) -> Result<Option<DockerProvider>, FixtureError> {
        let proxies = self.proxies.lock();
        let link = proxies
            .get(&fixture.blue.owner)
            .ok_or_else(|| format!("no proxy for {}", fixture.blue.owner))?;
        Ok(Some(self.provider(&fixture.blue.owner, link)?))
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        let seconds = if run_time == Duration::MAX {
            "3600".to_owned()
        } else {
            format!("{:.3}", run_time.as_secs_f64())
        };
        vec!["sleep".to_owned(), seconds]
    }

    /// Half of `bytes` to stdout at once, then a pause of the run time,
    /// then the rest to stderr: a reader that starts at the launch sees the
    /// output grow while the container runs.
    fn command_writing(&self, run_time: Duration, bytes: u64) -> Option<Vec<String>> {
        let first = bytes / 2;
        let rest = bytes - first;
        let pause = format!("{:.3}", run_time.as_secs_f64());
        Some(vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("yes out | head -c {first}; sleep {pause}; yes err | head -c {rest} >&2"),
        ])
    }

    fn image(&self) -> String {
        TEST_IMAGE.to_owned()
    }

    /// Closes the case's two proxies once every request they delivered has
    /// been answered by the daemon (a request whose answer a fault lost may
    /// still be at work after its call returned), then removes every
    /// container of the two owners, straight on the daemon, until none is
    /// left (one another removal had under way included).
    async fn teardown(&self, fixture: &Fixture<DockerProvider>) -> Result<(), FixtureError> {
        let client = self.scope.client();
        for owner in [&fixture.blue.owner, &fixture.green.owner] {
            let proxy = self.proxies.lock().remove(owner);
            if let Some(proxy) = proxy {
                let limit = Instant::now() + Duration::from_secs(30);
                while !proxy.is_idle() {
                    if Instant::now() > limit {
                        return Err(format!("the proxy of {owner} is still busy after 30 s").into());
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
            let filters = HashMap::from([("label", vec![format!("{OWNER_LABEL}={owner}")])]);
            let limit = Instant::now() + Duration::from_secs(30);
            loop {
                let options = ListContainersOptionsBuilder::new()
                    .all(true)
                    .filters(&filters)
                    .build();
                let left = billet_docker::dialect::list_containers(&client, Some(options)).await?;
                if left.is_empty() {
                    break;
                }
                if Instant::now() > limit {
                    return Err(format!("containers of {owner} are still there after 30 s").into());
                }
                for id in left.into_iter().filter_map(|c| c.id) {
                    let options = RemoveContainerOptionsBuilder::new()
                        .force(true)
                        .v(true)
                        .build();
                    match client.remove_container(&id, Some(options)).await {
                        // Gone already, or being removed by someone else.
                        Ok(())
                        | Err(bollard::errors::Error::DockerResponseServerError {
                            status_code: 404 | 409,
                            ..
                        }) => {}
                        // Podman's word for a container another call is
                        // removing (a destroy whose answer a fault lost, still
                        // at work in the daemon): looked at again after the
                        // pause below, within the loop's bound.
                        Err(bollard::errors::Error::DockerResponseServerError {
                            status_code: 500,
                            ref message,
                        }) if message.contains("container state improper") => {}
                        Err(err) => return Err(err.into()),
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        Ok(())
    }
}

// D8 (H1, H7, H8), H11, D11: the contract suite passes against
// DockerProvider on a real daemon, in wall time, with whole-connection
// outages cut for real and answers lost in the middle of `launch` and
// `destroy` (the proxy delivers a request to the daemon and drops its answer).
// D18: the `podman` step of `cargo xtask ci` runs it again on podman's
// Docker-compatible service (`DOCKER_HOST` on its socket), outages and lost
// answers through the same proxy.
#[test]
fn d8_h11_docker_provider_keeps_the_contract_on_a_real_daemon() {
    let Some(scope) = daemon("d8") else { return };
    let factory = DockerFactory::on_local(scope);
    suite(
        &factory,
        "D8/H11 suite on docker, wall time, whole outages and lost answers",
    );
}

/// A scope on an engine that runs containers on gVisor when they ask: the
/// test daemon when it lists runsc (docker), or on podman, whose
/// Docker-compatible API runs its service's default runtime whatever a
/// container asks, the podman service whose default is runsc.
fn gvisor_scope(test: &str) -> Option<Scope> {
    let scope = daemon(test)?;
    if !lists_runsc(&scope, test) {
        return None;
    }
    if engine_at(scope.socket()) == "podman" {
        return podman_runsc(test).filter(|scope| lists_runsc(scope, test));
    }
    Some(scope)
}

// D19 (D8, H1, H7, H8, H11): the contract suite passes against a pool on
// gVisor (`runsc`, an isolation boundary: untrusted and unknown work
// accepted), in wall time, with outages and lost answers through the
// proxy. The `podman` step runs it on podman's service whose default
// runtime is runsc.
#[test]
fn d19_the_contract_holds_on_a_gvisor_pool() {
    let Some(scope) = gvisor_scope("d19") else {
        return;
    };
    let factory = DockerFactory::behind_gvisor(scope);
    suite(
        &factory,
        "D19 suite on gVisor, wall time, whole outages and lost answers",
    );
}

// D19 (D16, P9): output (the daemon's logs) and hints (its events) keep
// the capabilities' contract on a gVisor pool as they do on runc.
#[test]
fn d19_output_and_hints_hold_on_a_gvisor_pool() {
    let Some(scope) = gvisor_scope("d19d16") else {
        return;
    };
    let factory = DockerFactory::behind_gvisor(scope);
    let report = check_capabilities(&factory).unwrap_or_else(|failure| panic!("{failure}"));
    println!("D19 D16 on gVisor: {report:?}");
    assert!(report.output && report.hints, "{report:?}");
}

// D19 (H12): calls at once through two providers of one deployment and one
// of another, on gVisor, form linearizable histories.
#[test]
fn d19_histories_on_a_gvisor_pool_are_linearizable() {
    let Some(scope) = gvisor_scope("d19h12") else {
        return;
    };
    let factory = DockerFactory::behind_gvisor(scope);
    concurrent(&factory, "D19 H12 on gVisor");
}

/// Runs the sequential suite (eight cases) on `factory` and checks what it
/// did and that it left nothing.
fn suite(factory: &DockerFactory, what: &str) {
    let cases = 8;
    let summary = match check_contract(factory, ContractConfig::wall(cases)) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    };
    println!("{what}: {summary}");
    assert_eq!(summary.cases, cases);
    assert!(summary.steps >= u64::from(cases) * 16, "{summary:?}");
    if factory.tls.is_none() {
        assert!(summary.lost_answers > 0, "no answer was lost: {summary:?}");
    }
    assert!(
        factory.scope.leftovers().is_empty(),
        "the suite left containers behind"
    );
}

// H12: calls made at once by three tasks, through two provider objects of
// one deployment and one of another, over the real daemon (wall time), form
// linearizable histories. A short run: each launch starts a container.
// D18: on podman too (the `podman` step), where two destroys of one running
// container are told apart only by the pause that claims it.
#[test]
fn h12_docker_provider_histories_are_linearizable_on_a_real_daemon() {
    let Some(scope) = daemon("h12") else { return };
    let factory = DockerFactory::on_local(scope);
    concurrent(&factory, "H12 on docker");
}

/// Runs the concurrent mode (eight histories of three tasks, faults through
/// the proxy) on `factory` and checks what it did and that it left nothing.
fn concurrent(factory: &DockerFactory, what: &str) {
    let config = ConcurrentConfig {
        histories: 8,
        tasks: 3,
        calls_per_task: 6,
        names: 2,
        seed: 21,
        multi_thread: true,
        shrink_attempts: 2,
        faults: 2,
    };
    let summary = check_concurrent(factory, config).unwrap_or_else(|failure| panic!("{failure}"));
    println!(
        "{what}, wall time: {} histories, {} calls, {} faults (outages and lost answers through the proxy), {} calls answered a fault's error, {:?}",
        summary.histories, summary.calls, summary.faults, summary.fault_errors, summary.wall_time
    );
    assert_eq!(summary.calls, 8 * 3 * 6);
    assert!(summary.faults >= 8, "{summary:?}");
    assert!(summary.fault_errors > 0, "{summary:?}");
    assert!(
        factory.scope.leftovers().is_empty(),
        "the concurrent mode left containers behind"
    );
}

// D16 (P9): the docker backend's output (the daemon's logs) and hints (its
// events) keep the capabilities' contract on a real daemon: output read
// while the container runs and after it stopped, from any byte, gone once
// destroyed, never shown to another deployment; hints only of this owner's
// containers, the inventory exact whatever they say. D18: on podman too.
#[test]
fn d16_p9_docker_output_and_hints_keep_the_contract() {
    let Some(scope) = daemon("d16") else { return };
    let factory = DockerFactory::on_local(scope);
    let report = check_capabilities(&factory).unwrap_or_else(|failure| panic!("{failure}"));
    println!("D16 on docker: {report:?}");
    assert!(report.output && report.hints, "{report:?}");
    // Blue launched, stopped and destroyed its instance: at least its start,
    // its stop and its removal were told.
    assert!(report.hints_seen >= 3, "{report:?}");
    assert!(
        factory.scope.leftovers().is_empty(),
        "the capability checks left containers behind"
    );
}

// D17 (D8, H1, H7, H8): the contract suite passes against DockerProvider on a
// daemon reached over mutual TLS (a daemon of the test's own, `--tlsverify`
// on loopback, certificates made offline), outages cutting each provider's
// TCP connections for real: TLS changes no answer.
#[test]
fn d17_the_contract_holds_over_mutual_tls() {
    let Some(factory) = DockerFactory::on_tls("d17-suite") else {
        return;
    };
    suite(
        &factory,
        "D17 suite on docker over mutual TLS, wall time, whole outages",
    );
}

// D17 (H12): calls made at once over mutual TLS form linearizable histories
// (no faults: the outages are proven by the sequential run above, the lost
// answers over the socket).
#[test]
fn d17_h12_histories_over_mutual_tls_are_linearizable() {
    let Some(factory) = DockerFactory::on_tls("d17-h12") else {
        return;
    };
    let config = ConcurrentConfig {
        histories: 6,
        tasks: 3,
        calls_per_task: 6,
        names: 2,
        seed: 17,
        multi_thread: true,
        shrink_attempts: 2,
        faults: 0,
    };
    let summary = check_concurrent(&factory, config).unwrap_or_else(|failure| panic!("{failure}"));
    println!(
        "D17/H12 on docker over mutual TLS: {} histories, {} calls, {:?}",
        summary.histories, summary.calls, summary.wall_time
    );
    assert_eq!(summary.calls, 6 * 3 * 6);
    assert!(
        factory.scope.leftovers().is_empty(),
        "the concurrent mode left containers behind"
    );
}
