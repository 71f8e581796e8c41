//! `list_isolation`: listing 100 own instances on a host that also holds
//! 1,000,000 instances of another deployment, against the same list on an
//! otherwise empty host. Goal: at most 1.2x.

mod support;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_provider::{Provider, Spec, TrustClass};
use billet_simulated::{Host, SimulatedProvider, run_for};
use criterion::Criterion;
use support::{print_ratio, ready, size};

fn provider(owner: &str, host: &Host, clock: &Arc<dyn Clock>) -> SimulatedProvider {
    SimulatedProvider::builder(owner)
        .host(host.clone())
        .clock(Arc::clone(clock))
        .build()
        .expect("a valid owner")
}

fn fill(provider: &SimulatedProvider, prefix: &str, n: usize) {
    let command = run_for(Duration::from_secs(3600));
    for i in 0..n {
        let spec =
            Spec::new(format!("{prefix}-{i:07}"), command.clone()).with_trust(TrustClass::Trusted);
        ready(provider.launch(spec)).expect("launch");
    }
}

fn main() {
    let others = size(1_000_000, 10_000);
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));

    let crowded_host = Host::new();
    let crowded = provider("blue", &crowded_host, &clock);
    fill(&provider("green", &crowded_host, &clock), "other", others);
    fill(&crowded, "own", 100);

    let alone = provider("blue", &Host::new(), &clock);
    fill(&alone, "own", 100);

    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let mut group = c.benchmark_group("list_isolation");
    group.bench_function("crowded_host", |b| {
        b.iter(|| black_box(ready(crowded.list()).expect("list")));
    });
    group.bench_function("empty_host", |b| {
        b.iter(|| black_box(ready(alone.list()).expect("list")));
    });
    group.finish();
    assert_eq!(ready(crowded.list()).expect("list").len(), 100);
    assert_eq!(crowded_host.len(), others + 100);
    print_ratio(
        &format!("list_isolation 100 own among {others} others"),
        "list_isolation/crowded_host",
        "list_isolation/empty_host",
        1.2,
    );
    c.final_summary();
}
