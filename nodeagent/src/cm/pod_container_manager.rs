//! Mirrors kubelet's cm/pod_container_manager_linux.go and cm/qos_container_manager_linux.go, for
//! cgroup v1 with the cgroupfs driver: one cgroup per pod, under one per QoS class.
//!
//! ```text
//! /kubepods                      every pod (kubelet's "node allocatable" cgroup)
//! /kubepods/pod<uid>             a Guaranteed pod: directly under kubepods
//! /kubepods/burstable/pod<uid>   a Burstable pod
//! /kubepods/besteffort/pod<uid>  a BestEffort pod (the QoS cgroup has the minimum cpu.shares)
//! /kubepods/…/pod<uid>/<id>      the sandbox's and containers' cgroups, made by containerd (runc)
//! ```
//!
//! In cgroup v1 each controller is its own tree (`/sys/fs/cgroup/cpu`, `…/memory`, …), so every
//! cgroup above exists once per mounted hierarchy. The pod cgroup's path is what SyncPod passes to
//! RunPodSandbox as `cgroup_parent`; containerd puts the containers below it but never removes it,
//! so [`PodContainerManager::destroy`] does, after the pod's containers are gone.
//!
//! Every method does blocking file I/O on cgroupfs: async callers wrap them in
//! `tokio::task::spawn_blocking`.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};

use api::core::v1::helper::qos::{PodQOSClass, compute_pod_qos};
use k8s_openapi::api::core::v1::Pod;
use tracing::{debug, info, warn};

use super::helpers::{MIN_SHARES, resource_config_for_pod};
use crate::error::{Error, Result};
use crate::volumemanager::mount::{self, MountInfo};

/// Where the cgroup hierarchies are mounted.
pub(crate) const DEFAULT_CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// The cgroup every pod lives under.
pub(crate) const KUBEPODS: &str = "kubepods";
/// The QoS cgroups' names below [`KUBEPODS`].
pub(crate) const BURSTABLE: &str = "burstable";
pub(crate) const BEST_EFFORT: &str = "besteffort";
/// A pod cgroup is named `pod<uid>`.
pub(crate) const POD_CGROUP_PREFIX: &str = "pod";

/// One mounted cgroup hierarchy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hierarchy {
    /// Its mount point, e.g. `/sys/fs/cgroup/memory`.
    pub(crate) path: PathBuf,
    /// The controllers attached to it (`cpu`, `cpuacct`, …; `name=systemd` for a named hierarchy).
    pub(crate) controllers: Vec<String>,
    /// The cgroup v2 tree of a hybrid setup. The agent never creates cgroups there, but
    /// [`PodContainerManager::destroy`] removes pod cgroups it finds in it.
    pub(crate) unified: bool,
}

impl Hierarchy {
    /// A v1 hierarchy (tests build their own layouts with this).
    #[cfg(test)]
    pub(crate) fn v1(path: impl Into<PathBuf>, controllers: &[&str]) -> Hierarchy {
        Hierarchy {
            path: path.into(),
            controllers: controllers.iter().map(|c| c.to_string()).collect(),
            unified: false,
        }
    }

    fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }
}

