//! Mirrors kubelet's cm/helpers_linux.go (and the pod arithmetic of
//! k8s.io/component-helpers/resource, over the `api` crate's container arithmetic): what a pod's
//! cgroup is limited to, in cgroup v1 units, as kubelet computes it on either hierarchy (the v2
//! and systemd code convert: [`super::cgroup_v2`], [`super::systemd`]).
//!
//! CPU requests become `cpu.shares` (a relative weight: 1 CPU = 1024 shares; v2's `cpu.weight`),
//! CPU limits become a CFS quota (`cpu.cfs_quota_us` microseconds of CPU time per
//! `cpu.cfs_period_us`; v2's `cpu.max`), memory limits become `memory.limit_in_bytes` (v2's
//! `memory.max`), `--pod-max-pids` becomes `pids.max`. Memory requests set nothing in a cgroup
//! (they only matter to the scheduler and to eviction).

use std::collections::BTreeMap;

use api::core::v1::helper::qos::{PodQOSClass, compute_pod_qos};
use api::pod::is_restartable_init_container;
use api::resource;
use k8s_openapi::api::core::v1::Pod;

/// The smallest and largest `cpu.shares` the kernel accepts.
pub(crate) const MIN_SHARES: u64 = 2;
pub(crate) const MAX_SHARES: u64 = 262_144;
pub(crate) const SHARES_PER_CPU: i64 = 1024;
pub(crate) const MILLI_CPU_TO_CPU: i64 = 1000;
/// The CFS period kubelet uses (`--cpu-cfs-quota-period`, default 100 ms), in microseconds.
pub(crate) const QUOTA_PERIOD: u64 = 100_000;
/// The kernel rejects a quota below 1 ms.
pub(crate) const MIN_QUOTA_PERIOD: i64 = 1000;

/// The values a pod cgroup is given. `None` leaves the kernel's default for a new cgroup
/// (no quota, no memory limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResourceConfig {
    pub(crate) cpu_shares: Option<u64>,
    pub(crate) cpu_quota: Option<i64>,
    pub(crate) cpu_period: Option<u64>,
    pub(crate) memory_limit: Option<i64>,
    /// `pids.max`: the node's `--pod-max-pids`, the same for every pod.
    pub(crate) pids_limit: Option<i64>,
}

/// A CPU request in millicores as `cpu.shares`: 1024 per CPU, rounded down, clamped to what the
/// kernel accepts. No request (0) gets the minimum, so the container still gets *some* CPU.
pub(crate) fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = milli_cpu.saturating_mul(SHARES_PER_CPU) / MILLI_CPU_TO_CPU;
    u64::try_from(shares).unwrap_or(MIN_SHARES).clamp(MIN_SHARES, MAX_SHARES)
}

/// A CPU limit in millicores as a CFS quota for `period` µs: the share of each period the cgroup
/// may run, at least [`MIN_QUOTA_PERIOD`]. 0 (no limit) stays 0.
pub(crate) fn milli_cpu_to_quota(milli_cpu: i64, period: i64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let quota = milli_cpu.saturating_mul(period) / MILLI_CPU_TO_CPU;
    quota.max(MIN_QUOTA_PERIOD)
}

/// Resource name → quantity in nano-units.
type ResourceList<'a> = BTreeMap<&'a str, i128>;

fn add<'a>(into: &mut ResourceList<'a>, from: &ResourceList<'a>) {
    for (name, value) in from {
        *into.entry(name).or_default() += value;
    }
}

fn max<'a>(into: &mut ResourceList<'a>, from: &ResourceList<'a>) {
    for (name, value) in from {
        let slot = into.entry(name).or_default();
        *slot = (*slot).max(*value);
    }
}

/// The resources pod-level `spec.resources` may set (IsSupportedPodLevelResource, hugepages aside).
const POD_LEVEL_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// With PodLevelResources, what the pod sets for itself replaces what its containers add up to.
fn with_pod_level<'a>(into: &mut ResourceList<'a>, pod_level: ResourceList<'a>) {
    for (name, value) in pod_level {
        if POD_LEVEL_RESOURCES.contains(&name) {
            into.insert(name, value);
        }
    }
}

