//! The driver: applies each transition to the real providers and checks every
//! answer against the reference model, in modelled or in wall time.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_provider::{
    Error, ErrorKind, Instance, InstanceId, Provider, ProviderKind, Spec, State, Teardown,
    TrustClass,
};
use tokio::runtime::Runtime;

use crate::factory::{Deployment, Fixture, ProviderFactory, Timing, WallWindows};
use crate::model::{
    Command, DestroyOutcome, Doubt, LaunchOutcome, Miss, ModelState, Nudge, Pace, Side, Target,
    Transition,
};

/// How the case's time is told and moved.
enum Time {
    /// The fixture's manual clock, and its time when the case began: the
    /// model's zero.
    Modelled {
        clock: ManualClock,
        origin: SystemTime,
    },
    /// Real time, within the backend's windows.
    Wall(WallWindows),
}

/// What the suite saw of one successful launch under wall timing.
struct Seen {
    /// The backend's own start time: the model's origin for this instance.
    /// For a launch whose answer was lost (H11), the instant the call began
    /// until an inventory shows the instance.
    started_at: SystemTime,
    /// When the launch call began.
    called: SystemTime,
    /// When the launch call returned; for an instance a launch that lost its
    /// answer left (H11), when the outage that followed ended: `Pending` may
    /// last the declared window from then.
    returned: SystemTime,
    /// Whether a launch that lost its answer left it (H11): `returned` is
    /// then when the outage after it ended.
    left: bool,
    /// The latest state seen so far, as a rank ([`rank`]): states only move on.
    rank: Cell<u8>,
}

/// The order of an instance's life: pending, running, stopped.
fn rank(state: State) -> u8 {
    match state {
        State::Pending => 0,
        State::Running => 1,
        State::Stopped { .. } => 2,
    }
}

/// The system under test: a fresh fixture, the runtime that drives it, and
/// the ids the backend issued, by launch index.
pub(crate) struct Sut<'f, F: ProviderFactory> {
    factory: &'f F,
    /// Declared before the runtime, so the providers are dropped while it
    /// still runs.
    fixture: Fixture<F::Provider>,
    runtime: Runtime,
    time: Time,
    kind: ProviderKind,
    ids: Vec<InstanceId>,
    /// By launch index; empty under modelled timing.
    seen: Vec<Seen>,
    /// The outages this case started and has not ended, by [`Side::index`]
    /// (a lost answer starts one, H11).
    down: [bool; 2],
    /// When each side's latest outage ended, by [`Side::index`].
    restored: [Option<SystemTime>; 2],
}

impl<'f, F: ProviderFactory> Sut<'f, F> {
    /// Builds a fixture. With `pace`, the fixture must declare that timing.
    pub(crate) fn new(factory: &'f F, pace: Option<Pace>) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| format!("could not start the suite's tokio runtime: {err}"))?;
        let fixture = runtime
            .block_on(factory.build())
            .map_err(|err| format!("the factory could not build a fixture: {err}"))?;
        let time = match &fixture.timing {
            Timing::Modelled(clock) => Time::Modelled {
                clock: clock.clone(),
                origin: clock.now(),
            },
            Timing::Wall(windows) => Time::Wall(*windows),
        };
        let sut = Sut {
            factory,
            kind: fixture.blue.provider.kind(),
            fixture,
            runtime,
            time,
            ids: Vec::new(),
            seen: Vec::new(),
            down: [false; 2],
            restored: [None; 2],
        };
        let problem = if sut.fixture.blue.owner == sut.fixture.green.owner {
            Some(format!(
                "the factory built two deployments with the same owner {:?}",
                sut.fixture.blue.owner
            ))
        } else if sut.fixture.green.provider.kind() != sut.kind {
            Some("the factory built providers of two different kinds".to_owned())
        } else if pace.is_some_and(|pace| pace != sut.pace()) {
            Some(format!(
                "the factory built fixtures with different timings: {:?}, then {:?}",
                pace,
                sut.pace()
            ))
        } else {
            None
        };
        match problem {
            None => Ok(sut),
            Some(problem) => {
                // Leave nothing behind even so; the first problem is the one told.
                let _ = sut.finish();
                Err(problem)
            }
        }
    }

