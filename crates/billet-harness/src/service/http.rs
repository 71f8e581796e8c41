//! What the harness sends the services over HTTP and reads back: a job as
//! `POST /v1/jobs` takes it, and the fields of the answers it reads.

use std::time::{Duration, Instant};

use billet_provider::TrustClass;

use super::client::Client;
use crate::workload::Job;

/// A job as `POST /v1/jobs` takes it.
#[derive(serde::Serialize)]
pub(super) struct NewJobBody<'a> {
    command: &'a [String],
    labels: &'a [String],
    trust: &'static str,
}

/// The one field of a `POST /v1/jobs` answer the harness reads.
#[derive(serde::Deserialize)]
pub(super) struct Answered {
    id: Option<u64>,
}

/// The body of a job's `POST /v1/jobs`.
pub(super) fn body(job: &Job) -> String {
    let trust = match job.trust {
        TrustClass::Trusted => "trusted",
        TrustClass::Untrusted => "untrusted",
        _ => "unknown",
    };
    let submission = NewJobBody {
        command: &job.command,
        labels: &job.labels,
        trust,
    };
    // A struct of strings always serializes.
    serde_json::to_string(&submission).unwrap_or_default()
}

/// The fields of a `GET /v1/jobs` page the harness reads (the rest of
/// each job is skipped, not built).
#[derive(serde::Deserialize)]
pub(super) struct Page<'a> {
    #[serde(borrow)]
    pub(super) jobs: Vec<Listed<'a>>,
    pub(super) next: Option<u64>,
}

/// A job of a page: its id and its state.
#[derive(serde::Deserialize)]
pub(super) struct Listed<'a> {
    pub(super) id: u64,
    #[serde(borrow)]
    pub(super) state: std::borrow::Cow<'a, str>,
}

/// What a `POST /v1/jobs` came to.
pub(super) enum Posted {
    Accepted(u64),
    Refused,
    Failed(String),
}

/// Sends one job to `url`; answers what came of it and its wall time.
pub(super) async fn post(client: &Client, url: &hyper::Uri, body: String) -> (Posted, Duration) {
    let started = Instant::now();
    let posted = match client.post_json(url, body).await {
        Err(error) => Posted::Failed(error),
        Ok(answer) if answer.status.as_u16() == 422 => Posted::Refused,
        Ok(answer) => match serde_json::from_slice::<Answered>(&answer.body) {
            Ok(Answered { id: Some(id) }) if answer.status.is_success() => Posted::Accepted(id),
            _ => Posted::Failed(format!(
                "POST {url}: {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )),
        },
    };
    (posted, started.elapsed())
}
