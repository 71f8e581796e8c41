//! The command line (L1, L3): `billet validate FILE`, `billet serve`, and
//! the client (`billet jobs ...`, `billet pools`; see [`crate::client`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::logging::{self, LogFormat};
use crate::service::{ServeOptions, serve};

/// billet: runs CI jobs on a fleet of compute backends.
#[derive(Debug, Parser)]
#[command(name = "billet", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Checks a billet.yaml: prints a summary, or the error with its location
    /// (exit status 2).
    Validate {
        /// The file to check.
        file: PathBuf,
    },
    /// Runs the scheduler as a service: jobs over HTTP, a durable store,
    /// the configured pools.
    Serve(Box<ServeArgs>),
    /// Submits, lists, shows, follows and cancels jobs of a running
    /// `billet serve` (exit statuses: usage 2, refused 3, unreachable 4;
    /// with --wait, the job's exit code, or 1 when it failed).
    Jobs {
        /// Where and how to connect.
        #[command(flatten)]
        connection: crate::client::Connection,
        /// What to do.
        #[command(subcommand)]
        command: crate::client::JobsCommand,
    },
    /// Shows the pools of a running `billet serve`.
    Pools {
        /// Where and how to connect.
        #[command(flatten)]
        connection: crate::client::Connection,
    },
}

/// The flags of `billet serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The configuration file (billet.yaml).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The state directory: its database and, by default, its token.
    #[arg(long, value_name = "DIR", default_value = "billet-state")]
    pub state: PathBuf,
    /// The address to listen on. billet speaks plain HTTP: an address off
    /// the loopback needs --allow-plain-http.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// Allows a --listen address off the loopback, over plain HTTP (tokens
    /// and job commands then cross the network in clear unless a TLS proxy
    /// is in front).
    #[arg(long)]
    pub allow_plain_http: bool,
    /// A pool the configuration no longer has whose jobs the store holds
    /// running: they end failed at start, their containers left to be
    /// collected as orphans (repeat for several pools). Without it such a
    /// start is refused.
    #[arg(long = "forget-pool", value_name = "NAME")]
    pub forget_pools: Vec<String>,
    /// The bearer token's file; created with a random token, mode 0600,
    /// when missing [default: DIR/token].
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// How often every pool's inventory is read (reconciliation).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub reconcile_every: Duration,
    /// The deadline of each provider call.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub call_timeout: Duration,
    /// How long an instance no job holds may stay before it is destroyed.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration)]
    pub orphan_grace: Duration,
    /// How long calls in flight may take to finish at shutdown.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration)]
    pub shutdown_grace: Duration,
    /// How long a launch or destroy whose effect stays unknown is retried
    /// before its job ends failed.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration)]
    pub give_up_after: Duration,
    /// The timeout of a job that names none (`timeout_secs`).
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = duration)]
    pub default_timeout: Duration,
    /// The longest timeout a job may name (`422` past it; at most 7 days).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = max_timeout)]
    pub max_timeout: Duration,
    /// The most connections served at once; past it, a few more are
    /// answered `503` with `Retry-After`, the rest wait.
    #[arg(long, value_name = "N", default_value_t = crate::listener::DEFAULT_MAX_CONNECTIONS, value_parser = connections)]
    pub max_connections: usize,
    /// The most connections one peer (an IP address) is served at once;
    /// past it, its next are answered `503` or closed. A TLS proxy in front
    /// is one peer: raise this to --max-connections there.
    #[arg(long, value_name = "N", default_value_t = crate::listener::DEFAULT_MAX_CONNECTIONS_PER_PEER, value_parser = connections)]
    pub max_connections_per_peer: usize,
    /// How long an ended job is kept: after that it is removed, with its
    /// idempotency key, from memory and store (`GET` answers `404` for it).
    #[arg(long, value_name = "DURATION", default_value = "7days", value_parser = duration)]
    pub retain: Duration,
    /// The most jobs not yet ended (queued or running) at once (L19): past
    /// it a submission answers `503` with `Retry-After`, nothing recorded.
    #[arg(long, value_name = "N", default_value_t = crate::engine::DEFAULT_MAX_QUEUED, value_parser = max_queued)]
    pub max_queued: usize,
    /// The most bytes of one job's output kept (L15): bytes, or a whole
    /// number of `KiB`, `MiB` or `GiB`. Past it the output is cut, and the
    /// cut is said in the output and in the job (`output_truncated`).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::output::parse_size)]
    pub output_limit: u64,
    /// The most bytes of all jobs' output kept at once (L26), in the same
    /// units: past it captures are cut, saying so, until retention frees
    /// some.
    #[arg(long, value_name = "SIZE", default_value = "8GiB", value_parser = crate::output::parse_size)]
    pub output_total: u64,
    /// How logs are written to stderr.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

