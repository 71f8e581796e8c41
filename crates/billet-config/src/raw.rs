//! The schema as the file spells it: serde types that keep each value's
//! position, so that the checks after parsing can say where a problem is.
//!
//! Every kind field is a [`ConfigKind`] (F1). No type here is public: a file
//! becomes a [`Config`](crate::Config) only through the checks in `load`.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Visitor};
use serde_saphyr::Spanned;

use crate::config::{FirecrackerSettings, TartSettings};
use crate::kind::ConfigKind;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub(crate) deployment: RawDeployment,
    pub(crate) providers: Spanned<Vec<Spanned<RawProvider>>>,
    pub(crate) routing: Spanned<RawRouting>,
    #[serde(default)]
    pub(crate) github: Option<Spanned<crate::github::RawGithub>>,
}

/// `deployment:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDeployment {
    pub(crate) id: Spanned<String>,
    #[serde(default)]
    pub(crate) description: Option<String>,
}

/// One entry of `providers:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub(crate) name: Spanned<String>,
    pub(crate) kind: ConfigKind,
    pub(crate) capacity: Spanned<u32>,
    #[serde(default)]
    pub(crate) docker: Option<Spanned<RawDocker>>,
    #[serde(default)]
    pub(crate) tart: Option<Spanned<TartSettings>>,
    #[serde(default)]
    pub(crate) firecracker: Option<Spanned<FirecrackerSettings>>,
}

/// `routing:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouting {
    #[serde(default)]
    pub(crate) routes: Vec<Spanned<RawRoute>>,
    #[serde(default)]
    pub(crate) default_kind: Option<Spanned<ConfigKind>>,
    #[serde(default)]
    pub(crate) untrusted_kinds: Vec<ConfigKind>,
}

/// One entry of `routing.routes:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub(crate) labels: Spanned<Vec<String>>,
    pub(crate) provider: Spanned<String>,
    #[serde(default)]
    pub(crate) fallback_kind: Option<Spanned<ConfigKind>>,
}

/// A provider's `docker:` block, its confinement values positioned so that
/// their checks (in `docker`) can say where a value is wrong.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDocker {
    pub(crate) image: String,
    #[serde(default)]
    pub(crate) endpoint: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) tls: Option<Spanned<RawTls>>,
    #[serde(default)]
    pub(crate) insecure: Option<Spanned<bool>>,
    #[serde(default)]
    pub(crate) network: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) allow_host_network: Option<Spanned<bool>>,
    #[serde(default)]
    pub(crate) cpus: Option<Spanned<f64>>,
    #[serde(default)]
    pub(crate) memory: Option<Spanned<RawSize>>,
    #[serde(default)]
    pub(crate) storage: Option<Spanned<RawSize>>,
    #[serde(default)]
    pub(crate) pids_limit: Option<Spanned<u32>>,
    #[serde(default)]
    pub(crate) user: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) read_only: Option<bool>,
    #[serde(default)]
    pub(crate) cap_add: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub(crate) runtime: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) isolation: Option<Spanned<String>>,
}

/// A docker pool's `tls:` block (D17): the paths as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTls {
    pub(crate) ca: Spanned<String>,
    pub(crate) cert: Spanned<String>,
    pub(crate) key: Spanned<String>,
}

/// A `memory:` value as written: a number of bytes, or text such as `2GiB`
/// (anything else the file holds there, read as text, to be refused by
/// [`parse_size`] with its location).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawSize {
    /// A plain whole number: bytes.
    Bytes(u64),
    /// Anything else, as text.
    Text(String),
}

impl<'de> Deserialize<'de> for RawSize {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// Reads a [`RawSize`] from whatever scalar the file holds.
struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = RawSize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size such as 2GiB, 512MiB or a number of bytes")
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<RawSize, E> {
        Ok(RawSize::Bytes(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<RawSize, E> {
        Ok(match u64::try_from(value) {
            Ok(bytes) => RawSize::Bytes(bytes),
            Err(_) => RawSize::Text(value.to_string()),
        })
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<RawSize, E> {
        Ok(RawSize::Text(value.to_string()))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<RawSize, E> {
        Ok(RawSize::Text(value.to_owned()))
    }
}
