//! Garbage collection and eviction of `kubelab nodeagent` end to end, on a real private
//! containerd, driven through the API server (and the pinned kubectl):
//! - image GC removes an image no container uses once the image filesystem passes the high
//!   threshold, and keeps the image a pod uses and the pause image;
//! - under memory pressure the eviction manager evicts the BestEffort pod first (Failed,
//!   Evicted, with the message and event), the Node reports MemoryPressure and gets the
//!   memory-pressure taint (from the node lifecycle controller), and a new BestEffort pod is
//!   rejected.
//!
//! Container GC (one dead instance kept per container, with its log) is tested against the fake
//! CRI in nodeagent's `kuberuntime_gc` unit tests.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use e2e::nodelab::{BUSYBOX, Components, NodeLab, RUN_TIMEOUT, phase};

// This file's lab: the shared one plus what only these tests need.
e2e::node_lab!(Lab);

async fn lab(node: &str, octet: u8, controller_manager: bool) -> Lab {
    Lab(NodeLab::start(node, octet, Components { controller_manager, ..Components::default() }).await)
}

const VICTIM: &str = "docker.io/library/gc-victim:1";
const PAUSE: &str = "registry.k8s.io/pause:3.9";

fn condition(n: &Node, type_: &str) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

impl Lab {
    async fn wait_node(&self, node: &str, what: &str, pred: impl Fn(&Node) -> bool) -> Node {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let what = format!("node {node}: {what}");
        self.wait_until(&what, RUN_TIMEOUT, || async {
            let n = nodes.get(node).await?;
            anyhow::ensure!(pred(&n), "last status:\n{}", serde_json::to_string_pretty(&n.status).unwrap_or_default());
            Ok(Some(n))
        })
        .await
    }

    async fn wait_pod(&self, name: &str, what: &str, pred: impl Fn(&Pod) -> bool) -> Pod {
        self.0.wait_pod(name, what, RUN_TIMEOUT, pred).await
    }

    async fn image_tags(&self) -> Vec<String> {
        let rt = self.agent.containerd().runtime().await.expect("CRI client");
        let mut tags: Vec<String> = rt.list_images().await.expect("ListImages").into_iter().flat_map(|i| i.repo_tags).collect();
        tags.sort();
        tags
    }

    async fn events(&self, field_selector: &str) -> Vec<Event> {
        let events: Api<Event> = Api::all(self.client.clone());
        events.list(&ListParams::default().fields(field_selector)).await.map(|l| l.items).unwrap_or_default()
    }
}

/// An OCI image-layout tarball of a one-file image named [`VICTIM`], built with the shell tools
/// `deploy/images/build.sh` uses: its config differs from busybox's, so it is a different image.
fn build_victim_image(dir: &Path) -> PathBuf {
    let script = format!(
        r#"set -euo pipefail
cd "$1"
mkdir -p rootfs layout/blobs/sha256
echo 'collect me' > rootfs/victim.txt
tar --format=gnu --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C rootfs -cf layer.tar victim.txt
blob() {{ local h; h=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "layout/blobs/sha256/$h"; echo "$h $(stat -c %s "$1")"; }}
read lh ls < <(blob layer.tar)
printf '{{"architecture":"amd64","os":"linux","config":{{"Cmd":["/victim.txt"]}},"rootfs":{{"type":"layers","diff_ids":["sha256:%s"]}}}}' "$lh" > config.json
read ch cs < <(blob config.json)
printf '{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}}]}}' "$ch" "$cs" "$lh" "$ls" > manifest.json
read mh ms < <(blob manifest.json)
printf '{{"imageLayoutVersion":"1.0.0"}}' > layout/oci-layout
printf '{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{{"io.containerd.image.name":"{VICTIM}","org.opencontainers.image.ref.name":"1"}}}}]}}' "$mh" "$ms" > layout/index.json
tar --format=gnu --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C layout -cf victim.tar oci-layout index.json blobs
"#
    );
    std::fs::create_dir_all(dir).expect("image dir");
    let out = std::process::Command::new("bash").args(["-c", &script, "build", &dir.to_string_lossy()]).output().expect("bash");
    assert!(out.status.success(), "building the victim image failed: {}", String::from_utf8_lossy(&out.stderr));
    dir.join("victim.tar")
}

