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

    /// The runner number of billet job `job`, read from its key: `None`
    /// when the job is not a runner's. `Err` until the service's table is
    /// attached: until then no job can be told a runner's or not.
    pub fn number_of_job(&self, job: u64) -> Result<Option<u64>, Unattached> {
        let shared = self.shared.get().ok_or(Unattached)?;
        let jobs = shared.jobs.read();
        Ok(jobs
            .live(job)
            .and_then(|record| runner_of_key(record.key.as_deref()?)))
    }

    fn registered(&self, n: u64, runner_id: u64) {
        if let Some(held) = self.by_number.lock().get_mut(&n) {
            held.1 = Some(runner_id);
        }
    }
}

/// The intake has not attached the service's table to its [`Runners`] yet
/// (the engine may launch before [`Runners::attach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unattached;

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
        let number = match InstanceName::parse(&spec.name) {
            // A launch before the intake has started is tried again later:
            // launched now, a runner would start without its JIT config.
            Some(name) => self.runners.number_of_job(name.job.0).map_err(|_| {
                Error::unavailable(format!(
                    "the GitHub intake has not started yet: {} is launched once it has",
                    spec.name
                ))
            })?,
            None => None,
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use billet_clock::SystemClock;
    use billet_provider::ErrorKind;
    use billet_scheduler::JobId;
    use billet_simulated::{Host, SimulatedProvider};

    fn registering() -> (Registering, Arc<dyn Provider>) {
        let inner: Arc<dyn Provider> = Arc::new(
            SimulatedProvider::builder("blue")
                .host(Host::new())
                .build()
                .unwrap(),
        );
        // Never called: no launch here is a runner's.
        let api = Api::new(
            "http://127.0.0.1:9",
            billet_github::Credential::Token("t".to_owned()),
            Arc::new(SystemClock),
        )
        .unwrap();
        let registering = Registering::new(
            Arc::clone(&inner),
            api,
            Arc::new(Runners::default()),
            vec!["linux".to_owned()],
        );
        (registering, inner)
    }

    // G5: a runner's billet job key names its number, and no other key
    // names one.
    #[test]
    fn g5_a_runners_key_names_its_number() {
        for n in [0, 1, 7, 12_345, u64::MAX] {
            assert_eq!(runner_of_key(&runner_key(n)), Some(n), "{n}");
        }
        assert_eq!(runner_key(42), "github-runner-42");
        for key in ["", "github-runner-", "github-runner-x", "other-42", "42"] {
            assert_eq!(runner_of_key(key), None, "{key:?}");
        }
    }

    // G5: before the intake attaches the service's table, a job's instance
    // is not launched (it may be a runner's, which would start without its
    // JIT config): refused as unavailable, so the scheduler tries again,
    // and nothing reaches the pool's provider. A name that is no job's
    // instance is launched as it is, and every other call is the pool's
    // provider's.
    #[tokio::test]
    async fn g5_no_job_launches_before_the_intake_is_attached() {
        let (registering, inner) = registering();
        let spec = |name: &str| {
            let mut spec = Spec::new(name, ["billet-simulated", "run-for", "90s"]);
            spec.trust = TrustClass::Trusted;
            spec
        };
        let name = JobId(7).instance_name("blue");
        let error = registering.launch(spec(&name)).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Unavailable, "{error}");
        assert!(error.to_string().contains(&name), "{error}");
        assert!(inner.list().await.unwrap().is_empty());

        let plain = registering.launch(spec("plain")).await.unwrap();
        assert_eq!(&*plain.name, "plain");
        assert_eq!(inner.list().await.unwrap().len(), 1);

        // Every other call is the pool's provider's.
        assert_eq!(registering.kind(), inner.kind());
        assert_eq!(
            registering.accepts(TrustClass::Untrusted).is_ok(),
            inner.accepts(TrustClass::Untrusted).is_ok()
        );
        assert!(registering.accepts(TrustClass::Trusted).is_ok());
        let found = registering.find("plain").await.unwrap().expect("found");
        assert_eq!(found.id, plain.id);
        assert_eq!(registering.list().await.unwrap().len(), 1);
        assert!(registering.output().is_some());
        assert!(registering.hints().is_some());
        registering.destroy(&plain.id).await.unwrap();
        assert!(inner.find("plain").await.unwrap().is_none());
    }
}
