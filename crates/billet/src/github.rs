//! The GitHub Actions intake in the service (the G clauses): the webhook
//! and the deliveries it commits ([`webhook`], [`deliveries`]), which jobs
//! billet takes ([`take`]), which runners it keeps for them ([`demand`]),
//! the task that acts on both ([`intake`]), the provider wrapper that
//! registers a runner as it launches ([`registering`]), and how `serve`
//! puts them together ([`wiring`]). GitHub's side (payloads, signatures,
//! the API) is the `billet-github` crate's.

pub mod deliveries;
pub mod demand;
pub mod intake;
pub mod registering;
pub mod take;
pub mod webhook;
pub mod wiring;

pub use wiring::Github;
