//! `hints_scenario` (B12): the fleet example's default scenario (50,000 jobs
//! onto 1,000 leases, three routed pools per deployment, outages, a restart,
//! two strays) through the production scheduler with hints (`--hints on`,
//! the default) and without (`--hints off`), in one run: the queue waits,
//! how soon ends were seen (modelled time from an instance's stop to its
//! lease's release) and the lease-hours idle after jobs ended, each side by
//! side, with the wall time of each run and their ratio.
//!
//! Then the two wall-time ratios issue 49 judges, from rounds of three runs
//! back to back (hints on, hints off, the reference scheduler on its own
//! fleet): hints on against off (goal <= 1.15x) and production with hints
//! against the reference (goal <= 2.5x), each the median of the rounds'
//! ratios, the fastest of each kind printed beside.
//!
//! Under `cargo test --benches` it runs 2,000 jobs onto 100 leases, one round.
//! Like the fleet example, this binary uses mimalloc.

mod support;

use billet_harness::production::ProductionScheduler;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::report::Report;
use billet_harness::scenario::{Fleet, Scenario};
use support::size;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn run(hints: bool) -> Report {
    Scenario::fleet(Fleet {
        jobs: size(50_000, 2_000) as u64,
        concurrency: size(1_000, 100),
        hints,
        ..Fleet::production()
    })
    .run(ProductionScheduler::new)
    .unwrap_or_else(|f| panic!("{f}"))
}

/// The reference scheduler on its own fleet, the same size.
fn reference() -> Report {
    Scenario::fleet(Fleet {
        jobs: size(50_000, 2_000) as u64,
        concurrency: size(1_000, 100),
        ..Fleet::default()
    })
    .run(ReferenceScheduler::new)
    .unwrap_or_else(|f| panic!("{f}"))
}

/// The median of `values` (not empty).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Prints the ratio `label`, judged by the median of the rounds' ratios.
fn judge(label: &str, subject: &[f64], baseline: &[f64], goal: f64) {
    let ratios = subject.iter().zip(baseline).map(|(s, b)| s / b).collect();
    let ratio = median(ratios);
    let fastest = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "ratio {label}: median of {} rounds {ratio:.2}x (fastest {:.3}s / {:.3}s = {:.2}x) (goal <= {goal}x: {})",
        subject.len(),
        fastest(subject),
        fastest(baseline),
        fastest(subject) / fastest(baseline),
        if ratio <= goal { "met" } else { "MISSED" }
    );
}

fn main() {
    let (on, off) = (run(true), run(false));
    assert_eq!(on.outcomes, off.outcomes, "hints change no outcome");
    for (name, r) in [("hints on ", &on), ("hints off", &off)] {
        let (w, e) = (&r.queue_wait, &r.end_seen);
        println!(
            "{name}: queue wait p50 {:?}, p90 {:?}, p99 {:?}, max {:?}; ends seen p50 {:?}, p99 {:?}, max {:?}; {:.1} lease-hours idle after jobs ended; wall {:.3}s ({} steps)",
            w.p50,
            w.p90,
            w.p99,
            w.max,
            e.p50,
            e.p99,
            e.max,
            r.idle_after_end.as_secs_f64() / 3600.0,
            r.wall.as_secs_f64(),
            r.steps
        );
    }
    println!(
        "idle lease-hours with hints / without: {:.3}; wall with hints / without: {:.2}x",
        on.idle_after_end.as_secs_f64() / off.idle_after_end.as_secs_f64().max(f64::MIN_POSITIVE),
        on.wall.as_secs_f64() / off.wall.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    let rounds = size(7, 1);
    let (mut with, mut without, mut by_reference) = (Vec::new(), Vec::new(), Vec::new());
    let digests = [on.digest, off.digest];
    for _ in 0..rounds {
        let (on, off, reference) = (run(true), run(false), reference());
        assert_eq!(
            [on.digest, off.digest],
            digests,
            "the same seed, the same runs"
        );
        with.push(on.wall.as_secs_f64());
        without.push(off.wall.as_secs_f64());
        by_reference.push(reference.wall.as_secs_f64());
    }
    judge("hints on / off, wall", &with, &without, 1.15);
    judge(
        "production (hints on) / reference, wall",
        &with,
        &by_reference,
        2.5,
    );
}
