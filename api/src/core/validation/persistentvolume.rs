//! Mirrors the PersistentVolume and PersistentVolumeClaim part of
//! pkg/apis/core/validation/validation.go: ValidatePersistentVolume(Update) and
//! ValidatePersistentVolumeClaim(Update).
//!
//! A volume is one piece of storage: exactly one source (`csi`, `hostPath`, `nfs`, `local`…),
//! its size (`capacity.storage`, nothing else), how it may be mounted, and what happens to it
//! when its claim goes. Once created, its source and mode never change. A claim asks for storage:
//! access modes and a size; once created it may only grow (when bound) and be bound to a volume
//! (`volumeName`, written by the PV controller) — the rest of its spec is frozen.

use apimachinery::resource::parse_quantity_nanos;
use apimachinery::validation::{FieldError, is_dns1123_subdomain, is_qualified_name};
use serde_json::{Value, json};

use super::{validate_immutable_field, validate_label_selector, validate_object_meta};

/// The volume sources a PersistentVolumeSpec may carry (its inlined PersistentVolumeSource).
pub const PERSISTENT_VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];

/// The message of a claim update that changes more than a bound claim may.
pub const PVC_SPEC_IMMUTABLE: &str = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

/// ValidatePersistentVolume: metadata (a DNS subdomain, cluster-scoped) and
/// ValidatePersistentVolumeSpec.
pub fn validate_persistent_volume(pv: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(pv, false, is_dns1123_subdomain);
    errs.extend(validate_persistent_volume_spec(pv.get("spec").unwrap_or(&Value::Null)));
    errs
}

/// ValidatePersistentVolumeSpec, step by step:
/// 1. access modes: at least one, each known, ReadWriteOncePod alone;
/// 2. capacity: `storage` and nothing else, a positive quantity;
/// 3. reclaim policy and volume mode among the known ones; the class a valid name;
/// 4. exactly one volume source, with what that source requires (`csi`: driver and handle;
///    `hostPath`, `local`: a path; `nfs`: server and path; `local` also node affinity);
/// 5. node affinity: required terms, when given, are not empty.
pub fn validate_persistent_volume_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    // Step 1: access modes.
    errs.extend(validate_access_modes(spec.get("accessModes"), "spec.accessModes"));
    // Step 2: capacity.
    match spec.get("capacity").and_then(Value::as_object).filter(|c| !c.is_empty()) {
        None => errs.push(FieldError::required("spec.capacity", "")),
        Some(capacity) => {
            if !capacity.contains_key("storage") || capacity.len() > 1 {
                errs.push(FieldError::not_supported("spec.capacity", &Value::Object(capacity.clone()), &["storage"]));
            }
            for (name, q) in capacity {
                errs.extend(validate_positive_quantity(q, &format!("spec.capacity.{name}")));
            }
        }
    }
    // Step 3: policy, mode, class.
    if let Some(policy) = spec.get("persistentVolumeReclaimPolicy").and_then(Value::as_str).filter(|p| !p.is_empty())
        && !RECLAIM_POLICIES.contains(&policy)
    {
        errs.push(FieldError::not_supported("spec.persistentVolumeReclaimPolicy", &json!(policy), RECLAIM_POLICIES));
    }
    errs.extend(validate_volume_mode(spec.get("volumeMode"), "spec.volumeMode"));
    errs.extend(validate_class_name(spec.get("storageClassName"), "spec.storageClassName"));
    // Step 4: exactly one source.
    let sources: Vec<&str> = PERSISTENT_VOLUME_SOURCES.iter().copied().filter(|s| spec.get(*s).is_some_and(|v| !v.is_null())).collect();
    match sources.as_slice() {
        [] => errs.push(FieldError::required("spec", "must specify a volume type")),
        [source] => errs.extend(validate_source(spec, source)),
        [_, more @ ..] => {
            for source in more {
                errs.push(FieldError::forbidden(&format!("spec.{source}"), "may not specify more than 1 volume type"));
            }
        }
    }
    // Step 5: node affinity.
    if let Some(required) = spec.pointer("/nodeAffinity/required")
        && required.get("nodeSelectorTerms").and_then(Value::as_array).is_none_or(Vec::is_empty)
    {
        errs.push(FieldError::required("spec.nodeAffinity.required.nodeSelectorTerms", "must have at least one node selector term"));
    }
    errs
}

