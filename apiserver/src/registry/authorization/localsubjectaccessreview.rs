//! Mirrors pkg/registry/authorization/localsubjectaccessreview/rest.go: a SubjectAccessReview
//! about one namespace, posted to that namespace (`/namespaces/<ns>/localsubjectaccessreviews`),
//! so that a namespace's administrator may be let ask about their own namespace only. The
//! resource attributes must name the path's namespace; a path (non-resource) question is refused.

use k8s_openapi::api::authorization::v1::LocalSubjectAccessReview;
use serde_json::Value;

use super::util::{decide, user_from_spec};
use crate::error::{Error, Result};
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::generic::rest::ReviewRequest;
use crate::registry::generic::strategy::{ResourceInfo, causes};
use crate::registry::generic::typed::Typed;

pub static LOCALSUBJECTACCESSREVIEWS: ResourceInfo = ResourceInfo {
    group: "authorization.k8s.io",
    version: "v1",
    kind: "LocalSubjectAccessReview",
    plural: "localsubjectaccessreviews",
    singular: "localsubjectaccessreview",
    namespaced: true,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<LocalSubjectAccessReview>::NEW,
    printer: &DefaultTableConvertor,
};

/// The review, with its status. Its `metadata.namespace` is the path's (the create handler fills
/// it in, or refuses another).
pub fn create(r: &ReviewRequest<'_>, mut obj: Value) -> Result<Value> {
    let errs = causes(api::authorization::validation::validate_local_subject_access_review(&obj));
    if !errs.is_empty() {
        return Err(LOCALSUBJECTACCESSREVIEWS.invalid("", errs));
    }
    let namespace = r.namespace.unwrap_or("");
    if namespace.is_empty() {
        return Err(Error::BadRequest(format!("namespace is required on this type: {namespace}")));
    }
    if obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(namespace) {
        return Err(Error::BadRequest(format!("spec.resourceAttributes.namespace must match namespace: {namespace}")));
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    obj["status"] = decide(r.authorizer, &user_from_spec(&spec), &spec);
    Ok(obj)
}
