//! The simulated GitHub's REST API on loopback: the operations billet
//! calls, routed and checked by GitHub's own description of each
//! (`billet-github`'s `testdata/octokit-openapi`, kept with its source and
//! licence), answered from each operation's example changed where the
//! state says. A call the description does not allow is answered `404` or
//! `422` and recorded as a violation, which fails the run.
//!
//! Authentication is a token: the one the deployment's `token_file` holds
//! ([`TOKEN`]); any other is `401`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::{Registration, State, Status, Template};

/// GitHub's description of the operations billet calls.
const OPERATIONS: &str =
    include_str!("../../../billet-github/testdata/octokit-openapi/operations.json");

/// The token every deployment's `token_file` holds.
pub const TOKEN: &str = "ghp_the-harness-token-0123456789";

/// The most items a listing answers per page, as GitHub's.
const MAX_PER_PAGE: usize = 100;

/// One operation of the description.
#[derive(Debug)]
struct Operation {
    method: Method,
    /// The path template's segments (`{name}` for a parameter).
    segments: Vec<String>,
    id: String,
    /// The query parameters it declares.
    query: Vec<String>,
    /// Its example answer, by status.
    examples: BTreeMap<String, Value>,
}

/// The description, read once per process.
fn operations() -> &'static [Operation] {
    static OPERATIONS_READ: OnceLock<Vec<Operation>> = OnceLock::new();
    OPERATIONS_READ.get_or_init(|| {
        let description: Value = serde_json::from_str(OPERATIONS).unwrap_or_default();
        let mut all = Vec::new();
        let paths = description["paths"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (path, methods) in paths {
            for (method, spec) in methods.as_object().cloned().unwrap_or_default() {
                let Ok(method) = method.to_uppercase().parse::<Method>() else {
                    continue;
                };
                let query = spec["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "query")
                    .filter_map(|p| p["name"].as_str().map(str::to_owned))
                    .collect();
                let mut examples = BTreeMap::new();
                for (status, answer) in spec["responses"].as_object().cloned().unwrap_or_default() {
                    if let Some(example) = answer["content"]["application/json"]["examples"]
                        .as_object()
                        .and_then(|e| e.values().next())
                    {
                        examples.insert(status, example["value"].clone());
                    }
                }
                all.push(Operation {
                    method,
                    segments: path
                        .trim_start_matches('/')
                        .split('/')
                        .map(str::to_owned)
                        .collect(),
                    id: spec["operationId"].as_str().unwrap_or_default().to_owned(),
                    query,
                    examples,
                });
            }
        }
        all
    })
}

/// The operation `method` `path` names, and its path parameters; a literal
/// segment beats a parameter (`runners/generate-jitconfig`).
fn route<'a>(method: &Method, path: &'a str) -> Option<(&'static Operation, Vec<&'a str>)> {
    let given: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut best: Option<(&Operation, usize)> = None;
    for op in operations() {
        if op.method != *method || op.segments.len() != given.len() {
            continue;
        }
        let mut params = 0;
        let fits = op.segments.iter().zip(&given).all(|(template, seg)| {
            if template.starts_with('{') {
                params += 1;
                !seg.is_empty()
            } else {
                template == seg
            }
        });
        if fits && best.is_none_or(|(_, most)| params < most) {
            best = Some((op, params));
        }
    }
    let (op, _) = best?;
    let params = op
        .segments
        .iter()
        .zip(&given)
        .filter(|(template, _)| template.starts_with('{'))
        .map(|(_, seg)| *seg)
        .collect();
    Some((op, params))
}

/// Starts the API on a free loopback port; answers its base address.
pub(super) async fn serve(state: Arc<Mutex<State>>) -> Result<String, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("the simulated GitHub's listener: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the simulated GitHub's listener: {e}"))?;
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let state = Arc::clone(&state);
            async move { answer(&state, &method, &uri, &headers, &body) }
        },
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

fn json_answer(status: StatusCode, value: Value) -> Response {
    (
        status,
        [("x-ratelimit-remaining", "4999")],
        axum::Json(value),
    )
        .into_response()
}

/// A request GitHub's description does not allow: recorded as a
/// violation, answered `422` as GitHub answers one.
fn refused(state: &mut State, violation: String) -> Response {
    state.violations.push(violation);
    json_answer(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"message": "Validation Failed"}),
    )
}