/// What each source requires of its own fields.
fn validate_source(spec: &Value, source: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let s = &spec[source];
    let path = |f: &str| format!("spec.{source}.{f}");
    let required = |f: &str, errs: &mut Vec<FieldError>| {
        if s.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(&path(f), ""));
        }
    };
    match source {
        "csi" => {
            match s.get("driver").and_then(Value::as_str).filter(|d| !d.is_empty()) {
                None => errs.push(FieldError::required(&path("driver"), "")),
                Some(driver) => errs.extend(validate_csi_driver_name(driver, &path("driver"))),
            }
            required("volumeHandle", &mut errs);
        }
        "hostPath" => required("path", &mut errs),
        "nfs" => {
            required("server", &mut errs);
            required("path", &mut errs);
        }
        "local" => {
            required("path", &mut errs);
            if spec.pointer("/nodeAffinity/required").is_none() {
                errs.push(FieldError::required("spec.nodeAffinity", "Local volume requires node affinity"));
            }
        }
        _ => {}
    }
    errs
}

/// ValidatePersistentVolumeUpdate: the new volume is valid; its source, its volume mode and (once
/// set) its node affinity never change.
pub fn validate_persistent_volume_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_persistent_volume(new);
    if volume_source(new) != volume_source(old) {
        errs.push(FieldError::forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"));
    }
    // Kubernetes names this path without `spec.`.
    errs.extend(validate_immutable_field(new.pointer("/spec/volumeMode"), old.pointer("/spec/volumeMode"), "volumeMode"));
    if old.pointer("/spec/nodeAffinity").is_some_and(|v| !v.is_null()) {
        errs.extend(validate_immutable_field(new.pointer("/spec/nodeAffinity"), old.pointer("/spec/nodeAffinity"), "spec.nodeAffinity"));
    }
    errs
}

/// The volume's source fields, each present or not.
fn volume_source(pv: &Value) -> Vec<Option<&Value>> {
    PERSISTENT_VOLUME_SOURCES.iter().map(|s| pv.pointer(&format!("/spec/{s}")).filter(|v| !v.is_null())).collect()
}

/// ValidatePersistentVolumeStatusUpdate: the new volume's metadata is valid (the status is the
/// controller's to write).
pub fn validate_persistent_volume_status_update(new: &Value, _old: &Value) -> Vec<FieldError> {
    validate_object_meta(new, false, is_dns1123_subdomain)
}

/// ValidatePersistentVolumeClaim: metadata (a DNS subdomain, namespaced) and
/// ValidatePersistentVolumeClaimSpec:
/// 1. access modes: at least one, each known, ReadWriteOncePod alone;
/// 2. a valid selector;
/// 3. `resources.requests.storage`: present and more than zero;
/// 4. the class a valid name when set, the volume mode a known one.
pub fn validate_persistent_volume_claim(pvc: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(pvc, true, is_dns1123_subdomain);
    let spec = pvc.get("spec").unwrap_or(&Value::Null);
    // Step 1.
    errs.extend(validate_access_modes(spec.get("accessModes"), "spec.accessModes"));
    // Step 2.
    if let Err(e) = validate_label_selector(spec.get("selector").filter(|v| !v.is_null()), "spec.selector") {
        errs.push(e);
    }
    // Step 3.
    match spec.pointer("/resources/requests/storage") {
        None => errs.push(FieldError::required("spec.resources[storage]", "")),
        Some(q) => {
            let field = "spec.resources[storage]";
            let quantity_errs = validate_positive_quantity(q, field);
            if quantity_errs.is_empty() && q.as_str().and_then(parse_quantity_nanos) == Some(0) {
                errs.push(FieldError::invalid(field, q, "must be greater than zero"));
            }
            errs.extend(quantity_errs);
        }
    }
    // Step 4.
    errs.extend(validate_class_name(spec.get("storageClassName"), "spec.storageClassName"));
    errs.extend(validate_volume_mode(spec.get("volumeMode"), "spec.volumeMode"));
    errs
}

