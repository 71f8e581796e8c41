//! The drivers over real providers (the simulated backend): built from a
//! configuration and one provider per pool (B2), stepped in modelled time
//! ([`Inline`]), run as a task in real time ([`SchedulerTask`], in `support/task.rs`), restarted (B8).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock, SystemClock};
use billet_config::Config;
use billet_provider::{Provider, TrustClass};
use billet_scheduler::{
    BuildError, Decision, Inline, Job, JobId, Outcome, PoolId, Pools, Settings,
};
use billet_simulated::{Host, SimulatedProvider, run_for};

#[path = "support/task.rs"]
mod task;

use task::{SchedulerTask, Stopped};

const TWO: &str = "
deployment: {id: blue}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: runner}}
  - {name: big, kind: docker, capacity: 3, docker: {image: runner}}
routing:
  routes: [{labels: [linux], provider: linux}]
  default_kind: docker
";

fn config() -> Config {
    Config::from_yaml_str(TWO).unwrap()
}

fn simulated(host: &Host, clock: &Arc<dyn Clock>) -> Arc<dyn Provider> {
    Arc::new(
        SimulatedProvider::builder("blue")
            .host(host.clone())
            .clock(Arc::clone(clock))
            .build()
            .unwrap(),
    )
}

/// A backend with an isolation boundary, as far as trust goes: it accepts
/// every trust class (the simulated backend underneath runs the work as if it
/// were trusted).
#[derive(Debug)]
struct Isolating(Arc<dyn Provider>);

#[async_trait::async_trait]
impl Provider for Isolating {
    fn kind(&self) -> billet_provider::ProviderKind {
        billet_provider::ProviderKind::Firecracker
    }
    fn accepts(&self, _: TrustClass) -> Result<(), billet_provider::Error> {
        Ok(())
    }
    async fn launch(
        &self,
        spec: billet_provider::Spec,
    ) -> Result<billet_provider::Instance, billet_provider::Error> {
        self.0.launch(spec.with_trust(TrustClass::Trusted)).await
    }
    async fn find(
        &self,
        name: &str,
    ) -> Result<Option<billet_provider::Instance>, billet_provider::Error> {
        self.0.find(name).await
    }
    async fn list(&self) -> Result<Vec<billet_provider::Instance>, billet_provider::Error> {
        self.0.list().await
    }
    async fn destroy(
        &self,
        id: &billet_provider::InstanceId,
    ) -> Result<billet_provider::Teardown, billet_provider::Error> {
        self.0.destroy(id).await
    }
}

// B2, B3: each pool's provider is asked what it accepts: untrusted work goes
// to the pool whose provider isolates it, and only there.
#[tokio::test]
async fn b3_each_pool_asks_its_own_provider_what_it_accepts() {
    let yaml = "
deployment: {id: blue}
providers:
  - {name: linux, kind: docker, capacity: 2, docker: {image: runner}}
  - {name: vm, kind: firecracker, capacity: 2, firecracker: {kernel: /k, rootfs: /r}}
routing:
  default_kind: docker
  routes: [{labels: [pr], provider: linux, fallback_kind: firecracker}]
  untrusted_kinds: [docker, firecracker]
";
    let host = Host::new();
    let manual = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let pools = Pools::builder(Config::from_yaml_str(yaml).unwrap())
        .provider("linux", simulated(&host, &clock))
        .provider("vm", Arc::new(Isolating(simulated(&host, &clock))))
        .build()
        .unwrap();
    let accepts: Vec<[bool; 3]> = pools
        .core(manual.now())
        .pools()
        .map(|p| p.accepts)
        .collect();
    assert_eq!(accepts, [[false, false, true], [true, true, true]]);
    let mut inline = Inline::new(&pools, Arc::clone(&clock));
    let mut log = Vec::new();
    inline.start().await;
    let untrusted = Job::new(JobId(1), run_for(Duration::from_secs(5)))
        .with_labels(["pr"])
        .with_trust(TrustClass::Untrusted);
    inline.submit(untrusted).await.unwrap();
    let unknown = Job::new(JobId(2), run_for(Duration::from_secs(5))).with_labels(["x"]);
    assert!(
        inline.submit(unknown).await.is_err(),
        "default kind docker refuses it"
    );
    drain(&mut inline, &mut log);
    assert!(log.contains(&Decision::Placed {
        job: JobId(1),
        pool: PoolId(1)
    }));
    run_to_idle(&mut inline, &manual, &mut log).await;
    assert_eq!(ended(&log)[&1], Outcome::Finished { exit_code: 0 });
}

