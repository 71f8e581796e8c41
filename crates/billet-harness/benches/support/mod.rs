//! What every bench shares: full or tiny inputs, futures that never pend,
//! and the ratio of a subject to its baseline, read back from criterion.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::path::PathBuf;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::trace::Trace;

/// The recorded workload the repository ships (188,041 jobs).
pub const LCG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/LCG.swf.gz");

/// The LCG trace onto one deployment of 2,000 leases, unrouted, hints off
/// (the README's runs of it); under `cargo test --benches`, its first
/// `tiny_records` records onto `tiny_leases` leases.
pub fn lcg_one_deployment(tiny_records: u64, tiny_leases: usize) -> Scenario {
    let trace = if full_run() {
        Trace::new(LCG)
    } else {
        Trace::new(LCG).first(tiny_records)
    };
    Scenario::replay(
        trace,
        Fleet {
            concurrency: size(2_000, tiny_leases),
            deployments: 1,
            routed: false,
            hints: false,
            ..Fleet::production()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Whether this is a real bench run (`cargo bench`), rather than
/// `cargo test --benches`, which runs every bench once with tiny inputs.
pub fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// `full` under `cargo bench`, `tiny` under `cargo test --benches`.
pub fn size(full: usize, tiny: usize) -> usize {
    if full_run() { full } else { tiny }
}

/// Polls a future that completes without pending (every simulated provider
/// call) to its output, with no executor in the way.
pub fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a simulated provider call pended"),
    }
}

/// Where criterion keeps its results: `$CRITERION_HOME`, or `criterion/`
/// in the target directory this bench was built into.
fn criterion_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(PathBuf::from(home));
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    // <target>/<profile>/deps/<bench binary>
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// The median of a benchmark criterion just measured, in nanoseconds.
pub fn median_ns(id: &str) -> Option<f64> {
    let path = criterion_home()?
        .join(id)
        .join("new")
        .join("estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["median"]["point_estimate"].as_f64()
}

/// Prints `subject / baseline` for two benchmark ids (criterion's
/// `group/function/parameter` paths) and whether it meets `goal`.
pub fn print_ratio(label: &str, subject: &str, baseline: &str, goal: f64) {
    if !full_run() {
        return;
    }
    match (median_ns(subject), median_ns(baseline)) {
        (Some(s), Some(b)) => {
            let ratio = s / b;
            let verdict = if ratio <= goal { "met" } else { "MISSED" };
            println!(
                "ratio {label}: {s:.1} ns / {b:.1} ns = {ratio:.2}x (goal <= {goal}x: {verdict})"
            );
        }
        _ => println!("ratio {label}: no criterion estimates found for {subject} and {baseline}"),
    }
}
