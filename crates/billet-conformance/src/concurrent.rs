//! The concurrent mode of the suite (H12): several tasks call the providers
//! of one fixture at once, every call is recorded with the order of its
//! invocation and its answer, and the history is checked for linearizability
//! with `todc-utils`' Wing-Gong-Lowe checker.
//!
//! This file holds the mode's public API: its configuration
//! ([`ConcurrentConfig`]), what a passing run answers
//! ([`ConcurrentSummary`]), [`check_concurrent`] and [`assert_concurrent`].
//! The rest lives beside it, one concern a file: `history` (the calls
//! recorded), `specification` (the contract taken sequentially, as worlds),
//! `linearizability` (the per-name and whole-deployment checks of a recorded
//! history), `faults` (planning and making faults, their windows and the
//! errors they excuse), `runner` (running a history, and shrinking a failure
//! by running smaller ones), `report` (the failure and its lines) and
//! `synthetic` (histories made without a provider, for the benchmark).

use std::time::{Duration, Instant};

use crate::ProviderFactory;

mod faults;
mod history;
mod linearizability;
mod recording;
mod report;
mod runner;
mod specification;
#[doc(hidden)]
pub mod synthetic;
#[cfg(test)]
mod test_support;

pub use report::ConcurrentFailure;

use history::Answer;
use linearizability::check;
use report::lines;
use runner::{record, shrink};
use specification::{Excuse, outage_error};

/// How many histories the concurrent mode runs, and how big each is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrentConfig {
    /// Histories to run; each on a fresh fixture.
    pub histories: u32,
    /// Tasks calling at once in each history (2 to 4).
    pub tasks: usize,
    /// Calls each task makes in each history (at least 1).
    pub calls_per_task: usize,
    /// Instance names per deployment the tasks share (1 to 4): few names make
    /// many races on one name.
    pub names: usize,
    /// Where the run's random choices start: the same seed makes the same
    /// calls (their interleaving is the runtime's).
    pub seed: u64,
    /// Whether the tasks run on a multi-thread runtime (two workers), so that
    /// calls really overlap, rather than interleave at await points on one
    /// thread.
    pub multi_thread: bool,
    /// Histories tried at each smaller size (fewer tasks, fewer calls) when
    /// shrinking a failure: the cost of a failure is up to `tasks - 1` x
    /// `calls_per_task` times this many histories, so keep it small for a
    /// backend whose histories take seconds. 0 keeps the failing history
    /// as found (still shrunk by deleting the calls it does not need).
    pub shrink_attempts: u32,
    /// Faults made in each history, one after another, each at a random
    /// moment of it and lasting a few calls: an outage of one deployment
    /// ([`ProviderFactory::set_outage`], H8), or, for a factory that
    /// declares [`Policies::mid_call`](crate::Policies::mid_call), half of
    /// them an answer lost mid-call ([`ProviderFactory::lose_answer`], H11).
    /// 0 makes none. Faults that would begin after the tasks are done are
    /// not made.
    pub faults: u32,
}

impl Default for ConcurrentConfig {
    /// 64 histories of 3 tasks x 10 calls over 2 names per deployment, on a
    /// multi-thread runtime, seed 0, 20 shrinking attempts per size, 2
    /// faults per history.
    fn default() -> Self {
        ConcurrentConfig {
            histories: 64,
            tasks: 3,
            calls_per_task: 10,
            names: 2,
            seed: 0,
            multi_thread: true,
            shrink_attempts: 20,
            faults: 2,
        }
    }
}

/// What a passing concurrent run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConcurrentSummary {
    /// Histories run and checked.
    pub histories: u32,
    /// Provider calls made, in all histories.
    pub calls: u64,
    /// Faults made ([`ConcurrentConfig::faults`] in each history, less those
    /// that would have begun after its tasks were done).
    pub faults: u64,
    /// Calls answered an outage's error that a fault excused.
    pub fault_errors: u64,
    /// Wall time the run took.
    pub wall_time: Duration,
}

