//! Scenarios through the reference scheduler: the invariants hold for a
//! correct scheduler and break, with the seed printed, for broken ones.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::run::Violation;
use billet_harness::scenario::{DeploymentSpec, Fleet, Outage, Scenario, split_leases};
use billet_harness::trace::{SwfRecord, Trace, TraceErrorKind};
use billet_harness::workload::{LabelMix, RunTime, TrustMix, Workload};
use billet_provider::{
    Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass,
};

fn small(seed: u64) -> Scenario {
    Scenario::fleet(Fleet {
        seed,
        jobs: 3_000,
        concurrency: 120,
        deployments: 3,
        outages: 4,
        ..Fleet::default()
    })
}

// H2, H3: several deployments over one host with a fault schedule; the
// reference scheduler keeps every invariant, every job finishes, nothing leaks,
// and every outage is survived with nothing freed on a failed inventory.
#[test]
fn h2_h3_reference_scheduler_keeps_every_invariant_through_outages() {
    let report = small(1).run(ReferenceScheduler::new).unwrap();
    assert_eq!(report.submitted, 3_000);
    assert_eq!(report.finished + report.refused, 3_000);
    assert!(
        report.refused > 0,
        "2% of jobs are untrusted or unclassified"
    );
    assert_eq!(report.vanished, 0);
    assert_eq!(report.deployments, 3);
    assert_eq!(
        report.peak_leases, 120,
        "the load drives the fleet to capacity"
    );
    assert_eq!(report.outages_survived, 4);
    assert!(
        report.inventory_errors > 0,
        "the outages were seen by the reconciler"
    );
    assert!(report.modelled > Duration::from_secs(3600));
}

// H2: a hand-built scenario: fixed run times, explicit deployments and an
// outage, all jobs trusted.
#[test]
fn h2_hand_built_scenario() {
    let scenario = Scenario::new(5)
        .with_workload(Workload {
            jobs: 400,
            arrivals_per_minute: 30.0,
            run_time: RunTime::Fixed(Duration::from_secs(120)),
            trust: TrustMix::ALL_TRUSTED,
            name_prefix: "ci-".to_owned(),
            labels: LabelMix::NONE,
        })
        .with_deployments(vec![
            DeploymentSpec {
                name: "east".to_owned(),
                capacity: 40,
            },
            DeploymentSpec {
                name: "west".to_owned(),
                capacity: 20,
            },
        ])
        .with_outage(Outage {
            deployment: 1,
            at: Duration::from_secs(300),
            lasting: Duration::from_secs(600),
        });
    let report = scenario.run(ReferenceScheduler::new).unwrap();
    assert_eq!((report.finished, report.refused), (400, 0));
    assert!(report.peak_leases <= 60);
    assert_eq!(report.outages_survived, 1);
}

// H2: a scenario that cannot run is refused with a reason, not a panic.
#[test]
fn h2_invalid_scenarios_are_refused() {
    let dup = Scenario::new(1).with_deployments(vec![
        DeploymentSpec {
            name: "a".to_owned(),
            capacity: 1,
        },
        DeploymentSpec {
            name: "a".to_owned(),
            capacity: 1,
        },
    ]);
    let err = dup.run(ReferenceScheduler::new).unwrap_err();
    assert!(
        matches!(err.violation, Violation::InvalidScenario { .. }),
        "{err}"
    );
    let bad_outage = Scenario::new(1).with_outage(Outage {
        deployment: 9,
        at: Duration::ZERO,
        lasting: Duration::from_secs(1),
    });
    assert!(bad_outage.run(ReferenceScheduler::new).is_err());
    let empty_owner = Scenario::new(1).with_deployments(vec![DeploymentSpec {
        name: String::new(),
        capacity: 1,
    }]);
    assert!(empty_owner.run(ReferenceScheduler::new).is_err());
}

/// How a [`Flawed`] provider breaks the contract.
#[derive(Debug, Clone, Copy)]
enum Flaw {
    /// Its inventory answers short: it drops one running instance from every
    /// list of three or more (the one with the smallest name: deterministic).
    ShortList,
    /// Its destroy claims success and removes nothing.
    FakeDestroy,
}

