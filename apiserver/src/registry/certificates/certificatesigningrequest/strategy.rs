//! Mirrors pkg/registry/certificates/certificates/strategy.go (and storage/storage.go, which
//! serves `status` and `approval`): three update paths over one object, each writing its part.
//!
//! 1. Create (`csrStrategy.PrepareForCreate`): the requestor is who sends the request —
//!    `spec.username`, `uid`, `groups` and `extra` are the request's user, whatever the client
//!    wrote — and the status starts empty: no one creates a pre-approved request.
//! 2. Update of the object (`csrStrategy.PrepareForUpdate`): spec and status stay the stored
//!    ones; only metadata changes.
//! 3. `/status` (`csrStatusStrategy`): the spec stays; the signer writes the certificate and its
//!    own conditions (Failed), while Approved and Denied stay as they were (the validation
//!    refuses adding or removing them here).
//! 4. `/approval` (`csrApprovalStrategy`): only the conditions change (Approved, Denied).
//!
//! On the last two, a condition without `lastUpdateTime` gets now, and one without
//! `lastTransitionTime` keeps the one of the stored condition of the same type and status, or
//! gets now (`populateConditionTimestamps`). Validation is [`api::certificates::validation`],
//! the path's own. Who may approve or sign is admission's to decide
//! ([`crate::admission::certificates`]).

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde_json::{Value, json};

use super::printer::CertificateSigningRequestPrinter;
use crate::authentication::user::UserInfo;
use crate::error::Cause;
use crate::registry::generic::store::now_rfc3339;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, keep_status, meta_field};
use crate::registry::generic::typed::{Object, Typed};
use api::certificates::helpers::{CERTIFICATE_APPROVED, CERTIFICATE_DENIED};
use api::certificates::validation as v;

pub const GROUP: &str = "certificates.k8s.io";

pub static CERTIFICATESIGNINGREQUESTS: ResourceInfo = ResourceInfo {
    group: GROUP,
    version: "v1",
    kind: "CertificateSigningRequest",
    plural: "certificatesigningrequests",
    singular: "certificatesigningrequest",
    namespaced: false,
    short_names: &["csr"],
    storage_name: "certificatesigningrequests",
    subresources: &[
        Subresource { name: "approval", group: GROUP, version: "v1", kind: "CertificateSigningRequest", verbs: &["get", "patch", "update"] },
        Subresource { name: "status", group: GROUP, version: "v1", kind: "CertificateSigningRequest", verbs: &["get", "patch", "update"] },
    ],
    categories: &[],
    codec: &Typed::<CertificateSigningRequest>::NEW,
    printer: &CertificateSigningRequestPrinter,
};

pub struct CertificateSigningRequestStrategy;

