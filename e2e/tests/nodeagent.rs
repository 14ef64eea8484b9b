//! `kubelab nodeagent` end to end on a real private containerd, with a kubelab store, API server
//! and scheduler, driven by the pinned kubectl: pods run, init containers run in order, volumes
//! carry configMaps and secrets (and their updates), crashing containers back off, a pod that
//! does not fit is rejected, deletion completes within the grace period, static pods get mirror
//! pods, neither an agent restart nor a containerd restart loses or restarts a pod, and a pod's
//! limits reach its cgroup files (cgroup v1 here; v2 with either driver in the fresh-host check)
//! and a container over its memory limit ends `OOMKilled`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use e2e::nodelab::{Components, NodeLab, RUN_TIMEOUT, phase};

// This file's lab: the shared one plus what only these tests need.
e2e::node_lab!(Lab);

async fn lab(node: &str, octet: u8, scheduler: bool) -> Lab {
    Lab(NodeLab::start(node, octet, Components { scheduler, ..Components::default() }).await)
}

impl Lab {
    /// `kubectl logs` of a pod's container, retried until `pred` holds on the output.
    async fn wait_logs(&self, pod: &str, container: &str, pred: impl Fn(&str) -> bool) -> String {
        let what = format!("logs of {pod}/{container} to match");
        self.wait_until(&what, RUN_TIMEOUT, || async {
            let o = self.api.kubectl(&["logs", pod, "-c", container]);
            anyhow::ensure!(o.success && pred(&o.stdout), "{}", o.describe());
            Ok(Some(o.stdout))
        })
        .await
    }

    /// Holds for `period` that pod `uid`'s containers in the runtime are exactly `want` (names
    /// to container IDs, as the pod's status gave them) and all running.
    async fn hold_containers(&self, what: &str, uid: &str, want: &BTreeMap<String, (String, i32)>, period: Duration) {
        let want: BTreeMap<String, String> = want.iter().map(|(name, (id, _))| (name.clone(), id.rsplit("://").next().unwrap_or(id).to_string())).collect();
        self.hold_for(what, period, || async {
            let all = self.runtime_containers(uid).await?;
            let running: BTreeMap<String, String> = all
                .iter()
                .filter(|c| c.state == k8s_cri::v1::ContainerState::ContainerRunning as i32)
                .map(|c| (c.metadata.as_ref().map(|m| m.name.clone()).unwrap_or_default(), c.id.clone()))
                .collect();
            anyhow::ensure!(running == want, "running containers {running:?}, want {want:?} (all instances: {:?})", all.iter().map(|c| (&c.id, c.state)).collect::<Vec<_>>());
            Ok(())
        })
        .await
    }
}

