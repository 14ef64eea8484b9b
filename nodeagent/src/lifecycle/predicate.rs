//! Mirrors kubelet's lifecycle/predicate.go: node-side admission — does this pod fit what is left
//! of the node?
//!
//! The scheduler already decided that the pod fits, but on a view that may be stale, and static
//! pods and pods created with `spec.nodeName` set never went through it. So before running a pod
//! the node agent asks the same questions again, with the scheduler's own functions (kubelet
//! calls the scheduler's `AdmissionCheck` too), in Kubernetes' order:
//!
//! 1. The OS: a `kubernetes.io/os` node selector or `spec.os.name` naming another OS.
//! 2. Resources (noderesources.Fits): pod count, cpu, memory, ephemeral-storage against the
//!    node's allocatable minus what the other admitted, non-terminal pods request.
//! 3. Required node affinity and the node selector.
//! 4. `spec.nodeName`, when set, names this node.
//! 5. Host ports are free.
//! 6. Taints — only `NoExecute` ones (a `NoSchedule` taint is the scheduler's business and does
//!    not evict running pods, so it must not stop a pod the scheduler or an admin placed here),
//!    and never for static pods: they are the node's own and must run whatever its taints say.
//!
//! Only the first failure is reported, as kubelet does: its reason goes into the pod's
//! `status.reason` (`OutOfcpu`, `NodeAffinity`, …) and the pod is marked Failed.
//!
//! Implementation caveats:
//! - Kubelet lets a *critical* pod (static, mirror, or priority ≥ system-cluster-critical) that
//!   fails only on resources evict lower-priority pods to make room (CriticalPodAdmissionHandler).
//!   kubelab has no such preemption: the critical pod is rejected like any other.
//! - Extended resources (`example.com/gpu`) and device plugins are not counted.

use std::sync::Arc;

use api::core::v1::helper::find_untolerated;
use api::pod::{is_pod_terminal, is_static_pod, uid};
use k8s_openapi::api::core::v1::{Node, Pod};
use scheduler::framework::NodeInfo;
use scheduler::framework::types::{HostPort, Resource, host_ports, pod_requests};
use scheduler::plugins::{node_affinity, node_name, node_ports};

/// Kubernetes' taint-toleration plugin name and ErrReasonNotMatch, which kubelet reports.
pub(crate) const TAINT_TOLERATION: &str = "TaintToleration";
pub(crate) const ERR_REASON_TAINTS_NOT_MATCH: &str = "node(s) had taints that the pod didn't tolerate";
/// The label a node selector names the OS with (v1.LabelOSStable).
pub(crate) const LABEL_OS: &str = "kubernetes.io/os";

/// The verdict (lifecycle.PodAdmitResult). On rejection `reason` is a CamelCase word for
/// `status.reason` and `message` a sentence for `status.message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodAdmitResult {
    pub(crate) admit: bool,
    pub(crate) reason: String,
    pub(crate) message: String,
}

impl PodAdmitResult {
    fn admitted() -> PodAdmitResult {
        PodAdmitResult { admit: true, reason: String::new(), message: String::new() }
    }

    fn rejected(reason: impl Into<String>, message: impl Into<String>) -> PodAdmitResult {
        PodAdmitResult { admit: false, reason: reason.into(), message: message.into() }
    }

    /// A failed predicate in PredicateFailureError's words.
    fn predicate(name: &str, desc: &str) -> PodAdmitResult {
        PodAdmitResult::rejected(name, format!("Predicate {name} failed: {desc}"))
    }
}

/// One resource the pod asked for more of than is left (InsufficientResourceError).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Insufficient {
    resource: &'static str,
    requested: i64,
    used: i64,
    capacity: i64,
}

impl Insufficient {
    fn into_result(self) -> PodAdmitResult {
        PodAdmitResult::rejected(
            format!("OutOf{}", self.resource),
            format!(
                "Node didn't have enough resource: {}, requested: {}, used: {}, capacity: {}",
                self.resource, self.requested, self.used, self.capacity
            ),
        )
    }
}

/// noderesources.Fits with every failure in order: pods, cpu, memory, ephemeral-storage.
/// `pods` is the number of pods already admitted; a pod that requests nothing only needs a slot.
fn insufficient(want: &Resource, used: &Resource, pods: i64, allocatable: &Resource) -> Vec<Insufficient> {
    let mut out = Vec::new();
    if pods + 1 > allocatable.allowed_pod_number {
        out.push(Insufficient { resource: "pods", requested: 1, used: pods, capacity: allocatable.allowed_pod_number });
    }
    let checks = [
        ("cpu", want.milli_cpu, used.milli_cpu, allocatable.milli_cpu),
        ("memory", want.memory, used.memory, allocatable.memory),
        ("ephemeral-storage", want.ephemeral_storage, used.ephemeral_storage, allocatable.ephemeral_storage),
    ];
    for (resource, requested, used, capacity) in checks {
        if requested > 0 && requested > capacity - used {
            out.push(Insufficient { resource, requested, used, capacity });
        }
    }
    out
}

