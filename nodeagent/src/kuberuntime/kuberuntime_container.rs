//! Mirrors kubelet's kuberuntime/kuberuntime_container.go and kubelet_pods.go
//! (makeEnvironmentVariables, makeMounts): turning one container of the pod spec into a CRI
//! ContainerConfig, reading CRI container statuses back, and killing a container
//! ([`kill_container`]: preStop hook, then SIGTERM/SIGKILL within the grace period).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::sync::watch;

use super::labels;
use crate::container::{self as kc, ContainerState};
use crate::cri::RemoteRuntime;
use crate::events::{self, Recorder};
use crate::lifecycle::handlers::HandlerRunner;
use crate::volumemanager::{MountedVolumes, downwardapi};

/// The configMaps and secrets a pod's environment refers to, fetched before its containers are
/// created; `None` for one that does not exist. Secret values are already decoded.
#[derive(Clone, Debug)]
pub(crate) struct EnvObjects {
    pub(crate) config_maps: HashMap<String, Option<BTreeMap<String, String>>>,
    pub(crate) secrets: HashMap<String, Option<BTreeMap<String, String>>>,
    /// The node's allocatable: what a `resourceFieldRef` to an unset limit reads.
    pub(crate) node_allocatable: downwardapi::Allocatable,
    /// The Services' variables ([`crate::envvars`]), or why they could not be read (the
    /// containers are then not created: a CreateContainerConfigError, as kubelet's).
    pub(crate) service_env: Result<Vec<(String, String)>, String>,
}

impl Default for EnvObjects {
    fn default() -> Self {
        EnvObjects { config_maps: HashMap::new(), secrets: HashMap::new(), node_allocatable: Default::default(), service_env: Ok(vec![]) }
    }
}

/// The names of every configMap and secret the pod's env and envFrom use.
pub(crate) fn env_references(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let (mut cms, mut secrets) = (vec![], vec![]);
    let spec = pod.spec.clone().unwrap_or_default();
    for c in spec.init_containers.iter().flatten().chain(spec.containers.iter()) {
        for e in c.env.iter().flatten() {
            if let Some(v) = &e.value_from {
                if let Some(r) = &v.config_map_key_ref {
                    cms.push(r.name.clone());
                }
                if let Some(r) = &v.secret_key_ref {
                    secrets.push(r.name.clone());
                }
            }
        }
        for f in c.env_from.iter().flatten() {
            if let Some(r) = &f.config_map_ref {
                cms.push(r.name.clone());
            }
            if let Some(r) = &f.secret_ref {
                secrets.push(r.name.clone());
            }
        }
    }
    cms.sort();
    cms.dedup();
    secrets.sort();
    secrets.dedup();
    (cms, secrets)
}

/// Kubernetes' `$(VAR)` expansion: a defined variable is replaced, `$$` escapes a `$`, anything
/// else is left as written.
pub(crate) fn expand(input: &str, vars: &HashMap<String, String>) -> String {
    let b = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' && i + 1 < b.len() {
            if b[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if b[i + 1] == b'('
                && let Some(end) = input[i + 2..].find(')')
            {
                let name = &input[i + 2..i + 2 + end];
                match vars.get(name) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&input[i..i + 3 + end]),
                }
                i += 3 + end;
                continue;
            }
        }
        let ch = input[i..].chars().next().unwrap_or_default();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

fn field_ref(pod: &Pod, path: &str, pod_ips: &[String], host_ip: &str) -> Result<String, String> {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref();
    let map_key = |prefix: &str, map: &Option<BTreeMap<String, String>>| -> Option<String> {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default())
    };
    if let Some(v) = map_key("metadata.labels['", &m.labels) {
        return Ok(v);
    }
    if let Some(v) = map_key("metadata.annotations['", &m.annotations) {
        return Ok(v);
    }
    Ok(match path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => host_ip.to_string(),
        "status.podIP" => pod_ips.first().cloned().unwrap_or_default(),
        "status.podIPs" => pod_ips.join(","),
        other => return Err(format!("unsupported fieldPath: {other}")),
    })
}

