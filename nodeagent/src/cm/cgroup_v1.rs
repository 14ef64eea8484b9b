//! Mirrors runc's libcontainer/cgroups/fs (the cgroup v1 "fs" manager kubelet's cgroupfs driver
//! uses on a v1 host): one tree per controller, the same cgroup made in each.
//!
//! ```text
//! /sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod<uid>/cpu.shares, cpu.cfs_quota_us, …
//! /sys/fs/cgroup/memory/kubepods/burstable/pod<uid>/memory.limit_in_bytes, …
//! /sys/fs/cgroup/pids/kubepods/burstable/pod<uid>/pids.max
//! ```

use std::path::{Path, PathBuf};

use super::files::{mkdir, read_trimmed, write_if_changed};
use super::helpers::ResourceConfig;
use crate::error::Result;
use crate::volumemanager::mount::MountInfo;

/// One mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// Its mount point, e.g. `/sys/fs/cgroup/memory`.
    pub(crate) path: PathBuf,
    /// The controllers attached to it (`cpu`, `cpuacct`, …; `name=systemd` for a named hierarchy).
    pub(crate) controllers: Vec<String>,
    /// The cgroup v2 tree of a hybrid setup (`/sys/fs/cgroup/unified`). The agent never creates
    /// cgroups there, but removing a pod cgroup removes what it finds in it.
    pub(crate) unified: bool,
}

impl Hierarchy {
    /// A v1 hierarchy (tests build their own layouts with this).
    #[cfg(test)]
    pub(crate) fn v1(path: impl Into<PathBuf>, controllers: &[&str]) -> Hierarchy {
        Hierarchy {
            path: path.into(),
            controllers: controllers.iter().map(|c| c.to_string()).collect(),
            unified: false,
        }
    }

    pub(crate) fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// The cgroup hierarchies mounted directly below `cgroup_root`, from the mount table. Super options
/// that are not controllers (`rw`, `clone_children`, …) are dropped.
pub(crate) fn detect_hierarchies(cgroup_root: &Path, mounts: &[MountInfo]) -> Vec<Hierarchy> {
    const NOT_CONTROLLERS: [&str; 6] = ["rw", "ro", "noprefix", "clone_children", "xattr", "cpuset_v2_mode"];
    let mut found: Vec<Hierarchy> = mounts
        .iter()
        .filter(|m| m.mount_point.parent() == Some(cgroup_root))
        .filter_map(|m| match m.fs_type.as_str() {
            "cgroup" => Some(Hierarchy {
                path: m.mount_point.clone(),
                controllers: m
                    .super_options
                    .split(',')
                    .filter(|o| !NOT_CONTROLLERS.contains(o) && !o.starts_with("release_agent="))
                    .map(str::to_string)
                    .collect(),
                unified: false,
            }),
            "cgroup2" => Some(Hierarchy { path: m.mount_point.clone(), controllers: Vec::new(), unified: true }),
            _ => None,
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| a.path == b.path);
    found
}

/// Creates `relative` and its missing ancestors in hierarchy `h`. In the cpuset hierarchy a new
/// cgroup starts with empty `cpuset.cpus`/`cpuset.mems`, and a process cannot join a cgroup with no
/// CPUs or memory nodes: copy them from the parent, level by level, as runc does.
pub(crate) fn make_cgroup(h: &Hierarchy, relative: &Path) -> Result<()> {
    let mut dir = h.path.clone();
    for component in relative.components() {
        dir.push(component);
        mkdir(&dir)?;
        if h.has("cpuset") {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let own = dir.join(file);
                if read_trimmed(&own)?.is_empty()
                    && let Some(parent) = dir.parent()
                {
                    let inherited = read_trimmed(&parent.join(file))?;
                    write_if_changed(&own, &inherited)?;
                }
            }
        }
    }
    Ok(())
}

/// Writes `config` into the cgroup at `relative` of hierarchy `h`, in v1 units: `cpu.shares`,
/// `cpu.cfs_period_us` then `cpu.cfs_quota_us` (the kernel checks a quota against the period),
/// `memory.limit_in_bytes`, `pids.max`. A value left unset keeps the kernel's default.
pub(crate) fn apply(h: &Hierarchy, relative: &Path, config: &ResourceConfig) -> Result<()> {
    let dir = h.path.join(relative);
    if h.has("cpu") {
        if let Some(shares) = config.cpu_shares {
            write_if_changed(&dir.join("cpu.shares"), &shares.to_string())?;
        }
        if let Some(period) = config.cpu_period {
            write_if_changed(&dir.join("cpu.cfs_period_us"), &period.to_string())?;
        }
        if let Some(quota) = config.cpu_quota {
            write_if_changed(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
        }
    }
    if h.has("memory")
        && let Some(limit) = config.memory_limit
    {
        write_if_changed(&dir.join("memory.limit_in_bytes"), &limit.to_string())?;
    }
    if h.has("pids")
        && let Some(max) = config.pids_limit
    {
        write_if_changed(&dir.join("pids.max"), &max.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volumemanager::mount;

    #[test]
    fn detects_hierarchies_from_mountinfo() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset,clone_children
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/x,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /elsewhere/memory rw - cgroup cgroup rw,memory
";
        let found = detect_hierarchies(Path::new("/sys/fs/cgroup"), &mount::parse_mountinfo(text));
        let summary: Vec<(String, Vec<String>, bool)> =
            found.iter().map(|h| (h.path.display().to_string(), h.controllers.clone(), h.unified)).collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            vec![
                ("/sys/fs/cgroup/cpu,cpuacct".into(), s(&["cpu", "cpuacct"]), false),
                ("/sys/fs/cgroup/cpuset".into(), s(&["cpuset"]), false),
                ("/sys/fs/cgroup/memory".into(), s(&["memory"]), false),
                ("/sys/fs/cgroup/systemd".into(), s(&["name=systemd"]), false),
                ("/sys/fs/cgroup/unified".into(), vec![], true),
            ]
        );
    }
}
