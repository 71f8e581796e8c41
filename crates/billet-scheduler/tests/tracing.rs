//! B11: every decision is a `tracing` event naming the job and the pool.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use billet_provider::Error;
use billet_scheduler::{Answer, JobId};
use support::*;

/// Everything the subscriber writes, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock() {
            Ok(mut held) => held.extend_from_slice(buf),
            Err(poisoned) => poisoned.into_inner().extend_from_slice(buf),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        let bytes = match self.0.lock() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The lines logged while `f` runs, at every level.
fn logged(f: impl FnOnce()) -> Vec<String> {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    captured.text().lines().map(str::to_owned).collect()
}

fn line<'a>(lines: &'a [String], has: &[&str]) -> Option<&'a String> {
    lines.iter().find(|l| has.iter().all(|h| l.contains(h)))
}

// B11: placed, launched, retried, adopted, ended, orphans and inventory
// errors each log an event with the job (or instance) and the pool's name.
#[test]
fn b11_every_decision_is_a_tracing_event() {
    let lines = logged(|| {
        let mut world = World::new(one_pool(2));
        world.settle();
        world.submit(job(1, 5, 3)).unwrap();
        world.submit(job(2, 500, 0)).unwrap();
        world.collect();
        let calls = world.calls();
        world.answer_with(
            calls[1].id,
            Answer::Launched(Err(Error::unavailable("cut"))),
        );
        world.settle();
        world.fake.plant(0, "stray", world.now, secs(1_000));
        world.fake.down.insert(0, true);
        world.advance(secs(10));
        world.fake.down.insert(0, false);
        world.advance(secs(10));
        assert!(world.core.cancel(JobId(2), world.now));
        world.run_until_idle(secs(1_000));
        let refused = world.submit(job(3, 1, 0).with_trust(billet_provider::TrustClass::Untrusted));
        assert!(refused.is_err());
    });
    let expect: &[&[&str]] = &[
        &["billet_scheduler", "placed", "job=1", "pool=\"a\""],
        &["launched", "job=1", "pool=\"a\"", "instance="],
        &["retrying", "job=2", "pool=\"a\"", "attempt=1"],
        &["launched", "job=2", "pool=\"a\""],
        &["ended", "job=1", "pool=\"a\"", "finished (exit code 3)"],
        &["ended", "job=2", "pool=\"a\"", "cancelled"],
        &[
            "inventory unavailable; nothing freed",
            "pool=\"a\"",
            "pool down",
        ],
        &["orphan", "pool=\"a\"", "name=\"stray\"", "Seen"],
        &["orphan", "pool=\"a\"", "name=\"stray\"", "Collected"],
        &["refused", "job=3", "untrusted"],
        &["queued", "job=2"],
    ];
    for has in expect {
        assert!(
            line(&lines, has).is_some(),
            "no line with {has:?} in:\n{}",
            lines.join("\n")
        );
    }
}

// B11: an adoption names the job, the pool and the instance; an end with no
// lease names no pool.
#[test]
fn b11_adoptions_and_ends_without_a_lease() {
    let lines = logged(|| {
        let mut world = World::new(one_pool(1));
        world.settle();
        world.submit(job(1, 500, 0)).unwrap();
        world.submit(job(2, 500, 0)).unwrap();
        world.settle();
        world.fake.plant(0, "job-2.a", world.now, secs(1_000));
        world.advance(secs(10));
        world.submit(job(3, 5, 0)).unwrap();
        assert!(world.core.cancel(JobId(3), world.now));
        world.collect();
    });
    assert!(
        line(&lines, &["adopted", "job=2", "pool=\"a\"", "instance="]).is_some(),
        "{lines:?}"
    );
    assert!(
        line(&lines, &["ended", "job=3", "pool=\"-\"", "cancelled"]).is_some(),
        "{lines:?}"
    );
}