/// makeEnvironmentVariables: envFrom first, then env in order, each value expanded against the
/// variables defined before it and the Services' variables; then the Services' variables the
/// container did not set itself. An error is a CreateContainerConfigError.
pub(crate) fn make_environment_variables(
    pod: &Pod,
    container: &Container,
    objs: &EnvObjects,
    pod_ips: &[String],
    host_ip: &str,
) -> Result<Vec<api::KeyValue>, String> {
    let service_env = objs.service_env.as_ref().map_err(|e| format!("cannot read the Services for their environment variables: {e}"))?;
    let service_vars: HashMap<String, String> = service_env.iter().cloned().collect();
    let mut vars: HashMap<String, String> = HashMap::new();
    let mut order: Vec<String> = vec![];
    let mut set = |vars: &mut HashMap<String, String>, k: String, v: String| {
        if vars.insert(k.clone(), v).is_none() {
            order.push(k);
        }
    };
    for f in container.env_from.iter().flatten() {
        let prefix = f.prefix.clone().unwrap_or_default();
        let (kind, name, optional, data) = if let Some(r) = &f.config_map_ref {
            ("configmap", &r.name, r.optional.unwrap_or(false), objs.config_maps.get(&r.name))
        } else if let Some(r) = &f.secret_ref {
            ("secret", &r.name, r.optional.unwrap_or(false), objs.secrets.get(&r.name))
        } else {
            continue;
        };
        match data.and_then(|d| d.as_ref()) {
            Some(d) => {
                for (k, v) in d {
                    set(&mut vars, format!("{prefix}{k}"), v.clone());
                }
            }
            None if optional => {}
            None => return Err(format!("{kind} {name:?} not found")),
        }
    }
    for e in container.env.iter().flatten() {
        let value = if let Some(vf) = &e.value_from {
            if let Some(r) = &vf.config_map_key_ref {
                let optional = r.optional.unwrap_or(false);
                match objs.config_maps.get(&r.name).and_then(|d| d.as_ref()) {
                    Some(d) => match d.get(&r.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => return Err(format!("couldn't find key {} in ConfigMap {}/{}", r.key, ns(pod), r.name)),
                    },
                    None if optional => continue,
                    None => return Err(format!("configmap {:?} not found", r.name)),
                }
            } else if let Some(r) = &vf.secret_key_ref {
                let optional = r.optional.unwrap_or(false);
                match objs.secrets.get(&r.name).and_then(|d| d.as_ref()) {
                    Some(d) => match d.get(&r.key) {
                        Some(v) => v.clone(),
                        None if optional => continue,
                        None => return Err(format!("couldn't find key {} in Secret {}/{}", r.key, ns(pod), r.name)),
                    },
                    None if optional => continue,
                    None => return Err(format!("secret {:?} not found", r.name)),
                }
            } else if let Some(r) = &vf.field_ref {
                field_ref(pod, &r.field_path, pod_ips, host_ip)?
            } else if let Some(r) = &vf.resource_field_ref {
                // containerName is optional in env: this container unless it names another.
                let target = match r.container_name.as_deref().filter(|n| !n.is_empty() && *n != container.name) {
                    Some(other) => downwardapi::find_container(pod, other)
                        .ok_or_else(|| format!("env {:?}: container {other:?} not found in the pod", e.name))?,
                    None => container,
                };
                downwardapi::extract_container_resource_value(r, target, &objs.node_allocatable)
                    .map_err(|err| format!("env {:?}: {err}", e.name))?
            } else {
                return Err(format!("env {:?}: valueFrom names no source", e.name));
            }
        } else {
            let mut known = service_vars.clone();
            known.extend(vars.iter().map(|(k, v)| (k.clone(), v.clone())));
            expand(e.value.as_deref().unwrap_or_default(), &known)
        };
        set(&mut vars, e.name.clone(), value);
    }
    let mut out: Vec<api::KeyValue> = order.into_iter().map(|k| api::KeyValue { value: vars.remove(&k).unwrap_or_default(), key: k }).collect();
    let own: std::collections::HashSet<String> = out.iter().map(|kv| kv.key.clone()).collect();
    out.extend(service_env.iter().filter(|(k, _)| !own.contains(k)).map(|(k, v)| api::KeyValue { key: k.clone(), value: v.clone() }));
    Ok(out)
}

fn ns(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or_default()
}

