//! The sequential mode of the suite (H1-H7): proptest draws sequences of
//! steps from the reference model ([`crate::model`]), the system under test
//! ([`sut`]) applies each to the real providers and checks every answer, and
//! a failing sequence is shrunk and printed so that [`replay`] runs it again.
//! [`check_contract`] and [`assert_contract`] are its entry points.

use std::cell::Cell;
use std::fmt;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use billet_provider::Teardown;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

use crate::ProviderFactory;
use crate::factory::{Outage, Policies};
use crate::model::{self, ModelState, Pace, Transition};

mod sut;

use sut::{Sut, catch_panic};

/// How much of the contract suite to run.
#[derive(Debug, Clone)]
pub struct ContractConfig {
    /// The proptest configuration: `cases` is the number of sequences run.
    /// The default is proptest's own (which reads `PROPTEST_CASES` and
    /// `PROPTEST_RNG_SEED`) without failure persistence; the run's seed is
    /// [`seed`](Self::seed)'s, which a fixed `rng_seed` here gives when
    /// `seed` is `None`. `max_shrink_iters`
    /// bounds proptest's shrinking; at 0 it does none, and the suite still
    /// deletes every step a failure does not need before reporting it.
    pub proptest: Config,
    /// The fewest steps a generated sequence has. Shrinking may go below it.
    pub min_steps: usize,
    /// The most steps a generated sequence has.
    pub max_steps: usize,
    /// The seed the run draws its cases from. `None` (the default): the
    /// proptest configuration's fixed seed if it has one (`PROPTEST_RNG_SEED`
    /// gives it one), else the `BILLET_CONFORMANCE_SEED` environment
    /// variable (a decimal `u64`) if set, else a fresh random seed. Whichever
    /// it is, a failure prints it ([`ContractFailure::seed`]), and the same
    /// seed draws the same cases and shrinks a deterministic backend's
    /// failure to the same sequence.
    pub seed: Option<u64>,
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
            seed: None,
        }
    }
}

impl ContractConfig {
    /// Sized for a backend timed by real time ([`Timing::Wall`](crate::Timing::Wall)): `cases`
    /// sequences (whatever `PROPTEST_CASES` says) of 16 to 32 steps each, and
    /// at most 128 shrinking attempts, since every attempt replays a case in
    /// real time.
    pub fn wall(cases: u32) -> Self {
        let mut config = ContractConfig::default()
            .with_cases(cases)
            .with_steps(16, 32);
        config.proptest.max_shrink_iters = 128;
        config
    }

    /// The same configuration running `cases` sequences.
    #[must_use]
    pub fn with_cases(mut self, cases: u32) -> Self {
        self.proptest.cases = cases;
        self
    }

    /// The same configuration drawing its cases from `seed`, whatever the
    /// environment says: how a test reruns the cases of a printed failure.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The same configuration drawing sequences of `min` to `max` steps.
    #[must_use]
    pub fn with_steps(mut self, min: usize, max: usize) -> Self {
        self.min_steps = min;
        self.max_steps = max.max(min);
        self
    }
}

/// What a passing run of the suite did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractSummary {
    /// Sequences run (the cases generated; shrinking attempts are not counted).
    pub cases: u32,
    /// Steps (transitions) applied, across every sequence.
    pub steps: u64,
    /// Of those steps, the calls whose answer was lost mid-call (H11): none
    /// unless the fixture declares [`Policies::mid_call`].
    pub lost_answers: u64,
    /// How long the whole run took on the wall clock.
    pub wall_time: Duration,
}

/// What a run counts as it goes, shrinking attempts included.
#[derive(Debug, Default)]
struct Tally {
    steps: Cell<u64>,
    lost_answers: Cell<u64>,
}