/// A provider that forwards to a correct one, except for its flaw.
#[derive(Debug)]
struct Flawed(Arc<dyn Provider>, Flaw);

impl Flawed {
    fn wrap(flaw: Flaw) -> impl Fn(usize, Arc<dyn Provider>) -> Arc<dyn Provider> + Send + Sync {
        move |_, inner| Arc::new(Flawed(inner, flaw)) as Arc<dyn Provider>
    }
}

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
        let mut all = self.0.list().await?;
        if matches!(self.1, Flaw::ShortList)
            && all.len() >= 3
            && let Some(k) = (0..all.len())
                .filter(|k| all[*k].state.is_running())
                .min_by(|a, b| all[*a].name.cmp(&all[*b].name))
        {
            all.remove(k);
        }
        Ok(all)
    }
    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        match self.1 {
            Flaw::FakeDestroy => Ok(Teardown::Stopped),
            Flaw::ShortList => self.0.destroy(id).await,
        }
    }
}

// H3, H4: a provider whose inventory answers short makes the reference
// scheduler free a lease whose instance still runs; the harness reports it,
// with the seed and the command that replays it.
#[test]
fn h3_short_inventory_breaks_an_invariant_and_the_seed_is_reported() {
    let scenario = small(77).with_wrap(Flawed::wrap(Flaw::ShortList));
    let failure = scenario.run(ReferenceScheduler::new).unwrap_err();
    assert!(
        matches!(failure.violation, Violation::FreedWhileRunning { .. }),
        "{failure}"
    );
    assert_eq!(failure.seed, 77);
    let printed = failure.to_string();
    assert!(printed.contains("seed: 77"), "{printed}");
    assert!(
        printed.contains("cargo run --release --example fleet -- --seed 77"),
        "{printed}"
    );
    assert!(printed.contains("still running"), "{printed}");
}

// H3, H10: a scheduler that believes it has more capacity than it does is
// caught, first in its one pool.
#[test]
fn h3_capacity_overrun_is_caught() {
    let failure = small(3)
        .run(|mut ctx| {
            for d in &mut ctx.deployments {
                d.capacity *= 2;
            }
            ReferenceScheduler::new(ctx)
        })
        .unwrap_err();
    assert!(
        matches!(failure.violation, Violation::PoolOverCapacity { ref pool, .. } if pool == "linux"),
        "{failure}"
    );
}

// H3: instances left behind are reported as a leak.
#[test]
fn h3_leaked_instances_are_caught() {
    let scenario = Scenario::new(9)
        .with_workload(Workload {
            jobs: 50,
            ..Workload::default()
        })
        .with_wrap(Flawed::wrap(Flaw::FakeDestroy));
    let failure = scenario.run(ReferenceScheduler::new).unwrap_err();
    assert_eq!(
        failure.violation,
        Violation::Leaked { instances: 50 },
        "{failure}"
    );
}

// H4: the same seed gives the same digest and report; another seed another.
#[test]
fn h4_same_seed_same_digest() {
    let a = small(11).run(ReferenceScheduler::new).unwrap();
    let b = small(11).run(ReferenceScheduler::new).unwrap();
    let c = small(12).run(ReferenceScheduler::new).unwrap();
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.digest.len(), 32);
    assert_eq!(
        (a.finished, a.peak_leases, a.queue_wait),
        (b.finished, b.peak_leases, b.queue_wait)
    );
    assert_ne!(a.digest, c.digest);
}

// H5, H6: the default fleet: at least 1,000 concurrent leases, 3 outages,
// 2 deployments; the report prints the lines tools read, and the chart is an SVG.
/// The README, whole.
fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap()
}