/// The cgroup hierarchies mounted directly below `cgroup_root`, from the mount table. Super options
/// that are not controllers (`rw`, `clone_children`, …) are dropped.
pub(crate) fn detect_hierarchies(cgroup_root: &Path, mounts: &[MountInfo]) -> Vec<Hierarchy> {
    const NOT_CONTROLLERS: [&str; 6] = ["rw", "ro", "noprefix", "clone_children", "xattr", "cpuset_v2_mode"];
    let mut found: Vec<Hierarchy> = mounts
        .iter()
        .filter(|m| m.mount_point.parent() == Some(cgroup_root))
        .filter_map(|m| match m.fs_type.as_str() {
            "cgroup" => Some(Hierarchy {
                path: m.mount_point.clone(),
                controllers: m
                    .super_options
                    .split(',')
                    .filter(|o| !NOT_CONTROLLERS.contains(o) && !o.starts_with("release_agent="))
                    .map(str::to_string)
                    .collect(),
                unified: false,
            }),
            "cgroup2" => Some(Hierarchy { path: m.mount_point.clone(), controllers: Vec::new(), unified: true }),
            _ => None,
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| a.path == b.path);
    found
}

/// Creates, sizes and removes pod cgroups.
#[derive(Clone, Debug)]
pub(crate) struct PodContainerManager {
    /// [`KUBEPODS`], or a uniquely named cgroup in tests.
    pods_cgroup: String,
    hierarchies: Vec<Hierarchy>,
}

impl PodContainerManager {
    /// Manages every cgroup hierarchy mounted below `cgroup_root`, as found in
    /// `/proc/self/mountinfo`. Fails when there is no v1 hierarchy: kubelab's agent speaks cgroup v1.
    pub(crate) fn new(cgroup_root: impl Into<PathBuf>) -> Result<Self> {
        let cgroup_root = cgroup_root.into();
        let hierarchies = detect_hierarchies(&cgroup_root, &mount::mounts()?);
        if !hierarchies.iter().any(|h| !h.unified) {
            return Err(Error::UnsupportedHost(format!(
                "no cgroup v1 hierarchy is mounted below {}: the node agent supports cgroup v1 (cgroupfs driver) only",
                cgroup_root.display()
            )));
        }
        Ok(Self::with_hierarchies(hierarchies))
    }

    /// Manages exactly these hierarchies (tests lay them out in a plain directory).
    pub(crate) fn with_hierarchies(hierarchies: Vec<Hierarchy>) -> Self {
        PodContainerManager { pods_cgroup: KUBEPODS.to_string(), hierarchies }
    }

    /// Puts pods under `/<name>` instead of `/kubepods` (tests use a unique name).
    pub(crate) fn with_pods_cgroup(mut self, name: &str) -> Self {
        self.pods_cgroup = name.to_string();
        self
    }

    pub(crate) fn hierarchies(&self) -> &[Hierarchy] {
        &self.hierarchies
    }

    fn v1(&self) -> impl Iterator<Item = &Hierarchy> {
        self.hierarchies.iter().filter(|h| !h.unified)
    }

    /// The three cgroups a pod cgroup can be in, relative to a hierarchy's mount point.
    fn qos_parents(&self) -> [PathBuf; 3] {
        let pods = PathBuf::from(&self.pods_cgroup);
        [pods.join(BURSTABLE), pods.join(BEST_EFFORT), pods]
    }

    fn pod_relative(&self, qos: PodQOSClass, uid: &str) -> PathBuf {
        let pods = PathBuf::from(&self.pods_cgroup);
        let parent = match qos {
            PodQOSClass::Guaranteed => pods,
            PodQOSClass::Burstable => pods.join(BURSTABLE),
            PodQOSClass::BestEffort => pods.join(BEST_EFFORT),
        };
        parent.join(format!("{POD_CGROUP_PREFIX}{uid}"))
    }

    /// The QoS manager's start: `kubepods`, `kubepods/burstable` and `kubepods/besteffort` in every
    /// v1 hierarchy, the BestEffort cgroup at the minimum `cpu.shares`. Idempotent.
    pub(crate) fn ensure_qos_cgroups(&self) -> Result<()> {
        let [burstable, best_effort, _] = self.qos_parents();
        for h in self.v1() {
            make_cgroup(h, &burstable)?;
            make_cgroup(h, &best_effort)?;
            if h.has("cpu") {
                write_if_changed(&h.path.join(&best_effort).join("cpu.shares"), &MIN_SHARES.to_string())?;
            }
        }
        Ok(())
    }

    /// The pod's cgroup as RunPodSandbox's `cgroup_parent` wants it: `/kubepods/burstable/pod<uid>`,
    /// `/kubepods/besteffort/pod<uid>`, or `/kubepods/pod<uid>` for a Guaranteed pod.
    pub(crate) fn cgroup_parent(&self, pod: &Pod) -> String {
        let uid = api::pod::uid(pod);
        format!("/{}", self.pod_relative(compute_pod_qos(pod), uid).display())
    }

    /// Step 1 of SyncPod: the pod's cgroup in every v1 hierarchy (the QoS cgroups too), with
    /// `cpu.shares`, `cpu.cfs_period_us`, `cpu.cfs_quota_us` and `memory.limit_in_bytes` from
    /// [`resource_config_for_pod`]. Idempotent; a value already in place is not rewritten. Returns
    /// [`Self::cgroup_parent`].
    pub(crate) fn ensure_exists(&self, pod: &Pod) -> Result<String> {
        let uid = valid_uid(api::pod::uid(pod))?;
        let relative = self.pod_relative(compute_pod_qos(pod), uid);
        self.ensure_qos_cgroups()?;
        let config = resource_config_for_pod(pod);
        for h in self.v1() {
            make_cgroup(h, &relative)?;
            let dir = h.path.join(&relative);
            if h.has("cpu") {
                if let Some(shares) = config.cpu_shares {
                    write_if_changed(&dir.join("cpu.shares"), &shares.to_string())?;
                }
                // The period before the quota: the kernel checks a quota against the period.
                if let Some(period) = config.cpu_period {
                    write_if_changed(&dir.join("cpu.cfs_period_us"), &period.to_string())?;
                }
                if let Some(quota) = config.cpu_quota {
                    write_if_changed(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                }
            }
            if h.has("memory")
                && let Some(limit) = config.memory_limit
            {
                write_if_changed(&dir.join("memory.limit_in_bytes"), &limit.to_string())?;
            }
        }
        let parent = format!("/{}", relative.display());
        debug!(target: "kubelet::cm", pod = %uid, cgroup = %parent, ?config, "pod cgroup ensured");
        Ok(parent)
    }

    /// Removes the pod's cgroup from every hierarchy (the v2 tree of a hybrid setup included),
    /// children first: containerd leaves `<pod cgroup>/<container id>` directories behind. A cgroup
    /// that still holds a process cannot be removed (EBUSY); the error names the processes, and the
    /// caller retries once they are gone. Already removed is fine.
    pub(crate) fn destroy(&self, pod_uid: &str) -> Result<()> {
        let uid = valid_uid(pod_uid)?;
        let name = format!("{POD_CGROUP_PREFIX}{uid}");
        let mut first_error = None;
        for h in &self.hierarchies {
            for parent in self.qos_parents() {
                if let Err(e) = remove_cgroup_tree(&h.path.join(&parent).join(&name)) {
                    first_error.get_or_insert(e);
                }
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

    /// Every UID with a `pod<uid>` cgroup in any hierarchy, sorted: compared with the pods the agent
    /// knows, the difference is the orphans to [`Self::destroy`]. Unreadable directories are logged
    /// and skipped.
    pub(crate) fn pod_cgroup_uids(&self) -> Vec<String> {
        let mut uids = BTreeSet::new();
        for h in &self.hierarchies {
            for parent in self.qos_parents() {
                let dir = h.path.join(parent);
                let entries = match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        warn!(target: "kubelet::cm", dir = %dir.display(), error = %e, "cannot list pod cgroups");
                        continue;
                    }
                };
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let Some(uid) = name.strip_prefix(POD_CGROUP_PREFIX)
                        && !uid.is_empty()
                        && entry.file_type().is_ok_and(|t| t.is_dir())
                    {
                        uids.insert(uid.to_string());
                    }
                }
            }
        }
        uids.into_iter().collect()
    }

    /// Whether the pod's cgroup exists in every v1 hierarchy (under whichever QoS cgroup).
    #[cfg(test)]
    pub(crate) fn exists(&self, uid: &str) -> bool {
        if valid_uid(uid).is_err() {
            return false;
        }
        let name = format!("{POD_CGROUP_PREFIX}{uid}");
        let mut any = false;
        for h in self.v1() {
            any = true;
            if !self.qos_parents().iter().any(|p| h.path.join(p).join(&name).is_dir()) {
                return false;
            }
        }
        any
    }
}

/// A pod UID that is safe inside a path.
fn valid_uid(uid: &str) -> Result<&str> {
    if uid.is_empty() || uid.contains('/') || uid == "." || uid == ".." {
        return Err(Error::UnusableUid(format!("pod UID {uid:?} cannot name a cgroup")));
    }
    Ok(uid)
}

/// Creates `relative` and its missing ancestors in hierarchy `h`. In the cpuset hierarchy a new
/// cgroup starts with empty `cpuset.cpus`/`cpuset.mems`, and a process cannot join a cgroup with no
/// CPUs or memory nodes: copy them from the parent, level by level, as runc does.
fn make_cgroup(h: &Hierarchy, relative: &Path) -> Result<()> {
    let mut dir = h.path.clone();
    for component in relative.components() {
        dir.push(component);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(&dir, e)),
        }
        if h.has("cpuset") {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let own = dir.join(file);
                if read_trimmed(&own)?.is_empty()
                    && let Some(parent) = dir.parent()
                {
                    let inherited = read_trimmed(&parent.join(file))?;
                    write_if_changed(&own, &inherited)?;
                }
            }
        }
    }
    Ok(())
}

