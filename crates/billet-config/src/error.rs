//! [`ConfigError`] and the [`Location`] every error carries.

use std::fmt;
use std::path::PathBuf;

use billet_provider::ProviderKind;
use serde_saphyr::Spanned;

use crate::kind::valid_kinds;

/// Where a positioned value is, at `path`.
pub(crate) fn at<T>(value: &Spanned<T>, path: impl Into<String>) -> Box<Location> {
    Box::new(
        Location::at_path(path)
            .with_position(value.referenced.line(), value.referenced.column())
            .with_definition(value.defined.line(), value.defined.column()),
    )
}

/// Where in a configuration something is: the file, the line and column, and
/// the path inside the document.
///
/// Each part is present when it is known: the file only when the text was
/// loaded from a path, the line and column when the parser or the schema
/// reports them, the document path (such as `providers[2].kind`) when the
/// problem is inside the document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Location {
    /// The file the text came from; `None` for text given as a string.
    pub file: Option<PathBuf>,
    /// The 1-based line.
    pub line: Option<u64>,
    /// The 1-based column, counted in characters.
    pub column: Option<u64>,
    /// The path inside the document, such as `providers[2].kind`.
    pub path: Option<String>,
    /// When the value came through a YAML alias (`*name`) or merge key (`<<`):
    /// the line and column of the definition it was copied from.
    pub defined_at: Option<(u64, u64)>,
}

impl Location {
    /// A location that names only the path inside the document.
    pub(crate) fn at_path(path: impl Into<String>) -> Location {
        Location {
            path: Some(path.into()),
            ..Location::default()
        }
    }

    /// Sets the line and column, ignoring the parser's "unknown" (line 0).
    pub(crate) fn with_position(mut self, line: u64, column: u64) -> Location {
        if line > 0 {
            self.line = Some(line);
            self.column = (column > 0).then_some(column);
        }
        self
    }

    /// Records where an aliased or merged value was defined, when that differs
    /// from where it is used.
    pub(crate) fn with_definition(mut self, line: u64, column: u64) -> Location {
        if line > 0 && (Some(line), Some(column)) != (self.line, self.column) {
            self.defined_at = Some((line, column));
        }
        self
    }
}

impl fmt::Display for Location {
    /// `billet.yaml:7:11 at providers[1].kind`; `<input>` stands for text that
    /// came from no file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}", file.display())?,
            None => f.write_str("<input>")?,
        }
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if let Some(path) = &self.path {
            write!(f, " at {path}")?;
        }
        if let Some((line, column)) = self.defined_at {
            write!(f, " (copied from line {line}, column {column})")?;
        }
        Ok(())
    }
}