/// The README shows `report` as the fleet example prints it: every line but
/// the wall time and the speed-up (which vary by machine), in order, in one
/// block.
fn assert_readme_shows(report: &billet_harness::report::Report) {
    let text = report.to_string();
    let readme = readme();
    let first = text.lines().nth(1).unwrap_or_default();
    let digest = format!("digest: {}", report.digest);
    let found = readme.split("```text\n").any(|block| {
        let block = block.split("```").next().unwrap_or_default();
        block.contains(&digest)
            && text
                .lines()
                .filter(|l| !l.starts_with("wall time: ") && !l.starts_with("speed-up: "))
                .all(|l| block.lines().any(|b| b == l))
    });
    assert!(
        found,
        "README.md does not show this report ({first}) as the fleet example prints it; run it and paste:\n{text}"
    );
}

#[test]
fn h5_h6_default_fleet_report_and_chart() {
    let fleet = Fleet::default();
    assert!(fleet.concurrency >= 1_000 && fleet.outages >= 3 && fleet.deployments == 2);
    let report = Scenario::fleet(fleet).run(ReferenceScheduler::new).unwrap();
    assert!(report.peak_leases >= 1_000, "{report}");
    assert_eq!(report.outages_survived, 3);
    assert!(report.speed_up() > 1.0);
    let text = report.to_string();
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{text}"))
            .to_owned()
    };
    assert_eq!(
        line("peak concurrent leases: ").parse::<usize>().unwrap(),
        report.peak_leases
    );
    let digest = line("digest: ");
    assert_eq!(digest, report.digest);
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()));
    for prefix in [
        "jobs: ",
        "queue wait (modelled): p50 ",
        "modelled time: ",
        "wall time: ",
        "speed-up: ",
        "outages survived: ",
    ] {
        line(prefix);
    }
    // The README's `--scheduler reference` session.
    assert_readme_shows(&report);

    let dir = std::env::temp_dir().join(format!("billet-chart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fleet.svg");
    report.write_chart(&path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("<svg") && svg.contains("running leases") && svg.contains("queued jobs"));
    assert!(svg.matches("<polyline").count() >= 2, "two series drawn");
    std::fs::remove_dir_all(&dir).unwrap();

    let bad = report.write_chart(std::path::Path::new("/nonexistent-dir/x/fleet.svg"));
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("/nonexistent-dir/x/fleet.svg")
    );
}

// H6, H10: the fleet example's default, the production fleet: at least 1,000
// concurrent leases over two deployments of three routed pools, labelled
// jobs, three outages, one restart and two strays, every invariant kept.
#[test]
fn h6_h10_default_production_fleet() {
    let fleet = Fleet::production();
    assert!(fleet.concurrency >= 1_000 && fleet.outages >= 3 && fleet.deployments == 2);
    assert!(fleet.routed && fleet.restarts == 1 && fleet.strays == 2);
    let report = Scenario::fleet(fleet)
        .run(billet_harness::production::ProductionScheduler::new)
        .unwrap();
    assert!(report.peak_leases >= 1_000, "{report}");
    assert_eq!(report.finished + report.refused, fleet.jobs);
    assert_eq!(report.outages_survived, 3);
    assert_eq!(
        (report.restarts, report.orphans_collected),
        (1, 2),
        "{report}"
    );
    assert!(
        report.adopted > 0 && report.inventory_errors > 0,
        "{report}"
    );
    // The README's first session: the main job.
    assert_readme_shows(&report);
}

/// The LCG trace shipped with the repository (T4).
const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

/// A synthetic SWF trace in a temporary file: `records` jobs, one every
/// `every` seconds (with a burst of 40 at once every 500 records), each
/// running `run` seconds; a few not replayable, a few on two processors.
fn synthetic(dir: &tempfile::TempDir, records: i64, every: i64, run: i64) -> Trace {
    let mut text = String::from("; Version: 2.2\n; Installation: synthetic\n; Computer: none\n");
    let mut submit = 0;
    for i in 0..records {
        if i % 500 != 0 || i == 0 {
            submit += every;
        }
        let mut f = SwfRecord::new(i + 1, submit, run + i % 7).fields();
        if i % 97 == 5 {
            f[3] = -1; // unknown run time
        }
        if i % 89 == 3 {
            (f[3], f[10]) = (0, 5); // cancelled before it started
        }
        if i % 71 == 1 {
            f[4] = 2; // two processors, two leases
        }
        text += &SwfRecord::from_fields(f).to_string();
        text.push('\n');
    }
    let path = dir.path().join(format!("synthetic-{records}.swf"));
    std::fs::write(&path, text).unwrap();
    Trace::new(path)
}

