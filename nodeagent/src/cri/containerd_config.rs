//! Mirrors kind's node-image `/etc/containerd/config.toml`: a few CRI settings over containerd's
//! defaults. Here it is written by code, the one author of every containerd config kubelab runs,
//! in two layouts rendered by the same [`ContainerdConfig::render`]:
//!
//! - [`ContainerdConfig::private`]: everything under one directory (root, state, both sockets,
//!   runc's root, the opt directory, the CNI conf dir), so that it never meets a system
//!   containerd. `kubelab up` and the end-to-end tests' harness (`e2e/src/containerd.rs`) write it.
//! - [`ContainerdConfig::node`]: a machine's layout, where containerd's own defaults put things
//!   (root `/var/lib/containerd`, state and sockets under `/run/containerd`) and CNI configs in
//!   `/etc/cni/net.d`, where the node agent's `--cni-conf-dir` writes them by default. Each lab node
//!   writes it with `kubelab containerd-config > /etc/containerd/config.toml`.
//!
//! Both carry the settings these machines need (measured, not guessed): `oom_score = 0` and
//! `restrict_oom_score_adj` (neither the VMs nor the lab's node containers have
//! `CAP_SYS_RESOURCE`), no AppArmor or SELinux, runc as `io.containerd.runc.v2` with the node
//! agent's cgroup driver (`SystemdCgroup`: true where [`CgroupDriver::detect`] picks systemd, a
//! cgroup v2 host systemd booted; false with cgroupfs — the two must agree, or runc rejects the
//! sandbox's cgroup parent), the pause image
//! kubelab builds as `sandbox_image` (no registry to pull it from), CNI reading the one
//! conflist the node agent writes, and the registry hosts directory (`config_path`, containerd's
//! `certs.d`): [`registry_host_toml`] tells containerd how to reach one registry (its URL and
//! the CA its certificate is signed by), as containerd's docs/hosts.md lays the file out.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use crate::cm::CgroupDriver;

/// The pause image kubelab builds (`make images`); containerd's `sandbox_image`.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// Debian's runc.
pub const RUNC: &str = "/usr/sbin/runc";
/// Debian's containernetworking-plugins.
pub const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// Where one containerd keeps everything and how its CRI plugin is set up. Each field is the
/// containerd setting it is named after; [`ContainerdConfig::private`] and
/// [`ContainerdConfig::node`] fill them for the two layouts kubelab uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerdConfig {
    /// `root`: content, snapshots and metadata (persistent).
    pub root: PathBuf,
    /// `state`: task bundles and pod network namespaces (`netns_mounts_under_state_dir`).
    pub state: PathBuf,
    /// `grpc.address`: containerd's API and the CRI, the node agent's runtime endpoint.
    pub address: PathBuf,
    /// `ttrpc.address`: what the shims call back on.
    pub ttrpc_address: PathBuf,
    /// The `opt` plugin's `path`.
    pub opt_path: PathBuf,
    /// runc's `--root` (the runc runtime's `Root` option); `None` leaves the shim's default,
    /// `/run/containerd/runc`.
    pub runc_root: Option<PathBuf>,
    /// The CRI plugin's `stream_server_address` (exec, attach and port-forward URLs point there).
    pub stream_server_address: IpAddr,
    /// The CRI plugin's `stream_server_port`; 0 is any free port.
    pub stream_server_port: u16,
    /// The CRI plugin's `sandbox_image`.
    pub sandbox_image: String,
    /// Where the CRI plugin reads CNI network configs (`cni.conf_dir`).
    pub cni_conf_dir: PathBuf,
    /// The runc runtime's `SystemdCgroup`: true for the node agent's systemd cgroup driver.
    pub systemd_cgroup: bool,
    /// The CRI plugin's `registry.config_path`: a directory per registry host
    /// (`<host[:port]>/hosts.toml`, [`write_registry_host`]).
    pub registry_config_path: PathBuf,
}

