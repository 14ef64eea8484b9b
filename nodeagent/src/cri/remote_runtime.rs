//! Mirrors kubelet's cri-client remote_runtime.go and remote_image.go: one typed method per CRI
//! call, each timed into `kubelet_runtime_operations_duration_seconds` and logged at debug level
//! on target `cri`, so `RUST_LOG=cri=debug` shows every call the agent makes.

use std::time::{Duration, Instant};

use k8s_cri::v1 as api;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tonic::transport::{Channel, Endpoint};

use crate::error::{Error, Result};
use crate::metrics::metrics;
use tracing::Instrument as _;

/// A handle on the runtime and image services of one CRI endpoint. Cheap to clone: every clone
/// shares one HTTP/2 connection, which multiplexes concurrent calls.
#[derive(Clone, Debug)]
pub struct RemoteRuntime {
    runtime: RuntimeServiceClient<Channel>,
    images: ImageServiceClient<Channel>,
    endpoint: String,
}

/// The CRI method an operation label names (`run_podsandbox` → `RunPodSandbox`): the metric
/// keeps the kubelet's labels, a trace shows the call as the CRI API spells it.
fn cri_method(op: &str) -> String {
    op.split('_')
        .map(|w| match w {
            "podsandbox" => "PodSandbox".to_string(),
            w => w[..1].to_uppercase() + &w[1..],
        })
        .collect()
}

