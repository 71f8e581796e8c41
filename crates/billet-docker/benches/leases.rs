//! `leases` (D10): the seed's claim, measured. N concurrent leases held on
//! the docker backend and on the simulated backend, side by side in one run:
//! per-lease launch latency (p50, p99), list latency with N held, destroy
//! latency (p50, p99), and memory held per lease, with the ratio of each.
//! With the N held on docker it also times `list` with nothing changed
//! against the bare label-filtered list call it makes (issue 20, goal
//! <= 2x), and a provider's first list, which inspects every container.
//!
//! Memory per lease on docker is what the daemon's side holds for it: the
//! container's cgroup memory (`memory.usage_in_bytes` on cgroup v1,
//! `memory.current` on v2) plus the resident memory of its runtime shim
//! (`containerd-shim-runc-v2 ... -id <container id>`); the growth of `dockerd`
//! and `containerd` themselves is printed beside it. A file it needs and cannot
//! read makes that figure `unknown`, with the file named, never 0. On the
//! simulated backend it is the heap the provider grew by while it held the
//! leases, counted by a counting allocator, with the bench's own vectors
//! allocated before the count starts and only the ids of its answers kept
//! (shared with the provider's records, so they allocate nothing).
//!
//! When podman's service answers too (`$BILLET_PODMAN_HOST`, else
//! `/run/podman/podman.sock`), the same cycle runs on it in the same run and
//! a second table puts podman beside docker (D18); its memory per lease is the
//! container's cgroup memory plus its `conmon` monitor's resident memory, and
//! the `podman` service's growth is printed beside it.
//!
//! ```sh
//! cargo bench -p billet-docker --bench leases                   # N = 100
//! cargo bench -p billet-docker --bench leases -- --leases 300   # more
//! ```
//!
//! `--leases` takes a whole number of at least 1; anything else is refused
//! with one line on stderr and exit code 2. `cargo test --benches` runs it
//! once with N = 4. Without a docker daemon it
//! prints one line and measures the simulated side only (with
//! `BILLET_DOCKER_REQUIRED=1` a missing daemon fails it).

mod host;
#[path = "../tests/support/mod.rs"]
mod support;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use billet_provider::{InstanceId, Provider, Resources, Spec, TrustClass};
use billet_simulated::{SimulatedProvider, run_for};
use host::{
    bytes, cgroup_memory, is_shim_of, leases, ms, processes, quantile, ratio_row, rss, rss_of,
};

/// The system allocator, counting the bytes currently allocated.
#[global_allocator]
static ALLOCATOR: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// What one backend measured.
struct Measured {
    launch: Vec<Duration>,
    list: Vec<Duration>,
    destroy: Vec<Duration>,
    /// Bytes held per lease, or why they are unknown.
    memory: Result<f64, String>,
}

/// Runs the same lease cycle on one provider: N launches one after another
/// (each timed), `lists` lists with N held, `compare` (more measures with the
/// N held), then N destroys (each timed).
///
/// `before` runs once every vector the cycle keeps is allocated and before
/// the first launch; `held` runs with the N leases held, after the lists. In
/// between, the cycle allocates nothing that outlives a call except what the
/// provider gave it: of each launch's answer it keeps only the id.
async fn cycle(
    provider: &dyn Provider,
    n: usize,
    lists: usize,
    spec: impl Fn(usize) -> Spec,
    before: impl FnOnce(),
    compare: impl AsyncFnOnce(),
    held: impl FnOnce(&[InstanceId]),
) -> (Vec<Duration>, Vec<Duration>, Vec<Duration>) {
    let mut launch = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let mut list = Vec::with_capacity(lists);
    let mut destroy = Vec::with_capacity(n);
    before();
    for i in 0..n {
        let spec = spec(i);
        let started = Instant::now();
        let instance = provider.launch(spec).await.expect("launch");
        launch.push(started.elapsed());
        ids.push(instance.id);
    }
    for _ in 0..lists {
        let started = Instant::now();
        let listed = provider.list().await.expect("list");
        list.push(started.elapsed());
        assert_eq!(listed.len(), n, "the inventory answers every lease held");
    }
    compare().await;
    held(&ids);
    for id in &ids {
        let started = Instant::now();
        provider.destroy(id).await.expect("destroy");
        destroy.push(started.elapsed());
    }
    (launch, list, destroy)
}

