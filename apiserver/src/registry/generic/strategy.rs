//! Mirrors the strategy of k8s.io/apiserver/pkg/registry/rest (create.go, update.go, delete.go:
//! `RESTCreateStrategy`, `RESTUpdateStrategy`, `RESTDeleteStrategy`): what each resource plugs
//! into the generic store, as `pkg/registry/<group>/<resource>/strategy.go` does — its defaulting,
//! validation, status split, field selectors, and what comes with a create — and the
//! [`ResourceInfo`] that names it.

use apimachinery::validation::FieldError;
use futures::future::BoxFuture;
use serde_json::Value;

use super::typed::{Codec, Object};
use crate::authentication::user::UserInfo;
use crate::authorization::authorizer::Authorizer;
use crate::authorization::rbac::rule::DefaultRuleResolver;
use crate::error::{Cause, Result};
use crate::printers::tablegenerator::Printer;
use crate::storage::store::Storage;

/// What a write's hook is told once the write is over: whether it succeeded (genericregistry's
/// `FinishFunc`). A Service's allocations are given back when its write failed, and what an
/// update freed is given back when it succeeded.
pub type Finish = Box<dyn FnOnce(bool) -> BoxFuture<'static, ()> + Send>;

/// What discovery, routing, storage, decoding and printing need to know about a resource: one
/// `static` in the resource's `strategy.rs`.
pub struct ResourceInfo {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// The key segment in the store (Kubernetes keeps nodes under `minions`).
    pub storage_name: &'static str,
    pub subresources: &'static [Subresource],
    pub categories: &'static [&'static str],
    /// Decoding and the OpenAPI schema, through the k8s-openapi type (`&Typed::<Pod>::NEW`).
    pub codec: &'static dyn Codec,
    /// `kubectl get`'s columns and cells (the resource's `printer.rs`).
    pub printer: &'static dyn Printer,
}

#[derive(Debug)]
pub struct Subresource {
    pub name: &'static str,
    /// Group, version and kind of what the subresource takes (eviction is policy/v1 Eviction).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

impl ResourceInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_string() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn verbs(&self) -> &'static [&'static str] {
        &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s.name == "status")
    }

    /// A 422 for the object `name` of this kind; the message names the group too, as a GroupKind
    /// prints (`Deployment.apps "web" is invalid: …`).
    pub fn invalid(&self, name: &str, causes: Vec<Cause>) -> crate::error::Error {
        crate::error::Error::Invalid { kind: self.kind.into(), kind_singular: qualified(self.kind, self.group), name: name.into(), causes }
    }
}

/// A resource or kind with its group, as Go prints a GroupResource or GroupKind
/// (`deployments.apps`, `Deployment.apps`; core names stay bare).
pub fn qualified(name: &str, group: &str) -> String {
    if group.is_empty() { name.to_string() } else { format!("{name}.{group}") }
}

/// Who writes an object, for [`Strategy::check_writer`]: the request's user, the authorizers to
/// ask what else they may do, and RBAC's rules (what the user holds, what a role holds).
pub struct Writer<'a> {
    pub user: &'a UserInfo,
    pub authorizer: &'a dyn Authorizer,
    pub rules: &'a DefaultRuleResolver,
}

/// rest.GarbageCollectionPolicy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GarbageCollectionPolicy {
    /// Dependents are deleted (in the background unless the request asks for Foreground).
    DeleteDependents,
    /// Dependents are orphaned unless the request asks otherwise (batch/v1 Jobs, for history).
    OrphanDependents,
    /// The kind takes no part in garbage collection (events): no GC finalizer is ever set.
    Unsupported,
}

