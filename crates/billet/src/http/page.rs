//! The status page (K6-K9): read-only HTML on the service's listener.
//!
//! * `GET /`: the pools (held, capacity, queued, what is wrong and why) with
//!   a chart each of the last hour ([`crate::history`]), and the totals.
//! * `GET /jobs?state=S&after=N`: one page of jobs, as `GET /v1/jobs` reads
//!   them; `GET /jobs/{id}`: a job's fields and its output's tail, reloading
//!   while it runs.
//! * `GET /sign-in`, `POST /sign-in`, `POST /sign-out`: a session in an
//!   `HttpOnly`, `SameSite=Strict` cookie ([`session`]), for a token with
//!   the grant `read`; a `Bearer` header is taken too (scripts, curl).
//!
//! Every answer carries [`CSP`]: no script runs, nothing loads from outside
//! the service, no other site may frame it. Nothing here changes a job:
//! the only `POST`s start and end a session, so a forged request has
//! nothing to forge. The API under `/v1` never reads the cookie.

pub mod chart;
pub mod session;
pub mod view;

use std::io::{Read, Seek, SeekFrom};

use axum::Router;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::Markup;

use super::AppState;
use crate::output::OutputStore;
use crate::token::Grant;
use view::{Overview, Tail};

/// Where the page's one stylesheet is served.
pub const STYLESHEET: &str = "/assets/billet.css";

const CSS: &str = include_str!("page/billet.css");

/// The `Content-Security-Policy` of every page: nothing but the service's
/// own stylesheet loads, no script runs (not even inline), forms post only
/// to the service, and no other page may frame it.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
                       form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The most of a job's output its page shows: the last this many bytes.
pub const OUTPUT_TAIL: u64 = 64 * 1024;

/// The largest sign-in form read.
pub const MAX_FORM_BYTES: usize = 4096;

/// Whether `path` is the page's (the guard lets these through without a
/// bearer token: they check a session or a token themselves).
pub fn is_page(path: &str) -> bool {
    matches!(path, "/" | "/jobs" | "/sign-in" | "/sign-out" | STYLESHEET)
        || path.starts_with("/jobs/")
}

/// The page's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route("/jobs", get(jobs))
        .route("/jobs/{id}", get(job))
        .route("/sign-in", get(sign_in_form).post(sign_in))
        .route("/sign-out", post(sign_out))
        .route(STYLESHEET, get(stylesheet))
}

/// `markup` with `status` and the page's headers.
fn page(status: StatusCode, markup: Markup) -> Response {
    let mut response = (status, markup.into_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure(headers);
    response
}

/// The headers every answer of the page carries.
fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// `303 See Other` to `to`.
fn see_other(to: &'static str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(to));
    secure(response.headers_mut());
    response
}

/// The session cookie's id in `headers`, if one is sent.
fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(session::from_cookie)
}

/// Why a page is not shown to who asks (a session's caller, else a bearer
/// token's): a redirect to the sign-in form for neither, `403` for a
/// caller without `read`; `None` when it may be shown.
fn refusal(app: &AppState, headers: &HeaderMap) -> Option<Response> {
    let now = app.shared.now();
    let caller = session_id(headers)
        .and_then(|id| app.sessions.caller(id, now))
        .or_else(|| {
            headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(super::bearer)
                .and_then(|token| app.credentials.caller(token))
        });
    match caller {
        None => Some(see_other("/sign-in")),
        Some(caller) if !caller.grants.has(Grant::Read) => Some(page(
            StatusCode::FORBIDDEN,
            view::problem("forbidden", &lacks_read()),
        )),
        Some(_) => None,
    }
}

fn lacks_read() -> String {
    format!(
        "this credential lacks the grant `{}`, which the status page needs",
        Grant::Read
    )
}

async fn stylesheet() -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response();
    secure(response.headers_mut());
    response
}

async fn sign_in_form() -> Response {
    page(StatusCode::OK, view::sign_in(None))
}

