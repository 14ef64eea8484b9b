//! Mirrors k8s.io/apiserver/pkg/registry/generic/registry/store.go: the generic store every
//! resource shares — get, list and watch (from the watch cache or the store), create, update
//! (with retries on conflicts), graceful delete — driven by each resource's [`Strategy`].
//!
//! The flow of a create, once the handler has decoded the object and admitted the request
//! (endpoints/handlers/create.rs):
//! 1. `BeforeCreate`: name from generateName, namespace, uid, creationTimestamp, generation; then
//!    the type's defaults (the strategy's `set_defaults`), the mutating admission plugins that
//!    change the object (handed in by the handler), the strategy's `prepare_for_create` (status
//!    reset) and `validate` (422 Invalid) — the `defaulting and validation` step;
//! 2. the validating admission the handler hands in (Kubernetes' `createValidation`);
//! 3. what the object takes from pools every API server shares (the strategy's `begin_create`: a
//!    Service's cluster IP and node ports; 422 when what it asks for is taken), then a store Txn
//!    that fails if the key exists (409 AlreadyExists) — and the pools are told how it ended.
//!
//! An update that changes the object passes the strategy's `begin_update` the same way, and an
//! object that leaves the store its `after_delete` (what it held goes back to the pools).

use std::sync::Arc;

use serde_json::{Value, json};

use super::options::{DeleteOptions, FINALIZER_FOREGROUND, FINALIZER_ORPHAN, ListOptions, decode_continue, encode_continue};
use super::strategy::{GarbageCollectionPolicy, ResourceInfo, Strategy, qualified};
use super::typed::Object;
use crate::authentication::user::UserInfo;
use crate::error::{Cause, Error, Result};
use crate::storage::store::{Storage, Stored, WriteOutcome, with_resource_version};
use crate::storage::watch_cache::{Filter, Subscription, WatchCache};

/// What the handler hands the store's create: the request's user, and admission, at the two
/// points of BeforeCreate where it runs.
pub struct CreateAdmission<'a> {
    /// Who asks (what Kubernetes' request context carries to `PrepareForCreate`); none for the
    /// server's own objects.
    pub user: Option<&'a UserInfo>,
    /// The mutating plugins that change the object, once the type's defaults are applied (where
    /// Kubernetes' decoder has already applied them before its chain runs).
    pub mutate: &'a dyn Fn(&mut Object) -> Result<()>,
    /// The validating plugins, on the object about to be written (Kubernetes' `createValidation`).
    pub validate: &'a dyn Fn(&Value) -> Result<()>,
}

impl CreateAdmission<'_> {
    /// None: the server's own objects.
    pub const NONE: CreateAdmission<'static> = CreateAdmission { user: None, mutate: &|_| Ok(()), validate: &|_| Ok(()) };
}

/// A list's items and where it stands.
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

/// `names.SimpleNameGenerator`: `prefix` and five random characters.
pub fn generated_name(prefix: &str) -> String {
    // Kubernetes' alphabet for generated names: no vowels, no confusable characters.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes.iter().take(5).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
    format!("{prefix}{suffix}")
}

pub fn resource_version_of(v: &Value) -> Option<i64> {
    v.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok())
}

