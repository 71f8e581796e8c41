//! The API client against the GitHub stand-in on loopback, which holds every
//! request to GitHub's published description of its operation (G9).

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_github::{Api, ApiError, Credential, Removed, Scope};
use support::standin::{APP_ID, APP_PRIVATE_KEY, Auth, Fault, StandIn};

fn clock() -> ManualClock {
    ManualClock::new(SystemTime::now())
}

fn repo() -> Scope {
    Scope::Repository {
        owner: "octo-org".to_owned(),
        name: "app".to_owned(),
    }
}

fn labels(names: &[&str]) -> Vec<String> {
    names.iter().map(|l| (*l).to_owned()).collect()
}

async fn token_client() -> (StandIn, Api, ManualClock) {
    let standin = StandIn::start(Auth::Token("ghp_test".to_owned())).await;
    let clock = clock();
    let api = Api::new(
        &standin.url,
        Credential::Token("ghp_test".to_owned()),
        Arc::new(clock.clone()),
    )
    .unwrap();
    (standin, api, clock)
}

// G9, G5: a JIT config asked at a repository and at an org, as GitHub's
// description allows; the labels are read back from the answer, the encoded
// config is never printed; runners are listed and removed.
#[tokio::test]
async fn g9_jit_configs_and_runners_as_githubs_description_allows() {
    let (standin, api, _clock) = token_client().await;
    let jit = api
        .generate_jitconfig(
            &repo(),
            "billet-abc-1",
            1,
            &labels(&["self-hosted", "linux"]),
        )
        .await
        .unwrap();
    assert_eq!(jit.runner_name, "billet-abc-1");
    assert_eq!(jit.labels, ["self-hosted", "linux"]);
    assert_eq!(jit.encoded(), "jit-secret-for-billet-abc-1");
    assert!(!format!("{jit:?}").contains("jit-secret"), "{jit:?}");
    let org = Scope::Org("octo-org".to_owned());
    let other = api
        .generate_jitconfig(&org, "billet-abc-2", 3, &labels(&["gpu"]))
        .await
        .unwrap();

    let listed = api.runners(&repo(), None).await.unwrap();
    assert_eq!(listed.len(), 2);
    let named = api.runners(&org, Some("billet-abc-2")).await.unwrap();
    assert_eq!(
        named.iter().map(|r| r.id).collect::<Vec<_>>(),
        [other.runner_id]
    );

    assert_eq!(
        api.delete_runner(&repo(), jit.runner_id).await.unwrap(),
        Removed::Removed
    );
    assert_eq!(
        api.delete_runner(&repo(), jit.runner_id).await.unwrap(),
        Removed::Absent
    );
    // A name GitHub already holds is refused, with GitHub's status.
    let again = api
        .generate_jitconfig(&org, "billet-abc-2", 3, &labels(&["gpu"]))
        .await
        .unwrap_err();
    assert!(
        matches!(again, ApiError::Refused { status: 409, .. }),
        "{again:?}"
    );
    standin.assert_no_violation();
    assert_eq!(
        standin.operations_called(),
        [
            "actions/generate-runner-jitconfig-for-repo",
            "actions/generate-runner-jitconfig-for-org",
            "actions/list-self-hosted-runners-for-repo",
            "actions/list-self-hosted-runners-for-org",
            "actions/delete-self-hosted-runner-from-repo",
            "actions/delete-self-hosted-runner-from-repo",
            "actions/generate-runner-jitconfig-for-org",
        ]
    );
    assert_eq!(api.answers().get("201"), Some(&2));
    assert_eq!(api.rate_limit_remaining(), Some(4999));
}

// G9: the stand-in fails a request GitHub's description refuses (here a JIT
// config with no label, which the schema's minItems forbids): the check the
// other tests rely on can fail.
#[tokio::test]
async fn g9_the_stand_in_catches_a_request_the_description_refuses() {
    let (standin, api, _clock) = token_client().await;
    let refused = api
        .generate_jitconfig(&repo(), "no-labels", 1, &[])
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ApiError::Refused { status: 422, .. }),
        "{refused:?}"
    );
    let violations = standin.state.lock().violations.clone();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(violations[0].contains("less than 1 item"), "{violations:?}");
}

