//! `kubelab up` end to end: the whole cluster in one process with its own containerd, driven by
//! the pinned kubectl through the kubeconfig it writes — run a pod, see it Running, read its
//! logs, delete it; stop the cluster with SIGTERM and start it again: the objects are still
//! there and the pods run again. And the workloads, on real containers, through every kubectl
//! from 1.27 to 1.33: a Deployment created, scaled, rolled, undone, restarted, healed and
//! deleted (cascading and orphaning); Jobs that complete and that exceed their backoff limit; a
//! CronJob that fires; a DaemonSet; a StatefulSet created in order; a drain a budget refuses.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
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
    bridge: String,
    _tmp: tempfile::TempDir,
}

impl Up {
    /// A `kubelab up` of its own (data directory, ports, cgroup root, pod CIDR
    /// `10.244.<octet>.0/24`), not started yet.
    fn new(octet: u8) -> Up {
        if let Err(e) = e2e::containerd::prerequisites() {
            panic!("kubelab up needs: {e}");
        }
        let tmp = tempfile::Builder::new().prefix("kubelab-e2e-up-").tempdir().expect("tmp");
        let ports = ports::reserve_n(8).expect("ports");
        let p: Vec<String> = ports.iter().map(|p| p.port.to_string()).collect();
        let cgroup_root = format!("/kubelab-e2e-up-{}-{octet}", std::process::id());
        let args: Vec<String> = [
            "up", "--data-dir", &tmp.path().join("data").to_string_lossy(),
            "--store-port", &p[1], "--store-peer-port", &p[2], "--agent-port", &p[3], "--stream-port", &p[4],
            "--dns-health-port", &p[5], "--proxy-healthz-port", &p[6], "--secure-port", &p[7],
            "--node-name", "up-node", "--pod-cidr", &format!("10.244.{octet}.0/24"),
            "--image-dir", &e2e::containerd::images_dir().to_string_lossy(),
            "--cgroup-root", &cgroup_root,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        drop(ports); // released just before kubelab up binds them
        Up {
            process: None,
            stdout_from: 0,
            bin: e2e::kubelab_bin().expect("kubelab binary"),
            args,
            dir: tmp.path().to_path_buf(),
            kubectl: e2e::apiserver::kubectl_bin().expect("kubectl"),
            cgroup_root,
            bridge: format!("kubelab{octet}"),
            _tmp: tmp,
        }
    }

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

    /// The value `kubelab up` was given for `flag` (a port, for instance).
    fn arg(&self, flag: &str) -> String {
        let i = self.args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("kubelab up has no {flag}"));
        self.args[i + 1].clone()
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("data/kubeconfig")
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        self.kubectl_bin(&self.kubectl, args, stdin)
    }

    /// `kubectl` 1.`minor`, with a `HOME` of its own.
    fn kubectl_v(&self, minor: u32, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        self.kubectl_bin(&e2e::apiserver::kubectl_for(minor).expect("kubectl"), args, stdin)
    }

    fn kubectl_v_ok(&self, minor: u32, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out, err) = self.kubectl_v(minor, args, stdin);
        if !ok {
            self.fail(&format!("kubectl 1.{minor} {args:?} failed:\n{out}\n{err}"));
        }
        out
    }

    fn kubectl_bin(&self, bin: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let home = self.dir.join(format!("home-{}", bin.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()));
        let _ = std::fs::create_dir_all(&home);
        let mut cmd = Command::new(bin);
        cmd.args(args).env("HOME", &home).env("KUBECONFIG", self.kubeconfig());
        let (st, out, err) = run_to_completion(cmd, stdin, Duration::from_secs(90)).expect("run kubectl");
        eprintln!("[kubectl] {} {args:?} -> {st:?}", bin.display());
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

    /// Wait until `kubectl args` fails with a message `pred` accepts (10 s at most).
    fn wait_kubectl_fails(&self, args: &[&str], what: &str, pred: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (ok, out, err) = self.kubectl(args, None);
            if !ok && pred(&err) {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!("{what}: not within 10 s; last output:\n{out}{err}"));
            }
            std::thread::sleep(Duration::from_millis(300));
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
        e2e::nodeagent::delete_bridge(&self.bridge);
    }
}

#[test]
fn up_runs_pods_and_resumes_after_a_restart() {
    let mut up = Up::new(41);
    up.start();
    up.wait_ready();
    let out = up.stdout();
    assert!(out.contains("✓ store and API server") && out.contains("node up-node Ready"), "progress lines:\n{out}");
    up.wait_kubectl(&["get", "nodes"], "node Ready", Duration::from_secs(30), |s| s.contains("up-node") && s.contains(" Ready"));
    check_store_tls(&up.stdout());

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
    let token_kubeconfig = check_service_account_token(&up, "hello");
    check_node_identity(&up, "hello");
    check_kubelet_api(&up, "hello", &token_kubeconfig);
    check_anonymous(&up);
    check_bootstrap_token(&up);
    // Each controller acts as its own service account (there is no insecure port to fall back on,
    // and the controller manager's own user may not write pods): the accounts exist.
    let accounts = up.kubectl_ok(&["get", "serviceaccounts", "-n", "kube-system", "-o", "name"]);
    for controller in ["replicaset-controller", "deployment-controller", "endpointslice-controller", "namespace-controller", "node-controller", "generic-garbage-collector", "root-ca-cert-publisher"] {
        assert!(accounts.lines().any(|l| l == format!("serviceaccount/{controller}")), "{controller}'s account in kube-system: {accounts}");
    }
    up.kubectl_ok(&["delete", "pod", "hello", "--grace-period=1", "--timeout=60s"]);
    let (_, out, err) = up.kubectl(&["get", "pod", "hello"], None);
    assert!(err.contains("NotFound") || err.contains("not found"), "pod gone after delete: {out}{err}");
    // The token was bound to the pod: gone with it (once the pod's deletion reached the API
    // server's watch cache, which the authenticator reads).
    up.wait_kubectl_fails(&["--kubeconfig", &token_kubeconfig, "auth", "whoami"], "the deleted pod's token refused", |e| e.contains("Unauthorized"));
    for minor in e2e::apiserver::KUBECTL_MINORS {
        let (ok, out, err) = up.kubectl_v(minor, &["--kubeconfig", &token_kubeconfig, "auth", "whoami"], None);
        assert!(!ok && err.contains("Unauthorized"), "kubectl 1.{minor}: the deleted pod's token must be refused: {out}{err}");
    }

    // The audit log has the user's create of the pod, with its body (up's policy: writes at
    // Request), and nothing of the cluster's own components.
    let audit = std::fs::read_to_string(up.dir.join("data/logs/audit.log")).expect("the audit log");
    let events: Vec<serde_json::Value> = audit.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let created = events.iter().find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "pods" && e["objectRef"]["name"] == "hello");
    let created = created.unwrap_or_else(|| panic!("the pod's create in the audit log:\n{audit}"));
    assert_eq!((created["user"]["username"].as_str(), created["level"].as_str(), created["responseStatus"]["code"].as_i64()), (Some("kubernetes-admin"), Some("Request"), Some(201)));
    assert_eq!(created["requestObject"]["metadata"]["name"], "hello");
    let components = ["system:unsecured", "system:kube-scheduler", "system:kube-proxy", "system:kube-dns", "system:kube-controller-manager", "system:node:up-node"];
    let component = |e: &serde_json::Value| {
        let user = e["user"]["username"].as_str().unwrap_or_default();
        components.contains(&user) || user.starts_with("system:serviceaccount:kube-system:")
    };
    assert!(!events.iter().any(component), "no component's request is audited");

    // Secrets are encrypted at rest with the key up made (readable by root only), a ConfigMap is not.
    let encryption_config = up.dir.join("data/encryption-config.yaml");
    let made = std::fs::read_to_string(&encryption_config).expect("up's encryption configuration");
    assert!(made.contains("kind: EncryptionConfiguration") && made.contains("name: key1"), "{made}");
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&encryption_config).expect("its metadata").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", encryption_config.display());
    }
    up.kubectl_ok(&["create", "secret", "generic", "keep", "--from-literal=password=up-plaintext-value"]);
    let store_port = up.arg("--store-port");
    // The store serves on https with client certificates: etcdctl as up's line says.
    let pki = up.dir.join("data/pki");
    let etcdctl = e2e::etcdctl::Etcdctl::new(&[format!("https://127.0.0.1:{store_port}")])
        .expect("etcdctl")
        .with_tls(&pki.join("etcd/ca.crt"), Some((&pki.join("etcd/healthcheck-client.crt"), &pki.join("etcd/healthcheck-client.key"))));
    // As JSON, where the value is base64: ciphertext is not text.
    let out = etcdctl.run(&["get", "/registry/secrets/default/keep", "-w", "json"]).expect("etcdctl get");
    let value = serde_json::from_str::<serde_json::Value>(&out.stdout).ok().and_then(|v| v["kvs"][0]["value"].as_str().map(str::to_string));
    let raw = value.and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok()).unwrap_or_else(|| panic!("the Secret in the store: {}", out.describe()));
    assert!(raw.starts_with(b"k8s:enc:aescbc:v1:key1:") && !raw.windows(18).any(|w| w == b"up-plaintext-value"), "{}", String::from_utf8_lossy(&raw));

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
    // The same key: the Secret written before the restart reads.
    assert_eq!(std::fs::read_to_string(&encryption_config).expect("up's encryption configuration"), made, "the key is kept");
    assert_eq!(up.kubectl_ok(&["get", "secret", "keep", "-o", "jsonpath={.data.password}"]), "dXAtcGxhaW50ZXh0LXZhbHVl");
    up.wait_kubectl(&["get", "pod", "durable", "-o", "jsonpath={.status.phase}"], "durable Running again", Duration::from_secs(90), |s| s == "Running");
    up.wait_kubectl(&["logs", "durable"], "durable's logs after the restart", Duration::from_secs(30), |s| s.contains("alive"));
    up.stop();
}

