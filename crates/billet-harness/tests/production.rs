//! H10: the harness drives the production scheduler, `billet-scheduler`: one
//! per deployment, built from a configuration made in code, simulated
//! providers injected under the configured pool names; jobs with labels and
//! trust; restarts and strays; and every invariant checked at every step,
//! each shown to catch a scheduler or provider that breaks it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::run::Violation;
use billet_harness::scenario::{Fleet, Layout, PoolLayout, Restart, Scenario, Stray, Which};
use billet_harness::scheduler::{FleetChange, Scheduler, SchedulerContext, Step, Tap};
use billet_harness::workload::{Job, JobId};
use billet_provider::{
    Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass,
};
use rustc_hash::FxHashMap;

/// A small production fleet: three deployments of three routed pools,
/// labelled jobs, four outages, one restart, two strays.
fn small(seed: u64) -> Scenario {
    Scenario::fleet(Fleet {
        seed,
        jobs: 3_000,
        concurrency: 150,
        deployments: 3,
        outages: 4,
        ..Fleet::production()
    })
}

// H10: a production fleet keeps every invariant through outages, a restart
// (during an outage of the restarted deployment, so its new scheduler first
// meets an inventory it cannot read) and strays: every job ends in one
// outcome, the fleet is driven to capacity, the jobs running at the restart
// are adopted by the new scheduler, both strays are collected, nothing leaks.
#[test]
fn h10_production_fleet_keeps_every_invariant() {
    let scenario = small(1);
    assert_eq!(scenario.restarts.len(), 1);
    let restart = scenario.restarts[0];
    assert!(
        scenario
            .outages
            .iter()
            .any(|o| o.deployment == restart.deployment
                && o.at < restart.at
                && restart.at < o.at + o.lasting),
        "the restart falls in an outage of its deployment: {scenario:?}"
    );
    let report = scenario.run(ProductionScheduler::new).unwrap();
    assert_eq!(report.scheduler, "production");
    assert_eq!(report.submitted, 3_000);
    assert_eq!(report.finished + report.refused, 3_000);
    assert!(
        report.refused > 0,
        "untrusted and unclassified jobs are refused"
    );
    assert_eq!(report.outcomes.total(), report.finished);
    assert_eq!(report.outcomes.finished, report.finished, "{report}");
    assert_eq!(report.peak_leases, 150, "{report}");
    assert_eq!((report.restarts, report.restarts_unsupported), (1, 0));
    assert!(
        report.adopted > 0,
        "the new scheduler adopted running jobs: {report}"
    );
    assert_eq!(report.strays, 2);
    assert_eq!(report.orphans_collected, 2, "{report}");
    assert_eq!(report.orphans_seen, 2, "{report}");
    assert_eq!(report.outages_survived, 4);
    assert!(report.inventory_errors > 0);
    let text = report.to_string();
    for line in [
        "scheduler: production",
        "pools: linux (docker) 30, vm (firecracker) 15, mac (tart) 5 per deployment of 50",
        "restarts: 1 (0 asked for that this scheduler cannot do)",
        "orphans: 2 seen, 2 collected (2 strays left on the host by the harness)",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }
}

// H4, H10: the same seed gives the same digest through the production
// scheduler too, restart and strays included; another seed another.
#[test]
fn h4_h10_production_is_deterministic_by_seed() {
    let a = small(11).run(ProductionScheduler::new).unwrap();
    let b = small(11).run(ProductionScheduler::new).unwrap();
    let c = small(12).run(ProductionScheduler::new).unwrap();
    assert_eq!(a.digest, b.digest);
    assert_eq!(
        (a.queue_wait, a.peak_queue, a.adopted),
        (b.queue_wait, b.peak_queue, b.adopted)
    );
    assert_ne!(a.digest, c.digest);
}

/// Writes down, per placed job, its labels and the pool it was placed on,
/// as the run's tap.
#[derive(Default)]
struct Routes {
    labels: FxHashMap<JobId, Vec<String>>,
    log: Vec<(Vec<String>, usize)>,
}

impl Tap for Routes {
    fn submitted(&mut self, job: &Job) {
        self.labels.insert(job.id, job.labels.clone());
    }
    fn stepped(&mut self, step: &Step, _: SystemTime) {
        for placed in step.placed() {
            let labels = self.labels.remove(&placed.job).unwrap();
            self.log.push((labels, placed.pool));
        }
    }
}

