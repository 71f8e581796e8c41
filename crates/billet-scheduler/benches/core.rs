//! `core`: placement decisions per second of the scheduler's core alone (no
//! provider, no driver, no runtime), with 100,000 jobs queued across 100
//! pools, against a baseline measured in the same run: the same count of pops
//! from a plain `VecDeque` of the same job values, each dropped. Goal: the
//! core takes at most 20x the baseline's time per job.
//!
//! A placement decision is the core taking one job from its queue onto a pool
//! with room and asking for its launch ([`Action`] with [`Call::Launch`]).
//! Set-up, untimed: 100 docker pools of capacity 1,000 each, one route per
//! pool by label, and 100,000 jobs submitted round-robin over the labels while
//! every pool's first inventory is unanswered, so no pool is ready and nothing
//! is placed. Timed: answering each pool's first `List` with an empty
//! inventory, in pool order, and the placements that follow, every action and
//! decision drained (and dropped) after each answer. Every job is placed.
//! The baseline's pops are timed in between, as many after each answer as it
//! placed, so that both sides run under the same load.
//!
//! `cargo test --benches` runs it once with 1,000 jobs over 10 pools;
//! `cargo bench -p billet-scheduler` runs it in full, seven rounds, and
//! prints the medians and the best of each side, and both ratios.

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use billet_config::Config;
use billet_provider::TrustClass;
use billet_scheduler::{Action, Answer, Call, CallId, Core, Decision, Job, JobId, Settings};

/// Whether this is a real bench run (`cargo bench`), rather than
/// `cargo test --benches`, which runs every bench once with tiny inputs.
fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The time every input is handed in at: the core reads no clock, and no
/// deadline passes while the bench runs.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// `pools` docker pools `p0`, `p1`, ... of `capacity` each, and one route per
/// pool: a job labelled `l<i>` goes to `p<i>`.
fn config(pools: usize, capacity: usize) -> Config {
    let mut yaml = String::from("deployment: {id: bench}\nproviders:\n");
    for i in 0..pools {
        yaml.push_str(&format!(
            "  - {{name: p{i}, kind: docker, capacity: {capacity}, docker: {{image: runner}}}}\n"
        ));
    }
    yaml.push_str("routing:\n  routes:\n");
    for i in 0..pools {
        yaml.push_str(&format!("    - {{labels: [l{i}], provider: p{i}}}\n"));
    }
    Config::from_yaml_str(&yaml).expect("a valid bench configuration")
}

/// `jobs` jobs, round-robin over the pools' labels, each as a CI job looks:
/// one label, a short command, trusted.
fn jobs(jobs: usize, pools: usize) -> Vec<Job> {
    (0..jobs)
        .map(|n| {
            Job::new(JobId(n as u64), ["make", "-j4", "test"])
                .with_labels([format!("l{}", n % pools)])
                .with_trust(TrustClass::Trusted)
        })
        .collect()
}

/// A core over `config` with every job submitted and nothing placed, and the
/// calls of every pool's first inventory, in pool order.
fn queued(config: &Config, jobs: &[Job]) -> (Core, Vec<CallId>) {
    let mut core = Core::new(
        config.clone(),
        |_| [true, true, true],
        Settings::default(),
        now(),
    );
    let mut lists = Vec::new();
    while let Some(action) = core.poll_action() {
        assert_eq!(action.call, Call::List, "a new core lists first");
        lists.push(action.id);
    }
    for job in jobs {
        core.submit(job.clone(), now()).expect("accepted");
    }
    assert!(core.poll_action().is_none(), "nothing placed before a list");
    assert_eq!(core.queued(), jobs.len() as u64);
    (core, lists)
}

/// One round: answers every pool's first inventory in turn, timing the
/// placements that follow each answer (every action and decision drained and
/// dropped); after each, times popping as many jobs from `baseline` (each
/// dropped). Interleaved so that both sides run under the same load: timed
/// alone, the baseline's few milliseconds moved by 2x from round to round.
/// Answers the core's time, the baseline's, and the launches.
fn round(mut core: Core, lists: Vec<CallId>, mut baseline: VecDeque<Job>) -> Round {
    let mut placed = Duration::ZERO;
    let mut popped = Duration::ZERO;
    let mut launches = 0;
    for list in lists {
        let start = Instant::now();
        let mut these = 0;
        core.handle_answer(list, Answer::Listed(Ok(Vec::new())), now());
        while let Some(action) = core.poll_action() {
            let action: Action = black_box(action);
            these += usize::from(matches!(action.call, Call::Launch(_)));
        }
        while let Some(decision) = core.poll_decision() {
            black_box::<Decision>(decision);
        }
        placed += start.elapsed();

        let start = Instant::now();
        for _ in 0..these {
            drop(black_box(baseline.pop_front()));
        }
        popped += start.elapsed();
        launches += these;
    }
    assert_eq!(core.queued(), 0, "every job is placed");
    assert!(baseline.is_empty(), "as many pops as placements");
    drop(black_box(core));
    Round {
        placed,
        popped,
        launches,
    }
}

struct Round {
    placed: Duration,
    popped: Duration,
    launches: usize,
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let (jobs_n, pools) = if full_run() {
        (100_000, 100)
    } else {
        (1_000, 10)
    };
    let rounds = if full_run() { 7 } else { 1 };
    let config = config(pools, jobs_n / pools);
    let jobs = jobs(jobs_n, pools);

    let mut core_times = Vec::new();
    let mut queue_times = Vec::new();
    for _ in 0..rounds {
        let (core, lists) = queued(&config, &jobs);
        let baseline: VecDeque<Job> = jobs.iter().cloned().collect();
        let measured = round(core, lists, baseline);
        assert_eq!(measured.launches, jobs_n, "one launch per job");
        core_times.push(measured.placed);
        queue_times.push(measured.popped);
    }
    let best = |times: &[Duration]| times.iter().copied().min().unwrap_or_default();
    let (core_median, queue_median) = (median(core_times.clone()), median(queue_times.clone()));
    let (core_best, queue_best) = (best(&core_times), best(&queue_times));
    let per = |d: Duration| d.as_secs_f64() * 1e9 / jobs_n as f64;
    let rate = |d: Duration| jobs_n as f64 / d.as_secs_f64();
    println!(
        "core: {jobs_n} jobs over {pools} pools: {:.0} placements/s ({:.1} ns each), \
         best {:.0}/s ({:.1} ns), median and best of {rounds}: {core_times:?}",
        rate(core_median),
        per(core_median),
        rate(core_best),
        per(core_best)
    );
    println!(
        "core: baseline VecDeque pops: {:.0} pops/s ({:.1} ns each), \
         best {:.0}/s ({:.1} ns), median and best of {rounds}: {queue_times:?}",
        rate(queue_median),
        per(queue_median),
        rate(queue_best),
        per(queue_best)
    );
    if full_run() {
        for (what, core, queue) in [
            ("medians", core_median, queue_median),
            ("bests", core_best, queue_best),
        ] {
            let ratio = core.as_secs_f64() / queue.as_secs_f64();
            let verdict = if ratio <= 20.0 { "met" } else { "MISSED" };
            println!("ratio core placement ({what}): {ratio:.2}x (goal <= 20x: {verdict})");
        }
    }
}