/// ValidatePersistentVolumeClaimUpdate: the new claim is valid, and its spec is the old one but
/// for what may change — `volumeName` while the claim is unbound (the binder writes it once),
/// `resources.requests.storage` once it is bound (never shrinking), `volumeAttributesClassName`.
pub fn validate_persistent_volume_claim_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate_persistent_volume_claim(new);
    let new_spec = new.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut old_spec = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    let set = |spec: &mut Value, key: &str, v: Option<&Value>| {
        if let Some(map) = spec.as_object_mut() {
            match v {
                Some(v) => map.insert(key.to_string(), v.clone()),
                None => map.remove(key),
            };
        }
    };
    if old_spec.get("volumeName").and_then(Value::as_str).is_none_or(str::is_empty) {
        set(&mut old_spec, "volumeName", new_spec.get("volumeName"));
    }
    let bound = old.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound {
        let storage = new_spec.pointer("/resources/requests/storage").cloned();
        if let Some(storage) = storage {
            old_spec["resources"]["requests"]["storage"] = storage;
        }
    }
    set(&mut old_spec, "volumeAttributesClassName", new_spec.get("volumeAttributesClassName"));
    if strip_nulls(&old_spec) != strip_nulls(&new_spec) {
        errs.push(FieldError::forbidden("spec", PVC_SPEC_IMMUTABLE));
    }
    let size = |pvc: &Value| pvc.pointer("/spec/resources/requests/storage").and_then(Value::as_str).and_then(parse_quantity_nanos);
    if bound && let (Some(n), Some(o)) = (size(new), size(old)) && n < o {
        errs.push(FieldError::forbidden("spec.resources.requests.storage", "field can not be less than previous value"));
    }
    errs
}

/// ValidatePersistentVolumeClaimStatusUpdate: valid metadata, and capacities that parse.
pub fn validate_persistent_volume_claim_status_update(new: &Value, _old: &Value) -> Vec<FieldError> {
    let mut errs = validate_object_meta(new, true, is_dns1123_subdomain);
    for (name, q) in new.pointer("/status/capacity").and_then(Value::as_object).into_iter().flatten() {
        errs.extend(validate_positive_quantity(q, &format!("status.capacity.{name}")));
    }
    errs
}

/// The access modes of a volume or a claim: at least one, each known, and ReadWriteOncePod with
/// no other.
fn validate_access_modes(modes: Option<&Value>, field: &str) -> Vec<FieldError> {
    let modes: Vec<&Value> = modes.and_then(Value::as_array).into_iter().flatten().collect();
    if modes.is_empty() {
        return vec![FieldError::required(field, "must specify at least 1 access mode")];
    }
    let mut errs = Vec::new();
    for mode in &modes {
        if !mode.as_str().is_some_and(|m| ACCESS_MODES.contains(&m)) {
            errs.push(FieldError::not_supported(field, mode, ACCESS_MODES));
        }
    }
    if modes.len() > 1 && modes.iter().any(|m| m.as_str() == Some("ReadWriteOncePod")) {
        errs.push(FieldError::forbidden(field, "may not use ReadWriteOncePod with other access modes"));
    }
    errs
}

fn validate_volume_mode(mode: Option<&Value>, field: &str) -> Vec<FieldError> {
    match mode.filter(|v| !v.is_null()) {
        Some(m) if !m.as_str().is_some_and(|m| VOLUME_MODES.contains(&m)) => vec![FieldError::not_supported(field, m, VOLUME_MODES)],
        _ => Vec::new(),
    }
}

