//! `gvisor` (D19): what the boundary costs. N leases (50 by default) are
//! launched (create and start, each timed) and held, then destroyed (each
//! timed), through `DockerProvider`, on a pool on gVisor's `runsc` and on a
//! pool on the engine's default runtime (runc), on the same engine in the
//! same run, runc first; then the ratio of each figure, runsc over runc.
//!
//! Memory per running lease is what the engine's side holds for it, read as
//! the `leases` bench (D10) reads it: the container's cgroup memory plus the
//! resident memory of the engine's process beside it (docker's
//! `containerd-shim`, podman's `conmon`). gVisor's own processes
//! (`runsc-sandbox`, the Sentry, and `runsc-gofer`) live inside the
//! container's cgroup, so the cgroup figure holds them; their resident memory
//! is printed beside it (an upper bound: it counts the pages of the `runsc`
//! binary they share once per process).
//!
//! On docker the two pools are one daemon; on podman, whose
//! Docker-compatible API runs every container on its service's default
//! runtime, the runc pool is podman's service and the runsc pool its
//! service whose default is runsc (`.ci/run` starts both), when they answer.
//!
//! ```sh
//! cargo bench -p billet-docker --bench gvisor                    # N = 50
//! cargo bench -p billet-docker --bench gvisor -- --leases 100    # more
//! ```
//!
//! `cargo test --benches` runs it once with N = 4. Without a daemon that
//! lists `runsc` it prints one line and measures nothing (with
//! `BILLET_RUNSC_REQUIRED=1`, set by `.ci/run`, that is a failure).

mod host;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use billet_docker::DockerProvider;
use billet_provider::{InstanceId, Isolation, Provider, Resources, Spec, TrustClass};
use host::{bytes, cgroup_memory, is_shim_of, leases, processes, quantile, ratio_row, rss};
use support::{RUNSC, Scope};

/// What one pool's cycle measured.
struct Cycle {
    launch: Vec<Duration>,
    destroy: Vec<Duration>,
    /// The N containers' cgroup memory, summed, or why it is unknown.
    cgroup: Result<u64, String>,
    /// The engine's per-container processes' resident memory, summed.
    shims: Result<u64, String>,
    /// The resident memory of the runtime's own processes beside the
    /// containers (`runsc-*`), summed; 0 where there are none (runc).
    runtime: Result<u64, String>,
}

impl Cycle {
    /// Bytes held per lease: cgroup and shim, or why unknown.
    fn per_lease(&self, n: usize) -> Result<f64, String> {
        match (&self.cgroup, &self.shims) {
            (Ok(cgroup), Ok(shims)) => Ok((cgroup + shims) as f64 / n as f64),
            (Err(why), _) | (_, Err(why)) => Err(why.clone()),
        }
    }
}

/// Adds `part` to `total`, the first unknown part making the total unknown.
fn add(total: &mut Result<u64, String>, part: Result<u64, String>) {
    if let Ok(sum) = total {
        *total = part.map(|part| *sum + part);
    }
}

/// Whether `argv` is one of gVisor's processes for container `id`.
fn is_runtime_of(argv: &[String], id: &str) -> bool {
    argv.first()
        .is_some_and(|program| program.starts_with("runsc"))
        && argv.iter().any(|arg| arg.contains(id))
}

/// Launches N leases on `provider` one after another (each timed), reads
/// the memory they hold, then destroys them one after another (each timed).
async fn cycle(provider: &DockerProvider, n: usize) -> Cycle {
    let mut launch = Vec::with_capacity(n);
    let mut ids: Vec<InstanceId> = Vec::with_capacity(n);
    for i in 0..n {
        let spec = Spec::new(format!("lease-{i:05}"), ["sleep", "3600"])
            .with_image(support::TEST_IMAGE)
            .with_trust(TrustClass::Trusted)
            .with_resources(Resources {
                cpus: 1,
                memory_mib: 64,
            });
        let started = Instant::now();
        let instance = provider.launch(spec).await.expect("launch");
        launch.push(started.elapsed());
        ids.push(instance.id);
    }
    let mut held = Cycle {
        launch,
        destroy: Vec::with_capacity(n),
        cgroup: Ok(0),
        shims: Ok(0),
        runtime: Ok(0),
    };
    match processes() {
        Ok(procs) => {
            for id in &ids {
                let id = id.as_str();
                add(&mut held.cgroup, cgroup_memory(id));
                match procs.iter().find(|(_, argv)| is_shim_of(argv, id)) {
                    Some((pid, _)) => add(&mut held.shims, rss(*pid)),
                    None => held.shims = Err(format!("no shim of container {id} in /proc")),
                }
                for (pid, _) in procs.iter().filter(|(_, argv)| is_runtime_of(argv, id)) {
                    add(&mut held.runtime, rss(*pid));
                }
            }
        }
        Err(why) => {
            held.shims = Err(why.clone());
            held.runtime = Err(why);
        }
    }
    for id in &ids {
        let started = Instant::now();
        provider.destroy(id).await.expect("destroy");
        held.destroy.push(started.elapsed());
    }
    held
}

