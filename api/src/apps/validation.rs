//! Mirrors pkg/apis/apps/validation/validation.go: what makes a Deployment, ReplicaSet,
//! DaemonSet, StatefulSet or ControllerRevision valid, as a list of field errors.
//!
//! The four workload kinds share one core: a selector that is set, not empty, parses, and
//! matches the labels of the pod template it stamps out — otherwise the controller would create
//! pods it does not own and create them again forever. Their templates are validated as pods'
//! ([`validate_pod_template_spec`]) and must restart `Always`: a workload's pod that exits is
//! replaced by the controller, not left finished. Objects are validated after defaulting, so a
//! field defaulting fills (a strategy type, a pod management policy) is required here.
//!
//! [`validate_positive_int_or_percent`] and [`is_not_more_than_100_percent`] are the checks of an
//! IntOrString budget (`maxUnavailable`, `maxSurge`), shared with the PodDisruptionBudget.

use apimachinery::labels::Selector;
use apimachinery::validation::{FieldError, is_dns1123_subdomain, regex_error};
use serde_json::{Value, json};

use crate::core::validation::{
    validate_immutable_field, validate_label_selector, validate_nonnegative_field, validate_object_meta,
    validate_pod_template_spec,
};

const PERCENT_FMT: &str = "[0-9]+%";
const PERCENT_ERR_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%'";

/// The message Kubernetes gives when a StatefulSet update touches a field it may not.
pub const STATEFUL_SET_UPDATE_FORBIDDEN: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden";

/// The StatefulSet spec fields an update may change (the list [`STATEFUL_SET_UPDATE_FORBIDDEN`] names).
const STATEFUL_SET_MUTABLE_FIELDS: [&str; 6] =
    ["replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds"];

/// The spec of `obj`, or JSON null when it has none (every check then reports what is missing).
fn spec(obj: &Value) -> &Value {
    obj.get("spec").unwrap_or(&Value::Null)
}

/// A field that is set and not JSON null.
fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.get(name).filter(|v| !v.is_null())
}

/// validation.IsValidPercent: digits followed by one '%'.
fn is_valid_percent(s: &str) -> bool {
    s.strip_suffix('%').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// getIntOrPercentValue: the number an IntOrString holds (a percentage without its '%'); 0 for
/// unset or unparsable, as the Go zero value would be.
fn int_or_percent_value(v: Option<&Value>) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.strip_suffix('%').and_then(|n| n.parse().ok()).unwrap_or(0),
        _ => 0,
    }
}

/// ValidatePositiveIntOrPercent: a non-negative integer or a percentage string.
pub fn validate_positive_int_or_percent(v: Option<&Value>, field: &str) -> Vec<FieldError> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Number(_)) => validate_nonnegative_field(v, field),
        Some(s @ Value::String(p)) if !is_valid_percent(p) => {
            vec![FieldError::invalid(field, s, &regex_error(PERCENT_ERR_MSG, PERCENT_FMT, &["1%", "93%"]))]
        }
        Some(Value::String(_)) => Vec::new(),
        Some(other) => vec![FieldError::invalid(field, other, "must be an integer or percentage (e.g '5%')")],
    }
}

/// IsNotMoreThan100Percent: a percentage string is at most 100%.
pub fn is_not_more_than_100_percent(v: Option<&Value>, field: &str) -> Vec<FieldError> {
    match v {
        Some(s @ Value::String(p)) if is_valid_percent(p) && int_or_percent_value(v) > 100 => {
            vec![FieldError::invalid(field, s, "must not be greater than 100%")]
        }
        _ => Vec::new(),
    }
}

/// The check every workload's selector and template share (Kubernetes' ValidatePodTemplateSpecFor*
/// with the selector checks in front of it): `selector` at `spec.selector` is set, not empty
/// ("empty selector is invalid for `<empty_word>`"), parses, and matches `template`'s labels.
fn validate_selector_matches_template(spec: &Value, empty_word: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let given = field(spec, "selector");
    let selector = validate_label_selector(given, "spec.selector");
    match given {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(v) if selector.as_ref().is_ok_and(Selector::is_empty) => {
            errs.push(FieldError::invalid("spec.selector", v, &format!("empty selector is invalid for {empty_word}")));
        }
        Some(_) => {}
    }
    match selector {
        Err(e) => errs.push(e),
        Ok(selector) => match field(spec, "template") {
            None => errs.push(FieldError::required("spec.template", "")),
            Some(t) => errs.extend(validate_pod_template_labels_match(&selector, t, "spec.template")),
        },
    }
    errs
}

