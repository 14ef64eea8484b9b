//! The StatefulSet controller of `kubelab controller-manager` end to end on a kubelab store + API
//! server, driven by kubectl 1.27 and 1.33, with a Node (its Lease renewed) written by the test
//! and the test standing in for its kubelet: it posts pods Running and Ready (at once, or only
//! when the test says), and finishes the graceful deletion of pods being deleted (or holds it).
//! - OrderedReady: web-0 is created alone, web-1 only once web-0 is Ready, then web-2; each pod
//!   has its stable name, hostname, subdomain, identity labels and revision label; scaling down
//!   deletes web-2 first and leaves web-1 until web-2 is gone; a deleted pod comes back under
//!   the same name; a Parallel set creates all its pods at once; the events read as
//!   kube-controller-manager's.
//! - Rolling updates: `rollout status`; `set image` with a partition updates only the ordinals
//!   at or above it, then, the partition lowered, the rest from the top down; `rollout history`
//!   shows the revisions and `rollout undo` goes back to the first template, its
//!   ControllerRevision re-numbered.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn now() -> String {
    Timestamp::now().to_string()
}

const WAIT: Duration = Duration::from_secs(30);

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

/// kubectl that must succeed.
fn ok(c: &ApiCluster, minor: u32, args: &[&str]) -> String {
    let (done, out) = kubectl_of(c, minor, args);
    assert!(done, "kubectl 1.{minor} {}:\n{out}", args.join(" "));
    out
}

fn is_ready(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.containers.first()).and_then(|c| c.image.clone()).unwrap_or_default()
}

fn label<'a>(pod: &'a Pod, key: &str) -> &'a str {
    pod.metadata.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str).unwrap_or_default()
}

/// What a kubelet would post for a running pod: Running and Ready.
async fn mark_ready(pods: &Api<Pod>, name: &str) {
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status)).await.expect("post pod status");
}

/// The pods of the set `set` (by name), not being deleted unless `terminating`: name → pod.
async fn pods_of(pods: &Api<Pod>, set: &str) -> BTreeMap<String, Pod> {
    let prefix = format!("{set}-");
    pods.list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.strip_prefix(&prefix).is_some_and(|o| o.bytes().all(|b| b.is_ascii_digit()))))
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
        .collect()
}

fn names(pods: &BTreeMap<String, Pod>) -> Vec<&str> {
    pods.keys().map(String::as_str).collect()
}

/// The stand-in kubelet of node n1: renews its Lease, makes its pods Running and Ready while
/// `auto_ready`, and finishes the deletion of its pods being deleted while `finish_deletes`.
struct Kubelet {
    auto_ready: Arc<AtomicBool>,
    finish_deletes: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn start_kubelet(client: kube::Client, auto_ready: bool) -> Kubelet {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let hb = now();
    let cond = |t: &str, s: &str| json!({"type": t, "status": s, "reason": "Test", "message": "posted by the test", "lastHeartbeatTime": hb, "lastTransitionTime": hb});
    let node: Node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
        "status": {"conditions": [cond("Ready", "True"), cond("MemoryPressure", "False"), cond("DiskPressure", "False"), cond("PIDPressure", "False")]}}))
    .expect("node");
    nodes.create(&PostParams::default(), &node).await.expect("create node");
    let lease: Lease = serde_json::from_value(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "n1", "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}))
    .expect("lease");
    leases.create(&PostParams::default(), &lease).await.expect("create lease");
    let (auto, finish) = (Arc::new(AtomicBool::new(auto_ready)), Arc::new(AtomicBool::new(true)));
    let (a, f) = (auto.clone(), finish.clone());
    let task = tokio::spawn(async move {
        let mut last_renew = Instant::now() - Duration::from_secs(10);
        loop {
            if last_renew.elapsed() >= Duration::from_secs(1) {
                let _ = leases.patch("n1", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"renewTime": MicroTime(Timestamp::now())}}))).await;
                last_renew = Instant::now();
            }
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for p in list.items {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    if p.metadata.deletion_timestamp.is_some() {
                        if f.load(Ordering::SeqCst) {
                            let _ = pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await;
                        }
                    } else if a.load(Ordering::SeqCst) && !is_ready(&p) {
                        let _ = pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(&json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}]}}))).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    });
    Kubelet { auto_ready: auto, finish_deletes: finish, task }
}

/// A StatefulSet `name` of `replicas` busybox pods bound to n1.
fn set_yaml(name: &str, replicas: i32, extra_spec: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  serviceName: {name}-svc\n{extra_spec}  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      nodeName: n1\n      terminationGracePeriodSeconds: 30\n      containers:\n      - name: c\n        image: busybox\n"
    )
}

