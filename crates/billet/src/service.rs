//! [`Service`]: the engine and the listener together, started and stopped
//! as one; and [`serve`], everything `billet serve` does between reading its
//! flags and exiting (L1-L8).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use billet_clock::{Clock, SteadyClock};
use billet_config::{Config, ConfigError};
use billet_scheduler::{BuildError, Pools, Settings};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backends::{self, BackendError};
use crate::engine::{Bounds, DecisionTap, Engine, EngineError, PoolView, Quiet};
use crate::github::Github;
use crate::github::deliveries::Deliveries;
use crate::github::webhook::Webhook;
use crate::github::wiring::read_secret;
use crate::http::{AppState, JobLimits, router};
use crate::listener;
use crate::output::{Capturing, OutputStore};
use crate::record::{JobRecord, JobState, Verdict};
use crate::store::{StateLock, Store, StoreError};
use crate::token::{self, Credentials, TokenError};

/// How long the listener may take to close its connections once the engine
/// has stopped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How long past its grace a stop waits for the engine to finish (its last
/// commits): a store that no longer answers does not hold the stop for ever.
/// What it had not committed is then decided again at the next start, as
/// after a crash.
pub const STOP_SLACK: Duration = Duration::from_secs(10);

/// What `billet serve` is told (L3).
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The configuration file.
    pub config: PathBuf,
    /// The state directory: the database and, by default, the token.
    pub state: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// Whether a `listen` address off the loopback is allowed: billet speaks
    /// plain HTTP, so tokens and job commands would cross the network in
    /// clear unless a TLS proxy sits in front (L17).
    pub allow_plain_http: bool,
    /// Pools no longer configured whose running jobs end failed at start
    /// (`--forget-pool`, L21); a lost pool not named here stops the start.
    pub forget_pools: Vec<String>,
    /// The token file; `None` for `STATE/token`.
    pub token_file: Option<PathBuf>,
    /// How often every pool's inventory is read.
    pub reconcile_every: Duration,
    /// The deadline of each provider call.
    pub call_timeout: Duration,
    /// How long an instance no job holds may stay before it is destroyed.
    pub orphan_grace: Duration,
    /// How long calls in flight may take to finish at shutdown (L7).
    pub shutdown_grace: Duration,
    /// How long a launch or destroy whose effect stays unknown is retried
    /// before its job fails (L14).
    pub give_up_after: Duration,
    /// What jobs may ask (L14).
    pub jobs: JobLimits,
    /// The most connections served at once (L12).
    pub max_connections: usize,
    /// The most connections one peer is served at once (L23).
    pub max_connections_per_peer: usize,
    /// How long ended jobs are kept (L12).
    pub retain: Duration,
    /// The most jobs not yet ended at once (L19).
    pub max_queued: usize,
    /// The most bytes of one job's output kept (L15).
    pub output_limit: u64,
    /// The most bytes of all jobs' output kept at once (L26).
    pub output_total: u64,
}

/// The bounds a [`Service`] keeps (L12, L14).
#[derive(Debug, Clone)]
pub struct Limits {
    /// What jobs may ask.
    pub jobs: JobLimits,
    /// The most connections served at once.
    pub max_connections: usize,
    /// The most connections one peer (IP address) is served at once (L23).
    pub max_connections_per_peer: usize,
    /// How long ended jobs are kept, and how many requests may wait for the
    /// engine.
    pub engine: Bounds,
    /// Where jobs' output is captured (L15); `None`, the default: nowhere,
    /// and `GET /v1/jobs/{id}/output` answers `404`.
    pub output: Option<Arc<OutputStore>>,
    /// GitHub's webhook (G2), when `billet.yaml` has a `github:` section;
    /// `None`, the default: `POST /v1/github/webhook` answers `404`.
    pub github: Option<Arc<Webhook>>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            jobs: JobLimits::default(),
            max_connections: listener::DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: listener::DEFAULT_MAX_CONNECTIONS_PER_PEER,
            engine: Bounds::default(),
            output: None,
            github: None,
        }
    }
}

