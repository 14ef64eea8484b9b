//! The node agent killed at each step of SyncPod, and of stopping and releasing a pod, then
//! started again: it adopts the sandboxes and containers that exist, finishes the pod, and once
//! the pods are deleted leaves nothing behind — no sandbox, container, pod cgroup, mount, pod
//! directory, veth or IP lease.
//!
//! The kill is a failpoint of the agent's (nodeagent/src/failpoint.rs) set to `1*panic`: the
//! failpoint build of kubelab ends with `_exit(2)` exactly there, a `kill -9` at that step.
//! 1. For each SyncPod failpoint in turn: the agent starts with it set, a pod (a configMap and an
//!    emptyDir and a secret volume, the last a tmpfs mount; one container) is created, the agent must die at that point; it starts
//!    again without failpoints and the pod must run, with one ready sandbox and one running
//!    container, held for a few seconds.
//!    Then containerd is restarted while SyncPod waits between creating and starting a container
//!    (a failpoint's `sleep`): the same must hold.
//! 2. For the two points of a pod's end: the agent starts with one set, a running pod is
//!    deleted, the agent must die there; started again, it must finish the deletion.
//! 3. Every pod deleted; then nothing of any of them may be left on the node.

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::nodelab::{Components, NodeLab, RUN_TIMEOUT};
use k8s_cri::v1 as cri;
use kube::api::DeleteParams;

e2e::node_lab!(Lab);

const NODE: &str = "node-crash";
const OCTET: u8 = 31;

/// The SyncPod failpoints, in the order SyncPod reaches them.
const SYNC_POD: &[&str] = &[
    "syncPodBeforePodCgroup",
    "syncPodBeforeDataDirs",
    "syncPodBeforeVolumes",
    "syncPodBeforePullSecrets",
    "syncPodBeforeRunPodSandbox",
    "syncPodAfterRunPodSandbox",
    "syncPodBeforeCreateContainer",
    "syncPodAfterCreateContainer",
    "syncPodBeforeStatus",
];

/// The failpoints of a pod's end.
const TEARDOWN: &[&str] = &["syncTerminatingPodAfterKill", "syncTerminatedPodBeforeRelease"];

fn pod_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeName: {NODE}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n    volumeMounts:\n    - {{name: config, mountPath: /config}}\n    - {{name: scratch, mountPath: /scratch}}\n    - {{name: token, mountPath: /token}}\n  volumes:\n  - name: config\n    configMap: {{name: crash-config}}\n  - name: scratch\n    emptyDir: {{}}\n  - name: token\n    secret: {{secretName: crash-secret}}\n"
    )
}

impl Lab {
    /// Starts the agent with `failpoint=1*panic`, makes `act` happen, and waits for the agent to
    /// die at that point; then starts it again without failpoints.
    async fn crash_at(&mut self, failpoint: &str, act: impl AsyncFnOnce(&Lab)) {
        self.0.agent.set_failpoints(Some(&format!("{failpoint}=1*panic"))).expect("the failpoint build");
        self.0.agent.restart().expect("agent with the failpoint");
        act(self).await;
        let died = e2e::poll_until(&format!("the agent to die at {failpoint}"), RUN_TIMEOUT, Duration::from_millis(100), || {
            let exited = self.0.agent.has_exited();
            async move { Ok(exited.then_some(())) }
        })
        .await;
        if let Err(e) = died {
            self.fail(&format!("{e:#}"));
        }
        let log = self.agent.log();
        assert!(log.contains(&format!("failpoint panic: {failpoint}")), "the agent ended, but not at {failpoint}:\n{}", self.agent.log_tail(30));
        self.0.agent.set_failpoints(None).expect("the ordinary build");
        self.0.agent.restart().expect("agent again");
    }

    async fn sandboxes(&self, uid: &str) -> Vec<cri::PodSandbox> {
        let rt = self.agent.containerd().runtime().await.expect("CRI client");
        let filter = cri::PodSandboxFilter { label_selector: [("io.kubernetes.pod.uid".to_string(), uid.to_string())].into(), ..Default::default() };
        rt.list_pod_sandbox(Some(filter)).await.expect("ListPodSandbox")
    }

