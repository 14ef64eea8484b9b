//! Mirrors pkg/apis/storage/validation/validation.go: ValidateStorageClass, ValidateCSIDriver,
//! ValidateCSINode, ValidateVolumeAttachment and their `*Update`s.
//!
//! What may never change after creation is what the rest of the system has already acted on: a
//! class's provisioner, parameters, reclaim policy and binding mode (volumes were made by them);
//! a driver's attachRequired and lifecycle modes (attachments were or were not made); a
//! registered driver's nodeID and topology keys on a node; a VolumeAttachment's whole spec.

use apimachinery::validation::{FieldError, is_dns1123_subdomain};
use serde_json::{Value, json};

use crate::core::validation::persistentvolume::{validate_csi_driver_name, validate_qualified_name};
use crate::core::validation::{validate_immutable_field, validate_object_meta};

const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
const LIFECYCLE_MODES: &[&str] = &["Ephemeral", "Persistent"];
const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
/// The longest parameters map (keys plus values) a class may carry.
const MAX_PROVISIONER_PARAMETER_SIZE: usize = 256 * 1024;
/// How many parameters a class may carry.
const MAX_PROVISIONER_PARAMETER_LEN: usize = 512;
/// The longest nodeID a CSINode driver entry may carry.
const CSI_NODE_ID_MAX_LENGTH: usize = 192;

/// ValidateStorageClass, step by step:
/// 1. metadata, the name a DNS subdomain;
/// 2. a provisioner: required, at most 255 characters, a qualified name (lower-cased);
/// 3. parameters: keys not empty, at most 512 of them and 256 KiB in all;
/// 4. reclaim policy Delete or Retain; binding mode Immediate or WaitForFirstConsumer (required:
///    the defaults set it).
pub fn validate_storage_class(class: &Value) -> Vec<FieldError> {
    // Step 1.
    let mut errs = validate_object_meta(class, false, is_dns1123_subdomain);
    // Step 2.
    match class.get("provisioner").and_then(Value::as_str).filter(|p| !p.is_empty()) {
        None => errs.push(FieldError::required("provisioner", "")),
        Some(p) => {
            if p.len() > 255 {
                errs.push(FieldError::too_long("provisioner", 255));
            }
            errs.extend(validate_qualified_name(&p.to_lowercase(), "provisioner"));
        }
    }
    // Step 3.
    if let Some(params) = class.get("parameters").and_then(Value::as_object) {
        if params.len() > MAX_PROVISIONER_PARAMETER_LEN {
            errs.push(FieldError::too_many("parameters", params.len(), MAX_PROVISIONER_PARAMETER_LEN));
        }
        let mut size = 0;
        for (k, v) in params {
            if k.is_empty() {
                errs.push(FieldError::invalid("parameters", &json!(k), "field can not be empty."));
            }
            size += k.len() + v.as_str().map_or(0, str::len);
        }
        if size > MAX_PROVISIONER_PARAMETER_SIZE {
            errs.push(FieldError::too_long("parameters", MAX_PROVISIONER_PARAMETER_SIZE));
        }
    }
    // Step 4.
    if let Some(policy) = class.get("reclaimPolicy").filter(|v| !v.is_null())
        && !policy.as_str().is_some_and(|p| RECLAIM_POLICIES.contains(&p))
    {
        errs.push(FieldError::not_supported("reclaimPolicy", policy, RECLAIM_POLICIES));
    }
    match class.get("volumeBindingMode").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required("volumeBindingMode", "")),
        Some(mode) if !mode.as_str().is_some_and(|m| BINDING_MODES.contains(&m)) => errs.push(FieldError::not_supported("volumeBindingMode", mode, BINDING_MODES)),
        Some(_) => {}
    }
    errs
}

/// ValidateStorageClassUpdate: the new class is valid, and its parameters, provisioner, reclaim
/// policy and binding mode are the old ones (labels, annotations — the default mark — and
/// allowVolumeExpansion may change).
pub fn validate_storage_class_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_storage_class(new);
    let empty = json!({});
    let params = |c: &Value| c.get("parameters").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| empty.clone());
    if params(new) != params(old) {
        errs.push(FieldError::forbidden("parameters", "updates to parameters are forbidden."));
    }
    if new.get("provisioner") != old.get("provisioner") {
        errs.push(FieldError::forbidden("provisioner", "updates to provisioner are forbidden."));
    }
    if new.get("reclaimPolicy") != old.get("reclaimPolicy") {
        errs.push(FieldError::forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."));
    }
    errs.extend(validate_immutable_field(new.get("volumeBindingMode"), old.get("volumeBindingMode"), "volumeBindingMode"));
    errs
}

