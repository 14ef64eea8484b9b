//! `kubelab up --registry` end to end: the cluster runs its own image registry (Debian's
//! docker-registry, HTTPS with a certificate of the cluster CA, a password), pushes the project's
//! busybox to it and makes the pull secret `registry-credentials`:
//! - a pod naming the registry's busybox, `imagePullPolicy: Always` and the secret runs, and its
//!   events say the image was pulled (Pulling, then Pulled);
//! - the same pod without the secret waits in ErrImagePull with the registry's 401 in the
//!   message, then in ImagePullBackOff;
//! - SIGTERM stops the registry with the cluster.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use e2e::ports;
use e2e::process::{Process, run_to_completion};

/// The pod network's third octet (`10.244.96.0/24`), this test's alone.
const OCTET: u8 = 96;

/// One `kubelab up --registry` with its own data directory, ports and cgroup root.
struct Up {
    process: Option<Process>,
    dir: PathBuf,
    kubectl: PathBuf,
    registry_port: u16,
    cgroup_root: String,
    _tmp: tempfile::TempDir,
}

impl Up {
    fn start() -> Up {
        if let Err(e) = e2e::containerd::prerequisites() {
            panic!("kubelab up needs: {e}");
        }
        if let Err(e) = e2e::registry::prerequisites() {
            panic!("kubelab up --registry needs: {e}");
        }
        let tmp = tempfile::Builder::new().prefix("kubelab-e2e-up-registry-").tempdir().expect("tmp");
        let reserved = ports::reserve_n(8).expect("ports");
        let p: Vec<String> = reserved.iter().map(|p| p.port.to_string()).collect();
        let cgroup_root = format!("/kubelab-e2e-up-registry-{}", std::process::id());
        let args: Vec<String> = [
            "up", "--data-dir", &tmp.path().join("data").to_string_lossy(),
            "--secure-port", &p[0], "--store-port", &p[1], "--store-peer-port", &p[2], "--agent-port", &p[3], "--stream-port", &p[4],
            "--dns-health-port", &p[5], "--proxy-healthz-port", &p[6], "--registry", "--registry-port", &p[7],
            "--node-name", "up-registry", "--pod-cidr", &format!("10.244.{OCTET}.0/24"),
            "--image-dir", &e2e::containerd::images_dir().to_string_lossy(),
            "--cgroup-root", &cgroup_root,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let registry_port = reserved[7].port;
        drop(reserved); // released just before kubelab up binds them
        let env = [("NO_COLOR".to_string(), "1".to_string()), ("RUST_LOG".to_string(), "info".to_string())];
        let bin = e2e::kubelab_bin().expect("kubelab binary");
        let process = Process::spawn("kubelab-up", &bin, &args, &tmp.path().join("up-logs"), &env).expect("spawn kubelab up");
        eprintln!("[e2e] started kubelab up --registry, pid {}", process.pid());
        let mut up = Up {
            process: Some(process),
            dir: tmp.path().to_path_buf(),
            kubectl: e2e::apiserver::kubectl_bin().expect("kubectl"),
            registry_port,
            cgroup_root,
            _tmp: tmp,
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        while !up.stdout().contains("export KUBECONFIG=") {
            if let Some(st) = up.process.as_mut().and_then(Process::exited) {
                up.fail(&format!("kubelab up exited ({st}) before it was ready"));
            }
            if Instant::now() > deadline {
                up.fail("kubelab up never reported ready");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        up
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.join("up-logs/stdout.log")).unwrap_or_default()
    }

    fn fail(&self, msg: &str) -> ! {
        let tail = self.process.as_ref().map(|p| p.log_tail(60)).unwrap_or_default();
        let registry = std::fs::read_to_string(self.dir.join("data/logs/registry.log")).unwrap_or_default();
        let registry: Vec<&str> = registry.lines().rev().take(20).collect();
        panic!("{msg}\n--- kubelab up stdout ---\n{}\n{tail}\n--- registry log (newest first) ---\n{}", self.stdout(), registry.join("\n"))
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut cmd = Command::new(&self.kubectl);
        cmd.args(args).env("HOME", self.dir.join("home")).env("KUBECONFIG", self.dir.join("data/kubeconfig"));
        let (st, out, err) = run_to_completion(cmd, stdin, Duration::from_secs(60)).expect("run kubectl");
        if !st.is_some_and(|s| s.success()) {
            self.fail(&format!("kubectl {args:?} failed ({st:?}):\n{out}\n{err}"));
        }
        out
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.kubectl(&[args, &["-o", "json"]].concat(), None);
        serde_json::from_str(&out).unwrap_or_else(|e| self.fail(&format!("kubectl {args:?}: not JSON ({e}): {out}")))
    }

    /// Polls `f` (every 500 ms) until it gives something, or fails after `timeout`.
    fn wait<T>(&self, what: &str, timeout: Duration, f: impl Fn() -> Result<T, String>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            match f() {
                Ok(v) => return v,
                Err(last) if Instant::now() > deadline => self.fail(&format!("{what}: not within {timeout:?}; last: {last}")),
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    /// (reason, message) of the pod's events.
    fn events(&self, pod: &str) -> Vec<(String, String)> {
        let v = self.json(&["get", "events", "--field-selector", &format!("involvedObject.name={pod}")]);
        let items = v["items"].as_array().cloned().unwrap_or_default();
        items.iter().map(|e| (e["reason"].as_str().unwrap_or_default().to_string(), e["message"].as_str().unwrap_or_default().to_string())).collect()
    }

    /// The pod's container's waiting (reason, message), if it waits.
    fn waiting(&self, pod: &str) -> Option<(String, String)> {
        let p = self.json(&["get", "pod", pod]);
        let w = &p["status"]["containerStatuses"][0]["state"]["waiting"];
        w.is_object().then(|| (w["reason"].as_str().unwrap_or_default().to_string(), w["message"].as_str().unwrap_or_default().to_string()))
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
        e2e::nodeagent::delete_bridge(&format!("kubelab{OCTET}"));
    }
}

fn pod(name: &str, image: &str, secret: bool) -> String {
    let mut pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": image, "imagePullPolicy": "Always", "command": ["sh", "-c", "echo pulled-from-the-registry; sleep 100000"]}],
        },
    });
    if secret {
        pod["spec"]["imagePullSecrets"] = serde_json::json!([{"name": "registry-credentials"}]);
    }
    pod.to_string()
}

#[test]
fn up_runs_a_registry_its_pods_pull_from() {
    let mut up = Up::start();
    let host = format!("127.0.0.1:{}", up.registry_port);
    let out = up.stdout();
    assert!(out.contains(&format!("✓ registry https://{host} (user kubelab; library/busybox:1.36, pause:3.9 pushed)")), "progress lines:\n{out}");
    assert!(out.contains(&format!("✓ pull secret default/registry-credentials for {host}")), "progress lines:\n{out}");

    // The password is the registry's alone (root only), and containerd trusts the registry with
    // the cluster CA.
    use std::os::unix::fs::PermissionsExt as _;
    let password = up.dir.join("data/registry/password");
    assert_eq!(std::fs::metadata(&password).expect("the password file").permissions().mode() & 0o777, 0o600);
    let hosts = std::fs::read_to_string(up.dir.join(format!("data/containerd/certs.d/{host}/hosts.toml"))).expect("hosts.toml");
    assert!(hosts.contains(&format!("server = \"https://{host}\"")) && hosts.contains("pki/ca.crt"), "{hosts}");
    let secret = up.json(&["get", "secret", "registry-credentials"]);
    assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson", "{secret}");

    // 1. With the pull secret: pulled from the registry (Always), and running.
    let image = format!("{host}/library/busybox:1.36");
    up.kubectl(&["apply", "-f", "-"], Some(&pod("with-secret", &image, true)));
    up.wait("with-secret Running", Duration::from_secs(120), || {
        let p = up.json(&["get", "pod", "with-secret"]);
        if p["status"]["phase"] == "Running" { Ok(()) } else { Err(format!("{}", p["status"])) }
    });
    let events = up.events("with-secret");
    assert!(events.iter().any(|(r, m)| r == "Pulling" && m == &format!("Pulling image {image:?}")), "{events:?}");
    assert!(events.iter().any(|(r, m)| r == "Pulled" && m.starts_with(&format!("Successfully pulled image {image:?} in ")) && m.contains("Image size: ")), "{events:?}");

    // 2. Without it: the registry refuses (401), ErrImagePull, then ImagePullBackOff.
    up.kubectl(&["apply", "-f", "-"], Some(&pod("no-secret", &image, false)));
    let refused = up.wait("no-secret in ErrImagePull", Duration::from_secs(120), || match up.waiting("no-secret") {
        Some((reason, message)) if reason == "ErrImagePull" => Ok(message),
        other => Err(format!("{other:?}")),
    });
    assert!(refused.contains("401 Unauthorized") && refused.contains(&image), "the registry's refusal: {refused}");
    up.wait("no-secret in ImagePullBackOff", Duration::from_secs(120), || match up.waiting("no-secret") {
        Some((reason, _)) if reason == "ImagePullBackOff" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let events = up.events("no-secret");
    assert!(events.iter().any(|(r, m)| r == "Failed" && m.contains("401 Unauthorized")), "{events:?}");

    // 3. SIGTERM stops the registry with the cluster: its port is closed.
    let mut p = up.process.take().expect("running");
    let st = p.terminate();
    assert!(st.is_some_and(|s| s.success()), "kubelab up must stop cleanly on SIGTERM, got {st:?}\n{}", p.log_tail(60));
    assert!(std::net::TcpStream::connect(("127.0.0.1", up.registry_port)).is_err(), "the registry stopped with kubelab up");
}
