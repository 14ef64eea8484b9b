//! Mirrors the pod part of pkg/apis/core/validation/validation.go: ValidatePodCreate and
//! ValidatePodUpdate.
//!
//! A pod is validated after defaulting, so a field defaulting fills in is checked against the
//! values it may take rather than for being there. On update almost the whole spec is frozen: a
//! running pod is changed by replacing it, not by editing it.

use apimachinery::validation::{FieldError, FieldErrorReason, is_dns1123_label, is_dns1123_subdomain};
use serde_json::{Value, json};

use super::validate_object_meta;

/// The message Kubernetes gives when a pod update touches a field it may not.
pub const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn one_of(field: &str, v: Option<&Value>, allowed: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(s) = v.and_then(Value::as_str)
        && !allowed.contains(&s)
    {
        errs.push(FieldError::not_supported(field, &json!(s), allowed));
    }
}

fn validate_containers(spec: &Value, spec_path: &str, list: &str, seen: &mut Vec<String>, volumes: &[String], errs: &mut Vec<FieldError>) {
    let Some(containers) = spec.get(list).and_then(Value::as_array) else { return };
    for (i, c) in containers.iter().enumerate() {
        let path = format!("{spec_path}.{list}[{i}]");
        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        } else {
            for msg in is_dns1123_label(name) {
                errs.push(FieldError::invalid(&format!("{path}.name"), &json!(name), &msg));
            }
            if seen.iter().any(|s| s == name) {
                errs.push(FieldError::duplicate(&format!("{path}.name"), &json!(name)));
            }
            seen.push(name.to_string());
        }
        if c.get("image").and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
            errs.push(FieldError::required(&format!("{path}.image"), ""));
        }
        one_of(&format!("{path}.imagePullPolicy"), c.get("imagePullPolicy"), &["Always", "IfNotPresent", "Never"], errs);
        one_of(&format!("{path}.terminationMessagePolicy"), c.get("terminationMessagePolicy"), &["File", "FallbackToLogsOnError"], errs);
        for (j, p) in c.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let pp = format!("{path}.ports[{j}]");
            match p.get("containerPort").and_then(Value::as_i64) {
                Some(n) if (1..=65535).contains(&n) => {}
                Some(n) => errs.push(FieldError::invalid(&format!("{pp}.containerPort"), &json!(n), "must be between 1 and 65535, inclusive")),
                None => errs.push(FieldError::required(&format!("{pp}.containerPort"), "")),
            }
            if let Some(n) = p.get("hostPort").and_then(Value::as_i64)
                && !(0..=65535).contains(&n)
            {
                errs.push(FieldError::invalid(&format!("{pp}.hostPort"), &json!(n), "must be between 1 and 65535, inclusive"));
            }
            one_of(&format!("{pp}.protocol"), p.get("protocol"), &["TCP", "UDP", "SCTP"], errs);
        }
        for (j, e) in c.get("env").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if e.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
                errs.push(FieldError::required(&format!("{path}.env[{j}].name"), ""));
            }
        }
        let mut mount_paths: Vec<&str> = Vec::new();
        for (j, m) in c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let mp = format!("{path}.volumeMounts[{j}]");
            let vname = m.get("name").and_then(Value::as_str).unwrap_or("");
            if vname.is_empty() {
                errs.push(FieldError::required(&format!("{mp}.name"), ""));
            } else if !volumes.iter().any(|v| v == vname) {
                errs.push(volume_not_found(&format!("{mp}.name"), vname));
            }
            match m.get("mountPath").and_then(Value::as_str) {
                Some(p) if !p.is_empty() => {
                    if mount_paths.contains(&p) {
                        errs.push(FieldError::invalid(&format!("{mp}.mountPath"), &json!(p), "must be unique"));
                    }
                    mount_paths.push(p);
                }
                _ => errs.push(FieldError::required(&format!("{mp}.mountPath"), "")),
            }
        }
    }
}

/// field.NotFound ("Not found: \"name\""); reported with the Invalid reason.
fn volume_not_found(field: &str, name: &str) -> FieldError {
    FieldError { field: field.into(), reason: FieldErrorReason::Invalid, message: format!("Not found: {}", json!(name)) }
}

