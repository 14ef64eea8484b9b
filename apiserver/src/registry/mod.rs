//! Mirrors k8s.io/apiserver/pkg/registry/generic/registry/store.go: the generic store every
//! resource shares, and the `Strategy` each resource plugs into it (its defaulting, validation
//! and status split, as in pkg/registry/<group>/<resource>/strategy.go).
//!
//! The flow of a create, as the real API server runs it:
//! 1. decode the body into the typed object (k8s-openapi) and back: types checked, unknown fields
//!    found (a warning, or 400 under fieldValidation=Strict), canonical JSON;
//! 2. `BeforeCreate`: name from generateName, uid, creationTimestamp, generation, then the
//!    strategy's `prepare_for_create` (defaults, status reset) and `validate` (422 Invalid);
//! 3. a store Txn that fails if the key exists (409 AlreadyExists).

pub mod core;
pub mod validation;
pub mod namespaces;
pub mod nodes;
pub mod pods;

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{Cause, Error, Result};
use crate::storage::store::{Storage, Stored, WriteOutcome};
use crate::storage::watch_cache::WatchCache;

/// What discovery, routing and storage need to know about a resource.
#[derive(Debug)]
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
}

/// The per-resource part of the generic store.
pub trait Strategy: Send + Sync + 'static {
    fn info(&self) -> &'static ResourceInfo;

    /// Decodes into the typed object and back; returns the canonical JSON and the unknown fields.
    fn decode(&self, v: Value) -> Result<(Value, Vec<String>)>;

    /// Defaults and normalization of a new object (`PrepareForCreate` + defaulting).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// Validation of a new object (`Validate`).
    fn validate(&self, _obj: &Value) -> Vec<Cause> {
        Vec::new()
    }

    /// Before an update of the main resource: by default the status is not writable here.
    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.info().has_status() {
            set_or_remove(new, "status", old.get("status").cloned());
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
}

