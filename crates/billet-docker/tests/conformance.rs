//! D8 (H1, H7, H8): the contract suite of `billet-conformance` against
//! `DockerProvider` on a real daemon, in wall time, with whole-connection
//! outages made by really cutting each provider's connection: every provider
//! talks to the daemon through a socket proxy this test owns.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use billet_conformance::{
    ConcurrentConfig, ContractConfig, Deployment, Fixture, FixtureError, Outage, Policies,
    ProviderFactory, Timing, WallWindows, async_trait, check_concurrent, check_contract,
};
use billet_docker::{DockerProvider, OWNER_LABEL};
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use parking_lot::Mutex;
use support::{Scope, SocketProxy, TEST_IMAGE, daemon, raw_client};

/// The windows the docker backend declares, from what this daemon does:
///
/// * `pending`: none. `launch` creates and starts the container before it
///   answers, so no container of a finished launch is `created`.
/// * `around_end`: 300 ms. The daemon's `StartedAt` is taken after the runtime
///   has started the process, and an exit reaches the daemon through the
///   runtime shim; both are milliseconds here, and `list` inspects every
///   container, which takes a few milliseconds more. 300 ms leaves room for a
///   loaded machine and keeps a case to seconds (run times of 0, 0.3, 0.9 and
///   1.8 s, moves of 0.15 to 1.2 s).
const WINDOWS: WallWindows = WallWindows {
    pending: Duration::ZERO,
    around_end: Duration::from_millis(300),
};

/// Every daemon call's bound in the suite's providers.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Two deployments over the one daemon, each behind a proxy of its own.
struct DockerFactory {
    scope: Scope,
    next: AtomicU64,
    proxies: Mutex<HashMap<String, SocketProxy>>,
}

impl DockerFactory {
    fn deployment(&self, tag: &str) -> Result<Deployment<DockerProvider>, FixtureError> {
        let owner = self.scope.owner(tag);
        let proxy = SocketProxy::start();
        let provider = DockerProvider::builder(owner.clone())
            .endpoint(proxy.endpoint())
            .timeout(TIMEOUT)
            .network("none")
            .build()?;
        self.proxies.lock().insert(owner.clone(), proxy);
        Ok(Deployment { owner, provider })
    }

    /// Runs `act` on the proxy between `deployment`'s provider and the daemon.
    fn with_proxy(
        &self,
        deployment: &Deployment<DockerProvider>,
        act: impl FnOnce(&SocketProxy),
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
            invalid_commands: &[&[], &["/no/such/program"]],
            outage: Outage::WholeConnection,
            mid_call: true,
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
        self.with_proxy(deployment, |proxy| proxy.lose_answer_after(after))
    }

    /// H12: another provider for blue's owner, through blue's proxy: a
    /// second process of the same deployment over the same daemon.
    async fn second(
        &self,
        fixture: &Fixture<DockerProvider>,
    ) -> Result<Option<DockerProvider>, FixtureError> {
        let endpoint = self
            .proxies
            .lock()
            .get(&fixture.blue.owner)
            .map(SocketProxy::endpoint)
            .ok_or_else(|| format!("no proxy for {}", fixture.blue.owner))?;
        let provider = DockerProvider::builder(fixture.blue.owner.clone())
            .endpoint(endpoint)
            .timeout(TIMEOUT)
            .network("none")
            .build()?;
        Ok(Some(provider))
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        let seconds = if run_time == Duration::MAX {
            "3600".to_owned()
        } else {
            format!("{:.3}", run_time.as_secs_f64())
        };
        vec!["sleep".to_owned(), seconds]
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
        let client = raw_client();
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
    let factory = DockerFactory {
        scope,
        next: AtomicU64::new(0),
        proxies: Mutex::new(HashMap::new()),
    };
    let cases = 8;
    let summary = match check_contract(&factory, ContractConfig::wall(cases)) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    };
    println!("D8/H11 suite on docker, wall time, whole outages and lost answers: {summary}");
    assert_eq!(summary.cases, cases);
    assert!(summary.steps >= u64::from(cases) * 16, "{summary:?}");
    assert!(summary.lost_answers > 0, "no answer was lost: {summary:?}");
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
    let factory = DockerFactory {
        scope,
        next: AtomicU64::new(0),
        proxies: Mutex::new(HashMap::new()),
    };
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
    let summary = check_concurrent(&factory, config).unwrap_or_else(|failure| panic!("{failure}"));
    println!(
        "H12 on docker, wall time: {} histories, {} calls, {} faults (outages and lost answers through the proxy), {} calls answered a fault's error, {:?}",
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
