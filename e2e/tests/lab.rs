//! The Docker Compose lab end to end (`deploy/lab/lab`): three node containers, each running
//! containerd, `kubelab nodeagent` and the control plane as static pods. The test brings the lab
//! up, checks the nodes, the store members and the control-plane mirror pods, runs a pod on each
//! node and reaches a pod on another node by IP (host-gw routes), then breaks it: kills the node
//! of the store leader, partitions a node, restarts the whole lab, and checks after each that
//! nothing was lost; then a worker joins with a bootstrap token; last, the store is backed up and
//! restored (`lab backup`, `lab restore`: what was written after the backup is gone, the nodes
//! come back Ready, a new pod runs). On the way it checks the lab's
//! security as kubeadm sets it up: HTTPS with the admin's certificate, anonymous requests
//! refused, a node's credentials kept from another node's secrets, the node agents' and the
//! store's ports refusing callers without credentials, secrets encrypted in the store; and pods on
//! every node pulling from the lab's registry with its pull secret, refused without it.
//! `lab down -v` runs at the end whatever happens (a drop guard).
//!
//! Prints the lab's benchmark figures: image build (cold or cached) and up → three nodes Ready
//! (from `lab up`), pod create → Running on each node, and how long writes fail after the store
//! leader's node dies.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use e2e::lab::{Lab, NODE_PKI, NODES, api_port, node_ip, secs};
use e2e::poll_until;

/// How long a pod gets to run (three control planes share two cores with other tests).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the cluster gets to accept writes again after losing a member.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a restarted or healed node gets to be Ready again.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// The node lifecycle controller marks a node whose Lease stopped 40 s ago; polling adds margin.
const NOT_READY_TIMEOUT: Duration = Duration::from_secs(75);

/// Whether this tree has the node lifecycle controller (being written next to the lab): only
/// then can a dead node be expected to turn NotReady.
fn has_node_lifecycle_controller() -> bool {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../controllers/src/nodelifecycle.rs").exists()
}

fn busybox_pod(name: &str, node: &str, script: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "lab-e2e"}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            // The lab's API servers give pods 30 s on a dead node (exercise 07 watches them
            // replaced); these bare pods must outlive step 6's dead node, which stays NotReady
            // longer than that while the Service heals and the node restarts. Kubernetes' own
            // default (300 s), written out, keeps them there.
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "containers": [{
                "name": "main", "image": "docker.io/library/busybox:1.36", "imagePullPolicy": "Never",
                "command": ["sh", "-c", script]
            }]
        }
    })
    .to_string()
}

/// name → (phase, nodeName, podIP) of the pods in `default`.
async fn pods(lab: &Lab, via: &str) -> anyhow::Result<BTreeMap<String, (String, String, String)>> {
    let v = lab.get_json(via, &["pods", "-n", "default"]).await?;
    Ok(v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
            (s(&p["metadata"]["name"]), (s(&p["status"]["phase"]), s(&p["spec"]["nodeName"]), s(&p["status"]["podIP"])))
        })
        .collect())
}

async fn wait_running(lab: &Lab, via: &str, names: &[&str], timeout: Duration) -> anyhow::Result<BTreeMap<String, String>> {
    poll_until(&format!("pods {names:?} Running"), timeout, Duration::from_millis(500), || async {
        let p = pods(lab, via).await?;
        let ips: BTreeMap<String, String> =
            names.iter().filter_map(|n| p.get(*n).filter(|(phase, _, ip)| phase == "Running" && !ip.is_empty()).map(|(_, _, ip)| (n.to_string(), ip.clone()))).collect();
        Ok((ips.len() == names.len()).then_some(ips))
    })
    .await
}

/// Waits until the pods run containers started at or after `since` (the old status says Running
/// until each node agent has looked again: a lab restart must be seen to start them anew).
async fn wait_started_since(lab: &Lab, via: &str, names: &[&str], since: chrono::DateTime<chrono::Utc>, timeout: Duration) -> anyhow::Result<()> {
    let since = since.timestamp();
    poll_until(&format!("pods {names:?} running containers started after the restart"), timeout, Duration::from_millis(500), || async {
        let v = lab.get_json(via, &["pods", "-n", "default"]).await?;
        let started = v["items"].as_array().into_iter().flatten().filter(|p| {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            let at = p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"].as_str().unwrap_or_default();
            let at = chrono::DateTime::parse_from_rfc3339(at).map(|t| t.timestamp()).unwrap_or(i64::MIN);
            names.contains(&name) && p["status"]["phase"] == "Running" && at >= since
        });
        Ok((started.count() == names.len()).then_some(()))
    })
    .await
}

async fn wait_all_ready(lab: &Lab, via: &str, timeout: Duration) -> anyhow::Result<()> {
    poll_until("three nodes Ready", timeout, Duration::from_secs(1), || async {
        let r = lab.node_readiness(via).await?;
        Ok((r.len() == 3 && r.values().all(|s| s == "True")).then_some(()))
    })
    .await
}

/// A write through `via` (a ConfigMap named `name`), retried until it succeeds; returns how long
/// after `start` (the moment the fault was injected) it did.
async fn write_until_ok(lab: &Lab, via: &str, name: &str, start: Instant, timeout: Duration) -> anyhow::Result<Duration> {
    poll_until(&format!("configmap {name} written via {via}"), timeout, Duration::from_millis(250), || async {
        let out = lab.kubectl(via, &["create", "configmap", name, "-n", "default", "--from-literal=k=v"], None).await?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || err.contains("AlreadyExists") || err.contains("already exists") {
            Ok(Some(()))
        } else {
            anyhow::bail!("{}", err.trim())
        }
    })
    .await?;
    Ok(start.elapsed())
}

