//! Mirrors kubelet's cm/pod_container_manager_linux.go and cm/qos_container_manager_linux.go: one
//! cgroup per pod, under one per QoS class, below `<--cgroup-root>/kubepods`.
//!
//! ```text
//! cgroupfs driver (v1: in every hierarchy; v2: once)   systemd driver (v2)
//! /kubepods                      every pod               /kubepods.slice
//! /kubepods/pod<uid>             a Guaranteed pod        /kubepods.slice/kubepods-pod<uid>.slice
//! /kubepods/burstable/pod<uid>   a Burstable pod         /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice
//! /kubepods/besteffort/pod<uid>  a BestEffort pod        /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice
//! …/pod<uid>/<id>                a container (runc)      …/kubepods-…-pod<uid>.slice/cri-containerd-<id>.scope
//! ```
//!
//! (In systemd's names a `-` inside a level becomes `_`: a pod UID's dashes are underscores.)
//! The BestEffort cgroup gets the smallest CPU weight. The pod cgroup's name, in the driver's
//! spelling, is what SyncPod passes to RunPodSandbox as `cgroup_parent`; the runtime puts the
//! containers below it but never removes it, so [`PodContainerManager::destroy`] does, after the
//! pod's containers are gone.
//!
//! Every method does blocking I/O (cgroupfs, or D-Bus calls to systemd): async callers wrap them
//! in `tokio::task::spawn_blocking`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use api::core::v1::helper::qos::{PodQOSClass, compute_pod_qos};
use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, info};

use super::cgroup_manager::{CgroupManager, CgroupName};
use super::helpers::{MIN_SHARES, ResourceConfig, resource_config_for_pod};
use crate::error::{Error, Result};

/// The cgroup every pod lives under, below `--cgroup-root`.
pub(crate) const KUBEPODS: &str = "kubepods";
/// The QoS cgroups' names below [`KUBEPODS`].
pub(crate) const BURSTABLE: &str = "burstable";
pub(crate) const BEST_EFFORT: &str = "besteffort";
/// A pod cgroup is named `pod<uid>`.
pub(crate) const POD_CGROUP_PREFIX: &str = "pod";

/// Creates, sizes and removes pod cgroups.
#[derive(Clone, Debug)]
pub(crate) struct PodContainerManager {
    cgroups: CgroupManager,
    /// `<--cgroup-root>/kubepods`.
    pods_cgroup: CgroupName,
    /// `--pod-max-pids` when positive: every pod cgroup's `pids.max`.
    pod_pids_limit: Option<i64>,
}

impl PodContainerManager {
    /// Pods under `<cgroup_root>/kubepods` (`cgroup_root` as `--cgroup-root` spells it: `/`,
    /// `/kubelab`).
    pub(crate) fn new(cgroups: CgroupManager, cgroup_root: &str) -> Self {
        PodContainerManager { cgroups, pods_cgroup: CgroupName::parse(cgroup_root).child(KUBEPODS), pod_pids_limit: None }
    }

    /// `--pod-max-pids`: a positive value limits every pod's processes; otherwise none.
    pub(crate) fn with_pod_pids_limit(mut self, limit: i64) -> Self {
        self.pod_pids_limit = (limit > 0).then_some(limit);
        self
    }

    pub(crate) fn cgroups(&self) -> &CgroupManager {
        &self.cgroups
    }

    /// The three cgroups a pod cgroup can be in.
    fn qos_parents(&self) -> [CgroupName; 3] {
        [self.pods_cgroup.child(BURSTABLE), self.pods_cgroup.child(BEST_EFFORT), self.pods_cgroup.clone()]
    }

    fn pod_cgroup_name(&self, qos: PodQOSClass, uid: &str) -> CgroupName {
        let parent = match qos {
            PodQOSClass::Guaranteed => self.pods_cgroup.clone(),
            PodQOSClass::Burstable => self.pods_cgroup.child(BURSTABLE),
            PodQOSClass::BestEffort => self.pods_cgroup.child(BEST_EFFORT),
        };
        parent.child(&format!("{POD_CGROUP_PREFIX}{uid}"))
    }

