//! One page of jobs for `GET /v1/jobs` (L12): [`PageQuery`] asks, [`page`]
//! answers from the jobs in memory and the archive together, in id order.

use std::ops::Bound;
use std::sync::Arc;

use parking_lot::RwLock;

use super::{JobRecord, Jobs};
use crate::record::JobState;
use crate::store::StoreError;

/// What `GET /v1/jobs` asks for (L12): jobs past `after`, in `state` if
/// given, at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageQuery {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs with ids past this one (0: from the first).
    pub after: u64,
    /// The most jobs answered.
    pub limit: usize,
}

/// One page of jobs, in id order, and where the next one starts: `None`
/// when no job is past the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The page's jobs.
    pub jobs: Vec<JobRecord>,
    /// The `after` of the next page.
    pub next: Option<u64>,
}

/// One page of `table`'s jobs, ended or not. It costs work in proportion to
/// the page (and, for a page of queued or running jobs, to the jobs not yet
/// ended that it passes over), never to the jobs ever accepted; the table's
/// lock is held only while the page's jobs in memory are copied, not while
/// the archive is read.
///
/// Read while jobs end, a job may be both in memory and already in the
/// archive: the archive's (newer) record is the one answered, once. Paging
/// by id, a job is on one page only, whatever is added or removed meanwhile.
pub fn page(table: &RwLock<Jobs>, query: PageQuery) -> Result<Page, StoreError> {
    let want = query.limit.saturating_add(1);
    let wants_live = query.state.is_none_or(|state| !state.has_ended());
    let wants_ended = query.state.is_none_or(JobState::has_ended);
    let (live, live_cut, archive) = {
        let jobs = table.read();
        let (live, live_cut) = if wants_live {
            let matching = jobs
                .live
                .range((Bound::Excluded(query.after), Bound::Unbounded))
                .map(|(_, record)| record)
                .filter(|record| query.state.is_none_or(|state| record.state == state));
            copy_within_bytes(matching, want)
        } else {
            (Vec::new(), None)
        };
        (live, live_cut, Arc::clone(&jobs.archive))
    };
    let ended = if wants_ended {
        archive.page(query.after, query.state, want)?
    } else {
        Vec::new()
    };
    let mut jobs = merge(live, ended);
    if let Some(cut) = live_cut {
        // Jobs in memory past the cut were not looked at: nothing past it
        // is answered, so none is skipped.
        jobs.retain(|record| record.id <= cut);
    }
    let keep = fitting(&jobs, query.limit);
    let next = if jobs.len() > keep || live_cut.is_some() {
        jobs.truncate(keep);
        jobs.last().map(|record| record.id)
    } else {
        None
    };
    Ok(Page { jobs, next })
}

/// The most a page's jobs weigh (their commands and labels, and a bound on
/// each one's other fields) before the page ends early,
/// whatever `limit` says (L19): a page of the largest jobs is a few MiB,
/// not `limit` times a request body. A page holds at least one job.
pub const MAX_PAGE_BYTES: usize = 4 << 20;

/// About how many bytes `record` takes in a page's answer: its command and
/// labels (all of a job a client can make large), and a bound on the rest.
fn weight(record: &JobRecord) -> usize {
    const REST: usize = 512;
    let strings = |list: &[String]| list.iter().map(|s| s.len() + 4).sum::<usize>();
    REST + strings(&record.command) + strings(&record.labels)
}

/// Copies at most `want` of `records` (in order), and no more than
/// [`MAX_PAGE_BYTES`] of them but at least one: what a page may answer of
/// the jobs in memory, copied under the table's lock, so the lock and the
/// copy are bounded by a page's bytes. Also answers the id of the last one
/// copied when the bytes cut the copy short (a job past it was left).
fn copy_within_bytes<'a>(
    records: impl Iterator<Item = &'a JobRecord>,
    want: usize,
) -> (Vec<JobRecord>, Option<u64>) {
    let mut copied: Vec<JobRecord> = Vec::new();
    let mut bytes = 0;
    for record in records.take(want) {
        let size = weight(record);
        if !copied.is_empty() && bytes + size > MAX_PAGE_BYTES {
            let cut = copied.last().map(|record| record.id);
            return (copied, cut);
        }
        bytes += size;
        copied.push(record.clone());
    }
    (copied, None)
}