/// Why a configuration was refused. Every variant carries its [`Location`].
///
/// The `Display` form reads `location: what is wrong`, for example
/// `billet.yaml:7:11 at providers[1].kind: the simulated backend is test-only
/// and cannot be configured (kind " SIMULATED "); configure one of docker,
/// tart, firecracker`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{location}: cannot read the configuration: {source}")]
    Read {
        /// The file that could not be read.
        location: Box<Location>,
        /// What the operating system answered.
        #[source]
        source: std::io::Error,
    },

    /// The file is not UTF-8 text; the location is the first byte that is not.
    #[error("{location}: the configuration is not UTF-8 text")]
    NotUtf8 {
        /// The first byte that is not UTF-8.
        location: Box<Location>,
    },

    /// The file holds no configuration: it is empty, holds only whitespace or
    /// comments, or holds a null document (`---`, `~`, `null`).
    #[error(
        "{location}: the configuration is empty: expected a mapping with `deployment`, \
         `providers` and `routing`"
    )]
    Empty {
        /// The file (when loaded from a path).
        location: Box<Location>,
    },

    /// The text is not well-formed YAML, or is YAML this loader will not read:
    /// several documents, an undefined alias, an unsupported tag, input past
    /// the parser's budget.
    #[error("{location}: malformed YAML: {message}")]
    Syntax {
        /// Where the parser stopped.
        location: Box<Location>,
        /// What the parser found wrong.
        message: String,
    },

    /// A mapping holds a key the schema does not know.
    #[error(
        "{location}: unknown field `{field}`, expected {}",
        expected_fields(expected)
    )]
    UnknownField {
        /// The key.
        location: Box<Location>,
        /// The key as written.
        field: String,
        /// The keys that mapping may hold.
        expected: Vec<&'static str>,
    },

    /// A mapping lacks a key the schema requires.
    #[error("{location}: missing field `{field}`")]
    MissingField {
        /// The mapping that lacks the key; the path ends with the missing key.
        location: Box<Location>,
        /// The key that is missing.
        field: &'static str,
    },

    /// A mapping holds the same key twice.
    #[error("{location}: duplicate key {}", key.as_deref().map_or_else(|| "in a mapping".to_owned(), |key| format!("`{key}`")))]
    DuplicateKey {
        /// The second occurrence of the key.
        location: Box<Location>,
        /// The key, when it is a plain scalar.
        key: Option<String>,
    },

    /// A value has the wrong type or shape: text where a number belongs, a
    /// negative or too-large number, a list where a mapping belongs, a null.
    #[error("{location}: wrong type: {message}")]
    WrongType {
        /// The value.
        location: Box<Location>,
        /// What was expected and what was found.
        message: String,
    },

    /// The deployment identity (`deployment.id`) is missing, null or blank.
    #[error(
        "{location}: missing deployment identity: `deployment.id` must name this \
         scheduler's deployment (the owner written on every instance)"
    )]
    MissingIdentity {
        /// Where the identity was expected.
        location: Box<Location>,
    },

    /// The file names the simulated kind (in any case, with any surrounding
    /// whitespace, directly or through an alias, merge key or tag): that
    /// backend is test-only and cannot be configured (F3).
    #[error(
        "{location}: the simulated backend is test-only and cannot be configured \
         ({given:?} names it here); configure one of {}",
        valid_kinds()
    )]
    SimulatedKind {
        /// Where the file names it.
        location: Box<Location>,
        /// The name as the file spelled it.
        given: String,
    },

    /// A kind field holds a name that is not a kind.
    #[error(
        "{location}: unknown provider kind {given:?}: expected one of {}",
        valid_kinds()
    )]
    UnknownKind {
        /// The kind field.
        location: Box<Location>,
        /// The name as the file spelled it.
        given: String,
    },

    /// `providers` is empty: a scheduler with no provider can run nothing.
    #[error("{location}: no providers: configure at least one")]
    NoProviders {
        /// The `providers` list.
        location: Box<Location>,
    },

    /// A provider's name is empty or blank.
    #[error("{location}: a provider name must not be blank")]
    BlankProviderName {
        /// The name.
        location: Box<Location>,
    },

    /// Two providers share a name.
    #[error(
        "{location}: duplicate provider name {name:?}: it already names {}",
        brief(first)
    )]
    DuplicateProvider {
        /// The second provider with that name.
        location: Box<Location>,
        /// The shared name.
        name: String,
        /// The first provider with that name.
        first: Box<Location>,
    },

    /// A provider's capacity is zero: it could never run a job.
    #[error("{location}: provider {provider:?} has capacity 0: capacity must be at least 1")]
    ZeroCapacity {
        /// The capacity.
        location: Box<Location>,
        /// The provider's name.
        provider: String,
    },

    /// A provider lacks the settings block its kind needs (`docker:` for a
    /// docker provider, and so on).
    #[error("{location}: provider {provider:?} of kind {kind} needs a `{kind}:` settings block")]
    MissingSettings {
        /// The provider.
        location: Box<Location>,
        /// The provider's name.
        provider: String,
        /// The provider's kind.
        kind: ProviderKind,
    },

    /// A provider carries the settings block of another kind.
    #[error("{location}: provider {provider:?} is of kind {kind} but carries `{other}:` settings")]
    ForeignSettings {
        /// The foreign settings block.
        location: Box<Location>,
        /// The provider's name.
        provider: String,
        /// The provider's kind.
        kind: ProviderKind,
        /// The kind whose settings the block holds.
        other: ProviderKind,
    },

    /// A route names a provider that is not configured.
    #[error("{location}: the route names no configured provider: {name:?} (configured: {known})")]
    UnknownProvider {
        /// The route's `provider` field.
        location: Box<Location>,
        /// The name the route gives.
        name: String,
        /// The configured provider names, comma-separated.
        known: String,
    },

    /// A route lists no labels, or a blank one.
    #[error("{location}: a route needs at least one label, and no label may be blank")]
    BadLabels {
        /// The route's labels.
        location: Box<Location>,
    },

    /// A kind field (`default_kind`, `fallback_kind`) names a kind that no
    /// configured provider has, so a job sent there could never be placed.
    #[error("{location}: no provider of kind {kind} is configured")]
    NoProviderOfKind {
        /// The kind field.
        location: Box<Location>,
        /// The kind it names.
        kind: ProviderKind,
    },

    /// A docker pool's confinement setting (D15) holds nonsense: zero or
    /// malformed `cpus`, `memory` or `pids_limit`, a blank or malformed `user`.
    #[error("{location}: provider {provider:?}: {reason}")]
    BadSetting {
        /// The setting's value.
        location: Box<Location>,
        /// The provider whose block holds it.
        provider: String,
        /// What is wrong with it and what would be right.
        reason: String,
    },

    /// A docker pool's `cap_add` names something that is not a Linux
    /// capability (D15).
    #[error(
        "{location}: provider {provider:?}: {given:?} is not a Linux capability; \
         name one such as NET_BIND_SERVICE or CAP_SYS_PTRACE (any case)"
    )]
    UnknownCapability {
        /// The list entry.
        location: Box<Location>,
        /// The provider whose block holds it.
        provider: String,
        /// The name as the file spelled it.
        given: String,
    },

    /// The `github:` section (G1) holds something billet cannot use: no
    /// credential or two, a scope or pool named twice, a pool that is no
    /// configured provider, no label, a malformed URL or duration.
    #[error("{location}: github: {reason}")]
    BadGithub {
        /// The value at fault.
        location: Box<Location>,
        /// What is wrong with it and what would be right.
        reason: String,
    },

    /// Routing sends no job anywhere: there is no route and no default kind.
    #[error("{location}: routing sends no job anywhere: add a route or a `default_kind`")]
    NoRoutes {
        /// The `routing` mapping.
        location: Box<Location>,
    },
}

