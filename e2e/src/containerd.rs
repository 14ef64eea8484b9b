//! A private containerd for one test: its own root, state, sockets, runc root and CNI config,
//! started inside its own persistent mount namespace so that nothing it does reaches a system
//! containerd (docker may be using `/run/containerd`), and torn down without touching anything it
//! did not create. It is the recipe `kubelab up` follows (docs/architecture/lab.md): a persistent
//! mount namespace, because containerd 1.6 hard-codes its shims' socket directory.
//! (Long on purpose: the whole recipe — configure, start, import, tear down — in the order it runs.)
//!
//! Layout under the directory given to [`Containerd::start`]:
//! ```text
//! config.toml            containerd's config (version 2)
//! containerd.sock        CRI + containerd gRPC        containerd.sock.ttrpc
//! root/ state/ runc/     containerd's root and state, runc's --root
//! run-containerd/        bind-mounted over /run/containerd inside the namespace: the v2 shims
//!                        put their sockets in /run/containerd/s, a path containerd 1.6 hard-codes
//! mntns                  the persistent mount namespace (an nsfs bind mount on an empty file;
//!                        the directory itself is a private bind mount, so it can hold one)
//! cni/net.d/ cni/ipam/   CNI config (see [`Containerd::write_bridge_conflist`]) and host-local leases
//! opt/                   containerd's "opt" plugin directory (default /opt/containerd)
//! stdout.log stderr.log  containerd's output, appended across restarts
//! ```
//!
//! Why a *persistent* namespace (bound to `mntns`) and not `unshare containerd`: the netns and
//! rootfs mounts containerd makes live in its mount namespace, and a namespace dies with its last
//! process. Bound to a file it outlives a containerd restart, and the pods with it.
//!
//! Teardown ([`Containerd::stop`], or drop) in order: every pod sandbox is stopped and removed
//! through CRI, which also runs CNI DEL (a containerd the test killed is started once more for
//! this: it recovers its pods from its state directory); containerd gets SIGTERM (SIGKILL after
//! [`crate::STOP_GRACE`]); container processes and shims still alive after that are killed — only
//! PIDs read from `init.pid` under this containerd's own state directory, and their parents (the
//! runc v2 shim of containerd 1.6 writes no PID file of its own), each checked against `/proc`
//! first; mounts left inside the namespace, then the `mntns` bind mount and the directory's own, are unmounted; the
//! CNI bridges configured through [`Containerd::write_bridge_conflist`] are deleted; empty
//! cgroups named after this containerd's tasks, and the `/sys/fs/cgroup/<controller>/k8s.io`
//! directories it created, are removed.
//!
//! Left behind, by design (each shared with any other user of the machine, so not ours to undo):
//! the empty directory `/run/containerd` (created only if missing: a mount point must exist, and
//! removing it would detach a concurrent harness's bind mount); the empty `/var/lib/cni/results`
//! (libcni's cache, always there); `net.ipv4.ip_forward=1`, which the CNI bridge plugin sets for a
//! gateway bridge; iptables' `nat` table, loaded by the bridge plugin's masquerade rules (empty
//! again once the pods are gone). Only if CRI cleanup failed altogether do a pod's CNI iptables
//! chain and libcni cache file stay (the test's log then says so).

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use nodeagent::cri::RemoteRuntime;
use nodeagent::cri::containerd_config::RUNC;

use crate::ports::{self, Port};
use crate::process::{Process, log_tail};

/// The pause image `deploy/images/build.sh` builds; containerd's `sandbox_image`.
pub use nodeagent::cri::containerd_config::PAUSE_IMAGE;
/// The busybox image `deploy/images/build.sh` builds.
pub const BUSYBOX_IMAGE: &str = "docker.io/library/busybox:1.36";
/// The containerd namespace of the CRI plugin.
pub const CRI_NAMESPACE: &str = "k8s.io";
/// How long a fresh or restarted containerd gets to answer CRI `Version` (a cold start takes
/// ~0.12 s here; the margin is for a loaded machine).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long teardown's CRI calls (stop and remove every sandbox) may take in all.
pub const TEARDOWN_CRI_TIMEOUT: Duration = Duration::from_secs(60);

