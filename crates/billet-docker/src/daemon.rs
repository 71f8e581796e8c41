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
                // The reason is often deep in the chain (a refused
                // connection, a certificate the CA did not sign): say each
                // cause the text does not already hold.
                let mut text = err.to_string();
                let mut source = std::error::Error::source(err);
                while let Some(cause) = source {
                    let said = cause.to_string();
                    if !text.contains(&said) {
                        text = format!("{text}: {said}");
                    }
                    source = cause.source();
                }
                write!(
                    f,
                    "docker daemon at {endpoint} unreachable during `{op}`: {text}"
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

    /// Sleeps `pause`, or until the deadline if that comes first.
    pub(crate) async fn sleep(&self, pause: Duration) {
        let until = tokio::time::Instant::now() + pause;
        tokio::time::sleep_until(until.min(self.at)).await;
    }

    /// Whether the deadline has passed.
    pub(crate) fn passed(&self) -> bool {
        tokio::time::Instant::now() >= self.at
    }
}

/// What a failed daemon call's error means; `budget` is the bound a
/// timeout is reported with.
pub(crate) fn failure_of(err: bollard::errors::Error, budget: Duration) -> Failure {
    match err {
        bollard::errors::Error::DockerResponseServerError {
            status_code,
            message,
        } => Failure::Status {
            code: status_code,
            message,
        },
        err @ bollard::errors::Error::JsonDataError { .. } => Failure::Unreadable(err.to_string()),
        bollard::errors::Error::RequestTimeoutError => Failure::Timeout(budget),
        err => Failure::Connection(err),
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
        Ok(Err(err)) => failure_of(err, deadline.budget),
        Err(_) => Failure::Timeout(deadline.budget),
    };
    Err(DaemonError::new(endpoint, operation, failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure_of(answer: bollard::errors::Error) -> DaemonError {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        let outcome = runtime.block_on(async move {
            let deadline = Deadline::after(Duration::from_secs(5));
            bounded::<()>(
                "unix:///test.sock",
                "inspect container",
                deadline,
                async move { Err(answer) },
            )
            .await
        });
        outcome.unwrap_err()
    }

    // D13, D18: an answer bollard could not read (a state word no engine
    // documents) is an error saying the daemon answered what billet cannot
    // read, never "unreachable" and never success; a status keeps its code.
    #[test]
    fn d18_an_unreadable_answer_is_its_own_failure() {
        let err = failure_of(bollard::errors::Error::JsonDataError {
            message: "unknown variant `unknown`".to_owned(),
            contents: String::new(),
            column: 3,
        });
        assert!(matches!(err.failure, Failure::Unreadable(_)), "{err:?}");
        assert!(err.to_string().contains("cannot read"), "{err}");
        assert!(err.to_string().contains("unknown variant"), "{err}");
        assert_eq!(err.status(), None);
        assert!(!err.surely_unsent());
        let err = failure_of(bollard::errors::Error::DockerResponseServerError {
            status_code: 500,
            message: "that name is already in use".to_owned(),
        });
        assert_eq!(err.status(), Some(500));
        assert!(err.to_string().contains("answered 500"), "{err}");
    }
}
