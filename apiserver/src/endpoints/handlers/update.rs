//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/update.go: PUT of an object, of its status
//! (`/status`) or of a namespace's finalizers (`/finalize`). With `metadata.resourceVersion` set
//! it must be the current one (409 otherwise); without, it replaces whatever is current. A dry run
//! (`?dryRun=All`, UpdateOptions) decodes, checks and prepares the update as a real one does and
//! answers 200 with the object as it would be written, at the current resourceVersion.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse};

use crate::endpoints::request::{Target, check_name_and_namespace, decode, parse_body, record_managed_fields, respond};
use crate::error::Result;
use crate::registry::generic::options::WriteOptions;

/// `PUT .../<resource>/<name>[/status|/finalize]`.
pub async fn update(req: &HttpRequest, body: &[u8], t: &Target, name: &str, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, ns) = (&t.registry, t.namespace.as_deref());
    let opts = WriteOptions::from_query("UpdateOptions", q)?;
    let obj = parse_body(req, body)?;
    let (obj, warnings) = decode(reg, obj, q)?;
    check_name_and_namespace(t, &obj)?;
    let old = reg.get(ns, name).await?;
    let obj = record_managed_fields(obj, Some(&old), q, "Update");
    let updated = reg.update_with(ns, name, obj, t.subresource.as_deref(), opts.is_dry_run()).await?;
    Ok(respond(200, &updated, &warnings))
}
