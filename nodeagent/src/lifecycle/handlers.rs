//! Mirrors kubelet's pkg/kubelet/lifecycle/handlers.go: running a container's lifecycle hook
//! (`postStart`, `preStop`) — an `exec` in the container through CRI `ExecSync`, an `httpGet`
//! against the pod, or a `sleep`.
//!
//! The runner only runs a handler and says how it went; *when* to run it and how long to wait is
//! the caller's business (kuberuntime's start and kill paths): a `preStop` hook is bounded by the
//! grace period there, a `postStart` hook is not bounded at all, as in Kubernetes.
//!
//! What Kubernetes does and this copies:
//! - An exec hook fails on a non-zero exit code; the event message carries the command, the
//!   error and the output.
//! - An HTTP hook fails only when no response arrives: the status code is not looked at
//!   (`runHTTPHandler` discards the body and returns the transport error alone).
//! - The host defaults to the pod's first IP; a named port is looked up in the container's ports
//!   (and an empty one means 80); HTTPS does not verify the certificate, and an HTTPS request
//!   answered in plain HTTP is retried over HTTP.
//! - A sleep hook sleeps; cut short, it is the caller's deadline that ends it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ExecAction, HTTPGetAction, LifecycleHandler, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cri::RemoteRuntime;

/// Runs lifecycle handlers. Cheap to clone: the CRI client and the HTTP client share their
/// connections.
#[derive(Clone)]
pub(crate) struct HandlerRunner {
    runtime: RemoteRuntime,
    http: reqwest::Client,
}

/// `format.Pod`: `name_namespace(uid)`, the way kubelet names a pod in messages.
pub(crate) fn format_pod(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!(
        "{}_{}({})",
        m.name.as_deref().unwrap_or_default(),
        m.namespace.as_deref().unwrap_or_default(),
        m.uid.as_deref().unwrap_or_default()
    )
}

impl HandlerRunner {
    pub(crate) fn new(runtime: RemoteRuntime) -> HandlerRunner {
        // Kubernetes' hook client skips certificate verification (hooks target the pod itself,
        // whose certificate no one on the node can vouch for) and never uses a proxy.
        let http = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(true)
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_else(|e| {
                tracing::warn!(target: "kubelet::lifecycle", error = %e, "building the hook HTTP client; using the default one");
                reqwest::Client::new()
            });
        HandlerRunner { runtime, http }
    }

    /// Run: the handler's outcome; an error is the message of the FailedPostStartHook /
    /// FailedPreStopHook event.
    pub(crate) async fn run(
        &self,
        container_id: &str,
        pod: &Pod,
        container: &Container,
        handler: &LifecycleHandler,
        pod_ips: &[String],
    ) -> Result<(), String> {
        if let Some(exec) = &handler.exec {
            return self.run_exec(container_id, exec).await.map_err(|(error, output)| {
                format!(
                    "Exec lifecycle hook ({}) for Container {:?} in Pod {:?} failed - error: {error}, message: {output:?}",
                    go_slice(exec.command.as_deref().unwrap_or_default()),
                    container.name,
                    format_pod(pod)
                )
            });
        }
        if let Some(get) = &handler.http_get {
            return self.run_http(get, container, pod_ips).await.map_err(|error| {
                format!(
                    "HTTP lifecycle hook ({}) for Container {:?} in Pod {:?} failed - error: {error}",
                    get.path.as_deref().unwrap_or_default(),
                    container.name,
                    format_pod(pod)
                )
            });
        }
        if let Some(sleep) = &handler.sleep {
            tokio::time::sleep(Duration::from_secs(sleep.seconds.max(0) as u64)).await;
            return Ok(());
        }
        if handler.tcp_socket.is_some() {
            // Deprecated and never run by the kubelet: accepted for compatibility, does nothing.
            return Ok(());
        }
        Err(format!("Cannot run handler: invalid handler: {handler:?}"))
    }

