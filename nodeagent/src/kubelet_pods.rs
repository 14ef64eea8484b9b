//! Mirrors kubelet's kubelet_pods.go: housekeeping (HandlePodCleanups) — pods the runtime runs
//! that no source wants, mirror pods for static pods, orphaned cgroups, directories and
//! statuses — and the pod's managed /etc/hosts file.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use api::pod::{full_name, is_static_pod, uid};
use k8s_openapi::api::core::v1::Pod;

use crate::kubelet::Kubelet;
use crate::pod::mirror_client;
use crate::pod_workers::{PodWorkers, UpdatePodOptions, UpdateType};

/// HandlePodCleanups, every housekeeping tick (2 s). Anything that deletes is skipped until every
/// source has delivered its pods once (`sources_ready`): right after a restart, a pod the API
/// server has not listed yet is not an orphan.
pub async fn handle_pod_cleanups(kubelet: &Arc<Kubelet>, workers: &mut PodWorkers, sources_ready: bool) {
    workers.forget_stopped();
    let desired: HashSet<String> = kubelet.desired_pods().iter().map(|p| uid(p).to_string()).collect();

    let runtime_pods = match kubelet.runtime.get_pods().await {
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
        let pcm = kubelet.pcm.clone();
        let root = kubelet.root_dir.clone();
        let keep2 = keep.clone();
        let orphan_dirs = tokio::task::spawn_blocking(move || {
            for u in pcm.pod_cgroup_uids() {
                if !keep2.contains(&u)
                    && let Err(e) = pcm.destroy(&u)
                {
                    tracing::debug!(target: "kubelet::housekeeping", pod_uid = %u, error = %e, "orphaned pod cgroup");
                }
            }
            crate::kubelet_getters::pod_uids_on_disk(&root).unwrap_or_default().into_iter().filter(|u| !keep2.contains(u)).collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        for u in orphan_dirs {
            tracing::info!(target: "kubelet::housekeeping", pod_uid = %u, "cleaning an orphaned pod directory");
            if let Err(e) = kubelet.volumes.unmount_volumes(&u).await {
                tracing::warn!(target: "kubelet::housekeeping", pod_uid = %u, error = %e, "unmounting orphaned volumes");
                continue;
            }
            let root = kubelet.root_dir.clone();
            let _ = tokio::task::spawn_blocking(move || crate::kubelet_getters::remove_pod_dir(&root, &u)).await;
        }
        kubelet.status.remove_orphaned_statuses(&keep);
        // Probe workers of pods gone from everywhere (kubelet's probeManager.CleanupPods): a
        // pod's workers are normally stopped when it terminates, but not if it vanished first.
        kubelet.probes.cleanup_pods(&keep);
    }
    kubelet.set_runtime_pods(in_runtime);
    sync_mirror_pods(kubelet).await;
    kubelet.runtime.gc_backoff();
}

/// Every static pod has an up-to-date mirror pod in the API server, and no mirror pod outlives
/// its static pod (kubelet's syncPod mirror handling plus podManager cleanup).
async fn sync_mirror_pods(kubelet: &Kubelet) {
    let Some(client) = &kubelet.client else { return };
    let Some(node) = kubelet.node.borrow().clone() else { return };
    let statics: Vec<Arc<Pod>> = kubelet.desired_pods().into_iter().filter(|p| is_static_pod(p)).collect();
    let mirrors = kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).mirrors.clone();
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
                kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).mirrors.remove(&name);
            }
            None => match mirror_client::create_mirror_pod(client, pod, &node).await {
                Ok(m) => {
                    tracing::info!(target: "kubelet::mirror", pod = %name, "created the mirror pod");
                    kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).mirrors.insert(name, m);
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
                kubelet.pod_manager.lock().unwrap_or_else(|e| e.into_inner()).mirrors.remove(&name);
            }
        }
    }
}

/// The /etc/hosts the kubelet manages for pods with their own network (ensureHostsFile):
/// localhost entries, the pod's IPs with its hostname, and spec.hostAliases. Blocking.
pub fn ensure_hosts_file(path: &Path, pod: &Pod, ips: &[String]) -> std::io::Result<()> {
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

pub fn hosts_file_content(pod: &Pod, ips: &[String]) -> String {
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
        ensure_hosts_file(&path, &p, &["10.244.0.7".into()]).expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), s);
    }
}