    /// How this fixture's time passes.
    pub(crate) fn pace(&self) -> Pace {
        match self.time {
            Time::Modelled { .. } => Pace::Modelled,
            Time::Wall(windows) => Pace::Wall(windows),
        }
    }

    /// Ends every outage this case started, then lets the factory clean up.
    pub(crate) fn finish(self) -> Result<(), String> {
        let Sut {
            factory,
            fixture,
            runtime,
            down,
            ..
        } = self;
        runtime.block_on(async {
            for (side, deployment) in [&fixture.blue, &fixture.green].into_iter().enumerate() {
                if down[side] {
                    factory
                        .set_outage(deployment, false)
                        .await
                        .map_err(|err| format!("the factory could not end an outage: {err}"))?;
                }
            }
            factory
                .teardown(&fixture)
                .await
                .map_err(|err| format!("the factory could not tear the fixture down: {err}"))
        })?;
        drop(fixture);
        drop(runtime);
        Ok(())
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

    /// Sleeps for real (wall timing only).
    fn sleep(&self, duration: Duration) {
        // The timer is made inside the runtime, whose time driver it needs.
        self.runtime
            .block_on(async move { tokio::time::sleep(duration).await });
    }

    /// The instance the model says launch `ix` is, as of `model.now`, under
    /// modelled timing.
    fn expected(&self, model: &ModelState, ix: usize, origin: SystemTime) -> Instance {
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
            started_at: origin + launched.started,
        }
    }

