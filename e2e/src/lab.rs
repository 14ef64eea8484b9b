//! The Docker Compose lab (`deploy/lab/lab`) driven from a test: three node containers, each with
//! containerd, `kubelab nodeagent` and the control plane as static pods. [`Lab::up`] runs `lab up`
//! (which starts a Docker engine if none runs and builds the images, cached); dropping the [`Lab`]
//! runs `lab down -v`, also when the test panicked, after printing the tail of every node's logs.
//!
//! The host reaches the lab only through loopback-published ports (the API servers on
//! 127.0.0.1:6443/6444/6445, over HTTPS with the admin's kubeconfig `lab up` writes) and `docker
//! exec` (etcdctl inside a node, with the etcd CA's client certificate): the 172.31.250.0/24 lab
//! addresses are not for host-side clients (docs/architecture/lab.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// The lab's nodes, in order.
pub const NODES: [&str; 3] = ["node1", "node2", "node3"];

/// A node's address on the lab network (docker-compose.yml pins them).
pub fn node_ip(node: &str) -> &'static str {
    match node {
        "node1" => "172.31.250.11",
        "node2" => "172.31.250.12",
        _ => "172.31.250.13",
    }
}

/// The loopback port of a node's API server.
pub fn api_port(node: &str) -> u16 {
    match node {
        "node1" => 6443,
        "node2" => 6444,
        _ => 6445,
    }
}

/// The store's client endpoints as etcdctl's `endpoint status` wants them (`host:port`).
pub fn store_endpoints() -> String {
    NODES.iter().map(|n| format!("{}:2379", node_ip(n))).collect::<Vec<_>>().join(",")
}

/// Where the lab's PKI is inside a control-plane node (kubeadm's /etc/kubernetes/pki).
pub const NODE_PKI: &str = "/etc/kubernetes/pki";

/// `deploy/lab/lab` in this workspace.
pub fn lab_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("deploy").join("lab").join("lab")
}

/// One store member as `etcdctl endpoint status` reports it.
#[derive(Clone, Debug)]
pub struct StoreMember {
    pub node: String,
    pub id: u64,
    /// The leader this member knows (0: none).
    pub leader: u64,
    pub term: u64,
}

impl StoreMember {
    pub fn is_leader(&self) -> bool {
        self.leader != 0 && self.leader == self.id
    }
}

/// A running lab; `lab down -v` on drop.
pub struct Lab {
    home: tempfile::TempDir,
    kubectl: PathBuf,
    /// The admin's kubeconfig `lab up` wrote (a context per node).
    kubeconfig: PathBuf,
    /// `lab up`'s output (its timing lines are the lab's benchmark figures).
    pub up_output: String,
    down: bool,
    /// Extra environment for every `lab` run (e.g. `KUBELAB_RUST_LOG`), so a `lab up` again
    /// starts the nodes the same way.
    env: Vec<(String, String)>,
}

impl Lab {
    /// `lab up`: blocks (in a blocking thread) until the three nodes are Ready.
    pub async fn up() -> anyhow::Result<Lab> {
        Lab::up_with_env(&[]).await
    }

    /// [`Lab::up`] with extra environment for the `lab` script, such as
    /// `KUBELAB_RUST_LOG=info,kubelet::pleg=debug` (the nodes' `RUST_LOG`).
    pub async fn up_with_env(env: &[(&str, &str)]) -> anyhow::Result<Lab> {
        let kubectl = crate::apiserver::kubectl_bin()?;
        let home = tempfile::Builder::new().prefix("kubelab-e2e-lab-").tempdir()?;
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        // Any lab left by an earlier, interrupted run would hold the ports and the volumes.
        let mut lab = Lab { home, kubectl, kubeconfig: PathBuf::new(), up_output: String::new(), down: false, env };
        let out = lab.run_script(&["down", "-v"]).await?;
        if !out.status.success() {
            eprintln!("[lab] cleanup before up: {}", String::from_utf8_lossy(&out.stderr));
        }
        lab.up_output = lab.script_ok(&["up"]).await?;
        // `lab up`'s last line: `export KUBECONFIG=<lab dir>/kubeconfig`.
        let path = lab.up_output.lines().find_map(|l| l.strip_prefix("export KUBECONFIG=")).context("lab up printed no `export KUBECONFIG=`")?;
        lab.kubeconfig = PathBuf::from(path.trim());
        Ok(lab)
    }

