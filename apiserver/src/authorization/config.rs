//! Mirrors pkg/kubeapiserver/authorizer/config.go and modes/modes.go: the authorizer the server
//! runs with, from `--authorization-mode`.

use super::authorizer::Authorizer;
use super::authorizerfactory::{AlwaysAllow, AlwaysDeny, PrivilegedGroups};
use super::node::graph::PodSource;
use super::node::node_authorizer::NodeAuthorizer;
use super::rbac::rbac::RbacAuthorizer;
use super::rbac::rule::PolicySource;
use super::union::Union;
use crate::authentication::user::SYSTEM_PRIVILEGED_GROUP;

pub const MODE_ALWAYS_ALLOW: &str = "AlwaysAllow";
pub const MODE_ALWAYS_DENY: &str = "AlwaysDeny";
pub const MODE_RBAC: &str = "RBAC";
pub const MODE_NODE: &str = "Node";
pub const MODES: &[&str] = &[MODE_ALWAYS_ALLOW, MODE_ALWAYS_DENY, MODE_RBAC, MODE_NODE];

/// Checks `--authorization-mode` (each mode once, each one kubelab has).
pub fn validate_modes(modes: &[String]) -> Result<(), String> {
    if modes.is_empty() {
        return Err("--authorization-mode: at least one mode is required".into());
    }
    for (i, mode) in modes.iter().enumerate() {
        if !MODES.contains(&mode.as_str()) {
            return Err(format!("--authorization-mode: authorization mode {mode:?} is not one of {}", MODES.join(", ")));
        }
        if modes[..i].contains(mode) {
            return Err(format!("--authorization-mode: mode {mode:?} is given twice"));
        }
    }
    Ok(())
}

/// The union of the privileged groups and the modes in order. `rbac`: the policy RBAC reads;
/// `node`: the pods the Node authorizer reads (both the server's watch caches).
pub fn new_authorizer(
    modes: &[String],
    rbac: impl FnOnce() -> Box<dyn PolicySource>,
    node: impl FnOnce() -> Box<dyn PodSource>,
) -> Result<Box<dyn Authorizer>, String> {
    validate_modes(modes)?;
    let mut authorizers: Vec<Box<dyn Authorizer>> = vec![Box::new(PrivilegedGroups(vec![SYSTEM_PRIVILEGED_GROUP.into()]))];
    let mut rbac = Some(rbac);
    let mut node = Some(node);
    for mode in modes {
        authorizers.push(match mode.as_str() {
            MODE_ALWAYS_ALLOW => Box::new(AlwaysAllow),
            MODE_ALWAYS_DENY => Box::new(AlwaysDeny),
            MODE_RBAC => match rbac.take() {
                Some(source) => Box::new(RbacAuthorizer::new(source())),
                None => unreachable!("validate_modes refuses a mode given twice"),
            },
            MODE_NODE => match node.take() {
                Some(source) => Box::new(NodeAuthorizer::new(source())),
                None => unreachable!("validate_modes refuses a mode given twice"),
            },
            other => return Err(format!("--authorization-mode: unknown mode {other:?}")),
        });
    }
    Ok(Box::new(Union(authorizers)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_checked() {
        let m = |s: &[&str]| validate_modes(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert!(m(&["RBAC"]).is_ok());
        assert!(m(&["AlwaysAllow"]).is_ok());
        assert!(m(&["Node", "RBAC"]).is_ok());
        assert_eq!(m(&[]).unwrap_err(), "--authorization-mode: at least one mode is required");
        assert!(m(&["Webhook"]).unwrap_err().contains(r#""Webhook" is not one of AlwaysAllow, AlwaysDeny, RBAC, Node"#));
        assert!(m(&["RBAC", "RBAC"]).unwrap_err().contains("twice"));
    }

    #[test]
    fn node_mode_decides_a_nodes_requests_before_rbac() {
        use serde_json::json;

        use crate::authentication::user::UserInfo;
        use crate::authorization::authorizer::{Attributes, Decision};
        use crate::authorization::node::graph::testing::FakePods;
        use crate::authorization::rbac::rule::testing::StaticPolicy;

        let modes = ["Node".to_string(), "RBAC".to_string()];
        let pod = json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"nodeName": "n1", "volumes": [{"name": "v", "secret": {"secretName": "tls"}}]}});
        let authorizer = new_authorizer(&modes, || Box::new(StaticPolicy::default()), || Box::new(FakePods(vec![pod]))).expect("valid modes");
        let n1 = UserInfo { name: "system:node:n1".into(), groups: vec!["system:nodes".into()], ..Default::default() };
        let get_secret = |name| Attributes { user: &n1, verb: "get", resource_request: true, namespace: "ns", api_version: "v1", resource: "secrets", name, ..Default::default() };
        assert_eq!(authorizer.authorize(&get_secret("tls")).0, Decision::Allow);
        assert_eq!(authorizer.authorize(&get_secret("other")), (Decision::NoOpinion, "no relationship found between node 'n1' and this object".into()), "RBAC grants nothing either");
    }
}