// G4, G7: a run's facts, a job, the queued runs and a run's jobs are read.
#[tokio::test]
async fn g4_runs_and_jobs_are_read() {
    let (standin, api, _clock) = token_client().await;
    {
        let mut state = standin.state.lock();
        state.runs.insert(
            7,
            serde_json::json!({
                "id": 7, "event": "pull_request", "status": "queued", "conclusion": null,
                "repository": {"id": 1, "full_name": "octo-org/app", "private": true},
                "head_repository": {"id": 2, "full_name": "someone/app", "private": false}
            }),
        );
        state.jobs.insert(
            70,
            serde_json::json!({"id": 70, "run_id": 7, "status": "completed", "conclusion": "success", "runner_name": "billet-x"}),
        );
        state.runs_by_status.insert("queued".to_owned(), vec![7, 8]);
        state.run_jobs.insert(
            7,
            vec![serde_json::json!({"id": 70, "run_id": 7, "status": "queued", "conclusion": null, "runner_name": null, "labels": ["self-hosted"]})],
        );
    }
    let run = api.run("octo-org", "app", 7).await.unwrap();
    let facts = run.facts.unwrap();
    assert!(facts.from_another_repository && !facts.public);
    assert_eq!(run.status.as_deref(), Some("queued"));
    let job = api.job("octo-org", "app", 70).await.unwrap();
    assert_eq!(
        (job.status.as_str(), job.conclusion.as_deref()),
        ("completed", Some("success"))
    );
    assert_eq!(job.runner_name.as_deref(), Some("billet-x"));
    assert_eq!(api.runs("octo-org", "app", "queued").await.unwrap(), [7, 8]);
    let jobs = api.run_jobs("octo-org", "app", 7).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].labels, ["self-hosted"]);
    let missing = api.job("octo-org", "app", 71).await.unwrap_err();
    assert!(matches!(missing, ApiError::NotFound { .. }), "{missing:?}");
    standin.assert_no_violation();
}

// G7: an App's JWT is checked with its public key; the installation is
// found from the scope when not configured; its token is reused until it
// nears expiry, then renewed.
#[tokio::test]
async fn g7_an_apps_token_is_made_reused_and_renewed() {
    let standin = StandIn::start(Auth::App).await;
    let clock = clock();
    let credential = Credential::App {
        id: APP_ID,
        private_key_pem: APP_PRIVATE_KEY.as_bytes().to_vec(),
        installation_id: None,
    };
    assert!(!format!("{credential:?}").contains("PRIVATE"));
    let api = Api::new(&standin.url, credential, Arc::new(clock.clone())).unwrap();
    api.runners(&repo(), None).await.unwrap();
    api.runners(&repo(), None).await.unwrap();
    assert_eq!(
        standin.operations_called(),
        [
            "apps/get-repo-installation",
            "apps/create-installation-access-token",
            "actions/list-self-hosted-runners-for-repo",
            "actions/list-self-hosted-runners-for-repo",
        ]
    );
    // Within five minutes of its hour, the token is renewed before use.
    clock.advance(Duration::from_secs(56 * 60)).unwrap();
    api.runners(&repo(), None).await.unwrap();
    let calls = standin.operations_called();
    assert_eq!(
        calls[4..],
        [
            "apps/create-installation-access-token",
            "actions/list-self-hosted-runners-for-repo"
        ]
    );
    assert_eq!(standin.state.lock().tokens.len(), 2);
    standin.assert_no_violation();

    // A key that is not RSA PEM is refused when the client is made.
    let bad = Api::new(
        &standin.url,
        Credential::App {
            id: APP_ID,
            private_key_pem: b"not a key".to_vec(),
            installation_id: Some(1),
        },
        Arc::new(clock.clone()),
    )
    .unwrap_err();
    assert!(matches!(bad, ApiError::Malformed { .. }), "{bad:?}");
}

