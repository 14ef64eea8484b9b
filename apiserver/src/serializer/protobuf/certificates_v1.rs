//! Mirrors k8s.io/api/certificates/v1/generated.proto: the CertificateSigningRequest that
//! `kubectl certificate approve` and `deny` send to `/approval` (kubectl 1.32 and later; 1.27 to
//! 1.31 send it as JSON), field numbers as in that file. Modelled whole, as the RBAC kinds are:
//! what the wire holds beyond it is only server-owned metadata (`managedFields`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::json::{Fields, base64};
use super::meta_v1::{ObjectMeta, Time};

/// `certificates/v1.CertificateSigningRequest`: `spec` is written always, `status` when present.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CertificateSigningRequest {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<CertificateSigningRequestSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<CertificateSigningRequestStatus>,
}

impl CertificateSigningRequest {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.put("spec", self.spec.as_ref().map_or_else(|| json!({}), CertificateSigningRequestSpec::to_json));
        f.message("status", &self.status, CertificateSigningRequestStatus::to_json);
        f.0
    }
}

/// `certificates/v1.CertificateSigningRequestSpec`: `request` and `signerName` have no
/// `omitempty` in Go; the rest do.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CertificateSigningRequestSpec {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub(super) request: Option<Vec<u8>>,
    #[prost(string, optional, tag = "2")]
    pub(super) username: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) uid: Option<String>,
    #[prost(string, repeated, tag = "4")]
    pub(super) groups: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    pub(super) usages: Vec<String>,
    #[prost(btree_map = "string, message", tag = "6")]
    pub(super) extra: BTreeMap<String, ExtraValue>,
    #[prost(string, optional, tag = "7")]
    pub(super) signer_name: Option<String>,
    #[prost(int32, optional, tag = "8")]
    pub(super) expiration_seconds: Option<i32>,
}

impl CertificateSigningRequestSpec {
    fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.put("request", Value::String(base64(self.request.as_deref().unwrap_or_default())));
        f.required_string("signerName", &self.signer_name);
        f.ptr_int("expirationSeconds", self.expiration_seconds.map(i64::from));
        f.strings("usages", &self.usages);
        f.string("username", &self.username);
        f.string("uid", &self.uid);
        f.strings("groups", &self.groups);
        f.map("extra", &self.extra, |v| json!(v.items));
        f.into_json()
    }
}

/// `certificates/v1.ExtraValue`: a list of strings.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ExtraValue {
    #[prost(string, repeated, tag = "1")]
    pub(super) items: Vec<String>,
}

/// `certificates/v1.CertificateSigningRequestStatus`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CertificateSigningRequestStatus {
    #[prost(message, repeated, tag = "1")]
    pub(super) conditions: Vec<CertificateSigningRequestCondition>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub(super) certificate: Option<Vec<u8>>,
}

impl CertificateSigningRequestStatus {
    fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.list("conditions", &self.conditions, CertificateSigningRequestCondition::to_json);
        if let Some(certificate) = self.certificate.as_deref().filter(|c| !c.is_empty()) {
            f.put("certificate", Value::String(base64(certificate)));
        }
        f.into_json()
    }
}

/// `certificates/v1.CertificateSigningRequestCondition`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct CertificateSigningRequestCondition {
    #[prost(string, optional, tag = "1")]
    pub(super) type_: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub(super) reason: Option<String>,
    #[prost(string, optional, tag = "3")]
    pub(super) message: Option<String>,
    #[prost(message, optional, tag = "4")]
    pub(super) last_update_time: Option<Time>,
    #[prost(message, optional, tag = "5")]
    pub(super) last_transition_time: Option<Time>,
    #[prost(string, optional, tag = "6")]
    pub(super) status: Option<String>,
}

impl CertificateSigningRequestCondition {
    fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.required_string("type", &self.type_);
        f.required_string("status", &self.status);
        f.string("reason", &self.reason);
        f.string("message", &self.message);
        f.time("lastUpdateTime", &self.last_update_time);
        f.time("lastTransitionTime", &self.last_transition_time);
        f.into_json()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn an_approval_as_kubectl_sends_it() {
        let csr = CertificateSigningRequest {
            metadata: None,
            spec: Some(CertificateSigningRequestSpec {
                request: Some(b"pem".to_vec()),
                signer_name: Some("example.com/s".into()),
                usages: vec!["client auth".into()],
                username: Some("jane".into()),
                extra: BTreeMap::from([("scopes".to_string(), ExtraValue { items: vec!["a".into()] })]),
                ..Default::default()
            }),
            status: Some(CertificateSigningRequestStatus {
                conditions: vec![CertificateSigningRequestCondition {
                    type_: Some("Approved".into()),
                    status: Some("True".into()),
                    reason: Some("KubectlApprove".into()),
                    ..Default::default()
                }],
                certificate: None,
            }),
        };
        let decoded = CertificateSigningRequest::decode(csr.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(
            Value::Object(decoded.to_json()),
            json!({"metadata": {}, "spec": {"request": "cGVt", "signerName": "example.com/s", "usages": ["client auth"], "username": "jane",
                   "extra": {"scopes": ["a"]}},
                   "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]}})
        );
    }
}
