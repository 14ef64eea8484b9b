//! Mirrors runc's libcontainer/cgroups/fs2 (the cgroup v2 "fs2" manager kubelet's cgroupfs driver
//! uses on a v2 host): one tree, every controller in it, and a controller usable in a cgroup only
//! once its parent lists it in `cgroup.subtree_control`.
//!
//! ```text
//! /sys/fs/cgroup/cgroup.subtree_control                    +cpu +memory +pids …
//! /sys/fs/cgroup/kubepods/cgroup.subtree_control           +cpu +memory +pids …
//! /sys/fs/cgroup/kubepods/burstable/pod<uid>/cpu.weight, cpu.max, memory.max, pids.max
//! ```
//!
//! v2 speaks other units than v1: a CPU weight (1–10000, default 100) instead of shares (2–262144,
//! default 1024), `cpu.max` = "<quota> <period>" instead of two files, `memory.max` and `max` for
//! "no limit". [`cpu_shares_to_weight`] is the conversion runc and kubelet use, so a pod gets the
//! same share of a contended CPU on either hierarchy.

use std::path::Path;

use super::files::{mkdir, read_trimmed, write_if_changed};
use super::helpers::ResourceConfig;
use crate::error::{Error, Result};

/// The controllers enabled for the pods' cgroups, as runc enables every one the parent has.
/// cpu, memory and pids carry the pod limits; the others are enabled so containers can use them.
const CONTROLLERS: [&str; 6] = ["cpu", "cpuset", "io", "memory", "pids", "hugetlb"];
/// Without these the node agent cannot limit a pod.
pub(crate) const REQUIRED_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// runc's ConvertCPUSharesToCgroupV2Value: shares 2…262144 mapped linearly onto weights 1…10000
/// (1024 shares, one CPU, is weight 39). 0 means "not set".
pub(crate) fn cpu_shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.saturating_sub(2) * 9999) / 262_142
}

/// `cpu.max`: "<quota> <period>" in microseconds, `max` when the quota is not positive.
pub(crate) fn cpu_max(quota: i64, period: u64) -> String {
    if quota > 0 { format!("{quota} {period}") } else { format!("max {period}") }
}

/// The controllers a cgroup offers its children (`cgroup.controllers`).
pub(crate) fn available_controllers(dir: &Path) -> Result<Vec<String>> {
    Ok(read_trimmed(&dir.join("cgroup.controllers"))?.split_whitespace().map(str::to_string).collect())
}

/// Lets the children of `dir` use [`CONTROLLERS`]: each one `dir` has and has not enabled yet is
/// written to its `cgroup.subtree_control`. Only a missing required controller is an error; its
/// message names the usual cause.
fn enable_controllers(dir: &Path) -> Result<()> {
    let available = available_controllers(dir)?;
    let enabled = read_trimmed(&dir.join("cgroup.subtree_control"))?;
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    for c in CONTROLLERS {
        if enabled.contains(&c) {
            continue;
        }
        if !available.iter().any(|a| a == c) {
            if REQUIRED_CONTROLLERS.contains(&c) {
                return Err(Error::UnsupportedHost(format!(
                    "the cgroup {} does not offer the {c} controller (cgroup.controllers: {:?}): it was not delegated to this cgroup. Run the node agent from a root shell, or as a systemd service with Delegate=yes (kubelab up --install-service writes one)",
                    dir.display(),
                    available.join(" ")
                )));
            }
            continue;
        }
        let file = dir.join("cgroup.subtree_control");
        if let Err(e) = std::fs::write(&file, format!("+{c}")) {
            if !REQUIRED_CONTROLLERS.contains(&c) {
                continue;
            }
            if e.raw_os_error() == Some(libc::EBUSY) {
                return Err(Error::UnsupportedHost(format!(
                    "cannot enable the {c} controller in {}: that cgroup holds processes of its own, and cgroup v2 enables controllers only for children of a cgroup without processes (\"no internal processes\"). Move them into a child cgroup first (the lab's node entrypoint moves its processes to /init), or use --cgroup-driver=systemd on a systemd host",
                    file.display()
                )));
            }
            return Err(Error::io(&file, e));
        }
    }
    Ok(())
}

/// Creates `relative` below the v2 mount point `root`, level by level, enabling the controllers in
/// each parent on the way down (runc's CreateCgroupPath).
pub(crate) fn make_cgroup(root: &Path, relative: &Path) -> Result<()> {
    let mut dir = root.to_path_buf();
    for component in relative.components() {
        enable_controllers(&dir)?;
        dir.push(component);
        mkdir(&dir)?;
    }
    Ok(())
}

/// The page size the kernel rounds a memory limit down to (x86-64 and arm64 Debian kernels).
const PAGE_SIZE: i64 = 4096;

/// The v2 files `config` sets — `cpu.weight`, `cpu.max`, `memory.max`, `pids.max` — each with the
/// value the file reads back once set (the kernel keeps a memory limit rounded down to a page). A
/// value left unset is absent: the kernel's default stays (weight 100, no limits). [`apply`]
/// writes these; the systemd driver compares them with what systemd left in a slice's directory.
pub(crate) fn files(config: &ResourceConfig) -> Vec<(&'static str, String)> {
    let mut files = Vec::new();
    if let Some(shares) = config.cpu_shares {
        files.push(("cpu.weight", cpu_shares_to_weight(shares).to_string()));
    }
    if let Some(quota) = config.cpu_quota {
        let period = config.cpu_period.unwrap_or(super::helpers::QUOTA_PERIOD);
        files.push(("cpu.max", cpu_max(quota, period)));
    }
    if let Some(limit) = config.memory_limit {
        files.push(("memory.max", (limit - limit % PAGE_SIZE).to_string()));
    }
    if let Some(max) = config.pids_limit {
        files.push(("pids.max", max.to_string()));
    }
    files
}

/// Writes `config` into the cgroup `dir` ([`files`]); a file already holding its value is not
/// written again.
pub(crate) fn apply(dir: &Path, config: &ResourceConfig) -> Result<()> {
    for (file, value) in files(config) {
        write_if_changed(&dir.join(file), &value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_as_runc_converts_shares() {
        for (shares, weight) in [(0, 0), (2, 1), (102, 4), (512, 20), (1024, 39), (2048, 79), (262_144, 10_000)] {
            assert_eq!(cpu_shares_to_weight(shares), weight, "{shares} shares");
        }
        assert_eq!(cpu_max(50_000, 100_000), "50000 100000");
        assert_eq!(cpu_max(0, 100_000), "max 100000");
    }

    #[test]
    fn files_hold_what_the_kernel_reads_back() {
        let config = ResourceConfig {
            cpu_shares: Some(102),
            cpu_quota: Some(50_000),
            cpu_period: None,
            memory_limit: Some(64 * 1024 * 1024 + 100),
            pids_limit: Some(1024),
        };
        let got = files(&config);
        let want = [("cpu.weight", "4"), ("cpu.max", "50000 100000"), ("memory.max", "67108864"), ("pids.max", "1024")];
        assert_eq!(got.iter().map(|(f, v)| (*f, v.as_str())).collect::<Vec<_>>(), want);
        assert!(files(&ResourceConfig::default()).is_empty());
    }
}