    /// Holds for a few seconds: one ready sandbox and one running container for the pod.
    async fn hold_one_of_each(&self, name: &str, uid: &str) {
        self.hold_for(&format!("{name}: one ready sandbox, one running container"), Duration::from_secs(4), || async {
            let ready = self.sandboxes(uid).await.into_iter().filter(|s| s.state == cri::PodSandboxState::SandboxReady as i32).count();
            let running = self.runtime_containers(uid).await?.into_iter().filter(|c| c.state == cri::ContainerState::ContainerRunning as i32).count();
            anyhow::ensure!(ready == 1 && running == 1, "{ready} ready sandboxes, {running} running containers");
            Ok(())
        })
        .await
    }

    /// What is left on the node of the pod `uid`; empty when nothing is.
    async fn leftovers(&self, uid: &str) -> Vec<String> {
        let mut left = Vec::new();
        let sandboxes = self.sandboxes(uid).await;
        if !sandboxes.is_empty() {
            left.push(format!("{} sandboxes", sandboxes.len()));
        }
        match self.runtime_containers(uid).await {
            Ok(c) if !c.is_empty() => left.push(format!("{} containers", c.len())),
            Ok(_) => {}
            Err(e) => left.push(format!("containers unreadable: {e:#}")),
        }
        for dir in cgroup_dirs(self.agent.cgroup_root(), &format!("pod{uid}")) {
            left.push(format!("cgroup {}", dir.display()));
        }
        // The agent and containerd share a mount namespace: containerd's mountinfo shows both.
        let pid = self.agent.containerd().pid().expect("containerd runs");
        let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap_or_default();
        for l in mountinfo.lines().filter(|l| l.contains(uid)) {
            left.push(format!("mount {}", l.split(' ').nth(4).unwrap_or(l)));
        }
        let pod_dir = self.agent.root_dir().join("pods").join(uid);
        if pod_dir.exists() {
            left.push(format!("directory {}", pod_dir.display()));
        }
        left
    }
}