/// Time one CRI call into the operations histogram; errors are counted and mapped to [`Error::Cri`].
async fn timed<T>(
    op: &'static str,
    fut: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T> {
    // Inside a pod's step this call is a step of that pod too (`kubelab trace`).
    let span = tracing::info_span!(target: "cri", "cri", step = cri_method(op), error = tracing::field::Empty);
    let start = Instant::now();
    let res = fut.instrument(span.clone()).await;
    let elapsed = start.elapsed();
    if let Err(status) = &res {
        span.record("error", status.message());
    }
    let m = metrics();
    m.runtime_operations_duration.with_label_values(&[op]).observe(elapsed.as_secs_f64());
    match res {
        Ok(r) => {
            tracing::debug!(target: "cri", op, ms = elapsed.as_secs_f64() * 1e3, "CRI call");
            Ok(r.into_inner())
        }
        Err(status) => {
            m.runtime_operations_errors.with_label_values(&[op]).inc();
            tracing::debug!(target: "cri", op, ms = elapsed.as_secs_f64() * 1e3, code = ?status.code(), error = status.message(), "CRI call failed");
            Err(Error::cri(op, status))
        }
    }
}

impl RemoteRuntime {
    /// Dial `endpoint` (`unix:///run/containerd/containerd.sock` or a bare socket path).
    pub async fn connect(endpoint: &str) -> Result<RemoteRuntime> {
        let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
        let uri = format!("unix://{path}");
        let connect_err = |source| Error::Connect { endpoint: endpoint.to_string(), source };
        let channel = Endpoint::from_shared(uri)
            .map_err(connect_err)?
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(connect_err)?;
        // Image archives and big container lists can exceed tonic's 4 MiB default.
        let runtime = RuntimeServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
        let images = ImageServiceClient::new(channel).max_decoding_message_size(64 << 20);
        Ok(RemoteRuntime { runtime, images, endpoint: endpoint.to_string() })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    // ---- RuntimeService ----

    pub async fn version(&self) -> Result<api::VersionResponse> {
        timed("version", self.runtime.clone().version(api::VersionRequest { version: "v1".into() })).await
    }

    pub async fn status(&self) -> Result<api::StatusResponse> {
        timed("status", self.runtime.clone().status(api::StatusRequest { verbose: false })).await
    }

    pub async fn run_pod_sandbox(&self, config: api::PodSandboxConfig, runtime_handler: &str) -> Result<String> {
        let req = api::RunPodSandboxRequest { config: Some(config), runtime_handler: runtime_handler.to_string() };
        Ok(timed("run_podsandbox", self.runtime.clone().run_pod_sandbox(req)).await?.pod_sandbox_id)
    }

    pub async fn stop_pod_sandbox(&self, id: &str) -> Result<()> {
        let req = api::StopPodSandboxRequest { pod_sandbox_id: id.to_string() };
        timed("stop_podsandbox", self.runtime.clone().stop_pod_sandbox(req)).await.map(drop)
    }

    pub async fn remove_pod_sandbox(&self, id: &str) -> Result<()> {
        let req = api::RemovePodSandboxRequest { pod_sandbox_id: id.to_string() };
        timed("remove_podsandbox", self.runtime.clone().remove_pod_sandbox(req)).await.map(drop)
    }

    pub async fn pod_sandbox_status(&self, id: &str) -> Result<api::PodSandboxStatus> {
        let req = api::PodSandboxStatusRequest { pod_sandbox_id: id.to_string(), verbose: false };
        let resp = timed("podsandbox_status", self.runtime.clone().pod_sandbox_status(req)).await?;
        resp.status.ok_or_else(|| Error::cri("podsandbox_status", tonic::Status::not_found(format!("sandbox {id}: empty status"))))
    }

    pub async fn list_pod_sandbox(&self, filter: Option<api::PodSandboxFilter>) -> Result<Vec<api::PodSandbox>> {
        let req = api::ListPodSandboxRequest { filter };
        Ok(timed("list_podsandbox", self.runtime.clone().list_pod_sandbox(req)).await?.items)
    }

    pub async fn create_container(
        &self,
        pod_sandbox_id: &str,
        config: api::ContainerConfig,
        sandbox_config: api::PodSandboxConfig,
    ) -> Result<String> {
        let req = api::CreateContainerRequest {
            pod_sandbox_id: pod_sandbox_id.to_string(),
            config: Some(config),
            sandbox_config: Some(sandbox_config),
        };
        Ok(timed("create_container", self.runtime.clone().create_container(req)).await?.container_id)
    }

    pub async fn start_container(&self, id: &str) -> Result<()> {
        let req = api::StartContainerRequest { container_id: id.to_string() };
        timed("start_container", self.runtime.clone().start_container(req)).await.map(drop)
    }

    /// Stop with SIGTERM, then SIGKILL after `timeout` (the remaining grace period).
    pub async fn stop_container(&self, id: &str, timeout: Duration) -> Result<()> {
        let req = api::StopContainerRequest { container_id: id.to_string(), timeout: timeout.as_secs() as i64 };
        timed("stop_container", self.runtime.clone().stop_container(req)).await.map(drop)
    }

    pub async fn remove_container(&self, id: &str) -> Result<()> {
        let req = api::RemoveContainerRequest { container_id: id.to_string() };
        timed("remove_container", self.runtime.clone().remove_container(req)).await.map(drop)
    }

    pub async fn list_containers(&self, filter: Option<api::ContainerFilter>) -> Result<Vec<api::Container>> {
        let req = api::ListContainersRequest { filter };
        Ok(timed("list_containers", self.runtime.clone().list_containers(req)).await?.containers)
    }

    pub async fn container_status(&self, id: &str) -> Result<api::ContainerStatus> {
        let req = api::ContainerStatusRequest { container_id: id.to_string(), verbose: false };
        let resp = timed("container_status", self.runtime.clone().container_status(req)).await?;
        resp.status.ok_or_else(|| Error::cri("container_status", tonic::Status::not_found(format!("container {id}: empty status"))))
    }

    /// Run `cmd` in the container and wait for it (probes, hooks): (exit code, stdout, stderr).
    /// A zero `timeout` means none; an expired one is a DEADLINE_EXCEEDED error.
    pub async fn exec_sync(&self, container_id: &str, cmd: Vec<String>, timeout: Duration) -> Result<(i32, Vec<u8>, Vec<u8>)> {
        let req = api::ExecSyncRequest { container_id: container_id.to_string(), cmd, timeout: timeout.as_secs() as i64 };
        let resp = timed("exec_sync", self.runtime.clone().exec_sync(req)).await?;
        Ok((resp.exit_code, resp.stdout, resp.stderr))
    }

    /// A URL on the runtime's streaming server for an interactive exec.
    pub async fn exec(&self, req: api::ExecRequest) -> Result<String> {
        Ok(timed("exec", self.runtime.clone().exec(req)).await?.url)
    }

    pub async fn attach(&self, req: api::AttachRequest) -> Result<String> {
        Ok(timed("attach", self.runtime.clone().attach(req)).await?.url)
    }

    /// A URL on the runtime's streaming server that forwards ports inside the sandbox's network
    /// namespace (`ports` empty: the client names them per stream).
    pub async fn port_forward(&self, pod_sandbox_id: &str, ports: Vec<i32>) -> Result<String> {
        let req = api::PortForwardRequest { pod_sandbox_id: pod_sandbox_id.to_string(), port: ports };
        Ok(timed("port_forward", self.runtime.clone().port_forward(req)).await?.url)
    }

    pub async fn update_container_resources(&self, id: &str, linux: api::LinuxContainerResources) -> Result<()> {
        let req = api::UpdateContainerResourcesRequest {
            container_id: id.to_string(),
            linux: Some(linux),
            ..Default::default()
        };
        timed("update_container", self.runtime.clone().update_container_resources(req)).await.map(drop)
    }

    pub async fn container_stats(&self, id: &str) -> Result<Option<api::ContainerStats>> {
        let req = api::ContainerStatsRequest { container_id: id.to_string() };
        Ok(timed("container_stats", self.runtime.clone().container_stats(req)).await?.stats)
    }

    pub async fn list_container_stats(&self) -> Result<Vec<api::ContainerStats>> {
        let req = api::ListContainerStatsRequest { filter: None };
        Ok(timed("list_container_stats", self.runtime.clone().list_container_stats(req)).await?.stats)
    }

    pub async fn reopen_container_log(&self, id: &str) -> Result<()> {
        let req = api::ReopenContainerLogRequest { container_id: id.to_string() };
        timed("reopen_container_log", self.runtime.clone().reopen_container_log(req)).await.map(drop)
    }

    // ---- ImageService ----

    /// Pull `image` (with registry credentials when the pod has pull secrets); returns the image ref.
    pub async fn pull_image(
        &self,
        image: &str,
        auth: Option<api::AuthConfig>,
        sandbox_config: Option<api::PodSandboxConfig>,
    ) -> Result<String> {
        let req = api::PullImageRequest {
            image: Some(api::ImageSpec { image: image.to_string(), ..Default::default() }),
            auth,
            sandbox_config,
        };
        Ok(timed("pull_image", self.images.clone().pull_image(req)).await?.image_ref)
    }

    /// The image, or `None` when the runtime does not have it (CRI answers an empty response).
    pub async fn image_status(&self, image: &str) -> Result<Option<api::Image>> {
        let req = api::ImageStatusRequest {
            image: Some(api::ImageSpec { image: image.to_string(), ..Default::default() }),
            verbose: false,
        };
        Ok(timed("image_status", self.images.clone().image_status(req)).await?.image)
    }

    pub async fn list_images(&self) -> Result<Vec<api::Image>> {
        let req = api::ListImagesRequest { filter: None };
        Ok(timed("list_images", self.images.clone().list_images(req)).await?.images)
    }

    pub async fn remove_image(&self, image: &str) -> Result<()> {
        let req = api::RemoveImageRequest { image: Some(api::ImageSpec { image: image.to_string(), ..Default::default() }) };
        timed("remove_image", self.images.clone().remove_image(req)).await.map(drop)
    }

    pub async fn image_fs_info(&self) -> Result<api::ImageFsInfoResponse> {
        timed("image_fs_info", self.images.clone().image_fs_info(api::ImageFsInfoRequest {})).await
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cri_method_names() {
        assert_eq!(super::cri_method("run_podsandbox"), "RunPodSandbox");
        assert_eq!(super::cri_method("podsandbox_status"), "PodSandboxStatus");
        assert_eq!(super::cri_method("exec_sync"), "ExecSync");
    }
}
