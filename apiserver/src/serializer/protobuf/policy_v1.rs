//! Mirrors k8s.io/api/policy/v1/generated.proto: the PodDisruptionBudget `kubectl create
//! poddisruptionbudget` sends, field numbers as in that file.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::intstr::IntOrString;
use super::json::Fields;
use super::meta_v1::{LabelSelector, ObjectMeta, Time};

/// `policy/v1.PodDisruptionBudget`.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodDisruptionBudget {
    #[prost(message, optional, tag = "1")]
    pub(super) metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub(super) spec: Option<PodDisruptionBudgetSpec>,
    #[prost(message, optional, tag = "3")]
    pub(super) status: Option<PodDisruptionBudgetStatus>,
}

impl PodDisruptionBudget {
    pub(super) fn to_json(&self) -> Map<String, Value> {
        let mut f = Fields::with_metadata(&self.metadata);
        f.message("spec", &self.spec, PodDisruptionBudgetSpec::to_json);
        f.message("status", &self.status, PodDisruptionBudgetStatus::to_json);
        f.0
    }
}

/// `policy/v1.PodDisruptionBudgetSpec`: every field is a pointer in Go.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodDisruptionBudgetSpec {
    #[prost(message, optional, tag = "1")]
    pub(super) min_available: Option<IntOrString>,
    #[prost(message, optional, tag = "2")]
    pub(super) selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    pub(super) max_unavailable: Option<IntOrString>,
    #[prost(string, optional, tag = "4")]
    pub(super) unhealthy_pod_eviction_policy: Option<String>,
}

impl PodDisruptionBudgetSpec {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.int_or_string("minAvailable", &self.min_available);
        f.message("selector", &self.selector, LabelSelector::to_json);
        f.int_or_string("maxUnavailable", &self.max_unavailable);
        f.ptr_string(
            "unhealthyPodEvictionPolicy",
            &self.unhealthy_pod_eviction_policy,
        );
        f.into_json()
    }
}

/// `policy/v1.PodDisruptionBudgetStatus`, without `conditions`. The four counts have no
/// `omitempty` in Go: even an empty status is written with them, as zeros.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct PodDisruptionBudgetStatus {
    #[prost(int64, optional, tag = "1")]
    pub(super) observed_generation: Option<i64>,
    #[prost(btree_map = "string, message", tag = "2")]
    pub(super) disrupted_pods: BTreeMap<String, Time>,
    #[prost(int32, optional, tag = "3")]
    pub(super) disruptions_allowed: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub(super) current_healthy: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub(super) desired_healthy: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub(super) expected_pods: Option<i32>,
}

impl PodDisruptionBudgetStatus {
    pub(super) fn to_json(&self) -> Value {
        let mut f = Fields::default();
        f.int("observedGeneration", self.observed_generation);
        // A zero time is `null` in Go's JSON; the map keeps the key either way.
        f.map("disruptedPods", &self.disrupted_pods, |t| {
            t.to_rfc3339().map_or(Value::Null, Value::String)
        });
        f.required_int(
            "disruptionsAllowed",
            self.disruptions_allowed.map(i64::from),
        );
        f.required_int("currentHealthy", self.current_healthy.map(i64::from));
        f.required_int("desiredHealthy", self.desired_healthy.map(i64::from));
        f.required_int("expectedPods", self.expected_pods.map(i64::from));
        f.into_json()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::intstr::tests::{int, string};
    use super::super::meta_v1::tests::go_meta;
    use super::super::tests::{body, decode_ok};
    use super::*;

    #[test]
    fn pod_disruption_budget_int_percent_and_status() {
        let pdb = PodDisruptionBudget {
            metadata: Some(go_meta("web")),
            spec: Some(PodDisruptionBudgetSpec {
                // `--min-available=0` is a present zero: written.
                min_available: Some(int(0)),
                selector: Some(LabelSelector {
                    match_labels: BTreeMap::from([("app".into(), "web".into())]),
                    match_expressions: vec![],
                }),
                max_unavailable: Some(string("10%")),
                unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            }),
            status: Some(PodDisruptionBudgetStatus {
                observed_generation: Some(3),
                disrupted_pods: BTreeMap::from([(
                    "web-1".into(),
                    Time {
                        seconds: Some(1_767_323_045),
                        nanos: Some(0),
                    },
                )]),
                disruptions_allowed: Some(1),
                current_healthy: Some(3),
                desired_healthy: Some(2),
                expected_pods: Some(0),
            }),
        };
        assert_eq!(
            decode_ok(&body("policy/v1", "PodDisruptionBudget", &pdb)),
            json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "web"}},
                         "maxUnavailable": "10%", "unhealthyPodEvictionPolicy": "AlwaysAllow"},
                "status": {"observedGeneration": 3,
                           "disruptedPods": {"web-1": "2026-01-02T03:04:05Z"},
                           "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
                           "expectedPods": 0},
            })
        );
    }
}
