//! The GitHub Actions intake in the service (the G clauses): the webhook
//! and the deliveries it commits ([`webhook`], [`deliveries`]), and which
//! runners billet keeps for the GitHub jobs it took ([`demand`]). GitHub's
//! side (payloads, signatures, the API) is the `billet-github` crate's.

pub mod deliveries;
pub mod demand;
pub mod intake;
pub mod registering;
pub mod take;
pub mod webhook;
