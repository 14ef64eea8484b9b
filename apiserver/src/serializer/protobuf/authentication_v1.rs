//! Mirrors k8s.io/api/authentication/v1/generated.proto: the SelfSubjectReview that `kubectl auth
//! whoami` sends (kubectl 1.32 and later; earlier ones send JSON) — metadata and nothing else,
//! since the question is the request itself. Its status is the server's to fill.

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
