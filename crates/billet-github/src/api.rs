//! The client of GitHub's REST API: the calls billet makes (JIT configs,
//! runners, jobs, runs, an App's installation tokens), each bounded in time,
//! authenticated by a token or a GitHub App, and backing off while GitHub
//! says its rate limit is spent.
//!
//! A rate limit answer (`403` or `429` with `Retry-After`, or with
//! `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset`) blocks every call
//! until the time it names: a call made before then answers
//! [`ApiError::RateLimited`] at once, without a request.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Not as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::Clock;
use parking_lot::Mutex;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, USER_AGENT};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::trust::RunFacts;

/// How long one call may take, connection included, before it is
/// [`ApiError::Unavailable`].
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long before an App's installation token expires billet makes a new
/// one (they last an hour).
pub const TOKEN_RENEWAL: Duration = Duration::from_secs(5 * 60);
/// The most pages of 100 one listing reads (runners, runs, a run's jobs): a
/// listing past that is an error, not a short answer.
pub const MAX_PAGES: u32 = 10;
/// How long a rate limit answer without a time to wait blocks calls.
pub const DEFAULT_BACKOFF: Duration = Duration::from_secs(60);
/// The longest a rate limit answer may block calls, whatever it says.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60 * 60);
/// How many items a listing's page asks for (GitHub's most).
pub const PER_PAGE: usize = 100;
/// The API version billet speaks (`X-GitHub-Api-Version`).
pub const API_VERSION: &str = "2022-11-28";

/// Where runners are registered: an organization or a repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// An organization, by login.
    Org(String),
    /// A repository.
    Repository {
        /// The owner's login.
        owner: String,
        /// The repository's name.
        name: String,
    },
}

impl Scope {
    /// The path of the scope's API: `/orgs/NAME` or `/repos/OWNER/NAME`.
    fn path(&self) -> String {
        match self {
            Scope::Org(org) => format!("/orgs/{}", segment(org)),
            Scope::Repository { owner, name } => {
                format!("/repos/{}/{}", segment(owner), segment(name))
            }
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Org(org) => write!(f, "org {org}"),
            Scope::Repository { owner, name } => write!(f, "repository {owner}/{name}"),
        }
    }
}

/// A path segment, percent-encoded: every byte but ASCII letters, digits,
/// `-`, `_` and `.`.
fn segment(text: &str) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.');
    percent_encoding::utf8_percent_encode(text, KEEP).to_string()
}

/// How billet authenticates to the API.
pub enum Credential {
    /// A token (a fine-grained or classic personal access token, or any
    /// token the operator makes).
    Token(String),
    /// A GitHub App: its id and private key (PEM); the installation's id,
    /// when known (else discovered from the first scope asked of it).
    App {
        /// The App's id.
        id: u64,
        /// Its private key, PEM.
        private_key_pem: Vec<u8>,
        /// The installation's id, if known.
        installation_id: Option<u64>,
    },
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Token(_) => f.write_str("Token(<redacted>)"),
            Credential::App {
                id,
                installation_id,
                ..
            } => f
                .debug_struct("App")
                .field("id", id)
                .field("installation_id", installation_id)
                .finish_non_exhaustive(),
        }
    }
}

/// Why a call did not give its answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// GitHub's rate limit is spent: no call is made until `retry_after`
    /// has passed.
    #[error("GitHub's rate limit is spent: calls resume in {}s", retry_after.as_secs())]
    RateLimited {
        /// How long until calls resume.
        retry_after: Duration,
    },
    /// The thing asked for does not exist (`404`), or this credential may
    /// not see it.
    #[error("GitHub answered 404: {what} is not found (or this credential may not see it)")]
    NotFound {
        /// What was asked for.
        what: String,
    },
    /// GitHub refused the call (a `4xx` other than a rate limit or `404`):
    /// its status and message.
    #[error("GitHub refused {what}: {status} {message}")]
    Refused {
        /// What was asked.
        what: String,
        /// The HTTP status.
        status: u16,
        /// GitHub's `message`, or the answer's start.
        message: String,
    },
    /// GitHub could not be reached or did not answer in time, or answered
    /// `5xx`.
    #[error("GitHub's API is unavailable for {what}: {reason}")]
    Unavailable {
        /// What was asked.
        what: String,
        /// Why.
        reason: String,
    },
    /// The answer is not what GitHub documents, or the credential cannot be
    /// used (a private key that is not RSA PEM).
    #[error("GitHub's answer to {what} cannot be read: {reason}")]
    Malformed {
        /// What was asked.
        what: String,
        /// Why.
        reason: String,
    },
}