async fn configmaps(lab: &Lab, via: &str) -> anyhow::Result<Vec<String>> {
    let v = lab.get_json(via, &["configmaps", "-n", "default"]).await?;
    let mut names: Vec<String> = v["items"].as_array().into_iter().flatten().filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string)).collect();
    names.sort();
    Ok(names)
}

/// Waits until the three store members answer and agree on a leader; returns it.
async fn store_healthy(lab: &Lab, via: &str, timeout: Duration) -> anyhow::Result<String> {
    poll_until("three healthy store members", timeout, Duration::from_secs(1), || async {
        lab.etcdctl(via, &["endpoint", "health"]).await?;
        let (leader, answered) = lab.store_leader(via).await?;
        Ok((answered == 3).then_some(leader))
    })
    .await
}

async fn expect_not_ready(lab: &Lab, via: &str, node: &str) -> anyhow::Result<()> {
    if !has_node_lifecycle_controller() {
        eprintln!("[lab] no node lifecycle controller in this tree: not expecting {node} to turn NotReady");
        return Ok(());
    }
    let start = Instant::now();
    poll_until(&format!("{node} NotReady"), NOT_READY_TIMEOUT, Duration::from_secs(1), || async {
        let r = lab.node_readiness(via).await?;
        Ok(r.get(node).filter(|s| s.as_str() != "True").map(|_| ()))
    })
    .await?;
    eprintln!("[lab] timing: {node} NotReady {} after it was cut off", secs(start.elapsed()));
    Ok(())
}

/// The node's Lease must stop being renewed while it is down or cut off (what the node lifecycle
/// controller acts on): held for 15 s, longer than the agent's 10 s renew interval.
async fn lease_stalls(lab: &Lab, via: &str, node: &str) -> anyhow::Result<()> {
    let renew = || async {
        let v = lab.get_json(via, &["lease", node, "-n", "kube-node-lease"]).await?;
        Ok::<_, anyhow::Error>(v["spec"]["renewTime"].as_str().unwrap_or_default().to_string())
    };
    let before = renew().await?;
    e2e::hold_for(&format!("{node}'s Lease not renewed while it is cut off"), Duration::from_secs(15), Duration::from_secs(5), || async {
        let now = renew().await?;
        anyhow::ensure!(now == before, "renewed ({before} → {now})");
        Ok(())
    })
    .await
}

/// What a failed cross-node check needs looked at: both pods and their logs, each node's routes
/// (host-gw's `proto 77` ones among them) and what its agent said about them.
/// What the cluster says about pods that did not come back: the pods, their events, and each
/// node agent's recent lines that name one of them (printed when a wait for them fails).
async fn pod_diagnostics(lab: &Lab, names: &[&str]) -> String {
    let mut out = String::from("[lab] pod diagnostics:\n");
    let mut add = |what: String, r: anyhow::Result<String>| {
        out.push_str(&format!("--- {what}\n{}\n", r.unwrap_or_else(|e| format!("(failed: {e:#})"))));
    };
    add("kubectl get pods -A -o wide".into(), lab.kubectl_ok("node1", &["get", "pods", "-A", "-o", "wide"]).await);
    add("kubectl get events".into(), lab.kubectl_ok("node1", &["get", "events", "--sort-by=.lastTimestamp"]).await);
    // The agent's lines name a pod by its UID as often as by its name.
    let mut keys: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    for pod in names {
        add(format!("kubectl get pod {pod} -o yaml (status)"), lab.kubectl_ok("node1", &["get", "pod", pod, "-o", "jsonpath={.status}"]).await);
        if let Ok(uid) = lab.kubectl_ok("node1", &["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"]).await
            && !uid.trim().is_empty()
        {
            keys.push(uid.trim().to_string());
        }
    }
    let since = chrono::Utc::now() - chrono::Duration::minutes(5);
    for node in NODES {
        let lines = lab.agent_log_since(node, since).await.map(|log| {
            let hits: Vec<&str> = log.lines().filter(|l| keys.iter().any(|k| l.contains(k.as_str())) || l.contains("ERROR") || l.contains("WARN")).collect();
            hits[hits.len().saturating_sub(150)..].join("\n")
        });
        add(format!("{node}: agent lines naming the pods or their UIDs, warnings and errors (last 150)"), lines);
    }
    out
}

/// `pod` with the label `app: app` instead of the default one.
fn labelled(pod: &str, app: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(pod).expect("pod json");
    v["metadata"]["labels"]["app"] = serde_json::Value::String(app.into());
    v.to_string()
}

/// Who answers `http://web.default.svc.cluster.local/` from `client` (kubectl exec through
/// `via`'s API server), over up to `tries`
/// requests (each bounded: this busybox's `wget -T` crashes, so `timeout` bounds it), stopping
/// early once all three web pods have answered or `limit` has passed.
async fn answers(lab: &Lab, via: &str, client: &str, tries: usize, limit: Duration) -> std::collections::BTreeSet<String> {
    let started = Instant::now();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..tries {
        if seen.len() == 3 || started.elapsed() > limit {
            break;
        }
        if let Ok(out) = lab.kubectl_ok(via, &["exec", client, "--", "timeout", "5", "wget", "-q", "-O", "-", "http://web.default.svc.cluster.local/"]).await {
            seen.insert(out.trim().to_string());
        }
    }
    seen
}

