//! The checks of a recorded history: each (deployment, name)'s calls, then
//! each deployment's taken whole, for linearizability against the
//! [specification](super::specification) (with `todc-utils`' Wing-Gong-Lowe
//! checker), and instances seen `Pending` or answered wrongly; a failing
//! history is shrunk to the calls its failure needs ([`check`]).

use std::collections::BTreeSet;

use billet_provider::Teardown;
use todc_utils::linearizability::WGLChecker;
use todc_utils::linearizability::history::{Action, History};
use todc_utils::specifications::Specification;

use super::history::{Answer, Dep, Record, Recorded, Window, around};
use super::specification::{Asking, Authoritative, JointAsking, JointAuthoritative, JointOp};

/// Whether the calls of one deployment form a linearizable history taken
/// whole: what the per-name check cannot see, a list that saw its names at
/// instants that never were one.
fn linearizable_joint(records: &[&Record], names: usize, unknown: Teardown) -> bool {
    let op = |record: &Record| {
        let op: JointOp = (0..names)
            .filter_map(|name| record.about(name).map(|op| (name, op)))
            .collect();
        (!op.is_empty()).then_some(op)
    };
    match unknown {
        Teardown::Requested => linearizable_as::<JointAsking>(records, op),
        _ => linearizable_as::<JointAuthoritative>(records, op),
    }
}

/// Whether the calls about one name form a linearizable history. Each call
/// is its own process to the checker, since a call a fault cut short may
/// take effect until its fault ends, after its task's next call began.
pub(super) fn linearizable(records: &[&Record], name: usize, unknown: Teardown) -> bool {
    let op = |record: &Record| record.about(name);
    match unknown {
        Teardown::Requested => linearizable_as::<Asking>(records, op),
        _ => linearizable_as::<Authoritative>(records, op),
    }
}

/// Whether `records`, read by `op` (`None`: a call that says nothing here),
/// form a history linearizable with respect to `S`: each call is invoked at
/// its invocation and answered where what it did has surely landed.
fn linearizable_as<S: Specification>(
    records: &[&Record],
    op: impl Fn(&Record) -> Option<S::Operation>,
) -> bool {
    let mut events: Vec<(u64, usize, Action<S::Operation>)> = Vec::new();
    for (process, record) in records.iter().enumerate() {
        if let Some(op) = op(record) {
            events.push((record.invoked, process, Action::Call(op.clone())));
            events.push((record.settled, process, Action::Response(op)));
        }
    }
    if events.is_empty() {
        return true;
    }
    events.sort_by_key(|(at, _, _)| *at);
    let history = History::from_actions(
        events
            .into_iter()
            .map(|(_, process, action)| (process, action))
            .collect(),
    );
    WGLChecker::<S>::is_linearizable(history)
}

/// A failing history: why, the calls it needs, and the faults around them.
pub(super) type Failing = (String, Vec<Record>, Vec<Window>);

