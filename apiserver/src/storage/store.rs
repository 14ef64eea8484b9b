//! Mirrors k8s.io/apiserver/pkg/storage/etcd3/store.go: objects kept as JSON in the store (our
//! `kubelab store` or a real etcd) under `<prefix>/<resource>/<namespace>/<name>`.
//!
//! An object's `resourceVersion` is the store's `mod_revision` of its key; it is never stored in
//! the value, only set on the way out. Writes are Txns conditioned on the key's mod_revision, so
//! a create of an existing name and an update from a stale version both fail instead of
//! overwriting (optimistic concurrency).
//!
//! Between the JSON and the store sit the resource's transformers ([`super::value`], from
//! `--encryption-provider-config`): every value written is transformed to storage, every value
//! read (a get, a list, a conflicting write's current object, a watch event) from storage, with
//! the key as its context, as etcd3's store does in `prepareObjectForStorage` and `decode`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions};
use serde_json::Value;
use tracing::Instrument as _;
use tokio::sync::Mutex;

use crate::error::{Error, Result};
use super::value::PrefixTransformers;

/// The largest store response accepted (a list of every object of a resource).
const MAX_RESPONSE_BYTES: usize = 2 << 30;

/// An object as read from the store, with the revision it was last written at.
#[derive(Debug, Clone)]
pub struct Stored {
    pub key: String,
    pub value: Value,
    pub mod_revision: i64,
    /// Read by a transformer other than the resource's first: the next update writes it again
    /// even when nothing in it changed (etcd3 store's `stale`), which is how keys are rotated.
    pub stale: bool,
}

pub struct ListResult {
    pub items: Vec<Stored>,
    /// The store revision the list is consistent at.
    pub revision: i64,
    /// The key after which the next page starts, when there is one.
    pub next_key: Option<String>,
    pub remaining: i64,
}

/// What a conditional write found instead of what it expected.
pub enum WriteOutcome {
    Written(i64),
    /// The key exists (create) or has another revision (update): the current object, if any.
    Mismatch(Option<Stored>),
}

/// Mirrors k8s.io/apiserver/pkg/storage/storagebackend's `TransportConfig`: how the API server
/// reaches `https://` etcd servers — the CA their certificates must chain to (`--etcd-cafile`)
/// and the client certificate it presents (`--etcd-certfile`, `--etcd-keyfile`). Unused for
/// `http://` servers.
#[derive(Clone, Debug, Default)]
pub struct TransportConfig {
    pub trusted_ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl TransportConfig {
    /// The TLS configuration for `endpoints`: none when none of them is `https://`. Every
    /// file is read here, so a missing one is a startup error that names its flag.
    pub fn tls(&self, endpoints: &[String]) -> Result<Option<etcd_client::TlsOptions>> {
        if !endpoints.iter().any(|e| e.starts_with("https://")) {
            return Ok(None);
        }
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| Error::Internal(format!("{flag} {}: {e}", path.display())))
        };
        let mut tls = etcd_client::TlsOptions::new();
        if let Some(ca) = &self.trusted_ca_file {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(read("--etcd-cafile", ca)?));
        }
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(etcd_client::Identity::from_pem(read("--etcd-certfile", cert)?, read("--etcd-keyfile", key)?));
            }
            (None, None) => {}
            _ => return Err(Error::Internal("--etcd-certfile and --etcd-keyfile go together".into())),
        }
        Ok(Some(tls))
    }
}

#[derive(Clone)]
pub struct Storage {
    client: Client,
    /// `--etcd-servers`, for the store's debug service (`kubelab trace`).
    endpoints: Arc<Vec<String>>,
    /// How `endpoints` are reached over TLS, for the same.
    tls: Option<etcd_client::TlsOptions>,
    prefix: String,
    leases: Arc<LeaseManager>,
    /// [`Storage::progress_notify_reliable`], once the store has said its version.
    progress_reliable: Arc<std::sync::OnceLock<bool>>,
    /// Each encrypted resource's transformers, by its key segment (`secrets`); the others' values
    /// are stored as they are.
    transformers: Arc<HashMap<String, Arc<PrefixTransformers>>>,
}

/// Whether a store of this version sends progress notifications only for revisions its watch has
/// delivered every event up to. etcd's 3.4 line before 3.4.31 could send one ahead of events still
/// in flight on a new watch (etcd issue 15220 and the later fixes Kubernetes' consistent reads
/// from the cache wait for); measured here against Debian's etcd 3.4.23: after a store restart a
/// list served from the cache missed writes made after the restart. kubelab's store says 3.5.0.
pub fn version_has_reliable_progress(version: &str) -> bool {
    let parts: Vec<u64> = version.trim_start_matches('v').split('.').map(|p| p.parse().unwrap_or(0)).collect();
    match parts.as_slice() {
        [3, 4, patch, ..] => *patch >= 31,
        [major, minor, ..] => (*major, *minor) > (3, 4),
        _ => false,
    }
}

