//! `kubelab controller-manager` end to end on a kubelab store + API server, with a Node, its Lease
//! and a pod written by the test itself standing in for a kubelet (no node agent):
//! - node lifecycle: while the test renews the node's Lease the node is left alone; once it stops,
//!   within the (shortened) grace period the node's conditions turn Unknown, it is tainted
//!   unreachable, its pod is marked not ready and a NodeNotReady event is recorded; when the
//!   Lease is renewed again and Ready=True posted, the taints go. A kubelet-posted Ready=False
//!   gets the not-ready taint, which goes with Ready=True. A second node stays alive all along;
//!   when it too falls silent, no node of the (one) zone is Ready: the controller enters master
//!   disruption mode and neither node keeps a NoExecute taint.
//! - taint eviction: after `kubectl taint nodes n1 dedicated=db:NoExecute`, a pod that does not
//!   tolerate it is evicted at once (DisruptionTarget condition, TaintManagerEviction event,
//!   graceful delete), one tolerating it for 3 s after about 3 s, one tolerating it for ever
//!   never; a pending eviction is cancelled when the taint is taken away.
//! - disruption budgets: the controller keeps a PodDisruptionBudget's status from its pods'
//!   Ready conditions; `kubectl drain` (1.27, 1.33) evicts what the budget allows and gets 429
//!   for the rest; a new Ready pod allows one more.
//! - replica sets: pods created with the controller reference, a deleted pod replaced, scaling
//!   down removing unready pods first, an orphan adopted, a relabelled pod released, ready and
//!   available replicas (with `minReadySeconds`) and the events, through kubectl 1.27 and 1.33.
//! - deployments: create, `rollout status`, set image, history, undo, restart, pause and
//!   resume, scale, Recreate, a progress deadline exceeded — with kubectl 1.27 and 1.33 and a
//!   stand-in kubelet that makes pods Ready.
//! - garbage collection: background, orphan and foreground deletes through kubectl, dangling
//!   references collected, a Node's Lease going with it, a Job orphaning by default with a
//!   warning, an unknown propagation policy refused.
//! - leader election: of two `--leader-elect` controller managers exactly one leads; when it is
//!   stopped it releases the Lease and the other takes over well before the lease would expire.

use std::time::{Duration, Instant};

use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::process::Process;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The controller manager's timings for the lifecycle test: a 4 s grace checked every second.
const MONITOR_PERIOD: &str = "1s";
const GRACE: Duration = Duration::from_secs(4);
/// How long after the last renewal the node may take to be marked: the grace period, one monitor
/// period, and room for a loaded machine.
const MARK_TIMEOUT: Duration = Duration::from_secs(20);

fn now() -> String {
    Timestamp::now().to_string()
}

fn conditions(ready: &str) -> Value {
    let hb = now();
    let c = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "Test", "message": "posted by the test", "lastHeartbeatTime": hb, "lastTransitionTime": hb});
    json!([c("Ready", ready), c("MemoryPressure", "False"), c("DiskPressure", "False"), c("PIDPressure", "False")])
}

/// Posts the node's conditions through `nodes/<n>/status`, as a kubelet does.
async fn post_node_status(nodes: &Api<Node>, name: &str, ready: &str) {
    let patch = json!({"status": {"conditions": conditions(ready)}});
    nodes.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch)).await.expect("post node status");
}

async fn renew(leases: &Api<Lease>, name: &str) -> kube::Result<Lease> {
    let patch = json!({"spec": {"renewTime": MicroTime(Timestamp::now())}});
    leases.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await
}

