//! `make walkthrough`: generates docs/walkthrough.md from docs/walkthrough.template.md with a real
//! trace. It starts a store, an API server, a scheduler and a node agent on a private containerd
//! (the e2e harness), creates the walkthrough's pod with the pinned kubectl, waits until it is
//! Running and its steps are recorded, and embeds `kubelab trace` (table and mermaid).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, bail};
use e2e::apiserver::{ApiCluster, ApiOptions};
use e2e::nodeagent::{NodeAgent, NodeAgentOptions};

const NODE: &str = "node1";
const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: web
    image: docker.io/library/busybox:1.36
    command: [sh, -c, 'echo hello; sleep 3600']
    resources:
      requests: {cpu: 100m, memory: 32Mi}";

fn trace(api: &ApiCluster, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(e2e::kubelab_bin()?).arg("trace").args(args).args(["--server", &api.url()]).output()?;
    if !out.status.success() {
        bail!("kubelab trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let containerd = Command::new("containerd").arg("--version").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().nth(2).unwrap_or("").to_string()).unwrap_or_default();
    format!("a {cpus}-CPU Debian machine with containerd {containerd}")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let template = std::fs::read_to_string(root.join("docs/walkthrough.template.md")).context("docs/walkthrough.template.md")?;
    e2e::containerd::prerequisites().map_err(|e| anyhow::anyhow!("the walkthrough needs: {e}"))?;
    let mut api = ApiCluster::start(ApiOptions::default()).await?;
    api.start_scheduler(&[])?;
    let agent = NodeAgent::start(api.root(), NodeAgentOptions { master: Some(api.url()), node_name: NODE, pod_cidr_octet: 50, extra: vec![] }).await?;
    let node = format!("node/{NODE}");
    let mut ready = false;
    for _ in 0..120 {
        if api.kubectl(&["wait", "--for=condition=Ready", &node, "--timeout=30s"]).success {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    anyhow::ensure!(ready, "node {NODE} never turned Ready:\n{}", agent.log_tail(60));
    let applied = api.kubectl_with(&["apply", "-f", "-"], &[], Some(POD));
    anyhow::ensure!(applied.success, "kubectl apply: {}", applied.describe());
    api.kubectl_ok(&["wait", "--for=condition=Ready", "pod/web", "--timeout=60s"]);
    let mut table = String::new();
    for _ in 0..40 {
        table = trace(&api, &["pod/web"])?;
        if table.contains("step8_status") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mermaid = trace(&api, &["pod/web", "--mermaid"])?;
    let out = template
        .replace("{{MACHINE}}", &machine())
        .replace("{{DATE}}", &chrono::Utc::now().format("%Y-%m-%d").to_string())
        .replace("{{POD_YAML}}", POD)
        .replace("{{TRACE_TABLE}}", &table)
        .replace("{{TRACE_MERMAID}}", mermaid.trim_end());
    let path = root.join("docs/walkthrough.md");
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    drop(agent);
    Ok(())
}
