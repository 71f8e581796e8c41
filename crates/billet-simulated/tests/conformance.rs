//! H1, H7, H8, H11: the simulated backend keeps the provider contract under
//! the suite of `billet-conformance`, both ways: in modelled time (the big
//! run) and in wall time with whole-connection outages and answers lost
//! mid-call (a short run).

use billet_conformance::{ContractConfig, Outage, ProviderFactory, Timing, check_contract};
use billet_simulated::SimulatedFactory;
use billet_simulated::conformance::{SimulatedClock, WALL_WINDOWS};

// H1: the simulated provider passes the contract suite at its default size
// (S4-S10: launch, list, find, destroy, accepts and inventory outages, each
// checked against the reference model), and the default run applies at least
// 10,000 steps.
#[test]
fn h1_simulated_provider_keeps_the_contract() {
    let config = ContractConfig::default();
    let cases = config.proptest.cases;
    let summary = match check_contract(&SimulatedFactory::modelled(), config) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    };
    println!(
        "H1 suite, modelled: {} cases, {} steps in {:?}",
        summary.cases, summary.steps, summary.wall_time
    );
    assert_eq!(summary.cases, cases);
    assert!(summary.steps >= u64::from(cases) * 40, "{summary:?}");
    if cases >= 256 {
        assert!(summary.steps >= 10_000, "{summary:?}");
    }
}

// H8, H11: in modelled time, outages that cut the whole connection (launch
// and destroy refused and changing nothing, the inventory exact afterwards),
// and launches and destroys whose answer is lost mid-call after the host
// applied them (the instance a lost launch left is reported exactly, holds its
// name and is destroyable; a lost destroy removed its instance).
#[test]
fn h11_simulated_provider_keeps_the_contract_across_whole_outages_and_lost_answers() {
    let factory = SimulatedFactory::modelled().with_outage(Outage::WholeConnection);
    assert!(factory.policies().mid_call);
    let summary = match check_contract(&factory, ContractConfig::default().with_cases(64)) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    };
    println!(
        "H8, H11 suite, modelled, whole outages, lost answers: {} cases, {} steps in {:?}",
        summary.cases, summary.steps, summary.wall_time
    );
    assert_eq!(summary.cases, 64);
}

// H7, H8, H11: on the system clock, with whole-connection outages and
// answers lost mid-call, the simulated provider passes the suite in wall time:
// clock moves are real sleeps and states are checked against the wall clock
// within the declared windows.
#[test]
fn h7_simulated_provider_keeps_the_contract_in_wall_time() {
    let factory = SimulatedFactory::wall();
    assert_eq!(factory.clock, SimulatedClock::Wall(WALL_WINDOWS));
    assert_eq!(factory.outage, Outage::WholeConnection);
    assert!(factory.policies().mid_call);
    let summary = match check_contract(&factory, ContractConfig::wall(48)) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    };
    println!(
        "H7, H11 suite, wall time, whole outages, lost answers: {} cases, {} steps in {:?}",
        summary.cases, summary.steps, summary.wall_time
    );
    assert_eq!(summary.cases, 48);
    assert!(summary.steps >= 48 * 16, "{summary:?}");
}

// H7: the wall factory's fixtures really are timed by the wall clock.
#[test]
fn h7_wall_factory_declares_wall_timing() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let fixture = runtime
        .block_on(billet_conformance::ProviderFactory::build(
            &SimulatedFactory::wall(),
        ))
        .unwrap();
    assert!(matches!(fixture.timing, Timing::Wall(w) if w == WALL_WINDOWS));
    let fixture = runtime
        .block_on(billet_conformance::ProviderFactory::build(
            &SimulatedFactory::modelled(),
        ))
        .unwrap();
    assert!(matches!(fixture.timing, Timing::Modelled(_)));
}
