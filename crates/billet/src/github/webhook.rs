//! `POST /v1/github/webhook` (G2): what a delivery is answered, decided
//! before anything is parsed by its signature, and committed before it is
//! answered `202`.

use std::time::SystemTime;

use billet_github::{Delivery, SignatureError, WorkflowJobEvent, verify_signature};
use parking_lot::Mutex;

use super::deliveries::{Committed, Deliveries};

/// The longest body a delivery may have: `413` past it. GitHub caps its
/// payloads at 25 MB, but a `workflow_job` delivery is some kilobytes (its
/// example payloads are 7 to 12 KB); a megabyte leaves room for a job of a
/// thousand steps.
pub const MAX_DELIVERY_BYTES: usize = 1024 * 1024;

/// The longest `X-GitHub-Delivery` taken (GitHub sends a 36-character GUID).
pub const MAX_DELIVERY_ID: usize = 128;

/// What a delivery was answered, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// `ping`: `200`.
    Pong,
    /// An event billet does not act on: `202`, counted, nothing else.
    Counted,
    /// A `workflow_job` delivery, committed: `202`.
    Accepted,
    /// A delivery id committed before (a redelivery): `200`, nothing changed.
    Repeated,
    /// The signature is missing, malformed or wrong: `401`, nothing recorded.
    Unsigned(SignatureError),
    /// Signed, but not a delivery billet can read (no event or delivery id,
    /// a body that is not the documented event): `400`, nothing recorded.
    Unreadable(String),
    /// It could not be committed: `503`, nothing recorded; GitHub's
    /// operator may redeliver it.
    Unwritten(String),
}

impl Received {
    /// The HTTP status it is answered with.
    pub fn status(&self) -> u16 {
        match self {
            Received::Pong | Received::Repeated => 200,
            Received::Counted | Received::Accepted => 202,
            Received::Unsigned(_) => 401,
            Received::Unreadable(_) => 400,
            Received::Unwritten(_) => 503,
        }
    }

    /// The `result` label of `billet_github_deliveries_total`.
    pub fn result(&self) -> &'static str {
        match self {
            Received::Pong => "pong",
            Received::Counted => "counted",
            Received::Accepted => "accepted",
            Received::Repeated => "repeated",
            Received::Unsigned(_) => "unsigned",
            Received::Unreadable(_) => "unreadable",
            Received::Unwritten(_) => "unwritten",
        }
    }
}

/// The webhook: its secret, and where deliveries are committed.
pub struct Webhook {
    secret: Vec<u8>,
    deliveries: Mutex<Deliveries>,
    /// Deliveries waiting to be committed by whichever receiver holds
    /// `deliveries` next, all in one transaction (group commit). At most one
    /// per receiver blocked in [`Webhook::receive`], so bounded by the
    /// listener's connections.
    waiting: Mutex<Vec<Waiting>>,
    /// GitHub's API as the intake uses it, once it runs: what `/healthz`
    /// asks whether GitHub can be used (G8).
    api: std::sync::OnceLock<billet_github::Api>,
    /// Where committed `workflow_job` events go: the intake, once it runs.
    events: std::sync::OnceLock<tokio::sync::mpsc::Sender<billet_github::WorkflowJobEvent>>,
}

/// A delivery waiting for its commit, and where its answer goes.
struct Waiting {
    id: String,
    event: WorkflowJobEvent,
    now: SystemTime,
    done: std::sync::mpsc::SyncSender<Result<Committed, String>>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook").finish_non_exhaustive()
    }
}

/// The `event` label a delivery is counted under: GitHub's event name when
/// it is one (lower-case letters and `_`, at most 40), else `other`, so
/// that no sender can grow the metric's series; `unverified` before its
/// signature is checked.
pub fn event_label(event: Option<&str>, received: &Received) -> String {
    if matches!(received, Received::Unsigned(_)) {
        return "unverified".to_owned();
    }
    match event {
        Some(name)
            if (1..=40).contains(&name.len())
                && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
        {
            name.to_owned()
        }
        _ => "other".to_owned(),
    }
}

