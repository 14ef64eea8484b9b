//! Mirrors kubelet's stats/provider.go and cri_stats_provider.go: the node's and each pod's usage,
//! from the readers of [`super`], the pod cgroups and the CRI (`ListContainers`,
//! `ListContainerStats`). The eviction manager is handed one and reads the node through it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use api::pod::uid;
use k8s_openapi::api::core::v1::Pod;

use super::{NodeMemory, NodeStats, PodUsage, dir_usage, memory, read_node_stats};
use crate::cm::PodContainerManager;
use crate::cri::RemoteRuntime;
use crate::images::image_gc_manager::ImageGcManager;

/// The eviction manager is this provider's only reader: its logs keep the eviction target, so
/// `RUST_LOG=kubelet::eviction=debug` shows everything an eviction decision was made from.
const TARGET: &str = "kubelet::eviction";

/// Reads the node and its pods (kubelet's `StatsProvider`). Cheap to clone.
#[derive(Clone)]
pub(crate) struct StatsProvider {
    runtime: RemoteRuntime,
    pcm: PodContainerManager,
    /// The agent's `--root-dir`: the node filesystem, and the pods' emptyDirs below it.
    root_dir: PathBuf,
    /// `--pod-logs-dir`: the containers' logs count as their ephemeral storage.
    logs_root: PathBuf,
    /// Knows the image filesystem (the runtime's `ImageFsInfo`).
    image_gc: Arc<ImageGcManager>,
}

impl StatsProvider {
    pub(crate) fn new(
        runtime: RemoteRuntime,
        pcm: PodContainerManager,
        root_dir: PathBuf,
        logs_root: PathBuf,
        image_gc: Arc<ImageGcManager>,
    ) -> StatsProvider {
        StatsProvider { runtime, pcm, root_dir, logs_root, image_gc }
    }

    /// Where the node's memory is read: the v1 memory hierarchy's root cgroup, or on v2
    /// `/proc/meminfo`.
    fn node_memory(&self) -> NodeMemory {
        let cgroups = self.pcm.cgroups();
        match cgroups.version() {
            crate::cm::CgroupVersion::V2 => NodeMemory::Meminfo,
            crate::cm::CgroupVersion::V1 => cgroups
                .hierarchies()
                .iter()
                .find(|h| !h.unified && h.has("memory"))
                .map_or(NodeMemory::Unknown, |h| NodeMemory::V1Root(h.path.clone())),
        }
    }

    /// The node's memory, filesystems (the root directory's and the image filesystem) and PIDs.
    pub(crate) async fn node_stats(&self) -> NodeStats {
        let imagefs = self.image_gc.image_fs_dir().await;
        let (memory, nodefs) = (self.node_memory(), self.root_dir.clone());
        tokio::task::spawn_blocking(move || read_node_stats(&memory, &nodefs, &imagefs)).await.unwrap_or_default()
    }

    /// What each pod uses, by UID (the pods part of the summary): cgroup working sets, emptyDir
    /// and log sizes, and writable layers as CRI's ContainerStats reports them.
    pub(crate) async fn pod_stats(&self, pods: &[Arc<Pod>]) -> HashMap<String, PodUsage> {
        let rt = &self.runtime;
        let running: Vec<(String, String, String)> = rt
            .list_containers(None)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.state == k8s_cri::v1::ContainerState::ContainerRunning as i32)
            .filter_map(|c| {
                let uid = c.labels.get(crate::container::POD_UID_LABEL)?.clone();
                let name = c.labels.get(crate::container::CONTAINER_NAME_LABEL)?.clone();
                Some((uid, name, c.id))
            })
            .collect();
        let layers: HashMap<String, i64> = match rt.list_container_stats().await {
            Ok(s) => s
                .into_iter()
                .filter_map(|s| {
                    let id = s.attributes.as_ref()?.id.clone();
                    let used = s.writable_layer.as_ref()?.used_bytes.as_ref()?.value;
                    Some((id, i64::try_from(used).unwrap_or(i64::MAX)))
                })
                .collect(),
            Err(e) => {
                tracing::debug!(target: TARGET, error = %e, "ListContainerStats failed; writable layers not counted");
                HashMap::new()
            }
        };
        let pcm = self.pcm.clone();
        let root = self.root_dir.clone();
        let logs_root = self.logs_root.clone();
        let pods = pods.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut out = HashMap::new();
            for pod in pods {
                let uid = uid(&pod).to_string();
                let mine: Vec<&(String, String, String)> = running.iter().filter(|(u, _, _)| *u == uid).collect();
                let mut u = PodUsage { disk_known: true, ..Default::default() };
                if let Some(dir) = pcm.pod_memory_dir(&pod) {
                    u.memory = memory::cgroup_working_set(&dir);
                    for (_, name, id) in &mine {
                        if let Some(ws) = memory::cgroup_working_set(&dir.join(pcm.cgroups().container_dir_name(id))) {
                            *u.container_memory.entry(name.clone()).or_default() += ws;
                        }
                    }
                }
                let spec = pod.spec.as_ref();
                for v in spec.and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
                    if let Some(ed) = &v.empty_dir
                        && ed.medium.as_deref().is_none_or(str::is_empty)
                    {
                        let dir = crate::kubelet::getters::pod_volume_dir(&root, &uid, crate::volumemanager::emptydir::PLUGIN_NAME, &v.name);
                        u.volumes.insert(v.name.clone(), dir_usage(&dir));
                    }
                }
                let log_dir = crate::kuberuntime::kuberuntime_sandbox::pod_log_dir(&logs_root, &pod);
                for c in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
                    let layer: i64 = mine.iter().filter(|(_, n, _)| *n == c.name).filter_map(|(_, _, id)| layers.get(id)).sum();
                    u.container_disk.insert(c.name.clone(), layer + dir_usage(&log_dir.join(&c.name)));
                }
                out.insert(uid, u);
            }
            out
        })
        .await
        .unwrap_or_default()
    }
}