/// ValidatePodSpec, the parts kubelab enforces, for a spec at `path` (`spec` in a pod,
/// `spec.template.spec` in a workload): volumes (named, unique), init and app containers (named
/// uniquely across both lists, with an image, valid ports, env names and volume mounts of declared
/// volumes), the restart and DNS policies and the grace period.
pub fn validate_pod_spec(spec: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if spec.get("containers").and_then(Value::as_array).is_none_or(|c| c.is_empty()) {
        errs.push(FieldError::required(&format!("{path}.containers"), ""));
    }
    let mut volumes: Vec<String> = Vec::new();
    for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let field = format!("{path}.volumes[{i}].name");
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&field, ""));
            continue;
        }
        for msg in is_dns1123_label(name) {
            errs.push(FieldError::invalid(&field, &json!(name), &msg));
        }
        if volumes.iter().any(|x| x == name) {
            errs.push(FieldError::duplicate(&field, &json!(name)));
        }
        volumes.push(name.to_string());
    }
    let mut names = Vec::new();
    validate_containers(spec, path, "initContainers", &mut names, &volumes, &mut errs);
    validate_containers(spec, path, "containers", &mut names, &volumes, &mut errs);
    one_of(&format!("{path}.restartPolicy"), spec.get("restartPolicy"), &["Always", "OnFailure", "Never"], &mut errs);
    one_of(&format!("{path}.dnsPolicy"), spec.get("dnsPolicy"), &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"], &mut errs);
    if let Some(g) = spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64)
        && g < 0
    {
        errs.push(FieldError::invalid(&format!("{path}.terminationGracePeriodSeconds"), &json!(g), "must be greater than or equal to 0"));
    }
    errs
}

/// ValidatePodTemplateSpec: a workload's pod template at `path` (`spec.template`) — its labels
/// and annotations as metadata (no name: the controller names each pod) and its spec.
pub fn validate_pod_template_spec(template: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = template.get("metadata").unwrap_or(&Value::Null);
    errs.extend(apimachinery::validation::validate_labels(meta.get("labels"), &format!("{path}.metadata.labels")));
    errs.extend(apimachinery::validation::validate_annotations(meta.get("annotations"), &format!("{path}.metadata.annotations")));
    match template.get("spec") {
        Some(spec) => errs.extend(validate_pod_spec(spec, &format!("{path}.spec"))),
        None => errs.push(FieldError::required(&format!("{path}.spec.containers"), "")),
    }
    errs
}

/// ValidatePodCreate, the parts kubelab enforces: metadata, the spec ([`validate_pod_spec`]), the
/// node name and the scheduling gates.
pub fn validate_pod_create(obj: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(obj, true, is_dns1123_subdomain);
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    errs.extend(validate_pod_spec(spec, "spec"));
    if let Some(node) = spec.get("nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        for msg in is_dns1123_subdomain(node) {
            errs.push(FieldError::invalid("spec.nodeName", &json!(node), &msg));
        }
        if !scheduling_gates(obj).is_empty() {
            errs.push(FieldError::forbidden("spec.nodeName", "cannot be set until all schedulingGates have been removed"));
        }
    }
    let mut gates: Vec<&str> = Vec::new();
    for (i, g) in scheduling_gates(obj).into_iter().enumerate() {
        let field = format!("spec.schedulingGates[{i}].name");
        for msg in apimachinery::validation::is_qualified_name(g) {
            errs.push(FieldError::invalid(&field, &json!(g), &msg));
        }
        if gates.contains(&g) {
            errs.push(FieldError::duplicate(&field, &json!(g)));
        }
        gates.push(g);
    }
    errs
}

/// The names in `spec.schedulingGates`, in order.
fn scheduling_gates(pod: &Value) -> Vec<&str> {
    pod.pointer("/spec/schedulingGates").and_then(Value::as_array).into_iter().flatten().map(|g| g.get("name").and_then(Value::as_str).unwrap_or("")).collect()
}

/// The spec a pod update may produce from `old`: only the mutable fields taken from `new`.
fn with_mutable_fields(old: &Value, new: &Value) -> Value {
    let mut spec = old.get("spec").cloned().unwrap_or(json!({}));
    for list in ["containers", "initContainers"] {
        if let (Some(olds), Some(news)) = (spec.get_mut(list).and_then(Value::as_array_mut), new.pointer(&format!("/spec/{list}")).and_then(Value::as_array))
            && olds.len() == news.len()
        {
            for (o, n) in olds.iter_mut().zip(news) {
                if let Some(img) = n.get("image") {
                    o["image"] = img.clone();
                }
            }
        }
    }
    for field in ["activeDeadlineSeconds", "terminationGracePeriodSeconds"] {
        match new.pointer(&format!("/spec/{field}")) {
            Some(v) => spec[field] = v.clone(),
            None => {
                if let Some(m) = spec.as_object_mut() {
                    m.remove(field);
                }
            }
        }
    }
    // Scheduling gates may only be removed (a new one is refused in validate_pod_update).
    match new.pointer("/spec/schedulingGates") {
        Some(g) => spec["schedulingGates"] = g.clone(),
        None => {
            if let Some(m) = spec.as_object_mut() {
                m.remove("schedulingGates");
            }
        }
    }
    // Tolerations may only grow.
    if let (Some(o), Some(n)) = (old.pointer("/spec/tolerations").and_then(Value::as_array), new.pointer("/spec/tolerations").and_then(Value::as_array))
        && o.iter().all(|t| n.contains(t))
    {
        spec["tolerations"] = json!(n);
    } else if old.pointer("/spec/tolerations").is_none()
        && let Some(n) = new.pointer("/spec/tolerations")
    {
        spec["tolerations"] = n.clone();
    }
    spec
}

