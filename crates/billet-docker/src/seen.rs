//! What `list` remembers between calls, so that at fleet scale it inspects
//! only the containers that are new or changed state (issue 20).
//!
//! What an inspect adds to the list call's summary (the exit code, the start
//! time) does not change while a container stays in one state: a running
//! container keeps its start time, an exited one its exit code. So an
//! instance read by an inspect is kept under the container's id and the state
//! it was read in, and stands for the container only while a later list call
//! shows that same id in that same state. Two things keep this exact:
//!
//! * Only lasting states are kept: `running`, `paused`, `exited`, `dead`.
//!   `created` is read afresh (it may be a launch to finish, by its age),
//!   and so are `restarting`, `removing` and `stopping` (passing states whose
//!   exit code may still change).
//! * A container billet started goes through its states once: billet sets no
//!   restart policy and never starts a container that has run. A container
//!   started again by hand behind billet's back (`docker start`, `docker
//!   restart`) and seen in the same state at both lists (running at both, or
//!   exited at both) keeps the start time it was first read with, until its
//!   state changes; this is the one assumption. Its exit code is not kept
//!   stale: the list call's status text of an exited container carries its
//!   exit code (`Exited (3) ...`), and one that differs from the code read
//!   has the container inspected again.
//!
//! Entries of containers a list call no longer shows are dropped by that
//! call, so what is kept is bounded by what the daemon holds.

use std::collections::{HashMap, HashSet};

use billet_provider::{Instance, State};
use bollard::models::{ContainerStateStatusEnum as Inspected, ContainerSummaryStateEnum as Listed};

/// Whether an instance read while its container is in `state` stays exact
/// for as long as the container stays in `state`.
pub(crate) fn lasting(state: Listed) -> bool {
    matches!(
        state,
        Listed::RUNNING | Listed::PAUSED | Listed::EXITED | Listed::DEAD
    )
}

/// The list call's name for the state an inspect answered.
pub(crate) fn as_listed(state: Inspected) -> Listed {
    match state {
        Inspected::EMPTY => Listed::EMPTY,
        Inspected::CREATED => Listed::CREATED,
        Inspected::RUNNING => Listed::RUNNING,
        Inspected::PAUSED => Listed::PAUSED,
        Inspected::RESTARTING => Listed::RESTARTING,
        Inspected::REMOVING => Listed::REMOVING,
        Inspected::EXITED => Listed::EXITED,
        Inspected::DEAD => Listed::DEAD,
        Inspected::STOPPING => Listed::STOPPING,
    }
}

/// The exit code in the list call's status text of an exited container
/// (`Exited (3) 2 minutes ago`); `None` for any other text. A container
/// started again by hand that exits with another code is told by it.
pub(crate) fn listed_exit_code(status: &str) -> Option<i32> {
    let (code, _) = status.strip_prefix("Exited (")?.split_once(')')?;
    code.parse().ok()
}

/// The instances last read by an inspect, by container id, with the state
/// each was read in.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    read: HashMap<String, (Listed, Instance)>,
}

impl Seen {
    /// The instance read for container `id` in `state`, if one was, `state`
    /// is lasting, and the list call's `status` text does not show another
    /// exit code than the one read; else `None` (the container must be
    /// inspected).
    pub(crate) fn get(&self, id: &str, state: Listed, status: Option<&str>) -> Option<Instance> {
        match self.read.get(id) {
            Some((read_in, instance)) if *read_in == state && lasting(state) => {
                let ran_again = match (instance.state, status.and_then(listed_exit_code)) {
                    (State::Stopped { exit_code }, Some(listed)) => listed != exit_code,
                    _ => false,
                };
                (!ran_again).then(|| instance.clone())
            }
            _ => None,
        }
    }

    /// Keeps `instance`, read by an inspect of container `id` that answered
    /// `state`, if `state` is lasting; forgets any older reading of `id`.
    pub(crate) fn keep(&mut self, id: &str, state: Listed, instance: &Instance) {
        if lasting(state) {
            self.read.insert(id.to_owned(), (state, instance.clone()));
        } else {
            self.read.remove(id);
        }
    }

    /// Drops every reading of a container not in `listed` (the ids the last
    /// list call showed).
    pub(crate) fn retain(&mut self, listed: &HashSet<String>) {
        self.read.retain(|id, _| listed.contains(id));
    }

    /// How many containers have a reading kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.read.len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use billet_provider::{InstanceId, ProviderKind};

    use super::*;

    fn instance(id: &str, state: State) -> Instance {
        Instance {
            id: InstanceId::from(id.to_owned()),
            name: format!("job-{id}").into(),
            owner: "blue".into(),
            kind: ProviderKind::Docker,
            state,
            started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(7),
        }
    }

    const ALL: [Listed; 9] = [
        Listed::EMPTY,
        Listed::CREATED,
        Listed::RUNNING,
        Listed::PAUSED,
        Listed::RESTARTING,
        Listed::REMOVING,
        Listed::EXITED,
        Listed::DEAD,
        Listed::STOPPING,
    ];

