//! `kubelab nodeagent` processes for the end-to-end tests, each with its own private containerd
//! ([`crate::containerd::Containerd`]), root directory, pod CIDR, cgroup root and HTTP port, so
//! that tests running in parallel on one machine never share a pod, a bridge or a cgroup.

use std::path::{Path, PathBuf};

use crate::containerd::Containerd;
use crate::ports;
use crate::process::Process;

pub struct NodeAgent {
    pub name: String,
    containerd: Option<Containerd>,
    cgroup_root: String,
    /// The CNI bridge the agent's conflist names (`kubelab<octet>`), removed with the agent.
    bridge: String,
    bin: PathBuf,
    dir: PathBuf,
    args: Vec<String>,
    port: u16,
    process: Option<Process>,
    /// `KUBELAB_FAILPOINTS` for the failpoint build ([`NodeAgent::set_failpoints`]).
    failpoints: Option<String>,
}

pub struct NodeAgentOptions<'a> {
    /// The API server URL (`--master`); `None` runs static pods only.
    pub master: Option<String>,
    pub node_name: &'a str,
    /// The third octet of the node's pod CIDR, 10.244.<n>.0/24 (unique per test).
    pub pod_cidr_octet: u8,
    pub extra: Vec<String>,
}

impl NodeAgent {
    /// Start a private containerd with the project's images, then the node agent on it.
    pub async fn start(root: &Path, opts: NodeAgentOptions<'_>) -> anyhow::Result<NodeAgent> {
        let bin = crate::kubelab_bin()?;
        let dir = root.join(format!("node-{}", opts.node_name));
        std::fs::create_dir_all(&dir)?;
        let containerd = Containerd::start(&dir.join("containerd")).await?;
        let port = ports::reserve()?;
        let port_number = port.port;
        let mut args: Vec<String> = vec!["nodeagent".into()];
        if let Some(m) = &opts.master {
            args.extend(["--master".into(), m.clone()]);
        }
        let cgroup_root = format!("/kubelab-e2e-{}-{}", std::process::id(), opts.node_name);
        let cgroup_root_flag = cgroup_root.clone();
        args.extend([
            "--node-name".into(),
            opts.node_name.into(),
            "--container-runtime-endpoint".into(),
            containerd.endpoint(),
            "--root-dir".into(),
            dir.join("root").to_string_lossy().into_owned(),
            "--pod-logs-dir".into(),
            dir.join("pod-logs").to_string_lossy().into_owned(),
            "--pod-manifest-path".into(),
            dir.join("manifests").to_string_lossy().into_owned(),
            "--pod-cidr".into(),
            format!("10.244.{}.0/24", opts.pod_cidr_octet),
            "--cni-conf-dir".into(),
            containerd.cni_conf_dir().to_string_lossy().into_owned(),
            "--address".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port_number.to_string(),
            "--node-ip".into(),
            "127.0.0.1".into(),
            "--image-dir".into(),
            crate::containerd::images_dir().to_string_lossy().into_owned(),
            "--cgroup-root".into(),
            cgroup_root_flag,
        ]);
        // Like kind's nodes: test nodes share the machine's disk, which other work fills, so disk
        // pressure and image GC are off unless a test asks for them (which replaces these).
        for (flag, value) in DEFAULT_FLAGS {
            set_flag(&mut args, flag, value);
        }
        for (flag, value) in flag_pairs(&opts.extra) {
            set_flag(&mut args, &flag, &value);
        }
        std::fs::create_dir_all(dir.join("manifests"))?;
        drop(port); // released just before the agent binds it
        let mut agent = NodeAgent { name: opts.node_name.to_string(), containerd: Some(containerd), cgroup_root, bridge: format!("kubelab{}", opts.pod_cidr_octet), bin, dir, args, port: port_number, process: None, failpoints: None };
        agent.spawn()?;
        Ok(agent)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut env = vec![
            ("NO_COLOR".to_string(), "1".to_string()),
            ("RUST_LOG".to_string(), std::env::var("E2E_RUST_LOG").unwrap_or_else(|_| "info,kubelet=debug".into())),
        ];
        if let Some(f) = &self.failpoints {
            env.push(("KUBELAB_FAILPOINTS".into(), f.clone()));
        }
        // The agent shares containerd's (private, persistent) mount namespace, as a kubelet
        // shares its host's with the runtime: the tmpfs it mounts for secrets must be what
        // containerd bind-mounts into containers. nsenter execs the agent (no fork): the PID
        // recorded is the agent's.
        let mut args = vec![format!("--mount={}", self.containerd().mntns().display()), self.bin.to_string_lossy().into_owned()];
        args.extend(self.args.iter().cloned());
        let p = Process::spawn(&format!("nodeagent-{}", self.name), std::path::Path::new("nsenter"), &args, &self.dir.join("agent"), &env)?;
        eprintln!("[e2e] started nodeagent {} pid {}", self.name, p.pid());
        self.process = Some(p);
        Ok(())
    }

    pub fn containerd(&self) -> &Containerd {
        self.containerd.as_ref().expect("containerd runs until drop")
    }

    pub fn containerd_mut(&mut self) -> &mut Containerd {
        self.containerd.as_mut().expect("containerd runs until drop")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The agent's `--root-dir` (pods' directories and volumes live under `pods/<uid>`).
    pub fn root_dir(&self) -> PathBuf {
        self.dir.join("root")
    }

