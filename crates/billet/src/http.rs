//! The routes (L4, L5, L11): axum over the engine and the committed table.
//! Every path but `/healthz` needs a bearer token of the token file, and
//! the grant its route asks (`403` naming it otherwise); a request that
//! fails a check is answered before anything is asked of the engine.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

pub mod page;

use crate::api::{self, BadRequest, JobView};
use crate::engine::{Cancelled, EngineHandle, PoolView, Shared, Submitted, Unanswered};
use crate::github::webhook::{self, Received, Webhook};
use crate::output::OutputStore;
use crate::store::StoreError;
use crate::token::{Caller, Credentials, Grant, Grants};

/// The answer of `GET /v1/jobs`: one page, and the `after` of the next
/// (`null` when there is none).
#[derive(serde::Serialize)]
struct JobList {
    jobs: Vec<JobView>,
    next: Option<u64>,
}

/// The answer of `GET /v1/pools`.
#[derive(serde::Serialize)]
struct PoolList {
    pools: Vec<PoolView>,
}

/// What every handler reads.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The engine, for what changes jobs.
    pub engine: EngineHandle,
    /// The committed table and the pools, for what only reads.
    pub shared: Arc<Shared>,
    /// The credentials tokens are checked against (L11).
    pub credentials: Arc<Credentials>,
    /// What jobs may ask (L14).
    pub limits: JobLimits,
    /// Where jobs' output is kept (L15), if anywhere.
    pub output: Option<Arc<OutputStore>>,
    /// GitHub's webhook (G2), if `billet.yaml` configures the intake.
    pub github: Option<Arc<Webhook>>,
    /// The status page's sign-in sessions (K6).
    pub sessions: Arc<page::session::Sessions>,
    /// The status page's charts as last drawn (K7).
    pub charts: Arc<page::chart::Charts>,
    /// Set on the routes of a connection past `--max-connections` (L12):
    /// every request but `/healthz` answers `503` with `Retry-After`.
    pub overflow: bool,
}

/// How long a job may run (L14): `default` for a job that names no
/// timeout, and no more than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// The timeout of a job that names none.
    pub default_timeout: Duration,
    /// The longest timeout a job may name (`422` past it).
    pub max_timeout: Duration,
}

impl Default for JobLimits {
    /// One hour by default, at most a day.
    fn default() -> JobLimits {
        JobLimits {
            default_timeout: Duration::from_secs(60 * 60),
            max_timeout: Duration::from_secs(24 * 60 * 60),
        }
    }
}

/// How long a request's body may take to arrive once its head has (L12).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The `Retry-After` (seconds) of a submission refused because as many jobs
/// as `--max-queued` allows have not ended (L19): jobs take minutes, so a
/// client asked to come back at once would only be refused again.
pub const FULL_RETRY_AFTER: &str = "30";

/// The service's routes and the status page's, with the token and shutdown
/// checks in front.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/jobs", get(list_jobs).post(submit))
        .route("/v1/jobs/{id}", get(get_job).delete(cancel))
        .route("/v1/jobs/{id}/output", get(job_output))
        .route("/v1/pools", get(pools))
        .route("/v1/github/webhook", axum::routing::post(github_webhook))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .merge(page::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (status, axum::Json(json!({ "error": message.to_string() }))).into_response()
}

fn bad(request: &BadRequest) -> Response {
    error(StatusCode::BAD_REQUEST, request)
}

async fn job(app: &AppState, status: StatusCode, view: JobView) -> Response {
    let output = app.output.clone();
    let view = off_the_workers(app, move |_| shown(output.as_deref(), view)).await;
    (status, axum::Json(view)).into_response()
}

/// `view` with what the output store keeps of its output (L15): reads files,
/// so run off the runtime's workers (L22).
pub(crate) fn shown(output: Option<&OutputStore>, mut view: JobView) -> JobView {
    if let Some(output) = output {
        let kept = output.kept(view.id);
        view.output_bytes = kept.bytes;
        view.output_truncated = kept.truncated;
    }
    view
}

/// `403` naming the grant the credential lacks (L11).
fn forbidden(grant: Grant) -> Response {
    error(
        StatusCode::FORBIDDEN,
        format!("this credential lacks the grant `{grant}`"),
    )
}

