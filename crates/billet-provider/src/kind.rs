//! [`ProviderKind`]: the name of every compute backend.

use std::fmt;
use std::str::FromStr;

/// The kind of compute backend a provider drives.
///
/// Every backend, the simulated one included, has a kind here: `kind()` must be
/// able to name whatever answers it. Refusing the simulated kind in a
/// configuration is the configuration crate's job, not this type's.
///
/// [`Display`](fmt::Display) and [`FromStr`] use the lower-case names
/// `docker`, `tart`, `firecracker` and `simulated`; `FromStr` accepts exactly
/// those spellings and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProviderKind {
    /// Docker containers on a docker daemon.
    Docker,
    /// macOS virtual machines managed by tart.
    Tart,
    /// Firecracker microVMs started through the jailer.
    Firecracker,
    /// The simulated backend: records that start no compute. Test-only.
    Simulated,
}

impl ProviderKind {
    /// Every kind, in declaration order.
    pub const ALL: [ProviderKind; 4] = [
        ProviderKind::Docker,
        ProviderKind::Tart,
        ProviderKind::Firecracker,
        ProviderKind::Simulated,
    ];

    /// The lower-case name, as [`Display`](fmt::Display) prints it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Docker => "docker",
            ProviderKind::Tart => "tart",
            ProviderKind::Firecracker => "firecracker",
            ProviderKind::Simulated => "simulated",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error [`ProviderKind::from_str`] answers for a name that is not a kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider kind {given:?}: expected one of docker, tart, firecracker, simulated")]
pub struct UnknownKind {
    /// The text that was given, unchanged.
    pub given: String,
}

impl FromStr for ProviderKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownKind {
                given: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // P8: every kind, the simulated one included, round-trips through its lower-case name.
    #[test]
    fn p8_display_and_from_str_round_trip_in_lower_case() {
        for kind in ProviderKind::ALL {
            let name = kind.to_string();
            assert_eq!(name, name.to_lowercase());
            assert_eq!(name.parse::<ProviderKind>(), Ok(kind));
        }
        assert_eq!(
            "simulated".parse::<ProviderKind>(),
            Ok(ProviderKind::Simulated)
        );
    }

    // P8: FromStr is exact; case folding and trimming are the configuration's business.
    #[test]
    fn p8_from_str_refuses_other_spellings() {
        for bad in ["Docker", " tart", "firecracker ", "", "podman", "SIMULATED"] {
            let err = bad.parse::<ProviderKind>().unwrap_err();
            assert_eq!(err.given, bad);
            assert!(err.to_string().contains("docker, tart, firecracker"));
        }
    }
}