/// Runs the concurrent mode (H12) against `factory`'s fixtures: for each of
/// `config.histories` fresh fixtures, `config.tasks` tasks each make
/// `config.calls_per_task` random calls at once (launch, destroy, find, list
/// over `config.names` names per deployment, through every provider object:
/// `blue`, `green`, and [`ProviderFactory::second`] when it gives one), while
/// `config.faults` faults are made (outages, H8, and answers lost mid-call,
/// H11), then the history is checked.
///
/// # What is checked
///
/// Every call's invocation and answer, and every fault's start and end, get
/// a place in one global order (an atomic counter read right before each
/// call and right after it returns). The history of each (deployment, name)
/// must be linearizable with respect to the contract, sequentially: a launch
/// of a held name answers `Conflict`, of a free one a fresh id that holds
/// it; a destroy of the held id answers `Stopped` (or `Requested` for a
/// backend that can only ask) exactly once and frees the name, of another id
/// `Absent` (`Requested`); a find, and a list read for that name, sees
/// exactly the held instance. Each instance answered must carry the name
/// asked, the deployment's owner, the provider's kind and the state
/// `Running` (never `Stopped`, and `Pending` only as below), and a list only
/// this deployment's instances of the shared names, each once.
///
/// # Faults
///
/// With [`ConcurrentConfig::faults`], faults are made one after another at
/// random moments while the tasks call, each lasting a few calls: an outage
/// of one deployment ([`ProviderFactory::set_outage`] `true`, then `false`),
/// or, for a factory that declares [`Policies::mid_call`](crate::Policies::mid_call),
/// half of them [`ProviderFactory::lose_answer`] (0 to 2 exchanges let
/// through) followed by an outage. The fault meets whichever calls reach the
/// connection while it lasts, from any task and any provider object of that
/// deployment. Then:
///
/// * An outage's error (`Unavailable`, `InventoryUnavailable`) is right only
///   from a call that overlapped a fault of its deployment; with
///   [`Outage::InventoryOnly`](crate::Outage::InventoryOnly), only from a
///   find or a list. Any other error is wrong, as without faults.
/// * A call that began after the connection was cut and answered before it
///   was restored reached no daemon: it changed nothing (H8).
/// * A launch or destroy answered an outage's error that overlapped a
///   fault's edges, or a lost answer, may or may not have happened (H11), and
///   may take effect as late as the fault's end: a request the daemon
///   received can still be at work after its caller saw the connection
///   break, so a fixture ends an outage only once its daemon has answered
///   everything delivered before.
/// * An instance such a launch made is named by its first sighting. Until a
///   find or list has seen it `Running`, it may be seen `Pending` (it may
///   never have been started) and may vanish (a backend removing what a
///   lost launch left, perhaps while another provider object of the
///   deployment saw it); once seen `Running`, it holds its name until
///   destroyed, like any other.
///
/// # Restrictions
///
/// * Time does not move: every instance is launched with
///   `factory.command(Duration::MAX)`, so no state changes during a history,
///   and the sequential specification needs no time. Under
///   [`Timing::Modelled`](crate::Timing::Modelled) the clock is never moved;
///   under [`Timing::Wall`](crate::Timing::Wall) an instance must be
///   `Running` from the moment its launch returned (a backend that declares
///   a `pending` window may also answer `Pending`);
///   a find or list that overlapped a launch of the name still under way may
///   see it `Pending` (a real backend's launch makes the instance before it
///   starts it).
/// * Histories are checked per name first (small searches, and a failure
///   shrunk to the calls about one name), then each deployment's taken
///   whole, where a list must see all its names at one instant.
/// * Only valid, trusted specs; the rules for invalid and untrusted specs,
///   time and exit codes are the sequential suite's ([`check_contract`](crate::check_contract)).
///
/// # Failures
///
/// A failing history is first shrunk to the fewest calls about its name that
/// still fail the check, then histories with fewer tasks and calls (the same
/// seed sequence, [`ConcurrentConfig::shrink_attempts`] each) are tried, and the smallest failing
/// history found is answered, one line per call and per fault around them.
///
/// # Where it runs
///
/// Each history builds its fixture, calls, and tears it down inside a tokio
/// runtime of its own: two worker threads with
/// [`multi_thread`](ConcurrentConfig::multi_thread), one otherwise. The tasks
/// are spawned on it, so the provider must be `'static`. The faults are made
/// from the history's own task, alongside the callers.
///
/// # Panics
///
/// Never on a wrong answer. A `config` with fewer than 2 or more than 4
/// tasks, no calls, or no names or more than 4 is answered as a failure
/// naming the field; so is a fixture the factory could not build, or a
/// fault it could not make.
pub fn check_concurrent<F>(
    factory: &F,
    config: ConcurrentConfig,
) -> Result<ConcurrentSummary, ConcurrentFailure>
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    let refuse = |reason: String| ConcurrentFailure {
        reason,
        seed: config.seed,
        calls: Vec::new(),
    };
    if !(2..=4).contains(&config.tasks) {
        return Err(refuse(format!(
            "ConcurrentConfig::tasks must be 2 to 4, not {}",
            config.tasks
        )));
    }
    if config.calls_per_task == 0 {
        return Err(refuse(
            "ConcurrentConfig::calls_per_task must be at least 1".to_owned(),
        ));
    }
    if !(1..=4).contains(&config.names) {
        return Err(refuse(format!(
            "ConcurrentConfig::names must be 1 to 4, not {}",
            config.names
        )));
    }
    let unknown = factory.policies().unknown_destroy;
    let started = Instant::now();
    let mut calls = 0;
    let mut faults = 0;
    let mut fault_errors = 0;
    for n in 0..config.histories {
        let seed = config.seed.wrapping_add(u64::from(n));
        let recorded = record(factory, &config, seed).map_err(|reason| ConcurrentFailure {
            reason,
            seed,
            calls: Vec::new(),
        })?;
        calls += (recorded.blue.len() + recorded.green.len()) as u64;
        faults += recorded.windows.len() as u64;
        fault_errors += recorded
            .blue
            .iter()
            .chain(&recorded.green)
            .filter(|r| {
                r.excuse != Excuse::None && matches!(r.answer, Answer::Failed(k) if outage_error(k))
            })
            .count() as u64;
        if let Err((reason, found, windows)) = check(&recorded, unknown) {
            let ((reason, found, windows), names) = shrink(factory, &config, seed, unknown)
                .filter(|((_, smaller, _), _)| smaller.len() < found.len())
                .unwrap_or(((reason, found, windows), recorded.names));
            return Err(ConcurrentFailure {
                reason,
                seed,
                calls: lines(&found, &windows, &names),
            });
        }
    }
    Ok(ConcurrentSummary {
        histories: config.histories,
        calls,
        faults,
        fault_errors,
        wall_time: started.elapsed(),
    })
}

/// [`check_concurrent`], panicking with the failure's report.
///
/// # Panics
///
/// When [`check_concurrent`] answers a failure.
pub fn assert_concurrent<F>(factory: &F, config: ConcurrentConfig) -> ConcurrentSummary
where
    F: ProviderFactory,
    F::Provider: 'static,
{
    match check_concurrent(factory, config) {
        Ok(summary) => summary,
        Err(failure) => panic!("{failure}"),
    }
}