/// The template at `path` carries labels the selector matches (an empty selector matches all);
/// otherwise Invalid on `<path>.metadata.labels`.
pub fn validate_pod_template_labels_match(selector: &Selector, template: &Value, path: &str) -> Vec<FieldError> {
    if selector.is_empty() || selector.matches_object(template) {
        return Vec::new();
    }
    let labels = template.pointer("/metadata/labels").unwrap_or(&Value::Null);
    vec![FieldError::invalid(&format!("{path}.metadata.labels"), labels, "`selector` does not match template `labels`")]
}

/// The template of a workload whose pods run until replaced: valid as a pod template, restarting
/// `Always`, and without a deadline (`kind` names the workload in that message).
fn validate_always_running_template(spec: &Value, kind: &str) -> Vec<FieldError> {
    let Some(template) = field(spec, "template") else { return Vec::new() };
    let mut errs = validate_pod_template_spec(template, "spec.template");
    let policy = template.pointer("/spec/restartPolicy").and_then(Value::as_str).unwrap_or("");
    if policy != "Always" {
        errs.push(FieldError::not_supported("spec.template.spec.restartPolicy", &json!(policy), &["Always"]));
    }
    if template.pointer("/spec/activeDeadlineSeconds").is_some_and(|v| !v.is_null()) {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
    errs
}

/// Several non-negative fields of `spec`, each reported at `spec.<name>`.
fn nonnegative(spec: &Value, names: &[&str]) -> Vec<FieldError> {
    names.iter().flat_map(|n| validate_nonnegative_field(spec.get(n), &format!("spec.{n}"))).collect()
}

/// ValidateDeployment: metadata and ValidateDeploymentSpec — replicas, selector and template,
/// strategy, minReadySeconds, revisionHistoryLimit, and a progress deadline longer than
/// minReadySeconds.
pub fn validate_deployment(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let spec = spec(obj);
    errs.extend(nonnegative(spec, &["replicas"]));
    errs.extend(validate_selector_matches_template(spec, "deployment"));
    errs.extend(validate_always_running_template(spec, "ReplicaSet"));
    errs.extend(validate_deployment_strategy(spec.get("strategy").unwrap_or(&Value::Null)));
    errs.extend(nonnegative(spec, &["minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"]));
    if let Some(deadline) = spec.get("progressDeadlineSeconds").and_then(Value::as_i64) {
        let min_ready = spec.get("minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
        if deadline <= min_ready {
            errs.push(FieldError::invalid("spec.progressDeadlineSeconds", &json!(deadline), "must be greater than minReadySeconds"));
        }
    }
    errs
}

/// ValidateDeploymentStrategy: Recreate (no rollingUpdate) or RollingUpdate (with one).
fn validate_deployment_strategy(strategy: &Value) -> Vec<FieldError> {
    let rolling = field(strategy, "rollingUpdate");
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "Recreate" => rolling
            .map(|_| FieldError::forbidden("spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"))
            .into_iter()
            .collect(),
        "RollingUpdate" => match rolling {
            None => vec![FieldError::required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil")],
            Some(ru) => validate_rolling_update_deployment(ru, "spec.strategy.rollingUpdate"),
        },
        other => vec![FieldError::not_supported("spec.strategy.type", &json!(other), &["Recreate", "RollingUpdate"])],
    }
}

/// ValidateRollingUpdateDeployment: both budgets valid, not both zero (the rollout could never
/// move), and at most 100% unavailable.
fn validate_rolling_update_deployment(ru: &Value, path: &str) -> Vec<FieldError> {
    let (unavailable, surge) = (field(ru, "maxUnavailable"), field(ru, "maxSurge"));
    let unavailable_path = format!("{path}.maxUnavailable");
    let mut errs = validate_positive_int_or_percent(unavailable, &unavailable_path);
    errs.extend(validate_positive_int_or_percent(surge, &format!("{path}.maxSurge")));
    if int_or_percent_value(unavailable) == 0 && int_or_percent_value(surge) == 0 {
        errs.push(FieldError::invalid(&unavailable_path, unavailable.unwrap_or(&json!(0)), "may not be 0 when `maxSurge` is 0"));
    }
    errs.extend(is_not_more_than_100_percent(unavailable, &unavailable_path));
    errs
}

/// ValidateDeploymentUpdate: the new Deployment is valid and keeps its selector (apps/v1 made
/// selectors immutable: a changed one would orphan the old ReplicaSets).
pub fn validate_deployment_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_deployment(new);
    errs.extend(immutable_selector(new, old));
    errs
}

fn immutable_selector(new: &Value, old: &Value) -> Vec<FieldError> {
    validate_immutable_field(new.pointer("/spec/selector"), old.pointer("/spec/selector"), "spec.selector")
}

/// ValidateReplicaSet: metadata and ValidateReplicaSetSpec — replicas, minReadySeconds, selector
/// and template.
pub fn validate_replica_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let spec = spec(obj);
    errs.extend(nonnegative(spec, &["replicas", "minReadySeconds"]));
    // Kubernetes words the ReplicaSet's empty-selector error as the Deployment's.
    errs.extend(validate_selector_matches_template(spec, "deployment"));
    errs.extend(validate_always_running_template(spec, "ReplicaSet"));
    errs
}