    // D5: only the states in which nothing an inspect reads can change are
    // lasting: a created container may be a launch to finish, and the
    // passing states may still change their exit code.
    #[test]
    fn d5_lasting_states_are_exactly_the_settled_ones() {
        let lasting: Vec<Listed> = ALL.into_iter().filter(|s| lasting(*s)).collect();
        assert_eq!(
            lasting,
            [
                Listed::RUNNING,
                Listed::PAUSED,
                Listed::EXITED,
                Listed::DEAD
            ]
        );
    }

    // An inspect's state maps to the list call's state of the same name.
    #[test]
    fn inspected_states_map_to_listed_states_of_the_same_name() {
        let inspected = [
            Inspected::EMPTY,
            Inspected::CREATED,
            Inspected::RUNNING,
            Inspected::PAUSED,
            Inspected::RESTARTING,
            Inspected::REMOVING,
            Inspected::EXITED,
            Inspected::DEAD,
            Inspected::STOPPING,
        ];
        for (inspected, listed) in inspected.into_iter().zip(ALL) {
            assert_eq!(as_listed(inspected), listed);
            assert_eq!(inspected.to_string(), listed.to_string());
        }
    }

    // D5: a reading stands only for the same id in the same lasting state;
    // a new state forgets it, and a passing state is never kept.
    #[test]
    fn d5_a_reading_stands_only_for_the_same_id_in_the_same_state() {
        let mut seen = Seen::default();
        let running = instance("a", State::Running);
        seen.keep("a", Listed::RUNNING, &running);
        assert_eq!(seen.get("a", Listed::RUNNING, None), Some(running.clone()));
        assert_eq!(seen.get("a", Listed::EXITED, None), None);
        assert_eq!(seen.get("a", Listed::PAUSED, None), None);
        assert_eq!(seen.get("b", Listed::RUNNING, None), None);

        let stopped = instance("a", State::Stopped { exit_code: 3 });
        seen.keep("a", Listed::EXITED, &stopped);
        assert_eq!(seen.get("a", Listed::RUNNING, None), None);
        assert_eq!(seen.get("a", Listed::EXITED, None), Some(stopped));
        assert_eq!(seen.len(), 1);

        // Read in a passing state: not kept, and the older reading is gone.
        seen.keep("a", Listed::REMOVING, &instance("a", State::Running));
        assert_eq!(seen.get("a", Listed::EXITED, None), None);
        assert_eq!(seen.get("a", Listed::REMOVING, None), None);
        assert_eq!(seen.len(), 0);
        seen.keep("c", Listed::CREATED, &instance("c", State::Pending));
        assert_eq!(seen.get("c", Listed::CREATED, None), None);
        assert_eq!(seen.len(), 0);
    }

    // D5: an exited container whose status text shows another exit code than
    // the one read (started again by hand, exited again) is read again; the
    // same code, or a text without one, keeps the reading.
    #[test]
    fn d5_another_exit_code_in_the_status_text_is_read_again() {
        assert_eq!(listed_exit_code("Exited (3) 2 minutes ago"), Some(3));
        assert_eq!(
            listed_exit_code("Exited (137) Less than a second ago"),
            Some(137)
        );
        assert_eq!(listed_exit_code("Exited (-1) 1 second ago"), Some(-1));
        for other in [
            "Up 3 seconds",
            "Dead",
            "Exited",
            "Exited (x) now",
            "Exited (3",
            "",
        ] {
            assert_eq!(listed_exit_code(other), None, "{other:?}");
        }
        let mut seen = Seen::default();
        let stopped = instance("a", State::Stopped { exit_code: 3 });
        seen.keep("a", Listed::EXITED, &stopped);
        let get = |status| seen.get("a", Listed::EXITED, status);
        assert_eq!(get(Some("Exited (3) 5 minutes ago")), Some(stopped.clone()));
        assert_eq!(get(Some("Exited (4) 1 second ago")), None);
        assert_eq!(get(Some("Exited (0) 1 second ago")), None);
        assert_eq!(get(Some("something else")), Some(stopped.clone()));
        assert_eq!(get(None), Some(stopped));
        // A running reading has no exit code to differ.
        let running = instance("b", State::Running);
        seen.keep("b", Listed::RUNNING, &running);
        assert_eq!(
            seen.get("b", Listed::RUNNING, Some("Exited (4) now")),
            Some(running)
        );
    }

    // The readings are bounded by what the daemon holds: a list drops every
    // container it did not show.
    #[test]
    fn retain_drops_what_the_list_did_not_show() {
        let mut seen = Seen::default();
        for id in ["a", "b", "c"] {
            seen.keep(id, Listed::RUNNING, &instance(id, State::Running));
        }
        seen.retain(&HashSet::from(["b".to_owned(), "z".to_owned()]));
        assert_eq!(seen.len(), 1);
        assert_eq!(seen.get("a", Listed::RUNNING, None), None);
        assert!(seen.get("b", Listed::RUNNING, None).is_some());
        assert_eq!(seen.get("c", Listed::RUNNING, None), None);
    }
}