/// ValidateCSIDriver: metadata (the name a DNS subdomain) and validateCSIDriverSpec — the
/// booleans the defaults set are present, the lifecycle modes and fsGroupPolicy known, token
/// audiences unique. (Kubernetes spells the path of attachRequired `spec.attachedRequired`.)
pub fn validate_csi_driver(driver: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(driver, false, is_dns1123_subdomain);
    let spec = driver.get("spec").unwrap_or(&Value::Null);
    for (field, path) in [
        ("attachRequired", "spec.attachedRequired"),
        ("podInfoOnMount", "spec.podInfoOnMount"),
        ("storageCapacity", "spec.storageCapacity"),
        ("requiresRepublish", "spec.requiresRepublish"),
    ] {
        if !spec.get(field).is_some_and(Value::is_boolean) {
            errs.push(FieldError::required(path, &format!("must specify {field}")));
        }
    }
    if let Some(policy) = spec.get("fsGroupPolicy").filter(|v| !v.is_null())
        && !policy.as_str().is_some_and(|p| FS_GROUP_POLICIES.contains(&p))
    {
        errs.push(FieldError::not_supported("spec.fsGroupPolicy", policy, FS_GROUP_POLICIES));
    }
    for mode in spec.get("volumeLifecycleModes").and_then(Value::as_array).into_iter().flatten() {
        if !mode.as_str().is_some_and(|m| LIFECYCLE_MODES.contains(&m)) {
            errs.push(FieldError::not_supported("spec.volumeLifecycleModes", mode, LIFECYCLE_MODES));
        }
    }
    let mut audiences = Vec::new();
    for (i, request) in spec.get("tokenRequests").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let audience = request.get("audience").and_then(Value::as_str).unwrap_or("");
        if audiences.contains(&audience) {
            errs.push(FieldError::duplicate(&format!("spec.tokenRequests[{i}].audience"), &json!(audience)));
        }
        audiences.push(audience);
        if request.get("expirationSeconds").and_then(Value::as_i64).is_some_and(|s| s < 600) {
            errs.push(FieldError::invalid(&format!("spec.tokenRequests[{i}].expirationSeconds"), &request["expirationSeconds"], "may not specify a duration less than 10 minutes"));
        }
    }
    errs
}

/// ValidateCSIDriverUpdate: the new driver is valid, and attachRequired and the lifecycle modes
/// are the old ones.
pub fn validate_csi_driver_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_csi_driver(new);
    errs.extend(validate_immutable_field(new.pointer("/spec/attachRequired"), old.pointer("/spec/attachRequired"), "spec.attachedRequired"));
    errs.extend(validate_immutable_field(new.pointer("/spec/volumeLifecycleModes"), old.pointer("/spec/volumeLifecycleModes"), "spec.volumeLifecycleModes"));
    errs
}

/// ValidateCSINode: metadata (the name a DNS subdomain — the node's name) and each driver entry:
/// a valid, unique driver name, a nodeID of at most 192 characters, unique qualified topology
/// keys, a non-negative allocatable count.
pub fn validate_csi_node(node: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(node, false, is_dns1123_subdomain);
    let mut names: Vec<&str> = Vec::new();
    for (i, driver) in node.pointer("/spec/drivers").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let path = format!("spec.drivers[{i}]");
        let name = driver.get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(&format!("{path}.name"), ""));
        } else {
            errs.extend(validate_csi_driver_name(name, &format!("{path}.name")));
        }
        if names.contains(&name) {
            errs.push(FieldError::duplicate(&format!("{path}.name"), &json!(name)));
        }
        names.push(name);
        let node_id = driver.get("nodeID").and_then(Value::as_str).unwrap_or("");
        if node_id.is_empty() {
            errs.push(FieldError::required(&format!("{path}.nodeID"), ""));
        } else if node_id.len() > CSI_NODE_ID_MAX_LENGTH {
            errs.push(FieldError::invalid(&format!("{path}.nodeID"), &json!(node_id), &format!("must be {CSI_NODE_ID_MAX_LENGTH} characters or less")));
        }
        let mut keys: Vec<&str> = Vec::new();
        for key in driver.get("topologyKeys").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            let kpath = format!("{path}.topologyKeys");
            if key.is_empty() {
                errs.push(FieldError::required(&kpath, ""));
            }
            if keys.contains(&key) {
                errs.push(FieldError::duplicate(&kpath, &json!(key)));
            }
            keys.push(key);
            errs.extend(validate_qualified_name(key, &kpath));
        }
        if let Some(count) = driver.pointer("/allocatable/count").and_then(Value::as_i64)
            && count < 0
        {
            errs.push(FieldError::invalid(&format!("{path}.allocatable.count"), &json!(count), "must be greater than or equal to 0"));
        }
    }
    errs
}

