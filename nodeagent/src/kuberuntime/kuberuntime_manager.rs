//! Mirrors kubelet's kuberuntime/kuberuntime_manager.go: `compute_pod_actions` decides what a pod
//! needs (a pure function, table-tested below), and [`RuntimeManager::sync_pod`] carries it out
//! through the CRI — steps 5 to 7 of SyncPod: the sandbox, the init containers one by one, the
//! app containers in parallel.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ::api::pod::{app_containers, init_containers, restart_policy};
use chrono::Utc;
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::Instrument;

use super::kuberuntime_container::{self as kcont, ContainerInputs, EnvObjects};
use super::kuberuntime_image::ImageManager;
use super::kuberuntime_sandbox as ksandbox;
use crate::container::{self as kc, ContainerState, PodStatus, SandboxStatus};
use crate::cri::RemoteRuntime;
use crate::error::Result;
use crate::events::{self, Recorder};
use crate::flowcontrol::Backoff;
use crate::lifecycle::handlers::HandlerRunner;
use crate::prober::PodProbeResults;
use crate::volumemanager::MountedVolumes;

/// Waiting reasons a failed start leaves on a container (kubelet's container/sync_result.go).
pub(crate) const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
pub(crate) const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";
pub(crate) const CREATE_CONTAINER_ERROR: &str = "CreateContainerError";
pub(crate) const RUN_CONTAINER_ERROR: &str = "RunContainerError";
/// The postStart hook failed: the container was killed (kubelet's ErrPostStartHook).
pub(crate) const POST_START_HOOK_ERROR: &str = "PostStartHookError";

/// What a pod needs, as decided by [`compute_pod_actions`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodActions {
    /// Stop every container and the sandbox (before a new sandbox, or because the pod is done).
    pub(crate) kill_pod: bool,
    pub(crate) create_sandbox: bool,
    /// The current sandbox (empty when there is none).
    pub(crate) sandbox_id: String,
    /// The attempt number of the sandbox to create.
    pub(crate) attempt: u32,
    /// The init container to start next (index in spec.initContainers).
    pub(crate) next_init_container_to_start: Option<usize>,
    /// App containers to start (indices in spec.containers).
    pub(crate) containers_to_start: Vec<usize>,
    /// Running containers to stop: (container ID, name, why).
    pub(crate) containers_to_kill: Vec<(String, String, String)>,
}

/// podSandboxChanged: whether the pod needs a new sandbox, the attempt it gets, the current one.
fn pod_sandbox_changed(pod: &Pod, status: &PodStatus) -> (bool, u32, String) {
    let Some(latest) = status.sandboxes.iter().max_by_key(|s| (s.created_at, s.attempt)) else {
        return (true, 0, String::new());
    };
    let ready = status.sandboxes.iter().filter(|s| s.ready).count();
    if ready > 1 || !latest.ready || latest.host_network != ksandbox::host_network(pod) {
        return (true, latest.attempt + 1, latest.id.clone());
    }
    // A pod-network sandbox without an IP lost its network (CNI failed or was torn down).
    if !latest.host_network && latest.ips.is_empty() {
        return (true, latest.attempt + 1, latest.id.clone());
    }
    (false, latest.attempt, latest.id.clone())
}

pub(crate) use crate::status::should_container_be_restarted;

fn container_succeeded(c: &Container, status: &PodStatus) -> bool {
    status.find_container(&c.name).is_some_and(|s| s.state == ContainerState::Exited && s.exit_code == 0)
}

