//! [`ConfigKind`]: the one type through which a configuration names a kind (F1).

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;

use billet_provider::ProviderKind;
use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A provider kind that a configuration may name: every [`ProviderKind`]
/// except the test-only simulated one.
///
/// Every place in the `billet.yaml` schema that names a kind (a provider's
/// `kind`, `routing.default_kind`, `routing.untrusted_kinds`, a route's
/// `fallback_kind`) has this type, so a field added later cannot forget the
/// refusal: a `ConfigKind` holding [`ProviderKind::Simulated`] cannot be made.
///
/// A name is read by trimming surrounding whitespace and folding case, so
/// `docker`, `Docker` and ` DOCKER ` all name docker, and `simulated`,
/// `Simulated` and ` SIMULATED ` are all refused with
/// [`KindError::Simulated`]. Any other name is refused with
/// [`KindError::Unknown`], which lists the valid kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConfigKind(ProviderKind);

impl ConfigKind {
    /// Wraps `kind`, refusing [`ProviderKind::Simulated`].
    pub fn new(kind: ProviderKind) -> Result<ConfigKind, KindError> {
        if kind == ProviderKind::Simulated {
            Err(KindError::Simulated {
                given: kind.as_str().to_owned(),
            })
        } else {
            Ok(ConfigKind(kind))
        }
    }

    /// The provider kind this names; never [`ProviderKind::Simulated`].
    pub const fn get(self) -> ProviderKind {
        self.0
    }

    /// The lower-case name, as [`Display`](fmt::Display) prints it.
    pub const fn as_str(self) -> &'static str {
        self.0.as_str()
    }

    /// Every kind a configuration may name, in [`ProviderKind::ALL`] order.
    pub fn all() -> impl Iterator<Item = ConfigKind> {
        ProviderKind::ALL
            .into_iter()
            .filter_map(|kind| ConfigKind::new(kind).ok())
    }

    /// Parses a kind's name the way `billet.yaml` is read: surrounding
    /// whitespace is trimmed and case is folded before the name is looked up.
    pub fn parse(name: &str) -> Result<ConfigKind, KindError> {
        let normalized = normalize(name);
        match normalized.parse::<ProviderKind>() {
            Ok(ProviderKind::Simulated) => Err(KindError::Simulated {
                given: name.to_owned(),
            }),
            Ok(kind) => Ok(ConfigKind(kind)),
            Err(_) => Err(KindError::Unknown {
                given: name.to_owned(),
            }),
        }
    }
}

/// The comparison form of a name: surrounding whitespace trimmed, case folded.
pub(crate) fn normalize(name: &str) -> String {
    name.trim().to_lowercase()
}

/// Whether `name` spells the simulated kind, in any case and with any
/// surrounding whitespace.
pub(crate) fn names_simulated(name: &str) -> bool {
    normalize(name) == ProviderKind::Simulated.as_str()
}

/// The kinds a configuration may name, comma-separated, for messages.
pub(crate) fn valid_kinds() -> String {
    ConfigKind::all()
        .map(ConfigKind::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for ConfigKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ConfigKind> for ProviderKind {
    fn from(kind: ConfigKind) -> ProviderKind {
        kind.0
    }
}

impl TryFrom<ProviderKind> for ConfigKind {
    type Error = KindError;

    fn try_from(kind: ProviderKind) -> Result<ConfigKind, KindError> {
        ConfigKind::new(kind)
    }
}

impl FromStr for ConfigKind {
    type Err = KindError;

    fn from_str(s: &str) -> Result<ConfigKind, KindError> {
        ConfigKind::parse(s)
    }
}

impl PartialEq<ProviderKind> for ConfigKind {
    fn eq(&self, other: &ProviderKind) -> bool {
        self.0 == *other
    }
}

/// Why a name is not a kind a configuration may name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KindError {
    /// The name spells the simulated kind (in any case, with any surrounding
    /// whitespace): that backend is test-only and cannot be configured.
    #[error(
        "the simulated backend is test-only and cannot be configured (kind {given:?}); \
         configure one of {}",
        valid_kinds()
    )]
    Simulated {
        /// The name as the file spelled it.
        given: String,
    },
    /// The name is not a kind at all.
    #[error("unknown provider kind {given:?}: expected one of {}", valid_kinds())]
    Unknown {
        /// The name as the file spelled it.
        given: String,
    },
}

