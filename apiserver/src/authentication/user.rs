//! Mirrors k8s.io/apiserver/pkg/authentication/user/user.go: who a request comes from, and the
//! names Kubernetes gives its special users and groups.

use std::collections::BTreeMap;

/// `system:masters`: its members may do anything, whatever the policy says.
pub const SYSTEM_PRIVILEGED_GROUP: &str = "system:masters";
/// Every authenticated request's user is in this group.
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// Every anonymous request's user is in this group.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of a request that carries no credentials (`--anonymous-auth`).
pub const ANONYMOUS: &str = "system:anonymous";
/// The user of a request on the insecure port: a superuser, as kube-apiserver's insecure port
/// once was (k8s.io/apiserver/pkg/server/insecure_handler.go's `InsecureSuperuser`).
pub const INSECURE_SUPERUSER: &str = "system:unsecured";

/// A user as the authenticators found it (Kubernetes' `user.DefaultInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo { name: ANONYMOUS.into(), groups: vec![ALL_UNAUTHENTICATED.into()], ..Default::default() }
    }

    /// The superuser a request on the insecure port acts as.
    pub fn insecure_superuser() -> Self {
        UserInfo { name: INSECURE_SUPERUSER.into(), groups: vec![SYSTEM_PRIVILEGED_GROUP.into(), ALL_AUTHENTICATED.into()], ..Default::default() }
    }

    /// The user as `authentication.k8s.io/v1` UserInfo writes it (SelfSubjectReview,
    /// TokenReview, an audit Event): every field but the name left out when empty.
    pub fn to_json(&self) -> serde_json::Value {
        let mut u = serde_json::Map::new();
        u.insert("username".into(), self.name.clone().into());
        if !self.uid.is_empty() {
            u.insert("uid".into(), self.uid.clone().into());
        }
        if !self.groups.is_empty() {
            u.insert("groups".into(), self.groups.clone().into());
        }
        if !self.extra.is_empty() {
            u.insert("extra".into(), serde_json::json!(self.extra));
        }
        serde_json::Value::Object(u)
    }

    /// Adds `system:authenticated` unless the user is anonymous or has it (Kubernetes'
    /// `AuthenticatedGroupAdder`, which wraps every authenticator but the anonymous one).
    pub fn with_authenticated_group(mut self) -> Self {
        if self.name != ANONYMOUS && !self.groups.iter().any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED) {
            self.groups.push(ALL_AUTHENTICATED.into());
        }
        self
    }
}

/// The group every node's credentials carry (`user.NodesGroup`).
pub const NODES_GROUP: &str = "system:nodes";
/// The prefix of a node's user name: `system:node:<nodeName>`.
pub const NODE_USER_NAME_PREFIX: &str = "system:node:";

/// Which node the user is, if it is one (pkg/auth/nodeidentifier's `NodeIdentity`): a user named
/// `system:node:<nodeName>` in the group `system:nodes`. `Some("")` is a node whose name is
/// unknown (`system:node:`), which the Node authorizer and NodeRestriction refuse; a user with
/// only the name or only the group is no node. Shared by both, which must agree on who is one.
pub fn node_identity(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_NAME_PREFIX)?;
    user.groups.iter().any(|g| g == NODES_GROUP).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_identity_needs_the_name_prefix_and_the_nodes_group() {
        let user = |name: &str, groups: &[&str]| UserInfo { name: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() };
        assert_eq!(node_identity(&user("system:node:n1", &["system:nodes", "system:authenticated"])), Some("n1"));
        assert_eq!(node_identity(&user("system:node:", &["system:nodes"])), Some(""), "a node, but which one is unknown");
        assert_eq!(node_identity(&user("system:node:n1", &["system:authenticated"])), None, "the name alone is no node");
        assert_eq!(node_identity(&user("jane", &["system:nodes"])), None, "the group alone is no node");
    }
}
