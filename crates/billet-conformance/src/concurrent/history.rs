//! The recorded history of a concurrent run: the deployments and provider
//! objects called, each call made and its answer ([`Record`]), what a call
//! says of one name ([`Record::about`]), and one fixture's whole history
//! ([`Recorded`]).

use billet_provider::{ErrorKind, InstanceId, Teardown};

use super::specification::{Excuse, NameOp};

/// One of the fixture's deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Dep {
    Blue,
    Green,
}

/// A provider object: a deployment's own, or the second object of `blue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    Blue,
    Blue2,
    Green,
}

impl Via {
    pub(super) fn dep(self) -> Dep {
        match self {
            Via::Blue | Via::Blue2 => Dep::Blue,
            Via::Green => Dep::Green,
        }
    }
}

/// What a destroy or launch answered, as the sequential model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    Launched(InstanceId),
    Failed(ErrorKind),
    Torn(Teardown),
    Found(Option<InstanceId>),
    Listed(Vec<(usize, InstanceId)>),
}

/// A call made.
#[derive(Debug, Clone)]
pub(super) enum Call {
    Launch(usize),
    Destroy(usize, InstanceId),
    Find(usize),
    List,
}

/// One recorded call of a history.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) task: usize,
    pub(super) via: Via,
    pub(super) call: Call,
    pub(super) invoked: u64,
    pub(super) answered: u64,
    pub(super) answer: Answer,
    /// The instances it saw `Pending`, each with whether that was right
    /// when it was seen (the backend declares a pending window, or a launch
    /// of the name was under way): one that was not is right only for an
    /// instance no launch answered (one a lost launch made).
    pub(super) pending: Vec<(InstanceId, bool)>,
    /// How a fault window excuses an error it answered.
    pub(super) excuse: Excuse,
    /// The global order by which what it did has surely landed: its answer;
    /// for a call a fault cut short that may have reached the daemon
    /// ([`Excuse::Maybe`]), the end of the last fault it overlapped, since
    /// a request the daemon received may still be at work after its caller
    /// saw the error (a fixture ends an outage only once everything it
    /// delivered has been answered).
    pub(super) settled: u64,
}

impl Record {
    /// Whether it saw `id` `Pending`.
    pub(super) fn saw_pending(&self, id: &InstanceId) -> bool {
        self.pending.iter().any(|(p, _)| p == id)
    }

    /// The name this call concerns, projected for the per-name check: `None`
    /// if it says nothing about `name`.
    pub(super) fn about(&self, name: usize) -> Option<NameOp> {
        let op = match (&self.call, &self.answer) {
            (Call::Launch(n), Answer::Launched(id)) if *n == name => {
                NameOp::Launched(id.as_str().to_owned())
            }
            (Call::Launch(n), Answer::Failed(kind)) if *n == name => {
                NameOp::LaunchFailed(*kind, self.excuse)
            }
            (Call::Destroy(n, id), answer) if *n == name => NameOp::Destroy(
                id.as_str().to_owned(),
                match answer {
                    Answer::Torn(t) => Ok(*t),
                    Answer::Failed(kind) => Err((*kind, self.excuse)),
                    _ => return None,
                },
            ),
            (Call::Find(n), Answer::Found(found)) if *n == name => {
                NameOp::Sees(found.as_ref().map(|id| self.sighting(id)))
            }
            (Call::Find(n), Answer::Failed(kind)) if *n == name => {
                NameOp::Failed(*kind, self.excuse)
            }
            (Call::List, Answer::Listed(all)) => NameOp::Sees(
                all.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, id)| self.sighting(id)),
            ),
            (Call::List, Answer::Failed(kind)) => NameOp::Failed(*kind, self.excuse),
            _ => return None,
        };
        Some(op)
    }

    fn sighting(&self, id: &InstanceId) -> (String, bool) {
        (id.as_str().to_owned(), self.saw_pending(id))
    }
}

/// A recorded history of one fixture.
#[derive(Debug, Clone)]
pub(super) struct Recorded {
    pub(super) names: Vec<String>,
    pub(super) blue: Vec<Record>,
    pub(super) green: Vec<Record>,
    /// The faults made, in order.
    pub(super) windows: Vec<Window>,
    /// A wrong answer found while recording (an instance that is not what
    /// was asked for), with the record that carries it.
    pub(super) wrong: Option<(String, Record)>,
}

