//! `leases` (SPEC D10): the seed's claim, measured. N concurrent leases held on
//! the docker backend and on the simulated backend, side by side in one run:
//! per-lease launch latency (p50, p99), list latency with N held, destroy
//! latency (p50, p99), and memory held per lease, with the ratio of each.
//!
//! Memory per lease on docker is what the daemon's side holds for it: the
//! container's cgroup memory (`memory.usage_in_bytes` on cgroup v1,
//! `memory.current` on v2) plus the resident memory of its runtime shim
//! (`containerd-shim-runc-v2 ... -id <container id>`); the growth of `dockerd`
//! and `containerd` themselves is printed beside it. On the simulated backend
//! it is the heap bytes held per instance, counted by a counting allocator.
//!
//! ```sh
//! cargo bench -p billet-docker --bench leases                   # N = 100
//! cargo bench -p billet-docker --bench leases -- --leases 300   # more
//! ```
//!
//! `cargo test --benches` runs it once with N = 4. Without a docker daemon it
//! prints one line and measures the simulated side only (with
//! `BILLET_DOCKER_REQUIRED=1` a missing daemon fails it).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use billet_provider::{Instance, Provider, Resources, Spec, TrustClass};
use billet_simulated::{SimulatedProvider, run_for};

/// The system allocator, counting the bytes currently allocated.
#[global_allocator]
static ALLOCATOR: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// What one backend measured.
struct Measured {
    launch: Vec<Duration>,
    list: Vec<Duration>,
    destroy: Vec<Duration>,
    /// Bytes held per lease.
    memory: f64,
}

/// The `q`-quantile (0..=1) of `samples`, nearest rank.
fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs the same lease cycle on one provider: N launches one after another
/// (each timed), `lists` lists with N held, then N destroys (each timed).
async fn cycle(
    provider: &dyn Provider,
    n: usize,
    lists: usize,
    spec: impl Fn(usize) -> Spec,
    mut held: impl FnMut(&[Instance]),
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut launch = Vec::with_capacity(n);
    let mut instances = Vec::with_capacity(n);
    for i in 0..n {
        let spec = spec(i);
        let started = Instant::now();
        let instance = provider.launch(spec).await.expect("launch");
        launch.push(started.elapsed());
        instances.push(instance);
    }
    let mut list = Vec::with_capacity(lists);
    for _ in 0..lists {
        let started = Instant::now();
        let listed = provider.list().await.expect("list");
        list.push(started.elapsed());
        assert_eq!(listed.len(), n, "the inventory answers every lease held");
    }
    held(&instances);
    let mut destroy = Vec::with_capacity(n);
    for instance in &instances {
        let started = Instant::now();
        provider.destroy(&instance.id).await.expect("destroy");
        destroy.push(started.elapsed());
    }
    (launch, list, destroy)
}

fn simulated(n: usize, lists: usize) -> Measured {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let before = ALLOCATOR.current_usage();
    let provider = SimulatedProvider::new("d10-simulated").expect("an owner");
    let mut memory = 0.0;
    let (launch, list, destroy) = runtime.block_on(cycle(
        &provider,
        n,
        lists,
        |i| {
            Spec::new(format!("lease-{i:05}"), run_for(Duration::from_secs(3600)))
                .with_trust(TrustClass::Trusted)
        },
        |instances| {
            // Held by the provider: everything allocated since it was made,
            // less the answers this bench keeps.
            let answers: usize = instances
                .iter()
                .map(|i| {
                    std::mem::size_of::<Instance>()
                        + i.name.len()
                        + i.owner.len()
                        + i.id.as_str().len()
                })
                .sum();
            let held = ALLOCATOR.current_usage().saturating_sub(before + answers);
            memory = held as f64 / n as f64;
        },
    ));
    Measured {
        launch,
        list,
        destroy,
        memory,
    }
}

/// The resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Every process's argv, by pid.
fn processes() -> HashMap<u32, Vec<String>> {
    let mut out = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            let argv = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            out.insert(pid, argv);
        }
    }
    out
}

/// The resident memory of every process whose program is named `name`.
fn rss_of(name: &str, procs: &HashMap<u32, Vec<String>>) -> u64 {
    procs
        .iter()
        .filter(|(_, argv)| {
            argv.first()
                .is_some_and(|p| p.rsplit('/').next() == Some(name))
        })
        .filter_map(|(pid, _)| rss(*pid))
        .sum()
}

/// A container's cgroup memory, cgroup v1 (cgroupfs or systemd driver) or v2.
fn cgroup_memory(id: &str) -> Option<u64> {
    [
        format!("/sys/fs/cgroup/memory/docker/{id}/memory.usage_in_bytes"),
        format!("/sys/fs/cgroup/memory/system.slice/docker-{id}.scope/memory.usage_in_bytes"),
        format!("/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.current"),
        format!("/sys/fs/cgroup/docker/{id}/memory.current"),
    ]
    .iter()
    .find_map(|path| std::fs::read_to_string(path).ok()?.trim().parse().ok())
}

