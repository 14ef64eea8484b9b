//! Mirrors kubelet's cm/cgroup_manager_linux.go (and cm/util/cgroups_linux.go's detection): one
//! interface to the node's cgroups whatever the host has — cgroup v1 or v2, and the cgroupfs or
//! the systemd driver — so that the pod and QoS code above it names cgroups, never files.
//!
//! A cgroup is a [`CgroupName`], a list of levels (`["kubepods", "burstable", "pod<uid>"]`), and
//! each driver spells it its own way ([`CgroupManager::name`]): the cgroupfs driver as a path
//! (`/kubepods/burstable/pod<uid>`), the systemd driver as nested slices
//! (`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice`). The runtime is
//! given that spelling as the sandbox's cgroup parent, and must use the same driver
//! (containerd's `SystemdCgroup`).
//!
//! | host                         | driver    | who makes the cgroup            | files             |
//! |------------------------------|-----------|---------------------------------|-------------------|
//! | v1 (one tree per controller) | cgroupfs  | the agent, in every hierarchy   | [`super::cgroup_v1`] |
//! | v2 (one tree)                | cgroupfs  | the agent, enabling controllers | [`super::cgroup_v2`] |
//! | v2, systemd is PID 1         | systemd   | systemd, asked over D-Bus       | [`super::systemd`]   |

use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::cgroup_v1::{self, Hierarchy, detect_hierarchies};
use super::cgroup_v2;
use super::files::{read_trimmed, remove_cgroup_tree, tree_pids};
use super::helpers::ResourceConfig;
use super::systemd::{self, Systemd};
use crate::error::{Error, Result};
use crate::volumemanager::mount;

/// Where the cgroup hierarchies are mounted.
pub(crate) const DEFAULT_CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// `--cgroup-driver`: who creates the node's cgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupDriver {
    /// The agent writes cgroupfs itself (kubelet's default; the only choice without systemd).
    Cgroupfs,
    /// systemd creates them as slices, asked over D-Bus (what kubeadm configures).
    Systemd,
}

impl CgroupDriver {
    /// The driver for this host, as kubeadm picks it: systemd where systemd booted the machine
    /// (`/run/systemd/system` exists, sd_booted's test) and the host has cgroup v2, cgroupfs
    /// otherwise (a cgroup v1 host, a container without systemd, a machine with another init).
    /// containerd's `SystemdCgroup` must agree: kubelab's containerd configs ask this too.
    pub fn detect() -> CgroupDriver {
        let systemd_booted = Path::new("/run/systemd/system").is_dir();
        if systemd_booted && cgroup_version(Path::new(DEFAULT_CGROUP_MOUNT)) == Some(CgroupVersion::V2) {
            CgroupDriver::Systemd
        } else {
            CgroupDriver::Cgroupfs
        }
    }

    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            CgroupDriver::Cgroupfs => "cgroupfs",
            CgroupDriver::Systemd => "systemd",
        }
    }
}

impl std::fmt::Display for CgroupDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CgroupDriver {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cgroupfs" => Ok(CgroupDriver::Cgroupfs),
            "systemd" => Ok(CgroupDriver::Systemd),
            other => Err(format!("unknown cgroup driver {other:?}: cgroupfs or systemd")),
        }
    }
}

/// Which cgroup hierarchy the host mounts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// One tree per controller under `/sys/fs/cgroup/<controller>` (hybrid hosts included: their
    /// v2 tree at `/sys/fs/cgroup/unified` holds no controllers).
    V1,
    /// The unified hierarchy: one tree at `/sys/fs/cgroup`.
    V2,
}

/// The hierarchy mounted at `mount_point`, from the mount table (libcontainer's IsCgroup2UnifiedMode):
/// v2 when it is itself a `cgroup2` mount, v1 when cgroup hierarchies are mounted below it.
pub fn cgroup_version(mount_point: &Path) -> Option<CgroupVersion> {
    let mounts = mount::mounts().ok()?;
    if mounts.iter().any(|m| m.mount_point == mount_point && m.fs_type == "cgroup2") {
        return Some(CgroupVersion::V2);
    }
    detect_hierarchies(mount_point, &mounts).iter().any(|h| !h.unified).then_some(CgroupVersion::V1)
}

