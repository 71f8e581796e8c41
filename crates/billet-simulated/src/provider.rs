//! [`SimulatedProvider`] and its [`Builder`]: the simulated backend for one deployment.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use billet_clock::{Clock, SystemClock};
use billet_provider::{
    Error, Hint, HintKind, Hints, Instance, InstanceId, Output, Provider, ProviderKind, Spec,
    Teardown, TrustClass,
};
use parking_lot::Mutex;
use tracing::Dispatch;

use crate::command::parse_run_for_writing;
use crate::host::{Host, Removal, parse_id};

/// The simulated backend for one deployment.
///
/// It starts no compute. [`launch`](Provider::launch) records an instance that
/// reports itself `Running` until the duration named in its command (see
/// [`run_for`](crate::run_for)) has elapsed on the provider's clock, and
/// `Stopped` with exit code 0 from then on, until it is destroyed. State is
/// derived from the clock at each call: a launch costs no task, no thread and
/// no timer.
///
/// Every obligation of [`Provider`] holds here unweakened:
///
/// * `accepts` passes only [`TrustClass::Trusted`]: nothing runs here, so
///   nothing isolates, and `Unknown` is refused alongside `Untrusted`.
/// * `list` answers every instance this deployment owns on the host, or the
///   error set by [`fail_inventory`](SimulatedProvider::fail_inventory); never
///   a short answer.
/// * `find` compares names exactly.
/// * `destroy` is scoped by the deployment identity and idempotent: an id the
///   host does not hold is [`Teardown::Absent`], confirmed, because the host
///   is authoritative about its contents.
///
/// Both optional capabilities (P9) are offered, at fleet scale: an
/// instance's [`Output`] is the count of bytes its command names
/// ([`run_for_writing`](crate::run_for_writing)), written at an even pace
/// over its run and made as it is read (never held); its [`Hints`] are told
/// at the modelled instant it stops, and as it appears and vanishes. Neither
/// costs a launch anything more than its record.
///
/// Launches, destroys and refusals emit `tracing` events (target
/// `billet_simulated`) carrying `deployment`, `id` and `name`.
pub struct SimulatedProvider {
    owner: Arc<str>,
    host: Host,
    clock: Arc<dyn Clock>,
    logger: Option<Dispatch>,
    inventory_fault: Mutex<Option<Error>>,
    /// Whether `inventory_fault` holds an error, read without its lock by
    /// every `list` and `find` (set under it).
    inventory_faulted: AtomicBool,
}

/// Builds a [`SimulatedProvider`]; start from [`SimulatedProvider::builder`].
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder {
    owner: String,
    host: Option<Host>,
    clock: Option<Arc<dyn Clock>>,
    logger: Option<Dispatch>,
}

impl Builder {
    /// Places the provider's instances on `host`, shared with every other
    /// provider over it. Without this, the provider gets a host of its own.
    pub fn host(mut self, host: Host) -> Self {
        self.host = Some(host);
        self
    }

    /// Times instances against `clock` instead of the default [`SystemClock`].
    /// A harness passes a [`ManualClock`](billet_clock::ManualClock) so a
    /// modelled hour takes no wall time.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Sends this provider's events to `logger` instead of the default
    /// subscriber, so a harness can capture one provider's events.
    pub fn logger(mut self, logger: Dispatch) -> Self {
        self.logger = Some(logger);
        self
    }

    /// The provider; refuses an owner that is empty or only whitespace with
    /// [`Error::InvalidOwner`].
    pub fn build(self) -> Result<SimulatedProvider, Error> {
        if self.owner.trim().is_empty() {
            return Err(Error::InvalidOwner {
                owner: self.owner,
                reason: "a deployment identity must not be empty".to_owned(),
            });
        }
        Ok(SimulatedProvider {
            owner: Arc::from(self.owner),
            host: self.host.unwrap_or_default(),
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            logger: self.logger,
            inventory_fault: Mutex::new(None),
            inventory_faulted: AtomicBool::new(false),
        })
    }
}

impl SimulatedProvider {
    /// A provider for the deployment `owner`, on a host of its own, timed by
    /// the system clock. An empty owner is refused with [`Error::InvalidOwner`].
    pub fn new(owner: impl Into<String>) -> Result<Self, Error> {
        Self::builder(owner).build()
    }

    /// A builder for a provider for the deployment `owner`.
    pub fn builder(owner: impl Into<String>) -> Builder {
        Builder {
            owner: owner.into(),
            host: None,
            clock: None,
            logger: None,
        }
    }

    /// The deployment identity written onto every instance this provider starts.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The host this provider's instances live on.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The clock this provider reads.
    pub(crate) fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// Makes this provider's `list` and `find` answer `err` until called again
    /// with `None`; then they answer the exact inventory again.
    ///
    /// The only way an in-memory inventory can fail, and the harness's seam for
    /// asking what a scheduler does when its backend loses its daemon. Launch
    /// and destroy are unaffected, as are other providers over the same host.
    pub fn fail_inventory(&self, err: Option<Error>) {
        let mut fault = self.inventory_fault.lock();
        self.inventory_faulted
            .store(err.is_some(), Ordering::Release);
        *fault = err;
    }

