//! [`SimulatedFactory`]: the simulated backend's fixtures for the contract
//! suite of `billet-conformance` (H9), and [`Severable`], the simulated
//! provider behind a connection a test can cut (H8) or fail in the middle of
//! a call (H11).
//!
//! The factory lives here, beside the backend it builds, so that the suite's
//! crate depends on no backend: a real backend's `[dev-dependencies]` take the
//! suite without this crate. This crate is test-only, so depending on the
//! suite from its normal dependencies costs no production build anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use billet_clock::ManualClock;
use billet_conformance::{
    Deployment, Fixture, FixtureError, Outage, Policies, ProviderFactory, Timing, WallWindows,
};
use billet_provider::{
    Error, HintStream, Hints, Instance, InstanceId, Output, OutputStream, Provider, ProviderKind,
    Spec, Teardown, TrustClass,
};
use parking_lot::Mutex;

use crate::{Host, SimulatedProvider, run_for};

/// The error an inventory-only outage injects ([`SimulatedProvider::fail_inventory`]).
const INVENTORY_OUTAGE: &str = "billet-simulated: injected inventory outage";
/// What a [`Severable`] answers while its connection is cut.
const CUT: &str = "billet-simulated: the connection to the host is cut";
/// What a [`Severable`] answers for a call whose answer a mid-call fault lost.
const LOST: &str = "billet-simulated: the connection to the host failed in the middle of the call; its answer was lost";

/// The windows the simulated backend declares under wall timing: never
/// `Pending`, and 5 ms around each stop time. Its states are in fact exact
/// (each call reads the system clock once), so these only set the pace: run
/// times and moves of a few to a few tens of milliseconds.
pub const WALL_WINDOWS: WallWindows = WallWindows {
    pending: Duration::ZERO,
    around_end: Duration::from_millis(5),
};

/// How a [`SimulatedFactory`]'s providers tell time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimulatedClock {
    /// A [`ManualClock`] that starts at `start` and that the suite moves
    /// ([`Timing::Modelled`]).
    Modelled {
        /// Where the fixture's modelled time starts.
        start: SystemTime,
    },
    /// The system clock ([`Timing::Wall`]), declaring these windows.
    Wall(WallWindows),
}

/// The [`ProviderFactory`] of the simulated backend: two [`Severable`]
/// simulated providers, for the deployments `"blue"` and `"green"`, over one
/// [`Host`].
///
/// [`SimulatedFactory::modelled`] (the [`Default`]) times them by a
/// [`ManualClock`] and breaks only the inventory in an outage, the backend's
/// own switch ([`SimulatedProvider::fail_inventory`]).
/// [`SimulatedFactory::wall`] times them by the system clock and cuts the
/// whole connection, as a real backend whose daemon goes away. A factory whose
/// outages cut the whole connection also loses answers mid-call
/// ([`Policies::mid_call`], [`Severable::lose_answer`], H11).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimulatedFactory {
    /// How the providers tell time.
    pub clock: SimulatedClock,
    /// What an outage breaks: with [`Outage::InventoryOnly`] the suite calls
    /// [`SimulatedProvider::fail_inventory`]; with
    /// [`Outage::WholeConnection`] it severs the [`Severable`].
    pub outage: Outage,
}

impl Default for SimulatedFactory {
    /// [`SimulatedFactory::modelled`].
    fn default() -> Self {
        SimulatedFactory::modelled()
    }
}

impl SimulatedFactory {
    /// Modelled time starting 1,750,000,000 seconds after the Unix epoch
    /// (June 2025); outages of the inventory only.
    pub fn modelled() -> Self {
        SimulatedFactory {
            clock: SimulatedClock::Modelled {
                start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000),
            },
            outage: Outage::InventoryOnly,
        }
    }

    /// The system clock with [`WALL_WINDOWS`]; outages of the whole connection.
    pub fn wall() -> Self {
        SimulatedFactory {
            clock: SimulatedClock::Wall(WALL_WINDOWS),
            outage: Outage::WholeConnection,
        }
    }

    /// Starts (`down`) or ends an outage of `provider`, of the kind
    /// [`SimulatedFactory::outage`] says: what
    /// [`set_outage`](ProviderFactory::set_outage) does, for a factory that
    /// wraps this one.
    pub fn apply_outage(&self, provider: &Severable, down: bool) {
        match self.outage {
            Outage::InventoryOnly => provider
                .provider()
                .fail_inventory(down.then(|| Error::inventory_unavailable(INVENTORY_OUTAGE))),
            Outage::WholeConnection => provider.sever(down),
        }
    }

    /// Arms a fault in the middle of `provider`'s next call, as
    /// [`lose_answer`](ProviderFactory::lose_answer) does, for a factory that
    /// wraps this one: [`Severable::lose_answer`]. Only a factory whose
    /// outages cut the whole connection loses answers; any other answers an
    /// error.
    pub fn arm_lost_answer(&self, provider: &Severable, after: u32) -> Result<(), FixtureError> {
        match self.outage {
            Outage::WholeConnection => {
                provider.lose_answer(after);
                Ok(())
            }
            Outage::InventoryOnly => Err(
                "billet-simulated: a factory whose outages break only the inventory loses no answers mid-call"
                    .into(),
            ),
        }
    }

    /// The same factory with outages that break `outage`.
    #[must_use]
    pub fn with_outage(mut self, outage: Outage) -> Self {
        self.outage = outage;
        self
    }
}