    /// The admin's kubeconfig (`O=system:masters`, a context per node).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The cluster's PKI and kubeconfigs `lab up` made (kubeadm's /etc/kubernetes/pki), beside the
    /// admin's kubeconfig: `pki/kubelet-<node>.conf` is a node agent's identity.
    pub fn pki_dir(&self) -> PathBuf {
        self.kubeconfig.with_file_name("kubernetes").join("pki")
    }

    /// Runs `deploy/lab/lab ARGS…` off the executor; the script's stderr (progress) is echoed.
    pub async fn run_script(&self, args: &[&str]) -> anyhow::Result<Output> {
        let mut cmd = Command::new(lab_script());
        cmd.args(args).env("KUBECTL_BIN", &self.kubectl).env("HOME", self.home.path()).envs(self.env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
        if let Ok(bin) = crate::kubelab_bin() {
            cmd.env("KUBELAB_BIN", bin);
        }
        let what = format!("lab {}", args.join(" "));
        let out = tokio::task::spawn_blocking(move || cmd.output()).await?.with_context(|| what.clone())?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        for line in stderr.lines() {
            eprintln!("[{what}] {line}");
        }
        Ok(out)
    }

    /// [`Lab::run_script`], failing unless it exits 0 (the error holds its stdout and stderr);
    /// returns stdout.
    pub async fn script_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.run_script(args).await?;
        // stdout too: what a failing script printed there (`lab chaos`'s report, with the
        // invariants it found broken) is the reason, and stderr was already echoed above.
        anyhow::ensure!(
            out.status.success(),
            "lab {} failed ({}):\n{}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The pinned kubectl (temporary `$HOME`) as the admin, pointed at `node`'s API server (its
    /// context in the lab's kubeconfig), without a request timeout: for watches (`get -w`) the
    /// caller ends itself.
    pub fn kubectl_command(&self, node: &str) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(&self.kubeconfig).args(["--context", node]).env("HOME", self.home.path()).env_remove("KUBECONFIG");
        cmd
    }

    /// kubectl (pinned, temporary `$HOME`) against `node`'s API server.
    pub async fn kubectl(&self, node: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Output> {
        let mut cmd = self.kubectl_command(node);
        cmd.arg("--request-timeout=5s")
            .args(args)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let input = stdin.map(str::to_string);
        let out = tokio::task::spawn_blocking(move || -> std::io::Result<Output> {
            let mut child = cmd.spawn()?;
            if let (Some(text), Some(mut w)) = (input, child.stdin.take()) {
                use std::io::Write;
                w.write_all(text.as_bytes())?;
            }
            child.wait_with_output()
        })
        .await??;
        Ok(out)
    }

    /// kubectl (pinned, temporary `$HOME`) with another identity: `kubeconfig` instead of the
    /// admin's (a node agent's `pki/kubelet-<node>.conf`, say).
    pub async fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Output> {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig").arg(kubeconfig).arg("--request-timeout=5s").args(args).env("HOME", self.home.path()).env_remove("KUBECONFIG").stdin(Stdio::null());
        let what = format!("kubectl --kubeconfig {} {}", kubeconfig.display(), args.join(" "));
        tokio::task::spawn_blocking(move || cmd.output()).await?.with_context(|| what.clone())
    }

    /// [`Lab::kubectl`], failing unless it exits 0; returns stdout.
    pub async fn kubectl_ok(&self, node: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = self.kubectl(node, args, None).await?;
        anyhow::ensure!(out.status.success(), "kubectl {} (via {node}) failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl get ARGS -o json` via `node`, parsed.
    pub async fn get_json(&self, node: &str, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        let text = self.kubectl_ok(node, &a).await?;
        Ok(serde_json::from_str(&text)?)
    }

    /// `kubectl apply -f -` of `manifest` via `node`.
    pub async fn apply(&self, node: &str, manifest: &str) -> anyhow::Result<()> {
        let out = self.kubectl(node, &["apply", "-f", "-"], Some(manifest)).await?;
        anyhow::ensure!(out.status.success(), "kubectl apply via {node}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }

    /// `docker exec kubelab-NODE ARGS…` (a shell, `ctr`, a file edit inside a node), off the
    /// executor; the caller judges the exit status.
    pub async fn exec(&self, node: &str, args: &[&str]) -> anyhow::Result<Output> {
        let mut cmd = Command::new("docker");
        cmd.arg("exec").arg(format!("kubelab-{node}")).args(args).stdin(Stdio::null());
        let what = format!("docker exec kubelab-{node} {}", args.join(" "));
        tokio::task::spawn_blocking(move || cmd.output()).await?.with_context(|| what.clone())
    }

    /// [`Lab::exec`], failing unless it exits 0; returns stdout.
    pub async fn exec_ok(&self, node: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = self.exec(node, args).await?;
        anyhow::ensure!(out.status.success(), "docker exec kubelab-{node} {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The node agent's log (the node container's output) written since `since`, without
    /// colour codes. The host and the containers share one clock.
    pub async fn agent_log_since(&self, node: &str, since: chrono::DateTime<chrono::Utc>) -> anyhow::Result<String> {
        let mut cmd = Command::new("docker");
        cmd.args(["logs", "--since"])
            .arg(since.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
            .arg(format!("kubelab-{node}"))
            .stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        anyhow::ensure!(out.status.success(), "docker logs kubelab-{node}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(strip_ansi(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))))
    }

    /// `lab logs NODE COMPONENT` (a control-plane pod's CRI log, every restart), without
    /// colour codes; not echoed.
    pub async fn component_log(&self, node: &str, component: &str) -> anyhow::Result<String> {
        let mut cmd = Command::new(lab_script());
        cmd.args(["logs", node, component]).env("HOME", self.home.path()).stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        anyhow::ensure!(out.status.success(), "lab logs {node} {component}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(strip_ansi(&String::from_utf8_lossy(&out.stdout)))
    }

    /// `docker exec` of etcdctl (API v3) inside `via` against all three store members, with the
    /// etcd CA and its client certificate (the members refuse a client without one).
    fn etcdctl_command(via: &str, timeout: &str) -> Command {
        let mut cmd = Command::new("docker");
        cmd.args(["exec", "-e", "ETCDCTL_API=3", &format!("kubelab-{via}"), "etcdctl", &format!("--command-timeout={timeout}")])
            .arg(format!("--cacert={NODE_PKI}/etcd/ca.crt"))
            .arg(format!("--cert={NODE_PKI}/etcd/healthcheck-client.crt"))
            .arg(format!("--key={NODE_PKI}/etcd/healthcheck-client.key"))
            .arg("--endpoints")
            .arg(store_endpoints())
            .stdin(Stdio::null());
        cmd
    }

    /// etcdctl (API v3) run inside `via` against all three store members.
    pub async fn etcdctl(&self, via: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = Lab::etcdctl_command(via, "5s");
        cmd.args(args);
        let what = format!("etcdctl {} (in {via})", args.join(" "));
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        anyhow::ensure!(out.status.success(), "{what}: {}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Every store member that answers `etcdctl endpoint status`, asking from `via`: its node,
    /// member id, the leader it knows (0 for none) and its raft term. `endpoint status` exits
    /// non-zero when one member is down but still prints the others.
    pub async fn store_members(&self, via: &str) -> anyhow::Result<Vec<StoreMember>> {
        let mut cmd = Lab::etcdctl_command(via, "3s");
        cmd.args(["endpoint", "status", "-w", "json"]);
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(text.trim()).with_context(|| format!("endpoint status output {text:?} ({})", String::from_utf8_lossy(&out.stderr)))?;
        let mut members = Vec::new();
        for e in v.as_array().context("endpoint status: not a list")? {
            let ep = e["Endpoint"].as_str().unwrap_or_default();
            let node = NODES.iter().find(|n| ep.starts_with(node_ip(n))).with_context(|| format!("endpoint {ep} is no node's"))?;
            let id = e.pointer("/Status/header/member_id").and_then(serde_json::Value::as_u64).with_context(|| format!("no member id from {ep}"))?;
            let leader = e.pointer("/Status/leader").and_then(serde_json::Value::as_u64).unwrap_or(0);
            let term = e.pointer("/Status/raftTerm").or_else(|| e.pointer("/Status/header/raft_term")).and_then(serde_json::Value::as_u64).unwrap_or(0);
            members.push(StoreMember { node: node.to_string(), id, leader, term });
        }
        Ok(members)
    }

    /// The node whose store member leads, asking from `via`, with every reachable member's view:
    /// `(leader node, members that answered)`. The members that answer must agree on the leader.
    pub async fn store_leader(&self, via: &str) -> anyhow::Result<(String, usize)> {
        let members = self.store_members(via).await?;
        let mut leader_id = None;
        for m in members.iter().filter(|m| m.leader != 0) {
            match leader_id {
                None => leader_id = Some(m.leader),
                Some(l) => anyhow::ensure!(l == m.leader, "members disagree on the leader: {l:x} vs {:x}", m.leader),
            }
        }
        let id = leader_id.context("no member reports a leader")?;
        let leader = members.iter().find(|m| m.id == id).with_context(|| format!("leader {id:x} is not among the members that answered"))?;
        Ok((leader.node.clone(), members.len()))
    }

    /// Every node's Ready condition status ("True", "False", "Unknown"), via `node`.
    pub async fn node_readiness(&self, via: &str) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
        let v = self.get_json(via, &["nodes"]).await?;
        let mut out = std::collections::BTreeMap::new();
        for n in v["items"].as_array().into_iter().flatten() {
            let name = n["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let ready = n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready")
                .and_then(|c| c["status"].as_str())
                .unwrap_or("Unknown")
                .to_string();
            out.insert(name, ready);
        }
        Ok(out)
    }

    /// The tail of every node's agent and containerd logs, and of the control-plane pods.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut s = String::new();
        for n in NODES {
            for c in ["nodeagent", "store", "apiserver"] {
                let out = Command::new(lab_script()).args(["logs", n, c]).stdin(Stdio::null()).output();
                if let Ok(out) = out {
                    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                    let all: Vec<&str> = text.lines().collect();
                    s.push_str(&format!("---- {n} {c} (last {lines} lines) ----\n"));
                    for l in &all[all.len().saturating_sub(lines)..] {
                        s.push_str(l);
                        s.push('\n');
                    }
                }
            }
        }
        s
    }

    /// `lab down -v` now (also done on drop).
    pub fn down(&mut self) {
        if self.down {
            return;
        }
        self.down = true;
        let start = Instant::now();
        let out = Command::new(lab_script())
            .args(["down", "-v"])
            .env("HOME", self.home.path())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => eprintln!("[lab] down -v in {:.1?}", start.elapsed()),
            Ok(o) => eprintln!("[lab] down -v failed ({}): {}", o.status, String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("[lab] down -v could not run: {e}"),
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails(40));
        }
        self.down();
    }
}

/// `text` without ANSI colour sequences (`ESC [ … m`): the node agent colours its log even when
/// it is not a terminal, and tests search the plain text.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            // Parameters and intermediates, up to and including the final byte (@ to ~).
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Seconds with one decimal, for the timing lines.
pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::strip_ansi;

    #[test]
    fn strip_ansi_keeps_the_text() {
        let line = "\u{1b}[2m2026-11-30T07:39:12Z\u{1b}[0m \u{1b}[33m WARN\u{1b}[0m \u{1b}[2mkubelet::config\u{1b}[0m\u{1b}[2m:\u{1b}[0m skipped \u{1b}[3mpath\u{1b}[0m\u{1b}[2m=\u{1b}[0m/x.yaml";
        assert_eq!(strip_ansi(line), "2026-11-30T07:39:12Z  WARN kubelet::config: skipped path=/x.yaml");
        assert_eq!(strip_ansi("plain [text]"), "plain [text]");
    }
}