/// computePodActions: the pure decision of what `pod` needs given what the runtime runs and
/// what the prober says about its running containers (a failed liveness or startup probe kills
/// the container; it is started again unless the restart policy is Never).
pub(crate) fn compute_pod_actions(pod: &Pod, status: &PodStatus, probes: &PodProbeResults) -> PodActions {
    let (changed, attempt, sandbox_id) = pod_sandbox_changed(pod, status);
    let mut a = PodActions { kill_pod: changed, create_sandbox: changed, sandbox_id, attempt, ..Default::default() };
    let inits = init_containers(pod);
    let apps = app_containers(pod);

    if changed {
        // A pod that must not restart and already ran gets no new sandbox.
        if restart_policy(pod) == "Never" && attempt != 0 && !status.containers.is_empty() {
            a.create_sandbox = false;
            return a;
        }
        if !inits.is_empty() {
            a.next_init_container_to_start = Some(0);
            return a;
        }
        a.containers_to_start = apps
            .iter()
            .enumerate()
            .filter(|(_, c)| !(restart_policy(pod) == "OnFailure" && container_succeeded(c, status)))
            .map(|(i, _)| i)
            .collect();
        if a.containers_to_start.is_empty() {
            a.create_sandbox = false;
        }
        return a;
    }

    // Init containers run one at a time, each to success, before any app container.
    if !inits.is_empty() {
        for (i, c) in inits.iter().enumerate() {
            match status.find_container(&c.name) {
                None => {
                    a.next_init_container_to_start = Some(i);
                    return a;
                }
                Some(s) if s.state == ContainerState::Running || s.state == ContainerState::Created => return a,
                Some(s) if s.state == ContainerState::Exited && s.exit_code == 0 => continue,
                Some(_) => {
                    // Failed (or unknown): a Never pod fails; otherwise the container is retried.
                    if restart_policy(pod) == "Never" {
                        a.kill_pod = true;
                    } else {
                        a.next_init_container_to_start = Some(i);
                    }
                    return a;
                }
            }
        }
    }

    let mut keep = 0;
    for (i, c) in apps.iter().enumerate() {
        let s = status.find_container(&c.name);
        match s {
            Some(s) if s.state == ContainerState::Running => {
                let want = super::labels::hash_container(c);
                if s.hash != 0 && s.hash != want {
                    a.containers_to_kill.push((
                        s.id.clone(),
                        c.name.clone(),
                        format!("Container {} definition changed, will be restarted", c.name),
                    ));
                    a.containers_to_start.push(i);
                } else if let Some(probe) = probes.kill_reason(&s.id) {
                    let restart = restart_policy(pod) != "Never";
                    let mut message = format!("Container {} failed {} probe", c.name, probe.to_string().to_lowercase());
                    if restart {
                        message.push_str(", will be restarted");
                        a.containers_to_start.push(i);
                    }
                    a.containers_to_kill.push((s.id.clone(), c.name.clone(), message));
                } else {
                    keep += 1;
                }
            }
            _ => {
                if should_container_be_restarted(c, pod, status) {
                    a.containers_to_start.push(i);
                }
            }
        }
    }
    if keep == 0 && a.containers_to_start.is_empty() {
        a.kill_pod = true;
    }
    a
}

/// What the agent needs besides the pod to start its containers (gathered by SyncPod steps 1–4).
pub(crate) struct SyncInputs<'a> {
    pub(crate) volumes: &'a MountedVolumes,
    pub(crate) env_objects: &'a EnvObjects,
    pub(crate) pull_secrets: &'a [serde_json::Value],
    pub(crate) etc_hosts: Option<PathBuf>,
    pub(crate) cgroup_parent: String,
    pub(crate) host_ip: String,
    /// The prober's liveness and startup results for the pod's containers.
    pub(crate) probes: PodProbeResults,
}

/// The outcome of one SyncPod: per-container waiting reasons for the status, and when the pod
/// should be looked at again (the end of a backoff).
#[derive(Debug, Default)]
pub(crate) struct PodSyncResult {
    pub(crate) waiting_reasons: HashMap<String, (String, String)>,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) error: Option<String>,
}

pub(crate) struct RuntimeManager {
    pub(crate) runtime: RemoteRuntime,
    pub(crate) images: ImageManager,
    /// Runs postStart and preStop hooks.
    pub(crate) hooks: HandlerRunner,
    recorder: Recorder,
    logs_root: PathBuf,
    /// The pods' resolv.conf (kubelet's dns.Configurer).
    dns: crate::network::dns::Configurer,
    crash_backoff: Mutex<Backoff>,
}

impl RuntimeManager {
    pub(crate) fn new(runtime: RemoteRuntime, recorder: Recorder, logs_root: PathBuf, dns: crate::network::dns::Configurer) -> Self {
        RuntimeManager {
            images: ImageManager::new(runtime.clone(), recorder.clone()),
            hooks: HandlerRunner::new(runtime.clone()),
            runtime,
            recorder,
            logs_root,
            dns,
            // CrashLoopBackOff: 10 s doubling to 5 min, forgotten after 10 min of running.
            crash_backoff: Mutex::new(Backoff::new(Duration::from_secs(10), Duration::from_secs(300))),
        }
    }

    pub(crate) fn logs_root(&self) -> &std::path::Path {
        &self.logs_root
    }