// T3: `--concurrency N` means exactly N leases in all, for generated workloads
// too: the split is exact, a deployment may get none, and a split that leaves
// no deployment any lease is refused.
#[test]
fn t3_leases_split_exactly() {
    assert_eq!(split_leases(13, 7), [2, 2, 2, 2, 2, 2, 1]);
    assert_eq!(split_leases(1, 2), [1, 0]);
    assert_eq!(split_leases(1_000, 2), [500, 500]);
    for (n, d) in [(13, 7), (1, 2), (3, 5), (2_000, 3)] {
        let split = split_leases(n, d);
        assert_eq!((split.len(), split.iter().sum::<usize>()), (d, n));
        assert!(split.iter().max().unwrap() - split.iter().min().unwrap() <= 1);
    }
    let fleet = |concurrency, deployments| Fleet {
        jobs: 300,
        concurrency,
        deployments,
        outages: 0,
        ..Fleet::default()
    };
    let report = Scenario::fleet(fleet(13, 7))
        .run(ReferenceScheduler::new)
        .unwrap();
    assert_eq!((report.capacity, report.peak_leases), (13, 13), "{report}");
    let report = Scenario::fleet(fleet(1, 2))
        .run(ReferenceScheduler::new)
        .unwrap();
    assert_eq!((report.capacity, report.peak_leases), (1, 1), "{report}");
    let refused = Scenario::fleet(fleet(0, 3))
        .run(ReferenceScheduler::new)
        .unwrap_err();
    assert!(
        matches!(&refused.violation, Violation::InvalidScenario { reason } if reason.contains("no deployment")),
        "{refused}"
    );
}

// T2: a replay runs through the same scheduler, invariants, outages and report
// as a generated workload, and the same trace and flags give the same digest;
// another seed draws other outage times, so another digest.
#[test]
fn t2_replay_is_deterministic_through_outages() {
    let dir = tempfile::tempdir().unwrap();
    let trace = synthetic(&dir, 3_000, 2, 150);
    let fleet = |seed| Fleet {
        seed,
        concurrency: 60,
        deployments: 3,
        outages: 4,
        ..Fleet::default()
    };
    let run = |seed| {
        Scenario::replay(trace.clone(), fleet(seed))
            .unwrap()
            .run(ReferenceScheduler::new)
            .unwrap()
    };
    let (a, b, c) = (run(3), run(3), run(4));
    assert_eq!(a.digest, b.digest);
    assert_eq!((a.queue_wait, a.peak_queue), (b.queue_wait, b.peak_queue));
    assert_ne!(a.digest, c.digest, "outage times are drawn from the seed");
    let counts = a.trace.as_ref().unwrap().counts;
    assert_eq!(counts.records, 3_000);
    assert_eq!(a.submitted, counts.jobs);
    assert_eq!(a.finished, a.submitted, "{a}");
    assert_eq!(a.refused, 0);
    assert_eq!(
        counts.jobs,
        counts.records - counts.not_replayed() + counts.multi_processor_records
    );
    assert!(counts.unknown_run_time > 0 && counts.cancelled_before_start > 0);
    assert_eq!(a.outages_survived, 4);
    assert!(a.inventory_errors > 0, "{a}");
    assert_eq!(a.peak_leases, 60, "bursts of 40 fill the fleet: {a}");
    assert!(a.peak_queue > 0, "{a}");
}

