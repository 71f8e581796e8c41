//! Outages in the driver (H8, H11): arming a mid-call fault and keeping the
//! connection down after it, the errors a cut connection may answer, and the
//! failures told when a call answered otherwise.

use billet_provider::{Error, ErrorKind};

use crate::factory::ProviderFactory;
use crate::model::Side;

use super::Sut;
use super::report::{Report, show};

impl<'f, F: ProviderFactory> Sut<'f, F> {
    /// Arms a mid-call fault on `side`'s next call (H11): the outage it
    /// leaves is this case's to end.
    pub(super) fn lose_answer(&mut self, side: Side, after: u32) -> Result<(), String> {
        self.runtime
            .block_on(self.factory.lose_answer(self.deployment(side), after))
            .map_err(|err| {
                format!(
                    "the factory could not arm a fault in the middle of {side}'s next call: {err}"
                )
            })?;
        self.down[side.index()] = true;
        Ok(())
    }

    /// Makes sure `side`'s connection is down once a call that was to lose
    /// its answer has returned (H11), also when the call needed fewer
    /// exchanges than the fault let through, which a backend whose
    /// connection runs through a proxy cannot tell from the wire.
    pub(super) fn outage_after_lost_answer(&mut self, side: Side) -> Result<(), String> {
        self.runtime
            .block_on(self.factory.set_outage(self.deployment(side), true))
            .map_err(|err| {
                format!(
                    "the factory could not keep {side}'s connection down after a lost answer: {err}"
                )
            })
    }
}

/// Whether `err` is an answer a call may give while the connection is cut.
pub(super) fn is_unavailable(err: &Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Unavailable | ErrorKind::InventoryUnavailable
    )
}

/// What a call answered during a whole outage that it must not have.
pub(super) fn cut_error(call: &str, changed: &str, got: &str) -> String {
    format!(
        "the connection is cut: expected {call} to answer Err(Unavailable) or Err(InventoryUnavailable), {changed} nothing; got {got}"
    )
}

pub(super) fn expect_inventory_unavailable<T: Report>(
    got: &Result<T, Error>,
) -> Result<(), String> {
    match got {
        Err(err) if err.kind() == ErrorKind::InventoryUnavailable => Ok(()),
        got => Err(format!(
            "the inventory is failing: expected Err(InventoryUnavailable), got {}",
            show(got)
        )),
    }
}
