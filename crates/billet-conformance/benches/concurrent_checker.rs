//! H12 benchmark (issue 21): what the concurrent mode's linearizability check
//! costs, for histories of 2, 3 and 4 tasks x 10, 20 and 40 calls each over
//! two names, checked per second. The histories are linearizable (made by a
//! correct sequential store, each call taking effect inside its interval,
//! intervals overlapping across tasks), the case the checker must search in
//! full. Each size is measured three ways, alternating, median of three: each
//! name's history on its own (the first part of the check, the baseline), the
//! whole check (each name, then the deployment taken whole), and the whole
//! check of histories with a fifth of their launches and destroys cut short
//! by a fault (H11: the specification then holds several worlds); the ratios
//! to the baselines are printed (per history, in time). Run with `cargo bench -p billet-conformance --bench concurrent_checker`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use billet_conformance::concurrent_synthetic::{
    SyntheticHistory, check, check_names, faulted_history,
};

/// How long each size is measured for.
const BUDGET: Duration = Duration::from_secs(1);

/// Histories checked per second over `histories`, for `BUDGET` (one pass
/// when `quick`).
fn rate(histories: &[SyntheticHistory], quick: bool, check: fn(&SyntheticHistory) -> bool) -> f64 {
    let started = Instant::now();
    let mut checked = 0u64;
    while checked == 0 || (!quick && started.elapsed() < BUDGET) {
        for h in histories {
            assert!(
                check(black_box(h)),
                "a linearizable history failed the check"
            );
            checked += 1;
        }
    }
    checked as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    // `cargo test --benches` passes `--bench`-less flags: run one quick pass.
    let quick = !std::env::args().any(|a| a == "--bench");
    println!(
        "| tasks | calls/task | calls | names only | whole check | ratio | whole, 20% cut short | ratio to no faults |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for tasks in [2, 3, 4] {
        for calls in [10, 20, 40] {
            let make = |cut| -> Vec<SyntheticHistory> {
                (0..64)
                    .map(|seed| faulted_history(tasks, calls, 2, seed, cut))
                    .collect()
            };
            let (plain, faulted) = (make(0.0), make(0.2));
            // Alternate the two, so that a load that comes and goes on a
            // shared machine falls on both.
            let mut names_rates = Vec::new();
            let mut plain_rates = Vec::new();
            let mut faulted_rates = Vec::new();
            for _ in 0..if quick { 1 } else { 3 } {
                names_rates.push(rate(&plain, quick, check_names));
                plain_rates.push(rate(&plain, quick, check));
                faulted_rates.push(rate(&faulted, quick, check));
            }
            let median = |rates: &mut Vec<f64>| {
                rates.sort_by(f64::total_cmp);
                rates[rates.len() / 2]
            };
            let (n, p, f) = (
                median(&mut names_rates),
                median(&mut plain_rates),
                median(&mut faulted_rates),
            );
            println!(
                "| {tasks} | {calls} | {} | {:.1} µs | {:.1} µs | {:.2}x | {:.1} µs | {:.2}x |",
                tasks * calls,
                1e6 / n,
                1e6 / p,
                n / p,
                1e6 / f,
                p / f
            );
        }
    }
}
