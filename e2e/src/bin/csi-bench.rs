//! csi-bench: what a volume through CSI adds to a pod's startup (issue 26's goal: at most
//! +100 ms over an emptyDir), on `kubelab up` (its own containerd, the node agent, the
//! controller manager's attach-detach controller and `kubelab csi-hostpath`).
//!
//! 1. `--pods` claims are provisioned before anything is measured (a StorageClass binding at
//!    once), so that provisioning — a claim's life, not a pod's start — is not counted.
//! 2. Pods are started one at a time, alternating: one with an emptyDir, one with the next
//!    bound claim, so that whatever else the machine does falls on both alike. Each pod's
//!    figure is create sent → phase Running seen on a watch opened before the create. For a
//!    claim that includes the attach (the VolumeAttachment made by the controller manager and
//!    marked attached by the driver's attacher), NodeStageVolume and NodePublishVolume.
//! 3. Each pod is deleted (and gone) before the next starts.
//!
//! The report gives p50 and p90 of each kind and the difference of the medians.
//! `make bench-csi` builds in release and runs it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use e2e::bench::{machine, ms, percentile};
use e2e::process::Process;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[derive(Parser)]
#[command(about = "Pod startup with a CSI volume against one with an emptyDir, on kubelab up")]
struct Args {
    /// Pods of each kind.
    #[arg(long, env = "BENCH_PODS", default_value_t = 20)]
    pods: usize,
    /// The pod CIDR is 10.244.<octet>.0/24 (distinct from concurrent tests' bridges).
    #[arg(long, env = "BENCH_POD_CIDR_OCTET", default_value_t = 95)]
    octet: u8,
}

const IMAGE: &str = "docker.io/library/busybox:1.36";

fn pod(name: &str, volume: serde_json::Value) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": "csi"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"], "imagePullPolicy": "IfNotPresent",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [volume]
        }
    }))?)
}

/// Runs `p` and returns its create → Running latency, seen on a watch opened before the create.
async fn run_one(pods: &Api<Pod>, p: Pod) -> anyhow::Result<Duration> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut stream = pods.watch(&wp, "0").await?.boxed();
    let t = Instant::now();
    pods.create(&PostParams::default(), &p).await.with_context(|| format!("create {name}"))?;
    let deadline = t + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = tokio::time::timeout(left, stream.try_next()).await.with_context(|| format!("{name} not Running within 120 s"))??;
        match ev {
            Some(WatchEvent::Added(p) | WatchEvent::Modified(p)) if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") => return Ok(t.elapsed()),
            Some(_) => {}
            None => anyhow::bail!("the watch on {name} ended"),
        }
    }
}

