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
