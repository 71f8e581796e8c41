//! What the client prints for people: aligned tables (comfy-table), times
//! relative to now.

use std::time::SystemTime;

use comfy_table::{Table, presets::NOTHING};
use serde_json::Value;

/// The longest command a table row shows, in characters.
const COMMAND_WIDTH: usize = 60;

/// A table of `rows` under `header`, without borders, ending in a newline.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new();
    table.load_preset(NOTHING).set_header(header.to_vec());
    for row in rows {
        table.add_row(row);
    }
    flush_left(&table)
}

/// `table`'s lines without the cells' outer padding: no leading blank, no
/// trailing blanks, a newline after each.
fn flush_left(table: &Table) -> String {
    let mut text = String::new();
    for line in table.lines() {
        text.push_str(line.strip_prefix(' ').unwrap_or(&line).trim_end());
        text.push('\n');
    }
    text
}

/// `value` as text: a string as it is, a number as written, `-` for null.
fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// How long before `now` an RFC 3339 time was (`12s ago`, `3m ago`, `2h ago`,
/// `5d ago`; `in 4s` for one after `now`); `-` for null or unreadable.
pub(super) fn ago(value: &Value, now: SystemTime) -> String {
    value
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .map_or_else(|| "-".to_owned(), |then| crate::api::relative(then, now))
}

