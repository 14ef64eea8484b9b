//! # apiserver — kubelab's kube-apiserver
//!
//! The only component that talks to the store; every other component talks to it. It serves a
//! kubectl-compatible subset of the Kubernetes REST API over HTTP (anonymous, plain HTTP for
//! local use; TLS and authentication come later), keeping objects as JSON in the store
//! (`kubelab store` or a real etcd 3.4+) under `--etcd-prefix`.
//!
//! ## The flow of a request
//! 1. [`handlers::dispatch`] routes `/api/v1/...` or `/apis/<g>/<v>/...` to a resource's
//!    [`registry::Registry`] (namespace, name, subresource) and picks the verb.
//! 2. Bodies are decoded through the typed object (k8s-openapi) — unknown fields become
//!    warnings, or 400 under `fieldValidation=Strict`.
//! 3. The registry runs the resource's [`registry::Strategy`] and writes with a store Txn
//!    conditioned on the object's revision. The strategy defaults the object (the `api` crate's
//!    `SetDefaults_*`, then on a pod create the mutating admission and `PrepareForCreate` of
//!    [`defaults`]), validates it (the `api` crate's `validate_*`, whose field errors
//!    [`registry::validation::causes`] turns into a 422's causes) and splits spec from status.
//! 4. Lists and watches with a resourceVersion are served by the resource's
//!    [`storage::watch_cache::WatchCache`]: one store watch per resource, fanned out to every watcher.
//! 5. Errors leave as a `metav1.Status` ([`error::Error::to_status`]); Tables
//!    ([`printers`]) when kubectl asks for them.
//!
//! ## Implementation caveats
//! - JSON only (no protobuf), no TLS, no authentication or authorization, no admission webhooks.
//! - Resources: namespaces, pods (+status, binding, eviction, log, exec, attach), nodes (+status), events,
//!   configmaps, secrets, serviceaccounts, coordination.k8s.io leases. No services, deployments
//!   or CRDs yet.
//! - Deletion propagation (ownerReferences, garbage collection) is not implemented: deletes are
//!   background deletes of the object itself.
//! - Server-side apply tracks field ownership in a simplified way (see apimachinery's docs).
//! - The OpenAPI v3 documents list paths and operations without schemas; `kubectl explain` has
//!   nothing to show.

pub mod defaults;
pub mod discovery;
pub mod error;
pub mod exec;
pub mod handlers;
pub mod logs;
pub mod metrics;
pub mod openapi;
pub mod patch;
pub mod pods;
pub mod printers;
pub mod serializer;
pub mod registry;
pub mod storage;
pub mod trace;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde_json::{Value, json};

pub use error::{Error, Result};
use registry::generic::store::Registry;
use registry::generic::strategy::Strategy;
use storage::store::Storage;
use storage::watch_cache::WatchCache;

/// Flags as kube-apiserver names them.
#[derive(Clone, Debug)]
pub struct Options {
    pub etcd_servers: Vec<String>,
    pub etcd_prefix: String,
    pub bind_address: String,
    pub port: u16,
    pub max_request_bytes: usize,
    pub event_ttl: Duration,
    /// Events kept in each watch cache for watchers that resume.
    pub watch_cache_size: usize,
    /// How often the store's history is compacted ([`storage::compact`]); zero never.
    pub etcd_compaction_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            etcd_servers: vec!["http://127.0.0.1:2379".into()],
            etcd_prefix: "/registry".into(),
            bind_address: "0.0.0.0".into(),
            port: 8080,
            max_request_bytes: 3 * 1024 * 1024,
            event_ttl: Duration::from_secs(3600),
            watch_cache_size: 10_000,
            etcd_compaction_interval: Duration::from_secs(300),
        }
    }
}

/// Namespaces that exist from the first start.
pub const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Namespaces that may not be deleted (kube-node-lease may, as in Kubernetes).
pub const UNDELETABLE_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The server's state shared by every request.
pub struct Api {
    registries: Vec<Arc<Registry>>,
    pub storage: Storage,
    pub metrics: metrics::Metrics,
    pub http: reqwest::Client,
    pub options: Options,
}

