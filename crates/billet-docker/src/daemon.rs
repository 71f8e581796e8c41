//! [`DaemonError`]: what went wrong talking to the daemon, and how each call is
//! bounded by the deadline of the method that makes it.

use std::fmt;
use std::future::Future;
use std::time::Duration;

/// Why one call to the docker daemon failed. The cause inside
/// [`Error::InventoryUnavailable`](billet_provider::Error::InventoryUnavailable)
/// and [`Error::Unavailable`](billet_provider::Error::Unavailable) answered by a
/// [`DockerProvider`](crate::DockerProvider); callers may downcast to it.
#[derive(Debug)]
pub struct DaemonError {
    /// The daemon's endpoint, as the provider was built with it.
    pub endpoint: String,
    /// The API call that failed (`create container`, `list containers`, ...).
    pub operation: &'static str,
    /// What happened.
    pub failure: Failure,
}

/// What happened to a call to the daemon.
#[derive(Debug)]
#[non_exhaustive]
pub enum Failure {
    /// The daemon did not answer before the deadline of the method making the
    /// call: the method's whole budget (the provider's timeout, or its pull
    /// bound for a pull) is carried.
    Timeout(Duration),
    /// The daemon could not be reached, or the connection broke mid-call (the
    /// socket is missing, refused, or closed).
    Connection(bollard::errors::Error),
    /// The daemon answered, but with what billet cannot read (a state no
    /// engine documents, a field of the wrong type): never taken as success
    /// (D13).
    Unreadable(String),
    /// The daemon answered with an HTTP error status.
    Status {
        /// The HTTP status code.
        code: u16,
        /// The daemon's message.
        message: String,
    },
}

impl DaemonError {
    pub(crate) fn new(endpoint: &str, operation: &'static str, failure: Failure) -> Self {
        DaemonError {
            endpoint: endpoint.to_owned(),
            operation,
            failure,
        }
    }

    /// The HTTP status the daemon answered, if it answered one.
    pub fn status(&self) -> Option<u16> {
        match self.failure {
            Failure::Status { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl DaemonError {
    /// Whether the request surely never reached the daemon: the connection
    /// was refused, or the socket is missing. Any other failure may have
    /// come after the daemon received the request.
    pub(crate) fn surely_unsent(&self) -> bool {
        match &self.failure {
            Failure::Connection(bollard::errors::Error::HyperLegacyError { err }) => {
                err.is_connect()
            }
            Failure::Connection(bollard::errors::Error::SocketNotFoundError(_)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for DaemonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (endpoint, op) = (&self.endpoint, self.operation);
        match &self.failure {
            Failure::Timeout(limit) => write!(
                f,
                "docker daemon at {endpoint} did not answer `{op}` before the deadline ({limit:?} for the whole provider call)"
            ),
            Failure::Connection(err) => {
                write!(
                    f,
                    "docker daemon at {endpoint} unreachable during `{op}`: {err}"
                )
            }
            Failure::Unreadable(what) => write!(
                f,
                "docker daemon at {endpoint} answered `{op}` with what billet cannot read: {what}"
            ),
            Failure::Status { code, message } => write!(
                f,
                "docker daemon at {endpoint} answered {code} to `{op}`: {message}"
            ),
        }
    }
}

impl std::error::Error for DaemonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.failure {
            Failure::Connection(err) => Some(err),
            _ => None,
        }
    }
}

/// When a method must have answered: one deadline for every daemon call the
/// method makes, not a timeout per call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: tokio::time::Instant,
    budget: Duration,
}

impl Deadline {
    /// A deadline `budget` from now.
    pub(crate) fn after(budget: Duration) -> Deadline {
        Deadline {
            at: tokio::time::Instant::now() + budget,
            budget,
        }
    }

    /// Whether the deadline has passed.
    pub(crate) fn passed(&self) -> bool {
        tokio::time::Instant::now() >= self.at
    }
}

/// Runs one daemon call, bounded by `deadline`, and sorts its failure.
pub(crate) async fn bounded<T>(
    endpoint: &str,
    operation: &'static str,
    deadline: Deadline,
    call: impl Future<Output = Result<T, bollard::errors::Error>>,
) -> Result<T, DaemonError> {
    let failure = match tokio::time::timeout_at(deadline.at, call).await {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(bollard::errors::Error::DockerResponseServerError {
            status_code,
            message,
        })) => Failure::Status {
            code: status_code,
            message,
        },
        Ok(Err(err @ bollard::errors::Error::JsonDataError { .. })) => {
            Failure::Unreadable(err.to_string())
        }
        Ok(Err(bollard::errors::Error::RequestTimeoutError)) | Err(_) => {
            Failure::Timeout(deadline.budget)
        }
        Ok(Err(err)) => Failure::Connection(err),
    };
    Err(DaemonError::new(endpoint, operation, failure))
}
