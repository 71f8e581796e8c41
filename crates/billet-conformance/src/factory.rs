//! [`ProviderFactory`], [`Fixture`], [`Timing`] and [`Policies`]: what a
//! backend hands the contract suite.

use std::time::Duration;

use async_trait::async_trait;
use billet_clock::ManualClock;
use billet_provider::{Provider, Teardown};

/// Why a factory could not build, cut, restore or clean up a fixture: any
/// error of the backend's own (a provider error, an I/O error of a proxy).
///
/// A `FixtureError` is not a contract violation; the suite reports it as a
/// fixture the backend could not provide.
pub type FixtureError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Builds fresh fixtures for the contract suite: everything the suite needs
/// from one backend.
///
/// Implement it with [`macro@async_trait`] (re-exported by this crate). The
/// crate's docs show a whole factory in modelled time (a
/// [`ManualClock`] both providers read, the one a new backend starts from)
/// and one in wall time (a backend over a real daemon).
///
/// # Where it runs
///
/// Every method runs inside the suite's tokio runtime (current-thread, its
/// I/O and time drivers enabled), so a backend may spawn tasks, connect to a
/// daemon or await there; every call of the providers is driven by the same
/// runtime, and one case's runtime is shut down after its
/// [`teardown`](ProviderFactory::teardown).
///
/// # `build`
///
/// Called once per test case, once per shrinking attempt, and once before the
/// run to read the fixture's [`Timing`] (the suite scales its run times to the
/// windows it declares, and then requires every fixture to declare the same).
/// Every fixture must start empty: two deployments that hold nothing, over one
/// host that holds nothing of theirs.
///
/// # `set_outage`
///
/// Starts (`down == true`) or ends an outage of one deployment. What an outage
/// breaks is the backend's [`Policies::outage`]; the suite never ends an
/// outage that is off, never starts one that is already on except right after
/// a call that was to lose its answer (below), and ends every outage it
/// started before [`teardown`](ProviderFactory::teardown).
///
/// # `lose_answer` (H11)
///
/// Only for a fixture whose [`Policies::mid_call`] is `true`: arms a fault in
/// the middle of a deployment's next call, which the suite then makes (a
/// `launch` or a `destroy`). The connection is down after it until the suite
/// ends that outage with `set_outage(deployment, false)`. When that call has
/// returned, the suite calls `set_outage(deployment, true)`, whether or not
/// the call reached the fault (a proxy cannot tell where a call ends, so a
/// call that needed fewer exchanges than the fault let through would leave
/// the fault armed for the next one): a fixture must take it while its
/// connection is already down from the fault.
///
/// # `teardown`
///
/// Called once after every case (and every shrinking attempt) that built a
/// fixture, whether the case passed or failed, with every outage ended: the
/// place where a real backend removes what the case left on its daemon. An
/// error here fails the run. (A provider that panics ends its case without a
/// teardown: the panic is the failure reported.)
#[async_trait]
pub trait ProviderFactory: Send + Sync {
    /// The provider under test.
    type Provider: Provider;

    /// What this backend chose where the contract leaves a choice. The
    /// reference model reads it to know which answer is right. Must answer
    /// the same every time it is asked.
    fn policies(&self) -> Policies;

    /// A fresh, empty fixture: two providers for two distinct deployments
    /// over one shared host, and how they tell time.
    async fn build(&self) -> Result<Fixture<Self::Provider>, FixtureError>;

    /// Starts (`down`) or ends (`!down`) an outage of `deployment`'s provider,
    /// and of no other.
    ///
    /// With [`Outage::InventoryOnly`], while it lasts `list` and `find` of that
    /// provider must answer [`Error::InventoryUnavailable`]; `launch` and
    /// `destroy` must work as before (the simulated backend has
    /// `fail_inventory` for this). With [`Outage::WholeConnection`] the
    /// provider's connection to its daemon is gone: `list` and `find` answer
    /// `InventoryUnavailable`, `launch` and `destroy` answer an error
    /// ([`Error::Unavailable`] or `InventoryUnavailable`) and record or remove
    /// nothing, and `kind` and `accepts` still answer. Either way, once it
    /// ends, the provider answers the exact inventory again.
    ///
    /// In the concurrent mode ([`check_concurrent`](crate::check_concurrent)
    /// with faults) calls are under way when an outage starts or ends. A call
    /// the start cuts short may still have reached the daemon; the suite
    /// allows its effect until `set_outage(deployment, false)` has returned,
    /// so a fixture whose daemon may still be at work on a request whose
    /// caller saw the connection break (a proxy that forwarded it) returns
    /// from `set_outage(deployment, false)` only once the daemon has answered
    /// every such request. An outage of `blue` may cut the
    /// [`second`](ProviderFactory::second) provider object too, or not.
    ///
    /// [`Error::InventoryUnavailable`]: billet_provider::Error::InventoryUnavailable
    /// [`Error::Unavailable`]: billet_provider::Error::Unavailable
    async fn set_outage(
        &self,
        deployment: &Deployment<Self::Provider>,
        down: bool,
    ) -> Result<(), FixtureError>;