impl ContainerdConfig {
    /// `kubelab up`'s and the end-to-end tests' layout: everything under `dir`, the streaming
    /// server on 127.0.0.1:`stream_server_port`.
    pub fn private(dir: impl Into<PathBuf>, stream_server_port: u16) -> ContainerdConfig {
        let dir = dir.into();
        let address = dir.join("containerd.sock");
        ContainerdConfig {
            root: dir.join("root"),
            state: dir.join("state"),
            ttrpc_address: ttrpc_address_for(&address),
            address,
            opt_path: dir.join("opt"),
            runc_root: Some(dir.join("runc")),
            stream_server_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            stream_server_port,
            sandbox_image: PAUSE_IMAGE.to_string(),
            cni_conf_dir: dir.join("cni/net.d"),
            systemd_cgroup: CgroupDriver::detect() == CgroupDriver::Systemd,
            registry_config_path: dir.join("certs.d"),
        }
    }

    /// A machine's layout, the lab nodes': containerd's default paths (those of `containerd
    /// config default`), the streaming server on 127.0.0.1 at any free port (containerd's
    /// default too; the node agent reaches it on the node itself), CNI configs in
    /// `/etc/cni/net.d`, registry hosts in `/etc/containerd/certs.d` (containerd's convention).
    pub fn node() -> ContainerdConfig {
        let address = PathBuf::from("/run/containerd/containerd.sock");
        ContainerdConfig {
            root: PathBuf::from("/var/lib/containerd"),
            state: PathBuf::from("/run/containerd"),
            ttrpc_address: ttrpc_address_for(&address),
            address,
            opt_path: PathBuf::from("/opt/containerd"),
            runc_root: None,
            stream_server_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            stream_server_port: 0,
            sandbox_image: PAUSE_IMAGE.to_string(),
            cni_conf_dir: PathBuf::from("/etc/cni/net.d"),
            systemd_cgroup: CgroupDriver::detect() == CgroupDriver::Systemd,
            registry_config_path: PathBuf::from("/etc/containerd/certs.d"),
        }
    }

    /// The CRI endpoint, as the node agent's `--container-runtime-endpoint` takes it.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.address.display())
    }

    /// The TOML text (containerd's config version 2).
    pub fn render(&self) -> String {
        // Without a runc root the key is left out: runc's default is not written twice.
        let runc_root = match &self.runc_root {
            Some(dir) => format!("        Root = {}\n", toml_str(dir.display())),
            None => String::new(),
        };
        format!(
            r#"# Written by kubelab for one node agent (nodeagent/src/cri/containerd_config.rs).
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
  stream_server_address = {stream_address}
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
        SystemdCgroup = {systemd_cgroup}
        BinaryName = {runc}
{runc_root}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {cni_bin}
    conf_dir = {cni_conf}
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = {registry}
"#,
            root = toml_str(self.root.display()),
            state = toml_str(self.state.display()),
            sock = toml_str(self.address.display()),
            ttrpc = toml_str(self.ttrpc_address.display()),
            opt = toml_str(self.opt_path.display()),
            pause = toml_str(&self.sandbox_image),
            stream_address = toml_str(self.stream_server_address),
            port = self.stream_server_port,
            runc = toml_str(RUNC),
            systemd_cgroup = self.systemd_cgroup,
            cni_bin = toml_str(CNI_BIN_DIR),
            cni_conf = toml_str(self.cni_conf_dir.display()),
            registry = toml_str(self.registry_config_path.display()),
        )
    }
}

/// The `hosts.toml` that makes containerd pull images named `<host>/…` from `https://<host>`,
/// checking its certificate against `ca_file` (a registry signed by a CA of the cluster's own
/// rather than a public one). `host` is the image reference's registry part, with its port
/// (`127.0.0.1:5000`); the file goes in `<config_path>/<host>/` ([`write_registry_host`], or
/// `kubelab containerd-config --registry-host … --registry-ca …` on a lab node).
pub fn registry_host_toml(host: &str, ca_file: &Path) -> std::io::Result<String> {
    if host.is_empty() || host.contains(['/', '"', '\\']) || host.starts_with('.') {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("registry host {host:?} is not a host[:port]")));
    }
    Ok(format!(
        "# Written by kubelab (nodeagent/src/cri/containerd_config.rs): how containerd reaches {host}.\nserver = {server}\n\n[host.{server}]\n  ca = {ca}\n",
        server = toml_str(format!("https://{host}")),
        ca = toml_str(ca_file.display()),
    ))
}