// T2: a trace that goes bad mid-replay stops the run with the error naming
// the file and line; nothing after it is replayed.
#[test]
fn t2_bad_line_mid_replay_fails_the_run_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let good = SwfRecord::new(1, 10, 5).to_string();
    let path = dir.path().join("bad.swf");
    std::fs::write(&path, format!("{good}\n{good}\nnot a record\n{good}\n")).unwrap();
    let scenario = Scenario::replay(
        Trace::new(&path),
        Fleet {
            outages: 0,
            concurrency: 4,
            ..Fleet::default()
        },
    )
    .unwrap();
    let failure = scenario.run(ReferenceScheduler::new).unwrap_err();
    let Violation::Trace { error } = &failure.violation else {
        panic!("{failure}");
    };
    assert_eq!(
        (error.line, error.file.as_str()),
        (3, path.to_str().unwrap())
    );
    assert!(matches!(error.kind, TraceErrorKind::Malformed { .. }));
    assert!(failure.replay.contains("--trace"), "{failure}");
    // Scanning for outage times finds the same line before anything runs.
    let err = Scenario::replay(Trace::new(&path), Fleet::default()).unwrap_err();
    assert_eq!(err.line, 3);
}

// T3, T4: the LCG trace's report names the trace (installation, jobs, span)
// and what was not replayed; here its first 3,000 records onto 300 leases.
#[test]
fn t3_t4_lcg_report_names_the_trace() {
    let scenario = Scenario::replay(
        Trace::new(LCG).first(3_000),
        Fleet {
            concurrency: 300,
            ..Fleet::default()
        },
    )
    .unwrap();
    let report = scenario.run(ReferenceScheduler::new).unwrap();
    let text = report.to_string();
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{text}"))
            .to_owned()
    };
    let trace = line("trace: ");
    assert!(trace.contains("LCG.swf.gz (LCG grid, computer various, starting Sun Nov 20 00:00:05 GMT 2005): 3000 records, 3000 jobs submitted over "), "{trace}");
    assert_eq!(
        line("not replayed: "),
        "0 of 3000 records (0 with unknown run time, 0 cancelled before starting); \
         0 records with more than one processor replayed as one lease per processor, \
         0 with no processor count replayed as one lease"
    );
    assert_eq!((report.submitted, report.finished), (3_000, 3_000));
    assert!(report.peak_leases <= 300);
    line("digest: ");
}

// T4: the trace ships with its header and acknowledgement intact, and the
// README credits the archive and shows its report.
#[test]
fn t4_lcg_ships_with_header_and_readme_report() {
    let mut reader = Trace::new(LCG).open().unwrap();
    let header = reader.read_header().unwrap().clone();
    assert_eq!(header.version.as_deref(), Some("2.2"));
    assert_eq!(header.installation.as_deref(), Some("LCG grid"));
    assert_eq!(header.acknowledge.as_deref(), Some("Hui Li"));
    assert!(
        header
            .conversion
            .as_deref()
            .unwrap()
            .starts_with("Dror Feitelson")
    );
    assert_eq!(
        (header.max_jobs, header.max_records),
        (Some(188_041), Some(188_041))
    );
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    for needle in [
        "Parallel Workloads Archive",
        "Hui Li",
        "Dror Feitelson",
        "cargo run --release --example fleet -- --trace data/LCG.swf.gz --concurrency 2000",
        "trace: data/LCG.swf.gz (LCG grid, computer various, starting Sun Nov 20 00:00:05 GMT 2005): 188041 records, 188041 jobs",
        "not replayed: 0 of 188041 records",
        // H13: the same trace through the whole service, and its own lines.
        "cargo run --release --example fleet -- --scheduler service --trace data/LCG.swf.gz --concurrency 2000 --deployments 1",
        "scheduler: service",
        "service: store durable (SQLite, synchronous = FULL: one fsync per commit); 188230 requests",
        "recovery of deployment 0: 1891 unended jobs resumed from the store, 1891 instances adopted, nothing run twice",
        // H14: the same trace through GitHub's deliveries.
        "cargo run --release --example fleet -- --intake github --trace data/LCG.swf.gz --concurrency 2000 --deployments 1",
        "github: 188041 jobs queued, 188041 completed by billet's runners",
        "github runners: 188041 started (1.000 per job), 0 taken by another job than their own",
    ] {
        assert!(readme.contains(needle), "README.md lacks {needle:?}");
    }
}