    /// Arms a fault in the middle of `deployment`'s provider's next call (H11):
    /// the backend lets that call's first `after` exchanges with its daemon
    /// (requests and their answers) through, delivers the next request to the
    /// daemon and loses its answer; from then on the connection is down
    /// exactly as under `set_outage(deployment, true)`
    /// ([`Outage::WholeConnection`]) until the suite calls
    /// `set_outage(deployment, false)`. If the call needs fewer exchanges than
    /// `after + 1`, it completes, and the suite starts the outage with
    /// `set_outage(deployment, true)` as soon as it has returned.
    ///
    /// An exchange is one request the provider sends its daemon and the answer
    /// to it, counted as the backend's connection sees them: for a backend
    /// whose connection runs through a proxy the test controls, one request
    /// the proxy forwards and the response it forwards back. Such a backend
    /// arms its proxy here to forward `after` exchanges, then forward the next
    /// request and drop its answer (or cut the connection after part of it),
    /// and then to refuse every connection, as `set_outage(deployment, true)`
    /// would, until `set_outage(deployment, false)`, which also disarms a
    /// fault no call has reached yet.
    ///
    /// The suite calls it only when [`Policies::mid_call`] is `true` (which
    /// requires [`Policies::outage`] to be [`Outage::WholeConnection`]), only
    /// while `deployment` is in no outage, and right before the call it
    /// concerns. That call must then answer an error an outage allows
    /// ([`Error::Unavailable`] or [`Error::InventoryUnavailable`]), or, when
    /// the fault fell after its last exchange, its normal answer. The suite
    /// holds both worlds, the call happened or it did not, until the
    /// deployment's first successful inventory after the outage (read right
    /// after `set_outage(deployment, false)`) settles which, and checks
    /// everything after against that world: an instance that inventory shows
    /// must be reported from then on as any other (truthfully, never `Pending`
    /// past [`WallWindows::pending`] after the outage ended, holding its name,
    /// destroyable), and one it does not show must never appear. A backend
    /// that cleans up what a lost call left must have done so by that first
    /// inventory.
    ///
    /// In the concurrent mode the "next call" is whichever call of any task
    /// reaches the connection first, through any provider object that shares
    /// it; the suite then calls `set_outage(deployment, true)` after a few
    /// calls whether or not the fault was met, and `set_outage(deployment,
    /// false)` later, as for an outage.
    ///
    /// The default answers an error: the fixture makes no mid-call faults.
    ///
    /// [`Error::InventoryUnavailable`]: billet_provider::Error::InventoryUnavailable
    /// [`Error::Unavailable`]: billet_provider::Error::Unavailable
    async fn lose_answer(
        &self,
        deployment: &Deployment<Self::Provider>,
        after: u32,
    ) -> Result<(), FixtureError> {
        let _ = after;
        Err(format!(
            "the fixture makes no mid-call faults (ProviderFactory::lose_answer is not implemented), asked for {:?}",
            deployment.owner
        )
        .into())
    }

    /// Another provider object for `fixture`'s `blue` deployment (the same
    /// owner) over the same host or daemon, as a second process of one
    /// scheduler would build: used by the concurrent mode (H12,
    /// [`check_concurrent`](crate::check_concurrent)), which calls both
    /// providers at once and expects them to agree on every answer. It must
    /// tell time as the fixture does. The default answers `None`: the
    /// concurrent mode then calls one provider object per deployment.
    async fn second(
        &self,
        fixture: &Fixture<Self::Provider>,
    ) -> Result<Option<Self::Provider>, FixtureError> {
        let _ = fixture;
        Ok(None)
    }

