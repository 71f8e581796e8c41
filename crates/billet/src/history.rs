//! What the status page's charts draw (K7): per pool, the leases held and
//! the jobs queued over the last [`SPAN`], kept as one bucket per [`STEP`]
//! in a ring of at most [`BUCKETS`] buckets a pool, so memory is bounded by
//! the pools configured, never by time or by jobs.
//!
//! The engine records its counts after every step ([`History::record`]).
//! A pool's counts change only in a step, so a bucket no step fell in holds
//! what the last step before it left: [`History::series`] carries it
//! forward, and a quiet hour costs nothing.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use billet_scheduler::PoolStats;
use parking_lot::Mutex;

/// How far back the charts reach.
pub const SPAN: Duration = Duration::from_secs(60 * 60);

/// The width of one bucket: a chart's resolution. A minute: an hour's chart
/// is then 60 steps, small enough that a page of a hundred pools' charts
/// stays small (the `status_page` bench).
pub const STEP: Duration = Duration::from_secs(60);

/// Buckets a chart draws, and the most kept of one pool: [`SPAN`] over
/// [`STEP`].
pub const BUCKETS: usize = (SPAN.as_secs() / STEP.as_secs()) as usize;

/// One pool's counts over one [`STEP`]: the most each reached in it (what a
/// chart draws) and what the last step left (what the next quiet buckets
/// carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's number: seconds since the epoch over [`STEP`].
    pub index: u64,
    /// The most leases held at once in it.
    pub held: u32,
    /// The most jobs queued at once in it.
    pub queued: u64,
    held_last: u32,
    queued_last: u64,
}

/// One pool's chart: its capacity and one bucket per [`STEP`], oldest first,
/// ending with the bucket of the time asked; buckets from before the service
/// started are absent, so a chart may be shorter than [`BUCKETS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// The pool's name.
    pub name: String,
    /// The most leases it holds at once.
    pub capacity: u32,
    /// Its buckets, oldest first, each `index` one more than the one before.
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Default)]
struct Pool {
    name: String,
    capacity: u32,
    buckets: VecDeque<Bucket>,
    /// Moved on by every record that changes what a chart of this pool
    /// draws (see [`Stamp`]).
    version: u64,
}

/// What a pool's chart at some time is drawn from: two charts with equal
/// stamps are the same, so one drawn may be kept and shown again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The bucket of the time asked: the chart's right edge.
    pub end: u64,
    /// The pool's version: moved on whenever its name, capacity or a
    /// bucket's peak changes, or a bucket is added.
    pub version: u64,
}

/// Every pool's recent counts; shared by the engine (which records) and the
/// status page (which reads).
#[derive(Debug, Default)]
pub struct History {
    pools: Mutex<Vec<Pool>>,
}

/// The bucket `at` falls in.
fn index_of(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / STEP.as_secs()
}

impl History {
    /// Records the counts of `pools` (in configuration order) at `at`.
    pub fn record(&self, at: SystemTime, pools: &[PoolStats]) {
        let index = index_of(at);
        let mut kept = self.pools.lock();
        if kept.len() != pools.len() {
            kept.resize_with(pools.len(), Pool::default);
        }
        for (pool, stats) in kept.iter_mut().zip(pools) {
            let before = (
                pool.capacity,
                pool.buckets.back().map(|b| (b.index, b.held, b.queued)),
            );
            if pool.name != stats.name {
                pool.name.clone_from(&stats.name);
                pool.version += 1;
            }
            pool.capacity = stats.capacity;
            match pool.buckets.back_mut() {
                Some(last) if last.index >= index => {
                    last.held = last.held.max(stats.leases);
                    last.queued = last.queued.max(stats.queued);
                    last.held_last = stats.leases;
                    last.queued_last = stats.queued;
                }
                _ => {
                    if pool.buckets.len() == BUCKETS {
                        pool.buckets.pop_front();
                    }
                    pool.buckets.push_back(Bucket {
                        index,
                        held: stats.leases,
                        queued: stats.queued,
                        held_last: stats.leases,
                        queued_last: stats.queued,
                    });
                }
            }
            let after = (
                pool.capacity,
                pool.buckets.back().map(|b| (b.index, b.held, b.queued)),
            );
            if before != after {
                pool.version += 1;
            }
        }
    }

    /// Each pool's [`Stamp`] for a chart at `now`, in configuration order.
    pub fn stamps(&self, now: SystemTime) -> Vec<Stamp> {
        let end = index_of(now);
        self.pools
            .lock()
            .iter()
            .map(|pool| Stamp {
                end,
                version: pool.version,
            })
            .collect()
    }

