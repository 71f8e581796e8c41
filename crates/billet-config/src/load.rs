//! Reading `billet.yaml`: parsing with serde-saphyr, turning its errors into
//! [`ConfigError`]s, and the checks that make a [`Config`] valid.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::num::NonZeroU32;
use std::path::Path;

use billet_provider::ProviderKind;
use serde::de::IgnoredAny;
use serde_path_to_error::Segment;
use serde_saphyr::{Error as YamlError, MessageFormatter as _, NonFiniteFloatPolicy, Spanned};

use crate::config::{Config, Deployment, Provider, Route, Routing, Settings};
use crate::docker;
use crate::error::at;
use crate::error::{ConfigError, Location};
use crate::github;
use crate::kind::{self, ConfigKind, KindError};
use crate::raw::{RawConfig, RawProvider, RawRouting};

impl Config {
    /// Loads the configuration in the file at `path`.
    ///
    /// Every error names the file, and where it can, the line, column and
    /// path inside the document. A docker pool's relative `tls` paths are
    /// made relative to the file's directory.
    pub fn load(path: impl AsRef<Path>) -> Result<Config, ConfigError> {
        let path = path.as_ref();
        let file_location = Location {
            file: Some(path.to_path_buf()),
            ..Location::default()
        };
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
            location: Box::new(file_location),
            source,
        })?;
        let mut config = Config::from_yaml_bytes(&bytes).map_err(|mut error| {
            error.location_mut().file = Some(path.to_path_buf());
            if let ConfigError::DuplicateProvider { first, .. } = &mut error {
                first.file = Some(path.to_path_buf());
            }
            error
        })?;
        config.rebase_tls(path.parent().unwrap_or(Path::new("")));
        Ok(config)
    }

    /// Parses a configuration from YAML text.
    pub fn from_yaml_str(text: &str) -> Result<Config, ConfigError> {
        let raw = parse(text)?;
        check(raw)
    }

    /// Parses a configuration from bytes, which must be UTF-8 YAML text (a
    /// leading byte-order mark is allowed).
    pub fn from_yaml_bytes(bytes: &[u8]) -> Result<Config, ConfigError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Config::from_yaml_str(text),
            Err(error) => Err(ConfigError::NotUtf8 {
                location: Box::new(position_of_byte(bytes, error.valid_up_to())),
            }),
        }
    }
}

/// The line and column of byte `offset`, which follows valid UTF-8.
fn position_of_byte(bytes: &[u8], offset: usize) -> Location {
    let before = bytes.get(..offset).unwrap_or_default();
    let before = std::str::from_utf8(before).unwrap_or_default();
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    Location::default().with_position(line as u64, column as u64)
}

/// How the loader reads YAML: errors without snippets (the loader composes
/// its own message), unknown tags refused rather than ignored, tags on field
/// names refused, duplicate keys refused (the default), merge keys expanded
/// (the default: whatever they carry goes through the same typed fields).
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        reject_unsupported_tags: true,
        reject_tagged_field_names: true,
    }
}

/// The options of the first pass, which only checks that the text is one
/// well-formed document: any scalar is fine there.
fn structure_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        reject_unsupported_tags: true,
        non_finite_float_policy: NonFiniteFloatPolicy::PassThrough,
    }
}

/// Parses `text` into the raw schema, or says what is wrong and where.
fn parse(text: &str) -> Result<RawConfig, ConfigError> {
    // First pass: is there a document at all, and is it well-formed YAML?
    // Its errors are reported only when they are about the text's structure;
    // anything else is left to the typed pass, which knows the path.
    let structure =
        serde_saphyr::from_str_with_options::<Option<IgnoredAny>>(text, structure_options());
    let malformed = match structure {
        Ok(None) => {
            return Err(ConfigError::Empty {
                location: Box::default(),
            });
        }
        Ok(Some(_)) => None,
        Err(error) if is_structural(error.without_snippet()) => Some(error),
        Err(_) => None,
    };

    // Second pass: the schema, tracking the path inside the document.
    kind::clear_refusal();
    let mut path = None;
    let typed = serde_saphyr::with_deserializer_from_str_with_options(text, options(), |de| {
        serde_path_to_error::deserialize::<_, RawConfig>(de).map_err(|error| {
            path = Some(render_path(error.path()));
            error.into_inner()
        })
    });
    let refusal = kind::take_refusal();
    let path = path.flatten();

    match (malformed, typed) {
        (Some(error), typed) => {
            // Keep the typed pass's path when it stopped at the same place.
            let same_place = typed
                .as_ref()
                .err()
                .is_some_and(|typed| typed.location() == error.location());
            Err(classify(
                error,
                path.as_deref().filter(|_| same_place),
                None,
            ))
        }
        (None, Ok(raw)) => Ok(raw),
        (None, Err(error)) => Err(classify(error, path.as_deref(), refusal)),
    }
}

