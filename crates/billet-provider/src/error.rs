//! [`Error`] and [`ErrorKind`]: every way a provider can refuse or fail.

use std::sync::Arc;

use crate::{InstanceId, ProviderKind, TrustClass};

/// The cause behind an [`Error::InventoryUnavailable`] or [`Error::Unavailable`],
/// shared so that [`Error`] stays [`Clone`].
pub type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Every way a provider refuses a request or fails to answer one.
///
/// Each variant carries what a caller acts on. Match on [`Error::kind`] to
/// decide what to do; the messages are for people and may change.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The backend refuses work of this trust class: it has no isolation
    /// boundary that would make running it safe.
    #[error("{kind} backend refuses {trust} work: it has no isolation boundary for it")]
    Refused {
        /// The trust class that was refused.
        trust: TrustClass,
        /// The backend that refused it.
        kind: ProviderKind,
    },
    /// The spec cannot be started as written; `reason` says why and what was expected.
    #[error("invalid spec: {reason}")]
    InvalidSpec {
        /// What is wrong with the spec, and what form was expected.
        reason: String,
    },
    /// This deployment already holds an instance with that name.
    #[error("this deployment already holds an instance named {name:?}")]
    Conflict {
        /// The name that is already held.
        name: String,
    },
    /// The id names an instance that belongs to another deployment; it was left untouched.
    #[error(
        "instance {id} belongs to deployment {owner:?}, not to this one; it was left untouched"
    )]
    NotOwned {
        /// The id that was asked for.
        id: InstanceId,
        /// The deployment that owns it.
        owner: String,
    },
    /// This deployment holds no instance with that id (destroyed, or never
    /// launched): what an instance's [`Output`](crate::Output) answers once
    /// it is gone.
    #[error("this deployment holds no instance {id}")]
    NotFound {
        /// The id that was asked for.
        id: InstanceId,
    },
    /// The deployment identity a provider was built for is not usable.
    #[error("invalid deployment identity {owner:?}: {reason}")]
    InvalidOwner {
        /// The identity that was given.
        owner: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The backend cannot answer its inventory now. Callers must treat the
    /// inventory as unknown, never as empty.
    #[error("inventory unavailable: {source}")]
    InventoryUnavailable {
        /// What made the inventory unavailable.
        source: Cause,
    },
    /// The backend cannot be reached or failed while serving a request.
    #[error("backend unavailable: {source}")]
    Unavailable {
        /// What made the backend unavailable.
        source: Cause,
    },
}