/// ValidateClassName: a non-empty class is a DNS subdomain.
fn validate_class_name(class: Option<&Value>, field: &str) -> Vec<FieldError> {
    let Some(name) = class.and_then(Value::as_str).filter(|c| !c.is_empty()) else { return Vec::new() };
    is_dns1123_subdomain(name).into_iter().map(|msg| FieldError::invalid(field, &json!(name), &msg)).collect()
}

/// ValidatePositiveQuantityValue: a quantity that parses and is not negative.
fn validate_positive_quantity(q: &Value, field: &str) -> Vec<FieldError> {
    match q.as_str().and_then(parse_quantity_nanos) {
        None => vec![FieldError::invalid(field, q, "must be a valid quantity")],
        Some(n) if n < 0 => vec![FieldError::invalid(field, q, "must be greater than or equal to 0")],
        Some(_) => Vec::new(),
    }
}

/// ValidateCSIDriverName (core's, for a volume's `csi.driver`): at most 63 characters, a DNS
/// subdomain once lower-cased.
pub fn validate_csi_driver_name(driver: &str, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if driver.len() > 63 {
        errs.push(FieldError::too_long(field, 63));
    }
    for msg in is_dns1123_subdomain(&driver.to_lowercase()) {
        errs.push(FieldError::invalid(field, &json!(driver), &msg));
    }
    errs
}

/// A qualified-name check for topology keys and the like, as field errors.
pub fn validate_qualified_name(value: &str, field: &str) -> Vec<FieldError> {
    is_qualified_name(value).into_iter().map(|msg| FieldError::invalid(field, &json!(value), &msg)).collect()
}

