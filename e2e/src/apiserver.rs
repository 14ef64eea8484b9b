//! An API server on a store: `kubelab apiserver` (and optionally `kubelab controller-manager`)
//! over a one-member kubelab store or a three-member real etcd 3.4, driven by real kubectl.
//!
//! Layout on disk: `<tmp>/{apiserver,controller-manager}/{stdout,stderr}.log`, `<tmp>/home/`
//! (kubectl's `$HOME`: its discovery cache lives there) and `<tmp>/work/` (manifests, editor
//! scripts). The store keeps its own temporary directory ([`StoreCluster`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::cluster::{Flavor, StoreCluster, StoreOptions};
use crate::ports::{self, Port};
use crate::background::Background;
use crate::process::Process;

/// The kubectl minor versions the suites run, oldest first: every release a user may have.
pub const KUBECTL_MINORS: [u32; 7] = [27, 28, 29, 30, 31, 32, 33];
/// The one the other suites speak to.
pub const DEFAULT_KUBECTL_MINOR: u32 = 32;
/// Where `make test` puts every kubectl (scripts/fetch-kubectl.sh), unless `$KUBELAB_KUBECTL_DIR`.
pub const KUBECTL_DIR: &str = "/var/cache/kubelab/kubectl";
/// The Google Cloud SDK's pinned kubectls, used when the directory above lacks one.
/// How often [`ApiCluster::wait_for`] and [`ApiCluster::hold_for`] look.
const CHECK_EVERY: Duration = Duration::from_millis(200);
const SDK_KUBECTL_DIR: &str = "/usr/lib/google-cloud-sdk/bin";
/// Hard limit for one kubectl run (kubectl's own `--request-timeout` is shorter).
pub const KUBECTL_DEADLINE: Duration = Duration::from_secs(60);
/// How long a freshly started API server gets to answer `/readyz` with 200.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// `$KUBECTL_BIN`, else kubectl [`DEFAULT_KUBECTL_MINOR`]; an error (not a skip) if absent.
pub fn kubectl_bin() -> anyhow::Result<PathBuf> {
    match std::env::var_os("KUBECTL_BIN") {
        Some(bin) => {
            let bin = PathBuf::from(bin);
            anyhow::ensure!(bin.exists(), "KUBECTL_BIN={} does not exist", bin.display());
            Ok(bin)
        }
        None => kubectl_for(DEFAULT_KUBECTL_MINOR),
    }
}