    /// Checks one answer about launch `ix`, given between the wall times
    /// `from` and `to`: exactly the model's instance under modelled timing;
    /// the same identity and start time, and a state inside the windows,
    /// under wall timing.
    fn check_instance(
        &self,
        model: &ModelState,
        ix: usize,
        got: &Instance,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(), String> {
        let windows = match self.time {
            Time::Modelled { origin, .. } => {
                let want = self.expected(model, ix, origin);
                return if *got == want {
                    Ok(())
                } else {
                    Err(format!(
                        "expected the instance {}, got {}",
                        want.report(),
                        got.report()
                    ))
                };
            }
            Time::Wall(windows) => windows,
        };
        let launched = &model.launches[ix];
        let seen = &self.seen[ix];
        let owner = &self.deployment(launched.side).owner;
        if got.id != self.ids[ix]
            || got.name != launched.name
            || got.owner != *owner
            || got.kind != self.kind
            || got.started_at != seen.started_at
        {
            return Err(format!(
                "expected the instance {{ id: {}, name: {:?}, owner: {owner:?}, kind: {}, started_at: {:?} }}, got {}",
                self.ids[ix],
                launched.name,
                self.kind,
                seen.started_at,
                got.report()
            ));
        }
        let right = wall_state_allowed(got.state, from, to, seen, launched.run_time, windows);
        let when = || {
            let returned = if seen.left {
                "its launch lost its answer and the outage after it ended"
            } else {
                "launch returned"
            };
            format!(
                "answered between {} and {} after its started_at ({returned} at {}; it runs for {:?}; windows: Pending up to {:?} after {returned}, Running or Stopped {{ exit_code: 0 }} within {:?} of the end)",
                offset(from, seen.started_at),
                offset(to, seen.started_at),
                offset(seen.returned, seen.started_at),
                launched.run_time,
                windows.pending,
                windows.around_end
            )
        };
        if !right {
            return Err(format!(
                "{} is in a wrong state: {:?}, {}",
                got.id,
                got.state,
                when()
            ));
        }
        let before = seen.rank.get();
        if rank(got.state) < before {
            return Err(format!(
                "{} went back to {:?} after it was seen {}, {}",
                got.id,
                got.state,
                ["Pending", "Running", "Stopped"][usize::from(before)],
                when()
            ));
        }
        seen.rank.set(rank(got.state));
        Ok(())
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
    ///
    /// A call whose answer a mid-call fault was to lose but that answered
    /// normally settles its world in `after` at once (H11).
    pub(crate) fn apply(
        &mut self,
        before: &ModelState,
        after: &mut ModelState,
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
                let from = SystemTime::now();
                let got = self.runtime.block_on(self.provider(*side).find(name));
                let to = SystemTime::now();
                if before.is_failing(*side) {
                    return expect_inventory_unavailable(&got);
                }
                match (before.held_named(*side, name), got) {
                    (None, Ok(None)) => Ok(()),
                    (Some(ix), Ok(Some(found))) if found.id == self.ids[ix] => {
                        self.check_instance(before, ix, &found, from, to)
                    }
                    (Some(ix), got) => Err(format!(
                        "expected Ok(Some(the instance {})), got {}",
                        self.ids[ix],
                        show(&got)
                    )),
                    (None, got) => Err(format!("expected Ok(None), got {}", show(&got))),
                }
            }
            Transition::List { side } => {
                let from = SystemTime::now();
                let got = self.runtime.block_on(self.provider(*side).list());
                let to = SystemTime::now();
                if before.is_failing(*side) {
                    return expect_inventory_unavailable(&got);
                }
                self.compare_inventory(before, *side, got, from, to)
            }
            Transition::Destroy { side, target } => self.destroy(before, *side, target),
            Transition::Accepts { side, trust } => {
                let got = self.provider(*side).accepts(*trust);
                self.expect_trust(before, *trust, got)
            }
            Transition::Outage { side, down } => {
                let deployment = self.deployment(*side);
                self.runtime
                    .block_on(self.factory.set_outage(deployment, *down))
                    .map_err(|err| {
                        let what = if *down { "start" } else { "end" };
                        format!("the factory could not {what} an outage of {side}: {err}")
                    })?;
                self.down[side.index()] = *down;
                if !*down {
                    self.restored[side.index()] = Some(SystemTime::now());
                }
                Ok(())
            }
            Transition::LaunchLosingAnswer {
                side,
                name,
                trust,
                command,
                after: exchanges,
            } => {
                self.lose_answer(*side, *exchanges)?;
                let checked =
                    self.launch_losing_answer(before, after, *side, name, *trust, command);
                self.outage_after_lost_answer(*side)?;
                checked
            }
            Transition::DestroyLosingAnswer {
                side,
                target,
                after: exchanges,
            } => {
                self.lose_answer(*side, *exchanges)?;
                let checked = self.destroy_losing_answer(before, after, *side, target);
                self.outage_after_lost_answer(*side)?;
                checked
            }
            Transition::Advance(d) => match &self.time {
                Time::Modelled { clock, .. } => clock
                    .advance(*d)
                    .map_err(|err| format!("the suite could not move the clock: {err}")),
                Time::Wall(_) => {
                    self.sleep(*d);
                    Ok(())
                }
            },
            Transition::AdvanceToStop { of, nudge } => match &self.time {
                Time::Modelled { clock, origin } => clock
                    .advance_to(*origin + after.now)
                    .map_err(|err| format!("the suite could not move the clock: {err}")),
                Time::Wall(windows) => {
                    let ix = before.latest(of).expect("preconditions keep keys valid");
                    let target = self.seen[ix]
                        .started_at
                        .checked_add(before.launches[ix].run_time)
                        .and_then(|stop| wall_move_target(stop, *nudge, *windows));
                    if let Some(wait) =
                        target.and_then(|target| target.duration_since(SystemTime::now()).ok())
                    {
                        self.sleep(wait);
                    }
                    Ok(())
                }
            },
        }
    }

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

