//! Mirrors plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go, with the token format and
//! Secret keys of k8s.io/cluster-bootstrap (token/api, token/util, util/secrets): `--enable-bootstrap-token-auth`,
//! the short-lived tokens `kubeadm token create` makes for joining nodes.
//!
//! A bootstrap token is `<token-id>.<token-secret>` (`[a-z0-9]{6}.[a-z0-9]{16}`), kept as the
//! Secret `bootstrap-token-<token-id>` of type `bootstrap.kubernetes.io/token` in `kube-system`,
//! with the data keys `token-id`, `token-secret`, `expiration` (RFC 3339), `usage-bootstrap-authentication`
//! and `auth-extra-groups`. A good one is the user `system:bootstrap:<token-id>` in `system:bootstrappers`
//! and its extra groups.
//!
//! As Kubernetes' does, the authenticator never fails a request itself: a token it cannot match
//! to a good Secret (none, being deleted, the wrong secret, expired, not for authentication, bad
//! extra groups) is logged and not recognized, and the union then answers 401.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use super::TokenAuthenticator;
use crate::authentication::user::UserInfo;

/// The namespace bootstrap token Secrets live in (`metav1.NamespaceSystem`).
pub const NAMESPACE: &str = "kube-system";
/// `BootstrapTokenSecretPrefix`: a token's Secret is this and its id.
pub const SECRET_PREFIX: &str = "bootstrap-token-";
/// `SecretTypeBootstrapToken`.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// `BootstrapTokenIDKey`.
pub const TOKEN_ID_KEY: &str = "token-id";
/// `BootstrapTokenSecretKey`.
pub const TOKEN_SECRET_KEY: &str = "token-secret";
/// `BootstrapTokenExpirationKey`: RFC 3339; past it the token is dead (a value that does not
/// parse counts as expired).
pub const EXPIRATION_KEY: &str = "expiration";
/// `BootstrapTokenUsageAuthentication`: must be "true" for the token to authenticate.
pub const USAGE_AUTHENTICATION_KEY: &str = "usage-bootstrap-authentication";
/// `BootstrapTokenExtraGroupsKey`: comma-separated groups, each `system:bootstrappers:…`.
pub const EXTRA_GROUPS_KEY: &str = "auth-extra-groups";
/// `BootstrapUserPrefix`.
pub const USER_PREFIX: &str = "system:bootstrap:";
/// `BootstrapDefaultGroup`: every bootstrap token's user is in it.
pub const DEFAULT_GROUP: &str = "system:bootstrappers";

/// The Secrets of `kube-system` by name, as the server's informer (its watch cache) holds them
/// (`corev1listers.SecretNamespaceLister`).
pub trait SecretNamespaceLister: Send + Sync {
    fn get(&self, name: &str) -> Option<Arc<Value>>;
}

/// `TokenAuthenticator` of bootstrap.go.
pub struct BootstrapTokenAuthenticator {
    pub lister: Box<dyn SecretNamespaceLister>,
}

impl TokenAuthenticator for BootstrapTokenAuthenticator {
    fn authenticate_token(&self, token: &str, _audiences: &[String]) -> Result<Option<UserInfo>, String> {
        Ok(self.authenticate_at(token, chrono::Utc::now()))
    }
}

