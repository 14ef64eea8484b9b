//! Mirrors pkg/registry/rbac/reconciliation (reconcile_role.go, reconcile_rolebindings.go) and the
//! `rbac/bootstrap-roles` post-start hook of pkg/registry/rbac/rest/storage_rbac.go: at every
//! start the default policy ([`crate::authorization::rbac::bootstrappolicy`]) is made to exist.
//!
//! For each default role and binding:
//! 1. Missing: it is created.
//! 2. Present with the annotation `rbac.authorization.kubernetes.io/autoupdate: "false"`: it is
//!    left as the administrator made it.
//! 3. Otherwise what is missing is added — labels, annotations, rules the role does not cover
//!    (not for a role whose rules come from aggregation), aggregation selectors, subjects — and
//!    nothing is removed. A binding whose role reference changed is deleted and created again
//!    (a roleRef cannot be updated).

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::clusterrole::strategy::CLUSTERROLES;
use super::clusterrolebinding::strategy::CLUSTERROLEBINDINGS;
use super::role::strategy::ROLES;
use super::rolebinding::strategy::ROLEBINDINGS;
use crate::authorization::rbac::bootstrappolicy;
use crate::authorization::rbac::policy_comparator::covers;
use crate::error::{Error, Result};
use crate::registry::generic::options::DeleteOptions;
use crate::registry::generic::rest::Registries;
use crate::registry::generic::store::{Registry, name_of};

/// The annotation that says whether reconciliation may change an object.
pub const AUTO_UPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";

/// What reconciliation does to one object (steps 1 to 3).
#[derive(Debug, PartialEq)]
pub enum Reconciled {
    Create(Value),
    Update(Value),
    /// A binding whose roleRef changed: delete it, then create this.
    Recreate(Value),
    Unchanged,
    /// autoupdate is "false".
    Protected,
}

fn protected(existing: &Value) -> bool {
    existing.pointer(&format!("/metadata/annotations/{}", AUTO_UPDATE_ANNOTATION.replace('/', "~1"))).and_then(Value::as_str) == Some("false")
}