/// A cgroup by its levels below the top of the tree (kubelet's CgroupName).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CgroupName(Vec<String>);

impl CgroupName {
    /// From a slash-separated path: `/kubelab/kubepods` → `["kubelab", "kubepods"]`.
    pub(crate) fn parse(path: &str) -> CgroupName {
        CgroupName(path.split('/').filter(|p| !p.is_empty()).map(str::to_string).collect())
    }

    pub(crate) fn child(&self, level: &str) -> CgroupName {
        let mut parts = self.0.clone();
        parts.push(level.to_string());
        CgroupName(parts)
    }

    /// The cgroupfs driver's spelling: `/kubepods/burstable/pod<uid>`.
    pub(crate) fn to_cgroupfs(&self) -> String {
        format!("/{}", self.0.join("/"))
    }

    /// The systemd driver's spelling: `/kubepods.slice/kubepods-burstable.slice/…`.
    pub(crate) fn to_systemd(&self) -> String {
        systemd::expand_slice(&self.0)
    }
}

#[derive(Clone, Debug)]
enum Layout {
    V1(Vec<Hierarchy>),
    V2(PathBuf),
}

/// Creates, sizes, lists and removes cgroups (kubelet's CgroupManager). Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct CgroupManager {
    driver: CgroupDriver,
    layout: Layout,
    systemd: Option<Systemd>,
}

impl CgroupManager {
    /// The cgroups mounted at `mount_point` (`/sys/fs/cgroup`), managed with `driver`. Fails with a
    /// message naming the fix when the host cannot be managed that way: no cgroup mounted, a v2
    /// tree without the cpu, memory or pids controller (not delegated to us), the systemd driver
    /// on a cgroup v1 host or without a reachable systemd.
    pub(crate) fn new(driver: CgroupDriver, mount_point: &Path) -> Result<CgroupManager> {
        let layout = match cgroup_version(mount_point) {
            Some(CgroupVersion::V2) => {
                let available = cgroup_v2::available_controllers(mount_point)?;
                let missing: Vec<&str> =
                    cgroup_v2::REQUIRED_CONTROLLERS.into_iter().filter(|c| !available.iter().any(|a| a == c)).collect();
                if !missing.is_empty() {
                    return Err(Error::UnsupportedHost(format!(
                        "the cgroup v2 tree at {} does not offer the {} controller(s) (cgroup.controllers: {:?}): they were not delegated here. Run from a root shell, or as a systemd service with Delegate=yes (kubelab up --install-service writes one); in a container, give it a private cgroup namespace with those controllers",
                        mount_point.display(),
                        missing.join(", "),
                        available.join(" ")
                    )));
                }
                Layout::V2(mount_point.to_path_buf())
            }
            Some(CgroupVersion::V1) => Layout::V1(detect_hierarchies(mount_point, &mount::mounts()?)),
            None => {
                return Err(Error::UnsupportedHost(format!(
                    "no cgroup hierarchy is mounted at {}: the node agent needs cgroup v1 or v2",
                    mount_point.display()
                )));
            }
        };
        let systemd = match (driver, &layout) {
            (CgroupDriver::Cgroupfs, _) => None,
            (CgroupDriver::Systemd, Layout::V2(_)) => Some(Systemd::connect()?),
            (CgroupDriver::Systemd, Layout::V1(_)) => {
                return Err(Error::UnsupportedHost(
                    "--cgroup-driver=systemd is supported on cgroup v2 hosts; this host has cgroup v1: use --cgroup-driver=cgroupfs".into(),
                ));
            }
        };
        Ok(CgroupManager { driver, layout, systemd })
    }

    /// The cgroupfs driver on these v1 hierarchies (tests lay them out in a plain directory).
    #[cfg(test)]
    pub(crate) fn cgroupfs_v1(hierarchies: Vec<Hierarchy>) -> CgroupManager {
        CgroupManager { driver: CgroupDriver::Cgroupfs, layout: Layout::V1(hierarchies), systemd: None }
    }

