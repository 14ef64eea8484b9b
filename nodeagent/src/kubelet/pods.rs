//! Mirrors kubelet's kubelet_pods.go: the Kubelet's work on pods beside SyncPod — housekeeping
//! (HandlePodCleanups: pods the runtime runs that no source wants, mirror pods for static pods,
//! orphaned cgroups, directories and statuses), the secrets and configMaps a pod refers to, the
//! pod's managed /etc/hosts file, and which pods count as active (GetActivePods,
//! filterOutInactivePods).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use api::pod::{full_name, is_pod_phase_terminal, is_pod_terminal, is_static_pod, uid};
use k8s_openapi::api::core::v1::Pod;

use super::{Kubelet, getters};
use crate::pod::mirror_client;
use crate::pod_workers::{PodWorkers, UpdatePodOptions, UpdateType, WorkerState};

impl Kubelet {
    /// HandlePodCleanups, every housekeeping tick (2 s). Anything that deletes is skipped until every
    /// source has delivered its pods once (`sources_ready`): right after a restart, a pod the API
    /// server has not listed yet is not an orphan.
    pub(crate) async fn handle_pod_cleanups(&self, workers: &mut PodWorkers, sources_ready: bool) {
        workers.forget_stopped();
        let desired: HashSet<String> = self.pod_manager.get_pods().iter().map(|p| uid(p).to_string()).collect();

        let runtime_pods = match self.deps.runtime.get_pods().await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(target: "kubelet::housekeeping", error = %e, "listing the runtime's pods");
                return;
            }
        };
        let in_runtime: HashSet<String> = runtime_pods.keys().cloned().collect();

        if sources_ready {
            // Pods the runtime runs that no source wants and no worker handles: stop and remove them.
            for (u, (ns, name)) in &runtime_pods {
                if desired.contains(u) || workers.state(u).is_some() {
                    continue;
                }
                tracing::info!(target: "kubelet::housekeeping", pod_uid = %u, pod = %format!("{ns}/{name}"), "removing an orphaned pod from the runtime");
                let mut pod = Pod::default();
                pod.metadata.uid = Some(u.clone());
                pod.metadata.name = Some(name.clone());
                pod.metadata.namespace = Some(ns.clone());
                workers.update_pod(UpdatePodOptions {
                    pod: Arc::new(pod),
                    update_type: UpdateType::Kill,
                    grace_override: Some(2),
                    removed: true,
                });
            }
            // Pod cgroups and directories of pods that are gone.
            let keep: HashSet<String> = desired.iter().chain(in_runtime.iter()).cloned().chain(workers.known_pods()).collect();
            let pcm = self.deps.pcm.clone();
            let root = self.deps.root_dir.clone();
            let keep2 = keep.clone();
            let orphan_dirs = tokio::task::spawn_blocking(move || {
                let keep_keys: HashSet<String> = keep2.iter().map(|u| pcm.pod_cgroup_key(u)).collect();
                for u in pcm.pod_cgroup_uids() {
                    if !keep_keys.contains(&u)
                        && let Err(e) = pcm.destroy(&u)
                    {
                        tracing::debug!(target: "kubelet::housekeeping", pod_uid = %u, error = %e, "orphaned pod cgroup");
                    }
                }
                getters::pod_uids_on_disk(&root).unwrap_or_default().into_iter().filter(|u| !keep2.contains(u)).collect::<Vec<_>>()
            })
            .await
            .unwrap_or_default();
            for u in orphan_dirs {
                tracing::info!(target: "kubelet::housekeeping", pod_uid = %u, "cleaning an orphaned pod directory");
                if let Err(e) = self.deps.volumes.unmount_volumes(&u).await {
                    tracing::warn!(target: "kubelet::housekeeping", pod_uid = %u, error = %e, "unmounting orphaned volumes");
                    continue;
                }
                let root = self.deps.root_dir.clone();
                let _ = tokio::task::spawn_blocking(move || getters::remove_pod_dir(&root, &u)).await;
            }
            self.deps.status.remove_orphaned_statuses(&keep);
            // Probe workers of pods gone from everywhere (kubelet's probeManager.CleanupPods): a
            // pod's workers are normally stopped when it terminates, but not if it vanished first.
            self.deps.probes.cleanup_pods(&keep);
        }
        self.set_runtime_pods(in_runtime);
        self.sync_mirror_pods().await;
        self.deps.runtime.gc_backoff();
    }

    /// Every static pod has an up-to-date mirror pod in the API server, and no mirror pod outlives
    /// its static pod (kubelet's syncPod mirror handling plus podManager cleanup).
    async fn sync_mirror_pods(&self) {
        let Some(client) = &self.deps.client else { return };
        let Some(node) = self.deps.node.borrow().clone() else { return };
        let statics: Vec<Arc<Pod>> = self.pod_manager.get_pods().into_iter().filter(|p| is_static_pod(p)).collect();
        let mirrors = self.pod_manager.get_mirror_pods();
        let static_names: HashSet<String> = statics.iter().map(|p| full_name(p)).collect();
        for pod in &statics {
            let name = full_name(pod);
            match mirrors.get(&name) {
                Some(m) if mirror_client::mirror_matches(pod, m) && m.metadata.deletion_timestamp.is_none() => {}
                Some(m) => {
                    // Outdated (the manifest changed) or being deleted by someone: replace it.
                    tracing::info!(target: "kubelet::mirror", pod = %name, "replacing the mirror pod");
                    let ns = m.metadata.namespace.clone().unwrap_or_default();
                    let n = m.metadata.name.clone().unwrap_or_default();
                    if let Err(e) = mirror_client::delete_mirror_pod(client, &ns, &n, m.metadata.uid.as_deref()).await {
                        tracing::warn!(target: "kubelet::mirror", pod = %name, error = %e, "deleting the mirror pod");
                    }
                    self.pod_manager.remove_mirror_pod_by_full_name(&name);
                }
                None => match mirror_client::create_mirror_pod(client, pod, &node).await {
                    Ok(m) => {
                        tracing::info!(target: "kubelet::mirror", pod = %name, "created the mirror pod");
                        self.pod_manager.add_mirror_pod(Arc::new(m));
                    }
                    Err(e) => tracing::debug!(target: "kubelet::mirror", pod = %name, error = %e, "creating the mirror pod"),
                },
            }
        }
        for (name, m) in mirrors {
            if !static_names.contains(&name) {
                tracing::info!(target: "kubelet::mirror", pod = %name, "deleting the mirror pod of a static pod that is gone");
                let ns = m.metadata.namespace.clone().unwrap_or_default();
                let n = m.metadata.name.clone().unwrap_or_default();
                if mirror_client::delete_mirror_pod(client, &ns, &n, m.metadata.uid.as_deref()).await.is_ok() {
                    self.pod_manager.remove_mirror_pod_by_full_name(&name);
                }
            }
        }
    }

    /// Secrets named in imagePullSecrets (their `.dockerconfigjson` or `.dockercfg`), and the configMaps and
    /// secrets the containers' environment refers to. Without an API server: none.
    pub(super) async fn fetch_pod_references(&self, pod: &Pod) -> (Vec<serde_json::Value>, crate::kuberuntime::kuberuntime_container::EnvObjects) {
        use crate::kuberuntime::kuberuntime_container::{EnvObjects, env_references};
        use k8s_openapi::api::core::v1::{ConfigMap, Secret};
        let allocatable = self.deps.node.borrow().as_ref().and_then(|n| n.status.as_ref()).and_then(|s| s.allocatable.clone());
        let mut env = EnvObjects { node_allocatable: allocatable.unwrap_or_default(), ..Default::default() };
        let mut pull = vec![];
        let Some(client) = &self.deps.client else { return (pull, env) };
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let secrets: kube::Api<Secret> = kube::Api::namespaced(client.clone(), &ns);
        let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), &ns);
        for r in pod.spec.as_ref().and_then(|s| s.image_pull_secrets.clone()).unwrap_or_default() {
            match secrets.get_opt(&r.name).await {
                Ok(Some(s)) => {
                    if let Some(v) = s.data.as_ref().and_then(crate::credentialprovider::secret_docker_config) {
                        pull.push(v);
                    }
                }
                Ok(None) => tracing::warn!(target: "kubelet::sync_pod", secret = %r.name, "image pull secret not found; pulling without it"),
                Err(e) => tracing::warn!(target: "kubelet::sync_pod", secret = %r.name, error = %e, "reading image pull secret"),
            }
        }
        env.service_env = match self.service_env(client, pod).await {
            // kubelet: a static pod does not wait for the Services to be read (the API server
            // may be one of them); it gets the variables of what could be read, here none.
            Err(e) if is_static_pod(pod) => {
                tracing::warn!(target: "kubelet::sync_pod", error = %e, "a static pod starts without the Services' variables");
                Ok(vec![])
            }
            r => r,
        };
        let (cm_names, secret_names) = env_references(pod);
        for n in cm_names {
            if let Ok(cm) = cms.get_opt(&n).await {
                env.config_maps.insert(n, cm.map(|c| c.data.unwrap_or_default()));
            }
        }
        for n in secret_names {
            if let Ok(s) = secrets.get_opt(&n).await {
                let decoded = s.map(|s| {
                    let mut m: std::collections::BTreeMap<String, String> = s
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                        .collect();
                    m.extend(s.string_data.unwrap_or_default());
                    m
                });
                env.secrets.insert(n, decoded);
            }
        }
        (pull, env)
    }

    /// The Services' environment variables for `pod` (kubelet's getServiceEnvVarMap): its
    /// namespace's Services and the master service, read when its containers are about to be
    /// made (kubelet reads them from an informer). A failed read fails a pod's containers
    /// (CreateContainerConfigError, as kubelet's unsynced informer does), except a static
    /// pod's, which start without the variables.
    async fn service_env(&self, client: &kube::Client, pod: &Pod) -> Result<Vec<(String, String)>, String> {
        use crate::envvars::{self, MASTER_SERVICE_NAMESPACE};
        use k8s_openapi::api::core::v1::Service;
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let links = pod.spec.as_ref().and_then(|s| s.enable_service_links).unwrap_or(true);
        let lp = kube::api::ListParams::default();
        let mut services = vec![];
        if links {
            services.extend(kube::Api::<Service>::namespaced(client.clone(), &ns).list(&lp).await.map_err(|e| e.to_string())?.items);
        }
        if ns != MASTER_SERVICE_NAMESPACE || !links {
            services.extend(kube::Api::<Service>::namespaced(client.clone(), MASTER_SERVICE_NAMESPACE).get_opt("kubernetes").await.map_err(|e| e.to_string())?);
        }
        Ok(envvars::from_services(&envvars::services_for_pod(&services, &ns, links)))
    }

    /// ensureHostsFile: write the pod's managed /etc/hosts (`pods/<uid>/etc-hosts`) for these IPs,
    /// off the executor. A failure is not the sync's: the file is written again on the next one.
    pub(super) async fn ensure_hosts_file(&self, pod: &Pod, ips: &[String]) {
        let path = getters::pod_etc_hosts_path(&self.deps.root_dir, uid(pod));
        let (p, ips) = (pod.clone(), ips.to_vec());
        let _ = tokio::task::spawn_blocking(move || write_hosts_file(&path, &p, &ips)).await;
    }

    /// The pods the agent runs, each with the status the status manager holds for it (what
    /// `/pods` serves).
    pub(crate) fn get_pods(&self) -> Vec<Pod> {
        self.pod_manager
            .get_pods()
            .iter()
            .map(|p| {
                let mut p = (**p).clone();
                if let Some(s) = self.deps.status.get_pod_status(uid(&p)) {
                    p.status = Some(s);
                }
                p
            })
            .collect()
    }

    /// The pods the eviction manager may act on (GetActivePods, as kubelet hands it to the
    /// eviction manager): wanted by a source, not being deleted, and not finished as far as the
    /// status manager (else the API server's copy) knows. Admission's [`active_pods`] asks the pod
    /// workers as well, which only the sync loop holds.
    pub(crate) fn get_active_pods(&self) -> Vec<Arc<Pod>> {
        self.pod_manager.get_pods()
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let phase = self.deps.status.get_pod_status(uid(p)).and_then(|s| s.phase).or_else(|| p.status.as_ref().and_then(|s| s.phase.clone()));
                !is_pod_phase_terminal(phase.as_deref())
            })
            .collect()
    }
}