/// The sign-in form's body.
#[derive(serde::Deserialize)]
struct SignIn {
    token: String,
}

/// Whether a sign-in comes from the page's own form: a browser says where a
/// form was posted from (`Sec-Fetch-Site`, else `Origin`), and another
/// site's page may not sign a viewer in (login forgery). A client that says
/// neither (curl) is taken.
fn from_this_site(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return matches!(site, "same-origin" | "none");
    }
    match (text("origin"), text("host")) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|origin_host| origin_host.eq_ignore_ascii_case(host)),
        (Some(_), None) => false,
    }
}

async fn sign_in(State(app): State<AppState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if !from_this_site(&parts.headers) {
        return page(
            StatusCode::FORBIDDEN,
            view::sign_in(Some("a sign-in posted from another site's page is refused")),
        );
    }
    let bytes = match tokio::time::timeout(
        super::BODY_TIMEOUT,
        axum::body::to_bytes(body, MAX_FORM_BYTES),
    )
    .await
    {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) | Err(_) => {
            return page(
                StatusCode::PAYLOAD_TOO_LARGE,
                view::sign_in(Some(&format!(
                    "the form did not arrive whole within {} bytes and {} s",
                    MAX_FORM_BYTES,
                    super::BODY_TIMEOUT.as_secs()
                ))),
            );
        }
    };
    let Ok(form) = serde_urlencoded::from_bytes::<SignIn>(&bytes) else {
        return page(
            StatusCode::BAD_REQUEST,
            view::sign_in(Some("the form has no field `token`")),
        );
    };
    let Some(caller) = app.credentials.caller(form.token.trim()) else {
        return page(
            StatusCode::UNAUTHORIZED,
            view::sign_in(Some("that is not a token of this service")),
        );
    };
    if !caller.grants.has(Grant::Read) {
        return page(StatusCode::FORBIDDEN, view::sign_in(Some(&lacks_read())));
    }
    let id = app.sessions.start(caller, app.shared.now());
    let secure = parts
        .headers
        .get("origin")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|origin| origin.starts_with("https://"));
    let mut response = see_other("/");
    if let Ok(cookie) = HeaderValue::from_str(&session::set_cookie(&id, secure)) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

