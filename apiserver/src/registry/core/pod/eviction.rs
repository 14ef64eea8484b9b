//! Mirrors pkg/registry/core/pod/storage/eviction.go's EvictionREST: `POST pods/<name>/eviction`
//! deletes the pod with the eviction's delete options. There are no PodDisruptionBudgets to
//! consult, so an eviction is a delete.

use futures::future::LocalBoxFuture;
use serde_json::Value;

use crate::registry::generic::rest::RestRequest;
use crate::error::Result;
use crate::registry::generic::options::DeleteOptions;

/// `POST pods/<name>/eviction` (rest.Creater).
pub fn create(r: RestRequest<'_>, eviction: Value) -> LocalBoxFuture<'_, Result<()>> {
    Box::pin(async move {
        let opts = DeleteOptions::from_json(eviction.get("deleteOptions").unwrap_or(&Value::Null));
        r.registry.delete(Some(r.namespace), r.name, &opts).await?;
        Ok(())
    })
}
