//! Mirrors kubelet's eviction/helpers.go: the pure parts of the eviction manager — parsing
//! `--eviction-hard`, turning raw node readings into signal observations, deciding which
//! thresholds are met and which conditions hold, ranking pods for eviction, and the messages
//! an evicted or rejected pod carries. Everything here is a function of its arguments, so it is
//! table-tested below; the I/O lives in [`crate::stats`] and [`super::eviction_manager`].

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use api::core::v1::helper::qos::{PodQOSClass, compute_pod_qos};
use api::core::v1::well_known::TAINT_NODE_MEMORY_PRESSURE;
use api::pod::{is_critical_pod, pod_priority};
use k8s_openapi::api::core::v1::{Container, Pod};

use super::types::{NodeConditionType, Signal, SignalObservation, SignalObservations, Threshold, ThresholdValue};
use crate::stats::{NodeStats, PodUsage};

/// The reason of an evicted (or, under pressure, rejected) pod, and of its event.
pub(crate) const REASON: &str = "Evicted";
/// The node event when a threshold is met (kubelet's EvictionThresholdMet).
pub(crate) const EVICTION_THRESHOLD_MET: &str = "EvictionThresholdMet";

/// Why an `--eviction-hard` entry does not parse; each names the entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("eviction threshold {entry:?}: want signal<quantity or signal<percent% (the only operator is <)")]
    Operator { entry: String },
    #[error("eviction threshold {entry:?}: unknown signal {name:?} (known: {})", known_signals())]
    UnknownSignal { entry: String, name: String },
    #[error("eviction threshold {entry:?}: signal {signal} is given twice")]
    Duplicate { entry: String, signal: Signal },
    #[error("eviction threshold {entry:?}: {value:?} is not a percentage")]
    NotAPercentage { entry: String, value: String },
    #[error("eviction threshold {entry:?}: a percentage must be in [0%, 100%]")]
    PercentageOutOfRange { entry: String },
    #[error("eviction threshold {entry:?}: {value:?} is not a quantity (e.g. 100Mi)")]
    NotAQuantity { entry: String, value: String },
    #[error("eviction threshold {entry:?}: the quantity must not be negative")]
    Negative { entry: String },
}

fn known_signals() -> String {
    Signal::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
}

/// Parse an `--eviction-hard` list: `signal<quantity` or `signal<percent%`, comma-separated.
/// Errors say which entry is wrong and why.
pub fn parse_threshold_config(s: &str) -> Result<Vec<Threshold>, ThresholdError> {
    let mut out: Vec<Threshold> = vec![];
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, value) = entry.split_once('<').ok_or_else(|| ThresholdError::Operator { entry: entry.to_string() })?;
        let signal = Signal::parse(name.trim())
            .ok_or_else(|| ThresholdError::UnknownSignal { entry: entry.to_string(), name: name.to_string() })?;
        if out.iter().any(|t| t.signal == signal) {
            return Err(ThresholdError::Duplicate { entry: entry.to_string(), signal });
        }
        let value = value.trim();
        let value = if let Some(p) = value.strip_suffix('%') {
            let pct: f64 = p
                .trim()
                .parse()
                .map_err(|_| ThresholdError::NotAPercentage { entry: entry.to_string(), value: value.to_string() })?;
            if !(0.0..=100.0).contains(&pct) {
                return Err(ThresholdError::PercentageOutOfRange { entry: entry.to_string() });
            }
            // 0% turns the signal off, as the kubelet reads it (kind's nodes do this for disk).
            if pct == 0.0 {
                continue;
            }
            ThresholdValue::Percentage(pct / 100.0)
        } else {
            let q = apimachinery::resource::parse_quantity_units(value)
                .ok_or_else(|| ThresholdError::NotAQuantity { entry: entry.to_string(), value: value.to_string() })?;
            if q < 0 {
                return Err(ThresholdError::Negative { entry: entry.to_string() });
            }
            if q == 0 {
                continue;
            }
            ThresholdValue::Quantity(q)
        };
        out.push(Threshold { signal, value });
    }
    Ok(out)
}

