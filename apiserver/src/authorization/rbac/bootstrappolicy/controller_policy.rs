//! Mirrors plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go: one ClusterRole
//! per kube-controller-manager controller, bound to that controller's own service account.
//!
//! With `--use-service-account-credentials`, kube-controller-manager gives each controller a
//! client that authenticates as `system:serviceaccount:kube-system:<controller>`, so each runs
//! with only its own role, `system:controller:<controller>`, and an audit log names which
//! controller did what. The list holds the controllers Kubernetes 1.33 runs by default; the
//! roles of controllers behind feature gates that are off by default there (the DRA
//! resource-claim and device-taint controllers, volumeattributesclass-protection, the storage
//! version controllers) are left out, as Kubernetes leaves them out.
//!
//! Wherever a role may list, it may also watch: since 1.32 kube-controller-manager's clients
//! list by opening a watch that first streams the existing objects (client-go's
//! WatchListClient), and fall back to a plain list, with an error logged, when watch is denied.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::helpers::{ClusterRoleBindingBuilder, new_rule};
use super::policy::{
    events_rule,
    ADMISSION_REGISTRATION_GROUP, APPS_GROUP, AUTHORIZATION_GROUP, AUTOSCALING_GROUP, BATCH_GROUP,
    CERTIFICATES_GROUP, CUSTOM_METRICS_GROUP, DISCOVERY_GROUP, EXTENSIONS_GROUP,
    EXTERNAL_METRICS_GROUP, KUBE_APISERVER_CLIENT_KUBELET_SIGNER, KUBE_APISERVER_CLIENT_SIGNER,
    KUBELET_SERVING_SIGNER, LEGACY_GROUP, LEGACY_UNKNOWN_SIGNER, NETWORKING_GROUP, POLICY_GROUP,
    RBAC_GROUP, RES_METRICS_GROUP, STORAGE_GROUP, add_default_metadata,
};

/// Every controller role's name starts with this; the rest is the service account's name.
pub const SA_ROLE_PREFIX: &str = "system:controller:";

/// The namespace of the controllers' service accounts.
const CONTROLLER_NAMESPACE: &str = "kube-system";

/// The ConfigMap in which kube-apiserver records since when it tracks legacy token use
/// (pkg/controlplane/controller/legacytokentracking).
const LEGACY_TOKEN_TRACKING_CONFIGMAP: &str = "kube-apiserver-legacy-service-account-token-tracking";