/// A `--max-connections`: 1 to 65,536.
fn connections(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err(format!("{text:?}: a number of connections from 1 to 65536")),
    }
}

/// A `--max-queued`: 1 to 1,000,000.
fn max_queued(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
        _ => Err(format!("{text:?}: a number of jobs from 1 to 1000000")),
    }
}

/// A `--max-timeout`: a duration of at most the 7 days a job may ask.
fn max_timeout(text: &str) -> Result<Duration, String> {
    let parsed = duration(text)?;
    if parsed.as_secs() > crate::api::MAX_TIMEOUT_SECS {
        return Err(format!("{text:?}: at most 7 days"));
    }
    Ok(parsed)
}

/// A duration such as `60s`, `500ms` or `5m`, longer than zero.
fn duration(text: &str) -> Result<Duration, String> {
    let parsed = humantime::parse_duration(text).map_err(|e| format!("{text:?}: {e}"))?;
    if parsed.is_zero() {
        return Err(format!("{text:?}: must be longer than zero"));
    }
    Ok(parsed)
}

/// Runs the command line; the exit status is 0 on success, 2 for what
/// stops a start (usage, configuration, pools, store), 1 for a failure
/// while serving.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Jobs {
            connection,
            command,
        } => crate::client::main(connection, Some(command)),
        Command::Pools { connection } => crate::client::main(connection, None),
        Command::Validate { file } => match billet_config::validate(&file) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::from(2)
            }
        },
        Command::Serve(args) => {
            logging::init(args.log_format);
            let options = ServeOptions {
                config: args.config,
                state: args.state,
                listen: args.listen,
                allow_plain_http: args.allow_plain_http,
                forget_pools: args.forget_pools,
                token_file: args.token_file,
                reconcile_every: args.reconcile_every,
                call_timeout: args.call_timeout,
                orphan_grace: args.orphan_grace,
                shutdown_grace: args.shutdown_grace,
                give_up_after: args.give_up_after,
                jobs: crate::http::JobLimits {
                    default_timeout: args.default_timeout,
                    max_timeout: args.max_timeout,
                },
                max_connections: args.max_connections,
                max_connections_per_peer: args.max_connections_per_peer,
                retain: args.retain,
                max_queued: args.max_queued,
                output_limit: args.output_limit,
                output_total: args.output_total,
            };
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    eprintln!("error: cannot start the runtime: {error}");
                    return ExitCode::from(1);
                }
            };
            // The signal handlers first, before anything listens.
            match runtime.block_on(async { serve(options, signal()).await }) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!(%error, "billet serve stopped");
                    eprintln!("error: {error}");
                    ExitCode::from(error.exit_code())
                }
            }
        }
    }
}