/// Renews the node's Lease every second until aborted, like a kubelet's lease controller.
fn start_renewing(leases: Api<Lease>, name: &str) -> tokio::task::JoinHandle<()> {
    let name = name.to_string();
    tokio::spawn(async move {
        loop {
            if let Err(e) = renew(&leases, &name).await {
                eprintln!("[e2e] renewing lease {name}: {e}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

fn ready_of(node: &Node) -> Option<(String, Option<String>)> {
    let c = node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.reason.clone()))
}

fn taints_of(node: &Node) -> Vec<String> {
    let mut v: Vec<String> = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default().iter().map(|t| format!("{}:{}", t.key, t.effect)).collect();
    v.sort();
    v
}

fn pod_ready(pod: &Pod) -> Option<(String, Option<String>)> {
    let c = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    Some((c.status.clone(), c.reason.clone()))
}


#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_lifecycle_marks_a_silent_node_and_clears_it_when_it_returns() {
    let c = ApiCluster::start(ApiOptions {
        controller_manager: true,
        controller_manager_args: vec![
            "--node-monitor-period".into(),
            MONITOR_PERIOD.into(),
            "--node-monitor-grace-period".into(),
            format!("{}s", GRACE.as_secs()),
        ],
        ..ApiOptions::default()
    })
    .await
    .expect("start the cluster");
    let client = c.kube_client().expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // Two nodes as a kubelet registers them, their Leases, and a running pod on n1. n2 stays
    // alive (its Lease renewed) until the end: with one of the zone's two nodes Ready the zone is
    // Normal, and a dead node gets its NoExecute taint at once.
    for name in ["n1", "n2"] {
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"conditions": conditions("True")},
        }))
        .expect("valid node");
        nodes.create(&PostParams::default(), &node).await.expect("create node");
        let lease: Lease = serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40},
        }))
        .expect("valid lease");
        leases.create(&PostParams::default(), &lease).await.expect("create lease");
    }
    let n2_renewer = start_renewing(leases.clone(), "n2");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("valid pod");
    pods.create(&PostParams::default(), &pod).await.expect("create pod");
    let hb = now();
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": hb},
        {"type": "Ready", "status": "True", "lastTransitionTime": hb},
    ]}});
    pods.patch_status("web", &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post pod status");

    // Only the Lease keeps the node alive: its status heartbeat never moves, yet for well over a
    // grace period nothing happens to it. The period is what is tested (held, checked all along).
    let renewer = start_renewing(leases.clone(), "n1");
    c.hold_for("node n1 Ready and untainted while its Lease is renewed", GRACE * 2 + Duration::from_secs(1), || async {
        let n = nodes.get("n1").await.map_err(|e| e.to_string())?;
        if ready_of(&n).map(|r| r.0).as_deref() != Some("True") {
            return Err(format!("a node renewing its lease stays Ready: {n:?}"));
        }
        if !taints_of(&n).is_empty() {
            return Err(format!("a node renewing its lease is not tainted: {:?}", taints_of(&n)));
        }
        Ok(())
    })
    .await;

    // The "kubelet" stops: the node is marked within the grace period, not before.
    renewer.abort();
    let stopped = Instant::now();
    let n = c.wait_for("node n1 Ready=Unknown and tainted unreachable", MARK_TIMEOUT, || async {
        let n = nodes.get("n1").await.map_err(|e| e.to_string())?;
        let unreachable = ["node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"];
        if ready_of(&n).map(|r| r.0).as_deref() == Some("Unknown") && taints_of(&n) == unreachable {
            Ok(n)
        } else {
            Err(format!("ready {:?}, taints {:?}", ready_of(&n), taints_of(&n)))
        }
    })
    .await;
    // The last renewal was at most a second before the stop: never marked before grace - 1 s.
    assert!(stopped.elapsed() >= GRACE - Duration::from_secs(1), "marked after {:?}, before the grace period", stopped.elapsed());
    for c in n.status.as_ref().and_then(|s| s.conditions.as_ref()).expect("conditions") {
        assert_eq!(c.status, "Unknown", "{c:?}");
        assert_eq!(c.reason.as_deref(), Some("NodeStatusUnknown"), "{c:?}");
        assert_eq!(c.message.as_deref(), Some("Kubelet stopped posting node status."), "{c:?}");
    }
    let noexec = n.spec.as_ref().and_then(|s| s.taints.as_ref()).and_then(|t| t.iter().find(|t| t.effect == "NoExecute").cloned());
    assert!(noexec.and_then(|t| t.time_added).is_some(), "the NoExecute taint carries timeAdded: {:?}", n.spec);
    c.wait_for("pod web Ready=False", MARK_TIMEOUT, || async {
        let p = pods.get("web").await.map_err(|e| e.to_string())?;
        match pod_ready(&p) {
            Some((s, r)) if s == "False" && r.as_deref() == Some("NodeNotReady") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    c.wait_for("a NodeNotReady event on node n1 and pod web", MARK_TIMEOUT, || async {
        let ev = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let on = |kind: &str, name: &str| {
            ev.iter().any(|e| {
                e.reason.as_deref() == Some("NodeNotReady")
                    && e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
            })
        };
        if on("Node", "n1") && on("Pod", "web") { Ok(()) } else { Err(format!("{:?}", ev.iter().map(|e| (&e.reason, &e.involved_object.name)).collect::<Vec<_>>())) }
    })
    .await;

    // The "kubelet" returns: renews and posts Ready=True; the controller takes its taints away and
    // leaves the conditions to the kubelet.
    let renewer = start_renewing(leases.clone(), "n1");
    post_node_status(&nodes, "n1", "True").await;
    c.wait_for("node n1 untainted after it returned", MARK_TIMEOUT, || async {
        let n = nodes.get("n1").await.map_err(|e| e.to_string())?;
        if taints_of(&n).is_empty() { Ok(()) } else { Err(format!("taints {:?}", taints_of(&n))) }
    })
    .await;
    let n = nodes.get("n1").await.expect("get node");
    assert_eq!(ready_of(&n).map(|r| r.0).as_deref(), Some("True"), "the controller kept the kubelet's Ready=True");

    // The kubelet itself says Ready=False (still renewing): not-ready taints, taken away with True.
    post_node_status(&nodes, "n1", "False").await;
    c.wait_for("node n1 tainted not-ready", MARK_TIMEOUT, || async {
        let n = nodes.get("n1").await.map_err(|e| e.to_string())?;
        let want = ["node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"];
        if taints_of(&n) == want { Ok(()) } else { Err(format!("taints {:?}", taints_of(&n))) }
    })
    .await;
    let n = nodes.get("n1").await.expect("get node");
    assert_eq!(ready_of(&n), Some(("False".into(), Some("Test".into()))), "the kubelet's own Ready=False is not overwritten");
    post_node_status(&nodes, "n1", "True").await;
    c.wait_for("node n1 untainted after Ready=True", MARK_TIMEOUT, || async {
        let n = nodes.get("n1").await.map_err(|e| e.to_string())?;
        if taints_of(&n).is_empty() { Ok(()) } else { Err(format!("taints {:?}", taints_of(&n))) }
    })
    .await;

    // Both fall silent: no node of the zone is Ready. That is more likely the control plane cut
    // off than every node dead, so nothing is evicted: both end up Unknown with NoSchedule taints
    // only (a NoExecute taint put on the first one to be noticed is taken away again).
    renewer.abort();
    n2_renewer.abort();
    c.wait_for("nodes n1 and n2 Unknown, tainted NoSchedule only", MARK_TIMEOUT * 2, || async {
        let mut seen = Vec::new();
        for name in ["n1", "n2"] {
            let n = nodes.get(name).await.map_err(|e| e.to_string())?;
            seen.push((name, ready_of(&n).map(|r| r.0), taints_of(&n)));
        }
        let want = vec!["node.kubernetes.io/unreachable:NoSchedule".to_string()];
        if seen.iter().all(|(_, ready, taints)| ready.as_deref() == Some("Unknown") && *taints == want) { Ok(()) } else { Err(format!("{seen:?}")) }
    })
    .await;
    let log = std::fs::read_to_string(c.root().join("controller-manager").join("stderr.log")).unwrap_or_default();
    assert!(log.contains("entering master disruption mode"), "the controller says why it evicts nothing:\n{log}");
}

fn being_deleted(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn disruption_target(p: &Pod) -> Option<String> {
    let c = p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "DisruptionTarget")?;
    Some(format!("{}/{}", c.status, c.reason.clone().unwrap_or_default()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taint_eviction_deletes_pods_whose_tolerance_ran_out() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // A live node (its Lease renewed all along, so the node lifecycle controller leaves it be).
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"conditions": conditions("True")},
    }))
    .expect("valid node");
    nodes.create(&PostParams::default(), &node).await.expect("create node");
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "n1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40},
    }))
    .expect("valid lease");
    leases.create(&PostParams::default(), &lease).await.expect("create lease");
    let renewer = start_renewing(leases.clone(), "n1");

    // Four pods bound to it, differing only in how they tolerate `dedicated`.
    let toleration = |seconds: Option<i64>| {
        let mut t = json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"});
        if let Some(s) = seconds {
            t["tolerationSeconds"] = json!(s);
        }
        vec![t]
    };
    let cases: [(&str, Vec<Value>); 4] =
        [("intolerant", vec![]), ("brief", toleration(Some(3))), ("forever", toleration(None)), ("cancelled", toleration(Some(8)))];
    for (name, tolerations) in &cases {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"nodeName": "n1", "tolerations": tolerations, "containers": [{"name": "c", "image": "busybox"}]},
        }))
        .expect("valid pod");
        pods.create(&PostParams::default(), &pod).await.expect("create pod");
        let status = json!({"status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post pod status");
    }

    // The taint, as a user puts it on.
    c.kubectl_ok(&["taint", "nodes", "n1", "dedicated=db:NoExecute"]);
    let tainted = Instant::now();
    let p = c.wait_for("pod intolerant evicted at once", Duration::from_secs(10), || async {
        let p = pods.get("intolerant").await.map_err(|e| e.to_string())?;
        if being_deleted(&p) { Ok(p) } else { Err(format!("not being deleted: {:?}", p.status)) }
    })
    .await;
    assert_eq!(disruption_target(&p).as_deref(), Some("True/DeletionByTaintManager"), "{:?}", p.status);

    // The 3 s one: still there 2 s after the taint (checked all along), gone soon after 3 s.
    let brief_pending = Duration::from_secs(2).saturating_sub(tainted.elapsed());
    c.hold_for("pod brief kept while it tolerates the taint", brief_pending, || async {
        let p = pods.get("brief").await.map_err(|e| e.to_string())?;
        if being_deleted(&p) { Err(format!("evicted after {:?}, within its 3 s", tainted.elapsed())) } else { Ok(()) }
    })
    .await;
    c.wait_for("pod brief evicted once its 3 s ran out", Duration::from_secs(15), || async {
        let p = pods.get("brief").await.map_err(|e| e.to_string())?;
        if being_deleted(&p) { Ok(()) } else { Err("not yet".to_string()) }
    })
    .await;

    // Taking the taint away cancels the 8 s one's pending eviction, for good.
    c.kubectl_ok(&["taint", "nodes", "n1", "dedicated=db:NoExecute-"]);
    assert!(tainted.elapsed() < Duration::from_secs(7), "the taint went only {:?} after it came: the test cannot tell a cancel", tainted.elapsed());
    c.hold_for("pods cancelled and forever kept", Duration::from_secs(10), || async {
        for name in ["cancelled", "forever"] {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            if being_deleted(&p) {
                return Err(format!("pod {name} evicted after {:?}", tainted.elapsed()));
            }
        }
        Ok(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let ev = events.list(&ListParams::default()).await.expect("list events").items;
    let said = |pod: &str, prefix: &str| {
        ev.iter().any(|e| {
            e.reason.as_deref() == Some("TaintManagerEviction")
                && e.involved_object.name.as_deref() == Some(pod)
                && e.message.as_deref().is_some_and(|m| m.starts_with(prefix))
        })
    };
    assert!(said("intolerant", "Marking for deletion Pod default/intolerant"), "{ev:?}");
    assert!(said("brief", "Marking for deletion"), "{ev:?}");
    assert!(said("cancelled", "Cancelling deletion of Pod default/cancelled"), "{ev:?}");
    assert!(!said("forever", ""), "{ev:?}");
    renewer.abort();
}

/// A `kubelab controller-manager --leader-elect` of the test's own, logging to `<root>/<name>/`.
fn start_controller_manager(c: &ApiCluster, name: &str) -> Process {
    let bin = e2e::kubelab_bin().expect("kubelab binary");
    let args: Vec<String> = ["controller-manager", "--master", &c.url(), "--leader-elect"].iter().map(|s| s.to_string()).collect();
    let env = vec![("NO_COLOR".to_string(), "1".to_string()), ("RUST_LOG".to_string(), "info".to_string())];
    let p = Process::spawn(name, &bin, &args, &c.root().join(name), &env).expect("spawn controller manager");
    eprintln!("[e2e] started {name} pid {}", p.pid());
    p
}

fn log_of(c: &ApiCluster, name: &str) -> String {
    std::fs::read_to_string(c.root().join(name).join("stderr.log")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_manager_leader_election_one_leads_and_hands_over_on_shutdown() {
    let c = ApiCluster::start(ApiOptions::default()).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let mut cms = [start_controller_manager(&c, "cm-a"), start_controller_manager(&c, "cm-b")];
    let names = ["cm-a", "cm-b"];
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let holder = c.wait_for("a holder of kube-system/kube-controller-manager", Duration::from_secs(20), || async {
        let l = leases.get("kube-controller-manager").await.map_err(|e| e.to_string())?;
        l.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty()).ok_or_else(|| "no holder".to_string())
    })
    .await;
    eprintln!("[e2e] lease holder: {holder}");
    let leading = || (0..2).filter(|&i| log_of(&c, names[i]).contains("starting controllers")).collect::<Vec<usize>>();
    c.wait_for("the lease holder starting its controllers", Duration::from_secs(10), || {
        let l = leading();
        async move { if l.is_empty() { Err("neither log says so yet".to_string()) } else { Ok(()) } }
    })
    .await;
    // The standby tries, and fails, to take the Lease every retry period (2 s): over a few of
    // them, exactly one runs its controllers, neither exits and the holder stays. The period is
    // what is tested (held, checked all along).
    let (leases, holder) = (&leases, &holder);
    c.hold_for("one leader while both run", Duration::from_secs(5), || {
        // In the closure, not the future: `exited` needs the processes mutably, once per check.
        let exited: Vec<String> = (0..2).filter_map(|i| cms[i].exited().map(|st| format!("{} exited ({st}):\n{}", names[i], log_of(&c, names[i])))).collect();
        let one_leads = match leading().len() {
            1 => Ok(()),
            _ => Err(format!("exactly one controller manager runs its controllers:\n{}\n{}", log_of(&c, "cm-a"), log_of(&c, "cm-b"))),
        };
        async move {
            if !exited.is_empty() {
                return Err(exited.join("\n"));
            }
            one_leads?;
            let now = leases.get("kube-controller-manager").await.map_err(|e| e.to_string())?.spec.and_then(|s| s.holder_identity);
            if now.as_ref() != Some(holder) {
                return Err(format!("the holder changed from {holder} to {now:?} while both ran"));
            }
            Ok(())
        }
    })
    .await;
    let leader = leading()[0];
    let standby = 1 - leader;

    // The leader stops cleanly: it releases the Lease, and the standby takes over long before the
    // 15 s lease duration would have run out.
    let stopped = Instant::now();
    cms[leader].terminate();
    assert!(log_of(&c, names[leader]).contains("released the lease"), "the leader released the lease:\n{}", log_of(&c, names[leader]));
    let new_holder = c.wait_for("the standby holding the lease", Duration::from_secs(10), || async {
        let l = leases.get("kube-controller-manager").await.map_err(|e| e.to_string())?;
        l.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty() && h != holder).ok_or_else(|| "not yet".to_string())
    })
    .await;
    eprintln!("[e2e] new holder after {:?}: {new_holder}", stopped.elapsed());
    assert!(stopped.elapsed() < Duration::from_secs(10), "took over in {:?}", stopped.elapsed());
    c.wait_for("the standby starting its controllers", Duration::from_secs(10), || async {
        if log_of(&c, names[standby]).contains("starting controllers") { Ok(()) } else { Err("not yet".to_string()) }
    })
    .await;
}

/// kubectl 1.`minor` (not the cluster's pinned one) with a fresh HOME: (success, stdout + stderr).
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

fn budget_status(pdb: &PodDisruptionBudget) -> (i32, i32, i32, i32) {
    let s = pdb.status.clone().unwrap_or_default();
    (s.expected_pods.unwrap_or(0), s.current_healthy.unwrap_or(0), s.desired_healthy.unwrap_or(0), s.disruptions_allowed.unwrap_or(0))
}

/// Waits for the budget's (expected, healthy, desired, allowed) with its generation observed.
async fn wait_budget(c: &ApiCluster, pdbs: &Api<PodDisruptionBudget>, want: (i32, i32, i32, i32)) -> PodDisruptionBudget {
    c.wait_for(&format!("budget (expected, healthy, desired, allowed) = {want:?}"), Duration::from_secs(20), || async {
        let pdb = pdbs.get("web").await.map_err(|e| e.to_string())?;
        let observed = pdb.status.as_ref().and_then(|s| s.observed_generation) == pdb.metadata.generation;
        let got = budget_status(&pdb);
        if got == want && observed { Ok(pdb) } else { Err(format!("{got:?} observed={observed}")) }
    })
    .await
}

/// A disruption budget: the controller keeps its status from the pods' Ready conditions (written
/// by the test, as there is no kubelet); `kubectl drain` (1.27 and 1.33) evicts what the budget
/// allows and is refused with 429 for the rest, retrying until its timeout; a new Ready pod
/// lets one more go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disruption_budget_refuses_evictions_that_would_break_it() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");

    let node: Node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"conditions": conditions("True")}})).expect("node");
    nodes.create(&PostParams::default(), &node).await.expect("create node");
    let lease: Lease = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}})).expect("lease");
    leases.create(&PostParams::default(), &lease).await.expect("create lease");
    let renewer = start_renewing(leases.clone(), "n1");

    // Ready pods on n1. A grace period of 0: an evicted pod goes at once (no kubelet here to
    // confirm a graceful one).
    let ready_pod = |name: &str| {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
                "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "busybox"}]}})).expect("pod");
            pods.create(&PostParams::default(), &pod).await.expect("create pod");
            let t = now();
            let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t}, {"type": "PodScheduled", "status": "True", "lastTransitionTime": t}]}});
            pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post pod status");
        }
    };
    for name in ["web-0", "web-1", "web-2"] {
        ready_pod(name).await;
    }
    let yaml = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\nspec:\n  minAvailable: 2\n  selector:\n    matchLabels:\n      app: web\n";
    let o = c.kubectl_with(&["apply", "-f", "-"], &[], Some(yaml));
    assert!(o.success, "{}", o.describe());
    let pdb = wait_budget(&c, &pdbs, (3, 3, 2, 1)).await;
    let cond = pdb.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(cond.iter().any(|c| c.type_ == "DisruptionAllowed" && c.status == "True" && c.reason == "SufficientPods"), "{cond:?}");
    let (ok, table) = kubectl_of(&c, 33, &["get", "pdb", "web"]);
    assert!(ok && table.contains("ALLOWED DISRUPTIONS") && table.lines().nth(1).is_some_and(|l| l.split_whitespace().collect::<Vec<_>>()[1..4] == ["2", "N/A", "1"]), "{table}");

    // Each kubectl drains what the budget allows (`--force`: the pods have no controller): one pod goes, the next eviction is refused
    // (429) and retried until the drain's timeout.
    for (i, minor) in [27u32, 33].into_iter().enumerate() {
        let (ok, out) = kubectl_of(&c, minor, &["drain", "n1", "--ignore-daemonsets", "--force", "--timeout=12s"]);
        assert!(!ok, "the drain cannot finish:\n{out}");
        assert!(out.contains("Cannot evict pod as it would violate the pod's disruption budget."), "kubectl 1.{minor}:\n{out}");
        assert!(out.contains("evicted"), "one pod was evicted (kubectl 1.{minor}):\n{out}");
        let left = pods.list(&ListParams::default()).await.expect("list").items.len();
        assert_eq!(left, 2, "kubectl 1.{minor} left {left} pods");
        let _ = wait_budget(&c, &pdbs, (2, 2, 2, 0)).await;
        // As a ReplicaSet would: a new Ready pod, and the budget allows one disruption again.
        ready_pod(&format!("web-new-{i}")).await;
        let _ = wait_budget(&c, &pdbs, (3, 3, 2, 1)).await;
    }

    // The refusal as a client reads it.
    let victim = pods.list(&ListParams::default()).await.expect("list").items[0].metadata.name.clone().expect("name");
    pods.evict(&victim, &Default::default()).await.expect("the one allowed eviction");
    let _ = wait_budget(&c, &pdbs, (2, 2, 2, 0)).await;
    let other = pods.list(&ListParams::default()).await.expect("list").items[0].metadata.name.clone().expect("name");
    // (By hand: kube-rs would retry a 429 by itself, for minutes.)
    let (code, body) = c
        .request(reqwest::Method::POST, &format!("/api/v1/namespaces/default/pods/{other}/eviction"), Some(json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": other}}).to_string().into_bytes()), None)
        .await
        .expect("evict");
    let status: Value = serde_json::from_str(&body).expect("status");
    assert_eq!((code, status["reason"].as_str()), (429, Some("TooManyRequests")), "{body}");
    assert_eq!(status["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(status["details"]["causes"][0], json!({"reason": "DisruptionBudget", "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}), "{body}");
    let events = c.kubectl_ok(&["get", "events", "--field-selector", "involvedObject.kind=PodDisruptionBudget"]);
    assert!(!events.contains("NoPods"), "the budget always had pods:\n{events}");
    renewer.abort();
}

