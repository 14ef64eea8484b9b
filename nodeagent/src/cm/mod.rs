//! Mirrors kubelet's pkg/kubelet/cm ("container manager"): the node's cgroups, for cgroup v1 with
//! the cgroupfs driver (what the machines kubelab is built on have: Debian 12 with containerd
//! 1.6.20, cgroup v1, and no systemd as PID 1).
//!
//! 1. The pod's QoS class (Guaranteed, Burstable, BestEffort) from its requests and limits: the
//!    `api` crate's [`api::core::v1::helper::qos::compute_pod_qos`], the same function that
//!    writes `status.qosClass` in the API server.
//! 2. [`helpers`]: what the pod cgroup is limited to (`cpu.shares`, CFS quota, memory limit).
//! 3. [`pod_container_manager`]: the cgroups themselves — `/kubepods/{burstable,besteffort}` at
//!    start, `pod<uid>` below the right one in step 1 of SyncPod (its path becomes the sandbox's
//!    `cgroup_parent`), and its removal once the pod's containers are gone.
//!
//! All cgroupfs work is blocking file I/O: async callers use `tokio::task::spawn_blocking`.
//!
//! ## Implementation caveats
//! - cgroup v1 and the cgroupfs driver only (no systemd driver, no cgroup v2).
//! - The `kubepods` cgroup is not sized to node allocatable (no `--kube-reserved`/`--system-reserved`
//!   enforcement), and `kubepods/burstable`'s `cpu.shares` is not kept at the sum of burstable
//!   requests (kubelet's periodic QoS update): both stay at the kernel default.
//! - No pod PID limit (`--pod-max-pids`), no hugetlb limits, no memory QoS (`memory.min`, v2 only),
//!   no in-place resize. Pod-level `spec.resources` count for cpu and memory only.
//! - Processes left in a pod cgroup are not killed: [`PodContainerManager::destroy`] fails (EBUSY,
//!   naming the pids) and the caller retries.

pub(crate) mod helpers;
pub(crate) mod pod_container_manager;

pub(crate) use pod_container_manager::{DEFAULT_CGROUP_ROOT, PodContainerManager};
