//! A stand-in for GitHub's REST API on loopback, held to GitHub's own
//! published description of each operation billet calls
//! (`testdata/octokit-openapi`): a request whose method and path no kept
//! operation names, or whose parameters or body its schema refuses, is a
//! violation the test fails on. Answers are the operation's own examples,
//! changed only where the stand-in's state says otherwise. An App's JWT is
//! checked with the App's public key; the installation token it hands out
//! is the only one other calls take.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};

const OPERATIONS: &str = include_str!("../../testdata/octokit-openapi/operations.json");
/// The tests' App's public key (testdata/app-key/README.md).
pub const APP_PUBLIC_KEY: &str = include_str!("../../testdata/app-key/public.pem");
/// Its private key, for the client under test.
pub const APP_PRIVATE_KEY: &str = include_str!("../../testdata/app-key/private.pem");
/// The tests' App's id.
pub const APP_ID: u64 = 4242;
/// The installation the stand-in says the App has.
pub const INSTALLATION_ID: u64 = 1_234_567;

/// One operation of the description.
struct Operation {
    method: Method,
    /// The path template's segments (`{name}` for a parameter).
    segments: Vec<String>,
    id: String,
    spec: Value,
}

/// How the stand-in authenticates calls.
#[derive(Clone)]
pub enum Auth {
    /// Every call takes this token.
    Token(String),
    /// JWT calls take the App's JWT; the others the installation token it
    /// last handed out.
    App,
}

/// A fault to answer instead of the next call's answer.
#[derive(Clone, Debug)]
pub struct Fault {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
}

/// What the stand-in holds and has seen.
#[derive(Default)]
pub struct State {
    /// Requests that GitHub's description does not allow.
    pub violations: Vec<String>,
    /// Every request as `METHOD /path` (operation id after a space).
    pub calls: Vec<String>,
    /// Runners by id: (name, labels, busy).
    pub runners: BTreeMap<u64, (String, Vec<String>, bool)>,
    next_runner: u64,
    /// Installation tokens handed out, with their expiry.
    pub tokens: Vec<(String, SystemTime)>,
    /// Overrides of a job's answer, by id.
    pub jobs: BTreeMap<u64, Value>,
    /// Overrides of a run's answer, by id.
    pub runs: BTreeMap<u64, Value>,
    /// Runs listed by `GET .../actions/runs?status=`, by status.
    pub runs_by_status: BTreeMap<String, Vec<u64>>,
    /// Jobs listed for a run.
    pub run_jobs: BTreeMap<u64, Vec<Value>>,
    /// Answers to give instead of the next calls', in order.
    pub faults: VecDeque<Fault>,
    /// Seconds the installation tokens it makes live.
    pub token_life: u64,
    /// Added to the `total_count` a runners listing answers: GitHub's
    /// count may be ahead of the items it lists.
    pub total_bias: u64,
    /// How long a JIT config's answer is held back after the registration
    /// is made (a test's window to crash billet between the two).
    pub jit_hold: Option<std::time::Duration>,
}

