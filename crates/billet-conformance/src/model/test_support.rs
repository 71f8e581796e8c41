//! What the unit tests of the model share: the simulated backend's policies,
//! and keys and steps made by hand.

use std::time::Duration;

use billet_provider::TrustClass;

use crate::factory::{Outage, Policies};

use super::transition::{Command, Key, Side, Transition};

/// The simulated backend's choices, with an outage of either kind.
pub(super) fn policies(outage: Outage) -> Policies {
    Policies {
        invalid_commands: &[&[], &["sleep", "90"]],
        outage,
        ..Policies::STRICT
    }
}

/// The simulated backend's choices with mid-call faults (H11).
pub(super) fn mid_call() -> Policies {
    Policies {
        mid_call: true,
        ..policies(Outage::WholeConnection)
    }
}

pub(super) fn lose_launch(side: Side, name: &str, after: u32) -> Transition {
    Transition::LaunchLosingAnswer {
        side,
        name: name.to_owned(),
        trust: TrustClass::Trusted,
        command: Command::RunFor(Duration::from_secs(60)),
        after,
    }
}

pub(super) fn key(side: Side, name: &str) -> Key {
    Key {
        side,
        name: name.to_owned(),
    }
}

pub(super) fn launch(side: Side, name: &str, run_time: Duration) -> Transition {
    Transition::Launch {
        side,
        name: name.to_owned(),
        trust: TrustClass::Trusted,
        command: Command::RunFor(run_time),
    }
}
