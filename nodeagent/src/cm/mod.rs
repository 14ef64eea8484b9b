//! Mirrors kubelet's pkg/kubelet/cm ("container manager"): the node's cgroups, on cgroup v1 or v2,
//! with the cgroupfs or the systemd driver (docs/architecture/nodeagent.md shows one pod's cgroup
//! under each).
//!
//! 1. The pod's QoS class (Guaranteed, Burstable, BestEffort) from its requests and limits: the
//!    `api` crate's [`api::core::v1::helper::qos::compute_pod_qos`], the same function that
//!    writes `status.qosClass` in the API server.
//! 2. [`helpers`]: what the pod cgroup is limited to (CPU shares, CFS quota, memory limit, PID
//!    limit), in v1 units, whatever the host.
//! 3. [`cgroup_manager`]: which hierarchy the host mounts and which driver makes cgroups
//!    ([`CgroupDriver::detect`]: systemd where systemd booted a v2 host, else cgroupfs), and the
//!    one interface over the three ways to make a cgroup: [`cgroup_v1`] (a directory in every
//!    controller's tree), [`cgroup_v2`] (one tree, controllers enabled in
//!    `cgroup.subtree_control`, v2 units), [`systemd`] (a slice unit started over D-Bus).
//!    [`files`] reads and writes control files for the first two.
//! 4. [`pod_container_manager`]: the cgroups themselves — `kubepods` and its QoS cgroups at
//!    start, `pod<uid>` below the right one in step 1 of SyncPod (its name in the driver's
//!    spelling becomes the sandbox's `cgroup_parent`), and its removal once the pod's containers
//!    are gone.
//!
//! All of it is blocking I/O (files, D-Bus): async callers use `tokio::task::spawn_blocking`.
//! Public: [`CgroupDriver`] (`--cgroup-driver`; containerd's `SystemdCgroup` must match),
//! [`CgroupVersion`], [`cgroup_version`] and [`check_host`] (`kubelab up` checks before starting).
//!
//! ## Implementation caveats
//! - The systemd driver is supported on cgroup v2 hosts only (kubelet also drives systemd on v1).
//! - The `kubepods` cgroup is not sized to node allocatable (no `--kube-reserved`/`--system-reserved`
//!   enforcement), and `kubepods/burstable`'s CPU weight is not kept at the sum of burstable
//!   requests (kubelet's periodic QoS update): both stay at the default.
//! - No hugetlb limits, no memory QoS (`memory.min`/`memory.high`, a kubelet alpha feature), no
//!   in-place resize. Pod-level `spec.resources` count for cpu and memory only.
//! - Processes left in a pod cgroup are not killed: [`PodContainerManager::destroy`] fails (EBUSY,
//!   naming the pids) and the caller retries.

pub(crate) mod cgroup_manager;
pub(crate) mod cgroup_v1;
pub(crate) mod cgroup_v2;
pub(crate) mod files;
pub(crate) mod helpers;
pub(crate) mod pod_container_manager;
pub(crate) mod systemd;

pub use cgroup_manager::{CgroupDriver, CgroupVersion, cgroup_version};

/// Whether the node agent can manage this host's cgroups with `driver` (what it checks first at
/// start): the hierarchy it found, or the error naming the fix. Blocking.
pub fn check_host(driver: CgroupDriver) -> crate::Result<CgroupVersion> {
    Ok(CgroupManager::new(driver, std::path::Path::new(DEFAULT_CGROUP_MOUNT))?.version())
}
pub(crate) use cgroup_manager::{CgroupManager, DEFAULT_CGROUP_MOUNT};
pub(crate) use pod_container_manager::PodContainerManager;
