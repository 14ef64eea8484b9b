//! Mirrors k8s.io/apiserver/pkg/authorization/authorizerfactory/builtin.go: the authorizers that
//! need no policy — `AlwaysAllow`, `AlwaysDeny`, and the privileged groups (`system:masters`),
//! which kube-apiserver puts before every mode so that the cluster's administrators can never be
//! locked out by a policy.

use super::authorizer::{Attributes, Authorizer, Decision, Rules};
use crate::authentication::user::UserInfo;

pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _: &Attributes<'_>) -> (Decision, String) {
        (Decision::Allow, String::new())
    }

    fn rules_for(&self, _: &UserInfo, _: &str) -> Rules {
        Rules::everything()
    }
}

pub struct AlwaysDeny;

impl Authorizer for AlwaysDeny {
    fn authorize(&self, _: &Attributes<'_>) -> (Decision, String) {
        (Decision::NoOpinion, "Everything is forbidden.".into())
    }
}

/// Allows every request of a member of one of these groups. It lists no rules: kube-apiserver
/// does not count it among the rule resolvers, so SelfSubjectRulesReview shows what the policy
/// gives an administrator, not that the group gives everything.
pub struct PrivilegedGroups(pub Vec<String>);

impl Authorizer for PrivilegedGroups {
    fn authorize(&self, a: &Attributes<'_>) -> (Decision, String) {
        match a.user.groups.iter().find(|g| self.0.contains(g)) {
            Some(group) => (Decision::Allow, format!("allowed as a member of {group}")),
            None => (Decision::NoOpinion, String::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authentication::user::{SYSTEM_PRIVILEGED_GROUP, UserInfo};

    #[test]
    fn privileged_groups_allow_their_members_only() {
        let p = PrivilegedGroups(vec![SYSTEM_PRIVILEGED_GROUP.into()]);
        let admin = UserInfo { name: "kubernetes-admin".into(), groups: vec!["system:masters".into()], ..Default::default() };
        let other = UserInfo { name: "jane".into(), groups: vec!["system:authenticated".into()], ..Default::default() };
        assert_eq!(p.authorize(&Attributes { user: &admin, verb: "delete", ..Default::default() }).0, Decision::Allow);
        assert_eq!(p.authorize(&Attributes { user: &other, verb: "get", ..Default::default() }).0, Decision::NoOpinion);
        assert_eq!(AlwaysDeny.authorize(&Attributes { user: &admin, ..Default::default() }).0, Decision::NoOpinion);
    }
}
