//! Mirrors kube-scheduler's plugins/defaultbinder: binds by creating the pod's `binding`
//! subresource (`POST /api/v1/namespaces/<ns>/pods/<name>/binding`), which sets `spec.nodeName`
//! in the API server — the only write that puts a pod on a node.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::framework::{BindPlugin, Plugin, PodInfo, Status};

/// The annotation (the API server's `trace::SCHEDULER_ENDPOINT_ANNOTATION`).
pub const SCHEDULER_ENDPOINT_ANNOTATION: &str = "kubelab.io/scheduler-debug-endpoint";

pub const NAME: &str = "DefaultBinder";

/// Where this scheduler serves its steps for `kubelab trace`. Each binding carries it as an
/// annotation, which the API server copies onto the pod, so the trace gatherer finds the
/// scheduler that placed a pod even when several run (one leads at a time).
static DEBUG_ENDPOINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the endpoint from the address the scheduler's HTTP server listens on; a wildcard address
/// is replaced by the host's name, which its peers resolve (the lab's Docker network does).
pub fn set_debug_endpoint(addr: std::net::SocketAddr) {
    let host = if addr.ip().is_unspecified() {
        client::hostname()
    } else if addr.is_ipv6() {
        format!("[{}]", addr.ip())
    } else {
        addr.ip().to_string()
    };
    let _ = DEBUG_ENDPOINT.set(format!("http://{host}:{}", addr.port()));
}

pub struct DefaultBinder {
    client: kube::Client,
}

impl DefaultBinder {
    pub fn new(client: kube::Client) -> DefaultBinder {
        DefaultBinder { client }
    }
}

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl BindPlugin for DefaultBinder {
    fn bind<'a>(&'a self, pod: &'a PodInfo, node: &'a str) -> BoxFuture<'a, Status> {
        Box::pin(async move {
            let binding = Binding {
                metadata: ObjectMeta {
                    name: Some(pod.name().to_string()),
                    namespace: Some(pod.namespace().to_string()),
                    uid: pod.pod.metadata.uid.clone(),
                    annotations: DEBUG_ENDPOINT
                        .get()
                        .map(|ep| [(SCHEDULER_ENDPOINT_ANNOTATION.to_string(), ep.clone())].into_iter().collect()),
                    ..Default::default()
                },
                target: ObjectReference { kind: Some("Node".into()), name: Some(node.to_string()), ..Default::default() },
            };
            let api: Api<Pod> = Api::namespaced(self.client.clone(), pod.namespace());
            match api.create_subresource::<_, serde_json::Value>("binding", pod.name(), &PostParams::default(), &binding).await {
                Ok(_) => Status::success(),
                Err(e) => Status::error(format!("binding rejected: {e}")),
            }
        })
    }
}
