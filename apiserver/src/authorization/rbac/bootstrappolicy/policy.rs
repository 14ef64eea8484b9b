//! Mirrors plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go: the default ClusterRoles
//! and ClusterRoleBindings every cluster starts with.
//!
//! Three families of roles:
//! - user-facing: `cluster-admin`, and `admin` / `edit` / `view`, which hold no rules of their
//!   own but an aggregation rule; the `system:aggregate-to-*` roles carry the matching labels, so
//!   the clusterrole-aggregation controller folds their rules into them (and so does any role a
//!   user labels the same way: that is how a CRD joins `edit`);
//! - discovery: `system:discovery`, `system:basic-user`, `system:public-info-viewer`,
//!   `system:monitoring`: what every client may ask before it is anyone in particular;
//! - components: `system:node`, `system:node-proxier`, `system:kube-scheduler`,
//!   `system:kube-controller-manager`, `system:kube-dns`, the CSR approvers, ...
//!
//! Rules name resources kubelab does not serve (runtimeclasses, volumesnapshots, ...): they are
//! Kubernetes' rules, harmless where the resource does not exist, and keep the policy the one a
//! learner sees in a real cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::helpers::{ClusterRoleBindingBuilder, GROUP_NAME, new_rule};

/// Verbs that change objects.
pub const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
/// Every verb on objects.
pub const READ_WRITE: &[&str] =
    &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
/// Verbs that only look.
pub const READ: &[&str] = &["get", "list", "watch"];
/// Looking, plus changing what exists.
pub const READ_UPDATE: &[&str] = &["get", "list", "watch", "update", "patch"];

/// The label every default object carries, so `kubectl get clusterroles -l
/// kubernetes.io/bootstrapping=rbac-defaults` lists the policy.
pub const BOOTSTRAPPING_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

/// The annotation that lets the API server keep a default object up to date at start. An admin
/// who sets it to `"false"` takes the object over: it is then never changed again.
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// The labels that fold a ClusterRole's rules into `admin`, `edit` and `view`.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

pub(crate) const LEGACY_GROUP: &str = "";
pub(crate) const ADMISSION_REGISTRATION_GROUP: &str = "admissionregistration.k8s.io";
pub(crate) const APPS_GROUP: &str = "apps";
pub(crate) const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
pub(crate) const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";
pub(crate) const AUTOSCALING_GROUP: &str = "autoscaling";
pub(crate) const BATCH_GROUP: &str = "batch";
pub(crate) const CERTIFICATES_GROUP: &str = "certificates.k8s.io";
pub(crate) const COORDINATION_GROUP: &str = "coordination.k8s.io";
pub(crate) const DISCOVERY_GROUP: &str = "discovery.k8s.io";
pub(crate) const EXTENSIONS_GROUP: &str = "extensions";
pub(crate) const POLICY_GROUP: &str = "policy";
pub(crate) const RBAC_GROUP: &str = GROUP_NAME;
pub(crate) const STORAGE_GROUP: &str = "storage.k8s.io";
pub(crate) const RES_METRICS_GROUP: &str = "metrics.k8s.io";
pub(crate) const CUSTOM_METRICS_GROUP: &str = "custom.metrics.k8s.io";
pub(crate) const EXTERNAL_METRICS_GROUP: &str = "external.metrics.k8s.io";
pub(crate) const NETWORKING_GROUP: &str = "networking.k8s.io";
pub(crate) const EVENTS_GROUP: &str = "events.k8s.io";
pub(crate) const NODE_GROUP: &str = "node.k8s.io";

// The well-known users and groups of k8s.io/apiserver/pkg/authentication/user.
const SYSTEM_PRIVILEGED_GROUP: &str = "system:masters";
const MONITORING_GROUP: &str = "system:monitoring";
const ALL_AUTHENTICATED: &str = "system:authenticated";
const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
const KUBE_PROXY: &str = "system:kube-proxy";
const KUBE_CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const KUBE_SCHEDULER: &str = "system:kube-scheduler";

// The CSR signers of k8s.io/api/certificates/v1.
pub(crate) const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
pub(crate) const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str =
    "kubernetes.io/kube-apiserver-client-kubelet";
pub(crate) const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
pub(crate) const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";

const SYSTEM_NODE_ROLE_NAME: &str = "system:node";

