//! Mirrors pkg/registry/authentication/selfsubjectreview/rest.go: the request's user — name,
//! uid, groups, extra — as the authenticators found it (`kubectl auth whoami`), stamped with the
//! time it was asked. Every authenticated user may ask (`system:basic-user`). Served as `v1` and
//! as `v1beta1` (kube-apiserver 1.32 serves both; kubectl 1.27 knows only `v1beta1`).

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use serde_json::{Value, json};

use crate::error::Result;
use crate::printers::tablegenerator::DefaultTableConvertor;
use crate::registry::generic::rest::ReviewRequest;
use crate::registry::generic::store::now_rfc3339;
use crate::registry::generic::strategy::ResourceInfo;
use crate::registry::generic::typed::{SameAs, Typed};

pub static SELFSUBJECTREVIEWS: ResourceInfo = ResourceInfo {
    group: "authentication.k8s.io",
    version: "v1",
    kind: "SelfSubjectReview",
    plural: "selfsubjectreviews",
    singular: "selfsubjectreview",
    namespaced: false,
    short_names: &[],
    storage_name: "",
    subresources: &[],
    categories: &[],
    codec: &Typed::<SelfSubjectReview>::NEW,
    printer: &DefaultTableConvertor,
};

pub static SELFSUBJECTREVIEWS_V1BETA1: ResourceInfo = ResourceInfo {
    version: "v1beta1",
    codec: &SameAs { codec: &Typed::<SelfSubjectReview>::NEW, api_version: "authentication.k8s.io/v1" },
    ..SELFSUBJECTREVIEWS
};

/// A new review holding the user: fields Go leaves out when empty are left out.
pub fn create(r: &ReviewRequest<'_>, _obj: Value) -> Result<Value> {
    Ok(json!({
        "kind": "SelfSubjectReview",
        "metadata": {"creationTimestamp": now_rfc3339()},
        "status": {"userInfo": r.user.to_json()},
    }))
}