impl BootstrapTokenAuthenticator {
    /// bootstrap.go's `AuthenticateToken`, at a given time.
    fn authenticate_at(&self, token: &str, now: chrono::DateTime<chrono::Utc>) -> Option<UserInfo> {
        // Step 1: a token not of the bootstrap form is someone else's.
        let (token_id, token_secret) = parse_token(token)?;
        // Step 2: its Secret.
        let secret_name = format!("{SECRET_PREFIX}{token_id}");
        let Some(secret) = self.lister.get(&secret_name) else {
            tracing::debug!(target: "apiserver::authentication", secret = %secret_name, "No secret of name to match bootstrap bearer token");
            return None;
        };
        let refuse = |why: String| {
            tracing::debug!(target: "apiserver::authentication", secret = %secret_name, namespace = NAMESPACE, "Bootstrap secret {why}");
            None
        };
        if !secret["metadata"]["deletionTimestamp"].is_null() {
            return refuse("is deleted and awaiting removal".into());
        }
        if secret["type"].as_str() != Some(SECRET_TYPE) || !secret["data"].is_object() {
            return refuse(format!("has invalid type, expected {SECRET_TYPE}."));
        }
        // Step 3: the secret half must match, compared in constant time.
        if !constant_time_eq(get_data(&secret, TOKEN_SECRET_KEY).as_bytes(), token_secret.as_bytes()) {
            return refuse(format!("has invalid value for key {TOKEN_SECRET_KEY}."));
        }
        let id = get_data(&secret, TOKEN_ID_KEY);
        if id != token_id {
            return refuse(format!("has invalid value for key {TOKEN_ID_KEY}."));
        }
        // Step 4: not expired, and meant for authentication.
        if has_expired(&secret, now) {
            return None;
        }
        if get_data(&secret, USAGE_AUTHENTICATION_KEY) != "true" {
            return refuse(format!("not marked {USAGE_AUTHENTICATION_KEY}=true."));
        }
        // Step 5: the user and its groups.
        let groups = match get_groups(&secret) {
            Ok(groups) => groups,
            Err(e) => return refuse(format!("has invalid value for key {EXTRA_GROUPS_KEY}: {e}.")),
        };
        Some(UserInfo { name: format!("{USER_PREFIX}{id}"), groups, ..Default::default() })
    }
}

/// cluster-bootstrap's `ParseToken`: the id and secret of `[a-z0-9]{6}.[a-z0-9]{16}`.
pub fn parse_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// util/secrets' `GetData`: a data key's value, decoded; empty when missing.
fn get_data(secret: &Value, key: &str) -> String {
    secret["data"][key]
        .as_str()
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_default()
}

/// util/secrets' `HasExpired`: no expiration never expires; one that does not parse has.
fn has_expired(secret: &Value, now: chrono::DateTime<chrono::Utc>) -> bool {
    let expiration = get_data(secret, EXPIRATION_KEY);
    if expiration.is_empty() {
        return false;
    }
    let name = secret["metadata"]["name"].as_str().unwrap_or_default();
    match chrono::DateTime::parse_from_rfc3339(&expiration) {
        Err(e) => {
            tracing::debug!(target: "apiserver::authentication", secret = name, %expiration, error = %e, "Unparseable expiration time in Secret. Treating as expired.");
            true
        }
        Ok(at) if at <= now => {
            tracing::debug!(target: "apiserver::authentication", secret = name, %expiration, "Expired bootstrap token in Secret");
            true
        }
        Ok(_) => false,
    }
}

/// util/secrets' `GetGroups`: `system:bootstrappers` and the valid extra groups, deduplicated
/// and sorted (a Go `sets.String`'s `List`).
fn get_groups(secret: &Value) -> Result<Vec<String>, String> {
    let mut groups = std::collections::BTreeSet::from([DEFAULT_GROUP.to_string()]);
    let extra = get_data(secret, EXTRA_GROUPS_KEY);
    if !extra.is_empty() {
        for group in extra.split(',') {
            validate_bootstrap_group_name(group)?;
            groups.insert(group.to_string());
        }
    }
    Ok(groups.into_iter().collect())
}

/// token/util's `ValidateBootstrapGroupName`: `system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]`.
fn validate_bootstrap_group_name(name: &str) -> Result<(), String> {
    let prefix = format!("{DEFAULT_GROUP}:");
    let ok = name.strip_prefix(&prefix).is_some_and(|rest| {
        let last_ok = rest.bytes().last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let body_ok = rest.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-');
        last_ok && body_ok && rest.len() <= 256
    });
    if ok { Ok(()) } else { Err(format!("bootstrap group {name:?} is invalid (must match {DEFAULT_GROUP}:[a-z0-9:-]{{0,255}}[a-z0-9])")) }
}