/// Adds the bootstrapping label and the autoupdate annotation, keeping labels already set.
pub(crate) fn add_default_metadata(meta: &mut ObjectMeta) {
    let (key, value) = BOOTSTRAPPING_LABEL;
    meta.labels.get_or_insert_with(BTreeMap::new).insert(key.to_string(), value.to_string());
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(AUTOUPDATE_ANNOTATION.to_string(), "true".to_string());
}

fn role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
        rules: Some(rules),
        aggregation_rule: None,
    }
}

/// A role carrying `label: "true"`, so the aggregation controller folds it into another.
fn labelled(mut role: ClusterRole, label: &str) -> ClusterRole {
    role.metadata.labels.get_or_insert_with(BTreeMap::new).insert(label.to_string(), "true".to_string());
    role
}

/// A role whose rules are the union of every ClusterRole labelled `selector: "true"`. It is
/// written with no rules at all: the aggregation controller fills them in.
fn aggregated(name: &str, selector: &str) -> ClusterRole {
    let match_labels = BTreeMap::from([(selector.to_string(), "true".to_string())]);
    ClusterRole {
        metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() },
        rules: None,
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some(match_labels),
                match_expressions: None,
            }]),
        }),
    }
}

/// The rules of `system:node`: what a kubelet needs to register its Node and run its pods.
///
/// No subject is bound to the role: the Node authorizer, with the NodeRestriction admission
/// plugin, grants each kubelet these verbs on its own Node and on the pods, secrets, volumes
/// bound to it only. The role stays as the list of what that authorizer may grant.
/// Recording events, in the core group and in events.k8s.io: nearly every component does.
pub fn events_rule() -> PolicyRule {
    new_rule(&["create", "update", "patch"]).groups(&[LEGACY_GROUP, EVENTS_GROUP]).resources(&["events"]).rule()
}

