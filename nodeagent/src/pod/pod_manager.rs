//! Mirrors kubelet's pod/pod_manager.go: the pods the sources want and the node agent admitted,
//! by UID, and the mirror pods the API server holds for its static pods, by full name.
//!
//! The pod manager is what "desired" means in the rest of the agent: the sync loop adds a pod once
//! admission lets it in, replaces it when its source sends a newer version and removes it when
//! the source drops it; the pod workers, housekeeping, garbage collection and the eviction
//! manager ask it which pods are wanted. It is shared by the sync loop and the pod workers, so its
//! maps sit behind one `std::sync::Mutex`, taken only inside these methods and never across an
//! `.await`: every call is a few map operations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use api::pod::{full_name, uid};
use k8s_openapi::api::core::v1::Pod;

#[derive(Default)]
struct Pods {
    /// Admitted pods (never mirror pods), by UID.
    by_uid: HashMap<String, Arc<Pod>>,
    /// `<namespace>/<name>` → the mirror pod the API server has for that static pod.
    mirror_by_full_name: HashMap<String, Arc<Pod>>,
}

/// The pods the agent keeps running and the mirror pods of its static pods.
#[derive(Default)]
pub(crate) struct PodManager {
    pods: Mutex<Pods>,
}

impl PodManager {
    fn lock(&self) -> MutexGuard<'_, Pods> {
        // A panic while holding the lock leaves the maps as they were after some complete
        // operation: every method changes them in one step.
        self.pods.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// AddPod: a pod admission let in (or one already running at start), by its UID.
    pub(crate) fn add_pod(&self, pod: Arc<Pod>) {
        self.lock().by_uid.insert(uid(&pod).to_string(), pod);
    }

    /// UpdatePod: the newest version of a pod the manager has. Returns false, and keeps nothing,
    /// for a pod it does not have: one rejected at admission is never run, whatever its source
    /// sends later.
    pub(crate) fn update_pod(&self, pod: Arc<Pod>) -> bool {
        let mut pods = self.lock();
        match pods.by_uid.get_mut(uid(&pod)) {
            Some(known) => {
                *known = pod;
                true
            }
            None => false,
        }
    }

    /// RemovePod: no source wants the pod any more.
    pub(crate) fn remove_pod(&self, uid: &str) {
        self.lock().by_uid.remove(uid);
    }

    /// GetPodByUID.
    pub(crate) fn get_pod_by_uid(&self, uid: &str) -> Option<Arc<Pod>> {
        self.lock().by_uid.get(uid).cloned()
    }

    /// Whether some source wants the pod with this UID (and it was admitted).
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.lock().by_uid.contains_key(uid)
    }

    /// GetPods: every admitted pod, in no particular order.
    pub(crate) fn get_pods(&self) -> Vec<Arc<Pod>> {
        self.lock().by_uid.values().cloned().collect()
    }

    /// A mirror pod the API server has (or the agent just created), replacing any other mirror
    /// pod under its full name.
    pub(crate) fn add_mirror_pod(&self, mirror: Arc<Pod>) {
        self.lock().mirror_by_full_name.insert(full_name(&mirror), mirror);
    }

    /// A mirror pod the API server deleted: forgotten only if the manager still has that very
    /// pod (same UID), not a newer mirror created under the same name since.
    pub(crate) fn remove_mirror_pod(&self, mirror: &Pod) {
        let mut pods = self.lock();
        let name = full_name(mirror);
        if pods.mirror_by_full_name.get(&name).and_then(|m| m.metadata.uid.as_ref()) == mirror.metadata.uid.as_ref() {
            pods.mirror_by_full_name.remove(&name);
        }
    }

    /// Forget the mirror pod under `full_name`, whichever it is (the agent deleted it).
    pub(crate) fn remove_mirror_pod_by_full_name(&self, full_name: &str) {
        self.lock().mirror_by_full_name.remove(full_name);
    }

    /// Every mirror pod, by the full name it mirrors.
    pub(crate) fn get_mirror_pods(&self) -> HashMap<String, Arc<Pod>> {
        self.lock().mirror_by_full_name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str, name: &str, image: &str) -> Arc<Pod> {
        Arc::new(
            serde_norway::from_str(&format!(
                "metadata: {{name: {name}, namespace: default, uid: {uid}}}\nspec: {{containers: [{{name: c, image: '{image}'}}]}}\n"
            ))
            .expect("pod yaml"),
        )
    }

    fn image(p: Option<Arc<Pod>>) -> Option<String> {
        p.and_then(|p| p.spec.as_ref().and_then(|s| s.containers[0].image.clone()))
    }

    #[test]
    fn pods_are_added_updated_only_when_known_and_removed() {
        let m = PodManager::default();
        assert!(!m.update_pod(pod("u1", "web", "v1")), "an update of a pod never admitted is refused");
        assert!(!m.contains("u1") && m.get_pod_by_uid("u1").is_none());
        m.add_pod(pod("u1", "web", "v1"));
        m.add_pod(pod("u2", "db", "v1"));
        assert!(m.update_pod(pod("u1", "web", "v2")));
        assert_eq!(image(m.get_pod_by_uid("u1")).as_deref(), Some("v2"));
        let mut uids: Vec<String> = m.get_pods().iter().map(|p| uid(p).to_string()).collect();
        uids.sort();
        assert_eq!(uids, vec!["u1".to_string(), "u2".to_string()]);
        m.remove_pod("u1");
        assert!(!m.contains("u1") && m.contains("u2"));
        assert!(m.get_mirror_pods().is_empty(), "mirror pods are kept apart");
    }

    #[test]
    fn a_mirror_pod_is_removed_only_by_its_own_uid() {
        let m = PodManager::default();
        m.add_mirror_pod(pod("m1", "etcd-node1", "v1"));
        // The API server's copy was replaced by a newer mirror under the same name.
        m.add_mirror_pod(pod("m2", "etcd-node1", "v2"));
        assert_eq!(m.get_mirror_pods().len(), 1);
        // The deletion of the old one arrives late: the newer one stays.
        m.remove_mirror_pod(&pod("m1", "etcd-node1", "v1"));
        assert_eq!(image(m.get_mirror_pods().get("default/etcd-node1").cloned()).as_deref(), Some("v2"));
        m.remove_mirror_pod(&pod("m2", "etcd-node1", "v2"));
        assert!(m.get_mirror_pods().is_empty());
        m.add_mirror_pod(pod("m3", "etcd-node1", "v3"));
        m.remove_mirror_pod_by_full_name("default/etcd-node1");
        assert!(m.get_mirror_pods().is_empty());
        assert!(m.get_pods().is_empty(), "a mirror pod is never a pod to run");
    }
}
