//! Mirrors kubelet_test.go: the kubelet's pod workers, SyncPod and the status manager driven
//! against the fake CRI runtime ([`crate::cri::fake`]) — fast and deterministic, no containerd.

use std::sync::Arc;
use std::time::Duration;

use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use crate::cm::PodContainerManager;
use crate::cm::cgroup_v1::Hierarchy;
use crate::cri::RemoteRuntime;
use crate::cri::fake::{FakeRuntime, FakeServer};
use crate::events::Recorder;
use super::{Dependencies, Kubelet};
use crate::kuberuntime::RuntimeManager;
use crate::pod_workers::{PodWorkers, UpdatePodOptions, UpdateType, WorkerState};
use crate::status::StatusManager;
use crate::testing::{hold_for, wait_for};
use crate::volumemanager::VolumeManager;

const IMAGE: &str = "docker.io/library/busybox:1.36";

struct Harness {
    fake: FakeRuntime,
    _server: FakeServer,
    kubelet: Arc<Kubelet>,
    dir: tempfile::TempDir,
}

async fn harness() -> Harness {
    let dir = tempfile::tempdir().expect("tmp");
    let (fake, server) = FakeRuntime::start(dir.path()).await.expect("fake CRI");
    fake.add_image(IMAGE);
    let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
    // cgroup files in a temporary directory: the layout is real, the kernel is not involved.
    let cg = dir.path().join("cgroup");
    let hierarchies = ["cpu", "memory"]
        .iter()
        .map(|c| {
            std::fs::create_dir_all(cg.join(c)).expect("mkdir");
            Hierarchy::v1(cg.join(c), &[c])
        })
        .collect();
    let (_node_tx, node_rx) = watch::channel(None);
    let status = StatusManager::new(None, Default::default());
    let prober = crate::prober::Prober::new(rt.clone(), Recorder::default()).expect("prober");
    let probes = crate::prober::ProberManager::new(Arc::new(prober), status.clone());
    let kubelet = Arc::new(Kubelet::new(Dependencies {
        node_name: "node1".into(),
        root_dir: dir.path().join("root"),
        client: None,
        runtime: RuntimeManager::new(rt, Recorder::default(), dir.path().join("logs"), Default::default()),
        volumes: VolumeManager::new(dir.path().join("root"), None),
        pcm: PodContainerManager::new(crate::cm::CgroupManager::cgroupfs_v1(hierarchies), "/"),
        status,
        probes,
        recorder: Recorder::default(),
        node: node_rx,
        host_ip: "10.0.0.1".into(),
        max_pods: 110,
        resync_interval: Duration::from_millis(100),
        pressure: watch::channel(Default::default()).1,
    }));
    Harness { fake, _server: server, kubelet, dir }
}

fn pod(uid: &str, yaml_spec: &str) -> Pod {
    let mut p: Pod = serde_norway::from_str(&format!(
        "metadata: {{name: p-{uid}, namespace: default, uid: {uid}, annotations: {{kubernetes.io/config.source: api}}}}\nspec:\n{yaml_spec}"
    ))
    .expect("pod yaml");
    p.spec.as_mut().expect("spec").node_name = Some("node1".into());
    p
}

fn container_named(fake: &FakeRuntime, name: &str) -> Vec<api::Container> {
    fake.containers().into_iter().filter(|c| c.metadata.as_ref().is_some_and(|m| m.name == name)).collect()
}

fn phase(h: &Harness, uid: &str) -> String {
    h.kubelet.deps.status.get_pod_status(uid).and_then(|s| s.phase).unwrap_or_default()
}