/// The pods that hold resources on this node, for admission (kubelet's GetActivePods and
/// filterOutInactivePods): every pod a source wants except those that are done. A pod is done
/// once its containers have stopped, which the status manager's terminal phase (set at that
/// moment) and the worker's Terminated state say at once; the API server's copy, which the pod
/// manager holds, says so only later. The scheduler frees a pod's resources as soon as it sees
/// that terminal status, and a pod it then binds here must not be refused for them (seen in the
/// lab: a pod bound the moment the pod filling the node turned Failed was rejected OutOfcpu).
pub(crate) fn active_pods(kubelet: &Kubelet, workers: &PodWorkers) -> Vec<Pod> {
    kubelet
        .pod_manager
        .get_pods()
        .iter()
        .filter(|p| {
            let uid = uid(p);
            !is_pod_terminal(p)
                && !kubelet.deps.status.get_pod_status(uid).is_some_and(|s| is_pod_phase_terminal(s.phase.as_deref()))
                && workers.state(uid) != Some(WorkerState::Terminated)
        })
        .map(|p| (**p).clone())
        .collect()
}

/// The /etc/hosts the kubelet manages for pods with their own network (ensureHostsFile):
/// localhost entries, the pod's IPs with its hostname, and spec.hostAliases. Blocking: see
/// [`Kubelet::ensure_hosts_file`].
fn write_hosts_file(path: &Path, pod: &Pod, ips: &[String]) -> std::io::Result<()> {
    let content = hosts_file_content(pod, ips);
    if std::fs::read_to_string(path).ok().as_deref() == Some(content.as_str()) {
        return Ok(());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content)?;
    std::fs::rename(tmp, path)
}