/// ValidateReplicaSetUpdate: the new ReplicaSet is valid and keeps its selector.
pub fn validate_replica_set_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_replica_set(new);
    errs.extend(immutable_selector(new, old));
    errs
}

/// ValidateDaemonSet: metadata and ValidateDaemonSetSpec — selector and template,
/// minReadySeconds, templateGeneration, the update strategy, revisionHistoryLimit.
pub fn validate_daemon_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let spec = spec(obj);
    errs.extend(validate_selector_matches_template(spec, "daemonset"));
    errs.extend(validate_always_running_template(spec, "DaemonSet"));
    errs.extend(nonnegative(spec, &["minReadySeconds", "templateGeneration"]));
    let strategy = spec.get("updateStrategy").unwrap_or(&Value::Null);
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "OnDelete" => {}
        "RollingUpdate" => match field(strategy, "rollingUpdate") {
            None => errs.push(FieldError::required("spec.updateStrategy.rollingUpdate", "")),
            Some(ru) => errs.extend(validate_rolling_update_daemon_set(ru, "spec.updateStrategy.rollingUpdate")),
        },
        other => errs.push(FieldError::not_supported("spec.updateStrategy.type", &json!(other), &["OnDelete", "RollingUpdate"])),
    }
    errs.extend(nonnegative(spec, &["revisionHistoryLimit"]));
    errs
}

/// ValidateRollingUpdateDaemonSet: both budgets valid and at most 100%, and exactly one of them
/// non-zero (a node holds one daemon pod: it is either replaced in place or surged).
fn validate_rolling_update_daemon_set(ru: &Value, path: &str) -> Vec<FieldError> {
    let (unavailable, surge) = (field(ru, "maxUnavailable"), field(ru, "maxSurge"));
    let (unavailable_path, surge_path) = (format!("{path}.maxUnavailable"), format!("{path}.maxSurge"));
    let mut errs = validate_positive_int_or_percent(unavailable, &unavailable_path);
    errs.extend(validate_positive_int_or_percent(surge, &surge_path));
    errs.extend(is_not_more_than_100_percent(unavailable, &unavailable_path));
    errs.extend(is_not_more_than_100_percent(surge, &surge_path));
    match (int_or_percent_value(unavailable) != 0, int_or_percent_value(surge) != 0) {
        (true, true) => errs.push(FieldError::invalid(&surge_path, surge.unwrap_or(&json!(0)), "may not be set when maxUnavailable is non-zero")),
        (false, false) => errs.push(FieldError::required(&unavailable_path, "cannot be 0 when maxSurge is 0")),
        _ => {}
    }
    errs
}

