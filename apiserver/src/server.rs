//! Mirrors pkg/controlplane/instance.go (the resources kube-apiserver serves, installed one by
//! one) and k8s.io/apiserver/pkg/server/genericapiserver.go (`PrepareRun` and `Run`: the HTTP
//! server, its routes, and the tasks that run beside it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix_service::{Service, ServiceFactory};
use actix_web::{App, HttpRequest, HttpResponse, web};
use serde_json::json;

pub mod encryptionconfig;
pub mod secure_serving;

use encryptionconfig::EncryptionConfig;
use secure_serving::{Conn, Tls};

use crate::admission::chain::Chain;
use crate::audit::Auditor;
use crate::audit::log::Backend;
use crate::audit::policy::Policy;
use crate::authentication::Authenticator;
use crate::authentication::request::x509::Verifier;
use crate::authentication::token::bootstrap::{self, BootstrapTokenAuthenticator};
use crate::authentication::token::tokenfile::TokenFile;
use crate::authentication::token::{TokenAuthenticator, Union as TokenUnion};
use crate::authorization::config::new_authorizer;
use crate::authorization::node::graph::PodSource;
use crate::authorization::node::listers::WatchCacheListers as NodeListers;
use crate::authorization::rbac::listers::WatchCacheListers;
use crate::authorization::rbac::rule::DefaultRuleResolver;
use crate::admission::namespace_lifecycle::NamespaceLifecycle;
use crate::admission::storage::setdefault::DefaultStorageClass;
use crate::admission::storage::storageobjectinuseprotection::StorageObjectInUseProtection;
use crate::admission::node_restriction::NodeRestriction;
use crate::admission::certificates::approval::CertificateApproval;
use crate::admission::certificates::signing::CertificateSigning;
use crate::admission::certificates::subjectrestriction::CertificateSubjectRestriction;
use crate::admission::{priority, service_account};
use crate::authorization::authorizer::Authorizer;
use crate::config::Api;
use crate::endpoints::metrics::Metrics;
use crate::endpoints::{discovery, openapi, status};
use crate::error::{Error, Result};
use crate::filters;
use crate::kubelet_client::KubeletClient;
use crate::options::Options;
use crate::storage::value::PrefixTransformers;
use crate::registry::apps::controllerrevision::strategy::ControllerRevisionStrategy;
use crate::registry::apps::daemonset::strategy::DAEMONSET_STRATEGY;
use crate::registry::apps::deployment::strategy::DEPLOYMENT_STRATEGY;
use crate::registry::apps::replicaset::strategy::REPLICASET_STRATEGY;
use crate::registry::apps::scale::SCALE;
use crate::registry::apps::statefulset::strategy::STATEFULSET_STRATEGY;
use crate::registry::batch::cronjob::strategy::CRONJOB_STRATEGY;
use crate::registry::batch::job::strategy::JobStrategy;
use crate::registry::certificates::certificatesigningrequest::strategy::CertificateSigningRequestStrategy;
use crate::registry::coordination::lease::strategy::LeaseStrategy;
use crate::controlplane::kubernetesservice;
use crate::registry::core::configmap::strategy::ConfigMapStrategy;
use crate::registry::core::endpoints::strategy::EndpointsStrategy;
use crate::registry::core::event::strategy::EventStrategy;
use crate::registry::core::namespace::strategy::{NAMESPACES, NamespaceStrategy};
use crate::registry::core::node::strategy::NodeStrategy;
use crate::registry::core::persistentvolume::strategy::{PERSISTENTVOLUMES, PersistentVolumeStrategy};
use crate::registry::core::persistentvolumeclaim::strategy::PersistentVolumeClaimStrategy;
use crate::registry::core::{pod, service};
use crate::registry::core::pod::strategy::PodStrategy;
use crate::registry::core::secret::strategy::SecretStrategy;
use crate::registry::core::service::alloc::Allocators;
use crate::registry::core::service::ipallocator::{Cidr, IpAllocator};
use crate::registry::core::service::portallocator::{PortAllocator, PortRange};
use crate::registry::core::service::repair;
use crate::registry::core::service::strategy::{SERVICES, ServiceStrategy};
use crate::registry::core::serviceaccount::strategy::ServiceAccountStrategy;
use crate::registry::discovery::endpointslice::strategy::EndpointSliceStrategy;
use crate::registry::generic::rest::{CreateOnly, Installed, Registries, SubresourceRest};
use crate::registry::generic::store::Registry;
use crate::registry::generic::strategy::Strategy;
use crate::registry::policy::poddisruptionbudget::strategy::PodDisruptionBudgetStrategy;
use crate::registry::rbac::clusterrole::strategy::{CLUSTERROLES, ClusterRoleStrategy};
use crate::registry::rbac::clusterrolebinding::strategy::{CLUSTERROLEBINDINGS, ClusterRoleBindingStrategy};
use crate::registry::rbac::reconciliation;
use crate::registry::rbac::role::strategy::{ROLES, RoleStrategy};
use crate::registry::rbac::rolebinding::strategy::{ROLEBINDINGS, RoleBindingStrategy};
use crate::registry::storage::csidriver::strategy::CSIDriverStrategy;
use crate::registry::storage::csinode::strategy::CSINodeStrategy;
use crate::registry::storage::storageclass::strategy::{STORAGECLASSES, StorageClassStrategy};
use crate::registry::storage::volumeattachment::strategy::{VOLUMEATTACHMENTS, VolumeAttachmentStrategy};
use crate::registry::core::pod::strategy::PODS;
use crate::registry::core::secret::strategy::SECRETS;
use crate::registry::core::serviceaccount::strategy::SERVICEACCOUNTS;
use crate::serviceaccount::jwt::{JwtTokenAuthenticator, PublicKey, TokenGenerator, TokenIssuer};
use crate::registry::core::secret::lister::WatchCacheSecretLister;
use crate::registry::core::serviceaccount::tokengetter::WatchCacheGetter;
use crate::storage::store::Storage;
use crate::storage::watch_cache::WatchCache;
use crate::storage::compact;

