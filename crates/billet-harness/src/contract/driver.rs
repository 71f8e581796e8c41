//! The driver: applies each transition to the real providers and checks every
//! answer against the reference model.

use std::fmt::Debug;
use std::time::SystemTime;

use billet_provider::{
    Error, ErrorKind, Instance, InstanceId, Provider, ProviderKind, Spec, State, Teardown,
    TrustClass,
};
use tokio::runtime::Runtime;

use super::factory::{Deployment, Fixture, ProviderFactory};
use super::model::{
    Command, DestroyOutcome, LaunchOutcome, Miss, ModelState, Side, Target, Transition,
};

/// The error every injected inventory outage carries.
const OUTAGE: &str = "billet-harness: injected inventory outage";

/// The system under test: a fresh fixture, the runtime that drives it, and
/// the ids the backend issued, by launch index.
pub(crate) struct Sut<'f, F: ProviderFactory> {
    factory: &'f F,
    /// Declared before the runtime, so the providers are dropped while it
    /// still runs.
    fixture: Fixture<F::Provider>,
    runtime: Runtime,
    /// The fixture clock's time when the case began: the model's zero.
    origin: SystemTime,
    kind: ProviderKind,
    ids: Vec<InstanceId>,
}

impl<'f, F: ProviderFactory> Sut<'f, F> {
    pub(crate) fn new(factory: &'f F) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("could not start the suite's tokio runtime: {err}"))?;
        let fixture = {
            let _entered = runtime.enter();
            factory
                .build()
                .map_err(|err| format!("the factory could not build a fixture: {err}"))?
        };
        if fixture.blue.owner == fixture.green.owner {
            return Err(format!(
                "the factory built two deployments with the same owner {:?}",
                fixture.blue.owner
            ));
        }
        let kind = fixture.blue.provider.kind();
        if fixture.green.provider.kind() != kind {
            return Err("the factory built providers of two different kinds".to_owned());
        }
        let origin = billet_clock::Clock::now(&fixture.clock);
        Ok(Sut {
            factory,
            fixture,
            runtime,
            origin,
            kind,
            ids: Vec::new(),
        })
    }

    fn deployment(&self, side: Side) -> &Deployment<F::Provider> {
        match side {
            Side::Blue => &self.fixture.blue,
            Side::Green => &self.fixture.green,
        }
    }

    fn provider(&self, side: Side) -> &F::Provider {
        &self.deployment(side).provider
    }

    /// The instance the model says launch `ix` is, as of `model.now`.
    fn expected(&self, model: &ModelState, ix: usize) -> Instance {
        let launched = &model.launches[ix];
        Instance {
            id: self.ids[ix].clone(),
            name: launched.name.clone(),
            owner: self.deployment(launched.side).owner.clone(),
            kind: self.kind,
            state: if launched.running_at(model.now) {
                State::Running
            } else {
                State::Stopped { exit_code: 0 }
            },
            started_at: self.origin + launched.started,
        }
    }

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

    /// Applies `transition` and checks its answer; `before` and `after` are
    /// the model's states around it.
    pub(crate) fn apply(
        &mut self,
        before: &ModelState,
        after: &ModelState,
        transition: &Transition,
    ) -> Result<(), String> {
        match transition {
            Transition::Launch {
                side,
                name,
                trust,
                command,
            } => self.launch(before, after, *side, name, *trust, command),
            Transition::Find { side, name } => {
                let got = self.runtime.block_on(self.provider(*side).find(name));
                if before.is_failing(*side) {
                    return expect_inventory_unavailable(&got);
                }
                let want = before
                    .held_named(*side, name)
                    .map(|ix| self.expected(before, ix));
                match got {
                    Ok(found) if found == want => Ok(()),
                    got => Err(mismatch(&Ok::<_, Error>(want), &got)),
                }
            }
            Transition::List { side } => {
                let got = self.runtime.block_on(self.provider(*side).list());
                if before.is_failing(*side) {
                    return expect_inventory_unavailable(&got);
                }
                self.compare_inventory(before, *side, got)
            }
            Transition::Destroy { side, target } => {
                let id = self.target_id(before, target);
                let got = self.runtime.block_on(self.provider(*side).destroy(&id));
                let unknown = before.policies.unknown_destroy;
                match (before.destroy_outcome(*side, target), got) {
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
                    (DestroyOutcome::NotOwned(ix), Err(Error::NotOwned { id: named, owner }))
                        if named == id
                            && owner == self.deployment(before.launches[ix].side).owner =>
                    {
                        Ok(())
                    }
                    (DestroyOutcome::NotOwned(ix), got) => Err(format!(
                        "destroying {id}, held by {:?}: expected Err(NotOwned {{ id: {id}, owner: {:?} }}), got {}",
                        self.deployment(before.launches[ix].side).owner,
                        self.deployment(before.launches[ix].side).owner,
                        show(&got)
                    )),
                    (DestroyOutcome::NotHeld, Ok(teardown)) if teardown == unknown => Ok(()),
                    (DestroyOutcome::NotHeld, got) => Err(format!(
                        "destroying {id:?}, which the host does not hold: expected Ok({unknown:?}), got {}",
                        show(&got)
                    )),
                }
            }
            Transition::Accepts { side, trust } => {
                let got = self.provider(*side).accepts(*trust);
                self.expect_trust(before, *trust, got)
            }
            Transition::Inventory { side, failing } => {
                let fault = failing.then(|| Error::inventory_unavailable(OUTAGE));
                self.factory.fail_inventory(self.provider(*side), fault);
                Ok(())
            }
            Transition::Advance(d) => self
                .fixture
                .clock
                .advance(*d)
                .map_err(|err| format!("the harness could not move the clock: {err}")),
            Transition::AdvanceToStop { .. } => self
                .fixture
                .clock
                .advance_to(self.origin + after.now)
                .map_err(|err| format!("the harness could not move the clock: {err}")),
        }
    }