/// The amount a threshold stands for, given the signal's capacity (GetThresholdQuantity).
pub(crate) fn threshold_quantity(value: ThresholdValue, capacity: i64) -> i64 {
    match value {
        ThresholdValue::Quantity(q) => q,
        ThresholdValue::Percentage(p) => (capacity as f64 * p) as i64,
    }
}

/// The thresholds whose signal's available amount is below them (thresholdsMet). A signal that
/// was not observed meets nothing.
pub(crate) fn thresholds_met(thresholds: &[Threshold], observations: &SignalObservations) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            observations
                .get(&t.signal)
                .is_some_and(|o| o.available < threshold_quantity(t.value, o.capacity))
        })
        .copied()
        .collect()
}

/// The conditions the met thresholds set, sorted, without repeats (nodeConditions).
pub(crate) fn node_conditions(met: &[Threshold]) -> Vec<NodeConditionType> {
    let mut v: Vec<NodeConditionType> = met.iter().map(|t| t.signal.node_condition()).collect();
    v.sort();
    v.dedup();
    v
}

/// Remember when each condition was last seen (nodeConditionsLastObservedAt) and return the
/// ones seen within `period` of `now` (nodeConditionsObservedSince): a condition stays for the
/// pressure transition period after its threshold stops being met, so it does not flap.
pub(crate) fn conditions_observed_since(
    last_observed: &mut BTreeMap<NodeConditionType, Instant>,
    current: &[NodeConditionType],
    period: Duration,
    now: Instant,
) -> Vec<NodeConditionType> {
    for c in current {
        last_observed.insert(*c, now);
    }
    last_observed.retain(|_, t| now.saturating_duration_since(*t) < period);
    last_observed.keys().copied().collect()
}

/// The signals one look at the node gives (makeSignalObservations): memory.available is the
/// capacity minus the root cgroup's working set, the filesystems give free bytes and (when they
/// count inodes) free inodes, pid.available is `pid_max` minus the processes running. A reading
/// the stats could not make gives no observation.
pub(crate) fn make_signal_observations(node: &NodeStats) -> SignalObservations {
    let mut obs = SignalObservations::new();
    if let Some(m) = node.memory {
        obs.insert(Signal::MemoryAvailable, SignalObservation { available: (m.capacity - m.working_set).max(0), capacity: m.capacity });
    }
    for (fs, bytes, inodes) in [
        (node.nodefs, Signal::NodeFsAvailable, Signal::NodeFsInodesFree),
        (node.imagefs, Signal::ImageFsAvailable, Signal::ImageFsInodesFree),
    ] {
        if let Some(fs) = fs {
            obs.insert(bytes, SignalObservation { available: fs.available, capacity: fs.capacity });
            if fs.inodes > 0 {
                obs.insert(inodes, SignalObservation { available: fs.inodes_free, capacity: fs.inodes });
            }
        }
    }
    if let Some(r) = node.rlimit {
        obs.insert(Signal::PidAvailable, SignalObservation { available: (r.max_pid - r.num_of_running_processes).max(0), capacity: r.max_pid });
    }
    obs
}

/// A quantity as Kubernetes prints it: bytes in the largest binary suffix that divides them
/// exactly (`100Mi`, `51200Ki`, `1000`); counts (inodes, pids) as plain numbers.
pub(crate) fn format_quantity(signal_resource: &str, v: i64) -> String {
    if signal_resource == "inodes" || signal_resource == "pids" {
        return v.to_string();
    }
    format_bytes(v)
}

pub(crate) fn format_bytes(v: i64) -> String {
    if v == 0 {
        return "0".into();
    }
    for (suffix, unit) in [("Ei", 1i64 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)] {
        if v % unit == 0 {
            return format!("{}{suffix}", v / unit);
        }
    }
    v.to_string()
}

fn quantity(list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>, name: &str) -> Option<i64> {
    list.and_then(|l| l.get(name)).and_then(|q| apimachinery::resource::parse_quantity_units(&q.0))
}

fn container_request(c: &Container, resource: &str) -> i64 {
    quantity(c.resources.as_ref().and_then(|r| r.requests.as_ref()), resource)
        .or_else(|| quantity(c.resources.as_ref().and_then(|r| r.limits.as_ref()), resource))
        .unwrap_or(0)
}