/// The resourceVersion a write is conditioned on: None when unset (or empty). One that is not a
/// revision is a 400, not an unconditional write (kube-apiserver's versioner fails to parse it
/// too, and answers with a 500).
pub fn precondition_of(v: &Value) -> Result<Option<i64>> {
    match v.pointer("/metadata/resourceVersion") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| Error::BadRequest(format!("invalid resource version: {s}"))),
        Some(other) => Err(Error::BadRequest(format!("invalid resource version: {other}"))),
    }
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

    /// The resource as errors name it: `pods`, `deployments.apps` (a GroupResource printed).
    fn qualified_resource(&self) -> String {
        qualified(self.info().plural, self.info().group)
    }

    fn not_found(&self, name: &str) -> Error {
        Error::not_found(&self.qualified_resource(), name)
    }

    fn invalid(&self, name: &str, causes: Vec<Cause>) -> Error {
        self.info().invalid(name, causes)
    }

    pub async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Value> {
        self.get_stored(namespace, name).await.map(|s| s.value)
    }

    async fn get_stored(&self, namespace: Option<&str>, name: &str) -> Result<Stored> {
        self.storage.get(&self.key(namespace, name)).await?.ok_or_else(|| self.not_found(name))
    }

    /// `BeforeCreate` and the store write, for the server's own objects (no admission).
    pub async fn create(&self, namespace: Option<&str>, obj: Value) -> Result<Value> {
        self.create_with(namespace, obj, false, &CreateAdmission::NONE).await
    }

    /// A create (steps 1–3 above); with `dry_run`, everything but the write (defaults, admission,
    /// validation, name clash).
    pub async fn create_with(&self, namespace: Option<&str>, mut obj: Value, dry_run: bool, admission: &CreateAdmission<'_>) -> Result<Value> {
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
        let obj = tracing::debug_span!(target: "apiserver", "defaulting and validation", pod_uid = tracing::field::Empty).in_scope(|| {
            // One typed form for the three hands that change the object.
            let mut object = Object::new(obj);
            self.strategy.set_defaults(&mut object);
            (admission.mutate)(&mut object)?;
            self.strategy.prepare_for_create_by(admission.user, &mut object);
            let obj = object.into_json();
            let causes = self.strategy.validate(&obj);
            if causes.is_empty() { Ok(obj) } else { Err(self.invalid(&name, causes)) }
        })?;
        // Step 2: validating admission.
        (admission.validate)(&obj)?;
        // Step 3: what the object takes from shared pools (a Service's cluster IP), then the write.
        let mut obj = obj;
        let finish = self.strategy.begin_create(&self.storage, &mut obj, dry_run).await?;
        let result = self.write_create(namespace, name, obj, dry_run).await;
        if let Some(finish) = finish {
            finish(result.is_ok()).await;
        }
        result
    }

    async fn write_create(&self, namespace: Option<&str>, name: String, obj: Value, dry_run: bool) -> Result<Value> {
        let key = self.key(namespace, &name);
        if dry_run {
            return match self.storage.get(&key).await? {
                Some(_) => Err(Error::AlreadyExists { kind: self.qualified_resource(), name }),
                None => Ok(obj),
            };
        }
        match self.storage.create(&key, &obj, self.strategy.ttl()).await? {
            WriteOutcome::Written(rev) => Ok(with_resource_version(obj, rev)),
            WriteOutcome::Mismatch(_) => Err(Error::AlreadyExists { kind: self.qualified_resource(), name }),
        }
    }

    /// An update of the main resource or of a subresource (`status`, `finalize`). With
    /// `obj.metadata.resourceVersion` set it must match (409 otherwise); without, it applies to
    /// whatever is current.
    pub async fn update(&self, namespace: Option<&str>, name: &str, obj: Value, subresource: Option<&str>) -> Result<Value> {
        self.update_with(namespace, name, obj, subresource, false).await
    }

    /// An update; with `dry_run`, everything but the write (the answer is what would have been
    /// written, at the current resourceVersion).
    pub async fn update_with(&self, namespace: Option<&str>, name: &str, obj: Value, subresource: Option<&str>, dry_run: bool) -> Result<Value> {
        let requested_rv = precondition_of(&obj)?;
        let current = self.get_stored(namespace, name).await?;
        if let Some(rv) = requested_rv
            && rv != current.mod_revision
        {
            return Err(self.conflict(name));
        }
        let new = self.prepare_update(&current.value, obj, subresource)?;
        self.write_update(namespace, name, &current, new, dry_run).await
    }

    fn conflict(&self, name: &str) -> Error {
        Error::Conflict {
            kind: self.qualified_resource(),
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
            Some(other) => self.strategy.prepare_for_subresource_update(other, &mut new, old),
            None => {
                self.strategy.prepare_for_update(&mut new, old);
                if new.get("spec") != old.get("spec") {
                    let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                    new["metadata"]["generation"] = json!(g + 1);
                }
            }
        }
        let causes = match subresource {
            Some(sub) => self.strategy.validate_subresource_update(sub, &new, old),
            None => self.strategy.validate_update(&new, old),
        };
        if !causes.is_empty() {
            return Err(self.invalid(&name, causes));
        }
        Ok(new)
    }

    /// Writes an update prepared from `current`; with `dry_run`, answers what the write would
    /// (the same object, at `current`'s resourceVersion, as etcd3's dry-run GuaranteedUpdate
    /// does) and writes nothing.
    async fn write_update(&self, namespace: Option<&str>, name: &str, current: &Stored, new: Value, dry_run: bool) -> Result<Value> {
        let mut cmp_new = new.clone();
        let mut cmp_old = current.value.clone();
        for v in [&mut cmp_new, &mut cmp_old] {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("resourceVersion");
                m.remove("managedFields");
            }
        }
        // A no-op update writes nothing — unless the object was read with a key other than
        // the first (stale): then it is written again, which rotates it to the first key.
        if cmp_new == cmp_old && !current.stale {
            return Ok(current.value.clone());
        }
        let mut new = new;
        let finish = self.strategy.begin_update(&self.storage, &mut new, &current.value, dry_run).await?;
        let result = self.write_changed(namespace, name, current, new, dry_run).await;
        if let Some(finish) = finish {
            finish(result.is_ok()).await;
        }
        result
    }

    /// The write of an update that changes the object.
    async fn write_changed(&self, namespace: Option<&str>, name: &str, current: &Stored, new: Value, dry_run: bool) -> Result<Value> {
        if dry_run {
            return Ok(with_resource_version(new, current.mod_revision));
        }
        // An object being deleted whose last finalizer is gone is deleted now.
        if new.pointer("/metadata/deletionTimestamp").is_some()
            && new.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty())
            && new.pointer("/spec/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty())
            && new.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0) == 0
        {
            return match self.storage.delete(&self.key(namespace, name), current.mod_revision).await? {
                WriteOutcome::Written(rev) => {
                    self.strategy.after_delete(&self.storage, &current.value).await;
                    Ok(with_resource_version(new, rev))
                }
                WriteOutcome::Mismatch(_) => Err(self.conflict(name)),
            };
        }
        match self.storage.update(&self.key(namespace, name), &new, current.mod_revision).await? {
            WriteOutcome::Written(rev) => Ok(with_resource_version(new, rev)),
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
            let pinned = precondition_of(&new)?.filter(|rv| *rv != current.mod_revision);
            if pinned.is_some() {
                return Err(self.conflict(name));
            }
            let new = self.prepare_update(&current.value, new, subresource)?;
            match self.write_update(namespace, name, &current, new, dry_run).await {
                Err(Error::Conflict { .. }) => continue,
                other => return other,
            }
        }
        Err(self.conflict(name))
    }

    /// Deletes an object; returns it and whether it is gone (false: it is being deleted
    /// gracefully or waits for finalizers). With `opts.dry_run`, the preconditions are checked and
    /// the answer is what the delete would answer (the object as marked, or as it was), but
    /// nothing is written.
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
            match plan_delete(&*self.strategy, obj, opts, chrono::Utc::now()) {
                DeletePlan::Keep => return Ok((current.value, false)),
                DeletePlan::Remove if opts.is_dry_run() => return Ok((current.value, true)),
                DeletePlan::Mark(marked) if opts.is_dry_run() => return Ok((marked, false)),
                DeletePlan::Remove => {
                    return match self.storage.delete(&self.key(namespace, name), current.mod_revision).await? {
                        WriteOutcome::Written(_) => {
                            self.strategy.after_delete(&self.storage, &current.value).await;
                            Ok((current.value, true))
                        }
                        WriteOutcome::Mismatch(None) => Err(self.not_found(name)),
                        WriteOutcome::Mismatch(Some(_)) => continue,
                    };
                }
                DeletePlan::Mark(marked) => match self.storage.update(&self.key(namespace, name), &marked, current.mod_revision).await? {
                    WriteOutcome::Written(rev) => return Ok((with_resource_version(marked, rev), false)),
                    WriteOutcome::Mismatch(None) => return Err(self.not_found(name)),
                    WriteOutcome::Mismatch(Some(_)) => continue,
                },
            }
        }
        Err(self.conflict(name))
    }
}