    /// The QoS manager's start: `kubepods`, `kubepods/burstable` and `kubepods/besteffort`, the
    /// BestEffort cgroup at the minimum CPU weight. Idempotent.
    pub(crate) fn ensure_qos_cgroups(&self) -> Result<()> {
        let [burstable, best_effort, pods] = self.qos_parents();
        self.cgroups.create(&pods, &ResourceConfig::default())?;
        self.cgroups.create(&burstable, &ResourceConfig::default())?;
        self.cgroups.create(&best_effort, &ResourceConfig { cpu_shares: Some(MIN_SHARES), ..Default::default() })
    }

    /// The pod's cgroup as RunPodSandbox's `cgroup_parent` wants it, in the driver's spelling:
    /// `/kubepods/burstable/pod<uid>`, or with systemd
    /// `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`. (SyncPod
    /// takes it from [`Self::ensure_exists`].)
    #[cfg(test)]
    pub(crate) fn cgroup_parent(&self, pod: &Pod) -> String {
        self.cgroups.name(&self.pod_cgroup_name(compute_pod_qos(pod), api::pod::uid(pod)))
    }

    /// The directory of the pod cgroup's memory files (None when memory is not accounted).
    pub(crate) fn pod_memory_dir(&self, pod: &Pod) -> Option<PathBuf> {
        self.cgroups.memory_dir(&self.pod_cgroup_name(compute_pod_qos(pod), api::pod::uid(pod)))
    }

    /// Step 1 of SyncPod: the pod's cgroup (the QoS cgroups too), limited as
    /// [`resource_config_for_pod`] says, with `--pod-max-pids`. Idempotent; a value already in
    /// place is not rewritten. Returns [`Self::cgroup_parent`].
    pub(crate) fn ensure_exists(&self, pod: &Pod) -> Result<String> {
        let uid = valid_uid(api::pod::uid(pod))?;
        let name = self.pod_cgroup_name(compute_pod_qos(pod), uid);
        self.ensure_qos_cgroups()?;
        let config = ResourceConfig { pids_limit: self.pod_pids_limit, ..resource_config_for_pod(pod) };
        self.cgroups.create(&name, &config)?;
        let parent = self.cgroups.name(&name);
        debug!(target: "kubelet::cm", pod = %uid, cgroup = %parent, ?config, "pod cgroup ensured");
        Ok(parent)
    }

    /// Removes the pod's cgroup (wherever it is: under any QoS cgroup, in every hierarchy), with
    /// what the runtime left below it. A cgroup that still holds a process is not removed: the
    /// error names the processes, and the caller retries once they are gone. Already removed is
    /// fine. `pod_uid` may also be a key from [`Self::pod_cgroup_uids`].
    pub(crate) fn destroy(&self, pod_uid: &str) -> Result<()> {
        let uid = valid_uid(pod_uid)?;
        let level = format!("{POD_CGROUP_PREFIX}{uid}");
        let mut first_error = None;
        for parent in self.qos_parents() {
            if let Err(e) = self.cgroups.destroy(&parent.child(&level)) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                info!(target: "kubelet::cm", pod = %uid, "pod cgroup removed");
                Ok(())
            }
        }
    }

    /// Every pod with a cgroup, by the key [`Self::pod_cgroup_key`] gives its UID, sorted:
    /// compared with the keys of the pods the agent knows, the difference is the orphans to
    /// [`Self::destroy`].
    pub(crate) fn pod_cgroup_uids(&self) -> Vec<String> {
        let mut uids = BTreeSet::new();
        for parent in self.qos_parents() {
            for level in self.cgroups.child_levels(&parent) {
                if let Some(uid) = level.strip_prefix(POD_CGROUP_PREFIX)
                    && !uid.is_empty()
                {
                    uids.insert(uid.to_string());
                }
            }
        }
        uids.into_iter().collect()
    }

    /// How a pod UID appears in its cgroup's name (systemd's slices have `_` for `-`).
    pub(crate) fn pod_cgroup_key(&self, uid: &str) -> String {
        self.cgroups.level_key(uid)
    }

    /// Whether the pod's cgroup exists (under whichever QoS cgroup; in every v1 hierarchy).
    #[cfg(test)]
    pub(crate) fn exists(&self, uid: &str) -> bool {
        if valid_uid(uid).is_err() {
            return false;
        }
        let level = format!("{POD_CGROUP_PREFIX}{uid}");
        self.qos_parents().iter().any(|p| self.cgroups.exists(&p.child(&level)))
    }
}