thread_local! {
    /// The last refusal [`ConfigKind`]'s `Deserialize` made on this thread, so
    /// that the loader can report it as a typed error rather than as the
    /// free-form message serde carries.
    static LAST_REFUSAL: RefCell<Option<KindError>> = const { RefCell::new(None) };
}

/// Forgets any refusal recorded on this thread.
pub(crate) fn clear_refusal() {
    LAST_REFUSAL.with(|last| last.borrow_mut().take());
}

/// Takes the refusal recorded on this thread, if any.
pub(crate) fn take_refusal() -> Option<KindError> {
    LAST_REFUSAL.with(|last| last.borrow_mut().take())
}

impl<'de> Deserialize<'de> for ConfigKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ConfigKind, D::Error> {
        deserializer.deserialize_str(KindVisitor)
    }
}

/// Reads a kind from a string, and only from a string.
struct KindVisitor;

impl Visitor<'_> for KindVisitor {
    type Value = ConfigKind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a provider kind, one of {}", valid_kinds())
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<ConfigKind, E> {
        ConfigKind::parse(name).map_err(|refusal| {
            let message = refusal.to_string();
            LAST_REFUSAL.with(|last| *last.borrow_mut() = Some(refusal));
            E::custom(message)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // F1: every kind but the simulated one can be configured, by its own name.
    #[test]
    fn f1_every_real_kind_round_trips() {
        let all: Vec<_> = ConfigKind::all().map(ConfigKind::get).collect();
        assert_eq!(
            all,
            [
                ProviderKind::Docker,
                ProviderKind::Tart,
                ProviderKind::Firecracker
            ]
        );
        for kind in ConfigKind::all() {
            assert_eq!(kind.to_string().parse::<ConfigKind>(), Ok(kind));
            assert_eq!(ProviderKind::from(kind), kind.get());
            assert_eq!(ConfigKind::try_from(kind.get()), Ok(kind));
        }
        assert_eq!(
            ConfigKind::parse(" Docker\t"),
            Ok(ConfigKind(ProviderKind::Docker))
        );
    }

    // F3: the simulated kind cannot be wrapped, parsed or converted, in any spelling.
    #[test]
    fn f3_simulated_cannot_be_made() {
        assert!(matches!(
            ConfigKind::new(ProviderKind::Simulated),
            Err(KindError::Simulated { .. })
        ));
        for spelling in [
            "simulated",
            "Simulated",
            " SIMULATED ",
            "\tsImUlAtEd\n",
            "\u{a0}simulated",
        ] {
            let err = ConfigKind::parse(spelling).unwrap_err();
            assert_eq!(
                err,
                KindError::Simulated {
                    given: spelling.to_owned()
                }
            );
            let message = err.to_string();
            assert!(message.contains("test-only"), "{message}");
            assert!(message.contains("cannot be configured"), "{message}");
        }
    }

    // F1: `ConfigKind` reads a kind only from a string; given anything else,
    // any deserializer's error says what a kind is.
    #[test]
    fn f1_a_kind_is_read_only_from_a_name() {
        use serde::de::IntoDeserializer;
        use serde::de::value::Error as ValueError;
        let error =
            ConfigKind::deserialize(IntoDeserializer::<ValueError>::into_deserializer(7u32))
                .unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid type: integer `7`, expected a provider kind, one of docker, tart, firecracker"
        );
        let kind =
            ConfigKind::deserialize(IntoDeserializer::<ValueError>::into_deserializer(" Tart "));
        assert_eq!(kind.map(ConfigKind::get), Ok(ProviderKind::Tart));
    }

    // F3: an unknown kind gets its own error, which lists the valid kinds.
    #[test]
    fn f3_unknown_kind_lists_valid_kinds() {
        for name in ["podman", "", "simulate", "docker-compose", "sim"] {
            let err = ConfigKind::parse(name).unwrap_err();
            assert_eq!(
                err,
                KindError::Unknown {
                    given: name.to_owned()
                }
            );
            let message = err.to_string();
            assert!(message.contains("docker, tart, firecracker"), "{message}");
            assert!(!message.contains("simulated"), "{message}");
        }
    }
}