/// Whether an error is about the text's structure (not well-formed, or not
/// YAML this loader reads) rather than about a value.
fn is_structural(error: &YamlError) -> bool {
    matches!(
        error,
        YamlError::ExternalMessage { .. }
            | YamlError::Eof { .. }
            | YamlError::MultipleDocuments { .. }
            | YamlError::UnknownAnchor { .. }
            | YamlError::Budget { .. }
            | YamlError::AliasReplayCounterOverflow { .. }
            | YamlError::AliasReplayLimitExceeded { .. }
            | YamlError::AliasExpansionLimitExceeded { .. }
            | YamlError::AliasReplayStackDepthExceeded { .. }
            | YamlError::RecursiveReferencesRequireWeakTypes { .. }
            | YamlError::DuplicateMappingKey { .. }
            | YamlError::UnsupportedTag { .. }
            | YamlError::MergeValueNotMapOrSeqOfMaps { .. }
            | YamlError::MergeKeyNotAllowed { .. }
            | YamlError::ContainerEndMismatch { .. }
            | YamlError::UnexpectedSequenceEnd { .. }
            | YamlError::UnexpectedMappingEnd { .. }
            | YamlError::UnexpectedContainerEndWhileSkippingNode { .. }
            | YamlError::UnexpectedContainerEndWhileReadingKeyNode { .. }
            | YamlError::FoldedBlockScalarMustIndentContent { .. }
            | YamlError::IndentationError { .. }
            | YamlError::InvalidUtf8Input
    )
}

/// `providers[2].kind`, from serde's path; `None` at the document's root.
///
/// Position-keeping wrappers ([`Spanned`]) read their value under a `value`
/// key; those steps are not in the file, so they are left out (the schema has
/// no field named `value`).
fn render_path(path: &serde_path_to_error::Path) -> Option<String> {
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => {
                let _ = write!(out, "[{index}]");
            }
            Segment::Map { key } if key == "value" || key.starts_with("__serde_saphyr") => {}
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&sanitize(key));
            }
            // A step serde could not name (a key it was still reading): the
            // path stops at the mapping that holds it.
            Segment::Unknown => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Text from the file, made safe to print: control characters escaped.
fn sanitize(text: &str) -> String {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_debug().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect()
    } else {
        text.to_owned()
    }
}

/// serde-saphyr's message for an error, in its wording for the people who
/// write the file (not for the programmer calling it), without a location.
fn message_of(error: &YamlError) -> String {
    sanitize(&serde_saphyr::UserMessageFormatter.format_message(error))
}