const CONTAINERD: &str = "/usr/bin/containerd";
const CTR: &str = "/usr/bin/ctr";
/// The directory containerd 1.6 puts shim sockets under, whatever its config says.
const RUN_CONTAINERD: &str = "/run/containerd";
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A containerd of the test's own. Torn down on drop (also when the test panics, after printing
/// the tail of containerd's log).
pub struct Containerd {
    dir: PathBuf,
    process: Option<Process>,
    stream_port: Port,
    /// CNI bridges configured by [`Containerd::write_bridge_conflist`]: deleted on teardown.
    bridges: BTreeSet<String>,
    /// `/sys/fs/cgroup/<controller>/k8s.io` directories absent before this containerd started.
    new_cgroup_dirs: Vec<PathBuf>,
    /// containerd answered CRI at least once: teardown may start it again to clean up.
    ever_ready: bool,
    torn_down: bool,
    /// Set by [`Containerd::start_temp`]: removed after teardown (unless `E2E_KEEP_DIRS`).
    tempdir: Option<tempfile::TempDir>,
}

/// What the harness needs on the machine, or a message naming what is missing and the fix.
pub fn prerequisites() -> Result<(), String> {
    let mut missing = Vec::new();
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        missing.push("root (mount namespaces, bind mounts and runc need it)".to_string());
    }
    let files: &[(&str, &str)] = &[
        (CONTAINERD, "containerd"),
        (CTR, "containerd"),
        ("/usr/bin/containerd-shim-runc-v2", "containerd"),
        (RUNC, "runc"),
        ("/usr/lib/cni/bridge", "containernetworking-plugins"),
        ("/usr/lib/cni/host-local", "containernetworking-plugins"),
        ("/usr/lib/cni/loopback", "containernetworking-plugins"),
        ("/usr/lib/cni/portmap", "containernetworking-plugins"),
        ("/usr/sbin/iptables", "iptables"),
        ("/usr/bin/ip", "iproute2"),
        ("/usr/bin/nsenter", "util-linux"),
        ("/usr/bin/unshare", "util-linux"),
        ("/usr/bin/mount", "mount"),
        ("/usr/bin/umount", "mount"),
    ];
    for (path, package) in files {
        if !is_executable(Path::new(path)) {
            missing.push(format!("{path} (Debian package {package})"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the private-containerd harness cannot run; missing: {} — run `make deps` as root",
            missing.join(", ")
        ))
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where `make images` leaves `pause.tar` and `busybox.tar`, resolved as the Makefile does:
/// `$KUBELAB_IMAGES` if set, else `$CARGO_TARGET_DIR/images`, else `<workspace>/target/images`.
pub fn images_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KUBELAB_IMAGES") {
        return PathBuf::from(dir);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("images");
    }
    // e2e/ is one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("images")
}

/// One image tarball from [`images_dir`] (`"pause.tar"`, `"busybox.tar"`), or an error saying how
/// to build it.
pub fn image_tar(file: &str) -> anyhow::Result<PathBuf> {
    let path = images_dir().join(file);
    anyhow::ensure!(
        path.is_file(),
        "image tarball {} not found — run `make images` (or set KUBELAB_IMAGES to where the tarballs are)",
        path.display()
    );
    Ok(path)
}

impl Containerd {
    /// Writes the config, creates the mount namespace and starts containerd in `dir` (created if
    /// missing; the caller removes it afterwards), then waits until CRI answers.
    pub async fn start(dir: &Path) -> anyhow::Result<Containerd> {
        prerequisites().map_err(anyhow::Error::msg)?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .with_context(|| format!("resolving {}", dir.display()))?;
        let new_cgroup_dirs = cgroup_dirs().into_iter().filter(|d| !d.exists()).collect();
        let mut c = Containerd {
            dir,
            process: None,
            stream_port: ports::reserve()?,
            bridges: BTreeSet::new(),
            new_cgroup_dirs,
            ever_ready: false,
            torn_down: false,
            tempdir: None,
        };
        // From here on an error drops `c`, which tears down whatever was set up.
        c.prepare()?;
        c.spawn()?;
        c.wait_ready().await?;
        Ok(c)
    }

    /// [`Containerd::start`] in a fresh temporary directory, removed after teardown unless
    /// `E2E_KEEP_DIRS` is set.
    pub async fn start_temp() -> anyhow::Result<Containerd> {
        let tmp = tempfile::Builder::new()
            .prefix("kubelab-e2e-containerd-")
            .tempdir()?;
        let mut c = Containerd::start(tmp.path()).await?;
        c.tempdir = Some(tmp);
        Ok(c)
    }

