//! The GitHub Actions intake's decisions in the service (the G clauses):
//! which runners billet keeps for the GitHub jobs it took
//! ([`demand`]). GitHub's side (deliveries, signatures, the API) is the
//! `billet-github` crate's.

pub mod demand;