    pub(crate) fn driver(&self) -> CgroupDriver {
        self.driver
    }

    pub(crate) fn version(&self) -> CgroupVersion {
        match self.layout {
            Layout::V1(_) => CgroupVersion::V1,
            Layout::V2(_) => CgroupVersion::V2,
        }
    }

    /// The v1 hierarchies (none on a v2 host).
    pub(crate) fn hierarchies(&self) -> &[Hierarchy] {
        match &self.layout {
            Layout::V1(h) => h,
            Layout::V2(_) => &[],
        }
    }

    /// The cgroup's name in the driver's spelling, as the runtime's `cgroup_parent` takes it.
    pub(crate) fn name(&self, name: &CgroupName) -> String {
        match self.driver {
            CgroupDriver::Cgroupfs => name.to_cgroupfs(),
            CgroupDriver::Systemd => name.to_systemd(),
        }
    }

    fn relative(&self, name: &CgroupName) -> PathBuf {
        PathBuf::from(self.name(name).trim_start_matches('/'))
    }

    /// The cgroup's directories: one per v1 hierarchy (the hybrid v2 tree included), or the one.
    pub(crate) fn dirs(&self, name: &CgroupName) -> Vec<PathBuf> {
        let relative = self.relative(name);
        match &self.layout {
            Layout::V1(hierarchies) => hierarchies.iter().map(|h| h.path.join(&relative)).collect(),
            Layout::V2(root) => vec![root.join(relative)],
        }
    }

    /// The directory holding the cgroup's memory files, if memory is accounted.
    pub(crate) fn memory_dir(&self, name: &CgroupName) -> Option<PathBuf> {
        let relative = self.relative(name);
        match &self.layout {
            Layout::V1(hierarchies) => hierarchies.iter().find(|h| !h.unified && h.has("memory")).map(|h| h.path.join(relative)),
            Layout::V2(root) => Some(root.join(relative)),
        }
    }

    /// The name of the cgroup the runtime makes for a container below its pod's: runc names it
    /// after the container under cgroupfs, and containerd asks systemd for a
    /// `cri-containerd-<id>.scope` under the systemd driver.
    pub(crate) fn container_dir_name(&self, container_id: &str) -> String {
        match self.driver {
            CgroupDriver::Cgroupfs => container_id.to_string(),
            CgroupDriver::Systemd => format!("cri-containerd-{container_id}.scope"),
        }
    }

    /// Whether the cgroup exists (in every v1 hierarchy).
    #[cfg(test)]
    pub(crate) fn exists(&self, name: &CgroupName) -> bool {
        let relative = self.relative(name);
        match &self.layout {
            Layout::V1(hierarchies) => {
                let mut v1 = hierarchies.iter().filter(|h| !h.unified).peekable();
                v1.peek().is_some() && v1.all(|h| h.path.join(&relative).is_dir())
            }
            Layout::V2(root) => root.join(relative).is_dir(),
        }
    }

    /// Creates the cgroup (and its missing ancestors) and sets `config` on it; idempotent, and a
    /// value already in place is not written again (kubelet's Create, then Update).
    pub(crate) fn create(&self, name: &CgroupName, config: &ResourceConfig) -> Result<()> {
        let relative = self.relative(name);
        match (&self.layout, &self.systemd) {
            (Layout::V2(root), Some(systemd)) => {
                // Ancestors first, without limits: a slice's parent must be there for its cgroup.
                for depth in 1..name.0.len() {
                    let ancestor = CgroupName(name.0[..depth].to_vec());
                    let dir = root.join(self.relative(&ancestor));
                    if !dir.is_dir() {
                        let unit = systemd::slice_name(&ancestor.0);
                        systemd.ensure_slice(&unit, &systemd::properties(&unit, &ResourceConfig::default()), &dir)?;
                    }
                }
                let dir = root.join(&relative);
                if dir.is_dir() && systemd_values_in_place(&dir, config) {
                    return Ok(());
                }
                let unit = systemd::slice_name(&name.0);
                systemd.ensure_slice(&unit, &systemd::properties(&unit, config), &dir)
            }
            (Layout::V2(root), None) => {
                cgroup_v2::make_cgroup(root, &relative)?;
                cgroup_v2::apply(&root.join(&relative), config)
            }
            (Layout::V1(hierarchies), _) => {
                for h in hierarchies.iter().filter(|h| !h.unified) {
                    cgroup_v1::make_cgroup(h, &relative)?;
                    cgroup_v1::apply(h, &relative, config)?;
                }
                Ok(())
            }
        }
    }