/// A runner's just-in-time configuration: a single-use registration. Its
/// encoded form holds the runner's credentials: `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct JitConfig {
    /// The runner's id on GitHub.
    pub runner_id: u64,
    /// Its name, as registered.
    pub runner_name: String,
    /// Its labels as GitHub registered them (read back, never assumed).
    pub labels: Vec<String>,
    encoded: String,
}

impl JitConfig {
    /// The encoded configuration to hand the runner
    /// (`ACTIONS_RUNNER_INPUT_JITCONFIG`): a secret.
    pub fn encoded(&self) -> &str {
        &self.encoded
    }
}

impl fmt::Debug for JitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JitConfig")
            .field("runner_id", &self.runner_id)
            .field("runner_name", &self.runner_name)
            .field("labels", &self.labels)
            .field("encoded", &"<redacted>")
            .finish()
    }
}

/// A self-hosted runner, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Runner {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// `online` or `offline`.
    pub status: String,
    /// Whether it runs a job now.
    pub busy: bool,
}

/// A job, as `GET .../actions/jobs/{id}` or a run's listing shows it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct JobStatus {
    /// Its id.
    pub id: u64,
    /// Its run.
    pub run_id: u64,
    /// `queued`, `in_progress`, `completed`, `waiting`, ...
    pub status: String,
    /// How it ended, once completed.
    #[serde(default)]
    pub conclusion: Option<String>,
    /// The runner that took it, once one did.
    #[serde(default)]
    pub runner_name: Option<String>,
    /// Its labels.
    #[serde(default)]
    pub labels: Vec<String>,
}

/// A workflow run, as `GET .../actions/runs/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRun {
    /// Its id.
    pub id: u64,
    /// `queued`, `in_progress`, `completed`, ...
    pub status: Option<String>,
    /// How it ended (`startup_failure` among others), once it did.
    pub conclusion: Option<String>,
    /// Where its code comes from, or why that cannot be read.
    pub facts: Result<RunFacts, String>,
}

/// What a runner's removal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    /// This call removed it.
    Removed,
    /// GitHub holds no such runner (already gone).
    Absent,
}

/// An App's installation token and when it expires.
struct InstallationToken {
    token: String,
    expires_at: SystemTime,
}

/// The App's side of a client: its key and its installation's token.
struct App {
    id: u64,
    key: jsonwebtoken::EncodingKey,
    installation_id: Mutex<Option<u64>>,
    token: tokio::sync::Mutex<Option<InstallationToken>>,
}

/// The client of GitHub's REST API. Cheap to share (`Arc` inside).
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    app: Option<App>,
    clock: Arc<dyn Clock>,
    /// No call before this (a rate limit answer said so).
    blocked_until: Mutex<Option<SystemTime>>,
    /// Answers by status (`transport` for none), for the metrics.
    answers: Mutex<BTreeMap<String, u64>>,
    /// The last `X-RateLimit-Remaining` GitHub sent.
    remaining: Mutex<Option<u64>>,
    /// Why the API could not be used at the last call, if it could not.
    problem: Mutex<Option<String>>,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.inner.base)
            .field("app", &self.inner.app.as_ref().map(|app| app.id))
            .finish_non_exhaustive()
    }
}

/// The JWT claims an App signs (RS256).
#[derive(serde::Serialize)]
struct Claims {
    iat: u64,
    exp: u64,
    iss: String,
}

/// A GitHub error answer's message.
#[derive(Deserialize)]
struct Message {
    message: String,
}

