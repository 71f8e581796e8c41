//! The test-only harness of the billet fleet. **Test-only**: `publish = false`
//! and marked `[package.metadata.billet] test-only = true`; no production
//! crate depends on it.
//!
//! * [`contract`]: property tests of the provider contract (H1) that any
//!   backend runs from its own tests in a few lines.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod contract;
