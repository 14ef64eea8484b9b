//! The scheduler and the controller manager killed (SIGKILL) mid-work and started again: no
//! binding is lost or changed, and nothing is done twice.
//!
//! Kubernetes' promise here rests on two habits, both of which this test would catch missing: a
//! controller acts only once its informers have synced (a restarted ReplicaSet controller that
//! counted pods before its cache held them would create them again), and a scheduler binds only
//! pods that are not bound yet (a restarted one that scheduled from a stale cache would try to
//! bind a pod twice, or to another node).
//!
//! 1. An API server, a controller manager and a scheduler; three Node objects (no node agents:
//!    pods stay Pending once bound, which is all this needs; the node lifecycle controller is off
//!    so the silent nodes keep their taints off).
//! 2. A watch on pods from before anything is created records every pod ever added and every
//!    binding (`spec.nodeName`) it ever had.
//! 3. A Deployment of 40, scaled to 80 and down to 50, and a StatefulSet of 10 (Parallel): at
//!    each step the controller manager and the scheduler are killed and restarted, over and over,
//!    while they work.
//! 4. Checks: the Deployment's ReplicaSet made exactly 80 pods and deleted exactly 30; the
//!    StatefulSet made each of its 10 pods once; every live pod is bound, and no pod ever changed
//!    node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use futures::StreamExt;
use serde_json::{Value, json};

#[derive(Default, Debug)]
struct Seen {
    /// Pod name → owner name, for every pod ever added.
    added: BTreeMap<String, String>,
    /// Pod name → every node it was ever bound to, in order.
    bindings: BTreeMap<String, Vec<String>>,
    /// Pods that got a deletionTimestamp.
    deleted: BTreeSet<String>,
    /// Pods (live, not terminating) → bound?
    live: BTreeMap<String, bool>,
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
}

fn node_status() -> Value {
    let resources = json!({"cpu": "64", "memory": "256Gi", "pods": "110"});
    json!({"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test node",
                        "lastHeartbeatTime": chrono::Utc::now().to_rfc3339(), "lastTransitionTime": chrono::Utc::now().to_rfc3339()}]
    }})
}

fn template(app: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": "docker.io/library/busybox:1.36", "resources": {"requests": {"cpu": "10m"}}}]}
    })
}

async fn record(c_url: String, from: String, seen: Arc<Mutex<Seen>>) {
    let http = reqwest::Client::new();
    let mut rv = from;
    loop {
        let url = format!("{c_url}/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}&timeoutSeconds=30");
        let Ok(resp) = http.get(&url).send().await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        assert!(resp.status().is_success(), "watch pods from {rv}: {}", resp.status());
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        while let Some(Ok(chunk)) = body.next().await {
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let ev: Value = serde_json::from_slice(&line).expect("watch line");
                let kind = ev["type"].as_str().unwrap_or_default();
                assert_ne!(kind, "ERROR", "the pod watch failed: {}", ev["object"]);
                let pod = &ev["object"];
                rv = pod["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
                let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let mut s = seen.lock().unwrap();
                if kind == "ADDED" {
                    let owner = pod["metadata"]["ownerReferences"][0]["name"].as_str().unwrap_or("none").to_string();
                    assert!(s.added.insert(name.clone(), owner).is_none(), "pod {name} added twice");
                }
                if let Some(n) = pod["spec"]["nodeName"].as_str() {
                    let b = s.bindings.entry(name.clone()).or_default();
                    if b.last().map(String::as_str) != Some(n) {
                        b.push(n.to_string());
                    }
                }
                if pod["metadata"]["deletionTimestamp"].is_string() || kind == "DELETED" {
                    s.deleted.insert(name.clone());
                    s.live.remove(&name);
                } else {
                    s.live.insert(name, pod["spec"]["nodeName"].is_string());
                }
            }
        }
    }
}

/// Kills and restarts the controller manager and the scheduler `rounds` times, `gap` apart,
/// alternating between them; notes how many pods had been added and bound at each kill, to show
/// the kills landed mid-work.
async fn kill_while_working(c: &mut ApiCluster, scheduler: &mut usize, rounds: usize, gap: Duration, seen: &Arc<Mutex<Seen>>, at: &mut Vec<String>) -> usize {
    let mut kills = 0;
    for round in 0..rounds {
        {
            let s = seen.lock().unwrap();
            at.push(format!("{}/{}", s.added.len(), s.bindings.len()));
        }
        tokio::time::sleep(gap).await;
        if round % 2 == 0 {
            c.kill_controller_manager();
            c.spawn_controller_manager().expect("controller manager again");
        } else {
            c.kill_scheduler(*scheduler);
            *scheduler = c.start_scheduler(&[]).expect("scheduler again");
        }
        kills += 1;
    }
    kills
}

async fn wait_for(c: &ApiCluster, what: &str, seen: &Arc<Mutex<Seen>>, check: impl Fn(&Seen) -> bool) {
    c.wait_for(what, Duration::from_secs(90), || {
        let s = seen.lock().unwrap();
        let r = if check(&s) { Ok(()) } else { Err(format!("{} live, {} bound", s.live.len(), s.live.values().filter(|b| **b).count())) };
        async move { r }
    })
    .await
}

