//! [`Pools`]: a scheduler's configuration and one provider per configured
//! pool, checked against each other (B2).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use billet_config::Config;
use billet_provider::{Provider, TrustClass};

use crate::core::Core;
use crate::settings::Settings;

/// Why a scheduler could not be built from a configuration and its providers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The configuration names a provider that was not given.
    #[error("billet.yaml configures provider {name:?}, but no provider was given under that name")]
    MissingProvider {
        /// The configured name.
        name: String,
    },
    /// A provider was given under a name the configuration lacks.
    #[error("a provider was given under the name {name:?}, which billet.yaml does not configure")]
    UnknownProvider {
        /// The name it was given under.
        name: String,
    },
    /// Two providers were given under one name.
    #[error("two providers were given under the name {name:?}")]
    DuplicateProvider {
        /// The name.
        name: String,
    },
}

/// A configuration and its providers, ready to drive: the deployment id is
/// the owner, each configured provider a pool with its capacity (B2).
///
/// Give one provider per configured name with [`PoolsBuilder::provider`];
/// routing uses the configured kind, not the provider's own `kind()`, so a
/// test may put a stand-in under a configured name.
#[derive(Debug, Clone)]
pub struct Pools {
    config: Config,
    providers: Vec<Arc<dyn Provider>>,
    settings: Settings,
}

/// Builds [`Pools`]; start from [`Pools::builder`].
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PoolsBuilder {
    config: Config,
    given: BTreeMap<String, Arc<dyn Provider>>,
    duplicate: Option<String>,
    settings: Settings,
}

impl Pools {
    /// Starts building from `config`, with [`Settings::default`].
    pub fn builder(config: Config) -> PoolsBuilder {
        PoolsBuilder {
            config,
            given: BTreeMap::new(),
            duplicate: None,
            settings: Settings::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The providers, in configuration order.
    pub fn providers(&self) -> &[Arc<dyn Provider>] {
        &self.providers
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Whether the pool named `name` may run work of `trust`: its provider
    /// accepts it, and, for work not trusted, routing's `untrusted_kinds`
    /// names its configured kind; the same rule the scheduler places by.
    /// `false` for a name the configuration lacks.
    pub fn may_run(&self, name: &str, trust: TrustClass) -> bool {
        let Some(index) = self
            .config
            .providers()
            .iter()
            .position(|pool| pool.name() == name)
        else {
            return false;
        };
        let provider = &self.providers[index];
        let accepts = TrustClass::ALL.map(|trust| provider.accepts(trust).is_ok());
        let info = crate::core::pool_info(&self.config.providers()[index], accepts);
        crate::routing::may_run(&self.config, &info, trust)
    }

    /// A [`Core`] over these pools at `now`, having asked each provider once
    /// what it accepts.
    pub fn core(&self, now: SystemTime) -> Core {
        let providers = &self.providers;
        let mut index = 0;
        Core::new(
            self.config.clone(),
            |_| {
                let provider = &providers[index];
                index += 1;
                TrustClass::ALL.map(|trust| provider.accepts(trust).is_ok())
            },
            self.settings,
            now,
        )
    }
}

impl PoolsBuilder {
    /// Gives the provider for the configured pool `name` (exact comparison).
    pub fn provider(mut self, name: impl Into<String>, provider: Arc<dyn Provider>) -> Self {
        let name = name.into();
        if self.given.insert(name.clone(), provider).is_some() && self.duplicate.is_none() {
            self.duplicate = Some(name);
        }
        self
    }

    /// Runs with these settings instead of the defaults.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// Checks the providers against the configuration: every configured name
    /// has exactly one, and none is given under a name the file lacks.
    pub fn build(mut self) -> Result<Pools, BuildError> {
        if let Some(name) = self.duplicate {
            return Err(BuildError::DuplicateProvider { name });
        }
        let mut providers = Vec::with_capacity(self.config.providers().len());
        for pool in self.config.providers() {
            match self.given.remove(pool.name()) {
                Some(provider) => providers.push(provider),
                None => {
                    return Err(BuildError::MissingProvider {
                        name: pool.name().to_owned(),
                    });
                }
            }
        }
        if let Some(name) = self.given.into_keys().next() {
            return Err(BuildError::UnknownProvider { name });
        }
        Ok(Pools {
            config: self.config,
            providers,
            settings: self.settings,
        })
    }
}
