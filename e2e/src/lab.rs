//! The Docker Compose lab (`deploy/lab/lab`) driven from a test: three node containers, each with
//! containerd, `kubelab nodeagent` and the control plane as static pods. [`Lab::up`] runs `lab up`
//! (which starts a Docker engine if none runs and builds the images, cached); dropping the [`Lab`]
//! runs `lab down -v`, also when the test panicked, after printing the tail of every node's logs.
//!
//! The host reaches the lab only through loopback-published ports (the API servers on
//! 127.0.0.1:6443/6444/6445) and `docker exec` (etcdctl inside a node): the 172.31.250.0/24 lab
//! addresses are not for host-side clients (compose-lab.md).

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

/// `deploy/lab/lab` in this workspace.
pub fn lab_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("deploy").join("lab").join("lab")
}

/// A running lab; `lab down -v` on drop.
pub struct Lab {
    home: tempfile::TempDir,
    kubectl: PathBuf,
    /// `lab up`'s output (its timing lines are the lab's benchmark figures).
    pub up_output: String,
    down: bool,
}

impl Lab {
    /// `lab up`: blocks (in a blocking thread) until the three nodes are Ready.
    pub async fn up() -> anyhow::Result<Lab> {
        let kubectl = crate::apiserver::kubectl_bin()?;
        let home = tempfile::Builder::new().prefix("kubelab-e2e-lab-").tempdir()?;
        // Any lab left by an earlier, interrupted run would hold the ports and the volumes.
        let mut lab = Lab { home, kubectl, up_output: String::new(), down: false };
        let out = lab.run_script(&["down", "-v"]).await?;
        if !out.status.success() {
            eprintln!("[lab] cleanup before up: {}", String::from_utf8_lossy(&out.stderr));
        }
        lab.up_output = lab.script_ok(&["up"]).await?;
        Ok(lab)
    }

    /// Runs `deploy/lab/lab ARGS…` off the executor; the script's stderr (progress) is echoed.
    pub async fn run_script(&self, args: &[&str]) -> anyhow::Result<Output> {
        let mut cmd = Command::new(lab_script());
        cmd.args(args).env("KUBECTL_BIN", &self.kubectl).env("HOME", self.home.path()).stdin(Stdio::null());
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

    /// [`Lab::run_script`], failing unless it exits 0; returns stdout.
    pub async fn script_ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.run_script(args).await?;
        anyhow::ensure!(out.status.success(), "lab {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// kubectl (pinned, temporary `$HOME`) against `node`'s API server.
    pub async fn kubectl(&self, node: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<Output> {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--server")
            .arg(format!("http://127.0.0.1:{}", api_port(node)))
            .arg("--request-timeout=5s")
            .args(args)
            .env("HOME", self.home.path())
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

    /// etcdctl (API v3) run inside `via` against all three store members.
    pub async fn etcdctl(&self, via: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = Command::new("docker");
        cmd.args(["exec", "-e", "ETCDCTL_API=3", &format!("kubelab-{via}"), "etcdctl", "--command-timeout=5s", "--endpoints"])
            .arg(store_endpoints())
            .args(args)
            .stdin(Stdio::null());
        let what = format!("etcdctl {} (in {via})", args.join(" "));
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        anyhow::ensure!(out.status.success(), "{what}: {}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The node whose store member leads, asking from `via`, with every reachable member's view:
    /// `(leader node, members that answered)`. The members that answer must agree on the leader.
    pub async fn store_leader(&self, via: &str) -> anyhow::Result<(String, usize)> {
        // `endpoint status` exits non-zero when one endpoint is down but still prints the others.
        let mut cmd = Command::new("docker");
        cmd.args(["exec", "-e", "ETCDCTL_API=3", &format!("kubelab-{via}"), "etcdctl", "--command-timeout=3s", "--endpoints"])
            .arg(store_endpoints())
            .args(["endpoint", "status", "-w", "json"])
            .stdin(Stdio::null());
        let out = tokio::task::spawn_blocking(move || cmd.output()).await??;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(text.trim()).with_context(|| format!("endpoint status output {text:?} ({})", String::from_utf8_lossy(&out.stderr)))?;
        let arr = v.as_array().context("endpoint status: not a list")?;
        let mut leader_id = None;
        let mut by_id = std::collections::BTreeMap::new();
        for e in arr {
            let ep = e["Endpoint"].as_str().unwrap_or_default();
            let member = e["Status"]["header"]["member_id"].as_u64();
            let leader = e["Status"]["leader"].as_u64();
            let node = NODES.iter().find(|n| ep.starts_with(node_ip(n))).copied();
            if let (Some(m), Some(n)) = (member, node) {
                by_id.insert(m, n.to_string());
            }
            match (leader_id, leader) {
                (_, None) | (_, Some(0)) => {}
                (None, Some(l)) => leader_id = Some(l),
                (Some(a), Some(b)) => anyhow::ensure!(a == b, "members disagree on the leader: {a:x} vs {b:x}"),
            }
        }
        let id = leader_id.context("no member reports a leader")?;
        let node = by_id.get(&id).cloned().with_context(|| format!("leader {id:x} is not among the members that answered"))?;
        Ok((node, arr.len()))
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
        let out = Command::new(lab_script()).args(["down", "-v"]).env("HOME", self.home.path()).stdin(Stdio::null()).output();
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

/// Seconds with one decimal, for the timing lines.
pub fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
