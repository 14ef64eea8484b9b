//! One pod's steps from every component, merged into a timeline and shown three ways: a table
//! for people, a mermaid `sequenceDiagram` in the shape of the classic "what happens when you
//! create a pod" diagram (User, API Server, etcd, Scheduler, kubelet, Container Runtime, CNI),
//! and JSON for tools.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Step;

/// A pod's (or a Service's) merged timeline.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    /// `pod` or `service`.
    #[serde(default = "pod_kind")]
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// When the first step started: the API server receiving the pod, for an API pod.
    pub origin: Option<DateTime<Utc>>,
    pub steps: Vec<Step>,
    /// Components whose steps could not be fetched, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The chain of controllers that made the pod, from the top-most owner down to the pod
    /// itself (`Deployment → ReplicaSet → Pod`); empty for a pod nobody controls. Filled by
    /// `kubelab trace`, which follows the controller ownerReferences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owners: Vec<Hop>,
}

/// One link of a pod's chain of owners: an object, when it was made, by which client, and the
/// event in which its owner's controller said why (`Scaled up replica set web-5d9 from 0 to 3`,
/// `Created pod: web-5d9-x7k`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hop {
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// When it was made: the owner's event time (microseconds) when there is one, else the
    /// object's creationTimestamp (whole seconds).
    pub at: Option<DateTime<Utc>>,
    /// The client that created it (the manager of its first managedFields entry: `kubectl-create`,
    /// `kube-controller-manager`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// The controller that reported making it (the owner's event source: `deployment-controller`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Hop {
    /// `Kind/name`.
    pub fn object(&self) -> String {
        format!("{}/{}", self.kind, self.name)
    }

    /// `by <client>[: <controller> <reason>: <message>]`.
    fn why(&self) -> String {
        let mut out = format!("created by {}", self.created_by.as_deref().unwrap_or("an unknown client"));
        if let (Some(c), Some(r)) = (&self.controller, &self.reason) {
            let _ = write!(out, ": {c} {r}");
            if let Some(m) = &self.message {
                let _ = write!(out, ": {m}");
            }
        }
        out
    }
}

impl Timeline {
    /// Merges steps gathered from several components. A step reported twice (all components in
    /// one process answer from the same recorder) is kept once.
    pub fn new(namespace: &str, name: &str, uid: &str, mut steps: Vec<Step>) -> Timeline {
        steps.sort_by(|a, b| (a.start, &a.component, &a.name, a.end).cmp(&(b.start, &b.component, &b.name, b.end)));
        steps.dedup_by(|a, b| a.start == b.start && a.end == b.end && a.component == b.component && a.name == b.name);
        let origin = steps.first().map(|s| s.start);
        Timeline { kind: pod_kind(), namespace: namespace.into(), name: name.into(), uid: uid.into(), origin, steps, warnings: Vec::new(), owners: Vec::new() }
    }

    /// The same timeline, of another kind of object (`service`).
    pub fn of_kind(mut self, kind: &str) -> Timeline {
        self.kind = kind.into();
        self
    }

    fn offset_ms(&self, s: &Step) -> f64 {
        self.offset_of(s.start)
    }

    fn offset_of(&self, t: DateTime<Utc>) -> f64 {
        self.origin.map(|o| ms(t - o)).unwrap_or(0.0)
    }

    /// `+12.0ms` or `-2345.0ms`: a hop may come before the pod's first step.
    fn signed_offset(&self, t: Option<DateTime<Utc>>) -> String {
        match t {
            Some(t) => format!("{:+.1}ms", self.offset_of(t)),
            None => "?".into(),
        }
    }