/// The per-resource part of the generic store.
pub trait Strategy: Send + Sync + 'static {
    fn info(&self) -> &'static ResourceInfo;

    /// The defaulting functions of the resource's type (`SetDefaults_<Kind>`). Kubernetes' decoder
    /// applies them to every object it decodes; kubelab applies them to a new object only, first
    /// thing in BeforeCreate (see the crate's implementation caveats).
    fn set_defaults(&self, _obj: &mut Object) {}

    /// Normalization of a new object (`PrepareForCreate`): status reset, server-set fields.
    fn prepare_for_create(&self, _obj: &mut Object) {}

    /// `PrepareForCreate` with the request's user (Kubernetes reads it from the request's
    /// context: `genericapirequest.UserFrom`), which a kind may record (a
    /// CertificateSigningRequest's requestor); none for the server's own objects. By default the
    /// user does not matter: [`Strategy::prepare_for_create`].
    fn prepare_for_create_by(&self, _user: Option<&UserInfo>, obj: &mut Object) {
        self.prepare_for_create(obj);
    }

    /// Validation of a new object (`Validate`).
    fn validate(&self, _obj: &Value) -> Vec<Cause> {
        Vec::new()
    }

    /// Before an update of the main resource: by default the status is not writable here.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.info().has_status() {
            keep_status(new, old);
        }
    }

    /// Before an update of the status subresource: only the status is writable there.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        let status = new.get("status").cloned();
        let mut merged = old.clone();
        set_or_remove(&mut merged, "status", status);
        // Metadata written through /status is ignored except labels/annotations? Kubernetes
        // keeps the old metadata entirely; resourceVersion stays what the client sent.
        if let Some(rv) = new.pointer("/metadata/resourceVersion").cloned() {
            merged["metadata"]["resourceVersion"] = rv;
        }
        *new = merged;
    }

    /// Validation of an update (`ValidateUpdate`): the new object, and what may not change.
    fn validate_update(&self, new: &Value, _old: &Value) -> Vec<Cause> {
        self.validate(new)
    }

    /// Before an update of a subresource of the kind's own other than `status` and `finalize`
    /// (a CertificateSigningRequest's `approval`: its own update strategy in Kubernetes). By
    /// default nothing of the object is writable there.
    fn prepare_for_subresource_update(&self, _subresource: &str, new: &mut Value, old: &Value) {
        let rv = new.pointer("/metadata/resourceVersion").cloned();
        *new = old.clone();
        if let Some(rv) = rv {
            new["metadata"]["resourceVersion"] = rv;
        }
    }

    /// Validation of an update of a subresource (`status`, `finalize`, `approval`): the
    /// subresource's own strategy's `ValidateUpdate`. By default the object's.
    fn validate_subresource_update(&self, _subresource: &str, new: &Value, old: &Value) -> Vec<Cause> {
        self.validate_update(new, old)
    }

    /// Whether the request's user may write this object, beyond being allowed the verb — what
    /// Kubernetes' policy-based storages check before a create or an update (RBAC's escalation
    /// checks). Nothing to check by default.
    fn check_writer(&self, _writer: &Writer<'_>, _obj: &Value) -> Result<()> {
        Ok(())
    }

    /// Field selector support: the value of a field, for the fields this resource supports.
    fn field(&self, obj: &Value, field: &str) -> Option<String> {
        meta_field(obj, field)
    }

    fn supported_fields(&self) -> &'static [&'static str] {
        &["metadata.name", "metadata.namespace"]
    }

    /// Objects expire after this many seconds (events).
    fn ttl(&self) -> Option<i64> {
        None
    }

    /// Grace period for a delete, when the resource is deleted gracefully (pods).
    fn grace_period(&self, _obj: &Value, _requested: Option<i64>) -> Option<i64> {
        None
    }

    /// Whether a delete that removes the object answers with it (`ReturnDeletedObject`: pods and
    /// namespaces) rather than with a Status `Success` naming it. A delete that only marks the
    /// object (a grace period, finalizers) answers with the marked object either way.
    fn return_deleted_object(&self) -> bool {
        false
    }

    /// What deleting an object does to its dependents when the DeleteOptions do not say
    /// (`DefaultGarbageCollectionPolicy`): most kinds delete them (Background).
    fn garbage_collection_policy(&self) -> GarbageCollectionPolicy {
        GarbageCollectionPolicy::DeleteDependents
    }

    /// Warnings a delete with these options gets (a Job deleted without a propagation policy).
    fn warnings_on_delete(&self, _propagation_given: bool) -> Vec<String> {
        Vec::new()
    }

    /// What else changes when a delete marks the object and waits for its finalizers (a namespace
    /// goes `Terminating`, as namespace/storage/storage.go's `Delete` does).
    fn mark_for_deletion(&self, _obj: &mut Value) {}

    /// Objects the server creates along with a new one (`AfterCreate`: a namespace's `default`
    /// service account, which Kubernetes leaves to the controller manager's serviceaccounts
    /// controller). The caller writes them, each into the resource its `ResourceInfo` names.
    fn after_create(&self, _created: &Value) -> Vec<(&'static ResourceInfo, Value)> {
        Vec::new()
    }

    /// Before a create is written, once it is valid (genericregistry.Store's `BeginCreate`): a
    /// Service takes its cluster IP and node ports from the pools every API server shares, or is
    /// refused (422) when what it asks for is taken. With `dry_run`, nothing is taken. The
    /// answer, if any, is told how the write ended.
    fn begin_create<'a>(&'a self, _storage: &'a Storage, _obj: &'a mut Value, _dry_run: bool) -> BoxFuture<'a, Result<Option<Finish>>> {
        Box::pin(async { Ok(None) })
    }

    /// Before an update is written, once it is valid (`BeginUpdate`): what the new object asks
    /// for beyond the old one is taken, and what it no longer holds is given back once the
    /// write succeeded.
    fn begin_update<'a>(&'a self, _storage: &'a Storage, _new: &'a mut Value, _old: &'a Value, _dry_run: bool) -> BoxFuture<'a, Result<Option<Finish>>> {
        Box::pin(async { Ok(None) })
    }

    /// After an object is gone from the store (`AfterDelete`): what it held is given back.
    fn after_delete<'a>(&'a self, _storage: &'a Storage, _obj: &'a Value) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Whether `kubelab trace` follows this resource's objects (pods, Services, EndpointSlices):
    /// every watch event sent is then a step of the object (of its Service, for a slice:
    /// `podtrace::trace_uid`). Requests and store writes are steps whatever this says.
    fn traced(&self) -> bool {
        false
    }
}

