//! `memory`: bytes per held instance beyond its name, counted by a counting
//! global allocator, with 1,000,000 concurrent instances held in one process.
//! Goal: at most 300 B per instance. The baseline, measured in the same run,
//! is a bare `HashMap<String, (u64, SystemTime)>` holding the same names.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::ManualClock;
use billet_provider::{Provider, Spec, TrustClass};
use billet_simulated::{Host, SimulatedProvider, run_for};
use support::{ready, size};

/// The system allocator, counting the bytes currently allocated.
#[global_allocator]
static ALLOCATOR: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

fn live() -> usize {
    ALLOCATOR.current_usage()
}

fn main() {
    let n = size(1_000_000, 10_000);
    let names: Vec<String> = (0..n).map(|i| format!("job-{i:07}")).collect();
    let name_bytes: usize = names.iter().map(String::len).sum();
    let command = run_for(Duration::from_secs(3600));

    let before = live();
    let provider = SimulatedProvider::builder("blue")
        .host(Host::new())
        .clock(Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH)))
        .build()
        .expect("a valid owner");
    for name in &names {
        let spec =
            Spec::new(name.as_str(), command.iter().cloned()).with_trust(TrustClass::Trusted);
        drop(ready(provider.launch(spec)).expect("launch"));
    }
    let held = live() - before;
    assert_eq!(provider.host().len(), n);
    let per_instance = (held - name_bytes) as f64 / n as f64;

    let before = live();
    let mut bare: HashMap<String, (u64, SystemTime)> = HashMap::new();
    for (i, name) in names.iter().enumerate() {
        bare.insert(name.clone(), (i as u64, SystemTime::UNIX_EPOCH));
    }
    let bare_bytes = live() - before;
    let bare_per = (bare_bytes - name_bytes) as f64 / n as f64;

    let verdict = if per_instance <= 300.0 {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "memory: {n} instances held in one process, {} MiB in all",
        held / (1 << 20)
    );
    println!("memory: {per_instance:.0} B per instance beyond its name (goal <= 300 B: {verdict})");
    println!(
        "memory: baseline HashMap<String, (u64, SystemTime)>: {bare_per:.0} B per entry beyond its name; ratio {:.2}x",
        per_instance / bare_per
    );
    drop(bare);
    drop(provider);
}
