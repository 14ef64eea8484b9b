//! Mirrors staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go:
//! whether a node satisfies a pod's `nodeSelector` and required node affinity. The scheduler's
//! NodeAffinity filter asks it of every node; the DaemonSet controller asks it to know which
//! nodes should run a daemon pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, PodSpec};

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

/// RequiredNodeAffinity.Match: every `nodeSelector` label is on the node with the same value, and
/// — if the pod has required node affinity — at least one of its terms matches (terms are ORed).
/// A malformed term never matches; its problem is returned if no term matched.
pub fn match_required_node_affinity(spec: &PodSpec, node_name: &str, labels: &BTreeMap<String, String>) -> Result<bool, String> {
    if let Some(selector) = spec.node_selector.as_ref()
        && !selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    {
        return Ok(false);
    }
    let terms = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()).and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    let Some(terms) = terms else { return Ok(true) };
    let mut problem = None;
    for term in &terms.node_selector_terms {
        match node_selector_term_matches(term, node_name, labels) {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) => problem = Some(e),
        }
    }
    match problem {
        Some(e) => Err(e),
        None => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn node_selector_and_required_terms() {
        let labels: BTreeMap<String, String> = [("zone".to_string(), "a".to_string()), ("gen".to_string(), "5".to_string())].into();
        let required = |terms: serde_json::Value| json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}});
        let cases = [
            ("nothing asked", json!({}), Ok(true)),
            ("selector matches", json!({"nodeSelector": {"zone": "a"}}), Ok(true)),
            ("selector differs", json!({"nodeSelector": {"zone": "b"}}), Ok(false)),
            ("selector label missing", json!({"nodeSelector": {"disk": "ssd"}}), Ok(false)),
            ("a term matches", required(json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}])), Ok(true)),
            ("terms are ORed", required(json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])), Ok(true)),
            ("no term matches", required(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}])), Ok(false)),
            ("no terms", required(json!([])), Ok(false)),
            ("a malformed term", required(json!([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["x"]}]}])), Err("gen: \"x\" is not an integer".to_string())),
        ];
        for (case, spec, want) in cases {
            let mut spec = spec;
            spec["containers"] = json!([]);
            let spec: PodSpec = serde_json::from_value(spec).expect("spec");
            assert_eq!(match_required_node_affinity(&spec, "n1", &labels), want, "{case}");
        }
        // The selector and the terms must both hold.
        let both: PodSpec = serde_json::from_value(json!({"containers": [], "nodeSelector": {"zone": "b"}, "affinity": required(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]))["affinity"]})).expect("spec");
        assert_eq!(match_required_node_affinity(&both, "n1", &labels), Ok(false));
    }
}
