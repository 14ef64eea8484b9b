//! Mirrors the RBAC manifests of the CSI sidecars (kubernetes-csi/external-provisioner's and
//! external-attacher's `deploy/kubernetes/rbac.yaml`): what a driver's external provisioner and
//! external attacher may do, as two ClusterRoles the API server brings with its default policy —
//! Kubernetes leaves them to each driver's deployment; kubelab ships them so that `kubelab up`
//! only binds them to its driver's identity.
//!
//! - `system:csi-external-provisioner`: makes and deletes PersistentVolumes for claims of its
//!   driver's classes (reading classes, claims, nodes and CSINodes for topology; annotating claims;
//!   recording events);
//! - `system:csi-external-attacher`: attaches volumes for the VolumeAttachments of its driver,
//!   writing their finalizer and status.
//!
//! Like the other default roles, both carry the bootstrapping label and the autoupdate
//! annotation. The leader-election Role the sidecars' manifests also hold is left out: kubelab
//! runs one provisioner per node, without leader election.

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::helpers::new_rule;
use super::policy::{LEGACY_GROUP, READ, STORAGE_GROUP, add_default_metadata};

pub const CSI_EXTERNAL_PROVISIONER: &str = "system:csi-external-provisioner";
pub const CSI_EXTERNAL_ATTACHER: &str = "system:csi-external-attacher";

const SNAPSHOT_GROUP: &str = "snapshot.storage.k8s.io";
const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";

/// external-provisioner's `external-provisioner-runner`, plus `patch` on claims (kubelab's
/// provisioner claims an Immediate claim for its node by annotating it).
fn provisioner_rules() -> Vec<PolicyRule> {
    vec![
        new_rule(&["get", "list", "watch", "create", "patch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes"]).rule(),
        new_rule(&["get", "list", "watch", "update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["storageclasses"]).rule(),
        new_rule(&["list", "watch", "create", "update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["events"]).rule(),
        new_rule(&["get", "list"]).groups(&[SNAPSHOT_GROUP]).resources(&["volumesnapshots", "volumesnapshotcontents"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["csinodes"]).rule(),
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
        // Only for drivers with PUBLISH_UNPUBLISH_VOLUME: a volume is not deleted while attached.
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["volumeattachments"]).rule(),
        new_rule(READ).groups(&[GATEWAY_GROUP]).resources(&["referencegrants"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["volumeattributesclasses"]).rule(),
    ]
}

/// external-attacher's `external-attacher-runner`.
fn attacher_rules() -> Vec<PolicyRule> {
    vec![
        new_rule(&["get", "list", "watch", "patch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["csinodes"]).rule(),
        new_rule(&["get", "list", "watch", "patch"]).groups(&[STORAGE_GROUP]).resources(&["volumeattachments"]).rule(),
        new_rule(&["patch"]).groups(&[STORAGE_GROUP]).resources(&["volumeattachments/status"]).rule(),
    ]
}

/// The two sidecar roles, with the default policy's metadata.
pub fn csi_sidecar_roles() -> Vec<ClusterRole> {
    [(CSI_EXTERNAL_PROVISIONER, provisioner_rules()), (CSI_EXTERNAL_ATTACHER, attacher_rules())]
        .into_iter()
        .map(|(name, rules)| {
            let mut role = ClusterRole { metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() }, rules: Some(rules), aggregation_rule: None };
            add_default_metadata(&mut role.metadata);
            role
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::authentication::user::UserInfo;
    use crate::authorization::authorizer::Attributes;
    use crate::authorization::rbac::rbac::rule_allows;

    /// Whether the role `name` allows `verb` on `group`'s `resource[/subresource]`.
    fn allows(name: &str, verb: &str, group: &str, resource: &str) -> bool {
        let role = csi_sidecar_roles().into_iter().find(|r| r.metadata.name.as_deref() == Some(name)).expect("role exists");
        let rules: Vec<Value> = role.rules.unwrap_or_default().iter().filter_map(|r| serde_json::to_value(r).ok()).collect();
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let user = UserInfo::default();
        let a = Attributes { user: &user, verb, resource_request: true, api_group: group, api_version: "v1", resource, subresource, ..Default::default() };
        rules.iter().any(|r| rule_allows(&a, r))
    }

    #[test]
    fn the_provisioner_makes_volumes_for_claims() {
        for verb in ["get", "list", "watch", "create", "patch", "delete"] {
            assert!(allows(CSI_EXTERNAL_PROVISIONER, verb, "", "persistentvolumes"), "{verb} pvs");
        }
        for verb in ["get", "list", "watch", "update", "patch"] {
            assert!(allows(CSI_EXTERNAL_PROVISIONER, verb, "", "persistentvolumeclaims"), "{verb} pvcs");
        }
        assert!(allows(CSI_EXTERNAL_PROVISIONER, "watch", "storage.k8s.io", "storageclasses"));
        assert!(allows(CSI_EXTERNAL_PROVISIONER, "create", "", "events"));
        assert!(allows(CSI_EXTERNAL_PROVISIONER, "list", "storage.k8s.io", "csinodes"));
        assert!(allows(CSI_EXTERNAL_PROVISIONER, "get", "", "nodes"));
        assert!(!allows(CSI_EXTERNAL_PROVISIONER, "delete", "", "persistentvolumeclaims"));
        assert!(!allows(CSI_EXTERNAL_PROVISIONER, "update", "", "persistentvolumes/status"));
    }

    #[test]
    fn the_attacher_writes_attachments_and_their_status() {
        for verb in ["get", "list", "watch", "patch"] {
            assert!(allows(CSI_EXTERNAL_ATTACHER, verb, "storage.k8s.io", "volumeattachments"), "{verb}");
        }
        assert!(allows(CSI_EXTERNAL_ATTACHER, "patch", "storage.k8s.io", "volumeattachments/status"));
        assert!(allows(CSI_EXTERNAL_ATTACHER, "patch", "", "persistentvolumes"));
        assert!(!allows(CSI_EXTERNAL_ATTACHER, "create", "storage.k8s.io", "volumeattachments"));
        assert!(!allows(CSI_EXTERNAL_ATTACHER, "update", "storage.k8s.io", "volumeattachments/status"));
    }

    #[test]
    fn both_roles_carry_the_default_policy_metadata() {
        for role in csi_sidecar_roles() {
            assert_eq!(role.metadata.labels.as_ref().and_then(|l| l.get("kubernetes.io/bootstrapping")).map(String::as_str), Some("rbac-defaults"));
        }
    }
}
