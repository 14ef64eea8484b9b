//! The private-containerd harness end to end, through the node agent's own CRI client and nothing
//! of the node agent above it: import the locally built images, run a pod sandbox on a CNI bridge,
//! run a busybox container in it, read its CRI log, restart containerd under the running pod, and
//! tear it all down. This proves the harness (and the images) work; it is also where the raw CRI
//! latency floor the node agent adds its overhead to gets measured (the timings are printed).
//!
//! Needs root and `make deps` + `make images`; a missing prerequisite fails the test with the fix.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use e2e::containerd::{self, BUSYBOX_IMAGE, Containerd, PAUSE_IMAGE};
use nodeagent::cri::{RemoteRuntime, api};
use nodeagent::images::ImageImporter;

const SUBNET: &str = "10.244.200.0/24";
const BRIDGE: &str = "kl-test0";

fn in_subnet(ip: &str) -> bool {
    ip.parse::<Ipv4Addr>().is_ok_and(|ip| {
        let o = ip.octets();
        o[0] == 10 && o[1] == 244 && o[2] == 200 && o[3] > 1 && o[3] < 255
    })
}

fn sandbox_config(log_dir: &Path, uid: &str) -> api::PodSandboxConfig {
    api::PodSandboxConfig {
        metadata: Some(api::PodSandboxMetadata {
            name: "hello".into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: "hello".into(),
        log_directory: log_dir.display().to_string(),
        labels: HashMap::from([
            ("io.kubernetes.pod.name".into(), "hello".into()),
            ("io.kubernetes.pod.namespace".into(), "default".into()),
            ("io.kubernetes.pod.uid".into(), uid.into()),
        ]),
        // cgroup_parent unset: runc puts the pod under /k8s.io/<id> in every hierarchy.
        linux: Some(api::LinuxPodSandboxConfig::default()),
        ..Default::default()
    }
}

fn container_config() -> api::ContainerConfig {
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata {
            name: "c".into(),
            attempt: 0,
        }),
        image: Some(api::ImageSpec {
            image: BUSYBOX_IMAGE.into(),
            ..Default::default()
        }),
        command: vec!["sh".into(), "-c".into(), "echo hello; sleep 3600".into()],
        log_path: "c/0.log".into(),
        labels: HashMap::from([("io.kubernetes.container.name".into(), "c".into())]),
        ..Default::default()
    }
}

