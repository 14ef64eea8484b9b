//! Mirrors k8s.io/apiserver/pkg/authorization/union/union.go: the authorizers of
//! `--authorization-mode`, asked in order; the first that allows or denies decides. The rules a
//! user holds are every authorizer's together.

use super::authorizer::{Attributes, Authorizer, Decision, Rules};
use crate::authentication::user::UserInfo;

pub struct Union(pub Vec<Box<dyn Authorizer>>);

impl Authorizer for Union {
    fn authorize(&self, a: &Attributes<'_>) -> (Decision, String) {
        let mut reasons = Vec::new();
        for authorizer in &self.0 {
            let (decision, reason) = authorizer.authorize(a);
            match decision {
                Decision::Allow | Decision::Deny => return (decision, reason),
                Decision::NoOpinion if !reason.is_empty() => reasons.push(reason),
                Decision::NoOpinion => {}
            }
        }
        (Decision::NoOpinion, reasons.join("\n"))
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> Rules {
        let mut all = Rules::default();
        for authorizer in &self.0 {
            let rules = authorizer.rules_for(user, namespace);
            all.resource_rules.extend(rules.resource_rules);
            all.non_resource_rules.extend(rules.non_resource_rules);
            all.incomplete |= rules.incomplete;
            all.evaluation_errors.extend(rules.evaluation_errors);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authentication::user::UserInfo;

    struct Fixed(Decision, &'static str);
    impl Authorizer for Fixed {
        fn authorize(&self, _: &Attributes<'_>) -> (Decision, String) {
            (self.0, self.1.to_string())
        }
    }

    #[test]
    fn the_first_that_decides_wins() {
        let user = UserInfo::default();
        let a = Attributes { user: &user, ..Default::default() };
        let union = Union(vec![Box::new(Fixed(Decision::NoOpinion, "a")), Box::new(Fixed(Decision::Deny, "b")), Box::new(Fixed(Decision::Allow, "c"))]);
        assert_eq!(union.authorize(&a), (Decision::Deny, "b".into()));
        let union = Union(vec![Box::new(Fixed(Decision::NoOpinion, "a")), Box::new(Fixed(Decision::NoOpinion, "")), Box::new(Fixed(Decision::NoOpinion, "c"))]);
        assert_eq!(union.authorize(&a), (Decision::NoOpinion, "a\nc".into()));
    }
}