#[actix_rt::test]
async fn init_containers_run_in_order_then_the_app_then_termination() {
    let h = harness().await;
    let p = Arc::new(pod(
        "u1",
        &format!("  terminationGracePeriodSeconds: 5\n  volumes: [{{name: scratch, emptyDir: {{}}}}]\n  initContainers:\n  - {{name: init1, image: '{IMAGE}'}}\n  - {{name: init2, image: '{IMAGE}'}}\n  containers:\n  - {{name: app, image: '{IMAGE}', volumeMounts: [{{name: scratch, mountPath: /scratch}}]}}\n"),
    ));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    start(&h, &mut workers, &p);

    // The first init container runs alone; the pod is Pending and Initialized=False.
    wait_for("init1 to run", || container_named(&h.fake, "init1").iter().any(|c| c.state == api::ContainerState::ContainerRunning as i32)).await;
    // Nothing else may start while init1 runs: checked all along three resyncs (100 ms each).
    hold_for("init2 and the app to wait for init1", Duration::from_millis(300), || {
        container_named(&h.fake, "init2").is_empty() && container_named(&h.fake, "app").is_empty()
    })
    .await;
    wait_for("a Pending status", || phase(&h, "u1") == "Pending").await;

    let id1 = container_named(&h.fake, "init1")[0].id.clone();
    h.fake.exit_container(&id1, 0);
    wait_for("init2 to run", || container_named(&h.fake, "init2").iter().any(|c| c.state == api::ContainerState::ContainerRunning as i32)).await;
    assert!(container_named(&h.fake, "app").is_empty());
    let id2 = container_named(&h.fake, "init2")[0].id.clone();
    h.fake.exit_container(&id2, 0);
    wait_for("the app to run", || container_named(&h.fake, "app").iter().any(|c| c.state == api::ContainerState::ContainerRunning as i32)).await;
    wait_for("a Running status", || phase(&h, "u1") == "Running").await;
    let status = h.kubelet.deps.status.get_pod_status("u1").expect("status");
    assert_eq!(status.pod_ip.as_deref().map(|ip| ip.starts_with("10.88.0.")), Some(true), "pod IP from the sandbox");
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));
    let cs = status.container_statuses.clone().unwrap_or_default();
    assert_eq!(cs.len(), 1);
    assert!(cs[0].state.as_ref().is_some_and(|s| s.running.is_some()));
    // The pod cgroup and the emptyDir exist on the "host".
    assert!(h.kubelet.deps.pcm.exists("u1"));
    assert!(super::getters::pod_volumes_dir(&h.kubelet.deps.root_dir, "u1").exists());

    // A sync after everything runs creates nothing new.
    // Checked all along four resyncs (100 ms each).
    let creates = || h.fake.calls().iter().filter(|c| c.as_str() == "CreateContainer").count();
    let calls_before = creates();
    hold_for("no CreateContainer once everything runs", Duration::from_millis(400), || creates() == calls_before).await;

    // Removal: the app is stopped, the sandbox stopped and removed, the cgroup and dirs cleaned.
    h.kubelet.pod_manager.remove_pod("u1");
    workers.update_pod(UpdatePodOptions { pod: p.clone(), update_type: UpdateType::Kill, grace_override: None, removed: true });
    wait_for("the sandbox to be removed", || h.fake.sandboxes().is_empty()).await;
    wait_for("the containers to be removed", || h.fake.containers().is_empty()).await;
    wait_for("the cgroup to be removed", || !h.kubelet.deps.pcm.exists("u1")).await;
    let calls = h.fake.calls();
    let stop = calls.iter().position(|c| c == "StopContainer").expect("StopContainer");
    let stop_sb = calls.iter().rposition(|c| c == "StopPodSandbox").expect("StopPodSandbox");
    assert!(stop < stop_sb, "containers stop before their sandbox: {calls:?}");
    wait_for("the worker to stop", || {
        workers.forget_stopped();
        workers.known_pods().is_empty()
    })
    .await;
}

