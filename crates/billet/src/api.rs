//! What the HTTP API reads and writes (L4, L5): a job request, checked field
//! by field, and the job as every answer shows it.
//!
//! Parsing is a pure function of the body's bytes, so that no input can do
//! more than answer a [`BadRequest`] naming what is wrong.

use std::fmt;
use std::time::{Duration, SystemTime};

use billet_provider::TrustClass;
use serde::{Deserialize, Serialize};

use crate::jobs::PageQuery;
use crate::record::{JobRecord, JobState, NewJob, trust_name};

/// The largest request body read, in bytes; a longer one is refused whole.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// The most arguments a command may have.
pub const MAX_ARGS: usize = 256;
/// The longest argument, in bytes.
pub const MAX_ARG_BYTES: usize = 8 * 1024;
/// The most labels a job may carry.
pub const MAX_LABELS: usize = 32;
/// The longest label, in bytes.
pub const MAX_LABEL_BYTES: usize = 64;
/// The longest idempotency key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;
/// The longest timeout a job may ask for: seven days.
pub const MAX_TIMEOUT_SECS: u64 = 7 * 24 * 60 * 60;

/// A request refused before anything was recorded (L5): which field is
/// wrong, when one is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRequest {
    /// The field at fault (`command`, `labels[3]`, `state`, ...), or `None`
    /// when the request as a whole is (malformed JSON, a body too large).
    pub field: Option<String>,
    /// What is wrong with it.
    pub message: String,
}