/// `subtle.ConstantTimeCompare`: whether two byte strings are equal, in a time that depends only
/// on their lengths (so the token secret cannot be guessed a byte at a time).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    struct FakeLister(HashMap<String, Arc<Value>>);

    impl SecretNamespaceLister for FakeLister {
        fn get(&self, name: &str) -> Option<Arc<Value>> {
            self.0.get(name).cloned()
        }
    }

    fn secret(id: &str, data: &[(&str, &str)]) -> Value {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| (k.to_string(), b64(v).into())).collect();
        serde_json::json!({"metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"}, "type": SECRET_TYPE, "data": data})
    }

    fn authenticator(secrets: Vec<Value>) -> BootstrapTokenAuthenticator {
        let map = secrets.into_iter().map(|s| (s["metadata"]["name"].as_str().expect("a name").to_string(), Arc::new(s))).collect();
        BootstrapTokenAuthenticator { lister: Box::new(FakeLister(map)) }
    }

    #[test]
    fn tokens_are_matched_to_their_secrets() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").expect("a time").with_timezone(&chrono::Utc);
        let good = |id: &str, extra: &[(&str, &str)]| {
            let mut data = vec![(TOKEN_ID_KEY, id), (TOKEN_SECRET_KEY, "0123456789abcdef"), (USAGE_AUTHENTICATION_KEY, "true")];
            data.extend_from_slice(extra);
            secret(id, &data)
        };
        let mut deleted = good("delete", &[]);
        deleted["metadata"]["deletionTimestamp"] = "2025-12-31T00:00:00Z".into();
        let mut opaque = good("opaque", &[]);
        opaque["type"] = "Opaque".into();
        let a = authenticator(vec![
            good("abcdef", &[(EXTRA_GROUPS_KEY, "system:bootstrappers:kubeadm:default-node-token,system:bootstrappers:a")]),
            good("future", &[(EXPIRATION_KEY, "2026-01-01T00:00:01Z")]),
            good("xpired", &[(EXPIRATION_KEY, "2025-12-31T23:59:59Z")]),
            good("badexp", &[(EXPIRATION_KEY, "tomorrow")]),
            secret("nouse1", &[(TOKEN_ID_KEY, "nouse1"), (TOKEN_SECRET_KEY, "0123456789abcdef")]),
            good("badgrp", &[(EXTRA_GROUPS_KEY, "ops")]),
            secret("wrngid", &[(TOKEN_ID_KEY, "other1"), (TOKEN_SECRET_KEY, "0123456789abcdef"), (USAGE_AUTHENTICATION_KEY, "true")]),
            deleted,
            opaque,
        ]);
        let user = a.authenticate_at("abcdef.0123456789abcdef", now).expect("authenticated");
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(user.groups, ["system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:kubeadm:default-node-token"]);
        assert_eq!(a.authenticate_at("future.0123456789abcdef", now).expect("not yet expired").groups, ["system:bootstrappers"]);
        for token in [
            "abcdef.0123456789abcdee", // the wrong secret
            "abcdef.0123456789abcdef0", // not the form
            "ABCDEF.0123456789abcdef",
            "zzzzzz.0123456789abcdef", // no Secret
            "xpired.0123456789abcdef",
            "badexp.0123456789abcdef",
            "nouse1.0123456789abcdef",
            "badgrp.0123456789abcdef",
            "wrngid.0123456789abcdef",
            "delete.0123456789abcdef",
            "opaque.0123456789abcdef",
        ] {
            assert_eq!(a.authenticate_token(token, &[]), Ok(None), "{token}");
            assert!(a.authenticate_at(token, now).is_none(), "{token}");
        }
    }

    #[test]
    fn group_names_are_validated() {
        assert!(validate_bootstrap_group_name("system:bootstrappers:kubeadm:default-node-token").is_ok());
        for bad in ["system:bootstrappers:", "system:bootstrappers:x-", "system:nodes", "system:bootstrappers:A"] {
            assert!(validate_bootstrap_group_name(bad).is_err(), "{bad}");
        }
    }
}