/// makeMounts: each volumeMount onto the volume's host directory (and subPath inside it), plus
/// the pod's managed /etc/hosts unless the container mounts its own.
pub(crate) fn make_mounts(
    container: &Container,
    volumes: &MountedVolumes,
    etc_hosts: Option<&Path>,
) -> Result<Vec<api::Mount>, String> {
    let mut mounts = vec![];
    for vm in container.volume_mounts.iter().flatten() {
        let v = volumes
            .get(&vm.name)
            .ok_or_else(|| format!("cannot find volume {:?} to mount into container {:?}", vm.name, container.name))?;
        let mut host = v.host_path.clone();
        if let Some(sub) = vm.sub_path.as_deref().filter(|s| !s.is_empty()) {
            let p = Path::new(sub);
            if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
                return Err(format!("subPath {sub:?} must be a relative path without '..'"));
            }
            host = host.join(p);
        }
        let propagation = match vm.mount_propagation.as_deref() {
            Some("HostToContainer") => api::MountPropagation::PropagationHostToContainer,
            Some("Bidirectional") => api::MountPropagation::PropagationBidirectional,
            _ => api::MountPropagation::PropagationPrivate,
        };
        mounts.push(api::Mount {
            container_path: vm.mount_path.clone(),
            host_path: host.to_string_lossy().into_owned(),
            readonly: vm.read_only.unwrap_or(false) || v.read_only,
            propagation: propagation as i32,
            ..Default::default()
        });
    }
    if let Some(hosts) = etc_hosts
        && !mounts.iter().any(|m| m.container_path == "/etc/hosts")
    {
        mounts.push(api::Mount {
            container_path: "/etc/hosts".into(),
            host_path: hosts.to_string_lossy().into_owned(),
            ..Default::default()
        });
    }
    Ok(mounts)
}

/// The container's cgroup values from its own requests and limits (cpu shares from the request,
/// CFS quota and memory limit from the limits).
pub(crate) fn container_resources(container: &Container) -> api::LinuxContainerResources {
    use apimachinery::resource::{parse_quantity_milli, parse_quantity_units};
    let res = container.resources.clone().unwrap_or_default();
    let get = |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>, k: &str| {
        m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone())
    };
    let cpu_limit = get(&res.limits, "cpu").and_then(|q| parse_quantity_milli(&q));
    // A limit without a request implies the request (API defaulting does this; be safe here).
    let cpu_request = get(&res.requests, "cpu").and_then(|q| parse_quantity_milli(&q)).or(cpu_limit);
    let mem_limit = get(&res.limits, "memory").and_then(|q| parse_quantity_units(&q));
    let mut r = api::LinuxContainerResources {
        cpu_shares: crate::cm::helpers::milli_cpu_to_shares(cpu_request.unwrap_or(0)) as i64,
        ..Default::default()
    };
    if let Some(l) = cpu_limit {
        r.cpu_period = crate::cm::helpers::QUOTA_PERIOD as i64;
        r.cpu_quota = crate::cm::helpers::milli_cpu_to_quota(l, crate::cm::helpers::QUOTA_PERIOD as i64);
    }
    if let Some(m) = mem_limit {
        r.memory_limit_in_bytes = m;
    }
    r
}

