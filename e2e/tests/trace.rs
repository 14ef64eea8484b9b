//! `kubelab trace` end to end: a pod created with the pinned kubectl on a store + API server +
//! scheduler + node agent on a real containerd, then traced. The timeline holds every
//! component's steps in order (API server request and store write, the watch events to the
//! scheduler and the node agent, the scheduler's queue, filter, score and bind, the eight SyncPod
//! steps and the CRI calls under them); `--mermaid` and `--json` render it; a pod whose image
//! cannot be pulled shows its failing step; a static pod is traced through its mirror pod; a pod
//! of a Deployment is traced back to it (Deployment → ReplicaSet → Pod, each link with the client
//! that made it and the controller's event saying why); a missing pod or Service is reported, and a
//! deleted Service is traced by its UID.

use std::process::Command;
use std::time::Duration;

use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};

const NODE: &str = "node-trace";

fn try_trace(api: &ApiCluster, args: &[&str]) -> Result<String, String> {
    let bin = e2e::kubelab_bin().expect("kubelab binary");
    let out = Command::new(bin).arg("trace").args(args).args(["--server", &api.url()]).output().expect("run kubelab trace");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() { Ok(stdout) } else { Err(format!("kubelab trace {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))) }
}

fn trace(api: &ApiCluster, args: &[&str]) -> String {
    try_trace(api, args).unwrap_or_else(|e| panic!("{e}"))
}

/// The steps' `component name` pairs in the order the table prints them.
fn steps(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(2) // the pod line and the header
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.len() >= 5 && cols[0].starts_with('+')).then(|| format!("{} {}", cols[2], cols[4]))
        })
        .collect()
}

fn position(steps: &[String], want: &str) -> usize {
    steps.iter().position(|s| s.starts_with(want)).unwrap_or_else(|| panic!("no step {want:?} in {steps:#?}"))
}