/// ValidateCSINodeUpdate: the new object is valid, and a driver still registered keeps its nodeID
/// and topology keys (a driver may be added or removed: a plugin registers or goes away).
pub fn validate_csi_node_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_csi_node(new);
    let drivers = |n: &Value| n.pointer("/spec/drivers").and_then(Value::as_array).cloned().unwrap_or_default();
    let old_drivers = drivers(old);
    for (i, driver) in drivers(new).iter().enumerate() {
        let Some(before) = old_drivers.iter().find(|d| d.get("name") == driver.get("name")) else { continue };
        errs.extend(validate_immutable_field(driver.get("nodeID"), before.get("nodeID"), &format!("spec.drivers[{i}].nodeID")));
        errs.extend(validate_immutable_field(driver.get("topologyKeys"), before.get("topologyKeys"), &format!("spec.drivers[{i}].topologyKeys")));
    }
    errs
}

/// ValidateVolumeAttachment: metadata (a DNS subdomain), an attacher (a CSI driver name), exactly
/// one source (`persistentVolumeName` or `inlineVolumeSpec`), a node name; and, in the status, an
/// attach or detach error message of at most 1024 bytes.
pub fn validate_volume_attachment(va: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(va, false, is_dns1123_subdomain);
    let spec = va.get("spec").unwrap_or(&Value::Null);
    match spec.get("attacher").and_then(Value::as_str).filter(|a| !a.is_empty()) {
        None => errs.push(FieldError::required("spec.attacher", "")),
        Some(a) => errs.extend(validate_csi_driver_name(a, "spec.attacher")),
    }
    let pv = spec.pointer("/source/persistentVolumeName").and_then(Value::as_str);
    let inline = spec.pointer("/source/inlineVolumeSpec").filter(|v| !v.is_null());
    match (pv, inline) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName")),
        (Some(name), None) => {
            if name.is_empty() {
                errs.push(FieldError::required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"));
            }
            for msg in is_dns1123_subdomain(name).into_iter().filter(|_| !name.is_empty()) {
                errs.push(FieldError::invalid("spec.source.persistentVolumeName", &json!(name), &msg));
            }
        }
        (None, Some(_)) => {}
    }
    match spec.get("nodeName").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        None => errs.push(FieldError::required("spec.nodeName", "")),
        Some(n) => errs.extend(is_dns1123_subdomain(n).into_iter().map(|msg| FieldError::invalid("spec.nodeName", &json!(n), &msg))),
    }
    for which in ["attachError", "detachError"] {
        if va.pointer(&format!("/status/{which}/message")).and_then(Value::as_str).is_some_and(|m| m.len() > 1024) {
            errs.push(FieldError::too_long(&format!("status.{which}.message"), 1024));
        }
    }
    errs
}

