//! The test-only harness of the billet fleet. **Test-only**: `publish = false`
//! and marked `[package.metadata.billet] test-only = true`; no production
//! crate depends on it.
//!
//! * [`scenario`]: seeded workloads ([`workload`]), several deployments over
//!   one simulated host, a fault schedule of inventory outages, and a
//!   [`ManualClock`](billet_clock::ManualClock) moved from event to event, so a
//!   modelled day takes seconds.
//!   Every deployment shares one [`Layout`](scenario::Layout): its pools
//!   (configured kinds and shares of its leases) and routing, from which its
//!   `billet.yaml` is made in code; jobs carry labels and trust. A scenario may
//!   also restart a deployment's scheduler mid-run and leave stray instances
//!   on the host for it to collect (H10).
//! * [`scheduler`]: the [`Scheduler`](scheduler::Scheduler) trait through which a
//!   scheduler under test plugs in; [`production`], the production scheduler
//!   (`billet-scheduler`, one per deployment) behind it (H10); and
//!   [`reference`](mod@reference), the harness's own reference scheduler (H3).
//! * [`run`]: the driver, which checks after every step that no pool and no
//!   deployment is over capacity, that no lease is freed while its instance
//!   runs, that every job ends in exactly one outcome, that no orphan outlives
//!   its grace period and that nothing leaks; the same seed gives the same
//!   trace digest.
//! * [`report`]: what a run measured, and its chart.
//! * [`github`]: a simulated GitHub, on the scenario's clock, that the
//!   service's GitHub intake meets at fleet scale (H14,
//!   [`service::Intake::Github`]).
//! * [`trace`]: recorded workloads in the Standard Workload Format (SWF),
//!   replayed lazily through the same scenario, scheduler and report (T1, T2).
//!
//! The provider contract's property tests (H1) are not here: they live in
//! `billet-conformance`, which depends on no backend (H9).
//!
//! # Running a scenario
//!
//! ```
//! use billet_harness::production::ProductionScheduler;
//! use billet_harness::reference::ReferenceScheduler;
//! use billet_harness::scenario::{Fleet, Scenario};
//!
//! // The reference scheduler's shape: one pool per deployment, no labels.
//! let scenario = Scenario::fleet(Fleet { jobs: 2_000, concurrency: 100, ..Fleet::default() });
//! let report = scenario.run(ReferenceScheduler::new).expect("the invariants hold");
//! assert_eq!(report.finished + report.refused, 2_000);
//! assert_eq!(report.peak_leases, 100);
//! println!("{report}");
//!
//! // The production scheduler's: three routed pools, labels, a restart, strays.
//! let fleet = Fleet { jobs: 2_000, concurrency: 100, ..Fleet::production() };
//! let report = Scenario::fleet(fleet).run(ProductionScheduler::new).expect("the invariants hold");
//! assert_eq!(report.finished + report.refused, 2_000);
//! assert_eq!((report.restarts, report.orphans_collected), (1, 2));
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod github;
pub mod production;
pub mod reference;
pub mod report;
pub mod run;
pub mod scenario;
pub mod scheduler;
pub mod service;
pub mod trace;
pub mod workload;