    /// The directory everything lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// containerd's gRPC socket (CRI and containerd's own API).
    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    /// The CRI endpoint, as the node agent's `--container-runtime-endpoint` takes it.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// Where CNI configs go; containerd picks a new one up within milliseconds.
    pub fn cni_conf_dir(&self) -> PathBuf {
        self.dir.join("cni").join("net.d")
    }

    /// Where containerd reads how to reach each registry (`<host>/hosts.toml`, at every pull).
    pub fn registry_config_path(&self) -> PathBuf {
        self.dir.join("certs.d")
    }

    /// containerd's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// The port of containerd's streaming server (exec, attach, port-forward URLs).
    pub fn stream_port(&self) -> u16 {
        self.stream_port.port
    }

    /// Everything containerd has written to stderr (its log), across restarts.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// A CRI client on this containerd.
    pub async fn runtime(&self) -> anyhow::Result<RemoteRuntime> {
        Ok(RemoteRuntime::connect(&self.endpoint()).await?)
    }

    /// `ctr images import` of `tar` into the CRI namespace; returns the image names imported.
    /// Importing nothing is an error (the tarball's index.json lacks `io.containerd.image.name`).
    pub async fn import(&self, tar: &Path) -> anyhow::Result<Vec<String>> {
        let out = tokio::process::Command::new(CTR)
            .arg("-a")
            .arg(self.socket())
            .args(["-n", CRI_NAMESPACE, "images", "import"])
            .arg(tar)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(crate::scaled(Duration::from_secs(120)), out)
            .await
            .with_context(|| format!("ctr images import {} timed out", tar.display()))??;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(
            out.status.success(),
            "ctr images import {} failed ({}): {stderr}",
            tar.display(),
            out.status
        );
        let names = nodeagent::images::parse_imported(&stdout);
        anyhow::ensure!(
            !names.is_empty(),
            "ctr images import {} imported nothing (stdout {stdout:?}, stderr {stderr:?})",
            tar.display()
        );
        Ok(names)
    }

    /// Writes the node agent's bridge + host-local + portmap + loopback conflist into
    /// [`Containerd::cni_conf_dir`] on bridge `bridge` (at most 15 bytes; deleted on teardown)
    /// with pod subnet `subnet` (e.g. `10.244.200.0/24`; the gateway is its first address).
    /// Leases live under this containerd's directory.
    pub fn write_bridge_conflist(&mut self, bridge: &str, subnet: &str) -> anyhow::Result<PathBuf> {
        anyhow::ensure!(
            !bridge.is_empty() && bridge.len() <= 15,
            "bridge name {bridge:?} must be 1–15 bytes (IFNAMSIZ)"
        );
        let cidr = nodeagent::network::cni::PodCidr::parse(subnet)?;
        // Recorded before the file exists: once containerd sees it, the bridge may appear.
        self.bridges.insert(bridge.to_string());
        // The node agent's own conflist (written atomically, so containerd never loads half).
        let ipam = self.dir.join("cni").join("ipam");
        Ok(nodeagent::network::cni::write_conflist(&self.cni_conf_dir(), &cidr, bridge, &ipam)?)
    }