/// A running stand-in.
pub struct StandIn {
    pub url: String,
    pub state: Arc<Mutex<State>>,
    auth: Auth,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StandIn {
    /// Starts one on a free loopback port.
    pub async fn start(auth: Auth) -> StandIn {
        let operations = Arc::new(operations());
        let state = Arc::new(Mutex::new(State {
            next_runner: 100,
            token_life: 3600,
            ..State::default()
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let app = {
            let state = Arc::clone(&state);
            let auth = auth.clone();
            axum::Router::new().fallback(
                move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                    let state = Arc::clone(&state);
                    let operations = Arc::clone(&operations);
                    let auth = auth.clone();
                    async move {
                        let response =
                            answer(&operations, &state, &auth, &method, &uri, &headers, &body);
                        let hold = state.lock().jit_hold;
                        if let Some(hold) =
                            hold.filter(|_| uri.path().ends_with("/generate-jitconfig"))
                        {
                            tokio::time::sleep(hold).await;
                        }
                        response
                    }
                },
            )
        };
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        StandIn {
            url: format!("http://{addr}"),
            state,
            auth,
            task,
        }
    }

    /// Fails the test if any request broke GitHub's description.
    pub fn assert_no_violation(&self) {
        let state = self.state.lock();
        assert!(
            state.violations.is_empty(),
            "requests GitHub's description does not allow:\n{}",
            state.violations.join("\n")
        );
    }

    /// The runners registered now: (name, labels), by id.
    pub fn registered(&self) -> Vec<(String, Vec<String>)> {
        self.state
            .lock()
            .runners
            .values()
            .map(|(name, labels, _)| (name.clone(), labels.clone()))
            .collect()
    }

    /// The operation ids called so far, in order.
    pub fn operations_called(&self) -> Vec<String> {
        self.state
            .lock()
            .calls
            .iter()
            .filter_map(|call| call.rsplit(' ').next().map(str::to_owned))
            .collect()
    }
}

fn operations() -> Vec<Operation> {
    let description: Value = serde_json::from_str(OPERATIONS).unwrap();
    let mut all = Vec::new();
    for (path, methods) in description["paths"].as_object().unwrap() {
        for (method, spec) in methods.as_object().unwrap() {
            all.push(Operation {
                method: method.to_uppercase().parse().unwrap(),
                segments: path
                    .trim_start_matches('/')
                    .split('/')
                    .map(str::to_owned)
                    .collect(),
                id: spec["operationId"].as_str().unwrap().to_owned(),
                spec: spec.clone(),
            });
        }
    }
    all
}

/// The operation `method` `path` names, and its path parameters.
fn route<'a>(
    operations: &'a [Operation],
    method: &Method,
    path: &str,
) -> Option<(&'a Operation, BTreeMap<String, String>)> {
    let given: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // A literal segment beats a parameter (`/runners/generate-jitconfig`
    // against `/runners/{runner_id}`): try the most literal first.
    let mut candidates: Vec<&Operation> = operations
        .iter()
        .filter(|op| op.method == *method && op.segments.len() == given.len())
        .collect();
    candidates.sort_by_key(|op| op.segments.iter().filter(|s| s.starts_with('{')).count());
    for op in candidates {
        let mut params = BTreeMap::new();
        let fits = op.segments.iter().zip(&given).all(|(template, seg)| {
            if let Some(name) = template.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                let decoded = url::form_urlencoded::parse(format!("x={seg}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                params.insert(name.to_owned(), decoded);
                !seg.is_empty()
            } else {
                template == seg
            }
        });
        if fits {
            return Some((op, params));
        }
    }
    None
}

/// Checks `value` (as written in a URL) against a parameter's schema.
fn check_param(schema: &Value, value: &str) -> Result<(), String> {
    let typed = match schema["type"].as_str() {
        Some("integer") => value
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| format!("{value:?} is not an integer"))?,
        Some("boolean") => value
            .parse::<bool>()
            .map(Value::from)
            .map_err(|_| format!("{value:?} is not a boolean"))?,
        _ => Value::from(value),
    };
    validate(schema, &typed)
}

fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| format!("schema: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

fn json_answer(status: StatusCode, value: Value) -> Response {
    (
        status,
        [("x-ratelimit-remaining", "4999")],
        axum::Json(value),
    )
        .into_response()
}

fn example(op: &Operation, status: &str) -> Value {
    op.spec["responses"][status]["content"]["application/json"]["examples"]
        .as_object()
        .and_then(|examples| examples.values().next())
        .map(|example| example["value"].clone())
        .unwrap_or(Value::Null)
}

fn answer(
    operations: &[Operation],
    state: &Mutex<State>,
    auth: &Auth,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let Some((op, params)) = route(operations, method, &path) else {
        let mut state = state.lock();
        state.calls.push(format!("{method} {path} -"));
        state.violations.push(format!(
            "{method} {path}: no operation of GitHub's description"
        ));
        return json_answer(StatusCode::NOT_FOUND, json!({"message": "Not Found"}));
    };
    let mut problems = Vec::new();
    // Parameters: every path parameter and query parameter is declared and
    // valid; every required one is given.
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let declared = op.spec["parameters"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for param in &declared {
        let name = param["name"].as_str().unwrap_or_default();
        let given = match param["in"].as_str() {
            Some("path") => params.get(name).cloned(),
            Some("query") => query
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone()),
            _ => continue,
        };
        match given {
            Some(value) => {
                if let Err(why) = check_param(&param["schema"], &value) {
                    problems.push(format!("parameter {name}: {why}"));
                }
            }
            None if param["required"].as_bool() == Some(true) => {
                problems.push(format!("required parameter {name} missing"));
            }
            None => {}
        }
    }
    for (name, _) in &query {
        if !declared
            .iter()
            .any(|p| p["name"] == name.as_str() && p["in"] == "query")
        {
            problems.push(format!("query parameter {name} is not the operation's"));
        }
    }
    // The body, against the request body's schema.
    let body_value: Option<Value> = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice(body) {
            Ok(value) => Some(value),
            Err(e) => {
                problems.push(format!("body is not JSON: {e}"));
                None
            }
        }
    };
    let request_body = &op.spec["requestBody"];
    match (&body_value, request_body.is_null()) {
        (Some(_), true) => problems.push("a body the operation takes none of".to_owned()),
        (None, false) if request_body["required"].as_bool() == Some(true) => {
            problems.push("the required body is missing".to_owned());
        }
        (Some(value), false) => {
            if let Err(why) = validate(
                &request_body["content"]["application/json"]["schema"],
                value,
            ) {
                problems.push(format!("body: {why}"));
            }
        }
        _ => {}
    }
    if headers.get("user-agent").is_none() {
        problems.push("no User-Agent (GitHub refuses such requests)".to_owned());
    }
    let mut state = state.lock();
    state.calls.push(format!("{method} {path} {}", op.id));
    if !problems.is_empty() {
        state.violations.push(format!(
            "{method} {path} ({}): {}",
            op.id,
            problems.join("; ")
        ));
        return json_answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"message": "Validation Failed"}),
        );
    }
    // Authentication.
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let jwt_call = path.starts_with("/app/") || path.ends_with("/installation");
    let authorized = match auth {
        Auth::Token(token) => !jwt_call && bearer == *token,
        Auth::App if jwt_call => check_jwt(&bearer)
            .map_err(|why| {
                state
                    .violations
                    .push(format!("{method} {path}: JWT refused: {why}"));
            })
            .is_ok(),
        Auth::App => {
            let now = SystemTime::now();
            state
                .tokens
                .iter()
                .any(|(token, until)| *token == bearer && *until > now)
        }
    };
    if !authorized {
        return json_answer(
            StatusCode::UNAUTHORIZED,
            json!({"message": "Bad credentials"}),
        );
    }
    if let Some(fault) = state.faults.pop_front() {
        let mut response = json_answer(
            StatusCode::from_u16(fault.status).unwrap(),
            json!({"message": "a fault the test asked for"}),
        );
        for (name, value) in fault.headers {
            response
                .headers_mut()
                .insert(name, HeaderValue::from_str(&value).unwrap());
        }
        return response;
    }
    let param_u64 = |name: &str| {
        params
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match op.id.as_str() {
        "actions/generate-runner-jitconfig-for-org"
        | "actions/generate-runner-jitconfig-for-repo" => {
            let body = body_value.unwrap_or_default();
            let name = body["name"].as_str().unwrap_or_default().to_owned();
            if state.runners.values().any(|(held, _, _)| *held == name) {
                return json_answer(
                    StatusCode::CONFLICT,
                    json!({"message": "Already exists - A runner with the name already exists."}),
                );
            }
            let labels: Vec<String> = body["labels"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            state.next_runner += 1;
            let id = state.next_runner;
            state
                .runners
                .insert(id, (name.clone(), labels.clone(), false));
            let mut value = example(op, "201");
            value["runner"]["id"] = json!(id);
            value["runner"]["name"] = json!(name);
            value["runner"]["labels"] = json!(
                labels
                    .iter()
                    .enumerate()
                    .map(|(i, l)| json!({"id": i + 1, "name": l, "type": "custom"}))
                    .collect::<Vec<_>>()
            );
            value["encoded_jit_config"] = json!(format!("jit-secret-for-{name}"));
            json_answer(StatusCode::CREATED, value)
        }
        "actions/list-self-hosted-runners-for-org"
        | "actions/list-self-hosted-runners-for-repo" => {
            let template = example(op, "200")["runners"][0].clone();
            let name = query
                .iter()
                .find(|(n, _)| n == "name")
                .map(|(_, v)| v.clone());
            let per_page: usize = query
                .iter()
                .find(|(n, _)| n == "per_page")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(30);
            let page: usize = query
                .iter()
                .find(|(n, _)| n == "page")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(1);
            let all: Vec<Value> = state
                .runners
                .iter()
                .filter(|(_, (held, _, _))| name.as_ref().is_none_or(|n| n == held))
                .map(|(id, (held, labels, busy))| {
                    let mut runner = template.clone();
                    runner["id"] = json!(id);
                    runner["name"] = json!(held);
                    runner["busy"] = json!(busy);
                    runner["labels"] = json!(
                        labels
                            .iter()
                            .map(|l| json!({"name": l}))
                            .collect::<Vec<_>>()
                    );
                    runner
                })
                .collect();
            let total = all.len();
            let shown: Vec<Value> = all
                .into_iter()
                .skip((page - 1) * per_page)
                .take(per_page)
                .collect();
            json_answer(
                StatusCode::OK,
                json!({"total_count": total as u64 + state.total_bias, "runners": shown}),
            )
        }
        "actions/delete-self-hosted-runner-from-org"
        | "actions/delete-self-hosted-runner-from-repo" => {
            if state.runners.remove(&param_u64("runner_id")).is_some() {
                StatusCode::NO_CONTENT.into_response()
            } else {
                json_answer(StatusCode::NOT_FOUND, json!({"message": "Not Found"}))
            }
        }
        "actions/get-job-for-workflow-run" => match state.jobs.get(&param_u64("job_id")) {
            Some(job) => json_answer(StatusCode::OK, merged(example(op, "200"), job)),
            None => json_answer(StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
        },
        "actions/get-workflow-run" => match state.runs.get(&param_u64("run_id")) {
            Some(run) => json_answer(StatusCode::OK, merged(example(op, "200"), run)),
            None => json_answer(StatusCode::NOT_FOUND, json!({"message": "Not Found"})),
        },
        "actions/list-workflow-runs-for-repo" => {
            let status = query
                .iter()
                .find(|(n, _)| n == "status")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let template = example(op, "200")["workflow_runs"][0].clone();
            let number = |name: &str, default: usize| {
                query
                    .iter()
                    .find(|(n, _)| n == name)
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(default)
            };
            let (per_page, page): (usize, usize) = (number("per_page", 30), number("page", 1));
            let ids = state
                .runs_by_status
                .get(&status)
                .cloned()
                .unwrap_or_default();
            let runs: Vec<Value> = ids
                .iter()
                .skip(page.saturating_sub(1) * per_page)
                .take(per_page)
                .map(|id| {
                    let mut run = template.clone();
                    run["id"] = json!(id);
                    run["status"] = json!(status);
                    run
                })
                .collect();
            json_answer(
                StatusCode::OK,
                json!({"total_count": ids.len(), "workflow_runs": runs}),
            )
        }
        "actions/list-jobs-for-workflow-run" => {
            let template = example(op, "200")["jobs"][0].clone();
            let jobs: Vec<Value> = state
                .run_jobs
                .get(&param_u64("run_id"))
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|job| merged(template.clone(), job))
                .collect();
            json_answer(
                StatusCode::OK,
                json!({"total_count": jobs.len(), "jobs": jobs}),
            )
        }
        "apps/get-org-installation" | "apps/get-repo-installation" => {
            let mut value = example(op, "200");
            value["id"] = json!(INSTALLATION_ID);
            json_answer(StatusCode::OK, value)
        }
        "apps/create-installation-access-token" => {
            if param_u64("installation_id") != INSTALLATION_ID {
                return json_answer(StatusCode::NOT_FOUND, json!({"message": "Not Found"}));
            }
            let n = state.tokens.len();
            let token = format!("ghs_standin{n}");
            let expires = SystemTime::now() + Duration::from_secs(state.token_life);
            state.tokens.push((token.clone(), expires));
            let mut value = example(op, "201");
            value["token"] = json!(token);
            value["expires_at"] = json!(humantime::format_rfc3339_seconds(expires).to_string());
            json_answer(StatusCode::CREATED, value)
        }
        other => {
            state
                .violations
                .push(format!("the stand-in does not answer {other}"));
            json_answer(
                StatusCode::NOT_IMPLEMENTED,
                json!({"message": "not answered"}),
            )
        }
    }
}

/// `base` with `over`'s fields set (one level deep for objects).
fn merged(mut base: Value, over: &Value) -> Value {
    if let (Some(base_map), Some(over_map)) = (base.as_object_mut(), over.as_object()) {
        for (key, value) in over_map {
            base_map.insert(key.clone(), value.clone());
        }
    }
    base
}

/// Checks an App's JWT as GitHub does: RS256 under the App's public key,
/// issued by the App, expiring at most ten minutes after it was issued.
fn check_jwt(token: &str) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Claims {
        iat: u64,
        exp: u64,
        iss: String,
    }
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(APP_PUBLIC_KEY.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_required_spec_claims(&["exp", "iat", "iss"]);
    validation.set_issuer(&[APP_ID.to_string()]);
    let data =
        jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(|e| e.to_string())?;
    let claims = data.claims;
    if claims.exp.saturating_sub(claims.iat) > 600 {
        return Err("expires more than ten minutes after it was issued".to_owned());
    }
    let _ = claims.iss;
    Ok(())
}
