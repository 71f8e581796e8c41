//! H1: property tests of the provider contract that any backend can run.
//!
//! A `proptest-state-machine` reference model of the
//! [`Provider`](billet_provider::Provider) contract
//! drives random sequences of calls over two deployments on one host:
//!
//! * `launch` of valid and invalid specs: every trust class, empty names,
//!   duplicate names, names that differ only by case or spaces, commands that
//!   name no run time or a bad one (the backend's
//!   [`Policies::invalid_commands`]);
//! * `find` of exact and near-miss names, and `list`;
//! * `destroy` of the caller's own ids, the other deployment's, ids already
//!   destroyed, ids never issued and near misses of issued ones;
//! * `accepts` of every trust class;
//! * inventory outages started and ended ([`ProviderFactory::fail_inventory`]);
//! * clock moves, small ones and ones that land exactly on, just before or
//!   just after an instance's stop time.
//!
//! Every answer is checked against the model: error kinds and the data they
//! carry (never messages), `list` as a set with each state computed from the
//! model's clock (`Running` while `now < started_at + run time`,
//! `Stopped { exit_code: 0 }` from then on), `find` results, `Teardown` values.
//! After every step each readable inventory is compared with the model, so a
//! refusal that recorded something is caught at once. A failure shrinks to a
//! short sequence of steps, which [`ContractFailure`] prints.
//!
//! # Running the suite against a backend
//!
//! A backend implements [`ProviderFactory`] (two providers over one host, a
//! [`ManualClock`](billet_clock::ManualClock), a way to break each
//! inventory, and the command that runs for a given time), then calls
//! [`assert_contract`] from a test:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, SystemTime};
//!
//! use billet_clock::ManualClock;
//! use billet_harness::contract::{
//!     ContractConfig, Deployment, Fixture, Policies, ProviderFactory, assert_contract,
//! };
//! use billet_provider::Error;
//! use billet_simulated::{Host, SimulatedProvider, run_for};
//!
//! struct MyBackend;
//!
//! impl ProviderFactory for MyBackend {
//!     type Provider = SimulatedProvider;
//!     const POLICIES: Policies = Policies {
//!         invalid_commands: &[&[], &["billet-simulated", "run-for", "90"]],
//!         ..Policies::STRICT
//!     };
//!
//!     fn build(&self) -> Result<Fixture<SimulatedProvider>, Error> {
//!         let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
//!         let host = Host::new();
//!         let deployment = |owner: &str| -> Result<_, Error> {
//!             let provider = SimulatedProvider::builder(owner)
//!                 .host(host.clone())
//!                 .clock(Arc::new(clock.clone()))
//!                 .build()?;
//!             Ok(Deployment { owner: owner.to_owned(), provider })
//!         };
//!         Ok(Fixture { blue: deployment("blue")?, green: deployment("green")?, clock: clock.clone() })
//!     }
//!
//!     fn fail_inventory(&self, provider: &SimulatedProvider, fault: Option<Error>) {
//!         provider.fail_inventory(fault);
//!     }
//!
//!     fn command(&self, run_time: Duration) -> Vec<String> {
//!         run_for(run_time)
//!     }
//! }
//!
//! // H1: the backend keeps the provider contract.
//! assert_contract(&MyBackend, ContractConfig::default());
//! ```
//!
//! [`SimulatedFactory`] is that factory for `billet-simulated`, ready-made.
//! [`check_contract`] answers the failure instead of panicking, so a test can
//! also assert that a broken backend is caught.
//!
//! # How much it runs
//!
//! [`ContractConfig::default`] runs proptest's default number of cases, 256
//! unless `PROPTEST_CASES` says otherwise, each a sequence of 40 to 88 steps
//! (64 on average): at least 10,240 steps a run, about 16,400 on average.
//! `PROPTEST_RNG_SEED` fixes the seed.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use billet_provider::Teardown;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use proptest_state_machine::ReferenceStateMachine;

mod driver;
mod factory;
mod model;

pub use factory::{Deployment, Fixture, Policies, ProviderFactory, SimulatedFactory, non_empty};

