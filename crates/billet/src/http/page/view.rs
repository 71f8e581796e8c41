//! The status page's HTML (K6-K9), rendered on the server by maud: every
//! value is escaped where it is written, so a job's command, labels or
//! output cannot add markup to the page. No script, no inline style, no
//! resource from outside the service.

use std::sync::Arc;
use std::time::SystemTime;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use crate::api::{JobView, relative};
use crate::engine::PoolView;
use crate::record::JobState;

/// Characters of a command shown in the jobs' table.
pub const COMMAND_CHARS: usize = 80;

/// How the main view's figures are read: the service's totals since it
/// started, and what is wrong now.
#[derive(Debug, Default)]
pub struct Overview {
    /// Jobs waiting for a lease.
    pub queued: u64,
    /// Leases held.
    pub held: u64,
    /// Jobs accepted, finished, failed and cancelled since the service
    /// started.
    pub accepted: u64,
    /// See `accepted`.
    pub finished: u64,
    /// See `accepted`.
    pub failed: u64,
    /// See `accepted`.
    pub cancelled: u64,
    /// Pools whose inventory cannot be read, or whose read hangs.
    pub unreadable: Vec<String>,
    /// Why the store cannot commit, while it cannot.
    pub store_full: Option<String>,
    /// Why GitHub's API cannot be used, while it cannot.
    pub github: Option<String>,
}