/// Checks one recorded history: `Err` with the reason and the calls of the
/// smallest failing sub-history.
pub(super) fn check(recorded: &Recorded, unknown: Teardown) -> Result<(), Failing> {
    for (dep, records) in [(Dep::Blue, &recorded.blue), (Dep::Green, &recorded.green)] {
        let launched: BTreeSet<String> = records
            .iter()
            .filter_map(|r| match &r.answer {
                Answer::Launched(id) => Some(id.as_str().to_owned()),
                _ => None,
            })
            .collect();
        for (name, shown) in recorded.names.iter().enumerate() {
            let all: Vec<&Record> = records.iter().collect();
            if linearizable(&all, name, unknown) {
                continue;
            }
            let mut core: Vec<&Record> = all
                .into_iter()
                .filter(|r| r.about(name).is_some())
                .collect();
            // Delete every call the failure does not need, one at a time, of
            // those whose deletion can only make the history easier to
            // linearize (finds and lists that bind nothing, refusals,
            // `Absent`, errors that reached nothing): a history without
            // some of them that is not linearizable shows the original is
            // not either, for the same reason. Launches and destroys that
            // may have changed what the name holds stay, since without them
            // a call left could fail for a reason the recorded history never
            // had; `check_concurrent` shrinks those by running smaller
            // histories.
            let mut i = 0;
            while i < core.len() {
                if !core[i]
                    .about(name)
                    .is_some_and(|op| op.observes_only(&launched))
                {
                    i += 1;
                    continue;
                }
                let mut fewer = core.clone();
                fewer.remove(i);
                if linearizable(&fewer, name, unknown) {
                    i += 1;
                } else {
                    core = fewer;
                }
            }
            let mut calls: Vec<Record> = core.into_iter().cloned().collect();
            calls.sort_by_key(|r| r.invoked);
            let windows = around(&recorded.windows, dep, &calls);
            return Err((
                format!(
                    "the calls about name {shown:?} of deployment {dep:?} are not linearizable"
                ),
                calls,
                windows,
            ));
        }
        // Each name is linearizable on its own; the deployment taken whole
        // must be too (a list sees all its names at one instant).
        let names = recorded.names.len();
        let all: Vec<&Record> = records.iter().collect();
        if !linearizable_joint(&all, names, unknown) {
            let observes_only = |r: &Record| {
                (0..names).all(|name| r.about(name).is_none_or(|op| op.observes_only(&launched)))
            };
            let mut core = all;
            let mut i = 0;
            while i < core.len() {
                if !observes_only(core[i]) {
                    i += 1;
                    continue;
                }
                let mut fewer = core.clone();
                fewer.remove(i);
                if linearizable_joint(&fewer, names, unknown) {
                    i += 1;
                } else {
                    core = fewer;
                }
            }
            let calls: Vec<Record> = core.into_iter().cloned().collect();
            let windows = around(&recorded.windows, dep, &calls);
            return Err((
                format!(
                    "the calls of deployment {dep:?} are linearizable name by name but not together: a list saw its names at instants that never were one"
                ),
                calls,
                windows,
            ));
        }
        // An instance seen `Pending` when nothing allowed it: right only for
        // one no launch answered, made by a launch whose answer a fault
        // lost (it may never have been started).
        let faulted = recorded.windows.iter().any(|w| w.dep == dep);
        for record in records {
            for (id, allowed) in &record.pending {
                if *allowed || (faulted && !launched.contains(id.as_str())) {
                    continue;
                }
                let mut calls: Vec<Record> = records
                    .iter()
                    .filter(|r| {
                        std::ptr::eq(*r, record)
                            || matches!(&r.answer, Answer::Launched(l) if l == id)
                    })
                    .cloned()
                    .collect();
                calls.sort_by_key(|r| r.invoked);
                let windows = around(&recorded.windows, dep, &calls);
                return Err((
                    format!(
                        "instance {id} of deployment {dep:?} was seen Pending, though its command never stops and time does not move: only the instance of a launch still under way (in wall time) or of a launch a fault cut short may be"
                    ),
                    calls,
                    windows,
                ));
            }
        }
    }
    if let Some((reason, record)) = &recorded.wrong {
        let mut calls: Vec<Record> = recorded
            .blue
            .iter()
            .chain(&recorded.green)
            .filter(|r| r.invoked < record.answered)
            .cloned()
            .collect();
        calls.sort_by_key(|r| r.invoked);
        let windows = around(&recorded.windows, record.via.dep(), &calls);
        return Err((reason.clone(), calls, windows));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use billet_provider::ErrorKind;

    use super::*;
    use crate::concurrent::history::{Call, Via};
    use crate::concurrent::specification::Excuse;
    use crate::concurrent::synthetic;
    use crate::concurrent::test_support::{LOST, id, record, window};

    /// [`check`] of `recorded` (authoritative), failing the test when it
    /// takes more than ten seconds: a shrinking loop that never ends fails
    /// the test rather than hanging it.
    fn checked(recorded: &Recorded) -> Result<(), Failing> {
        let (answer, answered) = std::sync::mpsc::channel();
        let recorded = recorded.clone();
        std::thread::spawn(move || {
            let _ = answer.send(check(&recorded, Teardown::Absent));
        });
        answered
            .recv_timeout(Duration::from_secs(10))
            .expect("check answered within ten seconds")
    }

    // H12: two overlapping launches of one name may not both succeed; one
    // succeeding and one answering Conflict is linearizable.
    #[test]
    fn h12_two_launches_of_one_name_both_succeeding_are_not_linearizable() {
        let a = record(0, 0, 2, Call::Launch(0), Answer::Launched(id("a")));
        let b = record(1, 1, 3, Call::Launch(0), Answer::Launched(id("b")));
        assert!(!linearizable(&[&a, &b], 0, Teardown::Absent));
        let c = record(
            1,
            1,
            3,
            Call::Launch(0),
            Answer::Failed(ErrorKind::Conflict),
        );
        assert!(linearizable(&[&a, &c], 0, Teardown::Absent));
        // A call about another name says nothing about this one.
        let other = record(1, 1, 3, Call::Launch(1), Answer::Launched(id("b")));
        assert!(linearizable(&[&a, &other], 0, Teardown::Absent));
    }

    // H12: a destroy of the held id answers Stopped once; a second overlapping
    // destroy must answer Absent (or Requested for a backend that can only ask).
    #[test]
    fn h12_two_destroys_answering_stopped_are_not_linearizable() {
        let l = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        let d1 = record(
            0,
            2,
            4,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        let d2 = record(
            1,
            3,
            5,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        assert!(!linearizable(&[&l, &d1, &d2], 0, Teardown::Absent));
        let d3 = record(
            1,
            3,
            5,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Absent),
        );
        assert!(linearizable(&[&l, &d1, &d3], 0, Teardown::Absent));
        let d4 = record(
            1,
            3,
            5,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Requested),
        );
        assert!(!linearizable(&[&l, &d1, &d4], 0, Teardown::Absent));
        assert!(linearizable(&[&l, &d1, &d4], 0, Teardown::Requested));
    }

    // H12: a list that began after a launch returned must show it; one that
    // overlapped the launch may or may not.
    #[test]
    fn h12_a_list_missing_a_finished_launch_is_not_linearizable() {
        let l = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        let list = record(1, 2, 3, Call::List, Answer::Listed(Vec::new()));
        assert!(!linearizable(&[&l, &list], 0, Teardown::Absent));
        let early = record(1, 0, 3, Call::List, Answer::Listed(Vec::new()));
        assert!(linearizable(&[&l, &early], 0, Teardown::Absent));
        let shows = record(1, 2, 3, Call::List, Answer::Listed(vec![(0, id("a"))]));
        assert!(linearizable(&[&l, &shows], 0, Teardown::Absent));
    }

    // H12: any error but a launch's Conflict on a held name is wrong here.
    #[test]
    fn h12_errors_other_than_conflict_are_not_linearizable() {
        let find = record(
            0,
            0,
            1,
            Call::Find(0),
            Answer::Failed(ErrorKind::Unavailable),
        );
        assert!(!linearizable(&[&find], 0, Teardown::Absent));
        let free = record(
            0,
            0,
            1,
            Call::Launch(0),
            Answer::Failed(ErrorKind::Conflict),
        );
        assert!(!linearizable(&[&free], 0, Teardown::Absent));
    }

    // H12: the check shrinks a failing history to the calls it needs.
    #[test]
    fn h12_check_shrinks_to_the_calls_the_failure_needs() {
        let recorded = Recorded {
            names: vec!["h12-0".to_owned(), "h12-1".to_owned()],
            blue: vec![
                record(0, 0, 1, Call::Find(1), Answer::Found(None)),
                record(0, 2, 5, Call::Launch(0), Answer::Launched(id("a"))),
                record(1, 3, 6, Call::Launch(0), Answer::Launched(id("b"))),
                record(2, 4, 7, Call::Find(0), Answer::Found(Some(id("a")))),
                record(2, 8, 9, Call::List, Answer::Listed(vec![(0, id("a"))])),
            ],
            green: Vec::new(),
            windows: Vec::new(),
            wrong: None,
        };
        let (reason, calls, _) = checked(&recorded).unwrap_err();
        assert!(reason.contains("\"h12-0\""), "{reason}");
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls.iter().all(|r| matches!(r.call, Call::Launch(0))));
        let line = calls[0].line(&recorded.names);
        assert_eq!(line, "task 0 via Blue: launch(\"h12-0\") [2..5] -> Ok(a)");
    }

    // H12: shrinking never deletes a launch or a confirmed destroy, whose
    // absence would fail the history for a reason it never had: here the
    // first destroy freed the name the second launch took.
    #[test]
    fn h12_check_keeps_the_calls_that_change_what_a_name_holds() {
        let stopped = || Answer::Torn(Teardown::Stopped);
        let recorded = Recorded {
            names: vec!["h12-0".to_owned()],
            blue: vec![
                record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a"))),
                record(0, 2, 3, Call::Destroy(0, id("a")), stopped()),
                record(1, 4, 5, Call::Destroy(0, id("a")), stopped()),
                record(0, 6, 7, Call::Launch(0), Answer::Launched(id("b"))),
                record(1, 8, 9, Call::Find(0), Answer::Found(Some(id("b")))),
            ],
            green: Vec::new(),
            windows: Vec::new(),
            wrong: None,
        };
        let (_, calls, _) = checked(&recorded).unwrap_err();
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 2, 4, 6], "{calls:?}");
    }

    // H12: every history a correct sequential store makes, each call taking
    // effect inside its own interval, passes the check, at every size the
    // benchmark measures; so does one where a fifth of the launches and
    // destroys were cut short by a fault (H11) and happened or not.
    #[test]
    fn h12_linearizable_histories_pass() {
        // Under a watchdog: a history whose check takes exponential time
        // fails the test rather than hanging it (it takes well under a
        // second).
        let (finished, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for tasks in 2..=4 {
                for calls in [1, 10, 40] {
                    for seed in 0..20 {
                        let history = synthetic::history(tasks, calls, 2, seed);
                        assert_eq!(history.calls(), tasks * calls);
                        assert!(synthetic::check(&history), "{history:?}");
                        assert!(synthetic::check_names(&history), "{history:?}");
                        let history = synthetic::faulted_history(tasks, calls, 2, seed, 0.2);
                        assert_eq!(history.calls(), tasks * calls);
                        assert!(synthetic::check(&history), "{history:?}");
                    }
                }
            }
            let _ = finished.send(());
        });
        done.recv_timeout(Duration::from_secs(20))
            .expect("every history checked, within twenty seconds");
        // The faulted histories do hold calls cut short.
        let cut = synthetic::faulted_history(4, 40, 2, 1, 0.2);
        assert!(cut.0.blue.iter().any(|r| r.excuse == Excuse::Maybe));
        assert!(!cut.0.windows.is_empty());
    }

    // H12/H11: a launch a fault cut short may take effect until the fault
    // ends (the daemon may still be at work on it), and no later.
    #[test]
    fn h12_h11_a_call_cut_short_takes_effect_by_the_end_of_its_fault() {
        let mut cut = record(0, 0, 3, Call::Launch(0), Answer::Failed(LOST));
        cut.excuse = Excuse::Maybe;
        let seen = |invoked, answered| {
            let mut r = record(
                1,
                invoked,
                answered,
                Call::Find(0),
                Answer::Found(Some(id("x"))),
            );
            r.task = 1;
            r
        };
        let none = record(2, 4, 5, Call::Find(0), Answer::Found(None));
        // Seen gone after the call answered, then there: only if its effect
        // may land after its answer.
        assert!(!linearizable(
            &[&cut, &none, &seen(6, 7)],
            0,
            Teardown::Absent
        ));
        cut.settled = 8;
        assert!(linearizable(
            &[&cut, &none, &seen(6, 7)],
            0,
            Teardown::Absent
        ));
        let gone = record(2, 9, 10, Call::Find(0), Answer::Found(None));
        assert!(!linearizable(
            &[&cut, &seen(6, 7), &gone],
            0,
            Teardown::Absent
        ));
        assert!(
            cut.line(&["h12-0".to_owned()])
                .ends_with("(may take effect until [8])"),
            "{}",
            cut.line(&["h12-0".to_owned()])
        );
    }

    // H12: an instance seen Pending when no launch of its name was under
    // way and the backend declares no pending window is wrong, unless it is
    // one no launch answered (a lost launch's) in a history with faults.
    #[test]
    fn h12_a_pending_sighting_is_right_only_for_a_lost_launch() {
        let launched = record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a")));
        let mut seen = record(1, 2, 3, Call::Find(0), Answer::Found(Some(id("a"))));
        seen.pending = vec![(id("a"), false)];
        let recorded = |blue: Vec<Record>, windows: Vec<Window>| Recorded {
            names: vec!["h12-0".to_owned()],
            blue,
            green: Vec::new(),
            windows,
            wrong: None,
        };
        let failing = check(
            &recorded(
                vec![launched.clone(), seen.clone()],
                vec![window(10, 11, 12, 13)],
            ),
            Teardown::Absent,
        )
        .unwrap_err();
        assert!(failing.0.contains("seen Pending"), "{}", failing.0);
        assert_eq!(failing.1.len(), 2);
        // Allowed when seen (a launch was under way).
        let mut allowed = seen.clone();
        allowed.pending = vec![(id("a"), true)];
        assert!(
            check(
                &recorded(vec![launched, allowed], Vec::new()),
                Teardown::Absent
            )
            .is_ok()
        );
        // An instance no launch answered: a lost launch's, with a fault.
        let mut cut = record(0, 0, 1, Call::Launch(0), Answer::Failed(LOST));
        cut.excuse = Excuse::Maybe;
        let faults = vec![window(0, 1, 2, 3)];
        assert!(
            check(
                &recorded(vec![cut.clone(), seen.clone()], faults),
                Teardown::Absent
            )
            .is_ok()
        );
        // Without a fault, no launch could have been lost.
        let failing = check(&recorded(vec![cut, seen], Vec::new()), Teardown::Absent).unwrap_err();
        assert!(!failing.1.is_empty());
    }

    // H12: a list must see all its names at one instant: one that saw the
    // second name's instance but not the first's, though the first was
    // launched before the second and destroyed after, passes name by name
    // and fails taken whole.
    #[test]
    fn h12_a_list_torn_across_names_fails_the_whole_deployment_check() {
        let recorded = Recorded {
            names: vec!["h12-0".to_owned(), "h12-1".to_owned()],
            blue: vec![
                record(1, 0, 7, Call::List, Answer::Listed(vec![(1, id("b"))])),
                record(0, 1, 2, Call::Launch(0), Answer::Launched(id("a"))),
                record(0, 3, 4, Call::Launch(1), Answer::Launched(id("b"))),
                record(0, 8, 9, Call::Find(0), Answer::Found(Some(id("a")))),
            ],
            green: Vec::new(),
            windows: Vec::new(),
            wrong: None,
        };
        let all: Vec<&Record> = recorded.blue.iter().collect();
        assert!(linearizable(&all, 0, Teardown::Absent));
        assert!(linearizable(&all, 1, Teardown::Absent));
        assert!(!linearizable_joint(&all, 2, Teardown::Absent));
        assert!(!linearizable_joint(&all, 2, Teardown::Requested));
        let (reason, calls, _) = checked(&recorded).unwrap_err();
        assert!(reason.contains("not together"), "{reason}");
        // The find that changes nothing is not needed.
        assert_eq!(calls.len(), 3, "{calls:?}");
        // Seeing both, or neither, is fine.
        let both = record(
            1,
            0,
            7,
            Call::List,
            Answer::Listed(vec![(0, id("a")), (1, id("b"))]),
        );
        let neither = record(1, 0, 7, Call::List, Answer::Listed(Vec::new()));
        for list in [both, neither] {
            let fine = [&list, all[1], all[2], all[3]];
            assert!(linearizable_joint(&fine, 2, Teardown::Absent));
        }
        assert!(linearizable_joint(&[], 2, Teardown::Absent));
        // A backend that can only ask may answer Requested for an id it
        // does not hold, and the whole check knows which backend it checks.
        let requested = record(
            1,
            5,
            6,
            Call::Destroy(1, id("c")),
            Answer::Torn(Teardown::Requested),
        );
        let asked = [all[1], all[2], &requested];
        assert!(linearizable_joint(&asked, 2, Teardown::Requested));
        assert!(!linearizable_joint(&asked, 2, Teardown::Absent));
    }

    // H12/H11: a failing history keeps the launch a fault cut short when the
    // failure needs it (it made the instance seen), and loses the refusal
    // it does not need.
    #[test]
    fn h12_h11_check_keeps_a_launch_cut_short_that_the_failure_needs() {
        let mut cut = record(0, 0, 3, Call::Launch(0), Answer::Failed(LOST));
        cut.excuse = Excuse::Maybe;
        let recorded = Recorded {
            names: vec!["h12-0".to_owned()],
            blue: vec![
                cut,
                record(1, 4, 5, Call::Find(0), Answer::Found(Some(id("x")))),
                record(2, 6, 7, Call::Find(0), Answer::Found(Some(id("y")))),
                record(
                    1,
                    8,
                    9,
                    Call::Launch(0),
                    Answer::Failed(ErrorKind::Conflict),
                ),
            ],
            green: Vec::new(),
            windows: vec![window(1, 2, 3, 4)],
            wrong: None,
        };
        let (reason, calls, windows) = checked(&recorded).unwrap_err();
        assert!(reason.contains("not linearizable"), "{reason}");
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 4, 6], "{calls:?}");
        assert_eq!(windows.len(), 1);
    }

    // H12: a wrong instance found while recording fails the history, which
    // shows every call (of either deployment) invoked before the wrong
    // answer, and the faults of its deployment around them.
    #[test]
    fn h12_a_wrong_instance_shows_the_calls_before_it() {
        let launch = record(0, 0, 3, Call::Launch(0), Answer::Launched(id("a")));
        let mut green = record(2, 2, 8, Call::Find(1), Answer::Found(None));
        green.via = Via::Green;
        let recorded = Recorded {
            names: vec!["h12-0".to_owned(), "h12-1".to_owned()],
            blue: vec![
                launch.clone(),
                record(1, 1, 2, Call::Find(1), Answer::Found(None)),
                record(1, 3, 4, Call::Find(1), Answer::Found(None)),
                record(1, 5, 6, Call::List, Answer::Listed(vec![(0, id("a"))])),
            ],
            green: vec![green],
            windows: vec![
                Window {
                    dep: Dep::Green,
                    ..window(1, 2, 3, 4)
                },
                window(3, 4, 5, 9),
                window(6, 7, 8, 9),
            ],
            wrong: Some(("instance a is wrong".to_owned(), launch)),
        };
        let (reason, calls, windows) = checked(&recorded).unwrap_err();
        assert_eq!(reason, "instance a is wrong");
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 1, 2], "{calls:?}");
        let starts: Vec<u64> = windows.iter().map(|w| w.start).collect();
        assert_eq!(starts, [3, 6], "{windows:?}");
    }

    // H12: shrinking keeps a sighting the failure needs: a list that missed
    // a launch that had returned is the failure itself.
    #[test]
    fn h12_check_keeps_the_sightings_the_failure_needs() {
        let recorded = Recorded {
            names: vec!["h12-0".to_owned()],
            blue: vec![
                record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a"))),
                record(1, 2, 3, Call::List, Answer::Listed(Vec::new())),
                record(1, 4, 5, Call::Find(0), Answer::Found(Some(id("a")))),
            ],
            green: Vec::new(),
            windows: Vec::new(),
            wrong: None,
        };
        let (_, calls, _) = checked(&recorded).unwrap_err();
        let order: Vec<u64> = calls.iter().map(|r| r.invoked).collect();
        assert_eq!(order, [0, 2], "{calls:?}");
    }
}