impl fmt::Display for ContractSummary {
    /// One line: `256 cases, 16676 steps in 2.8s`, or with calls whose
    /// answer was lost, `48 cases, 1118 steps (31 answers lost mid-call) in 9.0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} cases, {} steps", self.cases, self.steps)?;
        if self.lost_answers > 0 {
            write!(f, " ({} answers lost mid-call)", self.lost_answers)?;
        }
        write!(f, " in {:.1?}", self.wall_time)
    }
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
    /// The seed the failing run drew its cases from
    /// ([`ContractConfig::seed`]): `BILLET_CONFORMANCE_SEED=<seed>` or
    /// [`ContractConfig::with_seed`] runs the same cases again. `None` when
    /// no cases were drawn: the suite could not run, or the failure came
    /// from [`replay`].
    pub seed: Option<u64>,
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
        if let Some(seed) = self.seed {
            write!(
                f,
                "\nseed: {seed} (BILLET_CONFORMANCE_SEED={seed} runs the same cases again"
            )?;
            if !self.steps.is_empty() {
                write!(f, "; billet_conformance::replay runs the sequence above")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

impl std::error::Error for ContractFailure {}

/// Runs the contract suite against the backend `factory` builds, answering
/// the shrunk failure instead of panicking.
///
/// The suite first builds one fixture (and tears it down) to read its
/// [`Timing`](crate::Timing), then runs `config`'s cases, each on a fresh fixture.
///
/// A panic in a provider call or a factory hook (an overflow in the
/// backend's arithmetic, say) is a failure like any other: it shrinks, and
/// its reason names the step and gives the panic's message and location
/// once. To keep the output to that one report, the first run installs a
/// process-wide panic hook that stays quiet about a panic on the suite's own
/// thread while it is inside one of its calls, and hands every other panic
/// (another thread's, a test's own assertion) to the hook that was installed
/// before it. A task the backend spawns on the suite's runtime runs on that
/// thread too: its panic reaches the backend as a `JoinError`, quietly.
pub fn check_contract<F: ProviderFactory>(
    factory: &F,
    config: ContractConfig,
) -> Result<ContractSummary, ContractFailure> {
    let started = Instant::now();
    let (policies, pace) = prepare(factory)?;
    let seed = seed(&config).map_err(unusable)?;
    let mut config = config;
    config.proptest.rng_seed = RngSeed::Fixed(seed);
    let strategy = model::strategy(
        ModelState::new(policies, pace),
        (config.min_steps..=config.max_steps).into(),
    );
    let cases = Cell::new(0u32);
    let steps = Tally::default();
    let case = Case { factory, pace };
    // With proptest's shrinking switched off (`max_shrink_iters` 0, which
    // `PROPTEST_MAX_SHRINK_ITERS=0` sets), proptest-state-machine panics when
    // asked for a failing sequence whose step counter is not zero, since no
    // shrinking step reset it: the counter is then left alone, and the
    // suite's own deletion pass (`Case::minimize`) shortens the sequence.
    let count_steps_for_shrinking = config.proptest.max_shrink_iters != 0;
    let mut runner = TestRunner::new(config.proptest);
    let result = runner.run(&strategy, |(initial, transitions, seen)| {
        if let Some(seen) = seen {
            // A case's first run: its counter tells the shrinker how far it got.
            cases.set(cases.get() + 1);
            let seen = Some(&*seen).filter(|_| count_steps_for_shrinking);
            return case
                .run(initial, &transitions, seen, &steps)
                .map_err(|failed| TestCaseError::fail(failed.reason));
        }
        case.replay(&initial, &transitions, &steps)
            .map_err(|failed| TestCaseError::fail(failed.reason))
    });
    match result {
        Ok(()) => Ok(ContractSummary {
            cases: cases.get(),
            steps: steps.steps.get(),
            lost_answers: steps.lost_answers.get(),
            wall_time: started.elapsed(),
        }),
        Err(TestError::Fail(reason, (initial, transitions, _))) => {
            // Shrinking can leave steps after the one that now fails, and
            // steps it shrank into irrelevance after trying to delete them:
            // delete what still can be, then keep only what ran.
            let transitions = case.minimize(&initial, transitions);
            let failure = match case.replay(&initial, &transitions, &Tally::default()) {
                Err(failed) => ContractFailure {
                    steps: render(&transitions[..failed.ran]),
                    reason: failed.reason,
                    seed: Some(seed),
                },
                Ok(()) => ContractFailure {
                    steps: render(&transitions),
                    reason: format!(
                        "{} (this sequence passed when replayed: the backend does not answer deterministically)",
                        reason.message()
                    ),
                    seed: Some(seed),
                },
            };
            Err(failure)
        }
        Err(TestError::Abort(reason)) => Err(ContractFailure {
            steps: Vec::new(),
            reason: format!("the suite gave up: {}", reason.message()),
            seed: Some(seed),
        }),
    }
}

/// A failure of the suite before it ran any step.
fn unusable(reason: String) -> ContractFailure {
    ContractFailure {
        steps: Vec::new(),
        reason,
        seed: None,
    }
}

/// Checks the factory's policies and reads its timing from a probe fixture
/// (built and torn down).
fn prepare<F: ProviderFactory>(factory: &F) -> Result<(Policies, Pace), ContractFailure> {
    let policies = factory.policies();
    if policies.unknown_destroy == Teardown::Stopped {
        return Err(unusable(
            "Policies::unknown_destroy must be Absent or Requested: Stopped means an instance was found".to_owned(),
        ));
    }
    if policies.mid_call && policies.outage != Outage::WholeConnection {
        return Err(unusable(
            "Policies::mid_call needs Policies::outage to be Outage::WholeConnection: a lost answer leaves the connection down as a whole-connection outage does".to_owned(),
        ));
    }
    let probe = build(factory, None).map_err(unusable)?;
    let pace = probe.pace();
    finish(probe).map_err(unusable)?;
    Ok((policies, pace))
}

/// The environment variable that gives a run its seed when neither the
/// configuration nor `PROPTEST_RNG_SEED` does ([`ContractConfig::seed`]).
pub const SEED_VARIABLE: &str = "BILLET_CONFORMANCE_SEED";

/// The seed a run draws its cases from ([`ContractConfig::seed`]).
fn seed(config: &ContractConfig) -> Result<u64, String> {
    if let Some(seed) = config.seed {
        return Ok(seed);
    }
    if let RngSeed::Fixed(seed) = config.proptest.rng_seed {
        return Ok(seed);
    }
    match std::env::var(SEED_VARIABLE) {
        Ok(text) => text.trim().parse().map_err(|_| {
            format!("{SEED_VARIABLE}={text:?} is not a seed: expected a decimal number below 2^64")
        }),
        Err(std::env::VarError::NotUnicode(text)) => Err(format!(
            "{SEED_VARIABLE}={text:?} is not a seed: expected a decimal number below 2^64"
        )),
        // A fresh seed: the standard library's per-process random keys.
        Err(std::env::VarError::NotPresent) => Ok(RandomState::new().build_hasher().finish()),
    }
}

/// Runs one printed sequence of steps against the backend `factory` builds,
/// on a fresh fixture, as a regression test: `Ok(())` if the contract held
/// at every step, else the failure (the steps that ran, and why).
///
/// `steps` holds one step a line, as a [`ContractFailure`] prints them
/// (`blue: launch "job-a" (trusted, runs for 60s)`); a leading step number
/// (`  1. `) and blank lines are skipped, so the lines of a failure's report
/// can be pasted as they are. A failing sequence is run up to four times
/// (as when shrinking) before it counts as passing, so a backend whose wrong
/// answers vary between runs still shows them.
///
/// A line that is not a step, or a step the model does not allow where it
/// stands (a destroy of the id of an instance never launched), is answered
/// as a failure that names the line, before anything runs.
///
/// ```
/// use billet_conformance::{ProviderFactory, replay};
///
/// // H1: the sequence a failure printed, kept as a regression test of the
/// // backend `factory` builds.
/// fn an_outage_hides_no_instance<F: ProviderFactory>(factory: &F) {
///     let steps = r#"
///        1. blue: launch "job-a" (trusted, runs for 60s)
///        2. blue: outage starts
///        3. blue: list
///        4. blue: outage ends
///        5. blue: find "job-a"
///     "#;
///     if let Err(failure) = replay(factory, steps) {
///         panic!("{failure}");
///     }
/// }
/// ```
pub fn replay<F: ProviderFactory>(factory: &F, steps: &str) -> Result<(), ContractFailure> {
    let (policies, pace) = prepare(factory)?;
    let mut transitions = Vec::new();
    for (n, line) in steps.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let transition = model::parse_step(line, policies.invalid_commands).map_err(|err| {
            unusable(format!(
                "line {} ({:?}) is not a step: {err}",
                n + 1,
                line.trim()
            ))
        })?;
        transitions.push(transition);
    }
    let initial = ModelState::new(policies, pace);
    let mut model = initial.clone();
    for (n, transition) in transitions.iter().enumerate() {
        if !model.allows(transition) {
            return Err(unusable(format!(
                "step {} ({transition}) cannot be taken there: the steps before it do not allow it",
                n + 1
            )));
        }
        model = model.apply(transition);
    }
    let case = Case { factory, pace };
    case.replay(&initial, &transitions, &Tally::default())
        .map_err(|failed| ContractFailure {
            steps: render(&transitions[..failed.ran]),
            reason: failed.reason,
            seed: None,
        })
}

/// Runs the contract suite against the backend `factory` builds and panics
/// with the shrunk failure, printed step by step, if the contract does not
/// hold. Answers what the run did.
#[track_caller]
pub fn assert_contract<F: ProviderFactory>(factory: &F, config: ContractConfig) -> ContractSummary {
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

/// Each outage of `transitions`, in the order it started: the index of the
/// step that started it (an outage started by hand, or a lost answer, H11)
/// and of the step that ended it, if one did.
fn outages(transitions: &[Transition]) -> Vec<(usize, Option<usize>)> {
    let mut started: [Option<usize>; 2] = [None; 2];
    let mut found = Vec::new();
    for (ix, transition) in transitions.iter().enumerate() {
        if let Some((side, down)) = transition.outage() {
            match (down, started[side.index()].take()) {
                (true, _) => {
                    started[side.index()] = Some(ix);
                    found.push((ix, None));
                }
                (false, Some(start)) => {
                    if let Some(outage) = found.iter_mut().find(|(s, _)| *s == start) {
                        outage.1 = Some(ix);
                    }
                }
                (false, None) => {}
            }
        }
    }
    found
}

/// Why one sequence failed.
struct CaseFailure {
    /// How many steps ran, the failing one included.
    ran: usize,
    reason: String,
}

/// Runs sequences against fresh fixtures of one factory.
struct Case<'f, F> {
    factory: &'f F,
    /// The timing every fixture must declare: the probe fixture's.
    pace: Pace,
}

impl<F: ProviderFactory> Case<'_, F> {
    /// Runs a sequence until it fails, at most [`SHRINK_RUNS`] times.
    fn replay(
        &self,
        initial: &ModelState,
        transitions: &[Transition],
        steps: &Tally,
    ) -> Result<(), CaseFailure> {
        for _ in 1..SHRINK_RUNS {
            self.run(initial.clone(), transitions, None, steps)?;
        }
        self.run(initial.clone(), transitions, None, steps)
    }

    /// Deletes every step of a failing sequence whose deletion keeps it valid
    /// (the model's preconditions) and failing, until no single deletion does;
    /// then every outage (the step that started it, by hand or by a lost
    /// answer, and the step that ended it) whose deletion does, which no
    /// single deletion can (either half alone breaks a precondition); then
    /// turns a call that loses its answer (H11) into the plain call, its
    /// outage's end deleted, where the failure does not need the fault; and so
    /// on until none of these changes it.
    fn minimize(&self, initial: &ModelState, mut transitions: Vec<Transition>) -> Vec<Transition> {
        let fails = |candidate: &[Transition]| {
            allowed(initial, candidate)
                && self.replay(initial, candidate, &Tally::default()).is_err()
        };
        loop {
            let mut deleted = true;
            while deleted {
                deleted = false;
                for ix in (0..transitions.len()).rev() {
                    let mut candidate = transitions.clone();
                    candidate.remove(ix);
                    if fails(&candidate) {
                        transitions = candidate;
                        deleted = true;
                    }
                }
            }
            let outages = outages(&transitions);
            let deleted = outages.iter().filter_map(|&(start, end)| {
                let mut candidate = transitions.clone();
                candidate.remove(end?);
                candidate.remove(start);
                Some(candidate)
            });
            let plain = outages.iter().filter_map(|&(start, end)| {
                let mut candidate = transitions.clone();
                candidate[start] = transitions[start].plain()?;
                if let Some(end) = end {
                    candidate.remove(end);
                }
                Some(candidate)
            });
            match deleted.chain(plain).find(|candidate| fails(candidate)) {
                Some(simpler) => transitions = simpler,
                None => return transitions,
            }
        }
    }

    /// Runs one sequence on a fresh fixture, then ends its outages and tears
    /// it down whatever happened; answers what failed, and where.
    fn run(
        &self,
        initial: ModelState,
        transitions: &[Transition],
        seen: Option<&AtomicUsize>,
        steps: &Tally,
    ) -> Result<(), CaseFailure> {
        let mut sut = build(self.factory, Some(self.pace))
            .map_err(|reason| CaseFailure { ran: 0, reason })?;
        let outcome = run_steps(&mut sut, initial, transitions, seen, steps);
        let finished = finish(sut);
        outcome?;
        finished.map_err(|reason| CaseFailure {
            ran: transitions.len(),
            reason: format!("after the last step: {reason}"),
        })
    }
}