pub fn node_rules() -> Vec<PolicyRule> {
    vec![
        // Checking the credentials of callers of the kubelet's own API. Both creates change
        // nothing.
        new_rule(&["create"]).groups(&[AUTHENTICATION_GROUP]).resources(&["tokenreviews"]).rule(),
        new_rule(&["create"])
            .groups(&[AUTHORIZATION_GROUP])
            .resources(&["subjectaccessreviews", "localsubjectaccessreviews"])
            .rule(),
        // Services, for the environment variables of every container.
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["services"]).rule(),
        // Registering the Node and reporting its status.
        new_rule(&["create", "get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
        new_rule(&["update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["nodes/status"]).rule(),
        new_rule(&["update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
        new_rule(&["create", "update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["events"]).rule(),
        // Its pods: watching them, creating and deleting mirror pods of static pods, reporting
        // their status, evicting them.
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
        new_rule(&["create", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
        new_rule(&["update", "patch"]).groups(&[LEGACY_GROUP]).resources(&["pods/status"]).rule(),
        new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["pods/eviction"]).rule(),
        // What the pods mount or read: secrets and configmaps (volumes, env, image pull
        // secrets), volumes and their claims, endpoints of in-tree network volumes.
        new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["secrets", "configmaps"]).rule(),
        new_rule(&["get"])
            .groups(&[LEGACY_GROUP])
            .resources(&["persistentvolumeclaims", "persistentvolumes"])
            .rule(),
        new_rule(&["get"]).groups(&[LEGACY_GROUP]).resources(&["endpoints"]).rule(),
        // Rotating its own client certificate.
        new_rule(&["create", "get", "list", "watch"])
            .groups(&[CERTIFICATES_GROUP])
            .resources(&["certificatesigningrequests"])
            .rule(),
        // Its heartbeat Lease in kube-node-lease.
        new_rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[COORDINATION_GROUP])
            .resources(&["leases"])
            .rule(),
        new_rule(&["get"]).groups(&[STORAGE_GROUP]).resources(&["volumeattachments"]).rule(),
        // Service account tokens for its pods' projected volumes.
        new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["serviceaccounts/token"]).rule(),
        // Resizing a volume's filesystem, then reporting it on the claim.
        new_rule(&["get", "update", "patch"])
            .groups(&[LEGACY_GROUP])
            .resources(&["persistentvolumeclaims/status"])
            .rule(),
        // CSI drivers and the node's CSINode object.
        new_rule(&["get", "watch", "list"]).groups(&[STORAGE_GROUP]).resources(&["csidrivers"]).rule(),
        new_rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[STORAGE_GROUP])
            .resources(&["csinodes"])
            .rule(),
        new_rule(&["get", "list", "watch"]).groups(&[NODE_GROUP]).resources(&["runtimeclasses"]).rule(),
    ]
}

/// Every default ClusterRole, each with the bootstrapping label and the autoupdate annotation.
pub fn cluster_roles() -> Vec<ClusterRole> {
    let mut roles = vec![
        // The "root" role: anything, anywhere, including every path.
        role(
            "cluster-admin",
            vec![
                new_rule(&["*"]).groups(&["*"]).resources(&["*"]).rule(),
                new_rule(&["*"]).urls(&["*"]).rule(),
            ],
        ),
        // Just enough to learn whether the server is up and which APIs it serves.
        role(
            "system:discovery",
            vec![new_rule(&["get"])
                .urls(&[
                    "/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi",
                    "/openapi/*", "/api", "/api/*", "/apis", "/apis/*",
                ])
                .rule()],
        ),
        // Metrics and the health checks one by one (/readyz/etcd, ...), which may say more
        // about the cluster than the plain ones.
        role(
            "system:monitoring",
            vec![new_rule(&["get"])
                .urls(&[
                    "/metrics", "/metrics/slis", "/livez", "/readyz", "/healthz", "/livez/*",
                    "/readyz/*", "/healthz/*",
                ])
                .rule()],
        ),
        // What a user may ask about themselves: who am I, may I, what may I.
        role(
            "system:basic-user",
            vec![
                new_rule(&["create"])
                    .groups(&[AUTHORIZATION_GROUP])
                    .resources(&["selfsubjectaccessreviews", "selfsubjectrulesreviews"])
                    .rule(),
                new_rule(&["create"]).groups(&[AUTHENTICATION_GROUP]).resources(&["selfsubjectreviews"]).rule(),
            ],
        ),
        // What anyone, even anonymous, may read: health and version.
        role(
            "system:public-info-viewer",
            vec![new_rule(&["get"]).urls(&["/livez", "/readyz", "/healthz", "/version", "/version/"]).rule()],
        ),
        // The user-facing roles, meant for RoleBindings in a namespace. admin is edit plus
        // granting roles within the namespace; edit changes everything but roles, quotas and
        // limits; view reads everything but secrets and what would escalate.
        aggregated("admin", AGGREGATE_TO_ADMIN),
        labelled(aggregated("edit", AGGREGATE_TO_EDIT), AGGREGATE_TO_ADMIN),
        labelled(aggregated("view", AGGREGATE_TO_VIEW), AGGREGATE_TO_EDIT),
        labelled(
            role(
                "system:aggregate-to-admin",
                vec![
                    new_rule(&["create"])
                        .groups(&[AUTHORIZATION_GROUP])
                        .resources(&["localsubjectaccessreviews"])
                        .rule(),
                    new_rule(READ_WRITE).groups(&[RBAC_GROUP]).resources(&["roles", "rolebindings"]).rule(),
                ],
            ),
            AGGREGATE_TO_ADMIN,
        ),
        labelled(role("system:aggregate-to-edit", aggregate_to_edit_rules()), AGGREGATE_TO_EDIT),
        labelled(role("system:aggregate-to-view", aggregate_to_view_rules()), AGGREGATE_TO_VIEW),
        // Heapster's reads; the role outlived Heapster.
        role(
            "system:heapster",
            vec![
                new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["events", "pods", "nodes", "namespaces"]).rule(),
                new_rule(READ).groups(&[EXTENSIONS_GROUP]).resources(&["deployments"]).rule(),
            ],
        ),
        role(SYSTEM_NODE_ROLE_NAME, node_rules()),
        // For node-problem-detector; not bound by default, since where it runs varies.
        role(
            "system:node-problem-detector",
            vec![
                new_rule(&["get"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["patch"]).groups(&[LEGACY_GROUP]).resources(&["nodes/status"]).rule(),
                events_rule(),
            ],
        ),
        // Full access to every kubelet's API, for the API server's client certificate to the
        // kubelets (kubeadm binds it to this role).
        role(
            "system:kubelet-api-admin",
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["proxy"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                new_rule(&["*"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"])
                    .rule(),
                // The kubelet's finer-grained checks for /configz, /healthz and /pods
                // (KubeletFineGrainedAuthz, on by default since 1.33).
                new_rule(&["*"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["nodes/configz", "nodes/healthz", "nodes/pods"])
                    .rule(),
            ],
        ),
        // Kubelet TLS bootstrap: asking for a first client certificate.
        role(
            "system:node-bootstrapper",
            vec![new_rule(&["create", "get", "list", "watch"])
                .groups(&[CERTIFICATES_GROUP])
                .resources(&["certificatesigningrequests"])
                .rule()],
        ),
        // Delegated authentication and authorization, for extension API servers.
        role(
            "system:auth-delegator",
            vec![
                new_rule(&["create"]).groups(&[AUTHENTICATION_GROUP]).resources(&["tokenreviews"]).rule(),
                new_rule(&["create"]).groups(&[AUTHORIZATION_GROUP]).resources(&["subjectaccessreviews"]).rule(),
            ],
        ),
        // The aggregator, to know whether the Services its APIServices point to exist.
        role(
            "system:kube-aggregator",
            vec![new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["services", "endpoints"]).rule()],
        ),
        // What kube-controller-manager itself needs: its leader lease, and enough to create a
        // service account and token for each controller, which then act with their own roles
        // (controller_policy.rs).
        role(
            "system:kube-controller-manager",
            vec![
                events_rule(),
                new_rule(&["create"]).groups(&[COORDINATION_GROUP]).resources(&["leases"]).rule(),
                new_rule(&["get", "update"])
                    .groups(&[COORDINATION_GROUP])
                    .resources(&["leases"])
                    .names(&["kube-controller-manager"])
                    .rule(),
                new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["secrets", "serviceaccounts"]).rule(),
                new_rule(&["delete"]).groups(&[LEGACY_GROUP]).resources(&["secrets"]).rule(),
                new_rule(&["get"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["namespaces", "secrets", "serviceaccounts", "configmaps"])
                    .rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["secrets", "serviceaccounts"]).rule(),
                // Delegated authentication and authorization of its own HTTPS endpoint.
                new_rule(&["create"]).groups(&[AUTHENTICATION_GROUP]).resources(&["tokenreviews"]).rule(),
                new_rule(&["create"]).groups(&[AUTHORIZATION_GROUP]).resources(&["subjectaccessreviews"]).rule(),
                // The shared informers every controller reads from.
                new_rule(&["list", "watch"]).groups(&["*"]).resources(&["*"]).rule(),
                new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["serviceaccounts/token"]).rule(),
            ],
        ),
        role(
            "system:kube-dns",
            vec![new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["endpoints", "services"]).rule()],
        ),
        // For external provisioners: create and delete volumes for claims.
        role(
            "system:persistent-volume-provisioner",
            vec![
                new_rule(&["get", "list", "watch", "create", "delete"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["persistentvolumes"])
                    .rule(),
                // update, to set the annotations that tell who provisions a claim.
                new_rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY_GROUP])
                    .resources(&["persistentvolumeclaims"])
                    .rule(),
                new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["storageclasses"]).rule(),
                // Watching events, to log provisioning failures.
                new_rule(&["watch"]).groups(&[LEGACY_GROUP]).resources(&["events"]).rule(),
                events_rule(),
            ],
        ),
        // Creating the CSRs that kube-controller-manager's approver signs without an admin.
        role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![new_rule(&["create"])
                .groups(&[CERTIFICATES_GROUP])
                .resources(&["certificatesigningrequests/nodeclient"])
                .rule()],
        ),
        role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![new_rule(&["create"])
                .groups(&[CERTIFICATES_GROUP])
                .resources(&["certificatesigningrequests/selfnodeclient"])
                .rule()],
        ),
        // The scheduler's volume binding: choosing a PersistentVolume for a claim.
        role(
            "system:volume-scheduler",
            vec![
                new_rule(READ_UPDATE).groups(&[LEGACY_GROUP]).resources(&["persistentvolumes"]).rule(),
                new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["storageclasses"]).rule(),
                new_rule(READ_UPDATE).groups(&[LEGACY_GROUP]).resources(&["persistentvolumeclaims"]).rule(),
            ],
        ),
        // Approving CSRs for one signer each, to hand to whoever approves them.
        approver("system:certificates.k8s.io:legacy-unknown-approver", LEGACY_UNKNOWN_SIGNER),
        approver("system:certificates.k8s.io:kubelet-serving-approver", KUBELET_SERVING_SIGNER),
        approver("system:certificates.k8s.io:kube-apiserver-client-approver", KUBE_APISERVER_CLIENT_SIGNER),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
        ),
        // The OIDC discovery document and signing keys of service account tokens, so that
        // workloads can verify each other's tokens.
        role(
            "system:service-account-issuer-discovery",
            vec![new_rule(&["get"])
                .urls(&[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ])
                .rule()],
        ),
        // kube-proxy.
        role(
            "system:node-proxier",
            vec![
                new_rule(&["list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["services", "endpoints"]).rule(),
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
                events_rule(),
                // The ServiceCIDRs, to know which addresses are service addresses
                // (MultiCIDRServiceAllocator, GA in 1.33).
                new_rule(&["list", "watch"]).groups(&[NETWORKING_GROUP]).resources(&["servicecidrs"]).rule(),
                new_rule(&["list", "watch"]).groups(&[DISCOVERY_GROUP]).resources(&["endpointslices"]).rule(),
            ],
        ),
        role("system:kube-scheduler", kube_scheduler_rules()),
    ];
    for role in &mut roles {
        add_default_metadata(&mut role.metadata);
    }
    roles
}