impl Api {
    pub fn registry(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Registry>> {
        self.registries.iter().find(|r| r.info().group == group && r.info().version == version && r.info().plural == plural).cloned()
    }

    pub fn registries(&self) -> impl Iterator<Item = &Arc<Registry>> {
        self.registries.iter()
    }

    fn core(&self, plural: &str) -> Arc<Registry> {
        self.registry("", "v1", plural).expect("core resource registered")
    }

    pub fn pods(&self) -> Arc<Registry> {
        self.core("pods")
    }

    pub fn nodes(&self) -> Arc<Registry> {
        self.core("nodes")
    }

    pub fn namespaces(&self) -> Arc<Registry> {
        self.core("namespaces")
    }

    /// Objects can only be created in a namespace that exists and is not terminating.
    pub async fn check_namespace_open(&self, ns: &str) -> Result<()> {
        let namespaces = self.namespaces();
        // The watch cache answers without a store round trip (as Kubernetes' namespace lister
        // does); a namespace it does not know yet may just have been created: ask the store.
        let namespace = match namespaces.cache.get(&namespaces.key(None, ns)) {
            Some(v) => v,
            None => Arc::new(namespaces.get(None, ns).await?),
        };
        if namespace.pointer("/metadata/deletionTimestamp").is_some() || namespace.pointer("/status/phase") == Some(&json!("Terminating")) {
            return Err(Error::Forbidden(format!("unable to create new content in namespace {ns} because it is being terminated")));
        }
        Ok(())
    }

    /// What follows a create: every new namespace gets its `default` service account.
    pub async fn after_create(&self, reg: &Registry, created: &Value) {
        if reg.info().kind == "Namespace" {
            let ns = registry::generic::store::name_of(created).to_string();
            self.ensure_default_service_account(&ns).await;
        }
    }

    async fn ensure_default_service_account(&self, ns: &str) {
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}});
        match self.core("serviceaccounts").create(Some(ns), sa).await {
            Ok(_) | Err(Error::AlreadyExists { .. }) => {}
            Err(e) => tracing::warn!(target: "apiserver", namespace = ns, error = %e, "could not create the default service account"),
        }
    }

    /// Records who wrote which fields (metadata.managedFields) for a non-apply write.
    pub fn record_managed_fields(&self, mut obj: Value, old: Option<&Value>, q: &std::collections::HashMap<String, String>, operation: &str) -> Value {
        if let Some(manager) = q.get("fieldManager").filter(|m| !m.is_empty()) {
            apimachinery::managedfields::update_managed_fields(old, &mut obj, manager, operation, &registry::generic::store::now_rfc3339());
        }
        obj
    }

    /// Creates the system namespaces and their service accounts (idempotent).
    pub async fn bootstrap(&self) -> Result<()> {
        for ns in SYSTEM_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            match self.namespaces().create(None, obj).await {
                Ok(_) | Err(Error::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
            self.ensure_default_service_account(ns).await;
        }
        Ok(())
    }
}

fn registries(storage: &Storage, opts: &Options) -> Vec<Arc<Registry>> {
    use registry::coordination::lease::strategy::LeaseStrategy;
    use registry::core::configmap::strategy::ConfigMapStrategy;
    use registry::core::event::strategy::EventStrategy;
    use registry::core::namespace::strategy::NamespaceStrategy;
    use registry::core::node::strategy::NodeStrategy;
    use registry::core::pod::strategy::PodStrategy;
    use registry::core::secret::strategy::SecretStrategy;
    use registry::core::serviceaccount::strategy::ServiceAccountStrategy;
    let strategies: Vec<Arc<dyn Strategy>> = vec![
        Arc::new(NamespaceStrategy),
        Arc::new(PodStrategy),
        Arc::new(NodeStrategy),
        Arc::new(EventStrategy { ttl_seconds: opts.event_ttl.as_secs() as i64 }),
        Arc::new(ConfigMapStrategy),
        Arc::new(SecretStrategy),
        Arc::new(ServiceAccountStrategy),
        Arc::new(LeaseStrategy),
    ];
    strategies
        .into_iter()
        .map(|strategy| {
            let prefix = format!("{}/{}/", opts.etcd_prefix.trim_end_matches('/'), strategy.info().storage_name);
            let cache = WatchCache::new(strategy.info().plural, prefix, opts.watch_cache_size, 1000);
            Arc::new(Registry { strategy, storage: storage.clone(), cache })
        })
        .collect()
}

/// Everything under `/api` and `/apis`: a GET of a root or of a group version is discovery,
/// the rest is a resource request. Matched here rather than by route patterns: actix-web matches
/// a pattern with a `{segment}` by regular expression, one pattern after another, for every
/// request, and this path is taken by every request a client makes.
async fn api_paths(req: HttpRequest, payload: web::Payload, api: web::Data<Api>) -> HttpResponse {
    if req.method() == actix_web::http::Method::GET {
        match req.path() {
            "/api" | "/api/" => return discovery::core(&req, &api),
            "/apis" | "/apis/" => return discovery::apis(&req, &api),
            path => {
                let mut segments = path.split('/').skip(1);
                let group_version = match (segments.next(), segments.next(), segments.next(), segments.next()) {
                    (Some("api"), Some(version), None, None) => Some(("", version)),
                    (Some("apis"), Some(group), Some(version), None) if !group.is_empty() => Some((group, version)),
                    _ => None,
                };
                if let Some((group, version)) = group_version.filter(|(_, v)| !v.is_empty()) {
                    return discovery::resources(&api, group, version).unwrap_or_else(|| status(Error::NoRoute));
                }
            }
        }
    }
    handlers::dispatch(req, payload, api).await
}

