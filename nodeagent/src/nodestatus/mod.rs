//! Mirrors kubelet's kubelet_node_status.go and nodelease: the node agent's presence in the API
//! server.
//!
//! [`run`] carries out, and keeps carrying out until shutdown:
//! 1. **Registration** (registerWithAPIServer): create the Node with its labels (the configured
//!    ones plus `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`), taints,
//!    pod CIDR and a first status. If the Node already exists (an earlier run, or an admin made
//!    it) the agent takes it over: it adds its labels and the pod CIDR if none is set, and from
//!    then on owns its status. Taints are set only at creation, as kubelet's
//!    `--register-with-taints`: afterwards they are the admins' and controllers'.
//! 2. **Status** (updateNodeStatus), every [`NODE_STATUS_UPDATE_FREQUENCY`] and at once when
//!    the agent's readiness changes: read the Node, compute its status with the
//!    [`setters`], and PATCH `nodes/<name>/status` when something other than heartbeats changed
//!    or [`NODE_STATUS_REPORT_FREQUENCY`] has passed since the last write (kubelet's
//!    nodeStatusReportFrequency; the Lease, not the status, is the node's heartbeat). The latest
//!    Node is published on `node_tx` for admission. A Node deleted from under the agent is
//!    registered again.
//! 3. **Lease** (nodelease): `kube-node-lease/<node>`, holder the node name, 40 s duration,
//!    renewed every [`NODE_LEASE_RENEW_INTERVAL`], owned by the Node (so it goes when the Node
//!    goes). The namespace is created if missing. The node lifecycle controller reads the Lease:
//!    a node whose Lease is not renewed for 40 s becomes NotReady/Unknown.
//!
//! The status also carries `volumesInUse` (kubelet's VolumesInUse setter): the unique names of
//! the CSI volumes the node's pods want or have mounted, from the volume manager
//! ([`crate::volumemanager::csi::CsiPlugin::volumes_in_use`]). The attach-detach controller
//! does not detach a volume the node still lists.
//!
//! Registration, status and lease survive API server outages: every failure is retried, logged
//! at warn once per outage (and at info when the API server is back); [`run`] never returns
//! before shutdown.

pub(crate) mod setters;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Namespace, Node, NodeSpec, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::Outage;
use crate::cri::RemoteRuntime;
use crate::error::Result;
use setters::HostInfo;

/// How often the node status is computed (kubelet's `--node-status-update-frequency`).
pub(crate) const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// The longest the status goes unwritten when nothing changes.
pub(crate) const NODE_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(60);
/// The namespace of node Leases.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The Lease's duration (kubelet's `--node-lease-duration-seconds`).
pub(crate) const NODE_LEASE_DURATION_SECONDS: i32 = 40;
/// How often the Lease is renewed: a quarter of its duration, as kubelet does.
pub(crate) const NODE_LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// The longest the status waits for the runtime's version.
const CRI_VERSION_TIMEOUT: Duration = Duration::from_secs(2);
/// Retry delays after a failed registration: doubling from the first to the last.
const REGISTER_BACKOFF: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(10));

/// Well-known node labels (v1.LabelHostname, LabelOSStable, LabelArchStable).
pub(crate) const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub(crate) const LABEL_OS: &str = "kubernetes.io/os";
pub(crate) const LABEL_ARCH: &str = "kubernetes.io/arch";

/// How this node presents itself.
#[derive(Clone, Debug)]
pub(crate) struct NodeOptions {
    pub(crate) node_name: String,
    /// Extra labels, set at registration (kubelet's `--node-labels`).
    pub(crate) labels: BTreeMap<String, String>,
    /// Taints set at registration (kubelet's `--register-with-taints`).
    pub(crate) taints: Vec<Taint>,
    /// `spec.podCIDR`, when the node's pod range is configured rather than allocated.
    pub(crate) pod_cidr: Option<String>,
    pub(crate) max_pods: u32,
    /// The agent's HTTP port, published as `status.daemonEndpoints.kubeletEndpoint.port`.
    pub(crate) port: u16,
    /// The agent's data directory: its filesystem's size is the node's ephemeral-storage.
    pub(crate) root_dir: PathBuf,
    /// The InternalIP to publish; found from the default route when None.
    pub(crate) node_ip: Option<IpAddr>,
}

impl NodeOptions {
    /// Kubelet's defaults: 110 pods, port 10250, no extra labels or taints.
    #[cfg(test)]
    pub(crate) fn new(node_name: impl Into<String>, root_dir: PathBuf) -> NodeOptions {
        NodeOptions {
            node_name: node_name.into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            pod_cidr: None,
            max_pods: 110,
            port: 10250,
            root_dir,
            node_ip: None,
        }
    }

