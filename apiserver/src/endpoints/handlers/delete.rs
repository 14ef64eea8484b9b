//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/delete.go: DELETE of one object (gracefully
//! for pods, marked and left to its finalizers when it has some) and DELETE of a collection, each
//! object through admission (NamespaceLifecycle keeps the system namespaces; NodeRestriction
//! lets a node delete only the pods bound to it).
//!
//! What happens to the object's dependents follows `propagationPolicy` (or the deprecated
//! `orphanDependents`, or the kind's default): Orphan and Foreground leave the object marked with
//! the `orphan` or `foregroundDeletion` finalizer for the garbage collector; Background deletes it
//! at once and leaves the dependents to the collector. A batch/v1 Job deleted without a policy
//! keeps its pods, with a warning.
//!
//! The options are the body's DeleteOptions (what kubectl and client-go send, `dryRun: ["All"]`
//! included), with what the query sets and the body does not. A dry run checks and answers as the
//! delete would — admission, preconditions, the object marked with its deletionTimestamp for a
//! graceful delete — and writes nothing ([`crate::registry::generic::store::Registry::delete`]).

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::admission::interfaces::{Attributes, Operation};
use crate::config::Api;
use crate::authentication::user::UserInfo;
use crate::endpoints::request::{Target, list_options, parse_body, request_user, respond};
use crate::error::{Error, Result};
use crate::registry::generic::options::DeleteOptions;
use crate::registry::generic::store::{Registry, name_of};

/// The request's metav1.DeleteOptions: the body's, if it has one, and the query's; validated.
fn delete_options(req: &HttpRequest, body: &[u8], q: &HashMap<String, String>) -> Result<DeleteOptions> {
    let body = if body.is_empty() { None } else { Some(parse_body(req, body)?) };
    DeleteOptions::from_request(body.as_ref(), q)
}

/// Mutating admission of a delete: there is no new object, only the name, and the object to be
/// deleted when the handler has it (a collection's items).
async fn admit(api: &Api, user: &UserInfo, reg: &Registry, namespace: Option<&str>, name: &str, dry_run: bool, old: Option<&Value>) -> Result<()> {
    let attributes = Attributes { operation: Operation::Delete, user, resource: reg.info(), subresource: "", namespace, name, dry_run, object: None, old_object: old };
    api.admission.admit(&attributes).await
}

/// `DELETE .../<resource>/<name>`.
pub async fn delete(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, name: &str, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, ns) = (&t.registry, t.namespace.as_deref());
    let opts = delete_options(req, body, q)?;
    let user = request_user(req)?;
    admit(api, &user, reg, ns, name, opts.is_dry_run(), None).await?;
    let (obj, gone) = reg.delete(ns, name, &opts).await?;
    let warnings = reg.strategy.warnings_on_delete(opts.propagation_policy.is_some() || opts.orphan_dependents.is_some());
    if gone && !reg.strategy.return_deleted_object() {
        return Ok(respond(200, &deleted_status(reg, &obj), &warnings));
    }
    Ok(respond(200, &obj, &warnings))
}

/// What a delete that removed the object answers for most resources: a Status `Success` naming
/// it (store.go's `Delete` without `ReturnDeletedObject`).
fn deleted_status(reg: &Registry, obj: &Value) -> Value {
    let info = reg.info();
    let mut details = json!({"name": name_of(obj), "kind": info.plural, "uid": obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("")});
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

/// `DELETE .../<resource>`: every object the list options select that admission lets go.
pub async fn delete_collection(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, info) = (&t.registry, t.registry.info());
    let opts = delete_options(req, body, q)?;
    let list = reg.list(t.namespace.as_deref(), &list_options(q)?).await?;
    let user = request_user(req)?;
    let mut deleted = Vec::new();
    for item in list.items {
        let item_ns = item.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from);
        if admit(api, &user, reg, item_ns.as_deref(), name_of(&item), opts.is_dry_run(), Some(&item)).await.is_err() {
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
