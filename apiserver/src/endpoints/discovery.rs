//! Mirrors k8s.io/apiserver/pkg/endpoints/discovery: what groups, versions and resources exist,
//! in both forms kubectl reads. The aggregated form (`apidiscovery.k8s.io/v2`, and `v2beta1`,
//! which kubectl 1.27 to 1.29 ask for) is recognised by kubectl only through its Content-Type,
//! which names the version it holds; the legacy form is the fallback, for any client that offers
//! neither, and what `drain` reads.

use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::config::Api;
use crate::endpoints::negotiation::{DiscoveryOutput, Output, negotiate_discovery};
use crate::endpoints::request::{error_response, respond_as};
use crate::registry::generic::strategy::ResourceInfo;

/// The Content-Type of an aggregated discovery document of `version`.
pub fn aggregated_content_type(version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
}

fn scope(info: &ResourceInfo) -> &'static str {
    if info.namespaced { "Namespaced" } else { "Cluster" }
}

/// One resource of an `APIResourceList` (legacy discovery), and its subresources.
fn legacy_entries(info: &ResourceInfo, verbs: &[&str]) -> Vec<Value> {
    let mut out = vec![json!({
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": verbs,
        "shortNames": info.short_names,
        "categories": info.categories,
        "storageVersionHash": "",
    })];
    for s in info.subresources {
        let mut e = json!({
            "name": format!("{}/{}", info.plural, s.name),
            "singularName": "",
            "namespaced": info.namespaced,
            "kind": s.kind,
            "verbs": s.verbs,
        });
        if s.group != info.group || s.version != info.version {
            e["group"] = json!(s.group);
            e["version"] = json!(s.version);
        }
        out.push(e);
    }
    out
}

fn aggregated_resource(info: &ResourceInfo, verbs: &[&str]) -> Value {
    json!({
        "resource": info.plural,
        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "scope": scope(info),
        "singularResource": info.singular,
        "shortNames": info.short_names,
        "categories": info.categories,
        "verbs": verbs,
        "subresources": info.subresources.iter().map(|s| json!({
            "subresource": s.name,
            "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
            "verbs": s.verbs,
        })).collect::<Vec<_>>(),
    })
}

/// The API groups besides core, each with its versions, the preferred one first.
fn groups(api: &Api) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut gvs: Vec<(&'static str, &'static str)> = api.registries.infos().map(|(info, _)| (info.group, info.version)).filter(|(g, _)| !g.is_empty()).collect();
    gvs.sort_by(|a, b| a.0.cmp(b.0).then_with(|| version_priority(a.1).cmp(&version_priority(b.1))));
    gvs.dedup();
    let mut gs: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (group, version) in gvs {
        match gs.last_mut() {
            Some((g, versions)) if *g == group => versions.push(version),
            _ => gs.push((group, vec![version])),
        }
    }
    gs
}

/// How Kubernetes orders a group's versions, as a sort key (`version.CompareKubeAwareVersionStrings`):
/// GA before beta before alpha, a higher number first (`v2`, `v1`, `v1beta2`, `v1beta1`, `v1alpha1`).
fn version_priority(version: &str) -> (u8, std::cmp::Reverse<u32>, std::cmp::Reverse<u32>) {
    let rest = version.strip_prefix('v').unwrap_or(version);
    let major_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let major = rest[..major_len].parse().unwrap_or(0);
    let (stability, minor) = match &rest[major_len..] {
        "" => (0, ""),
        s if s.starts_with("beta") => (1, &s[4..]),
        s if s.starts_with("alpha") => (2, &s[5..]),
        s => (3, s),
    };
    (stability, std::cmp::Reverse(major), std::cmp::Reverse(minor.parse().unwrap_or(0)))
}

fn aggregated_group(api: &Api, group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = api.registries.infos().filter(|(info, _)| info.group == group && info.version == *version).map(|(info, verbs)| aggregated_resource(info, verbs)).collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": versions})
}

/// An `APIGroupDiscoveryList` of `version`: v2 and v2beta1 have the same shape.
fn aggregated(version: &str, items: Vec<Value>) -> HttpResponse {
    let v = json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items});
    HttpResponse::Ok().content_type(aggregated_content_type(version)).json(v)
}

/// `GET /api`
pub fn core(req: &HttpRequest, api: &Api) -> HttpResponse {
    let output = match negotiate_discovery(req) {
        Ok(DiscoveryOutput::Aggregated(version)) => return aggregated(version, vec![aggregated_group(api, "", &["v1"])]),
        Ok(DiscoveryOutput::Legacy(output)) => output,
        Err(e) => return error_response(&e),
    };
    let versions = json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": req.connection_info().host()}],
    });
    respond_as(output, 200, &versions, &[])
}

/// `GET /apis`
pub fn apis(req: &HttpRequest, api: &Api) -> HttpResponse {
    let gs = groups(api);
    let output = match negotiate_discovery(req) {
        Ok(DiscoveryOutput::Aggregated(version)) => return aggregated(version, gs.iter().map(|(g, v)| aggregated_group(api, g, v)).collect()),
        Ok(DiscoveryOutput::Legacy(output)) => output,
        Err(e) => return error_response(&e),
    };
    let groups: Vec<Value> = gs
        .iter()
        .map(|(g, versions)| {
            let gvs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v})).collect();
            json!({"name": g, "preferredVersion": gvs[0], "versions": gvs})
        })
        .collect();
    respond_as(output, 200, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}), &[])
}

/// `GET /api/v1` or `/apis/<group>/<version>`: an APIResourceList, or None if unknown.
pub fn resources(req: &HttpRequest, api: &Api, group: &str, version: &str) -> Option<HttpResponse> {
    let output = match negotiate_discovery(req) {
        // An aggregated document is a root's; a group version answers its list whatever the form.
        Ok(DiscoveryOutput::Aggregated(_)) => Output::Json,
        Ok(DiscoveryOutput::Legacy(output)) => output,
        Err(e) => return Some(error_response(&e)),
    };
    let known = (group.is_empty() && version == "v1") || groups(api).iter().any(|(g, vs)| *g == group && vs.contains(&version));
    if !known {
        return None;
    }
    let list: Vec<Value> = api.registries.infos().filter(|(info, _)| info.group == group && info.version == version).flat_map(|(info, verbs)| legacy_entries(info, verbs)).collect();
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(respond_as(output, 200, &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}), &[]))
}

/// `GET /version`: the Kubernetes version kubelab speaks.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-kubelab",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0 (kubelab is Rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if std::env::consts::ARCH == "x86_64" { "amd64" } else { std::env::consts::ARCH }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_ordered_as_kubernetes_orders_them() {
        let mut vs = vec!["v1alpha1", "v1beta1", "v1", "v2", "v1beta2", "v2beta1"];
        vs.sort_by_key(|v| version_priority(v));
        assert_eq!(vs, ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1"]);
    }
}