// H10, B3: jobs carry labels and are placed by the configured routes:
// `[macos]` only on `mac`, `[kvm]` only on `vm`, `[linux]` (and `[linux,
// gpu]`) on `linux` and, when it is full, on the firecracker pool `vm`;
// unlabelled jobs on the docker pool `linux` only (default_kind).
#[test]
fn h10_jobs_are_placed_by_their_labels() {
    let scenario = Scenario::fleet(Fleet {
        seed: 5,
        jobs: 4_000,
        concurrency: 100,
        deployments: 2,
        outages: 0,
        load: 1.2,
        restarts: 0,
        strays: 0,
        ..Fleet::production()
    });
    let mut routes = Routes::default();
    let report = scenario
        .run_tapped(ProductionScheduler::new, &mut routes)
        .unwrap();
    let log = &routes.log;
    assert_eq!(log.len() as u64, report.finished);
    let (linux, vm, mac) = (0, 1, 2);
    let mut linux_on_vm = 0;
    for (labels, pool) in log.iter() {
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        match labels[..] {
            ["macos"] => assert_eq!(*pool, mac),
            ["kvm"] => assert_eq!(*pool, vm),
            ["linux"] | ["linux", "gpu"] => {
                assert!(*pool == linux || *pool == vm, "{labels:?} on {pool}");
                linux_on_vm += usize::from(*pool == vm);
            }
            [] => assert_eq!(*pool, linux),
            _ => panic!("unexpected labels {labels:?}"),
        }
    }
    assert!(linux_on_vm > 0, "over capacity, linux jobs fell back to vm");
    for wanted in [&["macos"][..], &["kvm"], &["linux"], &["linux", "gpu"], &[]] {
        assert!(
            log.iter().any(|(labels, _)| labels == wanted),
            "no job labelled {wanted:?}"
        );
    }
}

// H10, F3: each deployment's billet.yaml is made in code from the layout:
// its pools with their configured kinds and capacities, its routes; a layout
// naming the simulated kind is refused by the configuration, and the
// scenario with it.
#[test]
fn h10_configurations_are_made_in_code() {
    let config = Layout::routed()
        .config("deployment-0", 100)
        .unwrap()
        .unwrap();
    assert_eq!(config.deployment().id(), "deployment-0");
    let pools: Vec<(&str, ProviderKind, u32)> = config
        .providers()
        .iter()
        .map(|p| (p.name(), p.kind().get(), p.capacity().get()))
        .collect();
    assert_eq!(
        pools,
        [
            ("linux", ProviderKind::Docker, 60),
            ("vm", ProviderKind::Firecracker, 30),
            ("mac", ProviderKind::Tart, 10)
        ]
    );
    let route = config.routing().route_for(&["linux", "gpu"]).unwrap();
    assert_eq!(route.provider(), "linux");
    assert_eq!(
        route.fallback_kind().map(|k| k.get()),
        Some(ProviderKind::Firecracker)
    );
    assert_eq!(Layout::routed().split(7), [5, 2, 0]);
    assert_eq!(Layout::routed().split(13), [8, 4, 1]);
    assert!(Layout::routed().config("d", 0).unwrap().is_none());
    let none = Layout::routed().config("d", 7).unwrap_err();
    assert!(none.contains("pool mac"), "{none}");

    let simulated = Layout {
        pools: vec![PoolLayout {
            name: "sim".to_owned(),
            kind: ProviderKind::Simulated,
            share: 1,
        }],
        default_kind: Some(ProviderKind::Simulated),
        ..Layout::default()
    };
    let refused = Scenario::new(1)
        .with_layout(simulated)
        .run(ProductionScheduler::new)
        .unwrap_err();
    let Violation::InvalidScenario { reason } = &refused.violation else {
        panic!("{refused}");
    };
    assert!(reason.contains("simulated"), "{reason}");
}

// H10: the reference scheduler cannot restart: the run records each restart
// it could not do, says so in the report, and goes on; a scenario that leaves
// strays for a scheduler that does not collect orphans is refused up front.
#[test]
fn h10_reference_cannot_restart_and_the_run_records_it() {
    let scenario = Scenario::fleet(Fleet {
        jobs: 1_000,
        concurrency: 60,
        restarts: 2,
        ..Fleet::default()
    });
    let report = scenario.run(ReferenceScheduler::new).unwrap();
    assert_eq!((report.restarts, report.restarts_unsupported), (0, 2));
    assert!(
        report
            .to_string()
            .contains("restarts: 0 (2 asked for that this scheduler cannot do)"),
        "{report}"
    );
    let strays = scenario.with_stray(Stray {
        deployment: 0,
        at: Duration::from_secs(60),
        lasting: Duration::from_secs(600),
    });
    let refused = strays.run(ReferenceScheduler::new).unwrap_err();
    assert!(
        matches!(&refused.violation, Violation::InvalidScenario { reason } if reason.contains("does not collect orphans")),
        "{refused}"
    );
}

