//! The billet fleet's scheduler: the allocator and placer that runs CI jobs on
//! the pools a `billet.yaml` configures.
//!
//! Two layers, as quinn-proto sits under quinn:
//!
//! * [`Core`] makes every decision and does no I/O (B1): fed inputs (a job
//!   submitted or cancelled, a provider call answered, time reached), it asks
//!   for provider calls ([`Action`]), reports what it decided ([`Decision`])
//!   and says when it next needs the time ([`Core::poll_timeout`]). Every
//!   decision is testable without a provider, and the same inputs in the same
//!   order give the same decisions (B10).
//! * The drivers perform the core's calls on `Arc<dyn Provider>`, with time
//!   from a [`Clock`](billet_clock::Clock). One loop, [`Driver`], runs the
//!   core on tokio with the calls concurrent; its owner plugs in its own
//!   inputs, a tap on every decision and a gate in front of every call
//!   ([`Hooks`]); the service's engine runs it with its commit gate. [`Inline`]
//!   makes each call in turn, in the
//!   order asked for, for a caller that steps modelled time (the harness).
//!
//! Both are built the same way ([`Pools`]): from a [`billet_config::Config`]
//! and one provider per configured provider name (B2); the deployment id is
//! the owner every provider was built for.
//!
//! ```
//! use std::sync::Arc;
//! use billet_scheduler::{Job, JobId, Pools};
//! # #[derive(Debug)] struct Stand;
//! # #[async_trait::async_trait] impl billet_provider::Provider for Stand {
//! #   fn kind(&self) -> billet_provider::ProviderKind { billet_provider::ProviderKind::Docker }
//! #   fn accepts(&self, _: billet_provider::TrustClass) -> Result<(), billet_provider::Error> { Ok(()) }
//! #   async fn launch(&self, s: billet_provider::Spec) -> Result<billet_provider::Instance, billet_provider::Error> { Err(billet_provider::Error::unavailable("doc")) }
//! #   async fn find(&self, _: &str) -> Result<Option<billet_provider::Instance>, billet_provider::Error> { Ok(None) }
//! #   async fn list(&self) -> Result<Vec<billet_provider::Instance>, billet_provider::Error> { Ok(vec![]) }
//! #   async fn destroy(&self, _: &billet_provider::InstanceId) -> Result<billet_provider::Teardown, billet_provider::Error> { Ok(billet_provider::Teardown::Absent) }
//! # }
//!
//! let config = billet_config::Config::from_yaml_str("
//! deployment: {id: ci-blue}
//! providers: [{name: linux, kind: docker, capacity: 4, docker: {image: runner}}]
//! routing: {default_kind: docker}
//! ").unwrap();
//! # let provider = Arc::new(Stand);
//! let pools = Pools::builder(config).provider("linux", provider).build().unwrap();
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let mut scheduler = billet_scheduler::Inline::new(&pools, Arc::new(billet_clock::SystemClock));
//! scheduler.start().await;
//! let job = Job::new(JobId(1), ["make", "test"]).with_trust(billet_provider::TrustClass::Trusted);
//! scheduler.submit(job).await.expect("accepted");
//! assert_eq!(scheduler.core().stats().accepted, 1);
//! # });
//! ```
//!
//! # Placement
//!
//! Routing follows `billet-config` (B3): see [`Target`] for the rule that
//! picks among pools with room. A job no pool could ever take is refused at
//! submission with a [`Refusal`]. Jobs wait by target, so a job waits only
//! behind jobs that want the pools it wants (B4).
//!
//! # Guarantees
//!
//! See [`Core`] for launches and retries (B5), reconciliation (B6), orphans
//! (B7), restarts (B8), outcomes (B9), and [`Stats`] for what can be read
//! while it runs (B11).
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod core;
mod driver;
mod inline;
mod job;
mod pools;
mod protocol;
mod routing;
mod settings;
mod stats;

pub use crate::core::Core;
pub use crate::driver::{CallEnded, Driver, Flow, Gate, Hooks, Turn, Waiting};
pub use crate::inline::{Inline, perform};
pub use crate::job::{FailReason, Identity, InstanceName, Job, JobId, Outcome};
pub use crate::pools::{BuildError, Pools, PoolsBuilder};
pub use crate::protocol::{Action, Answer, Call, CallId, Decision, OrphanFate};
pub use crate::routing::{PoolId, PoolInfo, Refusal, Target};
pub use crate::settings::Settings;
pub use crate::stats::{PoolStats, Stats};