    /// Arms a mid-call fault on `side`'s next call (H11): the outage it
    /// leaves is this case's to end.
    fn lose_answer(&mut self, side: Side, after: u32) -> Result<(), String> {
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
    fn outage_after_lost_answer(&mut self, side: Side) -> Result<(), String> {
        self.runtime
            .block_on(self.factory.set_outage(self.deployment(side), true))
            .map_err(|err| {
                format!(
                    "the factory could not keep {side}'s connection down after a lost answer: {err}"
                )
            })
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
    fn launch_losing_answer(
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

    fn destroy(&mut self, before: &ModelState, side: Side, target: &Target) -> Result<(), String> {
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
    fn destroy_losing_answer(
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

    /// Compares one side's inventory, answered between `from` and `to`, with
    /// the model's: the same ids, each once, each instance as
    /// [`check_instance`](Self::check_instance) wants it.
    fn compare_inventory(
        &self,
        model: &ModelState,
        side: Side,
        got: Result<Vec<Instance>, Error>,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(), String> {
        let mut got = got.map_err(|err| {
            format!(
                "expected {side}'s whole inventory, got Err({}) ({err})",
                err.report()
            )
        })?;
        got.sort_by(|a, b| a.id.cmp(&b.id));
        let want: Vec<usize> = model.held_by(side).collect();
        let missing: Vec<&InstanceId> = want
            .iter()
            .map(|ix| &self.ids[*ix])
            .filter(|id| !got.iter().any(|i| i.id == **id))
            .collect();
        let unexpected: Vec<&Instance> = got
            .iter()
            .enumerate()
            .filter(|(n, i)| {
                !want.iter().any(|ix| self.ids[*ix] == i.id)
                    || got[..*n].iter().any(|j| j.id == i.id)
            })
            .map(|(_, i)| i)
            .collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            return Err(format!(
                "{side}'s inventory holds {} instance(s), the model {}; missing: {}; unexpected or duplicated: {}",
                got.len(),
                want.len(),
                missing.report(),
                unexpected.report()
            ));
        }
        for ix in want {
            let instance = got
                .iter()
                .find(|i| i.id == self.ids[ix])
                .expect("no id is missing");
            self.check_instance(model, ix, instance, from, to)
                .map_err(|err| format!("{side}'s inventory: {err}"))?;
        }
        Ok(())
    }

    /// Checked after every step: each readable inventory equals the model's,
    /// so a refusal that recorded something, or a destroy that removed the
    /// wrong thing, is caught where it happens.
    ///
    /// The first inventory of a side read after the outage a lost answer left
    /// (H11) settles that call's world in `model`: a launch happened if the
    /// inventory shows an instance of its name the model does not know, a
    /// destroy if its instance is gone. Everything after is checked against
    /// that world: this inventory exactly, the instance a launch left as any
    /// other (its identity, its start time around the call, its state; in
    /// wall time `Pending` no longer than the declared window after the
    /// outage ended), and every later answer about it.
    pub(crate) fn check_invariants(&mut self, model: &mut ModelState) -> Result<(), String> {
        for side in [Side::Blue, Side::Green] {
            if self.provider(side).kind() != self.kind {
                return Err(format!("{side}'s kind() changed"));
            }
            if model.is_failing(side) {
                continue;
            }
            let from = SystemTime::now();
            let got = self.runtime.block_on(self.provider(side).list());
            let to = SystemTime::now();
            let settled = match (model.doubt(side), &got) {
                (Some((ix, doubt)), Ok(listed)) => Some(self.settle(model, ix, doubt, listed)?),
                _ => None,
            };
            self.compare_inventory(model, side, got, from, to)
                .map_err(|err| match settled {
                    Some(lost) => format!("{err}; {lost}"),
                    None => err,
                })?;
        }
        Ok(())
    }

    /// Settles in `model` the world of launch `ix`'s call whose answer was
    /// lost, from its side's inventory `listed`; answers what it settled, as
    /// the report tells it.
    fn settle(
        &mut self,
        model: &mut ModelState,
        ix: usize,
        doubt: Doubt,
        listed: &[Instance],
    ) -> Result<String, String> {
        let launched = &model.launches[ix];
        let side = launched.side;
        let name = launched.name.clone();
        if doubt == Doubt::Destroy {
            let id = &self.ids[ix];
            let happened = !listed.iter().any(|i| i.id == *id);
            model.settle(ix, happened);
            return Ok(format!(
                "the destroy of {id} lost its answer and the first inventory after the outage {}, so it {}",
                if happened { "lacks it" } else { "holds it" },
                if happened {
                    "happened"
                } else {
                    "did not happen"
                },
            ));
        }
        // The ids the side holds for sure (and the stand-in of this launch,
        // which no inventory shows): the instance the launch left is a new one.
        let known: Vec<&InstanceId> = model.held_by(side).map(|held| &self.ids[held]).collect();
        let left = listed
            .iter()
            .find(|i| i.name == name && !known.contains(&&i.id));
        let Some(left) = left else {
            model.settle(ix, false);
            return Ok(format!(
                "the launch of {name:?} lost its answer and the first inventory after the outage holds no new instance of that name, so it did not happen: an instance it left must be reported under its name"
            ));
        };
        if self.ids.contains(&left.id) {
            return Err(format!(
                "{side}'s inventory: the instance the launch of {name:?} left when it lost its answer has the id {} the backend issued before: ids are never reused on a host ({})",
                left.id,
                left.report()
            ));
        }
        self.ids[ix] = left.id.clone();
        model.settle(ix, true);
        if let Time::Wall(windows) = self.time {
            let seen = &mut self.seen[ix];
            if !wall_start_allowed(left.started_at, seen.called, seen.returned, windows) {
                return Err(format!(
                    "{side}'s inventory: the instance the launch of {name:?} left when it lost its answer started at {} from the launch call's start (the call took {}); expected within {:?} before it and {:?} after it returned ({})",
                    offset(left.started_at, seen.called),
                    offset(seen.returned, seen.called),
                    windows.around_end,
                    windows.pending,
                    left.report(),
                ));
            }
            seen.started_at = left.started_at;
            // It may be Pending for the declared window from the instant the
            // outage ended, and no longer.
            seen.returned = self.restored[side.index()].unwrap_or(seen.returned);
            seen.left = true;
        }
        Ok(format!(
            "the launch of {name:?} lost its answer and the first inventory after the outage holds it as {}, so it happened",
            left.id
        ))
    }
}

/// Whether `state`, answered at some instant between `from` and `to`, is one
/// `windows` allow for the instance `seen` describes, which runs for
/// `run_time` (H7, [`WallWindows`]): `Pending` before `returned + pending`,
/// `Running` before `started_at + run_time + around_end`,
/// `Stopped { exit_code: 0 }` from `started_at + run_time - around_end` on, and
/// no other state. An instance whose stop time is past representable time
/// never stops.
fn wall_state_allowed(
    state: State,
    from: SystemTime,
    to: SystemTime,
    seen: &Seen,
    run_time: Duration,
    windows: WallWindows,
) -> bool {
    let stop = seen.started_at.checked_add(run_time);
    match state {
        State::Pending => seen
            .returned
            .checked_add(windows.pending)
            .is_none_or(|latest| from < latest),
        State::Running => stop
            .and_then(|stop| stop.checked_add(windows.around_end))
            .is_none_or(|late| from < late),
        State::Stopped { exit_code: 0 } => stop.is_some_and(|stop| {
            stop.checked_sub(windows.around_end)
                .is_none_or(|early| to >= early)
        }),
        State::Stopped { .. } => false,
    }
}

/// Whether a start time a backend answered for a launch called at `called`
/// that returned at `returned` lies around the call (H7): from
/// `called - around_end` to `returned + pending`, both included.
fn wall_start_allowed(
    started_at: SystemTime,
    called: SystemTime,
    returned: SystemTime,
    windows: WallWindows,
) -> bool {
    let early = called
        .checked_sub(windows.around_end)
        .is_some_and(|earliest| started_at < earliest);
    let late = returned
        .checked_add(windows.pending)
        .is_some_and(|latest| started_at > latest);
    !(early || late)
}

/// Where a wall-time move to the stop time `stop` lands: at it, or just
/// outside the window around it (`around_end` and a quarter of the windows'
/// unit before or after it); `None` when that is not representable.
fn wall_move_target(stop: SystemTime, nudge: Nudge, windows: WallWindows) -> Option<SystemTime> {
    let margin = windows.around_end.saturating_add(windows.unit() / 4);
    match nudge {
        Nudge::At => Some(stop),
        Nudge::Before => stop.checked_sub(margin),
        Nudge::After => stop.checked_add(margin),
    }
}

/// Whether `err` is an answer a call may give while the connection is cut.
fn is_unavailable(err: &Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::Unavailable | ErrorKind::InventoryUnavailable
    )
}

/// What a call answered during a whole outage that it must not have.
fn cut_error(call: &str, changed: &str, got: &str) -> String {
    format!(
        "the connection is cut: expected {call} to answer Err(Unavailable) or Err(InventoryUnavailable), {changed} nothing; got {got}"
    )
}

/// `at` relative to `from`, signed, as people read it.
fn offset(at: SystemTime, from: SystemTime) -> String {
    match at.duration_since(from) {
        Ok(after) => format!("+{after:?}"),
        Err(before) => format!("-{:?}", before.duration()),
    }
}

fn expect_inventory_unavailable<T: Report>(got: &Result<T, Error>) -> Result<(), String> {
    match got {
        Err(err) if err.kind() == ErrorKind::InventoryUnavailable => Ok(()),
        got => Err(format!(
            "the inventory is failing: expected Err(InventoryUnavailable), got {}",
            show(got)
        )),
    }
}

thread_local! {
    /// Whether a panic on this thread is one [`catch_panic`] answers, so the
    /// panic hook keeps quiet about it.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// Where the latest panic [`catch_panic`] answers happened, as the hook saw it.
    static PANICKED_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once per process, a panic hook that keeps quiet about the
/// panics [`catch_panic`] answers, recording where each happened instead, and
/// hands every other panic (another thread's, or this one's outside the
/// suite's calls) to the hook that was there before.
fn quiet_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let at = info.location().map(ToString::to_string);
                PANICKED_AT.with(|slot| *slot.borrow_mut() = at);
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `call`, answering a panic in it (the backend's, a factory hook's, or
/// the suite's own) as an error that says where it happened and its message,
/// printed once: the failure is then reported like any other, with its
/// sequence. While `call` runs, the panic hook keeps quiet about a panic on
/// this thread only.
pub(crate) fn catch_panic<T>(call: impl FnOnce() -> T) -> Result<T, String> {
    quiet_hook();
    let was = CATCHING.with(|catching| catching.replace(true));
    let outcome = panic::catch_unwind(AssertUnwindSafe(call));
    CATCHING.with(|catching| catching.set(was));
    outcome.map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|text| (*text).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic with no message".to_owned());
        match PANICKED_AT.with(|slot| slot.borrow_mut().take()) {
            Some(at) => format!("panicked at {at}: {message}"),
            None => format!("panicked: {message}"),
        }
    })
}

/// An answer as the report shows it: the value, or the error's variant and data.
fn show<T: Report>(got: &Result<T, Error>) -> String {
    match got {
        Ok(value) => format!("Ok({})", value.report()),
        Err(err) => format!("Err({})", err.report()),
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
    use super::*;

    /// `ms` milliseconds after an arbitrary instant.
    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000) + Duration::from_millis(ms)
    }

    // H1: a panic inside `catch_panic` is answered as an error with its
    // location and message, and the panic hook keeps quiet about it; a panic
    // on another thread meanwhile, and one on this thread afterwards, still
    // reach the hook that was installed before.
    #[test]
    fn h1_catch_panic_answers_a_panic_and_silences_only_its_own() {
        use std::sync::{Arc, Mutex};
        let heard = Arc::new(Mutex::new(Vec::<String>::new()));
        let ear = Arc::clone(&heard);
        // The only test of this binary that reaches `catch_panic`, so the
        // suite's hook is installed over this one, as over a test's own.
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .unwrap_or_default();
            if message.starts_with("catch-panic-test") {
                ear.lock().unwrap().push(message);
            } else {
                default(info);
            }
        }));
        let answer = catch_panic(|| -> u32 {
            let other = std::thread::spawn(|| panic!("catch-panic-test: another thread"));
            assert!(other.join().is_err());
            panic!("catch-panic-test: the suite's call")
        });
        let reason = answer.unwrap_err();
        assert!(
            reason.starts_with("panicked at crates/billet-conformance/src/driver.rs:")
                && reason.ends_with(": catch-panic-test: the suite's call"),
            "{reason}"
        );
        assert_eq!(catch_panic(|| 7), Ok(7));
        assert!(panic::catch_unwind(|| panic!("catch-panic-test: afterwards")).is_err());
        assert_eq!(
            *heard.lock().unwrap(),
            vec![
                "catch-panic-test: another thread".to_owned(),
                "catch-panic-test: afterwards".to_owned()
            ]
        );
    }

