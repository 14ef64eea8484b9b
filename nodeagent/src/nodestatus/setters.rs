//! Mirrors kubelet's nodestatus/setters.go: what goes into the Node's status, computed from the
//! host and the agent's health.
//!
//! Reading the host ([`HostInfo::gather`]) is blocking file I/O on `/proc`, `/etc` and a
//! `statvfs`: callers run it in `spawn_blocking`. Everything else here is pure, so the status for
//! a given host and health is a function the tests can call.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{NodeOptions, NodeReadiness};

/// The Kubernetes API level kubelab speaks, as the node agent reports it in
/// `status.nodeInfo.kubeletVersion`: the same as the API server's `/version` gitVersion, so that
/// `kubectl get nodes` shows one version for the whole cluster.
pub(crate) const KUBELET_VERSION: &str = "v1.32.0-kubelab";

/// What the node agent learns about its host.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct HostInfo {
    /// Online CPUs.
    pub(crate) num_cpus: u64,
    /// MemTotal of /proc/meminfo, in KiB.
    pub(crate) memory_kib: u64,
    /// Size of the filesystem holding the agent's root directory, in bytes.
    pub(crate) ephemeral_storage_bytes: u64,
    pub(crate) hostname: String,
    pub(crate) internal_ip: Option<IpAddr>,
    pub(crate) kernel_version: String,
    pub(crate) os_image: String,
    pub(crate) machine_id: String,
    pub(crate) boot_id: String,
    pub(crate) system_uuid: String,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).unwrap_or_default()
}

impl HostInfo {
    /// Reads the host (blocking). Anything unreadable is left empty or zero rather than failing:
    /// a node with an unknown boot ID is still a node.
    pub(crate) fn gather(opts: &NodeOptions) -> HostInfo {
        // SAFETY: sysconf only reads a system value.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let internal_ip = opts.node_ip.or_else(|| {
            let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
            choose_internal_ip(&routes, &interface_ipv4s()).map(IpAddr::V4)
        });
        HostInfo {
            num_cpus: u64::try_from(cpus).unwrap_or(0),
            memory_kib: std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| crate::stats::memory::parse_meminfo_total(&m)).unwrap_or(0),
            ephemeral_storage_bytes: crate::stats::fs_stats(&opts.root_dir).map_or(0, |fs| fs.capacity.max(0) as u64),
            hostname: client::hostname(),
            internal_ip,
            kernel_version: read_trimmed("/proc/sys/kernel/osrelease"),
            os_image: std::fs::read_to_string("/etc/os-release")
                .ok()
                .and_then(|s| parse_os_release_pretty_name(&s))
                .unwrap_or_else(|| "Linux".to_string()),
            machine_id: read_trimmed("/etc/machine-id"),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            system_uuid: read_trimmed("/sys/class/dmi/id/product_uuid"),
        }
    }
}

/// PRETTY_NAME from /etc/os-release, unquoted.
pub(crate) fn parse_os_release_pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|line| {
        let v = line.trim().strip_prefix("PRETTY_NAME=")?;
        let v = v.trim_matches(|c| c == '"' || c == '\'');
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// The interface of the default route in /proc/net/route (destination 0, mask 0, lowest metric).
pub(crate) fn default_route_interface(route_table: &str) -> Option<String> {
    route_table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
            if f.len() < 8 || f[1] != "00000000" || f[7] != "00000000" {
                return None;
            }
            Some((f[6].parse::<u32>().unwrap_or(u32::MAX), f[0].to_string()))
        })
        .min()
        .map(|(_, iface)| iface)
}

