//! What the tasks and the fault-maker share while a history runs
//! ([`Recording`]), and the random source of a seed ([`rng_of`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use billet_provider::InstanceId;
use proptest::test_runner::{RngAlgorithm, TestRng};

use crate::Fixture;

use super::history::Record;

/// The random source of one seed (proptest's ChaCha generator).
pub(super) fn rng_of(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// What every task shares while a history runs.
pub(super) struct Recording<P> {
    pub(super) fixture: Fixture<P>,
    pub(super) second: Option<P>,
    pub(super) names: Vec<String>,
    pub(super) command: Vec<String>,
    pub(super) image: String,
    pub(super) pending_allowed: bool,
    /// Whether the fixture tells wall time, where an instance may be
    /// `Pending` while a launch of its name is still under way.
    pub(super) wall: bool,
    /// Launches of each (deployment, name) begun and ended so far.
    pub(super) launches: Mutex<Vec<(u64, u64)>>,
    pub(super) clock: AtomicU64,
    /// Told whenever `clock` moves or the tasks are done: what the faults
    /// wait on.
    pub(super) moved: tokio::sync::Notify,
    /// Whether every task is done.
    pub(super) done: AtomicBool,
    /// The last id seen of each (deployment, name): what a destroy names.
    pub(super) known: Mutex<Vec<Option<InstanceId>>>,
    pub(super) records: Mutex<Vec<Record>>,
    pub(super) wrong: Mutex<Option<(String, Record)>>,
}