#[actix_rt::test]
async fn a_failing_container_backs_off_and_never_policy_finishes_the_pod() {
    let h = harness().await;
    let crash = Arc::new(pod("u2", &format!("  containers:\n  - {{name: c, image: '{IMAGE}'}}\n")));
    let once = Arc::new(pod("u3", &format!("  restartPolicy: Never\n  containers:\n  - {{name: c, image: '{IMAGE}'}}\n")));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    for p in [&crash, &once] {
        start(&h, &mut workers, p);
    }
    let running = |h: &Harness, pod: &str| {
        h.fake.containers().into_iter().filter(|c| c.labels.get(crate::container::POD_UID_LABEL).map(String::as_str) == Some(pod) && c.state == api::ContainerState::ContainerRunning as i32).collect::<Vec<_>>()
    };
    wait_for("both to run", || !running(&h, "u2").is_empty() && !running(&h, "u3").is_empty()).await;
    let (c2, c3) = (running(&h, "u2")[0].id.clone(), running(&h, "u3")[0].id.clone());
    h.fake.exit_container(&c2, 3);
    h.fake.exit_container(&c3, 0);

    // restartPolicy Always: the first failure restarts at once (as the kubelet does), the
    // second waits out a back-off of 10 s; the status says CrashLoopBackOff with the last
    // termination and a restart count of 1.
    wait_for("the first restart", || running(&h, "u2").iter().any(|c| c.id != c2)).await;
    let again = running(&h, "u2")[0].id.clone();
    h.fake.exit_container(&again, 3);
    wait_for("CrashLoopBackOff", || {
        h.kubelet.deps.status.get_pod_status("u2").and_then(|s| s.container_statuses).and_then(|cs| cs.first().cloned()).is_some_and(|c| {
            c.state.and_then(|s| s.waiting).and_then(|w| w.reason).as_deref() == Some("CrashLoopBackOff")
                && c.restart_count == 1
                && c.last_state.and_then(|s| s.terminated).is_some_and(|t| t.exit_code == 3)
        })
    })
    .await;
    // The back-off is 10 s: checked all along the first half second of it.
    hold_for("no restart during the back-off", Duration::from_millis(500), || running(&h, "u2").is_empty()).await;

    // restartPolicy Never with exit 0: the pod Succeeded and its sandbox is stopped.
    wait_for("Succeeded", || phase(&h, "u3") == "Succeeded").await;
    wait_for("its sandbox stopped", || {
        h.fake.sandboxes().iter().filter(|s| s.labels.get(crate::container::POD_UID_LABEL).map(String::as_str) == Some("u3")).all(|s| s.state == api::PodSandboxState::SandboxNotready as i32)
    })
    .await;
}

/// The eviction manager of a harness: no thresholds unless given, GC on the fake runtime, kills
/// delivered to the returned receiver (the sync loop's end of the channel).
fn eviction_manager(
    h: &Harness,
    eviction_hard: &str,
) -> (crate::eviction::EvictionManager, tokio::sync::mpsc::Receiver<UpdatePodOptions>, watch::Receiver<crate::eviction::NodePressure>) {
    use crate::images::image_gc_manager::ImageGcManager;
    use crate::kuberuntime::kuberuntime_gc::ContainerGc;
    let rt = h.kubelet.deps.runtime.runtime.clone();
    let (kill_tx, kill_rx) = tokio::sync::mpsc::channel(4);
    let (pressure_tx, pressure_rx) = watch::channel(Default::default());
    let config = crate::eviction::Config {
        thresholds: crate::eviction::helpers::parse_threshold_config(eviction_hard).expect("thresholds"),
        ..Default::default()
    };
    let k = h.kubelet.clone();
    let container_gc = ContainerGc::new(rt.clone(), h.kubelet.deps.runtime.logs_root().to_path_buf(), Default::default(), Arc::new(move |u: &str| k.is_desired(u)));
    let image_gc = ImageGcManager::new(rt, Recorder::default(), "node1", Default::default(), "registry.k8s.io/pause:3.9".into(), h.kubelet.deps.root_dir.clone());
    let m = h.kubelet.new_eviction_manager(config, Arc::new(container_gc), Arc::new(image_gc), Arc::new(|| true), kill_tx, pressure_tx);
    (m, kill_rx, pressure_rx)
}

fn start(h: &Harness, workers: &mut PodWorkers, p: &Arc<Pod>) {
    h.kubelet.pod_manager.add_pod(p.clone());
    workers.update_pod(UpdatePodOptions { pod: p.clone(), update_type: UpdateType::Create, grace_override: None, removed: false });
}

