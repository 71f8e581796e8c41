//! The launches the driver makes and checks: a launch call, the instance a
//! started launch answered, a launch made with a mid-call fault armed (H11),
//! and the refusals the model expects (of a name, a spec or a trust class).

use std::cell::Cell;
use std::time::SystemTime;

use billet_provider::{Error, ErrorKind, Instance, InstanceId, Provider, Spec, TrustClass};

use crate::factory::ProviderFactory;
use crate::model::{Command, LaunchOutcome, ModelState, Side};

use super::outage::{cut_error, is_unavailable};
use super::report::{Report, offset, show};
use super::wall::{Seen, wall_start_allowed};
use super::{Sut, Time};

impl<'f, F: ProviderFactory> Sut<'f, F> {
    /// Makes one launch call: its answer, when it began and when it returned.
    fn call_launch(
        &self,
        side: Side,
        name: &str,
        trust: TrustClass,
        command: &Command,
    ) -> (Result<Instance, Error>, SystemTime, SystemTime) {
        let argv = match command {
            Command::RunFor(d) => self.factory.command(*d),
            Command::Invalid(argv) => argv.iter().map(|s| (*s).to_owned()).collect(),
        };
        let spec = Spec::new(name, argv)
            .with_image(self.factory.image())
            .with_trust(trust);
        let called = SystemTime::now();
        let got = self.runtime.block_on(self.provider(side).launch(spec));
        let returned = SystemTime::now();
        (got, called, returned)
    }

    pub(super) fn launch(
        &mut self,
        before: &ModelState,
        after: &ModelState,
        side: Side,
        name: &str,
        trust: TrustClass,
        command: &Command,
    ) -> Result<(), String> {
        let (got, called, returned) = self.call_launch(side, name, trust, command);
        let outcome = before.launch_outcome(side, name, trust, command);
        if before.is_cut(side) {
            // H8: nothing reaches the daemon, so nothing may start; the
            // refusal the backend can give without its daemon is right too.
            let shown = show(&got);
            return match got {
                Err(err) if is_unavailable(&err) => Ok(()),
                Err(err) if outcome != LaunchOutcome::Started => self
                    .check_launch_refusal(before, outcome, name, trust, Err(err))
                    .map_err(|_| cut_error("launch", "recorded", &shown)),
                _ => Err(cut_error("launch", "recorded", &shown)),
            };
        }
        if outcome != LaunchOutcome::Started {
            return self.check_launch_refusal(before, outcome, name, trust, got);
        }
        let instance = got.map_err(|err| {
            format!(
                "expected a started instance, got Err({}) ({err})",
                err.report()
            )
        })?;
        self.started(after, &instance, called, returned)
    }

    /// Records and checks the instance a launch that the model says starts
    /// answered: the model's latest launch in `after`.
    fn started(
        &mut self,
        after: &ModelState,
        instance: &Instance,
        called: SystemTime,
        returned: SystemTime,
    ) -> Result<(), String> {
        if self.ids.contains(&instance.id) {
            return Err(format!(
                "the backend answered id {} again: ids are never reused on a host ({})",
                instance.id,
                instance.report()
            ));
        }
        self.ids.push(instance.id.clone());
        let ix = after.launches.len() - 1;
        if let Time::Wall(windows) = self.time {
            // H7: the backend's own start time is the model's origin for this
            // instance, provided it lies around the launch call.
            if !wall_start_allowed(instance.started_at, called, returned, windows) {
                return Err(format!(
                    "the instance started at {} from the launch call's start (the call took {}); expected within {:?} before it and {:?} after it returned ({})",
                    offset(instance.started_at, called),
                    offset(returned, called),
                    windows.around_end,
                    windows.pending,
                    instance.report(),
                ));
            }
            self.seen.push(Seen {
                started_at: instance.started_at,
                called,
                returned,
                left: false,
                rank: Cell::new(0),
            });
        }
        self.check_instance(after, ix, instance, called, returned)
    }