// B3: `Pools::may_run` answers by the rule the scheduler places by: a pool
// runs work its provider accepts, and work not trusted only when routing's
// `untrusted_kinds` names its kind; a name the file lacks runs nothing.
#[test]
fn b3_may_run_is_the_rule_placement_keeps() {
    let yaml = |untrusted: &str| {
        format!(
            "
deployment: {{id: blue}}
providers:
  - {{name: linux, kind: docker, capacity: 2, docker: {{image: runner}}}}
  - {{name: vm, kind: firecracker, capacity: 2, firecracker: {{kernel: /k, rootfs: /r}}}}
routing:
  default_kind: docker
  untrusted_kinds: [{untrusted}]
"
        )
    };
    let host = Host::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let build = |untrusted: &str| {
        Pools::builder(Config::from_yaml_str(&yaml(untrusted)).unwrap())
            .provider("linux", simulated(&host, &clock))
            .provider("vm", Arc::new(Isolating(simulated(&host, &clock))))
            .build()
            .unwrap()
    };
    let both = build("docker, firecracker");
    let answers = |pools: &Pools, name: &str| TrustClass::ALL.map(|t| pools.may_run(name, t));
    // ALL is unknown, untrusted, trusted: docker's provider refuses all but
    // trusted work, the isolating one accepts every class.
    assert_eq!(answers(&both, "linux"), [false, false, true]);
    assert_eq!(answers(&both, "vm"), [true, true, true]);
    let docker_only = build("docker");
    assert_eq!(answers(&docker_only, "vm"), [false, false, true]);
    assert_eq!(answers(&docker_only, "missing"), [false, false, false]);
}

fn job(n: u64, runs: Duration) -> Job {
    Job::new(JobId(n), run_for(runs)).with_trust(TrustClass::Trusted)
}

// B2: one provider per configured name; a name missing, unknown or given
// twice is an error naming it.
#[test]
fn b2_providers_must_match_the_configured_names() {
    let host = Host::new();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
    let p = || simulated(&host, &clock);
    let missing = Pools::builder(config()).provider("linux", p()).build();
    assert_eq!(
        missing.unwrap_err(),
        BuildError::MissingProvider { name: "big".into() }
    );
    let unknown = Pools::builder(config())
        .provider("linux", p())
        .provider("big", p())
        .provider("Big", p())
        .build();
    let unknown = unknown.unwrap_err();
    assert_eq!(unknown, BuildError::UnknownProvider { name: "Big".into() });
    assert_eq!(
        unknown.to_string(),
        "a provider was given under the name \"Big\", which billet.yaml does not configure"
    );
    let twice = Pools::builder(config())
        .provider("linux", p())
        .provider("linux", p())
        .provider("big", p())
        .build();
    assert_eq!(
        twice.unwrap_err(),
        BuildError::DuplicateProvider {
            name: "linux".into()
        }
    );
    assert!(
        BuildError::MissingProvider { name: "big".into() }
            .to_string()
            .contains("\"big\"")
    );
    let pools = Pools::builder(config())
        .provider("big", p())
        .provider("linux", p())
        .settings(Settings {
            reconcile_every: Duration::from_secs(7),
            ..Settings::default()
        })
        .build()
        .unwrap();
    assert_eq!(pools.providers().len(), 2);
    assert_eq!(pools.settings().reconcile_every, Duration::from_secs(7));
    assert_eq!(pools.config().deployment().id(), "blue");
    // The deployment id is the owner: the simulated providers were built for it.
    let core = pools.core(SystemTime::UNIX_EPOCH);
    assert_eq!(core.pools().count(), 2);
}

