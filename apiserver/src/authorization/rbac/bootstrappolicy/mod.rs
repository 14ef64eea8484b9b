//! Mirrors plugin/pkg/auth/authorizer/rbac/bootstrappolicy: Kubernetes' default RBAC policy, as
//! data.
//!
//! A cluster that authorizes with RBAC starts with no permissions at all, so the API server
//! brings its own: the roles its clients and its own components need, and the bindings that
//! give them out. This module holds that policy, as Kubernetes 1.33 ships it with its default
//! feature gates:
//!
//! - [`cluster_roles`] and [`cluster_role_bindings`] ([`policy`]): `cluster-admin` for
//!   `system:masters`; the user-facing `admin`, `edit` and `view`; discovery for every
//!   authenticated user and health and version for everyone; and the roles of the components
//!   (`system:kube-scheduler`, `system:node-proxier`, `system:kube-controller-manager`, ...);
//! - [`controller_roles`] and [`controller_role_bindings`] ([`controller_policy`]): one role per
//!   kube-controller-manager controller, `system:controller:<name>`, bound to the service
//!   account `kube-system/<name>` that the controller runs as;
//! - [`namespace_roles`] and [`namespace_role_bindings`] ([`namespace_policy`]): the few
//!   powers that belong to one namespace, kube-system or kube-public;
//! - [`csi_sidecar_roles`] ([`csi_sidecar_policy`]): kubelab's addition, the ClusterRoles of the
//!   CSI external provisioner and attacher (`system:csi-external-provisioner`,
//!   `system:csi-external-attacher`) as the sidecars' own manifests define them, unbound: the
//!   deployment of a driver binds them to its identity.
//!
//! # How the policy is used
//!
//! 1. At start, once its storage is up, the API server reconciles each object of the policy
//!    (Kubernetes' `rbac/bootstrap-roles` post-start hook): a missing role or binding is created;
//!    an existing one that still carries `rbac.authorization.kubernetes.io/autoupdate: "true"`
//!    gets what the policy adds (rules, subjects, aggregation selectors) without losing what an
//!    admin added to it. An object whose annotation an admin set to `"false"` is left exactly as
//!    it is: that is how a cluster opts out of a default, for good.
//! 2. The clusterrole-aggregation controller fills `admin`, `edit` and `view`, which the policy
//!    writes with an aggregation rule and no rules, with the rules of every ClusterRole labelled
//!    `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`: here the `system:aggregate-to-*`
//!    roles, and any role a user labels the same way.
//! 3. The RBAC authorizer then evaluates these objects like any other.
//!
//! Every object carries the label `kubernetes.io/bootstrapping: rbac-defaults`, so the policy can
//! be listed: `kubectl get clusterroles -l kubernetes.io/bootstrapping=rbac-defaults`.
//!
//! The rules are Kubernetes' own, including those on resources kubelab does not serve: they are
//! harmless there and keep the policy the one a learner meets in a real cluster.
//!
//! # Implementation caveats
//!
//! - The CSI sidecar roles are not Kubernetes' (its default policy has none; each driver's
//!   deployment brings them) and are outside the golden files.
//! - kubelab has no feature gates: the policy is the one that 1.33's default gates produce. The
//!   rules Kubernetes adds only when an alpha or off-by-default beta feature is on (dynamic
//!   resource allocation, device taints, volume attributes classes, ClusterTrustBundle
//!   projection, storage version migration, kubelet service account tokens for credential
//!   providers, ...) are left out, as a default 1.33 cluster leaves them out.
//! - The test fixtures in `testdata/` hold the data of Kubernetes' golden files
//!   (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata`) for 1.33 with default gates,
//!   in their layout. They were assembled from the neighbouring releases' files rather than
//!   copied from the v1.33.0 tag: `testdata/README.md` says how, and which rules to check first
//!   against that tag.

pub mod controller_policy;
pub mod csi_sidecar_policy;
pub mod helpers;
pub mod namespace_policy;
pub mod policy;

pub use controller_policy::{SA_ROLE_PREFIX, controller_role_bindings, controller_roles};
pub use csi_sidecar_policy::csi_sidecar_roles;
pub use namespace_policy::{namespace_role_bindings, namespace_roles};
pub use policy::{
    AGGREGATE_TO_ADMIN, AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW, AUTOUPDATE_ANNOTATION,
    BOOTSTRAPPING_LABEL, cluster_role_bindings, cluster_roles, node_rules,
};

/// Loading the golden files and comparing the policy with them, object by object.
#[cfg(test)]
pub(crate) mod golden {
    use std::fmt::Debug;

    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use serde::de::DeserializeOwned;

    /// A golden file is a `kind: List` of objects.
    #[derive(serde::Deserialize)]
    struct List<T> {
        items: Vec<T>,
    }

    pub fn load<T: DeserializeOwned>(yaml: &str) -> Vec<T> {
        match serde_norway::from_str::<List<T>>(yaml) {
            Ok(list) => list.items,
            Err(e) => panic!("golden file does not parse: {e}"),
        }
    }

    pub fn cluster_role_key(role: &ClusterRole) -> String {
        role.metadata.name.clone().unwrap_or_default()
    }

    pub fn cluster_role_binding_key(binding: &ClusterRoleBinding) -> String {
        binding.metadata.name.clone().unwrap_or_default()
    }

    /// The objects must be the golden ones, in any order, each equal in full: metadata (name,
    /// namespace, labels, annotations), rules in their order, aggregation rules, role
    /// references and subjects in their order. Kubernetes' golden files are sorted by name, as
    /// Kubernetes' test sorts before writing them.
    pub fn assert_matches<T, K>(mut got: Vec<T>, mut want: Vec<T>, key: impl Fn(&T) -> K)
    where
        T: Debug + PartialEq + serde::Serialize,
        K: Ord + Debug,
    {
        got.sort_by_key(|o| key(o));
        want.sort_by_key(|o| key(o));
        let names = |objects: &[T]| objects.iter().map(&key).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&want), "the policy's objects are not the golden file's");
        let differences: Vec<String> = got
            .iter()
            .zip(&want)
            .filter(|(got, want)| got != want)
            .map(|(got, want)| format!("{:?}:\n{}", key(got), line_diff(&yaml(want), &yaml(got))))
            .collect();
        assert!(differences.is_empty(), "differs from the golden file (- golden, + policy):\n{}", differences.join("\n"));
    }

    fn yaml(object: &impl serde::Serialize) -> String {
        serde_norway::to_string(object).unwrap_or_else(|e| format!("<does not serialize: {e}>"))
    }

    /// The lines between the common head and tail of two texts: enough to spot a changed rule.
    fn line_diff(want: &str, got: &str) -> String {
        let (want, got): (Vec<_>, Vec<_>) = (want.lines().collect(), got.lines().collect());
        let head = want.iter().zip(&got).take_while(|(a, b)| a == b).count();
        let tail = want[head..].iter().rev().zip(got[head..].iter().rev()).take_while(|(a, b)| a == b).count();
        let minus = want[head..want.len() - tail].iter().map(|l| format!("  -{l}"));
        let plus = got[head..got.len() - tail].iter().map(|l| format!("  +{l}"));
        minus.chain(plus).collect::<Vec<_>>().join("\n")
    }
}
