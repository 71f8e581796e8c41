//! The simulated backend runs the provider contract suite (H1) through the
//! same few lines any backend writes: a factory for two deployments over one
//! host, and one call. It takes `billet-conformance` alone, as a real
//! backend's `[dev-dependencies]` do (H9).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::ManualClock;
use billet_conformance::{
    ContractConfig, Deployment, Fixture, FixtureError, Policies, ProviderFactory, Timing,
    assert_contract, async_trait,
};
use billet_provider::Error;
use billet_simulated::{Host, SimulatedProvider, run_for};

/// Two simulated deployments over one host, timed by one manual clock.
struct Simulated;

#[async_trait]
impl ProviderFactory for Simulated {
    type Provider = SimulatedProvider;

    // No isolation boundary, authoritative destroy, non-empty names, outages
    // of the inventory only; these commands name no run time, or a bad one.
    fn policies(&self) -> Policies {
        Policies {
            invalid_commands: &[
                &[],
                &["sleep", "90"],
                &["billet-simulated", "run-for", "90"],
                &["billet-simulated", "run-for", "99999999999999999999s"],
            ],
            ..Policies::STRICT
        }
    }

    async fn build(&self) -> Result<Fixture<SimulatedProvider>, FixtureError> {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000));
        let host = Host::new();
        let deployment = |owner: &str| -> Result<_, Error> {
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
            timing: Timing::Modelled(clock.clone()),
        })
    }

    async fn set_outage(
        &self,
        deployment: &Deployment<SimulatedProvider>,
        down: bool,
    ) -> Result<(), FixtureError> {
        let fault = down.then(|| Error::inventory_unavailable("injected outage"));
        deployment.provider.fail_inventory(fault);
        Ok(())
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        run_for(run_time)
    }
}

// H1: the simulated provider keeps the provider contract under the shared
// suite, run the way a real backend's own tests run it.
#[test]
fn h1_simulated_provider_passes_the_contract_suite() {
    let summary = assert_contract(&Simulated, ContractConfig::default());
    println!(
        "H1: {} cases, {} steps in {:?}",
        summary.cases, summary.steps, summary.wall_time
    );
}