/// Times one step and prints it: the raw CRI floor, call by call.
async fn timed<T>(
    what: &str,
    fut: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let start = Instant::now();
    let out = fut.await.with_context(|| what.to_string())?;
    eprintln!(
        "[e2e] {what}: {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(out)
}

async fn wait_network_ready(cri: &RemoteRuntime) -> anyhow::Result<()> {
    e2e::poll_until(
        "CRI NetworkReady",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async {
            let status = cri.status().await?;
            let ready = status
                .status
                .iter()
                .flat_map(|s| &s.conditions)
                .any(|c| c.r#type == "NetworkReady" && c.status);
            Ok(ready.then_some(()))
        },
    )
    .await
}

/// The PID of a task's init process, from its shim's bundle under containerd's state directory.
fn init_pid(cd: &Containerd, id: &str) -> anyhow::Result<i32> {
    let f = cd
        .dir()
        .join("state/io.containerd.runtime.v2.task/k8s.io")
        .join(id)
        .join("init.pid");
    let s = std::fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
    Ok(s.trim().parse()?)
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

async fn expect_running(
    cri: &RemoteRuntime,
    sandbox: &str,
    container: &str,
) -> anyhow::Result<String> {
    let sb = cri.pod_sandbox_status(sandbox).await?;
    anyhow::ensure!(
        sb.state == api::PodSandboxState::SandboxReady as i32,
        "sandbox {sandbox} is {:?}, want READY",
        api::PodSandboxState::try_from(sb.state)
    );
    let ip = sb.network.map(|n| n.ip).unwrap_or_default();
    anyhow::ensure!(
        in_subnet(&ip),
        "sandbox IP {ip:?} is not a pod address in {SUBNET}"
    );
    let c = cri.container_status(container).await?;
    anyhow::ensure!(
        c.state == api::ContainerState::ContainerRunning as i32,
        "container {container} is {:?} ({} {}), want RUNNING",
        api::ContainerState::try_from(c.state),
        c.reason,
        c.message
    );
    Ok(ip)
}

#[tokio::test]
async fn private_containerd_runs_a_pod_and_keeps_it_across_a_restart() -> anyhow::Result<()> {
    if let Err(msg) = containerd::prerequisites() {
        panic!("{msg}");
    }
    let pause_tar = containerd::image_tar("pause.tar")?;
    let busybox_tar = containerd::image_tar("busybox.tar")?;

    let mut cd = timed("containerd start", Containerd::start_temp()).await?;
    let dir: PathBuf = cd.dir().to_path_buf();
    cd.write_bridge_conflist(BRIDGE, SUBNET)?;

    // The node agent's importer, on the directory `make images` fills (real ctr output parsed)…
    let mut importer = ImageImporter::new(containerd::images_dir(), &cd.endpoint());
    let names = timed("ImageImporter: pause + busybox", async {
        Ok(importer.import_new().await?)
    })
    .await?;
    anyhow::ensure!(
        names == [BUSYBOX_IMAGE, PAUSE_IMAGE],
        "the image directory imported {names:?}"
    );
    let again = importer.import_new().await?;
    anyhow::ensure!(
        again.is_empty(),
        "unchanged tarballs imported again: {again:?}"
    );
    // …and the harness's own import (a re-import of the same tarball is a no-op that still names it).
    let names = timed("import pause", cd.import(&pause_tar)).await?;
    anyhow::ensure!(names == [PAUSE_IMAGE], "pause.tar imported {names:?}");
    let names = timed("import busybox", cd.import(&busybox_tar)).await?;
    anyhow::ensure!(names == [BUSYBOX_IMAGE], "busybox.tar imported {names:?}");

    let cri = cd.runtime().await?;
    for image in [PAUSE_IMAGE, BUSYBOX_IMAGE] {
        anyhow::ensure!(
            cri.image_status(image).await?.is_some(),
            "CRI ImageStatus does not find {image}"
        );
    }
    wait_network_ready(&cri).await?;

    // The pod: a sandbox on the bridge, and one busybox container.
    let uid = format!("e2e-{}", std::process::id());
    let log_dir = dir.join("pods").join(format!("default_hello_{uid}"));
    let config = sandbox_config(&log_dir, &uid);
    let t0 = Instant::now();
    let sandbox = timed("RunPodSandbox", async {
        Ok(cri.run_pod_sandbox(config.clone(), "").await?)
    })
    .await?;
    let container = timed("CreateContainer", async {
        Ok(cri
            .create_container(&sandbox, container_config(), config.clone())
            .await?)
    })
    .await?;
    timed("StartContainer", async {
        Ok(cri.start_container(&container).await?)
    })
    .await?;
    eprintln!(
        "[e2e] sandbox → container running: {:.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );

    let ip = expect_running(&cri, &sandbox, &container).await?;
    eprintln!("[e2e] sandbox {sandbox} has IP {ip}");
    let listed = cri.list_pod_sandbox(None).await?;
    anyhow::ensure!(
        listed
            .iter()
            .any(|s| s.id == sandbox && s.labels.get("io.kubernetes.pod.uid") == Some(&uid)),
        "ListPodSandbox does not show {sandbox} with its labels: {listed:?}"
    );

    // The CRI log: `<time> stdout F hello`.
    let log_file = log_dir.join("c/0.log");
    let line = e2e::poll_until(
        "hello in the container log",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || {
            let log_file = log_file.clone();
            async move {
                let text = std::fs::read_to_string(&log_file).unwrap_or_default();
                Ok(text
                    .lines()
                    .find(|l| l.ends_with(" stdout F hello"))
                    .map(str::to_string))
            }
        },
    )
    .await?;
    eprintln!("[e2e] log line: {line}");

    // Restart containerd under the running pod: nothing may be lost, nothing restarted.
    let sandbox_pid = init_pid(&cd, &sandbox)?;
    let container_pid = init_pid(&cd, &container)?;
    let started_at = cri.container_status(&container).await?.started_at;
    let old_pid = cd.pid();
    timed("containerd restart", cd.restart()).await?;
    anyhow::ensure!(
        cd.pid() != old_pid,
        "containerd PID unchanged after restart"
    );
    let cri = cd.runtime().await?;
    let ip_after = expect_running(&cri, &sandbox, &container).await?;
    anyhow::ensure!(
        ip_after == ip,
        "sandbox IP changed across the restart: {ip} → {ip_after}"
    );
    anyhow::ensure!(
        cri.container_status(&container).await?.started_at == started_at,
        "the container was restarted"
    );
    anyhow::ensure!(
        init_pid(&cd, &sandbox)? == sandbox_pid && init_pid(&cd, &container)? == container_pid,
        "pause or container process replaced across the restart"
    );
    anyhow::ensure!(
        alive(sandbox_pid) && alive(container_pid),
        "pod processes died across the restart"
    );

    // Teardown through CRI, as the node agent will do it. `sh` as PID 1 ignores SIGTERM, so no grace.
    let t0 = Instant::now();
    timed("StopContainer", async {
        Ok(cri.stop_container(&container, Duration::ZERO).await?)
    })
    .await?;
    timed("RemoveContainer", async {
        Ok(cri.remove_container(&container).await?)
    })
    .await?;
    timed("StopPodSandbox", async {
        Ok(cri.stop_pod_sandbox(&sandbox).await?)
    })
    .await?;
    timed("RemovePodSandbox", async {
        Ok(cri.remove_pod_sandbox(&sandbox).await?)
    })
    .await?;
    eprintln!(
        "[e2e] teardown (stop+remove container, stop+remove sandbox): {:.1} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let left = cri.list_pod_sandbox(None).await?;
    anyhow::ensure!(left.is_empty(), "sandboxes left after removal: {left:?}");
    anyhow::ensure!(
        !alive(sandbox_pid) && !alive(container_pid),
        "pod processes survived removal"
    );

    // The harness's own teardown: nothing of ours may remain.
    let containerd_pid = cd.pid();
    drop(cri);
    cd.stop().await?;
    if let Some(pid) = containerd_pid {
        anyhow::ensure!(!alive(pid as i32), "containerd (pid {pid}) still running");
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")?;
    let ours = containerd::mount_points_under(&mounts, &dir);
    anyhow::ensure!(
        ours.is_empty(),
        "mounts left under {}: {ours:?}",
        dir.display()
    );
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        bail!("bridge {BRIDGE} left behind");
    }
    anyhow::ensure!(!dir.exists(), "{} not removed", dir.display());
    Ok(())
}
