//! `kubelab up` end to end: the whole cluster in one process with its own containerd, driven by
//! the pinned kubectl through the kubeconfig it writes — run a pod, see it Running, read its
//! logs, delete it; stop the cluster with SIGTERM and start it again: the objects are still
//! there and the pods run again.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use e2e::ports;
use e2e::process::{Process, run_to_completion};

struct Up {
    process: Option<Process>,
    /// Where this run's output starts in the (appended) stdout log.
    stdout_from: usize,
    bin: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    kubectl: PathBuf,
    cgroup_root: String,
}

impl Up {
    fn start(&mut self) {
        let env = vec![("NO_COLOR".to_string(), "1".to_string()), ("RUST_LOG".to_string(), "info".to_string())];
        self.stdout_from = std::fs::read_to_string(self.dir.join("up-logs/stdout.log")).map(|s| s.len()).unwrap_or(0);
        let p = Process::spawn("kubelab-up", &self.bin, &self.args, &self.dir.join("up-logs"), &env).expect("spawn kubelab up");
        eprintln!("[e2e] started kubelab up pid {}", p.pid());
        self.process = Some(p);
    }

    /// This run's stdout so far.
    fn stdout(&self) -> String {
        let all = std::fs::read_to_string(self.dir.join("up-logs/stdout.log")).unwrap_or_default();
        all.get(self.stdout_from..).unwrap_or_default().to_string()
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("data/kubeconfig")
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let home = self.dir.join("home");
        let _ = std::fs::create_dir_all(&home);
        let mut cmd = Command::new(&self.kubectl);
        cmd.args(args).env("HOME", &home).env("KUBECONFIG", self.kubeconfig());
        let (st, out, err) = run_to_completion(cmd, stdin, Duration::from_secs(60)).expect("run kubectl");
        eprintln!("[kubectl] {args:?} -> {st:?}");
        (st.is_some_and(|s| s.success()), out, err)
    }

    fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args, None);
        if !ok {
            self.fail(&format!("kubectl {args:?} failed:\n{out}\n{err}"));
        }
        out
    }

    fn fail(&self, msg: &str) -> ! {
        let tail = self.process.as_ref().map(|p| p.log_tail(80)).unwrap_or_default();
        panic!("{msg}\n--- kubelab up stdout ---\n{}\n{tail}", self.stdout())
    }

    /// Wait until `kubectl args` prints something `pred` accepts.
    fn wait_kubectl(&self, args: &[&str], what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let (ok, out, _) = self.kubectl(args, None);
            if ok && pred(&out) {
                return out;
            }
            if Instant::now() > deadline {
                self.fail(&format!("{what}: not within {timeout:?}; last output:\n{out}"));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.stdout().contains("export KUBECONFIG=") {
            if let Some(st) = self.process.as_mut().and_then(Process::exited) {
                self.fail(&format!("kubelab up exited ({st}) before it was ready"));
            }
            if Instant::now() > deadline {
                self.fail("kubelab up never reported ready");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn stop(&mut self) {
        let mut p = self.process.take().expect("running");
        let st = p.terminate();
        assert!(st.is_some_and(|s| s.success()), "kubelab up must stop cleanly on SIGTERM, got {st:?}\n{}", p.log_tail(60));
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            if std::thread::panicking() {
                eprintln!("{}", p.log_tail(80));
            }
            p.terminate();
        }
        e2e::nodeagent::remove_cgroup_tree(&self.cgroup_root);
        e2e::nodeagent::delete_bridge("kubelab41");
    }
}

#[test]
fn up_runs_pods_and_resumes_after_a_restart() {
    if let Err(e) = e2e::containerd::prerequisites() {
        panic!("kubelab up needs: {e}");
    }
    let tmp = tempfile::Builder::new().prefix("kubelab-e2e-up-").tempdir().expect("tmp");
    let ports = ports::reserve_n(5).expect("ports");
    let p: Vec<String> = ports.iter().map(|p| p.port.to_string()).collect();
    let cgroup_root = format!("/kubelab-e2e-up-{}", std::process::id());
    let args: Vec<String> = [
        "up", "--data-dir", &tmp.path().join("data").to_string_lossy(),
        "--port", &p[0], "--store-port", &p[1], "--store-peer-port", &p[2], "--agent-port", &p[3], "--stream-port", &p[4],
        "--node-name", "up-node", "--pod-cidr", "10.244.41.0/24",
        "--image-dir", &e2e::containerd::images_dir().to_string_lossy(),
        "--cgroup-root", &cgroup_root,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    drop(ports); // released just before kubelab up binds them
    let mut up = Up {
        process: None,
        stdout_from: 0,
        bin: e2e::kubelab_bin().expect("kubelab binary"),
        args,
        dir: tmp.path().to_path_buf(),
        kubectl: e2e::apiserver::kubectl_bin().expect("kubectl"),
        cgroup_root,
    };
    up.start();
    up.wait_ready();
    let out = up.stdout();
    assert!(out.contains("✓ store and API server") && out.contains("node up-node Ready"), "progress lines:\n{out}");
    up.wait_kubectl(&["get", "nodes"], "node Ready", Duration::from_secs(30), |s| s.contains("up-node") && s.contains(" Ready"));

    // kubelab gives up transparent huge pages; the containerd it starts gets them back.
    let pid = up.process.as_ref().expect("running").pid();
    assert_eq!(e2e::process::thp_enabled(pid), Some(false), "kubelab up runs without transparent huge pages");
    let containerd: Vec<u32> = e2e::process::children(pid)
        .into_iter()
        .filter(|c| std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == "containerd"))
        .collect();
    assert_eq!(containerd.len(), 1, "kubelab up's containerd among its children");
    assert_eq!(e2e::process::thp_enabled(containerd[0]), Some(true), "containerd keeps the machine's transparent huge pages");

    // Run a pod, see it Running, read its logs, delete it.
    let submitted = chrono::Utc::now();
    up.kubectl_ok(&["run", "hello", "--image=docker.io/library/busybox:1.36", "--restart=Never", "--", "sh", "-c", "echo hello from kubelab up; sleep 3600"]);
    up.wait_kubectl(&["get", "pod", "hello"], "hello Running", Duration::from_secs(60), |s| s.contains("Running"));
    let running = chrono::Utc::now();
    check_trace(&up, submitted, running);
    up.wait_kubectl(&["logs", "hello"], "hello's logs", Duration::from_secs(30), |s| s.contains("hello from kubelab up"));
    up.kubectl_ok(&["delete", "pod", "hello", "--grace-period=1", "--timeout=60s"]);
    let (_, out, err) = up.kubectl(&["get", "pod", "hello"], None);
    assert!(err.contains("NotFound") || err.contains("not found"), "pod gone after delete: {out}{err}");

    // Objects to find again after a restart.
    up.kubectl_ok(&["create", "configmap", "keep", "--from-literal=k=v"]);
    up.kubectl_ok(&["run", "durable", "--image=docker.io/library/busybox:1.36", "--", "sh", "-c", "while true; do echo alive; sleep 1; done"]);
    up.wait_kubectl(&["get", "pod", "durable"], "durable Running", Duration::from_secs(60), |s| s.contains("Running"));

    // Stop with SIGTERM, start again: the same cluster.
    up.stop();
    assert!(up.stdout().contains("stopped ("), "clean stop reported:\n{}", up.stdout());
    up.start();
    up.wait_ready();
    let cm = up.kubectl_ok(&["get", "configmap", "keep", "-o", "jsonpath={.data.k}"]);
    assert_eq!(cm, "v");
    up.wait_kubectl(&["get", "pod", "durable", "-o", "jsonpath={.status.phase}"], "durable Running again", Duration::from_secs(90), |s| s == "Running");
    up.wait_kubectl(&["logs", "durable"], "durable's logs after the restart", Duration::from_secs(30), |s| s.contains("alive"));
    up.stop();
}

/// `kubelab trace` of the pod just run: every hop in order, none with a negative duration, all
/// within the time the test saw between submitting the pod and seeing it Running (the components
/// and the test share the machine's clock), the hops that follow one another adding up to no more
/// than that; its diagram parses and names every participant.
fn check_trace(up: &Up, submitted: chrono::DateTime<chrono::Utc>, running: chrono::DateTime<chrono::Utc>) {
    let trace = |args: &[&str]| {
        let mut cmd = Command::new(&up.bin);
        cmd.arg("trace").args(args).env("KUBECONFIG", up.kubeconfig());
        let (st, out, err) = run_to_completion(cmd, None, Duration::from_secs(30)).expect("run kubelab trace");
        if !st.is_some_and(|s| s.success()) {
            up.fail(&format!("kubelab trace {args:?} failed:\n{out}\n{err}"));
        }
        out
    };
    let json: serde_json::Value = serde_json::from_str(&trace(&["pod/hello", "--json"])).expect("--json is JSON");
    let steps: Vec<(String, chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>)> = json["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            let t = |k: &str| s[k].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()).map(|t| t.to_utc()).expect("a step time");
            (format!("{} {}", s["component"].as_str().unwrap_or_default(), s["name"].as_str().unwrap_or_default()), t("start"), t("end"))
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|(n, _, _)| n.as_str()).collect();
    // The journey up to Running: the hops the seed article draws, in its order.
    let order = ["apiserver request", "store apply", "scheduler schedule_one", "scheduler bind", "nodeagent step1_pod_cgroup", "cri RunPodSandbox", "cri StartContainer", "nodeagent step8_status"];
    let at: Vec<usize> = order.iter().map(|w| names.iter().position(|n| n == w).unwrap_or_else(|| up.fail(&format!("no {w} in the trace: {names:?}")))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "hops out of order ({order:?} at {at:?}): {names:?}");
    let journey = &steps[..=at[at.len() - 1]];
    let slack = chrono::Duration::milliseconds(5);
    for (name, start, end) in journey {
        assert!(end >= start, "{name} has a negative duration ({start} → {end})");
        assert!(*start >= submitted - slack && *end <= running + slack, "{name} ({start} → {end}) outside create → Running ({submitted} → {running})");
    }
    // Hops that follow one another (the create request, scheduling, binding, and SyncPod's steps
    // of the first sync): their durations add up to no more than create → Running.
    let sequential = ["apiserver request", "scheduler schedule_one", "scheduler bind"]
        .into_iter()
        .chain(names.iter().copied().filter(|n| n.starts_with("nodeagent step")))
        .collect::<std::collections::BTreeSet<_>>();
    let mut sum = chrono::Duration::zero();
    for hop in &sequential {
        let (_, s, e) = journey.iter().find(|(n, _, _)| n == hop).unwrap_or_else(|| up.fail(&format!("no {hop} before Running: {names:?}")));
        sum += *e - *s;
    }
    assert!(sum <= running - submitted, "the sequential hops {sequential:?} add up to {sum}, more than create → Running ({})", running - submitted);
    let mermaid = trace(&["pod/hello", "--mermaid"]);
    let d = e2e::mermaid::parse(&mermaid).unwrap_or_else(|e| up.fail(&format!("the diagram does not parse: {e}\n{mermaid}")));
    assert!(d.unused_participants().is_empty(), "participants without a message: {:?}\n{mermaid}", d.unused_participants());
    eprintln!("[e2e] trace of hello: {} steps; the sequential hops add up to {} ms of a create → Running of {} ms", steps.len(), sum.num_milliseconds(), (running - submitted).num_milliseconds());
}