fn approver(name: &str, signer: &str) -> ClusterRole {
    role(
        name,
        vec![new_rule(&["approve"]).groups(&[CERTIFICATES_GROUP]).resources(&["signers"]).names(&[signer]).rule()],
    )
}

/// What `edit` adds to `view`: writing, and reading what view leaves out because reading it
/// would escalate (secrets; exec, attach and the proxies, which run code or reach inside).
fn aggregate_to_edit_rules() -> Vec<PolicyRule> {
    vec![
        new_rule(READ)
            .groups(&[LEGACY_GROUP])
            .resources(&["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"])
            .rule(),
        new_rule(&["impersonate"]).groups(&[LEGACY_GROUP]).resources(&["serviceaccounts"]).rule(),
        new_rule(WRITE)
            .groups(&[LEGACY_GROUP])
            .resources(&["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"])
            .rule(),
        new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["pods/eviction"]).rule(),
        new_rule(WRITE)
            .groups(&[LEGACY_GROUP])
            .resources(&[
                "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                "services/proxy", "persistentvolumeclaims", "configmaps", "secrets", "events",
            ])
            .rule(),
        new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["serviceaccounts/token"]).rule(),
        new_rule(WRITE)
            .groups(&[APPS_GROUP])
            .resources(&[
                "statefulsets", "statefulsets/scale", "daemonsets", "deployments", "deployments/scale",
                "deployments/rollback", "replicasets", "replicasets/scale",
            ])
            .rule(),
        new_rule(WRITE).groups(&[AUTOSCALING_GROUP]).resources(&["horizontalpodautoscalers"]).rule(),
        new_rule(WRITE).groups(&[BATCH_GROUP]).resources(&["jobs", "cronjobs"]).rule(),
        new_rule(WRITE)
            .groups(&[EXTENSIONS_GROUP])
            .resources(&[
                "daemonsets", "deployments", "deployments/scale", "deployments/rollback", "ingresses",
                "replicasets", "replicasets/scale", "replicationcontrollers/scale", "networkpolicies",
            ])
            .rule(),
        new_rule(WRITE).groups(&[POLICY_GROUP]).resources(&["poddisruptionbudgets"]).rule(),
        new_rule(WRITE).groups(&[NETWORKING_GROUP]).resources(&["networkpolicies", "ingresses"]).rule(),
        new_rule(READ_WRITE).groups(&[COORDINATION_GROUP]).resources(&["leases"]).rule(),
    ]
}

