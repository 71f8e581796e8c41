//! S13 in a test binary of its own: tracing caches each event site's interest
//! process-wide, and a test elsewhere in the same binary that hits an event
//! site first, with no subscriber, would race this test's scoped logger.

use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_provider::{Provider, Spec, TrustClass};
use billet_simulated::{Host, SimulatedProvider, run_for};
use parking_lot::Mutex;

fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

fn job(name: &str, secs: u64) -> Spec {
    Spec::new(name, run_for(Duration::from_secs(secs))).with_trust(TrustClass::Trusted)
}

/// A writer that keeps everything written to it, for capturing log lines.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

// S13: launch, destroy and refusals emit events carrying the deployment, id
// and name, to the logger the provider was given.
#[tokio::test]
async fn s13_events_carry_deployment_id_and_name() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(start()));
    let host = Host::new();
    let blue = SimulatedProvider::builder("blue")
        .host(host.clone())
        .clock(Arc::clone(&clock))
        .logger(tracing::Dispatch::new(subscriber))
        .build()
        .unwrap();
    let green = SimulatedProvider::builder("green")
        .host(host)
        .clock(clock)
        .build()
        .unwrap();

    let launched = blue.launch(job("job-7", 60)).await.unwrap();
    let theirs = green.launch(job("job-8", 60)).await.unwrap();
    blue.launch(job("job-7", 60)).await.unwrap_err();
    blue.launch(Spec::new("job-9", ["x"])).await.unwrap_err();
    blue.destroy(&theirs.id).await.unwrap_err();
    blue.destroy(&launched.id).await.unwrap();

    let log = String::from_utf8(captured.0.lock().clone()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let line = |needle: &str| {
        lines
            .iter()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} event in:\n{log}"))
            .to_string()
    };
    let launched_line = line("launched");
    assert!(launched_line.contains("deployment=blue"));
    assert!(launched_line.contains(&format!("id={}", launched.id)));
    assert!(launched_line.contains("name=job-7"));
    let destroyed = line("destroyed");
    assert!(
        destroyed.contains("deployment=blue") && destroyed.contains(&format!("id={}", launched.id))
    );
    assert!(destroyed.contains("name=job-7"));
    let refused_destroy = line("destroy refused");
    assert!(refused_destroy.contains(&format!("id={}", theirs.id)));
    assert!(refused_destroy.contains("name=job-8"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("launch refused"))
            .count(),
        2
    );
    assert!(line("launch refused").contains("deployment=blue"));
    assert!(
        !log.contains("deployment=green"),
        "green's events go to its own logger"
    );
}