    /// The exec hook: ExecSync without a timeout (the caller bounds it). Error: (error, output).
    async fn run_exec(&self, container_id: &str, exec: &ExecAction) -> Result<(), (String, String)> {
        let cmd = exec.command.clone().unwrap_or_default();
        let (code, stdout, stderr) = self
            .runtime
            .exec_sync(container_id, cmd.clone(), Duration::ZERO)
            .await
            .map_err(|e| (e.to_string(), String::new()))?;
        if code == 0 {
            return Ok(());
        }
        let mut output = String::from_utf8_lossy(&stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&stderr));
        Err((format!("command '{}' exited with {code}: {}", cmd.join(" "), String::from_utf8_lossy(&stderr)), output))
    }

    async fn run_http(&self, get: &HTTPGetAction, container: &Container, pod_ips: &[String]) -> Result<(), String> {
        let url = http_get_url(get, container, pod_ips)?;
        let headers = get.http_headers.clone().unwrap_or_default();
        let send = |url: String| {
            let mut req = self.http.get(url).header("User-Agent", "kube-lifecycle/1.32");
            for h in &headers {
                req = req.header(h.name.as_str(), h.value.as_str());
            }
            req.send()
        };
        match send(url.clone()).await {
            Ok(resp) => {
                // Drain the body so the connection can be reused; the status does not matter.
                let _ = resp.bytes().await;
                Ok(())
            }
            // An HTTPS request answered by a plain HTTP server: Kubernetes retries over HTTP.
            Err(e) if url.starts_with("https://") && e.is_connect() && is_plain_http_answer(&e) => {
                tracing::info!(target: "kubelet::lifecycle", url = %url, "HTTPS lifecycle hook got an HTTP response; retrying with HTTP");
                let plain = url.replacen("https://", "http://", 1);
                send(plain).await.map(drop).map_err(|e| e.to_string())
            }
            Err(e) => Err(error_chain(&e)),
        }
    }
}

/// The URL of an httpGet hook: scheme (HTTP unless HTTPS), host (the pod's first IP unless
/// given), port (a number, a number as a string, or the name of a container port; empty = 80),
/// path (a leading `/` added when missing).
pub(crate) fn http_get_url(get: &HTTPGetAction, container: &Container, pod_ips: &[String]) -> Result<String, String> {
    let host = match get.host.as_deref().filter(|h| !h.is_empty()) {
        Some(h) => h.to_string(),
        None => pod_ips.first().cloned().ok_or_else(|| "failed to find networking container: the pod has no IP".to_string())?,
    };
    let port = match &get.port {
        IntOrString::Int(p) => *p,
        IntOrString::String(s) if s.is_empty() => 80,
        IntOrString::String(s) => match s.parse::<i32>() {
            Ok(p) => p,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| format!("couldn't find port: {s} in container {:?}", container.name))?,
        },
    };
    if !(1..=65535).contains(&port) {
        return Err(format!("invalid port number: {port}"));
    }
    let scheme = if get.scheme.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("HTTPS")) { "https" } else { "http" };
    let host = if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host };
    let path = get.path.as_deref().unwrap_or_default();
    let slash = if path.starts_with('/') { "" } else { "/" };
    Ok(format!("{scheme}://{host}:{port}{slash}{path}"))
}

/// Whether a failed TLS handshake was a plain HTTP server answering (rustls sees bytes that are
/// not a TLS record).
fn is_plain_http_answer(e: &reqwest::Error) -> bool {
    let chain = error_chain(e).to_ascii_lowercase();
    chain.contains("invalidcontenttype") || chain.contains("corrupt message") || chain.contains("http response")
}

