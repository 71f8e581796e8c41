//! H7, H8: what the suite promises a factory: every fixture it builds is torn
//! down (after a passing case and after a failing one), with every outage
//! ended first, an outage is never started while on nor ended while off, and
//! every fixture of a run must tell time the same way.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use billet_conformance::{
    ContractConfig, Deployment, Fixture, FixtureError, Policies, ProviderFactory, check_contract,
};
use billet_provider::Provider;
use billet_simulated::{Severable, SimulatedFactory};

/// The simulated factory, counting what the suite asks of it.
struct Counting {
    inner: SimulatedFactory,
    /// Claim an isolation boundary the simulated backend lacks, so that the
    /// suite fails.
    lie: bool,
    /// Alternate between modelled and wall fixtures.
    alternate: bool,
    /// Declare mid-call faults whatever the outage kind.
    claims_mid_call: bool,
    builds: AtomicUsize,
    teardowns: AtomicUsize,
    /// Mid-call faults armed (H11).
    lost_answers: AtomicUsize,
    /// Deployments still in an outage when their fixture was torn down.
    down_at_teardown: Mutex<Vec<String>>,
    /// Outages asked to start while on, or to end while off.
    misused_outages: Mutex<Vec<String>>,
    /// Deployments whose call was to lose its answer, until the suite starts
    /// their outage after it (the one start allowed while one may be on).
    lost_pending: Mutex<Vec<String>>,
}

impl Counting {
    fn new(inner: SimulatedFactory) -> Self {
        Counting {
            inner,
            lie: false,
            alternate: false,
            claims_mid_call: false,
            builds: AtomicUsize::new(0),
            teardowns: AtomicUsize::new(0),
            lost_answers: AtomicUsize::new(0),
            down_at_teardown: Mutex::default(),
            misused_outages: Mutex::default(),
            lost_pending: Mutex::default(),
        }
    }
}

#[async_trait]
impl ProviderFactory for Counting {
    type Provider = Severable;

    fn policies(&self) -> Policies {
        let policies = self.inner.policies();
        Policies {
            isolation: self.lie,
            mid_call: policies.mid_call || self.claims_mid_call,
            ..policies
        }
    }

    async fn build(&self) -> Result<Fixture<Severable>, FixtureError> {
        let n = self.builds.fetch_add(1, Ordering::SeqCst);
        if self.alternate && n % 2 == 1 {
            return SimulatedFactory::wall().build().await;
        }
        self.inner.build().await
    }

    async fn set_outage(
        &self,
        deployment: &Deployment<Severable>,
        down: bool,
    ) -> Result<(), FixtureError> {
        let provider = &deployment.provider;
        let on = provider.is_severed() || provider.provider().list().await.is_err();
        // H11: right after a call that was to lose its answer, the suite
        // starts the outage whether or not the fault already did.
        let after_lost = down && {
            let mut pending = self.lost_pending.lock().unwrap();
            let at = pending.iter().position(|owner| *owner == deployment.owner);
            at.map(|at| pending.remove(at)).is_some()
        };
        if on == down && !after_lost {
            self.misused_outages.lock().unwrap().push(format!(
                "{}: asked to {} an outage that was {}",
                deployment.owner,
                if down { "start" } else { "end" },
                if on { "on" } else { "off" }
            ));
        }
        self.inner.set_outage(deployment, down).await
    }

    async fn lose_answer(
        &self,
        deployment: &Deployment<Severable>,
        after: u32,
    ) -> Result<(), FixtureError> {
        self.lost_answers.fetch_add(1, Ordering::SeqCst);
        let provider = &deployment.provider;
        if provider.is_severed() || provider.provider().list().await.is_err() {
            self.misused_outages.lock().unwrap().push(format!(
                "{}: asked to lose an answer while an outage was on",
                deployment.owner
            ));
        }
        self.lost_pending
            .lock()
            .unwrap()
            .push(deployment.owner.clone());
        self.inner.lose_answer(deployment, after).await
    }

    fn command(&self, run_time: Duration) -> Vec<String> {
        self.inner.command(run_time)
    }

