//! Mirrors kubelet's pkg/kubelet/server/server.go: the node agent's HTTPS server — `/healthz`,
//! `/pods`, `/metrics` and `/containerLogs/{namespace}/{pod}/{container}`, which is what the API
//! server proxies `kubectl logs` to; `/exec/…` and `/attach/…` are routed to [`super::exec`],
//! `/portForward/…` to [`super::portforward`], and what they need from the rest of the agent is
//! [`super::host_interface`].
//!
//! Every connection is TLS ([`super::tls`]) and every request passes the auth filter first
//! (`InstallAuthFilter`, [`super::auth`]): 401 without credentials the agent accepts, 403 when
//! the API server says the caller may not.
//!
//! Serving a container's log, step by step:
//! 1. Find the pod among the pods the agent runs (404 if it runs no such pod).
//! 2. Check the container is one of the pod's (400 otherwise, in the API server's words).
//! 3. Ask the runtime for the pod's instances of that container (by the labels the agent put on
//!    them) and pick the newest — or, with `previous=true`, the one before it.
//! 4. Read its log path from `ContainerStatus` and stream the file through
//!    [`crate::kuberuntime::logs`]; when following, the stream ends once the container stops.

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

use actix_service::{Service as _, ServiceFactory as _};
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::http::header::AUTHORIZATION;
use actix_web::middleware::{Next, from_fn};
use actix_web::{App, HttpResponse, web};
use futures::StreamExt;
use k8s_cri::v1 as api;
use k8s_openapi::api::core::v1::Pod;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;

use super::auth::{Credentials, KubeletAuth};
use super::{exec, portforward};
use super::host_interface::{Provider, container_selector, find_pod_container, select_instance, text};
use crate::kuberuntime::logs::{ContainerLog, LogOptions};

/// How long a graceful stop waits for open requests (followed logs included) before closing them.
const SHUTDOWN_TIMEOUT_SECS: u64 = 2;

/// Buffered output chunks between the log reader and the HTTP response: a slow client slows the
/// reader down instead of growing memory.
const LOG_CHANNEL_CAPACITY: usize = 16;

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The subject of the client certificate the handshake verified, kept with the connection.
#[derive(Clone)]
struct PeerSubject(pki::Subject);

/// Serve on `listener` with `tls` and `auth` until `shutdown` turns true (or its sender is
/// dropped), then stop gracefully: stop accepting, give open requests [`SHUTDOWN_TIMEOUT_SECS`]
/// to finish.
pub(crate) async fn serve(
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    auth: Arc<KubeletAuth>,
    provider: Arc<dyn Provider>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    let provider = web::Data::from(provider);
    let auth = web::Data::from(auth);
    let app = move || {
        App::new()
            .app_data(provider.clone())
            .app_data(auth.clone())
            .wrap(from_fn(auth_filter))
            .route("/healthz", web::get().to(healthz))
            .route("/pods", web::get().to(pods))
            .route("/metrics", web::get().to(metrics))
            .route("/debug/trace/pods/{uid}", web::get().to(trace))
            .route("/containerLogs/{namespace}/{pod}/{container}", web::get().to(container_logs))
            .route("/exec/{namespace}/{pod}/{container}", web::route().to(exec::exec))
            .route("/attach/{namespace}/{pod}/{container}", web::route().to(exec::attach))
            .route("/portForward/{namespace}/{pod}", web::route().to(portforward::port_forward))
    };
    let acceptor = TlsAcceptor::from(tls);
    let server = actix_server::Server::build()
        .listen("kubelet", listener, move || {
            let http = actix_http::HttpService::build()
                .on_connect_ext(|conn: &TlsStream<TcpStream>, data: &mut actix_http::Extensions| {
                    if let Some(subject) = peer_subject(conn) {
                        data.insert(PeerSubject(subject));
                    }
                })
                .finish(actix_service::map_config(app(), |_: ()| actix_web::dev::AppConfig::default()));
            let acceptor = acceptor.clone();
            actix_service::fn_factory(move || {
                let http = http.new_service(());
                let acceptor = acceptor.clone();
                async move {
                    let http = std::rc::Rc::new(http.await.map_err(|_| ())?);
                    Ok::<_, ()>(actix_service::fn_service(move |tcp: TcpStream| {
                        let (http, acceptor) = (http.clone(), acceptor.clone());
                        async move {
                            let peer = tcp.peer_addr().ok();
                            let _ = tcp.set_nodelay(true);
                            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                                Ok(Ok(stream)) => stream,
                                Ok(Err(e)) => {
                                    tracing::debug!(target: "kubelet::server", ?peer, error = %e, "TLS handshake failed");
                                    return Ok(());
                                }
                                Err(_) => return Ok(()),
                            };
                            http.call((stream, actix_http::Protocol::Http1, peer)).await.map_err(|_| ())
                        }
                    }))
                }
            })
        })?
        .shutdown_timeout(SHUTDOWN_TIMEOUT_SECS)
        .disable_signals()
        .run();
    let handle = server.handle();
    tracing::info!(target: "kubelet::server", %address, "serving /healthz, /pods, /metrics, /containerLogs, /exec, /attach, /portForward");
    tokio::select! {
        result = server => result,
        // The `watch::Ref` is dropped inside, so the future stays `Send` (callers `tokio::spawn` it).
        () = async { drop(shutdown.wait_for(|stop| *stop).await) } => {
            handle.stop(true).await;
            tracing::info!(target: "kubelet::server", %address, "stopped");
            Ok(())
        }
    }
}