fn security_context(pod: &Pod, container: &Container) -> api::LinuxContainerSecurityContext {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.clone()).unwrap_or_default();
    let csc = container.security_context.clone().unwrap_or_default();
    let caps = csc.capabilities.clone().unwrap_or_default();
    api::LinuxContainerSecurityContext {
        capabilities: Some(api::Capability {
            add_capabilities: caps.add.unwrap_or_default(),
            drop_capabilities: caps.drop.unwrap_or_default(),
            ..Default::default()
        }),
        privileged: csc.privileged.unwrap_or(false),
        run_as_user: csc.run_as_user.or(psc.run_as_user).map(|value| api::Int64Value { value }),
        run_as_group: csc.run_as_group.or(psc.run_as_group).map(|value| api::Int64Value { value }),
        readonly_rootfs: csc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: psc.supplemental_groups.unwrap_or_default(),
        no_new_privs: csc.allow_privilege_escalation == Some(false),
        namespace_options: Some(api::NamespaceOption {
            network: if pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false) {
                api::NamespaceMode::Node
            } else {
                api::NamespaceMode::Pod
            } as i32,
            pid: if pod.spec.as_ref().and_then(|s| s.share_process_namespace).unwrap_or(false) {
                api::NamespaceMode::Pod
            } else {
                api::NamespaceMode::Container
            } as i32,
            ipc: api::NamespaceMode::Pod as i32,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// generateContainerConfig: the CRI config of one container attempt.
pub(crate) struct ContainerInputs<'a> {
    pub(crate) pod: &'a Pod,
    pub(crate) container: &'a Container,
    pub(crate) restart_count: u32,
    pub(crate) image_ref: &'a str,
    pub(crate) envs: Vec<api::KeyValue>,
    pub(crate) mounts: Vec<api::Mount>,
}

pub(crate) fn generate_container_config(i: ContainerInputs<'_>) -> api::ContainerConfig {
    let c = i.container;
    let vars: HashMap<String, String> = i.envs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect();
    api::ContainerConfig {
        metadata: Some(api::ContainerMetadata { name: c.name.clone(), attempt: i.restart_count }),
        image: Some(api::ImageSpec {
            image: if i.image_ref.is_empty() { c.image.clone().unwrap_or_default() } else { i.image_ref.to_string() },
            user_specified_image: c.image.clone().unwrap_or_default(),
            ..Default::default()
        }),
        command: c.command.iter().flatten().map(|s| expand(s, &vars)).collect(),
        args: c.args.iter().flatten().map(|s| expand(s, &vars)).collect(),
        working_dir: c.working_dir.clone().unwrap_or_default(),
        envs: i.envs,
        mounts: i.mounts,
        labels: labels::new_container_labels(c, i.pod),
        annotations: labels::new_container_annotations(c, i.pod, i.restart_count),
        // <container>/<attempt>.log under the sandbox's log directory, as the kubelet names it.
        log_path: format!("{}/{}.log", c.name, i.restart_count),
        stdin: c.stdin.unwrap_or(false),
        stdin_once: c.stdin_once.unwrap_or(false),
        tty: c.tty.unwrap_or(false),
        linux: Some(api::LinuxContainerConfig {
            resources: Some(container_resources(c)),
            security_context: Some(security_context(i.pod, c)),
        }),
        ..Default::default()
    }
}

/// kubelet's `minimumGracePeriodInSeconds`: whatever a preStop hook used up, a container still
/// gets this long between SIGTERM and SIGKILL (unless the kill is forced).
pub(crate) const MINIMUM_GRACE_PERIOD: Duration = Duration::from_secs(2);

/// The grace period a forced kill gets (`kubectl delete --force --grace-period=0`, the pod gone
/// from the API server at once): one second between SIGTERM and SIGKILL, no preStop hook.
pub(crate) const FORCED_GRACE_PERIOD: Duration = Duration::from_secs(1);

/// When a termination must be over. It can only move earlier while the kill runs — a second
/// `kubectl delete --grace-period=N`, a forced delete — and the kill path watches it (kubelet
/// cancels the running SyncTerminatingPod and starts again with the shorter grace period).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    pub(crate) at: Instant,
    /// An override (a forced delete, a pod that already finished): StopContainer gets exactly
    /// what is left, without [`MINIMUM_GRACE_PERIOD`], and no preStop hook starts.
    pub(crate) forced: bool,
}

impl Deadline {
    pub(crate) fn after(grace: Duration, forced: bool) -> Deadline {
        Deadline { at: Instant::now() + grace, forced }
    }

    /// Whether `new` ends the termination sooner than `self` (and so replaces it).
    pub(crate) fn is_shortened_by(&self, new: &Deadline) -> bool {
        new.at < self.at || (new.forced && !self.forced && new.at <= self.at)
    }

    /// The timeout StopContainer gets at `now`: what is left in whole seconds (rounded up, CRI
    /// counts in seconds), and at least [`MINIMUM_GRACE_PERIOD`] unless forced.
    pub(crate) fn stop_timeout(&self, now: Instant) -> Duration {
        let left = self.at.saturating_duration_since(now);
        let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        let t = Duration::from_secs(secs);
        if self.forced { t } else { t.max(MINIMUM_GRACE_PERIOD) }
    }
}

/// A fixed deadline `grace` from now (nothing will shorten it).
pub(crate) fn fixed_deadline(grace: Duration, forced: bool) -> watch::Receiver<Deadline> {
    watch::channel(Deadline::after(grace, forced)).1
}

/// The container of the pod spec a running container belongs to.
pub(crate) fn container_spec<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    crate::volumemanager::downwardapi::find_container(pod, name)
}

/// What killing one container needs.
pub(crate) struct KillTarget<'a> {
    /// `None` for a pod the agent no longer knows (found in the runtime only): no hook, no event.
    pub(crate) pod: Option<&'a Pod>,
    pub(crate) container_id: &'a str,
    pub(crate) name: &'a str,
    /// The Killing event's message.
    pub(crate) message: &'a str,
    /// For an httpGet preStop hook without a host.
    pub(crate) pod_ips: &'a [String],
}