/// The credentials the API server gave `pod` (the ServiceAccount admission plugin's
/// `kube-api-access-*` volume, filled by the node agent): the token, the cluster's CA (the
/// controller manager's `kube-root-ca.crt`) and the namespace, as the pod reads them; every
/// kubectl authenticates with the token as the pod's service account, bound to the pod. A pod
/// that names a missing service account is refused. Returns the path of a kubeconfig holding
/// the pod's token and CA.
/// The store is on https with client certificate authentication, as kubeadm runs etcd: the
/// etcdctl command `kubelab up` prints (the etcd CA, the healthcheck client's certificate) reads
/// the cluster's objects; without the client certificate etcdctl is refused.
fn check_store_tls(out: &str) {
    let line = out.lines().find(|l| l.starts_with("etcdctl --endpoints=")).unwrap_or_else(|| panic!("no etcdctl line in:\n{out}"));
    let command = line.split(" talks to the store").next().unwrap_or_default();
    let flag = |name: &str| {
        command.split_whitespace().find_map(|a| a.strip_prefix(&format!("--{name}="))).unwrap_or_else(|| panic!("no --{name} in {line}")).to_string()
    };
    let (ca, cert, key) = (PathBuf::from(flag("cacert")), PathBuf::from(flag("cert")), PathBuf::from(flag("key")));
    assert!(ca.ends_with("pki/etcd/ca.crt") && cert.ends_with("pki/etcd/healthcheck-client.crt"), "{line}");
    let ctl = e2e::etcdctl::Etcdctl::new(&[flag("endpoints")]).expect("etcdctl").with_tls(&ca, Some((&cert, &key)));
    let keys = ctl.run(&["get", "/registry/namespaces/default", "--keys-only"]).and_then(|o| o.ok()).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(keys.trim(), "/registry/namespaces/default", "etcdctl as kubelab up prints it");
    let refused = ctl.with_tls(&ca, None).run(&["get", "/registry/namespaces/default", "--keys-only"]).expect("etcdctl runs");
    assert!(!refused.success, "the store served a client without a certificate: {}", refused.describe());
}

