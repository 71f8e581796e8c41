//! Launch, destroy and refusals emit `tracing` events carrying the deployment,
//! id and name, in a test binary of its own: tracing caches each event site's
//! interest process-wide, and a test elsewhere in the binary that hits a site
//! first, with no subscriber, would race this test's scoped logger.

mod support;

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use billet_provider::{Provider, Spec, TrustClass};
use parking_lot::Mutex;
use support::{TEST_IMAGE, create_by_hand, daemon};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// A writer that keeps everything written to it.
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

/// One event as its fields, by name (the text is under `message`).
type Fields = BTreeMap<&'static str, String>;

/// A layer that keeps every event's fields, as a reader of structured logs
/// would see them.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Fields>>>);

impl<S: tracing::Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        struct Record(Fields);
        impl Visit for Record {
            fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
                self.0.insert(field.name(), format!("{value:?}"));
            }
            fn record_str(&mut self, field: &Field, value: &str) {
                self.0.insert(field.name(), value.to_owned());
            }
        }
        let mut record = Record(Fields::new());
        event.record(&mut record);
        self.0.lock().push(record.0);
    }
}

fn sleeper(name: &str) -> Spec {
    Spec::new(name, ["sleep", "300"])
        .with_image(TEST_IMAGE)
        .with_trust(TrustClass::Trusted)
}

// D1 (like S13): launch, destroy and refusals emit events with deployment, id and name.
#[tokio::test]
async fn d1_events_carry_deployment_id_and_name() {
    let Some(scope) = daemon("events") else {
        return;
    };
    let captured = Captured::default();
    let writer = captured.clone();
    let events = Events::default();
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .with_ansi(false),
        )
        .with(events.clone());
    let blue = scope
        .builder("blue")
        .logger(tracing::Dispatch::new(subscriber))
        .build()
        .unwrap();
    let green = scope.provider("green");
    let launched = blue.launch(sleeper("job-7")).await.unwrap();
    let theirs = green.launch(sleeper("job-8")).await.unwrap();
    blue.launch(sleeper("job-7")).await.unwrap_err();
    blue.launch(Spec::new("job-9", ["true"])).await.unwrap_err();
    blue.destroy(&theirs.id).await.unwrap_err();
    let foreign = create_by_hand(&scope, None, &[], &["true"]);
    blue.destroy(&foreign.clone().into()).await.unwrap_err();
    blue.destroy(&launched.id).await.unwrap();

    let log = String::from_utf8(captured.0.lock().clone()).unwrap();
    let line = |needle: &str, nth: usize| {
        log.lines()
            .filter(|l| l.contains(needle))
            .nth(nth)
            .unwrap_or_else(|| panic!("no {needle:?} event #{nth} in:\n{log}"))
            .to_owned()
    };
    let deployment = format!("deployment={}", scope.owner("blue"));
    let launched_line = line("launched", 0);
    assert!(launched_line.contains(&deployment), "{launched_line}");
    assert!(launched_line.contains(&format!("id={}", launched.id)));
    assert!(launched_line.contains("name=job-7"));
    let conflict = line("launch refused", 0);
    assert!(
        conflict.contains("name=job-7") && conflict.contains(&deployment),
        "{conflict}"
    );
    let untrusted = line("launch refused", 1);
    assert!(
        untrusted.contains("name=job-9") && untrusted.contains("unknown"),
        "{untrusted}"
    );
    let not_owned = line("destroy refused", 0);
    assert!(
        not_owned.contains(&format!("id={}", theirs.id)) && not_owned.contains("name=job-8"),
        "{not_owned}"
    );
    let foreign_line = line("destroy refused", 1);
    assert!(
        foreign_line.contains(&format!("id={foreign}")),
        "{foreign_line}"
    );
    let destroyed = line("destroyed", 0);
    assert!(
        destroyed.contains(&format!("id={}", launched.id)) && destroyed.contains("name=job-7"),
        "{destroyed}"
    );
    // Green has no logger of its own: its launch of job-8 must not reach
    // blue's. Blue's refusal to destroy job-8 does name it, so look for the
    // event itself: a `launched` for job-8, or anything from green.
    let events = events.0.lock().clone();
    let field = |event: &Fields, name: &str| event.get(name).cloned().unwrap_or_default();
    assert!(
        events
            .iter()
            .any(|e| field(e, "message") == "launched" && field(e, "name") == "job-7"),
        "blue's own launch was captured: {events:?}"
    );
    let green_owner = scope.owner("green");
    let leaked: Vec<&Fields> = events
        .iter()
        .filter(|e| {
            (field(e, "message") == "launched" && field(e, "name") == "job-8")
                || field(e, "deployment") == green_owner
        })
        .collect();
    assert!(
        leaked.is_empty(),
        "green's events reached blue's logger: {leaked:?}"
    );
}
