//! Mirrors CoreDNS's plugin/kubernetes/controller.go (dnsControl): one watch of v1 Services and
//! one of discovery.k8s.io/v1 EndpointSlices, cluster-wide, written into the [`Index`]. Pods
//! are not watched: `pods insecure` answers a pod name from the name alone.
//!
//! A watch that breaks lists again (kube's watcher, with its backoff); the relist replaces that
//! resource's whole part of the index, so what was deleted while the watch was down goes too.
//! Once both first lists are in, `synced` turns true (CoreDNS's HasSynced, which `/ready` waits for).

use std::fmt::Debug;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::discovery::v1 as discoveryv1;
use kube::Api;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;

use crate::index::{Index, SharedIndex};
use crate::object::endpoint::EndpointSlice;
use crate::object::service::Service;

const TARGET: &str = "dns::controller";

/// How one resource's objects go into the index.
struct Kind<K, T> {
    name: &'static str,
    convert: fn(&K) -> Option<T>,
    upsert: fn(&mut Index, T),
    delete: fn(&mut Index, &str, &str),
    replace: fn(&mut Index, Vec<T>),
}

/// Runs both watches until the task is dropped.
pub async fn run(client: kube::Client, index: SharedIndex, synced: tokio::sync::watch::Sender<bool>) {
    let services = Kind::<corev1::Service, Service> {
        name: "services",
        convert: Service::from_api,
        upsert: Index::upsert_service,
        delete: Index::delete_service,
        replace: Index::replace_services,
    };
    let slices = Kind::<discoveryv1::EndpointSlice, EndpointSlice> {
        name: "endpointslices",
        convert: EndpointSlice::from_api,
        upsert: Index::upsert_slice,
        delete: Index::delete_slice,
        replace: Index::replace_slices,
    };
    let (svc_synced, slice_synced) = (tokio::sync::Notify::new(), tokio::sync::Notify::new());
    let both = async {
        futures::join!(svc_synced.notified(), slice_synced.notified());
        tracing::info!(target: TARGET, "services and endpointslices listed; ready");
        let _ = synced.send(true);
        futures::future::pending::<()>().await
    };
    futures::join!(
        watch(Api::all(client.clone()), services, &index, &svc_synced),
        watch(Api::all(client), slices, &index, &slice_synced),
        both,
    );
}

async fn watch<K, T>(api: Api<K>, kind: Kind<K, T>, index: &SharedIndex, synced: &tokio::sync::Notify)
where
    K: kube::Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut stream = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
    let mut relist: Option<Vec<T>> = None;
    let key = |o: &K| (o.meta().namespace.clone().unwrap_or_default(), o.meta().name.clone().unwrap_or_default());
    let write = || index.write().unwrap_or_else(|e| e.into_inner());
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Init) => relist = Some(vec![]),
            Ok(watcher::Event::InitApply(o)) => relist.get_or_insert_default().extend((kind.convert)(&o)),
            Ok(watcher::Event::InitDone) => {
                let objects = relist.take().unwrap_or_default();
                tracing::debug!(target: TARGET, resource = kind.name, count = objects.len(), "listed");
                (kind.replace)(&mut write(), objects);
                synced.notify_one();
            }
            Ok(watcher::Event::Apply(o)) => match (kind.convert)(&o) {
                Some(t) => (kind.upsert)(&mut write(), t),
                // No longer of interest (a slice that lost its Service label): as deleted.
                None => {
                    let (ns, name) = key(&o);
                    (kind.delete)(&mut write(), &ns, &name);
                }
            },
            Ok(watcher::Event::Delete(o)) => {
                let (ns, name) = key(&o);
                (kind.delete)(&mut write(), &ns, &name);
            }
            Err(e) => tracing::warn!(target: TARGET, resource = kind.name, error = %e, "watch failed; retrying"),
        }
    }
}