/// The subject of a verified client certificate (the handshake verifies any that is offered).
fn peer_subject(conn: &TlsStream<TcpStream>) -> Option<pki::Subject> {
    let leaf = conn.get_ref().1.peer_certificates()?.first()?;
    pki::subject_from_der(leaf).ok()
}

/// `InstallAuthFilter`: every request is authenticated and authorized before it is routed.
async fn auth_filter(req: ServiceRequest, next: Next<impl MessageBody + 'static>) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let Some(auth) = req.app_data::<web::Data<KubeletAuth>>().cloned() else {
        return Err(actix_web::error::ErrorInternalServerError("no authenticator"));
    };
    let credentials = match (req.conn_data::<PeerSubject>(), req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok())) {
        (Some(PeerSubject(subject)), _) if !subject.common_name.is_empty() => Credentials::Certificate(subject.clone()),
        (_, Some(header)) => match header.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() => Credentials::Bearer(token.trim().to_string()),
            _ => Credentials::None,
        },
        _ => Credentials::None,
    };
    match auth.check(credentials, req.method().as_str(), req.path()).await {
        Ok(_) => Ok(next.call(req).await?.map_into_left_body()),
        Err(refusal) => {
            let status = StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Ok(req.into_response(text(status, refusal.message)).map_into_right_body())
        }
    }
}

async fn healthz(provider: web::Data<dyn Provider>) -> HttpResponse {
    match provider.healthz() {
        Ok(()) => text(StatusCode::OK, "ok".into()),
        Err(reason) => text(StatusCode::INTERNAL_SERVER_ERROR, reason),
    }
}

async fn pods(provider: web::Data<dyn Provider>) -> HttpResponse {
    let list = k8s_openapi::List::<Pod> { items: provider.pods(), metadata: Default::default() };
    HttpResponse::Ok().json(list)
}

async fn metrics() -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(crate::metrics::render())
}

/// The steps this agent (and the runtime and CSI drivers, through it) performed for a pod, for the API server's
/// `kubelab trace` gatherer.
async fn trace(uid: web::Path<String>) -> HttpResponse {
    HttpResponse::Ok().json(podtrace::recorder().steps(&uid, &["nodeagent", "cri", "csi"]))
}

async fn container_logs(
    provider: web::Data<dyn Provider>,
    path: web::Path<(String, String, String)>,
    query: web::Query<HashMap<String, String>>,
) -> HttpResponse {
    let (namespace, pod, container) = path.into_inner();
    match stream_container_logs(provider.get_ref(), &namespace, &pod, &container, &query).await {
        Ok(response) | Err(response) => response,
    }
}

