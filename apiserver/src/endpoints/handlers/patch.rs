//! Mirrors k8s.io/apiserver/pkg/endpoints/handlers/patch.go: the four patch types kubectl sends.
//!
//! - `application/json-patch+json` (RFC 6902), `application/merge-patch+json` (RFC 7386, what
//!   `kubectl label`/`annotate` send), `application/strategic-merge-patch+json` (client-side
//!   `apply`, `edit`, `cordon`: lists merged by their keys) are applied to the current object
//!   and the result is an update, retried on conflicts unless the patch pins a resourceVersion.
//! - `application/apply-patch+yaml` is server-side apply: the applied configuration is merged
//!   with field ownership (metadata.managedFields); it creates the object when absent.
//!
//! A patch of an object in another form (a workload's scale) patches that form and writes it back
//! into the object (`patch_view`).
//!
//! An update by patch is admitted (NodeRestriction) when a plugin handles it: the patch is then
//! applied once to the object as read, for admission to see the old and the new object, before the
//! store's update applies it again (a retry after a conflict is not admitted again).
//!
//! A dry run (`?dryRun=All`, PatchOptions) patches, decodes and checks as a real patch does and
//! answers with the result, written nowhere (an apply that would create answers 201).

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, http::header};
use apimachinery::patch::PatchMeta;
use serde_json::Value;

use super::create::create_object;
use super::update::check_view_type;
use crate::admission::interfaces::{Attributes, Operation};
use crate::authentication::user::UserInfo;
use crate::config::Api;
use crate::endpoints::request::{Target, check_name_and_namespace, decode, field_manager, parse_body, request_user, respond};
use crate::error::{Error, Result};
use crate::registry::generic::options::WriteOptions;
use crate::registry::generic::rest::View;
use crate::registry::generic::store::now_rfc3339;

fn patch_error(e: impl std::fmt::Display, code: u16) -> Error {
    match code {
        422 => Error::Unprocessable(e.to_string()),
        _ => Error::BadRequest(e.to_string()),
    }
}

/// `PATCH .../<resource>/<name>[/status]`.
pub async fn patch(req: &HttpRequest, body: &[u8], api: &Api, t: &Target, name: &str, q: &HashMap<String, String>) -> Result<HttpResponse> {
    let (reg, ns, sub) = (&t.registry, t.namespace.as_deref(), t.subresource.as_deref());
    let media = media_type(req);
    let dry_run = WriteOptions::for_patch(q, media == "application/apply-patch+yaml")?.is_dry_run();
    let kind = reg.info().kind;
    let meta = PatchMeta::for_kind(kind);
    let mut warnings = Vec::new();
    let user = request_user(req)?;
    let writer = api.writer(&user);
    if media == "application/apply-patch+yaml" {
        let manager = q.get("fieldManager").filter(|m| !m.is_empty()).ok_or_else(|| {
            Error::BadRequest("PATCH, application/apply-patch+yaml: fieldManager is required for apply requests".into())
        })?;
        let force = crate::endpoints::request::flag(q, "force");
        let applied = parse_body(req, body)?;
        let (applied_checked, w) = decode(reg, applied.clone(), q)?;
        check_name_and_namespace(t, &applied_checked)?;
        warnings = w;
        let now = now_rfc3339();
        return match reg.get(ns, name).await {
            Err(Error::NotFound { .. }) => {
                let merged = apimachinery::managedfields::apply(None, &applied, manager, force, &meta, &now).map_err(|e| apply_error(e, kind, name))?;
                let (obj, _) = decode(reg, merged, q)?;
                let created = create_object(api, &user, reg, ns, obj, dry_run).await?;
                if !dry_run {
                    api.after_create(reg, &created).await;
                }
                Ok(respond(201, &created, &warnings))
            }
            Err(e) => Err(e),
            Ok(current) => {
                if needs_admission(api, &user, t, name, dry_run) {
                    admit_update(api, &user, t, name, dry_run, &current, |current| {
                        let merged = apimachinery::managedfields::apply(Some(current), &applied, manager, force, &meta, &now).map_err(|e| apply_error(e, kind, name))?;
                        Ok(decode(reg, merged, q)?.0)
                    })
                    .await?;
                }
                let updated = reg
                    .guaranteed_update_with(ns, name, sub, dry_run, |current| {
                        let merged = apimachinery::managedfields::apply(Some(current), &applied, manager, force, &meta, &now).map_err(|e| apply_error(e, kind, name))?;
                        let obj = decode(reg, merged, q)?.0;
                        reg.strategy.check_writer(&writer, &obj)?;
                        Ok(obj)
                    })
                    .await?;
                Ok(respond(200, &updated, &warnings))
            }
        };
    }
    let apply_patch = patcher(req, body, &media, meta)?;
    let manager = field_manager(req, q);
    if needs_admission(api, &user, t, name, dry_run) {
        let current = reg.get(ns, name).await?;
        admit_update(api, &user, t, name, dry_run, &current, |current| Ok(decode(reg, apply_patch(current)?, q)?.0)).await?;
    }
    let updated = reg
        .guaranteed_update_with(ns, name, sub, dry_run, |current| {
            let patched = apply_patch(current)?;
            let (obj, w) = decode(reg, patched, q)?;
            warnings = w;
            check_name_and_namespace(t, &obj)?;
            reg.strategy.check_writer(&writer, &obj)?;
            let mut obj = obj;
            if let Some(m) = &manager {
                apimachinery::managedfields::update_managed_fields(Some(current), &mut obj, m, "Update", &now_rfc3339());
            }
            Ok(obj)
        })
        .await?;
    Ok(respond(200, &updated, &warnings))
}

