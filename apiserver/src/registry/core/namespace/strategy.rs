//! Mirrors pkg/registry/core/namespace/strategy.go (and the Terminating mark of
//! namespace/storage/storage.go's `Delete`): a new namespace is Active with the `kubernetes`
//! finalizer, spec.finalizers change only through `/finalize`, every namespace carries the
//! `kubernetes.io/metadata.name` label with its name, and every new namespace gets its `default`
//! service account.

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec};
use serde_json::{Value, json};

use super::printer::NAMESPACE_PRINTER;
use crate::error::Cause;
use crate::registry::core::serviceaccount::strategy::{DEFAULT_SERVICE_ACCOUNT_NAME, SERVICEACCOUNTS};
use crate::registry::generic::store::name_of;
use crate::registry::generic::strategy::{ResourceInfo, Strategy, Subresource, causes, meta_field};
use crate::registry::generic::typed::{Object, Typed};
use api::core::v1::defaults::set_defaults_namespace;
use api::core::v1::well_known::{FINALIZER_KUBERNETES, LABEL_METADATA_NAME};

pub static NAMESPACES: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    singular: "namespace",
    namespaced: false,
    short_names: &["ns"],
    storage_name: "namespaces",
    subresources: &[
        Subresource { name: "status", group: "", version: "v1", kind: "Namespace", verbs: &["get", "patch", "update"] },
        Subresource { name: "finalize", group: "", version: "v1", kind: "Namespace", verbs: &["update"] },
    ],
    categories: &[],
    codec: &Typed::<Namespace>::NEW,
    printer: &NAMESPACE_PRINTER,
};

pub struct NamespaceStrategy;

impl Strategy for NamespaceStrategy {
    fn info(&self) -> &'static ResourceInfo {
        &NAMESPACES
    }

    fn return_deleted_object(&self) -> bool {
        true
    }

    /// SetDefaults_Namespace: the `kubernetes.io/metadata.name` label, and phase Active.
    fn set_defaults(&self, obj: &mut Object) {
        if let Some(ns) = obj.typed_mut::<Namespace>() {
            set_defaults_namespace(ns);
        }
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        let obj = obj.json_mut();
        obj["spec"]["finalizers"] = json!([FINALIZER_KUBERNETES]);
        obj["status"] = json!({"phase": "Active"});
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        // spec.finalizers change only through /finalize, the status only through /status.
        new["spec"]["finalizers"] = old.pointer("/spec/finalizers").cloned().unwrap_or(json!([]));
        new["status"] = old.get("status").cloned().unwrap_or(json!({}));
        // Kubernetes defaults every namespace it decodes, updates included: the name label cannot
        // be taken off or changed. (kubelab defaults new objects only, so it is put back here.)
        let name = name_of(new).to_string();
        if !name.is_empty() {
            if !new["metadata"]["labels"].is_object() {
                new["metadata"]["labels"] = json!({});
            }
            new["metadata"]["labels"][LABEL_METADATA_NAME] = json!(name);
        }
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes(api::core::validation::validate_namespace(obj))
    }

    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        match field {
            "status.phase" => Some(obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("").to_string()),
            f => meta_field(obj, f),
        }
    }

    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "status.phase"]
    }

    fn mark_for_deletion(&self, obj: &mut Value) {
        obj["status"]["phase"] = json!("Terminating");
    }

    /// Every new namespace gets its `default` service account.
    fn after_create(&self, created: &Value) -> Vec<(&'static ResourceInfo, Value)> {
        let ns = name_of(created);
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_SERVICE_ACCOUNT_NAME, "namespace": ns}});
        vec![(&SERVICEACCOUNTS, sa)]
    }
}

/// SetDefaults_Namespace and SetDefaults_NamespaceStatus, plus Kubernetes' PrepareForCreate,
/// which adds the `kubernetes` finalizer that makes deletion wait for the namespace controller to
/// the finalizers the client sent. (The strategy above does not call it: its `prepare_for_create`
/// replaces the finalizers and the status outright.)
pub fn default_namespace(ns: &mut Namespace) {
    set_defaults_namespace(ns);
    let spec = ns.spec.get_or_insert_with(NamespaceSpec::default);
    let finalizers = spec.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER_KUBERNETES) {
        finalizers.push(FINALIZER_KUBERNETES.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_namespace_comes_with_its_default_service_account() {
        let deps = NamespaceStrategy.after_create(&json!({"metadata": {"name": "team-a"}}));
        assert_eq!(deps.len(), 1);
        assert_eq!(deps[0].0.plural, "serviceaccounts");
        assert_eq!(deps[0].1["metadata"], json!({"name": "default", "namespace": "team-a"}));
    }

    #[test]
    fn every_namespace_is_labelled_with_its_name() {
        let mut obj = Object::new(json!({"metadata": {"name": "team-a", "labels": {"x": "y"}}}));
        NamespaceStrategy.set_defaults(&mut obj);
        assert_eq!(obj.into_json()["metadata"]["labels"], json!({"kubernetes.io/metadata.name": "team-a", "x": "y"}));

        // An update cannot remove it or point it elsewhere.
        let old = json!({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}}});
        for labels in [json!(null), json!({"kubernetes.io/metadata.name": "other", "x": "y"})] {
            let mut new = json!({"metadata": {"name": "team-a", "labels": labels}});
            NamespaceStrategy.prepare_for_update(&mut new, &old);
            assert_eq!(new["metadata"]["labels"]["kubernetes.io/metadata.name"], "team-a", "{new}");
        }
    }

    #[test]
    fn namespace_finalizer_on_create() {
        let mut ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": "team-a"}})).expect("valid");
        default_namespace(&mut ns);
        assert_eq!(
            ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec!["kubernetes".to_string()])
        );
        let again = ns.clone();
        default_namespace(&mut ns);
        assert_eq!(ns, again, "idempotent: the finalizer is not added twice");

        let mut ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": "b"}, "spec": {"finalizers": ["example.com/keep"]}})).expect("valid");
        default_namespace(&mut ns);
        assert_eq!(
            ns.spec.as_ref().and_then(|s| s.finalizers.clone()),
            Some(vec![
                "example.com/keep".to_string(),
                "kubernetes".to_string()
            ])
        );
    }
}
