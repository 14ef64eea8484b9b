//! Mirrors k8s.io/apiserver/pkg/endpoints/filters/authorization.go (WithAuthorization) and the
//! 403 of endpoints/handlers/responsewriters/errors.go: the authorizers
//! (`--authorization-mode`) are asked whether the request's user may do what it asks; if none
//! allows it, a 403 says who was refused what.

use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::{Attributes, Authorizer, Decision};
use crate::error::{Error, Result};
use crate::endpoints::requestinfo::PathInfo;

/// The subresources whose websocket upgrade is a GET but starts something in the pod: kubectl's
/// exec, attach and port-forward. Kubernetes asks for `create` on them as well as `get`
/// (AuthorizePodWebsocketUpgradeCreatePermission), so that a role that may only read pods cannot
/// run commands in them.
const CREATE_ON_UPGRADE: &[&str] = &["exec", "attach", "portforward"];

/// Ok with the reason it was allowed (`kubelab trace` shows it), or the 403.
pub fn authorize(authorizer: &dyn Authorizer, user: &UserInfo, info: &PathInfo) -> Result<String> {
    let a = attributes(user, info);
    let reason = decide(authorizer, &a)?;
    if a.resource_request && a.verb == "get" && a.api_group.is_empty() && a.resource == "pods" && CREATE_ON_UPGRADE.contains(&a.subresource) {
        decide(authorizer, &Attributes { verb: "create", ..a })?;
    }
    Ok(reason)
}

/// The authorizers' attributes of a request.
pub fn attributes<'a>(user: &'a UserInfo, info: &'a PathInfo) -> Attributes<'a> {
    Attributes {
        user,
        verb: &info.verb,
        resource_request: info.resource_request,
        path: &info.path,
        namespace: &info.namespace,
        api_group: &info.api_group,
        api_version: &info.api_version,
        resource: &info.resource,
        subresource: &info.subresource,
        name: &info.name,
    }
}

fn decide(authorizer: &dyn Authorizer, a: &Attributes<'_>) -> Result<String> {
    let (decision, reason) = authorizer.authorize(a);
    if decision == Decision::Allow {
        return Ok(reason);
    }
    tracing::debug!(target: "apiserver::authorization", user = %a.user.name, verb = a.verb, resource = a.resource, subresource = a.subresource, namespace = a.namespace, path = a.path, reason, "forbidden");
    Err(forbidden(a, &reason))
}

/// The 403 (`responsewriters.Forbidden` with `forbiddenMessage`).
pub fn forbidden(a: &Attributes<'_>, reason: &str) -> Error {
    let user = &a.user.name;
    let mut why = if !a.resource_request {
        format!("User {user:?} cannot {} path {:?}", a.verb, a.path)
    } else {
        let resource = if a.subresource.is_empty() { a.resource.to_string() } else { format!("{}/{}", a.resource, a.subresource) };
        match a.namespace {
            "" => format!("User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope", a.verb, a.api_group),
            ns => format!("User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {ns:?}", a.verb, a.api_group),
        }
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    // errors.NewForbidden: the group-qualified resource, and the name when there is one.
    let qualified = if a.api_group.is_empty() { a.resource.to_string() } else { format!("{}.{}", a.resource, a.api_group) };
    let message = match (qualified.is_empty() || !a.resource_request, a.name) {
        (true, _) => format!("forbidden: {why}"),
        (false, "") => format!("{qualified} is forbidden: {why}"),
        (false, name) => format!("{qualified} {name:?} is forbidden: {why}"),
    };
    let (group, resource, name) = if a.resource_request { (a.api_group, a.resource, a.name) } else { ("", "", "") };
    Error::ForbiddenRequest { group: group.into(), resource: resource.into(), name: name.into(), message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authorization::authorizerfactory::AlwaysDeny;

    #[test]
    fn forbidden_messages_are_kubernetes_words() {
        let anonymous = UserInfo::anonymous();
        let msg = |method: &str, path: &str| {
            let info = PathInfo::parse(method, path, "");
            let e = authorize(&crate::authorization::union::Union(vec![]), &anonymous, &info).expect_err("nothing allows");
            (e.to_string(), e.to_status()["details"].clone())
        };
        assert_eq!(
            msg("GET", "/api/v1/namespaces/default/pods").0,
            r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#
        );
        assert_eq!(msg("GET", "/api/v1/nodes/n1").0, r#"nodes "n1" is forbidden: User "system:anonymous" cannot get resource "nodes" in API group "" at the cluster scope"#);
        let (m, details) = msg("POST", "/apis/apps/v1/namespaces/x/deployments");
        assert_eq!(m, r#"deployments.apps is forbidden: User "system:anonymous" cannot create resource "deployments" in API group "apps" in the namespace "x""#);
        assert_eq!(details, serde_json::json!({"group": "apps", "kind": "deployments"}));
        assert_eq!(msg("GET", "/api/v1/namespaces/x/pods/p/log").0, r#"pods "p" is forbidden: User "system:anonymous" cannot get resource "pods/log" in API group "" in the namespace "x""#);
        let (m, details) = msg("GET", "/openapi/v2");
        assert_eq!(m, r#"forbidden: User "system:anonymous" cannot get path "/openapi/v2""#);
        assert_eq!(details, serde_json::json!({}));
        let info = PathInfo::parse("GET", "/api/v1/pods", "");
        assert_eq!(
            authorize(&AlwaysDeny, &anonymous, &info).expect_err("denied").to_string(),
            r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope: Everything is forbidden."#
        );
    }
}
