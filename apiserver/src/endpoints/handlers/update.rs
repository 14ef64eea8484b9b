//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/update.go: PUT of an object, of its status
//! (`/status`) or of a namespace's finalizers (`/finalize`). With `metadata.resourceVersion` set
//! it must be the current one (409 otherwise); without, it replaces whatever is current. A dry run
//! (`?dryRun=All`, UpdateOptions) decodes, checks and prepares the update as a real one does and
//! answers 200 with the object as it would be written, at the current resourceVersion. PUT of an
//! object in another form (rest.Updater of a subresource: a workload's scale) writes that form
//! back into the object. The object's writer is checked first (RBAC's escalation checks), then
//! the update is admitted with the current object as the old one (NodeRestriction: a node updates
//! only its own Node and the status of its own pods).

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse};
use serde_json::Value;

use crate::admission::interfaces::{Attributes, Operation};
use crate::config::Api;
use crate::endpoints::request::{Target, check_name_and_namespace, decode, parse_body, field_manager, record_managed_fields, request_user, respond};
use crate::error::{Error, Result};
use crate::registry::generic::options::WriteOptions;
use crate::registry::generic::rest::View;

/// `PUT .../<resource>/<name>[/status|/finalize]`.
pub async fn update(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, name: &str, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, ns) = (&t.registry, t.namespace.as_deref());
    let opts = WriteOptions::from_query("UpdateOptions", q)?;
    let obj = parse_body(req, body)?;
    let (obj, warnings) = decode(reg, obj, q)?;
    check_name_and_namespace(t, &obj)?;
    let user = request_user(req)?;
    reg.strategy.check_writer(&api.writer(&user), &obj)?;
    let old = reg.get(ns, name).await?;
    let attributes = Attributes {
        operation: Operation::Update,
        user: &user,
        resource: reg.info(),
        subresource: t.subresource.as_deref().unwrap_or(""),
        namespace: ns,
        name,
        dry_run: opts.is_dry_run(),
        object: Some(&obj),
        old_object: Some(&old),
    };
    api.admission.admit(&attributes).await?;
    let obj = record_managed_fields(obj, Some(&old), field_manager(req, q).as_deref(), "Update");
    let updated = reg.update_with(ns, name, obj, t.subresource.as_deref(), opts.is_dry_run()).await?;
    Ok(respond(200, &updated, &warnings))
}

/// `PUT .../<resource>/<name>/<subresource>` of the object in another form (a workload's scale):
/// the form is written into the current object, which is updated (retried on a conflict unless
/// the form pins a resourceVersion); the answer is the updated object in that form.
pub async fn update_view(req: &HttpRequest, body: &[u8], t: &Target, name: &str, q: &HashMap<String, String>, view: View) -> Result<HttpResponse> {
    let opts = WriteOptions::from_query("UpdateOptions", q)?;
    let form = parse_body(req, body)?;
    check_view_type(&form, view)?;
    check_name_and_namespace(t, &form)?;
    let updated = t.registry.guaranteed_update_with(t.namespace.as_deref(), name, None, opts.is_dry_run(), |current| (view.update)(current, &form)).await?;
    Ok(respond(200, &(view.get)(&updated)?, &[]))
}

/// The form's kind and apiVersion, where the client gives them, are the view's.
pub fn check_view_type(form: &Value, view: View) -> Result<()> {
    let field = |f: &str| form.get(f).and_then(Value::as_str).unwrap_or("");
    let (kind, api_version) = (field("kind"), field("apiVersion"));
    if (!kind.is_empty() && kind != view.kind) || (!api_version.is_empty() && api_version != view.api_version) {
        return Err(Error::BadRequest(format!(
            "the body of the request must be a {} {}, not a {kind} {api_version}",
            view.api_version, view.kind
        )));
    }
    Ok(())
}
