//! The test-only harness of the billet fleet. **Test-only**: `publish = false`
//! and marked `[package.metadata.billet] test-only = true`; no production
//! crate depends on it.
//!
//! * [`scenario`]: seeded workloads ([`workload`]), several deployments over
//!   one simulated host, a fault schedule of inventory outages, and a
//!   [`ManualClock`](billet_clock::ManualClock) moved from event to event, so a
//!   modelled day takes seconds.
//! * [`scheduler`]: the [`Scheduler`](scheduler::Scheduler) trait through which a
//!   scheduler under test plugs in, and [`reference`](mod@reference), the
//!   harness's own reference scheduler.
//! * [`run`]: the driver, which checks after every step that capacity is never
//!   exceeded, that no lease is freed while its instance runs, that every job
//!   finishes and that nothing leaks; the same seed gives the same trace digest.
//! * [`report`]: what a run measured, and its chart.
//!
//! The provider contract's property tests (H1) are not here: they live in
//! `billet-conformance`, which depends on no backend (H9).
//!
//! # Running a scenario
//!
//! ```
//! use billet_harness::reference::ReferenceScheduler;
//! use billet_harness::scenario::{Fleet, Scenario};
//!
//! let scenario = Scenario::fleet(Fleet { jobs: 2_000, concurrency: 100, ..Fleet::default() });
//! let report = scenario.run(ReferenceScheduler::new).expect("the invariants hold");
//! assert_eq!(report.finished + report.refused, 2_000);
//! assert_eq!(report.peak_leases, 100);
//! println!("{report}");
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod reference;
pub mod report;
pub mod run;
pub mod scenario;
pub mod scheduler;
pub mod workload;
