//! The DaemonSet controller end to end: a kubelab store + API server, `kubelab controller-manager`
//! and `kubelab scheduler`, with Nodes (and their renewed Leases) written by the test, and the
//! test standing in for the kubelets by posting bound pods Running and Ready (a second after
//! they are bound, so a rollout's steps can be seen) and finishing their graceful deletion.
//! With kubectl 1.27 and 1.33:
//! - a DaemonSet puts one pod on each node that should run one — the scheduler binds it there
//!   through its `metadata.name` node affinity — and none on a node with a NoSchedule taint it
//!   does not tolerate or on one its nodeSelector does not match; `rollout status` finishes and
//!   the status counts the nodes;
//! - a new node gets its pod;
//! - `kubectl set image` rolls node by node (never more than `maxUnavailable` = 1 node without a
//!   Ready pod), `rollout status` finishes, `rollout history` lists both revisions and
//!   `rollout undo` brings the first template back as revision 3;
//! - a deleted pod comes back on its node; a failed one is deleted (`FailedDaemonPod`) and
//!   replaced.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(60);

fn now() -> String {
    Timestamp::now().to_string()
}

/// kubectl 1.`minor` with a fresh HOME: (success, stdout + stderr).
fn kubectl_of(c: &ApiCluster, minor: u32, args: &[&str]) -> (bool, String) {
    let bin = e2e::apiserver::kubectl_for(minor).expect("kubectl");
    let home = c.root().join(format!("home-{minor}"));
    std::fs::create_dir_all(&home).expect("home");
    let out = std::process::Command::new(&bin)
        .env_clear()
        .env("HOME", &home)
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .arg("-s")
        .arg(c.url())
        .arg("--request-timeout=20s")
        .args(args)
        .output()
        .expect("run kubectl");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("[kubectl 1.{minor}] {} -> {:?}", args.join(" "), out.status.code());
    (out.status.success(), text)
}

/// A Ready node with room for pods, and its Lease.
async fn create_node(client: &kube::Client, name: &str, labels: Value, taints: Value) {
    let mut labels = labels;
    labels["kubernetes.io/hostname"] = json!(name);
    let alloc = json!({"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let hb = now();
    let c = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "Test", "message": "posted by the test", "lastHeartbeatTime": hb, "lastTransitionTime": hb});
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints},
        "status": {"capacity": alloc, "allocatable": alloc,
                   "conditions": [c("Ready", "True"), c("MemoryPressure", "False"), c("DiskPressure", "False"), c("PIDPressure", "False")]},
    }))
    .expect("node");
    Api::<Node>::all(client.clone()).create(&PostParams::default(), &node).await.expect("create node");
    let lease: Lease = serde_json::from_value(json!({"metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": MicroTime(Timestamp::now())}}))
    .expect("lease");
    Api::<Lease>::namespaced(client.clone(), "kube-node-lease").create(&PostParams::default(), &lease).await.expect("create lease");
}

/// Renews every node's Lease each second, like their kubelets' lease controllers.
fn start_renewing(client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
        loop {
            if let Ok(list) = leases.list(&ListParams::default()).await {
                for l in list.items {
                    let patch = json!({"spec": {"renewTime": MicroTime(Timestamp::now())}});
                    let _ = leases.patch(l.metadata.name.as_deref().unwrap_or_default(), &PatchParams::default(), &Patch::Merge(&patch)).await;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

fn is_ready(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty())
}

/// Stands in for the kubelets: a pod bound for a second is posted Running and Ready.
fn start_hollow_kubelet(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut bound_at: BTreeMap<String, std::time::Instant> = BTreeMap::new();
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for p in list.items {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    if p.metadata.deletion_timestamp.is_some() {
                        // The containers stopped: the kubelet's final delete.
                        let _ = pods.delete(p.metadata.name.as_deref().unwrap_or_default(), &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await;
                        continue;
                    }
                    let failed = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed");
                    if node_of(&p).is_none() || is_ready(&p) || failed {
                        continue;
                    }
                    let since = *bound_at.entry(uid).or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= Duration::from_secs(1) {
                        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}]}});
                        let _ = pods.patch_status(p.metadata.name.as_deref().unwrap_or_default(), &PatchParams::default(), &Patch::Strategic(&status)).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// The live (not being deleted) pods of the DaemonSet, by node: (name, image, ready).
async fn pods_by_node(pods: &Api<Pod>, ds_uid: &str) -> BTreeMap<String, Vec<(String, String, bool)>> {
    let mut by_node: BTreeMap<String, Vec<(String, String, bool)>> = BTreeMap::new();
    for p in pods.list(&ListParams::default()).await.expect("list pods").items {
        if p.metadata.deletion_timestamp.is_some() || !p.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.uid == ds_uid) {
            continue;
        }
        let image = p.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone()).unwrap_or_default();
        let node = node_of(&p).unwrap_or_else(|| "<unbound>".into());
        by_node.entry(node).or_default().push((p.metadata.name.clone().unwrap_or_default(), image, is_ready(&p)));
    }
    by_node
}

