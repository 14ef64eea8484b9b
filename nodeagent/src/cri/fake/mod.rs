//! Mirrors cri-api's pkg/apis/testing/fake_runtime_service.go and fake_image_service.go: a **fake**
//! CRI runtime for tests, served in-process over a unix socket so that tests drive the real
//! [`RemoteRuntime`](crate::cri::RemoteRuntime) client, gRPC encoding included.
//!
//! Nothing runs: a "container" is a record that moves CREATED → RUNNING → EXITED when asked. What
//! the fake does copy from containerd 1.6 (as measured with containerd 1.6.20 on Debian 12) is the
//! behaviour a kubelet depends on, because that is what the node agent's tests are meant to catch:
//!
//! - `RunPodSandbox` gives the sandbox an IP from `10.88.0.0/16` (none for host-network sandboxes,
//!   which must not set a hostname), and refuses a second sandbox with the same
//!   name/namespace/uid/attempt ("failed to reserve sandbox name").
//! - `CreateContainer` needs the image on the node (NOT_FOUND otherwise: nothing is pulled) and
//!   refuses a container whose name — container, pod, namespace, pod UID and attempt, as containerd
//!   builds it — is taken ("failed to reserve container name"): a restart must bump `attempt`.
//! - `StopContainer` with a grace period models a process that handles SIGTERM: exit code 0,
//!   reason "Completed". With `timeout == 0` (and for the containers `StopPodSandbox` stops) it is
//!   a SIGKILL: exit code 137, reason "Error".
//! - `StopPodSandbox` makes the sandbox NOTREADY, releases its IP and stops its running containers.
//! - `RemovePodSandbox`/`RemoveContainer` of unknown ids succeed; removing a running container or
//!   a ready sandbox stops it first. `ContainerStatus`, `PodSandboxStatus`, `StopPodSandbox`,
//!   `StopContainer` and `StartContainer` of unknown ids answer NOT_FOUND.
//! - `ImageStatus` of an unknown image answers an empty response. `PullImage` fails as it does on
//!   a machine without a registry, unless [`FakeRuntime::set_pull_allowed`].
//! - Image names are normalised like containerd's (`busybox` = `docker.io/library/busybox:latest`).
//! - `ExecSync` of a running container answers exit code 0 with stdout = the command joined by
//!   spaces (no trailing newline), so a test can see what was run — unless the command was
//!   scripted ([`FakeRuntime::script_exec`]): then it takes the scripted time (a `timeout` that
//!   runs out first answers DEADLINE_EXCEEDED, as containerd does) and gives the scripted result.
//! - Every `StopContainer` is remembered with its timeout ([`FakeRuntime::stop_requests`]).
//! - What containerd 1.6 does not implement (`GetContainerEvents`, `RuntimeConfig`,
//!   `ListMetricDescriptors`, …) and what needs a streaming server or cgroups (`Exec`, `Attach`,
//!   `PortForward`, stats, checkpoint) answers UNIMPLEMENTED.
//!
//! Every call is recorded with its CRI name ([`FakeRuntime::calls`]) and any call can be made to
//! fail once ([`FakeRuntime::inject_error`]).
//!
//! This file holds the fake node's state and what tests do to it; the two CRI services answer
//! from that state in [`fake_runtime_service`] and [`fake_image_service`], as in cri-api.

mod fake_image_service;
mod fake_runtime_service;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_cri::v1 as api;
use k8s_cri::v1::image_service_server::ImageServiceServer;
use k8s_cri::v1::runtime_service_server::RuntimeServiceServer;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::Status;

use crate::error::{Error, Result};

/// The socket's file name inside the directory given to [`FakeRuntime::start`].
pub(crate) const SOCKET_NAME: &str = "fake-cri.sock";

/// Exit code and reason of a container killed with SIGKILL (128 + 9), as containerd reports it.
const SIGKILL_EXIT_CODE: i32 = 137;