    // H1: a report prints every id one way, as its Display: in an instance,
    // a list, an option and an error alike, never as `InstanceId("...")`.
    #[test]
    fn h1_reports_print_ids_one_way() {
        let instance = Instance {
            id: InstanceId::from("sim-1"),
            name: "job-a".to_owned(),
            owner: "blue".to_owned(),
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

    const NS: Duration = Duration::from_nanos(1);
    const WINDOWS: WallWindows = WallWindows {
        pending: Duration::from_millis(20),
        around_end: Duration::from_millis(5),
    };

    // H7: in wall time a state is right exactly inside its window: Pending
    // until launch returned + pending, Running until the end + around_end
    // (neither at that instant), Stopped { exit_code: 0 } from the end -
    // around_end on; an answer counts at any instant of its call.
    #[test]
    fn h7_wall_states_are_right_exactly_inside_their_windows() {
        let seen = Seen {
            started_at: at(0),
            called: at(0),
            returned: at(2),
            left: false,
            rank: Cell::new(0),
        };
        let run_time = Duration::from_millis(100);
        let allowed =
            |state, from, to| wall_state_allowed(state, from, to, &seen, run_time, WINDOWS);
        let stopped = State::Stopped { exit_code: 0 };

        assert!(allowed(State::Pending, at(22) - NS, at(40)));
        assert!(!allowed(State::Pending, at(22), at(40)));
        assert!(allowed(State::Running, at(105) - NS, at(200)));
        assert!(!allowed(State::Running, at(105), at(200)));
        assert!(allowed(stopped, at(0), at(95)));
        assert!(!allowed(stopped, at(0), at(95) - NS));
        assert!(!allowed(State::Stopped { exit_code: 1 }, at(0), at(500)));

        // A command that never stops: Running for ever, never Stopped.
        let never =
            |state| wall_state_allowed(state, at(9_999), at(9_999), &seen, Duration::MAX, WINDOWS);
        assert!(never(State::Running));
        assert!(!never(stopped));
    }

    // H7: a start time answered by launch must lie between the call's start
    // less around_end and its return plus pending, both ends included.
    #[test]
    fn h7_a_wall_start_time_lies_around_the_launch_call() {
        let allowed = |started_at| wall_start_allowed(started_at, at(10), at(12), WINDOWS);
        assert!(allowed(at(5)));
        assert!(!allowed(at(5) - NS));
        assert!(allowed(at(11)));
        assert!(allowed(at(32)));
        assert!(!allowed(at(32) + NS));
    }

    // H7: a wall-time move to a stop time lands on it, or just outside the
    // window around it: around_end and a quarter of the unit away.
    #[test]
    fn h7_wall_moves_land_on_the_end_or_just_outside_its_window() {
        // The unit is the larger window, 20 ms: the margin is 5 + 5 ms.
        let stop = at(1_000);
        assert_eq!(wall_move_target(stop, Nudge::At, WINDOWS), Some(stop));
        assert_eq!(
            wall_move_target(stop, Nudge::Before, WINDOWS),
            Some(at(990))
        );
        assert_eq!(
            wall_move_target(stop, Nudge::After, WINDOWS),
            Some(at(1_010))
        );
    }
}