/// Waits until every node of `want` holds exactly one Ready pod with `image`, and no other node
/// holds any.
async fn wait_pods_on(c: &ApiCluster, pods: &Api<Pod>, ds_uid: &str, want: &[&str], image: &str) -> BTreeMap<String, Vec<(String, String, bool)>> {
    c.wait_for(&format!("one Ready {image} pod on each of {want:?}"), TIMEOUT, || async {
        let by_node = pods_by_node(pods, ds_uid).await;
        let nodes: Vec<&str> = by_node.keys().map(String::as_str).collect();
        let ok = nodes == want && by_node.values().all(|v| v.len() == 1 && v[0].1 == image && v[0].2);
        if ok { Ok(by_node) } else { Err(format!("{by_node:?}")) }
    })
    .await
}

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      nodeSelector: {agents: "yes"}
      containers:
      - name: c
        image: busybox
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_sets_run_one_pod_per_node_and_roll_node_by_node() {
    let mut c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    c.start_scheduler(&[]).expect("start the scheduler");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), "default");
    create_node(&client, "n1", json!({"agents": "yes"}), json!([])).await;
    create_node(&client, "n2", json!({"agents": "yes"}), json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])).await;
    create_node(&client, "n3", json!({}), json!([])).await;
    let renewer = start_renewing(client.clone());
    let kubelet = start_hollow_kubelet(pods.clone());
    let ok = |minor: u32, args: &[&str]| {
        let (ok, out) = kubectl_of(&c, minor, args);
        assert!(ok, "kubectl 1.{minor} {}:\n{out}", args.join(" "));
        out
    };

    // One pod, on n1 only: n2's taint is not tolerated, n3 fails the nodeSelector.
    let manifest = c.root().join("agent.yaml");
    std::fs::write(&manifest, DAEMONSET).expect("write the manifest");
    ok(27, &["apply", "-f", manifest.to_str().unwrap_or_default()]);
    let out = ok(27, &["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let ds = sets.get("agent").await.expect("get the DaemonSet");
    let uid = ds.metadata.uid.clone().unwrap_or_default();
    let by_node = wait_pods_on(&c, &pods, &uid, &["n1"], "busybox").await;
    let first = pods.get(&by_node["n1"][0].0).await.expect("the pod");
    let labels = first.metadata.labels.clone().unwrap_or_default();
    assert!(labels.contains_key("controller-revision-hash"), "{labels:?}");
    let spec = first.spec.clone().unwrap_or_default();
    let pinned = serde_json::to_value(spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref())).unwrap_or_default();
    assert_eq!(pinned["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"][0], json!({"key": "metadata.name", "operator": "In", "values": ["n1"]}), "{pinned}");
    let tolerations: Vec<String> = spec.tolerations.iter().flatten().map(|t| format!("{}:{}", t.key.clone().unwrap_or_default(), t.effect.clone().unwrap_or_default())).collect();
    for want in ["node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unschedulable:NoSchedule", "node.kubernetes.io/disk-pressure:NoSchedule"] {
        assert!(tolerations.iter().any(|t| t == want), "{want} missing from {tolerations:?}");
    }
    let status = |ds: &DaemonSet| {
        let s = ds.status.clone().unwrap_or_default();
        (s.desired_number_scheduled, s.current_number_scheduled, s.number_ready, s.updated_number_scheduled.unwrap_or(0), s.number_available.unwrap_or(0), s.number_misscheduled)
    };
    c.wait_for("the status: 1 desired, current, ready, updated, available", TIMEOUT, || async {
        let ds = sets.get("agent").await.map_err(|e| e.to_string())?;
        if status(&ds) == (1, 1, 1, 1, 1, 0) { Ok(()) } else { Err(format!("{:?}", status(&ds))) }
    })
    .await;
    let table = ok(33, &["get", "ds", "agent"]);
    assert!(table.lines().nth(1).is_some_and(|l| l.split_whitespace().collect::<Vec<_>>()[1..6] == ["1", "1", "1", "1", "1"]), "DESIRED CURRENT READY UP-TO-DATE AVAILABLE:\n{table}");

    // A new node that should run the daemon gets its pod.
    create_node(&client, "n4", json!({"agents": "yes"}), json!([])).await;
    wait_pods_on(&c, &pods, &uid, &["n1", "n4"], "busybox").await;
    let out = ok(33, &["rollout", "status", "ds/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");

    // set image: node by node, never more than one node without a Ready pod.
    let worst = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (pods, uid, worst) = (pods.clone(), uid.clone(), worst.clone());
        tokio::spawn(async move {
            loop {
                let by_node = pods_by_node(&pods, &uid).await;
                let down = ["n1", "n4"].iter().filter(|n| !by_node.get(**n).is_some_and(|v| v.iter().any(|p| p.2))).count();
                worst.fetch_max(down, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    ok(33, &["set", "image", "daemonset/agent", "c=busybox:1.36"]);
    let out = ok(33, &["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    wait_pods_on(&c, &pods, &uid, &["n1", "n4"], "busybox:1.36").await;
    sampler.abort();
    assert_eq!(worst.load(Ordering::SeqCst), 1, "maxUnavailable 1: one node at a time lacks a Ready pod");

    // History: two revisions; undo brings the first template back as revision 3.
    let history = ok(27, &["rollout", "history", "daemonset/agent"]);
    let numbers: Vec<&str> = history.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| w.parse::<i64>().is_ok()).collect();
    assert_eq!(numbers, ["1", "2"], "{history}");
    let detail = ok(33, &["rollout", "history", "daemonset/agent", "--revision=2"]);
    assert!(detail.contains("busybox:1.36"), "{detail}");
    ok(27, &["rollout", "undo", "daemonset/agent"]);
    let out = ok(27, &["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    wait_pods_on(&c, &pods, &uid, &["n1", "n4"], "busybox").await;
    let history = ok(33, &["rollout", "history", "ds/agent"]);
    let numbers: Vec<&str> = history.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| w.parse::<i64>().is_ok()).collect();
    assert_eq!(numbers, ["2", "3"], "{history}");
    let owned = revisions.list(&ListParams::default()).await.expect("list revisions").items;
    assert_eq!(owned.len(), 2, "{owned:?}");

    // A deleted pod comes back on its node.
    let by_node = pods_by_node(&pods, &uid).await;
    let victim = by_node["n4"][0].0.clone();
    ok(27, &["delete", "pod", &victim]);
    let back = wait_pods_on(&c, &pods, &uid, &["n1", "n4"], "busybox").await;
    assert_ne!(back["n4"][0].0, victim);
    let events: Vec<Event> = Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default().fields("involvedObject.name=agent"))
        .await
        .expect("events")
        .items;
    let reasons: Vec<String> = events.iter().filter_map(|e| e.reason.clone()).collect();
    assert!(reasons.iter().any(|r| r == "SuccessfulCreate") && reasons.iter().any(|r| r == "SuccessfulDelete"), "{reasons:?}");

    // A failed pod is deleted (FailedDaemonPod) and replaced.
    let failed = back["n1"][0].0.clone();
    let status = json!({"status": {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now()}]}});
    pods.patch_status(&failed, &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post the failed status");
    let again = wait_pods_on(&c, &pods, &uid, &["n1", "n4"], "busybox").await;
    assert_ne!(again["n1"][0].0, failed);
    c.wait_for("a FailedDaemonPod event", TIMEOUT, || async {
        let events = Api::<Event>::namespaced(client.clone(), "default").list(&ListParams::default().fields("involvedObject.name=agent")).await.map_err(|e| e.to_string())?.items;
        let found = events.iter().find(|e| e.reason.as_deref() == Some("FailedDaemonPod"));
        match found {
            Some(e) if e.message.as_deref().is_some_and(|m| m.contains(&failed) && m.contains("on node n1")) => Ok(()),
            _ => Err(format!("{:?}", events.iter().map(|e| (e.reason.clone(), e.message.clone())).collect::<Vec<_>>())),
        }
    })
    .await;
    let described = ok(33, &["describe", "ds", "agent"]);
    assert!(described.contains("Desired Number of Nodes Scheduled: 2") && described.contains("SuccessfulCreate"), "{described}");

    kubelet.abort();
    renewer.abort();
}