impl Api {
    /// A client of the API at `base` (such as `https://api.github.com`, no
    /// trailing slash), authenticated by `credential`, timed by `clock` (an
    /// App's JWT and token renewal, backoff).
    pub fn new(base: &str, credential: Credential, clock: Arc<dyn Clock>) -> Result<Api, ApiError> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(CALL_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| ApiError::Unavailable {
                what: "the HTTP client".to_owned(),
                reason: error.to_string(),
            })?;
        let (token, app) = match credential {
            Credential::Token(token) => (Some(token), None),
            Credential::App {
                id,
                private_key_pem,
                installation_id,
            } => {
                let key =
                    jsonwebtoken::EncodingKey::from_rsa_pem(&private_key_pem).map_err(|error| {
                        ApiError::Malformed {
                            what: format!("GitHub App {id}'s private key"),
                            reason: format!("not an RSA private key in PEM: {error}"),
                        }
                    })?;
                let app = App {
                    id,
                    key,
                    installation_id: Mutex::new(installation_id),
                    token: tokio::sync::Mutex::new(None),
                };
                (None, Some(app))
            }
        };
        Ok(Api {
            inner: Arc::new(Inner {
                http,
                base: base.trim_end_matches('/').to_owned(),
                token,
                app,
                clock,
                blocked_until: Mutex::new(None),
                answers: Mutex::new(BTreeMap::new()),
                remaining: Mutex::new(None),
                problem: Mutex::new(None),
            }),
        })
    }

    /// How many answers of each status this client has had (`transport`
    /// for calls that had none), for `billet_github_api_requests_total`.
    pub fn answers(&self) -> BTreeMap<String, u64> {
        self.inner.answers.lock().clone()
    }

    /// Why GitHub's API could not be used at the last call that reached
    /// for it: no answer, a server error, credentials refused (`401`), or a
    /// rate limit still blocking calls. `None` before any call and after
    /// any other answer (a `404` or `422` is the API at work).
    pub fn problem(&self) -> Option<String> {
        self.inner.problem.lock().clone()
    }

    /// The last `X-RateLimit-Remaining` GitHub sent, if any.
    pub fn rate_limit_remaining(&self) -> Option<u64> {
        *self.inner.remaining.lock()
    }

    /// Asks GitHub for a just-in-time runner configuration at `scope`: a
    /// runner named `name` with `labels`, in runner group `runner_group_id`
    /// (1, the default group, for a repository).
    pub async fn generate_jitconfig(
        &self,
        scope: &Scope,
        name: &str,
        runner_group_id: u64,
        labels: &[String],
    ) -> Result<JitConfig, ApiError> {
        #[derive(Deserialize)]
        struct Label {
            name: String,
        }
        #[derive(Deserialize)]
        struct Registered {
            id: u64,
            name: String,
            labels: Vec<Label>,
        }
        #[derive(Deserialize)]
        struct Answer {
            runner: Registered,
            encoded_jit_config: String,
        }
        let what = format!("a JIT config for runner {name:?} at {scope}");
        let body = json!({
            "name": name,
            "runner_group_id": runner_group_id,
            "labels": labels,
        });
        let path = format!("{}/actions/runners/generate-jitconfig", scope.path());
        let answer: Answer = self
            .call(Method::POST, &path, &[], Some(body), scope, &what)
            .await?;
        Ok(JitConfig {
            runner_id: answer.runner.id,
            runner_name: answer.runner.name,
            labels: answer.runner.labels.into_iter().map(|l| l.name).collect(),
            encoded: answer.encoded_jit_config,
        })
    }

    /// The runners registered at `scope`, every page (at most
    /// [`MAX_PAGES`] of 100), optionally only those named `name`: more is
    /// an error, never a short answer.
    pub async fn runners(
        &self,
        scope: &Scope,
        name: Option<&str>,
    ) -> Result<Vec<Runner>, ApiError> {
        let (runners, whole) = self.runners_listed(scope, name).await?;
        if !whole {
            return Err(too_long(&format!("the runners of {scope}")));
        }
        Ok(runners)
    }

    /// [`runners`](Api::runners) for a search rather than an inventory:
    /// past [`MAX_PAGES`] pages, the runners of the pages read, and
    /// `false` (the listing is not whole). For a caller that infers
    /// nothing from a runner's absence: one that acts on each runner it is
    /// shown (a sweep of orphan registrations).
    pub async fn runners_shown(&self, scope: &Scope) -> Result<(Vec<Runner>, bool), ApiError> {
        self.runners_listed(scope, None).await
    }

    /// The runners of `scope`'s listing's first [`MAX_PAGES`] pages, and
    /// whether they are all it has.
    async fn runners_listed(
        &self,
        scope: &Scope,
        name: Option<&str>,
    ) -> Result<(Vec<Runner>, bool), ApiError> {
        #[derive(Deserialize)]
        struct Page {
            total_count: u64,
            runners: Vec<Runner>,
        }
        let what = format!("the runners of {scope}");
        let path = format!("{}/actions/runners", scope.path());
        let query: Vec<(&str, String)> = name
            .map(|name| ("name", name.to_owned()))
            .into_iter()
            .collect();
        self.paged_up_to(&path, &query, scope, &what, |page: Page| {
            (page.total_count, page.runners)
        })
        .await
    }

    /// Removes runner `id` from `scope`; [`Removed::Absent`] when GitHub
    /// holds no such runner.
    pub async fn delete_runner(&self, scope: &Scope, id: u64) -> Result<Removed, ApiError> {
        let what = format!("the removal of runner {id} from {scope}");
        let path = format!("{}/actions/runners/{id}", scope.path());
        match self
            .call_raw(Method::DELETE, &path, &[], None, scope, &what)
            .await
        {
            Ok(_) => Ok(Removed::Removed),
            Err(ApiError::NotFound { .. }) => Ok(Removed::Absent),
            Err(error) => Err(error),
        }
    }

    /// Job `job_id` of repository `owner/repo`.
    pub async fn job(&self, owner: &str, repo: &str, job_id: u64) -> Result<JobStatus, ApiError> {
        let scope = repository(owner, repo);
        let what = format!("job {job_id} of {owner}/{repo}");
        let path = format!("{}/actions/jobs/{job_id}", scope.path());
        self.call(Method::GET, &path, &[], None, &scope, &what)
            .await
    }

    /// Workflow run `run_id` of repository `owner/repo`, with the facts
    /// its jobs' trust is lowered by (G4).
    pub async fn run(&self, owner: &str, repo: &str, run_id: u64) -> Result<WorkflowRun, ApiError> {
        #[derive(Deserialize)]
        struct Head {
            id: u64,
            #[serde(default)]
            status: Option<String>,
            #[serde(default)]
            conclusion: Option<String>,
        }
        let scope = repository(owner, repo);
        let what = format!("run {run_id} of {owner}/{repo}");
        let path = format!("{}/actions/runs/{run_id}", scope.path());
        let bytes = self
            .call_raw(Method::GET, &path, &[], None, &scope, &what)
            .await?;
        let head: Head = serde_json::from_slice(&bytes).map_err(|error| ApiError::Malformed {
            what: what.clone(),
            reason: error.to_string(),
        })?;
        Ok(WorkflowRun {
            id: head.id,
            status: head.status,
            conclusion: head.conclusion,
            facts: RunFacts::from_run(&bytes),
        })
    }

    /// The ids of `owner/repo`'s runs whose status is `status` (`queued` or
    /// `in_progress`), newest first, at most [`MAX_PAGES`] pages of 100:
    /// more is an error, never a short answer.
    pub async fn runs(&self, owner: &str, repo: &str, status: &str) -> Result<Vec<u64>, ApiError> {
        let (runs, whole) = self.newest_runs(owner, repo, status).await?;
        if !whole {
            return Err(too_long(&format!("the {status} runs of {owner}/{repo}")));
        }
        Ok(runs)
    }

    /// [`runs`](Api::runs) for a search rather than an inventory: past
    /// [`MAX_PAGES`] pages, the newest runs read, and `false` (the listing
    /// is not whole). For a caller that infers nothing from a run's
    /// absence: one that looks for what a lost delivery said.
    pub async fn newest_runs(
        &self,
        owner: &str,
        repo: &str,
        status: &str,
    ) -> Result<(Vec<u64>, bool), ApiError> {
        #[derive(Deserialize)]
        struct Id {
            id: u64,
        }
        #[derive(Deserialize)]
        struct Page {
            total_count: u64,
            workflow_runs: Vec<Id>,
        }
        let scope = repository(owner, repo);
        let what = format!("the {status} runs of {owner}/{repo}");
        let path = format!("{}/actions/runs", scope.path());
        let query = [("status", status.to_owned())];
        let (runs, whole) = self
            .paged_up_to(&path, &query, &scope, &what, |page: Page| {
                (page.total_count, page.workflow_runs)
            })
            .await?;
        Ok((runs.into_iter().map(|run| run.id).collect(), whole))
    }

    /// The jobs of run `run_id` of `owner/repo` (its latest attempt), at
    /// most [`MAX_PAGES`] pages of 100.
    pub async fn run_jobs(
        &self,
        owner: &str,
        repo: &str,
        run_id: u64,
    ) -> Result<Vec<JobStatus>, ApiError> {
        #[derive(Deserialize)]
        struct Page {
            total_count: u64,
            jobs: Vec<JobStatus>,
        }
        let scope = repository(owner, repo);
        let what = format!("the jobs of run {run_id} of {owner}/{repo}");
        let path = format!("{}/actions/runs/{run_id}/jobs", scope.path());
        self.paged(&path, &[], &scope, &what, |page: Page| {
            (page.total_count, page.jobs)
        })
        .await
    }

    /// Every item of a listing, page by page of [`PER_PAGE`] (`query` and
    /// the path as given); past [`MAX_PAGES`] pages, an error rather than a
    /// short answer.
    async fn paged<P, T>(
        &self,
        path: &str,
        query: &[(&str, String)],
        scope: &Scope,
        what: &str,
        items: impl Fn(P) -> (u64, Vec<T>),
    ) -> Result<Vec<T>, ApiError>
    where
        P: serde::de::DeserializeOwned,
    {
        let (all, whole) = self.paged_up_to(path, query, scope, what, items).await?;
        if !whole {
            return Err(too_long(what));
        }
        Ok(all)
    }

    /// The items of a listing's first [`MAX_PAGES`] pages, and whether they
    /// are all it has.
    async fn paged_up_to<P, T>(
        &self,
        path: &str,
        query: &[(&str, String)],
        scope: &Scope,
        what: &str,
        items: impl Fn(P) -> (u64, Vec<T>),
    ) -> Result<(Vec<T>, bool), ApiError>
    where
        P: serde::de::DeserializeOwned,
    {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut asked = query.to_vec();
            asked.push(("per_page", PER_PAGE.to_string()));
            asked.push(("page", page.to_string()));
            let (total, found) = items(
                self.call(Method::GET, path, &asked, None, scope, what)
                    .await?,
            );
            let short = found.len() < PER_PAGE;
            all.extend(found);
            if short || all.len() as u64 >= total {
                return Ok((all, true));
            }
        }
        Ok((all, false))
    }

    /// A call whose answer is JSON of type `T`.
    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<serde_json::Value>,
        scope: &Scope,
        what: &str,
    ) -> Result<T, ApiError> {
        let bytes = self
            .call_raw(method, path, query, body, scope, what)
            .await?;
        serde_json::from_slice(&bytes).map_err(|error| ApiError::Malformed {
            what: what.to_owned(),
            reason: error.to_string(),
        })
    }

    /// A call, authenticated as the installation (or by the token), whose
    /// answer's body is answered on a `2xx`.
    async fn call_raw(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<serde_json::Value>,
        scope: &Scope,
        what: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let auth = match &self.inner.token {
            Some(token) => format!("Bearer {token}"),
            None => format!("Bearer {}", self.installation_token(scope).await?),
        };
        self.send(method, path, query, body, &auth, what).await
    }

    /// One request, with the rate limit's block kept.
    async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<serde_json::Value>,
        auth: &str,
        what: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let answer = self.send_once(method, path, query, body, auth, what).await;
        let problem = match &answer {
            Err(
                error @ (ApiError::Unavailable { .. }
                | ApiError::RateLimited { .. }
                | ApiError::Refused { status: 401, .. }),
            ) => Some(error.to_string()),
            _ => None,
        };
        *self.inner.problem.lock() = problem;
        answer
    }

    /// [`send`](Api::send), before its answer is judged.
    async fn send_once(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<serde_json::Value>,
        auth: &str,
        what: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let now = self.inner.clock.now();
        if let Some(until) = *self.inner.blocked_until.lock()
            && let Ok(left) = until.duration_since(now)
            && !left.is_zero()
        {
            return Err(ApiError::RateLimited { retry_after: left });
        }
        let mut request = self
            .inner
            .http
            .request(method, format!("{}{path}", self.inner.base))
            .header(ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .header(USER_AGENT, concat!("billet/", env!("CARGO_PKG_VERSION")))
            .header(AUTHORIZATION, auth);
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let answer = match request.send().await {
            Ok(answer) => answer,
            Err(error) => {
                self.count("transport");
                return Err(ApiError::Unavailable {
                    what: what.to_owned(),
                    reason: error_text(&error),
                });
            }
        };
        let status = answer.status();
        self.count(status.as_str());
        let headers = answer.headers().clone();
        if let Some(remaining) = header_number(&headers, "x-ratelimit-remaining") {
            *self.inner.remaining.lock() = Some(remaining);
        }
        let bytes = answer
            .bytes()
            .await
            .map_err(|error| ApiError::Unavailable {
                what: what.to_owned(),
                reason: error_text(&error),
            })?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        if let Some(wait) = rate_limited(status, &headers, now) {
            *self.inner.blocked_until.lock() = now.checked_add(wait);
            return Err(ApiError::RateLimited { retry_after: wait });
        }
        let message = serde_json::from_slice::<Message>(&bytes)
            .map(|m| m.message)
            .unwrap_or_else(|_| {
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned()
            });
        Err(match status {
            StatusCode::NOT_FOUND => ApiError::NotFound {
                what: what.to_owned(),
            },
            status if status.is_server_error() => ApiError::Unavailable {
                what: what.to_owned(),
                reason: format!("{} {message}", status.as_u16()),
            },
            status => ApiError::Refused {
                what: what.to_owned(),
                status: status.as_u16(),
                message,
            },
        })
    }

    fn count(&self, status: &str) {
        *self
            .inner
            .answers
            .lock()
            .entry(status.to_owned())
            .or_insert(0) += 1;
    }

    /// The App's installation token, made or renewed when it is missing or
    /// expires within [`TOKEN_RENEWAL`]. The installation's id, when not
    /// configured, is asked of `scope`.
    async fn installation_token(&self, scope: &Scope) -> Result<String, ApiError> {
        let Some(app) = &self.inner.app else {
            unreachable!("a client without a token has an App");
        };
        let mut held = app.token.lock().await;
        let now = self.inner.clock.now();
        if let Some(token) = held.as_ref()
            && !needs_renewal(token.expires_at, now)
        {
            return Ok(token.token.clone());
        }
        let jwt = format!("Bearer {}", self.jwt(app)?);
        let configured = *app.installation_id.lock();
        let installation = match configured {
            Some(id) => id,
            None => {
                #[derive(Deserialize)]
                struct Installation {
                    id: u64,
                }
                let what = format!("GitHub App {}'s installation on {scope}", app.id);
                let bytes = self
                    .send(
                        Method::GET,
                        &format!("{}/installation", scope.path()),
                        &[],
                        None,
                        &jwt,
                        &what,
                    )
                    .await?;
                let found: Installation =
                    serde_json::from_slice(&bytes).map_err(|error| ApiError::Malformed {
                        what,
                        reason: error.to_string(),
                    })?;
                *app.installation_id.lock() = Some(found.id);
                found.id
            }
        };
        #[derive(Deserialize)]
        struct Token {
            token: String,
            expires_at: String,
        }
        let what = format!("an installation token of GitHub App {}", app.id);
        let path = format!("/app/installations/{installation}/access_tokens");
        let bytes = self
            .send(Method::POST, &path, &[], None, &jwt, &what)
            .await?;
        let token: Token = serde_json::from_slice(&bytes).map_err(|error| ApiError::Malformed {
            what: what.clone(),
            reason: error.to_string(),
        })?;
        let expires_at = humantime::parse_rfc3339_weak(&token.expires_at).map_err(|error| {
            ApiError::Malformed {
                what,
                reason: format!("expires_at {:?}: {error}", token.expires_at),
            }
        })?;
        let value = token.token.clone();
        *held = Some(InstallationToken {
            token: token.token,
            expires_at,
        });
        Ok(value)
    }

    /// The App's JWT: issued a minute ago (clock skew), good for nine
    /// minutes more (GitHub allows ten).
    fn jwt(&self, app: &App) -> Result<String, ApiError> {
        let now = self
            .inner
            .clock
            .now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let claims = claims(app.id, now);
        let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        jsonwebtoken::encode(&header, &claims, &app.key).map_err(|error| ApiError::Malformed {
            what: format!("GitHub App {}'s JWT", app.id),
            reason: error.to_string(),
        })
    }
}