impl Webhook {
    /// A webhook checking deliveries against `secret` and committing them to
    /// `deliveries`.
    pub fn new(secret: Vec<u8>, deliveries: Deliveries) -> Webhook {
        Webhook {
            secret,
            deliveries: Mutex::new(deliveries),
            waiting: Mutex::new(Vec::new()),
            events: std::sync::OnceLock::new(),
            api: std::sync::OnceLock::new(),
        }
    }

    /// Hands every `workflow_job` event committed from now on to `events`
    /// (the intake); a delivery that finds it full is answered `503`
    /// before anything is committed.
    pub fn feed(&self, events: tokio::sync::mpsc::Sender<billet_github::WorkflowJobEvent>) {
        let _ = self.events.set(events);
    }

    /// Receives one delivery: its `X-GitHub-Event`, `X-GitHub-Delivery` and
    /// `X-Hub-Signature-256` headers, and its raw body, at `now`. The
    /// signature is checked first, over the raw bytes; nothing is read or
    /// recorded before it holds. Blocks on the database: call it off the
    /// runtime's workers.
    pub fn receive(
        &self,
        event: Option<&str>,
        delivery: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
        now: SystemTime,
    ) -> Received {
        if let Err(refused) = verify_signature(&self.secret, body, signature) {
            return Received::Unsigned(refused);
        }
        let Some(event) = event else {
            return Received::Unreadable("header `X-GitHub-Event` is missing".to_owned());
        };
        let event = match Delivery::parse(event, body) {
            Ok(Delivery::Ping) => return Received::Pong,
            Ok(Delivery::Other { .. }) => return Received::Counted,
            Ok(Delivery::WorkflowJob(event)) => event,
            Err(error) => return Received::Unreadable(error.to_string()),
        };
        let id = match delivery {
            Some(id)
                if (1..=MAX_DELIVERY_ID).contains(&id.len())
                    && id.bytes().all(|b| b.is_ascii_graphic()) =>
            {
                id
            }
            _ => {
                return Received::Unreadable(format!(
                    "header `X-GitHub-Delivery` is missing, or not 1 to {MAX_DELIVERY_ID} visible characters"
                ));
            }
        };
        let permit = match self.events.get().map(|events| events.try_reserve()) {
            None => None,
            Some(Ok(permit)) => Some(permit),
            Some(Err(_)) => {
                return Received::Unwritten(
                    "billet's GitHub intake is full: redeliver this delivery shortly".to_owned(),
                );
            }
        };
        match self.commit(id, &event, now) {
            Ok(Committed::New) => {
                if let Some(permit) = permit {
                    permit.send(*event);
                }
                Received::Accepted
            }
            Ok(Committed::Repeated) => Received::Repeated,
            Err(error) => {
                Received::Unwritten(format!("the delivery could not be committed: {error}"))
            }
        }
    }

    /// Commits delivery `id` of `event` with the others waiting (group
    /// commit): it waits in `waiting`; whichever receiver holds the
    /// database next commits every delivery waiting, in one transaction,
    /// and hands each its answer before it lets the database go. So when
    /// this receiver holds the database, its delivery is either committed
    /// (answered) or still waiting (it commits it, with the others).
    fn commit(
        &self,
        id: &str,
        event: &WorkflowJobEvent,
        now: SystemTime,
    ) -> Result<Committed, String> {
        let (done, answer) = std::sync::mpsc::sync_channel(1);
        self.waiting.lock().push(Waiting {
            id: id.to_owned(),
            event: event.clone(),
            now,
            done,
        });
        let mut deliveries = self.deliveries.lock();
        if let Ok(answered) = answer.try_recv() {
            return answered;
        }
        let batch = std::mem::take(&mut *self.waiting.lock());
        let items: Vec<(&str, Option<&WorkflowJobEvent>, SystemTime)> = batch
            .iter()
            .map(|waiting| (waiting.id.as_str(), Some(&waiting.event), waiting.now))
            .collect();
        match deliveries.commit_many(&items) {
            Ok(answers) => {
                for (waiting, committed) in batch.iter().zip(answers) {
                    let _ = waiting.done.try_send(Ok(committed));
                }
            }
            Err(error) => {
                for waiting in &batch {
                    let _ = waiting.done.try_send(Err(error.to_string()));
                }
            }
        }
        drop(deliveries);
        answer
            .try_recv()
            .unwrap_or_else(|_| Err("the delivery was lost before its commit".to_owned()))
    }

