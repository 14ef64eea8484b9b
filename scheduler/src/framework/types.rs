//! Mirrors kube-scheduler's framework/types.go: `PodInfo` (a pod with what scheduling needs
//! pre-computed) and `NodeInfo` (a node with the pods on it and the sums of their requests), the
//! view every Filter and Score decides on.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::pod::is_restartable_init_container;
use apimachinery::resource::{parse_quantity_milli, parse_quantity_units};
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// What scoring assumes a container without a cpu request uses: 0.1 core (kube-scheduler's
/// DefaultMilliCPURequest), so that best-effort pods still spread.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// And without a memory request: 200 MB (DefaultMemoryRequest).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// The resources kubelab schedules on. Extended resources (`example.com/gpu`) are left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resource {
    pub milli_cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    pub allowed_pod_number: i64,
}

impl Resource {
    /// Reads cpu, memory, ephemeral-storage and pods from a resource list. Quantities that do not
    /// parse count as zero (the API server's validation rejects them before they get here).
    pub fn from_list(list: Option<&BTreeMap<String, Quantity>>) -> Resource {
        let Some(list) = list else { return Resource::default() };
        let units = |k: &str| list.get(k).and_then(|q| parse_quantity_units(&q.0)).unwrap_or(0);
        Resource {
            milli_cpu: list.get("cpu").and_then(|q| parse_quantity_milli(&q.0)).unwrap_or(0),
            memory: units("memory"),
            ephemeral_storage: units("ephemeral-storage"),
            allowed_pod_number: units("pods"),
        }
    }

    pub fn add(&mut self, o: &Resource) {
        self.milli_cpu += o.milli_cpu;
        self.memory += o.memory;
        self.ephemeral_storage += o.ephemeral_storage;
        self.allowed_pod_number += o.allowed_pod_number;
    }

    pub fn sub(&mut self, o: &Resource) {
        self.milli_cpu -= o.milli_cpu;
        self.memory -= o.memory;
        self.ephemeral_storage -= o.ephemeral_storage;
        self.allowed_pod_number -= o.allowed_pod_number;
    }

