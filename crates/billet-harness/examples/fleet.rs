//! The main job: a simulated fleet scenario through the production scheduler
//! (`billet-scheduler`, one per deployment, H10), or the harness's reference
//! scheduler with `--scheduler reference`, or the whole of `billet serve`
//! (one service per deployment, in process, jobs over HTTP, H13) with
//! `--scheduler service`.
//!
//! ```text
//! cargo run --release --example fleet
//! cargo run --release --example fleet -- --scheduler reference
//! cargo run --release --example fleet -- --scheduler service --store memory
//! cargo run --release --example fleet -- --intake github --lose 0.01 --repeat 0.01
//! cargo run --release --example fleet -- --seed 7 --jobs 200000 --concurrency 5000 --chart fleet.svg
//! cargo run --release --example fleet -- --trace data/LCG.swf.gz --concurrency 2000
//! ```
//!
//! The production scheduler's default fleet has three routed pools per
//! deployment (`linux` docker falling back to firecracker, `vm` firecracker,
//! `mac` tart), labelled jobs, inventory outages, one restart and two strays;
//! the reference scheduler's has one pool per deployment, no labels, no
//! restart and no stray (it can do neither). A trace's jobs carry no labels,
//! so a replay gives each deployment one pool by default. `--layout`,
//! `--restarts` and `--strays` change that shape for either.
//!
//! `--intake github` runs the service (it implies `--scheduler service`) with
//! each deployment's jobs coming as GitHub's `workflow_job` deliveries from a
//! simulated GitHub in modelled time, which answers the API and plays the
//! runners' side (H14); `--lose` and `--repeat` drop and repeat that share of
//! its deliveries.
//!
//! Prints the report; exits 1 and prints the seed and the replay command when
//! an invariant breaks.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use billet_harness::github::Faults;
use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario, Which};
use billet_harness::service::{Intake, ServiceOptions, ServiceScheduler, StoreKind, Submission};
use billet_harness::trace::Trace;
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