impl Strategy for CertificateSigningRequestStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &CERTIFICATESIGNINGREQUESTS
    }

    /// Step 1.
    fn prepare_for_create_by(&self, user: Option<&UserInfo>, obj: &mut Object) {
        let csr = obj.json_mut();
        if let Some(spec) = csr.get_mut("spec").and_then(Value::as_object_mut) {
            for field in ["username", "uid", "groups", "extra"] {
                spec.remove(field);
            }
            if let Some(user) = user {
                spec.insert("username".into(), json!(user.name));
                if !user.uid.is_empty() {
                    spec.insert("uid".into(), json!(user.uid));
                }
                if !user.groups.is_empty() {
                    spec.insert("groups".into(), json!(user.groups));
                }
                if !user.extra.is_empty() {
                    spec.insert("extra".into(), json!(user.extra));
                }
            }
        }
        csr["status"] = json!({});
    }

    /// Step 2.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_or_remove(new, "spec", old.get("spec"));
        keep_status(new, old);
    }

    /// Step 3: the old object, with the new status (metadata as the generic status update
    /// keeps it), Approved and Denied preserved.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let mut merged = old.clone();
        set_or_remove(&mut merged, "status", new.get("status"));
        if let Some(rv) = new.pointer("/metadata/resourceVersion").cloned() {
            merged["metadata"]["resourceVersion"] = rv;
        }
        preserve_condition_instances(&mut merged, old, CERTIFICATE_APPROVED);
        preserve_condition_instances(&mut merged, old, CERTIFICATE_DENIED);
        populate_condition_timestamps(&mut merged, old, &now_rfc3339());
        *new = merged;
    }

    /// Step 4.
    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        let mut merged = old.clone();
        if subresource == "approval" {
            let conditions = new.pointer("/status/conditions").cloned();
            if !merged.get("status").is_some_and(Value::is_object) {
                merged["status"] = json!({});
            }
            set_or_remove(&mut merged["status"], "conditions", conditions.as_ref());
            populate_condition_timestamps(&mut merged, old, &now_rfc3339());
        }
        if let Some(rv) = new.pointer("/metadata/resourceVersion").cloned() {
            merged["metadata"]["resourceVersion"] = rv;
        }
        *new = merged;
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(v::validate_certificate_signing_request_create(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes(v::validate_certificate_signing_request_update(new, old))
    }

    fn validate_subresource_update(&self, subresource: &str, new: &Value, old: &Value) -> Vec<Cause> {
        causes(match subresource {
            "status" => v::validate_certificate_signing_request_status_update(new, old),
            "approval" => v::validate_certificate_signing_request_approval_update(new, old),
            _ => v::validate_certificate_signing_request_update(new, old),
        })
    }

    /// `SelectableFields`: a signer's controller lists only its own requests.
    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "spec.signerName" => Some(obj.pointer("/spec/signerName").and_then(Value::as_str).unwrap_or("").to_string()),
            f => meta_field(obj, f),
        }
    }

    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "spec.signerName"]
    }
}

fn set_or_remove(obj: &mut Value, key: &str, v: Option<&Value>) {
    if let Some(map) = obj.as_object_mut() {
        match v {
            Some(v) => map.insert(key.into(), v.clone()),
            None => map.remove(key),
        };
    }
}

fn condition_type(c: &Value) -> &str {
    c.get("type").and_then(Value::as_str).unwrap_or("")
}

/// preserveConditionInstances: when `new` has as many conditions of type `t` as `old`, they are
/// the old ones (a signer cannot rewrite an approval); a different count is validation's to
/// refuse.
fn preserve_condition_instances(new: &mut Value, old: &Value, t: &str) {
    let old_instances: Vec<Value> = api::certificates::helpers::find_conditions(old, t).into_iter().cloned().collect();
    let Some(conditions) = new.pointer_mut("/status/conditions").and_then(Value::as_array_mut) else { return };
    let indices: Vec<usize> = conditions.iter().enumerate().filter(|(_, c)| condition_type(c) == t).map(|(i, _)| i).collect();
    if indices.len() != old_instances.len() {
        return;
    }
    for (i, old_condition) in indices.into_iter().zip(old_instances) {
        conditions[i] = old_condition;
    }
}