    /// Removes the cgroup with everything below it. One that still holds processes is not removed:
    /// the error names them, and the caller retries. Already gone is fine.
    pub(crate) fn destroy(&self, name: &CgroupName) -> Result<()> {
        match (&self.layout, &self.systemd) {
            (Layout::V2(root), Some(systemd)) => {
                let dir = root.join(self.relative(name));
                if !dir.exists() {
                    return Ok(());
                }
                if !tree_pids(&dir).is_empty() {
                    // Stopping the slice would make systemd kill them: that is the caller's call.
                    return Err(super::files::busy(&dir));
                }
                systemd.stop_unit(&systemd::slice_name(&name.0), &dir)
            }
            _ => {
                let mut first_error = None;
                for dir in self.dirs(name) {
                    if let Err(e) = remove_cgroup_tree(&dir) {
                        first_error.get_or_insert(e);
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
        }
    }

    /// The last level of every child cgroup of `name`, in any hierarchy, sorted and without
    /// duplicates; systemd's slices are given by their level (`pod<uid>` of
    /// `kubepods-burstable-pod<uid>.slice`, still escaped). Unreadable directories are skipped.
    pub(crate) fn child_levels(&self, name: &CgroupName) -> Vec<String> {
        let prefix = match self.driver {
            CgroupDriver::Systemd => Some(systemd::slice_name(&name.0).trim_end_matches(".slice").to_string()),
            CgroupDriver::Cgroupfs => None,
        };
        let mut levels = std::collections::BTreeSet::new();
        for dir in self.dirs(name) {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let file_name = entry.file_name().to_string_lossy().into_owned();
                let level = match &prefix {
                    None => Some(file_name),
                    Some(prefix) => file_name
                        .strip_suffix(".slice")
                        .and_then(|s| if name.0.is_empty() { Some(s) } else { s.strip_prefix(prefix.as_str())?.strip_prefix('-') })
                        .map(str::to_string),
                };
                levels.extend(level);
            }
        }
        levels.into_iter().collect()
    }

    /// A level as it appears on disk under this driver (systemd escapes `-`).
    pub(crate) fn level_key(&self, level: &str) -> String {
        match self.driver {
            CgroupDriver::Cgroupfs => level.to_string(),
            CgroupDriver::Systemd => systemd::escape(level),
        }
    }
}

/// Whether the slice's cgroup files already hold what systemd would write for `config`, so no
/// D-Bus call is needed on every sync. systemd sets the same v2 files as the cgroupfs driver
/// ([`cgroup_v2::files`]), except that it rounds a CPU quota up to its 10 ms granularity.
fn systemd_values_in_place(dir: &Path, config: &ResourceConfig) -> bool {
    let period = config.cpu_period.unwrap_or(super::helpers::QUOTA_PERIOD);
    let as_systemd_sets = ResourceConfig {
        cpu_quota: config.cpu_quota.map(|quota| match systemd::quota_per_sec_usec(quota, period) {
            Some(per_sec) => i64::try_from(per_sec * period / 1_000_000).unwrap_or(i64::MAX),
            None => 0,
        }),
        ..*config
    };
    cgroup_v2::files(&as_systemd_sets)
        .iter()
        .all(|(file, want)| read_trimmed(&dir.join(file)).unwrap_or_default() == *want)
}
