//! The workspace's own tasks, as a library so that tests elsewhere can run them.
//!
//! * [`ci`]: `cargo xtask ci`, every check and test in order.
//! * [`contract`]: `docs/contract.md` against the tree: every clause id
//!   cited is listed, every listed clause is named by a test (a tidy test).
//! * [`deps`]: `cargo xtask deps`, the proof that no production crate depends on
//!   `billet-simulated`. A test in `billet-simulated` calls [`deps::check`] over
//!   the real workspace (clause X4).
//! * [`modules`]: the module graph inside each crate, read from the code,
//!   and its circles (the tidy test `no_module_circle_in_any_crate`).
//! * [`mutants`]: `cargo xtask mutants`, mutation testing (cargo-mutants) as a gate.
//! * [`tools`]: the cargo tools `ci` runs, installed at their pinned versions
//!   when missing.
//!
//! The `xtask` binary (`src/main.rs`) only parses the command line and calls in here.

#![deny(missing_docs)]

pub mod ci;
pub mod contract;
pub mod deps;
pub mod modules;
pub mod mutants;
pub mod tools;
mod workspace;