fn container_limit(c: &Container, resource: &str) -> Option<i64> {
    quantity(c.resources.as_ref().and_then(|r| r.limits.as_ref()), resource)
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default()
}

/// A pod's request for `resource`: the sum over its app containers, or the largest init
/// container's when that is more (resourcehelper.PodRequests).
pub(crate) fn pod_request(pod: &Pod, resource: &str) -> i64 {
    let apps: i64 = containers(pod).iter().map(|c| container_request(c, resource)).sum();
    let init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .and_then(|ics| ics.iter().map(|c| container_request(c, resource)).max())
        .unwrap_or(0);
    apps.max(init)
}

/// One pod to rank, with what it uses.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub(crate) pod: std::sync::Arc<Pod>,
    pub(crate) usage: PodUsage,
}

/// Orders `a` before `b` when `a` should be evicted first, by the first of `cmps` that tells
/// them apart (kubelet's multiSorter).
fn chain(a: &Candidate, b: &Candidate, cmps: &[fn(&Candidate, &Candidate) -> Ordering]) -> Ordering {
    cmps.iter().map(|f| f(a, b)).find(|o| *o != Ordering::Equal).unwrap_or(Ordering::Equal)
}

/// Pods without stats first, then those using more than they requested.
fn exceeds(a: Option<i64>, a_req: i64, b: Option<i64>, b_req: i64) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => (b > b_req).cmp(&(a > a_req)),
    }
}

fn exceed_memory_requests(a: &Candidate, b: &Candidate) -> Ordering {
    exceeds(a.usage.memory, pod_request(&a.pod, "memory"), b.usage.memory, pod_request(&b.pod, "memory"))
}

fn exceed_disk_requests(a: &Candidate, b: &Candidate) -> Ordering {
    exceeds(a.usage.ephemeral(), pod_request(&a.pod, "ephemeral-storage"), b.usage.ephemeral(), pod_request(&b.pod, "ephemeral-storage"))
}

/// Lower priority first.
fn priority(a: &Candidate, b: &Candidate) -> Ordering {
    pod_priority(&a.pod).cmp(&pod_priority(&b.pod))
}

/// More usage above the request first.
fn memory_over_request(a: &Candidate, b: &Candidate) -> Ordering {
    let over = |c: &Candidate| c.usage.memory.unwrap_or(0) - pod_request(&c.pod, "memory");
    over(b).cmp(&over(a))
}

fn disk_over_request(a: &Candidate, b: &Candidate) -> Ordering {
    let over = |c: &Candidate| c.usage.ephemeral().unwrap_or(0) - pod_request(&c.pod, "ephemeral-storage");
    over(b).cmp(&over(a))
}

/// rankMemoryPressure: pods using more memory than requested, then lower priority, then by
/// usage above request.
pub(crate) fn rank_memory_pressure(pods: &mut [Candidate]) {
    pods.sort_by(|a, b| chain(a, b, &[exceed_memory_requests, priority, memory_over_request]));
}

/// rankDiskPressureFunc: the same order on ephemeral storage.
pub(crate) fn rank_disk_pressure(pods: &mut [Candidate]) {
    pods.sort_by(|a, b| chain(a, b, &[exceed_disk_requests, priority, disk_over_request]));
}

/// rankPIDPressure: lower priority first (kubelab has no per-pod process counts).
pub(crate) fn rank_pid_pressure(pods: &mut [Candidate]) {
    pods.sort_by(priority);
}

/// The status message of a pod evicted for `signal` (evictionMessage): the node's shortage,
/// then each container that used more than it requested.
pub(crate) fn eviction_message(signal: Signal, threshold: i64, available: i64, pod: &Pod, usage: &PodUsage) -> String {
    let resource = signal.resource();
    let mut m = format!(
        "The node was low on resource: {resource}. Threshold quantity: {}, available: {}. ",
        format_quantity(resource, threshold),
        format_quantity(resource, available)
    );
    let per_container = match resource {
        "memory" => Some(&usage.container_memory),
        "ephemeral-storage" => Some(&usage.container_disk),
        _ => None,
    };
    if let Some(per) = per_container {
        for c in containers(pod) {
            let Some(used) = per.get(&c.name) else { continue };
            let req = container_request(c, resource);
            if *used > req {
                m.push_str(&format!(
                    "Container {} was using {}, request is {}, has larger consumption of {resource}. ",
                    c.name,
                    format_bytes(*used),
                    format_bytes(req)
                ));
            }
        }
    }
    m
}