/// How a [`Flawed`] provider breaks the contract.
#[derive(Debug, Clone, Copy)]
enum Flaw {
    /// Its inventory drops one running instance from every list of three or
    /// more (the one with the smallest name).
    ShortList,
    /// Its destroy never removes a stray (answers unavailable).
    KeepStrays,
}

#[derive(Debug)]
struct Flawed(Arc<dyn Provider>, Flaw);

#[async_trait]
impl Provider for Flawed {
    fn kind(&self) -> ProviderKind {
        self.0.kind()
    }
    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        self.0.accepts(trust)
    }
    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        self.0.launch(spec).await
    }
    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        self.0.find(name).await
    }
    async fn list(&self) -> Result<Vec<Instance>, Error> {
        let mut inventory = self.0.list().await?;
        if let Flaw::ShortList = self.1
            && inventory.len() >= 3
        {
            let victim = inventory
                .iter()
                .enumerate()
                .filter(|(_, i)| i.state.is_running())
                .min_by(|a, b| a.1.name.cmp(&b.1.name))
                .map(|(k, _)| k);
            if let Some(k) = victim {
                inventory.remove(k);
            }
        }
        Ok(inventory)
    }
    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        if let Flaw::KeepStrays = self.1 {
            let stray = self
                .0
                .list()
                .await?
                .iter()
                .any(|i| &i.id == id && i.name.starts_with("stray-"));
            if stray {
                return Err(Error::unavailable("strays stay"));
            }
        }
        self.0.destroy(id).await
    }
}

fn flawed(flaw: Flaw) -> impl Fn(usize, Arc<dyn Provider>) -> Arc<dyn Provider> + Send + Sync {
    move |_, inner| Arc::new(Flawed(inner, flaw)) as Arc<dyn Provider>
}

// H10, H3: an inventory that answers short makes the production scheduler
// end a running job as vanished and free its lease; the harness catches the
// lease freed while its instance runs, and prints the seed and the replay
// command naming the production scheduler.
#[test]
fn h10_short_inventory_is_caught_through_the_production_scheduler() {
    let failure = small(77)
        .with_wrap(flawed(Flaw::ShortList))
        .run(ProductionScheduler::new)
        .unwrap_err();
    assert!(
        matches!(failure.violation, Violation::FreedWhileRunning { .. }),
        "{failure}"
    );
    let printed = failure.to_string();
    assert!(printed.contains("seed: 77"), "{printed}");
    assert!(
        printed.contains("cargo run --release --example fleet -- --seed 77")
            && printed.contains("--scheduler production --layout routed --restarts 1 --strays 2"),
        "{printed}"
    );
}

// H10, B7: an orphan the scheduler cannot destroy outlives its grace period
// and one reconcile interval; the harness reports it, naming the instance.
#[test]
fn h10_an_orphan_outliving_its_grace_is_caught() {
    let scenario = Scenario::fleet(Fleet {
        jobs: 2_000,
        concurrency: 60,
        outages: 0,
        restarts: 0,
        strays: 1,
        ..Fleet::production()
    });
    let failure = scenario
        .with_wrap(flawed(Flaw::KeepStrays))
        .run(ProductionScheduler::new)
        .unwrap_err();
    let Violation::OrphanOutlived(outlived) = &failure.violation else {
        panic!("{failure}");
    };
    assert_eq!(outlived.instance, "stray-0");
    assert_eq!(
        outlived.deadline - outlived.seen,
        Duration::from_secs(300 + 60)
    );
    assert!(failure.to_string().contains("orphan stray-0 of deployment"));
}

// H10: a production scheduler configured with more leases than the
// scenario's pools have is caught at the first pool it fills past capacity.
#[test]
fn h10_pool_over_capacity_is_caught() {
    let failure = small(3)
        .run(|mut ctx: SchedulerContext| {
            for d in &mut ctx.deployments {
                d.config = Layout::routed().config(&d.name, d.capacity * 2).unwrap();
            }
            ProductionScheduler::new(ctx)
        })
        .unwrap_err();
    assert!(
        matches!(failure.violation, Violation::PoolOverCapacity { .. }),
        "{failure}"
    );
}

