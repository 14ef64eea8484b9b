//! The storage add-on of `kubelab up`, as kubernetes-csi/csi-driver-host-path's deploy scripts
//! install the driver: its CSIDriver object, a default StorageClass that provisions through it,
//! and the RBAC of its sidecars — but with `kubelab csi-hostpath` running in this process (driver,
//! node-driver-registrar, external-provisioner and external-attacher in one) instead of a
//! DaemonSet of their containers.
//!
//! 1. What the sidecars may do ([`apply_rbac`]): the ClusterRoles `system:csi-external-provisioner`
//!    and `system:csi-external-attacher` (the API server's default policy) bound to the driver's
//!    identity — here the user `system:csi-hostpath` of `pki/csi-hostpath.conf`, where the
//!    driver's deployment binds its pods' service account.
//! 2. The objects users see ([`apply_driver_info`], deploy/csi-hostpath.json, which the lab
//!    applies too): the CSIDriver `hostpath.csi.kubelab.io` (attach required, persistent volumes
//!    only) and the StorageClass `standard`, the default, binding on the first consumer and
//!    deleting a released volume. Both server-side applied at every start.

use anyhow::Context as _;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

/// The manager name of `kubelab up`'s server-side applies.
const MANAGER: &str = "kubelab-up";

/// The driver's user, from its client certificate (`pki/csi-hostpath.conf`).
pub const CSI_HOSTPATH_USER: &str = "system:csi-hostpath";

/// The driver's CSIDriver and the default StorageClass (a `v1` List, as `kubectl apply -f` takes it).
pub const DRIVER_INFO: &str = include_str!("../deploy/csi-hostpath.json");

/// Step 1: each sidecar's ClusterRole bound to [`CSI_HOSTPATH_USER`].
pub async fn apply_rbac(kube: &kube::Client) -> anyhow::Result<()> {
    let pp = PatchParams::apply(MANAGER).force();
    for (binding, role) in [("csi-hostpath-provisioner", "system:csi-external-provisioner"), ("csi-hostpath-attacher", "system:csi-external-attacher")] {
        let b: ClusterRoleBinding = serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": binding, "labels": {"app.kubernetes.io/part-of": "kubelab"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": CSI_HOSTPATH_USER}]
        }))?;
        Api::<ClusterRoleBinding>::all(kube.clone())
            .patch(binding, &pp, &Patch::Apply(&b))
            .await
            .with_context(|| format!("applying the ClusterRoleBinding {binding}"))?;
    }
    Ok(())
}

/// Step 2: every object of [`DRIVER_INFO`], server-side applied.
pub async fn apply_driver_info(kube: &kube::Client) -> anyhow::Result<()> {
    let pp = PatchParams::apply(MANAGER).force();
    for item in driver_info_items()? {
        let (group, version) = match item.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), item["apiVersion"].as_str().unwrap_or_default().to_string()),
        };
        let kind = item["kind"].as_str().unwrap_or_default().to_string();
        let name = item.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let lower = kind.to_lowercase();
        let plural = if lower.ends_with('s') { format!("{lower}es") } else { format!("{lower}s") };
        let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &version, &kind), &plural);
        let obj: DynamicObject = serde_json::from_value(item)?;
        Api::<DynamicObject>::all_with(kube.clone(), &ar)
            .patch(&name, &pp, &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying the {kind} {name}"))?;
    }
    Ok(())
}

/// The objects of [`DRIVER_INFO`] (cluster-scoped kinds, whose plurals are the kind's regular ones).
fn driver_info_items() -> anyhow::Result<Vec<serde_json::Value>> {
    let list: serde_json::Value = serde_json::from_str(DRIVER_INFO).context("deploy/csi-hostpath.json")?;
    Ok(list.get("items").and_then(|i| i.as_array()).cloned().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_info_is_the_driver_and_a_default_class_provisioning_through_it() {
        let items = driver_info_items().expect("parses");
        let kinds: Vec<_> = items.iter().map(|i| (i["kind"].as_str().unwrap_or(""), i["metadata"]["name"].as_str().unwrap_or(""))).collect();
        assert_eq!(kinds, [("CSIDriver", "hostpath.csi.kubelab.io"), ("StorageClass", "standard")]);
        let class: k8s_openapi::api::storage::v1::StorageClass = serde_json::from_value(items[1].clone()).expect("a StorageClass");
        assert_eq!(class.provisioner, "hostpath.csi.kubelab.io");
        assert_eq!(class.volume_binding_mode.as_deref(), Some("WaitForFirstConsumer"));
        let annotations = class.metadata.annotations.unwrap_or_default();
        assert_eq!(annotations.get("storageclass.kubernetes.io/is-default-class").map(String::as_str), Some("true"));
        let driver: k8s_openapi::api::storage::v1::CSIDriver = serde_json::from_value(items[0].clone()).expect("a CSIDriver");
        assert_eq!(driver.spec.attach_required, Some(true));
    }
}
