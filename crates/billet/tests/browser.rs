//! The status page in headless Chromium (K6, K7, K9), driven over WebDriver
//! (Debian's `chromium-driver`) against the service in process over the
//! simulated backend: sign in, see a pool fill and drain, follow a job's
//! output, be refused without `read`. A screenshot of each page is saved
//! under `target/tmp/status-page/` for a person to look at.
//!
//! Without `chromedriver` on the `PATH` the tests say so and pass; with
//! `BILLET_BROWSER_REQUIRED=1` (as `.ci/run` sets) they fail instead.

mod client;
mod in_process;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use billet::Limits;
use billet_clock::Clock;
use billet_simulated::{Host, run_for, run_for_writing};
use fantoccini::{Client, ClientBuilder, Locator};
use in_process::*;
use serde_json::{Value, json};

/// Set to `1` to fail, rather than skip, when no browser can be driven.
const REQUIRED_VAR: &str = "BILLET_BROWSER_REQUIRED";

/// Where the screenshots go.
fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A chromedriver of this test's own and a headless Chromium session on it;
/// both are ended when dropped (the driver's whole process group, so no
/// browser outlives a failed test).
struct Browser {
    client: Option<Client>,
    driver: std::process::Child,
}

impl Browser {
    /// The browser, or `None` (after a line on stderr) when there is none.
    async fn start(test: &str) -> Option<Browser> {
        let found = std::process::Command::new("chromedriver")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !found {
            let required = std::env::var(REQUIRED_VAR).is_ok_and(|v| v == "1");
            assert!(!required, "{REQUIRED_VAR}=1 but no `chromedriver` runs");
            eprintln!(
                "skipped {test}: no `chromedriver` on the PATH; install Debian's chromium and chromium-driver, or run `bash .ci/run`"
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = std::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({"args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars",
            ]}),
        );
        let webdriver = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(capabilities.clone())
                .connect(&webdriver)
                .await
            {
                Ok(client) => break client,
                Err(why) => {
                    assert!(Instant::now() < deadline, "no WebDriver session: {why}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Some(Browser {
            client: Some(client),
            driver,
        })
    }

    fn at(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    async fn shot(&self, name: &str) {
        let png = self.at().screenshot().await.unwrap();
        std::fs::write(shots().join(format!("{name}.png")), png).unwrap();
    }

    /// The text of the first element `css` finds, if any (none when the
    /// page reloaded between finding and reading it).
    async fn text(&self, css: &str) -> Option<String> {
        let element = self.at().find(Locator::Css(css)).await.ok()?;
        element.text().await.ok()
    }

    /// An attribute of the first element `css` finds, as [`Browser::text`].
    async fn attr(&self, css: &str, name: &str) -> Option<String> {
        let element = self.at().find(Locator::Css(css)).await.ok()?;
        element.attr(name).await.ok().flatten()
    }

    /// How many characters of output the job page shows.
    async fn output_len(&self) -> usize {
        let Ok(element) = self.at().find(Locator::Id("output")).await else {
            return 0;
        };
        let text = element.prop("textContent").await.ok().flatten();
        text.map_or(0, |text| text.len())
    }

    /// Signs in with `token` through the form.
    async fn sign_in(&self, base: &str, token: &str) {
        self.at().goto(&format!("{base}/sign-in")).await.unwrap();
        let field = self.at().find(Locator::Id("token")).await.unwrap();
        field.send_keys(token).await.unwrap();
        self.at()
            .find(Locator::Id("sign-in"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // A click may answer before the navigation it starts has ended (it
        // did on a busy machine): wait for the answer, a refusal or another
        // page.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.path().await == "/sign-in" && self.text("#refused").await.is_none() {
            assert!(
                Instant::now() < deadline,
                "the sign-in was never answered: {}",
                self.at().source().await.unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks what `css` finds, and waits until the browser is at `path`.
    async fn click_to(&self, css: &str, path: &str) {
        self.at()
            .find(Locator::Css(css))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        until(&format!("at {path}"), async || {
            (self.path().await == path).then_some(())
        })
        .await;
    }

    async fn path(&self) -> String {
        let url = self.at().current_url().await.unwrap();
        match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        }
    }

    async fn end(mut self) {
        if let Some(client) = self.client.take() {
            let _ = client.close().await;
        }
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.driver.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `check` answers `Some`, reloading nothing itself: the page
/// reloads on its own (`/`, and a running job's page).
async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn submit(running: &Running, command: Vec<String>) -> u64 {
    let (status, job): (_, Value) = running
        .call(
            &format!("Bearer {ALL}"),
            "POST",
            "/v1/jobs",
            Some(json!({"command": command, "trust": "trusted"})),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{job}");
    job["id"].as_u64().unwrap()
}

// K6: with no session the page sends the browser to the sign-in form; a
// token without `read`, or no token of the service, is refused there; a
// reader's sign-in leaves a cookie no script can read and no other site's
// page sends; signing out ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_signing_in_and_out_in_a_browser() {
    let Some(browser) = Browser::start("k6_signing_in_and_out_in_a_browser").await else {
        return;
    };
    let host = Host::new();
    let running = start(&host, None, Limits::default()).await;
    let base = running.base.as_str();

    browser.at().goto(&format!("{base}/jobs")).await.unwrap();
    assert_eq!(browser.path().await, "/sign-in");
    browser.shot("sign-in").await;

    browser.sign_in(base, METRICS).await;
    let refused = browser.text("#refused").await.expect("a refusal");
    assert!(refused.contains("lacks the grant `read`"), "{refused}");
    browser.shot("sign-in-refused").await;
    browser
        .sign_in(base, "not-a-token-of-this-service-at-all")
        .await;
    let refused = browser.text("#refused").await.expect("a refusal");
    assert!(refused.contains("not a token of this service"), "{refused}");
    assert!(
        browser
            .at()
            .get_named_cookie(billet::http::page::session::COOKIE)
            .await
            .is_err()
    );
    browser.at().goto(&format!("{base}/")).await.unwrap();
    assert_eq!(browser.path().await, "/sign-in", "still signed out");

    browser.sign_in(base, READER).await;
    assert_eq!(browser.path().await, "/");
    assert!(browser.text("#pools").await.is_some());
    let cookie = browser
        .at()
        .get_named_cookie(billet::http::page::session::COOKIE)
        .await
        .expect("the session cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(
        cookie.same_site().map(|site| site.to_string()).as_deref(),
        Some("Strict")
    );
    assert!(!cookie.value().contains(READER));

    browser.click_to("header form button", "/sign-in").await;
    browser.at().goto(&format!("{base}/")).await.unwrap();
    assert_eq!(browser.path().await, "/sign-in", "signed out");
    browser.end().await;
    running.service.abort();
}

// K7, K9: signed in, a reader sees the pool fill (two held of two, jobs
// queued behind them) and drain while jobs run on the simulated backend,
// without reloading by hand; a running job's page follows its output until
// it ends; the jobs list filters by state and links each job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k7_k9_a_pool_fills_and_drains_and_a_jobs_output_follows() {
    let Some(browser) =
        Browser::start("k7_k9_a_pool_fills_and_drains_and_a_jobs_output_follows").await
    else {
        return;
    };
    let host = Host::new();
    let state = private_dir();
    let (limits, _) = keeping_output(state.path());
    let running = start(&host, Some(state.path()), limits).await;
    let base = running.base.as_str();
    browser.sign_in(base, READER).await;
    assert_eq!(browser.path().await, "/");
    let held = "tr[data-pool='linux'] td.held";
    let queued = "tr[data-pool='linux'] td.queued";
    assert_eq!(browser.text(held).await.as_deref(), Some("0"));

    for _ in 0..4 {
        submit(&running, run_for(Duration::from_secs(6))).await;
    }
    // The main view reloads every five seconds on its own.
    until("the pool full, with jobs queued", async || {
        let full = browser.text(held).await.as_deref() == Some("2")
            && browser.text(queued).await.as_deref() == Some("2");
        full.then_some(())
    })
    .await;
    browser.shot("pools-full").await;
    let held_line = "svg.chart[data-pool='linux'] path.held";
    until(
        "the chart's held line at the top (y = 8), where the capacity is",
        async || {
            let d = browser.attr(held_line, "d").await?;
            (d.contains("V8h") || d.contains(",8h")).then_some(())
        },
    )
    .await;
    until("the pool drained", async || {
        let totals = browser.text("#totals").await.unwrap_or_default();
        (browser.text(held).await.as_deref() == Some("0") && totals.contains("4 finished"))
            .then_some(())
    })
    .await;
    browser.shot("pools").await;

    // A job that writes 6,000 bytes over four seconds: its page, opened
    // once, shows more of it at each of its own reloads.
    let id = submit(&running, run_for_writing(Duration::from_secs(4), 6_000)).await;
    browser
        .at()
        .goto(&format!("{base}/jobs/{id}"))
        .await
        .unwrap();
    let first = until("the job running, part of its output shown", async || {
        let running = browser.text("#state").await.as_deref() == Some("running");
        let shown = browser.output_len().await;
        (running && browser.text("#following").await.is_some() && shown > 0 && shown < 6_000)
            .then_some(shown)
    })
    .await;
    browser.shot("job-running").await;
    until(
        "more of the output, the page reloading itself",
        async || {
            let shown = browser.output_len().await;
            (shown > first).then_some(())
        },
    )
    .await;
    until("the job finished with all its output", async || {
        let ended = browser.text("#state").await.as_deref() == Some("finished");
        let source = browser.at().source().await.unwrap_or_default();
        let shown = browser.output_len().await;
        (ended && !source.contains(r#"id="following""#) && shown == 6_000).then_some(())
    })
    .await;
    assert_eq!(browser.text("#exit").await.as_deref(), Some("0"));
    browser.shot("job").await;

    browser
        .at()
        .goto(&format!("{base}/jobs?state=finished"))
        .await
        .unwrap();
    let rows = browser
        .at()
        .find_all(Locator::Css("#jobs tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 5);
    assert_eq!(
        browser.text(".filters a.on").await.as_deref(),
        Some("finished")
    );
    browser.shot("jobs").await;
    browser
        .click_to(
            &format!("#jobs a[href='/jobs/{id}']"),
            &format!("/jobs/{id}"),
        )
        .await;
    browser.end().await;
    running.service.abort();
}

// K7: an hour of a busy pool, in modelled time (the service on a manual
// clock, moved twenty seconds at a time once it is quiescent, H13): jobs
// of one or two minutes arrive, for twenty minutes faster than the pool's
// two leases run them, then slowly; the chart then draws an hour of steps,
// the queue rising above the capacity and draining, held falling below it.
// Its screenshot is the README's (`docs/status-page.png`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k7_an_hour_of_a_busy_pool_in_modelled_time() {
    let Some(browser) = Browser::start("k7_an_hour_of_a_busy_pool_in_modelled_time").await else {
        return;
    };
    let start = std::time::SystemTime::now() - Duration::from_secs(3_600);
    let manual = Arc::new(billet_clock::ManualClock::new(start));
    let host = Host::new();
    let running = start_on(&host, None, Limits::default(), manual.clone()).await;
    let bound = Duration::from_secs(20);
    for minute in 0u64..60 {
        // Busy for twenty minutes (two jobs a minute, more than two leases
        // hold), then quiet (one every three minutes): the queue builds up,
        // then drains.
        let arriving = match minute {
            0..20 => 2,
            _ if minute % 3 == 0 => 1,
            _ => 0,
        };
        for n in 0..arriving {
            submit(
                &running,
                run_for(Duration::from_secs(60 + 60 * ((minute + n) % 2))),
            )
            .await;
        }
        for _ in 0..3 {
            let now = manual.now();
            running
                .service
                .quiescent(now, bound)
                .await
                .unwrap_or_else(|last| panic!("not quiescent at {now:?}: {last:?}"));
            manual.advance(Duration::from_secs(20)).unwrap();
        }
    }
    let now = manual.now();
    running
        .service
        .quiescent(now, bound)
        .await
        .expect("quiescent");
    running.service.settled(bound).await.expect("settled");
    let base = running.base.as_str();
    browser.sign_in(base, READER).await;
    assert_eq!(browser.path().await, "/");
    let held = browser
        .attr("svg.chart[data-pool='linux'] path.held", "d")
        .await
        .expect("the held line");
    let queued = browser
        .attr("svg.chart[data-pool='linux'] path.queued", "d")
        .await
        .expect("the queue's line");
    // An hour of steps from the left edge (x = 36): held at the capacity,
    // then below it; the queue up, then down to the floor (y = 88).
    assert!(held.starts_with("M36,"), "{held}");
    assert!(held.matches('V').count() >= 2, "{held}");
    assert!(queued.matches('V').count() >= 4, "{queued}");
    assert!(queued.contains("V88h"), "the queue drained: {queued}");
    let top: u64 = browser
        .attr("svg.chart[data-pool='linux']", "data-top")
        .await
        .unwrap()
        .parse()
        .unwrap();
    assert!(top > 2, "jobs waited beyond the two leases: top {top}");
    browser.shot("pools-hour").await;
    browser.end().await;
    running.service.abort();
}