/// `None` when `grants` hold `grant`, else the `403`.
fn lacks(grants: Grants, grant: Grant) -> Option<Response> {
    (!grants.has(grant)).then(|| forbidden(grant))
}

/// The token of an `Authorization` header's value, the `Bearer` scheme
/// matched case-insensitively (L13).
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// `503` saying why the engine did not answer; with `Retry-After` when the
/// intake is full (L12).
fn unanswered(why: Unanswered) -> Response {
    let mut response = error(StatusCode::SERVICE_UNAVAILABLE, why.to_string());
    if why == Unanswered::Saturated {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// `500` naming what of the store could not be read.
fn unreadable(what: impl std::fmt::Display) -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("the store could not be read: {what}"),
    )
}

/// Job `id`, ended or not: from memory, else from the archive, read
/// without holding the table's lock.
/// Runs `read` (a read of the jobs that may reach the archive, and so wait
/// on SQLite) on tokio's blocking threads, off the runtime's workers (L22).
pub(crate) async fn off_the_workers<T: Send + 'static>(
    app: &AppState,
    read: impl FnOnce(&Shared) -> T + Send + 'static,
) -> T {
    let shared = Arc::clone(&app.shared);
    tokio::task::spawn_blocking(move || read(&shared))
        .await
        .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()))
}

fn find(app: &AppState, id: u64) -> Result<Option<JobView>, StoreError> {
    find_in(&app.shared, id)
}

fn find_in(shared: &Shared, id: u64) -> Result<Option<JobView>, StoreError> {
    let live = shared.jobs.read().live(id).map(JobView::of);
    match live {
        Some(view) => Ok(Some(view)),
        // Not in memory: ended, and its end committed before it left.
        None => Ok(shared.archive.get(id)?.map(|record| JobView::of(&record))),
    }
}

/// Refuses every request once shutdown began (503), every request but
/// `/healthz` on a connection past the cap (503, L12), and every request but
/// `/healthz` without a credential's token (401); hands the credential's
/// grants, and the whole [`Caller`], to the route.
async fn guard(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    if !app.shared.accepting.load(Ordering::SeqCst) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "billet is shutting down");
    }
    if request.uri().path() != "/healthz" {
        if app.overflow {
            let mut response = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many open connections (--max-connections, or --max-connections-per-peer from this address): try again shortly",
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        }
        // K6: the status page checks its session cookie (or a token) itself.
        if page::is_page(request.uri().path()) {
            return next.run(request).await;
        }
        // G2: GitHub signs its deliveries; it holds no token of billet's.
        if app.github.is_some() && request.uri().path() == WEBHOOK_PATH {
            return next.run(request).await;
        }
        let caller = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(bearer)
            .and_then(|token| app.credentials.caller(token));
        if let Some(caller) = caller {
            request.extensions_mut().insert(caller.grants);
            request.extensions_mut().insert(caller);
        } else {
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "header `Authorization`: missing, or not `Bearer` and this service's token",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

async fn submit(
    State(app): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Response {
    let grants = caller.grants;
    if !grants.has(Grant::Submit) && !grants.has(Grant::SubmitUntrusted) {
        return forbidden(Grant::Submit);
    }
    let bytes = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, api::MAX_BODY_BYTES),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return error(StatusCode::PAYLOAD_TOO_LARGE, api::too_large()),
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {}s", BODY_TIMEOUT.as_secs()),
            );
        }
    };
    let mut new = match api::parse_job(&bytes) {
        Ok(new) => new,
        Err(request) => return bad(&request),
    };
    if !grants.may_submit(new.trust == billet_provider::TrustClass::Trusted) {
        return error(
            StatusCode::FORBIDDEN,
            "field `trust`: this credential lacks the grant `submit`, which a job claiming `trusted` needs (it holds `submit-untrusted`)",
        );
    }
    match new.timeout {
        Some(asked) if asked > app.limits.max_timeout => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "field `timeout_secs`: {} is longer than this service allows ({}, --max-timeout)",
                    asked.as_secs(),
                    app.limits.max_timeout.as_secs()
                ),
            );
        }
        Some(_) => {}
        None => new.timeout = Some(app.limits.default_timeout),
    }
    // L18: a key names a job among this credential's alone.
    new.key = new.key.map(|key| caller.scope.qualify(&key));
    match app.engine.submit(new).await {
        Ok(Submitted::Created(view)) => job(&app, StatusCode::CREATED, view).await,
        // L18: a repeat shows only the id to a credential that may not read.
        Ok(Submitted::Existing(view)) if !grants.has(Grant::Read) => {
            (StatusCode::OK, axum::Json(json!({ "id": view.id }))).into_response()
        }
        Ok(Submitted::Existing(view)) => job(&app, StatusCode::OK, view).await,
        Ok(Submitted::Conflicting(id)) => error(
            StatusCode::CONFLICT,
            format!(
                "field `key`: it names job {id}, submitted with another body; a key stands for one request (send the same body again, or a new key)"
            ),
        ),
        Ok(Submitted::Full(bound)) => {
            let mut response = error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{bound} jobs have not ended, the most this service holds (--max-queued): try again once some have"
                ),
            );
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(FULL_RETRY_AFTER),
            );
            response
        }
        Ok(Submitted::Refused(reason)) => error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("no pool can ever take this job: {reason}"),
        ),
        Ok(Submitted::Unreadable(why)) => unreadable(why),
        Ok(Submitted::NoSpace(why)) => no_space(&why),
        Err(why) => unanswered(why),
    }
}