fn simulated(n: usize, lists: usize) -> Measured {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let provider = SimulatedProvider::new("d10-simulated").expect("an owner");
    let before = Cell::new(0);
    let mut memory = Err("never measured".to_owned());
    let (launch, list, destroy) = runtime.block_on(cycle(
        &provider,
        n,
        lists,
        |i| {
            Spec::new(format!("lease-{i:05}"), run_for(Duration::from_secs(3600)))
                .with_trust(TrustClass::Trusted)
        },
        || before.set(ALLOCATOR.current_usage()),
        async || {},
        |_| {
            // Held by the provider: what the heap grew by while it took the
            // leases. The cycle's vectors were allocated before `before`,
            // and the ids it kept share the provider's own text.
            let (before, after) = (before.get(), ALLOCATOR.current_usage());
            memory = if after >= before {
                Ok((after - before) as f64 / n as f64)
            } else {
                Err(format!(
                    "the heap shrank by {} B while {n} leases were held",
                    before - after
                ))
            };
        },
    ));
    Measured {
        launch,
        list,
        destroy,
        memory,
    }
}

/// One engine speaking the Docker API, measured the same way (D10, D18).
struct Engine {
    /// `docker` or `podman`, as the report names it.
    name: &'static str,
    /// The programs of the engine's own processes (their growth is printed).
    daemons: &'static [&'static str],
}

const DOCKER: Engine = Engine {
    name: "docker",
    daemons: &["dockerd", "containerd"],
};

/// podman's service is one process; each container has a `conmon` monitor
/// where docker has a `containerd-shim`.
const PODMAN: Engine = Engine {
    name: "podman",
    daemons: &["podman"],
};

/// What the daemon's side holds for the docker leases, and how it was read;
/// each figure is unknown (with why) when a file it needs cannot be read.
struct DaemonMemory {
    cgroup: Result<u64, String>,
    shims: Result<u64, String>,
    shims_found: usize,
    daemons_growth: Result<i64, String>,
}

/// `list` at fleet scale (issue 20), with N held and nothing changed, against
/// the bare label-filtered list call it makes, the two alternating.
struct Listing {
    /// `list` by the provider that has listed before: inspects nothing.
    cached: Vec<Duration>,
    /// `list` by a provider that never listed: inspects every container
    /// (what every list cost before issue 20).
    cold: Vec<Duration>,
    /// The daemon's list call alone (bollard, the same label filter).
    bare: Vec<Duration>,
}

/// How many fresh providers list once for [`Listing::cold`].
const COLD_LISTS: usize = 5;

async fn list_against_bare(
    scope: &support::Scope,
    provider: &billet_docker::DockerProvider,
    n: usize,
    lists: usize,
) -> Listing {
    let client = scope.client();
    let filters = HashMap::from([(
        "label".to_owned(),
        vec![format!(
            "{}={}",
            billet_docker::OWNER_LABEL,
            provider.owner()
        )],
    )]);
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    let mut listing = Listing {
        cached: Vec::with_capacity(lists),
        cold: Vec::with_capacity(COLD_LISTS),
        bare: Vec::with_capacity(lists),
    };
    for _ in 0..lists {
        let started = Instant::now();
        let listed = provider.list().await.expect("list");
        listing.cached.push(started.elapsed());
        assert_eq!(listed.len(), n, "the inventory answers every lease held");
        let started = Instant::now();
        let bare = client
            .list_containers(Some(options.clone()))
            .await
            .expect("the bare list call");
        listing.bare.push(started.elapsed());
        assert_eq!(bare.len(), n, "the bare list call answers every lease held");
    }
    for _ in 0..COLD_LISTS {
        let fresh = scope.provider("d10");
        let started = Instant::now();
        let listed = fresh.list().await.expect("list");
        listing.cold.push(started.elapsed());
        assert_eq!(listed.len(), n, "the inventory answers every lease held");
    }
    listing
}

