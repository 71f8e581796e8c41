//! Logs through `tracing` to stderr (L8): human-readable, or one JSON object
//! a line. `RUST_LOG` filters them (default `info`).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber; a second call changes nothing.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
