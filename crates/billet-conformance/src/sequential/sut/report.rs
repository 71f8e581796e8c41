//! How the driver's failures show values ([`Report`]): an answer as the
//! value or the error's variant and data, every id one way, and a time
//! relative to another.

use std::time::SystemTime;

use billet_provider::{Error, Instance, InstanceId, Teardown};

/// An answer as the report shows it: the value, or the error's variant and data.
pub(super) fn show<T: Report>(got: &Result<T, Error>) -> String {
    match got {
        Ok(value) => format!("Ok({})", value.report()),
        Err(err) => format!("Err({})", err.report()),
    }
}

/// `at` relative to `from`, signed, as people read it.
pub(super) fn offset(at: SystemTime, from: SystemTime) -> String {
    match at.duration_since(from) {
        Ok(after) => format!("+{after:?}"),
        Err(before) => format!("-{:?}", before.duration()),
    }
}

/// How a report shows a value: like its `Debug`, but every [`InstanceId`]
/// in it printed one way, as its `Display` (`sim-1`, never
/// `InstanceId("sim-1")`).
pub(crate) trait Report {
    /// The value as a report prints it.
    fn report(&self) -> String;
}

impl Report for InstanceId {
    fn report(&self) -> String {
        self.to_string()
    }
}

impl Report for Instance {
    fn report(&self) -> String {
        format!(
            "Instance {{ id: {}, name: {:?}, owner: {:?}, kind: {}, state: {:?}, started_at: {:?} }}",
            self.id, self.name, self.owner, self.kind, self.state, self.started_at
        )
    }
}

impl Report for Error {
    fn report(&self) -> String {
        match self {
            Error::NotOwned { id, owner } => format!("NotOwned {{ id: {id}, owner: {owner:?} }}"),
            other => format!("{other:?}"),
        }
    }
}

impl Report for Teardown {
    fn report(&self) -> String {
        format!("{self:?}")
    }
}

impl Report for () {
    fn report(&self) -> String {
        "()".to_owned()
    }
}

impl<T: Report + ?Sized> Report for &T {
    fn report(&self) -> String {
        (**self).report()
    }
}

impl<T: Report> Report for Option<T> {
    fn report(&self) -> String {
        match self {
            Some(value) => format!("Some({})", value.report()),
            None => "None".to_owned(),
        }
    }
}

impl<T: Report> Report for Vec<T> {
    fn report(&self) -> String {
        let items: Vec<String> = self.iter().map(Report::report).collect();
        format!("[{}]", items.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use billet_provider::{ProviderKind, State};

    use super::*;

    // H1: a report prints every id one way, as its Display: in an instance,
    // a list, an option and an error alike, never as `InstanceId("...")`.
    #[test]
    fn h1_reports_print_ids_one_way() {
        let instance = Instance {
            id: InstanceId::from("sim-1"),
            name: "job-a".into(),
            owner: "blue".into(),
            kind: ProviderKind::Simulated,
            state: State::Running,
            started_at: SystemTime::UNIX_EPOCH,
        };
        let shown = [
            show(&Ok(vec![instance.clone()])),
            show(&Ok(Some(instance.clone()))),
            show::<()>(&Err(Error::not_owned(InstanceId::from("sim-1"), "green"))),
            vec![&instance.id].report(),
        ];
        for text in &shown {
            assert!(text.contains("sim-1"), "{text}");
            assert!(!text.contains("InstanceId"), "{text}");
        }
        assert_eq!(shown[2], r#"Err(NotOwned { id: sim-1, owner: "green" })"#);
        assert!(
            shown[0]
                .starts_with(r#"Ok([Instance { id: sim-1, name: "job-a", owner: "blue", kind: "#),
            "{}",
            shown[0]
        );
    }

    // H1: a call that answers nothing (an outage's end, a clock move) shows
    // its answer as `()`, so a failure's line reads `Ok(())`.
    #[test]
    fn h1_an_empty_answer_shows_as_unit() {
        assert_eq!(().report(), "()");
        assert_eq!(show::<()>(&Ok(())), "Ok(())");
    }
}
