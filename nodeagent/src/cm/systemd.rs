//! Mirrors runc's libcontainer/cgroups/systemd (the manager kubelet's systemd cgroup driver uses)
//! and kubelet's CgroupName.ToSystemd: on a host where systemd is PID 1, systemd owns the cgroup
//! tree, so the agent asks it for each cgroup instead of making directories behind its back.
//!
//! A cgroup is a *slice* unit, named by its path with `-` between levels (a `-` inside a name
//! becomes `_`): the pod cgroup `kubepods/burstable/pod<uid>` is the unit
//! `kubepods-burstable-pod<uid>.slice`, and systemd puts it at
//! `/sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`.
//! The agent starts it as a *transient* unit (`StartTransientUnit` on
//! `org.freedesktop.systemd1.Manager`, over the system D-Bus) with the limits as unit properties
//! (`CPUWeight`, `CPUQuotaPerSecUSec`, `MemoryMax`, `TasksMax`), changes them with
//! `SetUnitProperties`, and removes it with `StopUnit`. containerd, told `SystemdCgroup = true`,
//! gets the slice as the sandbox's cgroup parent and asks systemd for a
//! `cri-containerd-<id>.scope` below it for each container.

use std::path::Path;
use std::time::{Duration, Instant};

use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::Value;

use super::cgroup_v2::cpu_shares_to_weight;
use super::helpers::{QUOTA_PERIOD, ResourceConfig};
use crate::error::{Error, Result};

/// How long a start or stop job may take before the cgroup directory shows it.
const JOB_TIMEOUT: Duration = Duration::from_secs(10);
/// systemd keeps a CPU quota as a whole percentage of a CPU: runc rounds the per-second quota up
/// to 10 ms so the kernel gets at least what was asked.
const QUOTA_GRANULARITY_USEC: u64 = 10_000;

/// The unit name of a slice for the cgroup `components` (kubelet's ToSystemd, last level):
/// `["kubepods", "burstable", "pod1-2"]` → `kubepods-burstable-pod1_2.slice`.
pub(crate) fn slice_name(components: &[String]) -> String {
    if components.is_empty() {
        return "-.slice".to_string();
    }
    let escaped: Vec<String> = components.iter().map(|c| escape(c)).collect();
    format!("{}.slice", escaped.join("-"))
}

/// A level's name inside a slice name: `-` separates levels, so it becomes `_`.
pub(crate) fn escape(component: &str) -> String {
    component.replace('-', "_")
}

/// The cgroup path of the slice for `components`, every ancestor slice on the way
/// (libcontainer's ExpandSlice): `/kubepods.slice/kubepods-burstable.slice/…-pod<uid>.slice`.
pub(crate) fn expand_slice(components: &[String]) -> String {
    let mut path = String::new();
    for depth in 1..=components.len() {
        path.push('/');
        path.push_str(&slice_name(&components[..depth]));
    }
    if path.is_empty() { "/".to_string() } else { path }
}

/// `CPUQuotaPerSecUSec` for a CFS quota per period (both µs), rounded up to what systemd keeps.
pub(crate) fn quota_per_sec_usec(quota: i64, period: u64) -> Option<u64> {
    let quota = u64::try_from(quota).ok().filter(|q| *q > 0)?;
    let per_sec = quota.saturating_mul(1_000_000) / period.max(1);
    Some(per_sec.div_ceil(QUOTA_GRANULARITY_USEC) * QUOTA_GRANULARITY_USEC)
}

/// The unit properties for `config` (runc's genV2ResourcesProperties, the part pods use).
/// Accounting is turned on so systemd enables the controllers down to the slice.
pub(crate) fn properties(description: &str, config: &ResourceConfig) -> Vec<(&'static str, Value<'static>)> {
    let mut props: Vec<(&'static str, Value<'static>)> = vec![
        ("Description", Value::from(description.to_string())),
        ("DefaultDependencies", Value::Bool(false)),
        ("CPUAccounting", Value::Bool(true)),
        ("MemoryAccounting", Value::Bool(true)),
        ("TasksAccounting", Value::Bool(true)),
    ];
    if let Some(shares) = config.cpu_shares {
        props.push(("CPUWeight", Value::U64(cpu_shares_to_weight(shares))));
    }
    if let Some(quota) = config.cpu_quota {
        let period = config.cpu_period.unwrap_or(QUOTA_PERIOD);
        props.push(("CPUQuotaPeriodUSec", Value::U64(period)));
        props.push(("CPUQuotaPerSecUSec", Value::U64(quota_per_sec_usec(quota, period).unwrap_or(u64::MAX))));
    }
    if let Some(limit) = config.memory_limit {
        props.push(("MemoryMax", Value::U64(u64::try_from(limit).unwrap_or(u64::MAX))));
    }
    if let Some(max) = config.pids_limit {
        props.push(("TasksMax", Value::U64(u64::try_from(max).unwrap_or(u64::MAX))));
    }
    props
}

