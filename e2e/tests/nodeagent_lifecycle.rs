//! `kubelab nodeagent` end to end on a real private containerd, driven by the pinned kubectl:
//! container lifecycle hooks and grace periods.
//!
//! - A preStop hook runs before SIGTERM, inside the grace period, and `kubectl delete` finishes
//!   well within it.
//! - `kubectl delete --grace-period=1` stops a container that ignores SIGTERM in seconds, also
//!   when a 60 s termination is already under way (the API server shortens the deletion, the
//!   node agent picks the shorter grace period up mid-flight).
//! - `kubectl delete --force --grace-period=0` removes the pod from the API at once and the node
//!   agent still stops the container, within about a second.
//! - A failing postStart hook: a FailedPostStartHook event in `kubectl describe`, the container
//!   killed and restarted.
//! - `kubectl logs --previous` shows the run before the current one.
//! - Downward API `resourceFieldRef` in env and in a volume.
//!
//! Files written by the containers land in hostPath directories under a temporary directory, so
//! the test reads them directly.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use e2e::nodelab::{BUSYBOX, Components, NodeLab, RUN_TIMEOUT};

// This file's lab: the shared one plus what only these tests need.
e2e::node_lab!(Lab);

async fn lab(node: &str, octet: u8) -> Lab {
    Lab(NodeLab::start(node, octet, Components::default()).await)
}

impl Lab {
    /// Create a pod from its spec (YAML, indented two spaces under `spec:`), bound to the node.
    fn create_pod(&self, name: &str, spec: &str) {
        let yaml = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {}\n{spec}", self.node);
        let o = self.api.kubectl_with(&["apply", "-f", "-"], &[], Some(&yaml));
        if !o.success {
            self.fail(&format!("kubectl apply failed:\n{}\n{yaml}", o.describe()));
        }
    }

    /// `kubectl delete pod <args>`, timed; fails the test if kubectl fails.
    fn delete(&self, args: &[&str]) -> Duration {
        let mut all = vec!["delete", "pod"];
        all.extend_from_slice(args);
        let start = Instant::now();
        let o = self.api.kubectl(&all);
        if !o.success {
            self.fail(&format!("kubectl delete failed:\n{}", o.describe()));
        }
        start.elapsed()
    }

    /// The runtime's state of the pod's container `name`, newest instance first.
    async fn runtime_states(&self, uid: &str, name: &str) -> anyhow::Result<Vec<i32>> {
        let mut cs = self.runtime_containers(uid).await?;
        cs.retain(|c| c.metadata.as_ref().is_some_and(|m| m.name == name));
        cs.sort_by_key(|c| std::cmp::Reverse(c.created_at));
        Ok(cs.into_iter().map(|c| c.state).collect())
    }
}

const RUNNING: i32 = k8s_cri::v1::ContainerState::ContainerRunning as i32;

/// How long a delete with `--grace-period=1` of a pod with a 60 s grace period may take: the one
/// second, plus kubectl's and the node agent's own time (7 s here, stretched on a slower machine),
/// but always well under the 60 s it cuts short, or the bound would tell nothing apart.
fn cut_short_limit() -> Duration {
    (Duration::from_secs(1) + e2e::scaled(Duration::from_secs(7))).min(Duration::from_secs(45))
}

fn restart_count(p: &Pod) -> i32 {
    p.status.as_ref().and_then(|s| s.container_statuses.as_ref()).and_then(|cs| cs.first()).map_or(0, |c| c.restart_count)
}

/// Lines `<word> <seconds since boot>` from a file the containers append to.
fn marks(path: &Path) -> Vec<(String, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' ').and_then(|(w, t)| Some((w.to_string(), t.trim().parse().ok()?))))
        .collect()
}

