//! The listener (L4, L5): axum routes over the engine and the committed
//! table. Every path but `/healthz` needs the bearer token; a request that
//! fails a check is answered before anything is asked of the engine.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::api::{self, BadRequest, JobView};
use crate::engine::{Cancelled, EngineHandle, PoolView, Shared, Stopping, Submitted};
use crate::token::Token;

/// The answer of `GET /v1/jobs`.
#[derive(serde::Serialize)]
struct JobList {
    jobs: Vec<JobView>,
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
    /// The bearer token.
    pub token: Token,
}

/// The service's routes, with the token and shutdown checks in front.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/jobs", get(list_jobs).post(submit))
        .route("/v1/jobs/{id}", get(get_job).delete(cancel))
        .route("/v1/pools", get(pools))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
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

fn job(status: StatusCode, view: JobView) -> Response {
    (status, axum::Json(view)).into_response()
}

fn stopping(_: Stopping) -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, "billet is shutting down")
}

/// Refuses every request once shutdown began (503), and every request but
/// `/healthz` without the token (401).
async fn guard(State(app): State<AppState>, request: Request, next: Next) -> Response {
    if !app.shared.accepting.load(Ordering::SeqCst) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "billet is shutting down");
    }
    if request.uri().path() != "/healthz" {
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        let allowed = presented.is_some_and(|token| app.token.matches(token.trim()));
        if !allowed {
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

async fn submit(State(app): State<AppState>, body: Body) -> Response {
    let Ok(bytes) = axum::body::to_bytes(body, api::MAX_BODY_BYTES).await else {
        return error(StatusCode::PAYLOAD_TOO_LARGE, api::too_large());
    };
    let new = match api::parse_job(&bytes) {
        Ok(new) => new,
        Err(request) => return bad(&request),
    };
    match app.engine.submit(new).await {
        Ok(Submitted::Created(view)) => job(StatusCode::CREATED, view),
        Ok(Submitted::Existing(view)) => job(StatusCode::OK, view),
        Ok(Submitted::Refused(reason)) => error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("no pool can ever take this job: {reason}"),
        ),
        Err(stop) => stopping(stop),
    }
}

async fn list_jobs(State(app): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let state = match api::parse_list_query(query.as_deref()) {
        Ok(state) => state,
        Err(request) => return bad(&request),
    };
    let jobs: Vec<JobView> = app
        .shared
        .jobs
        .read()
        .iter()
        .filter(|record| state.is_none_or(|state| record.state == state))
        .map(crate::jobs::JobRecord::view)
        .collect();
    (StatusCode::OK, axum::Json(JobList { jobs })).into_response()
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

async fn get_job(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let found = job_id(&id).and_then(|n| app.shared.jobs.read().get(n).map(|r| r.view()));
    match found {
        Some(view) => job(StatusCode::OK, view),
        None => unknown(&id),
    }
}

async fn cancel(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    let Some(n) = job_id(&id) else {
        return unknown(&id);
    };
    if app.shared.jobs.read().get(n).is_none() {
        return unknown(&id);
    }
    match app.engine.cancel(n).await {
        Ok(Cancelled::Done(view)) => job(StatusCode::OK, view),
        Ok(Cancelled::Ended(view)) => job(StatusCode::CONFLICT, view),
        Ok(Cancelled::Unknown) => unknown(&id),
        Err(stop) => stopping(stop),
    }
}

async fn pools(State(app): State<AppState>) -> Response {
    let pools = app.shared.pools.read().clone();
    (StatusCode::OK, axum::Json(PoolList { pools })).into_response()
}

async fn metrics(State(app): State<AppState>) -> Response {
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

async fn healthz(State(app): State<AppState>) -> Response {
    let unreadable: Vec<String> = app.shared.unreadable.lock().iter().cloned().collect();
    if unreadable.is_empty() {
        (StatusCode::OK, axum::Json(json!({ "status": "ok" }))).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "status": "degraded", "unreadable": unreadable })),
        )
            .into_response()
    }
}

async fn not_found(request: Request) -> Response {
    let path: String = request.uri().path().chars().take(200).collect();
    error(StatusCode::NOT_FOUND, format!("no such path: {path}"))
}
