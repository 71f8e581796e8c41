//! A runner per job, just in time (G5): the provider wrapper of a pool that
//! takes GitHub jobs. When the scheduler launches a runner's instance, it
//! asks GitHub for a JIT config named after the instance, with the pool's
//! labels, at the runner's scope, and hands it to the instance in
//! `ACTIONS_RUNNER_INPUT_JITCONFIG` (a secret: in the spec's environment
//! only, never logged, never stored). Every other launch, and every other
//! call, goes to the pool's provider unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use billet_github::{Api, ApiError, Scope};
use billet_provider::{
    Error, Hints, Instance, InstanceId, Output, Provider, ProviderKind, Spec, Teardown, TrustClass,
    async_trait,
};
use billet_scheduler::InstanceName;
use parking_lot::Mutex;

/// The environment variable GitHub's runner reads its JIT config from.
pub const JITCONFIG_VARIABLE: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

/// Where a runner registers: its scope and runner group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The organization or repository.
    pub scope: Scope,
    /// The runner group (1 for a repository).
    pub runner_group_id: u64,
}

/// The idempotency key of runner `n`'s billet job. No key an HTTP client
/// gives can be one: the service keeps theirs behind 16 hex digits and `:`.
pub fn runner_key(n: u64) -> String {
    format!("{RUNNER_KEY}{n}")
}

/// What every runner job's key starts with.
const RUNNER_KEY: &str = "github-runner-";

/// The runner number a billet job's key names, if it is a runner's.
pub fn runner_of_key(key: &str) -> Option<u64> {
    key.strip_prefix(RUNNER_KEY)?.parse().ok()
}

/// The runners the intake made, by their number: where each registers,
/// and the id GitHub gave its registration once made.
#[derive(Debug, Default)]
pub struct Runners {
    by_number: Mutex<HashMap<u64, (Place, Option<u64>)>>,
    /// The service's table, to read a launching job's key: set once the
    /// engine has started (no launch comes before).
    shared: std::sync::OnceLock<Arc<crate::engine::Shared>>,
}

impl Runners {
    /// Runner `n` registers at `place`.
    pub fn insert(&self, n: u64, place: Place) {
        self.by_number.lock().insert(n, (place, None));
    }

    /// Forgets runner `n`.
    pub fn remove(&self, n: u64) -> Option<(Place, Option<u64>)> {
        self.by_number.lock().remove(&n)
    }

    /// Where runner `n` registers, and its registration's id once made.
    pub fn get(&self, n: u64) -> Option<(Place, Option<u64>)> {
        self.by_number.lock().get(&n).cloned()
    }

    /// The service's table, once the engine runs.
    pub fn attach(&self, shared: Arc<crate::engine::Shared>) {
        let _ = self.shared.set(shared);
    }

    /// The runner number of billet job `job`, read from its key.
    pub fn number_of_job(&self, job: u64) -> Option<u64> {
        let shared = self.shared.get()?;
        let jobs = shared.jobs.read();
        runner_of_key(jobs.live(job)?.key.as_deref()?)
    }

    fn registered(&self, n: u64, runner_id: u64) {
        if let Some(held) = self.by_number.lock().get_mut(&n) {
            held.1 = Some(runner_id);
        }
    }
}

/// A pool's provider, registering its GitHub runners as they launch.
#[derive(Debug)]
pub struct Registering {
    inner: Arc<dyn Provider>,
    api: Api,
    runners: Arc<Runners>,
    labels: Vec<String>,
}

impl Registering {
    /// `inner`, whose runners (the jobs `runners` names) register through
    /// `api` with `labels`.
    pub fn new(
        inner: Arc<dyn Provider>,
        api: Api,
        runners: Arc<Runners>,
        labels: Vec<String>,
    ) -> Registering {
        Registering {
            inner,
            api,
            runners,
            labels,
        }
    }

    /// A JIT config for the runner named `name` at `place`. A registration
    /// of that name left by an earlier launch that did not start (a crash
    /// between the two) is removed first and made anew: used, never left.
    async fn jitconfig(
        &self,
        name: &str,
        place: &Place,
    ) -> Result<billet_github::JitConfig, ApiError> {
        match self
            .api
            .generate_jitconfig(&place.scope, name, place.runner_group_id, &self.labels)
            .await
        {
            Err(ApiError::Refused { status: 409, .. }) => {
                for stale in self.api.runners(&place.scope, Some(name)).await? {
                    if stale.name == name {
                        self.api.delete_runner(&place.scope, stale.id).await?;
                    }
                }
                self.api
                    .generate_jitconfig(&place.scope, name, place.runner_group_id, &self.labels)
                    .await
            }
            answer => answer,
        }
    }
}

#[async_trait]
impl Provider for Registering {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        self.inner.accepts(trust)
    }

    async fn launch(&self, mut spec: Spec) -> Result<Instance, Error> {
        let number =
            InstanceName::parse(&spec.name).and_then(|name| self.runners.number_of_job(name.job.0));
        if let Some(n) = number {
            let Some((place, _)) = self.runners.get(n) else {
                return Err(Error::invalid_spec(format!(
                    "runner {n} was made before billet restarted and never launched: where it registers is no longer known, so it is not started (the GitHub jobs that wait get new runners)"
                )));
            };
            let jit = self.jitconfig(&spec.name, &place).await.map_err(|error| {
                Error::unavailable(format!(
                    "GitHub gave no JIT config for runner {}: {error}",
                    spec.name
                ))
            })?;
            self.runners.registered(n, jit.runner_id);
            spec.env.set(JITCONFIG_VARIABLE, jit.encoded());
        }
        self.inner.launch(spec).await
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        self.inner.find(name).await
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        self.inner.list().await
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        self.inner.destroy(id).await
    }

    fn output(&self) -> Option<&dyn Output> {
        self.inner.output()
    }

    fn hints(&self) -> Option<&dyn Hints> {
        self.inner.hints()
    }
}
