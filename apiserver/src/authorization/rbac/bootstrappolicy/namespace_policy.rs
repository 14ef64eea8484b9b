//! Mirrors plugin/pkg/auth/authorizer/rbac/bootstrappolicy/namespace_policy.go: the default Roles
//! and RoleBindings of the system namespaces, kube-system and kube-public.
//!
//! Some powers only make sense in one namespace: reading the ConfigMap in which the API server
//! publishes its client-CA bundle, holding a component's leader lock, signing the cluster-info
//! ConfigMap that kubeadm's joining nodes read anonymously. A Role keeps such a power where it
//! belongs, instead of a ClusterRole that would grant it everywhere.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::controller_policy::SA_ROLE_PREFIX;
use super::policy::events_rule;
use super::helpers::{RoleBindingBuilder, new_rule};
use super::policy::{LEGACY_GROUP, add_default_metadata};

const KUBE_SYSTEM: &str = "kube-system";
const KUBE_PUBLIC: &str = "kube-public";

const KUBE_CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const KUBE_SCHEDULER: &str = "system:kube-scheduler";

fn role(name: &str, rules: Vec<PolicyRule>) -> Role {
    Role { metadata: ObjectMeta { name: Some(name.to_string()), ..ObjectMeta::default() }, rules: Some(rules) }
}

/// Collects roles or bindings per namespace, the way Kubernetes' `addNamespaceRole` does:
/// only the kube-* namespaces, no name twice in a namespace, and the default label and
/// annotation on each.
struct PerNamespace<T> {
    objects: BTreeMap<String, Vec<T>>,
}

impl<T> PerNamespace<T> {
    fn new() -> Self {
        Self { objects: BTreeMap::new() }
    }

    fn add(&mut self, namespace: &str, mut object: T, meta: impl Fn(&mut T) -> &mut ObjectMeta) {
        assert!(namespace.starts_with("kube-"), "bootstrap namespace {namespace:?} must start with kube-");
        let m = meta(&mut object);
        m.namespace = Some(namespace.to_string());
        add_default_metadata(m);
        let name = m.name.clone();
        let existing = self.objects.entry(namespace.to_string()).or_default();
        assert!(
            existing.iter_mut().all(|o| meta(o).name != name),
            "{name:?} registered twice in namespace {namespace}"
        );
        existing.push(object);
    }
}