    /// Each field the larger of the two.
    pub fn set_max(&mut self, o: &Resource) {
        self.milli_cpu = self.milli_cpu.max(o.milli_cpu);
        self.memory = self.memory.max(o.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(o.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(o.allowed_pod_number);
    }
}

fn requests(c: &Container) -> Resource {
    Resource::from_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

/// The pod's effective request, as Kubernetes computes it (resourcehelper.PodRequests): the sum of
/// the app containers and sidecars (init containers with restartPolicy Always), or — if larger —
/// what any one init container needs on top of the sidecars started before it; plus the pod's
/// overhead. `non_zero` substitutes the scoring defaults for missing cpu/memory requests.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Resource {
    let Some(spec) = &pod.spec else { return Resource::default() };
    let req = |c: &Container| {
        let mut r = requests(c);
        if non_zero {
            if r.milli_cpu == 0 {
                r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
            }
            if r.memory == 0 {
                r.memory = DEFAULT_MEMORY_REQUEST;
            }
        }
        r
    };
    let mut total = Resource::default();
    for c in &spec.containers {
        total.add(&req(c));
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let r = req(c);
        if is_restartable_init_container(c) {
            sidecars.add(&r);
            total.add(&r);
            init_max.set_max(&sidecars);
        } else {
            let mut during = sidecars;
            during.add(&r);
            init_max.set_max(&during);
        }
    }
    total.set_max(&init_max);
    if let Some(overhead) = &spec.overhead {
        total.add(&Resource::from_list(Some(overhead)));
    }
    total
}

/// A host port a pod asks for: (hostIP — "0.0.0.0" when unset —, protocol, port).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Whether two host ports cannot both be bound: same protocol and port, and the same IP or
    /// either on every address.
    pub fn conflicts(&self, o: &HostPort) -> bool {
        self.protocol == o.protocol
            && self.port == o.port
            && (self.ip == o.ip || self.ip == "0.0.0.0" || o.ip == "0.0.0.0")
    }
}

/// The host ports of every container (and init container) of the pod.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = &pod.spec else { return Vec::new() };
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|&p| p > 0)?;
            Some(HostPort {
                ip: p.host_ip.clone().filter(|s| !s.is_empty()).unwrap_or_else(|| "0.0.0.0".into()),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

/// A pod and what scheduling needs computed once per pod, not once per node.
#[derive(Debug)]
pub struct PodInfo {
    pub pod: Arc<Pod>,
    /// Its effective request (for fitting).
    pub request: Resource,
    /// The same with the scoring defaults for missing cpu/memory.
    pub non_zero_request: Resource,
    pub host_ports: Vec<HostPort>,
}

impl PodInfo {
    pub fn new(pod: Arc<Pod>) -> PodInfo {
        PodInfo { request: pod_requests(&pod, false), non_zero_request: pod_requests(&pod, true), host_ports: host_ports(&pod), pod }
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn uid(&self) -> &str {
        api::pod::uid(&self.pod)
    }

    /// "namespace/name", as kube-scheduler names pods in messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// Whether the pod declares pod affinity or anti-affinity of any kind.
    pub fn has_pod_affinity(&self) -> bool {
        let a = self.pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        a.is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
    }

    /// Whether the pod declares required pod anti-affinity.
    pub fn has_required_anti_affinity(&self) -> bool {
        let a = self.pod.spec.as_ref().and_then(|s| s.affinity.as_ref()).and_then(|a| a.pod_anti_affinity.as_ref());
        a.is_some_and(|a| a.required_during_scheduling_ignored_during_execution.as_ref().is_some_and(|t| !t.is_empty()))
    }
}

/// A node, the pods on it (bound or assumed) and the sums the filters compare against.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub node: Arc<Node>,
    /// The node's name, shared with the scores computed for it.
    pub node_name: Arc<str>,
    /// `spec.unschedulable`, kept beside the sums: every filter pass reads it for every node.
    pub unschedulable: bool,
    pub pods: Vec<Arc<PodInfo>>,
    /// Pods with any pod (anti-)affinity, for InterPodAffinity.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods with required anti-affinity, for InterPodAffinity's symmetry check.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    pub requested: Resource,
    pub non_zero_requested: Resource,
    pub allocatable: Resource,
    pub used_ports: Vec<HostPort>,
    /// How many pods here use each PersistentVolumeClaim ("namespace/claimName"), for
    /// VolumeRestrictions' ReadWriteOncePod check (kube-scheduler's PVCRefCounts).
    pub pvc_ref_counts: BTreeMap<String, usize>,
    /// Bumped on every change; the snapshot copies only what changed since it last looked.
    pub generation: u64,
}

/// The claims a pod's volumes name, as "namespace/claimName" keys.
pub fn pod_pvc_keys(pod: &Pod) -> impl Iterator<Item = String> + '_ {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(move |v| v.persistent_volume_claim.as_ref().map(|c| format!("{ns}/{}", c.claim_name)))
}

impl NodeInfo {
    pub fn new(node: Arc<Node>) -> NodeInfo {
        let allocatable = Resource::from_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        NodeInfo {
            node_name: node.metadata.name.as_deref().unwrap_or("").into(),
            unschedulable: node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
            node,
            pods: Vec::new(),
            pods_with_affinity: Vec::new(),
            pods_with_required_anti_affinity: Vec::new(),
            requested: Resource::default(),
            non_zero_requested: Resource::default(),
            allocatable,
            used_ports: Vec::new(),
            pvc_ref_counts: BTreeMap::new(),
            generation: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.node_name
    }

    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// Replaces the Node object, keeping the pods.
    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable = Resource::from_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()));
        self.node_name = node.metadata.name.as_deref().unwrap_or("").into();
        self.unschedulable = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
        self.node = node;
    }

    pub fn add_pod(&mut self, p: Arc<PodInfo>) {
        self.requested.add(&p.request);
        self.requested.allowed_pod_number += 1;
        self.non_zero_requested.add(&p.non_zero_request);
        self.used_ports.extend(p.host_ports.iter().cloned());
        for k in pod_pvc_keys(&p.pod) {
            *self.pvc_ref_counts.entry(k).or_default() += 1;
        }
        if p.has_pod_affinity() {
            self.pods_with_affinity.push(p.clone());
        }
        if p.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity.push(p.clone());
        }
        self.pods.push(p);
    }

    /// Removes the pod with `uid`; false if it was not here.
    pub fn remove_pod(&mut self, uid: &str) -> bool {
        let Some(i) = self.pods.iter().position(|p| p.uid() == uid) else { return false };
        let p = self.pods.swap_remove(i);
        self.requested.sub(&p.request);
        self.requested.allowed_pod_number -= 1;
        self.non_zero_requested.sub(&p.non_zero_request);
        for hp in &p.host_ports {
            if let Some(j) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(j);
            }
        }
        for k in pod_pvc_keys(&p.pod) {
            if let Some(n) = self.pvc_ref_counts.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    self.pvc_ref_counts.remove(&k);
                }
            }
        }
        self.pods_with_affinity.retain(|q| q.uid() != uid);
        self.pods_with_required_anti_affinity.retain(|q| q.uid() != uid);
        true
    }
}

#[cfg(test)]
pub mod testing {
    //! Builders for plugin table tests.
    use super::*;
    use serde_json::{Value, json};

    /// A pod from a JSON fragment of its spec, with name, namespace and uid filled in.
    pub fn pod(name: &str, spec: Value) -> PodInfo {
        pod_with(name, json!({}), spec)
    }