/// The kind of an [`Error`], without its data: what tests and callers match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`Error::Refused`].
    Refused,
    /// See [`Error::InvalidSpec`].
    InvalidSpec,
    /// See [`Error::Conflict`].
    Conflict,
    /// See [`Error::NotOwned`].
    NotOwned,
    /// See [`Error::NotFound`].
    NotFound,
    /// See [`Error::InvalidOwner`].
    InvalidOwner,
    /// See [`Error::InventoryUnavailable`].
    InventoryUnavailable,
    /// See [`Error::Unavailable`].
    Unavailable,
}

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Refused { .. } => ErrorKind::Refused,
            Error::InvalidSpec { .. } => ErrorKind::InvalidSpec,
            Error::Conflict { .. } => ErrorKind::Conflict,
            Error::NotOwned { .. } => ErrorKind::NotOwned,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::InvalidOwner { .. } => ErrorKind::InvalidOwner,
            Error::InventoryUnavailable { .. } => ErrorKind::InventoryUnavailable,
            Error::Unavailable { .. } => ErrorKind::Unavailable,
        }
    }

    /// An [`Error::InvalidSpec`] with this reason.
    pub fn invalid_spec(reason: impl Into<String>) -> Self {
        Error::InvalidSpec {
            reason: reason.into(),
        }
    }

    /// An [`Error::Refused`]: a backend of `kind` refuses work of `trust`.
    /// [`accepts_trust`](crate::accepts_trust) answers it for you.
    pub fn refused(trust: TrustClass, kind: ProviderKind) -> Self {
        Error::Refused { trust, kind }
    }

    /// An [`Error::Conflict`]: this deployment already holds `name`.
    pub fn conflict(name: impl Into<String>) -> Self {
        Error::Conflict { name: name.into() }
    }

    /// An [`Error::NotOwned`]: `id` is held by deployment `owner` (empty for
    /// an instance no deployment started), not by this one.
    pub fn not_owned(id: InstanceId, owner: impl Into<String>) -> Self {
        Error::NotOwned {
            id,
            owner: owner.into(),
        }
    }

    /// An [`Error::NotFound`]: this deployment holds no instance `id`.
    pub fn not_found(id: InstanceId) -> Self {
        Error::NotFound { id }
    }

    /// An [`Error::InvalidOwner`]: `owner` cannot be a deployment identity, for `reason`.
    pub fn invalid_owner(owner: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidOwner {
            owner: owner.into(),
            reason: reason.into(),
        }
    }

    /// An [`Error::InventoryUnavailable`] with this cause (an error or a message).
    pub fn inventory_unavailable(
        cause: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::InventoryUnavailable {
            source: Arc::from(cause.into()),
        }
    }

    /// An [`Error::Unavailable`] with this cause (an error or a message).
    pub fn unavailable(
        cause: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        Error::Unavailable {
            source: Arc::from(cause.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    // P6: every variant has a constructor, and each builds exactly the
    // variant it names with the data it was given.
    #[test]
    fn p6_constructors_build_the_variant_they_name() {
        let refused = Error::refused(TrustClass::Untrusted, ProviderKind::Docker);
        assert!(matches!(
            refused,
            Error::Refused {
                trust: TrustClass::Untrusted,
                kind: ProviderKind::Docker
            }
        ));
        assert!(matches!(Error::conflict("job-1"), Error::Conflict { name } if name == "job-1"));
        let id = InstanceId::from("i-1".to_owned());
        assert!(matches!(
            Error::not_owned(id.clone(), "green"),
            Error::NotOwned { id: got, owner } if got == id && owner == "green"
        ));
        assert!(matches!(
            Error::not_found(id.clone()),
            Error::NotFound { id: got } if got == id
        ));
        assert!(matches!(
            Error::invalid_owner(" ", "empty"),
            Error::InvalidOwner { owner, reason } if owner == " " && reason == "empty"
        ));
    }

    // P6: each variant carries what a caller acts on, and kind() names it.
    #[test]
    fn p6_variants_carry_their_data_and_kind() {
        let refused = Error::Refused {
            trust: TrustClass::Untrusted,
            kind: ProviderKind::Docker,
        };
        assert_eq!(refused.kind(), ErrorKind::Refused);
        let msg = refused.to_string();
        assert!(msg.contains("untrusted") && msg.contains("docker"), "{msg}");

        let not_owned = Error::NotOwned {
            id: "i-9".into(),
            owner: "blue".into(),
        };
        assert_eq!(not_owned.kind(), ErrorKind::NotOwned);
        assert!(not_owned.to_string().contains("i-9"));
        assert!(not_owned.to_string().contains("blue"));

        assert_eq!(Error::invalid_spec("x").kind(), ErrorKind::InvalidSpec);
        assert_eq!(
            Error::Conflict { name: "n".into() }.kind(),
            ErrorKind::Conflict
        );
        assert_eq!(Error::unavailable("down").kind(), ErrorKind::Unavailable);
    }

    // P6: the inventory error keeps its cause, and the error is Clone.
    #[test]
    fn p6_inventory_unavailable_keeps_its_cause_and_clones() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "daemon gone");
        let err = Error::inventory_unavailable(io);
        let copy = err.clone();
        assert_eq!(err.kind(), ErrorKind::InventoryUnavailable);
        assert_eq!(copy.kind(), ErrorKind::InventoryUnavailable);
        assert!(copy.to_string().contains("daemon gone"));
        let source = copy.source().expect("the cause is the source");
        assert_eq!(source.to_string(), "daemon gone");
    }
}