/// Sets `metadata.resourceVersion` on an object read from the store.
pub fn with_resource_version(mut value: Value, rev: i64) -> Value {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
    value
}

fn decode_json(key: String, value: &[u8], mod_revision: i64, stale: bool) -> Result<Stored> {
    let value: Value = serde_json::from_slice(value)
        .map_err(|e| Error::Internal(format!("object at {key} is not JSON: {e}")))?;
    Ok(Stored { value: with_resource_version(value, mod_revision), key, mod_revision, stale })
}

fn encode_json(value: &Value) -> Result<Vec<u8>> {
    // The resourceVersion is the store's revision, not part of the stored object.
    if value.pointer("/metadata/resourceVersion").is_none() {
        return serde_json::to_vec(value).map_err(|e| Error::Internal(e.to_string()));
    }
    let mut v = value.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    serde_json::to_vec(&v).map_err(|e| Error::Internal(e.to_string()))
}

/// The end of a prefix range: the prefix with its last byte incremented.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl Storage {
    pub async fn connect(endpoints: &[String], prefix: &str, transport: &TransportConfig) -> Result<Self> {
        let tls = transport.tls(endpoints)?;
        let mut opts = etcd_client::ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(10))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        if let Some(tls) = &tls {
            opts = opts.with_tls(tls.clone());
        }
        let client = Client::connect(endpoints, Some(opts)).await?;
        Ok(Self {
            client,
            endpoints: Arc::new(endpoints.to_vec()),
            tls,
            prefix: prefix.trim_end_matches('/').to_string(),
            leases: Arc::new(LeaseManager::default()),
            progress_reliable: Arc::new(std::sync::OnceLock::new()),
            transformers: Arc::new(HashMap::new()),
        })
    }

    /// The same store, transforming the values of the resources in `transformers` (by key
    /// segment: `secrets`) on their way in and out.
    pub fn with_transformers(mut self, transformers: HashMap<String, Arc<PrefixTransformers>>) -> Self {
        self.transformers = Arc::new(transformers);
        self
    }

    /// The transformers of the resource `key` belongs to: its segment after the prefix.
    fn transformer(&self, key: &[u8]) -> Option<&PrefixTransformers> {
        if self.transformers.is_empty() {
            return None;
        }
        let rest = key.strip_prefix(self.prefix.as_bytes())?.strip_prefix(b"/")?;
        let segment = rest.split(|b| *b == b'/').next()?;
        self.transformers.get(std::str::from_utf8(segment).ok()?).map(|t| &**t)
    }

    /// A key and value as the store holds them, into an object: transformed from storage, then
    /// decoded (etcd3 store's `decode` after `transformer.TransformFromStorage`). A value no
    /// transformer reads is an Internal error naming the key; the value stays as it is.
    pub fn decode(&self, key: &[u8], value: &[u8], mod_revision: i64) -> Result<Stored> {
        let Some(transformer) = self.transformer(key) else {
            return decode_json(String::from_utf8_lossy(key).into_owned(), value, mod_revision, false);
        };
        let key = String::from_utf8_lossy(key).into_owned();
        match transformer.transform_from_storage(value, key.as_bytes()) {
            Ok(read) => decode_json(key, &read.data, mod_revision, read.stale),
            Err(e) => {
                tracing::error!(target: "apiserver::storage", key, error = %e, "value not transformed from storage");
                Err(Error::Internal(format!("unable to transform key {key:?}: {e}")))
            }
        }
    }

    /// An object into the value the store keeps under `key`.
    fn encode(&self, key: &str, value: &Value) -> Result<Vec<u8>> {
        let data = encode_json(value)?;
        let Some(transformer) = self.transformer(key.as_bytes()) else { return Ok(data) };
        transformer
            .transform_to_storage(&data, key.as_bytes())
            .map_err(|e| Error::Internal(format!("unable to transform key {key:?} to storage: {e}")))
    }

    /// Whether the watch cache may serve a consistent list once a progress notification says it
    /// has caught up ([`version_has_reliable_progress`] of the store's Maintenance Status
    /// version). Asked once the store answers; until then, no.
    pub async fn progress_notify_reliable(&self) -> bool {
        if let Some(known) = self.progress_reliable.get() {
            return *known;
        }
        match self.client.maintenance_client().status().await {
            Ok(status) => *self.progress_reliable.get_or_init(|| version_has_reliable_progress(status.version())),
            Err(_) => false,
        }
    }

    /// A KV client that accepts responses as large as a big list (gRPC's default is 4 MiB; the
    /// kube-apiserver lifts the limit the same way).
    fn kv(&self) -> etcd_client::KvClient {
        self.client.kv_client().max_decoding_message_size(MAX_RESPONSE_BYTES)
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The store's client URLs, as `--etcd-servers` gave them.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// What `https://` endpoints are reached with (`--etcd-cafile`, `--etcd-certfile`,
    /// `--etcd-keyfile`).
    pub fn tls(&self) -> Option<&etcd_client::TlsOptions> {
        self.tls.as_ref()
    }

    /// `<prefix>/<resource>/[<namespace>/]<name>`; with an empty name, the prefix of a list.
    pub fn key(&self, resource: &str, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if !ns.is_empty() => format!("{}/{}/{}/{}", self.prefix, resource, ns, name),
            _ => format!("{}/{}/{}", self.prefix, resource, name),
        }
    }

    pub async fn get(&self, key: &str) -> Result<Option<Stored>> {
        let resp = self.kv().get(key, None).await?;
        resp.kvs().first().map(|kv| self.decode(kv.key(), kv.value(), kv.mod_revision())).transpose()
    }

    /// The store's current revision (a quorum read).
    pub async fn current_revision(&self) -> Result<i64> {
        // One key (which need not exist): the header carries the store's revision, and a
        // linearizable read costs one ReadIndex, not a count over every key.
        let resp = self.kv().get(self.prefix.as_str(), Some(GetOptions::new().with_count_only())).await?;
        Ok(resp.header().map_or(0, |h| h.revision()))
    }

    /// Lists a prefix at `revision` (0 = now), starting at `start` (a key, inclusive).
    pub async fn list(&self, prefix: &str, revision: i64, limit: i64, start: Option<&str>) -> Result<ListResult> {
        self.list_with(prefix, revision, limit, start, false).await
    }

    /// Every object under `prefix` now, for a watch cache: an object that cannot be decoded (its
    /// key is not in `--encryption-provider-config`) is left out, with an error logged, rather
    /// than keeping the whole resource's cache, and so the server's readiness, from filling. A
    /// GET of it still answers the error.
    pub async fn list_for_cache(&self, prefix: &str) -> Result<ListResult> {
        self.list_with(prefix, 0, 0, None, true).await
    }

    async fn list_with(&self, prefix: &str, revision: i64, limit: i64, start: Option<&str>, skip_undecodable: bool) -> Result<ListResult> {
        let from = start.unwrap_or(prefix).to_string();
        let mut opts = GetOptions::new().with_range(prefix_end(prefix));
        if revision > 0 {
            opts = opts.with_revision(revision);
        }
        if limit > 0 {
            opts = opts.with_limit(limit);
        }
        let resp = self.kv().get(from, Some(opts)).await.map_err(map_compacted)?;
        // The header carries the store's current revision, whatever revision was read: a read at
        // a given revision (a continued list) answers for that one, so that every later page is
        // read there too (etcd3 store's GetList keeps withRev).
        let revision = if revision > 0 { revision } else { resp.header().map_or(0, |h| h.revision()) };
        let mut items = Vec::with_capacity(resp.kvs().len());
        for kv in resp.kvs() {
            match self.decode(kv.key(), kv.value(), kv.mod_revision()) {
                Ok(item) => items.push(item),
                // decode has logged it.
                Err(_) if skip_undecodable => {}
                Err(e) => return Err(e),
            }
        }
        let remaining = resp.count() - items.len() as i64;
        let next_key = if resp.more() { items.last().map(|s| format!("{}\u{0}", s.key)) } else { None };
        Ok(ListResult { items, revision, next_key, remaining })
    }

    /// Creates `key` unless it exists. `ttl` attaches a lease (events).
    pub async fn create(&self, key: &str, value: &Value, ttl: Option<i64>) -> Result<WriteOutcome> {
        let mut put = None;
        if let Some(ttl) = ttl {
            put = Some(PutOptions::new().with_lease(self.leases.lease_for(&self.client, ttl).await?));
        }
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, self.encode(key, value)?, put)])
            .or_else([TxnOp::get(key, None)]);
        self.write(txn, key, Some(value)).await
    }

    /// Writes `key` whatever is there, on a lease of its own that ends in `ttl` seconds unless
    /// written again (the API servers' master leases: each renews its own key).
    pub async fn put_with_ttl(&self, key: &str, value: &Value, ttl: i64) -> Result<()> {
        let lease = self.client.lease_client().grant(ttl, None).await?;
        self.kv().put(key, self.encode(key, value)?, Some(PutOptions::new().with_lease(lease.id()))).await?;
        Ok(())
    }

    /// Replaces `key` if it is still at `expected` (its mod_revision).
    pub async fn update(&self, key: &str, value: &Value, expected: i64) -> Result<WriteOutcome> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::put(key, self.encode(key, value)?, None)])
            .or_else([TxnOp::get(key, None)]);
        self.write(txn, key, Some(value)).await
    }

    /// Deletes `key` if it is still at `expected`.
    pub async fn delete(&self, key: &str, expected: i64) -> Result<WriteOutcome> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::delete(key, None)])
            .or_else([TxnOp::get(key, None)]);
        self.write(txn, key, None).await
    }

    async fn write(&self, txn: Txn, key: &str, value: Option<&Value>) -> Result<WriteOutcome> {
        let span = tracing::debug_span!(target: "apiserver::storage", "store write", key, revision = tracing::field::Empty, pod_uid = tracing::field::Empty);
        // A traced object's writes are steps of it (`kubelab trace`): a pod's, a Service's and
        // its EndpointSlices'.
        if let Some(uid) = value.and_then(podtrace::trace_uid) {
            span.record(podtrace::KEY_FIELD, uid);
        }
        let resp = self.kv().txn(txn).instrument(span.clone()).await?;
        let rev = resp.header().map_or(0, |h| h.revision());
        span.record("revision", rev);
        if resp.succeeded() {
            return Ok(WriteOutcome::Written(rev));
        }
        let current = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| self.decode(kv.key(), kv.value(), kv.mod_revision())),
            _ => None,
        });
        let _ = key;
        Ok(WriteOutcome::Mismatch(current.transpose()?))
    }

    /// A watch of every key under `prefix` from `from_revision` on, with previous values.
    pub async fn watch(&self, prefix: &str, from_revision: i64) -> Result<etcd_client::WatchStream> {
        let opts = WatchOptions::new()
            .with_range(prefix_end(prefix))
            .with_start_revision(from_revision)
            .with_prev_key()
            .with_progress_notify();
        Ok(self.client.watch_client().max_decoding_message_size(MAX_RESPONSE_BYTES).watch(prefix, Some(opts)).await?)
    }

    /// Compacts history before `revision` (the API server does this every few minutes).
    pub async fn compact(&self, revision: i64) -> Result<()> {
        self.kv().compact(revision, None).await?;
        Ok(())
    }
}