/// PodRequests: app containers and sidecars (restartable init containers) run together, so they
/// add up; a plain init container runs alone (next to the sidecars started before it), so the pod
/// needs the larger of that and the sum. Pod-level requests, when set, replace the sum (a missing
/// one taken from the pod-level limit, as for a container). Overhead is added on top.
fn pod_requests(pod: &Pod) -> ResourceList<'_> {
    let Some(spec) = pod.spec.as_ref() else { return ResourceList::new() };
    let mut requests = ResourceList::new();
    for c in &spec.containers {
        add(&mut requests, &resource::effective_requests(c.resources.as_ref()));
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let own = resource::effective_requests(c.resources.as_ref());
        if is_restartable_init_container(c) {
            add(&mut requests, &own);
            add(&mut sidecars, &own);
            max(&mut init_max, &sidecars);
        } else {
            let mut running = own;
            add(&mut running, &sidecars);
            max(&mut init_max, &running);
        }
    }
    max(&mut requests, &init_max);
    if let Some(pod_level) = spec.resources.as_ref() {
        with_pod_level(&mut requests, resource::effective_requests(Some(pod_level)));
    }
    add(&mut requests, &resource::parsed(spec.overhead.as_ref()));
    requests
}

/// PodLimits: the same arithmetic over limits. `each` sees every container's limits as they count
/// (a plain init container's together with the sidecars before it), which is how the caller learns
/// whether every container declared a limit. Pod-level limits, when set, replace the sum. Overhead
/// is added only to resources that have a limit (adding it to "unlimited" would make a limit out
/// of nothing).
fn pod_limits<'a>(pod: &'a Pod, mut each: impl FnMut(&ResourceList<'a>)) -> ResourceList<'a> {
    let Some(spec) = pod.spec.as_ref() else { return ResourceList::new() };
    let mut limits = ResourceList::new();
    for c in &spec.containers {
        let own = resource::limits(c.resources.as_ref());
        each(&own);
        add(&mut limits, &own);
    }
    let mut sidecars = ResourceList::new();
    let mut init_max = ResourceList::new();
    for c in spec.init_containers.iter().flatten() {
        let own = resource::limits(c.resources.as_ref());
        if is_restartable_init_container(c) {
            add(&mut limits, &own);
            add(&mut sidecars, &own);
            each(&sidecars);
            max(&mut init_max, &sidecars);
        } else {
            let mut running = own;
            add(&mut running, &sidecars);
            each(&running);
            max(&mut init_max, &running);
        }
    }
    max(&mut limits, &init_max);
    if let Some(pod_level) = spec.resources.as_ref() {
        with_pod_level(&mut limits, resource::limits(Some(pod_level)));
    }
    for (name, value) in resource::parsed(spec.overhead.as_ref()) {
        if let Some(limit) = limits.get_mut(name) {
            *limit += value;
        }
    }
    limits
}

/// Nano-units to milli-units or units, rounded up like `Quantity.MilliValue()` / `.Value()`.
fn ceil_div(nanos: i128, per: i128) -> i64 {
    let q = nanos.div_euclid(per) + i128::from(nanos.rem_euclid(per) != 0);
    i64::try_from(q).unwrap_or(i64::MAX)
}

/// ResourceConfigForPod (with CFS quota enforced, as kubelet's default `--cpu-cfs-quota=true`):
/// - Guaranteed: shares from requests, quota from limits, memory limit.
/// - Burstable: shares from requests; quota only if *every* container has a CPU limit, memory limit
///   only if every container has a memory limit (one unlimited container makes the pod unlimited),
///   or if the pod sets that limit at pod level.
/// - BestEffort: the minimum shares, nothing else.
pub(crate) fn resource_config_for_pod(pod: &Pod) -> ResourceConfig {
    let requests = pod_requests(pod);
    let mut cpu_limits_declared = true;
    let mut memory_limits_declared = true;
    let limits = pod_limits(pod, |l| {
        if l.get("cpu").copied().unwrap_or(0) == 0 {
            cpu_limits_declared = false;
        }
        if l.get("memory").copied().unwrap_or(0) == 0 {
            memory_limits_declared = false;
        }
    });
    let pod_level_limits = resource::limits(pod.spec.as_ref().and_then(|s| s.resources.as_ref()));
    if pod_level_limits.get("cpu").is_some_and(|l| *l != 0) {
        cpu_limits_declared = true;
    }
    if pod_level_limits.get("memory").is_some_and(|l| *l != 0) {
        memory_limits_declared = true;
    }
    let cpu_requests = requests.get("cpu").map_or(0, |n| ceil_div(*n, 1_000_000));
    let cpu_limits = limits.get("cpu").map_or(0, |n| ceil_div(*n, 1_000_000));
    let memory_limit = limits.get("memory").map_or(0, |n| ceil_div(*n, 1_000_000_000));

    let shares = milli_cpu_to_shares(cpu_requests);
    let quota = milli_cpu_to_quota(cpu_limits, QUOTA_PERIOD as i64);
    match compute_pod_qos(pod) {
        PodQOSClass::Guaranteed => ResourceConfig {
            cpu_shares: Some(shares),
            cpu_quota: Some(quota),
            cpu_period: Some(QUOTA_PERIOD),
            memory_limit: Some(memory_limit),
            pids_limit: None,
        },
        PodQOSClass::Burstable => ResourceConfig {
            cpu_shares: Some(shares),
            cpu_quota: cpu_limits_declared.then_some(quota),
            cpu_period: cpu_limits_declared.then_some(QUOTA_PERIOD),
            memory_limit: memory_limits_declared.then_some(memory_limit),
            pids_limit: None,
        },
        PodQOSClass::BestEffort => ResourceConfig { cpu_shares: Some(MIN_SHARES), ..Default::default() },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    /// A container from `("cpu", "100m")`-style requests and limits.
    pub(crate) fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        let list = |l: &[(&str, &str)]| {
            (!l.is_empty()).then(|| l.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect())
        };
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: list(requests),
                limits: list(limits),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub(crate) fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: (!init.is_empty()).then_some(init),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn shares_table() {
        let cases = [(0, 2), (1, 2), (10, 10), (100, 102), (250, 256), (1000, 1024), (1500, 1536), (500_000, 262_144)];
        for (milli, shares) in cases {
            assert_eq!(milli_cpu_to_shares(milli), shares, "{milli}m");
        }
    }

    #[test]
    fn quota_table() {
        let cases =
            [(0, 0), (5, 1000), (9, 1000), (10, 1000), (100, 10_000), (250, 25_000), (1000, 100_000), (2500, 250_000)];
        for (milli, quota) in cases {
            assert_eq!(milli_cpu_to_quota(milli, 100_000), quota, "{milli}m");
        }
        assert_eq!(milli_cpu_to_quota(250, 50_000), 12_500);
    }

    fn cfg(shares: u64, quota: Option<i64>, memory: Option<i64>) -> ResourceConfig {
        ResourceConfig {
            cpu_shares: Some(shares),
            cpu_quota: quota,
            cpu_period: quota.map(|_| QUOTA_PERIOD),
            memory_limit: memory,
            pids_limit: None,
        }
    }

    #[test]
    fn resource_config_table() {
        const MI: i64 = 1 << 20;
        let guaranteed = [("cpu", "100m"), ("memory", "100Mi")];
        let cases: Vec<(&str, Pod, ResourceConfig)> = vec![
            ("besteffort", pod(vec![container(&[], &[])], vec![]), cfg(2, None, None)),
            ("burstable, no limits", pod(vec![container(&guaranteed, &[])], vec![]), cfg(102, None, None)),
            (
                "burstable with limits",
                pod(vec![container(&guaranteed, &[("cpu", "200m"), ("memory", "200Mi")])], vec![]),
                cfg(102, Some(20_000), Some(200 * MI)),
            ),
            (
                "burstable, one container unlimited",
                pod(
                    vec![container(&guaranteed, &[("cpu", "200m"), ("memory", "200Mi")]), container(&guaranteed, &[])],
                    vec![],
                ),
                cfg(204, None, None),
            ),
            (
                "burstable, cpu limit only",
                pod(vec![container(&[("cpu", "100m")], &[("cpu", "250m")])], vec![]),
                cfg(102, Some(25_000), None),
            ),
            (
                "guaranteed",
                pod(vec![container(&guaranteed, &guaranteed)], vec![]),
                cfg(102, Some(10_000), Some(100 * MI)),
            ),
            (
                "guaranteed, two containers",
                pod(vec![container(&guaranteed, &guaranteed), container(&guaranteed, &guaranteed)], vec![]),
                cfg(204, Some(20_000), Some(200 * MI)),
            ),
            (
                "a bigger init container sets the floor",
                pod(
                    vec![container(&guaranteed, &guaranteed)],
                    vec![container(&[("cpu", "1"), ("memory", "1Gi")], &[("cpu", "1"), ("memory", "1Gi")])],
                ),
                cfg(1024, Some(100_000), Some(1024 * MI)),
            ),
            (
                "a smaller init container does not",
                pod(
                    vec![container(&guaranteed, &guaranteed)],
                    vec![container(&[("cpu", "10m"), ("memory", "1Mi")], &[("cpu", "10m"), ("memory", "1Mi")])],
                ),
                cfg(102, Some(10_000), Some(100 * MI)),
            ),
        ];
        for (name, pod, want) in cases {
            assert_eq!(resource_config_for_pod(&pod), want, "{name}");
        }
    }

    #[test]
    fn sidecars_add_up_and_overhead_is_added() {
        const MI: i64 = 1 << 20;
        let g = |cpu: &'static str, mem: &'static str| {
            container(&[("cpu", cpu), ("memory", mem)], &[("cpu", cpu), ("memory", mem)])
        };
        let mut sidecar = g("100m", "10Mi");
        sidecar.restart_policy = Some("Always".into());
        let mut p = pod(vec![g("200m", "20Mi")], vec![sidecar, g("250m", "5Mi")]);
        // Sum: app 200m + sidecar 100m = 300m; plain init runs beside the sidecar: 350m/15Mi.
        assert_eq!(resource_config_for_pod(&p), cfg(358, Some(35_000), Some(30 * MI)));

        if let Some(spec) = p.spec.as_mut() {
            spec.overhead = Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("50m".into())),
                ("memory".to_string(), Quantity("2Mi".into())),
            ]));
        }
        assert_eq!(resource_config_for_pod(&p), cfg(409, Some(40_000), Some(32 * MI)));
    }

    #[test]
    fn pod_level_resources_replace_the_containers() {
        const MI: i64 = 1 << 20;
        let with_pod_level = |mut p: Pod, requests: &[(&str, &str)], limits: &[(&str, &str)]| {
            if let Some(spec) = p.spec.as_mut() {
                spec.resources = container(requests, limits).resources;
            }
            p
        };
        // Limited at pod level only: Guaranteed, the requests taken from the limits.
        let p = with_pod_level(pod(vec![container(&[], &[])], vec![]), &[], &[("cpu", "500m"), ("memory", "64Mi")]);
        assert_eq!(resource_config_for_pod(&p), cfg(512, Some(50_000), Some(64 * MI)));
        // A pod-level cpu limit counts as declared although no container declares one.
        let p = with_pod_level(pod(vec![container(&[("cpu", "100m")], &[])], vec![]), &[("cpu", "200m")], &[("cpu", "400m")]);
        assert_eq!(resource_config_for_pod(&p), cfg(204, Some(40_000), None));
    }

    #[test]
    fn overhead_does_not_invent_a_limit() {
        let mut p = pod(vec![container(&[("cpu", "100m")], &[])], vec![]);
        if let Some(spec) = p.spec.as_mut() {
            spec.overhead = Some(BTreeMap::from([("cpu".to_string(), Quantity("100m".into()))]));
        }
        assert_eq!(resource_config_for_pod(&p), cfg(204, None, None));
    }
}
