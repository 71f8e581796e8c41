//! The workspace's own tasks, as a library so that tests elsewhere can run them.
//!
//! * [`ci`]: `cargo xtask ci`, every check and test in order.
//! * [`deps`]: `cargo xtask deps`, the proof that no production crate depends on
//!   `billet-simulated`. A test in `billet-simulated` calls [`deps::check`] over
//!   the real workspace (SPEC clause X4).
//! * [`mutants`]: `cargo xtask mutants`, mutation testing (cargo-mutants) as a gate.
//! * [`tools`]: the cargo tools `ci` runs, installed at their pinned versions
//!   when missing.
//!
//! The `xtask` binary (`src/main.rs`) only parses the command line and calls in here.

#![deny(missing_docs)]

pub mod ci;
pub mod deps;
pub mod mutants;
pub mod tools;
mod workspace;