/// Directories named `name` anywhere below `root` in every cgroup hierarchy.
fn cgroup_dirs(root: &str, name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if p.file_name().is_some_and(|n| n.to_string_lossy().contains(name)) {
                    out.push(p.clone());
                }
                walk(&p, name, out);
            }
        }
    }
    let mut out = Vec::new();
    let mount = Path::new("/sys/fs/cgroup");
    // v1: one tree per hierarchy; v2 (and systemd's slices, where `-` turns `_`): the one tree.
    let mut tops: Vec<PathBuf> = std::fs::read_dir(mount).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| !p.is_symlink() && p.is_dir()).collect();
    tops.push(mount.to_path_buf());
    let name_systemd = name.replace('-', "_");
    for top in tops {
        let base = top.join(root.trim_matches('/'));
        walk(&base, name, &mut out);
        let slice = top.join(format!("{}.slice", root.trim_matches('/').replace('-', "_")));
        walk(&slice, &name_systemd, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// IP leases the CNI host-local IPAM still holds (files named after an address).
fn ip_leases(ipam: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for net in std::fs::read_dir(ipam).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(net.path()).into_iter().flatten().flatten() {
            let n = f.file_name().to_string_lossy().into_owned();
            if n.parse::<std::net::IpAddr>().is_ok() {
                out.push(n);
            }
        }
    }
    out
}

/// veth interfaces on the node's bridge.
fn bridge_ports(bridge: &str) -> Vec<String> {
    let out = std::process::Command::new("ip").args(["-o", "link", "show", "master", bridge]).output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).lines().map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()).collect()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_killed_at_each_step_finishes_the_pod_and_leaks_nothing() {
    let mut lab = Lab(NodeLab::start(NODE, OCTET, Components::default()).await);
    lab.apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crash-config\ndata:\n  k: v\n");
    lab.apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: crash-secret\nstringData:\n  token: s3cret\n");
    let mut uids = Vec::new();

    // Step 1.
    for (i, failpoint) in SYNC_POD.iter().enumerate() {
        let name = format!("crash-{i}");
        let yaml = pod_yaml(&name);
        lab.crash_at(failpoint, async |lab| lab.apply(&yaml)).await;
        let p = lab.wait_running(&name).await;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        lab.hold_one_of_each(&name, &uid).await;
        eprintln!("[e2e] killed at {failpoint}: {name} runs, one sandbox, one container");
        uids.push((name, uid));
    }

    // containerd restarted under a SyncPod that waits between creating and starting the
    // container (the failpoint sleeps 4 s): the agent must still end with one of each.
    lab.0.agent.set_failpoints(Some("syncPodAfterCreateContainer=1*sleep(4000)")).expect("the failpoint build");
    lab.0.agent.restart().expect("agent with the sleep");
    lab.apply(&pod_yaml("crash-containerd"));
    lab.wait_until("the agent to reach the sleep", RUN_TIMEOUT, || async {
        // The log holds every run of the agent: this one's firing is the sleep (step 1's was a panic).
        let fired = |l: &&str| l.contains("failpoint fired") && l.contains("syncPodAfterCreateContainer") && l.contains("Sleep");
        Ok(lab.agent.log().lines().any(|l| fired(&l)).then_some(()))
    })
    .await;
    lab.0.agent.containerd_mut().restart().await.expect("restart containerd");
    let p = lab.wait_running("crash-containerd").await;
    let uid = p.metadata.uid.clone().unwrap_or_default();
    lab.hold_one_of_each("crash-containerd", &uid).await;
    lab.0.agent.set_failpoints(None).expect("the ordinary build");
    lab.0.agent.restart().expect("agent again");
    eprintln!("[e2e] containerd restarted mid-SyncPod: crash-containerd runs, one sandbox, one container");
    uids.push(("crash-containerd".into(), uid));

    // The leak checks see a live pod's every trace (so an empty answer later means something).
    let ipam = lab.agent.root_dir().join("cni").join("ipam");
    let bridge = format!("kubelab{OCTET}");
    let (_, live_uid) = uids.last().expect("pods").clone();
    let live = lab.leftovers(&live_uid).await.join("; ");
    for what in ["sandboxes", "containers", "cgroup", "mount", "directory"] {
        assert!(live.contains(what), "the leak check does not see a running pod's {what}: {live}");
    }
    assert!(ip_leases(&ipam).len() >= SYNC_POD.len(), "the leak check does not see the IP leases: {:?}", ip_leases(&ipam));
    assert!(bridge_ports(&bridge).len() >= SYNC_POD.len(), "the leak check does not see the veths: {:?}", bridge_ports(&bridge));

    // Step 2.
    for (i, failpoint) in TEARDOWN.iter().enumerate() {
        let (name, uid) = uids[i].clone();
        let pods = lab.pods();
        lab.crash_at(failpoint, async |_| {
            pods.delete(&name, &DeleteParams::default()).await.expect("delete");
        })
        .await;
        lab.wait_until(&format!("{name} deleted after the agent died at {failpoint}"), RUN_TIMEOUT, || async {
            Ok(lab.pods().get_opt(&name).await?.is_none().then_some(()))
        })
        .await;
        eprintln!("[e2e] killed at {failpoint}: {name} ({uid}) deleted all the same");
    }

    // Step 3.
    for (name, _) in &uids[TEARDOWN.len()..] {
        lab.pods().delete(name, &DeleteParams::default()).await.expect("delete");
    }
    lab.wait_until("every pod gone from the API server", RUN_TIMEOUT, || async {
        let left = lab.pods().list(&Default::default()).await?.items.len();
        anyhow::ensure!(left == 0, "{left} pods left");
        Ok(Some(()))
    })
    .await;
    lab.wait_until("nothing left of any pod on the node", RUN_TIMEOUT, || async {
        let mut left = Vec::new();
        for (name, uid) in &uids {
            for l in lab.leftovers(uid).await {
                left.push(format!("{name}: {l}"));
            }
        }
        let leases = ip_leases(&ipam);
        if !leases.is_empty() {
            left.push(format!("IP leases {leases:?}"));
        }
        let ports = bridge_ports(&bridge);
        if !ports.is_empty() {
            left.push(format!("veths on {bridge}: {ports:?}"));
        }
        anyhow::ensure!(left.is_empty(), "{}", left.join("; "));
        Ok(Some(()))
    })
    .await;
    assert!(uids.iter().all(|(_, u)| !u.is_empty()));
}
