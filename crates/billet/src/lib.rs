//! billet as a service: `billet serve` takes CI jobs over HTTP, keeps them in
//! a durable store, and runs them on the configured pools through
//! `billet-scheduler` (L1-L9).
//!
//! # Layout
//!
//! * [`cli`]: the command line; [`service`]: start, serve, stop.
//! * [`engine`]: the task that owns the scheduler's core, performs its calls,
//!   and commits what it decides before acting on it.
//! * [`store`] and the writer behind it: SQLite, one transaction per group
//!   of changes; [`record`]: a job's record and the changes that move it;
//!   [`jobs`]: the table of them every answer reads.
//! * [`listener`]: connections, with their timeouts and cap; [`http`]: the
//!   routes; [`api`]: request checks and the job as shown; [`token`]: the
//!   credentials and their grants; [`metrics`]: Prometheus text.
//! * [`http::page`]: the status page at `GET /` (HTML, signed in by a
//!   cookie); [`history`]: the pools' recent counts its charts draw.
//! * [`backends`]: one provider per configured pool (docker).
//!
//! # Guarantees
//!
//! * An accepted job is committed before it is answered, and every change a
//!   decision makes is committed before the provider call that follows it:
//!   a crash at any moment loses no accepted job, and a restart adopts
//!   instances rather than starting them twice (L6).
//! * A bad request is answered `4xx` naming the field and records nothing
//!   (L5).
//! * The simulated backend is never built: the configuration refuses its
//!   kind, and this crate does not depend on it (L1, X1).

#![deny(missing_docs)]
#![warn(unreachable_pub)]

pub mod api;
pub mod backends;
pub mod cli;
pub mod client;
mod commit;
pub mod engine;
pub mod github;
pub mod history;
pub mod http;
pub mod jobs;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod output;
pub mod record;
pub mod service;
pub mod store;
pub mod token;

pub use crate::service::{Limits, ServeError, ServeOptions, Service, serve};
pub use crate::store::Store;
