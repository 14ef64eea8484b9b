//! Mirrors the memory part of cAdvisor's machine info and cgroup stats that kubelet's stats read:
//! the machine's memory (`MemTotal` in `/proc/meminfo`) and the working set of a memory cgroup,
//! which is what kubelet counts as "in use" (usage minus the page cache the kernel can drop at
//! once).
//!
//! | what                | cgroup v1                                  | cgroup v2                         |
//! |---------------------|--------------------------------------------|-----------------------------------|
//! | a cgroup's usage    | `memory.usage_in_bytes`                    | `memory.current`                  |
//! | droppable cache     | `total_inactive_file` in `memory.stat`     | `inactive_file` in `memory.stat`  |
//! | the node's usage    | the root memory cgroup's, as above         | `/proc/meminfo`: MemTotal − MemFree, Inactive(file) (the v2 root cgroup has no `memory.current`; runc reads the root so) |

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
    meminfo_kib(meminfo, "MemTotal")
}

/// One field of /proc/meminfo (`MemFree`, `Inactive(file)`, …), in KiB.
fn meminfo_kib(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut parts = rest.split_whitespace();
        let n: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") | None => Some(n),
            Some(_) => None,
        }
    })
}

/// A value from a `memory.stat` (e.g. v1's `total_inactive_file`, v2's `inactive_file`).
pub(crate) fn parse_memory_stat(stat: &str, key: &str) -> Option<i64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The working set as the kubelet computes it: usage minus inactive file pages (page cache the
/// kernel can drop at once), never below zero. `memory_stat` is either hierarchy's: v1 names the
/// hierarchical count `total_inactive_file`, v2 `inactive_file`.
pub(crate) fn working_set(usage_in_bytes: i64, memory_stat: &str) -> i64 {
    let inactive = parse_memory_stat(memory_stat, "total_inactive_file")
        .or_else(|| parse_memory_stat(memory_stat, "inactive_file"))
        .unwrap_or(0);
    (usage_in_bytes - inactive).max(0)
}

/// The machine's memory from the contents of `/proc/meminfo` and of the root memory cgroup's
/// `memory.usage_in_bytes` and `memory.stat`; None when either cannot be parsed.
pub(crate) fn memory_stats(meminfo: &str, root_usage_in_bytes: &str, root_memory_stat: &str) -> Option<MemoryStats> {
    let capacity = i64::try_from(parse_meminfo_total(meminfo)?).ok()?.checked_mul(1024)?;
    let usage: i64 = root_usage_in_bytes.trim().parse().ok()?;
    Some(MemoryStats { capacity, working_set: working_set(usage, root_memory_stat) })
}

/// The machine's memory on a cgroup v2 host, from `/proc/meminfo` alone: usage is MemTotal minus
/// MemFree, and Inactive(file) is the droppable cache.
pub(crate) fn memory_stats_from_meminfo(meminfo: &str) -> Option<MemoryStats> {
    let kib = |key| meminfo_kib(meminfo, key).and_then(|v| i64::try_from(v).ok()).and_then(|v| v.checked_mul(1024));
    let (capacity, free, inactive) = (kib("MemTotal")?, kib("MemFree")?, kib("Inactive(file)").unwrap_or(0));
    Some(MemoryStats { capacity, working_set: (capacity - free - inactive).max(0) })
}

/// A memory cgroup's working set (usage minus inactive file pages), from `memory.current` on v2 or
/// `memory.usage_in_bytes` on v1, or None if the cgroup cannot be read. Blocking.
pub(crate) fn cgroup_working_set(dir: &Path) -> Option<i64> {
    let usage = std::fs::read_to_string(dir.join("memory.current"))
        .or_else(|_| std::fs::read_to_string(dir.join("memory.usage_in_bytes")))
        .ok()?;
    let usage: i64 = usage.trim().parse().ok()?;
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

        let v2 = tempfile::tempdir().expect("tmp");
        std::fs::write(v2.path().join("memory.current"), "5000\n").expect("write");
        std::fs::write(v2.path().join("memory.stat"), "anon 3000\nactive_file 500\ninactive_file 1500\n").expect("write");
        assert_eq!(cgroup_working_set(v2.path()), Some(3500));
    }

    #[test]
    fn node_memory_from_meminfo() {
        let sample = "MemTotal:       4000 kB\nMemFree:        1000 kB\nActive(file):    500 kB\nInactive(file):  700 kB\n";
        assert_eq!(memory_stats_from_meminfo(sample), Some(MemoryStats { capacity: 4_096_000, working_set: 2300 * 1024 }));
        assert_eq!(memory_stats_from_meminfo("MemTotal: 1 kB\n"), None);
    }
}
