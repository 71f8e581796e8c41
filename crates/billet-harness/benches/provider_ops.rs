//! `provider_ops`: launch, find and destroy through `dyn Provider` on hosts
//! holding 1,000 and 100,000 instances, against a bare
//! `parking_lot::Mutex<HashMap<String, Instance>>` doing the same inserts,
//! lookups and removes with the same keys. Goal: at most 2x.
//!
//! The baseline stores the same `Instance` values a provider answers, and
//! hands back a copy on insert and lookup, as an inventory must: the ratio
//! is the cost of the contract (trust check, command parsing, ids, two
//! deployments' isolation) over the bare map.

mod support;

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use billet_clock::ManualClock;
use billet_provider::{Instance, InstanceId, Provider, ProviderKind, Spec, State, TrustClass};
use billet_simulated::{Host, SimulatedProvider, run_for};
use criterion::{BenchmarkId, Criterion};
use parking_lot::Mutex;
use support::{print_ratio, ready, size};

type Bare = Mutex<HashMap<String, Instance>>;

fn instance(name: &str, n: u64) -> Instance {
    Instance {
        id: InstanceId::from(format!("sim-{n:x}")),
        name: name.into(),
        owner: "blue".into(),
        kind: ProviderKind::Simulated,
        state: State::Running,
        started_at: SystemTime::UNIX_EPOCH,
    }
}

fn spec(name: String) -> Spec {
    Spec::new(name, run_for(Duration::from_secs(3600))).with_trust(TrustClass::Trusted)
}

/// A provider over a host already holding `n` instances of its deployment,
/// and a bare map holding the same keys.
fn filled(n: usize) -> (Arc<dyn Provider>, Bare, Vec<String>) {
    let provider: Arc<dyn Provider> = Arc::new(
        SimulatedProvider::builder("blue")
            .host(Host::new())
            .clock(Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH)))
            .build()
            .expect("a valid owner"),
    );
    let bare = Mutex::new(HashMap::new());
    let names: Vec<String> = (0..n).map(|i| format!("held-{i:07}")).collect();
    for (i, name) in names.iter().enumerate() {
        ready(provider.launch(spec(name.clone()))).expect("launch");
        bare.lock().insert(name.clone(), instance(name, i as u64));
    }
    (provider, bare, names)
}

fn bench(c: &mut Criterion) {
    let sizes = [size(1_000, 100), size(100_000, 1_000)];
    let mut group = c.benchmark_group("provider_ops");
    for &n in &sizes {
        let (provider, bare, names) = filled(n);
        let mut round = 0u64;

        group.bench_function(BenchmarkId::new("launch", n), |b| {
            b.iter_custom(|iters| {
                round += 1;
                let specs: Vec<Spec> = (0..iters)
                    .map(|i| spec(format!("op-{round}-{i}")))
                    .collect();
                let start = Instant::now();
                let launched: Vec<Instance> = specs
                    .into_iter()
                    .map(|s| ready(provider.launch(s)).expect("launch"))
                    .collect();
                let elapsed = start.elapsed();
                for i in launched {
                    ready(provider.destroy(&i.id)).expect("destroy");
                }
                elapsed
            });
        });
        group.bench_function(BenchmarkId::new("bare_insert", n), |b| {
            b.iter_custom(|iters| {
                round += 1;
                let entries: Vec<(String, Instance)> = (0..iters)
                    .map(|i| {
                        let name = format!("op-{round}-{i}");
                        let inst = instance(&name, i);
                        (name, inst)
                    })
                    .collect();
                let start = Instant::now();
                let answered: Vec<Instance> = entries
                    .into_iter()
                    .map(|(name, inst)| {
                        bare.lock().insert(name, inst.clone());
                        inst
                    })
                    .collect();
                let elapsed = start.elapsed();
                for i in answered {
                    bare.lock().remove(&*i.name);
                }
                elapsed
            });
        });

        group.bench_function(BenchmarkId::new("find", n), |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 7919) % names.len();
                black_box(ready(provider.find(&names[k])).expect("find"))
            });
        });
        group.bench_function(BenchmarkId::new("bare_get", n), |b| {
            let mut k = 0;
            b.iter(|| {
                k = (k + 7919) % names.len();
                black_box(bare.lock().get(&names[k]).cloned())
            });
        });

        group.bench_function(BenchmarkId::new("destroy", n), |b| {
            b.iter_custom(|iters| {
                round += 1;
                let ids: Vec<InstanceId> = (0..iters)
                    .map(|i| {
                        ready(provider.launch(spec(format!("op-{round}-{i}"))))
                            .expect("launch")
                            .id
                    })
                    .collect();
                let start = Instant::now();
                for id in &ids {
                    black_box(ready(provider.destroy(id)).expect("destroy"));
                }
                start.elapsed()
            });
        });
        group.bench_function(BenchmarkId::new("bare_remove", n), |b| {
            b.iter_custom(|iters| {
                round += 1;
                let keys: Vec<String> = (0..iters)
                    .map(|i| {
                        let name = format!("op-{round}-{i}");
                        bare.lock().insert(name.clone(), instance(&name, i));
                        name
                    })
                    .collect();
                let start = Instant::now();
                for key in &keys {
                    black_box(bare.lock().remove(key));
                }
                start.elapsed()
            });
        });
    }
    group.finish();
    for &n in &sizes {
        for (op, base) in [
            ("launch", "bare_insert"),
            ("find", "bare_get"),
            ("destroy", "bare_remove"),
        ] {
            print_ratio(
                &format!("provider_ops {op} at {n}"),
                &format!("provider_ops/{op}/{n}"),
                &format!("provider_ops/{base}/{n}"),
                2.0,
            );
        }
    }
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    bench(&mut c);
    c.final_summary();
}
