//! The `github:` section (G1): GitHub Actions as an intake. Its schema as
//! the file spells it, the checks that make it valid, and the checked types.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use billet_provider::TrustClass;
use serde::Deserialize;
use serde_saphyr::Spanned;

use crate::error::ConfigError;
use crate::error::at;

/// The API GitHub.com serves; a GitHub Enterprise Server's is
/// `https://HOST/api/v3`.
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// The runner's command when `runner.command` is not given: the entry point
/// of GitHub's runner image (`ghcr.io/actions/actions-runner`).
pub const DEFAULT_RUNNER_COMMAND: &str = "/home/runner/run.sh";
/// How long a runner may wait for a job before it is removed, by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How often billet settles its GitHub jobs with the API, by default.
pub const DEFAULT_RECONCILE_EVERY: Duration = Duration::from_secs(60);
/// The fewest seconds between two reconciles: each one spends API calls
/// from the installation's hourly quota.
pub const MIN_RECONCILE_EVERY: Duration = Duration::from_secs(1);
/// The most labels one pool may offer: GitHub registers 1 to 100 per runner.
pub const MAX_LABELS: usize = 100;

/// The `github:` section, checked (G1). Fields are public to read; a value
/// comes only from loading a file, so it is always valid.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GithubSettings {
    /// The REST API's base, without a trailing slash: `https://`, or
    /// `http://` to a loopback address only (a token must not cross a
    /// network in the clear).
    pub api_url: String,
    /// How billet authenticates to the API.
    pub credential: GithubCredential,
    /// The file holding the webhook's secret (relative paths are the
    /// configuration file's directory's). Read, and refused when others can
    /// read it, by `billet serve` at start.
    pub webhook_secret_file: PathBuf,
    /// Where jobs may come from, in file order; never empty; no two name
    /// the same organization or repository, and no repository lies in an
    /// organization named too.
    pub scopes: Vec<GithubScope>,
    /// Which pools take GitHub jobs, in file order (the first whose labels
    /// fit takes a job, G3); never empty; each names a configured provider,
    /// once.
    pub pools: Vec<GithubPool>,
    /// What runs in a runner's instance.
    pub runner: RunnerSettings,
    /// How often billet settles its GitHub jobs with the API; at least
    /// [`MIN_RECONCILE_EVERY`].
    pub reconcile_every: Duration,
}

/// How billet authenticates to GitHub's API.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GithubCredential {
    /// A GitHub App (`app:`): its id, the file of its private key (PEM),
    /// and its installation's id when given (else discovered from a scope).
    App {
        /// The App's id.
        id: u64,
        /// Its private key's file.
        private_key_file: PathBuf,
        /// The installation's id, if the file gives it.
        installation_id: Option<u64>,
    },
    /// A token (`token_file:`), read from this file.
    Token {
        /// The token's file.
        file: PathBuf,
    },
}

/// One place jobs may come from, and the most trust a job from it may have.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GithubScope {
    /// The organization or repository.
    pub target: ScopeTarget,
    /// The highest trust a job from here may have (G4): `trusted` or
    /// `untrusted` (the default); GitHub's facts may lower it, never raise it.
    pub trust: TrustClass,
}

/// An organization or a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScopeTarget {
    /// `org: NAME`: every repository of the organization.
    Org {
        /// The organization's login.
        name: String,
        /// The runner group runners are registered in (default 1, the
        /// organization's default group).
        runner_group_id: u64,
    },
    /// `repository: OWNER/NAME`: that repository alone.
    Repository {
        /// The owner's login.
        owner: String,
        /// The repository's name.
        name: String,
    },
}

impl ScopeTarget {
    /// `org NAME` or `repository OWNER/NAME`, for messages.
    pub fn describe(&self) -> String {
        match self {
            ScopeTarget::Org { name, .. } => format!("org {name}"),
            ScopeTarget::Repository { owner, name } => format!("repository {owner}/{name}"),
        }
    }
}

/// A pool that takes GitHub jobs, and the runner labels it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GithubPool {
    /// A configured provider's name.
    pub pool: String,
    /// The labels its runners register with: 1 to [`MAX_LABELS`], none
    /// blank, each once (compared without regard to case), as written.
    pub labels: Vec<String>,
}

/// What runs in a runner's instance (`runner:`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunnerSettings {
    /// The runner's command as argv; its first element is not blank.
    /// Default [`DEFAULT_RUNNER_COMMAND`].
    pub command: Vec<String>,
    /// How long a runner may wait for a job before billet removes it;
    /// not zero. Default [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Duration,
}