    /// A pod with metadata (labels…) and spec fragments.
    pub fn pod_with(name: &str, meta: Value, spec: Value) -> PodInfo {
        let mut m = json!({"name": name, "namespace": "default", "uid": format!("uid-{name}")});
        if let (Some(m), Value::Object(extra)) = (m.as_object_mut(), meta) {
            m.extend(extra);
        }
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
        }
        let pod: Pod = serde_json::from_value(json!({"metadata": m, "spec": spec})).expect("valid pod");
        PodInfo::new(Arc::new(pod))
    }

    /// A container requesting `cpu` and `memory` (either may be empty for none).
    pub fn container(cpu: &str, memory: &str) -> Value {
        let mut req = serde_json::Map::new();
        if !cpu.is_empty() {
            req.insert("cpu".into(), json!(cpu));
        }
        if !memory.is_empty() {
            req.insert("memory".into(), json!(memory));
        }
        json!({"name": format!("c{cpu}{memory}"), "image": "busybox", "resources": {"requests": req}})
    }

    /// A node from metadata and spec fragments, with `allocatable` (cpu, memory, pods).
    pub fn node(name: &str, meta: Value, spec: Value, cpu: &str, memory: &str, pods: &str) -> NodeInfo {
        let mut m = json!({"name": name});
        if let (Some(m), Value::Object(extra)) = (m.as_object_mut(), meta) {
            m.extend(extra);
        }
        let alloc = json!({"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"});
        let node: Node =
            serde_json::from_value(json!({"metadata": m, "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}))
                .expect("valid node");
        NodeInfo::new(Arc::new(node))
    }

    /// A node with 4 cpus, 8 GiB and 110 pods.
    pub fn plain_node(name: &str) -> NodeInfo {
        node(name, json!({}), json!({}), "4", "8Gi", "110")
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_requests_table() {
        let cases = [
            ("one container", json!({"containers": [container("500m", "1Gi")]}), (500, 1 << 30)),
            (
                "containers add up",
                json!({"containers": [container("500m", "1Gi"), container("250m", "")]}),
                (750, 1 << 30),
            ),
            (
                "a larger init container wins",
                json!({"initContainers": [container("2", "")], "containers": [container("500m", "1Gi")]}),
                (2000, 1 << 30),
            ),
            (
                "sidecars add to both",
                json!({"initContainers": [
                    {"name": "side", "image": "b", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                    container("1500m", "")
                ], "containers": [container("500m", "")]}),
                (2500, 0),
            ),
            ("overhead", json!({"containers": [container("1", "")], "overhead": {"cpu": "250m"}}), (1250, 0)),
        ];
        for (case, spec, (cpu, mem)) in cases {
            let p = pod("p", spec);
            assert_eq!((p.request.milli_cpu, p.request.memory), (cpu, mem), "{case}");
        }
        let best_effort = pod("p", json!({}));
        assert_eq!(best_effort.request, Resource::default());
        assert_eq!(
            (best_effort.non_zero_request.milli_cpu, best_effort.non_zero_request.memory),
            (DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)
        );
    }

    #[test]
    fn node_info_adds_and_removes_pods() {
        let mut n = plain_node("n1");
        assert_eq!(n.allocatable.milli_cpu, 4000);
        assert_eq!(n.allocatable.allowed_pod_number, 110);
        let p = Arc::new(pod(
            "p",
            json!({"containers": [{"name": "c", "image": "b", "ports": [{"containerPort": 80, "hostPort": 8080}],
                                   "resources": {"requests": {"cpu": "1"}}}]}),
        ));
        n.add_pod(p.clone());
        assert_eq!(n.requested.milli_cpu, 1000);
        assert_eq!(n.requested.allowed_pod_number, 1);
        assert_eq!(n.used_ports.len(), 1);
        assert!(n.remove_pod(p.uid()));
        assert!(!n.remove_pod(p.uid()));
        assert_eq!(n.requested, Resource::default());
        assert!(n.used_ports.is_empty());
    }

    #[test]
    fn host_port_conflicts() {
        let hp = |ip: &str, proto: &str, port| HostPort { ip: ip.into(), protocol: proto.into(), port };
        assert!(hp("0.0.0.0", "TCP", 80).conflicts(&hp("10.0.0.1", "TCP", 80)));
        assert!(hp("10.0.0.1", "TCP", 80).conflicts(&hp("10.0.0.1", "TCP", 80)));
        assert!(!hp("10.0.0.1", "TCP", 80).conflicts(&hp("10.0.0.2", "TCP", 80)));
        assert!(!hp("0.0.0.0", "TCP", 80).conflicts(&hp("0.0.0.0", "UDP", 80)));
        assert!(!hp("0.0.0.0", "TCP", 80).conflicts(&hp("0.0.0.0", "TCP", 81)));
    }
}