/// The attributes of an update by patch, with no object yet.
fn update_attributes<'a>(user: &'a UserInfo, t: &'a Target, name: &'a str, dry_run: bool) -> Attributes<'a> {
    Attributes {
        operation: Operation::Update,
        user,
        resource: t.registry.info(),
        subresource: t.subresource.as_deref().unwrap_or(""),
        namespace: t.namespace.as_deref(),
        name,
        dry_run,
        object: None,
        old_object: None,
    }
}

/// Whether some admission plugin handles this update (then the patch is applied for it first).
fn needs_admission(api: &Api, user: &UserInfo, t: &Target, name: &str, dry_run: bool) -> bool {
    api.admission.handles(&update_attributes(user, t, name, dry_run))
}

/// Mutating admission of an update by patch (called when [`needs_admission`]): `patched` is what
/// the patch makes of `current`.
async fn admit_update(api: &Api, user: &UserInfo, t: &Target, name: &str, dry_run: bool, current: &Value, patched: impl FnOnce(&Value) -> Result<Value>) -> Result<()> {
    let attributes = update_attributes(user, t, name, dry_run);
    let new = patched(current)?;
    api.admission.admit(&Attributes { object: Some(&new), old_object: Some(current), ..attributes }).await
}

/// `PATCH .../<resource>/<name>/<subresource>` of the object in another form (a workload's
/// scale): the form is patched, then written into the object as a PUT of it is. Server-side
/// apply of a form is refused (Kubernetes applies it; nothing here tracks its fields).
pub async fn patch_view(req: &HttpRequest, body: &[u8], t: &Target, name: &str, q: &HashMap<String, String>, view: View) -> Result<HttpResponse> {
    let media = media_type(req);
    let dry_run = WriteOptions::for_patch(q, media == "application/apply-patch+yaml")?.is_dry_run();
    if media == "application/apply-patch+yaml" {
        return Err(Error::UnsupportedMediaType(format!(
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (server-side apply of {} {} is not supported)",
            view.api_version, view.kind
        )));
    }
    let apply_patch = patcher(req, body, &media, PatchMeta::for_kind(view.kind))?;
    let updated = t
        .registry
        .guaranteed_update_with(t.namespace.as_deref(), name, None, dry_run, |current| {
            let form = apply_patch(&(view.get)(current)?)?;
            check_view_type(&form, view)?;
            check_name_and_namespace(t, &form)?;
            (view.update)(current, &form)
        })
        .await?;
    Ok(respond(200, &(view.get)(&updated)?, &[]))
}

/// The request's media type, without parameters: which patch it is.
fn media_type(req: &HttpRequest) -> String {
    let ct = req.headers().get(header::CONTENT_TYPE).and_then(|c| c.to_str().ok()).unwrap_or("");
    ct.split(';').next().unwrap_or("").trim().to_string()
}

/// The patch of one of the three non-apply media types, as a function of the current object.
fn patcher(req: &HttpRequest, body: &[u8], media: &str, meta: PatchMeta) -> Result<Box<dyn Fn(&Value) -> Result<Value>>> {
    Ok(match media {
        "application/json-patch+json" => {
            let raw = body.to_vec();
            Box::new(move |cur| apimachinery::patch::json_patch(cur, &raw).map_err(|e| { let c = e.http_code(); patch_error(e, c) }))
        }
        "application/merge-patch+json" => {
            let p = parse_body(req, body)?;
            Box::new(move |cur| Ok(apimachinery::patch::merge_patch(cur, &p)))
        }
        "application/strategic-merge-patch+json" => {
            let p = parse_body(req, body)?;
            Box::new(move |cur| apimachinery::patch::strategic_merge_patch(cur, &p, &meta).map_err(|e| { let c = e.http_code(); patch_error(e, c) }))
        }
        other => {
            return Err(Error::UnsupportedMediaType(format!(
                "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (not {other})"
            )));
        }
    })
}

fn apply_error(e: apimachinery::error::ApplyError, kind: &str, name: &str) -> Error {
    match e.http_code() {
        409 => Error::Conflict { kind: kind.to_lowercase(), name: name.into(), message: e.to_string() },
        _ => Error::BadRequest(e.to_string()),
    }
}