/// Why `serve` could not start, or stopped other than by a signal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// `billet.yaml` is wrong (its location is in the message).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A pool's provider could not be built.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The pools and their providers do not match.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The store could not be opened, or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The token could not be had.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The output directory could not be made.
    #[error("cannot make the output directory {}: {source}", path.display())]
    Output {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The GitHub intake could not start: its webhook secret file cannot be
    /// read, is empty, or others may read it (L13); or its deliveries'
    /// database cannot be opened.
    #[error("github: {0}")]
    Github(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The engine stopped on an error while serving.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The listener failed.
    #[error("the listener failed: {0}")]
    Listener(String),
    /// The engine's task ended with no error of its own: it panicked, or
    /// stopped unasked.
    #[error("the engine stopped: {0}")]
    EngineLost(String),
    /// The flags contradict each other.
    #[error("{0}")]
    Flags(String),
}

impl ServeError {
    /// The exit status `billet serve` ends with: 2 for whatever stops it at
    /// start (the configuration, its pools, the store, the token, the
    /// address), 1 for a failure while serving.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServeError::Engine(_) | ServeError::Listener(_) | ServeError::EngineLost(_) => 1,
            _ => 2,
        }
    }
}

/// A running service: the engine, and the listener in front of it.
#[derive(Debug)]
pub struct Service {
    addr: SocketAddr,
    engine: Engine,
    server: JoinHandle<()>,
    close: oneshot::Sender<()>,
}

impl Service {
    /// Starts the engine over `pools` with the jobs read from `store`, then
    /// serves the API on `listener`, requiring `credentials` (a token alone
    /// has every grant), with the default [`Limits`].
    pub async fn start(
        pools: &Pools,
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
        credentials: impl Into<Credentials>,
        listener: TcpListener,
    ) -> Result<Service, ServeError> {
        Service::start_with(
            pools,
            store,
            records,
            clock,
            credentials.into(),
            listener,
            Limits::default(),
        )
        .await
    }

    /// [`start`](Service::start), keeping `limits`.
    pub async fn start_with(
        pools: &Pools,
        store: Store,
        records: Vec<JobRecord>,
        clock: Arc<dyn Clock>,
        credentials: Credentials,
        listener: TcpListener,
        limits: Limits,
    ) -> Result<Service, ServeError> {
        let parts = (pools, store, records, clock);
        Service::start_tapped(parts, credentials, listener, limits, None).await
    }

    /// [`start_with`](Service::start_with) over `(pools, store, records,
    /// clock)`, telling `tap` of every decision the engine makes (H13).
    pub async fn start_tapped(
        (pools, store, records, clock): (&Pools, Store, Vec<JobRecord>, Arc<dyn Clock>),
        credentials: Credentials,
        listener: TcpListener,
        limits: Limits,
        tap: Option<DecisionTap>,
    ) -> Result<Service, ServeError> {
        let addr = listener.local_addr().map_err(|source| ServeError::Listen {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source,
        })?;
        let engine = Engine::start_tapped(
            pools,
            store,
            records,
            clock,
            limits.engine,
            tap,
            limits.output.clone(),
        )
        .await?;
        let state = AppState {
            engine: engine.handle.clone(),
            shared: Arc::clone(&engine.shared),
            credentials: Arc::new(credentials),
            limits: limits.jobs,
            output: limits.output.clone(),
            github: limits.github.clone(),
            sessions: Arc::default(),
            charts: Arc::default(),
            overflow: false,
        };
        let routes = router(state.clone());
        let overflow = router(AppState {
            overflow: true,
            ..state
        });
        let (close, closed) = oneshot::channel::<()>();
        let server = tokio::spawn(listener::serve(
            listener,
            routes,
            overflow,
            limits.max_connections,
            limits.max_connections_per_peer,
            closed,
        ));
        Ok(Service {
            addr,
            engine,
            server,
            close,
        })
    }

