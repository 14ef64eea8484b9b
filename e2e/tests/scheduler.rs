//! `kubelab scheduler` end to end on a kubelab store + API server, with Node objects created
//! through the API (no node agent): pods land where their constraints say, an unschedulable pod
//! is reported and then scheduled as soon as a fitting node appears, cordoned nodes take no new
//! pods, and of two leader-elected replicas exactly one binds while the other waits and takes
//! over when the leader is killed.

use std::time::{Duration, Instant};

use e2e::apiserver::{ApiCluster, ApiOptions};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

/// How long a pod gets to be bound when a node fits it.
const BIND_TIMEOUT: Duration = Duration::from_secs(20);

async fn create_node(client: &kube::Client, name: &str, labels: Value, spec: Value, cpu: &str) {
    let mut labels = labels;
    labels["kubernetes.io/hostname"] = json!(name);
    let alloc = json!({"cpu": cpu, "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"capacity": alloc, "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test node"}]},
    }))
    .expect("valid node");
    Api::<Node>::all(client.clone()).create(&PostParams::default(), &node).await.expect("create node");
}

async fn create_pod(client: &kube::Client, name: &str, spec: Value) {
    let mut spec = spec;
    if spec.get("containers").is_none() {
        spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    }
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
        .expect("valid pod");
    Api::<Pod>::namespaced(client.clone(), "default").create(&PostParams::default(), &pod).await.expect("create pod");
}

