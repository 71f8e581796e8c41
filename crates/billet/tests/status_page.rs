//! The status page over HTTP (K6-K9), the service in process over the
//! simulated backend: who may see it and how a session is kept, the headers
//! every page carries, that a job's text is escaped, and that the pool's
//! chart draws what the engine did. The same pages in a real browser are
//! `tests/browser.rs`.

mod client;
mod in_process;

use std::time::{Duration, Instant};

use billet::Limits;
use billet::http::page::{CSP, STYLESHEET, session};
use billet_simulated::{Host, run_for};
use in_process::*;
use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::json;

/// A client that follows no redirect, so the tests see each `303`.
fn browserless() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn get(base: &str, path: &str, headers: &[(&str, String)]) -> Answer {
    let mut request = browserless().get(format!("{base}{path}"));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    answer(request).await
}

async fn answer(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.unwrap();
    Answer {
        status: response.status(),
        headers: response.headers().clone(),
        body: response.text().await.unwrap(),
    }
}

async fn sign_in(base: &str, token: &str, origin: Option<&str>) -> Answer {
    let mut request = browserless()
        .post(format!("{base}/sign-in"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(format!("token={token}"));
    if let Some(origin) = origin {
        request = request.header(header::ORIGIN, origin);
    }
    answer(request).await
}

/// The `Cookie` header that sends back the session a sign-in set.
fn cookie_of(signed_in: &Answer) -> String {
    let set = signed_in.headers[header::SET_COOKIE].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

// K6: no credential is sent to the sign-in form; a token without `read`
// is refused there as on the page; a sign-in from another site's page sets
// no session; a session is a strict cookie that the API never reads, and
// signing out ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_who_may_see_the_page_and_how_a_session_is_kept() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let base = running.base.as_str();

    let none = get(base, "/", &[]).await;
    assert_eq!(none.status, StatusCode::SEE_OTHER);
    assert_eq!(none.headers[header::LOCATION], "/sign-in");
    let form = get(base, "/sign-in", &[]).await;
    assert_eq!(form.status, StatusCode::OK);
    assert!(
        form.body
            .contains(r#"<form class="sign-in" method="post" action="/sign-in">"#)
    );

    let metrics_only = get(base, "/jobs", &[bearer(METRICS)]).await;
    assert_eq!(metrics_only.status, StatusCode::FORBIDDEN);
    assert!(
        metrics_only.body.contains("lacks the grant `read`"),
        "{}",
        metrics_only.body
    );
    assert_eq!(
        get(base, "/", &[bearer(READER)]).await.status,
        StatusCode::OK
    );

    let refused = sign_in(base, METRICS, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(refused.headers.get(header::SET_COOKIE).is_none());
    let wrong = sign_in(base, "not-a-token-of-this-service-at-all", None).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(wrong.body.contains("not a token of this service"));
    let forged = sign_in(base, READER, Some("http://evil.example")).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(forged.headers.get(header::SET_COOKIE).is_none());

    let host_header = base.trim_start_matches("http://");
    let signed_in = sign_in(base, READER, Some(&format!("http://{host_header}"))).await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
    assert_eq!(signed_in.headers[header::LOCATION], "/");
    let set = signed_in.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(set.starts_with(&format!("{}=", session::COOKIE)), "{set}");
    assert!(
        set.contains("; HttpOnly") && set.contains("; SameSite=Strict"),
        "{set}"
    );
    assert!(
        !set.contains(READER),
        "the token is never the cookie: {set}"
    );
    let cookie = cookie_of(&signed_in);

    let page = get(base, "/", &[("cookie", cookie.clone())]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains(r#"<table id="pools">"#), "{}", page.body);
    // The API under /v1 reads bearer tokens alone.
    let api = get(base, "/v1/jobs", &[("cookie", cookie.clone())]).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);

    let out = answer(
        browserless()
            .post(format!("{base}/sign-out"))
            .header("cookie", cookie.clone()),
    )
    .await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        out.headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let after = get(base, "/", &[("cookie", cookie)]).await;
    assert_eq!(
        after.status,
        StatusCode::SEE_OTHER,
        "a session ended stays ended"
    );
    running.service.abort();
}

// K8: every page says its Content-Security-Policy and refuses framing; the
// stylesheet is the service's own; what a job carries is shown as text,
// never as markup; bad queries and unknown jobs are clear errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8_pages_are_strict_escaped_and_say_what_is_wrong() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let base = running.base.as_str();
    let (status, job) = running
        .call(
            &format!("Bearer {ALL}"),
            "POST",
            "/v1/jobs",
            Some(json!({"command": ["echo", "<script>alert(1)</script>", "<b>x</b>"], "trust": "trusted"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    let id = job["id"].as_u64().unwrap();

    for path in [
        "/",
        "/jobs",
        &format!("/jobs/{id}"),
        "/jobs?state=bogus",
        "/sign-in",
    ] {
        let page = get(base, path, &[bearer(READER)]).await;
        assert_eq!(page.headers[header::CONTENT_SECURITY_POLICY], CSP, "{path}");
        assert_eq!(page.headers[header::X_FRAME_OPTIONS], "DENY", "{path}");
        assert_eq!(page.headers[header::CACHE_CONTROL], "no-store", "{path}");
        assert!(
            page.headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/html"),
            "{path}"
        );
        assert!(!page.body.contains("<script"), "{path}: {}", page.body);
        assert!(!page.body.contains("style="), "{path}: no inline style");
    }
    assert!(CSP.starts_with("default-src 'none'"));
    let shown = get(base, &format!("/jobs/{id}"), &[bearer(READER)]).await;
    assert!(
        shown.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        shown.body
    );
    assert!(
        shown.body.contains("&lt;b&gt;x&lt;/b&gt;"),
        "{}",
        shown.body
    );
    let listed = get(base, "/jobs", &[bearer(READER)]).await;
    assert!(
        listed
            .body
            .contains(&format!(r#"<a href="/jobs/{id}">{id}</a>"#)),
        "{}",
        listed.body
    );

    let bad = get(base, "/jobs?state=bogus", &[bearer(READER)]).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("is not a state"), "{}", bad.body);
    let unknown = get(base, "/jobs/99999", &[bearer(READER)]).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.body.contains("no job with id"), "{}", unknown.body);
    let style = get(base, STYLESHEET, &[]).await;
    assert_eq!(style.status, StatusCode::OK);
    assert!(
        style.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
    assert!(style.body.contains("svg.chart"));
    running.service.abort();
}

// K7: the main view says each pool's figures and draws its chart from what
// the engine did: with two jobs held at once in a pool of two, the held
// line reaches the capacity line; once they end, the figures are 0 and the
// totals count them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k7_the_pools_view_shows_a_pool_filled_and_drained() {
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let base = running.base.as_str();
    for _ in 0..3 {
        let (status, _) = running
            .call(
                &format!("Bearer {ALL}"),
                "POST",
                "/v1/jobs",
                Some(json!({"command": run_for(Duration::from_millis(400)), "trust": "trusted"})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let page = get(base, "/", &[bearer(READER)]).await;
        if page.body.contains("3 finished") {
            break page;
        }
        assert!(
            Instant::now() < deadline,
            "the jobs never finished: {}",
            page.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let row = r#"<tr data-pool="linux"><td>linux</td><td>docker</td><td class="n held">0</td><td class="n">2</td><td class="n queued">0</td>"#;
    assert!(page.body.contains(row), "{}", page.body);
    // The scale's top is 2 (the capacity; at most one job waited): the held
    // line touches the top (y = 8), where the capacity is (each bucket
    // draws the most held in it; the row above says 0 now).
    let chart = &page.body[page
        .body
        .find(r#"data-pool="linux" data-top="2""#)
        .expect("the chart")..];
    assert!(
        chart.contains(r#"<line class="capacity" x1="36" y1="8""#),
        "{chart}"
    );
    let held = chart
        .split(r#"<path class="held" d=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the held line");
    assert!(held.contains("V8h") || held.contains(",8h"), "{held}");
    running.service.abort();
}
