//! Mirrors kube-proxy's pkg/proxy/config/config.go: the Service and EndpointSlice watches, and
//! the handler interfaces they report to (the proxier implements both).
//!
//! Each watch is kube's `watcher`: a list, then a watch from its resourceVersion; when the watch
//! expires (410 Gone) or breaks, it lists again after a backoff. A list is handed over whole
//! ([`ServiceHandler::on_services_listed`]), so that whatever was deleted while the watch was
//! down disappears with it; the first one also marks the handler synced.

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

/// kube-proxy's `ServiceHandler` (OnServiceAdd/Update/Delete/Synced).
pub trait ServiceHandler: Send + Sync {
    fn on_service_update(&self, svc: Service);
    fn on_service_delete(&self, svc: &Service);
    /// A complete list: everything there is, replacing what was known.
    fn on_services_listed(&self, all: Vec<Service>);
}

/// kube-proxy's `EndpointSliceHandler`.
pub trait EndpointSliceHandler: Send + Sync {
    fn on_endpoint_slice_update(&self, slice: EndpointSlice);
    fn on_endpoint_slice_delete(&self, slice: &EndpointSlice);
    fn on_endpoint_slices_listed(&self, all: Vec<EndpointSlice>);
}

/// Watches Services in every namespace until the stream ends (it does not: the watcher retries).
pub async fn watch_services<H: ServiceHandler + ?Sized>(client: kube::Client, handler: Arc<H>) {
    let api: Api<Service> = Api::all(client);
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut listing = Vec::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(s)) => listing.push(s),
            Ok(watcher::Event::InitDone) => handler.on_services_listed(std::mem::take(&mut listing)),
            Ok(watcher::Event::Apply(s)) => handler.on_service_update(s),
            Ok(watcher::Event::Delete(s)) => handler.on_service_delete(&s),
            Err(e) => tracing::warn!(target: "proxy::config", error = %e, "service watch"),
        }
    }
}

/// Watches discovery.k8s.io/v1 EndpointSlices in every namespace.
pub async fn watch_endpoint_slices<H: EndpointSliceHandler + ?Sized>(client: kube::Client, handler: Arc<H>) {
    let api: Api<EndpointSlice> = Api::all(client);
    let mut stream = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut listing = Vec::new();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(s)) => listing.push(s),
            Ok(watcher::Event::InitDone) => handler.on_endpoint_slices_listed(std::mem::take(&mut listing)),
            Ok(watcher::Event::Apply(s)) => handler.on_endpoint_slice_update(s),
            Ok(watcher::Event::Delete(s)) => handler.on_endpoint_slice_delete(&s),
            Err(e) => tracing::warn!(target: "proxy::config", error = %e, "endpointslice watch"),
        }
    }
}