#[actix_rt::test]
async fn an_emptydir_over_its_size_limit_gets_the_pod_evicted_through_its_worker() {
    let h = harness().await;
    let p = Arc::new(pod(
        "u4",
        &format!("  volumes: [{{name: scratch, emptyDir: {{sizeLimit: 4Ki}}}}]\n  containers:\n  - {{name: app, image: '{IMAGE}', volumeMounts: [{{name: scratch, mountPath: /scratch}}]}}\n"),
    ));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    start(&h, &mut workers, &p);
    wait_for("a Running status", || phase(&h, "u4") == "Running").await;
    let (mut m, mut kills, _) = eviction_manager(&h, "");
    assert_eq!(m.synchronize().await, None, "an empty emptyDir breaks no limit");

    let dir = super::getters::pod_volume_dir(&h.kubelet.deps.root_dir, "u4", crate::volumemanager::emptydir::PLUGIN_NAME, "scratch");
    std::fs::write(dir.join("big"), vec![7u8; 64 * 1024]).expect("fill the emptyDir");
    assert_eq!(m.synchronize().await.as_deref(), Some("u4"));
    let status = h.kubelet.deps.status.get_pod_status("u4").expect("status");
    assert_eq!((status.phase.as_deref(), status.reason.as_deref()), (Some("Failed"), Some("Evicted")));
    assert_eq!(status.message.as_deref(), Some("Usage of EmptyDir volume \"scratch\" exceeds the limit \"4Ki\". "));

    // The kill goes through the pod's worker: containers stopped, the verdict kept.
    let kill = kills.recv().await.expect("a kill for the sync loop");
    assert_eq!((kill.update_type, kill.grace_override, kill.removed), (UpdateType::Kill, Some(0), false));
    workers.update_pod(kill);
    wait_for("the containers to stop", || h.fake.containers().iter().all(|c| c.state != api::ContainerState::ContainerRunning as i32)).await;
    wait_for("the sandbox to stop", || h.fake.sandboxes().iter().all(|s| s.state == api::PodSandboxState::SandboxNotready as i32)).await;
    // The worker's last status write comes at the end of its termination: wait for it to finish.
    wait_for("the worker to finish terminating", || workers.state("u4") == Some(WorkerState::Terminated)).await;
    let status = h.kubelet.deps.status.get_pod_status("u4").expect("status");
    assert_eq!((status.phase.as_deref(), status.reason.as_deref()), (Some("Failed"), Some("Evicted")), "the worker keeps the eviction");
    assert_eq!(m.synchronize().await, None, "an evicted pod is not evicted twice");
}

#[actix_rt::test]
async fn memory_pressure_evicts_the_best_effort_pod_and_reports_the_condition() {
    let h = harness().await;
    let be = Arc::new(pod("be", &format!("  containers:\n  - {{name: c, image: '{IMAGE}'}}\n")));
    let burstable =
        Arc::new(pod("bu", &format!("  containers:\n  - {{name: c, image: '{IMAGE}', resources: {{requests: {{memory: 64Mi}}}}}}\n")));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    start(&h, &mut workers, &be);
    start(&h, &mut workers, &burstable);
    wait_for("both Running", || phase(&h, "be") == "Running" && phase(&h, "bu") == "Running").await;

    // The "root" memory cgroup of the harness says 1 GiB is in use; the threshold sits 1 MiB
    // under the machine's memory, so the node is under pressure. Each pod uses 2 MiB.
    let mem = h.dir.path().join("cgroup/memory");
    std::fs::write(mem.join("memory.usage_in_bytes"), (1u64 << 30).to_string()).expect("root usage");
    for p in [&be, &burstable] {
        let d = mem.join(h.kubelet.deps.pcm.cgroup_parent(p).trim_start_matches('/'));
        std::fs::write(d.join("memory.usage_in_bytes"), (2u64 << 20).to_string()).expect("pod usage");
    }
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| crate::stats::memory::parse_meminfo_total(&m)).expect("MemTotal");
    let (mut m, mut kills, pressure) = eviction_manager(&h, &format!("memory.available<{}Ki", total_kib - 1024));
    assert_eq!(m.synchronize().await.as_deref(), Some("be"), "BestEffort uses more than it requested");
    assert!(pressure.borrow().memory && !pressure.borrow().disk);
    let message = h.kubelet.deps.status.get_pod_status("be").and_then(|s| s.message).unwrap_or_default();
    assert!(message.starts_with("The node was low on resource: memory. Threshold quantity: "), "{message}");
    assert_eq!(phase(&h, "bu"), "Running");
    assert_eq!(kills.recv().await.map(|k| k.grace_override), Some(Some(1)));
    // Next round, still under pressure: the burstable pod is next.
    assert_eq!(m.synchronize().await.as_deref(), Some("bu"));
}