    /// GetPodStatus: the pod's sandboxes and containers as the runtime reports them.
    pub(crate) async fn get_pod_status(&self, uid: &str, name: &str, namespace: &str) -> Result<PodStatus> {
        let label = HashMap::from([(kc::POD_UID_LABEL.to_string(), uid.to_string())]);
        let sandboxes = self
            .runtime
            .list_pod_sandbox(Some(api::PodSandboxFilter { label_selector: label.clone(), ..Default::default() }))
            .await?;
        let mut status = PodStatus { uid: uid.into(), name: name.into(), namespace: namespace.into(), ..Default::default() };
        for sb in &sandboxes {
            let s = match self.runtime.pod_sandbox_status(&sb.id).await {
                Ok(s) => s,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            };
            let ips: Vec<String> = s
                .network
                .iter()
                .flat_map(|n| std::iter::once(n.ip.clone()).chain(n.additional_ips.iter().map(|i| i.ip.clone())))
                .filter(|ip| !ip.is_empty())
                .collect();
            let host_network = s
                .linux
                .as_ref()
                .and_then(|l| l.namespaces.as_ref())
                .and_then(|n| n.options.as_ref())
                .is_some_and(|o| o.network == api::NamespaceMode::Node as i32);
            status.sandboxes.push(SandboxStatus {
                id: s.id.clone(),
                ready: s.state == api::PodSandboxState::SandboxReady as i32,
                created_at: (s.created_at > 0).then(|| chrono::TimeZone::timestamp_nanos(&Utc, s.created_at)),
                attempt: s.metadata.as_ref().map(|m| m.attempt).unwrap_or(0),
                ips,
                host_network,
            });
        }
        status.sandboxes.sort_by_key(|s| std::cmp::Reverse((s.created_at, s.attempt)));
        status.ips = status.sandboxes.iter().find(|s| s.ready).map(|s| s.ips.clone()).unwrap_or_default();
        let containers = self
            .runtime
            .list_containers(Some(api::ContainerFilter { label_selector: label, ..Default::default() }))
            .await?;
        for c in &containers {
            match self.runtime.container_status(&c.id).await {
                Ok(s) => status.containers.push(kcont::to_container_status(&s)),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        status.containers.sort_by_key(|c| std::cmp::Reverse((c.created_at, c.restart_count)));
        Ok(status)
    }

    /// GetPods: every pod the runtime has sandboxes or containers for, by UID, with its name and
    /// namespace (used to find pods no source wants any more, and to adopt pods after a restart).
    pub(crate) async fn get_pods(&self) -> Result<HashMap<String, (String, String)>> {
        let mut pods = HashMap::new();
        let sandboxes = self.runtime.list_pod_sandbox(None).await?;
        for s in &sandboxes {
            if let Some(uid) = s.labels.get(kc::POD_UID_LABEL) {
                let m = s.metadata.clone().unwrap_or_default();
                pods.insert(uid.clone(), (m.namespace, m.name));
            }
        }
        for c in self.runtime.list_containers(None).await? {
            if let Some(uid) = c.labels.get(kc::POD_UID_LABEL) {
                pods.entry(uid.clone()).or_insert_with(|| {
                    let l = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
                    (l(kc::POD_NAMESPACE_LABEL), l(kc::POD_NAME_LABEL))
                });
            }
        }
        Ok(pods)
    }

    /// Steps 5–7 of SyncPod for the decided `actions`.
    pub(crate) async fn sync_pod(&self, pod: &Pod, status: &PodStatus, inputs: &SyncInputs<'_>) -> PodSyncResult {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        // What to do, and the kill of what must go first: a step of its own in `kubelab trace`,
        // so that no time between step 4 and the sandbox goes unaccounted.
        let span = tracing::info_span!(target: "kubelet::sync_pod", "compute_pod_actions", pod_uid = %uid);
        let decided = async {
            let actions = compute_pod_actions(pod, status, &inputs.probes);
            tracing::debug!(target: "kuberuntime", pod_uid = %uid, ?actions, "computePodActions");
            let killed = if actions.kill_pod {
                if !status.sandboxes.is_empty() || status.running_containers().next().is_some() {
                    if actions.create_sandbox {
                        self.recorder.pod_event(pod, None, events::NORMAL, events::SANDBOX_CHANGED, "Pod sandbox changed, it will be killed and re-created.");
                    }
                    self.kill_pod(Some(pod), status, self.grace(pod)).await.map_err(|e| format!("killing pod: {e}"))
                } else {
                    Ok(())
                }
            } else {
                let mut killed = Ok(());
                for (id, name, message) in &actions.containers_to_kill {
                    let target = kcont::KillTarget { pod: Some(pod), container_id: id, name, message, pod_ips: &status.ips };
                    let deadline = kcont::fixed_deadline(self.grace(pod), false);
                    if let Err(e) = kcont::kill_container(&self.runtime, &self.hooks, &self.recorder, target, deadline).await {
                        killed = Err(format!("killing container {name}: {e}"));
                        break;
                    }
                }
                killed
            };
            (actions, killed)
        };
        let (actions, killed) = decided.instrument(span).await;
        let mut result = PodSyncResult::default();
        if let Err(e) = killed {
            result.error = Some(e);
            return result;
        }

        // Step 5: create the pod sandbox (CNI runs inside containerd's RunPodSandbox).
        let (dns_config, dns_warnings) = self.dns.get_pod_dns(pod);
        let sandbox_config = ksandbox::generate_pod_sandbox_config(
            pod,
            actions.attempt,
            &self.logs_root,
            &inputs.cgroup_parent,
            dns_config.clone(),
        );
        let mut sandbox_id = actions.sandbox_id.clone();
        let mut pod_ips = status.ips.clone();
        if actions.create_sandbox {
            // The DNS warnings once per sandbox, not on every sync.
            for w in dns_warnings {
                self.recorder.pod_event(pod, None, events::WARNING, w.reason, w.message);
            }
            let span = tracing::info_span!(target: "kubelet::sync_pod", "step5_run_pod_sandbox", pod_uid = %uid, attempt = actions.attempt, pod_ip = tracing::field::Empty, error = tracing::field::Empty);
            let started = Instant::now();
            failpoint!("syncPodBeforeRunPodSandbox");
            match self.runtime.run_pod_sandbox(sandbox_config.clone(), "").instrument(span.clone()).await {
                Ok(id) => {
                    failpoint!("syncPodAfterRunPodSandbox");
                    sandbox_id = id;
                    pod_ips = match self.runtime.pod_sandbox_status(&sandbox_id).await {
                        Ok(s) => s.network.map(|n| vec![n.ip]).unwrap_or_default().into_iter().filter(|i| !i.is_empty()).collect(),
                        Err(_) => vec![],
                    };
                    if let Some(ip) = pod_ips.first() {
                        span.record("pod_ip", ip.as_str());
                    }
                    span.in_scope(|| tracing::info!(target: "kubelet::sync_pod", pod_uid = %uid, sandbox = %sandbox_id, ips = ?pod_ips, ms = started.elapsed().as_millis() as u64, "sandbox created"));
                }
                Err(e) => {
                    let message = format!("Failed to create pod sandbox: {e}");
                    span.record("error", message.as_str());
                    self.recorder.pod_event(pod, None, events::WARNING, events::FAILED_CREATE_POD_SANDBOX, &message);
                    result.error = Some(message);
                    result.retry_after = Some(Duration::from_secs(2));
                    return result;
                }
            }
        }
        if sandbox_id.is_empty() {
            return result;
        }
        let sandbox_config = if actions.create_sandbox {
            sandbox_config
        } else {
            // The existing sandbox's attempt, so the config matches what the runtime has.
            let attempt = status.sandboxes.first().map(|s| s.attempt).unwrap_or(0);
            ksandbox::generate_pod_sandbox_config(pod, attempt, &self.logs_root, &inputs.cgroup_parent, dns_config)
        };
        // A fresh sandbox has no containers yet: start from an empty history for naming attempts,
        // but keep restart counts growing across sandboxes as the kubelet does.
        let ctx = StartContext { pod, status, sandbox_id: &sandbox_id, sandbox_config: &sandbox_config, pod_ips: &pod_ips, inputs };

        // Step 6: init containers strictly in order — start the next one and come back when it exits.
        if let Some(i) = actions.next_init_container_to_start {
            let c = &init_containers(pod)[i];
            let span = tracing::info_span!(target: "kubelet::sync_pod", "step6_init_container", pod_uid = %uid, container = %c.name, error = tracing::field::Empty);
            if let Err((reason, message, retry)) = self.start_container(&ctx, c).instrument(span.clone()).await {
                span.record("error", format!("{reason}: {message}"));
                result.waiting_reasons.insert(c.name.clone(), (reason, message));
                result.retry_after = retry;
            }
            return result;
        }

        // Step 7: app containers, all at once.
        let ctx = &ctx;
        let starts = actions.containers_to_start.iter().map(|&i| {
            let c = &app_containers(pod)[i];
            let span = tracing::info_span!(target: "kubelet::sync_pod", "step7_container", pod_uid = %uid, container = %c.name, error = tracing::field::Empty);
            async move {
                let r = self.start_container(ctx, c).instrument(span.clone()).await;
                if let Err((reason, message, _)) = &r {
                    span.record("error", format!("{reason}: {message}"));
                }
                (c.name.clone(), r)
            }
        });
        for (name, r) in futures::future::join_all(starts).await {
            if let Err((reason, message, retry)) = r {
                result.waiting_reasons.insert(name, (reason, message));
                result.retry_after = match (result.retry_after, retry) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        result
    }

    /// setTerminationGracePeriod: the pod's deletion grace period if it is being deleted, else
    /// its terminationGracePeriodSeconds (default 30).
    fn grace(&self, pod: &Pod) -> Duration {
        let g = pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
            .unwrap_or(30);
        Duration::from_secs(g.max(0) as u64)
    }

    /// startContainer: backoff check, image, config, create, start. An error is the waiting reason,
    /// its message, and when to try again.
    async fn start_container(
        &self,
        ctx: &StartContext<'_>,
        c: &Container,
    ) -> Result<(), (String, String, Option<Duration>)> {
        let pod = ctx.pod;
        let field = Some(events::container_field_path(pod, &c.name));
        let previous = ctx.status.find_container(&c.name);
        let pod_desc = format!(
            "{}_{}({})",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.uid.as_deref().unwrap_or_default()
        );

        // CrashLoopBackOff: a container that exited waits 10 s, 20 s, … 5 min before it restarts.
        if let Some(prev) = previous.filter(|p| p.state == ContainerState::Exited) {
            let key = format!("{}_{}", pod.metadata.uid.as_deref().unwrap_or_default(), c.name);
            let finished = prev.finished_at.unwrap_or_else(Utc::now);
            let since_exit = (Utc::now() - finished).to_std().unwrap_or_default();
            let now = Instant::now();
            let exited_at = now.checked_sub(since_exit).unwrap_or(now);
            let mut b = self.crash_backoff.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(left) = b.remaining(&key, exited_at, now) {
                let message = format!("back-off {}s restarting failed container={} pod={pod_desc}", b.get(&key).as_secs(), c.name);
                drop(b);
                self.recorder.pod_event(pod, field, events::WARNING, events::BACK_OFF_START_CONTAINER, "Back-off restarting failed container");
                return Err((CRASH_LOOP_BACK_OFF.into(), message, Some(left)));
            }
            b.next(&key, now);
        }

        let image_ref = self.images.ensure_image_exists(pod, c, ctx.inputs.pull_secrets, ctx.sandbox_config).await.map_err(|e| {
            // kubelet's startContainer: "Error: <the reason>" (ErrImagePull, ImagePullBackOff, …).
            self.recorder.pod_event(pod, field.clone(), events::WARNING, events::FAILED_TO_CREATE_CONTAINER, format!("Error: {}", e.reason));
            (e.reason.to_string(), e.message, Some(Duration::from_secs(10)))
        })?;

        let config_err = |m: String| {
            self.recorder.pod_event(pod, field.clone(), events::WARNING, events::FAILED_TO_CREATE_CONTAINER, format!("Error: {m}"));
            (CREATE_CONTAINER_CONFIG_ERROR.to_string(), m, Some(Duration::from_secs(5)))
        };
        let envs = kcont::make_environment_variables(pod, c, ctx.inputs.env_objects, ctx.pod_ips, &ctx.inputs.host_ip)
            .map_err(config_err)?;
        let etc_hosts = if ksandbox::host_network(pod) { None } else { ctx.inputs.etc_hosts.as_deref() };
        let mounts = kcont::make_mounts(c, ctx.inputs.volumes, etc_hosts).map_err(config_err)?;
        let restart_count = previous.map(|p| p.restart_count as u32 + 1).unwrap_or(0);
        let config = kcont::generate_container_config(ContainerInputs { pod, container: c, restart_count, image_ref: &image_ref, envs, mounts });

        failpoint!("syncPodBeforeCreateContainer");
        let id = self
            .runtime
            .create_container(ctx.sandbox_id, config, ctx.sandbox_config.clone())
            .await
            .map_err(|e| {
                let m = e.to_string();
                self.recorder.pod_event(pod, field.clone(), events::WARNING, events::FAILED_TO_CREATE_CONTAINER, format!("Error: {m}"));
                (CREATE_CONTAINER_ERROR.to_string(), m, Some(Duration::from_secs(5)))
            })?;
        self.recorder.pod_event(pod, field.clone(), events::NORMAL, events::CREATED_CONTAINER, format!("Created container {}", c.name));
        failpoint!("syncPodAfterCreateContainer");
        self.runtime.start_container(&id).await.map_err(|e| {
            let m = e.to_string();
            self.recorder.pod_event(pod, field.clone(), events::WARNING, events::FAILED_TO_START_CONTAINER, format!("Error: {m}"));
            (RUN_CONTAINER_ERROR.to_string(), m, Some(Duration::from_secs(5)))
        })?;
        self.recorder.pod_event(pod, field.clone(), events::NORMAL, events::STARTED_CONTAINER, format!("Started container {}", c.name));

        // The postStart hook runs right after the start, while the container runs; if it fails,
        // the container is killed and the restart policy decides what comes next.
        if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref())
            && let Err(message) = self.hooks.run(&id, pod, c, hook, ctx.pod_ips).await
        {
            self.recorder.pod_event(pod, field, events::WARNING, events::FAILED_POST_START_HOOK, &message);
            let target = kcont::KillTarget {
                pod: Some(pod),
                container_id: &id,
                name: &c.name,
                message: events::FAILED_POST_START_HOOK,
                pod_ips: ctx.pod_ips,
            };
            let deadline = kcont::fixed_deadline(self.grace(pod), false);
            if let Err(e) = kcont::kill_container(&self.runtime, &self.hooks, &self.recorder, target, deadline).await {
                tracing::warn!(target: "kuberuntime", container = %c.name, error = %e, "killing the container after its postStart hook failed");
            }
            return Err((POST_START_HOOK_ERROR.to_string(), message, Some(Duration::from_secs(1))));
        }
        Ok(())
    }

    /// killPodWithSyncResult: stop every running container (in parallel, each with the grace
    /// period and its preStop hook), then every sandbox.
    pub(crate) async fn kill_pod(&self, pod: Option<&Pod>, status: &PodStatus, grace: Duration) -> Result<()> {
        self.kill_pod_until(pod, status, kcont::fixed_deadline(grace, false)).await
    }

    /// [`kill_pod`](Self::kill_pod) against a deadline that may move earlier while the
    /// containers stop (a shorter `kubectl delete --grace-period`, a forced delete).
    pub(crate) async fn kill_pod_until(
        &self,
        pod: Option<&Pod>,
        status: &PodStatus,
        deadline: tokio::sync::watch::Receiver<kcont::Deadline>,
    ) -> Result<()> {
        let stops = status.running_containers().map(|c| {
            let deadline = deadline.clone();
            async move {
                let message = format!("Stopping container {}", c.name);
                let target = kcont::KillTarget { pod, container_id: &c.id, name: &c.name, message: &message, pod_ips: &status.ips };
                kcont::kill_container(&self.runtime, &self.hooks, &self.recorder, target, deadline).await
            }
        });
        for r in futures::future::join_all(stops).await {
            r?;
        }
        for s in status.sandboxes.iter().filter(|s| s.ready) {
            match self.runtime.stop_pod_sandbox(&s.id).await {
                Err(e) if !e.is_not_found() => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Remove every container and sandbox of a pod that is gone (deleted, or no longer wanted).
    pub(crate) async fn remove_pod(&self, status: &PodStatus) -> Result<()> {
        for c in &status.containers {
            self.runtime.remove_container(&c.id).await?;
        }
        for s in &status.sandboxes {
            // A sandbox whose CNI setup failed cannot be stopped until CNI works; remove anyway.
            if let Err(e) = self.runtime.stop_pod_sandbox(&s.id).await
                && !e.is_not_found()
            {
                tracing::warn!(target: "kuberuntime", sandbox = %s.id, error = %e, "stopping sandbox before removal");
            }
            self.runtime.remove_pod_sandbox(&s.id).await?;
        }
        Ok(())
    }

    /// Forget crash-loop history older than twice the longest delay.
    pub(crate) fn gc_backoff(&self) {
        self.crash_backoff.lock().unwrap_or_else(|e| e.into_inner()).gc(Instant::now());
    }
}

struct StartContext<'a> {
    pod: &'a Pod,
    status: &'a PodStatus,
    sandbox_id: &'a str,
    sandbox_config: &'a api::PodSandboxConfig,
    pod_ips: &'a [String],
    inputs: &'a SyncInputs<'a>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(policy: &str, inits: &[&str], apps: &[&str]) -> Pod {
        let c = |n: &&str| Container { name: n.to_string(), image: Some("busybox:1.36".into()), ..Default::default() };
        let mut p = Pod::default();
        p.metadata.uid = Some("u".into());
        p.spec = Some(PodSpec {
            restart_policy: Some(policy.into()),
            init_containers: (!inits.is_empty()).then(|| inits.iter().map(c).collect()),
            containers: apps.iter().map(c).collect(),
            ..Default::default()
        });
        p
    }

    fn sandbox(ready: bool, attempt: u32) -> SandboxStatus {
        SandboxStatus {
            id: format!("sb{attempt}"),
            ready,
            created_at: Some(Utc.timestamp_opt(attempt as i64, 0).single().unwrap_or_default()),
            attempt,
            ips: vec!["10.244.0.2".into()],
            host_network: false,
        }
    }

    fn container(p: &Pod, name: &str, state: ContainerState, exit: i32, restarts: i32) -> kc::ContainerStatus {
        let spec = p.spec.as_ref().expect("spec");
        let c = spec.containers.iter().chain(spec.init_containers.iter().flatten()).find(|c| c.name == name).expect("container");
        kc::ContainerStatus {
            id: format!("{name}-{restarts}"),
            name: name.into(),
            state,
            created_at: Some(Utc.timestamp_opt(100 + restarts as i64, 0).single().unwrap_or_default()),
            started_at: None,
            finished_at: None,
            exit_code: exit,
            image: String::new(),
            image_ref: String::new(),
            restart_count: restarts,
            reason: String::new(),
            message: String::new(),
            hash: super::super::labels::hash_container(c),
        }
    }

    fn status(sandboxes: Vec<SandboxStatus>, containers: Vec<kc::ContainerStatus>) -> PodStatus {
        PodStatus { sandboxes, containers, ..Default::default() }
    }

    use ContainerState::{Exited, Running};

    #[test]
    fn compute_pod_actions_table() {
        let always = pod("Always", &[], &["a", "b"]);
        let never = pod("Never", &[], &["a"]);
        let onfail = pod("OnFailure", &[], &["a", "b"]);
        let init = pod("Always", &["i1", "i2"], &["a"]);
        let init_never = pod("Never", &["i1"], &["a"]);

        struct Case {
            name: &'static str,
            pod: Pod,
            status: PodStatus,
            want: PodActions,
        }
        let start = |v: Vec<usize>| PodActions { containers_to_start: v, ..Default::default() };
        let cases = vec![
            Case {
                name: "new pod: sandbox, then every app container",
                pod: always.clone(),
                status: status(vec![], vec![]),
                want: PodActions { kill_pod: true, create_sandbox: true, containers_to_start: vec![0, 1], ..Default::default() },
            },
            Case {
                name: "all running: nothing to do",
                pod: always.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&always, "a", Running, 0, 0), container(&always, "b", Running, 0, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "one exited under Always: restart it",
                pod: always.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&always, "a", Running, 0, 0), container(&always, "b", Exited, 1, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), ..start(vec![1]) },
            },
            Case {
                name: "sandbox died: new sandbox with the next attempt",
                pod: always.clone(),
                status: status(vec![sandbox(false, 0)], vec![container(&always, "a", Exited, 137, 0)]),
                want: PodActions { kill_pod: true, create_sandbox: true, sandbox_id: "sb0".into(), attempt: 1, containers_to_start: vec![0, 1], ..Default::default() },
            },
            Case {
                name: "Never, container done: kill the pod, nothing restarts",
                pod: never.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&never, "a", Exited, 0, 0)]),
                want: PodActions { kill_pod: true, sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "Never, sandbox gone after the run: no new sandbox",
                pod: never.clone(),
                status: status(vec![sandbox(false, 0)], vec![container(&never, "a", Exited, 1, 0)]),
                want: PodActions { kill_pod: true, sandbox_id: "sb0".into(), attempt: 1, ..Default::default() },
            },
            Case {
                name: "OnFailure: restart the failed one, leave the succeeded one",
                pod: onfail.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&onfail, "a", Exited, 0, 0), container(&onfail, "b", Exited, 2, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), ..start(vec![1]) },
            },
            Case {
                name: "init containers: the first one first",
                pod: init.clone(),
                status: status(vec![], vec![]),
                want: PodActions { kill_pod: true, create_sandbox: true, next_init_container_to_start: Some(0), ..Default::default() },
            },
            Case {
                name: "init container running: wait",
                pod: init.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&init, "i1", Running, 0, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "first init done: the second",
                pod: init.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&init, "i1", Exited, 0, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), next_init_container_to_start: Some(1), ..Default::default() },
            },
            Case {
                name: "init failed under Always: retry it",
                pod: init.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&init, "i1", Exited, 1, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), next_init_container_to_start: Some(0), ..Default::default() },
            },
            Case {
                name: "init failed under Never: the pod fails",
                pod: init_never.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&init_never, "i1", Exited, 1, 0)]),
                want: PodActions { kill_pod: true, sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "inits done: the app containers",
                pod: init.clone(),
                status: status(vec![sandbox(true, 0)], vec![container(&init, "i1", Exited, 0, 0), container(&init, "i2", Exited, 0, 0)]),
                want: PodActions { sandbox_id: "sb0".into(), ..start(vec![0]) },
            },
        ];
        for c in cases {
            assert_eq!(compute_pod_actions(&c.pod, &c.status, &PodProbeResults::default()), c.want, "{}", c.name);
        }
    }

    #[test]
    fn compute_pod_actions_with_probe_results() {
        use crate::prober::ProbeResult::{Failure, Success, Unknown};
        let always = pod("Always", &[], &["a", "b"]);
        let never = pod("Never", &[], &["a"]);
        let running = |p: &Pod, names: &[&str]| {
            status(vec![sandbox(true, 0)], names.iter().map(|n| container(p, n, Running, 0, 0)).collect())
        };
        let results = |liveness: &[(&str, crate::prober::ProbeResult)], startup: &[(&str, crate::prober::ProbeResult)]| PodProbeResults {
            liveness: liveness.iter().map(|(id, r)| (id.to_string(), *r)).collect(),
            startup: startup.iter().map(|(id, r)| (id.to_string(), *r)).collect(),
        };
        let kill = |id: &str, name: &str, why: &str| (id.to_string(), name.to_string(), why.to_string());
        struct Case {
            name: &'static str,
            pod: Pod,
            status: PodStatus,
            probes: PodProbeResults,
            want: PodActions,
        }
        let cases = vec![
            Case {
                name: "passing probes: nothing to do",
                pod: always.clone(),
                status: running(&always, &["a", "b"]),
                probes: results(&[("a-0", Success)], &[("b-0", Success)]),
                want: PodActions { sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "startup not finished yet (Unknown): keep it",
                pod: always.clone(),
                status: running(&always, &["a", "b"]),
                probes: results(&[], &[("a-0", Unknown)]),
                want: PodActions { sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "liveness failed under Always: kill and restart that container only",
                pod: always.clone(),
                status: running(&always, &["a", "b"]),
                probes: results(&[("a-0", Failure)], &[]),
                want: PodActions {
                    sandbox_id: "sb0".into(),
                    containers_to_start: vec![0],
                    containers_to_kill: vec![kill("a-0", "a", "Container a failed liveness probe, will be restarted")],
                    ..Default::default()
                },
            },
            Case {
                name: "startup failed: kill and restart",
                pod: always.clone(),
                status: running(&always, &["a", "b"]),
                probes: results(&[("b-0", Success)], &[("b-0", Failure)]),
                want: PodActions {
                    sandbox_id: "sb0".into(),
                    containers_to_start: vec![1],
                    containers_to_kill: vec![kill("b-0", "b", "Container b failed startup probe, will be restarted")],
                    ..Default::default()
                },
            },
            Case {
                name: "a result for another (old) container ID is not this container's",
                pod: always.clone(),
                status: running(&always, &["a", "b"]),
                probes: results(&[("a-old", Failure)], &[]),
                want: PodActions { sandbox_id: "sb0".into(), ..Default::default() },
            },
            Case {
                name: "liveness failed under Never: no restart, and with nothing left the pod is killed",
                pod: never.clone(),
                status: running(&never, &["a"]),
                probes: results(&[("a-0", Failure)], &[]),
                want: PodActions {
                    kill_pod: true,
                    sandbox_id: "sb0".into(),
                    containers_to_kill: vec![kill("a-0", "a", "Container a failed liveness probe")],
                    ..Default::default()
                },
            },
        ];
        for c in cases {
            assert_eq!(compute_pod_actions(&c.pod, &c.status, &c.probes), c.want, "{}", c.name);
        }
    }

    #[test]
    fn changed_spec_restarts_the_container() {
        let p = pod("Always", &[], &["a"]);
        let mut running = container(&p, "a", Running, 0, 0);
        running.hash ^= 1;
        let a = compute_pod_actions(&p, &status(vec![sandbox(true, 0)], vec![running]), &PodProbeResults::default());
        assert_eq!(a.containers_to_start, vec![0]);
        assert_eq!(a.containers_to_kill.len(), 1);
        assert!(a.containers_to_kill[0].2.contains("definition changed"));
    }
}
