//! [`Instance`], [`InstanceId`], [`State`] and [`Teardown`]: what a backend answers.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use crate::ProviderKind;

/// The identifier a backend gave an instance.
///
/// Unique on its host and never reused there. Callers compare and store ids;
/// they must not parse them, since each backend chooses its own form.
///
/// Cloning an id is cheap (a reference count), whatever its length: a backend
/// may keep each instance's id and hand out copies in every answer.
/// Equality, ordering and hashing are those of the text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId(Arc<str>);

impl InstanceId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's text, taking ownership.
    pub fn into_string(self) -> String {
        String::from(&*self.0)
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for InstanceId {
    fn from(id: String) -> Self {
        InstanceId(Arc::from(id))
    }
}

impl From<&str> for InstanceId {
    fn from(id: &str) -> Self {
        InstanceId(Arc::from(id))
    }
}

impl AsRef<str> for InstanceId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Where an instance is in its life, as of the moment it was reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Asked for but not yet running (a VM still booting, an image being pulled).
    Pending,
    /// Running: the lease it backs is in use.
    Running,
    /// Finished, with the exit code of its command. Still held until destroyed.
    Stopped {
        /// The command's exit code.
        exit_code: i32,
    },
}

impl State {
    /// Whether the instance is running.
    pub fn is_running(self) -> bool {
        matches!(self, State::Running)
    }

    /// Whether the instance has stopped.
    pub fn is_stopped(self) -> bool {
        matches!(self, State::Stopped { .. })
    }
}

/// One instance a backend started for one lease, as reported at one moment.
///
/// An `Instance` is a snapshot: its `state` is as of the call that returned it.
///
/// Its text fields are shared, not copied: a backend may keep each
/// instance's name and its owner's identity once and hand out copies of
/// them in every answer (a `list` of a thousand instances then allocates
/// no text), and cloning an `Instance` allocates nothing but itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Unique on its host, never reused.
    pub id: InstanceId,
    /// The name given in the spec that started it.
    pub name: Arc<str>,
    /// The deployment that started it; destruction is scoped by it.
    pub owner: Arc<str>,
    /// The backend that holds it.
    pub kind: ProviderKind,
    /// Its state when this snapshot was taken.
    pub state: State,
    /// When it started, by the provider's clock.
    pub started_at: SystemTime,
}

/// What [`destroy`](crate::Provider::destroy) found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Teardown {
    /// This call found the instance and removed it.
    Stopped,
    /// The backend is authoritative about its contents and does not hold that
    /// id: the instance is confirmed gone.
    Absent,
    /// The backend asked for removal but cannot confirm it (an API that only
    /// accepts requests). The caller must check the inventory later.
    Requested,
}

impl Teardown {
    /// Whether the instance is known to be gone: `Stopped` and `Absent` are
    /// confirmed, `Requested` is not.
    pub fn is_confirmed(self) -> bool {
        matches!(self, Teardown::Stopped | Teardown::Absent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // P5: Stopped and Absent confirm the instance is gone; Requested does not.
    #[test]
    fn p5_teardown_confirmation() {
        assert!(Teardown::Stopped.is_confirmed());
        assert!(Teardown::Absent.is_confirmed());
        assert!(!Teardown::Requested.is_confirmed());
    }

    // P3: an id is a newtype over text with Display, From, AsRef, Hash and Ord.
    #[test]
    fn p3_instance_id_is_text() {
        let a = InstanceId::from("i-1".to_owned());
        let b: InstanceId = "i-2".into();
        assert_eq!(a.to_string(), "i-1");
        assert_eq!(b.as_ref(), "i-2");
        assert!(a < b);
        let set: std::collections::HashSet<_> = [a.clone(), a.clone(), b].into();
        assert_eq!(set.len(), 2);
        assert_eq!(a.into_string(), "i-1");
    }

    // P3: state has Pending, Running and Stopped with an exit code.
    #[test]
    fn p3_states() {
        assert!(State::Running.is_running());
        assert!(!State::Pending.is_running());
        assert!(State::Stopped { exit_code: 3 }.is_stopped());
        assert!(!State::Running.is_stopped());
    }
}
