//! The provider contract: the types and the async trait every compute backend
//! of the billet fleet implements.
//!
//! A scheduler holds each backend as an `Arc<dyn` [`Provider`]`>` and relies
//! only on what the trait's documentation promises; every backend (docker
//! containers, tart macOS VMs, firecracker microVMs, and the test-only
//! simulated backend) keeps all of it. The crate is deliberately light: no
//! runtime, no configuration format, just the vocabulary.
//!
//! * [`Provider`]: the trait, with its obligations stated method by method.
//! * [`Spec`], [`Resources`], [`TrustClass`]: what to start.
//! * [`accepts_trust`], [`Isolation`]: the `accepts` rule every backend answers.
//! * [`Instance`], [`InstanceId`], [`State`], [`Teardown`]: what a backend answers.
//! * [`Error`], [`ErrorKind`]: every refusal and failure, each carrying what a caller acts on.
//! * [`ProviderKind`]: the name of every backend.
#![deny(missing_docs)]
#![warn(unreachable_pub)]

mod capability;
mod environment;
mod error;
mod instance;
mod kind;
mod provider;
mod spec;
mod trust;

pub use capability::{Hint, HintKind, HintStream, Hints, OUTPUT_CHUNK, Output, OutputStream};
pub use environment::Environment;
pub use error::{Cause, Error, ErrorKind};
pub use instance::{Instance, InstanceId, State, Teardown};
pub use kind::{ProviderKind, UnknownKind};
pub use provider::Provider;
pub use spec::{Resources, Spec, TrustClass};
pub use trust::{Isolation, accepts_trust};