/// The pods that `rs_uid` controls, sorted by name.
async fn owned_pods(pods: &Api<Pod>, rs_uid: &str) -> Vec<Pod> {
    let mut v: Vec<Pod> = pods
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.owner_references.iter().flatten().any(|r| r.controller == Some(true) && r.uid == rs_uid))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    v
}

/// What a kubelet would post for a running pod: Running and Ready.
async fn mark_ready(pods: &Api<Pod>, name: &str) {
    let t = now();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post pod status");
}

fn is_ready(pod: &Pod) -> bool {
    pod_ready(pod).is_some_and(|(status, _)| status == "True")
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().filter_map(|p| p.metadata.name.clone()).collect()
}

/// The ReplicaSet controller, driven by kubectl 1.27 and 1.33 (pods become Ready only when the
/// test posts it, as there is no kubelet): three pods with the controller reference; a deleted
/// pod is replaced; scaling down removes the not-ready pods first; a matching orphan is adopted
/// (and, one too many, deleted); a relabelled pod is released and replaced; ready and available
/// replicas follow the pods, `minReadySeconds` included; `kubectl describe` shows the events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_set_keeps_its_replicas() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let yaml = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: busybox\n";
    let file = c.write_file("rs.yaml", yaml);
    let (ok, out) = kubectl_of(&c, 27, &["apply", "-f", &file.display().to_string()]);
    assert!(ok, "{out}");
    let rs = sets.get("web").await.expect("get rs");
    let uid = rs.metadata.uid.clone().expect("uid");
    let count = |n: usize| {
        let (pods, uid) = (pods.clone(), uid.clone());
        move || {
            let (pods, uid) = (pods.clone(), uid.clone());
            async move {
                let owned = owned_pods(&pods, &uid).await;
                if owned.len() == n { Ok(owned) } else { Err(format!("{} pods: {:?}", owned.len(), names(&owned))) }
            }
        }
    };
    let first = c.wait_for("three pods", Duration::from_secs(20), count(3)).await;
    for p in &first {
        let name = p.metadata.name.clone().unwrap_or_default();
        assert!(name.starts_with("web-") && name.len() == "web-".len() + 5, "generated name: {name}");
        let r = &p.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((r.kind.as_str(), r.name.as_str(), r.block_owner_deletion), ("ReplicaSet", "web", Some(true)));
    }
    let status_is = |want: (i32, i32, i32)| {
        let sets = sets.clone();
        move || {
            let sets = sets.clone();
            async move {
                let rs = sets.get("web").await.map_err(|e| e.to_string())?;
                let s = rs.status.clone().unwrap_or_default();
                let got = (s.replicas, s.ready_replicas.unwrap_or(0), s.available_replicas.unwrap_or(0));
                if got == want && s.observed_generation == rs.metadata.generation { Ok(()) } else { Err(format!("(replicas, ready, available) = {got:?}")) }
            }
        }
    };
    c.wait_for("status 3/0/0", Duration::from_secs(20), status_is((3, 0, 0))).await;
    for p in &first[..2] {
        mark_ready(&pods, p.metadata.name.as_deref().unwrap_or_default()).await;
    }
    c.wait_for("status 3/2/2", Duration::from_secs(20), status_is((3, 2, 2))).await;
    let (ok, table) = kubectl_of(&c, 33, &["get", "rs", "web"]);
    assert!(ok && table.lines().nth(1).is_some_and(|l| l.split_whitespace().collect::<Vec<_>>()[1..4] == ["3", "3", "2"]), "DESIRED CURRENT READY:\n{table}");

    // A deleted pod is replaced.
    let gone = first[2].metadata.name.clone().expect("name");
    let (ok, out) = kubectl_of(&c, 33, &["delete", "pod", &gone]);
    assert!(ok, "{out}");
    let again = c.wait_for("a replacement", Duration::from_secs(20), || async {
        let owned = owned_pods(&pods, &uid).await;
        if owned.len() == 3 && !names(&owned).contains(&gone) { Ok(owned) } else { Err(format!("{:?}", names(&owned))) }
    })
    .await;
    let replacement = again.iter().find(|p| !is_ready(p)).and_then(|p| p.metadata.name.clone()).expect("the new, unready pod");

    // Scaling down to 1 deletes the unready pod first, then the most recently ready.
    let (ok, out) = kubectl_of(&c, 27, &["scale", "rs", "web", "--replicas=1"]);
    assert!(ok, "{out}");
    let left = c.wait_for("one pod", Duration::from_secs(20), count(1)).await;
    assert!(is_ready(&left[0]), "the pod kept is a Ready one");
    assert!(!names(&left).contains(&replacement));
    let survivor = left[0].metadata.name.clone().expect("name");

    // A matching orphan is adopted; one too many, and not ready, it is the one deleted.
    let orphan: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})).expect("pod");
    pods.create(&PostParams::default(), &orphan).await.expect("create orphan");
    c.wait_for("the orphan adopted and deleted", Duration::from_secs(20), || async {
        match pods.get_opt("orphan").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(p) => Err(format!("still there, owners {:?}", p.metadata.owner_references)),
        }
    })
    .await;
    assert_eq!(names(&owned_pods(&pods, &uid).await), std::slice::from_ref(&survivor));

    // A pod relabelled out of the selector is released, and replaced.
    let (ok, out) = kubectl_of(&c, 33, &["label", "pod", &survivor, "app=other", "--overwrite"]);
    assert!(ok, "{out}");
    let newest = c.wait_for("the survivor released and replaced", Duration::from_secs(20), || async {
        let p = pods.get(&survivor).await.map_err(|e| e.to_string())?;
        let owned = owned_pods(&pods, &uid).await;
        if p.metadata.owner_references.as_ref().is_none_or(|r| r.is_empty()) && owned.len() == 1 && !names(&owned).contains(&survivor) {
            Ok(owned[0].metadata.name.clone().expect("name"))
        } else {
            Err(format!("owners {:?}, owned {:?}", p.metadata.owner_references, names(&owned)))
        }
    })
    .await;

    // minReadySeconds: Ready at once, available 3 s later.
    let (ok, out) = kubectl_of(&c, 27, &["patch", "rs", "web", "--type=merge", "-p", r#"{"spec":{"minReadySeconds":3}}"#]);
    assert!(ok, "{out}");
    mark_ready(&pods, &newest).await;
    c.wait_for("ready, not yet available", Duration::from_secs(10), status_is((1, 1, 0))).await;
    let ready_at = Instant::now();
    c.wait_for("available after minReadySeconds", Duration::from_secs(20), status_is((1, 1, 1))).await;
    assert!(ready_at.elapsed() >= Duration::from_secs(1), "available only after minReadySeconds ({:?})", ready_at.elapsed());

    let (ok, described) = kubectl_of(&c, 33, &["describe", "rs", "web"]);
    assert!(ok, "{described}");
    for want in ["SuccessfulCreate", "Created pod: web-", "SuccessfulDelete", "Deleted pod: ", "replicaset-controller"] {
        assert!(described.contains(want), "{want:?} in:\n{described}");
    }
}

/// Stands in for kubelets: every pod not being deleted is posted Running and Ready, except
/// those whose image is `never-ready` (a rollout that cannot progress).
fn start_hollow_kubelet(pods: Api<Pod>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for p in list.items {
                    let image = p.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone()).unwrap_or_default();
                    if p.metadata.deletion_timestamp.is_none() && !is_ready(&p) && image != "never-ready" {
                        let _ = pods.patch_status(p.metadata.name.as_deref().unwrap_or_default(), &PatchParams::default(), &Patch::Strategic(&json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}]}}))).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// The ReplicaSets of a Deployment: (name, spec replicas, revision), oldest revision first.
