//! Change hints (P9's [`Hints`], D16), from the daemon's events API.
//!
//! A subscription is one `GET /events` stream, asked for container events of
//! this owner's label. Each event is read by the one rule
//! ([`claim_for`](super::ownership::claim_for)) from its attributes (which
//! carry the container's labels and its name), so a hint never names another
//! deployment's container or one billet did not start, whatever labels it
//! wears. `start` is [`HintKind::Appeared`], `die`
//! [`HintKind::Stopped`], `destroy` (podman: `remove`) [`HintKind::Vanished`];
//! every other action is dropped.
//!
//! A stream that breaks (the daemon restarted, the connection cut) or that
//! cannot be opened is opened again after a pause that starts at
//! [`HINT_BACKOFF_FIRST`] and doubles on each failure in a row, up to
//! [`HINT_BACKOFF_MAX`]; an event read resets it. What happened while it was
//! down is not told again: a break costs promptness, never an answer, since
//! the inventory stays the authority. A subscription holds at most
//! [`HINT_BUFFER`] hints for a slow reader and drops the rest, rather than
//! growing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use billet_provider::{Hint, HintKind, HintStream, Hints, InstanceId};
use bollard::Docker;
use bollard::models::{EventMessage, EventMessageTypeEnum};
use bollard::query_parameters::EventsOptionsBuilder;
use futures::stream::BoxStream;
use futures::{StreamExt, stream};

use super::ownership::{Claim, claim_for};
use super::{Connector, DockerProvider};
use crate::dialect::docker_event_action;
use crate::naming::{OWNER_LABEL, is_full_id};

/// The pause before an event stream is opened again after its first
/// failure in a row.
pub const HINT_BACKOFF_FIRST: Duration = Duration::from_millis(100);

/// The longest pause before an event stream is opened again.
pub const HINT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How many hints a subscription holds for its reader; past that, new
/// ones are dropped until the reader catches up.
pub const HINT_BUFFER: usize = 1024;

impl Hints for DockerProvider {
    /// Called within a tokio runtime, the event stream is opened at once, by
    /// a task of the subscription's own that ends when the stream is
    /// dropped; hints wait for the reader in a buffer of [`HINT_BUFFER`].
    /// Called outside one, the stream is opened when first polled.
    fn subscribe(&self) -> HintStream {
        let mut watch = Watch {
            owner: self.owner.clone(),
            connector: self.connector(),
            client: self.client("events").ok(),
            events: None,
            pause: None,
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Box::pin(stream::unfold(watch, |mut watch| async move {
                let hint = watch.next().await;
                Some((hint, watch))
            }));
        };
        let (sender, receiver) = tokio::sync::mpsc::channel(HINT_BUFFER);
        runtime.spawn(async move {
            loop {
                tokio::select! {
                    () = sender.closed() => return,
                    hint = watch.next() => {
                        // Full: the reader is behind, and this hint is missed.
                        if let Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) =
                            sender.try_send(hint)
                        {
                            return;
                        }
                    }
                }
            }
        });
        Box::pin(stream::unfold(receiver, |mut receiver| async move {
            let hint = receiver.recv().await?;
            Some((hint, receiver))
        }))
    }
}

/// One subscription's state: the open event stream, if any, and how long to
/// wait before opening the next.
struct Watch {
    owner: Arc<str>,
    connector: Connector,
    client: Option<Docker>,
    events: Option<BoxStream<'static, Result<EventMessage, bollard::errors::Error>>>,
    /// `Some`: the last open failed or broke; wait this long first.
    pause: Option<Duration>,
}

impl Watch {
    /// The next hint, reopening the stream as often as it takes.
    async fn next(&mut self) -> Hint {
        loop {
            let Some(events) = self.events.as_mut() else {
                self.open().await;
                continue;
            };
            match events.next().await {
                Some(Ok(event)) => {
                    self.pause = None;
                    if let Some(hint) = hint_of(&self.owner, &event) {
                        return hint;
                    }
                }
                Some(Err(_)) | None => {
                    self.events = None;
                    self.pause = Some(next_pause(self.pause));
                }
            }
        }
    }

    /// Opens the event stream, after the pause a failure left.
    async fn open(&mut self) {
        if let Some(pause) = self.pause {
            tokio::time::sleep(pause).await;
        }
        let client = match self.client.clone() {
            Some(client) => client,
            None => match self.connector.connect() {
                Ok(client) => {
                    self.client = Some(client.clone());
                    client
                }
                Err(_) => {
                    self.pause = Some(next_pause(self.pause));
                    return;
                }
            },
        };
        let filters = HashMap::from([
            ("type", vec!["container".to_owned()]),
            ("label", vec![format!("{OWNER_LABEL}={}", self.owner)]),
        ]);
        let options = EventsOptionsBuilder::new().filters(&filters).build();
        self.events = Some(client.events(Some(options)).boxed());
    }
}