async fn list_jobs(
    State(app): State<AppState>,
    Extension(grants): Extension<Grants>,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(refused) = lacks(grants, Grant::Read) {
        return refused;
    }
    let query = match api::parse_list_query(query.as_deref()) {
        Ok(query) => query,
        Err(request) => return bad(&request),
    };
    let output = app.output.clone();
    let page = off_the_workers(&app, move |shared| {
        crate::jobs::page(&shared.jobs, query).map(|page| JobList {
            jobs: page
                .jobs
                .iter()
                .map(|record| shown(output.as_deref(), JobView::of(record)))
                .collect(),
            next: page.next,
        })
    })
    .await;
    match page {
        Ok(list) => (StatusCode::OK, axum::Json(list)).into_response(),
        Err(why) => unreadable(why),
    }
}

/// The id in a path, if it is one.
fn job_id(id: &str) -> Option<u64> {
    id.parse::<u64>().ok()
}

fn unknown(id: &str) -> Response {
    let shown: String = id.chars().take(64).collect();
    error(
        StatusCode::NOT_FOUND,
        format!("field `id`: no job with id {shown:?}"),
    )
}

async fn get_job(
    State(app): State<AppState>,
    Extension(grants): Extension<Grants>,
    Path(id): Path<String>,
) -> Response {
    if let Some(refused) = lacks(grants, Grant::Read) {
        return refused;
    }
    let Some(n) = job_id(&id) else {
        return unknown(&id);
    };
    let webhook = app.github.clone();
    let found = off_the_workers(&app, move |shared| job_view(shared, webhook.as_deref(), n)).await;
    match found {
        Ok(Some(view)) => job(&app, StatusCode::OK, view).await,
        Ok(None) => unknown(&id),
        Err(why) => unreadable(why),
    }
}

/// Job `n` as `GET /v1/jobs/{id}` shows it, with the GitHub job it serves
/// (G8) when `webhook` is set; `None` when there is no such job.
pub(crate) fn job_view(
    shared: &Shared,
    webhook: Option<&Webhook>,
    n: u64,
) -> Result<Option<JobView>, String> {
    let mut view = find_in(shared, n).map_err(|error| error.to_string())?;
    if let (Some(view), Some(webhook)) = (&mut view, webhook) {
        view.github = webhook
            .served_by(view.id)?
            .map(|facts| crate::api::GithubView {
                job_id: facts.id,
                run_id: facts.run_id,
                repository: facts.repository,
                runner: facts.runner,
                conclusion: facts.conclusion,
            });
    }
    Ok(view)
}

