//! Linearizable histories made without a provider, for the checker's
//! benchmark and tests: not part of the suite's API.

use billet_provider::{ErrorKind, InstanceId, Teardown};
use proptest::prelude::RngExt;

use super::history::{Answer, Call, Dep, Record, Recorded, Via, Window};
use super::linearizability::linearizable;
use super::recording::rng_of;
use super::runner::Planned;
use super::specification::Excuse;

/// A recorded history of one deployment, made by [`history`].
#[derive(Debug, Clone)]
pub struct SyntheticHistory(pub(super) Recorded);

impl SyntheticHistory {
    /// How many calls it holds.
    pub fn calls(&self) -> usize {
        self.0.blue.len()
    }
}

/// A linearizable history of `tasks` tasks making `calls_per_task` calls
/// each over `names` names of one authoritative deployment: each call
/// takes effect, on a correct sequential store, at a random instant
/// strictly inside its own interval, and tasks' intervals overlap.
pub fn history(tasks: usize, calls_per_task: usize, names: usize, seed: u64) -> SyntheticHistory {
    faulted_history(tasks, calls_per_task, names, seed, 0.0)
}

/// As [`history`], but each launch and destroy is, with probability
/// `cut`, one a fault cut short (H11): answered `Unavailable`, and
/// applied to the store or not, by a coin (an instance such a launch
/// makes is seen `Running` from then on). The history holds one fault
/// over its whole span.
pub fn faulted_history(
    tasks: usize,
    calls_per_task: usize,
    names: usize,
    seed: u64,
    cut: f64,
) -> SyntheticHistory {
    let mut rng = rng_of(seed);
    let mut faults = rng_of(seed ^ 0x00c0_ffee);
    let names = names.max(1);
    // (effect instant, task, invoked, answered, planned)
    let mut planned = Vec::new();
    for task in 0..tasks {
        let mut cursor = 0u64;
        for _ in 0..calls_per_task {
            let invoked = cursor + 2 * rng.random_range(0..3u64);
            let answered = invoked + 2 * rng.random_range(1..6u64);
            let effect = rng.random_range(invoked..answered) | 1;
            let name = rng.random_range(0..names);
            let call = match rng.random_range(0..10) {
                0..=2 => Planned::Launch(name),
                3..=5 => Planned::Destroy(name),
                6..=7 => Planned::Find(name),
                _ => Planned::List,
            };
            planned.push((effect, task, invoked, answered, call));
            cursor = answered;
        }
    }
    planned.sort_by_key(|p| p.0);
    let mut held: Vec<Option<InstanceId>> = vec![None; names];
    let mut retired: Vec<Option<InstanceId>> = vec![None; names];
    let mut next = 0;
    let mut records = Vec::new();
    let mut cuts = 0;
    for (_, task, invoked, answered, call) in planned {
        let short =
            matches!(call, Planned::Launch(_) | Planned::Destroy(_)) && faults.random_bool(cut);
        let happened = faults.random_bool(0.5);
        let (call, answer) = match call {
            Planned::Launch(n) if short => {
                if held[n].is_none() && happened {
                    next += 1;
                    held[n] = Some(InstanceId::from(format!("s-{next}")));
                }
                (Call::Launch(n), Answer::Failed(ErrorKind::Unavailable))
            }
            Planned::Destroy(n) if short && held[n].is_some() => {
                let id = held[n].clone().unwrap_or_else(|| InstanceId::from("none"));
                if happened {
                    held[n] = None;
                    retired[n] = Some(id.clone());
                }
                (Call::Destroy(n, id), Answer::Failed(ErrorKind::Unavailable))
            }
            Planned::Launch(n) => match &held[n] {
                Some(_) => (Call::Launch(n), Answer::Failed(ErrorKind::Conflict)),
                None => {
                    next += 1;
                    let id = InstanceId::from(format!("s-{next}"));
                    held[n] = Some(id.clone());
                    (Call::Launch(n), Answer::Launched(id))
                }
            },
            Planned::Destroy(n) => match (held[n].take(), &retired[n]) {
                (Some(id), _) => {
                    retired[n] = Some(id.clone());
                    (Call::Destroy(n, id), Answer::Torn(Teardown::Stopped))
                }
                (None, Some(id)) => (Call::Destroy(n, id.clone()), Answer::Torn(Teardown::Absent)),
                (None, None) => (Call::Find(n), Answer::Found(None)),
            },
            Planned::Find(n) => (Call::Find(n), Answer::Found(held[n].clone())),
            Planned::List => (
                Call::List,
                Answer::Listed(
                    held.iter()
                        .enumerate()
                        .filter_map(|(n, id)| id.clone().map(|id| (n, id)))
                        .collect(),
                ),
            ),
        };
        records.push(Record {
            task,
            via: Via::Blue,
            call,
            invoked,
            answered,
            answer,
            pending: Vec::new(),
            excuse: if short {
                cuts += 1;
                Excuse::Maybe
            } else {
                Excuse::None
            },
            settled: answered,
        });
    }
    // One global order of invocations and answers: ranks of the instants
    // (ties in any order: every effect is strictly inside its interval).
    let mut instants: Vec<u64> = records
        .iter()
        .flat_map(|r| [r.invoked, r.answered])
        .collect();
    instants.sort_unstable();
    let mut order = 0..;
    let mut rank = std::collections::HashMap::new();
    for instant in instants {
        rank.entry(instant)
            .or_insert_with(Vec::new)
            .push(order.next().unwrap_or(0));
    }
    let mut take = |instant: u64| rank.get_mut(&instant).and_then(|r| r.pop()).unwrap_or(0);
    for record in &mut records {
        record.invoked = take(record.invoked);
    }
    for record in &mut records {
        record.answered = take(record.answered);
        record.settled = record.answered;
    }
    records.sort_by_key(|r| r.invoked);
    let end = 2 * records.len() as u64;
    SyntheticHistory(Recorded {
        names: (0..names).map(|n| format!("h12-{n}")).collect(),
        blue: records,
        green: Vec::new(),
        windows: if cuts > 0 {
            vec![Window {
                dep: Dep::Blue,
                lose: Some(0),
                start: 0,
                cut: end,
                restore: end,
                end,
            }]
        } else {
            Vec::new()
        },
        wrong: None,
    })
}