/// A hostPath volume named `shared` at `dir`, mounted at /shared.
fn shared(dir: &Path) -> (String, String) {
    (
        format!("  volumes:\n  - name: shared\n    hostPath: {{path: {}, type: DirectoryOrCreate}}\n", dir.display()),
        "    volumeMounts: [{name: shared, mountPath: /shared}]\n".to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn pre_stop_hooks_and_grace_periods() {
    let lab = lab("node-l1", 43).await;
    let tmp = tempfile::tempdir().expect("tmp");

    // (1) preStop runs before SIGTERM. The container records SIGTERM and exits; the hook records
    // itself and takes 2 s. Time is /proc/uptime (one clock for the hook and the container).
    let dir = tmp.path().join("stopper");
    let (volumes, mounts) = shared(&dir);
    lab.create_pod(
        "stopper",
        &format!(
            "  terminationGracePeriodSeconds: 10\n{volumes}  containers:\n  - name: app\n    image: {BUSYBOX}\n{mounts}    command:\n    - sh\n    - -c\n    - |\n      trap 'echo TERM $(cut -d \" \" -f1 /proc/uptime) >> /shared/log; exit 0' TERM\n      echo START $(cut -d ' ' -f1 /proc/uptime) >> /shared/log\n      while true; do sleep 1 & wait $!; done\n    lifecycle:\n      preStop:\n        exec:\n          command: [sh, -c, \"echo PRESTOP $(cut -d ' ' -f1 /proc/uptime) >> /shared/log; sleep 2\"]\n"
        ),
    );
    lab.wait_running("stopper").await;
    let log = dir.join("log");
    lab.wait_until("the stopper container's START line", RUN_TIMEOUT, || async {
        let m = marks(&log);
        anyhow::ensure!(!m.is_empty(), "{} holds no marks yet", log.display());
        Ok(Some(()))
    })
    .await;
    let took = lab.delete(&["stopper", &e2e::timeout_flag(60)]);
    let m = marks(&log);
    let words: Vec<&str> = m.iter().map(|(w, _)| w.as_str()).collect();
    assert_eq!(words, ["START", "PRESTOP", "TERM"], "the preStop hook must run before SIGTERM: {m:?}");
    assert!(m[2].1 - m[1].1 >= 1.9, "SIGTERM must wait for the 2 s hook: {m:?}");
    let limit = Duration::from_secs(10) + e2e::scaled(Duration::from_secs(5));
    assert!(took < limit, "delete with a 10 s grace period took {took:?} (limit {limit:?})");
    assert!(took >= Duration::from_secs(2), "delete cannot finish before the 2 s hook: {took:?}");

    // (4) A container that ignores SIGTERM (sh as PID 1 without a trap), 60 s grace period:
    // --grace-period=1 stops it in seconds.
    let ignore_term = format!(
        "  terminationGracePeriodSeconds: 60\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, 'while true; do sleep 1; done']\n"
    );
    lab.create_pod("stubborn", &ignore_term);
    lab.wait_running("stubborn").await;
    let took = lab.delete(&["stubborn", "--grace-period=1", &e2e::timeout_flag(60)]);
    assert!(took < cut_short_limit(), "delete --grace-period=1 of a 60 s pod took {took:?} (limit {:?})", cut_short_limit());

    // The same while a 60 s termination is already under way: the second DELETE shortens it.
    lab.create_pod("stubborn-2", &ignore_term);
    lab.wait_running("stubborn-2").await;
    let deleted = Instant::now();
    lab.delete(&["stubborn-2", "--wait=false"]);
    let p = lab.wait_pod("stubborn-2", "Terminating", RUN_TIMEOUT, |p| p.metadata.deletion_timestamp.is_some()).await;
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(60));
    let uid = p.metadata.uid.clone().unwrap_or_default();
    // The agent records Killing just before it calls StopContainer(60 s): from then on the
    // termination is under way.
    let events: Api<Event> = Api::namespaced(lab.client.clone(), "default");
    let selector = format!("involvedObject.name=stubborn-2,involvedObject.uid={uid}");
    lab.wait_until("the node agent killing stubborn-2 (a Killing event)", RUN_TIMEOUT, || async {
        let evs = events.list(&ListParams::default().fields(&selector)).await?.items;
        let reasons: Vec<_> = evs.iter().map(|e| e.reason.clone().unwrap_or_default()).collect();
        anyhow::ensure!(reasons.iter().any(|r| r == "Killing"), "events so far: {reasons:?}");
        Ok(Some(()))
    })
    .await;
    // Still terminating 2 s into the 60: the pod stays and its container (which ignores SIGTERM)
    // keeps running. Held, checked all along: this is the state the second DELETE must cut short.
    let pods = lab.pods();
    let until_2s = (deleted + Duration::from_secs(2)).saturating_duration_since(Instant::now());
    lab.hold_for("stubborn-2 terminating for 2 s of its 60", until_2s, || async {
        anyhow::ensure!(pods.get_opt("stubborn-2").await?.is_some(), "the pod is gone");
        let states = lab.runtime_states(&uid, "app").await?;
        anyhow::ensure!(states.first() == Some(&RUNNING), "the container stopped: {states:?}");
        Ok(())
    })
    .await;
    let took = lab.delete(&["stubborn-2", "--grace-period=1", &e2e::timeout_flag(60)]);
    assert!(took < cut_short_limit(), "a shorter grace period must cut the termination in progress short; took {took:?} (limit {:?})", cut_short_limit());

    // --force --grace-period=0: gone from the API at once, and the agent still stops the container.
    lab.create_pod("forced", &ignore_term);
    let p = lab.wait_running("forced").await;
    let uid = p.metadata.uid.clone().unwrap_or_default();
    assert_eq!(lab.runtime_states(&uid, "app").await.expect("list containers").first(), Some(&RUNNING));
    let took = lab.delete(&["forced", "--force", "--grace-period=0"]);
    let limit = e2e::scaled(Duration::from_secs(5)).min(Duration::from_secs(50));
    assert!(took < limit, "a forced delete does not wait for the node: {took:?} (limit {limit:?})");
    assert!(lab.pods().get_opt("forced").await.expect("get").is_none(), "gone from the API at once");
    lab.wait_until("the force-deleted pod's container stopped (within 10 s)", Duration::from_secs(10), || async {
        let states = lab.runtime_states(&uid, "app").await?;
        anyhow::ensure!(states.first().is_none_or(|s| *s != RUNNING), "the container still runs: {states:?}");
        Ok(Some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn post_start_failures_previous_logs_and_resource_fields() {
    let lab = lab("node-l2", 44).await;

    // (2) A postStart hook that fails: the event, and the container restarts.
    lab.create_pod(
        "hooked",
        &format!(
            "  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    command: [sh, -c, \"trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done\"]\n    lifecycle:\n      postStart:\n        exec:\n          command: [sh, -c, 'echo cannot start >&2; exit 7']\n"
        ),
    );
    lab.wait_pod("hooked", "restartCount >= 2", Duration::from_secs(90), |p| restart_count(p) >= 2).await;
    let describe = lab.api.kubectl_ok(&["describe", "pod", "hooked"]);
    assert!(describe.contains("FailedPostStartHook"), "kubectl describe shows the event:\n{describe}");
    assert!(describe.contains("exited with 7"), "with the hook's exit code:\n{describe}");

    // (3) logs --previous: the last crashed run's output, the current run in plain logs.
    let tmp = tempfile::tempdir().expect("tmp");
    let (volumes, mounts) = shared(&tmp.path().join("counter"));
    lab.create_pod(
        "counter",
        &format!(
            "{volumes}  containers:\n  - name: app\n    image: {BUSYBOX}\n{mounts}    command: [sh, -c, 'n=$(cat /shared/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /shared/n; echo run $n; sleep 1; exit 1']\n"
        ),
    );
    lab.wait_pod("counter", "restartCount >= 1", Duration::from_secs(90), |p| restart_count(p) >= 1).await;
    let run_of = |out: &str| out.lines().find_map(|l| l.strip_prefix("run ")).and_then(|n| n.trim().parse::<u32>().ok());
    lab.wait_until("logs --previous showing the run before the current one", Duration::from_secs(60), || async {
        // Read both between restarts: retry if a restart slipped in between the two calls.
        let previous = lab.api.kubectl(&["logs", "counter", "--previous"]);
        let current = lab.api.kubectl(&["logs", "counter"]);
        let ok = previous.success && current.success && matches!((run_of(&previous.stdout), run_of(&current.stdout)), (Some(p), Some(c)) if c == p + 1);
        anyhow::ensure!(ok, "{}\n{}", previous.describe(), current.describe());
        Ok(Some(()))
    })
    .await;
    let o = lab.api.kubectl(&["logs", "hooked", "--previous", "-c", "nope"]);
    assert!(!o.success, "a wrong container name is an error");

    // Downward API resources: env and volume; an unset cpu limit reads the node's allocatable.
    let nodes: Api<Node> = Api::all(lab.client.clone());
    let node = nodes.get(&lab.node).await.expect("node");
    let cpus = node
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get("cpu").map(|q| q.0.clone()))
        .and_then(|q| q.parse::<u64>().ok())
        .expect("allocatable cpu in whole cores");
    lab.create_pod(
        "sized",
        &format!(
            "  volumes:\n  - name: info\n    downwardAPI:\n      items:\n      - path: cpu_request\n        resourceFieldRef: {{containerName: app, resource: requests.cpu, divisor: 1m}}\n  containers:\n  - name: app\n    image: {BUSYBOX}\n    resources:\n      requests: {{cpu: 250m, memory: 32Mi}}\n      limits: {{memory: 64Mi}}\n    env:\n    - name: MEM_LIMIT_MI\n      valueFrom: {{resourceFieldRef: {{resource: limits.memory, divisor: 1Mi}}}}\n    - name: CPU_REQUEST\n      valueFrom: {{resourceFieldRef: {{resource: requests.cpu}}}}\n    - name: CPU_LIMIT\n      valueFrom: {{resourceFieldRef: {{resource: limits.cpu}}}}\n    volumeMounts: [{{name: info, mountPath: /info}}]\n    command: [sh, -c, 'echo mem=$MEM_LIMIT_MI cpu_req=$CPU_REQUEST cpu_lim=$CPU_LIMIT file=$(cat /info/cpu_request); sleep 3600']\n"
        ),
    );
    lab.wait_running("sized").await;
    let want = format!("mem=64 cpu_req=1 cpu_lim={cpus} file=250");
    lab.wait_until(&format!("resource fields {want:?} in sized's log"), RUN_TIMEOUT, || async {
        let o = lab.api.kubectl(&["logs", "sized"]);
        anyhow::ensure!(o.success && o.stdout.contains(&want), "{}", o.describe());
        Ok(Some(()))
    })
    .await;
}