    /// Pool `n`'s chart (in configuration order) up to the bucket of `now`,
    /// as [`History::series`] draws it, with its [`Stamp`]; `None` past the
    /// last pool.
    pub fn series_of(&self, n: usize, now: SystemTime) -> Option<(Series, Stamp)> {
        let pools = self.pools.lock();
        let pool = pools.get(n)?;
        Some((
            pool.series(now),
            Stamp {
                end: index_of(now),
                version: pool.version,
            },
        ))
    }

    /// Every pool's chart up to the bucket of `now`: the last [`BUCKETS`]
    /// buckets, quiet ones holding what the step before them left.
    pub fn series(&self, now: SystemTime) -> Vec<Series> {
        self.pools
            .lock()
            .iter()
            .map(|pool| pool.series(now))
            .collect()
    }
}

impl Pool {
    /// This pool's chart up to the bucket of `now`: the last [`BUCKETS`]
    /// buckets, quiet ones holding what the step before them left.
    fn series(&self, now: SystemTime) -> Series {
        let end = index_of(now);
        let first = end.saturating_sub(BUCKETS as u64 - 1);
        Series {
            name: self.name.clone(),
            capacity: self.capacity,
            buckets: filled(&self.buckets, first, end),
        }
    }
}

/// One bucket for each index from `first` (or the first kept, if later) to
/// `end`, quiet ones carrying the last counts before them.
fn filled(kept: &VecDeque<Bucket>, first: u64, end: u64) -> Vec<Bucket> {
    let mut out = Vec::with_capacity(BUCKETS);
    let mut carried: Option<Bucket> = None;
    let mut next = kept.iter().peekable();
    for index in first..=end {
        while let Some(bucket) = next.next_if(|bucket| bucket.index < index) {
            carried = Some(*bucket);
        }
        if let Some(bucket) = next.next_if(|bucket| bucket.index == index) {
            out.push(*bucket);
            carried = Some(*bucket);
        } else if let Some(before) = carried {
            out.push(Bucket {
                index,
                held: before.held_last,
                queued: before.queued_last,
                held_last: before.held_last,
                queued_last: before.queued_last,
            });
        }
    }
    out
}

