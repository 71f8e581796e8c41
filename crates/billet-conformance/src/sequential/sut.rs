//! The system under test: applies each transition to the real providers and checks every
//! answer against the reference model, in modelled or in wall time.
//!
//! This file holds the system under test ([`Sut`]): building and tearing down
//! its fixture, and applying each step; the calls and checks of each concern
//! live beside it, each in an `impl Sut` of its own: `launch`, `destroy`,
//! `inventory` (instances and inventories checked, lost answers settled),
//! `outage` (mid-call faults, and what a cut connection may answer), `wall`
//! (wall timing's windows) and `report` (how failures show values). It also
//! holds [`catch_panic`], which answers a panic as an error.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, ManualClock};
use billet_provider::{InstanceId, Provider, ProviderKind};
use tokio::runtime::Runtime;

use crate::factory::{Deployment, Fixture, ProviderFactory, Timing, WallWindows};
use crate::model::{ModelState, Pace, Side, Transition};

mod destroy;
mod inventory;
mod launch;
mod outage;
mod report;
mod wall;

use outage::expect_inventory_unavailable;
use report::show;
use wall::{Seen, wall_move_target};

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

#[cfg(test)]
mod tests {
    use super::*;

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
            reason.starts_with("panicked at crates/billet-conformance/src/sequential/sut.rs:")
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
}