// G7: a rate limit (403 or 429, with Retry-After or X-RateLimit-Reset)
// blocks every call until it passes, without a request; a plain 403 is a
// refusal and 5xx is unavailable.
#[tokio::test]
async fn g7_rate_limits_block_calls_until_they_pass() {
    let (standin, api, clock) = token_client().await;
    assert_eq!(api.problem(), None, "no call, no problem");
    standin.state.lock().faults.push_back(Fault {
        status: 403,
        headers: vec![("retry-after", "30".to_owned())],
    });
    let limited = api.runners(&repo(), None).await.unwrap_err();
    assert!(
        api.problem().is_some_and(|p| p.contains("rate limit")),
        "G8: a rate limit makes the API unusable: {:?}",
        api.problem()
    );
    assert_eq!(
        limited,
        ApiError::RateLimited {
            retry_after: Duration::from_secs(30)
        }
    );
    let calls = standin.state.lock().calls.len();
    clock.advance(Duration::from_secs(10)).unwrap();
    let still = api.runners(&repo(), None).await.unwrap_err();
    assert_eq!(
        still,
        ApiError::RateLimited {
            retry_after: Duration::from_secs(20)
        }
    );
    assert_eq!(
        standin.state.lock().calls.len(),
        calls,
        "no request while blocked"
    );
    clock.advance(Duration::from_secs(20)).unwrap();
    api.runners(&repo(), None).await.unwrap();
    assert_eq!(api.problem(), None, "an answer clears it");

    let reset = clock
        .now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    standin.state.lock().faults.push_back(Fault {
        status: 429,
        headers: vec![
            ("x-ratelimit-remaining", "0".to_owned()),
            ("x-ratelimit-reset", reset.to_string()),
        ],
    });
    let limited = api.runners(&repo(), None).await.unwrap_err();
    assert!(
        matches!(limited, ApiError::RateLimited { retry_after } if retry_after > Duration::from_secs(110) && retry_after <= Duration::from_secs(120)),
        "{limited:?}"
    );
    clock.advance(Duration::from_secs(121)).unwrap();

    standin.state.lock().faults.push_back(Fault {
        status: 403,
        headers: vec![],
    });
    let refused = api.runners(&repo(), None).await.unwrap_err();
    assert!(
        matches!(refused, ApiError::Refused { status: 403, .. }),
        "{refused:?}"
    );
    assert_eq!(
        api.problem(),
        None,
        "a refusal of one call is the API at work"
    );
    standin.state.lock().faults.push_back(Fault {
        status: 401,
        headers: vec![],
    });
    api.runners(&repo(), None).await.unwrap_err();
    assert!(
        api.problem().is_some_and(|p| p.contains("401")),
        "credentials refused: {:?}",
        api.problem()
    );
    standin.state.lock().faults.push_back(Fault {
        status: 422,
        headers: vec![],
    });
    api.runners(&repo(), None).await.unwrap_err();
    assert_eq!(api.problem(), None, "a 422 is the API at work");
    standin.state.lock().faults.push_back(Fault {
        status: 503,
        headers: vec![],
    });
    let down = api.runners(&repo(), None).await.unwrap_err();
    assert!(matches!(down, ApiError::Unavailable { .. }), "{down:?}");
    assert_eq!(api.problem(), Some(down.to_string()));
    api.runners(&repo(), None).await.unwrap();
    assert_eq!(api.problem(), None);
    standin.assert_no_violation();

    // Nothing listens: unavailable, counted as a transport failure.
    let gone = Api::new(
        "http://127.0.0.1:9",
        Credential::Token("t".to_owned()),
        Arc::new(clock.clone()),
    )
    .unwrap();
    let error = gone.runners(&repo(), None).await.unwrap_err();
    assert!(matches!(error, ApiError::Unavailable { .. }), "{error:?}");
    assert!(
        error.to_string().contains("onnect"),
        "the cause is said: {error}"
    );
    assert_eq!(gone.answers().get("transport"), Some(&1));
    assert_eq!(gone.problem(), Some(error.to_string()));
}