pub fn meta_field(obj: &Value, field: &str) -> Option<String> {
    match field {
        "metadata.name" => Some(obj.pointer("/metadata/name")?.as_str()?.to_string()),
        "metadata.namespace" => Some(obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string()),
        _ => None,
    }
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

/// Decodes `v` into `T` and back. Fields the type does not know are returned as paths.
pub fn typed_roundtrip<T: DeserializeOwned + Serialize>(kind: &str, v: Value) -> Result<(Value, Vec<String>)> {
    // From a borrow: `v` is still needed to find the unknown fields.
    let typed = T::deserialize(&v).map_err(|e| Error::BadRequest(format!("error decoding {kind}: {e}")))?;
    let canonical = serde_json::to_value(&typed).map_err(|e| Error::Internal(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_fields(&v, &canonical, "", &mut unknown);
    Ok((canonical, unknown))
}

fn unknown_fields(input: &Value, known: &Value, path: &str, out: &mut Vec<String>) {
    match (input, known) {
        (Value::Object(i), Value::Object(k)) => {
            // A field's path is only spelled out when it is needed: most fields are known scalars.
            let p = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
            for (key, iv) in i {
                match k.get(key) {
                    Some(kv) if has_fields(iv) => unknown_fields(iv, kv, &p(key), out),
                    Some(_) => {}
                    // Nulls and empty values are dropped by the typed form without being unknown.
                    None if iv.is_null() || is_empty(iv) => {}
                    None => out.push(p(key)),
                }
            }
        }
        (Value::Array(i), Value::Array(k)) => {
            for (n, (iv, kv)) in i.iter().zip(k).enumerate().filter(|(_, (iv, _))| has_fields(iv)) {
                unknown_fields(iv, kv, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// Whether `v` can hold fields of its own (an object, or an array that may hold objects).
fn has_fields(v: &Value) -> bool {
    matches!(v, Value::Object(_) | Value::Array(_))
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Null => true,
    }
}

/// A strategy for a k8s-openapi type with no behaviour of its own beyond decoding.
pub struct Typed<T> {
    pub info: &'static ResourceInfo,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T> Typed<T> {
    pub const fn new(info: &'static ResourceInfo) -> Self {
        Self { info, _t: std::marker::PhantomData }
    }
}

/// Options of a list or watch (metav1.ListOptions).
#[derive(Debug, Default, Clone)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: i64,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub watch: bool,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout_seconds: Option<u64>,
}

/// Options of a delete (metav1.DeleteOptions).
#[derive(Debug, Default, Clone)]
pub struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub propagation_policy: Option<String>,
}

impl DeleteOptions {
    pub fn from_json(v: &Value) -> Self {
        Self {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            precondition_uid: v.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from),
            precondition_resource_version: v.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from),
            propagation_policy: v.get("propagationPolicy").and_then(Value::as_str).map(String::from),
        }
    }
}

pub struct ListResult {
    /// Shared with the watch cache when served from it: never deep-copied on the way out.
    pub items: Vec<Arc<Value>>,
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining: Option<i64>,
}

/// The generic store of one resource.
pub struct Registry {
    pub strategy: Arc<dyn Strategy>,
    pub storage: Storage,
    pub cache: Arc<WatchCache>,
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn generated_name(prefix: &str) -> String {
    // Kubernetes' alphabet for generated names: no vowels, no confusable characters.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes.iter().take(5).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
    format!("{prefix}{suffix}")
}

pub fn resource_version_of(v: &Value) -> Option<i64> {
    v.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok())
}

pub fn name_of(v: &Value) -> &str {
    v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("")
}

impl Registry {
    pub fn info(&self) -> &'static ResourceInfo {
        self.strategy.info()
    }

    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        let ns = if self.info().namespaced { namespace } else { None };
        self.storage.key(self.info().storage_name, ns, name)
    }

    /// The prefix of every key of this resource (in one namespace, or all).
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.info().namespaced && !ns.is_empty() => format!("{}/", self.storage.key(self.info().storage_name, Some(ns), "").trim_end_matches('/')),
            _ => format!("{}/", self.storage.key(self.info().storage_name, None, "").trim_end_matches('/')),
        }
    }

    fn not_found(&self, name: &str) -> Error {
        Error::not_found(self.info().plural, name)
    }

    fn invalid(&self, name: &str, causes: Vec<Cause>) -> Error {
        Error::Invalid { kind: self.info().kind.into(), kind_singular: self.info().kind.into(), name: name.into(), causes }
    }

    pub async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.get_stored(namespace, name).await.map(|s| s.value)
    }

    async fn get_stored(&self, namespace: Option<&str>, name: &str) -> Result<Stored> {
        self.storage.get(&self.key(namespace, name)).await?.ok_or_else(|| self.not_found(name))
    }

    /// `BeforeCreate` and the store write.
    pub async fn create(&self, namespace: Option<&str>, obj: Value) -> Result<Value> {
        self.create_with(namespace, obj, false).await
    }

    /// A create; with `dry_run`, everything but the write (defaults, validation, name clash).
    pub async fn create_with(&self, namespace: Option<&str>, mut obj: Value, dry_run: bool) -> Result<Value> {
        let info = self.info();
        {
            let meta = obj
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
                .ok_or_else(|| Error::BadRequest("metadata is required".into()))?;
            let has_name = meta.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
            if !has_name && let Some(prefix) = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty()) {
                let name = generated_name(prefix);
                meta.insert("name".into(), json!(name));
            }
            if info.namespaced {
                meta.insert("namespace".into(), json!(namespace.unwrap_or("default")));
            } else {
                meta.remove("namespace");
            }
            meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
            meta.insert("generation".into(), json!(1));
            meta.remove("resourceVersion");
            meta.remove("deletionTimestamp");
            meta.remove("deletionGracePeriodSeconds");
            meta.remove("selfLink");
        }
        let name = name_of(&obj).to_string();
        tracing::debug_span!(target: "apiserver", "defaulting and validation", pod_uid = tracing::field::Empty).in_scope(|| {
            self.strategy.prepare_for_create(&mut obj);
            let causes = self.strategy.validate(&obj);
            if causes.is_empty() { Ok(()) } else { Err(self.invalid(&name, causes)) }
        })?;
        let key = self.key(namespace, &name);
        if dry_run {
            return match self.storage.get(&key).await? {
                Some(_) => Err(Error::AlreadyExists { kind: info.plural.into(), name }),
                None => Ok(obj),
            };
        }
        match self.storage.create(&key, &obj, self.strategy.ttl()).await? {
            WriteOutcome::Written(rev) => Ok(crate::storage::store::with_resource_version(obj, rev)),
            WriteOutcome::Mismatch(_) => Err(Error::AlreadyExists { kind: info.plural.into(), name }),
        }
    }

    /// An update of the main resource or of a subresource (`status`, `finalize`). With
    /// `obj.metadata.resourceVersion` set it must match (409 otherwise); without, it applies to
    /// whatever is current.
    pub async fn update(&self, namespace: Option<&str>, name: &str, obj: Value, subresource: Option<&str>) -> Result<Value> {
        self.update_with(namespace, name, obj, subresource, false).await
    }

    /// An update; with `dry_run`, everything but the write.
    pub async fn update_with(&self, namespace: Option<&str>, name: &str, obj: Value, subresource: Option<&str>, dry_run: bool) -> Result<Value> {
        let requested_rv = resource_version_of(&obj);
        let current = self.get_stored(namespace, name).await?;
        if let Some(rv) = requested_rv
            && rv != current.mod_revision
        {
            return Err(self.conflict(name));
        }
        let new = self.prepare_update(&current.value, obj, subresource)?;
        if dry_run {
            return Ok(new);
        }
        self.write_update(namespace, name, &current, new).await
    }

    fn conflict(&self, name: &str) -> Error {
        Error::Conflict {
            kind: format!("{}{}", self.info().plural, if self.info().group.is_empty() { String::new() } else { format!(".{}", self.info().group) }),
            name: name.into(),
            message: "the object has been modified; please apply your changes to the latest version and try again".into(),
        }
    }

    fn prepare_update(&self, old: &Value, mut new: Value, subresource: Option<&str>) -> Result<Value> {
        let name = name_of(old).to_string();
        // What the client may not change in metadata.
        for field in ["uid", "creationTimestamp", "namespace", "name", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
            match old.pointer(&format!("/metadata/{field}")) {
                Some(v) => {
                    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.insert(field.into(), v.clone());
                    }
                }
                None => {
                    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove(field);
                    }
                }
            }
        }
        match subresource {
            Some("status") => self.strategy.prepare_for_status_update(&mut new, old),
            Some("finalize") => {
                let finalizers = new.pointer("/spec/finalizers").cloned();
                let mut merged = old.clone();
                merged["spec"]["finalizers"] = finalizers.unwrap_or(json!([]));
                new = merged;
            }
            _ => {
                self.strategy.prepare_for_update(&mut new, old);
                if new.get("spec") != old.get("spec") {
                    let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                    new["metadata"]["generation"] = json!(g + 1);
                }
            }
        }
        let causes = self.strategy.validate_update(&new, old);
        if !causes.is_empty() {
            return Err(self.invalid(&name, causes));
        }
        Ok(new)
    }

    async fn write_update(&self, namespace: Option<&str>, name: &str, current: &Stored, new: Value) -> Result<Value> {
        let mut cmp_new = new.clone();
        let mut cmp_old = current.value.clone();
        for v in [&mut cmp_new, &mut cmp_old] {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
                m.remove("managedFields");
            }
        }
        if cmp_new == cmp_old {
            return Ok(current.value.clone()); // a no-op update writes nothing
        }
        // An object being deleted whose last finalizer is gone is deleted now.
        if new.pointer("/metadata/deletionTimestamp").is_some()
            && new.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty())
            && new.pointer("/spec/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty())
            && new.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0) == 0
        {
            return match self.storage.delete(&self.key(namespace, name), current.mod_revision).await? {
                WriteOutcome::Written(rev) => Ok(crate::storage::store::with_resource_version(new, rev)),
                WriteOutcome::Mismatch(_) => Err(self.conflict(name)),
            };
        }
        match self.storage.update(&self.key(namespace, name), &new, current.mod_revision).await? {
            WriteOutcome::Written(rev) => Ok(crate::storage::store::with_resource_version(new, rev)),
            WriteOutcome::Mismatch(None) => Err(self.not_found(name)),
            WriteOutcome::Mismatch(Some(_)) => Err(self.conflict(name)),
        }
    }

    /// Read-modify-write with retries on conflicts (patches without a resourceVersion, and the
    /// server's own updates).
    pub async fn guaranteed_update<F>(&self, namespace: Option<&str>, name: &str, subresource: Option<&str>, f: F) -> Result<Value>
    where
        F: FnMut(&Value) -> Result<Value>,
    {
        self.guaranteed_update_with(namespace, name, subresource, false, f).await
    }

    /// `guaranteed_update`; with `dry_run`, everything but the write.
    pub async fn guaranteed_update_with<F>(&self, namespace: Option<&str>, name: &str, subresource: Option<&str>, dry_run: bool, mut f: F) -> Result<Value>
    where
        F: FnMut(&Value) -> Result<Value>,
    {
        for _ in 0..10 {
            let current = self.get_stored(namespace, name).await?;
            let new = f(&current.value)?;
            let pinned = resource_version_of(&new).filter(|rv| *rv != current.mod_revision);
            if pinned.is_some() {
                return Err(self.conflict(name));
            }
            let new = self.prepare_update(&current.value, new, subresource)?;
            if dry_run {
                return Ok(new);
            }
            match self.write_update(namespace, name, &current, new).await {
                Err(Error::Conflict { .. }) => continue,
                other => return other,
            }
        }
        Err(self.conflict(name))
    }

    /// Deletes an object; returns it and whether it is gone (false: it is being deleted
    /// gracefully or waits for finalizers).
    pub async fn delete(&self, namespace: Option<&str>, name: &str, opts: &DeleteOptions) -> Result<(Value, bool)> {
        for _ in 0..10 {
            let current = self.get_stored(namespace, name).await?;
            let obj = &current.value;
            if let Some(uid) = &opts.precondition_uid
                && obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid.as_str())
            {
                return Err(Error::Conflict {
                    kind: self.info().plural.into(),
                    name: name.into(),
                    message: format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("")),
                });
            }
            if let Some(rv) = &opts.precondition_resource_version
                && rv != &current.mod_revision.to_string()
            {
                return Err(self.conflict(name));
            }
            let grace = self.strategy.grace_period(obj, opts.grace_period_seconds);
            let finalizers = obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty())
                || obj.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
            let mut marked = obj.clone();
            let mut changed = false;
            if let Some(g) = grace.filter(|g| *g > 0) {
                // Graceful: mark, unless already marked with a shorter grace period.
                let existing = obj.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
                if existing.is_none_or(|e| g < e) {
                    let since = obj.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).zip(existing);
                    let at = deletion_timestamp(since, g, chrono::Utc::now());
                    marked["metadata"]["deletionTimestamp"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
                    marked["metadata"]["deletionGracePeriodSeconds"] = json!(g);
                    changed = true;
                }
            } else if finalizers {
                if obj.pointer("/metadata/deletionTimestamp").is_none() {
                    marked["metadata"]["deletionTimestamp"] = json!(now_rfc3339());
                    marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    if self.info().kind == "Namespace" {
                        marked["status"]["phase"] = json!("Terminating");
                    }
                    changed = true;
                }
            } else {
                return match self.storage.delete(&self.key(namespace, name), current.mod_revision).await? {
                    WriteOutcome::Written(_) => Ok((current.value, true)),
                    WriteOutcome::Mismatch(None) => Err(self.not_found(name)),
                    WriteOutcome::Mismatch(Some(_)) => continue,
                };
            }
            if !changed {
                return Ok((current.value, false));
            }
            match self.storage.update(&self.key(namespace, name), &marked, current.mod_revision).await? {
                WriteOutcome::Written(rev) => return Ok((crate::storage::store::with_resource_version(marked, rev), false)),
                WriteOutcome::Mismatch(None) => return Err(self.not_found(name)),
                WriteOutcome::Mismatch(Some(_)) => continue,
            }
        }
        Err(self.conflict(name))
    }
}

