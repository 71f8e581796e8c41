//! `hints_scenario` (B12): the fleet example's default scenario (50,000 jobs
//! onto 1,000 leases, three routed pools per deployment, outages, a restart,
//! two strays) through the production scheduler with hints (`--hints on`,
//! the default) and without (`--hints off`), in one run: the queue waits,
//! how soon ends were seen (modelled time from an instance's stop to its
//! lease's release) and the lease-hours idle after jobs ended, each side by
//! side, with the wall time of each run and their ratio.
//!
//! Under `cargo test --benches` it runs 2,000 jobs onto 100 leases.
//! Like the fleet example, this binary uses mimalloc.

mod support;

use billet_harness::production::ProductionScheduler;
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
}
