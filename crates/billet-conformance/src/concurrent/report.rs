//! The failure report: [`ConcurrentFailure`] and the lines it prints, one
//! per call ([`Record::line`]) and per fault around them ([`Window::line`]),
//! in order of their start ([`lines`]).

use std::fmt;

use billet_provider::InstanceId;

use super::history::Window;
use super::history::{Answer, Call, Record};

/// A concurrent history the providers answered wrongly: the smallest found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcurrentFailure {
    /// What is wrong.
    pub reason: String,
    /// The seed whose history failed first (before shrinking).
    pub seed: u64,
    /// The calls of the smallest failing history, one line each, in order of
    /// invocation: task, provider object, call, the global order of its
    /// invocation and of its answer, and the answer.
    pub calls: Vec<String>,
}

impl fmt::Display for ConcurrentFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "H12: {} (seed {}); smallest history ({} calls, [invoked..answered] in one global order):",
            self.reason,
            self.seed,
            self.calls.len()
        )?;
        for line in &self.calls {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConcurrentFailure {}

impl Record {
    fn shown(&self, id: &InstanceId) -> String {
        if self.saw_pending(id) {
            format!("{id} Pending")
        } else {
            id.to_string()
        }
    }

    pub(super) fn line(&self, names: &[String]) -> String {
        let call = match &self.call {
            Call::Launch(n) => format!("launch({:?})", names[*n]),
            Call::Destroy(n, id) => format!("destroy({id}) [of {:?}]", names[*n]),
            Call::Find(n) => format!("find({:?})", names[*n]),
            Call::List => "list()".to_owned(),
        };
        let answer = match &self.answer {
            Answer::Launched(id) => format!("Ok({id})"),
            Answer::Failed(kind) => format!("Err({kind:?})"),
            Answer::Torn(t) => format!("Ok({t:?})"),
            Answer::Found(Some(id)) => format!("Ok(Some({}))", self.shown(id)),
            Answer::Found(None) => "Ok(None)".to_owned(),
            Answer::Listed(all) => {
                let all: Vec<String> = all
                    .iter()
                    .map(|(n, id)| format!("{:?}={}", names[*n], self.shown(id)))
                    .collect();
                format!("Ok([{}])", all.join(", "))
            }
        };
        format!(
            "task {} via {:?}: {call} [{}..{}] -> {answer}{}",
            self.task,
            self.via,
            self.invoked,
            self.answered,
            if self.settled == self.answered {
                String::new()
            } else {
                format!(" (may take effect until [{}])", self.settled)
            }
        )
    }
}

impl Window {
    fn line(&self) -> String {
        match self.lose {
            Some(after) => format!(
                "fault of {:?}: an answer lost after {after} exchanges armed [{}], connection cut [..{}], restored [{}..{}]",
                self.dep, self.start, self.cut, self.restore, self.end
            ),
            None => format!(
                "fault of {:?}: an outage [{}..{}], restored [{}..{}]",
                self.dep, self.start, self.cut, self.restore, self.end
            ),
        }
    }
}

/// The lines a failure prints: calls and faults in order of their start.
pub(super) fn lines(calls: &[Record], windows: &[Window], names: &[String]) -> Vec<String> {
    let mut lines: Vec<(u64, String)> = calls
        .iter()
        .map(|r| (r.invoked, r.line(names)))
        .chain(windows.iter().map(|w| (w.start, w.line())))
        .collect();
    lines.sort_by_key(|(at, _)| *at);
    lines.into_iter().map(|(_, line)| line).collect()
}

#[cfg(test)]
mod tests {
    use billet_provider::Teardown;

    use super::*;
    use crate::concurrent::history::around;
    use crate::concurrent::history::{Dep, Via};
    use crate::concurrent::test_support::{LOST, id, record, window};

    // H12: a failure prints its calls and the faults around them in the
    // order they began.
    #[test]
    fn h12_failure_lines_interleave_calls_and_faults() {
        let names = vec!["h12-0".to_owned()];
        let calls = [
            record(0, 0, 1, Call::Launch(0), Answer::Launched(id("a"))),
            record(1, 14, 15, Call::Find(0), Answer::Found(None)),
        ];
        let faults = [
            window(10, 11, 12, 13),
            Window {
                lose: Some(2),
                ..window(2, 4, 6, 7)
            },
        ];
        let printed = lines(&calls, &faults, &names);
        assert_eq!(
            printed,
            [
                "task 0 via Blue: launch(\"h12-0\") [0..1] -> Ok(a)",
                "fault of Blue: an answer lost after 2 exchanges armed [2], connection cut [..4], restored [6..7]",
                "fault of Blue: an outage [10..11], restored [12..13]",
                "task 1 via Blue: find(\"h12-0\") [14..15] -> Ok(None)",
            ]
        );
        assert_eq!(around(&faults, Dep::Blue, &calls[1..]).len(), 0);
        assert_eq!(around(&faults, Dep::Blue, &calls).len(), 2);
        assert_eq!(around(&faults, Dep::Green, &calls).len(), 0);
        assert!(around(&faults, Dep::Blue, &[]).is_empty());
    }

    // H12: a failure prints each call as it was made and answered: an
    // instance seen Pending is marked so (only that one), errors and
    // teardowns by their kind, and the report leads with reason and seed.
    #[test]
    fn h12_failure_lines_show_every_answer_as_made() {
        let names = vec!["h12-0".to_owned(), "h12-1".to_owned()];
        let mut find = record(1, 2, 3, Call::Find(1), Answer::Found(Some(id("a"))));
        find.pending = vec![(id("a"), true)];
        assert_eq!(
            find.line(&names),
            "task 1 via Blue: find(\"h12-1\") [2..3] -> Ok(Some(a Pending))"
        );
        find.pending = vec![(id("b"), false)];
        assert_eq!(
            find.line(&names),
            "task 1 via Blue: find(\"h12-1\") [2..3] -> Ok(Some(a))"
        );
        let mut list = record(
            2,
            4,
            7,
            Call::List,
            Answer::Listed(vec![(0, id("a")), (1, id("b"))]),
        );
        list.via = Via::Green;
        list.pending = vec![(id("b"), false)];
        assert_eq!(
            list.line(&names),
            "task 2 via Green: list() [4..7] -> Ok([\"h12-0\"=a, \"h12-1\"=b Pending])"
        );
        let mut destroy = record(
            0,
            8,
            9,
            Call::Destroy(0, id("a")),
            Answer::Torn(Teardown::Stopped),
        );
        destroy.via = Via::Blue2;
        assert_eq!(
            destroy.line(&names),
            "task 0 via Blue2: destroy(a) [of \"h12-0\"] [8..9] -> Ok(Stopped)"
        );
        let failed = record(3, 10, 11, Call::Find(0), Answer::Failed(LOST));
        assert_eq!(
            failed.line(&names),
            "task 3 via Blue: find(\"h12-0\") [10..11] -> Err(Unavailable)"
        );
        let none = record(3, 12, 13, Call::Find(0), Answer::Found(None));
        assert_eq!(
            none.line(&names),
            "task 3 via Blue: find(\"h12-0\") [12..13] -> Ok(None)"
        );
        let failure = ConcurrentFailure {
            reason: "why".to_owned(),
            seed: 7,
            calls: vec!["one".to_owned(), "two".to_owned()],
        };
        assert_eq!(
            failure.to_string(),
            "H12: why (seed 7); smallest history (2 calls, [invoked..answered] in one global order):\n  one\n  two\n"
        );
    }
}