fn pools(host: &Host, clock: &Arc<dyn Clock>) -> Pools {
    Pools::builder(config())
        .provider("linux", simulated(host, clock))
        .provider("big", simulated(host, clock))
        .settings(Settings {
            reconcile_every: Duration::from_secs(10),
            ..Settings::default()
        })
        .build()
        .unwrap()
}

fn drain(inline: &mut Inline, log: &mut Vec<Decision>) {
    while let Some(decision) = inline.poll_decision() {
        log.push(decision);
    }
}

/// Steps the manual clock from wake-up to wake-up until idle.
async fn run_to_idle(inline: &mut Inline, clock: &ManualClock, log: &mut Vec<Decision>) {
    let mut steps = 0u32;
    while let Some(at) = inline.next_wakeup() {
        steps += 1;
        assert!(steps < 100_000, "the scheduler never settles");
        clock.advance_to(at.max(clock.now())).unwrap();
        inline.tick().await;
        drain(inline, log);
    }
}

fn ended(log: &[Decision]) -> BTreeMap<u64, Outcome> {
    let mut ends = BTreeMap::new();
    for decision in log {
        if let Decision::Ended { job, outcome, .. } = decision {
            assert!(
                ends.insert(job.0, outcome.clone()).is_none(),
                "job {job} ended twice"
            );
        }
    }
    ends
}

// B1, B6: the inline driver in modelled time over the simulated backend:
// jobs run, finish with their exit code, and leave nothing on the host.
#[tokio::test]
async fn b1_inline_over_the_simulated_backend() {
    let host = Host::new();
    let manual = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let pools = pools(&host, &clock);
    let mut inline = Inline::new(&pools, Arc::clone(&clock));
    let mut log = Vec::new();
    inline.start().await;
    for n in 0..20 {
        let labels: &[&str] = if n % 2 == 0 { &["linux"] } else { &[] };
        inline
            .submit(job(n, Duration::from_secs(30 + n)).with_labels(labels.iter().copied()))
            .await
            .unwrap();
        drain(&mut inline, &mut log);
        assert!(inline.core().leases(PoolId(0)) <= 2);
        assert!(inline.core().leases(PoolId(1)) <= 3);
    }
    assert_eq!(host.len(), 5);
    // B9: a job cancelled through the driver; only once.
    assert!(inline.cancel(JobId(19)).await);
    assert!(!inline.cancel(JobId(19)).await, "already ended");
    assert!(!inline.cancel(JobId(99)).await, "unknown");
    run_to_idle(&mut inline, &manual, &mut log).await;
    let ends = ended(&log);
    assert_eq!(ends.len(), 20);
    assert_eq!(ends[&19], Outcome::Cancelled);
    assert!(
        ends.iter()
            .all(|(n, o)| *n == 19 || *o == Outcome::Finished { exit_code: 0 })
    );
    assert!(host.is_empty());
    // Jobs labelled linux ran only in the linux pool.
    for decision in &log {
        if let Decision::Placed { job, pool } = decision
            && job.0 % 2 == 0
        {
            assert_eq!(*pool, PoolId(0), "job {job}");
        }
    }
}

// B8: a scheduler dropped mid-run and built again over the same pools counts
// what they hold before placing, never over-commits, and the jobs it learns
// end with their real outcome.
#[tokio::test]
async fn b8_restart_over_the_simulated_backend() {
    let host = Host::new();
    let manual = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let pools = pools(&host, &clock);
    let mut first = Inline::new(&pools, Arc::clone(&clock));
    let mut log = Vec::new();
    first.start().await;
    for n in 0..8 {
        first
            .submit(job(n, Duration::from_secs(100)))
            .await
            .unwrap();
    }
    drain(&mut first, &mut log);
    assert_eq!(host.len(), 5);
    let queued: Vec<u64> = (0..8)
        .filter(|n| first.core().lease_of(JobId(*n)).is_none())
        .collect();
    assert_eq!(queued.len(), 3);
    drop(first);
    manual.advance(Duration::from_secs(30)).unwrap();
    let mut second = Inline::new(&pools, Arc::clone(&clock));
    second.start().await;
    drain(&mut second, &mut log);
    let stats = second.core().stats();
    assert_eq!(stats.learned, 5);
    assert_eq!(stats.leases(), 5, "counted before anything is placed");
    for n in &queued {
        second
            .submit(job(*n, Duration::from_secs(10)))
            .await
            .unwrap();
    }
    drain(&mut second, &mut log);
    assert_eq!(second.core().queued(), 3, "no room: they wait");
    assert_eq!(host.len(), 5);
    run_to_idle(&mut second, &manual, &mut log).await;
    let ends = ended(&log);
    assert_eq!(ends.len(), 8);
    assert!(
        ends.values()
            .all(|o| *o == Outcome::Finished { exit_code: 0 })
    );
    assert!(host.is_empty());
}