/// ValidateDaemonSetUpdate: the new DaemonSet is valid and keeps its selector.
pub fn validate_daemon_set_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_daemon_set(new);
    errs.extend(immutable_selector(new, old));
    errs
}

/// ValidateStatefulSet: metadata and ValidateStatefulSetSpec — pod management policy, update
/// strategy, PVC retention policy, replicas, minReadySeconds, ordinals, selector and template.
/// `serviceName` may be empty (optional since Kubernetes 1.29).
pub fn validate_stateful_set(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let spec = spec(obj);
    match spec.get("podManagementPolicy").and_then(Value::as_str).unwrap_or("") {
        "" => errs.push(FieldError::required("spec.podManagementPolicy", "")),
        "OrderedReady" | "Parallel" => {}
        other => errs.push(FieldError::invalid("spec.podManagementPolicy", &json!(other), "must be 'OrderedReady' or 'Parallel'")),
    }
    let strategy = spec.get("updateStrategy").unwrap_or(&Value::Null);
    let rolling = field(strategy, "rollingUpdate");
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "" => errs.push(FieldError::required("spec.updateStrategy", "")),
        "OnDelete" => {
            if let Some(ru) = rolling {
                errs.push(FieldError::invalid("spec.updateStrategy.rollingUpdate", ru, "only allowed for updateStrategy 'RollingUpdate'"));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = rolling {
                errs.extend(validate_nonnegative_field(ru.get("partition"), "spec.updateStrategy.rollingUpdate.partition"));
                errs.extend(validate_positive_int_or_percent(field(ru, "maxUnavailable"), "spec.updateStrategy.rollingUpdate.maxUnavailable"));
            }
        }
        _ => errs.push(FieldError::invalid("spec.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'")),
    }
    if let Some(policy) = field(spec, "persistentVolumeClaimRetentionPolicy") {
        for when in ["whenDeleted", "whenScaled"] {
            let v = policy.get(when).and_then(Value::as_str).unwrap_or("");
            if v != "Retain" && v != "Delete" {
                let path = format!("spec.persistentVolumeClaimRetentionPolicy.{when}");
                errs.push(FieldError::not_supported(&path, &json!(v), &["Retain", "Delete"]));
            }
        }
    }
    errs.extend(nonnegative(spec, &["replicas", "minReadySeconds"]));
    errs.extend(validate_nonnegative_field(spec.pointer("/ordinals/start"), "spec.ordinals.start"));
    errs.extend(validate_selector_matches_template(spec, "statefulset"));
    errs.extend(validate_always_running_template(&with_claim_template_volumes(spec), "StatefulSet"));
    errs
}

/// The spec with a volume for each of its `volumeClaimTemplates` added to the pod template, as
/// the controller adds them to each pod (a `persistentVolumeClaim` volume of the template's name):
/// the template's volume mounts may name them. Kubernetes leaves a StatefulSet's pod template
/// unvalidated for this reason ("we should really check that the union of the given volumes and
/// volumeClaims match volume mounts"); kubelab validates it, with that union.
fn with_claim_template_volumes(spec: &Value) -> Value {
    let mut spec = spec.clone();
    let names: Vec<String> = spec
        .get("volumeClaimTemplates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/metadata/name").and_then(Value::as_str).map(String::from))
        .collect();
    if names.is_empty() {
        return spec;
    }
    if let Some(pod) = spec.pointer_mut("/template/spec").and_then(Value::as_object_mut) {
        let volumes = pod.entry("volumes").or_insert_with(|| json!([]));
        if let Some(list) = volumes.as_array_mut() {
            for name in names {
                if !list.iter().any(|v| v.get("name").and_then(Value::as_str) == Some(name.as_str())) {
                    list.push(json!({"name": name, "persistentVolumeClaim": {"claimName": name}}));
                }
            }
        }
    }
    spec
}

