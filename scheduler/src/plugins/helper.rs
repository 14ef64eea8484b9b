//! Helpers several plugins share (kube-scheduler's plugins/helper): label selectors on typed
//! objects. Node selector terms (component-helpers' nodeaffinity) and whether a toleration
//! tolerates a taint are the API types' own, re-exported from `api::core::v1::helper` (the
//! DaemonSet controller asks the same questions without linking the scheduler).

use apimachinery::labels::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub use api::core::v1::helper::node_affinity::{node_selector_term_matches, validate_node_selector_term};

/// metav1.LabelSelectorAsSelector for a typed selector: `None` selects nothing, `{}` everything.
/// An invalid selector is an error (the pod is then unschedulable with that message).
pub fn label_selector(sel: Option<&LabelSelector>) -> Result<Selector, String> {
    let v = serde_json::to_value(sel).map_err(|e| e.to_string())?;
    Selector::from_label_selector(&v).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSelectorTerm;
    use serde_json::json;
    use std::collections::BTreeMap;

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