/// A fault the suite made during a history: an outage of a deployment's
/// connection (H8), or a mid-call fault armed and then an outage (H11).
#[derive(Debug, Clone)]
pub(super) struct Window {
    pub(super) dep: Dep,
    /// `Some(after)` when it began with [`ProviderFactory::lose_answer`].
    pub(super) lose: Option<u32>,
    /// Invocation of the call that began it (`set_outage(true)` or
    /// `lose_answer`).
    pub(super) start: u64,
    /// Answer of `set_outage(true)`: from here the connection refuses all.
    pub(super) cut: u64,
    /// Invocation of `set_outage(false)`: until here it refuses all.
    pub(super) restore: u64,
    /// Answer of `set_outage(false)`.
    pub(super) end: u64,
}

impl Window {
    /// Whether `record`'s call overlapped this fault at some instant.
    pub(super) fn overlaps(&self, record: &Record) -> bool {
        record.via.dep() == self.dep && record.invoked < self.end && record.answered > self.start
    }

    /// Whether `record`'s call began after the connection was cut and
    /// answered before it was restored: it reached no daemon.
    fn holds_inside(&self, record: &Record) -> bool {
        record.via.dep() == self.dep && record.invoked > self.cut && record.answered < self.restore
    }
}

/// How `windows` excuse an error `record` answered: an outage excuses an
/// outage's error from a call that overlapped it, and one that overlapped
/// its edges, or a mid-call fault, may have reached the daemon. With
/// outages of the inventory only, `launch` and `destroy` are never excused.
pub(super) fn excuse(record: &Record, windows: &[Window], whole: bool) -> Excuse {
    let mutating = matches!(record.call, Call::Launch(_) | Call::Destroy(..));
    if mutating && !whole {
        return Excuse::None;
    }
    if !windows.iter().any(|w| w.overlaps(record)) {
        return Excuse::None;
    }
    if !mutating || windows.iter().any(|w| w.holds_inside(record)) {
        return Excuse::Nothing;
    }
    Excuse::Maybe
}

