//! Mirrors pkg/controlplane/controller/kubernetesservice/controller.go and
//! pkg/controlplane/reconcilers/lease.go: every API server keeps the `default/kubernetes` Service
//! and its endpoints, the address pods reach the API at.
//!
//! Each `RECONCILE_INTERVAL`:
//! 1. The Service exists, ClusterIP at the first address of `--service-cluster-ip-range`,
//!    port 443 (`https`) aimed at the API servers' port; its ports are put back if changed.
//! 2. The server renews its master lease: the key `<prefix>/masterleases/<advertise address>`,
//!    on a store lease of `LEASE_TTL`, so a server that stops renewing drops out on its own.
//! 3. The addresses of all live leases become the Service's endpoints — the v1 Endpoints and
//!    the EndpointSlice `kubernetes` (the Service has no selector: no controller writes them).
//!
//! On shutdown the server deletes its own lease and reconciles once more, so a server stopped on
//! purpose leaves at once rather than after the TTL.

use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::Api;
use crate::error::{Error, Result};
use crate::registry::core::endpoints::strategy::ENDPOINTS;
use crate::registry::core::service::ipallocator::Cidr;
use crate::registry::core::service::strategy::SERVICES;
use crate::registry::discovery::endpointslice::strategy::ENDPOINTSLICES;

/// How often the Service and the endpoints are reconciled (`--endpoint-reconciler` interval).
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a master lease lives unless renewed (`DefaultEndpointReconcilerTTL`).
const LEASE_TTL: i64 = 15;
const NAME: &str = "kubernetes";
const NAMESPACE: &str = "default";

/// The address this server is reached at by pods: `--advertise-address`, else the bind address
/// when it names one interface that is not loopback.
pub fn advertised(api: &Api) -> Option<IpAddr> {
    api.options.advertise_address.or_else(|| api.options.service_endpoint().0.parse::<IpAddr>().ok().filter(|a| !a.is_unspecified() && !a.is_loopback()))
}

fn lease_prefix(api: &Api) -> String {
    format!("{}/masterleases/", api.options.etcd_prefix.trim_end_matches('/'))
}

/// Step 1.
async fn ensure_service(api: &Api) -> Result<()> {
    let range = Cidr::parse(&api.options.service_cluster_ip_range).map_err(Error::Internal)?;
    let ports = json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": api.options.service_endpoint().1}]);
    let services = api.registries.of(&SERVICES);
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": range.nth(1).to_string(), "sessionAffinity": "None", "ports": ports},
    });
    match services.get(Some(NAMESPACE), NAME).await {
        Err(Error::NotFound { .. }) => match services.create(Some(NAMESPACE), svc).await {
            Ok(_) | Err(Error::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        },
        Ok(current) if current.pointer("/spec/ports") != Some(&ports) => {
            services
                .guaranteed_update(Some(NAMESPACE), NAME, None, |cur| {
                    let mut new = cur.clone();
                    new["spec"]["ports"] = ports.clone();
                    Ok(new)
                })
                .await
                .map(|_| ())
        }
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Step 2.
async fn renew_lease(api: &Api, ip: IpAddr) -> Result<()> {
    let lease = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": ip.to_string()}, "subsets": [{"addresses": [{"ip": ip.to_string()}]}]});
    api.storage.put_with_ttl(&format!("{}{ip}", lease_prefix(api)), &lease, LEASE_TTL).await
}

/// The addresses of the live leases, sorted.
async fn live_servers(api: &Api) -> Result<Vec<String>> {
    let page = api.storage.list(&lease_prefix(api), 0, 1000, None).await?;
    let mut ips: Vec<String> = page.items.iter().filter_map(|s| s.key.strip_prefix(&lease_prefix(api)).map(str::to_string)).collect();
    ips.sort();
    Ok(ips)
}

/// Step 3.
async fn write_endpoints(api: &Api, ips: &[String]) -> Result<()> {
    let port = api.options.service_endpoint().1;
    let subsets = if ips.is_empty() {
        json!([])
    } else {
        json!([{"addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(), "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    };
    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}}, "subsets": subsets});
    upsert(api, &ENDPOINTS, endpoints, |cur, want| cur.get("subsets").filter(|s| !s.is_null()).unwrap_or(&json!([])) == want.get("subsets").unwrap_or(&json!([]))).await?;
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {"kubernetes.io/service-name": NAME}},
        "addressType": "IPv4",
        "endpoints": ips.iter().map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>(),
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    upsert(api, &ENDPOINTSLICES, slice, |cur, want| cur.get("endpoints").filter(|e| !e.is_null()).unwrap_or(&json!([])) == want.get("endpoints").unwrap_or(&json!([])) && cur.get("ports") == want.get("ports"))
        .await
}

/// Creates `want`, or replaces what is there when `same` says it differs.
async fn upsert(api: &Api, info: &crate::registry::generic::strategy::ResourceInfo, want: Value, same: impl Fn(&Value, &Value) -> bool) -> Result<()> {
    let registry = api.registries.of(info);
    match registry.get(Some(NAMESPACE), NAME).await {
        Err(Error::NotFound { .. }) => match registry.create(Some(NAMESPACE), want).await {
            Ok(_) | Err(Error::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        },
        Ok(cur) if same(&cur, &want) => Ok(()),
        Ok(_) => registry
            .guaranteed_update(Some(NAMESPACE), NAME, None, |cur| {
                let mut new = want.clone();
                new["metadata"] = cur["metadata"].clone();
                Ok(new)
            })
            .await
            .map(|_| ()),
        Err(e) => Err(e),
    }
}

/// Steps 1–3 once.
pub async fn reconcile(api: &Api) -> Result<()> {
    ensure_service(api).await?;
    if let Some(ip) = advertised(api) {
        renew_lease(api, ip).await?;
    }
    write_endpoints(api, &live_servers(api).await?).await
}

/// Runs the loop for ever (spawned by the server).
pub async fn run(api: actix_web::web::Data<Api>) {
    if advertised(&api).is_none() {
        tracing::warn!(
            target: "apiserver",
            bind = %api.options.service_endpoint().0,
            "no --advertise-address and the bind address is not one pods can reach: the default/kubernetes Service gets no endpoint for this server"
        );
    }
    loop {
        if let Err(e) = reconcile(&api).await {
            tracing::warn!(target: "apiserver", error = %e, "reconciling the default/kubernetes Service failed; retrying");
        }
        tokio::time::sleep(RECONCILE_INTERVAL).await;
    }
}

/// On shutdown: this server's lease goes, and the endpoints without it are written.
pub async fn remove_self(api: &Api) {
    let Some(ip) = advertised(api) else { return };
    let key = format!("{}{ip}", lease_prefix(api));
    let result = async {
        if let Some(stored) = api.storage.get(&key).await? {
            api.storage.delete(&key, stored.mod_revision).await?;
        }
        write_endpoints(api, &live_servers(api).await?).await
    }
    .await;
    if let Err(e) = result {
        tracing::warn!(target: "apiserver", error = %e, "could not remove this server from the default/kubernetes endpoints; its lease will expire");
    }
}