/// Deletes `name` and waits until it is gone (its volumes torn down by the agent).
async fn delete_and_wait(pods: &Api<Pod>, name: &str) -> anyhow::Result<()> {
    pods.delete(name, &DeleteParams::default()).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while pods.get_opt(name).await?.is_some() {
        anyhow::ensure!(Instant::now() < deadline, "{name} not gone within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// `kubelab up` of its own, in a temporary directory; killed when dropped.
struct Cluster {
    process: Option<Process>,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    cgroup_root: String,
    bridge: String,
}

impl Cluster {
    async fn start(octet: u8) -> anyhow::Result<Cluster> {
        e2e::containerd::prerequisites().map_err(anyhow::Error::msg)?;
        let dir = tempfile::Builder::new().prefix("kubelab-csi-bench-").tempdir()?;
        let ports = e2e::ports::reserve_n(7)?;
        let p: Vec<String> = ports.iter().map(|p| p.port.to_string()).collect();
        let cgroup_root = format!("/kubelab-csi-bench-{}", std::process::id());
        let data = dir.path().join("data");
        let args: Vec<String> = [
            "up", "--data-dir", &data.to_string_lossy(),
            "--store-port", &p[0], "--store-peer-port", &p[1], "--agent-port", &p[2], "--stream-port", &p[3],
            "--dns-health-port", &p[4], "--proxy-healthz-port", &p[5], "--secure-port", &p[6],
            "--node-name", "bench-node", "--pod-cidr", &format!("10.244.{octet}.0/24"),
            "--image-dir", &e2e::containerd::images_dir().to_string_lossy(),
            "--cgroup-root", &cgroup_root,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        drop(ports);
        let bin = e2e::kubelab_bin()?;
        let mut process = Process::spawn("kubelab-up", &bin, &args, &dir.path().join("logs"), &[("NO_COLOR".into(), "1".into())])?;
        let stdout = dir.path().join("logs/stdout.log");
        let deadline = Instant::now() + Duration::from_secs(180);
        while !std::fs::read_to_string(&stdout).unwrap_or_default().contains("export KUBECONFIG=") {
            if let Some(st) = process.exited() {
                anyhow::bail!("kubelab up exited ({st}) before it was ready:\n{}", process.log_tail(40));
            }
            anyhow::ensure!(Instant::now() < deadline, "kubelab up not ready within 180 s:\n{}", process.log_tail(40));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(Cluster { process: Some(process), kubeconfig: data.join("kubeconfig"), _dir: dir, cgroup_root, bridge: format!("kubelab{octet}") })
    }

    async fn client(&self) -> anyhow::Result<kube::Client> {
        let config = kube::Config::from_custom_kubeconfig(kube::config::Kubeconfig::read_from(&self.kubeconfig)?, &Default::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The cluster stops first (SIGTERM: it removes its pods); then what it leaves behind.
        if let Some(mut p) = self.process.take() {
            p.terminate();
        }
        e2e::nodeagent::remove_cgroup_tree(&self.cgroup_root);
        e2e::nodeagent::delete_bridge(&self.bridge);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    println!("csi-bench: {}", machine());
    let cluster = Cluster::start(args.octet).await?;
    let kube = cluster.client().await?;
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(kube.clone(), "default");

    // Step 1: the claims, provisioned and bound before anything is measured.
    let class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "bench"},
                       "provisioner": "hostpath.csi.kubelab.io", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"});
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(kube.clone());
    classes.create(&PostParams::default(), &serde_json::from_value(class)?).await.context("the bench StorageClass")?;
    for i in 0..args.pods {
        let c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": format!("claim-{i}")},
                       "spec": {"storageClassName": "bench", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}});
        claims.create(&PostParams::default(), &serde_json::from_value(c)?).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let bound = claims.list(&Default::default()).await?.items.iter().filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")).count();
        if bound == args.pods {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "{bound} of {} claims bound within 120 s", args.pods);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A warm-up pod of each kind, unmeasured (the first pod waits for images and the node).
    run_one(&pods, pod("warmup", json!({"name": "data", "emptyDir": {}}))?).await?;
    delete_and_wait(&pods, "warmup").await?;

    // Step 2: alternating, one pod at a time.
    let (mut empty, mut csi) = (Vec::new(), Vec::new());
    for i in 0..args.pods {
        let name = format!("empty-{i}");
        empty.push(run_one(&pods, pod(&name, json!({"name": "data", "emptyDir": {}}))?).await?);
        delete_and_wait(&pods, &name).await?;
        let name = format!("csi-{i}");
        csi.push(run_one(&pods, pod(&name, json!({"name": "data", "persistentVolumeClaim": {"claimName": format!("claim-{i}")}}))?).await?);
        delete_and_wait(&pods, &name).await?;
    }
    empty.sort();
    csi.sort();
    let (e50, c50) = (percentile(&empty, 0.5), percentile(&csi, 0.5));
    println!("pod create → Running, {} pods each, alternating, on kubelab up:", args.pods);
    println!("  emptyDir volume               p50 {}   p90 {}", ms(e50), ms(percentile(&empty, 0.9)));
    println!("  CSI volume (bound claim)      p50 {}   p90 {}", ms(c50), ms(percentile(&csi, 0.9)));
    let delta = c50.as_secs_f64() - e50.as_secs_f64();
    println!("  CSI − emptyDir (p50)          {:+.1} ms (goal: at most +100 ms)", delta * 1000.0);
    Ok(())
}
