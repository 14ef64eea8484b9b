//! Mirrors pkg/registry/authorization/selfsubjectaccessreview/rest.go: "may I do this?" — the
//! request's own user asked about (`kubectl auth can-i create pods`). Every authenticated user
//! may ask (`system:basic-user`).

use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use serde_json::Value;

use super::util::decide;
use crate::error::Result;
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::generic::rest::ReviewRequest;
use crate::registry::generic::strategy::{ResourceInfo, causes};
use crate::registry::generic::typed::Typed;

pub static SELFSUBJECTACCESSREVIEWS: ResourceInfo = ResourceInfo {
    group: "authorization.k8s.io",
    version: "v1",
    kind: "SelfSubjectAccessReview",
    plural: "selfsubjectaccessreviews",
    singular: "selfsubjectaccessreview",
    namespaced: false,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<SelfSubjectAccessReview>::NEW,
    printer: &DefaultTableConvertor,
};

/// The review, with its status.
pub fn create(r: &ReviewRequest<'_>, mut obj: Value) -> Result<Value> {
    let errs = causes(api::authorization::validation::validate_self_subject_access_review(&obj));
    if !errs.is_empty() {
        return Err(SELFSUBJECTACCESSREVIEWS.invalid("", errs));
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    obj["status"] = decide(r.authorizer, r.user, &spec);
    Ok(obj)
}
