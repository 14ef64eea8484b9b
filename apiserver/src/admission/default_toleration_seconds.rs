//! Mirrors the DefaultTolerationSeconds admission plugin
//! (plugin/pkg/admission/defaulttolerationseconds/admission.go): a pod tolerates a not-ready or
//! unreachable node for five minutes before the taint manager evicts it, unless it says otherwise.

use api::core::v1::well_known::{TAINT_NODE_NOT_READY, TAINT_NODE_UNREACHABLE};
use k8s_openapi::api::core::v1::{Pod, PodSpec, Toleration};

use super::interfaces::{Attributes, MutationInterface, Operation};
use crate::error::Result;
use crate::registry::generic::typed::Object;

pub const NAME: &str = "DefaultTolerationSeconds";

/// The default of `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds`: how long a pod stays bound to a node that stopped
/// being Ready before the taint eviction controller evicts it.
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The plugin, with its two flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultTolerationSeconds {
    pub not_ready_seconds: i64,
    pub unreachable_seconds: i64,
}

impl Default for DefaultTolerationSeconds {
    fn default() -> Self {
        Self { not_ready_seconds: DEFAULT_TOLERATION_SECONDS, unreachable_seconds: DEFAULT_TOLERATION_SECONDS }
    }
}

impl DefaultTolerationSeconds {
    pub fn admit_pod(&self, pod: &mut Pod) {
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        self.admit_default_toleration_seconds(spec);
    }

    /// Tolerate a not-ready or unreachable node for the flags' seconds, unless the pod already
    /// tolerates that taint's NoExecute effect in some way (an empty key or effect matches every
    /// key or effect).
    fn admit_default_toleration_seconds(&self, spec: &mut PodSpec) {
        let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
        let tolerates = |taint: &str| {
            tolerations.iter().any(|t| {
                let key = t.key.as_deref().unwrap_or("");
                let effect = t.effect.as_deref().unwrap_or("");
                (key == taint || key.is_empty()) && (effect == "NoExecute" || effect.is_empty())
            })
        };
        let missing: Vec<(&str, i64)> = [(TAINT_NODE_NOT_READY, self.not_ready_seconds), (TAINT_NODE_UNREACHABLE, self.unreachable_seconds)]
            .into_iter()
            .filter(|(taint, _)| !tolerates(taint))
            .collect();
        for (taint, seconds) in missing {
            tolerations.push(Toleration {
                key: Some(taint.to_string()),
                operator: Some("Exists".to_string()),
                effect: Some("NoExecute".to_string()),
                toleration_seconds: Some(seconds),
                value: None,
            });
        }
    }
}

impl MutationInterface for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        NAME
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Create && a.is_for("", "pods") && a.subresource.is_empty()
    }

    fn admit_object(&self, _a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
        if let Some(pod) = obj.typed_mut::<Pod>() {
            self.admit_pod(pod);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::interfaces::testing::minimal;
    use api::core::v1::defaults::set_defaults_pod;

    /// `json` decoded, defaulted (as the create handler does before admission), then admitted.
    fn admitted(plugin: DefaultTolerationSeconds, json: serde_json::Value) -> PodSpec {
        let mut pod: Pod = serde_json::from_value(json).expect("test pod is valid");
        set_defaults_pod(&mut pod);
        plugin.admit_pod(&mut pod);
        pod.spec.expect("defaulted pod has a spec")
    }

    fn toleration(key: &str, op: &str, effect: &str, seconds: Option<i64>) -> serde_json::Value {
        let mut t = json!({"operator": op});
        if !key.is_empty() {
            t["key"] = key.into();
        }
        if !effect.is_empty() {
            t["effect"] = effect.into();
        }
        if let Some(s) = seconds {
            t["tolerationSeconds"] = s.into();
        }
        t
    }

    #[test]
    fn default_toleration_seconds_table() {
        let not_ready = toleration(TAINT_NODE_NOT_READY, "Exists", "NoExecute", Some(300));
        let unreachable = toleration(TAINT_NODE_UNREACHABLE, "Exists", "NoExecute", Some(300));
        // (case, tolerations given, tolerations after)
        let cases = vec![
            (
                "none",
                json!(null),
                vec![not_ready.clone(), unreachable.clone()],
            ),
            (
                "unrelated toleration kept first",
                json!([toleration("gpu", "Exists", "NoSchedule", None)]),
                vec![
                    toleration("gpu", "Exists", "NoSchedule", None),
                    not_ready.clone(),
                    unreachable.clone(),
                ],
            ),
            (
                "own not-ready toleration",
                json!([toleration(
                    TAINT_NODE_NOT_READY,
                    "Exists",
                    "NoExecute",
                    Some(10)
                )]),
                vec![
                    toleration(TAINT_NODE_NOT_READY, "Exists", "NoExecute", Some(10)),
                    unreachable.clone(),
                ],
            ),
            (
                "own unreachable toleration without effect",
                json!([toleration(TAINT_NODE_UNREACHABLE, "Exists", "", None)]),
                vec![
                    toleration(TAINT_NODE_UNREACHABLE, "Exists", "", None),
                    not_ready.clone(),
                ],
            ),
            (
                "not-ready but only NoSchedule does not count",
                json!([toleration(
                    TAINT_NODE_NOT_READY,
                    "Exists",
                    "NoSchedule",
                    None
                )]),
                vec![
                    toleration(TAINT_NODE_NOT_READY, "Exists", "NoSchedule", None),
                    not_ready.clone(),
                    unreachable.clone(),
                ],
            ),
            (
                "tolerate everything",
                json!([toleration("", "Exists", "", None)]),
                vec![toleration("", "Exists", "", None)],
            ),
            (
                "tolerate every NoExecute taint",
                json!([toleration("", "Exists", "NoExecute", None)]),
                vec![toleration("", "Exists", "NoExecute", None)],
            ),
        ];
        for (case, given, want) in cases {
            let mut j = minimal();
            if !given.is_null() {
                j["spec"]["tolerations"] = given;
            }
            let got = serde_json::to_value(&admitted(DefaultTolerationSeconds::default(), j).tolerations).expect("serializes");
            assert_eq!(got, json!(want), "{case}");
        }
    }

    #[test]
    fn the_flags_set_the_seconds() {
        let plugin = DefaultTolerationSeconds { not_ready_seconds: 30, unreachable_seconds: 20 };
        let got = serde_json::to_value(&admitted(plugin, minimal()).tolerations).expect("serializes");
        assert_eq!(got, json!([toleration(TAINT_NODE_NOT_READY, "Exists", "NoExecute", Some(30)), toleration(TAINT_NODE_UNREACHABLE, "Exists", "NoExecute", Some(20))]));
    }
}
