//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/delete.go: DELETE of one object (gracefully
//! for pods, marked and left to its finalizers when it has some) and DELETE of a collection, each
//! object through admission (NamespaceLifecycle keeps the system namespaces).

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::admission::interfaces::{Attributes, Operation};
use crate::config::Api;
use crate::endpoints::request::{Target, dry_run, list_options, parse_body, respond};
use crate::error::{Error, Result};
use crate::registry::generic::options::DeleteOptions;
use crate::registry::generic::store::{Registry, name_of};

/// The body's metav1.DeleteOptions, if it has one.
fn delete_options(req: &HttpRequest, body: &[u8]) -> Result<DeleteOptions> {
    Ok(if body.is_empty() { DeleteOptions::default() } else { DeleteOptions::from_json(&parse_body(req, body)?) })
}

/// Mutating admission of a delete: there is no new object, only the name.
async fn admit(api: &Api, reg: &Registry, namespace: Option<&str>, name: &str, dry_run: bool) -> Result<()> {
    let attributes = Attributes { operation: Operation::Delete, resource: reg.info(), namespace, name, dry_run };
    api.admission.admit(&attributes).await
}

/// `DELETE .../<resource>/<name>`.
pub async fn delete(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, name: &str, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, ns) = (&t.registry, t.namespace.as_deref());
    let mut opts = delete_options(req, body)?;
    if let Some(g) = q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()) {
        opts.grace_period_seconds = Some(g);
    }
    admit(api, reg, ns, name, dry_run(q)).await?;
    if dry_run(q) {
        return Ok(respond(200, &reg.get(ns, name).await?, &[]));
    }
    let (obj, _gone) = reg.delete(ns, name, &opts).await?;
    Ok(respond(200, &obj, &[]))
}

/// `DELETE .../<resource>`: every object the list options select that admission lets go.
pub async fn delete_collection(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, info) = (&t.registry, t.registry.info());
    let opts = delete_options(req, body)?;
    let list = reg.list(t.namespace.as_deref(), &list_options(q)).await?;
    let mut deleted = Vec::new();
    for item in list.items {
        let item_ns = item.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from);
        if admit(api, reg, item_ns.as_deref(), name_of(&item), dry_run(q)).await.is_err() {
            continue;
        }
        match reg.delete(item_ns.as_deref(), name_of(&item), &opts).await {
            Ok((obj, _)) => deleted.push(obj),
            Err(Error::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let v = json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": {}, "items": deleted});
    Ok(respond(200, &v, &[]))
}
