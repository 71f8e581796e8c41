//! H12 benchmark (issue 21): what the concurrent mode's linearizability check
//! costs, for histories of 2, 3 and 4 tasks x 10, 20 and 40 calls each over
//! two names, checked per second. The histories are linearizable (made by a
//! correct sequential store, each call taking effect inside its interval,
//! intervals overlapping across tasks), the case the checker must search in
//! full. Run with `cargo bench -p billet-conformance --bench concurrent_checker`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use billet_conformance::concurrent_synthetic::{check, history};

/// How long each size is measured for.
const BUDGET: Duration = Duration::from_secs(2);

fn main() {
    // `cargo test --benches` passes `--bench`-less flags: run one quick pass.
    let quick = !std::env::args().any(|a| a == "--bench");
    println!("| tasks | calls/task | calls | histories checked | per second | per history |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for tasks in [2, 3, 4] {
        for calls in [10, 20, 40] {
            let histories: Vec<_> = (0..64).map(|seed| history(tasks, calls, 2, seed)).collect();
            let started = Instant::now();
            let mut checked = 0u64;
            while checked == 0 || (!quick && started.elapsed() < BUDGET) {
                for h in &histories {
                    assert!(
                        check(black_box(h)),
                        "a linearizable history failed the check"
                    );
                    checked += 1;
                }
            }
            let elapsed = started.elapsed();
            let per_second = checked as f64 / elapsed.as_secs_f64();
            println!(
                "| {tasks} | {calls} | {} | {checked} | {per_second:.0} | {:.1} µs |",
                tasks * calls,
                1e6 / per_second
            );
        }
    }
}