fn check_service_account_token(up: &Up, pod: &str) -> String {
    const DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
    let read = |file: &str| up.kubectl_ok(&["exec", pod, "--", "cat", &format!("{DIR}/{file}")]);
    let (token, ca, namespace) = (read("token"), read("ca.crt"), read("namespace"));
    assert_eq!(namespace, "default");
    let cluster_ca = std::fs::read_to_string(up.dir.join("data/pki/ca.crt")).expect("the cluster's CA");
    assert_eq!(ca, cluster_ca, "the pod's ca.crt is the cluster's CA");
    let published = up.kubectl_ok(&["get", "configmap", "kube-root-ca.crt", "-o", "jsonpath={.data.ca\\.crt}"]);
    assert_eq!(published, cluster_ca, "kube-root-ca.crt holds the cluster's CA");
    let spec = up.kubectl_ok(&["get", "pod", pod, "-o", "json"]);
    let spec: serde_json::Value = serde_json::from_str(&spec).expect("pod json");
    let volume = spec["spec"]["volumes"].as_array().and_then(|v| v.iter().find(|v| v["name"].as_str().is_some_and(|n| n.starts_with("kube-api-access-"))));
    assert!(volume.is_some_and(|v| v["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3607), "the token volume: {spec}");
    // The token and the CA, as a client in the pod would use them, from here: HTTPS on the secure port.
    let secure_port = up.arg("--secure-port");
    let dir = up.dir.join("pod-credentials");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(dir.join("ca.crt"), &ca).expect("ca");
    let kubeconfig = dir.join("kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: up\n  cluster:\n    server: https://127.0.0.1:{secure_port}\n    certificate-authority: {}\nusers:\n- name: pod\n  user:\n    token: {token}\ncontexts:\n- name: pod\n  context: {{cluster: up, user: pod, namespace: default}}\ncurrent-context: pod\n",
        dir.join("ca.crt").display()
    );
    std::fs::write(&kubeconfig, config).expect("kubeconfig");
    let kubeconfig = kubeconfig.display().to_string();
    for minor in e2e::apiserver::KUBECTL_MINORS {
        let out = up.kubectl_v_ok(minor, &["--kubeconfig", &kubeconfig, "auth", "whoami", "-o", "json"], None);
        let review: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl 1.{minor} auth whoami: {e}: {out}"));
        let user = &review["status"]["userInfo"];
        assert_eq!(user["username"], "system:serviceaccount:default:default", "kubectl 1.{minor}: {out}");
        assert_eq!(user["extra"]["authentication.kubernetes.io/pod-name"], serde_json::json!([pod]), "kubectl 1.{minor}: {out}");
        // A service account may do only what RBAC gives it: nothing here.
        let (ok, _, err) = up.kubectl_v(minor, &["--kubeconfig", &kubeconfig, "get", "pods"], None);
        assert!(!ok && err.contains("Forbidden") && err.contains("system:serviceaccount:default:default"), "kubectl 1.{minor}: {err}");
    }
    check_pod_calls_the_api(up, pod, &dir.join("ca.crt"), &token);
    let (ok, out, err) = up.kubectl(&["run", "nobody", "--image=docker.io/library/busybox:1.36", "--overrides", r#"{"spec":{"serviceAccountName":"robot"}}"#], None);
    assert!(!ok && err.contains(r#"pods "nobody" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found"#), "{out}{err}");
    kubeconfig
}

/// A pod calls the API as in-cluster clients do: `kubernetes.default.svc` (the cluster DNS), the
/// `kubernetes` Service's ClusterIP (the proxy's rules to the advertise address, the pods'
/// bridge), its projected token, the server checked with its projected CA. busybox's TLS client
/// offers no signature scheme for an ECDSA certificate (the server answers its hello with
/// handshake_failure), so the call is curl's, run in the pod's network namespace: the pod's
/// route, the pod's files.
fn check_pod_calls_the_api(up: &Up, pod: &str, ca: &std::path::Path, token: &str) {
    let env = up.kubectl_ok(&["exec", pod, "--", "env"]);
    assert!(env.lines().any(|l| l == "KUBERNETES_SERVICE_HOST=10.96.0.1") && env.lines().any(|l| l == "KUBERNETES_SERVICE_PORT=443"), "{env}");
    let found = up.kubectl_ok(&["exec", pod, "--", "nslookup", "kubernetes.default.svc.cluster.local"]);
    assert!(found.contains("Address: 10.96.0.1"), "the pod's lookup of kubernetes.default.svc: {found}");
    // The same from the pod's network namespace with curl, checking the server with ca.crt.
    let id = up.kubectl_ok(&["get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0].containerID}"]);
    let id = id.trim().trim_start_matches("containerd://").to_string();
    let pid = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|cg| cg.contains(&id)))
        .unwrap_or_else(|| up.fail(&format!("no process of container {id}")));
    let curl = |args: &[&str]| {
        let out = Command::new("nsenter")
            .arg(format!("--net=/proc/{pid}/ns/net"))
            .args(["curl", "-sS", "--resolve", "kubernetes.default.svc:443:10.96.0.1", "--cacert"])
            .arg(ca)
            .args(args)
            .output()
            .expect("nsenter curl");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let bearer = format!("Authorization: Bearer {token}");
    let review = [
        "-H", &bearer, "-X", "POST", "-H", "Content-Type: application/json",
        "-d", r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#,
        "https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews",
    ];
    let (ok, out, err) = curl(&review);
    assert!(ok && out.contains(r#""username":"system:serviceaccount:default:default""#), "curl from the pod's network: {out}{err}");
    // Its service account may not list pods (403, Kubernetes' message); without the token the
    // caller is system:anonymous.
    let (ok, out, err) = curl(&["-H", &bearer, "https://kubernetes.default.svc/api/v1/namespaces/default/pods"]);
    assert!(ok && out.contains(r#"User \"system:serviceaccount:default:default\" cannot list resource \"pods\""#), "{out}{err}");
    let (ok, out, err) = curl(&["https://kubernetes.default.svc/api/v1/namespaces/default/pods"]);
    assert!(ok && out.contains(r#"User \"system:anonymous\" cannot list resource \"pods\""#), "{out}{err}");
    // A CA that did not sign the server's certificate: the handshake fails.
    let other = up.dir.join("pod-credentials/other-ca.crt");
    std::fs::write(&other, std::fs::read_to_string(up.dir.join("data/pki/etcd/ca.crt")).expect("etcd CA")).expect("write");
    let (ok, out, err) = curl(&["--cacert", other.to_str().expect("utf-8"), "https://kubernetes.default.svc/version"]);
    assert!(!ok && err.contains("certificate"), "curl with another CA: {out}{err}");
}

/// The node agent talks to the API server as its node (`pki/kubelet-<node>.conf`): the Node
/// authorizer gives it what its pods use — `pod`'s service account's token — and nothing else; a
/// secret no pod of it names is refused with the Node authorizer's reason, and NodeRestriction
/// keeps it from changing another node.
fn check_node_identity(up: &Up, pod: &str) {
    let node = "up-node";
    let kubeconfig = up.dir.join(format!("data/pki/kubelet-{node}.conf")).display().to_string();
    up.kubectl_ok(&["create", "secret", "generic", "unrelated", "--from-literal=k=v"]);
    for minor in e2e::apiserver::KUBECTL_MINORS {
        let kc = ["--kubeconfig", kubeconfig.as_str()];
        let out = up.kubectl_v_ok(minor, &[&kc[..], &["auth", "whoami", "-o", "json"]].concat(), None);
        let review: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl 1.{minor} auth whoami: {e}: {out}"));
        assert_eq!(review["status"]["userInfo"]["username"], format!("system:node:{node}"), "kubectl 1.{minor}: {out}");
        up.kubectl_v_ok(minor, &[&kc[..], &["get", "pod", pod]].concat(), None);
        let (ok, _, err) = up.kubectl_v(minor, &[&kc[..], &["get", "secret", "unrelated"]].concat(), None);
        assert!(!ok && err.contains("Forbidden") && err.contains(&format!("no relationship found between node '{node}' and this object")), "kubectl 1.{minor}: {err}");
        let (ok, _, err) = up.kubectl_v(minor, &[&kc[..], &["create", "token", "default"]].concat(), None);
        assert!(!ok && err.contains("is forbidden: node requested token not bound to a pod"), "kubectl 1.{minor}: {err}");
        let (ok, _, err) = up.kubectl_v(minor, &[&kc[..], &["label", "node", node, "node-restriction.kubernetes.io/x=y"]].concat(), None);
        assert!(!ok && err.contains("Forbidden") && err.contains("node-restriction.kubernetes.io/"), "kubectl 1.{minor}: {err}");
    }
    up.kubectl_ok(&["delete", "secret", "unrelated"]);
}

/// The node agent's own port, set up as kubeadm sets up a kubelet: HTTPS with its certificate of
/// the cluster CA; a caller without credentials is 401, a certificate of another CA fails the
/// handshake, `pod`'s service account token (reviewed by the API server) is refused exec with
/// the kubelet's 403, and the API server's client certificate (system:masters) is let in — as
/// it is when kubectl's exec, logs and `nodes/proxy` go through the API server.
fn check_kubelet_api(up: &Up, pod: &str, token_kubeconfig: &str) {
    let port = up.arg("--agent-port");
    let pki = up.dir.join("data/pki");
    let kubeconfig = std::fs::read_to_string(token_kubeconfig).expect("the pod's kubeconfig");
    let token = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("token: ")).expect("a token").to_string();
    let identity = |name: &str| {
        let pem = [std::fs::read(pki.join(format!("{name}.crt"))).expect("crt"), std::fs::read(pki.join(format!("{name}.key"))).expect("key")].concat();
        reqwest::Identity::from_pem(&pem).expect("identity")
    };
    let ca = reqwest::Certificate::from_pem(&std::fs::read(pki.join("ca.crt")).expect("ca")).expect("ca");
    let client = |id: Option<reqwest::Identity>| {
        let b = reqwest::Client::builder().add_root_certificate(ca.clone());
        match id {
            Some(id) => b.identity(id),
            None => b,
        }
        .build()
        .expect("client")
    };
    let exec = format!("https://127.0.0.1:{port}/exec/default/{pod}/{pod}?command=id&output=1");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let answer = |r: reqwest::Response| async move { (r.status().as_u16(), r.text().await.unwrap_or_default()) };
        let r = client(None).get(format!("https://127.0.0.1:{port}/pods")).send().await.expect("the agent answers over HTTPS");
        assert_eq!(answer(r).await, (401, "Unauthorized".to_string()));
        let r = client(None).post(&exec).send().await.expect("exec");
        assert_eq!(answer(r).await, (401, "Unauthorized".to_string()), "no exec without credentials");
        let r = client(None).post(&exec).bearer_auth(&token).send().await.expect("exec with a token");
        let forbidden = "Forbidden (user=system:serviceaccount:default:default, verb=create, resource=nodes, subresource=proxy)";
        assert_eq!(answer(r).await, (403, forbidden.to_string()));
        let r = client(None).get(format!("https://127.0.0.1:{port}/metrics")).bearer_auth("not-a-token").send().await.expect("metrics");
        assert_eq!(r.status().as_u16(), 401, "a token the API server does not take");
        let e = client(Some(identity("etcd/healthcheck-client"))).get(format!("https://127.0.0.1:{port}/pods")).send().await;
        assert!(e.is_err(), "a certificate of the etcd CA fails the handshake: {e:?}");
        let r = client(Some(identity("apiserver-kubelet-client"))).get(format!("https://127.0.0.1:{port}/pods")).send().await.expect("pods");
        let (status, body) = answer(r).await;
        assert!(status == 200 && body.contains(&format!("\"name\":\"{pod}\"")), "the API server's certificate: {status} {body}");
    });
    for minor in e2e::apiserver::KUBECTL_MINORS {
        let out = up.kubectl_v_ok(minor, &["get", "--raw", "/api/v1/nodes/up-node/proxy/healthz"], None);
        assert_eq!(out.trim(), "ok", "kubectl 1.{minor}: nodes/proxy through the API server's kubelet client");
    }
}

/// `kubelab trace <args>`'s output (the test fails if it does).
/// Without credentials a caller is `system:anonymous`: the default policy lets it read
/// `/version` and `/healthz` and nothing else (`curl -k`, as the issue's reader would try it).
fn check_anonymous(up: &Up) {
    let port = up.arg("--secure-port");
    let curl = |path: &str| -> (String, String) {
        let out = Command::new("curl").args(["-sk", "-w", "\n%{http_code}", &format!("https://127.0.0.1:{port}{path}")]).output().expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
        (code.to_string(), body.to_string())
    };
    let (code, body) = curl("/api/v1/pods");
    assert_eq!(code, "403", "anonymous GET /api/v1/pods: {body}");
    assert!(body.contains(r#"pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" at the cluster scope"#), "{body}");
    let (code, body) = curl("/version");
    assert!(code == "200" && body.contains("gitVersion"), "anonymous GET /version: {code} {body}");
}

/// `kubelab token create` makes a bootstrap token the API server takes
/// (`--enable-bootstrap-token-auth`) as `system:bootstrap:<id>`, with the kubeconfig a node
/// agent's `--bootstrap-kubeconfig` reads; deleted, it is refused.
fn check_bootstrap_token(up: &Up) {
    let conf = up.dir.join("bootstrap-kubelet.conf");
    let out = Command::new(&up.bin)
        .args(["token", "create", "--kubeconfig"])
        .arg(up.dir.join("data/pki/admin.conf"))
        .arg("--bootstrap-kubeconfig")
        .arg(&conf)
        .output()
        .expect("kubelab token create");
    assert!(out.status.success(), "kubelab token create: {}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let id = token.split('.').next().unwrap_or_default().to_string();
    let conf = conf.to_string_lossy().into_owned();
    for minor in e2e::apiserver::KUBECTL_MINORS {
        let out = up.kubectl_v_ok(minor, &["--kubeconfig", &conf, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"], None);
        assert!(out.starts_with(&format!("system:bootstrap:{id} ")) && out.contains("system:bootstrappers:kubeadm:default-node-token"), "kubectl 1.{minor} auth whoami with a bootstrap token: {out}");
    }
    let out = Command::new(&up.bin).args(["token", "delete", &id, "--kubeconfig"]).arg(up.dir.join("data/pki/admin.conf")).output().expect("kubelab token delete");
    assert!(out.status.success(), "kubelab token delete: {}", String::from_utf8_lossy(&out.stderr));
    up.wait_kubectl_fails(&["--kubeconfig", &conf, "auth", "whoami"], "the deleted bootstrap token refused", |e| e.contains("Unauthorized"));
}

fn kubelab_trace(up: &Up, args: &[&str]) -> String {
    let mut cmd = Command::new(&up.bin);
    cmd.arg("trace").args(args).env("KUBECONFIG", up.kubeconfig());
    let (st, out, err) = run_to_completion(cmd, None, Duration::from_secs(30)).expect("run kubelab trace");
    if !st.is_some_and(|s| s.success()) {
        up.fail(&format!("kubelab trace {args:?} failed:\n{out}\n{err}"));
    }
    out
}

/// `kubelab trace svc/<name>` of a Service with `ready` endpoints: kubectl's create of it, the
/// EndpointSlice controller's create of its slice, a watch event carrying it to the proxy, and
/// the node's proxy syncing its rules, in that order.
fn check_service_trace(up: &Up, name: &str, ready: usize) {
    let table = kubelab_trace(up, &[&format!("svc/{name}")]);
    assert!(table.starts_with(&format!("service default/{name} (uid ")), "{table}");
    let json: serde_json::Value = serde_json::from_str(&kubelab_trace(up, &[&format!("svc/{name}"), "--json"])).expect("--json is JSON");
    assert_eq!(json["kind"], "service", "{json}");
    let steps = json["steps"].as_array().cloned().unwrap_or_default();
    let at = |what: &str, f: &dyn Fn(&serde_json::Value) -> bool| {
        let start = steps.iter().find(|s| f(s)).and_then(|s| s["start"].as_str()).unwrap_or_else(|| panic!("no step {what} in the trace:\n{table}"));
        chrono::DateTime::parse_from_rfc3339(start).expect("a step's start")
    };
    let field = |s: &serde_json::Value, k: &str| s["fields"][k].as_str().unwrap_or_default().to_string();
    let created = at("kubectl creates the Service", &|s| s["name"] == "request" && field(s, "verb") == "POST" && field(s, "resource") == "services" && field(s, "caller").starts_with("kubectl"));
    let sliced = at("the controller creates its slice", &|s| {
        s["name"] == "request" && field(s, "verb") == "POST" && field(s, "resource") == "endpointslices" && field(s, "caller") == "kube-controller-manager"
    });
    at("a watch event to the proxy", &|s| s["name"] == "watch event sent" && field(s, "watcher") == "kube-proxy");
    let endpoints = format!("{ready} ready, 0 terminating");
    let synced = at("the proxy's sync with the endpoints", &|s| {
        s["component"] == "proxy" && s["name"] == "sync" && s["node"].as_str().is_some_and(|n| !n.is_empty()) && s["error"].is_null() && field(s, "endpoints") == endpoints
    });
    assert!(created <= sliced && sliced <= synced, "created {created}, sliced {sliced}, synced {synced}:\n{table}");
    let mermaid = kubelab_trace(up, &[&format!("svc/{name}"), "--mermaid"]);
    let diagram = e2e::mermaid::parse(&mermaid).unwrap_or_else(|e| panic!("the diagram does not parse: {e}\n{mermaid}"));
    assert!(diagram.unused_participants().is_empty(), "participants without a message: {:?}\n{mermaid}", diagram.unused_participants());
    for arrow in ["U->>API: request POST services", "CM->>API: request POST endpointslices", "API->>P: watch event sent ADDED kube-proxy", "P->>P: sync"] {
        assert!(mermaid.contains(arrow), "no {arrow:?} in\n{mermaid}");
    }
}

/// `kubelab trace` of the pod just run: every hop in order, none with a negative duration, all
/// within the time the test saw between submitting the pod and seeing it Running (the components
/// and the test share the machine's clock), the hops that follow one another adding up to no more
/// than that; its diagram parses and names every participant.
fn check_trace(up: &Up, submitted: chrono::DateTime<chrono::Utc>, running: chrono::DateTime<chrono::Utc>) {
    let trace = |args: &[&str]| kubelab_trace(up, args);
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

const BUSYBOX: &str = "docker.io/library/busybox:1.36";

/// The names of pods matching `selector`, their phases and whether each is being deleted, as
/// `name phase deleting` lines.
fn pods_of(up: &Up, selector: &str) -> Vec<(String, String, bool)> {
    let (_, out, _) = up.kubectl(&["get", "pods", "-l", selector, "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.metadata.deletionTimestamp}{\"\\n\"}{end}"], None);
    out.lines().filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 2).then(|| (f[0].to_string(), f[1].to_string(), f.len() > 2))
    }).collect()
}

/// `n` Running pods matching `selector`, none being deleted.
fn wait_running_pods(up: &Up, selector: &str, n: usize, what: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pods = pods_of(up, selector);
        if pods.len() == n && pods.iter().all(|(_, phase, deleting)| phase == "Running" && !deleting) {
            return pods.into_iter().map(|(n, _, _)| n).collect();
        }
        if Instant::now() > deadline {
            up.fail(&format!("{what}: {n} Running pods of {selector} not within 120 s: {pods:?}"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn up_runs_workloads_with_every_kubectl() {
    let mut up = Up::new(42);
    up.start();
    up.wait_ready();
    up.wait_kubectl(&["get", "nodes"], "node Ready", Duration::from_secs(30), |s| s.contains("up-node") && s.contains(" Ready"));

    // A CronJob first: it fires at the next minute, checked at the end.
    up.kubectl_v_ok(31, &["create", "cronjob", "tick", &format!("--image={BUSYBOX}"), "--schedule=* * * * *", "--", "sh", "-c", "echo tick"], None);

    // Deployment: create (1.27), rollout status, scale (1.28), a new template (1.29), undo
    // (1.30), restart (1.31); a deleted pod is replaced.
    up.kubectl_v_ok(27, &["create", "deployment", "web", &format!("--image={BUSYBOX}"), "--replicas=2", "--", "sleep", "3600"], None);
    up.kubectl_v_ok(27, &["rollout", "status", "deployment/web", "--timeout=120s"], None);
    up.kubectl_v_ok(28, &["scale", "deployment/web", "--replicas=3"], None);
    let first = wait_running_pods(&up, "app=web", 3, "scaled to 3");
    up.kubectl_v_ok(29, &["set", "env", "deployment/web", "COLOR=blue"], None);
    up.kubectl_v_ok(29, &["rollout", "status", "deployment/web", "--timeout=120s"], None);
    let blue = wait_running_pods(&up, "app=web", 3, "the blue template");
    assert!(blue.iter().all(|p| !first.contains(p)), "every pod replaced by the new template: {first:?} → {blue:?}");
    let env = up.kubectl_ok(&["get", "pod", &blue[0], "-o", "jsonpath={.spec.containers[0].env}"]);
    assert!(env.contains("COLOR") && env.contains("blue"), "{env}");
    let history = up.kubectl_v_ok(30, &["rollout", "history", "deployment/web"], None);
    assert!(history.contains('1') && history.contains('2'), "two revisions:\n{history}");
    up.kubectl_v_ok(30, &["rollout", "undo", "deployment/web"], None);
    up.kubectl_v_ok(30, &["rollout", "status", "deployment/web", "--timeout=120s"], None);
    let undone = wait_running_pods(&up, "app=web", 3, "undone");
    let env = up.kubectl_ok(&["get", "pod", &undone[0], "-o", "jsonpath={.spec.containers[0].env}"]);
    assert!(!env.contains("COLOR"), "undo went back to the first template: {env}");
    up.kubectl_v_ok(31, &["rollout", "restart", "deployment/web"], None);
    up.kubectl_v_ok(31, &["rollout", "status", "deployment/web", "--timeout=120s"], None);
    let restarted = wait_running_pods(&up, "app=web", 3, "restarted");
    assert!(restarted.iter().all(|p| !undone.contains(p)), "restart replaced every pod: {undone:?} → {restarted:?}");
    up.kubectl_v_ok(32, &["delete", "pod", &restarted[0], "--wait=false"], None);
    let healed = wait_running_pods(&up, "app=web", 3, "healed");
    assert!(!healed.contains(&restarted[0]), "a new pod replaced the deleted one: {healed:?}");

    // A drain that a PodDisruptionBudget refuses (1.33): all three must stay.
    up.kubectl_v_ok(33, &["create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=3"], None);
    up.wait_kubectl(&["get", "pdb", "web", "-o", "jsonpath={.status.currentHealthy}"], "the budget observed", Duration::from_secs(30), |s| s == "3");
    let (ok, out, err) = up.kubectl_v(33, &["drain", "up-node", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=8s"], None);
    assert!(!ok && (err.contains("disruption budget") || out.contains("disruption budget")), "the drain is refused by the budget:\n{out}\n{err}");
    up.kubectl_v_ok(33, &["uncordon", "up-node"], None);
    assert_eq!(wait_running_pods(&up, "app=web", 3, "after the refused drain").len(), 3);
    up.kubectl_ok(&["delete", "pdb", "web"]);

    // Deletes: orphaning keeps the ReplicaSet and its pods, without an owner; cascading removes all.
    let rs = up.kubectl_ok(&["get", "rs", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}"]);
    up.kubectl_v_ok(28, &["delete", "deployment", "web", "--cascade=orphan"], None);
    let owners = up.wait_kubectl(&["get", "rs", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.metadata.name}={.metadata.ownerReferences}{\"\\n\"}{end}"], "orphaned ReplicaSets", Duration::from_secs(30), |s| !s.is_empty() && s.lines().all(|l| l.ends_with('=')));
    assert_eq!(owners.lines().count(), rs.split_whitespace().count(), "every ReplicaSet kept:\n{owners}");
    assert_eq!(wait_running_pods(&up, "app=web", 3, "orphaned pods").len(), 3);
    for r in rs.split_whitespace() {
        up.kubectl_v_ok(27, &["delete", "rs", r, "--cascade=background", "--wait=false"], None);
    }
    up.wait_kubectl(&["get", "pods", "-l", "app=web", "-o", "name"], "the pods collected", Duration::from_secs(90), |s| s.trim().is_empty());

    // Jobs: one completes, one exceeds its backoff limit (1.30).
    up.kubectl_v_ok(30, &["create", "job", "ok", &format!("--image={BUSYBOX}"), "--", "sh", "-c", "echo done"], None);
    up.kubectl_v_ok(30, &["wait", "--for=condition=complete", "job/ok", "--timeout=90s"], None);
    let failing = format!("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: fails\nspec:\n  backoffLimit: 1\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: {BUSYBOX}\n        command: [sh, -c, 'exit 3']\n");
    up.kubectl_v_ok(30, &["apply", "-f", "-"], Some(&failing));
    up.kubectl_v_ok(30, &["wait", "--for=condition=failed", "job/fails", "--timeout=120s"], None);
    let reason = up.kubectl_ok(&["get", "job", "fails", "-o", "jsonpath={.status.conditions[?(@.type==\"Failed\")].reason}"]);
    assert_eq!(reason, "BackoffLimitExceeded");

    // A DaemonSet: one pod on the node (1.32).
    let ds = format!("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  selector:\n    matchLabels: {{app: agent}}\n  template:\n    metadata:\n      labels: {{app: agent}}\n    spec:\n      containers:\n      - name: main\n        image: {BUSYBOX}\n        command: [sleep, '3600']\n");
    up.kubectl_v_ok(32, &["apply", "-f", "-"], Some(&ds));
    up.kubectl_v_ok(32, &["rollout", "status", "daemonset/agent", "--timeout=120s"], None);
    wait_running_pods(&up, "app=agent", 1, "the DaemonSet's pod");

    // A StatefulSet: db-0, db-1, db-2, each created once the one before is Ready (1.32).
    let sts = format!("apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  serviceName: db\n  replicas: 3\n  selector:\n    matchLabels: {{app: db}}\n  template:\n    metadata:\n      labels: {{app: db}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: {BUSYBOX}\n        command: [sleep, '3600']\n");
    up.kubectl_v_ok(32, &["apply", "-f", "-"], Some(&sts));
    up.kubectl_v_ok(32, &["rollout", "status", "statefulset/db", "--timeout=180s"], None);
    let mut names = wait_running_pods(&up, "app=db", 3, "the StatefulSet's pods");
    names.sort();
    assert_eq!(names, ["db-0", "db-1", "db-2"]);
    let times = |jsonpath: &str| -> Vec<String> { names.iter().map(|n| up.kubectl_ok(&["get", "pod", n, "-o", &format!("jsonpath={jsonpath}")])).collect() };
    let created = times("{.metadata.creationTimestamp}");
    let ready = times("{.status.conditions[?(@.type==\"Ready\")].lastTransitionTime}");
    assert!(created[1] >= ready[0] && created[2] >= ready[1], "each ordinal created after the one before was Ready: created {created:?}, ready {ready:?}");

    // The CronJob fired, and its Job ran to completion.
    let job = up.wait_kubectl(&["get", "jobs", "-o", "jsonpath={range .items[*]}{.metadata.name} {.metadata.ownerReferences[0].name} {.status.succeeded}{\"\\n\"}{end}"], "a Job of the CronJob succeeded", Duration::from_secs(120), |s| s.lines().any(|l| l.starts_with("tick-") && l.ends_with(" tick 1")));
    let last = up.kubectl_v_ok(31, &["get", "cronjob", "tick", "-o", "jsonpath={.status.lastScheduleTime}"], None);
    assert!(!last.is_empty(), "the CronJob records when it last fired:\n{job}");
    up.stop();
}

/// Services on `kubelab up`, with real traffic from a pod (busybox `wget`, bounded by `timeout`:
/// this busybox's own `wget -T` crashes), through every kubectl 1.27–1.33: the
/// cluster DNS answers the Service names (and forwards nothing it should not), the proxy turns a
/// ClusterIP and a NodePort into the Service's pods (both replicas answer), containers get the
/// Services' environment variables, a Service without endpoints refuses connections, and an
/// address of the Service range that no Service has is refused on the node instead of leaving it.
#[test]
fn up_serves_services_through_dns_and_the_proxy() {
    services_through_dns_and_the_proxy(43, "iptables");
}

/// The same with `kubelab up --proxy-mode nftables`: the proxy's rules are the `ip kube-proxy`
/// nftables table, written over netlink.
#[test]
fn up_serves_services_through_dns_and_the_nftables_proxy() {
    services_through_dns_and_the_proxy(44, "nftables");
}

fn services_through_dns_and_the_proxy(octet: u8, proxy_mode: &str) {
    let mut up = Up::new(octet);
    up.args.extend(["--proxy-mode".to_string(), proxy_mode.to_string()]);
    up.start();
    up.wait_ready();
    up.wait_kubectl(&["get", "nodes"], "node Ready", Duration::from_secs(30), |s| s.contains("up-node") && s.contains(" Ready"));
    let out = up.stdout();
    assert!(out.contains(&format!("cluster DNS on 10.244.{octet}.1:53")), "progress lines:\n{out}");
    let where_ = if proxy_mode == "nftables" { "proxy: Services in the ip kube-proxy nftables table" } else { "proxy: Services in iptables" };
    assert!(out.contains(where_), "progress lines:\n{out}");
    let dns_svc = up.kubectl_ok(&["get", "service", "kube-dns", "-n", "kube-system", "-o", "jsonpath={.spec.clusterIP}"]);
    assert_eq!(dns_svc, "10.96.0.10");

    // Two web pods answering with their names; a client pod made after the Services.
    let web = "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www";
    up.kubectl_v_ok(33, &["create", "deployment", "web", &format!("--image={BUSYBOX}"), "--replicas=2", "--port=8080", "--", "sh", "-c", web], None);
    up.kubectl_v_ok(33, &["rollout", "status", "deployment/web", "--timeout=120s"], None);
    let pods = wait_running_pods(&up, "app=web", 2, "web pods");
    for minor in 27..=33 {
        let name = format!("web-{minor}");
        up.kubectl_v_ok(minor, &["expose", "deployment/web", "--name", &name, "--port=80", "--target-port=8080"], None);
    }
    up.kubectl_v_ok(30, &["expose", "deployment/web", "--name", "web-np", "--type=NodePort", "--port=80", "--target-port=8080"], None);
    up.kubectl_v_ok(31, &["create", "service", "clusterip", "empty", "--tcp=80:8080"], None);
    up.kubectl_ok(&["run", "client", &format!("--image={BUSYBOX}"), "--restart=Never", "--", "sleep", "3600"]);
    up.wait_kubectl(&["get", "pod", "client", "-o", "jsonpath={.status.phase}"], "client Running", Duration::from_secs(60), |s| s == "Running");

    // The pod's resolv.conf names the cluster DNS; names resolve through the kube-dns Service.
    let resolv = up.kubectl_ok(&["exec", "client", "--", "cat", "/etc/resolv.conf"]);
    assert!(resolv.contains("nameserver 10.96.0.10") && resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"), "{resolv}");
    let ip27 = up.kubectl_ok(&["get", "service", "web-27", "-o", "jsonpath={.spec.clusterIP}"]);
    // The server itself, on the pods' bridge; then through its Service, as pods ask.
    up.wait_kubectl(&["exec", "client", "--", "nslookup", "web-27.default.svc.cluster.local", &format!("10.244.{octet}.1")], "the DNS server answers", Duration::from_secs(30), |s| s.contains(&ip27));
    up.wait_kubectl(&["exec", "client", "--", "nslookup", "web-27.default.svc.cluster.local"], "web-27 resolves", Duration::from_secs(30), |s| s.contains(&ip27));

    // Each Service answers by its short name, and both pods answer behind it.
    for minor in 27..=33 {
        let name = format!("web-{minor}");
        let mut seen = std::collections::BTreeSet::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while seen.len() < 2 {
            let (ok, out, err) = up.kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", &format!("http://{name}/")], None);
            if ok {
                seen.insert(out.trim().to_string());
            }
            if Instant::now() > deadline {
                up.fail(&format!("{name}: only {seen:?} answered within 60 s (pods {pods:?}); last: {out}{err}"));
            }
        }
        assert!(seen.iter().all(|s| pods.contains(s)), "{name} answered by {seen:?}, the pods are {pods:?}");
    }

    // Its journey, as `kubelab trace svc/` shows it.
    check_service_trace(&up, "web-27", 2);

    // NodePort: the node's address (its bridge, here) and the allocated port.
    let np = up.kubectl_ok(&["get", "service", "web-np", "-o", "jsonpath={.spec.ports[0].nodePort}"]);
    up.wait_kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", &format!("http://10.244.{octet}.1:{np}/")], "the NodePort answers", Duration::from_secs(30), |s| pods.contains(&s.trim().to_string()));

    // And from the host, as a user's browser would reach it.
    let from_host = http_get(&format!("10.244.{octet}.1:{np}"));
    assert!(pods.iter().any(|p| from_host.contains(p.as_str())), "NodePort from the host: {from_host}");
    if proxy_mode == "nftables" {
        // The node port is an element of the table's service-nodeports map (read with Debian's nft).
        let out = std::process::Command::new("nft").args(["list", "map", "ip", "kube-proxy", "service-nodeports"]).output().expect("nft");
        let map = String::from_utf8_lossy(&out.stdout);
        assert!(map.contains(&format!("tcp . {np} : goto external-")), "{map}{}", String::from_utf8_lossy(&out.stderr));
    }

    // A pod failing its readiness probe leaves the slice (and the Service refuses), then returns.
    let flip = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"flip","labels":{"app":"flip"}},"spec":{"terminationGracePeriodSeconds":1,
        "containers":[{"name":"main","image":"docker.io/library/busybox:1.36","command":["sh","-c","mkdir -p /www && hostname > /www/index.html && touch /tmp/ready && exec httpd -f -p 8080 -h /www"],
        "readinessProbe":{"exec":{"command":["cat","/tmp/ready"]},"periodSeconds":1,"failureThreshold":1}}]}}"#;
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(flip));
    assert!(ok, "{out}{err}");
    up.kubectl_v_ok(32, &["expose", "pod/flip", "--port=80", "--target-port=8080"], None);
    let slice_ready = |what: &str, want: &str| {
        up.wait_kubectl(&["get", "endpointslices", "-l", "kubernetes.io/service-name=flip", "-o", "jsonpath={range .items[*].endpoints[*]}{.conditions.ready}{end}"], what, Duration::from_secs(30), |s| s == want);
    };
    slice_ready("flip ready in its slice", "true");
    up.wait_kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://flip/"], "flip answers", Duration::from_secs(30), |s| s.trim() == "flip");
    up.kubectl_ok(&["exec", "flip", "--", "rm", "/tmp/ready"]);
    slice_ready("flip not ready in its slice", "false");
    wait_refused(&up, "http://flip/", "flip not ready");
    up.kubectl_ok(&["exec", "flip", "--", "touch", "/tmp/ready"]);
    slice_ready("flip ready again", "true");
    up.wait_kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://flip/"], "flip answers again", Duration::from_secs(30), |s| s.trim() == "flip");

    // A terminating pod stays in the slice as terminating (serving, not ready) while its preStop
    // hook runs, and leaves it when it is gone.
    let slow = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"slow","labels":{"app":"slow"}},"spec":{"terminationGracePeriodSeconds":30,
        "containers":[{"name":"main","image":"docker.io/library/busybox:1.36","command":["sh","-c","mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www"],
        "lifecycle":{"preStop":{"exec":{"command":["sleep","8"]}}}}]}}"#;
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(slow));
    assert!(ok, "{out}{err}");
    up.wait_kubectl(&["get", "pod", "slow", "-o", "jsonpath={.status.phase}"], "slow Running", Duration::from_secs(60), |s| s == "Running");
    up.kubectl_v_ok(29, &["expose", "pod/slow", "--port=80", "--target-port=8080"], None);
    let conds = "jsonpath={range .items[*].endpoints[*]}{.conditions.ready}/{.conditions.serving}/{.conditions.terminating}{end}";
    up.wait_kubectl(&["get", "endpointslices", "-l", "kubernetes.io/service-name=slow", "-o", conds], "slow ready", Duration::from_secs(30), |s| s == "true/true/false");
    up.kubectl_ok(&["delete", "pod", "slow", "--wait=false"]);
    up.wait_kubectl(&["get", "endpointslices", "-l", "kubernetes.io/service-name=slow", "-o", conds], "slow terminating while its preStop runs", Duration::from_secs(8), |s| s == "false/true/true");
    up.wait_kubectl(&["get", "endpointslices", "-l", "kubernetes.io/service-name=slow", "-o", conds], "slow gone from its slice", Duration::from_secs(60), |s| s.is_empty());

    // The client was made after the Services: their variables are in its environment.
    let env = up.kubectl_ok(&["exec", "client", "--", "env"]);
    assert!(env.contains(&format!("WEB_27_SERVICE_HOST={ip27}")) && env.contains(&format!("WEB_27_PORT=tcp://{ip27}:80")), "{env}");
    assert!(env.contains("KUBERNETES_SERVICE_HOST=10.96.0.1") && env.contains("KUBERNETES_SERVICE_PORT=443"), "{env}");

    // Scaled to nothing, the Services' slices empty and they refuse.
    up.kubectl_v_ok(28, &["scale", "deployment/web", "--replicas=0"], None);
    up.wait_kubectl(&["get", "endpointslices", "-l", "kubernetes.io/service-name=web-27", "-o", "jsonpath={range .items[*]}{.endpoints}{end}"], "web-27's slice empty", Duration::from_secs(60), |s| s.is_empty() || s == "[]");
    wait_refused(&up, "http://web-27/", "web-27 scaled to 0");

    // Refused: a Service without endpoints, and an address no Service has.
    let (ok, _, err) = up.kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://empty/"], None);
    assert!(!ok && err.contains("refused"), "a Service without endpoints refuses: {err}");
    let (ok, _, err) = up.kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", "http://10.111.222.33/"], None);
    assert!(!ok && err.contains("refused"), "an unused Service address is refused on the node: {err}");
    up.stop();
}

/// Wait until a `wget` of `url` from the client pod is refused (the proxy's rules follow the
/// slices within a sync).
fn wait_refused(up: &Up, url: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out, err) = up.kubectl(&["exec", "client", "--", "timeout", "5", "wget", "-q", "-O", "-", url], None);
        if !ok && err.contains("refused") {
            return;
        }
        if Instant::now() > deadline {
            up.fail(&format!("{what}: {url} not refused within 30 s: {out}{err}"));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// An HTTP/1.0 GET of `/` at `addr`, from the test (the host), with a 5 s limit: the whole answer.
fn http_get(addr: &str) -> String {
    use std::io::{Read, Write};
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = (|| -> std::io::Result<String> {
            let mut c = std::net::TcpStream::connect_timeout(&addr.parse().expect("address"), Duration::from_secs(5))?;
            c.set_read_timeout(Some(Duration::from_secs(5)))?;
            c.write_all(b"GET / HTTP/1.0\r\n\r\n")?;
            let mut out = String::new();
            c.read_to_string(&mut out)?;
            Ok(out)
        })();
        match r {
            Ok(s) => return s,
            Err(e) if Instant::now() > deadline => panic!("GET http://{addr}/: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// The exercise of `docs/labs/09-follow-a-request.md`, as the page tells a reader to do it, on
/// `kubelab up` (the lab's API servers do not authenticate yet): a new user's request refused by
/// RBAC, allowed after a RoleBinding, refused and then changed by admission, and each decision
/// found again in `kubelab trace` and the audit log. Its outputs are printed for the page.
#[test]
fn lab_09_follow_a_request() {
    let mut up = Up::new(92);
    up.start();
    up.wait_ready();
    let pki = up.dir.join("data/pki");
    let secure_port = up.arg("--secure-port");
    let show = |what: &str, out: &str| eprintln!("[lab 09] {what}:\n{out}");

    // 1. A user: a client certificate of the cluster's CA, CN=jane, O=developers.
    let out = Command::new(&up.bin)
        .args(["certs", "kubeconfig", "--cert-dir", pki.to_str().expect("utf-8"), "--client-name", "jane", "--org", "developers", "--server", &format!("https://127.0.0.1:{secure_port}")])
        .output()
        .expect("kubelab certs kubeconfig");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jane = up.dir.join("jane.conf");
    std::fs::write(&jane, &out.stdout).expect("jane.conf");
    let jane = jane.to_str().expect("utf-8").to_string();
    let whoami = up.kubectl_ok(&["--kubeconfig", &jane, "auth", "whoami"]);
    show("kubectl --kubeconfig jane.conf auth whoami", &whoami);
    assert!(whoami.contains("jane") && whoami.contains("[developers system:authenticated]"), "{whoami}");

    let out = Command::new("curl").args(["-k", &format!("https://127.0.0.1:{secure_port}/api/v1/namespaces/default/pods")]).output().expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    show("curl -k …/api/v1/namespaces/default/pods", &body);
    let message = r#"pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""#;
    assert!(body.contains(message) && body.contains(r#""code":403"#), "{body}");

    // 2. Authorization: nothing is granted to jane yet.
    let run = ["--kubeconfig", jane.as_str(), "run", "web", "--image=docker.io/library/busybox:1.36", "--", "sleep", "3600"];
    let (ok, out, err) = up.kubectl(&run, None);
    show("jane's kubectl run web", &format!("{out}{err}"));
    assert!(!ok && err.contains(r#"pods is forbidden: User "jane" cannot create resource "pods" in API group "" in the namespace "default""#), "{out}{err}");
    let (_, can, _) = up.kubectl(&["auth", "can-i", "create", "pods", "--as", "jane"], None);
    assert_eq!(can.trim(), "no");
    up.kubectl_ok(&["create", "rolebinding", "jane-edit", "--clusterrole=edit", "--user=jane", "--namespace=default"]);
    up.wait_kubectl(&["auth", "can-i", "create", "pods", "--as", "jane"], "jane may create pods", Duration::from_secs(10), |s| s.trim() == "yes");

    // 3. Admission: a service account that does not exist is refused by the ServiceAccount
    //    plugin; the pod that goes through comes out changed by the plugins.
    let (ok, out, err) = up.kubectl(&["--kubeconfig", &jane, "run", "web", "--image=docker.io/library/busybox:1.36", "--overrides", r#"{"spec":{"serviceAccountName":"robot"}}"#, "--", "sleep", "3600"], None);
    show("jane's kubectl run web with serviceAccountName robot", &format!("{out}{err}"));
    assert!(!ok && err.contains(r#"pods "web" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found"#), "{out}{err}");
    let created = up.kubectl_ok(&run);
    assert_eq!(created.trim(), "pod/web created");
    up.wait_kubectl(&["get", "pod", "web"], "web Running", Duration::from_secs(60), |s| s.contains("Running"));
    let admitted = up.kubectl_ok(&["get", "pod", "web", "-o", "jsonpath={.spec.serviceAccountName} {.spec.priority} {.spec.tolerations[*].key} {.spec.volumes[0].name}"]);
    show("what admission added", &admitted);
    assert!(admitted.starts_with("default 0 node.kubernetes.io/not-ready node.kubernetes.io/unreachable kube-api-access-"), "{admitted}");

    // 4. kubelab trace: who created it, and what let them.
    let table = kubelab_trace(&up, &["pod/web"]);
    // The page's `grep -E 'STEP|authentication|authorization' | head -3`: the header and jane's two.
    let steps: String = table
        .lines()
        .filter(|l| l.contains("STEP") || l.contains(" authentication ") || l.contains(" authorization "))
        .take(3)
        .map(|l| format!("{l}\n"))
        .collect();
    show("kubelab trace pod/web | grep -E 'STEP|authentication|authorization' | head -3", &steps);
    assert!(steps.contains("user=jane") && steps.contains("groups=developers,system:authenticated"), "{table}");
    assert!(steps.contains(r#"allowed_by=RBAC: allowed by RoleBinding "jane-edit/default" of ClusterRole "edit" to User "jane""#), "{table}");

    // 5. The audit log: the refused create and the allowed one.
    let audit = std::fs::read_to_string(up.dir.join("data/logs/audit.log")).expect("the audit log");
    let creates: Vec<serde_json::Value> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "pods" && e["user"]["username"] == "jane")
        .collect();
    let codes: Vec<i64> = creates.iter().filter_map(|e| e["responseStatus"]["code"].as_i64()).collect();
    assert_eq!(codes, [403, 403, 201], "jane's creates in the audit log:\n{audit}");
    let (refused, allowed) = (&creates[0], &creates[2]);
    show("the refused create's record", &serde_json::to_string_pretty(refused).unwrap_or_default());
    show("the allowed create's record", &serde_json::to_string_pretty(allowed).unwrap_or_default());
    assert_eq!(refused["annotations"]["authorization.k8s.io/decision"], "forbid");
    assert_eq!(creates[1]["annotations"]["authorization.k8s.io/decision"], "allow", "admission refused the second, after authorization allowed it");
    assert_eq!(allowed["annotations"]["authorization.k8s.io/decision"], "allow");
    assert_eq!(allowed["annotations"]["authorization.k8s.io/reason"], r#"RBAC: allowed by RoleBinding "jane-edit/default" of ClusterRole "edit" to User "jane""#);
    assert_eq!((allowed["level"].as_str(), allowed["requestObject"]["metadata"]["name"].as_str()), (Some("Request"), Some("web")));
    assert_eq!(allowed["user"]["groups"], serde_json::json!(["developers", "system:authenticated"]));

    // Clean up, as the page does.
    up.kubectl_ok(&["delete", "pod", "web", "--grace-period=1"]);
    up.kubectl_ok(&["delete", "rolebinding", "jane-edit"]);
}

/// `jsonpath` of one object, through kubectl.
fn jsonpath(up: &Up, what: &[&str], path: &str) -> String {
    let mut args: Vec<&str> = vec!["get"];
    args.extend_from_slice(what);
    let p = format!("jsonpath={path}");
    args.extend_from_slice(&["-o", &p]);
    let (_, out, _) = up.kubectl(&args, None);
    out
}

/// Volumes through CSI, on `kubelab up`'s own driver: the default class, a claim that waits for
/// its first consumer, provisioned for the node the scheduler chose, attached through a
/// VolumeAttachment, staged and published by the node agent (its trace shows the CSI hops); data
/// written by one pod is read by the next; the claim's deletion deletes the volume; a Retain
/// class keeps a released volume; a pod naming a missing claim is not scheduled; every kubectl
/// prints claims and volumes.
#[test]
fn up_provisions_claims_through_csi() {
    let mut up = Up::new(93);
    up.start();
    up.wait_ready();
    let driver = "hostpath.csi.kubelab.io";
    let state = up.dir.join("data/csi-hostpath/volumes");

    // 1. The add-on: the driver, the default class, the node's CSINode naming the driver.
    let classes = up.kubectl_ok(&["get", "storageclass"]);
    assert!(classes.contains("standard (default)") && classes.contains(driver) && classes.contains("WaitForFirstConsumer"), "{classes}");
    up.kubectl_ok(&["get", "csidriver", driver]);
    up.wait_kubectl(&["get", "csinode", "up-node", "-o", "jsonpath={.spec.drivers[*].name} {.spec.drivers[*].nodeID}"], "the driver registered on the node", Duration::from_secs(60), |s| s.trim() == format!("{driver} up-node"));

    // 2. A claim with no class gets the default one, and waits for its first consumer.
    let claim = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 64Mi\n";
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(claim));
    assert!(ok, "{out}{err}");
    assert_eq!(jsonpath(&up, &["pvc", "data"], "{.spec.storageClassName}"), "standard", "DefaultStorageClass names the default");
    up.wait_kubectl(&["get", "events", "--field-selector", "involvedObject.name=data"], "the binder's WaitForFirstConsumer event", Duration::from_secs(30), |s| s.contains("WaitForFirstConsumer"));
    assert_eq!(jsonpath(&up, &["pvc", "data"], "{.status.phase}"), "Pending");

    // 3. Its first consumer writes to it.
    let pod = |name: &str, script: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  restartPolicy: Never\n  containers:\n  - name: c\n    image: {BUSYBOX}\n    command: [sh, -c, '{script}']\n    volumeMounts:\n    - {{name: data, mountPath: /data}}\n  volumes:\n  - name: data\n    persistentVolumeClaim: {{claimName: data}}\n"
        )
    };
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(&pod("writer", "echo kept by the volume > /data/file && sleep 3600")));
    assert!(ok, "{out}{err}");
    up.wait_kubectl(&["get", "pod", "writer"], "writer Running", Duration::from_secs(90), |s| s.contains("Running"));
    assert_eq!(jsonpath(&up, &["pvc", "data"], "{.status.phase}"), "Bound");
    let uid = jsonpath(&up, &["pvc", "data"], "{.metadata.uid}");
    let pv = jsonpath(&up, &["pvc", "data"], "{.spec.volumeName}");
    assert_eq!(pv, format!("pvc-{uid}"), "the external provisioner names the volume after the claim");
    assert_eq!(jsonpath(&up, &["pvc", "data"], "{.metadata.annotations.volume\\.kubernetes\\.io/selected-node}"), "up-node");
    let spec = jsonpath(&up, &["pv", &pv], "{.spec.csi.driver} {.spec.claimRef.name} {.spec.persistentVolumeReclaimPolicy} {.status.phase} {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}");
    assert_eq!(spec, format!("{driver} data Delete Bound up-node"));
    let attachments = jsonpath(&up, &["volumeattachments"], "{range .items[*]}{.spec.source.persistentVolumeName} {.spec.nodeName} {.status.attached}{\"\\n\"}{end}");
    assert!(attachments.lines().any(|l| l == format!("{pv} up-node true")), "{attachments}");
    let on_node = std::fs::read_dir(&state).map(|d| d.count()).unwrap_or(0);
    assert_eq!(on_node, 1, "one volume in the driver's directory {}", state.display());
    up.wait_kubectl(&["exec", "writer", "--", "cat", "/data/file"], "the file through the mount", Duration::from_secs(30), |s| s.contains("kept by the volume"));

    // 4. The trace of the pod: the node agent's calls to the CSI driver, before the sandbox.
    let json: serde_json::Value = serde_json::from_str(&kubelab_trace(&up, &["pod/writer", "--json"])).expect("--json is JSON");
    let names: Vec<String> = json["steps"].as_array().cloned().unwrap_or_default().iter().map(|s| format!("{} {}", s["component"].as_str().unwrap_or(""), s["name"].as_str().unwrap_or(""))).collect();
    let at = |w: &str| names.iter().position(|n| n == w).unwrap_or_else(|| up.fail(&format!("no {w} in the trace: {names:?}")));
    assert!(at("csi NodeStageVolume") < at("csi NodePublishVolume") && at("csi NodePublishVolume") < at("cri RunPodSandbox"), "{names:?}");
    let mermaid = kubelab_trace(&up, &["pod/writer", "--mermaid"]);
    let d = e2e::mermaid::parse(&mermaid).unwrap_or_else(|e| up.fail(&format!("the diagram does not parse: {e}\n{mermaid}")));
    assert!(d.unused_participants().is_empty(), "{mermaid}");
    // Each call names the volume as CSI does, by its handle (the driver's id).
    let handle = jsonpath(&up, &["pv", &pv], "{.spec.csi.volumeHandle}");
    assert!(mermaid.contains("participant CSI as CSI Driver (kubelab csi-hostpath)") && mermaid.contains(&format!("K->>CSI: NodePublishVolume {handle}")), "{mermaid}");

    // 5. Every kubectl prints the claim and the volume as Kubernetes does.
    for minor in 27..=33 {
        let out = up.kubectl_v_ok(minor, &["get", "pvc", "data"], None);
        let header: Vec<&str> = out.lines().next().unwrap_or("").split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(&header[..6], ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS"], "kubectl 1.{minor}: {out}");
        assert!(out.contains("Bound") && out.contains(&pv) && out.contains("64Mi") && out.contains("RWO") && out.contains("standard"), "kubectl 1.{minor}: {out}");
        let out = up.kubectl_v_ok(minor, &["get", "pv", &pv], None);
        assert!(out.contains("RECLAIM POLICY") && out.contains("Delete") && out.contains("default/data"), "kubectl 1.{minor}: {out}");
    }

    // 6. The next pod reads what the first wrote; then the volume is detached.
    up.kubectl_ok(&["delete", "pod", "writer", "--wait=true"]);
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(&pod("reader", "cat /data/file")));
    assert!(ok, "{out}{err}");
    up.wait_kubectl(&["get", "pod", "reader"], "reader Succeeded", Duration::from_secs(90), |s| s.contains("Completed"));
    assert!(up.kubectl_ok(&["logs", "reader"]).contains("kept by the volume"));
    up.kubectl_ok(&["delete", "pod", "reader", "--wait=true"]);
    up.wait_kubectl(&["get", "volumeattachments", "-o", "name"], "the volume detached", Duration::from_secs(60), |s| s.trim().is_empty());

    // 7. Deleting the claim (reclaim policy Delete) deletes the volume and its directory.
    up.kubectl_ok(&["delete", "pvc", "data", "--wait=true"]);
    up.wait_kubectl(&["get", "pv", "-o", "name"], "the volume deleted", Duration::from_secs(60), |s| s.trim().is_empty());
    assert_eq!(std::fs::read_dir(&state).map(|d| d.count()).unwrap_or(0), 0, "the driver deleted the volume's directory");

    // 8. A class that retains: bound at once (Immediate), released and kept when the claim goes.
    let keep = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: keep\nprovisioner: hostpath.csi.kubelab.io\nreclaimPolicy: Retain\nvolumeBindingMode: Immediate\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: kept\nspec:\n  storageClassName: keep\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 16Mi\n";
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(keep));
    assert!(ok, "{out}{err}");
    up.wait_kubectl(&["get", "pvc", "kept"], "an Immediate claim bound without a pod", Duration::from_secs(60), |s| s.contains("Bound"));
    let kept = jsonpath(&up, &["pvc", "kept"], "{.spec.volumeName}");
    up.kubectl_ok(&["delete", "pvc", "kept", "--wait=true"]);
    up.wait_kubectl(&["get", "pv", &kept, "-o", "jsonpath={.status.phase}"], "the retained volume Released", Duration::from_secs(30), |s| s == "Released");

    // 9. What a user gets wrong: a claim without a size, a pod naming a claim that is not there.
    let (ok, _, err) = up.kubectl(&["apply", "-f", "-"], Some("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: nosize\nspec:\n  accessModes: [ReadWriteOnce]\n"));
    assert!(!ok && err.contains("spec.resources[storage]: Required value"), "{err}");
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(&pod("orphan", "true").replace("claimName: data", "claimName: nope")));
    assert!(ok, "{out}{err}");
    up.wait_kubectl(&["get", "pod", "orphan", "-o", "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}"], "the scheduler's reason", Duration::from_secs(30), |s| s.contains("persistentvolumeclaim \"nope\" not found"));

    // 10. A StatefulSet's volumeClaimTemplates: each pod gets its own claim, <template>-<set>-<ordinal>.
    let set = format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  serviceName: db\n  replicas: 2\n  selector:\n    matchLabels: {{app: db}}\n  template:\n    metadata:\n      labels: {{app: db}}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: c\n        image: {BUSYBOX}\n        command: [sh, -c, 'hostname > /data/owner; sleep 3600']\n        volumeMounts:\n        - {{name: data, mountPath: /data}}\n  volumeClaimTemplates:\n  - metadata:\n      name: data\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 8Mi\n"
    );
    let (ok, out, err) = up.kubectl(&["apply", "-f", "-"], Some(&set));
    assert!(ok, "{out}{err}");
    wait_running_pods(&up, "app=db", 2, "the StatefulSet's pods with their claims");
    let claims = jsonpath(&up, &["pvc", "-l", "app=db"], "{range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}");
    assert_eq!(claims.lines().collect::<Vec<_>>(), ["data-db-0 Bound", "data-db-1 Bound"], "{claims}");
    up.wait_kubectl(&["exec", "db-1", "--", "cat", "/data/owner"], "db-1 writes to its own claim", Duration::from_secs(30), |s| s.trim() == "db-1");
}