    /// The engine's handle and the table it keeps: what the GitHub intake
    /// submits runners' jobs through and watches them end in.
    pub fn engine_parts(&self) -> (crate::engine::EngineHandle, Arc<crate::engine::Shared>) {
        (self.engine.handle.clone(), Arc::clone(&self.engine.shared))
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every pool as the engine's last step left it (what `GET /v1/pools`
    /// answers).
    pub fn pools(&self) -> Vec<PoolView> {
        self.engine.shared.pools()
    }

    /// How many commits its store has made so far (see
    /// [`Store::commits`]).
    pub fn commits(&self) -> u64 {
        self.engine
            .shared
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether, and since when, its engine is quiescent ([`Quiet`]): for a
    /// driver of the service in modelled time (H13), which moves its clock
    /// only once every service it drives holds [`Quiet::holds_at`] the time
    /// it moves to, its own requests all answered.
    pub fn quiet(&self) -> tokio::sync::watch::Receiver<Option<Quiet>> {
        self.engine.shared.quiet.subscribe()
    }

    /// Waits until the engine is quiescent at `t` (see [`quiet`](Service::quiet)),
    /// at most `bound` of wall time; answers what it last said.
    pub async fn quiescent(&self, t: SystemTime, bound: Duration) -> Result<Quiet, Option<Quiet>> {
        self.quiet_when(bound, |q| q.holds_at(t)).await
    }

    /// Waits, at most `bound`, until the engine says a `Quiet` that `holds`;
    /// answers it, or what it last said.
    async fn quiet_when(
        &self,
        bound: Duration,
        holds: impl Fn(&Quiet) -> bool,
    ) -> Result<Quiet, Option<Quiet>> {
        let mut quiet = self.quiet();
        let seen: Option<Quiet> =
            tokio::time::timeout(bound, quiet.wait_for(|q| q.as_ref().is_some_and(&holds)))
                .await
                .ok()
                .and_then(Result::ok)
                .and_then(|seen| *seen);
        match seen {
            Some(held) => Ok(held),
            None => Err(*quiet.borrow()),
        }
    }

    /// Waits until the engine is quiescent with nothing held back
    /// ([`Quiet::settled`]): everything it decided is committed and shown
    /// over HTTP. At most `bound` of wall time (a held-back change waits at
    /// most [`LAZY_COMMIT`](crate::engine::LAZY_COMMIT)); answers what it
    /// last said.
    pub async fn settled(&self, bound: Duration) -> Result<Quiet, Option<Quiet>> {
        self.quiet_when(bound, |q| q.settled).await
    }

    /// Serves until `shutdown` completes, then stops in order (L7): new
    /// requests answer `503`, calls in flight get `grace` to finish, what
    /// they decided is committed, the listener closes. Instances keep
    /// running. An engine that fails first is the error.
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
    ) -> Result<(), ServeError> {
        tokio::select! {
            () = shutdown => {}
            ended = &mut self.engine.task => {
                let _ = self.close.send(());
                return Err(match ended {
                    Ok(Err(error)) => error.into(),
                    Ok(Ok(())) => ServeError::EngineLost("it stopped unasked".to_owned()),
                    Err(join) => ServeError::EngineLost(format!("it panicked: {join}")),
                });
            }
        }
        self.stop(grace).await
    }

    /// Stops at once, as a crash would: the engine and the listener are
    /// aborted, calls in flight dropped, and nothing more is committed (what
    /// was committed stays). For tests of what a restart recovers (L6).
    pub fn abort(self) {
        self.engine.task.abort();
        self.server.abort();
    }

    /// Stops now, as [`run_until`](Service::run_until) does once its signal
    /// came; an engine still running [`STOP_SLACK`] past `grace` (in wall
    /// time) is aborted, and that is the error.
    pub async fn stop(mut self, grace: Duration) -> Result<(), ServeError> {
        self.engine.shutdown(grace);
        let bound = grace.saturating_add(STOP_SLACK);
        let ended = match tokio::time::timeout(bound, &mut self.engine.task).await {
            Ok(ended) => ended,
            Err(_) => {
                self.engine.task.abort();
                let _ = self.close.send(());
                self.server.abort();
                return Err(ServeError::EngineLost(format!(
                    "it had not stopped {bound:?} after the shutdown began; what it had not committed is decided again at the next start"
                )));
            }
        };
        let _ = self.close.send(());
        match tokio::time::timeout(CLOSE_GRACE, &mut self.server).await {
            Ok(Ok(())) => {}
            Ok(Err(join)) => return Err(ServeError::Listener(join.to_string())),
            Err(_) => {
                tracing::warn!("connections still open after {CLOSE_GRACE:?}; closing them");
                self.server.abort();
            }
        }
        match ended {
            Ok(result) => result.map_err(ServeError::from),
            Err(join) => Err(ServeError::EngineLost(format!("it panicked: {join}"))),
        }
    }
}

/// The scheduler's settings from the flags; an error when they contradict
/// each other (a default timeout longer than the maximum).
fn scheduler_settings(options: &ServeOptions) -> Result<Settings, ServeError> {
    plain_http(options.listen, options.allow_plain_http)?;
    if options.jobs.default_timeout > options.jobs.max_timeout {
        return Err(ServeError::Flags(format!(
            "--default-timeout ({}s) is longer than --max-timeout ({}s)",
            options.jobs.default_timeout.as_secs(),
            options.jobs.max_timeout.as_secs()
        )));
    }
    Ok(Settings {
        reconcile_every: options.reconcile_every,
        call_timeout: options.call_timeout,
        orphan_grace: options.orphan_grace,
        give_up_after: options.give_up_after,
        ..Settings::default()
    })
}

/// Refuses a `listen` address off the loopback unless `allowed` (L17): billet
/// speaks plain HTTP, and bearer tokens and job commands must not cross a
/// network in clear by default. Allowed, it is said once as a warning.
fn plain_http(listen: SocketAddr, allowed: bool) -> Result<(), ServeError> {
    if listen.ip().is_loopback() {
        return Ok(());
    }
    if !allowed {
        return Err(ServeError::Flags(format!(
            "--listen {listen} is off the loopback, and billet speaks plain HTTP: tokens and job commands would cross the network in clear. Listen on 127.0.0.1 behind a TLS proxy, or give --allow-plain-http to accept that"
        )));
    }
    tracing::warn!(%listen, "listening off the loopback over plain HTTP (--allow-plain-http): tokens and job commands cross the network in clear unless a TLS proxy is in front");
    Ok(())
}

/// L21: the jobs `records` holds not ended whose lease is on a pool
/// `configured` lacks. Each such pool must be named in `forget` (else the
/// start stops, naming the pools and their jobs: placed again at once, a
/// job would run a second time beside its container under the old pool);
/// the jobs of a forgotten pool are answered decided failed, so the engine
/// commits their end before it serves and collects any container left as an
/// orphan. A forgotten pool that is configured is a mistake, refused.
pub(crate) fn lost_pools(
    mut records: Vec<JobRecord>,
    configured: &[&str],
    forget: &[String],
) -> Result<Vec<JobRecord>, ServeError> {
    if let Some(kept) = forget
        .iter()
        .find(|name| configured.contains(&name.as_str()))
    {
        return Err(ServeError::Flags(format!(
            "--forget-pool {kept}: the configuration has a pool `{kept}`; forget only a pool it no longer has"
        )));
    }
    let lost = |record: &JobRecord| {
        record
            .pool
            .as_deref()
            .filter(|pool| {
                !record.state.has_ended()
                    && record.decided().is_none()
                    && !configured.contains(pool)
            })
            .map(str::to_owned)
    };
    let mut refused: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for record in &records {
        if let Some(pool) = lost(record)
            && !forget.contains(&pool)
        {
            refused.entry(pool).or_default().push(record.id);
        }
    }
    if !refused.is_empty() {
        let said: Vec<String> = refused
            .iter()
            .map(|(pool, ids)| {
                let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
                format!("`{pool}` (jobs {})", ids.join(", "))
            })
            .collect();
        return Err(ServeError::Flags(format!(
            "the store holds jobs running on pools the configuration no longer has: {}. Placed again they would run a second time beside their containers. Put the pools back, or give --forget-pool NAME for each: its jobs then end failed and their containers are collected as orphans",
            said.join("; ")
        )));
    }
    for record in &mut records {
        if let Some(pool) = lost(record) {
            tracing::warn!(job = record.id, pool = %pool, "the job's pool is forgotten (--forget-pool): it ends failed");
            record.verdict = Some(Verdict {
                state: JobState::Failed,
                exit_code: None,
                reason: Some(format!(
                    "its pool `{pool}` is no longer configured (--forget-pool {pool}); its container, if any, is collected as an orphan"
                )),
            });
        }
    }
    Ok(records)
}

/// `billet serve`: reads the configuration, builds every pool, opens the
/// store and the token, listens, and serves until `shutdown` completes.
pub async fn serve(
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let config = Config::load(&options.config)?;
    let settings = scheduler_settings(&options)?;
    let built = backends::build(&config, options.call_timeout, Some(options.output_limit))?;
    backends::check_runtimes(&built.runtimes).await?;
    backends::check_storage(&built.storages).await?;
    let providers = built.named;
    let deployment = config.deployment().id().to_owned();
    // Held until `serve` returns; the OS drops it if the process dies.
    let _lock = StateLock::acquire(&options.state)?;
    let (mut store, records) = Store::open(&options.state)?;
    store.claim_deployment(&deployment)?;
    let configured: Vec<&str> = config.providers().iter().map(|p| p.name()).collect();
    let records = lost_pools(records, &configured, &options.forget_pools)?;
    let unnamed_through = store.unnamed_through().map(|job| job.0);
    let output = OutputStore::open(&options.state, store.identity(), options.output_limit)
        .map(|output| {
            Arc::new(
                output
                    .with_unnamed_through(unnamed_through)
                    .with_total(options.output_total),
            )
        })
        .map_err(|source| ServeError::Output {
            path: options.state.join("output"),
            source,
        })?;
    let clock: Arc<dyn Clock> = Arc::new(SteadyClock::new());
    let github = match config.github() {
        Some(settings) => {
            let secret = read_secret("webhook secret file", &settings.webhook_secret_file)
                .map_err(ServeError::Github)?;
            let deliveries = Deliveries::open(&options.state)?;
            let api = crate::github::wiring::api(settings, Arc::clone(&clock))
                .map_err(ServeError::Github)?;
            tracing::info!(
                scopes = settings.scopes.len(),
                pools = settings.pools.len(),
                api = %settings.api_url,
                "GitHub's webhook is served at POST /v1/github/webhook; runners start just in time"
            );
            let webhook = Arc::new(Webhook::new(secret, deliveries));
            Some(Github::new(settings.clone(), api, webhook))
        }
        None => None,
    };
    let mut builder = Pools::builder(config).settings(settings);
    for (name, provider) in providers {
        let mut capturing: Arc<dyn billet_provider::Provider> =
            Arc::new(Capturing::new(provider, Arc::clone(&output)));
        if let Some(github) = &github {
            capturing = github.provider(&name, capturing);
        }
        builder = builder.provider(name, capturing);
    }
    let pools = builder.build()?;
    let token_path = options
        .token_file
        .clone()
        .unwrap_or_else(|| options.state.join("token"));
    let (credentials, created) = token::load_or_create(&token_path)?;
    if created {
        tracing::info!(path = %token_path.display(), "created a token file (mode 0600) with a random token");
    } else {
        tracing::info!(path = %token_path.display(), credentials = credentials.len(), "read the token file");
    }
    let listener =
        TcpListener::bind(options.listen)
            .await
            .map_err(|source| ServeError::Listen {
                addr: options.listen,
                source,
            })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: options.listen,
        source,
    })?;
    // Said before the engine starts, so that it comes before anything the
    // engine logs (its first inventory reads): the socket is bound already.
    tracing::info!(
        deployment = %deployment,
        pools = pools.config().providers().len(),
        jobs = records.len(),
        state = %options.state.display(),
        store = %store.identity().map_or("-", |identity| identity.as_str()),
        "listening on {addr}"
    );
    let identity = store
        .identity()
        .map(|identity| identity.as_str().to_owned());
    let service = Service::start_with(
        &pools,
        store,
        records,
        clock,
        credentials,
        listener,
        Limits {
            jobs: options.jobs,
            max_connections: options.max_connections,
            max_connections_per_peer: options.max_connections_per_peer,
            engine: Bounds {
                retain: options.retain,
                max_queued: options.max_queued,
                ..Bounds::default()
            },
            output: Some(output),
            github: github.as_ref().map(Github::webhook),
        },
    )
    .await?;
    if let Some(github) = github {
        github
            .start(service.engine_parts(), &pools, identity)
            .map_err(ServeError::Github)?;
    }
    let result = service.run_until(shutdown, options.shutdown_grace).await;
    if result.is_ok() {
        tracing::info!("stopped; instances still running are adopted at the next start");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> ServeOptions {
        let secs = Duration::from_secs;
        ServeOptions {
            config: PathBuf::from("billet.yaml"),
            state: PathBuf::from("state"),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_plain_http: false,
            forget_pools: Vec::new(),
            token_file: None,
            reconcile_every: secs(7),
            call_timeout: secs(11),
            orphan_grace: secs(13),
            shutdown_grace: secs(17),
            give_up_after: secs(19),
            jobs: JobLimits {
                default_timeout: secs(60),
                max_timeout: secs(60),
            },
            max_connections: 5,
            max_connections_per_peer: 3,
            retain: secs(23),
            max_queued: 29,
            output_limit: 1 << 20,
            output_total: 1 << 30,
        }
    }

    // L21: jobs not ended on pools the configuration lost stop the start,
    // naming each pool and its jobs, unless each pool is forgotten; then
    // those jobs (running, or requeued but once placed there) are decided
    // failed, and nothing else changes. Forgetting a configured pool is a
    // mistake, refused.
    #[test]
    fn l21_jobs_on_a_lost_pool_stop_the_start_unless_it_is_forgotten() {
        use crate::record::NewJob;
        let record = |id: u64, state: JobState, pool: Option<&str>| {
            let mut record = JobRecord::accepted(
                id,
                NewJob {
                    command: vec!["true".into()],
                    labels: vec![],
                    trust: billet_provider::TrustClass::Trusted,
                    timeout: None,
                    key: None,
                    pinned: None,
                },
                std::time::SystemTime::UNIX_EPOCH,
            );
            record.state = state;
            record.pool = pool.map(str::to_owned);
            record
        };
        let finished = Verdict {
            state: JobState::Finished,
            exit_code: Some(0),
            reason: None,
        };
        let mut decided = record(5, JobState::Running, Some("old"));
        decided.verdict = Some(finished.clone());
        let records = vec![
            record(1, JobState::Running, Some("old")),
            record(2, JobState::Queued, Some("old")),
            record(3, JobState::Running, Some("linux")),
            record(4, JobState::Queued, None),
            decided,
            record(6, JobState::Finished, Some("old")),
            record(7, JobState::Running, Some("older")),
        ];
        let configured = ["linux"];
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let refusal =
            |forget: &[&str]| match lost_pools(records.clone(), &configured, &names(forget)) {
                Err(ServeError::Flags(text)) => text,
                other => panic!("forgetting {forget:?}: {other:?}"),
            };
        let text = refusal(&[]);
        assert!(
            text.contains("`old` (jobs 1, 2); `older` (jobs 7)"),
            "{text}"
        );
        assert!(text.contains("--forget-pool NAME"), "{text}");
        let text = refusal(&["old"]);
        assert!(
            text.contains("`older` (jobs 7)") && !text.contains("`old` "),
            "{text}"
        );
        let text = refusal(&["old", "older", "linux"]);
        assert!(
            text.starts_with("--forget-pool linux: the configuration has"),
            "{text}"
        );
        assert_eq!(ServeError::Flags(text).exit_code(), 2);

        let kept = lost_pools(records.clone(), &configured, &names(&["older", "old"])).unwrap();
        assert_eq!(kept.len(), records.len());
        for (before, after) in records.iter().zip(&kept) {
            let lost = [1, 2, 7].contains(&before.id);
            if lost {
                let verdict = after.decided().expect("decided failed");
                assert_eq!(verdict.state, JobState::Failed);
                let pool = before.pool.as_deref().unwrap();
                let reason = verdict.reason.as_deref().unwrap();
                assert!(
                    reason.contains(&format!("--forget-pool {pool}")),
                    "{reason}"
                );
                let mut unchanged = after.clone();
                unchanged.verdict = None;
                assert_eq!(&unchanged, before);
            } else {
                assert_eq!(after, before, "job {}", before.id);
            }
        }
        assert_eq!(kept[4].verdict, Some(finished));
        // Nothing lost: nothing changes, whatever is forgotten.
        let fine = vec![record(3, JobState::Running, Some("linux"))];
        assert_eq!(
            lost_pools(fine.clone(), &configured, &names(&["gone"])).unwrap(),
            fine
        );
    }

    // L17: the loopback, v4 or v6, needs nothing; any other address needs
    // the flag, whose refusal says what to write.
    #[test]
    fn l17_plain_http_off_the_loopback_needs_the_flag() {
        for loopback in ["127.0.0.1:7878", "127.1.2.3:1", "[::1]:7878"] {
            let addr: SocketAddr = loopback.parse().unwrap();
            assert!(plain_http(addr, false).is_ok(), "{loopback}");
        }
        for off in [
            "0.0.0.0:7878",
            "10.0.0.5:80",
            "[::]:7878",
            "[2001:db8::1]:1",
        ] {
            let addr: SocketAddr = off.parse().unwrap();
            let error = plain_http(addr, false).unwrap_err();
            assert_eq!(error.exit_code(), 2);
            let text = error.to_string();
            assert!(
                text.contains(&format!("--listen {addr} is off the loopback"))
                    && text.contains("--allow-plain-http"),
                "{text}"
            );
            assert!(plain_http(addr, true).is_ok(), "{off}");
        }
        let mut options = options();
        options.listen = "0.0.0.0:1".parse().unwrap();
        assert!(matches!(
            scheduler_settings(&options),
            Err(ServeError::Flags(_))
        ));
        options.allow_plain_http = true;
        assert!(scheduler_settings(&options).is_ok());
    }

    // L14, L3: every timing flag reaches the scheduler; a default timeout
    // longer than the maximum stops the start (exit 2), an equal one does
    // not.
    #[test]
    fn l14_the_flags_become_the_schedulers_settings() {
        let settings = scheduler_settings(&options()).unwrap();
        let secs = Duration::from_secs;
        assert_eq!(settings.reconcile_every, secs(7));
        assert_eq!(settings.call_timeout, secs(11));
        assert_eq!(settings.orphan_grace, secs(13));
        assert_eq!(settings.give_up_after, secs(19));
        assert_eq!(settings.backoff_base, Settings::default().backoff_base);
        let mut longer = options();
        longer.jobs.default_timeout = secs(61);
        let error = scheduler_settings(&longer).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            "--default-timeout (61s) is longer than --max-timeout (60s)"
        );
        let mut shorter = options();
        shorter.jobs.default_timeout = secs(59);
        assert!(scheduler_settings(&shorter).is_ok());
    }

    // L7: what stops `serve` while it serves exits 1, and an engine that
    // panicked or stopped unasked says so, not that the listener failed.
    #[test]
    fn l7_failures_while_serving_exit_1_and_name_their_part() {
        let lost = ServeError::EngineLost("it panicked: boom".to_owned());
        assert_eq!(lost.exit_code(), 1);
        assert_eq!(lost.to_string(), "the engine stopped: it panicked: boom");
        let listener = ServeError::Listener("closed".to_owned());
        assert_eq!(listener.exit_code(), 1);
        assert_eq!(listener.to_string(), "the listener failed: closed");
        assert_eq!(ServeError::Flags("x".to_owned()).exit_code(), 2);
        let github = ServeError::Github("the token file /t: it is empty".to_owned());
        assert_eq!(
            github.exit_code(),
            2,
            "a start GitHub refuses is a usage error"
        );
        assert_eq!(github.to_string(), "github: the token file /t: it is empty");
    }
}