    /// A launch made with a mid-call fault armed (H11): it answers its normal
    /// answer (the fault fell after its last exchange), or an error an outage
    /// allows, and then the model holds both worlds.
    pub(super) fn launch_losing_answer(
        &mut self,
        before: &ModelState,
        after: &mut ModelState,
        side: Side,
        name: &str,
        trust: TrustClass,
        command: &Command,
    ) -> Result<(), String> {
        let (got, called, returned) = self.call_launch(side, name, trust, command);
        let outcome = before.launch_outcome(side, name, trust, command);
        match got {
            // Either way round, a refused launch records nothing.
            Err(err) if is_unavailable(&err) && outcome != LaunchOutcome::Started => Ok(()),
            got if outcome != LaunchOutcome::Started => self
                .check_launch_refusal(before, outcome, name, trust, got)
                .map_err(|err| format!("{err} (or, the connection having failed in the middle of the launch, Err(Unavailable) or Err(InventoryUnavailable))")),
            Ok(instance) => {
                let ix = after.launches.len() - 1;
                after.settle(ix, true);
                self.started(after, &instance, called, returned)
            }
            Err(err) if is_unavailable(&err) => {
                // Until an inventory shows it, the instance has no id the
                // suite knows: a text no backend issues stands in for it.
                let placeholder = format!("billet-conformance/lost-launch-{}", self.ids.len());
                self.ids.push(InstanceId::from(placeholder));
                if let Time::Wall(_) = self.time {
                    self.seen.push(Seen {
                        started_at: called,
                        called,
                        returned,
                        left: false,
                        rank: Cell::new(0),
                    });
                }
                Ok(())
            }
            got => Err(format!(
                "expected a started instance (or, the connection having failed in the middle of the launch, Err(Unavailable) or Err(InventoryUnavailable)), got {}",
                show(&got)
            )),
        }
    }

    /// Checks the answer of a launch the model says is refused.
    fn check_launch_refusal(
        &self,
        model: &ModelState,
        outcome: LaunchOutcome,
        name: &str,
        trust: TrustClass,
        got: Result<Instance, Error>,
    ) -> Result<(), String> {
        match outcome {
            LaunchOutcome::Started => unreachable!("a started launch is not a refusal"),
            LaunchOutcome::Refused => self.expect_trust(model, trust, got.map(|_| ())),
            LaunchOutcome::Invalid => match got {
                Err(err) if err.kind() == ErrorKind::InvalidSpec => Ok(()),
                got => Err(format!(
                    "expected Err(InvalidSpec), nothing recorded; got {}",
                    show(&got)
                )),
            },
            LaunchOutcome::Conflict => match got {
                Err(Error::Conflict { name: held }) if held == name => Ok(()),
                got => Err(format!(
                    "expected Err(Conflict {{ name: {name:?} }}), the held instance untouched; got {}",
                    show(&got)
                )),
            },
            LaunchOutcome::InvalidOrConflict => match got {
                Err(err) if matches!(err.kind(), ErrorKind::InvalidSpec | ErrorKind::Conflict) => {
                    Ok(())
                }
                got => Err(format!(
                    "expected Err(InvalidSpec) or Err(Conflict), nothing recorded; got {}",
                    show(&got)
                )),
            },
        }
    }

    /// Checks an answer of `accepts` (or of a launch refused for its trust).
    pub(super) fn expect_trust(
        &self,
        model: &ModelState,
        trust: TrustClass,
        got: Result<(), Error>,
    ) -> Result<(), String> {
        match got {
            Ok(()) if model.accepts(trust) => Ok(()),
            Err(Error::Refused { trust: t, kind }) if !model.accepts(trust) => {
                if t == trust && kind == self.kind {
                    Ok(())
                } else {
                    Err(format!(
                        "expected Err(Refused {{ trust: {trust}, kind: {} }}), got Err(Refused {{ trust: {t}, kind: {kind} }})",
                        self.kind
                    ))
                }
            }
            got if model.accepts(trust) => Err(format!(
                "expected {trust} work to be accepted, got {}",
                show(&got)
            )),
            got => Err(format!(
                "expected Err(Refused {{ trust: {trust}, kind: {} }}), nothing recorded; got {}",
                self.kind,
                show(&got)
            )),
        }
    }
}