/// A handle on the fake runtime's state: cheap to clone, every clone sees the same node.
///
/// The state sits behind a `std::sync::Mutex` rather than in an actor because every gRPC handler
/// holds it for a few map operations and never across an `.await`.
#[derive(Clone, Default)]
pub(crate) struct FakeRuntime {
    state: Arc<Mutex<State>>,
}

/// The running gRPC server. Dropping it stops accepting connections (connections already open
/// are served until their clients drop them).
pub(crate) struct FakeServer {
    endpoint: String,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
    /// `unix://<dir>/fake-cri.sock`, ready for [`RemoteRuntime::connect`](crate::cri::RemoteRuntime::connect).
    pub(crate) fn endpoint(&self) -> String {
        self.endpoint.clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
struct State {
    /// Source of sandbox and container ids (one counter, so ids never collide).
    next_id: u64,
    /// Host part of the next pod IP in 10.88.0.0/16 (.1 is the bridge's gateway).
    next_ip: u32,
    /// Images by normalised name.
    images: BTreeMap<String, api::Image>,
    pull_allowed: bool,
    injected: HashMap<String, VecDeque<Status>>,
    calls: Vec<String>,
    /// What ExecSync answers in a container: (exit code, output); unset echoes the command.
    exec_results: HashMap<String, (i32, Vec<u8>)>,
    /// Every ExecSync: (container id, command, timeout in seconds).
    exec_calls: Vec<(String, Vec<String>, i64)>,
    /// Keyed by id; ids grow with the counter, so iteration is creation order.
    sandboxes: BTreeMap<String, Sandbox>,
    containers: BTreeMap<String, Container>,
    /// Scripted ExecSync results, by command.
    exec_scripts: HashMap<Vec<String>, ExecScript>,
    /// (container id, timeout in seconds) of every StopContainer, in order.
    stop_requests: Vec<(String, i64)>,
}

/// What a scripted `ExecSync` command does ([`FakeRuntime::script_exec`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct ExecScript {
    pub(crate) exit_code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// How long the command runs before it answers.
    pub(crate) delay: std::time::Duration,
}

struct Sandbox {
    status: api::PodSandboxStatus,
    log_directory: String,
}

struct Container {
    pod_sandbox_id: String,
    /// containerd's reserved name: `<container>_<pod>_<namespace>_<uid>_<attempt>`.
    reserved_name: String,
    status: api::ContainerStatus,
}

impl State {
    fn new_id(&mut self) -> String {
        self.next_id += 1;
        // 64 hex digits like containerd's ids; zero-padded so map order is creation order.
        format!("{:064x}", self.next_id)
    }

    fn new_ip(&mut self) -> String {
        loop {
            self.next_ip += 1;
            let host = self.next_ip + 1; // start at .2
            let (third, fourth) = ((host >> 8) & 0xff, host & 0xff);
            if fourth != 0 && fourth != 255 {
                return format!("10.88.{third}.{fourth}");
            }
        }
    }

    fn image(&self, name: &str) -> Option<&api::Image> {
        let normalized = normalize_image(name);
        self.images.get(&normalized).or_else(|| {
            let digest = name.strip_prefix("sha256:").unwrap_or(name);
            self.images.values().find(|i| i.id.strip_prefix("sha256:") == Some(digest))
        })
    }

    fn sandbox_mut(&mut self, id: &str) -> Result<&mut Sandbox, Status> {
        self.sandboxes
            .get_mut(id)
            .ok_or_else(|| Status::not_found(format!("an error occurred when try to find sandbox: sandbox {id:?}: not found")))
    }

    fn container_mut(&mut self, id: &str) -> Result<&mut Container, Status> {
        self.containers
            .get_mut(id)
            .ok_or_else(|| Status::not_found(format!("an error occurred when try to find container {id:?}: not found")))
    }
}

fn now_nanos() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX)
}