    /// The configured labels plus the well-known ones the agent always sets.
    pub(crate) fn node_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        labels.insert(LABEL_HOSTNAME.to_string(), self.node_name.clone());
        labels.insert(LABEL_OS.to_string(), std::env::consts::OS.to_string());
        labels.insert(LABEL_ARCH.to_string(), setters::go_arch().to_string());
        labels
    }
}

/// The agent's own health, as the Ready condition reports it (each check is Ok or the sentence
/// saying what is wrong, which becomes the condition's message), and the eviction manager's
/// pressure, as the MemoryPressure, DiskPressure and PIDPressure conditions report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeReadiness {
    /// The CRI answers and reports RuntimeReady.
    pub(crate) runtime_ready: Result<(), String>,
    /// PLEG relisted recently.
    pub(crate) pleg_healthy: Result<(), String>,
    /// The CRI reports NetworkReady (a CNI config is in place).
    pub(crate) network_ready: Result<(), String>,
    /// The pressure the eviction manager reports, one flag per condition (kubelet's setters are
    /// handed its IsUnderMemoryPressure, IsUnderDiskPressure and IsUnderPIDPressure).
    pub(crate) memory_pressure: bool,
    pub(crate) disk_pressure: bool,
    pub(crate) pid_pressure: bool,
}