/// What `view` reads: the namespace's objects, their status and logs, but not secrets.
fn aggregate_to_view_rules() -> Vec<PolicyRule> {
    vec![
        new_rule(READ)
            .groups(&[LEGACY_GROUP])
            .resources(&[
                "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                "services/status", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status",
                "configmaps",
            ])
            .rule(),
        new_rule(READ)
            .groups(&[LEGACY_GROUP])
            .resources(&[
                "limitranges", "resourcequotas", "bindings", "events", "pods/status", "resourcequotas/status",
                "namespaces/status", "replicationcontrollers/status", "pods/log",
            ])
            .rule(),
        // Reading namespaces, granted in a namespace, reads that namespace: a hint of which
        // namespaces a user may work in.
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["namespaces"]).rule(),
        new_rule(READ).groups(&[DISCOVERY_GROUP]).resources(&["endpointslices"]).rule(),
        new_rule(READ)
            .groups(&[APPS_GROUP])
            .resources(&[
                "controllerrevisions", "statefulsets", "statefulsets/status", "statefulsets/scale", "daemonsets",
                "daemonsets/status", "deployments", "deployments/status", "deployments/scale", "replicasets",
                "replicasets/status", "replicasets/scale",
            ])
            .rule(),
        new_rule(READ)
            .groups(&[AUTOSCALING_GROUP])
            .resources(&["horizontalpodautoscalers", "horizontalpodautoscalers/status"])
            .rule(),
        new_rule(READ).groups(&[BATCH_GROUP]).resources(&["jobs", "cronjobs", "cronjobs/status", "jobs/status"]).rule(),
        new_rule(READ)
            .groups(&[EXTENSIONS_GROUP])
            .resources(&[
                "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
                "ingresses", "ingresses/status", "replicasets", "replicasets/scale", "replicasets/status",
                "replicationcontrollers/scale", "networkpolicies",
            ])
            .rule(),
        new_rule(READ).groups(&[POLICY_GROUP]).resources(&["poddisruptionbudgets", "poddisruptionbudgets/status"]).rule(),
        new_rule(READ)
            .groups(&[NETWORKING_GROUP])
            .resources(&["networkpolicies", "ingresses", "ingresses/status"])
            .rule(),
    ]
}