async fn stream_container_logs(
    provider: &dyn Provider,
    namespace: &str,
    pod_name: &str,
    container: &str,
    query: &HashMap<String, String>,
) -> Result<HttpResponse, HttpResponse> {
    let bad_request = |msg: String| text(StatusCode::BAD_REQUEST, msg);
    let internal = |msg: String| text(StatusCode::INTERNAL_SERVER_ERROR, msg);
    let opts = LogOptions::from_query(query).map_err(|e| bad_request(e.to_string()))?;

    // Steps 1 and 2: the pod, and the container in its spec.
    let pod = find_pod_container(provider, namespace, pod_name, container)?;

    // Step 3: its instances in the runtime, by the agent's labels (and the pod's UID, so that a
    // deleted pod's leftovers under the same name are never shown).
    let runtime = provider.runtime();
    let selector = container_selector(&pod, namespace, pod_name, container);
    let filter = api::ContainerFilter { label_selector: selector, ..Default::default() };
    let instances = runtime.list_containers(Some(filter)).await.map_err(|e| internal(e.to_string()))?;
    // Without `previous`, nothing is selected only when the container has no instance yet.
    let Some(instance) = select_instance(instances, opts.previous) else {
        return Err(bad_request(if opts.previous {
            format!("previous terminated container {container:?} in pod {pod_name:?} not found")
        } else {
            format!("container {container:?} in pod {pod_name:?} is waiting to start: ContainerCreating")
        }));
    };

    // Step 4: stream its log file.
    let status = runtime.container_status(&instance.id).await.map_err(|e| internal(e.to_string()))?;
    if status.log_path.is_empty() {
        return Err(internal(format!("container {container:?} in pod {pod_name:?} has no log file")));
    }
    let log = ContainerLog::open(Path::new(&status.log_path)).await.map_err(|e| internal(e.to_string()))?;
    let (tx, rx) = mpsc::channel(LOG_CHANNEL_CAPACITY);
    let id = instance.id;
    let pod_key = format!("{namespace}/{pod_name}");
    let container = container.to_string();
    actix_web::rt::spawn(async move {
        let still_running = || {
            let (runtime, id) = (runtime.clone(), id.clone());
            async move {
                runtime
                    .container_status(&id)
                    .await
                    .is_ok_and(|s| s.state == api::ContainerState::ContainerRunning as i32)
            }
        };
        if let Err(e) = log.stream(&opts, tx, still_running).await {
            tracing::warn!(target: "kubelet::server", pod = %pod_key, container, error = %e, "streaming container log failed");
        }
    });
    let body = ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    Ok(HttpResponse::Ok().content_type("text/plain; charset=utf-8").streaming(body))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::SocketAddr;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::container::{CONTAINER_NAME_LABEL, POD_NAME_LABEL, POD_NAMESPACE_LABEL, POD_UID_LABEL};
    use crate::cri::RemoteRuntime;
    use crate::cri::fake::{FakeRuntime, FakeServer};

    const BUSYBOX: &str = "docker.io/library/busybox:1.36";

    /// A GET as the API server makes it without `--kubelet-certificate-authority` (the serving
    /// certificate is self-signed).
    async fn get(url: String) -> reqwest::Result<reqwest::Response> {
        reqwest::Client::builder().danger_accept_invalid_certs(true).build()?.get(url).send().await
    }

    struct TestProvider {
        pods: Vec<Pod>,
        runtime: RemoteRuntime,
        health: Mutex<Result<(), String>>,
    }

    impl Provider for TestProvider {
        fn pods(&self) -> Vec<Pod> {
            self.pods.clone()
        }
        fn runtime(&self) -> RemoteRuntime {
            self.runtime.clone()
        }
        fn healthz(&self) -> Result<(), String> {
            self.health.lock().unwrap_or_else(|p| p.into_inner()).clone()
        }
    }

    struct Node {
        _dir: tempfile::TempDir,
        log_dir: std::path::PathBuf,
        fake: FakeRuntime,
        _fake_server: FakeServer,
        provider: Arc<TestProvider>,
        sandbox: String,
        sandbox_config: api::PodSandboxConfig,
        addr: SocketAddr,
        stop: watch::Sender<bool>,
        server: tokio::task::JoinHandle<std::io::Result<()>>,
    }

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "uid": "uid-1"},
            "spec": {
                "initContainers": [{"name": "init", "image": "busybox:1.36"}],
                "containers": [{"name": "app", "image": "busybox:1.36"}, {"name": "sidecar", "image": "busybox:1.36"}]
            }
        }))
        .expect("pod")
    }

    async fn start() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let (fake, fake_server) = FakeRuntime::start(dir.path()).await.expect("fake runtime");
        fake.add_image(BUSYBOX);
        let runtime = RemoteRuntime::connect(&fake_server.endpoint()).await.expect("connect");
        let log_dir = dir.path().join("pods/shop_web_uid-1");
        let sandbox_config = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: "web".into(),
                uid: "uid-1".into(),
                namespace: "shop".into(),
                attempt: 0,
            }),
            hostname: "web".into(),
            log_directory: log_dir.display().to_string(),
            ..Default::default()
        };
        let sandbox = runtime.run_pod_sandbox(sandbox_config.clone(), "").await.expect("sandbox");
        let provider = Arc::new(TestProvider { pods: vec![pod()], runtime, health: Mutex::new(Ok(())) });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stop_rx) = watch::channel(false);
        let tls = super::super::tls::server_config(&Default::default(), dir.path(), "n1", &[]).expect("tls");
        // The kubelet's defaults: anyone, anything (the auth filter's own tests are in auth.rs and
        // the end-to-end tests).
        let auth = Arc::new(KubeletAuth::new(Default::default(), "n1".into(), None).expect("auth"));
        let server = tokio::spawn(serve(listener, tls, auth, provider.clone(), stop_rx));
        Node { _dir: dir, log_dir, fake, _fake_server: fake_server, provider, sandbox, sandbox_config, addr, stop, server }
    }

    impl Node {
        fn url(&self, path: &str) -> String {
            format!("https://{}{path}", self.addr)
        }

        /// Create (and start) attempt `attempt` of `name`, its log file holding `log`.
        async fn container(&self, name: &str, attempt: u32, log: &str) -> String {
            let log_path = format!("{name}/{attempt}.log");
            let file = self.log_dir.join(&log_path);
            tokio::fs::create_dir_all(file.parent().expect("parent")).await.expect("log dir");
            tokio::fs::write(&file, log).await.expect("write log");
            let labels = HashMap::from([
                (POD_NAMESPACE_LABEL.to_string(), "shop".to_string()),
                (POD_NAME_LABEL.to_string(), "web".to_string()),
                (POD_UID_LABEL.to_string(), "uid-1".to_string()),
                (CONTAINER_NAME_LABEL.to_string(), name.to_string()),
            ]);
            let config = api::ContainerConfig {
                metadata: Some(api::ContainerMetadata { name: name.into(), attempt }),
                image: Some(api::ImageSpec { image: "busybox:1.36".into(), ..Default::default() }),
                labels,
                log_path,
                ..Default::default()
            };
            let rt = &self.provider.runtime;
            let id = rt.create_container(&self.sandbox, config, self.sandbox_config.clone()).await.expect("create");
            rt.start_container(&id).await.expect("start");
            id
        }

        async fn get(&self, path: &str) -> (u16, String) {
            let resp = get(self.url(path)).await.expect("request");
            let status = resp.status().as_u16();
            (status, resp.text().await.expect("body"))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn healthz_pods_metrics_and_shutdown() {
        let node = start().await;
        assert_eq!(node.get("/healthz").await, (200, "ok".to_string()));
        *node.provider.health.lock().unwrap_or_else(|p| p.into_inner()) = Err("PLEG is not healthy".into());
        assert_eq!(node.get("/healthz").await, (500, "PLEG is not healthy".to_string()));

        let (status, body) = node.get("/pods").await;
        assert_eq!(status, 200);
        let list: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!((list["kind"].as_str(), list["apiVersion"].as_str()), (Some("PodList"), Some("v1")));
        assert_eq!(list["items"][0]["metadata"]["name"], "web");

        let resp = get(node.url("/metrics")).await.expect("metrics");
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
        let body = resp.text().await.expect("body");
        assert!(body.contains("kubelet_runtime_operations_duration_seconds_bucket"), "{body}");

        let healthz = node.url("/healthz");
        node.stop.send(true).expect("signal shutdown");
        tokio::time::timeout(Duration::from_secs(5), node.server)
            .await
            .expect("stops in time")
            .expect("join")
            .expect("serve");
        assert!(get(healthz).await.is_err(), "still serving after shutdown");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn container_logs() {
        let node = start().await;
        let first = node.container("app", 0, "2024-05-01T10:00:00Z stdout F first run\n").await;
        node.fake.exit_container(&first, 1);
        node.container(
            "app",
            1,
            "2024-05-01T10:01:00Z stdout F one\n2024-05-01T10:01:01Z stderr P tw\n2024-05-01T10:01:02Z stderr F o\n2024-05-01T10:01:03Z stdout F three\n",
        )
        .await;

        let resp = get(node.url("/containerLogs/shop/web/app")).await.expect("logs");
        assert_eq!(resp.status().as_u16(), 200);
        assert!(resp.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/plain")));
        assert_eq!(resp.text().await.expect("body"), "one\ntwo\nthree\n");
        assert_eq!(node.get("/containerLogs/shop/web/app?tailLines=2").await, (200, "two\nthree\n".into()));
        assert_eq!(
            node.get("/containerLogs/shop/web/app?tailLines=1&timestamps=true").await,
            (200, "2024-05-01T10:01:03.000000000Z three\n".into())
        );
        assert_eq!(node.get("/containerLogs/shop/web/app?limitBytes=5").await, (200, "one\nt".into()));
        assert_eq!(node.get("/containerLogs/shop/web/app?previous=true").await, (200, "first run\n".into()));

        assert_eq!(node.get("/containerLogs/shop/nope/app").await, (404, "pod \"nope\" not found".into()));
        assert_eq!(node.get("/containerLogs/other/web/app").await, (404, "pod \"web\" not found".into()));
        assert_eq!(
            node.get("/containerLogs/shop/web/db").await,
            (400, "container \"db\" is not valid for pod \"web\"".into())
        );
        assert_eq!(
            node.get("/containerLogs/shop/web/sidecar").await,
            (400, "container \"sidecar\" in pod \"web\" is waiting to start: ContainerCreating".into())
        );
        assert_eq!(
            node.get("/containerLogs/shop/web/init?previous=true").await,
            (400, "previous terminated container \"init\" in pod \"web\" not found".into())
        );
        node.container("init", 0, "").await;
        assert_eq!(
            node.get("/containerLogs/shop/web/init?previous=true").await,
            (400, "previous terminated container \"init\" in pod \"web\" not found".into())
        );
        assert_eq!(node.get("/containerLogs/shop/web/init").await, (200, String::new()));
        let (status, body) = node.get("/containerLogs/shop/web/app?tailLines=-1").await;
        assert_eq!(status, 400, "{body}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn follow_streams_until_the_container_exits() {
        let node = start().await;
        let id = node.container("app", 0, "2024-05-01T10:00:00Z stdout F hello\n").await;
        let resp = get(node.url("/containerLogs/shop/web/app?follow=true")).await.expect("logs");
        assert_eq!(resp.status().as_u16(), 200);
        let mut body = resp.bytes_stream();
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .expect("chunk in time")
                .map(|chunk| chunk.expect("chunk"))
        };
        assert_eq!(next().await.as_deref(), Some(b"hello\n".as_slice()));

        let path = node.log_dir.join("app/0.log");
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open log");
        file.write_all(b"2024-05-01T10:00:01Z stdout F world\n").expect("append");
        let appended = Instant::now();
        assert_eq!(next().await.as_deref(), Some(b"world\n".as_slice()));
        assert!(appended.elapsed() < Duration::from_secs(1), "line took {:?}", appended.elapsed());

        node.fake.exit_container(&id, 0);
        let exited = Instant::now();
        assert_eq!(next().await, None, "the stream ends once the container has exited");
        assert!(exited.elapsed() < Duration::from_secs(3), "took {:?}", exited.elapsed());
    }
}