/// What a delete does to the object it found (store.go's Delete, with BeforeDelete's graceful
/// marking): decided here, carried out — or, for a dry run, only answered — by [`Registry::delete`].
#[derive(Debug, PartialEq)]
enum DeletePlan {
    /// Remove the key now.
    Remove,
    /// Write the object marked for deletion: graceful (pods), or waiting for its finalizers.
    Mark(Value),
    /// Already marked as far as this delete would mark it: nothing to write.
    Keep,
}

fn plan_delete(strategy: &dyn Strategy, obj: &Value, opts: &DeleteOptions, now: chrono::DateTime<chrono::Utc>) -> DeletePlan {
    let grace = strategy.grace_period(obj, opts.grace_period_seconds);
    // The garbage collector's finalizers, as the options (or the kind's default) ask.
    let existing: Vec<String> = obj.pointer("/metadata/finalizers").and_then(Value::as_array).map(|f| f.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
    let wanted = gc_finalizers(strategy.garbage_collection_policy(), &existing, opts);
    let finalizers_changed = {
        let (mut a, mut b) = (existing.clone(), wanted.clone());
        a.sort();
        b.sort();
        a != b
    };
    let mut marked = obj.clone();
    if finalizers_changed {
        marked["metadata"]["finalizers"] = json!(wanted);
    }
    let finalizers = !wanted.is_empty() || obj.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
    if let Some(g) = grace.filter(|g| *g > 0) {
        // Graceful: mark, unless already marked with a shorter grace period.
        let existing = obj.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
        if existing.is_some_and(|e| g >= e) {
            return if finalizers_changed { DeletePlan::Mark(marked) } else { DeletePlan::Keep };
        }
        let since = obj.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).zip(existing);
        let at = deletion_timestamp(since, g, now);
        marked["metadata"]["deletionTimestamp"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(g);
        DeletePlan::Mark(marked)
    } else if finalizers && obj.pointer("/metadata/deletionTimestamp").is_some() {
        // Already waiting for finalizers: a second delete may switch between orphaning and
        // foreground deletion, nothing else.
        if finalizers_changed { DeletePlan::Mark(marked) } else { DeletePlan::Keep }
    } else if finalizers {
        marked["metadata"]["deletionTimestamp"] = json!(now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        strategy.mark_for_deletion(&mut marked);
        DeletePlan::Mark(marked)
    } else {
        DeletePlan::Remove
    }
}

/// deletionFinalizersForGarbageCollection: the object's finalizers after this delete — its own,
/// less `orphan` and `foregroundDeletion`, plus the one the delete asks for (shouldOrphanDependents,
/// shouldDeleteDependents): the request's `orphanDependents` or `propagationPolicy` first, then
/// the finalizer a previous delete left, then the kind's default (only Orphan adds one).
pub fn gc_finalizers(policy: GarbageCollectionPolicy, existing: &[String], opts: &DeleteOptions) -> Vec<String> {
    let mut out: Vec<String> = existing.iter().filter(|f| *f != FINALIZER_ORPHAN && *f != FINALIZER_FOREGROUND).cloned().collect();
    if policy == GarbageCollectionPolicy::Unsupported {
        return existing.to_vec();
    }
    let asked = match (opts.orphan_dependents, opts.propagation_policy.as_deref()) {
        (Some(true), _) => Some("Orphan"),
        (Some(false), _) => Some("Background"),
        (None, Some(p)) => Some(p),
        (None, None) => None,
    };
    let decided = asked.or_else(|| {
        existing.iter().find_map(|f| match f.as_str() {
            FINALIZER_ORPHAN => Some("Orphan"),
            FINALIZER_FOREGROUND => Some("Foreground"),
            _ => None,
        })
    });
    let decided = decided.unwrap_or(if policy == GarbageCollectionPolicy::OrphanDependents { "Orphan" } else { "Background" });
    match decided {
        "Orphan" => out.push(FINALIZER_ORPHAN.into()),
        "Foreground" => out.push(FINALIZER_FOREGROUND.into()),
        _ => {}
    }
    out
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

impl Registry {
    /// The predicate of a list or watch: namespace, label selector, field selector.
    pub fn filter(&self, namespace: Option<&str>, opts: &ListOptions) -> Result<Filter> {
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
            // answer as a quorum read of the store, without decoding every object again — where
            // the store's progress notifications can be trusted to say so (not etcd 3.4 < 3.4.31).
            "" if opts.limit <= 0 && self.storage.progress_notify_reliable().await => {
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
    pub fn watch(&self, namespace: Option<&str>, opts: &ListOptions) -> Result<(Subscription, Filter)> {
        let filter = self.filter(namespace, opts)?;
        let rv = match opts.resource_version.as_deref() {
            _ if opts.send_initial_events == Some(true) => None,
            None | Some("") | Some("0") => None,
            Some(n) => Some(n.parse::<i64>().map_err(|_| Error::BadRequest(format!("invalid resource version: {n}")))?),
        };
        Ok((self.cache.subscribe(rv, filter.clone())?, filter))
    }

    /// A write that bypasses the strategy (the binding subresource, the server's own writes).
    pub async fn raw_update<F>(&self, namespace: Option<&str>, name: &str, f: F) -> Result<Value>
    where
        F: FnMut(&Value) -> Result<Value>,
    {
        self.raw_update_with(namespace, name, false, f).await
    }

    /// `raw_update`; with `dry_run`, `f` decides on the current object and its answer comes back
    /// at the current resourceVersion, unwritten.
    pub async fn raw_update_with<F>(&self, namespace: Option<&str>, name: &str, dry_run: bool, mut f: F) -> Result<Value>
    where
        F: FnMut(&Value) -> Result<Value>,
    {
        for _ in 0..10 {
            let current = self.get_stored(namespace, name).await?;
            let new = f(&current.value)?;
            if dry_run {
                return Ok(with_resource_version(new, current.mod_revision));
            }
            match self.storage.update(&self.key(namespace, name), &new, current.mod_revision).await? {
                WriteOutcome::Written(rev) => return Ok(with_resource_version(new, rev)),
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

#[cfg(test)]
mod delete_plan_tests {
    use serde_json::json;

    use super::{DeleteOptions, DeletePlan, GarbageCollectionPolicy, gc_finalizers, plan_delete};
    use crate::registry::core::configmap::strategy::ConfigMapStrategy;
    use crate::registry::core::namespace::strategy::NamespaceStrategy;
    use crate::registry::core::pod::strategy::PodStrategy;

    fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z").map(|t| t.with_timezone(&chrono::Utc)).expect("time")
    }

    fn grace(g: Option<i64>) -> DeleteOptions {
        DeleteOptions { grace_period_seconds: g, ..DeleteOptions::default() }
    }

    fn policy(p: &str) -> DeleteOptions {
        DeleteOptions { propagation_policy: Some(p.into()), ..DeleteOptions::default() }
    }

    #[test]
    fn the_finalizers_a_delete_leaves_for_the_garbage_collector() {
        use GarbageCollectionPolicy::*;
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        let none = DeleteOptions::default();
        let orphan_flag = DeleteOptions { orphan_dependents: Some(true), ..DeleteOptions::default() };
        // (kind's default, existing finalizers, options) -> finalizers
        let cases: Vec<(GarbageCollectionPolicy, Vec<String>, DeleteOptions, Vec<String>)> = vec![
            (DeleteDependents, s(&[]), none.clone(), s(&[])),
            (DeleteDependents, s(&["keep"]), policy("Orphan"), s(&["keep", "orphan"])),
            (DeleteDependents, s(&[]), policy("Foreground"), s(&["foregroundDeletion"])),
            (DeleteDependents, s(&["orphan"]), policy("Foreground"), s(&["foregroundDeletion"])),
            (DeleteDependents, s(&["foregroundDeletion"]), policy("Background"), s(&[])),
            (DeleteDependents, s(&["orphan"]), none.clone(), s(&["orphan"])),
            (DeleteDependents, s(&[]), orphan_flag.clone(), s(&["orphan"])),
            (OrphanDependents, s(&[]), none.clone(), s(&["orphan"])),
            (OrphanDependents, s(&[]), policy("Background"), s(&[])),
            (Unsupported, s(&[]), policy("Orphan"), s(&[])),
        ];
        for (kind, existing, opts, want) in cases {
            assert_eq!(gc_finalizers(kind, &existing, &opts), want, "{kind:?} {existing:?} {opts:?}");
        }
        // An orphaning delete marks the object and leaves it to the collector; a second delete
        // may switch it to foreground.
        let cm = json!({"metadata": {"name": "c", "resourceVersion": "7"}});
        let DeletePlan::Mark(marked) = plan_delete(&ConfigMapStrategy, &cm, &policy("Orphan"), now()) else { panic!("marked") };
        assert_eq!((marked["metadata"]["finalizers"].clone(), marked["metadata"]["deletionGracePeriodSeconds"].clone()), (json!(["orphan"]), json!(0)));
        let DeletePlan::Mark(switched) = plan_delete(&ConfigMapStrategy, &marked, &policy("Foreground"), now()) else { panic!("switched") };
        assert_eq!(switched["metadata"]["finalizers"], json!(["foregroundDeletion"]));
        assert_eq!(plan_delete(&ConfigMapStrategy, &switched, &grace(None), now()), DeletePlan::Keep);
    }

    #[test]
    fn what_a_delete_does_to_the_object_it_finds() {
        let cm = json!({"metadata": {"name": "c", "resourceVersion": "7"}});
        assert_eq!(plan_delete(&ConfigMapStrategy, &cm, &grace(None), now()), DeletePlan::Remove, "no grace, no finalizers: gone at once");

        let bound = json!({"metadata": {"name": "p", "resourceVersion": "7"}, "spec": {"nodeName": "n1"}});
        let DeletePlan::Mark(marked) = plan_delete(&PodStrategy, &bound, &grace(None), now()) else { panic!("a bound pod is marked") };
        assert_eq!(marked["metadata"]["deletionTimestamp"], "2026-01-02T03:04:35Z");
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(marked["metadata"]["resourceVersion"], "7", "the answer keeps the version it was decided on");
        assert_eq!(plan_delete(&PodStrategy, &marked, &grace(Some(60)), now()), DeletePlan::Keep, "a longer grace period changes nothing");
        assert!(matches!(plan_delete(&PodStrategy, &marked, &grace(Some(5)), now()), DeletePlan::Mark(_)), "a shorter one marks again");
        assert_eq!(plan_delete(&PodStrategy, &bound, &grace(Some(0)), now()), DeletePlan::Remove, "grace 0: gone at once");
        assert_eq!(plan_delete(&PodStrategy, &marked, &grace(Some(0)), now()), DeletePlan::Remove, "grace 0 on a pod being deleted: gone at once");

        let ns = json!({"metadata": {"name": "team"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let DeletePlan::Mark(marked) = plan_delete(&NamespaceStrategy, &ns, &grace(None), now()) else { panic!("a namespace with finalizers is marked") };
        assert_eq!(marked["metadata"]["deletionTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(marked["status"]["phase"], "Terminating", "the strategy's own marking");
        assert_eq!(plan_delete(&NamespaceStrategy, &marked, &grace(None), now()), DeletePlan::Keep, "already waiting for its finalizers");
    }

    #[test]
    fn a_resource_version_that_is_not_a_revision_is_a_400_not_an_unconditional_write() {
        // What the fuzzing found: a PUT with `resourceVersion: "abc"` was written unconditionally.
        use crate::registry::generic::store::precondition_of;
        assert_eq!(precondition_of(&json!({"metadata": {}})).expect("unset"), None);
        assert_eq!(precondition_of(&json!({"metadata": {"resourceVersion": ""}})).expect("empty"), None);
        assert_eq!(precondition_of(&json!({"metadata": {"resourceVersion": "42"}})).expect("42"), Some(42));
        for bad in [json!("abc"), json!("-"), json!("1.5"), json!(7)] {
            let e = precondition_of(&json!({"metadata": {"resourceVersion": bad}})).expect_err("not a revision");
            assert_eq!((e.code(), e.reason()), (400, "BadRequest"), "{bad}");
        }
    }
}
