//! How the GitHub intake is put together around a service, by `billet
//! serve` and by tests alike: the API client from the configured credential
//! (its files read private, L13), each GitHub pool's provider wrapped to
//! register its runners just in time, and, once the service runs, the
//! intake's task fed by the webhook.

use std::sync::Arc;

use billet_clock::Clock;
use billet_config::{GithubCredential, GithubSettings};
use billet_github::{Api, Credential};
use billet_provider::Provider;
use billet_scheduler::Pools;

use super::intake::{self, Parts};
use super::registering::{Registering, Runners};
use super::webhook::Webhook;
use crate::service::{ServeError, Service, read_secret};

/// The GitHub intake, before and while the service runs.
#[derive(Debug)]
pub struct Github {
    settings: GithubSettings,
    api: Api,
    webhook: Arc<Webhook>,
    runners: Arc<Runners>,
}

/// GitHub's API as `settings` configures it, its credential read from its
/// file (refused when others may read it, or empty), on `clock`.
pub fn api(settings: &GithubSettings, clock: Arc<dyn Clock>) -> Result<Api, ServeError> {
    let credential = match &settings.credential {
        GithubCredential::Token { file } => {
            let token = read_secret("token file", file)?;
            Credential::Token(String::from_utf8(token).map_err(|_| {
                ServeError::Github(format!(
                    "the token file {}: it is not UTF-8 text",
                    file.display()
                ))
            })?)
        }
        GithubCredential::App {
            id,
            private_key_file,
            installation_id,
        } => Credential::App {
            id: *id,
            private_key_pem: read_secret("App's private key file", private_key_file)?,
            installation_id: *installation_id,
        },
        other => {
            return Err(ServeError::Github(format!(
                "a credential this build cannot use: {other:?}"
            )));
        }
    };
    Api::new(&settings.api_url, credential, clock).map_err(|error| {
        ServeError::Github(format!("GitHub's API at {}: {error}", settings.api_url))
    })
}

impl Github {
    /// The intake of `settings`, calling GitHub through `api`, its
    /// deliveries taken by `webhook`.
    pub fn new(settings: GithubSettings, api: Api, webhook: Arc<Webhook>) -> Github {
        Github {
            settings,
            api,
            webhook,
            runners: Arc::new(Runners::default()),
        }
    }

    /// The webhook, for the service's listener ([`crate::Limits::github`]).
    pub fn webhook(&self) -> Arc<Webhook> {
        Arc::clone(&self.webhook)
    }

    /// Pool `name`'s provider as the scheduler should hold it: wrapped to
    /// register GitHub runners at launch when `github.pools` names the pool
    /// (with that entry's labels), else `provider` itself.
    pub fn provider(&self, name: &str, provider: Arc<dyn Provider>) -> Arc<dyn Provider> {
        match self.settings.pools.iter().find(|pool| pool.pool == name) {
            Some(pool) => Arc::new(Registering::new(
                provider,
                self.api.clone(),
                Arc::clone(&self.runners),
                pool.labels.clone(),
            )),
            None => provider,
        }
    }

    /// Starts the intake's task beside `service`, whose pools are `pools`
    /// (what decides which pool may run a job's trust): from now on every
    /// `workflow_job` delivery the webhook commits reaches it.
    pub fn start(self, service: &Service, pools: &Pools) -> Result<(), ServeError> {
        let (engine, shared) = service.engine_parts();
        self.runners.attach(Arc::clone(&shared));
        let events = intake::start(Parts {
            settings: self.settings,
            api: self.api,
            webhook: Arc::clone(&self.webhook),
            engine,
            shared,
            runners: self.runners,
            pools: pools.clone(),
        })?;
        self.webhook.feed(events);
        Ok(())
    }
}
