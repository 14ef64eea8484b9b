//! Mirrors kubelet's prober/prober.go: run one probe of one container — pick the handler from
//! the probe's spec, retry a handler that errors, and record the Unhealthy / ProbeWarning
//! events a failed or doubtful probe deserves.

use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::probe::{self, Outcome};
use super::{MAX_PROBE_RETRIES, ProbeResult, ProbeType};
use crate::cri::RemoteRuntime;
use crate::error::{Error, Result};
use crate::events::{self, Recorder};

/// What a probe worker calls once per tick. The real one is [`Prober`]; the worker's tests
/// script results with a fake, so probe timing is tested without a runtime or a network.
pub(crate) trait ProbeRunner: Send + Sync + 'static {
    /// Run `container`'s `probe_type` probe once. `Ok` is the result to count; `Err` means the
    /// probe could not be run, and the worker throws that tick away.
    fn probe<'a>(
        &'a self,
        probe_type: ProbeType,
        pod: &'a Pod,
        status: &'a PodStatus,
        container: &'a Container,
        container_id: &'a str,
    ) -> BoxFuture<'a, Result<ProbeResult>>;
}

/// The probe's spec of the given type on a container.
pub(crate) fn probe_spec(container: &Container, probe_type: ProbeType) -> Option<&Probe> {
    match probe_type {
        ProbeType::Liveness => container.liveness_probe.as_ref(),
        ProbeType::Readiness => container.readiness_probe.as_ref(),
        ProbeType::Startup => container.startup_probe.as_ref(),
    }
}

/// The probe's `timeoutSeconds` (default 1, at least 1).
pub(crate) fn probe_timeout(p: &Probe) -> Duration {
    Duration::from_secs(p.timeout_seconds.unwrap_or(super::DEFAULT_TIMEOUT_SECONDS).max(1) as u64)
}

/// A probe port: a number, or the name of one of the container's ports
/// (probe.ResolveContainerPort).
pub(crate) fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16> {
    let n = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .ok_or_else(|| Error::ProbeSpec(format!("couldn't find port {name:?} in container {:?}", container.name)))?,
    };
    u16::try_from(n).ok().filter(|p| *p > 0).ok_or_else(|| Error::ProbeSpec(format!("invalid port number: {n}")))
}

/// The real prober: exec through the runtime, HTTP and TCP from the node.
pub(crate) struct Prober {
    runtime: RemoteRuntime,
    recorder: Recorder,
    http: reqwest::Client,
}

impl Prober {
    pub(crate) fn new(runtime: RemoteRuntime, recorder: Recorder) -> Result<Prober> {
        let http = probe::http::new_client().map_err(Error::ProbeClient)?;
        Ok(Prober { runtime, recorder, http })
    }

    /// One run of the handler the probe names.
    async fn run_probe(
        &self,
        p: &Probe,
        status: &PodStatus,
        container: &Container,
        container_id: &str,
    ) -> Result<(Outcome, String)> {
        let timeout = probe_timeout(p);
        let pod_ip = status.pod_ip.as_deref().unwrap_or_default();
        if let Some(exec) = &p.exec {
            let cmd = exec.command.clone().unwrap_or_default();
            if cmd.is_empty() {
                return Err(Error::ProbeSpec("exec probe without a command".into()));
            }
            return probe::exec::probe(&self.runtime, container_id, &cmd, timeout).await;
        }
        if let Some(h) = &p.http_get {
            let host = h.host.as_deref().filter(|h| !h.is_empty()).unwrap_or(pod_ip);
            if host.is_empty() {
                return Err(Error::NotReady("the pod has no IP yet".into()));
            }
            let port = resolve_port(&h.port, container)?;
            let url = probe::http::format_url(h.scheme.as_deref().unwrap_or("HTTP"), host, port, h.path.as_deref().unwrap_or("/"));
            let headers = h.http_headers.clone().unwrap_or_default();
            tracing::trace!(target: "kubelet::prober", url, "HTTP probe");
            return Ok(probe::http::probe(&self.http, &url, &headers, timeout).await);
        }
        if let Some(t) = &p.tcp_socket {
            let host = t.host.as_deref().filter(|h| !h.is_empty()).unwrap_or(pod_ip);
            if host.is_empty() {
                return Err(Error::NotReady("the pod has no IP yet".into()));
            }
            let port = resolve_port(&t.port, container)?;
            return Ok(probe::tcp::probe(host, port, timeout).await);
        }
        if p.grpc.is_some() {
            return Err(Error::ProbeSpec("gRPC probes are not supported by this node agent".into()));
        }
        Err(Error::ProbeSpec("missing probe handler".into()))
    }

