//! [`Capturing`]: a pool's provider with its instances' output captured.

use std::sync::Arc;

use billet_provider::async_trait;
use billet_provider::{
    Error, Hints, Instance, InstanceId, Output, Provider, ProviderKind, Spec, Teardown, TrustClass,
};

use super::OutputStore;

/// A pool's provider with its instances' output captured ([`OutputStore`]):
/// every call is the provider's own, and `destroy` first finishes the
/// capture of the instance it removes.
#[derive(Debug)]
pub struct Capturing {
    inner: Arc<dyn Provider>,
    store: Arc<OutputStore>,
}

impl Capturing {
    /// `inner`, with its output captured into `store`.
    pub fn new(inner: Arc<dyn Provider>, store: Arc<OutputStore>) -> Capturing {
        Capturing { inner, store }
    }
}

#[async_trait]
impl Provider for Capturing {
    fn kind(&self) -> ProviderKind {
        self.inner.kind()
    }

    fn accepts(&self, trust: TrustClass) -> Result<(), Error> {
        self.inner.accepts(trust)
    }

    async fn launch(&self, spec: Spec) -> Result<Instance, Error> {
        let instance = self.inner.launch(spec).await?;
        self.store.ensure(&self.inner, &instance);
        Ok(instance)
    }

    async fn find(&self, name: &str) -> Result<Option<Instance>, Error> {
        let found = self.inner.find(name).await?;
        if let Some(instance) = &found {
            self.store.ensure(&self.inner, instance);
        }
        Ok(found)
    }

    async fn list(&self) -> Result<Vec<Instance>, Error> {
        let instances = self.inner.list().await?;
        for instance in &instances {
            self.store.ensure(&self.inner, instance);
        }
        Ok(instances)
    }

    async fn destroy(&self, id: &InstanceId) -> Result<Teardown, Error> {
        self.store.finish(id).await;
        self.inner.destroy(id).await
    }

    fn output(&self) -> Option<&dyn Output> {
        self.inner.output()
    }

    fn hints(&self) -> Option<&dyn Hints> {
        self.inner.hints()
    }
}