/// The default Roles, by namespace.
pub fn namespace_roles() -> BTreeMap<String, Vec<Role>> {
    let mut roles = PerNamespace::new();
    let mut add = |namespace: &str, role: Role| roles.add(namespace, role, |r: &mut Role| &mut r.metadata);

    // Reading the configuration a server needs to authenticate the front proxy and client
    // certificates: the API server publishes it in this ConfigMap.
    add(
        KUBE_SYSTEM,
        role(
            "extension-apiserver-authentication-reader",
            vec![new_rule(&["get", "list", "watch"])
                .groups(&[LEGACY_GROUP])
                .resources(&["configmaps"])
                .names(&["extension-apiserver-authentication"])
                .rule()],
        ),
    );
    // The leader locks of the two components, as they were held in ConfigMaps: watching any,
    // changing only their own by name. (Since locks moved to Leases, the ClusterRoles of the
    // components carry the lease rules.)
    for component in ["kube-controller-manager", "kube-scheduler"] {
        add(
            KUBE_SYSTEM,
            role(
                &format!("system::leader-locking-{component}"),
                vec![
                    new_rule(&["watch"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).rule(),
                    new_rule(&["get", "update"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).names(&[component]).rule(),
                ],
            ),
        );
    }
    // The bootstrap signer reads bootstrap token secrets ...
    add(
        KUBE_SYSTEM,
        role(
            &format!("{SA_ROLE_PREFIX}bootstrap-signer"),
            vec![new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["secrets"]).rule()],
        ),
    );
    // ... the cloud provider keeps its configuration in ConfigMaps ...
    add(
        KUBE_SYSTEM,
        role(
            &format!("{SA_ROLE_PREFIX}cloud-provider"),
            vec![new_rule(&["create", "get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).rule()],
        ),
    );
    // ... and the token cleaner deletes expired bootstrap tokens.
    add(
        KUBE_SYSTEM,
        role(
            &format!("{SA_ROLE_PREFIX}token-cleaner"),
            vec![
                new_rule(&["get", "list", "watch", "delete"]).groups(&[LEGACY_GROUP]).resources(&["secrets"]).rule(),
                events_rule(),
            ],
        ),
    );
    // The bootstrap signer signs the public cluster-info ConfigMap with every bootstrap token,
    // so that a joining node can trust what it reads there.
    add(
        KUBE_PUBLIC,
        role(
            &format!("{SA_ROLE_PREFIX}bootstrap-signer"),
            vec![
                new_rule(&["get", "list", "watch"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).rule(),
                new_rule(&["update"]).groups(&[LEGACY_GROUP]).resources(&["configmaps"]).names(&["cluster-info"]).rule(),
                events_rule(),
            ],
        ),
    );
    roles.objects
}

/// The default RoleBindings, by namespace.
pub fn namespace_role_bindings() -> BTreeMap<String, Vec<RoleBinding>> {
    let mut bindings = PerNamespace::new();
    let mut add =
        |namespace: &str, binding: RoleBinding| bindings.add(namespace, binding, |b: &mut RoleBinding| &mut b.metadata);
    let controller = |name: &str, namespace: &str| {
        RoleBindingBuilder::new(&format!("{SA_ROLE_PREFIX}{name}"), namespace)
            .service_accounts(KUBE_SYSTEM, &[name])
            .binding()
    };

    add(
        KUBE_SYSTEM,
        RoleBindingBuilder::new("extension-apiserver-authentication-reader", KUBE_SYSTEM)
            .named("system::extension-apiserver-authentication-reader")
            .users(&[KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER])
            .binding(),
    );
    add(
        KUBE_SYSTEM,
        RoleBindingBuilder::new("system::leader-locking-kube-controller-manager", KUBE_SYSTEM)
            .users(&[KUBE_CONTROLLER_MANAGER])
            .service_accounts(KUBE_SYSTEM, &["kube-controller-manager"])
            .binding(),
    );
    add(
        KUBE_SYSTEM,
        RoleBindingBuilder::new("system::leader-locking-kube-scheduler", KUBE_SYSTEM)
            .users(&[KUBE_SCHEDULER])
            .service_accounts(KUBE_SYSTEM, &["kube-scheduler"])
            .binding(),
    );
    add(KUBE_SYSTEM, controller("bootstrap-signer", KUBE_SYSTEM));
    add(KUBE_SYSTEM, controller("cloud-provider", KUBE_SYSTEM));
    add(KUBE_SYSTEM, controller("token-cleaner", KUBE_SYSTEM));
    add(KUBE_PUBLIC, controller("bootstrap-signer", KUBE_PUBLIC));
    bindings.objects
}

#[cfg(test)]
mod tests {
    use super::super::golden;
    use super::*;

    #[test]
    fn namespace_roles_match_the_golden_file() {
        golden::assert_matches(
            namespace_roles().into_values().flatten().collect(),
            golden::load(include_str!("testdata/namespace-roles.yaml")),
            |r: &Role| (r.metadata.namespace.clone().unwrap_or_default(), r.metadata.name.clone().unwrap_or_default()),
        );
    }

    #[test]
    fn namespace_role_bindings_match_the_golden_file() {
        golden::assert_matches(
            namespace_role_bindings().into_values().flatten().collect(),
            golden::load(include_str!("testdata/namespace-role-bindings.yaml")),
            |b: &RoleBinding| (b.metadata.namespace.clone().unwrap_or_default(), b.metadata.name.clone().unwrap_or_default()),
        );
    }

    #[test]
    fn objects_are_filed_under_their_own_namespace() {
        for (namespace, roles) in namespace_roles() {
            assert!(roles.iter().all(|r| r.metadata.namespace.as_deref() == Some(namespace.as_str())));
        }
        let roles = namespace_roles();
        for (namespace, bindings) in namespace_role_bindings() {
            for binding in bindings {
                assert_eq!(binding.metadata.namespace.as_deref(), Some(namespace.as_str()));
                let granted = roles.get(&namespace).into_iter().flatten().any(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()));
                assert!(granted, "{namespace}/{:?} grants a Role its namespace does not have", binding.metadata.name);
            }
        }
    }

    #[test]
    #[should_panic(expected = "must start with kube-")]
    fn only_system_namespaces_get_defaults() {
        PerNamespace::new().add("default", role("r", vec![]), |r: &mut Role| &mut r.metadata);
    }
}