/// Adds the expected labels and annotations the object lacks.
fn merge_metadata(result: &mut Value, expected: &Value) {
    for field in ["labels", "annotations"] {
        let Some(want) = expected.pointer(&format!("/metadata/{field}")).and_then(Value::as_object) else { continue };
        let have = &mut result["metadata"][field];
        if !have.is_object() {
            *have = json!({});
        }
        if let Some(have) = have.as_object_mut() {
            for (k, v) in want {
                have.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

fn list(v: &Value, field: &str) -> Vec<Value> {
    v.get(field).and_then(Value::as_array).cloned().unwrap_or_default()
}

/// A Role or ClusterRole (`computeReconciledRole`, without removing extra permissions).
pub fn reconcile_role(existing: Option<&Value>, expected: &Value) -> Reconciled {
    let Some(existing) = existing else { return Reconciled::Create(expected.clone()) };
    if protected(existing) {
        return Reconciled::Protected;
    }
    let mut result = existing.clone();
    merge_metadata(&mut result, expected);
    if let Some(want) = expected.get("aggregationRule").filter(|a| !a.is_null()) {
        // The rules come from the aggregation controller; only the selectors are reconciled.
        let mut selectors = result.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).cloned().unwrap_or_default();
        for selector in list(want, "clusterRoleSelectors") {
            if !selectors.contains(&selector) {
                selectors.push(selector);
            }
        }
        result["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
    } else {
        let mut rules = list(&result, "rules");
        for rule in list(expected, "rules") {
            if !covers(&rules, std::slice::from_ref(&rule)).0 {
                rules.push(rule);
            }
        }
        result["rules"] = Value::Array(rules);
    }
    if result == *existing { Reconciled::Unchanged } else { Reconciled::Update(result) }
}

/// A RoleBinding or ClusterRoleBinding (`computeReconciledRoleBinding`, without removing
/// extra subjects).
pub fn reconcile_binding(existing: Option<&Value>, expected: &Value) -> Reconciled {
    let Some(existing) = existing else { return Reconciled::Create(expected.clone()) };
    if protected(existing) {
        return Reconciled::Protected;
    }
    let mut result = existing.clone();
    merge_metadata(&mut result, expected);
    let mut subjects = list(&result, "subjects");
    for subject in list(expected, "subjects") {
        if !subjects.contains(&subject) {
            subjects.push(subject);
        }
    }
    if !subjects.is_empty() || result.get("subjects").is_some() {
        result["subjects"] = Value::Array(subjects);
    }
    if existing.get("roleRef") != expected.get("roleRef") {
        result["roleRef"] = expected["roleRef"].clone();
        if let Some(meta) = result.get_mut("metadata").and_then(Value::as_object_mut) {
            for server_set in ["resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"] {
                meta.remove(server_set);
            }
        }
        return Reconciled::Recreate(result);
    }
    if result == *existing { Reconciled::Unchanged } else { Reconciled::Update(result) }
}

/// Reconciles the default policy until it succeeds (the store may come up after the server):
/// the `rbac/bootstrap-roles` post-start hook. Spawned by the server after the system namespaces
/// exist.
pub async fn run(registries: &Registries) {
    let mut backoff = Duration::from_millis(200);
    loop {
        match ensure_default_policy(registries).await {
            Ok(changed) => {
                tracing::info!(target: "apiserver::rbac", changed, "the default RBAC policy is in place");
                return;
            }
            Err(e) => {
                tracing::warn!(target: "apiserver::rbac", error = %e, "reconciling the default RBAC policy failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Every default role and binding, reconciled; how many were written.
pub async fn ensure_default_policy(registries: &Registries) -> Result<usize> {
    let mut changed = 0;
    let (cluster_roles, cluster_role_bindings) = (registries.of(&CLUSTERROLES), registries.of(&CLUSTERROLEBINDINGS));
    for role in bootstrappolicy::cluster_roles().into_iter().chain(bootstrappolicy::controller_roles()).chain(bootstrappolicy::csi_sidecar_roles()) {
        changed += ensure(&cluster_roles, None, value(&role)?, reconcile_role).await?;
    }
    for binding in bootstrappolicy::cluster_role_bindings().into_iter().chain(bootstrappolicy::controller_role_bindings()) {
        changed += ensure(&cluster_role_bindings, None, value(&binding)?, reconcile_binding).await?;
    }
    let (roles, role_bindings) = (registries.of(&ROLES), registries.of(&ROLEBINDINGS));
    for (namespace, list) in bootstrappolicy::namespace_roles() {
        for role in list {
            changed += ensure(&roles, Some(&namespace), value(&role)?, reconcile_role).await?;
        }
    }
    for (namespace, list) in bootstrappolicy::namespace_role_bindings() {
        for binding in list {
            changed += ensure(&role_bindings, Some(&namespace), value(&binding)?, reconcile_binding).await?;
        }
    }
    Ok(changed)
}

fn value(obj: &impl Serialize) -> Result<Value> {
    serde_json::to_value(obj).map_err(|e| Error::Internal(format!("encoding a default RBAC object: {e}")))
}

/// Steps 1 to 3 for one object; 1 when it was written.
async fn ensure(registry: &Registry, namespace: Option<&str>, expected: Value, reconcile: fn(Option<&Value>, &Value) -> Reconciled) -> Result<usize> {
    let name = name_of(&expected).to_string();
    let existing = match registry.get(namespace, &name).await {
        Ok(v) => Some(v),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let kind = registry.info().kind;
    match reconcile(existing.as_ref(), &expected) {
        Reconciled::Unchanged => return Ok(0),
        Reconciled::Protected => {
            tracing::debug!(target: "apiserver::rbac", kind, name, "left alone: autoupdate is false");
            return Ok(0);
        }
        Reconciled::Create(obj) => match registry.create(namespace, obj).await {
            Ok(_) | Err(Error::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        },
        Reconciled::Update(obj) => {
            registry.update(namespace, &name, obj, None).await?;
        }
        Reconciled::Recreate(obj) => {
            registry.delete(namespace, &name, &DeleteOptions::default()).await?;
            registry.create(namespace, obj).await?;
        }
    }
    tracing::info!(target: "apiserver::rbac", kind, namespace, name, "reconciled a default RBAC object");
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(rules: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "r", "annotations": annotations}, "rules": rules})
    }

    #[test]
    fn roles_gain_what_they_miss_and_keep_what_they_have() {
        let want = json!({"metadata": {"name": "r", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(reconcile_role(None, &want), Reconciled::Create(want.clone()));
        let have = role(json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}, {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]), json!({AUTO_UPDATE_ANNOTATION: "true"}));
        let Reconciled::Update(got) = reconcile_role(Some(&have), &want) else { panic!("the label is missing") };
        assert_eq!(got["rules"], have["rules"], "covered rules are not added, extra ones not removed");
        assert_eq!(got["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
        assert_eq!(reconcile_role(Some(&got), &want), Reconciled::Unchanged);
        let narrowed = role(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]), json!({AUTO_UPDATE_ANNOTATION: "true"}));
        let Reconciled::Update(got) = reconcile_role(Some(&narrowed), &want) else { panic!("a rule is missing") };
        assert_eq!(got["rules"].as_array().map(Vec::len), Some(2));
        let protected = role(json!([]), json!({AUTO_UPDATE_ANNOTATION: "false"}));
        assert_eq!(reconcile_role(Some(&protected), &want), Reconciled::Protected);
    }

    #[test]
    fn aggregated_roles_reconcile_their_selectors_only() {
        let sel = |k: &str| json!({"matchLabels": {k: "true"}});
        let want = json!({"metadata": {"name": "view"}, "aggregationRule": {"clusterRoleSelectors": [sel("a")]}, "rules": []});
        let have = json!({"metadata": {"name": "view"}, "aggregationRule": {"clusterRoleSelectors": [sel("b")]}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        let Reconciled::Update(got) = reconcile_role(Some(&have), &want) else { panic!("a selector is missing") };
        assert_eq!(got["aggregationRule"]["clusterRoleSelectors"], json!([sel("b"), sel("a")]));
        assert_eq!(got["rules"], have["rules"], "the aggregated rules stay the controller's");
    }

    #[test]
    fn bindings_gain_subjects_and_are_recreated_for_a_new_role() {
        let subject = |n: &str| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": n});
        let want = json!({"metadata": {"name": "b"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": [subject("a")]});
        let have = json!({"metadata": {"name": "b", "resourceVersion": "5"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": [subject("x")]});
        let Reconciled::Update(got) = reconcile_binding(Some(&have), &want) else { panic!("a subject is missing") };
        assert_eq!(got["subjects"], json!([subject("x"), subject("a")]));
        assert_eq!(reconcile_binding(Some(&got), &want), Reconciled::Unchanged);
        let mut moved = have.clone();
        moved["roleRef"]["name"] = json!("edit");
        let Reconciled::Recreate(got) = reconcile_binding(Some(&moved), &want) else { panic!("the role changed") };
        assert_eq!(got["roleRef"]["name"], "view");
        assert_eq!(got["metadata"].get("resourceVersion"), None);
    }
}