fn container_ids(p: &Pod) -> BTreeMap<String, (String, i32)> {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, (c.container_id.unwrap_or_default(), c.restart_count)))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_run_with_init_containers_volumes_logs_and_graceful_deletion() {
    let lab = lab("node-a", 11, true).await;

    // A busybox pod is scheduled, runs, gets an IP from the node's pod CIDR, and streams logs.
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hello\nspec:\n  terminationGracePeriodSeconds: 3\n  containers:\n  - name: main\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.5; done']\n",
    );
    let p = lab.wait_running("hello").await;
    let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap_or_default();
    assert!(ip.starts_with("10.244.11."), "pod IP {ip:?} outside the node's pod CIDR");
    assert_eq!(p.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("node-a"));
    let mut follow = lab.api.kubectl_spawn(&["logs", "-f", "hello"]);
    follow.expect_line("a first tick", RUN_TIMEOUT, |l| l.starts_with("tick ")).expect("logs -f streams");
    let first: usize = follow.seen.last().and_then(|l| l[5..].parse().ok()).unwrap_or(0);
    follow
        .expect_line("a later tick", Duration::from_secs(10), |l| l[5..].parse::<usize>().is_ok_and(|n| n >= first + 3))
        .expect("logs -f keeps streaming new lines");
    drop(follow);

    // Two init containers run one after the other before the app; each writes the time since
    // boot (/proc/uptime, centiseconds) into a shared emptyDir, then sleeps a second.
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: inits\nspec:\n  volumes:\n  - name: shared\n    emptyDir: {}\n  initContainers:\n  - name: first\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'echo first $(cut -d\\  -f1 /proc/uptime) >> /shared/order; sleep 1']\n    volumeMounts: [{name: shared, mountPath: /shared}]\n  - name: second\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'echo second $(cut -d\\  -f1 /proc/uptime) >> /shared/order; sleep 1']\n    volumeMounts: [{name: shared, mountPath: /shared}]\n  containers:\n  - name: app\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'echo app $(cut -d\\  -f1 /proc/uptime) >> /shared/order; cat /shared/order; sleep 3600']\n    volumeMounts: [{name: shared, mountPath: /shared}]\n",
    );
    lab.wait_running("inits").await;
    let out = lab.wait_logs("inits", "app", |s| s.lines().count() >= 3).await;
    let rows: Vec<(String, f64)> = out
        .lines()
        .filter_map(|l| l.split_once(' ').and_then(|(n, t)| Some((n.to_string(), t.trim().parse().ok()?))))
        .collect();
    let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["first", "second", "app"], "init containers out of order:\n{out}");
    assert!(rows[0].1 + 0.9 <= rows[1].1 && rows[1].1 + 0.9 <= rows[2].1, "each step must wait for the previous one to finish:\n{out}");

    // A configMap and a secret in volumes; the secret's update reaches the file.
    lab.api.kubectl_ok(&["create", "configmap", "app-config", "--from-literal=greeting=hello-from-configmap"]);
    lab.api.kubectl_ok(&["create", "secret", "generic", "app-secret", "--from-literal=password=first-password"]);
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: volumes\nspec:\n  volumes:\n  - name: cfg\n    configMap: {name: app-config}\n  - name: sec\n    secret: {secretName: app-secret}\n  containers:\n  - name: app\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'cat /cfg/greeting; echo; while true; do echo \"secret=$(cat /sec/password)\"; sleep 1; done']\n    volumeMounts:\n    - {name: cfg, mountPath: /cfg}\n    - {name: sec, mountPath: /sec}\n",
    );
    lab.wait_running("volumes").await;
    lab.wait_logs("volumes", "app", |s| s.contains("hello-from-configmap") && s.contains("secret=first-password")).await;
    let o = lab.api.kubectl_with(
        &["apply", "-f", "-"],
        &[],
        Some("apiVersion: v1\nkind: Secret\nmetadata:\n  name: app-secret\nstringData:\n  password: second-password\n"),
    );
    assert!(o.success, "{}", o.describe());
    lab.wait_logs("volumes", "app", |s| s.contains("secret=second-password")).await;

    // kubectl delete completes within the grace period (3 s; sh ignores SIGTERM, so it is the
    // SIGKILL at the end of it that stops the container), plus kubectl's and the node agent's own
    // time: 5 s here, stretched on a slower machine (the grace period itself is not).
    let start = Instant::now();
    let o = lab.api.kubectl(&["delete", "pod", "hello", &e2e::timeout_flag(30)]);
    assert!(o.success, "{}", o.describe());
    let took = start.elapsed();
    let limit = Duration::from_secs(3) + e2e::scaled(Duration::from_secs(5));
    assert!(took < limit, "deleting a pod with a 3 s grace period took {took:?} (limit {limit:?})");
    assert!(lab.pods().get_opt("hello").await.expect("get").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn crashing_containers_back_off_and_pods_that_do_not_fit_are_rejected() {
    let lab = lab("node-b", 12, false).await;

    // A container that keeps failing: CrashLoopBackOff with a growing restart count and the last
    // termination recorded.
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crasher\nspec:\n  nodeName: node-b\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'echo dying; exit 3']\n",
    );
    let p = lab
        .wait_pod("crasher", "CrashLoopBackOff with restarts", Duration::from_secs(90), |p| {
            p.status.as_ref().and_then(|s| s.container_statuses.as_ref()).and_then(|cs| cs.first()).is_some_and(|c| {
                c.restart_count >= 2
                    && c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.as_deref()) == Some("CrashLoopBackOff")
            })
        })
        .await;
    let c = &p.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default()[0];
    let last = c.last_state.as_ref().and_then(|s| s.terminated.as_ref()).expect("lastState.terminated");
    assert_eq!(last.exit_code, 3);
    assert_eq!(last.reason.as_deref(), Some("Error"));
    let table = lab.api.kubectl_ok(&["get", "pod", "crasher"]);
    assert!(table.contains("CrashLoopBackOff"), "kubectl get shows the waiting reason:\n{table}");

    // A pod bound to the node that asks for more CPU than the node has is rejected by the node.
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: too-big\nspec:\n  nodeName: node-b\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n    resources:\n      requests: {cpu: '1000'}\n",
    );
    let p = lab.wait_pod("too-big", "Failed", RUN_TIMEOUT, |p| phase(p) == "Failed").await;
    assert_eq!(p.status.as_ref().and_then(|s| s.reason.as_deref()), Some("OutOfcpu"));
    let events: Api<Event> = Api::namespaced(lab.client.clone(), "default");
    let evs = events.list(&ListParams::default().fields("involvedObject.name=too-big")).await.expect("events");
    assert!(evs.items.iter().any(|e| e.reason.as_deref() == Some("OutOfcpu")), "an OutOfcpu event explains the rejection");
}

