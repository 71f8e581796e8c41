//! GitHub's own example `workflow_job` payloads (G9), byte for byte as the
//! `@octokit/webhooks-examples` package holds them (testdata/.../SOURCE.md),
//! signed as GitHub signs a delivery and read back.

use billet_github::{Action, Delivery, SignatureError, sign, verify_signature};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

const ENTRY: &str = include_str!("../testdata/octokit-webhooks-examples/workflow_job.json");

/// The package's `workflow_job` element: each example as its exact text.
#[derive(Deserialize)]
struct Entry<'a> {
    name: String,
    #[serde(borrow)]
    examples: Vec<&'a RawValue>,
}

fn examples() -> Vec<&'static RawValue> {
    // The element's closing line keeps the package array's comma (SOURCE.md).
    let text = ENTRY.trim_end().strip_suffix(',').expect("the kept comma");
    let entry: Entry<'static> = serde_json::from_str(text).expect("the kept element");
    assert_eq!(entry.name, "workflow_job");
    entry.examples
}

// G9: the file is the package's bytes: a change to it (a reformat, a fix by
// hand) fails here, not silently in what the tests prove.
#[test]
fn g9_the_examples_are_kept_byte_for_byte() {
    let digest = hex::encode(Sha256::digest(ENTRY.as_bytes()));
    assert_eq!(
        digest,
        "9422940c6f01c3688a900533d842853aff0f261c803cee046ba7607081cb2e30"
    );
    assert_eq!(examples().len(), 8);
}

// G9, G2: every example, signed as GitHub signs it, verifies and reads as the
// event it is; one byte changed or another secret does not verify.
#[test]
fn g9_every_example_signed_as_github_signs_it_is_read() {
    let secret = b"billet's webhook secret";
    let mut seen = Vec::new();
    for example in examples() {
        let body = example.get().as_bytes();
        let header = sign(secret, body);
        assert_eq!(verify_signature(secret, body, Some(&header)), Ok(()));
        assert_eq!(
            verify_signature(b"another", body, Some(&header)),
            Err(SignatureError::Mismatch)
        );
        let mut changed = body.to_vec();
        let at = changed.len() / 2;
        changed[at] ^= 1;
        assert_eq!(
            verify_signature(secret, &changed, Some(&header)),
            Err(SignatureError::Mismatch)
        );

        let Ok(Delivery::WorkflowJob(event)) = Delivery::parse("workflow_job", body) else {
            panic!("example does not read: {}", example.get());
        };
        seen.push((
            event.action,
            event.workflow_job.id,
            event.workflow_job.run_id,
            event.workflow_job.labels.join(","),
            event.repository.full_name.clone(),
            event.repository.private,
            event.organization.map(|org| org.login),
        ));
    }
    let expected = [
        (
            Action::InProgress,
            2832853555,
            940463255,
            "gpu,db-app,dc-03",
            "octo-org/example-workflow",
            true,
            Some("octo-org"),
        ),
        (
            Action::Completed,
            289782451,
            2202229078,
            "ubuntu-latest",
            "Codertocat/Hello-World",
            false,
            Some("Octocoders"),
        ),
        (
            Action::Completed,
            289782451,
            2202229078,
            "ubuntu-latest",
            "Codertocat/Hello-World",
            false,
            Some("Octocoders"),
        ),
        (
            Action::InProgress,
            289782451,
            2202229078,
            "ubuntu-latest",
            "Codertocat/Hello-World",
            false,
            None,
        ),
        (
            Action::InProgress,
            14541957942,
            5373506832,
            "ubuntu-latest",
            "wolfy1339/github-events-schemas",
            false,
            None,
        ),
        (
            Action::Queued,
            289782451,
            2202229078,
            "ubuntu-latest",
            "Codertocat/Hello-World",
            false,
            None,
        ),
        (
            Action::Queued,
            12877621891,
            4747967848,
            "self-hosted,k8s",
            "lineville/elastic-machines-testing",
            false,
            None,
        ),
        (
            Action::Waiting,
            12877621891,
            4747967848,
            "self-hosted,k8s",
            "lineville/elastic-machines-testing",
            false,
            None,
        ),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(a, id, run, labels, repo, private, org)| {
            (
                *a,
                *id,
                *run,
                (*labels).to_owned(),
                (*repo).to_owned(),
                *private,
                org.map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(seen, expected);
}