/// Whether [`check_concurrent`](super::check_concurrent)'s check passes
/// `history`.
pub fn check(history: &SyntheticHistory) -> bool {
    super::check(&history.0, Teardown::Absent).is_ok()
}

/// Whether each name's history, taken on its own, is linearizable: the
/// first part of the check, without the whole deployment's.
pub fn check_names(history: &SyntheticHistory) -> bool {
    let all: Vec<&Record> = history.0.blue.iter().collect();
    (0..history.0.names.len()).all(|name| linearizable(&all, name, Teardown::Absent))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::concurrent::report::lines;

    // H12: the benchmark's check fails a history that is not
    // linearizable: one whose find saw an instance nobody launched.
    #[test]
    fn h12_synthetic_check_fails_a_history_that_is_not_linearizable() {
        let mut history = history(2, 10, 1, 3);
        assert!(check(&history));
        let find = history
            .0
            .blue
            .iter_mut()
            .find(|r| matches!(r.call, Call::Find(_)))
            .expect("a find");
        find.answer = Answer::Found(Some(InstanceId::from("nobody".to_owned())));
        // Within ten seconds: a shrinking loop that never ends fails the
        // test rather than hanging it.
        let (answer, answered) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = answer.send(check(&history));
        });
        let passed = answered
            .recv_timeout(Duration::from_secs(10))
            .expect("check answered within ten seconds");
        assert!(!passed);
    }

    // H12: the benchmark's histories are a fixed function of their
    // seed (so its numbers compare across versions): each task's calls
    // follow one another, the global order ranks every invocation and
    // answer once, launches answer fresh ids `s-1`, `s-2`, ... in the
    // order they take effect, and every kind of call and answer occurs.
    #[test]
    fn h12_synthetic_histories_are_fixed_by_their_seed() {
        let small = history(2, 3, 1, 3);
        let names = vec!["h12-0".to_owned()];
        let shown: Vec<String> = small.0.blue.iter().map(|r| r.line(&names)).collect();
        assert_eq!(shown, GOLDEN);
        let big = history(4, 40, 2, 1);
        let records = &big.0.blue;
        let mut ranks: Vec<u64> = records
            .iter()
            .flat_map(|r| [r.invoked, r.answered])
            .collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..2 * 160).collect::<Vec<u64>>());
        for task in 0..4 {
            let own: Vec<&Record> = records.iter().filter(|r| r.task == task).collect();
            assert_eq!(own.len(), 40);
            assert!(own.windows(2).all(|p| p[0].answered < p[1].invoked));
        }
        let ids: Vec<String> = records
            .iter()
            .filter_map(|r| match &r.answer {
                Answer::Launched(id) => Some(id.as_str().to_owned()),
                _ => None,
            })
            .collect();
        let mut fresh: Vec<String> = (1..=ids.len()).map(|n| format!("s-{n}")).collect();
        fresh.retain(|id| ids.contains(id));
        assert_eq!(fresh.len(), ids.len(), "{ids:?}");
        let has = |f: &dyn Fn(&Record) -> bool| records.iter().any(f);
        assert!(has(&|r| matches!(r.answer, Answer::Launched(_))));
        assert!(has(&|r| matches!(
            r.answer,
            Answer::Failed(ErrorKind::Conflict)
        )));
        assert!(has(&|r| matches!(
            r.answer,
            Answer::Torn(Teardown::Stopped)
        )));
        assert!(has(&|r| matches!(r.answer, Answer::Torn(Teardown::Absent))));
        assert!(has(&|r| matches!(r.call, Call::Find(_))));
        assert!(has(
            &|r| matches!(r.answer, Answer::Listed(ref l) if !l.is_empty())
        ));
    }

    // H12/H11: the benchmark's histories with calls cut short are a
    // fixed function of their seed too: which launches and destroys a
    // fault cut short, whether each happened (a lost launch's instance
    // is named and seen from then on), and the one fault over the whole
    // history; a history with none cut short has no fault.
    #[test]
    fn h12_synthetic_faulted_histories_are_fixed_by_their_seed() {
        let names = vec!["h12-0".to_owned()];
        let shown = |seed| {
            let h = faulted_history(2, 4, 1, seed, 0.5);
            assert!(check(&h), "{h:?}");
            lines(&h.0.blue, &h.0.windows, &names)
        };
        assert_eq!(shown(8), FAULTED_8);
        assert_eq!(shown(7), FAULTED_7);
        // Seed 10 cuts nothing short: no fault.
        assert!(shown(10).iter().all(|l| !l.starts_with("fault")));
        assert!(faulted_history(3, 10, 2, 1, 0.0).0.windows.is_empty());
        assert!(history(3, 10, 2, 1).0.windows.is_empty());
    }

    /// `faulted_history(2, 4, 1, 8, 0.5)`: a lost launch made `s-1`,
    /// which a find then sees and a relaunch meets as a conflict.
    const FAULTED_8: [&str; 9] = [
        "task 1 via Blue: list() [0..4] -> Ok([])",
        "fault of Blue: an answer lost after 0 exchanges armed [0], connection cut [..16], restored [16..16]",
        "task 0 via Blue: find(\"h12-0\") [1..2] -> Ok(None)",
        "task 0 via Blue: launch(\"h12-0\") [3..5] -> Err(Unavailable)",
        "task 1 via Blue: launch(\"h12-0\") [6..9] -> Err(Conflict)",
        "task 0 via Blue: find(\"h12-0\") [7..8] -> Ok(Some(s-1))",
        "task 0 via Blue: launch(\"h12-0\") [10..12] -> Err(Conflict)",
        "task 1 via Blue: destroy(s-1) [of \"h12-0\"] [11..13] -> Ok(Stopped)",
        "task 1 via Blue: list() [14..15] -> Ok([])",
    ];

    /// `faulted_history(2, 4, 1, 7, 0.5)`: destroys and launches cut
    /// short, some of which happened.
    const FAULTED_7: [&str; 9] = [
        "task 1 via Blue: list() [0..4] -> Ok([\"h12-0\"=s-1])",
        "fault of Blue: an answer lost after 0 exchanges armed [0], connection cut [..16], restored [16..16]",
        "task 0 via Blue: launch(\"h12-0\") [1..2] -> Ok(s-1)",
        "task 0 via Blue: list() [3..5] -> Ok([\"h12-0\"=s-1])",
        "task 0 via Blue: launch(\"h12-0\") [6..8] -> Err(Unavailable)",
        "task 1 via Blue: destroy(s-1) [of \"h12-0\"] [7..9] -> Err(Unavailable)",
        "task 1 via Blue: launch(\"h12-0\") [10..12] -> Err(Unavailable)",
        "task 0 via Blue: launch(\"h12-0\") [11..13] -> Err(Unavailable)",
        "task 1 via Blue: destroy(s-2) [of \"h12-0\"] [14..15] -> Err(Unavailable)",
    ];

    // H12: the per-name part of the check, as the benchmark's baseline,
    // fails a history one name of which is not linearizable.
    #[test]
    fn h12_synthetic_check_names_fails_a_name_that_is_not_linearizable() {
        let mut history = history(2, 10, 2, 3);
        assert!(check_names(&history));
        let find = history
            .0
            .blue
            .iter_mut()
            .find(|r| matches!(r.call, Call::Find(_)))
            .expect("a find");
        find.answer = Answer::Found(Some(InstanceId::from("nobody".to_owned())));
        assert!(!check_names(&history));
    }

    /// `history(2, 3, 1, 3)`, one line per call: a seed whose history
    /// changes if an effect may fall on an invocation's or an answer's
    /// instant (its effect instants are odd, strictly inside).
    const GOLDEN: [&str; 6] = [
        "task 1 via Blue: destroy(s-1) [of \"h12-0\"] [0..4] -> Ok(Stopped)",
        "task 0 via Blue: launch(\"h12-0\") [1..2] -> Ok(s-1)",
        "task 0 via Blue: list() [3..5] -> Ok([])",
        "task 0 via Blue: destroy(s-1) [of \"h12-0\"] [6..9] -> Ok(Absent)",
        "task 1 via Blue: find(\"h12-0\") [7..8] -> Ok(None)",
        "task 1 via Blue: list() [10..11] -> Ok([])",
    ];
}
