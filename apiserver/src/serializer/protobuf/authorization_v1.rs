//! Mirrors k8s.io/api/authorization/v1/generated.proto: the SelfSubjectAccessReview and
//! SelfSubjectRulesReview that `kubectl auth can-i` (and `--list`) sends, and the
//! SubjectAccessReview and LocalSubjectAccessReview a typed client may send, field numbers as in
//! that file (kubectl 1.32 and later; 1.27 to 1.31 send JSON).
//!
//! A review is a question; what the client sends is its spec. A spec's status, if any, is the
//! server's to fill and is not read. `resourceAttributes.fieldSelector` and `labelSelector`
//! (fields 8 and 9) are not modelled: the server's authorizers do not decide on selectors.

use serde_json::{Map, Value, json};

use super::json::Fields;
use super::meta_v1::ObjectMeta;

/// `authorization/v1.SelfSubjectAccessReview`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectAccessReview {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<SubjectAccessReviewSpec>,
}

impl SelfSubjectAccessReview {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.put("spec", self.spec.as_ref().map_or_else(|| json!({}), SubjectAccessReviewSpec::to_json));
        f.0
    }
}

/// `authorization/v1.SubjectAccessReview`; a SelfSubjectAccessReview's spec is its first two
/// fields, and a LocalSubjectAccessReview is the same message.
pub(super) type SubjectAccessReview = SelfSubjectAccessReview;

/// `authorization/v1.SubjectAccessReviewSpec` (and `SelfSubjectAccessReviewSpec`, its first two
/// fields).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SubjectAccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    pub(super) resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    pub(super) non_resource_attributes: Option<NonResourceAttributes>,
    #[prost(string, optional, tag = "3")]
    pub(super) user: Option<String>,
    #[prost(string, repeated, tag = "4")]
    pub(super) groups: Vec<String>,
    #[prost(btree_map = "string, message", tag = "5")]
    pub(super) extra: std::collections::BTreeMap<String, ExtraValue>,
    #[prost(string, optional, tag = "6")]
    pub(super) uid: Option<String>,
}

impl SubjectAccessReviewSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.message("resourceAttributes", &self.resource_attributes, ResourceAttributes::to_json);
        f.message("nonResourceAttributes", &self.non_resource_attributes, NonResourceAttributes::to_json);
        f.string("user", &self.user);
        f.strings("groups", &self.groups);
        f.map("extra", &self.extra, |v| json!(v.items));
        f.string("uid", &self.uid);
        f.into_json()
    }
}

/// `authorization/v1.ExtraValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ExtraValue {
    #[prost(string, repeated, tag = "1")]
    pub(super) items: Vec<String>,
}

/// `authorization/v1.ResourceAttributes`: every field `omitempty`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ResourceAttributes {
    #[prost(string, optional, tag = "1")]
    pub(super) namespace: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) verb: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) group: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) version: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub(super) resource: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub(super) subresource: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub(super) name: Option<String>,
}

impl ResourceAttributes {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("namespace", &self.namespace);
        f.string("verb", &self.verb);
        f.string("group", &self.group);
        f.string("version", &self.version);
        f.string("resource", &self.resource);
        f.string("subresource", &self.subresource);
        f.string("name", &self.name);
        f.into_json()
    }
}

/// `authorization/v1.NonResourceAttributes`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct NonResourceAttributes {
    #[prost(string, optional, tag = "1")]
    pub(super) path: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) verb: Option<String>,
}

impl NonResourceAttributes {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("path", &self.path);
        f.string("verb", &self.verb);
        f.into_json()
    }
}

/// `authorization/v1.SelfSubjectRulesReview`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectRulesReview {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<SelfSubjectRulesReviewSpec>,
}

impl SelfSubjectRulesReview {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        let mut spec = Fields::default();
        if let Some(s) = &self.spec {
            spec.string("namespace", &s.namespace);
        }
        f.put("spec", spec.into_json());
        f.0
    }
}

/// `authorization/v1.SelfSubjectRulesReviewSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectRulesReviewSpec {
    #[prost(string, optional, tag = "1")]
    pub(super) namespace: Option<String>,
}