/// Turns a parser error into a [`ConfigError`], given the path the typed
/// pass had reached and the kind refusal it recorded, if any.
fn classify(error: YamlError, path: Option<&str>, refusal: Option<KindError>) -> ConfigError {
    // Unwrap the alias and snippet wrappers, keeping where an aliased value
    // was defined.
    let mut error = error;
    let mut used_at = None;
    let mut defined_at = None;
    loop {
        match error {
            YamlError::WithSnippet { error: inner, .. } => error = *inner,
            YamlError::AliasError {
                error: inner,
                locations,
                ..
            } => {
                used_at.get_or_insert(locations.reference_location);
                defined_at = Some(locations.defined_location);
                error = *inner;
            }
            _ => break,
        }
    }

    let mut location = Location {
        path: path.map(str::to_owned),
        ..Location::default()
    };
    if let Some(at) = used_at.or_else(|| error.location()) {
        location = location.with_position(at.line(), at.column());
    }
    if let Some(at) = defined_at {
        location = location.with_definition(at.line(), at.column());
    }
    if let YamlError::SerdeMissingField { field, .. } = &error {
        // The path of a missing field ends with the field.
        location.path = Some(match path {
            Some(path) => format!("{path}.{field}"),
            None => (*field).to_owned(),
        });
    }
    let location = Box::new(location);
    let path_is = |expected: Option<&str>| path == expected;

    match error {
        // A kind field refused the name: the refusal it recorded says which way.
        YamlError::Message { msg, .. } => match refusal {
            Some(refusal) if msg == refusal.to_string() => match refusal {
                KindError::Simulated { given } => ConfigError::SimulatedKind { location, given },
                KindError::Unknown { given } => ConfigError::UnknownKind { location, given },
            },
            _ => ConfigError::WrongType {
                location,
                message: sanitize(&msg),
            },
        },
        YamlError::SerdeUnknownField {
            field, expected, ..
        } => {
            if kind::names_simulated(&field) {
                // A key spelling the simulated kind, such as a `simulated:`
                // settings block, names the simulated backend too (F3).
                ConfigError::SimulatedKind {
                    location,
                    given: field,
                }
            } else {
                ConfigError::UnknownField {
                    location,
                    field: sanitize(&field),
                    expected,
                }
            }
        }
        YamlError::SerdeMissingField { field, .. } => {
            let identity = (field == "deployment" && path_is(None))
                || (field == "id" && path_is(Some("deployment")));
            if identity {
                ConfigError::MissingIdentity { location }
            } else {
                ConfigError::MissingField { location, field }
            }
        }
        YamlError::NullIntoString { .. } if path_is(Some("deployment.id")) => {
            ConfigError::MissingIdentity { location }
        }
        YamlError::DuplicateMappingKey { key, .. } => ConfigError::DuplicateKey {
            location,
            key: key.as_deref().map(sanitize),
        },
        YamlError::InvalidUtf8Input => ConfigError::NotUtf8 { location },
        YamlError::InvalidScalar { ty, .. } if unsigned_max(ty).is_some() => {
            ConfigError::WrongType {
                location,
                message: format!(
                    "expected a whole number from 0 to {}",
                    unsigned_max(ty).unwrap_or_default()
                ),
            }
        }
        error if is_structural(&error) => ConfigError::Syntax {
            location,
            message: message_of(&error),
        },
        error => ConfigError::WrongType {
            location,
            message: message_of(&error),
        },
    }
}

/// The largest value of an unsigned integer type the schema uses, by name.
fn unsigned_max(ty: &str) -> Option<u64> {
    match ty {
        "u32" => Some(u64::from(u32::MAX)),
        "u64" => Some(u64::MAX),
        _ => None,
    }
}

/// The checks serde cannot make, turning the raw schema into a [`Config`].
fn check(raw: RawConfig) -> Result<Config, ConfigError> {
    let deployment = raw.deployment;
    let id = deployment.id.value.trim();
    if id.is_empty() {
        return Err(ConfigError::MissingIdentity {
            location: at(&deployment.id, "deployment.id"),
        });
    }
    let deployment = Deployment {
        id: id.to_owned(),
        description: deployment.description,
    };

    if raw.providers.value.is_empty() {
        return Err(ConfigError::NoProviders {
            location: at(&raw.providers, "providers"),
        });
    }
    let mut providers = Vec::with_capacity(raw.providers.value.len());
    let mut first_by_name: HashMap<String, Box<Location>> = HashMap::new();
    for (index, provider) in raw.providers.value.into_iter().enumerate() {
        let base = format!("providers[{index}]");
        let checked = check_provider(&base, &provider)?;
        let name_at = at(&provider.value.name, format!("{base}.name"));
        if let Some(first) = first_by_name.get(&checked.name) {
            return Err(ConfigError::DuplicateProvider {
                location: name_at,
                name: checked.name,
                first: first.clone(),
            });
        }
        first_by_name.insert(checked.name.clone(), name_at);
        providers.push(checked);
    }

    let routing = check_routing(&raw.routing, &providers)?;
    let github = match &raw.github {
        Some(section) => {
            let names: Vec<&str> = providers.iter().map(Provider::name).collect();
            Some(github::check(section, &names)?)
        }
        None => None,
    };
    Ok(Config {
        deployment,
        providers,
        routing,
        github,
    })
}

