//! Mirrors pkg/registry/authorization/subjectaccessreview/rest.go: "may this user do this?" about
//! anyone — the user, groups, uid and extra of the spec, taken as given — answered by the
//! server's authorizers. What a component that serves requests of its own asks (a node agent
//! about a caller of its API). Who may ask: `system:auth-delegator`'s holders, and
//! administrators.

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use serde_json::Value;

use super::util::{decide, user_from_spec};
use crate::error::Result;
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::generic::rest::ReviewRequest;
use crate::registry::generic::strategy::{ResourceInfo, causes};
use crate::registry::generic::typed::Typed;

pub static SUBJECTACCESSREVIEWS: ResourceInfo = ResourceInfo {
    group: "authorization.k8s.io",
    version: "v1",
    kind: "SubjectAccessReview",
    plural: "subjectaccessreviews",
    singular: "subjectaccessreview",
    namespaced: false,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<SubjectAccessReview>::NEW,
    printer: &DefaultTableConvertor,
};

/// The review, with its status.
pub fn create(r: &ReviewRequest<'_>, mut obj: Value) -> Result<Value> {
    let errs = causes(api::authorization::validation::validate_subject_access_review(&obj));
    if !errs.is_empty() {
        return Err(SUBJECTACCESSREVIEWS.invalid("", errs));
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    obj["status"] = decide(r.authorizer, &user_from_spec(&spec), &spec);
    Ok(obj)
}