pub fn meta_field(obj: &Value, field: &str) -> Option<String> {
    match field {
        "metadata.name" => Some(obj.pointer("/metadata/name")?.as_str()?.to_string()),
        "metadata.namespace" => Some(obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string()),
        _ => None,
    }
}

/// The whole strategy of a kind with a status subresource and nothing else of its own (most of
/// the workload kinds' strategy.go files): its type's defaults and validation from the `api`
/// crate, an empty status on create, the old status kept on update, and the defaults applied to
/// an update's object too ([`set_defaults_on_update`]).
#[derive(Clone, Copy)]
pub struct StandardStrategy {
    pub info: &'static ResourceInfo,
    /// `SetDefaults_<Kind>` on the typed object (decoded by the function itself).
    pub defaults: fn(&mut Object),
    pub validate: fn(&Value) -> Vec<FieldError>,
    pub validate_update: fn(&Value, &Value) -> Vec<FieldError>,
}

impl Strategy for StandardStrategy {
    fn info(&self) -> &'static ResourceInfo {
        self.info
    }

    fn set_defaults(&self, obj: &mut Object) {
        (self.defaults)(obj);
    }

    fn prepare_for_create(&self, obj: &mut Object) {
        reset_status(obj);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        set_defaults_on_update(self, new);
        keep_status(new, old);
    }

    fn validate(&self, obj: &Value) -> Vec<Cause> {
        causes((self.validate)(obj))
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<Cause> {
        causes((self.validate_update)(new, old))
    }
}

/// The status an update of the main resource cannot change: the old one stays.
pub fn keep_status(new: &mut Value, old: &Value) {
    set_or_remove(new, "status", old.get("status").cloned());
}

/// PrepareForCreate's first line in most strategies: the client's status is dropped, the object
/// starts with an empty one (`status: {}`) that its controller fills.
pub fn reset_status(obj: &mut Object) {
    obj.json_mut()["status"] = Value::Object(Default::default());
}

/// The kind's defaults on an update's new object too, as Kubernetes' decoder defaults every object
/// it reads: a workload replaced whole (`kubectl replace`) gets what its create got, so only what
/// the client changed differs from the stored object (and bumps its generation).
pub fn set_defaults_on_update(strategy: &(impl Strategy + ?Sized), new: &mut Value) {
    let mut object = Object::new(std::mem::take(new));
    strategy.set_defaults(&mut object);
    *new = object.into_json();
}

fn set_or_remove(obj: &mut Value, key: &str, v: Option<Value>) {
    if let Some(map) = obj.as_object_mut() {
        match v {
            Some(v) => {
                map.insert(key.into(), v);
            }
            None => {
                map.remove(key);
            }
        }
    }
}

/// The causes of a 422 Invalid from the field errors validation reports (`field.ErrorList`, from
/// the `api` crate).
pub fn causes(errs: Vec<FieldError>) -> Vec<Cause> {
    errs.into_iter().map(|e| Cause { reason: e.reason_str().to_string(), field: e.field, message: e.message }).collect()
}