/// ValidateVolumeAttachmentUpdate: the new object is valid and its spec is the old one.
pub fn validate_volume_attachment_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_volume_attachment(new);
    if new.get("spec") != old.get("spec") {
        errs.push(FieldError::invalid("spec", new.get("spec").unwrap_or(&Value::Null), "field is immutable"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use apimachinery::validation::FieldErrorReason::{self, Duplicate, Forbidden, Invalid, NotSupported, Required};

    use super::*;

    fn found(errs: &[FieldError]) -> Vec<(&str, FieldErrorReason)> {
        errs.iter().map(|e| (e.field.as_str(), e.reason)).collect()
    }

    fn class() -> Value {
        json!({"metadata": {"name": "standard"}, "provisioner": "hostpath.csi.kubelab.io", "parameters": {"a": "b"},
               "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"})
    }

    fn driver() -> Value {
        json!({"metadata": {"name": "hostpath.csi.kubelab.io"}, "spec": {"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
               "requiresRepublish": false, "fsGroupPolicy": "ReadWriteOnceWithFSType", "volumeLifecycleModes": ["Persistent"]}})
    }

    fn attachment() -> Value {
        json!({"metadata": {"name": "csi-abc"}, "spec": {"attacher": "hostpath.csi.kubelab.io", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}})
    }

    #[test]
    fn storage_classes() {
        assert_eq!(validate_storage_class(&class()), vec![]);
        let with = |f: &str, v: Value| {
            let mut c = class();
            c[f] = v;
            c
        };
        let cases = [
            (with("provisioner", json!("")), vec![("provisioner", Required)]),
            (with("provisioner", json!("not a name!")), vec![("provisioner", Invalid)]),
            (with("reclaimPolicy", json!("Recycle")), vec![("reclaimPolicy", NotSupported)]),
            (with("volumeBindingMode", json!("Later")), vec![("volumeBindingMode", NotSupported)]),
            (with("volumeBindingMode", Value::Null), vec![("volumeBindingMode", Required)]),
            (with("parameters", json!({"": "x"})), vec![("parameters", Invalid)]),
        ];
        for (c, want) in cases {
            assert_eq!(found(&validate_storage_class(&c)), want, "{c}");
        }
    }

    #[test]
    fn a_class_keeps_what_volumes_were_made_with() {
        let old = class();
        let mut marked = old.clone();
        marked["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
        marked["allowVolumeExpansion"] = json!(true);
        assert_eq!(validate_storage_class_update(&marked, &old), vec![]);
        let mut changed = old.clone();
        changed["provisioner"] = json!("other.example.com");
        changed["parameters"] = json!({"a": "c"});
        changed["reclaimPolicy"] = json!("Retain");
        changed["volumeBindingMode"] = json!("Immediate");
        let errs = validate_storage_class_update(&changed, &old);
        assert_eq!(found(&errs), vec![("parameters", Forbidden), ("provisioner", Forbidden), ("reclaimPolicy", Forbidden), ("volumeBindingMode", Invalid)]);
        assert_eq!(errs[1].message, "Forbidden: updates to provisioner are forbidden.");
    }

    #[test]
    fn csi_drivers() {
        assert_eq!(validate_csi_driver(&driver()), vec![]);
        let mut bad = driver();
        bad["spec"]["attachRequired"] = Value::Null;
        bad["spec"]["volumeLifecycleModes"] = json!(["Sometimes"]);
        bad["spec"]["fsGroupPolicy"] = json!("Always");
        bad["spec"]["tokenRequests"] = json!([{"audience": "a"}, {"audience": "a"}]);
        assert_eq!(
            found(&validate_csi_driver(&bad)),
            vec![("spec.attachedRequired", Required), ("spec.fsGroupPolicy", NotSupported), ("spec.volumeLifecycleModes", NotSupported), ("spec.tokenRequests[1].audience", Duplicate)]
        );

        let old = driver();
        let mut republish = old.clone();
        republish["spec"]["requiresRepublish"] = json!(true);
        republish["spec"]["podInfoOnMount"] = json!(true);
        assert_eq!(validate_csi_driver_update(&republish, &old), vec![]);
        let mut detach = old.clone();
        detach["spec"]["attachRequired"] = json!(false);
        detach["spec"]["volumeLifecycleModes"] = json!(["Persistent", "Ephemeral"]);
        assert_eq!(found(&validate_csi_driver_update(&detach, &old)), vec![("spec.attachedRequired", Invalid), ("spec.volumeLifecycleModes", Invalid)]);
    }

    #[test]
    fn csi_nodes() {
        let node = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "hostpath.csi.kubelab.io", "nodeID": "n1", "topologyKeys": ["topology.hostpath.csi.kubelab.io/node"], "allocatable": {"count": 10}}]}});
        assert_eq!(validate_csi_node(&node), vec![]);
        assert_eq!(validate_csi_node(&json!({"metadata": {"name": "n1"}, "spec": {"drivers": []}})), vec![]);
        let bad = json!({"metadata": {"name": "n1"}, "spec": {"drivers": [
            {"name": "d.example.com", "nodeID": "", "topologyKeys": ["k", "k"]},
            {"name": "d.example.com", "nodeID": "x", "allocatable": {"count": -1}}]}});
        assert_eq!(
            found(&validate_csi_node(&bad)),
            vec![("spec.drivers[0].nodeID", Required), ("spec.drivers[0].topologyKeys", Duplicate), ("spec.drivers[1].name", Duplicate), ("spec.drivers[1].allocatable.count", Invalid)]
        );
        let mut moved = node.clone();
        moved["spec"]["drivers"][0]["nodeID"] = json!("n2");
        assert_eq!(found(&validate_csi_node_update(&moved, &node)), vec![("spec.drivers[0].nodeID", Invalid)]);
        let empty = json!({"metadata": {"name": "n1"}, "spec": {"drivers": []}});
        assert_eq!(validate_csi_node_update(&node, &empty), vec![], "a driver registers");
    }

    #[test]
    fn volume_attachments() {
        assert_eq!(validate_volume_attachment(&attachment()), vec![]);
        let bad = json!({"metadata": {"name": "csi-abc"}, "spec": {"source": {}}});
        assert_eq!(found(&validate_volume_attachment(&bad)), vec![("spec.attacher", Required), ("spec.source", Required), ("spec.nodeName", Required)]);

        let old = attachment();
        let mut attached = old.clone();
        attached["status"] = json!({"attached": true});
        attached["metadata"]["finalizers"] = json!(["external-attacher/hostpath-csi-kubelab-io"]);
        assert_eq!(validate_volume_attachment_update(&attached, &old), vec![]);
        let mut moved = old.clone();
        moved["spec"]["nodeName"] = json!("n2");
        assert_eq!(found(&validate_volume_attachment_update(&moved, &old)), vec![("spec", Invalid)]);
    }
}