/// A ready pool's counts, for the tests of what draws them.
#[cfg(test)]
pub(crate) fn stats_of(name: &str, capacity: u32, leases: u32, queued: u64) -> PoolStats {
    PoolStats {
        name: name.to_owned(),
        kind: billet_provider::ProviderKind::Docker,
        capacity,
        leases,
        launching: 0,
        queued,
        orphans: 0,
        ready: true,
        contested: 0,
        leftovers: 0,
        unsettled: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, leases: u32, queued: u64) -> PoolStats {
        stats_of(name, 4, leases, queued)
    }

    /// The tests' times are written in seconds of a 30-s step, and scaled
    /// to [`STEP`]: each falls in the same bucket whatever the step.
    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs * STEP.as_secs() / 30)
    }

    // K7: a bucket draws the most it held, and quiet buckets after it the
    // counts its last step left.
    #[test]
    fn k7_a_bucket_keeps_its_peak_and_quiet_ones_carry_the_last_counts() {
        let history = History::default();
        history.record(at(3_000), &[pool("a", 1, 5)]);
        history.record(at(3_010), &[pool("a", 4, 9)]);
        history.record(at(3_029), &[pool("a", 2, 0)]);
        history.record(at(3_090), &[pool("a", 0, 1)]);
        let series = history.series(at(3_150));
        assert_eq!(series.len(), 1);
        assert_eq!((series[0].name.as_str(), series[0].capacity), ("a", 4));
        let drawn: Vec<(u64, u32, u64)> = series[0]
            .buckets
            .iter()
            .map(|bucket| (bucket.index, bucket.held, bucket.queued))
            .collect();
        assert_eq!(
            drawn,
            [
                (100, 4, 9),
                (101, 2, 0),
                (102, 2, 0),
                (103, 0, 1),
                (104, 0, 1),
                (105, 0, 1)
            ]
        );
    }

    // K7: memory is bounded: a pool keeps at most BUCKETS buckets, and a
    // chart reaches back SPAN and no further.
    #[test]
    fn k7_a_pool_keeps_at_most_an_hour_of_buckets() {
        assert_eq!(
            (BUCKETS, STEP, SPAN.as_secs()),
            (60, Duration::from_secs(60), 3_600)
        );
        let history = History::default();
        let step = 30;
        for n in 0..(BUCKETS as u64 * 3) {
            history.record(at(n * step), &[pool("a", (n % 5) as u32, n)]);
        }
        assert_eq!(history.pools.lock()[0].buckets.len(), BUCKETS);
        let last = BUCKETS as u64 * 3 - 1;
        let series = history.series(at(last * step));
        let buckets = &series[0].buckets;
        assert_eq!(buckets.len(), BUCKETS);
        assert_eq!(buckets[0].index, last + 1 - BUCKETS as u64);
        assert_eq!(buckets[BUCKETS - 1].index, last);
        assert_eq!(buckets[BUCKETS - 1].queued, last);
        // Asked long after, the last counts fill the whole hour.
        let later = history.series(at((last + 10 * BUCKETS as u64) * step));
        assert_eq!(later[0].buckets.len(), BUCKETS);
        assert!(later[0].buckets.iter().all(|bucket| bucket.queued == last));
    }

    // K7: a pool's stamp moves on exactly when its chart would change: a new
    // bucket, a higher peak, another capacity or name, or a later time; a
    // record that changes no peak keeps it (a kept chart is shown again).
    #[test]
    fn k7_a_stamp_moves_on_exactly_when_the_chart_changes() {
        let history = History::default();
        assert!(history.stamps(at(0)).is_empty());
        assert!(history.series_of(0, at(0)).is_none());
        history.record(at(300), &[pool("a", 2, 3), pool("b", 0, 0)]);
        let first = history.stamps(at(300));
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].end, 10);
        // Lower counts in the same bucket: the peaks stand.
        history.record(at(301), &[pool("a", 1, 1), pool("b", 0, 0)]);
        assert_eq!(history.stamps(at(301)), first);
        // A higher peak in one pool moves that pool's stamp only.
        history.record(at(302), &[pool("a", 1, 4), pool("b", 0, 0)]);
        let raised = history.stamps(at(302));
        assert_ne!(raised[0], first[0]);
        assert_eq!(raised[1], first[1]);
        history.record(at(303), &[pool("a", 3, 4), pool("b", 0, 0)]);
        assert_ne!(history.stamps(at(303))[0], raised[0], "held's peak too");
        // Another capacity, another name.
        let mut wider = pool("b", 0, 0);
        wider.capacity = 9;
        let before = history.stamps(at(303))[1];
        history.record(at(304), &[pool("a", 3, 4), wider]);
        assert_ne!(history.stamps(at(304))[1], before);
        let before = history.stamps(at(304))[1];
        // The name alone (the capacity and the peaks as they were).
        let mut renamed = pool("c", 0, 0);
        renamed.capacity = 9;
        history.record(at(305), &[pool("a", 3, 4), renamed]);
        let renamed = history.stamps(at(305))[1];
        assert_ne!(renamed.version, before.version);
        // A new bucket; and a later time with no record, by its end.
        history.record(at(330), &[pool("a", 0, 0), pool("c", 0, 0)]);
        let next = history.stamps(at(330));
        assert_ne!(next[1].version, renamed.version);
        assert_eq!(history.stamps(at(390))[0].end, 13);
        let (series, stamp) = history.series_of(1, at(390)).unwrap();
        assert_eq!(series.name, "c");
        assert_eq!(stamp, history.stamps(at(390))[1]);
        assert_eq!(series, history.series(at(390))[1]);
    }

    // K7: before the first record there is nothing to draw, and a time
    // before the epoch or a clock stepped back records into the last bucket
    // rather than out of order.
    #[test]
    fn k7_no_bucket_before_the_first_record_and_none_out_of_order() {
        let history = History::default();
        assert!(history.series(at(1_000)).is_empty());
        history.record(at(600), &[pool("a", 1, 0), pool("b", 3, 2)]);
        history.record(at(300), &[pool("a", 2, 0), pool("b", 0, 0)]);
        let series = history.series(at(630));
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let a: Vec<(u64, u32)> = series[0]
            .buckets
            .iter()
            .map(|b| (b.index, b.held))
            .collect();
        assert_eq!(a, [(20, 2), (21, 2)]);
        let b: Vec<(u64, u32)> = series[1]
            .buckets
            .iter()
            .map(|b| (b.index, b.held))
            .collect();
        assert_eq!(b, [(20, 3), (21, 0)]);
    }
}