// B1, B9, B11: the task driver in real time: submissions answered, every
// job ends once, cancel works, counts readable while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b1_the_task_driver_in_real_time() {
    let host = Host::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pools = Pools::builder(config())
        .provider("linux", simulated(&host, &clock))
        .provider("big", simulated(&host, &clock))
        .settings(Settings {
            reconcile_every: Duration::from_millis(20),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let scheduler = SchedulerTask::spawn(&pools, Arc::clone(&clock));
    for n in 0..12 {
        let runs = if n == 11 {
            Duration::from_secs(3_600)
        } else {
            Duration::from_millis(30)
        };
        scheduler.submit(job(n, runs)).await.unwrap().unwrap();
    }
    let refused = scheduler
        .submit(Job::new(JobId(99), run_for(Duration::from_millis(1))))
        .await
        .unwrap();
    assert!(refused.is_err(), "unknown trust: no pool may run it");
    assert_eq!(scheduler.stats().accepted, 12);
    let mut ends = BTreeMap::new();
    let mut held: BTreeMap<PoolId, i64> = BTreeMap::new();
    let mut cancelled = false;
    while ends.len() < 12 {
        // A bound on a hang, not on speed: 10 s for jobs of 30 ms.
        let next = tokio::time::timeout(Duration::from_secs(10), scheduler.next_decision());
        let Some(decision) = next.await.expect("a decision within 10 s") else {
            panic!("the scheduler stopped");
        };
        match decision {
            Decision::Placed { pool, .. } => {
                let count = held.entry(pool).or_default();
                *count += 1;
                assert!(*count <= [2, 3][pool.0], "pool {pool} over capacity");
            }
            Decision::Ended { job, pool, outcome } => {
                if let Some(pool) = pool {
                    *held.entry(pool).or_default() -= 1;
                }
                assert!(ends.insert(job.0, outcome).is_none());
            }
            Decision::Launched { job: JobId(11), .. } if !cancelled => {
                cancelled = scheduler.cancel(JobId(11)).await.unwrap();
                assert!(cancelled);
            }
            _ => {}
        }
    }
    assert_eq!(ends[&11], Outcome::Cancelled);
    assert_eq!(
        ends.values()
            .filter(|o| **o == Outcome::Finished { exit_code: 0 })
            .count(),
        11
    );
    let stats = scheduler.stats();
    assert_eq!((stats.finished, stats.cancelled), (11, 1));
    assert!(host.is_empty());
    scheduler.shutdown().await;
}

// The task driver stops cleanly: calls after shutdown answer `Stopped`.
#[tokio::test]
async fn the_task_driver_stops_on_shutdown() {
    let host = Host::new();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let provider = simulated(&host, &clock);
    let pools = Pools::builder(config())
        .provider("linux", Arc::clone(&provider))
        .provider("big", Arc::clone(&provider))
        .build()
        .unwrap();
    let scheduler = SchedulerTask::spawn(&pools, Arc::clone(&clock));
    drop(pools);
    assert_eq!(scheduler.cancel(JobId(1)).await, Ok(false));
    assert_eq!(scheduler.stats().pools.len(), 2);
    assert!(
        Arc::strong_count(&provider) > 1,
        "the task holds the providers"
    );
    // Shut down and waited for: the task has ended and let go of them.
    scheduler.shutdown().await;
    assert_eq!(Arc::strong_count(&provider), 1);
    assert_eq!(Stopped.to_string(), "the scheduler has stopped");
}

/// A provider that counts its `list` calls.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn Provider>,
    lists: std::sync::atomic::AtomicUsize,
}