/// The file's content without surrounding whitespace; a missing file reads as empty.
fn read_trimmed(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(s.trim().to_string()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Writes `value` unless the file already holds it (the kernel may round a memory limit to a page,
/// in which case the same value is written again each time: harmless).
fn write_if_changed(path: &Path, value: &str) -> Result<()> {
    if read_trimmed(path)? == value {
        return Ok(());
    }
    std::fs::write(path, value).map_err(|e| Error::io(path, e))
}

/// Removes a cgroup directory and every cgroup below it, deepest first. Only directories are
/// removed: a cgroup's control files vanish with it.
fn remove_cgroup_tree(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if entry.file_type().map_err(|e| Error::io(entry.path(), e))?.is_dir() {
            remove_cgroup_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
            let pids = read_trimmed(&dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<&str> = pids.split_whitespace().collect();
            let why = if pids.is_empty() {
                "cgroup is busy".to_string()
            } else {
                format!("cgroup still has processes (pids {})", pids.join(", "))
            };
            Err(Error::io(dir, io::Error::new(io::ErrorKind::ResourceBusy, why)))
        }
        Err(e) => Err(Error::io(dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn detects_hierarchies_from_mountinfo() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset,clone_children
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,release_agent=/x,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /elsewhere/memory rw - cgroup cgroup rw,memory
";
        let found = detect_hierarchies(Path::new("/sys/fs/cgroup"), &mount::parse_mountinfo(text));
        let summary: Vec<(String, Vec<String>, bool)> =
            found.iter().map(|h| (h.path.display().to_string(), h.controllers.clone(), h.unified)).collect();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            summary,
            vec![
                ("/sys/fs/cgroup/cpu,cpuacct".into(), s(&["cpu", "cpuacct"]), false),
                ("/sys/fs/cgroup/cpuset".into(), s(&["cpuset"]), false),
                ("/sys/fs/cgroup/memory".into(), s(&["memory"]), false),
                ("/sys/fs/cgroup/systemd".into(), s(&["name=systemd"]), false),
                ("/sys/fs/cgroup/unified".into(), vec![], true),
            ]
        );
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
        let m = PodContainerManager::with_hierarchies(hierarchies);

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

    /// Removes a test's top cgroup from every hierarchy, even when the test fails.
    struct Cleanup<'a>(&'a PodContainerManager, String);

    impl Drop for Cleanup<'_> {
        fn drop(&mut self) {
            for h in self.0.hierarchies() {
                let _ = remove_cgroup_tree(&h.path.join(&self.1));
            }
        }
    }

    /// We are root on a cgroup v1 machine: a real pod cgroup, under a uniquely named parent instead
    /// of /kubepods, is created, sized, blocked by a process and removed.
    #[test]
    fn real_pod_cgroup_lifecycle() -> Result<()> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let top = format!("kubepods-test-{}-{nanos}", std::process::id());
        let m = PodContainerManager::new(DEFAULT_CGROUP_ROOT)?.with_pods_cgroup(&top);
        let _cleanup = Cleanup(&m, top.clone());
        let uid = "0b5c6d7e-test";
        let pod = burstable(uid);

        let parent = m.ensure_exists(&pod)?;
        assert_eq!(parent, format!("/{top}/burstable/pod{uid}"));
        m.ensure_exists(&pod)?;
        let in_tree = |controller: &str, file: &str| -> Option<PathBuf> {
            m.hierarchies()
                .iter()
                .find(|h| h.has(controller))
                .map(|h| h.path.join(&top).join("burstable").join(format!("pod{uid}")).join(file))
        };
        if let Some(p) = in_tree("cpu", "cpu.cfs_quota_us") {
            assert_eq!(read(&p), "25000");
        }
        if let Some(p) = in_tree("cpu", "cpu.shares") {
            assert_eq!(read(&p), "102");
        }
        if let Some(p) = in_tree("memory", "memory.limit_in_bytes") {
            assert_eq!(read(&p), "67108864");
        }
        if let Some(p) = in_tree("cpuset", "cpuset.cpus") {
            assert!(!read(&p).is_empty(), "cpuset.cpus inherited");
        }
        assert!(m.exists(uid));
        assert_eq!(m.pod_cgroup_uids(), vec![uid.to_string()]);

        // What containerd leaves behind: a container cgroup inside the pod's, here with a process.
        let container_dir =
            |h: &Hierarchy| h.path.join(&top).join("burstable").join(format!("pod{uid}")).join("c0ffee");
        for h in m.hierarchies().iter().filter(|h| !h.unified) {
            std::fs::create_dir(container_dir(h)).map_err(|e| Error::io(container_dir(h), e))?;
        }
        let pids = m.hierarchies().iter().find(|h| h.has("pids") || h.has("memory")).cloned();
        let mut sleeper = std::process::Command::new("sleep").arg("60").spawn().map_err(|e| Error::io("sleep", e))?;
        let busy = match &pids {
            Some(h) => {
                let procs = container_dir(h).join("cgroup.procs");
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
