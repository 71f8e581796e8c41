//! A job's row: the columns every read selects, and the [`JobRecord`] they
//! make. One place, so that the start's read of unfinished jobs and the
//! archive's reads of ended ones ([`super::Archive`]) cannot drift apart.

use std::time::Duration;

use rusqlite::{Connection, Row};

use super::{bad, time};
use crate::record::{JobRecord, Verdict};
use crate::record::{JobState, trust_from_name};

/// The columns [`record`] reads, in its order, for a `SELECT` on `jobs`.
pub(super) const COLUMNS: &str = "id, key, command, labels, trust, timeout_secs, state, pool, \
     instance, exit_code, reason, submitted_at, started_at, ended_at, cancel_requested, \
     ending_state, ending_exit_code, ending_reason, pinned";

/// The record a row of [`COLUMNS`] holds; an error naming the column that
/// does not read as what this release wrote.
pub(super) fn record(row: &Row<'_>) -> rusqlite::Result<JobRecord> {
    let list = |i: usize, column: &str| -> rusqlite::Result<Vec<String>> {
        let text: String = row.get(i)?;
        serde_json::from_str(&text).map_err(|_| bad(column, &text))
    };
    let state =
        |text: String, column: &str| JobState::from_name(&text).ok_or_else(|| bad(column, &text));
    let trust: String = row.get(4)?;
    let job_state = state(row.get(6)?, "state")?;
    // One outcome in memory, two places at rest: an ended job's in
    // `exit_code` and `reason`, a decided one's in the `ending_` columns.
    let verdict = if job_state.has_ended() {
        Some(Verdict {
            state: job_state,
            exit_code: row.get(9)?,
            reason: row.get(10)?,
        })
    } else {
        match row.get::<_, Option<String>>(15)? {
            None => None,
            Some(text) => Some(Verdict {
                state: state(text, "ending_state")?,
                exit_code: row.get(16)?,
                reason: row.get(17)?,
            }),
        }
    };
    let raw_id: i64 = row.get(0)?;
    let timeout: Option<i64> = row.get(5)?;
    Ok(JobRecord {
        id: u64::try_from(raw_id).map_err(|_| bad("id", &raw_id.to_string()))?,
        key: row.get(1)?,
        command: list(2, "command")?,
        labels: list(3, "labels")?,
        trust: trust_from_name(&trust).ok_or_else(|| bad("trust", &trust))?,
        timeout: timeout.map(|secs| Duration::from_secs(u64::try_from(secs).unwrap_or(0))),
        pinned: row.get(18)?,
        state: job_state,
        pool: row.get(7)?,
        instance: row.get(8)?,
        submitted_at: time(row.get(11)?),
        started_at: row.get::<_, Option<i64>>(12)?.map(time),
        ended_at: row.get::<_, Option<i64>>(13)?.map(time),
        cancel_requested: row.get::<_, i64>(14)? != 0,
        verdict,
    })
}

/// Every job that has not ended, in id order: what a start hands the engine.
/// Ended jobs stay in the file, read one page at a time when asked for.
pub(super) fn unended(conn: &Connection) -> rusqlite::Result<Vec<JobRecord>> {
    let mut statement = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM jobs WHERE ended_at IS NULL ORDER BY id"
    ))?;
    let rows = statement.query_map([], record)?;
    rows.collect()
}
