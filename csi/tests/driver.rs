//! The driver and the registrar over their real unix sockets, driven with the generated tonic
//! clients as the node agent and the sidecars call them: a volume created, attached, staged and
//! published by bind mounts (the test runs as root), written through, torn down and deleted;
//! the registrar's GetInfo; the state surviving a restart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proto::csi::v1 as csi;
use proto::csi::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
use proto::pluginregistration as reg;
use tonic::Code;

use ::csi as csi_crate;

/// Unmounts whatever the test left mounted, even when an assertion failed half-way.
struct Unmount(Vec<PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = csi_crate::mount::unmount_all(p);
        }
    }
}

fn cap(mode: Mode) -> Option<csi::VolumeCapability> {
    Some(csi::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume { fs_type: "ext4".into(), ..Default::default() })),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    })
}

struct Driver {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<csi_crate::Result<()>>,
    channel: tonic::transport::Channel,
}

async fn start(opts: csi_crate::Options) -> Driver {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let endpoint = opts.endpoint.clone();
    let task = tokio::spawn(csi_crate::run(opts, async move {
        let _ = stopped.await;
    }));
    // Wait for the socket (the driver binds it first thing).
    for _ in 0..100 {
        if tokio::net::UnixStream::connect(&endpoint).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Driver { stop, task, channel: csi_crate::connection::connect(&endpoint) }
}

impl Driver {
    async fn stop(self) {
        let _ = self.stop.send(());
        let r = tokio::time::timeout(Duration::from_secs(10), self.task).await.expect("driver stops").expect("driver task");
        r.expect("driver ran cleanly");
    }
}

fn options(dir: &Path) -> csi_crate::Options {
    csi_crate::Options {
        endpoint: dir.join("kubelet/plugins").join(csi_crate::DRIVER_NAME).join("csi.sock"),
        kubelet_root_dir: dir.join("kubelet"),
        state_dir: dir.join("state"),
        max_volumes_per_node: 7,
        ..csi_crate::Options::new("node-1")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_lifecycle_over_the_sockets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let staging = dir.path().join("kubelet/plugins/kubernetes.io/csi/hostpath.csi.kubelab.io/abc/globalmount");
    let target = dir.path().join("kubelet/pods/uid-1/volumes/kubernetes.io~csi/pvc-1/mount");
    let target_ro = dir.path().join("kubelet/pods/uid-2/volumes/kubernetes.io~csi/pvc-1/mount");
    let _cleanup = Unmount(vec![target.clone(), target_ro.clone(), staging.clone()]);

    let driver = start(options(dir.path())).await;
    let mut identity = csi::identity_client::IdentityClient::new(driver.channel.clone());
    let mut controller = csi::controller_client::ControllerClient::new(driver.channel.clone());
    let mut node = csi::node_client::NodeClient::new(driver.channel.clone());

    // Identity.
    let info = identity.get_plugin_info(csi::GetPluginInfoRequest {}).await.expect("GetPluginInfo").into_inner();
    assert_eq!(info.name, "hostpath.csi.kubelab.io");
    assert!(!info.vendor_version.is_empty());
    let probe = identity.probe(csi::ProbeRequest {}).await.expect("Probe").into_inner();
    assert_eq!(probe.ready, Some(true));
    let caps = identity.get_plugin_capabilities(csi::GetPluginCapabilitiesRequest {}).await.expect("caps").into_inner();
    assert_eq!(caps.capabilities.len(), 2);

    // NodeGetInfo: the node, its limit, its topology.
    let ni = node.node_get_info(csi::NodeGetInfoRequest {}).await.expect("NodeGetInfo").into_inner();
    assert_eq!((ni.node_id.as_str(), ni.max_volumes_per_node), ("node-1", 7));
    assert_eq!(ni.accessible_topology.expect("topology").segments.get(csi_crate::TOPOLOGY_KEY).map(String::as_str), Some("node-1"));

    // CreateVolume, twice with the same name: one volume.
    let create = |required: i64| csi::CreateVolumeRequest {
        name: "pvc-1".into(),
        capacity_range: Some(csi::CapacityRange { required_bytes: required, limit_bytes: 0 }),
        volume_capabilities: vec![cap(Mode::SingleNodeWriter).expect("cap")],
        accessibility_requirements: Some(csi::TopologyRequirement {
            requisite: vec![csi_crate::hostpath::node_topology("node-1")],
            preferred: vec![],
        }),
        ..Default::default()
    };
    let v1 = controller.create_volume(create(1 << 20)).await.expect("CreateVolume").into_inner().volume.expect("volume");
    let v2 = controller.create_volume(create(1 << 20)).await.expect("CreateVolume again").into_inner().volume.expect("volume");
    assert_eq!(v1.volume_id, v2.volume_id, "CreateVolume is idempotent by name");
    assert_eq!(v1.capacity_bytes, 1 << 20);
    let id = v1.volume_id.clone();
    let vol_dir = dir.path().join("state/volumes").join(&id);
    assert!(vol_dir.is_dir(), "the volume is a directory");
    let err = controller.create_volume(create(1 << 30)).await.expect_err("bigger, same name");
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    let mut elsewhere = create(1 << 20);
    elsewhere.name = "pvc-elsewhere".into();
    elsewhere.accessibility_requirements = Some(csi::TopologyRequirement { requisite: vec![csi_crate::hostpath::node_topology("node-2")], preferred: vec![] });
    assert_eq!(controller.create_volume(elsewhere).await.expect_err("other node").code(), Code::ResourceExhausted);

    // The spec's codes for bad requests.
    let err = controller.delete_volume(csi::DeleteVolumeRequest::default()).await.expect_err("no id");
    assert_eq!(err.code(), Code::InvalidArgument);
    let stage = |volume_id: &str| csi::NodeStageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.to_string_lossy().into_owned(),
        volume_capability: cap(Mode::SingleNodeWriter),
        ..Default::default()
    };
    assert_eq!(node.node_stage_volume(stage("nope")).await.expect_err("unknown").code(), Code::NotFound);
    assert_eq!(node.node_stage_volume(stage(&id)).await.expect_err("not attached").code(), Code::FailedPrecondition);

    // ControllerPublishVolume: this node only.
    let publish = |node_id: &str| csi::ControllerPublishVolumeRequest {
        volume_id: id.clone(),
        node_id: node_id.into(),
        volume_capability: cap(Mode::SingleNodeWriter),
        ..Default::default()
    };
    assert_eq!(controller.controller_publish_volume(publish("node-2")).await.expect_err("other node").code(), Code::NotFound);
    controller.controller_publish_volume(publish("node-1")).await.expect("ControllerPublishVolume");
    controller.controller_publish_volume(publish("node-1")).await.expect("ControllerPublishVolume again");

    // NodeStageVolume: a bind mount of the directory; twice is once.
    node.node_stage_volume(stage(&id)).await.expect("NodeStageVolume");
    node.node_stage_volume(stage(&id)).await.expect("NodeStageVolume again");
    assert!(csi_crate::mount::is_mount_point(&staging).expect("mountinfo"), "staged by a bind mount");

    // NodePublishVolume, read-write and read-only.
    let publish_node = |target: &Path, readonly: bool| csi::NodePublishVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.to_string_lossy().into_owned(),
        target_path: target.to_string_lossy().into_owned(),
        volume_capability: cap(Mode::SingleNodeWriter),
        readonly,
        ..Default::default()
    };
    node.node_publish_volume(publish_node(&target, false)).await.expect("NodePublishVolume");
    node.node_publish_volume(publish_node(&target, false)).await.expect("NodePublishVolume again");
    assert_eq!(node.node_publish_volume(publish_node(&target, true)).await.expect_err("same target, now read-only").code(), Code::AlreadyExists);
    std::fs::write(target.join("hello.txt"), b"written through the pod's mount").expect("write through the target");
    assert_eq!(std::fs::read(vol_dir.join("hello.txt")).expect("in the volume directory"), b"written through the pod's mount");

    node.node_publish_volume(publish_node(&target_ro, true)).await.expect("NodePublishVolume read-only");
    assert_eq!(std::fs::read(target_ro.join("hello.txt")).expect("readable"), b"written through the pod's mount");
    let err = std::fs::write(target_ro.join("nope.txt"), b"x").expect_err("a read-only mount");
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");

    // NodeGetVolumeStats.
    let stats = node
        .node_get_volume_stats(csi::NodeGetVolumeStatsRequest { volume_id: id.clone(), volume_path: target.to_string_lossy().into_owned(), ..Default::default() })
        .await
        .expect("NodeGetVolumeStats")
        .into_inner();
    assert_eq!(stats.usage.len(), 2);
    assert!(stats.usage.iter().all(|u| u.total > 0));

    // In use: not deleted.
    let delete = || csi::DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() };
    assert_eq!(controller.delete_volume(delete()).await.expect_err("in use").code(), Code::FailedPrecondition);

    // Teardown, each step twice.
    for t in [&target, &target_ro] {
        let req = || csi::NodeUnpublishVolumeRequest { volume_id: id.clone(), target_path: t.to_string_lossy().into_owned() };
        node.node_unpublish_volume(req()).await.expect("NodeUnpublishVolume");
        node.node_unpublish_volume(req()).await.expect("NodeUnpublishVolume again");
        assert!(!t.exists(), "the target directory is removed");
    }
    let unstage = || csi::NodeUnstageVolumeRequest { volume_id: id.clone(), staging_target_path: staging.to_string_lossy().into_owned() };
    node.node_unstage_volume(unstage()).await.expect("NodeUnstageVolume");
    node.node_unstage_volume(unstage()).await.expect("NodeUnstageVolume again");
    assert!(!csi_crate::mount::is_mount_point(&staging).expect("mountinfo"), "unstaged");
    let unpublish = || csi::ControllerUnpublishVolumeRequest { volume_id: id.clone(), node_id: "node-1".into(), ..Default::default() };
    controller.controller_unpublish_volume(unpublish()).await.expect("ControllerUnpublishVolume");
    controller.controller_unpublish_volume(unpublish()).await.expect("ControllerUnpublishVolume again");
    controller.delete_volume(delete()).await.expect("DeleteVolume");
    controller.delete_volume(delete()).await.expect("DeleteVolume again");
    assert!(!vol_dir.exists(), "the directory is gone");

    // The registrar, on its socket in plugins_registry.
    let reg_socket = dir.path().join("kubelet/plugins_registry/hostpath.csi.kubelab.io-reg.sock");
    let mut registration = reg::registration_client::RegistrationClient::new(csi_crate::connection::connect(&reg_socket));
    let pi = registration.get_info(reg::InfoRequest {}).await.expect("GetInfo").into_inner();
    assert_eq!(pi.r#type, "CSIPlugin");
    assert_eq!(pi.name, "hostpath.csi.kubelab.io");
    assert_eq!(PathBuf::from(&pi.endpoint), dir.path().join("kubelet/plugins/hostpath.csi.kubelab.io/csi.sock"));
    assert_eq!(pi.supported_versions, vec!["1.0.0".to_string()]);
    registration
        .notify_registration_status(reg::RegistrationStatus { plugin_registered: true, error: String::new() })
        .await
        .expect("NotifyRegistrationStatus");

    // A volume kept across a restart.
    let mut keep = create(1 << 20);
    keep.name = "pvc-keep".into();
    let kept = controller.create_volume(keep.clone()).await.expect("CreateVolume").into_inner().volume.expect("volume");
    driver.stop().await;
    assert!(!reg_socket.exists(), "the registration socket is removed at exit");
    let driver = start(options(dir.path())).await;
    let mut controller = csi::controller_client::ControllerClient::new(driver.channel.clone());
    let again = controller.create_volume(keep).await.expect("CreateVolume after restart").into_inner().volume.expect("volume");
    assert_eq!(again.volume_id, kept.volume_id, "the state file kept the volume");
    driver.stop().await;
}