/// A job's command as one line, cut to [`COMMAND_WIDTH`] characters.
fn command(job: &Value) -> String {
    let words: Vec<String> = job["command"]
        .as_array()
        .map(|words| words.iter().map(text).collect())
        .unwrap_or_default();
    let line = words.join(" ");
    if line.chars().count() > COMMAND_WIDTH {
        let cut: String = line.chars().take(COMMAND_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// The jobs as a table: id, state, pool, exit code, when submitted and
/// ended, the command.
pub(super) fn jobs(jobs: &[Value], now: SystemTime) -> String {
    let rows = jobs
        .iter()
        .map(|job| {
            vec![
                text(&job["id"]),
                text(&job["state"]),
                text(&job["pool"]),
                text(&job["exit_code"]),
                ago(&job["submitted_at"], now),
                ago(&job["ended_at"], now),
                command(job),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "STATE",
            "POOL",
            "EXIT",
            "SUBMITTED",
            "ENDED",
            "COMMAND",
        ],
        rows,
    )
}

/// The pools as a table, in the server's order.
pub(super) fn pools(pools: &[Value]) -> String {
    let fields = [
        "name",
        "kind",
        "capacity",
        "held",
        "queued",
        "contested",
        "leftovers",
        "unsettled",
    ];
    let rows = pools
        .iter()
        .map(|pool| fields.iter().map(|field| text(&pool[*field])).collect())
        .collect();
    table(
        &[
            "NAME",
            "KIND",
            "CAPACITY",
            "HELD",
            "QUEUED",
            "CONTESTED",
            "LEFTOVERS",
            "UNSETTLED",
        ],
        rows,
    )
}

/// One job, a field a line: times relative to now, with the time itself.
pub(super) fn job(job: &Value, now: SystemTime) -> String {
    let when = |field: &str| match &job[field] {
        Value::Null => "-".to_owned(),
        at => format!("{} ({})", ago(at, now), text(at)),
    };
    let labels = job["labels"]
        .as_array()
        .map(|labels| labels.iter().map(text).collect::<Vec<_>>().join(", "))
        .unwrap_or_default();
    let words: Vec<String> = job["command"]
        .as_array()
        .map(|words| words.iter().map(|w| format!("{w}")).collect())
        .unwrap_or_default();
    let rows = vec![
        vec!["id".to_owned(), text(&job["id"])],
        vec!["state".to_owned(), text(&job["state"])],
        vec!["command".to_owned(), words.join(" ")],
        vec!["labels".to_owned(), labels],
        vec!["trust".to_owned(), text(&job["trust"])],
        vec!["pool".to_owned(), text(&job["pool"])],
        vec!["instance".to_owned(), text(&job["instance"])],
        vec!["exit code".to_owned(), text(&job["exit_code"])],
        vec!["reason".to_owned(), text(&job["reason"])],
        vec!["submitted".to_owned(), when("submitted_at")],
        vec!["started".to_owned(), when("started_at")],
        vec!["ended".to_owned(), when("ended_at")],
        vec![
            "output".to_owned(),
            format!(
                "{} bytes{}",
                text(&job["output_bytes"]),
                if job["output_truncated"] == Value::Bool(true) {
                    " (cut)"
                } else {
                    ""
                }
            ),
        ],
    ];
    let mut table = Table::new();
    table.load_preset(NOTHING);
    for row in rows {
        table.add_row(row);
    }
    flush_left(&table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn at(secs_after_epoch: u64) -> Value {
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(secs_after_epoch);
        json!(humantime::format_rfc3339_millis(time).to_string())
    }

    #[test]
    fn k3_times_are_said_relative_to_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(ago(&at(1_000_000 - 12), now), "12s ago");
        assert_eq!(ago(&at(1_000_000 - 59), now), "59s ago");
        assert_eq!(ago(&at(1_000_000 - 60), now), "1m ago");
        assert_eq!(ago(&at(1_000_000 - 3_599), now), "59m ago");
        assert_eq!(ago(&at(1_000_000 - 7_200), now), "2h ago");
        assert_eq!(ago(&at(1_000_000 - 86_399), now), "23h ago");
        assert_eq!(ago(&at(1_000_000 - 5 * 86_400), now), "5d ago");
        assert_eq!(ago(&at(1_000_000 + 4), now), "in 4s");
        assert_eq!(ago(&Value::Null, now), "-");
        assert_eq!(ago(&json!("yesterday"), now), "-");
    }

    #[test]
    fn k3_a_jobs_table_lines_up_and_cuts_long_commands() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let long = "x".repeat(100);
        let jobs = [
            json!({"id": 1, "state": "finished", "pool": "linux", "exit_code": 0,
                   "submitted_at": at(1_000_000 - 90), "ended_at": at(1_000_000 - 30),
                   "command": ["make", "test"]}),
            json!({"id": 22, "state": "queued", "pool": null, "exit_code": null,
                   "submitted_at": at(1_000_000 - 5), "ended_at": null,
                   "command": ["sh", "-c", long]}),
        ];
        let shown = jobs_table(&jobs, now);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 3, "{shown}");
        assert!(
            lines[0].contains("ID") && lines[0].contains("COMMAND"),
            "{shown}"
        );
        assert!(
            lines[1].contains("make test") && lines[1].contains("1m ago"),
            "{shown}"
        );
        assert!(lines[1].contains("30s ago"), "{shown}");
        assert!(
            lines[2].contains('…') && lines[2].contains(" - "),
            "{shown}"
        );
        // Aligned: each column starts at the same place on every line.
        let state = lines[0].find("STATE").unwrap();
        assert_eq!(lines[1].find("finished"), Some(state), "{shown}");
        assert_eq!(lines[2].find("queued"), Some(state), "{shown}");
    }

    fn jobs_table(jobs: &[Value], now: SystemTime) -> String {
        super::jobs(jobs, now)
    }

    #[test]
    fn k4_pools_and_a_job_are_shown_whole() {
        let shown = pools(&[json!({"name": "linux", "kind": "docker", "capacity": 4,
            "held": 2, "queued": 7, "contested": 0, "leftovers": 0, "unsettled": 1})]);
        assert!(
            shown.contains("CAPACITY") && shown.contains("linux"),
            "{shown}"
        );
        assert!(
            shown
                .lines()
                .nth(1)
                .unwrap()
                .split_whitespace()
                .collect::<Vec<_>>()
                == ["linux", "docker", "4", "2", "7", "0", "0", "1"],
            "{shown}"
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let one = job(
            &json!({"id": 3, "state": "failed", "command": ["a", "b c"], "labels": ["x", "y"],
                    "trust": "trusted", "pool": "linux", "instance": "i-1", "exit_code": null,
                    "reason": "timed out", "submitted_at": at(1_000_000 - 120),
                    "started_at": at(1_000_000 - 60), "ended_at": null,
                    "output_bytes": 10, "output_truncated": true}),
            now,
        );
        for needle in [
            "timed out",
            "2m ago (",
            "1m ago",
            "x, y",
            "10 bytes (cut)",
            "\"b c\"",
        ] {
            assert!(one.contains(needle), "{needle}: {one}");
        }
    }
}