/// Docker-style reference normalisation, as containerd applies it before looking an image up:
/// a missing registry is `docker.io`, a one-part Docker Hub name lives under `library/`, and a
/// missing tag is `latest`.
pub(crate) fn normalize_image(name: &str) -> String {
    let (first, rest) = match name.split_once('/') {
        Some((first, rest)) => (first, Some(rest)),
        None => (name, None),
    };
    let mut full = match rest {
        Some(_) if first.contains('.') || first.contains(':') || first == "localhost" => name.to_string(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    };
    if full == "docker.io/library/" {
        return name.to_string();
    }
    let last = full.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') && !last.contains('@') {
        full.push_str(":latest");
    }
    full
}

/// A stable fake digest for an image name.
fn fake_digest(name: &str) -> String {
    let mut out = String::with_capacity(64);
    for seed in 0u64..4 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (seed, name).hash(&mut h);
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

fn is_host_network(config: &api::PodSandboxConfig) -> bool {
    config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref())
        .and_then(|s| s.namespace_options.as_ref())
        .is_some_and(|n| n.network == api::NamespaceMode::Node as i32)
}

fn labels_match(selector: &HashMap<String, String>, labels: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Make a running container exit (no-op for any other state).
fn exit(c: &mut Container, exit_code: i32) {
    if c.status.state != api::ContainerState::ContainerRunning as i32 {
        return;
    }
    c.status.state = api::ContainerState::ContainerExited as i32;
    c.status.finished_at = now_nanos();
    c.status.exit_code = exit_code;
    c.status.reason = if exit_code == 0 { "Completed" } else { "Error" }.to_string();
}

fn to_container(id: &str, c: &Container) -> api::Container {
    let s = &c.status;
    api::Container {
        id: id.to_string(),
        pod_sandbox_id: c.pod_sandbox_id.clone(),
        metadata: s.metadata.clone(),
        image: s.image.clone(),
        image_ref: s.image_ref.clone(),
        state: s.state,
        created_at: s.created_at,
        labels: s.labels.clone(),
        annotations: s.annotations.clone(),
        image_id: s.image_id.clone(),
    }
}

fn to_sandbox(s: &api::PodSandboxStatus) -> api::PodSandbox {
    api::PodSandbox {
        id: s.id.clone(),
        metadata: s.metadata.clone(),
        state: s.state,
        created_at: s.created_at,
        labels: s.labels.clone(),
        annotations: s.annotations.clone(),
        runtime_handler: s.runtime_handler.clone(),
    }
}

impl FakeRuntime {
    /// Serve the fake on `<dir>/fake-cri.sock` (a stale socket file there is replaced).
    pub(crate) async fn start(dir: &Path) -> Result<(FakeRuntime, FakeServer)> {
        let path = dir.join(SOCKET_NAME);
        match tokio::fs::remove_file(&path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&path, e)),
            _ => {}
        }
        let listener = UnixListener::bind(&path).map_err(|e| Error::io(&path, e))?;
        let runtime = FakeRuntime::default();
        let router = tonic::transport::Server::builder()
            .add_service(RuntimeServiceServer::new(runtime.clone()))
            .add_service(ImageServiceServer::new(runtime.clone()));
        let task = tokio::spawn(async move {
            if let Err(e) = router.serve_with_incoming(UnixListenerStream::new(listener)).await {
                tracing::warn!(target: "cri", error = %e, "fake CRI server stopped");
            }
        });
        let endpoint = format!("unix://{}", path.display());
        Ok((runtime, FakeServer { endpoint, task }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not wedge every later call: the state is plain data.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Record the call and fail it if an error was injected for it.
    fn begin(&self, op: &str) -> Result<MutexGuard<'_, State>, Status> {
        let mut state = self.state();
        state.calls.push(op.to_string());
        if let Some(status) = state.injected.get_mut(op).and_then(VecDeque::pop_front) {
            return Err(status);
        }
        Ok(state)
    }

    /// [`begin`](Self::begin) for calls that do not touch the state.
    fn check(&self, op: &str) -> Result<(), Status> {
        self.begin(op).map(drop)
    }

    /// Put an image on the node (as `ctr images import` would).
    pub(crate) fn add_image(&self, name: &str) {
        let name = normalize_image(name);
        let digest = fake_digest(&name);
        let repo = name.rsplit_once(':').filter(|(_, tag)| !tag.contains('/')).map_or(name.as_str(), |(r, _)| r);
        let image = api::Image {
            id: format!("sha256:{digest}"),
            repo_tags: vec![name.clone()],
            repo_digests: vec![format!("{repo}@sha256:{}", fake_digest(&format!("manifest {name}")))],
            size: 1 << 20,
            spec: Some(api::ImageSpec { image: name.clone(), ..Default::default() }),
            ..Default::default()
        };
        self.state().images.insert(name, image);
    }

    /// Whether `PullImage` succeeds (adding the image) instead of failing like a node without a
    /// registry. Default: false.
    pub(crate) fn set_pull_allowed(&self, allowed: bool) {
        self.state().pull_allowed = allowed;
    }

    /// Make the next call of `op` (a CRI method name such as `"CreateContainer"`) fail with
    /// `status`, once. Several injections for one op fail that many calls, in order.
    pub(crate) fn inject_error(&self, op: &str, status: Status) {
        self.state().injected.entry(op.to_string()).or_default().push_back(status);
    }

    /// A running container's process exits with `exit_code` (reason "Completed" for 0, "Error"
    /// otherwise). No-op for a container that is not running or does not exist.
    pub(crate) fn exit_container(&self, id: &str, exit_code: i32) {
        if let Some(c) = self.state().containers.get_mut(id) {
            exit(c, exit_code);
        }
    }

    /// Make `ExecSync` of exactly `cmd` (in any container) behave as `script`.
    pub(crate) fn script_exec(&self, cmd: &[&str], script: ExecScript) {
        self.state().exec_scripts.insert(cmd.iter().map(|s| s.to_string()).collect(), script);
    }

    /// (container id, timeout in seconds) of every StopContainer received, in order.
    pub(crate) fn stop_requests(&self) -> Vec<(String, i64)> {
        self.state().stop_requests.clone()
    }

    /// What ExecSync in container `id` answers from now on: `exit_code` and `output` (on
    /// stdout), as if the command ran — how tests make an exec probe pass or fail.
    pub(crate) fn set_exec_result(&self, id: &str, exit_code: i32, output: &str) {
        self.state().exec_results.insert(id.to_string(), (exit_code, output.as_bytes().to_vec()));
    }

    /// Every ExecSync received: (container id, command, timeout in seconds).
    pub(crate) fn exec_calls(&self) -> Vec<(String, Vec<String>, i64)> {
        self.state().exec_calls.clone()
    }

    /// Every call received so far, in order, by CRI method name (`"RunPodSandbox"`, …).
    pub(crate) fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    pub(crate) fn clear_calls(&self) {
        self.state().calls.clear();
    }

    /// All containers, in creation order.
    pub(crate) fn containers(&self) -> Vec<api::Container> {
        self.state().containers.iter().map(|(id, c)| to_container(id, c)).collect()
    }

    /// All sandboxes, in creation order.
    pub(crate) fn sandboxes(&self) -> Vec<api::PodSandbox> {
        self.state().sandboxes.values().map(|s| to_sandbox(&s.status)).collect()
    }
}

fn invalid(what: &str) -> Status {
    Status::invalid_argument(format!("{what} is required"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cri::RemoteRuntime;

    const BUSYBOX: &str = "docker.io/library/busybox:1.36";

    async fn setup() -> (tempfile::TempDir, FakeRuntime, FakeServer, RemoteRuntime) {
        let dir = tempfile::tempdir().expect("tempdir");
        let (fake, server) = FakeRuntime::start(dir.path()).await.expect("start fake");
        let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
        (dir, fake, server, rt)
    }

    fn sandbox_config(name: &str, uid: &str, attempt: u32) -> api::PodSandboxConfig {
        api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: name.into(),
                uid: uid.into(),
                namespace: "default".into(),
                attempt,
            }),
            hostname: name.into(),
            log_directory: format!("/var/log/pods/default_{name}_{uid}"),
            labels: HashMap::from([("io.kubernetes.pod.uid".to_string(), uid.to_string())]),
            annotations: HashMap::from([("note".to_string(), "kept".to_string())]),
            ..Default::default()
        }
    }

    fn host_network(mut config: api::PodSandboxConfig) -> api::PodSandboxConfig {
        config.hostname.clear();
        config.linux = Some(api::LinuxPodSandboxConfig {
            security_context: Some(api::LinuxSandboxSecurityContext {
                namespace_options: Some(api::NamespaceOption {
                    network: api::NamespaceMode::Node as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        config
    }

    fn container_config(name: &str, attempt: u32) -> api::ContainerConfig {
        api::ContainerConfig {
            metadata: Some(api::ContainerMetadata { name: name.into(), attempt }),
            image: Some(api::ImageSpec { image: "busybox:1.36".into(), ..Default::default() }),
            labels: HashMap::from([("io.kubernetes.container.name".to_string(), name.to_string())]),
            annotations: HashMap::from([("io.kubernetes.container.restartCount".to_string(), attempt.to_string())]),
            log_path: format!("{name}/{attempt}.log"),
            ..Default::default()
        }
    }

    #[test]
    fn image_names_are_normalized_like_containerd() {
        for (given, want) in [
            ("busybox", "docker.io/library/busybox:latest"),
            ("busybox:1.36", "docker.io/library/busybox:1.36"),
            ("library/busybox:1.36", "docker.io/library/busybox:1.36"),
            ("registry.k8s.io/pause:3.9", "registry.k8s.io/pause:3.9"),
            ("localhost/kubelab:dev", "localhost/kubelab:dev"),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            ("quay.io/org/app@sha256:abcd", "quay.io/org/app@sha256:abcd"),
        ] {
            assert_eq!(normalize_image(given), want, "{given}");
        }
    }

    #[tokio::test]
    async fn sandbox_and_container_lifecycle() {
        let (_dir, fake, _server, rt) = setup().await;
        fake.add_image(BUSYBOX);

        let version = rt.version().await.expect("version");
        assert_eq!((version.runtime_name.as_str(), version.runtime_version.as_str()), ("fake", "0.0.0"));
        let conditions = rt.status().await.expect("status").status.expect("runtime status").conditions;
        assert!(conditions.iter().any(|c| c.r#type == "RuntimeReady" && c.status));
        assert!(conditions.iter().any(|c| c.r#type == "NetworkReady" && c.status));

        let config = sandbox_config("web", "uid-1", 0);
        let sb = rt.run_pod_sandbox(config.clone(), "").await.expect("run sandbox");
        let status = rt.pod_sandbox_status(&sb).await.expect("sandbox status");
        assert_eq!(status.state, api::PodSandboxState::SandboxReady as i32);
        assert_eq!(status.network.as_ref().map(|n| n.ip.as_str()), Some("10.88.0.2"));
        assert_eq!(status.annotations.get("note").map(String::as_str), Some("kept"));
        assert!(status.created_at > 1_600_000_000_000_000_000, "nanoseconds: {}", status.created_at);

        // The same name and attempt again is refused; a new attempt is fine.
        let err = rt.run_pod_sandbox(config.clone(), "").await.expect_err("duplicate sandbox");
        assert!(err.to_string().contains("failed to reserve sandbox name"), "{err}");

        let hostnet = rt
            .run_pod_sandbox(host_network(sandbox_config("node-exporter", "uid-2", 0)), "")
            .await
            .expect("host network sandbox");
        let status = rt.pod_sandbox_status(&hostnet).await.expect("status");
        assert_eq!(status.network.map(|n| n.ip), Some(String::new()));
        let mut with_hostname = host_network(sandbox_config("bad", "uid-3", 0));
        with_hostname.hostname = "bad".into();
        let err = rt.run_pod_sandbox(with_hostname, "").await.expect_err("hostname on host network");
        assert!(err.to_string().contains("unable to set hostname"), "{err}");

        let c = rt.create_container(&sb, container_config("app", 0), config.clone()).await.expect("create");
        let status = rt.container_status(&c).await.expect("container status");
        assert_eq!(status.state, api::ContainerState::ContainerCreated as i32);
        assert_eq!(status.log_path, "/var/log/pods/default_web_uid-1/app/0.log");
        assert!(status.image_ref.starts_with("sha256:"));
        assert_eq!(status.annotations.get("io.kubernetes.container.restartCount").map(String::as_str), Some("0"));

        let err = rt.create_container(&sb, container_config("app", 0), config.clone()).await.expect_err("same attempt");
        assert!(err.to_string().contains("failed to reserve container name"), "{err}");

        rt.start_container(&c).await.expect("start");
        let status = rt.container_status(&c).await.expect("status");
        assert_eq!(status.state, api::ContainerState::ContainerRunning as i32);
        assert!(status.started_at >= status.created_at);
        assert!(rt.start_container(&c).await.is_err(), "starting a running container fails");

        let (code, stdout, _) = rt.exec_sync(&c, vec!["echo".into(), "hi".into()], Duration::from_secs(1)).await.expect("exec");
        assert_eq!((code, stdout.as_slice()), (0, b"echo hi".as_slice()));

        rt.stop_container(&c, Duration::from_secs(30)).await.expect("stop");
        let status = rt.container_status(&c).await.expect("status");
        assert_eq!(status.state, api::ContainerState::ContainerExited as i32);
        assert_eq!((status.exit_code, status.reason.as_str()), (0, "Completed"));
        assert!(status.finished_at >= status.started_at);

        // A restart bumps the attempt; StopPodSandbox kills it.
        let c2 = rt.create_container(&sb, container_config("app", 1), config.clone()).await.expect("create attempt 1");
        rt.start_container(&c2).await.expect("start attempt 1");
        rt.stop_pod_sandbox(&sb).await.expect("stop sandbox");
        let status = rt.pod_sandbox_status(&sb).await.expect("status");
        assert_eq!(status.state, api::PodSandboxState::SandboxNotready as i32);
        let status = rt.container_status(&c2).await.expect("status");
        assert_eq!((status.state, status.exit_code, status.reason.as_str()), (api::ContainerState::ContainerExited as i32, 137, "Error"));
        rt.stop_pod_sandbox(&sb).await.expect("stop is idempotent");

        rt.remove_container(&c).await.expect("remove");
        rt.remove_pod_sandbox(&sb).await.expect("remove sandbox");
        assert!(fake.containers().is_empty(), "removing a sandbox removes its containers");
        assert_eq!(fake.sandboxes().len(), 1);
        assert_eq!(
            fake.calls().iter().filter(|c| *c == "CreateContainer").count(),
            3,
            "failed calls are recorded too: {:?}",
            fake.calls()
        );
    }

    #[tokio::test]
    async fn exit_container_reports_the_reason() {
        let (_dir, fake, _server, rt) = setup().await;
        fake.add_image(BUSYBOX);
        let config = sandbox_config("job", "uid-1", 0);
        let sb = rt.run_pod_sandbox(config.clone(), "").await.expect("sandbox");
        let ok = rt.create_container(&sb, container_config("ok", 0), config.clone()).await.expect("create");
        let bad = rt.create_container(&sb, container_config("bad", 0), config.clone()).await.expect("create");
        fake.exit_container(&ok, 0);
        let status = rt.container_status(&ok).await.expect("status");
        assert_eq!(status.state, api::ContainerState::ContainerCreated as i32, "only a running container exits");
        for id in [&ok, &bad] {
            rt.start_container(id).await.expect("start");
        }
        fake.exit_container(&ok, 0);
        fake.exit_container(&bad, 3);
        let ok = rt.container_status(&ok).await.expect("status");
        let bad = rt.container_status(&bad).await.expect("status");
        assert_eq!((ok.exit_code, ok.reason.as_str()), (0, "Completed"));
        assert_eq!((bad.exit_code, bad.reason.as_str()), (3, "Error"));
    }

    #[tokio::test]
    async fn list_filters() {
        let (_dir, fake, _server, rt) = setup().await;
        fake.add_image(BUSYBOX);
        let a = sandbox_config("a", "uid-a", 0);
        let b = sandbox_config("b", "uid-b", 0);
        let sa = rt.run_pod_sandbox(a.clone(), "").await.expect("sandbox a");
        let sb = rt.run_pod_sandbox(b.clone(), "").await.expect("sandbox b");
        rt.stop_pod_sandbox(&sb).await.expect("stop b");
        let ca1 = rt.create_container(&sa, container_config("one", 0), a.clone()).await.expect("create");
        let ca2 = rt.create_container(&sa, container_config("two", 0), a.clone()).await.expect("create");
        let cb = rt.create_container(&sb, container_config("one", 0), b.clone()).await.expect("create");
        rt.start_container(&ca2).await.expect("start");

        let ready = api::PodSandboxFilter {
            state: Some(api::PodSandboxStateValue { state: api::PodSandboxState::SandboxReady as i32 }),
            ..Default::default()
        };
        let ids = |v: Vec<api::PodSandbox>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(rt.list_pod_sandbox(None).await.expect("list")), vec![sa.clone(), sb.clone()]);
        assert_eq!(ids(rt.list_pod_sandbox(Some(ready)).await.expect("list")), vec![sa.clone()]);
        let by_label = api::PodSandboxFilter {
            label_selector: HashMap::from([("io.kubernetes.pod.uid".to_string(), "uid-b".to_string())]),
            ..Default::default()
        };
        assert_eq!(ids(rt.list_pod_sandbox(Some(by_label)).await.expect("list")), vec![sb.clone()]);
        let by_id = api::PodSandboxFilter { id: sa.clone(), ..Default::default() };
        assert_eq!(ids(rt.list_pod_sandbox(Some(by_id)).await.expect("list")), vec![sa.clone()]);

        let cids = |v: Vec<api::Container>| v.into_iter().map(|c| c.id).collect::<Vec<_>>();
        let list = |f: api::ContainerFilter| {
            let rt = rt.clone();
            async move { cids(rt.list_containers(Some(f)).await.expect("list containers")) }
        };
        assert_eq!(cids(rt.list_containers(None).await.expect("list")), vec![ca1.clone(), ca2.clone(), cb.clone()]);
        assert_eq!(list(api::ContainerFilter { pod_sandbox_id: sa.clone(), ..Default::default() }).await, vec![ca1.clone(), ca2.clone()]);
        assert_eq!(list(api::ContainerFilter { id: cb.clone(), ..Default::default() }).await, vec![cb.clone()]);
        let running = api::ContainerStateValue { state: api::ContainerState::ContainerRunning as i32 };
        assert_eq!(list(api::ContainerFilter { state: Some(running), ..Default::default() }).await, vec![ca2.clone()]);
        let named_one = HashMap::from([("io.kubernetes.container.name".to_string(), "one".to_string())]);
        assert_eq!(
            list(api::ContainerFilter { label_selector: named_one.clone(), ..Default::default() }).await,
            vec![ca1.clone(), cb.clone()]
        );
        assert_eq!(
            list(api::ContainerFilter { label_selector: named_one, pod_sandbox_id: sb.clone(), ..Default::default() }).await,
            vec![cb.clone()]
        );
        assert_eq!(fake.containers().len(), 3);
    }

    #[tokio::test]
    async fn unknown_ids_and_images() {
        let (_dir, fake, _server, rt) = setup().await;
        let missing = "0123456789abcdef";
        assert!(rt.container_status(missing).await.expect_err("container status").is_not_found());
        assert!(rt.pod_sandbox_status(missing).await.expect_err("sandbox status").is_not_found());
        assert!(rt.stop_pod_sandbox(missing).await.expect_err("stop sandbox").is_not_found());
        assert!(rt.stop_container(missing, Duration::ZERO).await.expect_err("stop container").is_not_found());
        rt.remove_container(missing).await.expect("removing an unknown container succeeds");
        rt.remove_pod_sandbox(missing).await.expect("removing an unknown sandbox succeeds");

        assert_eq!(rt.image_status(BUSYBOX).await.expect("image status"), None);
        let config = sandbox_config("web", "uid-1", 0);
        let sb = rt.run_pod_sandbox(config.clone(), "").await.expect("sandbox");
        let err = rt.create_container(&sb, container_config("app", 0), config.clone()).await.expect_err("no image");
        assert!(err.is_not_found(), "{err}");
        assert!(err.to_string().contains("failed to get image"), "{err}");

        let err = rt.pull_image(BUSYBOX, None, None).await.expect_err("no registry");
        assert!(err.to_string().contains("failed to pull and unpack image"), "{err}");
        fake.set_pull_allowed(true);
        let image_ref = rt.pull_image("busybox:1.36", None, None).await.expect("pull");
        let image = rt.image_status(BUSYBOX).await.expect("status").expect("present after pull");
        assert_eq!(image.id, image_ref);
        assert_eq!(image.repo_tags, vec![BUSYBOX.to_string()]);
        assert_eq!(rt.image_status(&image_ref).await.expect("by id").map(|i| i.id), Some(image_ref.clone()));
        rt.create_container(&sb, container_config("app", 0), config).await.expect("create after pull");
        assert_eq!(rt.list_images().await.expect("list").len(), 1);
        rt.remove_image(BUSYBOX).await.expect("remove image");
        rt.remove_image(BUSYBOX).await.expect("removing a missing image succeeds");
        assert!(rt.list_images().await.expect("list").is_empty());
    }

    #[tokio::test]
    async fn injected_errors_fail_once_and_calls_are_recorded() {
        let (_dir, fake, _server, rt) = setup().await;
        fake.add_image(BUSYBOX);
        fake.inject_error("RunPodSandbox", Status::unavailable("CNI is not ready"));
        let config = sandbox_config("web", "uid-1", 0);
        let err = rt.run_pod_sandbox(config.clone(), "").await.expect_err("injected");
        match err {
            Error::Cri { op, source } => {
                assert_eq!(op, "run_podsandbox");
                assert_eq!((source.code(), source.message()), (tonic::Code::Unavailable, "CNI is not ready"));
            }
            other => panic!("unexpected error {other}"),
        }
        assert!(fake.sandboxes().is_empty(), "a failed call changes nothing");
        rt.run_pod_sandbox(config, "").await.expect("second call succeeds");
        assert_eq!(fake.calls(), vec!["RunPodSandbox", "RunPodSandbox"]);
        fake.clear_calls();
        rt.list_containers(None).await.expect("list");
        assert!(rt.exec(api::ExecRequest::default()).await.is_err());
        assert_eq!(fake.calls(), vec!["ListContainers", "Exec"]);
    }

    #[tokio::test]
    async fn dropping_the_server_stops_new_connections() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_fake, server) = FakeRuntime::start(dir.path()).await.expect("start");
        let endpoint = server.endpoint();
        drop(server);
        tokio::task::yield_now().await;
        // The listener is gone with the task, so a new client cannot connect.
        let connected = tokio::time::timeout(Duration::from_secs(2), RemoteRuntime::connect(&endpoint)).await;
        assert!(!matches!(connected, Ok(Ok(_))), "connected to a stopped fake");
    }
}