use driver::Sut;
use model::{ContractModel, ModelState, Transition};

/// How much of the contract suite to run.
#[derive(Debug, Clone)]
pub struct ContractConfig {
    /// The proptest configuration: `cases` is the number of sequences run.
    /// The default is proptest's own (which reads `PROPTEST_CASES` and
    /// `PROPTEST_RNG_SEED`) without failure persistence.
    pub proptest: Config,
    /// The fewest steps a generated sequence has. Shrinking may go below it.
    pub min_steps: usize,
    /// The most steps a generated sequence has.
    pub max_steps: usize,
}

impl Default for ContractConfig {
    /// Proptest's default cases (256 unless `PROPTEST_CASES` is set), 40 to
    /// 88 steps each.
    fn default() -> Self {
        ContractConfig {
            proptest: Config {
                failure_persistence: None,
                ..Config::default()
            },
            min_steps: 40,
            max_steps: 88,
        }
    }
}

impl ContractConfig {
    /// The same configuration running `cases` sequences.
    #[must_use]
    pub fn with_cases(mut self, cases: u32) -> Self {
        self.proptest.cases = cases;
        self
    }
}

/// What a passing run of the suite did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractSummary {
    /// Sequences run.
    pub cases: u32,
    /// Steps (transitions) applied, across every sequence.
    pub steps: u64,
}

/// How a backend broke the contract: the shrunk sequence of steps that shows
/// it, and what went wrong at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractFailure {
    /// The minimal sequence found, one line per step, in order. Empty when
    /// the suite could not run at all.
    pub steps: Vec<String>,
    /// Which step (or check after it) failed, what the model expected and
    /// what the backend answered.
    pub reason: String,
}

impl fmt::Display for ContractFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the provider contract (H1) does not hold: {}",
            self.reason
        )?;
        let plural = if self.steps.len() == 1 { "" } else { "s" };
        write!(f, "minimal sequence ({} step{plural}):", self.steps.len())?;
        for (n, step) in self.steps.iter().enumerate() {
            write!(f, "\n  {:>2}. {step}", n + 1)?;
        }
        Ok(())
    }
}

impl std::error::Error for ContractFailure {}

/// Runs the contract suite against the backend `factory` builds, answering
/// the shrunk failure instead of panicking.
pub fn check_contract<F: ProviderFactory + 'static>(
    factory: &F,
    config: ContractConfig,
) -> Result<ContractSummary, ContractFailure> {
    let policies = F::POLICIES;
    if policies.unknown_destroy == Teardown::Stopped {
        return Err(ContractFailure {
            steps: Vec::new(),
            reason: "Policies::unknown_destroy must be Absent or Requested: Stopped means an instance was found".to_owned(),
        });
    }
    let strategy = ContractModel::<F>::sequential_strategy(config.min_steps..=config.max_steps);
    let cases = Cell::new(0u32);
    let steps = Cell::new(0u64);
    let mut runner = TestRunner::new(config.proptest);
    let result = runner.run(&strategy, |(initial, transitions, seen)| {
        cases.set(cases.get() + 1);
        if seen.is_some() {
            // A case's first run: its counter tells the shrinker how far it got.
            return run_case(factory, initial, &transitions, seen.as_deref(), &steps)
                .map_err(|failed| TestCaseError::fail(failed.reason));
        }
        replay(factory, &initial, &transitions, &steps)
            .map_err(|failed| TestCaseError::fail(failed.reason))
    });
    match result {
        Ok(()) => Ok(ContractSummary {
            cases: cases.get(),
            steps: steps.get(),
        }),
        Err(TestError::Fail(reason, (initial, transitions, _))) => {
            // Shrinking can leave steps after the one that now fails, and
            // steps it shrank into irrelevance after trying to delete them:
            // delete what still can be, then keep only what ran.
            let transitions = minimize(factory, &initial, transitions);
            let failure = match replay(factory, &initial, &transitions, &Cell::new(0)) {
                Err(failed) => ContractFailure {
                    steps: render(&transitions[..failed.ran]),
                    reason: failed.reason,
                },
                Ok(()) => ContractFailure {
                    steps: render(&transitions),
                    reason: format!(
                        "{} (this sequence passed when replayed: the backend does not answer deterministically)",
                        reason.message()
                    ),
                },
            };
            Err(failure)
        }
        Err(TestError::Abort(reason)) => Err(ContractFailure {
            steps: Vec::new(),
            reason: format!("the suite gave up: {}", reason.message()),
        }),
    }
}