/// The Service path when it fails: kube-dns, the web Service's slices, each node's proxy log tail
/// and its KUBE-SERVICES chain.
async fn service_diagnostics(lab: &Lab, via: &str) -> String {
    let mut out = String::from("[lab] service diagnostics:\n");
    let mut add = |what: String, r: anyhow::Result<String>| {
        out.push_str(&format!("--- {what}\n{}\n", r.unwrap_or_else(|e| format!("(failed: {e:#})"))));
    };
    add("kube-system pods".into(), lab.kubectl_ok(via, &["get", "pods", "-n", "kube-system", "-o", "wide"]).await);
    add("endpointslices -A".into(), lab.kubectl_ok(via, &["get", "endpointslices", "-A", "-o", "wide"]).await);
    for node in NODES {
        add(format!("{node}: proxy log (tail)"), lab.exec_ok(node, &["sh", "-c", "tail -n 20 /var/log/kubelab-proxy.log"]).await);
        add(format!("{node}: iptables -t nat -S KUBE-SERVICES"), lab.exec_ok(node, &["iptables", "-t", "nat", "-S", "KUBE-SERVICES"]).await);
    }
    out
}

/// [`wait_running`], printing [`pod_diagnostics`] before panicking when the pods do not run.
async fn expect_running(lab: &Lab, via: &str, names: &[&str], what: &str) -> BTreeMap<String, String> {
    match wait_running(lab, via, names, RUN_TIMEOUT).await {
        Ok(ips) => ips,
        Err(e) => {
            eprintln!("{}", pod_diagnostics(lab, names).await);
            panic!("{what}: {e:#}");
        }
    }
}