/// A request with a JSON body; the status code and the body.
async fn send(c: &ApiCluster, method: &str, path: &str, content_type: &str, body: Value) -> (u16, String) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    c.request(method, path, Some(body.to_string().into_bytes()), Some(content_type)).await.unwrap_or_else(|e| c.fail(&format!("{e:#}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scheduler_and_controller_manager_killed_mid_work() {
    let mut c = ApiCluster::start(ApiOptions {
        controller_manager: true,
        controller_manager_args: vec!["--controllers=*,-nodelifecycle".into()],
        ..ApiOptions::default()
    })
    .await
    .expect("cluster");
    let mut scheduler = c.start_scheduler(&[]).expect("scheduler");

    // Step 1: three nodes, Ready, with room for everything.
    for n in ["n1", "n2", "n3"] {
        let (code, body) = send(&c, "POST", "/api/v1/nodes", "application/json", node(n)).await;
        assert_eq!(code, 201, "create node {n}: {body}");
        let (code, body) = send(&c, "PATCH", &format!("/api/v1/nodes/{n}/status"), "application/merge-patch+json", node_status()).await;
        assert_eq!(code, 200, "node {n} status: {body}");
    }

    // Step 2: the record, from before the first pod.
    let (_, list) = c.get("/api/v1/namespaces/default/pods").await.expect("list pods");
    let from = serde_json::from_str::<Value>(&list).expect("pod list")["metadata"]["resourceVersion"].as_str().expect("rv").to_string();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = tokio::spawn(record(c.url(), from, seen.clone()));

    // Step 3.
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 40, "selector": {"matchLabels": {"app": "web"}}, "template": template("web")}
    });
    let (code, body) = send(&c, "POST", "/apis/apps/v1/namespaces/default/deployments", "application/json", deployment).await;
    assert_eq!(code, 201, "create deployment: {body}");
    let statefulset = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 10, "podManagementPolicy": "Parallel", "serviceName": "db",
                 "selector": {"matchLabels": {"app": "db"}}, "template": template("db")}
    });
    let (code, body) = send(&c, "POST", "/apis/apps/v1/namespaces/default/statefulsets", "application/json", statefulset).await;
    assert_eq!(code, 201, "create statefulset: {body}");
    let mut at = Vec::new();
    let mut kills = kill_while_working(&mut c, &mut scheduler, 6, Duration::from_millis(250), &seen, &mut at).await;
    wait_for(&c, "40 web and 10 db pods, all bound", &seen, |s| s.live.len() == 50 && s.live.values().all(|b| *b)).await;

    let scale = |n: i64| json!({"spec": {"replicas": n}});
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let (code, body) = send(&c, "PATCH", path, "application/merge-patch+json", scale(80)).await;
    assert_eq!(code, 200, "scale to 80: {body}");
    kills += kill_while_working(&mut c, &mut scheduler, 6, Duration::from_millis(200), &seen, &mut at).await;
    wait_for(&c, "80 web pods, all bound", &seen, |s| s.live.len() == 90 && s.live.values().all(|b| *b)).await;

    let (code, body) = send(&c, "PATCH", path, "application/merge-patch+json", scale(50)).await;
    assert_eq!(code, 200, "scale to 50: {body}");
    kills += kill_while_working(&mut c, &mut scheduler, 4, Duration::from_millis(150), &seen, &mut at).await;
    wait_for(&c, "50 web pods left", &seen, |s| s.live.len() == 60).await;
    // Quiet time: a controller that would still over- or under-shoot does it now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    recorder.abort();

    // Step 4.
    let s = seen.lock().unwrap();
    let owned = |prefix: &str| s.added.iter().filter(|(_, o)| o.starts_with(prefix)).count();
    let web_rs: BTreeSet<&String> = s.added.values().filter(|o| o.starts_with("web-")).collect();
    let moved: Vec<_> = s.bindings.iter().filter(|(_, b)| b.len() > 1).collect();
    let unbound: Vec<_> = s.live.iter().filter(|(_, b)| !**b).map(|(n, _)| n).collect();
    println!(
        "control plane killed {kills} times mid-work: {} pods added ({} web, {} db), {} deleted, {} live; web ReplicaSets {web_rs:?}; pods added/bound at each kill: {}",
        s.added.len(),
        owned("web-"),
        owned("db"),
        s.deleted.len(),
        s.live.len(),
        at.join(" ")
    );
    assert_eq!(web_rs.len(), 1, "the Deployment made more than one ReplicaSet: {web_rs:?}");
    assert_eq!(owned("web-"), 80, "the ReplicaSet created {} pods for a high of 80", owned("web-"));
    assert_eq!(owned("db"), 10, "the StatefulSet created {} pods for 10", owned("db"));
    assert_eq!(s.deleted.len(), 30, "scaling 80 → 50 deleted {} pods", s.deleted.len());
    assert_eq!(s.live.len(), 60, "live pods: {:?}", s.live.keys().collect::<Vec<_>>());
    assert!(unbound.is_empty(), "live pods never bound: {unbound:?}");
    assert!(moved.is_empty(), "pods bound to another node after their first binding: {moved:?}");
}