/// killContainer: the Killing event, the preStop hook bounded by the deadline, then
/// StopContainer with what is left of the grace period (at least 2 s). When the deadline moves
/// earlier meanwhile, a running hook is abandoned once the new deadline passes (at once when
/// forced), and a StopContainer in flight is cancelled and sent again with the new timeout
/// (containerd sends SIGTERM again and SIGKILL when the new timeout runs out).
pub(crate) async fn kill_container(
    runtime: &RemoteRuntime,
    hooks: &HandlerRunner,
    recorder: &Recorder,
    target: KillTarget<'_>,
    mut deadline: watch::Receiver<Deadline>,
) -> crate::Result<()> {
    let KillTarget { pod, container_id, name, message, pod_ips } = target;
    let mut d = *deadline.borrow_and_update();
    // Once the sender is gone the deadline is final; stop polling `changed()`, which would then
    // return at once forever.
    let mut watching = true;
    let spec = pod.and_then(|p| container_spec(p, name));
    if let Some(pod) = pod {
        let field = Some(events::container_field_path(pod, name));
        recorder.pod_event(pod, field, events::NORMAL, events::KILLING_CONTAINER, message);
    }

    // The preStop hook, if there is time for it.
    if let (Some(pod), Some(c)) = (pod, spec)
        && let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref())
        && !d.forced
        && d.at > Instant::now()
    {
        let started = Instant::now();
        let run = hooks.run(container_id, pod, c, hook, pod_ips);
        tokio::pin!(run);
        loop {
            tokio::select! {
                r = &mut run => {
                    if let Err(msg) = r {
                        let field = Some(events::container_field_path(pod, name));
                        recorder.pod_event(pod, field, events::WARNING, events::FAILED_PRE_STOP_HOOK, msg);
                    }
                    tracing::debug!(target: "kuberuntime", container = %name, ms = started.elapsed().as_millis() as u64, "preStop hook done");
                    break;
                }
                _ = tokio::time::sleep_until(d.at.into()) => {
                    tracing::info!(target: "kuberuntime", container = %name, pod = %pod_name(pod), "PreStop hook not completed in grace period");
                    break;
                }
                changed = deadline.changed(), if watching => match changed {
                    Ok(()) => {
                        d = *deadline.borrow_and_update();
                        if d.forced {
                            tracing::info!(target: "kuberuntime", container = %name, "forced kill: abandoning the preStop hook");
                            break;
                        }
                    }
                    Err(_) => watching = false,
                },
            }
        }
    }

    // SIGTERM, then SIGKILL after what is left.
    'stop: loop {
        let timeout = d.stop_timeout(Instant::now());
        tracing::debug!(target: "kuberuntime", container = %name, timeout_s = timeout.as_secs(), forced = d.forced, "StopContainer");
        let stop = runtime.stop_container(container_id, timeout);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                r = &mut stop => {
                    return match r {
                        Err(e) if !e.is_not_found() => Err(e),
                        _ => Ok(()),
                    };
                }
                changed = deadline.changed(), if watching => match changed {
                    Ok(()) => {
                        let new = *deadline.borrow_and_update();
                        if d.is_shortened_by(&new) {
                            tracing::info!(target: "kuberuntime", container = %name, forced = new.forced, "grace period shortened: stopping again");
                            d = new;
                            continue 'stop;
                        }
                    }
                    Err(_) => watching = false,
                },
            }
        }
    }
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn time_from_nanos(ns: i64) -> Option<DateTime<Utc>> {
    (ns > 0).then(|| Utc.timestamp_nanos(ns))
}