/// `GET /v1/jobs/{id}/output` (L15): what is kept of the job's output so
/// far, as `text/plain`; with `?follow=true`, the rest as it comes, until
/// the job has ended and its capture is done.
async fn job_output(
    State(app): State<AppState>,
    Extension(grants): Extension<Grants>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(refused) = lacks(grants, Grant::Read) {
        return refused;
    }
    let follow = match query.as_deref() {
        None | Some("") | Some("follow=false") => false,
        Some("follow=true") => true,
        Some(other) => {
            let shown: String = other.chars().take(64).collect();
            return error(
                StatusCode::BAD_REQUEST,
                format!("query {shown:?}: the only parameter is `follow`, `true` or `false`"),
            );
        }
    };
    let Some(n) = job_id(&id) else {
        return unknown(&id);
    };
    let found = off_the_workers(&app, move |shared| find_in(shared, n)).await;
    match found {
        Ok(Some(_)) => {}
        Ok(None) => return unknown(&id),
        Err(why) => return unreadable(why),
    }
    let Some(output) = app.output.clone() else {
        return error(StatusCode::NOT_FOUND, "this service keeps no job output");
    };
    let slot = match follow.then(|| output.follow_slot()) {
        None => None,
        Some(Some(slot)) => Some(slot),
        Some(None) => {
            let mut answer = error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "{} readers already follow jobs' output, the most served at once: \
                     follow again later, or read what is kept without `follow`",
                    crate::output::MAX_FOLLOWS
                ),
            );
            answer
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return answer;
        }
    };
    let ended = move || match find(&app, n) {
        Ok(Some(view)) => view.state.has_ended(),
        // Gone (retention) or unreadable: nothing more will come.
        _ => true,
    };
    let body = crate::output::serve(output, n, slot, ended);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        Body::from_stream(body),
    )
        .into_response()
}

/// `507` with `Retry-After`: the store cannot commit for lack of space
/// (L25); nothing was recorded.
fn no_space(why: &str) -> Response {
    let mut response = error(
        StatusCode::INSUFFICIENT_STORAGE,
        format!(
            "the store cannot commit for lack of space ({why}): nothing was recorded; \
             jobs that run are still watched, and new work is taken once space is freed"
        ),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(FULL_RETRY_AFTER),
    );
    response
}

async fn cancel(
    State(app): State<AppState>,
    Extension(grants): Extension<Grants>,
    Path(id): Path<String>,
) -> Response {
    if let Some(refused) = lacks(grants, Grant::Cancel) {
        return refused;
    }
    let Some(n) = job_id(&id) else {
        return unknown(&id);
    };
    let found = off_the_workers(&app, move |shared| find_in(shared, n)).await;
    match found {
        Ok(Some(_)) => {}
        Ok(None) => return unknown(&id),
        Err(why) => return unreadable(why),
    }
    match app.engine.cancel(n).await {
        Ok(Cancelled::Requested(view)) => job(&app, StatusCode::OK, view).await,
        Ok(Cancelled::Ended(view)) => job(&app, StatusCode::CONFLICT, view).await,
        Ok(Cancelled::Unknown) => unknown(&id),
        Ok(Cancelled::Unreadable(why)) => unreadable(why),
        Ok(Cancelled::NoSpace(why)) => no_space(&why),
        Err(why) => unanswered(why),
    }
}

async fn pools(State(app): State<AppState>, Extension(grants): Extension<Grants>) -> Response {
    if let Some(refused) = lacks(grants, Grant::Read) {
        return refused;
    }
    let pools = app.shared.pools();
    (StatusCode::OK, axum::Json(PoolList { pools })).into_response()
}

async fn metrics(State(app): State<AppState>, Extension(grants): Extension<Grants>) -> Response {
    if let Some(refused) = lacks(grants, Grant::Metrics) {
        return refused;
    }
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.shared.metrics.render(),
    )
        .into_response()
}

/// The path GitHub's deliveries are posted to (G2).
pub const WEBHOOK_PATH: &str = "/v1/github/webhook";

