//! [`ProviderFactory`], [`Fixture`] and [`Policies`]: what a backend hands the
//! contract suite, and [`SimulatedFactory`], the one for `billet-simulated`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::ManualClock;
use billet_provider::{Error, Provider, Teardown};
use billet_simulated::{Host, SimulatedProvider, run_for};

/// Builds fresh fixtures for the contract suite: everything the suite needs
/// from one backend.
///
/// The suite calls [`build`](ProviderFactory::build) once per test case (and
/// once per shrinking attempt), so every fixture must start empty: two
/// deployments that hold nothing, over one host that holds nothing of theirs.
///
/// `build` runs inside the suite's tokio current-thread runtime (its drivers
/// enabled), so a backend may spawn or connect there; every later call of the
/// providers is driven by the same runtime.
pub trait ProviderFactory {
    /// The provider under test.
    type Provider: Provider;

    /// What this backend chose where the contract leaves a choice. The
    /// reference model reads it to know which answer is right.
    const POLICIES: Policies;

    /// A fresh fixture: two providers for two distinct deployments over one
    /// shared host, both timed by the fixture's [`ManualClock`].
    ///
    /// An error here is not a contract violation: the suite reports it as a
    /// fixture that could not be built.
    fn build(&self) -> Result<Fixture<Self::Provider>, Error>;

    /// Makes `provider`'s inventory fail (`Some`) or recover (`None`).
    ///
    /// While it fails, `list` and `find` of that provider, and of no other,
    /// must answer [`Error::InventoryUnavailable`]; `launch` and `destroy` must
    /// work as before. Once it recovers they must answer the exact inventory
    /// again. The simulated backend has
    /// [`fail_inventory`](SimulatedProvider::fail_inventory) for this; a real
    /// backend breaks and restores its provider's connection to the daemon.
    /// `fault` is the error the suite would like to see (a backend that
    /// answers its own error of the same kind is just as right).
    fn fail_inventory(&self, provider: &Self::Provider, fault: Option<Error>);

    /// A command that runs for exactly `run_time` of the fixture's modelled
    /// time and then exits with code 0.
    fn command(&self, run_time: Duration) -> Vec<String>;

    /// The image every launched spec names. Empty unless overridden.
    fn image(&self) -> String {
        String::new()
    }
}

/// Two deployments over one host, and the clock that times them both.
///
/// Build one in [`ProviderFactory::build`].
#[derive(Debug)]
pub struct Fixture<P> {
    /// The first deployment.
    pub blue: Deployment<P>,
    /// The second deployment: another owner over the same host as `blue`.
    pub green: Deployment<P>,
    /// The clock both providers read. The suite moves it forward only.
    pub clock: ManualClock,
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
            clock: self.clock,
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

/// A backend's choices where the contract allows more than one answer.
///
/// Start from [`Policies::STRICT`] and change what differs:
///
/// ```
/// use billet_harness::contract::Policies;
/// use billet_provider::Teardown;
///
/// const MICROVM: Policies = Policies {
///     isolation: true,
///     unknown_destroy: Teardown::Requested,
///     ..Policies::STRICT
/// };
/// assert!(MICROVM.isolation);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Policies {
    /// Whether the backend has an isolation boundary. With one, `accepts`
    /// and `launch` take every trust class; without one (the contract's
    /// default), `Unknown` and `Untrusted` are refused with
    /// [`Error::Refused`].
    pub isolation: bool,
    /// What `destroy` answers for an id the backend does not hold (never
    /// issued, already destroyed): [`Teardown::Absent`] for a backend that is
    /// authoritative about what it holds, [`Teardown::Requested`] for one that
    /// can only ask. With `Requested`, destroying a held instance may also
    /// answer `Requested` instead of `Stopped`; the suite still expects it gone
    /// from the next inventory.
    pub unknown_destroy: Teardown,
    /// Which names `launch` takes. Every other name must be refused with
    /// [`Error::InvalidSpec`]. The contract requires the empty name to be
    /// refused; names that differ from a valid one only by case or spaces are
    /// still distinct names.
    pub valid_name: fn(&str) -> bool,
    /// Commands `launch` must refuse with [`Error::InvalidSpec`] (recording
    /// nothing). The suite launches them with valid names and trusted specs.
    /// May be empty for a backend that runs any command.
    pub invalid_commands: &'static [&'static [&'static str]],
}

impl Policies {
    /// No isolation boundary, authoritative about what it holds
    /// ([`Teardown::Absent`]), every non-empty name valid, no command known to
    /// be invalid.
    pub const STRICT: Policies = Policies {
        isolation: false,
        unknown_destroy: Teardown::Absent,
        valid_name: non_empty,
        invalid_commands: &[],
    };
}

/// Whether `name` is not empty: [`Policies::STRICT`]'s name rule.
pub fn non_empty(name: &str) -> bool {
    !name.is_empty()
}

/// The [`ProviderFactory`] of the simulated backend: two
/// [`SimulatedProvider`]s, for the deployments `"blue"` and `"green"`, over one
/// [`Host`], timed by a [`ManualClock`] that starts at [`SimulatedFactory::start`].
#[derive(Debug, Clone, Copy)]
pub struct SimulatedFactory {
    /// Where the fixture's modelled time starts.
    pub start: SystemTime,
}

impl Default for SimulatedFactory {
    /// Time starts at 1,750,000,000 seconds after the Unix epoch (June 2025).
    fn default() -> Self {
        SimulatedFactory {
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000),
        }
    }
}

impl ProviderFactory for SimulatedFactory {
    type Provider = SimulatedProvider;

    /// No boundary, authoritative, non-empty names; the commands are the
    /// forms `parse_run_for` refuses: no duration, a malformed one, an
    /// overflowing one.
    const POLICIES: Policies = Policies {
        invalid_commands: &[
            &[],
            &["sleep", "90"],
            &["billet-simulated", "run-for"],
            &["billet-simulated", "run-for", "90"],
            &["billet-simulated", "run-for", "1.5m"],
            &["billet-simulated", "run-for", "18446744073709551616s"],
            &["billet-simulated", "run-for", "90s", "extra"],
        ],
        ..Policies::STRICT
    };

    fn build(&self) -> Result<Fixture<SimulatedProvider>, Error> {
        let clock = ManualClock::new(self.start);
        let host = Host::new();
        let deployment = |owner: &str| -> Result<Deployment<SimulatedProvider>, Error> {
            let provider = SimulatedProvider::builder(owner)
                .host(host.clone())
                .clock(Arc::new(clock.clone()))
                .build()?;
            Ok(Deployment {
                owner: owner.to_owned(),
                provider,
            })
        };
        Ok(Fixture {
            blue: deployment("blue")?,
            green: deployment("green")?,
            clock: clock.clone(),
        })
    }

    fn fail_inventory(&self, provider: &SimulatedProvider, fault: Option<Error>) {
        provider.fail_inventory(fault);
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        run_for(run_time)
    }
}