/// A pod UID that is safe inside a path.
fn valid_uid(uid: &str) -> Result<&str> {
    if uid.is_empty() || uid.contains('/') || uid == "." || uid == ".." {
        return Err(Error::UnusableUid(format!("pod UID {uid:?} cannot name a cgroup")));
    }
    Ok(uid)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::cm::cgroup_manager::{CgroupDriver, CgroupVersion, DEFAULT_CGROUP_MOUNT};
    use crate::cm::cgroup_v1::Hierarchy;
    use crate::cm::files::read_trimmed;
    use crate::cm::helpers::tests::{container, pod};

    fn with_uid(mut p: Pod, uid: &str) -> Pod {
        p.metadata.uid = Some(uid.into());
        p
    }

    fn guaranteed(uid: &str) -> Pod {
        let g = [("cpu", "500m"), ("memory", "128Mi")];
        with_uid(pod(vec![container(&g, &g)], vec![]), uid)
    }

    fn burstable(uid: &str) -> Pod {
        with_uid(pod(vec![container(&[("cpu", "100m")], &[("cpu", "250m"), ("memory", "64Mi")])], vec![]), uid)
    }

    fn best_effort(uid: &str) -> Pod {
        with_uid(pod(vec![container(&[], &[])], vec![]), uid)
    }

    fn read(path: &Path) -> String {
        read_trimmed(path).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The file layout on a plain directory standing in for /sys/fs/cgroup.
    #[test]
    fn layout_on_a_fake_root() -> Result<()> {
        let root = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let hierarchies = vec![
            Hierarchy::v1(root.path().join("cpu"), &["cpu"]),
            Hierarchy::v1(root.path().join("cpuacct"), &["cpuacct"]),
            Hierarchy::v1(root.path().join("cpuset"), &["cpuset"]),
            Hierarchy::v1(root.path().join("memory"), &["memory"]),
            Hierarchy::v1(root.path().join("pids"), &["pids"]),
            Hierarchy { path: root.path().join("unified"), controllers: vec![], unified: true },
        ];
        for h in &hierarchies {
            std::fs::create_dir(&h.path).map_err(|e| Error::io(&h.path, e))?;
        }
        std::fs::write(root.path().join("cpuset/cpuset.cpus"), "0-1\n").map_err(|e| Error::io("cpus", e))?;
        std::fs::write(root.path().join("cpuset/cpuset.mems"), "0\n").map_err(|e| Error::io("mems", e))?;
        let m = PodContainerManager::new(CgroupManager::cgroupfs_v1(hierarchies), "/");

        assert_eq!(m.cgroup_parent(&guaranteed("g")), "/kubepods/podg");
        assert_eq!(m.cgroup_parent(&burstable("b")), "/kubepods/burstable/podb");
        assert_eq!(m.cgroup_parent(&best_effort("e")), "/kubepods/besteffort/pode");

        assert_eq!(m.ensure_exists(&guaranteed("g"))?, "/kubepods/podg");
        assert_eq!(m.ensure_exists(&burstable("b"))?, "/kubepods/burstable/podb");
        assert_eq!(m.ensure_exists(&best_effort("e"))?, "/kubepods/besteffort/pode");
        m.ensure_exists(&burstable("b"))?; // idempotent

        let p = |s: &str| root.path().join(s);
        for h in ["cpu", "cpuacct", "cpuset", "memory", "pids"] {
            for dir in ["kubepods/podg", "kubepods/burstable/podb", "kubepods/besteffort/pode"] {
                assert!(p(&format!("{h}/{dir}")).is_dir(), "{h}/{dir}");
            }
        }
        assert!(!p("unified/kubepods").exists(), "nothing is created in the v2 tree");

        assert_eq!(read(&p("cpu/kubepods/besteffort/cpu.shares")), "2");
        assert_eq!(read(&p("cpu/kubepods/podg/cpu.shares")), "512");
        assert_eq!(read(&p("cpu/kubepods/podg/cpu.cfs_period_us")), "100000");
        assert_eq!(read(&p("cpu/kubepods/podg/cpu.cfs_quota_us")), "50000");
        assert_eq!(read(&p("memory/kubepods/podg/memory.limit_in_bytes")), "134217728");
        assert_eq!(read(&p("cpu/kubepods/burstable/podb/cpu.shares")), "102");
        assert_eq!(read(&p("cpu/kubepods/burstable/podb/cpu.cfs_quota_us")), "25000");
        assert_eq!(read(&p("memory/kubepods/burstable/podb/memory.limit_in_bytes")), "67108864");
        assert_eq!(read(&p("cpu/kubepods/besteffort/pode/cpu.shares")), "2");
        assert!(!p("cpu/kubepods/besteffort/pode/cpu.cfs_quota_us").exists());
        assert!(!p("memory/kubepods/besteffort/pode/memory.limit_in_bytes").exists());
        assert!(!p("cpu/kubepods/podg/memory.limit_in_bytes").exists(), "memory files only in the memory tree");
        for dir in ["kubepods", "kubepods/burstable", "kubepods/burstable/podb"] {
            assert_eq!(read(&p(&format!("cpuset/{dir}/cpuset.cpus"))), "0-1", "{dir}");
            assert_eq!(read(&p(&format!("cpuset/{dir}/cpuset.mems"))), "0", "{dir}");
        }

        assert_eq!(m.pod_cgroup_uids(), vec!["b".to_string(), "e".to_string(), "g".to_string()]);
        assert!(m.exists("g") && m.exists("b") && m.exists("e"));
        assert!(!m.exists("nope"));
        // Missing in one hierarchy: not "existing" any more.
        std::fs::remove_dir(p("pids/kubepods/podg")).map_err(|e| Error::io("pids", e))?;
        assert!(!m.exists("g"));
        assert!(m.ensure_exists(&with_uid(best_effort("x"), "../x")).is_err());
        Ok(())
    }

    /// Removes a test's top cgroup, even when the test fails.
    struct Cleanup<'a>(&'a PodContainerManager, String);

    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            let _ = self.0.cgroups().destroy(&CgroupName::parse(&self.1));
        }
    }

    /// We are root on a real host (cgroup v1 here; v2 with either driver in the fresh-host check):
    /// a real pod cgroup, under a uniquely named cgroup root, is created with the host's driver,
    /// sized, blocked by a process and removed.
    #[test]
    fn real_pod_cgroup_lifecycle() -> Result<()> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let top = format!("kubepods-test-{}-{nanos}", std::process::id());
        let cgroups = CgroupManager::new(CgroupDriver::detect(), Path::new(DEFAULT_CGROUP_MOUNT))?;
        let m = PodContainerManager::new(cgroups.clone(), &top).with_pod_pids_limit(1000);
        let _cleanup = Cleanup(&m, top.clone());
        let uid = "0b5c6d7e-test";
        let pod = burstable(uid);

        let parent = m.ensure_exists(&pod)?;
        let name = CgroupName::parse(&top).child("kubepods").child("burstable").child(&format!("pod{uid}"));
        match cgroups.driver() {
            CgroupDriver::Cgroupfs => assert_eq!(parent, format!("/{top}/kubepods/burstable/pod{uid}")),
            CgroupDriver::Systemd => {
                let t = top.replace('-', "_");
                assert_eq!(
                    parent,
                    format!("/{t}.slice/{t}-kubepods.slice/{t}-kubepods-burstable.slice/{t}-kubepods-burstable-pod0b5c6d7e_test.slice")
                );
            }
        }
        m.ensure_exists(&pod)?;
        let dirs = cgroups.dirs(&name);
        match cgroups.version() {
            CgroupVersion::V1 => {
                let in_tree = |controller: &str, file: &str| -> Option<PathBuf> {
                    let h = cgroups.hierarchies().iter().find(|h| h.has(controller))?;
                    Some(h.path.join(parent.trim_start_matches('/')).join(file))
                };
                for (controller, file, want) in [
                    ("cpu", "cpu.cfs_quota_us", "25000"),
                    ("cpu", "cpu.shares", "102"),
                    ("memory", "memory.limit_in_bytes", "67108864"),
                    ("pids", "pids.max", "1000"),
                ] {
                    if let Some(p) = in_tree(controller, file) {
                        assert_eq!(read(&p), want, "{file}");
                    }
                }
                if let Some(p) = in_tree("cpuset", "cpuset.cpus") {
                    assert!(!read(&p).is_empty(), "cpuset.cpus inherited");
                }
            }
            CgroupVersion::V2 => {
                let dir = &dirs[0];
                assert_eq!(read(&dir.join("cpu.max")), "25000 100000");
                assert_eq!(read(&dir.join("cpu.weight")), "4");
                assert_eq!(read(&dir.join("memory.max")), "67108864");
                assert_eq!(read(&dir.join("pids.max")), "1000");
            }
        }
        assert!(m.exists(uid));
        assert_eq!(m.pod_cgroup_uids(), vec![m.pod_cgroup_key(uid)]);

        // What the runtime leaves behind: a container cgroup inside the pod's, here with a process.
        let container_dirs: Vec<PathBuf> = match cgroups.version() {
            CgroupVersion::V1 => cgroups.hierarchies().iter().filter(|h| !h.unified).map(|h| h.path.join(parent.trim_start_matches('/')).join("c0ffee")).collect(),
            CgroupVersion::V2 => vec![dirs[0].join("c0ffee")],
        };
        for d in &container_dirs {
            std::fs::create_dir(d).map_err(|e| Error::io(d, e))?;
        }
        let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().map_err(|e| Error::io("sleep", e))?;
        let procs_dir = match cgroups.version() {
            CgroupVersion::V1 => cgroups
                .hierarchies()
                .iter()
                .find(|h| h.has("pids") || h.has("memory"))
                .map(|h| h.path.join(parent.trim_start_matches('/')).join("c0ffee")),
            CgroupVersion::V2 => Some(dirs[0].join("c0ffee")),
        };
        let busy = match &procs_dir {
            Some(d) => {
                let procs = d.join("cgroup.procs");
                std::fs::write(&procs, sleeper.id().to_string()).map_err(|e| Error::io(&procs, e))?;
                Some(m.destroy(uid))
            }
            None => None,
        };
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        if let Some(busy) = busy {
            let err = busy.expect_err("a process is inside");
            assert!(err.to_string().contains(&format!("cgroup still has processes (pids {})", sleeper.id())), "{err}");
        }

        m.destroy(uid)?;
        assert!(!m.exists(uid));
        assert!(m.pod_cgroup_uids().is_empty());
        m.destroy(uid)?; // already gone
        Ok(())
    }
}