fn not_found() -> Response {
    json_answer(StatusCode::NOT_FOUND, json!({"message": "Not Found"}))
}

/// `op`'s example answer for `status`.
fn example(op: &Operation, status: &str) -> Value {
    op.examples.get(status).cloned().unwrap_or(Value::Null)
}

/// A query parameter's value.
fn query_value<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// The page `page` (from 1) of `per_page` of `items`.
fn page_of<T: Clone>(items: &[T], query: &[(String, String)]) -> Vec<T> {
    let (skip, take) = page_window(query);
    items.iter().skip(skip).take(take).cloned().collect()
}

/// How many items a listing's page skips, and how many it shows at most
/// (`page` and `per_page` as GitHub reads them).
fn page_window(query: &[(String, String)]) -> (usize, usize) {
    let per_page = query_value(query, "per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30usize)
        .clamp(1, MAX_PER_PAGE);
    let page = query_value(query, "page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    ((page - 1).saturating_mul(per_page), per_page)
}

fn answer(
    state: &Mutex<State>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let path = uri.path();
    let mut state = state.lock();
    state.count_call();
    let Some((op, params)) = route(method, path) else {
        state.violations.push(format!(
            "{method} {path}: no operation of GitHub's description"
        ));
        return not_found();
    };
    *state.by_operation.entry(op.id.clone()).or_default() += 1;
    if let Some((ends, limit)) = state.outage() {
        state.counts.refused += 1;
        return outage_answer(&state, ends, limit);
    }
    let query: Vec<(String, String)> = url_query(uri.query().unwrap_or_default());
    if let Some((name, _)) = query.iter().find(|(name, _)| !op.query.contains(name)) {
        return refused(
            &mut state,
            format!(
                "{method} {path} ({}): query parameter {name} is not the operation's",
                op.id
            ),
        );
    }
    if headers.get("user-agent").is_none() {
        state.violations.push(format!(
            "{method} {path} ({}): no User-Agent (GitHub refuses such requests)",
            op.id
        ));
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer != Some(TOKEN) {
        return json_answer(
            StatusCode::UNAUTHORIZED,
            json!({"message": "Bad credentials"}),
        );
    }
    // Every operation billet calls is under `/repos/{owner}/{repo}` here:
    // the deployment's scope is its repository.
    let (owner, repo) = (params.first().copied(), params.get(1).copied());
    let ours = owner
        .zip(repo)
        .is_some_and(|(o, r)| format!("{o}/{r}").eq_ignore_ascii_case(&state.repository));
    if !ours {
        return not_found();
    }
    let number = |k: usize| params.get(k).and_then(|v| v.parse::<u64>().ok());
    match op.id.as_str() {
        "actions/generate-runner-jitconfig-for-repo" => {
            let body: Value = serde_json::from_slice(body).unwrap_or_default();
            let (Some(name), Some(labels)) = (body["name"].as_str(), body["labels"].as_array())
            else {
                return refused(
                    &mut state,
                    format!(
                        "{method} {path} ({}): the body lacks `name` or `labels`",
                        op.id
                    ),
                );
            };
            if state.runner_ids.contains_key(name) {
                return json_answer(
                    StatusCode::CONFLICT,
                    json!({"message": "Already exists - A runner with the name already exists."}),
                );
            }
            let labels: Vec<String> = labels
                .iter()
                .filter_map(|l| l.as_str().map(str::to_owned))
                .collect();
            let id = state.next_runner;
            state.next_runner += 1;
            let name: Arc<str> = name.into();
            let jitconfig = format!("jit-config-of-runner-{id}");
            state.runner_ids.insert(Arc::clone(&name), id);
            state.runners.insert(
                id,
                Registration {
                    name: Arc::clone(&name),
                    labels: labels.clone(),
                    jitconfig: jitconfig.clone(),
                    busy: None,
                },
            );
            state.counts.registered += 1;
            let mut value = example(op, "201");
            value["runner"]["id"] = json!(id);
            value["runner"]["name"] = json!(&*name);
            value["runner"]["labels"] = json!(
                labels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| json!({"id": i + 1, "name": l, "type": "custom"}))
                    .collect::<Vec<_>>()
            );
            value["encoded_jit_config"] = json!(jitconfig);
            json_answer(StatusCode::CREATED, value)
        }
        "actions/list-self-hosted-runners-for-repo" => {
            let template = example(op, "200")["runners"][0].clone();
            let name = query_value(&query, "name");
            let all: Vec<(&u64, &super::Registration)> = state
                .runners
                .iter()
                .filter(|(_, r)| name.is_none_or(|n| *n == *r.name))
                .collect();
            let (skip, take) = page_window(&query);
            let shown: Vec<Value> = all
                .iter()
                .skip(skip)
                .take(take)
                .map(|(id, r)| {
                    let mut runner = template.clone();
                    runner["id"] = json!(id);
                    runner["name"] = json!(&*r.name);
                    runner["busy"] = json!(r.busy.is_some());
                    runner["labels"] = json!(
                        r.labels
                            .iter()
                            .map(|l| json!({"name": l}))
                            .collect::<Vec<_>>()
                    );
                    runner
                })
                .collect();
            json_answer(
                StatusCode::OK,
                json!({"total_count": all.len(), "runners": shown}),
            )
        }
        "actions/delete-self-hosted-runner-from-repo" => {
            let Some(id) = number(2) else {
                return not_found();
            };
            let ghost = state.plant == Some(super::Plant::GhostRunner) && id == super::GHOST_RUNNER;
            match state.runners.get(&id).map(|r| r.busy.is_some() || ghost) {
                None => not_found(),
                // GitHub refuses to remove a runner that runs a job.
                Some(true) => json_answer(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "Bad request - Runner is still running a job"}),
                ),
                Some(false) => {
                    if state.plant != Some(super::Plant::KeepRemovedRunners)
                        && let Some(runner) = state.runners.remove(&id)
                    {
                        state.runner_ids.remove(&runner.name);
                    }
                    state.counts.removed += 1;
                    StatusCode::NO_CONTENT.into_response()
                }
            }
        }
        "actions/get-job-for-workflow-run" => {
            // Asked, even if gone: the answer tells billet where it stands.
            if let Some(id) = number(2) {
                state.found(id);
            }
            match number(2).and_then(|id| job_json(&state, op, id)) {
                Some(job) => json_answer(StatusCode::OK, job),
                None => not_found(),
            }
        }
        "actions/get-workflow-run" => {
            let Some((id, job)) = number(2).and_then(|id| state.jobs.get(&id).map(|j| (id, j)))
            else {
                return not_found();
            };
            let repository = state.repository.clone();
            let head = if job.forked {
                json!({"id": 2, "full_name": format!("{repository}-fork")})
            } else {
                json!({"id": 1, "full_name": repository})
            };
            let values = [
                id.to_string(),
                json!(status_str(&job.status)).to_string(),
                match job.status {
                    Status::Completed { .. } => "\"success\"".to_owned(),
                    _ => "null".to_owned(),
                },
                json!(if job.forked { "pull_request" } else { "push" }).to_string(),
                json!(repository).to_string(),
                "true".to_owned(),
                "1".to_owned(),
                head.to_string(),
            ];
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let body = run_template(op).render(&values);
            (
                StatusCode::OK,
                [
                    ("x-ratelimit-remaining", "4999"),
                    ("content-type", "application/json"),
                ],
                body,
            )
                .into_response()
        }
        "actions/list-workflow-runs-for-repo" => {
            let status = query_value(&query, "status").unwrap_or_default();
            // Newest first, as GitHub lists them; the queued ones from
            // their index, not a walk of every job.
            let (total, shown) = if status == "queued" {
                let (skip, take) = page_window(&query);
                let shown: Vec<u64> = state
                    .queued_runs
                    .iter()
                    .rev()
                    .skip(skip)
                    .take(take)
                    .copied()
                    .collect();
                (state.queued_runs.len(), shown)
            } else {
                let mut ids: Vec<u64> = state
                    .jobs
                    .iter()
                    .filter(|(_, j)| status_str(&j.status) == status)
                    .map(|(id, _)| *id)
                    .collect();
                ids.sort_unstable_by(|a, b| b.cmp(a));
                (ids.len(), page_of(&ids, &query))
            };
            let template = listed_run_template(op);
            let status = json!(status).to_string();
            let mut body = format!("{{\"total_count\":{total},\"workflow_runs\":[").into_bytes();
            for (k, id) in shown.iter().enumerate() {
                if k > 0 {
                    body.push(b',');
                }
                body.extend(template.render(&[&id.to_string(), &status]));
            }
            body.extend_from_slice(b"]}");
            (
                StatusCode::OK,
                [
                    ("x-ratelimit-remaining", "4999"),
                    ("content-type", "application/json"),
                ],
                body,
            )
                .into_response()
        }
        "actions/list-jobs-for-workflow-run" => {
            // A run is its job alone here: its id is the job's.
            if let Some(id) = number(2) {
                state.found(id);
            }
            let jobs: Vec<Value> = number(2)
                .and_then(|id| job_json(&state, op, id))
                .into_iter()
                .map(|mut job| {
                    let template = example(op, "200")["jobs"][0].clone();
                    if let (Some(base), Some(over)) = (
                        Some(template).and_then(|t| t.as_object().cloned()),
                        job.as_object_mut(),
                    ) {
                        for (k, v) in base {
                            over.entry(k).or_insert(v);
                        }
                    }
                    job
                })
                .collect();
            json_answer(
                StatusCode::OK,
                json!({"total_count": jobs.len(), "jobs": jobs}),
            )
        }
        other => {
            state.violations.push(format!(
                "{method} {path}: the simulated GitHub does not answer {other}"
            ));
            json_answer(
                StatusCode::NOT_IMPLEMENTED,
                json!({"message": "not answered"}),
            )
        }
    }
}