/// The JSON without its nulls, so an absent field and an explicit `null` compare equal (as Go's
/// nil pointers do).
fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), strip_nulls(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use apimachinery::validation::FieldErrorReason::{self, Forbidden, Invalid, NotSupported, Required};

    use super::*;

    fn found(errs: &[FieldError]) -> Vec<(&str, FieldErrorReason)> {
        errs.iter().map(|e| (e.field.as_str(), e.reason)).collect()
    }

    fn pv(spec: Value) -> Value {
        json!({"metadata": {"name": "pv1"}, "spec": spec})
    }

    fn csi_spec() -> Value {
        json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Filesystem",
               "csi": {"driver": "hostpath.csi.kubelab.io", "volumeHandle": "h1"}})
    }

    fn pvc(spec: Value) -> Value {
        json!({"metadata": {"name": "data", "namespace": "default"}, "spec": spec})
    }

    fn claim_spec() -> Value {
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem", "storageClassName": "standard"})
    }

    #[test]
    fn valid_volumes_pass() {
        for spec in [
            csi_spec(),
            json!({"accessModes": ["ReadWriteOncePod"], "capacity": {"storage": "5Mi"}, "hostPath": {"path": "/data"}}),
            json!({"accessModes": ["ReadOnlyMany", "ReadWriteMany"], "capacity": {"storage": "1"}, "nfs": {"server": "10.0.0.1", "path": "/x"}}),
            json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "local": {"path": "/mnt"},
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["n1"]}]}]}}}),
        ] {
            assert_eq!(validate_persistent_volume(&pv(spec.clone())), vec![], "{spec}");
        }
    }

    #[test]
    fn invalid_volumes() {
        let cases = [
            (json!({"capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}), vec![("spec.accessModes", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}), vec![("spec.capacity", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi", "cpu": "1"}, "hostPath": {"path": "/x"}}), vec![("spec.capacity", NotSupported)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "lots"}, "hostPath": {"path": "/x"}}), vec![("spec.capacity.storage", Invalid)]),
            (json!({"accessModes": ["Sometimes"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}), vec![("spec.accessModes", NotSupported)]),
            (json!({"accessModes": ["ReadWriteOncePod", "ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}}), vec![("spec.accessModes", Forbidden)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}), vec![("spec", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}, "nfs": {"server": "s", "path": "/p"}}), vec![("spec.nfs", Forbidden)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "csi": {"driver": "Bad_Driver!"}}), vec![("spec.csi.driver", Invalid), ("spec.csi.volumeHandle", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "local": {"path": "/mnt"}}), vec![("spec.nodeAffinity", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/x"}, "persistentVolumeReclaimPolicy": "Keep", "volumeMode": "Raw"}),
             vec![("spec.persistentVolumeReclaimPolicy", NotSupported), ("spec.volumeMode", NotSupported)]),
        ];
        for (spec, want) in cases {
            assert_eq!(found(&validate_persistent_volume(&pv(spec.clone()))), want, "{spec}");
        }
        let errs = validate_persistent_volume(&pv(json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}})));
        assert_eq!(errs[0].message, "Required value: must specify a volume type");
    }

    #[test]
    fn a_volume_keeps_its_source_and_mode() {
        let old = pv(csi_spec());
        let mut bound = old.clone();
        bound["spec"]["claimRef"] = json!({"namespace": "default", "name": "data"});
        assert_eq!(validate_persistent_volume_update(&bound, &old), vec![], "binding changes the claimRef only");

        let mut moved = old.clone();
        moved["spec"]["csi"]["volumeHandle"] = json!("h2");
        let errs = validate_persistent_volume_update(&moved, &old);
        assert_eq!(found(&errs), vec![("spec.persistentvolumesource", Forbidden)]);
        assert_eq!(errs[0].message, "Forbidden: spec.persistentvolumesource is immutable after creation");

        let mut block = old.clone();
        block["spec"]["volumeMode"] = json!("Block");
        assert_eq!(found(&validate_persistent_volume_update(&block, &old)), vec![("volumeMode", Invalid)]);
    }

    #[test]
    fn valid_and_invalid_claims() {
        assert_eq!(validate_persistent_volume_claim(&pvc(claim_spec())), vec![]);
        let cases = [
            (json!({"resources": {"requests": {"storage": "1Gi"}}}), vec![("spec.accessModes", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"]}), vec![("spec.resources[storage]", Required)]),
            (json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}), vec![("spec.resources[storage]", Invalid)]),
            (json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "Not_A_Name"}), vec![("spec.storageClassName", Invalid)]),
            (json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "selector": {"matchLabels": {"bad key!": "x"}}}), vec![("spec.selector", Invalid)]),
        ];
        for (spec, want) in cases {
            assert_eq!(found(&validate_persistent_volume_claim(&pvc(spec.clone()))), want, "{spec}");
        }
    }

    #[test]
    fn a_claim_is_frozen_but_for_binding_and_growth() {
        let old = pvc(claim_spec());
        let mut bind = old.clone();
        bind["spec"]["volumeName"] = json!("pv1");
        bind["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
        assert_eq!(validate_persistent_volume_claim_update(&bind, &old), vec![], "the binder sets volumeName once");

        let mut bound_old = bind.clone();
        bound_old["status"] = json!({"phase": "Bound"});
        let mut rebind = bound_old.clone();
        rebind["spec"]["volumeName"] = json!("pv2");
        assert_eq!(found(&validate_persistent_volume_claim_update(&rebind, &bound_old)), vec![("spec", Forbidden)]);

        let mut grow = bound_old.clone();
        grow["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(validate_persistent_volume_claim_update(&grow, &bound_old), vec![], "a bound claim grows");
        assert_eq!(found(&validate_persistent_volume_claim_update(&grow, &old)), vec![("spec", Forbidden)], "an unbound claim does not");

        let mut shrink = bound_old.clone();
        shrink["spec"]["resources"]["requests"]["storage"] = json!("512Mi");
        assert_eq!(found(&validate_persistent_volume_claim_update(&shrink, &bound_old)), vec![("spec.resources.requests.storage", Forbidden)]);

        let mut modes = old.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        let errs = validate_persistent_volume_claim_update(&modes, &old);
        assert_eq!(found(&errs), vec![("spec", Forbidden)]);
        assert_eq!(errs[0].message, format!("Forbidden: {PVC_SPEC_IMMUTABLE}"));
    }
}