/// Namespaces that exist from the first start.
pub const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Events a watcher may fall behind before the watch cache cuts it off.
const WATCHER_QUEUE: usize = 1000;

/// One resource as the server registers it: its strategy, and the subresources its own code
/// serves (Kubernetes' `RESTStorageProvider` gives a group's storage by resource name).
pub struct Resource {
    strategy: Arc<dyn Strategy>,
    subresources: &'static [(&'static str, SubresourceRest)],
}

impl Resource {
    pub fn new(strategy: impl Strategy) -> Self {
        Self { strategy: Arc::new(strategy), subresources: &[] }
    }

    pub fn with_subresources(self, subresources: &'static [(&'static str, SubresourceRest)]) -> Self {
        Self { subresources, ..self }
    }
}

/// Every resource the server serves, one line each, in the order discovery lists them.
fn resources(opts: &Options, alloc: &Allocators) -> Vec<Resource> {
    vec![
        Resource::new(NamespaceStrategy),
        Resource::new(PodStrategy).with_subresources(pod::storage::SUBRESOURCES),
        Resource::new(NodeStrategy).with_subresources(NODE_SUBRESOURCES),
        Resource::new(EventStrategy { ttl_seconds: opts.event_ttl.as_secs() as i64 }),
        Resource::new(ConfigMapStrategy),
        Resource::new(SecretStrategy),
        Resource::new(ServiceAccountStrategy).with_subresources(crate::registry::core::serviceaccount::token::SUBRESOURCES),
        Resource::new(ServiceStrategy { alloc: alloc.clone() }).with_subresources(SERVICE_SUBRESOURCES),
        Resource::new(EndpointsStrategy),
        Resource::new(PersistentVolumeClaimStrategy),
        Resource::new(PersistentVolumeStrategy),
        Resource::new(LeaseStrategy),
        Resource::new(EndpointSliceStrategy),
        Resource::new(DEPLOYMENT_STRATEGY).with_subresources(SCALABLE),
        Resource::new(REPLICASET_STRATEGY).with_subresources(SCALABLE),
        Resource::new(STATEFULSET_STRATEGY).with_subresources(SCALABLE),
        Resource::new(DAEMONSET_STRATEGY),
        Resource::new(ControllerRevisionStrategy),
        Resource::new(JobStrategy),
        Resource::new(CRONJOB_STRATEGY),
        Resource::new(PodDisruptionBudgetStrategy),
        Resource::new(CertificateSigningRequestStrategy),
        Resource::new(ClusterRoleBindingStrategy),
        Resource::new(ClusterRoleStrategy),
        Resource::new(RoleBindingStrategy),
        Resource::new(RoleStrategy),
        Resource::new(CSIDriverStrategy),
        Resource::new(CSINodeStrategy),
        Resource::new(StorageClassStrategy),
        Resource::new(VolumeAttachmentStrategy),
    ]
}