fn map_compacted(e: etcd_client::Error) -> Error {
    let msg = e.to_string();
    if msg.contains("required revision has been compacted") {
        Error::Gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into())
    } else if msg.contains("required revision is a future revision") {
        Error::Gone(format!("Too large resource version: {msg}"))
    } else {
        Error::Unavailable(msg)
    }
}

/// Mirrors etcd3/lease_manager.go: objects with the same TTL written within a minute share one
/// store lease, so a busy event stream does not create a lease per event.
#[derive(Default)]
pub struct LeaseManager {
    leases: Mutex<HashMap<i64, (i64, Instant)>>,
}

/// How long a lease is reused for new objects.
const LEASE_REUSE: Duration = Duration::from_secs(60);

impl LeaseManager {
    async fn lease_for(&self, client: &Client, ttl: i64) -> Result<i64> {
        let mut leases = self.leases.lock().await;
        if let Some((id, granted)) = leases.get(&ttl)
            && granted.elapsed() < LEASE_REUSE
        {
            return Ok(*id);
        }
        // The lease outlives its reuse window so the last object still gets its full TTL.
        let resp = client.lease_client().grant(ttl + LEASE_REUSE.as_secs() as i64, None).await?;
        leases.insert(ttl, (resp.id(), Instant::now()));
        Ok(resp.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_stores_send_progress_only_after_their_events() {
        for (version, reliable) in
            [("3.4.23", false), ("3.4.31", true), ("3.5.0", true), ("3.5.13", true), ("3.6.1", true), ("3.3.27", false), ("", false)]
        {
            assert_eq!(version_has_reliable_progress(version), reliable, "{version}");
        }
    }

    #[test]
    fn prefix_end_increments_the_last_byte() {
        assert_eq!(prefix_end("/registry/pods/"), b"/registry/pods0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
    }

    #[test]
    fn resource_version_is_never_stored() {
        let v = serde_json::json!({"metadata": {"name": "x", "resourceVersion": "5"}});
        let bytes = encode_json(&v).unwrap();
        assert!(!String::from_utf8(bytes.clone()).unwrap().contains("resourceVersion"));
        let back = decode_json("k".into(), &bytes, 9, false).unwrap();
        assert_eq!(back.value["metadata"]["resourceVersion"], "9");
    }
}