/// `POST /v1/github/webhook` (G2): no bearer token; the delivery's
/// signature is checked over its raw body before anything is read; a body
/// over [`webhook::MAX_DELIVERY_BYTES`] answers `413`. Answers `{"result":
/// ...}` (and `error` when refused) with [`Received::status`], and counts it.
async fn github_webhook(State(app): State<AppState>, request: Request) -> Response {
    let Some(hook) = app.github.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no such path: {WEBHOOK_PATH} (billet.yaml has no `github:` section)"),
        );
    };
    let (parts, body) = request.into_parts();
    let header_text = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let event = header_text("x-github-event");
    let delivery = header_text("x-github-delivery");
    let signature = header_text(billet_github::SIGNATURE_HEADER);
    let bytes = match tokio::time::timeout(
        BODY_TIMEOUT,
        axum::body::to_bytes(body, webhook::MAX_DELIVERY_BYTES),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            app.shared.metrics.delivery("unverified", "too_large");
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the delivery is larger than the {} bytes allowed",
                    webhook::MAX_DELIVERY_BYTES
                ),
            );
        }
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body did not arrive within {}s", BODY_TIMEOUT.as_secs()),
            );
        }
    };
    let now = app.shared.now();
    let (received, event) = tokio::task::spawn_blocking(move || {
        let received = hook.receive(
            event.as_deref(),
            delivery.as_deref(),
            signature.as_deref(),
            &bytes,
            now,
        );
        let label = webhook::event_label(event.as_deref(), &received);
        (received, label)
    })
    .await
    .unwrap_or_else(|failed| std::panic::resume_unwind(failed.into_panic()));
    app.shared.metrics.delivery(&event, received.result());
    let status =
        StatusCode::from_u16(received.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match &received {
        Received::Unsigned(why) => json!({ "result": received.result(), "error": why.to_string() }),
        Received::Unreadable(why) | Received::Unwritten(why) => {
            json!({ "result": received.result(), "error": why })
        }
        _ => json!({ "result": received.result() }),
    };
    (status, axum::Json(body)).into_response()
}

/// `200 {"status": "ok"}`, or `503 {"status": "degraded", "unreadable":
/// [...]}`: pools whose inventory cannot be read (or whose read has hung past
/// the stall bound, L14), with `"contested": [...]` when another live store
/// launches into some pools (L10), and `"github": "..."` while GitHub's API
/// cannot be used (G8). Either adds `"wall_clock_offset_seconds"`
/// (positive when the wall clock is ahead) while the wall clock and the
/// service's clock are a second or more apart after a step (L24).
async fn healthz(State(app): State<AppState>) -> Response {
    let health = app.shared.health();
    let github = app
        .github
        .as_ref()
        .and_then(|webhook| webhook.api_problem());
    let healthy = health.unreadable.is_empty()
        && health.contested.is_empty()
        && health.store_full.is_none()
        && github.is_none();
    let (status, mut body) = if healthy {
        (StatusCode::OK, json!({ "status": "ok" }))
    } else {
        let mut body = json!({ "status": "degraded", "unreadable": health.unreadable });
        if !health.contested.is_empty() {
            body["contested"] = json!(health.contested);
        }
        if let Some(why) = &health.store_full {
            body["store_full"] = json!(why);
        }
        if let Some(why) = &github {
            body["github"] = json!(why);
        }
        (StatusCode::SERVICE_UNAVAILABLE, body)
    };
    if let Some(offset) = health.wall_clock {
        body["wall_clock_offset_seconds"] = json!(offset.seconds());
    }
    (status, axum::Json(body)).into_response()
}

async fn not_found(request: Request) -> Response {
    let path: String = request.uri().path().chars().take(200).collect();
    error(StatusCode::NOT_FOUND, format!("no such path: {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // L12: a full intake is `503` with `Retry-After`; the other reasons a
    // request goes unanswered are `503` without it (nothing to wait for).
    #[test]
    fn l12_a_full_intake_answers_503_with_retry_after() {
        let full = unanswered(Unanswered::Saturated);
        assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            full.headers().get(header::RETRY_AFTER),
            Some(&HeaderValue::from_static("1"))
        );
        for why in [Unanswered::ShuttingDown, Unanswered::EngineStopped] {
            let answer = unanswered(why);
            assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(answer.headers().get(header::RETRY_AFTER), None);
        }
        let failed = unreadable("disk I/O error");
        assert_eq!(failed.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
