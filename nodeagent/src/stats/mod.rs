//! Mirrors kubelet's pkg/kubelet/stats (and the parts of cAdvisor and of server/stats' summary it
//! stands on): what the node and its pods use — filesystem sizes, memory working sets, process
//! counts — read from `statvfs`, cgroupfs and `/proc`.
//!
//! 1. The readers, [`fs`], [`memory`] and [`pidlimit`], are leaves: they import nothing of the
//!    agent, so the eviction manager and the node status both read the node through them without
//!    depending on each other. [`read_node_stats`] puts them together into one [`NodeStats`].
//! 2. The stats provider ([`provider::StatsProvider`], kubelet's `StatsProvider`) adds what needs
//!    the runtime and the pod cgroups: where the image filesystem is, and each pod's
//!    [`PodUsage`] (cgroup working sets, emptyDir and log sizes, writable layers). The eviction
//!    manager is given one and reads everything through it.
//!
//! Everything here is blocking file I/O except the provider, which moves it to `spawn_blocking`.
//!
//! ## Implementation caveats
//! - Memory from cgroup v1 or v2 files ([`memory`] has the table); no PSI and no per-cgroup OOM
//!   counts are read.
//! - No per-pod process counts, no network or CPU usage, no `/stats/summary` endpoint.

pub(crate) mod fs;
pub(crate) mod memory;
pub(crate) mod pidlimit;
pub(crate) mod provider;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use fs::{FsStats, dir_usage, fs_stats};
pub(crate) use memory::MemoryStats;
pub(crate) use pidlimit::RlimitStats;
pub(crate) use provider::StatsProvider;

/// One look at the node (the node part of kubelet's stats summary). A reading that failed is
/// None: the eviction manager then observes nothing for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeStats {
    pub(crate) memory: Option<MemoryStats>,
    /// The filesystem of the agent's root directory.
    pub(crate) nodefs: Option<FsStats>,
    /// The filesystem the runtime keeps image layers on.
    pub(crate) imagefs: Option<FsStats>,
    pub(crate) rlimit: Option<RlimitStats>,
}

/// Where the node's memory usage is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NodeMemory {
    /// cgroup v1: the root cgroup of the memory hierarchy mounted here.
    V1Root(PathBuf),
    /// cgroup v2: `/proc/meminfo` (the v2 root cgroup has no usage file).
    Meminfo,
    /// No memory accounting: no memory figures.
    Unknown,
}

/// Read the node (blocking): memory as `memory` says, the filesystems of `nodefs` and `imagefs`
/// with `statvfs`, PIDs from `pid_max` and `sysinfo`.
pub(crate) fn read_node_stats(memory: &NodeMemory, nodefs: &Path, imagefs: &Path) -> NodeStats {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let memory = match memory {
        NodeMemory::V1Root(root) => memory::memory_stats(
            &read(Path::new("/proc/meminfo")),
            &read(&root.join("memory.usage_in_bytes")),
            &read(&root.join("memory.stat")),
        ),
        NodeMemory::Meminfo => memory::memory_stats_from_meminfo(&read(Path::new("/proc/meminfo"))),
        NodeMemory::Unknown => None,
    };
    let rlimit = match (std::fs::read_to_string("/proc/sys/kernel/pid_max"), pidlimit::running_processes()) {
        (Ok(max), Some(running)) => pidlimit::rlimit_stats(&max, running),
        _ => None,
    };
    NodeStats { memory, nodefs: fs_stats(nodefs), imagefs: fs_stats(imagefs), rlimit }
}

/// What the stats provider measured of one pod (its part of the summary).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodUsage {
    /// The pod cgroup's working set; None when it could not be read.
    pub(crate) memory: Option<i64>,
    /// Container name → working set of the container's cgroup.
    pub(crate) container_memory: BTreeMap<String, i64>,
    /// Container name → bytes of its writable layer plus its logs.
    pub(crate) container_disk: BTreeMap<String, i64>,
    /// Disk-backed emptyDir name → bytes in it.
    pub(crate) volumes: BTreeMap<String, i64>,
    /// Whether the disk figures were measured at all.
    pub(crate) disk_known: bool,
}

impl PodUsage {
    /// Ephemeral storage the pod uses: containers (writable layers and logs) plus local volumes.
    pub(crate) fn ephemeral(&self) -> Option<i64> {
        self.disk_known.then(|| self.container_disk.values().sum::<i64>() + self.volumes.values().sum::<i64>())
    }
}