/// The attribute [`Provider`] is written with: implement the trait under
/// `#[async_trait]`, re-exported here so that a backend needs no
/// `async-trait` dependency of its own.
pub use async_trait::async_trait;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::SystemTime;

    /// A provider that holds one instance and refuses everything else: enough to
    /// show the trait works behind `Arc<dyn Provider>`.
    #[derive(Debug)]
    struct OneInstance;

    #[async_trait::async_trait]
    impl Provider for OneInstance {
        fn kind(&self) -> ProviderKind {
            ProviderKind::Docker
        }
        fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
            accepts_trust(self.kind(), Isolation::NoBoundary, trust)
        }
        async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
            self.accepts(spec.trust)?;
            Err(Error::Conflict { name: spec.name })
        }
        async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
            Ok(self.list().await?.into_iter().find(|i| *i.name == *name))
        }
        async fn list(&self) -> Result<Vec<Instance>, Error> {
            Ok(vec![Instance {
                id: "i-1".into(),
                name: "held".into(),
                owner: "blue".into(),
                kind: self.kind(),
                state: State::Running,
                started_at: SystemTime::UNIX_EPOCH,
            }])
        }
        async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
            Ok(if id.as_str() == "i-1" {
                Teardown::Stopped
            } else {
                Teardown::Absent
            })
        }
    }

    fn assert_send_sync<T: Send + Sync + ?Sized>() {}

    /// A provider that offers both capabilities (P9): output "hello" for
    /// its one instance, and one hint.
    #[derive(Debug)]
    struct Capable;

    #[async_trait::async_trait]
    impl Output for Capable {
        async fn read(&self, id: &InstanceId, from: u64) -> Result<OutputStream, Error> {
            if id.as_str() != "i-1" {
                return Err(Error::not_found(id.clone()));
            }
            let rest = b"hello".get(from as usize..).unwrap_or_default().to_vec();
            Ok(Box::pin(futures::stream::iter([Ok(rest)])))
        }
    }

    impl Hints for Capable {
        fn subscribe(&self) -> HintStream {
            Box::pin(futures::stream::iter([Hint {
                kind: HintKind::Stopped,
                id: "i-1".into(),
                name: "held".into(),
            }]))
        }
    }

    #[async_trait::async_trait]
    impl Provider for Capable {
        fn kind(&self) -> ProviderKind {
            OneInstance.kind()
        }
        fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
            OneInstance.accepts(trust)
        }
        async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
            OneInstance.launch(spec).await
        }
        async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
            OneInstance.find(name).await
        }
        async fn list(&self) -> Result<Vec<Instance>, Error> {
            OneInstance.list().await
        }
        async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
            OneInstance.destroy(id).await
        }
        fn output(&self) -> Option<&dyn Output> {
            Some(self)
        }
        fn hints(&self) -> Option<&dyn Hints> {
            Some(self)
        }
    }

    // P9: the capabilities are asked of the object, behind `Arc<dyn
    // Provider>` and the forwarding impl alike: a backend without them
    // says so (`None`), one with them answers through them.
    #[tokio::test]
    async fn p9_capabilities_are_asked_of_the_object() {
        use futures::StreamExt;
        let without: Arc<dyn Provider> = Arc::new(OneInstance);
        assert!(without.output().is_none() && without.hints().is_none());
        let with: Arc<Arc<dyn Provider>> = Arc::new(Arc::new(Capable));
        let output = with.output().expect("offered");
        let read: Vec<_> = output.read(&"i-1".into(), 2).await.unwrap().collect().await;
        assert_eq!(
            read.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
            [b"llo".to_vec()]
        );
        let gone = output.read(&"i-2".into(), 0).await.err().unwrap();
        assert_eq!(gone.kind(), ErrorKind::NotFound);
        assert!(gone.to_string().contains("i-2"), "{gone}");
        let hints: Vec<Hint> = with.hints().expect("offered").subscribe().collect().await;
        assert_eq!(hints.len(), 1);
        assert_eq!(
            (hints[0].kind, &*hints[0].name),
            (HintKind::Stopped, "held")
        );
        assert_send_sync::<dyn Output>();
        assert_send_sync::<dyn Hints>();
    }

    // P1: the trait is object-safe, Send + Sync, and usable as Arc<dyn Provider>,
    // including through the Arc forwarding impl.
    #[tokio::test]
    async fn p1_provider_is_object_safe_behind_arc() {
        assert_send_sync::<dyn Provider>();
        let provider: Arc<dyn Provider> = Arc::new(OneInstance);
        assert_eq!(provider.kind(), ProviderKind::Docker);
        assert!(provider.accepts(TrustClass::Trusted).is_ok());
        let refused = provider.accepts(TrustClass::Unknown).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::Refused);
        let launched = provider
            .launch(Spec::new("held", ["true"]).with_trust(TrustClass::Trusted))
            .await;
        assert_eq!(launched.unwrap_err().kind(), ErrorKind::Conflict);
        assert_eq!(provider.list().await.unwrap().len(), 1);
        assert!(provider.find("held").await.unwrap().is_some());
        assert!(provider.find("Held").await.unwrap().is_none());
        assert_eq!(
            provider.destroy(&"i-1".into()).await.unwrap(),
            Teardown::Stopped
        );
        let twice: Arc<Arc<dyn Provider>> = Arc::new(provider);
        assert_eq!(
            twice.destroy(&"i-2".into()).await.unwrap(),
            Teardown::Absent
        );
    }
}

#[cfg(test)]
mod obligations {
    /// The trait's own documentation, as written.
    const TRAIT_DOCS: &str = include_str!("provider.rs");

    // P7: the trait's docs state every obligation all backends share. A tidy
    // check: deleting one of these sentences from the docs fails this test.
    #[test]
    fn p7_trait_docs_state_every_shared_obligation() {
        // The doc comments as prose: markers stripped, whitespace collapsed.
        let prose = TRAIT_DOCS
            .lines()
            .filter_map(|line| line.trim().strip_prefix("///"))
            .collect::<Vec<_>>()
            .join(" ");
        let prose = prose.split_whitespace().collect::<Vec<_>>().join(" ");
        for obligation in [
            "**`list` errors rather than answers short.**",
            "**exactly** the one given",
            "(no case folding, trimming or prefix matching)",
            "**Idempotent.**",
            "**Scoped by identity.**",
            "Unknown is refused alongside untrusted",
            "**unless the backend has an isolation boundary**",
            "never `None`: `None` means confirmed absent",
            "Stopped instances stay in the inventory",
        ] {
            assert!(
                prose.contains(obligation),
                "the Provider docs no longer state: {obligation}"
            );
        }
    }
}