fn status(e: Error) -> HttpResponse {
    HttpResponse::build(actix_web::http::StatusCode::from_u16(e.code()).unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR)).json(e.to_status())
}

async fn openapi_index(api: web::Data<Api>) -> HttpResponse {
    HttpResponse::Ok().json(openapi::index(&api))
}

async fn openapi_doc(path: web::Path<String>, api: web::Data<Api>) -> HttpResponse {
    match openapi::document(&api, &path.into_inner()) {
        Some(doc) => HttpResponse::Ok().json(doc),
        None => status(Error::NoRoute),
    }
}

async fn healthz(api: web::Data<Api>) -> HttpResponse {
    match api.storage.current_revision().await {
        Ok(_) => HttpResponse::Ok().content_type("text/plain").body("ok"),
        Err(e) => HttpResponse::InternalServerError().content_type("text/plain").body(format!("[-]etcd failed: {e}\nhealthz check failed")),
    }
}

async fn livez() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain").body("ok")
}

async fn readyz(api: web::Data<Api>) -> HttpResponse {
    let caches_ready = api.registries().all(|r| r.cache.is_ready());
    match api.storage.current_revision().await {
        Ok(_) if caches_ready => HttpResponse::Ok().content_type("text/plain").body("ok"),
        Ok(_) => HttpResponse::InternalServerError().content_type("text/plain").body("[-]watch caches not ready\nreadyz check failed"),
        Err(e) => HttpResponse::InternalServerError().content_type("text/plain").body(format!("[-]etcd failed: {e}\nreadyz check failed")),
    }
}

async fn metrics_text(api: web::Data<Api>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(api.metrics.render())
}

async fn not_found() -> HttpResponse {
    status(Error::NoRoute)
}

/// Runs the API server until `shutdown` completes. Must run inside an actix system.
pub async fn run(opts: Options, shutdown: impl std::future::Future<Output = ()>) -> Result<()> {
    let storage = Storage::connect(&opts.etcd_servers, &opts.etcd_prefix).await.map_err(|e| Error::Internal(format!("cannot reach the store at {:?}: {e}", opts.etcd_servers)))?;
    let regs = registries(&storage, &opts);
    for r in &regs {
        actix_web::rt::spawn(r.cache.clone().run(storage.clone()));
    }
    if !opts.etcd_compaction_interval.is_zero() {
        actix_web::rt::spawn(storage::compact::run(storage.client(), opts.etcd_compaction_interval));
    }
    let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(3)).build().map_err(|e| Error::Internal(e.to_string()))?;
    let api = web::Data::new(Api { registries: regs, storage, metrics: metrics::Metrics::new(), http, options: opts.clone() });
    // The store may come up after us: keep trying to create the system namespaces.
    let boot = api.clone();
    actix_web::rt::spawn(async move {
        let mut backoff = Duration::from_millis(200);
        loop {
            match boot.bootstrap().await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(target: "apiserver", error = %e, "bootstrap of system namespaces failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(api.clone())
            // First: patterns are tried in order, and nearly every request is one of these.
            .service(web::scope("/api").default_service(web::route().to(api_paths)))
            .service(web::scope("/apis").default_service(web::route().to(api_paths)))
            .route("/version", web::get().to(|| async { HttpResponse::Ok().json(discovery::version()) }))
            .route("/version/", web::get().to(|| async { HttpResponse::Ok().json(discovery::version()) }))
            .route("/healthz", web::get().to(healthz))
            .route("/livez", web::get().to(livez))
            .route("/readyz", web::get().to(readyz))
            .route("/metrics", web::get().to(metrics_text))
            .route("/debug/trace/namespaces/{namespace}/pods/{name}", web::get().to(trace::serve))
            .route("/openapi/v3", web::get().to(openapi_index))
            .route("/openapi/v3/{path:.*}", web::get().to(openapi_doc))
            .default_service(web::route().to(not_found))
    })
    .bind((opts.bind_address.as_str(), opts.port))
    .map_err(|e| Error::Internal(format!("cannot listen on {}:{}: {e}", opts.bind_address, opts.port)))?
    .shutdown_timeout(2)
    .disable_signals()
    .run();
    let handle = server.handle();
    tracing::info!(target: "apiserver", address = %format!("{}:{}", opts.bind_address, opts.port), store = ?opts.etcd_servers, "API server serving");
    tokio::select! {
        r = server => r.map_err(|e| Error::Internal(e.to_string()))?,
        _ = shutdown => handle.stop(true).await,
    }
    Ok(())
}