/// kubectl 1.`minor`, never the version dispatcher in `/usr/bin`: `kubectl.1.<minor>` in
/// `$KUBELAB_KUBECTL_DIR` (default [`KUBECTL_DIR`]), else the Google Cloud SDK's. An error, not a
/// skip, when neither has it: the matrix runs every version or fails.
pub fn kubectl_for(minor: u32) -> anyhow::Result<PathBuf> {
    let dir = std::env::var_os("KUBELAB_KUBECTL_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(KUBECTL_DIR));
    let name = format!("kubectl.1.{minor}");
    [dir.join(&name), Path::new(SDK_KUBECTL_DIR).join(&name)]
        .into_iter()
        .find(|p| p.exists())
        .ok_or_else(|| anyhow::anyhow!("kubectl 1.{minor} is in neither {} nor {SDK_KUBECTL_DIR}: run scripts/fetch-kubectl.sh (make deps does)", dir.display()))
}

/// The issuer of a secure cluster's service account tokens (kubeadm's).
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// `kubelab certs <args>`, which must succeed; its stdout.
pub fn kubelab_certs(args: &[&str]) -> String {
    let bin = crate::kubelab_bin().expect("the kubelab binary");
    let out = Command::new(bin).arg("certs").args(args).output().expect("running kubelab certs");
    assert!(out.status.success(), "kubelab certs {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How to start an [`ApiCluster`].
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// Kubelab: one `kubelab store` member. Etcd: three real etcd 3.4 members.
    pub flavor: Flavor,
    /// Also run `kubelab controller-manager --master <url>`.
    pub controller_manager: bool,
    /// `--max-request-bytes`; None leaves the server's default.
    pub max_request_bytes: Option<usize>,
    /// Appended to the API server's command line.
    pub extra_args: Vec<String>,
    /// Appended to the controller manager's command line (e.g. shorter node monitor periods).
    pub controller_manager_args: Vec<String>,
    /// Added to the controller manager's environment (e.g. `TZDIR`, its own tz database).
    pub controller_manager_env: Vec<(String, String)>,
    /// Appended to every store member's command line (kubelab's store only).
    pub store_args: Vec<String>,
    /// The kubectl minor version [`ApiCluster::kubectl`] runs; None: [`kubectl_bin`].
    pub kubectl_minor: Option<u32>,
    /// Also serve HTTPS ([`ApiCluster::secure_url`]) with the PKI `kubelab certs generate`
    /// makes in `<tmp>/pki`: client certificates and service account tokens (of
    /// [`SERVICE_ACCOUNT_ISSUER`], signed with `sa.key`) authenticate, the Node authorizer and RBAC
    /// authorize (kubeadm's `--authorization-mode`). The insecure
    /// port ([`ApiCluster::url`]) stays, for the harness and the tests' superuser.
    pub secure: bool,
    /// Run the store (kubelab's) on https with client certificate authentication and the
    /// etcd certificates of the PKI in `<tmp>/pki`; the API server reaches it with
    /// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile` (kubeadm's apiserver-etcd-client).
    pub store_tls: bool,
    /// Store members; `None` is the flavor's usual (one kubelab member, three etcd members).
    pub store_members: Option<usize>,
}

impl Default for ApiOptions {
    fn default() -> Self {
        Self {
            flavor: Flavor::Kubelab,
            controller_manager: false,
            max_request_bytes: None,
            extra_args: Vec::new(),
            controller_manager_args: Vec::new(),
            controller_manager_env: Vec::new(),
            store_args: Vec::new(),
            kubectl_minor: None,
            secure: false,
            store_tls: false,
            store_members: None,
        }
    }
}

impl ApiOptions {
    pub fn for_flavor(flavor: Flavor) -> Self {
        Self {
            flavor,
            ..Self::default()
        }
    }
}

pub use crate::process::Output;

/// A store, an API server on it, and optionally a controller manager.
/// Dropping it kills them all (printing their log tails if a test failed).
pub struct ApiCluster {
    pub opts: ApiOptions,
    pub store: StoreCluster,
    bin: PathBuf,
    kubectl: PathBuf,
    port: Port,
    /// The HTTPS port, with [`ApiOptions::secure`].
    secure_port: Option<Port>,
    apiserver_args: Vec<String>,
    apiserver: Option<Process>,
    controller_manager: Option<Process>,
    /// `kubelab scheduler` processes, by the index `start_scheduler` returned (None once killed).
    schedulers: Vec<Option<Process>>,
    /// The /metrics port of each scheduler.
    scheduler_ports: Vec<u16>,
    root: Option<tempfile::TempDir>,
    http: reqwest::Client,
}

impl ApiCluster {
    /// Starts the store, the API server (and the controller manager if asked), and waits
    /// until the API server is ready and has created the `default` namespace.
    pub async fn start(opts: ApiOptions) -> anyhow::Result<Self> {
        let kubectl = match opts.kubectl_minor {
            Some(minor) => kubectl_for(minor)?,
            None => kubectl_bin()?,
        };
        let bin = crate::kubelab_bin()?;
        let members = opts.store_members.unwrap_or(match opts.flavor {
            Flavor::Kubelab => 1,
            Flavor::Etcd => 3,
        });
        let root = tempfile::Builder::new()
            .prefix(&format!("kubelab-e2e-api-{}-", opts.flavor))
            .tempdir()?;
        std::fs::create_dir_all(root.path().join("home"))?;
        std::fs::create_dir_all(root.path().join("work"))?;
        let pki = root.path().join("pki");
        let file = |name: &str| pki.join(name).display().to_string();
        let secure_port = if opts.secure { Some(ports::reserve()?) } else { None };
        if opts.secure || opts.store_tls {
            let port = secure_port.as_ref().map_or(6443, |p| p.port);
            let server = format!("https://127.0.0.1:{port}");
            let out = Command::new(&bin).args(["certs", "generate", "--cert-dir"]).arg(&pki).args(["--server", &server]).output()?;
            anyhow::ensure!(out.status.success(), "kubelab certs generate: {}", String::from_utf8_lossy(&out.stderr));
        }
        let store_opts = StoreOptions {
            proxy: false,
            extra_args: opts.store_args.clone(),
            tls: opts.store_tls.then(|| crate::StoreTls { pki: pki.clone() }),
            ..StoreOptions::for_flavor(opts.flavor)
        };
        let store = StoreCluster::start(members, store_opts).await?;
        let port = ports::reserve()?;
        let mut args: Vec<String> = vec![
            "apiserver".into(),
            "--etcd-servers".into(),
            store.client_endpoints().join(","),
            "--etcd-prefix".into(),
            "/registry".into(),
            "--insecure-port".into(),
            port.port.to_string(),
        ];
        if opts.store_tls {
            args.extend([
                "--etcd-cafile".into(),
                file("etcd/ca.crt"),
                "--etcd-certfile".into(),
                file("apiserver-etcd-client.crt"),
                "--etcd-keyfile".into(),
                file("apiserver-etcd-client.key"),
            ]);
        }
        match &secure_port {
            None => args.extend(["--secure-port".into(), "0".into()]),
            Some(secure) => {
                args.extend([
                    "--bind-address".into(),
                    "127.0.0.1".into(),
                    "--secure-port".into(),
                    secure.port.to_string(),
                    "--tls-cert-file".into(),
                    file("apiserver.crt"),
                    "--tls-private-key-file".into(),
                    file("apiserver.key"),
                    "--client-ca-file".into(),
                    file("ca.crt"),
                    "--service-account-issuer".into(),
                    SERVICE_ACCOUNT_ISSUER.into(),
                    "--service-account-signing-key-file".into(),
                    file("sa.key"),
                    "--service-account-key-file".into(),
                    file("sa.pub"),
                    "--authorization-mode".into(),
                    "Node,RBAC".into(),
                ]);
            }
        }
        if let Some(n) = opts.max_request_bytes {
            args.push("--max-request-bytes".into());
            args.push(n.to_string());
        }
        args.extend(opts.extra_args.iter().cloned());
        let http = reqwest::Client::builder()
            .timeout(crate::RPC_TIMEOUT)
            .build()?;
        let mut c = Self {
            opts,
            store,
            bin,
            kubectl,
            port,
            secure_port,
            apiserver_args: args,
            apiserver: None,
            controller_manager: None,
            schedulers: Vec::new(),
            scheduler_ports: Vec::new(),
            root: Some(root),
            http,
        };
        c.spawn_apiserver()?;
        c.wait_ready().await?;
        if c.opts.controller_manager {
            c.spawn_controller_manager()?;
        }
        Ok(c)
    }

    /// Starts the cluster for the flavor `E2E_STORE` names.
    pub async fn start_from_env() -> anyhow::Result<Self> {
        Self::start(ApiOptions::for_flavor(crate::flavor_from_env())).await
    }

    pub fn root(&self) -> &Path {
        self.root
            .as_ref()
            .map(|r| r.path())
            .unwrap_or(Path::new("/"))
    }

    /// A scratch directory for manifests and scripts.
    pub fn work_dir(&self) -> PathBuf {
        self.root().join("work")
    }

    /// Writes `text` to `<work>/<name>` and returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.work_dir().join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
        p
    }

    pub fn port(&self) -> u16 {
        self.port.port
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port.port)
    }

    /// `https://127.0.0.1:<secure port>` ([`ApiOptions::secure`]).
    pub fn secure_url(&self) -> String {
        let port = self.secure_port.as_ref().expect("the cluster was started with ApiOptions::secure");
        format!("https://127.0.0.1:{}", port.port)
    }

    /// Where `kubelab certs generate` put the cluster's PKI ([`ApiOptions::secure`]):
    /// `ca.crt`, `apiserver.crt`, `admin.conf`, ….
    pub fn pki_dir(&self) -> PathBuf {
        self.root().join("pki")
    }

    /// A kubeconfig for a user of the cluster's CA, in groups `orgs` (`kubelab certs kubeconfig`,
    /// as `kubeadm kubeconfig user`), written to the work directory as `<name>.conf`.
    pub fn user_kubeconfig(&self, name: &str, orgs: &[&str]) -> PathBuf {
        let pki = self.pki_dir();
        let mut args = vec!["kubeconfig", "--cert-dir", pki.to_str().expect("utf-8"), "--client-name", name];
        for org in orgs {
            args.extend(["--org", org]);
        }
        let secure = self.secure_url();
        args.extend(["--server", &secure]);
        let text = kubelab_certs(&args);
        self.write_file(&format!("{name}.conf"), &text)
    }

    /// A kubeconfig for the secure port with a bearer token (a service account's, or one of
    /// `--token-auth-file`), written to the work directory as `<name>.conf`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let ca = self.pki_dir().join("ca.crt");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubelab\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: kubelab\n    user: {name}\ncurrent-context: {name}\n",
            self.secure_url(),
            ca.display()
        );
        self.write_file(&format!("{name}.conf"), &text)
    }

    /// An HTTPS client trusting the cluster's CA only, presenting `identity` (PEM certificate and
    /// key) if any.
    pub fn https_client(&self, identity: Option<Vec<u8>>) -> reqwest::Client {
        let ca = std::fs::read(self.pki_dir().join("ca.crt")).expect("ca.crt");
        let mut b = reqwest::Client::builder().tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("a CA certificate")]).timeout(crate::RPC_TIMEOUT);
        if let Some(pem) = identity {
            b = b.identity(reqwest::Identity::from_pem(&pem).expect("an identity"));
        }
        b.build().expect("an HTTPS client")
    }

    /// Runs kubectl 1.`minor` with `kubeconfig` (no `-s`: the kubeconfig names the server) and a
    /// `$HOME` of its own, to completion.
    pub fn kubectl_kubeconfig(&self, minor: u32, kubeconfig: &Path, args: &[&str]) -> Output {
        let kubectl = kubectl_for(minor).unwrap_or_else(|e| panic!("{e:#}"));
        let home = self.root().join(format!("home-1.{minor}"));
        std::fs::create_dir_all(&home).unwrap_or_else(|e| panic!("creating {}: {e}", home.display()));
        let mut cmd = Command::new(&kubectl);
        cmd.env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KUBECONFIG", kubeconfig)
            .current_dir(self.work_dir())
            .arg("--request-timeout=20s")
            .args(args);
        let shown = format!("KUBECONFIG={} kubectl.1.{minor} {}", kubeconfig.display(), args.join(" "));
        let (status, stdout, stderr) = crate::process::run_to_completion(cmd, None, crate::scaled(KUBECTL_DEADLINE)).unwrap_or_else(|e| panic!("running {shown}: {e}"));
        eprintln!("[kubectl] {shown} -> {status:?}");
        Output { success: status.is_some_and(|s| s.success()), code: status.and_then(|s| s.code()), stdout, stderr, command: shown }
    }

    fn spawn_apiserver(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.apiserver.is_none(), "the API server is still running");
        let dir = self.root().join("apiserver");
        let p = Process::spawn("apiserver", &self.bin, &self.apiserver_args, &dir, &env())?;
        eprintln!(
            "[e2e] started apiserver pid {} on {} ({})",
            p.pid(),
            self.url(),
            self.apiserver_args.join(" ")
        );
        self.apiserver = Some(p);
        Ok(())
    }

    /// Stops the API server (SIGTERM, then SIGKILL after the grace period).
    pub fn stop_apiserver(&mut self) {
        if let Some(mut p) = self.apiserver.take() {
            eprintln!("[e2e] stopping apiserver pid {}", p.pid());
            p.terminate();
        }
    }

    /// Starts the controller manager (again, after [`Self::kill_controller_manager`]) with the
    /// options' arguments.
    pub fn spawn_controller_manager(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.controller_manager.is_none(), "the controller manager is still running");
        let mut args = vec!["controller-manager".to_string(), "--master".into(), self.url()];
        if self.opts.secure {
            // As kubeadm's: pods' service account volumes take the cluster's CA from the
            // kube-root-ca.crt ConfigMap it publishes.
            args.extend(["--root-ca-file".into(), self.pki_dir().join("ca.crt").display().to_string()]);
            // And it signs certificate requests with the cluster CA (kubelet TLS bootstrap).
            for (flag, file) in [("--cluster-signing-cert-file", "ca.crt"), ("--cluster-signing-key-file", "ca.key")] {
                args.extend([flag.into(), self.pki_dir().join(file).display().to_string()]);
            }
        }
        args.extend(self.opts.controller_manager_args.iter().cloned());
        let dir = self.root().join("controller-manager");
        let mut env = env();
        env.extend(self.opts.controller_manager_env.iter().cloned());
        let p = Process::spawn("controller-manager", &self.bin, &args, &dir, &env)?;
        eprintln!("[e2e] started controller-manager pid {}", p.pid());
        self.controller_manager = Some(p);
        Ok(())
    }

    /// Kills the controller manager with SIGKILL, mid-work.
    pub fn kill_controller_manager(&mut self) {
        kill9(&mut self.controller_manager, "controller-manager");
    }

    /// Kills the API server with SIGKILL: no graceful shutdown, watches cut mid-stream.
    pub fn kill_apiserver(&mut self) {
        kill9(&mut self.apiserver, "apiserver");
    }

    /// Starts the stopped API server again with the same command line; waits until ready.
    pub async fn start_apiserver(&mut self) -> anyhow::Result<()> {
        self.spawn_apiserver()?;
        self.wait_ready().await
    }

    /// Stops the API server cleanly and starts it again on the same port; waits until ready.
    pub async fn restart_apiserver(&mut self) -> anyhow::Result<()> {
        self.stop_apiserver();
        self.start_apiserver().await
    }

    /// Stops every store member (SIGTERM, then SIGKILL after the grace period).
    pub fn stop_store(&mut self) {
        self.store.stop_all();
    }

    /// Starts every stopped store member again (same data dirs and ports) and waits until healthy.
    pub async fn start_store(&mut self) -> anyhow::Result<()> {
        for i in 0..self.store.len() {
            if !self.store.member(i).is_running() {
                self.store.restart(i)?;
            }
        }
        self.store.wait_healthy().await
    }

    /// Stops the store and starts it again on the same data directories and ports.
    pub async fn restart_store(&mut self) -> anyhow::Result<()> {
        self.stop_store();
        self.start_store().await
    }

    /// Polls `/readyz` until 200 and `GET namespaces/default` until 200 (the API server
    /// creates the system namespaces in the background). Fails early if the process died.
    pub async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let limit = crate::scaled(READY_TIMEOUT);
        let start = Instant::now();
        let mut last;
        loop {
            if let Some(st) = self.apiserver.as_mut().and_then(|p| p.exited()) {
                bail!("the API server exited: {st}\n{}", self.log_tails(40));
            }
            match self.get("/readyz").await {
                Ok((200, _)) => match self.get("/api/v1/namespaces/default").await {
                    Ok((200, _)) => return Ok(()),
                    Ok((code, body)) => last = format!("namespaces/default: {code} {body}"),
                    Err(e) => last = format!("namespaces/default: {e:#}"),
                },
                Ok((code, body)) => last = format!("/readyz: {code} {body}"),
                Err(e) => last = format!("/readyz: {e:#}"),
            }
            if start.elapsed() > limit {
                bail!(
                    "the API server at {} was not ready within {limit:?}: {last}\n{}",
                    self.url(),
                    self.log_tails(40)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A reqwest client with the harness's timeout (not for watches: see [`Self::http_streaming`]).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A reqwest client without an overall timeout, for watch streams.
    pub fn http_streaming(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("reqwest client")
    }

    /// GET `path`: (status, body).
    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        self.request(reqwest::Method::GET, path, None, None).await
    }

    /// Any request with an optional body of `content_type` (default `application/json`).
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: Option<&str>,
    ) -> anyhow::Result<(u16, String)> {
        let url = format!("{}{path}", self.url());
        let mut req = self.http.request(method.clone(), &url);
        if let Some(b) = body {
            req = req
                .header("Content-Type", content_type.unwrap_or("application/json"))
                .body(b);
        }
        let resp = req
            .send()
            .await
            .with_context(|| format!("{method} {url}"))?;
        let code = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .with_context(|| format!("reading the body of {method} {url}"))?;
        Ok((code, text))
    }

    /// A kube-rs client for [`Self::url`].
    pub fn kube_client(&self) -> anyhow::Result<kube::Client> {
        let config = kube::Config::new(self.url().parse()?);
        Ok(kube::Client::try_from(config)?)
    }

    fn kubectl_command(&self, args: &[&str], env: &[(&str, &str)]) -> (Command, String) {
        let mut cmd = Command::new(&self.kubectl);
        let home = self.root().join("home");
        cmd.env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KUBECONFIG", home.join("no-kubeconfig"))
            .current_dir(self.work_dir())
            .arg("-s")
            .arg(self.url())
            .arg("--request-timeout=20s")
            .args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let shown = format!(
            "{}kubectl -s {} {}",
            env.iter()
                .map(|(k, v)| format!("{k}={v} "))
                .collect::<String>(),
            self.url(),
            args.join(" ")
        );
        (cmd, shown)
    }

    /// Runs the pinned kubectl with `args` (after `-s <url>`) to completion.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(args, &[], None)
    }

    /// Runs kubectl with extra environment and optional stdin (for `-f -`).
    pub fn kubectl_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
        let (cmd, shown) = self.kubectl_command(args, env);
        let deadline = crate::scaled(KUBECTL_DEADLINE);
        let (status, stdout, mut stderr) = crate::process::run_to_completion(cmd, stdin, deadline)
            .unwrap_or_else(|e| panic!("running {shown}: {e}"));
        if status.is_none() {
            stderr.push_str(&format!(
                "\n[e2e] killed: did not finish within {deadline:?}"
            ));
        }
        eprintln!("[kubectl] {shown} -> {status:?}");
        Output {
            success: status.is_some_and(|s| s.success()),
            code: status.and_then(|s| s.code()),
            stdout,
            stderr,
            command: shown,
        }
    }

    /// Waits until `node` exists and is Ready (`kubectl wait` fails at once on a Node that has
    /// not registered yet, so it is asked again for up to a minute).
    pub async fn wait_node_ready(&self, node: &str) {
        let node = format!("node/{node}");
        for _ in 0..120 {
            if self.kubectl(&["wait", "--for=condition=Ready", &node, "--timeout=30s"]).success {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.fail(&format!("{node} never became Ready"));
    }

    /// kubectl `args` must succeed: its stdout, else a panic with its output and the server's log.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let o = self.kubectl(args);
        if !o.success {
            self.fail(&format!("kubectl failed:\n{}", o.describe()));
        }
        o.stdout
    }

    /// kubectl `args` must fail with stderr containing `needle`: its stderr.
    pub fn kubectl_err(&self, args: &[&str], needle: &str) -> String {
        let o = self.kubectl(args);
        if o.success || !o.stderr.contains(needle) {
            self.fail(&format!(
                "expected kubectl to fail with {needle:?} in stderr:\n{}",
                o.describe()
            ));
        }
        o.stderr
    }

    /// Starts kubectl `args` in the background (e.g. `get -w`); killed on drop.
    pub fn kubectl_spawn(&self, args: &[&str]) -> Background {
        let (cmd, shown) = self.kubectl_command(args, &[]);
        let bg = Background::spawn(cmd, shown.clone()).unwrap_or_else(|e| panic!("spawning {shown}: {e:#}"));
        eprintln!("[kubectl] started in background: {shown}");
        bg
    }

    /// Panics with `msg` and the tails of the API server's (and controller manager's) logs.
    pub fn fail(&self, msg: &str) -> ! {
        panic!("{msg}\n{}", self.log_tails(60))
    }

    /// [`crate::poll_until`] `check` every 200 ms (`Err` carries what was seen instead); on
    /// timeout the test fails with `what`, the last thing seen and the processes' logs.
    pub async fn wait_for<T, F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let polled = crate::poll_until(what, timeout, CHECK_EVERY, || {
            let attempt = check();
            async move { attempt.await.map(Some).map_err(anyhow::Error::msg) }
        });
        polled.await.unwrap_or_else(|e| self.fail(&format!("{e:#}")))
    }

    /// [`crate::hold_for`] `check` every 200 ms over `period`; the test fails at the first check
    /// that does not hold.
    pub async fn hold_for<F, Fut>(&self, what: &str, period: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let held = crate::hold_for(what, period, CHECK_EVERY, || {
            let attempt = check();
            async move { attempt.await.map_err(anyhow::Error::msg) }
        });
        held.await.unwrap_or_else(|e| self.fail(&format!("{e:#}")))
    }

    /// Whether the API server process is still running.
    pub fn apiserver_alive(&mut self) -> bool {
        self.apiserver
            .as_mut()
            .is_some_and(|p| p.exited().is_none())
    }

    /// The tails of the API server's and the controller manager's logs.
    /// Starts a `kubelab scheduler --master <url>` with `extra` flags; returns its index. Its logs
    /// go to `<root>/scheduler-<index>/`.
    pub fn start_scheduler(&mut self, extra: &[&str]) -> anyhow::Result<usize> {
        let i = self.schedulers.len();
        let port = ports::reserve()?;
        let mut args = vec!["scheduler".to_string(), "--master".into(), self.url(), "--bind-address".into(), "127.0.0.1".into()];
        args.extend(["--port".to_string(), port.port.to_string()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        let dir = self.root().join(format!("scheduler-{i}"));
        let port_number = port.port;
        drop(port); // released just before the scheduler binds it
        let p = Process::spawn(&format!("scheduler-{i}"), &self.bin, &args, &dir, &env())?;
        eprintln!("[e2e] started scheduler-{i} pid {}", p.pid());
        self.schedulers.push(Some(p));
        self.scheduler_ports.push(port_number);
        Ok(i)
    }

    /// The port scheduler `i` serves /healthz and /metrics on.
    pub fn scheduler_port(&self, i: usize) -> u16 {
        self.scheduler_ports[i]
    }

    /// The processes running now, by name, with their PIDs (for CPU and memory accounting).
    pub fn pids(&self) -> Vec<(String, u32)> {
        let mut v = Vec::new();
        for i in 0..self.store.len() {
            if let Some(pid) = self.store.member(i).pid() {
                v.push((format!("store-{i}"), pid));
            }
        }
        if let Some(p) = &self.apiserver {
            v.push(("apiserver".into(), p.pid()));
        }
        if let Some(p) = &self.controller_manager {
            v.push(("controller-manager".into(), p.pid()));
        }
        for (i, p) in self.schedulers.iter().enumerate() {
            if let Some(p) = p {
                v.push((format!("scheduler-{i}"), p.pid()));
            }
        }
        v
    }

    /// kill -9 of scheduler `i`.
    pub fn kill_scheduler(&mut self, i: usize) {
        if let Some(slot) = self.schedulers.get_mut(i) {
            kill9(slot, &format!("scheduler-{i}"));
        }
    }

    /// The stderr log of scheduler `i` so far.
    pub fn scheduler_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.root().join(format!("scheduler-{i}")).join("stderr.log")).unwrap_or_default()
    }

    pub fn log_tails(&self, lines: usize) -> String {
        let mut s = String::new();
        let schedulers: Vec<String> = (0..self.schedulers.len()).map(|i| format!("scheduler-{i}")).collect();
        for name in ["apiserver", "controller-manager"].into_iter().chain(schedulers.iter().map(String::as_str)) {
            let dir = self.root().join(name);
            if dir.exists() {
                s.push_str(&crate::process::log_tail(
                    name,
                    &dir.join("stdout.log"),
                    &dir.join("stderr.log"),
                    lines,
                ));
            }
        }
        s
    }
}

