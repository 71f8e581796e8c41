//! The main job: a simulated fleet scenario through the reference scheduler.
//!
//! ```text
//! cargo run --release --example fleet
//! cargo run --release --example fleet -- --seed 7 --jobs 200000 --concurrency 5000 --chart fleet.svg
//! cargo run --release --example fleet -- --trace data/LCG.swf.gz --concurrency 2000
//! ```
//!
//! Prints the report; exits 1 and prints the seed and the replay command when
//! an invariant breaks.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::trace::Trace;
use clap::Parser;
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

fn main() -> ExitCode {
    let args = Args::parse();
    let fleet = Fleet {
        seed: args.seed,
        jobs: args.jobs,
        concurrency: usize::try_from(args.concurrency).unwrap_or(usize::MAX),
        deployments: usize::try_from(args.deployments).unwrap_or(1),
        outages: usize::try_from(args.outages).unwrap_or(0),
        ..Fleet::default()
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

    // A progress bar on stderr, shown only once the run has taken a second.
    let length = if args.trace.is_some() { 0 } else { args.jobs };
    let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::hidden());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} jobs done")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let started = Instant::now();
    let mut shown = false;
    let result = scenario.run_observed(ReferenceScheduler::new, &mut |p| {
        if !shown && started.elapsed() > Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        bar.set_length(p.total);
        bar.set_position(p.done);
    });
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