/// Traces are written when a component's span closes, a moment after the pod turns Running.
async fn trace_until(api: &ApiCluster, args: &[&str], want: &[&str]) -> String {
    let mut last = String::new();
    for _ in 0..120 {
        // A mirror pod appears a moment after its static pod runs: until then, not found.
        last = match try_trace(api, args) {
            Ok(t) => t,
            Err(e) => e,
        };
        let s = steps(&last);
        if want.iter().all(|w| s.iter().any(|x| x.starts_with(w))) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("kubelab trace {args:?} never showed all of {want:?}:\n{last}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pods_journey_is_traced_through_every_component() {
    if let Err(e) = e2e::containerd::prerequisites() {
        panic!("the trace test needs: {e}");
    }
    let mut api = ApiCluster::start(ApiOptions { controller_manager: true, ..ApiOptions::default() }).await.expect("store + API server + controller manager");
    api.start_scheduler(&[]).expect("scheduler");
    let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: NODE, pod_cidr_octet: 49, extra: vec![] })
        .await
        .expect("node agent");
    api.wait_node_ready(NODE).await;

    // `--follow` waits for the next pod created and prints its steps as they come.
    let mut follow_cmd = Command::new(e2e::kubelab_bin().expect("kubelab binary"));
    follow_cmd.args(["trace", "--follow", "--server", &api.url()]);
    let mut follow = e2e::background::Background::spawn(follow_cmd, "kubelab trace --follow".into()).expect("spawn kubelab trace --follow");
    follow.expect_stderr_line("the follower waiting", Duration::from_secs(30), |l| l.contains("waiting for the next pod")).expect("--follow waits");

    // 1. A pod scheduled and run: every hop, in the order the seed article draws them.
    api.kubectl_ok(&["run", "web", "--image=docker.io/library/busybox:1.36", "--restart=Never", "--", "sleep", "3600"]);
    api.kubectl_ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);
    let table = trace_until(&api, &["pod/web"], &["nodeagent step8_status", "cri StartContainer"]).await;
    let s = steps(&table);
    let order = [
        "apiserver request",
        "apiserver authentication",
        "apiserver authorization",
        "apiserver store",
        "store propose",
        "store replicate",
        "store apply",
        "scheduler queued",
        "scheduler schedule_one",
        "scheduler bind",
        "nodeagent sync_pod",
        "nodeagent step1_pod_cgroup",
        "nodeagent step5_run_pod_sandbox",
        "cri RunPodSandbox",
        "nodeagent step7_container",
        "cri StartContainer",
        "nodeagent step8_status",
    ];
    let at: Vec<usize> = order.iter().map(|w| position(&s, w)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "steps out of order ({order:?} at {at:?}):\n{table}");
    for w in ["scheduler filter", "scheduler reserve", "apiserver watch"] {
        position(&s, w);
    }
    assert!(table.contains("watcher=kube-scheduler") && table.contains("watcher=kubelet"), "watch events to both:\n{table}");
    assert!(table.contains(NODE), "the node agent's steps name its node:\n{table}");
    // Who created the pod, and what let them (this cluster's kubectl is on the insecure port).
    assert!(table.contains("user=system:unsecured") && table.contains("allowed_by=allowed as a member of system:masters"), "authentication and authorization:\n{table}");
    assert!(table.contains("pod_ip=10.244.49."), "the sandbox step shows the pod IP:\n{table}");

    let (ok, lines, stderr) = follow.wait_exit(Duration::from_secs(60)).expect("--follow ends once the pod is Running and quiet");
    assert!(ok, "--follow failed: {stderr}");
    let followed = lines.join("\n");
    assert!(lines.first().is_some_and(|l| l == "pod default/web"), "{followed}");
    for w in ["request", "bind", "step5_run_pod_sandbox", "StartContainer", "step8_status"] {
        assert!(followed.contains(w), "--follow never showed {w}:\n{followed}");
    }

    let mermaid = trace(&api, &["pod/web", "--mermaid"]);
    let diagram = e2e::mermaid::parse(&mermaid).unwrap_or_else(|e| panic!("the diagram does not parse: {e}\n{mermaid}"));
    let names: Vec<&str> = diagram.participants.iter().map(|(_, name)| name.as_str()).collect();
    for who in ["User", "API Server", "etcd", "Scheduler", "kubelet", "Container Runtime", "CNI"] {
        assert!(names.iter().any(|n| n.starts_with(who)), "no participant {who} in {names:?}");
    }
    assert!(diagram.unused_participants().is_empty(), "participants without a message: {:?}\n{mermaid}", diagram.unused_participants());
    for arrow in ["U->>API: request POST pods", "API->>ETCD: store write", "ETCD->>ETCD: replicate and commit", "S->>API: bind", "K->>CR: RunPodSandbox", "CR->>CNI: ADD", "API->>K: watch event sent"] {
        assert!(mermaid.contains(arrow), "no {arrow:?} in\n{mermaid}");
    }
    let json: serde_json::Value = serde_json::from_str(&trace(&api, &["web", "--json"])).expect("--json is JSON");
    assert_eq!(json["name"], "web");
    assert!(json["steps"].as_array().is_some_and(|s| s.len() >= order.len()), "{json}");

    // 2. A pod that cannot start: its failing step carries the error.
    api.kubectl_ok(&["run", "broken", "--image=docker.io/library/does-not-exist:1", "--image-pull-policy=IfNotPresent", "--restart=Never"]);
    let table = trace_until(&api, &["pod/broken"], &["cri PullImage"]).await;
    assert!(table.lines().any(|l| l.contains("PullImage") && l.contains("FAILED")), "the failed pull is marked:\n{table}");
    assert!(table.lines().any(|l| l.contains("step7_container") && l.contains("FAILED")), "the failed container step is marked:\n{table}");

    // 3. A static pod: no scheduler, and the mirror pod's creation shows.
    std::fs::write(
        agent.manifests_dir().join("static-web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\n  namespace: default\nspec:\n  containers:\n  - name: web\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n",
    )
    .expect("write manifest");
    let mirror = format!("pod/static-web-{NODE}");
    let table = trace_until(&api, &[&mirror], &["nodeagent create", "nodeagent step8_status"]).await;
    assert!(!steps(&table).iter().any(|s| s.starts_with("scheduler ")), "a static pod has no scheduler hop:\n{table}");

    // 4. A pod of a Deployment: the trace follows it back to its owners.
    api.kubectl_ok(&["create", "deployment", "traced", "--image=docker.io/library/busybox:1.36", "--", "sleep", "3600"]);
    api.kubectl_ok(&["rollout", "status", "deployment/traced", "--timeout=90s"]);
    let pod = api.kubectl_ok(&["get", "pods", "-l", "app=traced", "-o", "jsonpath={.items[0].metadata.name}"]);
    let pod = format!("pod/{}", pod.trim());
    let table = trace_until(&api, &[&pod], &["nodeagent step8_status"]).await;
    let made_by = table.lines().find(|l| l.starts_with("made by ")).unwrap_or_else(|| panic!("no chain of owners:\n{table}"));
    assert!(made_by.starts_with("made by Deployment/traced → ReplicaSet/traced-") && made_by.ends_with(&format!("→ Pod/{}", &pod[4..])), "{table}");
    assert!(table.contains("Deployment/traced") && table.contains("created by kubectl-create"), "the Deployment was made by kubectl create:\n{table}");
    assert!(table.contains("created by kube-controller-manager: deployment-controller ScalingReplicaSet: Scaled up replica set traced-"), "the ReplicaSet's why:\n{table}");
    assert!(table.contains(&format!("created by kube-controller-manager: replicaset-controller SuccessfulCreate: Created pod: {}", &pod[4..])), "the pod's why:\n{table}");
    let mermaid = trace(&api, &[&pod, "--mermaid"]);
    let diagram = e2e::mermaid::parse(&mermaid).unwrap_or_else(|e| panic!("the diagram does not parse: {e}\n{mermaid}"));
    assert!(diagram.unused_participants().is_empty(), "participants without a message: {:?}\n{mermaid}", diagram.unused_participants());
    for arrow in ["U->>API: create Deployment/traced by kubectl-create", "CM->>API: create ReplicaSet/traced-", "Note over CM,API: replicaset-controller SuccessfulCreate", "CM->>API: request POST pods"] {
        assert!(mermaid.contains(arrow), "no {arrow:?} in\n{mermaid}");
    }
    let json: serde_json::Value = serde_json::from_str(&trace(&api, &[&pod, "--json"])).expect("--json is JSON");
    let kinds: Vec<&str> = json["owners"].as_array().map(|o| o.iter().filter_map(|h| h["kind"].as_str()).collect()).unwrap_or_default();
    assert_eq!(kinds, ["Deployment", "ReplicaSet", "Pod"], "{json}");

    // A pod that is gone is reported clearly.
    let bin = e2e::kubelab_bin().expect("kubelab binary");
    let out = Command::new(bin).args(["trace", "pod/nope", "--server", &api.url()]).output().expect("run kubelab trace");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pod default/nope not found"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(e2e::kubelab_bin().expect("kubelab binary")).args(["trace", "svc/nope", "--server", &api.url()]).output().expect("run kubelab trace");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Service default/nope not found"), "{}", String::from_utf8_lossy(&out.stderr));
    // A Service that is gone is traced by its UID: the API server's record of its create.
    api.kubectl_ok(&["create", "service", "clusterip", "gone", "--tcp=80:8080"]);
    let uid = api.kubectl_ok(&["get", "service", "gone", "-o", "jsonpath={.metadata.uid}"]);
    api.kubectl_ok(&["delete", "service", "gone"]);
    let table = trace(&api, &["svc/gone", "--uid", uid.trim()]);
    assert!(table.starts_with(&format!("service default/gone (uid {})", uid.trim())), "{table}");
    assert!(table.lines().any(|l| l.contains("request") && l.contains("resource=services") && l.contains("verb=POST")), "the create:\n{table}");
    drop(agent);
}