/// An error with its causes, `a: b: c`, since reqwest's Display shows only the outermost one.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Go's `%v` of a `[]string`: `[a b c]`.
fn go_slice(v: &[String]) -> String {
    format!("[{}]", v.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPHeader, SleepAction};

    fn container() -> Container {
        Container {
            name: "app".into(),
            ports: Some(vec![ContainerPort { name: Some("web".into()), container_port: 8080, ..Default::default() }]),
            ..Default::default()
        }
    }

    fn get(host: Option<&str>, port: IntOrString, path: &str, scheme: Option<&str>) -> HTTPGetAction {
        HTTPGetAction { host: host.map(String::from), port, path: Some(path.into()), scheme: scheme.map(String::from), ..Default::default() }
    }

    #[test]
    fn http_get_url_table() {
        let ips = ["10.244.0.7".to_string()];
        let cases: Vec<(HTTPGetAction, &[String], Result<&str, &str>)> = vec![
            (get(None, IntOrString::Int(80), "/hook", None), &ips, Ok("http://10.244.0.7:80/hook")),
            (get(None, IntOrString::String("web".into()), "stop", None), &ips, Ok("http://10.244.0.7:8080/stop")),
            (get(None, IntOrString::String("9090".into()), "/", Some("HTTPS")), &ips, Ok("https://10.244.0.7:9090/")),
            (get(Some("example.test"), IntOrString::String(String::new()), "/x", None), &[], Ok("http://example.test:80/x")),
            (get(Some("fd00::1"), IntOrString::Int(81), "/", None), &[], Ok("http://[fd00::1]:81/")),
            (get(None, IntOrString::String("nope".into()), "/", None), &ips, Err("couldn't find port: nope in container \"app\"")),
            (get(None, IntOrString::Int(80), "/", None), &[], Err("failed to find networking container: the pod has no IP")),
            (get(None, IntOrString::Int(0), "/", None), &ips, Err("invalid port number: 0")),
        ];
        for (action, ips, want) in cases {
            let got = http_get_url(&action, &container(), ips);
            assert_eq!(got.as_deref().map_err(String::as_str), want, "{action:?}");
        }
    }

    async fn runner() -> (crate::cri::fake::FakeRuntime, crate::cri::fake::FakeServer, HandlerRunner, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tmp");
        let (fake, server) = crate::cri::fake::FakeRuntime::start(dir.path()).await.expect("fake CRI");
        let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
        (fake, server, HandlerRunner::new(rt), dir)
    }

    /// A running container in the fake runtime, for exec hooks.
    async fn running_container(fake: &crate::cri::fake::FakeRuntime, runner: &HandlerRunner) -> String {
        use k8s_cri::v1 as api;
        fake.add_image("busybox:1.36");
        let sandbox_config = api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata { name: "web".into(), uid: "u1".into(), namespace: "default".into(), attempt: 0 }),
            ..Default::default()
        };
        let rt = &runner.runtime;
        let sb = rt.run_pod_sandbox(sandbox_config.clone(), "").await.expect("sandbox");
        let config = api::ContainerConfig {
            metadata: Some(api::ContainerMetadata { name: "app".into(), attempt: 0 }),
            image: Some(api::ImageSpec { image: "busybox:1.36".into(), ..Default::default() }),
            ..Default::default()
        };
        let id = rt.create_container(&sb, config, sandbox_config).await.expect("create");
        rt.start_container(&id).await.expect("start");
        id
    }

    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("web".into());
        p.metadata.namespace = Some("default".into());
        p.metadata.uid = Some("u1".into());
        p
    }

    #[tokio::test]
    async fn http_hook_sends_headers_and_ignores_the_status() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.expect("read");
            s.write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await.expect("write");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let (_fake, _server, runner, _dir) = runner().await;
        let handler = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(port as i32),
                path: Some("/drain".into()),
                http_headers: Some(vec![HTTPHeader { name: "X-Hook".into(), value: "prestop".into() }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        runner.run("c1", &pod(), &container(), &handler, &["127.0.0.1".into()]).await.expect("a 500 is not a hook failure");
        let request = server.await.expect("server");
        assert!(request.starts_with("GET /drain HTTP/1.1"), "{request}");
        assert!(request.to_ascii_lowercase().contains("x-hook: prestop"), "{request}");

        // Nothing listening: a failure, with kubelet's message.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        let mut h = handler.clone();
        if let Some(g) = h.http_get.as_mut() {
            g.port = IntOrString::Int(port as i32);
        }
        let err = runner.run("c1", &pod(), &container(), &h, &["127.0.0.1".into()]).await.expect_err("refused");
        assert!(err.starts_with("HTTP lifecycle hook (/drain) for Container \"app\" in Pod \"web_default(u1)\" failed - error: "), "{err}");
    }

    #[tokio::test]
    async fn exec_hook_fails_on_a_non_zero_exit() {
        let (fake, _server, runner, _dir) = runner().await;
        let id = running_container(&fake, &runner).await;
        let exec = |cmd: &[&str]| LifecycleHandler {
            exec: Some(ExecAction { command: Some(cmd.iter().map(|s| s.to_string()).collect()) }),
            ..Default::default()
        };
        runner.run(&id, &pod(), &container(), &exec(&["true"]), &[]).await.expect("exit 0");
        fake.script_exec(&["sh", "-c", "exit 3"], crate::cri::fake::ExecScript { exit_code: 3, stderr: "boom".into(), ..Default::default() });
        let err = runner.run(&id, &pod(), &container(), &exec(&["sh", "-c", "exit 3"]), &[]).await.expect_err("exit 3");
        assert_eq!(
            err,
            "Exec lifecycle hook ([sh -c exit 3]) for Container \"app\" in Pod \"web_default(u1)\" failed - error: command 'sh -c exit 3' exited with 3: boom, message: \"boom\""
        );
    }

    #[tokio::test]
    async fn sleep_hook_sleeps() {
        let (_fake, _server, runner, _dir) = runner().await;
        let h = LifecycleHandler { sleep: Some(SleepAction { seconds: 1 }), ..Default::default() };
        let started = std::time::Instant::now();
        runner.run("c1", &pod(), &container(), &h, &[]).await.expect("sleep");
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(3), "{took:?}");
        let err = runner.run("c1", &pod(), &container(), &LifecycleHandler::default(), &[]).await.expect_err("empty handler");
        assert!(err.starts_with("Cannot run handler: invalid handler"), "{err}");
    }
}