/// ValidateStatefulSetUpdate: the new StatefulSet is valid, keeps its selector, and changes its
/// spec only in [`STATEFUL_SET_MUTABLE_FIELDS`]: identity and storage of each ordinal pod
/// (service name, volume claim templates, pod management) are fixed at creation.
pub fn validate_stateful_set_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_stateful_set(new);
    errs.extend(immutable_selector(new, old));
    let old_spec = old.get("spec").cloned().unwrap_or(json!({}));
    let mut restored = new.get("spec").cloned().unwrap_or(json!({}));
    if let Some(m) = restored.as_object_mut() {
        for name in STATEFUL_SET_MUTABLE_FIELDS {
            match old_spec.get(name) {
                Some(v) => m.insert(name.to_string(), v.clone()),
                None => m.remove(name),
            };
        }
    }
    if restored != old_spec {
        errs.push(FieldError::forbidden("spec", STATEFUL_SET_UPDATE_FORBIDDEN));
    }
    errs
}

/// ValidateControllerRevision: metadata, `data` present, `revision` not negative.
pub fn validate_controller_revision(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    if field(obj, "data").is_none() {
        errs.push(FieldError::required("data", "data is mandatory"));
    }
    errs.extend(validate_nonnegative_field(obj.get("revision"), "revision"));
    errs
}