/// What the daemon's side holds for the docker leases, and how it was read.
struct DaemonMemory {
    cgroup: u64,
    shims: u64,
    shims_found: usize,
    daemons_growth: i64,
}

fn docker(scope: &support::Scope, n: usize, lists: usize) -> (Measured, DaemonMemory) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let provider = scope.provider("d10");
    let daemons =
        |procs: &HashMap<u32, Vec<String>>| rss_of("dockerd", procs) + rss_of("containerd", procs);
    let daemons_before = daemons(&processes());
    let mut daemon_memory = DaemonMemory {
        cgroup: 0,
        shims: 0,
        shims_found: 0,
        daemons_growth: 0,
    };
    let (launch, list, destroy) = runtime.block_on(cycle(
        &provider,
        n,
        lists,
        |i| {
            Spec::new(format!("lease-{i:05}"), ["sleep", "3600"])
                .with_image(support::TEST_IMAGE)
                .with_trust(TrustClass::Trusted)
                .with_resources(Resources {
                    cpus: 1,
                    memory_mib: 64,
                })
        },
        |instances| {
            let procs = processes();
            for instance in instances {
                let id = instance.id.as_str();
                daemon_memory.cgroup += cgroup_memory(id).unwrap_or(0);
                let shim = procs.iter().find(|(_, argv)| {
                    argv.first().is_some_and(|p| p.contains("containerd-shim"))
                        && argv.windows(2).any(|w| w[0] == "-id" && w[1] == id)
                });
                if let Some(rss) = shim.and_then(|(pid, _)| rss(*pid)) {
                    daemon_memory.shims += rss;
                    daemon_memory.shims_found += 1;
                }
            }
            daemon_memory.daemons_growth = daemons(&procs) as i64 - daemons_before as i64;
        },
    ));
    let memory = (daemon_memory.cgroup + daemon_memory.shims) as f64 / n as f64;
    (
        Measured {
            launch,
            list,
            destroy,
            memory,
        },
        daemon_memory,
    )
}

fn ms(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} µs", d.as_secs_f64() * 1e6)
    }
}

fn bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

// D10: N concurrent leases on docker and on the simulated backend, side by
// side in one run, with the ratio of each measure.
fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .iter()
        .position(|a| a == "--leases")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse::<usize>().expect("--leases takes a number"))
        .unwrap_or(if full { 100 } else { 4 });
    let lists = if full { 20 } else { 2 };

    let sim = simulated(n, lists);
    let Some(scope) = support::daemon("d10-leases") else {
        println!(
            "leases: simulated only, N = {n}: launch p50 {}, list {}, destroy p50 {}, {} per lease",
            ms(quantile(&sim.launch, 0.5)),
            ms(quantile(&sim.list, 0.5)),
            ms(quantile(&sim.destroy, 0.5)),
            bytes(sim.memory)
        );
        return;
    };
    let (dock, daemon_memory) = docker(&scope, n, lists);
    assert!(
        scope.leftovers().is_empty(),
        "the bench left containers behind"
    );

    println!("leases (D10): N = {n} concurrent leases, docker vs simulated, one run");
    println!("| measure | docker | simulated | docker / simulated |");
    println!("| --- | --- | --- | --- |");
    let row = |what: &str, d: Duration, s: Duration| {
        println!(
            "| {what} | {} | {} | {:.0}x |",
            ms(d),
            ms(s),
            d.as_secs_f64() / s.as_secs_f64().max(1e-12)
        );
    };
    row(
        "launch p50",
        quantile(&dock.launch, 0.5),
        quantile(&sim.launch, 0.5),
    );
    row(
        "launch p99",
        quantile(&dock.launch, 0.99),
        quantile(&sim.launch, 0.99),
    );
    row(
        &format!("list, {n} held (median of {lists})"),
        quantile(&dock.list, 0.5),
        quantile(&sim.list, 0.5),
    );
    row(
        "destroy p50",
        quantile(&dock.destroy, 0.5),
        quantile(&sim.destroy, 0.5),
    );
    row(
        "destroy p99",
        quantile(&dock.destroy, 0.99),
        quantile(&sim.destroy, 0.99),
    );
    println!(
        "| memory per lease | {} | {} | {:.0}x |",
        bytes(dock.memory),
        bytes(sim.memory),
        dock.memory / sim.memory.max(1.0)
    );
    println!(
        "docker memory per lease: cgroup {} + shim RSS {} ({} of {n} shims found); dockerd + containerd grew {} in all ({} per lease)",
        bytes(daemon_memory.cgroup as f64 / n as f64),
        bytes(daemon_memory.shims as f64 / daemon_memory.shims_found.max(1) as f64),
        daemon_memory.shims_found,
        bytes(daemon_memory.daemons_growth as f64),
        bytes(daemon_memory.daemons_growth as f64 / n as f64),
    );
}
