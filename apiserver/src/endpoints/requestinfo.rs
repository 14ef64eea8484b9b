//! Mirrors k8s.io/apiserver/pkg/endpoints/request/requestinfo.go (`RequestInfoFactory`): what a
//! request asks to do, parsed from its method, path and query alone — before, and apart from,
//! the router — so that the authorizers judge a path no resource answers as what it names, as
//! kube-apiserver does.

use std::collections::HashMap;

use actix_web::web;

use crate::registry::generic::options::parse_bool;

/// Kubernetes' `RequestInfo`: a resource request's verb (`get`, `list`, `watch`, `create`,
/// `update`, `patch`, `delete`, `deletecollection`), API group and version, namespace, resource,
/// subresource and name; or, for a path that names no resource (`/api`, `/apis/apps/v1`,
/// `/healthz`), the lowercased method and the path.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PathInfo {
    pub resource_request: bool,
    pub verb: String,
    pub path: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
}

/// The subresources of a namespace, which `/namespaces/<name>/<x>` names instead of a resource in it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl PathInfo {
    /// Parses `method path?query` (`NewRequestInfo`).
    pub fn parse(method: &str, path: &str, query: &str) -> PathInfo {
        let non_resource = || PathInfo { verb: method.to_ascii_lowercase(), path: path.to_string(), ..Default::default() };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, mut rest) = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
            _ => return non_resource(),
        };
        let verb = match method {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        };
        let mut info = PathInfo { resource_request: true, verb: verb.into(), path: path.into(), api_group: group.into(), api_version: version.into(), ..Default::default() };
        if rest[0] == "namespaces" && rest.len() > 1 {
            info.namespace = rest[1].to_string();
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest = &rest[2..];
            }
        }
        info.resource = rest[0].to_string();
        info.name = rest.get(1).map(|s| s.to_string()).unwrap_or_default();
        info.subresource = rest.get(2).map(|s| s.to_string()).unwrap_or_default();
        if info.name.is_empty() {
            let q = web::Query::<HashMap<String, String>>::from_query(query).map(|q| q.into_inner()).unwrap_or_default();
            match info.verb.as_str() {
                "get" => info.verb = if q.get("watch").is_some_and(|v| parse_bool(v)) { "watch" } else { "list" }.into(),
                "delete" => info.verb = "deletecollection".into(),
                _ => {}
            }
            // A list or watch of one object by name is judged as a request on that object.
            if matches!(info.verb.as_str(), "list" | "watch" | "deletecollection")
                && let Some(name) = q.get("fieldSelector").and_then(|f| single_name(f))
            {
                info.name = name.to_string();
            }
        }
        info
    }
}

/// `metadata.name=x` (or `==`), when that is the whole field selector.
fn single_name(selector: &str) -> Option<&str> {
    let name = selector.strip_prefix("metadata.name==").or_else(|| selector.strip_prefix("metadata.name="))?;
    (!name.is_empty() && !name.contains(',')).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: &str, path: &str, query: &str) -> (bool, String, String, String, String, String, String) {
        let i = PathInfo::parse(method, path, query);
        (i.resource_request, i.verb, i.api_group, i.namespace, i.resource, i.subresource, i.name)
    }

    fn res(verb: &str, group: &str, ns: &str, resource: &str, sub: &str, name: &str) -> (bool, String, String, String, String, String, String) {
        (true, verb.into(), group.into(), ns.into(), resource.into(), sub.into(), name.into())
    }

    #[test]
    fn paths_parse_as_kubernetes_parses_them() {
        let cases = [
            (("GET", "/api/v1/namespaces/default/pods", ""), res("list", "", "default", "pods", "", "")),
            (("GET", "/api/v1/namespaces/default/pods", "watch=true"), res("watch", "", "default", "pods", "", "")),
            (("GET", "/api/v1/namespaces/default/pods", "fieldSelector=metadata.name%3Dweb&watch=1"), res("watch", "", "default", "pods", "", "web")),
            (("GET", "/api/v1/namespaces/default/pods", "fieldSelector=metadata.name%3Dweb%2Cstatus.phase%3DRunning"), res("list", "", "default", "pods", "", "")),
            (("GET", "/api/v1/pods", ""), res("list", "", "", "pods", "", "")),
            (("GET", "/api/v1/namespaces/default/pods/web", ""), res("get", "", "default", "pods", "", "web")),
            (("GET", "/api/v1/namespaces/default/pods/web/exec", "command=ls"), res("get", "", "default", "pods", "exec", "web")),
            (("POST", "/api/v1/namespaces/default/pods/web/portforward", ""), res("create", "", "default", "pods", "portforward", "web")),
            (("POST", "/apis/apps/v1/namespaces/x/deployments", ""), res("create", "apps", "x", "deployments", "", "")),
            (("PUT", "/apis/apps/v1/namespaces/x/deployments/d/scale", ""), res("update", "apps", "x", "deployments", "scale", "d")),
            (("PATCH", "/api/v1/nodes/n1/status", ""), res("patch", "", "", "nodes", "status", "n1")),
            (("DELETE", "/api/v1/namespaces/x/configmaps", ""), res("deletecollection", "", "x", "configmaps", "", "")),
            (("GET", "/api/v1/namespaces/x", ""), res("get", "", "x", "namespaces", "", "x")),
            (("PUT", "/api/v1/namespaces/x/finalize", ""), res("update", "", "x", "namespaces", "finalize", "x")),
            (("GET", "/api/v1/namespaces", ""), res("list", "", "", "namespaces", "", "")),
        ];
        for ((method, path, query), want) in cases {
            assert_eq!(info(method, path, query), want, "{method} {path}?{query}");
        }
        for (method, path) in [("GET", "/api"), ("GET", "/api/v1"), ("GET", "/apis"), ("GET", "/apis/apps"), ("GET", "/apis/apps/v1"), ("GET", "/healthz"), ("POST", "/version")] {
            let i = PathInfo::parse(method, path, "");
            assert!(!i.resource_request, "{path}");
            assert_eq!((i.verb.as_str(), i.path.as_str()), (method.to_ascii_lowercase().as_str(), path));
        }
    }
}