impl BadRequest {
    /// A fault in `field`.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> BadRequest {
        BadRequest {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// A fault in the request as a whole.
    pub fn whole(message: impl Into<String>) -> BadRequest {
        BadRequest {
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for BadRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "field `{field}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for BadRequest {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    command: Vec<String>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    #[serde(default)]
    trust: Option<Trust>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    key: Option<String>,
}

/// A trust class as the API spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Trust {
    Trusted,
    Untrusted,
    Unknown,
}

impl From<Trust> for TrustClass {
    fn from(trust: Trust) -> TrustClass {
        match trust {
            Trust::Trusted => TrustClass::Trusted,
            Trust::Untrusted => TrustClass::Untrusted,
            Trust::Unknown => TrustClass::Unknown,
        }
    }
}

/// Reads a `POST /v1/jobs` body: JSON, no unknown field, every field of the
/// right type and within its limit. The error names the first field at
/// fault. Never panics, whatever the bytes.
pub fn parse_job(body: &[u8]) -> Result<NewJob, BadRequest> {
    if body.len() > MAX_BODY_BYTES {
        return Err(too_large());
    }
    // A body that reads is read once, without tracking where the parser
    // is; only a body at fault is read again to name the field at fault.
    // Both reads accept exactly the same bodies.
    match serde_json::from_slice::<RawJob>(body) {
        Ok(raw) => check_job(raw),
        Err(_) => parse_tracked(body),
    }
}

/// [`parse_job`]'s read of a body, tracking where the parser is so that the
/// error names the field at fault.
fn parse_tracked(body: &[u8]) -> Result<NewJob, BadRequest> {
    let mut json = serde_json::Deserializer::from_slice(body);
    let raw: RawJob = serde_path_to_error::deserialize(&mut json).map_err(|error| {
        // `?` stands for a segment the parser could not name (a syntax
        // error); `.` for the whole document.
        let path = error.path().to_string();
        let known = path.trim_end_matches(['?', '.']);
        let inner = error.into_inner();
        if known.is_empty() {
            BadRequest::whole(format!("malformed job: {inner}"))
        } else {
            BadRequest::field(known, inner.to_string())
        }
    })?;
    json.end()
        .map_err(|error| BadRequest::whole(format!("malformed job: {error}")))?;
    check_job(raw)
}

fn check_job(raw: RawJob) -> Result<NewJob, BadRequest> {
    if raw.command.is_empty() {
        return Err(BadRequest::field(
            "command",
            "must hold at least one argument",
        ));
    }
    if raw.command.len() > MAX_ARGS {
        return Err(BadRequest::field(
            "command",
            format!(
                "{} arguments, more than the {MAX_ARGS} allowed",
                raw.command.len()
            ),
        ));
    }
    for (i, arg) in raw.command.iter().enumerate() {
        if arg.len() > MAX_ARG_BYTES {
            return Err(BadRequest::field(
                format!("command[{i}]"),
                format!(
                    "{} bytes, longer than the {MAX_ARG_BYTES} allowed",
                    arg.len()
                ),
            ));
        }
        if arg.contains('\0') {
            return Err(BadRequest::field(
                format!("command[{i}]"),
                "holds a NUL character",
            ));
        }
    }
    let labels = raw.labels.unwrap_or_default();
    if labels.len() > MAX_LABELS {
        return Err(BadRequest::field(
            "labels",
            format!(
                "{} labels, more than the {MAX_LABELS} allowed",
                labels.len()
            ),
        ));
    }
    for (i, label) in labels.iter().enumerate() {
        if label.trim().is_empty() {
            return Err(BadRequest::field(format!("labels[{i}]"), "is blank"));
        }
        if label.len() > MAX_LABEL_BYTES {
            return Err(BadRequest::field(
                format!("labels[{i}]"),
                format!(
                    "{} bytes, longer than the {MAX_LABEL_BYTES} allowed",
                    label.len()
                ),
            ));
        }
        if label.chars().any(char::is_control) {
            return Err(BadRequest::field(
                format!("labels[{i}]"),
                "holds a control character",
            ));
        }
    }
    let timeout = match raw.timeout_secs {
        None => None,
        Some(0) => return Err(BadRequest::field("timeout_secs", "must be at least 1")),
        Some(secs) if secs > MAX_TIMEOUT_SECS => {
            return Err(BadRequest::field(
                "timeout_secs",
                format!("{secs} is longer than the {MAX_TIMEOUT_SECS} allowed (7 days)"),
            ));
        }
        Some(secs) => Some(Duration::from_secs(secs)),
    };
    if let Some(key) = &raw.key {
        if key.is_empty() {
            return Err(BadRequest::field("key", "is empty"));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(BadRequest::field(
                "key",
                format!(
                    "{} bytes, longer than the {MAX_KEY_BYTES} allowed",
                    key.len()
                ),
            ));
        }
        if key.chars().any(char::is_control) {
            return Err(BadRequest::field("key", "holds a control character"));
        }
    }
    Ok(NewJob {
        command: raw.command,
        labels,
        trust: raw.trust.map_or(TrustClass::Unknown, TrustClass::from),
        timeout,
        key: raw.key,
        pinned: None,
    })
}

/// The refusal of a body longer than [`MAX_BODY_BYTES`].
pub fn too_large() -> BadRequest {
    BadRequest::whole(format!(
        "the request body is larger than the {MAX_BODY_BYTES} bytes allowed"
    ))
}

/// How many jobs a page of `GET /v1/jobs` holds when `limit` is not given.
pub const DEFAULT_PAGE: usize = 100;

/// The most jobs one page of `GET /v1/jobs` may ask for (`limit`).
pub const MAX_PAGE: usize = 1000;

/// Reads the query of `GET /v1/jobs` (L12): any of `state=S`, `limit=N`
/// (1 to [`MAX_PAGE`], [`DEFAULT_PAGE`] when absent) and `after=ID` (the
/// `next` of the page before; 0 when absent), each at most once.
pub fn parse_list_query(query: Option<&str>) -> Result<PageQuery, BadRequest> {
    let mut state = None;
    let mut limit = None;
    let mut after = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let twice = || BadRequest::field(shown(name), "given more than once");
        match name {
            "state" if state.is_none() => state = Some(parse_state(value)?),
            "limit" if limit.is_none() => limit = Some(page_limit(value)?),
            "after" if after.is_none() => {
                after = Some(value.parse::<u64>().map_err(|_| {
                    BadRequest::field("after", format!("{:?} is not a job id", shown(value)))
                })?);
            }
            "state" | "limit" | "after" => return Err(twice()),
            other => {
                return Err(BadRequest::field(
                    shown(other),
                    "unknown query parameter (only `state`, `limit` and `after` are known)",
                ));
            }
        }
    }
    Ok(PageQuery {
        state,
        after: after.unwrap_or(0),
        limit: limit.unwrap_or(DEFAULT_PAGE),
    })
}

/// A `limit`: a whole number from 1 to [`MAX_PAGE`].
fn page_limit(value: &str) -> Result<usize, BadRequest> {
    match value.parse::<usize>() {
        Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        _ => Err(BadRequest::field(
            "limit",
            format!("{:?} is not a page size from 1 to {MAX_PAGE}", shown(value)),
        )),
    }
}

/// The state a `state=` query names.
fn parse_state(name: &str) -> Result<JobState, BadRequest> {
    JobState::from_name(name).ok_or_else(|| {
        BadRequest::field(
            "state",
            format!("{name:?} is not a state (queued, running, finished, failed, cancelled)"),
        )
    })
}

/// At most 64 characters of what a request gave, for an error to quote.
fn shown(text: &str) -> String {
    text.chars().take(64).collect()
}

/// A job as every answer shows it (L4), its fields in this order. Times are
/// RFC 3339 (UTC, milliseconds); `null` where not known yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    /// The job's id: 1, 2, ... in submission order.
    pub id: u64,
    /// Where it is.
    pub state: JobState,
    /// Its labels.
    pub labels: Vec<String>,
    /// Its trust class: `trusted`, `untrusted` or `unknown`.
    pub trust: String,
    /// Its command.
    pub command: Vec<String>,
    /// The pool holding (or that held) its lease.
    pub pool: Option<String>,
    /// The instance that runs (or ran) it.
    pub instance: Option<String>,
    /// Its command's exit code, once finished.
    pub exit_code: Option<i32>,
    /// Why it failed, once failed.
    pub reason: Option<String>,
    /// When it was accepted.
    pub submitted_at: String,
    /// When it took its lease.
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// How many bytes of its output are kept (L15), so far.
    pub output_bytes: u64,
    /// Whether `--output-limit` cut its output (L15).
    pub output_truncated: bool,
    /// For a GitHub runner's job, the GitHub job it serves (G8): shown by
    /// `GET /v1/jobs/{id}` only, absent for every other job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubView>,
}