/// Runs the cycle on a provider of `scope`, on `runtime` (`None`: the
/// engine's default), and checks it left nothing.
fn measure(scope: &Scope, runtime: Option<&str>, n: usize) -> Cycle {
    let mut builder = scope.builder("d19-bench").timeout(Duration::from_secs(30));
    if let Some(runtime) = runtime {
        builder = builder.runtime(runtime).isolation(Isolation::Boundary);
    }
    let provider = builder.build().expect("a provider");
    let measured = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(cycle(&provider, n));
    assert!(
        scope.leftovers().is_empty(),
        "the bench left containers behind"
    );
    measured
}

/// A figure per lease, or `unknown` with why.
fn known(figure: &Result<f64, String>) -> String {
    match figure {
        Ok(b) => bytes(*b),
        Err(why) => format!("unknown ({why})"),
    }
}

/// The table of one engine: runsc beside runc, with the ratio of each, and
/// the launch goal (p50 at most twice runc's).
fn report(engine: &str, runsc: &Cycle, runc: &Cycle, n: usize) {
    println!("gvisor (D19) on {engine}: N = {n} leases, runsc vs runc, one run");
    println!("| measure | runsc | runc | runsc / runc |");
    println!("| --- | --- | --- | --- |");
    let row = ratio_row;
    let p50 = row(
        "launch p50",
        quantile(&runsc.launch, 0.5),
        quantile(&runc.launch, 0.5),
    );
    row(
        "launch p99",
        quantile(&runsc.launch, 0.99),
        quantile(&runc.launch, 0.99),
    );
    row(
        "destroy p50",
        quantile(&runsc.destroy, 0.5),
        quantile(&runc.destroy, 0.5),
    );
    row(
        "destroy p99",
        quantile(&runsc.destroy, 0.99),
        quantile(&runc.destroy, 0.99),
    );
    let (a, b) = (runsc.per_lease(n), runc.per_lease(n));
    let ratio = match (&a, &b) {
        (Ok(x), Ok(y)) => format!("{:.2}x", x / y.max(1.0)),
        _ => "unknown".to_owned(),
    };
    println!(
        "| memory per lease (cgroup + {} RSS) | {} | {} | {ratio} |",
        if engine == "podman" { "conmon" } else { "shim" },
        known(&a),
        known(&b),
    );
    let runtime = runsc.runtime.clone().map(|sum| sum as f64 / n as f64);
    println!(
        "launch p50 goal (runsc <= 2x runc): {}; runsc's own processes (runsc-sandbox, runsc-gofer; inside the cgroup above) hold {} RSS per lease",
        if p50 <= 2.0 { "met" } else { "MISSED" },
        known(&runtime)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let n = match leases(&args, if full { 50 } else { 4 }) {
        Ok(n) => n,
        Err(why) => {
            eprintln!("gvisor: {why}");
            std::process::exit(2);
        }
    };
    let Some(scope) = support::runsc("d19-bench") else {
        println!("gvisor: no daemon that lists {RUNSC}: nothing measured");
        return;
    };
    let engine = support::engine_at(scope.socket());
    if engine == "podman" {
        println!("gvisor: the test daemon is podman; its runsc service is measured below");
    } else {
        let runc = measure(&scope, None, n);
        let runsc = measure(&scope, Some(RUNSC), n);
        report(engine, &runsc, &runc, n);
    }
    drop(scope);
    match (
        support::podman("d19-bench-podman"),
        support::podman_runsc("d19-bench-podman-runsc"),
    ) {
        (Some(runc_scope), Some(runsc_scope)) if support::lists_runsc(&runsc_scope, "gvisor") => {
            let runc = measure(&runc_scope, None, n);
            let runsc = measure(&runsc_scope, Some(RUNSC), n);
            println!();
            report("podman", &runsc, &runc, n);
        }
        _ => println!(
            "gvisor: podman's runc and runsc services do not both answer ({} and {}): docker only",
            support::podman_socket().display(),
            support::podman_runsc_socket().display()
        ),
    }
}