// A simulated fleet allocates and frees millions of small strings (every
// inventory answer is a fresh Vec<Instance>); mimalloc does that faster than
// the system allocator. A binary chooses its allocator; the library does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs a seeded fleet scenario over the simulated backend and prints its report.
#[derive(Debug, Parser)]
#[command(name = "fleet", version, about)]
struct Args {
    /// The scheduler under test. Default: production; service with
    /// `--intake github`.
    #[arg(long, value_enum)]
    scheduler: Option<SchedulerArg>,
    /// How jobs reach `--scheduler service`: `http` (`POST /v1/jobs`, H13) or
    /// `github` (GitHub's deliveries from a simulated GitHub, H14; implies
    /// `--scheduler service`).
    #[arg(long, value_enum)]
    intake: Option<IntakeArg>,
    /// With `--intake github`: the share of deliveries lost, in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    lose: f64,
    /// With `--intake github`: the share of deliveries sent twice, in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    repeat: f64,
    /// With `--intake github`: the share of deliveries held back up to ten
    /// minutes (modelled), so that they come late and out of order, in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    late: f64,
    /// With `--intake github`: how many ten-minute windows GitHub's API
    /// answers every call `503`, or `403` with `Retry-After` (every other
    /// one), spread over the arrivals.
    #[arg(long, default_value_t = 0)]
    github_outage: u32,
    /// Where `--scheduler service` keeps its jobs: `durable` (SQLite in a
    /// temporary directory, as `billet serve` does) or `memory` (nothing
    /// survives a restart, so restarts are reported as unsupported).
    #[arg(long, value_enum, default_value_t = StoreArg::Durable)]
    store: StoreArg,
    /// How `--scheduler service` sends the jobs of one instant: `concurrent`
    /// (all at once) or `ordered` (one after another, the production
    /// scheduler's order).
    #[arg(long, value_enum, default_value_t = SubmissionArg::Concurrent)]
    submission: SubmissionArg,
    /// Whether the scheduler reads its providers' hints (B12): an end is then
    /// seen at the instant its instance stops, not at the next reconcile.
    /// Default: on for the production scheduler; the reference scheduler and
    /// the service take none.
    #[arg(long, value_enum)]
    hints: Option<HintsArg>,
    /// Every deployment's pools: `routed` (linux, vm, mac, with routes and a
    /// label mix) or `single` (one docker pool, no labels). Default: routed
    /// for the production scheduler's generated fleet; single for the
    /// reference, and for a trace (its jobs carry no labels, so all of them
    /// take the default route, to the docker pool alone).
    #[arg(long, value_enum)]
    layout: Option<LayoutArg>,
    /// Restarts of a deployment's scheduler spread over the run. Default: 1
    /// for the production scheduler, 0 for the reference (which cannot).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1000))]
    restarts: Option<u64>,
    /// Stray instances left on the host for the scheduler to collect. Default:
    /// 2 for the production scheduler, 0 for the reference (which does not
    /// collect orphans).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1000))]
    strays: Option<u64>,
    /// The seed of every random draw (with --trace: the outage times); the
    /// same seed gives the same digest.
    #[arg(long, default_value_t = Fleet::default().seed)]
    seed: u64,
    /// Replay this SWF trace (plain or gzipped) instead of generating jobs;
    /// --jobs is then not used.
    #[arg(long, value_name = "PATH")]
    trace: Option<PathBuf>,
    /// Jobs in all (generated workloads only).
    #[arg(long, default_value_t = Fleet::default().jobs)]
    jobs: u64,
    /// Leases across all deployments, exactly (split as evenly as whole
    /// numbers allow; a deployment may get none).
    #[arg(long, default_value_t = Fleet::default().concurrency as u64, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// Deployments sharing the one simulated host.
    #[arg(long, default_value_t = Fleet::default().deployments as u64, value_parser = clap::value_parser!(u64).range(1..=1000))]
    deployments: u64,
    /// Inventory outages spread over the run.
    #[arg(long, default_value_t = Fleet::default().outages as u64, value_parser = clap::value_parser!(u64).range(0..=10000))]
    outages: u64,
    /// Write an SVG chart of running leases and queue length to this path.
    #[arg(long, value_name = "PATH")]
    chart: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SchedulerArg {
    /// `billet-scheduler`, one per deployment.
    Production,
    /// The harness's reference scheduler.
    Reference,
    /// `billet serve` whole, one service per deployment (H13).
    Service,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IntakeArg {
    /// `POST /v1/jobs`.
    Http,
    /// GitHub's `workflow_job` deliveries.
    Github,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StoreArg {
    /// SQLite, as `billet serve` keeps it.
    Durable,
    /// In memory.
    Memory,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SubmissionArg {
    /// The jobs of one instant all at once.
    Concurrent,
    /// One after another, in arrival order.
    Ordered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum HintsArg {
    /// Read hints.
    On,
    /// Read none: ends are seen at the reconciles.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    /// Three pools with routes, and labelled jobs.
    Routed,
    /// One docker pool, and no labels.
    Single,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let github = args.intake == Some(IntakeArg::Github);
    let scheduler = match (args.scheduler, args.intake) {
        (Some(scheduler), None) => scheduler,
        (None | Some(SchedulerArg::Service), Some(_)) => SchedulerArg::Service,
        (None, None) => SchedulerArg::Production,
        (Some(_), Some(_)) => {
            eprintln!("error: --intake is the service's: use it with --scheduler service");
            return ExitCode::FAILURE;
        }
    };
    let mut faults = Faults {
        lose: args.lose,
        repeat: args.repeat,
        late: args.late,
        outages: args.github_outage,
        seed: args.seed,
        ..Faults::default()
    };
    if let Err(err) = faults.validate() {
        eprintln!("error: {err}");
        return ExitCode::FAILURE;
    }
    if !github
        && (args.lose > 0.0 || args.repeat > 0.0 || args.late > 0.0 || args.github_outage > 0)
    {
        eprintln!(
            "error: --lose, --repeat, --late and --github-outage are GitHub's faults: use them with --intake github"
        );
        return ExitCode::FAILURE;
    }
    if args.github_outage > 0 && args.trace.is_some() {
        eprintln!(
            "error: --github-outage spreads its windows over a generated workload's arrivals: not with --trace"
        );
        return ExitCode::FAILURE;
    }
    let shape = match scheduler {
        SchedulerArg::Production | SchedulerArg::Service => Fleet::production(),
        SchedulerArg::Reference => Fleet::default(),
    };
    let count = |n: Option<u64>, default: usize| n.map_or(default, |n| n as usize);
    let fleet = Fleet {
        seed: args.seed,
        jobs: args.jobs,
        concurrency: usize::try_from(args.concurrency).unwrap_or(usize::MAX),
        deployments: usize::try_from(args.deployments).unwrap_or(1),
        outages: usize::try_from(args.outages).unwrap_or(0),
        routed: args
            .layout
            .map_or(shape.routed && args.trace.is_none(), |l| {
                l == LayoutArg::Routed
            }),
        restarts: count(args.restarts, shape.restarts),
        strays: count(args.strays, shape.strays),
        hints: match scheduler {
            SchedulerArg::Production => args.hints.map_or(shape.hints, |h| h == HintsArg::On),
            SchedulerArg::Reference | SchedulerArg::Service => false,
        },
        scheduler: match scheduler {
            SchedulerArg::Production | SchedulerArg::Service => Which::Production,
            SchedulerArg::Reference => Which::Reference,
        },
        ..shape
    };
    let scenario = match &args.trace {
        Some(path) => match Scenario::replay(Trace::new(path), fleet) {
            Ok(scenario) => scenario,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::FAILURE;
            }
        },
        None => Scenario::fleet(fleet),
    };
    faults.span = scenario.workload.span();

    // A progress bar on stderr, shown only once the run has taken a second.
    let length = if args.trace.is_some() { 0 } else { args.jobs };
    let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} jobs done")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let mut shown = false;
    let mut observe = |p: billet_harness::run::Progress| {
        if !shown && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_length(p.total);
        bar.set_position(p.done);
    };
    let result = match scheduler {
        SchedulerArg::Production => scenario.run_observed(ProductionScheduler::new, &mut observe),
        SchedulerArg::Reference => scenario.run_observed(ReferenceScheduler::new, &mut observe),
        SchedulerArg::Service => {
            let options = ServiceOptions {
                store: match args.store {
                    StoreArg::Durable => StoreKind::Durable,
                    StoreArg::Memory => StoreKind::Memory,
                },
                submission: match args.submission {
                    SubmissionArg::Concurrent => Submission::Concurrent,
                    SubmissionArg::Ordered => Submission::Ordered,
                },
                intake: if github {
                    Intake::Github(faults)
                } else {
                    Intake::Http
                },
            };
            let build = |ctx| ServiceScheduler::new(ctx, options);
            scenario.run_observed(build, &mut observe)
        }
    };
    bar.finish_and_clear();

    match result {
        Ok(report) => {
            println!("{report}");
            if let Some(path) = args.chart {
                if let Err(err) = report.write_chart(&path) {
                    eprintln!("error: {err}");
                    return ExitCode::FAILURE;
                }
                println!("chart: {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::FAILURE
        }
    }
}