impl Drop for ApiCluster {
    fn drop(&mut self) {
        for mut p in self.schedulers.drain(..).flatten() {
            p.kill9();
        }
        if let Some(mut p) = self.controller_manager.take() {
            p.kill9();
        }
        if let Some(mut p) = self.apiserver.take() {
            p.kill9();
        }
        if std::thread::panicking() {
            eprintln!(
                "\n[e2e] test failed; API server {} in {}: kubelab {}",
                self.url(),
                self.root().display(),
                self.apiserver_args.join(" ")
            );
            eprintln!("{}", self.log_tails(60));
        }
        if let Some(r) = self
            .root
            .take()
            .filter(|_| std::env::var_os("E2E_KEEP_DIRS").is_some())
        {
            eprintln!("[e2e] keeping {}", r.keep().display());
        }
        // `store` drops after this and prints its own log tails.
    }
}

fn env() -> Vec<(String, String)> {
    vec![
        ("NO_COLOR".into(), "1".into()),
        (
            "RUST_LOG".into(),
            std::env::var("E2E_RUST_LOG").unwrap_or_else(|_| "info".into()),
        ),
    ]
}

/// SIGKILL of the process in `slot`, if one runs there (it is taken out), said on stderr.
fn kill9(slot: &mut Option<Process>, what: &str) {
    if let Some(mut p) = slot.take() {
        eprintln!("[e2e] kill -9 {what} pid {}", p.pid());
        p.kill9();
    }
}
