//! A compute backend that starts no compute. **Test-only.**
//!
//! An instance here is a record that reports itself running until a modelled
//! duration, named in its command, has elapsed, and stopped afterwards. It
//! exists so that a workload of thousands of concurrent leases can run through
//! a real scheduler on one laptop in seconds: nothing about a placement
//! decision needs a guest to exist.
//!
//! # None of the contract is weakened
//!
//! [`SimulatedProvider`] keeps every obligation of
//! [`billet_provider::Provider`]: `list` errors rather than answering short
//! (a harness whose inventory may lie proves nothing about a scheduler that
//! trusts it), `destroy` is scoped by deployment identity, and untrusted or
//! unclassified work is refused, since there is no boundary here at all.
//!
//! # It never reaches production
//!
//! The configuration crate refuses the simulated kind wherever a file could
//! name it, and `cargo xtask deps` fails the build when any crate not marked
//! test-only depends on this one. This crate is `publish = false` and marked
//! `[package.metadata.billet] test-only = true`.
//!
//! # The contract suite
//!
//! [`SimulatedFactory`] (in [`conformance`]) builds this backend's fixtures
//! for the contract suite of `billet-conformance`: modelled time (the big run)
//! or the system clock with whole-connection outages through [`Severable`].
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::{Duration, SystemTime};
//! use billet_clock::ManualClock;
//! use billet_provider::{Provider, Spec, State, TrustClass};
//! use billet_simulated::{Host, SimulatedProvider, run_for};
//!
//! # block_on(async {
//! let clock = ManualClock::new(SystemTime::UNIX_EPOCH);
//! let host = Host::new();
//! let blue = SimulatedProvider::builder("blue")
//!     .host(host.clone())
//!     .clock(Arc::new(clock.clone()))
//!     .build()?;
//! let spec = Spec::new("job-1", run_for(Duration::from_secs(90)))
//!     .with_trust(TrustClass::Trusted);
//! let instance = blue.launch(spec).await?;
//! assert_eq!(instance.state, State::Running);
//! clock.advance(Duration::from_secs(90)).unwrap();
//! assert_eq!(blue.list().await?[0].state, State::Stopped { exit_code: 0 });
//! # Ok::<(), billet_provider::Error>(())
//! # }).unwrap();
//! # fn block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod capabilities;
mod command;
pub mod conformance;
mod host;
mod provider;

pub use command::{
    PROGRAM, VERB, WRITING, parse_run_for, parse_run_for_writing, run_for, run_for_writing,
};
pub use conformance::{Severable, SimulatedFactory};
pub use host::HINT_BUFFER;
pub use host::Host;
pub use provider::{Builder, SimulatedProvider};