/// Builds a fixture ([`Sut::new`]), answering a panic in the factory as
/// an error.
fn build<F: ProviderFactory>(factory: &F, pace: Option<Pace>) -> Result<Sut<'_, F>, String> {
    catch_panic(|| Sut::new(factory, pace))
        .map_err(|panic| format!("the factory {panic} while building a fixture"))
        .and_then(|built| built)
}

/// Ends a fixture's outages and tears it down ([`Sut::finish`]), answering a
/// panic in the factory as an error.
fn finish<F: ProviderFactory>(sut: Sut<'_, F>) -> Result<(), String> {
    catch_panic(|| sut.finish())
        .map_err(|panic| format!("the factory {panic} while tearing a fixture down"))
        .and_then(|finished| finished)
}

/// Applies each transition to `sut` and checks it against the model.
fn run_steps<F: ProviderFactory>(
    sut: &mut Sut<'_, F>,
    initial: ModelState,
    transitions: &[Transition],
    seen: Option<&AtomicUsize>,
    steps: &Tally,
) -> Result<(), CaseFailure> {
    let failed = |ran, reason| CaseFailure { ran, reason };
    let mut model = initial;
    catch_panic(|| sut.check_invariants(&mut model))
        .and_then(|checked| checked)
        .map_err(|err| failed(0, format!("before the first step: {err}")))?;
    for (n, transition) in transitions.iter().enumerate() {
        if let Some(seen) = seen {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        steps.steps.set(steps.steps.get() + 1);
        if transition.plain().is_some() {
            steps.lost_answers.set(steps.lost_answers.get() + 1);
        }
        // The system under test refines the model where a call whose answer was lost
        // (H11) shows which world holds.
        let mut after = model.clone().apply(transition);
        catch_panic(|| sut.apply(&model, &mut after, transition))
            .and_then(|applied| applied)
            .map_err(|err| failed(n + 1, format!("step {} ({transition}): {err}", n + 1)))?;
        model = after;
        catch_panic(|| sut.check_invariants(&mut model))
            .and_then(|checked| checked)
            .map_err(|err| failed(n + 1, format!("after step {} ({transition}): {err}", n + 1)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WallWindows;

    // H1: a summary reads as one line of cases, steps and wall time, and a
    // failure prints its reason and every step of its sequence, numbered.
    #[test]
    fn h1_summary_and_failure_read_as_people_expect() {
        let summary = ContractSummary {
            cases: 48,
            steps: 1118,
            lost_answers: 0,
            wall_time: Duration::from_millis(2440),
        };
        assert_eq!(summary.to_string(), "48 cases, 1118 steps in 2.4s");
        // H11: calls whose answer was lost are counted only when there were some.
        let lossy = ContractSummary {
            lost_answers: 31,
            ..summary
        };
        assert_eq!(
            lossy.to_string(),
            "48 cases, 1118 steps (31 answers lost mid-call) in 2.4s"
        );
        let failure = ContractFailure {
            steps: vec!["blue: outage starts".to_owned(), "blue: list".to_owned()],
            reason: "step 2 (blue: list): expected Err(InventoryUnavailable)".to_owned(),
            seed: Some(42),
        };
        assert_eq!(
            failure.to_string(),
            "the provider contract (H1) does not hold: step 2 (blue: list): expected Err(InventoryUnavailable)\n\
             minimal sequence (2 steps):\n   1. blue: outage starts\n   2. blue: list\n\
             seed: 42 (BILLET_CONFORMANCE_SEED=42 runs the same cases again; billet_conformance::replay runs the sequence above)"
        );
    }

    // H1: a one-step failure says "1 step", not "1 steps"; a failure with no
    // sequence (the suite could not run) says so and lists nothing.
    #[test]
    fn h1_failure_counts_its_steps_in_words() {
        let one = ContractFailure {
            steps: vec!["green: list".to_owned()],
            reason: "step 1 (green: list): wrong".to_owned(),
            seed: None,
        };
        assert_eq!(
            one.to_string(),
            "the provider contract (H1) does not hold: step 1 (green: list): wrong\n\
             minimal sequence (1 step):\n   1. green: list"
        );
        let none = ContractFailure {
            steps: Vec::new(),
            reason: "no fixture".to_owned(),
            seed: None,
        };
        assert_eq!(
            none.to_string(),
            "the provider contract (H1) does not hold: no fixture\nminimal sequence (0 steps):"
        );
        let seeded = ContractFailure {
            seed: Some(7),
            ..none
        };
        assert_eq!(
            seeded.to_string(),
            "the provider contract (H1) does not hold: no fixture\nminimal sequence (0 steps):\n\
             seed: 7 (BILLET_CONFORMANCE_SEED=7 runs the same cases again)"
        );
    }

    // H1: every step the suite draws, of every kind (lost answers, invalid
    // commands, near misses, stop times), reads back from its printed line
    // as the same step, so a printed sequence can be replayed; a line that
    // is no step is refused with a reason.
    #[test]
    fn h1_every_printed_step_reads_back_as_itself() {
        use proptest::strategy::{Strategy, ValueTree};
        let policies = Policies {
            invalid_commands: &[&[], &["sleep", "90"]],
            outage: Outage::WholeConnection,
            mid_call: true,
            ..Policies::STRICT
        };
        let windows = WallWindows {
            pending: Duration::from_millis(20),
            around_end: Duration::from_micros(1500),
        };
        let mut runner = TestRunner::deterministic();
        let mut read = 0;
        for n in 0..64 {
            let pace = if n % 2 == 0 {
                model::Pace::Modelled
            } else {
                model::Pace::Wall(windows)
            };
            let strategy = model::strategy(ModelState::new(policies, pace), (40..=88).into());
            let (_, transitions, _) = strategy.new_tree(&mut runner).unwrap().current();
            for (n, transition) in transitions.iter().enumerate() {
                let line = format!("  {:>2}. {transition}", n + 1);
                assert_eq!(
                    model::parse_step(&line, policies.invalid_commands).as_ref(),
                    Ok(transition),
                    "{line}"
                );
                read += 1;
            }
        }
        assert!(read > 64 * 40, "{read}");
        for line in [
            "blue: launch \"job-a\" (trusted, runs for 60)",
            "red: list",
            "green: destroy the never-issued id \"made-up\"",
            "blue: launch \"job-a\" (trusted, invalid command [\"rm\"])",
            "clock: advance to the stop time of blue's job-a",
        ] {
            assert!(
                model::parse_step(line, policies.invalid_commands).is_err(),
                "{line}"
            );
        }
    }

    // H1: the run's seed is the configuration's when it names one, else
    // proptest's fixed seed (PROPTEST_RNG_SEED gives one); `with_seed`
    // changes nothing else.
    #[test]
    fn h1_the_configured_seed_comes_first() {
        let mut config = ContractConfig::default().with_cases(3);
        config.proptest.rng_seed = RngSeed::Fixed(11);
        assert_eq!(seed(&config), Ok(11));
        let seeded = config.with_seed(12);
        assert_eq!(seed(&seeded), Ok(12));
        assert_eq!(seeded.proptest.cases, 3);
        assert_eq!((seeded.min_steps, seeded.max_steps), (40, 88));
    }

    // H11: the outages a sequence starts, by hand or by a lost answer, are
    // found with the step that ends each, each side apart; one still on at
    // the end has none.
    #[test]
    fn h11_outages_pairs_each_start_with_its_end() {
        use model::{Command, Side, Transition};
        let outage = |side, down| Transition::Outage { side, down };
        let lost = Transition::LaunchLosingAnswer {
            side: Side::Green,
            name: "job-a".to_owned(),
            trust: billet_provider::TrustClass::Trusted,
            command: Command::RunFor(Duration::from_secs(1)),
            after: 0,
        };
        let transitions = [
            outage(Side::Blue, true),
            lost.clone(),
            Transition::List { side: Side::Blue },
            outage(Side::Green, false),
            outage(Side::Blue, false),
            outage(Side::Blue, true),
        ];
        assert_eq!(
            outages(&transitions),
            vec![(0, Some(4)), (1, Some(3)), (5, None)]
        );
        assert_eq!(outages(&transitions[..3]), vec![(0, None), (1, None)]);
        assert_eq!(outages(&[outage(Side::Blue, false)]), vec![]);
        assert_eq!(
            lost.plain().map(|t| t.to_string()),
            Some(r#"green: launch "job-a" (trusted, runs for 1s)"#.to_owned())
        );
        assert_eq!(outage(Side::Blue, true).plain(), None);
        let destroy = Transition::DestroyLosingAnswer {
            side: Side::Blue,
            target: model::Target::Never("no-such-instance"),
            after: 2,
        };
        assert_eq!(
            destroy.plain().map(|t| t.to_string()),
            Some(r#"blue: destroy the never-issued id "no-such-instance""#.to_owned())
        );
        assert_eq!(destroy.outage(), Some((Side::Blue, true)));
        assert_eq!(
            outage(Side::Green, false).outage(),
            Some((Side::Green, false))
        );
        assert_eq!(Transition::List { side: Side::Blue }.outage(), None);
    }

    // H7: the wall configuration runs the cases asked for, 16 to 32 steps
    // each, with at most 128 shrinking attempts; with_steps never lets the
    // most fall below the fewest, and with_cases changes only the cases.
    #[test]
    fn h7_wall_config_and_builders_set_what_they_say() {
        let wall = ContractConfig::wall(7);
        assert_eq!(wall.proptest.cases, 7);
        assert_eq!((wall.min_steps, wall.max_steps), (16, 32));
        assert_eq!(wall.proptest.max_shrink_iters, 128);
        assert_eq!(wall.proptest.failure_persistence, None);

        let default = ContractConfig::default();
        assert_eq!((default.min_steps, default.max_steps), (40, 88));
        let cases = default.clone().with_cases(3);
        assert_eq!(cases.proptest.cases, 3);
        assert_eq!((cases.min_steps, cases.max_steps), (40, 88));
        assert_eq!(
            cases.proptest.max_shrink_iters,
            default.proptest.max_shrink_iters
        );
        let steps = default.clone().with_steps(5, 9);
        assert_eq!((steps.min_steps, steps.max_steps), (5, 9));
        assert_eq!(steps.proptest.cases, default.proptest.cases);
        let inverted = default.with_steps(12, 4);
        assert_eq!((inverted.min_steps, inverted.max_steps), (12, 12));
    }
}