async fn status_of(sets: &Api<StatefulSet>, name: &str) -> Result<(StatefulSet, Value), String> {
    let s = sets.get(name).await.map_err(|e| e.to_string())?;
    let st = serde_json::to_value(s.status.clone().unwrap_or_default()).unwrap_or(Value::Null);
    Ok((s, st))
}

/// OrderedReady creation one at a time, identity, scale down from the top, a deleted pod back
/// under its name, Parallel creation, events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_sets_create_and_delete_pods_in_order() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let kubelet = start_kubelet(client.clone(), false).await;

    let file = c.write_file("web.yaml", &set_yaml("web", 3, ""));
    ok(&c, 27, &["apply", "-f", &file.display().to_string()]);
    let set = sets.get("web").await.expect("get set");
    let set_uid = set.metadata.uid.clone().expect("uid");

    // web-0 alone, with its identity; no web-1 while web-0 is not Ready.
    let first = c.wait_for("web-0", WAIT, || async {
        let v = pods_of(&pods, "web").await;
        if names(&v) == ["web-0"] { Ok(v["web-0"].clone()) } else { Err(format!("{:?}", names(&v))) }
    })
    .await;
    let spec = first.spec.clone().expect("spec");
    assert_eq!((spec.hostname.as_deref(), spec.subdomain.as_deref()), (Some("web-0"), Some("web-svc")));
    assert_eq!((label(&first, "statefulset.kubernetes.io/pod-name"), label(&first, "apps.kubernetes.io/pod-index"), label(&first, "app")), ("web-0", "0", "web"));
    let owner = &first.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller, owner.block_owner_deletion), ("StatefulSet", set_uid.as_str(), Some(true), Some(true)));
    let revision = label(&first, "controller-revision-hash").to_string();
    assert!(revision.starts_with("web-"), "revision label {revision:?}");
    c.hold_for("no web-1 while web-0 is not Ready", Duration::from_secs(2), || async {
        let v = pods_of(&pods, "web").await;
        if names(&v) == ["web-0"] { Ok(()) } else { Err(format!("{:?}", names(&v))) }
    })
    .await;
    for (ready, next) in [("web-0", "web-1"), ("web-1", "web-2")] {
        mark_ready(&pods, ready).await;
        let seen = c.wait_for(next, WAIT, || async {
            let v = pods_of(&pods, "web").await;
            if v.contains_key(next) { Ok(v) } else { Err(format!("{:?}", names(&v))) }
        })
        .await;
        assert!(!is_ready(&seen[next]), "{next} is new");
        if next == "web-1" {
            c.hold_for("no web-2 while web-1 is not Ready", Duration::from_secs(1), || async {
                let v = pods_of(&pods, "web").await;
                if v.contains_key("web-2") { Err(format!("{:?}", names(&v))) } else { Ok(()) }
            })
            .await;
        }
    }
    mark_ready(&pods, "web-2").await;
    c.wait_for("status 3 ready, current and updated", WAIT, || async {
        let (s, st) = status_of(&sets, "web").await?;
        let want = json!({"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "currentReplicas": 3, "updatedReplicas": 3, "currentRevision": revision, "updateRevision": revision, "collisionCount": 0, "observedGeneration": s.metadata.generation});
        if st == want { Ok(()) } else { Err(format!("{st}")) }
    })
    .await;
    let out = ok(&c, 33, &["rollout", "status", "sts/web", "--timeout=20s"]);
    assert!(out.contains("partitioned roll out complete: 3 new pods have been updated"), "{out}");
    let table = ok(&c, 27, &["get", "sts", "web"]);
    assert!(table.lines().nth(1).is_some_and(|l| l.split_whitespace().nth(1) == Some("3/3")), "READY:\n{table}");

    // Scale down: web-2 goes first, and web-1 only once web-2 is gone.
    kubelet.finish_deletes.store(false, Ordering::SeqCst);
    ok(&c, 27, &["scale", "sts", "web", "--replicas=1"]);
    c.wait_for("web-2 terminating", WAIT, || async {
        let v = pods_of(&pods, "web").await;
        if v.get("web-2").is_some_and(|p| p.metadata.deletion_timestamp.is_some()) { Ok(()) } else { Err(format!("{:?}", names(&v))) }
    })
    .await;
    c.hold_for("web-1 kept while web-2 terminates", Duration::from_secs(2), || async {
        let v = pods_of(&pods, "web").await;
        if v.get("web-1").is_some_and(|p| p.metadata.deletion_timestamp.is_none()) { Ok(()) } else { Err(format!("web-1: {:?}", v.get("web-1").map(|p| &p.metadata.deletion_timestamp))) }
    })
    .await;
    kubelet.finish_deletes.store(true, Ordering::SeqCst);
    c.wait_for("only web-0 left", WAIT, || async {
        let v = pods_of(&pods, "web").await;
        if names(&v) == ["web-0"] { Ok(()) } else { Err(format!("{:?}", names(&v))) }
    })
    .await;
    c.wait_for("status 1 replica", WAIT, || async {
        let (_, st) = status_of(&sets, "web").await?;
        if st["replicas"] == json!(1) && st["readyReplicas"] == json!(1) { Ok(()) } else { Err(format!("{st}")) }
    })
    .await;

    // A deleted pod comes back under its name (a new pod: another uid).
    let old_uid = pods.get("web-0").await.expect("web-0").metadata.uid;
    ok(&c, 33, &["delete", "pod", "web-0"]);
    let back = c.wait_for("web-0 back", WAIT, || async {
        match pods.get_opt("web-0").await.map_err(|e| e.to_string())? {
            Some(p) if p.metadata.uid != old_uid && p.metadata.deletion_timestamp.is_none() => Ok(p),
            other => Err(format!("{:?}", other.map(|p| p.metadata.uid))),
        }
    })
    .await;
    assert_eq!(label(&back, "controller-revision-hash"), revision);

    let described = ok(&c, 33, &["describe", "sts", "web"]);
    for want in ["SuccessfulCreate", "create Pod web-0 in StatefulSet web successful", "create Pod web-2 in StatefulSet web successful", "SuccessfulDelete", "delete Pod web-2 in StatefulSet web successful", "statefulset-controller"] {
        assert!(described.contains(want), "{want:?} in:\n{described}");
    }

    // Parallel: all three at once, none of them Ready.
    let file = c.write_file("par.yaml", &set_yaml("par", 3, "  podManagementPolicy: Parallel\n"));
    ok(&c, 33, &["apply", "-f", &file.display().to_string()]);
    let all = c.wait_for("par-0, par-1 and par-2", WAIT, || async {
        let v = pods_of(&pods, "par").await;
        if names(&v) == ["par-0", "par-1", "par-2"] { Ok(v) } else { Err(format!("{:?}", names(&v))) }
    })
    .await;
    assert!(all.values().all(|p| !is_ready(p)), "created before any was Ready");
    // …and scaled down at once.
    ok(&c, 33, &["scale", "sts", "par", "--replicas=0"]);
    c.wait_for("no par pods", WAIT, || async {
        let v = pods_of(&pods, "par").await;
        if v.is_empty() { Ok(()) } else { Err(format!("{:?}", names(&v))) }
    })
    .await;
    drop(kubelet);
}

/// The revisions of the set, as (revision number, name), oldest first.
async fn revisions_of(revs: &Api<ControllerRevision>, set_uid: &str) -> Vec<(i64, String)> {
    let mut v: Vec<(i64, String)> = revs
        .list(&ListParams::default())
        .await
        .expect("list revisions")
        .items
        .into_iter()
        .filter(|r| r.metadata.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == set_uid))
        .map(|r| (r.revision.unwrap_or(0), r.metadata.name.unwrap_or_default()))
        .collect();
    v.sort();
    v
}