async fn sign_out(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(id) = session_id(&headers) {
        app.sessions.end(id);
    }
    let mut response = see_other("/sign-in");
    if let Ok(cookie) = HeaderValue::from_str(&session::clear_cookie()) {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

async fn overview(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(refused) = refusal(&app, &headers) {
        return refused;
    }
    let now = app.shared.now();
    let pools = app.shared.pools();
    let charts = app.charts.drawn(&app.shared.history, now);
    let health = app.shared.health();
    let overview = {
        let stats = app.shared.stats.read();
        Overview {
            queued: stats.queued,
            held: stats.leases(),
            accepted: stats.accepted,
            finished: stats.finished,
            failed: stats.failed,
            cancelled: stats.cancelled,
            unreadable: health.unreadable,
            store_full: health.store_full,
            github: app.github.as_ref().and_then(|hook| hook.api_problem()),
        }
    };
    page(StatusCode::OK, view::overview(&pools, &charts, &overview))
}

async fn jobs(
    State(app): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if let Some(refused) = refusal(&app, &headers) {
        return refused;
    }
    let query = match crate::api::parse_list_query(query.as_deref()) {
        Ok(query) => query,
        Err(bad) => {
            return page(
                StatusCode::BAD_REQUEST,
                view::problem("bad request", &bad.to_string()),
            );
        }
    };
    let state = query.state;
    let output = app.output.clone();
    let found = super::off_the_workers(&app, move |shared| {
        crate::jobs::page(&shared.jobs, query).map(|page| {
            let jobs: Vec<_> = page
                .jobs
                .iter()
                .map(|record| super::shown(output.as_deref(), crate::api::JobView::of(record)))
                .collect();
            (jobs, page.next)
        })
    })
    .await;
    match found {
        Ok((list, next)) => page(
            StatusCode::OK,
            view::jobs(&list, state, next, app.shared.now()),
        ),
        Err(why) => unreadable(&why.to_string()),
    }
}

fn unreadable(why: &str) -> Response {
    page(
        StatusCode::INTERNAL_SERVER_ERROR,
        view::problem("unreadable", &format!("the store could not be read: {why}")),
    )
}

async fn job(State(app): State<AppState>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(refused) = refusal(&app, &headers) {
        return refused;
    }
    let unknown = || {
        let shown: String = id.chars().take(64).collect();
        page(
            StatusCode::NOT_FOUND,
            view::problem("no such job", &format!("no job with id {shown:?}")),
        )
    };
    let Ok(n) = id.parse::<u64>() else {
        return unknown();
    };
    let webhook = app.github.clone();
    let output = app.output.clone();
    let found = super::off_the_workers(&app, move |shared| {
        let view = super::job_view(shared, webhook.as_deref(), n)?;
        Ok::<_, String>(view.map(|view| {
            let view = super::shown(output.as_deref(), view);
            let tail = output.as_deref().map(|output| tail(output, n));
            (view, tail)
        }))
    })
    .await;
    match found {
        Ok(Some((view, tail))) => page(
            StatusCode::OK,
            view::job(&view, tail.as_ref(), app.shared.now()),
        ),
        Ok(None) => unknown(),
        Err(why) => unreadable(&why),
    }
}

/// The last [`OUTPUT_TAIL`] bytes kept of job `id`'s output, and how many
/// come before them; nothing when none is kept (or it cannot be read).
fn tail(output: &OutputStore, id: u64) -> Tail {
    let read = || -> std::io::Result<Tail> {
        let mut file = std::fs::File::open(output.path(id))?;
        let len = file.metadata()?.len();
        let skipped = len.saturating_sub(OUTPUT_TAIL);
        file.seek(SeekFrom::Start(skipped))?;
        let mut bytes = Vec::with_capacity((len - skipped) as usize);
        file.take(OUTPUT_TAIL).read_to_end(&mut bytes)?;
        Ok(Tail {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            skipped,
        })
    };
    read().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert(*name, HeaderValue::from_static(value));
        }
        headers
    }

    // K6: a browser's word on where a sign-in was posted from decides
    // (Sec-Fetch-Site first, else Origin against Host); a client that says
    // neither is taken.
    #[test]
    fn k6_a_sign_in_from_another_site_is_told_apart() {
        let host = ("host", "billet.example:7878");
        for (pairs, taken) in [
            (vec![], true),
            (vec![host], true),
            (vec![("sec-fetch-site", "same-origin"), host], true),
            (vec![("sec-fetch-site", "none"), host], true),
            (vec![("sec-fetch-site", "cross-site"), host], false),
            (vec![("sec-fetch-site", "same-site"), host], false),
            // Sec-Fetch-Site is what decides when a browser sends it, even
            // with an Origin of `null` (a page with no referrer).
            (
                vec![("sec-fetch-site", "same-origin"), ("origin", "null"), host],
                true,
            ),
            (vec![("origin", "http://billet.example:7878"), host], true),
            (vec![("origin", "https://BILLET.example:7878"), host], true),
            (vec![("origin", "http://evil.example"), host], false),
            (vec![("origin", "null"), host], false),
            (vec![("origin", "http://billet.example:7878")], false),
        ] {
            assert_eq!(from_this_site(&headers(&pairs)), taken, "{pairs:?}");
        }
    }

    // K8: what a page is answered with says its policy and refuses framing,
    // sniffing, caching and referrers to other sites.
    #[test]
    fn k8_every_answer_of_the_page_carries_its_headers() {
        for response in [
            page(StatusCode::OK, view::sign_in(None)),
            see_other("/sign-in"),
        ] {
            let headers = response.headers();
            assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CSP);
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
            assert_eq!(headers[header::REFERRER_POLICY], "same-origin");
            assert_eq!(headers[header::CACHE_CONTROL], "no-store");
        }
    }
}
