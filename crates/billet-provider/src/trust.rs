//! [`accepts_trust`]: the one rule every backend's `accepts` answers, and the
//! [`Isolation`] it turns on.

use crate::{Error, ProviderKind, TrustClass};

/// Whether a backend runs work behind an isolation boundary: what decides
/// which trust classes it may take (see [`accepts_trust`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// No isolation boundary: the work shares the host's kernel (docker
    /// containers), or nothing runs at all and so nothing isolates (the
    /// simulated backend). Only trusted work may run.
    NoBoundary,
    /// An isolation boundary between the work and the host (a microVM, say):
    /// work of every trust class may run.
    Boundary,
}

/// The `accepts` rule of the [`Provider`](crate::Provider) contract (P7), for
/// a backend of `kind` with `isolation`: whether work of `trust` may run there.
///
/// * [`TrustClass::Trusted`] is accepted whatever the isolation.
/// * [`TrustClass::Untrusted`] and [`TrustClass::Unknown`] are accepted only
///   with [`Isolation::Boundary`]; without one they are refused with
///   [`Error::Refused`] carrying `trust` and `kind`. Unknown is refused
///   alongside untrusted: work nobody classified has not been shown to be safe.
///
/// A backend's [`Provider::accepts`](crate::Provider::accepts) answers this
/// with its own kind and isolation, so every backend applies the same rule.
///
/// ```
/// use billet_provider::{ErrorKind, Isolation, ProviderKind, TrustClass, accepts_trust};
///
/// let docker = |trust| accepts_trust(ProviderKind::Docker, Isolation::NoBoundary, trust);
/// assert!(docker(TrustClass::Trusted).is_ok());
/// assert_eq!(docker(TrustClass::Unknown).unwrap_err().kind(), ErrorKind::Refused);
/// assert!(accepts_trust(ProviderKind::Firecracker, Isolation::Boundary, TrustClass::Untrusted).is_ok());
/// ```
pub fn accepts_trust(
    kind: ProviderKind,
    isolation: Isolation,
    trust: TrustClass,
) -> Result<(), Error> {
    match (trust, isolation) {
        (TrustClass::Trusted, _) | (_, Isolation::Boundary) => Ok(()),
        (refused, Isolation::NoBoundary) => Err(Error::Refused {
            trust: refused,
            kind,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // P7: without an isolation boundary only Trusted passes; Unknown is
    // refused alongside Untrusted, and the refusal names the trust class and
    // the kind that refused it.
    #[test]
    fn p7_without_a_boundary_only_trusted_passes() {
        for kind in ProviderKind::ALL {
            assert!(accepts_trust(kind, Isolation::NoBoundary, TrustClass::Trusted).is_ok());
            for trust in [TrustClass::Unknown, TrustClass::Untrusted] {
                match accepts_trust(kind, Isolation::NoBoundary, trust) {
                    Err(Error::Refused {
                        trust: refused,
                        kind: by,
                    }) => {
                        assert_eq!((refused, by), (trust, kind));
                    }
                    other => panic!("{kind} without a boundary answered {other:?} for {trust}"),
                }
            }
        }
    }

    // P7: with an isolation boundary every trust class passes.
    #[test]
    fn p7_with_a_boundary_every_trust_class_passes() {
        for kind in ProviderKind::ALL {
            for trust in TrustClass::ALL {
                assert!(
                    accepts_trust(kind, Isolation::Boundary, trust).is_ok(),
                    "{kind} with a boundary refused {trust}"
                );
            }
        }
    }
}