    fn inventory_ok(&self) -> Result<(), Error> {
        if !self.inventory_faulted.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self.inventory_fault.lock() {
            Some(err) => Err(err.clone()),
            None => Ok(()),
        }
    }

    /// Runs `f` with this provider's logger as the default subscriber, if it has one.
    fn log(&self, f: impl FnOnce()) {
        match &self.logger {
            Some(logger) => tracing::dispatcher::with_default(logger, f),
            None => f(),
        }
    }

    fn refuse(&self, name: &str, err: Error) -> Error {
        self.log(|| {
            tracing::warn!(
                target: "billet_simulated",
                deployment = %self.owner,
                id = tracing::field::Empty,
                name,
                error = %err,
                "launch refused"
            );
        });
        err
    }
}

impl fmt::Debug for SimulatedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimulatedProvider")
            .field("owner", &self.owner)
            .field("host", &self.host)
            .field("clock", &self.clock)
            .field("inventory_fault", &*self.inventory_fault.lock())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Provider for SimulatedProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Simulated
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        // S9: nothing runs here, so nothing isolates: only trusted work.
        billet_provider::accepts_trust(self.kind(), billet_provider::Isolation::NoBoundary, trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        if let Err(err) = self.accepts(spec.trust) {
            return Err(self.refuse(&spec.name, err));
        }
        if spec.name.is_empty() {
            let err = Error::invalid_spec("the instance name is empty");
            return Err(self.refuse(&spec.name, err));
        }
        let (run_time, writes) = match parse_run_for_writing(&spec.command) {
            Ok(parsed) => parsed,
            Err(err) => return Err(self.refuse(&spec.name, err)),
        };
        if let Some(problem) = spec.env.problem() {
            return Err(self.refuse(&spec.name, Error::invalid_spec(problem)));
        }
        let now = self.clock.now();
        let mut store = self.host.lock();
        if store.find(&self.owner, &spec.name).is_some() {
            drop(store);
            let err = Error::Conflict {
                name: spec.name.clone(),
            };
            return Err(self.refuse(&spec.name, err));
        }
        let stops_at = now.checked_add(run_time);
        let name: Arc<str> = Arc::from(spec.name.as_str());
        let Some((_, record)) = store.insert(
            &self.owner,
            Arc::clone(&name),
            now,
            stops_at,
            writes,
            spec.env,
        ) else {
            drop(store);
            let err = Error::unavailable("the simulated host has issued every instance id it can");
            return Err(self.refuse(&spec.name, err));
        };
        let id = record.id.clone();
        let state = record.state(now);
        let wakers = store.hint(&self.owner, || Hint {
            kind: HintKind::Appeared,
            id: id.clone(),
            name: Arc::clone(&name),
        });
        drop(store);
        wakers.wake();
        let instance = Instance {
            id,
            name,
            owner: Arc::clone(&self.owner),
            kind: ProviderKind::Simulated,
            state,
            started_at: now,
        };
        self.log(|| {
            tracing::info!(
                target: "billet_simulated",
                deployment = %self.owner,
                id = %instance.id,
                name = %instance.name,
                run_for = ?run_time,
                "launched"
            );
        });
        Ok(instance)
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        self.inventory_ok()?;
        let now = self.clock.now();
        let store = self.host.lock();
        Ok(store
            .find(&self.owner, name)
            .map(|(_, record)| record.snapshot(&self.owner, now)))
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        self.inventory_ok()?;
        let now = self.clock.now();
        let store = self.host.lock();
        let Some(shelf) = store.shelf(&self.owner) else {
            return Ok(Vec::new());
        };
        Ok(shelf
            .iter()
            .map(|(_, record)| record.snapshot(&self.owner, now))
            .collect())
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        let removal = match parse_id(id) {
            Some(key) => {
                let mut store = self.host.lock();
                let removal = store.take(&self.owner, key);
                if let Removal::Removed(record) = &removal {
                    let wakers = store.hint(&self.owner, || Hint {
                        kind: HintKind::Vanished,
                        id: id.clone(),
                        name: Arc::clone(&record.name),
                    });
                    drop(store);
                    wakers.wake();
                }
                removal
            }
            None => Removal::Absent,
        };
        match removal {
            Removal::Removed(record) => {
                self.log(|| {
                    tracing::info!(
                        target: "billet_simulated",
                        deployment = %self.owner,
                        %id,
                        name = %record.name,
                        "destroyed"
                    );
                });
                Ok(Teardown::Stopped)
            }
            Removal::Absent => {
                self.log(|| {
                    tracing::debug!(
                        target: "billet_simulated",
                        deployment = %self.owner,
                        %id,
                        name = tracing::field::Empty,
                        "destroy: not held, confirmed absent"
                    );
                });
                Ok(Teardown::Absent)
            }
            Removal::NotOwned { owner, name } => {
                let err = Error::NotOwned {
                    id: id.clone(),
                    owner: owner.to_string(),
                };
                self.log(|| {
                    tracing::warn!(
                        target: "billet_simulated",
                        deployment = %self.owner,
                        %id,
                        name = %name,
                        error = %err,
                        "destroy refused"
                    );
                });
                Err(err)
            }
        }
    }

    fn output(&self) -> Option<&dyn Output> {
        Some(self)
    }

    fn hints(&self) -> Option<&dyn Hints> {
        Some(self)
    }
}
