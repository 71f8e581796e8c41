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
use crate::engine::{EngineHandle, Shared};

/// The GitHub intake, before and while the service runs.
#[derive(Debug)]
pub struct Github {
    settings: GithubSettings,
    api: Api,
    webhook: Arc<Webhook>,
    runners: Arc<Runners>,
    timers: Option<intake::Timers>,
}

/// GitHub's API as `settings` configures it, its credential read from its
/// file (refused when others may read it, or empty), on `clock`.
pub fn api(settings: &GithubSettings, clock: Arc<dyn Clock>) -> Result<Api, String> {
    let credential =
        match &settings.credential {
            GithubCredential::Token { file } => {
                let token = read_secret("token file", file)?;
                Credential::Token(String::from_utf8(token).map_err(|_| {
                    format!("the token file {}: it is not UTF-8 text", file.display())
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
                return Err(format!("a credential this build cannot use: {other:?}"));
            }
        };
    Api::new(&settings.api_url, credential, clock)
        .map_err(|error| format!("GitHub's API at {}: {error}", settings.api_url))
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
            timers: None,
        }
    }

    /// Makes the intake look and reconcile only when the answered handle
    /// ticks it ([`intake::Timers::Driven`]), not on wall-time intervals:
    /// for a driver that runs the service in modelled time (H14).
    pub fn driven(&mut self) -> intake::Ticks {
        let (ticks, timers) = intake::Ticks::new();
        self.timers = Some(timers);
        ticks
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

    /// Starts the intake's task beside the service whose engine is
    /// `engine` (from [`Service::engine_parts`](crate::Service::engine_parts)),
    /// over `pools` (what decides which pool may run a job's trust), for
    /// the store of `identity` (what names its runners; `None` for a store
    /// without one): from now on every `workflow_job` delivery the webhook
    /// commits reaches it, and it reconciles with GitHub's API every
    /// `reconcile_every`.
    pub fn start(
        self,
        (engine, shared): (EngineHandle, Arc<Shared>),
        pools: &Pools,
        identity: Option<String>,
    ) -> Result<(), String> {
        self.runners.attach(Arc::clone(&shared));
        self.webhook.watch_api(self.api.clone());
        let events = intake::start(
            Parts {
                settings: self.settings,
                api: self.api,
                webhook: Arc::downgrade(&self.webhook),
                engine,
                shared,
                runners: self.runners,
                pools: pools.clone(),
                identity,
            },
            self.timers.unwrap_or(intake::Timers::Wall),
        )?;
        self.webhook.feed(events);
        Ok(())
    }
}

/// A GitHub secret (`what`: the webhook secret file, the token file, the
/// App's private key file) from `path`, its trailing line ends dropped:
/// refused when others may read or write the file (L13), or when it is
/// empty.
pub fn read_secret(what: &str, path: &std::path::Path) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let refuse = |why: String| format!("the {what} {shown}: {why}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(|error| refuse(error.to_string()))?
            .permissions()
            .mode()
            & 0o7777;
        if mode & 0o066 != 0 {
            return Err(refuse(format!(
                "mode {mode:04o}: group and others must not read or write it (chmod 600 {shown})"
            )));
        }
    }
    let mut secret = std::fs::read(path).map_err(|error| refuse(error.to_string()))?;
    while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        secret.pop();
    }
    if secret.is_empty() {
        return Err(refuse("it is empty".to_owned()));
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    // G1, L13: the webhook's secret is read without its line end; a file
    // others may read or write, an empty one and a missing one are refused,
    // each saying so.
    #[test]
    fn g1_the_webhook_secret_is_read_private_and_not_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::store::private_tempdir();
        let path = dir.path().join("secret");
        std::fs::write(&path, "s3cret\r\n").unwrap();
        for mode in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                read_secret("webhook secret file", &path).unwrap(),
                b"s3cret"
            );
        }
        for mode in [0o640, 0o604, 0o620, 0o602] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let error = read_secret("webhook secret file", &path).unwrap_err();
            assert!(error.contains(&format!("mode 0{mode:o}")), "{error}");
            assert!(error.contains("chmod 600"), "{error}");
        }
        std::fs::write(&path, "\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(
            read_secret("webhook secret file", &path)
                .unwrap_err()
                .contains("empty")
        );
        let missing = read_secret("token file", &dir.path().join("none")).unwrap_err();
        assert!(missing.contains("the token file"), "{missing}");
    }
}
