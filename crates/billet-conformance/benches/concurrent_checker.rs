//! H12 benchmark (issue 21): what the concurrent mode's linearizability check
//! costs, for histories of 2, 3 and 4 tasks x 10, 20 and 40 calls each over
//! two names, checked per second. The histories are linearizable (made by a
//! correct sequential store, each call taking effect inside its interval,
//! intervals overlapping across tasks), the case the checker must search in
//! full. Each size is measured without faults (the baseline) and with a
//! fifth of its launches and destroys cut short by a fault (H11: the
//! specification then holds several worlds), alternating, median of three,
//! and the ratio of the two is printed. Run with `cargo bench -p billet-conformance --bench concurrent_checker`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use billet_conformance::concurrent_synthetic::{SyntheticHistory, check, faulted_history};

/// How long each size is measured for.
const BUDGET: Duration = Duration::from_secs(1);

/// Histories checked per second over `histories`, for `BUDGET` (one pass
/// when `quick`).
fn rate(histories: &[SyntheticHistory], quick: bool) -> f64 {
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
        "| tasks | calls/task | calls | no faults: per second | per history | 20% cut short: per second | per history | ratio |"
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
            let mut plain_rates = Vec::new();
            let mut faulted_rates = Vec::new();
            for _ in 0..if quick { 1 } else { 3 } {
                plain_rates.push(rate(&plain, quick));
                faulted_rates.push(rate(&faulted, quick));
            }
            let median = |rates: &mut Vec<f64>| {
                rates.sort_by(f64::total_cmp);
                rates[rates.len() / 2]
            };
            let (p, f) = (median(&mut plain_rates), median(&mut faulted_rates));
            println!(
                "| {tasks} | {calls} | {} | {p:.0} | {:.1} µs | {f:.0} | {:.1} µs | {:.2}x |",
                tasks * calls,
                1e6 / p,
                1e6 / f,
                p / f
            );
        }
    }
}