impl Default for NodeReadiness {
    /// Before any check has run: not ready, with kubelet's start-up messages.
    fn default() -> NodeReadiness {
        NodeReadiness {
            runtime_ready: Err("container runtime status check may not have completed yet".to_string()),
            pleg_healthy: Err("pleg has yet to be successful".to_string()),
            network_ready: Err("container runtime network not ready: network status not yet known".to_string()),
            memory_pressure: false,
            disk_pressure: false,
            pid_pressure: false,
        }
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The volumes in use on the node (blocking: it reads the pods' volume directories).
pub(crate) type VolumesInUse = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Everything the status needs that takes I/O: the host (blocking reads, off the executor) and
/// the runtime's version (a CRI call; the last known one is kept when it fails).
struct Observer {
    opts: NodeOptions,
    runtime: RemoteRuntime,
    runtime_version: String,
    volumes_in_use: Option<VolumesInUse>,
}

impl Observer {
    async fn host(&self) -> HostInfo {
        let opts = self.opts.clone();
        tokio::task::spawn_blocking(move || HostInfo::gather(&opts)).await.unwrap_or_default()
    }

    async fn refresh_runtime_version(&mut self) {
        // Bounded: a hung runtime must not stop the status (whose Ready condition says it hangs).
        match tokio::time::timeout(CRI_VERSION_TIMEOUT, self.runtime.version()).await {
            Ok(Ok(v)) => self.runtime_version = format!("{}://{}", v.runtime_name, v.runtime_version),
            Ok(Err(e)) => tracing::debug!(target: "kubelet::nodestatus", error = %e, "CRI Version failed; keeping the last runtime version"),
            Err(_) => tracing::debug!(target: "kubelet::nodestatus", "CRI Version timed out; keeping the last runtime version"),
        }
    }

    async fn status(&mut self, old: Option<&k8s_openapi::api::core::v1::NodeStatus>, readiness: &NodeReadiness) -> k8s_openapi::api::core::v1::NodeStatus {
        self.refresh_runtime_version().await;
        let host = self.host().await;
        let mut status = setters::node_status(old, &host, &self.runtime_version, readiness, &self.opts, &now());
        let in_use = match self.volumes_in_use.clone() {
            Some(f) => tokio::task::spawn_blocking(move || f()).await.unwrap_or_default(),
            None => Vec::new(),
        };
        status.volumes_in_use = Some(setters::volumes_in_use(in_use));
        status
    }
}

/// Registers the node, then keeps its status and Lease up to date until `shutdown` turns true.
pub(crate) async fn run(
    client: kube::Client,
    opts: NodeOptions,
    runtime: RemoteRuntime,
    readiness: watch::Receiver<NodeReadiness>,
    node_tx: watch::Sender<Option<Node>>,
    volumes_in_use: Option<VolumesInUse>,
    shutdown: watch::Receiver<bool>,
) {
    let node_rx = node_tx.subscribe();
    let lease = lease_loop(client.clone(), opts.node_name.clone(), node_rx, shutdown.clone());
    let status = status_loop(client, opts, runtime, readiness, node_tx, volumes_in_use, shutdown);
    tokio::join!(status, lease);
}

/// Sleeps `d`, or returns true early when shutdown is signalled.
async fn sleep_or_shutdown(d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => *shutdown.borrow(),
        r = shutdown.changed() => r.is_err() || *shutdown.borrow(),
    }
}

async fn status_loop(
    client: kube::Client,
    opts: NodeOptions,
    runtime: RemoteRuntime,
    mut readiness: watch::Receiver<NodeReadiness>,
    node_tx: watch::Sender<Option<Node>>,
    volumes_in_use: Option<VolumesInUse>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Node> = Api::all(client);
    let name = opts.node_name.clone();
    let mut observer = Observer { opts, runtime, runtime_version: String::new(), volumes_in_use };
    let mut outage = Outage::default();

    // Step 1: registration, retried until it works.
    let mut delay = REGISTER_BACKOFF.0;
    loop {
        let ready = readiness.borrow().clone();
        match register(&api, &mut observer, &ready).await {
            Ok(node) => {
                if outage.recovered() {
                    tracing::info!(target: "kubelet::nodestatus", node = %name, "API server reachable again");
                }
                tracing::info!(target: "kubelet::nodestatus", node = %name, uid = node.metadata.uid.as_deref().unwrap_or(""), "node registered");
                node_tx.send_replace(Some(node));
                break;
            }
            Err(e) => {
                if outage.failed() {
                    tracing::warn!(target: "kubelet::nodestatus", node = %name, error = %e, "unable to register node; retrying");
                }
                if sleep_or_shutdown(delay, &mut shutdown).await {
                    return;
                }
                delay = (delay * 2).min(REGISTER_BACKOFF.1);
            }
        }
    }

    // Step 2: status, on a timer and on readiness changes.
    let mut last_write = Instant::now();
    let mut tick = tokio::time::interval(NODE_STATUS_UPDATE_FREQUENCY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate; registration just wrote a status
    let mut readiness_open = true;
    loop {
        let mut force = false;
        tokio::select! {
            _ = tick.tick() => {}
            r = readiness.changed(), if readiness_open => match r {
                Ok(()) => force = true,
                Err(_) => readiness_open = false,
            },
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
        let ready = readiness.borrow().clone();
        let due = force || last_write.elapsed() >= NODE_STATUS_REPORT_FREQUENCY;
        match update_status(&api, &mut observer, &ready, due).await {
            Ok((node, wrote)) => {
                if outage.recovered() {
                    tracing::info!(target: "kubelet::nodestatus", node = %name, "API server reachable again");
                }
                if wrote {
                    last_write = Instant::now();
                }
                node_tx.send_replace(Some(node));
            }
            Err(e) => {
                if outage.failed() {
                    tracing::warn!(target: "kubelet::nodestatus", node = %name, error = %e, "unable to update node status; retrying");
                }
            }
        }
    }
}

/// The Node as first created.
fn initial_node(opts: &NodeOptions, status: k8s_openapi::api::core::v1::NodeStatus) -> Node {
    Node {
        metadata: ObjectMeta { name: Some(opts.node_name.clone()), labels: Some(opts.node_labels()), ..ObjectMeta::default() },
        spec: Some(NodeSpec {
            taints: (!opts.taints.is_empty()).then(|| opts.taints.clone()),
            pod_cidr: opts.pod_cidr.clone(),
            pod_cidrs: opts.pod_cidr.clone().map(|c| vec![c]),
            ..NodeSpec::default()
        }),
        status: Some(status),
    }
}

/// What taking over an existing Node changes in it (a merge patch), if anything: the agent's
/// labels where missing or different, and the pod CIDR if the Node has none.
pub(crate) fn takeover_patch(existing: &Node, opts: &NodeOptions) -> Option<serde_json::Value> {
    let have = existing.metadata.labels.clone().unwrap_or_default();
    let labels: BTreeMap<String, String> = opts.node_labels().into_iter().filter(|(k, v)| have.get(k) != Some(v)).collect();
    let has_cidr = existing.spec.as_ref().and_then(|s| s.pod_cidr.as_deref()).is_some_and(|c| !c.is_empty());
    let cidr = opts.pod_cidr.clone().filter(|_| !has_cidr);
    if labels.is_empty() && cidr.is_none() {
        return None;
    }
    let mut patch = json!({});
    if !labels.is_empty() {
        patch["metadata"] = json!({"labels": labels});
    }
    if let Some(c) = cidr {
        patch["spec"] = json!({"podCIDR": c, "podCIDRs": [c]});
    }
    Some(patch)
}

/// Step 1: create the Node, or take an existing one over and write its status.
async fn register(api: &Api<Node>, observer: &mut Observer, readiness: &NodeReadiness) -> Result<Node> {
    let name = observer.opts.node_name.clone();
    let status = observer.status(None, readiness).await;
    let node = initial_node(&observer.opts, status);
    match api.create(&PostParams::default(), &node).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&name).await?;
            tracing::info!(target: "kubelet::nodestatus", node = %name, "node already registered; taking it over");
            if let Some(patch) = takeover_patch(&existing, &observer.opts) {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            let status = observer.status(existing.status.as_ref(), readiness).await;
            Ok(api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Step 2: one status round. Returns the latest Node and whether a write happened.
async fn update_status(api: &Api<Node>, observer: &mut Observer, readiness: &NodeReadiness, due: bool) -> Result<(Node, bool)> {
    let name = observer.opts.node_name.clone();
    let Some(current) = api.get_opt(&name).await? else {
        tracing::warn!(target: "kubelet::nodestatus", node = %name, "node object is gone; registering again");
        return Ok((register(api, observer, readiness).await?, true));
    };
    let status = observer.status(current.status.as_ref(), readiness).await;
    if !due && !setters::status_changed(current.status.as_ref(), &status) {
        return Ok((current, false));
    }
    let patched = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await?;
    tracing::debug!(target: "kubelet::nodestatus", node = %name, "node status written");
    Ok((patched, true))
}

/// The Lease object for `node` renewed now (nodelease's newLease), from `base` if there is one.
pub(crate) fn renewed_lease(base: Option<Lease>, node: &Node, now: MicroTime) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    let mut lease = base.unwrap_or_else(|| Lease {
        metadata: ObjectMeta { name: Some(name.clone()), namespace: Some(NODE_LEASE_NAMESPACE.to_string()), ..ObjectMeta::default() },
        spec: None,
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(name.clone());
    spec.lease_duration_seconds = Some(NODE_LEASE_DURATION_SECONDS);
    spec.renew_time = Some(now);
    // The owner is the current Node: a Node deleted and registered again has a new UID.
    if let Some(uid) = node.metadata.uid.clone() {
        lease.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".to_string(),
            kind: "Node".to_string(),
            name,
            uid,
            ..OwnerReference::default()
        }]);
    }
    lease
}

/// Step 3: renew the Lease every interval once the Node exists.
async fn lease_loop(client: kube::Client, node_name: String, mut node_rx: watch::Receiver<Option<Node>>, mut shutdown: watch::Receiver<bool>) {
    // Wait for registration: the Lease is owned by the Node.
    loop {
        if node_rx.borrow().is_some() {
            break;
        }
        tokio::select! {
            r = node_rx.changed() => if r.is_err() { return },
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let namespaces: Api<Namespace> = Api::all(client);
    // The last Lease written: renewing from it saves a GET per renewal, as kubelet's
    // latestLease does. Dropped after any failure, so the next round reads afresh.
    let mut cached: Option<Lease> = None;
    let mut outage = Outage::default();
    let mut tick = tokio::time::interval(NODE_LEASE_RENEW_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            r = shutdown.changed() => if r.is_err() || *shutdown.borrow() { return },
        }
        let Some(node) = node_rx.borrow().clone() else { continue };
        match renew(&leases, &namespaces, cached.take(), &node).await {
            Ok(lease) => {
                if outage.recovered() {
                    tracing::info!(target: "kubelet::nodelease", node = %node_name, "lease renewed again");
                }
                cached = Some(lease);
            }
            Err(e) => {
                if outage.failed() {
                    tracing::warn!(target: "kubelet::nodelease", node = %node_name, error = %e, "failed to renew the node lease; retrying");
                }
            }
        }
    }
}

async fn renew(leases: &Api<Lease>, namespaces: &Api<Namespace>, cached: Option<Lease>, node: &Node) -> Result<Lease> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let now = || MicroTime(k8s_openapi::jiff::Timestamp::now());
    let base = match cached {
        Some(l) => Some(l),
        None => leases.get_opt(&name).await?,
    };
    if base.is_some() {
        return Ok(leases.replace(&name, &PostParams::default(), &renewed_lease(base, node, now())).await?);
    }
    match leases.create(&PostParams::default(), &renewed_lease(None, node, now())).await {
        Ok(l) => Ok(l),
        Err(kube::Error::Api(s)) if s.code == 404 => {
            // The namespace does not exist yet: make it, then create the Lease.
            let ns = Namespace {
                metadata: ObjectMeta { name: Some(NODE_LEASE_NAMESPACE.to_string()), ..ObjectMeta::default() },
                ..Namespace::default()
            };
            match namespaces.create(&PostParams::default(), &ns).await {
                Ok(_) => tracing::info!(target: "kubelet::nodelease", namespace = NODE_LEASE_NAMESPACE, "created the node lease namespace"),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
            Ok(leases.create(&PostParams::default(), &renewed_lease(None, node, now())).await?)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(labels: serde_json::Value, spec: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n1", "uid": "u1", "labels": labels}, "spec": spec})).expect("node")
    }

    #[test]
    fn registration_object() {
        let mut opts = NodeOptions::new("n1", PathBuf::from("/var/lib/kubelab"));
        opts.labels.insert("role".into(), "edge".into());
        opts.taints.push(Taint { key: "dedicated".into(), effect: "NoSchedule".into(), ..Taint::default() });
        opts.pod_cidr = Some("10.244.1.0/24".into());
        let n = initial_node(&opts, Default::default());
        let labels = n.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels.get(LABEL_HOSTNAME).map(String::as_str), Some("n1"));
        assert_eq!(labels.get(LABEL_OS).map(String::as_str), Some("linux"));
        assert_eq!(labels.get(LABEL_ARCH).map(String::as_str), Some(setters::go_arch()));
        assert_eq!(labels.get("role").map(String::as_str), Some("edge"));
        let spec = n.spec.as_ref().expect("spec");
        assert_eq!(spec.taints.as_ref().map(Vec::len), Some(1));
        assert_eq!(spec.pod_cidr.as_deref(), Some("10.244.1.0/24"));
        assert_eq!(spec.pod_cidrs, Some(vec!["10.244.1.0/24".to_string()]));
        assert!(initial_node(&NodeOptions::new("n1", PathBuf::new()), Default::default()).spec.and_then(|s| s.taints).is_none());
    }

    #[test]
    fn takeover() {
        let mut opts = NodeOptions::new("n1", PathBuf::new());
        let all = json!({"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "kubernetes.io/arch": setters::go_arch()});
        assert_eq!(takeover_patch(&node(all.clone(), json!({})), &opts), None, "nothing to change");
        let p = takeover_patch(&node(json!({"other": "x"}), json!({})), &opts).expect("labels");
        assert_eq!(p["metadata"]["labels"]["kubernetes.io/hostname"], "n1");
        assert!(p["metadata"]["labels"].get("other").is_none(), "labels of others are left alone");
        opts.pod_cidr = Some("10.244.2.0/24".into());
        let p = takeover_patch(&node(all.clone(), json!({})), &opts).expect("cidr");
        assert_eq!(p, json!({"spec": {"podCIDR": "10.244.2.0/24", "podCIDRs": ["10.244.2.0/24"]}}));
        assert_eq!(takeover_patch(&node(all, json!({"podCIDR": "10.244.9.0/24"})), &opts), None, "podCIDR is never changed");
    }

    #[test]
    fn lease_object() {
        let n = node(json!({}), json!({}));
        let t = MicroTime(k8s_openapi::jiff::Timestamp::from_second(100).expect("time"));
        let l = renewed_lease(None, &n, t.clone());
        assert_eq!(l.metadata.namespace.as_deref(), Some(NODE_LEASE_NAMESPACE));
        assert_eq!(l.metadata.name.as_deref(), Some("n1"));
        let spec = l.spec.clone().expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("n1"));
        assert_eq!(spec.lease_duration_seconds, Some(40));
        assert_eq!(spec.renew_time, Some(t));
        let owner = &l.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("v1", "Node", "n1", "u1"));

        // Renewing keeps what the server gave (resourceVersion) and moves renewTime.
        let mut stored = l.clone();
        stored.metadata.resource_version = Some("42".into());
        let later = MicroTime(k8s_openapi::jiff::Timestamp::from_second(110).expect("time"));
        let r = renewed_lease(Some(stored), &n, later.clone());
        assert_eq!(r.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(r.spec.and_then(|s| s.renew_time), Some(later));
    }

    #[test]
    fn readiness_starts_not_ready() {
        let r = NodeReadiness::default();
        assert!(setters::not_ready_message(&r).is_some());
        let ok = NodeReadiness { runtime_ready: Ok(()), pleg_healthy: Ok(()), network_ready: Ok(()), ..NodeReadiness::default() };
        assert_eq!(setters::not_ready_message(&ok), None);
    }
}
