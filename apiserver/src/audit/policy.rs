//! Mirrors k8s.io/apiserver/pkg/audit/policy (`reader.go`, `checker.go`) and
//! apis/audit/v1's Policy: which requests are audited, and how much of them.

use std::path::Path;

use serde::Deserialize;

use crate::authorization::authorizer::Attributes;

/// How much of a request is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// Where in its life a request's Event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum Stage {
    RequestReceived,
    ResponseStarted,
    ResponseComplete,
    Panic,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

/// `audit.k8s.io/v1` Policy.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRule {
    pub level: Level,
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub user_groups: Vec<String>,
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupResources {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub resources: Vec<String>,
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// What the policy says of one request: its level and the stages not written.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub level: Level,
    pub omit_stages: Vec<Stage>,
}

impl Policy {
    /// Reads `--audit-policy-file` (`LoadPolicyFromFile`): YAML or JSON of kind Policy in
    /// `audit.k8s.io/v1`, with at least one rule.
    pub fn from_file(path: &Path) -> Result<Policy, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--audit-policy-file {}: {e}", path.display()))?;
        let policy: Policy = serde_norway::from_str(&text).map_err(|e| format!("--audit-policy-file {}: {e}", path.display()))?;
        if policy.api_version != "audit.k8s.io/v1" || policy.kind != "Policy" {
            return Err(format!("--audit-policy-file {}: not an audit.k8s.io/v1 Policy (apiVersion {:?}, kind {:?})", path.display(), policy.api_version, policy.kind));
        }
        if policy.rules.is_empty() {
            return Err(format!("--audit-policy-file {}: loaded illegal policy with 0 rules", path.display()));
        }
        Ok(policy)
    }

    /// The first matching rule's level and stages left out (`LevelAndStages`, asked about the
    /// request's authorization attributes); `None` when no rule matches.
    pub fn decide(&self, a: &Attributes<'_>) -> Decision {
        match self.rules.iter().find(|r| r.matches(a)) {
            Some(rule) => Decision { level: rule.level, omit_stages: self.omit_stages.iter().chain(&rule.omit_stages).copied().collect() },
            None => Decision { level: Level::None, omit_stages: Vec::new() },
        }
    }
}

impl PolicyRule {
    /// `ruleMatches`.
    fn matches(&self, a: &Attributes<'_>) -> bool {
        let has = |list: &[String], s: &str| list.iter().any(|x| x == s);
        if !self.users.is_empty() && !has(&self.users, &a.user.name) {
            return false;
        }
        if !self.user_groups.is_empty() && !a.user.groups.iter().any(|g| has(&self.user_groups, g)) {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, a.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return a.resource_request && self.resource_matches(a);
        }
        if !self.non_resource_urls.is_empty() {
            return !a.resource_request && self.non_resource_urls.iter().any(|u| u == a.path || u.strip_suffix('*').is_some_and(|p| a.path.starts_with(p)));
        }
        true
    }

    fn resource_matches(&self, a: &Attributes<'_>) -> bool {
        if !self.namespaces.is_empty() && !self.namespaces.iter().any(|n| n == a.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if a.subresource.is_empty() { a.resource.to_string() } else { format!("{}/{}", a.resource, a.subresource) };
        self.resources.iter().any(|gr| {
            if gr.group != a.api_group {
                return false;
            }
            let named = gr.resource_names.is_empty() || gr.resource_names.iter().any(|n| n == a.name);
            let resource = gr.resources.is_empty()
                || gr.resources.iter().any(|r| {
                    r == &combined
                        || r == "*"
                        || (a.subresource.is_empty() && r == a.resource)
                        || r.strip_prefix("*/").is_some_and(|s| s == a.subresource)
                        || r.strip_suffix("/*").is_some_and(|res| res == a.resource)
                });
            resource && named
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: Metadata
  resources:
  - group: ""
    resources: ["secrets", "pods/log"]
- level: Request
  verbs: ["create", "update", "patch", "delete"]
  namespaces: ["team"]
- level: Metadata
"#;

    fn decide(user: &str, method: &str, path: &str) -> Level {
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("policy.yaml");
        std::fs::write(&file, POLICY).expect("written");
        let policy = Policy::from_file(&file).expect("a policy");
        let user = crate::authentication::user::UserInfo { name: user.into(), ..Default::default() };
        let info = crate::endpoints::requestinfo::PathInfo::parse(method, path, "");
        policy.decide(&crate::filters::authorization::attributes(&user, &info)).level
    }

    #[test]
    fn the_first_matching_rule_decides() {
        assert_eq!(decide("system:kube-proxy", "GET", "/api/v1/services"), Level::None);
        assert_eq!(decide("jane", "GET", "/healthz/etcd"), Level::None);
        assert_eq!(decide("jane", "GET", "/api/v1/namespaces/team/secrets/s"), Level::Metadata);
        assert_eq!(decide("jane", "GET", "/api/v1/namespaces/team/pods/p/log"), Level::Metadata);
        assert_eq!(decide("jane", "POST", "/api/v1/namespaces/team/pods"), Level::Request);
        assert_eq!(decide("jane", "POST", "/api/v1/namespaces/other/pods"), Level::Metadata);
        assert_eq!(decide("jane", "GET", "/metrics"), Level::Metadata);
    }

    #[test]
    fn a_bad_policy_is_refused() {
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("policy.yaml");
        std::fs::write(&file, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n").expect("written");
        assert!(Policy::from_file(&file).unwrap_err().ends_with("loaded illegal policy with 0 rules"));
        std::fs::write(&file, "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n").expect("written");
        assert!(Policy::from_file(&file).is_err());
    }
}