/// Every resource without a store that only takes creates: the reviews, in discovery's order.
fn create_only_resources() -> Vec<CreateOnly> {
    use crate::registry::authentication::{selfsubjectreview, tokenreview};
    use crate::registry::authorization::{localsubjectaccessreview, selfsubjectaccessreview, selfsubjectrulesreview, subjectaccessreview};
    vec![
        CreateOnly { info: &selfsubjectreview::SELFSUBJECTREVIEWS, create: selfsubjectreview::create },
        CreateOnly { info: &selfsubjectreview::SELFSUBJECTREVIEWS_V1BETA1, create: selfsubjectreview::create },
        CreateOnly { info: &tokenreview::TOKENREVIEWS, create: tokenreview::create },
        CreateOnly { info: &localsubjectaccessreview::LOCALSUBJECTACCESSREVIEWS, create: localsubjectaccessreview::create },
        CreateOnly { info: &selfsubjectaccessreview::SELFSUBJECTACCESSREVIEWS, create: selfsubjectaccessreview::create },
        CreateOnly { info: &selfsubjectrulesreview::SELFSUBJECTRULESREVIEWS, create: selfsubjectrulesreview::create },
        CreateOnly { info: &subjectaccessreview::SUBJECTACCESSREVIEWS, create: subjectaccessreview::create },
    ]
}

/// The pools Services take from, over the ranges the flags give (a bad range stops the server
/// at start, naming the flag).
fn allocators(opts: &Options) -> Result<Allocators> {
    let ips = Cidr::parse(&opts.service_cluster_ip_range).map_err(|e| Error::Internal(format!("--service-cluster-ip-range: {e}")))?;
    let ports = PortRange::parse(&opts.service_node_port_range).map_err(|e| Error::Internal(format!("--service-node-port-range: {e}")))?;
    Ok(Allocators { ips: IpAllocator::new(ips, &opts.etcd_prefix), ports: PortAllocator::new(ports, &opts.etcd_prefix) })
}

/// The subresources of nodes and Services their own code serves: `proxy`.
const NODE_SUBRESOURCES: &[(&str, SubresourceRest)] = &[("proxy", SubresourceRest::Connect(crate::registry::core::node::proxy::connect))];
const SERVICE_SUBRESOURCES: &[(&str, SubresourceRest)] =
    &[("proxy", SubresourceRest::Connect(crate::registry::core::service::proxy::connect))];

/// The subresource a scalable workload's own code serves: `scale`.
const SCALABLE: &[(&str, SubresourceRest)] = &[("scale", SubresourceRest::View(SCALE))];

/// Each resource's generic store, over the store and a watch cache of its own.
fn install(resources: Vec<Resource>, storage: &Storage, opts: &Options) -> Vec<Installed> {
    resources
        .into_iter()
        .map(|Resource { strategy, subresources }| {
            let prefix = format!("{}/{}/", opts.etcd_prefix.trim_end_matches('/'), strategy.info().storage_name);
            let cache = WatchCache::new(strategy.info().plural, prefix, opts.watch_cache_size, WATCHER_QUEUE);
            Installed { registry: Arc::new(Registry { strategy, storage: storage.clone(), cache }), subresources }
        })
        .collect()
}

/// The admission chain, in kube-apiserver's plugin order.
/// The certificate plugins ask `authorizer` who may approve and sign.
fn admission(
    namespaces: Arc<Registry>,
    service_accounts: Arc<Registry>,
    pods: Arc<Registry>,
    storage_classes: Arc<Registry>,
    issues_tokens: bool,
    authorizer: Arc<dyn Authorizer>,
    opts: &Options,
) -> Chain {
    Chain::new(
        vec![
            Box::new(NamespaceLifecycle::new(namespaces)),
            Box::new(service_account::ServiceAccount::new(Box::new(service_accounts), issues_tokens)),
            Box::new(NodeRestriction::new(Box::new(pods))),
            Box::new(priority::PLUGIN),
            Box::new(opts.default_toleration_seconds),
            Box::new(DefaultStorageClass::new(Box::new(storage_classes))),
            Box::new(StorageObjectInUseProtection),
            Box::new(CertificateApproval::new(authorizer.clone())),
            Box::new(CertificateSigning::new(authorizer)),
        ],
        vec![Box::new(CertificateSubjectRestriction)],
    )
}

