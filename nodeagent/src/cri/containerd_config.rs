//! The configuration of a containerd that serves a kubelab node agent: its own root, state and
//! socket (so it never meets a system containerd), the CRI plugin with the settings these
//! machines need (measured in docs: no OOM score changes, no AppArmor, runc with cgroupfs), and
//! CNI reading the conflist the node agent writes. Used by `kubelab up` and the end-to-end tests.

use std::path::{Path, PathBuf};

/// The pause image kubelab builds (`make images`); containerd's `sandbox_image`.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// Debian's runc.
pub const RUNC: &str = "/usr/sbin/runc";
/// Debian's containernetworking-plugins.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// Where one containerd keeps everything, under a single directory.
#[derive(Clone, Debug)]
pub struct ContainerdConfig {
    pub dir: PathBuf,
    /// The CRI streaming server's port on 127.0.0.1 (exec, attach, port-forward).
    pub stream_port: u16,
}

impl ContainerdConfig {
    pub fn new(dir: impl Into<PathBuf>, stream_port: u16) -> ContainerdConfig {
        ContainerdConfig { dir: dir.into(), stream_port }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    pub fn cni_conf_dir(&self) -> PathBuf {
        self.dir.join("cni/net.d")
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("config.toml")
    }

    /// The TOML text (containerd's config version 2).
    pub fn render(&self) -> String {
        let d = |sub: &str| toml_str(&self.dir.join(sub));
        format!(
            r#"# Written by kubelab for one node agent; see docs/containerd-cri.md.
version = 2
root = {root}
state = {state}
# The VM lacks CAP_SYS_RESOURCE: containerd must not lower its own OOM score adjustment.
oom_score = 0

[grpc]
  address = {sock}

[ttrpc]
  address = {ttrpc}

[plugins."io.containerd.internal.v1.opt"]
  path = {opt}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {pause}
  stream_server_address = "127.0.0.1"
  stream_server_port = "{port}"
  disable_apparmor = true
  enable_selinux = false
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = {runc}
        Root = {runc_root}

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {cni_bin}
    conf_dir = {cni_conf}
    max_conf_num = 1
"#,
            root = d("root"),
            state = d("state"),
            sock = toml_str(&self.socket()),
            ttrpc = d("containerd.sock.ttrpc"),
            opt = d("opt"),
            pause = toml_str(Path::new(PAUSE_IMAGE)),
            port = self.stream_port,
            runc = toml_str(Path::new(RUNC)),
            runc_root = d("runc"),
            cni_bin = toml_str(Path::new(CNI_BIN_DIR)),
            cni_conf = toml_str(&self.cni_conf_dir()),
        )
    }
}

/// A TOML basic string (JSON's escaping is a subset TOML accepts).
fn toml_str(p: &Path) -> String {
    serde_json::Value::String(p.display().to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_live_under_the_directory() {
        let c = ContainerdConfig::new("/data/containerd", 10010);
        let t = c.render();
        assert!(t.contains(r#"root = "/data/containerd/root""#));
        assert!(t.contains(r#"address = "/data/containerd/containerd.sock""#));
        assert!(t.contains(r#"conf_dir = "/data/containerd/cni/net.d""#));
        assert!(t.contains(r#"stream_server_port = "10010""#));
        assert_eq!(c.endpoint(), "unix:///data/containerd/containerd.sock");
    }
}
