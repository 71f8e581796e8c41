//! `memory`: bytes per held instance beyond its name, counted by a counting
//! global allocator, with 1,000,000 concurrent instances held in one process.
//! Goal: at most 300 B per instance. The baseline, measured in the same run,
//! is a bare `HashMap<String, (u64, SystemTime)>` holding the same names.

#![allow(unsafe_code)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use billet_clock::ManualClock;
use billet_provider::{Provider, Spec, TrustClass};
use billet_simulated::{Host, SimulatedProvider, run_for};
use support::{ready, size};

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to the system allocator with the caller's
// arguments unchanged, and only adds bookkeeping on an atomic counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from this allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged; `ptr` came from this allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            LIVE.fetch_add(new_size, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
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
