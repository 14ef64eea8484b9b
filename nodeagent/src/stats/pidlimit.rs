//! Mirrors kubelet's stats/pidlimit/pidlimit_linux.go: how many process IDs the node has
//! (`/proc/sys/kernel/pid_max`) and how many processes run (`sysinfo`).

/// The node's process IDs (statsapi.RlimitStats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RlimitStats {
    /// `pid_max`.
    pub(crate) max_pid: i64,
    /// Processes running now.
    pub(crate) num_of_running_processes: i64,
}

/// The number of processes on the host (`sysinfo`'s procs, as kubelet's RunningProcesses).
pub(crate) fn running_processes() -> Option<i64> {
    // SAFETY: sysinfo fills the zeroed struct we own.
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut info) } != 0 {
        return None;
    }
    Some(i64::from(info.procs))
}

/// The stats from the contents of `pid_max` and the number of running processes; None when
/// `pid_max` does not parse.
pub(crate) fn rlimit_stats(pid_max: &str, running: i64) -> Option<RlimitStats> {
    let max_pid: i64 = pid_max.trim().parse().ok()?;
    Some(RlimitStats { max_pid, num_of_running_processes: running })
}
