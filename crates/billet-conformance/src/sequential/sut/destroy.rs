//! The destroys the driver makes and checks: the id a destroy names, a
//! destroy on a live or a cut connection, one made with a mid-call fault
//! armed (H11), and the answer the model expects.

use billet_provider::{Error, InstanceId, Provider, Teardown};

use crate::factory::ProviderFactory;
use crate::model::{DestroyOutcome, Miss, ModelState, Side, Target};

use super::Sut;
use super::outage::{cut_error, is_unavailable};
use super::report::show;

impl<'f, F: ProviderFactory> Sut<'f, F> {
    /// The text of the id a destroy names.
    fn target_id(&self, model: &ModelState, target: &Target) -> InstanceId {
        let issued = |key| {
            let ix = model.latest(key).expect("preconditions keep keys valid");
            self.ids[ix].as_str().to_owned()
        };
        match target {
            Target::Issued(key) => InstanceId::from(issued(key)),
            Target::Never(text) => InstanceId::from(*text),
            Target::NearMiss(key, miss) => {
                let id = issued(key);
                InstanceId::from(match miss {
                    Miss::Leading => format!(" {id}"),
                    Miss::Trailing => format!("{id} "),
                    Miss::Case => {
                        let upper = id.to_uppercase();
                        let lower = id.to_lowercase();
                        if upper != id {
                            upper
                        } else if lower != id {
                            lower
                        } else {
                            format!("{id}-gone")
                        }
                    }
                })
            }
        }
    }

    /// Whether `got` is the refusal of a destroy of `id`, held by launch `ix`
    /// of another deployment.
    fn not_owned(
        &self,
        model: &ModelState,
        id: &InstanceId,
        ix: usize,
        got: &Result<Teardown, Error>,
    ) -> bool {
        match got {
            Err(Error::NotOwned { id: named, owner }) => {
                named == id && *owner == self.deployment(model.launches[ix].side).owner
            }
            _ => false,
        }
    }

    pub(super) fn destroy(
        &mut self,
        before: &ModelState,
        side: Side,
        target: &Target,
    ) -> Result<(), String> {
        let id = self.target_id(before, target);
        let got = self.runtime.block_on(self.provider(side).destroy(&id));
        let outcome = before.destroy_outcome(side, target);
        if before.is_cut(side) {
            // H8: nothing reaches the daemon, so nothing may be removed.
            return match (outcome, got) {
                (_, Err(err)) if is_unavailable(&err) => Ok(()),
                (DestroyOutcome::NotOwned(ix), got) if self.not_owned(before, &id, ix, &got) => {
                    Ok(())
                }
                (_, got) => Err(cut_error("destroy", "removed", &show(&got))),
            };
        }
        self.check_destroy(before, &id, outcome, got)
    }

    /// A destroy made with a mid-call fault armed (H11): it answers its normal
    /// answer (the fault fell after its last exchange), or an error an outage
    /// allows, and then the model holds both worlds.
    pub(super) fn destroy_losing_answer(
        &mut self,
        before: &ModelState,
        after: &mut ModelState,
        side: Side,
        target: &Target,
    ) -> Result<(), String> {
        let id = self.target_id(before, target);
        let got = self.runtime.block_on(self.provider(side).destroy(&id));
        let outcome = before.destroy_outcome(side, target);
        match got {
            Err(err) if is_unavailable(&err) => Ok(()),
            got => {
                self.check_destroy(before, &id, outcome, got).map_err(|err| {
                    format!(
                        "{err} (or, the connection having failed in the middle of the destroy, Err(Unavailable) or Err(InventoryUnavailable))"
                    )
                })?;
                if let DestroyOutcome::Removed(ix) = outcome {
                    after.settle(ix, true);
                }
                Ok(())
            }
        }
    }

    /// Checks a destroy's answer on a live connection.
    fn check_destroy(
        &self,
        before: &ModelState,
        id: &InstanceId,
        outcome: DestroyOutcome,
        got: Result<Teardown, Error>,
    ) -> Result<(), String> {
        let unknown = before.policies.unknown_destroy;
        match (outcome, got) {
            (DestroyOutcome::Removed(_), Ok(Teardown::Stopped)) => Ok(()),
            (DestroyOutcome::Removed(_), Ok(Teardown::Requested))
                if unknown == Teardown::Requested =>
            {
                Ok(())
            }
            (DestroyOutcome::Removed(_), got) => Err(format!(
                "destroying its own held instance {id}: expected Ok(Stopped), got {}",
                show(&got)
            )),
            (DestroyOutcome::NotOwned(ix), got) if self.not_owned(before, id, ix, &got) => Ok(()),
            (DestroyOutcome::NotOwned(ix), got) => {
                let owner = &self.deployment(before.launches[ix].side).owner;
                Err(format!(
                    "destroying {id}, held by {owner:?}: expected Err(NotOwned {{ id: {id}, owner: {owner:?} }}), got {}",
                    show(&got)
                ))
            }
            (DestroyOutcome::NotHeld, Ok(teardown)) if teardown == unknown => Ok(()),
            (DestroyOutcome::NotHeld, got) => Err(format!(
                "destroying {id}, which the host does not hold: expected Ok({unknown:?}), got {}",
                show(&got)
            )),
        }
    }
}
