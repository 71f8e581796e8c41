//! H1: the simulated backend keeps the provider contract, over random
//! sequences of every call, two deployments on one host and a moving clock.

use std::time::Instant;

use billet_harness::contract::{ContractConfig, SimulatedFactory, check_contract};

// H1: the simulated provider passes the contract suite at its default size
// (S4-S10: launch, list, find, destroy, accepts and inventory outages, each
// checked against the reference model), and the default run applies at least
// 10,000 steps.
#[test]
fn h1_simulated_provider_keeps_the_contract() {
    let config = ContractConfig::default();
    let cases = config.proptest.cases;
    let started = Instant::now();
    let summary = match check_contract(&SimulatedFactory::default(), config) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    };
    println!(
        "H1 suite: {} cases, {} steps in {:?}",
        summary.cases,
        summary.steps,
        started.elapsed()
    );
    assert_eq!(summary.cases, cases);
    assert!(summary.steps >= u64::from(cases) * 40, "{summary:?}");
    if cases >= 256 {
        assert!(summary.steps >= 10_000, "{summary:?}");
    }
}