fn cpu(n: &str) -> Value {
    json!([{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": n}}}])
}

async fn node_of(client: &kube::Client, pod: &str) -> Option<String> {
    let p = Api::<Pod>::namespaced(client.clone(), "default").get(pod).await.ok()?;
    p.spec.and_then(|s| s.node_name)
}

/// Waits until `pod` is bound; returns its node.
async fn wait_bound(c: &ApiCluster, client: &kube::Client, pod: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(n) = node_of(client, pod).await {
            return n;
        }
        if Instant::now() > deadline {
            c.fail(&format!("pod {pod} was not bound within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn reqwest_get(url: &str) -> String {
    reqwest::get(url).await.expect("GET").text().await.expect("body")
}

async fn events_for(client: &kube::Client, pod: &str) -> Vec<Event> {
    let lp = ListParams::default().fields(&format!("involvedObject.name={pod}"));
    Api::<Event>::namespaced(client.clone(), "default").list(&lp).await.map(|l| l.items).unwrap_or_default()
}

async fn wait_event(c: &ApiCluster, client: &kube::Client, pod: &str, reason: &str) -> Event {
    let deadline = Instant::now() + BIND_TIMEOUT;
    loop {
        if let Some(e) = events_for(client, pod).await.into_iter().find(|e| e.reason.as_deref() == Some(reason)) {
            return e;
        }
        if Instant::now() > deadline {
            c.fail(&format!("no {reason} event for pod {pod}: {:#?}", events_for(client, pod).await));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_places_reports_and_retries() {
    let mut c = ApiCluster::start(ApiOptions::default()).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    create_node(&client, "n1", json!({"disk": "ssd", "zone": "a"}), json!({}), "2").await;
    create_node(&client, "n2", json!({"disk": "hdd", "zone": "b"}), json!({}), "2").await;
    create_node(
        &client,
        "n3",
        json!({"accelerator": "gpu", "zone": "b"}),
        json!({"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}),
        "2",
    )
    .await;
    c.start_scheduler(&[]).expect("start the scheduler");

    // nodeSelector.
    create_pod(&client, "ssd", json!({"nodeSelector": {"disk": "ssd"}})).await;
    assert_eq!(wait_bound(&c, &client, "ssd", BIND_TIMEOUT).await, "n1");
    let e = wait_event(&c, &client, "ssd", "Scheduled").await;
    assert_eq!(e.message.as_deref(), Some("Successfully assigned default/ssd to n1"));
    // Required node affinity + a toleration opens the tainted node.
    create_pod(
        &client,
        "gpu",
        json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
               "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["gpu"]}]}]}}}}),
    )
    .await;
    assert_eq!(wait_bound(&c, &client, "gpu", BIND_TIMEOUT).await, "n3");
    // Anti-affinity against the ssd pod by zone keeps this one out of zone a (n1); the taint keeps it off n3.
    create_pod(
        &client,
        "apart",
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}}),
    )
    .await;
    let ssd_labels = json!({"metadata": {"labels": {"app": "db"}}});
    Api::<Pod>::namespaced(client.clone(), "default")
        .patch("ssd", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&ssd_labels))
        .await
        .expect("label the ssd pod");
    let apart = wait_bound(&c, &client, "apart", BIND_TIMEOUT).await;
    assert!(apart == "n2" || apart == "n1", "{apart}"); // raced the label; n3 is never possible
    // Resources: two 1.5-cpu pods cannot share a 2-cpu node.
    create_pod(&client, "big-1", json!({"containers": cpu("1500m")})).await;
    create_pod(&client, "big-2", json!({"containers": cpu("1500m")})).await;
    let (b1, b2) = (wait_bound(&c, &client, "big-1", BIND_TIMEOUT).await, wait_bound(&c, &client, "big-2", BIND_TIMEOUT).await);
    assert_ne!(b1, b2, "the scheduler's cache must count the first before its binding is observed");
    assert!(b1 != "n3" && b2 != "n3");

    // Unschedulable: reported with the reasons per node, then scheduled when a node fits.
    create_pod(&client, "huge", json!({"containers": cpu("8")})).await;
    let e = wait_event(&c, &client, "huge", "FailedScheduling").await;
    let msg = e.message.unwrap_or_default();
    assert!(msg.starts_with("0/3 nodes are available: "), "{msg}");
    assert!(msg.contains("Insufficient cpu"), "{msg}");
    assert!(msg.contains("1 node(s) had untolerated taint {dedicated: gpu}"), "{msg}");
    let out = c.kubectl_ok(&["get", "pod", "huge", "-o", "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}"]);
    assert_eq!(out.trim(), "Unschedulable");
    let describe = c.kubectl_ok(&["describe", "pod", "huge"]);
    assert!(describe.contains("FailedScheduling"), "{describe}");
    let t0 = Instant::now();
    create_node(&client, "n4", json!({"zone": "c"}), json!({}), "16").await;
    assert_eq!(wait_bound(&c, &client, "huge", BIND_TIMEOUT).await, "n4");
    eprintln!("[e2e] unschedulable pod bound {:?} after its node appeared", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(12), "moved back by the NodeAdd event, within its backoff");

    // Cordon: new pods keep off cordoned nodes.
    c.kubectl_ok(&["cordon", "n1", "n2"]);
    for i in 0..6 {
        create_pod(&client, &format!("after-cordon-{i}"), json!({})).await;
    }
    for i in 0..6 {
        let n = wait_bound(&c, &client, &format!("after-cordon-{i}"), BIND_TIMEOUT).await;
        assert_eq!(n, "n4", "after-cordon-{i} landed on {n}");
    }
    c.kubectl_ok(&["uncordon", "n1"]);
    create_pod(&client, "after-uncordon", json!({"nodeSelector": {"disk": "ssd"}})).await;
    assert_eq!(wait_bound(&c, &client, "after-uncordon", BIND_TIMEOUT).await, "n1");

    // A malformed constraint is reported, and the queue keeps going.
    create_pod(
        &client,
        "malformed",
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["not-a-number"]}]}]}}}}),
    )
    .await;
    wait_event(&c, &client, "malformed", "FailedScheduling").await;
    create_pod(&client, "after-malformed", json!({})).await;
    wait_bound(&c, &client, "after-malformed", BIND_TIMEOUT).await;

    // Scheduling gates: a gated pod is left alone (no attempt, no event) while a node fits it;
    // a gate can be removed, never added, and the pod is bound once the last one goes.
    create_pod(&client, "gated", json!({"schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/arch"}]})).await;
    let status = c.kubectl_ok(&["get", "pod", "gated", "--no-headers", "-o", "custom-columns=S:.status.conditions[0].reason"]);
    assert_eq!(status.trim(), "SchedulingGated");
    let unbound = || {
        let client = client.clone();
        async move {
            match node_of(&client, "gated").await {
                Some(n) => anyhow::bail!("the gated pod was bound to {n}"),
                None => Ok(()),
            }
        }
    };
    e2e::hold_for("the gated pod stays unbound", Duration::from_secs(3), Duration::from_millis(200), unbound).await.unwrap_or_else(|e| c.fail(&e.to_string()));
    assert!(events_for(&client, "gated").await.is_empty(), "a gated pod is never tried");
    let port = c.scheduler_port(0);
    e2e::poll_until("scheduler_pending_pods{queue=\"gated\"} 1", BIND_TIMEOUT, Duration::from_millis(200), || async move {
        let m = reqwest_get(&format!("http://127.0.0.1:{port}/metrics")).await;
        Ok(m.lines().any(|l| l == "scheduler_pending_pods{queue=\"gated\"} 1").then_some(()))
    })
    .await
    .unwrap_or_else(|e| c.fail(&e.to_string()));
    c.kubectl_err(
        &["patch", "pod", "gated", "--type=json", "-p", r#"[{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "x"}}]"#],
        "only deletion is allowed, but found new scheduling gate 'x'",
    );
    c.kubectl_ok(&["patch", "pod", "gated", "--type=json", "-p", r#"[{"op": "remove", "path": "/spec/schedulingGates/0"}]"#]);
    e2e::hold_for("one gate left: still unbound", Duration::from_secs(2), Duration::from_millis(200), unbound).await.unwrap_or_else(|e| c.fail(&e.to_string()));
    c.kubectl_ok(&["patch", "pod", "gated", "--type=json", "-p", r#"[{"op": "remove", "path": "/spec/schedulingGates"}]"#]);
    wait_bound(&c, &client, "gated", BIND_TIMEOUT).await;

    // Losing the API server pauses scheduling; it resumes when the API server returns.
    c.restart_apiserver().await.expect("restart the API server");
    create_pod(&client, "after-restart", json!({})).await;
    wait_bound(&c, &client, "after-restart", Duration::from_secs(30)).await;

    let metrics = reqwest_get(&format!("http://127.0.0.1:{}/metrics", c.scheduler_port(0))).await;
    assert!(metrics.contains("scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"}"), "{metrics}");
    assert!(metrics.contains("scheduler_pending_pods{queue=\"unschedulable\"}"), "{metrics}");
    assert!(metrics.contains("scheduler_e2e_scheduling_duration_seconds_bucket"), "{metrics}");
    let log = c.scheduler_log(0);
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_leader_election_and_takeover() {
    let mut c = ApiCluster::start(ApiOptions::default()).await.expect("start the cluster");
    let client = c.kube_client().expect("client");
    for i in 0..3 {
        create_node(&client, &format!("n{i}"), json!({}), json!({}), "64").await;
    }
    let a = c.start_scheduler(&["--leader-elect"]).expect("scheduler a");
    let b = c.start_scheduler(&["--leader-elect"]).expect("scheduler b");
    // One of them takes the lease.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(20);
    let holder = loop {
        if let Ok(l) = leases.get("kube-scheduler").await
            && let Some(h) = l.spec.and_then(|s| s.holder_identity).filter(|h| !h.is_empty())
        {
            break h;
        }
        if Instant::now() > deadline {
            c.fail("no scheduler took the kube-scheduler lease");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("[e2e] lease holder: {holder}");
    for i in 0..40 {
        create_pod(&client, &format!("p{i}"), json!({})).await;
    }
    for i in 0..40 {
        wait_bound(&c, &client, &format!("p{i}"), BIND_TIMEOUT).await;
    }
    // Each pod was bound exactly once, by one scheduler.
    for i in 0..40 {
        let ev = events_for(&client, &format!("p{i}")).await;
        let scheduled: Vec<&Event> = ev.iter().filter(|e| e.reason.as_deref() == Some("Scheduled")).collect();
        assert_eq!(scheduled.len(), 1, "p{i}: {ev:#?}");
        assert_eq!(scheduled[0].count, Some(1), "p{i}");
        assert!(!ev.iter().any(|e| e.reason.as_deref() == Some("FailedScheduling")), "p{i}: {ev:#?}");
    }
    let leader = [a, b]
        .into_iter()
        .find(|&i| c.scheduler_log(i).contains("successfully acquired lease"))
        .unwrap_or_else(|| c.fail("neither scheduler logged taking the lease"));
    let standby = if leader == a { b } else { a };
    assert!(!c.scheduler_log(standby).contains("Successfully bound"), "the standby must not schedule");

    // Kill the leader: the standby takes over within the lease duration (15 s) and schedules.
    c.kill_scheduler(leader);
    let killed = Instant::now();
    create_pod(&client, "after-failover", json!({})).await;
    wait_bound(&c, &client, "after-failover", Duration::from_secs(30)).await;
    let took = killed.elapsed();
    eprintln!("[e2e] standby scheduled a pod {took:?} after the leader was killed");
    assert!(took < Duration::from_secs(15 + 5), "takeover took {took:?}");
    assert!(c.scheduler_log(standby).contains("successfully acquired lease"));
}