/// A CRI container status in the runtime-neutral form.
pub(crate) fn to_container_status(s: &api::ContainerStatus) -> kc::ContainerStatus {
    let state = match api::ContainerState::try_from(s.state) {
        Ok(api::ContainerState::ContainerCreated) => ContainerState::Created,
        Ok(api::ContainerState::ContainerRunning) => ContainerState::Running,
        Ok(api::ContainerState::ContainerExited) => ContainerState::Exited,
        _ => ContainerState::Unknown,
    };
    let meta = s.metadata.clone().unwrap_or_default();
    let restart_count = s
        .annotations
        .get(kc::CONTAINER_RESTART_COUNT_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(meta.attempt as i32);
    kc::ContainerStatus {
        id: s.id.clone(),
        name: s.labels.get(kc::CONTAINER_NAME_LABEL).cloned().unwrap_or(meta.name),
        state,
        created_at: time_from_nanos(s.created_at),
        started_at: time_from_nanos(s.started_at),
        finished_at: time_from_nanos(s.finished_at),
        exit_code: s.exit_code,
        image: s.image.as_ref().map(|i| if i.user_specified_image.is_empty() { i.image.clone() } else { i.user_specified_image.clone() }).unwrap_or_default(),
        image_ref: s.image_ref.clone(),
        restart_count,
        reason: s.reason.clone(),
        message: s.message.clone(),
        hash: labels::container_hash(&s.annotations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec,
        SecretKeySelector,
    };

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars = HashMap::from([("A".to_string(), "x".to_string())]);
        assert_eq!(expand("$(A)-$(B)-$$(A)-$", &vars), "x-$(B)-$(A)-$");
        assert_eq!(expand("é$(A)", &vars), "éx");
    }

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.uid = Some("u".into());
        p.metadata.labels = Some(BTreeMap::from([("app".to_string(), "web".to_string())]));
        p.spec = Some(PodSpec { node_name: Some("node1".into()), ..Default::default() });
        p
    }

    fn env(name: &str, value: Option<&str>, from: Option<EnvVarSource>) -> EnvVar {
        EnvVar { name: name.into(), value: value.map(String::from), value_from: from }
    }

    #[test]
    fn environment_from_every_source() {
        let c = Container {
            name: "c".into(),
            env_from: Some(vec![EnvFromSource {
                prefix: Some("CM_".into()),
                config_map_ref: Some(ConfigMapEnvSource { name: "cfg".into(), optional: None }),
                ..Default::default()
            }]),
            env: Some(vec![
                env("GREETING", Some("hello $(CM_who)"), None),
                env("KEY", None, Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector { name: "s".into(), key: "k".into(), optional: None }),
                    ..Default::default()
                })),
                env("NODE", None, Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { field_path: "spec.nodeName".into(), api_version: None }),
                    ..Default::default()
                })),
                env("APP", None, Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { field_path: "metadata.labels['app']".into(), api_version: None }),
                    ..Default::default()
                })),
                env("IP", None, Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { field_path: "status.podIP".into(), api_version: None }),
                    ..Default::default()
                })),
            ]),
            ..Default::default()
        };
        let mut objs = EnvObjects::default();
        objs.config_maps.insert("cfg".into(), Some(BTreeMap::from([("who".to_string(), "world".to_string())])));
        objs.secrets.insert("s".into(), Some(BTreeMap::from([("k".to_string(), "secret".to_string())])));
        let got = make_environment_variables(&pod(), &c, &objs, &["10.244.0.5".into()], "10.0.0.1").expect("env");
        let got: Vec<(String, String)> = got.into_iter().map(|kv| (kv.key, kv.value)).collect();
        let want = [
            ("CM_who", "world"),
            ("GREETING", "hello world"),
            ("KEY", "secret"),
            ("NODE", "node1"),
            ("APP", "web"),
            ("IP", "10.244.0.5"),
        ];
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
    }

    #[test]
    fn environment_from_resource_fields() {
        use k8s_openapi::api::core::v1::{ResourceFieldSelector, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let q = |s: &str| Quantity(s.to_string());
        let res = |name: &str, resource: &str, divisor: Option<&str>, container: Option<&str>| {
            env(name, None, Some(EnvVarSource {
                resource_field_ref: Some(ResourceFieldSelector {
                    container_name: container.map(String::from),
                    resource: resource.into(),
                    divisor: divisor.map(q),
                }),
                ..Default::default()
            }))
        };
        let c = Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([("memory".to_string(), q("64Mi"))])),
                requests: Some(BTreeMap::from([("cpu".to_string(), q("100m")), ("memory".to_string(), q("32Mi"))])),
                ..Default::default()
            }),
            env: Some(vec![
                res("CPU_REQUEST", "requests.cpu", None, None),
                res("CPU_REQUEST_M", "requests.cpu", Some("1m"), Some("c")),
                res("CPU_LIMIT", "limits.cpu", None, None),
                res("MEM_LIMIT_MI", "limits.memory", Some("1Mi"), None),
                res("MEM_REQUEST", "requests.memory", None, None),
                res("SIDECAR_MEM", "limits.memory", Some("1Mi"), Some("side")),
            ]),
            ..Default::default()
        };
        let side = Container {
            name: "side".into(),
            resources: Some(ResourceRequirements {
                limits: Some(BTreeMap::from([("memory".to_string(), q("16Mi"))])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut p = pod();
        if let Some(spec) = p.spec.as_mut() {
            spec.containers = vec![c.clone(), side];
        }
        let objs = EnvObjects { node_allocatable: BTreeMap::from([("cpu".to_string(), q("3"))]), ..Default::default() };
        let got = make_environment_variables(&p, &c, &objs, &[], "").expect("env");
        let got: Vec<(String, String)> = got.into_iter().map(|kv| (kv.key, kv.value)).collect();
        let want = [
            ("CPU_REQUEST", "1"),
            ("CPU_REQUEST_M", "100"),
            ("CPU_LIMIT", "3"),
            ("MEM_LIMIT_MI", "64"),
            ("MEM_REQUEST", "33554432"),
            ("SIDECAR_MEM", "16"),
        ];
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));

        let mut bad = c.clone();
        bad.env = Some(vec![res("X", "limits.memory", None, Some("ghost"))]);
        let err = make_environment_variables(&p, &bad, &objs, &[], "").expect_err("unknown container");
        assert_eq!(err, "env \"X\": container \"ghost\" not found in the pod");
    }

    #[test]
    fn service_variables_come_last_lose_to_the_containers_own_and_expand() {
        let c = Container {
            name: "c".into(),
            env: Some(vec![env("WEB_SERVICE_PORT", Some("8080"), None), env("URL", Some("http://$(WEB_SERVICE_HOST):$(WEB_SERVICE_PORT)/"), None)]),
            ..Default::default()
        };
        let objs = EnvObjects {
            service_env: Ok(vec![("WEB_SERVICE_HOST".into(), "10.96.0.20".into()), ("WEB_SERVICE_PORT".into(), "80".into())]),
            ..Default::default()
        };
        let got: Vec<(String, String)> = make_environment_variables(&pod(), &c, &objs, &[], "").expect("env").into_iter().map(|kv| (kv.key, kv.value)).collect();
        let want = [("WEB_SERVICE_PORT", "8080"), ("URL", "http://10.96.0.20:8080/"), ("WEB_SERVICE_HOST", "10.96.0.20")];
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
        let unread = EnvObjects { service_env: Err("the server is unavailable".into()), ..Default::default() };
        let err = make_environment_variables(&pod(), &c, &unread, &[], "").expect_err("services unread");
        assert_eq!(err, "cannot read the Services for their environment variables: the server is unavailable");
    }

    #[test]
    fn missing_references_are_config_errors_unless_optional() {
        let mut c = Container {
            name: "c".into(),
            env: Some(vec![env("X", None, Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector { name: "nope".into(), key: "k".into(), optional: None }),
                ..Default::default()
            }))]),
            ..Default::default()
        };
        let objs = EnvObjects::default();
        let err = make_environment_variables(&pod(), &c, &objs, &[], "").expect_err("missing configmap");
        assert_eq!(err, "configmap \"nope\" not found");
        if let Some(e) = c.env.as_mut().and_then(|e| e.first_mut()).and_then(|e| e.value_from.as_mut()).and_then(|v| v.config_map_key_ref.as_mut()) {
            e.optional = Some(true);
        }
        assert!(make_environment_variables(&pod(), &c, &objs, &[], "").expect("optional").is_empty());
    }

    #[test]
    fn status_round_trip() {
        let s = api::ContainerStatus {
            id: "abc".into(),
            metadata: Some(api::ContainerMetadata { name: "app".into(), attempt: 2 }),
            state: api::ContainerState::ContainerExited as i32,
            created_at: 1_000_000_000,
            started_at: 2_000_000_000,
            finished_at: 3_000_000_000,
            exit_code: 3,
            reason: "Error".into(),
            annotations: HashMap::from([(kc::CONTAINER_HASH_ANNOTATION.to_string(), "ff".to_string())]),
            ..Default::default()
        };
        let c = to_container_status(&s);
        assert_eq!((c.name.as_str(), c.state, c.restart_count, c.exit_code, c.hash), ("app", ContainerState::Exited, 2, 3, 255));
        assert_eq!(c.finished_at.map(|t| t.timestamp()), Some(3));
    }
}
