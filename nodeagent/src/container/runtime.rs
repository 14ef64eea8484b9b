//! Mirrors kubelet's container/runtime.go and pleg types: what the runtime reports about a pod.
//!
//! The CRI speaks in sandboxes and containers labelled with the pod's UID, name and namespace;
//! these types gather them back into pods.

use chrono::{DateTime, Utc};

/// Labels the node agent puts on every sandbox and container it creates (kubelet's
/// kuberuntime/labels.go), so that after a restart it can tell which pod each belongs to.
pub(crate) const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub(crate) const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub(crate) const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
pub(crate) const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
/// Annotations on containers: what the agent needs to rebuild a status (kubelet keeps the same).
pub(crate) const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
pub(crate) const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
pub(crate) const POD_DELETION_GRACE_PERIOD_ANNOTATION: &str = "io.kubernetes.pod.terminationGracePeriod";

/// A container's state as the runtime reports it (kubecontainer.State).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

/// One container as the runtime sees it (kubecontainer.Status).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ContainerStatus {
    /// The CRI container ID.
    pub(crate) id: String,
    /// The container's name in the pod spec.
    pub(crate) name: String,
    pub(crate) state: ContainerState,
    pub(crate) created_at: Option<DateTime<Utc>>,
    pub(crate) started_at: Option<DateTime<Utc>>,
    pub(crate) finished_at: Option<DateTime<Utc>>,
    pub(crate) exit_code: i32,
    /// The image as the spec named it, and the image's ID (`sha256:…`).
    pub(crate) image: String,
    pub(crate) image_ref: String,
    /// The CRI attempt number, which is the container's restart count.
    pub(crate) restart_count: i32,
    /// "Completed", "Error", "OOMKilled", … for an exited container.
    pub(crate) reason: String,
    pub(crate) message: String,
    /// The hash of the container's spec it was created from (restart when the spec changes).
    pub(crate) hash: u64,
}

/// A sandbox as the runtime sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SandboxStatus {
    pub(crate) id: String,
    pub(crate) ready: bool,
    pub(crate) created_at: Option<DateTime<Utc>>,
    /// The CRI attempt number (a new sandbox for the same pod bumps it).
    pub(crate) attempt: u32,
    /// The pod IPs CNI gave the sandbox (empty for host-network pods).
    pub(crate) ips: Vec<String>,
    pub(crate) host_network: bool,
}

/// Everything the runtime knows about one pod (kubecontainer.PodStatus): sandboxes and
/// containers, newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct PodStatus {
    pub(crate) uid: String,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) ips: Vec<String>,
    pub(crate) sandboxes: Vec<SandboxStatus>,
    pub(crate) containers: Vec<ContainerStatus>,
}

impl PodStatus {
    /// The newest status of the container named `name` (kubelet's FindContainerStatusByName).
    pub(crate) fn find_container(&self, name: &str) -> Option<&ContainerStatus> {
        self.containers
            .iter()
            .filter(|c| c.name == name)
            .max_by_key(|c| (c.created_at, c.restart_count))
    }

    /// Every status of the container named `name`, newest first.
    pub(crate) fn containers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a ContainerStatus> {
        let mut v: Vec<&ContainerStatus> = self.containers.iter().filter(|c| c.name == name).collect();
        v.sort_by_key(|c| std::cmp::Reverse((c.created_at, c.restart_count)));
        v.into_iter()
    }

    pub(crate) fn running_containers(&self) -> impl Iterator<Item = &ContainerStatus> {
        self.containers.iter().filter(|c| c.state == ContainerState::Running)
    }
}

/// What PLEG saw change (pleg.PodLifecycleEventType).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PodLifecycleEventType {
    ContainerStarted,
    ContainerDied,
    ContainerRemoved,
    /// The sandbox changed (created, stopped, removed): the pod needs a sync.
    PodSync,
    ContainerChanged,
}

/// One PLEG event: pod UID, what happened, and the container ID it happened to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PodLifecycleEvent {
    pub(crate) id: String,
    pub(crate) kind: PodLifecycleEventType,
    pub(crate) data: String,
}