    pub fn manifests_dir(&self) -> PathBuf {
        self.dir.join("manifests")
    }

    /// The agent's `--cgroup-root` (`/kubelab-e2e-<pid>-<node>`).
    pub fn cgroup_root(&self) -> &str {
        &self.cgroup_root
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// kill -9 of the agent (its containers keep running in containerd).
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            eprintln!("[e2e] kill -9 nodeagent {} pid {}", self.name, p.pid());
            p.kill9();
        }
    }

    /// Start the agent again with the same flags (after [`NodeAgent::kill9`]).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }

    /// Start the agent again with `extra` flags added to its command line (each flag may be
    /// given once over the agent's whole life: clap refuses repeats).
    /// Restarts the agent with `extra` flags (`--flag=value` or `--flag value`), each replacing
    /// the flag's earlier value.
    pub fn restart_with(&mut self, extra: &[String]) -> anyhow::Result<()> {
        for (flag, value) in flag_pairs(extra) {
            set_flag(&mut self.args, &flag, &value);
        }
        self.restart()
    }

    /// From the next (re)start on, run the failpoint build of kubelab with `KUBELAB_FAILPOINTS`
    /// set to `spec` (`name=term;…`); `None` goes back to the ordinary build.
    pub fn set_failpoints(&mut self, spec: Option<&str>) -> anyhow::Result<()> {
        self.bin = if spec.is_some() { crate::kubelab_failpoints_bin()? } else { crate::kubelab_bin()? };
        self.failpoints = spec.map(String::from);
        Ok(())
    }

    /// Whether the agent process has ended (a failpoint's `panic` ends it with status 2).
    pub fn has_exited(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.exited().is_some())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent").join("stderr.log")).unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let dir = self.dir.join("agent");
        crate::process::log_tail(&format!("nodeagent-{}", self.name), &dir.join("stdout.log"), &dir.join("stderr.log"), lines)
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail(80));
        }
        // Stop the agent first so it does not restart what the containerd teardown removes,
        // then containerd (which stops every pod), then remove the agent's cgroup tree.
        self.kill9();
        drop(self.containerd.take());
        remove_cgroup_tree(&self.cgroup_root);
        delete_bridge(&self.bridge);
    }
}

/// `ip link del <bridge>`: the CNI bridge plugin creates it and nothing else removes it.
/// Flags every test agent gets unless the test gives its own value.
const DEFAULT_FLAGS: &[(&str, &str)] = &[
    ("--eviction-hard", "memory.available<100Mi,nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%"),
    ("--image-gc-high-threshold", "100"),
];

/// `--flag=value` and `--flag value` arguments as pairs.
fn flag_pairs(args: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if let Some((f, v)) = a.split_once('=') {
            out.push((f.to_string(), v.to_string()));
        } else if it.peek().is_some_and(|n| !n.starts_with("--")) {
            out.push((a.clone(), it.next().cloned().unwrap_or_default()));
        } else {
            out.push((a.clone(), String::new()));
        }
    }
    out
}

/// Sets `flag` to `value` in `args` (as `--flag=value`), replacing any earlier value: clap
/// refuses a flag given twice.
fn set_flag(args: &mut Vec<String>, flag: &str, value: &str) {
    let mut i = 0;
    while i < args.len() {
        if args[i] == flag {
            let with_value = args.get(i + 1).is_some_and(|n| !n.starts_with("--"));
            args.drain(i..i + if with_value { 2 } else { 1 });
        } else if args[i].starts_with(&format!("{flag}=")) {
            args.remove(i);
        } else {
            i += 1;
        }
    }
    args.push(if value.is_empty() { flag.to_string() } else { format!("{flag}={value}") });
}

pub fn delete_bridge(bridge: &str) {
    let _ = std::process::Command::new("ip")
        .args(["link", "del", bridge])
        .stderr(std::process::Stdio::null())
        .status();
}

/// rmdir `<hierarchy>/<root>` and everything below it, deepest first, in every cgroup v1
/// hierarchy or in the v2 tree (after stopping the systemd driver's slices). Only empty cgroups
/// can be removed, so this never touches a running process.
pub fn remove_cgroup_tree(root: &str) {
    use nodeagent::cm::{CgroupDriver, CgroupVersion, cgroup_version};
    let mount = Path::new("/sys/fs/cgroup");
    match cgroup_version(mount) {
        Some(CgroupVersion::V2) => {
            // The systemd driver made slices named after the root: stopping the top one stops
            // and removes every slice below it (systemd would not forget units whose cgroups
            // were removed behind its back).
            if CgroupDriver::detect() == CgroupDriver::Systemd {
                let unit = format!("{}.slice", root.trim_matches('/').replace('-', "_"));
                let _ = std::process::Command::new("systemctl").args(["stop", &unit]).status();
            }
            let top = mount.join(root.trim_start_matches('/'));
            if top.is_dir() {
                rmdir_deep(&top);
            }
        }
        _ => {
            let Ok(hierarchies) = std::fs::read_dir(mount) else { return };
            for h in hierarchies.flatten() {
                let top = h.path().join(root.trim_start_matches('/'));
                if top.is_dir() {
                    rmdir_deep(&top);
                }
            }
        }
    }
}

fn rmdir_deep(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_deep(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}