/// Whether the pod broke one of its own local-storage limits, and the message if so, checked in
/// kubelet's order (localStorageEviction): an emptyDir over its `sizeLimit`, the pod over the
/// sum of its containers' ephemeral-storage limits, a container over its own limit.
pub(crate) fn local_storage_violation(pod: &Pod, usage: &PodUsage) -> Option<String> {
    if !usage.disk_known {
        return None;
    }
    // Step 1: emptyDir sizeLimit (disk-backed ones: a memory-backed one is a sized tmpfs).
    for v in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        let Some(ed) = &v.empty_dir else { continue };
        if ed.medium.as_deref().is_some_and(|m| !m.is_empty()) {
            continue;
        }
        let Some(limit) = ed.size_limit.as_ref() else { continue };
        let Some(limit_bytes) = apimachinery::resource::parse_quantity_units(&limit.0) else { continue };
        if usage.volumes.get(&v.name).is_some_and(|used| *used > limit_bytes) {
            return Some(format!("Usage of EmptyDir volume {:?} exceeds the limit {:?}. ", v.name, limit.0));
        }
    }
    // Step 2: the pod's total against the sum of its containers' limits (only when one is set).
    let limits: Vec<i64> = containers(pod).iter().filter_map(|c| container_limit(c, "ephemeral-storage")).collect();
    if !limits.is_empty() {
        let total: i64 = limits.iter().sum();
        if usage.ephemeral().is_some_and(|u| u > total) {
            return Some(format!(
                "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
                format_bytes(total)
            ));
        }
    }
    // Step 3: each container against its own limit (writable layer and logs).
    for c in containers(pod) {
        let Some(limit) = container_limit(c, "ephemeral-storage") else { continue };
        if usage.container_disk.get(&c.name).is_some_and(|u| *u > limit) {
            return Some(format!("Container {} exceeded its local ephemeral storage limit {:?}. ", c.name, format_bytes(limit)));
        }
    }
    None
}