fn hosts_file_content(pod: &Pod, ips: &[String]) -> String {
    let mut s = String::from("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n");
    let hostname = crate::kuberuntime::kuberuntime_sandbox::pod_hostname(pod);
    let spec = pod.spec.as_ref();
    let fqdn = spec.and_then(|s| s.subdomain.as_ref()).map(|sub| {
        format!("{hostname}.{sub}.{}.svc.cluster.local", pod.metadata.namespace.as_deref().unwrap_or("default"))
    });
    for ip in ips {
        match &fqdn {
            Some(f) => s.push_str(&format!("{ip}\t{f}\t{hostname}\n")),
            None => s.push_str(&format!("{ip}\t{hostname}\n")),
        }
    }
    let aliases = spec.and_then(|s| s.host_aliases.clone()).unwrap_or_default();
    if !aliases.is_empty() {
        s.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases {
            s.push_str(&format!("{}\t{}\n", a.ip, a.hostnames.unwrap_or_default().join("\t")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{HostAlias, PodSpec};

    #[test]
    fn hosts_file_has_the_pod_and_its_aliases() {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.spec = Some(PodSpec {
            host_aliases: Some(vec![HostAlias { ip: "10.1.2.3".into(), hostnames: Some(vec!["db".into(), "db.local".into()]) }]),
            ..Default::default()
        });
        let s = hosts_file_content(&p, &["10.244.0.7".into()]);
        assert!(s.contains("127.0.0.1\tlocalhost\n"));
        assert!(s.contains("10.244.0.7\tweb\n"));
        assert!(s.contains("10.1.2.3\tdb\tdb.local\n"));
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("etc-hosts");
        write_hosts_file(&path, &p, &["10.244.0.7".into()]).expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), s);
    }
}