/// Probes through the agent (fake CRI, exec probes): the readiness probe decides `ready` and the
/// Ready condition both ways; a failing liveness probe gets the container killed and restarted,
/// and the new container starts with fresh results.
#[actix_rt::test]
async fn probes_drive_readiness_and_restart_unhealthy_containers() {
    let h = harness().await;
    let p = Arc::new(pod(
        "u4",
        &format!("  containers:\n  - name: c\n    image: '{IMAGE}'\n    readinessProbe: {{exec: {{command: [test, -f, /tmp/ready]}}, periodSeconds: 1, failureThreshold: 1}}\n    livenessProbe: {{exec: {{command: [cat, /tmp/healthy]}}, periodSeconds: 1, failureThreshold: 2}}\n"),
    ));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    start(&h, &mut workers, &p);
    let running = || container_named(&h.fake, "c").into_iter().filter(|c| c.state == api::ContainerState::ContainerRunning as i32).collect::<Vec<_>>();
    let ready = |want: bool| {
        let s = h.kubelet.deps.status.get_pod_status("u4").unwrap_or_default();
        let c = s.container_statuses.unwrap_or_default().first().cloned().unwrap_or_default();
        let cond = s.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "Ready").map(|c| c.status);
        c.ready == want && cond.as_deref() == Some(if want { "True" } else { "False" })
    };
    wait_for("the container to run", || !running().is_empty()).await;
    let first = running()[0].id.clone();
    assert!(ready(false), "not ready before the readiness probe succeeded");

    // The fake's ExecSync exits 0 by default: both probes pass.
    wait_for("ready", || ready(true)).await;
    assert_eq!(h.kubelet.deps.probes.worker_count(), 2);

    // Both commands now fail: not ready at once (failureThreshold 1), then killed for failing
    // liveness twice, and started again.
    h.fake.set_exec_result(&first, 1, "cat: can't open '/tmp/healthy': No such file or directory");
    wait_for("not ready", || ready(false)).await;
    wait_for("a new container", || running().iter().any(|c| c.id != first)).await;
    assert!(container_named(&h.fake, "c").iter().any(|c| c.id == first && c.state == api::ContainerState::ContainerExited as i32));
    let calls = h.fake.exec_calls();
    assert!(calls.iter().any(|(id, cmd, timeout)| id == &first && cmd == &["cat", "/tmp/healthy"] && *timeout == 1), "{calls:?}");

    // The new container passes its probes (its own fresh results) and counts one restart.
    wait_for("ready again", || ready(true)).await;
    let s = h.kubelet.deps.status.get_pod_status("u4").unwrap_or_default();
    assert_eq!(s.container_statuses.unwrap_or_default()[0].restart_count, 1);

    // Removal stops the workers.
    h.kubelet.pod_manager.remove_pod("u4");
    workers.update_pod(UpdatePodOptions { pod: p.clone(), update_type: UpdateType::Kill, grace_override: None, removed: true });
    wait_for("the workers to stop", || h.kubelet.deps.probes.worker_count() == 0).await;
}