/// Rolling updates with kubectl: rollout status, a partitioned `set image`, the rest from the top
/// down, rollout history and undo.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_sets_roll_out_with_kubectl() {
    let c = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let revs: Api<ControllerRevision> = Api::namespaced(client.clone(), "default");
    let kubelet = start_kubelet(client.clone(), true).await;

    let file = c.write_file("web.yaml", &set_yaml("web", 3, ""));
    ok(&c, 33, &["apply", "-f", &file.display().to_string()]);
    let out = ok(&c, 27, &["rollout", "status", "sts/web", "--timeout=60s"]);
    assert!(out.contains("partitioned roll out complete: 3 new pods have been updated"), "{out}");
    let set_uid = sets.get("web").await.expect("get").metadata.uid.expect("uid");
    let first = revisions_of(&revs, &set_uid).await;
    assert_eq!(first.iter().map(|r| r.0).collect::<Vec<_>>(), [1], "{first:?}");

    // A partition of 2: `set image` reaches web-2 only.
    ok(&c, 27, &["patch", "sts", "web", "--type=merge", "-p", r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#]);
    ok(&c, 33, &["set", "image", "sts/web", "c=busybox:1.36"]);
    let out = ok(&c, 33, &["rollout", "status", "sts/web", "--timeout=60s"]);
    assert!(out.contains("partitioned roll out complete: 1 new pods have been updated"), "{out}");
    let two = revisions_of(&revs, &set_uid).await;
    assert_eq!(two.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2], "{two:?}");
    let v = pods_of(&pods, "web").await;
    let images: Vec<String> = v.values().map(image_of).collect();
    assert_eq!(images, ["busybox", "busybox", "busybox:1.36"]);
    assert_eq!(v.values().map(|p| label(p, "controller-revision-hash")).collect::<Vec<_>>(), [first[0].1.as_str(), first[0].1.as_str(), two[1].1.as_str()]);
    c.hold_for("web-0 and web-1 stay at the old revision", Duration::from_secs(2), || async {
        let v = pods_of(&pods, "web").await;
        let images: Vec<String> = v.values().map(image_of).collect();
        if images == ["busybox", "busybox", "busybox:1.36"] { Ok(()) } else { Err(format!("{images:?}")) }
    })
    .await;
    let (_, st) = status_of(&sets, "web").await.expect("status");
    assert_eq!((&st["currentReplicas"], &st["updatedReplicas"], &st["currentRevision"], &st["updateRevision"]), (&json!(2), &json!(1), &json!(first[0].1), &json!(two[1].1)), "{st}");

    // The partition lowered: web-1, then web-0, each once the one above is Ready again.
    let updated_at: Arc<std::sync::Mutex<BTreeMap<String, Instant>>> = Arc::default();
    let watcher = {
        let (pods, updated_at) = (pods.clone(), updated_at.clone());
        tokio::spawn(async move {
            loop {
                for (name, p) in pods_of(&pods, "web").await {
                    if image_of(&p) == "busybox:1.36" {
                        updated_at.lock().expect("lock").entry(name).or_insert_with(Instant::now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    ok(&c, 33, &["patch", "sts", "web", "--type=merge", "-p", r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#]);
    let out = ok(&c, 27, &["rollout", "status", "sts/web", "--timeout=60s"]);
    assert!(out.contains("partitioned roll out complete: 3 new pods have been updated"), "{out}");
    watcher.abort();
    let at = updated_at.lock().expect("lock").clone();
    assert!(at["web-2"] <= at["web-1"] && at["web-1"] < at["web-0"], "from the top down: {at:?}");
    c.wait_for("the update revision current", WAIT, || async {
        let (_, st) = status_of(&sets, "web").await?;
        if st["currentRevision"] == json!(two[1].1) && st["currentReplicas"] == json!(3) { Ok(()) } else { Err(format!("{st}")) }
    })
    .await;

    // History and undo: back to busybox, whose revision becomes number 3.
    let history = ok(&c, 27, &["rollout", "history", "sts/web"]);
    let numbers: Vec<&str> = history.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| w.parse::<u32>().is_ok()).collect();
    assert_eq!(numbers, ["1", "2"], "{history}");
    let out = ok(&c, 33, &["rollout", "undo", "sts/web"]);
    assert!(out.contains("rolled back"), "{out}");
    let out = ok(&c, 33, &["rollout", "status", "sts/web", "--timeout=60s"]);
    assert!(out.contains("partitioned roll out complete: 3 new pods have been updated"), "{out}");
    let v = pods_of(&pods, "web").await;
    assert_eq!(v.values().map(image_of).collect::<Vec<_>>(), ["busybox", "busybox", "busybox"]);
    let after = revisions_of(&revs, &set_uid).await;
    assert_eq!(after, [(2, two[1].1.clone()), (3, first[0].1.clone())], "the first revision re-numbered");
    let history = ok(&c, 33, &["rollout", "history", "sts/web"]);
    let numbers: Vec<&str> = history.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| w.parse::<u32>().is_ok()).collect();
    assert_eq!(numbers, ["2", "3"], "{history}");
    let detail = ok(&c, 27, &["rollout", "history", "sts/web", "--revision=2"]);
    assert!(detail.contains("busybox:1.36"), "{detail}");
    c.wait_for("status back at the first revision", WAIT, || async {
        let (_, st) = status_of(&sets, "web").await?;
        if st["currentRevision"] == json!(first[0].1) && st["updateRevision"] == json!(first[0].1) && st["updatedReplicas"] == json!(3) { Ok(()) } else { Err(format!("{st}")) }
    })
    .await;
    assert!(kubelet.auto_ready.load(Ordering::SeqCst));
    drop(kubelet);
}