fn engine(
    engine: &Engine,
    scope: &support::Scope,
    n: usize,
    lists: usize,
) -> (Measured, DaemonMemory, Listing) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let provider = scope.provider("d10");
    let mut listing = None;
    let daemons = || -> Result<u64, String> {
        let procs = processes()?;
        engine
            .daemons
            .iter()
            .map(|name| rss_of(name, &procs))
            .sum::<Result<u64, String>>()
    };
    let daemons_before = RefCell::new(Err("never measured".to_owned()));
    let mut daemon_memory = DaemonMemory {
        cgroup: Ok(0),
        shims: Ok(0),
        shims_found: 0,
        daemons_growth: Err("never measured".to_owned()),
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
        || *daemons_before.borrow_mut() = daemons(),
        async || listing = Some(list_against_bare(scope, &provider, n, lists).await),
        |ids| {
            let procs = match processes() {
                Ok(procs) => procs,
                Err(why) => {
                    daemon_memory.shims = Err(why);
                    HashMap::new()
                }
            };
            let add = |total: &mut Result<u64, String>, part: Result<u64, String>| {
                if let Ok(sum) = total {
                    *total = part.map(|part| *sum + part);
                }
            };
            for id in ids {
                let id = id.as_str();
                add(&mut daemon_memory.cgroup, cgroup_memory(id));
                let shim = procs.iter().find(|(_, argv)| is_shim_of(argv, id));
                if let Some((pid, _)) = shim {
                    add(&mut daemon_memory.shims, rss(*pid));
                    daemon_memory.shims_found += 1;
                }
            }
            daemon_memory.daemons_growth = daemons_before
                .borrow()
                .clone()
                .and_then(|before| Ok(daemons()? as i64 - before as i64));
        },
    ));
    let memory = match (&daemon_memory.cgroup, &daemon_memory.shims) {
        (Ok(cgroup), Ok(shims)) => Ok((cgroup + shims) as f64 / n as f64),
        (Err(why), _) | (_, Err(why)) => Err(why.clone()),
    };
    (
        Measured {
            launch,
            list,
            destroy,
            memory,
        },
        daemon_memory,
        listing.expect("the lists were compared"),
    )
}

/// A byte count per lease, or `unknown`.
fn per_lease(memory: &Result<f64, String>) -> String {
    match memory {
        Ok(b) => bytes(*b),
        Err(_) => "unknown".to_owned(),
    }
}

// D10: N concurrent leases on docker and on the simulated backend, side by
// side in one run, with the ratio of each measure.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let n = match leases(&args, if full { 100 } else { 4 }) {
        Ok(n) => n,
        Err(why) => {
            eprintln!("leases: {why}");
            std::process::exit(2);
        }
    };
    let lists = if full { 20 } else { 2 };

    let sim = simulated(n, lists);
    let Some(scope) = support::daemon("d10-leases") else {
        println!(
            "leases: simulated only, N = {n}: launch p50 {}, list {}, destroy p50 {}, {} per lease",
            ms(quantile(&sim.launch, 0.5)),
            ms(quantile(&sim.list, 0.5)),
            ms(quantile(&sim.destroy, 0.5)),
            per_lease(&sim.memory)
        );
        if let Err(why) = &sim.memory {
            println!("simulated memory per lease unknown: {why}");
        }
        return;
    };
    let (dock, daemon_memory, listing) = engine(&DOCKER, &scope, n, lists);
    assert!(
        scope.leftovers().is_empty(),
        "the bench left containers behind"
    );
    drop(scope);
    // D18: the same cycle on podman's service, when one answers.
    let podman = support::podman("d10-leases-podman").map(|scope| {
        let measured = engine(&PODMAN, &scope, n, lists);
        assert!(
            scope.leftovers().is_empty(),
            "the bench left containers behind on podman"
        );
        measured
    });

    println!("leases (D10): N = {n} concurrent leases, docker vs simulated, one run");
    println!("| measure | docker | simulated | docker / simulated |");
    println!("| --- | --- | --- | --- |");
    compare_rows(&dock, &sim, n, lists);
    if let Some((pod, _, _)) = &podman {
        println!();
        println!("leases (D10, D18): N = {n} concurrent leases, podman vs docker, same run");
        println!("| measure | podman | docker | podman / docker |");
        println!("| --- | --- | --- | --- |");
        compare_rows(pod, &dock, n, lists);
    } else {
        println!(
            "no podman service at {}: docker only",
            support::podman_socket().display()
        );
    }
    print_memory(&DOCKER, &daemon_memory, n);
    if let Some((_, memory, _)) = &podman {
        print_memory(&PODMAN, memory, n);
    }
    if let Err(why) = &sim.memory {
        println!("simulated memory per lease unknown: {why}");
    }
    print_listing(&DOCKER, &listing, n, lists);
    if let Some((_, _, listing)) = &podman {
        print_listing(&PODMAN, listing, n, lists);
    }
}

