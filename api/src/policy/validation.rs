//! Mirrors pkg/apis/policy/validation/validation.go: ValidatePodDisruptionBudget and
//! ValidatePodDisruptionBudgetUpdate.
//!
//! A budget says how many of the selected pods an eviction may leave: at least `minAvailable`
//! or at most `maxUnavailable` gone, never both (they would disagree as the set scales). Each
//! is a count or a percentage of the pods the selector picks, checked as the apps workloads'
//! rolling-update budgets are ([`validate_positive_int_or_percent`]).

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use crate::apps::validation::{is_not_more_than_100_percent, validate_positive_int_or_percent};
use crate::core::validation::{validate_label_selector, validate_object_meta};

/// ValidatePodDisruptionBudget: metadata and ValidatePodDisruptionBudgetSpec — at most one of
/// minAvailable and maxUnavailable, each a non-negative count or a percentage up to 100%, a
/// valid selector, and a known unhealthy-pod eviction policy.
pub fn validate_pod_disruption_budget(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let set = |name: &str| spec.get(name).filter(|v| !v.is_null());
    if set("minAvailable").is_some() && set("maxUnavailable").is_some() {
        errs.push(FieldError::invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"));
    }
    for name in ["minAvailable", "maxUnavailable"] {
        let path = format!("spec.{name}");
        errs.extend(validate_positive_int_or_percent(set(name), &path));
        errs.extend(is_not_more_than_100_percent(set(name), &path));
    }
    if let Err(e) = validate_label_selector(set("selector"), "spec.selector") {
        errs.push(e);
    }
    if let Some(policy) = spec.get("unhealthyPodEvictionPolicy").and_then(Value::as_str)
        && policy != "IfHealthyBudget"
        && policy != "AlwaysAllow"
    {
        errs.push(FieldError::not_supported("spec.unhealthyPodEvictionPolicy", &json!(policy), &["AlwaysAllow", "IfHealthyBudget"]));
    }
    errs
}

/// ValidatePodDisruptionBudgetUpdate: the new budget is valid. policy/v1 lets the whole spec
/// change (policy/v1beta1 froze it).
pub fn validate_pod_disruption_budget_update(new: &Value, _old: &Value) -> Vec<FieldError> {
    validate_pod_disruption_budget(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::validation::tests::found;
    use apimachinery::validation::FieldErrorReason::{Invalid, NotSupported};

    fn pdb(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }


    #[test]
    fn valid_budgets_pass() {
        let selector = json!({"matchLabels": {"app": "web"}});
        for spec in [
            json!({"minAvailable": 2, "selector": selector}),
            json!({"maxUnavailable": "50%", "selector": selector, "unhealthyPodEvictionPolicy": "AlwaysAllow"}),
            json!({"minAvailable": "100%", "selector": {}, "unhealthyPodEvictionPolicy": "IfHealthyBudget"}),
            json!({"maxUnavailable": 0}),
        ] {
            assert_eq!(validate_pod_disruption_budget(&pdb(spec.clone())), vec![], "{spec}");
        }
    }

    #[test]
    fn invalid_budgets() {
        let errs = validate_pod_disruption_budget(&pdb(json!({"minAvailable": 1, "maxUnavailable": 1})));
        assert_eq!(found(&errs), vec![("spec", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: {\"maxUnavailable\":1,\"minAvailable\":1}: minAvailable and maxUnavailable cannot be both set");

        for (spec, field, message) in [
            (json!({"minAvailable": -1}), "spec.minAvailable", "Invalid value: -1: must be greater than or equal to 0"),
            (json!({"maxUnavailable": "150%"}), "spec.maxUnavailable", "Invalid value: \"150%\": must not be greater than 100%"),
            (json!({"minAvailable": "3 pods"}), "spec.minAvailable", "Invalid value: \"3 pods\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"),
        ] {
            let errs = validate_pod_disruption_budget(&pdb(spec));
            assert_eq!(found(&errs), vec![(field, Invalid)]);
            assert_eq!(errs[0].message, message);
        }
        let bad_selector = json!({"matchExpressions": [{"key": "app", "operator": "Around", "values": ["web"]}]});
        let errs = validate_pod_disruption_budget(&pdb(json!({"minAvailable": 1, "selector": bad_selector})));
        assert_eq!(found(&errs), vec![("spec.selector", Invalid)]);

        let errs = validate_pod_disruption_budget(&pdb(json!({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"})));
        assert_eq!(found(&errs), vec![("spec.unhealthyPodEvictionPolicy", NotSupported)]);
        assert_eq!(errs[0].message, "Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"");

        let errs = validate_pod_disruption_budget(&json!({"metadata": {"name": "Web", "namespace": "default"}, "spec": {}}));
        assert_eq!(found(&errs), vec![("metadata.name", Invalid)]);
    }

    #[test]
    fn updates_may_change_the_spec() {
        let old = pdb(json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}));
        let new = pdb(json!({"maxUnavailable": "10%", "selector": {"matchLabels": {"app": "api"}}}));
        assert_eq!(validate_pod_disruption_budget_update(&new, &old), vec![]);
        let both = pdb(json!({"minAvailable": 1, "maxUnavailable": 1}));
        assert_eq!(found(&validate_pod_disruption_budget_update(&both, &old)), vec![("spec", Invalid)]);
    }
}