/// The GitHub job a runner's billet job serves: the one it was made for,
/// then the one GitHub says it took (G8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GithubView {
    /// GitHub's job id.
    pub job_id: u64,
    /// Its workflow run.
    pub run_id: u64,
    /// `OWNER/NAME`.
    pub repository: String,
    /// The runner that took it, once one did.
    pub runner: Option<String>,
    /// How it ended, once it did.
    pub conclusion: Option<String>,
}

impl JobView {
    /// `record` as the API shows it.
    pub fn of(record: &JobRecord) -> JobView {
        JobView {
            id: record.id,
            state: record.state,
            labels: record.labels.clone(),
            trust: trust_name(record.trust).to_owned(),
            command: record.command.clone(),
            pool: record.pool.clone(),
            instance: record.instance.clone(),
            exit_code: record.outcome().and_then(|v| v.exit_code),
            reason: record.outcome().and_then(|v| v.reason.clone()),
            submitted_at: rfc3339(record.submitted_at),
            started_at: record.started_at.map(rfc3339),
            ended_at: record.ended_at.map(rfc3339),
            // What the output store keeps is told by the routes that show
            // the job (L15).
            output_bytes: 0,
            output_truncated: false,
            github: None,
        }
    }
}

/// `at` in RFC 3339, UTC, to the millisecond.
pub fn rfc3339(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// How long before `now` `then` was (`12s ago`, `3m ago`, `2h ago`, `5d
/// ago`; `in 4s` for a time after `now`): how the client and the status
/// page say times.
pub fn relative(then: SystemTime, now: SystemTime) -> String {
    let (secs, future) = match now.duration_since(then) {
        Ok(past) => (past.as_secs(), false),
        Err(ahead) => (ahead.duration().as_secs(), true),
    };
    let span = match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3_600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3_600),
        s => format!("{}d", s / 86_400),
    };
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::trust_from_name;
    use proptest::strategy::Strategy;

    // L5: every field is checked, and the error names it.
    #[test]
    fn l5_errors_name_the_field() {
        let cases: &[(&str, &str)] = &[
            (r#"{"command": []}"#, "command"),
            (r#"{"command": "ls"}"#, "command"),
            (r#"{"labels": ["a"]}"#, "command"),
            (r#"{"command": ["ls"], "labels": "a"}"#, "labels"),
            (r#"{"command": ["ls"], "labels": [" "]}"#, "labels[0]"),
            (r#"{"command": ["ls"], "trust": "maybe"}"#, "trust"),
            (r#"{"command": ["ls"], "timeout_secs": -1}"#, "timeout_secs"),
            (r#"{"command": ["ls"], "timeout_secs": 0}"#, "timeout_secs"),
            (r#"{"command": ["ls"], "key": ""}"#, "key"),
            (r#"{"command": ["ls"], "colour": "red"}"#, "colour"),
            (r#"{"command": ["ls", 3]}"#, "command[1]"),
            (r#"{"command": ["ls", "#, "command"),
            (r#"{"command": ["ls"], "labels": [1"#, "labels"),
        ];
        for (body, field) in cases {
            let error = parse_job(body.as_bytes()).expect_err(body);
            assert!(
                error.to_string().contains(field),
                "{body}: {error} does not name {field}"
            );
        }
    }

    // L5: the one read of a body that reads (untracked) answers what the
    // tracked read answers, for any body: valid jobs, jobs at fault in one
    // field, and bytes that are not JSON.
    proptest::proptest! {
        #[test]
        fn l5_the_untracked_read_answers_as_the_tracked_one(
            command in proptest::collection::vec("[ -~]{0,12}", 0..4),
            labels in proptest::option::of(proptest::collection::vec("[ -~]{0,8}", 0..4)),
            trust in proptest::option::of("trusted|untrusted|unknown|maybe"),
            timeout in proptest::option::of(0i64..1_000_000_000),
            cut in 0usize..200,
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let mut job = serde_json::json!({ "command": command });
            if let Some(labels) = labels {
                job["labels"] = serde_json::json!(labels);
            }
            if let Some(trust) = trust {
                job["trust"] = serde_json::json!(trust);
            }
            if let Some(timeout) = timeout {
                job["timeout_secs"] = serde_json::json!(timeout);
            }
            let whole = job.to_string();
            let cut_short = &whole.as_bytes()[..cut.min(whole.len())];
            for body in [whole.as_bytes(), cut_short, &bytes] {
                proptest::prop_assert_eq!(parse_job(body), parse_tracked(body));
            }
        }
    }

    // L5: a body that is not one JSON object is refused as a whole.
    #[test]
    fn l5_malformed_bodies() {
        for body in ["", "{", "[]", "null", r#"{"command": ["ls"]} {}"#, "\u{0}"] {
            let error = parse_job(body.as_bytes()).expect_err(body);
            assert!(!error.to_string().is_empty());
        }
        for body in [
            "{",
            "[]",
            "{]",
            r#"{"command": ["ls"]} {}"#,
            r#"{"labels": []}"#,
        ] {
            let error = parse_job(body.as_bytes()).expect_err(body);
            assert_eq!(error.field, None, "{body}: the request as a whole: {error}");
        }
        let long = vec![b' '; MAX_BODY_BYTES + 1];
        assert_eq!(parse_job(&long), Err(too_large()));
    }

    // L5: the limits are the documented ones (64 KiB bodies, 256 arguments
    // of 8 KiB, 32 labels of 64 bytes, keys of 128 bytes, 7 days).
    #[test]
    fn l5_limits_are_the_documented_ones() {
        assert_eq!(MAX_BODY_BYTES, 65_536);
        assert_eq!(MAX_ARGS, 256);
        assert_eq!(MAX_ARG_BYTES, 8_192);
        assert_eq!(MAX_LABELS, 32);
        assert_eq!(MAX_LABEL_BYTES, 64);
        assert_eq!(MAX_KEY_BYTES, 128);
        assert_eq!(MAX_TIMEOUT_SECS, 604_800);
    }

    // L4: only `command` is required; labels default to none, trust to unknown.
    #[test]
    fn l4_defaults_and_full_requests() {
        let job = parse_job(br#"{"command": ["ls", "-l"]}"#).unwrap();
        assert_eq!(job.command, ["ls", "-l"]);
        assert!(job.labels.is_empty());
        assert_eq!(job.trust, TrustClass::Unknown);
        assert_eq!(job.timeout, None);
        assert_eq!(job.key, None);
        let job = parse_job(
            br#"{"command": ["x"], "labels": ["linux"], "trust": "trusted", "timeout_secs": 30, "key": "k1"}"#,
        )
        .unwrap();
        assert_eq!(job.labels, ["linux"]);
        assert_eq!(job.trust, TrustClass::Trusted);
        assert_eq!(job.timeout, Some(Duration::from_secs(30)));
        assert_eq!(job.key.as_deref(), Some("k1"));
    }

    // L5: the limits, each at its edge.
    #[test]
    fn l5_limits_hold_at_their_edges() {
        let body = |command: Vec<String>, labels: Vec<String>| {
            serde_json::to_vec(&serde_json::json!({"command": command, "labels": labels})).unwrap()
        };
        let args = |n: usize| vec!["a".to_owned(); n];
        assert!(parse_job(&body(args(MAX_ARGS), vec![])).is_ok());
        assert!(parse_job(&body(args(MAX_ARGS + 1), vec![])).is_err());
        assert!(parse_job(&body(vec!["a".repeat(MAX_ARG_BYTES)], vec![])).is_ok());
        assert!(parse_job(&body(vec!["a".repeat(MAX_ARG_BYTES + 1)], vec![])).is_err());
        assert!(parse_job(&body(vec!["a\0".into()], vec![])).is_err());
        assert!(parse_job(&body(args(1), args(MAX_LABELS))).is_ok());
        assert!(parse_job(&body(args(1), args(MAX_LABELS + 1))).is_err());
        assert!(parse_job(&body(args(1), vec!["l".repeat(MAX_LABEL_BYTES)])).is_ok());
        assert!(parse_job(&body(args(1), vec!["l".repeat(MAX_LABEL_BYTES + 1)])).is_err());
        assert!(parse_job(&body(args(1), vec!["a\tb".into()])).is_err());
        let timeout = |secs: u64| format!(r#"{{"command": ["x"], "timeout_secs": {secs}}}"#);
        assert!(parse_job(timeout(MAX_TIMEOUT_SECS).as_bytes()).is_ok());
        assert!(parse_job(timeout(MAX_TIMEOUT_SECS + 1).as_bytes()).is_err());
        let key = |k: String| format!(r#"{{"command": ["x"], "key": "{k}"}}"#);
        assert!(parse_job(key("k".repeat(MAX_KEY_BYTES)).as_bytes()).is_ok());
        assert!(parse_job(key("k".repeat(MAX_KEY_BYTES + 1)).as_bytes()).is_err());
        assert!(parse_job(key("a\\nb".into()).as_bytes()).is_err());
        let exact = vec![b' '; MAX_BODY_BYTES];
        assert_ne!(parse_job(&exact), Err(too_large()));
    }

    // L4, L5, L12: `?state=` names a state, `limit` is 1 to 1,000 (100 when
    // absent), `after` a job id (0 when absent); each at most once, and
    // nothing else is asked. What is refused names its field.
    #[test]
    fn l12_list_queries() {
        let query = |state, after, limit| PageQuery {
            state,
            after,
            limit,
        };
        assert_eq!(parse_list_query(None), Ok(query(None, 0, DEFAULT_PAGE)));
        assert_eq!(DEFAULT_PAGE, 100);
        assert_eq!(MAX_PAGE, 1000);
        assert_eq!(parse_list_query(Some("")), Ok(query(None, 0, 100)));
        for state in JobState::ALL {
            let text = format!("state={state}");
            assert_eq!(
                parse_list_query(Some(&text)),
                Ok(query(Some(state), 0, 100))
            );
        }
        assert_eq!(
            parse_list_query(Some("limit=1&after=41&state=failed")),
            Ok(query(Some(JobState::Failed), 41, 1))
        );
        assert_eq!(
            parse_list_query(Some("limit=1000")),
            Ok(query(None, 0, 1000))
        );
        assert_eq!(
            parse_list_query(Some(&format!("after={}", u64::MAX))),
            Ok(query(None, u64::MAX, 100))
        );
        for (bad, field) in [
            ("state=done", "state"),
            ("state", "state"),
            ("color=red", "color"),
            ("state=queued&state=running", "state"),
            ("limit=0", "limit"),
            ("limit=1001", "limit"),
            ("limit=-1", "limit"),
            ("limit=ten", "limit"),
            ("limit=", "limit"),
            ("limit=5&limit=5", "limit"),
            ("after=-1", "after"),
            ("after=x", "after"),
            ("after=1&after=2", "after"),
        ] {
            let error = parse_list_query(Some(bad)).expect_err(bad);
            assert_eq!(error.field.as_deref(), Some(field), "{bad}: {error}");
        }
        let error = parse_list_query(Some("limit=1001")).unwrap_err();
        assert!(error.to_string().contains("from 1 to 1000"), "{error}");
        let long = format!("{}=1", "x".repeat(200));
        let error = parse_list_query(Some(&long)).unwrap_err();
        assert_eq!(error.field.map(|f| f.len()), Some(64), "quoted, bounded");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2048,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        // L5: no bytes panic the parser, and whatever it accepts keeps every
        // limit; whatever it refuses says why.
        #[test]
        fn l5_parsing_never_panics_and_accepts_only_what_fits(
            body in proptest::prop_oneof![
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
                "\\{\"command\": \\[(\"[ -~]{0,12}\", ?){0,4}\\](, \"(labels|trust|key|timeout_secs|x)\": (\"[ -~]{0,8}\"|[0-9-]{1,6}|null|\\[\\]|\\[\"[a-z ]{0,6}\"\\]))*\\}"
                    .prop_map(String::into_bytes),
            ]
        ) {
            match parse_job(&body) {
                Ok(job) => {
                    proptest::prop_assert!(!job.command.is_empty());
                    proptest::prop_assert!(job.command.len() <= MAX_ARGS);
                    proptest::prop_assert!(job.labels.len() <= MAX_LABELS);
                    proptest::prop_assert!(job.labels.iter().all(|l| !l.trim().is_empty() && l.len() <= MAX_LABEL_BYTES));
                    proptest::prop_assert!(job.key.as_ref().is_none_or(|k| !k.is_empty() && k.len() <= MAX_KEY_BYTES));
                    proptest::prop_assert!(job.timeout.is_none_or(|t| t.as_secs() >= 1 && t.as_secs() <= MAX_TIMEOUT_SECS));
                }
                Err(error) => proptest::prop_assert!(!error.message.is_empty()),
            }
        }
    }

    // L4: trust names round-trip, and ended states are the three final ones.
    #[test]
    fn l4_names() {
        for trust in TrustClass::ALL {
            assert_eq!(trust_from_name(trust_name(trust)), Some(trust));
        }
        assert_eq!(trust_from_name("other"), None);
        let ended: Vec<_> = JobState::ALL
            .into_iter()
            .filter(|s| s.has_ended())
            .collect();
        assert_eq!(
            ended,
            [JobState::Finished, JobState::Failed, JobState::Cancelled]
        );
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }
}
