//! `clock_wake`: a `ManualClock` advanced past 100,000 sleepers, against
//! tokio's paused time (current_thread, `start_paused`) with the same
//! sleepers. Both sides create the sleeps and poll each once (untimed), then
//! time the move past every deadline and the second poll that finds each one
//! complete. Goal: at most 1x per sleeper.

mod support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use billet_clock::{Clock, ManualClock};
use criterion::Criterion;
use support::{print_ratio, size};

type Sleeps = Vec<Pin<Box<dyn Future<Output = ()> + Send>>>;

/// Polls every sleep once, drops those that completed, and answers how many
/// are still pending.
fn poll_all(sleeps: &mut Sleeps) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    sleeps.retain_mut(|sleep| sleep.as_mut().poll(&mut cx) == Poll::Pending);
    sleeps.len()
}

fn deadline(i: usize) -> Duration {
    // Spread over a modelled hour, many sharing a millisecond.
    Duration::from_millis(1 + (i as u64 * 7919) % 3_600_000)
}

fn main() {
    let n = size(100_000, 1_000);
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    let mut group = c.benchmark_group("clock_wake");

    group.bench_function("manual_clock", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = SystemTime::UNIX_EPOCH;
                let clock = ManualClock::new(start);
                let mut sleeps: Sleeps = (0..n)
                    .map(|i| clock.sleep_until(start + deadline(i)))
                    .collect();
                assert_eq!(poll_all(&mut sleeps), n);
                let t = Instant::now();
                clock.advance(Duration::from_secs(3600)).expect("forward");
                let pending = poll_all(&mut sleeps);
                total += t.elapsed();
                assert_eq!(pending, 0);
            }
            total
        });
    });

    group.bench_function("tokio_paused", |b| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime");
        b.iter_custom(|iters| {
            // Unconstrained: tokio's cooperative budget would otherwise make
            // the sleeps answer Pending after 128 polls per task tick.
            runtime.block_on(tokio::task::unconstrained(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut sleeps: Sleeps = (0..n)
                        .map(|i| {
                            Box::pin(tokio::time::sleep(deadline(i)))
                                as Pin<Box<dyn Future<Output = ()> + Send>>
                        })
                        .collect();
                    assert_eq!(poll_all(&mut sleeps), n);
                    let t = Instant::now();
                    tokio::time::advance(Duration::from_secs(3600)).await;
                    let mut pending = poll_all(&mut sleeps);
                    while pending > 0 {
                        tokio::task::yield_now().await;
                        pending = poll_all(&mut sleeps);
                    }
                    total += t.elapsed();
                }
                total
            }))
        });
    });
    group.finish();
    print_ratio(
        &format!("clock_wake {n} sleepers"),
        "clock_wake/manual_clock",
        "clock_wake/tokio_paused",
        1.0,
    );
    c.final_summary();
}