/// A connection to systemd's manager on the system bus.
#[derive(Clone, Debug)]
pub(crate) struct Systemd {
    conn: Connection,
}

fn call_error(op: &'static str, e: zbus::Error) -> Error {
    Error::Systemd { op, message: e.to_string() }
}

/// The D-Bus error name of a failed method call, if it is one.
fn method_error_name(e: &zbus::Error) -> Option<&str> {
    match e {
        zbus::Error::MethodError(name, _, _) => Some(name.as_str()),
        _ => None,
    }
}

impl Systemd {
    /// Connects to the system bus, where systemd's manager answers.
    pub(crate) fn connect() -> Result<Systemd> {
        let conn = Connection::system().map_err(|e| {
            Error::UnsupportedHost(format!(
                "the systemd cgroup driver creates slices through systemd's D-Bus API, and the system bus cannot be reached ({e}): is dbus installed and running (apt-get install dbus)? Otherwise use --cgroup-driver=cgroupfs"
            ))
        })?;
        Ok(Systemd { conn })
    }

    fn manager(&self) -> Result<Proxy<'_>> {
        Proxy::new(&self.conn, "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager")
            .map_err(|e| call_error("connecting to org.freedesktop.systemd1.Manager", e))
    }

    /// Starts the slice `unit` with `props`, or, when it runs already, sets them on it; then waits
    /// until its cgroup directory `dir` exists.
    pub(crate) fn ensure_slice(&self, unit: &str, props: &[(&'static str, Value<'static>)], dir: &Path) -> Result<()> {
        let manager = self.manager()?;
        let aux: Vec<(&str, Vec<(&str, Value<'_>)>)> = Vec::new();
        match manager.call_method("StartTransientUnit", &(unit, "replace", props, aux)) {
            Ok(_) => {}
            Err(e) if method_error_name(&e) == Some("org.freedesktop.systemd1.UnitExists") => {
                manager.call_method("SetUnitProperties", &(unit, true, props)).map_err(|e| call_error("SetUnitProperties", e))?;
            }
            Err(e) => return Err(call_error("StartTransientUnit", e)),
        }
        wait_for(JOB_TIMEOUT, || dir.is_dir()).then_some(()).ok_or_else(|| Error::Systemd {
            op: "StartTransientUnit",
            message: format!("{unit} started, but its cgroup {} did not appear within {JOB_TIMEOUT:?}", dir.display()),
        })
    }

    /// Stops the slice `unit` (systemd removes its cgroup) and waits until `dir` is gone. A unit
    /// systemd does not know is already stopped.
    pub(crate) fn stop_unit(&self, unit: &str, dir: &Path) -> Result<()> {
        let manager = self.manager()?;
        match manager.call_method("StopUnit", &(unit, "replace")) {
            Ok(_) => {}
            Err(e) if method_error_name(&e) == Some("org.freedesktop.systemd1.NoSuchUnit") => {}
            Err(e) => return Err(call_error("StopUnit", e)),
        }
        wait_for(JOB_TIMEOUT, || !dir.exists()).then_some(()).ok_or_else(|| super::files::busy(dir))
    }
}

fn wait_for(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_as_kubelet_writes_them() {
        let pod = parts(&["kubepods", "burstable", "pod6f5c-11ee"]);
        assert_eq!(slice_name(&pod), "kubepods-burstable-pod6f5c_11ee.slice");
        assert_eq!(
            expand_slice(&pod),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f5c_11ee.slice"
        );
        assert_eq!(expand_slice(&parts(&["kubelab-e2e-1", "kubepods"])), "/kubelab_e2e_1.slice/kubelab_e2e_1-kubepods.slice");
        assert_eq!(expand_slice(&[]), "/");
    }

    #[test]
    fn quota_rounds_up_to_ten_milliseconds() {
        assert_eq!(quota_per_sec_usec(50_000, 100_000), Some(500_000));
        assert_eq!(quota_per_sec_usec(1_000, 100_000), Some(10_000));
        assert_eq!(quota_per_sec_usec(12_345, 100_000), Some(130_000));
        assert_eq!(quota_per_sec_usec(0, 100_000), None);
    }

    #[test]
    fn properties_carry_the_limits() {
        let config = ResourceConfig {
            cpu_shares: Some(512),
            cpu_quota: Some(50_000),
            cpu_period: Some(100_000),
            memory_limit: Some(128 << 20),
            pids_limit: Some(100),
        };
        let props = properties("pod", &config);
        let get = |k: &str| props.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("CPUWeight"), Some(Value::U64(20)));
        assert_eq!(get("CPUQuotaPerSecUSec"), Some(Value::U64(500_000)));
        assert_eq!(get("MemoryMax"), Some(Value::U64(128 << 20)));
        assert_eq!(get("TasksMax"), Some(Value::U64(100)));
        assert_eq!(get("MemoryAccounting"), Some(Value::Bool(true)));
        assert!(properties("be", &ResourceConfig::default()).iter().all(|(n, _)| !n.starts_with("Memory") || *n == "MemoryAccounting"));
    }
}