/// ValidatePodUpdate: the new object's metadata, a spec that differs from the old one only where
/// a pod may change ([`POD_UPDATE_FORBIDDEN`] lists where), and an image for every container.
pub fn validate_pod_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(new, true, is_dns1123_subdomain);
    let allowed = with_mutable_fields(old, new);
    if new.get("spec") != Some(&allowed) {
        errs.push(FieldError::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
    // validateOnlyDeletedSchedulingGates: whoever holds a gate removes it; nobody adds one.
    let before = scheduling_gates(old);
    for (i, g) in scheduling_gates(new).into_iter().enumerate() {
        if !before.contains(&g) {
            errs.push(FieldError::forbidden(&format!("spec.schedulingGates[{i}].name"), &format!("only deletion is allowed, but found new scheduling gate '{g}'")));
        }
    }
    for (i, ctr) in new.pointer("/spec/containers").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if ctr.get("image").and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
            errs.push(FieldError::required(&format!("spec.containers[{i}].image"), ""));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    }

    #[test]
    fn validation_reports_every_problem_with_its_field() {
        assert!(validate_pod_create(&pod()).is_empty());
        let mut bad = pod();
        bad["metadata"]["name"] = json!("Web_1");
        bad["spec"]["containers"] = json!([{"name": "c", "image": ""}, {"name": "c", "image": "x", "ports": [{"containerPort": 70000}]}]);
        bad["spec"]["restartPolicy"] = json!("Sometimes");
        let fields: Vec<String> = validate_pod_create(&bad).into_iter().map(|c| format!("{}:{}", c.field, c.reason_str())).collect();
        assert_eq!(
            fields,
            vec![
                "metadata.name:FieldValueInvalid",
                "spec.containers[0].image:FieldValueRequired",
                "spec.containers[1].name:FieldValueDuplicate",
                "spec.containers[1].ports[0].containerPort:FieldValueInvalid",
                "spec.restartPolicy:FieldValueNotSupported",
            ]
        );
    }

    #[test]
    fn a_pod_update_may_change_only_images_deadlines_and_add_tolerations() {
        let old = pod();
        let mut image = pod();
        image["spec"]["containers"][0]["image"] = json!("busybox:1.36");
        assert!(validate_pod_update(&image, &old).is_empty());
        let mut tol = pod();
        tol["spec"]["tolerations"] = json!([{"key": "k", "operator": "Exists"}]);
        assert!(validate_pod_update(&tol, &old).is_empty());
        let mut restart = pod();
        restart["spec"]["restartPolicy"] = json!("Never");
        let c = validate_pod_update(&restart, &old);
        assert_eq!(c.len(), 1);
        assert!(c[0].message.contains("pod updates may not change fields"));
    }

    #[test]
    fn scheduling_gates_may_only_be_removed() {
        let mut old = pod();
        old["spec"]["schedulingGates"] = json!([{"name": "example.com/a"}, {"name": "b"}]);
        assert!(validate_pod_create(&old).is_empty());
        let mut fewer = old.clone();
        fewer["spec"]["schedulingGates"] = json!([{"name": "b"}]);
        assert!(validate_pod_update(&fewer, &old).is_empty());
        let mut none = old.clone();
        none["spec"].as_object_mut().unwrap().remove("schedulingGates");
        assert!(validate_pod_update(&none, &old).is_empty());
        let mut more = old.clone();
        more["spec"]["schedulingGates"] = json!([{"name": "b"}, {"name": "x"}]);
        let errs = validate_pod_update(&more, &old);
        assert_eq!(errs.iter().map(|e| (e.field.as_str(), e.message.as_str())).collect::<Vec<_>>(), [("spec.schedulingGates[1].name", "Forbidden: only deletion is allowed, but found new scheduling gate 'x'")]);
        // Gates and a node at once, or a gate twice, are refused on create.
        let mut bound = old.clone();
        bound["spec"]["nodeName"] = json!("node1");
        assert!(validate_pod_create(&bound).iter().any(|e| e.field == "spec.nodeName" && e.message.contains("cannot be set until all schedulingGates have been removed")));
        let mut twice = pod();
        twice["spec"]["schedulingGates"] = json!([{"name": "a"}, {"name": "a"}]);
        assert!(validate_pod_create(&twice).iter().any(|e| e.field == "spec.schedulingGates[1].name"));
    }
}