/// Runs the contract suite against the backend `factory` builds and panics
/// with the shrunk failure, printed step by step, if the contract does not
/// hold. Answers what the run did.
#[track_caller]
pub fn assert_contract<F: ProviderFactory + 'static>(
    factory: &F,
    config: ContractConfig,
) -> ContractSummary {
    match check_contract(factory, config) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    }
}

fn render(transitions: &[Transition]) -> Vec<String> {
    transitions.iter().map(ToString::to_string).collect()
}

/// How many times a sequence is run while shrinking before it counts as
/// passing: a backend whose wrong answers depend on something that varies
/// between runs (the iteration order of a hash map, say) still shrinks.
const SHRINK_RUNS: usize = 4;

/// Runs a sequence until it fails, at most [`SHRINK_RUNS`] times.
fn replay<F: ProviderFactory + 'static>(
    factory: &F,
    initial: &ModelState,
    transitions: &[Transition],
    steps: &Cell<u64>,
) -> Result<(), CaseFailure> {
    for _ in 1..SHRINK_RUNS {
        run_case(factory, initial.clone(), transitions, None, steps)?;
    }
    run_case(factory, initial.clone(), transitions, None, steps)
}

/// Deletes every step of a failing sequence whose deletion keeps it valid
/// (the model's preconditions) and failing, until no single deletion does.
fn minimize<F: ProviderFactory + 'static>(
    factory: &F,
    initial: &ModelState,
    mut transitions: Vec<Transition>,
) -> Vec<Transition> {
    let mut deleted = true;
    while deleted {
        deleted = false;
        for ix in (0..transitions.len()).rev() {
            let mut candidate = transitions.clone();
            candidate.remove(ix);
            if allowed(initial, &candidate)
                && replay(factory, initial, &candidate, &Cell::new(0)).is_err()
            {
                transitions = candidate;
                deleted = true;
            }
        }
    }
    transitions
}

/// Whether the model's preconditions allow every step of `transitions`.
fn allowed(initial: &ModelState, transitions: &[Transition]) -> bool {
    let mut model = initial.clone();
    for transition in transitions {
        if !model.allows(transition) {
            return false;
        }
        model = model.apply(transition);
    }
    true
}

/// Why one sequence failed.
struct CaseFailure {
    /// How many steps ran, the failing one included.
    ran: usize,
    reason: String,
}

/// Runs one sequence on a fresh fixture; answers what failed, and where.
fn run_case<F: ProviderFactory + 'static>(
    factory: &F,
    initial: ModelState,
    transitions: &[Transition],
    seen: Option<&AtomicUsize>,
    steps: &Cell<u64>,
) -> Result<(), CaseFailure> {
    let failed = |ran, reason| CaseFailure { ran, reason };
    let mut sut = Sut::new(factory).map_err(|err| failed(0, err))?;
    let mut model = initial;
    sut.check_invariants(&model)
        .map_err(|err| failed(0, format!("before the first step: {err}")))?;
    for (n, transition) in transitions.iter().enumerate() {
        if let Some(seen) = seen {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        steps.set(steps.get() + 1);
        let after = <ContractModel<F> as ReferenceStateMachine>::apply(model.clone(), transition);
        sut.apply(&model, &after, transition)
            .map_err(|err| failed(n + 1, format!("step {} ({transition}): {err}", n + 1)))?;
        model = after;
        sut.check_invariants(&model)
            .map_err(|err| failed(n + 1, format!("after step {} ({transition}): {err}", n + 1)))?;
    }
    Ok(())
}
