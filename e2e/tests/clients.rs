//! The official Kubernetes clients against kubelab: the Python client (kubernetes 32.0.1) and the
//! JavaScript client (@kubernetes/client-node 1.1.2) each run their suite in e2e/clients/ against
//! an API server with a controller manager (its garbage collector finishes foreground deletes,
//! its workload controllers roll Deployments and run Jobs), a scheduler, and a node agent on a
//! private containerd (for pods, logs and exec). Each suite connects as a user does: the
//! client's own kubeconfig loader reads `$KUBECONFIG`, a kubeconfig for the API server's HTTPS
//! port with a client certificate of the cluster's CA (in `system:masters`) and the CA the
//! server's certificate is checked against. A suite prints one line per check; the test fails
//! when the suite does, and prints everything it said.
//!
//! The clients come pinned from `make deps` (scripts/fetch-clients.sh) in
//! /var/cache/kubelab/clients (or `$KUBELAB_CLIENTS_DIR`); a missing install fails the test with
//! the command that installs it. The suites get a cleared environment: no proxy settings, no
//! kubeconfig but the one they are given.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e::nodelab::{Components, NodeLab, BUSYBOX};

/// Both suites together take a minute or two on an idle machine; a check has 90 s at most.
const SUITE_TIMEOUT: Duration = Duration::from_secs(900);

fn clients_dir() -> PathBuf {
    std::env::var_os("KUBELAB_CLIENTS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/cache/kubelab/clients"))
}

fn suites_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients")
}

/// Panics, naming the command that installs the clients, unless `marker` (a file of the install)
/// exists and `interpreter` runs.
fn require_install(marker: &Path, interpreter: &str) {
    let install = match std::env::var_os("KUBELAB_CLIENTS_DIR") {
        Some(dir) => format!("CLIENTS_DIR={} scripts/fetch-clients.sh", dir.to_string_lossy()),
        None => "make deps".to_string(),
    };
    assert!(marker.exists(), "{} is missing: the client suites need the pinned clients; install them with `{install}`", marker.display());
    let runs = Command::new(interpreter).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(runs, "`{interpreter} --version` does not run: install it with `{install}`");
}

/// Runs `interpreter script` against `lab` with a cleared environment plus `env`; fails the test
/// unless the suite exits 0 with `0 FAIL` in its summary line.
fn run_suite(lab: &NodeLab, what: &str, interpreter: &str, script: &Path, cwd: &Path, env: &[(&str, String)]) {
    let home = lab.api.root().join(format!("home-{what}"));
    std::fs::create_dir_all(&home).expect("suite home");
    let mut cmd = Command::new(interpreter);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("KUBECONFIG", lab.api.user_kubeconfig(&format!("client-{what}"), &["system:masters"]))
        .env("KUBELAB_NODE", &lab.node)
        .env("KUBELAB_IMAGE", BUSYBOX)
        .env("KUBELAB_CLIENTS_DIR", clients_dir())
        .current_dir(cwd)
        .arg(script);
    for (k, v) in env {
        cmd.env(k, v);
    }
    for k in ["KUBELAB_CHECKS", "KUBELAB_CLIENT_DEBUG"] {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    let (status, stdout, stderr) = e2e::process::run_to_completion(cmd, None, SUITE_TIMEOUT).expect("run the suite");
    eprintln!("--- {what} suite stdout ---\n{stdout}--- {what} suite stderr ---\n{stderr}");
    let summary = stdout.lines().rev().find(|l| l.contains(" client suite: ")).unwrap_or("");
    let passed = status.is_some_and(|s| s.success()) && summary.contains(" 0 FAIL");
    if !passed {
        let failures: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL ")).collect();
        let ended = status.map_or(format!("killed after {SUITE_TIMEOUT:?}"), |s| s.to_string());
        lab.fail(&format!("the {what} client suite failed ({ended}; {summary:?}):\n{}", failures.join("\n")));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn python_client_suite() {
    let dir = clients_dir().join("python");
    require_install(&dir.join("kubernetes").join("__init__.py"), "python3");
    let lab = NodeLab::start("client-python", 61, Components { controller_manager: true, scheduler: true, secure: true }).await;
    let suite = suites_dir().join("python");
    run_suite(&lab, "python", "python3", &suite.join("suite.py"), &suite, &[("PYTHONPATH", dir.to_string_lossy().into_owned()), ("PYTHONDONTWRITEBYTECODE", "1".into())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn javascript_client_suite() {
    let dir = clients_dir().join("js");
    require_install(&dir.join("node_modules").join("@kubernetes").join("client-node").join("package.json"), "node");
    let lab = NodeLab::start("client-js", 62, Components { controller_manager: true, scheduler: true, secure: true }).await;
    let suite = suites_dir().join("js");
    // The suite imports the client from NODE_PATH's directory itself (an ES module import does
    // not search NODE_PATH).
    run_suite(&lab, "javascript", "node", &suite.join("suite.mjs"), &dir, &[("NODE_PATH", dir.join("node_modules").to_string_lossy().into_owned())]);
}