fn controller(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta { name: Some(format!("{SA_ROLE_PREFIX}{name}")), ..ObjectMeta::default() },
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// The roles in registration order; [`controller_roles`] and [`controller_role_bindings`] are
/// both derived from it, so every role has exactly its binding.
fn build_controller_roles() -> Vec<ClusterRole> {
    let mut roles = vec![
        controller(
            "attachdetach-controller",
            vec![
                new_rule(&["list", "watch"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["persistentvolumes", "persistentvolumeclaims"])
                    .rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["patch", "update"]).groups(&[LEGACY_GROUP]).resources(&["nodes/status"]).rule(),
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
                new_rule(&["get", "create", "delete", "list", "watch"])
                    .groups(&[STORAGE_GROUP])
                    .resources(&["volumeattachments"])
                    .rule(),
                new_rule(&["get", "watch", "list"]).groups(&[STORAGE_GROUP]).resources(&["csidrivers"]).rule(),
                new_rule(&["get", "watch", "list"]).groups(&[STORAGE_GROUP]).resources(&["csinodes"]).rule(),
            ],
        ),
        controller(
            "clusterrole-aggregation-controller",
            // Full power over ClusterRoles: it writes any rule into admin/edit/view, so it must
            // be allowed to grant what it does not hold (escalate).
            vec![new_rule(&["escalate", "get", "list", "watch", "update", "patch"])
                .groups(&[RBAC_GROUP])
                .resources(&["clusterroles"])
                .rule()],
        ),
        controller(
            "cronjob-controller",
            vec![
                new_rule(&["get", "list", "watch", "update"]).groups(&[BATCH_GROUP]).resources(&["cronjobs"]).rule(),
                new_rule(&["get", "list", "watch", "create", "update", "delete", "patch"])
                    .groups(&[BATCH_GROUP])
                    .resources(&["jobs"])
                    .rule(),
                new_rule(&["update"]).groups(&[BATCH_GROUP]).resources(&["cronjobs/status"]).rule(),
                // Owner references with blockOwnerDeletion need update on the owner's finalizers.
                new_rule(&["update"]).groups(&[BATCH_GROUP]).resources(&["cronjobs/finalizers"]).rule(),
                new_rule(&["list", "watch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "daemon-set-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["daemonsets"]).rule(),
                new_rule(&["update"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["daemonsets/status"]).rule(),
                new_rule(&["update"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["daemonsets/finalizers"]).rule(),
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["list", "watch", "create", "delete", "patch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["pods/binding"]).rule(),
                new_rule(&["get", "list", "watch", "create", "delete", "update", "patch"])
                    .groups(&[APPS_GROUP])
                    .resources(&["controllerrevisions"])
                    .rule(),
                events_rule(),
            ],
        ),
        controller(
            "deployment-controller",
            vec![
                new_rule(&["get", "list", "watch", "update"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["deployments"]).rule(),
                new_rule(&["update"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["deployments/status"]).rule(),
                new_rule(&["update"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["deployments/finalizers"]).rule(),
                new_rule(&["get", "list", "watch", "create", "update", "patch", "delete"])
                    .groups(&[APPS_GROUP, EXTENSIONS_GROUP])
                    .resources(&["replicasets"])
                    .rule(),
                // update: an old path that relabels pods; Kubernetes keeps it until issue 36897 is done.
                new_rule(&["get", "list", "watch", "update"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "disruption-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[EXTENSIONS_GROUP, APPS_GROUP]).resources(&["deployments"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[APPS_GROUP, EXTENSIONS_GROUP]).resources(&["replicasets"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["replicationcontrollers"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[POLICY_GROUP]).resources(&["poddisruptionbudgets"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[APPS_GROUP]).resources(&["statefulsets"]).rule(),
                new_rule(&["update"]).groups(&[POLICY_GROUP]).resources(&["poddisruptionbudgets/status"]).rule(),
                new_rule(&["patch", "update"]).groups(&[LEGACY_GROUP]).resources(&["pods/status"]).rule(),
                // The scale of any workload, to count its expected pods.
                new_rule(&["get"]).groups(&["*"]).resources(&["*/scale"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "endpoint-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["services", "pods"]).rule(),
                new_rule(&["get", "list", "watch", "create", "update", "delete"]).groups(&[LEGACY_GROUP]).resources(&["endpoints"]).rule(),
                // endpoints/restricted: allowed to write addresses that ordinary users may not
                // (the restricted-endpoints admission check).
                new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["endpoints/restricted"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "endpointslice-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["services", "pods", "nodes"]).rule(),
                // The slices it creates are owned by their Service with blockOwnerDeletion.
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["services/finalizers"]).rule(),
                new_rule(&["get", "list", "watch", "create", "update", "delete"])
                    .groups(&[DISCOVERY_GROUP])
                    .resources(&["endpointslices"])
                    .rule(),
                events_rule(),
            ],
        ),
        controller(
            "endpointslicemirroring-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["services", "endpoints"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["services/finalizers"]).rule(),
                // Mirrored slices are also owned by the Endpoints they mirror.
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["endpoints/finalizers"]).rule(),
                new_rule(&["get", "list", "watch", "create", "update", "delete"])
                    .groups(&[DISCOVERY_GROUP])
                    .resources(&["endpointslices"])
                    .rule(),
                events_rule(),
            ],
        ),
        controller(
            "expand-controller",
            vec![
                new_rule(&["get", "list", "watch", "update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes"]).rule(),
                new_rule(&["update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims/status"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                events_rule(),
                new_rule(&["get"]).groups(&[LEGACY_GROUP]).resources(&["services"]).rule(),
            ],
        ),
        controller(
            "ephemeral-volume-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["pods/finalizers"]).rule(),
                new_rule(&["get", "list", "watch", "create"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "generic-garbage-collector",
            // Lists and watches of everything, gets, and updates and deletes of any object.
            vec![
                new_rule(&["get", "list", "watch", "patch", "update", "delete"]).groups(&["*"]).resources(&["*"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "horizontal-pod-autoscaler",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[AUTOSCALING_GROUP]).resources(&["horizontalpodautoscalers"]).rule(),
                new_rule(&["update"]).groups(&[AUTOSCALING_GROUP]).resources(&["horizontalpodautoscalers/status"]).rule(),
                new_rule(&["get", "update"]).groups(&["*"]).resources(&["*/scale"]).rule(),
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                // Resource, custom and external metrics.
                new_rule(&["list", "watch"]).groups(&[RES_METRICS_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[CUSTOM_METRICS_GROUP]).resources(&["*"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[EXTERNAL_METRICS_GROUP]).resources(&["*"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "job-controller",
            vec![
                new_rule(&["get", "list", "watch", "update", "patch"]).groups(&[BATCH_GROUP]).resources(&["jobs"]).rule(),
                new_rule(&["update"]).groups(&[BATCH_GROUP]).resources(&["jobs/status"]).rule(),
                new_rule(&["update"]).groups(&[BATCH_GROUP]).resources(&["jobs/finalizers"]).rule(),
                // patch: removing its tracking finalizer from finished pods.
                new_rule(&["list", "watch", "create", "delete", "patch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "namespace-controller",
            vec![
                new_rule(&["get", "list", "watch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["namespaces"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["namespaces/finalize", "namespaces/status"]).rule(),
                // Emptying a terminating namespace of every kind of object.
                new_rule(&["get", "list", "watch", "delete", "deletecollection"]).groups(&["*"]).resources(&["*"]).rule(),
            ],
        ),
        controller(
            "node-controller",
            vec![
                new_rule(&["get", "list", "watch", "update", "delete", "patch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["patch", "update"]).groups(&[LEGACY_GROUP]).resources(&["nodes/status"]).rule(),
                // Marking the pods of an unreachable node not ready, then deleting them.
                new_rule(&["patch", "update"]).groups(&[LEGACY_GROUP]).resources(&["pods/status"]).rule(),
                new_rule(&["list", "watch", "get", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "persistent-volume-binder",
            vec![
                new_rule(&["get", "list", "watch", "update", "create", "delete"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["persistentvolumes"])
                    .rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes/status"]).rule(),
                new_rule(&["get", "list", "watch", "update"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims/status"]).rule(),
                // The recycler's scrubber pods.
                new_rule(&["list", "watch", "get", "create", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[STORAGE_GROUP]).resources(&["storageclasses"]).rule(),
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                events_rule(),
                // Watching the scrubber pods' events.
                new_rule(&["watch"]).groups(&[LEGACY_GROUP]).resources(&["events"]).rule(),
                new_rule(&["get"]).groups(&[LEGACY_GROUP]).resources(&["services"]).rule(),
            ],
        ),
        controller(
            "pod-garbage-collector",
            vec![
                new_rule(&["list", "watch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                // Marking a pod failed before deleting it.
                new_rule(&["patch"]).groups(&[LEGACY_GROUP]).resources(&["pods/status"]).rule(),
            ],
        ),
        controller(
            "replicaset-controller",
            vec![
                new_rule(&["get", "list", "watch", "update"]).groups(&[APPS_GROUP, EXTENSIONS_GROUP]).resources(&["replicasets"]).rule(),
                new_rule(&["update"]).groups(&[APPS_GROUP, EXTENSIONS_GROUP]).resources(&["replicasets/status"]).rule(),
                new_rule(&["update"]).groups(&[APPS_GROUP, EXTENSIONS_GROUP]).resources(&["replicasets/finalizers"]).rule(),
                new_rule(&["list", "watch", "patch", "create", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "replication-controller",
            vec![
                // get and update, which 1.0-era controllers used and would break without.
                new_rule(&["get", "list", "watch", "update"]).groups(&[LEGACY_GROUP]).resources(&["replicationcontrollers"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["replicationcontrollers/status"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["replicationcontrollers/finalizers"]).rule(),
                new_rule(&["list", "watch", "patch", "create", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "resourcequota-controller",
            vec![
                // A quota may count any kind of object.
                new_rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["resourcequotas/status"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "route-controller",
            vec![
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["patch"]).groups(&[LEGACY_GROUP]).resources(&["nodes/status"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "service-account-controller",
            vec![new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["serviceaccounts"]).rule(), events_rule()],
        ),
        controller(
            "service-controller",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["services"]).rule(),
                new_rule(&["patch", "update"]).groups(&[LEGACY_GROUP]).resources(&["services/status"]).rule(),
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                events_rule(),
            ],
        ),
        // MultiCIDRServiceAllocator, GA in 1.33: it keeps a ServiceCIDR from being deleted
        // while service addresses remain in it.
        controller(
            "service-cidrs-controller",
            vec![
                new_rule(&["get", "list", "watch", "patch", "update"]).groups(&[NETWORKING_GROUP]).resources(&["servicecidrs"]).rule(),
                new_rule(&["patch", "update"]).groups(&[NETWORKING_GROUP]).resources(&["servicecidrs/finalizers"]).rule(),
                new_rule(&["patch", "update"]).groups(&[NETWORKING_GROUP]).resources(&["servicecidrs/status"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[NETWORKING_GROUP]).resources(&["ipaddresses"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "statefulset-controller",
            vec![
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[APPS_GROUP]).resources(&["statefulsets"]).rule(),
                new_rule(&["update"]).groups(&[APPS_GROUP]).resources(&["statefulsets/status"]).rule(),
                new_rule(&["update"]).groups(&[APPS_GROUP]).resources(&["statefulsets/finalizers"]).rule(),
                new_rule(&["get", "create", "delete", "update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["get", "create", "delete", "update", "patch", "list", "watch"])
                    .groups(&[APPS_GROUP])
                    .resources(&["controllerrevisions"])
                    .rule(),
                new_rule(&["get", "create", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                events_rule(),
                // persistentVolumeClaimRetentionPolicy: the claims of a deleted or scaled-down
                // set get the set or the pod as owner, then are deleted with it.
                new_rule(&["update", "delete"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["pods/finalizers"]).rule(),
            ],
        ),
        controller(
            "ttl-controller",
            // Annotating each node with how long its kubelet may cache objects.
            vec![new_rule(&["update", "patch", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(), events_rule()],
        ),
        controller(
            "certificate-controller",
            vec![
                new_rule(&["get", "list", "watch", "delete"]).groups(&[CERTIFICATES_GROUP]).resources(&["certificatesigningrequests"]).rule(),
                new_rule(&["update"])
                    .groups(&[CERTIFICATES_GROUP])
                    .resources(&["certificatesigningrequests/status", "certificatesigningrequests/approval"])
                    .rule(),
                // The approver auto-approves kubelets' client certificates ...
                new_rule(&["approve"])
                    .groups(&[CERTIFICATES_GROUP])
                    .resources(&["signers"])
                    .names(&[KUBE_APISERVER_CLIENT_KUBELET_SIGNER])
                    .rule(),
                // ... and the signer signs for the built-in signers.
                new_rule(&["sign"])
                    .groups(&[CERTIFICATES_GROUP])
                    .resources(&["signers"])
                    .names(&[
                        LEGACY_UNKNOWN_SIGNER,
                        KUBE_APISERVER_CLIENT_SIGNER,
                        KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                        KUBELET_SERVING_SIGNER,
                    ])
                    .rule(),
                // The approver asks whether the requester may ask for such a certificate.
                new_rule(&["create"]).groups(&[AUTHORIZATION_GROUP]).resources(&["subjectaccessreviews"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "pvc-protection-controller",
            vec![
                new_rule(&["get", "list", "watch", "update"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                new_rule(&["list", "watch", "get"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "pv-protection-controller",
            vec![
                new_rule(&["get", "list", "watch", "update"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes"]).rule(),
                events_rule(),
            ],
        ),
        controller(
            "ttl-after-finished-controller",
            vec![new_rule(&["get", "list", "watch", "delete"]).groups(&[BATCH_GROUP]).resources(&["jobs"]).rule(), events_rule()],
        ),
        controller(
            "root-ca-cert-publisher",
            // The kube-root-ca.crt ConfigMap in every namespace.
            vec![new_rule(&["create", "update"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).rule(), events_rule()],
        ),
        controller(
            "validatingadmissionpolicy-status-controller",
            vec![
                new_rule(&["get", "list", "watch"])
                    .groups(&[ADMISSION_REGISTRATION_GROUP])
                    .resources(&["validatingadmissionpolicies"])
                    .rule(),
                new_rule(&["get", "patch", "update"])
                    .groups(&[ADMISSION_REGISTRATION_GROUP])
                    .resources(&["validatingadmissionpolicies/status"])
                    .rule(),
                events_rule(),
            ],
        ),
        controller(
            "legacy-service-account-token-cleaner",
            vec![
                new_rule(&["get"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).names(&[LEGACY_TOKEN_TRACKING_CONFIGMAP]).rule(),
                new_rule(&["patch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["secrets"]).rule(),
            ],
        ),
        // SELinuxChangePolicy, beta and on by default in 1.33: it warns about pods that would
        // share a volume with conflicting SELinux labels.
        controller(
            "selinux-warning-controller",
            vec![
                events_rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[STORAGE_GROUP]).resources(&["csidrivers"]).rule(),
            ],
        ),
    ];

    let mut seen = std::collections::BTreeSet::new();
    for role in &mut roles {
        let name = role.metadata.name.clone().unwrap_or_default();
        assert!(name.starts_with(SA_ROLE_PREFIX), "controller role {name:?} must start with {SA_ROLE_PREFIX:?}");
        assert!(seen.insert(name.clone()), "controller role {name:?} registered twice");
        add_default_metadata(&mut role.metadata);
    }
    roles
}

/// The roles of kube-controller-manager's controllers, `system:controller:<controller>`.
pub fn controller_roles() -> Vec<ClusterRole> {
    build_controller_roles()
}

/// One binding per controller role, to the service account `kube-system/<controller>`.
pub fn controller_role_bindings() -> Vec<ClusterRoleBinding> {
    build_controller_roles()
        .iter()
        .filter_map(|role| role.metadata.name.as_deref())
        .map(|name| {
            let account = &name[SA_ROLE_PREFIX.len()..];
            let mut binding =
                ClusterRoleBindingBuilder::new(name).service_accounts(CONTROLLER_NAMESPACE, &[account]).binding();
            add_default_metadata(&mut binding.metadata);
            binding
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::golden;
    use super::*;

    #[test]
    fn controller_roles_match_the_golden_file() {
        golden::assert_matches(
            controller_roles(),
            golden::load(include_str!("testdata/controller-roles.yaml")),
            golden::cluster_role_key,
        );
    }

    #[test]
    fn controller_role_bindings_match_the_golden_file() {
        golden::assert_matches(
            controller_role_bindings(),
            golden::load(include_str!("testdata/controller-role-bindings.yaml")),
            golden::cluster_role_binding_key,
        );
    }

    #[test]
    fn each_controller_is_bound_to_its_own_service_account() {
        let roles = controller_roles();
        let bindings = controller_role_bindings();
        assert_eq!(roles.len(), bindings.len());
        for (role, binding) in roles.iter().zip(&bindings) {
            let name = role.metadata.name.as_deref().unwrap_or_default();
            assert_eq!(binding.metadata.name.as_deref(), Some(name));
            assert_eq!(binding.role_ref.name, name);
            let subjects = binding.subjects.as_deref().unwrap_or_default();
            let want = name.strip_prefix(SA_ROLE_PREFIX);
            assert!(
                matches!(subjects, [s] if s.kind == "ServiceAccount"
                    && s.namespace.as_deref() == Some("kube-system")
                    && Some(s.name.as_str()) == want),
                "{name} is bound to {subjects:?}"
            );
        }
    }
}