/// Whether `pod` may run on `node` beside `running` (kubelet's predicateAdmitHandler.Admit).
///
/// `running` is what the node agent has admitted and not yet seen finish; terminal pods and
/// `pod` itself (by UID) are skipped, so callers may pass their whole list. `max_pods` is the
/// agent's own `--max-pods`: it wins over the Node object's `allocatable.pods`, which may be
/// stale or edited.
pub(crate) fn can_admit_pod(node: &Node, running: &[Pod], pod: &Pod, max_pods: usize) -> PodAdmitResult {
    let uid = uid(pod);
    let others: Vec<&Pod> = running
        .iter()
        .filter(|p| !is_pod_terminal(p) && (uid.is_empty() || p.metadata.uid.as_deref() != Some(uid)))
        .collect();
    let spec = pod.spec.as_ref();

    // Step 1: the OS (rejectPodAdmissionBasedOnOSSelector / OSField): no preemption can fix these.
    let os = std::env::consts::OS;
    if let Some(want) = spec.and_then(|s| s.node_selector.as_ref()).and_then(|s| s.get(LABEL_OS))
        && want != os
    {
        return PodAdmitResult::rejected(
            "PodOSSelectorNodeLabelDoesNotMatch",
            format!("Failed to admit pod as the `{LABEL_OS}` label doesn't match node label"),
        );
    }
    if let Some(want) = spec.and_then(|s| s.os.as_ref()).map(|o| o.name.as_str())
        && want != os
    {
        return PodAdmitResult::rejected("PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS");
    }

    // Step 2: resources.
    let mut info = NodeInfo::new(Arc::new(node.clone()));
    info.allocatable.allowed_pod_number = i64::try_from(max_pods).unwrap_or(i64::MAX);
    let mut used = Resource::default();
    let mut used_ports: Vec<HostPort> = Vec::new();
    for p in &others {
        used.add(&pod_requests(p, false));
        used_ports.extend(host_ports(p));
    }
    let mut failures = insufficient(&pod_requests(pod, false), &used, others.len() as i64, &info.allocatable);
    if !failures.is_empty() {
        return failures.swap_remove(0).into_result();
    }

    // Step 3: node selector and required node affinity. A malformed term never matches.
    if !node_affinity::required_node_affinity_matches(pod, &info) {
        return PodAdmitResult::predicate(node_affinity::NAME, node_affinity::ERR_REASON_POD);
    }

    // Step 4: nodeName.
    if let Some(name) = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
        && name != info.name()
    {
        return PodAdmitResult::predicate(node_name::NAME, node_name::ERR_REASON);
    }

    // Step 5: host ports.
    if !node_ports::fits_ports(&host_ports(pod), &used_ports) {
        return PodAdmitResult::predicate(node_ports::NAME, node_ports::ERR_REASON);
    }

    // Step 6: NoExecute taints, except for static pods.
    if !is_static_pod(pod) {
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let tolerations = spec.and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
        if find_untolerated(taints, tolerations, &["NoExecute"]).is_some() {
            return PodAdmitResult::predicate(TAINT_TOLERATION, ERR_REASON_TAINTS_NOT_MATCH);
        }
    }

    PodAdmitResult::admitted()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(meta: Value, spec: Value) -> Node {
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": spec,
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi", "pods": "110"}},
        }))
        .expect("node")
    }

    fn plain_node() -> Node {
        node(json!({"name": "n1", "labels": {"disk": "ssd"}}), json!({}))
    }

    fn pod(uid: &str, meta: Value, spec: Value) -> Pod {
        let mut meta = meta;
        meta["uid"] = json!(uid);
        meta.as_object_mut().expect("object").entry("name").or_insert(json!(uid));
        let mut spec = spec;
        spec.as_object_mut().expect("object").entry("containers").or_insert(json!([{"name": "c", "image": "i"}]));
        serde_json::from_value(json!({"metadata": meta, "spec": spec})).expect("pod")
    }

    fn requesting(uid: &str, cpu: &str, memory: &str) -> Pod {
        pod(uid, json!({}), json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}))
    }

    fn with_host_port(uid: &str, port: i32) -> Pod {
        pod(uid, json!({}), json!({"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": port}]}]}))
    }

    #[test]
    fn admission_table() {
        let static_annotations = json!({"annotations": {"kubernetes.io/config.source": "file"}});
        let tainted = node(
            json!({"name": "n1"}),
            json!({"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}, {"key": "ns", "effect": "NoSchedule"}]}),
        );
        let only_no_schedule = node(json!({"name": "n1"}), json!({"taints": [{"key": "ns", "effect": "NoSchedule"}]}));
        let mut finished = requesting("done", "1900m", "1Gi");
        finished.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
        let affinity = |op: &str, values: Value| {
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": op, "values": values}]}]}}}})
        };
        // (name, node, running, pod, max_pods, reason, message); an empty reason means admitted.
        type Case<'a> = (&'a str, Node, Vec<Pod>, Pod, usize, &'a str, &'a str);
        let cases: Vec<Case> = vec![
            ("empty pod fits", plain_node(), vec![], pod("p", json!({}), json!({})), 110, "", ""),
            ("fits beside others", plain_node(), vec![requesting("a", "500m", "1Gi")], requesting("p", "1500m", "1Gi"), 110, "", ""),
            (
                "cpu",
                plain_node(),
                vec![requesting("a", "500m", "1Gi")],
                requesting("p", "3", "1Gi"),
                110,
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 3000, used: 500, capacity: 2000",
            ),
            (
                "memory",
                plain_node(),
                vec![requesting("a", "100m", "3Gi")],
                requesting("p", "100m", "2Gi"),
                110,
                "OutOfmemory",
                "Node didn't have enough resource: memory, requested: 2147483648, used: 3221225472, capacity: 4294967296",
            ),
            (
                "ephemeral-storage",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"ephemeral-storage": "11Gi"}}}]})),
                110,
                "OutOfephemeral-storage",
                "Node didn't have enough resource: ephemeral-storage, requested: 11811160064, used: 0, capacity: 10737418240",
            ),
            (
                "pods: max_pods wins over allocatable",
                plain_node(),
                vec![requesting("a", "0", "0"), requesting("b", "0", "0")],
                pod("p", json!({}), json!({})),
                2,
                "OutOfpods",
                "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
            ),
            ("terminal pods hold nothing", plain_node(), vec![finished], requesting("p", "1", "1Gi"), 1, "", ""),
            ("the pod itself is not counted", plain_node(), vec![requesting("p", "1500m", "1Gi")], requesting("p", "1500m", "1Gi"), 1, "", ""),
            (
                "init container larger than the app containers",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"initContainers": [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "2500m"}}}]})),
                110,
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 2500, used: 0, capacity: 2000",
            ),
            (
                "overhead counts",
                plain_node(),
                vec![requesting("a", "1500m", "0")],
                pod("p", json!({}), json!({"overhead": {"cpu": "600m"}})),
                110,
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000",
            ),
            (
                "node selector mismatch",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"nodeSelector": {"disk": "hdd"}})),
                110,
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            ),
            ("node selector match", plain_node(), vec![], pod("p", json!({}), json!({"nodeSelector": {"disk": "ssd"}})), 110, "", ""),
            ("required affinity match", plain_node(), vec![], pod("p", json!({}), affinity("In", json!(["ssd"]))), 110, "", ""),
            (
                "required affinity mismatch",
                plain_node(),
                vec![],
                pod("p", json!({}), affinity("NotIn", json!(["ssd"]))),
                110,
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            ),
            (
                "nodeName names another node",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"nodeName": "n2"})),
                110,
                "NodeName",
                "Predicate NodeName failed: node(s) didn't match the requested node name",
            ),
            ("nodeName names this node", plain_node(), vec![], pod("p", json!({}), json!({"nodeName": "n1"})), 110, "", ""),
            (
                "host port in use",
                plain_node(),
                vec![with_host_port("a", 8080)],
                with_host_port("p", 8080),
                110,
                "NodePorts",
                "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
            ),
            ("another host port", plain_node(), vec![with_host_port("a", 8080)], with_host_port("p", 8081), 110, "", ""),
            (
                "untolerated NoExecute taint",
                tainted.clone(),
                vec![],
                pod("p", json!({}), json!({})),
                110,
                "TaintToleration",
                "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
            ),
            (
                "tolerated NoExecute taint; NoSchedule is not the node's business",
                tainted.clone(),
                vec![],
                pod("p", json!({}), json!({"tolerations": [{"key": "k", "operator": "Exists"}]})),
                110,
                "",
                "",
            ),
            ("only NoSchedule taints", only_no_schedule, vec![], pod("p", json!({}), json!({})), 110, "", ""),
            ("static pods ignore taints", tainted, vec![], pod("p", static_annotations, json!({})), 110, "", ""),
            (
                "OS selector",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"nodeSelector": {"kubernetes.io/os": "windows"}})),
                110,
                "PodOSSelectorNodeLabelDoesNotMatch",
                "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
            ),
            (
                "OS field",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"os": {"name": "windows"}})),
                110,
                "PodOSNotSupported",
                "Failed to admit pod as the OS field doesn't match node OS",
            ),
            (
                "only the first failure is reported",
                plain_node(),
                vec![],
                pod("p", json!({}), json!({"nodeName": "n2", "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "3", "memory": "5Gi"}}}]})),
                110,
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000",
            ),
        ];
        for (name, node, running, pod, max_pods, reason, message) in cases {
            let got = can_admit_pod(&node, &running, &pod, max_pods);
            assert_eq!(got.admit, reason.is_empty(), "{name}: {got:?}");
            assert_eq!(got.reason, reason, "{name}");
            assert_eq!(got.message, message, "{name}");
        }
    }
}
