//! Which GitHub jobs billet takes, and into which pool (G3, G4): a pure
//! decision over the configuration, the delivery and GitHub's facts about
//! the job's run.

use billet_config::{GithubSettings, ScopeTarget};
use billet_github::{RunFacts, WorkflowJobEvent, fits, job_trust};
use billet_provider::TrustClass;

/// What billet does with a queued GitHub job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// Take it into `pool`, trusted as far as `trust`.
    Into {
        /// The first configured pool whose labels fit and which may run it.
        pool: String,
        /// Its scope's trust, lowered by GitHub's facts (G4).
        trust: TrustClass,
    },
    /// Leave it for GitHub's other runners, for this reason.
    Leave(Left),
}

/// Why a GitHub job is left (the `reason` of
/// `billet_github_jobs_left_total`): never an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Left {
    /// Its repository is in no configured scope.
    OtherScope,
    /// No pool offers all its labels (a hosted runner's, say).
    NoPoolFits,
    /// Pools fit its labels, but none may run its trust (G4).
    Trust,
}

impl Left {
    /// The reason's label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Left::OtherScope => "other_scope",
            Left::NoPoolFits => "no_pool_fits",
            Left::Trust => "trust",
        }
    }
}

/// The scope of `settings` a job of repository `owner/name` comes from: the
/// repository's own scope, else its owner's organization's (compared
/// without regard to case, as GitHub compares names).
pub fn scope_of<'s>(
    settings: &'s GithubSettings,
    repository: &str,
) -> Option<&'s billet_config::GithubScope> {
    let (owner, name) = repository.split_once('/')?;
    settings.scopes.iter().find(|scope| match &scope.target {
        ScopeTarget::Repository { owner: o, name: n } => {
            o.eq_ignore_ascii_case(owner) && n.eq_ignore_ascii_case(name)
        }
        ScopeTarget::Org { name: org, .. } => org.eq_ignore_ascii_case(owner),
        _ => false,
    })
}

/// The trust of a job of `repository` (G4): its scope's `trust` lowered by
/// `facts` (`None`: unread, so `unknown`); `unknown` outside every scope.
pub fn trust_of(
    settings: &GithubSettings,
    repository: &str,
    facts: Option<RunFacts>,
) -> TrustClass {
    scope_of(settings, repository)
        .map_or(TrustClass::Unknown, |scope| job_trust(scope.trust, facts))
}

