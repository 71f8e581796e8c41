//! Where each runner stands for the intake's look (ended, starting, idle
//! since an instant, busy), kept as its billet job and its demand change,
//! not walked at every tick: a deployment with thousands of jobs queued
//! has a runner kept for each, and the look comes at every tick.
//!
//! Bounded by the runners the intake holds: one entry per runner's billet
//! job, removed with it.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use crate::record::JobRecord;

/// Where one runner stands, as the look sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stands {
    /// Its billet job ended: the next look removes it.
    Ended,
    /// No job taken; its billet job has not started.
    Starting,
    /// No job taken; its billet job started at this instant.
    Idle(SystemTime),
    /// It took a job (or the demand no longer holds it).
    Busy,
}

impl Stands {
    /// Where a runner stands whose billet job is `record` (`None`: ended)
    /// and that has taken no job if `untaken`.
    pub(super) fn of(record: Option<&JobRecord>, untaken: bool) -> Stands {
        match (record, untaken) {
            (None, _) => Stands::Ended,
            (Some(_), false) => Stands::Busy,
            (Some(record), true) => match record.started_at {
                Some(at) => Stands::Idle(at),
                None => Stands::Starting,
            },
        }
    }
}

/// Every runner's [`Stands`], by its billet job, and what the look asks of
/// them all, kept as entries change.
#[derive(Debug, Default)]
pub(super) struct Watch {
    stands: HashMap<u64, Stands>,
    /// Runners starting, idle and busy, in that order.
    counts: [usize; 3],
    /// Runners whose billet job ended.
    ended: usize,
    /// Idle runners by the instant their billet job started.
    idle: BTreeSet<(SystemTime, u64)>,
}

impl Watch {
    /// Runner billet job `job` now stands as `stands` (`None`: it is no
    /// runner's, or no longer).
    pub(super) fn set(&mut self, job: u64, stands: Option<Stands>) {
        let was = match stands {
            Some(stands) => self.stands.insert(job, stands),
            None => self.stands.remove(&job),
        };
        if was == stands {
            return;
        }
        if let Some(was) = was {
            self.tally(job, was, false);
        }
        if let Some(stands) = stands {
            self.tally(job, stands, true);
        }
    }

    /// Counts `stands` in (`add`) or out.
    fn tally(&mut self, job: u64, stands: Stands, add: bool) {
        let counted = match stands {
            Stands::Ended => &mut self.ended,
            Stands::Starting => &mut self.counts[0],
            Stands::Idle(at) => {
                if add {
                    self.idle.insert((at, job));
                } else {
                    self.idle.remove(&(at, job));
                }
                &mut self.counts[1]
            }
            Stands::Busy => &mut self.counts[2],
        };
        *counted = if add {
            *counted + 1
        } else {
            counted.saturating_sub(1)
        };
    }

    /// Forgets every runner.
    pub(super) fn clear(&mut self) {
        *self = Watch::default();
    }

    /// Runners starting, idle and busy, in that order.
    pub(super) fn counts(&self) -> [usize; 3] {
        self.counts
    }

    /// Whether some runner's billet job ended.
    pub(super) fn any_ended(&self) -> bool {
        self.ended > 0
    }

    /// The first instant an idle runner is past `idle_timeout`: just past
    /// the earliest start plus the timeout.
    pub(super) fn first_overdue(&self, idle_timeout: Duration) -> Option<SystemTime> {
        self.idle
            .first()
            .map(|(at, _)| *at + idle_timeout + Duration::from_nanos(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn stands(kind: u8, at: u64) -> Option<Stands> {
        match kind {
            0 => None,
            1 => Some(Stands::Ended),
            2 => Some(Stands::Starting),
            3 => Some(Stands::Idle(t(at))),
            _ => Some(Stands::Busy),
        }
    }

    proptest! {
        // H14: whatever entries are set, in any order and repeated, what the
        // watch answers is what a walk of the entries it holds answers.
        #[test]
        fn h14_the_watch_answers_as_a_walk_of_its_runners(
            sets in proptest::collection::vec((0..6u64, 0..5u8, 0..4u64), 0..60),
        ) {
            let mut watch = Watch::default();
            let mut held: std::collections::BTreeMap<u64, Stands> = Default::default();
            for (job, kind, at) in sets {
                let now = stands(kind, at);
                watch.set(job, now);
                match now {
                    Some(now) => held.insert(job, now),
                    None => held.remove(&job),
                };
                let mut counts = [0; 3];
                let mut ended = 0;
                let mut first: Option<SystemTime> = None;
                for stands in held.values() {
                    match stands {
                        Stands::Ended => ended += 1,
                        Stands::Starting => counts[0] += 1,
                        Stands::Idle(at) => {
                            counts[1] += 1;
                            first = Some(first.map_or(*at, |first| first.min(*at)));
                        }
                        Stands::Busy => counts[2] += 1,
                    }
                }
                let timeout = Duration::from_secs(10);
                prop_assert_eq!(watch.counts(), counts);
                prop_assert_eq!(watch.any_ended(), ended > 0);
                prop_assert_eq!(
                    watch.first_overdue(timeout),
                    first.map(|at| at + timeout + Duration::from_nanos(1))
                );
            }
            watch.clear();
            prop_assert_eq!(watch.counts(), [0; 3]);
            prop_assert!(!watch.any_ended());
            prop_assert_eq!(watch.first_overdue(Duration::ZERO), None);
        }
    }

    // H14: a runner stands as its billet job and its demand say.
    #[test]
    fn h14_a_runner_stands_as_its_job_and_demand_say() {
        use crate::record::NewJob;
        let new = NewJob {
            command: vec!["run".into()],
            labels: Vec::new(),
            trust: billet_provider::TrustClass::Trusted,
            timeout: None,
            key: None,
            pinned: None,
        };
        let mut record = JobRecord::accepted(1, new, t(1));
        assert_eq!(Stands::of(None, true), Stands::Ended);
        assert_eq!(Stands::of(None, false), Stands::Ended);
        assert_eq!(Stands::of(Some(&record), false), Stands::Busy);
        assert_eq!(Stands::of(Some(&record), true), Stands::Starting);
        record.started_at = Some(t(5));
        assert_eq!(Stands::of(Some(&record), true), Stands::Idle(t(5)));
        assert_eq!(Stands::of(Some(&record), false), Stands::Busy);
    }
}