#[async_trait]
impl ProviderFactory for SimulatedFactory {
    type Provider = Severable;

    /// No boundary, authoritative, non-empty names; the commands are the
    /// forms [`parse_run_for`](crate::parse_run_for) refuses: no duration, a
    /// malformed one, an overflowing one. Outages as [`SimulatedFactory::outage`];
    /// mid-call faults with whole-connection outages (H11).
    fn policies(&self) -> Policies {
        Policies {
            invalid_commands: &[
                &[],
                &["sleep", "90"],
                &["billet-simulated", "run-for"],
                &["billet-simulated", "run-for", "90"],
                &["billet-simulated", "run-for", "1.5m"],
                &["billet-simulated", "run-for", "18446744073709551616s"],
                &["billet-simulated", "run-for", "90s", "extra"],
            ],
            outage: self.outage,
            mid_call: self.outage == Outage::WholeConnection,
            ..Policies::STRICT
        }
    }

    async fn build(&self) -> Result<Fixture<Severable>, FixtureError> {
        let host = Host::new();
        let (clock, timing) = match self.clock {
            SimulatedClock::Modelled { start } => {
                let clock = ManualClock::new(start);
                (Some(clock.clone()), Timing::Modelled(clock))
            }
            SimulatedClock::Wall(windows) => (None, Timing::Wall(windows)),
        };
        let deployment = |owner: &str| -> Result<Deployment<Severable>, Error> {
            let mut builder = SimulatedProvider::builder(owner).host(host.clone());
            if let Some(clock) = &clock {
                builder = builder.clock(Arc::new(clock.clone()));
            }
            Ok(Deployment {
                owner: owner.to_owned(),
                provider: Severable::new(builder.build()?),
            })
        };
        Ok(Fixture {
            blue: deployment("blue")?,
            green: deployment("green")?,
            timing,
        })
    }

    async fn set_outage(
        &self,
        deployment: &Deployment<Severable>,
        down: bool,
    ) -> Result<(), FixtureError> {
        self.apply_outage(&deployment.provider, down);
        Ok(())
    }

    async fn lose_answer(
        &self,
        deployment: &Deployment<Severable>,
        after: u32,
    ) -> Result<(), FixtureError> {
        self.arm_lost_answer(&deployment.provider, after)
    }

    /// A second [`Severable`] provider for `blue`'s owner over the fixture's
    /// host and clock: two processes of one deployment (H12).
    async fn second(
        &self,
        fixture: &Fixture<Severable>,
    ) -> Result<Option<Severable>, FixtureError> {
        let blue = fixture.blue.provider.provider();
        let mut builder = SimulatedProvider::builder(blue.owner()).host(blue.host().clone());
        if let Timing::Modelled(clock) = &fixture.timing {
            builder = builder.clock(Arc::new(clock.clone()));
        }
        Ok(Some(Severable::new(builder.build()?)))
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        run_for(run_time)
    }

    fn command_writing(&self, run_time: Duration, bytes: u64) -> Option<Vec<String>> {
        Some(crate::run_for_writing(run_time, bytes))
    }
}