/// Writes [`registry_host_toml`] as `<config_path>/<host>/hosts.toml`. containerd reads the
/// directory at each pull: no restart.
pub fn write_registry_host(config_path: &Path, host: &str, ca_file: &Path) -> std::io::Result<PathBuf> {
    let text = registry_host_toml(host, ca_file)?;
    let dir = config_path.join(host);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("hosts.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}

/// containerd's ttrpc socket next to its gRPC socket, where containerd puts it when
/// `ttrpc.address` is empty.
pub fn ttrpc_address_for(address: &Path) -> PathBuf {
    let mut s = address.as_os_str().to_owned();
    s.push(".ttrpc");
    PathBuf::from(s)
}

/// A TOML basic string (JSON's escaping is a subset TOML accepts).
fn toml_str(s: impl std::fmt::Display) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    enum Value {
        Str(String),
        Int(i64),
        Bool(bool),
    }

    /// Reads the part of TOML that `render` writes — `[table]` headers of bare and quoted keys,
    /// `key = value` with basic strings, integers and booleans, comments, blank lines — into
    /// (table path + key) → value. Anything else is an error, and so is a table or a key
    /// defined twice, as TOML has it.
    fn parse(text: &str) -> Result<BTreeMap<Vec<String>, Value>, String> {
        let mut values = BTreeMap::new();
        let mut tables = std::collections::BTreeSet::new();
        let mut table: Vec<String> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            let err = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(header) = line.strip_prefix('[') {
                let header = header.strip_suffix(']').ok_or_else(|| err("unclosed table header"))?;
                table = parse_key(header).map_err(|e| err(&e))?;
                if !tables.insert(table.clone()) {
                    return Err(err("table defined twice"));
                }
                continue;
            }
            let (key, value) = line.split_once(" = ").ok_or_else(|| err("neither a table nor key = value"))?;
            let mut path = table.clone();
            path.extend(parse_key(key).map_err(|e| err(&e))?);
            let value = if value.starts_with('"') {
                Value::Str(serde_json::from_str(value).map_err(|e| err(&format!("bad string: {e}")))?)
            } else if let Ok(b) = value.parse() {
                Value::Bool(b)
            } else {
                Value::Int(value.parse().map_err(|_| err("a value neither string, boolean nor integer"))?)
            };
            if values.insert(path, value).is_some() {
                return Err(err("key defined twice"));
            }
        }
        Ok(values)
    }

    /// `a."b.c".d` → ["a", "b.c", "d"].
    fn parse_key(s: &str) -> Result<Vec<String>, String> {
        let mut parts = Vec::new();
        let mut rest = s.trim();
        loop {
            let (part, after) = if let Some(quoted) = rest.strip_prefix('"') {
                let end = quoted.find('"').ok_or("unclosed quoted key")?;
                (&quoted[..end], &quoted[end + 1..])
            } else {
                let end = rest.find('.').unwrap_or(rest.len());
                let bare = &rest[..end];
                if bare.is_empty() || !bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    return Err(format!("bad bare key {bare:?}"));
                }
                (bare, &rest[end..])
            };
            parts.push(part.to_string());
            match after.strip_prefix('.') {
                Some(next) => rest = next,
                None if after.is_empty() => return Ok(parts),
                None => return Err(format!("junk after key: {after:?}")),
            }
        }
    }

    const CRI: &str = "plugins.\"io.containerd.grpc.v1.cri\"";
    const RUNC_OPTIONS: &str = "plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options";

    fn get(values: &BTreeMap<Vec<String>, Value>, table: &str, key: &str) -> Option<Value> {
        let mut path = if table.is_empty() { Vec::new() } else { parse_key(table).ok()? };
        path.push(key.to_string());
        values.get(&path).cloned()
    }

    fn s(v: &str) -> Option<Value> {
        Some(Value::Str(v.to_string()))
    }

    /// What every layout must hold, or containerd fails on these machines (or pulls).
    fn assert_settings_that_matter(values: &BTreeMap<Vec<String>, Value>) {
        let want: &[(&str, &str, Option<Value>)] = &[
            ("", "version", Some(Value::Int(2))),
            ("", "oom_score", Some(Value::Int(0))),
            (CRI, "sandbox_image", s(PAUSE_IMAGE)),
            (CRI, "restrict_oom_score_adj", Some(Value::Bool(true))),
            (CRI, "disable_apparmor", Some(Value::Bool(true))),
            (CRI, "enable_selinux", Some(Value::Bool(false))),
            (CRI, "netns_mounts_under_state_dir", Some(Value::Bool(true))),
            (&format!("{CRI}.containerd"), "snapshotter", s("overlayfs")),
            (&format!("{CRI}.containerd"), "default_runtime_name", s("runc")),
            (&format!("{CRI}.containerd.runtimes.runc"), "runtime_type", s("io.containerd.runc.v2")),
            (RUNC_OPTIONS, "SystemdCgroup", Some(Value::Bool(CgroupDriver::detect() == CgroupDriver::Systemd))),
            (RUNC_OPTIONS, "BinaryName", s(RUNC)),
            (&format!("{CRI}.cni"), "bin_dir", s(CNI_BIN_DIR)),
            (&format!("{CRI}.cni"), "max_conf_num", Some(Value::Int(1))),
        ];
        for (table, key, value) in want {
            assert_eq!(&get(values, table, key), value, "[{table}] {key}");
        }
    }

    /// The paths and addresses of `c`'s layout, as rendered.
    fn assert_layout(values: &BTreeMap<Vec<String>, Value>, c: &ContainerdConfig) {
        let path = |p: &Path| s(&p.display().to_string());
        assert_eq!(get(values, "", "root"), path(&c.root));
        assert_eq!(get(values, "", "state"), path(&c.state));
        assert_eq!(get(values, "grpc", "address"), path(&c.address));
        assert_eq!(get(values, "ttrpc", "address"), path(&c.ttrpc_address));
        assert_eq!(get(values, "plugins.\"io.containerd.internal.v1.opt\"", "path"), path(&c.opt_path));
        assert_eq!(get(values, RUNC_OPTIONS, "Root"), c.runc_root.as_deref().and_then(path));
        assert_eq!(get(values, CRI, "stream_server_address"), s(&c.stream_server_address.to_string()));
        assert_eq!(get(values, CRI, "stream_server_port"), s(&c.stream_server_port.to_string()));
        assert_eq!(get(values, &format!("{CRI}.cni"), "conf_dir"), path(&c.cni_conf_dir));
        assert_eq!(get(values, &format!("{CRI}.registry"), "config_path"), path(&c.registry_config_path));
    }

    #[test]
    fn the_private_layout_lives_under_its_directory() {
        let c = ContainerdConfig::private("/data/containerd", 10010);
        let values = parse(&c.render()).expect("the private layout parses");
        assert_settings_that_matter(&values);
        assert_layout(&values, &c);
        assert_eq!(get(&values, "", "root"), s("/data/containerd/root"));
        assert_eq!(get(&values, "", "state"), s("/data/containerd/state"));
        assert_eq!(get(&values, "grpc", "address"), s("/data/containerd/containerd.sock"));
        assert_eq!(get(&values, "ttrpc", "address"), s("/data/containerd/containerd.sock.ttrpc"));
        assert_eq!(get(&values, "plugins.\"io.containerd.internal.v1.opt\"", "path"), s("/data/containerd/opt"));
        assert_eq!(get(&values, RUNC_OPTIONS, "Root"), s("/data/containerd/runc"));
        assert_eq!(get(&values, CRI, "stream_server_address"), s("127.0.0.1"));
        assert_eq!(get(&values, CRI, "stream_server_port"), s("10010"));
        assert_eq!(get(&values, &format!("{CRI}.cni"), "conf_dir"), s("/data/containerd/cni/net.d"));
        assert_eq!(get(&values, &format!("{CRI}.registry"), "config_path"), s("/data/containerd/certs.d"));
        assert_eq!(c.endpoint(), "unix:///data/containerd/containerd.sock");
    }

    /// The lab node's layout: what its entrypoint waits for (the socket), where the node agent
    /// writes its conflist by default, and containerd's own default paths elsewhere.
    #[test]
    fn the_node_layout_is_a_machines() {
        let c = ContainerdConfig::node();
        let values = parse(&c.render()).expect("the node layout parses");
        assert_settings_that_matter(&values);
        assert_layout(&values, &c);
        assert_eq!(get(&values, "", "root"), s("/var/lib/containerd"));
        assert_eq!(get(&values, "", "state"), s("/run/containerd"));
        assert_eq!(get(&values, "grpc", "address"), s("/run/containerd/containerd.sock"));
        assert_eq!(get(&values, "ttrpc", "address"), s("/run/containerd/containerd.sock.ttrpc"));
        assert_eq!(get(&values, "plugins.\"io.containerd.internal.v1.opt\"", "path"), s("/opt/containerd"));
        assert_eq!(get(&values, RUNC_OPTIONS, "Root"), None, "runc keeps its default root");
        assert_eq!(get(&values, CRI, "stream_server_address"), s("127.0.0.1"));
        assert_eq!(get(&values, CRI, "stream_server_port"), s("0"));
        assert_eq!(get(&values, &format!("{CRI}.cni"), "conf_dir"), s("/etc/cni/net.d"));
        assert_eq!(c.endpoint(), "unix:///run/containerd/containerd.sock");
    }

    /// Every field reaches the text: a layout changed field by field renders each change.
    #[test]
    fn every_field_is_rendered() {
        let c = ContainerdConfig {
            root: "/r".into(),
            state: "/s".into(),
            address: "/a.sock".into(),
            ttrpc_address: "/t.sock".into(),
            opt_path: "/o".into(),
            runc_root: Some("/rr".into()),
            stream_server_address: "10.0.0.1".parse().expect("an IP address"),
            stream_server_port: 1234,
            sandbox_image: "example.com/pause:1".into(),
            cni_conf_dir: "/c".into(),
            systemd_cgroup: true,
            registry_config_path: "/h".into(),
        };
        let values = parse(&c.render()).expect("parses");
        assert_layout(&values, &c);
        assert_eq!(get(&values, CRI, "sandbox_image"), s("example.com/pause:1"));
        assert_eq!(get(&values, RUNC_OPTIONS, "SystemdCgroup"), Some(Value::Bool(true)));
    }

    /// Strings are escaped: a path with a quote and a backslash reads back unchanged.
    #[test]
    fn paths_are_escaped() {
        let mut c = ContainerdConfig::private("/data/a \"b\" \\c", 1);
        c.sandbox_image = "x\"y".into();
        let values = parse(&c.render()).expect("parses");
        assert_eq!(get(&values, "", "root"), s("/data/a \"b\" \\c/root"));
        assert_eq!(get(&values, CRI, "sandbox_image"), s("x\"y"));
    }

    /// The reader itself refuses what TOML refuses, so the tests above can fail.
    #[test]
    fn the_reader_refuses_broken_toml() {
        assert!(parse("a = 1\na = 2\n").is_err(), "a key twice");
        assert!(parse("[t]\n[t]\n").is_err(), "a table twice");
        assert!(parse("[t\n").is_err(), "an unclosed header");
        assert!(parse("a = \"unterminated\n").is_err(), "an unterminated string");
        assert!(parse("a = what\n").is_err(), "a bare word");
        assert!(parse("just words\n").is_err(), "no key = value");
        assert!(parse("[plugins.\"io.x\".y]\nk = true\n").is_ok());
    }

    /// A registry's hosts.toml parses, names the registry over HTTPS and the CA, and a host that
    /// is not one is refused.
    #[test]
    fn a_registry_host_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_registry_host(dir.path(), "127.0.0.1:5000", Path::new("/pki/ca.crt")).expect("written");
        assert_eq!(path, dir.path().join("127.0.0.1:5000/hosts.toml"));
        let values = parse(&std::fs::read_to_string(&path).expect("read")).expect("parses");
        assert_eq!(get(&values, "", "server"), s("https://127.0.0.1:5000"));
        assert_eq!(get(&values, "host.\"https://127.0.0.1:5000\"", "ca"), s("/pki/ca.crt"));
        for bad in ["", "a/b", ".."] {
            assert!(write_registry_host(dir.path(), bad, Path::new("/ca")).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ttrpc_sits_next_to_grpc() {
        assert_eq!(ttrpc_address_for(Path::new("/x/c.sock")), PathBuf::from("/x/c.sock.ttrpc"));
    }
}
