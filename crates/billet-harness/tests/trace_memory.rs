//! T2: a replay reads its trace as it goes, so the memory it holds grows with
//! the jobs in flight, not with the trace's length. Measured with a counting
//! global allocator (as `benches/memory.rs` does): bytes, not time, so the
//! figures are the same on every run. This binary holds one test, so no other
//! test's allocations are counted.

use std::time::SystemTime;

use async_trait::async_trait;
use billet_harness::reference::ReferenceScheduler;
use billet_harness::scenario::{Fleet, Scenario};
use billet_harness::scheduler::{Scheduler, SchedulerContext, Step};
use billet_harness::trace::{SwfRecord, Trace};
use billet_harness::workload::{Job, JobId};

/// The system allocator, counting the bytes live and their high-water mark.
#[global_allocator]
static ALLOCATOR: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// A trace of `records` jobs, one every 2 s with a burst of 40 at once every
/// 500 records, each running about 100 s: about 50 in flight at any time,
/// whatever the length.
fn trace(dir: &tempfile::TempDir, records: i64) -> Trace {
    let mut text = String::from("; Version: 2.2\n; Installation: synthetic\n");
    let mut submit = 0;
    for i in 0..records {
        if i % 500 != 0 {
            submit += 2;
        }
        text += &SwfRecord::new(i + 1, submit, 100 + i % 7).to_string();
        text.push('\n');
    }
    let path = dir.path().join(format!("long-{records}.swf"));
    std::fs::write(&path, text).unwrap();
    Trace::new(path)
}

/// A scheduler that remembers every job it was given: state that grows with
/// the trace's length, which the measurement must catch.
struct Hoarding {
    inner: ReferenceScheduler,
    seen: Vec<JobId>,
}

#[async_trait]
impl Scheduler for Hoarding {
    async fn submit(&mut self, job: Job) -> bool {
        self.seen.push(job.id);
        self.inner.submit(job).await
    }
    async fn tick(&mut self) -> Step {
        self.inner.tick().await
    }
    fn next_wakeup(&mut self) -> Option<SystemTime> {
        self.inner.next_wakeup()
    }
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn leases(&self) -> Vec<usize> {
        self.inner.leases()
    }
}

/// Peak bytes held during a replay of `trace`, over what was live before it.
fn peak_of<S: Scheduler>(trace: &Trace, build: impl FnOnce(SchedulerContext) -> S) -> usize {
    let mut scenario = Scenario::replay(
        trace.clone(),
        Fleet {
            concurrency: 100,
            deployments: 2,
            outages: 0,
            ..Fleet::default()
        },
    )
    .unwrap();
    // Few chart points, so the series reaches its bound in the short run too.
    scenario.chart_points = 20;
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    let report = scenario.run(build).unwrap();
    let peak = ALLOCATOR.peak_usage() - before;
    assert_eq!(report.finished, report.submitted);
    assert!(report.peak_leases >= 40, "{report}");
    drop(report);
    peak
}

// T2: peak memory tracks the jobs in flight, not the trace's length: a trace
// four times as long (24,000 more jobs, the same ~50 in flight) adds less than
// 16 KiB to the peak; a scheduler that keeps 8 bytes per job is caught by the
// same measurement.
#[test]
fn t2_replay_memory_tracks_jobs_in_flight_not_trace_length() {
    let dir = tempfile::tempdir().unwrap();
    let short = trace(&dir, 8_000);
    let long = trace(&dir, 32_000);
    let short_peak = peak_of(&short, ReferenceScheduler::new);
    let long_peak = peak_of(&long, ReferenceScheduler::new);
    let growth = long_peak.saturating_sub(short_peak);
    println!("T2: peak {short_peak} B for 8,000 jobs, {long_peak} B for 32,000 jobs");
    assert!(
        growth < 16 * 1024,
        "T2: 24,000 more jobs added {growth} B to the peak ({short_peak} B -> {long_peak} B)"
    );
    // The guard: 8 bytes kept per job shows up as at least 24,000 x 8 B.
    let hoard = |ctx| Hoarding {
        inner: ReferenceScheduler::new(ctx),
        seen: Vec::new(),
    };
    let short_hoard = peak_of(&short, hoard);
    let long_hoard = peak_of(&long, hoard);
    assert!(
        long_hoard.saturating_sub(short_hoard) >= 24_000 * 8,
        "the measurement missed per-job state: {short_hoard} B -> {long_hoard} B"
    );
}