#[tokio::test(flavor = "multi_thread")]
async fn static_pods_run_and_get_mirror_pods() {
    let lab = lab("node-c", 13, false).await;
    let manifest = lab.agent.manifests_dir().join("web.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\nspec:\n  containers:\n  - name: web\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'echo static; sleep 3600']\n",
    )
    .expect("write manifest");
    // The mirror pod is named <name>-<node> and shows the static pod's status.
    let p = lab.wait_running("web-node-c").await;
    let ann = p.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann.get("kubernetes.io/config.source").map(String::as_str), Some("file"));
    assert!(ann.contains_key("kubernetes.io/config.mirror"), "mirror annotation: {ann:?}");
    let owner = p.metadata.owner_references.clone().unwrap_or_default();
    assert!(owner.iter().any(|o| o.kind == "Node" && o.name == "node-c"), "owned by its Node: {owner:?}");
    lab.wait_logs("web-node-c", "web", |s| s.contains("static")).await;

    // A deleted mirror pod comes back (the static pod keeps running).
    let old_uid = p.metadata.uid.clone();
    lab.api.kubectl_ok(&["delete", "pod", "web-node-c", "--wait=false"]);
    lab.wait_pod("web-node-c", "a new mirror pod", RUN_TIMEOUT, |p| p.metadata.uid != old_uid && phase(p) == "Running").await;

    // Removing the file stops the pod and deletes its mirror.
    std::fs::remove_file(&manifest).expect("remove manifest");
    let pods = lab.pods();
    lab.wait_until("the mirror pod to go with its static pod", RUN_TIMEOUT, || async {
        match pods.get_opt("web-node-c").await? {
            None => Ok(Some(())),
            Some(p) => anyhow::bail!("web-node-c still there: {}", serde_json::to_string(&p.status).unwrap_or_default()),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_and_containerd_restarts_lose_and_restart_nothing() {
    let mut lab = lab("node-d", 14, false).await;
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: survivor\nspec:\n  nodeName: node-d\n  containers:\n  - name: a\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n  - name: b\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n",
    );
    let p = lab.wait_running("survivor").await;
    let uid = p.metadata.uid.clone().unwrap_or_default();
    let before = container_ids(&p);
    assert_eq!(before.len(), 2);

    // kill -9 the agent, start it again: it adopts the running containers. An agent that did
    // not would replace them in its first syncs, PLEG relists (1 s) and housekeeping rounds
    // (2 s): that nothing changes for a few of those is what is tested, so it is held, checked
    // in the runtime itself all along.
    lab.agent.restart().expect("restart agent");
    lab.hold_containers("the restarted agent adopting survivor's containers", &uid, &before, Duration::from_secs(6)).await;
    let after = container_ids(&lab.wait_running("survivor").await);
    assert_eq!(after, before, "the restarted agent must adopt the containers, not recreate them");

    // Restart containerd under the agent: the pod keeps its containers (held the same way).
    lab.agent.containerd_mut().restart().await.expect("restart containerd");
    lab.hold_containers("survivor's containers across a containerd restart", &uid, &before, Duration::from_secs(6)).await;
    let p = lab.wait_running("survivor").await;
    assert_eq!(container_ids(&p), before, "a containerd restart must not lose or restart a pod");
}

/// The pod cgroup's files as this host lays them out, spelled out here rather than asked of the
/// agent: cgroupfs on v1 (one tree per controller), cgroupfs on v2, or systemd's slices on v2
/// (a `-` inside a level becomes `_`).
fn pod_cgroup_file(cgroup_root: &str, uid: &str, controller: &str, file: &str) -> std::path::PathBuf {
    use nodeagent::cm::{CgroupDriver, CgroupVersion, cgroup_version};
    let root = cgroup_root.trim_matches('/');
    let mount = std::path::Path::new("/sys/fs/cgroup");
    match (cgroup_version(mount), CgroupDriver::detect()) {
        (Some(CgroupVersion::V2), CgroupDriver::Systemd) => {
            let r = root.replace('-', "_");
            let u = uid.replace('-', "_");
            mount.join(format!("{r}.slice/{r}-kubepods.slice/{r}-kubepods-burstable.slice/{r}-kubepods-burstable-pod{u}.slice")).join(file)
        }
        (Some(CgroupVersion::V2), CgroupDriver::Cgroupfs) => mount.join(root).join(format!("kubepods/burstable/pod{uid}")).join(file),
        _ => {
            // v1: the hierarchy holding the controller (`cpu,cpuacct` is one mount on Debian).
            let hierarchy = std::fs::read_dir(mount)
                .ok()
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .find(|p| !p.is_symlink() && p.file_name().is_some_and(|n| n.to_string_lossy().split(',').any(|c| c == controller)))
                .unwrap_or_else(|| mount.join(controller));
            hierarchy.join(root).join(format!("kubepods/burstable/pod{uid}")).join(file)
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pod_limits_reach_the_cgroup_and_a_container_over_its_memory_limit_is_oom_killed() {
    let lab = lab("node-e", 15, false).await;
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: limited\nspec:\n  nodeName: node-e\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n    resources:\n      requests: {cpu: 250m, memory: 64Mi}\n      limits: {cpu: 500m, memory: 128Mi}\n",
    );
    let p = lab.wait_running("limited").await;
    let uid = p.metadata.uid.clone().expect("uid");
    let v2 = nodeagent::cm::cgroup_version(std::path::Path::new("/sys/fs/cgroup")) == Some(nodeagent::cm::CgroupVersion::V2);
    // 250m requested = 256 shares = weight 10 on v2; 500m limit = 50 ms per 100 ms; 128 MiB.
    let want: &[(&str, &str, &str)] = if v2 {
        &[("cpu", "cpu.weight", "10"), ("cpu", "cpu.max", "50000 100000"), ("memory", "memory.max", "134217728")]
    } else {
        &[
            ("cpu", "cpu.shares", "256"),
            ("cpu", "cpu.cfs_period_us", "100000"),
            ("cpu", "cpu.cfs_quota_us", "50000"),
            ("memory", "memory.limit_in_bytes", "134217728"),
        ]
    };
    for (controller, file, value) in want {
        let path = pod_cgroup_file(lab.agent.cgroup_root(), &uid, controller, file);
        let got = std::fs::read_to_string(&path).unwrap_or_else(|e| lab.fail(&format!("{}: {e}", path.display())));
        assert_eq!(got.trim(), *value, "{}", path.display());
    }

    // Doubling a shell string until the 32 MiB limit: the kernel kills it, the runtime says why.
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hog\nspec:\n  nodeName: node-e\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sh, -c, 'x=aaaaaaaaaaaaaaaa; while true; do x=$x$x; done']\n    resources:\n      limits: {cpu: 500m, memory: 32Mi}\n",
    );
    let p = lab.wait_pod("hog", "Failed", Duration::from_secs(120), |p| phase(p) == "Failed").await;
    let c = &p.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default()[0];
    let t = c.state.as_ref().and_then(|s| s.terminated.as_ref()).expect("state.terminated");
    assert_eq!(t.reason.as_deref(), Some("OOMKilled"), "{t:?}");
    assert_eq!(t.exit_code, 137);
    let table = lab.api.kubectl_ok(&["get", "pod", "hog"]);
    assert!(table.contains("OOMKilled"), "kubectl get shows the reason:\n{table}");
}