/// `GET .../actions/runs/{run_id}`'s example, with holes for what a run
/// changes (in the order the answer gives the values), made once.
fn run_template(op: &Operation) -> &'static Template {
    static RUN: OnceLock<Template> = OnceLock::new();
    RUN.get_or_init(|| {
        Template::new(
            example(op, "200"),
            &[
                "/id",
                "/status",
                "/conclusion",
                "/event",
                "/repository/full_name",
                "/repository/private",
                "/repository/id",
                "/head_repository",
            ],
        )
    })
}

/// A run as `GET .../actions/runs` lists it (the operation's example's
/// first), with holes for its id and status, made once.
fn listed_run_template(op: &Operation) -> &'static Template {
    static LISTED: OnceLock<Template> = OnceLock::new();
    LISTED.get_or_init(|| {
        Template::new(
            example(op, "200")["workflow_runs"][0].clone(),
            &["/id", "/status"],
        )
    })
}

/// GitHub's word for where a job stands.
fn status_str(status: &Status) -> &'static str {
    match status {
        Status::Queued => "queued",
        Status::InProgress { .. } => "in_progress",
        Status::Completed { .. } => "completed",
    }
}

/// Job `id` as `GET .../actions/jobs/{id}` answers it (`op`'s example,
/// changed where the job says).
fn job_json(state: &State, op: &Operation, id: u64) -> Option<Value> {
    let job = state.jobs.get(&id)?;
    let mut value = match op.examples.get("200") {
        Some(example) if example.get("jobs").is_some() => example["jobs"][0].clone(),
        Some(example) => example.clone(),
        None => Value::Null,
    };
    value["id"] = json!(id);
    value["run_id"] = json!(id);
    value["status"] = json!(status_str(&job.status));
    value["labels"] = json!(&*job.labels);
    let (runner, conclusion) = match &job.status {
        Status::Queued => (Value::Null, Value::Null),
        Status::InProgress { runner } => (json!(&**runner), Value::Null),
        Status::Completed { runner } => (json!(&**runner), json!("success")),
    };
    value["runner_name"] = runner;
    value["conclusion"] = conclusion;
    Some(value)
}

/// What the API answers in an outage window ending at `ends`: `503`, or,
/// when `limit`, `403` with `Retry-After` until then as GitHub says a spent
/// rate limit.
fn outage_answer(state: &State, ends: SystemTime, limit: bool) -> Response {
    if !limit {
        return json_answer(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"message": "Service Unavailable"}),
        );
    }
    let now = state.now.unwrap_or(ends);
    let wait = ends
        .duration_since(now)
        .unwrap_or_default()
        .as_secs()
        .max(1);
    (
        StatusCode::FORBIDDEN,
        [
            ("retry-after", wait.to_string()),
            ("x-ratelimit-remaining", "0".to_owned()),
            ("content-type", "application/json".to_owned()),
        ],
        json!({"message": "API rate limit exceeded for installation."}).to_string(),
    )
        .into_response()
}

/// The pairs of a URL's query, decoded.
fn url_query(query: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}