/// The pause after `last` (none: the first failure in a row).
fn next_pause(last: Option<Duration>) -> Duration {
    match last {
        None => HINT_BACKOFF_FIRST,
        Some(pause) => pause.saturating_mul(2).min(HINT_BACKOFF_MAX),
    }
}

/// The hint an event gives this deployment, if any: a container event of
/// an action that matters, about a container the one rule says is this
/// deployment's.
fn hint_of(owner: &str, event: &EventMessage) -> Option<Hint> {
    if event.typ != Some(EventMessageTypeEnum::CONTAINER) {
        return None;
    }
    let kind = match docker_event_action(event.action.as_deref()?) {
        "start" => HintKind::Appeared,
        "die" => HintKind::Stopped,
        "destroy" => HintKind::Vanished,
        _ => return None,
    };
    let actor = event.actor.as_ref()?;
    let id = actor.id.as_deref().filter(|id| is_full_id(id))?;
    let attributes = actor.attributes.as_ref()?;
    let daemon_name = format!("/{}", attributes.get("name")?);
    match claim_for(owner, Some(attributes), Some(&daemon_name)) {
        Claim::Ours { name, .. } => Some(Hint {
            kind,
            id: InstanceId::from(id),
            name: name.into(),
        }),
        Claim::Theirs { .. } | Claim::Foreign => None,
    }
}

#[cfg(test)]
mod tests {
    use bollard::models::EventActor;

    use super::*;
    use crate::naming::{LAUNCH_LABEL, NAME_LABEL, container_name};

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn mark() -> String {
        "0".repeat(32)
    }

    fn event(action: &str, owner: &str, name: &str, daemon_name: &str) -> EventMessage {
        let attributes = HashMap::from([
            (OWNER_LABEL.to_owned(), owner.to_owned()),
            (NAME_LABEL.to_owned(), name.to_owned()),
            (LAUNCH_LABEL.to_owned(), mark()),
            ("name".to_owned(), daemon_name.to_owned()),
            ("image".to_owned(), "busybox".to_owned()),
        ]);
        EventMessage {
            typ: Some(EventMessageTypeEnum::CONTAINER),
            action: Some(action.to_owned()),
            actor: Some(EventActor {
                id: Some(ID.to_owned()),
                attributes: Some(attributes),
            }),
            ..EventMessage::default()
        }
    }

    fn ours(action: &str) -> EventMessage {
        event(action, "blue", "job-1", &container_name("blue", "job-1"))
    }

    #[test]
    fn d16_each_action_that_matters_is_its_hint() {
        for (action, kind) in [
            ("start", HintKind::Appeared),
            ("die", HintKind::Stopped),
            ("destroy", HintKind::Vanished),
            ("remove", HintKind::Vanished),
        ] {
            let hint = hint_of("blue", &ours(action)).expect("a hint");
            assert_eq!(hint.kind, kind, "{action}");
            assert_eq!(hint.id.as_str(), ID);
            assert_eq!(&*hint.name, "job-1");
        }
        for action in ["create", "attach", "kill", "stop", "exec_start: sh", ""] {
            assert_eq!(hint_of("blue", &ours(action)), None, "{action}");
        }
        let mut image = ours("die");
        image.typ = Some(EventMessageTypeEnum::IMAGE);
        assert_eq!(hint_of("blue", &image), None);
    }

    #[test]
    fn d16_p9_a_hint_never_names_another_owners_or_a_foreign_container() {
        let theirs = event("die", "green", "job-1", &container_name("green", "job-1"));
        assert_eq!(hint_of("blue", &theirs), None);
        // Blue's labels on a container not named as billet names blue's.
        let misnamed = event("die", "blue", "job-1", "job-1");
        assert_eq!(hint_of("blue", &misnamed), None);
        let mut unmarked = ours("die");
        if let Some(attributes) = unmarked.actor.as_mut().and_then(|a| a.attributes.as_mut()) {
            attributes.remove(LAUNCH_LABEL);
        }
        assert_eq!(hint_of("blue", &unmarked), None);
        let mut short = ours("die");
        if let Some(actor) = short.actor.as_mut() {
            actor.id = Some("0123".to_owned());
        }
        assert_eq!(hint_of("blue", &short), None);
    }

    #[test]
    fn d16_the_pause_doubles_from_the_first_to_the_cap() {
        assert_eq!(next_pause(None), HINT_BACKOFF_FIRST);
        assert_eq!(next_pause(Some(HINT_BACKOFF_FIRST)), HINT_BACKOFF_FIRST * 2);
        assert_eq!(next_pause(Some(Duration::from_secs(3))), HINT_BACKOFF_MAX);
        assert_eq!(next_pause(Some(HINT_BACKOFF_MAX)), HINT_BACKOFF_MAX);
    }
}
