//! Mirrors k8s.io/apiserver/pkg/admission/interfaces.go: what an admission plugin is told of a
//! request ([`Attributes`]) and the two kinds of plugin, mutating then validating.

use futures::future::LocalBoxFuture;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::authentication::user::UserInfo;
use crate::error::{Error, Result};
use crate::registry::generic::strategy::{ResourceInfo, qualified};
use crate::registry::generic::typed::Object;

/// What the request does to the object (Kubernetes also has Connect: no plugin here handles it,
/// and those requests do not go through admission).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    /// As Kubernetes spells it in messages (`CREATE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What a plugin knows of the request (`admission.Attributes`).
pub struct Attributes<'a> {
    pub operation: Operation,
    /// Who asks (`GetUserInfo`): NodeRestriction narrows what a node may do.
    pub user: &'a UserInfo,
    pub resource: &'static ResourceInfo,
    /// The subresource (`status`, `eviction`, `token`), empty for the resource itself.
    pub subresource: &'a str,
    /// The namespace on the URL; none on a cluster-scoped resource, or on a namespaced create
    /// that names none (which goes to `default`).
    pub namespace: Option<&'a str>,
    /// The object's name; empty on a create whose name the server is to generate.
    pub name: &'a str,
    pub dry_run: bool,
    /// The object a create or update asks for, as decoded from the request (before its type's
    /// defaults; `GetObject`): a subresource's own kind (an Eviction, a TokenRequest) on a
    /// subresource create; none on a delete.
    pub object: Option<&'a Value>,
    /// The object an update replaces, or (when the handler has it) the one a delete removes
    /// (`GetOldObject`).
    pub old_object: Option<&'a Value>,
}

impl Attributes<'_> {
    /// Whether the request is for `group`'s `plural` (`("", "pods")`).
    pub fn is_for(&self, group: &str, plural: &str) -> bool {
        self.resource.group == group && self.resource.plural == plural
    }

    /// A plugin's refusal (`admission.NewForbidden`): 403, `<resource> "<name>" is forbidden:
    /// <why>`, the object named by the request's name, else the object's name or generateName,
    /// else `Unknown`.
    pub fn forbidden(&self, why: &str) -> Error {
        let meta = |f: &str| self.object.and_then(|o| o.pointer(&format!("/metadata/{f}"))).and_then(Value::as_str).filter(|s| !s.is_empty());
        let name = Some(self.name).filter(|n| !n.is_empty()).or_else(|| meta("name")).or_else(|| meta("generateName")).unwrap_or("Unknown");
        let resource = qualified(self.resource.plural, self.resource.group);
        Error::ForbiddenRequest {
            group: self.resource.group.to_string(),
            resource: self.resource.plural.to_string(),
            name: name.to_string(),
            message: format!("{resource} \"{name}\" is forbidden: {why}"),
        }
    }
}

/// A plugin of the mutating phase (`admission.MutationInterface`): it may refuse the request or
/// change the object. kubelab runs the phase in two steps (see the module docs of
/// [`crate::admission`]): every plugin's [`admit`](MutationInterface::admit) on the request,
/// then every plugin's [`admit_object`](MutationInterface::admit_object) on the defaulted object;
/// a plugin implements the step it needs.
pub trait MutationInterface: Send + Sync {
    /// The plugin's name, as `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;

    /// Whether the plugin has anything to say about this request.
    fn handles(&self, a: &Attributes<'_>) -> bool;

    /// Admits the request from what it asks for, before any work is done on its object (which a
    /// delete does not have). Asynchronous: a plugin may look things up (NamespaceLifecycle reads
    /// the namespace, NodeRestriction the pod a node deletes).
    fn admit<'a>(&'a self, _a: &'a Attributes<'a>) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Admits, and may change, the object a create is about to write, once its type's defaults
    /// are applied.
    fn admit_object(&self, _a: &Attributes<'_>, _obj: &mut Object) -> Result<()> {
        Ok(())
    }
}

/// A plugin of the validating phase (`admission.ValidationInterface`): it sees the object as it
/// is about to be written and may refuse it, never change it.
pub trait ValidationInterface: Send + Sync {
    fn name(&self) -> &'static str;

    fn handles(&self, a: &Attributes<'_>) -> bool;

    fn validate(&self, a: &Attributes<'_>, obj: &Value) -> Result<()>;
}

/// A mutating plugin that changes only pods being created, through their typed form, from the
/// pod alone (Priority): its name and its change.
pub struct PodCreate {
    pub name: &'static str,
    pub admit: fn(&mut Pod),
}

impl MutationInterface for PodCreate {
    fn name(&self) -> &'static str {
        self.name
    }

    fn handles(&self, a: &Attributes<'_>) -> bool {
        a.operation == Operation::Create && a.is_for("", "pods") && a.subresource.is_empty()
    }

    fn admit_object(&self, _a: &Attributes<'_>, obj: &mut Object) -> Result<()> {
        if let Some(pod) = obj.typed_mut::<Pod>() {
            (self.admit)(pod);
        }
        Ok(())
    }
}

/// What the pod plugins' tests share: a pod as the create handler hands it to admission.
#[cfg(test)]
pub mod testing {
    use api::core::v1::defaults::set_defaults_pod;
    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use serde_json::{Value, json};

    use super::PodCreate;
    use crate::authentication::user::UserInfo;

    /// A user with no name and no groups, for requests whose user no plugin looks at.
    pub static NOBODY: UserInfo = UserInfo { name: String::new(), uid: String::new(), groups: Vec::new(), extra: std::collections::BTreeMap::new() };

    pub fn minimal() -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}})
    }

    /// `json` decoded, defaulted (as the create handler does before admission), then admitted by
    /// `plugin`; its spec.
    pub fn admitted(plugin: &PodCreate, json: Value) -> PodSpec {
        let mut pod: Pod = serde_json::from_value(json).expect("test pod is valid");
        set_defaults_pod(&mut pod);
        (plugin.admit)(&mut pod);
        pod.spec.expect("defaulted pod has a spec")
    }
}