/// One provider's checks: its name, capacity and settings.
fn check_provider(base: &str, provider: &Spanned<RawProvider>) -> Result<Provider, ConfigError> {
    let raw = &provider.value;
    let name = &raw.name.value;
    if name.trim().is_empty() {
        return Err(ConfigError::BlankProviderName {
            location: at(&raw.name, format!("{base}.name")),
        });
    }
    if kind::names_simulated(name) {
        // A provider named after the simulated backend would have routes
        // name it too: refused like the kind itself (F3).
        return Err(ConfigError::SimulatedKind {
            location: at(&raw.name, format!("{base}.name")),
            given: name.clone(),
        });
    }
    let Some(capacity) = NonZeroU32::new(raw.capacity.value) else {
        return Err(ConfigError::ZeroCapacity {
            location: at(&raw.capacity, format!("{base}.capacity")),
            provider: name.clone(),
        });
    };

    let kind = raw.kind;
    let blocks = [
        (
            ProviderKind::Docker,
            raw.docker
                .as_ref()
                .map(|block| at(block, format!("{base}.docker"))),
        ),
        (
            ProviderKind::Tart,
            raw.tart
                .as_ref()
                .map(|block| at(block, format!("{base}.tart"))),
        ),
        (
            ProviderKind::Firecracker,
            raw.firecracker
                .as_ref()
                .map(|block| at(block, format!("{base}.firecracker"))),
        ),
    ];
    for (block_kind, location) in blocks {
        if let Some(location) = location
            && kind != block_kind
        {
            return Err(ConfigError::ForeignSettings {
                location,
                provider: name.clone(),
                kind: kind.get(),
                other: block_kind,
            });
        }
    }
    let settings = match kind.get() {
        ProviderKind::Docker => match &raw.docker {
            Some(block) => Some(Settings::Docker(docker::check(
                &format!("{base}.docker"),
                name,
                &block.value,
            )?)),
            None => None,
        },
        ProviderKind::Tart => raw
            .tart
            .as_ref()
            .map(|block| Settings::Tart(block.value.clone())),
        ProviderKind::Firecracker => raw
            .firecracker
            .as_ref()
            .map(|block| Settings::Firecracker(block.value.clone())),
        _ => None,
    };
    let Some(settings) = settings else {
        return Err(ConfigError::MissingSettings {
            location: at(provider, base),
            provider: name.clone(),
            kind: kind.get(),
        });
    };

    Ok(Provider {
        name: name.clone(),
        kind,
        capacity,
        settings,
    })
}

/// The routing checks: every route names a configured provider and at least
/// one label, and every kind it sends jobs to has a provider.
fn check_routing(
    raw: &Spanned<RawRouting>,
    providers: &[Provider],
) -> Result<Routing, ConfigError> {
    let routing = &raw.value;
    if routing.routes.is_empty() && routing.default_kind.is_none() {
        return Err(ConfigError::NoRoutes {
            location: at(raw, "routing"),
        });
    }
    let has_kind = |kind: ConfigKind| providers.iter().any(|provider| provider.kind == kind);

    let mut routes = Vec::with_capacity(routing.routes.len());
    for (index, route) in routing.routes.iter().enumerate() {
        let base = format!("routing.routes[{index}]");
        let raw_route = &route.value;
        let labels = &raw_route.labels.value;
        if labels.is_empty() || labels.iter().any(|label| label.trim().is_empty()) {
            return Err(ConfigError::BadLabels {
                location: at(&raw_route.labels, format!("{base}.labels")),
            });
        }
        let provider = &raw_route.provider.value;
        if kind::names_simulated(provider) {
            return Err(ConfigError::SimulatedKind {
                location: at(&raw_route.provider, format!("{base}.provider")),
                given: provider.clone(),
            });
        }
        if !providers.iter().any(|known| &known.name == provider) {
            return Err(ConfigError::UnknownProvider {
                location: at(&raw_route.provider, format!("{base}.provider")),
                name: provider.clone(),
                known: providers
                    .iter()
                    .map(|known| known.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if let Some(fallback) = &raw_route.fallback_kind
            && !has_kind(fallback.value)
        {
            return Err(ConfigError::NoProviderOfKind {
                location: at(fallback, format!("{base}.fallback_kind")),
                kind: fallback.value.get(),
            });
        }
        routes.push(Route {
            labels: labels.clone(),
            provider: provider.clone(),
            fallback_kind: raw_route.fallback_kind.as_ref().map(|kind| kind.value),
        });
    }

    if let Some(default) = &routing.default_kind
        && !has_kind(default.value)
    {
        return Err(ConfigError::NoProviderOfKind {
            location: at(default, "routing.default_kind"),
            kind: default.value.get(),
        });
    }

    Ok(Routing {
        routes,
        default_kind: routing.default_kind.as_ref().map(|kind| kind.value),
        untrusted_kinds: routing.untrusted_kinds.clone(),
    })
}