/// `github:` as the file spells it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGithub {
    #[serde(default)]
    api_url: Option<Spanned<String>>,
    #[serde(default)]
    app: Option<Spanned<RawApp>>,
    #[serde(default)]
    token_file: Option<Spanned<String>>,
    webhook_secret_file: Spanned<String>,
    scopes: Spanned<Vec<Spanned<RawScope>>>,
    pools: Spanned<Vec<Spanned<RawPool>>>,
    #[serde(default)]
    runner: Option<Spanned<RawRunner>>,
    #[serde(default)]
    reconcile_every: Option<Spanned<String>>,
}

/// `github.app:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApp {
    id: Spanned<u64>,
    private_key_file: Spanned<String>,
    #[serde(default)]
    installation_id: Option<Spanned<u64>>,
}

/// One entry of `github.scopes:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    #[serde(default)]
    org: Option<Spanned<String>>,
    #[serde(default)]
    repository: Option<Spanned<String>>,
    #[serde(default)]
    runner_group_id: Option<Spanned<u64>>,
    #[serde(default)]
    trust: Option<Spanned<String>>,
}

/// One entry of `github.pools:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPool {
    pool: Spanned<String>,
    labels: Spanned<Vec<Spanned<String>>>,
}

/// `github.runner:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRunner {
    #[serde(default)]
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    idle_timeout: Option<Spanned<String>>,
}

/// A [`ConfigError::BadGithub`] at `value`, whose path is `path`.
fn bad<T>(value: &Spanned<T>, path: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::BadGithub {
        location: at(value, path),
        reason: reason.into(),
    }
}

/// The checks of `github:`, given the configured providers.
pub(crate) fn check(
    raw: &Spanned<RawGithub>,
    providers: &[&str],
) -> Result<GithubSettings, ConfigError> {
    let github = &raw.value;
    let api_url = match &github.api_url {
        Some(url) => {
            check_api_url(&url.value).map_err(|reason| bad(url, "github.api_url", reason))?
        }
        None => DEFAULT_API_URL.to_owned(),
    };
    let credential = match (&github.app, &github.token_file) {
        (Some(_), Some(token)) => {
            return Err(bad(
                token,
                "github.token_file",
                "give one credential: `app` (a GitHub App) or `token_file`, not both",
            ));
        }
        (None, None) => {
            return Err(bad(
                raw,
                "github",
                "no credential: give `app: {id, private_key_file}` (a GitHub App) or `token_file`",
            ));
        }
        (Some(app), None) => GithubCredential::App {
            id: app.value.id.value,
            private_key_file: path(&app.value.private_key_file, "github.app.private_key_file")?,
            installation_id: app.value.installation_id.as_ref().map(|id| id.value),
        },
        (None, Some(token)) => GithubCredential::Token {
            file: path(token, "github.token_file")?,
        },
    };
    let webhook_secret_file = path(&github.webhook_secret_file, "github.webhook_secret_file")?;
    let scopes = check_scopes(&github.scopes)?;
    let pools = check_pools(&github.pools, providers)?;
    let runner = check_runner(github.runner.as_ref())?;
    let reconcile_every = match &github.reconcile_every {
        Some(every) => {
            let parsed = duration(every, "github.reconcile_every")?;
            if parsed < MIN_RECONCILE_EVERY {
                return Err(bad(
                    every,
                    "github.reconcile_every",
                    "reconcile at most once a second: each reconcile spends API calls",
                ));
            }
            parsed
        }
        None => DEFAULT_RECONCILE_EVERY,
    };
    Ok(GithubSettings {
        api_url,
        credential,
        webhook_secret_file,
        scopes,
        pools,
        runner,
        reconcile_every,
    })
}