    /// Watches `api`, the intake's client, for [`api_problem`](Webhook::api_problem).
    pub fn watch_api(&self, api: billet_github::Api) {
        let _ = self.api.set(api);
    }

    /// Why GitHub's API cannot be used now, if it cannot (its last call
    /// found it so); `None` too before the intake runs.
    pub fn api_problem(&self) -> Option<String> {
        self.api.get().and_then(billet_github::Api::problem)
    }

    /// The first runner number not yet reserved (see
    /// [`Deliveries::runners_reserved`](super::deliveries::Deliveries::runners_reserved)).
    pub fn runners_reserved(&self) -> Result<u64, String> {
        self.deliveries
            .lock()
            .runners_reserved()
            .map_err(|error| error.to_string())
    }

    /// Reserves every runner number below `below`, durably.
    pub fn reserve_runners(&self, below: u64) -> Result<(), String> {
        self.deliveries
            .lock()
            .reserve_runners(below)
            .map_err(|error| error.to_string())
    }

    /// Keeps what the API said of a job (the reconcile's `event`, at `now`)
    /// as a delivery would have: forward only, under the id
    /// `api:JOB:ACTION`, never a delivery id GitHub gives (a GUID).
    pub fn record(&self, event: &WorkflowJobEvent, now: SystemTime) -> Result<(), String> {
        let id = format!("api:{}:{}", event.workflow_job.id, event.action.as_str());
        self.deliveries
            .lock()
            .commit(&id, Some(event), now)
            .map(|_| ())
            .map_err(|error| error.to_string())
    }

    /// Keeps the jobs of `took` as taken and what each runner's billet job
    /// of `served` serves (billet job, GitHub job, as of), in one
    /// transaction (see [`Deliveries::keep`](super::deliveries::Deliveries::keep)).
    pub fn keep(
        &self,
        took: &[super::deliveries::TookJob],
        served: &[(u64, u64, SystemTime)],
    ) -> Result<(), String> {
        self.deliveries
            .lock()
            .keep(took, served)
            .map_err(|error| error.to_string())
    }

    /// The jobs kept as taken that have not completed (see
    /// [`Deliveries::taken`](super::deliveries::Deliveries::taken)).
    pub fn taken(
        &self,
    ) -> Result<Vec<(super::deliveries::TookJob, super::deliveries::JobFacts)>, String> {
        self.deliveries
            .lock()
            .taken()
            .map_err(|error| error.to_string())
    }

    /// The GitHub job billet job `billet_job` serves as a runner, with the
    /// deliveries' facts of it; `Ok(None)` for any other job.
    pub fn served_by(
        &self,
        billet_job: u64,
    ) -> Result<Option<super::deliveries::JobFacts>, String> {
        self.deliveries
            .lock()
            .served_by(billet_job)
            .map_err(|error| error.to_string())
    }

    /// The GitHub jobs last said in progress on a named runner (see
    /// [`Deliveries::in_progress`](super::deliveries::Deliveries::in_progress)).
    pub fn in_progress(&self) -> Result<Vec<super::deliveries::JobFacts>, String> {
        self.deliveries
            .lock()
            .in_progress()
            .map_err(|error| error.to_string())
    }

