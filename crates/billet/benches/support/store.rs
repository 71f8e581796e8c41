//! A durable store filled directly with ended jobs, for the benches that
//! read a large table (`pages`, `status_page`).

use std::time::{Duration, SystemTime};

use billet::Store;
use billet::record::{Change, JobRecord, NewJob, Verdict};
use billet_provider::TrustClass;
use billet_scheduler::{FailReason, Outcome};

/// A state directory under `std::env::temp_dir()` only its owner may enter
/// (L16), removed when dropped.
pub(crate) fn state_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir_in(std::env::temp_dir())
        .expect("a directory")
}

/// Jobs a transaction while filling.
const PER_TRANSACTION: u64 = 10_000;

/// A day before the bench started, and `millis` on: well within the
/// default retention, so the service keeps every job.
pub(crate) fn at(millis: u64) -> SystemTime {
    static START: std::sync::OnceLock<SystemTime> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| SystemTime::now() - Duration::from_secs(24 * 60 * 60));
    start + Duration::from_millis(millis)
}

/// Jobs `from..to`, accepted and ended, into `store`.
pub(crate) fn fill(store: &mut Store, from: u64, to: u64) {
    let mut id = from;
    while id < to {
        let end = (id + PER_TRANSACTION).min(to);
        let mut changes = Vec::with_capacity(2 * (end - id) as usize);
        for job in id..end {
            let record = JobRecord::accepted(
                job,
                NewJob {
                    command: vec!["sh".into(), "-c".into(), format!("make test-{job}")],
                    labels: vec!["linux".into()],
                    trust: TrustClass::Trusted,
                    timeout: Some(Duration::from_secs(3600)),
                    key: None,
                    pinned: None,
                },
                at(job),
            );
            changes.push(Change::Accepted(Box::new(record)));
            let outcome = if job % 10 == 0 {
                Outcome::Failed {
                    reason: FailReason::TimedOut,
                }
            } else {
                Outcome::Finished { exit_code: 0 }
            };
            changes.push(Change::Ended {
                id: job,
                verdict: Verdict::from(&outcome),
                at: at(job + 1),
            });
        }
        store.commit(&changes).expect("the bench's jobs commit");
        id = end;
    }
}