async fn replica_sets_of(sets: &Api<ReplicaSet>, deployment: &str) -> Vec<(String, i32, String)> {
    let mut v: Vec<(String, i32, String)> = sets
        .list(&ListParams::default())
        .await
        .expect("list replicasets")
        .items
        .into_iter()
        .filter(|rs| rs.metadata.owner_references.iter().flatten().any(|r| r.kind == "Deployment" && r.name == deployment))
        .map(|rs| {
            let rev = rs.metadata.annotations.as_ref().and_then(|a| a.get("deployment.kubernetes.io/revision")).cloned().unwrap_or_default();
            (rs.metadata.name.clone().unwrap_or_default(), rs.spec.replicas.unwrap_or(1), rev)
        })
        .collect();
    v.sort_by_key(|(_, _, rev)| rev.parse::<i64>().unwrap_or(0));
    v
}

/// Deployments with kubectl 1.27 and 1.33 (pods made Ready by a stand-in kubelet): create and
/// `rollout status`; `set image` rolls to a new ReplicaSet and `rollout history` shows both
/// revisions; `rollout undo` returns to the first template; `rollout restart`; pause and resume;
/// scale; a Recreate Deployment; a rollout that cannot progress ends ProgressDeadlineExceeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_roll_out_with_kubectl() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let kubelet = start_hollow_kubelet(pods.clone());
    let ok = |minor: u32, args: &[&str]| {
        let (ok, out) = kubectl_of(&c, minor, args);
        assert!(ok, "kubectl 1.{minor} {}:\n{out}", args.join(" "));
        out
    };

    ok(27, &["create", "deployment", "web", "--image=busybox", "--replicas=3"]);
    let out = ok(27, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let table = ok(33, &["get", "deploy", "web"]);
    assert!(table.lines().nth(1).is_some_and(|l| l.split_whitespace().collect::<Vec<_>>()[1..4] == ["3/3", "3", "3"]), "READY UP-TO-DATE AVAILABLE:\n{table}");
    let first = replica_sets_of(&sets, "web").await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!((first[0].1, first[0].2.as_str()), (3, "1"));

    // A new template: a new ReplicaSet takes over, the old one is scaled to 0.
    ok(33, &["set", "image", "deployment/web", "busybox=busybox:1.36"]);
    let out = ok(33, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let two = replica_sets_of(&sets, "web").await;
    assert_eq!(two.iter().map(|(n, r, rev)| (n == &first[0].0, *r, rev.as_str())).collect::<Vec<_>>(), [(true, 0, "1"), (false, 3, "2")], "{two:?}");
    let history = ok(27, &["rollout", "history", "deployment/web"]);
    assert!(history.lines().any(|l| l.trim_start().starts_with('1')) && history.lines().any(|l| l.trim_start().starts_with('2')), "{history}");
    let described = ok(33, &["describe", "deployment", "web"]);
    assert!(described.contains(&format!("Scaled down replica set {} from", first[0].0)) && described.contains("NewReplicaSetAvailable"), "{described}");

    // Undo: back to the first template (its ReplicaSet again, now revision 3).
    ok(27, &["rollout", "undo", "deployment/web"]);
    ok(27, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    let d = deps.get("web").await.expect("get");
    assert_eq!(d.spec.template.spec.as_ref().and_then(|s| s.containers[0].image.clone()).as_deref(), Some("busybox"));
    let after_undo = replica_sets_of(&sets, "web").await;
    assert_eq!(after_undo.last().map(|(n, r, rev)| (n.clone(), *r, rev.clone())), Some((first[0].0.clone(), 3, "3".to_string())), "{after_undo:?}");

    // Restart: a new ReplicaSet for the same image.
    ok(33, &["rollout", "restart", "deployment/web"]);
    ok(33, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert_eq!(replica_sets_of(&sets, "web").await.len(), 3);

    // Paused: a new template makes no ReplicaSet until resumed.
    ok(27, &["rollout", "pause", "deployment/web"]);
    ok(27, &["set", "image", "deployment/web", "busybox=busybox:1.37"]);
    c.hold_for("no rollout while paused", Duration::from_secs(2), || async {
        let n = replica_sets_of(&sets, "web").await.len();
        if n == 3 { Ok(()) } else { Err(format!("{n} replica sets")) }
    })
    .await;
    let d = deps.get("web").await.expect("get");
    let progressing = d.status.and_then(|s| s.conditions).unwrap_or_default().into_iter().find(|c| c.type_.as_deref() == Some("Progressing"));
    assert_eq!(progressing.and_then(|c| c.reason).as_deref(), Some("DeploymentPaused"));
    ok(33, &["rollout", "resume", "deployment/web"]);
    ok(33, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert_eq!(replica_sets_of(&sets, "web").await.len(), 4);

    // Scale.
    ok(27, &["scale", "deployment/web", "--replicas=5"]);
    ok(27, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    let rs = replica_sets_of(&sets, "web").await;
    assert_eq!(rs.last().map(|(_, r, _)| *r), Some(5), "{rs:?}");

    // Recreate: the old pods are scaled away before the new ReplicaSet grows.
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: batch\nspec:\n  replicas: 2\n  strategy:\n    type: Recreate\n  selector:\n    matchLabels:\n      app: batch\n  template:\n    metadata:\n      labels:\n        app: batch\n    spec:\n      containers:\n      - name: c\n        image: busybox\n";
    let file = c.write_file("batch.yaml", yaml);
    ok(33, &["apply", "-f", &file.display().to_string()]);
    ok(33, &["rollout", "status", "deployment/batch", "--timeout=60s"]);
    ok(33, &["set", "image", "deployment/batch", "c=busybox:1.36"]);
    ok(33, &["rollout", "status", "deployment/batch", "--timeout=60s"]);
    let rs = replica_sets_of(&sets, "batch").await;
    assert_eq!(rs.iter().map(|(_, r, _)| *r).collect::<Vec<_>>(), [0, 2], "{rs:?}");

    // A rollout that cannot progress (its pods never become Ready) times out.
    let yaml = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: stuck\nspec:\n  replicas: 1\n  progressDeadlineSeconds: 3\n  selector:\n    matchLabels:\n      app: stuck\n  template:\n    metadata:\n      labels:\n        app: stuck\n    spec:\n      containers:\n      - name: c\n        image: never-ready\n";
    let file = c.write_file("stuck.yaml", yaml);
    ok(27, &["apply", "-f", &file.display().to_string()]);
    let (done, out) = kubectl_of(&c, 27, &["rollout", "status", "deployment/stuck", "--timeout=30s"]);
    assert!(!done && out.contains("exceeded its progress deadline"), "{out}");
    let (done, out) = kubectl_of(&c, 33, &["rollout", "status", "deployment/stuck", "--timeout=30s"]);
    assert!(!done && out.contains("exceeded its progress deadline"), "{out}");
    kubelet.abort();
}

/// A ConfigMap, optionally owned (by uid) and held by a finalizer of its own.
fn config_map(name: &str, owner: Option<(&str, &str, bool)>, finalizer: Option<&str>) -> ConfigMap {
    let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    if let Some((owner_name, uid, block)) = owner {
        v["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": owner_name, "uid": uid, "blockOwnerDeletion": block}]);
    }
    if let Some(f) = finalizer {
        v["metadata"]["finalizers"] = json!([f]);
    }
    serde_json::from_value(v).expect("configmap")
}

/// The garbage collector and deletion propagation, with kubectl 1.27 and 1.33: deleting a
/// Deployment removes its ReplicaSet and pods; `--cascade=orphan` leaves them without the owner
/// reference; `--cascade=foreground` keeps the owner (finalizer `foregroundDeletion`) until its
/// blocking dependent is gone; dependents of an absent owner, or of an owner with another uid,
/// are collected; a deleted Node takes its Lease with it; a Job deleted without a policy keeps
/// its dependents and says so in a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collector_follows_owner_references() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let kubelet = start_hollow_kubelet(pods.clone());
    let ok = |minor: u32, args: &[&str]| {
        let (ok, out) = kubectl_of(&c, minor, args);
        assert!(ok, "kubectl 1.{minor} {}:\n{out}", args.join(" "));
        out
    };
    let count_pods = |app: &'static str| {
        let pods = pods.clone();
        async move { pods.list(&ListParams::default().labels(&format!("app={app}"))).await.map(|l| l.items.len()).unwrap_or(usize::MAX) }
    };

    // Background (kubectl's default): the Deployment goes at once, its ReplicaSet and pods after.
    ok(27, &["create", "deployment", "web", "--image=busybox", "--replicas=2"]);
    ok(27, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    ok(27, &["delete", "deployment", "web"]);
    c.wait_for("web's ReplicaSet and pods collected", Duration::from_secs(30), || async {
        let (rs, p) = (replica_sets_of(&sets, "web").await.len(), count_pods("web").await);
        if rs == 0 && p == 0 { Ok(()) } else { Err(format!("{rs} replica sets, {p} pods")) }
    })
    .await;

    // Orphan: the ReplicaSet and pods stay, without the reference to the Deployment.
    ok(33, &["create", "deployment", "keep", "--image=busybox", "--replicas=2"]);
    ok(33, &["rollout", "status", "deployment/keep", "--timeout=60s"]);
    let rs_name = replica_sets_of(&sets, "keep").await[0].0.clone();
    ok(33, &["delete", "deployment", "keep", "--cascade=orphan"]);
    let rs = c.wait_for("keep's ReplicaSet orphaned", Duration::from_secs(30), || async {
        let rs = sets.get(&rs_name).await.map_err(|e| e.to_string())?;
        let gone = Api::<Deployment>::namespaced(client.clone(), "default").get_opt("keep").await.map_err(|e| e.to_string())?.is_none();
        if gone && rs.metadata.owner_references.as_ref().is_none_or(|r| r.is_empty()) { Ok(rs) } else { Err(format!("deployment gone: {gone}, owners {:?}", rs.metadata.owner_references)) }
    })
    .await;
    assert_eq!(rs.spec.replicas, Some(2));
    c.hold_for("keep's pods stay", Duration::from_secs(2), || async { if count_pods("keep").await == 2 { Ok(()) } else { Err("pods went".into()) } }).await;

    // Foreground: the owner waits (finalizer foregroundDeletion) for its blocking dependent,
    // which a finalizer of its own holds; released, both go.
    let owner = cms.create(&PostParams::default(), &config_map("owner", None, None)).await.expect("owner");
    let owner_uid = owner.metadata.uid.clone().expect("uid");
    cms.create(&PostParams::default(), &config_map("dep", Some(("owner", &owner_uid, true)), Some("kubelab.test/hold"))).await.expect("dep");
    ok(27, &["delete", "configmap", "owner", "--cascade=foreground", "--wait=false"]);
    c.wait_for("the owner waiting for its dependent", Duration::from_secs(30), || async {
        let o = cms.get("owner").await.map_err(|e| e.to_string())?;
        let d = cms.get("dep").await.map_err(|e| e.to_string())?;
        let waiting = o.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|x| x == "foregroundDeletion")) && o.metadata.deletion_timestamp.is_some();
        if waiting && d.metadata.deletion_timestamp.is_some() { Ok(()) } else { Err(format!("owner {:?} dep deleting {}", o.metadata.finalizers, d.metadata.deletion_timestamp.is_some())) }
    })
    .await;
    c.hold_for("the owner held while its dependent is", Duration::from_secs(2), || async {
        if cms.get_opt("owner").await.map_err(|e| e.to_string())?.is_some() { Ok(()) } else { Err("the owner went first".into()) }
    })
    .await;
    cms.patch("dep", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": null}}))).await.expect("release dep");
    c.wait_for("owner and dependent gone", Duration::from_secs(30), || async {
        let (o, d) = (cms.get_opt("owner").await.map_err(|e| e.to_string())?, cms.get_opt("dep").await.map_err(|e| e.to_string())?);
        if o.is_none() && d.is_none() { Ok(()) } else { Err(format!("owner there: {}, dep there: {}", o.is_some(), d.is_some())) }
    })
    .await;

    // Dangling references: an owner that never existed, and one whose uid is another's.
    let real = cms.create(&PostParams::default(), &config_map("real", None, None)).await.expect("real");
    cms.create(&PostParams::default(), &config_map("ghost-dep", Some(("ghost", "00000000-0000-0000-0000-000000000001", false)), None)).await.expect("ghost-dep");
    cms.create(&PostParams::default(), &config_map("wrong-uid-dep", Some(("real", "00000000-0000-0000-0000-000000000002", false)), None)).await.expect("wrong-uid-dep");
    cms.create(&PostParams::default(), &config_map("real-dep", Some(("real", real.metadata.uid.as_deref().unwrap_or_default(), false)), None)).await.expect("real-dep");
    c.wait_for("dangling dependents collected", Duration::from_secs(30), || async {
        let names: Vec<String> = cms.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items.into_iter().filter_map(|c| c.metadata.name).collect();
        if !names.iter().any(|n| n == "ghost-dep" || n == "wrong-uid-dep") && names.iter().any(|n| n == "real-dep") { Ok(()) } else { Err(format!("{names:?}")) }
    })
    .await;

    // A Node's Lease (owned by it, as a kubelet writes it) goes with the Node.
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let node = nodes.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gone"}})).expect("node")).await.expect("node");
    let lease: Lease = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "gone", "namespace": "kube-node-lease",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "gone", "uid": node.metadata.uid}]}, "spec": {"holderIdentity": "gone"}})).expect("lease");
    leases.create(&PostParams::default(), &lease).await.expect("lease");
    ok(33, &["delete", "node", "gone"]);
    c.wait_for("the node's lease collected", Duration::from_secs(30), || async {
        if leases.get_opt("gone").await.map_err(|e| e.to_string())?.is_none() { Ok(()) } else { Err("still there".into()) }
    })
    .await;

    // A Job deleted without a policy: its dependents are orphaned, and the answer warns.
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n";
    let file = c.write_file("job.yaml", job);
    ok(33, &["apply", "-f", &file.display().to_string()]);
    let resp = c.http().delete(format!("{}/apis/batch/v1/namespaces/default/jobs/once", c.url())).send().await.expect("delete job");
    let warning = resp.headers().get("warning").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    assert!(warning.contains("child pods are preserved by default when jobs are deleted"), "warning: {warning:?}");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["metadata"]["finalizers"], json!(["orphan"]), "{body}");
    c.wait_for("the job orphaned and gone", Duration::from_secs(30), || async {
        let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), "default");
        if jobs.get_opt("once").await.map_err(|e| e.to_string())?.is_none() { Ok(()) } else { Err("still there".into()) }
    })
    .await;
    // An invalid policy is refused as Kubernetes refuses it.
    let (code, body) = c.request(reqwest::Method::DELETE, "/api/v1/namespaces/default/configmaps/real", Some(br#"{"propagationPolicy":"Sideways"}"#.to_vec()), None).await.expect("delete");
    assert_eq!(code, 422, "{body}");
    assert!(body.contains(r#"propagationPolicy: Unsupported value: \"Sideways\""#), "{body}");
    kubelet.abort();
}