/// populateConditionTimestamps.
fn populate_condition_timestamps(new: &mut Value, old: &Value, now: &str) {
    let old_conditions = api::certificates::helpers::conditions(old).to_vec();
    let Some(conditions) = new.pointer_mut("/status/conditions").and_then(Value::as_array_mut) else { return };
    let is_set = |c: &Value, f: &str| c.get(f).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
    for c in conditions.iter_mut().filter(|c| c.is_object()) {
        if !is_set(c, "lastUpdateTime") {
            c["lastUpdateTime"] = json!(now);
        }
        if !is_set(c, "lastTransitionTime") {
            let status = c.get("status").cloned();
            let kept = old_conditions
                .iter()
                .find(|o| condition_type(o) == condition_type(c) && o.get("status") == status.as_ref() && is_set(o, "lastTransitionTime"))
                .and_then(|o| o.get("lastTransitionTime").cloned());
            c["lastTransitionTime"] = kept.unwrap_or_else(|| json!(now));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn stored() -> Value {
        json!({"metadata": {"name": "c1", "resourceVersion": "5"},
               "spec": {"request": "cmVx", "signerName": "example.com/s", "usages": ["client auth"], "username": "jane"},
               "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "R", "lastUpdateTime": "2026-01-01T00:00:00Z",
                                          "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    }

    #[test]
    fn a_create_records_its_requestor_and_starts_with_no_status() {
        let user = UserInfo {
            name: "bob".into(),
            uid: "u-1".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
            extra: BTreeMap::from([("scopes".to_string(), vec!["a".to_string()])]),
        };
        let sent = json!({"metadata": {"name": "c1"}, "spec": {"username": "admin", "groups": ["system:masters"], "signerName": "example.com/s"},
                          "status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let mut obj = Object::new(sent.clone());
        CertificateSigningRequestStrategy.prepare_for_create_by(Some(&user), &mut obj);
        let csr = obj.into_json();
        assert_eq!(
            csr["spec"],
            json!({"username": "bob", "uid": "u-1", "groups": ["dev", "system:authenticated"], "extra": {"scopes": ["a"]}, "signerName": "example.com/s"})
        );
        assert_eq!(csr["status"], json!({}));
        let mut anonymous = Object::new(sent);
        CertificateSigningRequestStrategy.prepare_for_create_by(Some(&UserInfo { name: "x".into(), ..Default::default() }), &mut anonymous);
        assert_eq!(anonymous.into_json()["spec"], json!({"username": "x", "signerName": "example.com/s"}), "empty fields left out");
    }

    #[test]
    fn an_update_of_the_object_changes_only_its_metadata() {
        let mut new = stored();
        new["metadata"]["labels"] = json!({"a": "b"});
        new["spec"]["username"] = json!("admin");
        new["status"] = json!({"certificate": "Y2VydA=="});
        CertificateSigningRequestStrategy.prepare_for_update(&mut new, &stored());
        assert_eq!((&new["spec"], &new["status"]), (&stored()["spec"], &stored()["status"]));
        assert_eq!(new["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn status_writes_the_certificate_and_keeps_the_approval() {
        let mut new = stored();
        new["spec"]["signerName"] = json!("other.io/s");
        new["status"] = json!({"certificate": "Y2VydA==", "conditions": [
            {"type": "Approved", "status": "True", "reason": "Rewritten"}, {"type": "Failed", "status": "True"}]});
        CertificateSigningRequestStrategy.prepare_for_status_update(&mut new, &stored());
        assert_eq!(new["spec"], stored()["spec"]);
        assert_eq!(new["status"]["certificate"], "Y2VydA==");
        assert_eq!(new["status"]["conditions"][0], stored()["status"]["conditions"][0], "Approved kept as it was");
        let failed = &new["status"]["conditions"][1];
        assert!(failed["lastUpdateTime"].is_string() && failed["lastTransitionTime"] == failed["lastUpdateTime"], "{failed}");
    }

    #[test]
    fn approval_changes_only_the_conditions() {
        let old = json!({"metadata": {"name": "c1"}, "spec": {"username": "jane"}, "status": {}});
        let mut new = json!({"metadata": {"name": "c1", "resourceVersion": "7"}, "spec": {"username": "admin"},
                             "status": {"certificate": "Y2VydA==", "conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]}});
        CertificateSigningRequestStrategy.prepare_for_subresource_update("approval", &mut new, &old);
        assert_eq!(new["spec"], json!({"username": "jane"}));
        assert!(new["status"].get("certificate").is_none());
        assert_eq!(new["status"]["conditions"][0]["reason"], "KubectlApprove");
        assert!(new["status"]["conditions"][0]["lastUpdateTime"].is_string());
        assert_eq!(new["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn a_transition_time_is_kept_for_the_same_type_and_status() {
        let mut new = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}, {"type": "Custom", "status": "False"}]}});
        populate_condition_timestamps(&mut new, &stored(), "2026-02-02T00:00:00Z");
        assert_eq!(new["status"]["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(new["status"]["conditions"][0]["lastUpdateTime"], "2026-02-02T00:00:00Z");
        assert_eq!(new["status"]["conditions"][1]["lastTransitionTime"], "2026-02-02T00:00:00Z");
    }
}