    /// A command that runs for `run_time` and then exits with code 0: exactly,
    /// by the fixture's [`ManualClock`] under [`Timing::Modelled`]; within the
    /// declared [`WallWindows`] under [`Timing::Wall`]. `Duration::MAX` is a
    /// command that does not stop while the case runs.
    fn command(&self, run_time: Duration) -> Vec<String>;

    /// A command that runs for `run_time` (as [`command`](Self::command)
    /// does) and writes exactly `bytes` bytes of output in all, stdout and
    /// stderr together, every one of them before it stops: for the output
    /// checks of [`check_capabilities`](crate::check_capabilities) (P9).
    /// `None`, the default, for a backend that keeps no output.
    fn command_writing(&self, run_time: Duration, bytes: u64) -> Option<Vec<String>> {
        let _ = (run_time, bytes);
        None
    }

    /// The image every launched spec names. Empty unless overridden.
    fn image(&self) -> String {
        String::new()
    }

    /// Cleans up after one case: removes whatever the case left behind. Does
    /// nothing unless overridden.
    async fn teardown(&self, fixture: &Fixture<Self::Provider>) -> Result<(), FixtureError> {
        let _ = fixture;
        Ok(())
    }
}

/// Two deployments over one host, and how their providers tell time.
///
/// Build one in [`ProviderFactory::build`].
#[derive(Debug)]
pub struct Fixture<P> {
    /// The first deployment.
    pub blue: Deployment<P>,
    /// The second deployment: another owner over the same host as `blue`.
    pub green: Deployment<P>,
    /// The time both providers tell.
    pub timing: Timing,
}

impl<P> Fixture<P> {
    /// The same fixture with each provider replaced by `wrap(provider)`:
    /// how a factory for a wrapper backend reuses the factory it wraps.
    pub fn map<Q>(self, mut wrap: impl FnMut(P) -> Q) -> Fixture<Q> {
        Fixture {
            blue: Deployment {
                owner: self.blue.owner,
                provider: wrap(self.blue.provider),
            },
            green: Deployment {
                owner: self.green.owner,
                provider: wrap(self.green.provider),
            },
            timing: self.timing,
        }
    }
}

/// One deployment of a [`Fixture`]: a provider and the owner it writes onto
/// every instance it starts.
#[derive(Debug)]
pub struct Deployment<P> {
    /// The deployment identity the provider was built for. Must differ from
    /// the other deployment's.
    pub owner: String,
    /// The provider built for `owner`.
    pub provider: P,
}

/// How a fixture's providers tell time (H7).
#[derive(Debug, Clone)]
pub enum Timing {
    /// Modelled time: both providers read this [`ManualClock`], and the suite
    /// moves it forward only. States are exact at every instant: `Running`
    /// while `now < started_at + run time`, `Stopped { exit_code: 0 }` from
    /// then on, never `Pending`; `started_at` is the clock's time at launch.
    Modelled(ManualClock),
    /// Real time: nothing can move the backend's clock, so a clock move is a
    /// real sleep, and states are checked against the wall clock within the
    /// declared windows.
    Wall(WallWindows),
}

/// How far a real-time backend's states may lag or lead the exact ones: the
/// windows it declares under [`Timing::Wall`].
///
/// For one instance launched by a call that began at wall time `called` and
/// returned at `returned`, whose answer says it started at `started_at` and
/// whose command runs for `run_time`, the suite accepts:
///
/// * `started_at` within `[called - around_end, returned + pending]`, and the
///   same `started_at` in every later answer about it;
/// * `Pending` until `returned + pending`;
/// * `Running` until `started_at + run_time + around_end`;
/// * `Stopped { exit_code: 0 }` from `started_at + run_time - around_end`;
/// * no other state, and never a state earlier in that order than one
///   already seen.
///
/// An answer counts as given at any instant between the moment its call began
/// and the moment it returned, so a slow call only widens what is accepted.
/// Outside the windows a state must be exact. The suite draws run times and
/// clock moves as multiples of the larger window (at least a millisecond), so
/// tight windows make quick cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallWindows {
    /// How long after `launch` returns an instance may still be `Pending`.
    pub pending: Duration,
    /// Half the width of the window around `started_at + run time` inside which
    /// both `Running` and `Stopped { exit_code: 0 }` are right.
    pub around_end: Duration,
}