    fn launch(
        &mut self,
        before: &ModelState,
        after: &ModelState,
        side: Side,
        name: &str,
        trust: TrustClass,
        command: &Command,
    ) -> Result<(), String> {
        let argv = match command {
            Command::RunFor(d) => self.factory.command(*d),
            Command::Invalid(argv) => argv.iter().map(|s| (*s).to_owned()).collect(),
        };
        let spec = Spec::new(name, argv)
            .with_image(self.factory.image())
            .with_trust(trust);
        let got = self.runtime.block_on(self.provider(side).launch(spec));
        match before.launch_outcome(side, name, trust, command) {
            LaunchOutcome::Started => {
                let instance = got.map_err(|err| {
                    format!("expected a started instance, got Err({err:?}) ({err})")
                })?;
                if self.ids.contains(&instance.id) {
                    return Err(format!(
                        "the backend answered id {} again: ids are never reused on a host ({instance:?})",
                        instance.id
                    ));
                }
                self.ids.push(instance.id.clone());
                let want = self.expected(after, after.launches.len() - 1);
                if instance == want {
                    Ok(())
                } else {
                    Err(format!("expected the instance {want:?}, got {instance:?}"))
                }
            }
            LaunchOutcome::Refused => self.expect_trust(before, trust, got.map(|_| ())),
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
    fn expect_trust(
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

    /// Compares one side's inventory with the model's, as a set.
    fn compare_inventory(
        &self,
        model: &ModelState,
        side: Side,
        got: Result<Vec<Instance>, Error>,
    ) -> Result<(), String> {
        let mut got = got.map_err(|err| {
            format!("expected {side}'s whole inventory, got Err({err:?}) ({err})")
        })?;
        let mut want: Vec<Instance> = model
            .held_by(side)
            .map(|ix| self.expected(model, ix))
            .collect();
        got.sort_by(|a, b| a.id.cmp(&b.id));
        want.sort_by(|a, b| a.id.cmp(&b.id));
        if got == want {
            return Ok(());
        }
        let missing: Vec<&Instance> = want.iter().filter(|i| !got.contains(i)).collect();
        let mut unexpected: Vec<&Instance> = got.iter().filter(|i| !want.contains(i)).collect();
        if missing.is_empty() && unexpected.is_empty() {
            // Same members, different counts: something is listed twice.
            unexpected = got
                .iter()
                .enumerate()
                .filter(|(n, i)| got[..*n].contains(i))
                .map(|(_, i)| i)
                .collect();
        }
        Err(format!(
            "{side}'s inventory holds {} instance(s), the model {}; missing: {missing:?}; unexpected or duplicated: {unexpected:?}",
            got.len(),
            want.len()
        ))
    }

    /// Checked after every step: each readable inventory equals the model's,
    /// so a refusal that recorded something, or a destroy that removed the
    /// wrong thing, is caught where it happens.
    pub(crate) fn check_invariants(&self, model: &ModelState) -> Result<(), String> {
        for side in [Side::Blue, Side::Green] {
            if self.provider(side).kind() != self.kind {
                return Err(format!("{side}'s kind() changed"));
            }
            if model.is_failing(side) {
                continue;
            }
            let got = self.runtime.block_on(self.provider(side).list());
            self.compare_inventory(model, side, got)?;
        }
        Ok(())
    }
}

fn expect_inventory_unavailable<T: Debug>(got: &Result<T, Error>) -> Result<(), String> {
    match got {
        Err(err) if err.kind() == ErrorKind::InventoryUnavailable => Ok(()),
        got => Err(format!(
            "the inventory is failing: expected Err(InventoryUnavailable), got {}",
            show(got)
        )),
    }
}

fn mismatch<T: Debug>(want: &Result<T, Error>, got: &Result<T, Error>) -> String {
    format!("expected {}, got {}", show(want), show(got))
}

/// An answer as the report shows it: the value, or the error's variant and data.
fn show<T: Debug>(got: &Result<T, Error>) -> String {
    match got {
        Ok(value) => format!("Ok({value:?})"),
        Err(err) => format!("Err({err:?})"),
    }
}