/// The lab's security, as issue-level checks: who the admin is, what an anonymous caller, a node
/// and a caller without a certificate may do, and what the store holds of a secret. `pod-node3`
/// runs on node3 when it is called.
async fn security_checks(lab: &Lab) -> anyhow::Result<()> {
    use anyhow::ensure;
    // The admin's kubeconfig: HTTPS, a client certificate in system:masters.
    let who = lab.kubectl_ok("node2", &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"]).await?;
    ensure!(who.starts_with("kubernetes-admin ") && who.contains("system:masters"), "kubectl auth whoami: {who:?}");
    // Anonymous callers get Kubernetes' 403 (curl in a node: no credentials at all).
    let anon = lab.exec_ok("node1", &["curl", "-sk", &format!("https://{}:6443/api/v1/pods", node_ip("node2"))]).await?;
    ensure!(anon.contains(r#""code":403"#) && anon.contains(r#"pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\""#), "anonymous list of pods: {anon}");
    let plain = lab.exec("node1", &["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:6443/api/v1/pods"]).await?;
    ensure!(String::from_utf8_lossy(&plain.stdout) != "200", "plain HTTP on 6443 answered 200");
    ensure!(api_port("node1") == 6443, "node1's published port");

    // A service account bound to `view`, with a token from TokenRequest (`kubectl create token`):
    // it may list pods, is refused a create with Kubernetes' message, and `auth can-i` says so.
    lab.kubectl_ok("node1", &["create", "serviceaccount", "viewer"]).await?;
    lab.kubectl_ok("node1", &["create", "rolebinding", "viewer", "--clusterrole=view", "--serviceaccount=default:viewer"]).await?;
    let token = lab.kubectl_ok("node1", &["create", "token", "viewer", "--duration=10m"]).await?;
    let dir = tempfile::Builder::new().prefix("kubelab-e2e-lab-viewer-").tempdir()?;
    let viewer = dir.path().join("viewer.conf");
    let ca = lab.pki_dir().join("ca.crt");
    std::fs::write(
        &viewer,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: viewer\n  user:\n    token: {}\ncontexts:\n- name: viewer\n  context: {{cluster: lab, user: viewer, namespace: default}}\ncurrent-context: viewer\n",
            api_port("node3"),
            ca.display(),
            token.trim()
        ),
    )?;
    poll_until("the viewer lists pods", Duration::from_secs(30), Duration::from_millis(500), || async {
        let out = lab.kubectl_as(&viewer, &["get", "pods", "-o", "name"]).await?;
        Ok(out.status.success().then_some(()))
    })
    .await?;
    let create = lab.kubectl_as(&viewer, &["create", "configmap", "by-the-viewer"]).await?;
    let err = String::from_utf8_lossy(&create.stderr);
    ensure!(
        !create.status.success() && err.contains(r#"configmaps is forbidden: User "system:serviceaccount:default:viewer" cannot create resource "configmaps" in API group "" in the namespace "default""#),
        "the viewer's create: {err}"
    );
    let can = lab.kubectl_as(&viewer, &["auth", "can-i", "create", "pods"]).await?;
    ensure!(String::from_utf8_lossy(&can.stdout).trim() == "no" && !can.status.success(), "auth can-i create pods as the viewer: {can:?}");
    let list = lab.kubectl_as(&viewer, &["auth", "can-i", "--list"]).await?;
    let list = String::from_utf8_lossy(&list.stdout);
    ensure!(list.lines().any(|l| l.starts_with("pods ") && l.contains("[get list watch]")), "auth can-i --list as the viewer:\n{list}");
    let who = lab.kubectl_as(&viewer, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]).await?;
    ensure!(String::from_utf8_lossy(&who.stdout) == "system:serviceaccount:default:viewer", "whoami as the viewer: {who:?}");

    // A secret mounted by a pod on node3: node3's credentials may read it, node2's may not (the
    // Node authorizer: no path from node2 to it in the graph).
    lab.kubectl_ok("node1", &["create", "secret", "generic", "lab-secret", "--from-literal=password=plain-text-in-the-lab"]).await?;
    let mut pod: serde_json::Value = serde_json::from_str(&busybox_pod("secret-node3", "node3", "sleep 100000"))?;
    pod["spec"]["volumes"] = serde_json::json!([{"name": "s", "secret": {"secretName": "lab-secret"}}]);
    pod["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([{"name": "s", "mountPath": "/s"}]);
    lab.apply("node1", &pod.to_string()).await?;
    expect_running(lab, "node1", &["secret-node3"], "the pod with the secret on node3").await;
    let mounted = lab.kubectl_ok("node1", &["exec", "secret-node3", "--", "cat", "/s/password"]).await?;
    ensure!(mounted == "plain-text-in-the-lab", "the secret in the pod: {mounted:?}");
    let pki = lab.pki_dir();
    let own = lab.kubectl_as(&pki.join("kubelet-node3.conf"), &["get", "secret", "lab-secret", "-o", "name"]).await?;
    ensure!(own.status.success(), "node3 reading its pod's secret: {}", String::from_utf8_lossy(&own.stderr));
    let other = lab.kubectl_as(&pki.join("kubelet-node2.conf"), &["get", "secret", "lab-secret"]).await?;
    let err = String::from_utf8_lossy(&other.stderr);
    ensure!(
        !other.status.success() && err.contains(r#"secrets "lab-secret" is forbidden: User "system:node:node2" cannot get resource "secrets""#) && err.contains("no relationship found between node 'node2' and this object"),
        "node2 reading node3's pod's secret: {err}"
    );

    // node3's agent refuses exec to a caller without credentials (401: no anonymous access).
    let exec_url = format!("https://{}:10250/exec/default/pod-node3/main?command=id&output=1", node_ip("node3"));
    let code = lab.exec_ok("node1", &["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", &exec_url]).await?;
    ensure!(code == "401", "exec on node3's agent without credentials: HTTP {code}");

    // The store refuses a client without a certificate of the etcd CA.
    let bare = lab
        .exec("node1", &["etcdctl", "--command-timeout=3s", &format!("--cacert={NODE_PKI}/etcd/ca.crt"), "--endpoints", &format!("{}:2379", node_ip("node2")), "get", "/registry/namespaces/default"])
        .await?;
    ensure!(!bare.status.success(), "etcdctl without a client certificate read the store: {}", String::from_utf8_lossy(&bare.stdout));
    // And holds the secret encrypted with the lab's key, the plain text nowhere.
    let stored = lab.etcdctl("node1", &["get", "/registry/secrets/default/lab-secret", "--print-value-only"]).await?;
    ensure!(stored.starts_with("k8s:enc:aescbc:v1:key1:") && !stored.contains("plain-text-in-the-lab"), "the secret in the store: {stored:?}");
    lab.kubectl_ok("node1", &["delete", "pod", "secret-node3", "--grace-period=1"]).await?;
    Ok(())
}

/// `lab join`: node4 joins with a bootstrap token, is issued its client certificate through a
/// CertificateSigningRequest the controller manager approved, and runs a pod whose log the API
/// server fetches from its agent over TLS.
async fn join_a_worker(lab: &Lab) -> anyhow::Result<String> {
    use anyhow::ensure;
    let out = lab.script_ok(&["join"]).await?;
    let v = lab.get_json("node1", &["csr"]).await?;
    let csrs: Vec<(String, String, Vec<String>)> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let conds = c["status"]["conditions"].as_array().into_iter().flatten().filter_map(|t| t["type"].as_str().map(str::to_string)).collect();
            (c["spec"]["username"].as_str().unwrap_or_default().to_string(), c["spec"]["signerName"].as_str().unwrap_or_default().to_string(), conds)
        })
        .collect();
    ensure!(
        csrs.iter().any(|(user, signer, conds)| user.starts_with("system:bootstrap:") && signer == "kubernetes.io/kube-apiserver-client-kubelet" && conds.contains(&"Approved".to_string())),
        "node4's CertificateSigningRequest: {csrs:?}"
    );
    let issued = v["items"].as_array().into_iter().flatten().any(|c| c["status"]["certificate"].as_str().is_some_and(|s| !s.is_empty()));
    ensure!(issued, "no certificate issued: {v}");
    lab.apply("node1", &busybox_pod("pod-node4", "node4", "echo hello-from-node4; sleep 100000")).await?;
    expect_running(lab, "node1", &["pod-node4"], "a pod on the joined node4").await;
    poll_until("pod-node4's log", Duration::from_secs(30), Duration::from_secs(1), || async {
        Ok(lab.kubectl_ok("node1", &["logs", "pod-node4"]).await?.contains("hello-from-node4").then_some(()))
    })
    .await?;
    Ok(out)
}

/// The lab's registry: a pod on each node pulls the registry's busybox with the pull secret `lab
/// up` made (kubelet's `Pulled` event names the image and its size); without the secret, and
/// `Always`, the registry refuses the pull (401, ErrImagePull then ImagePullBackOff).
async fn pulls_from_the_lab_registry(lab: &Lab) -> anyhow::Result<()> {
    use anyhow::ensure;
    const IMAGE: &str = "registry:5000/library/busybox:1.36";
    let with_image = |name: &str, node: &str, secret: bool, policy: &str| -> anyhow::Result<String> {
        let mut pod: serde_json::Value = serde_json::from_str(&busybox_pod(name, node, "sleep 100000"))?;
        pod["spec"]["containers"][0]["image"] = serde_json::json!(IMAGE);
        pod["spec"]["containers"][0]["imagePullPolicy"] = serde_json::json!(policy);
        if secret {
            pod["spec"]["imagePullSecrets"] = serde_json::json!([{"name": "registry-credentials"}]);
        }
        Ok(pod.to_string())
    };
    let names: Vec<String> = NODES.iter().map(|n| format!("pull-{n}")).collect();
    for (n, name) in NODES.iter().zip(&names) {
        lab.apply("node1", &with_image(name, n, true, "Always")?).await?;
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    expect_running(lab, "node1", &refs, "pods pulling from the lab's registry").await;
    for name in &names {
        let v = lab.get_json("node1", &["events", "--field-selector", &format!("involvedObject.name={name}")]).await?;
        let pulled: Vec<&str> = v["items"].as_array().into_iter().flatten().filter(|e| e["reason"] == "Pulled").filter_map(|e| e["message"].as_str()).collect();
        ensure!(pulled.iter().any(|m| m.starts_with(&format!("Successfully pulled image {IMAGE:?} in ")) && m.contains("Image size: ")), "{name}'s Pulled events: {pulled:?}");
    }
    lab.apply("node1", &with_image("pull-refused", "node2", false, "Always")?).await?;
    let refused = poll_until("pull-refused waiting with the registry's refusal", Duration::from_secs(60), Duration::from_secs(1), || async {
        let p = lab.get_json("node1", &["pod", "pull-refused"]).await?;
        let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
        let (reason, message) = (w["reason"].as_str().unwrap_or_default(), w["message"].as_str().unwrap_or_default());
        Ok((reason == "ErrImagePull" && message.contains("401 Unauthorized")).then(|| message.to_string()))
    })
    .await?;
    eprintln!("[lab] without the pull secret: {refused}");
    let gone: Vec<&str> = names.iter().map(String::as_str).chain(["pull-refused"]).collect();
    for name in &gone {
        lab.kubectl_ok("node1", &["delete", "pod", name, "--grace-period=1", "--wait=false"]).await?;
    }
    // Gone before the faults begin: a pod still terminating on a node that is then killed stays
    // until the node is back, and the whole-lab restart below compares the pods before and after.
    poll_until("the registry step's pods gone", Duration::from_secs(60), Duration::from_secs(1), || async {
        let left: Vec<String> = pods(lab, "node1").await?.into_keys().filter(|n| gone.contains(&n.as_str())).collect();
        Ok(left.is_empty().then_some(()))
    })
    .await?;
    Ok(())
}

/// A claim on node2 through the lab's CSI driver (the csi-hostpathplugin DaemonSet): the default
/// class binds it when its first pod is scheduled there, node2's driver provisions it, attaches
/// it and the agent mounts it; what the first pod writes the next pod on node2 reads; deleting
/// the claim deletes its volume.
async fn claim_on_node2(lab: &Lab) -> anyhow::Result<()> {
    use anyhow::ensure;
    let claim = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"lab-data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"32Mi"}}}}"#;
    lab.apply("node1", claim).await?;
    let with_claim = |name: &str, script: &str| -> anyhow::Result<String> {
        // On node2 by its node selector: the scheduler's VolumeBinding gives the claim that node.
        let mut pod: serde_json::Value = serde_json::from_str(&busybox_pod(name, "node2", script))?;
        pod["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([{"name": "data", "mountPath": "/data"}]);
        pod["spec"]["volumes"] = serde_json::json!([{"name": "data", "persistentVolumeClaim": {"claimName": "lab-data"}}]);
        Ok(pod.to_string())
    };
    lab.apply("node1", &with_claim("claim-writer", "echo written on node2 > /data/file; sleep 100000")?).await?;
    expect_running(lab, "node1", &["claim-writer"], "a pod with a claim on node2").await;
    let c = lab.get_json("node1", &["pvc", "lab-data"]).await?;
    let pv = c["spec"]["volumeName"].as_str().unwrap_or_default().to_string();
    ensure!(c["status"]["phase"] == "Bound" && c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node2", "the claim: {c}");
    let v = lab.get_json("node1", &["pv", &pv]).await?;
    ensure!(v["spec"]["csi"]["driver"] == "hostpath.csi.kubelab.io" && v["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0] == "node2", "the volume: {v}");
    lab.kubectl_ok("node1", &["delete", "pod", "claim-writer", "--grace-period=1"]).await?;
    lab.apply("node1", &with_claim("claim-reader", "cat /data/file; sleep 100000")?).await?;
    expect_running(lab, "node1", &["claim-reader"], "the next pod with the claim").await;
    poll_until("the next pod reads what the first wrote", Duration::from_secs(30), Duration::from_secs(1), || async {
        let logs = lab.kubectl_ok("node1", &["logs", "claim-reader"]).await.unwrap_or_default();
        Ok(logs.contains("written on node2").then_some(()))
    })
    .await?;
    lab.kubectl_ok("node1", &["delete", "pod", "claim-reader", "--grace-period=1"]).await?;
    lab.kubectl_ok("node1", &["delete", "pvc", "lab-data", "--wait=false"]).await?;
    poll_until("the claim's volume deleted", Duration::from_secs(60), Duration::from_secs(1), || async {
        let out = lab.kubectl_ok("node1", &["get", "pv", "-o", "name"]).await?;
        Ok((!out.contains(&pv)).then_some(()))
    })
    .await?;
    Ok(())
}

/// `lab backup` then `lab restore` (etcd's "restoring a cluster"): a ConfigMap written before the
/// backup is there after the restore and one written after it is not; the store is a healthy
/// new cluster, every node (the worker too) is Ready, and a pod created afterwards runs. A
/// missing file is refused before anything stops. Returns both commands' output and how long
/// the restore took.
async fn backup_and_restore(lab: &Lab) -> anyhow::Result<(String, String, Duration)> {
    use anyhow::ensure;
    let dir = tempfile::Builder::new().prefix("kubelab-e2e-lab-backup-").tempdir()?;
    let file = dir.path().join("lab.db");
    let file = file.to_str().context("backup path")?;
    let missing = lab.run_script(&["restore", &format!("{file}.missing")]).await?;
    ensure!(!missing.status.success(), "lab restore of a missing file succeeded");
    ensure!(String::from_utf8_lossy(&missing.stderr).contains("no snapshot file"), "{}", String::from_utf8_lossy(&missing.stderr));

    lab.kubectl_ok("node1", &["create", "configmap", "before-backup", "--from-literal=k=v"]).await?;
    let backed_up = lab.script_ok(&["backup", file]).await?;
    ensure!(backed_up.contains("Snapshot saved at") && backed_up.contains("revision"), "lab backup printed: {backed_up}");
    lab.kubectl_ok("node1", &["create", "configmap", "after-backup", "--from-literal=k=v"]).await?;
    let started = Instant::now();
    let restored = lab.script_ok(&["restore", file]).await?;
    let took = started.elapsed();

    let cms = configmaps(lab, "node1").await?;
    ensure!(cms.contains(&"before-backup".to_string()) && !cms.contains(&"after-backup".to_string()), "configmaps after the restore: {cms:?}");
    store_healthy(lab, "node1", Duration::from_secs(60)).await?;
    let r = lab.node_readiness("node1").await?;
    ensure!(r.len() == 4 && r.values().all(|s| s == "True"), "nodes after the restore: {r:?}");
    lab.apply("node1", &busybox_pod("after-restore", "node3", "echo hello-after-restore; sleep 100000")).await?;
    expect_running(lab, "node1", &["after-restore"], "a pod created after the restore").await;
    println!("{}", lab.kubectl_ok("node1", &["get", "configmaps,nodes"]).await?);
    Ok((backed_up, restored, took))
}

async fn cross_node_diagnostics(lab: &Lab) -> String {
    let mut out = String::from("[lab] cross-node diagnostics:\n");
    let mut add = |what: String, r: anyhow::Result<String>| {
        out.push_str(&format!("--- {what}\n{}\n", r.unwrap_or_else(|e| format!("(failed: {e:#})"))));
    };
    add("kubectl get pods -o wide".into(), lab.kubectl_ok("node1", &["get", "pods", "-o", "wide"]).await);
    for pod in ["pod-node1", "pod-node2"] {
        add(format!("kubectl logs {pod}"), lab.kubectl_ok("node1", &["logs", pod]).await);
    }
    for node in ["node1", "node2"] {
        add(format!("{node}: ip -4 route"), lab.exec_ok(node, &["ip", "-4", "route"]).await);
        add(format!("{node}: ip -4 addr"), lab.exec_ok(node, &["ip", "-4", "-brief", "addr"]).await);
        let since = chrono::Utc::now() - chrono::Duration::minutes(10);
        let routes = lab.agent_log_since(node, since).await.map(|log| {
            log.lines().filter(|l| l.contains("host_gw")).collect::<Vec<_>>().join("\n")
        });
        add(format!("{node}: agent's host-gw lines"), routes);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_end_to_end() {
    let mut lab = Lab::up().await.expect("lab up");
    let timings: Vec<String> = lab.up_output.lines().filter(|l| l.contains("timing:")).map(str::to_string).collect();

    // 1. Three nodes Ready (lab up waited for it), with their InternalIPs.
    let r = lab.node_readiness("node1").await.expect("nodes");
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r.values().all(|s| s == "True"), "{r:?}");

    // 2. Three store members, healthy, agreeing on one leader.
    let leader = store_healthy(&lab, "node1", Duration::from_secs(60)).await.expect("store members");
    eprintln!("[lab] store leader: {leader}");

    // 3. The control plane's mirror pods, four per node, in kube-system.
    let want: Vec<(String, String)> = NODES
        .iter()
        .flat_map(|n| ["store", "apiserver", "scheduler", "controller-manager"].map(|c| (format!("{c}-{n}"), n.to_string())))
        .collect();
    poll_until("control-plane mirror pods", Duration::from_secs(90), Duration::from_secs(1), || async {
        let v = lab.get_json("node1", &["pods", "-n", "kube-system"]).await?;
        let have: Vec<(String, String)> = v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| (p["metadata"]["name"].as_str().unwrap_or_default().to_string(), p["spec"]["nodeName"].as_str().unwrap_or_default().to_string()))
            .collect();
        let missing: Vec<_> = want.iter().filter(|w| !have.contains(w)).collect();
        if missing.is_empty() { Ok(Some(())) } else { anyhow::bail!("missing {missing:?}") }
    })
    .await
    .expect("mirror pods");
    println!("{}", lab.kubectl_ok("node1", &["get", "pods", "-n", "kube-system", "-o", "wide"]).await.expect("kubectl"));

    // 4. A pod pinned to each node runs; time create → Running per node.
    let server = "while true; do echo hello-from-node2 | nc -l -p 8080; done";
    lab.apply("node1", &busybox_pod("pod-node2", "node2", server)).await.expect("pod-node2");
    let t0 = Instant::now();
    lab.apply("node1", &busybox_pod("pod-node3", "node3", "sleep 100000")).await.expect("pod-node3");
    // Polled by hand (not poll_until): each pod's own Running moment is recorded on the way.
    let mut started: BTreeMap<String, Duration> = BTreeMap::new();
    while started.len() < 2 {
        assert!(t0.elapsed() < RUN_TIMEOUT, "pods on node2 and node3 not Running after {RUN_TIMEOUT:?}: {:?}", pods(&lab, "node1").await);
        if let Ok(p) = pods(&lab, "node1").await {
            for (name, (phase, _, _)) in p {
                if phase == "Running" && !started.contains_key(&name) {
                    started.insert(name, t0.elapsed());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Running can be reported a moment before the pod IP is: without an IP the client below
    // would dial nothing for its whole life.
    let ips = expect_running(&lab, "node1", &["pod-node2", "pod-node3"], "pod IPs on node2 and node3").await;
    let p = pods(&lab, "node1").await.expect("pods");
    let server_ip = ips["pod-node2"].clone();
    assert!(server_ip.starts_with("10.244.2."), "pod-node2's IP {server_ip:?} is outside node2's pod CIDR");
    assert_eq!(p["pod-node2"].1, "node2");
    assert_eq!(p["pod-node3"].1, "node3");

    // 5. A pod on node1 reaches the pod on node2 by IP (busybox nc; wget segfaults here). A try
    //    counts only if the greeting came back: nc also exits 0 on a connection that closed
    //    empty. Each failed try is logged, so a failure below shows what nc saw.
    let client = format!(
        "for i in $(seq 1 90); do if nc -w 2 {server_ip} 8080 </dev/null | grep hello-from-node2; then break; fi; echo \"try $i: no greeting\"; sleep 1; done; sleep 100000"
    );
    let t1 = Instant::now();
    lab.apply("node1", &busybox_pod("pod-node1", "node1", &client)).await.expect("pod-node1");
    expect_running(&lab, "node1", &["pod-node1"], "pod on node1").await;
    let node1_start = t1.elapsed();
    let heard = poll_until("pod-node1 heard from pod-node2", Duration::from_secs(100), Duration::from_secs(1), || async {
        let logs = lab.kubectl_ok("node1", &["logs", "pod-node1"]).await?;
        Ok(logs.contains("hello-from-node2").then_some(()))
    })
    .await;
    if let Err(e) = heard {
        eprintln!("{}", cross_node_diagnostics(&lab).await);
        panic!("cross-node pod traffic: {e:#}");
    }
    // 5b. A Service whose pods run on all three nodes, reached by name from a pod on each node:
    //     the cluster DNS (a Deployment), the ClusterIP turned into a pod on any node, host-gw.
    for n in NODES {
        let web = format!("mkdir -p /www && echo web-{n} > /www/index.html && exec httpd -f -p 8080 -h /www");
        lab.apply("node1", &labelled(&busybox_pod(&format!("web-{n}"), n, &web), "lab-web")).await.expect("web pod");
        lab.apply("node1", &busybox_pod(&format!("client-{n}"), n, "sleep 100000")).await.expect("client pod");
    }
    lab.apply("node1", &serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "lab-web"}, "ports": [{"port": 80, "targetPort": 8080}]}
    }).to_string()).await.expect("web Service");
    let web_pods: Vec<String> = NODES.iter().map(|n| format!("web-{n}")).collect();
    let clients: Vec<String> = NODES.iter().map(|n| format!("client-{n}")).collect();
    let all: Vec<&str> = web_pods.iter().chain(&clients).map(String::as_str).collect();
    expect_running(&lab, "node1", &all, "the web and client pods").await;
    for n in NODES {
        let seen = answers(&lab, "node1", &format!("client-{n}"), 30, Duration::from_secs(120)).await;
        if seen.len() != 3 {
            eprintln!("{}", service_diagnostics(&lab, "node1").await);
            panic!("from client-{n}, web.default.svc.cluster.local answered only by {seen:?}");
        }
    }
    // 5c. The lab's security (kubeadm's): HTTPS, identities, Node,RBAC, encrypted secrets.
    security_checks(&lab).await.expect("security");
    // 5d. The lab's registry, from every node.
    pulls_from_the_lab_registry(&lab).await.expect("the lab's registry");
    // 5e. A claim on node2, through the lab's CSI driver.
    claim_on_node2(&lab).await.expect("a claim on node2");
    let mut startup = vec![("node1".to_string(), node1_start)];
    startup.extend(started.iter().map(|(n, d)| (n.trim_start_matches("pod-").to_string(), *d)));
    lab.kubectl_ok("node1", &["create", "configmap", "before-faults", "--from-literal=k=v"]).await.expect("write");

    // 6. Kill the store leader's node: the others keep the API, elect a new leader, and the
    //    killed node comes back Ready with nothing lost.
    let (leader, _) = lab.store_leader("node1").await.expect("leader");
    let survivor = NODES.iter().find(|n| **n != leader).copied().unwrap_or("node1");
    eprintln!("[lab] killing {leader} (store leader); asking {survivor}");
    let killed = Instant::now();
    lab.script_ok(&["kill", &leader]).await.expect("lab kill");
    let write_gap = write_until_ok(&lab, survivor, "after-leader-kill", killed, WRITE_TIMEOUT).await.expect("writes after the leader's node died");
    let (new_leader, _) = poll_until("a new store leader", Duration::from_secs(30), Duration::from_secs(1), || async {
        let (l, n) = lab.store_leader(survivor).await?;
        Ok((l != leader).then_some((l, n)))
    })
    .await
    .expect("new leader");
    eprintln!("[lab] new store leader: {new_leader}");
    lease_stalls(&lab, survivor, &leader).await.expect("lease of the killed node");
    expect_not_ready(&lab, survivor, &leader).await.expect("killed node NotReady");
    // Its pods are marked not ready, leave the Service's slice, and the survivors' proxies stop
    // sending to them: twenty requests in a row answered by the other two.
    let dead_web = format!("web-{leader}");
    let healed = poll_until(&format!("no request to {dead_web}"), Duration::from_secs(90), Duration::from_secs(2), || async {
        let seen = answers(&lab, survivor, &format!("client-{survivor}"), 20, Duration::from_secs(30)).await;
        Ok((!seen.contains(&dead_web) && seen.len() == 2).then_some(seen))
    })
    .await;
    if let Err(e) = healed {
        eprintln!("{}", service_diagnostics(&lab, survivor).await);
        panic!("the dead node's pod still behind the Service: {e:#}");
    }
    let service_gap = killed.elapsed();
    let restarted = Instant::now();
    lab.script_ok(&["start", &leader]).await.expect("lab start");
    wait_all_ready(&lab, survivor, READY_TIMEOUT).await.expect("all Ready after start");
    let back_ready = restarted.elapsed();
    eprintln!("[lab] timing: {leader} Ready {} after `lab start` ({} after it was killed)", secs(back_ready), secs(killed.elapsed()));
    store_healthy(&lab, survivor, Duration::from_secs(90)).await.expect("store after restart");
    // Through the restarted node's own API server: it serves what was written while it was down.
    let cms = poll_until("configmaps via the restarted node", Duration::from_secs(60), Duration::from_secs(1), || async {
        let c = configmaps(&lab, &leader).await?;
        Ok((c.contains(&"after-leader-kill".to_string())).then_some(c))
    })
    .await
    .expect("configmaps via restarted node");
    assert!(cms.contains(&"before-faults".to_string()), "{cms:?}");
    expect_running(&lab, &leader, &["pod-node1", "pod-node2", "pod-node3"], "pods after the restart").await;

    // 7. Partition a node (not node1, whose API server the checks use) and heal it.
    let cut = "node3";
    let cut_at = Instant::now();
    lab.script_ok(&["partition", cut]).await.expect("partition");
    let partition_gap = write_until_ok(&lab, "node1", "during-partition", cut_at, WRITE_TIMEOUT).await.expect("writes during the partition");
    lease_stalls(&lab, "node1", cut).await.expect("lease of the partitioned node");
    expect_not_ready(&lab, "node1", cut).await.expect("partitioned node NotReady");
    lab.script_ok(&["heal", cut]).await.expect("heal");
    wait_all_ready(&lab, "node1", READY_TIMEOUT).await.expect("all Ready after heal");
    store_healthy(&lab, "node1", Duration::from_secs(60)).await.expect("store after heal");
    poll_until("the healed node serves the partition's writes", Duration::from_secs(60), Duration::from_secs(1), || async {
        Ok(configmaps(&lab, cut).await?.contains(&"during-partition".to_string()).then_some(()))
    })
    .await
    .expect("healed node caught up");

    // 8. Restart the whole lab (containers removed, volumes kept): every object is still there.
    let before_cms = configmaps(&lab, "node1").await.expect("configmaps");
    let before_pods: Vec<String> = pods(&lab, "node1").await.expect("pods").into_keys().collect();
    lab.script_ok(&["down"]).await.expect("lab down (keep volumes)");
    let restarted_at = chrono::Utc::now();
    let t2 = Instant::now();
    let up = lab.script_ok(&["up"]).await.expect("lab up again");
    let restart = t2.elapsed();
    assert_eq!(configmaps(&lab, "node1").await.expect("configmaps"), before_cms);
    let after_pods: Vec<String> = pods(&lab, "node1").await.expect("pods").into_keys().collect();
    assert_eq!(after_pods, before_pods);
    let t3 = Instant::now();
    let names = ["pod-node1", "pod-node2", "pod-node3"];
    if let Err(e) = wait_started_since(&lab, "node1", &names, restarted_at, READY_TIMEOUT).await {
        eprintln!("{}", pod_diagnostics(&lab, &names).await);
        panic!("pods after the lab restart: {e:#}");
    }
    let rerun = t3.elapsed();
    store_healthy(&lab, "node1", Duration::from_secs(60)).await.expect("store after the lab restart");

    // 9. A worker joins with a bootstrap token (kubeadm join).
    let joined = join_a_worker(&lab).await.expect("lab join");

    // 10. Back up the store, write, restore the backup (etcd's disaster recovery).
    let (backed_up, restored, restore_time) = backup_and_restore(&lab).await.expect("lab backup and restore");

    // The lab's benchmark figures.
    println!("lab timings:");
    let mut all = timings;
    all.extend(up.lines().filter(|l| l.contains("timing:")).map(|l| format!("{l} (restart)")));
    all.extend(joined.lines().filter(|l| l.contains("timing:")).map(str::to_string));
    all.extend(backed_up.lines().chain(restored.lines()).filter(|l| l.contains("timing:")).map(str::to_string));
    for t in &all {
        println!("  {t}");
    }
    for (node, d) in &startup {
        println!("  pod create → Running on {node}: {}", secs(*d));
    }
    println!("  `lab kill` of the store leader's node ({leader}) → a write succeeds via {survivor}: {}", secs(write_gap));
    println!("  `lab partition {cut}` → a write succeeds via node1: {}", secs(partition_gap));
    println!("  `lab kill` of {leader} → twenty requests in a row to the Service miss its pod: {} (at most)", secs(service_gap));
    println!("  `lab start` of the killed {leader} → all three nodes Ready: {}", secs(back_ready));
    println!("  whole lab down → up (volumes kept) → Ready: {}", secs(restart));
    println!("  lab up again → the three pods running new containers: {}", secs(rerun));
    println!("  `lab restore` → the store restored, every node Ready again: {}", secs(restore_time));
    lab.down();
}
