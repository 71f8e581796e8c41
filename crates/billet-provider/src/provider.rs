//! The [`Provider`] trait: the contract every compute backend keeps.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{Error, Hints, Instance, InstanceId, Output, ProviderKind, Spec, Teardown, TrustClass};

/// A compute backend, as one deployment of the scheduler sees it.
///
/// A provider is built for one deployment (an owner identity). Everything it
/// starts carries that identity, and everything it answers is scoped by it:
/// two deployments sharing one machine never see or destroy each other's
/// instances.
///
/// The trait is object-safe, `Send + Sync`, and is meant to be held as
/// `Arc<dyn Provider>`. Every method may be called from many tasks at once.
///
/// The sections below state what a scheduler may rely on from **every**
/// backend. A backend that cannot keep one of them must answer an error, never
/// a weaker answer that looks like success.
///
/// # `kind`
///
/// Names the backend. Never fails, never changes over the provider's life.
///
/// # `accepts`
///
/// Answers whether work of a trust class may run here, before anything is
/// started.
///
/// * `TrustClass::Trusted` is accepted by every backend that is up.
/// * `TrustClass::Untrusted` and `TrustClass::Unknown` are refused with
///   [`Error::Refused`] (naming the trust class and the kind) **unless the
///   backend has an isolation boundary** (a microVM, say). Unknown is refused
///   alongside untrusted: work nobody classified has not been shown to be
///   safe.
/// * [`accepts_trust`](crate::accepts_trust) is this rule, for a kind and
///   its [`Isolation`](crate::Isolation); a backend answers it rather than
///   writing the rule again.
/// * [`launch`](Provider::launch) applies the same check first, so a caller
///   that skips `accepts` still cannot start refused work.
///
/// # `launch`
///
/// Starts one instance for the spec and answers it.
///
/// * Trust is checked first; a refused spec records nothing.
/// * An invalid spec (an empty name, a command the backend cannot run) is
///   [`Error::InvalidSpec`] with the reason and the expected form; nothing is
///   recorded. An environment [`Environment::problem`](crate::Environment::problem)
///   finds wrong is one.
/// * The spec's environment (P2) is given to the instance as its process
///   environment, on top of the image's. Its values are secrets: never logged,
///   never part of an answer or an error, forgotten when the instance is
///   destroyed.
/// * A name this deployment already holds, running or stopped, is
///   [`Error::Conflict`]; the held instance is untouched. The same name held by
///   another deployment is allowed and stays invisible.
/// * On success the instance carries this provider's owner and kind, a fresh id
///   never used before on that host, and a start time from the provider's clock.
///
/// # `find`
///
/// Answers this deployment's instance whose name is **exactly** the one given
/// (no case folding, trimming or prefix matching), or `None`.
///
/// * Another deployment's instance of the same name is never answered.
/// * When the inventory cannot be read, answers the error
///   ([`Error::InventoryUnavailable`]), never `None`: `None` means confirmed absent.
///
/// # `list`
///
/// Answers the inventory: **every** instance this deployment owns on the
/// backend, each in its state as of the call, and no other deployment's.
///
/// * **`list` errors rather than answers short.** A scheduler's reconciler frees
///   the capacity of every lease whose instance is absent from the inventory, so
///   a partial answer would free capacity still in use and over-commit the
///   fleet. When the backend cannot give the whole inventory it answers
///   [`Error::InventoryUnavailable`].
/// * Stopped instances stay in the inventory, with their exit code, until
///   destroyed.
/// * The order of the answer is unspecified.
///
/// # `destroy`
///
/// Removes this deployment's instance with that id, running or stopped.
///
/// * **Scoped by identity.** An id that belongs to another deployment is
///   refused with [`Error::NotOwned`] and that instance is left untouched.
/// * **Idempotent.** Destroying an id that is already gone succeeds, every time.
///   A backend that is authoritative about what it holds answers
///   [`Teardown::Absent`] (confirmed); one that can only ask answers
///   [`Teardown::Requested`]. [`Teardown::Stopped`] means this call found the
///   instance and removed it.
/// * Destroy does not depend on the inventory being readable.
///
/// # `output` and `hints` (optional capabilities)
///
/// Asked of the provider itself, so the trait stays object-safe: a backend
/// that offers an instance's output ([`Output`]) or change hints ([`Hints`])
/// answers `Some` with itself (or a part of itself), one that lacks it keeps
/// the default `None`, and a caller does without. Each answers the same
/// every time it is asked. Hints only say where to look: whatever they do,
/// every guarantee above holds as stated.
///
/// # Implementing it
///
/// Everything a backend needs is in this crate, the `#[async_trait]`
/// attribute included; every [`Error`] variant has a constructor:
///
/// ```
/// use billet_provider::{
///     Error, Instance, InstanceId, Isolation, Provider, ProviderKind, Spec, Teardown,
///     TrustClass, accepts_trust, async_trait,
/// };
///
/// /// A backend that holds nothing and starts nothing.
/// #[derive(Debug)]
/// struct Empty;
///
/// #[async_trait]
/// impl Provider for Empty {
///     fn kind(&self) -> ProviderKind {
///         ProviderKind::Docker
///     }
///     fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
///         accepts_trust(self.kind(), Isolation::NoBoundary, trust)
///     }
///     async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
///         self.accepts(spec.trust)?;
///         Err(Error::unavailable("this backend starts nothing"))
///     }
///     async fn find(&self, _name: &str) -> Result<Option<Instance>, Error> {
///         Ok(None)
///     }
///     async fn list(&self) -> Result<Vec<Instance>, Error> {
///         Ok(Vec::new())
///     }
///     async fn destroy(&self, _id: &InstanceId) -> Result<Teardown, Error> {
///         Ok(Teardown::Absent)
///     }
/// }
///
/// assert_eq!(
///     Empty.accepts(TrustClass::Untrusted).unwrap_err().kind(),
///     Error::refused(TrustClass::Untrusted, ProviderKind::Docker).kind()
/// );
/// ```
#[async_trait]
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The backend this provider drives. See the trait docs, section `kind`.
    fn kind(&self) -> ProviderKind;

    /// Whether work of this trust class may run here. See the trait docs,
    /// section `accepts`.
    fn accepts(&self, trust: TrustClass) -> Result<(), Error>;

    /// Starts one instance for `spec`. See the trait docs, section `launch`.
    async fn launch(&self, spec: Spec) -> Result<Instance, Error>;

    /// This deployment's instance named exactly `name`, or `None`. See the
    /// trait docs, section `find`.
    async fn find(&self, name: &str) -> Result<Option<Instance>, Error>;

    /// Every instance this deployment owns here, or an error; never a short
    /// answer. See the trait docs, section `list`.
    async fn list(&self) -> Result<Vec<Instance>, Error>;

    /// Removes this deployment's instance `id`; idempotent and scoped by
    /// identity. See the trait docs, section `destroy`.
    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error>;

    /// The output of this backend's instances, if it keeps it; `None` (the
    /// default) if it does not. See the trait docs, section `output`.
    fn output(&self) -> Option<&dyn Output> {
        None
    }

    /// Change hints for this deployment's instances, if the backend gives
    /// them; `None` (the default) if it does not. See the trait docs,
    /// section `hints`.
    fn hints(&self) -> Option<&dyn Hints> {
        None
    }
}

/// A shared provider is a provider: `Arc<P>` forwards every call, so generic
/// code can take `Arc<dyn Provider>` and wrappers alike.
#[async_trait]
impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn kind(&self) -> ProviderKind {
        (**self).kind()
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        (**self).accepts(trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        (**self).launch(spec).await
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        (**self).find(name).await
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        (**self).list().await
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        (**self).destroy(id).await
    }

    fn output(&self) -> Option<&dyn Output> {
        (**self).output()
    }

    fn hints(&self) -> Option<&dyn Hints> {
        (**self).hints()
    }
}