/// What billet does with `event`'s job (its `queued` delivery, G3): the
/// first pool in configuration order whose labels it fits and that `may_run`
/// its trust (its scope's, lowered by `facts`, `None` when the run could
/// not be read: `unknown`), or why it is left.
pub fn decide(
    settings: &GithubSettings,
    event: &WorkflowJobEvent,
    facts: Option<RunFacts>,
    may_run: impl Fn(&str, TrustClass) -> bool,
) -> Take {
    let Some(scope) = scope_of(settings, &event.repository.full_name) else {
        return Take::Leave(Left::OtherScope);
    };
    let trust = job_trust(scope.trust, facts);
    let mut fitting = settings
        .pools
        .iter()
        .filter(|pool| fits(&event.workflow_job.labels, &pool.labels))
        .peekable();
    if fitting.peek().is_none() {
        return Take::Leave(Left::NoPoolFits);
    }
    match fitting.find(|pool| may_run(&pool.pool, trust)) {
        Some(pool) => Take::Into {
            pool: pool.pool.clone(),
            trust,
        },
        None => Take::Leave(Left::Trust),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use billet_config::Config;

    const YAML: &str = "
deployment: {id: blue}
providers:
  - {name: trusted-docker, kind: docker, capacity: 2, docker: {image: i}}
  - {name: gvisor, kind: docker, capacity: 2, docker: {image: i, runtime: runsc, isolation: boundary}}
  - {name: gpu, kind: docker, capacity: 1, docker: {image: i}}
routing: {default_kind: docker, untrusted_kinds: [docker]}
github:
  token_file: /t
  webhook_secret_file: /s
  scopes:
    - {org: Octo-Org, trust: trusted}
    - {repository: friends/docs}
  pools:
    - {pool: trusted-docker, labels: [self-hosted, linux]}
    - {pool: gvisor, labels: [self-hosted, linux]}
    - {pool: gpu, labels: [self-hosted, gpu]}
";

    fn event(repository: &str, labels: &[&str]) -> WorkflowJobEvent {
        let json = serde_json::json!({
            "action": "queued",
            "workflow_job": {"id": 1, "run_id": 2, "labels": labels},
            "repository": {"id": 3, "full_name": repository, "private": true},
        });
        serde_json::from_value(json).unwrap()
    }

    const OWN: RunFacts = RunFacts {
        public: false,
        from_another_repository: false,
    };
    const FORK: RunFacts = RunFacts {
        public: false,
        from_another_repository: true,
    };

    /// Trusted work anywhere; untrusted and unknown only on `gvisor`.
    fn may_run(pool: &str, trust: TrustClass) -> bool {
        trust == TrustClass::Trusted || pool == "gvisor"
    }

    // G3, G4: the first fitting pool that may run the job's trust takes it;
    // a fork's pull request and an unread run go only to the boundary; other
    // scopes and labels no pool offers are left, each with its reason.
    #[test]
    fn g3_the_first_fitting_pool_that_may_run_it_takes_it() {
        let config = Config::from_yaml_str(YAML).unwrap();
        let settings = config.github().unwrap();
        let take = |repo: &str, labels: &[&str], facts| {
            decide(settings, &event(repo, labels), facts, may_run)
        };
        assert_eq!(
            take("octo-org/app", &["Self-Hosted", "linux"], Some(OWN)),
            Take::Into {
                pool: "trusted-docker".into(),
                trust: TrustClass::Trusted
            }
        );
        assert_eq!(
            take("octo-org/app", &["self-hosted", "linux"], Some(FORK)),
            Take::Into {
                pool: "gvisor".into(),
                trust: TrustClass::Untrusted
            }
        );
        assert_eq!(
            take("OCTO-ORG/app", &["linux"], None),
            Take::Into {
                pool: "gvisor".into(),
                trust: TrustClass::Unknown
            }
        );
        assert_eq!(
            take("friends/docs", &["self-hosted", "linux"], Some(OWN)),
            Take::Into {
                pool: "gvisor".into(),
                trust: TrustClass::Untrusted
            },
            "a scope's default trust is untrusted"
        );
        assert_eq!(
            take("octo-org/app", &["self-hosted", "gpu"], Some(FORK)),
            Take::Leave(Left::Trust)
        );
        assert_eq!(
            take("octo-org/app", &["ubuntu-latest"], Some(OWN)),
            Take::Leave(Left::NoPoolFits)
        );
        assert_eq!(
            take("other-org/app", &["self-hosted"], Some(OWN)),
            Take::Leave(Left::OtherScope)
        );
        assert_eq!(
            take("friends/other", &["self-hosted"], Some(OWN)),
            Take::Leave(Left::OtherScope)
        );
        assert_eq!(
            take("not-a-repository", &["self-hosted"], Some(OWN)),
            Take::Leave(Left::OtherScope)
        );
        let names: Vec<_> = [Left::OtherScope, Left::NoPoolFits, Left::Trust]
            .iter()
            .map(|l| l.as_str())
            .collect();
        assert_eq!(names, ["other_scope", "no_pool_fits", "trust"]);
    }

    // G4: the trust a runner's taker is judged by: its scope's, lowered by
    // the run's facts, unknown when unread or outside every scope.
    #[test]
    fn g4_a_taker_is_trusted_by_its_scope_and_its_runs_facts() {
        let config = Config::from_yaml_str(YAML).unwrap();
        let settings = config.github().unwrap();
        assert_eq!(
            trust_of(settings, "octo-org/app", Some(OWN)),
            TrustClass::Trusted
        );
        assert_eq!(
            trust_of(settings, "Octo-Org/app", Some(FORK)),
            TrustClass::Untrusted
        );
        assert_eq!(
            trust_of(settings, "octo-org/app", None),
            TrustClass::Unknown
        );
        assert_eq!(
            trust_of(settings, "friends/docs", Some(OWN)),
            TrustClass::Untrusted
        );
        assert_eq!(
            trust_of(settings, "elsewhere/app", Some(OWN)),
            TrustClass::Unknown
        );
    }
}