/// Matches every variant of a [`ConfigError`] to its `location` field, by
/// reference or by mutable reference as `$error` is: the one list of variants
/// both accessors share.
macro_rules! location_of {
    ($error:expr) => {
        match $error {
            ConfigError::Read { location, .. }
            | ConfigError::NotUtf8 { location }
            | ConfigError::Empty { location }
            | ConfigError::Syntax { location, .. }
            | ConfigError::UnknownField { location, .. }
            | ConfigError::MissingField { location, .. }
            | ConfigError::DuplicateKey { location, .. }
            | ConfigError::WrongType { location, .. }
            | ConfigError::MissingIdentity { location }
            | ConfigError::SimulatedKind { location, .. }
            | ConfigError::UnknownKind { location, .. }
            | ConfigError::NoProviders { location }
            | ConfigError::BlankProviderName { location }
            | ConfigError::DuplicateProvider { location, .. }
            | ConfigError::ZeroCapacity { location, .. }
            | ConfigError::MissingSettings { location, .. }
            | ConfigError::ForeignSettings { location, .. }
            | ConfigError::UnknownProvider { location, .. }
            | ConfigError::BadLabels { location }
            | ConfigError::NoProviderOfKind { location, .. }
            | ConfigError::BadSetting { location, .. }
            | ConfigError::UnknownCapability { location, .. }
            | ConfigError::BadGithub { location, .. }
            | ConfigError::NoRoutes { location } => location,
        }
    };
}

impl ConfigError {
    /// Where the error is.
    pub fn location(&self) -> &Location {
        location_of!(self)
    }

    /// The location, to fill in the file once it is known.
    pub(crate) fn location_mut(&mut self) -> &mut Location {
        location_of!(self)
    }

    /// Whether this is the refusal of the simulated kind (F3).
    pub fn is_simulated_refusal(&self) -> bool {
        matches!(self, ConfigError::SimulatedKind { .. })
    }
}

/// `providers[0] (line 3, column 11)`: a location inside the same file.
fn brief(location: &Location) -> String {
    let mut text = location
        .path
        .clone()
        .unwrap_or_else(|| "an earlier provider".to_owned());
    if let Some(line) = location.line {
        text.push_str(&format!(" (line {line}"));
        if let Some(column) = location.column {
            text.push_str(&format!(", column {column}"));
        }
        text.push(')');
    }
    text
}

/// `one of a, b, c` for an unknown-field message.
fn expected_fields(expected: &[&str]) -> String {
    if expected.is_empty() {
        "no fields here".to_owned()
    } else {
        format!(
            "one of {}",
            expected
                .iter()
                .map(|field| format!("`{field}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // F4: a location keeps only real, 1-based positions: the parser's
    // "unknown" (line 0, column 0) never reaches an error, a line without a
    // known column is shown without one, and a definition is recorded only
    // when it is known and is not where the value is used.
    #[test]
    fn f4_unknown_positions_are_left_out_of_locations() {
        let unknown = Location::at_path("providers[0]").with_position(0, 0);
        assert_eq!((unknown.line, unknown.column), (None, None));
        assert_eq!(unknown.to_string(), "<input> at providers[0]");
        let no_column = Location::default().with_position(3, 0);
        assert_eq!((no_column.line, no_column.column), (Some(3), None));
        assert_eq!(no_column.to_string(), "<input>:3");
        assert_eq!(
            Location::default().with_position(1, 1).to_string(),
            "<input>:1:1"
        );

        let here = Location::at_path("routing.default_kind").with_position(4, 7);
        assert_eq!(here.clone().with_definition(0, 0).defined_at, None);
        assert_eq!(here.clone().with_definition(0, 7).defined_at, None);
        assert_eq!(
            here.clone().with_definition(4, 7).defined_at,
            None,
            "used where it is defined"
        );
        assert_eq!(here.clone().with_definition(4, 1).defined_at, Some((4, 1)));
        let mut copied = here.with_definition(2, 9);
        assert_eq!(copied.defined_at, Some((2, 9)));
        copied.file = Some(PathBuf::from("billet.yaml"));
        assert_eq!(
            copied.to_string(),
            "billet.yaml:4:7 at routing.default_kind (copied from line 2, column 9)"
        );
    }
}