/// Admission stops counting a pod the moment its containers have stopped, before the API
/// server's copy (what the pod manager holds) turns terminal: the scheduler frees the pod's
/// resources as soon as it sees the status manager's terminal write.
#[actix_rt::test]
async fn a_pod_whose_containers_stopped_holds_nothing_for_admission() {
    let h = harness().await;
    let p = Arc::new(pod("u7", &format!("  containers:\n  - {{name: app, image: '{IMAGE}', resources: {{requests: {{cpu: '1'}}}}}}\n")));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    start(&h, &mut workers, &p);
    wait_for("a Running status", || phase(&h, "u7") == "Running").await;
    let active = |w: &PodWorkers| super::pods::active_pods(&h.kubelet, w).into_iter().filter_map(|p| p.metadata.uid).collect::<Vec<_>>();
    assert_eq!(active(&workers), vec!["u7".to_string()]);

    workers.update_pod(UpdatePodOptions { pod: p.clone(), update_type: UpdateType::Kill, grace_override: Some(0), removed: false });
    wait_for("the containers to stop", || phase(&h, "u7") == "Failed").await;
    let api_copy = h.kubelet.pod_manager.get_pod_by_uid("u7").and_then(|p| p.status.clone()).and_then(|s| s.phase);
    assert_eq!(api_copy, None, "the pod manager's copy has not heard of the terminal phase");
    assert!(active(&workers).is_empty(), "a pod whose containers stopped must not count");
}

/// Housekeeping stops the probe workers of a pod that no source wants, no worker handles and the
/// runtime does not run (kubelet's probeManager.CleanupPods); a wanted pod keeps its workers.
#[actix_rt::test]
async fn housekeeping_stops_the_probe_workers_of_pods_gone_from_everywhere() {
    let h = harness().await;
    let probe = "    readinessProbe: {exec: {command: [true]}, periodSeconds: 1}\n";
    let gone = pod("u8", &format!("  containers:\n  - name: c\n    image: '{IMAGE}'\n{probe}"));
    let wanted = Arc::new(pod("u9", &format!("  containers:\n  - name: c\n    image: '{IMAGE}'\n{probe}")));
    h.kubelet.pod_manager.add_pod(wanted.clone());
    h.kubelet.deps.probes.add_pod(&gone);
    h.kubelet.deps.probes.add_pod(&wanted);
    assert_eq!(h.kubelet.deps.probes.worker_count(), 2);
    let mut workers = PodWorkers::new(h.kubelet.clone());
    h.kubelet.handle_pod_cleanups(&mut workers, true).await;
    assert_eq!(h.kubelet.deps.probes.worker_count(), 1, "only the wanted pod's worker is left");
}

#[actix_rt::test]
async fn an_orphan_the_runtime_runs_is_stopped_without_a_status() {
    // A pod the runtime runs but no source has given the agent (right after a restart, before
    // the API server's list is in): housekeeping stops it, and writes no status about it, since
    // the API server's pod of that name is not this agent's to report on.
    let h = harness().await;
    let labels = [("io.kubernetes.pod.uid", "u10"), ("io.kubernetes.pod.name", "p-u10"), ("io.kubernetes.pod.namespace", "default")];
    let config = api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata { name: "p-u10".into(), namespace: "default".into(), uid: "u10".into(), attempt: 0 }),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    };
    h.kubelet.deps.runtime.runtime.run_pod_sandbox(config, "").await.expect("RunPodSandbox");
    let ready = |h: &Harness| h.fake.sandboxes().iter().any(|s| s.state == api::PodSandboxState::SandboxReady as i32);
    assert!(ready(&h));
    let mut workers = PodWorkers::new(h.kubelet.clone());
    // Two rounds: the first notes what the runtime holds, the second stops what no one wants.
    h.kubelet.handle_pod_cleanups(&mut workers, true).await;
    h.kubelet.handle_pod_cleanups(&mut workers, true).await;
    wait_for("the orphan's sandbox stopped", || !ready(&h)).await;
    hold_for("no status for the orphan", Duration::from_millis(500), || h.kubelet.deps.status.get_pod_status("u10").is_none()).await;
}
