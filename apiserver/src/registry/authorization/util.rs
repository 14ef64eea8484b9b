//! Mirrors pkg/registry/authorization/util/helpers.go: the attributes a review's spec asks about,
//! as the authorizers see a request's ([`Attributes`]), and the status a decision becomes.

use serde_json::{Map, Value, json};

use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::{Attributes, Authorizer, Decision};

/// The user a SubjectAccessReview asks about (`spec.user`, `groups`, `uid`, `extra`), taken as
/// given: no `system:authenticated` is added.
pub fn user_from_spec(spec: &Value) -> UserInfo {
    let s = |k: &str| spec.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let strings = |v: &Value| v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect()).unwrap_or_default();
    let extra = spec.get("extra").and_then(Value::as_object).map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect()).unwrap_or_default();
    UserInfo { name: s("user"), uid: s("uid"), groups: spec.get("groups").map(strings).unwrap_or_default(), extra }
}

/// Asks `authorizer` about the spec's resource or path for `user` (`ResourceAttributesFrom`,
/// `NonResourceAttributesFrom`; an empty version matches every version) and gives the review's
/// status: `allowed`, and `denied`, `reason` only when set (Go's omitempty).
pub fn decide(authorizer: &dyn Authorizer, user: &UserInfo, spec: &Value) -> Value {
    let s = |obj: &'_ Value, k: &str| -> String { obj.get(k).and_then(Value::as_str).unwrap_or("").to_string() };
    let (decision, reason) = match spec.get("resourceAttributes").filter(|v| v.is_object()) {
        Some(r) => {
            let version = s(r, "version");
            let (verb, namespace, group, resource, subresource, name) = (s(r, "verb"), s(r, "namespace"), s(r, "group"), s(r, "resource"), s(r, "subresource"), s(r, "name"));
            let a = Attributes {
                user,
                verb: &verb,
                resource_request: true,
                path: "",
                namespace: &namespace,
                api_group: &group,
                api_version: if version.is_empty() { "*" } else { &version },
                resource: &resource,
                subresource: &subresource,
                name: &name,
            };
            authorizer.authorize(&a)
        }
        None => {
            let n = spec.get("nonResourceAttributes").unwrap_or(&Value::Null);
            let (path, verb) = (s(n, "path"), s(n, "verb"));
            authorizer.authorize(&Attributes { user, verb: &verb, path: &path, resource_request: false, ..Default::default() })
        }
    };
    let mut status = Map::new();
    status.insert("allowed".into(), json!(decision == Decision::Allow));
    if decision == Decision::Deny {
        status.insert("denied".into(), json!(true));
    }
    if !reason.is_empty() {
        status.insert("reason".into(), json!(reason));
    }
    Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authorization::authorizerfactory::{AlwaysDeny, PrivilegedGroups};

    #[test]
    fn the_spec_is_asked_as_a_request_would_be() {
        let masters = PrivilegedGroups(vec!["system:masters".into()]);
        let spec = json!({"user": "jane", "groups": ["system:masters"], "extra": {"scopes": ["a"]}, "resourceAttributes": {"verb": "delete", "resource": "pods"}});
        let user = user_from_spec(&spec);
        assert_eq!((user.name.as_str(), user.groups.as_slice(), user.extra["scopes"].as_slice()), ("jane", &["system:masters".to_string()][..], &["a".to_string()][..]));
        assert_eq!(decide(&masters, &user, &spec), json!({"allowed": true, "reason": "allowed as a member of system:masters"}));
        let nobody = UserInfo::default();
        let path = json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}});
        assert_eq!(decide(&masters, &nobody, &path), json!({"allowed": false}));
        assert_eq!(decide(&AlwaysDeny, &nobody, &path), json!({"allowed": false, "reason": "Everything is forbidden."}));
    }
}