/// A production scheduler that reports its first freed lease twice.
struct Twice {
    inner: ProductionScheduler,
    done: bool,
}

#[async_trait]
impl Scheduler for Twice {
    async fn submit(&mut self, job: Job) -> bool {
        self.inner.submit(job).await
    }
    async fn tick(&mut self) -> Step {
        let mut step = self.inner.tick().await;
        let first = step.freed().next().cloned();
        if !self.done
            && let Some(freed) = first
        {
            self.done = true;
            step.changes.push(FleetChange::Freed(freed));
        }
        step
    }
    fn next_wakeup(&mut self) -> Option<SystemTime> {
        self.inner.next_wakeup()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn leases(&self) -> Vec<usize> {
        self.inner.leases()
    }
    fn pool_leases(&self) -> Vec<Vec<usize>> {
        self.inner.pool_leases()
    }
    fn collects_orphans(&self) -> bool {
        true
    }
}

// H10, B9: every job ends in exactly one outcome: a second end of one job is
// caught.
#[test]
fn h10_a_second_outcome_is_caught() {
    let failure = small(4)
        .run(|ctx| Twice {
            inner: ProductionScheduler::new(ctx),
            done: false,
        })
        .unwrap_err();
    assert!(
        matches!(failure.violation, Violation::NotInFlight { .. }),
        "{failure}"
    );
    assert!(failure.to_string().contains("not in flight"), "{failure}");
}

// H10, B8: a restart under full load: the new scheduler counts what is
// running before it places anything, so no deployment is over capacity, the
// jobs it had queued are handed over again and run, nothing is lost or run
// twice. Restarted twice, and once more while idle at the end.
#[test]
fn h10_restarts_under_load_lose_nothing() {
    let scenario = Scenario::fleet(Fleet {
        seed: 8,
        jobs: 2_000,
        concurrency: 80,
        deployments: 1,
        outages: 0,
        load: 1.5,
        restarts: 2,
        strays: 0,
        ..Fleet::production()
    })
    .with_restart(Restart {
        deployment: 0,
        at: Duration::from_secs(2 * 86_400),
    });
    let report = scenario.run(ProductionScheduler::new).unwrap();
    assert_eq!(report.restarts, 3, "{report}");
    assert!(
        report.handed_over > 0,
        "queued jobs were handed over: {report}"
    );
    assert_eq!(report.finished + report.refused, 2_000);
    assert!(report.peak_queue > 50, "{report}");
    assert!(report.adopted >= 2 * 70, "{report}");
    assert_eq!(report.outcomes.finished, report.finished);
}

// H10: the fleet's replay command names the scheduler that ran, even when the
// fleet was made for the other.
#[test]
fn h10_replay_names_the_scheduler_that_ran() {
    let fleet = Fleet {
        jobs: 200,
        concurrency: 10,
        ..Fleet::default()
    };
    assert_eq!(fleet.scheduler, Which::Reference);
    let failure = Scenario::fleet(fleet)
        .with_wrap(flawed(Flaw::ShortList))
        .run(ProductionScheduler::new)
        .unwrap_err();
    assert!(
        failure
            .replay
            .contains("--scheduler production --layout single"),
        "{failure}"
    );
}

// H10, B6, B7: a stray that appears while every scheduler is idle, long
// after the last job, is found at the next reconciliation and collected:
// reconciliation never stops, and nothing leaks.
#[test]
fn h10_a_stray_appearing_while_idle_is_collected() {
    let report = Scenario::fleet(Fleet {
        jobs: 200,
        concurrency: 20,
        deployments: 1,
        outages: 0,
        restarts: 0,
        strays: 0,
        ..Fleet::production()
    })
    .with_stray(Stray {
        deployment: 0,
        at: Duration::from_secs(86_400),
        lasting: Duration::from_secs(3_600),
    })
    .run(ProductionScheduler::new)
    .expect("the stray is collected, nothing leaks");
    assert_eq!(report.finished + report.refused, 200);
    assert!(report.modelled >= Duration::from_secs(86_400));
    assert_eq!(
        (report.strays, report.orphans_seen, report.orphans_collected),
        (1, 1, 1)
    );
}

// B12: at fleet scale, through outages, a restart and strays, hints change
// no outcome, only how soon ends are seen: with them, the lease of a job
// whose instance stopped is freed at that instant (p50 0) and queues are
// shorter; without, at the next reconcile. Every invariant holds either way.
#[test]
fn b12_hints_on_a_fleet_change_no_outcome_only_how_soon() {
    let run = |hints| {
        Scenario::fleet(Fleet {
            seed: 5,
            jobs: 3_000,
            concurrency: 150,
            deployments: 3,
            outages: 4,
            hints,
            ..Fleet::production()
        })
        .run(ProductionScheduler::new)
        .unwrap_or_else(|f| panic!("{f}"))
    };
    let (on, off) = (run(true), run(false));
    assert!(on.hints && !off.hints);
    assert_eq!(
        (on.submitted, on.finished, on.refused, on.outcomes),
        (off.submitted, off.finished, off.refused, off.outcomes)
    );
    assert_eq!(on.end_seen.p50, Duration::ZERO, "{on}");
    assert!(off.end_seen.p50 > Duration::ZERO, "{off}");
    assert!(on.idle_after_end < off.idle_after_end / 4, "{on}\n{off}");
    assert!(on.queue_wait.p90 <= off.queue_wait.p90, "{on}\n{off}");
    assert!(on.to_string().contains("hints on): p50 0ms"), "{on}");
}

/// A production scheduler whose in-place lease comparisons are held, at
/// every step the checks ask, to the vectors they stand for: the same answer
/// for the books as they are and for books off by one lease anywhere.
struct Compared {
    inner: ProductionScheduler,
    /// How often the checks asked.
    asked: Arc<std::sync::atomic::AtomicUsize>,
}

impl Compared {
    /// Every copy of `held` with one entry one more, and one entry fewer.
    fn off_by_one(held: &[usize]) -> Vec<Vec<usize>> {
        let mut all = vec![held[..held.len().saturating_sub(1)].to_vec()];
        for k in 0..held.len() {
            let mut more = held.to_vec();
            more[k] += 1;
            all.push(more);
        }
        all
    }
}

#[async_trait]
impl Scheduler for Compared {
    async fn submit(&mut self, job: Job) -> bool {
        self.inner.submit(job).await
    }
    async fn tick(&mut self) -> Step {
        self.inner.tick().await
    }
    fn next_wakeup(&mut self) -> Option<SystemTime> {
        self.inner.next_wakeup()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn leases(&self) -> Vec<usize> {
        self.inner.leases()
    }
    fn pool_leases(&self) -> Vec<Vec<usize>> {
        self.inner.pool_leases()
    }
    fn leases_are(&self, held: &[usize]) -> bool {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let answer = self.inner.leases_are(held);
        assert_eq!(answer, self.inner.leases() == held, "{held:?}");
        for other in Compared::off_by_one(held) {
            let other_answer = self.inner.leases_are(&other);
            assert_eq!(other_answer, self.inner.leases() == other, "{other:?}");
        }
        answer
    }
    fn pool_leases_are(&self, held: &[Vec<usize>]) -> bool {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let answer = self.inner.pool_leases_are(held);
        assert_eq!(answer, self.inner.pool_leases() == held, "{held:?}");
        for d in 0..held.len() {
            for pools in Compared::off_by_one(&held[d]) {
                let mut other = held.to_vec();
                other[d] = pools;
                let other_answer = self.inner.pool_leases_are(&other);
                assert_eq!(other_answer, self.inner.pool_leases() == other);
            }
        }
        assert!(!self.inner.pool_leases_are(&held[..held.len() - 1]));
        answer
    }
    fn collects_orphans(&self) -> bool {
        true
    }
}

// H10: the checks compare the scheduler's leases with their books in place
// (`leases_are`, `pool_leases_are`: no vector built at every step); at
// every step of a run with a restart, each comparison answers what
// comparing the vectors would, for the books and for books one lease off.
#[test]
fn h10_the_in_place_lease_comparisons_answer_as_the_vectors_do() {
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let report = small(5)
        .run(|ctx| Compared {
            inner: ProductionScheduler::new(ctx),
            asked: Arc::clone(&asked),
        })
        .unwrap();
    let asked = asked.load(std::sync::atomic::Ordering::Relaxed) as u64;
    assert!(asked > report.steps, "asked {asked} times in {report}");
}