    /// What the deliveries said of GitHub job `id`.
    pub fn job(&self, id: u64) -> Option<super::deliveries::JobFacts> {
        self.deliveries.lock().job(id).ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    // G2, G8: a delivery is counted under its event's name only when that
    // is a name GitHub could give (lower-case letters and `_`, 1 to 40), so
    // no sender grows the metric's series; before its signature is checked,
    // as unverified. The webhook's debug form holds no secret.
    #[test]
    fn g2_an_event_is_counted_by_a_name_github_could_give() {
        let signed = Received::Accepted;
        assert_eq!(event_label(Some("workflow_job"), &signed), "workflow_job");
        assert_eq!(event_label(Some(&"a".repeat(40)), &signed), "a".repeat(40));
        for odd in ["", "Workflow_Job", "workflow-job", "job1", &"a".repeat(41)] {
            assert_eq!(event_label(Some(odd), &signed), "other", "{odd:?}");
        }
        assert_eq!(event_label(None, &signed), "other");
        let unsigned = Received::Unsigned(SignatureError::Missing);
        assert_eq!(event_label(Some("workflow_job"), &unsigned), "unverified");
        let webhook = Webhook::new(b"the-secret".to_vec(), Deliveries::memory().unwrap());
        assert_eq!(format!("{webhook:?}"), "Webhook { .. }");
    }

    // G5: the runner numbers reserved through the webhook are the ones it
    // answers as reserved, and a reservation never moves them back.
    #[test]
    fn g5_runner_numbers_reserved_through_the_webhook_are_answered() {
        let webhook = Webhook::new(b"secret".to_vec(), Deliveries::memory().unwrap());
        let first = webhook.runners_reserved().unwrap();
        webhook.reserve_runners(first + 2048).unwrap();
        assert_eq!(webhook.runners_reserved().unwrap(), first + 2048);
        webhook.reserve_runners(5).unwrap();
        assert_eq!(webhook.runners_reserved().unwrap(), first + 2048);
    }

    // G2: a delivery's id is 1 to MAX_DELIVERY_ID visible characters, or the
    // delivery is unreadable and nothing is recorded.
    #[test]
    fn g2_a_delivery_id_is_one_to_the_bound_of_visible_characters() {
        let webhook = Webhook::new(b"secret".to_vec(), Deliveries::memory().unwrap());
        let body = serde_json::json!({
            "action": "queued",
            "workflow_job": {"id": 1, "run_id": 7, "labels": ["linux"]},
            "repository": {"id": 3, "full_name": "octo-org/app", "private": true},
        })
        .to_string();
        let signature = billet_github::sign(b"secret", body.as_bytes());
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let receive = |id: &str| {
            webhook.receive(
                Some("workflow_job"),
                Some(id),
                Some(&signature),
                body.as_bytes(),
                now,
            )
        };
        let long = "d".repeat(MAX_DELIVERY_ID + 1);
        for bad in ["", "d 1", "d\u{7f}", long.as_str()] {
            assert!(matches!(receive(bad), Received::Unreadable(_)), "{bad:?}");
        }
        assert_eq!(webhook.deliveries.lock().job(1).unwrap(), None);
        assert!(matches!(
            receive(&"d".repeat(MAX_DELIVERY_ID)),
            Received::Accepted
        ));
    }

    // G2: deliveries received at once on many threads are committed
    // together, and each is answered as it would be alone: every id
    // accepted once, every repetition of it a redelivery, every accepted
    // event handed to the intake once.
    #[test]
    fn g2_deliveries_received_at_once_are_each_accepted_once() {
        let webhook = Arc::new(Webhook::new(
            b"secret".to_vec(),
            Deliveries::memory().unwrap(),
        ));
        let (events, mut inbox) = tokio::sync::mpsc::channel(1024);
        webhook.feed(events);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let threads: Vec<_> = (0..8u64)
            .map(|thread| {
                let webhook = Arc::clone(&webhook);
                std::thread::spawn(move || {
                    let mut answers = Vec::new();
                    for i in 0..50u64 {
                        // Each id is sent by two threads.
                        let job = (thread / 2) * 50 + i;
                        let body = serde_json::json!({
                            "action": "queued",
                            "workflow_job": {"id": job, "run_id": 7, "labels": ["linux"]},
                            "repository": {"id": 3, "full_name": "octo-org/app", "private": true},
                        })
                        .to_string();
                        let signature = billet_github::sign(b"secret", body.as_bytes());
                        let received = webhook.receive(
                            Some("workflow_job"),
                            Some(&format!("d-{job}")),
                            Some(&signature),
                            body.as_bytes(),
                            now,
                        );
                        answers.push(received);
                    }
                    answers
                })
            })
            .collect();
        let mut accepted = 0;
        let mut repeated = 0;
        for thread in threads {
            for answer in thread.join().unwrap() {
                match answer {
                    Received::Accepted => accepted += 1,
                    Received::Repeated => repeated += 1,
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!((accepted, repeated), (200, 200));
        let mut handed = BTreeSet::new();
        while let Ok(event) = inbox.try_recv() {
            assert!(handed.insert(event.workflow_job.id), "handed twice");
        }
        assert_eq!(handed, (0..200).collect());
    }
}