/// Creates the system namespaces and their service accounts (idempotent).
async fn bootstrap(api: &Api) -> Result<()> {
    let namespaces = api.registries.of(&NAMESPACES);
    for ns in SYSTEM_NAMESPACES {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match namespaces.create(None, obj.clone()).await {
            Ok(_) | Err(Error::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
        // What comes with a new namespace, also for one that was there already.
        api.after_create(&namespaces, &obj).await;
    }
    Ok(())
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
    let caches_ready = api.registries.iter().all(|r| r.cache.is_ready());
    if !api.rbac_bootstrapped.load(std::sync::atomic::Ordering::Acquire) {
        return HttpResponse::InternalServerError().content_type("text/plain").body("[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed");
    }
    match api.storage.current_revision().await {
        Ok(_) if caches_ready => HttpResponse::Ok().content_type("text/plain").body("ok"),
        Ok(_) => HttpResponse::InternalServerError().content_type("text/plain").body("[-]watch caches not ready\nreadyz check failed"),
        Err(e) => HttpResponse::InternalServerError().content_type("text/plain").body(format!("[-]etcd failed: {e}\nreadyz check failed")),
    }
}

async fn metrics_text(metrics: web::Data<Metrics>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(metrics.render())
}

async fn debug_trace(req: HttpRequest, path: web::Path<(String, String)>, api: web::Data<Api>) -> HttpResponse {
    let (namespace, name) = path.into_inner();
    pod::trace::serve(&req, &api.registries, &api.kubelet.http, &namespace, &name).await
}

async fn debug_trace_service(req: HttpRequest, path: web::Path<(String, String)>, api: web::Data<Api>) -> HttpResponse {
    let (namespace, name) = path.into_inner();
    service::trace::serve(&req, &api.registries, &api.http, api.options.proxy_healthz_port, &namespace, &name).await
}

async fn not_found() -> HttpResponse {
    status(Error::NoRoute)
}

/// The RBAC authorizer's view of the roles and bindings: their watch caches.
fn rbac_listers(registries: &Registries) -> WatchCacheListers {
    WatchCacheListers {
        roles: registries.of(&ROLES),
        role_bindings: registries.of(&ROLEBINDINGS),
        cluster_roles: registries.of(&CLUSTERROLES),
        cluster_role_bindings: registries.of(&CLUSTERROLEBINDINGS),
    }
}

/// The issuer of service account tokens, from `--service-account-signing-key-file` and the
/// first `--service-account-issuer`.
fn token_issuer(opts: &Options) -> std::result::Result<Option<TokenIssuer>, String> {
    let Some(key) = &opts.service_account_signing_key_file else { return Ok(None) };
    let issuer = opts.service_account_issuer.first().ok_or("--service-account-signing-key-file needs --service-account-issuer")?;
    let generator = TokenGenerator::from_file(key, issuer)?;
    let audiences = if opts.api_audiences.is_empty() { opts.service_account_issuer.clone() } else { opts.api_audiences.clone() };
    Ok(Some(TokenIssuer { generator, audiences, max_expiration_seconds: opts.service_account_max_token_expiration.as_secs() as i64 }))
}

/// What authenticates requests beyond their connection: `--token-auth-file`, bootstrap tokens
/// (`--enable-bootstrap-token-auth`), service account tokens of `--service-account-issuer`
/// (verified with `--service-account-key-file`, else the signing key), and anonymous requests.
fn authenticator(opts: &Options, registries: &Registries, issuer: Option<&TokenIssuer>) -> std::result::Result<Authenticator, String> {
    let mut tokens: Vec<Box<dyn TokenAuthenticator>> = Vec::new();
    if let Some(file) = &opts.token_auth_file {
        tokens.push(Box::new(TokenFile::from_file(file)?));
    }
    if opts.enable_bootstrap_token_auth {
        let lister = WatchCacheSecretLister { secrets: registries.of(&SECRETS), namespace: bootstrap::NAMESPACE.into() };
        tokens.push(Box::new(BootstrapTokenAuthenticator { lister: Box::new(lister) }));
    }
    if !opts.service_account_issuer.is_empty() {
        let mut keys = Vec::new();
        for file in &opts.service_account_key_file {
            keys.extend(PublicKey::from_file(file)?);
        }
        if keys.is_empty() {
            keys.push(issuer.ok_or("--service-account-issuer needs --service-account-key-file or --service-account-signing-key-file")?.generator.public_key());
        }
        let getter = WatchCacheGetter { service_accounts: registries.of(&SERVICEACCOUNTS), pods: registries.of(&PODS), secrets: registries.of(&SECRETS) };
        tokens.push(Box::new(JwtTokenAuthenticator { issuers: opts.service_account_issuer.clone(), keys, getter: Box::new(getter) }));
    }
    let audiences = if opts.api_audiences.is_empty() { opts.service_account_issuer.clone() } else { opts.api_audiences.clone() };
    Ok(Authenticator { tokens: TokenUnion(tokens), audiences, anonymous: opts.anonymous_auth })
}

/// The audit policy and log, from `--audit-policy-file` and `--audit-log-path` (a policy
/// without a log path writes nowhere, as kube-apiserver's does).
fn auditor(opts: &Options) -> std::result::Result<Option<Auditor>, String> {
    let (Some(policy), Some(path)) = (&opts.audit_policy_file, &opts.audit_log_path) else { return Ok(None) };
    Ok(Some(Auditor { policy: Policy::from_file(policy)?, backend: Backend::open(path)? }))
}

/// Each installed resource's transformers from `--encryption-provider-config`, by its key
/// segment in the store (none without the flag: every value is stored as it is).
fn transformers(opts: &Options, resources: &[Resource]) -> std::result::Result<HashMap<String, Arc<PrefixTransformers>>, String> {
    let Some(path) = &opts.encryption_provider_config else { return Ok(HashMap::new()) };
    let config = EncryptionConfig::from_file(path)?;
    let mut transformers = HashMap::new();
    for r in resources {
        let info = r.strategy.info();
        if let Some(t) = config.transformer_for(info.group, info.plural) {
            tracing::info!(target: "apiserver::storage", group = info.group, resource = info.plural, "values encrypted at rest");
            transformers.insert(info.storage_name.to_string(), t);
        }
    }
    Ok(transformers)
}

/// The secure port's TLS, from the flags.
fn tls(opts: &Options) -> Result<Tls> {
    let (Some(cert), Some(key)) = (&opts.tls_cert_file, &opts.tls_private_key_file) else {
        return Err(Error::Internal("--secure-port needs --tls-cert-file and --tls-private-key-file (or --secure-port=0)".into()));
    };
    let client_ca = opts.client_ca_file.as_deref().map(Verifier::from_ca_file).transpose().map_err(Error::Internal)?;
    Tls::new(cert, key, client_ca).map_err(Error::Internal)
}

/// Runs the API server until `shutdown` completes. Must run inside an actix system.
pub async fn run(opts: Options, shutdown: impl Future<Output = ()>) -> Result<()> {
    let alloc = allocators(&opts)?;
    let resources = resources(&opts, &alloc);
    let transformers = transformers(&opts, &resources).map_err(Error::Internal)?;
    let storage = Storage::connect(&opts.etcd_servers, &opts.etcd_prefix, &opts.etcd_transport)
        .await
        .map_err(|e| Error::Internal(format!("cannot reach the store at {:?}: {e}", opts.etcd_servers)))?;
    let storage = storage.with_transformers(transformers);
    let installed = install(resources, &storage, &opts);
    for r in &installed {
        actix_web::rt::spawn(r.registry.cache.clone().run(storage.clone()));
    }
    if !opts.etcd_compaction_interval.is_zero() {
        actix_web::rt::spawn(compact::run(storage.client(), opts.etcd_compaction_interval));
    }
    let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(3)).build().map_err(|e| Error::Internal(e.to_string()))?;
    let registries = Registries { stored: installed, create_only: create_only_resources() };
    let node_listers = || {
        let listers = NodeListers { pods: registries.of(&PODS), volumes: registries.of(&PERSISTENTVOLUMES), attachments: registries.of(&VOLUMEATTACHMENTS) };
        Box::new(listers) as Box<dyn PodSource>
    };
    let authorizer: Arc<dyn Authorizer> =
        new_authorizer(&opts.authorization_mode, || Box::new(rbac_listers(&registries)), node_listers).map_err(Error::Internal)?.into();
    let rule_resolver = DefaultRuleResolver { source: Box::new(rbac_listers(&registries)) };
    let token_issuer = token_issuer(&opts).map_err(Error::Internal)?;
    let (namespaces, service_accounts, pods) = (registries.of(&NAMESPACES), registries.of(&SERVICEACCOUNTS), registries.of(&PODS));
    let admission = admission(namespaces, service_accounts, pods, registries.of(&STORAGECLASSES), token_issuer.is_some(), authorizer.clone(), &opts);
    let authenticator = authenticator(&opts, &registries, token_issuer.as_ref()).map_err(Error::Internal)?;
    let auditor = auditor(&opts).map_err(Error::Internal)?;
    let kubelet = KubeletClient::new(&opts).map_err(Error::Internal)?;
    let api = web::Data::new(Api { registries, storage, http, kubelet, options: opts.clone(), admission, authorizer, rule_resolver, authenticator, token_issuer, auditor, rbac_bootstrapped: Default::default() });
    let metrics = web::Data::new(Metrics::new());
    // The store may come up after us: keep trying to create the system namespaces; then keep the
    // default/kubernetes Service and the pools of Service allocations right.
    let boot = api.clone();
    actix_web::rt::spawn(async move {
        let mut backoff = Duration::from_millis(200);
        loop {
            match bootstrap(&boot).await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(target: "apiserver", error = %e, "bootstrap of system namespaces failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
        // The default RBAC policy (the rbac/bootstrap-roles hook), into the system namespaces.
        let rbac = boot.clone();
        actix_web::rt::spawn(async move {
            reconciliation::run(&rbac.registries).await;
            // Ready once the authorizer's watch caches hold what was written (readyz's
            // poststarthook/rbac/bootstrap-roles), so that no request right after start is
            // refused for want of the default policy.
            for info in [&ROLES, &ROLEBINDINGS, &CLUSTERROLES, &CLUSTERROLEBINDINGS] {
                // The newest write of the resource: its cache has every object once past it (the
                // store's current revision would do only where the cache may ask the store for
                // progress, which etcd before 3.4.31 cannot be trusted with).
                let registry = rbac.registries.of(info);
                let newest = loop {
                    match rbac.storage.list_for_cache(&registry.prefix(None)).await {
                        Ok(list) => break list.items.iter().map(|s| s.mod_revision).max().unwrap_or(0),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                };
                // Bounded waits; again until caught up.
                while registry.cache.wait_until(newest).await.is_err() {}
            }
            rbac.rbac_bootstrapped.store(true, std::sync::atomic::Ordering::Release);
        });
        let services_prefix = boot.registries.of(&SERVICES).prefix(None);
        actix_web::rt::spawn(repair::run(boot.storage.clone(), alloc, services_prefix));
        kubernetesservice::run(boot).await;
    });
    let leaving = api.clone();
    let api_for_spdy = api.clone();
    // The App, built once per worker. actix-web's HttpServer would do the wiring below itself;
    // it is spelled out so that a new connection can be looked at first: its TLS and client
    // certificate, and kubectl's SPDY port-forward (which actix-web cannot hand over), taken off
    // here; everything else is actix-web's (see registry::core::pod::portforward).
    let app = move || {
        App::new()
            .app_data(api.clone())
            .app_data(metrics.clone())
            .wrap(actix_web::middleware::from_fn(filters::non_resource))
            // First: patterns are tried in order, and nearly every request is one of these.
            .service(web::scope("/api").default_service(web::route().to(filters::handle)))
            .service(web::scope("/apis").default_service(web::route().to(filters::handle)))
            .route("/version", web::get().to(|| async { HttpResponse::Ok().json(discovery::version()) }))
            .route("/version/", web::get().to(|| async { HttpResponse::Ok().json(discovery::version()) }))
            .route("/healthz", web::get().to(healthz))
            .route("/livez", web::get().to(livez))
            .route("/readyz", web::get().to(readyz))
            .route("/metrics", web::get().to(metrics_text))
            .route("/debug/trace/namespaces/{namespace}/pods/{name}", web::get().to(debug_trace))
            .route("/debug/trace/namespaces/{namespace}/services/{name}", web::get().to(debug_trace_service))
            .route("/openapi/v2", web::get().to(crate::endpoints::openapi_v2::serve))
            .route("/openapi/v3", web::get().to(openapi_index))
            .route("/openapi/v3/{path:.*}", web::get().to(openapi_doc))
            .default_service(web::route().to(not_found))
    };
    // The listeners (server/secure_serving.rs): the secure port, and the insecure one if asked.
    let mut listeners = Vec::new();
    if opts.secure_port != 0 {
        listeners.push(("secure", opts.bind_address.clone(), opts.secure_port, Some(tls(&opts)?)));
    }
    if opts.insecure_port != 0 {
        listeners.push(("insecure", opts.insecure_bind_address.clone(), opts.insecure_port, None));
    }
    if listeners.is_empty() {
        return Err(Error::Internal("--secure-port and --insecure-port are both 0: nothing to serve on".into()));
    }
    let mut builder = actix_server::Server::build();
    for (name, address, port, tls) in &listeners {
        let (app, api, tls) = (app.clone(), api_for_spdy.clone(), tls.clone());
        builder = builder
            .bind(*name, (address.as_str(), *port), move || {
                let http = actix_http::HttpService::build()
                    .on_connect_ext(|conn: &Conn, data: &mut actix_http::Extensions| {
                        data.insert(conn.connection.clone());
                    })
                    .finish(actix_service::map_config(app(), |_: ()| actix_web::dev::AppConfig::default()));
                let (api, tls) = (api.clone(), tls.clone());
                actix_service::fn_factory(move || {
                    let http = http.new_service(());
                    let (api, tls) = (api.clone(), tls.clone());
                    async move {
                        let http = std::rc::Rc::new(http.await.map_err(|_| ())?);
                        Ok::<_, ()>(actix_service::fn_service(move |tcp: actix_rt::net::TcpStream| {
                            let (http, api, tls) = (http.clone(), api.clone(), tls.clone());
                            async move {
                                let peer = tcp.peer_addr().ok();
                                let mut conn = match Conn::accept(tcp, tls.as_ref()).await {
                                    Ok(conn) => conn,
                                    Err(e) => {
                                        tracing::debug!(target: "apiserver", ?peer, error = %e, "connection refused before HTTP");
                                        return Ok(());
                                    }
                                };
                                if let Some((namespace, name)) = pod::portforward::spdy_target(conn.request_line().await) {
                                    let connection = conn.connection.clone();
                                    pod::portforward::serve_spdy(conn, &connection, api, namespace, name).await;
                                    return Ok(());
                                }
                                http.call((conn, actix_http::Protocol::Http1, peer)).await.map_err(|_| ())
                            }
                        }))
                    }
                })
            })
            .map_err(|e| Error::Internal(format!("cannot listen on {address}:{port} ({name} port): {e}")))?;
    }
    let server = builder.shutdown_timeout(2).disable_signals().run();
    let handle = server.handle();
    for (name, address, port, _) in &listeners {
        tracing::info!(target: "apiserver", port = name, address = %format!("{address}:{port}"), store = ?opts.etcd_servers, "API server serving");
    }
    tokio::select! {
        r = server => r.map_err(|e| Error::Internal(e.to_string()))?,
        _ = shutdown => {
            kubernetesservice::remove_self(&leaving).await;
            handle.stop(true).await
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_is_registered_once_with_a_printer_that_names_it() {
        let opts = Options::default();
        let resources = resources(&opts, &allocators(&opts).unwrap());
        let mut seen = std::collections::BTreeSet::new();
        for r in &resources {
            let info = r.strategy.info();
            assert!(seen.insert((info.group, info.plural)), "{} registered twice", info.plural);
            let columns = info.printer.columns();
            // printers.go declares VolumeAttachment's ATTACHER with the `name` format too; kubectl
            // decorates only the first such column (`--show-kind`), which is NAME.
            let name_columns = if info.kind == "VolumeAttachment" { 2 } else { 1 };
            assert_eq!(columns.iter().filter(|c| c.format == "name").count(), name_columns, "{}: one name column", info.kind);
            assert_eq!(columns.iter().find(|c| c.format == "name").map(|c| c.name), Some("Name"), "{}: NAME is the first name column", info.kind);
            let row = info.printer.row(&json!({"metadata": {"name": "x"}}), chrono::Utc::now());
            assert_eq!(row.len(), columns.len(), "{}: a cell per column", info.kind);
            for (name, _) in r.subresources {
                assert!(info.subresources.iter().any(|s| s.name == *name), "{}/{name} is served but not in discovery", info.plural);
            }
        }
        assert_eq!(seen.len(), 30);
    }
}
