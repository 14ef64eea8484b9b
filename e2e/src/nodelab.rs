//! One node's worth of cluster for the node agent's end-to-end tests: a store and an API server
//! (with a scheduler or a controller manager when a test needs them), a private containerd and a
//! `kubelab nodeagent`, a kube client, and the waits every such test does. Each test file wraps
//! it in its own `Lab` ([`node_lab!`](crate::node_lab)) to add what only it needs.

use std::future::Future;
use std::time::Duration;

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;

use crate::apiserver::{ApiCluster, ApiOptions};
use crate::nodeagent::{NodeAgent, NodeAgentOptions};

/// How long a pod gets to run on an idle node (the CRI floor is ~0.3 s; CI machines are busy).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the waits and holds look.
const POLL: Duration = Duration::from_millis(200);

/// The busybox image `make images` builds.
pub const BUSYBOX: &str = "docker.io/library/busybox:1.36";

/// The control-plane components a lab runs besides the store and the API server.
#[derive(Clone, Copy, Debug, Default)]
pub struct Components {
    pub scheduler: bool,
    pub controller_manager: bool,
    /// The API server also serves HTTPS with a PKI of its own ([`ApiOptions::secure`]), for
    /// clients that connect as users do (the components stay on the insecure port).
    pub secure: bool,
}

/// Fields drop in order: the agent (and its containerd, whose directory lives in the API
/// cluster's) before the API cluster.
pub struct NodeLab {
    pub agent: NodeAgent,
    pub api: ApiCluster,
    pub client: kube::Client,
    pub node: String,
}

impl NodeLab {
    /// Starts everything and waits for the node to turn Ready. `octet` is the third octet of the
    /// node's pod CIDR, unique per test so that concurrent tests never share a bridge.
    pub async fn start(node: &str, octet: u8, with: Components) -> NodeLab {
        if let Err(e) = crate::containerd::prerequisites() {
            panic!("the node agent tests need: {e}");
        }
        let mut api = ApiCluster::start(ApiOptions { controller_manager: with.controller_manager, secure: with.secure, ..ApiOptions::default() }).await.expect("store + API server");
        if with.scheduler {
            api.start_scheduler(&[]).expect("scheduler");
        }
        let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: node, pod_cidr_octet: octet, extra: vec![] })
            .await
            .expect("node agent");
        let client = api.kube_client().expect("client");
        let lab = NodeLab { agent, api, client, node: node.to_string() };
        lab.wait_node_ready().await;
        lab
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Panics with `msg`, the API server's log tail and the agent's.
    pub fn fail(&self, msg: &str) -> ! {
        self.api.fail(&format!("{msg}\n{}", self.agent.log_tail(120)))
    }

    /// [`crate::poll_until`] `check` (an `Err` says what was seen instead); on timeout the test
    /// fails with what was last seen and the logs.
    pub async fn wait_until<T, F, Fut>(&self, what: &str, timeout: Duration, check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        let polled = crate::poll_until(what, timeout, POLL, check).await;
        polled.unwrap_or_else(|e| self.fail(&format!("{e:#}")))
    }

    /// [`crate::hold_for`] `check` over `period`; the test fails at the first check that does not
    /// hold, with the logs.
    pub async fn hold_for<F, Fut>(&self, what: &str, period: Duration, check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        if let Err(e) = crate::hold_for(what, period, POLL, check).await {
            self.fail(&format!("{e:#}"));
        }
    }

    pub async fn wait_node_ready(&self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let what = format!("node {} Ready", self.node);
        self.wait_until(&what, RUN_TIMEOUT, || async {
            let n = nodes.get_opt(&self.node).await?.ok_or_else(|| anyhow::anyhow!("not registered"))?;
            let conditions = n.status.and_then(|s| s.conditions).unwrap_or_default();
            let ready = conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
            anyhow::ensure!(ready, "conditions {:?}", conditions.iter().map(|c| (&c.type_, &c.status)).collect::<Vec<_>>());
            Ok(Some(()))
        })
        .await
    }

    /// Polls pod `name` until `pred` holds; returns it.
    pub async fn wait_pod(&self, name: &str, what: &str, timeout: Duration, pred: impl Fn(&Pod) -> bool) -> Pod {
        let pods = self.pods();
        let what = format!("pod {name}: {what}");
        self.wait_until(&what, timeout, || async {
            let p = pods.get_opt(name).await?.ok_or_else(|| anyhow::anyhow!("no such pod"))?;
            if pred(&p) {
                return Ok(Some(p));
            }
            anyhow::bail!("last status:\n{}", serde_json::to_string_pretty(&p.status).unwrap_or_default())
        })
        .await
    }

    pub async fn wait_running(&self, name: &str) -> Pod {
        self.wait_pod(name, "Running", RUN_TIMEOUT, |p| phase(p) == "Running").await
    }

    /// The containers the runtime has for pod `uid` (every instance, running or not), read from
    /// containerd itself rather than from the pod's status.
    pub async fn runtime_containers(&self, uid: &str) -> anyhow::Result<Vec<cri::Container>> {
        let rt = self.agent.containerd().runtime().await?;
        let filter = cri::ContainerFilter { label_selector: [("io.kubernetes.pod.uid".to_string(), uid.to_string())].into(), ..Default::default() };
        Ok(rt.list_containers(Some(filter)).await?)
    }

    /// `kubectl apply -f -` of `yaml`.
    pub fn apply(&self, yaml: &str) {
        let o = self.api.kubectl_with(&["apply", "-f", "-"], &[], Some(yaml));
        if !o.success {
            self.fail(&format!("kubectl apply failed:\n{}", o.describe()));
        }
    }
}

/// `node_lab!(Lab)`: a test file's own lab type, a [`NodeLab`] (through `Deref`) to which the
/// file adds the methods only its tests need.
#[macro_export]
macro_rules! node_lab {
    ($name:ident) => {
        struct $name($crate::nodelab::NodeLab);

        impl std::ops::Deref for $name {
            type Target = $crate::nodelab::NodeLab;
            fn deref(&self) -> &$crate::nodelab::NodeLab {
                &self.0
            }
        }

        impl std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut $crate::nodelab::NodeLab {
                &mut self.0
            }
        }
    };
}

pub fn phase(p: &Pod) -> &str {
    p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}
