//! GitHub's side of billet's GitHub Actions intake (the G clauses of the contract):
//! what a webhook delivery is and whether GitHub sent it, which pool's labels
//! a job fits, and how far GitHub's own facts let a job be trusted.
//!
//! This crate knows nothing of billet's service: no store, no scheduler, no
//! HTTP server. The service wires it: it checks a delivery's signature with
//! [`verify_signature`] over the raw body before it parses anything, reads
//! the delivery with [`Delivery::parse`], picks the pool with [`fits`], and
//! lowers a job's trust with [`job_trust`].
//!
//! ```
//! use billet_github::{Delivery, sign, verify_signature};
//!
//! let secret = b"webhook secret";
//! let body = br#"{"zen": "Keep it logically awesome.", "hook_id": 1}"#;
//! let header = sign(secret, body);
//! assert!(verify_signature(secret, body, Some(&header)).is_ok());
//! assert!(matches!(Delivery::parse("ping", body), Ok(Delivery::Ping)));
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod api;
mod delivery;
mod labels;
mod signature;
mod trust;

pub use api::{
    API_VERSION, Api, ApiError, CALL_TIMEOUT, Credential, DEFAULT_BACKOFF, JitConfig, JobStatus,
    MAX_BACKOFF, MAX_PAGES, PER_PAGE, Removed, Runner, Scope, TOKEN_RENEWAL, WorkflowRun,
};
pub use delivery::{
    Action, Delivery, DeliveryError, Organization, Repository, WorkflowJob, WorkflowJobEvent,
};
pub use labels::fits;
pub use signature::{SIGNATURE_HEADER, SignatureError, sign, verify_signature};
pub use trust::{RunFacts, job_trust};