/// The rows of one side-by-side table: `a`'s figures, `b`'s, and `a / b`.
fn compare_rows(a: &Measured, b: &Measured, n: usize, lists: usize) {
    let row = |what: &str, x: Duration, y: Duration| {
        ratio_row(what, x, y);
    };
    row(
        "launch p50",
        quantile(&a.launch, 0.5),
        quantile(&b.launch, 0.5),
    );
    row(
        "launch p99",
        quantile(&a.launch, 0.99),
        quantile(&b.launch, 0.99),
    );
    row(
        &format!("list, {n} held (median of {lists})"),
        quantile(&a.list, 0.5),
        quantile(&b.list, 0.5),
    );
    row(
        "destroy p50",
        quantile(&a.destroy, 0.5),
        quantile(&b.destroy, 0.5),
    );
    row(
        "destroy p99",
        quantile(&a.destroy, 0.99),
        quantile(&b.destroy, 0.99),
    );
    let ratio = match (&a.memory, &b.memory) {
        (Ok(x), Ok(y)) if x / y.max(1.0) >= 10.0 => format!("{:.0}x", x / y.max(1.0)),
        (Ok(x), Ok(y)) => format!("{:.2}x", x / y.max(1.0)),
        _ => "unknown".to_owned(),
    };
    println!(
        "| memory per lease | {} | {} | {ratio} |",
        per_lease(&a.memory),
        per_lease(&b.memory),
    );
}

/// What the engine's side holds per lease, and how it was read.
fn print_memory(engine: &Engine, daemon_memory: &DaemonMemory, n: usize) {
    let known = |figure: &Result<String, String>| match figure {
        Ok(text) => text.clone(),
        Err(why) => format!("unknown ({why})"),
    };
    let cgroup = daemon_memory
        .cgroup
        .as_ref()
        .map(|c| bytes(*c as f64 / n as f64))
        .map_err(Clone::clone);
    let shims = daemon_memory
        .shims
        .as_ref()
        .map(|s| bytes(*s as f64 / daemon_memory.shims_found.max(1) as f64))
        .map_err(Clone::clone);
    let growth = daemon_memory
        .daemons_growth
        .as_ref()
        .map(|g| {
            format!(
                "{} in all ({} per lease)",
                bytes(*g as f64),
                bytes(*g as f64 / n as f64)
            )
        })
        .map_err(Clone::clone);
    println!(
        "{} memory per lease: cgroup {} + shim RSS {} ({} of {n} shims found); {} grew {}",
        engine.name,
        known(&cgroup),
        known(&shims),
        daemon_memory.shims_found,
        engine.daemons.join(" + "),
        known(&growth),
    );
}

/// Issue 20: `list` with N held and nothing changed, against the bare list
/// call it makes (goal <= 2x); and a first list, which inspects all.
fn print_listing(engine: &Engine, listing: &Listing, n: usize, lists: usize) {
    let bare = quantile(&listing.bare, 0.5);
    println!();
    println!(
        "list at fleet scale on {}: N = {n} held, nothing changed, against the bare list call",
        engine.name
    );
    println!("| measure | median | bare list call (median of {lists}) | ratio |");
    println!("| --- | --- | --- | --- |");
    let cached = quantile(&listing.cached, 0.5);
    let ratio = cached.as_secs_f64() / bare.as_secs_f64().max(1e-12);
    println!(
        "| list, listed before (median of {lists}) | {} | {} | {ratio:.2}x (goal <= 2x: {}) |",
        ms(cached),
        ms(bare),
        if ratio <= 2.0 { "met" } else { "MISSED" }
    );
    let cold = quantile(&listing.cold, 0.5);
    println!(
        "| list, first of its provider: inspects all {n} (median of {COLD_LISTS}) | {} | {} | {:.2}x |",
        ms(cold),
        ms(bare),
        cold.as_secs_f64() / bare.as_secs_f64().max(1e-12)
    );
}
