//! Mirrors pkg/serviceaccount/claims.go: the claims of a service account token — the standard
//! ones (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti`) and Kubernetes' private ones under
//! `kubernetes.io` (the namespace, the account's name and uid, the pod or secret it is bound to)
//! — and their validation when the token comes back: not expired (60 s of leeway), not for
//! another audience, its account still the one it was issued for, its pod or secret still there
//! and not deleted.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::tokengetter::ServiceAccountTokenGetter;
use super::{make_group_names, make_username};
use crate::authentication::user::UserInfo;

/// How far clocks may disagree (go-jose's `DefaultLeeway`).
const LEEWAY_SECONDS: i64 = 60;

pub const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
pub const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// What a token is bound to: a Pod or a Secret of the account's namespace (`kind`, `name`,
/// `uid`), so that it dies with it.
pub struct Bound<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// The claims of a token for `service_account` (the object), valid for `audiences` from `now`
/// for `expiration_seconds` (`Claims`).
pub fn claims(service_account: &Value, audiences: &[String], now: i64, expiration_seconds: i64, bound: Option<Bound<'_>>) -> Value {
    let s = |p: &str| service_account.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    let (namespace, name) = (s("/metadata/namespace"), s("/metadata/name"));
    let mut private = json!({"namespace": namespace, "serviceaccount": {"name": name, "uid": s("/metadata/uid")}});
    if let Some(b) = bound {
        private[b.kind.to_ascii_lowercase()] = json!({"name": b.name, "uid": b.uid});
    }
    json!({
        "aud": audiences,
        "exp": now + expiration_seconds,
        "iat": now,
        "nbf": now,
        "jti": uuid::Uuid::new_v4().to_string(),
        "sub": make_username(&namespace, &name),
        "kubernetes.io": private,
    })
}

/// The user a token's `claims` authenticate at `now`, if they still hold (`validator.Validate`
/// and the audience check of jwt.go); else why not.
pub fn validate(claims: &Value, getter: &dyn ServiceAccountTokenGetter, audiences: &[String], now: i64) -> Result<UserInfo, String> {
    let token_audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !token_audiences.iter().any(|a| audiences.iter().any(|w| w == a)) {
        return Err(format!("token audiences {token_audiences:?} is invalid for the target audiences {audiences:?}"));
    }
    let time = |k: &str| claims.get(k).and_then(Value::as_i64);
    if time("exp").is_some_and(|exp| now > exp + LEEWAY_SECONDS) {
        return Err("service account token has expired".into());
    }
    if time("nbf").is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
        return Err("service account token is not valid yet".into());
    }
    if time("iat").is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
        return Err("service account token is issued in the future".into());
    }
    let private = claims.get("kubernetes.io").ok_or("service account token claims are missing kubernetes.io")?;
    let s = |p: &str| private.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (namespace, name, uid) = (s("/namespace"), s("/serviceaccount/name"), s("/serviceaccount/uid"));
    if namespace.is_empty() || name.is_empty() {
        return Err("service account token claims did not include a namespace and a service account".into());
    }
    let invalidated = || "service account token has been invalidated".to_string();
    let account = getter.service_account(namespace, name).ok_or_else(invalidated)?;
    if account.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
        return Err(invalidated());
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for kind in ["pod", "secret"] {
        let Some(bound) = private.get(kind) else { continue };
        let (bound_name, bound_uid) = (bound.get("name").and_then(Value::as_str).unwrap_or(""), bound.get("uid").and_then(Value::as_str).unwrap_or(""));
        let object = if kind == "pod" { getter.pod(namespace, bound_name) } else { getter.secret(namespace, bound_name) };
        let object = object.ok_or_else(invalidated)?;
        if object.pointer("/metadata/uid").and_then(Value::as_str) != Some(bound_uid) {
            return Err(invalidated());
        }
        let deleted_at = object.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        if deleted_at.is_some_and(|t| t.timestamp() < now - LEEWAY_SECONDS) {
            return Err(invalidated());
        }
        if kind == "pod" {
            extra.insert(POD_NAME_KEY.into(), vec![bound_name.into()]);
            extra.insert(POD_UID_KEY.into(), vec![bound_uid.into()]);
        }
    }
    if let Some(jti) = claims.get("jti").and_then(Value::as_str).filter(|j| !j.is_empty()) {
        extra.insert(CREDENTIAL_ID_KEY.into(), vec![format!("JTI={jti}")]);
    }
    Ok(UserInfo { name: make_username(namespace, name), uid: uid.into(), groups: make_group_names(namespace), extra })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    struct Objects(Vec<Value>);

    impl Objects {
        fn find(&self, kind: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
            self.0.iter().find(|o| o["kind"] == kind && o["metadata"]["namespace"] == namespace && o["metadata"]["name"] == name).map(|o| Arc::new(o.clone()))
        }
    }

    impl ServiceAccountTokenGetter for Objects {
        fn service_account(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
            self.find("ServiceAccount", namespace, name)
        }
        fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
            self.find("Pod", namespace, name)
        }
        fn secret(&self, namespace: &str, name: &str) -> Option<Arc<Value>> {
            self.find("Secret", namespace, name)
        }
    }

    fn object(kind: &str, name: &str, uid: &str) -> Value {
        json!({"kind": kind, "metadata": {"namespace": "team", "name": name, "uid": uid}})
    }

    #[test]
    fn a_token_holds_while_its_account_and_pod_do() {
        let sa = object("ServiceAccount", "reader", "sa-1");
        let pod = object("Pod", "web", "pod-1");
        let auds = vec!["https://kubernetes.default.svc".to_string()];
        let c = claims(&sa, &auds, 1000, 3600, Some(Bound { kind: "Pod", name: "web", uid: "pod-1" }));
        assert_eq!(c["sub"], "system:serviceaccount:team:reader");
        assert_eq!(c["kubernetes.io"]["pod"], json!({"name": "web", "uid": "pod-1"}));

        let live = Objects(vec![sa.clone(), pod.clone()]);
        let user = validate(&c, &live, &auds, 2000).expect("valid");
        assert_eq!(user.name, "system:serviceaccount:team:reader");
        assert_eq!(user.uid, "sa-1");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:team"]);
        assert_eq!(user.extra[POD_NAME_KEY], ["web"]);
        assert!(user.extra[CREDENTIAL_ID_KEY][0].starts_with("JTI="));

        assert_eq!(validate(&c, &live, &auds, 1000 + 3600 + 61).unwrap_err(), "service account token has expired");
        assert!(validate(&c, &live, &auds, 1000 + 3600 + 59).is_ok(), "within the leeway");
        assert!(validate(&c, &live, &["other".to_string()], 2000).unwrap_err().starts_with("token audiences"));
        let invalidated = "service account token has been invalidated";
        assert_eq!(validate(&c, &Objects(vec![sa.clone()]), &auds, 2000).unwrap_err(), invalidated, "the pod is gone");
        assert_eq!(validate(&c, &Objects(vec![sa.clone(), object("Pod", "web", "pod-2")]), &auds, 2000).unwrap_err(), invalidated, "another pod of that name");
        assert_eq!(validate(&c, &Objects(vec![object("ServiceAccount", "reader", "sa-2"), pod.clone()]), &auds, 2000).unwrap_err(), invalidated, "the account was recreated");
        let mut deleting = pod.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("1970-01-01T00:00:30Z");
        assert_eq!(validate(&c, &Objects(vec![sa, deleting]), &auds, 2000).unwrap_err(), invalidated);
    }
}