    /// SIGTERM containerd, wait for it, and start it again in the same mount namespace with the
    /// same config. Pods and their containers keep running meanwhile (their shims do not depend
    /// on containerd) and are there again afterwards.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if let Some(mut p) = self.process.take() {
            eprintln!("[e2e] stopping containerd pid {}", p.pid());
            if p.terminate().is_none() {
                eprintln!("[e2e] containerd ignored SIGTERM and was killed");
            }
        }
        self.spawn()?;
        self.wait_ready().await
    }

    /// Tears everything down (see the module docs) and reports what could not be cleaned up.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        // Blocking work (waits, subprocesses, its own runtime for CRI): off the test's executor.
        let problems = tokio::task::spawn_blocking(move || self.teardown()).await?;
        if problems.is_empty() {
            Ok(())
        } else {
            bail!(
                "containerd teardown left things behind:\n  {}",
                problems.join("\n  ")
            )
        }
    }

    // ---- start ----

    fn config_path(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    /// The persistent mount namespace containerd runs in (for processes that must share it).
    pub fn mntns(&self) -> PathBuf {
        self.dir.join("mntns")
    }

    /// Directories, config and the persistent mount namespace.
    fn prepare(&mut self) -> anyhow::Result<()> {
        for sub in [
            "root",
            "state",
            "runc",
            "run-containerd",
            "opt",
            "cni/net.d",
            "cni/ipam",
        ] {
            std::fs::create_dir_all(self.dir.join(sub))?;
        }
        std::fs::write(self.config_path(), self.config_toml())?;

        let mntns = self.mntns();
        if mount_points_under(&host_mountinfo()?, &mntns).contains(&mntns) {
            return Ok(()); // Already bound (start on a directory whose namespace still exists).
        }
        // The bind target must exist on the host; it stays (see the module docs).
        std::fs::create_dir_all(RUN_CONTAINERD)?;
        // A namespace can be bound only to a file on a mount that does not propagate (on a
        // systemd host / is shared: unshare fails with EINVAL): this directory is made a private
        // mount of its own, as `ip netns` does with /run/netns. Teardown unmounts it last.
        if !mount_points_under(&host_mountinfo()?, &self.dir).contains(&self.dir) {
            make_private_mount(&self.dir).with_context(|| format!("making {} a private mount", self.dir.display()))?;
        }
        std::fs::write(&mntns, b"")?;
        let out = std::process::Command::new("unshare")
            .arg(format!("--mount={}", mntns.display()))
            .args(["--propagation", "private", "mount", "--bind"])
            .arg(self.dir.join("run-containerd"))
            .arg(RUN_CONTAINERD)
            .output()
            .context("running unshare")?;
        anyhow::ensure!(
            out.status.success(),
            "creating the mount namespace at {} failed ({}): {}",
            mntns.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    fn config_toml(&self) -> String {
        nodeagent::cri::containerd_config::ContainerdConfig::private(&self.dir, self.stream_port.port).render()
    }

    /// containerd, exec'd by nsenter inside the namespace (so the recorded PID is containerd's).
    fn spawn(&mut self) -> anyhow::Result<()> {
        let args = vec![
            format!("--mount={}", self.mntns().display()),
            CONTAINERD.to_string(),
            "--config".to_string(),
            self.config_path().display().to_string(),
        ];
        let p = Process::spawn(
            "containerd",
            Path::new("/usr/bin/nsenter"),
            &args,
            &self.dir,
            &[],
        )?;
        eprintln!(
            "[e2e] started containerd pid {} at {}",
            p.pid(),
            self.endpoint()
        );
        self.process = Some(p);
        Ok(())
    }

    /// Until CRI `Version` answers; fails at once if containerd exits.
    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let endpoint = self.endpoint();
        let Some(process) = self.process.as_mut() else {
            bail!("containerd is not running")
        };
        match wait_cri(&endpoint, process, READY_TIMEOUT).await {
            Ok(elapsed) => {
                self.ever_ready = true;
                eprintln!("[e2e] containerd ready in {elapsed:?}");
                Ok(())
            }
            Err(e) => bail!("{e:#}\n{}", self.log_tail(40)),
        }
    }

    fn log_tail(&self, lines: usize) -> String {
        log_tail(
            "containerd",
            &self.dir.join("stdout.log"),
            &self.dir.join("stderr.log"),
            lines,
        )
    }

    // ---- teardown ----

    /// Every step, best effort; returns what went wrong. Idempotent.
    fn teardown(&mut self) -> Vec<String> {
        if self.torn_down {
            return Vec::new();
        }
        self.torn_down = true;
        let mut problems = Vec::new();

        // Find the pods' processes while their bundles still name them: a shim may outlive its
        // bundle by a moment, and afterwards nothing would.
        let tasks = self.task_processes();

        // Step 1: stop and remove every pod sandbox (and so every container) through CRI, which
        // also runs CNI DEL (iptables rules, the IPAM lease, libcni's cache file). A containerd
        // that crashed or was killed by the test is started once more for this: it recovers its
        // pods from the state directory.
        if self.ever_ready {
            if self.process.as_mut().is_none_or(|p| p.exited().is_some()) {
                eprintln!(
                    "[e2e] containerd is not running; starting it to remove its pods through CRI"
                );
                if let Err(e) = self.spawn() {
                    problems.push(format!("restarting containerd for teardown: {e:#}"));
                }
            }
            let endpoint = self.endpoint();
            if let Some(p) = self.process.as_mut()
                && let Err(e) = remove_all_sandboxes(&endpoint, p)
            {
                problems.push(format!("removing pod sandboxes through CRI: {e:#}"));
            }
        }

        // Step 2: containerd itself.
        if let Some(mut p) = self.process.take()
            && p.terminate().is_none()
        {
            problems.push("containerd ignored SIGTERM and was killed".to_string());
        }

        // Step 3: shims and container processes left over (only when step 1 failed).
        problems.extend(self.kill_leftovers(&tasks));
        // Without CNI DEL a sandbox's masquerade chain and libcni cache file stay: say so.
        if let Ok(cached) = std::fs::read_dir("/var/lib/cni/results") {
            for f in cached.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if let Some(t) = tasks.iter().find(|t| name.contains(&t.id)) {
                    problems.push(format!(
                        "CNI DEL never ran for sandbox {}: {} and its iptables nat chain (comment id: \"{}\") remain",
                        t.id,
                        f.path().display(),
                        t.id
                    ));
                }
            }
        }

        // Step 4: mounts inside the namespace, then the namespace's own bind mount.
        problems.extend(self.unmount_all());

        // Step 5: the CNI bridges this harness configured.
        for br in &self.bridges {
            if Path::new("/sys/class/net").join(br).exists() {
                match std::process::Command::new("ip")
                    .args(["link", "del", br])
                    .output()
                {
                    Ok(o) if o.status.success() => {}
                    Ok(o) => problems.push(format!(
                        "ip link del {br}: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    )),
                    Err(e) => problems.push(format!("ip link del {br}: {e}")),
                }
            }
        }

        // Step 6: cgroups. runc removes a container's own cgroup when CRI removes it; after a
        // forced cleanup, remove those named after our tasks' IDs, then the k8s.io parents this
        // containerd created. rmdir of a cgroup with children or tasks fails, so a concurrent
        // user of a directory is safe.
        for hierarchy in cgroup_dirs() {
            for t in &tasks {
                let _ = std::fs::remove_dir(hierarchy.join(&t.id));
            }
        }
        for d in &self.new_cgroup_dirs {
            let _ = std::fs::remove_dir(d);
        }
        problems
    }

    /// The init process of every task under this containerd's v2 task state (from the bundle's
    /// `init.pid`) and the shim serving it. containerd 1.6's runc v2 shim writes no PID file of
    /// its own: it is the init process's parent (the shim is the subreaper of what it starts).
    fn task_processes(&self) -> Vec<TaskProcesses> {
        let mut out = Vec::new();
        let tasks = self.dir.join("state").join("io.containerd.runtime.v2.task");
        let Ok(namespaces) = std::fs::read_dir(&tasks) else {
            return out;
        };
        for ns in namespaces.flatten() {
            let Ok(bundles) = std::fs::read_dir(ns.path()) else {
                continue;
            };
            for bundle in bundles.flatten() {
                let id = bundle.file_name().to_string_lossy().into_owned();
                let init = std::fs::read_to_string(bundle.path().join("init.pid"))
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                    .filter(|&pid| in_task_cgroup(pid, &id));
                let shim = init
                    .and_then(parent_pid)
                    .filter(|&pid| is_our_shim(pid, &self.socket()));
                out.push(TaskProcesses { id, init, shim });
            }
        }
        out
    }

    /// Kill what [`Containerd::task_processes`] found and is still alive, after a moment's grace
    /// (a shim exits by itself once its last task is deleted). Each PID is checked against
    /// `/proc` again right before the kill, so a PID the kernel reused is left alone.
    fn kill_leftovers(&self, tasks: &[TaskProcesses]) -> Vec<String> {
        let socket = self.socket();
        let mut pids: Vec<(i32, String, bool)> = Vec::new(); // (pid, task id, is shim)
        for t in tasks {
            pids.extend(t.init.map(|p| (p, t.id.clone(), false)));
            pids.extend(t.shim.map(|p| (p, t.id.clone(), true)));
        }
        pids.sort();
        pids.dedup_by_key(|p| p.0); // one shim serves every container of a pod
        let ours = |(pid, id, shim): &(i32, String, bool)| {
            if *shim {
                is_our_shim(*pid, &socket)
            } else {
                in_task_cgroup(*pid, id)
            }
        };
        let deadline = Instant::now() + crate::scaled(Duration::from_secs(5));
        while Instant::now() < deadline {
            pids.retain(ours);
            if pids.is_empty() {
                return Vec::new();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Container processes first, then their shims.
        pids.sort_by_key(|p| p.2);
        pids.into_iter()
            .filter(ours)
            .map(|(pid, id, shim)| {
                // SAFETY: kill(2) on a PID checked against /proc just now.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let what = if shim { "shim" } else { "init process" };
                format!("killed leftover {what} pid {pid} of task {id}")
            })
            .collect()
    }

    /// Unmount, deepest first, whatever is still mounted under our directory inside the
    /// namespace, then anything under it in the host's namespace (the `mntns` bind mount).
    fn unmount_all(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mntns = self.mntns();
        let host = match host_mountinfo() {
            Ok(m) => m,
            Err(e) => return vec![format!("reading /proc/self/mountinfo: {e}")],
        };
        if mount_points_under(&host, &mntns).contains(&mntns) {
            let inside = std::process::Command::new("nsenter")
                .arg(format!("--mount={}", mntns.display()))
                .args(["cat", "/proc/self/mountinfo"])
                .output();
            match inside {
                Ok(o) if o.status.success() => {
                    let text = String::from_utf8_lossy(&o.stdout);
                    for p in mount_points_under(&text, &self.dir) {
                        let out = std::process::Command::new("nsenter")
                            .arg(format!("--mount={}", mntns.display()))
                            .args(["umount", "--lazy"])
                            .arg(&p)
                            .output();
                        match out {
                            Ok(o) if o.status.success() => {}
                            Ok(o) => problems.push(format!(
                                "umount {} in the namespace: {}",
                                p.display(),
                                String::from_utf8_lossy(&o.stderr).trim()
                            )),
                            Err(e) => problems.push(format!("nsenter umount {}: {e}", p.display())),
                        }
                    }
                }
                Ok(o) => problems.push(format!(
                    "reading the namespace's mounts: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => problems.push(format!("nsenter: {e}")),
            }
        }
        for p in mount_points_under(&host, &self.dir) {
            if let Err(e) = umount(&p) {
                problems.push(format!("umount {}: {e}", p.display()));
            }
        }
        problems
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.torn_down {
            eprintln!("\n[e2e] test failed; containerd in {}:", self.dir.display());
            eprintln!("{}", self.log_tail(60));
        }
        for p in self.teardown() {
            eprintln!("[e2e] containerd teardown: {p}");
        }
        if let Some(t) = self.tempdir.take() {
            if std::env::var_os("E2E_KEEP_DIRS").is_some() {
                eprintln!("[e2e] keeping {}", t.keep().display());
            } else if let Err(e) = t.close() {
                eprintln!("[e2e] removing {}: {e}", self.dir.display());
            }
        }
    }
}

/// The processes of one task (a sandbox or a container) found through its bundle.
#[derive(Debug)]
struct TaskProcesses {
    id: String,
    init: Option<i32>,
    shim: Option<i32>,
}

/// Whether `pid` lives in a cgroup named after task `id` (runc names them so, with or without a
/// cgroup parent).
fn in_task_cgroup(pid: i32, id: &str) -> bool {
    !id.is_empty()
        && std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|cg| cg.contains(id))
}

/// Whether `pid` is a containerd shim serving the containerd at `socket`.
fn is_our_shim(pid: i32, socket: &Path) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let socket = socket.as_os_str().as_encoded_bytes();
    args.first()
        .is_some_and(|a| a.windows(15).any(|w| w == b"containerd-shim"))
        && args
            .windows(2)
            .any(|w| w[0] == b"-address" && w[1] == socket)
}

fn parent_pid(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Until CRI `Version` answers on `endpoint`, or `process` exits, or `timeout` passes.
async fn wait_cri(
    endpoint: &str,
    process: &mut Process,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let timeout = crate::scaled(timeout);
    let start = Instant::now();
    let socket = PathBuf::from(endpoint.trim_start_matches("unix://"));
    let mut last = String::from("socket not there yet");
    loop {
        if let Some(st) = process.exited() {
            bail!("containerd exited ({st})");
        }
        if socket.exists() {
            let attempt = async { RemoteRuntime::connect(endpoint).await?.version().await };
            match tokio::time::timeout(crate::scaled(Duration::from_secs(2)), attempt).await {
                Ok(Ok(_)) => return Ok(start.elapsed()),
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "CRI Version timed out".to_string(),
            }
        }
        if start.elapsed() > timeout {
            bail!("containerd did not answer CRI within {timeout:?}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Stop and remove every pod sandbox, on a thread with its own runtime: teardown runs in `Drop`,
/// which may be inside the test's runtime (where blocking on another future would panic).
fn remove_all_sandboxes(endpoint: &str, process: &mut Process) -> anyhow::Result<()> {
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| -> anyhow::Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let work = async {
                    wait_cri(endpoint, process, READY_TIMEOUT).await?;
                    let cri = RemoteRuntime::connect(endpoint).await?;
                    for sb in cri.list_pod_sandbox(None).await? {
                        // A sandbox whose CNI setup failed cannot be stopped until CNI works;
                        // removing it is still worth trying.
                        if let Err(e) = cri.stop_pod_sandbox(&sb.id).await
                            && !e.is_not_found()
                        {
                            eprintln!("[e2e] StopPodSandbox {}: {e}", sb.id);
                        }
                        cri.remove_pod_sandbox(&sb.id).await?;
                    }
                    anyhow::Ok(())
                };
                let limit = crate::scaled(TEARDOWN_CRI_TIMEOUT);
                tokio::time::timeout(limit, work)
                    .await
                    .with_context(|| format!("timed out after {limit:?}"))?
            })
        });
        worker
            .join()
            .map_err(|_| anyhow::anyhow!("the CRI teardown thread panicked"))?
    })
}

/// Where runc puts a pod without a cgroup parent: `/sys/fs/cgroup/<controller>/k8s.io` for every
/// mounted v1 hierarchy, `/sys/fs/cgroup/k8s.io` on a v2 host.
fn cgroup_dirs() -> Vec<PathBuf> {
    if nodeagent::cm::cgroup_version(Path::new(CGROUP_ROOT)) == Some(nodeagent::cm::CgroupVersion::V2) {
        return vec![Path::new(CGROUP_ROOT).join(CRI_NAMESPACE)];
    }
    let Ok(entries) = std::fs::read_dir(CGROUP_ROOT) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path().join(CRI_NAMESPACE))
        .collect();
    out.sort();
    out
}

fn host_mountinfo() -> std::io::Result<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
}

/// Mount points in `mountinfo` text equal to or below `dir`, deepest (longest) first.
pub fn mount_points_under(mountinfo: &str, dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
        .filter(|p| p.starts_with(dir))
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    out.dedup();
    out
}

/// A path field of mountinfo, which escapes space, tab, newline and backslash as `\ooo` octal.
pub fn unescape_mountinfo(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Binds `dir` onto itself and makes that mount private (`mount --bind D D; mount --make-private D`).
fn make_private_mount(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: valid NUL-terminated paths; null fstype and data are allowed for a bind and for a
    // propagation change.
    if unsafe { libc::mount(c.as_ptr(), c.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::mount(std::ptr::null(), c.as_ptr(), std::ptr::null(), libc::MS_PRIVATE, std::ptr::null()) } != 0 {
        let e = std::io::Error::last_os_error();
        let _ = umount(dir);
        return Err(e);
    }
    Ok(())
}

fn umount(p: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    // Busy: detach now, freed when the last user goes.
    // SAFETY: as above.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
        return Ok(());
    }
    Err(std::io::Error::last_os_error())
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_under_picks_our_dir_deepest_first() {
        let info = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
80 27 0:4 mnt:[4026532] /tmp/c/mntns rw - nsfs nsfs rw
81 27 0:50 / /tmp/c/state/run\\040x/rootfs rw - overlay overlay rw
82 27 0:51 / /tmp/cc rw - tmpfs tmpfs rw
";
        assert_eq!(
            mount_points_under(info, Path::new("/tmp/c")),
            vec![
                PathBuf::from("/tmp/c/state/run x/rootfs"),
                PathBuf::from("/tmp/c/mntns")
            ]
        );
    }
}