    /// One line per step: offset from submission, duration, component, node, step and details.
    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 6]> = vec![["OFFSET".into(), "DURATION".into(), "COMPONENT".into(), "NODE".into(), "STEP".into(), "DETAIL".into()]];
        for s in &self.steps {
            let mut detail: Vec<String> = s.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            if let Some(e) = &s.error {
                detail.insert(0, format!("FAILED: {e}"));
            }
            rows.push([
                format!("+{:.1}ms", self.offset_ms(s)),
                format!("{:.1}ms", ms(s.duration())),
                s.component.to_string(),
                s.node.clone().unwrap_or_else(|| "-".into()),
                s.name.to_string(),
                detail.join(" "),
            ]);
        }
        let widths: Vec<usize> = (0..5).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
        let mut out = format!("{} {}/{} (uid {})\n", self.kind, self.namespace, self.name, self.uid);
        if !self.owners.is_empty() {
            let chain: Vec<String> = self.owners.iter().map(Hop::object).collect();
            let _ = writeln!(out, "made by {}", chain.join(" → "));
            let w = chain.iter().map(|c| c.chars().count()).max().unwrap_or(0);
            let offsets: Vec<String> = self.owners.iter().map(|h| self.signed_offset(h.at)).collect();
            let ow = offsets.iter().map(|o| o.chars().count()).max().unwrap_or(0);
            for ((h, c), o) in self.owners.iter().zip(&chain).zip(&offsets) {
                let _ = writeln!(out, "  {o:>ow$}   {c:<w$}   {}", h.why());
            }
        }
        for r in &rows {
            let mut line = String::new();
            for (i, w) in widths.iter().enumerate() {
                let _ = write!(line, "{:<w$}   ", r[i], w = w);
            }
            line.push_str(&r[5]);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if self.steps.is_empty() {
            out.push_str("no steps recorded (the components keep only recent objects)\n");
        }
        for w in &self.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }

    /// A mermaid `sequenceDiagram` with the measured times on the arrows.
    pub fn mermaid(&self) -> String {
        let mut out = String::from("sequenceDiagram\n");
        let pod_ip = self.steps.iter().find_map(|s| s.fields.get("pod_ip"));
        // The participants that take part, in the fixed order (a bare pod has no Controller
        // Manager; a pod a ReplicaSet made does).
        let mut used: std::collections::HashSet<&str> = self.steps.iter().flat_map(|s| {
            let (from, to) = arrow(s);
            [from, to]
        }).collect();
        used.extend(self.owners.iter().flat_map(|h| [participant(h.created_by.as_ref()), "API"]));
        if self.steps.iter().any(|s| s.component == "cri" && s.name == "RunPodSandbox") {
            used.extend(["CR", "CNI"]);
        }
        for (id, label) in PARTICIPANTS.iter().filter(|(id, _)| used.contains(id)) {
            let _ = writeln!(out, "    participant {id} as {label}");
        }
        // The owners' creations come first: who made each link, and the event saying why.
        for (i, h) in self.owners.iter().enumerate() {
            let from = participant(h.created_by.as_ref());
            let is_pod = i + 1 == self.owners.len();
            let why = match (&h.controller, &h.reason, &h.message) {
                (Some(c), Some(r), Some(m)) => format!("{c} {r}: {m}"),
                (Some(c), Some(r), None) => format!("{c} {r}"),
                _ => format!("by {}", h.created_by.as_deref().unwrap_or("an unknown client")),
            };
            if is_pod && i > 0 {
                // The pod's create request is among the steps: say only why it was made.
                let _ = writeln!(out, "    Note over {from},API: {}", mermaid_text(&format!("{why} ({})", self.signed_offset(h.at))));
            } else if !is_pod {
                let label = format!("create {} {} ({})", h.object(), why, self.signed_offset(h.at));
                let _ = writeln!(out, "    {from}->>API: {}", mermaid_text(&label));
            }
        }
        for s in &self.steps {
            let (from, to) = arrow(s);
            let mut label = format!("{} {:.1} ms (+{:.0} ms)", summary(s), ms(s.duration()), self.offset_ms(s));
            if let Some(e) = &s.error {
                label = format!("FAILED {label}: {e}");
            }
            let _ = writeln!(out, "    {from}->>{to}: {}", mermaid_text(&label));
            if s.component == "cri" && s.name == "RunPodSandbox" {
                let ip = pod_ip.map(|ip| format!(" → {ip}")).unwrap_or_default();
                let _ = writeln!(out, "    CR->>CNI: {}", mermaid_text(&format!("ADD bridge + host-local{ip} (within RunPodSandbox)")));
            }
        }
        out
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

fn pod_kind() -> String {
    "pod".into()
}

const PARTICIPANTS: [(&str, &str); 11] = [
    ("U", "User"),
    ("CM", "Controller Manager"),
    ("API", "API Server"),
    ("ETCD", "etcd (kubelab store)"),
    ("S", "Scheduler"),
    ("K", "kubelet (kubelab nodeagent)"),
    ("CSI", "CSI Driver (kubelab csi-hostpath)"),
    ("CR", "Container Runtime (containerd)"),
    ("R", "Image Registry"),
    ("CNI", "CNI"),
    ("P", "kube-proxy (kubelab proxy)"),
];

/// The fields worth showing on a diagram's arrow, in this order.
const SUMMARY_FIELDS: &[&str] = &["verb", "resource", "user", "allowed_by", "type", "watcher", "plugin", "node", "container", "image", "volume", "revision", "pod_ip", "sync", "endpoints"];

/// A step's name with its telling fields: `request create pods`, `watch event sent ADDED kubelet`.
fn summary(s: &Step) -> String {
    let mut out = s.name.to_string();
    for f in SUMMARY_FIELDS {
        if let Some(v) = s.fields.get(*f) {
            out.push(' ');
            out.push_str(v);
        }
    }
    // An image pull's size, in bytes.
    if let Some(bytes) = s.fields.get("bytes") {
        out.push_str(&format!(" {bytes} bytes"));
    }
    // Every node runs a proxy: which one synced.
    if let (true, Some(node)) = (s.component == "proxy", &s.node) {
        out.push_str(" on ");
        out.push_str(node);
    }
    out
}

/// Who talks to whom in a step, from its component and name.
fn arrow(s: &Step) -> (&'static str, &'static str) {
    let n = &*s.name;
    match &*s.component {
        "apiserver" if n.starts_with("store") => ("API", "ETCD"),
        "apiserver" if n.starts_with("watch event") => ("API", participant(s.fields.get("watcher"))),
        "apiserver" if n == "request" => (participant(s.fields.get("caller")), "API"),
        "apiserver" => ("API", "API"),
        "store" => ("ETCD", "ETCD"),
        "scheduler" if n == "bind" => ("S", "API"),
        "scheduler" => ("S", "S"),
        "nodeagent" if n.contains("status") || n.contains("mirror") => ("K", "API"),
        // The node agent's pull, which containerd makes of the registry (the CRI PullImage
        // call is its own step, K to CR).
        "nodeagent" if n == "image_pull" => ("CR", "R"),
        "nodeagent" => ("K", "K"),
        "cri" => ("K", "CR"),
        // NodeStageVolume, NodePublishVolume: the seed's "mount the volume to the node".
        "csi" => ("K", "CSI"),
        "proxy" => ("P", "P"),
        _ => ("API", "API"),
    }
}

/// The participant a client is drawn as, from the name in its User-Agent (the API server records
/// it as a request's `caller` and a watch event's `watcher`): the components by the names they
/// give themselves, anyone else (kubectl, a script) as the User.
fn participant(client: Option<&String>) -> &'static str {
    match client.map(String::as_str) {
        Some("kube-scheduler") => "S",
        Some("kubelet") => "K",
        Some("kube-controller-manager") => "CM",
        Some("kube-proxy") => "P",
        _ => "U",
    }
}

