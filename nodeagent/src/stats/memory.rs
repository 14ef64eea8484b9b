//! Mirrors the memory part of cAdvisor's machine info and cgroup stats that kubelet's stats read:
//! the machine's memory (`MemTotal` in `/proc/meminfo`) and the working set of a cgroup v1 memory
//! cgroup, which is what kubelet counts as "in use" (usage minus the page cache the kernel can
//! drop at once).

use std::path::Path;

/// The machine's memory and what its root memory cgroup uses, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemoryStats {
    /// MemTotal.
    pub(crate) capacity: i64,
    /// The root memory cgroup's working set.
    pub(crate) working_set: i64,
}

/// MemTotal from /proc/meminfo, in KiB.
pub(crate) fn parse_meminfo_total(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let mut parts = rest.split_whitespace();
        let n: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") | None => Some(n),
            Some(_) => None,
        }
    })
}

/// A value from a cgroup v1 `memory.stat` (e.g. `total_inactive_file`).
pub(crate) fn parse_memory_stat(stat: &str, key: &str) -> Option<i64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The working set as the kubelet computes it on cgroup v1: usage minus inactive file pages
/// (page cache the kernel can drop at once), never below zero.
pub(crate) fn working_set(usage_in_bytes: i64, memory_stat: &str) -> i64 {
    let inactive = parse_memory_stat(memory_stat, "total_inactive_file").unwrap_or(0);
    (usage_in_bytes - inactive).max(0)
}

/// The machine's memory from the contents of `/proc/meminfo` and of the root memory cgroup's
/// `memory.usage_in_bytes` and `memory.stat`; None when either cannot be parsed.
pub(crate) fn memory_stats(meminfo: &str, root_usage_in_bytes: &str, root_memory_stat: &str) -> Option<MemoryStats> {
    let capacity = i64::try_from(parse_meminfo_total(meminfo)?).ok()?.checked_mul(1024)?;
    let usage: i64 = root_usage_in_bytes.trim().parse().ok()?;
    Some(MemoryStats { capacity, working_set: working_set(usage, root_memory_stat) })
}

/// A cgroup v1 memory cgroup's working set (usage minus inactive file pages), or None if the
/// cgroup cannot be read. Blocking.
pub(crate) fn cgroup_working_set(dir: &Path) -> Option<i64> {
    let usage: i64 = std::fs::read_to_string(dir.join("memory.usage_in_bytes")).ok()?.trim().parse().ok()?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    Some(working_set(usage, &stat))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo() {
        let sample = "MemTotal:       24605272 kB\nMemFree:        20334112 kB\nMemAvailable:   22799968 kB\n";
        assert_eq!(parse_meminfo_total(sample), Some(24_605_272));
        assert_eq!(parse_meminfo_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_meminfo_total("MemTotal: lots kB\n"), None);
        assert_eq!(parse_meminfo_total("MemTotal: 5 MB\n"), None);
    }

    #[test]
    fn working_set_from_cgroup_files() {
        let dir = tempfile::tempdir().expect("tmp");
        assert_eq!(cgroup_working_set(dir.path()), None);
        std::fs::write(dir.path().join("memory.usage_in_bytes"), "3000\n").expect("write");
        std::fs::write(dir.path().join("memory.stat"), "cache 9\ntotal_inactive_file 1000\n").expect("write");
        assert_eq!(cgroup_working_set(dir.path()), Some(2000));
    }
}
