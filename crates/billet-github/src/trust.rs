//! How far GitHub's own facts let a job be trusted (G4).

use billet_provider::TrustClass;
use serde::Deserialize;

/// What a workflow run says about where its code comes from, as
/// `GET /repos/{owner}/{repo}/actions/runs/{run_id}` answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunFacts {
    /// The run's repository is public: anyone may open a pull request whose
    /// workflow runs on its runners.
    pub public: bool,
    /// The run's code comes from another repository than the run's own (a
    /// fork's pull request): its `head_repository` differs from its
    /// `repository`, or is gone.
    pub from_another_repository: bool,
}

/// A run as the API answers it: only what [`RunFacts`] reads.
#[derive(Deserialize)]
struct Run {
    event: String,
    repository: RunRepository,
    head_repository: Option<RunRepository>,
}

/// A repository inside a run's answer.
#[derive(Deserialize)]
struct RunRepository {
    id: u64,
    full_name: String,
    #[serde(default)]
    private: Option<bool>,
    #[serde(default)]
    visibility: Option<String>,
}

impl RunRepository {
    /// Whether it is public, if the answer says: its `visibility` when given
    /// (`internal` is not public), else the opposite of `private`.
    fn public(&self) -> Option<bool> {
        match self.visibility.as_deref() {
            Some(visibility) => Some(visibility == "public"),
            None => self.private.map(|private| !private),
        }
    }
}

impl RunFacts {
    /// Reads the facts from a workflow run's JSON, as the API answers
    /// `GET .../actions/runs/{run_id}`. An answer that does not say whether the
    /// repository is public, or that is not a run, is an error: the job's trust
    /// is then `unknown` ([`job_trust`] with `None`).
    pub fn from_run(body: &[u8]) -> Result<RunFacts, String> {
        let run: Run = serde_json::from_slice(body).map_err(|error| error.to_string())?;
        let public = run.repository.public().ok_or_else(|| {
            format!(
                "the run's repository {} says neither `private` nor `visibility`",
                run.repository.full_name
            )
        })?;
        let pull_request = run.event.starts_with("pull_request");
        let from_another_repository = match &run.head_repository {
            Some(head) => {
                head.id != run.repository.id || head.full_name != run.repository.full_name
            }
            // A pull request whose head repository was deleted came from a
            // fork; other runs without one run the repository's own code.
            None => pull_request,
        };
        Ok(RunFacts {
            public,
            from_another_repository,
        })
    }
}

/// A job's trust (G4): its scope's `trust`, lowered to `untrusted` when its
/// repository is public or its run's code comes from another repository, and
/// to `unknown` when the facts could not be read (`None`). Never more than
/// the scope allows.
pub fn job_trust(scope: TrustClass, facts: Option<RunFacts>) -> TrustClass {
    match facts {
        None => TrustClass::Unknown,
        Some(facts) if facts.public || facts.from_another_repository => {
            scope.min(TrustClass::Untrusted)
        }
        Some(_) => scope,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(event: &str, repository: &str, head: &str) -> Vec<u8> {
        format!(r#"{{"id": 5, "event": "{event}", "repository": {repository}, "head_repository": {head}}}"#)
            .into_bytes()
    }

    const OWN: &str = r#"{"id": 1, "full_name": "octo-org/app", "private": true}"#;
    const PUBLIC: &str = r#"{"id": 1, "full_name": "octo-org/app", "private": false}"#;
    const FORK: &str = r#"{"id": 2, "full_name": "someone/app", "private": false}"#;

    // G4: the scope's trust, lowered for public repositories and for code
    // from another repository, unknown when unread; never raised.
    #[test]
    fn g4_trust_is_the_scopes_lowered_by_githubs_facts() {
        let own = RunFacts::from_run(&run("push", OWN, OWN)).unwrap();
        assert_eq!(
            own,
            RunFacts {
                public: false,
                from_another_repository: false
            }
        );
        assert_eq!(
            job_trust(TrustClass::Trusted, Some(own)),
            TrustClass::Trusted
        );
        assert_eq!(
            job_trust(TrustClass::Untrusted, Some(own)),
            TrustClass::Untrusted
        );

        let public = RunFacts::from_run(&run("push", PUBLIC, PUBLIC)).unwrap();
        assert!(public.public && !public.from_another_repository);
        assert_eq!(
            job_trust(TrustClass::Trusted, Some(public)),
            TrustClass::Untrusted
        );

        let fork = RunFacts::from_run(&run("pull_request", OWN, FORK)).unwrap();
        assert!(!fork.public && fork.from_another_repository);
        assert_eq!(
            job_trust(TrustClass::Trusted, Some(fork)),
            TrustClass::Untrusted
        );
        let target = RunFacts::from_run(&run("pull_request_target", OWN, FORK)).unwrap();
        assert!(target.from_another_repository);

        let deleted_fork = RunFacts::from_run(&run("pull_request", OWN, "null")).unwrap();
        assert!(deleted_fork.from_another_repository);
        let scheduled = RunFacts::from_run(&run("schedule", OWN, "null")).unwrap();
        assert!(!scheduled.from_another_repository);

        // Same name, another id (a repository deleted and made again): another.
        let renamed = r#"{"id": 9, "full_name": "octo-org/app", "private": true}"#;
        assert!(
            RunFacts::from_run(&run("pull_request", OWN, renamed))
                .unwrap()
                .from_another_repository
        );

        for scope in TrustClass::ALL {
            assert_eq!(job_trust(scope, None), TrustClass::Unknown);
            assert_eq!(
                job_trust(scope, Some(fork)),
                scope.min(TrustClass::Untrusted)
            );
        }
    }

    // G4: visibility wins over private (internal repositories are private),
    // and an answer that says neither is unreadable.
    #[test]
    fn g4_visibility_is_read_and_silence_is_unknown() {
        let internal =
            r#"{"id": 1, "full_name": "o/a", "private": false, "visibility": "internal"}"#;
        assert!(
            !RunFacts::from_run(&run("push", internal, internal))
                .unwrap()
                .public
        );
        let public = r#"{"id": 1, "full_name": "o/a", "private": true, "visibility": "public"}"#;
        assert!(
            RunFacts::from_run(&run("push", public, public))
                .unwrap()
                .public
        );
        let silent = r#"{"id": 1, "full_name": "o/a"}"#;
        let err = RunFacts::from_run(&run("push", silent, silent)).unwrap_err();
        assert!(err.contains("o/a"), "{err}");
        assert!(RunFacts::from_run(b"{}").is_err());
        assert!(RunFacts::from_run(b"not json").is_err());
    }
}
