//! Helpers shared by the integration tests: the shipped example, edited.

#![allow(dead_code)]

use billet_config::{Config, ConfigError, DockerSettings, Settings};

/// The shipped example, `examples/billet.yaml`.
pub(crate) const EXAMPLE: &str = include_str!("../../examples/billet.yaml");

/// The example with `from` replaced by `to`; `from` must occur exactly once,
/// so an edit cannot silently miss.
pub(crate) fn edit(from: &str, to: &str) -> String {
    edits(&[(from, to)])
}

/// The example with each `(from, to)` applied in turn, each `from` occurring
/// exactly once at its turn.
pub(crate) fn edits(pairs: &[(&str, &str)]) -> String {
    let mut text = EXAMPLE.to_owned();
    for (from, to) in pairs {
        assert_eq!(
            text.matches(from).count(),
            1,
            "{from:?} must occur exactly once in the text being edited"
        );
        text = text.replacen(from, to, 1);
    }
    text
}

/// The error the loader gives for `text`, which must be refused.
pub(crate) fn refuse(text: &str) -> ConfigError {
    match Config::from_yaml_str(text) {
        Ok(config) => panic!("accepted: {config:?}\n--- text ---\n{text}"),
        Err(error) => error,
    }
}

/// The 1-based line of the first occurrence of `needle` in `text`.
pub(crate) fn line_of(text: &str, needle: &str) -> u64 {
    let offset = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle:?} is not in the text"));
    text[..offset].matches('\n').count() as u64 + 1
}

/// Asserts that `error` is at `path`, on `line`.
pub(crate) fn assert_at(error: &ConfigError, path: &str, line: u64) {
    let location = error.location();
    assert_eq!(location.path.as_deref(), Some(path), "path of: {error}");
    assert_eq!(location.line, Some(line), "line of: {error}");
    assert!(location.column.is_some(), "column of: {error}");
    let shown = error.to_string();
    assert!(shown.contains(&format!(":{line}:")), "{shown}");
    assert!(shown.contains(&format!(" at {path}")), "{shown}");
}

/// Asserts that `text` is refused with a `BadSetting` of the docker pool
/// `linux-docker` at `providers[0].docker.{field}`, on the line of `needle`,
/// saying `says`.
pub(crate) fn assert_bad_docker_setting(text: &str, needle: &str, field: &str, says: &str) {
    let error = refuse(text);
    assert!(
        matches!(error, ConfigError::BadSetting { .. }),
        "{needle}: {error}"
    );
    assert_at(
        &error,
        &format!("providers[0].docker.{field}"),
        line_of(text, needle),
    );
    let shown = error.to_string();
    assert!(shown.contains(says), "{needle}: {shown}");
    assert!(shown.contains("provider \"linux-docker\""), "{shown}");
}

/// The example's docker block ends with this line; [`with_docker_lines`]
/// puts settings after it.
pub(crate) const DOCKER_LAST: &str = "      network: ci-runners\n";

/// The example with `settings` (lines of the docker block) added at its end.
pub(crate) fn with_docker_lines(settings: &str) -> String {
    edit(DOCKER_LAST, &format!("{DOCKER_LAST}{settings}"))
}

/// The settings of the example's docker pool `linux-docker` in `config`.
pub(crate) fn docker_of(config: &Config) -> DockerSettings {
    match config.provider("linux-docker").map(|p| p.settings()) {
        Some(Settings::Docker(docker)) => docker.clone(),
        other => panic!("linux-docker carries docker settings, not {other:?}"),
    }
}

/// The settings of the docker pool `linux-docker` of `text`, which must load.
pub(crate) fn docker_settings(text: &str) -> DockerSettings {
    docker_of(&Config::from_yaml_str(text).unwrap_or_else(|e| panic!("{e}\n{text}")))
}