/// An App's JWT claims at `now` (seconds since the epoch): issued a
/// minute back (clock skew), expiring nine minutes on (GitHub allows ten
/// after issue).
fn claims(app: u64, now: u64) -> Claims {
    Claims {
        iat: now.saturating_sub(60),
        exp: now + 9 * 60,
        iss: app.to_string(),
    }
}

/// Whether an installation token expiring at `expires_at` is to be made
/// anew at `now`: it has [`TOKEN_RENEWAL`] or less left.
fn needs_renewal(expires_at: SystemTime, now: SystemTime) -> bool {
    expires_at
        .duration_since(now)
        .is_ok_and(|left| left > TOKEN_RENEWAL)
        .not()
}

/// The repository scope `owner/repo`.
fn repository(owner: &str, repo: &str) -> Scope {
    Scope::Repository {
        owner: owner.to_owned(),
        name: repo.to_owned(),
    }
}

/// A transport error's text with its causes (the URL it names holds the
/// path and query alone: credentials travel in headers).
fn error_text(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A header's value as a whole number.
fn header_number(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// The error of a listing longer than [`MAX_PAGES`] pages of [`PER_PAGE`].
fn too_long(what: &str) -> ApiError {
    ApiError::Malformed {
        what: what.to_owned(),
        reason: format!("more than {MAX_PAGES} pages of {PER_PAGE}"),
    }
}

/// How long to wait, when `status` and `headers` say the rate limit is
/// spent: a `403` or `429` with `Retry-After` (seconds), or with
/// `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset` (epoch seconds); a
/// `429` without either waits [`DEFAULT_BACKOFF`]. At most [`MAX_BACKOFF`].
pub(crate) fn rate_limited(
    status: StatusCode,
    headers: &HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let wait = if let Some(seconds) = header_number(headers, "retry-after") {
        Duration::from_secs(seconds)
    } else if header_number(headers, "x-ratelimit-remaining") == Some(0) {
        let reset = header_number(headers, "x-ratelimit-reset")
            .map(|at| SystemTime::UNIX_EPOCH + Duration::from_secs(at));
        match reset {
            Some(reset) => reset.duration_since(now).unwrap_or(Duration::from_secs(1)),
            None => DEFAULT_BACKOFF,
        }
    } else if status == StatusCode::TOO_MANY_REQUESTS {
        DEFAULT_BACKOFF
    } else {
        // A plain 403: a permission refused, not a rate limit.
        return None;
    };
    Some(wait.clamp(Duration::from_secs(1), MAX_BACKOFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A scope's path encodes what is not a plain name; it prints as people
    // name it.
    #[test]
    fn scopes_name_their_api_path() {
        let repo = Scope::Repository {
            owner: "octo-org".to_owned(),
            name: "a b/c.d_e".to_owned(),
        };
        assert_eq!(repo.path(), "/repos/octo-org/a%20b%2Fc.d_e");
        assert_eq!(repo.to_string(), "repository octo-org/a b/c.d_e");
        let org = Scope::Org("octo-org".to_owned());
        assert_eq!(org.path(), "/orgs/octo-org");
        assert_eq!(org.to_string(), "org octo-org");
    }

    // Secrets are never printed: a token, a private key, a JIT config.
    #[test]
    fn debug_never_prints_a_secret() {
        let token = format!("{:?}", Credential::Token("ghp_secret".to_owned()));
        assert_eq!(token, "Token(<redacted>)");
        let app = Credential::App {
            id: 7,
            private_key_pem: b"-----BEGIN PRIVATE KEY-----".to_vec(),
            installation_id: Some(9),
        };
        assert_eq!(
            format!("{app:?}"),
            "App { id: 7, installation_id: Some(9), .. }"
        );
        let jit = JitConfig {
            runner_id: 3,
            runner_name: "r".to_owned(),
            labels: vec!["x".to_owned()],
            encoded: "secret".to_owned(),
        };
        assert_eq!(
            format!("{jit:?}"),
            r#"JitConfig { runner_id: 3, runner_name: "r", labels: ["x"], encoded: "<redacted>" }"#
        );
        let api = Api::new(
            "http://127.0.0.1:9/",
            Credential::Token("ghp_secret".to_owned()),
            Arc::new(billet_clock::ManualClock::new(SystemTime::UNIX_EPOCH)),
        )
        .unwrap();
        assert_eq!(
            format!("{api:?}"),
            r#"Api { base: "http://127.0.0.1:9", app: None, .. }"#
        );
    }

    // G7: the JWT lives ten minutes from its issue, issued a minute back;
    // a token is renewed once five minutes or less are left.
    #[test]
    fn g7_jwt_claims_and_token_renewal() {
        let claims = claims(42, 10_000);
        assert_eq!(
            (claims.iat, claims.exp, claims.iss.as_str()),
            (9_940, 10_540, "42")
        );
        assert_eq!(super::claims(1, 30).iat, 0);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        let at = |secs: u64| now + Duration::from_secs(secs);
        assert!(!needs_renewal(at(301), now));
        assert!(needs_renewal(at(300), now));
        assert!(needs_renewal(at(10), now));
        assert!(needs_renewal(now - Duration::from_secs(1), now));
        assert_eq!(TOKEN_RENEWAL, Duration::from_secs(300));
    }

    // G7: a wait is at least a second and at most an hour, whatever the
    // answer says; a plain 403 is no rate limit.
    #[test]
    fn g7_rate_limit_waits_are_bounded() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let forbidden = StatusCode::FORBIDDEN;
        let many = StatusCode::TOO_MANY_REQUESTS;
        assert_eq!(
            rate_limited(forbidden, &headers(&[("retry-after", "7200")]), now),
            Some(MAX_BACKOFF)
        );
        assert_eq!(MAX_BACKOFF, Duration::from_secs(3600));
        assert_eq!(
            rate_limited(many, &headers(&[("retry-after", "0")]), now),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            rate_limited(many, &headers(&[]), now),
            Some(DEFAULT_BACKOFF)
        );
        assert_eq!(rate_limited(forbidden, &headers(&[]), now), None);
        assert_eq!(
            rate_limited(StatusCode::OK, &headers(&[("retry-after", "5")]), now),
            None
        );
        let spent = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "1000030"),
        ]);
        assert_eq!(
            rate_limited(forbidden, &spent, now),
            Some(Duration::from_secs(30))
        );
        let no_reset = headers(&[("x-ratelimit-remaining", "0")]);
        assert_eq!(
            rate_limited(forbidden, &no_reset, now),
            Some(DEFAULT_BACKOFF)
        );
        let past = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "10")]);
        assert_eq!(
            rate_limited(forbidden, &past, now),
            Some(Duration::from_secs(1))
        );
    }
}
