//! The reference model of the provider contract: what two deployments on one
//! host must answer, as a `proptest-state-machine` sequential strategy
//! ([`strategy`](fn@strategy)) over [`ModelState`].
//!
//! Times are offsets from the case's start, and instances are named by the
//! order of their successful launches, so the model needs nothing from the
//! backend but its [`Policies`](crate::Policies) and, under wall timing, the
//! windows its run times and clock moves are scaled to ([`Pace`]). Under wall
//! timing the model's time is only the sum of the moves asked for: the system
//! under test checks states against the wall clock, never against it.
//!
//! This file only gathers the model's parts, one concern a file: `transition`
//! (the steps and the lines they print as), `parse` (reading a printed step
//! back), `state` (the reference state and the answers it expects), `apply`
//! (what a step does to the state, and when it may be taken), `pace` (how a
//! case's time passes) and `strategy`
//! (the random steps drawn, and the strategy of whole sequences).

mod apply;
mod pace;
mod parse;
mod state;
mod strategy;
#[cfg(test)]
mod test_support;
mod transition;

pub(crate) use pace::Pace;
pub(crate) use parse::parse_step;
pub(crate) use state::{DestroyOutcome, Doubt, LaunchOutcome, ModelState};
pub(crate) use strategy::strategy;
pub(crate) use transition::{Command, Miss, Nudge, Side, Target, Transition};
