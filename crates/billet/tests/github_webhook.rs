//! G2: `POST /v1/github/webhook` on the service's listener, in process over
//! the simulated backend: signed with GitHub's own example payloads (G9),
//! checked before anything is read, committed before `202`, a redelivery
//! answered `200` across a crash, and counted.

mod client;
mod in_process;

use std::sync::Arc;

use billet::Limits;
use billet::github::deliveries::Deliveries;
use billet::github::webhook::{MAX_DELIVERY_BYTES, Webhook};
use billet_github::{Action, sign};
use billet_simulated::Host;
use in_process::*;
use reqwest::StatusCode;
use serde_json::Value;
use serde_json::value::RawValue;

const SECRET: &[u8] = b"the webhook's secret";
const EXAMPLES: &str =
    include_str!("../../billet-github/testdata/octokit-webhooks-examples/workflow_job.json");

/// GitHub's `workflow_job` examples, each as its exact text.
fn examples() -> Vec<&'static str> {
    #[derive(serde::Deserialize)]
    struct Entry<'a> {
        #[serde(borrow)]
        examples: Vec<&'a RawValue>,
    }
    let text = EXAMPLES.trim_end().strip_suffix(',').unwrap();
    let entry: Entry<'static> = serde_json::from_str(text).unwrap();
    entry.examples.into_iter().map(RawValue::get).collect()
}

fn webhook(dir: &std::path::Path) -> Arc<Webhook> {
    Arc::new(Webhook::new(
        SECRET.to_vec(),
        Deliveries::open(dir).unwrap(),
    ))
}

/// Posts a delivery: `event`, `id`, and a signature (`None`: GitHub's, of
/// the body under the secret).
async fn deliver(
    running: &Running,
    event: &str,
    id: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
) -> (StatusCode, Value) {
    let mut request = running
        .client
        .post(format!("{}/v1/github/webhook", running.base))
        .header("X-GitHub-Event", event)
        .header("Content-Type", "application/json")
        .body(body.to_vec());
    if let Some(id) = id {
        request = request.header("X-GitHub-Delivery", id);
    }
    let signature = signature.map_or_else(|| sign(SECRET, body), str::to_owned);
    if !signature.is_empty() {
        request = request.header("X-Hub-Signature-256", signature);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

// G2, G9: GitHub's examples signed as GitHub signs them are committed
// and answered 202; unsigned, wrongly signed and unreadable deliveries
// record nothing; ping is 200, other events 202 and counted; a body over the
// limit is 413; every answer is counted by event and result.
#[tokio::test]
async fn g2_deliveries_are_checked_then_committed_before_202() {
    let state = private_dir();
    let hook = webhook(state.path());
    let host = Host::new();
    let limits = Limits {
        github: Some(Arc::clone(&hook)),
        ..Limits::default()
    };
    let running = start(&host, Some(state.path()), limits).await;
    let [_, completed, _, _, _, queued, ..] = examples()[..] else {
        panic!("eight examples")
    };

    // Before anything is read, the signature: none, malformed, wrong.
    for (signature, says) in [
        ("", "carries no"),
        ("sha256=zz", "not sha256="),
        (
            &*sign(b"another secret", queued.as_bytes()),
            "does not match",
        ),
    ] {
        let (status, body) = deliver(
            &running,
            "workflow_job",
            Some("d-0"),
            Some(signature),
            queued.as_bytes(),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body["result"], "unsigned");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
    assert_eq!(hook.job(289_782_451), None, "nothing recorded");

    let (status, body) = deliver(&running, "ping", Some("p-1"), None, br#"{"zen": "x"}"#).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::OK, Some("pong"))
    );
    let (status, body) = deliver(&running, "push", Some("p-2"), None, b"{}").await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::ACCEPTED, Some("counted"))
    );

    // A queued job: committed, then its redelivery changes nothing.
    let (status, body) = deliver(
        &running,
        "workflow_job",
        Some("d-1"),
        None,
        queued.as_bytes(),
    )
    .await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::ACCEPTED, Some("accepted"))
    );
    let facts = hook.job(289_782_451).expect("committed before the answer");
    assert_eq!(facts.action, Action::Queued);
    assert_eq!(facts.repository, "Codertocat/Hello-World");
    assert_eq!(facts.labels, ["ubuntu-latest"]);
    assert_eq!(facts.runner, None, "a queued delivery's runner is not read");
    let (status, body) = deliver(
        &running,
        "workflow_job",
        Some("d-1"),
        None,
        queued.as_bytes(),
    )
    .await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::OK, Some("repeated"))
    );

    // Completed, then a late queued under another id: forward only.
    let (status, _) = deliver(
        &running,
        "workflow_job",
        Some("d-2"),
        None,
        completed.as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = deliver(
        &running,
        "workflow_job",
        Some("d-3"),
        None,
        queued.as_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let facts = hook.job(289_782_451).unwrap();
    assert_eq!(facts.action, Action::Completed);
    assert_eq!(facts.conclusion.as_deref(), Some("failure"));
    assert_eq!(facts.runner.as_deref(), Some("GitHub Actions 5"));

    // Signed but unreadable: no delivery id, a body not the event.
    let (status, body) = deliver(&running, "workflow_job", None, None, queued.as_bytes()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("X-GitHub-Delivery"),
        "{body}"
    );
    let (status, body) = deliver(
        &running,
        "workflow_job",
        Some("d-4"),
        None,
        br#"{"action": "queued"}"#,
    )
    .await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unreadable"))
    );

    // Over the limit: 413, before the signature is looked at.
    let big = vec![b' '; MAX_DELIVERY_BYTES + 1];
    let (status, _) = deliver(&running, "workflow_job", Some("d-5"), None, &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // No bearer token is asked of GitHub; every other path still asks one.
    let (status, _) = running.call("", "GET", "/v1/jobs", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (_, metrics) = running
        .call(&format!("Bearer {ALL}"), "GET", "/metrics", None)
        .await;
    let metrics = metrics.as_str().unwrap().to_owned();
    for line in [
        r#"billet_github_deliveries_total{event="unverified",result="unsigned"} 3"#,
        r#"billet_github_deliveries_total{event="ping",result="pong"} 1"#,
        r#"billet_github_deliveries_total{event="push",result="counted"} 1"#,
        r#"billet_github_deliveries_total{event="workflow_job",result="accepted"} 3"#,
        r#"billet_github_deliveries_total{event="workflow_job",result="repeated"} 1"#,
        r#"billet_github_deliveries_total{event="workflow_job",result="unreadable"} 2"#,
        r#"billet_github_deliveries_total{event="unverified",result="too_large"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }

    // A crash after the answer loses nothing: the redelivery is known.
    running.service.abort();
    drop(hook);
    let hook = webhook(state.path());
    let limits = Limits {
        github: Some(Arc::clone(&hook)),
        ..Limits::default()
    };
    let restarted = start(&host, Some(state.path()), limits).await;
    let (status, body) = deliver(
        &restarted,
        "workflow_job",
        Some("d-1"),
        None,
        queued.as_bytes(),
    )
    .await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::OK, Some("repeated"))
    );
    assert_eq!(hook.job(289_782_451).unwrap().action, Action::Completed);
}

// G2: without a `github:` section there is no webhook: a delivery is
// refused like any request without a token, and 404 with one.
#[tokio::test]
async fn g2_no_webhook_without_a_github_section() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let (status, _) = deliver(&running, "ping", Some("p"), None, b"{}").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = running
        .call(&format!("Bearer {ALL}"), "POST", "/v1/github/webhook", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
