//! The conformance suite of the provider contract (H1, H7-H9, H11): property
//! tests any compute backend runs from its own tests.
//!
//! This crate depends on the contract (`billet-provider`), the clock
//! (`billet-clock`), proptest and tokio, and on no backend, so a backend's
//! `[dev-dependencies]` take it without pulling in any other backend (H9).
//!
//! A `proptest-state-machine` reference model of the
//! [`Provider`](billet_provider::Provider) contract drives random sequences of
//! calls over two deployments on one host:
//!
//! * `launch` of valid and invalid specs: every trust class, empty names,
//!   duplicate names, names that differ only by case or spaces, commands that
//!   name no run time or a bad one (the backend's
//!   [`Policies::invalid_commands`]);
//! * `find` of exact and near-miss names, and `list`;
//! * `destroy` of the caller's own ids, the other deployment's, ids already
//!   destroyed, ids never issued and near misses of issued ones;
//! * `accepts` of every trust class;
//! * outages started and ended ([`ProviderFactory::set_outage`]): of the
//!   inventory only, or of the provider's whole connection to its daemon
//!   ([`Policies::outage`], H8);
//! * for a fixture that declares them ([`Policies::mid_call`], H11), faults
//!   in the middle of a `launch` or a `destroy`
//!   ([`ProviderFactory::lose_answer`]): the request reaches the daemon, its
//!   answer is lost, and the connection stays down until the suite ends that
//!   outage;
//! * clock moves, small ones and ones that land on, just before or just after
//!   an instance's stop time.
//!
//! Every answer is checked against the model: error kinds and the data they
//! carry (never messages), `list` as a set, `find` results, `Teardown` values,
//! and each instance's state. After every step each readable inventory is
//! compared with the model, so a refusal that recorded something, or an
//! outage that lost or invented an instance, is caught at once. A failure
//! shrinks to a short sequence of steps, which [`ContractFailure`] prints:
//! proptest's shrinking, then the suite's own pass, which deletes every step
//! (and every outage, its start and end together) the failure does not need,
//! and turns a call that loses its answer into the plain call where the
//! failure does not need the fault.
//!
//! # Concurrent callers (H12)
//!
//! [`check_concurrent`] runs 2 to 4 tasks that call a fixture's providers at
//! once (launch, destroy, find and list over a few shared names per
//! deployment, through `blue`, `green` and the second provider object of
//! `blue` that [`ProviderFactory::second`] gives, if it gives one), records
//! each call's invocation and answer in one global order, and checks each
//! (deployment, name)'s history for linearizability against the contract
//! taken sequentially, with `todc-utils`' Wing-Gong-Lowe checker. Time does
//! not move in this mode (every command runs for `Duration::MAX`); each name's
//! history is checked on its own, then each deployment's taken whole (a list
//! sees all its names at one instant). Outages (H8) and, for a fixture that declares
//! [`Policies::mid_call`], answers lost mid-call (H11) are made while the
//! tasks call ([`ConcurrentConfig::faults`]): the specification then holds
//! every world such a fault leaves (a call cut short happened or not, an
//! instance only a lost launch made may vanish until seen `Running`). A
//! failure answers the smallest failing history found
//! ([`ConcurrentFailure`]), one line per call and per fault around them:
//!
//! ```text
//! H12: the calls about name "h12-1" of deployment Blue are not linearizable (seed 17); smallest history (3 calls, [invoked..answered] in one global order):
//!   task 0 via Blue: launch("h12-1") [0..1] -> Ok(toy-1)
//!   task 0 via Blue: destroy(toy-1) [of "h12-1"] [12..14] -> Ok(Stopped)
//!   task 1 via Blue2: destroy(toy-1) [of "h12-1"] [13..15] -> Ok(Stopped)
//! ```
//!
//! and, for a provider that records a launch made while its connection is
//! cut:
//!
//! ```text
//! H12: the calls about name "h12-0" of deployment Green are not linearizable (seed 20); smallest history (3 calls, [invoked..answered] in one global order):
//!   fault of Green: an outage [42..43], restored [55..56]
//!   task 1 via Green: launch("h12-0") [44..45] -> Err(Unavailable)
//!   task 1 via Green: launch("h12-0") [66..67] -> Err(Conflict)
//! ```
//!
//! # Faults in the middle of a call (H11)
//!
//! A fixture whose connection can fail after the daemon received a request
//! and before the caller got the answer declares [`Policies::mid_call`] (with
//! [`Outage::WholeConnection`]) and implements
//! [`ProviderFactory::lose_answer`]. The suite then arms such a fault, with
//! 0 to 3 exchanges let through first, right before some `launch` and
//! `destroy` calls. The call must answer its normal answer (the fault fell
//! after its last exchange) or an error an outage allows (`Unavailable`,
//! `InventoryUnavailable`); the connection is then down, as in a
//! whole-connection outage, until the suite ends it. For a call answered
//! with an error the model holds both worlds, it happened or it did not,
//! until the deployment's first successful inventory after the outage (the
//! suite reads one right after every step) settles which: a launch happened
//! if that inventory holds a new instance of its name, a destroy if its
//! instance is gone. From then on everything is checked against that world:
//! the inventory is exact for it, then and later (an instance settled as never
//! launched must never appear); an instance the launch left is reported
//! truthfully (its name, owner and kind; under [`Timing::Modelled`] exactly,
//! started at the clock's time at the call; under [`Timing::Wall`] started
//! within the call's window and never `Pending` later than the declared
//! `pending` window after the outage ended), holds its name (a relaunch
//! answers `Conflict`) and can be destroyed.
//!
//! A backend whose connection runs through a proxy the test controls (as a
//! docker backend's does) arms the proxy in `lose_answer`: forward `after`
//! exchanges, forward the next request and drop its answer, then refuse every
//! connection until `set_outage(deployment, false)`:
//!
//! ```no_run
//! # use std::time::Duration;
//! # use billet_conformance::{Deployment, Fixture, FixtureError, Outage, Policies, ProviderFactory, async_trait};
//! # use billet_provider::{Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass};
//! # #[derive(Debug)]
//! # struct ProxiedProvider;
//! # impl ProxiedProvider {
//! #     async fn cut(&self, _down: bool) -> Result<(), std::io::Error> { Ok(()) }
//! #     async fn drop_answer_after(&self, _exchanges: u32) -> Result<(), std::io::Error> { Ok(()) }
//! # }
//! # #[async_trait]
//! # impl Provider for ProxiedProvider {
//! #     fn kind(&self) -> ProviderKind { ProviderKind::Docker }
//! #     fn accepts(&self, _: TrustClass) -> Result<(), Error> { Ok(()) }
//! #     async fn launch(&self, _: Spec) -> Result<Instance, Error> { Err(Error::invalid_spec("stub")) }
//! #     async fn find(&self, _: &str) -> Result<Option<Instance>, Error> { Ok(None) }
//! #     async fn list(&self) -> Result<Vec<Instance>, Error> { Ok(Vec::new()) }
//! #     async fn destroy(&self, _: &InstanceId) -> Result<Teardown, Error> { Ok(Teardown::Absent) }
//! # }
//! struct Proxied;
//!
//! #[async_trait]
//! impl ProviderFactory for Proxied {
//!     type Provider = ProxiedProvider;
//!
//!     fn policies(&self) -> Policies {
//!         Policies { outage: Outage::WholeConnection, mid_call: true, ..Policies::STRICT }
//!     }
//!
//!     async fn lose_answer(
//!         &self,
//!         deployment: &Deployment<ProxiedProvider>,
//!         after: u32,
//!     ) -> Result<(), FixtureError> {
//!         // The proxy forwards `after` requests and their responses, forwards
//!         // the next request, drops its response, and refuses every
//!         // connection from then on, until `set_outage(deployment, false)`.
//!         Ok(deployment.provider.drop_answer_after(after).await?)
//!     }
//!
//!     async fn set_outage(
//!         &self,
//!         deployment: &Deployment<ProxiedProvider>,
//!         down: bool,
//!     ) -> Result<(), FixtureError> {
//!         // Ending an outage also ends the one a lost answer left.
//!         Ok(deployment.provider.cut(down).await?)
//!     }
//! #   async fn build(&self) -> Result<Fixture<ProxiedProvider>, FixtureError> { unimplemented!() }
//! #   fn command(&self, _: Duration) -> Vec<String> { Vec::new() }
//! }
//! ```
//!
//! # Two ways to tell time (H7)
//!
//! A fixture says how its providers tell time ([`Timing`]):
//!
//! * [`Timing::Modelled`]: both providers read a
//!   [`ManualClock`](billet_clock::ManualClock) the suite moves. States are
//!   exact at every instant (`Running` while `now < started_at + run time`,
//!   `Stopped { exit_code: 0 }` from then on) and `started_at` is the clock's
//!   time at launch.
//! * [`Timing::Wall`]: real time. The backend declares its [`WallWindows`]:
//!   how long an instance may stay `Pending` after `launch` returns, and the
//!   window around `started_at + run time` inside which `Running` and
//!   `Stopped { exit_code: 0 }` are both right; outside them a state is exact.
//!   A clock move sleeps for real; run times and moves are drawn as multiples
//!   of the windows, so a case takes seconds. The backend's own `started_at`
//!   is each instance's origin, checked against the wall clock around the
//!   launch call.
//!
//! # Running the suite against a backend
//!
//! A backend implements [`ProviderFactory`] (two providers over one host, how
//! they tell time, a way to start and end an outage, and the command that runs
//! for a given time), then calls [`assert_contract`] from a test.
//!
//! A new backend starts in modelled time: its providers read their time
//! from a [`Clock`](billet_clock::Clock), the factory hands both the same
//! [`ManualClock`](billet_clock::ManualClock) and declares
//! [`Timing::Modelled`], and the suite moves that clock, so a run of
//! thousands of steps takes seconds and every state is checked exactly. An
//! in-memory backend (here `ToyProvider`, its host shared by both
//! deployments, its outage a switch):
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::{Duration, SystemTime};
//!
//! use billet_clock::{Clock, ManualClock};
//! use billet_conformance::{
//!     ContractConfig, Deployment, Fixture, FixtureError, Policies, ProviderFactory, Timing,
//!     assert_contract, async_trait,
//! };
//! # use billet_provider::{Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass};
//! # #[derive(Debug, Clone, Default)]
//! # struct ToyHost;
//! # #[derive(Debug)]
//! # struct ToyProvider;
//! # impl ToyProvider {
//! #     fn new(_owner: &str, _host: ToyHost, _clock: Arc<dyn Clock>) -> Result<Self, Error> { Ok(ToyProvider) }
//! #     fn set_inventory_down(&self, _down: bool) {}
//! # }
//! # #[async_trait]
//! # impl Provider for ToyProvider {
//! #     fn kind(&self) -> ProviderKind { ProviderKind::Simulated }
//! #     fn accepts(&self, _: TrustClass) -> Result<(), Error> { Ok(()) }
//! #     async fn launch(&self, _: Spec) -> Result<Instance, Error> { Err(Error::invalid_spec("stub")) }
//! #     async fn find(&self, _: &str) -> Result<Option<Instance>, Error> { Ok(None) }
//! #     async fn list(&self) -> Result<Vec<Instance>, Error> { Ok(Vec::new()) }
//! #     async fn destroy(&self, _: &InstanceId) -> Result<Teardown, Error> { Ok(Teardown::Absent) }
//! # }
//!
//! struct ToyBackend;
//!
//! #[async_trait]
//! impl ProviderFactory for ToyBackend {
//!     type Provider = ToyProvider;
//!
//!     // An outage breaks only the inventory (Outage::InventoryOnly).
//!     fn policies(&self) -> Policies {
//!         Policies::STRICT
//!     }
//!
//!     async fn build(&self) -> Result<Fixture<ToyProvider>, FixtureError> {
//!         // A fresh, empty host and clock for every fixture; both
//!         // deployments share them.
//!         let host = ToyHost::default();
//!         let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000));
//!         let deployment = |owner: &str| -> Result<_, FixtureError> {
//!             let provider = ToyProvider::new(owner, host.clone(), Arc::new(clock.clone()))?;
//!             Ok(Deployment { owner: owner.to_owned(), provider })
//!         };
//!         Ok(Fixture {
//!             blue: deployment("blue")?,
//!             green: deployment("green")?,
//!             timing: Timing::Modelled(clock),
//!         })
//!     }
//!
//!     async fn set_outage(
//!         &self,
//!         deployment: &Deployment<ToyProvider>,
//!         down: bool,
//!     ) -> Result<(), FixtureError> {
//!         deployment.provider.set_inventory_down(down);
//!         Ok(())
//!     }
//!
//!     // The command a spec carries to run for `run_time` of modelled time;
//!     // the suite's run times go up to Duration::MAX (an instance that
//!     // never ends), which the backend must take without overflowing.
//!     fn command(&self, run_time: Duration) -> Vec<String> {
//!         vec!["run-for".to_owned(), format!("{}ns", run_time.as_nanos())]
//!     }
//! }
//!
//! // H1: the backend keeps the provider contract (256 cases by default).
//! let summary = assert_contract(&ToyBackend, ContractConfig::default());
//! println!("{summary}");
//! ```
//!
//! A backend over a real daemon runs the suite in wall time ([`Timing::Wall`],
//! below) and may declare whole-connection outages:
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use billet_conformance::{
//!     ContractConfig, Deployment, Fixture, FixtureError, Outage, Policies, ProviderFactory,
//!     Timing, WallWindows, assert_contract, async_trait,
//! };
//! # use billet_provider::{Error, Instance, InstanceId, Provider, ProviderKind, Spec, Teardown, TrustClass};
//! # #[derive(Debug)]
//! # struct MyProvider;
//! # impl MyProvider {
//! #     async fn connect(_owner: &str) -> Result<Self, Error> { Ok(MyProvider) }
//! #     async fn cut(&self, _down: bool) -> Result<(), std::io::Error> { Ok(()) }
//! # }
//! # #[async_trait]
//! # impl Provider for MyProvider {
//! #     fn kind(&self) -> ProviderKind { ProviderKind::Docker }
//! #     fn accepts(&self, _: TrustClass) -> Result<(), Error> { Ok(()) }
//! #     async fn launch(&self, _: Spec) -> Result<Instance, Error> { Err(Error::invalid_spec("stub")) }
//! #     async fn find(&self, _: &str) -> Result<Option<Instance>, Error> { Ok(None) }
//! #     async fn list(&self) -> Result<Vec<Instance>, Error> { Ok(Vec::new()) }
//! #     async fn destroy(&self, _: &InstanceId) -> Result<Teardown, Error> { Ok(Teardown::Absent) }
//! # }
//!
//! struct MyBackend;
//!
//! #[async_trait]
//! impl ProviderFactory for MyBackend {
//!     type Provider = MyProvider;
//!
//!     fn policies(&self) -> Policies {
//!         Policies { outage: Outage::WholeConnection, ..Policies::STRICT }
//!     }
//!
//!     async fn build(&self) -> Result<Fixture<MyProvider>, FixtureError> {
//!         let deployment = async |owner: &str| -> Result<_, FixtureError> {
//!             let provider = MyProvider::connect(owner).await?;
//!             Ok(Deployment { owner: owner.to_owned(), provider })
//!         };
//!         Ok(Fixture {
//!             blue: deployment("blue").await?,
//!             green: deployment("green").await?,
//!             timing: Timing::Wall(WallWindows {
//!                 pending: Duration::from_secs(1),
//!                 around_end: Duration::from_secs(1),
//!             }),
//!         })
//!     }
//!
//!     async fn set_outage(
//!         &self,
//!         deployment: &Deployment<MyProvider>,
//!         down: bool,
//!     ) -> Result<(), FixtureError> {
//!         Ok(deployment.provider.cut(down).await?)
//!     }
//!
//!     fn command(&self, run_time: Duration) -> Vec<String> {
//!         vec!["sleep".to_owned(), format!("{}", run_time.as_secs_f64())]
//!     }
//! }
//!
//! // H1, H7, H8: the backend keeps the provider contract in real time.
//! let summary = assert_contract(&MyBackend, ContractConfig::wall(4));
//! println!("{} cases, {} steps in {:?}", summary.cases, summary.steps, summary.wall_time);
//! ```
//!
//! The simulated backend's factory, `billet_simulated::SimulatedFactory`,
//! lives beside that backend. [`check_contract`] answers the failure instead
//! of panicking, so a test can also assert that a broken backend is caught.
//!
//! # Seeds, replays and panics
//!
//! Every run draws its cases from one seed ([`ContractConfig::seed`]; by
//! default `PROPTEST_RNG_SEED`, else `BILLET_CONFORMANCE_SEED`, else a fresh
//! random one), and a failure prints it. Running again with
//! `BILLET_CONFORMANCE_SEED=<seed>` (or [`ContractConfig::with_seed`]) draws
//! the same cases and, for a backend that answers deterministically, shrinks
//! to the same sequence. This stands in for proptest's failure persistence
//! files, which the suite does not write.
//!
//! The sequence a failure prints is a regression test as it stands: paste
//! its lines into [`replay`], which reads them back and runs them on a fresh
//! fixture:
//!
//! ```
//! use billet_conformance::{ProviderFactory, replay};
//!
//! // H1: the sequence a failure printed, kept once the backend is fixed.
//! fn a_list_keeps_every_instance<F: ProviderFactory>(factory: &F) {
//!     let steps = r#"
//!        1. blue: launch "job-a" (trusted, runs for 60s)
//!        2. blue: launch "job-b" (trusted, runs for 60s)
//!        3. blue: launch "job-c" (trusted, runs for 60s)
//!     "#;
//!     if let Err(failure) = replay(factory, steps) {
//!         panic!("{failure}");
//!     }
//! }
//! ```
//!
//! A panic in the backend (or in a factory hook) is a failure like any
//! other: it shrinks, and its reason names the step and gives the panic's
//! message once ([`check_contract`] says how the panic hook is kept quiet).
//! Every report prints instance ids one way, as their `Display` (`sim-1`).
//!
//! # How much it runs
//!
//! [`ContractConfig::default`] runs proptest's default number of cases, 256
//! unless `PROPTEST_CASES` says otherwise, each a sequence of 40 to 88 steps
//! (64 on average): at least 10,240 steps a run, about 16,400 on average.
//! `PROPTEST_RNG_SEED` or `BILLET_CONFORMANCE_SEED` fixes the seed. [`ContractConfig::wall`] runs the
//! cases a real-time backend asks for, each of 16 to 32 steps.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod capabilities;
mod concurrent;
mod factory;
mod model;
mod sequential;

pub use async_trait::async_trait;
pub use capabilities::{CAPABILITY_WAIT, CapabilityFailure, CapabilityReport, check_capabilities};
#[doc(hidden)]
pub use concurrent::synthetic as concurrent_synthetic;
pub use concurrent::{
    ConcurrentConfig, ConcurrentFailure, ConcurrentSummary, assert_concurrent, check_concurrent,
};
pub use factory::{
    Deployment, Fixture, FixtureError, Outage, Policies, ProviderFactory, Timing, WallWindows,
    non_empty,
};

pub use sequential::{
    ContractConfig, ContractFailure, ContractSummary, SEED_VARIABLE, assert_contract,
    check_contract, replay,
};