/// The page around `body`: title, stylesheet, navigation; `refresh` (in
/// seconds) reloads it.
pub fn layout(title: &str, signed_in: bool, refresh: Option<&str>, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(refresh) = refresh {
                    meta http-equiv="refresh" content=(refresh);
                }
                title { "billet · " (title) }
                link rel="stylesheet" href=(super::STYLESHEET);
            }
            body {
                header {
                    a.brand href="/" { "billet" }
                    @if signed_in {
                        nav {
                            a href="/" { "pools" }
                            a href="/jobs" { "jobs" }
                        }
                        form method="post" action="/sign-out" {
                            button type="submit" { "sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The sign-in form, with why the last try was refused.
pub fn sign_in(refused: Option<&str>) -> Markup {
    layout(
        "sign in",
        false,
        None,
        &html! {
            h1 { "Sign in" }
            p.soft {
                "Paste a token of this service's token file (the first line of "
                code { "billet-state/token" } ", or a line with the grant " code { "read" }
                "). It is sent once, in this form's body; the browser keeps only a session cookie."
            }
            @if let Some(why) = refused {
                p.error id="refused" { (why) }
            }
            form.sign-in method="post" action="/sign-in" {
                label for="token" { "Token" }
                input id="token" name="token" type="password" autocomplete="off" required;
                button type="submit" id="sign-in" { "Sign in" }
            }
        },
    )
}

/// A page saying what went wrong, for an answer that is not `200`.
pub fn problem(title: &str, why: &str) -> Markup {
    layout(
        title,
        true,
        None,
        &html! {
            h1 { (title) }
            p.error id="problem" { (why) }
        },
    )
}

/// The main view: every pool's figures and chart (`charts`, SVG in the
/// pools' order), and the service's totals. Reloads every five seconds.
pub fn overview(pools: &[PoolView], charts: &[Arc<str>], overview: &Overview) -> Markup {
    layout(
        "pools",
        true,
        Some("5"),
        &html! {
            h1 { "Pools" }
            @if let Some(why) = &overview.store_full {
                p.problem { "The store cannot commit for lack of space: " (why) }
            }
            @if let Some(why) = &overview.github {
                p.problem { "GitHub's API cannot be used: " (why) }
            }
            p id="totals" {
                a href="/jobs?state=queued" { (overview.queued) " queued" } ", "
                a href="/jobs?state=running" { (overview.held) " running" } "; since start: "
                (overview.accepted) " accepted, "
                a href="/jobs?state=finished" { (overview.finished) " finished" } ", "
                a href="/jobs?state=failed" { (overview.failed) " failed" } ", "
                a href="/jobs?state=cancelled" { (overview.cancelled) " cancelled" }
            }
            table id="pools" {
                thead { tr {
                    th { "pool" } th { "kind" } th.n { "held" } th.n { "capacity" }
                    th.n { "queued" } th { "state" }
                } }
                tbody {
                    @for pool in pools {
                        tr data-pool=(pool.name) {
                            td { (pool.name) }
                            td { (pool.kind) }
                            td.n.held { (pool.held) }
                            td.n { (pool.capacity) }
                            td.n.queued { (pool.queued) }
                            td.health { (pool_state(pool, overview)) }
                        }
                    }
                }
            }
            p.key.soft {
                span.held { "━ leases held" } " · " span.queued { "━ jobs queued" }
                " · ┄ capacity; the most of each in every " (crate::history::STEP.as_secs()) " s of the last hour"
            }
            div.pools {
                @for (n, pool) in pools.iter().enumerate() {
                    section.pool {
                        h2 { (pool.name) }
                        @if let Some(svg) = charts.get(n) {
                            (PreEscaped(&**svg))
                        }
                    }
                }
            }
        },
    )
}

/// What is wrong with `pool`, with the reason; `ok` when nothing is.
fn pool_state(pool: &PoolView, overview: &Overview) -> Markup {
    let unreadable = overview.unreadable.contains(&pool.name);
    html! {
        @if unreadable {
            span.problem { "unreadable: " }
            "its last inventory could not be read, or its read is hanging; nothing new is placed on it until one is"
            br;
        }
        @if pool.contested > 0 {
            span.problem { "contested: " }
            (pool.contested) " instances of this deployment launched by another store while this service runs, counted against room"
            br;
        }
        @if pool.leftovers > 0 {
            span.soft { (pool.leftovers) " leftovers of another store, collected as orphans" }
            br;
        }
        @if pool.unsettled > 0 {
            span.soft { (pool.unsettled) " given up on, counted until an inventory shows them gone" }
            br;
        }
        @if !unreadable && pool.contested == 0 {
            span.ok { "ok" }
        }
    }
}

/// One page of jobs, filtered by `state`, with a link to the next page.
pub fn jobs(
    list: &[JobView],
    state: Option<JobState>,
    next: Option<u64>,
    now: SystemTime,
) -> Markup {
    let filter = |to: Option<JobState>| match to {
        Some(state) => format!("/jobs?state={}", state.as_str()),
        None => "/jobs".to_owned(),
    };
    let title = match state {
        Some(state) => format!("{} jobs", state.as_str()),
        None => "jobs".to_owned(),
    };
    layout(
        &title,
        true,
        None,
        &html! {
            h1 { "Jobs" }
            p.filters {
                a class=[(state.is_none()).then_some("on")] href=(filter(None)) { "all" }
                @for each in JobState::ALL {
                    a class=[(state == Some(each)).then_some("on")] href=(filter(Some(each))) { (each.as_str()) }
                }
            }
            @if list.is_empty() {
                p.soft id="none" { "No job here." }
            } @else {
                table id="jobs" {
                    thead { tr {
                        th.n { "id" } th { "state" } th { "pool" } th { "command" }
                        th { "submitted" } th.n { "exit" }
                    } }
                    tbody {
                        @for job in list {
                            tr data-job=(job.id) {
                                td.n { a href=(format!("/jobs/{}", job.id)) { (job.id) } }
                                td { span class=(format!("state {}", job.state.as_str())) { (job.state.as_str()) } }
                                td { (job.pool.as_deref().unwrap_or("-")) }
                                td.command { (cut(&command_line(&job.command), COMMAND_CHARS)) }
                                td title=(job.submitted_at) { (when(&job.submitted_at, now)) }
                                td.n { (job.exit_code.map_or_else(|| "-".to_owned(), |code| code.to_string())) }
                            }
                        }
                    }
                }
            }
            @if let Some(next) = next {
                p { a id="next" href=(format!("{}{}after={next}", filter(state), if state.is_some() { "&" } else { "?" })) { "next page →" } }
            }
        },
    )
}

/// What is shown of a job's output: its last bytes, and how many came before.
#[derive(Debug, Default)]
pub struct Tail {
    /// The text shown (lossily decoded).
    pub text: String,
    /// Bytes kept before what is shown.
    pub skipped: u64,
}

/// Job `view`'s page: its fields, and its output's tail when the service
/// keeps output. While the job has not ended, the page reloads every two
/// seconds, its output's box scrolled to the end: the output follows live.
pub fn job(view: &JobView, output: Option<&Tail>, now: SystemTime) -> Markup {
    let ended = view.state.has_ended();
    // No URL in the refresh: a fragment (`#end`) would make it a scroll
    // within the page, not a reload. The output's box keeps its end in view
    // instead (`column-reverse`, in the stylesheet).
    let refresh = (!ended).then_some("2");
    let times = [
        ("submitted", Some(view.submitted_at.as_str())),
        ("started", view.started_at.as_deref()),
        ("ended", view.ended_at.as_deref()),
    ];
    layout(
        &format!("job {}", view.id),
        true,
        refresh,
        &html! {
            h1 { "Job " (view.id) " " span id="state" class=(format!("state {}", view.state.as_str())) { (view.state.as_str()) } }
            dl.fields {
                dt { "command" } dd { code id="command" { (command_line(&view.command)) } }
                dt { "labels" } dd { (if view.labels.is_empty() { "-".to_owned() } else { view.labels.join(", ") }) }
                dt { "trust" } dd { (view.trust) }
                dt { "pool" } dd { (view.pool.as_deref().unwrap_or("-")) }
                dt { "instance" } dd { code { (view.instance.as_deref().unwrap_or("-")) } }
                dt { "exit code" } dd id="exit" { (view.exit_code.map_or_else(|| "-".to_owned(), |code| code.to_string())) }
                @if let Some(reason) = &view.reason {
                    dt { "reason" } dd.problem { (reason) }
                }
                @for (name, at) in times {
                    dt { (name) }
                    dd { @if let Some(at) = at { (when(at, now)) " " span.soft { (at) } } @else { "-" } }
                }
                @if let Some(github) = &view.github {
                    dt { "GitHub job" } dd { (github.repository) " job " (github.job_id) " (run " (github.run_id) ")"
                        @if let Some(runner) = &github.runner { ", taken by " (runner) }
                        @if let Some(conclusion) = &github.conclusion { ": " (conclusion) } }
                }
                dt { "output" } dd { (view.output_bytes) " bytes kept" @if view.output_truncated { ", cut by the service's limit" } }
            }
            h2 { "Output" }
            @match output {
                None => p.soft { "This service keeps no job output." },
                Some(tail) => {
                    @if tail.skipped > 0 {
                        p.soft { "The last " (tail.text.len()) " bytes; " (tail.skipped) " before them are in "
                            code { "billet jobs logs " (view.id) } "." }
                    }
                    div.tail { pre id="output" { (tail.text) } }
                }
            }
            @if !ended {
                p.soft id="following" { "Following: this page reloads every 2 s while the job runs." }
            }
        },
    )
}

/// A command's words as one line, each word with spaces or quotes in
/// quotes.
fn command_line(words: &[String]) -> String {
    words
        .iter()
        .map(|word| {
            if word.is_empty() || word.contains([' ', '"', '\'', '\t', '\n']) {
                format!("{word:?}")
            } else {
                word.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` cut to `chars` characters, ending in `…` when cut.
fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// An RFC 3339 time relative to `now`, or the text as it is.
fn when(at: &str, now: SystemTime) -> String {
    humantime::parse_rfc3339(at).map_or_else(|_| at.to_owned(), |then| relative(then, now))
}