/// The deletionTimestamp of a graceful delete with grace period `g`: `now + g` for the first one.
/// A later, shorter one keeps the moment the deletion began (old timestamp − old grace) and
/// adds the new grace, as Kubernetes' `BeforeDelete` does — so repeating a DELETE cannot push the
/// deadline back, and the shorter grace counts from the first request.
fn deletion_timestamp(in_progress: Option<(&str, i64)>, g: i64, now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    let began = in_progress
        .and_then(|(ts, old)| chrono::DateTime::parse_from_rfc3339(ts).ok().map(|t| t.with_timezone(&chrono::Utc) - chrono::Duration::seconds(old)));
    began.unwrap_or(now) + chrono::Duration::seconds(g)
}

/// A continue token: the list's revision and the key to resume at (Kubernetes' format).
pub fn encode_continue(rev: i64, start: &str) -> String {
    let raw = serde_json::to_vec(&json!({"v": "meta.k8s.io/v1", "rv": rev, "start": start})).unwrap_or_default();
    serde_json::to_value(k8s_openapi::ByteString(raw)).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

pub fn decode_continue(token: &str) -> Result<(i64, String)> {
    let bad = || Error::BadRequest("continue key is not valid: illegal base64 data".into());
    let bytes: k8s_openapi::ByteString = serde_json::from_value(json!(token)).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes.0).map_err(|_| bad())?;
    let rev = v.get("rv").and_then(Value::as_i64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?.to_string();
    Ok((rev, start))
}

impl Registry {
    /// The predicate of a list or watch: namespace, label selector, field selector.
    pub fn filter(&self, namespace: Option<&str>, opts: &ListOptions) -> Result<crate::storage::watch_cache::Filter> {
        use apimachinery::fields::FieldSelector;
        use apimachinery::labels::Selector;
        let labels = match opts.label_selector.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(s) => Selector::parse(s).map_err(|e| Error::BadRequest(e.to_string()))?,
            None => Selector::everything(),
        };
        let fields = match opts.field_selector.as_deref().filter(|s| !s.trim().is_empty()) {
            Some(s) => {
                let f = FieldSelector::parse(s).map_err(|e| Error::BadRequest(e.to_string()))?;
                f.check_supported(self.strategy.supported_fields()).map_err(|e| Error::BadRequest(e.to_string()))?;
                Some(f)
            }
            None => None,
        };
        let ns = namespace.filter(|n| self.info().namespaced && !n.is_empty()).map(String::from);
        let strategy = self.strategy.clone();
        Ok(Arc::new(move |obj: &Value| {
            if let Some(ns) = &ns
                && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns.as_str())
            {
                return false;
            }
            if !labels.is_empty() && !labels.matches_object(obj) {
                return false;
            }
            fields.as_ref().is_none_or(|f| f.matches(|field| strategy.field(obj, field)))
        }))
    }

    /// A list with Kubernetes' resourceVersion semantics: unset = a consistent read from the
    /// store (paged by `limit`/`continue`); "0" = whatever the watch cache has; N = not older
    /// than N (from the cache), or exactly N with resourceVersionMatch=Exact (from the store).
    pub async fn list(&self, namespace: Option<&str>, opts: &ListOptions) -> Result<ListResult> {
        let filter = self.filter(namespace, opts)?;
        let prefix = self.prefix(namespace);
        if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            let (rev, start) = decode_continue(token)?;
            return self.list_from_store(&prefix, rev, Some(start), opts.limit, &*filter).await;
        }
        let rv = opts.resource_version.as_deref().unwrap_or("");
        let exact = opts.resource_version_match.as_deref() == Some("Exact");
        match rv {
            // A consistent list without paging is served from the watch cache once it has caught
            // up with the store's current revision (Kubernetes' ConsistentListFromCache): the same
            // answer as a quorum read of the store, without decoding every object again.
            "" if opts.limit <= 0 => {
                let current = self.storage.current_revision().await?;
                match self.cache.wait_until(current).await {
                    Ok(()) => {
                        let (items, rev) = self.cache.list(&*filter);
                        Ok(ListResult { items, resource_version: rev.to_string(), continue_token: None, remaining: None })
                    }
                    Err(_) => self.list_from_store(&prefix, 0, None, opts.limit, &*filter).await,
                }
            }
            "" => self.list_from_store(&prefix, 0, None, opts.limit, &*filter).await,
            "0" if !exact => {
                let (items, rev) = self.cache.list(&*filter);
                Ok(ListResult { items, resource_version: rev.to_string(), continue_token: None, remaining: None })
            }
            n => {
                let n: i64 = n.parse().map_err(|_| Error::BadRequest(format!("invalid resource version: {n}")))?;
                if exact {
                    return self.list_from_store(&prefix, n, None, opts.limit, &*filter).await;
                }
                self.cache.wait_until(n).await?;
                let (items, rev) = self.cache.list(&*filter);
                Ok(ListResult { items, resource_version: rev.to_string(), continue_token: None, remaining: None })
            }
        }
    }

    async fn list_from_store(&self, prefix: &str, rev: i64, start: Option<String>, limit: i64, filter: &dyn Fn(&Value) -> bool) -> Result<ListResult> {
        let mut items = Vec::new();
        let mut rev = rev;
        let mut start = start;
        loop {
            // Fetch a page; keep going while the filter leaves the page short of the limit.
            let want = if limit > 0 { limit - items.len() as i64 } else { 0 };
            let page = self.storage.list(prefix, rev, want, start.as_deref()).await?;
            rev = page.revision;
            items.extend(page.items.into_iter().map(|s| s.value).filter(|v| filter(v)).map(Arc::new));
            match page.next_key {
                Some(next) if limit > 0 && (items.len() as i64) < limit => start = Some(next),
                Some(next) => {
                    return Ok(ListResult {
                        items,
                        resource_version: rev.to_string(),
                        continue_token: Some(encode_continue(rev, &next)),
                        remaining: Some(page.remaining),
                    });
                }
                None => return Ok(ListResult { items, resource_version: rev.to_string(), continue_token: None, remaining: None }),
            }
        }
    }

    /// A watch from the cache. `None` revision: the current objects as ADDED events first.
    pub fn watch(&self, namespace: Option<&str>, opts: &ListOptions) -> Result<(crate::storage::watch_cache::Subscription, crate::storage::watch_cache::Filter)> {
        let filter = self.filter(namespace, opts)?;
        let rv = match opts.resource_version.as_deref() {
            _ if opts.send_initial_events => None,
            None | Some("") | Some("0") => None,
            Some(n) => Some(n.parse::<i64>().map_err(|_| Error::BadRequest(format!("invalid resource version: {n}")))?),
        };
        Ok((self.cache.subscribe(rv, filter.clone())?, filter))
    }

    /// A write that bypasses the strategy (the binding subresource, the server's own writes).
    pub async fn raw_update<F>(&self, namespace: Option<&str>, name: &str, mut f: F) -> Result<Value>
    where
        F: FnMut(&Value) -> Result<Value>,
    {
        for _ in 0..10 {
            let current = self.get_stored(namespace, name).await?;
            let new = f(&current.value)?;
            match self.storage.update(&self.key(namespace, name), &new, current.mod_revision).await? {
                WriteOutcome::Written(rev) => return Ok(crate::storage::store::with_resource_version(new, rev)),
                WriteOutcome::Mismatch(None) => return Err(self.not_found(name)),
                WriteOutcome::Mismatch(Some(_)) => continue,
            }
        }
        Err(self.conflict(name))
    }
}

#[cfg(test)]
mod graceful_delete_tests {
    use super::deletion_timestamp;

    #[test]
    fn a_shorter_grace_period_counts_from_the_first_delete() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:35Z").map(|t| t.with_timezone(&chrono::Utc)).expect("time");
        let at = |i: Option<(&str, i64)>, g| deletion_timestamp(i, g, now).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        assert_eq!(at(None, 30), "2026-01-02T03:05:05Z", "first delete: now + grace");
        // Deleted at 03:04:05 with 60 s (deadline 03:05:05); now 30 s later with 10 s.
        assert_eq!(at(Some(("2026-01-02T03:05:05Z", 60)), 10), "2026-01-02T03:04:15Z");
        assert_eq!(at(Some(("not a time", 60)), 10), "2026-01-02T03:04:45Z", "an unreadable timestamp: from now");
    }
}