impl WallWindows {
    /// The unit the suite scales run times and clock moves by: the larger
    /// window, and at least one millisecond.
    pub fn unit(&self) -> Duration {
        self.pending
            .max(self.around_end)
            .max(Duration::from_millis(1))
    }
}

/// What an outage breaks (H8), as [`ProviderFactory::set_outage`] makes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// Only the inventory: `list` and `find` fail, `launch` and `destroy` go on
    /// (the simulated backend's `fail_inventory`).
    InventoryOnly,
    /// The provider's whole connection to its daemon: every call that needs the
    /// daemon answers an error and changes nothing; `kind` and `accepts` still
    /// answer.
    WholeConnection,
}

/// A backend's choices where the contract allows more than one answer.
///
/// Start from [`Policies::STRICT`] and change what differs:
///
/// ```
/// use billet_conformance::{Outage, Policies};
/// use billet_provider::Teardown;
///
/// const MICROVM: Policies = Policies {
///     isolation: true,
///     unknown_destroy: Teardown::Requested,
///     outage: Outage::WholeConnection,
///     ..Policies::STRICT
/// };
/// assert!(MICROVM.isolation);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Policies {
    /// Whether the backend has an isolation boundary. With one, `accepts`
    /// and `launch` take every trust class; without one (the contract's
    /// default), `Unknown` and `Untrusted` are refused with
    /// [`Error::Refused`](billet_provider::Error::Refused).
    pub isolation: bool,
    /// What `destroy` answers for an id the backend does not hold (never
    /// issued, already destroyed): [`Teardown::Absent`] for a backend that is
    /// authoritative about what it holds, [`Teardown::Requested`] for one that
    /// can only ask. With `Requested`, destroying a held instance may also
    /// answer `Requested` instead of `Stopped`; the suite still expects it gone
    /// from the next inventory.
    pub unknown_destroy: Teardown,
    /// Which names `launch` takes. Every other name must be refused with
    /// [`Error::InvalidSpec`](billet_provider::Error::InvalidSpec). The
    /// contract requires the empty name to be refused; names that differ from
    /// a valid one only by case or spaces are still distinct names.
    pub valid_name: fn(&str) -> bool,
    /// Commands `launch` must refuse with
    /// [`Error::InvalidSpec`](billet_provider::Error::InvalidSpec) (recording
    /// nothing). The suite launches them with valid names and trusted specs.
    /// May be empty for a backend that runs any command.
    pub invalid_commands: &'static [&'static [&'static str]],
    /// What an outage made by [`ProviderFactory::set_outage`] breaks.
    pub outage: Outage,
    /// The fixture can lose an answer mid-call:
    /// [`ProviderFactory::lose_answer`] works (H11). The suite then makes
    /// `launch` and `destroy` calls whose answer is lost after the request
    /// reached the daemon. Requires [`Outage::WholeConnection`], since a lost
    /// answer leaves the connection down as such an outage does:
    /// [`check_contract`](crate::check_contract) refuses to run otherwise.
    pub mid_call: bool,
}

impl Policies {
    /// No isolation boundary, authoritative about what it holds
    /// ([`Teardown::Absent`]), every non-empty name valid, no command known to
    /// be invalid, outages that break only the inventory, no mid-call faults.
    pub const STRICT: Policies = Policies {
        isolation: false,
        unknown_destroy: Teardown::Absent,
        valid_name: non_empty,
        invalid_commands: &[],
        outage: Outage::InventoryOnly,
        mid_call: false,
    };
}