/// Completes at SIGTERM, SIGINT or SIGHUP (L7): a hang-up (a closed
/// terminal, or an operator expecting a reload) stops the service in order
/// rather than killing it; billet reads its files only at start.
///
/// The handlers are installed when this is called, not when the future is
/// first polled: `serve` answers requests before it first waits on it, and a
/// signal in between must stop the service in order, not kill it. Call it
/// inside the runtime.
fn signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let handlers = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        );
        async move {
            match handlers {
                (Ok(mut term), Ok(mut int), Ok(mut hup)) => {
                    tokio::select! {
                        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
                        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
                        _ = hup.recv() => tracing::info!("SIGHUP: shutting down (billet reads its configuration and token file only at start: start it again to read them)"),
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    // L3: the flags and their defaults.
    #[test]
    fn l3_flags_and_defaults() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["billet", "serve", "--config", "b.yaml"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve");
        };
        assert_eq!(args.config, PathBuf::from("b.yaml"));
        assert_eq!(args.state, PathBuf::from("billet-state"));
        assert_eq!(args.listen, "127.0.0.1:7878".parse().unwrap());
        assert_eq!(args.token_file, None);
        assert_eq!(args.reconcile_every, Duration::from_secs(60));
        assert_eq!(args.log_format, LogFormat::Text);
        assert_eq!(args.give_up_after, Duration::from_secs(600));
        assert_eq!(args.output_limit, crate::output::DEFAULT_OUTPUT_LIMIT);
        assert_eq!(args.output_limit, 64 * 1024 * 1024);
        assert_eq!(args.default_timeout, Duration::from_secs(3600));
        assert_eq!(args.max_timeout, Duration::from_secs(86_400));
        assert_eq!(args.max_connections, 512);
        assert_eq!(args.max_connections_per_peer, 64);
        assert_eq!(args.retain, crate::engine::DEFAULT_RETAIN);
        let cli = Cli::try_parse_from([
            "billet",
            "serve",
            "--config",
            "c",
            "--state",
            "s",
            "--listen",
            "0.0.0.0:1",
            "--token-file",
            "t",
            "--reconcile-every",
            "500ms",
            "--log-format",
            "json",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve");
        };
        assert_eq!(args.reconcile_every, Duration::from_millis(500));
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.token_file, Some(PathBuf::from("t")));
        assert!(
            Cli::try_parse_from(["billet", "serve"]).is_err(),
            "--config is required"
        );
        let parse = |flag: &str, value: &str| {
            Cli::try_parse_from(["billet", "serve", "--config", "c", flag, value])
        };
        assert!(parse("--max-timeout", "7days").is_ok());
        assert!(parse("--max-timeout", "7days 1s").is_err());
        assert!(parse("--max-connections", "0").is_err());
        assert!(parse("--max-connections", "65537").is_err());
        let Command::Serve(args) = parse("--max-connections", "3").unwrap().command else {
            panic!("serve");
        };
        assert_eq!(args.max_connections, 3);
        let Command::Serve(args) = parse("--output-limit", "512KiB").unwrap().command else {
            panic!("serve");
        };
        assert_eq!(args.output_limit, 512 * 1024);
        assert!(parse("--output-limit", "0").is_err());
        assert_eq!(args.output_total, crate::output::DEFAULT_OUTPUT_TOTAL);
        let Command::Serve(args) = parse("--output-total", "3GiB").unwrap().command else {
            panic!("serve");
        };
        assert_eq!(args.output_total, 3 << 30);
        assert!(parse("--output-total", "0").is_err());
        assert!(parse("--output-limit", "5MB").is_err());
        let Command::Serve(args) = parse("--retain", "90m").unwrap().command else {
            panic!("serve");
        };
        assert_eq!(args.retain, Duration::from_secs(90 * 60));
        assert!(parse("--retain", "0s").is_err());
        assert_eq!(args.max_queued, crate::engine::DEFAULT_MAX_QUEUED);
        for (given, taken) in [
            ("1", Some(1)),
            ("1000000", Some(1_000_000)),
            ("0", None),
            ("1000001", None),
            ("many", None),
        ] {
            let parsed = parse("--max-queued", given)
                .ok()
                .map(|cli| match cli.command {
                    Command::Serve(args) => args.max_queued,
                    _ => panic!("serve"),
                });
            assert_eq!(parsed, taken, "--max-queued {given}");
        }
        for bad in ["0s", "soon", "-1s"] {
            assert!(
                Cli::try_parse_from(["billet", "serve", "--config", "c", "--reconcile-every", bad])
                    .is_err(),
                "{bad}"
            );
        }
    }
}