/// The admission verdict under pressure (the eviction manager's Admit): nothing is refused
/// without pressure, and critical pods never are; under memory pressure alone only BestEffort
/// pods are refused; under any other pressure every pod is. Some((reason, message)) rejects.
pub(crate) fn admit_under_pressure(conditions: &[NodeConditionType], pod: &Pod) -> Option<(String, String)> {
    if conditions.is_empty() || is_critical_pod(pod) {
        return None;
    }
    if conditions == [NodeConditionType::MemoryPressure] {
        let best_effort = compute_pod_qos(pod) == PodQOSClass::BestEffort;
        let tolerates = pod.spec.as_ref().and_then(|s| s.tolerations.as_ref()).is_some_and(|ts| {
            ts.iter().any(|t| {
                (t.key.as_deref() == Some(TAINT_NODE_MEMORY_PRESSURE) || (t.key.is_none() && t.operator.as_deref() == Some("Exists")))
                    && t.effect.as_deref().is_none_or(|e| e.is_empty() || e == "NoSchedule")
            })
        });
        if !best_effort || tolerates {
            return None;
        }
    }
    let names: Vec<&str> = conditions.iter().map(|c| c.as_str()).collect();
    Some((REASON.to_string(), format!("The node had condition: [{}]. ", names.join(" "))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threshold_parsing_table() {
        let ok = parse_threshold_config("memory.available<100Mi, nodefs.available<10%,pid.available<1000").expect("parses");
        assert_eq!(
            ok,
            vec![
                Threshold { signal: Signal::MemoryAvailable, value: ThresholdValue::Quantity(100 << 20) },
                Threshold { signal: Signal::NodeFsAvailable, value: ThresholdValue::Percentage(0.1) },
                Threshold { signal: Signal::PidAvailable, value: ThresholdValue::Quantity(1000) },
            ]
        );
        assert_eq!(parse_threshold_config("").expect("empty"), vec![]);
        let defaults = parse_threshold_config(super::super::DEFAULT_EVICTION_HARD).expect("defaults parse");
        assert_eq!(defaults.len(), 4);
        // Zero turns a signal off (kind's nodes: `nodefs.available<0%`).
        let off = parse_threshold_config("memory.available<100Mi,nodefs.available<0%,imagefs.available<0").expect("zeros parse");
        assert_eq!(off.iter().map(|t| t.signal).collect::<Vec<_>>(), vec![Signal::MemoryAvailable]);
        for (input, want) in [
            ("memory.available>100Mi", "the only operator is <"),
            ("memory.free<1Gi", "unknown signal"),
            ("memory.available<lots", "is not a quantity"),
            ("nodefs.available<101%", "[0%, 100%]"),
            ("nodefs.available<x%", "not a percentage"),
            ("memory.available<-1", "must not be negative"),
            ("memory.available<1Mi,memory.available<2Mi", "given twice"),
        ] {
            let e = parse_threshold_config(input).expect_err(input).to_string();
            assert!(e.contains(want), "{input}: {e}");
        }
    }

    #[test]
    fn thresholds_met_and_conditions() {
        let ts = parse_threshold_config("memory.available<100Mi,nodefs.available<10%,imagefs.available<15%").expect("parse");
        let obs = |mem: i64, nodefs: i64| {
            SignalObservations::from([
                (Signal::MemoryAvailable, SignalObservation { available: mem, capacity: 1 << 30 }),
                (Signal::NodeFsAvailable, SignalObservation { available: nodefs, capacity: 1000 }),
            ])
        };
        assert!(thresholds_met(&ts, &obs(200 << 20, 500)).is_empty());
        let met = thresholds_met(&ts, &obs(50 << 20, 500));
        assert_eq!(met.iter().map(|t| t.signal).collect::<Vec<_>>(), vec![Signal::MemoryAvailable]);
        let met = thresholds_met(&ts, &obs(50 << 20, 99));
        assert_eq!(node_conditions(&met), vec![NodeConditionType::MemoryPressure, NodeConditionType::DiskPressure]);
        // Exactly at the threshold is not below it; an unobserved signal (imagefs) meets nothing.
        assert!(thresholds_met(&ts, &obs(100 << 20, 100)).is_empty());
    }

    #[test]
    fn conditions_stay_for_the_transition_period() {
        let mut last = BTreeMap::new();
        let t0 = Instant::now();
        let period = Duration::from_secs(300);
        let mp = NodeConditionType::MemoryPressure;
        assert_eq!(conditions_observed_since(&mut last, &[mp], period, t0), vec![mp]);
        assert_eq!(conditions_observed_since(&mut last, &[], period, t0 + Duration::from_secs(299)), vec![mp], "still within the period");
        assert!(conditions_observed_since(&mut last, &[], period, t0 + Duration::from_secs(300)).is_empty());
    }

    #[test]
    fn memory_and_pid_observations_from_fixtures() {
        use crate::stats::memory::{memory_stats, parse_memory_stat, working_set};
        use crate::stats::pidlimit::rlimit_stats;
        let meminfo = "MemTotal:        2048000 kB\nMemFree:          100000 kB\n";
        let stat = "cache 100\nrss 200\ntotal_cache 1000\ntotal_inactive_file 104857600\n";
        let observe = |node: NodeStats, signal: Signal| make_signal_observations(&node).get(&signal).copied();
        let memory = memory_stats(meminfo, "524288000\n", stat);
        let o = observe(NodeStats { memory, ..Default::default() }, Signal::MemoryAvailable).expect("observation");
        assert_eq!(o.capacity, 2048000 * 1024);
        assert_eq!(o.available, 2048000 * 1024 - (524288000 - 104857600));
        assert_eq!(parse_memory_stat(stat, "total_inactive_file"), Some(104857600));
        assert_eq!(parse_memory_stat(stat, "total_rss"), None);
        assert_eq!(working_set(10, "total_inactive_file 50\n"), 0, "never negative");
        assert!(memory_stats("garbage", "1", "").is_none());
        let rlimit = rlimit_stats("32768\n", 300);
        assert_eq!(observe(NodeStats { rlimit, ..Default::default() }, Signal::PidAvailable), Some(SignalObservation { available: 32468, capacity: 32768 }));
        assert!(rlimit_stats("x", 3).is_none());
    }

    fn pod(yaml: &str) -> Arc<Pod> {
        Arc::new(serde_norway::from_str(yaml).expect("pod yaml"))
    }

    fn cand(name: &str, priority: i32, mem_request: Option<&str>, usage: i64) -> Candidate {
        let resources = mem_request.map(|r| format!(", resources: {{requests: {{memory: {r}}}}}")).unwrap_or_default();
        let p = pod(&format!(
            "metadata: {{name: {name}, uid: {name}}}\nspec:\n  priority: {priority}\n  containers: [{{name: c{resources}}}]\n"
        ));
        Candidate { pod: p, usage: PodUsage { memory: Some(usage), ..Default::default() } }
    }

    fn names(c: &[Candidate]) -> Vec<String> {
        c.iter().map(|c| c.pod.metadata.name.clone().unwrap_or_default()).collect()
    }

    #[test]
    fn memory_ranking_table() {
        struct Case {
            name: &'static str,
            pods: Vec<Candidate>,
            want: Vec<&'static str>,
        }
        let cases = vec![
            Case {
                name: "best effort (usage over a zero request) before a pod within its request",
                pods: vec![cand("guaranteed", 0, Some("64Mi"), 1 << 20), cand("besteffort", 0, None, 1 << 20)],
                want: vec!["besteffort", "guaranteed"],
            },
            Case {
                name: "both over their requests: lower priority first",
                pods: vec![cand("high", 1000, Some("1Mi"), 10 << 20), cand("low", 0, Some("1Mi"), 2 << 20)],
                want: vec!["low", "high"],
            },
            Case {
                name: "same priority: more usage above request first",
                pods: vec![cand("little", 0, Some("1Mi"), 2 << 20), cand("much", 0, Some("1Mi"), 50 << 20)],
                want: vec!["much", "little"],
            },
            Case {
                name: "a pod over its request goes before a lower-priority pod within it",
                pods: vec![cand("within-low", -5, Some("100Mi"), 1 << 20), cand("over-high", 100, Some("1Mi"), 2 << 20)],
                want: vec!["over-high", "within-low"],
            },
        ];
        for mut c in cases {
            rank_memory_pressure(&mut c.pods);
            assert_eq!(names(&c.pods), c.want, "{}", c.name);
        }
        // A pod without stats goes first.
        let mut v = vec![cand("measured", 0, None, 5), Candidate { usage: PodUsage::default(), ..cand("unknown", 0, None, 0) }];
        rank_memory_pressure(&mut v);
        assert_eq!(names(&v), vec!["unknown", "measured"]);
    }

    #[test]
    fn disk_ranking_uses_ephemeral_usage() {
        let disk = |name: &str, prio: i32, req: Option<&str>, used: i64| {
            let resources = req.map(|r| format!(", resources: {{requests: {{ephemeral-storage: {r}}}}}")).unwrap_or_default();
            let p = pod(&format!("metadata: {{name: {name}}}\nspec:\n  priority: {prio}\n  containers: [{{name: c{resources}}}]\n"));
            let usage = PodUsage { container_disk: BTreeMap::from([("c".into(), used)]), disk_known: true, ..Default::default() };
            Candidate { pod: p, usage }
        };
        let mut v = vec![disk("within", 0, Some("1Gi"), 10), disk("small-over", 0, None, 100), disk("big-over", 0, None, 5000)];
        rank_disk_pressure(&mut v);
        assert_eq!(names(&v), vec!["big-over", "small-over", "within"]);
    }

    #[test]
    fn eviction_messages() {
        let p = pod("metadata: {name: p}\nspec:\n  containers:\n  - {name: hog}\n  - {name: calm, resources: {requests: {memory: 64Mi}}}\n");
        let usage = PodUsage {
            memory: Some(30 << 20),
            container_memory: BTreeMap::from([("hog".into(), 20 << 20), ("calm".into(), 10 << 20)]),
            ..Default::default()
        };
        assert_eq!(
            eviction_message(Signal::MemoryAvailable, 100 << 20, 51200 * 1024, &p, &usage),
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. \
             Container hog was using 20Mi, request is 0, has larger consumption of memory. "
        );
        assert_eq!(
            eviction_message(Signal::PidAvailable, 1000, 10, &p, &usage),
            "The node was low on resource: pids. Threshold quantity: 1000, available: 10. "
        );
        assert_eq!(format_bytes(1536), "1536");
        assert_eq!(format_bytes(3 << 10), "3Ki");
    }

    #[test]
    fn local_storage_limits() {
        let p = pod(
            "metadata: {name: p}\nspec:\n  volumes:\n  - {name: scratch, emptyDir: {sizeLimit: 1Mi}}\n  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 1Ki}}\n  containers:\n  - {name: a, resources: {limits: {ephemeral-storage: 2Mi}}}\n  - {name: b, resources: {limits: {ephemeral-storage: 2Mi}}}\n",
        );
        let usage = |scratch: i64, mem: i64, a: i64, b: i64| PodUsage {
            volumes: BTreeMap::from([("scratch".into(), scratch), ("mem".into(), mem)]),
            container_disk: BTreeMap::from([("a".into(), a), ("b".into(), b)]),
            disk_known: true,
            ..Default::default()
        };
        assert_eq!(local_storage_violation(&p, &usage(1 << 20, 1 << 20, 0, 0)), None, "at the limit, and tmpfs is not counted");
        assert_eq!(
            local_storage_violation(&p, &usage((1 << 20) + 1, 0, 0, 0)).as_deref(),
            Some("Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". ")
        );
        assert_eq!(
            local_storage_violation(&p, &usage(1 << 20, 0, 2 << 20, (1 << 20) + 1)).as_deref(),
            Some("Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. ")
        );
        assert_eq!(
            local_storage_violation(&p, &usage(0, 0, 3 << 20, 0)).as_deref(),
            Some("Container a exceeded its local ephemeral storage limit \"2Mi\". ")
        );
        assert_eq!(local_storage_violation(&p, &PodUsage { disk_known: false, ..usage(9 << 20, 0, 0, 0) }), None);
    }

    #[test]
    fn admission_under_pressure() {
        use NodeConditionType::*;
        let be = pod("metadata: {name: be}\nspec: {containers: [{name: c}]}\n");
        let burstable = pod("metadata: {name: b}\nspec: {containers: [{name: c, resources: {requests: {memory: 1Mi}}}]}\n");
        let tolerant = pod("metadata: {name: t}\nspec: {tolerations: [{key: node.kubernetes.io/memory-pressure, operator: Exists, effect: NoSchedule}], containers: [{name: c}]}\n");
        let critical = pod("metadata: {name: k}\nspec: {priority: 2000001000, containers: [{name: c}]}\n");
        assert_eq!(admit_under_pressure(&[], &be), None);
        assert_eq!(
            admit_under_pressure(&[MemoryPressure], &be),
            Some(("Evicted".into(), "The node had condition: [MemoryPressure]. ".into()))
        );
        assert_eq!(admit_under_pressure(&[MemoryPressure], &burstable), None);
        assert_eq!(admit_under_pressure(&[MemoryPressure], &tolerant), None);
        assert_eq!(
            admit_under_pressure(&[DiskPressure], &burstable).map(|r| r.1),
            Some("The node had condition: [DiskPressure]. ".into())
        );
        assert_eq!(
            admit_under_pressure(&[MemoryPressure, DiskPressure], &burstable).map(|r| r.1),
            Some("The node had condition: [MemoryPressure DiskPressure]. ".into())
        );
        assert_eq!(admit_under_pressure(&[DiskPressure, PidPressure], &critical), None);
    }
}
