//! Helpers several plugins share (kube-scheduler's plugins/helper and component-helpers): node
//! selector terms and label selectors on typed objects (whether a toleration tolerates a taint is
//! the API types' own: `api::core::v1::helper::toleration`).

use std::collections::BTreeMap;

use apimachinery::labels::Selector;
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// metav1.LabelSelectorAsSelector for a typed selector: `None` selects nothing, `{}` everything.
/// An invalid selector is an error (the pod is then unschedulable with that message).
pub fn label_selector(sel: Option<&LabelSelector>) -> Result<Selector, String> {
    let v = serde_json::to_value(sel).map_err(|e| e.to_string())?;
    Selector::from_label_selector(&v).map_err(|e| e.to_string())
}

/// One node selector requirement against a node's labels (and `metadata.name` for
/// matchFields). Operators: In, NotIn, Exists, DoesNotExist, Gt, Lt.
fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> Result<bool, String> {
    let values = r.values.as_deref().unwrap_or_default();
    Ok(match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let [bound] = values else {
                return Err(format!("{}: {} needs exactly one value", r.key, r.operator));
            };
            let bound: i64 = bound.parse().map_err(|_| format!("{}: {bound:?} is not an integer", r.key))?;
            match value.and_then(|v| v.parse::<i64>().ok()) {
                Some(v) if r.operator == "Gt" => v > bound,
                Some(v) => v < bound,
                None => false,
            }
        }
        op => return Err(format!("{}: {op:?} is not a valid node selector operator", r.key)),
    })
}

/// Whether a NodeSelectorTerm matches: all its matchExpressions (on labels) and matchFields (on
/// `metadata.name`) hold. An empty term matches nothing, as in Kubernetes.
pub fn node_selector_term_matches(
    term: &NodeSelectorTerm,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return Ok(false);
    }
    for r in exprs {
        if !requirement_matches(r, labels.get(&r.key))? {
            return Ok(false);
        }
    }
    let name = node_name.to_string();
    for r in fields {
        if r.key != "metadata.name" {
            return Err(format!("{}: not a supported field selector (only metadata.name)", r.key));
        }
        if !requirement_matches(r, Some(&name))? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Checks a term on its own, before any node is looked at: every operator is known, Gt/Lt carry
/// exactly one integer, and matchFields only use `metadata.name`. The error names the problem.
pub fn validate_node_selector_term(term: &NodeSelectorTerm) -> Result<(), String> {
    for r in term.match_expressions.iter().flatten() {
        requirement_matches(r, None)?;
    }
    for r in term.match_fields.iter().flatten() {
        if r.key != "metadata.name" {
            return Err(format!("{}: not a supported field selector (only metadata.name)", r.key));
        }
        requirement_matches(r, None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_selector_operators() {
        let labels: BTreeMap<String, String> =
            [("zone".to_string(), "a".to_string()), ("gen".to_string(), "5".to_string())].into();
        let term = |e: serde_json::Value| -> NodeSelectorTerm { serde_json::from_value(json!({"matchExpressions": [e]})).unwrap() };
        let cases = [
            (json!({"key": "zone", "operator": "In", "values": ["a", "b"]}), Ok(true)),
            (json!({"key": "zone", "operator": "NotIn", "values": ["a"]}), Ok(false)),
            (json!({"key": "disk", "operator": "NotIn", "values": ["ssd"]}), Ok(true)),
            (json!({"key": "zone", "operator": "Exists"}), Ok(true)),
            (json!({"key": "zone", "operator": "DoesNotExist"}), Ok(false)),
            (json!({"key": "gen", "operator": "Gt", "values": ["4"]}), Ok(true)),
            (json!({"key": "gen", "operator": "Lt", "values": ["4"]}), Ok(false)),
            (json!({"key": "zone", "operator": "Gt", "values": ["4"]}), Ok(false)),
        ];
        for (e, want) in cases {
            assert_eq!(node_selector_term_matches(&term(e.clone()), "n1", &labels), want, "{e}");
        }
        assert!(node_selector_term_matches(&term(json!({"key": "gen", "operator": "Gt", "values": ["x"]})), "n1", &labels).is_err());
        assert!(node_selector_term_matches(&term(json!({"key": "gen", "operator": "Foo"})), "n1", &labels).is_err());
        assert_eq!(validate_node_selector_term(&term(json!({"key": "gen", "operator": "Gt", "values": ["4"]}))), Ok(()));
        assert!(validate_node_selector_term(&term(json!({"key": "gen", "operator": "Lt", "values": ["x"]}))).is_err());
        assert!(validate_node_selector_term(&term(json!({"key": "gen", "operator": "Gt", "values": ["1", "2"]}))).is_err());
        assert!(validate_node_selector_term(&term(json!({"key": "gen", "operator": "Foo"}))).is_err());
        let by_name: NodeSelectorTerm =
            serde_json::from_value(json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]})).unwrap();
        assert_eq!(node_selector_term_matches(&by_name, "n1", &labels), Ok(true));
        assert_eq!(node_selector_term_matches(&by_name, "n2", &labels), Ok(false));
    }
}