    async fn probe_inner(
        &self,
        probe_type: ProbeType,
        pod: &Pod,
        status: &PodStatus,
        container: &Container,
        container_id: &str,
    ) -> Result<ProbeResult> {
        // No probe of this type: nothing can fail (the manager starts no worker for it anyway).
        let Some(spec) = probe_spec(container, probe_type) else { return Ok(ProbeResult::Success) };
        let field = Some(events::container_field_path(pod, &container.name));
        let event = |reason: &str, message: String| self.recorder.pod_event(pod, field.clone(), events::WARNING, reason, message);

        // runProbeWithRetries: a handler that errors is tried again at once, a few times.
        let mut result = self.run_probe(spec, status, container, container_id).await;
        for _ in 1..MAX_PROBE_RETRIES {
            if result.is_ok() {
                break;
            }
            result = self.run_probe(spec, status, container, container_id).await;
        }
        let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
        match result {
            Err(e) => {
                tracing::debug!(target: "kubelet::prober", probe = %probe_type, pod_uid, container = %container.name, error = %e, "probe errored");
                event(events::CONTAINER_UNHEALTHY, format!("{probe_type} probe errored and resulted in unknown state: {e}"));
                Err(e)
            }
            Ok((Outcome::Success, _)) => {
                tracing::trace!(target: "kubelet::prober", probe = %probe_type, pod_uid, container = %container.name, "probe succeeded");
                Ok(ProbeResult::Success)
            }
            Ok((Outcome::Warning, output)) => {
                event(events::CONTAINER_PROBE_WARNING, format!("{probe_type} probe warning: {output}"));
                Ok(ProbeResult::Success)
            }
            Ok((Outcome::Failure, output)) => {
                tracing::debug!(target: "kubelet::prober", probe = %probe_type, pod_uid, container = %container.name, %output, "probe failed");
                event(events::CONTAINER_UNHEALTHY, format!("{probe_type} probe failed: {output}"));
                Ok(ProbeResult::Failure)
            }
        }
    }
}

impl ProbeRunner for Prober {
    fn probe<'a>(
        &'a self,
        probe_type: ProbeType,
        pod: &'a Pod,
        status: &'a PodStatus,
        container: &'a Container,
        container_id: &'a str,
    ) -> BoxFuture<'a, Result<ProbeResult>> {
        Box::pin(self.probe_inner(probe_type, pod, status, container, container_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, TCPSocketAction};

    fn container_with_ports() -> Container {
        Container {
            name: "web".into(),
            ports: Some(vec![ContainerPort { name: Some("http".into()), container_port: 8080, ..Default::default() }]),
            ..Default::default()
        }
    }

    #[test]
    fn ports_by_number_and_by_name() {
        let c = container_with_ports();
        assert_eq!(resolve_port(&IntOrString::Int(80), &c).ok(), Some(80));
        assert_eq!(resolve_port(&IntOrString::String("http".into()), &c).ok(), Some(8080));
        assert!(resolve_port(&IntOrString::String("grpc".into()), &c).is_err());
        assert!(resolve_port(&IntOrString::Int(0), &c).is_err());
        assert!(resolve_port(&IntOrString::Int(70000), &c).is_err());
    }

    /// The real prober against real local listeners: httpGet with a named port and the pod IP
    /// as the default host, tcpSocket on a closed port.
    #[tokio::test]
    async fn http_and_tcp_probes_use_the_pod_ip_and_named_ports() {
        let dir = tempfile::tempdir().expect("tmp");
        let (_fake, server) = crate::cri::fake::FakeRuntime::start(dir.path()).await.expect("fake CRI");
        let rt = RemoteRuntime::connect(&server.endpoint()).await.expect("connect");
        let prober = Prober::new(rt, Recorder::default()).expect("prober");

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok").await;
                });
            }
        });
        let mut c = container_with_ports();
        c.ports.as_mut().expect("ports")[0].container_port = port as i32;
        c.readiness_probe = Some(Probe {
            http_get: Some(HTTPGetAction { path: Some("/ready".into()), port: IntOrString::String("http".into()), ..Default::default() }),
            ..Default::default()
        });
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        c.liveness_probe = Some(Probe {
            tcp_socket: Some(TCPSocketAction { port: IntOrString::Int(closed as i32), ..Default::default() }),
            ..Default::default()
        });
        let pod = Pod::default();
        let status = PodStatus { pod_ip: Some("127.0.0.1".into()), ..Default::default() };
        let r = prober.probe(ProbeType::Readiness, &pod, &status, &c, "cid").await;
        assert_eq!(r.ok(), Some(ProbeResult::Success));
        let r = prober.probe(ProbeType::Liveness, &pod, &status, &c, "cid").await;
        assert_eq!(r.ok(), Some(ProbeResult::Failure));
        // No pod IP yet: the probe cannot run (an error, thrown away by the worker).
        let r = prober.probe(ProbeType::Readiness, &pod, &PodStatus::default(), &c, "cid").await;
        assert!(r.is_err());
    }
}
