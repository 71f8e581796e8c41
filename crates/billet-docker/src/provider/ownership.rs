//! The one rule (D12, D14) for whose a container is: [`Claim`], read from
//! the marks billet puts on every container it starts.
//!
//! A container is this deployment's instance only if it carries this owner's
//! label, a name label, a well-formed launch mark, and the daemon-side name
//! derived from that owner and name; every mark, together. `list`, `find`
//! and `destroy` all ask this rule, through an inspect's answer or the list
//! call's summary, so they never disagree: whatever `list` reports, `find`
//! finds under its name, and the reverse. A container missing any mark is
//! one billet did not start: never reported, never removed.

use std::collections::HashMap;

use bollard::models::{ContainerInspectResponse, ContainerSummary};

use super::DockerProvider;
use crate::naming::{LAUNCH_LABEL, NAME_LABEL, OWNER_LABEL, container_name, is_launch_mark};

/// What the daemon holds as one of its containers, read by the one rule.
pub(super) enum Claim<'a> {
    /// This deployment's instance: every mark is there.
    Ours { name: &'a str, mark: &'a str },
    /// Another deployment's container: every mark is there, for its owner.
    Theirs { owner: &'a str },
    /// A container billet did not start: some mark is missing or wrong.
    Foreign,
}

impl DockerProvider {
    /// The one rule (D12, D14) for whose a container is: every mark billet
    /// puts on a container, together, read from its labels and its name on
    /// the daemon (`/`-prefixed, as the daemon answers it). `list`, `find` and
    /// `destroy` all ask it, through an inspect's answer or the list call's
    /// summary ([`claim_inspected`](Self::claim_inspected),
    /// [`claim_listed`](Self::claim_listed)).
    fn claim<'a>(
        &self,
        labels: Option<&'a HashMap<String, String>>,
        daemon_name: Option<&str>,
    ) -> Claim<'a> {
        claim_for(&self.owner, labels, daemon_name)
    }

    /// [`claim`](Self::claim) of an inspected container.
    pub(super) fn claim_inspected<'a>(&self, inspected: &'a ContainerInspectResponse) -> Claim<'a> {
        let labels = inspected.config.as_ref().and_then(|c| c.labels.as_ref());
        self.claim(labels, inspected.name.as_deref())
    }

    /// [`claim`](Self::claim) of a container as the list call summarises it;
    /// `None` when the summary has no names (then only an inspect can tell).
    /// The summary lists a container's own name and, for legacy links, the
    /// names it is linked under (`/other/alias`); its own name is the one
    /// with no `/` past the first.
    pub(super) fn claim_listed<'a>(&self, summary: &'a ContainerSummary) -> Option<Claim<'a>> {
        let names = summary.names.as_ref()?;
        let own = names
            .iter()
            .find(|n| n.strip_prefix('/').is_some_and(|rest| !rest.contains('/')));
        Some(self.claim(summary.labels.as_ref(), own.map(String::as_str)))
    }
}

/// The one rule, for the deployment `deployment`: a container's labels and
/// its name on the daemon (`/`-prefixed). Also read from an event's
/// attributes, which carry the container's labels and its name.
pub(super) fn claim_for<'a>(
    deployment: &str,
    labels: Option<&'a HashMap<String, String>>,
    daemon_name: Option<&str>,
) -> Claim<'a> {
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    let (Some(owner), Some(name), Some(mark)) =
        (label(OWNER_LABEL), label(NAME_LABEL), label(LAUNCH_LABEL))
    else {
        return Claim::Foreign;
    };
    let named = daemon_name
        .and_then(|n| n.strip_prefix('/'))
        .is_some_and(|n| n == container_name(owner, name));
    if owner.trim().is_empty() || name.is_empty() || !is_launch_mark(mark) || !named {
        return Claim::Foreign;
    }
    if owner == deployment {
        Claim::Ours { name, mark }
    } else {
        Claim::Theirs { owner }
    }
}
