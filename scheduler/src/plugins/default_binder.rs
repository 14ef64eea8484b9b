//! Mirrors kube-scheduler's plugins/defaultbinder: binds by creating the pod's `binding`
//! subresource (`POST /api/v1/namespaces/<ns>/pods/<name>/binding`), which sets `spec.nodeName`
//! in the API server — the only write that puts a pod on a node.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use crate::framework::{BindPlugin, Plugin, PodInfo, Status};

pub const NAME: &str = "DefaultBinder";

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