/// How many of `jobs` (in order) one page answers: at most `limit`, and no
/// more than [`MAX_PAGE_BYTES`] weigh, but at least one when there is one.
fn fitting(jobs: &[JobRecord], limit: usize) -> usize {
    let mut bytes = 0;
    for (taken, record) in jobs.iter().enumerate() {
        let size = weight(record);
        if taken == limit || (taken > 0 && bytes + size > MAX_PAGE_BYTES) {
            return taken;
        }
        bytes += size;
    }
    jobs.len()
}

/// Two id-ordered lists as one; an id in both is taken from `ended`.
fn merge(live: Vec<JobRecord>, ended: Vec<JobRecord>) -> Vec<JobRecord> {
    let mut merged = Vec::with_capacity(live.len() + ended.len());
    let mut live = live.into_iter().peekable();
    let mut ended = ended.into_iter().peekable();
    loop {
        let take_live = match (live.peek(), ended.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => match a.id.cmp(&b.id) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => {
                    live.next();
                    false
                }
            },
        };
        let next = if take_live { live.next() } else { ended.next() };
        merged.extend(next);
    }
    merged
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::{Duration, SystemTime};

    use billet_provider::TrustClass;
    use billet_scheduler::Outcome;
    use proptest::prelude::*;

    use super::*;
    use crate::record::NewJob;
    use crate::record::{Change, Verdict};
    use crate::store::Store;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn accept(table: &RwLock<Jobs>, id: u64, at: u64) {
        accept_command(table, id, at, vec!["true".into()]);
    }

    /// A job nearly a third of a page's bytes large.
    fn accept_big(table: &RwLock<Jobs>, id: u64, at: u64) {
        accept_command(table, id, at, vec!["x".repeat(BIG)]);
    }

    /// Three fit in a page, four do not.
    const BIG: usize = MAX_PAGE_BYTES / 3 - 1024;

    fn accept_command(table: &RwLock<Jobs>, id: u64, at: u64, command: Vec<String>) {
        let job = NewJob {
            command,
            labels: vec![],
            trust: TrustClass::Trusted,
            timeout: None,
            key: Some(format!("key-{id}")),
            pinned: None,
        };
        table
            .write()
            .apply(&Change::Accepted(Box::new(JobRecord::accepted(
                id,
                job,
                t(at),
            ))));
    }

    fn end(table: &RwLock<Jobs>, id: u64, outcome: &Outcome, at: u64) {
        table.write().apply(&Change::Ended {
            id,
            verdict: Verdict::from(outcome),
            at: t(at),
        });
    }

    fn ids(page: &Page) -> Vec<u64> {
        page.jobs.iter().map(|record| record.id).collect()
    }

    fn query(state: Option<JobState>, after: u64, limit: usize) -> PageQuery {
        PageQuery {
            state,
            after,
            limit,
        }
    }

    // L12: pages in id order over jobs in memory and in the archive alike,
    // `next` the last id of a full page with more past it, `null` at the end;
    // a state picks from memory (queued, running) or the archive (ended).
    #[test]
    fn l12_pages_run_in_id_order_across_memory_and_archive() {
        let table = RwLock::new(Jobs::default());
        for id in 1..=7 {
            accept(&table, id, id);
        }
        end(&table, 2, &Outcome::Finished { exit_code: 0 }, 10);
        end(&table, 5, &Outcome::Cancelled, 11);
        end(&table, 6, &Outcome::Finished { exit_code: 1 }, 12);
        table.write().apply(&Change::Placed {
            id: 3,
            pool: "p".into(),
            at: t(13),
        });
        let first = page(&table, query(None, 0, 3)).unwrap();
        assert_eq!((ids(&first), first.next), (vec![1, 2, 3], Some(3)));
        let second = page(&table, query(None, 3, 3)).unwrap();
        assert_eq!((ids(&second), second.next), (vec![4, 5, 6], Some(6)));
        let last = page(&table, query(None, 6, 3)).unwrap();
        assert_eq!((ids(&last), last.next), (vec![7], None));
        // A page exactly as long as what is left has no next.
        let exact = page(&table, query(None, 4, 3)).unwrap();
        assert_eq!((ids(&exact), exact.next), (vec![5, 6, 7], None));
        let all = page(&table, query(None, 0, 1000)).unwrap();
        assert_eq!((ids(&all), all.next), ((1..=7).collect(), None));
        let finished = page(&table, query(Some(JobState::Finished), 0, 1)).unwrap();
        assert_eq!((ids(&finished), finished.next), (vec![2], Some(2)));
        let finished = page(&table, query(Some(JobState::Finished), 2, 1)).unwrap();
        assert_eq!((ids(&finished), finished.next), (vec![6], None));
        let queued = page(&table, query(Some(JobState::Queued), 0, 10)).unwrap();
        assert_eq!(ids(&queued), [1, 4, 7]);
        let running = page(&table, query(Some(JobState::Running), 0, 10)).unwrap();
        assert_eq!(ids(&running), [3]);
        let cancelled = page(&table, query(Some(JobState::Cancelled), 0, 10)).unwrap();
        assert_eq!(ids(&cancelled), [5]);
        assert!(
            page(&table, query(Some(JobState::Failed), 0, 10))
                .unwrap()
                .jobs
                .is_empty()
        );
        assert!(
            page(&table, query(None, u64::MAX, 10))
                .unwrap()
                .jobs
                .is_empty()
        );
    }

    // L12: a job both still in memory and already in the archive (read as
    // its end is applied) is answered once, as the archive has it.
    #[test]
    fn l12_a_job_in_both_is_answered_once_as_ended() {
        let live = |id: u64, state: JobState| {
            let mut record = JobRecord::accepted(
                id,
                NewJob {
                    command: vec!["true".into()],
                    labels: vec![],
                    trust: TrustClass::Trusted,
                    timeout: None,
                    key: None,
                    pinned: None,
                },
                t(id),
            );
            record.state = state;
            record
        };
        let merged = merge(
            vec![
                live(1, JobState::Queued),
                live(2, JobState::Running),
                live(4, JobState::Queued),
            ],
            vec![live(2, JobState::Finished), live(3, JobState::Failed)],
        );
        let shown: Vec<(u64, JobState)> = merged.iter().map(|r| (r.id, r.state)).collect();
        assert_eq!(
            shown,
            [
                (1, JobState::Queued),
                (2, JobState::Finished),
                (3, JobState::Failed),
                (4, JobState::Queued)
            ]
        );
        assert!(merge(Vec::new(), Vec::new()).is_empty());
    }

    fn weight_of_big() -> usize {
        let table = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
        accept_big(&table, 1, 1);
        let record = table.read().live(1).cloned().unwrap();
        weight(&record)
    }

    // L19: a page ends early rather than weigh more than its bytes allow,
    // whether its jobs are in memory or in the archive, and always holds at
    // least one job; the next page starts where it ended.
    #[test]
    fn l19_a_page_of_large_jobs_is_cut_by_its_bytes() {
        let store = Store::memory();
        let table = RwLock::new(Jobs::over(store.archive(), Vec::new()));
        for id in 1..=7 {
            accept_big(&table, id, id);
        }
        for id in [2, 3, 5] {
            end(&table, id, &Outcome::Finished { exit_code: 0 }, 10);
        }
        let mut after = 0;
        let mut pages = Vec::new();
        loop {
            let page = page(&table, query(None, after, 1000)).unwrap();
            let bytes: usize = page.jobs.iter().map(weight).sum();
            assert!(bytes <= MAX_PAGE_BYTES, "{bytes}");
            pages.push(ids(&page));
            match page.next {
                Some(next) => after = next,
                None => break,
            }
        }
        assert_eq!(pages, [vec![1, 2, 3], vec![4, 5, 6], vec![7]]);
        // One job past the bytes alone is still a page.
        let huge = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
        accept_command(&huge, 1, 1, vec!["x".repeat(MAX_PAGE_BYTES + 1)]);
        accept(&huge, 2, 1);
        let first = page(&huge, query(None, 0, 10)).unwrap();
        assert_eq!((ids(&first), first.next), (vec![1], Some(1)));
        let second = page(&huge, query(None, 1, 10)).unwrap();
        assert_eq!((ids(&second), second.next), (vec![2], None));
        // The count still bounds a page of small jobs.
        let small = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
        for id in 1..=3 {
            accept(&small, id, 1);
        }
        let first = page(&small, query(None, 0, 2)).unwrap();
        assert_eq!((ids(&first), first.next), (vec![1, 2], Some(2)));
        assert_eq!(fitting(&[], 5), 0);
    }

    // L19: a job weighs its command's and labels' bytes, four more each, and
    // a bound on the rest; jobs weighing exactly a page fill it, one byte
    // more does not fit.
    #[test]
    fn l19_a_page_holds_exactly_its_bytes() {
        let mut record = JobRecord::accepted(
            1,
            NewJob {
                command: vec!["ab".into(), "cde".into()],
                labels: vec!["x".into()],
                trust: TrustClass::Trusted,
                timeout: None,
                key: None,
                pinned: None,
            },
            t(1),
        );
        assert_eq!(weight(&record), 512 + (2 + 4) + (3 + 4) + (1 + 4));
        record.labels.clear();
        assert_eq!(weight(&record), 512 + (2 + 4) + (3 + 4));
        // Two jobs of half a page each: both fit, from memory or the archive.
        let half = MAX_PAGE_BYTES / 2 - 512 - 4;
        for ended in [false, true] {
            let table = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
            accept_command(&table, 1, 1, vec!["x".repeat(half)]);
            accept_command(&table, 2, 1, vec!["x".repeat(half)]);
            accept_command(&table, 3, 1, vec!["x".repeat(half + 1)]);
            if ended {
                for id in 1..=3 {
                    end(&table, id, &Outcome::Cancelled, 2);
                }
            }
            let first = page(&table, query(None, 0, 10)).unwrap();
            assert_eq!(
                (ids(&first), first.next),
                (vec![1, 2], Some(2)),
                "ended: {ended}"
            );
            let rest = page(&table, query(None, 2, 10)).unwrap();
            assert_eq!((ids(&rest), rest.next), (vec![3], None), "ended: {ended}");
        }
        let table = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
        accept_command(&table, 1, 1, vec!["x".repeat(half)]);
        accept_command(&table, 2, 1, vec!["x".repeat(half + 1)]);
        let first = page(&table, query(None, 0, 10)).unwrap();
        assert_eq!(
            (ids(&first), first.next),
            (vec![1], Some(1)),
            "one byte past a page"
        );
    }

    // L19: jobs in memory cut by their bytes end the page where they were
    // cut, even when the archive holds smaller jobs past the cut that would
    // fit: none of the jobs in memory past the cut is skipped.
    #[test]
    fn l19_a_cut_in_memory_is_where_the_page_ends() {
        let table = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
        for id in 1..=4 {
            accept_big(&table, id, 1);
        }
        for id in 5..=6 {
            accept(&table, id, 1);
            end(&table, id, &Outcome::Cancelled, 2);
        }
        let first = page(&table, query(None, 0, 10)).unwrap();
        assert_eq!((ids(&first), first.next), (vec![1, 2, 3], Some(3)));
        let second = page(&table, query(None, 3, 10)).unwrap();
        assert_eq!((ids(&second), second.next), (vec![4, 5, 6], None));
    }

    // L19: what is copied of the jobs in memory under the table's lock is
    // bounded by a page's bytes (at least one job), and says where it was
    // cut; the count bounds it too.
    #[test]
    fn l19_the_copy_under_the_lock_stops_at_a_pages_bytes() {
        let table = RwLock::new(Jobs::over(Store::memory().archive(), Vec::new()));
        for id in 1..=5 {
            accept_big(&table, id, 1);
        }
        let jobs = table.read();
        let ids = |copied: &[JobRecord]| copied.iter().map(|r| r.id).collect::<Vec<_>>();
        let (copied, cut) = copy_within_bytes(jobs.iter(), 10);
        assert_eq!((ids(&copied), cut), (vec![1, 2, 3], Some(3)));
        let (copied, cut) = copy_within_bytes(jobs.iter(), 2);
        assert_eq!((ids(&copied), cut), (vec![1, 2], None));
        let (copied, cut) = copy_within_bytes(jobs.iter().skip(4), 10);
        assert_eq!((ids(&copied), cut), (vec![5], None));
        let (copied, cut) = copy_within_bytes(std::iter::empty(), 10);
        assert_eq!((copied.len(), cut), (0, None));
    }

    /// One step of a walk over the pages while the table changes.
    #[derive(Debug, Clone)]
    enum Op {
        Accept,
        /// Accept a job a third of a page's bytes large.
        AcceptBig,
        /// End the n-th job still in memory (modulo how many there are).
        End(usize, bool),
        /// Remove what ended more than this many steps ago.
        Prune(u64),
        /// Read the next page of this size.
        Page(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Accept),
            1 => Just(Op::AcceptBig),
            3 => (any::<usize>(), any::<bool>()).prop_map(|(n, ok)| Op::End(n, ok)),
            1 => (0u64..8).prop_map(Op::Prune),
            3 => (1usize..6).prop_map(Op::Page),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        // L12: walking the pages while jobs are accepted, end and are pruned,
        // every job there from the walk's start to its end is seen exactly
        // once, no job is seen twice, and nothing seen was never accepted.
        #[test]
        fn l12_every_job_is_seen_once_across_pages_while_the_table_changes(
            before in 0usize..30,
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut store = Store::memory();
            let table = RwLock::new(Jobs::over(store.archive(), Vec::new()));
            let mut next_id = 1;
            let mut now = 100;
            for _ in 0..before {
                accept(&table, next_id, now);
                next_id += 1;
            }
            let at_start: BTreeSet<u64> = (1..next_id).collect();
            let mut pruned = BTreeSet::new();
            let mut seen = Vec::new();
            let mut after = 0;
            let mut done = false;
            let walk = |limit: usize, after: &mut u64, seen: &mut Vec<u64>| -> Result<bool, TestCaseError> {
                let page = page(&table, query(None, *after, limit)).unwrap();
                prop_assert!(page.jobs.len() <= limit);
                seen.extend(ids(&page));
                match page.next {
                    Some(next) => {
                        // Full, or cut where the next job (at most a big
                        // one) would not fit in a page's bytes (L19).
                        let bytes: usize = page.jobs.iter().map(weight).sum();
                        prop_assert!(
                            page.jobs.len() == limit || bytes + weight_of_big() > MAX_PAGE_BYTES,
                            "a page of {} jobs, {} bytes, cut early", page.jobs.len(), bytes
                        );
                        prop_assert!(bytes <= MAX_PAGE_BYTES);
                        prop_assert_eq!(page.jobs.last().map(|r| r.id), Some(next));
                        *after = next;
                        Ok(false)
                    }
                    None => Ok(true),
                }
            };
            for op in ops {
                now += 1;
                match op {
                    Op::Accept => {
                        accept(&table, next_id, now);
                        next_id += 1;
                    }
                    Op::AcceptBig => {
                        accept_big(&table, next_id, now);
                        next_id += 1;
                    }
                    Op::End(n, ok) => {
                        let live: Vec<u64> = table.read().iter().map(|r| r.id).collect();
                        if !live.is_empty() {
                            let outcome = if ok { Outcome::Finished { exit_code: 0 } } else { Outcome::Cancelled };
                            end(&table, live[n % live.len()], &outcome, now);
                        }
                    }
                    Op::Prune(age) => {
                        let ended_before: Vec<u64> = (1..next_id)
                            .filter(|&id| table.read().live(id).is_none())
                            .filter(|&id| store.archive().get(id).unwrap().is_some_and(|r| r.ended_at < Some(t(now - age))))
                            .collect();
                        let mut removed = store.prune(t(now - age), usize::MAX).unwrap();
                        removed.sort_unstable();
                        let mut expected = ended_before.clone();
                        expected.sort_unstable();
                        prop_assert_eq!(removed, expected);
                        pruned.extend(ended_before);
                    }
                    Op::Page(limit) if !done => done = walk(limit, &mut after, &mut seen)?,
                    Op::Page(_) => {}
                }
            }
            while !done {
                done = walk(3, &mut after, &mut seen)?;
            }
            let unique: BTreeSet<u64> = seen.iter().copied().collect();
            prop_assert_eq!(unique.len(), seen.len(), "a job seen twice: {:?}", seen);
            prop_assert!(seen.windows(2).all(|w| w[0] < w[1]), "{:?}", seen);
            for id in at_start.difference(&pruned) {
                prop_assert!(unique.contains(id), "job {} never seen: {:?}", id, seen);
            }
            prop_assert!(seen.iter().all(|&id| id < next_id));
            // Pruned jobs are gone from memory and archive, keys and all.
            for &id in &pruned {
                prop_assert_eq!(table.read().find(id).unwrap(), None);
                let key = format!("key-{id}");
                prop_assert_eq!(store.archive().by_key(&key).unwrap(), None);
            }
        }
    }
}
