//! Mirrors k8s.io/api/authentication/v1/generated.proto: the SelfSubjectReview that `kubectl auth
//! whoami` sends (kubectl 1.32 and later; earlier ones send JSON) — metadata and nothing else,
//! since the question is the request itself — the TokenRequest of `kubectl create token`, and
//! the TokenReview a typed client sends. Their status is the server's to fill.

use serde_json::{Map, Value};

use super::json::Fields;
use super::meta_v1::ObjectMeta;

/// `authentication/v1.SelfSubjectReview` (also under `v1beta1`, field for field).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct SelfSubjectReview {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
}

impl SelfSubjectReview {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        Fields::with_metadata(&self.metadata).0
    }
}

/// `authentication/v1.TokenRequest` (`kubectl create token`).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TokenRequest {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<TokenRequestSpec>,
}

impl TokenRequest {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        let mut spec = Fields::default();
        if let Some(s) = &self.spec {
            spec.nullable_strings("audiences", &s.audiences);
            spec.ptr_int("expirationSeconds", s.expiration_seconds);
            spec.message("boundObjectRef", &s.bound_object_ref, BoundObjectReference::to_json);
        }
        f.put("spec", spec.into_json());
        f.0
    }
}

/// `authentication/v1.TokenRequestSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TokenRequestSpec {
    #[prost(string, repeated, tag = "1")]
    pub(super) audiences: Vec<String>,
    #[prost(message, optional, tag = "3")]
    pub(super) bound_object_ref: Option<BoundObjectReference>,
    #[prost(int64, optional, tag = "4")]
    pub(super) expiration_seconds: Option<i64>,
}

/// `authentication/v1.BoundObjectReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct BoundObjectReference {
    #[prost(string, optional, tag = "1")]
    pub(super) kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) api_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub(super) uid: Option<String>,
}

impl BoundObjectReference {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.string("kind", &self.kind);
        f.string("apiVersion", &self.api_version);
        f.string("name", &self.name);
        f.string("uid", &self.uid);
        f.into_json()
    }
}

/// `authentication/v1.TokenReview`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TokenReview {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<TokenReviewSpec>,
}

impl TokenReview {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        let mut spec = Fields::default();
        if let Some(s) = &self.spec {
            spec.string("token", &s.token);
            spec.strings("audiences", &s.audiences);
        }
        f.put("spec", spec.into_json());
        f.0
    }
}

/// `authentication/v1.TokenReviewSpec`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct TokenReviewSpec {
    #[prost(string, optional, tag = "1")]
    pub(super) token: Option<String>,
    #[prost(string, repeated, tag = "2")]
    pub(super) audiences: Vec<String>,
}