impl Counting {
    fn over(inner: Arc<dyn Provider>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            lists: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn lists(&self) -> usize {
        self.lists.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Provider for Counting {
    fn kind(&self) -> billet_provider::ProviderKind {
        self.inner.kind()
    }
    fn accepts(&self, trust: TrustClass) -> Result<(), billet_provider::Error> {
        self.inner.accepts(trust)
    }
    async fn launch(
        &self,
        spec: billet_provider::Spec,
    ) -> Result<billet_provider::Instance, billet_provider::Error> {
        self.inner.launch(spec).await
    }
    async fn find(
        &self,
        name: &str,
    ) -> Result<Option<billet_provider::Instance>, billet_provider::Error> {
        self.inner.find(name).await
    }
    async fn list(&self) -> Result<Vec<billet_provider::Instance>, billet_provider::Error> {
        self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.list().await
    }
    async fn destroy(
        &self,
        id: &billet_provider::InstanceId,
    ) -> Result<billet_provider::Teardown, billet_provider::Error> {
        self.inner.destroy(id).await
    }
}

/// Pools `linux` and `big` over `providers` (one each, maybe one object),
/// reconciling every 10 s, with job 1 running on `linux` and job 2 on
/// `big` for 100 s; answers the log once the first reconcile has been read.
async fn one_reconcile(providers: [Arc<Counting>; 2], manual: &ManualClock) -> Vec<Decision> {
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let [linux, big] = providers;
    let pools = Pools::builder(config())
        .provider("linux", linux)
        .provider("big", big)
        .settings(Settings {
            reconcile_every: Duration::from_secs(10),
            ..Settings::default()
        })
        .build()
        .unwrap();
    let mut inline = Inline::new(&pools, Arc::clone(&clock));
    let mut log = Vec::new();
    inline.start().await;
    let job = |id: u64, labels: &[&str]| {
        Job::new(JobId(id), run_for(Duration::from_secs(100)))
            .with_labels(labels.iter().copied())
            .with_trust(TrustClass::Trusted)
    };
    inline.submit(job(1, &["linux"])).await.unwrap();
    inline.submit(job(2, &[])).await.unwrap();
    drain(&mut inline, &mut log);
    assert!(log.contains(&Decision::Placed {
        job: JobId(1),
        pool: PoolId(0)
    }));
    assert!(log.contains(&Decision::Placed {
        job: JobId(2),
        pool: PoolId(1)
    }));
    manual.advance(Duration::from_secs(10)).unwrap();
    inline.tick().await;
    drain(&mut inline, &mut log);
    log
}

// B6: a reconciliation lists every pool; `Inline` makes the lists of pools
// one provider object serves as one call, its answer lent to each, and
// lists pools with providers of their own each on its own, each reading its
// own answer: two pools on two hosts each keep their running job.
#[tokio::test]
async fn b6_inline_lists_a_shared_provider_once_and_others_each_on_its_own() {
    let manual = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    // One host, one provider object serving both pools.
    let shared = Counting::over(simulated(&Host::new(), &clock));
    let log = one_reconcile([Arc::clone(&shared), Arc::clone(&shared)], &manual).await;
    assert_eq!(
        shared.lists(),
        2,
        "one list at the start, one at the reconcile"
    );
    assert!(ended(&log).is_empty(), "{log:?}");
    // Two hosts: what one provider holds is not the other's.
    let manual = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000));
    let clock: Arc<dyn Clock> = Arc::new(manual.clone());
    let (linux, big) = (
        Counting::over(simulated(&Host::new(), &clock)),
        Counting::over(simulated(&Host::new(), &clock)),
    );
    let log = one_reconcile([Arc::clone(&linux), Arc::clone(&big)], &manual).await;
    assert_eq!((linux.lists(), big.lists()), (2, 2), "each its own");
    assert!(ended(&log).is_empty(), "each job still runs: {log:?}");
}
