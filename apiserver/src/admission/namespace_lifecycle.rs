//! Mirrors the NamespaceLifecycle admission plugin
//! (k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle): nothing is created in a namespace
//! that does not exist or is being terminated, and the namespaces the system lives in may not be
//! deleted. First in the chain: it refuses before any other plugin does work.

use std::sync::Arc;

use futures::future::LocalBoxFuture;
use serde_json::json;
use tracing::Instrument as _;

use super::interfaces::{Attributes, MutationInterface, Operation};
use crate::error::{Error, Result};
use crate::registry::generic::store::Registry;

pub const NAME: &str = "NamespaceLifecycle";

/// Namespaces that may not be deleted (kube-node-lease may, as in Kubernetes).
pub const UNDELETABLE_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

pub struct NamespaceLifecycle {
    namespaces: Arc<Registry>,
}

impl NamespaceLifecycle {
    pub fn new(namespaces: Arc<Registry>) -> Self {
        Self { namespaces }
    }

    /// Objects can only be created in a namespace that exists and is not terminating.
    async fn check_open(&self, ns: &str) -> Result<()> {
        let namespaces = &self.namespaces;
        // The watch cache answers without a store round trip (as Kubernetes' namespace lister
        // does); a namespace it does not know yet may just have been created: ask the store.
        let namespace = match namespaces.cache.get(&namespaces.key(None, ns)) {
            Some(v) => v,
            None => Arc::new(namespaces.get(None, ns).await?),
        };
        if namespace.pointer("/metadata/deletionTimestamp").is_some() || namespace.pointer("/status/phase") == Some(&json!("Terminating")) {
            return Err(Error::Forbidden(format!("unable to create new content in namespace {ns} because it is being terminated")));
        }
        Ok(())
    }
}

impl MutationInterface for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        match a.operation {
            // A subresource's create (an eviction, a token) makes nothing new in the namespace.
            Operation::Create => a.resource.namespaced && a.subresource.is_empty(),
            Operation::Update => false,
            Operation::Delete => a.is_for(self.namespaces.info().group, self.namespaces.info().plural),
        }
    }

    fn admit<'a>(&'a self, a: &'a Attributes<'a>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match a.operation {
                Operation::Delete if UNDELETABLE_NAMESPACES.contains(&a.name) => {
                    Err(Error::Forbidden(format!("namespaces \"{}\" is forbidden: this namespace may not be deleted", a.name)))
                }
                Operation::Delete | Operation::Update => Ok(()),
                Operation::Create => {
                    // A step of its own in `kubelab trace`: the one plugin that reads the store.
                    let span = tracing::debug_span!(target: "apiserver", "admission", check = NAME, pod_uid = tracing::field::Empty);
                    self.check_open(a.namespace.unwrap_or("default")).instrument(span).await
                }
            }
        })
    }
}