/// The API's base URL, checked: `https://`, or `http://` to loopback only;
/// no credentials, query or fragment. Answered without a trailing slash.
fn check_api_url(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text.trim()).map_err(|error| {
        format!("{text:?} is not a URL ({error}); expected such as {DEFAULT_API_URL}")
    })?;
    let loopback = match url.host() {
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(format!(
                "{text:?} is plain http to another machine: billet's token would cross the network in the clear; use https (plain http is allowed to a loopback address only)"
            ));
        }
        scheme => return Err(format!("{text:?} has scheme {scheme:?}: expected https")),
    }
    if url.host().is_none() {
        return Err(format!("{text:?} names no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{text:?} holds credentials: give them as `app` or `token_file`, never in the URL"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{text:?} has a query or a fragment: give the API's base alone"
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// A file path as written: not blank.
fn path(value: &Spanned<String>, at_path: &str) -> Result<PathBuf, ConfigError> {
    if value.value.trim().is_empty() {
        return Err(bad(value, at_path, "the path is blank"));
    }
    Ok(PathBuf::from(&value.value))
}

/// A duration such as `10m` or `60s`, not zero.
fn duration(value: &Spanned<String>, at_path: &str) -> Result<Duration, ConfigError> {
    match humantime::parse_duration(value.value.trim()) {
        Ok(parsed) if parsed.is_zero() => Err(bad(value, at_path, "the duration is zero")),
        Ok(parsed) => Ok(parsed),
        Err(error) => Err(bad(
            value,
            at_path,
            format!(
                "{:?} is not a duration ({error}); write such as 90s, 10m or 1h",
                value.value
            ),
        )),
    }
}

/// `github.scopes`: at least one, each an org or a repository (not both),
/// none named twice, no repository in an org also named.
fn check_scopes(raw: &Spanned<Vec<Spanned<RawScope>>>) -> Result<Vec<GithubScope>, ConfigError> {
    if raw.value.is_empty() {
        return Err(bad(
            raw,
            "github.scopes",
            "no scope: name at least one `org: NAME` or `repository: OWNER/NAME`",
        ));
    }
    let mut scopes = Vec::with_capacity(raw.value.len());
    // Lower-cased org and repository names (GitHub's are case-insensitive),
    // with the index of the scope that named each first.
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, scope) in raw.value.iter().enumerate() {
        let base = format!("github.scopes[{index}]");
        let entry = &scope.value;
        let target = match (&entry.org, &entry.repository) {
            (Some(_), Some(repository)) => {
                return Err(bad(
                    repository,
                    format!("{base}.repository"),
                    "a scope is an `org` or a `repository`, not both",
                ));
            }
            (None, None) => {
                return Err(bad(
                    scope,
                    base,
                    "a scope needs `org: NAME` or `repository: OWNER/NAME`",
                ));
            }
            (Some(org), None) => {
                let name = org.value.trim();
                if !is_github_name(name) {
                    return Err(bad(
                        org,
                        format!("{base}.org"),
                        format!("{:?} is not an organization's login", org.value),
                    ));
                }
                let runner_group_id = match &entry.runner_group_id {
                    Some(group) if group.value == 0 => {
                        return Err(bad(
                            group,
                            format!("{base}.runner_group_id"),
                            "runner group ids start at 1 (the organization's default group)",
                        ));
                    }
                    Some(group) => group.value,
                    None => 1,
                };
                ScopeTarget::Org {
                    name: name.to_owned(),
                    runner_group_id,
                }
            }
            (None, Some(repository)) => {
                if let Some(group) = &entry.runner_group_id {
                    return Err(bad(
                        group,
                        format!("{base}.runner_group_id"),
                        "a repository's runners have no runner group: `runner_group_id` belongs to an `org` scope",
                    ));
                }
                let text = repository.value.trim();
                match text.split_once('/') {
                    Some((owner, name)) if is_github_name(owner) && is_repository_name(name) => {
                        ScopeTarget::Repository {
                            owner: owner.to_owned(),
                            name: name.to_owned(),
                        }
                    }
                    _ => {
                        return Err(bad(
                            repository,
                            format!("{base}.repository"),
                            format!("{:?} is not OWNER/NAME", repository.value),
                        ));
                    }
                }
            }
        };
        let trust = match &entry.trust {
            None => TrustClass::Untrusted,
            Some(trust) => match trust.value.trim() {
                "trusted" => TrustClass::Trusted,
                "untrusted" => TrustClass::Untrusted,
                other => {
                    return Err(bad(
                        trust,
                        format!("{base}.trust"),
                        format!(
                            "{other:?} is not a scope's trust: expected `trusted` or `untrusted`"
                        ),
                    ));
                }
            },
        };
        let key = match &target {
            ScopeTarget::Org { name, .. } => format!("org {}", name.to_lowercase()),
            ScopeTarget::Repository { owner, name } => {
                format!(
                    "repository {}/{}",
                    owner.to_lowercase(),
                    name.to_lowercase()
                )
            }
        };
        if let Some(first) = seen.get(&key) {
            return Err(bad(
                scope,
                base,
                format!(
                    "{} is named twice (first at github.scopes[{first}])",
                    target.describe()
                ),
            ));
        }
        seen.insert(key, index);
        scopes.push(GithubScope { target, trust });
    }
    // A repository inside an organization that is a scope too: a job from it
    // would have two scopes, two trusts, two places to register its runner.
    for (index, scope) in scopes.iter().enumerate() {
        if let ScopeTarget::Repository { owner, name } = &scope.target
            && let Some(org) = seen.get(&format!("org {}", owner.to_lowercase()))
        {
            return Err(bad(
                &raw.value[index],
                format!("github.scopes[{index}]"),
                format!(
                    "repository {owner}/{name} lies in the organization scope at github.scopes[{org}]: name one or the other"
                ),
            ));
        }
    }
    Ok(scopes)
}

/// A GitHub login: 1 to 39 ASCII letters, digits and inner single hyphens.
fn is_github_name(name: &str) -> bool {
    (1..=39).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A repository's name: 1 to 100 ASCII letters, digits, `-`, `_` and `.`,
/// and not `.` or `..`.
fn is_repository_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name != "."
        && name != ".."
}

/// `github.pools`: at least one, each a configured provider named once,
/// with 1 to [`MAX_LABELS`] labels, none blank or repeated.
fn check_pools(
    raw: &Spanned<Vec<Spanned<RawPool>>>,
    providers: &[&str],
) -> Result<Vec<GithubPool>, ConfigError> {
    if raw.value.is_empty() {
        return Err(bad(
            raw,
            "github.pools",
            "no pool takes GitHub jobs: name at least one `pool:` with its `labels:`",
        ));
    }
    let mut pools: Vec<GithubPool> = Vec::with_capacity(raw.value.len());
    for (index, entry) in raw.value.iter().enumerate() {
        let base = format!("github.pools[{index}]");
        let pool = &entry.value.pool;
        if !providers.iter().any(|provider| *provider == pool.value) {
            return Err(bad(
                pool,
                format!("{base}.pool"),
                format!(
                    "{:?} is no configured provider (configured: {})",
                    pool.value,
                    providers.join(", ")
                ),
            ));
        }
        if let Some(first) = pools.iter().position(|held| held.pool == pool.value) {
            return Err(bad(
                pool,
                format!("{base}.pool"),
                format!(
                    "pool {:?} is named twice (first at github.pools[{first}])",
                    pool.value
                ),
            ));
        }
        let labels = &entry.value.labels;
        if labels.value.is_empty() || labels.value.len() > MAX_LABELS {
            return Err(bad(
                labels,
                format!("{base}.labels"),
                format!("a pool offers 1 to {MAX_LABELS} labels"),
            ));
        }
        let mut kept: Vec<String> = Vec::with_capacity(labels.value.len());
        for (at_index, label) in labels.value.iter().enumerate() {
            let text = label.value.trim();
            let label_path = format!("{base}.labels[{at_index}]");
            if text.is_empty() {
                return Err(bad(label, label_path, "a label must not be blank"));
            }
            if kept.iter().any(|held| held.eq_ignore_ascii_case(text)) {
                return Err(bad(
                    label,
                    label_path,
                    format!(
                        "label {text:?} is given twice (labels are compared without regard to case)"
                    ),
                ));
            }
            kept.push(text.to_owned());
        }
        pools.push(GithubPool {
            pool: pool.value.clone(),
            labels: kept,
        });
    }
    Ok(pools)
}

/// `github.runner`, with its defaults.
fn check_runner(raw: Option<&Spanned<RawRunner>>) -> Result<RunnerSettings, ConfigError> {
    let Some(raw) = raw else {
        return Ok(RunnerSettings {
            command: vec![DEFAULT_RUNNER_COMMAND.to_owned()],
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        });
    };
    let command = match &raw.value.command {
        Some(command)
            if command
                .value
                .first()
                .is_none_or(|first| first.trim().is_empty()) =>
        {
            return Err(bad(
                command,
                "github.runner.command",
                "the runner's command is an argv whose first element is the program to run",
            ));
        }
        Some(command) => command.value.clone(),
        None => vec![DEFAULT_RUNNER_COMMAND.to_owned()],
    };
    let idle_timeout = match &raw.value.idle_timeout {
        Some(timeout) => duration(timeout, "github.runner.idle_timeout")?,
        None => DEFAULT_IDLE_TIMEOUT,
    };
    Ok(RunnerSettings {
        command,
        idle_timeout,
    })
}

impl GithubSettings {
    /// Makes every relative file path relative to `dir` (the directory of
    /// the file that names it).
    pub(crate) fn rebase(&mut self, dir: &std::path::Path) {
        let mut paths = vec![&mut self.webhook_secret_file];
        match &mut self.credential {
            GithubCredential::App {
                private_key_file, ..
            } => paths.push(private_key_file),
            GithubCredential::Token { file } => paths.push(file),
        }
        for path in paths {
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }
}