/// Whether `name` is not empty: [`Policies::STRICT`]'s name rule.
pub fn non_empty(name: &str) -> bool {
    !name.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    // H7: the unit wall run times are scaled by is the larger window, and at
    // least a millisecond.
    #[test]
    fn h7_wall_unit_is_the_larger_window_and_at_least_a_millisecond() {
        let windows = |pending, around_end| WallWindows {
            pending: Duration::from_millis(pending),
            around_end: Duration::from_millis(around_end),
        };
        assert_eq!(windows(0, 5).unit(), Duration::from_millis(5));
        assert_eq!(windows(20, 5).unit(), Duration::from_millis(20));
        assert_eq!(windows(0, 0).unit(), Duration::from_millis(1));
        let tiny = WallWindows {
            pending: Duration::from_micros(10),
            around_end: Duration::from_micros(300),
        };
        assert_eq!(tiny.unit(), Duration::from_millis(1));
    }

    // H9: STRICT's name rule takes every non-empty name, spaces included,
    // and refuses only the empty one.
    #[test]
    fn h9_strict_names_are_the_non_empty_ones() {
        assert!(!non_empty(""));
        assert!(non_empty("a"));
        assert!(non_empty(" "));
        assert!(!(Policies::STRICT.valid_name)(""));
        assert!((Policies::STRICT.valid_name)("job-1"));
    }

    // H9: map wraps each deployment's provider, keeping its owner and the
    // fixture's timing.
    #[test]
    fn h9_fixture_map_wraps_each_provider_and_keeps_the_rest() {
        let windows = WallWindows {
            pending: Duration::ZERO,
            around_end: Duration::from_millis(5),
        };
        let fixture = Fixture {
            blue: Deployment {
                owner: "blue".to_owned(),
                provider: 1u32,
            },
            green: Deployment {
                owner: "green".to_owned(),
                provider: 2u32,
            },
            timing: Timing::Wall(windows),
        };
        let mapped = fixture.map(|n| format!("wrapped {n}"));
        assert_eq!(mapped.blue.owner, "blue");
        assert_eq!(mapped.blue.provider, "wrapped 1");
        assert_eq!(mapped.green.owner, "green");
        assert_eq!(mapped.green.provider, "wrapped 2");
        assert!(matches!(mapped.timing, Timing::Wall(w) if w == windows));
    }

    /// A provider that holds nothing: enough to build a factory that keeps
    /// every default of [`ProviderFactory`].
    #[derive(Debug)]
    struct Nothing;

    #[async_trait]
    impl Provider for Nothing {
        fn kind(&self) -> billet_provider::ProviderKind {
            billet_provider::ProviderKind::Simulated
        }

        fn accepts(&self, _: billet_provider::TrustClass) -> Result<(), billet_provider::Error> {
            Ok(())
        }

        async fn launch(
            &self,
            _: billet_provider::Spec,
        ) -> Result<billet_provider::Instance, billet_provider::Error> {
            Err(billet_provider::Error::unavailable("holds nothing"))
        }

        async fn find(
            &self,
            _: &str,
        ) -> Result<Option<billet_provider::Instance>, billet_provider::Error> {
            Ok(None)
        }

        async fn list(&self) -> Result<Vec<billet_provider::Instance>, billet_provider::Error> {
            Ok(Vec::new())
        }

        async fn destroy(
            &self,
            _: &billet_provider::InstanceId,
        ) -> Result<Teardown, billet_provider::Error> {
            Ok(Teardown::Absent)
        }
    }

    /// A factory that overrides none of [`ProviderFactory`]'s defaults.
    struct Defaults;

    #[async_trait]
    impl ProviderFactory for Defaults {
        type Provider = Nothing;

        fn policies(&self) -> Policies {
            Policies::STRICT
        }

        async fn build(&self) -> Result<Fixture<Nothing>, FixtureError> {
            Err("never built".into())
        }

        async fn set_outage(&self, _: &Deployment<Nothing>, _: bool) -> Result<(), FixtureError> {
            Ok(())
        }

        fn command(&self, _: Duration) -> Vec<String> {
            Vec::new()
        }
    }

    // H11: a factory that does not override `lose_answer` makes no mid-call
    // faults: arming one is an error naming the deployment, and STRICT
    // declares none.
    #[test]
    fn h11_default_lose_answer_is_an_error() {
        let strict = Policies::STRICT;
        assert!(!strict.mid_call);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let deployment = Deployment {
            owner: "blue".to_owned(),
            provider: Nothing,
        };
        let err = runtime
            .block_on(Defaults.lose_answer(&deployment, 0))
            .unwrap_err();
        assert!(err.to_string().contains("no mid-call faults"), "{err}");
        assert!(err.to_string().contains("\"blue\""), "{err}");
    }

    // H9: a factory that does not override `image` launches every spec with
    // the empty image, as the trait documents.
    #[test]
    fn h9_default_image_is_empty() {
        assert_eq!(Defaults.image(), "");
    }
}
