//! Mirrors staging/src/k8s.io/api/core/v1/toleration.go and taint.go: whether a toleration
//! tolerates a taint. The scheduler filters nodes with it, the node agent admits pods with it, and
//! the taint eviction controller decides which pods a NoExecute taint sends away.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// Whether `t` tolerates `taint` (v1.Toleration.ToleratesTaint): same effect (or an empty effect
/// for all), same key (or an empty key with Exists for all), and Exists or an equal value.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = t.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = t.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "" | "Equal" => key == taint.key && t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

/// The first taint with one of `effects` that none of `tolerations` tolerates.
pub fn find_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration], effects: &[&str]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|taint| !tolerations.iter().any(|t| tolerates(t, taint)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn taint(v: serde_json::Value) -> Taint {
        serde_json::from_value(v).unwrap()
    }
    fn tol(v: serde_json::Value) -> Toleration {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn toleration_table() {
        let t = taint(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}));
        let cases = [
            (json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}), true),
            (json!({"key": "dedicated", "value": "gpu"}), true),
            (json!({"key": "dedicated", "operator": "Exists"}), true),
            (json!({"operator": "Exists"}), true),
            (json!({"key": "dedicated", "value": "cpu"}), false),
            (json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}), false),
            (json!({"key": "other", "operator": "Exists"}), false),
        ];
        for (tv, want) in cases {
            assert_eq!(tolerates(&tol(tv.clone()), &t), want, "{tv}");
        }
    }

    #[test]
    fn find_untolerated_looks_only_at_the_given_effects() {
        let taints = [
            taint(json!({"key": "a", "effect": "NoSchedule"})),
            taint(json!({"key": "b", "effect": "NoExecute"})),
        ];
        let tols = [tol(json!({"key": "b", "operator": "Exists"}))];
        assert_eq!(find_untolerated(&taints, &tols, &["NoExecute"]), None);
        assert_eq!(find_untolerated(&taints, &tols, &["NoSchedule", "NoExecute"]).map(|t| t.key.as_str()), Some("a"));
    }
}