/// The node's InternalIP when none is configured: the address of the default route's interface
/// (where traffic to other nodes leaves), else the first non-loopback IPv4 address.
pub(crate) fn choose_internal_ip(route_table: &str, addrs: &[(String, Ipv4Addr)]) -> Option<Ipv4Addr> {
    if let Some(iface) = default_route_interface(route_table)
        && let Some((_, ip)) = addrs.iter().find(|(name, _)| *name == iface)
    {
        return Some(*ip);
    }
    addrs.iter().map(|(_, ip)| *ip).find(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// Every IPv4 address of every interface, with the interface's name (getifaddrs).
fn interface_ipv4s() -> Vec<(String, Ipv4Addr)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list that we only read and then free with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a non-null node of the list getifaddrs returned, alive until freed.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_addr, when not null, points at a sockaddr whose family says its real type;
        // ifa_name is a NUL-terminated string.
        unsafe {
            if !ifa.ifa_addr.is_null() && i32::from((*ifa.ifa_addr).sa_family) == libc::AF_INET {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let name = CStr::from_ptr(ifa.ifa_name).to_string_lossy().into_owned();
                out.push((name, ip));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}


/// Kubernetes' architecture names (Go's GOARCH) from Rust's.
pub(crate) fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Capacity (MachineInfo): cpu, memory, ephemeral-storage, pods. Allocatable is the same: kubelab
/// reserves nothing for system daemons (no `--kube-reserved`/`--system-reserved`).
pub(crate) fn capacity(host: &HostInfo, max_pods: u32) -> BTreeMap<String, Quantity> {
    let bytes = |b: u64| if b.is_multiple_of(1024) { format!("{}Ki", b / 1024) } else { b.to_string() };
    BTreeMap::from([
        ("cpu".to_string(), Quantity(host.num_cpus.to_string())),
        ("memory".to_string(), Quantity(format!("{}Ki", host.memory_kib))),
        ("ephemeral-storage".to_string(), Quantity(bytes(host.ephemeral_storage_bytes))),
        ("pods".to_string(), Quantity(max_pods.to_string())),
    ])
}

/// NodeAddress: the InternalIP (when known) and the Hostname.
pub(crate) fn addresses(host: &HostInfo) -> Vec<NodeAddress> {
    let mut out = Vec::new();
    if let Some(ip) = host.internal_ip {
        out.push(NodeAddress { type_: "InternalIP".to_string(), address: ip.to_string() });
    }
    if !host.hostname.is_empty() {
        out.push(NodeAddress { type_: "Hostname".to_string(), address: host.hostname.clone() });
    }
    out
}

/// VersionInfo and MachineInfo's system part. `runtime_version` is `<name>://<version>` from
/// the CRI Version call.
pub(crate) fn node_info(host: &HostInfo, runtime_version: &str) -> NodeSystemInfo {
    NodeSystemInfo {
        architecture: go_arch().to_string(),
        boot_id: host.boot_id.clone(),
        container_runtime_version: runtime_version.to_string(),
        kernel_version: host.kernel_version.clone(),
        kube_proxy_version: String::new(),
        kubelet_version: KUBELET_VERSION.to_string(),
        machine_id: host.machine_id.clone(),
        operating_system: std::env::consts::OS.to_string(),
        os_image: host.os_image.clone(),
        system_uuid: host.system_uuid.clone(),
        ..NodeSystemInfo::default()
    }
}

/// The message of a NotReady node: every failing check, as an aggregate error prints them
/// (one alone as it is, several as `[a, b]`). None when all pass.
pub(crate) fn not_ready_message(r: &NodeReadiness) -> Option<String> {
    let errs: Vec<&str> = [&r.runtime_ready, &r.pleg_healthy, &r.network_ready]
        .into_iter()
        .filter_map(|e| e.as_ref().err().map(String::as_str))
        .collect();
    match errs.as_slice() {
        [] => None,
        [one] => Some(one.to_string()),
        many => Some(format!("[{}]", many.join(", "))),
    }
}

/// A condition with `lastHeartbeatTime` = now and `lastTransitionTime` kept from `old` when the
/// status did not change (a new reason or message alone is no transition).
fn condition(old: &[NodeCondition], type_: &str, status: &str, reason: &str, message: &str, now: &Time) -> NodeCondition {
    let transition = old
        .iter()
        .find(|c| c.type_ == type_)
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(transition),
    }
}

/// The types of condition the node agent owns; others (NetworkUnavailable, set by a network
/// plugin) are kept as they are.
pub(crate) const OWNED_CONDITIONS: [&str; 4] = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"];

/// The conditions (MemoryPressureCondition, DiskPressureCondition, PIDPressureCondition,
/// ReadyCondition), in kubelet's order, after any conditions the agent does not own. The pressure
/// conditions are the eviction manager's, carried in `readiness`.
pub(crate) fn conditions(old: &[NodeCondition], readiness: &NodeReadiness, now: &Time) -> Vec<NodeCondition> {
    let mut out: Vec<NodeCondition> = old.iter().filter(|c| !OWNED_CONDITIONS.contains(&c.type_.as_str())).cloned().collect();
    out.extend(pressure_conditions(old, readiness, now));
    out.push(match not_ready_message(readiness) {
        None => condition(old, "Ready", "True", "KubeletReady", "kubelet is posting ready status", now),
        Some(msg) => condition(old, "Ready", "False", "KubeletNotReady", &msg, now),
    });
    out
}

/// MemoryPressure, DiskPressure and PIDPressure with kubelet's reasons and messages
/// (MemoryPressureCondition, DiskPressureCondition, PIDPressureCondition).
pub(crate) fn pressure_conditions(old: &[NodeCondition], r: &NodeReadiness, now: &Time) -> [NodeCondition; 3] {
    [
        if r.memory_pressure {
            condition(old, "MemoryPressure", "True", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available", now)
        } else {
            condition(old, "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now)
        },
        if r.disk_pressure {
            condition(old, "DiskPressure", "True", "KubeletHasDiskPressure", "kubelet has disk pressure", now)
        } else {
            condition(old, "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now)
        },
        if r.pid_pressure {
            condition(old, "PIDPressure", "True", "KubeletHasInsufficientPID", "kubelet has insufficient PID available", now)
        } else {
            condition(old, "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now)
        },
    ]
}

/// The whole status the agent writes, from the previous one (for transition times and the
/// conditions it does not own).
pub(crate) fn node_status(
    old: Option<&NodeStatus>,
    host: &HostInfo,
    runtime_version: &str,
    readiness: &NodeReadiness,
    opts: &NodeOptions,
    now: &Time,
) -> NodeStatus {
    let old_conditions = old.and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let capacity = capacity(host, opts.max_pods);
    NodeStatus {
        allocatable: Some(capacity.clone()),
        capacity: Some(capacity),
        addresses: Some(addresses(host)),
        node_info: Some(node_info(host, runtime_version)),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: i32::from(opts.port) }),
        }),
        conditions: Some(conditions(old_conditions, readiness, now)),
        ..NodeStatus::default()
    }
}

/// `status.volumesInUse` (kubelet's VolumesInUse setter): sorted, each name once.
pub(crate) fn volumes_in_use(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names.dedup();
    names
}

/// Whether `new` says anything `old` does not, heartbeats aside: only then is a write due before
/// the report interval is up.
pub(crate) fn status_changed(old: Option<&NodeStatus>, new: &NodeStatus) -> bool {
    let Some(old) = old else { return true };
    let strip = |c: &Option<Vec<NodeCondition>>| -> Vec<NodeCondition> {
        let mut v = c.clone().unwrap_or_default();
        for c in &mut v {
            c.last_heartbeat_time = None;
        }
        v.sort_by(|a, b| a.type_.cmp(&b.type_));
        v
    };
    old.capacity != new.capacity
        || old.allocatable != new.allocatable
        || old.addresses != new.addresses
        || old.node_info != new.node_info
        || old.daemon_endpoints != new.daemon_endpoints
        || old.volumes_in_use.as_deref().unwrap_or_default() != new.volumes_in_use.as_deref().unwrap_or_default()
        || strip(&old.conditions) != strip(&new.conditions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn t(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("time"))
    }

    fn ready() -> NodeReadiness {
        NodeReadiness { runtime_ready: Ok(()), pleg_healthy: Ok(()), network_ready: Ok(()), ..Default::default() }
    }

    fn host() -> HostInfo {
        HostInfo {
            num_cpus: 2,
            memory_kib: 24_605_272,
            ephemeral_storage_bytes: 100 << 30,
            hostname: "node-a".into(),
            internal_ip: Some("10.0.0.5".parse().expect("ip")),
            kernel_version: "6.1.0-18-amd64".into(),
            os_image: "Debian GNU/Linux 12 (bookworm)".into(),
            machine_id: "m".into(),
            boot_id: "b".into(),
            system_uuid: String::new(),
        }
    }

    fn opts() -> NodeOptions {
        NodeOptions::new("node-a", PathBuf::from("/var/lib/kubelab"))
    }

    fn ready_condition(s: &NodeStatus) -> NodeCondition {
        s.conditions.as_ref().and_then(|c| c.iter().find(|c| c.type_ == "Ready").cloned()).expect("Ready")
    }

    #[test]
    fn os_release() {
        let s = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\n";
        assert_eq!(parse_os_release_pretty_name(s).as_deref(), Some("Debian GNU/Linux 12 (bookworm)"));
        assert_eq!(parse_os_release_pretty_name("NAME=x\n"), None);
    }

    #[test]
    fn internal_ip() {
        let routes = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                      docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n\
                      eth1\t00000000\t0101A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0\n\
                      eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
        assert_eq!(default_route_interface(routes).as_deref(), Some("eth0"), "lowest metric wins");
        let addrs = vec![
            ("lo".to_string(), Ipv4Addr::LOCALHOST),
            ("docker0".to_string(), Ipv4Addr::new(172, 17, 0, 1)),
            ("eth0".to_string(), Ipv4Addr::new(10, 0, 0, 5)),
        ];
        assert_eq!(choose_internal_ip(routes, &addrs), Some(Ipv4Addr::new(10, 0, 0, 5)));
        assert_eq!(choose_internal_ip("Iface\tDestination\n", &addrs), Some(Ipv4Addr::new(172, 17, 0, 1)), "first non-loopback");
        assert_eq!(choose_internal_ip("", &addrs[..1]), None);
    }

    #[test]
    fn host_is_readable() {
        // This machine: every Linux host has these.
        let h = HostInfo::gather(&NodeOptions::new("n", std::env::temp_dir()));
        assert!(h.num_cpus >= 1);
        assert!(h.memory_kib > 0);
        assert!(h.ephemeral_storage_bytes > 0);
        assert!(!h.kernel_version.is_empty());
    }

    #[test]
    fn capacity_and_info() {
        let s = node_status(None, &host(), "containerd://1.6.20", &ready(), &opts(), &t(100));
        let cap = s.capacity.as_ref().expect("capacity");
        assert_eq!(cap["cpu"].0, "2");
        assert_eq!(cap["memory"].0, "24605272Ki");
        assert_eq!(cap["ephemeral-storage"].0, "104857600Ki");
        assert_eq!(cap["pods"].0, "110");
        assert_eq!(s.allocatable, s.capacity);
        let info = s.node_info.as_ref().expect("nodeInfo");
        assert_eq!(info.kubelet_version, KUBELET_VERSION);
        assert_eq!(info.container_runtime_version, "containerd://1.6.20");
        assert_eq!(info.operating_system, "linux");
        assert_eq!(info.architecture, go_arch());
        assert_eq!(info.kube_proxy_version, "");
        let addrs: Vec<(&str, &str)> = s.addresses.as_ref().expect("addresses").iter().map(|a| (a.type_.as_str(), a.address.as_str())).collect();
        assert_eq!(addrs, vec![("InternalIP", "10.0.0.5"), ("Hostname", "node-a")]);
        assert_eq!(s.daemon_endpoints.and_then(|d| d.kubelet_endpoint).map(|e| e.port), Some(10250));
    }

    #[test]
    fn pressure_conditions_follow_the_eviction_manager() {
        let o = opts();
        let s1 = node_status(None, &host(), "r", &ready(), &o, &t(100));
        let mut pressed = ready();
        (pressed.memory_pressure, pressed.disk_pressure, pressed.pid_pressure) = (true, false, true);
        let s2 = node_status(Some(&s1), &host(), "r", &pressed, &o, &t(110));
        assert!(status_changed(Some(&s1), &s2));
        let get = |s: &NodeStatus, t: &str| s.conditions.iter().flatten().find(|c| c.type_ == t).cloned().expect("condition");
        let mem = get(&s2, "MemoryPressure");
        assert_eq!((mem.status.as_str(), mem.reason.as_deref()), ("True", Some("KubeletHasInsufficientMemory")));
        assert_eq!(mem.message.as_deref(), Some("kubelet has insufficient memory available"));
        assert_eq!(mem.last_transition_time, Some(t(110)));
        let pid = get(&s2, "PIDPressure");
        assert_eq!((pid.status.as_str(), pid.reason.as_deref()), ("True", Some("KubeletHasInsufficientPID")));
        let disk = get(&s2, "DiskPressure");
        assert_eq!((disk.status.as_str(), disk.last_transition_time.clone()), ("False", Some(t(100))));
        assert_eq!(get(&s2, "Ready").status, "True", "pressure does not make the node NotReady");
    }

    #[test]
    fn condition_transitions() {
        let o = opts();
        let s1 = node_status(None, &host(), "r", &ready(), &o, &t(100));
        let types: Vec<String> = s1.conditions.iter().flatten().map(|c| c.type_.clone()).collect();
        assert_eq!(types, OWNED_CONDITIONS.map(String::from).to_vec());
        let r1 = ready_condition(&s1);
        assert_eq!((r1.status.as_str(), r1.reason.as_deref()), ("True", Some("KubeletReady")));
        assert_eq!(r1.message.as_deref(), Some("kubelet is posting ready status"));
        assert_eq!(r1.last_transition_time, Some(t(100)));

        // Same status later: heartbeat moves, transition stays, and it is no change worth a write.
        let s2 = node_status(Some(&s1), &host(), "r", &ready(), &o, &t(110));
        let r2 = ready_condition(&s2);
        assert_eq!((r2.last_heartbeat_time.clone(), r2.last_transition_time.clone()), (Some(t(110)), Some(t(100))));
        assert!(!status_changed(Some(&s1), &s2));

        // The network goes away: NotReady with the error, a new transition time.
        let mut sick = ready();
        sick.network_ready = Err("container runtime network not ready: NetworkReady=false".into());
        let s3 = node_status(Some(&s2), &host(), "r", &sick, &o, &t(120));
        let r3 = ready_condition(&s3);
        assert_eq!((r3.status.as_str(), r3.reason.as_deref()), ("False", Some("KubeletNotReady")));
        assert_eq!(r3.message.as_deref(), Some("container runtime network not ready: NetworkReady=false"));
        assert_eq!(r3.last_transition_time, Some(t(120)));
        assert!(status_changed(Some(&s2), &s3));
        // The pressure conditions did not transition.
        let mem = s3.conditions.iter().flatten().find(|c| c.type_ == "MemoryPressure").expect("memory");
        assert_eq!(mem.last_transition_time, Some(t(100)));

        // Another failure too: both in the message; still False, so the transition time stays.
        sick.pleg_healthy = Err("pleg has yet to be successful".into());
        let s4 = node_status(Some(&s3), &host(), "r", &sick, &o, &t(130));
        let r4 = ready_condition(&s4);
        assert_eq!(
            r4.message.as_deref(),
            Some("[pleg has yet to be successful, container runtime network not ready: NetworkReady=false]")
        );
        assert_eq!(r4.last_transition_time, Some(t(120)));

        // Conditions the agent does not own are kept.
        let mut foreign = s4.clone();
        foreign.conditions.get_or_insert_with(Vec::new).insert(
            0,
            NodeCondition { type_: "NetworkUnavailable".into(), status: "False".into(), ..NodeCondition::default() },
        );
        let s5 = node_status(Some(&foreign), &host(), "r", &ready(), &o, &t(140));
        assert_eq!(s5.conditions.as_ref().expect("conditions")[0].type_, "NetworkUnavailable");
        assert_eq!(ready_condition(&s5).last_transition_time, Some(t(140)));

        // A new address is a change.
        let mut moved = host();
        moved.internal_ip = Some("10.0.0.6".parse().expect("ip"));
        assert!(status_changed(Some(&s2), &node_status(Some(&s2), &moved, "r", &ready(), &o, &t(150))));
        assert!(status_changed(None, &s2));
    }

    #[test]
    fn volumes_in_use_sorted_and_compared() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let csi = "kubernetes.io/csi/hostpath.csi.kubelab.io^";
        let list = volumes_in_use(names(&[&format!("{csi}b"), &format!("{csi}a"), &format!("{csi}b")]));
        assert_eq!(list, names(&[&format!("{csi}a"), &format!("{csi}b")]));

        let o = opts();
        let s1 = node_status(None, &host(), "r", &ready(), &o, &t(100));
        let mut s2 = s1.clone();
        s2.volumes_in_use = Some(vec![]);
        assert!(!status_changed(Some(&s1), &s2), "none and empty are the same list");
        s2.volumes_in_use = Some(list);
        assert!(status_changed(Some(&s1), &s2), "a volume newly in use is written at once");
    }
}
