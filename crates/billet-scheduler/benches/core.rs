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
//!
//! `cargo test --benches` runs it once with 1,000 jobs over 10 pools;
//! `cargo bench -p billet-scheduler` runs it in full, five rounds of each
//! side, and prints the medians and the ratio.

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

/// Times the placements that follow answering every first inventory; answers
/// the time and the count of launches asked for.
fn place_all(mut core: Core, lists: Vec<CallId>) -> (Duration, usize) {
    let mut launches = 0;
    let start = Instant::now();
    for list in lists {
        core.handle_answer(list, Answer::Listed(Ok(Vec::new())), now());
        while let Some(action) = core.poll_action() {
            let action: Action = black_box(action);
            launches += usize::from(matches!(action.call, Call::Launch(_)));
        }
        while let Some(decision) = core.poll_decision() {
            black_box::<Decision>(decision);
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(core.queued(), 0, "every job is placed");
    drop(black_box(core));
    (elapsed, launches)
}

/// Times popping every job from a plain queue, each dropped.
fn pop_all(mut queue: VecDeque<Job>) -> (Duration, usize) {
    let mut popped = 0;
    let start = Instant::now();
    while let Some(job) = queue.pop_front() {
        drop(black_box(job));
        popped += 1;
    }
    (start.elapsed(), popped)
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
    let rounds = if full_run() { 5 } else { 1 };
    let config = config(pools, jobs_n / pools);
    let jobs = jobs(jobs_n, pools);

    let mut core_times = Vec::new();
    let mut queue_times = Vec::new();
    for _ in 0..rounds {
        let (core, lists) = queued(&config, &jobs);
        let (time, launches) = place_all(core, lists);
        assert_eq!(launches, jobs_n, "one launch per job");
        core_times.push(time);

        let queue: VecDeque<Job> = jobs.iter().cloned().collect();
        let (time, popped) = pop_all(queue);
        assert_eq!(popped, jobs_n);
        queue_times.push(time);
    }
    let (core_time, queue_time) = (median(core_times.clone()), median(queue_times.clone()));
    let per = |d: Duration| d.as_secs_f64() * 1e9 / jobs_n as f64;
    let rate = |d: Duration| jobs_n as f64 / d.as_secs_f64();
    let ratio = core_time.as_secs_f64() / queue_time.as_secs_f64();
    println!(
        "core: {jobs_n} jobs over {pools} pools: {:.0} placements/s ({:.1} ns each, median of {rounds}: {core_times:?})",
        rate(core_time),
        per(core_time)
    );
    println!(
        "core: baseline VecDeque pops: {:.0} pops/s ({:.1} ns each, median of {rounds}: {queue_times:?})",
        rate(queue_time),
        per(queue_time)
    );
    if full_run() {
        let verdict = if ratio <= 20.0 { "met" } else { "MISSED" };
        println!("ratio core placement: {ratio:.2}x (goal <= 20x: {verdict})");
    }
}