/// Mermaid message text cannot hold `;` (it ends the statement), `#` or `%%` (they start a
/// comment), or a line break.
fn mermaid_text(s: &str) -> String {
    let mut t = s.replace(';', ",").replace('#', "no.").replace('\n', " ");
    while t.contains("%%") {
        t = t.replace("%%", "%");
    }
    t
}

fn ms(d: chrono::Duration) -> f64 {
    d.num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(component: &'static str, name: &'static str, start_ms: i64, dur_ms: i64) -> Step {
        let t0 = DateTime::parse_from_rfc3339("2026-11-30T05:00:00Z").map(|t| t.with_timezone(&Utc)).unwrap_or_default();
        let start = t0 + chrono::Duration::milliseconds(start_ms);
        Step { end: start + chrono::Duration::milliseconds(dur_ms), ..Step::instant(component, name, start) }
    }

    fn timeline() -> Timeline {
        let sandbox = step("cri", "RunPodSandbox", 40, 160);
        let step5 = step("nodeagent", "step5_run_pod_sandbox", 39, 170).with_field("pod_ip", "10.244.1.7");
        let mut failed = step("cri", "StartContainer", 220, 80);
        failed.error = Some("exec: \"nope\": not found".into());
        let steps = vec![step("scheduler", "bind", 20, 5), step("apiserver", "request", 0, 12).with_field("verb", "create").with_field("resource", "pods"), step("apiserver", "store write", 3, 6), sandbox.clone(), sandbox, step5, failed];
        Timeline::new("default", "web", "uid-1", steps)
    }

    #[test]
    fn steps_are_ordered_deduplicated_and_offset_from_the_first() {
        let t = timeline();
        let names: Vec<_> = t.steps.iter().map(|s| &*s.name).collect();
        assert_eq!(names, ["request", "store write", "bind", "step5_run_pod_sandbox", "RunPodSandbox", "StartContainer"]);
        let table = t.table();
        assert!(table.contains("+40.0ms"), "{table}");
        assert!(table.contains("160.0ms"), "{table}");
        assert!(table.contains("FAILED: exec"), "{table}");
    }

    #[test]
    fn mermaid_has_the_participants_arrows_and_times() {
        let m = timeline().mermaid();
        assert!(m.starts_with("sequenceDiagram\n"));
        assert!(m.contains("participant ETCD as etcd (kubelab store)"));
        assert!(m.contains("U->>API: request create pods 12.0 ms (+0 ms)"), "{m}");
        assert!(m.contains("API->>ETCD: store write 6.0 ms (+3 ms)"), "{m}");
        assert!(m.contains("S->>API: bind"), "{m}");
        assert!(m.contains("K->>CR: RunPodSandbox 160.0 ms (+40 ms)"), "{m}");
        assert!(m.contains("CR->>CNI: ADD bridge + host-local → 10.244.1.7"), "{m}");
        assert!(m.contains("K->>CR: FAILED StartContainer"), "{m}");
        assert!(!m.contains("participant R as"), "no pull, no registry: {m}");
    }

    /// A pull: containerd's round trip to the registry, with the image and its size.
    #[test]
    fn an_image_pull_draws_the_registry() {
        let mut t = timeline();
        let pull = step("nodeagent", "image_pull", 205, 53).with_field("image", "registry:5000/library/busybox:1.36").with_field("registry", "registry:5000").with_field("bytes", 2130588);
        t = Timeline::new("default", "web", "uid-1", t.steps.into_iter().chain([pull]).collect());
        let m = t.mermaid();
        assert!(m.contains("participant R as Image Registry"), "{m}");
        assert!(m.contains("CR->>R: image_pull registry:5000/library/busybox:1.36 2130588 bytes 53.0 ms"), "{m}");
    }

    /// A claim's volume: the node agent's CSI calls, drawn to the CSI driver (between the
    /// kubelet and the runtime, as the seed's diagram has it), each with its volume.
    #[test]
    fn csi_calls_draw_the_csi_driver() {
        let t = timeline();
        assert!(!t.mermaid().contains("participant CSI"), "no claim, no CSI driver");
        let stage = step("csi", "NodeStageVolume", 30, 4).with_field("volume", "pvc-1234");
        let publish = step("csi", "NodePublishVolume", 35, 2).with_field("volume", "pvc-1234");
        let t = Timeline::new("default", "web", "uid-1", t.steps.into_iter().chain([stage, publish]).collect());
        let m = t.mermaid();
        let k = m.find("participant K as").unwrap_or(usize::MAX);
        let csi = m.find("participant CSI as CSI Driver (kubelab csi-hostpath)").unwrap_or(0);
        let cr = m.find("participant CR as").unwrap_or(0);
        assert!(k < csi && csi < cr, "{m}");
        assert!(m.contains("K->>CSI: NodeStageVolume pvc-1234 4.0 ms (+30 ms)"), "{m}");
        assert!(m.contains("K->>CSI: NodePublishVolume pvc-1234 2.0 ms (+35 ms)"), "{m}");
    }

    #[test]
    fn the_chain_of_owners_is_shown_before_the_steps() {
        let mut t = timeline();
        let origin = t.origin.unwrap_or_default();
        let hop = |kind: &str, name: &str, ms: i64, by: &str, why: Option<(&str, &str, &str)>| Hop {
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            at: Some(origin + chrono::Duration::milliseconds(ms)),
            created_by: Some(by.into()),
            controller: why.map(|w| w.0.into()),
            reason: why.map(|w| w.1.into()),
            message: why.map(|w| w.2.into()),
        };
        t.owners = vec![
            hop("Deployment", "web", -2000, "kubectl-create", None),
            hop("ReplicaSet", "web-5d9", -1500, "kube-controller-manager", Some(("deployment-controller", "ScalingReplicaSet", "Scaled up replica set web-5d9 from 0 to 3"))),
            hop("Pod", "web", 0, "kube-controller-manager", Some(("replicaset-controller", "SuccessfulCreate", "Created pod: web"))),
        ];
        let table = t.table();
        assert!(table.contains("made by Deployment/web → ReplicaSet/web-5d9 → Pod/web"), "{table}");
        assert!(table.contains("-2000.0ms   Deployment/web"), "{table}");
        assert!(table.contains("created by kube-controller-manager: deployment-controller ScalingReplicaSet: Scaled up replica set web-5d9 from 0 to 3"), "{table}");
        let m = t.mermaid();
        assert!(m.contains("participant CM as Controller Manager"), "{m}");
        assert!(m.contains("U->>API: create Deployment/web by kubectl-create (-2000.0ms)"), "{m}");
        assert!(m.contains("CM->>API: create ReplicaSet/web-5d9 deployment-controller ScalingReplicaSet: Scaled up replica set web-5d9 from 0 to 3 (-1500.0ms)"), "{m}");
        assert!(m.contains("Note over CM,API: replicaset-controller SuccessfulCreate: Created pod: web (+0.0ms)"), "{m}");
        let back: Timeline = serde_json::from_str(&t.json()).expect("json");
        assert_eq!(back.owners, t.owners);
    }

    #[test]
    fn requests_are_drawn_from_their_caller_and_watch_events_to_their_watcher() {
        let request = |caller: &str| step("apiserver", "request", 0, 1).with_field("caller", caller);
        let event = |watcher: &str| step("apiserver", "watch event sent", 0, 0).with_field("watcher", watcher);
        let cases = [
            (request("kube-scheduler"), ("S", "API")),
            (request("kubelet"), ("K", "API")),
            (request("kube-controller-manager"), ("CM", "API")),
            (request("kubectl"), ("U", "API")),
            (step("apiserver", "request", 0, 1), ("U", "API")),
            (event("kube-scheduler"), ("API", "S")),
            (event("kubelet"), ("API", "K")),
            (event("kube-controller-manager"), ("API", "CM")),
            (event("kubectl.1.32"), ("API", "U")),
        ];
        for (s, want) in cases {
            assert_eq!(arrow(&s), want, "{:?}", s.fields);
        }
    }

    #[test]
    fn a_services_timeline_draws_the_controller_and_each_nodes_proxy() {
        let steps = vec![
            step("apiserver", "request", 0, 10).with_field("verb", "create").with_field("resource", "services").with_field("caller", "kubectl"),
            step("apiserver", "request", 30, 5).with_field("verb", "create").with_field("resource", "endpointslices").with_field("caller", "kube-controller-manager"),
            step("apiserver", "watch event sent", 36, 0).with_field("type", "ADDED").with_field("watcher", "kube-proxy"),
            Step { node: Some("node2".into()), ..step("proxy", "sync", 1040, 80).with_field("sync", "partial") },
        ];
        let t = Timeline::new("default", "web", "uid-s", steps).of_kind("service");
        assert!(t.table().starts_with("service default/web (uid uid-s)\n"), "{}", t.table());
        let m = t.mermaid();
        assert!(m.contains("participant CM as Controller Manager") && m.contains("participant P as kube-proxy (kubelab proxy)"), "{m}");
        assert!(m.contains("CM->>API: request create endpointslices 5.0 ms (+30 ms)"), "{m}");
        assert!(m.contains("API->>P: watch event sent ADDED kube-proxy"), "{m}");
        assert!(m.contains("P->>P: sync partial on node2 80.0 ms (+1040 ms)"), "{m}");
        let back: Timeline = serde_json::from_str(&t.json()).expect("json");
        assert_eq!(back.kind, "service");
    }
}