    async fn teardown(&self, fixture: &Fixture<Severable>) -> Result<(), FixtureError> {
        self.teardowns.fetch_add(1, Ordering::SeqCst);
        for deployment in [&fixture.blue, &fixture.green] {
            let provider = &deployment.provider;
            let inventory_down = provider.provider().list().await.is_err();
            if provider.is_severed() || inventory_down {
                self.down_at_teardown
                    .lock()
                    .unwrap()
                    .push(deployment.owner.clone());
            }
        }
        Ok(())
    }
}

// H8, H11: after a passing run every fixture built was torn down, each with
// its outages (of either kind, and those a lost answer left) ended first; a
// mid-call fault is armed only on a live connection of a fixture that declares
// them.
#[test]
fn h8_every_fixture_is_torn_down_with_its_outages_ended() {
    for inner in [SimulatedFactory::modelled(), SimulatedFactory::wall()] {
        let factory = Counting::new(inner);
        let config = ContractConfig::default().with_cases(32).with_steps(16, 32);
        let summary = check_contract(&factory, config).unwrap_or_else(|f| panic!("{f}"));
        let builds = factory.builds.load(Ordering::SeqCst);
        // One probe fixture, then one per case.
        assert_eq!(builds, 1 + summary.cases as usize);
        assert_eq!(factory.teardowns.load(Ordering::SeqCst), builds);
        assert_eq!(
            *factory.down_at_teardown.lock().unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            *factory.misused_outages.lock().unwrap(),
            Vec::<String>::new()
        );
        // H11: every call that was to lose its answer was followed by the
        // start of its outage.
        assert_eq!(*factory.lost_pending.lock().unwrap(), Vec::<String>::new());
        let lost = factory.lost_answers.load(Ordering::SeqCst);
        // The summary counts exactly the calls that were to lose their answer.
        assert_eq!(summary.lost_answers, lost as u64, "{summary}");
        if inner.policies().mid_call {
            assert!(lost >= 10, "{lost} mid-call faults in {summary}");
        } else {
            assert_eq!(lost, 0, "a fixture that declares none");
        }
    }
}

// H7: a failing run (shrinking included) also tears down every fixture it built.
#[test]
fn h7_a_failing_run_tears_down_every_fixture() {
    let factory = Counting {
        lie: true,
        ..Counting::new(SimulatedFactory::wall())
    };
    let failure = check_contract(&factory, ContractConfig::wall(16)).unwrap_err();
    assert!(failure.reason.contains("Refused"), "{failure}");
    let builds = factory.builds.load(Ordering::SeqCst);
    assert!(builds > 2, "shrinking builds fixtures too: {builds}");
    assert_eq!(factory.teardowns.load(Ordering::SeqCst), builds);
    assert_eq!(
        *factory.down_at_teardown.lock().unwrap(),
        Vec::<String>::new()
    );
    // H8: shrinking keeps the promise too.
    assert_eq!(
        *factory.misused_outages.lock().unwrap(),
        Vec::<String>::new()
    );
}

// H7: a factory whose fixtures tell time differently from one case to the next
// is reported as such, not as a contract violation.
#[test]
fn h7_fixtures_of_one_run_must_tell_time_the_same_way() {
    let factory = Counting {
        alternate: true,
        ..Counting::new(SimulatedFactory::modelled())
    };
    let failure = check_contract(&factory, ContractConfig::default().with_cases(4)).unwrap_err();
    assert!(failure.reason.contains("different timings"), "{failure}");
    assert_eq!(
        factory.teardowns.load(Ordering::SeqCst),
        factory.builds.load(Ordering::SeqCst)
    );
}

// H11: mid-call faults leave the connection down as a whole-connection outage
// does, so a fixture that declares them with inventory-only outages is refused
// before anything is built, with a reason that names both policies.
#[test]
fn h11_mid_call_faults_need_whole_connection_outages() {
    let factory = Counting {
        claims_mid_call: true,
        ..Counting::new(SimulatedFactory::modelled())
    };
    let failure = check_contract(&factory, ContractConfig::default().with_cases(4)).unwrap_err();
    assert!(
        failure
            .reason
            .starts_with("Policies::mid_call needs Policies::outage to be Outage::WholeConnection"),
        "{failure}"
    );
    assert!(failure.steps.is_empty());
    assert_eq!(factory.builds.load(Ordering::SeqCst), 0);
}