/// A [`SimulatedProvider`] behind a connection a test can cut: how the
/// simulated backend has an outage of its whole connection (H8).
///
/// While severed, `launch` and `destroy` answer [`Error::Unavailable`] and
/// change nothing, `list` and `find` answer [`Error::InventoryUnavailable`],
/// and `kind` and `accepts` answer as ever (they need no host). Once
/// restored, every call reaches the provider again, whose host kept every
/// instance as it was.
///
/// It can also fail in the middle of a call (H11, [`Severable::lose_answer`]).
/// Each call that needs the host is one exchange with it (the request and its
/// answer), so a fault armed to let `after` exchanges through either loses the
/// answer of the call it meets (`after == 0`: the call is applied to the host,
/// then answered as if severed) or lets the call complete (`after >= 1`); the
/// connection is severed after that call either way.
#[derive(Debug)]
pub struct Severable {
    provider: SimulatedProvider,
    severed: AtomicBool,
    /// A mid-call fault armed for the next call (the exchanges it lets
    /// through), and how many times the connection was restored: a call that
    /// met the fault severs the connection only if it was not restored while
    /// the call ran (H12: calls overlap the suite's faults).
    armed: Mutex<(Option<u32>, u64)>,
}

impl Severable {
    /// `provider`, connected.
    pub fn new(provider: SimulatedProvider) -> Self {
        Severable {
            provider,
            severed: AtomicBool::new(false),
            armed: Mutex::new((None, 0)),
        }
    }

    /// The provider behind the connection (reachable even while severed).
    pub fn provider(&self) -> &SimulatedProvider {
        &self.provider
    }

    /// Cuts the connection (`true`) or restores it (`false`). Restoring it
    /// also disarms a mid-call fault no call has met yet.
    pub fn sever(&self, severed: bool) {
        let mut armed = self.armed.lock();
        if !severed {
            *armed = (None, armed.1.wrapping_add(1));
        }
        self.severed.store(severed, Ordering::SeqCst);
    }

    /// Arms a fault in the middle of the next call that needs the host (H11):
    /// it lets `after` exchanges through, delivers the next request and loses
    /// its answer, then severs the connection until [`sever(false)`](Self::sever).
    /// A call is one exchange here, so with `after == 0` that call is applied
    /// to the host and answered [`Error::Unavailable`] (`launch`, `destroy`)
    /// or [`Error::InventoryUnavailable`] (`list`, `find`); with `after >= 1`
    /// it completes and the connection is severed after it. A call made while
    /// severed meets the fault too, and fails as severed.
    pub fn lose_answer(&self, after: u32) {
        self.armed.lock().0 = Some(after);
    }

    /// Makes one call that needs the host: refused while severed; otherwise
    /// applied, then its answer lost or kept as an armed fault says.
    async fn exchange<T>(
        &self,
        inventory: bool,
        call: impl Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let (armed, restored) = {
            let mut armed = self.armed.lock();
            (armed.0.take(), armed.1)
        };
        self.connected(inventory)?;
        let answer = call.await;
        match armed {
            None => answer,
            Some(after) => {
                {
                    let armed = self.armed.lock();
                    if armed.1 == restored {
                        self.severed.store(true, Ordering::SeqCst);
                    }
                }
                match (after, inventory) {
                    (0, true) => Err(Error::inventory_unavailable(LOST)),
                    (0, false) => Err(Error::unavailable(LOST)),
                    _ => answer,
                }
            }
        }
    }

    /// Whether the connection is cut.
    pub fn is_severed(&self) -> bool {
        self.severed.load(Ordering::SeqCst)
    }

    fn connected(&self, inventory: bool) -> Result<(), Error> {
        match (self.is_severed(), inventory) {
            (false, _) => Ok(()),
            (true, true) => Err(Error::inventory_unavailable(CUT)),
            (true, false) => Err(Error::unavailable(CUT)),
        }
    }
}

#[async_trait]
impl Provider for Severable {
    fn kind(&self) -> ProviderKind {
        self.provider.kind()
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        self.provider.accepts(trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        self.exchange(false, self.provider.launch(spec)).await
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        self.exchange(true, self.provider.find(name)).await
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        self.exchange(true, self.provider.list()).await
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        self.exchange(false, self.provider.destroy(id)).await
    }

    fn output(&self) -> Option<&dyn Output> {
        Some(self)
    }

    fn hints(&self) -> Option<&dyn Hints> {
        Some(self)
    }
}

/// A severed connection reads no output: the read answers
/// [`Error::Unavailable`], as a daemon out of reach would.
#[async_trait]
impl Output for Severable {
    async fn read(&self, id: &InstanceId, from: u64) -> Result<OutputStream, Error> {
        self.connected(false)?;
        Output::read(&self.provider, id, from).await
    }
}

/// Hints come from the host whatever the connection does: they only say
/// where to look.
impl Hints for Severable {
    fn subscribe(&self) -> HintStream {
        Hints::subscribe(&self.provider)
    }
}