/// The faults of `dep` that overlap the span of `calls`.
pub(super) fn around(windows: &[Window], dep: Dep, calls: &[Record]) -> Vec<Window> {
    let (Some(from), Some(to)) = (
        calls.iter().map(|r| r.invoked).min(),
        calls.iter().map(|r| r.answered).max(),
    ) else {
        return Vec::new();
    };
    windows
        .iter()
        .filter(|w| w.dep == dep && w.start < to && w.end > from)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use billet_provider::Teardown;

    use super::*;
    use crate::concurrent::linearizability::linearizable;
    use crate::concurrent::test_support::{LOST, id, record, sees, window};

    // H12: each call is read for one name as what it says of that name, and
    // as nothing when it concerns another: a list as a sighting (or not) of
    // every name, a failed list as a failure for every name.
    #[test]
    fn h12_each_call_says_what_it_says_of_one_name_only() {
        let excused = |mut r: Record, excuse| {
            r.excuse = excuse;
            r
        };
        let launched = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        assert_eq!(launched.about(0), Some(NameOp::Launched("a".to_owned())));
        assert_eq!(launched.about(1), None);
        let refused = excused(
            record(
                0,
                0,
                1,
                Call::Launch(0),
                Answer::Failed(ErrorKind::Conflict),
            ),
            Excuse::Maybe,
        );
        assert_eq!(
            refused.about(0),
            Some(NameOp::LaunchFailed(ErrorKind::Conflict, Excuse::Maybe))
        );
        assert_eq!(refused.about(1), None);
        let stopped = record(
            0,
            0,
            1,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        assert_eq!(
            stopped.about(0),
            Some(NameOp::Destroy("a".to_owned(), Ok(Teardown::Stopped)))
        );
        assert_eq!(stopped.about(1), None);
        let cut = excused(
            record(0, 0, 1, Call::Destroy(0, id("a")), Answer::Failed(LOST)),
            Excuse::Nothing,
        );
        assert_eq!(
            cut.about(0),
            Some(NameOp::Destroy(
                "a".to_owned(),
                Err((LOST, Excuse::Nothing))
            ))
        );
        assert_eq!(cut.about(1), None);
        let odd = record(0, 0, 1, Call::Destroy(0, id("a")), Answer::Found(None));
        assert_eq!(odd.about(0), None);
        let mut seen = record(0, 0, 1, Call::Find(0), Answer::Found(Some(id("a"))));
        seen.pending = vec![(id("a"), false)];
        assert_eq!(seen.about(0), Some(sees("a", true)));
        assert_eq!(seen.about(1), None);
        let none = record(0, 0, 1, Call::Find(0), Answer::Found(None));
        assert_eq!(none.about(0), Some(NameOp::Sees(None)));
        let lost = excused(
            record(0, 0, 1, Call::Find(0), Answer::Failed(LOST)),
            Excuse::Nothing,
        );
        assert_eq!(lost.about(0), Some(NameOp::Failed(LOST, Excuse::Nothing)));
        assert_eq!(lost.about(1), None);
        let odd = record(0, 0, 1, Call::Launch(0), Answer::Found(None));
        assert_eq!(odd.about(0), None);
        let list = record(0, 0, 1, Call::List, Answer::Listed(vec![(1, id("b"))]));
        assert_eq!(list.about(0), Some(NameOp::Sees(None)));
        assert_eq!(list.about(1), Some(sees("b", false)));
        let lost = excused(
            record(0, 0, 1, Call::List, Answer::Failed(LOST)),
            Excuse::Maybe,
        );
        assert_eq!(lost.about(0), Some(NameOp::Failed(LOST, Excuse::Maybe)));
        assert_eq!(lost.about(1), Some(NameOp::Failed(LOST, Excuse::Maybe)));
        // A list that failed with no fault to excuse it fails the history.
        let unexcused = record(0, 0, 1, Call::List, Answer::Failed(LOST));
        assert!(!linearizable(&[&unexcused], 0, Teardown::Absent));
    }

    // H12/H8: which calls a fault excuses, and which may have reached the
    // daemon: inside the cut nothing did; across its edges a launch or a
    // destroy may have; a find or list never changes anything; with
    // outages of the inventory only, launch and destroy are never excused.
    #[test]
    fn h12_h8_a_fault_excuses_the_calls_that_overlap_it() {
        let windows = [window(10, 12, 20, 22)];
        let launch =
            |invoked, answered| record(0, invoked, answered, Call::Launch(0), Answer::Failed(LOST));
        assert_eq!(excuse(&launch(0, 9), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(23, 24), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(13, 19), &windows, true), Excuse::Nothing);
        assert_eq!(excuse(&launch(12, 19), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(13, 20), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(5, 11), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(21, 30), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(5, 30), &windows, true), Excuse::Maybe);
        assert_eq!(excuse(&launch(5, 10), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(22, 30), &windows, true), Excuse::None);
        assert_eq!(excuse(&launch(13, 19), &windows, false), Excuse::None);
        let destroy = record(0, 5, 30, Call::Destroy(0, id("a")), Answer::Failed(LOST));
        assert_eq!(excuse(&destroy, &windows, true), Excuse::Maybe);
        let find = record(0, 5, 30, Call::Find(0), Answer::Failed(LOST));
        assert_eq!(excuse(&find, &windows, false), Excuse::Nothing);
        assert_eq!(excuse(&find, &windows, true), Excuse::Nothing);
        let list = record(0, 0, 9, Call::List, Answer::Failed(LOST));
        assert_eq!(excuse(&list, &windows, true), Excuse::None);
        // Another deployment's fault excuses nothing.
        let green = Window {
            dep: Dep::Green,
            ..window(10, 12, 20, 22)
        };
        assert_eq!(excuse(&launch(13, 19), &[green], true), Excuse::None);
    }

    // H12/H8: a fault is shown with the calls it overlapped, not with calls
    // that ended as it began or began as it ended.
    #[test]
    fn h12_h8_the_faults_shown_are_those_around_the_calls() {
        let faults = [window(10, 12, 20, 22)];
        let span = |invoked, answered| {
            [record(
                0,
                invoked,
                answered,
                Call::List,
                Answer::Listed(Vec::new()),
            )]
        };
        assert!(around(&faults, Dep::Blue, &span(5, 10)).is_empty());
        assert!(around(&faults, Dep::Blue, &span(22, 25)).is_empty());
        assert_eq!(around(&faults, Dep::Blue, &span(5, 11)).len(), 1);
        assert_eq!(around(&faults, Dep::Blue, &span(21, 25)).len(), 1);
        assert!(around(&faults, Dep::Green, &span(5, 25)).is_empty());
    }

    // H12/H8: only a fault of the call's own deployment holds it inside its
    // cut: a blue call across a blue outage's edge may have reached the
    // daemon, though a green outage held that whole call inside.
    #[test]
    fn h12_h8_only_its_own_deployments_fault_holds_a_call_inside() {
        let blue = window(10, 12, 20, 22);
        let green = Window {
            dep: Dep::Green,
            ..window(0, 2, 40, 42)
        };
        let launch = record(0, 11, 19, Call::Launch(0), Answer::Failed(LOST));
        assert!(blue.overlaps(&launch) && !blue.holds_inside(&launch));
        assert!(!green.overlaps(&launch) && !green.holds_inside(&launch));
        assert_eq!(excuse(&launch, &[blue, green], true), Excuse::Maybe);
    }
}
