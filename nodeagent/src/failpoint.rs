//! The node agent's failpoints (etcd's gofail, as the store has them; the engine is the
//! `failpoint` crate): points between the steps of SyncPod, and of stopping and releasing a pod,
//! where the crash-restart tests end the agent (`=1*panic`: `_exit(2)` at once, a `kill -9`
//! there) to check that the agent started again adopts what exists, finishes the pod, and leaks
//! nothing.
//!
//! Only with this crate's `failpoints` feature (the `kubelab-failpoints` binary; never
//! `kubelab`): without it `failpoint!` expands to `()` and the `failpoint` crate is not linked.
//! Set at start with `KUBELAB_FAILPOINTS=name=term;…`, or over HTTP with
//! `KUBELAB_FAILPOINTS_HTTP=127.0.0.1:PORT` (the `failpoint` crate's docs give the syntax).

/// Every failpoint compiled in, with where it sits. A test checks that the sites and this list
/// agree.
#[cfg(feature = "failpoints")]
pub(crate) const FAILPOINTS: &[(&str, &str)] = &[
    ("syncPodBeforePodCgroup", "kubelet/mod.rs, SyncPod: before step 1, the pod cgroup"),
    ("syncPodBeforeDataDirs", "kubelet/mod.rs, SyncPod: the cgroup made, before step 2, the pod's directories"),
    ("syncPodBeforeVolumes", "kubelet/mod.rs, SyncPod: before step 3, the volumes"),
    ("syncPodBeforePullSecrets", "kubelet/mod.rs, SyncPod: the volumes mounted, before step 4, the pull secrets and /etc/hosts"),
    ("syncPodBeforeRunPodSandbox", "kuberuntime_manager.rs, SyncPod: before step 5's RunPodSandbox"),
    ("syncPodAfterRunPodSandbox", "kuberuntime_manager.rs, SyncPod: the sandbox and its network made, no container yet"),
    ("syncPodBeforeCreateContainer", "kuberuntime_manager.rs, startContainer: the image there, before CreateContainer"),
    ("syncPodAfterCreateContainer", "kuberuntime_manager.rs, startContainer: the container created, not started"),
    ("syncPodBeforeStatus", "kubelet/mod.rs, SyncPod: the containers started, before step 8, the status"),
    ("syncTerminatingPodAfterKill", "kubelet/mod.rs, SyncTerminatingPod: containers and sandbox stopped, nothing reported"),
    ("syncTerminatedPodBeforeRelease", "kubelet/mod.rs, SyncTerminatedPod: before the containers are removed and the volumes and cgroup released"),
];

/// A failpoint site: `failpoint!("name")` does what the failpoint's term says (sleep, crash).
#[cfg(feature = "failpoints")]
macro_rules! failpoint {
    ($name:literal) => {{
        let _ = ::failpoint::eval($name);
    }};
}

/// Without the `failpoints` feature a site is nothing.
#[cfg(not(feature = "failpoints"))]
macro_rules! failpoint {
    ($name:literal) => {
        ()
    };
}

/// Names the agent's failpoints and sets what the environment asks for; a bad
/// `KUBELAB_FAILPOINTS` stops the agent before it starts anything.
#[cfg(feature = "failpoints")]
pub(crate) fn init() -> crate::Result<()> {
    ::failpoint::init(FAILPOINTS).map_err(crate::Error::InvalidFlag)
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::FAILPOINTS;

    #[test]
    fn failpoint_list_matches_the_sites_in_the_code() {
        let sources = [include_str!("kubelet/mod.rs"), include_str!("kuberuntime/kuberuntime_manager.rs")];
        let mut sites: Vec<String> = Vec::new();
        for src in sources {
            for (at, _) in src.match_indices("failpoint!(\"") {
                let rest = &src[at + "failpoint!(\"".len()..];
                sites.push(rest[..rest.find('"').unwrap()].to_string());
            }
        }
        let mut listed: Vec<String> = FAILPOINTS.iter().map(|(n, _)| n.to_string()).collect();
        listed.sort();
        sites.sort();
        assert_eq!(sites, listed, "FAILPOINTS and the failpoint! sites differ (or a name has two sites)");
    }
}