/// The scheduler: its leader lease, pods to place and the objects its plugins read.
fn kube_scheduler_rules() -> Vec<PolicyRule> {
    vec![
        events_rule(),
        // Its leader lease (scoped to kube-system by the lease's name only).
        new_rule(&["create"]).groups(&[COORDINATION_GROUP]).resources(&["leases"]).rule(),
        new_rule(&["get", "update", "list", "watch"])
            .groups(&[COORDINATION_GROUP])
            .resources(&["leases"])
            .names(&["kube-scheduler"])
            .rule(),
        // Standing as a candidate in coordinated leader election.
        new_rule(READ_WRITE).groups(&[COORDINATION_GROUP]).resources(&["leasecandidates"]).rule(),
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["nodes"]).rule(),
        // delete: preemption evicts lower-priority pods.
        new_rule(&["get", "list", "watch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["pods"]).rule(),
        new_rule(&["create"]).groups(&[LEGACY_GROUP]).resources(&["pods/binding", "bindings"]).rule(),
        new_rule(&["patch", "update"]).groups(&[LEGACY_GROUP]).resources(&["pods/status"]).rule(),
        // The owners of pods, for spreading replicas.
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["replicationcontrollers", "services"]).rule(),
        new_rule(READ).groups(&[APPS_GROUP, EXTENSIONS_GROUP]).resources(&["replicasets"]).rule(),
        new_rule(READ).groups(&[APPS_GROUP]).resources(&["statefulsets"]).rule(),
        // Preemption respects disruption budgets.
        new_rule(READ).groups(&[POLICY_GROUP]).resources(&["poddisruptionbudgets"]).rule(),
        new_rule(READ)
            .groups(&[LEGACY_GROUP])
            .resources(&["persistentvolumeclaims", "persistentvolumes"])
            .rule(),
        // Delegated authentication and authorization of its own HTTPS endpoint.
        new_rule(&["create"]).groups(&[AUTHENTICATION_GROUP]).resources(&["tokenreviews"]).rule(),
        new_rule(&["create"]).groups(&[AUTHORIZATION_GROUP]).resources(&["subjectaccessreviews"]).rule(),
        // Volume limits per node count attached volumes.
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["csinodes"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["volumeattachments"]).rule(),
        // Namespaces, for inter-pod affinity's namespace selectors.
        new_rule(READ).groups(&[LEGACY_GROUP]).resources(&["namespaces"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["csidrivers"]).rule(),
        new_rule(READ).groups(&[STORAGE_GROUP]).resources(&["csistoragecapacities"]).rule(),
    ]
}

/// Every default ClusterRoleBinding, each with the bootstrapping label and the autoupdate
/// annotation.
pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    let mut bindings = vec![
        ClusterRoleBindingBuilder::new("cluster-admin").groups(&[SYSTEM_PRIVILEGED_GROUP]).binding(),
        ClusterRoleBindingBuilder::new("system:monitoring").groups(&[MONITORING_GROUP]).binding(),
        ClusterRoleBindingBuilder::new("system:discovery").groups(&[ALL_AUTHENTICATED]).binding(),
        ClusterRoleBindingBuilder::new("system:basic-user").groups(&[ALL_AUTHENTICATED]).binding(),
        ClusterRoleBindingBuilder::new("system:public-info-viewer")
            .groups(&[ALL_AUTHENTICATED, ALL_UNAUTHENTICATED])
            .binding(),
        ClusterRoleBindingBuilder::new("system:node-proxier").users(&[KUBE_PROXY]).binding(),
        ClusterRoleBindingBuilder::new("system:kube-controller-manager").users(&[KUBE_CONTROLLER_MANAGER]).binding(),
        ClusterRoleBindingBuilder::new("system:kube-dns").service_accounts("kube-system", &["kube-dns"]).binding(),
        ClusterRoleBindingBuilder::new("system:kube-scheduler").users(&[KUBE_SCHEDULER]).binding(),
        ClusterRoleBindingBuilder::new("system:volume-scheduler").users(&[KUBE_SCHEDULER]).binding(),
        // Bound to nobody: the system:nodes group lost this role when the Node authorizer came
        // (1.7). The binding stays, empty, so that reconciling an old cluster's binding, which
        // named the group, removes the group once an admin allows it.
        ClusterRoleBinding {
            metadata: ObjectMeta { name: Some(SYSTEM_NODE_ROLE_NAME.to_string()), ..ObjectMeta::default() },
            role_ref: RoleRef {
                api_group: Some(GROUP_NAME.to_string()),
                kind: "ClusterRole".to_string(),
                name: SYSTEM_NODE_ROLE_NAME.to_string(),
            },
            subjects: None,
        },
        // Every service account may verify others' tokens.
        ClusterRoleBindingBuilder::new("system:service-account-issuer-discovery")
            .groups(&[ALL_SERVICE_ACCOUNTS])
            .binding(),
    ];
    for binding in &mut bindings {
        add_default_metadata(&mut binding.metadata);
    }
    bindings
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::golden;
    use super::*;

    #[test]
    fn cluster_roles_match_the_golden_file() {
        golden::assert_matches(
            cluster_roles(),
            golden::load(include_str!("testdata/cluster-roles.yaml")),
            golden::cluster_role_key,
        );
    }

    #[test]
    fn cluster_role_bindings_match_the_golden_file() {
        golden::assert_matches(
            cluster_role_bindings(),
            golden::load(include_str!("testdata/cluster-role-bindings.yaml")),
            golden::cluster_role_binding_key,
        );
    }

    #[test]
    fn every_binding_grants_a_default_role() {
        let roles: BTreeSet<_> = cluster_roles().into_iter().filter_map(|r| r.metadata.name).collect();
        for binding in cluster_role_bindings() {
            assert!(roles.contains(&binding.role_ref.name), "{} grants a role that is not a default", binding.role_ref.name);
        }
    }

    /// admin, edit and view get their rules only through aggregation: each must select at
    /// least one default role, and edit and view must themselves fold into the next one up.
    #[test]
    fn aggregated_roles_are_wired_to_their_parts() {
        let roles = cluster_roles();
        let labelled = |label: &str| -> BTreeSet<String> {
            roles
                .iter()
                .filter(|r| r.metadata.labels.as_ref().and_then(|l| l.get(label)).is_some_and(|v| v == "true"))
                .filter_map(|r| r.metadata.name.clone())
                .collect()
        };
        for (name, selector) in [("admin", AGGREGATE_TO_ADMIN), ("edit", AGGREGATE_TO_EDIT), ("view", AGGREGATE_TO_VIEW)] {
            let role = roles.iter().find(|r| r.metadata.name.as_deref() == Some(name)).expect(name);
            assert_eq!(role.rules, None, "{name} holds rules of its own");
            let selectors = role.aggregation_rule.as_ref().and_then(|a| a.cluster_role_selectors.clone()).unwrap_or_default();
            let selected: Vec<_> = selectors.iter().filter_map(|s| s.match_labels.as_ref()).collect();
            assert_eq!(selected, [&BTreeMap::from([(selector.to_string(), "true".to_string())])]);
            assert!(labelled(selector).contains(&format!("system:aggregate-to-{name}")), "nothing aggregates into {name}");
        }
        assert!(labelled(AGGREGATE_TO_ADMIN).contains("edit"));
        assert!(labelled(AGGREGATE_TO_EDIT).contains("view"));
    }
}