#[tokio::test(flavor = "multi_thread")]
async fn image_gc_removes_unused_images_and_keeps_used_and_pause_images() {
    let mut lab = lab("gc-a", 47, false).await;
    let tar = build_victim_image(&lab.api.work_dir().join("victim-image"));
    let names = lab.agent.containerd().import(&tar).await.expect("import the victim image");
    assert_eq!(names, vec![VICTIM.to_string()]);

    lab.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: user\nspec:\n  nodeName: gc-a\n  containers:\n  - name: c\n    image: {BUSYBOX}\n    command: [sleep, '3600']\n"
    ));
    lab.wait_pod("user", "Running", |p| phase(p) == "Running").await;
    let before = lab.image_tags().await;
    for i in [VICTIM, BUSYBOX, PAUSE] {
        assert!(before.contains(&i.to_string()), "{i} is on the node before GC: {before:?}");
    }

    // Every byte of the disk over the threshold, no minimum age: the first pass collects.
    let flags = ["--image-gc-high-threshold=1", "--image-gc-low-threshold=0", "--minimum-image-ttl-duration=0s"];
    lab.agent.restart_with(&flags.map(String::from)).expect("restart the agent");
    let after = lab
        .wait_until("the unused image collected", RUN_TIMEOUT, || async {
            let tags = lab.image_tags().await;
            anyhow::ensure!(!tags.contains(&VICTIM.to_string()), "images: {tags:?}");
            Ok(Some(tags))
        })
        .await;
    assert!(after.contains(&BUSYBOX.to_string()), "the image a running pod uses stays: {after:?}");
    assert!(after.contains(&PAUSE.to_string()), "the sandbox image stays: {after:?}");
    assert!(lab.agent.log().contains("removing an unused image"), "the agent logs what it collects");
    let p = lab.pods().get("user").await.expect("pod");
    assert_eq!(phase(&p), "Running", "the pod using busybox is untouched");

    // With a low threshold of 0% the disk can never be freed enough: the node says so.
    lab.wait_until("a FreeDiskSpaceFailed event on the node", RUN_TIMEOUT, || async {
        let evs = lab.events("involvedObject.kind=Node,involvedObject.name=gc-a").await;
        let reasons: Vec<_> = evs.iter().map(|e| e.reason.clone().unwrap_or_default()).collect();
        anyhow::ensure!(reasons.iter().any(|r| r == "FreeDiskSpaceFailed"), "the node's events: {reasons:?}");
        Ok(Some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_pressure_evicts_best_effort_first_taints_the_node_and_rejects_best_effort_pods() {
    let mut lab = lab("gc-b", 48, true).await;
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: besteffort\nspec:\n  nodeName: gc-b\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: guaranteed\nspec:\n  nodeName: gc-b\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n    resources:\n      requests: {cpu: 100m, memory: 64Mi}\n      limits: {cpu: 100m, memory: 64Mi}\n",
    );
    lab.wait_pod("besteffort", "Running", |p| phase(p) == "Running").await;
    lab.wait_pod("guaranteed", "Running", |p| phase(p) == "Running").await;

    // A memory threshold just under the machine's memory: the node is under pressure at once.
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let total_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("MemTotal");
    let flags = [
        format!("--eviction-hard=memory.available<{}Ki", total_kib - 1024),
        "--housekeeping-interval=5s".to_string(),
        "--eviction-pressure-transition-period=30s".to_string(),
    ];
    lab.agent.restart_with(&flags).expect("restart the agent");

    // The BestEffort pod goes first: it uses more than it requested (nothing).
    let p = lab.wait_pod("besteffort", "Failed/Evicted", |p| phase(p) == "Failed").await;
    let status = p.status.clone().unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some("Evicted"), "{status:?}");
    let message = status.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("The node was low on resource: memory. Threshold quantity: ") && message.contains(", available: "),
        "eviction message: {message}"
    );
    let g = lab.pods().get("guaranteed").await.expect("guaranteed");
    assert_eq!(phase(&g), "Running", "the pod within its requests is not evicted first");
    // The event is recorded apart from the status (kubelet's recorder sends it on its own), so
    // it may reach the API server a moment after the pod's phase.
    lab.wait_until("an Evicted warning on the evicted pod", RUN_TIMEOUT, || async {
        let evs = lab.events("involvedObject.name=besteffort").await;
        let found = evs.iter().any(|e| e.reason.as_deref() == Some("Evicted") && e.type_.as_deref() == Some("Warning"));
        anyhow::ensure!(found, "the pod's events: {evs:?}");
        Ok(Some(()))
    })
    .await;

    // The Node reports the pressure, and the node lifecycle controller taints it.
    lab.wait_node("gc-b", "MemoryPressure=True", |n| condition(n, "MemoryPressure") == "True").await;
    lab.wait_node("gc-b", "the memory-pressure taint", |n| {
        n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|ts| {
            ts.iter().any(|t| t.key == "node.kubernetes.io/memory-pressure" && t.effect == "NoSchedule")
        })
    })
    .await;

    // A new BestEffort pod is refused while the pressure lasts.
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  nodeName: gc-b\n  containers:\n  - name: c\n    image: docker.io/library/busybox:1.36\n    command: [sleep, '3600']\n",
    );
    let p = lab.wait_pod("late", "rejected", |p| phase(p) == "Failed").await;
    let status = p.status.unwrap_or_default();
    assert_eq!(status.reason.as_deref(), Some("Evicted"));
    assert!(
        status.message.as_deref().is_some_and(|m| m.contains("The node had condition: [MemoryPressure]")),
        "rejection message: {:?}",
        status.message
    );
}