// G7, H14: the queued runs are a search, not an inventory: past the pages
// billet reads, `runs` refuses, while `newest_runs` answers the newest runs
// read and says the listing is not whole.
#[tokio::test]
async fn g7_a_search_of_queued_runs_answers_the_newest_past_the_pages() {
    let (standin, api, _clock) = token_client().await;
    let ids: Vec<u64> = (1..=1_050).rev().collect();
    standin
        .state
        .lock()
        .runs_by_status
        .insert("queued".to_owned(), ids.clone());
    let error = api.runs("octo-org", "app", "queued").await.unwrap_err();
    assert!(matches!(error, ApiError::Malformed { .. }), "{error:?}");
    let (newest, whole) = api.newest_runs("octo-org", "app", "queued").await.unwrap();
    assert!(!whole);
    assert_eq!(newest, ids[..1_000]);
    standin
        .state
        .lock()
        .runs_by_status
        .insert("queued".to_owned(), ids[..250].to_vec());
    let (all, whole) = api.newest_runs("octo-org", "app", "queued").await.unwrap();
    assert!(whole);
    assert_eq!(all, ids[..250]);
    assert_eq!(
        api.runs("octo-org", "app", "queued").await.unwrap(),
        ids[..250]
    );
    standin.assert_no_violation();
}

// G7: a listing is read page by page to its end; one longer than the pages
// billet reads is an error, never a short answer.
#[tokio::test]
async fn g7_listings_are_read_whole_or_refused() {
    let (standin, api, _clock) = token_client().await;
    {
        let mut state = standin.state.lock();
        for id in 0..250 {
            state
                .runners
                .insert(1_000 + id, (format!("r{id}"), vec!["x".to_owned()], false));
        }
    }
    assert_eq!(api.runners(&repo(), None).await.unwrap().len(), 250);
    assert_eq!(standin.operations_called().len(), 3);
    // A count ahead of the items: the short page ends the listing.
    standin.state.lock().total_bias = 5;
    assert_eq!(api.runners(&repo(), None).await.unwrap().len(), 250);
    let pages = standin.operations_called().len();
    assert_eq!(pages, 6);
    standin.state.lock().total_bias = 0;
    {
        let mut state = standin.state.lock();
        for id in 250..1_000 {
            state
                .runners
                .insert(1_000 + id, (format!("r{id}"), vec!["x".to_owned()], false));
        }
    }
    assert_eq!(api.runners(&repo(), None).await.unwrap().len(), 1_000);
    assert_eq!(standin.operations_called().len(), pages + 10);
    standin
        .state
        .lock()
        .runners
        .insert(5_000, ("one-more".to_owned(), vec![], false));
    let error = api.runners(&repo(), None).await.unwrap_err();
    assert!(matches!(error, ApiError::Malformed { .. }), "{error:?}");
    standin.assert_no_violation();
}

// G7: a sweep of registrations (which infers nothing from a runner's
// absence) is shown the runners of the pages billet reads, and told
// whether that was the whole listing; an inventory is refused instead.
#[tokio::test]
async fn g7_a_sweep_of_registrations_is_shown_the_pages_it_reads() {
    let (standin, api, _clock) = token_client().await;
    let names = |runners: &[billet_github::Runner]| -> Vec<String> {
        runners.iter().map(|runner| runner.name.clone()).collect()
    };
    {
        let mut state = standin.state.lock();
        for id in 0..1_050u64 {
            state.runners.insert(
                1_000 + id,
                (format!("r{id:04}"), vec!["x".to_owned()], false),
            );
        }
    }
    let (shown, whole) = api.runners_shown(&repo()).await.unwrap();
    assert!(!whole);
    let expected: Vec<String> = (0..1_000).map(|id| format!("r{id:04}")).collect();
    assert_eq!(names(&shown), expected);
    assert_eq!(standin.operations_called().len(), 10);
    assert!(matches!(
        api.runners(&repo(), None).await.unwrap_err(),
        ApiError::Malformed { .. }
    ));
    standin
        .state
        .lock()
        .runners
        .retain(|id, _| *id < 1_000 + 250);
    let (shown, whole) = api.runners_shown(&repo()).await.unwrap();
    assert!(whole);
    assert_eq!(names(&shown), expected[..250]);
    assert_eq!(
        names(&api.runners(&repo(), None).await.unwrap()),
        expected[..250]
    );
    standin.assert_no_violation();
}