/// ValidateControllerRevisionUpdate: the new revision is valid and its `data` unchanged — a
/// revision is a snapshot, and rollbacks trust it.
pub fn validate_controller_revision_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_controller_revision(new);
    errs.extend(validate_immutable_field(new.get("data"), old.get("data"), "data"));
    errs
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use apimachinery::validation::FieldErrorReason::{self, Forbidden, Invalid, NotSupported, Required};

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "containers": [{"name": "c", "image": "nginx"}]}})
    }

    fn deployment() -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
            "replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template(),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600}})
    }

    fn replica_set() -> Value {
        json!({"metadata": {"name": "web-1", "namespace": "default"}, "spec": {
            "replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": template()}})
    }

    fn daemon_set() -> Value {
        json!({"metadata": {"name": "agent", "namespace": "kube-system"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}}, "template": template(), "revisionHistoryLimit": 10,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}}})
    }

    fn stateful_set() -> Value {
        json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {
            "replicas": 3, "serviceName": "db", "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": {"app": "web"}}, "template": template(),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "revisionHistoryLimit": 10}})
    }

    /// The (field, reason) of each error, in order.
    pub(crate) fn found(errs: &[FieldError]) -> Vec<(&str, FieldErrorReason)> {
        errs.iter().map(|e| (e.field.as_str(), e.reason)).collect()
    }

    /// `obj` with the JSON `value` set at the slash-separated `pointer` (whose parents exist).
    pub(crate) fn with(obj: &Value, pointer: &str, value: Value) -> Value {
        let mut o = obj.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("pointer has a slash");
        let target = if parent.is_empty() { &mut o } else { o.pointer_mut(parent).expect("parent exists") };
        match value {
            Value::Null => {
                target.as_object_mut().expect("parent is an object").remove(key);
            }
            v => target[key] = v,
        }
        o
    }

    #[test]
    fn valid_workloads_pass() {
        assert_eq!(validate_deployment(&deployment()), vec![]);
        assert_eq!(validate_replica_set(&replica_set()), vec![]);
        assert_eq!(validate_daemon_set(&daemon_set()), vec![]);
        assert_eq!(validate_stateful_set(&stateful_set()), vec![]);
        // serviceName is optional.
        assert_eq!(validate_stateful_set(&with(&stateful_set(), "/spec/serviceName", Value::Null)), vec![]);
        let recreate = with(&deployment(), "/spec/strategy", json!({"type": "Recreate"}));
        assert_eq!(validate_deployment(&recreate), vec![]);
    }

    #[test]
    fn every_workload_needs_a_selector_matching_its_template() {
        type Check = fn(&Value) -> Vec<FieldError>;
        let kinds: [(Value, Check, &str); 4] = [
            (deployment(), validate_deployment, "deployment"),
            (replica_set(), validate_replica_set, "deployment"),
            (daemon_set(), validate_daemon_set, "daemonset"),
            (stateful_set(), validate_stateful_set, "statefulset"),
        ];
        for (obj, validate, word) in kinds {
            let errs = validate(&with(&obj, "/spec/selector", json!({})));
            assert_eq!(found(&errs), vec![("spec.selector", Invalid)], "{word}");
            assert_eq!(errs[0].message, format!("Invalid value: {{}}: empty selector is invalid for {word}"));

            // A missing selector converts to one matching nothing, so the labels fail too.
            let errs = validate(&with(&obj, "/spec/selector", Value::Null));
            assert_eq!(found(&errs), vec![("spec.selector", Required), ("spec.template.metadata.labels", Invalid)]);

            let errs = validate(&with(&obj, "/spec/selector", json!({"matchLabels": {"app": "db"}})));
            assert_eq!(found(&errs), vec![("spec.template.metadata.labels", Invalid)]);
            assert_eq!(errs[0].message, "Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`");

            let bad = json!({"matchExpressions": [{"key": "app", "operator": "Near"}]});
            assert_eq!(found(&validate(&with(&obj, "/spec/selector", bad))), vec![("spec.selector", Invalid)]);

            let errs = validate(&with(&obj, "/spec/template/spec/restartPolicy", json!("OnFailure")));
            assert_eq!(found(&errs), vec![("spec.template.spec.restartPolicy", NotSupported)]);
            assert_eq!(errs[0].message, "Unsupported value: \"OnFailure\": supported values: \"Always\"");

            let errs = validate(&with(&obj, "/spec/template/spec/activeDeadlineSeconds", json!(5)));
            assert_eq!(found(&errs), vec![("spec.template.spec.activeDeadlineSeconds", Forbidden)]);

            // The template is validated as a pod's.
            let errs = validate(&with(&obj, "/spec/template/spec/containers", json!([{"name": "c"}])));
            assert!(found(&errs).contains(&("spec.template.spec.containers[0].image", Required)), "{errs:?}");

            let errs = validate(&with(&obj, "/metadata/name", json!("Bad_Name")));
            assert_eq!(found(&errs), vec![("metadata.name", Invalid)]);
        }
    }

    #[test]
    fn deployment_numbers() {
        for (pointer, value, field) in [
            ("/spec/replicas", json!(-1), "spec.replicas"),
            ("/spec/minReadySeconds", json!(-1), "spec.minReadySeconds"),
            ("/spec/revisionHistoryLimit", json!(-1), "spec.revisionHistoryLimit"),
        ] {
            let errs = validate_deployment(&with(&deployment(), pointer, value));
            assert_eq!(found(&errs), vec![(field, Invalid)]);
            assert_eq!(errs[0].message, "Invalid value: -1: must be greater than or equal to 0");
        }
        let slow = with(&deployment(), "/spec/minReadySeconds", json!(600));
        let errs = validate_deployment(&slow);
        assert_eq!(found(&errs), vec![("spec.progressDeadlineSeconds", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: 600: must be greater than minReadySeconds");
        assert_eq!(validate_deployment(&with(&slow, "/spec/progressDeadlineSeconds", Value::Null)), vec![]);
    }

    #[test]
    fn deployment_strategy() {
        let d = deployment();
        let errs = validate_deployment(&with(&d, "/spec/strategy/type", json!("Recreate")));
        assert_eq!(found(&errs), vec![("spec.strategy.rollingUpdate", Forbidden)]);
        assert_eq!(errs[0].message, "Forbidden: may not be specified when strategy `type` is 'Recreate'");

        let errs = validate_deployment(&with(&d, "/spec/strategy/type", json!("BlueGreen")));
        assert_eq!(found(&errs), vec![("spec.strategy.type", NotSupported)]);

        let errs = validate_deployment(&with(&d, "/spec/strategy/rollingUpdate", Value::Null));
        assert_eq!(found(&errs), vec![("spec.strategy.rollingUpdate", Required)]);

        let ru = "/spec/strategy/rollingUpdate";
        let errs = validate_deployment(&with(&d, ru, json!({"maxUnavailable": 0, "maxSurge": "0%"})));
        assert_eq!(found(&errs), vec![("spec.strategy.rollingUpdate.maxUnavailable", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: 0: may not be 0 when `maxSurge` is 0");

        let errs = validate_deployment(&with(&d, ru, json!({"maxUnavailable": "110%", "maxSurge": -1})));
        assert_eq!(found(&errs), vec![("spec.strategy.rollingUpdate.maxSurge", Invalid), ("spec.strategy.rollingUpdate.maxUnavailable", Invalid)]);
        assert_eq!(errs[1].message, "Invalid value: \"110%\": must not be greater than 100%");

        let errs = validate_deployment(&with(&d, ru, json!({"maxUnavailable": "half", "maxSurge": 1})));
        assert_eq!(found(&errs), vec![("spec.strategy.rollingUpdate.maxUnavailable", Invalid)]);
        assert_eq!(
            errs[0].message,
            "Invalid value: \"half\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
        );
        // A surge alone is enough, as is a percentage unavailable alone.
        assert_eq!(validate_deployment(&with(&d, ru, json!({"maxUnavailable": 0, "maxSurge": 1}))), vec![]);
        assert_eq!(validate_deployment(&with(&d, ru, json!({"maxUnavailable": "100%", "maxSurge": 0}))), vec![]);
    }

    #[test]
    fn selectors_are_immutable() {
        type Update = fn(&Value, &Value) -> Vec<FieldError>;
        let kinds: [(Value, Update); 4] = [
            (deployment(), validate_deployment_update),
            (replica_set(), validate_replica_set_update),
            (daemon_set(), validate_daemon_set_update),
            (stateful_set(), validate_stateful_set_update),
        ];
        for (old, validate) in kinds {
            assert_eq!(validate(&with(&old, "/spec/replicas", json!(5)), &old), vec![]);
            let new = with(&old, "/spec/selector/matchLabels/tier", json!("front"));
            let new = with(&new, "/spec/template/metadata/labels/tier", json!("front"));
            let errs = validate(&new, &old);
            assert_eq!(found(&errs)[0], ("spec.selector", Invalid));
            assert_eq!(errs[0].message, "Invalid value: {\"matchLabels\":{\"app\":\"web\",\"tier\":\"front\"}}: field is immutable");
        }
    }

    #[test]
    fn daemon_set_update_strategy() {
        let ds = daemon_set();
        let ru = "/spec/updateStrategy/rollingUpdate";
        let errs = validate_daemon_set(&with(&ds, ru, json!({"maxUnavailable": 0, "maxSurge": 0})));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.rollingUpdate.maxUnavailable", Required)]);
        assert_eq!(errs[0].message, "Required value: cannot be 0 when maxSurge is 0");
        let errs = validate_daemon_set(&with(&ds, ru, json!({"maxUnavailable": 1, "maxSurge": "10%"})));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.rollingUpdate.maxSurge", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: \"10%\": may not be set when maxUnavailable is non-zero");
        assert_eq!(validate_daemon_set(&with(&ds, ru, json!({"maxUnavailable": 0, "maxSurge": "10%"}))), vec![]);
        let errs = validate_daemon_set(&with(&ds, ru, json!({"maxUnavailable": "101%"})));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.rollingUpdate.maxUnavailable", Invalid)]);

        assert_eq!(validate_daemon_set(&with(&ds, "/spec/updateStrategy", json!({"type": "OnDelete"}))), vec![]);
        let errs = validate_daemon_set(&with(&ds, "/spec/updateStrategy", json!({"type": "Replace"})));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.type", NotSupported)]);
        let errs = validate_daemon_set(&with(&ds, ru, Value::Null));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.rollingUpdate", Required)]);
        let errs = validate_daemon_set(&with(&ds, "/spec/revisionHistoryLimit", json!(-2)));
        assert_eq!(found(&errs), vec![("spec.revisionHistoryLimit", Invalid)]);
    }

    #[test]
    fn stateful_set_policies() {
        let ss = stateful_set();
        let errs = validate_stateful_set(&with(&ss, "/spec/podManagementPolicy", json!("Random")));
        assert_eq!(found(&errs), vec![("spec.podManagementPolicy", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'");
        let errs = validate_stateful_set(&with(&ss, "/spec/podManagementPolicy", Value::Null));
        assert_eq!(found(&errs), vec![("spec.podManagementPolicy", Required)]);

        let errs = validate_stateful_set(&with(&ss, "/spec/updateStrategy/rollingUpdate/partition", json!(-1)));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.rollingUpdate.partition", Invalid)]);
        let errs = validate_stateful_set(&with(&ss, "/spec/updateStrategy/type", json!("OnDelete")));
        assert_eq!(found(&errs), vec![("spec.updateStrategy.rollingUpdate", Invalid)]);
        assert_eq!(validate_stateful_set(&with(&ss, "/spec/updateStrategy", json!({"type": "OnDelete"}))), vec![]);
        let errs = validate_stateful_set(&with(&ss, "/spec/updateStrategy", json!({"type": "Sometimes"})));
        assert_eq!(found(&errs), vec![("spec.updateStrategy", Invalid)]);
        let errs = validate_stateful_set(&with(&ss, "/spec/updateStrategy", json!({})));
        assert_eq!(found(&errs), vec![("spec.updateStrategy", Required)]);

        let errs = validate_stateful_set(&with(&ss, "/spec/persistentVolumeClaimRetentionPolicy/whenScaled", json!("Keep")));
        assert_eq!(found(&errs), vec![("spec.persistentVolumeClaimRetentionPolicy.whenScaled", NotSupported)]);
        let errs = validate_stateful_set(&with(&ss, "/spec/ordinals", json!({"start": -1})));
        assert_eq!(found(&errs), vec![("spec.ordinals.start", Invalid)]);
    }

    #[test]
    fn stateful_set_mounts_may_name_its_claim_templates() {
        let mut ss = stateful_set();
        ss["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
        let errs = validate_stateful_set(&ss);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.template.spec.containers[0].volumeMounts[0].name"], "{errs:?}");
        ss["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]);
        assert_eq!(validate_stateful_set(&ss), vec![]);
    }

    #[test]
    fn stateful_set_update_changes_only_the_listed_fields() {
        let old = stateful_set();
        let mut new = with(&old, "/spec/replicas", json!(1));
        new = with(&new, "/spec/template/spec/containers/0/image", json!("nginx:2"));
        new = with(&new, "/spec/updateStrategy", json!({"type": "OnDelete"}));
        new = with(&new, "/spec/minReadySeconds", json!(5));
        new = with(&new, "/spec/ordinals", json!({"start": 1}));
        new = with(&new, "/spec/persistentVolumeClaimRetentionPolicy/whenScaled", json!("Delete"));
        assert_eq!(validate_stateful_set_update(&new, &old), vec![]);

        for (pointer, value) in [("/spec/serviceName", json!("other")), ("/spec/podManagementPolicy", json!("Parallel")), ("/spec/revisionHistoryLimit", Value::Null)] {
            let errs = validate_stateful_set_update(&with(&old, pointer, value), &old);
            assert_eq!(found(&errs), vec![("spec", Forbidden)], "{pointer}");
            assert_eq!(errs[0].message, format!("Forbidden: {STATEFUL_SET_UPDATE_FORBIDDEN}"));
        }
    }

    #[test]
    fn controller_revisions() {
        let rev = json!({"metadata": {"name": "web-5d9f", "namespace": "default"}, "revision": 2, "data": {"spec": {"template": {}}}});
        assert_eq!(validate_controller_revision(&rev), vec![]);
        let errs = validate_controller_revision(&with(&rev, "/data", Value::Null));
        assert_eq!(found(&errs), vec![("data", Required)]);
        assert_eq!(errs[0].message, "Required value: data is mandatory");
        let errs = validate_controller_revision(&with(&rev, "/revision", json!(-1)));
        assert_eq!(found(&errs), vec![("revision", Invalid)]);

        // The revision number may move (a rollback renumbers it); the data may not.
        assert_eq!(validate_controller_revision_update(&with(&rev, "/revision", json!(7)), &rev), vec![]);
        let errs = validate_controller_revision_update(&with(&rev, "/data", json!({"spec": {}})), &rev);
        assert_eq!(found(&errs), vec![("data", Invalid)]);
        assert_eq!(errs[0].message, "Invalid value: {\"spec\":{}}: field is immutable");
    }
}
